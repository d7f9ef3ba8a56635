/*
 * train.c — one rank's training loop, collective over MPI_COMM_WORLD.
 *
 * Per step: lf_next (data wait), convert the batch to model ids and
 * sequences and release the slot, forward + backward (compute), one
 * all-reduce of the gradients with three trailing counters (loss sum,
 * targets, ranks that had a batch), SGD, then a check that every rank holds
 * the same parameters: each hashes its parameter bytes and the hashes are
 * all-gathered; any difference fails every rank at once.
 *
 * The loop ends at the first all-reduce where no rank had a batch, so ranks
 * whose plan ends early keep joining the collectives with zero gradients
 * and every rank leaves at the same step.
 *
 * Sync wait is not measured here: each rank records its time inside the
 * all-reduce, and the report subtracts the fastest rank's time at the same
 * step (lt_sync_wait), which leaves the waiting for slower ranks.
 */
#include "harness.h"
#include "levelfeed.h"
#include "lf_plan.h"

#include <mpi.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

/* A rank's state for one run. */
typedef struct rank_ctx {
    const lt_train_opts *o;
    int rank, world;
    lf_client *client;
    lf_plan_cost_model cost;
    size_t nparams;
    float *params, *grads;       /* host: CPU model, or the GPU model's copy */
    lt_cpu *cpu;
    lt_gpu *gpu;
    int32_t *ids;                /* the batch's tokens as model ids */
    size_t ids_cap;
    lt_seq *seqs;
    size_t seqs_cap;
    lt_record *rec;              /* this rank's steps */
    size_t nrec, rec_cap;
    lt_record *floor;            /* its noise-floor steps (floor_step) */
    size_t nfloor, floor_cap;
    FILE *log;                   /* batch log, or NULL */
    uint64_t sim_rng;            /* --device sim: this rank's jitter stream */
} rank_ctx;

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

static uint64_t elems(const lf_tensor *t)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

static int add_seq(rank_ctx *x, size_t *n, uint64_t start, uint64_t len)
{
    if (grow((void **)&x->seqs, &x->seqs_cap, *n + 1, sizeof *x->seqs) < 0) return -1;
    x->seqs[(*n)++] = (lt_seq){start, (uint32_t)len};
    return 0;
}

/* `rows` rows of `width` cells from cell `at` on, the next samples in
 * order: row r holds lengths[*n] real tokens. */
static int add_rows(rank_ctx *x, const lf_batch *b, const lf_tensor *len, size_t *n,
                    uint64_t rows, uint64_t width, uint64_t at)
{
    for (uint64_t r = 0; r < rows; r++) {
        int64_t L = *n < b->nsamples ? lf_tensor_int(len, *n) : -1;
        if (L < 0 || (uint64_t)L > width) return -1;
        if (add_seq(x, n, at + r * width, (uint64_t)L) < 0) return -1;
    }
    return 0;
}

/* Pad layout: tokens [n, longest], row i holds lengths[i] real tokens; with
 * lf-server --micro-batches, tokens [cells] holds the micro-batches one after
 * another, micro[k] = (rows, width). */
static int seqs_pad(rank_ctx *x, const lf_batch *b, const lf_tensor *tok, size_t *n)
{
    const lf_tensor *len = lf_batch_tensor(b, "lengths"), *micro = lf_batch_tensor(b, "micro");
    if (!len || elems(len) < b->nsamples) return -1;
    if (!micro)
        return tok->ndim == 2 && tok->shape[0] == b->nsamples
                   ? add_rows(x, b, len, n, b->nsamples, tok->shape[1], 0) : -1;
    if (tok->ndim != 1 || micro->ndim != 2 || micro->shape[1] != 2) return -1;
    uint64_t at = 0;
    for (uint64_t k = 0; k < micro->shape[0]; k++) {
        int64_t rows = lf_tensor_int(micro, 2 * k), width = lf_tensor_int(micro, 2 * k + 1);
        if (rows < 0 || width < 0 || at + (uint64_t)rows * (uint64_t)width > tok->shape[0] ||
            add_rows(x, b, len, n, (uint64_t)rows, (uint64_t)width, at) < 0)
            return -1;
        at += (uint64_t)rows * (uint64_t)width;
    }
    return *n == b->nsamples ? 0 : -1;
}

