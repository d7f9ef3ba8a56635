/*
 * split.c — one step's samples across ranks, as equal in cost as possible.
 *
 * Karmarkar–Karp's largest differencing method, k-way: every item starts as
 * a k-tuple of subsets (the item alone, k-1 empty ones). Repeatedly the two
 * tuples with the largest spread (max - min subset sum) are combined, pairing
 * the largest subset of one with the smallest of the other, so their
 * differences cancel; the result is re-sorted and its minimum subtracted.
 * When one tuple is left, its k subsets are the ranks. Counts per rank are
 * free: a rank may get two long samples while another gets twenty short
 * ones, which is what equal cost needs.
 *
 * Tuples are sparse (only their non-empty subsets are stored) and each is a
 * min-heap by sum: a merge pairs only the smallest subsets of the two (as
 * many as both tuples' non-empty subsets exceed k), and the rest of the
 * smaller tuple goes into the larger one's heap. The heap picks largest
 * spreads first, so a full tuple keeps meeting single items: each such
 * merge costs O(log k), where re-sorting the full tuple cost O(k) and made
 * KK O(world^2) a step (0.33 s of a 4096-rank step's 0.49). A full tuple's
 * minimum is subtracted by raising its base, not by rewriting its sums.
 * Each subset is a linked list of items, so combining two is O(1). Subset
 * slots live in a bump arena; a tuple that outgrows its slice moves to the
 * arena's end with twice the room, and when the arena fills the live tuples
 * (never more subsets than items) are copied to the other half.
 *
 * KK runs over the world * 4 costliest items only: past those, the rest are
 * small next to a rank's load, and LPT (costliest first, each to the
 * cheapest rank, kept by a tournament tree) places them in O(n log k). The
 * small items going last is what evens the ranks out.
 *
 * pack (a balanced step that fills rows, caps->row_tokens): a rank's rows
 * are to be full, so its cost is the leanest price times its tokens plus
 * its items' excess over that price, and equal cost needs equal excess. KK
 * runs on the excess (over an outlier step's outliers and as many more, if
 * that is more), and each other item, largest first, goes to the rank with
 * the least excess whose rows have room for it, room judged row by row as
 * best-fit decreasing will pack the rank (lpt_fill_rows).
 *
 * Then a local search: the costliest rank tries, with the cheapest ranks
 * first (kept sorted across rounds: a change moves two of them), the single
 * move that best halves their gap, else the best swap (a
 * move is O(m); a swap looks at the items of the cheaper rank within the
 * gap below each item of the costlier, found by bisecting their sorted
 * costs, and swaps stop after 8192 pairs per round); it stops when nothing
 * helps or the costliest rank is within 2^-12 of the mean; where nothing
 * helps and it is still 2^-10 over, sets of up to four items of it for a
 * set of a cheaper rank (best_exchange). Memory caps (tokens, padded
 * tokens) are enforced here: ranks over a cap first hand their longest items
 * to the cheapest rank with room, and items no rank has room for are left
 * unplaced for the caller to defer. Every choice breaks ties by item cost,
 * then sample id, then rank number (KK's subsets of equal sum: by their
 * first item's place in the step), so the result depends on nothing but the
 * input.
 */
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

#define NONE UINT32_MAX
#define KK_PER_RANK 4u          /* KK places the world * 4 costliest items */

int lfp_split_init(lfp_split *s, uint32_t world, size_t maxn)
{
    memset(s, 0, sizeof *s);
    s->world = world;
    s->maxn = maxn;
    size_t nt = maxn + 1, arena = 3 * maxn + 2;   /* the most arena_limit is */
    for (int i = 0; i < 2; i++) s->sub[i] = malloc(arena * sizeof(lfp_subset));
    s->tup_off = malloc(nt * sizeof(uint32_t));
    s->tup_len = malloc(nt * sizeof(uint32_t));
    s->tup_cap = malloc(nt * sizeof(uint32_t));
    s->tup_base = malloc(nt * sizeof(uint64_t));
    s->tup_max = malloc(nt * sizeof(uint64_t));
    s->tup_seq = malloc(nt * sizeof(uint64_t));
    s->heap = malloc(nt * sizeof(uint32_t));
    s->next = malloc(nt * sizeof(uint32_t));
    s->tmp = malloc(2 * ((size_t)world + 1) * sizeof(lfp_subset));
    s->tmp_ord = malloc(((size_t)world + 1) * sizeof(uint32_t));
    s->tmp_aux = malloc(((size_t)world + 1) * sizeof(uint32_t));
    s->assign = malloc(nt * sizeof(uint32_t));
    s->cost = malloc(((size_t)world + 1) * sizeof(uint64_t));
    s->tokens = malloc(((size_t)world + 1) * sizeof(uint64_t));
    s->excess = malloc(((size_t)world + 1) * sizeof(uint64_t));
    for (s->leaves = 1; s->leaves < world; s->leaves *= 2) {
    }
    s->tree = malloc(2 * (size_t)s->leaves * sizeof(uint32_t));
    s->tree_cost = malloc((size_t)s->leaves * sizeof(uint64_t));
    s->fit_tree = malloc(2 * (size_t)s->leaves * sizeof(uint32_t));
    s->fit = malloc((size_t)s->leaves * sizeof(uint64_t));
    s->lo_keys = malloc(2 * nt * sizeof *s->lo_keys);
    s->rank_keys = malloc(2 * ((size_t)world + 1) * sizeof *s->rank_keys);
    s->set_keys = malloc(3 * (size_t)LFP_SETS_MAX * sizeof *s->set_keys);
    s->set_items = malloc(2 * (size_t)LFP_SETS_MAX * LFP_SET_ITEMS * sizeof(uint32_t));
    s->rank_order = malloc(((size_t)world + 1) * sizeof(uint32_t));
    s->rank_rows = malloc(((size_t)world + 1) * sizeof(uint32_t));
    s->row_head = malloc(((size_t)world + 1) * sizeof(uint32_t));
    s->row_next = malloc(nt * sizeof(uint32_t));
    s->row_of = malloc(nt * sizeof(uint32_t));
    s->row_room = malloc(nt * sizeof(uint64_t));
    s->members = malloc(nt * sizeof(uint32_t));
    s->rank_start = malloc(((size_t)world + 2) * sizeof(uint32_t));
    s->scratch = malloc(nt * sizeof(uint64_t));
    s->keys = malloc(2 * nt * sizeof *s->keys);
    s->room = malloc(nt * sizeof(uint64_t));
    s->offset = calloc((size_t)world + 1, sizeof(uint64_t));
    if (!s->sub[0] || !s->sub[1] || !s->tup_off || !s->tup_len || !s->tup_cap ||
        !s->tup_base || !s->tup_max || !s->tup_seq || !s->heap ||
        !s->next || !s->tmp || !s->tmp_ord || !s->tmp_aux ||
        !s->assign || !s->cost || !s->tokens || !s->excess || !s->tree ||
        !s->tree_cost || !s->fit_tree || !s->fit || !s->lo_keys || !s->rank_keys ||
        !s->set_keys || !s->set_items ||
        !s->rank_order || !s->rank_rows ||
        !s->row_head || !s->row_next || !s->row_of || !s->row_room || !s->members ||
        !s->rank_start || !s->scratch || !s->room || !s->keys || !s->offset)
        goto fail;
    return 0;
fail:
    lfp_split_free(s);
    return LF_PLAN_E_NOMEM;
}

