/*
 * planner.c — the planner thread: plan steps -> jobs, with backpressure.
 *
 * A job is one local rank's batch of one step. The planner makes jobs in
 * plan order, and before it makes one it waits for a free slot in that
 * rank's ring: that is the backpressure from the trainers. Making a job pins
 * the decompressed blocks its samples live in: a block already in the cache
 * is a hit; a missing one gets a cache entry and goes to the read queue.
 *
 * At each epoch start the planner installs the epoch's pending counts per
 * block (the prepass's, or a scout's: see cache.c; the scout of the next
 * epoch runs meanwhile on a thread of its own, and counts its steps, which
 * the clients are told). An epoch no scout has counted yet (epoch 0 of a
 * capped plan, which start-up no longer walks) is served at once without
 * counts, its scout started then, and its counts installed when the scout
 * is done (cache.c, srv_cache_counted); that scout prints the run's first
 * epoch's report (srv_report_*). The planner waits when a
 * new job's blocks would push the cache past its limit while other jobs
 * are in flight. A rank being caught up (catchup.c) gets its jobs from
 * its catch-up thread, which makes them with the functions here; the
 * planner skips it.
 */
#include "stages.h"
#include "parse_num.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
        uint32_t k = srv_job_block_at(j, sample_blk[i]);
        j->block_of[i] = k;
        j->blocks[k].nsamples++;
    }
}

/* Copies one rank's plan batch into a new job (no lock needed).
 * scratch_blocks: the caller's buffer, 2 x n entries: each sample's block
 * number, then the same sorted. */
srv_job *srv_job_from_batch(srv *s, uint32_t li, const lf_plan_step *st,
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
    for (uint32_t r = 0; r < st->world; r++) j->step_tokens += st->rank_tokens[r];
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
    for (uint32_t i = 0; i < n; i++)
        blk[i] = lf_dataset_sample_block(s->ds, lf_plan_piece_sample(b->ids[i]));
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
        const cache_entry *e = srv_cache_find(s->pl, j->blocks[i].id);
        if (!e) *need += lf_dataset_block(s->ds, j->blocks[i].id)->raw_size;
        else if (e->pins == 0 && e->state == CE_READY && !e->bad) *idle += e->raw_size;
    }
}

/* Whether job j's new blocks fit the cache now; if so, makes their room
 * (under mu). */
static int cache_fits(srv *s, const srv_job *j)
{
    uint64_t need, idle;
    job_cache_bytes(s, j, &need, &idle);
    /* What no eviction frees: pinned blocks and the job's own idle ones.
     * Nothing is evicted for a job that would not fit anyway, and over the
     * limit only when nothing else is in flight: one job must always be
     * able to run. */
    uint64_t kept = s->pl->cache_bytes - s->pl->lru_bytes + idle;
    if (kept + need > s->cache_limit && s->pl->jobs_in_flight > 0) return 0;
    srv_cache_make_room(s, need, j);
    return 1;
}

/* The free slots of job j's lane in its rank's ring: training's or eval's. */
static uint32_t lane_free(const srv *s, const srv_job *j)
{
    const srv_rank *r = &s->ranks[j->li];
    return j->eval ? r->eval_nfree : r->nfree;
}

/* A thread of a rank's own (catch-up, eval pass) waits for a slot or cache
 * room: both wake it on cv_catchup. Under mu. */
void srv_wait_own(srv *s, const srv_job *j)
{
    uint32_t room = lane_free(s, j) > 0;
    s->pl->catchup_waits += room;
    pthread_cond_wait(&s->cv_catchup, &s->mu);
    s->pl->catchup_waits -= room;
}

int srv_job_room(srv *s, const srv_job *j)
{
    return lane_free(s, j) > 0 && cache_fits(s, j);
}

/* Waits (under mu) until job j's rank (li) has a free slot and the job's new blocks
 * fit the cache. gen is the caller's catch-up generation (0: the planner),
 * key the job's step. Returns 0, 1 when the caller no longer makes this
 * rank's job (the rank is gone, or the other thread feeds it, or it starts
 * later), -1 on stop. */
