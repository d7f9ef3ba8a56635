/*
 * plan_sort_keys.c — lfp_sort_keys (order.c) against an obviously correct
 * reference: longest first, then the smaller id, keys equal in both kept in
 * the order they came (what the merge and radix sorts it replaced gave).
 * Every path: merge sort (512 keys or fewer); the 64-bit place sort (length
 * and id bits together within 64: sorted mega-batches, the split's costs),
 * at its edges (one length and ids over all 64 bits; lengths over all 64
 * bits and one id); and the radix sort by length then runs by id where the
 * two need more than 64 bits (costs near 2^52 beside piece ids). Keys equal
 * in length and id (the split's sets of equal costs) must keep their order.
 */
#include <stdlib.h>

#include "plan_internal.h"
#include "test.h"

static uint64_t rng_state = 35;

/* The reference: insertion sort, stable (a key moves only past one it
 * strictly sorts before). */
static void reference_sort(lfp_key *k, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        lfp_key v = k[i];
        size_t j = i;
        for (; j > 0 && (k[j - 1].len < v.len || (k[j - 1].len == v.len && k[j - 1].id > v.id));
             j--)
            k[j] = k[j - 1];
        k[j] = v;
    }
}

typedef enum {
    LOGNORMAL_IDS,   /* lengths 32..16384 around 600, ids a random subset of 10^7 */
    PIECE_IDS,       /* the same, ids with a piece number at bit 40 */
    WIDE_COSTS,      /* costs up to 2^52 and ids up to 2^30: past 64 bits */
    ONE_LEN_ANY_ID,  /* one length, ids over all 64 bits */
    ANY_LEN_ONE_ID,  /* lengths over all 64 bits, one id */
    FEW_EQUAL,       /* 3 lengths, 5 ids: many keys equal in both */
    KINDS
} kind;

/* A length near a lognormal of median 600 (product of uniforms, cheap and
 * long-tailed enough), clamped to 32..16384 as lf-shard synth's. */
static uint64_t text_len(void)
{
    uint64_t l = 600;
    for (int i = 0; i < 3; i++) l = l * (64 + test_rng(&rng_state) % 192) / 128;
    return l < 32 ? 32 : l > 16384 ? 16384 : l;
}

static lfp_key make_key(kind k, uint32_t i)
{
    uint64_t r = test_rng(&rng_state);
    switch (k) {
    case LOGNORMAL_IDS: return (lfp_key){text_len(), r % 10000000, i};
    case PIECE_IDS: return (lfp_key){text_len(), (r % 10000000) | (r >> 60) << 40, i};
    case WIDE_COSTS: return (lfp_key){r >> 12, test_rng(&rng_state) >> 34, i};
    case ONE_LEN_ANY_ID: return (lfp_key){777, r, i};
    case ANY_LEN_ONE_ID: return (lfp_key){r, 5, i};
    default: return (lfp_key){1000 + r % 3, (r >> 8) % 5, i};
    }
}

static void check(kind k, size_t n)
{
    lfp_key *keys = malloc((2 * n + 1) * sizeof *keys), *want = malloc((n + 1) * sizeof *want);
    ASSERT_TRUE(keys && want);
    for (size_t i = 0; i < n; i++) keys[i] = want[i] = make_key(k, (uint32_t)i);
    if (k == ONE_LEN_ANY_ID && n > 2) {   /* the ends of 64 bits */
        keys[0].id = want[0].id = 0;
        keys[1].id = want[1].id = UINT64_MAX;
    }
    reference_sort(want, n);
    lfp_sort_keys(keys, n, keys + n);
    for (size_t i = 0; i < n; i++) {
        if (keys[i].len == want[i].len && keys[i].id == want[i].id && keys[i].idx == want[i].idx)
            continue;
        fprintf(stderr, "kind %d, %zu keys: place %zu is (%llu, %llu, %u), want (%llu, %llu, %u)\n",
                (int)k, n, i, (unsigned long long)keys[i].len, (unsigned long long)keys[i].id,
                keys[i].idx, (unsigned long long)want[i].len, (unsigned long long)want[i].id,
                want[i].idx);
        ASSERT_TRUE(0);
    }
    free(keys);
    free(want);
}

int main(void)
{
    static const size_t sizes[] = {0, 1, 2, 17, 511, 512, 513, 1088, 2047, 2048, 4099, 20000};
    for (int k = 0; k < KINDS; k++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) check((kind)k, sizes[s]);
    return 0;
}
