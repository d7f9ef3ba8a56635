/*
 * plan_select_world.c — the selection for the world (lf_plan_select WORLD,
 * `--select world`; balancer/README.md, "Selection for the world") on
 * real-shaped text: long-tailed documents cut into pieces of 2048 tokens by
 * pad's micro-batch cap, as dev-text split at 2048 is (most samples whole
 * pieces of one cost, the rest the documents' short ends), world 8, 16
 * samples a rank:
 *  - the default selection fills a global budget; some of its steps hold
 *    whole pieces no split evens out (issue #27 item 4: p99 over 1.002);
 *    composed for the world, every step and the epoch are within 1.002
 *    (max/mean p99 and sum-max/sum-mean, every step counted, the tail too)
 *    and no step holds more than 1.25x the median step's tokens;
 *  - at 4 a rank, where a step mixing whole pieces and short ends cannot
 *    be evened out, steps of whole pieces alone and steps of short ends
 *    alone (the budget moved to whole pieces a bin) meet the same targets
 *    at worlds 8 and 64 and eight seeds, with no sample past max_defer;
 *  - every piece once an epoch, no rank empty in any step;
 *  - where whole pieces cost more than a bin (one a rank, outlier_cost the
 *    budget) the epoch still ends;
 *  - the same plan twice, and a state saved inside the epoch restores onto
 *    the same world to the same steps, but not onto another world (the
 *    sequence depends on it: it is in the plan's hash);
 *  - pack at 4 a rank, rows of 1024 and of 8192 (whole pieces of a row;
 *    at 8192 pack's outliers by default): the same targets at worlds 8
 *    and 64; with lengths not cut into pieces pack's plan is the
 *    default's, step for step;
 *  - the default plan does not depend on world (unchanged).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lf_plan.h"
#include "test.h"

#define NDOCS 2595u
#define LENGTHS "tests/data/plan/dev_text_lengths.txt"
#define WORLD 8u
#define PIECE 2048u
#define MAXSTEPS 16384u
#define MAX_DEFER 4u   /* max_defer's default (plan.c, resolve) */

static lf_plan_sample docs[NDOCS];
static uint64_t seed;                     /* the plans' seed */

static uint64_t first_piece[NDOCS + 1];   /* a flat index of every piece */

/* Indexes the pieces of a cut at piece tokens. */
static void cut_at(uint64_t piece)
{
    for (uint32_t i = 0; i < NDOCS; i++)
        first_piece[i + 1] = first_piece[i] + (docs[i].length + piece - 1) / piece;
}

/* The documents' lengths in tokens, one a line (dev-text.jsonl's, 9 to
 * 627,303 tokens), each document a block of its own (its pieces come out
 * together, as a document's pieces stored together do). */
static void make_docs(void)
{
    FILE *f = fopen(LENGTHS, "r");
    ASSERT_TRUE(f != NULL);
    for (uint32_t i = 0; i < NDOCS; i++) {
        unsigned long long len;
        ASSERT_EQ(fscanf(f, "%llu", &len), 1);
        docs[i] = (lf_plan_sample){i, len, i};
    }
    fclose(f);
    cut_at(PIECE);
}

/* The defaults with world, select and the seed set. */
static lf_plan_params base(uint32_t select, uint32_t world)
{
    lf_plan_params p;
    lf_plan_params_default(&p);
    p.world = world;
    p.select = select;
    p.seed = seed;
    return p;
}

/* The pieces a plan under p cuts docs into. */
static size_t count_pieces(const lf_plan_params *p)
{
    lf_plan_lengths w = lf_plan_lengths_of(p, docs, NDOCS, lf_plan_piece_len(p));
    uint64_t len, k, m = 0;
    while (lf_plan_lengths_next(&w, &len, &k)) m += k;
    return (size_t)m;
}

/* pad, cut at PIECE, 16 pieces a rank's worth of budget (as lf-plan's
 * default: samples-per-rank x world x the mean piece's cost) */
