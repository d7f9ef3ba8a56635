/*
 * report.c — what rank 0 makes of the gathered per-step records: the
 * summary and report JSON, the step timeline handed to common/timeline.c
 * (a Chrome trace, a track per rank, and an SVG chart).
 */
#include "harness.h"
#include "lf_plan.h"
#include "timeline.h"

#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const lt_record *at(const lt_run *run, uint64_t step, int rank)
{
    return &run->rec[step * (uint64_t)run->ranks + (uint64_t)rank];
}

uint64_t lt_sync_wait(const lt_run *run, uint64_t step, int rank)
{
    uint64_t fastest = UINT64_MAX;
    for (int r = 0; r < run->ranks; r++)
        if (at(run, step, r)->reduce_ns < fastest) fastest = at(run, step, r)->reduce_ns;
    return at(run, step, rank)->reduce_ns - fastest;
}

double lt_work_ns(const lt_record *x)
{
    return (double)(x->compute_cpu_ns ? x->compute_cpu_ns : x->compute_ns);
}

static double mean_loss(const lt_run *run, uint64_t from, uint64_t to)
{
    double s = 0;
    for (uint64_t i = from; i < to; i++) s += at(run, i, 0)->loss;
    return to > from ? s / (double)(to - from) : 0;
}

/* The noise floor: compute max/mean per floor step, p50 and p99. */
static void noise_floor(const lt_run *run, lt_summary *s)
{
    double *imb = malloc((run->floor_steps ? run->floor_steps : 1) * sizeof *imb);
    size_t n = 0;
    for (uint64_t i = 0; imb && run->floor && i < run->floor_steps; i++) {
        double cmax = 0, csum = 0;
        for (int r = 0; r < run->ranks; r++) {
            double c = (double)run->floor[(size_t)i * (size_t)run->ranks + (size_t)r].compute_ns;
            cmax = fmax(cmax, c);
            csum += c;
        }
        if (csum > 0) imb[n++] = cmax / (csum / run->ranks);
    }
    s->floor_p50 = tl_percentile(imb, n, 50);
    s->floor_p99 = tl_percentile(imb, n, 99);
    free(imb);
}

int lt_summarize(const lt_run *run, lt_summary *s)
{
    memset(s, 0, sizeof *s);
    if (run->steps == 0) return -1;
    double *step = malloc(run->steps * sizeof *step), *imb = malloc(run->steps * sizeof *imb);
    double *work = malloc(run->steps * sizeof *work), *stok = malloc(run->steps * sizeof *stok);
    if (!step || !imb || !work || !stok) {
        free(step);
        free(imb);
        free(work);
        free(stok);
        return -1;
    }
    double tokens = 0, total = 0, sync = 0, data = 0, end = 0, sum_max = 0, sum_mean = 0;
    size_t nimb = 0;
    for (uint64_t i = 0; i < run->steps; i++) {
        double slowest = 0, cmax = 0, csum = 0, wmax = 0, wsum = 0;
        stok[i] = 0;
        for (int r = 0; r < run->ranks; r++) {
            const lt_record *x = at(run, i, r);
            tokens += (double)x->tokens;
            stok[i] += (double)x->tokens;
            total += (double)x->step_ns;
            data += (double)x->data_ns;
            sync += (double)lt_sync_wait(run, i, r);
            slowest = fmax(slowest, (double)x->step_ns);
            cmax = fmax(cmax, (double)x->compute_ns);
            csum += (double)x->compute_ns;
            wmax = fmax(wmax, lt_work_ns(x));
            wsum += lt_work_ns(x);
            s->work_total_s += lt_work_ns(x) / 1e9;
            end = fmax(end, (double)(x->t_start + x->step_ns));
        }
        step[i] = slowest / 1e6;
        sum_max += cmax;                 /* every step, the last included */
        sum_mean += csum / run->ranks;
        if (csum > 0 && wsum > 0) {
            work[nimb] = wmax / (wsum / run->ranks);
            imb[nimb++] = cmax / (csum / run->ranks);
        }
    }
    double start = (double)at(run, 0, 0)->t_start;
    s->tokens_per_s = end > start ? tokens / ((end - start) / 1e9) : 0;
    s->step_p50_ms = tl_percentile(step, run->steps, 50);
    s->step_p99_ms = tl_percentile(step, run->steps, 99);
    s->sync_wait_fraction = total > 0 ? sync / total : 0;
    s->data_wait_fraction = total > 0 ? data / total : 0;
    s->imbalance_p50 = tl_percentile(imb, nimb, 50);
    s->imbalance_p99 = tl_percentile(imb, nimb, 99);
    s->work_imbalance_p50 = tl_percentile(work, nimb, 50);
    s->epoch_imbalance = sum_mean > 0 ? sum_max / sum_mean : 0;
    noise_floor(run, s);
    double median = tl_percentile(stok, run->steps, 50);   /* sorts stok */
    if (median > 0) {
        s->tokens_min = stok[0] / median;
        s->tokens_p99 = tl_percentile(stok, run->steps, 99) / median;
        s->tokens_max = stok[run->steps - 1] / median;
    }
    uint64_t w = run->steps / 10 ? run->steps / 10 : 1;
    s->loss_first = mean_loss(run, 0, w);
    s->loss_last = mean_loss(run, run->steps - w, run->steps);
    free(step);
    free(imb);
    free(work);
    free(stok);
    return 0;
}

