/*
 * rank_loop.c — the loop of one training rank, in its shortest form, plus
 * what the end-to-end tests need to check a run:
 *
 *   lf-rank-loop [--endpoint P] [--rank R --world W] [--out FILE]
 *                [--verify DIR[,DIR...]] [--pad-id N] [--max-batches K --save FILE]
 *                [--restore FILE] [--compute-us N [--sync-us S]] [--timeout-ms N]
 *                [--digests FILE]
 *                [--save-every K --state-file FILE] [--connect-timeout-ms N]
 *                [--hang-after K] [--plan-peers DIR] [--trace FILE] [--chart FILE]
 *                [--eval-at K,K,... [--eval-out FILE] [--eval-verify DIR]]
 *                [--image-size WxH --crop C --image-dtype T --flip P --seed S]
 *                [--no-digest]   (benchmarks: do not read the tensor bytes)
 *                [--device N]    (benchmarks: the client copies each batch to
 *                                 CUDA device N ahead of the loop; the loop
 *                                 then only times lf_next and counts)
 *
 * Each batch becomes a line "epoch step rank n id,id,..." in --out (the
 * format of `lf-server --print-plan`; a piece of a longer sample, which the
 * batch's sample_offsets tensor places, is ID@OFFSET). With --verify,
 * --tokens FILE writes each sample or piece as checked, a line "epoch id
 * offset token token ...", so a test can put the pieces back together and
 * compare every token with the input. --verify re-reads every sample
 * straight from the shards (its own read, checksum and decompression) and
 * compares it with the tensor bytes (images: with the transform of the
 * stored JPEG, given the server's image flags and seed). A mixture's
 * datasets are given as --verify A,B,C (lf-server's --data in order): each
 * batch's source tensor must then name every sample's dataset. At the end it prints a digest of every
 * tensor byte it received, so two runs can be compared byte for byte;
 * --digests writes one per batch ("epoch step rank digest"), so the pieces
 * of a resumed run can be compared with an uninterrupted one. Every batch
 * is also checked against its epoch's batch count as the server told it
 * (lf_client_epoch_batches): its step within the count, and an epoch got
 * whole of exactly that many (a mismatch counts as one).
 *
 * --save-every K writes the state to --state-file after every K-th batch,
 * as a trainer checkpoints, so a process killed with SIGKILL leaves its last
 * state behind: written to FILE.tmp and renamed over FILE (never a torn
 * file), after --out and --digests are flushed up to that batch.
 * --plan-peers DIR checks, before the first batch, that every rank's server
 * plans the same sequence, as lf-train (MPI) and the Python loader
 * (torch.distributed) do, for ranks that share no process group but a
 * directory (check_plan_peers).
 * --hang-after K stops after the K-th batch without releasing it, as a stuck
 * trainer would, until the process is killed: fault tests pick the exact
 * batch a client dies at.
 * --trace FILE and --chart FILE ask the server, at the end, for the run's
 * Perfetto trace and SVG chart (lf_client_trace): written once every rank
 * of the server has asked or left, with every rank's steps.
 * --eval-at K,K,... runs an evaluation pass (lf_eval_begin, lf_eval_next,
 * against lf-server --eval-data) after the K-th training batch of this
 * run (0: before the first), each eval batch a line "pass step rank n ids"
 * in --eval-out (passes counted from 0; the ids are the held-out set's),
 * each checked against that set's shards with --eval-verify DIR. With
 * --device the eval batches are device batches too, checked to be there.
 * --sync-us S stands in for the all-reduce of a synchronous job: the last S
 * µs of each --compute-us step are the wait for slower ranks, reported as
 * the step's sync wait (lf_report_step_sync), the rest as its compute. Such
 * a step is timed from its batch's arrival, with no cadence to make up: a
 * rank whose batch came late enters its all-reduce late, as in a real job,
 * instead of carrying the lateness as a phase it pays as data wait every
 * step after (the peer it waits for keeps the cadence).
 */
#include "levelfeed.h"
#include "lf_shard.h"
#include "lf_tf.h"
#include "image_cli.h"
#include "parse_num.h"
#include "version.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

typedef struct verifier {
    lf_dataset *ds;
    lf_block_decoder *dec;
    unsigned char *stored, *raw;
    uint64_t block;              /* block in raw, UINT64_MAX: none */
    int64_t pad_id;
    lf_tf_image_params image;    /* image datasets: the server's transform */
    lf_tf_ws *ws;
    unsigned char *expect;       /* one transformed image */
    FILE *dump;                  /* --tokens: each sample's tokens as checked */
    uint32_t epoch;              /* the batch's, for the dump */
    const uint64_t *offs;        /* the batch's sample_offsets, NULL: whole samples */
    const lf_batch *batch;       /* the batch being checked */
    int32_t source;              /* the `source` every sample carries (an eval
                                    batch of a mixture: the number of --verify
                                    datasets); -1: its own dataset's number */
} verifier;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --compute-us: step i's compute ends at first + i * N, a fixed cadence as
 * in a synchronous job, so two ranks cannot drift apart (a rank that drifts
 * ahead would wait for the other through the server's step order, and that
 * wait is no lf_next latency). */
