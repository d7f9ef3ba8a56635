/*
 * srv_protocol.c — a real lf-server (from $LF_BIN) facing a hostile client.
 * Garbage, multi-part and unknown messages, a rank it does not serve, a
 * wrong world size, START before mapping, a wrong fd-socket token, RELEASE
 * of a slot out of range or not held: each gets an ERROR (or a closed fd
 * connection) and changes nothing; a well-behaved client on the other rank
 * still gets its whole stream, and the server ends normally when both leave.
 * A client that vanishes between WELCOME and taking its ring does not hold
 * its rank forever.
 * Skips when LF_BIN is not set (tests/run.sh sets it).
 */
#include "levelfeed.h"
#include "lf_ipc.h"
#include "lf_shard.h"
#include "lf_wire.h"
#include "test.h"

#include <errno.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <zmq.h>

static void make_dataset(const char *dir)
{
    lf_schema sc = {.nfields = 1, .cost_field = 0};
    strcpy(sc.fields[0].name, "tokens");
    sc.fields[0].type = LF_FIELD_TOKENS_U16;
    lf_writer_options o = {.block_bytes = 4096, .threads = 1};
    lf_writer *w;
    lf_shard_error err;
    ASSERT_EQ(lf_writer_create(dir, &sc, &o, &w, &err), 0);
    uint16_t tok[80];
    for (int i = 0; i < 80; i++) tok[i] = (uint16_t)(i * 7);
    for (int s = 0; s < 64; s++) {
        lf_field_input in = {.data = tok, .size = (size_t)(10 + s) * 2};
        ASSERT_GE(lf_writer_add(w, &in, &err), 0);
    }
    ASSERT_EQ(lf_writer_finish(w, NULL, &err), 0);
}

static pid_t start_server(const char *bin, const char *ds, const char *ep, const char *hb_ms)
{
    char exe[4200];
    snprintf(exe, sizeof exe, "%.4000s/lf-server", bin);
    pid_t pid = fork();
    if (pid == 0) {
        execl(exe, exe, "--data", ds, "--world", "2", "--endpoint", ep, "--quiet",
              "--samples-per-rank", "4", "--slots", "2", "--heartbeat-ms", hb_ms, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200 && access(ep, F_OK) != 0; i++) usleep(20000);
    ASSERT_EQ(access(ep, F_OK), 0);
    return pid;
}

typedef struct raw { void *ctx, *sock; } raw;

static void raw_send(raw *r, const lf_msg *m)
{
    unsigned char buf[512];
    int n = lf_wire_encode(m, buf, sizeof buf);
    ASSERT_GT(n, 0);
    ASSERT_EQ(zmq_send(r->sock, buf, (size_t)n, 0), n);
}

/* Waits for the next message that is not a HEARTBEAT; returns its type. */
static int raw_recv(raw *r, lf_msg *m, unsigned char *buf)
{
    for (;;) {
        zmq_pollitem_t it = {.socket = r->sock, .events = ZMQ_POLLIN};
        ASSERT_EQ(zmq_poll(&it, 1, 5000), 1);
        int n = zmq_recv(r->sock, buf, LF_WIRE_MAX, 0);
        ASSERT_GT(n, 0);
        ASSERT_EQ(lf_wire_decode(buf, (size_t)n, m), 0);
        if (m->type != LF_MSG_HEARTBEAT) return m->type;
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

int main(void)
{
    const char *bin = getenv("LF_BIN");
    if (!bin || !*bin) TEST_SKIP("LF_BIN not set (run through tests/run.sh)");
    const char *tmp = test_tmpdir();
    char ds[512], rt[512], ep[512], url[520];
    snprintf(ds, sizeof ds, "%.400s/ds", tmp);
    snprintf(rt, sizeof rt, "%.400s/rt", tmp);
    snprintf(ep, sizeof ep, "%.400s/ctl", rt);
    snprintf(url, sizeof url, "ipc://%s", ep);
    ASSERT_EQ(mkdir(rt, 0700), 0);
    make_dataset(ds);
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
    m = (lf_msg){.type = LF_MSG_BYE};
    raw_send(&r, &m);

    /* Rank 0 still gets everything, then END. */
    long batches = 1;
    int rc;
    while ((rc = lf_next(cl, &b, 10000)) == 0) {
        batches++;
        ASSERT_EQ(lf_release(cl, &b), 0);
    }
    ASSERT_EQ(rc, LF_E_END);
    ASSERT_GT(batches, 2);
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
    zmq_close(r.sock);
    zmq_ctx_term(r.ctx);
    printf("hostile client: refused and harmless (%ld batches for rank 0)\n", batches);
    return 0;
}
