/*
 * layout.c — one rank's batch for the current step, in pad or pack layout.
 *
 * pad: one sample a row, longest first, cut into micro-batches of
 * consecutive samples, each padded to its own first (longest) sample.
 * Free counts make a balanced rank mix lengths (one 12k-token sample beside
 * twenty of 600), so one batch padded to the rank's longest wastes 70-80 %;
 * sorted runs padded separately waste little. The cuts are the optimal 1-D
 * partition of the sorted list by dynamic programming: best[j], the least
 * (padded tokens + overhead per micro-batch) for the first j samples, is the
 * minimum over the last micro-batch [i, j) of best[i] + (j - i) * L[i] +
 * overhead, with (j - i) * L[i] within the micro-batch cap. Two facts keep
 * it short. L[i] grows as i falls, so once [i, j) is over the cap every
 * longer micro-batch is too. And w(i, j) = (j - i) * L[i] satisfies the
 * quadrangle inequality (w(i,j) + w(i',j') <= w(i,j') + w(i',j) for
 * i <= i' <= j <= j', the difference being (j' - j)(L[i] - L[i']) >= 0,
 * and the cap keeps it: w(i,j') within the cap puts the other three
 * within it), so the largest best start of the last micro-batch never
 * moves back as j grows: the search for j starts at j - 1 and stops at
 * j - 1's start. Ties go to the later start (the shorter last micro-batch).
 * Padding is the micro-batches' padded tokens - tokens.
 *
 * pack: best-fit decreasing into rows of seq_len (each sample goes to the
 * open row it fills most tightly, else a new row), with cu_seqlens
 * boundaries per row for variable-length attention; a row is a micro-batch;
 * padding is rows * seq_len - tokens. Ties go to the smaller sample id.
 *
 * Both start from the rank's samples longest first (ties: smaller id). The
 * split already sorted the step costliest first (ties: smaller id), which
 * is that order whenever cost grows with length: the samples come in that
 * order (rank_sorted) and are sorted only if a check of it fails.
 */
#include <string.h>

#include "plan_internal.h"

uint32_t lfp_micro_cut(const uint64_t *lens_desc, size_t n, uint64_t cap, uint64_t overhead,
                       uint64_t *best, uint32_t *cut, uint32_t *start)
{
    best[0] = 0;
    cut[0] = 0;
    for (size_t j = 1; j <= n; j++) {
        best[j] = UINT64_MAX;
        /* cut[j] >= cut[j - 1]: see the note at the top */
        for (size_t i = j; i-- > cut[j - 1];) {
            uint64_t k = j - i;
            if (k * lens_desc[i] > cap) break;   /* over the cap from here on */
            uint64_t v = best[i] + k * lens_desc[i] + overhead;
            if (v < best[j]) {
                best[j] = v;
                cut[j] = (uint32_t)i;
            }
        }
    }
    uint32_t micro = 0;
    for (size_t at = n; at > 0; at = cut[at]) micro++;
    start[micro] = (uint32_t)n;
    for (uint32_t j = micro; j > 0; j--) start[j - 1] = cut[start[j]];
    return micro;
}

static void lay_pad(lf_plan *p, size_t m, lf_plan_batch *b)
{
    for (size_t i = 0; i < m; i++) p->b_row_start[i] = (uint32_t)i;
    p->b_row_start[m] = (uint32_t)m;
    b->rows = (uint32_t)m;
    b->row_len = m ? (uint32_t)p->b_keys[0].len : 0;
    b->cu_seqlens = NULL;
    b->micro = lfp_micro_cut(p->b_lens, m, p->prm.micro_max_padded, p->prm.micro_overhead,
                             p->b_best, p->b_cut, p->b_micro_start);
    b->padded_tokens = 0;
    for (uint32_t j = 0; j < b->micro; j++) {
        uint32_t lo = p->b_micro_start[j], hi = p->b_micro_start[j + 1];
        p->b_micro_len[j] = (uint32_t)p->b_lens[lo];
        b->padded_tokens += (uint64_t)(hi - lo) * p->b_lens[lo];
    }
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
    b->micro = rows;                           /* a row is a micro-batch */
    memcpy(p->b_micro_start, p->b_row_start, ((size_t)rows + 1) * sizeof(uint32_t));
    for (uint32_t r = 0; r < rows; r++) p->b_micro_len[r] = p->prm.seq_len;
    b->padded_tokens = (uint64_t)rows * p->prm.seq_len;
}

int lf_plan_rank_batch(lf_plan *p, uint32_t rank, lf_plan_batch *b)
{
    if (!p || !b) return LF_PLAN_E_ARG;
    if (!p->have_step || rank >= p->prm.world) return LF_PLAN_E_RANGE;
    uint32_t lo = p->rank_start[rank];
    size_t m = p->rank_start[rank + 1] - lo;
    const uint32_t *from = p->sorted_ok ? p->rank_sorted + lo : p->rank_idx + lo;
    int sorted = p->sorted_ok;
    for (size_t i = 0; i < m; i++) {
        uint32_t s = from[i];
        p->b_keys[i] = (lfp_key){lfp_len(p, s), lfp_id(p, s), s};
        if (i > 0 && sorted) sorted = p->b_keys[i - 1].len > p->b_keys[i].len ||
                                      (p->b_keys[i - 1].len == p->b_keys[i].len &&
                                       p->b_keys[i - 1].id < p->b_keys[i].id);
    }
    if (!sorted) lfp_sort_keys(p->b_keys, m, p->b_keys + m);
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
    b->micro_start = p->b_micro_start;
    b->micro_len = p->b_micro_len;
    b->tokens = tokens;
    b->cost = p->rank_cost[rank];
    return 0;
}
