/*
 * pipeline.c — planner, readers and workers of lf-server.
 *
 * A job is one local rank's batch of one step. The planner makes jobs in
 * plan order, and before it makes one it waits for a free slot in that
 * rank's ring: that is the backpressure from the trainers. Making a job pins
 * the decompressed blocks its samples live in: a block already in the cache
 * is a hit; a missing one gets a cache entry and goes to the read queue.
 *
 * Readers take queued entries, read their stored bytes into buffers they
 * own (registered with their io_uring, or plain pread) and pass them to the
 * workers. Workers verify and decompress a block (lf_block_decode) straight
 * into its cache entry, then count it off every job that waits for it; a
 * job with nothing missing goes to the assembly queue, and a worker lays it
 * out directly in the rank's ring slot (lf_tf token pad/pack). The control
 * thread announces finished jobs in sequence order.
 *
 * The cache holds decompressed blocks that still have pending samples: at
 * each epoch start a scout copy of the plan (lf_plan_state_save/restore)
 * runs through the epoch and counts, per block, the samples the local
 * ranks will take from it; each assembled sample counts one off, and a
 * block whose count reaches zero is freed as soon as no job pins it. The
 * unpinned blocks that are still wanted stay in LRU order up to
 * cfg.memory_limit's share; the planner waits when a new job would push
 * the cache past it while other jobs are in flight, so memory stays bounded
 * whatever the dataset. The counts steer only what is kept: a wrong count
 * can cost a re-read, never a wrong byte, since pinned blocks are never
 * freed.
 *
 * A rank whose client died can rejoin the run (control.c): its new client
 * starts from its saved position, usually behind the planner. A catch-up
 * thread then runs a plan of its own, replayed to that position (planning
 * reads no data), and makes that rank's jobs until it reaches the step the
 * planner has not decided yet for the rank; there it hands over and the
 * planner makes the rank's jobs again. Meanwhile the planner skips the rank
 * and the other ranks go on. Which thread owns a step is decided under
 * srv.mu with step keys (srv_pos_key): the planner records, per rank, the
 * next step it will decide (planner_key) and skips steps before the rank's
 * from_key (its START position); the catch-up thread makes every step
 * below planner_key and hands over at the first one that is not.
 *
 * Pending counts stay exact through deaths and rejoins: each step of each
 * rank counts its samples off once, either through its job (assembled or
 * discarded because the rank died) or, when the planner skips a rank that
 * is gone or that starts later, at the skip. counted_key per rank remembers
 * how far that went, so a catch-up job for a step already counted (one
 * delivered before the client died, or skipped while it was gone) does not
 * count again. The planner counts nothing off for a rank being caught up;
 * if that rank's client dies too, its catch-up thread still walks on to
 * the planner, counting the steps off without serving them, and hands
 * over (a client gone before its START gets such a thread then). A block
 * freed too early costs a re-read, never a wrong byte; one never counted
 * down stays cached, with no reason, until evicted or the next epoch.
 *
 * Locking: srv.mu guards every list, queue, count and cache field; the
 * reads, the decompression, the assembly and the scout's walk run without
 * it, on memory that the state machine hands to exactly one thread at a
 * time (a QUEUED entry to one reader, a DECODING entry to one worker, a job
 * to one assembler; the scout's plan copy and counts are the planner's).
 */
#include "srv.h"

#include "lf_ring.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

enum { CE_QUEUED, CE_READING, CE_DECODING, CE_READY };

/* What the planner sleeps on: only an event that can end its wait wakes it
 * (a wake-up per finished job or per freed slot of another rank would cost
 * a context switch each for nothing). */
enum { PLAN_RUNS, PLAN_WAITS_SLOT, PLAN_WAITS_ROOM };

struct cache_entry {
    uint64_t block;
    unsigned char *raw;          /* decompressed bytes (CE_READY) */
    uint32_t raw_size;
    int state;
    int bad;                     /* --on-corrupt=skip: failed to decode, raw NULL */
    uint32_t pins;               /* jobs that still need this block */
    srv_job_wait *waiters, *waiters_last; /* jobs waiting for it to be decoded, oldest first */
    cache_entry *hnext;          /* hash chain */
    cache_entry *qnext;          /* read or decode queue */
    cache_entry *lru_prev, *lru_next; /* unpinned and ready: eviction order */
    struct reader *owner;        /* reader whose buffer holds the stored bytes */
    uint32_t buf;                /* that buffer's index */
};

typedef struct reader {
    srv *s;
    pthread_t thread;
    struct io_uring ring;
    int use_uring;
    uint32_t nbufs;
    unsigned char **bufs;
    uint32_t *free_bufs, nfree;
    uint32_t *got;               /* io_uring: bytes read so far, per batch entry */
    uint32_t *stalls;            /* io_uring: resubmissions in a row that read nothing */
    uint64_t fault_rng;          /* LF_TEST_URING_FAULTS: this reader's draws */
    uint64_t retries, injected;  /* resubmitted reads; of them, faked ones */
} reader;

typedef struct queue {
    cache_entry *head, *tail;
    uint32_t len;
} queue;

typedef struct srv_pipeline {
    lf_plan *plan;
    pthread_t planner;
    int planner_started;
    reader *readers;
    uint32_t nreaders_started;
    pthread_t *workers;
    uint32_t nworkers_started;
    int *shard_fds;
    uint32_t nshards;
    cache_entry **buckets;
    uint64_t nbuckets;           /* a power of two */
    uint64_t cache_bytes;        /* raw bytes of every entry */
    uint64_t lru_bytes;          /* of them, the idle entries' (in the LRU) */
    cache_entry *lru_head, *lru_tail;
    uint32_t *uses;              /* per block: local samples still to come this epoch */
    uint32_t uses_epoch;         /* the epoch `uses` counts */
    queue read_q, decode_q;
    srv_job **asm_q;             /* jobs ready to assemble (ring of cap entries) */
    uint32_t asm_head, asm_len, asm_cap;
    uint32_t jobs_in_flight;
    int plan_wait;               /* PLAN_*: what the planner sleeps on */
    uint32_t plan_wait_li;       /* PLAN_WAITS_SLOT: in this rank's ring */
    uint32_t catchup_waits;      /* catch-up threads waiting for cache room */
    uint32_t catchups_running;   /* catch-up threads not finished yet */
    uint32_t last_gen;           /* the last catch-up generation handed out */
} srv_pipeline;

/* ---- queues and cache (all under s->mu) ------------------------------- */

static void q_push(queue *q, cache_entry *e)
{
    e->qnext = NULL;
    if (q->tail) q->tail->qnext = e;
    else q->head = e;
    q->tail = e;
    q->len++;
}

static cache_entry *q_pop(queue *q)
{
    cache_entry *e = q->head;
    if (!e) return NULL;
    q->head = e->qnext;
    if (!q->head) q->tail = NULL;
    q->len--;
    return e;
}

static uint64_t hash_block(uint64_t b)
{
    b ^= b >> 33;
    b *= 0xff51afd7ed558ccdull;
    return b ^ (b >> 33);
}

static cache_entry *cache_find(srv_pipeline *p, uint64_t block)
{
    cache_entry *e = p->buckets[hash_block(block) & (p->nbuckets - 1)];
    while (e && e->block != block) e = e->hnext;
    return e;
}

