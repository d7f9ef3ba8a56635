/*
 * pieces.c — samples longer than a row or a cap, cut into pieces.
 *
 * A document of 600k tokens cannot go into a pack row of 2048, and today's
 * corpora hold many such documents (92 % of a real corpus's tokens sat in
 * documents longer than 2048). Left out, they take most of the tokens with
 * them; trainers instead cut them into consecutive pieces of the context
 * length and train on each. That is done here, before anything else sees
 * the samples: each piece is a sample of its own, with its own cost
 * (attention is per piece: cu_seqlens marks each), its sample's block, and
 * an id that says which piece of which sample it is. Everything after
 * (price, outliers, order, selection, split, layout, state hash) works on
 * the pieces as on any sample, so balance and exactly-once hold per piece,
 * hence per token. Pieces are whole pieces of piece_len tokens but the
 * last, so piece k starts at k x piece_len: a consumer needs only the id.
 * The plan keeps no array of them: a piece's sample, number, length and
 * id follow from a bit a piece (lfp_pieces), the samples' lengths read
 * where they lie, so a plan of 10^9 cut samples stays within the memory
 * of 10^9 whole ones (issue #35).
 */
#include <stdlib.h>

#include "plan_internal.h"

#define ID_LIMIT (UINT64_C(1) << LF_PLAN_PIECE_SHIFT)

static uint64_t min_set(uint64_t a, uint64_t b)
{
    return !a ? b : !b ? a : a < b ? a : b;
}

uint64_t lf_plan_piece_len(const lf_plan_params *p)
{
    if (!p || p->overflow != LF_PLAN_OVERFLOW_SPLIT) return 0;
    if (p->split_at) return p->split_at;
    if (p->layout == LF_PLAN_PACK) return min_set(p->seq_len, p->rank_max_tokens);
    return min_set(min_set(p->rank_max_tokens, p->rank_max_padded), p->micro_max_padded);
}

uint64_t lf_plan_piece_sample(uint64_t id)
{
    return id & (ID_LIMIT - 1);
}

uint64_t lf_plan_piece_index(uint64_t id)
{
    return id >> LF_PLAN_PIECE_SHIFT;
}

int lfp_view_check(const lf_plan_params *p, size_t n)
{
    const lf_plan_view *v = &p->view;
    if (!lf_plan_view_set(v) || (!v->lengths && lfp_segments_check(v->segments, n)) ||
        !v->block_start || (n && !v->blocks) || v->block_start[0] != 0 ||
        v->block_start[v->blocks] != n)
        return LF_PLAN_E_ARG;
    for (uint32_t b = 0; b < v->blocks; b++)
        if (v->block_start[b + 1] < v->block_start[b]) return LF_PLAN_E_ARG;
    return 0;
}

/* n samples (smp, or q's view's) cut at piece: the pieces there are, at
 * most UINT32_MAX. */
static uint64_t count_pieces(const lf_plan_params *q, const lf_plan_sample *smp, size_t n,
                             uint64_t piece)
{
    lf_plan_lengths w = lf_plan_lengths_of(q, smp, n, piece);
    uint64_t l, c, m = 0;
    while (lf_plan_lengths_next(&w, &l, &c) && m <= UINT32_MAX) m += c;
    return m;
}

static void pieces_free(lfp_pieces *c)
{
    free(c->first);
    free(c->rank);
    *c = (lfp_pieces){0};
}

/* Marks each sample's first piece (and one past the last, the m-th) and
 * counts the samples begun before each word. */
static int mark_pieces(lfp_pieces *c, const lf_plan_params *q, const lf_plan_sample *smp,
                       size_t n, uint64_t piece, uint64_t m)
{
    c->words = (size_t)(m + 1 + 63) / 64;
    c->first = calloc(c->words, sizeof *c->first);
    c->rank = malloc((c->words + 1) * sizeof *c->rank);
    if (!c->first || !c->rank) { pieces_free(c); return LF_PLAN_E_NOMEM; }
    uint64_t at = 0;
    LFP_SCAN(q, i, n) {
        uint64_t k = lf_plan_piece_count(lf_plan_length_at(q, smp, i), piece);
        if (k > 1 && smp && smp[i].id >= ID_LIMIT) { pieces_free(c); return LF_PLAN_E_ARG; }
        c->first[at >> 6] |= UINT64_C(1) << (at & 63);
        at += k;
    }
    c->first[m >> 6] |= UINT64_C(1) << (m & 63);
    c->rank[0] = 0;
    for (size_t w = 0; w < c->words; w++)
        c->rank[w + 1] = c->rank[w] + (uint32_t)__builtin_popcountll(c->first[w]);
    c->len = piece;
    return 0;
}

