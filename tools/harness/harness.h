/*
 * harness.h — the parts of lf-train (tools/harness), shared by its files.
 *
 *   main.c       options, per-sampler runs (spawning lf-server), the table
 *   train.c      one rank's loop: lf_next, model step, all-reduce, SGD,
 *                parameter check, per-step timings
 *   model_cpu.c  the model on the CPU (plain loops)
 *   model_cuda.cu the same model on a GPU (CUDA=1 builds only)
 *   report.c     report JSON, Chrome trace, SVG chart
 *   calibrate.c  --calibrate: times the model over a design of lengths,
 *                fits the cost model, writes the cost file
 */
#ifndef LF_HARNESS_H
#define LF_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the model ---------------------------------------------------------- */

typedef struct lt_config {
    int vocab;                   /* token ids are taken modulo vocab */
    int dim;                     /* embedding and attention width */
    int hidden;                  /* MLP width */
    int window;                  /* attention span: a sequence is cut in windows */
    uint64_t seed;               /* parameter initialisation */
} lt_config;

/* One sequence of a batch: `len` tokens starting at tokens[start]. */
typedef struct lt_seq {
    uint64_t start;
    uint32_t len;
} lt_seq;

/* The tokens of a batch, already converted to model ids. */
typedef struct lt_batch {
    const int32_t *tokens;
    const lt_seq *seqs;
    uint32_t nseqs;
} lt_batch;

/* Walks the windows of a batch: each sequence is cut into windows of at
 * most `window` (>= 2) tokens; a last piece of one token (no target) is
 * dropped. Start with it = {0}; returns the next window's length (0: no
 * more) and points *t at its tokens. */
typedef struct lt_window_iter {
    uint32_t seq;
    size_t off;
} lt_window_iter;
size_t lt_next_window(const lt_batch *b, size_t window, lt_window_iter *it, const int32_t **t);

/* Offsets of each tensor in the flat parameter vector (see model_cpu.c);
 * n is the parameter count. */
typedef struct lt_layout {
    size_t E, Wq, Wk, Wv, Wo, W1, b1, W2, b2, U, c, n;
} lt_layout;
lt_layout lt_layout_of(const lt_config *c);

/* Sizes of the flat parameter vector (the gradient vector has the same
 * layout plus LT_EXTRA trailing floats: loss sum, targets, active ranks). */
size_t lt_param_count(const lt_config *c);
#define LT_EXTRA 3

/* The CPU model. Parameters and gradients live in caller-visible host
 * arrays so MPI can reduce them in place. */
typedef struct lt_cpu lt_cpu;
int lt_cpu_create(const lt_config *c, lt_cpu **out);
void lt_cpu_free(lt_cpu *m);
float *lt_cpu_params(lt_cpu *m);
/* Forward and backward over a batch; adds the gradients of the summed
 * next-token loss into grads (zeroed by the caller) and returns the loss
 * sum and target count in grads[n], grads[n+1]. */
void lt_cpu_step(lt_cpu *m, const lt_batch *b, float *grads);
/* Checks the hand-written backward against central differences on a tiny
 * batch; returns the largest relative error over all parameters, or -1.
 * plant != 0 spoils one gradient component first (the check must see it). */
double lt_cpu_gradcheck(const lt_config *c, int plant);
/* params -= lr * grads / targets (targets = grads[n+1], reduced). */
void lt_sgd(float *params, const float *grads, size_t n, float lr);

/* The GPU model (model_cuda.cu; only with CUDA=1). The same contract, with
 * parameters and gradients in device memory and NCCL for the reduction. */
typedef struct lt_gpu lt_gpu;
/* Returns 0, or -1 with a message in why (no device, CUDA or NCCL error). */
int lt_gpu_create(const lt_config *c, int device, int rank, int world,
                  const void *nccl_id, lt_gpu **out, char *why, size_t why_size);
void lt_gpu_free(lt_gpu *m);
size_t lt_gpu_nccl_id_size(void);
int lt_gpu_nccl_id(void *id, char *why, size_t why_size);
/* Forward/backward (grads zeroed inside), waits for the GPU; active is 0
 * for a rank without a batch. Returns 0 or -1. */
int lt_gpu_step(lt_gpu *m, const lt_batch *b, float active, char *why, size_t why_size);
/* All-reduce of the gradients (with loss, targets, active) and returns
 * them in extra[LT_EXTRA]; waits for completion. */
int lt_gpu_allreduce(lt_gpu *m, float *extra, char *why, size_t why_size);
/* Copies the gradient vector (n + LT_EXTRA floats) to host, for the
 * GPU-against-CPU gradient check. */
int lt_gpu_grads(lt_gpu *m, float *host, char *why, size_t why_size);
/* SGD update, then copies the parameters to host (for the hash check). */
int lt_gpu_sgd(lt_gpu *m, float lr, float *host_params, char *why, size_t why_size);
/* A device's name for the report. */
int lt_gpu_name(int device, char *name, size_t size);

typedef struct lt_run lt_run;

/* ---- one training run (train.c) ---------------------------------------- */

