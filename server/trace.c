/*
 * trace.c — the trainers' own run as lf-train draws it: a Chrome trace
 * (Perfetto) and an SVG chart, written by common/timeline.c, the one writer
 * of both, from what the server already has.
 *
 * Why the server writes it: each rank's trainer knows only its own steps,
 * but every rank's STEP reports (data wait, compute, sync wait, and when
 * the step began) come to its node's server, and only the server sees its
 * own stages. So the server keeps both, and when a trainer asks
 * (lf_client_trace, TRACE_REQ) it writes one trace with a track per local
 * rank and one more process with the server's stages, once every local
 * rank has asked or left (control.c): no per-rank files to merge, and no
 * new traffic during the run. Times are on CLOCK_MONOTONIC, which a node's
 * processes share, so the client's step starts and the server's spans line
 * up on one axis.
 *
 * What it keeps, bounded: each rank's newest SRV_TRACE_STEPS steps, and
 * each stage thread's newest SRV_TRACE_SPANS spans (reader: a batch of
 * reads; worker: a block's decode, a job's assembly; planner: a wait for a
 * free slot in a rank's ring), in rings allocated at start-up (calloc: the
 * pages come as they fill). Every stage already took srv.mu right after
 * its work to add its busy time; the span is recorded there, so the hot
 * path takes no lock it did not take before.
 */
#include "srv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t stage_threads(const srv *s, int stage)
{
    return stage == SRV_STAGE_READ        ? s->cfg.readers
           : stage == SRV_STAGE_RING_WAIT ? 1
                                          : s->cfg.workers;
}

int srv_trace_init(srv *s)
{
    for (int k = 0; k < SRV_STAGES; k++) {
        uint32_t n = stage_threads(s, k);
        if (!(s->spans[k] = calloc(n, sizeof *s->spans[k]))) return -ENOMEM;
        for (uint32_t i = 0; i < n; i++)
            if (!(s->spans[k][i].v = calloc(SRV_TRACE_SPANS, sizeof(tl_span)))) return -ENOMEM;
    }
    for (uint32_t li = 0; li < s->cfg.nlocal; li++)
        if (!(s->ranks[li].obs.trace = calloc(SRV_TRACE_STEPS, sizeof(tl_step)))) return -ENOMEM;
    return 0;
}

void srv_trace_free(srv *s)
{
    for (int k = 0; k < SRV_STAGES; k++) {
        for (uint32_t i = 0; s->spans[k] && i < stage_threads(s, k); i++) free(s->spans[k][i].v);
        free(s->spans[k]);
        s->spans[k] = NULL;
    }
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        free(s->ranks[li].obs.trace);
        s->ranks[li].obs.trace = NULL;
    }
}

void srv_trace_span(srv *s, int stage, uint32_t thread, uint64_t t0, uint64_t t1, uint64_t a,
                    uint64_t b)
{
    srv_span_log *g = &s->spans[stage][thread];
    g->v[g->n++ % SRV_TRACE_SPANS] = (tl_span){.t_start = t0, .dur = t1 > t0 ? t1 - t0 : 0,
                                               .arg = {a, b}};
}

void srv_trace_step(srv *s, uint32_t li, const lf_msg_step *m, double cost, uint32_t samples,
                    uint64_t tokens, uint64_t now)
{
    srv_rank_obs *o = &s->ranks[li].obs;
    uint64_t sync = m->sync_ns == LF_WIRE_UNKNOWN ? 0 : m->sync_ns;
    uint64_t took = m->wait_ns + m->compute_ns + sync;
    /* A start the client did not send, or that is not on this clock (a
     * time namespace): the step ended about when its report came. */
    uint64_t start = m->start_ns != LF_WIRE_UNKNOWN && m->start_ns <= now ? m->start_ns
                     : now > took                                        ? now - took
                                                                         : 0;
    o->trace[o->ntrace++ % SRV_TRACE_STEPS] = (tl_step){
        .t_start = start, .data_ns = m->wait_ns, .compute_ns = m->compute_ns, .sync_ns = sync,
        .epoch = m->epoch, .nsamples = samples, .step = m->step, .tokens = tokens,
        .planned_cost = cost > 0 ? (uint64_t)cost : 0};
}