static lf_plan_params params(uint32_t select, uint32_t world, uint32_t per_rank)
{
    lf_plan_params p = base(select, world);
    p.micro_max_padded = PIECE;
    size_t m = count_pieces(&p);
    ASSERT_TRUE(m > NDOCS);
    uint64_t sum = 0, len, k;
    lf_plan_lengths w = lf_plan_lengths_of(&p, docs, NDOCS, lf_plan_piece_len(&p));
    while (lf_plan_lengths_next(&w, &len, &k)) sum += lf_plan_cost(&p.cost, len) * k;
    p.step_budget = sum / m * per_rank * world;
    return p;
}

/* pack, rows of row tokens, rows_a_rank whole rows a rank's budget
 * (lf_plan_pack_budget, as lf-plan's default) */
static lf_plan_params pack_params(const lf_plan_sample *smp, uint32_t world, uint32_t row,
                                  uint32_t rows_a_rank, uint32_t select)
{
    lf_plan_params p = base(select, world);
    p.layout = LF_PLAN_PACK;
    p.seq_len = row;
    ASSERT_EQ(lf_plan_pack_budget(&p, smp, NDOCS, rows_a_rank, &p.step_budget), 0);
    return p;
}

/* Steps x and y on together, n steps (or, n 0, to the epoch's tail), each
 * the same, rank by rank; returns the steps compared. */
static int same_steps(lf_plan *x, lf_plan *y, uint32_t world, int n)
{
    lf_plan_step a, b;
    int k = 0;
    do {
        ASSERT_EQ(lf_plan_next_step(x, &a), 1);
        ASSERT_EQ(lf_plan_next_step(y, &b), 1);
        ASSERT_EQ(a.nsamples, b.nsamples);
        ASSERT_MEM_EQ(a.rank_ids, b.rank_ids, a.nsamples * sizeof *a.rank_ids);
        ASSERT_MEM_EQ(a.rank_start, b.rank_start, (world + 1) * sizeof *a.rank_start);
        k++;
    } while (n ? k < n : !(a.flags & LF_PLAN_STEP_TAIL));
    return k;
}

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* One epoch's figures, every step counted. */
typedef struct figures {
    double p99, epoch, tokens_max;   /* max/mean p99, sum-max/sum-mean, step
                                        tokens max / median */
    uint32_t steps, delay_max;       /* steps a sample came after its due one */
    uint64_t hash;                   /* of every step's ids rank by rank */
} figures;

/* Walks one epoch: every piece once and, where ranks_full, no rank empty. */
static figures walk_epoch(lf_plan *plan, uint32_t world, size_t npieces, int ranks_full)
{
    static double ratio[MAXSTEPS], tok[MAXSTEPS], sorted[MAXSTEPS];
    uint8_t *seen = calloc(npieces, 1);
    ASSERT_TRUE(seen != NULL);
    figures f = {0, 0, 0, 0, 0, 1469598103934665603ull};
    double sum_max = 0, sum_mean = 0;
    size_t placed = 0;
    lf_plan_step st;
    while (lf_plan_next_step(plan, &st) == 1) {
        ASSERT_LT(f.steps, MAXSTEPS);
        double max = 0, total = 0, tokens = 0;
        for (uint32_t r = 0; r < world; r++) {
            if (ranks_full) ASSERT_GT(st.rank_start[r + 1], st.rank_start[r]);
            double c = (double)st.rank_cost[r];
            total += c;
            tokens += (double)st.rank_tokens[r];
            if (c > max) max = c;
            for (uint32_t i = st.rank_start[r]; i < st.rank_start[r + 1]; i++)
                f.hash = (f.hash ^ st.rank_ids[i] ^ ((uint64_t)r << 56)) * 1099511628211ull;
        }
        for (uint32_t i = 0; i < st.nsamples; i++) {
            uint64_t doc = lf_plan_piece_sample(st.ids[i]), k = lf_plan_piece_index(st.ids[i]);
            ASSERT_LT(doc, NDOCS);
            ASSERT_LT(first_piece[doc] + k, first_piece[doc + 1]);
            ASSERT_EQ(seen[first_piece[doc] + k]++, 0);   /* once */
            placed++;
            if (st.delay[i] > f.delay_max) f.delay_max = st.delay[i];
        }
        ratio[f.steps] = max / (total / world);
        tok[f.steps++] = tokens;
        sum_max += max;
        sum_mean += total / world;
        if (st.flags & LF_PLAN_STEP_TAIL) break;
    }
    ASSERT_EQ(placed, npieces);   /* every piece */
    free(seen);
    memcpy(sorted, ratio, f.steps * sizeof *sorted);
    qsort(sorted, f.steps, sizeof *sorted, cmp_dbl);
    f.p99 = sorted[(size_t)ceil(0.99 * f.steps) - 1];
    f.epoch = sum_max / sum_mean;
    memcpy(sorted, tok, f.steps * sizeof *sorted);
    qsort(sorted, f.steps, sizeof *sorted, cmp_dbl);
    f.tokens_max = sorted[f.steps - 1] / sorted[(f.steps - 1) / 2];
    return f;
}

