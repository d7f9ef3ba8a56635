/*
 * lf_wire.c — encode and decode control messages (see lf_wire.h).
 *
 * A cursor writes or reads little-endian integers and refuses to go past
 * the end; each message type lists its fields once for encoding and once
 * for decoding, and the decoder insists that the body is consumed exactly.
 */
#include "lf_wire.h"

#include <errno.h>
#include <string.h>

typedef struct cursor {
    unsigned char *p;            /* encode: output; NULL when decoding */
    const unsigned char *in;     /* decode: input */
    size_t len, pos;
    int bad;                     /* set when a put/get would overrun */
} cursor;

static void put_le(cursor *c, uint64_t v, unsigned n)
{
    if (c->pos + n > c->len) { c->bad = 1; return; }
    for (unsigned i = 0; i < n; i++) c->p[c->pos + i] = (unsigned char)(v >> (8 * i));
    c->pos += n;
}

static uint64_t get_le(cursor *c, unsigned n)
{
    if (c->pos + n > c->len) { c->bad = 1; return 0; }
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) v |= (uint64_t)c->in[c->pos + i] << (8 * i);
    c->pos += n;
    return v;
}

static void put_bytes(cursor *c, const void *src, size_t n)
{
    if (n > c->len - c->pos) { c->bad = 1; return; }
    if (n) memcpy(c->p + c->pos, src, n);
    c->pos += n;
}

static const char *get_bytes(cursor *c, size_t n)
{
    if (n > c->len - c->pos) { c->bad = 1; return NULL; }
    const char *s = (const char *)(c->in + c->pos);
    c->pos += n;
    return s;
}

/* WELCOME's tail (version 6): the plan id without the weights and the
 * mixture's weights; kept apart from the fields before it. */
static int put_mix(cursor *c, const lf_msg_welcome *w)
{
    if (w->nweights > LF_WIRE_WEIGHTS_MAX || w->nweights == 1) return -EINVAL;
    put_le(c, w->base_id, 8);
    put_le(c, w->nweights, 4);
    for (uint32_t i = 0; i < w->nweights; i++) put_le(c, w->weights[i], 4);
    return 0;
}

static void get_mix(cursor *c, lf_msg_welcome *w)
{
    w->base_id = get_le(c, 8);
    w->nweights = (uint32_t)get_le(c, 4);
    if (w->nweights > LF_WIRE_WEIGHTS_MAX || w->nweights == 1) { c->bad = 1; return; }
    for (uint32_t i = 0; i < w->nweights; i++) w->weights[i] = (uint32_t)get_le(c, 4);
}

static const char *const type_names[] = {
    [LF_MSG_HELLO] = "HELLO",     [LF_MSG_WELCOME] = "WELCOME",
    [LF_MSG_START] = "START",     [LF_MSG_READY] = "READY",
    [LF_MSG_RELEASE] = "RELEASE", [LF_MSG_STEP] = "STEP",
    [LF_MSG_END] = "END",         [LF_MSG_BYE] = "BYE",
    [LF_MSG_HEARTBEAT] = "HEARTBEAT", [LF_MSG_ERROR] = "ERROR",
    [LF_MSG_STATS_REQ] = "STATS_REQ", [LF_MSG_STATS] = "STATS",
    [LF_MSG_PLANNING] = "PLANNING", [LF_MSG_REPORT_REQ] = "REPORT_REQ",
    [LF_MSG_REPORT] = "REPORT", [LF_MSG_WAITING] = "WAITING",
    [LF_MSG_TRACE_REQ] = "TRACE_REQ", [LF_MSG_TRACE] = "TRACE",
    [LF_MSG_EVAL_REQ] = "EVAL_REQ", [LF_MSG_EVAL_READY] = "EVAL_READY",
    [LF_MSG_EVAL_END] = "EVAL_END", [LF_MSG_EPOCH] = "EPOCH",
};

/* A TRACE_REQ path's length: at most LF_WIRE_TRACE_PATH_MAX - 1 bytes (so
 * it fits with its NUL), with no NUL inside. */
static int path_ok(const char *p, uint32_t n)
{
    return n < LF_WIRE_TRACE_PATH_MAX && (n == 0 || (p && !memchr(p, 0, n)));
}

