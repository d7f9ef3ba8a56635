/*
 * cache.c — the block cache of lf-server and the queues between stages
 * (every function here that touches them runs under srv.mu).
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
 * freed. Until a scout has counted the epoch served (epoch 0 of a capped
 * plan, walked by a scout started with the server: planner.c) the cache
 * runs without counts (p->taken set): every idle block stays, LRU, while it
 * fits, and the samples taken are tallied, to be taken off the counts once
 * they come (srv_cache_counted).
 *
 * An entry goes QUEUED (read queue) -> READING (one reader) -> DECODING
 * (decode queue, then one worker) -> READY; a job whose blocks are all
 * READY goes to the assembly queue.
 */
#include "stages.h"

#include <stdlib.h>

void srv_q_push(queue *q, cache_entry *e)
{
    e->qnext = NULL;
    if (q->tail) q->tail->qnext = e;
    else q->head = e;
    q->tail = e;
    q->len++;
}

cache_entry *srv_q_pop(queue *q)
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

cache_entry *srv_cache_find(srv_pipeline *p, uint64_t block)
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

void srv_cache_drop(srv_pipeline *p, cache_entry *e)
{
    cache_entry **pp = &p->buckets[hash_block(e->block) & (p->nbuckets - 1)];
    while (*pp != e) pp = &(*pp)->hnext;
    *pp = e->hnext;
    p->cache_bytes -= e->raw_size;
    free(e->raw);
    free(e);
}

/* The index of the first of job j's blocks (sorted, distinct) >= block. */
uint32_t srv_job_block_at(const srv_job *j, uint64_t block)
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
    uint32_t k = srv_job_block_at(j, block);
    return k < j->nblocks && j->blocks[k].id == block;
}

uint64_t srv_cache_floor(const srv *s)
{
    return 2ull * lf_dataset_max_block_raw(s->ds);
}

/* Evicts idle blocks, oldest first, until `need` more bytes fit, sparing
 * job `spare`'s own (NULL: none): it is about to pin them, and evicting
 * one would only read it again, over the limit. */
void srv_cache_make_room(srv *s, uint64_t need, const srv_job *spare)
{
    srv_pipeline *p = s->pl;
    for (cache_entry *e = p->lru_head, *next; e && p->cache_bytes + need > s->cache_limit;
         e = next) {
        next = e->lru_next;
        if (spare && job_has_block(spare, e->block)) continue;
        lru_remove(p, e);
        srv_cache_drop(p, e);
        s->m.evictions++;
    }
}

/* An unpinned, decoded block: freed if no sample of it is pending this
 * epoch, else kept (LRU) while it fits. A quarantined block holds no bytes
 * and stays known, so its damage is found once and never read again. */
void srv_park(srv *s, cache_entry *e)
{
    if (e->bad) return; /* kept, empty, for the server's life: never re-read */
    if (s->pl->uses[e->block] == 0 && !s->pl->taken) {
        srv_cache_drop(s->pl, e);
        s->m.blocks_done++;
        return;
    }
    lru_append(s->pl, e);
    srv_cache_make_room(s, 0, NULL);
}

void srv_unpin(srv *s, cache_entry *e)
{
    if (--e->pins == 0 && e->state == CE_READY) srv_park(s, e);
}

/* Counts job j's samples off the pending counts of its epoch (if that is
 * the epoch counted now); an idle cached block with none left is freed.
 * Block by block, from the job's own arrays: it runs under mu. */
void srv_count_off(srv *s, const srv_job *j)
{
    srv_pipeline *p = s->pl;
    if (j->epoch != p->uses_epoch) return;
    for (uint32_t k = 0; p->taken && k < j->nblocks; k++)
        p->taken[j->blocks[k].id] += j->blocks[k].nsamples;
    for (uint32_t k = 0; !p->taken && k < j->nblocks; k++) {
        uint64_t b = j->blocks[k].id;
        uint32_t taken = j->blocks[k].nsamples;
        if (p->uses[b] == 0) continue;
        p->uses[b] -= taken < p->uses[b] ? taken : p->uses[b];
        if (p->uses[b] > 0) continue;
        cache_entry *e = srv_cache_find(p, b);
        if (e && e->pins == 0 && e->state == CE_READY && !e->bad) {
            lru_remove(p, e);
            srv_park(s, e);
        }
    }
}

void srv_cache_counted(srv *s, const uint32_t *counts)
{
    srv_pipeline *p = s->pl;
    for (uint64_t b = 0; b <= lf_dataset_blocks(s->ds); b++)
        p->uses[b] = counts[b] - (p->taken[b] < counts[b] ? p->taken[b] : counts[b]);
    free(p->taken);
    p->taken = NULL;
    srv_cache_drop_unwanted(s);
}

/* Frees the idle blocks that the pending counts just installed (p->uses)
 * want nothing from. Under mu. */
void srv_cache_drop_unwanted(srv *s)
{
    srv_pipeline *p = s->pl;
    for (cache_entry *c = p->lru_head, *next; c; c = next) {
        next = c->lru_next;
        if (p->uses[c->block] > 0) continue;
        lru_remove(p, c);
        srv_park(s, c);
    }
}

uint64_t srv_pos_key(uint32_t epoch, uint64_t step)
{
    const uint64_t step_max = (1ull << 40) - 1, epoch_max = SRV_EPOCH_MAX;
    return ((epoch < epoch_max ? epoch : epoch_max) << 40) | (step < step_max ? step : step_max);
}

/* Pins `block` for a job: returns the entry and whether it is ready. */
cache_entry *srv_pin_block(srv *s, uint64_t block, int *ready)
{
    srv_pipeline *p = s->pl;
    cache_entry *e = srv_cache_find(p, block);
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
    srv_q_push(&p->read_q, e);
    /* Readers with no free buffer wait on cv_read too: a signal could wake
     * one of them alone and leave a reader that could read asleep. */
    pthread_cond_broadcast(&s->cv_read);
    *ready = 0;
    return e;
}

void srv_asm_push(srv *s, srv_job *j)
{
    srv_pipeline *p = s->pl;
    p->asm_q[(p->asm_head + p->asm_len++) % p->asm_cap] = j;
    pthread_cond_signal(&s->cv_work);
}
