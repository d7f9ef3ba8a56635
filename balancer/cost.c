/*
 * cost.c — the per-sample cost model c(L) = a*L + b*L^2 + c0 in fixed point.
 *
 * Every planning decision compares these integers, so they must be the same
 * on every node: coefficients are converted from real numbers once (IEEE
 * rounding is exact and portable for one multiply and one round), and the
 * evaluation is integer-only with 128-bit products, saturating well below
 * UINT64_MAX so sums of thousands of costs cannot overflow.
 */
#include <math.h>

#include "plan_internal.h"

void lfp_coster_init(lfp_coster *c, const lf_plan_cost_model *m)
{
    *c = (lfp_coster){m->a_q16, m->b_q32, m->c0};
}

uint64_t lf_plan_cost(const lf_plan_cost_model *m, uint64_t length)
{
    lfp_coster c;
    lfp_coster_init(&c, m);
    return lfp_coster_cost(&c, length);
}

static int to_fixed(double v, unsigned shift, uint64_t *out)
{
    if (!isfinite(v) || v < 0) return LF_PLAN_E_ARG;
    double scaled = nearbyint(ldexp(v, (int)shift));
    if (scaled >= ldexp(1.0, 62)) return LF_PLAN_E_ARG;
    *out = (uint64_t)scaled;
    return 0;
}

int lf_plan_cost_set(lf_plan_cost_model *m, double a, double b, double c0, double d)
{
    lf_plan_cost_model t;
    if (to_fixed(a, 16, &t.a_q16) || to_fixed(b, 32, &t.b_q32) ||
        to_fixed(c0, 0, &t.c0) || to_fixed(d, 0, &t.d))
        return LF_PLAN_E_ARG;
    if (t.c0 > LF_PLAN_COST_MAX || t.d > LF_PLAN_COST_MAX) return LF_PLAN_E_ARG;
    *m = t;
    return 0;
}

int lf_plan_cost_preset(lf_plan_cost_model *m, int preset, uint32_t hidden)
{
    double unit = LF_PLAN_COST_PER_UNIT;
    if (hidden == 0) hidden = 4096;
    switch (preset) {
    case LF_PLAN_PRESET_TEXT:
    case LF_PLAN_PRESET_FRAMES:
        /* Per token a transformer layer does ~24*h^2 FLOPs in its matmuls and
         * ~2*h*L in attention scores and values: b/a = 1/(12*h). */
        return lf_plan_cost_set(m, unit, unit / (12.0 * hidden), 0, 0);
    case LF_PLAN_PRESET_IMAGES:
        return lf_plan_cost_set(m, unit, 0, 0, 0);
    default:
        return LF_PLAN_E_ARG;
    }
}

const char *lf_plan_strerror(int status)
{
    switch (status) {
    case LF_PLAN_OK: return "success";
    case LF_PLAN_E_ARG: return "invalid argument";
    case LF_PLAN_E_NOMEM: return "out of memory";
    case LF_PLAN_E_STATE: return "state blob malformed or for other inputs";
    case LF_PLAN_E_BUFFER: return "buffer too small";
    case LF_PLAN_E_RANGE: return "out of range";
    case LF_PLAN_E_VERSION: return "state blob of another version (saved by another build)";
    case LF_PLAN_E_OVERFLOW:
        return "an outlier step would cost 2^63 or more: a smaller outlier group or smaller costs";
    case LF_PLAN_E_WEIGHTS:
        return "state saved inside an epoch under other mixture weights: resume with the "
               "weights it was saved with, and change them at an epoch boundary";
    default: return "unknown status";
    }
}
