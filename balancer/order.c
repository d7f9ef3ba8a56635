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
 * naive: a uniform shuffle of all samples (DistributedSampler). One source
 * draws it as it goes (order version 2): position x of the epoch is
 * lfp_perm_at(x), a keyed bijection of [0, n) (a Feistel network on
 * ceil(log2 n) bits rounded up to even, LFP_PERM_ROUNDS rounds each
 * lfp_mix of (round key ^ right half), the round keys the counter hash of
 * the epoch's key; a value >= n is mapped again until it lands below n,
 * which walks its cycle and so stays a bijection), capfail samples skipped.
 * Nothing a sample is held: an epoch begun or resumed rebuilds it from the
 * key. sorted: the same shuffle, then each mega-batch of 50 global batches
 * sorted longest first (HF group_by_length), one mega-batch at a time, in
 * keys, as the cursor reaches it.
 *
 * A mixture (lf_plan_mix): each source's samples are ordered as above on
 * their own, with keys of their own (seed, epoch, source), then the
 * sources are interleaved by tokens: the next sample comes from the source
 * whose tokens drawn so far are the smallest against its weight (drawn[s] /
 * weight[s] least, compared as drawn[a] * weight[b] < drawn[b] * weight[a]
 * in 128 bits; ties to the lower source). That is a smooth weighted
 * interleave: every source's drawn tokens stay within one of its samples
 * of its share of the total at every point, so the selection's window
 * sees the mixture at every step. When the source that would give the next
 * sample has none left, the epoch's order ends there: the source that is
 * exhausted first for its weight sets the epoch's length, the others' rest
 * waits for their next epoch's shuffle (each epoch draws a fresh prefix of
 * every source, so no sample repeats within an epoch). One source is the
 * order of old, bit for bit (its keys are the old keys). Each source is
 * drawn as the interleave reaches it (lfp_mixpos), as one source is: a
 * source's balanced draws are the ones its whole order was built with
 * before (its pool its own), naive and sorted shuffle each source's members
 * with the Feistel bijection (order version 2; version 1 shuffled each
 * whole, Fisher-Yates). Where the order ends is known only when it is
 * drawn: lfp_order_left walks ahead on a copy (naive, sorted).
 */
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

static uint64_t epoch_key(const lf_plan *p, uint64_t stream)
{
    return lfp_mix(lfp_mix(p->prm.seed) ^ lfp_mix(((uint64_t)p->epoch << 8) | stream));
}

/* The keys' stream offset of source `src`: none for one source (the keys
 * of old), else a stream of its own per source. */
static uint64_t source_stream(const lf_plan *p, uint32_t src)
{
    return p->nsrc > 1 ? 4u * (src + 1u) : 0;
}

/* Puts block g's placeable samples into d's pool, by (block, id). Where
 * samples are cut and the members are the pieces in index order (no
 * group_members), that is their first pieces, then the pieces after them
 * (lfp_pieces_follow; a cut sample's pieces all fit). */
static void open_block(const lf_plan *p, lfp_draw *d, uint32_t g)
{
    size_t first = d->pool_n;
    int follow = p->pc.len && !p->group_members;
    for (uint32_t i = p->group_start[g]; i < p->group_start[g + 1]; i++) {
        uint32_t s = lfp_member(p, i);
        if ((follow && !lfp_piece_starts(&p->pc, s)) || lfp_capfail(p, s)) continue;
        d->pool[d->pool_n++] = s;
    }
    if (follow) lfp_pieces_follow(&p->pc, d->pool, first, &d->pool_n);
    for (size_t k = first; k < d->pool_n; k++) d->pool_group[k] = g;
}

/* Opens blocks in d's shuffled order from d->next until locality_blocks
 * blocks with pending samples are open (or none is left). */
static void fill_window(const lf_plan *p, lfp_draw *d)
{
    while (d->open < p->prm.locality_blocks && d->next < d->ng) {
        uint32_t g = p->gperm[d->glo + d->next++];
        if (d->grem[g] == 0) continue;
        open_block(p, d, g);
        d->open++;
    }
}

/* perm[0..ng) = glo + 0..ng-1, shuffled by key (Fisher-Yates, the draw
 * for position i below i: lfp_below(key, i, i)). The draws do not depend
 * on the array, so each swap's far element is fetched SHUFFLE_AHEAD
 * swaps before it is needed: at 10^7 groups (10^9 samples in blocks of
 * 64: 62 MB) a swap was a cache miss, one at a time. The same
 * permutation. */