static void sleep_until(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

/* A process held with SIGSTOP (as fault tests hold a rank) is behind its
 * cadence when continued: it restarts the cadence from there, rather than
 * rush through the steps it missed (a held rank of 50 ms steps ran to the
 * end of its run before the test could see a few of its batches). */
static volatile sig_atomic_t continued;

static void on_continue(int sig)
{
    (void)sig;
    continued = 1;
}

/* dirs: one dataset, or a mixture's, comma-separated in --data order. */
static int verifier_open(verifier *v, const char *dirs, int64_t pad_id)
{
    lf_shard_error err;
    char *copy = strdup(dirs), *save = NULL;
    const char *dir[32];
    uint32_t n = 0;
    for (char *d = copy ? strtok_r(copy, ",", &save) : NULL; d && n < 32;
         d = strtok_r(NULL, ",", &save))
        dir[n++] = d;
    int rc = n ? lf_dataset_open_many(dir, n, &v->ds, &err) : -1;
    free(copy);
    if (rc < 0) {
        fprintf(stderr, "rank-loop: %s\n", err.msg);
        return -1;
    }
    v->stored = malloc(lf_dataset_max_block_stored(v->ds) + 1);
    v->raw = malloc(lf_dataset_max_block_raw(v->ds) + 1);
    v->block = UINT64_MAX;
    v->pad_id = pad_id;
    if (!v->stored || !v->raw || lf_block_decoder_create(&v->dec) < 0) return -1;
    return 0;
}

/* The fields of `sample`, read and decoded independently of the server. */
static int sample_fields(verifier *v, uint64_t sample, lf_field_view *views)
{
    lf_shard_error err;
    uint64_t b = lf_dataset_sample_block(v->ds, sample);
    const lf_block_info *bi = lf_dataset_block(v->ds, b);
    if (!bi) return -1;
    if (b != v->block) {
        long n = lf_dataset_read_block(v->ds, b, v->stored, bi->stored_size, &err);
        if (n >= 0) n = lf_block_decode(v->dec, v->ds, b, v->stored, (size_t)n, v->raw,
                                        bi->raw_size, &err);
        if (n < 0) { fprintf(stderr, "rank-loop: %s\n", err.msg); return -1; }
        v->block = b;
    }
    return lf_sample_fields(v->ds, sample, v->raw, bi->raw_size, views, &err) < 0 ? -1 : 0;
}

/* The stored tokens of `sample`. */
static int sample_tokens(verifier *v, uint64_t sample, lf_field_view *out, size_t *elem)
{
    lf_field_view views[LF_MAX_FIELDS];
    if (sample_fields(v, sample, views) < 0) return -1;
    const lf_schema *sc = lf_dataset_schema(v->ds);
    *out = views[sc->cost_field];
    *elem = lf_field_elem_size(&sc->fields[sc->cost_field]);
    return 0;
}

/* Labels: where the schema has a label field, the batch must carry labels
 * [n] (8 bytes each), and sample i's must equal its stored label. */
static int verify_label(const verifier *v, const lf_batch *b, const lf_field_view *views,
                        uint32_t i)
{
    const lf_schema *sc = lf_dataset_schema(v->ds);
    const lf_tensor *lab = lf_batch_tensor(b, "labels");
    for (uint32_t k = 0; k < sc->nfields; k++) {
        if (sc->fields[k].type != LF_FIELD_LABEL_I64) continue;
        if (!lab || lab->size != 8ull * b->nsamples ||
            memcmp(views[k].data, (const char *)lab->host + 8 * (size_t)i, 8) != 0)
            return -1;
    }
    return 0;
}

/* Images: each one equals the transform of the stored JPEG with the same
 * parameters, epoch and sample id; labels equal the stored labels. */
static int verify_images(verifier *v, const lf_batch *b, const uint64_t *ids)
{
    const lf_tensor *img = lf_batch_tensor(b, "images");
    size_t each = lf_tf_image_out_size(&v->image);
    const lf_schema *sc = lf_dataset_schema(v->ds);
    if (!img || img->size != each * b->nsamples) return -1;
    if (!v->ws && (lf_tf_ws_create(NULL, &v->ws) < 0 || !(v->expect = malloc(each)))) return -1;
    for (uint32_t i = 0; i < b->nsamples; i++) {
        lf_field_view views[LF_MAX_FIELDS];
        if (sample_fields(v, ids[i], views) < 0) return -1;
        const lf_field_view *f = &views[sc->cost_field];
        if (lf_tf_jpeg_augment(v->ws, v->expect, each, f->data, f->size, &v->image, b->epoch,
                               ids[i], NULL) != (long)each ||
            memcmp(v->expect, (const char *)img->host + i * each, each) != 0 ||
            verify_label(v, b, views, i) < 0)
            return -1;
    }
    return 0;
}

static uint64_t stored_at(const lf_field_view *f, size_t elem, uint32_t i)
{
    if (elem == 2) { uint16_t x; memcpy(&x, (const char *)f->data + 2 * i, 2); return x; }
    uint32_t x;
    memcpy(&x, (const char *)f->data + 4 * (size_t)i, 4);
    return x;
}

/* Value k of a stored fine-tuning field (per-token u8 or i32, or the one
 * int64 of a per-sample field). */
static int64_t stored_value(const lf_field_def *f, const lf_field_view *view, uint64_t k)
{
    const char *p = view->data;
    if (f->type == LF_FIELD_PER_TOKEN_U8) return (unsigned char)p[k];
    if (f->type == LF_FIELD_PER_TOKEN_I32) {
        int32_t x;
        memcpy(&x, p + 4 * k, 4);
        return x;
    }
    int64_t x;
    memcpy(&x, p, 8);
    return x;
}

/* The batch's fine-tuning fields at sample i (whose tokens are cells [at,
 * at+count), from token off of the sample): a per-token field's tensor
 * holds its stored values at the same cells, a per-sample field's entry i
 * its stored value. With `out`, writes " | NAME value ..." for each. */
static int match_extras(const verifier *v, const lf_field_view *views, uint64_t at, uint32_t i,
                        uint64_t off, uint64_t count, FILE *out)
{
    const lf_schema *sc = lf_dataset_schema(v->ds);
    for (uint32_t k = 0; k < sc->nfields; k++) {
        const lf_field_def *f = &sc->fields[k];
        int per_token = lf_field_is_per_token(f->type);
        if (!per_token && f->type != LF_FIELD_LABEL_I64) continue;
        const lf_tensor *t = lf_batch_tensor(v->batch, f->name);
        if (!t) return -1;
        if (out) fprintf(out, " | %s", f->name);
        for (uint64_t c = 0; c < (per_token ? count : 1); c++) {
            int64_t got = lf_tensor_int(t, per_token ? at + c : i);
            if (got != stored_value(f, &views[k], per_token ? off + c : 0)) return -1;
            if (out) fprintf(out, " %" PRId64, got);
        }
    }
    return 0;
}

/* Compares cells [at, at+count) of tokens with batch sample i's stored
 * tokens: the whole sample, or with sample_offsets the piece that starts
 * there (lf-server --overflow split); the fine-tuning fields likewise.
 * --tokens writes them out. */
static int match(verifier *v, const lf_tensor *tok, uint64_t at, const uint64_t *ids,
                 uint32_t i, uint64_t count)
{
    lf_field_view views[LF_MAX_FIELDS];
    const lf_schema *sc = lf_dataset_schema(v->ds);
    size_t elem = lf_field_elem_size(&sc->fields[sc->cost_field]);
    uint64_t off = v->offs ? v->offs[i] : 0;
    if (sample_fields(v, ids[i], views) < 0) return -1;
    const lf_field_view *f = &views[sc->cost_field];
    if (v->offs ? off + count > f->count : count != f->count) return -1;
    for (uint64_t k = 0; k < count; k++)
        if ((uint64_t)lf_tensor_int(tok, at + k) != stored_at(f, elem, (uint32_t)(off + k)))
            return -1;
    if (match_extras(v, views, at, i, off, count, NULL) < 0) return -1;
    if (v->dump) {
        fprintf(v->dump, "%u %" PRIu64 " %" PRIu64, v->epoch, ids[i], off);
        for (uint64_t k = 0; k < count; k++)
            fprintf(v->dump, " %" PRIu64, stored_at(f, elem, (uint32_t)(off + k)));
        match_extras(v, views, at, i, off, count, v->dump);
        fputc('\n', v->dump);
    }
    return 0;
}

static int check_pads(const verifier *v, const lf_tensor *tok, uint64_t from, uint64_t to)
{
    for (uint64_t k = from; k < to; k++)
        if (lf_tensor_int(tok, k) != v->pad_id) return -1;
    return 0;
}

/* Rows of `width` cells from cell `at` on, holding samples ids[first..]:
 * each row the sample's tokens, then pad ids; lengths say the counts. */
static int verify_rows(verifier *v, const lf_tensor *tok, const lf_tensor *len,
                       const uint64_t *ids, uint32_t first, uint64_t rows, uint64_t width,
                       uint64_t at)
{
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t row = at + r * width, n = (uint64_t)lf_tensor_int(len, first + r);
        if (n > width || match(v, tok, row, ids, first + (uint32_t)r, n) < 0) return -1;
        if (check_pads(v, tok, row + n, row + width)) return -1;
    }
    return 0;
}

