/*
 * plan_micro.c — pad mode's micro-batches against exhaustive search.
 *
 * A micro-batch layout is checked from the batch alone: the samples come
 * longest first (ties by id), the micro-batches tile them exactly once,
 * each is padded to its first sample's length (so to no less than any of
 * its samples), stays within micro_max_padded, and padded_tokens is their
 * sum. Its objective, padded tokens + micro_overhead per micro-batch, must
 * equal the optimum:
 *   - small random instances (up to 13 samples, lengths with ties, random
 *     cap and overhead, one step on 1 or 2 ranks): against every one of the
 *     2^(n-1) ways to cut the sorted list;
 *   - an epoch of lognormal lengths on 4 ranks (up to a few hundred samples
 *     a rank): against a plain quadratic DP that tries every cut (the
 *     planner's DP skips starts by the quadrangle inequality; this is what
 *     checks that shortcut).
 * Both plans are run twice and must be identical. Planted faults (a
 * suboptimal cut, a micro-batch padded short, a sample left out, a
 * micro-batch over the cap, a misreported padded total) must each be
 * rejected by the checker: a checker that cannot fail proves nothing.
 */
#include <math.h>
#include <string.h>

#include "lf_plan.h"
#include "test.h"

#define MAXN 13
#define BIGN 20000
#define MAXM 4096

static uint64_t rng_state = 7;

static uint64_t rng(void)
{
    return test_rng(&rng_state);
}

/* A layout as the checker sees it (copied, so faults can be planted). */
typedef struct layout {
    uint32_t n, micro;
    uint64_t id[MAXM], len[MAXM];
    uint32_t start[MAXM + 1], mlen[MAXM + 1];
    uint64_t padded;
} layout;

static void copy_batch(const lf_plan_batch *b, layout *l)
{
    ASSERT_LE(b->nsamples, MAXM);
    l->n = b->nsamples;
    l->micro = b->micro;
    memcpy(l->id, b->ids, b->nsamples * sizeof(uint64_t));
    memcpy(l->len, b->lengths, b->nsamples * sizeof(uint64_t));
    memcpy(l->start, b->micro_start, ((size_t)b->micro + 1) * sizeof(uint32_t));
    memcpy(l->mlen, b->micro_len, (size_t)b->micro * sizeof(uint32_t));
    l->padded = b->padded_tokens;
}

/* The least padded + overhead * micro-batches over every cut of the sorted
 * lengths, by enumeration (n <= MAXN). UINT64_MAX if none is within cap. */
static uint64_t brute_optimum(const uint64_t *len, uint32_t n, uint64_t cap, uint64_t ovh)
{
    uint64_t best = UINT64_MAX;
    for (uint32_t mask = 0; mask < (1u << (n ? n - 1 : 0)); mask++) {
        uint64_t v = 0;
        int ok = 1;
        for (uint32_t lo = 0, i = 1; ok && i <= n; i++) {
            if (i < n && !((mask >> (i - 1)) & 1)) continue;   /* no cut before i */
            ok = (i - lo) * len[lo] <= cap;
            v += (i - lo) * len[lo] + ovh;
            lo = i;
        }
        if (ok && v < best) best = v;
    }
    return n ? best : 0;
}

/* The same optimum by the textbook quadratic DP (every start tried). */
static uint64_t dp_optimum(const uint64_t *len, uint32_t n, uint64_t cap, uint64_t ovh)
{
    static uint64_t f[MAXM + 1];
    f[0] = 0;
    for (uint32_t j = 1; j <= n; j++) {
        f[j] = UINT64_MAX;
        for (uint32_t i = 0; i < j; i++) {
            uint64_t pad = (j - i) * len[i];
            if (pad <= cap && f[i] != UINT64_MAX && f[i] + pad + ovh < f[j]) f[j] = f[i] + pad + ovh;
        }
    }
    return f[n];
}

/* Checks l's structure against the cap and returns why it is wrong, or NULL.
 * *objective gets its padded + overhead * micro-batches. */
