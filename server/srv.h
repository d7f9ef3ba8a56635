/*
 * srv.h — lf-server internals shared by its source files (not a library
 * header: nothing outside server/ includes it). The pipeline's own
 * structures (cache entries, readers, queues) are in stages.h, which only
 * the stage files include.
 *
 * Threads and what they own:
 *   control   (control.c)  the ZeroMQ ROUTER, the fd socket (both set up in
 *                          endpoint.c), client sessions,
 *                          READY/END sending, metrics replies (their
 *                          JSON: stat.c)
 *   planner   (planner.c)  steps of lf_plan -> one job per local rank,
 *                          waits for a free slot, pins the job's blocks
 *                          (cache.c)
 *   catch-up  (catchup.c)  one per rejoined rank while it catches up: its
 *                          own lf_plan from the rank's saved position to
 *                          where the planner is, jobs for that rank only
 *   readers   (read.c)     stored block bytes via io_uring or pread
 *   workers   (pipeline.c) verify + decompress blocks into the cache
 *                          (decode.c), and assemble complete jobs straight
 *                          into ring slots (assemble.c)
 *
 * Locking, the one rule for every file: srv.mu guards every list, queue,
 * count and cache field, here and in stages.h; the reads, the
 * decompression, the assembly and the scout's walk run without it, on
 * memory that the state machine hands to exactly one thread at a time (a
 * QUEUED entry to one reader, a DECODING entry to one worker, a job to one
 * assembler; the scout's plan copy and counts are the planner's). The
 * control thread learns about finished jobs through an eventfd.
 */
#ifndef LF_SRV_H
#define LF_SRV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "lf_ipc.h"
#include "lf_layout.h"
#include "lf_plan.h"
#include "lf_shard.h"
#include "lf_tf.h"
#include "lf_wire.h"
#include "mix_cli.h"
#include "plan_cli.h"
#include "timeline.h"

#define SRV_MAX_RANKS 256
#define SRV_QUARANTINE_LIST 32   /* quarantined blocks, and images, named in the summary */
/* --epochs at most: start-up walks at most epoch 0 (the prepass), the
 * planner each epoch while serving (once, by a scout). 2^16 is
 * far above real schedules (hundreds to a few thousand epochs) and
 * refuses a slip such as 4294967295 (-1 wrapped); a longer schedule is
 * served by consecutive runs started at --epoch E. */
#define SRV_MAX_EPOCHS 65536u
/* The last epoch number a run may reach: step keys (srv_pos_key) hold
 * epochs in 24 bits, and later ones would share keys with it. */
#define SRV_EPOCH_MAX ((1u << 24) - 1)

/* Ring slots of each rank kept for eval batches (--eval-data): the ring's
 * last ones, never a training batch's, so a pass neither waits for the
 * training batches filled ahead nor moves them. Two: one the trainer
 * holds, one being filled. */
#define SRV_EVAL_SLOTS 2

typedef struct srv_config {
    mix_cli mix;                 /* --data (several: a mixture) and --weight */
    const char *eval_dir;        /* --eval-data: held-out samples, a pass on demand */
    const char *endpoint;        /* NULL: default */
    const char *job;             /* --job: names the default endpoint (NULL: from the environment) */
    uint32_t world;
    uint32_t nlocal;             /* local ranks */
    uint32_t local[SRV_MAX_RANKS]; /* their global ranks, ascending */
    uint32_t epochs;             /* epochs to serve */
    plan_cli cli;                /* the plan options as given (shared with lf-plan) */
    lf_plan_params plan;         /* completed from the data; plan.epoch = first epoch */
    uint32_t token_dtype;        /* LF_DTYPE_I32, I64, U16 or U32 */
    int64_t pad_id;
    int micro_batches;           /* tokens, pad: deliver the plan's micro-batches */
    lf_tf_image_params image;    /* image datasets: crop/resize/normalize */
    uint32_t readers, workers;   /* threads per stage */
    int io_uring;                /* 1: io_uring (fallback to pread), 0: pread */
    int io_forced;               /* --io given: no silent fallback */
    uint32_t slots;              /* ring depth per rank */
    uint32_t read_depth;         /* reads in flight per reader */
    uint64_t memory_limit;       /* rings + cache + read buffers, bytes */
    uint32_t heartbeat_ms;
    uint32_t stall_ms;           /* a rank holding a batch this long stalls the run; 0: never */
    uint32_t uring_fault_pct;    /* test hook LF_TEST_URING_FAULTS=PCT,SEED (0: off) */
    int uring_stuck;             /* test hook LF_TEST_URING_FAULTS=stuck */
    uint64_t uring_fault_seed;
    int skip_corrupt;            /* --on-corrupt=skip: drop a bad block's samples */
    int print_plan;              /* dry run: print the local ranks' plan, exit */
    int quiet;
} srv_config;

