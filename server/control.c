/*
 * control.c — lf-server's control thread: the ZeroMQ ROUTER, the Unix
 * socket that hands each rank its ring memfd, and the sessions.
 *
 * A rank's session goes: HELLO -> WELCOME(token) -> the client connects to
 * the fd socket and presents the token -> it gets the memfd and keeps that
 * connection open -> START -> READY/RELEASE ... -> END -> BYE. The kept
 * connection is the liveness signal: when it closes (a BYE, a crash, a
 * kill -9) the rank is gone, its queued jobs are dropped, the slots its
 * client held are free again, and the other ranks go on. A new client may
 * take a gone rank again (a restarted trainer): HELLO is accepted, and its
 * START position, usually a saved state from before the death, is served
 * by a catch-up thread (pipeline.c) until the rank meets the planner, with
 * READY sequence numbers from 0 again. The run ends when no rank has a
 * client; a rejoin after that finds no server. One connection (routing id)
 * speaks for one rank at a time. Anything a client sends is checked
 * (slot range, ownership, sequence) and answered with ERROR when wrong; it
 * never reaches the pipeline's memory.
 *
 * Why memfd + SCM_RIGHTS instead of shm_open: a named segment exists in
 * /dev/shm between its creation and its unlink, and a kill -9 of the server
 * in that window leaves it behind. A memfd has no name; it lives exactly as
 * long as some process holds it, so no crash of either side can leak one.
 */
#include "srv.h"

#include "lf_ipc.h"
#include "lf_ring.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

#define MAX_PENDING 32           /* fd-socket connections not yet identified */

/* A ring slot as its client has it: handed out by READY, not released. */
typedef struct held_slot {
    int on;
    lf_msg_ready ready;          /* the READY that handed it out */
    uint64_t since_ns;           /* when */
    double cost;                 /* the batch's planned cost */
} held_slot;

typedef struct session {
    unsigned char id[SRV_ID_MAX]; /* ZeroMQ routing id; idlen 0: no client yet */
    size_t idlen;
    uint64_t token;
    int fdconn;                  /* kept fd-socket connection; -1 none */
    uint32_t pid;
    uint64_t welcomed_ns;        /* when WELCOME went out */
    uint32_t epochs_told;        /* epoch step counts sent: WELCOME's, then EPOCH's */
    held_slot *held;             /* per slot */
    char *trace, *chart;         /* its TRACE_REQ's paths ("": not wanted), held until every
                                    local rank has asked or left; NULL: none asked */
} session;

typedef struct control {
    srv *s;
    srv_endpoint *ep;            /* the sockets, the lock, the signal descriptor (main's) */
    int pending[MAX_PENDING];
    uint64_t pending_ns[MAX_PENDING]; /* when each was accepted */
    uint32_t npending;
    session sess[SRV_MAX_RANKS];
    uint64_t last_hb_ns, start_ns;
    int stop_signal;
    int stalled;                 /* a rank stalled: the run is stopping (check_stalls) */
    uint64_t stall_end_ns;       /* when the server stops waiting for the clients to go */
    char stall_msg[300];
} control;

/* ---- sending ------------------------------------------------------------ */

static int send_to(control *c, const unsigned char *id, size_t idlen, const lf_msg *m)
{
    return srv_endpoint_send(c->ep, id, idlen, m);
}

static void send_error(control *c, const unsigned char *id, size_t idlen, int code,
                       const char *text)
{
    srv_endpoint_send_error(c->ep, id, idlen, code, text);
}

static int live(const control *c, uint32_t li)
{
    return c->sess[li].idlen > 0 && !c->s->ranks[li].gone;
}

/* ---- sessions ----------------------------------------------------------- */

static int find_session(const control *c, const unsigned char *id, size_t idlen)
{
    for (uint32_t li = 0; li < c->s->cfg.nlocal; li++)
        if (c->sess[li].idlen == idlen && memcmp(c->sess[li].id, id, idlen) == 0) return (int)li;
    return -1;
}

static int local_index(const srv *s, uint32_t rank)
{
    for (uint32_t li = 0; li < s->cfg.nlocal; li++)
        if (s->cfg.local[li] == rank) return (int)li;
    return -1;
}

static void maybe_start_all(control *c);
static void maybe_trace(control *c);

/* The client of rank li left or died: the slots it held are free again
 * (nobody reads them now), its jobs are dropped. */