static figures plan_epoch(uint32_t select, uint32_t world, uint32_t per_rank, size_t *npieces)
{
    lf_plan_params p = params(select, world, per_rank);
    *npieces = count_pieces(&p);
    lf_plan *plan;
    ASSERT_EQ(lf_plan_create(&p, docs, NDOCS, &plan), 0);
    figures f = walk_epoch(plan, world, *npieces, 1);
    lf_plan_free(plan);
    return f;
}

/* A state saved after `at` steps restores onto the same world to the same
 * steps (`then` of them), and is refused at another world (outlier cost
 * and group set, so that the default selection's state would restore
 * there). */
static void resume(uint32_t per_rank, int at, int then)
{
    lf_plan_params p = params(LF_PLAN_SELECT_WORLD, WORLD, per_rank);
    p.outlier_cost = p.step_budget / WORLD;
    p.outlier_group = WORLD;
    lf_plan *from, *again, *other;
    lf_plan_step a;
    ASSERT_EQ(lf_plan_create(&p, docs, NDOCS, &from), 0);
    for (int i = 0; i < at; i++) ASSERT_EQ(lf_plan_next_step(from, &a), 1);
    static unsigned char blob[1 << 20];
    long size = lf_plan_state_save(from, blob, sizeof blob);
    ASSERT_GT(size, 0);
    ASSERT_EQ(lf_plan_create(&p, docs, NDOCS, &again), 0);
    ASSERT_EQ(lf_plan_state_restore(again, blob, (size_t)size), 0);
    same_steps(from, again, WORLD, then);
    lf_plan_params q = p;
    q.world = WORLD / 2;
    ASSERT_EQ(lf_plan_create(&q, docs, NDOCS, &other), 0);
    ASSERT_EQ(lf_plan_state_restore(other, blob, (size_t)size), LF_PLAN_E_STATE);
    q.select = LF_PLAN_SELECT_STEP;
    lf_plan_free(other);
    ASSERT_EQ(lf_plan_create(&q, docs, NDOCS, &other), 0);   /* nor onto the default */
    ASSERT_EQ(lf_plan_state_restore(other, blob, (size_t)size), LF_PLAN_E_STATE);
    lf_plan_free(from);
    lf_plan_free(again);
    lf_plan_free(other);
}

/* One piece a rank and outlier_cost the whole budget: whole pieces are no
 * outliers but cost more than a bin. A step whose bins take nothing is
 * selected as by default (else the window would fill with them and the
 * steps go empty for good): the epoch ends, every piece once. (Its steps
 * may hold fewer samples than ranks, by default too.) */