void lfp_split_free(lfp_split *s)
{
    free(s->sub[0]); free(s->sub[1]);
    free(s->tup_off); free(s->tup_len); free(s->tup_cap); free(s->tup_base); free(s->tup_max);
    free(s->tup_seq); free(s->heap); free(s->next);
    free(s->tmp); free(s->tmp_ord); free(s->tmp_aux);
    free(s->assign); free(s->cost); free(s->tokens); free(s->excess);
    free(s->tree); free(s->tree_cost); free(s->fit_tree); free(s->fit);
    free(s->lo_keys); free(s->rank_keys); free(s->set_keys); free(s->set_items); free(s->rank_order);
    free(s->rank_rows); free(s->row_head); free(s->row_next); free(s->row_of); free(s->row_room);
    free(s->members); free(s->rank_start); free(s->scratch); free(s->room); free(s->keys);
    free(s->offset);
    memset(s, 0, sizeof *s);
}

/* ---- Karmarkar-Karp ------------------------------------------------------ */

/* A tuple's spread, max - min subset sum (empty subsets count as 0): a
 * tuple with an empty subset has base 0, and a full one's base is its
 * minimum. */
static uint64_t tup_spread(const lfp_split *s, uint32_t t)
{
    return s->tup_max[t] - s->tup_base[t];
}

/* Heap order: larger spread first, then older tuple. */
static int heap_before(const lfp_split *s, uint32_t x, uint32_t y)
{
    uint64_t sx = tup_spread(s, x), sy = tup_spread(s, y);
    if (sx != sy) return sx > sy;
    return s->tup_seq[x] < s->tup_seq[y];
}

static void heap_down(lfp_split *s, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, best = i;
        if (l < s->heap_len && heap_before(s, s->heap[l], s->heap[best])) best = l;
        if (r < s->heap_len && heap_before(s, s->heap[r], s->heap[best])) best = r;
        if (best == i) return;
        uint32_t t = s->heap[i]; s->heap[i] = s->heap[best]; s->heap[best] = t;
        i = best;
    }
}

static void heap_push(lfp_split *s, uint32_t t)
{
    size_t i = s->heap_len++;
    s->heap[i] = t;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_before(s, s->heap[i], s->heap[p])) return;
        uint32_t x = s->heap[i]; s->heap[i] = s->heap[p]; s->heap[p] = x;
        i = p;
    }
}

static uint32_t heap_pop(lfp_split *s)
{
    uint32_t top = s->heap[0];
    s->heap[0] = s->heap[--s->heap_len];
    heap_down(s, 0);
    return top;
}

/* A tuple's subsets form a min-heap by stored sum; ties go to the subset
 * whose first item has the lower index (no two subsets share an item). */
static int sub_before(const lfp_subset *x, const lfp_subset *y)
{
    return x->sum != y->sum ? x->sum < y->sum : x->head < y->head;
}

static void sub_up(lfp_subset *h, uint32_t i)
{
    lfp_subset v = h[i];
    for (; i > 0 && sub_before(&v, &h[(i - 1) / 2]); i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
    h[i] = v;
}

static void sub_down(lfp_subset *h, uint32_t len, uint32_t i)
{
    lfp_subset v = h[i];
    for (uint32_t c; (c = 2 * i + 1) < len; i = c) {
        if (c + 1 < len && sub_before(&h[c + 1], &h[c])) c++;
        if (!sub_before(&h[c], &v)) break;
        h[i] = h[c];
    }
    h[i] = v;
}

static lfp_subset *tup_subsets(const lfp_split *s, uint32_t t)
{
    return s->sub[s->arena_cur] + s->tup_off[t];
}

/* Takes tuple t's smallest subset out, with its actual sum. */
static lfp_subset tup_pop_min(lfp_split *s, uint32_t t)
{
    lfp_subset *h = tup_subsets(s, t), top = h[0];
    h[0] = h[--s->tup_len[t]];
    sub_down(h, s->tup_len[t], 0);
    top.sum -= s->tup_base[t];
    return top;
}

/* Adds a subset of actual sum v.sum to tuple t, which has room for it. */
static void tup_push(lfp_split *s, uint32_t t, lfp_subset v)
{
    lfp_subset *h = tup_subsets(s, t);
    v.sum += s->tup_base[t];
    if (v.sum > s->tup_max[t]) s->tup_max[t] = v.sum;
    h[s->tup_len[t]] = v;
    sub_up(h, s->tup_len[t]++);
}

/* Copies the live tuples (the heap's, and a and b being merged) to the other
 * arena half, each with no room to spare. kk_merge compacts when a merge
 * could need more than is left below arena_limit: 2 (la + lb) slots for a
 * moved tuple, at most twice the m items KK runs over. Live subsets never
 * outnumber the items, so a limit of 3 m + 2 always holds both. The limit
 * is that and not the arena's size (3 maxn + 2, maxn being the step's
 * window, often far more than m) so that compaction runs whenever KK's
 * garbage passes about 2 m, as it does thousands of times in the unit
 * tests' plans, and not only where m comes near maxn. */
static void arena_compact(lfp_split *s, uint32_t a, uint32_t b)
{
    int from = s->arena_cur, to = !from;
    size_t used = 0;
    for (size_t h = 0; h < s->heap_len + 2; h++) {
        uint32_t t = h < s->heap_len ? s->heap[h] : h == s->heap_len ? a : b;
        memcpy(s->sub[to] + used, s->sub[from] + s->tup_off[t],
               s->tup_len[t] * sizeof(lfp_subset));
        s->tup_off[t] = (uint32_t)used;
        s->tup_cap[t] = s->tup_len[t];
        used += s->tup_len[t];
    }
    s->arena_cur = to;
    s->arena_used = used;
}

/* Gives tuple t room for `need` subsets (at most world): where it has less,
 * it moves to the arena's end with twice its room, so a tuple's growth
 * costs O(1) a subset. */
static void tup_reserve(lfp_split *s, uint32_t t, uint32_t need)
{
    if (s->tup_cap[t] >= need) return;
    uint32_t cap = 2 * s->tup_cap[t] < need ? need : 2 * s->tup_cap[t];
    if (cap > s->world) cap = s->world;
    lfp_subset *arena = s->sub[s->arena_cur];
    memcpy(arena + s->arena_used, arena + s->tup_off[t], s->tup_len[t] * sizeof *arena);
    s->tup_off[t] = (uint32_t)s->arena_used;
    s->tup_cap[t] = cap;
    s->arena_used += cap;
}

/* Combines tuples a and b into one, which keeps the id of the one it grew
 * from (the other's id is done with): over world slots, each sorted
 * largest first with empty subsets as zeros, slot j joins a's j-th largest
 * and b's j-th smallest. Only where both are non-empty do subsets pair:
 * the `over` smallest of a, ascending, with the `over` smallest of b,
 * descending. Every other subset is kept as it is, so the tuple left with
 * more of them takes the other's (O(log world) each): a full tuple meeting
 * a small one costs what the small one holds, not world. A full result
 * then loses its minimum from every sum by raising its base. */
static uint32_t kk_merge(lfp_split *s, uint32_t a, uint32_t b, uint64_t seq)
{
    uint32_t k = s->world, la = s->tup_len[a], lb = s->tup_len[b];
    uint32_t over = la + lb > k ? la + lb - k : 0;
    if (s->arena_used + 2 * ((size_t)la + lb) > s->arena_limit) arena_compact(s, a, b);
    lfp_subset *pa = s->tmp, *pb = s->tmp + k;
    for (uint32_t i = 0; i < over; i++) pa[i] = tup_pop_min(s, a);
    for (uint32_t i = 0; i < over; i++) pb[i] = tup_pop_min(s, b);
    uint32_t host = s->tup_len[a] >= s->tup_len[b] ? a : b, other = host == a ? b : a;
    if (s->tup_len[host] == 0) s->tup_max[host] = s->tup_base[host];
    tup_reserve(s, host, la + lb - over);
    const lfp_subset *o = tup_subsets(s, other);
    for (uint32_t i = 0; i < s->tup_len[other]; i++)
        tup_push(s, host, (lfp_subset){o[i].sum - s->tup_base[other], o[i].head, o[i].tail});
    for (uint32_t i = 0; i < over; i++) {
        const lfp_subset *x = &pa[i], *y = &pb[over - 1 - i];
        s->next[x->tail] = y->head;
        tup_push(s, host, (lfp_subset){x->sum + y->sum, x->head, y->tail});
    }
    if (s->tup_len[host] == k) s->tup_base[host] = tup_subsets(s, host)[0].sum;
    s->tup_seq[host] = seq;
    return host;
}

/* Runs KK over the m costliest items (keys[0..m)); fills their assign[].
 * Subset j of the final tuple (largest first) becomes rank j. */
static void kk_assign(lfp_split *s, const lfp_items *it, size_t m)
{
    s->arena_cur = 0;
    s->heap_len = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t t = (uint32_t)i, x = s->keys[i].idx;
        uint64_t c = it->excess ? it->excess[x] : it->cost[x];
        s->sub[0][i] = (lfp_subset){c, x, x};
        s->next[x] = NONE;
        s->tup_off[t] = (uint32_t)i;
        s->tup_len[t] = s->tup_cap[t] = 1;
        s->tup_base[t] = 0;
        s->tup_max[t] = c;
        s->tup_seq[t] = i;                   /* equal costs: smaller id first */
        s->heap[s->heap_len++] = t;
    }
    s->arena_used = m;
    s->arena_limit = 3 * m + 2;
    for (size_t i = s->heap_len / 2; i-- > 0;) heap_down(s, i);
    uint64_t seq = UINT64_C(1) << 63;        /* merged tuples after every item */
    while (s->heap_len > 1) {
        uint32_t a = heap_pop(s), b = heap_pop(s);
        heap_push(s, kk_merge(s, a, b, seq++));
    }
    if (s->heap_len == 0) return;
    uint32_t t = s->heap[0];
    for (uint32_t j = s->tup_len[t]; j-- > 0;) /* smallest first: rank j */
        for (uint32_t x = tup_pop_min(s, t).head; x != NONE; x = s->next[x]) s->assign[x] = j;
}

