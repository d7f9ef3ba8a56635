/*
 * host.c — liblevelfeed's host path: one rank's side of the server
 * conversation, batches read in place from the mapped ring.
 *
 * The client owns a ZeroMQ DEALER socket for control messages (lf_wire.h)
 * and a Unix socket on which it received its ring's memfd (lf_ipc.h). It
 * keeps that Unix socket open: the server sees it close when this process
 * ends, however it ends, and the client sees it close when the server ends,
 * so neither side has to guess from missed heartbeats alone.
 *
 * There is no thread here (until a device is used: see gpu.c, whose
 * prefetch thread then becomes the only caller of the host side below;
 * client.c, above both, picks one of them for each of the trainer's calls).
 * Both threads may fail, so fail() records the text under a lock, and the
 * trainer reads its own copy, taken as each of its calls returns
 * (client.c's to_trainer): the text cannot change while the trainer reads it.
 * READY messages that arrive before the trainer
 * asks for them wait in a FIFO as long as their slots (the server never
 * has more slots out than the ring holds). There are two such lanes: the
 * training stream's, and an eval pass's (--eval-data: EVAL_READY into the
 * ring's last eval_slots, a sequence of its own), so training READYs that
 * come during a pass wait, in order, for lf_next after it. Every READY is checked before a
 * tensor pointer is handed out: slot number, sequence number, and the slot
 * header and layout in shared memory (lf_slot_check). Anything wrong there
 * fails the client with LF_E_PROTOCOL: a broken server must not make a
 * trainer read out of bounds.
 */
#include "levelfeed.h"

#include "client_host.h"
#include "lf_ipc.h"
#include "lf_layout.h"
#include "lf_ring.h"
#include "lf_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define SILENT_HEARTBEATS 10     /* missed server heartbeats before LF_E_GONE */
#define PLANNING_ASK_MS 250      /* a planning server is asked again this often */
#define LAST_WORD_MS 200         /* after the ring socket closes, wait this long for
                                    the server's last message (its error) */

uint64_t lf_client_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The first of names that is set decides: its value if it is plain digits
 * in [min, 2^24], else `fallback` (unknown: lf_client_open then refuses a
 * missing rank), never a later launcher's variable. */
static int env_int(const char *const *names, int min, int fallback)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (!v || !*v) continue;
        size_t n = strspn(v, "0123456789");
        if (n == 0 || n > 8 || v[n]) return fallback;
        long x = strtol(v, NULL, 10);
        return x >= min && x <= 1 << 24 ? (int)x : fallback;
    }
    return fallback;
}

void lf_client_options_default(lf_client_options *o)
{
    static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                            "SLURM_PROCID", NULL};
    static const char *const world_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                                             "PMI_SIZE", "SLURM_NTASKS", NULL};
    static const char *const local_vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                             "MPI_LOCALRANKID", "SLURM_LOCALID", NULL};
    memset(o, 0, sizeof *o);
    o->endpoint = getenv("LEVELFEED_ENDPOINT");
    o->rank = env_int(rank_vars, 0, -1);
    o->world_size = env_int(world_vars, 1, -1);
    o->local_rank = env_int(local_vars, 0, -1);
    o->device = o->local_rank;
}

const char *lf_strerror(int code)
{
    switch (code) {
    case 0: return "success";
    case LF_E_END: return "end of data: every epoch has been delivered";
    case LF_E_TIMEOUT: return "timed out waiting for the server";
    case LF_E_SERVER: return "the server reported an error";
    case LF_E_GONE: return "the server went away";
    case LF_E_PROTOCOL: return "the server sent a malformed message or slot";
    case LF_E_STATE: return "invalid saved state (bytes, rank or plan)";
    case LF_E_ORDER: return "call not allowed at this point";
    default: return code < 0 && code > -4096 ? strerror(-code) : "unknown error";
    }
}

const char *lf_client_error(const lf_client *c)
{
    return c->err_seen;
}

uint64_t lf_client_plan_id(const lf_client *c)
{
    return c->welcome.fingerprint; /* written once, by lf_client_open */
}

/* The counts of WELCOME, written once by lf_client_open; the position is
 * the trainer's (client.c). */
int64_t lf_client_eval_batches(const lf_client *c)
{
    return c->welcome.eval_slots ? (int64_t)c->welcome.eval_steps : -ENODATA;
}

int64_t lf_client_epoch_batches(const lf_client *c, int64_t epoch)
{
    const lf_msg_welcome *w = &c->welcome;
    int64_t first = w->first_epoch, end = first + w->epochs;
    if (epoch == LF_EPOCH_NEXT) {
        int64_t e = c->pos_epoch, n;
        if (e < first) return lf_client_epoch_batches(c, first);
        if (e >= end) return LF_E_END;
        if ((n = lf_client_epoch_batches(c, e)) < 0 || c->pos_step < (uint64_t)n) return n;
        /* the position is at the epoch's end: the next batch is the next epoch's */
        return e + 1 < end ? lf_client_epoch_batches(c, e + 1) : LF_E_END;
    }
    if (epoch < first || epoch >= end) return -ERANGE;
    if (epoch - first >= LF_WIRE_EPOCHS_MAX) return -ENODATA;
    if ((uint64_t)(epoch - first) >= atomic_load_explicit(&c->epochs_told, memory_order_acquire))
        return -EAGAIN; /* not planned yet: EPOCH tells it before its first batch */
    return c->epoch_steps[epoch - first];
}


/* Records why a call fails and returns code, for `return fail(...)`; under
 * err_mu, as the trainer's thread and the prefetch thread both fail. */
static int fail(lf_client *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(lf_client *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&c->err_mu);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    pthread_mutex_unlock(&c->err_mu);
    va_end(ap);
    return code;
}

static int send_msg(lf_client *c, const lf_msg *m)
{
    unsigned char buf[256];
    int n = lf_wire_encode(m, buf, sizeof buf);
    if (n < 0) return n;
    if (zmq_send(c->zsock, buf, (size_t)n, ZMQ_DONTWAIT) != n) return -zmq_errno();
    c->last_sent_ns = lf_client_now_ns();
    return 0;
}

