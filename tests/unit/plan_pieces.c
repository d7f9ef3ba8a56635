/*
 * plan_pieces.c — a plan of samples cut into pieces keeps no array of the
 * pieces (issue #35: a bit a piece) and plans as the plan of those pieces
 * given whole. The test cuts the samples itself (piece j of a sample: its
 * id plus j above LF_PLAN_PIECE_SHIFT, piece_len tokens but the last) and
 * the two plans must save the same state but its sequence hash (a cut
 * plan's is of its samples and the cut) and give, step by step over two
 * epochs, the same ids, ranks and costs: in balanced pad and pack, select
 * WORLD, naive and sorted (cut at split_at, without caps), a balanced
 * mixture; the samples given by (block, id), reversed (grouped by a sorted
 * copy) and as a view. A state saved mid-epoch restores to the same steps.
 * A cut made once (lf_plan_cut_make) is taken by each plan of its
 * length, which then plans the same; another length's is not taken.
 * The view's digest (an index summary's) is the cut plan's samples' part
 * of the hash: the state is the array's, and a wrong digest moves it. A
 * naive or sorted mixture of cut samples places each piece at most once an
 * epoch (its sources' pieces shuffled as they lie).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"
#include "test.h"

#define NSAMPLES 3000u
#define PIECE 2048u
#define WORLD 4u
#define STEPS_CHECKED 3u

static lf_plan_sample given[NSAMPLES], reversed[NSAMPLES];
static uint32_t lengths[NSAMPLES], block_start[NSAMPLES + 1];
static uint32_t nblocks;
static uint8_t blob_a[1 << 20], blob_b[1 << 20];

/* Lengths 32..2047, one in eight up to 20 pieces long; blocks of 16 (the
 * last blocks short), ids the indices (a view's). */
static void make_samples(void)
{
    uint64_t st = 9;
    for (uint32_t i = 0; i < NSAMPLES; i++) {
        uint64_t len = test_rng(&st) % 8 ? 32 + test_rng(&st) % 2016 : 1 + test_rng(&st) % 40000;
        given[i] = (lf_plan_sample){i, len, i < NSAMPLES - 40 ? i / 16 : i / 5};
        lengths[i] = (uint32_t)len;
        reversed[NSAMPLES - 1 - i] = given[i];
    }
    nblocks = 0;
    for (uint32_t i = 0; i < NSAMPLES; i++)
        if (i == 0 || given[i].block != given[i - 1].block) block_start[nblocks++] = i;
    block_start[nblocks] = NSAMPLES;
}

/* The samples cut at piece, in their order: the plan's pieces, by hand. */
static lf_plan_sample *cut(const lf_plan_sample *s, size_t n, uint64_t piece, size_t *m)
{
    lf_plan_sample *out = malloc(n * 24 * sizeof *out);
    ASSERT_TRUE(out != NULL);
    *m = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = s[i].length > piece ? (s[i].length + piece - 1) / piece : 1;
        for (uint64_t j = 0; j < k; j++)
            out[(*m)++] = (lf_plan_sample){s[i].id | j << LF_PLAN_PIECE_SHIFT,
                                           j + 1 < k ? piece : s[i].length - (k - 1) * piece,
                                           s[i].block};
    }
    return out;
}

static lf_plan *create(const lf_plan_params *p, const lf_plan_sample *s, size_t n)
{
    lf_plan *plan = NULL;
    int rc = lf_plan_create(p, s, n, &plan);
    if (rc) TEST_FAIL_("lf_plan_create: %s", lf_plan_strerror(rc));
    return plan;
}

/* The same step: ids, delays, ranks and their costs. */
static void same_step(const lf_plan_step *x, const lf_plan_step *y)
{
    ASSERT_EQ(x->nsamples, y->nsamples);
    ASSERT_EQ(x->noutliers, y->noutliers);
    ASSERT_EQ(x->flags, y->flags);
    for (uint32_t i = 0; i < x->nsamples; i++) {
        ASSERT_EQ(x->ids[i], y->ids[i]);
        ASSERT_EQ(x->rank_ids[i], y->rank_ids[i]);
        ASSERT_EQ(x->delay[i], y->delay[i]);
    }
    for (uint32_t r = 0; r < x->world; r++) {
        ASSERT_EQ(x->rank_start[r], y->rank_start[r]);
        ASSERT_EQ(x->rank_cost[r], y->rank_cost[r]);
    }
}

/* Both plans' states, byte for byte, but the sequence hash (bytes 8..15)
 * unless `hash`. */