/* Counters: written under srv.mu (lf-stat copies them under it), the
 * *_ns times of START and READY only by the control thread that reads them. */
typedef struct srv_metrics {
    uint64_t bytes_read, blocks_read, blocks_decoded, cache_hits, cache_misses;
    uint64_t evictions;          /* still-wanted blocks dropped for room */
    uint64_t blocks_done;        /* blocks freed with no sample pending */
    uint64_t read_busy_ns, decode_busy_ns, assemble_busy_ns, plan_busy_ns;
    /* CPU time of each thread kind, added as each thread ends: busy times
     * are wall time and include waiting for a core on a loaded machine. */
    uint64_t plan_cpu_ns, read_cpu_ns, worker_cpu_ns;
    uint64_t batches, samples;
    uint64_t uring_retries;      /* io_uring reads resubmitted (short, -EAGAIN) */
    uint64_t uring_injected;     /* of them, faked by LF_TEST_URING_FAULTS */
    uint64_t quarantined_blocks; /* --on-corrupt=skip: blocks that failed to decode */
    uint64_t quarantined_samples; /* samples left out of batches, each time left out */
    uint64_t quarantined_images; /* --on-corrupt=skip: JPEGs the transform refused (distinct) */
    uint64_t started_ns;         /* every local rank sent START (control thread) */
    uint64_t last_ready_ns;      /* the last READY was sent (control thread) */
    uint64_t planner_slot_wait_ns; /* the planner waited for a free slot, any ring */
    uint64_t source_tokens[LF_PLAN_MAX_SOURCES]; /* a mixture: tokens delivered per
                                    source, all local ranks (control thread) */
} srv_metrics;

typedef struct srv_rank_metrics {
    uint64_t batches, samples, tokens;
    double cost;                 /* summed over the run: with costs in FLOPs
                                    it passes 2^64 (exact below 2^53) */
    uint64_t wait_ns, compute_ns, steps_reported; /* the client's STEP reports */
    uint64_t sync_ns, sync_steps; /* of them, the steps that reported a sync wait */
    uint64_t compute_costed_ns;  /* compute of the steps whose planned cost is known */
    double cost_reported;        /* and that planned cost (observe.c) */
    uint64_t planner_wait_ns;    /* the planner waited for a free slot of this ring */
} srv_rank_metrics;

/* One step of a rank as its trainer reported it (observe.c). */
typedef struct srv_step_fig {
    uint32_t epoch;
    uint64_t step;
    uint64_t wait_ns, compute_ns, sync_ns; /* sync_ns 0 where not reported */
    double cost;                 /* planned; -1: not known */
} srv_step_fig;

#define SRV_LATE_STEPS 3         /* a rank's slowest steps, kept for its report */

/* A rank's reported steps summed up for its end-of-run report: how far
 * measured compute follows planned cost, and its slowest steps. */
typedef struct srv_step_stats {
    uint64_t n;                  /* steps with compute and a planned cost */
    double sx, sy, sxx, syy, sxy; /* planned cost x, compute y (ms): correlation */
    double ratio_sum, ratio_max; /* compute per planned cost, a step */
    srv_step_fig late[SRV_LATE_STEPS]; /* slowest by data wait + compute + sync */
    uint32_t nlate;
} srv_step_stats;

/* What the trace keeps (trace.c): each rank's newest reported steps and
 * each stage thread's newest spans, in rings allocated at start-up and
 * touched only as they fill (at most ~1.4 MiB a rank, 0.5 MiB a thread). */