/* Receives one message if one is there. Returns 1 and fills *m (pointing
 * into buf), 0 when none is waiting, or a negative code. */
static int recv_msg(lf_client *c, unsigned char *buf, size_t cap, lf_msg *m)
{
    int n = zmq_recv(c->zsock, buf, cap, ZMQ_DONTWAIT);
    if (n < 0) return zmq_errno() == EAGAIN ? 0 : -zmq_errno();
    if ((size_t)n > cap || lf_wire_decode(buf, (size_t)n, m) != 0)
        return fail(c, LF_E_PROTOCOL, "undecodable control message");
    c->last_heard_ns = lf_client_now_ns();
    return 1;
}

/* Waits until the control socket is readable, the fd socket closes, or
 * timeout_ms passes (-1: forever). Returns 1 readable, 0 timeout, <0 error.
 * The close is noticed once, with a wait of up to LAST_WORD_MS for the
 * server's reason; from then on LF_E_GONE comes at once. */
static int wait_readable(lf_client *c, int timeout_ms)
{
    if (c->gone) return LF_E_GONE; /* lf_client_error keeps the reason */
    zmq_pollitem_t it[2] = {{.socket = c->zsock, .events = ZMQ_POLLIN},
                            {.fd = c->fdsock, .events = ZMQ_POLLIN}};
    int n = zmq_poll(it, c->fdsock >= 0 ? 2 : 1, timeout_ms);
    if (n < 0) return zmq_errno() == EINTR ? 0 : -zmq_errno();
    if (c->fdsock >= 0 && (it[1].revents & (ZMQ_POLLIN | ZMQ_POLLERR)) &&
        !(it[0].revents & ZMQ_POLLIN)) {
        /* The server sends nothing on this socket: readable means closed.
         * A server that stopped on an error sent its reason just before;
         * ZeroMQ's I/O thread may deliver it a moment after the close. */
        zmq_pollitem_t last = {.socket = c->zsock, .events = ZMQ_POLLIN};
        c->gone = 1;
        fail(c, LF_E_GONE, "server closed the ring socket"); /* its last word replaces this */
        return zmq_poll(&last, 1, LAST_WORD_MS) > 0 ? 1 : LF_E_GONE;
    }
    return n > 0;
}

/* The step counts of WELCOME (the epochs the server had planned), with
 * room for every epoch EPOCH tells later. */
static int keep_epoch_steps(lf_client *c, const lf_msg_welcome *w)
{
    uint32_t all = w->epochs < LF_WIRE_EPOCHS_MAX ? w->epochs : LF_WIRE_EPOCHS_MAX;
    if (w->nsteps > all) return fail(c, LF_E_PROTOCOL, "WELCOME with more step counts than epochs");
    c->epoch_steps = calloc((size_t)all + 1, sizeof *c->epoch_steps);
    if (!c->epoch_steps) return -ENOMEM;
    lf_wire_steps(w, c->epoch_steps);
    atomic_store_explicit(&c->epochs_told, w->nsteps, memory_order_release);
    return 0;
}

/* EPOCH: the next epoch's step count, told once the server has planned
 * it, before its first READY. */
static int told_epoch(lf_client *c, const lf_msg_epoch *e)
{
    uint32_t told = atomic_load_explicit(&c->epochs_told, memory_order_relaxed);
    uint32_t all = c->welcome.epochs < LF_WIRE_EPOCHS_MAX ? c->welcome.epochs : LF_WIRE_EPOCHS_MAX;
    if (e->index != told || e->index >= all)
        return fail(c, LF_E_PROTOCOL, "EPOCH %u out of order (%u told)", e->index, told);
    c->epoch_steps[e->index] = e->steps;
    atomic_store_explicit(&c->epochs_told, told + 1, memory_order_release);
    return 0;
}

static int handle_msg(lf_client *c, const lf_msg *m)
{
    switch (m->type) {
    case LF_MSG_EVAL_READY:
        if (!c->eval_on || c->eval_ended || c->eval.len >= c->eval.cap)
            return fail(c, LF_E_PROTOCOL, "EVAL_READY outside a pass or beyond its slots");
        c->eval.fifo[(c->eval.head + c->eval.len++) % c->eval.cap] = m->u.ready;
        return 0;
    case LF_MSG_EVAL_END:
        if (!c->eval_on) return fail(c, LF_E_PROTOCOL, "EVAL_END outside a pass");
        c->eval_ended = 1;
        return 0;
    case LF_MSG_READY:
        if (c->ended || c->train.len >= c->train.cap)
            return fail(c, LF_E_PROTOCOL, "READY beyond the ring's slots");
        c->train.fifo[(c->train.head + c->train.len++) % c->train.cap] = m->u.ready;
        if (c->waiting_ns) { /* batches come: whatever the server waited for is there */
            pthread_mutex_lock(&c->err_mu);
            c->waiting_ns = 0;
            pthread_mutex_unlock(&c->err_mu);
        }
        return 0;
    case LF_MSG_END:
        c->ended = 1;
        return 0;
    case LF_MSG_EPOCH:
        return told_epoch(c, &m->u.epoch);
    case LF_MSG_WAITING:
        pthread_mutex_lock(&c->err_mu);
        c->waiting = m->u.waiting;
        c->waiting_ns = lf_client_now_ns();
        pthread_mutex_unlock(&c->err_mu);
        return 0;
    case LF_MSG_ERROR:
        return fail(c, LF_E_SERVER, "server: %.*s", (int)m->u.text.len, m->u.text.text);
    case LF_MSG_HEARTBEAT:
    case LF_MSG_STATS:
        return 0;
    default:
        return fail(c, LF_E_PROTOCOL, "unexpected control message");
    }
}

/* Whether lane l has what its caller waits for: a READY, or its end. */
static int lane_has(const lf_client *c, const lf_lane *l)
{
    return l->len > 0 || (l == &c->eval ? c->eval_ended : c->ended);
}

