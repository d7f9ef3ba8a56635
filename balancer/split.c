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
 * Tuples are sparse (only their non-empty subsets are stored) because most
 * merges early on involve tuples holding a few items, and each subset is a
 * linked list of items so combining two is O(1). Subset slots live in a bump
 * arena; when it fills, the live tuples (never more slots than items) are
 * copied to the other half, so the arena is bounded by 2n + k slots.
 *
 * KK runs over the world * 4 costliest items only: past those, the rest are
 * small next to a rank's load, and LPT (costliest first, each to the
 * cheapest rank, kept by a tournament tree) places them in O(n log k) where
 * KK's merges of full k-tuples would cost O(n k). The small items going
 * last is what evens the ranks out.
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
 * first, the single move that best halves their gap, else the best swap (a
 * move is O(m); a swap looks at the items of the cheaper rank within the
 * gap below each item of the costlier, found by bisecting their sorted
 * costs, and swaps stop after 8192 pairs per round); it stops when nothing
 * helps or the costliest rank is within 2^-12 of the mean. Memory caps (tokens, padded
 * tokens) are enforced here: ranks over a cap first hand their longest items
 * to the cheapest rank with room, and items no rank has room for are left
 * unplaced for the caller to defer. Every choice breaks ties by item cost,
 * then sample id, then rank number, so the result depends on nothing but the
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
    s->arena_cap = 2 * maxn + world + 1;
    size_t nt = maxn + 1;
    for (int i = 0; i < 2; i++) {
        s->sub_sum[i] = malloc(s->arena_cap * sizeof(uint64_t));
        s->sub_head[i] = malloc(s->arena_cap * sizeof(uint32_t));
        s->sub_tail[i] = malloc(s->arena_cap * sizeof(uint32_t));
    }
    s->tup_off = malloc(2 * nt * sizeof(uint32_t));
    s->tup_len = malloc(2 * nt * sizeof(uint32_t));
    s->tup_seq = malloc(2 * nt * sizeof(uint64_t));
    s->tup_spread = malloc(2 * nt * sizeof(uint64_t));
    s->heap = malloc(nt * sizeof(uint32_t));
    s->next = malloc(nt * sizeof(uint32_t));
    s->tmp_sum = malloc(((size_t)world + 1) * sizeof(uint64_t));
    s->tmp_head = malloc(((size_t)world + 1) * sizeof(uint32_t));
    s->tmp_tail = malloc(((size_t)world + 1) * sizeof(uint32_t));
    s->tmp_ord = malloc(((size_t)world + 1) * sizeof(uint32_t));
    s->tmp_aux = malloc(((size_t)world + 1) * sizeof(uint32_t));
    s->assign = malloc(nt * sizeof(uint32_t));
    s->cost = malloc(((size_t)world + 1) * sizeof(uint64_t));
    s->tokens = malloc(((size_t)world + 1) * sizeof(uint64_t));
    s->count = malloc(((size_t)world + 1) * sizeof(uint32_t));
    s->excess = malloc(((size_t)world + 1) * sizeof(uint64_t));
    for (s->leaves = 1; s->leaves < world; s->leaves *= 2) {
    }
    s->tree = malloc(2 * (size_t)s->leaves * sizeof(uint32_t));
    s->tree_cost = malloc((size_t)s->leaves * sizeof(uint64_t));
    s->lo_keys = malloc(2 * nt * sizeof *s->lo_keys);
    s->rank_keys = malloc(2 * ((size_t)world + 1) * sizeof *s->rank_keys);
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
    for (int i = 0; i < 2; i++)
        if (!s->sub_sum[i] || !s->sub_head[i] || !s->sub_tail[i]) goto fail;
    if (!s->tup_off || !s->tup_len || !s->tup_seq || !s->tup_spread || !s->heap ||
        !s->next || !s->tmp_sum || !s->tmp_head || !s->tmp_tail || !s->tmp_ord || !s->tmp_aux ||
        !s->assign || !s->cost || !s->tokens || !s->count || !s->excess || !s->tree ||
        !s->tree_cost || !s->lo_keys || !s->rank_keys || !s->rank_rows || !s->row_head ||
        !s->row_next || !s->row_of || !s->row_room || !s->members ||
        !s->rank_start || !s->scratch || !s->room || !s->keys || !s->offset)
        goto fail;
    return 0;