static void rank_gone(control *c, uint32_t li)
{
    srv *s = c->s;
    session *ss = &c->sess[li];
    if (ss->fdconn >= 0) close(ss->fdconn);
    ss->fdconn = -1;
    pthread_mutex_lock(&s->mu);
    if (!s->ranks[li].gone) {
        for (uint32_t k = 0; k < srv_ring_slots(s); k++)
            if (ss->held[k].on) srv_free_slot(s, li, k);
        memset(ss->held, 0, srv_ring_slots(s) * sizeof *ss->held);
        srv_obs_gone(s, li);
        srv_rank_gone(s, li);
    }
    pthread_mutex_unlock(&s->mu);
    maybe_start_all(c);
    maybe_trace(c);
}

/* WELCOME's plan id without the weights, and the weights. */
static void welcome_mix(const srv *s, lf_msg_welcome *w)
{
    const lf_plan_mix *mix = &s->cfg.plan.mix;
    w->base_id = s->base_id;
    w->nweights = mix->sources > 1 ? mix->sources : 0;
    memcpy(w->weights, mix->weight, w->nweights * sizeof *w->weights);
}

static void on_hello(control *c, const unsigned char *id, size_t idlen, const lf_msg_hello *h)
{
    srv *s = c->s;
    char text[160];
    int li = local_index(s, h->rank);
    if (li < 0) {
        snprintf(text, sizeof text, "rank %u is not served by this server", h->rank);
        send_error(c, id, idlen, -EINVAL, text);
        return;
    }
    if (h->world_size != 0 && h->world_size != s->cfg.world) {
        snprintf(text, sizeof text, "world size %u, server plans for %u", h->world_size,
                 s->cfg.world);
        send_error(c, id, idlen, -EINVAL, text);
        return;
    }
    /* One connection speaks for one rank: its messages reach the session
     * its routing id names (find_session), so a second live session under
     * the same id could never be started, and would keep its rank from a
     * real client. An id whose rank is gone may take another rank. */
    int other = find_session(c, id, idlen);
    if (other >= 0 && other != li && !s->ranks[other].gone) {
        snprintf(text, sizeof text, "this connection already speaks for rank %u; rank %u needs "
                 "a connection of its own", s->cfg.local[other], h->rank);
        send_error(c, id, idlen, -EBUSY, text);
        return;
    }
    session *ss = &c->sess[li];
    int same = ss->idlen == idlen && memcmp(ss->id, id, idlen) == 0;
    int gone = s->ranks[li].gone;
    if (ss->idlen > 0 && !same && !gone) {
        snprintf(text, sizeof text, "rank %u already has a client", h->rank);
        send_error(c, id, idlen, -EBUSY, text);
        return;
    }
    if (idlen > SRV_ID_MAX || getrandom(&ss->token, sizeof ss->token, 0) != sizeof ss->token) {
        send_error(c, id, idlen, -EIO, "cannot set up the session");
        return;
    }
    if (gone) { /* a new client for a rank whose client left or died */
        pthread_mutex_lock(&s->mu);
        srv_rank_attach(s, (uint32_t)li, s->all_started);
        pthread_mutex_unlock(&s->mu);
    }
    if (other >= 0 && other != li) c->sess[other].idlen = 0; /* the id now names li's session */
    memcpy(ss->id, id, idlen);
    ss->idlen = idlen;
    ss->pid = h->pid;
    ss->welcomed_ns = srv_now_ns();
    pthread_mutex_lock(&s->mu); /* the planner adds epochs (planner.c, tell_steps) */
    ss->epochs_told = s->epochs_planned;
    pthread_mutex_unlock(&s->mu);
    lf_msg w = {.type = LF_MSG_WELCOME};
    w.u.welcome = (lf_msg_welcome){
        .rank = h->rank, .nslots = srv_ring_slots(s), .slot_size = s->slot_size,
        .segment_size = s->ranks[li].seg_size, .token = ss->token,
        .heartbeat_ms = s->cfg.heartbeat_ms, .server_pid = (uint32_t)getpid(),
        .plan_id = s->plan_id, .fingerprint = s->fingerprint,
        .first_epoch = s->cfg.plan.epoch, .epochs = s->cfg.epochs,
        .nsteps = ss->epochs_told, .steps = s->epoch_steps, .eval_slots = s->eval_slots,
        .eval_steps = s->eval_steps};
    snprintf(w.u.welcome.fd_path, sizeof w.u.welcome.fd_path, "%s", c->ep->fd_path);
    welcome_mix(s, &w.u.welcome);
    send_to(c, id, idlen, &w);
}

