/*
 * plan_shuffle.c — naive's and sorted's order drawn as it goes (order.c,
 * order version 2): lfp_perm_at is a bijection of [0, n) for every n and
 * key; a sample's place in it looks uniform over keys (chi-square of a few
 * ids' positions over many keys); a plan's epoch gives each placeable
 * sample once, in the permutation's order (capfail ones skipped); sorted's
 * mega-batches are naive's, each sorted longest first (length, then id);
 * a mixture's naive order is its sources' own shuffles (of their members)
 * interleaved by tokens against the weights, ending where the source whose
 * turn it is has none left, and sorted's is that cut and sorted; what a
 * naive or sorted mixture's order has left (lfp_order_left, which walks
 * ahead on a copy) is what it then gives, and the walk does not move the
 * order; and a state saved under order version 1's sequence hash is refused
 * as another version (LF_PLAN_E_VERSION), not taken for another plan.
 */
#include <math.h>

#include "plan_internal.h"
#include "test.h"

#define NSAMPLES 5000u

static uint64_t rng_state = 11;

static lf_plan_sample samples[NSAMPLES];

/* Every n up to 300 and a few larger, several keys: each value once. */
static void test_bijection(void)
{
    static uint8_t seen[70000];
    static const uint64_t big[] = {511, 512, 513, 4097, 65535, 65536, 65537, 69999};
    for (uint64_t k = 0; k < 3; k++) {
        for (uint64_t i = 0; i < 300 + sizeof big / sizeof big[0]; i++) {
            uint64_t n = i < 300 ? i + 1 : big[i - 300];
            lfp_perm q;
            lfp_perm_start(&q, n, lfp_mix(k + 1000 * n));
            memset(seen, 0, n);
            for (uint64_t x = 0; x < n; x++) {
                uint64_t y = lfp_perm_at(&q, x);
                ASSERT_LT(y, n);
                ASSERT_EQ(seen[y], 0);
                seen[y] = 1;
            }
        }
    }
}

/* Pearson's statistic of counts against a uniform expectation. */
static double chi2(const uint32_t *count, uint32_t cells, double expect)
{
    double x = 0;
    for (uint32_t c = 0; c < cells; c++) x += (count[c] - expect) * (count[c] - expect) / expect;
    return x;
}

/* Where ids 0, 1 and n-1 land over 20000 keys: n = 10 (the 4-bit domain
 * walks 6 of 16 values) every position, n = 1000 in ten bands of 100.
 * 9 degrees of freedom: the statistic passes 40 with p < 1e-5. Also
 * whether 0 lands before 1 (half of the time). */
static void test_uniform(void)
{
    static const uint64_t sizes[] = {10, 1000};
    const uint32_t keys = 20000;
    for (size_t si = 0; si < 2; si++) {
        uint64_t n = sizes[si];
        uint32_t count[3][10] = {{0}}, before = 0;
        for (uint32_t k = 0; k < keys; k++) {
            lfp_perm q;
            lfp_perm_start(&q, n, lfp_mix(0x5eed0000u + k));
            uint64_t pos[3] = {0}, want[3] = {0, 1, n - 1};
            for (uint64_t x = 0; x < n; x++)
                for (int j = 0; j < 3; j++)
                    if (lfp_perm_at(&q, x) == want[j]) pos[j] = x;
            for (int j = 0; j < 3; j++) count[j][pos[j] * 10 / n]++;
            before += pos[0] < pos[1];
        }
        for (int j = 0; j < 3; j++) {
            double x = chi2(count[j], 10, keys / 10.0);
            printf("n %" PRIu64 ": id %d's position, chi2 %.1f (9 df)\n", n, j, x);
            ASSERT_DBL_LT(x, 40.0);
        }
        printf("n %" PRIu64 ": id 0 before id 1 in %u of %u\n", n, before, keys);
        ASSERT_DBL_LT(fabs(before - keys / 2.0), 5 * sqrt(keys / 4.0));
    }
}

/* A mixture of three sources (blocks of 16 each side of a source's start). */
#define NSRC 3u
static const uint32_t first[NSRC + 1] = {0, 2000, 3504, NSAMPLES};
static const uint32_t weight[NSRC] = {500000, 300000, 200000};

static lf_plan *make_plan_of(uint32_t sampler, uint64_t micro_max_padded, int mixed)
{
    lf_plan_params p;
    lf_plan_params_default(&p);
    for (uint32_t s = 0; mixed && s < NSRC; s++) {
        p.mix.sources = NSRC;
        p.mix.first[s] = first[s];
        p.mix.weight[s] = weight[s];
    }
    p.sampler = sampler;
    p.world = 4;
    p.batch_per_rank = 8;
    p.seed = 5;
    p.micro_max_padded = micro_max_padded;   /* longer: left out (capfail) */
    p.overflow = LF_PLAN_OVERFLOW_DROP;
    if (sampler == LF_PLAN_BALANCED) p.step_budget = lf_plan_cost(&p.cost, 1040) * 32;
    lf_plan *plan = NULL;
    int rc = lf_plan_create(&p, samples, NSAMPLES, &plan);
    if (rc) TEST_FAIL_("lf_plan_create: %s", lf_plan_strerror(rc));
    return plan;
}

