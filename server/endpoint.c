/*
 * endpoint.c — where lf-server can be reached, set up and taken down: the
 * runtime directory (private to the user, never a link), the lock that
 * keeps a second server off the endpoint, the ZeroMQ ROUTER's ipc socket,
 * the Unix socket that hands out ring memfds (ENDPOINT.fd), and the signal
 * descriptor the control loop polls. Nothing here knows a session: the
 * control thread (control.c) owns what comes over these sockets.
 *
 * Only what this server made is ever removed: a socket left by a dead
 * server at the endpoint goes, any other file there stays and is named; the
 * lock file is removed at exit while still held (take_lock says why that
 * is safe).
 */
#include "srv.h"

#include "lf_ipc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

int srv_endpoint_path(const char *endpoint, const char *job, char *path, size_t cap)
{
    int rc = lf_ipc_endpoint(endpoint, job, path, cap);
    if (rc < 0)
        fprintf(stderr, "lf-server: endpoint %s: %s\n", endpoint ? endpoint : "(the default)",
                rc == -ENAMETOOLONG ? "the socket path is too long" : "not an ipc:// path");
    return rc;
}

/* A socket a dead server left at path goes; anything else there (a user's
 * file, under an --endpoint given by mistake) is never removed. Returns 0
 * or -ECANCELED (reported). */
static int remove_stale(const char *path)
{
    int rc = lf_ipc_unlink_socket(path);
    if (rc == 0) return 0;
    fprintf(stderr, "lf-server: %s: %s\n", path,
            rc == -EEXIST ? "exists and is not a socket; not removing it: choose another "
                            "--endpoint, or remove the file yourself"
                          : strerror(-rc));
    return -ECANCELED;
}

/* Takes the endpoint's lock file, which a server removes at its exit while
 * still holding the lock: a lock taken on a file that is no longer the one
 * at lock_path (removed between our open and our flock) is taken again on
 * the new one, so two servers can never both hold "the" lock. Returns 0,
 * -ECANCELED (reported) or -errno. */
static int take_lock(srv_endpoint *c, const char *lock_path)
{
    for (;;) {
        c->lockfd = open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (c->lockfd < 0) return -errno;
        if (flock(c->lockfd, LOCK_EX | LOCK_NB) != 0) {
            close(c->lockfd); /* not ours: control_close must not remove it */
            c->lockfd = -1;
            fprintf(stderr, "lf-server: another server is running on %s\n", c->path);
            return -ECANCELED;
        }
        struct stat held, now;
        if (fstat(c->lockfd, &held) != 0) return -errno;
        if (lstat(lock_path, &now) == 0 && now.st_ino == held.st_ino &&
            now.st_dev == held.st_dev)
            return 0;
        close(c->lockfd);
        c->lockfd = -1;
    }
}

static int open_fd_socket(srv_endpoint *c)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", c->fd_path);
    c->listenfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (c->listenfd < 0) return -errno;
    if (bind(c->listenfd, (struct sockaddr *)&sa, sizeof sa) != 0) return -errno;
    if (chmod(c->fd_path, 0600) != 0) return -errno;
    if (listen(c->listenfd, 64) != 0) return -errno;
    return 0;
}