static json_t *pair(const char *k1, double v1, const char *k2, double v2)
{
    return json_pack("{s:f, s:f}", k1, v1, k2, v2);
}

/* A figure, or null where nothing was measured (a 0 would read as perfect). */
static json_t *measured(double v)
{
    return v > 0 ? json_real(v) : json_null();
}

int lt_write_report(const lt_run *run, const lt_summary *s, const char *path)
{
    json_t *j = json_pack("{s:s, s:i, s:I, s:f, s:o, s:f, s:f, s:o, s:o, s:o, s:o, s:s}",
                          "sampler", run->sampler, "ranks", run->ranks,
                          "steps", (json_int_t)run->steps, "tokens_per_s", s->tokens_per_s,
                          "step_ms", pair("p50", s->step_p50_ms, "p99", s->step_p99_ms),
                          "sync_wait_fraction", s->sync_wait_fraction,
                          "data_wait_fraction", s->data_wait_fraction,
                          "compute_max_over_mean",
                          pair("p50", s->imbalance_p50, "p99", s->imbalance_p99),
                          "compute_epoch_max_over_mean", measured(s->epoch_imbalance),
                          "compute_noise_floor",
                          json_pack("{s:o, s:o}", "p50", measured(s->floor_p50),
                                    "p99", measured(s->floor_p99)),
                          "step_tokens_to_median",
                          json_pack("{s:o, s:o, s:o}", "min", measured(s->tokens_min),
                                    "p99", measured(s->tokens_p99),
                                    "max", measured(s->tokens_max)),
                          "device", run->device);
    if (!j) return -1;
    int rc = json_dump_file(j, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    return rc;
}

/* ---- trace and chart (common/timeline.c) ------------------------------- */

/* The run as timeline.h's steps: the sync wait is the all-reduce beyond the
 * fastest rank's, the update what remains of the step. NULL: no memory. */
static tl_step *timeline(const lt_run *run)
{
    size_t n = run->steps * (size_t)run->ranks;
    tl_step *v = calloc(n ? n : 1, sizeof *v);
    if (!v) return NULL;
    for (uint64_t i = 0; i < run->steps; i++)
        for (int r = 0; r < run->ranks; r++) {
            const lt_record *x = at(run, i, r);
            uint64_t sw = lt_sync_wait(run, i, r);
            uint64_t used = x->data_ns + x->prep_ns + x->compute_ns + x->reduce_ns;
            v[i * (size_t)run->ranks + (size_t)r] = (tl_step){
                .t_start = x->t_start, .data_ns = x->data_ns, .prep_ns = x->prep_ns,
                .compute_ns = x->compute_ns, .sync_ns = sw, .reduce_ns = x->reduce_ns - sw,
                .update_ns = x->step_ns > used ? x->step_ns - used : 0, .epoch = x->epoch,
                .nsamples = x->nsamples, .step = x->step, .tokens = x->tokens,
                .planned_cost = x->planned_cost};
        }
    return v;
}

/* Writes the trace (chart 0) or the chart (chart 1) of run to path. */
static int write_timeline(const lt_run *run, const char *path, int chart)
{
    tl_step *v = timeline(run);
    if (!v) return -1;
    char title[128];
    snprintf(title, sizeof title, "lf-train %s (%s)", run->sampler, run->device);
    tl_run t = {.title = title, .ranks = run->ranks, .steps = run->steps, .rec = v};
    int rc = chart ? tl_write_chart(&t, path) : tl_write_trace(&t, path);
    free(v);
    return rc;
}

int lt_write_trace(const lt_run *run, const char *path)
{
    return write_timeline(run, path, 0);
}

int lt_write_chart(const lt_run *run, const char *path)
{
    return write_timeline(run, path, 1);
}