/* ---- per-rank bookkeeping and caps --------------------------------------- */

/* Rank r's items: members[rank_start[r] .. rank_start[r + 1]). */
static uint32_t rank_size(const lfp_split *s, uint32_t r)
{
    return s->rank_start[r + 1] - s->rank_start[r];
}

static void rank_totals(lfp_split *s, const lfp_items *it)
{
    uint32_t k = s->world;
    memcpy(s->cost, s->offset, k * sizeof(uint64_t));
    memset(s->tokens, 0, k * sizeof(uint64_t));
    memset(s->rank_start, 0, ((size_t)k + 1) * sizeof(uint32_t));
    for (size_t i = 0; i < it->n; i++) {
        uint32_t r = s->assign[i];
        if (r == NONE) continue;
        s->cost[r] += it->cost[i];
        s->tokens[r] += it->len[i];
        s->rank_start[r + 1]++;
    }
    for (uint32_t r = 0; r < k; r++) s->rank_start[r + 1] += s->rank_start[r];
    memcpy(s->tmp_ord, s->rank_start, k * sizeof(uint32_t));
    for (size_t i = 0; i < it->n; i++)
        if (s->assign[i] != NONE) s->members[s->tmp_ord[s->assign[i]]++] = (uint32_t)i;
}

static int cmp_desc_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a < b) - (a > b);
}

uint32_t lfp_pack_rows(const uint64_t *lens_desc, size_t n, uint32_t seq_len,
                       uint64_t *room, uint32_t *row_of)
{
    uint32_t rows = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t best = NONE;
        for (uint32_t r = 0; r < rows; r++)
            if (room[r] >= lens_desc[i] && (best == NONE || room[r] < room[best])) best = r;
        if (best == NONE) { best = rows++; room[best] = seq_len; }
        room[best] -= lens_desc[i];
        if (row_of) row_of[i] = best;
    }
    return rows;
}

/* Whether x is one of set's items (up to LFP_SET_ITEMS, NONE past the last). */
static int in_set(const uint32_t *set, uint32_t x)
{
    for (uint32_t j = 0; j < LFP_SET_ITEMS && set[j] != NONE; j++)
        if (set[j] == x) return 1;
    return 0;
}

/* Padded tokens of rank r's members, with the items of set `add` added and
 * those of `drop` left out. */
static uint64_t rank_padded(lfp_split *s, const lfp_items *it, const lfp_caps *caps,
                            uint32_t r, const uint32_t *add, const uint32_t *drop)
{
    size_t m = 0;
    uint64_t maxlen = 0;
    for (uint32_t p = s->rank_start[r]; p < s->rank_start[r + 1]; p++) {
        uint32_t x = s->members[p];
        if (in_set(drop, x)) continue;
        s->scratch[m++] = it->len[x];
    }
    for (uint32_t j = 0; j < LFP_SET_ITEMS && add[j] != NONE; j++) s->scratch[m++] = it->len[add[j]];
    if (caps->layout == LF_PLAN_PACK) {
        qsort(s->scratch, m, sizeof(uint64_t), cmp_desc_u64);
        return (uint64_t)lfp_pack_rows(s->scratch, m, caps->seq_len, s->room, NULL) * caps->seq_len;
    }
    for (size_t i = 0; i < m; i++) if (s->scratch[i] > maxlen) maxlen = s->scratch[i];
    return maxlen * m;
}

/* Whether rank r stays within the caps after the items of set `add` come
 * in and those of `drop` go. */