/* Reads every waiting message; keeps waiting up to timeout_ms for more
 * until done(c, arg) holds (READYs are queued meanwhile in their lanes). */
typedef int (*pump_done)(const lf_client *c, const void *arg);
static int pump_until(lf_client *c, int timeout_ms, pump_done done, const void *arg)
{
    uint64_t start = lf_client_now_ns();
    uint64_t hb_ns = (uint64_t)c->welcome.heartbeat_ms * 1000000u;
    for (;;) {
        unsigned char buf[LF_WIRE_MAX];
        lf_msg m;
        int rc;
        while ((rc = recv_msg(c, buf, sizeof buf, &m)) == 1)
            if ((rc = handle_msg(c, &m)) < 0) return rc;
        if (rc < 0) return rc;
        if (done(c, arg)) return 0;
        uint64_t now = lf_client_now_ns();
        /* The server heartbeats every hb_ns: long silence means it hangs. */
        if (hb_ns && now - c->last_heard_ns > SILENT_HEARTBEATS * hb_ns)
            return fail(c, LF_E_GONE, "no heartbeat from the server");
        if (hb_ns && now - c->last_sent_ns >= hb_ns) {
            lf_msg hb = {.type = LF_MSG_HEARTBEAT, .u.heartbeat_ns = now};
            if ((rc = send_msg(c, &hb)) < 0) return rc;
        }
        int slice = hb_ns ? (int)(hb_ns / 1000000u) : 1000;
        if (timeout_ms >= 0) {
            uint64_t spent_ms = (now - start) / 1000000u;
            /* Out of time: one look at the sockets without waiting, so a
             * server that went away is reported as gone, not as slow. */
            if (spent_ms >= (uint64_t)timeout_ms) {
                rc = wait_readable(c, 0);
                if (rc < 0) return rc;
                if (rc == 0) return LF_E_TIMEOUT;
                continue; /* a message came: read it */
            }
            if ((uint64_t)slice > timeout_ms - spent_ms) slice = (int)(timeout_ms - spent_ms);
        }
        if ((rc = wait_readable(c, slice)) < 0) return rc;
    }
}

static int lane_done(const lf_client *c, const void *l)
{
    return lane_has(c, l);
}

/* Reads every waiting message; keeps waiting up to timeout_ms for the first
 * while lane l has nothing (a READY of the other lane is queued meanwhile). */
static int pump(lf_client *c, int timeout_ms, const lf_lane *l)
{
    return pump_until(c, timeout_ms, lane_done, l);
}

/* Whether the count of the epoch *arg is known, or will never come (the
 * stream ended). */
static int count_done(const lf_client *c, const void *epoch)
{
    return c->ended || lf_client_epoch_batches(c, *(const int64_t *)epoch) != -EAGAIN;
}

int64_t lf_client_host_epoch_batches_wait(lf_client *c, int64_t epoch, int timeout_ms)
{
    int64_t n = lf_client_epoch_batches(c, epoch);
    if (n != -EAGAIN) return n;
    int rc = pump_until(c, timeout_ms, count_done, &epoch);
    return rc < 0 ? rc : lf_client_epoch_batches(c, epoch);
}

static int send_hello(lf_client *c)
{
    lf_msg h = {.type = LF_MSG_HELLO,
                .u.hello = {.rank = (uint32_t)c->rank,
                            .world_size = c->world_size < 0 ? 0 : (uint32_t)c->world_size,
                            .pid = (uint32_t)getpid()}};
    return send_msg(c, &h);
}

/* Waits for the WELCOME to the HELLO sent. A server still planning its
 * start-up answers PLANNING instead: the client asks again PLANNING_ASK_MS
 * later (one HELLO in flight at a time, so exactly one WELCOME comes), and
 * the connect timeout starts again, so it bounds the server's silence,
 * not its planning. *deadline moves with it. */
static int await_welcome(lf_client *c, uint64_t timeout_ns, uint64_t *deadline)
{
    uint64_t ask_at = 0; /* when to send the next HELLO; 0: one is in flight */
    for (;;) {
        unsigned char buf[LF_WIRE_MAX];
        lf_msg m;
        int rc = recv_msg(c, buf, sizeof buf, &m);
        if (rc < 0) return rc;
        uint64_t now = lf_client_now_ns();
        if (rc == 1) {
            if (m.type == LF_MSG_WELCOME) {
                if (m.u.welcome.rank != (uint32_t)c->rank)
                    return fail(c, LF_E_PROTOCOL, "WELCOME for another rank");
                c->welcome = m.u.welcome;
                c->welcome.steps_le = NULL; /* into buf: copied out here */
                return keep_epoch_steps(c, &m.u.welcome);
            }
            if (m.type == LF_MSG_ERROR) return handle_msg(c, &m);
            if (m.type == LF_MSG_PLANNING) {
                c->planning_pct = m.u.planning_pct;
                *deadline = now + timeout_ns;
                ask_at = now + PLANNING_ASK_MS * 1000000ull;
            }
            continue;
        }
        if (ask_at && now >= ask_at) {
            ask_at = 0;
            if ((rc = send_hello(c)) < 0) return rc;
            continue;
        }
        if (now >= *deadline)
            return c->planning_pct >= 0
                       ? fail(c, LF_E_TIMEOUT, "the server at %s stopped answering while it "
                              "planned (last heard: %d %%)", c->path, c->planning_pct)
                       : fail(c, LF_E_TIMEOUT, "no lf-server at %s welcomed rank %d in time: "
                              "start one there (lf-server --data DIR --world N, or the job "
                              "with lf-launch), or give the endpoint it listens on "
                              "(LEVELFEED_ENDPOINT); a server that is there may be done "
                              "with this rank", c->path, c->rank);
        uint64_t until = ask_at && ask_at < *deadline ? ask_at : *deadline;
        if ((rc = wait_readable(c, (int)((until - now) / 1000000u) + 1)) < 0) return rc;
    }
}

