/*
 * plan_input_order.c — a plan does not depend on the order of the samples
 * array: samples given by (block, id), as a dataset's index gives them
 * (grouped without a sort, issue #35), and the same samples reversed or
 * interleaved (grouped by a sorted copy) plan the same global sequence,
 * step by step, id by id; so do ids 0..n-1, which the plan keeps none of
 * when they come in order (issue #35, README.md *Memory*). Ids repeated in
 * an ascending array are refused as they are in any other order, and so is
 * a length of 2^32 (the plan keeps 32 bits of one).
 */
#include "lf_plan.h"
#include "test.h"

#define NSAMPLES 6000u

static lf_plan_sample in_order[NSAMPLES], other[NSAMPLES];

/* Lengths 32..4127, 16 samples a block but the last blocks short, ids
 * ascending with gaps. */
static void make_samples(void)
{
    uint64_t st = 35;
    for (uint32_t i = 0; i < NSAMPLES; i++)
        in_order[i] = (lf_plan_sample){3 * (uint64_t)i + 1, 32 + test_rng(&st) % 4096,
                                       i < NSAMPLES - 40 ? i / 16 : i / 5};
}

static lf_plan *make_plan(const lf_plan_sample *s, uint32_t world)
{
    lf_plan_params p;
    lf_plan_params_default(&p);
    p.world = world;
    p.seed = 11;
    p.step_budget = lf_plan_cost(&p.cost, 1000) * 8 * world;
    p.locality_blocks = 4;
    lf_plan *plan = NULL;
    int rc = lf_plan_create(&p, s, NSAMPLES, &plan);
    if (rc) TEST_FAIL_("lf_plan_create: %s", lf_plan_strerror(rc));
    return plan;
}

/* The two plans' epochs, compared step by step; returns the steps. */
static uint64_t same_steps(const lf_plan_sample *b, uint32_t world)
{
    lf_plan *x = make_plan(in_order, world), *y = make_plan(b, world);
    lf_plan_step sx, sy;
    uint64_t steps = 0;
    int rx, ry;
    while ((rx = lf_plan_next_step(x, &sx)) == 1) {
        ry = lf_plan_next_step(y, &sy);
        ASSERT_EQ(ry, 1);
        ASSERT_EQ(sx.nsamples, sy.nsamples);
        for (uint32_t i = 0; i < sx.nsamples; i++) ASSERT_EQ(sx.ids[i], sy.ids[i]);
        for (uint32_t i = 0; i < sx.nsamples; i++) ASSERT_EQ(sx.rank_ids[i], sy.rank_ids[i]);
        steps++;
    }
    ASSERT_EQ(rx, 0);
    ASSERT_EQ(lf_plan_next_step(y, &sy), 0);
    lf_plan_free(x);
    lf_plan_free(y);
    return steps;
}

int main(void)
{
    make_samples();
    for (uint32_t i = 0; i < NSAMPLES; i++) other[i] = in_order[NSAMPLES - 1 - i];
    uint64_t steps = same_steps(other, 8);
    for (uint32_t i = 0; i < NSAMPLES; i++) /* evens, then odds */
        other[i] = in_order[i < NSAMPLES / 2 ? 2 * i : 2 * (i - NSAMPLES / 2) + 1];
    steps += same_steps(other, 64);
    printf("reversed and interleaved arrays plan as the ordered one: %" PRIu64 " steps\n", steps);
    for (uint32_t i = 0; i < NSAMPLES; i++) in_order[i].id = i;   /* dense: no ids kept */
    for (uint32_t i = 0; i < NSAMPLES; i++) other[i] = in_order[NSAMPLES - 1 - i];
    steps = same_steps(other, 8);
    printf("ids 0..n-1: the reversed array plans as the ordered one: %" PRIu64 " steps\n", steps);

    in_order[100].id = in_order[99].id; /* ascending, not strictly */
    lf_plan *plan = NULL;
    lf_plan_params p;
    lf_plan_params_default(&p);
    p.step_budget = lf_plan_cost(&p.cost, 1000) * 8;
    ASSERT_EQ(lf_plan_create(&p, in_order, NSAMPLES, &plan), LF_PLAN_E_ARG);
    ASSERT_EQ(plan == NULL, 1);
    printf("a repeated id in an ascending array: refused\n");

    in_order[100].id = 100;
    in_order[7].length = UINT64_C(1) << 32;
    ASSERT_EQ(lf_plan_create(&p, in_order, NSAMPLES, &plan), LF_PLAN_E_ARG);
    in_order[7].length = UINT32_MAX;   /* the longest kept: an outlier, placed */
    ASSERT_EQ(lf_plan_create(&p, in_order, NSAMPLES, &plan), 0);
    lf_plan_free(plan);
    printf("a length of 2^32: refused; 2^32 - 1: planned\n");
    return 0;
}