const char *lf_wire_type_name(unsigned type)
{
    if (type == 0 || type >= sizeof type_names / sizeof type_names[0]) return "?";
    return type_names[type];
}

int lf_wire_encode(const lf_msg *m, void *buf, size_t cap)
{
    cursor c = {.p = buf, .len = cap < LF_WIRE_MAX ? cap : LF_WIRE_MAX};
    put_le(&c, LF_WIRE_MAGIC, 4);
    put_le(&c, LF_WIRE_VERSION, 2);
    put_le(&c, m->type, 2);
    switch (m->type) {
    case LF_MSG_HELLO:
        put_le(&c, m->u.hello.rank, 4);
        put_le(&c, m->u.hello.world_size, 4);
        put_le(&c, m->u.hello.pid, 4);
        break;
    case LF_MSG_WELCOME: {
        size_t n = strnlen(m->u.welcome.fd_path, LF_WIRE_PATH_MAX);
        if (n == 0 || n == LF_WIRE_PATH_MAX) return -EINVAL;
        put_le(&c, m->u.welcome.rank, 4);
        put_le(&c, m->u.welcome.nslots, 4);
        put_le(&c, m->u.welcome.slot_size, 8);
        put_le(&c, m->u.welcome.segment_size, 8);
        put_le(&c, m->u.welcome.token, 8);
        put_le(&c, m->u.welcome.heartbeat_ms, 4);
        put_le(&c, m->u.welcome.server_pid, 4);
        put_le(&c, m->u.welcome.plan_id, 8);
        put_le(&c, m->u.welcome.fingerprint, 8);
        if (m->u.welcome.nsteps > m->u.welcome.epochs ||
            m->u.welcome.nsteps > LF_WIRE_EPOCHS_MAX || (m->u.welcome.nsteps && !m->u.welcome.steps))
            return -EINVAL;
        put_le(&c, m->u.welcome.first_epoch, 4);
        put_le(&c, m->u.welcome.epochs, 4);
        put_le(&c, m->u.welcome.nsteps, 4);
        for (uint32_t i = 0; i < m->u.welcome.nsteps; i++) put_le(&c, m->u.welcome.steps[i], 4);
        if (m->u.welcome.eval_slots > m->u.welcome.nslots) return -EINVAL;
        put_le(&c, m->u.welcome.eval_slots, 4);
        put_le(&c, m->u.welcome.eval_steps, 4);
        put_le(&c, n, 2);
        put_bytes(&c, m->u.welcome.fd_path, n);
        if (put_mix(&c, &m->u.welcome) < 0) return -EINVAL;
        break;
    }
    case LF_MSG_START:
        put_le(&c, m->u.start.epoch, 4);
        put_le(&c, m->u.start.step, 8);
        put_le(&c, m->u.start.plan_id, 8);
        put_le(&c, m->u.start.base_id, 8);
        break;
    case LF_MSG_READY:
    case LF_MSG_EVAL_READY:
        put_le(&c, m->u.ready.slot, 4);
        put_le(&c, m->u.ready.epoch, 4);
        put_le(&c, m->u.ready.step, 8);
        put_le(&c, m->u.ready.seq, 8);
        break;
    case LF_MSG_RELEASE:
        put_le(&c, m->u.release.slot, 4);
        put_le(&c, m->u.release.seq, 8);
        break;
    case LF_MSG_STEP:
        put_le(&c, m->u.step.epoch, 4);
        put_le(&c, m->u.step.step, 8);
        put_le(&c, m->u.step.compute_ns, 8);
        put_le(&c, m->u.step.wait_ns, 8);
        put_le(&c, m->u.step.sync_ns, 8);
        put_le(&c, m->u.step.start_ns, 8);
        break;
    case LF_MSG_TRACE_REQ: {
        const lf_msg_trace_req *t = &m->u.trace_req;
        if (!path_ok(t->trace, t->trace_len) || !path_ok(t->chart, t->chart_len) ||
            t->trace_len + t->chart_len == 0)
            return -EINVAL;
        put_le(&c, t->trace_len, 2);
        put_bytes(&c, t->trace, t->trace_len);
        put_le(&c, t->chart_len, 2);
        put_bytes(&c, t->chart, t->chart_len);
        break;
    }
    case LF_MSG_HEARTBEAT:
        put_le(&c, m->u.heartbeat_ns, 8);
        break;
    case LF_MSG_PLANNING:
        if (m->u.planning_pct > 100) return -EINVAL;
        put_le(&c, m->u.planning_pct, 4);
        break;
    case LF_MSG_WAITING:
        if (m->u.waiting.connected > 1) return -EINVAL;
        put_le(&c, m->u.waiting.rank, 4);
        put_le(&c, m->u.waiting.connected, 4);
        put_le(&c, m->u.waiting.others, 4);
        put_le(&c, m->u.waiting.waited_ms, 8);
        break;
    case LF_MSG_EPOCH:
        if (m->u.epoch.index >= LF_WIRE_EPOCHS_MAX) return -EINVAL;
        put_le(&c, m->u.epoch.index, 4);
        put_le(&c, m->u.epoch.steps, 4);
        break;
    case LF_MSG_ERROR:
    case LF_MSG_STATS:
    case LF_MSG_REPORT:
    case LF_MSG_TRACE:
        if (m->u.text.len > LF_WIRE_TEXT_MAX) return -EINVAL;
        put_le(&c, (uint32_t)m->u.text.code, 4);
        put_le(&c, m->u.text.len, 4);
        put_bytes(&c, m->u.text.text, m->u.text.len);
        break;
    case LF_MSG_END:
    case LF_MSG_BYE:
    case LF_MSG_STATS_REQ:
    case LF_MSG_REPORT_REQ:
    case LF_MSG_EVAL_REQ:
    case LF_MSG_EVAL_END:
        break;
    default:
        return -EINVAL;
    }
    return c.bad ? -ENOBUFS : (int)c.pos;
}

