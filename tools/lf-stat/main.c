/*
 * lf-stat — live metrics of a running lf-server.
 *
 *   lf-stat [ENDPOINT] [--json] [--count N] [--interval-ms MS]
 *
 * Asks the server for its counters (STATS_REQ -> STATS, a JSON text) and
 * prints one line per interval with rates since the previous line, or the
 * JSON once with --json.
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

/* A line: rates over the interval since prev (since the server started
 * for the first line, or when the server is a new one: its uptime went
 * back); cache hits and each rank's mean data wait per step over the run. */
static void print_line(json_t *cur, json_t *prev)
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
           "queues r%.0f d%.0f a%.0f |", num(cur, "uptime_ns") / 1e9, dbytes / dt / 1e6,
           dsamp / dt, num(cur, "batches"), hits + miss > 0 ? 100 * hits / (hits + miss) : 0,
           num(q, "read"), num(q, "decode"), num(q, "assemble"));
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(cur, "ranks"), i, r) {
        double steps = num(r, "steps_reported");
        printf(" r%.0f %s %.0f batches, wait %.2f ms/step", num(r, "rank"),
               json_string_value(json_object_get(r, "state")), num(r, "batches"),
               steps > 0 ? num(r, "data_wait_ns") / steps / 1e6 : 0);
    }
    printf("\n");
    fflush(stdout);
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
                    "Prints lf-server metrics: a line per interval, or the JSON once.\n"
                    "  --count N         N lines, then exit (default: until the server goes)\n"
                    "  --interval-ms MS  time between lines, 1..3600000 (default 1000)\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (argc - optind > 1) {
        fprintf(stderr, "lf-stat: one endpoint, not '%s' as well\n", argv[optind + 1]);
        return 2;
    }
    char path[LF_IPC_PATH_MAX + 1], url[LF_IPC_PATH_MAX + 8];
    if (lf_ipc_endpoint(optind < argc ? argv[optind] : NULL, path, sizeof path) < 0) {
        fprintf(stderr, "lf-stat: bad endpoint\n");
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
            char *text = json_dumps(cur, JSON_INDENT(2) | JSON_SORT_KEYS);
            puts(text ? text : "{}");
            free(text);
            json_decref(cur);
            break;
        }
        print_line(cur, prev);
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