int srv_wait_for_room(srv *s, const srv_job *j, uint32_t gen, uint64_t key)
{
    uint32_t li = j->li;
    srv_rank *r = &s->ranks[li];
    for (;;) {
        if (s->stop) return -1;
        if (r->gone || r->catchup_gen != gen || (gen == 0 && key < r->from_key)) return 1;
        if (srv_job_room(s, j)) return 0;
        if (gen) { /* a catch-up thread */
            srv_wait_own(s, j);
            continue;
        }
        s->pl->plan_wait = r->nfree > 0 ? PLAN_WAITS_ROOM : PLAN_WAITS_SLOT;
        s->pl->plan_wait_li = li;
        s->pl->plan_wait_since = srv_now_ns();
        /* A full ring whose trainer holds none of it is a ring still being
         * filled: the other ranks then wait on the data path, not on this
         * rank (observe.c), and the wait does not count as this rank's. */
        s->pl->plan_wait_held = r->obs.held > 0;
        pthread_cond_wait(&s->cv_plan, &s->mu);
        if (s->pl->plan_wait == PLAN_WAITS_SLOT) {
            uint64_t now = srv_now_ns(), waited = now - s->pl->plan_wait_since;
            srv_trace_span(s, SRV_STAGE_RING_WAIT, 0, s->pl->plan_wait_since, now, r->rank,
                           (uint64_t)s->pl->plan_wait_held);
            if (s->pl->plan_wait_held) {
                r->m.planner_wait_ns += waited;
                s->m.planner_slot_wait_ns += waited;
            }
        }
        s->pl->plan_wait = PLAN_RUNS;
    }
}

/* Whether step `key` of rank li still has to count its samples off (once
 * per step, see the top). Under mu. */
int srv_claim_count(srv_rank *r, uint64_t key)
{
    if (key < r->counted_key) return 0;
    r->counted_key = key + 1;
    return 1;
}

/* Places job j of step `key` into its rank's ring: a training job into a
 * training slot, counting its samples off once per step; an eval job into
 * an eval slot, in the pass's own sequence, counting nothing off (the
 * pending counts are the training epoch's). Under mu. */