#define SRV_TRACE_STEPS 16384
#define SRV_TRACE_SPANS 16384
enum { SRV_STAGE_READ, SRV_STAGE_DECODE, SRV_STAGE_ASSEMBLE, SRV_STAGE_RING_WAIT, SRV_STAGES };

/* A ring of one stage thread's newest spans (under mu). */
typedef struct srv_span_log {
    tl_span *v;                  /* SRV_TRACE_SPANS entries */
    uint64_t n;                  /* spans so far; the latest at (n - 1) % size */
} srv_span_log;

#define SRV_OBS_RECENT 64        /* READYs a STEP report may lag behind (ring and
                                    device slots together stay far below) */

/* Where a rank's time goes as the server sees it (observe.c; control
 * thread, under mu). "Held" is a batch handed out by READY and not released
 * yet. While a rank holds none, its trainer waits for data or is about to:
 * that time is split by what the planner was doing, waiting for another
 * rank's free slot (held back: lock-step backpressure) or not (the data
 * path: read, decode, assembly, cache room). */
typedef struct srv_rank_obs {
    uint32_t held;
    uint64_t empty_since_ns;     /* holding none since (0: holds some, or not yet) */
    uint64_t waits_all, waits_own; /* srv_planner_waits at empty_since_ns */
    uint64_t held_back_ns, data_path_ns; /* over the closed stretches */
    uint32_t epoch;              /* the last batch handed out */
    uint64_t step;
    int stalled;                 /* held a batch past --stall-ms (control.c) */
    struct {                     /* the latest batches handed out, by READY: */
        uint32_t epoch;          /* a STEP report names its step, and the */
        uint64_t step;           /* step's planned cost is looked up here */
        double cost;
        uint32_t samples;        /* (and its samples and tokens, for the trace) */
        uint64_t tokens;
    } recent[SRV_OBS_RECENT];
    uint64_t nrecent;            /* READYs so far; the latest at (nrecent - 1) % size */
    srv_step_stats steps;
    tl_step *trace;              /* the newest SRV_TRACE_STEPS reported steps (trace.c), */
    uint64_t ntrace;             /* t_start on the node's clock; steps reported so far */
} srv_rank_obs;

typedef struct cache_entry cache_entry;
typedef struct srv_job srv_job;

/* A job's place in the waiter list of one block it is missing. */
typedef struct srv_job_wait {
    srv_job *job;
    struct srv_job_wait *next;
} srv_job_wait;

/* One distinct block a job takes samples from. */
typedef struct srv_job_block {
    uint64_t id;                 /* the block's number */
    uint32_t nsamples;           /* how many of the job's samples it holds */
    cache_entry *entry;          /* its cache entry, once pinned */
    srv_job_wait wait;           /* the job's link in that entry's waiter list */
} srv_job_block;

struct srv_job {
    uint32_t li;                 /* local rank index */
    uint32_t epoch;
    uint64_t step, seq;
    uint32_t slot;
    uint32_t n;                  /* samples, in layout order */
    uint64_t *ids, *lengths;
    uint32_t *row_of;            /* pack: each sample's row; micro: its micro-batch */
    uint32_t rows, row_len;      /* micro: rows = micro-batches */
    uint32_t *micro_len;         /* --micro-batches: each micro-batch's padded length */
    uint64_t cost, tokens;
    uint64_t step_tokens;        /* the step's tokens over every rank (slot header) */
    uint32_t nblocks;            /* distinct blocks, in block order */
    srv_job_block *blocks;
    uint32_t *block_of;          /* per sample: its block's index in blocks */
    uint32_t missing;            /* blocks not decoded yet */
    int done;                    /* assembled into its slot */
    int discard;                 /* rank gone (assemble nothing) or assembly failed */
    int eval;                    /* a batch of an eval pass: an eval slot, its own seq */
    int counts;                  /* its samples count off the pending counts */
    srv_job *next;               /* in-flight list of its rank, seq order */
};

