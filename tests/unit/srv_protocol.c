/*
 * srv_protocol.c — a real lf-server (from $LF_BIN) facing a hostile client.
 * Garbage, multi-part and unknown messages, a rank it does not serve, a
 * wrong world size, START before mapping, a wrong fd-socket token, RELEASE
 * of a slot out of range or not held, a message of another protocol version,
 * a message a little over LF_WIRE_MAX: each gets an ERROR (or a closed fd
 * connection) and changes nothing; a message far over LF_WIRE_MAX costs its
 * peer the connection (ZMQ_MAXMSGSIZE) and nobody else. A well-behaved
 * client on the other rank still gets exactly its planned stream (compared
 * with lf-server --print-plan), and the server ends normally when both leave.
 * A client that vanishes between WELCOME and taking its ring does not hold
 * its rank forever. One connection speaks for one rank: a HELLO for another
 * rank on it is refused while its rank is live (it used to be welcomed, and
 * every later message of that connection still went to the first rank, so
 * the second rank could neither start nor be taken by a real client), and
 * taken once its rank is gone (its messages used to find only the gone
 * session: "no session"). A mixture's server takes a START of another plan
 * id only where the ids without the weights match and the position is an
 * epoch's start (a state saved under other weights at a boundary), and
 * serves it from there. The servers leave nothing in /dev/shm or the
 * runtime directory.
 * Skips when LF_BIN is not set (tests/run.sh sets it).
 */
#include "levelfeed.h"
#include "lf_ipc.h"
#include "lf_wire.h"
#include "srv_test.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <zmq.h>

static pid_t start_server(const char *bin, const char *ds, const char *ep, const char *hb_ms)
{
    const char *argv[] = {"--data", ds, "--world", "2", "--endpoint", ep, "--quiet",
                          "--samples-per-rank", "4", "--slots", "2", "--heartbeat-ms", hb_ms,
                          NULL};
    return srv_test_start(bin, ep, argv);
}

typedef struct raw { void *ctx, *sock; } raw;

static void raw_send(raw *r, const lf_msg *m)
{
    unsigned char buf[512];
    int n = lf_wire_encode(m, buf, sizeof buf);
    ASSERT_GT(n, 0);
    ASSERT_EQ(zmq_send(r->sock, buf, (size_t)n, 0), n);
}

/* Waits for the next message that is not a HEARTBEAT or a WAITING (which
 * a started rank gets while a peer has not started); returns its type. */
static int raw_recv(raw *r, lf_msg *m, unsigned char *buf)
{
    for (;;) {
        zmq_pollitem_t it = {.socket = r->sock, .events = ZMQ_POLLIN};
        ASSERT_EQ(zmq_poll(&it, 1, 5000), 1);
        int n = zmq_recv(r->sock, buf, LF_WIRE_MAX, 0);
        ASSERT_GT(n, 0);
        ASSERT_EQ(lf_wire_decode(buf, (size_t)n, m), 0);
        /* EPOCH (a later epoch's count, told while serving) is the
         * client's bookkeeping; these checks read the batches */
        if (m->type != LF_MSG_HEARTBEAT && m->type != LF_MSG_WAITING && m->type != LF_MSG_EPOCH)
            return m->type;
    }
}

static void expect_error(raw *r, const char *text)
{
    static unsigned char buf[LF_WIRE_MAX];
    lf_msg m;
    while (raw_recv(r, &m, buf) == LF_MSG_READY) continue; /* rank 1's next batches */
    ASSERT_EQ(m.type, LF_MSG_ERROR);
    char got[256];
    snprintf(got, sizeof got, "%.*s", (int)m.u.text.len, m.u.text.text);
    if (!strstr(got, text)) TEST_FAIL_("expected an ERROR with '%s', got '%s'", text, got);
}

static int fd_connect(const char *path, uint64_t token, uint32_t rank)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_EQ(connect(s, (struct sockaddr *)&sa, sizeof sa), 0);
    unsigned char hello[12];
    memcpy(hello, &token, 8);
    memcpy(hello + 8, &rank, 4);
    ASSERT_EQ(send(s, hello, sizeof hello, 0), 12);
    return s;
}

