/*
 * plan_split_diff.c — the rank split against the exhaustive-search optimum.
 *
 * Small random instances (up to 10 samples on 2..4 ranks, and some of 17-18
 * on 2, past the part KK places, so LPT's part is checked too) are planned as one
 * step holding every sample; the checker recomputes each rank's cost from
 * the sample list, checks each sample is placed exactly once, that the split
 * is no better than the optimum (else the search is wrong), that no single
 * move or swap off a costliest rank would lower the max (what the local
 * search promises), and that it is within 4/3 of the optimum (Graham's bound
 * for LPT, which KK plus local search must beat).
 * It also counts how often the split is optimal, and demands most are.
 * Then planted faults (a sample dropped, one doubled, a cost misreported, an
 * obviously bad split, a split claiming to beat the optimum) are fed to the
 * checker, which must reject each: a checker that cannot fail proves nothing.
 */
#include "lf_plan.h"
#include "test.h"

#define MAXN 18
#define MAXK 4

typedef struct instance {
    uint32_t n, k;
    uint64_t cost[MAXN];
} instance;

typedef struct split {
    uint32_t rank_of[MAXN];      /* UINT32_MAX: not placed */
    uint32_t times[MAXN];        /* how often each sample appears */
    uint64_t claimed[MAXK];      /* rank costs as reported by the planner */
} split;

static uint64_t rng_state = 1;

static uint64_t rng(void)
{
    return test_rng(&rng_state);
}

/* The best possible max rank cost, by trying every assignment. */
static uint64_t optimum(const instance *in)
{
    uint32_t total = 1;
    for (uint32_t i = 0; i < in->n; i++) total *= in->k;
    uint64_t best = UINT64_MAX;
    for (uint32_t code = 0; code < total; code++) {
        uint64_t load[MAXK] = {0}, max = 0;
        uint32_t c = code;
        for (uint32_t i = 0; i < in->n; i++, c /= in->k) load[c % in->k] += in->cost[i];
        for (uint32_t r = 0; r < in->k; r++) if (load[r] > max) max = load[r];
        if (max < best) best = max;
    }
    return best;
}

/* Whether moving one sample off a costliest rank, or swapping it with one
 * of another rank, lowers the larger of the two ranks below max. */
static int improvable(const instance *in, const split *sp, const uint64_t *load, uint64_t max)
{
    for (uint32_t x = 0; x < in->n; x++) {
        uint32_t hi = sp->rank_of[x];
        if (load[hi] != max) continue;
        for (uint32_t lo = 0; lo < in->k; lo++) {
            if (lo == hi) continue;
            if (load[lo] + in->cost[x] < max) return 1;
            for (uint32_t y = 0; y < in->n; y++) {
                if (sp->rank_of[y] != lo || in->cost[y] >= in->cost[x]) continue;
                if (load[lo] + in->cost[x] - in->cost[y] < max) return 1;
            }
        }
    }
    return 0;
}

/* Returns NULL when the split is sound and within the bound, else why not.
 * *optimal is set when it reaches the optimum. */
static const char *check_split(const instance *in, const split *sp, uint64_t opt,
                               int *optimal)
{
    uint64_t load[MAXK] = {0}, max = 0;
    for (uint32_t i = 0; i < in->n; i++) {
        if (sp->times[i] != 1) return "a sample is not placed exactly once";
        if (sp->rank_of[i] >= in->k) return "a sample's rank is out of range";
        load[sp->rank_of[i]] += in->cost[i];
    }
    for (uint32_t r = 0; r < in->k; r++) {
        if (load[r] != sp->claimed[r]) return "a reported rank cost is not its samples' sum";
        if (load[r] > max) max = load[r];
    }
    if (max < opt) return "the split beats the exhaustive optimum";
    if (improvable(in, sp, load, max)) return "one move or swap would lower the max";
    if (3 * max > 4 * opt) return "the split is worse than 4/3 of the optimum";
    *optimal = max == opt;
    return NULL;
}

/* Every 50th instance has 17 or 18 samples on 2 ranks: more than the
 * 8 per rank that KK places, so LPT places the rest. */