fail:
    lfp_split_free(s);
    return LF_PLAN_E_NOMEM;
}

void lfp_split_free(lfp_split *s)
{
    for (int i = 0; i < 2; i++) {
        free(s->sub_sum[i]);
        free(s->sub_head[i]);
        free(s->sub_tail[i]);
    }
    free(s->tup_off); free(s->tup_len); free(s->tup_seq); free(s->tup_spread);
    free(s->heap); free(s->next);
    free(s->tmp_sum); free(s->tmp_head); free(s->tmp_tail); free(s->tmp_ord); free(s->tmp_aux);
    free(s->assign); free(s->cost); free(s->tokens); free(s->count); free(s->excess);
    free(s->tree); free(s->tree_cost); free(s->lo_keys); free(s->rank_keys);
    free(s->rank_rows); free(s->row_head); free(s->row_next); free(s->row_of); free(s->row_room);
    free(s->members); free(s->rank_start); free(s->scratch); free(s->room); free(s->keys);
    free(s->offset);
    memset(s, 0, sizeof *s);
}

/* ---- Karmarkar-Karp ------------------------------------------------------ */

/* Heap order: larger spread first, then older tuple. */
static int heap_before(const lfp_split *s, uint32_t x, uint32_t y)
{
    if (s->tup_spread[x] != s->tup_spread[y]) return s->tup_spread[x] > s->tup_spread[y];
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

/* Copies the live tuples (those in the heap) to the other arena half. */
static void arena_compact(lfp_split *s)
{
    int from = s->arena_cur, to = !from;
    size_t used = 0;
    for (size_t h = 0; h < s->heap_len; h++) {
        uint32_t t = s->heap[h], len = s->tup_len[t], off = s->tup_off[t];
        memcpy(s->sub_sum[to] + used, s->sub_sum[from] + off, len * sizeof(uint64_t));
        memcpy(s->sub_head[to] + used, s->sub_head[from] + off, len * sizeof(uint32_t));
        memcpy(s->sub_tail[to] + used, s->sub_tail[from] + off, len * sizeof(uint32_t));
        s->tup_off[t] = (uint32_t)used;
        used += len;
    }
    s->arena_cur = to;
    s->arena_used = used;
}

/* Merges two runs of tmp entries, each by sum largest first, from src into
 * dst (ties: the first run's entry first). */
static void merge_runs(const uint64_t *sum, const uint32_t *x, uint32_t nx,
                       const uint32_t *y, uint32_t ny, uint32_t *dst)
{
    uint32_t i = 0, j = 0, m = 0;
    if (nx == 0 || ny == 0) {            /* one run: a copy (full tuples' merges) */
        memcpy(dst, nx ? x : y, (nx ? nx : ny) * sizeof(uint32_t));
        return;
    }
    while (i < nx || j < ny)
        dst[m++] = (j >= ny || (i < nx && sum[x[i]] >= sum[y[j]])) ? x[i++] : y[j++];
}

/* Orders the merge result by sum, largest first. tmp entries come as three
 * runs: [0, na) a's subsets alone (descending), [na, na + nb) b's alone
 * (ascending), the rest a's and b's paired (nearly descending, since a's
 * spread is the larger). Each run is put in order, then they are merged. */
static void sort_tmp(lfp_split *s, uint32_t na, uint32_t nb, uint32_t m)
{
    uint32_t *ord = s->tmp_ord, *aux = s->tmp_aux;
    const uint64_t *sum = s->tmp_sum;
    for (uint32_t i = 0; i < na; i++) aux[i] = i;
    for (uint32_t i = 0; i < nb; i++) aux[na + i] = na + nb - 1 - i;
    for (uint32_t i = na + nb; i < m; i++) {
        uint32_t j = i;
        for (; j > na + nb && sum[aux[j - 1]] < sum[i]; j--) aux[j] = aux[j - 1];
        aux[j] = i;
    }
    merge_runs(sum, aux, na, aux + na, nb, ord);
    memcpy(aux, ord, (na + nb) * sizeof(uint32_t));
    merge_runs(sum, aux, na + nb, aux + na + nb, m - na - nb, ord);
}

/* Appends a subset (a's slot ia and/or b's slot ib, NONE for absent) to tmp. */
static inline void tmp_add(lfp_split *s, uint32_t *m, uint32_t ia, uint32_t ib)
{
    int cur = s->arena_cur;
    uint64_t sum = 0;
    uint32_t head = NONE, tail = NONE;
    if (ia != NONE) {
        sum = s->sub_sum[cur][ia];
        head = s->sub_head[cur][ia];
        tail = s->sub_tail[cur][ia];
    }
    if (ib != NONE) {
        sum += s->sub_sum[cur][ib];
        uint32_t bh = s->sub_head[cur][ib], bt = s->sub_tail[cur][ib];
        if (head == NONE) head = bh; else s->next[tail] = bh;
        tail = bt;
    }
    s->tmp_sum[*m] = sum; s->tmp_head[*m] = head; s->tmp_tail[*m] = tail;
    (*m)++;
}

static void set_spread(lfp_split *s, uint32_t t)
{
    const uint64_t *sum = s->sub_sum[s->arena_cur] + s->tup_off[t];
    uint32_t len = s->tup_len[t];
    s->tup_spread[t] = len == s->world ? sum[0] - sum[len - 1] : sum[0];
}

/* Combines tuples a (larger spread) and b into a new tuple: a's j-th largest
 * subset with b's j-th smallest (empty subsets count as zero). */
static uint32_t kk_merge(lfp_split *s, uint32_t a, uint32_t b, uint64_t seq)
{
    uint32_t k = s->world, m = 0;
    int cur = s->arena_cur;
    uint32_t la = s->tup_len[a], lb = s->tup_len[b];
    uint32_t oa = s->tup_off[a], ob = s->tup_off[b];
    /* Slot j of the result pairs a's j-th largest with b's (k-1-j)-th largest;
     * only the ends where one side is empty, and the overlap, hold anything. */
    uint32_t a_alone = la < k - lb ? la : k - lb;        /* j < k - lb: no b */
    uint32_t b_alone = lb < k - la ? lb : k - la;        /* j >= la: no a */
    for (uint32_t j = 0; j < a_alone; j++) tmp_add(s, &m, oa + j, NONE);
    for (uint32_t j = k - b_alone; j < k; j++) tmp_add(s, &m, NONE, ob + (k - 1 - j));
    for (uint32_t j = a_alone; la + lb > k && j < k - b_alone; j++)
        tmp_add(s, &m, oa + j, ob + (k - 1 - j));
    sort_tmp(s, a_alone, b_alone, m);
    uint64_t base = m == k ? s->tmp_sum[s->tmp_ord[m - 1]] : 0;
    if (s->arena_used + m > s->arena_cap) {
        arena_compact(s);
        cur = s->arena_cur;
    }
    uint32_t t = (uint32_t)s->ntup++, off = (uint32_t)s->arena_used;
    for (uint32_t i = 0; i < m; i++) {
        uint32_t o = s->tmp_ord[i];
        s->sub_sum[cur][off + i] = s->tmp_sum[o] - base;
        s->sub_head[cur][off + i] = s->tmp_head[o];
        s->sub_tail[cur][off + i] = s->tmp_tail[o];
    }
    s->arena_used += m;
    s->tup_off[t] = off; s->tup_len[t] = m; s->tup_seq[t] = seq;
    set_spread(s, t);
    return t;
}

/* Runs KK over the m costliest items (keys[0..m)); fills their assign[].
 * Subset j of the final tuple (largest first) becomes rank j. */
static void kk_assign(lfp_split *s, const lfp_items *it, size_t m)
{
    int cur = s->arena_cur = 0;
    s->arena_used = 0;
    s->ntup = 0;
    s->heap_len = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t t = (uint32_t)s->ntup++, x = s->keys[i].idx;
        s->sub_sum[cur][i] = it->excess ? it->excess[x] : it->cost[x];
        s->sub_head[cur][i] = s->sub_tail[cur][i] = x;
        s->next[x] = NONE;
        s->tup_off[t] = (uint32_t)i; s->tup_len[t] = 1;
        s->tup_seq[t] = i;                   /* equal costs: smaller id first */
        set_spread(s, t);
        s->heap[s->heap_len++] = t;
    }
    s->arena_used = m;
    for (size_t i = s->heap_len / 2; i-- > 0;) heap_down(s, i);
    uint64_t seq = UINT64_C(1) << 63;        /* merged tuples after every item */
    /* n items make n + (n - 1) tuples in all: ids never run out. */
    while (s->heap_len > 1) {
        uint32_t a = heap_pop(s), b = heap_pop(s);
        heap_push(s, kk_merge(s, a, b, seq++));
    }
    if (s->heap_len == 0) return;
    uint32_t t = s->heap[0];
    cur = s->arena_cur;
    for (uint32_t j = 0; j < s->tup_len[t]; j++)
        for (uint32_t x = s->sub_head[cur][s->tup_off[t] + j]; x != NONE; x = s->next[x])
            s->assign[x] = j;
}