/* The planned batches of `rank`, as `lf-server --print-plan` lines. */
static char *plan_of_rank(const char *bin, const char *ds, unsigned rank)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%.4000s/lf-server' --data '%.4000s' --world 2 "
             "--samples-per-rank 4 --print-plan", bin, ds);
    FILE *p = popen(cmd, "r");
    ASSERT_TRUE(p != NULL);
    size_t cap = 1 << 16, len = 0;
    char *out = calloc(1, cap), line[4096];
    while (fgets(line, sizeof line, p)) {
        unsigned e, r;
        unsigned long long st;
        if (sscanf(line, "%u %llu %u", &e, &st, &r) == 3 && r == rank) {
            ASSERT_LT(len + strlen(line), cap);
            memcpy(out + len, line, strlen(line) + 1);
            len += strlen(line);
        }
    }
    ASSERT_EQ(pclose(p), 0);
    ASSERT_GT(len, 0);
    return out;
}

/* Appends b, a batch of `rank`, as a --print-plan line: epoch step rank n
 * id,id,... */
static void append_batch(char *out, size_t cap, const lf_batch *b, unsigned rank)
{
    const lf_tensor *ids = lf_batch_tensor(b, "sample_ids");
    ASSERT_TRUE(ids != NULL && ids->shape[0] == b->nsamples);
    size_t len = strlen(out);
    len += (size_t)snprintf(out + len, cap - len, "%u %llu %u %u", b->epoch,
                            (unsigned long long)b->step, rank, b->nsamples);
    for (uint32_t i = 0; i < b->nsamples; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%lld", i ? "," : " ",
                                (long long)((const int64_t *)ids->host)[i]);
    ASSERT_LT(len + 1, cap);
    snprintf(out + len, cap - len, "\n");
}

/* Sends one frame of `size` bytes from a fresh peer. Over ZMQ_MAXMSGSIZE the
 * server's ZeroMQ drops the connection: the monitor must see it close. */
static void oversized_peer(void *ctx, const char *url, size_t size, int expect_drop)
{
    void *big = zmq_socket(ctx, ZMQ_DEALER), *mon = zmq_socket(ctx, ZMQ_PAIR);
    int linger = 0;
    zmq_setsockopt(big, ZMQ_LINGER, &linger, sizeof linger);
    static int calls;
    char mon_url[64];
    snprintf(mon_url, sizeof mon_url, "inproc://big-monitor-%d", calls++);
    ASSERT_EQ(zmq_socket_monitor(big, mon_url, ZMQ_EVENT_DISCONNECTED), 0);
    ASSERT_EQ(zmq_connect(mon, mon_url), 0);
    ASSERT_EQ(zmq_connect(big, url), 0);
    unsigned char *junk = calloc(1, size);
    ASSERT_EQ(zmq_send(big, junk, size, 0), (int)size);
    free(junk);
    if (expect_drop) {
        zmq_pollitem_t it[2] = {{.socket = big, .events = ZMQ_POLLIN},
                                {.socket = mon, .events = ZMQ_POLLIN}};
        ASSERT_GT(zmq_poll(it, 2, 5000), 0);
        ASSERT_TRUE(it[1].revents != 0); /* disconnected, and no reply */
        ASSERT_EQ(it[0].revents, 0);
    } else {
        raw rb = {ctx, big};
        expect_error(&rb, "too large");
    }
    zmq_socket_monitor(big, NULL, 0);
    zmq_close(mon);
    zmq_close(big);
}

/* Maps `rank`'s ring with WELCOME w's token; returns the kept connection
 * (a raw client reads no batch, so the memfd itself is closed). */
static int raw_map(const lf_msg_welcome *w, uint32_t rank)
{
    int fd = fd_connect(w->fd_path, w->token, rank), memfd = -1;
    char ack[4];
    ASSERT_EQ(lf_ipc_recv_fd(fd, &memfd, ack, sizeof ack), 4);
    close(memfd);
    return fd;
}

/* START on a mapped raw session, then RELEASE every READY until END;
 * returns the batches. */