static const char *check_layout(const layout *l, uint64_t cap, uint64_t ovh, uint64_t *objective)
{
    for (uint32_t i = 1; i < l->n; i++)
        if (l->len[i] > l->len[i - 1] || (l->len[i] == l->len[i - 1] && l->id[i] < l->id[i - 1]))
            return "samples not longest first, ties by id";
    if (l->start[0] != 0 || l->start[l->micro] != l->n || (l->n && !l->micro))
        return "micro-batches do not cover the samples";
    uint64_t padded = 0;
    for (uint32_t j = 0; j < l->micro; j++) {
        uint32_t lo = l->start[j], hi = l->start[j + 1];
        if (hi <= lo) return "an empty or reversed micro-batch";
        for (uint32_t i = lo; i < hi; i++)
            if (l->len[i] > l->mlen[j]) return "a sample longer than its micro-batch";
        if ((uint64_t)(hi - lo) * l->mlen[j] > cap) return "a micro-batch over the cap";
        padded += (uint64_t)(hi - lo) * l->mlen[j];
    }
    if (padded != l->padded) return "padded_tokens is not the micro-batches' sum";
    *objective = padded + ovh * l->micro;
    return NULL;
}

/* Checks l fully: structure, and objective equal to the optimum opt. */
static const char *check_optimal(const layout *l, uint64_t cap, uint64_t ovh, uint64_t opt)
{
    uint64_t obj = 0;
    const char *why = check_layout(l, cap, ovh, &obj);
    if (why) return why;
    if (obj != opt) return obj > opt ? "cuts worse than the optimum" : "cuts beat the optimum";
    return NULL;
}

static void plant_faults(const layout *good, uint64_t cap, uint64_t ovh, uint64_t opt)
{
    static layout bad;
    if (good->n < 2) return;
    bad = *good;                            /* one sample a micro-batch, or all in one */
    int singletons = good->micro != good->n;
    bad.micro = singletons ? good->n : 1;
    bad.padded = 0;
    for (uint32_t j = 0; j < bad.micro; j++) {
        bad.start[j] = singletons ? j : 0;
        bad.mlen[j] = (uint32_t)good->len[bad.start[j]];
        bad.padded += singletons ? good->len[j] : good->n * good->len[0];
    }
    bad.start[bad.micro] = good->n;
    uint64_t obj = 0;
    if (!check_layout(&bad, cap, ovh, &obj) && obj != opt)
        ASSERT_TRUE(check_optimal(&bad, cap, ovh, opt) != NULL);
    bad = *good;                            /* a micro-batch padded short */
    bad.mlen[bad.micro - 1] = (uint32_t)good->len[good->n - 1] - 1;
    ASSERT_TRUE(check_optimal(&bad, cap, ovh, opt) != NULL);
    bad = *good;                            /* a sample left out */
    bad.start[bad.micro] = good->n - 1;
    ASSERT_TRUE(check_optimal(&bad, cap, ovh, opt) != NULL);
    bad = *good;                            /* over the cap */
    ASSERT_TRUE(check_optimal(&bad, good->len[0] - 1, ovh, opt) != NULL);
    bad = *good;                            /* padded total misreported */
    bad.padded++;
    ASSERT_TRUE(check_optimal(&bad, cap, ovh, opt) != NULL);
    /* an optimum overstated by one makes the layout look better than
     * possible: the checker must notice */
    ASSERT_TRUE(check_optimal(good, cap, ovh, opt + 1) != NULL);
}

/* Plans every step of p over s[0..n) and checks each rank's micro-batches;
 * the optimum comes from brute force (small) or the quadratic DP. Each
 * sample must be placed exactly once. Returns a hash of every layout. */