static void costlier_than_a_bin(void)
{
    lf_plan_params p = params(LF_PLAN_SELECT_WORLD, WORLD, 1);
    p.outlier_cost = p.step_budget;
    lf_plan *plan;
    ASSERT_EQ(lf_plan_create(&p, docs, NDOCS, &plan), 0);
    ASSERT_EQ(lf_plan_cost(&p.cost, PIECE) > p.step_budget / WORLD, 1);
    walk_epoch(plan, WORLD, first_piece[NDOCS], 0);
    lf_plan_free(plan);
}

/* 4 a rank: a bin is 3.43 whole pieces, and a step that mixes whole pieces
 * with the short ends (about one a bin) cannot be evened out: the bins'
 * short ends would have to match within 14 tokens (the default's p99
 * 1.168, the first selection for the world 1.169). Steps of whole pieces
 * alone (three a bin) and of short ends alone meet issue #27 item 4's
 * targets at worlds 8 and 64 and for every seed tried, the tail too, with
 * no sample past max_defer (the oldest goes in every step). */
static void four_a_rank(void)
{
    static const uint32_t worlds[] = {8, 64};
    for (uint64_t s = 0; s < 8; s++) {
        seed = s;
        for (size_t w = 0; w < 2; w++) {
            size_t n;
            figures f = plan_epoch(LF_PLAN_SELECT_WORLD, worlds[w], 4, &n);
            if (s == 0)
                printf("world %u, 4 a rank: %u steps, p99 %.5f, epoch %.5f, tokens max %.3f, "
                       "delay max %u\n",
                       worlds[w], f.steps, f.p99, f.epoch, f.tokens_max, f.delay_max);
            ASSERT_DBL_LE(f.p99, 1.002);
            ASSERT_DBL_LE(f.epoch, 1.002);
            ASSERT_DBL_LE(f.tokens_max, 1.25);
            ASSERT_LE(f.delay_max, MAX_DEFER);
        }
    }
    seed = 0;
}

/* pack at 4 a rank, worlds 8 and 64, four seeds: rows of 1024 (documents
 * cut into pieces of a row), 4 rows a rank's budget (lf_plan_pack_budget,
 * as lf-plan's default at 4 a rank), and rows of 8192 at 2 rows a rank,
 * where a whole row's piece is one of pack's outliers by default (its
 * excess: *Pack: full rows*; held 8 x world at a time, they made steps of
 * 1.63 to 8.6x the median's tokens): with steps of whole pieces the same
 * targets as pad. */
static void pack_four_a_rank(void)
{
    static const uint32_t worlds[] = {8, 64}, rows[] = {1024, 8192}, per[] = {4, 2};
    for (size_t c = 0; c < 2; c++) {
        cut_at(rows[c]);
        for (uint64_t s = 0; s < 4; s++) {
            for (size_t w = 0; w < 2; w++) {
                seed = s;
                lf_plan_params p =
                    pack_params(docs, worlds[w], rows[c], per[c], LF_PLAN_SELECT_WORLD);
                lf_plan *plan;
                ASSERT_EQ(lf_plan_create(&p, docs, NDOCS, &plan), 0);
                uint64_t piece_len;
                uint32_t per_rank;
                ASSERT_GT(lf_plan_world_level(plan, &piece_len, &per_rank), 0);
                ASSERT_EQ(piece_len, rows[c]);
                figures f = walk_epoch(plan, worlds[w], first_piece[NDOCS], 1);
                if (s == 0)
                    printf("pack, rows of %u, world %u, %u rows a rank: %u pieces of a row a "
                           "rank, %u steps, p99 %.5f, epoch %.5f, tokens max %.3f, delay max "
                           "%u\n", rows[c], worlds[w], per[c], per_rank, f.steps, f.p99,
                           f.epoch, f.tokens_max, f.delay_max);
                ASSERT_DBL_LE(f.p99, 1.002);
                ASSERT_DBL_LE(f.epoch, 1.002);
                ASSERT_DBL_LE(f.tokens_max, 1.25);
                ASSERT_LE(f.delay_max, MAX_DEFER);
                lf_plan_free(plan);
            }
        }
    }
    seed = 0;
    cut_at(PIECE);
}