static void lru_remove(srv_pipeline *p, cache_entry *e)
{
    if (e->lru_prev) e->lru_prev->lru_next = e->lru_next;
    else p->lru_head = e->lru_next;
    if (e->lru_next) e->lru_next->lru_prev = e->lru_prev;
    else p->lru_tail = e->lru_prev;
    e->lru_prev = e->lru_next = NULL;
    p->lru_bytes -= e->raw_size;
}

static void lru_append(srv_pipeline *p, cache_entry *e)
{
    e->lru_prev = p->lru_tail;
    e->lru_next = NULL;
    if (p->lru_tail) p->lru_tail->lru_next = e;
    else p->lru_head = e;
    p->lru_tail = e;
    p->lru_bytes += e->raw_size;
}

static void cache_drop(srv_pipeline *p, cache_entry *e)
{
    cache_entry **pp = &p->buckets[hash_block(e->block) & (p->nbuckets - 1)];
    while (*pp != e) pp = &(*pp)->hnext;
    *pp = e->hnext;
    p->cache_bytes -= e->raw_size;
    free(e->raw);
    free(e);
}

/* The index of the first of job j's blocks (sorted, distinct) >= block. */
static uint32_t job_block_at(const srv_job *j, uint64_t block)
{
    uint32_t lo = 0, hi = j->nblocks;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (j->blocks[mid].id < block) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int job_has_block(const srv_job *j, uint64_t block)
{
    uint32_t k = job_block_at(j, block);
    return k < j->nblocks && j->blocks[k].id == block;
}

/* Evicts idle blocks, oldest first, until `need` more bytes fit, sparing
 * job `spare`'s own (NULL: none): it is about to pin them, and evicting
 * one would only read it again, over the limit. */
static void cache_make_room(srv *s, uint64_t need, const srv_job *spare)
{
    srv_pipeline *p = s->pl;
    for (cache_entry *e = p->lru_head, *next; e && p->cache_bytes + need > s->cache_limit;
         e = next) {
        next = e->lru_next;
        if (spare && job_has_block(spare, e->block)) continue;
        lru_remove(p, e);
        cache_drop(p, e);
        s->m.evictions++;
    }
}

/* An unpinned, decoded block: freed if no sample of it is pending this
 * epoch, else kept (LRU) while it fits. A quarantined block holds no bytes
 * and stays known, so its damage is found once and never read again. */
static void park(srv *s, cache_entry *e)
{
    if (e->bad) return; /* kept, empty, for the server's life: never re-read */
    if (s->pl->uses[e->block] == 0) {
        cache_drop(s->pl, e);
        s->m.blocks_done++;
        return;
    }
    lru_append(s->pl, e);
    cache_make_room(s, 0, NULL);
}

static void unpin(srv *s, cache_entry *e)
{
    if (--e->pins == 0 && e->state == CE_READY) park(s, e);
}

/* Counts job j's samples off the pending counts of its epoch (if that is
 * the epoch counted now); an idle cached block with none left is freed.
 * Block by block, from the job's own arrays: it runs under mu. */
static void count_off(srv *s, const srv_job *j)
{
    srv_pipeline *p = s->pl;
    if (j->epoch != p->uses_epoch) return;
    for (uint32_t k = 0; k < j->nblocks; k++) {
        uint64_t b = j->blocks[k].id;
        uint32_t taken = j->blocks[k].nsamples;
        if (p->uses[b] == 0) continue;
        p->uses[b] -= taken < p->uses[b] ? taken : p->uses[b];
        if (p->uses[b] > 0) continue;
        cache_entry *e = cache_find(p, b);
        if (e && e->pins == 0 && e->state == CE_READY && !e->bad) {
            lru_remove(p, e);
            park(s, e);
        }
    }
}

uint64_t srv_pos_key(uint32_t epoch, uint64_t step)
{
    const uint64_t step_max = (1ull << 40) - 1, epoch_max = SRV_EPOCH_MAX;
    return ((epoch < epoch_max ? epoch : epoch_max) << 40) | (step < step_max ? step : step_max);
}

/* Pins `block` for a job: returns the entry and whether it is ready. */
static cache_entry *pin_block(srv *s, uint64_t block, int *ready)
{
    srv_pipeline *p = s->pl;
    cache_entry *e = cache_find(p, block);
    if (e) {
        if (e->pins++ == 0 && e->state == CE_READY && !e->bad) lru_remove(p, e);
        *ready = e->state == CE_READY;
        s->m.cache_hits += *ready;
        return e;
    }
    const lf_block_info *bi = lf_dataset_block(s->ds, block);
    e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->block = block;
    e->raw_size = bi->raw_size;
    e->pins = 1;
    e->state = CE_QUEUED;
    uint64_t h = hash_block(block) & (p->nbuckets - 1);
    e->hnext = p->buckets[h];
    p->buckets[h] = e;
    p->cache_bytes += e->raw_size;
    s->m.cache_misses++;
    q_push(&p->read_q, e);
    /* Readers with no free buffer wait on cv_read too: a signal could wake
     * one of them alone and leave a reader that could read asleep. */
    pthread_cond_broadcast(&s->cv_read);
    *ready = 0;
    return e;
}

static void asm_push(srv *s, srv_job *j)
{
    srv_pipeline *p = s->pl;
    p->asm_q[(p->asm_head + p->asm_len++) % p->asm_cap] = j;
    pthread_cond_signal(&s->cv_work);
}

/* ---- planner ------------------------------------------------------------ */

void srv_job_free(srv_job *j)
{
    if (!j) return;
    free(j->ids);
    free(j->lengths);
    free(j->row_of);
    free(j->micro_len);
    free(j->blocks);
    free(j->block_of);
    free(j);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* row_of[i] = r for the samples i in [start[r], start[r + 1]) of each of
 * the job's rows (the plan's rows, or its micro-batches). */
static void mark_rows(srv_job *j, const uint32_t *start)
{
    for (uint32_t r = 0; r < j->rows; r++)
        for (uint32_t i = start[r]; i < start[r + 1] && i < j->n; i++) j->row_of[i] = r;
}

/* --micro-batches: the job's rows are the plan's micro-batches (row_of is
 * each sample's micro-batch), each padded to its own micro_len. */
static int job_micro(srv_job *j, const lf_plan_batch *b)
{
    j->rows = b->micro;
    j->micro_len = malloc((b->micro ? b->micro : 1) * sizeof *j->micro_len);
    if (!j->micro_len) return -ENOMEM;
    if (b->micro) memcpy(j->micro_len, b->micro_len, b->micro * sizeof *j->micro_len);
    mark_rows(j, b->micro_start);
    return 0;
}

/* block_of[i] = the index of sample i's block (sample_blk[i]) in the job's
 * sorted, distinct blocks, so the workers find a sample's bytes without
 * searching; each block counts its samples. */
static void mark_blocks(srv_job *j, const uint64_t *sample_blk)
{
    for (uint32_t i = 0; i < j->n; i++) {
        uint32_t k = job_block_at(j, sample_blk[i]);
        j->block_of[i] = k;
        j->blocks[k].nsamples++;
    }
}

/* Copies one rank's plan batch into a new job (no lock needed).
 * scratch_blocks: the caller's buffer, 2 x n entries: each sample's block
 * number, then the same sorted. */
static srv_job *job_from_batch(srv *s, uint32_t li, const lf_plan_step *st,
                               const lf_plan_batch *b, uint64_t **scratch_blocks)
{
    srv_job *j = calloc(1, sizeof *j);
    uint32_t n = b->nsamples, alloc = n ? n : 1;
    if (!j) return NULL;
    j->li = li;
    j->epoch = st->epoch;
    j->step = st->step;
    j->n = n;
    j->rows = b->rows;
    j->row_len = b->row_len;
    j->cost = b->cost;
    j->tokens = b->tokens;
    j->ids = malloc(alloc * sizeof *j->ids);
    j->lengths = malloc(alloc * sizeof *j->lengths);
    j->row_of = malloc(alloc * sizeof *j->row_of);
    uint64_t *blk = realloc(*scratch_blocks, 2 * (size_t)alloc * sizeof *blk);
    if (blk) *scratch_blocks = blk;
    if (!j->ids || !j->lengths || !j->row_of || !blk) {
        srv_job_free(j);
        return NULL;
    }
    memcpy(j->ids, b->ids, n * sizeof *j->ids);
    memcpy(j->lengths, b->lengths, n * sizeof *j->lengths);
    if (s->cfg.micro_batches) {
        if (job_micro(j, b) < 0) {
            srv_job_free(j);
            return NULL;
        }
    } else {
        mark_rows(j, b->row_start);
    }
    for (uint32_t i = 0; i < n; i++) blk[i] = lf_dataset_sample_block(s->ds, b->ids[i]);
    uint64_t *sorted = blk + alloc;
    memcpy(sorted, blk, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_u64);
    uint32_t nb = 0;
    for (uint32_t i = 0; i < n; i++)
        if (nb == 0 || sorted[nb - 1] != sorted[i]) sorted[nb++] = sorted[i];
    j->nblocks = nb;
    j->blocks = calloc(nb ? nb : 1, sizeof *j->blocks);
    j->block_of = malloc(alloc * sizeof *j->block_of);
    if (!j->blocks || !j->block_of) {
        srv_job_free(j);
        return NULL;
    }
    for (uint32_t k = 0; k < nb; k++) j->blocks[k].id = sorted[k];
    mark_blocks(j, blk);
    return j;
}

/* Of job j's blocks, the raw bytes not cached yet (*need) and those of the
 * cached ones idle in the LRU (*idle), which making room for j spares.
 * Under mu. */
static void job_cache_bytes(srv *s, const srv_job *j, uint64_t *need, uint64_t *idle)
{
    *need = *idle = 0;
    for (uint32_t i = 0; i < j->nblocks; i++) {
        const cache_entry *e = cache_find(s->pl, j->blocks[i].id);
        if (!e) *need += lf_dataset_block(s->ds, j->blocks[i].id)->raw_size;
        else if (e->pins == 0 && e->state == CE_READY && !e->bad) *idle += e->raw_size;
    }
}

/* Waits (under mu) until job j's rank (li) has a free slot and the job's new blocks
 * fit the cache. gen is the caller's catch-up generation (0: the planner),
 * key the job's step. Returns 0, 1 when the caller no longer makes this
 * rank's job (the rank is gone, or the other thread feeds it, or it starts
 * later), -1 on stop. */
static int wait_for_room(srv *s, const srv_job *j, uint32_t gen, uint64_t key)
{
    uint32_t li = j->li;
    srv_rank *r = &s->ranks[li];
    for (;;) {
        if (s->stop) return -1;
        if (r->gone || r->catchup_gen != gen || (gen == 0 && key < r->from_key)) return 1;
        if (r->nfree > 0) {
            uint64_t need, idle;
            job_cache_bytes(s, j, &need, &idle);
            /* What no eviction frees: pinned blocks and the job's own idle
             * ones. Nothing is evicted for a job that would not fit anyway,
             * and over the limit only when nothing else is in flight: one
             * job must always be able to run. */
            uint64_t kept = s->pl->cache_bytes - s->pl->lru_bytes + idle;
            if (kept + need <= s->cache_limit || s->pl->jobs_in_flight == 0) {
                cache_make_room(s, need, j);
                return 0;
            }
        }
        if (gen) { /* a catch-up thread: slots and room wake it on cv_catchup */
            uint32_t room = r->nfree > 0;
            s->pl->catchup_waits += room;
            pthread_cond_wait(&s->cv_catchup, &s->mu);
            s->pl->catchup_waits -= room;
            continue;
        }
        s->pl->plan_wait = r->nfree > 0 ? PLAN_WAITS_ROOM : PLAN_WAITS_SLOT;
        s->pl->plan_wait_li = li;
        pthread_cond_wait(&s->cv_plan, &s->mu);
        s->pl->plan_wait = PLAN_RUNS;
    }
}

/* Whether step `key` of rank li still has to count its samples off (once
 * per step, see the top). Under mu. */
static int claim_count(srv_rank *r, uint64_t key)
{
    if (key < r->counted_key) return 0;
    r->counted_key = key + 1;
    return 1;
}

/* Places job j of step `key` into its rank's ring. Under mu. */
static int submit_job(srv *s, srv_job *j, uint64_t key)
{
    srv_rank *r = &s->ranks[j->li];
    j->slot = r->free_slots[--r->nfree];
    j->seq = r->next_seq++;
    j->counts = claim_count(r, key);
    for (uint32_t i = 0; i < j->nblocks; i++) {
        int ready = 0;
        j->blocks[i].entry = pin_block(s, j->blocks[i].id, &ready);
        if (!j->blocks[i].entry) {
            for (uint32_t k = 0; k < i; k++) unpin(s, j->blocks[k].entry);
            j->nblocks = 0;
            return -ENOMEM;
        }
        j->missing += !ready;
    }
    /* Linked once every pin held, so a failed pin leaves no link behind;
     * appended, so jobs that a block completes go to assembly oldest first,
     * the order the control thread announces them in. */
    for (uint32_t i = 0; i < j->nblocks; i++) {
        cache_entry *e = j->blocks[i].entry;
        srv_job_wait *w = &j->blocks[i].wait;
        if (e->state == CE_READY) continue;
        *w = (srv_job_wait){.job = j};
        if (e->waiters_last) e->waiters_last->next = w;
        else e->waiters = w;
        e->waiters_last = w;
    }
    if (r->jobs_tail) r->jobs_tail->next = j;
    else r->jobs_head = j;
    r->jobs_tail = j;
    s->pl->jobs_in_flight++;
    if (j->missing == 0) asm_push(s, j);
    return 0;
}

static int before_start(const srv *s, const lf_plan_step *st)
{
    if (st->epoch != s->start_epoch) return st->epoch < s->start_epoch;
    return st->step < s->start_step;
}

/* The prepass's counts of epoch index e, when it counted that epoch and no
 * step of it is skipped (no resume inside it or after it); else NULL. */
static const uint32_t *prepass_uses(const srv *s, uint32_t e)
{
    uint32_t epoch = s->cfg.plan.epoch + e;
    int whole = s->start_epoch < epoch || (s->start_epoch == epoch && s->start_step == 0);
    if (e >= s->counted_epochs || !whole) return NULL;
    return s->epoch_uses + e * (lf_dataset_blocks(s->ds) + 1);
}

/* Counts into `counts` with a scout copy of the plan that runs through the
 * epoch the plan is about to start (no lock held: the copy is private). */
static int scout_uses(srv *s, uint32_t *counts)
{
    srv_pipeline *p = s->pl;
    long n = lf_plan_state_save(p->plan, NULL, 0);
    unsigned char *blob = n > 0 ? malloc((size_t)n) : NULL;
    lf_plan *scout = NULL;
    int rc = blob ? (int)lf_plan_state_save(p->plan, blob, (size_t)n) : -ENOMEM;
    if (rc >= 0) rc = srv_plan_create(s, &scout);
    if (rc >= 0) rc = lf_plan_state_restore(scout, blob, (size_t)n);
    lf_plan_step st;
    while (rc >= 0 && (rc = lf_plan_next_step(scout, &st)) == 1) {
        if (before_start(s, &st)) continue;
        for (uint32_t li = 0; li < s->cfg.nlocal && rc >= 0; li++) {
            lf_plan_batch b;
            rc = lf_plan_rank_batch(scout, s->cfg.local[li], &b);
            for (uint32_t i = 0; rc >= 0 && i < b.nsamples; i++)
                counts[lf_dataset_sample_block(s->ds, b.ids[i])]++;
        }
    }
    lf_plan_free(scout);
    free(blob);
    return rc < 0 ? rc : 0;
}

/* Installs, per block, the samples the local ranks take from it in the epoch
 * (index e) that the plan is about to start: the prepass's counts, or a
 * scout's. From then on only jobs of that epoch count samples off (a job of
 * the previous epoch still in flight must not spend the new counts). */
static int count_epoch_uses(srv *s, uint32_t e)
{
    srv_pipeline *p = s->pl;
    uint64_t nb = lf_dataset_blocks(s->ds) + 1;
    const uint32_t *counts = prepass_uses(s, e);
    uint32_t *own = NULL;
    int rc = 0;
    if (!counts) {
        /* an epoch wholly before a resume's start takes nothing: no scout */
        int skipped = s->cfg.plan.epoch + e < s->start_epoch;
        own = calloc(nb, sizeof *own);
        rc = !own ? -ENOMEM : skipped ? 0 : scout_uses(s, own);
        counts = own;
    }
    if (rc >= 0) {
        pthread_mutex_lock(&s->mu);
        memcpy(p->uses, counts, nb * sizeof *p->uses);
        p->uses_epoch = s->cfg.plan.epoch + e;
        /* Idle blocks this epoch takes nothing from go now, not when evicted. */
        for (cache_entry *c = p->lru_head, *next; c; c = next) {
            next = c->lru_next;
            if (p->uses[c->block] > 0) continue;
            lru_remove(p, c);
            park(s, c);
        }
        pthread_mutex_unlock(&s->mu);
    }
    free(own);
    return rc;
}

/* The planner passes step `key` of rank li (job j unused): a rank that is
 * gone or starts later will not take these samples, so they count off now;
 * a rank being caught up gets the step from its catch-up thread. Under mu. */
static void skip_step(srv *s, uint32_t li, const srv_job *j, uint64_t key)
{
    srv_rank *r = &s->ranks[li];
    if (!r->catchup_gen && claim_count(r, key)) count_off(s, j);
}

/* Plans one step: a job per live local rank. Returns 0, or <0 to stop. */
static int plan_step(srv *s, const lf_plan_step *st, uint64_t **scratch)
{
    uint64_t key = srv_pos_key(st->epoch, st->step);
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        lf_plan_batch b;
        int rc = srv_plan_errno(lf_plan_rank_batch(s->pl->plan, s->cfg.local[li], &b));
        if (rc < 0) {
            srv_fail(s, "plan: rank batch: %s", strerror(-rc));
            return rc;
        }
        srv_job *j = job_from_batch(s, li, st, &b, scratch);
        if (!j) {
            srv_fail(s, "plan: out of memory");
            return -ENOMEM;
        }
        pthread_mutex_lock(&s->mu);
        rc = wait_for_room(s, j, 0, key);
        if (rc == 0) rc = submit_job(s, j, key);
        else if (rc == 1) skip_step(s, li, j, key);
        s->ranks[li].planner_key = key + 1;
        pthread_mutex_unlock(&s->mu);
        if (rc != 0) srv_job_free(j);
        if (rc < 0) return rc;
    }
    return 0;
}

