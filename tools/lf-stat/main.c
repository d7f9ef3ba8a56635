/*
 * lf-stat — live metrics of a running lf-server.
 *
 *   lf-stat [ENDPOINT] [--json] [--count N] [--interval-ms MS]
 *
 * Asks the server for its counters (STATS_REQ -> STATS, a JSON text) and
 * prints a table per interval: the rates since the previous one, a row a
 * rank (where its step goes: data wait, held back by another rank or
 * waiting on the data path, compute, sync), the slowest rank; or the JSON
 * once with --json, with the same reading added.
 */
#include "lf_ipc.h"
#include "lf_wire.h"
#include "parse_num.h"
#include "version.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

/* Sends STATS_REQ and waits up to timeout_ms for the JSON reply; NULL
 * after saying why. */
static json_t *fetch(void *sock, const char *url, int timeout_ms)
{
    unsigned char buf[LF_WIRE_MAX];
    lf_msg m = {.type = LF_MSG_STATS_REQ};
    int n = lf_wire_encode(&m, buf, sizeof buf);
    if (n < 0 || zmq_send(sock, buf, (size_t)n, 0) != n) return NULL;
    zmq_pollitem_t it = {.socket = sock, .events = ZMQ_POLLIN};
    while (zmq_poll(&it, 1, timeout_ms) == 1) {
        n = zmq_recv(sock, buf, sizeof buf, 0);
        if (n < 0 || (size_t)n > sizeof buf || lf_wire_decode(buf, (size_t)n, &m) != 0) continue;
        if (m.type == LF_MSG_ERROR) {
            fprintf(stderr, "lf-stat: %s refused: %.*s\n", url, (int)m.u.text.len, m.u.text.text);
            return NULL;
        }
        if (m.type != LF_MSG_STATS) continue;
        json_error_t err;
        json_t *o = json_loadb(m.u.text.text, m.u.text.len, 0, &err);
        if (!o) fprintf(stderr, "lf-stat: %s sent stats that are not JSON: %s\n", url, err.text);
        return o;
    }
    fprintf(stderr, "lf-stat: no answer from %s\n", url);
    return NULL;
}