static int all_pad(const lf_tensor *tok, uint64_t a, uint64_t e, int64_t pad_id)
{
    for (uint64_t i = a; i < e; i++)
        if (lf_tensor_int(tok, i) != pad_id) return 0;
    return 1;
}

/* Pack layout: cu_seqlens cuts the flattened rows into segments; a row's
 * padding is a segment of its own that ends the row and holds only pad ids
 * (a sample of pad ids only, ending a row, would be taken for padding: the
 * count check below then fails the batch rather than train on a guess).
 * cu_seqlens has nsamples + rows + 1 entries: an empty sample has no
 * segment, nor has a full row its padding, and each leaves an empty one at
 * the end; the empty samples become sequences of length 0, as in pad. */
static int seqs_pack(rank_ctx *x, const lf_batch *b, const lf_tensor *tok,
                     const lf_tensor *cu, size_t *n)
{
    uint64_t row = tok->ndim == 2 ? tok->shape[1] : 0, cells = elems(tok), ncu = elems(cu);
    uint64_t rows = tok->ndim == 2 ? tok->shape[0] : 0, pads = 0, unused = 0;
    if (row == 0) return -1;
    for (uint64_t s = 0; s + 1 < ncu; s++) {
        int64_t a = lf_tensor_int(cu, s), e = lf_tensor_int(cu, s + 1);
        if (a < 0 || e < a || (uint64_t)e > cells) return -1;
        if (e == a) {
            unused++;
            continue;
        }
        int padding = (uint64_t)e % row == 0 && all_pad(tok, (uint64_t)a, (uint64_t)e,
                                                         x->o->pad_id);
        pads += padding;
        if (!padding && add_seq(x, n, (uint64_t)a, (uint64_t)(e - a)) < 0) return -1;
    }
    if (pads > rows || unused < rows - pads) return -1;
    for (uint64_t k = unused - (rows - pads); k > 0; k--)
        if (add_seq(x, n, 0, 0) < 0) return -1;
    return *n == b->nsamples ? 0 : -1;
}

__extension__ typedef unsigned __int128 cost_sum;

/* Turns the batch into model ids and sequences and fills the record's
 * token, cost and length sums. Returns the sequence count, or -1 with *why
 * saying what did not hold. */
static long take_batch(rank_ctx *x, const lf_batch *b, lt_record *r, const char **why)
{
    const lf_tensor *tok = lf_batch_tensor(b, "tokens"), *cu = lf_batch_tensor(b, "cu_seqlens");
    const lf_tensor *micro = lf_batch_tensor(b, "micro");
    size_t n = 0;
    *why = "no tokens tensor";
    if (!tok) return -1;
    uint64_t cells = elems(tok);
    *why = "out of memory";
    if (grow((void **)&x->ids, &x->ids_cap, cells + 1, sizeof *x->ids) < 0) return -1;
    *why = "a negative token id";
    for (uint64_t i = 0; i < cells; i++) {
        int64_t v = lf_tensor_int(tok, i);
        if (v < 0) return -1;
        x->ids[i] = (int32_t)(v % x->o->model.vocab);
    }
    *why = cu ? "cu_seqlens does not cut the tokens into the batch's samples"
              : "the lengths (and micro) tensors do not fit the tokens and the sample count";
    if ((cu ? seqs_pack(x, b, tok, cu, &n) : seqs_pad(x, b, tok, &n)) < 0) return -1;
    /* As the balancer's rank cost: summed in 128 bits, saturating at
     * UINT64_MAX (costs in FLOPs pass 2^64 within a batch). */
    cost_sum cost = 0;
    for (size_t i = 0; i < n; i++) {
        r->tokens += x->seqs[i].len;
        cost += lf_plan_cost(&x->cost, x->seqs[i].len);
    }
    if (n) cost += (cost_sum)x->cost.d * (cu ? tok->shape[0] : micro ? micro->shape[0] : 1);
    r->planned_cost = cost > UINT64_MAX ? UINT64_MAX : (uint64_t)cost;
    r->nsamples = (uint32_t)n;
    return (long)n;
}