static int set_fits(lfp_split *s, const lfp_items *it, const lfp_caps *caps, uint32_t r,
                    const uint32_t *add, const uint32_t *drop)
{
    uint64_t tok = s->tokens[r];
    for (uint32_t j = 0; j < LFP_SET_ITEMS; j++) {
        if (add[j] != NONE) tok += it->len[add[j]];
        if (drop[j] != NONE) tok -= it->len[drop[j]];
    }
    if (caps->max_tokens && tok > caps->max_tokens) return 0;
    if (caps->row_tokens && tok > caps->row_tokens) return 0;
    if (caps->max_padded && rank_padded(s, it, caps, r, add, drop) > caps->max_padded)
        return 0;
    if (caps->max_samples) {
        uint64_t n = rank_size(s, r);
        for (uint32_t j = 0; j < LFP_SET_ITEMS; j++) n += (add[j] != NONE) - (drop[j] != NONE);
        if (n > caps->max_samples) return 0;
    }
    return 1;
}

/* Whether rank r stays within the caps after adding `add` and dropping
 * `drop` (NONE for neither). */
static int rank_fits(lfp_split *s, const lfp_items *it, const lfp_caps *caps,
                     uint32_t r, uint32_t add, uint32_t drop)
{
    uint32_t a[LFP_SET_ITEMS], d[LFP_SET_ITEMS];
    for (uint32_t j = 0; j < LFP_SET_ITEMS; j++) a[j] = d[j] = NONE;
    a[0] = add;
    d[0] = drop;
    return set_fits(s, it, caps, r, a, d);
}

/* Moves item x to rank `to`. Between two ranks the members array stays
 * grouped by rank by passing a hole along the groups between them, one
 * entry each: O(|from - to|), where counting every item again made each
 * move of a 4096-rank search O(n + world). A move from or to NONE
 * (unplaced; only repair_caps makes one) counts again. */
static void move_item(lfp_split *s, const lfp_items *it, uint32_t x, uint32_t to)
{
    uint32_t from = s->assign[x];
    s->assign[x] = to;
    if (from == NONE || to == NONE) {
        rank_totals(s, it);
        return;
    }
    uint32_t hole = s->rank_start[from];
    while (s->members[hole] != x) hole++;
    for (uint32_t r = from; r < to; r++) {      /* the hole goes right */
        s->members[hole] = s->members[s->rank_start[r + 1] - 1];
        hole = --s->rank_start[r + 1];
    }
    for (uint32_t r = from; r > to; r--) {      /* the hole goes left */
        s->members[hole] = s->members[s->rank_start[r]];
        hole = s->rank_start[r]++;
    }
    s->members[hole] = x;
    s->cost[from] -= it->cost[x];
    s->cost[to] += it->cost[x];
    s->tokens[from] -= it->len[x];
    s->tokens[to] += it->len[x];
}

/* Swaps x and y between their ranks; the members array stays grouped by
 * rank by trading the two entries' places. */
static void swap_items(lfp_split *s, const lfp_items *it, uint32_t x, uint32_t y)
{
    uint32_t rx = s->assign[x], ry = s->assign[y], px = NONE, py = NONE;
    for (uint32_t p = s->rank_start[rx]; p < s->rank_start[rx + 1]; p++)
        if (s->members[p] == x) px = p;
    for (uint32_t p = s->rank_start[ry]; p < s->rank_start[ry + 1]; p++)
        if (s->members[p] == y) py = p;
    s->members[px] = y;
    s->members[py] = x;
    s->assign[x] = ry;
    s->assign[y] = rx;
    s->cost[rx] += it->cost[y] - it->cost[x];
    s->cost[ry] += it->cost[x] - it->cost[y];
    s->tokens[rx] += it->len[y] - it->len[x];
    s->tokens[ry] += it->len[x] - it->len[y];
}

/* Item a is a better pick than b: longer, then smaller id. */
static int longer(const lfp_items *it, uint32_t a, uint32_t b)
{
    if (b == NONE) return 1;
    if (it->len[a] != it->len[b]) return it->len[a] > it->len[b];
    return it->id[a] < it->id[b];
}

/* The cheapest rank other than `not` that can take item x, or NONE. */
static uint32_t cheapest_with_room(lfp_split *s, const lfp_items *it,
                                   const lfp_caps *caps, uint32_t x, uint32_t not)
{
    uint32_t best = NONE;
    for (uint32_t r = 0; r < s->world; r++) {
        if (r == not || (best != NONE && s->cost[r] >= s->cost[best])) continue;
        if (rank_fits(s, it, caps, r, x, NONE)) best = r;
    }
    return best;
}

/* Ranks over a cap give away their longest items, unplaced (NONE) where no
 * rank has room. */
static void repair_caps(lfp_split *s, const lfp_items *it, const lfp_caps *caps)
{
    if (!caps->max_tokens && !caps->max_padded && !caps->row_tokens && !caps->max_samples) return;
    for (uint32_t r = 0; r < s->world; r++) {
        while (rank_size(s, r) && !rank_fits(s, it, caps, r, NONE, NONE)) {
            uint32_t x = NONE;
            for (uint32_t p = s->rank_start[r]; p < s->rank_start[r + 1]; p++)
                if (longer(it, s->members[p], x)) x = s->members[p];
            uint32_t to = cheapest_with_room(s, it, caps, x, r);
            move_item(s, it, x, to);
        }
    }
}

/* ---- local search -------------------------------------------------------- */

#define LOCAL_GOOD_SHIFT 12
#define SWAP_WORK 8192u          /* sample pairs a swap search may look at */

typedef struct change {
    uint32_t x[LFP_SET_ITEMS];   /* the items that leave hi (NONE past the last) */
    uint32_t y[LFP_SET_ITEMS];   /* those that leave lo (NONE: none, a move) */
    uint64_t delta;              /* cost moved from hi to lo */
} change;

static const change NO_CHANGE = {{NONE, NONE, NONE, NONE}, {NONE, NONE, NONE, NONE}, 0};

/* x leaves hi, y (or NONE) leaves lo */
static change one_for_one(uint32_t x, uint32_t y, uint64_t delta)
{
    change c = NO_CHANGE;
    c.x[0] = x;
    c.y[0] = y;
    c.delta = delta;
    return c;
}

/* How far moving delta between two ranks gap apart lands from halving
 * the gap (doubled, to stay in integers). */
static uint64_t off_half(uint64_t gap, uint64_t delta)
{
    return 2 * delta > gap ? 2 * delta - gap : gap - 2 * delta;
}

/* Is moving `delta` from hi to lo (gap apart) better than the current best?
 * Better: closer to gap/2; ties by the smaller ids (x, then y). */
static int better(const lfp_items *it, uint64_t gap, uint64_t delta, uint32_t x,
                  uint32_t y, const change *best)
{
    if (delta == 0 || delta >= gap) return 0;
    if (best->x[0] == NONE) return 1;
    uint64_t d1 = off_half(gap, delta), d0 = off_half(gap, best->delta);
    if (d1 != d0) return d1 < d0;
    uint32_t bx = best->x[0], by = best->y[0];
    if (it->id[x] != it->id[bx]) return it->id[x] < it->id[bx];
    if (y == NONE || by == NONE) return y == NONE && by != NONE;
    return it->id[y] < it->id[by];
}

/* Rank r's items into keys[0..m), costliest first (ties: the smaller id),
 * keys[m..2m) the sort's scratch; returns m. */
