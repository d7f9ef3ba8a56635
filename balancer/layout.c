/*
 * layout.c — one rank's batch for the current step, in pad or pack layout.
 *
 * pad: one sample a row, longest first, every row as long as the longest;
 * padding is rows * longest - tokens. pack: best-fit decreasing into rows
 * of seq_len (each sample goes to the open row it fills most tightly, else a
 * new row), with cu_seqlens boundaries per row for variable-length attention;
 * padding is rows * seq_len - tokens. Ties go to the smaller sample id.
 */
#include <string.h>

#include "plan_internal.h"

static void lay_pad(lf_plan *p, size_t m, lf_plan_batch *b)
{
    for (size_t i = 0; i < m; i++) p->b_row_start[i] = (uint32_t)i;
    p->b_row_start[m] = (uint32_t)m;
    b->rows = (uint32_t)m;
    b->row_len = m ? (uint32_t)p->b_keys[0].len : 0;
    b->cu_seqlens = NULL;
}

static void lay_pack(lf_plan *p, size_t m, lf_plan_batch *b)
{
    uint32_t rows = lfp_pack_rows(p->b_lens, m, p->prm.seq_len, p->b_room, p->b_row_of);
    memset(p->b_fill, 0, ((size_t)rows + 1) * sizeof(uint32_t));
    for (size_t i = 0; i < m; i++) p->b_fill[p->b_row_of[i] + 1]++;
    for (uint32_t r = 0; r < rows; r++) p->b_fill[r + 1] += p->b_fill[r];
    memcpy(p->b_row_start, p->b_fill, ((size_t)rows + 1) * sizeof(uint32_t));
    for (size_t i = 0; i < m; i++) {           /* stable: longest first per row */
        uint32_t pos = p->b_fill[p->b_row_of[i]]++;
        p->b_ids[pos] = p->b_keys[i].id;
        p->b_lens[pos] = p->b_keys[i].len;
    }
    for (uint32_t r = 0; r < rows; r++) {
        uint32_t base = p->b_row_start[r] + r, acc = 0;
        p->b_cu[base] = 0;
        for (uint32_t i = p->b_row_start[r]; i < p->b_row_start[r + 1]; i++) {
            acc += (uint32_t)p->b_lens[i];
            p->b_cu[base + 1 + (i - p->b_row_start[r])] = acc;
        }
    }
    b->rows = rows;
    b->row_len = p->prm.seq_len;
    b->cu_seqlens = p->b_cu;
}

int lf_plan_rank_batch(lf_plan *p, uint32_t rank, lf_plan_batch *b)
{
    if (!p || !b) return LF_PLAN_E_ARG;
    if (!p->have_step || rank >= p->prm.world) return LF_PLAN_E_RANGE;
    uint32_t lo = p->rank_start[rank];
    size_t m = p->rank_start[rank + 1] - lo;
    for (size_t i = 0; i < m; i++) {
        uint32_t s = p->rank_idx[lo + i];
        p->b_keys[i] = (lfp_key){p->len[s], p->id[s], s};
    }
    lfp_sort_keys(p->b_keys, m, p->b_keys + m);
    uint64_t tokens = 0;
    for (size_t i = 0; i < m; i++) {
        p->b_ids[i] = p->b_keys[i].id;
        p->b_lens[i] = p->b_keys[i].len;
        tokens += p->b_keys[i].len;
    }
    if (p->prm.layout == LF_PLAN_PACK) lay_pack(p, m, b);
    else lay_pad(p, m, b);
    b->rank = rank;
    b->nsamples = (uint32_t)m;
    b->ids = p->b_ids;
    b->lengths = p->b_lens;
    b->row_start = p->b_row_start;
    b->tokens = tokens;
    b->padded_tokens = (uint64_t)b->rows * b->row_len;
    b->cost = p->rank_cost[rank];
    return 0;
}
