/*
 * pipeline.c — lf-server's pipeline: its threads' start and stop, and the
 * workers' loop.
 *
 * A job is one local rank's batch of one step. It goes through the stages
 * in this order, one file each:
 *   planner.c   plan step -> one job per local rank; waits for a free slot
 *               and cache room, pins the job's blocks; the epoch's counts
 *   cache.c     the block cache: entries, pins, pending counts, LRU, and
 *               the read, decode and assembly queues
 *   read.c      readers: a block's stored bytes, via io_uring or pread
 *   decode.c    workers: a block verified and decompressed into the cache
 *   assemble.c  workers: a job laid out in its rank's ring slot
 *   catchup.c   the planner of a rejoined rank until it meets the planner
 * then control.c announces the job (READY) in sequence order.
 *
 * Readers and workers are pools of threads (--readers, --workers). A
 * worker does both kinds of work, assembly first (worker_main): assembly
 * frees slots and pins, decoding adds work.
 *
 * Locking: srv.h. The structures the stages share: stages.h.
 */
#include "stages.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- workers ------------------------------------------------------------ */

static void *worker_main(void *arg)
{
    const worker *me = arg;
    srv *s = me->s;
    srv_pipeline *p = s->pl;
    worker_ctx w = {.index = me->index};
    if (lf_block_decoder_create(&w.dec) < 0) {
        srv_fail(s, "worker: cannot create a block decoder");
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stop && p->asm_len == 0 && p->decode_q.len == 0)
            pthread_cond_wait(&s->cv_work, &s->mu);
        if (s->stop) { pthread_mutex_unlock(&s->mu); break; }
        if (p->asm_len > 0) {
            /* Assembly first: it frees slots and pins, decoding adds work. */
            srv_job *j = p->asm_q[p->asm_head];
            p->asm_head = (p->asm_head + 1) % p->asm_cap;
            p->asm_len--;
            if (s->cfg.skip_corrupt) srv_drop_quarantined(s, j);
            int discard = j->discard;
            pthread_mutex_unlock(&s->mu);
            srv_run_assembly(s, &w, j, discard);
        } else {
            cache_entry *e = srv_q_pop(&p->decode_q);
            pthread_mutex_unlock(&s->mu);
            srv_run_decode(s, &w, e);
        }
    }
    free(w.seqs);
    free(w.frames);
    lf_tf_ws_free(w.ws);
    lf_block_decoder_free(w.dec);
    srv_add_thread_cpu(s, &s->m.worker_cpu_ns);
    return NULL;
}

/* ---- set-up and tear-down ----------------------------------------------- */

int srv_pipeline_init(srv *s)
{
    srv_pipeline *p = calloc(1, sizeof *p);
    if (!p) return -ENOMEM;
    s->pl = p;
    p->nshards = lf_dataset_shards(s->ds);
    /* The dataset's own descriptors: a second set would double what the
     * open-file limit must hold (3,000 shards under a limit of 3,100 opened
     * for lf-plan and then failed here). */
    p->shard_fds = malloc((p->nshards ? p->nshards : 1) * sizeof *p->shard_fds);
    if (!p->shard_fds) return -ENOMEM;
    for (uint32_t i = 0; i < p->nshards; i++) {
        /* an index-only dataset has none: its reads are refused (read.c) */
        if ((p->shard_fds[i] = lf_dataset_shard_fd(s->ds, i)) < 0 &&
            !lf_dataset_index_only(s->ds)) {
            fprintf(stderr, "lf-server: %s: not open as a file\n", lf_dataset_shard_path(s->ds, i));
            return -ECANCELED;
        }
    }
    p->nbuckets = 1024;
    while (p->nbuckets < lf_dataset_blocks(s->ds) && p->nbuckets < (1u << 22)) p->nbuckets <<= 1;
    p->buckets = calloc(p->nbuckets, sizeof *p->buckets);
    p->uses = calloc(lf_dataset_blocks(s->ds) + 1, sizeof *p->uses);
    p->asm_cap = s->cfg.nlocal * srv_ring_slots(s);
    p->asm_q = calloc(p->asm_cap, sizeof *p->asm_q);
    p->readers = calloc(s->cfg.readers, sizeof *p->readers);
    p->workers = calloc(s->cfg.workers, sizeof *p->workers);
    if (!p->buckets || !p->uses || !p->asm_q || !p->readers || !p->workers) return -ENOMEM;
    if (s->images && s->cfg.skip_corrupt &&
        !(p->refused = calloc(lf_dataset_samples(s->ds) / 8 + 1, 1)))
        return -ENOMEM;
    size_t buf_size = (lf_dataset_max_block_stored(s->ds) + 4095u) / 4096u * 4096u;
    for (uint32_t i = 0; i < s->cfg.readers; i++) {
        int rc = srv_reader_init(s, &p->readers[i], s->cfg.read_depth, buf_size ? buf_size : 4096);
        if (rc < 0) return rc;
        p->readers[i].index = i;
    }
    for (uint32_t i = 0; i < s->cfg.workers; i++) p->workers[i] = (worker){.s = s, .index = i};
    int rc = srv_trace_init(s);
    if (rc < 0) return rc;
    srv_decode_budget(s);
    return srv_plan_first(s, &p->plan);
}