static uint32_t sorted_rank(const lfp_split *s, const lfp_items *it, uint32_t r, lfp_key *keys)
{
    uint32_t m = rank_size(s, r);
    for (uint32_t q = 0; q < m; q++) {
        uint32_t y = s->members[s->rank_start[r] + q];
        keys[q] = (lfp_key){it->cost[y], it->id[y], y};
    }
    lfp_sort_keys(keys, m, keys + m);
    return m;
}

/* The first place in keys[0..n), costliest first, whose cost is at most t
 * (n: none). */
static uint32_t first_at_most(const lfp_key *keys, uint32_t n, uint64_t t)
{
    uint32_t a = 0, b = n;
    while (a < b) {
        uint32_t mid = a + (b - a) / 2;
        if (keys[mid].len > t) a = mid + 1;
        else b = mid;
    }
    return a;
}

/* The best change between hi and lo: a move if any helps (O(m)), else the
 * best swap (O(m^2)) while *swap_work, the pairs left to look at, lasts. */
static change best_change(lfp_split *s, const lfp_items *it, const lfp_caps *caps,
                          uint32_t hi, uint32_t lo, uint64_t *swap_work)
{
    change best = NO_CHANGE;
    uint64_t gap = s->cost[hi] - s->cost[lo];
    for (uint32_t p = s->rank_start[hi]; p < s->rank_start[hi + 1]; p++) {
        uint32_t x = s->members[p];
        if (better(it, gap, it->cost[x], x, NONE, &best) &&
            rank_fits(s, it, caps, lo, x, NONE))
            best = one_for_one(x, NONE, it->cost[x]);
    }
    uint64_t pairs = (uint64_t)rank_size(s, hi) * rank_size(s, lo);
    if (best.x[0] != NONE || pairs > *swap_work) return best;
    *swap_work -= pairs;
    /* A swap gains only if y is cheaper than x by less than the gap: with
     * lo's items sorted costliest first, those are a run found by bisection.
     * `better` orders candidates totally, so the order they come in does
     * not change the choice. */
    lfp_key *ly = s->lo_keys;
    uint32_t nlo = sorted_rank(s, it, lo, ly);
    for (uint32_t p = s->rank_start[hi]; p < s->rank_start[hi + 1]; p++) {
        uint32_t x = s->members[p];
        uint64_t cx = it->cost[x];
        uint32_t a = first_at_most(ly, nlo, cx - 1);   /* the first item cheaper than x */
        for (uint32_t q = a; q < nlo && cx - ly[q].len < gap; q++) {
            uint32_t y = ly[q].idx;
            uint64_t delta = cx - ly[q].len;
            if (better(it, gap, delta, x, y, &best) && rank_fits(s, it, caps, lo, x, y) &&
                rank_fits(s, it, caps, hi, y, x))
                best = one_for_one(x, y, delta);
        }
    }
    return best;
}

/* ---- the last resort: sets for sets ----
 *
 * Where no single move or swap helps, up to LFP_SET_ITEMS items of the
 * costliest rank for up to as many of a cheaper one (none: a move). On text
 * split into pieces of one length most items cost the same, and a rank's
 * cost moves in whole pieces unless its short items make up the rest: a
 * short item for two or three, or a piece for four short ones, reaches
 * sums one for one cannot (dev-text split at 2048, world 64, 16 a rank:
 * p99 1.00285 with one for one, 1.00078 with sets). Each rank's sets are
 * listed once per distinct multiset of costs (equal items are
 * interchangeable: a rank of thirteen whole pieces has 4 sets of them, not
 * 1092), at most LFP_SETS_MAX;
 * for each set of hi, bisection over lo's sets, sorted by sum, finds those
 * nearest to it less half the gap, within the caps (pack: the rank's rows
 * still hold its items by best-fit decreasing). Only while the costliest
 * rank is over the mean
 * by more than 2^-EXCHANGE_SHIFT (0.1 %, half the 1.002): a step
 * that one-for-one changes left closer keeps its split, bit for bit, and
 * costs no more planning. */
#define EXCHANGE_SHIFT 10
#define EXCHANGE_WORK (1u << 20)   /* sets a step's search may list */

typedef struct set_list {
    lfp_key *keys;               /* (sum, entry, entry) */
    uint32_t *items;             /* entry e's items: items[e * LFP_SET_ITEMS ..] */
    uint32_t n;
} set_list;

/* Lists the sets of k[start..m) (costliest first) of up to LFP_SET_ITEMS
 * items that extend chosen[0..depth) (summing to sum), one per multiset of
 * costs, in a fixed order, while there is room. */
static void list_sets(const lfp_key *k, uint32_t m, uint32_t start, uint32_t depth,
                      uint64_t sum, uint32_t *chosen, set_list *l)
{
    for (uint32_t i = start; i < m && l->n < LFP_SETS_MAX; i++) {
        if (i > start && k[i].len == k[i - 1].len) continue;   /* the same multiset */
        chosen[depth] = k[i].idx;
        uint32_t e = l->n++, *items = l->items + (size_t)e * LFP_SET_ITEMS;
        for (uint32_t j = 0; j < LFP_SET_ITEMS; j++) items[j] = j <= depth ? chosen[j] : NONE;
        l->keys[e] = (lfp_key){sum + k[i].len, e, e};
        if (depth + 1 < LFP_SET_ITEMS) list_sets(k, m, i + 1, depth + 1, sum + k[i].len, chosen, l);
    }
}

/* Rank r's sets into l, with the empty set first if `empty`. */
static void rank_sets(lfp_split *s, const lfp_items *it, uint32_t r, int empty, set_list *l)
{
    uint32_t chosen[LFP_SET_ITEMS];
    l->n = 0;
    if (empty) {
        for (uint32_t j = 0; j < LFP_SET_ITEMS; j++) l->items[j] = NONE;
        l->keys[l->n++] = (lfp_key){0, 0, 0};
    }
    uint32_t m = sorted_rank(s, it, r, s->lo_keys);
    list_sets(s->lo_keys, m, 0, 0, 0, chosen, l);
}

/* Whether delta (cost from hi to lo, gap apart) helps and lands nearer to
 * gap/2 than the best so far (the first found wins ties: the sets' order
 * makes that deterministic). */
static int nearer(uint64_t gap, uint64_t delta, const change *best)
{
    if (delta == 0 || delta >= gap) return 0;
    return best->x[0] == NONE || off_half(gap, delta) < off_half(gap, best->delta);
}

/* The best exchange of a set of hi's (listed in h) for a set of lo's, the
 * cost moved nearest to half their gap. */
