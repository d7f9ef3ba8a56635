/*
 * timeline.c — the trace and chart writers of timeline.h.
 */
#include "timeline.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const tl_step *at(const tl_run *t, uint64_t step, int rank)
{
    return &t->rec[step * (uint64_t)t->ranks + (uint64_t)rank];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double tl_percentile(double *v, size_t n, double p)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, cmp_double);
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    return v[k ? k - 1 : 0];
}

/* ---- Chrome trace ------------------------------------------------------- */

/* One slice on rank's track; args (a JSON object's members, or "") show in
 * the viewer. Returns its end. */
static uint64_t slice(FILE *f, const char *name, int rank, uint64_t ts, uint64_t dur,
                      const char *args)
{
    if (dur == 0) return ts;
    fprintf(f, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":1,\"ts\":%.3f,"
               "\"dur\":%.3f,\"args\":{%s}}", name, rank + 1, (double)ts / 1e3,
            (double)dur / 1e3, args);
    return ts + dur;
}

int tl_write_trace(const tl_run *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
    for (int r = 0; r < t->ranks; r++)
        fprintf(f, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":"
                   "\"%s: rank %d\"}},\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,"
                   "\"tid\":1,\"args\":{\"name\":\"steps\"}}", r ? "," : "", r + 1, t->title,
                r, r + 1);
    for (uint64_t i = 0; i < t->steps; i++) {
        for (int r = 0; r < t->ranks; r++) {
            const tl_step *x = at(t, i, r);
            char args[200];
            snprintf(args, sizeof args, "\"step\":%llu,\"epoch\":%u,\"plan_step\":%llu,"
                     "\"samples\":%u,\"tokens\":%llu,\"planned_cost\":%llu",
                     (unsigned long long)i, x->epoch, (unsigned long long)x->step, x->nsamples,
                     (unsigned long long)x->tokens, (unsigned long long)x->planned_cost);
            uint64_t ts = slice(f, "data wait", r, x->t_start, x->data_ns, "");
            ts = slice(f, "prepare", r, ts, x->prep_ns, "");
            ts = slice(f, "compute", r, ts, x->compute_ns, args);
            ts = slice(f, "sync wait", r, ts, x->sync_ns, "");
            ts = slice(f, "all-reduce", r, ts, x->reduce_ns, "");
            slice(f, "update", r, ts, x->update_ns, "");
        }
    }
    fprintf(f, "\n]}\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* ---- SVG chart ---------------------------------------------------------- */

enum { CH_W = 960, CH_LEFT = 70, CH_RIGHT = 20, CH_TOP = 60, CH_PANEL = 110, CH_GAP = 22 };

static const char *const part_names[3] = {"compute", "sync wait", "data wait"};
static const char *const part_colors[3] = {"#3b6fb6", "#e8772e", "#8c8c8c"};

static void svg_text(FILE *f, double x, double y, const char *anchor, int size, const char *s)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\">%s</text>\n",
            x, y, anchor, size, s);
}

/* One rank's panel: per step, stacked compute, sync wait, data wait. */
static void svg_panel(FILE *f, const tl_run *t, int r, double top, double ymax_ms)
{
    double pw = CH_W - CH_LEFT - CH_RIGHT, bw = pw / (double)t->steps;
    char label[64];
    fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"#fafafa\" "
               "stroke=\"#bbb\"/>\n", CH_LEFT, top, pw, CH_PANEL);
    for (uint64_t i = 0; i < t->steps; i++) {
        const tl_step *x = at(t, i, r);
        double parts[3] = {(double)x->compute_ns / 1e6, (double)x->sync_ns / 1e6,
                           (double)x->data_ns / 1e6};
        double y = top + CH_PANEL;
        for (int k = 0; k < 3; k++) {
            double h = fmin(parts[k], ymax_ms) / ymax_ms * CH_PANEL;
            if (y - h < top) h = y - top;
            if (h <= 0) continue;
            y -= h;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                       "fill=\"%s\"/>\n", CH_LEFT + bw * (double)i, y, bw, h, part_colors[k]);
        }
    }
    snprintf(label, sizeof label, "rank %d", r);
    svg_text(f, CH_LEFT - 8, top + CH_PANEL / 2.0 + 4, "end", 13, label);
    snprintf(label, sizeof label, "%.1f ms", ymax_ms);
    svg_text(f, CH_LEFT - 8, top + 10, "end", 10, label);
    svg_text(f, CH_LEFT - 8, top + CH_PANEL, "end", 10, "0");
}

/* The y scale: the 99th percentile of the per-rank step totals. */
static double chart_scale(const tl_run *t)
{
    size_t n = t->steps * (size_t)t->ranks;
    double *v = malloc(n * sizeof *v);
    if (!v) return 1;
    for (size_t k = 0; k < n; k++)
        v[k] = (double)(t->rec[k].compute_ns + t->rec[k].data_ns + t->rec[k].sync_ns) / 1e6;
    double p = tl_percentile(v, n, 99);
    free(v);
    return p > 0 ? p : 1;
}

static void svg_legend(FILE *f, double y)
{
    for (int k = 0; k < 3; k++) {
        double x = CH_LEFT + 130.0 * k;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>\n",
                x, y - 11, part_colors[k]);
        svg_text(f, x + 20, y, "start", 13, part_names[k]);
    }
}

int tl_write_chart(const tl_run *t, const char *path)
{
    if (t->steps == 0 || t->ranks <= 0) {
        errno = EINVAL;
        return -1;
    }
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int height = CH_TOP + t->ranks * (CH_PANEL + CH_GAP) + 30;
    double ymax = chart_scale(t);
    char title[256];
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" "
               "fill=\"white\"/>\n", CH_W, height);
    snprintf(title, sizeof title, "%s, %d ranks: per-step time per rank", t->title, t->ranks);
    svg_text(f, CH_LEFT, 22, "start", 16, title);
    svg_legend(f, 46);
    for (int r = 0; r < t->ranks; r++)
        svg_panel(f, t, r, CH_TOP + r * (CH_PANEL + CH_GAP), ymax);
    double base = CH_TOP + t->ranks * (CH_PANEL + CH_GAP) - CH_GAP + 16;
    snprintf(title, sizeof title, "step %llu", (unsigned long long)(t->steps - 1));
    svg_text(f, CH_LEFT, base, "start", 11, "step 0");
    svg_text(f, CH_W - CH_RIGHT, base, "end", 11, title);
    fprintf(f, "</svg>\n");
    return fclose(f) == 0 ? 0 : -1;
}
