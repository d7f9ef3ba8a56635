/*
 * score.c — runs a plan and measures it. Every step counts in max/mean and in
 * the epoch's Σmax/Σmean, the epoch's last steps (the tail) included: a
 * trainer waits for the slowest rank at every step, so a figure that leaves
 * the tail out says less than the epoch costs. The tail is also counted
 * apart (tail_steps, and max/mean over the other steps) so a regression can
 * be placed. Budget fill leaves the tail out: it takes whatever is left.
 *
 * Next to each step's max/mean stands the least max/mean any split of the
 * same samples could reach (split_floor): where that floor is over a target
 * no split can meet it, and what would have to change is which samples
 * share a step (the selection), not how they are split.
 *
 * What the scoring holds grows with the steps and with the longest delay,
 * not with the samples: the per-step figures in lists grown a step at a
 * time, the delays counted by value, a step's samples in one buffer (it
 * held 8 arrays of one entry a piece, sized by planning every piece once
 * beforehand: 64 bytes a sample of address space, 6.4 GB at 10^8, which
 * the bench's 6 GiB cap refused; issue 35; unit/plan_score_delays).
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

/* The nodes lf-plan's split floor may search in a run (best_split): 24,000
 * steps of 4 a rank at world 8 took minutes at 2^18 nodes each; the steps
 * past it keep the bound. */
#define EXACT_TOTAL (1u << 26)

/* Delays in whole steps, counted by value: their percentiles are the
 * sorted list's, and the counts grow with the longest delay, not with the
 * samples (a list of every sample's delay took 8 bytes a sample). */
typedef struct delay_counts {
    uint64_t *count;             /* count[v]: samples placed v steps late */
    size_t cap;
    uint64_t n;
} delay_counts;

/* Every list a step adds to grows by one at most a step: sized with the
 * steps (tally_room), not with the samples. */
typedef struct tally {
    double *balance, *full, *stok, *scost, *bound;
    size_t nbalance, nfull, nsteps, nbound, cap;
    delay_counts delay, odelay;  /* non-outliers, outliers */
    double sum_max, sum_mean;    /* the epoch's Σ max rank cost and Σ mean */
    double sum_floor, sum_items; /* Σ split_floor and Σ of the samples' mean */
    uint64_t exact_steps;        /* steps whose floor is their optimum */
    uint32_t exact_budget;       /* the search's nodes left for the run */
    uint64_t *item;              /* the step's samples: lengths, then costs */
    size_t nitem, item_cap;
    uint64_t empty_ranks;        /* rank-steps with no sample */
    uint64_t padded, tokens, micro, rank_steps;
    cost_sum cost, budget;       /* over the steps in balance and fill */
    uint64_t floor_padded;       /* pack: the fewest rows any split could use */
} tally;

/* v (*cap elements of elem bytes) grown, by doubling, to hold want, the
 * new elements zero: the array to use, or NULL (v left as it was) when
 * out of memory. */
static void *grow(void *v, size_t *cap, size_t want, size_t elem)
{
    if (want <= *cap) return v;
    size_t n = *cap ? *cap : 64;
    while (n < want) n *= 2;
    char *p = realloc(v, n * elem);
    if (!p) return NULL;
    memset(p + *cap * elem, 0, (n - *cap) * elem);
    *cap = n;
    return p;
}

static int delay_add(delay_counts *d, uint32_t v)
{
    uint64_t *c = grow(d->count, &d->cap, (size_t)v + 1, sizeof *c);
    if (!c) return LF_PLAN_E_NOMEM;
    d->count = c;
    d->count[v]++;
    d->n++;
    return 0;
}

/* percentiles() of the counted delays. */
static plan_pcts delay_pcts(const delay_counts *d)
{
    plan_pcts r = {0, 0, 0};
    if (d->n == 0) return r;
    uint64_t i50 = (d->n + 1) / 2, i99 = (d->n * 99 + 99) / 100, seen = 0;
    for (size_t v = 0; v < d->cap; v++) {
        if (!d->count[v]) continue;
        if (seen < i50 && seen + d->count[v] >= i50) r.p50 = (double)v;
        if (seen < i99 && seen + d->count[v] >= i99) r.p99 = (double)v;
        seen += d->count[v];
        r.max = (double)v;
    }
    return r;
}

/* Room in every per-step list for one step more. */
static int tally_room(tally *t)
{
    double **arr[] = {&t->balance, &t->full, &t->stok, &t->scost, &t->bound};
    size_t cap = t->cap;
    for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++) {
        size_t c = t->cap;
        double *v = grow(*arr[i], &c, t->nsteps + 1, sizeof *v);
        if (!v) return LF_PLAN_E_NOMEM;
        *arr[i] = v;
        cap = c;
    }
    t->cap = cap;
    return 0;
}