static change best_exchange(lfp_split *s, const lfp_items *it, const lfp_caps *caps,
                            const set_list *h, uint32_t hi, uint32_t lo, uint64_t *work)
{
    change best = NO_CHANGE;
    set_list l = {s->set_keys + LFP_SETS_MAX, s->set_items + LFP_SETS_MAX * LFP_SET_ITEMS, 0};
    rank_sets(s, it, lo, 1, &l);
    *work = *work > l.n ? *work - l.n : 0;
    lfp_sort_keys(l.keys, l.n, s->set_keys + 2 * LFP_SETS_MAX);
    uint64_t gap = s->cost[hi] - s->cost[lo];
    for (uint32_t a = 0; a < h->n; a++) {
        uint64_t sum = h->keys[a].len, t = sum > gap / 2 ? sum - gap / 2 : 0;
        uint32_t q = first_at_most(l.keys, l.n, t);
        for (uint32_t b = q > 0 ? q - 1 : q; b <= q && b < l.n; b++) {
            uint64_t c = l.keys[b].len;
            if (c >= sum || !nearer(gap, sum - c, &best)) continue;
            const uint32_t *x = h->items + (size_t)h->keys[a].idx * LFP_SET_ITEMS;
            const uint32_t *y = l.items + (size_t)l.keys[b].idx * LFP_SET_ITEMS;
            if (!set_fits(s, it, caps, lo, x, y) || !set_fits(s, it, caps, hi, y, x)) continue;
            memcpy(best.x, x, sizeof best.x);
            memcpy(best.y, y, sizeof best.y);
            best.delta = sum - c;
        }
    }
    return best;
}

/* Whether the costliest rank, cost `top`, is within 2^-shift of the mean. */
static int close_enough(uint64_t top, uint32_t world, lfp_u128 total, int shift)
{
    return ((lfp_u128)top * world - total) << shift <= total;
}

/* The first place in ord[0..n), ranks in search order (cheaper first, ties
 * the lower number), whose rank does not come before cost c and rank r. */
static size_t rank_bound(const lfp_split *s, const uint32_t *ord, size_t n, uint64_t c,
                         uint32_t r)
{
    size_t a = 0, b = n;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        uint64_t cm = s->cost[ord[mid]];
        if (cm < c || (cm == c && ord[mid] < r)) a = mid + 1;
        else b = mid;
    }
    return a;
}

/* Puts rank r, out of ord (n - 1 ranks), back in its place. */
static void rank_insert(const lfp_split *s, uint32_t *ord, size_t n, uint32_t r)
{
    size_t q = rank_bound(s, ord, n - 1, s->cost[r], r);
    memmove(ord + q + 1, ord + q, (n - 1 - q) * sizeof *ord);
    ord[q] = r;
}

/* Applies change c between hi and lo and keeps ord, all ranks in search
 * order, sorted: only these two ranks move. */
static void apply_change(lfp_split *s, const lfp_items *it, uint32_t *ord, change c,
                         uint32_t hi, uint32_t lo)
{
    size_t k = s->world, ph = rank_bound(s, ord, k, s->cost[hi], hi);
    size_t pl = rank_bound(s, ord, k, s->cost[lo], lo);
    if (c.x[1] == NONE && c.y[0] != NONE && c.y[1] == NONE) {
        swap_items(s, it, c.x[0], c.y[0]);
    } else {
        for (uint32_t j = 0; j < LFP_SET_ITEMS; j++) {
            if (c.x[j] != NONE) move_item(s, it, c.x[j], lo);
            if (c.y[j] != NONE) move_item(s, it, c.y[j], hi);
        }
    }
    size_t first = ph < pl ? ph : pl, last = ph < pl ? pl : ph;
    memmove(ord + last, ord + last + 1, (k - 1 - last) * sizeof *ord);
    memmove(ord + first, ord + first + 1, (k - 2 - first) * sizeof *ord);
    rank_insert(s, ord, k - 1, hi);
    rank_insert(s, ord, k, lo);
}

/* Improves the costliest rank (the lowest number on ties) against the
 * cheapest rank that allows a change, trying ranks cheapest first (ties by
 * rank number); swaps only while SWAP_WORK pairs last, so a step of long
 * rank lists stays cheap, and set exchanges while *work, the sets the
 * step's search may still list, lasts. ord holds the ranks in that order. */
static int improve_once(lfp_split *s, const lfp_items *it, const lfp_caps *caps,
                        uint32_t *ord, lfp_u128 total, uint64_t *work)
{
    uint32_t k = s->world, hi = ord[rank_bound(s, ord, k, s->cost[ord[k - 1]], 0)];
    /* close enough: the costliest rank within 2^-12 (0.024%) of the mean */
    if (close_enough(s->cost[hi], k, total, LOCAL_GOOD_SHIFT)) return 0;
    uint64_t swap_work = SWAP_WORK;
    for (uint32_t i = 0; s->cost[ord[i]] < s->cost[hi]; i++) {
        uint32_t lo = ord[i];
        change c = best_change(s, it, caps, hi, lo, &swap_work);
        if (c.x[0] == NONE) continue;
        apply_change(s, it, ord, c, hi, lo);
        return 1;
    }
    if (close_enough(s->cost[hi], k, total, EXCHANGE_SHIFT))
        return 0;
    set_list h = {s->set_keys, s->set_items, 0};
    if (*work) rank_sets(s, it, hi, 0, &h);
    *work = *work > h.n ? *work - h.n : 0;
    for (uint32_t i = 0; *work && s->cost[ord[i]] < s->cost[hi]; i++) {
        uint32_t lo = ord[i];
        change c = best_exchange(s, it, caps, &h, hi, lo, work);
        if (c.x[0] == NONE) continue;
        apply_change(s, it, ord, c, hi, lo);
        return 1;
    }
    return 0;
}

/* Rounds of improve_once. The ranks are sorted once (a key's "length" is
 * the cost below the costliest possible, so cheaper sorts first) and kept
 * sorted as changes move two of them: sorting them every round cost
 * O(world log world) a round, most of a 4096-rank step's planning. A change
 * moves cost between two ranks, so the total stays as it is. */
static void local_search(lfp_split *s, const lfp_items *it, const lfp_caps *caps)
{
    uint32_t k = s->world, *ord = s->rank_order;
    lfp_key *keys = s->rank_keys;
    lfp_u128 total = 0;          /* offsets (d per micro-batch) pass 2^64 in sum */
    for (uint32_t r = 0; r < k; r++) {
        keys[r] = (lfp_key){UINT64_MAX - s->cost[r], r, r};
        total += s->cost[r];
    }
    lfp_sort_keys(keys, k, keys + k);
    for (uint32_t r = 0; r < k; r++) ord[r] = keys[r].idx;
    uint64_t work = EXCHANGE_WORK;
    for (uint32_t iter = 0; iter < 4 * k && improve_once(s, it, caps, ord, total, &work);
         iter++) {
    }
}

/* Sorts the items costliest first (ties: smaller id) into keys[]. */
static void sort_by_cost(lfp_split *s, const lfp_items *it)
{
    for (size_t i = 0; i < it->n; i++)
        s->keys[i] = (lfp_key){it->cost[i], it->id[i], (uint32_t)i};
    lfp_sort_keys(s->keys, it->n, s->keys + it->n);
}

/* A match of a tournament tree over the ranks (leaves past the last rank
 * included): which of two leaves' ranks goes up. */
typedef uint32_t (*match_fn)(const lfp_split *s, uint32_t a, uint32_t b);

/* Plays every match of tree win, its leaves set. */
static void play_all(const lfp_split *s, uint32_t *win, match_fn winner)
{
    for (uint32_t t = s->leaves; t-- > 1;) win[t] = winner(s, win[2 * t], win[2 * t + 1]);
}

