/*
 * client_gpu.c — the client's GPU path against a real lf-server.
 *
 * Run A (host memory) records every batch: epoch, step, sample count and a
 * digest of each tensor's bytes, and the saved state after K batches; it
 * also checks that a device cannot be chosen after the first lf_next. Run
 * B (a new server, the same job) uses device 0: every tensor must be in
 * device memory only, its bytes (copied back) equal run A's, the state
 * saved after K batches equal run A's byte for byte (the trainer's
 * position, not the prefetcher's), and the stream end at the same batch.
 * Without an NVIDIA driver or device, run B's lf_client_use_device must
 * fail with -ENODEV and a reason, and the test then skips. Also: a device
 * cannot be chosen twice or with a depth out of range, a forged release is
 * refused, and a client closed before its first lf_next does not hang.
 *
 * Both runs also check: with every slot held (the ring's 3, or the device's
 * depth of 2) lf_next returns LF_E_ORDER at once instead of waiting; each
 * lf_report_step reaches the server as one step (lf-stat's steps_reported,
 * the device path's reports going through its thread); and a state saved
 * after a restore, before any batch, is the restored one (with a device it
 * once read 0, 0: the prefetcher's position, not yet set).
 *
 * Then, a server stopped by a signal while the prefetch thread waits on
 * it: the thread records the server's ERROR at once, but the text
 * lf_client_error gave the trainer stays as it was until the trainer's
 * next call, which returns LF_E_SERVER and the reason. The thread once
 * wrote that text under the trainer's reads (with the stand-in driver,
 * ThreadSanitizer reported the race). Last, epoch 0's count told late
 * (the server's scout): lf_client_epoch_batches_wait, the prefetch thread
 * running, gets it, and epoch 0 brings as many batches.
 */
#include "gpu_test.h"

#include <errno.h>

#define MAX_BATCHES 256
#define SAVE_AT 5

typedef struct run {
    gpu_test_record rec[MAX_BATCHES];
    uint32_t n, reports;
    unsigned char state[LF_STATE_SIZE];
} run;

typedef gpu_test_dtoh dtoh;

static pid_t start(const char *bin, const char *ds, const char *ep, const char *world,
                   const char *ranks)
{
    const char *argv[] = {"--data", ds, "--world", world, "--ranks", ranks, "--endpoint", ep,
                          "--quiet", "--samples-per-rank", "4", "--slots", "3",
                          "--epochs", "2", NULL};
    return srv_test_start(bin, ep, argv);
}

/* Appends b to r; tensor bytes from the host or copied back from the device. */
static void record_batch(run *r, const lf_batch *b, const dtoh *d)
{
    ASSERT_LT(r->n, MAX_BATCHES);
    gpu_test_record_batch(&r->rec[r->n++], b, d);
}

/* Takes `slots` batches without releasing any: one more lf_next is refused
 * at once (it could only wait); then reports and releases them. */
static void hold_all(lf_client *c, run *r, const dtoh *d, uint32_t slots)
{
    lf_batch held[8], extra;
    ASSERT_LE(slots, 8);
    for (uint32_t i = 0; i < slots; i++) {
        ASSERT_EQ(lf_next(c, &held[i], 10000), 0);
        record_batch(r, &held[i], d);
        ASSERT_EQ(lf_report_step(c, 1000), 0);
        r->reports++;
    }
    ASSERT_EQ(lf_next(c, &extra, 10000), LF_E_ORDER);
    ASSERT_TRUE(strstr(lf_client_error(c), "lf_release") != NULL);
    for (uint32_t i = 0; i < slots; i++) ASSERT_EQ(lf_release(c, &held[i]), 0);
}

/* Reads the whole stream (`slots` of it held at once first); saves the
 * state after SAVE_AT batches. */