static lf_plan *make_plan(uint32_t sampler, uint64_t micro_max_padded)
{
    return make_plan_of(sampler, micro_max_padded, 0);
}

/* Epoch e's order from the cursor at its start. */
static size_t order_of(lf_plan *p, uint32_t e, uint32_t *out)
{
    lfp_epoch_begin(p, e);
    size_t m = 0;
    while (lfp_order_more(p)) out[m++] = lfp_order_next(p);
    return m;
}

static int key_after(const lf_plan *p, uint32_t a, uint32_t b)
{
    uint64_t la = lfp_len(p, a), lb = lfp_len(p, b);
    return la != lb ? la < lb : lfp_id(p, a) > lfp_id(p, b);
}

/* sorted (plan b) is naive's order of m cut in mega-batches of sort_cap,
 * each holding that part of naive's, longest first. */
static void check_sorted(const lf_plan *b, uint32_t e, const uint32_t *naive,
                         const uint32_t *sorted, size_t m, uint8_t *seen)
{
    ASSERT_LT(b->sort_cap, m);   /* more than one mega-batch */
    for (size_t lo = 0; lo < m; lo += b->sort_cap) {
        size_t hi = lo + b->sort_cap < m ? lo + b->sort_cap : m;
        for (size_t i = lo; i < hi; i++) seen[naive[i]] = 2;
        for (size_t i = lo; i < hi; i++) {
            ASSERT_EQ(seen[sorted[i]], 2);
            seen[sorted[i]] = 3;
            if (i > lo && key_after(b, sorted[i - 1], sorted[i]))
                TEST_FAIL_("epoch %u, mega-batch at %zu: %zu out of order", e, lo, i);
        }
    }
}

/* naive: each placeable sample once, in the permutation's order; sorted:
 * naive's order cut in mega-batches of sort_cap, each sorted. With and
 * without samples that fit no cap (micro_max_padded 1500: left out). */
static void test_orders(void)
{
    static uint32_t naive[NSAMPLES], sorted[NSAMPLES];
    static uint8_t seen[NSAMPLES];
    for (int capped = 0; capped < 2; capped++) {
        lf_plan *a = make_plan(LF_PLAN_NAIVE, capped ? 1500 : 0);
        lf_plan *b = make_plan(LF_PLAN_SORTED, capped ? 1500 : 0);
        for (uint32_t e = 0; e < 3; e++) {
            size_t m = order_of(a, e, naive);
            ASSERT_EQ(order_of(b, e, sorted), m);
            ASSERT_EQ(a->n, NSAMPLES);
            ASSERT_EQ(m, NSAMPLES - a->ncapfail);
            if (capped) ASSERT_GT(a->ncapfail, 0);
            memset(seen, 0, sizeof seen);
            lfp_perm q = a->perm;        /* the epoch's keys */
            for (size_t i = 0, x = 0; i < m; i++) {
                ASSERT_EQ(seen[naive[i]], 0);
                seen[naive[i]] = 1;
                ASSERT_EQ(lfp_capfail(a, naive[i]), 0);
                uint64_t y;
                do y = lfp_perm_at(&q, x++); while (lfp_capfail(a, y));
                ASSERT_EQ(y, naive[i]);
            }
            check_sorted(b, e, naive, sorted, m, seen);
        }
        lf_plan_free(a);
        lf_plan_free(b);
    }
}

/* A mixture's naive order, as the README says it is: each source's
 * shuffle (its keys where the epoch begins) of its members, interleaved:
 * next the source with the least tokens against its weight (ties: the
 * lower), until that source has no placeable sample left. */
static size_t mixture_order(const lf_plan *p, uint32_t *out)
{
    lfp_perm q[NSRC];
    uint64_t tokens[NSRC] = {0};
    size_t left[NSRC], m = 0;
    for (uint32_t s = 0; s < NSRC; s++) {
        q[s] = p->mix.src[s].perm;
        left[s] = 0;
        for (uint32_t i = first[s]; i < first[s + 1]; i++) left[s] += !lfp_capfail(p, i);
    }
    for (;;) {
        uint32_t t = 0;
        for (uint32_t s = 1; s < NSRC; s++)
            if ((lfp_u128)tokens[s] * weight[t] < (lfp_u128)tokens[t] * weight[s]) t = s;
        if (!left[t]) return m;
        uint64_t y;
        do y = first[t] + lfp_perm_at(&q[t], q[t].x++); while (lfp_capfail(p, y));
        out[m++] = (uint32_t)y;
        tokens[t] += lfp_len(p, y);
        left[t]--;
    }
}