/* Plays the matches on leaf r's path to the root again. */
static void replay(const lfp_split *s, uint32_t *win, uint32_t r, match_fn winner)
{
    for (uint32_t t = (s->leaves + r) / 2; t >= 1; t /= 2)
        win[t] = winner(s, win[2 * t], win[2 * t + 1]);
}

/* The winner of two ranks in the LPT tournament: the cheaper, ties the lower. */
static uint32_t cheaper(const lfp_split *s, uint32_t a, uint32_t b)
{
    const uint64_t *cost = s->tree_cost;
    return cost[b] < cost[a] || (cost[b] == cost[a] && b < a) ? b : a;
}

/* LPT for keys[m..n): each item, costliest first, to the cheapest rank
 * (ties: the lower). The cheapest rank is kept by a tournament tree over
 * the ranks (leaves past the last rank cost the most there is): after a
 * rank's cost grows, only its path to the root is played again. */
static void lpt_assign(lfp_split *s, const lfp_items *it, size_t m)
{
    uint32_t k = s->world, leaves = s->leaves, *win = s->tree;
    uint64_t *cost = s->tree_cost;
    for (uint32_t r = 0; r < leaves; r++) cost[r] = r < k ? 0 : UINT64_MAX;
    for (size_t i = 0; i < m; i++) cost[s->assign[s->keys[i].idx]] += it->cost[s->keys[i].idx];
    for (uint32_t r = 0; r < leaves; r++) win[leaves + r] = r;
    play_all(s, win, cheaper);
    for (size_t i = m; i < it->n; i++) {
        uint32_t x = s->keys[i].idx, r = win[1];
        s->assign[x] = r;
        cost[r] += it->cost[x];
        replay(s, win, r, cheaper);
    }
    memcpy(s->cost, cost, k * sizeof(uint64_t));
}

/* pack: the row of rank r that best-fit decreasing would put an item of
 * len into (the one it fills most tightly, ties: the first opened), or
 * NEW_ROW if it would open one and r has fewer than cap rows, else NONE. */
#define NEW_ROW (NONE - 1)

static uint32_t row_for(const lfp_split *s, uint32_t r, uint64_t len, uint32_t cap)
{
    uint32_t best = NONE;
    for (uint32_t w = s->row_head[r]; w != NONE; w = s->row_next[w])
        if (s->row_room[w] >= len && (best == NONE || s->row_room[w] < s->row_room[best]))
            best = w;
    if (best == NONE && s->rank_rows[r] < cap) return NEW_ROW;
    return best;
}

/* Puts item x into rank r's row w (from row_for; NONE: over the rows). */
static void row_put(lfp_split *s, const lfp_items *it, uint32_t x, uint32_t r, uint32_t w,
                    uint32_t seq_len, uint32_t *tail)
{
    if (w == NEW_ROW) {
        w = s->nrows++;
        s->row_room[w] = seq_len;
        s->row_next[w] = NONE;
        if (s->row_head[r] == NONE) s->row_head[r] = w;
        else s->row_next[tail[r]] = w;
        tail[r] = w;
        s->rank_rows[r]++;
    }
    if (w != NONE) s->row_room[w] -= it->len[x];
    s->row_of[x] = w;
    s->assign[x] = r;
    s->cost[r] += it->cost[x];
    s->tokens[r] += it->len[x];
    s->excess[r] += it->excess[x];
}

/* Lengths of rank r's items, longest first (the keys' order), with item y
 * left out and item x put in, into s->scratch; returns how many. */
static size_t rank_lens(lfp_split *s, const lfp_items *it, uint32_t r, uint32_t x, uint32_t y)
{
    size_t m = 0;
    for (size_t k = 0; k < it->n; k++) {
        uint32_t i = s->keys[k].idx;
        if (i == x || (s->assign[i] == r && i != y)) s->scratch[m++] = it->len[i];
    }
    return m;
}

/* Packs rank r's rows again, best-fit decreasing over its items in the
 * keys' order as the layout will, reusing its row slots and opening more
 * where needed. */
static void repack_rank(lfp_split *s, const lfp_items *it, uint32_t r, uint32_t seq_len,
                        uint32_t *tail)
{
    uint32_t w = s->row_head[r];
    for (; w != NONE; w = s->row_next[w]) s->row_room[w] = seq_len;
    uint32_t slots = s->rank_rows[r];
    s->rank_rows[r] = 0;
    for (size_t k = 0; k < it->n; k++) {
        uint32_t i = s->keys[k].idx, best = NONE, used = 0;
        if (s->assign[i] != r) continue;
        for (w = s->row_head[r]; w != NONE && used < s->rank_rows[r]; w = s->row_next[w], used++)
            if (s->row_room[w] >= it->len[i] && (best == NONE || s->row_room[w] < s->row_room[best]))
                best = w;
        if (best == NONE && s->rank_rows[r] < slots) {          /* the next slot */
            best = s->row_head[r];
            for (used = 0; used < s->rank_rows[r]; used++) best = s->row_next[best];
            s->rank_rows[r]++;
        } else if (best == NONE) {                               /* a new slot */
            best = s->nrows++;
            s->row_room[best] = seq_len;
            s->row_next[best] = NONE;
            s->row_next[tail[r]] = best;
            tail[r] = best;
            s->rank_rows[r]++;
            slots++;
        }
        s->row_room[best] -= it->len[i];
        s->row_of[i] = best;
    }
    s->rank_rows[r] = slots;
}

/* pack: x, an urgent item no rank has room for, takes the place of the
 * shortest item that is not urgent and whose row has room for x once it is
 * out (ties: the smaller id), provided the rank's items then still pack
 * into its rows by best-fit decreasing; the other is left unplaced
 * instead. Returns whether x was placed. */
static int make_room(lfp_split *s, const lfp_items *it, const lfp_caps *caps, uint32_t x,
                     uint32_t cap, uint32_t *tail)
{
    uint32_t y = NONE;
    for (size_t i = 0; i < it->n; i++) {
        uint32_t r = s->assign[i];
        if (r == NONE || it->urgent[i] || s->row_of[i] == NONE ||
            it->len[i] + caps->row_tokens - s->tokens[r] < it->len[x] ||
            it->len[i] + s->row_room[s->row_of[i]] < it->len[x])
            continue;
        if (y == NONE || it->len[i] < it->len[y] ||
            (it->len[i] == it->len[y] && it->id[i] < it->id[y]))
            y = (uint32_t)i;
    }
    if (y == NONE || s->nrows + cap > s->maxn + 1) return 0;
    uint32_t r = s->assign[y];
    size_t m = rank_lens(s, it, r, x, y);
    if (lfp_pack_rows(s->scratch, m, caps->seq_len, s->room, NULL) > cap) return 0;
    s->assign[y] = NONE;
    s->assign[x] = r;
    s->cost[r] += it->cost[x] - it->cost[y];
    s->tokens[r] += it->len[x] - it->len[y];
    s->excess[r] += it->excess[x] - it->excess[y];
    repack_rank(s, it, r, caps->seq_len, tail);
    return 1;
}

