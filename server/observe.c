/*
 * observe.c — where a rank's time goes, as the server sees it, for lf-stat.
 *
 * The client measures how long lf_next waited (its data wait, in STEP
 * reports), but not why. The server knows why: every local rank's batch
 * of a step comes from one planner, which walks the steps in order and
 * waits for a free slot in each rank's ring in turn. When one rank's ring
 * stays full (its trainer is slower), the planner waits there, and the
 * other ranks' rings run dry behind it: they are held back by that rank,
 * lock-step backpressure, and no faster disk or decoder would help. When
 * the planner is not waiting for a ring, a dry ring waits on the data path
 * (reads, decoding, assembly, cache room).
 *
 * So for each rank the server times the stretches in which it holds no
 * batch (every READY released: its trainer is in lf_next, or about to be),
 * and splits each stretch by the planner's slot waits for other rings in
 * it: the planner's waits are sums that only grow (srv_planner_waits), so
 * the part of a stretch spent held back is their growth over the stretch,
 * less the waits for this rank's own ring (a full ring of this rank while
 * it holds nothing means its slots are still being filled: data path).
 * A trainer that releases its batch right before lf_next (lf-rank-loop,
 * the Python loader) holds nothing exactly while it waits there, so the
 * stretches add up to its own data wait; one that releases earlier holds
 * nothing during its compute as well, and the split still says which side
 * the rank waited on.
 *
 * The trainer's side comes in its STEP reports: the client's data wait,
 * the trainer's compute and sync wait (its wait for the other ranks in the
 * all-reduce, where it reports one). Each report names its step; the
 * server looks the step's planned cost up among the rank's latest READYs,
 * so measured compute is compared with planned cost step for step.
 */
#include "srv.h"

/* Closes the rank's stretch without a batch at `now`, if one is open. */
static void close_empty(srv *s, uint32_t li, uint64_t now)
{
    srv_rank_obs *o = &s->ranks[li].obs;
    if (!o->empty_since_ns) return;
    srv_obs_empty(s, li, now, &o->held_back_ns, &o->data_path_ns);
    o->empty_since_ns = 0;
}

void srv_obs_ready(srv *s, uint32_t li, uint32_t epoch, uint64_t step, double cost,
                   uint64_t now)
{
    srv_rank_obs *o = &s->ranks[li].obs;
    close_empty(s, li, now);
    o->held++;
    o->epoch = epoch;
    o->step = step;
    uint64_t at = o->nrecent++ % SRV_OBS_RECENT;
    o->recent[at].epoch = epoch;
    o->recent[at].step = step;
    o->recent[at].cost = cost;
}

/* The planned cost of the rank's batch of (epoch, step), newest READY
 * first; -1 when it is not among the latest (a report that lags too far). */
static double step_cost(const srv_rank_obs *o, uint32_t epoch, uint64_t step)
{
    uint64_t n = o->nrecent < SRV_OBS_RECENT ? o->nrecent : SRV_OBS_RECENT;
    for (uint64_t k = 1; k <= n; k++) {
        uint64_t at = (o->nrecent - k) % SRV_OBS_RECENT;
        if (o->recent[at].epoch == epoch && o->recent[at].step == step) return o->recent[at].cost;
    }
    return -1;
}

void srv_obs_step(srv *s, uint32_t li, const lf_msg_step *m)
{
    srv_rank_metrics *rm = &s->ranks[li].m;
    rm->wait_ns += m->wait_ns;
    rm->compute_ns += m->compute_ns;
    rm->steps_reported++;
    if (m->sync_ns != LF_WIRE_UNKNOWN) {
        rm->sync_ns += m->sync_ns;
        rm->sync_steps++;
    }
    double cost = step_cost(&s->ranks[li].obs, m->epoch, m->step);
    if (cost > 0 && m->compute_ns > 0) {
        rm->compute_costed_ns += m->compute_ns;
        rm->cost_reported += cost;
    }
}

/* The rank holds no batch from `now` on. */
static void open_empty(srv *s, uint32_t li, uint64_t now)
{
    srv_rank_obs *o = &s->ranks[li].obs;
    o->empty_since_ns = now;
    srv_planner_waits(s, li, now, &o->waits_all, &o->waits_own);
}

/* Its trainer's first lf_next waits from here (its START), as the client
 * counts it: start-up and the first batch's data path. */
void srv_obs_start(srv *s, uint32_t li, uint64_t now)
{
    if (s->ranks[li].obs.held == 0) open_empty(s, li, now);
}

void srv_obs_release(srv *s, uint32_t li, uint64_t now)
{
    srv_rank_obs *o = &s->ranks[li].obs;
    if (o->held == 0 || --o->held > 0) return;
    open_empty(s, li, now);
}

void srv_obs_gone(srv *s, uint32_t li)
{
    srv_rank_obs *o = &s->ranks[li].obs;
    o->held = 0;
    o->empty_since_ns = 0;
}

void srv_obs_empty(const srv *s, uint32_t li, uint64_t now, uint64_t *held_back,
                   uint64_t *data_path)
{
    const srv_rank *r = &s->ranks[li];
    const srv_rank_obs *o = &r->obs;
    uint64_t back = o->held_back_ns, path = o->data_path_ns;
    /* After its last batch a rank waits for END: nothing to split. */
    if (o->empty_since_ns && now > o->empty_since_ns && !s->planner_done && !r->gone) {
        uint64_t all, own, span = now - o->empty_since_ns;
        srv_planner_waits(s, li, now, &all, &own);
        uint64_t others = (all - o->waits_all) - (own - o->waits_own);
        if (others > span) others = span;
        back += others;
        path += span - others;
    }
    *held_back = back;
    *data_path = path;
}

int srv_obs_holder(const srv *s, uint32_t li)
{
    int best = -1;
    for (uint32_t k = 0; k < s->cfg.nlocal; k++)
        if (k != li && s->ranks[k].m.planner_wait_ns > 0 &&
            (best < 0 || s->ranks[k].m.planner_wait_ns > s->ranks[best].m.planner_wait_ns))
            best = (int)k;
    return best;
}