/* Bounds each blocking call on the fd socket (connect, send, the
 * descriptor's arrival) by the time left until the open's deadline. */
static void fd_socket_deadline(int sock, uint64_t deadline)
{
    uint64_t now = lf_client_now_ns(), left = deadline > now ? deadline - now : 1000000u;
    struct timeval tv = {.tv_sec = (time_t)(left / 1000000000u),
                         .tv_usec = (suseconds_t)(left % 1000000000u / 1000u)};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int fd_socket_timeout(lf_client *c)
{
    return fail(c, LF_E_TIMEOUT, "the server did not hand over the ring within the connect timeout");
}

/* The endpoint's directory must be this user's own (lf_ipc_private_dir):
 * in one that another user made, that user may be the "server". */
static int check_dir(lf_client *c)
{
    char why[sizeof c->err];
    int rc = lf_ipc_private_dir(c->path, 0, why, sizeof why);
    return rc < 0 ? fail(c, rc, "%s", why) : 0;
}

/* Connects to the fd socket, presents the token and maps the ring. Nothing
 * another user controls is trusted (docs/RELIABILITY.md, local peers): the
 * endpoint's directory is checked again now that a server answered in it
 * (it may have appeared after the open), the fd socket's peer must run as
 * this user (SO_PEERCRED), and so must the ring's memfd belong to it. A
 * relay by another user fails the last two even where ZeroMQ let it
 * through: it can forward WELCOME, but not present the one-time token on
 * an fd socket of this user's, nor pass on a memfd of this user's. */
static int map_ring(lf_client *c, uint64_t deadline)
{
    const lf_msg_welcome *w = &c->welcome;
    int rc = check_dir(c);
    if (rc < 0) return rc;
    if (lf_ring_segment_size(w->nslots, w->slot_size) != w->segment_size ||
        w->segment_size == 0)
        return fail(c, LF_E_PROTOCOL, "WELCOME ring sizes are inconsistent");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(w->fd_path) >= sizeof sa.sun_path) return -ENAMETOOLONG;
    strcpy(sa.sun_path, w->fd_path);
    c->fdsock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fdsock < 0) return -errno;
    fd_socket_deadline(c->fdsock, deadline);
    if (connect(c->fdsock, (struct sockaddr *)&sa, sizeof sa) != 0)
        return errno == EAGAIN || errno == EINPROGRESS ? fd_socket_timeout(c) : -errno;
    if ((rc = lf_ipc_same_user(c->fdsock)) < 0)
        return fail(c, rc, "the ring socket %s is served by another user's process, not by "
                    "this user's server: refused", w->fd_path);
    unsigned char hello[12];
    memcpy(hello, &w->token, 8);
    memcpy(hello + 8, &w->rank, 4);
    if (send(c->fdsock, hello, sizeof hello, MSG_NOSIGNAL) != (ssize_t)sizeof hello)
        return errno == EAGAIN ? fd_socket_timeout(c) : -errno;
    int fd = -1;
    unsigned char ack[4];
    long n = lf_ipc_recv_fd(c->fdsock, &fd, ack, sizeof ack);
    if (n == -EAGAIN) return fd_socket_timeout(c);
    if (n < 0) return (int)n;
    if (fd < 0 && n == 0) /* closed: a token it refused, or a session it dropped */
        return fail(c, LF_E_GONE, "the server closed the ring connection without handing "
                                  "over the ring (session refused or dropped)");
    if (fd < 0) return fail(c, LF_E_PROTOCOL, "fd socket sent no ring descriptor");
    struct stat st;
    if (fstat(fd, &st) != 0) rc = -errno;
    else if (st.st_uid != getuid())
        rc = fail(c, -EPERM, "the ring handed over belongs to uid %u, not to this user (uid %u): "
                  "another user's process is posing as the server; refused",
                  (unsigned)st.st_uid, (unsigned)getuid());
    else if ((uint64_t)st.st_size < w->segment_size)
        rc = fail(c, LF_E_PROTOCOL, "ring smaller than announced");
    /* A ring that could shrink under the mapping would turn a read of a
     * slot into SIGBUS: the server seals it, and an unsealed one is refused. */
    else if ((fcntl(fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_SEAL)) !=
             (F_SEAL_SHRINK | F_SEAL_SEAL))
        rc = fail(c, LF_E_PROTOCOL, "ring descriptor not sealed against shrinking");
    if (rc == 0) {
        /* Populated now, not by faults on the trainer's first reads.
         * Writable: a held slot is the rank's own until released (the
         * server only writes the ring, never reads it back), so a trainer
         * may edit a batch in place (labels[labels == 0] = -100) instead
         * of dying of SIGSEGV; the server rewrites the slot when it refills it. */
        void *p = mmap(NULL, w->segment_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                       fd, 0);
        if (p == MAP_FAILED) rc = -errno;
        else {
            c->seg = p;
            c->seg_size = w->segment_size;
            lf_ring_touch(p, w->segment_size);   /* here, not in the first batches */
        }
    }
    close(fd);
    int ring = rc == 0 ? lf_ring_header_check(c->seg, c->seg_size, w) : 0;
    if (ring == -EPROTONOSUPPORT)
        rc = fail(c, LF_E_PROTOCOL, "the server's ring is of another version than this "
                  "client's (%d): use the client library of the server's release",
                  LF_RING_VERSION);
    else if (ring != 0)
        rc = fail(c, LF_E_PROTOCOL, "ring header does not match WELCOME");
    return rc;
}