/* n samples cut at piece into *c, *m pieces (nothing set where none is
 * cut). */
static int cut_samples(lfp_pieces *c, const lf_plan_params *q, const lf_plan_sample *smp,
                       size_t n, uint64_t piece, size_t *m)
{
    *c = (lfp_pieces){0};
    *m = n;
    uint64_t k = piece ? count_pieces(q, smp, n, piece) : n;
    if (k == n) return 0;
    if (k >= UINT32_MAX - 1) return LF_PLAN_E_ARG;   /* as lf_plan_create's n */
    int rc = mark_pieces(c, q, smp, n, piece, k);
    if (rc == 0) *m = (size_t)k;
    return rc;
}

struct lf_plan_cut {
    lfp_pieces pc;
    size_t n, m;                 /* the samples, the pieces */
};

int lf_plan_cut_make(const lf_plan_params *params, size_t n, lf_plan_cut **out)
{
    if (!params || !out || lfp_view_check(params, n)) return LF_PLAN_E_ARG;
    *out = NULL;
    lf_plan_cut c = {.n = n};
    int rc = cut_samples(&c.pc, params, NULL, n, lf_plan_piece_len(params), &c.m);
    if (rc || !c.pc.len) return rc;
    if (!(*out = malloc(sizeof **out))) {
        pieces_free(&c.pc);
        return LF_PLAN_E_NOMEM;
    }
    **out = c;
    return 0;
}

void lf_plan_cut_free(lf_plan_cut *cut)
{
    if (!cut) return;
    pieces_free(&cut->pc);
    free(cut);
}

int lfp_pieces_make(lf_plan *p, const lf_plan_sample *smp, uint64_t piece)
{
    const lf_plan_cut *given = smp ? NULL : p->prm.view.cut;
    if (given && given->n == p->nraw && given->pc.len == piece) {
        p->pc = given->pc;   /* the caller's, kept until lf_plan_free */
        p->pc_shared = 1;
        p->n = given->m;
        return 0;
    }
    return cut_samples(&p->pc, &p->prm, smp, p->nraw, piece, &p->n);
}

/* The first piece of sample i, for i ascending from call to call: *w is
 * the word the last one was found in (0 at first). */
static uint32_t first_piece(const lfp_pieces *c, size_t i, size_t *w)
{
    while (c->rank[*w + 1] <= i) ++*w;
    uint64_t x = c->first[*w];
    for (size_t r = i - c->rank[*w]; r; r--) x &= x - 1;   /* drop the earlier starts */
    return (uint32_t)(*w << 6 | (size_t)__builtin_ctzll(x));
}

/* group_members (by (block, id), of samples) as pieces: each group's
 * samples' first pieces, then their other pieces (lfp_pieces_follow). */
static int member_pieces(lf_plan *p)
{
    uint32_t *start = malloc(p->nraw * sizeof *start + 1);
    uint32_t *list = malloc(p->n * sizeof *list + 1);
    if (!start || !list) { free(start); free(list); return LF_PLAN_E_NOMEM; }
    for (size_t i = 0, w = 0; i < p->nraw; i++) start[i] = first_piece(&p->pc, i, &w);
    size_t at = 0;
    for (uint32_t g = 0; g < p->ngroups; g++) {
        size_t lo = at;
        for (uint32_t k = p->group_start[g]; k < p->group_start[g + 1]; k++)
            list[at++] = start[p->group_members[k]];
        lfp_pieces_follow(&p->pc, list, lo, &at);
        p->group_start[g] = (uint32_t)lo;
    }
    p->group_start[p->ngroups] = (uint32_t)at;
    free(start);
    free(p->group_members);
    p->group_members = list;
    return 0;
}

int lfp_pieces_groups(lf_plan *p)
{
    if (!p->pc.len) return 0;
    if (p->group_members) return member_pieces(p);
    size_t w = 0;   /* the groups are runs of samples: each run's first piece */
    for (uint32_t g = 0; g < p->ngroups; g++)
        p->group_start[g] = first_piece(&p->pc, p->group_start[g], &w);
    p->group_start[p->ngroups] = (uint32_t)p->n;
    return 0;
}
