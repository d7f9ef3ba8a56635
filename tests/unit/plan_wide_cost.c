/*
 * plan_wide_cost.c — costs in FLOP units: up to 2^52 a sample (the cost
 * model's limit), so the sums the planner keeps pass 2^64 within an epoch.
 *
 * Resume: a state saved after the epoch's summed cost has passed 2^64 must
 * continue exactly as the uninterrupted plan does. (The blob held that sum
 * in 64 bits: it wrapped, and the restored plan dated every sample it
 * pulled next about 4096 steps too early, so they all came out 'late'.)
 *
 * Outlier steps: a group of g outliers at 2^52 grows a step's budget by up
 * to g x 2^52 (pad; pack rounds g up to a multiple of world, or buys rows
 * instead), which wrapped from g = 4096. A plan whose outlier steps could
 * pass 2^63 is refused (LF_PLAN_E_OVERFLOW), right at the limit; every plan
 * made reports each step's cost as its samples sum in 128 bits, within its
 * budget, and no budget past 2^63.
 *
 * Saturation: lf_plan_cost compares coef * x with the limit instead of x
 * with the limit divided by coef (issue #35: the divisions were half of a
 * pass over 10^8 samples); at and around each term's bound, and on random
 * models and lengths, it must give what the division gives.
 */
#include "lf_plan.h"
#include "test.h"

#define NSAMPLES 24000u
#define TRACE_CAP (4u * NSAMPLES + 4u * 8192u)

static lf_plan_sample samples[NSAMPLES];

/* Lengths 100..1000 at 2^41 a token (the costliest just under 2^51), 16
 * samples a block: 3 to 4 samples fill a budget of 2^52, and the epoch's
 * cost sums past 2^64 about two thirds of the way through. */
static void wide_params(lf_plan_params *p)
{
    uint64_t rng_state = 11;
    for (uint32_t i = 0; i < NSAMPLES; i++)
        samples[i] = (lf_plan_sample){7u * i + 3u, 100 + test_rng(&rng_state) % 901, i / 16};
    lf_plan_params_default(p);
    ASSERT_EQ(lf_plan_cost_set(&p->cost, 0x1p41, 0, 0, 0), 0);
    p->world = 2;
    p->seed = 5;
    p->step_budget = LF_PLAN_COST_MAX;
}

static lf_plan *make_plan(const lf_plan_params *p)
{
    lf_plan *plan = NULL;
    int rc = lf_plan_create(p, samples, NSAMPLES, &plan);
    if (rc) TEST_FAIL_("lf_plan_create: %s", lf_plan_strerror(rc));
    return plan;
}

/* What a step hands out, flattened: (step, count), each sample's id and
 * delay, each rank's sample count. */
typedef struct trace {
    uint64_t v[TRACE_CAP];
    size_t n;
    size_t step_at[8192];        /* where each step's entries start */
    size_t steps;
} trace;

static void trace_put(trace *t, uint64_t v)
{
    ASSERT_LT(t->n, TRACE_CAP);
    t->v[t->n++] = v;
}

static void trace_step(trace *t, const lf_plan_step *st)
{
    ASSERT_LT(t->steps, sizeof t->step_at / sizeof t->step_at[0]);
    t->step_at[t->steps++] = t->n;
    trace_put(t, st->step << 32 | st->nsamples);
    for (uint32_t i = 0; i < st->nsamples; i++) trace_put(t, st->ids[i] | (uint64_t)st->delay[i] << 32);
    for (uint32_t r = 0; r < st->world; r++) trace_put(t, st->rank_start[r + 1] - st->rank_start[r]);
}

/* Plays `steps` steps (0: to the end of the epoch) into t. */
static void play(lf_plan *plan, size_t steps, trace *t)
{
    lf_plan_step st;
    t->n = t->steps = 0;
    for (size_t i = 0; !steps || i < steps; i++) {
        int rc = lf_plan_next_step(plan, &st);
        ASSERT_GE(rc, 0);
        if (rc == 0) break;
        trace_step(t, &st);
    }
}

