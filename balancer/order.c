/*
 * order.c — the order in which an epoch offers its samples to selection.
 *
 * Everything random comes from lfp_below(key, counter, n), a hash of a key
 * made from (seed, epoch) and a counter, so an epoch's order can be rebuilt
 * from scratch at any time (that is what makes a saved state small).
 *
 * balanced: locality-aware. The blocks are shuffled; a window of
 * locality_blocks blocks is open at a time, each draw takes a uniformly
 * random pending sample of the open blocks, and when a block's last sample
 * is drawn the next block in the shuffled order opens. Each block's samples
 * are thus consumed within a short span of the epoch, so a reader touches a
 * block about once (a window of 1 is plain block order).
 *
 * naive: a uniform shuffle of all samples (DistributedSampler).
 * sorted: the same shuffle, then each mega-batch of 50 global batches sorted
 * longest first (HF group_by_length).
 */
#include <string.h>

#include "plan_internal.h"

static uint64_t epoch_key(const lf_plan *p, uint64_t stream)
{
    return lfp_mix(lfp_mix(p->prm.seed) ^ lfp_mix(((uint64_t)p->epoch << 8) | stream));
}

static void open_block(lf_plan *p, uint32_t g, size_t *pool_n)
{
    for (uint32_t i = p->group_start[g]; i < p->group_start[g + 1]; i++) {
        uint32_t s = p->group_members[i];
        if (!p->capfail[s]) p->pool[(*pool_n)++] = s;
    }
}

/* Opens blocks in shuffled order from *next until `open` blocks with pending
 * samples are open (or none is left). */
static void fill_window(lf_plan *p, uint32_t *next, uint32_t *open, size_t *pool_n)
{
    while (*open < p->prm.locality_blocks && *next < p->ngroups) {
        uint32_t g = p->gperm[(*next)++];
        if (p->grem[g] == 0) continue;
        open_block(p, g, pool_n);
        (*open)++;
    }
}

static void order_locality(lf_plan *p)
{
    uint64_t kb = epoch_key(p, 1), kd = epoch_key(p, 2);
    for (uint32_t g = 0; g < p->ngroups; g++) {
        p->gperm[g] = g;
        p->grem[g] = 0;
    }
    for (uint32_t i = p->ngroups; i > 1; i--) {
        uint32_t j = (uint32_t)lfp_below(kb, i, i);
        uint32_t t = p->gperm[i - 1]; p->gperm[i - 1] = p->gperm[j]; p->gperm[j] = t;
    }
    for (size_t s = 0; s < p->n; s++)
        if (!p->capfail[s]) p->grem[p->group_of[s]]++;
    uint32_t next = 0, open = 0;
    size_t pool_n = 0;
    fill_window(p, &next, &open, &pool_n);
    for (size_t t = 0; t < p->norder; t++) {
        size_t j = (size_t)lfp_below(kd, t, pool_n);
        uint32_t s = p->pool[j];
        p->pool[j] = p->pool[--pool_n];
        p->order[t] = s;
        if (--p->grem[p->group_of[s]] == 0) {
            open--;
            fill_window(p, &next, &open, &pool_n);
        }
    }
}

static void order_shuffle(lf_plan *p)
{
    uint64_t k = epoch_key(p, 3);
    size_t m = 0;
    for (size_t s = 0; s < p->n; s++)
        if (!p->capfail[s]) p->order[m++] = (uint32_t)s;
    for (size_t i = m; i > 1; i--) {
        size_t j = (size_t)lfp_below(k, i, i);
        uint32_t t = p->order[i - 1]; p->order[i - 1] = p->order[j]; p->order[j] = t;
    }
}

static int key_before(const lfp_key *a, const lfp_key *b)
{
    return a->len != b->len ? a->len > b->len : a->id < b->id;
}

/* Bottom-up merge sort: runs of 1, 2, 4, ... merged between the two
 * buffers; the comparison is inlined, which qsort's is not. */