typedef struct srv_rank {
    uint32_t rank;
    int memfd;
    unsigned char *seg;          /* mapped segment */
    uint64_t seg_size;
    uint32_t *free_slots;        /* stack of free slot numbers */
    uint32_t nfree;
    srv_job *jobs_head, *jobs_tail; /* in flight or waiting to be announced */
    uint64_t next_seq;           /* planner: seq of the next job */
    int started, gone, ended;    /* START seen; client left or died; END sent */
    uint32_t start_epoch;
    uint64_t start_step;
    /* Step keys (srv_pos_key): where this rank's stream starts, the next
     * step the planner decides for it, and the first step whose samples
     * have not been counted off the cache's pending counts yet. */
    uint64_t from_key, planner_key, counted_key;
    uint32_t catchup_gen;        /* nonzero: a catch-up thread feeds the rank (or,
                                    the rank gone, counts off what the planner
                                    left to it) */
    uint32_t catchup_thread;     /* the generation whose thread was started last */
    /* --eval-data: the eval pass's lane beside the training one (eval.c):
     * its own slots (the ring's last SRV_EVAL_SLOTS), jobs, sequence */
    uint32_t eval_free[SRV_EVAL_SLOTS]; /* stack of free eval slot numbers */
    uint32_t eval_nfree;
    srv_job *eval_head, *eval_tail; /* in flight or waiting to be announced, seq order */
    uint64_t eval_next_seq;      /* from 0 each pass */
    uint32_t eval_gen;           /* the pass's number: a thread of an older one stops */
    int eval_on;                 /* a pass was asked for and its EVAL_END not sent */
    int eval_planned;            /* its thread made the pass's last job */
    srv_rank_metrics m;
    srv_rank_obs obs;
} srv_rank;

typedef struct srv srv;

struct srv {
    srv_config cfg;
    lf_dataset *ds;              /* with --eval-data, the training data then the held-out
                                    set as one dataset (lf_dataset_join): one
                                    reader, cache and assembly for both */
    uint64_t train_samples;      /* the training samples: ids 0 .. train_samples - 1, the
                                    held-out ones after them */
    uint64_t train_blocks;       /* their blocks, likewise first */
    uint32_t eval_slots;         /* SRV_EVAL_SLOTS with --eval-data, else 0 */
    uint32_t eval_steps;         /* each rank's batches in an eval pass */
    lf_plan_sample *eval_set;    /* the held-out samples as each pass's plan takes them
                                    (listed once, by the prepass; read-only after) */
    int images;                  /* 1: the cost field is a JPEG (image path) */
    int frames;                  /* 1: the cost field is a frame array */
    uint32_t frame_dtype;        /* LF_DTYPE_F16 / F32 / I16 */
    uint32_t frame_width;        /* values per frame */
    uint32_t token_field;        /* schema field of the tokens or the JPEG */
    uint32_t token_in_dtype;     /* LF_DTYPE_U16 / U32 */
    uint64_t piece_len;          /* a plan id's piece k starts at token k x this
                                    (lf_plan_piece_len; 0: nothing is split) */
    int pieces;                  /* some sample is longer: token batches carry
                                    sample_offsets (each one's first token) */
    int mixture;                 /* several sources: batches carry `source` (int32
                                    per sample, its --data's number) */
    uint64_t plan_samples;       /* what an epoch places: samples, a longer one
                                    counted once per piece */
    int label_field;             /* image path: an int64 label field, or -1 */
    uint32_t extra_field[LF_MAX_FIELDS]; /* token path: the per-token and per-sample
                                    (label_i64) fields served beside the tokens */
    uint32_t nextras;
    uint64_t slot_size;
    uint64_t plan_id;            /* the sequence (saved states carry it) */
    uint64_t base_id;            /* plan_id with the mixture's weights left out:
                                    a state saved under other weights resumes at
                                    an epoch boundary (control.c, start_refusal) */
    plan_cli cli_given;          /* cfg.cli before plan_cli_finish: pad's cut, deferred
                                    to the prepass, completes it again (main.c) */
    double cut_figure;           /* epoch 0's first steps uncut (the prepass's
                                    prefix): sum-max/sum-mean */
    lf_plan *spare;              /* start-up's plan, at its first epoch's start:
                                    made by srv_plan_identify, walked by the
                                    prepass's first share, then the planner's
                                    (one lf_plan_create, not three: each is
                                    seconds at 10^7 samples); NULL once taken */
    void *spare_start;           /* its state at that start, to rewind it */
    long spare_start_size;
    lf_plan_cut *cut;            /* their cut into pieces, made once for every
                                    plan (cfg.plan.view.cut; NULL: none cut),
                                    freed with plan_input */
    plan_cli_input plan_input;   /* the samples as every plan reads them, in place
                                    (cfg.plan.view: the training samples' part),
                                    opened by finish_plan and kept, with the
                                    dataset, until srv_plan_spare_free at the end,
                                    after every plan that reads it is freed */
    uint64_t fingerprint;        /* plan_id, the blocks and the epochs served:
                                    every node's server of a job must have the same */
    uint64_t cache_limit;        /* bytes of decompressed blocks */
    uint32_t *epoch_uses;        /* prepass: per epoch and block, the local
                                    ranks' samples, for the first counted_epochs
                                    (none for a capped plan: its scouts count) */
    uint32_t counted_epochs;
    uint32_t *epoch_steps;       /* the steps (each rank's batches) of the run's first
                                    min(epochs, LF_WIRE_EPOCHS_MAX) epochs: WELCOME's and
                                    EPOCH's, the first epochs_planned of them known */
    uint32_t epochs_planned;     /* epoch_steps known: the prepass's, then one more as
                                    the planner reaches each epoch (under mu) */
    uint64_t later_cap;          /* a capped plan (srv_plan_prepass): the padded
                                    tokens no rank gets more of in a step, from
                                    epoch 0 on (lf_plan_cap_later); 0: every
                                    epoch walked */
    srv_rank ranks[SRV_MAX_RANKS];

