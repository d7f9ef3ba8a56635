/*
 * client_api.c — liblevelfeed against a scripted fake server (a thread
 * here): a good batch comes through with the right tensors; a slot whose
 * bytes were changed, a READY naming a slot out of range or out of
 * sequence, make lf_next fail with LF_E_PROTOCOL instead of handing out a
 * pointer; END ends; START carries a restored position; a server that
 * falls silent is reported gone, one whose ring connection closes is
 * reported gone by a poll with no wait too; an unsealed ring is refused; a
 * server that sends WELCOME but never hands over the ring makes
 * lf_client_open time out (it once blocked for good), one that closes the
 * ring connection is reported gone; a server whose runtime directory
 * another user takes over between HELLO and WELCOME, one whose fd socket
 * another uid listens on, and one that hands over another uid's memfd are
 * each refused, naming the cause (run as root; skipped otherwise); the
 * argument and order checks of open, release and state restore hold; and
 * lf_client_epoch_batches gives WELCOME's counts, for the next batch's
 * epoch too, the end of the plan and the epochs not told apart, and
 * lf_client_epoch_batches_wait times out on a count not told, saying so.
 */
#include "levelfeed.h"
#include "lf_ipc.h"
#include "lf_ring.h"
#include "lf_wire.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <zmq.h>

#define NSLOTS 2
#define SLOT 8192u

enum { GOOD_THEN_CORRUPT, SLOT_OUT_OF_RANGE, OUT_OF_SEQUENCE, GOOD_THEN_END, SILENT, NO_RING,
       RING_REFUSED, UNSEALED, GONE_AFTER_START, DIR_TAKEN, FOREIGN_PEER, FOREIGN_MEMFD,
       ONE_EPOCH, EPOCHS_PARTLY_TOLD };

/* The step counts the epoch modes' WELCOME tells, from epoch 2 (--epoch 2):
 * ONE_EPOCH serves epoch 2 alone, EPOCHS_PARTLY_TOLD epochs 2 ..
 * 2 + LF_WIRE_EPOCHS_MAX but tells two (the rest not planned yet), then
 * epoch 4's in an EPOCH before its READY (EPOCH_LATER's count). */
#define EPOCH_LATER 9u
static const uint32_t epoch_steps[2] = {1, 4};

#define OTHER_UID 65534          /* "nobody": the other local user of the foreign cases */

typedef struct fake {
    int mode;
    char dir[180], ep[200], fd_path[208];
    void *ctx, *router;
    int listenfd, ringfd;
    unsigned char id[256];
    size_t idlen;
    lf_msg_position start;       /* what START said */
    unsigned char *seg;
} fake;

static void fsend(fake *f, const lf_msg *m)
{
    unsigned char buf[512];
    int n = lf_wire_encode(m, buf, sizeof buf);
    if (n < 0) TEST_FAIL_("encode");
    zmq_send(f->router, f->id, f->idlen, ZMQ_SNDMORE);
    zmq_send(f->router, buf, (size_t)n, 0);
}

static uint16_t frecv(fake *f, lf_msg *m, unsigned char *buf)
{
    int idn = zmq_recv(f->router, f->id, sizeof f->id, 0);
    int n = zmq_recv(f->router, buf, 512, 0);
    if (idn < 0 || n < 0 || lf_wire_decode(buf, (size_t)n, m) != 0) TEST_FAIL_("fake recv");
    f->idlen = (size_t)idn;
    return m->type;
}

/* Writes a valid batch of `rows` samples into slot s, for READY r. */
static void write_batch(fake *f, const lf_msg_ready *r, uint64_t rows)
{
    unsigned char *slot = f->seg + lf_ring_slot_offset(r->slot, SLOT);
    lf_layout l;
    uint64_t grid[2] = {rows, 4}, ids[1] = {rows};
    lf_layout_init(&l, LF_SLOT_HEADER_SIZE + lf_layout_encoded_size(2), 64);
    lf_layout_add(&l, "tokens", LF_DTYPE_I32, 2, grid);
    lf_layout_add(&l, "sample_ids", LF_DTYPE_U64, 1, ids);
    int32_t *tok = (int32_t *)(slot + l.tensors[0].offset);
    for (uint64_t i = 0; i < rows * 4; i++) tok[i] = (int32_t)(i + 100 * r->seq);
    if (lf_slot_write_header(slot, SLOT, 0, r, (uint32_t)rows, 4 * rows, &l) != 0) TEST_FAIL_("slot");
}