/* Pad: tokens [n, longest]; with --micro-batches, tokens [cells] holding
 * the micro-batches micro[k] = (rows, width) one after another. */
/* A mixture's batch names each sample's dataset in `source`; one dataset's
 * carries no such tensor. */
static int verify_sources(const verifier *v, const lf_batch *b, const uint64_t *ids)
{
    const lf_tensor *src = lf_batch_tensor(b, "source");
    if (!src) return lf_dataset_sources(v->ds) > 1 ? -1 : 0;
    if (src->shape[0] != b->nsamples) return -1;
    for (uint32_t i = 0; i < b->nsamples; i++)
        if (lf_tensor_int(src, i) !=
            (v->source >= 0 ? v->source : (int64_t)lf_dataset_sample_source(v->ds, ids[i])))
            return -1;
    return 0;
}

static int verify_pad(verifier *v, const lf_batch *b, const uint64_t *ids)
{
    const lf_tensor *tok = lf_batch_tensor(b, "tokens"), *len = lf_batch_tensor(b, "lengths");
    const lf_tensor *micro = lf_batch_tensor(b, "micro");
    if (!tok || !len) return -1;
    if (!micro)
        return tok->ndim == 2 && tok->shape[0] == b->nsamples
                   ? verify_rows(v, tok, len, ids, 0, b->nsamples, tok->shape[1], 0) : -1;
    uint64_t at = 0, first = 0;
    for (uint64_t k = 0; k < micro->shape[0]; k++) {
        uint64_t rows = (uint64_t)lf_tensor_int(micro, 2 * k);
        uint64_t width = (uint64_t)lf_tensor_int(micro, 2 * k + 1);
        if (first + rows > b->nsamples || at + rows * width > tok->shape[0]) return -1;
        if (verify_rows(v, tok, len, ids, (uint32_t)first, rows, width, at) < 0) return -1;
        first += rows;
        at += rows * width;
    }
    return first == b->nsamples && at == tok->shape[0] ? 0 : -1;
}

/* Positions in cells [a, e): first, first + 1, ... through a sample (a
 * piece's first is its offset in the sample), 0 in padding. */
static int check_positions(const lf_tensor *pos, uint64_t a, uint64_t e, int counting,
                           uint64_t first)
{
    for (uint64_t c = a; c < e; c++)
        if (lf_tensor_int(pos, c) != (counting ? (int64_t)(first + c - a) : 0)) return -1;
    return 0;
}

/* Pack: cu_seqlens cuts the flattened rows into segments, from cell 0 to
 * the last; a segment is the next sample (same tokens, positions counting
 * from 0, or a piece's from its offset) or a row's padding (pad ids up to
 * the row end, positions 0). */
static int verify_pack(verifier *v, const lf_batch *b, const uint64_t *ids)
{
    const lf_tensor *tok = lf_batch_tensor(b, "tokens"), *cu = lf_batch_tensor(b, "cu_seqlens");
    const lf_tensor *pos = lf_batch_tensor(b, "positions");
    if (!tok || !cu || !pos || tok->ndim != 2 || pos->ndim != 2 || cu->shape[0] == 0 ||
        pos->shape[0] != tok->shape[0] || pos->shape[1] != tok->shape[1])
        return -1;
    uint64_t seq_len = tok->shape[1], cells = tok->shape[0] * seq_len, ncu = cu->shape[0];
    if (lf_tensor_int(cu, 0) != 0 || (uint64_t)lf_tensor_int(cu, ncu - 1) != cells) return -1;
    uint32_t k = 0;
    uint64_t longest = 0;
    for (uint64_t s = 0; s + 1 < ncu; s++) {
        uint64_t a = (uint64_t)lf_tensor_int(cu, s), e = (uint64_t)lf_tensor_int(cu, s + 1);
        if (e < a || e > cells) return -1;
        if (a == e) continue;
        if (e - a > longest) longest = e - a;
        lf_field_view f;
        size_t elem;
        while (k < b->nsamples && sample_tokens(v, ids[k], &f, &elem) == 0 && f.count == 0) k++;
        if (k < b->nsamples && match(v, tok, a, ids, k, e - a) == 0) {
            if (check_positions(pos, a, e, 1, v->offs ? v->offs[k] : 0)) return -1;
            k++;
            continue;
        }
        if (e % seq_len != 0 || check_pads(v, tok, a, e) || check_positions(pos, a, e, 0, 0))
            return -1;
    }
    const lf_tensor *mx = lf_batch_tensor(b, "max_seqlen");   /* the longest segment */
    if (!mx || mx->ndim != 0 || (uint64_t)lf_tensor_int(mx, 0) != longest) return -1;
    return k == b->nsamples ? 0 : -1;
}

