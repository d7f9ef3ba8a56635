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

/* How many pieces sample s becomes: 1 when it fits, or when it would need
 * LF_PLAN_PIECE_MAX or more (it is then left out, as under drop). */
static uint64_t pieces_of(uint64_t len, uint64_t piece)
{
    if (len <= piece) return 1;
    uint64_t k = len / piece + (len % piece != 0);
    return k < LF_PLAN_PIECE_MAX ? k : 1;
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

int lf_plan_pieces(const lf_plan_params *p, const lf_plan_sample *s, size_t n,
               lf_plan_sample **out, size_t *m)
{
    uint64_t piece = lf_plan_piece_len(p), count = 0;
    *out = NULL;
    *m = n;
    if (n && !s && lfp_view_check(p, n)) return LF_PLAN_E_ARG;
    if (!piece) return 0;
    lf_plan_lengths w = {p, s, n, 0};
    uint64_t l, c;
    while (lf_plan_lengths_next(&w, &l, &c)) {   /* a view's ids, below 2^32, pass */
        uint64_t k = pieces_of(l, piece);
        if (k > 1 && s && s[w.i - 1].id >= ID_LIMIT) return LF_PLAN_E_ARG;
        count += k * c;
    }
    if (count == n) return 0;
    if (count >= UINT32_MAX - 1) return LF_PLAN_E_ARG;   /* as lf_plan_create's n */
    lf_plan_sample *v = malloc((size_t)count * sizeof *v);
    if (!v) return LF_PLAN_E_NOMEM;
    size_t at = 0;
    for (size_t i = 0, b = 0; i < n; i++) {
        while (!s && p->view.block_start[b + 1] <= i) b++;   /* the view's block of i */
        uint64_t len = lf_plan_length_at(p, s, i), k = pieces_of(len, piece);
        uint64_t id = s ? s[i].id : i, block = s ? s[i].block : b;
        for (uint64_t j = 0; j < k; j++) {
            uint64_t left = len - j * piece;
            v[at++] = (lf_plan_sample){.id = id | j << LF_PLAN_PIECE_SHIFT,
                                       .length = k > 1 && left > piece ? piece : left,
                                       .block = block};
        }
    }
    *out = v;
    *m = (size_t)count;
    return 0;
}
