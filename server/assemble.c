/*
 * assemble.c — the workers' second task: a job into its rank's ring slot.
 *
 * A job with nothing missing is laid out by a worker directly in the
 * rank's ring slot: one fill per kind of batch (tokens padded, packed or
 * in micro-batches through lf_tf; images through lf_tf_jpeg_augment; frames
 * padded), each reading its samples' fields from the pinned blocks
 * (sample_views), then the sample ids and the slot header. Finishing a
 * job counts its samples off the cache's pending counts and unpins its
 * blocks; the control thread then announces it (READY).
 */
#include "stages.h"

#include "lf_ring.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The fields of a job's sample i, located in its pinned block by the
 * block's record table (decode.c). */
static int sample_views(srv *s, const srv_job *j, uint32_t i, lf_field_view *views)
{
    const cache_entry *e = j->blocks[j->block_of[i]].entry;
    lf_shard_error err;
    uint64_t id = lf_plan_piece_sample(j->ids[i]);
    uint64_t k = id - lf_dataset_block(s->ds, e->block)->first_sample;
    if (lf_record_fields(s->ds, id, e->raw + e->records[k], e->records[k + 1] - e->records[k],
                         views, &err) < 0) {
        srv_fail(s, "sample %" PRIu64 ": %s", id, err.msg);
        return -EIO;
    }
    return 0;
}

/* Leaves sample i out of job j, keeping the others in their order; the
 * batch shrinks (the same on every run, as the cause is in the data).
 * The job is its worker's alone from the assembly queue on. */
static void job_remove(const srv *s, srv_job *j, uint32_t i)
{
    int pad = s->cfg.plan.layout != LF_PLAN_PACK && !j->micro_len; /* a row a sample */
    j->tokens -= j->lengths[i] <= j->tokens ? j->lengths[i] : j->tokens;
    for (uint32_t k = i; k + 1 < j->n; k++) {
        j->ids[k] = j->ids[k + 1];
        j->lengths[k] = j->lengths[k + 1];
        j->block_of[k] = j->block_of[k + 1];
        j->row_of[k] = pad ? k : j->row_of[k + 1];
    }
    j->n--;
    if (pad) j->rows = j->n; /* pad: one row per sample */
}

/* Gathers the token views of a job's samples, checked against the index; a
 * piece of a sample (its plan id says which) is its slice of the tokens,
 * its positions counting on from where it starts. */
static int gather_tokens(srv *s, worker_ctx *w, const srv_job *j)
{
    if (j->n > w->seqs_cap) {
        lf_tf_seq *v = realloc(w->seqs, j->n * sizeof *v);
        if (!v) return -ENOMEM;
        w->seqs = v;
        w->seqs_cap = j->n;
    }
    for (uint32_t i = 0; i < j->n; i++) {
        lf_field_view views[LF_MAX_FIELDS];
        int rc = sample_views(s, j, i, views);
        if (rc < 0) return rc;
        const lf_field_view *v = &views[s->token_field];
        uint64_t id = lf_plan_piece_sample(j->ids[i]), whole = lf_dataset_sample_length(s->ds, id);
        uint64_t at = lf_plan_piece_index(j->ids[i]) * s->piece_len;
        if (v->count != whole || at + j->lengths[i] > whole) {
            srv_fail(s, "sample %" PRIu64 ": %u tokens, index says %" PRIu64, id, v->count,
                     whole);
            return -EIO;
        }
        w->seqs[i] = (lf_tf_seq){
            .tokens = (const char *)v->data + at * lf_dtype_size(s->token_in_dtype),
            .count = (uint32_t)j->lengths[i], .dtype = s->token_in_dtype,
            .row = j->row_of[i], .first_pos = (uint32_t)at};
    }
    return 0;
}

/* --micro-batches: micro-batch k's samples (consecutive, row_of == k) padded
 * to micro_len[k], one micro-batch after another in the flat tokens tensor;
 * micro[k] = (its samples, its padded length). */
