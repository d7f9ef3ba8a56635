/*
 * levelfeed.h — the client library a training rank links to get its
 * batches from the node's lf-server.
 *
 *   lf_client_options o;
 *   lf_client_options_default(&o);          // rank etc. from the environment
 *   lf_client *c;
 *   int rc = lf_client_open(&o, &c);
 *   lf_batch b;
 *   while ((rc = lf_next(c, &b, -1)) == 0) {
 *       const lf_tensor *t = lf_batch_tensor(&b, "tokens");
 *       ... train on t->host ...
 *       lf_release(c, &b);
 *       lf_report_step(c, compute_ns);
 *   }
 *   // rc == LF_E_END once every epoch is delivered
 *   lf_client_close(c);
 *
 * Functions return 0 (or a byte count) on success and a negative code on
 * failure: -errno for system errors, or one of the LF_E_* codes below;
 * lf_strerror names any of them. Out-parameters are untouched on failure.
 * Nothing here prints, exits or aborts. A client belongs to one thread at a
 * time (with a device, the client's own prefetch thread works beside it).
 * Tensor memory stays valid until lf_release of its batch.
 */
#ifndef LEVELFEED_H
#define LEVELFEED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LF_CLIENT_VERSION 1

/* The release of levelfeed this header belongs to (MAJOR.MINOR.PATCH). The
 * pkg-config file and the Python package (levelfeed.__version__) carry the
 * same string; lf_version() says which release the loaded library is. */
#define LF_VERSION_STRING "0.1.0"

enum {
    LF_E_END = -20001,           /* every epoch has been delivered */
    LF_E_TIMEOUT = -20002,       /* no batch within the timeout (lf_client_error: why) */
    LF_E_SERVER = -20003,        /* the server reported an error (lf_client_error) */
    LF_E_GONE = -20004,          /* the server went away (or missed 10 heartbeats) */
    LF_E_PROTOCOL = -20005,      /* the server sent something malformed */
    LF_E_STATE = -20006,         /* a saved state is invalid or for another plan */
    LF_E_ORDER = -20007,         /* call not allowed now (e.g. restore after next) */
};

/* Element types: the values of transforms/lf_layout.h's lf_dtype. */
typedef struct lf_tensor {
    const char *name;            /* e.g. "tokens", "lengths", "sample_ids" */
    uint32_t dtype;              /* 1 u8, 2 i8, 3 u16, 4 i16, 5 u32, 6 i32, 7 u64,
                                    8 i64, 9 f16, 10 bf16, 11 f32, 12 f64 */
    uint32_t ndim;               /* dimensions in shape */
    const uint64_t *shape;       /* ndim sizes */
    uint64_t size;               /* bytes */
    void *host;                  /* the bytes, in the shared-memory ring; NULL on a device */
    void *device;                /* the bytes in device memory (lf_client_use_device), else NULL */
} lf_tensor;

typedef struct lf_batch {
    uint32_t epoch;
    uint64_t step;               /* step within the epoch */
    uint64_t seq;                /* batches delivered to this rank before this one */
    uint32_t nsamples;
    uint32_t ntensors;
    const lf_tensor *tensors;    /* valid until lf_release */
    uint64_t wait_ns;            /* time lf_next waited for this batch */
    uint32_t slot;               /* ring slot (for lf_release) */
    uint64_t step_tokens;        /* the step's tokens over every rank (sum of
                                    sample lengths), for a loss normalised by the
                                    global token count */
} lf_batch;

typedef struct lf_client_options {
    const char *endpoint;        /* "ipc://PATH", "PATH", or NULL for the default */
    int rank;                    /* global rank; -1: from RANK / OMPI_COMM_WORLD_RANK /
                                    PMI_RANK / SLURM_PROCID */
    int world_size;              /* -1: from WORLD_SIZE / OMPI_COMM_WORLD_SIZE / ... */
    int local_rank;              /* -1: from LOCAL_RANK / OMPI_COMM_WORLD_LOCAL_RANK / ... */
    int device;                  /* for lf_client_use_device; -1: local_rank (else 0) */
    int connect_timeout_ms;      /* how long open waits for the server to answer
                                    (0: 60 s, for a server not started yet:
                                    the endpoint is waited for); a server
                                    still planning its start-up answers, so
                                    it restarts the wait */
    char *error;                 /* optional: gets the reason when open fails */
    size_t error_size;
} lf_client_options;