typedef struct lt_train_opts {
    lt_config model;
    int cuda;                    /* 0: CPU model + MPI_Allreduce, 1: GPU + NCCL */
    int sim;                     /* 1: a simulated accelerator: compute sleeps for
                                    sim_cost's time, the model does nothing */
    double sim_cost[4];          /* the hidden truth, ns: a per token, b per
                                    token^2, c0 per sample, d per batch */
    double sim_jitter;           /* relative standard deviation of a sim step */
    float lr;                    /* SGD learning rate */
    int log_every;               /* rank 0 prints the loss every N steps (0: never) */
    const char *endpoint;        /* the lf-server to take batches from */
    const char *batches;         /* per-rank batch log PREFIX.rR.txt, or NULL */
    int64_t fault_step;          /* planted fault: perturb a parameter of */
    int fault_rank;              /*   fault_rank after step fault_step (-1: none) */
    double cost[4];              /* cost model a, b, c0, d (planned cost per step) */
    int timeout_ms;              /* lf_next timeout */
    int64_t pad_id;              /* the server's --pad-id (pack layout) */
    /* Called before a rank ends the job with MPI_Abort (which skips the
     * caller's clean-up): a node's first rank stops the server it started. */
    void (*on_abort)(void *arg);
    void *on_abort_arg;
} lt_train_opts;

/* Trains until the server's plan ends. Collective over MPI_COMM_WORLD; on
 * rank 0 fills *run (rec is malloc'ed; the caller frees it). Returns 0, or
 * -1 after printing why (every rank returns -1 when parameters diverge). */
int lt_train(const lt_train_opts *o, lt_run *run);

/* ---- per-step records --------------------------------------------------- */

/* One rank's step. All times in ns; t_start relative to the run's zero. */
typedef struct lt_record {
    uint64_t t_start;            /* lf_next called */
    uint64_t data_ns;            /* in lf_next */
    uint64_t prep_ns;            /* the batch made model input, logged, released */
    uint64_t compute_ns;         /* forward + backward, wall clock */
    uint64_t compute_cpu_ns;     /* the same in this thread's CPU time (CPU model) */
    uint64_t reduce_ns;          /* in the all-reduce (sync wait + transfer) */
    uint64_t step_ns;            /* lf_next .. parameters updated */
    uint64_t tokens;             /* real tokens */
    uint64_t planned_cost;       /* c(L) summed over the batch + d per micro-batch,
                                    saturating at UINT64_MAX (cost model) */
    uint32_t nsamples;
    uint32_t epoch;
    uint64_t step;
    float loss;                  /* global mean loss of the step */
} lt_record;

/* A run's records gathered on rank 0: rec[step * ranks + rank]. */
struct lt_run {
    const char *sampler;
    const char *device;
    int ranks;
    uint64_t steps;
    lt_record *rec;
    uint64_t floor_steps;
    lt_record *floor;            /* floor[step * ranks + rank]: identical work on
                                    every rank (the noise floor), or NULL */
};

/* A noise-floor step after every so many training steps (train.c). */
#define LT_FLOOR_EVERY 4

/* The per-step sync wait of rank r: its all-reduce time beyond the
 * fastest rank's at the same step. */
uint64_t lt_sync_wait(const lt_run *run, uint64_t step, int rank);

typedef struct lt_summary {
    double tokens_per_s;
    double step_p50_ms, step_p99_ms;
    double sync_wait_fraction, data_wait_fraction;
    double imbalance_p50, imbalance_p99;   /* compute max / mean over ranks */
    double floor_p50, floor_p99;           /* the same over the floor steps, where
                                              every rank computed the same batch:
                                              measurement noise alone; 0: none */
    double epoch_imbalance;                /* Σ over every step of the slowest
                                              rank's compute ÷ Σ of the mean; 0:
                                              nothing measured */
    double tokens_min, tokens_p99, tokens_max;   /* each step's global tokens ÷
                                              the median step's; 0: not measured */
    double work_imbalance_p50;             /* the same in CPU time (CPU model) */
    double work_total_s;                   /* compute summed over ranks and steps
                                              (CPU time for the CPU model) */
    double loss_first, loss_last;          /* mean over the first / last 10% */
} lt_summary;

int lt_summarize(const lt_run *run, lt_summary *s);
int lt_write_report(const lt_run *run, const lt_summary *s, const char *path);
int lt_write_trace(const lt_run *run, const char *path);
int lt_write_chart(const lt_run *run, const char *path);
/* The compute a fit or a balance figure should see: CPU time where the
 * model ran on this CPU (immune to other processes sharing the cores),
 * else wall time (a GPU step's time is the device's). */
double lt_work_ns(const lt_record *x);

/* ---- calibration (calibrate.c) ------------------------------------------ */

/* Times forward + backward of the batches b[order[i]] in turn on this
 * rank's model (every rank at once, as in training) into ns[i] (lt_work_ns).
 * Collective; 0, or -1 on every rank when one failed (said why). */
int lt_time_batches(const lt_train_opts *o, const lt_batch *b, const uint32_t *order,
                    size_t norder, double *ns);

#define LT_CALIB_REPEATS_MAX 64
typedef struct lt_calib_opts {
    uint32_t min_len, max_len;   /* the design's lengths span these */
    int repeats;                 /* timings of each design point per rank,
                                    1..LT_CALIB_REPEATS_MAX */
    const char *cost_file;       /* written on rank 0, or NULL */
} lt_calib_opts;

/* --calibrate: times the model over a design of lengths and batch sizes,
 * fits c = a*L + b*L^2 + c0 per sample + d per batch, prints the fit with
 * its confidence and the terms it fixed, and writes the cost file.
 * Collective; 0 or -1 (every rank). */
int lt_calibrate(const lt_train_opts *o, const lt_calib_opts *c);

#ifdef __cplusplus
}
#endif
#endif