static long raw_serve(raw *r)
{
    static unsigned char buf[LF_WIRE_MAX];
    lf_msg m = {.type = LF_MSG_START}, got;
    raw_send(r, &m);
    long n = 0;
    for (; raw_recv(r, &got, buf) == LF_MSG_READY; n++) {
        m = (lf_msg){.type = LF_MSG_RELEASE, .u.release = {got.u.ready.slot, got.u.ready.seq}};
        raw_send(r, &m);
    }
    if (got.type == LF_MSG_ERROR)
        TEST_FAIL_("expected READY or END, got ERROR '%.*s' after %ld batches",
                   (int)got.u.text.len, got.u.text.text, n);
    ASSERT_EQ(got.type, LF_MSG_END);
    return n;
}

static long lines_of(const char *text)
{
    long n = 0;
    for (; *text; text++) n += *text == '\n';
    return n;
}

/* A real client of `rank` taking its whole stream (a thread beside a raw
 * session on the other rank: the planner makes each step for both). */
typedef struct rank_run {
    const char *ep;
    unsigned rank;
    char *got;                   /* the batches as --print-plan lines */
    size_t cap;
} rank_run;

static void *rank_run_main(void *arg)
{
    rank_run *rr = arg;
    lf_client_options o;
    lf_client_options_default(&o);
    o.rank = (int)rr->rank;
    o.world_size = 2;
    o.endpoint = rr->ep;
    lf_client *cl;
    ASSERT_EQ(lf_client_open(&o, &cl), 0);
    lf_batch b;
    int rc;
    while ((rc = lf_next(cl, &b, 10000)) == 0) {
        append_batch(rr->got, rr->cap, &b, rr->rank);
        ASSERT_EQ(lf_release(cl, &b), 0);
    }
    ASSERT_EQ(rc, LF_E_END);
    lf_client_close(cl);
    return NULL;
}

/* A raw connection says HELLO for `rank` and gets WELCOME. */
static lf_msg_welcome raw_hello(raw *r, uint32_t rank)
{
    static unsigned char buf[LF_WIRE_MAX];
    lf_msg m = {.type = LF_MSG_HELLO, .u.hello = {rank, 2, 1}}, w;
    raw_send(r, &m);
    ASSERT_EQ(raw_recv(r, &w, buf), LF_MSG_WELCOME);
    ASSERT_EQ(w.u.welcome.rank, rank);
    return w.u.welcome;
}

static void raw_bye(raw *r)
{
    lf_msg m = {.type = LF_MSG_BYE};
    raw_send(r, &m);
}

/* One connection speaks for one rank (see the top): a HELLO for rank 1 on
 * rank 0's live connection is refused, rank 1 goes to a real client, and
 * each rank gets its own plan; once rank 0 is gone its connection may take
 * rank 1 and is served all of it. */
static void one_rank_per_connection(const char *bin, const char *ds, const char *ep,
                                    const char *url, void *ctx)
{
    char *plan0 = plan_of_rank(bin, ds, 0), *plan1 = plan_of_rank(bin, ds, 1);
    raw x = {ctx, zmq_socket(ctx, ZMQ_DEALER)};
    int linger = 0;
    zmq_setsockopt(x.sock, ZMQ_LINGER, &linger, sizeof linger);
    ASSERT_EQ(zmq_connect(x.sock, url), 0);

    pid_t srv = start_server(bin, ds, ep, "1000");
    lf_msg_welcome w0 = raw_hello(&x, 0);
    lf_msg m = {.type = LF_MSG_HELLO, .u.hello = {1, 2, 1}};
    raw_send(&x, &m);
    expect_error(&x, "already speaks for rank 0");
    rank_run rr = {ep, 1, calloc(1, strlen(plan1) + 4096), strlen(plan1) + 4096};
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, rank_run_main, &rr), 0);
    int fd = raw_map(&w0, 0);
    ASSERT_EQ(raw_serve(&x), lines_of(plan0));
    ASSERT_EQ(pthread_join(t, NULL), 0);
    if (strcmp(rr.got, plan1) != 0)
        TEST_FAIL_("rank 1's stream differs from its plan:\n%s\nplan:\n%s", rr.got, plan1);
    raw_bye(&x);
    close(fd);
    ASSERT_EQ(srv_test_wait(srv), 0);

    srv = start_server(bin, ds, ep, "1000");
    raw_hello(&x, 0);
    raw_bye(&x); /* rank 0 gone before START: the run goes on without it */
    lf_msg_welcome w1 = raw_hello(&x, 1);
    fd = raw_map(&w1, 1);
    ASSERT_EQ(raw_serve(&x), lines_of(plan1));
    raw_bye(&x);
    close(fd);
    ASSERT_EQ(srv_test_wait(srv), 0);
    zmq_close(x.sock);
    free(rr.got);
    free(plan0);
    free(plan1);
}

