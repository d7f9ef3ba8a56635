/*
 * plan_state.c — a state blob is input from outside (a client's file, a
 * peer), so restoring damaged blobs must fail cleanly or yield a plan that
 * still keeps its promises. Thousands of mutated blobs (bit flips, byte
 * overwrites, truncations, extensions, forged counts) are restored; each
 * must return 0, LF_PLAN_E_STATE or (a damaged version field)
 * LF_PLAN_E_VERSION, and after a 0 the rest of the epoch must place
 * distinct samples, as many as the plan says are pending. A blob in
 * version 1's layout (a 64-bit cost sum after the counts) and version 2
 * (whose epochs ended in another tail) are refused as another version. Run
 * under the sanitizers this is also a memory-safety check.
 */
#include "lf_plan.h"
#include "test.h"

#define NSAMPLES 3000u

static uint64_t rng_state = 5;

static uint64_t rng(void)
{
    return test_rng(&rng_state);
}

static lf_plan_sample samples[NSAMPLES];

static lf_plan *make_plan(const lf_plan_params *p)
{
    lf_plan *plan = NULL;
    ASSERT_EQ(lf_plan_create(p, samples, NSAMPLES, &plan), 0);
    return plan;
}

/* Plays the rest of the epoch: every sample placed once, as many as pending. */
static void check_rest(lf_plan *plan)
{
    static uint8_t seen[NSAMPLES];
    memset(seen, 0, sizeof seen);
    lf_plan_counts c;
    lf_plan_counts_get(plan, &c);
    uint64_t placed = 0;
    lf_plan_step st;
    int rc;
    while ((rc = lf_plan_next_step(plan, &st)) == 1) {
        for (uint32_t i = 0; i < st.nsamples; i++) {
            ASSERT_LT(st.ids[i], NSAMPLES);
            ASSERT_EQ(seen[st.ids[i]], 0);
            seen[st.ids[i]] = 1;
        }
        placed += st.nsamples;
    }
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(placed, c.pending);
}

int main(void)
{
    for (uint32_t i = 0; i < NSAMPLES; i++) {   /* lengths 32..8191, blocks of 8 */
        uint64_t range = rng() % 4 ? 2000 : 8160;
        samples[i] = (lf_plan_sample){i, 32 + rng() % range, i / 8};
    }
    lf_plan_params p;
    lf_plan_params_default(&p);
    p.world = 4;
    p.step_budget = 16 * 4 * lf_plan_cost(&p.cost, 900);
    p.lookahead = 256;
    p.outlier_group = 2;
    lf_plan *src = make_plan(&p), *dst = make_plan(&p);
    lf_plan_step st;
    for (int i = 0; i < 7; i++) ASSERT_EQ(lf_plan_next_step(src, &st), 1);
    long size = lf_plan_state_save(src, NULL, 0);
    ASSERT_GT(size, 48);   /* the header, and entries */
    static uint8_t good[1 << 16], blob[1 << 16];
    ASSERT_LT(size, (long)sizeof good - 64);
    ASSERT_EQ(lf_plan_state_save(src, good, sizeof good), size);

    uint32_t accepted = 0, refused = 0;
    for (int t = 0; t < 3000; t++) {
        size_t n = (size_t)size;
        memcpy(blob, good, n);
        switch (t % 5) {
        case 0: blob[rng() % n] ^= (uint8_t)(1u << (rng() % 8)); break;
        case 1: blob[rng() % n] = (uint8_t)rng(); break;
        case 2: n = rng() % n; break;                       /* truncated */
        case 3: n += 1 + rng() % 32; break;                 /* trailing bytes */
        default: {                                          /* forged counts */
            uint32_t v = (uint32_t)rng() % 512;
            memcpy(blob + (t % 2 ? 40 : 44), &v, 4);
        }
        }
        int rc = lf_plan_state_restore(dst, blob, n);
        if (rc != 0) {
            if (rc != LF_PLAN_E_VERSION) ASSERT_EQ(rc, LF_PLAN_E_STATE);
            refused++;
            continue;
        }
        accepted++;
        check_rest(dst);
    }
    /* version 1: the same fields, then the 64-bit cost sum, then entries */
    memcpy(blob, good, 48);
    memset(blob + 48, 0, 8);
    memcpy(blob + 56, good + 48, (size_t)size - 48);
    blob[4] = 1;
    ASSERT_EQ(lf_plan_state_restore(dst, blob, (size_t)size + 8), LF_PLAN_E_VERSION);
    ASSERT_TRUE(strstr(lf_plan_strerror(LF_PLAN_E_VERSION), "another version"));
    /* version 2: this layout, but its epochs ended in another tail */
    memcpy(blob, good, (size_t)size);
    blob[4] = 2;
    ASSERT_EQ(lf_plan_state_restore(dst, blob, (size_t)size), LF_PLAN_E_VERSION);
    /* the untouched blob still restores and the plan goes on */
    ASSERT_EQ(lf_plan_state_restore(dst, good, (size_t)size), 0);
    check_rest(dst);
    printf("plan_state: %u damaged blobs refused, %u accepted and sound\n", refused, accepted);
    ASSERT_GT(refused, 1500);
    lf_plan_free(dst);
    lf_plan_free(src);
    return 0;
}