static double num(json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

/* One rank's figures a step, over the run, in ms; -1: not known. */
typedef struct figures {
    double data_wait;            /* the client's time in lf_next (its STEP reports) */
    double held_back, data_path; /* the server's time with no batch out to the rank */
    double compute, sync;        /* as the trainer reports them */
    double ratio;                /* measured compute per planned cost / the node's */
    int holder;                  /* the rank that held it back; -1: none */
} figures;

static double per(double total_ns, double n)
{
    return n > 0 ? total_ns / n / 1e6 : -1;
}

static void rank_figures(json_t *r, figures *f)
{
    json_t *empty = json_object_get(r, "ring_empty_ns");
    double steps = num(r, "steps_reported"), batches = num(r, "batches");
    json_t *sync = json_object_get(r, "sync_wait_ns"), *ratio = json_object_get(r, "cost_ratio");
    json_t *holder = json_object_get(r, "held_back_by");
    f->data_wait = per(num(r, "data_wait_ns"), steps);
    f->compute = per(num(r, "compute_ns"), steps);
    f->sync = json_is_number(sync) ? per(json_number_value(sync), num(r, "sync_steps")) : -1;
    f->held_back = per(num(empty, "held_back"), batches);
    f->data_path = per(num(empty, "data_path"), batches);
    f->ratio = json_is_number(ratio) ? json_number_value(ratio) : -1;
    f->holder = json_is_integer(holder) ? (int)json_integer_value(holder) : -1;
}

/* What most of a rank's step goes to: its compute, its wait for other
 * ranks in the trainer's all-reduce (sync wait), its wait for another rank
 * before its batch (held back: the planner waited for that rank's free
 * slot), or its wait for the data path. */
static const char *cause(const figures *f, char *buf, size_t cap)
{
    if (f->sync > f->compute && f->sync >= f->held_back && f->sync >= f->data_path)
        return "sync wait";
    if (f->held_back > f->compute && f->held_back >= f->data_path && f->held_back > 0) {
        if (f->holder >= 0) snprintf(buf, cap, "held back by rank %d", f->holder);
        else snprintf(buf, cap, "held back");
        return buf;
    }
    if (f->data_path > f->compute && f->data_path > 0) return "waiting for data";
    return f->compute >= 0 ? "compute" : "-";
}

/* The slowest rank: the most time a step in its own work (compute and
 * its data path; not its waits for others), else the rank the planner
 * waited for longest. -1 where no rank has run. */
static int slowest(json_t *ranks, const char **stage)
{
    size_t i;
    json_t *r;
    int best = -1;
    double top = 0, waited = 0;
    json_array_foreach(ranks, i, r) {
        figures f;
        rank_figures(r, &f);
        double own = (f.compute > 0 ? f.compute : 0) + (f.data_path > 0 ? f.data_path : 0);
        if (own > top || (top == 0 && num(r, "planner_waited_ns") > waited)) {
            best = (int)i;
            top = own;
            waited = num(r, "planner_waited_ns");
            *stage = f.data_path > f.compute ? "waiting for data" : "compute";
        }
    }
    return best;
}

static void print_ms(double ms)
{
    if (ms < 0) printf(" %10s", "-");
    else printf(" %7.2f ms", ms);
}

static const char legend[] =
    "columns, each a step over the run: data-wait = the client's time in lf_next; "
    "held-back, data-path = the server's time with no batch out to the rank, a batch, "
    "split by cause: the planner waiting for another rank's free slot (lock-step "
    "backpressure) or the data path (read, decode, assemble); compute, sync = as the "
    "trainer reports them, sync being its wait for the other ranks (all-reduce) "
    "(- : not reported); cost-ratio = measured compute per planned "
    "cost, against the node's mean; slots = held by the client / in the ring\n";

/* A mixture's tokens delivered per source against its weight (the
 * server's "sources"; nothing without a mixture). */
static void print_sources(json_t *sources)
{
    size_t i;
    json_t *src;
    json_array_foreach(sources, i, src)
        printf("source %zu %s: weight %.6f, %.0f tokens delivered (share %.6f)\n", i,
               json_string_value(json_object_get(src, "data")), num(src, "weight"),
               num(src, "tokens"), num(src, "share"));
}

/* A table: rates over the interval since prev (since the server started
 * for the first one, or when the server is a new one: its uptime went
 * back), then a row a rank and the slowest rank. */
static void print_table(json_t *cur, json_t *prev)
{
    const char *state = json_string_value(json_object_get(cur, "state"));
    if (state && strcmp(state, "planning") == 0) {
        printf("t=%.1fs planning, %.0f %%\n", num(cur, "uptime_ns") / 1e9,
               num(cur, "planning_pct"));
        return;
    }
    if (prev && num(cur, "uptime_ns") < num(prev, "uptime_ns")) {
        printf("(a new server: rates from its start)\n");
        prev = NULL;
    }
    double dt = (num(cur, "uptime_ns") - (prev ? num(prev, "uptime_ns") : 0)) / 1e9;
    if (dt <= 0) dt = 1;
    double dbytes = num(cur, "bytes_read") - (prev ? num(prev, "bytes_read") : 0);
    double dsamp = num(cur, "samples") - (prev ? num(prev, "samples") : 0);
    double hits = num(cur, "cache_hits"), miss = num(cur, "cache_misses");
    json_t *q = json_object_get(cur, "queue_depth");
    printf("t=%.1fs read %.1f MB/s, %.0f samples/s, batches %.0f, cache hit %.0f%%, "
           "queues read %.0f decode %.0f assemble %.0f\n", num(cur, "uptime_ns") / 1e9,
           dbytes / dt / 1e6, dsamp / dt, num(cur, "batches"),
           hits + miss > 0 ? 100 * hits / (hits + miss) : 0, num(q, "read"), num(q, "decode"),
           num(q, "assemble"));
    printf("%4s %-11s %10s %10s %10s %10s %10s %10s %10s %5s  %s\n", "rank", "state",
           "epoch:step", "data-wait", "held-back", "data-path", "compute", "sync",
           "cost-ratio", "slots", "cause");
    size_t i;
    json_t *r, *ranks = json_object_get(cur, "ranks");
    json_array_foreach(ranks, i, r) {
        figures f;
        char at[32] = "-", slots[24], why[48];
        rank_figures(r, &f);
        json_t *last = json_object_get(r, "last_batch");
        if (json_is_object(last))
            snprintf(at, sizeof at, "%.0f:%.0f", num(last, "epoch"), num(last, "step"));
        snprintf(slots, sizeof slots, "%.0f/%.0f", num(r, "slots_held"), num(r, "slots"));
        printf("%4.0f %-11s %10s", num(r, "rank"), json_string_value(json_object_get(r, "state")),
               at);
        print_ms(f.data_wait);
        print_ms(f.held_back);
        print_ms(f.data_path);
        print_ms(f.compute);
        print_ms(f.sync);
        if (f.ratio < 0) printf(" %10s", "-");
        else printf(" %10.2f", f.ratio);
        printf(" %5s  %s\n", slots, cause(&f, why, sizeof why));
    }
    const char *stage = NULL;
    int k = slowest(ranks, &stage);
    if (k >= 0)
        printf("slowest: rank %.0f (%s)\n", num(json_array_get(ranks, (size_t)k), "rank"), stage);
    print_sources(json_object_get(cur, "sources"));
    fflush(stdout);
}

/* --json: the server's figures, with lf-stat's reading of them added: each
 * rank's figures a step and cause, and the slowest rank. */
static void add_reading(json_t *cur)
{
    size_t i;
    json_t *r, *ranks = json_object_get(cur, "ranks");
    json_array_foreach(ranks, i, r) {
        figures f;
        char why[48];
        rank_figures(r, &f);
        json_t *ms = json_object();
        const char *keys[] = {"data_wait", "held_back", "data_path", "compute", "sync"};
        double vals[] = {f.data_wait, f.held_back, f.data_path, f.compute, f.sync};
        for (size_t k = 0; k < 5; k++)
            json_object_set_new(ms, keys[k], vals[k] < 0 ? json_null() : json_real(vals[k]));
        json_object_set_new(r, "per_step_ms", ms);
        json_object_set_new(r, "cause", json_string(cause(&f, why, sizeof why)));
    }
    const char *stage = NULL;
    int k = slowest(ranks, &stage);
    json_object_set_new(cur, "slowest", k < 0 ? json_null() : json_pack("{s:O,s:s}",
        "rank", json_object_get(json_array_get(ranks, (size_t)k), "rank"), "stage", stage));
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"json", 0, 0, 'j'}, {"count", 1, 0, 'n'},
                                         {"interval-ms", 1, 0, 'i'}, {"help", 0, 0, 'h'},
                                         {"version", 0, 0, 'V'}, {0, 0, 0, 0}};
    int json = 0, c, at = -1, rc;
    int64_t count = -1, interval = 1000;
    while ((c = getopt_long(argc, argv, "", opts, &at)) != -1) {
        switch (c) {
        case 'j': json = 1; rc = 0; break;
        case 'n': rc = parse_i64(optarg, 1, INT64_MAX, &count); break;
        case 'i': rc = parse_i64(optarg, 1, 3600000, &interval); break;
        case 'V': cli_print_version("lf-stat"); return 0;
        default: rc = 1; break; /* --help, or not an option */
        }
        if (rc < 0) {
            fprintf(stderr, "lf-stat: --%s: bad value '%s'\n", opts[at].name, optarg);
            return 2;
        }
        at = -1;
        if (rc > 0) {
            fprintf(c == 'h' ? stdout : stderr,
                    "usage: lf-stat [ENDPOINT] [--json] [--count N] [--interval-ms MS] [--version]\n"
                    "Prints lf-server metrics: a table per interval, or the JSON once.\n"
                    "  --count N         N tables, then exit (default: until the server goes)\n"
                    "  --interval-ms MS  time between tables, 1..3600000 (default 1000)\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (argc - optind > 1) {
        fprintf(stderr, "lf-stat: one endpoint, not '%s' as well\n", argv[optind + 1]);
        return 2;
    }
    /* Where the trainer looks: the argument, else LEVELFEED_ENDPOINT (what
     * lf-launch sets), else the job's default. */
    const char *given = optind < argc ? argv[optind] : getenv("LEVELFEED_ENDPOINT");
    char path[LF_IPC_PATH_MAX + 1], url[LF_IPC_PATH_MAX + 8];
    if (lf_ipc_endpoint(given, NULL, path, sizeof path) < 0) {
        fprintf(stderr, "lf-stat: bad endpoint '%s'%s\n", given ? given : "(default)",
                optind < argc ? "" : " (LEVELFEED_ENDPOINT)");
        return 2;
    }
    snprintf(url, sizeof url, "ipc://%s", path);
    void *ctx = zmq_ctx_new(), *sock = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    rc = 0;
    if (zmq_connect(sock, url) != 0) rc = 1;
    json_t *prev = NULL;
    if (rc) fprintf(stderr, "lf-stat: cannot connect to %s: %s\n", url, zmq_strerror(zmq_errno()));
    for (int64_t i = 0; rc == 0 && (count < 0 || i < count); i++) {
        json_t *cur = fetch(sock, url, 2000);
        if (!cur) {
            rc = 1;
            break;
        }
        if (json) {
            add_reading(cur);
            char *text = json_dumps(cur, JSON_INDENT(2) | JSON_SORT_KEYS);
            puts(text ? text : "{}");
            free(text);
            json_decref(cur);
            break;
        }
        if (i == 0) fputs(legend, stdout);
        print_table(cur, prev);
        json_decref(prev);
        prev = cur;
        if (count < 0 || i + 1 < count) {
            struct timespec ts = {interval / 1000, (interval % 1000) * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    json_decref(prev);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return rc;
}
