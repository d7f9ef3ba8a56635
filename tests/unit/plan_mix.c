/*
 * plan_mix.c — a mixture of three sources, weights 0.5 / 0.3 / 0.2 of the
 * tokens, over 4 ranks (balancer/README.md, "Mixtures"):
 *   - over each epoch the tokens placed from each source are within 0.5 %
 *     (absolute) of its weight;
 *   - no sample is placed twice in an epoch, and each source's samples
 *     placed are all of that source's draw (the epoch's order);
 *   - a source not exhausted draws another set of its samples next epoch;
 *   - a state saved mid-epoch restores into a plan that goes on exactly as
 *     the uninterrupted one (balanced, naive, sorted; the count pending,
 *     lf_plan_counts, unknown until the order ends); onto other weights it
 *     is LF_PLAN_E_WEIGHTS
 *     mid-epoch, and between epochs the next epoch is the new weights' own;
 *   - the split is as even as for the same samples without a mixture;
 *   - a weight of 0, unordered sources and a block across two are refused.
 */
#include "lf_plan.h"
#include "test.h"

#define NSRC 3
static const uint32_t counts[NSRC] = {6000, 3000, 2200};
static const uint32_t weights[NSRC] = {500000, 300000, 200000};
#define NSAMPLES (6000u + 3000u + 2200u)

static lf_plan_sample samples[NSAMPLES];
static uint64_t rng_state = 11;

/* Lengths: each source its own spread (short, mixed, long documents). */
static void make_samples(void)
{
    uint32_t id = 0;
    for (uint32_t s = 0; s < NSRC; s++) {
        uint64_t base = 64 << s, range = 800u << s;
        for (uint32_t i = 0; i < counts[s]; i++, id++)
            samples[id] = (lf_plan_sample){id, base + test_rng(&rng_state) % range,
                                            s * 1000 + i / 16};  /* blocks of 16 */
    }
}

static void mix_params(lf_plan_params *p, const uint32_t *w)
{
    lf_plan_params_default(p);
    p->world = 4;
    p->step_budget = 16 * 4 * lf_plan_cost(&p->cost, 1200);
    p->mix.sources = NSRC;
    for (uint32_t s = 0, first = 0; s < NSRC; first += counts[s], s++) {
        p->mix.first[s] = first;
        p->mix.weight[s] = w[s];
    }
}

static lf_plan *make_plan(const lf_plan_params *p)
{
    lf_plan *plan = NULL;
    ASSERT_EQ(lf_plan_create(p, samples, NSAMPLES, &plan), 0);
    return plan;
}

typedef struct epoch_sum {
    uint64_t tokens[NSRC], placed[NSRC];
    double max_over_mean;        /* summed over steps */
    uint64_t steps;
} epoch_sum;

/* Plays one epoch: no id twice, tokens and samples per source, balance. */
static void play_epoch(lf_plan *plan, const lf_plan_mix *mix, uint8_t *seen, epoch_sum *e)
{
    memset(e, 0, sizeof *e);
    memset(seen, 0, NSAMPLES);
    lf_plan_step st;
    int rc;
    while ((rc = lf_plan_next_step(plan, &st)) == 1) {
        uint64_t max = 0, sum = 0;
        for (uint32_t r = 0; r < st.world; r++) {
            max = st.rank_cost[r] > max ? st.rank_cost[r] : max;
            sum += st.rank_cost[r];
        }
        if (!(st.flags & LF_PLAN_STEP_TAIL) && sum) {
            e->max_over_mean += (double)max * st.world / (double)sum;
            e->steps++;
        }
        for (uint32_t i = 0; i < st.nsamples; i++) {
            uint64_t id = st.ids[i];
            ASSERT_LT(id, NSAMPLES);
            ASSERT_EQ(seen[id], 0);
            seen[id] = 1;
            uint32_t s = lf_plan_mix_source(mix, id);
            e->tokens[s] += samples[id].length;
            e->placed[s]++;
        }
    }
    ASSERT_EQ(rc, 0);
}