    pthread_mutex_t mu;
    pthread_cond_t cv_plan;      /* planner: a slot or cache room freed, start */
    pthread_cond_t cv_read;      /* readers: work or a buffer freed */
    pthread_cond_t cv_work;      /* workers: a block to decode or a job to assemble */
    pthread_cond_t cv_catchup;   /* catch-up threads: a slot or cache room freed, stop */
    pthread_cond_t cv_decode;    /* workers waiting for a decode loan: one given back, stop */
    int notify_fd;               /* eventfd: wakes the control thread */
    atomic_int notify_pending;   /* a wake-up the control thread has not taken */
    int stop;                    /* shutting down */
    int failed;                  /* a fatal pipeline error happened */
    int serving;                 /* the pipeline started: a summary is due */
    /* Start-up planning (startup.c): the prepass's progress, read by the
     * start-up thread, and its stop on a signal. */
    atomic_uint_fast64_t plan_total; /* samples x epochs to walk; 0: not yet */
    atomic_uint_fast64_t planned;    /* of them walked so far */
    atomic_int startup_stop;         /* a signal came: stop planning */
    char fail_msg[600];
    int all_started;             /* every local rank sent START */
    int planner_done;            /* every epoch planned */
    uint32_t start_epoch;        /* agreed resume position */
    uint64_t start_step;

    uint64_t quarantine[SRV_QUARANTINE_LIST]; /* the first quarantined blocks */
    uint64_t refused[SRV_QUARANTINE_LIST];    /* the first quarantined images (sample ids) */
    struct srv_pipeline *pl;     /* the pipeline's own state (stages.h) */
    srv_span_log *spans[SRV_STAGES]; /* trace.c: per stage, a log per thread: readers,
                                    workers (decode), workers (assemble), the planner */
    srv_metrics m;
};

/* pipeline.c: the pipeline's threads (the stages' own functions: stages.h) */
int srv_pipeline_init(srv *s);   /* not under mu */
int srv_pipeline_start(srv *s);  /* not under mu */
void srv_pipeline_stop(srv *s);  /* joins threads, frees everything (takes mu) */

typedef struct srv_depths {
    uint32_t read_q, decode_q, assemble_q, jobs_in_flight;
    uint64_t cache_bytes;
} srv_depths;
void srv_pipeline_depths(const srv *s, srv_depths *d); /* under mu */