/* Whether the server is shutting down: s->stop is written under mu by
 * whichever thread fails first. */
static int stopping(srv *s)
{
    pthread_mutex_lock(&s->mu);
    int stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

static void *planner_main(void *arg)
{
    srv *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop && !s->all_started) pthread_cond_wait(&s->cv_plan, &s->mu);
    /* Stopped before every rank started: the start position (written by
     * the control thread until then) is not to be read. */
    int stopped = s->stop;
    pthread_mutex_unlock(&s->mu);
    uint64_t *scratch = NULL;
    int rc = 0;
    for (uint32_t e = 0; !stopped && e < s->cfg.epochs && rc >= 0; e++) {
        lf_plan_step st;
        uint64_t scout_t0 = srv_now_ns();
        rc = count_epoch_uses(s, e);
        srv_add_metric(s, &s->m.plan_busy_ns, srv_now_ns() - scout_t0);
        for (; rc >= 0;) {
            uint64_t t0 = srv_now_ns();
            rc = srv_plan_errno(lf_plan_next_step(s->pl->plan, &st));
            srv_add_metric(s, &s->m.plan_busy_ns, srv_now_ns() - t0);
            if (rc <= 0) break;
            if (before_start(s, &st)) continue;
            if ((rc = plan_step(s, &st, &scratch)) < 0) break;
        }
        if (rc < 0 && !stopping(s)) srv_fail(s, "plan: %s", strerror(-rc));
    }
    free(scratch);
    pthread_mutex_lock(&s->mu);
    s->planner_done = 1;
    pthread_mutex_unlock(&s->mu);
    srv_notify_control(s);
    srv_add_thread_cpu(s, &s->m.plan_cpu_ns);
    return NULL;
}