/* pack, rows of 8192 at 2 rows a rank, world 8: a state saved at step 100
 * (of 126: the order used up, pack's outliers raised to a rank's share)
 * restores to the same steps to the epoch's end. */
static void pack_resume(void)
{
    lf_plan_params p = pack_params(docs, WORLD, 8192, 2, LF_PLAN_SELECT_WORLD);
    lf_plan *from, *again;
    lf_plan_step a;
    ASSERT_EQ(lf_plan_create(&p, docs, NDOCS, &from), 0);
    for (int i = 0; i < 100; i++) ASSERT_EQ(lf_plan_next_step(from, &a), 1);
    static unsigned char blob[1 << 20];
    long size = lf_plan_state_save(from, blob, sizeof blob);
    ASSERT_GT(size, 0);
    ASSERT_EQ(lf_plan_create(&p, docs, NDOCS, &again), 0);
    ASSERT_EQ(lf_plan_state_restore(again, blob, (size_t)size), 0);
    ASSERT_EQ(same_steps(from, again, WORLD, 0), 26);   /* to the epoch's end */
    lf_plan_free(from);
    lf_plan_free(again);
}

/* pack with lengths that are not mostly whole pieces (each document's
 * length folded below 2000 tokens, rows of 2048): no steps of whole pieces,
 * and WORLD plans as the default, step for step. */
static void pack_without_pieces(void)
{
    static lf_plan_sample folded[NDOCS];
    for (uint32_t i = 0; i < NDOCS; i++)
        folded[i] = (lf_plan_sample){i, docs[i].length % 1999 + 1, i};
    uint64_t hash[2];
    for (uint32_t sel = 0; sel < 2; sel++) {
        lf_plan_params p = pack_params(folded, WORLD, 2048, 2, sel);
        lf_plan *plan;
        ASSERT_EQ(lf_plan_create(&p, folded, NDOCS, &plan), 0);
        ASSERT_EQ(lf_plan_world_level(plan, NULL, NULL), 0);
        lf_plan_step st;
        hash[sel] = 1469598103934665603ull;
        while (lf_plan_next_step(plan, &st) == 1) {
            for (uint32_t i = 0; i < st.nsamples; i++)
                hash[sel] = (hash[sel] ^ st.rank_ids[i]) * 1099511628211ull;
            if (st.flags & LF_PLAN_STEP_TAIL) break;
        }
        lf_plan_free(plan);
    }
    ASSERT_EQ(hash[0], hash[1]);
}

int main(void)
{
    make_docs();
    size_t n;
    figures old = plan_epoch(LF_PLAN_SELECT_STEP, WORLD, 16, &n);
    figures now = plan_epoch(LF_PLAN_SELECT_WORLD, WORLD, 16, &n);
    printf("%zu pieces, world %u, 16 a rank: step: %u steps, p99 %.5f, epoch %.5f, tokens max "
           "%.3f; world: %u steps, p99 %.5f, epoch %.5f, tokens max %.3f\n",
           n, WORLD, old.steps, old.p99, old.epoch, old.tokens_max, now.steps, now.p99,
           now.epoch, now.tokens_max);
    ASSERT_DBL_LT(1.002, old.p99);   /* what the default's steps allow */
    ASSERT_DBL_LE(now.p99, 1.002);
    ASSERT_DBL_LE(now.epoch, 1.002);
    ASSERT_DBL_LE(now.tokens_max, 1.25);
    ASSERT_EQ(plan_epoch(LF_PLAN_SELECT_WORLD, WORLD, 16, &n).hash, now.hash);
    ASSERT_EQ(n, first_piece[NDOCS]);
    four_a_rank();
    resume(16, 20, 10);
    resume(4, 250, 94);   /* its last 94 steps: the order used up, the epoch's end */
    costlier_than_a_bin();
    pack_four_a_rank();
    pack_resume();
    pack_without_pieces();
    return 0;
}
