/*
 * plan_cap_later.c — lf_plan_cap_later (issue #35 item 2), in pad and pack
 * at world 8 over three epochs of lognormal lengths:
 *  - a cap no step reaches leaves every step of every epoch bit-identical
 *    to the plan without it (a step is split again only where it binds);
 *  - a cap of 4/5 of epoch 0's most padded tokens leaves epoch 0 as it was
 *    and binds later: every later step's ranks within it, as measured by
 *    lf_plan_step_padded and by the ranks' own layouts (pad: samples x
 *    longest; pack: rows x seq_len), every rank within
 *    lf_plan_rank_samples_max's samples (the cap over the shortest sample's
 *    length, kept from the plan's creation), every sample once an epoch, and
 *    the epochs differ from the uncapped plan's;
 *  - a state saved inside a capped epoch restores into a plan given the
 *    same cap onto the same steps (the cap is no part of the state);
 *  - lf_plan_cap_later_samples (pad): a cap above every step's most
 *    samples a rank changes nothing; 4/5 of epoch 0's most leaves epoch 0
 *    as it was and binds later, every rank within it, every sample once an
 *    epoch;
 *  - lf_plan_fixed_bound (naive, sorted, 5891 samples: the epoch's rest of
 *    3 joins its last step): no rank holds more samples in a step, nor a
 *    longer one, and some rank holds exactly as many (the bound is tight:
 *    batch_per_rank + 1); 0 for a balanced plan.
 */
#include <math.h>
#include <stdlib.h>

#include "lf_plan.h"
#include "test.h"

#define NSAMPLES 6000u
#define EPOCHS 3u
#define WORLD 8u

static lf_plan_sample samples[NSAMPLES];