/* Every local rank has sent START: the planner begins at the earliest of
 * their positions, and each rank's stream at its own (states saved at
 * different batches, e.g. before a kill -9 of the server, resume exactly). */
static void maybe_start_all(control *c)
{
    srv *s = c->s;
    uint64_t first = 0;
    int any = 0; /* no sentinel key: the last epoch's last step is UINT64_MAX */
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        if (s->ranks[li].gone) continue; /* left before START: not waited for */
        if (!s->ranks[li].started) return;
    }
    if (s->all_started) return;
    pthread_mutex_lock(&s->mu);
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        srv_rank *r = &s->ranks[li];
        if (r->gone) continue;
        r->from_key = srv_pos_key(r->start_epoch, r->start_step);
        if (any && r->from_key >= first) continue;
        any = 1;
        first = r->from_key;
        s->start_epoch = r->start_epoch;
        s->start_step = r->start_step;
    }
    if (!any) { /* every rank left before START */
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->all_started = 1;
    s->m.started_ns = srv_now_ns();
    pthread_cond_broadcast(&s->cv_plan);
    pthread_mutex_unlock(&s->mu);
}

/* Until every local rank has sent START, the planner does not begin and
 * the ranks that did wait: each of them is told, each heartbeat and at its
 * START, which rank it waits for, so its trainer's timeout names that rank
 * rather than a slow server. The first rank no client has said HELLO for,
 * else the first whose client has not sent START. */
static void tell_waiting(control *c)
{
    srv *s = c->s;
    lf_msg m = {.type = LF_MSG_WAITING};
    uint32_t missing = 0;
    int first = -1, first_connected = -1;
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        if (s->ranks[li].started || s->ranks[li].gone) continue;
        missing++;
        if (c->sess[li].idlen == 0 && first < 0) first = (int)li;
        if (c->sess[li].idlen > 0 && first_connected < 0) first_connected = (int)li;
    }
    if (s->all_started || missing == 0) return;
    uint32_t li = (uint32_t)(first >= 0 ? first : first_connected);
    uint64_t since = first >= 0 ? c->start_ns : c->sess[li].welcomed_ns;
    m.u.waiting = (lf_msg_waiting){.rank = s->cfg.local[li], .connected = first < 0,
                                   .others = missing - 1,
                                   .waited_ms = (srv_now_ns() - since) / 1000000u};
    for (uint32_t k = 0; k < s->cfg.nlocal; k++)
        if (live(c, k) && s->ranks[k].started) send_to(c, c->sess[k].id, c->sess[k].idlen, &m);
}

/* Why a START's saved position cannot resume here, or NULL: it must be of
 * this plan, or of this plan under other mixture weights at the start of
 * an epoch (the client moved a position after an epoch's last batch to the
 * next epoch's start): the balancer's rule (lf_plan_state_restore), as the
 * epochs' draws start afresh each epoch. */
static const char *start_refusal(const srv *s, const lf_msg_position *p)
{
    if (p->plan_id == 0 || p->plan_id == s->plan_id) return NULL;
    if (p->base_id != s->base_id || s->cfg.plan.mix.sources < 2)
        return "saved state belongs to another plan";
    if (p->step != 0)
        return "saved state was taken inside an epoch under other mixture weights: resume "
               "with the weights it was saved under, or from a state saved at an epoch boundary";
    return NULL;
}

static void on_start(control *c, int li, const unsigned char *id, size_t idlen,
                     const lf_msg_position *p)
{
    srv *s = c->s;
    srv_rank *r = &s->ranks[li];
    if (c->sess[li].fdconn < 0 || r->started) {
        send_error(c, id, idlen, -EPROTO, "START before the ring was mapped, or twice");
        return;
    }
    const char *refused = start_refusal(s, p);
    if (refused) {
        send_error(c, id, idlen, -EINVAL, refused);
        rank_gone(c, (uint32_t)li);
        return;
    }
    r->started = 1;
    r->start_epoch = p->epoch;
    r->start_step = p->step;
    pthread_mutex_lock(&s->mu);
    srv_obs_start(s, (uint32_t)li, srv_now_ns());
    pthread_mutex_unlock(&s->mu);
    if (!s->all_started) {
        maybe_start_all(c);
        tell_waiting(c);
        return;
    }
    int rc = srv_rank_catch_up(s, (uint32_t)li); /* a rejoin */
    if (rc < 0) {
        send_error(c, id, idlen, rc, "cannot start the catch-up of this rank");
        rank_gone(c, (uint32_t)li);
    }
}