static int fill_micro(const srv *s, const worker_ctx *w, const srv_job *j, unsigned char *slot,
                      const lf_layout *l)
{
    const lf_tensor_desc *tok = &l->tensors[0], *len = &l->tensors[1], *mic = &l->tensors[2];
    uint32_t dt = s->cfg.token_dtype, idx = lf_tf_index_dtype(dt);
    size_t es = lf_dtype_size(dt), is = lf_dtype_size(idx);
    uint64_t at = 0; /* cells written so far */
    for (uint32_t k = 0, i = 0; k < j->rows; k++) {
        uint32_t first = i;
        while (i < j->n && j->row_of[i] == k) i++;
        lf_tf_tokens_out out = {.dtype = dt, .tokens = slot + tok->offset + at * es,
                                .tokens_cap = tok->size - at * es,
                                .lengths = slot + len->offset + (size_t)first * is,
                                .lengths_cap = len->size - (size_t)first * is};
        int rc = lf_tf_tokens_pad(&out, j->micro_len[k], s->cfg.pad_id, w->seqs + first,
                                  i - first);
        if (rc < 0) return rc;
        lf_put_int(slot + mic->offset, idx, 2 * (size_t)k, i - first);
        lf_put_int(slot + mic->offset, idx, 2 * (size_t)k + 1, j->micro_len[k]);
        at += (uint64_t)(i - first) * j->micro_len[k];
    }
    return 0;
}

/* ---- fine-tuning fields ----------------------------------------------------
 *
 * A per-token field goes where its tokens went: the transform placed
 * sample i's tokens from cell token_cell(i) of the flat tokens tensor on
 * (pad: row i; pack: after the row's earlier segments; micro-batches:
 * its micro-batch's region, its row in it), and a piece's slice starts at
 * the same offset in the field as in the tokens. Cells without a token
 * hold 0. A per-sample field is copied to entry i, once per piece.
 */
typedef struct cell_walk {
    uint32_t row;                /* the row (pack) or micro-batch of the last sample */
    uint32_t first;              /* micro: its first sample */
    uint64_t at;                 /* micro: its first cell; pack: cells used in the row */
} cell_walk;

/* The first cell of sample i's tokens; called for i = 0, 1, ... in order. */
static uint64_t token_cell(const srv *s, const srv_job *j, cell_walk *c, uint32_t i)
{
    uint32_t row = j->row_of[i];
    if (j->micro_len) {
        if (i == 0) *c = (cell_walk){row, 0, 0};
        for (; c->row < row; c->row++, c->first = i)  /* the micro-batches before */
            c->at += (uint64_t)(i - c->first) * j->micro_len[c->row];
        return c->at + (uint64_t)(i - c->first) * j->micro_len[row];
    }
    if (s->cfg.plan.layout != LF_PLAN_PACK) return (uint64_t)i * j->row_len;
    if (i == 0 || row != c->row) *c = (cell_walk){row, 0, 0};
    uint64_t cell = (uint64_t)row * j->row_len + c->at;
    c->at += j->lengths[i];
    return cell;
}

/* One field of sample i (views) into its tensor t. */
static void copy_extra(const srv *s, const srv_job *j, uint32_t i, const lf_field_def *f,
                       const lf_field_view *v, uint64_t cell, unsigned char *dst)
{
    if (f->type == LF_FIELD_LABEL_I64) {
        memcpy(dst + 8 * (size_t)i, v->data, 8);
        return;
    }
    size_t es = lf_dtype_size(srv_extra_dtype(f->type));
    uint64_t at = lf_plan_piece_index(j->ids[i]) * s->piece_len;
    memcpy(dst + cell * es, (const unsigned char *)v->data + at * es, j->lengths[i] * es);
}

/* Every fine-tuning field of the job's samples into its tensor. */
static int fill_extras(srv *s, const srv_job *j, unsigned char *slot, const lf_layout *l)
{
    const lf_schema *sc = lf_dataset_schema(s->ds);
    unsigned char *dst[LF_MAX_FIELDS];
    for (uint32_t e = 0; e < s->nextras; e++) {
        const lf_tensor_desc *t = lf_layout_find(l, sc->fields[s->extra_field[e]].name);
        dst[e] = slot + t->offset;
        memset(dst[e], 0, t->size);
    }
    cell_walk c;
    for (uint32_t i = 0; i < j->n && s->nextras; i++) {
        lf_field_view views[LF_MAX_FIELDS];
        int rc = sample_views(s, j, i, views);
        if (rc < 0) return rc;
        uint64_t cell = token_cell(s, j, &c, i);
        for (uint32_t e = 0; e < s->nextras; e++) {
            uint32_t k = s->extra_field[e];
            copy_extra(s, j, i, &sc->fields[k], &views[k], cell, dst[e]);
        }
    }
    return 0;
}