/* ---- per-rank bookkeeping and caps --------------------------------------- */

static void rank_totals(lfp_split *s, const lfp_items *it)
{
    uint32_t k = s->world;
    memcpy(s->cost, s->offset, k * sizeof(uint64_t));
    memset(s->tokens, 0, k * sizeof(uint64_t));
    memset(s->count, 0, k * sizeof(uint32_t));
    for (size_t i = 0; i < it->n; i++) {
        uint32_t r = s->assign[i];
        if (r == NONE) continue;
        s->cost[r] += it->cost[i];
        s->tokens[r] += it->len[i];
        s->count[r]++;
    }
    s->rank_start[0] = 0;
    for (uint32_t r = 0; r < k; r++) s->rank_start[r + 1] = s->rank_start[r] + s->count[r];
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

/* Padded tokens of rank r's members, with item `add` added and `drop` left
 * out (NONE for neither). */
static uint64_t rank_padded(lfp_split *s, const lfp_items *it, const lfp_caps *caps,
                            uint32_t r, uint32_t add, uint32_t drop)
{
    size_t m = 0;
    uint64_t maxlen = 0;
    for (uint32_t p = s->rank_start[r]; p < s->rank_start[r + 1]; p++) {
        uint32_t x = s->members[p];
        if (x == drop) continue;
        s->scratch[m++] = it->len[x];
    }
    if (add != NONE) s->scratch[m++] = it->len[add];
    if (caps->layout == LF_PLAN_PACK) {
        qsort(s->scratch, m, sizeof(uint64_t), cmp_desc_u64);
        return (uint64_t)lfp_pack_rows(s->scratch, m, caps->seq_len, s->room, NULL) * caps->seq_len;
    }
    for (size_t i = 0; i < m; i++) if (s->scratch[i] > maxlen) maxlen = s->scratch[i];
    return maxlen * m;
}

/* Whether rank r stays within the caps after adding `add` and dropping `drop`. */
static int rank_fits(lfp_split *s, const lfp_items *it, const lfp_caps *caps,
                     uint32_t r, uint32_t add, uint32_t drop)
{
    uint64_t tok = s->tokens[r] + (add != NONE ? it->len[add] : 0) -
                   (drop != NONE ? it->len[drop] : 0);
    if (caps->max_tokens && tok > caps->max_tokens) return 0;
    if (caps->row_tokens && tok > caps->row_tokens) return 0;
    if (caps->max_padded && rank_padded(s, it, caps, r, add, drop) > caps->max_padded)
        return 0;
    return 1;
}

static void move_item(lfp_split *s, const lfp_items *it, uint32_t x, uint32_t to)
{
    s->assign[x] = to;
    rank_totals(s, it);
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
    if (!caps->max_tokens && !caps->max_padded && !caps->row_tokens) return;
    for (uint32_t r = 0; r < s->world; r++) {
        while (s->count[r] && !rank_fits(s, it, caps, r, NONE, NONE)) {
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
    uint32_t x, y;               /* x leaves hi; y (or NONE) leaves lo */
    uint64_t delta;              /* cost moved from hi to lo */
} change;

/* Is moving `delta` from hi to lo (gap apart) better than the current best?
 * Better: closer to gap/2; ties by the smaller ids (x, then y). */
static int better(const lfp_items *it, uint64_t gap, uint64_t delta, uint32_t x,
                  uint32_t y, const change *best)
{
    if (delta == 0 || delta >= gap) return 0;
    if (best->x == NONE) return 1;
    uint64_t d1 = 2 * delta > gap ? 2 * delta - gap : gap - 2 * delta;
    uint64_t d0 = 2 * best->delta > gap ? 2 * best->delta - gap : gap - 2 * best->delta;
    if (d1 != d0) return d1 < d0;
    if (it->id[x] != it->id[best->x]) return it->id[x] < it->id[best->x];
    if (y == NONE || best->y == NONE) return y == NONE && best->y != NONE;
    return it->id[y] < it->id[best->y];
}

/* The best change between hi and lo: a move if any helps (O(m)), else the
 * best swap (O(m^2)) while *swap_work, the pairs left to look at, lasts. */
static change best_change(lfp_split *s, const lfp_items *it, const lfp_caps *caps,
                          uint32_t hi, uint32_t lo, uint64_t *swap_work)
{
    change best = {NONE, NONE, 0};
    uint64_t gap = s->cost[hi] - s->cost[lo];
    for (uint32_t p = s->rank_start[hi]; p < s->rank_start[hi + 1]; p++) {
        uint32_t x = s->members[p];
        if (better(it, gap, it->cost[x], x, NONE, &best) &&
            rank_fits(s, it, caps, lo, x, NONE))
            best = (change){x, NONE, it->cost[x]};
    }
    uint64_t pairs = (uint64_t)s->count[hi] * s->count[lo];
    if (best.x != NONE || pairs > *swap_work) return best;
    *swap_work -= pairs;
    /* A swap gains only if y is cheaper than x by less than the gap: with
     * lo's items sorted costliest first, those are a run found by bisection.
     * `better` orders candidates totally, so the order they come in does
     * not change the choice. */
    uint32_t nlo = s->count[lo];
    lfp_key *ly = s->lo_keys;
    for (uint32_t q = 0; q < nlo; q++) {
        uint32_t y = s->members[s->rank_start[lo] + q];
        ly[q] = (lfp_key){it->cost[y], it->id[y], y};
    }
    lfp_sort_keys(ly, nlo, ly + nlo);
    for (uint32_t p = s->rank_start[hi]; p < s->rank_start[hi + 1]; p++) {
        uint32_t x = s->members[p], a = 0, b = nlo;
        uint64_t cx = it->cost[x];
        while (a < b) {                          /* the first item cheaper than x */
            uint32_t mid = a + (b - a) / 2;
            if (ly[mid].len >= cx) a = mid + 1;
            else b = mid;
        }
        for (uint32_t q = a; q < nlo && cx - ly[q].len < gap; q++) {
            uint32_t y = ly[q].idx;
            uint64_t delta = cx - ly[q].len;
            if (better(it, gap, delta, x, y, &best) && rank_fits(s, it, caps, lo, x, y) &&
                rank_fits(s, it, caps, hi, y, x))
                best = (change){x, y, delta};
        }
    }
    return best;
}

/* The costliest rank (lowest number on ties). */
static uint32_t costliest(const lfp_split *s)
{
    uint32_t hi = 0;
    for (uint32_t r = 1; r < s->world; r++)
        if (s->cost[r] > s->cost[hi]) hi = r;
    return hi;
}

/* Improves the costliest rank against the cheapest rank that allows a
 * change, trying ranks cheapest first (ties by rank number); swaps only
 * while SWAP_WORK pairs last, so a step of long rank lists stays cheap. */
static int improve_once(lfp_split *s, const lfp_items *it, const lfp_caps *caps)
{
    uint32_t k = s->world, hi = costliest(s);
    lfp_u128 total = 0;          /* offsets (d per micro-batch) pass 2^64 in sum */
    for (uint32_t r = 0; r < k; r++) total += s->cost[r];
    /* close enough: the costliest rank within 2^-12 (0.024%) of the mean */
    if (((lfp_u128)s->cost[hi] * k - total) << LOCAL_GOOD_SHIFT <= total) return 0;
    /* the cheaper ranks, cheapest first (ties: the lower number): keys
     * sort longest first, then by smaller id, so a rank's key is its gap
     * below hi. Many ranks take a radix sort, linear in them; a quadratic
     * sort here made the whole search O(world^3). */
    lfp_key *ord = s->rank_keys;
    uint32_t m = 0;
    for (uint32_t r = 0; r < k; r++)
        if (s->cost[r] < s->cost[hi]) ord[m++] = (lfp_key){s->cost[hi] - s->cost[r], r, r};
    lfp_sort_keys(ord, m, ord + m);
    uint64_t swap_work = SWAP_WORK;
    for (uint32_t i = 0; i < m; i++) {
        uint32_t lo = ord[i].idx;
        change c = best_change(s, it, caps, hi, lo, &swap_work);
        if (c.x == NONE) continue;
        if (c.y == NONE) move_item(s, it, c.x, lo);
        else swap_items(s, it, c.x, c.y);
        return 1;
    }
    return 0;
}

static void local_search(lfp_split *s, const lfp_items *it, const lfp_caps *caps)
{
    for (uint32_t iter = 0; iter < 4 * s->world && improve_once(s, it, caps); iter++) {
    }
}

/* Sorts the items costliest first (ties: smaller id) into keys[]. */
static void sort_by_cost(lfp_split *s, const lfp_items *it)
{
    for (size_t i = 0; i < it->n; i++)
        s->keys[i] = (lfp_key){it->cost[i], it->id[i], (uint32_t)i};
    lfp_sort_keys(s->keys, it->n, s->keys + it->n);
}

/* The winner of two ranks in the LPT tournament: the cheaper, ties the lower. */
static uint32_t cheaper(const uint64_t *cost, uint32_t a, uint32_t b)
{
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
    for (uint32_t t = leaves; t-- > 1;) win[t] = cheaper(cost, win[2 * t], win[2 * t + 1]);
    for (size_t i = m; i < it->n; i++) {
        uint32_t x = s->keys[i].idx, r = win[1];
        s->assign[x] = r;
        cost[r] += it->cost[x];
        for (uint32_t t = (leaves + r) / 2; t >= 1; t /= 2)
            win[t] = cheaper(cost, win[2 * t], win[2 * t + 1]);
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

/* pack: the rest, keys[m..n), into the ranks' rows. A rank's cost is the
 * leanest price times its tokens plus its items' excess over that price; the
 * rows hold the tokens, so equal cost needs equal excess. Each item, longest
 * first, goes to the rank with the least excess whose rows still have room
 * for it (ties: the cheaper, then the lower rank): the large items even the
 * excess out and the small ones, nearly all tokens, fill the rows. Room is
 * judged as best-fit decreasing will pack the rank (layout.c), row by row,
 * so the rank's rows hold what it gets; the KK items, the longest, go
 * first. An item no rank has room for stays unplaced. */
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
    for (size_t i = m; i < it->n; i++) {
        uint32_t x = s->keys[i].idx, best = NONE, best_w = NONE;
        for (uint32_t r = 0; r < k; r++) {
            if (best != NONE && (s->excess[r] > s->excess[best] ||
                                 (s->excess[r] == s->excess[best] && s->cost[r] >= s->cost[best])))
                continue;
            uint32_t w = row_for(s, r, it->len[x], cap);
            if (w == NONE || s->tokens[r] + it->len[x] > caps->row_tokens) continue;
            best = r;
            best_w = w;
        }
        if (best != NONE) row_put(s, it, x, best, best_w, caps->seq_len, tail);
        else if (!it->urgent[x] || !make_room(s, it, caps, x, cap, tail))
            s->assign[x] = NONE;
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
