/*
 * client_wire.c — the control protocol: every message type round-trips, and
 * the decoder refuses every truncation, trailing byte, bad header, unknown
 * type and out-of-range length (WELCOME's epoch step counts included).
 */
#include "lf_wire.h"
#include "test.h"

#include <errno.h>

static const uint32_t sample_steps[3] = {17, 16, 0x01020304};

static lf_msg sample_msg(unsigned type)
{
    lf_msg m;
    memset(&m, 0, sizeof m);
    m.type = (uint16_t)type;
    switch (type) {
    case LF_MSG_HELLO: m.u.hello = (lf_msg_hello){3, 8, 4242}; break;
    case LF_MSG_WELCOME:
        m.u.welcome = (lf_msg_welcome){.rank = 3, .nslots = 4, .slot_size = 1 << 20,
                                       .segment_size = 4096 + (4 << 20), .token = 0x1122334455667788ull,
                                       .heartbeat_ms = 1000, .server_pid = 77, .plan_id = 99,
                                       .fingerprint = 0xfeedfacecafebeefull,
                                       .first_epoch = 5, .epochs = 9, .nsteps = 3,
                                       .steps = sample_steps, .eval_slots = 2, .eval_steps = 6,
                                       .base_id = 0xabcdef, .nweights = 3,
                                       .weights = {400000, 400000, 200000}};
        strcpy(m.u.welcome.fd_path, "/run/user/1/levelfeed/ctl.fd");
        break;
    case LF_MSG_START: m.u.start = (lf_msg_position){2, 17, 5, 6}; break;
    case LF_MSG_READY:
    case LF_MSG_EVAL_READY: m.u.ready = (lf_msg_ready){1, 2, 3, 4}; break;
    case LF_MSG_RELEASE: m.u.release = (lf_msg_release){1, 4}; break;
    case LF_MSG_STEP: m.u.step = (lf_msg_step){1, 2, 3000, 4000, 5000, 6000}; break;
    case LF_MSG_TRACE_REQ: m.u.trace_req = (lf_msg_trace_req){9, 8, "/t/a.json", "/t/a.svg"}; break;
    case LF_MSG_HEARTBEAT: m.u.heartbeat_ns = 123456789; break;
    case LF_MSG_PLANNING: m.u.planning_pct = 42; break;
    case LF_MSG_WAITING: m.u.waiting = (lf_msg_waiting){3, 1, 2, 30000}; break;
    case LF_MSG_EPOCH: m.u.epoch = (lf_msg_epoch){3, 977}; break;
    case LF_MSG_ERROR:
    case LF_MSG_STATS:
    case LF_MSG_REPORT:
    case LF_MSG_TRACE: m.u.text = (lf_msg_text){-5, 5, "hello"}; break;
    default: break;
    }
    return m;
}

static void check_same(const lf_msg *a, const lf_msg *b)
{
    ASSERT_EQ(a->type, b->type);
    if (a->type == LF_MSG_ERROR || a->type == LF_MSG_STATS || a->type == LF_MSG_REPORT ||
        a->type == LF_MSG_TRACE) {
        ASSERT_EQ(a->u.text.code, b->u.text.code);
        ASSERT_EQ(a->u.text.len, b->u.text.len);
        ASSERT_MEM_EQ(a->u.text.text, b->u.text.text, a->u.text.len);
    } else if (a->type == LF_MSG_WELCOME) { /* field by field: fd_path is a string */
        ASSERT_EQ(a->u.welcome.rank, b->u.welcome.rank);
        ASSERT_EQ(a->u.welcome.nslots, b->u.welcome.nslots);
        ASSERT_EQ(a->u.welcome.slot_size, b->u.welcome.slot_size);
        ASSERT_EQ(a->u.welcome.heartbeat_ms, b->u.welcome.heartbeat_ms);
        ASSERT_EQ(a->u.welcome.server_pid, b->u.welcome.server_pid);
        ASSERT_EQ(a->u.welcome.token, b->u.welcome.token);
        ASSERT_EQ(a->u.welcome.plan_id, b->u.welcome.plan_id);
        ASSERT_EQ(a->u.welcome.fingerprint, b->u.welcome.fingerprint);
        ASSERT_EQ(a->u.welcome.segment_size, b->u.welcome.segment_size);
        ASSERT_STR_EQ(a->u.welcome.fd_path, b->u.welcome.fd_path);
        ASSERT_EQ(a->u.welcome.first_epoch, b->u.welcome.first_epoch);
        ASSERT_EQ(a->u.welcome.epochs, b->u.welcome.epochs);
        ASSERT_EQ(a->u.welcome.nsteps, b->u.welcome.nsteps);
        ASSERT_EQ(a->u.welcome.eval_slots, b->u.welcome.eval_slots);
        ASSERT_EQ(a->u.welcome.eval_steps, b->u.welcome.eval_steps);
        ASSERT_EQ(a->u.welcome.base_id, b->u.welcome.base_id);
        ASSERT_EQ(a->u.welcome.nweights, b->u.welcome.nweights);
        ASSERT_MEM_EQ(a->u.welcome.weights, b->u.welcome.weights, sizeof a->u.welcome.weights);
        uint32_t steps[3];
        lf_wire_steps(&b->u.welcome, steps);
        ASSERT_MEM_EQ(steps, a->u.welcome.steps, sizeof steps);
    } else if (a->type == LF_MSG_TRACE_REQ) { /* the paths point into the buffer */
        ASSERT_EQ(a->u.trace_req.trace_len, b->u.trace_req.trace_len);
        ASSERT_EQ(a->u.trace_req.chart_len, b->u.trace_req.chart_len);
        ASSERT_MEM_EQ(a->u.trace_req.trace, b->u.trace_req.trace, a->u.trace_req.trace_len);
        ASSERT_MEM_EQ(a->u.trace_req.chart, b->u.trace_req.chart, a->u.trace_req.chart_len);
    } else if (a->type == LF_MSG_WAITING) { /* field by field: the struct has padding */
        ASSERT_EQ(a->u.waiting.rank, b->u.waiting.rank);
        ASSERT_EQ(a->u.waiting.connected, b->u.waiting.connected);
        ASSERT_EQ(a->u.waiting.others, b->u.waiting.others);
        ASSERT_EQ(a->u.waiting.waited_ms, b->u.waiting.waited_ms);
    } else {
        ASSERT_MEM_EQ(&a->u, &b->u, sizeof a->u);
    }
}

