/*
 * timeline.h — a run's per-rank step timeline, written as a Chrome trace
 * (opens in Perfetto or chrome://tracing) and as an SVG chart: the one
 * writer of both, for whatever produced the step records (lf-train's
 * gathered records, and lf-server's from its ranks' step reports for a
 * trainer's lf_client_trace / Loader(trace=, chart=)).
 *
 * The trace gives each rank a process of its own, pid rank + 1 (Perfetto
 * treats pid 0 as the kernel's idle task), named "TITLE: rank R", and lays
 * each step out on its one track as consecutive slices: data wait,
 * prepare, compute (with the step's epoch, plan step, samples, tokens and
 * planned cost as args), sync wait, all-reduce, update; a slice that
 * would begin before the previous one ended (reported figures that do not
 * add up) begins at its end instead. Further tracks (lf-server's stages:
 * read, decode, assemble, ring wait, a track per stage and thread) go into
 * one more process after the ranks', "TITLE: server", a thread per track.
 * The chart stacks,
 * per rank and step, compute, sync wait and data wait, scaled to the 99th
 * percentile of the step totals so that one outlier does not flatten the
 * rest (taller bars are clipped).
 */
#ifndef LF_TIMELINE_H
#define LF_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

/* One rank's step; times in ns, t_start from the run's zero. */
typedef struct tl_step {
    uint64_t t_start;            /* the step began (its lf_next called) */
    uint64_t data_ns;            /* waiting for the batch */
    uint64_t prep_ns;            /* the batch made model input */
    uint64_t compute_ns;         /* forward and backward */
    uint64_t sync_ns;            /* waiting for the other ranks */
    uint64_t reduce_ns;          /* the all-reduce's own work, after the sync wait */
    uint64_t update_ns;          /* the rest of the step */
    uint32_t epoch, nsamples;
    uint64_t step;               /* within the epoch, as the plan numbers it */
    uint64_t tokens, planned_cost;
} tl_step;

/* A slice of a further track; times in ns from the run's zero. */
typedef struct tl_span {
    uint64_t t_start, dur;
    uint64_t arg[2];             /* shown as the track's arg_names */
} tl_span;

typedef struct tl_track {
    const char *name;            /* the stage, and each slice's name: "decode" */
    const char *thread;          /* who does it: "lf-worker0" */
    const char *arg_names[2];    /* of tl_span.arg; NULL: not shown */
    const tl_span *spans;        /* in time order, one after another */
    size_t n;
} tl_track;

typedef struct tl_run {
    const char *title;           /* what ran, e.g. "lf-train balanced (cpu)" */
    int ranks;
    uint64_t steps;
    const tl_step *rec;          /* rec[step * ranks + rank]; a step that a rank
                                    lacks is all zero (nothing drawn) */
    const uint32_t *rank_ids;    /* each rank's number in the job (NULL: 0..ranks-1) */
    int ntracks;                 /* further tracks (trace only) */
    const tl_track *tracks;
} tl_run;

/* Write the trace / the chart to path. 0, or -1 with errno from stdio (the
 * chart of a run without steps: -1, EINVAL). */
int tl_write_trace(const tl_run *t, const char *path);
int tl_write_chart(const tl_run *t, const char *path);

/* Nearest-rank percentile p (0..100) of v[0..n); sorts v. 0 for n == 0. */
double tl_percentile(double *v, size_t n, double p);

#endif