/* Frames: each sample's stored frames, then zeros up to the longest;
 * lengths equal the frame counts. */
static int verify_frames(verifier *v, const lf_batch *b, const uint64_t *ids)
{
    const lf_tensor *fr = lf_batch_tensor(b, "frames"), *len = lf_batch_tensor(b, "lengths");
    const lf_schema *sc = lf_dataset_schema(v->ds);
    if (!fr || !len || fr->ndim != 3 || fr->shape[0] != b->nsamples || b->nsamples == 0)
        return b->nsamples == 0 ? 0 : -1;
    size_t per = (size_t)(fr->size / b->nsamples); /* bytes per padded sample */
    const unsigned char *base = fr->host;
    for (uint32_t i = 0; i < b->nsamples; i++) {
        lf_field_view views[LF_MAX_FIELDS];
        if (sample_fields(v, ids[i], views) < 0) return -1;
        const lf_field_view *f = &views[sc->cost_field];
        if (f->size > per || memcmp(base + i * per, f->data, f->size) != 0) return -1;
        for (size_t k = f->size; k < per; k++)
            if (base[i * per + k] != 0) return -1;
        if (lf_tensor_int(len, i) != (int64_t)f->count || verify_label(v, b, views, i) < 0)
            return -1;
    }
    return 0;
}

static void digest_batch(XXH3_state_t *h, const lf_batch *b)
{
    for (uint32_t i = 0; i < b->ntensors; i++) {
        const lf_tensor *t = &b->tensors[i];
        XXH3_64bits_update(h, t->name, strlen(t->name));
        XXH3_64bits_update(h, t->shape, t->ndim * sizeof *t->shape);
        XXH3_64bits_update(h, t->host, t->size);
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* p-th percentile (0..100) of n values, sorted in place. */
static double percentile_us(uint64_t *v, size_t n, double p)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, cmp_u64);
    size_t i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
    return (double)v[i] / 1e3;
}

/* lf_next, first without waiting: *ready says whether the batch was there
 * when asked for (its wait_ns is then lf_next's own latency, the figure the
 * bench reports) or had still to come from the server (a data wait). */
static int next_batch(lf_client *c, lf_batch *b, int timeout_ms, int *ready)
{
    int rc = lf_next(c, b, 0);
    *ready = rc != LF_E_TIMEOUT;
    return *ready ? rc : lf_next(c, b, timeout_ms);
}

/* "epoch step rank n id,id,...", a piece of a sample as ID@OFFSET (as
 * lf-server --print-plan writes it). */
static void print_batch(FILE *f, const lf_batch *b, int rank, const uint64_t *ids,
                        const uint64_t *offs)
{
    fprintf(f, "%u %" PRIu64 " %d %u", b->epoch, b->step, rank, b->nsamples);
    for (uint32_t i = 0; i < b->nsamples; i++) {
        fprintf(f, "%c%" PRIu64, i ? ',' : ' ', ids[i]);
        if (offs && offs[i]) fprintf(f, "@%" PRIu64, offs[i]);
    }
    fputc('\n', f);
}

