/*
 * plan.c — creating a plan and stepping through it.
 *
 * The global sequence. A step's samples are chosen without looking at the
 * world size, so every world size sees the same sequence (only the memory
 * caps can change that, see cap_deferred). Selection keeps a pending window
 * of up to `lookahead` samples, refilled from the epoch's order. Each step:
 *   1. outliers (cost > outlier_cost) are held aside; once outlier_group of
 *      them wait (or the epoch's order is used up) they are released
 *      together, first in the step, and the step's budget grows by
 *      outlier_group * (costliest of them) so the other ranks are filled to
 *      the same level instead of idling;
 *   2. each pending sample has a due step: the step a plan taking the order
 *      strictly in sequence, one budget after another, would place it in
 *      (its cost-weighted position in the order divided by the budget).
 *      Samples max_defer or more steps past due are taken first;
 *   3. the window is scanned in order and every sample that still fits the
 *      budget is taken (first fit), until the step is 99.95% full.
 * A sample's delay is how many steps after its due step it is placed
 * (0 when placed early, as gap fillers from deep in the window are).
 * The split (split.c) then spreads the step across ranks. Samples the
 * memory caps leave no room for go back to the front of the window.
 *
 * pack (balanced): a step also fills whole rows of seq_len in tokens (its
 * budget buys them at the row's price), the scan steering the mix so both
 * fill together (course(), on_course()); outliers are those a rank's rows
 * cannot even out and get whole rows of their own (release_outliers). Row
 * rounding and the defaults make this sequence depend on world. See
 * README.md, "Pack: full rows".
 *
 * The baselines take fixed-size global batches of world * batch_per_rank
 * consecutive samples from their order, batch_per_rank per rank.
 */
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

void lf_plan_params_default(lf_plan_params *p)
{
    memset(p, 0, sizeof *p);
    p->sampler = LF_PLAN_BALANCED;
    p->world = 1;
    p->outlier_policy = LF_PLAN_OUTLIER_DELAY;
    p->layout = LF_PLAN_PAD;
    lf_plan_cost_preset(&p->cost, LF_PLAN_PRESET_TEXT, 4096);
}

#define MAX_WORLD 65536u
#define SORTED_MEGA 50u
/* A limit on micro_max_padded and micro_overhead: with under 2^26 samples a
 * step, the cut search's sums (samples * (cap + overhead)) fit 64 bits. */
#define MICRO_LIMIT (UINT64_C(1) << 36)
/* pack prices tokens in Q32 cost units (see "pack: rows" below) */
#define PRICE_SHIFT 32
/* The most a step may cost: its sums (of samples, of a rank's) are 64-bit
 * and the split's search doubles a change's cost (split.c, better()). An
 * outlier step's budget is the one that can reach it: 2^52 a sample times
 * a group of 2^11 or more. d per micro-batch comes on top, unbounded by
 * the budget: a rank's cost with it saturates (with_overhead). */
#define STEP_COST_LIMIT (UINT64_C(1) << 63)

/* pack (balanced) fills rows in tokens as well as the budget in cost */
static int pack_rows(const lf_plan_params *p)
{
    return p->layout == LF_PLAN_PACK && p->sampler == LF_PLAN_BALANCED;
}

/* Outliers go out one step after they arrive, their step bounded (see
 * release_bounded) rather than waiting for a group. Pad only: a balanced
 * pack step is whole rows a rank, and an outlier step needs rows more for
 * the others to even out its excess (a row more a rank is twice a step of
 * one row a rank); see README.md, "Bounded steps". */
static int bounded(const lf_plan_params *p)
{
    return p->sampler == LF_PLAN_BALANCED && p->outlier_policy == LF_PLAN_OUTLIER_DELAY &&
           p->step_bound != LF_PLAN_UNBOUNDED && p->layout == LF_PLAN_PAD;
}

/* A balanced step composed for the world (lf_plan_select): pad's bins, or
 * in pad and pack steps of whole pieces (world_level); the baselines take
 * a fixed count and ignore it. */
static int world_select(const lf_plan_params *p)
{
    return p->select == LF_PLAN_SELECT_WORLD && p->sampler == LF_PLAN_BALANCED;
}

/* The epoch's last steps keep within step_bound: pad where bounded, and
 * pack (balanced), whose last step took what was left, up to 2 budgets
 * (1.63x the median step's tokens on real text split at 2048): what is
 * left is now shared by as few steps as keep within the bound. */
static int tail_bounded(const lf_plan_params *p)
{
    return bounded(p) || (p->sampler == LF_PLAN_BALANCED && p->layout == LF_PLAN_PACK &&
                          p->step_bound != LF_PLAN_UNBOUNDED);
}

/* pack: a sample is an outlier if its cost above the leanest price of its
 * tokens (its excess, mostly the quadratic term) is over PACK_HEAVY of a
 * rank's share of excess ((price - leanest price) x a rank's tokens), and
 * outliers are released PACK_GROUP a rank at once. See README.md: a rank's
 * rows are full, so its cost is equal only if its excess is, and a sample
 * with much of a rank's share cannot be evened out in a normal step; a
 * group of many is, by KK. */
#define PACK_HEAVY_NUM 2u
#define PACK_HEAVY_DEN 5u
#define PACK_GROUP 8u

/* price, lean: Q32 cost per token of all samples that fit a row, and the
 * least of one sample (pack; else unused) */
typedef struct pack_price {
    lfp_u128 price, lean;
} pack_price;

/* excess of length len over the lean price, Q32 (0 if under it) */
static lfp_u128 excess_q32(const lf_plan_params *p, uint64_t len, lfp_u128 lean)
{
    lfp_u128 c = (lfp_u128)lf_plan_cost(&p->cost, len) << PRICE_SHIFT, t = lean * len;
    return c > t ? c - t : 0;
}

static uint64_t default_outlier_cost(const lf_plan_params *p, uint64_t budget,
                                     const pack_price *pp)
{
    uint64_t rank_budget = budget / p->world;
    if (!pack_rows(p) || pp->price == 0 || pp->price <= pp->lean) return rank_budget;
    lfp_u128 tokens = ((lfp_u128)rank_budget << PRICE_SHIFT) / pp->price;
    lfp_u128 limit = (pp->price - pp->lean) * tokens / PACK_HEAVY_DEN * PACK_HEAVY_NUM;
    if (excess_q32(p, p->seq_len, pp->lean) <= limit) return rank_budget;
    uint64_t lo = 0, hi = p->seq_len;           /* excess(lo) <= limit < excess(hi) */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (excess_q32(p, mid, pp->lean) <= limit) lo = mid;
        else hi = mid;
    }
    uint64_t c = lf_plan_cost(&p->cost, lo);
    return c < rank_budget ? c : rank_budget;
}

/* Fills the defaults; mean_cost is the samples' mean cost (0 if none), pp
 * the pack prices of all samples that fit a row (zero if none). */
static int resolve(lf_plan_params *p, uint64_t mean_cost, const pack_price *pp)
{
    if (p->world == 0 || p->world > MAX_WORLD || p->sampler > LF_PLAN_SORTED ||
        p->outlier_policy > LF_PLAN_OUTLIER_REJECT || p->layout > LF_PLAN_PACK ||
        p->overflow > LF_PLAN_OVERFLOW_DROP || p->select > LF_PLAN_SELECT_WORLD)
        return LF_PLAN_E_ARG;
    if (p->layout == LF_PLAN_PACK && p->seq_len == 0) return LF_PLAN_E_ARG;
    if (p->layout == LF_PLAN_PACK && p->rank_max_padded &&
        p->rank_max_padded < p->seq_len)
        return LF_PLAN_E_ARG;
    if (p->sampler == LF_PLAN_BALANCED) {
        if (p->step_budget == 0 || p->step_budget > LF_PLAN_COST_MAX) return LF_PLAN_E_ARG;
    } else if (p->batch_per_rank == 0 || p->batch_per_rank > (1u << 20) ||
               p->rank_max_tokens || p->rank_max_padded) {
        return LF_PLAN_E_ARG; /* a fixed count a rank: a cap could not hold */
    }
    if (p->lookahead == 0) {
        /* four steps' worth of samples, so a step can be filled from it */
        uint64_t per_step = mean_cost ? p->step_budget / mean_cost : 0;
        p->lookahead = per_step > 1024 ? (uint32_t)(per_step < (1u << 22) ? 4 * per_step : 1u << 24)
                                       : 4096;
    }
    if (p->max_defer == 0) p->max_defer = 4;
    if (p->outlier_group == 0)
        p->outlier_group = pack_rows(p) ? PACK_GROUP * p->world : p->world;
    if (p->outlier_cost == 0) p->outlier_cost = default_outlier_cost(p, p->step_budget, pp);
    if (p->locality_blocks == 0) p->locality_blocks = 64;
    if (p->step_bound == 0) p->step_bound = LF_PLAN_STEP_BOUND;
    if (p->step_bound < 1000) return LF_PLAN_E_ARG;   /* a bound below the budget */
    if (p->micro_overhead == 0) {
        /* d in tokens: d over the linear cost of one token, rounded up */
        lfp_u128 a = p->cost.a_q16, t = a ? (((lfp_u128)p->cost.d << 16) + a - 1) / a : 0;
        p->micro_overhead = t == 0 ? LF_PLAN_MICRO_OVERHEAD
                                   : t > MICRO_LIMIT ? MICRO_LIMIT : (uint64_t)t;
    }
    if (p->lookahead > (1u << 24) || p->outlier_group > (1u << 20) ||
        p->micro_overhead > MICRO_LIMIT || p->micro_max_padded > MICRO_LIMIT)
        return LF_PLAN_E_ARG;
    if (p->sampler == LF_PLAN_BALANCED && p->outlier_cost > p->step_budget)
        return LF_PLAN_E_ARG;
    return 0;
}

/* An outlier step's budget grows by up to this many times its costliest
 * outlier (release_outliers): pad, the group; pack, when rows cannot be
 * had, the group rounded up to a multiple of world. The epoch's last group
 * may be larger, where its budget stays within STEP_COST_LIMIT. */
static uint64_t outlier_span(const lf_plan_params *p)
{
    uint64_t g = p->outlier_group, w = p->world;
    return pack_rows(p) ? (g + w - 1) / w * w : g;
}

uint64_t lf_plan_bound_cost(const lf_plan_params *p)
{
    if (!p || p->world == 0 || !bounded(p)) return UINT64_MAX;
    uint64_t bound = p->step_bound ? p->step_bound : LF_PLAN_STEP_BOUND;
    uint64_t g = p->outlier_group ? p->outlier_group : p->world;
    return (uint64_t)((lfp_u128)p->step_budget * bound / 1000 / g);
}

/* ---- pack: rows ------------------------------------------------------------
 *
 * In pack mode a step's rows are padding unless filled, so a step fills rows
 * of seq_len in tokens as well as its budget in cost. A row is priced at the
 * mean cost per token of the samples that are no outliers (the samples the
 * normal steps are made of): price = Σ cost / Σ L, Q32. The budget buys
 * rows = budget / (seq_len * price) rows, rounded; a budget of whole rows
 * (lf_plan_pack_budget) fills both together. Token sums stay below 2^40 and
 * the price below 2^84, so every product below fits 128 bits.
 *
 * A step's rows cannot be filled to the last token (each rank's rows end in
 * a gap shorter than the samples left), so neither can a budget of exactly
 * whole rows: lf_plan_pack_budget leaves 2^-10 of them to the gaps. */
#define PACK_SLACK_SHIFT 10
#define PACK_TOKENS_LIMIT (UINT64_C(1) << 40)

typedef struct row_price {
    lfp_u128 cost;               /* Σ cost of the samples priced */
    uint64_t tok;                /* Σ L */
    uint64_t lean_c, lean_l;     /* the least cost per token (L > 0) */
    uint64_t rich_c, rich_l;     /* the most */
} row_price;

/* a_c / a_l < b_c / b_l, exactly (costs < 2^53, lengths < 2^32) */
static int cheaper_per_token(uint64_t a_c, uint64_t a_l, uint64_t b_c, uint64_t b_l)
{
    return (lfp_u128)a_c * b_l < (lfp_u128)b_c * a_l;
}

/* Prices a row from the samples that fit one (lfp_fits_alone) and cost
 * at most ocost. */