/* A mixture's naive and sorted orders, with and without capfail samples,
 * three epochs: naive as mixture_order, sorted its mega-batches sorted. */
static void test_mixture_orders(void)
{
    static uint32_t naive[NSAMPLES], sorted[NSAMPLES], want[NSAMPLES];
    static uint8_t seen[NSAMPLES];
    for (int capped = 0; capped < 2; capped++) {
        lf_plan *a = make_plan_of(LF_PLAN_NAIVE, capped ? 1500 : 0, 1);
        lf_plan *b = make_plan_of(LF_PLAN_SORTED, capped ? 1500 : 0, 1);
        for (uint32_t e = 0; e < 3; e++) {
            lfp_epoch_begin(a, e);
            size_t w = mixture_order(a, want);
            size_t m = order_of(a, e, naive);
            ASSERT_EQ(m, w);
            ASSERT_LT(m, NSAMPLES - a->ncapfail);   /* sources left over */
            ASSERT_GT(m, NSAMPLES / 2);
            ASSERT_TRUE(memcmp(naive, want, m * sizeof *naive) == 0);
            memset(seen, 0, sizeof seen);
            ASSERT_EQ(order_of(b, e, sorted), m);
            check_sorted(b, e, naive, sorted, m, seen);
        }
        lf_plan_free(a);
        lf_plan_free(b);
    }
}

/* At points along a naive or sorted mixture's epoch, what lfp_order_left
 * says is left (all, and at most 10) is what the order then gives, and
 * the order drawn with those walks ahead is the order drawn without. */
static void test_mixture_left(void)
{
    static uint32_t plain[NSAMPLES], walked[NSAMPLES];
    for (uint32_t sampler = LF_PLAN_NAIVE; sampler <= LF_PLAN_SORTED; sampler++) {
        lf_plan *p = make_plan_of(sampler, 1500, 1);
        for (uint32_t e = 0; e < 2; e++) {
            size_t m = order_of(p, e, plain);
            lfp_epoch_begin(p, e);
            size_t k = 0;
            for (;;) {
                size_t left = m - k;
                if (k < 40 || left < 40 || k % 97 == 0) {
                    ASSERT_EQ(lfp_order_left(p, SIZE_MAX), left);
                    ASSERT_EQ(lfp_order_left(p, 10), left < 10 ? left : 10);
                }
                if (!lfp_order_more(p)) break;
                walked[k++] = lfp_order_next(p);
            }
            ASSERT_EQ(k, m);
            ASSERT_TRUE(memcmp(plain, walked, m * sizeof *plain) == 0);
        }
        lf_plan_free(p);
    }
}

/* A blob saved under order version 1's sequence hash (bytes 8..15) is of
 * another version; any other hash is another plan. */
static void test_old_version_refused(void)
{
    static uint8_t blob[1 << 16];
    for (uint32_t s = LF_PLAN_NAIVE; s <= 2 * LF_PLAN_SORTED; s++) {   /* then mixtures */
        int mixed = s > LF_PLAN_SORTED;
        lf_plan *p = make_plan_of(mixed ? s - LF_PLAN_SORTED : s, 0, mixed);
        lf_plan_step st;
        for (int i = 0; i < 5; i++) ASSERT_EQ(lf_plan_next_step(p, &st), 1);
        long size = lf_plan_state_save(p, blob, sizeof blob);
        ASSERT_GT(size, 0);
        ASSERT_NE(p->hash_v1, 0);
        ASSERT_NE(p->hash_v1, p->hash);
        lf_plan *q = make_plan_of(mixed ? s - LF_PLAN_SORTED : s, 0, mixed);
        ASSERT_EQ(lf_plan_state_restore(q, blob, (size_t)size), 0);
        for (int i = 0; i < 8; i++) blob[8 + i] = (uint8_t)(p->hash_v1 >> (8 * i));
        ASSERT_EQ(lf_plan_state_restore(q, blob, (size_t)size), LF_PLAN_E_VERSION);
        blob[8] ^= 1;
        ASSERT_EQ(lf_plan_state_restore(q, blob, (size_t)size), LF_PLAN_E_STATE);
        lf_plan_free(q);
        lf_plan_free(p);
    }
    lf_plan *bal = make_plan(LF_PLAN_BALANCED, 0);
    ASSERT_EQ(bal->hash_v1, 0);   /* balanced: its hash of old */
    lf_plan_free(bal);
}

int main(void)
{
    for (uint32_t i = 0; i < NSAMPLES; i++)   /* lengths 16..2063, blocks of 16 */
        samples[i] = (lf_plan_sample){i, 16 + test_rng(&rng_state) % 2048, i / 16};
    test_bijection();
    test_uniform();
    test_orders();
    test_mixture_orders();
    test_mixture_left();
    test_old_version_refused();
    return 0;
}