/* Pack: the longest segment cu_seqlens marks (n + 1 meaningful entries),
 * padding segments included, as FlashAttention's varlen kernels want. */
static void put_max_seqlen(unsigned char *slot, const lf_layout *l, long n)
{
    const lf_tensor_desc *cu = lf_layout_find(l, "cu_seqlens");
    const lf_tensor_desc *mx = lf_layout_find(l, "max_seqlen");
    const unsigned char *seg = slot + cu->offset;
    int64_t longest = 0;
    for (long k = 1; k < n; k++) {
        int64_t len = lf_get_int(seg, cu->dtype, (size_t)k) -
                      lf_get_int(seg, cu->dtype, (size_t)k - 1);
        if (len > longest) longest = len;
    }
    lf_put_int(slot + mx->offset, mx->dtype, 0, longest);
}

/* Token batch: pad or pack straight into the slot's tensors. */
static int fill_tokens(srv *s, worker_ctx *w, const srv_job *j, unsigned char *slot,
                       const lf_layout *l)
{
    int rc = gather_tokens(s, w, j);
    if (rc < 0) return rc;
    if (j->micro_len) {
        if ((rc = fill_micro(s, w, j, slot, l)) < 0)
            srv_fail(s, "token transform: %s", lf_tf_strerror(rc));
        return rc < 0 ? rc : fill_extras(s, j, slot, l);
    }
    const lf_tensor_desc *t = &l->tensors[0];
    lf_tf_tokens_out out = {.dtype = s->cfg.token_dtype, .tokens = slot + t->offset,
                            .tokens_cap = t->size};
    if (s->cfg.plan.layout == LF_PLAN_PACK) {
        out.positions = slot + l->tensors[1].offset;
        out.positions_cap = l->tensors[1].size;
        out.cu_seqlens = slot + l->tensors[2].offset;
        out.cu_seqlens_cap = l->tensors[2].size;
        long n = lf_tf_tokens_pack(&out, j->rows, j->row_len, s->cfg.pad_id, w->seqs, j->n);
        rc = n < 0 ? (int)n : 0;
        if (n >= 0) put_max_seqlen(slot, l, n);
    } else {
        out.lengths = slot + l->tensors[1].offset;
        out.lengths_cap = l->tensors[1].size;
        rc = lf_tf_tokens_pad(&out, j->row_len, s->cfg.pad_id, w->seqs, j->n);
    }
    if (rc < 0) srv_fail(s, "token transform: %s", lf_tf_strerror(rc));
    return rc < 0 ? rc : fill_extras(s, j, slot, l);
}

/* Copies sample i's label (an int64) into the labels tensor. */
static int copy_label(const srv *s, const lf_field_view *views, unsigned char *slot,
                      const lf_tensor_desc *lab, uint32_t i)
{
    if (!lab) return 0;
    const lf_field_view *lv = &views[s->label_field];
    if (lv->size != 8) return -EINVAL;
    memcpy(slot + lab->offset + 8 * (size_t)i, lv->data, 8);
    return 0;
}