static void on_release(control *c, int li, const unsigned char *id, size_t idlen,
                       const lf_msg_release *m)
{
    srv *s = c->s;
    session *ss = &c->sess[li];
    if (m->slot >= srv_ring_slots(s) || !ss->held[m->slot].on ||
        ss->held[m->slot].ready.seq != m->seq) {
        send_error(c, id, idlen, -EINVAL, "RELEASE of a slot this client does not hold");
        return;
    }
    ss->held[m->slot].on = 0;
    pthread_mutex_lock(&s->mu);
    srv_free_slot(s, (uint32_t)li, m->slot);
    if (m->slot < s->cfg.slots) srv_obs_release(s, (uint32_t)li, srv_now_ns()); /* training's */
    pthread_mutex_unlock(&s->mu);
}

/* A rank asks for an eval pass (eval.c): its batches come as EVAL_READY,
 * then EVAL_END. */
static void on_eval(control *c, int li, const unsigned char *id, size_t idlen)
{
    srv *s = c->s;
    if (!s->eval_slots) {
        send_error(c, id, idlen, -ENODATA, "EVAL_REQ: this server has no --eval-data");
        return;
    }
    pthread_mutex_lock(&s->mu);
    int rc = srv_eval_begin(s, (uint32_t)li);
    pthread_mutex_unlock(&s->mu);
    if (rc == -EBUSY)
        send_error(c, id, idlen, -EPROTO, "EVAL_REQ while this rank's pass is under way");
    else if (rc < 0)
        send_error(c, id, idlen, rc, "cannot start this rank's eval pass");
}

/* The rank's end-of-run report (observe.c), as its figures stand now. */
static void on_report(control *c, int li, const unsigned char *id, size_t idlen)
{
    char text[4096];
    pthread_mutex_lock(&c->s->mu);
    srv_obs_report(c->s, (uint32_t)li, text, sizeof text);
    pthread_mutex_unlock(&c->s->mu);
    lf_msg r = {.type = LF_MSG_REPORT,
                .u.text = {.code = 0, .len = (uint32_t)strlen(text), .text = text}};
    send_to(c, id, idlen, &r);
}

/* ---- the trace (trace.c) ----------------------------------------------- */

static void forget_trace(session *ss)
{
    free(ss->trace);
    free(ss->chart);
    ss->trace = ss->chart = NULL;
}

/* Once every local rank has asked for the trace or left, writes it for
 * each asker (once for the same paths: every rank of a job names the
 * same) and answers each with what was written or why not. A rank still
 * training holds the answer back: the trace is to have every rank's
 * steps. */
static void maybe_trace(control *c)
{
    srv *s = c->s;
    int asked = 0;
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        if (!live(c, li)) forget_trace(&c->sess[li]);
        else if (!c->sess[li].trace) return;
        else asked = 1;
    }
    if (!asked) return;
    char text[LF_WIRE_TRACE_PATH_MAX + 400];
    int rc = 0, done = -1;
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        session *ss = &c->sess[li];
        if (!ss->trace) continue;
        if (done < 0 || strcmp(ss->trace, c->sess[done].trace) != 0 ||
            strcmp(ss->chart, c->sess[done].chart) != 0) {
            rc = srv_trace_write(s, ss->trace, ss->chart, text, sizeof text);
            done = (int)li;
            if (!s->cfg.quiet) fprintf(stderr, "lf-server: %s\n", text);
        }
        lf_msg r = {.type = LF_MSG_TRACE,
                    .u.text = {.code = rc, .len = (uint32_t)strlen(text), .text = text}};
        send_to(c, ss->id, ss->idlen, &r);
    }
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) forget_trace(&c->sess[li]);
}

static void on_trace(control *c, int li, const lf_msg_trace_req *m)
{
    session *ss = &c->sess[li];
    forget_trace(ss);
    ss->trace = strndup(m->trace ? m->trace : "", m->trace_len);
    ss->chart = strndup(m->chart ? m->chart : "", m->chart_len);
    if (!ss->trace || !ss->chart) {
        forget_trace(ss);
        send_error(c, ss->id, ss->idlen, -ENOMEM, "trace: out of memory");
        return;
    }
    maybe_trace(c);
}

static void on_step(control *c, int li, const lf_msg_step *m)
{
    pthread_mutex_lock(&c->s->mu);
    srv_obs_step(c->s, (uint32_t)li, m, srv_now_ns());
    pthread_mutex_unlock(&c->s->mu);
}