#define SHUFFLE_AHEAD 16u

static void shuffle_groups(uint32_t *perm, uint32_t glo, uint32_t ng, uint64_t key)
{
    uint32_t ahead[SHUFFLE_AHEAD];
    for (uint32_t g = 0; g < ng; g++) perm[g] = glo + g;
    for (uint32_t i = ng; i > 1 && i + SHUFFLE_AHEAD > ng; i--) {
        ahead[i % SHUFFLE_AHEAD] = (uint32_t)lfp_below(key, i, i);
        __builtin_prefetch(&perm[ahead[i % SHUFFLE_AHEAD]], 1);
    }
    for (uint32_t i = ng; i > 1; i--) {
        uint32_t j = ahead[i % SHUFFLE_AHEAD];
        if (i > SHUFFLE_AHEAD + 1) {   /* the draw for i - SHUFFLE_AHEAD, in i's place */
            uint32_t k = i - SHUFFLE_AHEAD;
            ahead[k % SHUFFLE_AHEAD] = (uint32_t)lfp_below(key, k, k);
            __builtin_prefetch(&perm[ahead[k % SHUFFLE_AHEAD]], 1);
        }
        uint32_t t = perm[i - 1]; perm[i - 1] = perm[j]; perm[j] = t;
    }
}

/* Starts source src's locality-aware order in *d, its pool at `pool`: its
 * blocks shuffled, each one's placeable samples counted, the first blocks
 * open. */
static void draw_start(lf_plan *p, uint32_t src, lfp_draw *d, size_t pool)
{
    uint64_t stream = source_stream(p, src);
    uint64_t kb = epoch_key(p, 1 + stream);
    uint32_t glo = p->src_group[src], ng = p->src_group[src + 1] - glo;
    uint32_t *perm = p->gperm + glo;
    *d = (lfp_draw){.key = epoch_key(p, 2 + stream), .glo = glo, .ng = ng,
                    .pool = p->pool + pool, .pool_group = p->pool_group + pool,
                    .grem = p->grem};
    for (uint32_t g = 0; g < ng; g++) p->grem[glo + g] = 0;
    if (p->nsrc > 1 || !p->gperm_made || p->gperm_key != kb) shuffle_groups(perm, glo, ng, kb);
    p->gperm_made = p->nsrc <= 1;
    p->gperm_key = kb;
    /* where every sample fits (ncapfail 0) no length needs reading; else
     * a pass over them, releasing the view as it goes */
    for (uint32_t g = glo; g < glo + ng; g++) {
        uint32_t lo = p->group_start[g], hi = p->group_start[g + 1];
        if (!p->ncapfail) p->grem[g] = hi - lo, d->left += hi - lo;
        for (uint32_t i = lo; p->ncapfail && i < hi;
             lf_plan_view_passed(&p->prm, ++i, LF_PLAN_RELEASE_SCAN))
            if (!lfp_capfail(p, lfp_member(p, i))) p->grem[g]++, d->left++;
    }
    fill_window(p, d);
}

/* The next sample of d's order (d->left > 0): a uniform draw among the
 * open blocks' pending samples; a block drawn empty lets the next open. */
static uint32_t draw_next(const lf_plan *p, lfp_draw *d)
{
    size_t j = (size_t)lfp_below(d->key, d->t++, d->pool_n);
    uint32_t s = d->pool[j], g = d->pool_group[j];
    d->pool[j] = d->pool[--d->pool_n];
    d->pool_group[j] = d->pool_group[d->pool_n];
    d->left--;
    if (--d->grem[g] == 0) {
        d->open--;
        fill_window(p, d);
    }
    return s;
}

static unsigned bits_of(uint64_t v)
{
    unsigned b = 0;
    while (v) { b++; v >>= 1; }
    return b;
}

void lfp_perm_start(lfp_perm *q, uint64_t n, uint64_t key)
{
    unsigned bits = n > 1 ? bits_of(n - 1) : 1;   /* ceil(log2 n), at least 1 */
    q->n = n;
    q->x = 0;
    q->half = (bits + 1) / 2;
    for (uint32_t r = 0; r < LFP_PERM_ROUNDS; r++) q->key[r] = lfp_mix(key ^ lfp_mix(r));
}