static void drain(lf_client *c, run *r, const dtoh *d, uint32_t slots)
{
    lf_batch b;
    int rc;
    hold_all(c, r, d, slots);
    while ((rc = lf_next(c, &b, 10000)) == 0) {
        record_batch(r, &b, d);
        ASSERT_EQ(lf_report_step(c, 1000), 0);
        r->reports++;
        ASSERT_EQ(lf_release(c, &b), 0);
        if (r->n == SAVE_AT) {
            /* Give a prefetcher time to run ahead (it may take the next
             * batch now), so the state shows whose position it holds. */
            usleep(100000);
            ASSERT_EQ(lf_state_save(c, r->state, sizeof r->state), LF_STATE_SIZE);
        }
    }
    if (rc != LF_E_END) TEST_FAIL_("lf_next: %s (%s)", lf_strerror(rc), lf_client_error(c));
}

/* Rank 1 of the server's two never comes, so the server starts nothing
 * and the thread keeps polling (a thread blocked on a full device ring
 * would not read the ERROR); between reading the text and the ERROR's
 * arrival the trainer touches nothing the thread locks. */
static void error_while_prefetching(const char *bin, const char *ds, const char *ep)
{
    pid_t srv = start(bin, ds, ep, "2", "0,1");
    lf_client *c = gpu_test_open(ep, 2);
    ASSERT_EQ(lf_client_use_device(c, -1, 2), 0);
    lf_batch b;
    ASSERT_EQ(lf_next(c, &b, 0), LF_E_TIMEOUT); /* the thread sends START */
    /* The timeout's reason: rank 1 absent, once the thread has heard the
     * server's WAITING, else no batch in 0 ms. */
    const char *err = lf_client_error(c);
    char seen[512];
    snprintf(seen, sizeof seen, "%s", err);
    ASSERT_TRUE(strstr(seen, "rank 1 has not connected") || strstr(seen, "no batch"));
    ASSERT_EQ(kill(srv, SIGTERM), 0); /* ERROR "server stopped by a signal" */
    ASSERT_EQ(srv_test_wait(srv), 1);
    usleep(100000); /* the thread reads the ERROR within one poll */
    ASSERT_TRUE(lf_client_error(c) == err);
    ASSERT_STR_EQ(err, seen);
    ASSERT_EQ(lf_next(c, &b, 10000), LF_E_SERVER);
    ASSERT_TRUE(strstr(lf_client_error(c), "stopped by a signal") != NULL);
    lf_client_close(c);
}

/* Epoch 0 left to the server's scout, 3 s late (as past 2^20 samples):
 * with the prefetch thread running, a wait for its count borrows the
 * socket, reads the EPOCH and gives the socket back; the stream goes on,
 * epoch 0 as many batches as counted. */
static void count_while_prefetching(const char *bin, const char *ds, const char *ep)
{
    setenv("LF_TEST_SCOUT_EPOCH0", "1", 1);
    setenv("LF_TEST_SCOUT_DELAY_MS", "3000", 1);
    pid_t srv = start(bin, ds, ep, "1", "0");
    unsetenv("LF_TEST_SCOUT_EPOCH0");
    unsetenv("LF_TEST_SCOUT_DELAY_MS");
    lf_client *c = gpu_test_open(ep, 1);
    ASSERT_EQ(lf_client_use_device(c, -1, 2), 0);
    lf_batch b;
    ASSERT_EQ(lf_next(c, &b, 10000), 0);
    ASSERT_EQ(b.epoch, 0);
    ASSERT_EQ(lf_client_epoch_batches(c, 0), -EAGAIN); /* the scout is late */
    int64_t n = lf_client_epoch_batches_wait(c, 0, 30000);
    if (n < 0) TEST_FAIL_("the count: %s (%s)", lf_strerror((int)n), lf_client_error(c));
    int64_t got = 1;
    int rc;
    ASSERT_EQ(lf_release(c, &b), 0);
    while ((rc = lf_next(c, &b, 10000)) == 0) {
        if (b.epoch == 0) got++;
        ASSERT_EQ(lf_release(c, &b), 0);
    }
    ASSERT_EQ(rc, LF_E_END);
    ASSERT_EQ(got, n);
    lf_client_close(c);
    ASSERT_EQ(srv_test_wait(srv), 0);
    printf("epoch 0 counted by the scout while prefetching: %lld batches, as told\n",
           (long long)n);
}