/* ---- decode memory -------------------------------------------------------
 *
 * A progressive JPEG is decoded from whole-image coefficient buffers, about
 * 2 bytes per sample of each component (149 MiB for a 7000x7000 4:2:0
 * photo), whatever the crop; a single-scan one needs none. Unbounded, 16
 * workers on such images took 16 of them, far past --memory-limit. So on
 * the image path half of the cache's share of the limit (never leaving it
 * less than two blocks; JPEG blocks are small) is decode memory: an eighth
 * of it split evenly as what each worker's workspace may keep between
 * images (the common case: the pages stay mapped, see transforms/README.md),
 * the rest a pool lent to workers whose image needs more
 * (lf_tf_jpeg_decode_need, from the header). A worker takes what the pool
 * has, up to that need; less than it makes the transform decode the image
 * in strips (lf_tf_ws_set_decode_budget), each pass re-reading the scans,
 * so it waits only while its keep and the pool's free part together are
 * below the least that strips of one iMCU row take (lf_tf_jpeg_strip_need),
 * holding no loan. It gives the loan back, with its workspace trimmed,
 * after the image. An image whose least exceeds keep + pool takes the
 * difference from the cache's share while the cache keeps two blocks
 * (decode_grow); beyond that it cannot be decoded within the limit: the
 * server stops and says which sample and what limit would do. The pool is most of the share because strips have
 * a floor: the nonzero masks of the whole image (1/16 of its buffers, 9
 * MiB at 7000x7000) plus a few iMCU rows, which a 42 MiB limit's pool must
 * hold with 16 workers (e2e/server_decode_memory).
 */
void srv_decode_budget(srv *s)
{
    srv_pipeline *p = s->pl;
    if (!s->images) return;
    uint64_t floor = srv_cache_floor(s);
    uint64_t share = s->cache_limit / 2;
    if (s->cache_limit - share < floor) share = s->cache_limit > floor ? s->cache_limit - floor : 0;
    s->cache_limit -= share;
    p->decode_keep = share / 8 / s->cfg.workers;
    p->decode_pool = share - p->decode_keep * s->cfg.workers;
}

/* Moves decode memory from the cache's share to the pool, where keep +
 * pool are below an image's least (strips of one row) and the cache can
 * give the difference and still hold two blocks: the split above is made
 * before any image is seen, and at a small limit half the cache's share
 * cannot hold a large image's strips. The cache evicts its idle blocks
 * down to its new share at once; blocks pinned by jobs in flight stay
 * until those jobs end (the planner admits no new job past the share
 * meanwhile), so RSS may pass the limit by up to the moved bytes that
 * once. Returns whether keep + pool hold `least` now. Under mu. */
static int decode_grow(srv *s, uint64_t least)
{
    srv_pipeline *p = s->pl;
    uint64_t have = p->decode_pool + p->decode_keep;
    uint64_t floor = srv_cache_floor(s);
    if (least <= have) return 1;
    if (s->cache_limit < floor || s->cache_limit - floor < least - have) return 0;
    s->cache_limit -= least - have;
    p->decode_pool += least - have;
    srv_cache_make_room(s, 0, NULL);
    return 1;
}

/* Lends between lo and hi bytes beyond the worker's keep for sample id's
 * decode, as much as the pool has, waiting while it has less than lo.
 * least: the image's least decode memory (strips of one row). Returns the
 * loan (>= 0), or < 0 when stopping or when the image can never fit
 * (reported). Not under mu. */