/* The slot rank li's client has held longest; -1: none. */
static int oldest_held(const control *c, uint32_t li)
{
    const session *ss = &c->sess[li];
    int oldest = -1;
    for (uint32_t k = 0; k < srv_ring_slots(c->s); k++)
        if (ss->held[k].on && (oldest < 0 || ss->held[k].since_ns < ss->held[oldest].since_ns))
            oldest = (int)k;
    return oldest;
}

/* The STATS reply's text (stat.c), with what the sessions know. */
static char *stats_json(control *c)
{
    srv_client_view v[SRV_MAX_RANKS];
    for (uint32_t li = 0; li < c->s->cfg.nlocal; li++) {
        int k = oldest_held(c, li);
        v[li].connected = c->sess[li].idlen > 0;
        v[li].oldest_ns = k >= 0 ? c->sess[li].held[k].since_ns : 0;
    }
    return srv_stats_json(c->s, c->start_ns, v);
}

static void on_message(control *c, const unsigned char *id, size_t idlen, const lf_msg *m)
{
    if (m->type == LF_MSG_HELLO) { on_hello(c, id, idlen, &m->u.hello); return; }
    if (m->type == LF_MSG_STATS_REQ) {
        /* A reply in every case: the asker would otherwise wait for nothing. */
        char *text = stats_json(c);
        if (!text) {
            send_error(c, id, idlen, -ENOMEM, "stats: out of memory");
            return;
        }
        lf_msg r = {.type = LF_MSG_STATS,
                    .u.text = {.code = 0, .len = (uint32_t)strlen(text), .text = text}};
        if (r.u.text.len <= LF_WIRE_TEXT_MAX) send_to(c, id, idlen, &r);
        else send_error(c, id, idlen, -EMSGSIZE, "stats: the JSON is larger than a message");
        free(text);
        return;
    }
    int li = find_session(c, id, idlen);
    if (li < 0 || c->s->ranks[li].gone) {
        send_error(c, id, idlen, -EPROTO, "no session: send HELLO first");
        return;
    }
    switch (m->type) {
    case LF_MSG_START: on_start(c, li, id, idlen, &m->u.start); break;
    case LF_MSG_RELEASE: on_release(c, li, id, idlen, &m->u.release); break;
    case LF_MSG_STEP: on_step(c, li, &m->u.step); break;
    case LF_MSG_REPORT_REQ: on_report(c, li, id, idlen); break;
    case LF_MSG_TRACE_REQ: on_trace(c, li, &m->u.trace_req); break;
    case LF_MSG_EVAL_REQ: on_eval(c, li, id, idlen); break;
    case LF_MSG_BYE: rank_gone(c, (uint32_t)li); break;
    case LF_MSG_HEARTBEAT: break;
    default: send_error(c, id, idlen, -EPROTO, "unexpected message type");
    }
}

static void recv_router(control *c)
{
    static srv_request q; /* large; the control thread's alone */
    while (srv_endpoint_recv(c->ep, &q) == 1) on_message(c, q.id, q.idlen, &q.msg);
}

/* ---- the fd socket ------------------------------------------------------ */

static void accept_fd_conn(control *c)
{
    int fd = accept4(c->ep->listenfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.uid != getuid() ||
        c->npending == MAX_PENDING) {
        close(fd);
        return;
    }
    c->pending_ns[c->npending] = srv_now_ns();
    c->pending[c->npending++] = fd;
}

/* Closes pending connection pi (its slot takes the last one's place). */
static int take_pending(control *c, uint32_t pi)
{
    int fd = c->pending[pi];
    c->npending--;
    c->pending[pi] = c->pending[c->npending];
    c->pending_ns[pi] = c->pending_ns[c->npending];
    return fd;
}

/* A pending connection sent its token: hand over the memfd, keep the link. */
static void identify_fd_conn(control *c, uint32_t pi)
{
    srv *s = c->s;
    int fd = take_pending(c, pi);
    unsigned char msg[12];
    ssize_t n = recv(fd, msg, sizeof msg, MSG_DONTWAIT);
    uint64_t token;
    uint32_t rank;
    memcpy(&token, msg, 8);
    memcpy(&rank, msg + 8, 4);
    int li = n == (ssize_t)sizeof msg ? local_index(s, rank) : -1;
    if (li < 0 || c->sess[li].idlen == 0 || c->sess[li].token != token ||
        c->sess[li].fdconn >= 0 || s->ranks[li].gone ||
        lf_ipc_send_fd(fd, s->ranks[li].memfd, "OK\n", 4) != 0) {
        close(fd);
        return;
    }
    c->sess[li].token = 0; /* one use */
    c->sess[li].fdconn = fd;
}

