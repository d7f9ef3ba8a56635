/*
 * report.c — what rank 0 makes of the gathered per-step records: the
 * summary and report JSON, a Chrome trace (one track per rank, opens in
 * Perfetto or chrome://tracing) and an SVG chart.
 */
#include "harness.h"
#include "lf_plan.h"

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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of v[0..n) (sorts v). */
static double percentile(double *v, size_t n, double p)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, cmp_double);
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    return v[k ? k - 1 : 0];
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
    s->floor_p50 = percentile(imb, n, 50);
    s->floor_p99 = percentile(imb, n, 99);
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
    s->step_p50_ms = percentile(step, run->steps, 50);
    s->step_p99_ms = percentile(step, run->steps, 99);
    s->sync_wait_fraction = total > 0 ? sync / total : 0;
    s->data_wait_fraction = total > 0 ? data / total : 0;
    s->imbalance_p50 = percentile(imb, nimb, 50);
    s->imbalance_p99 = percentile(imb, nimb, 99);
    s->work_imbalance_p50 = percentile(work, nimb, 50);
    s->epoch_imbalance = sum_mean > 0 ? sum_max / sum_mean : 0;
    noise_floor(run, s);
    double median = percentile(stok, run->steps, 50);   /* sorts stok */
    if (median > 0) {
        s->tokens_min = stok[0] / median;
        s->tokens_p99 = percentile(stok, run->steps, 99) / median;
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

/* ---- Chrome trace ------------------------------------------------------- */

/* One slice; args (a JSON object's members, or "") show in the viewer. */
static void trace_event(FILE *f, int *first, const char *name, int rank, uint64_t ts,
                        uint64_t dur, const char *args)
{
    if (dur == 0) return;
    fprintf(f, "%s\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,"
               "\"dur\":%.3f,\"args\":{%s}}", *first ? "" : ",", name, rank, (double)ts / 1e3,
            (double)dur / 1e3, args);
    *first = 0;
}

/* Per rank and step: data wait, compute, sync wait, all-reduce (the rest of
 * the reduce), update (what remains of the step). */
int lt_write_trace(const lt_run *run, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int first = 1;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
    fprintf(f, "\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":"
               "\"lf-train %s (%s)\"}}", run->sampler, run->device);
    for (int r = 0; r < run->ranks; r++)
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                   "\"args\":{\"name\":\"rank %d\"}}", r, r);
    first = 0;
    for (uint64_t i = 0; i < run->steps; i++) {
        for (int r = 0; r < run->ranks; r++) {
            const lt_record *x = at(run, i, r);
            uint64_t t = x->t_start, sw = lt_sync_wait(run, i, r);
            uint64_t used = x->data_ns + x->prep_ns + x->compute_ns + x->reduce_ns;
            char args[200];
            snprintf(args, sizeof args, "\"step\":%llu,\"epoch\":%u,\"plan_step\":%llu,"
                     "\"samples\":%u,\"tokens\":%llu,\"planned_cost\":%llu",
                     (unsigned long long)i, x->epoch, (unsigned long long)x->step, x->nsamples,
                     (unsigned long long)x->tokens, (unsigned long long)x->planned_cost);
            trace_event(f, &first, "data wait", r, t, x->data_ns, "");
            trace_event(f, &first, "prepare", r, t += x->data_ns, x->prep_ns, "");
            trace_event(f, &first, "compute", r, t += x->prep_ns, x->compute_ns, args);
            trace_event(f, &first, "sync wait", r, t += x->compute_ns, sw, "");
            trace_event(f, &first, "all-reduce", r, t += sw, x->reduce_ns - sw, "");
            trace_event(f, &first, "update", r, t + x->reduce_ns - sw,
                        x->step_ns > used ? x->step_ns - used : 0, "");
        }
    }
    fprintf(f, "\n]}\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* ---- SVG chart ---------------------------------------------------------- */

enum { CH_W = 960, CH_LEFT = 70, CH_RIGHT = 20, CH_TOP = 60, CH_PANEL = 110, CH_GAP = 22 };

static void svg_text(FILE *f, double x, double y, const char *anchor, int size, const char *s)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\">%s</text>\n",
            x, y, anchor, size, s);
}