/* Fills *o with defaults read from the environment (see fields). */
void lf_client_options_default(lf_client_options *o);

typedef struct lf_client lf_client;

/* Connects to the server, announces the rank and maps its ring, all within
 * connect_timeout_ms of the server's last answer: while the server plans
 * its start-up it answers "planning" and open keeps waiting. Returns 0, -EINVAL (no rank known), LF_E_TIMEOUT (no
 * server, or no ring in time), LF_E_GONE (the server closed the ring's
 * connection), LF_E_SERVER, ... */
int lf_client_open(const lf_client_options *o, lf_client **out);

/* Waits up to timeout_ms (-1: forever) for the next batch. Returns 0 and
 * fills *b, LF_E_END after the last batch, LF_E_TIMEOUT, or an error. Up to
 * the ring's slot count of batches (with a device, its depth) may be held
 * before releasing; asked for one more, lf_next returns LF_E_ORDER at once,
 * as nothing could arrive until a release. With a device the slots are
 * filled in turn: the batch after depth - 1 newer ones goes into the slot
 * of the oldest, so a held oldest batch also means LF_E_ORDER (release in
 * the order taken to keep depth batches in flight). */
int lf_next(lf_client *c, lf_batch *b, int timeout_ms);

/* Gives the batch's slot back to the server (or, on a device, to the
 * prefetcher: as lf_release_stream with the legacy default stream). */
int lf_release(lf_client *c, const lf_batch *b);

/* GPU delivery. Needs an NVIDIA driver at run time (libcuda.so.1) and
 * nothing at build time. Call after lf_client_open, before the first
 * lf_next; device -1 takes the options' device, depth 0 means 2 device
 * slots. From the first lf_next on, a thread of this client copies each
 * ready batch from the ring (registered as pinned memory) into the next
 * free device slot on its own stream and gives the host slot back to the
 * server; lf_next then returns tensors with `device` set and `host` NULL,
 * their copy complete (no wait on any stream needed). Returns 0, -ENODEV
 * (no driver or device; lf_client_error says which), LF_E_ORDER, -EIO. */
int lf_client_use_device(lf_client *c, int device, uint32_t depth);

/* Releases a device batch that work queued on `stream` (a CUstream /
 * cudaStream_t; NULL: the legacy default stream) still reads: its device
 * slot is refilled only after that work, without blocking this thread.
 * Without a device it is lf_release. */
int lf_release_stream(lf_client *c, const lf_batch *b, void *stream);

/* Reports the trainer's compute time for the last batch lf_next returned;
 * the server shows it next to the data-wait the client measured. One call,
 * one step (with a device, sent by its thread). LF_E_ORDER before any batch. */
int lf_report_step(lf_client *c, uint64_t compute_ns);

/* As lf_report_step, with the step's sync wait: the time the trainer waited
 * for the other ranks (DDP's all-reduce after its own backward was done),
 * not counted in compute_ns. Call it before the next lf_next. lf-stat shows
 * both next to the client's data wait; the server pairs them with the
 * step's planned cost, names the rank the others wait for, and sums them up
 * per rank at the end of the run. (LEVELFEED_1.3) */
int lf_report_step_sync(lf_client *c, uint64_t compute_ns, uint64_t sync_ns);

/* This rank's end-of-run report as the server has it (lf-server prints
 * every rank's at exit): its shares of data wait, compute and sync wait,
 * how far its compute followed the planned cost, its slowest steps and
 * why, in lines of text. Call after lf_next returned LF_E_END and the last
 * step was reported. Writes the text into buf, NUL-terminated, cut to fit
 * cap; returns its full length, or LF_E_ORDER (before the end),
 * LF_E_TIMEOUT (no answer within timeout_ms; -1: wait), LF_E_GONE, ...
 * (LEVELFEED_1.3) */
int lf_client_report(lf_client *c, char *buf, size_t cap, int timeout_ms);