/* planner.c */
void srv_free_slot(srv *s, uint32_t li, uint32_t slot); /* under mu */
/* The planner's waits for a free slot so far, now included: in any ring
 * (*all) and in rank li's (*own). Under mu. */
void srv_planner_waits(const srv *s, uint32_t li, uint64_t now, uint64_t *all, uint64_t *own);
void srv_job_free(srv_job *j);   /* accepts NULL */

/* The slots of a rank's ring: training's, then the eval slots. */
uint32_t srv_ring_slots(const srv *s);

/* eval.c: the eval passes */
/* Starts rank li's next eval pass (under mu): 0, -EBUSY (one is under way)
 * or -errno. */
int srv_eval_begin(srv *s, uint32_t li);
/* A rank gone: its pass stops (under mu). */
void srv_eval_gone(srv *s, uint32_t li);

/* catchup.c */
void srv_rank_gone(srv *s, uint32_t li);                /* under mu */
/* A new client for a gone rank (under mu): once started, jobs of the rank
 * come from a catch-up thread (rejoin = 1) until it reaches the planner. */
void srv_rank_attach(srv *s, uint32_t li, int rejoin);
/* Starts rank li's catch-up from its START position (not under mu). */
int srv_rank_catch_up(srv *s, uint32_t li);

/* cache.c */
/* Orders positions: (epoch, step) as one number; a step past an epoch's
 * last sorts before every step of the next epoch. Epochs past
 * SRV_EPOCH_MAX (a client's START may name any) take its key. */
uint64_t srv_pos_key(uint32_t epoch, uint64_t step);

/* plan.c */
/* The balancer's status codes (LF_PLAN_E_*) as errno values: the server
 * reports every error with strerror, so none is read in the wrong space. */
int srv_plan_errno(int status);
int srv_plan_create(const srv *s, lf_plan **out);
int srv_plan_create_at(const srv *s, uint32_t e, lf_plan **out); /* epoch index e on */
/* The planner's plan: start-up's (s->spare), rewound, or a new one. Call
 * from the thread that started the server, before the others run. */
int srv_plan_first(srv *s, lf_plan **out);
/* Frees start-up's plan where nothing took it. */
void srv_plan_spare_free(srv *s);  /* and plan_input */
/* A plan id as lf-server --print-plan and lf-rank-loop --out write it: the
 * sample id, and ID@OFFSET for a piece of a sample (plan.c). */
void srv_print_id(FILE *f, uint64_t id, uint64_t piece_len, char sep);
/* Creates the run's first plan and sets s->plan_id and s->fingerprint
 * from it and the dataset's blocks; parameters
 * the balancer refuses are reported in its own words (-ECANCELED:
 * reported). Later plans of the run have the same inputs, and only memory
 * can fail them. */
int srv_plan_identify(srv *s);
int srv_plan_prepass(srv *s);    /* slot size and each epoch's block uses */
/* The run's first epoch's report (its balance, outliers, what it leaves
 * out), which the prepass prints, and for a capped plan the scout that
 * walks epoch 0 while it is served (planner.c): every step of the epoch
 * added in order, then printed at its end with the plan (srv_report_print
 * frees it; srv_report_free where it is not printed). NULL: no memory. */
typedef struct srv_report srv_report;
srv_report *srv_report_new(srv *s);
void srv_report_step(srv_report *r, const lf_plan_step *st);
void srv_report_print(srv_report *r, const lf_plan *p);
void srv_report_free(srv_report *r);
/* The eval passes' plan over the held-out samples: the run's parameters,
 * epoch 0, the same in every pass. */
int srv_plan_eval_create(const srv *s, lf_plan **out);
int srv_job_layout(const srv *s, const srv_job *j, lf_layout *l);
/* The tensor dtype of a per-token field type (LF_FIELD_PER_TOKEN_*). */
uint32_t srv_extra_dtype(uint32_t field_type);
int srv_print_plan(srv *s);