static row_price price_rows(const lf_plan_params *p, const lf_plan_sample *smp, size_t n,
                            uint64_t piece, uint64_t ocost)
{
    row_price r = {0, 0, 0, 0, 0, 0};
    lf_plan_lengths w = lf_plan_lengths_of(p, smp, n, piece);
    uint64_t len, k;
    while (lf_plan_lengths_next(&w, &len, &k)) {
        uint64_t c = lf_plan_cost(&p->cost, len);
        if (!lfp_fits_alone(p, len) || c > ocost) continue;
        r.cost += (lfp_u128)c * k;
        r.tok += len * k;
        if (len == 0) continue;
        if (r.lean_l == 0 || cheaper_per_token(c, len, r.lean_c, r.lean_l)) {
            r.lean_c = c;
            r.lean_l = len;
        }
        if (r.rich_l == 0 || cheaper_per_token(r.rich_c, r.rich_l, c, len)) {
            r.rich_c = c;
            r.rich_l = len;
        }
    }
    return r;
}

/* Q32 cost per token, or 0 when there is no usable price. */
static lfp_u128 price_q32(const row_price *r)
{
    if (r->tok == 0) return 0;
    lfp_u128 q = (r->cost << PRICE_SHIFT) / r->tok;
    return q >> 84 ? 0 : q;
}

/* The prices the default outlier cost is made from: of every sample (cut
 * at piece) that fits a row. */
static pack_price pack_prices(const lf_plan_params *p, const lf_plan_sample *smp, size_t n,
                              uint64_t piece)
{
    row_price r = price_rows(p, smp, n, piece, LF_PLAN_COST_MAX);
    pack_price pp = {price_q32(&r), 0};
    if (pp.price) pp.lean = ((lfp_u128)r.lean_c << PRICE_SHIFT) / r.lean_l;
    return pp;
}

/* lf_plan_pack_budget of the samples as the plan cuts them. */
static int pack_budget_of(const lf_plan_params *p, const lf_plan_sample *samples, size_t n,
                          uint32_t rows_per_rank, uint64_t *budget)
{
    lfp_u128 rows = (lfp_u128)p->world * rows_per_rank, b = 0;
    uint64_t piece = lf_plan_piece_len(p);
    /* the default outlier cost follows the budget: price twice, the second
     * time without the first budget's outliers */
    uint64_t ocost = p->outlier_cost ? p->outlier_cost : LF_PLAN_COST_MAX;
    pack_price all = pack_prices(p, samples, n, piece);
    for (int round = 0; round < 2; round++) {
        row_price r = price_rows(p, samples, n, piece, ocost);
        lfp_u128 q = price_q32(&r);
        if (q == 0) return LF_PLAN_E_ARG;
        b = (rows * p->seq_len * q) >> PRICE_SHIFT;
        b -= b >> PACK_SLACK_SHIFT;
        if (b == 0 || b > LF_PLAN_COST_MAX) return LF_PLAN_E_ARG;
        if (!p->outlier_cost) ocost = default_outlier_cost(p, (uint64_t)b, &all);
    }
    *budget = (uint64_t)b;
    return 0;
}

int lf_plan_pack_budget(const lf_plan_params *params, const lf_plan_sample *samples, size_t n,
                        uint32_t rows_per_rank, uint64_t *budget)
{
    if (!params || !budget || (n && !samples && lfp_view_check(params, n)) ||
        rows_per_rank == 0)
        return LF_PLAN_E_ARG;
    lf_plan_params bal = *params;
    const lf_plan_params *p = &bal;
    bal.sampler = LF_PLAN_BALANCED;
    if (p->layout != LF_PLAN_PACK || p->seq_len == 0 || p->world == 0) return LF_PLAN_E_ARG;
    return pack_budget_of(p, samples, n, rows_per_rank, budget);
}

/* Sets p->rows and the row price from the samples (pack, balanced). */
static void price_plan(lf_plan *p, const lf_plan_sample *smp)
{
    const lf_plan_params *q = &p->prm;
    if (!pack_rows(q)) return;
    row_price r = price_rows(q, smp, p->nraw, p->pc.len, q->outlier_cost);
    lfp_u128 price = price_q32(&r);
    if (price == 0) return;
    lfp_u128 row = (lfp_u128)q->seq_len * price;
    lfp_u128 rows = (((lfp_u128)q->step_budget << PRICE_SHIFT) + row / 2) / row;
    if (rows == 0) rows = 1;
    if (rows * q->seq_len > PACK_TOKENS_LIMIT) return;
    p->rows = (uint64_t)rows;
    p->price = price;
    p->lean_q = ((lfp_u128)r.lean_c << PRICE_SHIFT) / r.lean_l;
    p->rich_l = r.rich_l;
}

/* Delayed outliers are released in steps whose budget grows by up to
 * outlier_span() times the costliest outlier; such a step must stay within
 * STEP_COST_LIMIT, or its sums would wrap. */
static int check_outlier_steps(const lf_plan *p, const lf_plan_sample *smp)
{
    const lf_plan_params *q = &p->prm;
    if (q->sampler != LF_PLAN_BALANCED || q->outlier_policy != LF_PLAN_OUTLIER_DELAY) return 0;
    uint64_t omax = 0, len, k;
    lf_plan_lengths w = lf_plan_lengths_of(q, smp, p->nraw, p->pc.len);
    while (lf_plan_lengths_next(&w, &len, &k)) {
        uint64_t c = lfp_coster_cost(&p->coster, len);
        if (lfp_fits_alone(q, len) && c > q->outlier_cost && c > omax) omax = c;
    }
    lfp_u128 most = (lfp_u128)omax * outlier_span(q) + q->step_budget;
    return most > STEP_COST_LIMIT ? LF_PLAN_E_OVERFLOW : 0;
}

static int cmp_block_id(const void *x, const void *y)
{
    const lfp_key *a = x, *b = y;   /* len holds the block here */
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Ids must be unique: they break every tie, and a repeated one would be
 * served twice an epoch. Ids in ascending order (a dataset's index gives
 * them so) are; others are checked over a sorted copy, as equal ids can
 * sit in any two blocks. */
static int check_ids_unique(const lf_plan_sample *smp, size_t n)
{
    size_t i = 1;
    while (i < n && smp[i].id > smp[i - 1].id) i++;
    if (i >= n) return 0;
    uint64_t *v = malloc(n * sizeof *v + 1);
    if (!v) return LF_PLAN_E_NOMEM;
    for (i = 0; i < n; i++) v[i] = smp[i].id;
    qsort(v, n, sizeof *v, cmp_u64);
    int rc = 0;
    for (i = 1; i < n && !rc; i++)
        if (v[i] == v[i - 1]) rc = LF_PLAN_E_ARG;
    free(v);
    return rc;
}

/* Whether the samples come by (block, id) already, as a dataset's index
 * gives them: then grouping needs no sort (at 10^7 samples the sort was
 * most of a plan's creation, and its keys 24 bytes a sample) and the plan
 * keeps no order by block (lfp_member). */
static int in_block_order(const lf_plan_sample *smp, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (smp[i].block < smp[i - 1].block ||
            (smp[i].block == smp[i - 1].block && smp[i].id <= smp[i - 1].id))
            return 0;
    return 1;
}

/* The k-th sample by (block, id) of smp, with keys (sorted by (block, id))
 * where the samples are not in that order already. */
static uint32_t by_block(const lfp_key *keys, size_t k)
{
    return keys ? keys[k].idx : (uint32_t)k;
}

/* The groups of a view (prm.view, checked): its blocks, the empty ones
 * skipped, as build_groups makes them of an array by (block, id). */
static int view_groups(lf_plan *p)
{
    const lf_plan_view *v = &p->prm.view;
    uint32_t g = 0;
    for (uint32_t b = 0; b < v->blocks; b++) g += v->block_start[b + 1] > v->block_start[b];
    p->ngroups = g;
    p->group_start = malloc(((size_t)g + 1) * sizeof *p->group_start);
    if (!p->group_start) return LF_PLAN_E_NOMEM;
    g = 0;
    for (uint32_t b = 0; b < v->blocks; b++)
        if (v->block_start[b + 1] > v->block_start[b]) p->group_start[g++] = v->block_start[b];
    p->group_start[g] = (uint32_t)p->nraw;
    return 0;
}

/* Groups the samples given by block: ids, not input order, decide the
 * order inside. Fills group_start and, where the samples are not by
 * (block, id), group_members and *group_of (each sample's group, for the
 * sequence hash; NULL otherwise: the groups are runs of the indices), of
 * the samples given (lfp_pieces_groups turns them into pieces). */
static int build_groups(lf_plan *p, const lf_plan_sample *smp, uint32_t **group_of)
{
    *group_of = NULL;
    if (!smp) return view_groups(p);
    int rc = check_ids_unique(smp, p->nraw);
    if (rc) return rc;
    lfp_key *k = NULL;
    if (!in_block_order(smp, p->nraw)) {
        if (!(k = malloc(p->nraw * sizeof *k + 1))) return LF_PLAN_E_NOMEM;
        for (size_t i = 0; i < p->nraw; i++) k[i] = (lfp_key){smp[i].block, smp[i].id, (uint32_t)i};
        qsort(k, p->nraw, sizeof *k, cmp_block_id);
        p->group_members = malloc(p->nraw * sizeof *p->group_members + 1);
        *group_of = malloc(p->nraw * sizeof **group_of + 1);
        if (!p->group_members || !*group_of) { free(k); return LF_PLAN_E_NOMEM; }
    }
    uint32_t g = 0;
    for (size_t i = 1; i < p->nraw; i++)
        g += smp[by_block(k, i)].block != smp[by_block(k, i - 1)].block;
    p->ngroups = p->nraw ? g + 1 : 0;
    p->group_start = malloc(((size_t)p->ngroups + 1) * sizeof *p->group_start);
    if (!p->group_start) { free(k); return LF_PLAN_E_NOMEM; }
    p->group_start[0] = 0;
    g = 0;
    for (size_t i = 0; i < p->nraw; i++) {
        uint32_t idx = by_block(k, i);
        if (i > 0 && smp[idx].block != smp[by_block(k, i - 1)].block) p->group_start[++g] = (uint32_t)i;
        if (k) { p->group_members[i] = idx; (*group_of)[idx] = g; }
    }
    p->group_start[p->ngroups] = (uint32_t)p->nraw;
    free(k);
    return 0;
}

static uint64_t hash_step(uint64_t h, uint64_t v) { return lfp_mix(h ^ v); }

/* A baseline's steps: world x batch_per_rank, and the rule that an epoch's
 * rest of fewer than world samples joins the step before (select_fixed;
 * its bit tells these plans from those that left it a step of its own). */
static uint64_t fixed_rule(const lf_plan_params *q)
{
    return (uint64_t)q->world * q->batch_per_rank | 1ull << 62;
}

/* The samples' part of the sequence hash: n, then each sample's id,
 * length, group and whether it fails a cap (lf_plan_view_digest: a view's,
 * none failing). */
static uint64_t digest_begin(size_t n)
{
    return hash_step(0x6c66706c616e31ULL, n);
}

static uint64_t digest_add(uint64_t h, uint64_t id, uint64_t len, uint64_t group, int capfail)
{
    h = hash_step(h, id);
    return hash_step(h, len ^ (group << 40) ^ ((uint64_t)capfail << 63));
}

uint64_t lf_plan_view_digest(const lf_plan_view *v, size_t n)
{
    lf_plan_params q = {.view = *v};   /* the view's release, as a plan's pass */
    uint64_t h = digest_begin(n), g = 0;
    size_t b = 0;
    LFP_SCAN(&q, i, n) {
        for (; v->block_start[b + 1] <= i; b++) g += v->block_start[b + 1] > v->block_start[b];
        h = digest_add(h, i, lf_plan_view_length(v, i), g, 0);
    }
    return h;
}

/* Whether the view's digest is the samples' part of p's sequence hash: p
 * is of the view's digest_n samples (a view, not an array: group_of NULL,
 * the ids the indices) and none fails a cap (nor a piece of one). */
static int digest_given(const lf_plan *p, const uint32_t *group_of)
{
    const lf_plan_view *v = &p->prm.view;
    return v->digest_n && v->digest_n == p->nraw && lf_plan_view_set(v) && !p->len16 &&
           !p->len32_own && !p->id && !group_of && !p->ncapfail;
}

/* Whether a sample of len tokens fails a cap: where it is cut, whether its
 * last piece does (its whole pieces, all of one length, are the cut's). */
static int given_fails(const lf_plan *p, uint64_t len)
{
    uint64_t k = lf_plan_piece_count(len, p->pc.len);
    return !lfp_fits_alone(&p->prm, lfp_piece_tokens(len, p->pc.len, k - 1));
}

/* The samples' part of the sequence hash: of the samples given, as they
 * are given (the view's digest where it is theirs), then where they are
 * cut the cut and whether a whole piece fails a cap. Their pieces follow
 * from those (pieces.c), so the hash needs no pass over the pieces, and a
 * summary's digest spares the pass over the samples (10^9 samples cut at
 * 1024 were 1.5 x 10^9 pieces hashed, 12 s of start-up, twice). */
static uint64_t samples_hash(const lf_plan *p, const uint32_t *group_of)
{
    const lf_plan_params *q = &p->prm;
    int given = digest_given(p, group_of);
    uint64_t h = given ? q->view.digest : digest_begin(p->nraw);
    size_t g = 0, s = 0;   /* sample i's first piece */
    LFP_SCAN(q, i, given ? 0 : p->nraw) {
        uint64_t len = lfp_given_len(p, i);
        while (!group_of && p->group_start[g + 1] <= s) g++;   /* runs of the indices */
        h = digest_add(h, p->id ? p->id[i] : i, len, group_of ? group_of[i] : g,
                       given_fails(p, len));
        s += lf_plan_piece_count(len, p->pc.len);
    }
    if (!p->pc.len) return h;
    return hash_step(h, p->pc.len ^ (uint64_t)!lfp_fits_alone(q, p->pc.len) << 63 ^
                            (uint64_t)0x637574 << 40);
}

/* What the global sequence depends on; a state restores only onto a match.
 * group_of: each sample given's group (NULL: the groups are runs of
 * indices). */
static uint64_t sequence_hash(const lf_plan *p, const uint32_t *group_of)
{
    const lf_plan_params *q = &p->prm;
    uint64_t h = samples_hash(p, group_of);
    uint64_t v[] = {q->sampler, q->step_budget, q->lookahead, q->max_defer,
                    q->outlier_policy, q->outlier_cost, q->outlier_group,
                    q->locality_blocks, q->seed, q->cost.a_q16, q->cost.b_q32,
                    q->cost.c0,
                    q->sampler == LF_PLAN_BALANCED ? 0 : fixed_rule(q),
                    bounded(q) ? q->step_bound : 0};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) h = hash_step(h, v[i]);
    if (p->rows) h = hash_step(h, p->rows * q->seq_len);   /* pack fills rows */
    if (world_select(q)) h = hash_step(h, ((uint64_t)q->select << 32) ^ q->world);
    for (uint32_t s = 0; p->nsrc > 1 && s < p->nsrc; s++)  /* a mixture's sources */
        h = hash_step(h, q->mix.first[s] ^ ((uint64_t)s << 56));
    return h;
}

