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
 * Likewise a wait for another rank's ring counts as held back only where
 * that rank's trainer held a batch as the wait began (planner.c): a ring
 * whose every slot is still being filled holds everyone up on the data
 * path, not on its rank (e2e/server_observe_data: one worker, large JPEGs).
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
 * so measured compute is compared with planned cost step for step; the
 * step, with the start its client measured, also goes to the rank's track
 * in the trace (trace.c).
 *
 * At the end of the run each rank gets a short report from the same
 * reports: its shares of data wait, compute and sync wait; how far its
 * compute follows planned cost (their correlation over the steps, and the
 * largest compute per cost against its mean: a cost model that no longer
 * fits the trainer shows as a low correlation, a stray step as a high
 * maximum), and its slowest steps with what took the time.
 */
#include "srv.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Closes the rank's stretch without a batch at `now`, if one is open. */
static void close_empty(srv *s, uint32_t li, uint64_t now)
{
    srv_rank_obs *o = &s->ranks[li].obs;
    if (!o->empty_since_ns) return;
    srv_obs_empty(s, li, now, &o->held_back_ns, &o->data_path_ns);
    o->empty_since_ns = 0;
}

void srv_obs_ready(srv *s, uint32_t li, const srv_job *j, uint64_t now)
{
    srv_rank_obs *o = &s->ranks[li].obs;
    close_empty(s, li, now);
    o->held++;
    o->epoch = j->epoch;
    o->step = j->step;
    uint64_t at = o->nrecent++ % SRV_OBS_RECENT;
    o->recent[at].epoch = j->epoch;
    o->recent[at].step = j->step;
    o->recent[at].cost = (double)j->cost;
    o->recent[at].samples = j->n;
    o->recent[at].tokens = j->tokens;
}

/* Where the rank's READY of (epoch, step) is in recent[], newest first;
 * -1 when it is not among the latest (a report that lags too far). */
static int step_ready(const srv_rank_obs *o, uint32_t epoch, uint64_t step)
{
    uint64_t n = o->nrecent < SRV_OBS_RECENT ? o->nrecent : SRV_OBS_RECENT;
    for (uint64_t k = 1; k <= n; k++) {
        uint64_t at = (o->nrecent - k) % SRV_OBS_RECENT;
        if (o->recent[at].epoch == epoch && o->recent[at].step == step) return (int)at;
    }
    return -1;
}

static uint64_t step_ns(const srv_step_fig *f)
{
    return f->wait_ns + f->compute_ns + f->sync_ns;
}

/* Adds a reported step to the rank's sums, and to its slowest steps when
 * it is slower than the fastest of them. */
static void add_step(srv_step_stats *st, const srv_step_fig *f)
{
    if (f->cost > 0 && f->compute_ns > 0) {
        double x = f->cost, y = (double)f->compute_ns / 1e6;
        st->n++;
        st->sx += x;
        st->sy += y;
        st->sxx += x * x;
        st->syy += y * y;
        st->sxy += x * y;
        st->ratio_sum += y / x;
        if (y / x > st->ratio_max) st->ratio_max = y / x;
    }
    uint32_t at = st->nlate;
    if (st->nlate < SRV_LATE_STEPS) {
        st->nlate++;
    } else {
        at = 0;
        for (uint32_t k = 1; k < SRV_LATE_STEPS; k++)
            if (step_ns(&st->late[k]) < step_ns(&st->late[at])) at = k;
        if (step_ns(&st->late[at]) >= step_ns(f)) return;
    }
    st->late[at] = *f;
}

void srv_obs_step(srv *s, uint32_t li, const lf_msg_step *m, uint64_t now)
{
    srv_rank_metrics *rm = &s->ranks[li].m;
    rm->wait_ns += m->wait_ns;
    rm->compute_ns += m->compute_ns;
    rm->steps_reported++;
    if (m->sync_ns != LF_WIRE_UNKNOWN) {
        rm->sync_ns += m->sync_ns;
        rm->sync_steps++;
    }
    const srv_rank_obs *o = &s->ranks[li].obs;
    int at = step_ready(o, m->epoch, m->step);
    double cost = at >= 0 ? o->recent[at].cost : -1;
    srv_trace_step(s, li, m, cost, at >= 0 ? o->recent[at].samples : 0,
                   at >= 0 ? o->recent[at].tokens : 0, now);
    if (cost > 0 && m->compute_ns > 0) {
        rm->compute_costed_ns += m->compute_ns;
        rm->cost_reported += cost;
    }
    srv_step_fig f = {.epoch = m->epoch, .step = m->step, .wait_ns = m->wait_ns,
                      .compute_ns = m->compute_ns,
                      .sync_ns = m->sync_ns == LF_WIRE_UNKNOWN ? 0 : m->sync_ns, .cost = cost};
    add_step(&s->ranks[li].obs.steps, &f);
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

double srv_obs_compute_per_cost(const srv *s)
{
    double compute = 0, cost = 0;
    uint32_t n = 0;
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        const srv_rank_metrics *m = &s->ranks[li].m;
        if (m->cost_reported <= 0) continue;
        compute += (double)m->compute_costed_ns;
        cost += m->cost_reported;
        n++;
    }
    return n >= 2 ? compute / cost : 0;
}

/* A rank's own work a step: its compute and its data path (not its waits
 * for other ranks); -1 where it reported no step. */