/* The run as lf-train draws it, for this trainer's own job: asks the
 * node's lf-server to write a Chrome trace (opens in Perfetto) at
 * trace_path and an SVG chart at chart_path (either may be NULL, not
 * both; relative paths are taken from this process's working directory).
 * The server writes them, from what it has: a track per local rank (pid
 * 1, 2, ...) with each reported step's data wait, compute and sync wait
 * (lf_report_step / lf_report_step_sync: a rank that reports no step has
 * an empty track), and one more process with the server's stages, read,
 * decode, assemble and ring wait, a track per stage and thread; the chart
 * stacks each rank's steps. It waits until every rank the server serves
 * has asked too (each rank calls it with the same paths) or has left, so
 * that one trace holds them all; on a server that serves only some ranks
 * of the job (several nodes) the file names get ".ranksA-B" before their
 * extension. The newest 16384 steps of each rank and spans of each stage
 * thread are kept. Call it after the last step is reported: after
 * lf_next returned LF_E_END, or earlier when stopping early (with a device
 * only after LF_E_END: LF_E_ORDER before). Returns 0 once both are
 * written, LF_E_SERVER (the server could not: lf_client_error says which
 * file and why), LF_E_TIMEOUT (some rank neither asked nor left within
 * timeout_ms; -1: wait), -EINVAL, -ENAMETOOLONG, LF_E_GONE, ...
 * (LEVELFEED_1.4) */
int lf_client_trace(lf_client *c, const char *trace_path, const char *chart_path,
                    int timeout_ms);

/* Writes this rank's position (the batch after the last one lf_next
 * returned; before any, the restored one) into buf, with the plan it is a
 * position of (its id, its id without the mixture's weights, the weights).
 * Returns the byte count (LF_STATE_SIZE) or -ENOBUFS. A cap of 40 to
 * LF_STATE_SIZE - 1 (a program built against an older levelfeed.h, whose
 * LF_STATE_SIZE was 40) gets the 40 bytes of before, version 1, which
 * restore onto the unchanged plan only. */
#define LF_STATE_SIZE 184
long lf_state_save(const lf_client *c, void *buf, size_t cap);

/* Resumes from a saved state: must be called before the first lf_next.
 * The server's plan must be the saved one; or the same plan under other
 * mixture weights (lf-server --weight) where the state lies at an epoch
 * boundary (saved before an epoch's first batch or after its last): the
 * stream goes on at the next epoch's start, drawn under the new weights
 * (client/README.md, "Saved states"). Returns 0, LF_E_STATE (bad bytes,
 * another rank, another plan, or other weights inside an epoch:
 * lf_client_error says which, naming both weight sets), LF_E_ORDER. */
int lf_state_restore(lf_client *c, const void *buf, size_t len);

/* The message of the last LF_E_SERVER / LF_E_PROTOCOL / LF_E_TIMEOUT of
 * lf_next (never NULL; a timeout names the rank the server waits for when
 * one has not connected or not asked for a batch yet), as the
 * last lf_next, lf_release or lf_client_use_device left it: valid and
 * unchanged until the next of those calls or lf_client_close, whatever a
 * device's prefetch thread meets meanwhile. */
const char *lf_client_error(const lf_client *c);

/* The plan fingerprint of this rank's server: a hash of the dataset's index
 * (sample lengths, block layout) and of every parameter the global sequence
 * depends on (seed, world, epochs, budgets, layout, cost model, ...), the
 * same on every rank of a job exactly when all its nodes' servers plan the
 * same sequence. Trainers compare it across ranks at start (an all-gather:
 * docs/MULTINODE.md); lf-server prints it, lf-stat --json shows it. */
uint64_t lf_client_plan_id(const lf_client *c);

/* The number of batches this rank gets in `epoch` (every rank of the job
 * gets the same number, none empty), as the server planned it: the epochs
 * it planned at start-up (the first, or every one) told in WELCOME, each
 * later one told before its first batch, once the server has planned it
 * while serving the one before. LF_EPOCH_NEXT: the epoch of the batch the next
 * lf_next returns, from the position (after the last batch lf_next
 * returned, or the restored one; an epoch's end is the next epoch's start).
 * A stream restored mid-epoch delivers only the rest of that epoch.
 * Returns the count, LF_E_END when the next batch would come after the
 * server's last epoch (the plan is over), -ERANGE for an epoch the server
 * does not serve (before its --epoch or past its last), -EAGAIN for one
 * not told yet (lf_next's next batch of it brings its count first),
 * -ENODATA for an
 * epoch past the first 8192 of the server's run, whose counts WELCOME
 * does not carry (a longer schedule runs as consecutive servers started
 * at --epoch E, each telling its own). */
