/*
 * segments.c — a view's lengths in several arrays (lf_plan_segments): a
 * union of datasets maps each source's index.lfx on its own, so the plan
 * reads the sources' arrays where they lie instead of a copy of them all
 * (4 bytes a sample). A length's segment is found from a table of one byte
 * a run of 2^LF_PLAN_SEGMENT_SHIFT samples (the segment of the run's first
 * sample) and a compare with the next segment's first sample.
 */
#include "plan_internal.h"

/* The segment of sample i: the last non-empty one starting at or before it
 * (from segment k on, k at or before it). */
static uint32_t segment_of(const lf_plan_segments *g, uint64_t i, uint32_t k)
{
    while (k + 1 < g->count && g->first[k + 1] <= i) k++;
    return k;
}

/* Whether count, first and the lengths are as lf_plan_segments says. */
static int segments_valid(const lf_plan_segments *g)
{
    if (!g || g->count == 0 || g->count > LF_PLAN_MAX_SEGMENTS || g->first[0] != 0) return 0;
    for (uint32_t k = 0; k < g->count; k++)
        if (g->first[k + 1] < g->first[k] || (g->first[k + 1] > g->first[k] && !g->lengths[k]))
            return 0;
    return 1;
}

int lf_plan_segments_index(lf_plan_segments *g, uint8_t *chunk)
{
    if (!segments_valid(g) || !chunk) return LF_PLAN_E_ARG;
    size_t runs = lf_plan_segments_chunks(g->first[g->count]);
    uint32_t k = 0;
    for (size_t c = 0; c < runs; c++) {
        k = segment_of(g, (uint64_t)c << LF_PLAN_SEGMENT_SHIFT, k);
        chunk[c] = (uint8_t)k;
    }
    g->chunk = chunk;
    return 0;
}

int lfp_segments_check(const lf_plan_segments *g, size_t n)
{
    if (!segments_valid(g) || !g->chunk || g->first[g->count] < n) return LF_PLAN_E_ARG;
    uint32_t k = 0;
    for (size_t c = 0; n && c <= (n - 1) >> LF_PLAN_SEGMENT_SHIFT; c++) {
        k = segment_of(g, (uint64_t)c << LF_PLAN_SEGMENT_SHIFT, k);
        if (g->chunk[c] != k) return LF_PLAN_E_ARG;
    }
    return 0;
}