/* The order's version in the sequence hash: naive and sorted draw their
 * shuffle as they go since version 2 (order.c; a mixture's sources each
 * theirs), another sequence than version 1's Fisher-Yates; balanced plans
 * keep theirs, and their hash of old. p->hash_v1 is the hash version 1
 * gave, so a state saved under it is refused as of another version
 * (state.c). */
#define ORDER_VERSION 2u

static void version_hash(lf_plan *p)
{
    p->hash_v1 = 0;
    if (p->prm.sampler == LF_PLAN_BALANCED) return;
    p->hash_v1 = p->hash;
    p->hash = hash_step(p->hash, (uint64_t)ORDER_VERSION << 48 | 0x6f72646572);
}

/* A mixture's weights, apart from the sequence hash: a state restores onto
 * other weights between epochs (state.c). 0 for one source. */
static uint64_t weights_hash(const lf_plan *p)
{
    uint64_t h = 0;
    for (uint32_t s = 0; p->nsrc > 1 && s < p->nsrc; s++)
        h = hash_step(h ^ 0x6d6978, p->prm.mix.weight[s]);
    return h;
}

void lf_plan_free(lf_plan *p)
{
    if (!p) return;
    lfp_split_free(&p->split);
    if (p->pc_shared) p->pc = (lfp_pieces){0};   /* the view's cut's */
    void *bufs[] = {p->id, p->len16, p->len32_own, p->pc.first, p->pc.rank, p->group_start,
                    p->group_members, p->gperm,
                    p->grem, p->pool, p->pool_group,
                    p->keys, p->pidx, p->page, p->oidx, p->owait, p->rej,
                    p->sidx, p->sdelay, p->sfrom_o, p->ptaken, p->sids, p->rank_start,
                    p->rank_ids, p->rank_idx, p->rank_sorted, p->rank_cost, p->rank_tokens,
                    p->item_cost,
                    p->item_len, p->item_id, p->item_excess, p->item_urgent, p->b_ids,
                    p->b_lens, p->b_room,
                    p->b_row_of, p->b_row_start, p->b_cu, p->b_fill, p->b_keys,
                    p->b_micro_start, p->b_micro_len, p->b_cut, p->b_best, p->keep_assign,
                    p->bin, p->sbin, p->swin};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(p);
}

/* The most samples locality_blocks groups of a source hold: the order's
 * pool, a source's part of it at its pool_at (a mixture's sources are drawn
 * side by side). */
static size_t pool_bound(lf_plan *p)
{
    size_t all = 0;
    for (uint32_t s = 0; s < p->nsrc; s++) {
        size_t most = 0, members = p->group_start[p->src_group[s + 1]] -
                                   p->group_start[p->src_group[s]];
        for (uint32_t g = p->src_group[s]; g < p->src_group[s + 1]; g++)
            if (p->group_start[g + 1] - p->group_start[g] > most)
                most = p->group_start[g + 1] - p->group_start[g];
        p->mix.src[s].pool_at = all;
        all += most * p->prm.locality_blocks < members ? most * p->prm.locality_blocks : members;
    }
    return all;
}

/* All of the plan's memory but the groups (build_groups), in one place:
 * nothing is allocated later. */
static int alloc_all(lf_plan *p)
{
    size_t w = (size_t)p->prm.world + 1, ms = p->maxstep + 1;
    size_t ng = (size_t)p->ngroups + 1;
    int fail = 0;
    p->pool_cap = pool_bound(p);
#define ALLOC(ptr, count) fail |= !((ptr) = calloc((count), sizeof *(ptr)))
    ALLOC(p->gperm, ng); ALLOC(p->grem, ng);
    ALLOC(p->pool, p->pool_cap + 1); ALLOC(p->pool_group, p->pool_cap + 1);
    ALLOC(p->keys, 2 * p->sort_cap + 1);
    ALLOC(p->pidx, (size_t)p->prm.lookahead + 1); ALLOC(p->page, (size_t)p->prm.lookahead + 1);
    ALLOC(p->ptaken, (size_t)p->prm.lookahead + 1);
    ALLOC(p->oidx, p->ocap + 1); ALLOC(p->owait, p->ocap + 1);
    ALLOC(p->rej, p->ocap + 1);
    ALLOC(p->sidx, ms); ALLOC(p->sdelay, ms); ALLOC(p->sfrom_o, ms); ALLOC(p->sids, ms);
    ALLOC(p->rank_start, w + 1); ALLOC(p->rank_ids, ms); ALLOC(p->rank_idx, ms);
    ALLOC(p->rank_sorted, ms); ALLOC(p->rank_cost, w);
    ALLOC(p->rank_tokens, w); ALLOC(p->item_cost, ms); ALLOC(p->item_len, ms);
    ALLOC(p->item_id, ms); ALLOC(p->item_excess, ms); ALLOC(p->item_urgent, ms);
    ALLOC(p->b_ids, ms); ALLOC(p->b_lens, ms); ALLOC(p->b_room, ms);
    ALLOC(p->b_row_of, ms); ALLOC(p->b_row_start, ms + 1); ALLOC(p->b_cu, 2 * ms + 1);
    ALLOC(p->b_fill, ms + 1); ALLOC(p->b_keys, 2 * ms);
    ALLOC(p->b_micro_start, ms + 1); ALLOC(p->b_micro_len, ms + 1); ALLOC(p->b_cut, ms + 1);
    ALLOC(p->b_best, ms + 1); ALLOC(p->keep_assign, ms);
    ALLOC(p->bin, w); ALLOC(p->sbin, ms); ALLOC(p->swin, ms);
#undef ALLOC
    if (fail) return LF_PLAN_E_NOMEM;
    return lfp_split_init(&p->split, p->prm.world, p->maxstep);
}

/* Keeps what the plan needs of each sample given: its length, in 16 bits
 * where every length fits, and its id where the ids are not the indices;
 * of a view (smp NULL), nothing: its lengths are read where they lie.
 * Counts the samples (pieces) that fit no cap and the outliers (p->ocap:
 * the most a queue of held or rejected ones can hold). */
static int copy_samples(lf_plan *p, const lf_plan_sample *smp)
{
    uint64_t most = 0;
    int dense = 1;
    for (size_t i = 0; smp && i < p->nraw; i++) {
        if (smp[i].length > most) most = smp[i].length;
        dense &= smp[i].id == i;
    }
    if (most > UINT32_MAX) return LF_PLAN_E_ARG;
    if (!smp) p->len32 = p->prm.view.lengths;   /* NULL: its segments (lfp_len) */
    else if (most <= UINT16_MAX) p->len16 = malloc(p->nraw * sizeof *p->len16 + 1);
    else p->len32 = p->len32_own = malloc(p->nraw * sizeof *p->len32_own + 1);
    if (!dense) p->id = malloc(p->nraw * sizeof *p->id + 1);
    if ((smp && !p->len16 && !p->len32) || (!dense && !p->id)) return LF_PLAN_E_NOMEM;
    for (size_t i = 0; smp && i < p->nraw; i++) {
        if (p->len16) p->len16[i] = (uint16_t)smp[i].length;
        else if (p->len32_own) p->len32_own[i] = (uint32_t)smp[i].length;
        if (p->id) p->id[i] = smp[i].id;
    }
    lf_plan_lengths w = lf_plan_lengths_of(&p->prm, smp, p->nraw, p->pc.len);
    uint64_t len, k;
    while (lf_plan_lengths_next(&w, &len, &k)) {
        int fail = !lfp_fits_alone(&p->prm, len);
        p->ncapfail += fail ? k : 0;
        p->capfail_tokens += fail ? len * k : 0;
        p->ocap += !fail && lfp_coster_cost(&p->coster, len) > p->prm.outlier_cost ? k : 0;
    }
    return 0;
}

/* Creates the plan of the n samples given (an array, or the view's) cut
 * at piece. */
static int create_from(const lf_plan_params *params, const lf_plan_sample *samples,
                       size_t n, uint64_t piece, lf_plan **out)
{
    if (n >= UINT32_MAX - 1) return LF_PLAN_E_ARG;
    lf_plan_params prm = *params;
    if (samples) prm.view = (lf_plan_view){0};   /* an array: the view is not read */
    lfp_u128 total = 0;          /* 2^32 costs of up to 2^52: no wrap */
    uint64_t len, k, m = 0;      /* m: the pieces */
    lf_plan_lengths w = lf_plan_lengths_of(&prm, samples, n, piece);
    while (lf_plan_lengths_next(&w, &len, &k)) {
        total += (lfp_u128)lf_plan_cost(&prm.cost, len) * k;
        m += k;
    }
    pack_price all = {0, 0};
    if (pack_rows(&prm) && prm.seq_len) all = pack_prices(&prm, samples, n, piece);
    int rc = resolve(&prm, m ? (uint64_t)(total / m) : 0, &all);
    if (rc) return rc;
    lf_plan *p = calloc(1, sizeof *p);
    if (!p) return LF_PLAN_E_NOMEM;
    uint32_t *group_of = NULL;   /* the groups' runs need none (build_groups) */
    p->prm = prm;
    p->nraw = n;
    lfp_coster_init(&p->coster, &prm.cost);
    if ((rc = lfp_pieces_make(p, samples, piece))) goto fail;
    /* a baseline's step holds at most world - 1 more than world x
     * batch_per_rank (the epoch's rest, select_fixed), and it and a sorted
     * mega-batch at most the n samples there are */
    size_t global = (size_t)prm.world * prm.batch_per_rank, mega = SORTED_MEGA * global;
    /* a step's last group of outliers may take up to a group less one more
     * (last_group, release_bounded) */
    size_t fixed = global + prm.world - 1;
    p->maxstep = prm.sampler == LF_PLAN_BALANCED ? (size_t)prm.lookahead + 2 * prm.outlier_group
                                                 : (fixed < p->n ? fixed : p->n);
    p->sort_cap = prm.sampler == LF_PLAN_SORTED ? (mega < p->n ? mega : p->n) : p->maxstep;
    if ((rc = build_groups(p, samples, &group_of)) || (rc = lfp_pieces_groups(p)) ||
        (rc = copy_samples(p, samples)) || (rc = lfp_mix_init(p)) || (rc = alloc_all(p)) ||
        (rc = check_outlier_steps(p, samples)))
        goto fail;
    /* the longest placeable sample: micro_max_padded's default (the same
     * samples fit under it), and lf_plan_cap_later's; the shortest,
     * lf_plan_rank_samples_max's */
    p->shortest_fit = UINT64_MAX;
    w = lf_plan_lengths_of(&p->prm, samples, n, p->pc.len);
    while (lf_plan_lengths_next(&w, &len, &k)) {
        if (!lfp_fits_alone(&p->prm, len)) continue;
        if (len > p->longest_fit) p->longest_fit = len;
        if (len < p->shortest_fit) p->shortest_fit = len;
    }
    if (!p->prm.micro_max_padded) p->prm.micro_max_padded = p->longest_fit;
    price_plan(p, samples);
    p->hash = sequence_hash(p, group_of);
    version_hash(p);
    p->weights_hash = weights_hash(p);
    free(group_of);
    lfp_epoch_begin(p, prm.epoch);
    *out = p;
    return 0;
fail:
    free(group_of);
    lf_plan_free(p);
    return rc;
}