/* pack: one more than the longest item rank r can take now (0: none), as
 * lpt_fill_rows asks it of a rank: its tokens stay within row_tokens, and a
 * row has room for the item or r may open one more (fewer than cap rows). */
static uint64_t fit_of(const lfp_split *s, uint32_t r, uint32_t cap, uint64_t row_tokens)
{
    if (s->tokens[r] > row_tokens) return 0;
    uint64_t room = row_tokens - s->tokens[r] + 1, rows = 0;
    if (s->rank_rows[r] < cap) return room;
    for (uint32_t w = s->row_head[r]; w != NONE; w = s->row_next[w])
        if (s->row_room[w] + 1 > rows) rows = s->row_room[w] + 1;
    return rows < room ? rows : room;
}

/* The row fill's pick of two ranks in play (NONE: not in play): the least
 * excess, then the cheaper, then the lower. */
static uint32_t leaner(const lfp_split *s, uint32_t a, uint32_t b)
{
    if (a == NONE || b == NONE) return a == NONE ? b : a;
    if (s->excess[a] != s->excess[b]) return s->excess[b] < s->excess[a] ? b : a;
    if (s->cost[a] != s->cost[b]) return s->cost[b] < s->cost[a] ? b : a;
    return b < a ? b : a;
}

/* Of two ranks out of play, the one that can take the longer item (ties:
 * the lower); a rank in play, or past the world, has fit 0 here. */
static uint32_t roomier(const lfp_split *s, uint32_t a, uint32_t b)
{
    return s->fit[b] > s->fit[a] || (s->fit[b] == s->fit[a] && b < a) ? b : a;
}

/* Puts rank r in play, or out of play waiting with `fit` (fit_of). */
static void place_rank(lfp_split *s, uint32_t r, int in_play, uint64_t fit)
{
    s->tree[s->leaves + r] = in_play ? r : NONE;
    s->fit[r] = in_play ? 0 : fit;
    replay(s, s->tree, r, leaner);
    replay(s, s->fit_tree, r, roomier);
}

/* Puts rank r in play (s->tree) when it can take an item of len, else out
 * of play (s->fit_tree) until the items are short enough for it. */
static void seat_rank(lfp_split *s, uint32_t r, uint64_t len, uint32_t cap,
                      uint64_t row_tokens)
{
    uint64_t fit = fit_of(s, r, cap, row_tokens);
    place_rank(s, r, fit > len, fit);
}

/* Puts in play every rank out of play that can take an item of len. */
static void wake_ranks(lfp_split *s, uint64_t len)
{
    for (uint32_t r; s->fit[r = s->fit_tree[1]] > len;) place_rank(s, r, 1, 0);
}

/* The rank in play with the least excess that can take an item of len
 * (NONE: none can). Items come costliest first, which is longest first
 * where cost grows with length; where it does not (a flat cost, fixed-point
 * rounding), a rank in play may have no room for this one: it is put out
 * of play here, and the next in play is looked at. */
static uint32_t pick_rank(lfp_split *s, uint64_t len, uint32_t cap, uint64_t row_tokens)
{
    wake_ranks(s, len);
    uint32_t r;
    while ((r = s->tree[1]) != NONE) {
        uint64_t fit = fit_of(s, r, cap, row_tokens);
        if (fit > len) break;
        place_rank(s, r, 0, fit);    /* out of play until the items are that short */
    }
    return r;
}

/* pack: the rest, keys[m..n), into the ranks' rows. A rank's cost is the
 * leanest price times its tokens plus its items' excess over that price; the
 * rows hold the tokens, so equal cost needs equal excess. Each item, longest
 * first, goes to the rank with the least excess whose rows still have room
 * for it (ties: the cheaper, then the lower rank): the large items even the
 * excess out and the small ones, nearly all tokens, fill the rows. Room is
 * judged as best-fit decreasing will pack the rank (layout.c), row by row,
 * so the rank's rows hold what it gets; the KK items, the longest, go
 * first. An item no rank has room for stays unplaced.
 *
 * The ranks that have room are in play in one tournament tree (least
 * excess wins), the others wait in a second by how long an item they can
 * take (fit_of). Items come longest first, so a rank in play stays able to
 * take every later item until it takes one itself; then it is seated again,
 * and waiting ranks come into play as the items get short enough
 * (pick_rank). Each item costs O(log world) where a scan of every rank made
 * the fill O(n world) (1.25 s a step at world 4096), with the same choices. */
static void lpt_fill_rows(lfp_split *s, const lfp_items *it, size_t m, const lfp_caps *caps)
{
    uint32_t k = s->world;
    uint32_t cap = (uint32_t)((caps->row_tokens + caps->seq_len - 1) / caps->seq_len);
    uint32_t *tail = s->tmp_aux;
    memset(s->cost, 0, k * sizeof(uint64_t));
    memset(s->tokens, 0, k * sizeof(uint64_t));
    memset(s->excess, 0, k * sizeof(uint64_t));
    memset(s->rank_rows, 0, k * sizeof(uint32_t));
    for (uint32_t r = 0; r < k; r++) s->row_head[r] = NONE;
    s->nrows = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t x = s->keys[i].idx, r = s->assign[x];
        row_put(s, it, x, r, row_for(s, r, it->len[x], cap), caps->seq_len, tail);
    }
    for (uint32_t r = 0; r < s->leaves; r++) {
        s->tree[s->leaves + r] = NONE;
        s->fit_tree[s->leaves + r] = r;
        s->fit[r] = r < k ? fit_of(s, r, cap, caps->row_tokens) : 0;
    }
    play_all(s, s->tree, leaner);
    play_all(s, s->fit_tree, roomier);
    for (size_t i = m; i < it->n; i++) {
        uint32_t x = s->keys[i].idx, r = pick_rank(s, it->len[x], cap, caps->row_tokens);
        if (r != NONE)
            row_put(s, it, x, r, row_for(s, r, it->len[x], cap), caps->seq_len, tail);
        else if (it->urgent[x] && make_room(s, it, caps, x, cap, tail))
            r = s->assign[x];
        else
            s->assign[x] = NONE;
        if (r != NONE) seat_rank(s, r, it->len[x], cap, caps->row_tokens);
    }
}

size_t lfp_split_run(lfp_split *s, const lfp_items *it, const lfp_caps *caps)
{
    size_t m = (size_t)s->world * KK_PER_RANK;
    if (it->kk > m) m = it->kk;
    if (m > it->n) m = it->n;
    memset(s->offset, 0, s->world * sizeof(uint64_t));
    for (size_t i = 0; i < it->n; i++) s->assign[i] = NONE;
    sort_by_cost(s, it);
    kk_assign(s, it, m);
    if (caps->row_tokens) lpt_fill_rows(s, it, m, caps);
    else lpt_assign(s, it, m);
    rank_totals(s, it);
    repair_caps(s, it, caps);
    size_t unplaced = 0;
    for (size_t i = 0; i < it->n; i++) unplaced += s->assign[i] == NONE;
    local_search(s, it, caps);
    return unplaced;
}

void lfp_split_polish(lfp_split *s, const lfp_items *it, const lfp_caps *caps)
{
    rank_totals(s, it);
    local_search(s, it, caps);
}