/* The summed cost of the first `steps` steps of t, in 128 bits. */
static unsigned __int128 cost_before(const lf_plan_params *p, const trace *t, size_t steps)
{
    unsigned __int128 sum = 0;
    for (size_t s = 0; s < steps; s++) {
        size_t at = t->step_at[s];
        uint32_t n = (uint32_t)t->v[at];
        for (uint32_t i = 0; i < n; i++) {
            uint32_t k = (uint32_t)((t->v[at + 1 + i] & 0xffffffffu) - 3) / 7;
            sum += lf_plan_cost(&p->cost, samples[k].length);
        }
    }
    return sum;
}

/* Saved `at` steps in, restored into a fresh plan: the rest of the epoch is
 * the uninterrupted plan's, step for step. */
static void check_resume_at(const lf_plan_params *p, const trace *ref, size_t at)
{
    static trace got;
    static uint8_t blob[1 << 20];
    lf_plan *src = make_plan(p);
    play(src, at, &got);
    long size = lf_plan_state_save(src, blob, sizeof blob);
    ASSERT_GT(size, 0);
    lf_plan_free(src);
    lf_plan *dst = make_plan(p);
    ASSERT_EQ(lf_plan_state_restore(dst, blob, (size_t)size), 0);
    play(dst, 0, &got);
    lf_plan_free(dst);
    for (size_t s = 0; s < got.steps && at + s < ref->steps; s++) {
        size_t a = ref->step_at[at + s], b = got.step_at[s];
        size_t end = at + s + 1 < ref->steps ? ref->step_at[at + s + 1] : ref->n;
        for (size_t i = 0; i < end - a; i++)
            if (ref->v[a + i] != got.v[b + i])
                TEST_FAIL_("resumed at step %zu: step %zu differs at entry %zu: "
                           "%#" PRIx64 " (uninterrupted) vs %#" PRIx64 " (resumed)",
                           at, at + s, i, ref->v[a + i], got.v[b + i]);
    }
    ASSERT_EQ(got.steps, ref->steps - at);
}

static void test_resume_past_2_64(void)
{
    static trace ref;
    lf_plan_params p;
    wide_params(&p);
    lf_plan *plan = make_plan(&p);
    play(plan, 0, &ref);
    lf_plan_free(plan);
    size_t at[] = {ref.steps * 3 / 4, ref.steps * 7 / 8};
    /* the regime: what was placed before each save point passed 2^64 */
    ASSERT_TRUE(cost_before(&p, &ref, at[0]) > (unsigned __int128)1 << 64);
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) check_resume_at(&p, &ref, at[i]);
    printf("resume past 2^64: %zu steps, restored at %zu and %zu as planned\n", ref.steps,
           at[0], at[1]);
}

/* Plays an epoch: each step's cost is its samples' summed in 128 bits,
 * within its budget, and no budget passes 2^63. */
static void check_step_sums(lf_plan *plan, const lf_plan_params *p)
{
    lf_plan_step st;
    int rc;
    while ((rc = lf_plan_next_step(plan, &st)) == 1) {
        unsigned __int128 cost = 0;
        for (uint32_t i = 0; i < st.nsamples; i++)
            cost += lf_plan_cost(&p->cost, samples[(st.ids[i] - 3) / 7].length);
        if (cost != st.cost || cost > st.budget || st.budget > UINT64_C(1) << 63)
            TEST_FAIL_("step %" PRIu64 " (%u outliers): cost %.6g, reported %.6g; budget "
                       "%" PRIu64 " (2^63 = 9223372036854775808)", st.step, st.noutliers,
                       (double)cost, (double)st.cost, st.budget);
    }
    ASSERT_EQ(rc, 0);
}

typedef struct outlier_case {
    uint32_t layout, world, group;
    int rc;                      /* what lf_plan_create returns */
} outlier_case;

/* Every 8th sample an outlier of 2048 tokens at 2^52 (3000 of them) over
 * an outlier cost of 2^51, against a budget of 2^52: a group at g adds up
 * to g x 2^52, so 2^63 is reached at g = 2047 (pad, or pack at world 1),
 * and pack at world 3 rounds 2047 up to 2049. */