static int write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* The state after the batches so far, replacing `path` atomically. */
static int save_state(const lf_client *c, const char *path, FILE *out, FILE *dig)
{
    unsigned char st[LF_STATE_SIZE];
    char tmp[4096];
    long n = lf_state_save(c, st, sizeof st);
    if (n < 0 || snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return -1;
    if ((out && fflush(out) != 0) || (dig && fflush(dig) != 0)) return -1;
    if (write_file(tmp, st, (size_t)n) < 0 || rename(tmp, path) != 0) return -1;
    return 0;
}

static long read_file(const char *path, void *p, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(p, 1, cap, f);
    fclose(f);
    return (long)n;
}

/* Every rank's server must plan the same global sequence: each node's
 * lf-server plans it alone, and two that differ serve samples twice or
 * never, silently. Ranks with no process group but a shared directory
 * all-gather their servers' plan fingerprints through it: each writes
 * DIR/rank-R ("FINGERPRINT HOST", renamed into place whole), reads every
 * rank's (waiting up to timeout_ms for them), and all stop before their
 * first batch when one differs from rank 0's, naming both, with the words
 * of lf-train and the Python loader. Returns 0 or -1 (printed). */
static int check_plan_peers(const char *dir, const lf_client *c, int rank, int world,
                            int timeout_ms)
{
    char path[4096], tmp[4104], host[256] = "?", node0[256] = "?", node[256];
    unsigned long long fp0 = 0, fp = lf_client_plan_id(c);
    gethostname(host, sizeof host - 1);
    snprintf(path, sizeof path, "%s/rank-%d", dir, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%016llx %s\n", fp, host) < 0 || fclose(f) != 0 || rename(tmp, path)) {
        fprintf(stderr, "rank-loop %d: --plan-peers: cannot write %s: %s\n", rank, path,
                strerror(errno));
        return -1;
    }
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
    for (int r = 0; r < world; r++) {
        snprintf(path, sizeof path, "%s/rank-%d", dir, r);
        unsigned long long got;
        while (!(f = fopen(path, "r")) && errno == ENOENT && now_ns() < deadline)
            nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
        int n = f ? fscanf(f, "%llx %255s", &got, node) : 0;
        if (f) fclose(f);
        if (n != 2) {
            fprintf(stderr, "rank-loop %d: --plan-peers: rank %d's fingerprint is not in %s "
                    "(%s)\n", rank, r, path, f ? "malformed" : "not written in time");
            return -1;
        }
        if (r == 0) {
            fp0 = got;
            snprintf(node0, sizeof node0, "%s", node);
        } else if (got != fp0) {
            fprintf(stderr, "rank-loop %d: the ranks' servers plan different sequences: rank %d "
                    "(node %s) has plan fingerprint %016llx, rank 0 (node %s) %016llx; every "
                    "node's lf-server must get the same datasets, --weight values and plan "
                    "flags (docs/MULTINODE.md); stopping before the first batch\n", rank, r, node,
                    got, node0, fp0);
            return -1;
        }
    }
    return 0;
}

#define EVAL_AT_MAX 64

/* This run's batches of the epoch it is in, for check_count. */
typedef struct epoch_tally {
    long batches;                /* of this run so far */
    uint32_t epoch;
    int64_t seen;                /* batches of `epoch` */
    int whole;                   /* this run has every batch of `epoch` */
    uint32_t first;              /* the epoch of this run's first batch */
} epoch_tally;

static int count_wrong(int rank, uint32_t epoch, uint64_t step, int64_t n, int64_t seen)
{
    fprintf(stderr, "rank-loop %d: epoch %u step %" PRIu64 ": the server told %" PRId64
            " batch(es) for the epoch%s%s, this run got %" PRId64 " of it by this one\n", rank,
            epoch, step, n, n < 0 ? ": " : "", n < 0 ? lf_strerror((int)n) : "", seen);
    return 1;
}

/* The epoch tallied, at its end (the next epoch's first batch, or the
 * plan's end): its count is told by now (a server tells an epoch before
 * any batch of the next, and before its end), and this run got that many
 * where it got it whole (a count too high has no last step to be checked
 * at, and a batch that came before its count was not checked). Returns 1
 * when wrong (said), else 0. */
static int check_epoch_end(lf_client *c, const epoch_tally *t, int rank)
{
    if (t->batches == 0) return 0;
    int64_t n = lf_client_epoch_batches(c, t->epoch);
    if (n == -ENODATA || (n >= 0 && (!t->whole || t->seen == n))) return 0;
    return count_wrong(rank, t->epoch, (uint64_t)t->seen, n, t->seen);
}

/* The batch against its epoch's count as the server told it (WELCOME, or
 * EPOCH before the epoch's first batch: it is known by now, except for the
 * epoch this run starts in, which a server of a large dataset counts while
 * serving it, its batches coming first: -EAGAIN, checked at the epoch's
 * end): its step lies within it, and at the epoch's last step this run got
 * that many of the epoch, where it got the epoch whole (not one a restored
 * run began inside); at the epoch's end, check_epoch_end. Returns 1 when
 * wrong (said), else 0. */
static int check_count(lf_client *c, const lf_batch *b, epoch_tally *t, int rank)
{
    int64_t n = lf_client_epoch_batches(c, b->epoch);
    int bad = 0;
    if (t->batches == 0) t->first = b->epoch;
    if (t->batches++ == 0 || b->epoch != t->epoch) {
        if (t->batches > 1) bad = check_epoch_end(c, t, rank);
        t->whole = t->batches > 1 || b->step == 0;
        t->epoch = b->epoch;
        t->seen = 0;
    }
    t->seen++;
    if (n == -ENODATA) return bad; /* past the epochs a server tells */
    if (n == -EAGAIN && b->epoch == t->first) return bad; /* counted while served */
    if (n >= 0 && b->step < (uint64_t)n && (b->step + 1 < (uint64_t)n || !t->whole || t->seen == n))
        return bad;
    return count_wrong(rank, b->epoch, b->step, n, t->seen);
}

/* A host batch: its line in out (NULL: none; `label` in the epoch column),
 * its bytes checked against v's shards (v->ds NULL: not). Returns 1 when
 * it is wrong (said for the first few: `bad` so far), else 0. */
static int check_batch(verifier *v, const lf_batch *b, uint32_t label, FILE *out, int rank,
                       long bad)
{
    const lf_tensor *ids_t = lf_batch_tensor(b, "sample_ids");
    const uint64_t *ids = ids_t ? ids_t->host : NULL;
    if (!ids || ids_t->shape[0] != b->nsamples) return 1;
    const lf_tensor *offs_t = lf_batch_tensor(b, "sample_offsets");
    v->offs = offs_t && offs_t->shape[0] == b->nsamples ? offs_t->host : NULL;
    v->batch = b;
    v->epoch = b->epoch;
    lf_batch line = *b;
    line.epoch = label;
    if (out) print_batch(out, &line, rank, ids, v->offs);
    int pack = lf_batch_tensor(b, "cu_seqlens") != NULL;
    int images = lf_batch_tensor(b, "images") != NULL;
    int frames = lf_batch_tensor(b, "frames") != NULL;
    if (!v->ds || (verify_sources(v, b, ids) >= 0 &&
                   (images   ? verify_images(v, b, ids)
                    : frames ? verify_frames(v, b, ids)
                    : pack   ? verify_pack(v, b, ids)
                             : verify_pad(v, b, ids)) >= 0))
        return 0;
    if (bad < 5)
        fprintf(stderr, "rank-loop %d: epoch %u step %" PRIu64 ": tensor bytes differ from the "
                "shards\n", rank, b->epoch, b->step);
    return 1;
}

/* A device batch (--device): 1 when its sample ids are not in device
 * memory; its bytes are not read back. */
static int check_device_batch(const lf_batch *b)
{
    const lf_tensor *ids_t = lf_batch_tensor(b, "sample_ids");
    return !ids_t || !ids_t->device;
}

/* One eval pass: every batch of it checked and written, as training's
 * (on a device, as training's there). Returns 0, or the error (said);
 * *bad counts the wrong batches. */
static int eval_pass(lf_client *c, verifier *v, FILE *out, uint32_t pass, int rank,
                     int timeout_ms, int device, long *bad)
{
    int rc = lf_eval_begin(c);
    lf_batch b;
    while (rc == 0 && (rc = lf_eval_next(c, &b, timeout_ms)) == 1) {
        *bad += device ? check_device_batch(&b) : check_batch(v, &b, pass, out, rank, *bad);
        rc = lf_release(c, &b);
    }
    if (rc < 0)
        fprintf(stderr, "rank-loop %d: eval pass %u: %s (%s)\n", rank, pass, lf_strerror(rc),
                lf_client_error(c));
    return rc;
}

typedef struct args {
    lf_client_options o;
    const char *out, *verify, *save, *restore, *digests, *state_file, *plan_peers,
               *tokens, *trace, *chart, *eval_out, *eval_verify;
    int64_t eval_at[EVAL_AT_MAX]; /* --eval-at: after these training batches, ascending */
    uint32_t neval_at;
    lf_tf_image_params image;
    int64_t max_batches, compute_us, sync_us, save_every, hang_after;
    int no_digest;
    int device;                  /* --device: CUDA device, -1: host batches */
    int timeout_ms;
    int64_t pad_id;
} args;

static const char usage_text[] =
    "usage: lf-rank-loop [--endpoint P] [--rank R --world W] [--out FILE] [--digests FILE]\n"
    "  [--verify DATASET[,DATASET...] [--pad-id N] [--tokens FILE] [--image-size WxH --crop full|center|random\n"
    "   --image-dtype u8|f16|f32 --flip P --seed S --resize bilinear|area]] [--no-digest]\n"
    "  [--max-batches K] [--save FILE] [--restore FILE] [--save-every K --state-file FILE]\n"
    "  [--compute-us N [--sync-us S]] [--timeout-ms N] [--connect-timeout-ms N]\n"
    "  [--hang-after K]\n"
    "  [--device N]   (batches copied to CUDA device N; lf_next timed, bytes not read)\n"
    "  [--plan-peers DIR]  (the ranks' plan fingerprints compared through DIR first)\n"
    "  [--trace FILE] [--chart FILE]  (the run's trace and chart, from the server, at the end)\n"
    "  [--eval-at K,K,... [--eval-out FILE] [--eval-verify DIR]]  (an eval pass after the\n"
    "   K-th training batch, each; its batches to FILE, checked against DIR's shards)\n"
    "  [--help] [--version]\n"
    "One training rank's loop: takes its batches from lf-server, checks them against\n"
    "the shards (--verify, with the server's transform flags), prints a summary.\n";

/* --eval-at K,K,...: ascending batch counts. 0, or -1. */
static int parse_eval_at(args *a, const char *v)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", v) >= (int)sizeof buf) return -1;
    char *save = NULL;
    a->neval_at = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int64_t k;
        if (a->neval_at == EVAL_AT_MAX || parse_i64(t, 0, INT64_MAX, &k) ||
            (a->neval_at && k < a->eval_at[a->neval_at - 1]))
            return -1;
        a->eval_at[a->neval_at++] = k;
    }
    return a->neval_at ? 0 : -1;
}