uint64_t lfp_perm_at(const lfp_perm *q, uint64_t x)
{
    uint64_t mask = (UINT64_C(1) << q->half) - 1;
    do {
        uint64_t l = x >> q->half, r = x & mask;
        for (uint32_t i = 0; i < LFP_PERM_ROUNDS; i++) {
            uint64_t t = l ^ (lfp_mix(q->key[i] ^ r) & mask);
            l = r;
            r = t;
        }
        x = l << q->half | r;
    } while (x >= q->n);
    return x;
}

/* Shuffle q's next placeable sample (naive, sorted): its value v is
 * sample v of one source, or member lo + v of a mixture's source (whose
 * members are consecutive; a cut sample's pieces as they lie where no
 * group_members is kept). The view is released by the positions q read. */
static uint32_t shuffle_next(const lf_plan *p, lfp_perm *q, uint32_t lo)
{
    uint32_t s;
    do {
        uint64_t v = lfp_perm_at(q, q->x++);
        s = p->nsrc > 1 ? lfp_member(p, lo + (size_t)v) : (uint32_t)v;
        lf_plan_view_passed(&p->prm, q->x, lfp_shuffle_release(p));
    } while (p->ncapfail && lfp_capfail(p, s));
    return s;
}

/* The source whose tokens drawn are the least against its weight (ties:
 * the lower source). */
static uint32_t furthest_behind(const lf_plan *p, const lfp_mixpos *m)
{
    const uint32_t *w = p->prm.mix.weight;
    uint32_t best = 0;
    for (uint32_t s = 1; s < p->nsrc; s++)
        if ((lfp_u128)m->src[s].tokens * w[best] < (lfp_u128)m->src[best].tokens * w[s]) best = s;
    return best;
}

/* The interleave's next sample (m->src[m->turn].left > 0): the next of the
 * source whose turn it is; the turn passes to the one then furthest behind. */
static uint32_t mix_next(const lf_plan *p, lfp_mixpos *m)
{
    lfp_source *src = &m->src[m->turn];
    uint32_t s = p->prm.sampler == LF_PLAN_BALANCED ? draw_next(p, &src->draw)
                                                    : shuffle_next(p, &src->perm, src->lo);
    src->left--;
    src->tokens += lfp_len(p, s);
    m->turn = furthest_behind(p, m);
    return s;
}

/* Starts a mixture's epoch: every source drawn from its start, none drawn
 * yet (the turn the first source's). */
static void mix_start(lf_plan *p)
{
    lfp_mixpos *m = &p->mix;
    for (uint32_t s = 0; s < p->nsrc; s++) {
        lfp_source *src = &m->src[s];
        uint32_t hi = p->group_start[p->src_group[s + 1]];
        if (p->prm.sampler == LF_PLAN_BALANCED) draw_start(p, s, &src->draw, src->pool_at);
        else lfp_perm_start(&src->perm, hi - src->lo, epoch_key(p, 3 + source_stream(p, s)));
        src->left = src->placeable;
        src->tokens = 0;
    }
    m->turn = furthest_behind(p, m);
    p->norder = 0;
}

/* The order's next sample before sorted sorts it. */
static uint32_t shuffled_next(lf_plan *p)
{
    return p->nsrc > 1 ? mix_next(p, &p->mix) : shuffle_next(p, &p->perm, 0);
}

/* The sample at order position p->cursor - 1 (sorted): the shuffle's (or
 * the interleave's) next mega-batch sorted into keys when the cursor
 * reaches it. */
static uint32_t sorted_next(lf_plan *p)
{
    size_t at = p->cursor - 1;
    if (at >= p->mega_lo + p->mega_n) {
        size_t m = 0;
        for (; m < p->sort_cap &&
               (p->nsrc > 1 ? p->mix.src[p->mix.turn].left > 0 : at + m < p->norder); m++) {
            uint32_t s = shuffled_next(p);
            p->keys[m] = (lfp_key){lfp_len(p, s), lfp_id(p, s), s};
        }
        lfp_sort_keys(p->keys, m, p->keys + p->sort_cap);
        p->mega_lo = at;
        p->mega_n = m;
    }
    return p->keys[at - p->mega_lo].idx;
}

/* Where every sample fits, position x of the order is position x of the
 * shuffle; sorted's mega-batches are sort_cap positions each from the
 * epoch's start, so the one holding the cursor is drawn and sorted as the
 * cursor passes into it. */