static void decode_welcome(cursor *c, lf_msg_welcome *w)
{
    w->rank = (uint32_t)get_le(c, 4);
    w->nslots = (uint32_t)get_le(c, 4);
    w->slot_size = get_le(c, 8);
    w->segment_size = get_le(c, 8);
    w->token = get_le(c, 8);
    w->heartbeat_ms = (uint32_t)get_le(c, 4);
    w->server_pid = (uint32_t)get_le(c, 4);
    w->plan_id = get_le(c, 8);
    w->fingerprint = get_le(c, 8);
    w->first_epoch = (uint32_t)get_le(c, 4);
    w->epochs = (uint32_t)get_le(c, 4);
    w->nsteps = (uint32_t)get_le(c, 4);
    if (w->nsteps > w->epochs || w->nsteps > LF_WIRE_EPOCHS_MAX) { c->bad = 1; return; }
    w->steps = NULL;
    w->steps_le = (const unsigned char *)get_bytes(c, (size_t)w->nsteps * 4);
    w->eval_slots = (uint32_t)get_le(c, 4);
    w->eval_steps = (uint32_t)get_le(c, 4);
    if (w->eval_slots > w->nslots) { c->bad = 1; return; }
    size_t n = (size_t)get_le(c, 2);
    const char *s = get_bytes(c, n);
    /* The path must be non-empty, fit with its NUL and hold no NUL inside. */
    if (!s || n == 0 || n >= LF_WIRE_PATH_MAX || memchr(s, 0, n)) { c->bad = 1; return; }
    memcpy(w->fd_path, s, n);
    w->fd_path[n] = 0;
    get_mix(c, w);
}

void lf_wire_steps(const lf_msg_welcome *w, uint32_t *out)
{
    cursor c = {.in = w->steps_le, .len = (size_t)w->nsteps * 4};
    for (uint32_t i = 0; i < w->nsteps; i++) out[i] = (uint32_t)get_le(&c, 4);
}