static void same_state(const lf_plan *x, const lf_plan *y, int hash)
{
    long a = lf_plan_state_save(x, blob_a, sizeof blob_a);
    long b = lf_plan_state_save(y, blob_b, sizeof blob_b);
    ASSERT_GT(a, 0);
    ASSERT_EQ(a, b);
    if (!hash) memcpy(blob_b + 8, blob_a + 8, 8);
    ASSERT_MEM_EQ(blob_a, blob_b, (size_t)a);
}

/* Two epochs of x and y step by step, their states compared now and then;
 * a copy of x restored from its state at step 5 of epoch 0 goes on the
 * same. Returns the steps. */
static uint64_t same_plans(lf_plan *x, lf_plan *y, const lf_plan_params *p,
                           const lf_plan_sample *s, size_t n)
{
    lf_plan_step sx, sy;
    uint64_t steps = 0;
    lf_plan *again = NULL;
    same_state(x, y, 0);
    for (int epoch = 0; epoch < 2; epoch++) {
        int rx;
        while ((rx = lf_plan_next_step(x, &sx)) == 1) {
            ASSERT_EQ(lf_plan_next_step(y, &sy), 1);
            same_step(&sx, &sy);
            if (again) {
                lf_plan_step sa;
                ASSERT_EQ(lf_plan_next_step(again, &sa), 1);
                same_step(&sx, &sa);
            }
            if (++steps % 7 == 0) same_state(x, y, 0);
            if (epoch == 0 && sx.step == 5) {
                long size = lf_plan_state_save(x, blob_a, sizeof blob_a);
                ASSERT_GT(size, 0);
                again = create(p, s, n);
                ASSERT_EQ(lf_plan_state_restore(again, blob_a, (size_t)size), 0);
            }
        }
        ASSERT_EQ(rx, 0);
        ASSERT_EQ(lf_plan_next_step(y, &sy), 0);
        if (again) ASSERT_EQ(lf_plan_next_step(again, &sy), 0);
    }
    ASSERT_TRUE(again != NULL);
    lf_plan_free(again);
    return steps;
}

/* The plan of s cut by the planner against the plan of s cut here. */
static void check(const lf_plan_params *p, const lf_plan_sample *s)
{
    size_t m;
    lf_plan_sample *pieces = cut(s, NSAMPLES, lf_plan_piece_len(p), &m);
    ASSERT_GT(m, NSAMPLES + NSAMPLES / 8);
    lf_plan *x = create(p, s, NSAMPLES), *y = create(p, pieces, m);
    ASSERT_EQ(x->n, m);
    ASSERT_GT(same_plans(x, y, p, s, NSAMPLES), STEPS_CHECKED);
    lf_plan_free(x);
    lf_plan_free(y);
    free(pieces);
}

/* The same for the samples as a view: the plan keeps nothing a piece but
 * a bit and a count a 64 (no lengths, ids or members). With the view's
 * digest, the state is the array's, hash and all; a wrong digest moves
 * the hash (the plan took it rather than reading the samples). */
static void check_view(const lf_plan_params *p)
{
    lf_plan_params v = *p;
    v.view = (lf_plan_view){.lengths = lengths, .block_start = block_start, .blocks = nblocks};
    size_t m;
    lf_plan_sample *pieces = cut(given, NSAMPLES, lf_plan_piece_len(p), &m);
    lf_plan *x = create(&v, NULL, NSAMPLES), *y = create(p, pieces, m);
    ASSERT_TRUE(!x->len16 && !x->len32_own && !x->id && !x->group_members);
    ASSERT_EQ(x->pc.words, (m + 1 + 63) / 64);
    same_plans(x, y, &v, NULL, NSAMPLES);
    lf_plan_free(x);
    /* a cut made once (lf_plan_cut) is taken, not made again, where it is
     * of this length; another length's is not */
    lf_plan_cut *c = NULL;
    ASSERT_EQ(lf_plan_cut_make(&v, NSAMPLES, &c), 0);
    ASSERT_TRUE(c != NULL);
    v.view.cut = c;
    x = create(&v, NULL, NSAMPLES);
    lf_plan *y2 = create(p, pieces, m);
    ASSERT_EQ(x->pc_shared, 1);
    same_plans(x, y2, &v, NULL, NSAMPLES);
    lf_plan_free(x);
    lf_plan_free(y2);
    lf_plan_params other = v;
    if (other.split_at) other.split_at++;
    else if (other.layout == LF_PLAN_PACK) other.seq_len++;
    else other.micro_max_padded++;
    x = create(&other, NULL, NSAMPLES);
    ASSERT_EQ(x->pc_shared, 0);
    lf_plan_free(x);
    v.view.cut = NULL;
    lf_plan_cut_free(c);
    lf_plan_free(y);
    free(pieces);
    v.view.digest = lf_plan_view_digest(&v.view, NSAMPLES);
    v.view.digest_n = NSAMPLES;
    lf_plan *array = create(p, given, NSAMPLES);
    x = create(&v, NULL, NSAMPLES);
    same_state(x, array, 1);
    lf_plan_free(x);
    v.view.digest++;
    x = create(&v, NULL, NSAMPLES);
    ASSERT_EQ(lf_plan_state_save(x, blob_a, sizeof blob_a),
              lf_plan_state_save(array, blob_b, sizeof blob_b));
    ASSERT_TRUE(memcmp(blob_a + 8, blob_b + 8, 8) != 0);
    lf_plan_free(x);
    lf_plan_free(array);
}