/* Names a thread for top -H, perf and ps: lf-worker0, lf-reader1, ... */
static void name_thread(pthread_t t, const char *role, uint32_t i)
{
    char name[16]; /* the kernel's limit, with the NUL */
    snprintf(name, sizeof name, "lf-%s%u", role, i % 1000);
    pthread_setname_np(t, name);
}

int srv_pipeline_start(srv *s)
{
    srv_pipeline *p = s->pl;
    for (uint32_t i = 0; i < s->cfg.readers; i++, p->nreaders_started++) {
        if (pthread_create(&p->readers[i].thread, NULL, srv_reader_main, &p->readers[i]) != 0)
            return -EAGAIN;
        name_thread(p->readers[i].thread, "reader", i);
    }
    for (uint32_t i = 0; i < s->cfg.workers; i++, p->nworkers_started++) {
        if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]) != 0)
            return -EAGAIN;
        name_thread(p->workers[i].thread, "worker", i);
    }
    if (pthread_create(&p->planner, NULL, srv_planner_main, s) != 0) return -EAGAIN;
    name_thread(p->planner, "planner", 0);
    p->planner_started = 1;
    return 0;
}

static void free_jobs(srv_job *j)
{
    while (j) {
        srv_job *next = j->next;
        srv_job_free(j);
        j = next;
    }
}

void srv_pipeline_stop(srv *s)
{
    srv_pipeline *p = s->pl;
    if (!p) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv_plan);
    pthread_cond_broadcast(&s->cv_read);
    pthread_cond_broadcast(&s->cv_work);
    pthread_cond_broadcast(&s->cv_catchup);
    pthread_cond_broadcast(&s->cv_decode);
    while (p->catchups_running > 0) pthread_cond_wait(&s->cv_catchup, &s->mu);
    pthread_mutex_unlock(&s->mu);
    if (p->planner_started) pthread_join(p->planner, NULL);
    for (uint32_t i = 0; i < p->nworkers_started; i++) pthread_join(p->workers[i].thread, NULL);
    for (uint32_t i = 0; i < p->nreaders_started; i++) pthread_join(p->readers[i].thread, NULL);
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        srv_rank *r = &s->ranks[li];
        free_jobs(r->jobs_head);
        free_jobs(r->eval_head);
        r->jobs_head = r->jobs_tail = r->eval_head = r->eval_tail = NULL;
    }
    for (uint64_t b = 0; p->buckets && b < p->nbuckets; b++)
        while (p->buckets[b]) srv_cache_drop(p, p->buckets[b]);
    for (uint32_t i = 0; p->readers && i < s->cfg.readers; i++) srv_reader_exit(&p->readers[i]);
    lf_plan_free(p->plan);
    free(p->shard_fds);
    free(p->buckets);
    free(p->uses);
    free(p->refused);
    free(p->asm_q);
    free(p->readers);
    free(p->workers);
    free(p);
    s->pl = NULL;
    srv_trace_free(s);
}

void srv_pipeline_depths(const srv *s, srv_depths *d)
{
    const srv_pipeline *p = s->pl;
    d->read_q = p->read_q.len;
    d->decode_q = p->decode_q.len;
    d->assemble_q = p->asm_len;
    d->jobs_in_flight = p->jobs_in_flight;
    d->cache_bytes = p->cache_bytes;
}