static void log_batch(rank_ctx *x, const lf_batch *b)
{
    const lf_tensor *ids = lf_batch_tensor(b, "sample_ids");
    if (!x->log) return;
    fprintf(x->log, "%u %" PRIu64 " %d %u", b->epoch, b->step, x->rank, b->nsamples);
    for (uint32_t i = 0; ids && i < b->nsamples && i < elems(ids); i++)
        fprintf(x->log, "%c%" PRId64, i ? ',' : ' ', lf_tensor_int(ids, i));
    fputc('\n', x->log);
}

/* Fetches the next batch into the model's input. Returns 1 (batch), 0
 * (plan ended) or -1. */
static int next_batch(rank_ctx *x, lt_record *r, lt_batch *mb)
{
    lf_batch b;
    uint64_t t0 = now_ns();
    int rc = lf_next(x->client, &b, x->o->timeout_ms);
    r->data_ns = now_ns() - t0;
    if (rc == LF_E_END) return 0;
    if (rc < 0) {
        fprintf(stderr, "lf-train rank %d: lf_next: %s (%s)\n", x->rank, lf_strerror(rc),
                lf_client_error(x->client));
        return -1;
    }
    const char *why;
    long n = take_batch(x, &b, r, &why);
    r->epoch = b.epoch;
    r->step = b.step;
    log_batch(x, &b);
    lf_release(x->client, &b);
    r->prep_ns = now_ns() - t0 - r->data_ns;
    if (n < 0) {
        fprintf(stderr, "lf-train rank %d: malformed batch at epoch %u step %" PRIu64 ": %s\n",
                x->rank, b.epoch, b.step, why);
        return -1;
    }
    *mb = (lt_batch){x->ids, x->seqs, (uint32_t)n};
    return 1;
}