static void make_samples(void)
{
    uint64_t rng = 35;
    for (uint32_t i = 0; i < NSAMPLES; i++) {
        double u1 = ((double)(test_rng(&rng) >> 11) + 0.5) / 9007199254740992.0;
        double u2 = (double)(test_rng(&rng) >> 11) / 9007199254740992.0;
        double len = 300 * exp(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
        samples[i] = (lf_plan_sample){i, len < 8 ? 8 : len > 4096 ? 4096 : (uint64_t)len, i / 32};
    }
}

static lf_plan_params params(uint32_t layout)
{
    lf_plan_params p;
    lf_plan_params_default(&p);
    p.world = WORLD;
    p.layout = layout;
    if (layout == LF_PLAN_PACK) {
        p.seq_len = 4096;
        ASSERT_EQ(lf_plan_pack_budget(&p, samples, NSAMPLES, 1, &p.step_budget), 0);
    } else {
        uint64_t sum = 0;
        for (uint32_t i = 0; i < NSAMPLES; i++) sum += lf_plan_cost(&p.cost, samples[i].length);
        p.step_budget = sum / NSAMPLES * 8 * WORLD;
    }
    return p;
}

/* One epoch's steps: a hash of every step's ids rank by rank. */
typedef struct walk {
    uint64_t hash[EPOCHS];
    uint64_t most[EPOCHS];       /* the most padded tokens on a rank in a step */
    uint64_t count[EPOCHS];      /* the most samples on a rank in a step */
} walk;

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

/* Walks epochs, checking each step's ranks against the cap (0: none) as
 * the layouts give them and against nmax samples (0: none), both from
 * epoch 1 on, and that each epoch places every sample once. */
static void walk_plan(lf_plan *plan, const lf_plan_params *p, uint64_t cap, uint64_t nmax,
                      walk *w)
{
    static uint8_t seen[NSAMPLES];
    for (uint32_t e = 0; e < EPOCHS; e++) {
        lf_plan_step st;
        memset(seen, 0, sizeof seen);
        w->hash[e] = 0xcbf29ce484222325ull;
        w->most[e] = w->count[e] = 0;
        while (lf_plan_next_step(plan, &st) == 1) {
            uint64_t padded = lf_plan_step_padded(plan), most = 0;
            for (uint32_t r = 0; r < WORLD; r++) {
                lf_plan_batch b;
                ASSERT_EQ(lf_plan_rank_batch(plan, r, &b), 0);
                uint64_t own = p->layout == LF_PLAN_PACK ? (uint64_t)b.rows * p->seq_len
                                                         : (uint64_t)b.nsamples * b.row_len;
                if (own > most) most = own;
                if (nmax && e > 0) ASSERT_LE(b.nsamples, nmax);
                if (b.nsamples > w->count[e]) w->count[e] = b.nsamples;
                w->hash[e] = mix(w->hash[e], r);
                for (uint32_t i = 0; i < b.nsamples; i++) {
                    w->hash[e] = mix(w->hash[e], b.ids[i]);
                    ASSERT_EQ(seen[b.ids[i]], 0);
                    seen[b.ids[i]] = 1;
                }
            }
            ASSERT_EQ(padded, most);
            if (cap && e > 0) ASSERT_LE(padded, cap);
            if (padded > w->most[e]) w->most[e] = padded;
        }
        for (uint32_t i = 0; i < NSAMPLES; i++) ASSERT_EQ(seen[i], 1);
    }
}

static void check_layout(uint32_t layout)
{
    lf_plan_params p = params(layout);
    lf_plan *plain, *loose, *tight;
    walk a, b, c;
    ASSERT_EQ(lf_plan_create(&p, samples, NSAMPLES, &plain), 0);
    walk_plan(plain, &p, 0, 0, &a);

    ASSERT_EQ(lf_plan_create(&p, samples, NSAMPLES, &loose), 0);
    uint64_t high = lf_plan_cap_later(loose, 1, UINT64_MAX / 2);
    walk_plan(loose, &p, high, UINT32_MAX, &b);
    for (uint32_t e = 0; e < EPOCHS; e++) ASSERT_EQ(b.hash[e], a.hash[e]);

    ASSERT_EQ(lf_plan_create(&p, samples, NSAMPLES, &tight), 0);
    uint64_t cap = lf_plan_cap_later(tight, 1, a.most[0] * 4 / 5);
    ASSERT_EQ(cap, a.most[0] * 4 / 5);   /* above one sample's need */
    uint64_t nmax = lf_plan_rank_samples_max(tight, cap), shortest = UINT64_MAX;
    for (uint32_t i = 0; i < NSAMPLES; i++)   /* every sample fits (<= 4096) */
        if (samples[i].length < shortest) shortest = samples[i].length;
    /* as many of the shortest as the cap holds, or the plan's most a step
     * (lookahead 4096 or more) */
    ASSERT_TRUE(nmax == cap / shortest || (nmax < cap / shortest && nmax >= 4096));
    walk_plan(tight, &p, cap, nmax, &c);
    ASSERT_EQ(c.hash[0], a.hash[0]);
    for (uint32_t e = 1; e < EPOCHS; e++) ASSERT_NE(c.hash[e], a.hash[e]);

    /* a state inside capped epoch 1 restores onto the same steps */
    lf_plan *from, *again;
    lf_plan_step st;
    ASSERT_EQ(lf_plan_create(&p, samples, NSAMPLES, &from), 0);
    lf_plan_cap_later(from, 1, cap);
    while (lf_plan_next_step(from, &st) == 1) {}
    for (int i = 0; i < 5; i++) ASSERT_EQ(lf_plan_next_step(from, &st), 1);
    static unsigned char blob[1 << 20];
    long n = lf_plan_state_save(from, blob, sizeof blob);
    ASSERT_GT(n, 0);
    ASSERT_EQ(lf_plan_create(&p, samples, NSAMPLES, &again), 0);
    lf_plan_cap_later(again, 1, cap);
    ASSERT_EQ(lf_plan_state_restore(again, blob, (size_t)n), 0);
    lf_plan_step s1, s2;
    while (lf_plan_next_step(from, &s1) == 1) {
        ASSERT_EQ(lf_plan_next_step(again, &s2), 1);
        ASSERT_EQ(s1.nsamples, s2.nsamples);
        ASSERT_MEM_EQ(s1.rank_start, s2.rank_start, (WORLD + 1) * sizeof *s1.rank_start);
        ASSERT_MEM_EQ(s1.rank_ids, s2.rank_ids, s1.nsamples * sizeof *s1.rank_ids);
    }
    printf("%s: epoch 0's most %llu padded tokens; cap %llu binds (epochs 1-2 changed, "
           "within it), a cap no step reaches changes nothing; restored state: same steps\n",
           layout == LF_PLAN_PACK ? "pack" : "pad", (unsigned long long)a.most[0],
           (unsigned long long)cap);
    lf_plan_free(plain);
    lf_plan_free(loose);
    lf_plan_free(tight);
    lf_plan_free(from);
    lf_plan_free(again);
}

static void check_samples_cap(void)
{
    lf_plan_params p = params(LF_PLAN_PAD);
    lf_plan *plain, *loose, *tight;
    walk a, b, c;
    ASSERT_EQ(lf_plan_create(&p, samples, NSAMPLES, &plain), 0);
    walk_plan(plain, &p, 0, 0, &a);
    uint64_t most = 0;
    for (uint32_t e = 0; e < EPOCHS; e++) most = a.count[e] > most ? a.count[e] : most;
    ASSERT_EQ(lf_plan_create(&p, samples, NSAMPLES, &loose), 0);
    ASSERT_EQ(lf_plan_cap_later_samples(loose, 0, most), most);
    walk_plan(loose, &p, 0, most, &b);
    for (uint32_t e = 0; e < EPOCHS; e++) ASSERT_EQ(b.hash[e], a.hash[e]);
    ASSERT_EQ(lf_plan_create(&p, samples, NSAMPLES, &tight), 0);
    uint64_t cap = lf_plan_cap_later_samples(tight, 1, a.count[0] * 4 / 5);
    ASSERT_EQ(cap, a.count[0] * 4 / 5);
    walk_plan(tight, &p, 0, cap, &c);
    ASSERT_EQ(c.hash[0], a.hash[0]);
    for (uint32_t e = 1; e < EPOCHS; e++) ASSERT_NE(c.hash[e], a.hash[e]);
    printf("samples a rank: epoch 0's most %llu; cap %llu binds (epochs 1-2 changed, within "
           "it), a cap at the run's most (%llu) changes nothing\n",
           (unsigned long long)a.count[0], (unsigned long long)cap, (unsigned long long)most);
    lf_plan_free(plain);
    lf_plan_free(loose);
    lf_plan_free(tight);
}

static void check_fixed_bound(uint32_t sampler)
{
    const uint32_t n = 5891;   /* 46 steps of 128, the 47th of 131: three ranks 17 */
    lf_plan_params p = params(LF_PLAN_PAD);
    p.sampler = sampler;
    p.batch_per_rank = 16;
    lf_plan *plan;
    ASSERT_EQ(lf_plan_create(&p, samples, n, &plan), 0);
    uint64_t longest = 0, bound = lf_plan_fixed_bound(plan, &longest), most = 0, len = 0;
    for (uint32_t i = 0; i < n; i++) len = samples[i].length > len ? samples[i].length : len;
    ASSERT_EQ(longest, len);
    for (uint32_t e = 0; e < EPOCHS; e++) {
        lf_plan_step st;
        while (lf_plan_next_step(plan, &st) == 1)
            for (uint32_t r = 0; r < WORLD; r++) {
                lf_plan_batch b;
                ASSERT_EQ(lf_plan_rank_batch(plan, r, &b), 0);
                ASSERT_LE(b.nsamples, bound);
                ASSERT_LE(b.row_len, longest);
                most = b.nsamples > most ? b.nsamples : most;
            }
    }
    ASSERT_EQ(most, bound);
    printf("%s: at most %llu samples a rank (--samples-per-rank 16), none over %llu tokens: "
           "the bound, reached\n", sampler == LF_PLAN_NAIVE ? "naive" : "sorted",
           (unsigned long long)bound, (unsigned long long)longest);
    lf_plan_free(plan);
    lf_plan_params q = params(LF_PLAN_PAD);
    ASSERT_EQ(lf_plan_create(&q, samples, n, &plan), 0);
    ASSERT_EQ(lf_plan_fixed_bound(plan, &longest), 0);
    ASSERT_EQ(longest, 0);
    lf_plan_free(plan);
}

int main(void)
{
    make_samples();
    check_layout(LF_PLAN_PAD);
    check_layout(LF_PLAN_PACK);
    check_samples_cap();
    check_fixed_bound(LF_PLAN_NAIVE);
    check_fixed_bound(LF_PLAN_SORTED);
    return 0;
}