/* A mixture's server (the dataset twice, --weight 0.6 / 0.4) on its own
 * checks of START, beside the client's (e2e/server_mix): WELCOME carries
 * the plan id without the weights and the weights; a START of another plan
 * id is refused when the ids without the weights differ, or when they
 * match but the position is inside an epoch; at an epoch's start it is
 * served from there (a state saved under other weights, at a boundary). */
static void mixture_start(const srv_test_dirs *d, const char *url, void *ctx)
{
    char ds2[600];
    snprintf(ds2, sizeof ds2, "%s2", d->ds);
    srv_test_dataset(ds2);
    const char *argv[] = {"--data", d->ds, "--weight", "0.6", "--data", ds2, "--weight", "0.4",
                          "--world", "2", "--endpoint", d->ep, "--quiet", "--samples-per-rank",
                          "4", "--slots", "2", "--epochs", "2", NULL};
    pid_t srv = srv_test_start(d->bin, d->ep, argv);
    raw x = {ctx, zmq_socket(ctx, ZMQ_DEALER)};
    int linger = 0;
    zmq_setsockopt(x.sock, ZMQ_LINGER, &linger, sizeof linger);
    ASSERT_EQ(zmq_connect(x.sock, url), 0);
    lf_msg_welcome w = raw_hello(&x, 0);
    ASSERT_EQ(w.nweights, 2);
    ASSERT_EQ(w.weights[0], 600000);
    ASSERT_EQ(w.weights[1], 400000);
    ASSERT_NE(w.base_id, w.plan_id);
    const struct { uint64_t base; uint32_t epoch; uint64_t step; const char *error; } refused[] = {
        {w.base_id ^ 2, 1, 0, "another plan"},
        {w.base_id, 0, 3, "inside an epoch under other mixture weights"},
    };
    int fd = raw_map(&w, 0);
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        lf_msg m = {.type = LF_MSG_START,
                    .u.start = {refused[i].epoch, refused[i].step, w.plan_id ^ 2, refused[i].base}};
        raw_send(&x, &m);
        expect_error(&x, refused[i].error);
        close(fd);
        w = raw_hello(&x, 0); /* the rank was let go: a new session for it */
        fd = raw_map(&w, 0);
    }
    rank_run rr = {d->ep, 1, calloc(1, 1 << 16), 1 << 16};
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, rank_run_main, &rr), 0);
    static unsigned char buf[LF_WIRE_MAX];
    lf_msg m = {.type = LF_MSG_START, .u.start = {1, 0, w.plan_id ^ 2, w.base_id}}, got;
    raw_send(&x, &m);
    long n = 0;
    for (; raw_recv(&x, &got, buf) == LF_MSG_READY; n++) {
        ASSERT_EQ(got.u.ready.epoch, 1); /* from epoch 1's start on */
        m = (lf_msg){.type = LF_MSG_RELEASE, .u.release = {got.u.ready.slot, got.u.ready.seq}};
        raw_send(&x, &m);
    }
    ASSERT_EQ(got.type, LF_MSG_END);
    ASSERT_GT(n, 0);
    ASSERT_EQ(pthread_join(t, NULL), 0);
    raw_bye(&x);
    close(fd);
    ASSERT_EQ(srv_test_wait(srv), 0);
    zmq_close(x.sock);
    free(rr.got);
}