void lfp_order_seek(lf_plan *p, size_t cursor)
{
    size_t at = p->prm.sampler == LF_PLAN_SORTED ? cursor - cursor % p->sort_cap : cursor;
    p->perm.x = at;
    p->cursor = at;
    while (p->cursor < cursor) lfp_order_next(p);
}

uint32_t lfp_order_draw(lf_plan *p)
{
    if (p->prm.sampler == LF_PLAN_SORTED) return sorted_next(p);
    if (p->nsrc > 1) return mix_next(p, &p->mix);
    return p->prm.sampler == LF_PLAN_BALANCED ? draw_next(p, &p->draw)
                                              : shuffle_next(p, &p->perm, 0);
}

size_t lfp_order_left(const lf_plan *p, size_t limit)
{
    if (p->nsrc <= 1) return p->norder - p->cursor < limit ? p->norder - p->cursor : limit;
    size_t held = p->mega_lo + p->mega_n > p->cursor ? p->mega_lo + p->mega_n - p->cursor : 0;
    size_t least = SIZE_MAX;     /* no source runs out in fewer draws */
    for (uint32_t s = 0; s < p->nsrc; s++)
        if (p->mix.src[s].left < least) least = p->mix.src[s].left;
    if (held >= limit || least >= limit - held) return limit;
    lfp_mixpos m = p->mix;       /* a shuffle's position is all its state */
    size_t k = held;
    for (; k < limit && m.src[m.turn].left > 0; k++) mix_next(p, &m);
    return k;
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
static void radix_sort(lfp_key *keys, size_t n, lfp_key *tmp, uint64_t min_len, uint64_t max_len)
{
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

/* Where a key's place fits in 64 bits, (max_len - len) above (id - min_id),
 * the keys sort as those numbers, ascending, with their idx beside them:
 * LSD radix over the bits they use in passes of at most RADIX_BITS, on 12
 * bytes a key instead of 24, and no run to sort by id after. A sorted
 * mega-batch (10^7 samples, world 64: 54,400 keys, lengths 14 bits and ids
 * 24) took 25-30 ns a key by length then runs by id (the runs' merge sorts
 * were 3/4 of it), 8-10 ns so; from RADIX_SIZE keys up it is the faster
 * (2,048 keys: 8.5 against 9.9 ns), below it a pass's counts cost more
 * than the runs (a balanced step's 1,075 costs: 9.6 against 9.2 ns), so
 * lfp_sort_keys leaves those to radix_sort. tmp's 24 bytes a key hold the
 * numbers and idx twice (16 + 8); it is heap memory the callers own, the
 * numbers' type set by these stores. Stable, as radix_sort: the same order. */
static void place_sort(lfp_key *keys, size_t n, lfp_key *tmp, uint64_t max_len,
                       unsigned id_bits, uint64_t min_id, unsigned bits)
{
    uint64_t *at = (uint64_t *)(void *)tmp, *at2 = at + n;
    uint32_t *idx = (uint32_t *)(at2 + n), *idx2 = idx + n;
    for (size_t i = 0; i < n; i++) {
        /* id_bits is 64 only where every length is max_len */
        uint64_t up = id_bits < 64 ? (max_len - keys[i].len) << id_bits : 0;
        at[i] = up | (keys[i].id - min_id);
        idx[i] = keys[i].idx;
    }
    unsigned passes = (bits + RADIX_BITS - 1) / RADIX_BITS;
    unsigned width = passes ? (bits + passes - 1) / passes : 0;
    uint64_t mask = (UINT64_C(1) << width) - 1;
    for (unsigned q = 0; q < passes; q++) {
        uint32_t count[RADIX_SIZE + 1];
        unsigned sh = q * width;
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++) count[((at[i] >> sh) & mask) + 1]++;
        for (uint32_t d = 0; d < mask; d++) count[d + 1] += count[d];
        for (size_t i = 0; i < n; i++) {
            uint32_t o = count[(at[i] >> sh) & mask]++;
            at2[o] = at[i];
            idx2[o] = idx[i];
        }
        uint64_t *t = at; at = at2; at2 = t;
        uint32_t *u = idx; idx = idx2; idx2 = u;
    }
    uint64_t id_mask = id_bits < 64 ? (UINT64_C(1) << id_bits) - 1 : UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t up = id_bits < 64 ? at[i] >> id_bits : 0;
        keys[i] = (lfp_key){max_len - up, (at[i] & id_mask) + min_id, idx[i]};
    }
}