/* endpoint.c: where the server is reached (the control thread's) */
typedef struct srv_endpoint {
    void *zctx, *router;         /* the ZeroMQ ROUTER on ipc://path */
    int lockfd, listenfd, sigfd; /* path.lock (held), the fd socket, SIGINT/SIGTERM */
    char path[LF_IPC_PATH_MAX + 1], fd_path[LF_IPC_PATH_MAX + 8];
} srv_endpoint;
/* Takes the lock, binds both sockets and opens the signal descriptor (for
 * SIGINT and SIGTERM, which the caller blocks) of --endpoint (NULL: the
 * default, named for --job: lf_ipc_endpoint). Returns 0, -ECANCELED
 * (reported) or -errno (not yet reported). The descriptors start at -1
 * (the caller's initialiser). */
int srv_endpoint_open(const char *endpoint, const char *job, srv_endpoint *e);
/* One request read off the ROUTER: who sent it, and the decoded message
 * (its text points into buf). */
#define SRV_ID_MAX 256           /* ZeroMQ routing id, bytes */
typedef struct srv_request {
    unsigned char id[SRV_ID_MAX];
    size_t idlen;
    unsigned char buf[LF_WIRE_MAX];
    lf_msg msg;
} srv_request;
/* Reads the next well-formed request into *q: 1, or 0 when none waits.
 * A malformed one is answered with ERROR and skipped. One thread at a
 * time: the start-up thread while the server plans, then the control thread. */
int srv_endpoint_recv(srv_endpoint *e, srv_request *q);
/* Sends m to the peer `id` without waiting: 0 or -errno. */
int srv_endpoint_send(srv_endpoint *e, const unsigned char *id, size_t idlen, const lf_msg *m);
void srv_endpoint_send_error(srv_endpoint *e, const unsigned char *id, size_t idlen, int code,
                             const char *text);
/* Closes what srv_endpoint_open made and removes its sockets and lock. */
void srv_endpoint_close(srv_endpoint *e);
/* The socket path of --endpoint (NULL: the default for --job) into path
 * (cap bytes); 0, or <0 with the reason printed (checked at start-up,
 * before planning). */
int srv_endpoint_path(const char *endpoint, const char *job, char *path, size_t cap);

/* job.c: the local ranks and the world, from the flags, else the launcher's
 * environment (torchrun, Open MPI, Slurm) */
typedef struct srv_job_flags {
    const char *ranks;           /* --ranks LIST; NULL: not given */
    uint32_t node_rank, per_node, world;
    int have_node_rank, have_per_node, have_world; /* which of them were given */
} srv_job_flags;
/* Sets c->world, c->nlocal and c->local from the flags and, for those not
 * given, the environment, and says where each came from (unless
 * c->quiet). Returns 0, or -1 with the reason printed. */
int srv_job_resolve(srv_config *c, const srv_job_flags *f);
/* The local ranks as ranges ("0-3", "0,2,5-7") into buf. */
void srv_format_ranks(const srv_config *c, char *buf, size_t cap);

/* startup.c: the endpoint's answers while the server plans */
typedef struct srv_startup {
    srv *s;
    srv_endpoint *ep;
    pthread_t thread;
    int running;                 /* the thread was started */
    atomic_int done;             /* srv_startup_end: hand the sockets over */
    int signal;                  /* SIGINT or SIGTERM that came meanwhile, or 0 */
    uint64_t start_ns;
} srv_startup;
/* Starts answering on ep (opened); 0 or -errno. */
int srv_startup_begin(srv *s, srv_endpoint *ep, srv_startup *u);
/* Stops answering (the control thread takes the sockets over); returns the
 * signal that came meanwhile, or 0. Does nothing if not begun. */
int srv_startup_end(srv_startup *u);

/* control.c */
/* Serves on ep until the run is over; ep stays the caller's to close. */
int srv_control_run(srv *s, srv_endpoint *ep);

/* observe.c (every function under mu) */
void srv_obs_start(srv *s, uint32_t li, uint64_t now); /* START: no batch out yet */
/* A batch of rank li handed out by READY: job j's. */
void srv_obs_ready(srv *s, uint32_t li, const srv_job *j, uint64_t now);
/* A STEP report of rank li's trainer, come at `now`: its figures, paired
 * with the step's planned cost, and kept for the trace. */