static void check_shares(const epoch_sum *e, int epoch)
{
    uint64_t total = 0;
    for (uint32_t s = 0; s < NSRC; s++) total += e->tokens[s];
    for (uint32_t s = 0; s < NSRC; s++) {
        double share = (double)e->tokens[s] / (double)total, want = weights[s] / 1e6;
        printf("epoch %d source %u: %" PRIu64 " samples, %" PRIu64 " tokens, share %.5f "
               "(weight %.3f)\n", epoch, s, e->placed[s], e->tokens[s], share, want);
        ASSERT_DBL_NEAR(share, want, 0.005);
    }
}

/* Steps of a and b are the same from here to the end of the epoch; the
 * samples they place. */
static uint64_t same_rest(lf_plan *a, lf_plan *b)
{
    lf_plan_step x, y;
    int ra, rb;
    uint64_t steps = 0, placed = 0;
    do {
        ra = lf_plan_next_step(a, &x);
        rb = lf_plan_next_step(b, &y);
        ASSERT_EQ(ra, rb);
        if (ra != 1) break;
        ASSERT_EQ(x.epoch, y.epoch);
        ASSERT_EQ(x.step, y.step);
        ASSERT_EQ(x.nsamples, y.nsamples);
        ASSERT_MEM_EQ(x.ids, y.ids, x.nsamples * sizeof *x.ids);
        ASSERT_MEM_EQ(x.rank_start, y.rank_start, (x.world + 1) * sizeof *x.rank_start);
        ASSERT_MEM_EQ(x.rank_ids, y.rank_ids, x.nsamples * sizeof *x.rank_ids);
        steps++;
        placed += x.nsamples;
    } while (1);
    ASSERT_EQ(ra, 0);
    ASSERT_GT(steps, 0);
    return placed;
}

/* A state saved mid-epoch goes on as the plan it was saved from; its count
 * of samples pending is unknown (UINT64_MAX) until the order has ended,
 * then what the epoch still places (0 at its end); weights changed only
 * between epochs. */
static void check_resume(const lf_plan_params *p)
{
    lf_plan *a = make_plan(p), *b = make_plan(p);
    lf_plan_step st;
    for (int i = 0; i < 9; i++) ASSERT_EQ(lf_plan_next_step(a, &st), 1);
    static uint8_t blob[1 << 20];
    long size = lf_plan_state_save(a, blob, sizeof blob);
    ASSERT_GT(size, p->sampler == LF_PLAN_BALANCED ? 56 : 55);   /* a window: balanced */
    ASSERT_EQ(lf_plan_state_restore(b, blob, (size_t)size), 0);
    lf_plan_counts c0;
    lf_plan_counts_get(a, &c0);
    ASSERT_EQ(c0.pending, UINT64_MAX);
    ASSERT_GT(same_rest(a, b), 0);
    lf_plan_counts_get(a, &c0);
    ASSERT_EQ(c0.pending, 0);
    same_rest(a, b);             /* and the next epoch */

    /* other weights: refused inside the epoch, the plan unchanged */
    static const uint32_t other[NSRC] = {400000, 400000, 200000};
    lf_plan_params q;
    mix_params(&q, other);
    q.sampler = p->sampler;
    q.batch_per_rank = p->batch_per_rank;
    lf_plan *c = make_plan(&q), *fresh = make_plan(&q);
    lf_plan_free(a);
    a = make_plan(p);
    for (int i = 0; i < 9; i++) ASSERT_EQ(lf_plan_next_step(a, &st), 1);
    size = lf_plan_state_save(a, blob, sizeof blob);
    ASSERT_EQ(lf_plan_state_restore(c, blob, (size_t)size), LF_PLAN_E_WEIGHTS);
    printf("mid-epoch onto other weights: %s\n", lf_plan_strerror(LF_PLAN_E_WEIGHTS));
    same_rest(c, fresh);

    /* between epochs: the next epoch is the one the new weights draw */
    while (lf_plan_next_step(a, &st) == 1) {
    }
    size = lf_plan_state_save(a, blob, sizeof blob);
    lf_plan_free(c);
    lf_plan_free(fresh);
    c = make_plan(&q);
    q.epoch = p->epoch + 1;
    fresh = make_plan(&q);
    ASSERT_EQ(lf_plan_state_restore(c, blob, (size_t)size), 0);
    same_rest(c, fresh);
    lf_plan_free(a);
    lf_plan_free(b);
    lf_plan_free(c);
    lf_plan_free(fresh);
}