static void hand_over_ring(fake *f)
{
    int c = accept(f->listenfd, NULL, NULL);
    unsigned char hello[12];
    if (c < 0 || recv(c, hello, sizeof hello, MSG_WAITALL) != 12) TEST_FAIL_("fd hello");
    int mfd = memfd_create("fake", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    uint64_t size = lf_ring_segment_size(NSLOTS, SLOT);
    if (mfd < 0 || ftruncate(mfd, (off_t)size) != 0) TEST_FAIL_("memfd");
    if (f->mode != UNSEALED &&
        fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        TEST_FAIL_("seal");
    if (f->mode == FOREIGN_MEMFD && fchown(mfd, OTHER_UID, OTHER_UID) != 0) TEST_FAIL_("chown");
    f->seg = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    lf_ring_header_write(f->seg, 0, NSLOTS, SLOT, 1);
    if (lf_ipc_send_fd(c, mfd, "OK\n", 4) != 0) TEST_FAIL_("send fd");
    close(mfd);
    /* c stays open for the session: closing it would mean "server gone". */
    f->ringfd = c;
}

/* The fd socket listened on by a process of another uid (SO_PEERCRED
 * reports who called listen); it takes one connection and closes it.
 * Returns once it listens. */
static pid_t listen_as_other(fake *f)
{
    int ready[2];
    if (pipe(ready) != 0) TEST_FAIL_("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        if (setresgid(OTHER_UID, OTHER_UID, OTHER_UID) != 0 ||
            setresuid(OTHER_UID, OTHER_UID, OTHER_UID) != 0 || listen(f->listenfd, 4) != 0)
            _exit(1);
        (void)!write(ready[1], "x", 1);
        int c = accept(f->listenfd, NULL, NULL);
        char b[12];
        if (c >= 0) (void)!read(c, b, sizeof b);
        _exit(0);
    }
    char x;
    if (pid < 0 || read(ready[0], &x, 1) != 1) TEST_FAIL_("the other uid's listener");
    close(ready[0]);
    close(ready[1]);
    return pid;
}

static void *fake_main(void *arg)
{
    fake *f = arg;
    unsigned char buf[512];
    lf_msg m;
    if (frecv(f, &m, buf) != LF_MSG_HELLO) TEST_FAIL_("expected HELLO");
    lf_msg w = {.type = LF_MSG_WELCOME};
    w.u.welcome = (lf_msg_welcome){.rank = 0, .nslots = NSLOTS, .slot_size = SLOT,
                                   .segment_size = lf_ring_segment_size(NSLOTS, SLOT),
                                   .token = 1, .heartbeat_ms = 50, .plan_id = 77,
                                   .base_id = 78};
    int epochs = f->mode == ONE_EPOCH || f->mode == EPOCHS_PARTLY_TOLD;
    if (epochs) {
        w.u.welcome.first_epoch = 2;
        w.u.welcome.epochs = f->mode == ONE_EPOCH ? 1 : LF_WIRE_EPOCHS_MAX + 1;
        w.u.welcome.nsteps = f->mode == ONE_EPOCH ? 1 : 2;
        w.u.welcome.steps = epoch_steps;
    }
    strcpy(w.u.welcome.fd_path, f->fd_path);
    if (f->mode == DIR_TAKEN && chown(f->dir, OTHER_UID, OTHER_UID) != 0) TEST_FAIL_("chown");
    pid_t other = f->mode == FOREIGN_PEER ? listen_as_other(f) : 0;
    fsend(f, &w);
    if (other > 0) {
        waitpid(other, NULL, 0);
        return NULL;
    }
    if (f->mode == NO_RING || f->mode == DIR_TAKEN)
        return NULL; /* the connection waits in the backlog, or never comes */
    if (f->mode == RING_REFUSED) {
        int c = accept(f->listenfd, NULL, NULL);
        unsigned char hello[12];
        if (c < 0 || recv(c, hello, sizeof hello, MSG_WAITALL) != 12) TEST_FAIL_("fd hello");
        close(c);
        return NULL;
    }
    hand_over_ring(f);
    if (f->mode == UNSEALED || f->mode == FOREIGN_MEMFD) return NULL; /* refused */
    int type;
    while ((type = frecv(f, &m, buf)) == LF_MSG_HEARTBEAT) {
    } /* a client waiting for a count before its first batch beats */
    if (type != LF_MSG_START) TEST_FAIL_("expected START");
    f->start = m.u.start;
    if (f->mode == SILENT) return NULL; /* alive, but never heard from again */
    if (f->mode == GONE_AFTER_START) { /* as a kill -9 would: the ring connection closes */
        close(f->ringfd);
        return NULL;
    }
    lf_msg r = {.type = LF_MSG_READY,
                .u.ready = {.slot = 0, .epoch = epochs ? 2 : 0, .step = 0, .seq = 0}};
    write_batch(f, &r.u.ready, 3);
    if (f->mode == EPOCHS_PARTLY_TOLD) {
        lf_msg e = {.type = LF_MSG_EPOCH, .u.epoch = {2, EPOCH_LATER}};
        fsend(f, &e);
    }
    if (f->mode == SLOT_OUT_OF_RANGE) r.u.ready.slot = NSLOTS;
    if (f->mode == OUT_OF_SEQUENCE) r.u.ready.seq = 1;
    fsend(f, &r);
    if (f->mode == GOOD_THEN_CORRUPT) {
        lf_msg r2 = {.type = LF_MSG_READY, .u.ready = {.slot = 1, .epoch = 0, .step = 1, .seq = 1}};
        write_batch(f, &r2.u.ready, 2);
        f->seg[lf_ring_slot_offset(1, SLOT) + LF_SLOT_HEADER_SIZE + 40] ^= 1; /* layout byte */
        fsend(f, &r2);
    }
    if (f->mode == GOOD_THEN_END || epochs) {
        lf_msg e = {.type = LF_MSG_END};
        fsend(f, &e);
    }
    return NULL;
}

static void fake_start(fake *f, int mode, pthread_t *th)
{
    memset(f, 0, sizeof *f);
    f->mode = mode;
    static int runs; /* a fresh endpoint each time */
    snprintf(f->dir, sizeof f->dir, "%.150s/rt%d", test_tmpdir(), runs++);
    ASSERT_EQ(mkdir(f->dir, 0700), 0);
    snprintf(f->ep, sizeof f->ep, "%s/ctl", f->dir);
    snprintf(f->fd_path, sizeof f->fd_path, "%s.fd", f->ep);
    char url[220];
    snprintf(url, sizeof url, "ipc://%s", f->ep);
    f->ctx = zmq_ctx_new();
    f->router = zmq_socket(f->ctx, ZMQ_ROUTER);
    ASSERT_EQ(zmq_bind(f->router, url), 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, f->fd_path);
    f->listenfd = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_EQ(bind(f->listenfd, (struct sockaddr *)&sa, sizeof sa), 0);
    if (mode != FOREIGN_PEER) ASSERT_EQ(listen(f->listenfd, 4), 0);
    ASSERT_EQ(pthread_create(th, NULL, fake_main, f), 0);
}

static lf_client *open_client(fake *f)
{
    lf_client_options o;
    lf_client_options_default(&o);
    o.rank = 0;
    o.world_size = 1;
    o.endpoint = f->ep;
    lf_client *c = NULL;
    ASSERT_EQ(lf_client_open(&o, &c), 0);
    return c;
}

/* What another local user controls is refused, the cause named: the
 * runtime directory taken over after the open (a late squat), an fd socket
 * another uid listens on (a relay), another uid's memfd. */
static void check_foreign(void)
{
    if (geteuid() != 0) {
        printf("skipped the foreign-user cases: they need root to play uid %d\n", OTHER_UID);
        return;
    }
    static const struct { int mode; const char *why; } cases[] = {
        {DIR_TAKEN, "belongs to uid 65534"},
        {FOREIGN_PEER, "served by another user's process"},
        {FOREIGN_MEMFD, "ring handed over belongs to uid 65534"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fake f;
        pthread_t th;
        char why[512] = "";
        fake_start(&f, cases[i].mode, &th);
        lf_client_options o = {.endpoint = f.ep, .rank = 0, .world_size = 1,
                               .connect_timeout_ms = 3000, .error = why,
                               .error_size = sizeof why};
        lf_client *c = NULL;
        ASSERT_EQ(lf_client_open(&o, &c), -EPERM);
        ASSERT_TRUE(c == NULL);
        if (!strstr(why, cases[i].why)) TEST_FAIL_("want \"%s\", got: %s", cases[i].why, why);
        pthread_join(th, NULL);
    }
}

static void check_good_batch(lf_client *c, lf_batch *b)
{
    ASSERT_EQ(lf_next(c, b, 5000), 0);
    ASSERT_EQ(b->nsamples, 3);
    const lf_tensor *t = lf_batch_tensor(b, "tokens");
    ASSERT_TRUE(t != NULL);
    ASSERT_EQ(t->ndim, 2);
    ASSERT_EQ(t->shape[0], 3);
    ASSERT_EQ(t->shape[1], 4);
    ASSERT_EQ(((const int32_t *)t->host)[11], 11);
    ASSERT_EQ(lf_tensor_int(t, 11), 11);
    ASSERT_EQ(lf_tensor_int(t, 12), -1);     /* past the end */
    ASSERT_TRUE(lf_batch_tensor(b, "nope") == NULL);
}

/* lf_tensor_int reads every integer dtype and refuses floats and devices. */
static void check_tensor_int(void)
{
    static uint16_t u16[2] = {1, 65535};
    static int8_t i8[1] = {-3};
    static int64_t i64[1] = {-((int64_t)1 << 40)};
    static float f32[1] = {1};
    lf_tensor t = {.name = "x", .dtype = 3, .size = sizeof u16, .host = u16};
    ASSERT_EQ(lf_tensor_int(&t, 1), 65535);
    t = (lf_tensor){.name = "x", .dtype = 2, .size = 1, .host = i8};
    ASSERT_EQ(lf_tensor_int(&t, 0), -3);
    t = (lf_tensor){.name = "x", .dtype = 8, .size = 8, .host = i64};
    ASSERT_EQ(lf_tensor_int(&t, 0), -((int64_t)1 << 40));
    t.host = NULL;
    ASSERT_EQ(lf_tensor_int(&t, 0), -1);
    t = (lf_tensor){.name = "x", .dtype = 11, .size = 4, .host = f32};
    ASSERT_EQ(lf_tensor_int(&t, 0), -1);
}

int main(void)
{
    check_tensor_int();

    /* Arguments and the absent server. */
    lf_client_options o;
    lf_client_options_default(&o);
    lf_client *c = NULL;
    o.rank = -1;
    ASSERT_EQ(lf_client_open(&o, &c), -EINVAL);
    char ep[256], why[512] = "";
    snprintf(ep, sizeof ep, "%.200s/none/ctl", test_tmpdir());
    o = (lf_client_options){.endpoint = ep, .rank = 0, .world_size = 1,
                            .connect_timeout_ms = 200, .error = why, .error_size = sizeof why};
    ASSERT_EQ(lf_client_open(&o, &c), LF_E_TIMEOUT);
    /* The reason names the socket tried and what to start there. */
    ASSERT_TRUE(strstr(why, ep) != NULL);
    ASSERT_TRUE(strstr(why, "lf-server") != NULL && strstr(why, "lf-launch") != NULL);
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
    setenv("LOCAL_RANK", "1", 1);
    lf_client_options_default(&o);
    ASSERT_EQ(o.rank, 3);
    ASSERT_EQ(o.world_size, 8);
    ASSERT_EQ(o.device, 1);
    setenv("RANK", "5", 1); /* RANK wins over MPI's variable */
    lf_client_options_default(&o);
    ASSERT_EQ(o.rank, 5);
    /* A malformed value is unknown (-1), not replaced by MPI's 3 and 8. */
    static const char *const bad_rank[] = {"2x", " 3", "+3", "-1", "99999999999"};
    for (size_t i = 0; i < sizeof bad_rank / sizeof *bad_rank; i++) {
        setenv("RANK", bad_rank[i], 1);
        lf_client_options_default(&o);
        ASSERT_EQ(o.rank, -1);
    }
    static const char *const bad_world[] = {"4x", "0", ""};
    for (size_t i = 0; i < sizeof bad_world / sizeof *bad_world; i++) {
        setenv("WORLD_SIZE", bad_world[i], 1);
        lf_client_options_default(&o);
        ASSERT_EQ(o.world_size, bad_world[i][0] ? -1 : 8); /* empty: not set */
    }
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    for (int code = LF_E_ORDER; code <= LF_E_END; code++)
        ASSERT_TRUE(strcmp(lf_strerror(code), "unknown error") != 0);

    /* A good batch, then a slot whose layout byte changed. */
    fake f;
    pthread_t th;
    fake_start(&f, GOOD_THEN_CORRUPT, &th);
    c = open_client(&f);
    lf_batch b, b2;
    check_good_batch(c, &b);
    ASSERT_EQ(lf_release(c, &b), 0);
    ASSERT_EQ(lf_release(c, &b), -EINVAL); /* twice */
    ASSERT_EQ(lf_next(c, &b2, 5000), LF_E_PROTOCOL);
    ASSERT_TRUE(strstr(lf_client_error(c), "bad slot 1") != NULL);
    unsigned char st[LF_STATE_SIZE];
    ASSERT_EQ(lf_state_save(c, st, sizeof st), LF_STATE_SIZE);
    /* a buffer of before 1.6 (LF_STATE_SIZE was 40) gets the state of before */
    unsigned char st1[40];
    ASSERT_EQ(lf_state_save(c, st1, sizeof st1 - 1), -ENOBUFS);
    ASSERT_EQ(lf_state_save(c, st1, sizeof st1), 40);
    ASSERT_EQ(lf_state_restore(c, st, sizeof st), LF_E_ORDER); /* after next */
    pthread_join(th, NULL);
    lf_client_close(c);

    /* READY naming a slot past the ring, or out of sequence. */
    for (int mode = SLOT_OUT_OF_RANGE; mode <= OUT_OF_SEQUENCE; mode++) {
        fake_start(&f, mode, &th);
        c = open_client(&f);
        ASSERT_EQ(lf_next(c, &b, 5000), LF_E_PROTOCOL);
        pthread_join(th, NULL);
        lf_client_close(c);
    }

    /* Restore: START carries the saved position; END ends. */
    fake_start(&f, GOOD_THEN_END, &th);
    c = open_client(&f);
    unsigned char bad[LF_STATE_SIZE];
    memcpy(bad, st, sizeof bad);
    bad[8] ^= 1;
    ASSERT_EQ(lf_state_restore(c, bad, sizeof bad), LF_E_STATE);
    ASSERT_EQ(lf_state_restore(c, st, sizeof st - 1), LF_E_STATE);
    ASSERT_TRUE(strstr(lf_client_error(c), "not a levelfeed state") != NULL);
    ASSERT_EQ(lf_state_restore(c, st1, sizeof st1), 0); /* the unchanged plan's */
    ASSERT_EQ(lf_state_restore(c, st, sizeof st), 0);
    check_good_batch(c, &b);
    ASSERT_EQ(lf_report_step(c, 1000), 0);
    ASSERT_EQ(lf_next(c, &b2, 5000), LF_E_END);
    pthread_join(th, NULL); /* f.start is the fake's: read it after the join */
    ASSERT_EQ(f.start.epoch, 0);
    ASSERT_EQ(f.start.step, 1);   /* the batch after the one returned before */
    ASSERT_EQ(f.start.plan_id, 77);
    ASSERT_EQ(f.start.base_id, 78);
    lf_client_close(c);
    /* A server that stops talking (10 heartbeats of 50 ms) is reported gone. */
    fake_start(&f, SILENT, &th);
    c = open_client(&f);
    ASSERT_EQ(lf_next(c, &b, 10000), LF_E_GONE);
    ASSERT_TRUE(strstr(lf_client_error(c), "heartbeat") != NULL);
    pthread_join(th, NULL);
    lf_client_close(c);

    /* WELCOME, then no ring: the open ends at its timeout. Or the ring
     * connection closed: the server is gone. */
    for (int mode = NO_RING; mode <= RING_REFUSED; mode++) {
        fake_start(&f, mode, &th);
        o = (lf_client_options){.endpoint = f.ep, .rank = 0, .world_size = 1,
                                .connect_timeout_ms = 300, .error = why,
                                .error_size = sizeof why};
        c = NULL;
        ASSERT_EQ(lf_client_open(&o, &c), mode == NO_RING ? LF_E_TIMEOUT : LF_E_GONE);
        ASSERT_TRUE(c == NULL);
        ASSERT_TRUE(strstr(why, "ring") != NULL);
        pthread_join(th, NULL);
    }
    /* A ring descriptor that is not sealed could shrink under the mapping
     * (SIGBUS on a read): refused. */
    fake_start(&f, UNSEALED, &th);
    o = (lf_client_options){.endpoint = f.ep, .rank = 0, .world_size = 1,
                            .connect_timeout_ms = 2000, .error = why, .error_size = sizeof why};
    c = NULL;
    ASSERT_EQ(lf_client_open(&o, &c), LF_E_PROTOCOL);
    ASSERT_TRUE(strstr(why, "sealed") != NULL);
    pthread_join(th, NULL);

    /* The server goes away after START: a poll with no wait says gone, not
     * timed out (it said "timed out" for ~10 heartbeats), and so does the
     * next one, with the first reason. */
    fake_start(&f, GONE_AFTER_START, &th);
    c = open_client(&f);
    ASSERT_EQ(lf_next(c, &b, 10000), LF_E_GONE); /* START sent, then the close */
    pthread_join(th, NULL);
    lf_client_close(c);
    fake_start(&f, GONE_AFTER_START, &th);
    c = open_client(&f);
    int rc = lf_next(c, &b, 0); /* sends START: nothing yet, or the close already */
    ASSERT_TRUE(rc == LF_E_TIMEOUT || rc == LF_E_GONE);
    pthread_join(th, NULL);     /* the fake has closed the ring connection */
    ASSERT_EQ(lf_next(c, &b, 0), LF_E_GONE);
    ASSERT_TRUE(strstr(lf_client_error(c), "ring socket") != NULL);
    ASSERT_EQ(lf_next(c, &b, 0), LF_E_GONE);
    ASSERT_TRUE(strstr(lf_client_error(c), "ring socket") != NULL);
    lf_client_close(c);
    check_foreign();

    /* Each epoch's batch count, as WELCOME told it: before any batch the
     * first epoch's (the fresh position, epoch 0, lies before --epoch 2);
     * after epoch 2's one batch, the next epoch's, or the end of the plan. */
    fake_start(&f, ONE_EPOCH, &th);
    c = open_client(&f);
    ASSERT_EQ(lf_client_epoch_batches(c, LF_EPOCH_NEXT), 1);
    ASSERT_EQ(lf_client_epoch_batches(c, 2), 1);
    ASSERT_EQ(lf_client_epoch_batches(c, 1), -ERANGE);
    ASSERT_EQ(lf_client_epoch_batches(c, 3), -ERANGE);
    check_good_batch(c, &b);
    ASSERT_EQ(b.epoch, 2);
    ASSERT_EQ(lf_client_epoch_batches(c, LF_EPOCH_NEXT), LF_E_END);
    ASSERT_EQ(lf_release(c, &b), 0);
    ASSERT_EQ(lf_next(c, &b, 5000), LF_E_END);
    pthread_join(th, NULL);
    lf_client_close(c);
    fake_start(&f, EPOCHS_PARTLY_TOLD, &th);
    c = open_client(&f);
    ASSERT_EQ(lf_client_epoch_batches(c, 3), 4);
    ASSERT_EQ(lf_client_epoch_batches(c, 4), -EAGAIN);  /* not planned yet */
    ASSERT_EQ(lf_client_epoch_batches(c, 2 + LF_WIRE_EPOCHS_MAX), -ENODATA);
    ASSERT_EQ(lf_client_epoch_batches(c, 3 + LF_WIRE_EPOCHS_MAX), -ERANGE);
    /* Waiting for a count the fake tells only after START: out of time,
     * saying which count; a count known answers at once. */
    ASSERT_EQ(lf_client_epoch_batches_wait(c, 4, 100), LF_E_TIMEOUT);
    ASSERT_TRUE(strstr(lf_client_error(c), "batch count") != NULL);
    ASSERT_EQ(lf_client_epoch_batches_wait(c, 3, 0), 4);
    check_good_batch(c, &b);  /* its EPOCH came first */
    ASSERT_EQ(lf_client_epoch_batches(c, 4), EPOCH_LATER);
    ASSERT_EQ(lf_client_epoch_batches_wait(c, 4, 0), EPOCH_LATER);
    ASSERT_EQ(lf_client_epoch_batches(c, LF_EPOCH_NEXT), 4); /* epoch 2 is over */
    pthread_join(th, NULL);
    lf_client_close(c);
    printf("client api ok\n");
    return 0;
}