void srv_obs_step(srv *s, uint32_t li, const lf_msg_step *m, uint64_t now);
void srv_obs_release(srv *s, uint32_t li, uint64_t now);
void srv_obs_gone(srv *s, uint32_t li);
/* Rank li's time holding no batch so far, now included, split into held
 * back by the planner's wait for another ring and the data path. */
void srv_obs_empty(const srv *s, uint32_t li, uint64_t now, uint64_t *held_back,
                   uint64_t *data_path);
/* The local rank whose ring the planner waited for longest (held the
 * others back), other than li; -1: none. */
int srv_obs_holder(const srv *s, uint32_t li);
/* Measured compute per unit of planned cost over the local ranks that
 * reported both; 0 where fewer than two did (nothing to compare with). */
double srv_obs_compute_per_cost(const srv *s);
/* The end-of-run report of rank li, lines of text into buf (cut at cap):
 * its shares of data wait, compute and sync wait, how far its compute
 * follows planned cost, its slowest steps and why. */
void srv_obs_report(const srv *s, uint32_t li, char *buf, size_t cap);
/* The local rank the others wait for: the most time a step in its own
 * work (compute and its data path, *ms); -1 where none reported. */
int srv_obs_late_rank(const srv *s, double *ms);

/* trace.c: the run's trace and chart for the trainers (lf_client_trace) */
int srv_trace_init(srv *s);      /* the rings (not under mu); -ENOMEM */
void srv_trace_free(srv *s);     /* accepts a server whose init failed */
/* Thread `thread` of a stage spent [t0, t1) on one piece of work; a and b
 * are its args (trace.c names them per stage). Under mu. */
void srv_trace_span(srv *s, int stage, uint32_t thread, uint64_t t0, uint64_t t1, uint64_t a,
                    uint64_t b);
/* The step a STEP report describes, on the rank's track (under mu). */
void srv_trace_step(srv *s, uint32_t li, const lf_msg_step *m, double cost, uint32_t samples,
                    uint64_t tokens, uint64_t now);
/* Writes the trace and the chart ("" or NULL: not wanted) of what the
 * rings hold, each path with the ranks' ".ranksA-B" where the server serves
 * only some ranks of the job. 0, or -errno with the reason in msg; msg
 * says what was written either way. Takes mu. */
int srv_trace_write(srv *s, const char *trace, const char *chart, char *msg, size_t cap);

/* stat.c */
/* What the control thread knows of a rank's client, for STATS. */
typedef struct srv_client_view {
    uint8_t connected;           /* a client holds the rank */
    uint64_t oldest_ns;          /* when its oldest held batch was handed out; 0: none */
} srv_client_view;
/* The JSON text of a STATS reply (malloc'ed; NULL: no memory). Takes mu. */
char *srv_stats_json(srv *s, uint64_t start_ns, const srv_client_view *views);
/* The share of the start-up plan walked, 0..99 (atomics, no lock). */
uint32_t srv_startup_pct(const srv *s);
/* While it plans: {"state": "planning", "planning_pct": N, ...} (no lock). */
char *srv_stats_planning_json(const srv *s, uint64_t start_ns);

/* util.c (calls no other file of server/) */
uint64_t srv_now_ns(void);       /* CLOCK_MONOTONIC */
/* Stops the server: the first failure's message is kept for the summary,
 * every thread is woken (takes mu: not under mu). */
void srv_fail(srv *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void srv_notify_control(srv *s); /* wakes the control thread (not under mu) */
void srv_add_metric(srv *s, uint64_t *counter, uint64_t v); /* takes mu */
void srv_add_thread_cpu(srv *s, uint64_t *sum); /* the thread's CPU time; takes mu */
/* The shard file holding sample id, for messages (through its block: the
 * dataset holds no per-sample table when opened mapped). */
const char *srv_sample_shard(const srv *s, uint64_t id);

/* The least the cache keeps: two of the dataset's largest blocks, so a
 * job can always run (start-up refuses a limit below it; decode memory
 * never takes it). */
uint64_t srv_cache_floor(const srv *s);

#endif