/* ---- catch-up of a rejoined rank ----------------------------------------- */

typedef struct catchup {
    srv *s;
    uint32_t li, gen;
    uint64_t from_key;
} catchup;

/* One step of the catch-up: hands over to the planner at the first step it
 * has not decided for the rank, else makes the rank's job. Returns 0 to go
 * on, 1 when done (handed over, rank gone again, stop), <0 on error. */
static int catchup_step(const catchup *cu, lf_plan *plan, const lf_plan_step *st,
                        uint64_t **scratch)
{
    srv *s = cu->s;
    srv_rank *r = &s->ranks[cu->li];
    uint64_t key = srv_pos_key(st->epoch, st->step);
    pthread_mutex_lock(&s->mu);
    int done = s->stop || r->catchup_gen != cu->gen; /* a newer client's catch-up took over */
    if (key < cu->from_key) {
        pthread_mutex_unlock(&s->mu);
        return done; /* replaying up to the rank's position */
    }
    if (!done && key >= r->planner_key) {
        r->catchup_gen = 0;
        r->from_key = key; /* the planner takes the rank from this step on */
        done = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (done) return 1;
    lf_plan_batch b;
    int rc = srv_plan_errno(lf_plan_rank_batch(plan, s->cfg.local[cu->li], &b));
    if (rc < 0) return rc;
    srv_job *j = job_from_batch(s, cu->li, st, &b, scratch);
    if (!j) return -ENOMEM;
    int submitted = 0;
    pthread_mutex_lock(&s->mu);
    rc = wait_for_room(s, j, cu->gen, key);
    if (rc == 0) {
        rc = submit_job(s, j, key);
        submitted = rc == 0;
    } else if (rc == 1 && r->catchup_gen == cu->gen) {
        /* The rank is gone, but the planner left this step to us: it
         * counts off here, and the walk goes on to the planner. */
        if (claim_count(r, key)) count_off(s, j);
        rc = 0;
    }
    pthread_mutex_unlock(&s->mu);
    if (!submitted) srv_job_free(j);
    return rc == -1 ? 1 : rc; /* -1: stopping, not an error of ours */
}

/* Walks a plan of its own through the run's epochs, from the first, to the
 * rank's position (no data is read for the steps before it), then feeds
 * the rank until it meets the planner or the plan ends. */
static void *catchup_main(void *arg)
{
    catchup *cu = arg;
    srv *s = cu->s;
    lf_plan *plan = NULL;
    uint64_t *scratch = NULL;
    int rc = srv_plan_create(s, &plan);
    for (uint32_t e = 0; rc == 0 && e < s->cfg.epochs; e++) {
        lf_plan_step st;
        while (rc == 0 && (rc = srv_plan_errno(lf_plan_next_step(plan, &st))) == 1)
            rc = catchup_step(cu, plan, &st, &scratch);
    }
    if (rc < 0) srv_fail(s, "catch-up of rank %u: %s", s->cfg.local[cu->li], strerror(-rc));
    lf_plan_free(plan);
    free(scratch);
    srv_rank *r = &s->ranks[cu->li];
    uint32_t gen = cu->gen;
    free(cu);
    pthread_mutex_lock(&s->mu);
    if (r->catchup_gen == gen) r->catchup_gen = 0; /* the plan ended first */
    srv_notify_control(s); /* the rank may be due its END now */
    s->pl->catchups_running--;
    pthread_cond_broadcast(&s->cv_catchup); /* srv_pipeline_stop waits for it */
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- readers ------------------------------------------------------------ */

/* Reads len bytes at off; *done: the bytes read (where a failure is). */
static int pread_full(int fd, unsigned char *buf, uint32_t len, uint64_t off, uint32_t *done)
{
    for (*done = 0; *done < len;) {
        ssize_t n = pread(fd, buf + *done, len - *done, (off_t)(off + *done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) return -ENODATA; /* the file is shorter than its index says */
        *done += (uint32_t)n;
    }
    return 0;
}

/* Stops the server on a failed read of entry e, naming the shard, the byte
 * and the block (got: the bytes of the block already read). Returns err. */
static int read_failed(reader *rd, const cache_entry *e, uint32_t got, int err)
{
    const lf_block_info *bi = lf_dataset_block(rd->s->ds, e->block);
    srv_fail(rd->s, "read: %s at byte %" PRIu64 " (block %" PRIu64 "): %s",
             lf_dataset_shard_path(rd->s->ds, bi->shard), bi->file_offset + got, e->block,
             err == -ENODATA ? "the file ends before its index says it does" : strerror(-err));
    return err;
}

/* Queues the rest of entry i's read: from byte got[i] of its block on. */
static int queue_read(reader *rd, cache_entry *e, uint32_t i)
{
    srv *s = rd->s;
    const lf_block_info *bi = lf_dataset_block(s->ds, e->block);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&rd->ring);
    if (!sqe) return -EBUSY; /* cannot happen: at most depth == nbufs in flight */
    uint32_t got = rd->got[i];
    io_uring_prep_read_fixed(sqe, s->pl->shard_fds[bi->shard], rd->bufs[e->buf] + got,
                             bi->stored_size - got, bi->file_offset + got, (int)e->buf);
    io_uring_sqe_set_data64(sqe, i);
    return 0;
}

/* The test hook (LF_TEST_URING_FAULTS=PERCENT,SEED): turns that share of
 * the completions that read something into -EAGAIN or a shorter read, so
 * the resubmission below is exercised on every run of the test;
 * LF_TEST_URING_FAULTS=stuck makes every completion -EAGAIN (a file that
 * never gives a byte). */
static int inject_fault(reader *rd, int res)
{
    const srv_config *c = &rd->s->cfg;
    if (c->uring_stuck) {
        rd->injected++;
        return -EAGAIN;
    }
    if (c->uring_fault_pct == 0 || res <= 0) return res;
    uint64_t x = rd->fault_rng; /* xorshift64 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rd->fault_rng = x;
    if (x % 100 >= c->uring_fault_pct) return res;
    rd->injected++;
    return (x >> 32) % 2 || res == 1 ? -EAGAIN : 1 + (int)((x >> 33) % (uint64_t)(res - 1));
}

/* A block whose reads give nothing this many times in a row (-EAGAIN or
 * -EINTR each time) fails the server instead of spinning forever. */
#define MAX_STALLS 1000

/* Reads the batch with io_uring: one fixed-buffer read per entry, submitted
 * together. A short read (or -EAGAIN/-EINTR) is not an error: the rest of
 * that block is submitted again until it is whole (MAX_STALLS resubmissions
 * in a row without a byte end it); reading nothing before the end means the
 * file is shorter than its index says. */
static int read_batch_uring(reader *rd, cache_entry **v, uint32_t n)
{
    srv *s = rd->s;
    int rc = 0, err = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        rd->got[i] = rd->stalls[i] = 0;
        rc = queue_read(rd, v[i], i);
    }
    for (uint32_t pending = n; rc == 0 && pending > 0;) {
        struct io_uring_cqe *cqe;
        if ((rc = io_uring_submit_and_wait(&rd->ring, 1)) < 0) break;
        if ((rc = io_uring_wait_cqe(&rd->ring, &cqe)) < 0) break;
        uint64_t i = io_uring_cqe_get_data64(cqe);
        int res = inject_fault(rd, cqe->res);
        io_uring_cqe_seen(&rd->ring, cqe);
        if (i >= n) return -EIO; /* not ours: the ring is confused */
        const lf_block_info *bi = lf_dataset_block(s->ds, v[i]->block);
        uint32_t want = bi->stored_size - rd->got[i];
        int again = res == -EAGAIN || res == -EINTR;
        if (again && ++rd->stalls[i] >= MAX_STALLS) {
            srv_fail(s, "read: %s at byte %" PRIu64 ": %s %u times in a row, nothing read",
                     lf_dataset_shard_path(s->ds, bi->shard), bi->file_offset + rd->got[i],
                     strerror(-res), MAX_STALLS);
            rc = res;
            break;
        }
        if (again || (res > 0 && (uint32_t)res < want)) {
            if (res > 0) {
                rd->got[i] += (uint32_t)res;
                rd->stalls[i] = 0;
            }
            rd->retries++;
            rc = queue_read(rd, v[i], (uint32_t)i);
            continue;
        }
        pending--;
        if (err == 0 && (res < 0 || (res == 0 && want > 0)))
            err = read_failed(rd, v[i], rd->got[i], res < 0 ? res : -ENODATA);
    }
    return rc < 0 ? rc : err;
}

static int read_batch_pread(reader *rd, cache_entry **v, uint32_t n)
{
    srv *s = rd->s;
    for (uint32_t i = 0; i < n; i++) {
        const lf_block_info *bi = lf_dataset_block(s->ds, v[i]->block);
        uint32_t got;
        int rc = pread_full(s->pl->shard_fds[bi->shard], rd->bufs[v[i]->buf],
                            bi->stored_size, bi->file_offset, &got);
        if (rc < 0) return read_failed(rd, v[i], got, rc);
    }
    return 0;
}

static void *reader_main(void *arg)
{
    reader *rd = arg;
    srv *s = rd->s;
    cache_entry **v = calloc(rd->nbufs, sizeof *v);
    if (!v) { srv_fail(s, "reader: out of memory"); return NULL; }
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stop && (s->pl->read_q.len == 0 || rd->nfree == 0))
            pthread_cond_wait(&s->cv_read, &s->mu);
        if (s->stop) { pthread_mutex_unlock(&s->mu); break; }
        uint32_t n = 0;
        while (n < rd->nfree && s->pl->read_q.len > 0) {
            cache_entry *e = q_pop(&s->pl->read_q);
            e->state = CE_READING;
            e->owner = rd;
            e->buf = rd->free_bufs[--rd->nfree];
            v[n++] = e;
        }
        pthread_mutex_unlock(&s->mu);
        uint64_t t0 = srv_now_ns(), bytes = 0;
        int rc = rd->use_uring ? read_batch_uring(rd, v, n) : read_batch_pread(rd, v, n);
        for (uint32_t i = 0; i < n; i++) bytes += lf_dataset_block(s->ds, v[i]->block)->stored_size;
        pthread_mutex_lock(&s->mu);
        s->m.read_busy_ns += srv_now_ns() - t0;
        s->m.bytes_read += bytes;
        s->m.blocks_read += n;
        s->m.uring_retries += rd->retries;
        s->m.uring_injected += rd->injected;
        rd->retries = rd->injected = 0;
        /* After a failed read nothing of the batch is decoded: a block not
         * read whole would decode as damage (and --on-corrupt=skip would
         * quarantine sound data). */
        for (uint32_t i = 0; rc >= 0 && i < n; i++) {
            v[i]->state = CE_DECODING;
            q_push(&s->pl->decode_q, v[i]);
        }
        pthread_cond_broadcast(&s->cv_work);
        pthread_mutex_unlock(&s->mu);
        if (rc < 0) {
            srv_fail(s, "read: %s", strerror(-rc)); /* unless read_failed said more */
            break;
        }
    }
    free(v);
    srv_add_thread_cpu(s, &s->m.read_cpu_ns);
    return NULL;
}