static int tally_step(tally *t, const lf_plan_step *st)
{
    for (uint32_t i = 0; i < st->nsamples; i++)
        if (delay_add(i < st->noutliers ? &t->odelay : &t->delay, st->delay[i]))
            return LF_PLAN_E_NOMEM;
    uint64_t max = 0, tokens = 0;
    cost_sum sum = 0;
    for (uint32_t r = 0; r < st->world; r++) {
        sum += st->rank_cost[r];
        tokens += st->rank_tokens[r];
        if (st->rank_cost[r] > max) max = st->rank_cost[r];
        t->empty_ranks += st->rank_start[r + 1] == st->rank_start[r];
    }
    t->stok[t->nsteps] = (double)tokens;
    t->scost[t->nsteps++] = (double)st->cost;
    t->sum_max += (double)max;
    t->sum_mean += (double)sum / st->world;
    double ratio = sum ? (double)max * st->world / (double)sum : 0;
    if (sum) t->balance[t->nbalance++] = ratio;   /* a step of zero cost has no ratio */
    if (st->flags & LF_PLAN_STEP_TAIL) return 0;
    if (sum) t->full[t->nfull++] = ratio;
    t->cost += st->cost;
    t->budget += st->budget;
    return 0;
}

static void tally_free(tally *t)
{
    double *arr[] = {t->balance, t->full, t->stok, t->scost, t->bound};
    for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++) free(arr[i]);
    free(t->delay.count);
    free(t->odelay.count);
    free(t->item);
}

static int cmp_desc_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a < b) - (a > b);
}

/* The least the costliest rank can hold, over any split of costs c[0..n)
 * (sorted costliest first) over world ranks: of the j costliest samples
 * some rank holds k = ⌈j ÷ world⌉ at least, and those k cost at least the
 * k cheapest of the j; and no rank can be under the mean. The largest of
 * these over j is a lower bound, not the optimum: on text cut into pieces
 * of one length it is the pieces' pigeonhole (4 pieces on some rank where
 * the mean is 3.43), which is what keeps most cells from the targets. A
 * small step gets its optimum instead (best_split). */
static cost_sum split_floor(const uint64_t *c, size_t n, uint32_t world, cost_sum total)
{
    cost_sum best = (total + world - 1) / world, least = 0;   /* least: the k cheapest of the j */
    size_t k = 0;
    for (size_t j = 1; j <= n; j++) {
        least += c[j - 1];
        if (k < (j + world - 1) / world) k++;   /* k grows by one at most */
        else least -= c[j - 1 - k];
        if (least > best) best = least;
    }
    return best;
}

/* A small step's optimum: branch and bound over the samples, costliest
 * first, each to a rank whose load it keeps under the best found (ranks of
 * equal load are one choice), stopping at the floor. Gives up past
 * EXACT_NODES nodes. On dev-text cut at 8192, four a rank at world 8, a
 * step of 11 whole pieces and 12 others has a pigeonhole of 1.0 but an
 * optimum of 1.069 (the split reached 1.073): 3 ranks must hold two pieces
 * and no mix of the others evens the rest out. */
#define EXACT_ITEMS 64           /* larger steps keep the pigeonhole, */
#define EXACT_WORLD 16           /* as do larger worlds (a node costs world^2) */
#define EXACT_NODES (1u << 18)  /* a step's */

typedef struct exact {
    const uint64_t *c;           /* costliest first */
    size_t n;
    uint32_t world;
    cost_sum load[EXACT_ITEMS];  /* world <= n <= EXACT_ITEMS */
    cost_sum rest[EXACT_ITEMS + 1]; /* rest[i]: Σ c[i..n) */
    cost_sum best, floor;        /* the least max found; no split beats floor */
    uint32_t nodes, max_nodes;
} exact;

/* Whether the room the ranks have under the best found, where it takes
 * the cheapest sample left at least, holds what is left. */
static int room_left(const exact *e, size_t i)
{
    cost_sum room = 0;
    for (uint32_t r = 0; r < e->world; r++) {
        cost_sum free = e->best - 1 - e->load[r];    /* load < best */
        if (free >= e->c[e->n - 1]) room += free;
    }
    return room >= e->rest[i];
}

static void exact_search(exact *e, size_t i, cost_sum top)
{
    if (e->best <= e->floor || ++e->nodes > e->max_nodes) return;
    if (i == e->n) {
        e->best = top;               /* top < best: only such branches get here */
        return;
    }
    if (!room_left(e, i)) return;
    for (uint32_t r = 0; r < e->world; r++) {
        uint32_t q = 0;
        while (q < r && e->load[q] != e->load[r]) q++;
        if (q < r || e->load[r] + e->c[i] >= e->best) continue;
        e->load[r] += e->c[i];
        exact_search(e, i + 1, e->load[r] > top ? e->load[r] : top);
        e->load[r] -= e->c[i];
    }
}