int lf_plan_create(const lf_plan_params *params, const lf_plan_sample *samples,
                   size_t n, lf_plan **out)
{
    if (!params || !out || (n && !samples && lfp_view_check(params, n)))   /* set and sound */
        return LF_PLAN_E_ARG;
    return create_from(params, samples, n, lf_plan_piece_len(params), out);
}

static void world_level(lf_plan *p);

/* A step's cost where the level is set (select WORLD, whole pieces: world_level), else the budget. */
static uint64_t step_level(const lf_plan *p)
{
    return p->level ? p->level : p->prm.step_budget;
}

void lfp_epoch_begin(lf_plan *p, uint32_t e)
{
    if (!p->level_known) world_level(p);
    p->epoch = e;
    p->epoch_done = 0;
    p->step = 0;
    p->cursor = p->np = p->no = p->nrej = 0;
    p->due_floor = UINT32_MAX;
    p->due_step = p->due_rem = 0;
    p->emitted = 0;
    p->have_step = 0;
    lfp_order_build(p);
}

/* ---- balanced selection --------------------------------------------------- */

static void refill_window(lf_plan *p)
{
    while (p->np < p->prm.lookahead && lfp_order_more(p)) {
        uint32_t s = lfp_order_next(p);
        if (lfp_cost(p, s) <= p->prm.outlier_cost) {
            p->pidx[p->np] = s;
            p->page[p->np] = (uint32_t)p->due_step;
            if (p->page[p->np] < p->due_floor) p->due_floor = p->page[p->np];
            p->np++;
            lfp_due_add(p, lfp_cost(p, s));
        } else if (p->prm.outlier_policy == LF_PLAN_OUTLIER_REJECT) {
            p->rej[p->nrej++] = s;
        } else {
            /* bounded: its place in the order (release_bounded); else steps
             * waited */
            p->oidx[p->no] = s;
            p->owait[p->no++] = bounded(&p->prm) ? (uint32_t)(p->cursor - 1) : 0;
        }
    }
}

/* What a step has taken and may take. */
typedef struct step_fill {
    uint64_t cost, tok;          /* taken so far: Σ cost, Σ L */
    uint64_t budget;             /* cost cap */
    uint64_t tok_cap;            /* pack: the step's rows in tokens (0: pad, none) */
    uint64_t tok_goal;           /* pack: the tokens the budget buys, <= tok_cap */
    lfp_i128 excess;             /* pack: budget - price * tok_goal, Q32: the drift
                                    the step ends with (an outlier step's) */
} step_fill;

/* ---- selection for the world (lf_plan_select WORLD) -----------------------
 *
 * The default selection fills a global budget, so a step's samples are the
 * same for every world size; the split then does what it can with them. On
 * text cut into pieces of one length that is often not enough: a step of 11
 * whole pieces and 21 short ones for 8 ranks cannot be split within 6.9 %
 * (balancer/README.md, "Issue #27 item 4"), whatever the split. Composed for
 * the world, a step is world bins of budget / world each: each sample the
 * scan takes goes to the fullest bin it fits (best fit, ties to the lower
 * bin), a sample no bin has room for is passed over (it stays in the window
 * for a later step, and goes first once max_defer steps late, as any, into
 * the emptiest bin if none has room), and the step closes once every bin
 * is within 2^-BIN_TOL_SHIFT of its share; a step that falls short of its
 * budget by more than 1/WORLD_SHORT_DIV is selected as by default.
 * So a step holds only what can be dealt evenly, and the bins are a split
 * of it: split_step starts from them where they are more even than its own.
 * Outliers and late samples go into the bins first (the emptiest, where
 * none has room), and the epoch's last step takes everything left. */
#define BIN_TOL_SHIFT 10
#define NO_BIN UINT32_MAX

/* The fullest bin with room for cost c (ties: the lower), or NO_BIN. */
static uint32_t bin_for(const lf_plan *p, uint64_t c)
{
    uint32_t best = NO_BIN;
    for (uint32_t b = 0; b < p->prm.world; b++)
        if (p->bin[b] + c <= p->bin_cap && (best == NO_BIN || p->bin[b] > p->bin[best]))
            best = b;
    return best;
}

/* Puts the step's item i into its bin: the fullest with room, else the
 * emptiest (ties: the lower). */
static void bin_put(lf_plan *p, size_t i)
{
    uint64_t c = lfp_cost(p, p->sidx[i]), full = p->bin_cap - p->bin_tol;
    uint32_t b = bin_for(p, c);
    if (b == NO_BIN) {
        b = 0;
        for (uint32_t r = 1; r < p->prm.world; r++)
            if (p->bin[r] < p->bin[b]) b = r;
    }
    if (p->bin[b] < full && p->bin[b] + c >= full) p->bins_short--;
    p->bin[b] += c;
    p->sbin[i] = b;
}

/* (Re)opens the bins at cap each and puts the step's items into them. */
static void bins_fill(lf_plan *p, uint64_t cap)
{
    memset(p->bin, 0, p->prm.world * sizeof *p->bin);
    p->bin_cap = cap ? cap : 1;
    p->bin_tol = p->bin_cap >> BIN_TOL_SHIFT;
    p->bins_short = p->prm.world;
    for (size_t i = 0; i < p->ns; i++) bin_put(p, i);
}

/* Opens the step's bins at budget / world each (select WORLD; else off)
 * and puts the items already taken (the outliers released) into them. */
static void bins_open(lf_plan *p, uint64_t budget)
{
    p->bin_cap = 0;
    if (world_select(&p->prm) && !p->level && !p->rows) bins_fill(p, budget / p->prm.world);
}

static inline void take(lf_plan *p, uint32_t s, uint32_t delay, int from_o, step_fill *f)
{
    p->sidx[p->ns] = s;
    p->sdelay[p->ns] = delay;
    p->sfrom_o[p->ns++] = (uint8_t)from_o;
    f->cost += lfp_cost(p, s);
    f->tok += lfp_len(p, s);
    p->swin[p->ns - 1] = NO_BIN;
    if (p->bin_cap) bin_put(p, p->ns - 1);
}

/* pack: what a full group's outlier step adds to the budget (*grow): whole
 * rows for the outliers' tokens, a row more a rank (KK evens out their
 * excess, not their tokens: the spare row takes up the difference), filled
 * at the price; the outliers bring their own excess over it (drift). Returns
 * 0 if rows cannot be had: none to add (pad), more tokens than a step
 * holds, outliers cheaper than their tokens' price, or a budget past
 * STEP_COST_LIMIT. */
static int rows_growth(const lf_plan *p, uint64_t budget, uint64_t more, lfp_i128 drift,
                       uint64_t *grow)
{
    if (!more || more > PACK_TOKENS_LIMIT || drift < 0) return 0;
    lfp_u128 g = (more * p->price + (lfp_u128)drift) >> PRICE_SHIFT;
    if (g > STEP_COST_LIMIT - budget) return 0;
    *grow = (uint64_t)g;
    return 1;
}

/* The epoch's last outliers, once the order is used up: a remainder of
 * fewer than a group would make a step of its own, with nothing else left
 * to even its ranks out (on real text: two documents for eight ranks, six
 * of them empty). It joins this group (of k) if that step's budget, the
 * group's count times the costliest, stays within STEP_COST_LIMIT (not
 * world-dependent, so pad's sequence stays one for every world). */
static size_t last_group(const lf_plan *p, size_t k)
{
    if (p->no - k >= p->prm.outlier_group) return k;
    uint64_t cmax = 0;
    for (size_t i = 0; i < p->no; i++)
        if (lfp_cost(p, p->oidx[i]) > cmax) cmax = lfp_cost(p, p->oidx[i]);
    uint64_t w = p->prm.world, span = p->rows ? (p->no + w - 1) / w * w : p->no;
    lfp_u128 most = (lfp_u128)cmax * span + p->prm.step_budget;
    return most > STEP_COST_LIMIT ? k : p->no;
}

/* The epoch's last steps' share of what is left, r: ⌈r ÷ k⌉ over its k
 * steps (at least 1). k = ⌊r ÷ B⌋: never below B and at most (k + 1) ÷ k
 * of it (2 B at k = 1). Bounded, at least the fewest steps whose share
 * stays within the bound, ⌈r ÷ (bound × B)⌉: after outlier steps had spent
 * the window, 1.86 B was left for one step; such a share may fall to
 * (k − 1) ÷ k × bound × B (0.625 B at k = 2). Used by tail_budget and
 * release_bounded; 0 past STEP_COST_LIMIT. */
static uint64_t tail_share(const lf_plan *p, lfp_u128 r)
{
    uint64_t b = step_level(p);
    lfp_u128 k = r / b;
    if (tail_bounded(&p->prm)) {
        lfp_u128 most = (lfp_u128)b * p->prm.step_bound / 1000, fewest = (r + most - 1) / most;
        if (fewest > k) k = fewest;
    }
    if (k < 1) k = 1;
    return r > STEP_COST_LIMIT ? 0 : (uint64_t)((r + k - 1) / k);
}

/* Takes up to max held outliers, in their order, those costlier than lim
 * (heavy) or those not, due (any, with all_due); *cmax gets the costliest
 * taken. A held outlier's owait is its place in the order here, due once
 * as many samples were placed, and it goes into the step's delay (which
 * gets back to owait if the caps give it back). Returns how many. */
static size_t take_held(lf_plan *p, step_fill *f, uint64_t lim, int heavy, int all_due,
                        size_t max, uint64_t *cmax)
{
    size_t k = 0, kept = 0;
    for (size_t i = 0; i < p->no; i++) {
        uint32_t s = p->oidx[i], pos = p->owait[i];
        if (k < max && (lfp_cost(p, s) > lim) == heavy && (all_due || pos <= p->emitted)) {
            take(p, s, pos, 1, f);
            if (lfp_cost(p, s) > *cmax) *cmax = lfp_cost(p, s);
            k++;
            continue;
        }
        p->oidx[kept] = s;
        p->owait[kept++] = p->owait[i];
    }
    p->no = kept;
    p->nout = k;
    return k;
}

/* Bounded (the default, pad). An outlier that costs at most bound x B /
 * group (lf_plan_bound_cost) goes out once as many samples were placed as
 * come before it in the order (the window reads four steps' worth or more
 * ahead, so going out as it is read bunched them at the epoch's start; a
 * due step from the ordinary samples' cost ran ahead of the steps, which
 * carry the outliers' cost too), with up to a group of such, in the order
 * they came, so they are spread through the epoch's samples as evenly as
 * the order spreads them: the step's budget is the
 * group times the costliest released, at least B, so every rank can reach
 * that level (one outlier a rank, the others filled with ordinary samples),
 * and no more: within the bound. (A group waited for made steps of B +
 * group x the costliest: 2.1x the median step's tokens on 1M synthetic
 * samples.) A costlier (heavy) outlier cannot be balanced within the
 * bound: once a group of them is due they go out together, in a step of
 * the group times the costliest (not B more, as unbounded: a group of
 * similar outliers fills the ranks alike), as few steps over the bound as
 * there can be and by as little (start-up says which flag fixes it); once the order is used up, the heavy ones left go at once,
 * while the window still has ordinary samples to fill the other ranks
 * with, the last group taking a remainder smaller than a group (as
 * last_group does). Outliers dense enough to outlast the ordinary samples
 * made a last step of 62 for 64 ranks: once the window is empty too, the
 * others go, due or not, and a remainder joins the last group as well. Both stay below STEP_COST_LIMIT: check_outlier_steps. */
