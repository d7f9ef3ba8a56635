/*
 * ctl_seeds — writes one control message of every type, encoded by the
 * wire code of this build, into DIR (one file a type, named as
 * lf_wire_type_name gives it, lower case): the seed corpus of the fuzz
 * target tests/fuzz/ctl_msg.c.
 *
 * Seeds of an older wire version are refused at the version check, so
 * libFuzzer and the corpus replay would only ever reach that check:
 * e2e/fuzz_seeds compares the committed corpus with what this writes and
 * fails, with the command that refreshes it, when the wire has changed.
 *
 *   ctl_seeds DIR
 */
#include "lf_wire.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A message of type t with every field set to a value that is not its
 * default, so each field's bytes are seen by the fuzzer. */
static lf_msg sample_message(uint16_t t)
{
    static const uint32_t steps[3] = {17, 17, 12};
    static const char trace[] = "/tmp/run.json", chart[] = "/tmp/run.svg", text[] = "oops";
    lf_msg m;
    memset(&m, 0, sizeof m);
    m.type = t;
    switch (t) {
    case LF_MSG_HELLO:
        m.u.hello = (lf_msg_hello){.rank = 1, .world_size = 2, .pid = 4242};
        break;
    case LF_MSG_WELCOME:
        m.u.welcome = (lf_msg_welcome){.rank = 1, .nslots = 4, .slot_size = 65536,
                                       .segment_size = 266240, .token = 0x1234abcd,
                                       .heartbeat_ms = 1000, .server_pid = 4243,
                                       .plan_id = 0xfeed, .fingerprint = 0xbeef,
                                       .first_epoch = 0, .epochs = 3, .nsteps = 3,
                                       .steps = steps, .eval_slots = 2, .eval_steps = 5,
                                       .base_id = 0xfade, .nweights = 2,
                                       .weights = {700000, 300000}};
        strcpy(m.u.welcome.fd_path, "/run/levelfeed/fd");
        break;
    case LF_MSG_START:
        m.u.start = (lf_msg_position){.epoch = 1, .step = 7, .plan_id = 0xfeed,
                                      .base_id = 0xfade};
        break;
    case LF_MSG_READY:
    case LF_MSG_EVAL_READY:
        m.u.ready = (lf_msg_ready){.slot = 2, .epoch = 1, .step = 7, .seq = 24};
        break;
    case LF_MSG_RELEASE:
        m.u.release = (lf_msg_release){.slot = 2, .seq = 24};
        break;
    case LF_MSG_STEP:
        m.u.step = (lf_msg_step){.epoch = 1, .step = 7, .compute_ns = 20000000,
                                 .wait_ns = 150000, .sync_ns = 3000000,
                                 .start_ns = 123456789};
        break;
    case LF_MSG_HEARTBEAT:
        m.u.heartbeat_ns = 987654321;
        break;
    case LF_MSG_ERROR:
    case LF_MSG_STATS:
    case LF_MSG_REPORT:
    case LF_MSG_TRACE:
        m.u.text = (lf_msg_text){.code = t == LF_MSG_ERROR ? -5 : 0,
                                 .len = sizeof text - 1, .text = text};
        break;
    case LF_MSG_PLANNING:
        m.u.planning_pct = 40;
        break;
    case LF_MSG_WAITING:
        m.u.waiting = (lf_msg_waiting){.rank = 1, .connected = 1, .others = 2,
                                       .waited_ms = 2000};
        break;
    case LF_MSG_TRACE_REQ:
        m.u.trace_req = (lf_msg_trace_req){.trace_len = sizeof trace - 1,
                                           .chart_len = sizeof chart - 1,
                                           .trace = trace, .chart = chart};
        break;
    default:                     /* END, BYE, STATS_REQ, REPORT_REQ, EVAL_REQ, EVAL_END:
                                    no body */
        break;
    }
    return m;
}

static int write_seed(const char *dir, uint16_t t)
{
    static unsigned char buf[LF_WIRE_MAX];
    lf_msg m = sample_message(t);
    int n = lf_wire_encode(&m, buf, sizeof buf);
    if (n < 0) {
        fprintf(stderr, "ctl_seeds: %s: cannot encode: %s\n", lf_wire_type_name(t),
                strerror(-n));
        return -1;
    }
    char path[4096], name[32];
    snprintf(name, sizeof name, "%s", lf_wire_type_name(t));
    for (char *p = name; *p; p++) *p = (char)tolower((unsigned char)*p);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, (size_t)n, f) != (size_t)n || fclose(f) != 0) {
        fprintf(stderr, "ctl_seeds: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fputs("usage: ctl_seeds DIR  (writes one encoded control message a type)\n", stderr);
        return 2;
    }
    for (uint16_t t = LF_MSG_HELLO; t <= LF_MSG_EPOCH; t++)
        if (write_seed(argv[1], t) < 0) return 1;
    return 0;
}