/* One option's value into a; 0, or -1 when it is not a valid value. */
static int set_option(args *a, int c, const char *v)
{
    int64_t n = 0;
    switch (c) {
    case 'E': return parse_eval_at(a, v);
    case 'O': a->eval_out = v; return 0;
    case 'W': a->eval_verify = v; return 0;
    case 'e': a->o.endpoint = v; return 0;
    case 'o': a->out = v; return 0;
    case 'k': a->tokens = v; return 0;
    case 'v': a->verify = v; return 0;
    case 's': a->save = v; return 0;
    case 'R': a->restore = v; return 0;
    case 'd': a->digests = v; return 0;
    case 'f': a->state_file = v; return 0;
    case 'P': a->plan_peers = v; return 0;
    case 'x': a->trace = v; return 0;
    case 'X': a->chart = v; return 0;
    case 'N': a->no_digest = 1; return 0;
    case 'r': return parse_i64(v, 0, INT32_MAX, &n) ? -1 : (a->o.rank = (int)n, 0);
    case 'w': return parse_i64(v, 1, INT32_MAX, &n) ? -1 : (a->o.world_size = (int)n, 0);
    case 'p': return parse_i64(v, 0, INT64_MAX, &a->pad_id);
    case 'm': return parse_i64(v, 0, INT64_MAX, &a->max_batches);
    case 'c': return parse_i64(v, 0, INT64_MAX / 1000, &a->compute_us);
    case 'y': return parse_i64(v, 0, INT64_MAX / 1000, &a->sync_us);
    case 't': return parse_i64(v, 0, INT32_MAX, &n) ? -1 : (a->timeout_ms = (int)n, 0);
    case 'T': return parse_i64(v, 1, INT32_MAX, &n) ? -1 : (a->o.connect_timeout_ms = (int)n, 0);
    case 'K': return parse_i64(v, 1, INT64_MAX, &a->save_every);
    case 'H': return parse_i64(v, 1, INT64_MAX, &a->hang_after);
    case 'G': return parse_i64(v, 0, INT32_MAX, &n) ? -1 : (a->device = (int)n, 0);
    case 'S': return parse_u64(v, 0, UINT64_MAX, &a->image.seed);
    case 'I': return image_cli_set(&a->image, IMAGE_CLI_SIZE, v);
    case 'C': return image_cli_set(&a->image, IMAGE_CLI_CROP, v);
    case 'Z': return image_cli_set(&a->image, IMAGE_CLI_RESIZE, v);
    case 'D': return image_cli_set(&a->image, IMAGE_CLI_DTYPE, v);
    case 'F': return image_cli_set(&a->image, IMAGE_CLI_FLIP, v);
    default: return -1;
    }
}

