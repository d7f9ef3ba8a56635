/*
 * score.c — runs a plan and measures it. The epoch's last step (it takes what
 * is left, whatever its size) is left out of balance and fill and counted in
 * tail_steps; every other step counts, outlier steps included.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "score.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }
static double cpu_s(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Nearest rank: the smallest value with at least p of the values at or below. */
static plan_pcts percentiles(double *v, size_t n)
{
    plan_pcts r = {0, 0, 0};
    if (n == 0) return r;
    qsort(v, n, sizeof *v, cmp_double);
    size_t i50 = (n + 1) / 2, i99 = (size_t)((n * 99 + 99) / 100);
    r.p50 = v[i50 - 1];
    r.p99 = v[i99 - 1];
    r.max = v[n - 1];
    return r;
}

/* Costs may be in FLOPs: an epoch's steps sum far past 2^64, and a step's
 * rank costs (d per micro-batch included) may too, so cost sums are 128-bit
 * (in 64 bits the budget fill of 24,000 samples at 2^41 a token printed
 * 0.956 for 0.981). */
__extension__ typedef unsigned __int128 cost_sum;

typedef struct tally {
    double *balance, *delay, *odelay;
    size_t nbalance, ndelay, nodelay, cap;
    uint64_t padded, tokens, micro, rank_steps;
    cost_sum cost, budget;       /* over the steps in balance and fill */
    uint64_t floor_padded;       /* pack: the fewest rows any split could use */
} tally;

static void tally_step(tally *t, const lf_plan_step *st)
{
    for (uint32_t i = 0; i < st->nsamples; i++) {
        if (i < st->noutliers) t->odelay[t->nodelay++] = st->delay[i];
        else t->delay[t->ndelay++] = st->delay[i];
    }
    if (st->flags & LF_PLAN_STEP_TAIL) return;
    uint64_t max = 0;
    cost_sum sum = 0;
    for (uint32_t r = 0; r < st->world; r++) {
        sum += st->rank_cost[r];
        if (st->rank_cost[r] > max) max = st->rank_cost[r];
    }
    if (sum) t->balance[t->nbalance++] = (double)max * st->world / (double)sum;
    t->cost += st->cost;
    t->budget += st->budget;
}

static int tally_init(tally *t, size_t n)
{
    memset(t, 0, sizeof *t);
    t->cap = n + 1;
    t->balance = malloc(t->cap * sizeof(double));
    t->delay = malloc(t->cap * sizeof(double));
    t->odelay = malloc(t->cap * sizeof(double));
    return t->balance && t->delay && t->odelay ? 0 : LF_PLAN_E_NOMEM;
}

static void tally_free(tally *t)
{
    free(t->balance);
    free(t->delay);
    free(t->odelay);
}

int plan_score_run(const lf_plan_params *prm, const lf_plan_sample *samples,
                   size_t n, uint64_t max_steps, plan_score *out)
{
    tally t;
    lf_plan *plan = NULL;
    int rc = tally_init(&t, n);
    if (rc) goto done;
    double t0 = now_s(), c0 = cpu_s();
    if ((rc = lf_plan_create(prm, samples, n, &plan))) goto done;
    double t1 = now_s(), c1 = cpu_s(), in_steps = 0, cpu_steps = 0;
    lf_plan_step st;
    uint64_t steps = 0, placed = 0, placed_full = 0;
    while (!max_steps || steps < max_steps) {
        double a = now_s(), ca = cpu_s();
        rc = lf_plan_next_step(plan, &st);
        uint64_t step_tokens = 0, row_len = 0, nonempty = 0;
        for (uint32_t r = 0; rc == 1 && r < st.world; r++) {
            lf_plan_batch b;
            if (lf_plan_rank_batch(plan, r, &b) == 0) {   /* as a server would */
                step_tokens += b.tokens;
                row_len = b.row_len;
                nonempty += b.nsamples > 0;
                t.padded += b.padded_tokens;
                t.tokens += b.tokens;
                t.micro += b.micro;
                t.rank_steps++;
            }
        }
        in_steps += now_s() - a;
        cpu_steps += cpu_s() - ca;
        if (rc <= 0) break;
        if (prm->layout == LF_PLAN_PACK && row_len) {
            /* every rank with samples has a row, and the rows hold the tokens */
            uint64_t rows = (step_tokens + row_len - 1) / row_len;
            t.floor_padded += (rows > nonempty ? rows : nonempty) * row_len;
        }
        tally_step(&t, &st);
        steps++;
        placed += st.nsamples;
        if (!(st.flags & LF_PLAN_STEP_TAIL)) placed_full += st.nsamples;
    }
    if (rc < 0) goto done;
    rc = 0;
    lf_plan_counts c;
    lf_plan_counts_get(plan, &c);
    memset(out, 0, sizeof *out);
    out->steps = steps;
    out->samples = placed;
    out->rejected = c.rejected;
    out->rejected_cap = c.rejected_cap;
    out->outliers = t.nodelay;
    out->tail_steps = steps - t.nbalance;
    out->max_over_mean = percentiles(t.balance, t.nbalance);
    out->padding_fraction = t.padded ? (double)(t.padded - t.tokens) / (double)t.padded : 0;
    out->padding_floor = t.floor_padded
                             ? (double)(t.floor_padded - t.tokens) / (double)t.floor_padded : 0;
    out->micro_per_rank = t.rank_steps ? (double)t.micro / (double)t.rank_steps : 0;
    out->budget_fill = t.budget ? (double)t.cost / (double)t.budget : 0;
    out->delay = percentiles(t.delay, t.ndelay);
    out->outlier_delay = percentiles(t.odelay, t.nodelay);
    out->plan_ms_per_step = steps ? in_steps * 1e3 / (double)steps : 0;
    out->plan_cpu_ms_per_step = steps ? cpu_steps * 1e3 / (double)steps : 0;
    out->create_s = t1 - t0;
    out->epoch_s = out->create_s + in_steps;
    out->epoch_cpu_s = c1 - c0 + cpu_steps;
    out->samples_per_step = t.nbalance ? (double)placed_full / (double)t.nbalance : 0;
    out->batch_per_rank = prm->batch_per_rank;
done:
    lf_plan_free(plan);
    tally_free(&t);
    return rc;
}