/* Returns 0, -ECANCELED (reported) or -errno (not yet). */
int srv_endpoint_open(const char *endpoint, const char *job, srv_endpoint *c)
{
    int rc = srv_endpoint_path(endpoint, job, c->path, sizeof c->path);
    if (rc < 0) return -ECANCELED;
    char why[512];
    if ((rc = lf_ipc_private_dir(c->path, 1, why, sizeof why)) < 0) {
        fprintf(stderr, "lf-server: %s%s\n",
                rc == -EPERM || rc == -ELOOP || rc == -ENOTDIR ? "not private to this user: " : "",
                why);
        return -ECANCELED;
    }
    char lock_path[LF_IPC_PATH_MAX + 8], url[LF_IPC_PATH_MAX + 8];
    snprintf(lock_path, sizeof lock_path, "%s.lock", c->path);
    snprintf(c->fd_path, sizeof c->fd_path, "%s.fd", c->path);
    snprintf(url, sizeof url, "ipc://%s", c->path);
    if ((rc = take_lock(c, lock_path)) < 0) return rc;
    if ((rc = remove_stale(c->fd_path)) < 0 || (rc = open_fd_socket(c)) < 0 ||
        (rc = remove_stale(c->path)) < 0)
        return rc;
    c->zctx = zmq_ctx_new();
    c->router = c->zctx ? zmq_socket(c->zctx, ZMQ_ROUTER) : NULL;
    if (!c->router) return -ENOMEM;
    /* A READY must never be dropped: with ROUTER_MANDATORY a full pipe
     * fails the send, so the pipe is made deep enough for a trainer that
     * does not read for a day (a heartbeat a second plus the ring's READYs). */
    int linger = 1000, one = 1, maxmsg = LF_WIRE_MAX + 64, hwm = 200000;
    int64_t maxsz = maxmsg;
    zmq_setsockopt(c->router, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(c->router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(c->router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(c->router, ZMQ_MAXMSGSIZE, &maxsz, sizeof maxsz);
    if (zmq_bind(c->router, url) != 0) return -zmq_errno();
    chmod(c->path, 0600);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    c->sigfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (c->sigfd < 0) return -errno;
    return 0;
}

int srv_endpoint_send(srv_endpoint *c, const unsigned char *id, size_t idlen, const lf_msg *m)
{
    unsigned char buf[LF_WIRE_MAX];
    int n = lf_wire_encode(m, buf, sizeof buf);
    if (n < 0) return n;
    if (zmq_send(c->router, id, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) return -zmq_errno();
    if (zmq_send(c->router, buf, (size_t)n, ZMQ_DONTWAIT) < 0) return -zmq_errno();
    return 0;
}

void srv_endpoint_send_error(srv_endpoint *c, const unsigned char *id, size_t idlen, int code,
                             const char *text)
{
    lf_msg m = {.type = LF_MSG_ERROR,
                .u.text = {.code = code, .len = (uint32_t)strlen(text), .text = text}};
    srv_endpoint_send(c, id, idlen, &m);
}

int srv_endpoint_recv(srv_endpoint *c, srv_request *q)
{
    for (;;) {
        int idn = zmq_recv(c->router, q->id, sizeof q->id, ZMQ_DONTWAIT);
        if (idn < 0) return 0;
        int more = 0;
        size_t ml = sizeof more;
        zmq_getsockopt(c->router, ZMQ_RCVMORE, &more, &ml);
        if (!more) continue;
        int n = zmq_recv(c->router, q->buf, sizeof q->buf, 0);
        /* Drain any further frames: a well-formed peer sends exactly one. */
        int extra = 0;
        for (zmq_getsockopt(c->router, ZMQ_RCVMORE, &more, &ml); more;
             zmq_getsockopt(c->router, ZMQ_RCVMORE, &more, &ml)) {
            unsigned char sink[64];
            zmq_recv(c->router, sink, sizeof sink, 0);
            extra = 1;
        }
        if (n < 0 || idn > SRV_ID_MAX) continue;
        q->idlen = (size_t)idn;
        if (extra || (size_t)n > sizeof q->buf) {
            srv_endpoint_send_error(c, q->id, q->idlen, -EMSGSIZE,
                                    "message too large or multi-part");
            continue;
        }
        if (lf_wire_decode(q->buf, (size_t)n, &q->msg) != 0) {
            srv_endpoint_send_error(c, q->id, q->idlen, -EPROTO, "undecodable message");
            continue;
        }
        return 1;
    }
}

void srv_endpoint_close(srv_endpoint *c)
{
    if (c->router) zmq_close(c->router);
    if (c->zctx) zmq_ctx_term(c->zctx);
    if (c->listenfd >= 0) {
        close(c->listenfd);
        lf_ipc_unlink_socket(c->fd_path);
    }
    if (c->router || c->zctx) lf_ipc_unlink_socket(c->path);
    if (c->sigfd >= 0) close(c->sigfd);
    if (c->lockfd >= 0) { /* removed while held: see take_lock */
        char lock_path[LF_IPC_PATH_MAX + 8];
        snprintf(lock_path, sizeof lock_path, "%s.lock", c->path);
        unlink(lock_path);
        close(c->lockfd);
    }
}