static void merge_sort(lfp_key *keys, size_t n, lfp_key *tmp)
{
    lfp_key *src = keys, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) dst[o++] = key_before(&src[j], &src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[o++] = src[i++];
            while (j < hi) dst[o++] = src[j++];
        }
        lfp_key *t = src; src = dst; dst = t;
    }
    if (src != keys) memcpy(keys, src, n * sizeof *keys);
}

#define RADIX_BITS 11
#define RADIX_SIZE (1u << RADIX_BITS)

/* One stable counting pass on the digit of ~len (longer sorts first) at
 * `shift`, from src to dst. */
static void radix_pass(const lfp_key *src, lfp_key *dst, size_t n, unsigned shift)
{
    uint32_t count[RADIX_SIZE + 1];
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++) count[((~src[i].len >> shift) & (RADIX_SIZE - 1)) + 1]++;
    for (uint32_t d = 0; d < RADIX_SIZE; d++) count[d + 1] += count[d];
    for (size_t i = 0; i < n; i++) dst[count[(~src[i].len >> shift) & (RADIX_SIZE - 1)]++] = src[i];
}

static unsigned bits_of(uint64_t v)
{
    unsigned b = 0;
    while (v) { b++; v >>= 1; }
    return b;
}

/* Sorts each run of equal lengths by id: a short run by insertion, a long
 * one (many samples of one length) by merge sort. */
static void sort_runs_by_id(lfp_key *keys, size_t n, lfp_key *tmp)
{
    for (size_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo + 1; hi < n && keys[hi].len == keys[lo].len; hi++) {
        }
        if (hi - lo > 16) {
            merge_sort(keys + lo, hi - lo, tmp);
            continue;
        }
        for (size_t i = lo + 1; i < hi; i++) {
            lfp_key v = keys[i];
            size_t j = i;
            for (; j > lo && keys[j - 1].id > v.id; j--) keys[j] = keys[j - 1];
            keys[j] = v;
        }
    }
}

/* LSD radix sort by length over only the bits the lengths use (a step's
 * few thousand keys take two passes), then each run of equal lengths by id.
 * Ids are unique, so the order is the same as merge_sort's. */
static void radix_sort(lfp_key *keys, size_t n, lfp_key *tmp)
{
    uint64_t min_len = UINT64_MAX, max_len = 0;
    for (size_t i = 0; i < n; i++) {
        if (keys[i].len < min_len) min_len = keys[i].len;
        if (keys[i].len > max_len) max_len = keys[i].len;
    }
    lfp_key *src = keys, *dst = tmp;
    /* ~len differs from ~max_len only in the bits below max_len's top bit */
    unsigned len_bits = bits_of(max_len ^ min_len) ? bits_of(max_len) : 0;
    for (unsigned sh = 0; sh < len_bits; sh += RADIX_BITS) {
        radix_pass(src, dst, n, sh);
        lfp_key *t = src; src = dst; dst = t;
    }
    if (src != keys) memcpy(keys, src, n * sizeof *keys);
    sort_runs_by_id(keys, n, tmp);
}

void lfp_sort_keys(lfp_key *keys, size_t n, lfp_key *tmp)
{
    if (n > 512) radix_sort(keys, n, tmp);
    else merge_sort(keys, n, tmp);
}

static void order_sorted(lf_plan *p)
{
    size_t mega = p->sort_cap;
    order_shuffle(p);
    for (size_t lo = 0; lo < p->norder; lo += mega) {
        size_t m = p->norder - lo < mega ? p->norder - lo : mega;
        for (size_t i = 0; i < m; i++) {
            uint32_t s = p->order[lo + i];
            p->keys[i] = (lfp_key){p->len[s], p->id[s], s};
        }
        lfp_sort_keys(p->keys, m, p->keys + p->sort_cap);
        for (size_t i = 0; i < m; i++) p->order[lo + i] = p->keys[i].idx;
    }
}

void lfp_order_build(lf_plan *p)
{
    switch (p->prm.sampler) {
    case LF_PLAN_BALANCED: order_locality(p); break;
    case LF_PLAN_NAIVE: order_shuffle(p); break;
    default: order_sorted(p); break;
    }
}
