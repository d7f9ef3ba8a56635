/*
 * plan_split_books.c — the split's own books, against its assignment.
 *
 * The split keeps per-rank totals (cost, tokens) and the items grouped by
 * rank (members, rank_start) up to date move by move instead of counting
 * again, and the plan reads them after the split. Random instances, pad
 * and pack, with and without caps, on 1 to 64 ranks, are split and then
 * polished with random per-rank offsets; after each, every rank's books
 * must equal what its assigned items add up to, each placed item must be
 * in its rank's group exactly once, and the count of unplaced items must
 * be the one lfp_split_run returns.
 */
#include "plan_internal.h"
#include "test.h"

#define MAXN 1200u
#define NONE UINT32_MAX
#define SEQ_LEN 2048u

static uint64_t rng_state = 7;

static uint64_t rng(void)
{
    return test_rng(&rng_state);
}

typedef struct instance {
    uint64_t cost[MAXN], len[MAXN], id[MAXN], excess[MAXN];
    uint8_t urgent[MAXN];
    lfp_items it;
    lfp_caps caps;
} instance;

/* n items, lengths 1..SEQ_LEN; pack makes the price 4 a token plus a
 * quadratic excess and fills whole rows, pad may cap tokens or padding. */
static void make_instance(instance *in, size_t n, uint32_t world, int pack)
{
    uint64_t tokens = 0;
    for (size_t i = 0; i < n; i++) {
        in->len[i] = 1 + rng() % (rng() % 4 ? SEQ_LEN / 4 : SEQ_LEN);
        in->excess[i] = in->len[i] * in->len[i] / 64;
        in->cost[i] = 4 * in->len[i] + in->excess[i];
        in->id[i] = rng() % 1000000;  /* ids may repeat: ties go by index */
        in->urgent[i] = rng() % 10 == 0;
        tokens += in->len[i];
    }
    in->it = (lfp_items){.n = n, .cost = in->cost, .len = in->len, .id = in->id,
                         .excess = pack ? in->excess : NULL,
                         .urgent = pack ? in->urgent : NULL};
    in->caps = (lfp_caps){.layout = pack ? LF_PLAN_PACK : LF_PLAN_PAD, .seq_len = SEQ_LEN};
    uint64_t share = tokens / world + 1;
    if (pack) /* whole rows, a little short of the tokens at times */
        in->caps.row_tokens = (share * (90 + rng() % 30) / 100 / SEQ_LEN + 1) * SEQ_LEN;
    else if (rng() % 3 == 0)
        in->caps.max_tokens = share * (100 + rng() % 20) / 100 + SEQ_LEN;
    else if (rng() % 2 == 0)
        in->caps.max_padded = share * (120 + rng() % 40) / 100 + SEQ_LEN;
}

/* Every rank's cost and tokens, and its group in members, against the
 * items assign gives it; returns the unplaced count. */
static size_t check_books(const lfp_split *s, const instance *in)
{
    static uint8_t seen[MAXN];
    size_t n = in->it.n, placed = 0;
    memset(seen, 0, n);
    ASSERT_EQ(s->rank_start[0], 0);
    for (uint32_t r = 0; r < s->world; r++) {
        uint64_t cost = s->offset[r], tokens = 0;
        size_t mine = 0;
        for (size_t i = 0; i < n; i++) {
            if (s->assign[i] != r) continue;
            cost += in->cost[i];
            tokens += in->len[i];
            mine++;
        }
        ASSERT_EQ(s->cost[r], cost);
        ASSERT_EQ(s->tokens[r], tokens);
        ASSERT_EQ(s->rank_start[r + 1] - s->rank_start[r], mine);
        for (uint32_t p = s->rank_start[r]; p < s->rank_start[r + 1]; p++) {
            uint32_t x = s->members[p];
            ASSERT_LT(x, n);
            ASSERT_EQ(s->assign[x], r);
            ASSERT_EQ(seen[x], 0);
            seen[x] = 1;
        }
        placed += mine;
    }
    for (size_t i = 0; i < n; i++)
        if (s->assign[i] != NONE) ASSERT_LT(s->assign[i], s->world);
    return n - placed;
}

static void run_one(instance *in, uint32_t world, int pack)
{
    lfp_split s;
    size_t n = 1 + rng() % (world * 16u < MAXN ? world * 16u : MAXN);
    make_instance(in, n, world, pack);
    ASSERT_EQ(lfp_split_init(&s, world, MAXN), 0);
    size_t unplaced = lfp_split_run(&s, &in->it, &in->caps);
    ASSERT_EQ(check_books(&s, in), unplaced);
    uint64_t mean = 0;
    for (uint32_t r = 0; r < world; r++) mean += s.cost[r] / world;
    for (uint32_t r = 0; r < world; r++) s.offset[r] = rng() % (mean / 4 + 1);
    lfp_split_polish(&s, &in->it, &in->caps);
    ASSERT_EQ(check_books(&s, in), unplaced);
    lfp_split_free(&s);
}

int main(void)
{
    static instance in;
    static const uint32_t worlds[] = {1, 2, 3, 5, 8, 17, 64};
    uint32_t runs = 0;
    for (uint32_t rep = 0; rep < 60; rep++)
        for (size_t w = 0; w < sizeof worlds / sizeof *worlds; w++)
            for (int pack = 0; pack < 2; pack++, runs++) run_one(&in, worlds[w], pack);
    printf("plan_split_books: %u splits and polishes, books kept\n", runs);
    return 0;
}