/* ---- workers ------------------------------------------------------------ */

typedef struct worker_ctx {
    lf_block_decoder *dec;
    lf_tf_ws *ws;                /* image path: JPEG decode workspace */
    lf_tf_seq *seqs;             /* token path: one per sample */
    uint32_t seqs_cap;
    lf_tf_frames *frames;        /* frames path: one per sample */
    uint32_t frames_cap;
} worker_ctx;

/* Counts a decoded block off every job waiting for it. Under mu. */
static void block_ready(srv *s, cache_entry *e)
{
    e->state = CE_READY;
    for (srv_job_wait *w = e->waiters; w; w = w->next)
        if (--w->job->missing == 0) asm_push(s, w->job);
    e->waiters = e->waiters_last = NULL;
    if (e->pins == 0) park(s, e);
}

/* Damage in the stored bytes, as opposed to a failing machine (memory). */
static int is_corrupt(long n, uint32_t raw_size)
{
    return n == LF_SHARD_E_CHECKSUM || n == LF_SHARD_E_DECOMPRESS || n == LF_SHARD_E_FORMAT ||
           (n >= 0 && n != (long)raw_size);
}

/* Returns 0 (e->bad set when the block is quarantined) or <0 on failure,
 * reported (srv_fail): the block never becomes ready, and the server stops. */