/* ---- announcing finished jobs ------------------------------------------- */

/* Hands job j's slot to its rank's client: READY, or EVAL_READY for an
 * eval batch, which counts in no training figure. */
static void send_ready(control *c, uint32_t li, const srv_job *j)
{
    srv *s = c->s;
    srv_rank *r = &s->ranks[li];
    session *ss = &c->sess[li];
    lf_msg m = {.type = j->eval ? LF_MSG_EVAL_READY : LF_MSG_READY,
                .u.ready = {.slot = j->slot, .epoch = j->epoch, .step = j->step, .seq = j->seq}};
    uint64_t now = srv_now_ns();
    ss->held[j->slot] = (held_slot){.on = 1, .ready = m.u.ready, .since_ns = now,
                                    .cost = (double)j->cost};
    send_to(c, ss->id, ss->idlen, &m);
    if (j->eval) return;
    srv_obs_ready(s, li, j, now);
    r->m.batches++;
    r->m.samples += j->n;
    r->m.tokens += j->tokens;
    for (uint32_t i = 0; s->mixture && i < j->n; i++)
        s->m.source_tokens[lf_plan_mix_source(&s->cfg.plan.mix, j->ids[i])] += j->lengths[i];
    r->m.cost += (double)j->cost;
    s->m.batches++;
    s->m.samples += j->n;
    s->m.last_ready_ns = srv_now_ns();
}

/* Announces the finished jobs at the head of one of rank li's lists, in
 * order (a discarded one's slot is free again). */
static void announce_jobs(control *c, uint32_t li, srv_job **head, srv_job **tail)
{
    srv *s = c->s;
    while (*head && (*head)->done) {
        srv_job *j = *head;
        *head = j->next;
        if (!*head) *tail = NULL;
        if (j->discard || s->ranks[li].gone) srv_free_slot(s, li, j->slot);
        else send_ready(c, li, j);
        srv_job_free(j);
    }
}

/* EPOCH for each epoch the planner counted since the session's WELCOME
 * (or its last EPOCH): before any READY of it, which the planner makes
 * only after counting it. Under mu. */
static void tell_epochs(control *c, uint32_t li)
{
    session *ss = &c->sess[li];
    while (ss->idlen && ss->epochs_told < c->s->epochs_planned) {
        lf_msg m = {.type = LF_MSG_EPOCH};
        m.u.epoch = (lf_msg_epoch){ss->epochs_told, c->s->epoch_steps[ss->epochs_told]};
        send_to(c, ss->id, ss->idlen, &m);
        ss->epochs_told++;
    }
}

static void announce_rank(control *c, uint32_t li)
{
    srv *s = c->s;
    srv_rank *r = &s->ranks[li];
    session *ss = &c->sess[li];
    tell_epochs(c, li);
    announce_jobs(c, li, &r->jobs_head, &r->jobs_tail);
    announce_jobs(c, li, &r->eval_head, &r->eval_tail);
    if (r->eval_on && r->eval_planned && !r->eval_head && live(c, li)) {
        lf_msg m = {.type = LF_MSG_EVAL_END};
        send_to(c, ss->id, ss->idlen, &m);
        r->eval_on = 0;
    }
    if (s->planner_done && !r->catchup_gen && !r->jobs_head && !r->ended && live(c, li) &&
        r->started) {
        lf_msg m = {.type = LF_MSG_END};
        send_to(c, ss->id, ss->idlen, &m);
        r->ended = 1;
    }
}

/* Clears the pending wake-up before looking: a job finished after this
 * writes the eventfd again (srv_notify_control), so none waits unannounced. */
static void announce(control *c)
{
    atomic_store(&c->s->notify_pending, 0);
    pthread_mutex_lock(&c->s->mu);
    for (uint32_t li = 0; li < c->s->cfg.nlocal; li++) announce_rank(c, li);
    pthread_mutex_unlock(&c->s->mu);
}

/* A client that got WELCOME but never came for its ring (it died in
 * between) would hold its rank forever: forget it after ten heartbeats, so
 * the rank can say HELLO again. A rank that was rejoining is gone again. */
static void forget_stalled(control *c, uint64_t now)
{
    srv *s = c->s;
    uint64_t limit = 10ull * s->cfg.heartbeat_ms * 1000000u;
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        session *ss = &c->sess[li];
        if (ss->idlen && ss->fdconn < 0 && !s->ranks[li].gone && now - ss->welcomed_ns > limit) {
            ss->idlen = 0;
            ss->token = 0;
            pthread_mutex_lock(&s->mu);
            if (s->ranks[li].catchup_gen) srv_rank_gone(s, li);
            pthread_mutex_unlock(&s->mu);
        }
    }
}