/* The optimum of c[0..n) (costliest first) over world ranks where the
 * search ends within its nodes (*exact_out = 1), else floor (split_floor's);
 * *budget, the run's nodes left, pays for the search. */
static cost_sum best_split(const uint64_t *c, size_t n, uint32_t world, cost_sum floor,
                           uint32_t *budget, int *exact_out)
{
    *exact_out = 0;
    if (n > EXACT_ITEMS || world > EXACT_WORLD || world > n || !*budget)
        return floor;                                /* world > n: the costliest alone */
    exact e = {.c = c, .n = n, .world = world, .floor = floor,
               .max_nodes = *budget < EXACT_NODES ? *budget : EXACT_NODES};
    for (size_t i = n; i-- > 0;) e.rest[i] = e.rest[i + 1] + c[i];
    for (size_t i = 0; i < n; i++) {                  /* LPT: where the search starts */
        uint32_t least = 0;
        for (uint32_t r = 1; r < world; r++) if (e.load[r] < e.load[least]) least = r;
        e.load[least] += c[i];
    }
    for (uint32_t r = 0; r < world; r++) if (e.load[r] > e.best) e.best = e.load[r];
    memset(e.load, 0, sizeof e.load);
    exact_search(&e, 0, 0);
    *exact_out = e.nodes <= e.max_nodes;
    *budget -= *exact_out ? e.nodes : e.max_nodes;
    return *exact_out ? e.best : floor;
}

/* The step's split floor (t->item holds its samples' lengths), as a ratio
 * to the samples' mean cost a rank, tallied beside max/mean. */
static void tally_floor(tally *t, const lf_plan_cost_model *m, uint32_t world)
{
    cost_sum total = 0;
    for (size_t i = 0; i < t->nitem; i++) {
        t->item[i] = lf_plan_cost(m, t->item[i]);
        total += t->item[i];
    }
    if (!total) return;
    qsort(t->item, t->nitem, sizeof *t->item, cmp_desc_u64);
    cost_sum least = split_floor(t->item, t->nitem, world, total);
    int optimum;
    double floor = (double)best_split(t->item, t->nitem, world, least, &t->exact_budget,
                                      &optimum);
    t->exact_steps += optimum;
    double mean = (double)total / world;
    t->bound[t->nbound++] = floor / mean;
    t->sum_floor += floor;
    t->sum_items += mean;
}

/* p50/p99/max of v ÷ its median, and the least such ratio; no median (no
 * step, or a median of 0): nothing measured, all 0 and *ok = 0. */
static plan_pcts ratio_to_median(double *v, size_t n, double *min, int *ok)
{
    plan_pcts r = percentiles(v, n);   /* sorts v */
    *ok = n && r.p50 > 0;
    *min = *ok ? v[0] / r.p50 : 0;
    if (*ok) r = (plan_pcts){1.0, r.p99 / r.p50, r.max / r.p50};
    else r = (plan_pcts){0, 0, 0};
    return r;
}