static void release_bounded(lf_plan *p, step_fill *f)
{
    uint64_t g = p->prm.outlier_group, cmax = 0;
    uint64_t lim = (uint64_t)((lfp_u128)p->prm.step_budget * p->prm.step_bound / 1000 / g);
    int exhausted = !lfp_order_more(p);
    size_t heavy = 0;                    /* heavy ones due */
    uint64_t hmax = 0;
    for (size_t i = 0; i < p->no; i++) {
        uint64_t c = lfp_cost(p, p->oidx[i]);
        if (c <= lim || (!exhausted && p->owait[i] > p->emitted)) continue;
        heavy++;
        if (c > hmax) hmax = c;
    }
    int is_heavy = heavy >= g || (exhausted && heavy);
    int dry = exhausted && p->np == 0;   /* no ordinary sample left */
    size_t have = is_heavy ? heavy : p->no - heavy, k = have < g ? have : g;
    if (dry && have - k < g &&
        (lfp_u128)(is_heavy ? hmax : lim) * have + p->prm.step_budget <= STEP_COST_LIMIT)
        k = have;                        /* the last: a remainder joins the group */
    k = take_held(p, f, lim, is_heavy, exhausted, k, &cmax);
    if (is_heavy && exhausted && k == have && p->no && k < g) {
        /* the last heavy ones: the light ones held fill their group, or
         * they could end the epoch in a step of their own */
        size_t heavy_k = k;
        k = heavy_k + take_held(p, f, lim, 0, 1, g - heavy_k, &cmax);
        p->nout = k;
    }
    uint64_t level = cmax * (k > g ? k : g);
    if (level > f->budget) f->budget = level;
    if (exhausted) {
        /* the epoch's last steps share what is left, outliers and all, as
         * tail_budget does once they are out: a window spent by outlier
         * steps left 1.86 budgets for a last step of its own */
        lfp_u128 r = f->cost;
        for (size_t i = 0; i < p->np; i++) r += lfp_cost(p, p->pidx[i]);
        for (size_t i = 0; i < p->no; i++) r += lfp_cost(p, p->oidx[i]);
        uint64_t share = tail_share(p, r);
        if (share > f->budget) f->budget = share;
    }
}

/* Releases a group of held outliers; sets the step's budget: a normal
 * step's plus room to bring every rank to the costliest outlier's level, so
 * the split has small samples to even the ranks out with. In pack mode the
 * room is whole rows: the outliers' tokens rounded up to world rows, and a
 * row more a rank. */
static void release_outliers(lf_plan *p, step_fill *f)
{
    uint64_t g = p->prm.outlier_group;
    int exhausted = !lfp_order_more(p);
    f->budget = step_level(p);
    f->tok_cap = p->rows * p->prm.seq_len;
    if (bounded(&p->prm)) {
        release_bounded(p, f);
        return;
    }
    if (p->no == 0 || (p->no < g && !exhausted)) return;
    size_t k = p->no < g ? p->no : g;
    if (exhausted && k < p->no) k = last_group(p, k);
    uint64_t cmax = 0, tok = 0;
    lfp_i128 drift = 0;          /* pack: Σ outlier cost - the price of their tokens */
    for (size_t i = 0; i < k; i++) {
        uint32_t s = p->oidx[i];
        take(p, s, p->owait[i], 1, f);
        if (lfp_cost(p, s) > cmax) cmax = lfp_cost(p, s);
        tok += lfp_len(p, s);
        drift += (lfp_i128)((lfp_u128)lfp_cost(p, s) << PRICE_SHIFT) -
                 (lfp_i128)(lfp_len(p, s) * p->price);
    }
    memmove(p->oidx, p->oidx + k, (p->no - k) * sizeof(uint32_t));
    memmove(p->owait, p->owait + k, (p->no - k) * sizeof(uint32_t));
    p->no -= k;
    p->nout = k;
    uint64_t group_rows = p->prm.world * (uint64_t)p->prm.seq_len;
    uint64_t more = p->rows ? ((tok + group_rows - 1) / group_rows + 1) * group_rows : 0;
    uint64_t grow;
    if (k == g && rows_growth(p, f->budget, more, drift, &grow)) {
        f->budget += grow;
        f->tok_cap += more;
    } else if (p->rows) {
        /* a last, partial group (or no rows to be had): as in pad, every
         * rank up to the level of its share of the outliers at the
         * costliest's cost, rows left to layout. This and pad's growth stay
         * within STEP_COST_LIMIT: lf_plan_create checks (check_outlier_steps) */
        uint64_t w = p->prm.world;
        f->budget += cmax * w * ((k + w - 1) / w);
        f->tok_cap = 0;
    } else {
        f->budget += cmax * (k > g ? k : g);
        f->tok_cap = 0;
    }
}

/* Steps pending entry i is behind its due step: the step a plan taking the
 * order strictly in sequence, budget by budget, would have placed it in. */
static uint32_t lateness(const lf_plan *p, size_t i)
{
    return p->step > p->page[i] ? (uint32_t)(p->step - p->page[i]) : 0;
}

/* The scan stops once the step is this full (1 - 2^-11, 99.95%): looking
 * further only finds tiny samples and passes over every sample on the way. */
#define FULL_SHIFT 11

/* Whether sample s fits the step's budget (and, in pack, its rows). */
static int fits_step(const lf_plan *p, const step_fill *f, uint32_t s)
{
    return f->cost + lfp_cost(p, s) <= f->budget &&
           (!f->tok_cap || f->tok + lfp_len(p, s) <= f->tok_cap);
}

/* ... and, the step composed for the world, a bin with room. */
static int fits(const lf_plan *p, const step_fill *f, uint32_t s)
{
    return fits_step(p, f, s) && (!p->bin_cap || bin_for(p, lfp_cost(p, s)) != NO_BIN);
}

/* Where a step with this cost and these tokens stands against its course
 * (Q32 cost units): 0 on course, < 0 below it, > 0 above. Its drift is
 * cost - price * tokens (less the excess an outlier step ends with); the
 * rest of the step must bring it back to 0 with the tokens left. Light
 * samples pull it down, at most by (price - leanest price) a token; only
 * long samples push it up, at most as much as the longest that fit (up to
 * the richest sample's length) would. On course is between half the pull
 * and minus the push, give or take 2^-12 of the budget, so the heavy
 * samples come early and the light ones finish the step. */
static lfp_i128 course(const lf_plan *p, const step_fill *f, uint64_t cost, uint64_t tok)
{
    lfp_i128 drift = (lfp_i128)((lfp_u128)cost << PRICE_SHIFT) - (lfp_i128)(tok * p->price) -
                     f->excess;
    uint64_t left = f->tok_goal > tok ? f->tok_goal - tok : 0;
    lfp_i128 pull = (lfp_i128)left * (lfp_i128)(p->price - p->lean_q);
    uint64_t m = left / 2 < p->rich_l ? left / 2 : p->rich_l;   /* the longest that fit */
    lfp_u128 rich = m ? ((lfp_u128)lf_plan_cost(&p->prm.cost, m) << PRICE_SHIFT) / m : 0;
    lfp_i128 push = m ? (lfp_i128)(rich * left) - (lfp_i128)(left * p->price) : 0;
    lfp_i128 tol = (lfp_i128)(((lfp_u128)f->budget << PRICE_SHIFT) >> (FULL_SHIFT + 1));
    lfp_i128 lo = -push - tol, hi = pull / 2 + tol;
    if (drift < lo) return drift - lo;
    if (drift > hi) return drift - hi;
    return 0;
}

/* pack: whether taking s keeps the step on course to fill its budget and
 * its rows together, or at least moves its drift back towards it. */
static int on_course(const lf_plan *p, const step_fill *f, uint32_t s)
{
    if (!f->tok_cap) return 1;
    lfp_i128 after = course(p, f, f->cost + lfp_cost(p, s), f->tok + lfp_len(p, s));
    lfp_u128 c = (lfp_u128)lfp_cost(p, s) << PRICE_SHIFT, t = lfp_len(p, s) * p->price;
    return after == 0 || (after < 0 ? c > t : c < t);
}

static int step_full(const step_fill *f, uint64_t enough)
{
    if (f->cost < enough) return 0;
    return !f->tok_cap || f->tok >= f->tok_goal - (f->tok_goal >> FULL_SHIFT);
}

/* Gives back what bins_scan took (late samples and outliers stay). */
static void bins_undo(lf_plan *p, step_fill *f)
{
    size_t kept = 0;
    for (size_t i = 0; i < p->ns; i++) {
        uint32_t s = p->sidx[i];
        if (p->swin[i] != NO_BIN) {
            p->ptaken[p->swin[i]] = 0;
            f->cost -= lfp_cost(p, s);
            f->tok -= lfp_len(p, s);
            continue;
        }
        p->sidx[kept] = s;
        p->sdelay[kept] = p->sdelay[i];
        p->sfrom_o[kept] = p->sfrom_o[i];
        p->swin[kept++] = NO_BIN;
    }
    p->ns = kept;
}

/* The window in order: each entry not taken, of cost min_cost or more,
 * into its bin where one has room, until every bin is full. */
static void bins_scan(lf_plan *p, step_fill *f, uint64_t min_cost)
{
    for (size_t i = 0; i < p->np && p->bins_short; i++) {
        uint32_t s = p->pidx[i];
        if (p->ptaken[i] || lfp_cost(p, s) < min_cost || !fits(p, f, s)) continue;
        take(p, s, lateness(p, i), 0, f);
        p->ptaken[i] = 1;
        p->swin[p->ns - 1] = (uint32_t)i;
    }
}

/* The bins' costliest; their sum and their cheapest where asked. */
static uint64_t bins_max(const lf_plan *p, uint64_t *sum, uint64_t *low)
{
    uint64_t max = 0, t = 0, min = UINT64_MAX;
    for (uint32_t b = 0; b < p->prm.world; b++) {
        t += p->bin[b];
        if (p->bin[b] > max) max = p->bin[b];
        if (p->bin[b] < min) min = p->bin[b];
    }
    if (sum) *sum = t;
    if (low) *low = min;
    return max;
}

/* Whether the bins now are more even (their costliest over their sum
 * lower) than max over sum, compared exactly. */
static int bins_more_even(const lf_plan *p, uint64_t max, uint64_t sum)
{
    uint64_t t, m = bins_max(p, &t, NULL);
    return (lfp_u128)m * sum < (lfp_u128)max * t;
}

/* Heavy samples, for a step of whole pieces: a cost of 1 / HEAVY_DIV of a
 * bin or more. */
#define HEAVY_DIV 8u

/* A step composed for the world. The bins are filled from the window; where
 * they cannot all be filled (the window has not the short samples to: on
 * dev-text cut at 2048, 4 a rank, late in the epoch a bin holds three whole
 * pieces, 0.88 of its share, a fourth does not fit, and the bins with a few
 * short samples more are up to 14 % over the others), the step is made
 * again of heavy samples alone, each bin up to the emptiest's level (three
 * pieces a bin: even), and kept if its bins are more even and it costs
 * least or more (see select_world); else it is made again, the window
 * taken in its order (on dev-text's cells at 4 a rank this did better than
 * heavy samples first again: p99 1.093 against 1.231 unsplit at world 8).
 * The short samples passed over wait in the window for a step they fill
 * evenly (or go first once max_defer steps late, as any). */
static void fill_bins(lf_plan *p, step_fill *f, uint64_t least)
{
    uint64_t cap = p->bin_cap, low, sum;
    bins_scan(p, f, cap / HEAVY_DIV);
    bins_scan(p, f, 0);
    if (!p->bins_short) return;
    uint64_t max = bins_max(p, &sum, &low);
    if (low == 0 || (lfp_u128)low * p->prm.world < least) return;
    bins_undo(p, f);
    bins_fill(p, low);
    bins_scan(p, f, low / HEAVY_DIV);
    if (bins_more_even(p, max, sum)) return;
    bins_undo(p, f);
    bins_fill(p, cap);
    bins_scan(p, f, 0);
}

/* A step composed for the world costs at least its budget less
 * 1 / WORLD_SHORT_DIV of it, or is selected as by default: steps of whole
 * pieces alone (0.88 of the budget on dev-text cut at 2048, 4 a rank)
 * made the median step smaller, so full steps stood 1.256x its tokens,
 * over step_bound's 1.25; and the plan fell behind the due steps (each
 * step short of the budget its due position counts), so samples waited up
 * to 22 steps, far past max_defer. Measured on dev-text's pad cells
 * (balancer/README.md, "Selection for the world"): 1/32 still let the plan
 * fall behind (a delay of 5 at 2048, world 8, 4 a rank), 1/1024 (a bin's
 * tolerance) lost the one cell the selection meets that the default
 * misses (2048, world 8, 16 a rank: p99 1.00605). */
#define WORLD_SHORT_DIV 128u

/* Composes the step for the world; returns 0 where it is selected as by
 * default instead: where the bins took nothing (a sample costlier than a
 * bin, outlier_cost set above budget / world, fits none: else the window
 * would fill for good), or cost less than the budget allows (above). */