static void test_outlier_steps(void)
{
    static const outlier_case cases[] = {
        {LF_PLAN_PAD, 2, 4096, LF_PLAN_E_OVERFLOW},   /* wrapped to a 2^52 budget */
        {LF_PLAN_PAD, 3, 2047, 0},                    /* at 2^63 */
        {LF_PLAN_PAD, 3, 2048, LF_PLAN_E_OVERFLOW},
        {LF_PLAN_PACK, 1, 2047, 0},                   /* rows would pass 2^63 */
        {LF_PLAN_PACK, 3, 2046, 0},
        {LF_PLAN_PACK, 3, 2047, LF_PLAN_E_OVERFLOW},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        lf_plan_params p;
        wide_params(&p);
        for (uint32_t i = 0; i < NSAMPLES; i += 8) samples[i].length = 2048;
        p.layout = cases[c].layout;
        p.seq_len = 4096;
        p.world = cases[c].world;
        p.outlier_cost = LF_PLAN_COST_MAX / 2;
        p.outlier_group = cases[c].group;
        lf_plan *plan = NULL;
        int rc = lf_plan_create(&p, samples, NSAMPLES, &plan);
        if (rc == 0) check_step_sums(plan, &p);
        lf_plan_free(plan);
        ASSERT_EQ(rc, cases[c].rc);
    }
    ASSERT_TRUE(strstr(lf_plan_strerror(LF_PLAN_E_OVERFLOW), "outlier"));
    printf("outlier steps: refused past 2^63, within it at the limit\n");
}

/* Plays an epoch: each rank's reported cost is its samples' plus d per
 * micro-batch, summed in 128 bits and saturated at UINT64_MAX. Returns how
 * many rank-steps saturated. */
static uint64_t check_rank_costs(lf_plan *plan, const lf_plan_params *p)
{
    lf_plan_step st;
    lf_plan_batch b;
    uint64_t saturated = 0;
    int rc;
    while ((rc = lf_plan_next_step(plan, &st)) == 1) {
        for (uint32_t r = 0; r < st.world; r++) {
            ASSERT_EQ(lf_plan_rank_batch(plan, r, &b), 0);
            unsigned __int128 cost = (unsigned __int128)p->cost.d * b.micro;
            for (uint32_t i = 0; i < b.nsamples; i++) cost += lf_plan_cost(&p->cost, b.lengths[i]);
            uint64_t want = cost > UINT64_MAX ? UINT64_MAX : (uint64_t)cost;
            saturated += cost > UINT64_MAX;
            if (st.rank_cost[r] != want || b.cost != want)
                TEST_FAIL_("step %" PRIu64 " rank %u: %u micro-batches of d %" PRIu64
                           ", %u samples: cost %.6g (saturated %" PRIu64 "), reported %"
                           PRIu64 " (step) and %" PRIu64 " (batch)", st.step, r, b.micro,
                           p->cost.d, b.nsamples, (double)cost, want, st.rank_cost[r], b.cost);
        }
    }
    ASSERT_EQ(rc, 0);
    return saturated;
}

typedef struct overhead_case {
    uint32_t layout, world;
    uint64_t budget;             /* samples a step, at cost 1 each */
    int saturates;               /* d x micro-batches passes 2^64 on a rank */
} overhead_case;

/* Samples of 1 token at cost 1, d = 2^52 (the limit) per micro-batch: each
 * sample is a micro-batch of its own (pad's default cap is the longest
 * sample; pack's rows hold one), so a rank of 4096 passes 2^64 in
 * overhead. That sum wrapped: a rank of 4098 micro-batches reported a cost
 * of 2^53 + 4098, less than a rank of 4000 costs. */