static double own_ms(const srv_rank *r)
{
    if (r->m.steps_reported == 0) return -1;
    double path = r->m.batches ? (double)r->obs.data_path_ns / (double)r->m.batches : 0;
    return ((double)r->m.compute_ns / (double)r->m.steps_reported + path) / 1e6;
}

int srv_obs_late_rank(const srv *s, double *ms)
{
    int best = -1;
    for (uint32_t li = 0; li < s->cfg.nlocal; li++)
        if (own_ms(&s->ranks[li]) > 0 &&
            (best < 0 || own_ms(&s->ranks[li]) > own_ms(&s->ranks[best])))
            best = (int)li;
    if (best >= 0) *ms = own_ms(&s->ranks[best]);
    return best;
}

/* Text appended to a buffer, cut at its end. */
typedef struct text {
    char *p;
    size_t cap, len;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...)
{
    if (t->len + 1 >= t->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n > 0) t->len += (size_t)n < t->cap - t->len ? (size_t)n : t->cap - t->len - 1;
}

/* Correlation of compute with planned cost over the steps; NAN where one
 * of them does not vary (or too few steps). */
static double correlation(const srv_step_stats *st)
{
    double n = (double)st->n;
    double vx = st->sxx - st->sx * st->sx / n, vy = st->syy - st->sy * st->sy / n;
    if (st->n < 2 || vx <= 1e-12 * st->sxx || vy <= 1e-12 * st->syy) return NAN;
    return (st->sxy - st->sx * st->sy / n) / sqrt(vx * vy);
}

/* How far the rank's compute follows its planned cost. */
static void report_cost(text *t, const srv_step_stats *st)
{
    double c = correlation(st);
    if (st->n < 10) {
        add(t, "  compute against planned cost: %" PRIu64 " steps with both, too few to "
            "compare\n", st->n);
    } else if (isnan(c)) {
        add(t, "  compute against planned cost: over %" PRIu64 " steps one of them does not "
            "vary: nothing to compare\n", st->n);
    } else {
        add(t, "  compute against planned cost: correlation %.2f over %" PRIu64 " steps, "
            "compute per cost at most %.2fx its mean%s\n", c, st->n,
            st->ratio_max / (st->ratio_sum / (double)st->n),
            c < 0.5 ? ": compute does not follow the planned cost, a stale cost model? "
                      "(refit it: lf-train --calibrate)" : "");
    }
}

/* A slow step and what took its time; mean: the rank's compute (ms) per
 * cost over its steps, so "2x" is a step twice as slow as its cost says. */
static void report_step(text *t, const srv_step_fig *f, double mean, const char *sep)
{
    add(t, "%s%u:%" PRIu64 " %.1f ms (", sep, f->epoch, f->step, (double)step_ns(f) / 1e6);
    if (f->wait_ns >= f->compute_ns && f->wait_ns >= f->sync_ns)
        add(t, "data wait %.1f ms)", (double)f->wait_ns / 1e6);
    else if (f->sync_ns >= f->compute_ns)
        add(t, "sync wait %.1f ms: the other ranks)", (double)f->sync_ns / 1e6);
    else if (mean > 0 && f->cost > 0)
        add(t, "compute %.1f ms, %.2fx what its planned cost predicts)",
            (double)f->compute_ns / 1e6, (double)f->compute_ns / 1e6 / (f->cost * mean));
    else
        add(t, "compute %.1f ms)", (double)f->compute_ns / 1e6);
}

void srv_obs_report(const srv *s, uint32_t li, char *buf, size_t cap)
{
    text t = {buf, cap, 0};
    if (cap) buf[0] = 0;
    const srv_rank *r = &s->ranks[li];
    const srv_rank_metrics *m = &r->m;
    if (m->steps_reported == 0) {
        add(&t, "report, rank %u: its trainer reported no step (lf_report_step): nothing "
            "to say where its time went\n", r->rank);
        return;
    }
    double wait = (double)m->wait_ns, compute = (double)m->compute_ns;
    double sync = (double)m->sync_ns, total = wait + compute + sync;
    if (total <= 0) total = 1;
    const char *most = wait >= compute && wait >= sync ? "data wait (lf_next)"
                     : sync >= compute                  ? "sync wait (the other ranks)"
                                                        : "compute";
    add(&t, "report, rank %u: %" PRIu64 " steps, %.2f s: data wait %.1f %%, compute %.1f %%, ",
        r->rank, m->steps_reported, total / 1e9, 100 * wait / total, 100 * compute / total);
    if (m->sync_steps) add(&t, "sync wait %.1f %%", 100 * sync / total);
    else add(&t, "sync wait not reported");
    add(&t, "; most of it %s\n", most);
    report_cost(&t, &r->obs.steps);
    const srv_step_stats *st = &r->obs.steps;
    srv_step_fig late[SRV_LATE_STEPS];
    uint32_t n = st->nlate;
    memcpy(late, st->late, n * sizeof *late);
    for (uint32_t i = 1; i < n; i++) /* slowest first */
        for (uint32_t k = i; k > 0 && step_ns(&late[k]) > step_ns(&late[k - 1]); k--) {
            srv_step_fig x = late[k];
            late[k] = late[k - 1];
            late[k - 1] = x;
        }
    add(&t, "  slowest steps (epoch:step):");
    double mean = st->n ? st->ratio_sum / (double)st->n : 0;
    for (uint32_t i = 0; i < n; i++) report_step(&t, &late[i], mean, i ? "; " : " ");
    add(&t, "\n");
}