static int select_world(lf_plan *p, step_fill *f)
{
    uint64_t least = f->budget - f->budget / WORLD_SHORT_DIV;
    fill_bins(p, f, least);
    if (!p->np || (p->ns && f->cost >= least)) return 1;
    bins_undo(p, f);
    p->bin_cap = 0;
    return 0;
}

/* ---- steps of whole pieces (select WORLD on text cut into pieces) ---------
 *
 * Text cut into pieces is mostly whole pieces of one length (dev-text cut
 * at 2048: 85 % of the cost), and a document's last piece, its short end,
 * is one of about one a bin. A step that mixes them is even only where
 * each bin's short ends make up the same part of a piece to within 2^-9 of
 * a bin (14 tokens at 2048, 4 a rank): they cannot, so the split's floor
 * for those steps is 1.03-1.17 (balancer/README.md, "Steps of whole
 * pieces"). Kept apart they are even: a step of world x k whole pieces is
 * k a bin, exactly; a step of short ends alone holds 6-30 of them a bin,
 * which the split evens out as it does many small samples. So where whole
 * pieces (the longest placeable length) hold at least 1/WHOLE_SHARE_DIV of
 * the cost, every step costs the same level, world x k pieces, with k the
 * whole pieces a bin nearest to budget / world (the budget moves to it: off
 * where that is more than 1/LEVEL_MOVE_DIV of the budget), and is one of:
 *  - whole pieces, world x k of them in window order, or
 *  - short ends (every other sample), in window order, first fit up to the
 *    level;
 * which one is the kind of the oldest pending sample (the other where the
 * window has not a step of it), so the oldest goes in nearly every step
 * and each kind keeps to its due course (the due steps count the level).
 * Once the order is used up, full steps of whole pieces go on while there
 * are enough; the pieces over them are dealt over the steps of short ends
 * left, which share the rest (within TAIL_MOST of the level; the last
 * takes all). In pack a whole piece is a full row (pieces are cut at
 * seq_len): a step of them is k full rows a rank (kinds_rows), and pack's
 * outlier cost, which made a row's piece an outlier, is raised to a rank's
 * share, as pad's. */
#define WHOLE_SHARE_DIV 2u
#define LEVEL_MOVE_DIV 4u
#define TAIL_MOST_NUM 9u
#define TAIL_MOST_DEN 8u

/* Works out the level once (at the first epoch's start); it goes into the
 * plan's hash, so a state saved without it is refused. */
static void world_level(lf_plan *p)
{
    const lf_plan_params *q = &p->prm;
    p->level_known = 1;
    p->level = 0;
    if (!world_select(q) || q->rank_max_tokens || q->rank_max_padded) return;
    /* pack: its outliers start lower (a sample's excess, Pack: full rows),
     * so a whole row's piece is one; with steps of whole pieces it is not
     * (a step of them is even, rows and all): a rank's share, as in pad */
    uint64_t longest = 0, lim = q->outlier_cost, share = q->step_budget / q->world;
    if (p->rows && share > lim) lim = share;
    lfp_u128 whole = 0, all = 0;
    LFP_SCAN(q, i, p->n) {
        uint64_t c = lfp_cost(p, i), len = lfp_len(p, i);
        if (lfp_capfail(p, i) || c > lim) continue;
        all += c;
        if (len > longest) longest = len, whole = 0;
        if (len == longest) whole += c;
    }
    uint64_t cp = longest ? lfp_coster_cost(&p->coster, longest) : 0, w = q->world;
    if (!cp || whole * WHOLE_SHARE_DIV < all) return;
    lfp_u128 piece_w = (lfp_u128)cp * w, k = (q->step_budget + piece_w / 2) / piece_w;
    if (k == 0) k = 1;
    lfp_u128 level = k * piece_w, b = q->step_budget;
    if ((level > b ? level - b : b - level) > b / LEVEL_MOVE_DIV) return;
    p->level = (uint64_t)level;
    p->piece_len = longest;
    p->piece_cost = cp;
    p->piece_k = (uint32_t)k;
    p->prm.outlier_cost = lim;
    p->hash = hash_step(p->hash, p->level ^ (uint64_t)0x77686f6c65 << 40);
    if (p->hash_v1) p->hash_v1 = hash_step(p->hash_v1, p->level ^ (uint64_t)0x77686f6c65 << 40);
}

static int is_whole(const lf_plan *p, uint32_t s)
{
    return lfp_len(p, s) == p->piece_len;
}

/* Takes up to n whole pieces not yet taken, in window order. */
static void take_whole(lf_plan *p, step_fill *f, uint64_t n)
{
    for (size_t i = 0; i < p->np && n; i++) {
        if (p->ptaken[i] || !is_whole(p, p->pidx[i])) continue;
        take(p, p->pidx[i], lateness(p, i), 0, f);
        p->ptaken[i] = 1;
        n--;
    }
}

/* Takes short ends (every sample but whole pieces) not yet taken, in window
 * order, each that fits the budget, until the step costs enough. */
static void take_ends(lf_plan *p, step_fill *f, uint64_t enough)
{
    for (size_t i = 0; i < p->np && f->cost < enough; i++) {
        uint32_t s = p->pidx[i];
        if (p->ptaken[i] || is_whole(p, s) || !fits_step(p, f, s)) continue;
        take(p, s, lateness(p, i), 0, f);
        p->ptaken[i] = 1;
    }
}

/* pack: a step of whole pieces or of short ends gets its rows: k a rank
 * for k whole pieces a rank (full), else the rows a rank its tokens need
 * and a row more, so the split can pack every sample (as pack's tail). */
static void kinds_rows(lf_plan *p)
{
    if (!p->rows) return;
    uint64_t w = p->prm.world, row = p->prm.seq_len, tok = 0, whole = 0;
    for (size_t j = 0; j < p->ns; j++) {
        tok += lfp_len(p, p->sidx[j]);
        whole += is_whole(p, p->sidx[j]);
    }
    uint64_t per = whole == p->ns && whole % w == 0 ? whole / w : (tok + w * row - 1) / (w * row) + 1;
    p->tok_cap = per * w * row;
}

/* A step of whole pieces or of short ends (above). Returns 0 where it is
 * selected as by default instead (the window has not a step of either
 * kind: before the order is used up, rare), 2 where it is the epoch's last
 * (it takes everything left), else 1. */
static int select_kinds(lf_plan *p, step_fill *f)
{
    uint64_t wk = (uint64_t)p->prm.world * p->piece_k, cp = p->piece_cost, level = p->level;
    uint64_t whole = 0;
    lfp_u128 ends = 0;
    int oldest = -1;             /* the oldest pending sample's kind */
    for (size_t i = 0; i < p->np; i++) {
        if (p->ptaken[i]) continue;
        int w = is_whole(p, p->pidx[i]);
        if (oldest < 0) oldest = w;
        if (w) whole++;
        else ends += lfp_cost(p, p->pidx[i]);
    }
    if (oldest < 0) return 0;
    f->budget = p->cur.budget = level;   /* not the default's tail share */
    f->tok_cap = 0;                      /* pack: its rows are set after (kinds_rows) */
    uint64_t enough = level - (level >> FULL_SHIFT);
    if (lfp_order_more(p)) {
        /* the other kind where the window has not a step of the oldest's */
        if (oldest ? whole < wk : ends < enough) oldest = !oldest;
        if (oldest ? whole < wk : ends < enough) return 0;
        if (oldest) take_whole(p, f, wk);
        else take_ends(p, f, enough);
        return 1;
    }
    /* the order used up: full steps of whole pieces while there are; the
     * pieces over them (fewer than a step) and the short ends share m steps */
    uint64_t full = whole / wk, over = whole % wk;
    lfp_u128 rest = ends + (lfp_u128)over * cp, m = (rest + level / 2) / level;
    if (rest && m < 1) m = 1;
    while (rest * TAIL_MOST_DEN > m * level * TAIL_MOST_NUM) m++;
    if (full + m <= 1) return 2;
    if (full && (oldest || m == 0)) {
        take_whole(p, f, wk);
        return 1;
    }
    uint64_t share = (uint64_t)((rest + m - 1) / m);
    f->budget = p->cur.budget = share;
    take_whole(p, f, (uint64_t)((over + m - 1) / m));
    take_ends(p, f, m == 1 ? share : share - (share >> FULL_SHIFT));   /* the last: all */
    return 1;
}

/* Takes the pending samples max_defer or more steps past due, first, where
 * they fit the budget (composed for the world, whether or not a bin has
 * room: bin_put puts one into the emptiest, else it could wait for good);
 * sets due_floor to the earliest due step of those left. Returns
 * one past the last entry taken (0: none). */
static size_t take_late(lf_plan *p, step_fill *f)
{
    size_t end = 0;
    uint32_t floor = UINT32_MAX;
    for (size_t i = 0; i < p->np; i++) {
        uint32_t s = p->pidx[i];
        if (lateness(p, i) >= p->prm.max_defer && fits_step(p, f, s)) {
            take(p, s, lateness(p, i), 0, f);
            p->ptaken[i] = 1;
            end = i + 1;
        } else if (p->page[i] < floor) {
            floor = p->page[i];
        }
    }
    p->due_floor = floor;
    return end;
}

/* The tail. Once the order is used up and no outlier is held, what is left
 * is the pending window (about lookahead samples, four steps' worth or
 * more), and its cost R is known. Filling budget after budget would end the
 * epoch in a step of whatever is left, from one sample to a whole budget:
 * a step of tokens a trainer cannot rely on, and (fewer samples than ranks)
 * ranks with nothing, which hangs a DDP all-reduce. Instead the steps left
 * share R:
 *  - pad: k = R ÷ B steps (rounded down, at least 1), each ⌈R ÷ k⌉: never
 *    below B, so no sample that is not an outlier costs more than a rank's
 *    share, as in every other step, and at most (k + 1) ÷ k of it (1.25 B
 *    with four budgets or more in the window);
 *  - pack buys whole rows a rank, so its steps stay at B; the last takes
 *    what is left (from B to 2 B) with the whole rows a rank its tokens
 *    need (shared out over steps of one row a rank, the rest would pad the
 *    rows; the whole epoch pads a little more than when it ended in a step
 *    of a twentieth of B: 2.0 % against 1.35 %, lf-plan --synth 12000,
 *    world 8);
 *  - with k = 1 the step takes everything left.
 * Computed afresh each step from the window alone, so a restored plan finds
 * the same budgets. Returns 1 on the epoch's last step. */
static int tail_budget(lf_plan *p, step_fill *f)
{
    if (lfp_order_more(p) || p->no || p->nout) return 0;
    lfp_u128 r = 0;
    uint64_t tok = 0;
    for (size_t i = 0; i < p->np; i++) {
        r += lfp_cost(p, p->pidx[i]);
        tok += lfp_len(p, p->pidx[i]);
    }
    lfp_u128 k = r / step_level(p);
    if (r == 0 || r > STEP_COST_LIMIT) return 0;
    if (p->rows && k > 1) return 0;
    f->budget = tail_share(p, r);
    int last = tail_bounded(&p->prm) ? f->budget >= r : k <= 1;   /* the share takes it all */
    if (p->rows) {
        /* pack: the whole rows a rank its share of the tokens needs, and
         * a row more a rank, so the split can pack every sample (with no
         * spare row, best-fit's gaps left a few samples for a step of
         * their own: 4 samples for 8 ranks on real text split at 2048);
         * the last step, all of them */
        uint64_t world_rows = (uint64_t)p->prm.world * p->prm.seq_len;
        uint64_t share = last ? tok : (uint64_t)(((lfp_u128)tok * f->budget + r - 1) / r);
        f->tok_cap = ((share + world_rows - 1) / world_rows + 1) * world_rows;
    }
    return last;
}

/* Takes every pending entry not yet taken: the epoch's last step (in
 * pack, its rows hold them: tail_budget counted their tokens). */
static void take_rest(lf_plan *p)
{
    step_fill ignore = {0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < p->np; i++) {
        if (p->ptaken[i]) continue;
        take(p, p->pidx[i], lateness(p, i), 0, &ignore);
        p->ptaken[i] = 1;
    }
}

/* Bounded: an outlier step that ends the order and the held outliers has
 * a budget of many budgets: what the window has left after it may be less than a
 * budget, or than a sample a rank, and a tail step of that leaves ranks
 * empty (whole documents at 64 ranks: one sample). It joins this step. */
static int rest_too_small(const lf_plan *p)
{
    if (!bounded(&p->prm) || !p->nout || lfp_order_more(p) || p->no) return 0;
    uint64_t cost = 0, count = 0;
    for (size_t i = 0; i < p->np; i++) {
        if (p->ptaken[i]) continue;
        cost += lfp_cost(p, p->pidx[i]);
        if (++count >= p->prm.world && cost >= step_level(p)) return 0;
    }
    return 1;
}