int main(void)
{
    srv_test_dirs dirs;
    srv_test_dirs_make(&dirs);
    const char *bin = dirs.bin, *ds = dirs.ds, *ep = dirs.ep;
    char url[520];
    snprintf(url, sizeof url, "ipc://%s", ep);
    char *plan0 = plan_of_rank(bin, ds, 0);
    size_t got_cap = strlen(plan0) + 4096;
    char *got0 = calloc(1, got_cap);
    pid_t srv = start_server(bin, ds, ep, "1000");

    raw r = {zmq_ctx_new(), NULL};
    r.sock = zmq_socket(r.ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(r.sock, ZMQ_LINGER, &linger, sizeof linger);
    ASSERT_EQ(zmq_connect(r.sock, url), 0);
    ASSERT_EQ(zmq_send(r.sock, "garbage", 7, 0), 7);
    expect_error(&r, "undecodable");
    ASSERT_EQ(zmq_send(r.sock, "a", 1, ZMQ_SNDMORE), 1);
    ASSERT_EQ(zmq_send(r.sock, "b", 1, 0), 1);
    expect_error(&r, "multi-part");
    lf_msg m = {.type = LF_MSG_RELEASE, .u.release = {0, 0}};
    raw_send(&r, &m);
    expect_error(&r, "HELLO first");
    m = (lf_msg){.type = LF_MSG_HELLO, .u.hello = {9, 2, 1}};
    raw_send(&r, &m);
    expect_error(&r, "not served");
    m = (lf_msg){.type = LF_MSG_HELLO, .u.hello = {1, 3, 1}};
    raw_send(&r, &m);
    expect_error(&r, "world size");

    /* Rank 1 by hand: WELCOME, then the wrong moves. */
    static unsigned char buf[LF_WIRE_MAX];
    m = (lf_msg){.type = LF_MSG_HELLO, .u.hello = {1, 2, 1}};
    raw_send(&r, &m);
    lf_msg w;
    ASSERT_EQ(raw_recv(&r, &w, buf), LF_MSG_WELCOME);
    lf_msg_welcome wel = w.u.welcome;
    m = (lf_msg){.type = LF_MSG_START};
    raw_send(&r, &m);
    expect_error(&r, "before the ring was mapped");
    int bad = fd_connect(wel.fd_path, wel.token ^ 1, 1);
    char c;
    ASSERT_EQ(recv(bad, &c, 1, 0), 0); /* wrong token: closed, no descriptor */
    close(bad);
    int good = fd_connect(wel.fd_path, wel.token, 1);
    int memfd = -1;
    char ack[4];
    ASSERT_EQ(lf_ipc_recv_fd(good, &memfd, ack, sizeof ack), 4);
    ASSERT_GE(memfd, 0);
    /* The ring cannot be resized from the client's side: a shrink would
     * make the workers' next write into it a SIGBUS. The server goes on. */
    ASSERT_EQ(ftruncate(memfd, 0), -1);
    ASSERT_EQ(errno, EPERM);
    ASSERT_EQ(ftruncate(memfd, 1 << 30), -1);
    ASSERT_EQ(errno, EPERM);
    raw_send(&r, &m); /* START, now allowed */

    /* A real client on rank 0 alongside. */
    lf_client_options o;
    lf_client_options_default(&o);
    o.rank = 0;
    o.world_size = 2;
    o.endpoint = ep;
    lf_client *cl;
    ASSERT_EQ(lf_client_open(&o, &cl), 0);
    lf_batch b;
    ASSERT_EQ(lf_next(cl, &b, 10000), 0);
    append_batch(got0, got_cap, &b, 0);
    ASSERT_EQ(lf_release(cl, &b), 0);

    /* The hand-made rank 1 gets READY; bad RELEASEs are refused. */
    lf_msg rd;
    ASSERT_EQ(raw_recv(&r, &rd, buf), LF_MSG_READY);
    m = (lf_msg){.type = LF_MSG_RELEASE, .u.release = {99, rd.u.ready.seq}};
    raw_send(&r, &m);
    expect_error(&r, "does not hold");
    m = (lf_msg){.type = LF_MSG_RELEASE, .u.release = {rd.u.ready.slot, rd.u.ready.seq + 1}};
    raw_send(&r, &m);
    expect_error(&r, "does not hold");
    /* An eval pass from a server without --eval-data: refused, harmless;
     * the real client does not even ask. */
    m = (lf_msg){.type = LF_MSG_EVAL_REQ};
    raw_send(&r, &m);
    expect_error(&r, "no --eval-data");
    ASSERT_EQ(lf_eval_begin(cl), -ENODATA);
    ASSERT_EQ(lf_client_eval_batches(cl), -ENODATA);
    ASSERT_EQ(lf_eval_next(cl, &b, 0), LF_E_ORDER);

    /* Another protocol version: refused, the slot stays held. Then frames
     * over LF_WIRE_MAX from other peers: a little over is refused with an
     * ERROR, far over costs that peer its connection. Rank 1's session is
     * untouched: its good RELEASE frees the slot for its next batch. */
    m = (lf_msg){.type = LF_MSG_RELEASE, .u.release = {rd.u.ready.slot, rd.u.ready.seq}};
    int n = lf_wire_encode(&m, buf, sizeof buf);
    ASSERT_GT(n, 6);
    buf[4] = LF_WIRE_VERSION + 1;
    ASSERT_EQ(zmq_send(r.sock, buf, (size_t)n, 0), n);
    expect_error(&r, "undecodable");
    oversized_peer(r.ctx, url, LF_WIRE_MAX + 10, 0);
    oversized_peer(r.ctx, url, 4u << 20, 1);
    raw_send(&r, &m);
    /* Two slots: batch seq+2 needs the slot that RELEASE gave back. */
    lf_msg rd2;
    do ASSERT_EQ(raw_recv(&r, &rd2, buf), LF_MSG_READY);
    while (rd2.u.ready.seq == rd.u.ready.seq + 1);
    ASSERT_EQ(rd2.u.ready.seq, rd.u.ready.seq + 2);
    ASSERT_EQ(rd2.u.ready.slot, rd.u.ready.slot);
    m = (lf_msg){.type = LF_MSG_BYE};
    raw_send(&r, &m);

    /* Rank 0 still gets everything, then END. */
    long batches = 1;
    int rc;
    while ((rc = lf_next(cl, &b, 10000)) == 0) {
        batches++;
        append_batch(got0, got_cap, &b, 0);
        ASSERT_EQ(lf_release(cl, &b), 0);
    }
    ASSERT_EQ(rc, LF_E_END);
    ASSERT_GT(batches, 2);
    if (strcmp(got0, plan0) != 0) TEST_FAIL_("rank 0's stream differs from its plan:\n%s\nplan:\n%s", got0, plan0);
    lf_client_close(cl);
    int status;
    ASSERT_EQ(waitpid(srv, &status, 0), srv);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(good);
    close(memfd);

    /* A client that got WELCOME and vanished before taking its ring does
     * not hold the rank: after ten heartbeats a new client gets it. */
    srv = start_server(bin, ds, ep, "20");
    m = (lf_msg){.type = LF_MSG_HELLO, .u.hello = {0, 2, 1}};
    raw_send(&r, &m);
    ASSERT_EQ(raw_recv(&r, &w, buf), LF_MSG_WELCOME);
    usleep(600000);
    lf_client *c0, *c1;
    ASSERT_EQ(lf_client_open(&o, &c0), 0);
    o.rank = 1;
    ASSERT_EQ(lf_client_open(&o, &c1), 0);
    lf_client_close(c0);
    lf_client_close(c1);
    ASSERT_EQ(waitpid(srv, &status, 0), srv);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    one_rank_per_connection(bin, ds, ep, url, r.ctx);
    mixture_start(&dirs, url, r.ctx);
    srv_test_no_leftovers(&dirs);
    zmq_close(r.sock);
    zmq_ctx_term(r.ctx);
    free(got0);
    free(plan0);
    printf("hostile client: refused and harmless (%ld batches for rank 0, equal to its plan)\n", batches);
    return 0;
}