static void random_instance(instance *in, int big)
{
    in->k = big ? 2 : 2 + (uint32_t)(rng() % (MAXK - 1));
    uint32_t maxn = in->k == 2 ? 10 : in->k == 3 ? 8 : 7;
    in->n = big ? 17 + (uint32_t)(rng() % 2) : 3 + (uint32_t)(rng() % (maxn - 2));
    for (uint32_t i = 0; i < in->n; i++)   /* long-tailed: mostly small, some large */
        in->cost[i] = rng() % 4 == 0 ? 200 + rng() % 800 : 50 + rng() % 150;
}

/* Plans the instance as one step and reads the split back. */
static void plan_split(const instance *in, split *sp)
{
    lf_plan_sample smp[MAXN];
    uint64_t total = 0;
    for (uint32_t i = 0; i < in->n; i++) {
        smp[i] = (lf_plan_sample){100 + i * 7, in->cost[i], i};
        total += in->cost[i];
    }
    lf_plan_params p;
    lf_plan_params_default(&p);
    ASSERT_EQ(lf_plan_cost_set(&p.cost, 1.0, 0, 0, 0), 0);   /* cost = length */
    p.world = in->k;
    p.step_budget = total;
    p.outlier_cost = total;
    p.lookahead = MAXN;
    lf_plan *plan = NULL;
    ASSERT_EQ(lf_plan_create(&p, smp, in->n, &plan), 0);
    lf_plan_step st;
    ASSERT_EQ(lf_plan_next_step(plan, &st), 1);
    ASSERT_EQ(st.nsamples, in->n);
    memset(sp, 0, sizeof *sp);
    for (uint32_t i = 0; i < in->n; i++) sp->rank_of[i] = UINT32_MAX;
    for (uint32_t r = 0; r < in->k; r++) {
        sp->claimed[r] = st.rank_cost[r];
        for (uint32_t j = st.rank_start[r]; j < st.rank_start[r + 1]; j++) {
            uint32_t i = (uint32_t)((st.rank_ids[j] - 100) / 7);
            ASSERT_LT(i, in->n);
            sp->rank_of[i] = r;
            sp->times[i]++;
        }
    }
    ASSERT_EQ(lf_plan_next_step(plan, &st), 0);
    lf_plan_free(plan);
}

/* Each planted fault must be caught. */
static void plant_faults(const instance *in, const split *good, uint64_t opt)
{
    int optimal;
    split bad;
    bad = *good;                      /* a sample dropped */
    bad.times[0] = 0;
    bad.claimed[bad.rank_of[0]] -= in->cost[0];
    ASSERT_TRUE(check_split(in, &bad, opt, &optimal) != NULL);
    bad = *good;                      /* a sample placed twice */
    bad.times[1] = 2;
    ASSERT_TRUE(check_split(in, &bad, opt, &optimal) != NULL);
    bad = *good;                      /* a rank cost misreported */
    bad.claimed[0] += 1;
    ASSERT_TRUE(check_split(in, &bad, opt, &optimal) != NULL);
    bad = *good;                      /* everything on rank 0 */
    memset(bad.claimed, 0, sizeof bad.claimed);
    for (uint32_t i = 0; i < in->n; i++) {
        bad.rank_of[i] = 0;
        bad.claimed[0] += in->cost[i];
    }
    ASSERT_TRUE(check_split(in, &bad, opt, &optimal) != NULL);
    /* a search that overstates the optimum by one makes the split look
     * better than possible: the checker must notice */
    uint64_t max = 0;
    for (uint32_t r = 0; r < in->k; r++) if (good->claimed[r] > max) max = good->claimed[r];
    ASSERT_TRUE(check_split(in, good, max + 1, &optimal) != NULL);
    (void)opt;
}

int main(void)
{
    uint32_t trials = 2000, optimal_count = 0;
    for (uint32_t t = 0; t < trials; t++) {
        instance in;
        split sp;
        random_instance(&in, t % 50 == 49);
        plan_split(&in, &sp);
        uint64_t opt = optimum(&in);
        int optimal = 0;
        const char *why = check_split(&in, &sp, opt, &optimal);
        if (why) TEST_FAIL_("trial %u (n %u, k %u, optimum %" PRIu64 "): %s", t, in.n, in.k, opt, why);
        optimal_count += (uint32_t)optimal;
        plant_faults(&in, &sp, opt);
    }
    printf("plan_split_diff: %u/%u splits optimal, all within 4/3\n", optimal_count, trials);
    ASSERT_GE(optimal_count * 100, trials * 90);
    return 0;
}