int main(void)
{
    srv_test_dirs dirs;
    srv_test_dirs_make(&dirs);
    const char *bin = dirs.bin, *ds = dirs.ds, *ep = dirs.ep;
    static run a, b;

    pid_t srv = start(bin, ds, ep, "1", "0");
    lf_client *c = gpu_test_open(ep, 1);
    lf_batch first;
    ASSERT_EQ(lf_next(c, &first, 10000), 0);
    ASSERT_EQ(lf_client_use_device(c, 0, 2), LF_E_ORDER);
    record_batch(&a, &first, NULL);
    ASSERT_EQ(lf_report_step(c, 1000), 0);
    a.reports++;
    ASSERT_EQ(lf_release(c, &first), 0);
    drain(c, &a, NULL, 3);
    gpu_test_expect_steps(bin, ep, a.reports);
    lf_client_close(c);
    ASSERT_EQ(srv_test_wait(srv), 0);
    ASSERT_GT(a.n, SAVE_AT);

    srv = start(bin, ds, ep, "1", "0");
    c = gpu_test_open(ep, 1);
    ASSERT_EQ(lf_client_use_device(c, 0, 1000), -EINVAL); /* depth out of range */
    int rc = lf_client_use_device(c, -1, 2);
    if (rc == -ENODEV) {
        char why[300];
        snprintf(why, sizeof why, "%s", lf_client_error(c));
        ASSERT_GT(strlen(why), 0);
        lf_client_close(c);
        ASSERT_EQ(srv_test_wait(srv), 0);
        TEST_SKIP("no CUDA device: %s (run A, host memory, passed: %u batches)", why, a.n);
    }
    if (rc != 0) TEST_FAIL_("lf_client_use_device: %s (%s)", lf_strerror(rc), lf_client_error(c));
    ASSERT_EQ(lf_client_use_device(c, 0, 2), LF_E_ORDER); /* once */
    dtoh d;
    gpu_test_dtoh_load(&d);
    lf_batch forged = {.slot = 99};
    ASSERT_EQ(lf_release(c, &forged), -EINVAL);
    ASSERT_EQ(lf_report_step(c, 1000), LF_E_ORDER); /* no batch yet */
    drain(c, &b, &d, 2);
    gpu_test_expect_steps(bin, ep, b.reports);
    lf_client_close(c);
    ASSERT_EQ(srv_test_wait(srv), 0);

    /* Restored, a device chosen, saved before any batch: the restored
     * position. Then closed before the first lf_next: the prefetch thread,
     * still waiting to start, stops; nothing hangs. */
    srv = start(bin, ds, ep, "1", "0");
    c = gpu_test_open(ep, 1);
    ASSERT_EQ(lf_state_restore(c, a.state, sizeof a.state), 0);
    ASSERT_EQ(lf_client_use_device(c, -1, 2), 0);
    unsigned char again[LF_STATE_SIZE];
    ASSERT_EQ(lf_state_save(c, again, sizeof again), LF_STATE_SIZE);
    ASSERT_MEM_EQ(again, a.state, LF_STATE_SIZE);
    lf_client_close(c);
    ASSERT_EQ(srv_test_wait(srv), 0);
    ASSERT_EQ(b.n, a.n);
    gpu_test_records_equal(a.rec, b.rec, a.n, "device run");
    ASSERT_MEM_EQ(b.state, a.state, LF_STATE_SIZE);
    error_while_prefetching(bin, ds, ep);
    count_while_prefetching(bin, ds, ep);
    printf("device 0: %u batches, bytes and saved state equal the host run\n", b.n);
    return 0;
}