#define LF_EPOCH_NEXT (-1)
int64_t lf_client_epoch_batches(const lf_client *c, int64_t epoch);
/* As lf_client_epoch_batches, but where the count is not told yet
 * (-EAGAIN) reads the server's messages for up to timeout_ms (-1: until
 * it comes) without taking a batch: the batches that come meanwhile wait
 * for lf_next. A server counts the first epoch of a dataset larger than
 * start-up's prefix while serving it, so its count comes after start-up
 * (seconds to minutes at 10^9 samples). Returns the count, an error of
 * lf_client_epoch_batches, or LF_E_TIMEOUT (lf_client_error: why). */
int64_t lf_client_epoch_batches_wait(lf_client *c, int64_t epoch, int timeout_ms);

/* Evaluation on demand (lf-server --eval-data DIR). A pass delivers every
 * held-out sample once, split across the ranks as balanced as training,
 * the same batches in the same order in every pass (a plan of its own over
 * the held-out samples, one epoch, its tail included), and leaves the
 * training stream alone: its batches keep coming into their own slots of
 * the ring meanwhile, lf_next returns them afterwards as it would have, and
 * lf_state_save's position does not move. Every rank of the job runs its
 * pass at the same training step (each gets its own share; a rank that
 * does not ask holds nobody up, but a job that evaluates needs every
 * rank's share). lf_eval_begin asks for one pass: 0, -ENODATA (the server
 * has no --eval-data), LF_E_ORDER (a pass is under way), or a send error;
 * a pass may also follow LF_E_END. With lf_client_use_device the eval
 * batches are device batches, in 2 device slots of their own, and the
 * prefetch of training batches waits from lf_eval_begin until the pass
 * ends or lf_next is called (the first call may wait up to 50 ms for the
 * prefetch thread's turn). lf_eval_next waits up to
 * timeout_ms (-1: forever) for the pass's next batch: 1 and *b filled (an
 * eval batch: b->step is its step in the pass, b->epoch the eval plan's; release
 * it with lf_release as any), 0 once the pass is over (the next call is
 * LF_E_ORDER until lf_eval_begin), LF_E_ORDER (every eval slot is held:
 * release one, or before lf_eval_begin), LF_E_TIMEOUT or an error.
 * lf_client_eval_batches: this rank's batches in a pass (the same on every
 * rank), or -ENODATA. (LEVELFEED_1.5) */
int lf_eval_begin(lf_client *c);
int lf_eval_next(lf_client *c, lf_batch *b, int timeout_ms);
int64_t lf_client_eval_batches(const lf_client *c);

/* Says goodbye and unmaps the ring. Accepts NULL. */
void lf_client_close(lf_client *c);

/* A short static description of any code these functions return. */
const char *lf_strerror(int code);

/* LF_VERSION_STRING of the library actually loaded (static, never NULL):
 * a binding that loads liblevelfeed at run time compares it with its own. */
const char *lf_version(void);

/* The tensor of b named `name`, or NULL: "tokens", "lengths", "positions",
 * "cu_seqlens", "max_seqlen" (pack: a 0-dimension tensor, the longest
 * cu_seqlens segment, as FlashAttention's varlen kernels take it),
 * "micro", "sample_ids", "sample_offsets", "source" (a mixture, lf-server
 * --data A --weight W --data B ...: each sample's --data number, int32 [n]),
 * "images", "labels", "frames",
 * and a fine-tuning dataset's fields by their names ("loss_mask",
 * "prompt_len", ...: a per-token one shaped as "tokens", each value at its
 * token's place and 0 where there is none; a per-sample one [n] int64).
 * server/README.md lists which batch holds which. */
const lf_tensor *lf_batch_tensor(const lf_batch *b, const char *name);

/* Element i of a host tensor of any integer dtype (u8 .. i64; a u64 above
 * INT64_MAX comes back negative): lengths, offsets and token ids whatever
 * --token-dtype the server was given. -1 for a float or device-only tensor
 * or an i past its end. */
int64_t lf_tensor_int(const lf_tensor *t, uint64_t i);

#ifdef __cplusplus
}
#endif
#endif