void lfp_sort_keys(lfp_key *keys, size_t n, lfp_key *tmp)
{
    if (n <= 512) {
        merge_sort(keys, n, tmp);
        return;
    }
    uint64_t min_len = UINT64_MAX, max_len = 0, min_id = UINT64_MAX, max_id = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t len = keys[i].len, id = keys[i].id;
        min_len = len < min_len ? len : min_len;
        max_len = len > max_len ? len : max_len;
        min_id = id < min_id ? id : min_id;
        max_id = id > max_id ? id : max_id;
    }
    unsigned len_bits = bits_of(max_len - min_len), id_bits = bits_of(max_id - min_id);
    if (n >= RADIX_SIZE && len_bits + id_bits <= 64)
        place_sort(keys, n, tmp, max_len, id_bits, min_id, len_bits + id_bits);
    else
        radix_sort(keys, n, tmp, min_len, max_len);
}

void lfp_order_build(lf_plan *p)
{
    p->mega_lo = p->mega_n = 0;
    if (p->nsrc > 1) {
        mix_start(p);
    } else if (p->prm.sampler == LF_PLAN_BALANCED) {
        draw_start(p, 0, &p->draw, 0);   /* drawn as the window refills (lfp_order_next) */
        p->norder = p->draw.left;
    } else {                     /* naive/sorted: drawn as the cursor goes */
        lfp_perm_start(&p->perm, p->n, epoch_key(p, 3));
        p->norder = p->n - p->ncapfail;
    }
}

uint32_t lf_plan_mix_source(const lf_plan_mix *mix, uint64_t id)
{
    uint64_t sample = lf_plan_piece_sample(id);
    uint32_t s = 0;
    while (s + 1 < mix->sources && mix->first[s + 1] <= sample) s++;
    return s;
}

/* The source of member k's sample. */
static uint32_t member_source(const lf_plan *p, size_t k)
{
    return lf_plan_mix_source(&p->prm.mix, lfp_id(p, lfp_member(p, k)));
}

/* Checks the mixture's parameters against the samples and sets the sources
 * up: each source's groups (a block in one source, the sources' blocks in
 * their order, as a union dataset numbers them), its first member, and its
 * samples the plan can place (at least one each). One source: nothing to
 * do. Nothing a sample is kept: a group's members ascend by id and a source
 * is a range of ids, so its first and last member's sources bound its
 * others'. */
int lfp_mix_init(lf_plan *p)
{
    const lf_plan_mix *m = &p->prm.mix;
    p->nsrc = 1;
    p->src_group[0] = 0;
    p->src_group[1] = p->ngroups;
    if (m->sources <= 1) return 0;
    if (m->sources > LF_PLAN_MAX_SOURCES || m->first[0] != 0) return LF_PLAN_E_ARG;
    for (uint32_t s = 0; s < m->sources; s++)
        if (m->weight[s] == 0 || (s && m->first[s] <= m->first[s - 1])) return LF_PLAN_E_ARG;
    p->nsrc = m->sources;
    uint32_t cur = 0;
    for (uint32_t g = 0; g < p->ngroups; g++) {
        uint32_t lo = p->group_start[g], hi = p->group_start[g + 1];   /* never empty */
        uint32_t gs = member_source(p, lo);
        if (member_source(p, hi - 1) != gs || gs < cur) return LF_PLAN_E_ARG;
        while (cur < gs) p->src_group[++cur] = g;
    }
    while (cur < p->nsrc) p->src_group[++cur] = p->ngroups;
    for (uint32_t s = 0; s < p->nsrc; s++) {
        lfp_source *src = &p->mix.src[s];
        uint32_t hi = p->group_start[p->src_group[s + 1]];
        src->lo = p->group_start[p->src_group[s]];
        src->placeable = hi - src->lo;
        for (size_t k = src->lo; p->ncapfail && k < hi;
             lf_plan_view_passed(&p->prm, ++k, LF_PLAN_RELEASE_SCAN))
            src->placeable -= lfp_capfail(p, lfp_member(p, k));
        if (!src->placeable) return LF_PLAN_E_ARG;
    }
    return 0;
}