/* One rank's panel: per step, stacked compute, sync wait, data wait. */
static void svg_panel(FILE *f, const lt_run *run, int r, double top, double ymax_ms)
{
    double pw = CH_W - CH_LEFT - CH_RIGHT, bw = pw / (double)run->steps;
    char label[64];
    fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"#fafafa\" "
               "stroke=\"#bbb\"/>\n", CH_LEFT, top, pw, CH_PANEL);
    for (uint64_t i = 0; i < run->steps; i++) {
        const lt_record *x = at(run, i, r);
        double parts[3] = {(double)x->compute_ns / 1e6,
                           (double)lt_sync_wait(run, i, r) / 1e6, (double)x->data_ns / 1e6};
        static const char *const colors[3] = {"#3b6fb6", "#e8772e", "#8c8c8c"};
        double y = top + CH_PANEL;
        for (int k = 0; k < 3; k++) {
            double h = fmin(parts[k], ymax_ms) / ymax_ms * CH_PANEL;
            if (y - h < top) h = y - top;
            if (h <= 0) continue;
            y -= h;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                       "fill=\"%s\"/>\n", CH_LEFT + bw * (double)i, y, bw, h, colors[k]);
        }
    }
    snprintf(label, sizeof label, "rank %d", r);
    svg_text(f, CH_LEFT - 8, top + CH_PANEL / 2.0 + 4, "end", 13, label);
    snprintf(label, sizeof label, "%.1f ms", ymax_ms);
    svg_text(f, CH_LEFT - 8, top + 10, "end", 10, label);
    svg_text(f, CH_LEFT - 8, top + CH_PANEL, "end", 10, "0");
}

/* The y scale: the 99th percentile of per-rank step totals, so one slow
 * outlier step does not flatten every other bar (taller bars are clipped). */
static double chart_scale(const lt_run *run)
{
    size_t n = run->steps * (size_t)run->ranks;
    double *v = malloc(n * sizeof *v);
    if (!v) return 1;
    for (uint64_t i = 0; i < run->steps; i++)
        for (int r = 0; r < run->ranks; r++) {
            const lt_record *x = at(run, i, r);
            v[i * (size_t)run->ranks + (size_t)r] =
                (double)(x->compute_ns + x->data_ns + lt_sync_wait(run, i, r)) / 1e6;
        }
    double p = percentile(v, n, 99);
    free(v);
    return p > 0 ? p : 1;
}

static void svg_legend(FILE *f, double y)
{
    static const char *const names[3] = {"compute", "sync wait", "data wait"};
    static const char *const colors[3] = {"#3b6fb6", "#e8772e", "#8c8c8c"};
    for (int k = 0; k < 3; k++) {
        double x = CH_LEFT + 130.0 * k;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>\n",
                x, y - 11, colors[k]);
        svg_text(f, x + 20, y, "start", 13, names[k]);
    }
}

int lt_write_chart(const lt_run *run, const char *path)
{
    if (run->steps == 0) return -1;
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int height = CH_TOP + run->ranks * (CH_PANEL + CH_GAP) + 30;
    double ymax = chart_scale(run);
    char title[256];
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" "
               "fill=\"white\"/>\n", CH_W, height);
    snprintf(title, sizeof title, "lf-train: sampler %s, %d ranks, %s: per-step time per rank",
             run->sampler, run->ranks, run->device);
    svg_text(f, CH_LEFT, 22, "start", 16, title);
    svg_legend(f, 46);
    for (int r = 0; r < run->ranks; r++)
        svg_panel(f, run, r, CH_TOP + r * (CH_PANEL + CH_GAP), ymax);
    double base = CH_TOP + run->ranks * (CH_PANEL + CH_GAP) - CH_GAP + 16;
    snprintf(title, sizeof title, "step %llu", (unsigned long long)(run->steps - 1));
    svg_text(f, CH_LEFT, base, "start", 11, "step 0");
    svg_text(f, CH_W - CH_RIGHT, base, "end", 11, title);
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : -1;
}