static lf_plan_params params(uint32_t sampler, uint32_t layout)
{
    lf_plan_params p;
    lf_plan_params_default(&p);
    p.sampler = sampler;
    p.world = WORLD;
    p.seed = 5;
    p.layout = layout;
    p.locality_blocks = 4;
    if (sampler != LF_PLAN_BALANCED) {
        p.batch_per_rank = 6;
        p.split_at = PIECE;
    } else if (layout == LF_PLAN_PACK) {
        p.seq_len = PIECE;
        ASSERT_EQ(lf_plan_pack_budget(&p, given, NSAMPLES, 2, &p.step_budget), 0);
    } else {
        p.micro_max_padded = PIECE;
        p.step_budget = lf_plan_cost(&p.cost, 1000) * 6 * WORLD;
    }
    return p;
}

static void test_one_source(void)
{
    static const uint32_t sampler[] = {LF_PLAN_BALANCED, LF_PLAN_BALANCED, LF_PLAN_BALANCED,
                                       LF_PLAN_NAIVE, LF_PLAN_SORTED};
    static const uint32_t layout[] = {LF_PLAN_PAD, LF_PLAN_PACK, LF_PLAN_PAD, LF_PLAN_PAD,
                                      LF_PLAN_PAD};
    for (size_t c = 0; c < sizeof sampler / sizeof sampler[0]; c++) {
        lf_plan_params p = params(sampler[c], layout[c]);
        if (c == 2) p.select = LF_PLAN_SELECT_WORLD;
        check(&p, given);
        check(&p, reversed);
        check_view(&p);
    }
}

static void two_sources(lf_plan_params *p)
{
    p->mix.sources = 2;
    p->mix.first[1] = 1600;   /* a block's first sample */
    p->mix.weight[0] = 3;
    p->mix.weight[1] = 1;
}

static void test_balanced_mixture(void)
{
    lf_plan_params p = params(LF_PLAN_BALANCED, LF_PLAN_PAD);
    two_sources(&p);
    check(&p, given);
    check_view(&p);
}

/* A naive or sorted mixture of cut samples: each piece at most once an
 * epoch, and the plan's state is its own (the pieces given whole, drawn
 * by (block, id), are another plan). */
static void test_baseline_mixture(void)
{
    for (uint32_t sampler = LF_PLAN_NAIVE; sampler <= LF_PLAN_SORTED; sampler++) {
        lf_plan_params p = params(sampler, LF_PLAN_PAD);
        two_sources(&p);
        size_t m;
        lf_plan_sample *pieces = cut(given, NSAMPLES, PIECE, &m);
        lf_plan *x = create(&p, given, NSAMPLES), *y = create(&p, pieces, m);
        uint8_t *seen = calloc(m, 1);
        ASSERT_TRUE(seen != NULL);
        lf_plan_step st;
        uint64_t placed = 0;
        while (lf_plan_next_step(x, &st) == 1)
            for (uint32_t i = 0; i < st.nsamples; i++, placed++) {
                size_t k = 0;   /* the piece's place among the pieces */
                while (pieces[k].id != st.ids[i]) k++;
                ASSERT_EQ(seen[k], 0);
                seen[k] = 1;
            }
        ASSERT_GT(placed, NSAMPLES);   /* the epoch ends where a source runs out */
        ASSERT_LE(placed, m);
        long size = lf_plan_state_save(y, blob_a, sizeof blob_a);
        ASSERT_GT(size, 0);
        ASSERT_EQ(lf_plan_state_restore(x, blob_a, (size_t)size), LF_PLAN_E_STATE);
        free(seen);
        lf_plan_free(x);
        lf_plan_free(y);
        free(pieces);
    }
}

int main(void)
{
    make_samples();
    test_one_source();
    test_balanced_mixture();
    test_baseline_mixture();
    printf("cut samples plan as their pieces given whole: balanced pad, pack, select "
           "WORLD, naive, sorted, a mixture; arrays by block, reversed, a view\n");
    return 0;
}