static void select_balanced(lf_plan *p)
{
    step_fill f = {0, 0, 0, 0, 0, 0};
    p->bin_cap = 0;
    refill_window(p);
    release_outliers(p, &f);
    int kinds = p->level && !p->nout && !p->no, got = 0;   /* steps of whole pieces */
    int last = kinds ? 0 : tail_budget(p, &f);
    bins_open(p, f.budget);
    p->cur.budget = f.budget;
    p->cur.flags = p->nout ? LF_PLAN_STEP_OUTLIERS : 0;
    if (f.tok_cap) {
        lfp_u128 buys = ((lfp_u128)f.budget << PRICE_SHIFT) / p->price;
        f.tok_goal = buys < f.tok_cap ? (uint64_t)buys : f.tok_cap;
        f.excess = (lfp_i128)((lfp_u128)f.budget << PRICE_SHIFT) -
                   (lfp_i128)(f.tok_goal * p->price);
    }
    p->tok_cap = f.tok_cap;
    memset(p->ptaken, 0, p->np);
    size_t end = 0;                      /* entries from here on are not taken */
    if (kinds && (got = select_kinds(p, &f)) != 0) {
        end = p->np;
        if ((last = got == 2) != 0) take_rest(p);
        kinds_rows(p);
    } else if (p->step >= p->prm.max_defer && p->due_floor <= p->step - p->prm.max_defer) {
        end = take_late(p, &f);
    }
    uint64_t enough = f.budget - (f.budget >> FULL_SHIFT);
    size_t i = 0;
    if (got) i = p->np;
    if (p->bin_cap && select_world(p, &f)) i = p->np;
    for (; i < p->np && !step_full(&f, enough); i++) {
        uint32_t s = p->pidx[i];
        if (!p->ptaken[i] && fits(p, &f, s) && on_course(p, &f, s)) {
            take(p, s, lateness(p, i), 0, &f);
            p->ptaken[i] = 1;
        }
    }
    if (i > end) end = i;
    /* off course to the end: what still fits fills the step anyway */
    for (i = 0; f.tok_cap && i < p->np && !step_full(&f, enough); i++) {
        uint32_t s = p->pidx[i];
        if (!p->ptaken[i] && fits(p, &f, s)) {
            take(p, s, lateness(p, i), 0, &f);
            p->ptaken[i] = 1;
        }
    }
    if (i > end) end = i;
    if (last || rest_too_small(p)) {
        take_rest(p);
        end = p->np;
    }
    size_t kept = 0;
    for (i = 0; i < end; i++) {
        if (p->ptaken[i]) continue;
        p->pidx[kept] = p->pidx[i];
        p->page[kept++] = p->page[i];
    }
    memmove(p->pidx + kept, p->pidx + end, (p->np - end) * sizeof(uint32_t));
    memmove(p->page + kept, p->page + end, (p->np - end) * sizeof(uint32_t));
    p->np = kept + (p->np - end);
    for (i = 0; i < p->no && !bounded(&p->prm); i++) p->owait[i]++;
}

/* Puts a sample the caps left out back where it came from, at the front:
 * an outlier has waited one more step; a pending sample keeps its due step
 * (the current step, if it was taken early). */
static void give_back(lf_plan *p, uint32_t s, uint32_t delay, int from_o)
{
    uint32_t *idx = from_o ? p->oidx : p->pidx, *age = from_o ? p->owait : p->page;
    size_t *cnt = from_o ? &p->no : &p->np;
    memmove(idx + 1, idx, *cnt * sizeof(uint32_t));
    memmove(age + 1, age, *cnt * sizeof(uint32_t));
    idx[0] = s;
    age[0] = !from_o ? (uint32_t)(p->step - delay) : bounded(&p->prm) ? delay : delay + 1;
    if (!from_o && age[0] < p->due_floor) p->due_floor = age[0];
    (*cnt)++;
}

/* ---- baselines ------------------------------------------------------------ */

/* A global batch of world x batch_per_rank; where fewer than world samples
 * would be left after it, it takes them too (its first ranks one more), so
 * no step leaves a rank without a batch: a DDP rank with none would never
 * join its peers' all-reduce. DistributedSampler repeats samples to fill the
 * last batch instead; here every sample stays once an epoch. */
static void select_fixed(lf_plan *p)
{
    step_fill f = {0, 0, 0, 0, 0, 0};
    size_t global = (size_t)p->prm.world * p->prm.batch_per_rank;
    size_t left = lfp_order_left(p, global + p->prm.world);
    if (left < global + p->prm.world) global = left;
    p->cur.budget = p->prm.step_budget;
    p->cur.flags = 0;
    while (p->ns < global && lfp_order_more(p)) take(p, lfp_order_next(p), 0, 0, &f);
}

/* Baselines: consecutive equal shares, the first ranks one more if short. */
static void split_fixed(lf_plan *p)
{
    uint32_t w = p->prm.world;
    size_t base = p->ns / w, extra = p->ns % w, at = 0;
    for (uint32_t r = 0; r < w; r++) {
        size_t m = base + (r < extra);
        for (size_t i = 0; i < m; i++) p->split.assign[at++] = r;
    }
}

/* ---- the step ------------------------------------------------------------- */

/* A rank's cost: c, its samples' (at most a step's, 2^63), plus d per
 * micro-batch of the m lengths in b_lens: pad, their micro-batch cuts;
 * pack, their rows (the counts lf_plan_rank_batch lays out). d may be 2^52
 * and a rank may have thousands of micro-batches, so the product is taken
 * in 128 bits and the cost saturates at UINT64_MAX (a plan that stays
 * below is the one the 64-bit sum gave; above, the sum wrapped). */
static uint64_t with_overhead(lf_plan *p, size_t m, uint64_t c)
{
    for (size_t i = 1; i < m; i++) {   /* insertion sort, longest first */
        uint64_t v = p->b_lens[i];
        size_t j = i;
        for (; j > 0 && p->b_lens[j - 1] < v; j--) p->b_lens[j] = p->b_lens[j - 1];
        p->b_lens[j] = v;
    }
    uint32_t count = 0;
    if (m && p->prm.layout == LF_PLAN_PAD)
        count = lfp_micro_cut(p->b_lens, m, p->prm.micro_max_padded, p->prm.micro_overhead,
                              p->b_best, p->b_cut, p->b_micro_start);
    else if (m)
        count = lfp_pack_rows(p->b_lens, m, p->prm.seq_len, p->b_room, NULL);
    lfp_u128 cost = (lfp_u128)p->prm.cost.d * count + c;
    return cost > UINT64_MAX ? UINT64_MAX : (uint64_t)cost;
}

/* Rank r's cost, overhead included, from its samples' cost c. */
static uint64_t rank_total(lf_plan *p, uint32_t r, uint64_t c)
{
    if (p->prm.cost.d == 0) return c;
    size_t m = 0;
    for (uint32_t i = p->rank_start[r]; i < p->rank_start[r + 1]; i++)
        p->b_lens[m++] = lfp_len(p, p->rank_idx[i]);
    return with_overhead(p, m, c);
}

/* Sets each rank's offset to its overhead under the split's current
 * assignment (saturated, so the split's rank sums stay within 64 bits) and
 * returns the costliest rank's cost, overhead included. */
static uint64_t true_max(lf_plan *p, const lfp_items *it)
{
    lfp_split *s = &p->split;
    uint64_t max = 0;
    for (uint32_t r = 0; r < s->world; r++) {
        size_t m = 0;
        uint64_t c = 0;
        for (uint32_t i = s->rank_start[r]; i < s->rank_start[r + 1]; i++) {
            p->b_lens[m++] = it->len[s->members[i]];
            c += it->cost[s->members[i]];
        }
        uint64_t cost = with_overhead(p, m, c);
        s->offset[r] = cost - c;
        if (cost > max) max = cost;
    }
    return max;
}

/* With d > 0 a rank's cost holds d per micro-batch (pad) or row (pack),
 * which depends on the whole rank, while the split balances the samples'
 * cost alone. Each round takes each rank's overhead as a fixed offset and
 * searches again; a move changes the counts, so the offsets go stale and a
 * round can make things worse: a round is kept only if it lowers the
 * costliest rank's true cost, else the last kept assignment is restored
 * and the rounds stop. (After a restore only assign is current; the
 * split's per-rank totals are not read again before the next split.) */
#define OVERHEAD_ROUNDS 3

static void balance_overhead(lf_plan *p, const lfp_items *it, const lfp_caps *caps)
{
    lfp_split *s = &p->split;
    if (p->prm.cost.d == 0) return;
    uint64_t best = true_max(p, it);
    for (int round = 0; round < OVERHEAD_ROUNDS; round++) {
        memcpy(p->keep_assign, s->assign, it->n * sizeof(uint32_t));
        lfp_split_polish(s, it, caps);
        uint64_t now = true_max(p, it);
        if (now >= best) {
            memcpy(s->assign, p->keep_assign, it->n * sizeof(uint32_t));
            return;
        }
        best = now;
    }
}

/* pack: KK places the outliers (the costliest items) and as many more, at
 * least: eight outliers a rank are what KK evens out (README.md), and the
 * next as many even out what they leave */
#define KK_OUTLIERS 2u

/* Compacts the step, giving back the items the caps left unplaced. */
static void give_back_unplaced(lf_plan *p)
{
    /* the last first, so they return to the window in their original order */
    for (size_t i = p->ns; i-- > 0;)
        if (p->split.assign[i] == UINT32_MAX) give_back(p, p->sidx[i], p->sdelay[i], p->sfrom_o[i]);
    size_t kept = 0;
    for (size_t i = 0; i < p->ns; i++) {
        if (p->split.assign[i] == UINT32_MAX) { p->nout -= p->sfrom_o[i]; continue; }
        p->sidx[kept] = p->sidx[i];
        p->sdelay[kept] = p->sdelay[i];
        p->sfrom_o[kept] = p->sfrom_o[i];
        p->split.assign[kept++] = p->split.assign[i];
    }
    p->ns = kept;
}

/* A rank with no sample runs no backward pass, and its peers wait for it in
 * the all-reduce: every rank gets a sample while the step has one for each.
 * An empty rank takes the cheapest sample (ties: smaller id) of the rank
 * with the most samples (ties: lower rank). A lone sample fits any cap and
 * a row (create rejects those that do not), so the caps still hold. Costs
 * O(world × step) only in a step with an empty rank. */
static void fill_empty_ranks(lf_plan *p)
{
    uint32_t w = p->prm.world, *count = p->rank_start;   /* publish rewrites it */
    if (p->ns < w) return;
    memset(count, 0, w * sizeof(uint32_t));
    for (size_t i = 0; i < p->ns; i++) count[p->split.assign[i]]++;
    for (uint32_t r = 0; r < w; r++) {
        if (count[r]) continue;
        uint32_t from = 0;
        for (uint32_t q = 1; q < w; q++)
            if (count[q] > count[from]) from = q;
        size_t pick = SIZE_MAX;
        for (size_t i = 0; i < p->ns; i++) {
            if (p->split.assign[i] != from) continue;
            uint32_t s = p->sidx[i], t = pick == SIZE_MAX ? 0 : p->sidx[pick];
            if (pick == SIZE_MAX || lfp_cost(p, s) < lfp_cost(p, t) ||
                (lfp_cost(p, s) == lfp_cost(p, t) && lfp_id(p, s) < lfp_id(p, t)))
                pick = i;
        }
        p->split.assign[pick] = r;
        count[from]--;
        count[r]++;
    }
}

static int cmp_len_desc(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a < b) - (a > b);
}

/* The most padded tokens a rank holds under the split's assignment of the
 * step's items (sidx; an unplaced one, UINT32_MAX, counts nowhere): each
 * rank's lengths gathered into the split's scratch (counting by rank, in
 * its world + 1 scratch arrays), then pad, their count x their longest;
 * pack, best-fit decreasing rows x seq_len, as lay_pack lays them. */
