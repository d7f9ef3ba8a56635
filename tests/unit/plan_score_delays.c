/*
 * plan_score_delays.c — lf-plan's scoring keeps its figures per step, not
 * per sample (tools/lf-plan/score.c, issue 35): the delays it counts by
 * value give exactly the p50/p99/max the sorted list of every delay gave
 * (nearest rank, percentiles()), for no delay, one, all equal, long tails
 * and values far apart; the per-step lists grow a step at a time and keep
 * what was in them.
 */
#include "test.h"

#include "../../tools/lf-plan/score.c"

static uint64_t rng = 88172645463325252ull;

static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* n delays drawn by draw(): the counted percentiles equal the sorted list's. */
static void check_counted(size_t n, uint32_t (*draw)(void))
{
    delay_counts d = {0};
    double *all = malloc((n ? n : 1) * sizeof *all);
    ASSERT_TRUE(all != NULL);
    for (size_t i = 0; i < n; i++) {
        uint32_t v = draw();
        ASSERT_EQ(delay_add(&d, v), 0);
        all[i] = v;
    }
    plan_pcts a = delay_pcts(&d), b = percentiles(all, n);
    if (a.p50 != b.p50 || a.p99 != b.p99 || a.max != b.max)
        TEST_FAIL_("%zu delays: counted %g/%g/%g, sorted %g/%g/%g", n, a.p50, a.p99, a.max,
                   b.p50, b.p99, b.max);
    ASSERT_EQ(d.n, n);
    free(all);
    free(d.count);
}

static uint32_t zero(void) { return 0; }
static uint32_t small(void) { return next() % 7; }
static uint32_t tailed(void) { return next() % 1000 < 990 ? next() % 3 : 50 + next() % 5000; }
static uint32_t far(void) { return next() % 2 ? 1 : 100000; }

int main(void)
{
    size_t sizes[] = {0, 1, 2, 3, 99, 100, 101, 1000, 12345};
    uint32_t (*draws[])(void) = {zero, small, tailed, far};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (size_t j = 0; j < sizeof draws / sizeof *draws; j++) check_counted(sizes[i], draws[j]);
    /* the per-step lists: one entry a step, grown as the steps come */
    tally t = {0};
    for (size_t s = 0; s < 5000; s++) {
        ASSERT_EQ(tally_room(&t), 0);
        ASSERT_TRUE(t.cap > t.nsteps);
        t.stok[t.nsteps] = (double)s;
        t.scost[t.nsteps++] = (double)(2 * s);
    }
    for (size_t s = 0; s < 5000; s++) {
        ASSERT_TRUE(t.stok[s] == (double)s);
        ASSERT_TRUE(t.scost[s] == (double)(2 * s));
    }
    ASSERT_TRUE(t.cap < 2 * 5000 + 64);
    tally_free(&t);
    return 0;
}