static int decode_entry(srv *s, worker_ctx *w, cache_entry *e)
{
    const lf_block_info *bi = lf_dataset_block(s->ds, e->block);
    lf_shard_error err;
    e->raw = malloc(e->raw_size ? e->raw_size : 1);
    if (!e->raw) {
        srv_fail(s, "block %" PRIu64 ": cannot allocate %" PRIu32 " bytes to decode it", e->block,
                 e->raw_size);
        return -ENOMEM;
    }
    long n = lf_block_decode(w->dec, s->ds, e->block, e->owner->bufs[e->buf],
                             bi->stored_size, e->raw, e->raw_size, &err);
    if (s->cfg.skip_corrupt && is_corrupt(n, e->raw_size)) {
        if (!s->cfg.quiet)
            fprintf(stderr, "lf-server: quarantined: %s\n",
                    n < 0 ? err.msg : "decoded size differs from the index");
        free(e->raw);
        e->raw = NULL;
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

/* The fields of a job's sample i, located in its pinned block. */
static int sample_views(srv *s, const srv_job *j, uint32_t i, lf_field_view *views)
{
    const cache_entry *e = j->blocks[j->block_of[i]].entry;
    lf_shard_error err;
    if (lf_sample_fields(s->ds, j->ids[i], e->raw, e->raw_size, views, &err) < 0) {
        srv_fail(s, "sample %" PRIu64 ": %s", j->ids[i], err.msg);
        return -EIO;
    }
    return 0;
}

/* Gathers the token views of a job's samples, checked against the index. */
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
        if (v->count != j->lengths[i]) {
            srv_fail(s, "sample %" PRIu64 ": %u tokens, index says %" PRIu64,
                     j->ids[i], v->count, j->lengths[i]);
            return -EIO;
        }
        w->seqs[i] = (lf_tf_seq){.tokens = v->data, .count = v->count,
                                 .dtype = s->token_in_dtype, .row = j->row_of[i]};
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

/* Token batch: pad or pack straight into the slot's tensors. */
static int fill_tokens(srv *s, worker_ctx *w, const srv_job *j, unsigned char *slot,
                       const lf_layout *l)
{
    int rc = gather_tokens(s, w, j);
    if (rc < 0) return rc;
    if (j->micro_len) {
        if ((rc = fill_micro(s, w, j, slot, l)) < 0)
            srv_fail(s, "token transform: %s", lf_tf_strerror(rc));
        return rc;
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
    } else {
        out.lengths = slot + l->tensors[1].offset;
        out.lengths_cap = l->tensors[1].size;
        rc = lf_tf_tokens_pad(&out, j->row_len, s->cfg.pad_id, w->seqs, j->n);
    }
    if (rc < 0) srv_fail(s, "token transform: %s", lf_tf_strerror(rc));
    return rc;
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

/* Image batch: each sample's JPEG decoded, cropped, resized and normalized
 * straight into its place in the slot; labels copied beside. */
static int fill_images(srv *s, worker_ctx *w, const srv_job *j, unsigned char *slot,
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
        long n = lf_tf_jpeg_augment(w->ws, slot + img->offset + i * each, each, v->data,
                                    v->size, &s->cfg.image, j->epoch, j->ids[i], NULL);
        if (n < 0) {
            srv_fail(s, "sample %" PRIu64 ": image transform: %s: %s", j->ids[i],
                     lf_tf_strerror((int)n), lf_tf_reason(w->ws));
            return (int)n;
        }
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
static int assemble(srv *s, worker_ctx *w, const srv_job *j)
{
    srv_rank *r = &s->ranks[j->li];
    unsigned char *slot = r->seg + lf_ring_slot_offset(j->slot, s->slot_size);
    lf_layout l;
    int rc = srv_job_layout(s, j, &l);
    if (rc < 0 || l.end > s->slot_size) {
        srv_fail(s, "job layout does not fit its slot (%d)", rc);
        return -EOVERFLOW;
    }
    rc = s->images   ? fill_images(s, w, j, slot, &l)
         : s->frames ? fill_frames(s, w, j, slot, &l)
                     : fill_tokens(s, w, j, slot, &l);
    if (rc < 0) return rc;
    const lf_tensor_desc *ids = lf_layout_find(&l, "sample_ids");
    memcpy(slot + ids->offset, j->ids, (size_t)j->n * sizeof *j->ids);
    lf_msg_ready ready = {.slot = j->slot, .epoch = j->epoch, .step = j->step, .seq = j->seq};
    return lf_slot_write_header(slot, s->slot_size, r->rank, &ready, j->n, &l);
}

static void finish_job(srv *s, srv_job *j)
{
    if (j->counts) count_off(s, j);
    for (uint32_t i = 0; i < j->nblocks; i++) unpin(s, j->blocks[i].entry);
    j->done = 1;
    s->pl->jobs_in_flight--;
    if (s->pl->plan_wait == PLAN_WAITS_ROOM) pthread_cond_signal(&s->cv_plan);
    if (s->pl->catchup_waits) pthread_cond_broadcast(&s->cv_catchup);
}

/* --on-corrupt=skip: leaves the samples of quarantined blocks out of job j,
 * keeping the others in their order; the batch shrinks (the same on every
 * run, as the damage is in the data). Under mu. */
static void drop_quarantined(srv *s, srv_job *j)
{
    int any = 0;
    for (uint32_t i = 0; i < j->nblocks; i++) any |= j->blocks[i].entry->bad;
    if (!any) return;
    int pad = s->cfg.plan.layout != LF_PLAN_PACK && !j->micro_len; /* a row a sample */
    uint32_t k = 0;
    for (uint32_t i = 0; i < j->n; i++) {
        if (j->blocks[j->block_of[i]].entry->bad) {
            j->tokens -= j->lengths[i] <= j->tokens ? j->lengths[i] : j->tokens;
            s->m.quarantined_samples++;
            continue;
        }
        j->ids[k] = j->ids[i];
        j->lengths[k] = j->lengths[i];
        j->block_of[k] = j->block_of[i];
        j->row_of[k] = pad ? k : j->row_of[i];
        k++;
    }
    j->n = k;
    if (pad) j->rows = k; /* pad: one row per sample */
}

/* Assembles job j, taken from the queue under mu, which also gave
 * `discard` (set under mu when the job's rank has gone away). */
static void run_assembly(srv *s, worker_ctx *w, srv_job *j, int discard)
{
    uint64_t busy = 0;
    int rc = 0;
    if (!discard) {
        uint64_t t0 = srv_now_ns();
        rc = assemble(s, w, j);
        if (rc < 0) srv_fail(s, "assembly: %s", strerror(-rc)); /* the first reason stays */
        busy = srv_now_ns() - t0;
    }
    pthread_mutex_lock(&s->mu);
    /* A half-written slot is never announced: its rank gets the error. */
    if (rc < 0) j->discard = 1;
    s->m.assemble_busy_ns += busy;
    finish_job(s, j);
    pthread_mutex_unlock(&s->mu);
    srv_notify_control(s);
}

static void run_decode(srv *s, worker_ctx *w, cache_entry *e)
{
    uint64_t t0 = srv_now_ns();
    int rc = decode_entry(s, w, e);
    pthread_mutex_lock(&s->mu);
    s->m.decode_busy_ns += srv_now_ns() - t0;
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

static void *worker_main(void *arg)
{
    srv *s = arg;
    srv_pipeline *p = s->pl;
    worker_ctx w = {0};
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
            if (s->cfg.skip_corrupt) drop_quarantined(s, j);
            int discard = j->discard;
            pthread_mutex_unlock(&s->mu);
            run_assembly(s, &w, j, discard);
        } else {
            cache_entry *e = q_pop(&p->decode_q);
            pthread_mutex_unlock(&s->mu);
            run_decode(s, &w, e);
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

static int reader_init(srv *s, reader *rd, uint32_t depth, size_t buf_size)
{
    rd->s = s;
    rd->nbufs = depth;
    rd->bufs = calloc(depth, sizeof *rd->bufs);
    rd->free_bufs = calloc(depth, sizeof *rd->free_bufs);
    rd->got = calloc(depth, sizeof *rd->got);
    rd->stalls = calloc(depth, sizeof *rd->stalls);
    if (!rd->bufs || !rd->free_bufs || !rd->got || !rd->stalls) return -ENOMEM;
    rd->fault_rng = s->cfg.uring_fault_seed * 0x9e3779b97f4a7c15ull + (uint64_t)(rd - s->pl->readers) + 1;
    for (uint32_t i = 0; i < depth; i++) {
        if (posix_memalign((void **)&rd->bufs[i], 4096, buf_size) != 0) return -ENOMEM;
        rd->free_bufs[rd->nfree++] = i;
    }
    if (!s->cfg.io_uring) return 0;
    int rc = io_uring_queue_init(depth, &rd->ring, 0);
    if (rc == 0) {
        struct iovec *iov = calloc(depth, sizeof *iov);
        if (!iov) rc = -ENOMEM;
        for (uint32_t i = 0; iov && i < depth; i++)
            iov[i] = (struct iovec){.iov_base = rd->bufs[i], .iov_len = buf_size};
        if (iov) rc = io_uring_register_buffers(&rd->ring, iov, depth);
        free(iov);
        if (rc < 0) io_uring_queue_exit(&rd->ring);
    }
    if (rc < 0 && s->cfg.io_forced) {
        fprintf(stderr, "lf-server: io_uring set-up failed (%s), and --io uring forbids "
                "falling back to pread\n", strerror(-rc));
        return -ECANCELED; /* reported */
    }
    if (rc < 0 && !s->cfg.quiet)
        fprintf(stderr, "lf-server: io_uring unavailable (%s): reading with pread\n",
                strerror(-rc));
    rd->use_uring = rc == 0;
    return 0;
}

static void reader_exit(reader *rd)
{
    if (rd->use_uring) io_uring_queue_exit(&rd->ring);
    for (uint32_t i = 0; rd->bufs && i < rd->nbufs; i++) free(rd->bufs[i]);
    free(rd->bufs);
    free(rd->free_bufs);
    free(rd->got);
    free(rd->stalls);
}

int srv_pipeline_init(srv *s)
{
    srv_pipeline *p = calloc(1, sizeof *p);
    if (!p) return -ENOMEM;
    s->pl = p;
    p->nshards = lf_dataset_shards(s->ds);
    p->shard_fds = malloc((p->nshards ? p->nshards : 1) * sizeof *p->shard_fds);
    if (!p->shard_fds) return -ENOMEM;
    for (uint32_t i = 0; i < p->nshards; i++) p->shard_fds[i] = -1;
    for (uint32_t i = 0; i < p->nshards; i++) {
        const char *path = lf_dataset_shard_path(s->ds, i);
        if ((p->shard_fds[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
            int e = errno;
            fprintf(stderr, "lf-server: %s: %s\n", path, strerror(e));
            return -ECANCELED;
        }
    }
    p->nbuckets = 1024;
    while (p->nbuckets < lf_dataset_blocks(s->ds) && p->nbuckets < (1u << 22)) p->nbuckets <<= 1;
    p->buckets = calloc(p->nbuckets, sizeof *p->buckets);
    p->uses = calloc(lf_dataset_blocks(s->ds) + 1, sizeof *p->uses);
    p->asm_cap = s->cfg.nlocal * s->cfg.slots;
    p->asm_q = calloc(p->asm_cap, sizeof *p->asm_q);
    p->readers = calloc(s->cfg.readers, sizeof *p->readers);
    p->workers = calloc(s->cfg.workers, sizeof *p->workers);
    if (!p->buckets || !p->uses || !p->asm_q || !p->readers || !p->workers) return -ENOMEM;
    size_t buf_size = (lf_dataset_max_block_stored(s->ds) + 4095u) / 4096u * 4096u;
    for (uint32_t i = 0; i < s->cfg.readers; i++) {
        int rc = reader_init(s, &p->readers[i], s->cfg.read_depth, buf_size ? buf_size : 4096);
        if (rc < 0) return rc;
    }
    return srv_plan_create(s, &p->plan);
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
        if (pthread_create(&p->readers[i].thread, NULL, reader_main, &p->readers[i]) != 0)
            return -EAGAIN;
        name_thread(p->readers[i].thread, "reader", i);
    }
    for (uint32_t i = 0; i < s->cfg.workers; i++, p->nworkers_started++) {
        if (pthread_create(&p->workers[i], NULL, worker_main, s) != 0) return -EAGAIN;
        name_thread(p->workers[i], "worker", i);
    }
    if (pthread_create(&p->planner, NULL, planner_main, s) != 0) return -EAGAIN;
    name_thread(p->planner, "planner", 0);
    p->planner_started = 1;
    return 0;
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
    while (p->catchups_running > 0) pthread_cond_wait(&s->cv_catchup, &s->mu);
    pthread_mutex_unlock(&s->mu);
    if (p->planner_started) pthread_join(p->planner, NULL);
    for (uint32_t i = 0; i < p->nworkers_started; i++) pthread_join(p->workers[i], NULL);
    for (uint32_t i = 0; i < p->nreaders_started; i++) pthread_join(p->readers[i].thread, NULL);
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        srv_job *j = s->ranks[li].jobs_head;
        while (j) {
            srv_job *next = j->next;
            srv_job_free(j);
            j = next;
        }
        s->ranks[li].jobs_head = s->ranks[li].jobs_tail = NULL;
    }
    for (uint64_t b = 0; p->buckets && b < p->nbuckets; b++)
        while (p->buckets[b]) cache_drop(p, p->buckets[b]);
    for (uint32_t i = 0; p->readers && i < s->cfg.readers; i++) reader_exit(&p->readers[i]);
    for (uint32_t i = 0; p->shard_fds && i < p->nshards; i++)
        if (p->shard_fds[i] >= 0) close(p->shard_fds[i]);
    lf_plan_free(p->plan);
    free(p->shard_fds);
    free(p->buckets);
    free(p->uses);
    free(p->asm_q);
    free(p->readers);
    free(p->workers);
    free(p);
    s->pl = NULL;
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

void srv_free_slot(srv *s, uint32_t li, uint32_t slot)
{
    srv_rank *r = &s->ranks[li];
    r->free_slots[r->nfree++] = slot;
    if (s->pl->plan_wait == PLAN_WAITS_SLOT && s->pl->plan_wait_li == li)
        pthread_cond_signal(&s->cv_plan);
    if (r->catchup_gen) pthread_cond_broadcast(&s->cv_catchup);
}

/* Starts the catch-up thread of rank li's current generation, serving
 * from step key `from`. Under mu. Returns 0 or -errno. */
static int start_catchup(srv *s, uint32_t li, uint64_t from)
{
    srv_rank *r = &s->ranks[li];
    catchup *cu = malloc(sizeof *cu);
    if (!cu) return -ENOMEM;
    *cu = (catchup){.s = s, .li = li, .gen = r->catchup_gen, .from_key = from};
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = cu->gen && !s->stop ? pthread_create(&t, &at, catchup_main, cu) : EINVAL;
    pthread_attr_destroy(&at);
    if (rc != 0) {
        free(cu);
        return -rc;
    }
    s->pl->catchups_running++;
    r->catchup_thread = cu->gen;
    return 0;
}

void srv_rank_gone(srv *s, uint32_t li)
{
    srv_rank *r = &s->ranks[li];
    r->gone = 1;
    for (srv_job *j = r->jobs_head; j; j = j->next) j->discard = 1;
    /* While catchup_gen is set the planner counts nothing off for the
     * rank, so it stays set: the generation's catch-up thread walks on to
     * the planner, counting off the steps it has not reached, and hands
     * over. A client gone before its START has no thread yet: one is
     * started now to do that walk (nothing is served to a gone rank). */
    if (r->catchup_gen && r->catchup_thread != r->catchup_gen && start_catchup(s, li, 0) < 0)
        r->catchup_gen = 0; /* the steps left to it stay pending: cache room only */
    pthread_cond_broadcast(&s->cv_plan);
    pthread_cond_broadcast(&s->cv_catchup);
}

void srv_rank_attach(srv *s, uint32_t li, int rejoin)
{
    srv_rank *r = &s->ranks[li];
    r->gone = r->started = r->ended = 0;
    r->next_seq = 0; /* the new client counts READYs from 0 */
    if (rejoin) {
        /* Nonzero from now on: the planner leaves the rank alone. */
        if (++s->pl->last_gen == 0) s->pl->last_gen = 1;
        r->catchup_gen = s->pl->last_gen;
    }
}

int srv_rank_catch_up(srv *s, uint32_t li)
{
    srv_rank *r = &s->ranks[li];
    pthread_mutex_lock(&s->mu);
    int rc = start_catchup(s, li, srv_pos_key(r->start_epoch, r->start_step));
    pthread_mutex_unlock(&s->mu);
    return rc;
}
