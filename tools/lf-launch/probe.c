/*
 * probe.c — "waits until it answers": the server is ready for the trainer
 * when its control thread answers a STATS_REQ (what lf-stat asks; no rank
 * is involved, so the server's state is untouched).
 *
 * The server binds before it opens the dataset and answers "planning"
 * while it plans (server/startup.c); lf-launch looks for the socket every
 * 50 ms, then connects and asks, again every 2 s until the server says it
 * serves. Meanwhile the server may exit
 * (its error is on stderr or in --server-log), or a signal may come: both
 * end the wait.
 *
 * The answer must come from our server, not from another one on the same
 * endpoint (a user's --endpoint shared by mistake: ours then refuses to
 * start, but the other would answer first and the trainer would train on
 * its batches). So the socket is first asked who listens on it
 * (SO_PEERCRED), and only our server's pid is asked for stats.
 */
#include "launch.h"
#include "lf_wire.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

#define PROBE_LOOK_MS 50     /* how often to look for the socket file */
#define PROBE_ASK_MS 2000    /* how long one question waits for its answer */

static int ask(void *sock)
{
    unsigned char buf[64];
    lf_msg m = {.type = LF_MSG_STATS_REQ};
    int n = lf_wire_encode(&m, buf, sizeof buf);
    return n > 0 && zmq_send(sock, buf, (size_t)n, ZMQ_DONTWAIT) == n ? 0 : -1;
}

/* 1 when what came is a control message other than a STATS that says the
 * server still plans (server/startup.c): until its start-up succeeded the
 * trainer does not run, so a start-up that fails (a bad dataset, a plan
 * refused) is named as the server's exit, not met by the trainer. */
static int answered(void *sock)
{
    static const char planning[] = "\"state\":\"planning\"";
    static unsigned char buf[LF_WIRE_MAX];
    lf_msg m;
    int n = zmq_recv(sock, buf, sizeof buf, ZMQ_DONTWAIT);
    if (n <= 0 || (size_t)n > sizeof buf || lf_wire_decode(buf, (size_t)n, &m) != 0) return 0;
    return m.type != LF_MSG_STATS ||
           !memmem(m.u.text.text, m.u.text.len, planning, sizeof planning - 1);
}

/* The pid of the process listening on the Unix socket at path; 0 when
 * none does (no file yet, or one a killed server left). */
static pid_t socket_owner(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    struct ucred cr = {0};
    socklen_t len = sizeof cr;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (const struct sockaddr *)&a, sizeof a) == 0 &&
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
        cr.pid = 0;
    if (fd >= 0) close(fd);
    return cr.pid;
}

/* Why the wait ended without an answer, said once. */
static void say_why(const launch *L, pid_t foreign, uint64_t waited_ms)
{
    char how[96];
    if (foreign)
        fprintf(stderr, "lf-launch: another process (pid %d) serves on %s: give another "
                "--endpoint, or none (a private one is made); stopping lf-server\n",
                (int)foreign, L->endpoint);
    else if (!L->server_pid)
        fprintf(stderr, "lf-launch: lf-server %s before it answered (its messages: %s)\n",
                launch_status_text(L->server_status, how, sizeof how),
                L->server_log ? L->server_log : "above");
    else if (L->stop_signal)
        fprintf(stderr, "lf-launch: %s while waiting for lf-server: stopping it\n",
                strsignal(L->stop_signal));
    else
        fprintf(stderr, "lf-launch: lf-server did not answer on %s within %.3g s "
                "(--ready-timeout); stopping it\n", L->endpoint, (double)waited_ms / 1000);
}

int launch_wait_ready(launch *L)
{
    char url[LF_IPC_PATH_MAX + 8];
    snprintf(url, sizeof url, "ipc://%s", L->endpoint);
    void *ctx = zmq_ctx_new(), *sock = ctx ? zmq_socket(ctx, ZMQ_DEALER) : NULL;
    if (!sock) {
        fprintf(stderr, "lf-launch: ZeroMQ: %s\n", zmq_strerror(zmq_errno()));
        if (ctx) zmq_ctx_term(ctx);
        return -1;
    }
    int linger = 0, ok = 0, connected = 0;
    pid_t foreign = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    uint64_t t0 = launch_now_ms(), asked = 0, now = t0;
    while (L->server_pid && !L->stop_signal && now - t0 < L->ready_timeout_ms) {
        pid_t owner = connected ? L->server_pid : socket_owner(L->endpoint);
        if (owner && owner != L->server_pid) {
            foreign = owner;
            break;
        }
        if (owner && !connected) {
            if (zmq_connect(sock, url) != 0) break;
            connected = 1;
        }
        if (connected && (!asked || now - asked >= PROBE_ASK_MS) && ask(sock) == 0) asked = now;
        uint64_t left = L->ready_timeout_ms - (now - t0);
        uint64_t slice = connected ? PROBE_ASK_MS : PROBE_LOOK_MS;
        if (launch_wait(L, connected ? sock : NULL, (int)(left < slice ? left : slice)) &&
            answered(sock)) {
            ok = 1;
            break;
        }
        now = launch_now_ms();
    }
    if (ok)
        fprintf(stderr, "lf-launch: lf-server answered after %.2f s\n",
                (double)(launch_now_ms() - t0) / 1000);
    else
        say_why(L, foreign, launch_now_ms() - t0);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return ok ? 0 : -1;
}