static int open_control(lf_client *c, const char *endpoint)
{
    char url[LF_IPC_PATH_MAX + 8];
    int rc = lf_ipc_endpoint(endpoint, NULL, c->path, sizeof c->path);
    if (rc < 0) return rc;
    /* A directory not there yet is waited for (the server may start
     * later): map_ring checks it once a WELCOME came through it. */
    if ((rc = check_dir(c)) < 0 && rc != -ENOENT) return rc;
    snprintf(url, sizeof url, "ipc://%s", c->path);
    c->zctx = zmq_ctx_new();
    if (!c->zctx) return -ENOMEM;
    c->zsock = zmq_socket(c->zctx, ZMQ_DEALER);
    if (!c->zsock) return -zmq_errno();
    int linger = 500, hwm = 0;
    zmq_setsockopt(c->zsock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(c->zsock, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(c->zsock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (zmq_connect(c->zsock, url) != 0) return -zmq_errno();
    return 0;
}

int lf_client_open(const lf_client_options *o, lf_client **out)
{
    if (o->rank < 0) return -EINVAL;
    lf_client *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    pthread_mutex_init(&c->err_mu, NULL);
    c->fdsock = -1;
    c->rank = o->rank;
    c->world_size = o->world_size;
    c->device = o->device >= 0 ? o->device : o->local_rank >= 0 ? o->local_rank : 0;
    c->planning_pct = -1;
    int rc = open_control(c, o->endpoint);
    if (rc == 0) rc = send_hello(c);
    /* A minute by default: the ranks of a job script or launcher may start
     * well before the node's server (an image to pull, a module to load);
     * the server binds before it plans and then answers "planning". */
    uint64_t timeout_ns =
        (uint64_t)(o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 60000) * 1000000u;
    uint64_t deadline = lf_client_now_ns() + timeout_ns;
    if (rc == 0) rc = await_welcome(c, timeout_ns, &deadline);
    if (rc == 0) rc = map_ring(c, deadline);
    if (rc == 0) {
        c->train.cap = c->welcome.nslots - c->welcome.eval_slots;
        c->eval.cap = c->welcome.eval_slots;
        c->slots = calloc(c->welcome.nslots, sizeof *c->slots);
        c->train.fifo = calloc(c->train.cap + 1, sizeof *c->train.fifo);
        c->eval.fifo = calloc(c->eval.cap + 1, sizeof *c->eval.fifo);
        if (!c->slots || !c->train.fifo || !c->eval.fifo) rc = -ENOMEM;
    }
    if (rc < 0) {
        /* No prefetch thread before lf_client_use_device: err is ours alone. */
        if (o->error && o->error_size)
            snprintf(o->error, o->error_size, "%s", c->err[0] ? c->err : lf_strerror(rc));
        lf_client_host_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

static void fill_batch(lf_client *c, const lf_msg_ready *r, held_slot *s,
                       uint32_t nsamples, lf_batch *b)
{
    unsigned char *slot = c->seg + lf_ring_slot_offset(r->slot, c->welcome.slot_size);
    for (uint32_t i = 0; i < s->layout.ntensors; i++) {
        const lf_tensor_desc *d = &s->layout.tensors[i];
        s->tensors[i] = (lf_tensor){.name = d->name, .dtype = d->dtype, .ndim = d->rank,
                                    .shape = d->shape, .size = d->size,
                                    .host = slot + d->offset, .device = NULL};
    }
    memset(b, 0, sizeof *b);
    b->epoch = r->epoch;
    b->step = r->step;
    b->seq = r->seq;
    b->nsamples = nsamples;
    b->ntensors = s->layout.ntensors;
    b->tensors = s->tensors;
    b->slot = r->slot;
}

/* The lane a slot belongs to: the ring's last eval_slots are the eval pass's. */
static lf_lane *slot_lane(lf_client *c, uint32_t slot)
{
    return slot >= c->train.cap ? &c->eval : &c->train;
}

/* Checks the READY at lane l's head and the slot it names. */
static int take_ready(lf_client *c, lf_lane *l, lf_batch *b)
{
    lf_msg_ready r = l->fifo[l->head];
    if (r.slot >= c->welcome.nslots || slot_lane(c, r.slot) != l)
        return fail(c, LF_E_PROTOCOL, "READY slot out of range");
    held_slot *s = &c->slots[r.slot];
    if (s->held) return fail(c, LF_E_PROTOCOL, "READY for a slot the trainer still holds");
    if (r.seq != l->next_seq) return fail(c, LF_E_PROTOCOL, "READY out of sequence");
    const unsigned char *slot = c->seg + lf_ring_slot_offset(r.slot, c->welcome.slot_size);
    const char *why = NULL;
    uint32_t nsamples = 0;
    uint64_t step_tokens = 0;
    if (lf_slot_check(slot, c->welcome.slot_size, (uint32_t)c->rank, &r, &s->layout,
                      &nsamples, &step_tokens, &why) != 0)
        return fail(c, LF_E_PROTOCOL, "bad slot %u: %s", r.slot, why ? why : "?");
    l->head = (l->head + 1) % l->cap;
    l->len--;
    l->next_seq++;
    s->held = 1;
    l->nheld++;
    s->seq = r.seq;
    fill_batch(c, &r, s, nsamples, b);
    b->step_tokens = step_tokens;
    return 0;
}

/* Waits up to timeout_ms until lane l has a READY or its end. With every
 * slot of the lane held, the server has none to fill until one is
 * released: waiting would only time out, so LF_E_ORDER at once, unless
 * the lane has ended meanwhile. */
static int lane_wait(lf_client *c, const lf_lane *l, int timeout_ms)
{
    int rc;
    if (!lane_has(c, l) && l->nheld == l->cap) {
        if ((rc = pump(c, 0, l)) < 0 && rc != LF_E_TIMEOUT) return rc;
        if (!lane_has(c, l)) return LF_E_ORDER;
    }
    if (!lane_has(c, l) && (rc = pump(c, timeout_ms, l)) < 0) return rc;
    return 0;
}

int lf_client_host_next(lf_client *c, lf_batch *b, int timeout_ms)
{
    uint64_t start = lf_client_now_ns();
    int rc;
    if (!c->started) {
        c->last_heard_ns = lf_client_now_ns();
        lf_msg m = {.type = LF_MSG_START,
                    .u.start = {.epoch = c->pos_epoch, .step = c->pos_step,
                                .plan_id = c->restore_plan, .base_id = c->restore_base}};
        if ((rc = send_msg(c, &m)) < 0) return rc;
        c->started = 1;
    }
    if ((rc = lane_wait(c, &c->train, timeout_ms)) < 0) return rc;
    if (c->train.len == 0) return LF_E_END;
    if ((rc = take_ready(c, &c->train, b)) < 0) return rc;
    b->wait_ns = lf_client_now_ns() - start;
    return 0;
}

int lf_client_host_eval_begin(lf_client *c)
{
    if (c->welcome.eval_slots == 0) return -ENODATA;
    if (c->eval_on) return LF_E_ORDER;
    lf_msg m = {.type = LF_MSG_EVAL_REQ};
    int rc = send_msg(c, &m);
    if (rc < 0) return rc;
    c->eval_on = 1;
    c->eval_ended = 0;
    c->eval.next_seq = 0; /* each pass counts from 0 */
    return 0;
}

int lf_client_host_eval_next(lf_client *c, lf_batch *b, int timeout_ms)
{
    uint64_t start = lf_client_now_ns();
    if (!c->eval_on) return LF_E_ORDER;
    int rc = lane_wait(c, &c->eval, timeout_ms);
    if (rc < 0) return rc;
    if (c->eval.len == 0) { /* the pass is over */
        c->eval_on = 0;
        return 0;
    }
    if ((rc = take_ready(c, &c->eval, b)) < 0) return rc;
    b->wait_ns = lf_client_now_ns() - start;
    return 1;
}

int lf_client_host_eval_over(lf_client *c)
{
    int rc = pump(c, 0, &c->eval);
    if (rc < 0 && rc != LF_E_TIMEOUT) return rc;
    return c->eval_ended && c->eval.len == 0;
}

uint32_t lf_client_host_eval_slots(const lf_client *c)
{
    return c->welcome.eval_slots;
}

void lf_client_ring(const lf_client *c, void **base, size_t *size, uint64_t *slot_size)
{
    *base = c->seg;
    *size = c->seg_size;
    *slot_size = c->welcome.slot_size;
}

void lf_client_set_error(lf_client *c, const char *text)
{
    fail(c, 0, "%s", text);
}

/* A WAITING older than this many heartbeats is not trusted: the server
 * sends one each heartbeat for as long as it waits. */
#define WAITING_FRESH_HEARTBEATS 3

void lf_client_set_timeout_error(lf_client *c, int timeout_ms)
{
    uint64_t now = lf_client_now_ns(), hb_ns = (uint64_t)c->welcome.heartbeat_ms * 1000000u;
    pthread_mutex_lock(&c->err_mu);
    const lf_msg_waiting *w = &c->waiting;
    char others[48] = "";
    if (w->others)
        snprintf(others, sizeof others, " (nor have %u other rank(s))", w->others);
    double secs = c->waiting_ns ? (double)w->waited_ms / 1e3 + (double)(now - c->waiting_ns) / 1e9
                                : 0;
    if (!c->waiting_ns || now - c->waiting_ns > WAITING_FRESH_HEARTBEATS * hb_ns)
        snprintf(c->err, sizeof c->err, "no batch from the server at %s within %d ms; it is "
                 "alive but had none ready (lf-stat %s shows where its time goes)",
                 c->path, timeout_ms, c->path);
    else if (!w->connected)
        snprintf(c->err, sizeof c->err, "rank %u has not connected to the server at %s for "
                 "%.0f s%s: start it, or check its launcher; no rank gets a batch until every "
                 "rank the server serves asks for one", w->rank, c->path, secs, others);
    else
        snprintf(c->err, sizeof c->err, "rank %u connected to the server at %s %.0f s ago but "
                 "has not asked for a batch%s: check that rank's trainer; no rank gets a batch "
                 "until every rank the server serves asks for one", w->rank, c->path, secs,
                 others);
    pthread_mutex_unlock(&c->err_mu);
}

int lf_client_host_release(lf_client *c, const lf_batch *b)
{
    if (b->slot >= c->welcome.nslots) return -EINVAL;
    held_slot *s = &c->slots[b->slot];
    if (!s->held || s->seq != b->seq) return -EINVAL;
    s->held = 0;
    slot_lane(c, b->slot)->nheld--;
    lf_msg m = {.type = LF_MSG_RELEASE, .u.release = {.slot = b->slot, .seq = b->seq}};
    return send_msg(c, &m);
}

int lf_client_host_report(lf_client *c, const lf_step_report *r)
{
    lf_msg m = {.type = LF_MSG_STEP,
                .u.step = {.epoch = r->epoch, .step = r->step, .compute_ns = r->compute_ns,
                           .wait_ns = r->wait_ns, .sync_ns = r->sync_ns,
                           .start_ns = r->start_ns}};
    return send_msg(c, &m);
}

/* Sends req and waits for the server's text answer of type `answer`
 * (REPORT, TRACE), handling whatever comes first: copies its text into buf
 * (NUL-terminated, cut to cap) and returns its full length, its code in
 * *code. */
static int ask_text(lf_client *c, const lf_msg *req, unsigned answer, char *buf, size_t cap,
                    int timeout_ms, int32_t *code)
{
    int rc = send_msg(c, req);
    uint64_t deadline = lf_client_now_ns() + (uint64_t)timeout_ms * 1000000u;
    while (rc >= 0) {
        unsigned char in[LF_WIRE_MAX];
        lf_msg m;
        while ((rc = recv_msg(c, in, sizeof in, &m)) == 1 && m.type != answer)
            if ((rc = handle_msg(c, &m)) < 0) return rc;
        if (rc == 1) {
            size_t n = m.u.text.len < cap ? m.u.text.len : cap ? cap - 1 : 0;
            memcpy(buf, m.u.text.text, n);
            if (cap) buf[n] = 0;
            *code = m.u.text.code;
            return (int)m.u.text.len;
        }
        if (rc < 0) break;
        uint64_t now = lf_client_now_ns();
        if (timeout_ms >= 0 && now >= deadline) return LF_E_TIMEOUT;
        rc = wait_readable(c, timeout_ms < 0 ? -1 : (int)((deadline - now) / 1000000u) + 1);
    }
    return rc;
}

int lf_client_host_ask_report(lf_client *c, char *buf, size_t cap, int timeout_ms)
{
    lf_msg m = {.type = LF_MSG_REPORT_REQ};
    int32_t code;
    return ask_text(c, &m, LF_MSG_REPORT, buf, cap, timeout_ms, &code);
}

int lf_client_host_ask_trace(lf_client *c, const char *trace, const char *chart, int timeout_ms)
{
    lf_msg m = {.type = LF_MSG_TRACE_REQ,
                .u.trace_req = {.trace_len = (uint32_t)strlen(trace),
                                .chart_len = (uint32_t)strlen(chart), .trace = trace,
                                .chart = chart}};
    char text[512];
    int32_t code = 0;
    int rc = ask_text(c, &m, LF_MSG_TRACE, text, sizeof text, timeout_ms, &code);
    if (rc < 0 || code == 0) return rc < 0 ? rc : 0;
    fail(c, 0, "%s", text);
    return LF_E_SERVER;
}

/* Saved states, in the host's byte order. Version 2 (wire version 6 on):
 *   u32 magic "FLS2", u32 rank, u32 epoch, u32 flags (STATE_ENDS_EPOCH),
 *   u64 step, u64 plan_id, u64 base_id (plan_id without the mixture's
 *   weights), u32 nweights, u32 weights[32] (parts per million), u32 0,
 *   u64 xxh3 of the bytes before it.
 * It carries what a resume across a change of mixture weights checks: the
 * plan id without the weights, the weights (to name both sets when it is
 * refused) and whether the position ends its epoch (after the epoch's last
 * batch: under other weights that epoch has another length, so such a
 * position resumes at the next epoch's start). Version 1, the 40 bytes of
 * before (magic "FLST", rank, epoch, 0, step, plan_id, xxh3), still
 * restores onto the unchanged plan, and lf_state_save writes it into a
 * buffer too small for version 2: what a program built against an older
 * levelfeed.h passes. */
#define STATE_MAGIC_V1 0x54534c46u /* "FLST" */
#define STATE_MAGIC 0x32534c46u    /* "FLS2" */
#define STATE_V1_SIZE 40
#define STATE_ENDS_EPOCH 1u        /* flags: the position is after its epoch's last batch */

typedef struct saved_state {
    uint32_t rank, epoch, flags;
    uint64_t step, plan_id, base_id; /* base_id 0: a version 1 state */
    uint32_t nweights, weights[LF_WIRE_WEIGHTS_MAX];
} saved_state;

_Static_assert(LF_STATE_SIZE == 48 + 4 * LF_WIRE_WEIGHTS_MAX + 8, "state v2 layout");

/* Writes st as version 2 into cap bytes, or as version 1 where they are too
 * few; returns the byte count or -ENOBUFS. */
static long state_write(const saved_state *st, unsigned char *buf, size_t cap)
{
    unsigned char s[LF_STATE_SIZE] = {0};
    int v2 = cap >= LF_STATE_SIZE;
    size_t size = v2 ? LF_STATE_SIZE : STATE_V1_SIZE;
    if (cap < size) return -ENOBUFS;
    uint32_t magic = v2 ? STATE_MAGIC : STATE_MAGIC_V1, flags = v2 ? st->flags : 0;
    memcpy(s, &magic, 4);
    memcpy(s + 4, &st->rank, 4);
    memcpy(s + 8, &st->epoch, 4);
    memcpy(s + 12, &flags, 4);
    memcpy(s + 16, &st->step, 8);
    memcpy(s + 24, &st->plan_id, 8);
    if (v2) {
        memcpy(s + 32, &st->base_id, 8);
        memcpy(s + 40, &st->nweights, 4);
        memcpy(s + 44, st->weights, 4 * LF_WIRE_WEIGHTS_MAX);
    }
    uint64_t h = XXH3_64bits(s, size - 8);
    memcpy(s + size - 8, &h, 8);
    memcpy(buf, s, size);
    return (long)size;
}

/* Reads a version 1 or 2 state; -1 for bytes that are neither. */
static int state_read(const unsigned char *s, size_t len, saved_state *st)
{
    uint32_t magic, pad = 0;
    uint64_t h;
    if (len != LF_STATE_SIZE && len != STATE_V1_SIZE) return -1;
    memcpy(&magic, s, 4);
    memcpy(&h, s + len - 8, 8);
    if (magic != (len == LF_STATE_SIZE ? STATE_MAGIC : STATE_MAGIC_V1) ||
        h != XXH3_64bits(s, len - 8))
        return -1;
    memset(st, 0, sizeof *st);
    memcpy(&st->rank, s + 4, 4);
    memcpy(&st->epoch, s + 8, 4);
    memcpy(&st->flags, s + 12, 4);
    memcpy(&st->step, s + 16, 8);
    memcpy(&st->plan_id, s + 24, 8);
    if (len == STATE_V1_SIZE) return st->flags == 0 ? 0 : -1;
    memcpy(&st->base_id, s + 32, 8);
    memcpy(&st->nweights, s + 40, 4);
    memcpy(st->weights, s + 44, 4 * LF_WIRE_WEIGHTS_MAX);
    memcpy(&pad, s + 44 + 4 * LF_WIRE_WEIGHTS_MAX, 4);
    return st->nweights <= LF_WIRE_WEIGHTS_MAX && st->flags <= STATE_ENDS_EPOCH && pad == 0
               ? 0 : -1;
}

long lf_state_save(const lf_client *c, void *buf, size_t cap)
{
    /* The trainer's position (trainer_got): with a device the prefetch
     * thread runs ahead of it; before any batch, where a restore put it. */
    const lf_msg_welcome *w = &c->welcome;
    saved_state st = {.rank = (uint32_t)c->rank, .epoch = c->pos_epoch, .step = c->pos_step,
                      .plan_id = w->plan_id, .base_id = w->base_id, .nweights = w->nweights};
    memcpy(st.weights, w->weights, sizeof st.weights);
    int64_t n = lf_client_epoch_batches(c, c->pos_epoch);
    if (n > 0 && c->pos_step == (uint64_t)n) st.flags = STATE_ENDS_EPOCH;
    return state_write(&st, buf, cap);
}

/* "0.5 0.3 0.2": weights in parts per million, as --weight takes them. */
static const char *weights_text(char *out, size_t cap, uint32_t n, const uint32_t *w)
{
    size_t at = 0;
    out[0] = 0;
    for (uint32_t i = 0; i < n && at < cap; i++)
        at += (size_t)snprintf(out + at, cap - at, "%s%g", i ? " " : "",
                               w[i] / (double)LF_WIRE_WEIGHTS_ONE);
    return out;
}

/* Where a saved state resumes on this server: its own position under the
 * same plan; under the same plan with other mixture weights, at an epoch
 * boundary only (lf_plan_state_restore's rule: each epoch's draw starts
 * afresh, the interleave inside one is the weights'), a position after an
 * epoch's last batch going to the next epoch's start, as that epoch's
 * length under the new weights is another. */
static int state_place(lf_client *c, const saved_state *st)
{
    const lf_msg_welcome *w = &c->welcome;
    char saved[LF_WIRE_WEIGHTS_MAX * 12], mine[LF_WIRE_WEIGHTS_MAX * 12];
    if (st->rank != (uint32_t)c->rank)
        return fail(c, LF_E_STATE, "rank differs: saved by rank %u, restored by rank %d: give "
                    "each rank the state it saved", st->rank, c->rank);
    if (st->plan_id != w->plan_id &&
        (st->base_id != w->base_id || st->nweights != w->nweights || w->nweights == 0))
        return fail(c, LF_E_STATE, "plan differs: saved under plan %016" PRIx64 ", the server "
                    "runs %016" PRIx64 ": restart lf-server with the dataset and options "
                    "(--world, --seed, batch sizes, sampler%s) of the saved run%s; a "
                    "--sampler naive or sorted state saved by a server before order version 2 "
                    "(their shuffle drawn as it goes) resumes under none of this version, nor "
                    "does a state of samples cut into pieces saved before their plan id came "
                    "from the samples and the cut (levelfeed issue #35)",
                    st->plan_id, w->plan_id,
                    w->nweights ? ", the --data sources in their order" : "",
                    st->base_id ? "" : " (a 40-byte state, version 1, carries no mixture "
                    "weights: it resumes only under the plan it was saved under)");
    uint32_t epoch = st->epoch;
    uint64_t step = st->step;
    if (st->plan_id != w->plan_id) { /* the same plan under other weights */
        if (st->flags & STATE_ENDS_EPOCH) {
            if (st->epoch == UINT32_MAX)
                return fail(c, LF_E_STATE, "saved after the last epoch there is: none follows");
            epoch = st->epoch + 1;
            step = 0;
        } else if (st->step != 0) {
            return fail(c, LF_E_STATE, "mixture weights differ: saved inside epoch %u after "
                        "%" PRIu64 " of its batches under weights %s, the server runs %s "
                        "(--weight, in --data order): a state saved inside an epoch resumes "
                        "only under its own weights: restart lf-server with the weights %s, or "
                        "resume from a state saved at an epoch boundary (before an epoch's "
                        "first batch or after its last)",
                        st->epoch, st->step, weights_text(saved, sizeof saved, st->nweights,
                        st->weights), weights_text(mine, sizeof mine, w->nweights, w->weights),
                        saved);
        }
    }
    c->pos_epoch = epoch;
    c->pos_step = step;
    c->restore_plan = st->plan_id;
    c->restore_base = st->base_id;
    return 0;
}

int lf_client_host_state_restore(lf_client *c, const void *buf, size_t len)
{
    saved_state st;
    if (c->asked) return LF_E_ORDER;
    if (state_read(buf, len, &st) < 0)
        return fail(c, LF_E_STATE, "not a levelfeed state: %zu bytes (a state is %d, or %d "
                    "in version 1) with a wrong magic or checksum: a truncated or edited "
                    "checkpoint", len, LF_STATE_SIZE, STATE_V1_SIZE);
    return state_place(c, &st);
}

void lf_client_host_close(lf_client *c)
{
    if (c->zsock) {
        lf_msg bye = {.type = LF_MSG_BYE};
        if (c->seg) send_msg(c, &bye);
        zmq_close(c->zsock);
    }
    if (c->zctx) zmq_ctx_term(c->zctx);
    if (c->seg) munmap(c->seg, c->seg_size);
    if (c->fdsock >= 0) close(c->fdsock);
    free(c->train.fifo);
    free(c->eval.fifo);
    free(c->slots);
    free(c->epoch_steps);
    pthread_mutex_destroy(&c->err_mu);
    free(c);
}

const lf_tensor *lf_batch_tensor(const lf_batch *b, const char *name)
{
    for (uint32_t i = 0; i < b->ntensors; i++)
        if (strcmp(b->tensors[i].name, name) == 0) return &b->tensors[i];
    return NULL;
}

int64_t lf_tensor_int(const lf_tensor *t, uint64_t i)
{
    size_t w = lf_dtype_size(t->dtype);
    if (t->dtype < LF_DTYPE_U8 || t->dtype > LF_DTYPE_I64 || !t->host || i >= t->size / w)
        return -1;
    const unsigned char *p = (const unsigned char *)t->host + i * w;
    switch (t->dtype) {
    case LF_DTYPE_U8: return *p;
    case LF_DTYPE_I8: return (int8_t)*p;
    case LF_DTYPE_U16: { uint16_t x; memcpy(&x, p, 2); return x; }
    case LF_DTYPE_I16: { int16_t x; memcpy(&x, p, 2); return x; }
    case LF_DTYPE_U32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case LF_DTYPE_I32: { int32_t x; memcpy(&x, p, 4); return x; }
    default: { int64_t x; memcpy(&x, p, 8); return x; }
    }
}