static void check_refusals(const lf_plan_params *good)
{
    lf_plan_params p = *good;
    lf_plan *plan = NULL;
    p.mix.weight[1] = 0;
    ASSERT_EQ(lf_plan_create(&p, samples, NSAMPLES, &plan), LF_PLAN_E_ARG);
    p = *good;
    p.mix.first[2] = p.mix.first[1];
    ASSERT_EQ(lf_plan_create(&p, samples, NSAMPLES, &plan), LF_PLAN_E_ARG);
    p = *good;
    p.mix.first[1] += 3;         /* source 1's first block now holds two sources */
    ASSERT_EQ(lf_plan_create(&p, samples, NSAMPLES, &plan), LF_PLAN_E_ARG);
    p = *good;
    p.mix.sources = LF_PLAN_MAX_SOURCES + 1;
    ASSERT_EQ(lf_plan_create(&p, samples, NSAMPLES, &plan), LF_PLAN_E_ARG);
    ASSERT_TRUE(plan == NULL);
}

int main(void)
{
    make_samples();
    lf_plan_params p;
    mix_params(&p, weights);
    static uint8_t seen[2][NSAMPLES];
    lf_plan *plan = make_plan(&p);
    epoch_sum e[2];
    for (int ep = 0; ep < 2; ep++) {
        play_epoch(plan, &p.mix, seen[ep], &e[ep]);
        check_shares(&e[ep], ep);
    }
    /* source 0 (short samples, 0.5) runs out first, every sample of it
     * placed each epoch; source 1 draws another subset each epoch */
    uint32_t differ = 0;
    for (uint32_t i = counts[0]; i < counts[0] + counts[1]; i++) differ += seen[0][i] != seen[1][i];
    printf("source 1: %" PRIu64 " of %u samples an epoch, %u differ between epochs\n",
           e[0].placed[1], counts[1], differ);
    ASSERT_EQ(e[0].placed[0], counts[0]);
    ASSERT_LT(e[0].placed[1], counts[1]);
    ASSERT_GT(differ, 100);
    lf_plan_free(plan);

    /* balance: as even as the same samples planned without a mixture */
    lf_plan_params one = p;
    memset(&one.mix, 0, sizeof one.mix);
    lf_plan *single = make_plan(&one);
    epoch_sum es;
    play_epoch(single, &one.mix, seen[0], &es);
    lf_plan_free(single);
    double mix_mm = e[0].max_over_mean / (double)e[0].steps,
           one_mm = es.max_over_mean / (double)es.steps;
    printf("mean max/mean rank cost: mixture %.5f over %" PRIu64 " steps, one source %.5f "
           "over %" PRIu64 "\n", mix_mm, e[0].steps, one_mm, es.steps);
    ASSERT_DBL_LE(mix_mm, one_mm + 0.002);

    check_resume(&p);
    for (uint32_t s = LF_PLAN_NAIVE; s <= LF_PLAN_SORTED; s++) {   /* the baselines' */
        lf_plan_params b = p;
        b.sampler = s;
        b.batch_per_rank = 16;
        check_resume(&b);
    }
    check_refusals(&p);
    printf("ok\n");
    return 0;
}