/* Returns 0, 1 (--help), 2 (--version) or -1 (printed why). */
static int parse(int argc, char **argv, args *a)
{
    static const struct option opts[] = {
        {"endpoint", 1, 0, 'e'}, {"rank", 1, 0, 'r'}, {"world", 1, 0, 'w'},
        {"out", 1, 0, 'o'}, {"verify", 1, 0, 'v'}, {"pad-id", 1, 0, 'p'}, {"tokens", 1, 0, 'k'},
        {"max-batches", 1, 0, 'm'}, {"save", 1, 0, 's'}, {"restore", 1, 0, 'R'},
        {"compute-us", 1, 0, 'c'}, {"sync-us", 1, 0, 'y'}, {"timeout-ms", 1, 0, 't'},
        {"digests", 1, 0, 'd'},
        {"image-size", 1, 0, 'I'}, {"crop", 1, 0, 'C'}, {"image-dtype", 1, 0, 'D'},
        {"flip", 1, 0, 'F'}, {"seed", 1, 0, 'S'}, {"resize", 1, 0, 'Z'}, {"no-digest", 0, 0, 'N'},
        {"save-every", 1, 0, 'K'}, {"state-file", 1, 0, 'f'},
        {"connect-timeout-ms", 1, 0, 'T'}, {"hang-after", 1, 0, 'H'}, {"device", 1, 0, 'G'}, {"plan-peers", 1, 0, 'P'},
        {"trace", 1, 0, 'x'}, {"chart", 1, 0, 'X'}, {"help", 0, 0, 'h'},
        {"eval-at", 1, 0, 'E'}, {"eval-out", 1, 0, 'O'}, {"eval-verify", 1, 0, 'W'},
        {"version", 0, 0, 'V'}, {0, 0, 0, 0}};
    lf_client_options_default(&a->o);
    a->max_batches = -1;
    a->timeout_ms = 30000;
    a->device = -1;
    lf_tf_image_params_default(&a->image, 224, 224);
    int c, at = -1;
    while ((c = getopt_long(argc, argv, "", opts, &at)) != -1) {
        if (c == 'h') return 1;
        if (c == 'V') return 2;
        if (c == '?') return -1;
        if (set_option(a, c, optarg) < 0) {
            fprintf(stderr, "lf-rank-loop: --%s: bad value '%s'\n", opts[at].name, optarg);
            return -1;
        }
        at = -1;
    }
    const char *why = optind < argc                        ? "unexpected argument"
                      : (a->save_every > 0) != (a->state_file != NULL)
                          ? "--save-every and --state-file go together"
                      : a->sync_us > 0 && a->sync_us >= a->compute_us
                          ? "--sync-us is a part of each --compute-us step: give a smaller one"
                      : a->o.rank < 0 ? "no rank: --rank, or RANK in the environment"
                      : a->plan_peers && a->o.world_size < 1
                          ? "--plan-peers needs the world: --world, or WORLD_SIZE"
                      : a->tokens && !a->verify ? "--tokens goes with --verify"
                      : (a->eval_out || a->eval_verify) && !a->neval_at
                          ? "--eval-out and --eval-verify go with --eval-at"
                      : a->device >= 0 && (a->out || a->verify || a->digests || a->save ||
                                           a->save_every > 0 || a->eval_out || a->eval_verify)
                          ? "--device times lf_next only: no --out, --verify, --digests, "
                            "--save, --save-every, --eval-out or --eval-verify with it"
                                      : NULL;
    if (why) fprintf(stderr, "lf-rank-loop: %s%s%s\n", why, optind < argc ? " " : "",
                     optind < argc ? argv[optind] : "");
    return why ? -1 : 0;
}