static long decode_borrow(srv *s, uint64_t id, uint64_t least, uint64_t lo, uint64_t hi)
{
    srv_pipeline *p = s->pl;
    pthread_mutex_lock(&s->mu);
    if (!decode_grow(s, least)) {
        /* The cache's share above its two blocks, keep and pool come to at
         * least 15/16 of the share the limit leaves them (keep x workers is
         * an eighth of half of it): that share must be 16/15 of least +
         * two blocks. */
        uint64_t floor = srv_cache_floor(s);
        uint64_t others = s->cfg.memory_limit - s->cache_limit - p->decode_pool -
                          p->decode_keep * s->cfg.workers;
        uint64_t have = p->decode_pool + p->decode_keep;
        pthread_mutex_unlock(&s->mu);
        srv_fail(s, "sample %" PRIu64 ": the JPEG needs %" PRIu64 " bytes of decode memory "
                 "(a progressive file's coefficients, decoded in strips of one block row); "
                 "--memory-limit leaves %" PRIu64 " for one image: raise --memory-limit to %"
                 PRIu64 " or more", id, least, have,
                 others + (least + floor) + (least + floor) / 15 + 1);
        return -E2BIG;
    }
    /* Its own condition variable: a wait on cv_work would swallow the
     * signal that hands an idle worker new work. srv_fail and the
     * pipeline's stop wake it. */
    while (!s->stop && !s->failed && p->decode_pool - p->decode_lent < lo)
        pthread_cond_wait(&s->cv_decode, &s->mu);
    long rc = s->stop || s->failed ? -ECANCELED : 0;
    if (rc == 0) {
        uint64_t loan = p->decode_pool - p->decode_lent < hi ? p->decode_pool - p->decode_lent : hi;
        p->decode_lent += loan;
        rc = (long)loan;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static void decode_return(srv *s, uint64_t loan)
{
    pthread_mutex_lock(&s->mu);
    s->pl->decode_lent -= loan;
    pthread_cond_broadcast(&s->cv_decode);
    pthread_mutex_unlock(&s->mu);
}

/* One sample's JPEG into its place, within its worker's keep plus what it
 * borrows when the image needs more (see "decode memory"). */
static long augment_one(srv *s, worker_ctx *w, const srv_job *j, uint32_t i,
                        const lf_field_view *v, void *dst, size_t each)
{
    uint64_t keep = s->pl->decode_keep;
    long need = lf_tf_jpeg_decode_need(w->ws, v->data, v->size);
    long loan = 0, least = need > 0 && (uint64_t)need > keep ?
                           lf_tf_jpeg_strip_need(w->ws, v->data, v->size, 1) : 0;
    int borrowed = least > 0;
    if (borrowed) {
        lf_tf_ws_trim(w->ws);    /* what it kept counts in keep, not in the loan */
        loan = decode_borrow(s, j->ids[i], (uint64_t)least,
                             (uint64_t)least > keep ? (uint64_t)least - keep : 0,
                             (uint64_t)need - keep);
        if (loan < 0) return loan;
    }
    lf_tf_ws_set_decode_budget(w->ws, keep + (uint64_t)loan);
    long n = lf_tf_jpeg_augment(w->ws, dst, each, v->data, v->size, &s->cfg.image, j->epoch,
                                j->ids[i], NULL);
    if (borrowed) {
        lf_tf_ws_trim(w->ws);
        decode_return(s, (uint64_t)loan);
    }
    return n;
}

/* ---- refused images --------------------------------------------------------
 *
 * The transform refuses some JPEGs whatever the configuration: over its
 * pixel, scan or coefficient limits (its defaults, the same in every
 * server), damaged past the block checksum (it was stored damaged), or of
 * a kind it does not handle. lf-shard refuses the oversized ones when it
 * converts, but a dataset made before it did may hold them. By default
 * the server stops there, naming the sample, its shard and the two ways
 * out; with --on-corrupt=skip it leaves the sample out of its batch, as
 * it leaves out a damaged block's samples: the same sample on every run
 * (the crop of an epoch is seeded), so reruns deliver the same batches.
 * Decode memory that only --memory-limit lacks is not this: that stops
 * the server in every mode (decode_borrow), as the configuration, not the
 * data, is at fault.
 */
static int is_refused_image(long n)
{
    return n == LF_TF_E_LIMIT || n == LF_TF_E_CORRUPT || n == LF_TF_E_UNSUPPORTED;
}

/* Counts sample id as left out once more; the first time, names it in
 * the log and in the summary's list. Takes mu. */
static void quarantine_image(srv *s, uint64_t id, const char *shard, const char *why)
{
    uint8_t *seen = &s->pl->refused[id / 8], bit = (uint8_t)(1u << (id % 8));
    pthread_mutex_lock(&s->mu);
    s->m.quarantined_samples++;
    int first = !(*seen & bit);
    if (first) {
        *seen |= bit;
        if (s->m.quarantined_images < SRV_QUARANTINE_LIST)
            s->refused[s->m.quarantined_images] = id;
        s->m.quarantined_images++;
    }
    pthread_mutex_unlock(&s->mu);
    if (first && !s->cfg.quiet)
        fprintf(stderr, "lf-server: quarantined: sample %" PRIu64 " (%s): the JPEG transform "
                "refuses it: %s\n", id, shard, why);
}

/* Sample i's JPEG was refused (n < 0, not a stop or a --memory-limit
 * shortfall): stops the server, or under --on-corrupt=skip leaves the
 * sample out of job j. Returns 1 (left out: lay the job out again) or n. */
static int refuse_image(srv *s, worker_ctx *w, srv_job *j, uint32_t i, long n)
{
    uint64_t id = j->ids[i];
    const char *shard = srv_sample_shard(s, id);
    char why[400];
    snprintf(why, sizeof why, "%s: %s", lf_tf_strerror((int)n), lf_tf_reason(w->ws));
    if (s->cfg.skip_corrupt && is_refused_image(n)) {
        quarantine_image(s, id, shard, why);
        job_remove(s, j, i);
        return 1;
    }
    if (is_refused_image(n))
        srv_fail(s, "sample %" PRIu64 " (%s): the JPEG transform refuses it: %s; the dataset "
                 "holds an image lf-server cannot use (made by an lf-shard that did not check "
                 "the size, or stored damaged): re-create it with the current lf-shard create "
                 "images (it refuses such files, or leaves them out with --skip-bad), or run "
                 "lf-server with --on-corrupt skip to leave the sample out", id, shard, why);
    else
        srv_fail(s, "sample %" PRIu64 " (%s): image transform: %s", id, shard, why);
    return (int)n;
}

/* Image batch: each sample's JPEG decoded, cropped, resized and normalized
 * straight into its place in the slot; labels copied beside. Returns 0, 1
 * when a refused image was left out of j (its layout changed), or < 0. */
static int fill_images(srv *s, worker_ctx *w, srv_job *j, unsigned char *slot,
                       const lf_layout *l)
{
    const lf_tensor_desc *img = lf_layout_find(l, "images"), *lab = lf_layout_find(l, "labels");
    size_t each = lf_tf_image_out_size(&s->cfg.image);
    if (!w->ws && lf_tf_ws_create(NULL, &w->ws) < 0) return -ENOMEM;
    for (uint32_t i = 0; i < j->n; i++) {
        lf_field_view views[LF_MAX_FIELDS];
        int rc = sample_views(s, j, i, views);
        if (rc < 0) return rc;
        const lf_field_view *v = &views[s->token_field];
        long n = augment_one(s, w, j, i, v, slot + img->offset + i * each, each);
        if (n == -E2BIG || n == -ECANCELED) return (int)n;
        if (n < 0) return refuse_image(s, w, j, i, n);
        if ((rc = copy_label(s, views, slot, lab, i)) < 0) return rc;
    }
    return 0;
}

/* Frames batch: every sample's frames padded with zeros to the longest. */
static int fill_frames(srv *s, worker_ctx *w, const srv_job *j, unsigned char *slot,
                       const lf_layout *l)
{
    const lf_tensor_desc *fr = lf_layout_find(l, "frames"), *len = lf_layout_find(l, "lengths");
    const lf_tensor_desc *lab = lf_layout_find(l, "labels");
    if (j->n > w->frames_cap) {
        lf_tf_frames *v = realloc(w->frames, j->n * sizeof *v);
        if (!v) return -ENOMEM;
        w->frames = v;
        w->frames_cap = j->n;
    }
    lf_tf_frames *items = w->frames;
    for (uint32_t i = 0; i < j->n; i++) {
        lf_field_view views[LF_MAX_FIELDS];
        int rc = sample_views(s, j, i, views);
        if (rc < 0 || (rc = copy_label(s, views, slot, lab, i)) < 0) return rc;
        const lf_field_view *v = &views[s->token_field];
        if (v->count != j->lengths[i]) {
            srv_fail(s, "sample %" PRIu64 ": %u frames, index says %" PRIu64, j->ids[i],
                     v->count, j->lengths[i]);
            return -EIO;
        }
        items[i] = (lf_tf_frames){.data = v->data, .nframes = v->count};
    }
    int rc = lf_tf_frames_pad(slot + fr->offset, fr->size, (int64_t *)(void *)(slot + len->offset),
                              len->size, s->frame_dtype, s->frame_width, j->row_len, items, j->n);
    if (rc < 0) srv_fail(s, "frames transform: %s", lf_tf_strerror(rc));
    return rc;
}

/* Writes a job's tensors and header into its slot. */
static int assemble(srv *s, worker_ctx *w, srv_job *j)
{
    srv_rank *r = &s->ranks[j->li];
    unsigned char *slot = r->seg + lf_ring_slot_offset(j->slot, s->slot_size);
    lf_layout l;
    int rc;
    do { /* again, from the start, after an image left out (refuse_image): rare */
        rc = srv_job_layout(s, j, &l);
        if (rc < 0 || l.end > s->slot_size) {
            srv_fail(s, "job layout does not fit its slot (%d)", rc);
            return -EOVERFLOW;
        }
        rc = s->images   ? fill_images(s, w, j, slot, &l)
             : s->frames ? fill_frames(s, w, j, slot, &l)
                         : fill_tokens(s, w, j, slot, &l);
    } while (rc == 1);
    if (rc < 0) return rc;
    const lf_tensor_desc *ids = lf_layout_find(&l, "sample_ids");
    const lf_tensor_desc *offs = lf_layout_find(&l, "sample_offsets");
    const lf_tensor_desc *src = lf_layout_find(&l, "source");
    /* an eval batch names the held-out set's own samples (they follow the
     * training ones in s->ds); their source is the number after the last
     * --data */
    uint64_t first = j->eval ? s->train_samples : 0;
    for (uint32_t i = 0; i < j->n; i++) {   /* a piece: its sample, and where it starts */
        uint64_t id = lf_plan_piece_sample(j->ids[i]) - first;
        uint64_t at = lf_plan_piece_index(j->ids[i]) * s->piece_len;
        memcpy(slot + ids->offset + (size_t)i * sizeof id, &id, sizeof id);
        if (offs) memcpy(slot + offs->offset + (size_t)i * sizeof at, &at, sizeof at);
        if (src)
            lf_put_int(slot + src->offset, LF_DTYPE_I32, i,
                       lf_dataset_sample_source(s->ds, lf_plan_piece_sample(j->ids[i])));
    }
    lf_msg_ready ready = {.slot = j->slot, .epoch = j->epoch, .step = j->step, .seq = j->seq};
    return lf_slot_write_header(slot, s->slot_size, r->rank, &ready, j->n, j->step_tokens, &l);
}

static void finish_job(srv *s, srv_job *j)
{
    if (j->counts) srv_count_off(s, j);
    for (uint32_t i = 0; i < j->nblocks; i++) srv_unpin(s, j->blocks[i].entry);
    j->done = 1;
    s->pl->jobs_in_flight--;
    if (s->pl->plan_wait == PLAN_WAITS_ROOM) pthread_cond_signal(&s->cv_plan);
    if (s->pl->catchup_waits) pthread_cond_broadcast(&s->cv_catchup);
}

/* --on-corrupt=skip: leaves the samples of quarantined blocks out of job j.
 * Under mu. */
void srv_drop_quarantined(srv *s, srv_job *j)
{
    for (uint32_t i = j->n; i-- > 0;) {
        if (!j->blocks[j->block_of[i]].entry->bad) continue;
        job_remove(s, j, i);
        s->m.quarantined_samples++;
    }
}

/* Assembles job j, taken from the queue under mu, which also gave
 * `discard` (set under mu when the job's rank has gone away). */
void srv_run_assembly(srv *s, worker_ctx *w, srv_job *j, int discard)
{
    uint64_t t0 = 0, t1 = 0;
    int rc = 0;
    if (!discard) {
        t0 = srv_now_ns();
        rc = assemble(s, w, j);
        if (rc < 0) srv_fail(s, "assembly: %s", strerror(-rc)); /* the first reason stays */
        t1 = srv_now_ns();
    }
    pthread_mutex_lock(&s->mu);
    /* A half-written slot is never announced: its rank gets the error. */
    if (rc < 0) j->discard = 1;
    s->m.assemble_busy_ns += t1 - t0;
    if (!discard)
        srv_trace_span(s, SRV_STAGE_ASSEMBLE, w->index, t0, t1, s->cfg.local[j->li], j->step);
    finish_job(s, j);
    pthread_mutex_unlock(&s->mu);
    srv_notify_control(s);
}