/* ---- writing ------------------------------------------------------------ */

static const char *const stage_names[SRV_STAGES] = {"read", "decode", "assemble", "ring wait"};
static const char *const stage_args[SRV_STAGES][2] = {
    {"blocks", "bytes"}, {"block", NULL}, {"rank", "step"}, {"rank", "trainer held a batch"}};

/* Everything the trace shows, copied out of the rings under mu. */
typedef struct snapshot {
    tl_run run;
    tl_step *rec;
    uint32_t rank_ids[SRV_MAX_RANKS];
    tl_track *tracks;
    tl_span *spans;              /* every track's, one after another */
    char (*threads)[16];         /* each track's thread name */
    uint64_t nspans;
} snapshot;

/* The newest min(n, cap) entries of a ring of cap, oldest first, into out. */
static void unroll(void *out, const void *ring, uint64_t n, uint64_t cap, size_t size)
{
    uint64_t keep = n < cap ? n : cap, first = n - keep;
    for (uint64_t i = 0; i < keep; i++)
        memcpy((char *)out + i * size, (const char *)ring + ((first + i) % cap) * size, size);
}

/* The ranks' steps as rows of tl_run: row i holds each rank's report
 * number first + i (every rank reports its steps in order, one a batch),
 * for at most the newest SRV_TRACE_STEPS report numbers of any rank. */
static int snap_steps(const srv *s, snapshot *z)
{
    uint32_t nl = s->cfg.nlocal;
    uint64_t first = UINT64_MAX, last = 0;
    for (uint32_t li = 0; li < nl; li++) {
        uint64_t n = s->ranks[li].obs.ntrace;
        uint64_t lo = n > SRV_TRACE_STEPS ? n - SRV_TRACE_STEPS : 0;
        if (n && lo < first) first = lo;
        if (n > last) last = n;
        z->rank_ids[li] = s->cfg.local[li];
    }
    if (last == 0) first = 0;
    if (last - first > SRV_TRACE_STEPS) first = last - SRV_TRACE_STEPS;
    uint64_t rows = last - first;
    z->rec = calloc(rows * nl + 1, sizeof *z->rec);
    tl_step *one = malloc(SRV_TRACE_STEPS * sizeof *one);
    if (!z->rec || !one) {
        free(one);
        return -ENOMEM;
    }
    for (uint32_t li = 0; li < nl; li++) {
        const srv_rank_obs *o = &s->ranks[li].obs;
        uint64_t keep = o->ntrace < SRV_TRACE_STEPS ? o->ntrace : SRV_TRACE_STEPS;
        unroll(one, o->trace, o->ntrace, SRV_TRACE_STEPS, sizeof *one);
        for (uint64_t i = 0; i < keep; i++)
            if (o->ntrace - keep + i >= first)
                z->rec[(o->ntrace - keep + i - first) * nl + li] = one[i];
    }
    free(one);
    z->run = (tl_run){.title = "levelfeed", .ranks = (int)nl, .steps = rows, .rec = z->rec,
                      .rank_ids = z->rank_ids};
    return 0;
}

static int snap_tracks(const srv *s, snapshot *z)
{
    uint32_t ntracks = 0;
    for (int k = 0; k < SRV_STAGES; k++) ntracks += stage_threads(s, k);
    z->tracks = calloc(ntracks, sizeof *z->tracks);
    z->threads = calloc(ntracks, sizeof *z->threads);
    z->spans = malloc((size_t)ntracks * SRV_TRACE_SPANS * sizeof *z->spans);
    if (!z->tracks || !z->threads || !z->spans) return -ENOMEM;
    int t = 0;
    for (int k = 0; k < SRV_STAGES; k++)
        for (uint32_t i = 0; i < stage_threads(s, k); i++) {
            const srv_span_log *g = &s->spans[k][i];
            if (g->n == 0) continue; /* a thread that never did this stage */
            tl_track *tr = &z->tracks[t];
            snprintf(z->threads[t], sizeof z->threads[t], "lf-%s%u",
                     k == SRV_STAGE_READ ? "reader" : k == SRV_STAGE_RING_WAIT ? "planner"
                                                                              : "worker",
                     i % 1000);
            tl_span *at = z->spans + z->nspans;
            unroll(at, g->v, g->n, SRV_TRACE_SPANS, sizeof *at);
            *tr = (tl_track){.name = stage_names[k], .thread = z->threads[t],
                             .arg_names = {stage_args[k][0], stage_args[k][1]}, .spans = at,
                             .n = g->n < SRV_TRACE_SPANS ? g->n : SRV_TRACE_SPANS};
            z->nspans += tr->n;
            t++;
        }
    z->run.tracks = z->tracks;
    z->run.ntracks = t;
    return 0;
}