static uint64_t run_plan(const lf_plan_params *p, const lf_plan_sample *s, size_t n, int small,
                         uint32_t *faults)
{
    static uint8_t seen[BIGN];
    static layout l;
    memset(seen, 0, n);
    lf_plan *plan = NULL;
    ASSERT_EQ(lf_plan_create(p, s, n, &plan), 0);
    lf_plan_step st;
    uint64_t h = 1, placed = 0;
    int rc;
    while ((rc = lf_plan_next_step(plan, &st)) == 1) {
        for (uint32_t r = 0; r < st.world; r++) {
            lf_plan_batch b;
            ASSERT_EQ(lf_plan_rank_batch(plan, r, &b), 0);
            copy_batch(&b, &l);
            for (uint32_t i = 0; i < l.n; i++) {
                ASSERT_LT(l.id[i], n);              /* ids are indices here */
                ASSERT_EQ(seen[l.id[i]], 0);
                seen[l.id[i]] = 1;
                ASSERT_EQ(l.len[i], s[l.id[i]].length);
                h = h * 1000003 + l.id[i];
            }
            for (uint32_t j = 0; j <= l.micro; j++) h = h * 1000003 + l.start[j];
            uint64_t opt = small ? brute_optimum(l.len, l.n, p->micro_max_padded, p->micro_overhead)
                                 : dp_optimum(l.len, l.n, p->micro_max_padded, p->micro_overhead);
            const char *why = check_optimal(&l, p->micro_max_padded, p->micro_overhead, opt);
            if (why) TEST_FAIL_("step %" PRIu64 " rank %u (%u samples): %s", st.step, r, l.n, why);
            if (small && faults) {
                plant_faults(&l, p->micro_max_padded, p->micro_overhead, opt);
                (*faults)++;
            }
            placed += l.n;
        }
    }
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(placed, n);
    lf_plan_free(plan);
    return h;
}

static void small_params(lf_plan_params *p, const lf_plan_sample *s, uint32_t n)
{
    uint64_t total = 0, longest = 0;
    lf_plan_params_default(p);
    p->world = 1 + (uint32_t)(rng() % 2);
    for (uint32_t i = 0; i < n; i++) {
        total += lf_plan_cost(&p->cost, s[i].length);
        if (s[i].length > longest) longest = s[i].length;
    }
    p->step_budget = total;                  /* one step takes everything */
    p->outlier_cost = total;
    p->micro_max_padded = longest * (1 + rng() % 6);
    p->micro_overhead = 1 + rng() % 3000;
}

int main(void)
{
    static lf_plan_sample s[BIGN];
    uint32_t trials = 600, faults = 0;
    for (uint32_t t = 0; t < trials; t++) {
        uint32_t n = 2 + (uint32_t)(rng() % (MAXN - 1));
        uint64_t span = t % 3 == 0 ? 4 : 4000;   /* few distinct lengths: ties */
        for (uint32_t i = 0; i < n; i++)
            s[i] = (lf_plan_sample){i, 32 + (rng() % span) * (span == 4 ? 500 : 1), i};
        lf_plan_params p;
        small_params(&p, s, n);
        uint64_t h = run_plan(&p, s, n, 1, &faults);
        ASSERT_EQ(run_plan(&p, s, n, 1, NULL), h);
    }
    /* an epoch of lognormal lengths (median 600, sigma 1, 32..16384), 4 ranks */
    for (uint32_t i = 0; i < BIGN; i++) {
        double u1 = ((double)(rng() >> 11) + 0.5) / 9007199254740992.0;
        double u2 = (double)(rng() >> 11) / 9007199254740992.0;
        double z = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
        double L = 600 * exp(z);
        s[i] = (lf_plan_sample){i, L < 32 ? 32 : L > 16384 ? 16384 : (uint64_t)L, i / 64};
    }
    lf_plan_params p;
    lf_plan_params_default(&p);
    p.world = 4;
    uint64_t total = 0;
    for (uint32_t i = 0; i < BIGN; i++) total += lf_plan_cost(&p.cost, s[i].length);
    for (uint32_t per_rank = 16; per_rank <= 256; per_rank *= 16) {
        p.step_budget = total / BIGN * per_rank * p.world;
        p.outlier_cost = 0;
        for (uint64_t ovh = 64; ovh <= 4096; ovh *= 8) {
            p.micro_overhead = ovh;
            p.micro_max_padded = 16384 * (ovh == 64 ? 1 : 4);
            uint64_t h = run_plan(&p, s, BIGN, 0, NULL);
            ASSERT_EQ(run_plan(&p, s, BIGN, 0, NULL), h);
        }
    }
    printf("plan_micro: %u small plans optimal against brute force, %u layouts' faults caught; "
           "lognormal epochs optimal against the quadratic DP\n", trials, faults);
    return 0;
}