static void test_micro_overhead(void)
{
    static const overhead_case cases[] = {
        {LF_PLAN_PAD, 1, 4100, 1},
        {LF_PLAN_PAD, 2, 12000, 1},  /* the epoch in two steps of 12000 (bounded tail) */
        {LF_PLAN_PAD, 2, 4096, 0},
        {LF_PLAN_PACK, 1, 4100, 1},
        {LF_PLAN_PACK, 3, 20000, 1}, /* one step: 24000 is within the bound of 20000 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        lf_plan_params p;
        wide_params(&p);
        for (uint32_t i = 0; i < NSAMPLES; i++) samples[i].length = 1;
        ASSERT_EQ(lf_plan_cost_set(&p.cost, 1, 0, 0, 0x1p52), 0);
        p.layout = cases[c].layout;
        p.seq_len = 1;
        p.world = cases[c].world;
        p.step_budget = cases[c].budget;
        lf_plan *plan = make_plan(&p);
        uint64_t saturated = check_rank_costs(plan, &p);
        lf_plan_free(plan);
        ASSERT_EQ(saturated > 0, cases[c].saturates);
    }
    printf("micro-batch overhead: rank costs past 2^64 saturate, the rest exact\n");
}

/* A term as the model defines it: x past floor(M / coef) saturates. */
static uint64_t ref_term(uint64_t coef, unsigned __int128 x, unsigned shift)
{
    unsigned __int128 m = (unsigned __int128)LF_PLAN_COST_MAX << shift;
    if (coef == 0 || x == 0) return 0;
    if (x > m / coef) return LF_PLAN_COST_MAX;
    return (uint64_t)((coef * x) >> shift);
}

static uint64_t ref_cost(const lf_plan_cost_model *m, uint64_t len)
{
    uint64_t s = ref_term(m->a_q16, len, 16), t = ref_term(m->b_q32, (unsigned __int128)len * len, 32);
    uint64_t u = s + t > LF_PLAN_COST_MAX ? LF_PLAN_COST_MAX : s + t;
    return u + m->c0 > LF_PLAN_COST_MAX ? LF_PLAN_COST_MAX : u + m->c0;
}

static void check_cost(const lf_plan_cost_model *m, uint64_t len)
{
    uint64_t got = lf_plan_cost(m, len), want = ref_cost(m, len);
    if (got != want)
        fprintf(stderr, "a=%" PRIu64 " b=%" PRIu64 " c0=%" PRIu64 " len %" PRIu64 ": cost %"
                PRIu64 ", the model's %" PRIu64 "\n", m->a_q16, m->b_q32, m->c0, len, got, want);
    ASSERT_EQ(got, want);
}

static void test_saturation_bounds(void)
{
    uint64_t rng_state = 3, checked = 0;
    for (int r = 0; r < 20000; r++) {
        unsigned sh = 1 + (unsigned)(test_rng(&rng_state) % 61);
        lf_plan_cost_model m = {test_rng(&rng_state) >> (64 - sh), test_rng(&rng_state) >> (64 - sh),
                                r % 3 ? 0 : test_rng(&rng_state) % 1000, 0};
        if (r % 4 == 1) {   /* powers of two: coef * x meets the limit exactly */
            m.a_q16 = UINT64_C(1) << (test_rng(&rng_state) % 60);
            m.b_q32 = UINT64_C(1) << (2 * (test_rng(&rng_state) % 30));
        }
        if (r % 5 == 0) m.b_q32 = 0;
        if (r % 7 == 0) m.a_q16 = 0;
        unsigned __int128 ma = (unsigned __int128)LF_PLAN_COST_MAX << 16;
        unsigned __int128 mb = (unsigned __int128)LF_PLAN_COST_MAX << 32;
        /* the linear term's bound, and L^2's around the quadratic's */
        uint64_t la = m.a_q16 ? (uint64_t)(ma / m.a_q16 > UINT64_MAX - 2 ? UINT64_MAX - 2 : ma / m.a_q16) : 0;
        uint64_t lb = 0;
        if (m.b_q32) {
            unsigned __int128 q = mb / m.b_q32;
            while ((unsigned __int128)(lb + 1) * (lb + 1) <= q && lb < UINT32_MAX) lb = lb ? lb * 2 : 1;
            for (uint64_t step = lb / 2; step; step /= 2)   /* the largest lb with lb^2 <= q */
                if ((unsigned __int128)(lb - step) * (lb - step) > q) lb -= step;
            while ((unsigned __int128)lb * lb > q) lb--;
        }
        for (int d = -1; d <= 2; d++) {
            check_cost(&m, la + (uint64_t)d + (d < 0 && la == 0));
            check_cost(&m, lb + (uint64_t)d + (d < 0 && lb == 0));
            checked += 2;
        }
        check_cost(&m, test_rng(&rng_state) >> (test_rng(&rng_state) % 64));
        checked++;
    }
    /* lengths whose square passes 2^64 (lf_plan_cost's, never the plan's) */
    lf_plan_cost_model big = {1, 1, 0, 0};
    check_cost(&big, (uint64_t)1 << 32);
    check_cost(&big, UINT64_MAX);
    printf("saturation: %" PRIu64 " costs at and around the bounds as the model's\n", checked);
}

int main(void)
{
    test_saturation_bounds();
    test_resume_past_2_64();
    test_outlier_steps();
    test_micro_overhead();
    printf("plan_wide_cost: ok\n");
    return 0;
}