int lf_wire_decode(const void *buf, size_t len, lf_msg *out)
{
    if (len > LF_WIRE_MAX) return -EMSGSIZE;
    cursor c = {.in = buf, .len = len};
    lf_msg m;
    memset(&m, 0, sizeof m);
    if (get_le(&c, 4) != LF_WIRE_MAGIC || get_le(&c, 2) != LF_WIRE_VERSION) return -EPROTO;
    m.type = (uint16_t)get_le(&c, 2);
    switch (m.type) {
    case LF_MSG_HELLO:
        m.u.hello.rank = (uint32_t)get_le(&c, 4);
        m.u.hello.world_size = (uint32_t)get_le(&c, 4);
        m.u.hello.pid = (uint32_t)get_le(&c, 4);
        break;
    case LF_MSG_WELCOME:
        decode_welcome(&c, &m.u.welcome);
        break;
    case LF_MSG_START:
        m.u.start.epoch = (uint32_t)get_le(&c, 4);
        m.u.start.step = get_le(&c, 8);
        m.u.start.plan_id = get_le(&c, 8);
        m.u.start.base_id = get_le(&c, 8);
        break;
    case LF_MSG_READY:
    case LF_MSG_EVAL_READY:
        m.u.ready.slot = (uint32_t)get_le(&c, 4);
        m.u.ready.epoch = (uint32_t)get_le(&c, 4);
        m.u.ready.step = get_le(&c, 8);
        m.u.ready.seq = get_le(&c, 8);
        break;
    case LF_MSG_RELEASE:
        m.u.release.slot = (uint32_t)get_le(&c, 4);
        m.u.release.seq = get_le(&c, 8);
        break;
    case LF_MSG_STEP:
        m.u.step.epoch = (uint32_t)get_le(&c, 4);
        m.u.step.step = get_le(&c, 8);
        m.u.step.compute_ns = get_le(&c, 8);
        m.u.step.wait_ns = get_le(&c, 8);
        m.u.step.sync_ns = get_le(&c, 8);
        m.u.step.start_ns = get_le(&c, 8);
        break;
    case LF_MSG_TRACE_REQ: {
        lf_msg_trace_req *t = &m.u.trace_req;
        t->trace_len = (uint32_t)get_le(&c, 2);
        t->trace = get_bytes(&c, t->trace_len);
        t->chart_len = (uint32_t)get_le(&c, 2);
        t->chart = get_bytes(&c, t->chart_len);
        if (!c.bad && (!path_ok(t->trace, t->trace_len) || !path_ok(t->chart, t->chart_len) ||
                       t->trace_len + t->chart_len == 0))
            return -EPROTO;
        break;
    }
    case LF_MSG_HEARTBEAT:
        m.u.heartbeat_ns = get_le(&c, 8);
        break;
    case LF_MSG_PLANNING:
        m.u.planning_pct = (uint32_t)get_le(&c, 4);
        if (m.u.planning_pct > 100) return -EPROTO;
        break;
    case LF_MSG_WAITING:
        m.u.waiting.rank = (uint32_t)get_le(&c, 4);
        m.u.waiting.connected = (uint32_t)get_le(&c, 4);
        m.u.waiting.others = (uint32_t)get_le(&c, 4);
        m.u.waiting.waited_ms = get_le(&c, 8);
        if (m.u.waiting.connected > 1) return -EPROTO;
        break;
    case LF_MSG_EPOCH:
        m.u.epoch.index = (uint32_t)get_le(&c, 4);
        m.u.epoch.steps = (uint32_t)get_le(&c, 4);
        if (m.u.epoch.index >= LF_WIRE_EPOCHS_MAX) return -EPROTO;
        break;
    case LF_MSG_ERROR:
    case LF_MSG_STATS:
    case LF_MSG_REPORT:
    case LF_MSG_TRACE:
        m.u.text.code = (int32_t)(uint32_t)get_le(&c, 4);
        m.u.text.len = (uint32_t)get_le(&c, 4);
        if (m.u.text.len > LF_WIRE_TEXT_MAX) return -EPROTO;
        m.u.text.text = get_bytes(&c, m.u.text.len);
        break;
    case LF_MSG_END:
    case LF_MSG_BYE:
    case LF_MSG_STATS_REQ:
    case LF_MSG_REPORT_REQ:
    case LF_MSG_EVAL_REQ:
    case LF_MSG_EVAL_END:
        break;
    default:
        return -EPROTO;
    }
    if (c.bad || c.pos != len) return -EPROTO;
    *out = m;
    return 0;
}