static uint64_t padded_max(lf_plan *p)
{
    lfp_split *s = &p->split;
    uint32_t w = p->prm.world, *at = s->tmp_aux, *pos = s->tmp_ord;
    memset(at, 0, ((size_t)w + 1) * sizeof *at);
    for (size_t i = 0; i < p->ns; i++)
        if (s->assign[i] != UINT32_MAX) at[s->assign[i] + 1]++;
    for (uint32_t r = 0; r < w; r++) at[r + 1] += at[r];
    memcpy(pos, at, (size_t)w * sizeof *pos);
    for (size_t i = 0; i < p->ns; i++)
        if (s->assign[i] != UINT32_MAX) s->scratch[pos[s->assign[i]]++] = lfp_len(p, p->sidx[i]);
    uint64_t most = 0;
    for (uint32_t r = 0; r < w; r++) {
        uint64_t *lens = s->scratch + at[r], m = at[r + 1] - at[r], padded = 0;
        if (m && p->prm.layout == LF_PLAN_PACK) {
            qsort(lens, m, sizeof *lens, cmp_len_desc);
            padded = (uint64_t)lfp_pack_rows(lens, m, p->prm.seq_len, s->room, NULL) *
                     p->prm.seq_len;
        }
        for (uint64_t i = 0; m && p->prm.layout != LF_PLAN_PACK && i < m; i++)
            if (lens[i] * m > padded) padded = lens[i] * m;
        if (padded > most) most = padded;
    }
    return most;
}

/* lf_plan_cap_later: whether this step's split is over the later cap, so
 * that it must be split again under it. */
static int later_cap_binds(lf_plan *p)
{
    if (p->epoch < p->later_from) return 0;
    if (p->later_cap && padded_max(p) > p->later_cap) return 1;
    if (!p->later_samples) return 0;
    uint32_t *count = p->split.tmp_aux;       /* world + 1 scratch */
    memset(count, 0, p->prm.world * sizeof *count);
    for (size_t i = 0; i < p->ns; i++) {
        uint32_t r = p->split.assign[i];
        if (r != UINT32_MAX && ++count[r] > p->later_samples) return 1;
    }
    return 0;
}

/* select WORLD: where the step's bins are more even than the split's own
 * result (their costliest below its costliest rank), the local search goes
 * on from the bins instead (KK and LPT do not always find the split the
 * selection built). Without caps only: the bins know none. */
static void start_from_bins(lf_plan *p, const lfp_items *it, const lfp_caps *caps)
{
    lfp_split *s = &p->split;
    uint64_t split_max = 0;
    for (uint32_t r = 0; r < p->prm.world; r++)
        if (s->cost[r] > split_max) split_max = s->cost[r];
    if (bins_max(p, NULL, NULL) >= split_max) return;
    memcpy(s->assign, p->sbin, p->ns * sizeof *s->assign);
    lfp_split_polish(s, it, caps);
}

/* Splits the selected items; hands back what the caps leave out. */
static void split_step(lf_plan *p)
{
    for (size_t i = 0; i < p->ns; i++) {
        uint32_t s = p->sidx[i];
        p->item_cost[i] = lfp_cost(p, s);
        p->item_len[i] = lfp_len(p, s);
        p->item_id[i] = lfp_id(p, s);
    }
    if (p->prm.sampler != LF_PLAN_BALANCED) {
        split_fixed(p);
        return;
    }
    for (size_t i = 0; p->tok_cap && i < p->ns; i++) {
        lfp_u128 lean = (p->lean_q * p->item_len[i]) >> PRICE_SHIFT;
        p->item_excess[i] = p->item_cost[i] > lean ? p->item_cost[i] - (uint64_t)lean : 0;
        p->item_urgent[i] = p->sfrom_o[i] || p->sdelay[i] >= p->prm.max_defer;
    }
    lfp_items it = {p->ns, p->item_cost, p->item_len, p->item_id,
                    p->tok_cap ? p->item_excess : NULL, p->item_urgent,
                    p->tok_cap ? KK_OUTLIERS * p->nout : 0};
    /* pack: each rank gets its share of the step's rows, rounded up; with
     * more than one a rank, the rows best-fit decreasing needs are capped
     * too, as rank_max_padded is */
    uint64_t rows = p->tok_cap / (p->prm.seq_len ? p->prm.seq_len : 1);
    uint64_t share = (rows + p->prm.world - 1) / p->prm.world * p->prm.seq_len;
    if (p->prm.rank_max_padded && share > p->prm.rank_max_padded)
        share = p->prm.rank_max_padded / p->prm.seq_len * p->prm.seq_len;
    if (p->prm.rank_max_tokens && share > p->prm.rank_max_tokens) share = p->prm.rank_max_tokens;
    lfp_caps caps = {p->prm.rank_max_tokens, p->prm.rank_max_padded, p->prm.layout,
                     p->prm.seq_len, share, 0};
    if (share > p->prm.seq_len && (!caps.max_padded || share < caps.max_padded))
        caps.max_padded = share;
    p->cur.cap_deferred = (uint32_t)lfp_split_run(&p->split, &it, &caps);
    if (p->bin_cap && !p->cur.cap_deferred && !caps.max_tokens && !caps.max_padded)
        start_from_bins(p, &it, &caps);
    balance_overhead(p, &it, &caps);
    if (later_cap_binds(p)) { /* again, under the cap: lf_plan_cap_later */
        if (p->later_cap && (!caps.max_padded || p->later_cap < caps.max_padded))
            caps.max_padded = p->later_cap;
        caps.max_samples = p->later_samples;
        p->cur.cap_deferred = (uint32_t)lfp_split_run(&p->split, &it, &caps);
        balance_overhead(p, &it, &caps);
    }
    if (p->cur.cap_deferred) give_back_unplaced(p);
    fill_empty_ranks(p);
}

/* Lists each rank's samples in the order the split sorted the step in
 * (costliest first, ties by id), which is the layout's order (longest
 * first) whenever cost grows with length: lf_plan_rank_batch checks that
 * and sorts only if not. Valid while the split's keys index the step, that
 * is unless the caps gave samples back. */
static void sort_ranks(lf_plan *p)
{
    lfp_split *s = &p->split;
    p->sorted_ok = p->prm.sampler == LF_PLAN_BALANCED && !p->cur.cap_deferred;
    if (!p->sorted_ok) return;
    uint32_t *at = s->tmp_aux;           /* world + 1 scratch */
    memcpy(at, p->rank_start, p->prm.world * sizeof(uint32_t));
    for (size_t k = 0; k < p->ns; k++) {
        uint32_t i = s->keys[k].idx;
        p->rank_sorted[at[s->assign[i]]++] = p->sidx[i];
    }
}

/* Fills the step's output arrays from sidx and split.assign. */
static void publish(lf_plan *p)
{
    uint32_t w = p->prm.world;
    memset(p->rank_start, 0, ((size_t)w + 1) * sizeof(uint32_t));
    memset(p->rank_cost, 0, w * sizeof(uint64_t));
    memset(p->rank_tokens, 0, w * sizeof(uint64_t));
    p->cur.cost = 0;
    for (size_t i = 0; i < p->ns; i++) {
        uint32_t s = p->sidx[i], r = p->split.assign[i];
        p->sids[i] = lfp_id(p, s);
        p->rank_start[r + 1]++;
        p->rank_cost[r] += lfp_cost(p, s);
        p->rank_tokens[r] += lfp_len(p, s);
        p->cur.cost += lfp_cost(p, s);
    }
    for (uint32_t r = 0; r < w; r++) p->rank_start[r + 1] += p->rank_start[r];
    uint32_t *at = p->split.tmp_ord;     /* world + 1 scratch */
    memcpy(at, p->rank_start, w * sizeof(uint32_t));
    for (size_t i = 0; i < p->ns; i++) {
        uint32_t pos = at[p->split.assign[i]]++;
        p->rank_ids[pos] = lfp_id(p, p->sidx[i]);
        p->rank_idx[pos] = p->sidx[i];
    }
    sort_ranks(p);
    for (uint32_t r = 0; r < w; r++) p->rank_cost[r] = rank_total(p, r, p->rank_cost[r]);
    p->cur.epoch = p->epoch;
    p->cur.step = p->step;
    p->cur.world = w;
    p->cur.nsamples = (uint32_t)p->ns;
    p->cur.noutliers = (uint32_t)p->nout;
    p->cur.ids = p->sids;
    p->cur.delay = p->sdelay;
    p->cur.rank_start = p->rank_start;
    p->cur.rank_ids = p->rank_ids;
    p->cur.rank_cost = p->rank_cost;
    p->cur.rank_tokens = p->rank_tokens;
}

static int epoch_left(const lf_plan *p)
{
    return lfp_order_more(p) || p->np || p->no;
}

int lf_plan_next_step(lf_plan *p, lf_plan_step *step)
{
    if (!p || !step) return LF_PLAN_E_ARG;
    if (p->epoch_done) lfp_epoch_begin(p, p->epoch + 1);
    p->have_step = 0;
    if (!epoch_left(p)) {
        p->epoch_done = 1;
        return 0;
    }
    p->ns = p->nout = 0;
    p->cur.cap_deferred = 0;
    if (p->prm.sampler == LF_PLAN_BALANCED) select_balanced(p);
    else select_fixed(p);
    split_step(p);
    /* bounded: an outlier's delay held its place in the order; its wait
     * in steps is not kept (README.md, "Bounded steps") */
    for (size_t i = 0; bounded(&p->prm) && i < p->ns; i++)
        if (p->sfrom_o[i]) p->sdelay[i] = 0;
    if (!epoch_left(p)) p->cur.flags |= LF_PLAN_STEP_TAIL;
    publish(p);
    p->emitted += p->ns;
    p->step++;
    p->have_step = 1;
    *step = p->cur;
    return 1;
}

void lf_plan_counts_get(const lf_plan *p, lf_plan_counts *c)
{
    c->epoch = p->epoch;
    c->emitted = p->emitted;
    c->rejected = p->nrej;
    c->rejected_cap = p->ncapfail;
    /* a mixture's epoch ends where a source runs out, known as it is drawn:
     * walking the rest here would draw (and read) up to the whole epoch */
    int known = p->nsrc <= 1 || !p->mix.src[p->mix.turn].left;
    c->pending = known ? lfp_order_left(p, SIZE_MAX) + p->np + p->no : UINT64_MAX;
    c->rejected_tokens = p->capfail_tokens;
    for (size_t i = 0; i < p->nrej; i++) c->rejected_tokens += lfp_len(p, p->rej[i]);
}

size_t lf_plan_rejected_ids(const lf_plan *p, uint64_t *ids, size_t cap)
{
    size_t m = 0;
    for (size_t i = 0; i < p->nrej; i++, m++)
        if (m < cap) ids[m] = lfp_id(p, p->rej[i]);
    /* a pass over every length only where some fit no cap: at 10^9 samples
     * it read the whole mapped index.lfx, 4 GB resident, at each epoch's end */
    for (size_t s = 0; p->ncapfail && s < p->n;
         lf_plan_view_passed(&p->prm, ++s, LF_PLAN_RELEASE_SCAN)) {
        if (!lfp_capfail(p, s)) continue;
        if (m < cap) ids[m] = lfp_id(p, s);
        m++;
    }
    return m;
}

uint64_t lf_plan_step_padded(lf_plan *p)
{
    return p && p->have_step ? padded_max(p) : 0;
}

uint64_t lf_plan_cap_later(lf_plan *p, uint32_t from, uint64_t max_padded)
{
    if (!p || p->prm.sampler != LF_PLAN_BALANCED) return 0;
    uint64_t alone = p->prm.layout == LF_PLAN_PACK ? p->prm.seq_len : p->longest_fit;
    p->later_cap = max_padded > alone ? max_padded : alone;
    p->later_from = from;
    return p->later_cap;
}

uint64_t lf_plan_cap_later_samples(lf_plan *p, uint32_t from, uint64_t max_samples)
{
    if (!p || p->prm.sampler != LF_PLAN_BALANCED) return 0;
    p->later_samples = max_samples > 1 ? max_samples : 1;
    p->later_from = from;
    return p->later_samples;
}

uint64_t lf_plan_world_level(const lf_plan *p, uint64_t *piece_len, uint32_t *per_rank)
{
    if (piece_len) *piece_len = p && p->level ? p->piece_len : 0;
    if (per_rank) *per_rank = p && p->level ? p->piece_k : 0;
    return p ? p->level : 0;
}

uint64_t lf_plan_rank_samples_max(const lf_plan *p, uint64_t max_padded)
{
    uint64_t shortest = p->shortest_fit;
    uint64_t n = shortest && shortest != UINT64_MAX ? max_padded / shortest : max_padded;
    return n < p->maxstep ? n : (uint64_t)p->maxstep;
}

uint64_t lf_plan_fixed_bound(const lf_plan *p, uint64_t *longest)
{
    if (longest) *longest = p && p->prm.sampler != LF_PLAN_BALANCED ? p->longest_fit : 0;
    if (!p || p->prm.sampler == LF_PLAN_BALANCED) return 0;
    /* split_fixed: a step of maxstep samples at most, in equal shares, the
     * first ranks one more where they do not divide */
    return ((uint64_t)p->maxstep + p->prm.world - 1) / p->prm.world;
}