/* A connection that never sends its token (a client stopped between
 * connect and send) would hold one of the MAX_PENDING places forever, and
 * with all of them taken no rank could map its ring: closed after ten
 * heartbeats. */
static void drop_stale_pending(control *c, uint64_t now)
{
    uint64_t limit = 10ull * c->s->cfg.heartbeat_ms * 1000000u;
    for (uint32_t i = c->npending; i-- > 0;)
        if (now - c->pending_ns[i] > limit) close(take_pending(c, i));
}

static void heartbeat(control *c)
{
    uint64_t now = srv_now_ns();
    if (now - c->last_hb_ns < (uint64_t)c->s->cfg.heartbeat_ms * 1000000u) return;
    c->last_hb_ns = now;
    forget_stalled(c, now);
    drop_stale_pending(c, now);
    lf_msg m = {.type = LF_MSG_HEARTBEAT, .u.heartbeat_ns = now};
    for (uint32_t li = 0; li < c->s->cfg.nlocal; li++)
        if (live(c, li)) send_to(c, c->sess[li].id, c->sess[li].idlen, &m);
    tell_waiting(c);
}

/* ---- the loop ----------------------------------------------------------- */

/* Whether the run is over: a thread failed (*failed; s->failed is written
 * under mu by whichever thread fails, and s->fail_msg before it, once), or
 * every rank is gone (BYE or closed): nobody is left to serve, whether the
 * plan is finished or not. A gone rank could rejoin while another rank
 * still has a client; once none has, the run is over. */
static int run_over(control *c, int *failed)
{
    srv *s = c->s;
    int done = 1;
    pthread_mutex_lock(&s->mu);
    *failed = s->failed;
    for (uint32_t li = 0; li < s->cfg.nlocal; li++)
        if (!s->ranks[li].gone) done = 0;
    pthread_mutex_unlock(&s->mu);
    return done || *failed;
}

static void fail_everyone(control *c, const char *why)
{
    for (uint32_t li = 0; li < c->s->cfg.nlocal; li++)
        if (live(c, li)) send_error(c, c->sess[li].id, c->sess[li].idlen, -EIO, why);
}

/* ---- a rank that stops releasing (#28 F4) ------------------------------- */

/* Rank li's client has held batch h past --stall-ms: a trainer
 * that hangs or was stopped (SIGSTOP) keeps its ring full, the planner
 * waits for it, and every other rank's ring runs dry behind it. A
 * synchronous job cannot go on without that rank, so the run stops: the
 * server says which rank, how long and which step, every rank gets that
 * as its error, and lf-stat shows the rank "stalled" while the clients go
 * (at most ten heartbeats; then the server ends, exit status 1). */
static void stall(control *c, uint32_t li, const held_slot *h, uint64_t now)
{
    srv *s = c->s;
    snprintf(c->stall_msg, sizeof c->stall_msg,
             "rank %u stalled: its client has held the batch of epoch %u step %" PRIu64
             " for %.1f s without releasing it (--stall-ms %u); the run stops, as no rank "
             "can go on without it: find out why that trainer hangs", s->cfg.local[li],
             h->ready.epoch, h->ready.step, (double)(now - h->since_ns) / 1e9, s->cfg.stall_ms);
    fprintf(stderr, "lf-server: %s\n", c->stall_msg);
    pthread_mutex_lock(&s->mu);
    s->ranks[li].obs.stalled = 1;
    pthread_mutex_unlock(&s->mu);
    fail_everyone(c, c->stall_msg);
    c->stalled = 1;
    c->stall_end_ns = now + 10ull * s->cfg.heartbeat_ms * 1000000u;
}

static void check_stalls(control *c, uint64_t now)
{
    srv *s = c->s;
    if (c->stalled) {
        if (now >= c->stall_end_ns) srv_fail(s, "%s", c->stall_msg);
        return;
    }
    if (s->cfg.stall_ms == 0) return;
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        int k = live(c, li) ? oldest_held(c, li) : -1;
        const held_slot *h = k >= 0 ? &c->sess[li].held[k] : NULL;
        if (h && now - h->since_ns > (uint64_t)s->cfg.stall_ms * 1000000u) {
            stall(c, li, h, now);
            return;
        }
    }
}