/* Times from the run's zero: the earliest step start or span. */
static void shift(snapshot *z)
{
    uint64_t zero = UINT64_MAX;
    size_t nrec = z->run.steps * (size_t)z->run.ranks;
    for (size_t i = 0; i < nrec; i++)
        if (z->rec[i].t_start && z->rec[i].t_start < zero) zero = z->rec[i].t_start;
    for (uint64_t i = 0; i < z->nspans; i++)
        if (z->spans[i].t_start < zero) zero = z->spans[i].t_start;
    for (size_t i = 0; i < nrec; i++)
        if (z->rec[i].t_start) z->rec[i].t_start -= zero;
    for (uint64_t i = 0; i < z->nspans; i++) z->spans[i].t_start -= zero;
}

static void snap_free(snapshot *z)
{
    free(z->rec);
    free(z->tracks);
    free(z->threads);
    free(z->spans);
}

/* path, with ".ranksA-B" before its extension where this server serves
 * only some ranks of the job (each node's server writes its own). */
static int node_path(const srv *s, const char *path, char *out, size_t cap)
{
    if (s->cfg.nlocal == s->cfg.world) return snprintf(out, cap, "%s", path) < (int)cap ? 0 : -1;
    char ranks[256];
    srv_format_ranks(&s->cfg, ranks, sizeof ranks);
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - path) : strlen(path);
    int n = snprintf(out, cap, "%.*s.ranks%s%s", (int)stem, path, ranks, path + stem);
    return n >= 0 && (size_t)n < cap ? 0 : -1;
}

/* Writes one of the two files; 0 or -errno with the reason in msg. */
static int write_one(const srv *s, const snapshot *z, const char *path, int chart, char *msg,
                     size_t cap)
{
    char where[LF_WIRE_TRACE_PATH_MAX + 300];
    if (node_path(s, path, where, sizeof where) < 0) {
        snprintf(msg, cap, "%s: the path is too long", path);
        return -ENAMETOOLONG;
    }
    errno = 0;
    int rc = chart ? tl_write_chart(&z->run, where) : tl_write_trace(&z->run, where);
    if (rc == 0) return 0;
    rc = errno ? -errno : -EIO;
    if (chart && z->run.steps == 0)
        snprintf(msg, cap, "no chart: no rank reported a step (lf_report_step)");
    else
        snprintf(msg, cap, "cannot write the %s %s: %s", chart ? "chart" : "trace", where,
                 strerror(-rc));
    return rc;
}

int srv_trace_write(srv *s, const char *trace, const char *chart, char *msg, size_t cap)
{
    snapshot z = {0};
    pthread_mutex_lock(&s->mu);
    int rc = snap_steps(s, &z);
    if (rc == 0) rc = snap_tracks(s, &z);
    pthread_mutex_unlock(&s->mu);
    if (rc < 0) snprintf(msg, cap, "trace: out of memory");
    if (rc == 0) shift(&z);
    if (rc == 0 && trace && trace[0]) rc = write_one(s, &z, trace, 0, msg, cap);
    if (rc == 0 && chart && chart[0]) rc = write_one(s, &z, chart, 1, msg, cap);
    if (rc == 0)
        snprintf(msg, cap, "%s%s%s%s%s: %d ranks, %" PRIu64 " steps, %d stage tracks with "
                 "%" PRIu64 " slices", trace && trace[0] ? "trace " : "", trace ? trace : "",
                 trace && trace[0] && chart && chart[0] ? ", " : "",
                 chart && chart[0] ? "chart " : "", chart ? chart : "", z.run.ranks,
                 z.run.steps, z.run.ntracks, z.nspans);
    snap_free(&z);
    return rc;
}