int plan_score_run(const lf_plan_params *prm, const lf_plan_sample *samples,
                   size_t n, uint64_t max_steps, uint64_t later_cap, int cap_samples,
                   plan_score *out)
{
    tally t = {.exact_budget = EXACT_TOTAL};
    lf_plan *plan = NULL;
    int rc;
    double t0 = now_s(), c0 = cpu_s();
    if ((rc = lf_plan_create(prm, samples, n, &plan))) goto done;
    uint64_t cap_in_force = !later_cap  ? 0
                            : cap_samples ? lf_plan_cap_later_samples(plan, 0, later_cap)
                                          : lf_plan_cap_later(plan, 0, later_cap);
    double t1 = now_s(), c1 = cpu_s(), in_steps = 0, cpu_steps = 0;
    lf_plan_step st;
    uint64_t steps = 0, placed = 0, placed_full = 0, source_tokens[LF_PLAN_MAX_SOURCES] = {0};
    int epoch_done = 0;
    while (!max_steps || steps < max_steps) {
        double a = now_s(), ca = cpu_s();
        rc = lf_plan_next_step(plan, &st);
        uint64_t step_tokens = 0, row_len = 0, nonempty = 0;
        if (rc == 1 && tally_room(&t)) rc = LF_PLAN_E_NOMEM;
        for (uint32_t r = 0; rc == 1 && r < st.world; r++) {
            lf_plan_batch b;
            uint64_t *item;
            if (lf_plan_rank_batch(plan, r, &b) == 0) {   /* as a server would */
                if (!(item = grow(t.item, &t.item_cap, t.nitem + b.nsamples, sizeof *item))) {
                    rc = LF_PLAN_E_NOMEM;
                    break;
                }
                t.item = item;
                step_tokens += b.tokens;
                row_len = b.row_len;
                nonempty += b.nsamples > 0;
                t.padded += b.padded_tokens;
                t.tokens += b.tokens;
                t.micro += b.micro;
                t.rank_steps++;
                memcpy(t.item + t.nitem, b.lengths, b.nsamples * sizeof *t.item);
                t.nitem += b.nsamples;
                for (uint32_t i = 0; i < b.nsamples; i++)
                    source_tokens[lf_plan_mix_source(&prm->mix, b.ids[i])] += b.lengths[i];
            }
        }
        in_steps += now_s() - a;
        cpu_steps += cpu_s() - ca;
        if (rc <= 0) {
            epoch_done = rc == 0;
            break;
        }
        tally_floor(&t, &prm->cost, st.world);
        t.nitem = 0;
        if (prm->layout == LF_PLAN_PACK && row_len) {
            /* every rank with samples has a row, and the rows hold the tokens */
            uint64_t rows = (step_tokens + row_len - 1) / row_len;
            t.floor_padded += (rows > nonempty ? rows : nonempty) * row_len;
        }
        if ((rc = tally_step(&t, &st))) break;
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
    out->later_cap = cap_in_force;
    out->samples = placed;
    out->rejected = c.rejected;
    out->rejected_cap = c.rejected_cap;
    out->outliers = t.odelay.n;
    out->tail_steps = steps - t.nfull;
    out->measured = t.nbalance;
    out->max_over_mean = percentiles(t.balance, t.nbalance);
    out->max_over_mean_full = percentiles(t.full, t.nfull);
    out->epoch_max_over_mean = t.sum_mean > 0 ? t.sum_max / t.sum_mean : 0;
    out->split_bound = percentiles(t.bound, t.nbound);
    out->epoch_split_bound = t.sum_items > 0 ? t.sum_floor / t.sum_items : 0;
    out->split_bound_exact_steps = t.exact_steps;
    out->empty_rank_steps = t.empty_ranks;
    int tok_ok, cost_ok;
    out->step_tokens = ratio_to_median(t.stok, t.nsteps, &out->step_tokens_min, &tok_ok);
    out->step_cost = ratio_to_median(t.scost, t.nsteps, &out->step_cost_min, &cost_ok);
    out->steps_ok = tok_ok && cost_ok;
    out->epoch_done = epoch_done;
    if (epoch_done && prm->mix.sources > 1) {
        /* a mixture's epoch draws part of most sources: what it left out
         * of its draw is what it rejected */
        out->dropped_tokens = c.rejected_tokens;
        out->all_tokens = t.tokens + c.rejected_tokens;
    } else if (epoch_done) {         /* what a whole epoch did not place */
        /* from the view's counts where it has them, else a pass releasing
         * its pages: reading every length in place held the whole index
         * (4.1 GB of a 4.8 GB peak at 10^9 samples) */
        uint64_t all = 0, len, k;
        lf_plan_lengths w = lf_plan_lengths_of(prm, samples, n, 0);
        while (lf_plan_lengths_next(&w, &len, &k)) all += len * k;
        out->dropped_tokens = all - t.tokens;
        out->all_tokens = all;
    }
    memcpy(out->source_tokens, source_tokens, sizeof source_tokens);
    out->padding_fraction = t.padded ? (double)(t.padded - t.tokens) / (double)t.padded : 0;
    out->padding_floor = t.floor_padded
                             ? (double)(t.floor_padded - t.tokens) / (double)t.floor_padded : 0;
    out->micro_per_rank = t.rank_steps ? (double)t.micro / (double)t.rank_steps : 0;
    out->budget_fill = t.budget ? (double)t.cost / (double)t.budget : 0;
    out->delay = delay_pcts(&t.delay);
    out->outlier_delay = delay_pcts(&t.odelay);
    out->plan_ms_per_step = steps ? in_steps * 1e3 / (double)steps : 0;
    out->plan_cpu_ms_per_step = steps ? cpu_steps * 1e3 / (double)steps : 0;
    out->create_s = t1 - t0;
    out->epoch_s = out->create_s + in_steps;
    out->epoch_cpu_s = c1 - c0 + cpu_steps;
    out->samples_per_step = t.nfull ? (double)placed_full / (double)t.nfull : 0;
    out->batch_per_rank = prm->batch_per_rank;
    out->level = lf_plan_world_level(plan, &out->level_piece_len, &out->level_per_rank);
    out->level_of_budget = prm->step_budget ? (double)out->level / (double)prm->step_budget : 0;
done:
    lf_plan_free(plan);
    tally_free(&t);
    return rc;
}