int main(int argc, char **argv)
{
    args a = {0};
    int p = parse(argc, argv, &a);
    if (p == 2) {
        cli_print_version("lf-rank-loop");
        return 0;
    }
    if (p != 0) {
        fputs(usage_text, p > 0 ? stdout : stderr);
        return p > 0 ? 0 : 2;
    }
    if (a.compute_us > 0) {
        struct sigaction sa = {.sa_handler = on_continue, .sa_flags = SA_RESTART};
        sigaction(SIGCONT, &sa, NULL);
    }
    verifier v = {.source = -1, .image = a.image};
    if (a.verify && verifier_open(&v, a.verify, a.pad_id) < 0) return 1;
    verifier ve = {.source = v.ds ? (int32_t)lf_dataset_sources(v.ds) : -1,
                   .image = a.image}; /* --eval-verify: the held-out set's */
    if (a.eval_verify && verifier_open(&ve, a.eval_verify, a.pad_id) < 0) return 1;
    FILE *out = a.out ? fopen(a.out, "w") : NULL;
    FILE *dig = a.digests ? fopen(a.digests, "w") : NULL;
    FILE *eout = a.eval_out ? fopen(a.eval_out, "w") : NULL;
    v.dump = a.tokens ? fopen(a.tokens, "w") : NULL;
    if ((a.out && !out) || (a.digests && !dig) || (a.tokens && !v.dump) ||
        (a.eval_out && !eout)) {
        fprintf(stderr, "rank-loop %d: cannot write %s: %s\n", a.o.rank,
                a.out && !out ? a.out : a.digests && !dig ? a.digests
                : a.tokens && !v.dump ? a.tokens : a.eval_out, strerror(errno));
        return 1;
    }
    lf_client *c;
    char why[256] = "";
    a.o.error = why;
    a.o.error_size = sizeof why;
    int rc = lf_client_open(&a.o, &c);
    if (rc < 0) {
        fprintf(stderr, "rank-loop %d: open: %s: %s\n", a.o.rank, lf_strerror(rc), why);
        return 1;
    }
    int reported = 0; /* rc's error is said already */
    if (a.plan_peers &&
        check_plan_peers(a.plan_peers, c, a.o.rank, a.o.world_size,
                         a.o.connect_timeout_ms > 0 ? a.o.connect_timeout_ms : 60000) < 0) {
        rc = -EINVAL;
        reported = 1;
    }
    if (a.device >= 0) {
        a.no_digest = 1; /* the bytes are in device memory */
        if ((rc = lf_client_use_device(c, a.device, 0)) < 0) {
            fprintf(stderr, "rank-loop %d: --device %d: %s (%s)\n", a.o.rank, a.device,
                    lf_strerror(rc), lf_client_error(c));
            reported = 1;
        }
    }
    if (a.restore) {
        unsigned char st[LF_STATE_SIZE];
        long n = read_file(a.restore, st, sizeof st);
        if (n < 0) {
            fprintf(stderr, "rank-loop %d: cannot read %s: %s\n", a.o.rank, a.restore,
                    strerror(errno));
            rc = -EIO;
            reported = 1;
        } else if ((rc = lf_state_restore(c, st, (size_t)n)) < 0) {
            fprintf(stderr, "rank-loop %d: restore %s: %s (%s)\n", a.o.rank, a.restore,
                    lf_strerror(rc), lf_client_error(c));
            reported = 1;
        }
    }
    XXH3_state_t h;
    XXH3_64bits_reset(&h);
    long batches = 0, samples = 0, bad = 0, not_ready = 0;
    uint64_t bytes = 0, first_ns = 0, pace_ns = 0, *waits = NULL; /* pace: the cadence's start */
    size_t nw = 0;
    lf_batch b;
    int ready;
    uint32_t evals = 0; /* passes run */
    epoch_tally tally = {0};
    for (;;) {
        while (rc == 0 && evals < a.neval_at && a.eval_at[evals] == batches)
            if ((rc = eval_pass(c, &ve, eout, evals++, a.o.rank, a.timeout_ms, a.device >= 0,
                                &bad)) < 0)
                reported = 1;
        if (rc != 0 || batches == a.max_batches ||
            (rc = next_batch(c, &b, a.timeout_ms, &ready)) != 0)
            break;
        uint64_t t0 = now_ns();
        bad += a.device >= 0 ? check_device_batch(&b)
                             : check_batch(&v, &b, b.epoch, out, a.o.rank, bad);
        bad += check_count(c, &b, &tally, a.o.rank);
        if (!a.no_digest) digest_batch(&h, &b);
        if (batches == 0) first_ns = now_ns();
        not_ready += !ready;
        /* lf_next's latency: batches that were ready, after the first few
         * (their slot pages are touched for the first time). */
        uint64_t *w = ready && batches >= 4 ? realloc(waits, (nw + 1) * sizeof *w) : NULL;
        if (w) (waits = w)[nw++] = b.wait_ns;
        for (uint32_t i = 0; i < b.ntensors; i++) bytes += b.tensors[i].size;
        if (dig) {
            XXH3_state_t one;
            XXH3_64bits_reset(&one);
            digest_batch(&one, &b);
            fprintf(dig, "%u %" PRIu64 " %d %016llx\n", b.epoch, b.step, a.o.rank,
                    (unsigned long long)XXH3_64bits_digest(&one));
        }
        batches++;
        samples += b.nsamples;
        if (a.save_every > 0 && batches % a.save_every == 0 &&
            save_state(c, a.state_file, out, dig) < 0) {
            fprintf(stderr, "rank-loop %d: cannot write %s: %s\n", a.o.rank, a.state_file,
                    strerror(errno));
            rc = -EIO;
            reported = 1;
        }
        if (a.hang_after > 0 && batches == a.hang_after)
            for (;;) pause(); /* a stuck trainer, holding its batch until it is killed */
        uint64_t t1 = now_ns();
        if (a.compute_us > 0) {
            uint64_t step_ns = (uint64_t)a.compute_us * 1000u;
            if (batches == 1 || continued || a.sync_us > 0)
                pace_ns = t0 - (uint64_t)(batches - 1) * step_ns; /* from here, nothing to make up */
            continued = 0;
            uint64_t end = pace_ns + (uint64_t)batches * step_ns;
            sleep_until(end - (uint64_t)a.sync_us * 1000u); /* parse: sync < compute */
            t1 = now_ns();
            sleep_until(end);
        }
        lf_release(c, &b);
        if (a.sync_us > 0) lf_report_step_sync(c, t1 - t0, now_ns() - t1);
        else lf_report_step(c, now_ns() - t0);
    }
    /* The end of the plan is no error; a failed restore or --save-every
     * write stays one, whatever --max-batches says. */
    if (rc == LF_E_END) {
        rc = 0;
        bad += check_epoch_end(c, &tally, a.o.rank);
    }
    if (rc < 0 && !reported)
        fprintf(stderr, "rank-loop %d: %s (%s)\n", a.o.rank, lf_strerror(rc), lf_client_error(c));
    if (rc == 0 && a.save && save_state(c, a.save, out, dig) < 0) {
        fprintf(stderr, "rank-loop %d: cannot write %s: %s\n", a.o.rank, a.save, strerror(errno));
        rc = -EIO;
    }
    if (rc == 0 && (a.trace || a.chart) &&
        (rc = lf_client_trace(c, a.trace, a.chart, a.timeout_ms)) < 0)
        fprintf(stderr, "rank-loop %d: trace: %s (%s)\n", a.o.rank, lf_strerror(rc),
                lf_client_error(c));
    if (rc == 0 && evals < a.neval_at) {
        fprintf(stderr, "rank-loop %d: --eval-at %" PRId64 ": the run had %ld batches\n",
                a.o.rank, a.eval_at[evals], batches);
        rc = -ERANGE;
    }
    lf_client_close(c);
    if (out) fclose(out);
    if (eout && fclose(eout) != 0) {
        fprintf(stderr, "rank-loop %d: cannot write %s\n", a.o.rank, a.eval_out);
        rc = -EIO;
    }
    if (dig) fclose(dig);
    if (v.dump && fclose(v.dump) != 0) {
        fprintf(stderr, "rank-loop %d: cannot write %s\n", a.o.rank, a.tokens);
        rc = -EIO;
    }
    double secs = batches ? (double)(now_ns() - first_ns) / 1e9 : 0;
    double p50 = percentile_us(waits, nw, 50), p99 = percentile_us(waits, nw, 99);
    printf("rank %d: %ld batches, %ld samples, %" PRIu64 " tensor bytes in %.3f s, "
           "lf_next p50 %.1f us p99 %.1f us (batch ready; %ld batches were not), "
           "digest %016llx%s\n", a.o.rank, batches, samples, bytes, secs, p50, p99, not_ready,
           (unsigned long long)XXH3_64bits_digest(&h), bad ? ", MISMATCHES" : "");
    free(waits);
    lf_block_decoder_free(v.dec);
    lf_tf_ws_free(v.ws);
    free(v.expect);
    free(v.stored);
    free(v.raw);
    lf_dataset_close(v.ds);
    lf_block_decoder_free(ve.dec);
    free(ve.stored);
    free(ve.raw);
    lf_dataset_close(ve.ds);
    return rc == 0 && bad == 0 ? 0 : 1;
}
