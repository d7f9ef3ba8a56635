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

static uint32_t rank_id(const tl_run *t, int r)
{
    return t->rank_ids ? t->rank_ids[r] : (uint32_t)r;
}

/* One slice on track (pid, tid) at ts, or at *end, the end of the
 * track's previous slice, if that is later; args (a JSON object's members,
 * or "") show in the viewer. Returns its end (or its start, if empty),
 * where *end now is. */
static uint64_t slice(FILE *f, const char *name, int pid, int tid, uint64_t ts, uint64_t dur,
                      const char *args, uint64_t *end)
{
    if (ts < *end) ts = *end;
    if (dur == 0) return ts;
    fprintf(f, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,"
               "\"dur\":%.3f,\"args\":{%s}}", name, pid, tid, (double)ts / 1e3,
            (double)dur / 1e3, args);
    return *end = ts + dur;
}

/* Names track tid of process pid; the process too (its first track),
 * given a name. The trace's first event has no comma before it. */
static void name_track(FILE *f, int pid, const char *process, int tid, const char *thread)
{
    if (process)
        fprintf(f, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":"
                   "{\"name\":\"%s\"}}", pid > 1 ? "," : "", pid, process);
    fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":"
               "{\"name\":\"%s\"}}", pid, tid, thread);
}

static void rank_steps(FILE *f, const tl_run *t, int r, uint64_t *end)
{
    for (uint64_t i = 0; i < t->steps; i++) {
        const tl_step *x = at(t, i, r);
        char args[200];
        snprintf(args, sizeof args, "\"step\":%llu,\"epoch\":%u,\"plan_step\":%llu,"
                 "\"samples\":%u,\"tokens\":%llu,\"planned_cost\":%llu",
                 (unsigned long long)i, x->epoch, (unsigned long long)x->step, x->nsamples,
                 (unsigned long long)x->tokens, (unsigned long long)x->planned_cost);
        uint64_t ts = slice(f, "data wait", r + 1, 1, x->t_start, x->data_ns, "", end);
        ts = slice(f, "prepare", r + 1, 1, ts, x->prep_ns, "", end);
        ts = slice(f, "compute", r + 1, 1, ts, x->compute_ns, args, end);
        ts = slice(f, "sync wait", r + 1, 1, ts, x->sync_ns, "", end);
        ts = slice(f, "all-reduce", r + 1, 1, ts, x->reduce_ns, "", end);
        slice(f, "update", r + 1, 1, ts, x->update_ns, "", end);
    }
}

static void track_spans(FILE *f, const tl_track *k, int pid, int tid)
{
    uint64_t end = 0;
    for (size_t i = 0; i < k->n; i++) {
        char args[160] = "";
        size_t at = 0;
        for (int a = 0; a < 2; a++)
            if (k->arg_names[a] && at < sizeof args)
                at += (size_t)snprintf(args + at, sizeof args - at, "%s\"%s\":%llu",
                                       at ? "," : "", k->arg_names[a],
                                       (unsigned long long)k->spans[i].arg[a]);
        slice(f, k->name, pid, tid, k->spans[i].t_start, k->spans[i].dur, args, &end);
    }
}

int tl_write_trace(const tl_run *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    char process[200];
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
    for (int r = 0; r < t->ranks; r++) {
        snprintf(process, sizeof process, "%s: rank %u", t->title, rank_id(t, r));
        name_track(f, r + 1, process, 1, "steps");
    }
    snprintf(process, sizeof process, "%s: server", t->title);
    for (int k = 0; k < t->ntracks; k++) {
        char thread[128];
        snprintf(thread, sizeof thread, "%s (%s)", t->tracks[k].name, t->tracks[k].thread);
        name_track(f, t->ranks + 1, k ? NULL : process, k + 1, thread);
    }
    for (int r = 0; r < t->ranks; r++) {
        uint64_t end = 0;
        rank_steps(f, t, r, &end);
    }
    for (int k = 0; k < t->ntracks; k++) track_spans(f, &t->tracks[k], t->ranks + 1, k + 1);
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
    snprintf(label, sizeof label, "rank %u", rank_id(t, r));
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