static void poll_once(control *c)
{
    zmq_pollitem_t it[4 + MAX_PENDING + SRV_MAX_RANKS];
    uint32_t n = 0, rank_at[SRV_MAX_RANKS];
    it[n++] = (zmq_pollitem_t){.socket = c->ep->router, .events = ZMQ_POLLIN};
    it[n++] = (zmq_pollitem_t){.fd = c->s->notify_fd, .events = ZMQ_POLLIN};
    it[n++] = (zmq_pollitem_t){.fd = c->ep->sigfd, .events = ZMQ_POLLIN};
    it[n++] = (zmq_pollitem_t){.fd = c->ep->listenfd, .events = ZMQ_POLLIN};
    uint32_t pend0 = n;
    for (uint32_t i = 0; i < c->npending; i++)
        it[n++] = (zmq_pollitem_t){.fd = c->pending[i], .events = ZMQ_POLLIN};
    uint32_t conn0 = n, nconn = 0;
    for (uint32_t li = 0; li < c->s->cfg.nlocal; li++)
        if (c->sess[li].fdconn >= 0) {
            rank_at[nconn++] = li;
            it[n++] = (zmq_pollitem_t){.fd = c->sess[li].fdconn, .events = ZMQ_POLLIN};
        }
    if (zmq_poll(it, (int)n, (long)c->s->cfg.heartbeat_ms) < 0) return;
    if (it[1].revents) {
        uint64_t v;
        ssize_t r = read(c->s->notify_fd, &v, sizeof v);
        (void)r;
    }
    if (it[2].revents) {
        struct signalfd_siginfo si;
        if (read(c->ep->sigfd, &si, sizeof si) == (ssize_t)sizeof si) c->stop_signal = (int)si.ssi_signo;
    }
    if (it[0].revents) recv_router(c);
    /* Closed kept connections: the client is gone, however it left. Only a
     * connection its session still keeps: recv_router may have seen the
     * client's BYE and a new client's HELLO for the rank since the poll. */
    for (uint32_t k = 0; k < nconn; k++)
        if (it[conn0 + k].revents && c->sess[rank_at[k]].fdconn == it[conn0 + k].fd)
            rank_gone(c, rank_at[k]);
    for (uint32_t i = c->npending; i-- > 0;)
        if (it[pend0 + i].revents) identify_fd_conn(c, i);
    if (it[3].revents) accept_fd_conn(c);
}

static void control_close(control *c)
{
    for (uint32_t i = 0; i < c->npending; i++) close(c->pending[i]);
    for (uint32_t li = 0; li < c->s->cfg.nlocal; li++) {
        if (c->sess[li].fdconn >= 0) close(c->sess[li].fdconn);
        free(c->sess[li].held);
        forget_trace(&c->sess[li]);
    }
}

int srv_control_run(srv *s, srv_endpoint *ep)
{
    control c = {.s = s, .ep = ep};
    c.start_ns = c.last_hb_ns = srv_now_ns();
    int rc = 0;
    for (uint32_t li = 0; li < s->cfg.nlocal && rc == 0; li++) {
        c.sess[li].fdconn = -1;
        c.sess[li].held = calloc(srv_ring_slots(s), sizeof *c.sess[li].held);
        if (!c.sess[li].held) rc = -ENOMEM;
    }
    if (rc == 0) rc = srv_pipeline_start(s);
    if (rc == 0) {
        s->serving = 1;
        if (!s->cfg.quiet)
            fprintf(stderr, "lf-server: serving %u rank(s) on ipc://%s, %u slots of %" PRIu64
                    " bytes each\n", s->cfg.nlocal, ep->path, s->cfg.slots, s->slot_size);
    }
    int failed = 0;
    while (rc == 0 && !c.stop_signal && !run_over(&c, &failed)) {
        poll_once(&c);
        announce(&c);
        heartbeat(&c);
        check_stalls(&c, srv_now_ns());
    }
    if (c.stalled && !failed) { /* every client went before stall_end_ns */
        srv_fail(s, "%s", c.stall_msg);
        failed = 1;
    }
    if (failed) fail_everyone(&c, s->fail_msg);
    else if (c.stop_signal) fail_everyone(&c, "server stopped by a signal");
    if (c.stop_signal && !s->cfg.quiet)
        fprintf(stderr, "lf-server: stopped by signal %d\n", c.stop_signal);
    control_close(&c);
    if (rc == 0 && failed) rc = -EIO;
    if (rc == 0 && c.stop_signal) rc = -EINTR;
    return rc;
}