/* Every rank's parameter hash must be the same. */
static int check_params(rank_ctx *x, uint64_t step)
{
    unsigned long long h = XXH3_64bits(x->params, x->nparams * sizeof *x->params);
    unsigned long long *all = malloc((size_t)x->world * sizeof *all);
    if (!all) return -1;
    MPI_Allgather(&h, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
    int bad = -1;
    for (int r = 1; r < x->world && bad < 0; r++)
        if (all[r] != all[0]) bad = r;
    if (bad >= 0 && x->rank == 0)
        fprintf(stderr, "lf-train: parameters differ after step %" PRIu64 ": rank %d hash "
                "%016llx, rank 0 %016llx\n", step, bad, all[bad], all[0]);
    free(all);
    return bad >= 0 ? -1 : 0;
}

/* Forward and backward of one batch (none on a rank whose plan ended: zero
 * gradients), timed into r: wall clock, and on the CPU the thread's CPU
 * time too. The gradients are left for the all-reduce. 0 or -1 with why. */
/* A standard normal draw (Box-Muller) from the rank's own stream. */
static double normal(uint64_t *s)
{
    double u[2];
    for (int i = 0; i < 2; i++) {
        *s = *s * 6364136223846793005u + 1442695040888963407u;
        u[i] = ((double)(*s >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* --device sim: the step's time under the hidden cost (which the planner is
 * not told), with multiplicative jitter, spent asleep so that many ranks
 * share a few cores without taking each other's time. */
static void sim_compute(rank_ctx *x, const lt_batch *mb, int active)
{
    const double *c = x->o->sim_cost;
    double ns = 0;
    for (uint32_t i = 0; active && i < mb->nseqs; i++) {
        double L = mb->seqs[i].len;
        ns += c[0] * L + c[1] * L * L + c[2];
    }
    if (active) ns += c[3];
    ns *= fmax(0, 1 + x->o->sim_jitter * normal(&x->sim_rng));
    struct timespec t = {(time_t)(ns / 1e9), (long)fmod(ns, 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &t, &t) == EINTR) {}
}

static int compute(rank_ctx *x, const lt_batch *mb, int active, lt_record *r, char *why,
                   size_t why_size)
{
    uint64_t t0 = now_ns();
    if (x->o->sim) {
        size_t n = x->nparams;
        memset(x->grads, 0, (n + LT_EXTRA) * sizeof *x->grads);
        sim_compute(x, mb, active);
        x->grads[n + 2] = (float)active;
        r->compute_ns = now_ns() - t0;
        return 0;
    }
    if (x->gpu) {
        int rc = -1;
#if LT_CUDA
        rc = lt_gpu_step(x->gpu, mb, (float)active, why, why_size);
#endif
        r->compute_ns = now_ns() - t0;
        return rc;
    }
    (void)why, (void)why_size;
    size_t n = x->nparams;
    uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    memset(x->grads, 0, (n + LT_EXTRA) * sizeof *x->grads);
    if (active) lt_cpu_step(x->cpu, mb, x->grads);
    x->grads[n + 2] = (float)active;
    r->compute_ns = now_ns() - t0;
    r->compute_cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    return 0;
}

/* Compute, all-reduce and update for one step. Returns the number of ranks
 * that had a batch (0: the run is over), or -1. */
static int train_step(rank_ctx *x, const lt_batch *mb, int active, lt_record *r)
{
    float extra[LT_EXTRA] = {0};
    size_t n = x->nparams;
    char why[256] = "";
    int rc = compute(x, mb, active, r, why, sizeof why);
    uint64_t t1 = now_ns();
    if (rc == 0 && x->gpu) {
#if LT_CUDA
        rc = lt_gpu_allreduce(x->gpu, extra, why, sizeof why);
        r->reduce_ns = now_ns() - t1;
        if (rc == 0 && extra[2] > 0)
            rc = lt_gpu_sgd(x->gpu, x->o->lr, x->params, why, sizeof why);
#endif
    } else if (rc == 0) {
        MPI_Allreduce(MPI_IN_PLACE, x->grads, (int)(n + LT_EXTRA), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
        r->reduce_ns = now_ns() - t1;
        memcpy(extra, x->grads + n, sizeof extra);
        if (extra[2] > 0) lt_sgd(x->params, x->grads, n, x->o->lr);
    }
    if (rc < 0) {
        fprintf(stderr, "lf-train rank %d: %s\n", x->rank, why);
        return -1;
    }
    r->loss = extra[1] > 0 ? extra[0] / extra[1] : 0;
    return (int)(extra[2] + 0.5f);
}

/* Ends the whole job: a rank that cannot take or train a batch cannot
 * join the next all-reduce, and the others would wait in it for ever. */
static void abort_job(const rank_ctx *x)
{
    if (x->o->on_abort) x->o->on_abort(x->o->on_abort_arg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The median of one field over this rank's steps that had a batch. */
static uint64_t median_of(const rank_ctx *x, int samples)
{
    uint64_t *v = malloc((x->nrec ? x->nrec : 1) * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; v && i < x->nrec; i++)
        if (x->rec[i].nsamples) v[k++] = samples ? x->rec[i].nsamples : x->rec[i].tokens;
    if (k) qsort(v, k, sizeof *v, cmp_u64);
    uint64_t m = k ? v[k / 2] : 0;
    free(v);
    return m;
}

/* One step of the noise floor, after every LT_FLOOR_EVERY training steps:
 * every rank computes the same batch, the run's typical one so far (the
 * largest of the ranks' median sample counts and median tokens, so all
 * ranks agree), then the gradients' all-reduce as in training; the
 * parameters are left as they are. Its compute max/mean can only be
 * measurement noise: what a perfectly balanced plan would measure on this
 * machine, under the same load, interleaved with the run itself. */
static int floor_step(rank_ctx *x)
{
    if (grow((void **)&x->floor, &x->floor_cap, x->nfloor + 1, sizeof *x->floor) < 0)
        return -1;
    lt_record *r = &x->floor[x->nfloor++];
    memset(r, 0, sizeof *r);
    uint64_t shape[2] = {median_of(x, 1), median_of(x, 0)};
    MPI_Allreduce(MPI_IN_PLACE, shape, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    uint64_t n = shape[0] ? shape[0] : 1, len = shape[1] / n > 2 ? shape[1] / n : 2;
    if (grow((void **)&x->ids, &x->ids_cap, n * len, sizeof *x->ids) < 0 ||
        grow((void **)&x->seqs, &x->seqs_cap, n, sizeof *x->seqs) < 0)
        return -1;
    for (uint64_t i = 0; i < n * len; i++)
        x->ids[i] = (int32_t)((i * 7919) % (uint64_t)x->o->model.vocab);
    for (uint64_t i = 0; i < n; i++) x->seqs[i] = (lt_seq){i * len, (uint32_t)len};
    lt_batch mb = {x->ids, x->seqs, (uint32_t)n};
    char why[256] = "";
    if (compute(x, &mb, 1, r, why, sizeof why) < 0) {
        fprintf(stderr, "lf-train rank %d: %s\n", x->rank, why);
        return -1;
    }
    r->tokens = n * len;
    r->nsamples = (uint32_t)n;
    uint64_t t1 = now_ns();
#if LT_CUDA
    float extra[LT_EXTRA];
    if (x->gpu && lt_gpu_allreduce(x->gpu, extra, why, sizeof why) < 0) {
        fprintf(stderr, "lf-train rank %d: %s\n", x->rank, why);
        return -1;
    }
#endif
    if (!x->gpu)
        MPI_Allreduce(MPI_IN_PLACE, x->grads, (int)(x->nparams + LT_EXTRA), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
    r->reduce_ns = now_ns() - t1;
    return 0;
}

static int run_steps(rank_ctx *x, uint64_t zero)
{
    for (uint64_t step = 0;; step++) {
        if (grow((void **)&x->rec, &x->rec_cap, x->nrec + 1, sizeof *x->rec) < 0) return -1;
        lt_record *r = &x->rec[x->nrec];
        memset(r, 0, sizeof *r);
        uint64_t t0 = now_ns();
        r->t_start = t0 - zero;
        lt_batch mb = {0};
        int active = next_batch(x, r, &mb);
        if (active < 0) abort_job(x);
        int ranks = train_step(x, &mb, active, r);
        if (ranks < 0) abort_job(x);
        if (ranks == 0) return 0;
        r->step_ns = now_ns() - t0;
        if (active) lf_report_step(x->client, r->compute_ns);
        if ((int64_t)step == x->o->fault_step && x->rank == x->o->fault_rank) x->params[0] += 1e-3f;
        if (check_params(x, step) < 0) return -1;
        if (x->rank == 0 && x->o->log_every > 0 && step % (uint64_t)x->o->log_every == 0)
            printf("step %5" PRIu64 "  loss %.4f\n", step, r->loss);
        x->nrec++;
        if (x->nrec % LT_FLOOR_EVERY == 0 && floor_step(x) < 0) abort_job(x);
    }
}

/* Rank 0 receives every rank's n records (the same n on every rank):
 * *out = [step * world + rank] (malloc'ed). */
static int gather(rank_ctx *x, const lt_record *mine, size_t n, lt_record **out)
{
    int bytes = (int)(n * sizeof(lt_record));
    size_t all_n = (n ? n : 1) * (size_t)x->world;
    lt_record *all = x->rank == 0 ? malloc(all_n * sizeof *all) : NULL;
    lt_record *byrank = x->rank == 0 ? malloc(all_n * sizeof *all) : NULL;
    int ok = x->rank != 0 || (all && byrank);
    MPI_Gather(mine, bytes, MPI_BYTE, byrank, ok ? bytes : 0, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (x->rank == 0 && ok) {
        for (size_t s = 0; s < n; s++)
            for (int r = 0; r < x->world; r++)
                all[s * (size_t)x->world + (size_t)r] = byrank[(size_t)r * n + s];
        *out = all;
        all = NULL;
    }
    free(all);
    free(byrank);
    return ok ? 0 : -1;
}

static int open_client(rank_ctx *x)
{
    lf_client_options co;
    char why[256] = "";
    lf_client_options_default(&co);
    co.endpoint = x->o->endpoint;
    co.rank = x->rank;
    co.world_size = x->world; /* the connect timeout the library's: a minute for a late server */
    co.error = why;
    co.error_size = sizeof why;
    int rc = lf_client_open(&co, &x->client);
    if (rc < 0)
        fprintf(stderr, "lf-train rank %d: cannot reach lf-server at %s: %s %s\n", x->rank,
                x->o->endpoint ? x->o->endpoint : "(default)", lf_strerror(rc), why);
    return rc < 0 ? -1 : 0;
}

/* Every rank's server must plan the same global sequence: each node's
 * lf-server plans it alone, from its own flags and copy of the data, and
 * two that differ would serve samples twice or never, silently. The ranks
 * all-gather their servers' plan fingerprints (and node names) once, before
 * the first step; rank 0 names the first rank that differs from it. The
 * result is the same on every rank. */
static int check_plan(rank_ctx *x)
{
    unsigned long long fp = lf_client_plan_id(x->client);
    unsigned long long *all = malloc((size_t)x->world * sizeof *all);
    char node[MPI_MAX_PROCESSOR_NAME] = "", *nodes = malloc((size_t)x->world * sizeof node);
    int len = 0, ok = all && nodes;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!ok) {
        free(all);
        free(nodes);
        return -1;
    }
    MPI_Get_processor_name(node, &len);
    MPI_Allgather(&fp, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
    MPI_Allgather(node, (int)sizeof node, MPI_CHAR, nodes, (int)sizeof node, MPI_CHAR,
                  MPI_COMM_WORLD);
    int bad = -1;
    for (int r = 1; r < x->world && bad < 0; r++)
        if (all[r] != all[0]) bad = r;
    if (bad >= 0 && x->rank == 0)
        fprintf(stderr, "lf-train: the ranks' servers plan different sequences: rank %d (node "
                "%.*s) has plan fingerprint %016llx, rank 0 (node %.*s) %016llx; every node's "
                "lf-server must get the same datasets, --weight values and plan flags "
                "(docs/MULTINODE.md); stopping before the first step\n", bad, MPI_MAX_PROCESSOR_NAME,
                nodes + (size_t)bad * sizeof node, all[bad], MPI_MAX_PROCESSOR_NAME, nodes,
                all[0]);
    free(all);
    free(nodes);
    return bad >= 0 ? -1 : 0;
}

static int model_open(rank_ctx *x)
{
    x->sim_rng = 0x9E3779B97F4A7C15u * (uint64_t)(x->rank + 1);
    x->nparams = lt_param_count(&x->o->model);
    /* MPI_Allreduce counts in int. */
    if (x->nparams > (size_t)INT_MAX - LT_EXTRA) {
        fprintf(stderr, "lf-train: the model has %zu parameters, more than one all-reduce "
                "takes (%d): lower --vocab, --dim or --hidden\n", x->nparams, INT_MAX - LT_EXTRA);
        return -1;
    }
    x->grads = malloc((x->nparams + LT_EXTRA) * sizeof *x->grads);
    if (!x->grads || (!x->o->cuda && lt_cpu_create(&x->o->model, &x->cpu) < 0)) {
        fprintf(stderr, "lf-train rank %d: cannot allocate the model: %zu parameters "
                "(%.1f GiB each for values and gradients)\n", x->rank, x->nparams,
                (double)x->nparams * sizeof(float) / (1 << 30));
        return -1;
    }
    if (!x->o->cuda) {
        x->params = lt_cpu_params(x->cpu);
        return 0;
    }
#if LT_CUDA
    char why[256] = "", id[256];
    size_t idn = lt_gpu_nccl_id_size();
    int rc = x->rank == 0 ? lt_gpu_nccl_id(id, why, sizeof why) : 0;
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc == 0) MPI_Bcast(id, (int)idn, MPI_BYTE, 0, MPI_COMM_WORLD);
    x->params = x->grads;        /* host copy of the parameters for the check */
    if (rc == 0) {
        lf_client_options co;
        lf_client_options_default(&co);
        rc = lt_gpu_create(&x->o->model, co.local_rank < 0 ? 0 : co.local_rank, x->rank,
                           x->world, id, &x->gpu, why, sizeof why);
    }
    if (rc < 0 && why[0]) fprintf(stderr, "lf-train rank %d: --device cuda: %s\n", x->rank, why);
    return rc;
#else
    fprintf(stderr, "lf-train: --device cuda: this lf-train was built without CUDA "
                    "(make CUDA=1 MPI=1)\n");
    return -1;
#endif
}

static void rank_close(rank_ctx *x)
{
    if (x->log) fclose(x->log);
    lf_client_close(x->client);
#if LT_CUDA
    lt_gpu_free(x->gpu);
#endif
    lt_cpu_free(x->cpu);
    free(x->grads);
    free(x->ids);
    free(x->seqs);
    free(x->rec);
    free(x->floor);
}

/* All ranks agree on whether every rank succeeded. */
static int all_ok(int ok)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all;
}

int lt_time_batches(const lt_train_opts *o, const lt_batch *b, const uint32_t *order,
                    size_t norder, double *ns)
{
    rank_ctx x = {.o = o};
    MPI_Comm_rank(MPI_COMM_WORLD, &x.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &x.world);
    char why[256] = "";
    int ok = all_ok(model_open(&x) == 0);
    /* The same conditions as training: every rank computes at once. */
    if (ok) MPI_Barrier(MPI_COMM_WORLD);
    for (size_t i = 0; ok && i < norder; i++) {
        lt_record r = {0};
        ok = compute(&x, &b[order[i]], 1, &r, why, sizeof why) == 0;
        ns[i] = lt_work_ns(&r);
    }
    if (!ok && why[0]) fprintf(stderr, "lf-train rank %d: %s\n", x.rank, why);
    rank_close(&x);
    return all_ok(ok) ? 0 : -1;
}

int lt_train(const lt_train_opts *o, lt_run *run)
{
    rank_ctx x = {.o = o};
    MPI_Comm_rank(MPI_COMM_WORLD, &x.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &x.world);
    int ok = lf_plan_cost_set(&x.cost, o->cost[0], o->cost[1], o->cost[2], o->cost[3]) == 0;
    if (ok && o->batches) {
        char path[4096];
        snprintf(path, sizeof path, "%s.r%d.txt", o->batches, x.rank);
        if (!(x.log = fopen(path, "w")))
            fprintf(stderr, "lf-train: cannot write %s: %s\n", path, strerror(errno));
        ok = x.log != NULL;
    }
    ok = ok && model_open(&x) == 0 && open_client(&x) == 0;
    int rc = -1;
    if (all_ok(ok) && check_plan(&x) == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        rc = run_steps(&x, now_ns());
        if (rc == 0) rc = gather(&x, x.rec, x.nrec, &run->rec);
        if (rc == 0) rc = gather(&x, x.floor, x.nfloor, &run->floor);
        run->steps = x.nrec;
        run->floor_steps = x.nfloor;
        run->ranks = x.world;
    }
    rank_close(&x);
    return all_ok(rc == 0) ? 0 : -1;
}