int srv_submit_job(srv *s, srv_job *j, uint64_t key)
{
    srv_rank *r = &s->ranks[j->li];
    if (j->eval) {
        j->slot = r->eval_free[--r->eval_nfree];
        j->seq = r->eval_next_seq++;
    } else {
        j->slot = r->free_slots[--r->nfree];
        j->seq = r->next_seq++;
        j->counts = srv_claim_count(r, key);
    }
    for (uint32_t i = 0; i < j->nblocks; i++) {
        int ready = 0;
        j->blocks[i].entry = srv_pin_block(s, j->blocks[i].id, &ready);
        if (!j->blocks[i].entry) {
            for (uint32_t k = 0; k < i; k++) srv_unpin(s, j->blocks[k].entry);
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
    srv_job **head = j->eval ? &r->eval_head : &r->jobs_head;
    srv_job **tail = j->eval ? &r->eval_tail : &r->jobs_tail;
    if (*tail) (*tail)->next = j;
    else *head = j;
    *tail = j;
    s->pl->jobs_in_flight++;
    if (j->missing == 0) srv_asm_push(s, j);
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

/* Whether the server is shutting down: s->stop is written under mu by
 * whichever thread fails first. */
static int stopping(srv *s)
{
    pthread_mutex_lock(&s->mu);
    int stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

/* Walks a scout's epoch (no lock held: the scout is private), counting
 * into `counts` the local ranks' samples per block and into *steps its
 * steps, those before a resume's start included, and each step into
 * `report` (unless NULL). Stops early (-ECANCELED) when the server does. */
static int walk_uses(srv *s, lf_plan *scout, uint32_t *counts, uint32_t *steps,
                     srv_report *report)
{
    lf_plan_step st;
    int rc;
    while ((rc = lf_plan_next_step(scout, &st)) == 1) {
        if ((++*steps & 1023) == 0 && stopping(s)) return -ECANCELED;
        if (report) srv_report_step(report, &st);
        if (before_start(s, &st)) continue;
        for (uint32_t li = 0; li < s->cfg.nlocal && rc >= 0; li++) {
            lf_plan_batch b;
            rc = lf_plan_rank_batch(scout, s->cfg.local[li], &b);
            for (uint32_t i = 0; rc >= 0 && i < b.nsamples; i++)
                counts[lf_dataset_sample_block(s->ds, lf_plan_piece_sample(b.ids[i]))]++;
        }
        if (rc < 0) break;
    }
    return rc < 0 ? srv_plan_errno(rc) : 0;
}

/* Counts with a scout copy of the plan that runs through the epoch the
 * plan is about to start. */
static int scout_uses(srv *s, uint32_t *counts, uint32_t *steps)
{
    srv_pipeline *p = s->pl;
    long n = lf_plan_state_save(p->plan, NULL, 0);
    unsigned char *blob = n > 0 ? malloc((size_t)n) : NULL;
    lf_plan *scout = NULL;
    int rc = blob ? (int)lf_plan_state_save(p->plan, blob, (size_t)n) : -ENOMEM;
    if (rc >= 0) rc = srv_plan_create(s, &scout);
    if (rc >= 0) rc = lf_plan_state_restore(scout, blob, (size_t)n);
    if (rc >= 0) rc = walk_uses(s, scout, counts, steps, NULL);
    lf_plan_free(scout);
    free(blob);
    return rc < 0 ? srv_plan_errno(rc) : 0;
}

/* Whether epoch index e needs a scout: the prepass did not count it, and
 * some step of it is served (not wholly before a resume's start). */
static int needs_scout(const srv *s, uint32_t e)
{
    return !prepass_uses(s, e) && s->cfg.plan.epoch + e >= s->start_epoch;
}

/* Epoch index e has `steps` steps: the clients are told (EPOCH, before
 * any READY of it: control.c, tell_epochs), in order, where start-up did
 * not walk it (srv_plan_prepass). */
static void tell_steps(srv *s, uint32_t e, uint32_t steps)
{
    pthread_mutex_lock(&s->mu);
    int new = e == s->epochs_planned && e < LF_WIRE_EPOCHS_MAX;
    if (new) {
        s->epoch_steps[e] = steps;
        s->epochs_planned = e + 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (new) srv_notify_control(s);
}

/* The test hook LF_TEST_SCOUT_DELAY_MS=N: the scout of epoch 0 starts N ms
 * late, so its count comes after the epoch's first batches on a machine of
 * any speed (e2e/server_plan_ahead, with LF_TEST_SCOUT_EPOCH0). */
static void scout_test_delay(void)
{
    uint64_t ms;
    if (parse_env_u64("LF_TEST_SCOUT_DELAY_MS", 1, 60000, &ms))
        nanosleep(&(struct timespec){.tv_sec = (time_t)(ms / 1000),
                                     .tv_nsec = (long)(ms % 1000) * 1000000L}, NULL);
}

/* The scout an epoch ahead: a plan of its own from that epoch on (epochs
 * do not depend on each other), walked while the planner serves the one
 * before; its count is told as soon as it is known (tell_steps keeps the
 * order). */
static void *ahead_main(void *arg)
{
    srv *s = arg;
    scout_ahead *a = &s->pl->ahead;
    lf_plan *scout = NULL;
    if (a->e == 0) scout_test_delay();
    a->rc = srv_plan_create_at(s, a->e, &scout);
    if (a->rc >= 0) a->rc = walk_uses(s, scout, a->counts, &a->steps, a->report);
    if (a->rc >= 0 && a->report) srv_report_print(a->report, scout);
    else srv_report_free(a->report);
    a->report = NULL;
    lf_plan_free(scout);
    if (a->rc >= 0) tell_steps(s, a->e, a->steps);
    atomic_store(&a->done, 1);
    return NULL;
}

/* Starts the scout of epoch index e, where it needs one; where its thread
 * cannot start, the planner scouts at the epoch's start instead. The scout
 * of epoch 0 reports it where start-up did not. */
static void start_ahead(srv *s, uint32_t e)
{
    scout_ahead *a = &s->pl->ahead;
    if (e >= s->cfg.epochs || !needs_scout(s, e)) return;
    *a = (scout_ahead){.e = e, .counts = calloc(lf_dataset_blocks(s->ds) + 1, sizeof *a->counts)};
    if (e == 0 && s->counted_epochs == 0) a->report = srv_report_new(s);
    a->started = a->counts && pthread_create(&a->thread, NULL, ahead_main, s) == 0;
    if (!a->started) {
        free(a->counts);
        a->counts = NULL;
        srv_report_free(a->report);
        a->report = NULL;
    }
}

/* Joins the scout ahead; returns its counts for epoch index e (the
 * caller's to free) with *steps and *rc, or NULL where it walked none. */
static uint32_t *join_ahead(srv *s, uint32_t e, uint32_t *steps, int *rc)
{
    scout_ahead *a = &s->pl->ahead;
    if (!a->started) return NULL;
    pthread_join(a->thread, NULL);
    a->started = 0;
    uint32_t *counts = a->counts;
    a->counts = NULL;
    if (a->e == e) {
        *steps = a->steps;
        *rc = a->rc;
        return counts;
    }
    free(counts);
    return NULL;
}

/* The run's first epoch (index e, 0), which start-up did not count, is
 * served without counts while its scout walks it (started here), so the
 * first batch does not wait for a walk of the epoch: the cache keeps what
 * fits and tallies what is taken (cache.c). Returns 1 so, or 0 where the
 * scout's thread cannot start (the caller counts the epoch first, as
 * before). A later epoch not scouted ahead (the planner outran the scout
 * of the one before) is counted first, so its count still comes before
 * its first batch. */
static int serve_uncounted(srv *s, uint32_t e)
{
    srv_pipeline *p = s->pl;
    uint64_t nb = lf_dataset_blocks(s->ds) + 1;
    uint32_t *taken = calloc(nb, sizeof *taken);
    if (taken) start_ahead(s, e);
    if (!taken || !p->ahead.started) {
        free(taken);
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    memset(p->uses, 0, nb * sizeof *p->uses);
    p->uses_epoch = s->cfg.plan.epoch + e;
    p->taken = taken;
    pthread_mutex_unlock(&s->mu);
    return 1;
}

/* The epoch served without counts (index e): once its scout is done (or,
 * with wait, the epoch is planned to its end: the scout is joined, its
 * report printed), its counts are installed, less what was taken. */
static int take_counts(srv *s, uint32_t e, int wait)
{
    srv_pipeline *p = s->pl;
    if (!p->taken || (!wait && !atomic_load(&p->ahead.done))) return 0;
    uint32_t steps = 0;
    int rc = 0;
    uint32_t *counts = join_ahead(s, e, &steps, &rc);
    pthread_mutex_lock(&s->mu);
    if (counts && rc >= 0) srv_cache_counted(s, counts);
    free(p->taken); /* NULL where it counted */
    p->taken = NULL;
    pthread_mutex_unlock(&s->mu);
    free(counts);
    return rc;
}

/* Installs, per block, the samples the local ranks take from it in the epoch
 * (index e) that the plan is about to start: the prepass's counts, or a
 * scout's (which also counts its steps for the clients), or none yet
 * (serve_uncounted) where no scout walked it ahead. From then on only
 * jobs of that epoch count samples off (a job of the previous epoch still
 * in flight must not spend the new counts). */
static int count_epoch_uses(srv *s, uint32_t e)
{
    srv_pipeline *p = s->pl;
    uint64_t nb = lf_dataset_blocks(s->ds) + 1;
    const uint32_t *counts = prepass_uses(s, e);
    uint32_t *own = NULL;
    int rc = 0;
    if (!counts && e == 0 && needs_scout(s, e) && serve_uncounted(s, e)) return 0;
    if (!counts) {
        /* an epoch wholly before a resume's start takes nothing: no scout */
        int skipped = s->cfg.plan.epoch + e < s->start_epoch;
        uint32_t steps = 0;
        own = join_ahead(s, e, &steps, &rc);
        if (!own && (own = calloc(nb, sizeof *own)))
            rc = skipped ? 0 : scout_uses(s, own, &steps);
        if (!own) rc = -ENOMEM;
        if (rc >= 0 && !skipped) tell_steps(s, e, steps);
        counts = own;
    }
    if (rc >= 0) {
        pthread_mutex_lock(&s->mu);
        memcpy(p->uses, counts, nb * sizeof *p->uses);
        p->uses_epoch = s->cfg.plan.epoch + e;
        /* Idle blocks this epoch takes nothing from go now, not when evicted. */
        srv_cache_drop_unwanted(s);
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
    if (!r->catchup_gen && srv_claim_count(r, key)) srv_count_off(s, j);
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
        srv_job *j = srv_job_from_batch(s, li, st, &b, scratch);
        if (!j) {
            srv_fail(s, "plan: out of memory");
            return -ENOMEM;
        }
        pthread_mutex_lock(&s->mu);
        rc = srv_wait_for_room(s, j, 0, key);
        if (rc == 0) rc = srv_submit_job(s, j, key);
        else if (rc == 1) skip_step(s, li, j, key);
        s->ranks[li].planner_key = key + 1;
        pthread_mutex_unlock(&s->mu);
        if (rc != 0) srv_job_free(j);
        if (rc < 0) return rc;
    }
    return 0;
}

void *srv_planner_main(void *arg)
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
        if (rc >= 0 && !s->pl->taken) start_ahead(s, e + 1);
        uint32_t steps = 0;
        for (; rc >= 0; steps++) {
            if (s->pl->taken && atomic_load(&s->pl->ahead.done)) {
                rc = take_counts(s, e, 0); /* the scout ahead of this epoch is done */
                if (rc >= 0) start_ahead(s, e + 1);
                if (rc < 0) break;
            }
            uint64_t t0 = srv_now_ns();
            rc = srv_plan_errno(lf_plan_next_step(s->pl->plan, &st));
            srv_add_metric(s, &s->m.plan_busy_ns, srv_now_ns() - t0);
            if (rc <= 0) break;
            if (before_start(s, &st)) continue;
            if ((rc = plan_step(s, &st, &scratch)) < 0) break;
        }
        /* an epoch planned before its scout was done: the scout is waited
         * for (it prints the first epoch's report), its counts installed
         * for the jobs still in flight (the next epoch's replace them) */
        if (rc == 0 && s->pl->taken) rc = take_counts(s, e, 1);
        /* an epoch wholly before a resume's start, which no scout walked,
         * is told once walked: before the next */
        if (rc == 0) tell_steps(s, e, steps);
        if (rc < 0 && !stopping(s)) srv_fail(s, "plan: %s", strerror(-rc));
    }
    free(scratch);
    if (s->pl->ahead.started) { /* stopped before its epoch */
        pthread_join(s->pl->ahead.thread, NULL);
        free(s->pl->ahead.counts);
    }
    pthread_mutex_lock(&s->mu);
    free(s->pl->taken); /* an epoch stopped before its scout was done */
    s->pl->taken = NULL;
    s->planner_done = 1;
    pthread_mutex_unlock(&s->mu);
    srv_notify_control(s);
    srv_add_thread_cpu(s, &s->m.plan_cpu_ns);
    return NULL;
}

/* The threads of a rank's own (catchup.c, eval.c): started detached, and
 * counted, so that srv_pipeline_stop waits for them. */
void srv_end_own_thread(srv *s)
{
    s->pl->catchups_running--;
    pthread_cond_broadcast(&s->cv_catchup); /* srv_pipeline_stop waits for it */
}

int srv_start_own_thread(srv *s, void *(*fn)(void *), void *arg)
{
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = !s->stop ? pthread_create(&t, &at, fn, arg) : EINVAL;
    pthread_attr_destroy(&at);
    if (rc != 0) return -rc;
    s->pl->catchups_running++;
    return 0;
}

void srv_planner_waits(const srv *s, uint32_t li, uint64_t now, uint64_t *all, uint64_t *own)
{
    const srv_pipeline *p = s->pl;
    uint64_t now_waiting = p && p->plan_wait == PLAN_WAITS_SLOT && p->plan_wait_held &&
                                   now > p->plan_wait_since
                               ? now - p->plan_wait_since : 0;
    *all = s->m.planner_slot_wait_ns + now_waiting;
    *own = s->ranks[li].m.planner_wait_ns + (p && p->plan_wait_li == li ? now_waiting : 0);
}

void srv_free_slot(srv *s, uint32_t li, uint32_t slot)
{
    srv_rank *r = &s->ranks[li];
    if (slot >= s->cfg.slots) { /* an eval slot: its pass's thread waits on cv_catchup */
        r->eval_free[r->eval_nfree++] = slot;
        pthread_cond_broadcast(&s->cv_catchup);
        return;
    }
    r->free_slots[r->nfree++] = slot;
    if (s->pl->plan_wait == PLAN_WAITS_SLOT && s->pl->plan_wait_li == li)
        pthread_cond_signal(&s->cv_plan);
    if (r->catchup_gen) pthread_cond_broadcast(&s->cv_catchup);
}
