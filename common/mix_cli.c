/*
 * mix_cli.c — the mixture's flags (mix_cli.h): datasets, weights, and the
 * weights' parts per million, the same on every node.
 */
#include "mix_cli.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "index_only.h"
#include "parse_num.h"

int mix_cli_data(mix_cli *m, const char *dir, char *why, size_t why_size)
{
    if (m->ndata == LF_PLAN_MAX_SOURCES) {
        snprintf(why, why_size, "--data %s: at most %u datasets in a mixture", dir,
                 LF_PLAN_MAX_SOURCES);
        return -1;
    }
    m->data[m->ndata++] = dir;
    return 0;
}

int mix_cli_weight(mix_cli *m, const char *value, char *why, size_t why_size)
{
    double w;
    if (m->nweight == LF_PLAN_MAX_SOURCES || parse_double(value, 0, 1, &w) || w <= 0) {
        snprintf(why, why_size, "--weight %s: a decimal above 0 and at most 1 (one per "
                 "--data, at most %u)", value, LF_PLAN_MAX_SOURCES);
        return -1;
    }
    m->weight[m->nweight++] = w;
    return 0;
}

/* Parts per million of each weight, summing to exactly 10^6: each rounded
 * down, then the rest one by one to the largest remainders (ties to the
 * earlier source). */
static void to_ppm(const mix_cli *m, uint32_t *ppm)
{
    double rem[LF_PLAN_MAX_SOURCES];
    int64_t left = LF_PLAN_WEIGHT_ONE;
    for (uint32_t s = 0; s < m->nweight; s++) {
        double x = m->weight[s] * LF_PLAN_WEIGHT_ONE;
        ppm[s] = (uint32_t)floor(x);
        rem[s] = x - floor(x);
        left -= ppm[s];
    }
    for (; left > 0; left--) {
        uint32_t best = 0;
        for (uint32_t s = 1; s < m->nweight; s++)
            if (rem[s] > rem[best]) best = s;
        ppm[best]++;
        rem[best] = -1;
    }
}

int mix_cli_check(const mix_cli *m, lf_plan_mix *mix, char *why, size_t why_size)
{
    memset(mix, 0, sizeof *mix);
    if (m->ndata == 0) {
        snprintf(why, why_size, "no dataset: give --data DIR (with --weight W for each, to mix "
                 "several)");
        return -1;
    }
    if (m->nweight == 0 && m->ndata == 1) return 0;
    if (m->nweight != m->ndata) {
        snprintf(why, why_size, "%u --data and %u --weight: a mixture takes one --weight for "
                 "each --data, in the same order", m->ndata, m->nweight);
        return -1;
    }
    double sum = 0;
    for (uint32_t s = 0; s < m->nweight; s++) sum += m->weight[s];
    if (fabs(sum - 1) > 1e-6) {
        snprintf(why, why_size, "the --weight values sum to %.9g: they must sum to 1 (within "
                 "1e-6; they are not normalised)", sum);
        return -1;
    }
    if (m->ndata == 1) return 0;
    mix->sources = m->ndata;
    to_ppm(m, mix->weight);
    for (uint32_t s = 0; s < m->ndata; s++)
        if (mix->weight[s] == 0) {
            snprintf(why, why_size, "--weight %g for %s is below one part per million",
                     m->weight[s], m->data[s]);
            return -1;
        }
    return 0;
}

int mix_cli_open(const mix_cli *m, const char *held_out, unsigned open_flags, lf_plan_mix *mix,
                 lf_dataset **ds, lf_shard_error *err)
{
    const char *dirs[LF_PLAN_MAX_SOURCES + 1];
    uint32_t n = m->ndata;
    memcpy(dirs, m->data, n * sizeof *dirs);
    if (held_out) dirs[n++] = held_out;
    /* each as dataset_open opens it alone (index-only ones too), then one */
    lf_dataset *parts[LF_PLAN_MAX_SOURCES + 1] = {0};
    int rc = 0;
    for (uint32_t s = 0; rc == 0 && s < n; s++)
        rc = dataset_open(dirs[s], open_flags, &parts[s], err);
    if (rc == 0 && n == 1) {
        *ds = parts[0];
        parts[0] = NULL;
    } else if (rc == 0) {
        rc = lf_dataset_join(parts, n, ds, err);
    }
    for (uint32_t s = 0; s < n; s++) lf_dataset_close(parts[s]);
    for (uint32_t s = 0; rc == 0 && s < mix->sources; s++)
        mix->first[s] = lf_dataset_source_first(*ds, s);
    return rc;
}

void mix_cli_report(FILE *f, const char *prefix, const mix_cli *m, const lf_plan_mix *mix,
                    const uint64_t *tokens)
{
    uint64_t total = 0;
    for (uint32_t s = 0; s < mix->sources; s++) total += tokens[s];
    for (uint32_t s = 0; s < mix->sources; s++)
        fprintf(f, "%ssource %u %s: weight %.6f, %" PRIu64 " tokens (share %.6f)\n", prefix, s,
                m->data[s], mix->weight[s] / (double)LF_PLAN_WEIGHT_ONE, tokens[s],
                total ? (double)tokens[s] / (double)total : 0.0);
}
