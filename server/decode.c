/*
 * decode.c — the workers' first task: a read block into the cache.
 *
 * Workers verify and decompress a block (lf_block_decode) straight into
 * its cache entry, then count it off every job that waits for it; a job
 * with nothing missing goes to the assembly queue. With
 * --on-corrupt=skip, a block whose stored bytes are damaged is
 * quarantined instead: kept empty and marked, its samples left out of
 * their batches (assemble.c), never read again.
 */
#include "stages.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* Counts a decoded block off every job waiting for it. Under mu. */
static void block_ready(srv *s, cache_entry *e)
{
    e->state = CE_READY;
    for (srv_job_wait *w = e->waiters; w; w = w->next)
        if (--w->job->missing == 0) srv_asm_push(s, w->job);
    e->waiters = e->waiters_last = NULL;
    if (e->pins == 0) srv_park(s, e);
}

/* Damage in the stored bytes, as opposed to a failing machine (memory). */
static int is_corrupt(long n, uint32_t raw_size)
{
    return n == LF_SHARD_E_CHECKSUM || n == LF_SHARD_E_DECOMPRESS || n == LF_SHARD_E_FORMAT ||
           (n >= 0 && n != (long)raw_size);
}

/* Returns 0 (e->bad set when the block is quarantined) or <0 on failure,
 * reported (srv_fail): the block never becomes ready, and the server stops.
 * The block's record table (where each sample's record starts) is made
 * from the decoded records themselves, so no per-sample index is needed,
 * and lives after the bytes in the same allocation. */
static int decode_entry(srv *s, worker_ctx *w, cache_entry *e)
{
    const lf_block_info *bi = lf_dataset_block(s->ds, e->block);
    lf_shard_error err;
    size_t table_at = ((size_t)e->raw_size + 3) & ~(size_t)3;   /* u32-aligned */
    e->raw = malloc(table_at + ((size_t)bi->nsamples + 1) * sizeof *e->records);
    if (!e->raw) {
        srv_fail(s, "block %" PRIu64 ": cannot allocate %" PRIu32 " bytes to decode it", e->block,
                 e->raw_size);
        return -ENOMEM;
    }
    e->records = (uint32_t *)(void *)(e->raw + table_at);
    /* The block's shard index, checked the first time one of its blocks
     * comes here (opened mapped): a fault there is the whole shard's, so
     * it stops the server even under --on-corrupt=skip. */
    if (lf_dataset_check_block_index(s->ds, e->block, &err) != 0) {
        srv_fail(s, "block %" PRIu64 ": %s", e->block, err.msg);
        return -EIO;
    }
    long n = lf_block_decode(w->dec, s->ds, e->block, e->owner->bufs[e->buf],
                             bi->stored_size, e->raw, e->raw_size, &err);
    if (n == (long)e->raw_size) {
        int rc = lf_block_records(s->ds, e->block, e->raw, e->raw_size, e->records, &err);
        if (rc < 0) n = rc;
    }
    if (s->cfg.skip_corrupt && is_corrupt(n, e->raw_size)) {
        if (!s->cfg.quiet)
            fprintf(stderr, "lf-server: quarantined: %s\n",
                    n < 0 ? err.msg : "decoded size differs from the index");
        free(e->raw);
        e->raw = NULL;
        e->records = NULL;
        e->bad = 1;
        return 0;
    }
    if (n != (long)e->raw_size) {
        srv_fail(s, "block %" PRIu64 ": %s", e->block,
                 n < 0 ? err.msg : "decoded size differs from the index");
        return -EIO;
    }
    return 0;
}

void srv_run_decode(srv *s, worker_ctx *w, cache_entry *e)
{
    uint64_t t0 = srv_now_ns();
    int rc = decode_entry(s, w, e);
    uint64_t t1 = srv_now_ns();
    pthread_mutex_lock(&s->mu);
    s->m.decode_busy_ns += t1 - t0;
    srv_trace_span(s, SRV_STAGE_DECODE, w->index, t0, t1, e->block, 0);
    reader *rd = e->owner;
    rd->free_bufs[rd->nfree++] = e->buf;
    if (s->pl->read_q.len > 0) pthread_cond_broadcast(&s->cv_read); /* else nothing to read */
    if (rc == 0 && e->bad) {
        s->pl->cache_bytes -= e->raw_size;
        e->raw_size = 0;
        if (s->m.quarantined_blocks < SRV_QUARANTINE_LIST)
            s->quarantine[s->m.quarantined_blocks] = e->block;
        s->m.quarantined_blocks++;
    }
    if (rc == 0) {
        s->m.blocks_decoded += !e->bad;
        block_ready(s, e);
    }
    pthread_mutex_unlock(&s->mu);
}