int main(void)
{
    unsigned char buf[LF_WIRE_MAX + 16];
    for (unsigned t = LF_MSG_HELLO; t <= LF_MSG_EPOCH; t++) {
        lf_msg m = sample_msg(t), d;
        int n = lf_wire_encode(&m, buf, sizeof buf);
        ASSERT_GT(n, 0);
        ASSERT_EQ(lf_wire_decode(buf, (size_t)n, &d), 0);
        check_same(&m, &d);
        /* Every truncation and one trailing byte are refused, *d untouched. */
        for (int cut = 0; cut < n; cut++) {
            lf_msg keep = {.type = 999};
            ASSERT_EQ(lf_wire_decode(buf, (size_t)cut, &keep), -EPROTO);
            ASSERT_EQ(keep.type, 999);
        }
        buf[n] = 0;
        ASSERT_EQ(lf_wire_decode(buf, (size_t)n + 1, &d), -EPROTO);
        /* A buffer one byte short is refused by the encoder. */
        ASSERT_EQ(lf_wire_encode(&m, buf, (size_t)n - 1), -ENOBUFS);
        ASSERT_TRUE(strcmp(lf_wire_type_name(t), "?") != 0);
    }

    /* Header checks: magic, version, type. */
    lf_msg m = sample_msg(LF_MSG_READY), d;
    int n = lf_wire_encode(&m, buf, sizeof buf);
    for (int i = 0; i < 8; i++) {
        buf[i] ^= 0x40;
        ASSERT_EQ(lf_wire_decode(buf, (size_t)n, &d), -EPROTO);
        buf[i] ^= 0x40;
    }
    ASSERT_EQ(lf_wire_decode(buf, (size_t)n, &d), 0);
    m.type = 0;
    ASSERT_EQ(lf_wire_encode(&m, buf, sizeof buf), -EINVAL);
    ASSERT_EQ(lf_wire_decode(buf, LF_WIRE_MAX + 1, &d), -EMSGSIZE);

    /* Text longer than the limit: refused both ways. */
    static char big[LF_WIRE_TEXT_MAX + 1];
    memset(big, 'x', sizeof big);
    m = sample_msg(LF_MSG_ERROR);
    m.u.text.text = big;
    m.u.text.len = LF_WIRE_TEXT_MAX;
    n = lf_wire_encode(&m, buf, sizeof buf);
    ASSERT_GT(n, 0);
    ASSERT_EQ(lf_wire_decode(buf, (size_t)n, &d), 0);
    m.u.text.len = LF_WIRE_TEXT_MAX + 1;
    ASSERT_EQ(lf_wire_encode(&m, buf, sizeof buf), -EINVAL);
    /* A declared text length past the message end. */
    m.u.text.len = 5;
    m.u.text.text = "hello";
    n = lf_wire_encode(&m, buf, sizeof buf);
    buf[12] = 6; /* len field: bytes 12..15 after the 8-byte header and code */
    ASSERT_EQ(lf_wire_decode(buf, (size_t)n, &d), -EPROTO);

    /* PLANNING past 100 %: refused both ways. */
    m = sample_msg(LF_MSG_PLANNING);
    n = lf_wire_encode(&m, buf, sizeof buf);
    buf[8] = 101; /* the percent: the first body byte */
    ASSERT_EQ(lf_wire_decode(buf, (size_t)n, &d), -EPROTO);
    m.u.planning_pct = 101;
    ASSERT_EQ(lf_wire_encode(&m, buf, sizeof buf), -EINVAL);

    /* WELCOME paths: empty, too long, or holding a NUL are refused. */
    m = sample_msg(LF_MSG_WELCOME);
    m.u.welcome.fd_path[0] = 0;
    ASSERT_EQ(lf_wire_encode(&m, buf, sizeof buf), -EINVAL);
    memset(m.u.welcome.fd_path, 'a', sizeof m.u.welcome.fd_path);
    ASSERT_EQ(lf_wire_encode(&m, buf, sizeof buf), -EINVAL);
    m = sample_msg(LF_MSG_WELCOME);
    n = lf_wire_encode(&m, buf, sizeof buf);
    buf[n - (12 + 4 * (int)m.u.welcome.nweights) - 3] = 0; /* in the path, before the weights */
    ASSERT_EQ(lf_wire_decode(buf, (size_t)n, &d), -EPROTO);
    /* WELCOME's step counts: more than the epochs served, or than
     * LF_WIRE_EPOCHS_MAX, are refused both ways. */
    m = sample_msg(LF_MSG_WELCOME);
    m.u.welcome.epochs = 2;
    ASSERT_EQ(lf_wire_encode(&m, buf, sizeof buf), -EINVAL);
    static uint32_t many[LF_WIRE_EPOCHS_MAX + 1];
    m.u.welcome.steps = many;
    m.u.welcome.epochs = m.u.welcome.nsteps = LF_WIRE_EPOCHS_MAX;
    n = lf_wire_encode(&m, buf, sizeof buf);
    ASSERT_GT(n, 0);
    ASSERT_EQ(lf_wire_decode(buf, (size_t)n, &d), 0);
    m.u.welcome.epochs = m.u.welcome.nsteps = LF_WIRE_EPOCHS_MAX + 1;
    ASSERT_EQ(lf_wire_encode(&m, buf, sizeof buf), -EINVAL);
    m = sample_msg(LF_MSG_WELCOME);
    n = lf_wire_encode(&m, buf, sizeof buf);
    buf[8 + 56 + 8] = 10; /* nsteps, after 56 bytes of fields, first_epoch, epochs: > 9 */
    ASSERT_EQ(lf_wire_decode(buf, (size_t)n, &d), -EPROTO);
    /* WAITING: connected is 0 or 1. */
    m = sample_msg(LF_MSG_WAITING);
    n = lf_wire_encode(&m, buf, sizeof buf);
    buf[12] = 2;
    ASSERT_EQ(lf_wire_decode(buf, (size_t)n, &d), -EPROTO);
    m.u.waiting.connected = 2;
    ASSERT_EQ(lf_wire_encode(&m, buf, sizeof buf), -EINVAL);
    /* WELCOME: no more eval slots than slots, either way. */
    m = sample_msg(LF_MSG_WELCOME);
    m.u.welcome.eval_slots = m.u.welcome.nslots + 1;
    ASSERT_EQ(lf_wire_encode(&m, buf, sizeof buf), -EINVAL);
    m.u.welcome.eval_slots = m.u.welcome.nslots;
    n = lf_wire_encode(&m, buf, sizeof buf);
    ASSERT_GT(n, 0);
    buf[n - (12 + 4 * (int)m.u.welcome.nweights) - 2 - (int)strlen(m.u.welcome.fd_path) - 8] = 5; /* eval_slots: 5 > 4 */
    ASSERT_EQ(lf_wire_decode(buf, (size_t)n, &d), -EPROTO);
    /* WELCOME's weights: none or 2 to LF_WIRE_WEIGHTS_MAX, either way. */
    m = sample_msg(LF_MSG_WELCOME);
    m.u.welcome.nweights = 1;
    ASSERT_EQ(lf_wire_encode(&m, buf, sizeof buf), -EINVAL);
    m.u.welcome.nweights = LF_WIRE_WEIGHTS_MAX + 1;
    ASSERT_EQ(lf_wire_encode(&m, buf, sizeof buf), -EINVAL);
    m.u.welcome.nweights = 3;
    n = lf_wire_encode(&m, buf, sizeof buf);
    ASSERT_GT(n, 0);
    buf[n - 12 - 4] = LF_WIRE_WEIGHTS_MAX + 1; /* nweights' low byte */
    ASSERT_EQ(lf_wire_decode(buf, (size_t)n, &d), -EPROTO);

    /* TRACE_REQ: a path is wanted, fits with its NUL and holds none. */
    m = sample_msg(LF_MSG_TRACE_REQ);
    m.u.trace_req.trace_len = m.u.trace_req.chart_len = 0;
    ASSERT_EQ(lf_wire_encode(&m, buf, sizeof buf), -EINVAL);
    m = sample_msg(LF_MSG_TRACE_REQ);
    static char long_path[LF_WIRE_TRACE_PATH_MAX];
    memset(long_path, 'a', sizeof long_path);
    m.u.trace_req.trace = long_path;
    m.u.trace_req.trace_len = LF_WIRE_TRACE_PATH_MAX;
    ASSERT_EQ(lf_wire_encode(&m, buf, sizeof buf), -EINVAL);
    m = sample_msg(LF_MSG_TRACE_REQ);
    n = lf_wire_encode(&m, buf, sizeof buf);
    buf[8 + 2 + 3] = 0; /* a NUL inside the trace path */
    ASSERT_EQ(lf_wire_decode(buf, (size_t)n, &d), -EPROTO);
    printf("wire ok\n");
    return 0;
}
