/*
 * client_gpu_eval.c — evaluation passes (lf-server --eval-data) on the
 * client's GPU path, against the host path's.
 *
 * Three runs of the same job, each against a new server: R in host memory
 * without passes (the training stream as it is alone), A in host memory
 * and B on device 0, both making the same calls:
 *   - a pass before the first lf_next, both eval slots held at once first
 *     (one more lf_eval_next is refused: release one);
 *   - after SAVE_AT training batches, with the prefetcher given time to
 *     fill its device slots, a pass with a step report in its middle; the
 *     state saved before it and after it equal;
 *   - after LEAVE_AT, a pass left after its first batch for training; three
 *     batches later a new pass is refused while that one is not done, its
 *     rest taken, then a whole pass;
 *   - a pass after lf_next said the run is over.
 * Checks: A's and B's training streams equal R's batch for batch and byte
 * for byte, their saved states R's; every whole pass equals the first,
 * which holds each held-out sample once, and the pass left early, its
 * pieces joined, too; B's eval batches (copied back from the device) equal
 * A's byte for byte, all in device memory only; the server counted every
 * step report. Without a device, B's lf_client_use_device must say why
 * (-ENODEV) and the test skips after R and A; e2e/client_gpu_fake runs it
 * against tests/fakecuda's stand-in driver, where it must pass. Before eval
 * passes were done on a device, lf_eval_begin refused B (LF_E_ORDER).
 */
#include "gpu_test.h"

#include <errno.h>

#define NEVAL 23                 /* held-out samples */
#define MAX_RECORDS 256
#define SAVE_AT 5
#define LEAVE_AT 9

typedef struct run {
    gpu_test_record train[MAX_RECORDS], eval[MAX_RECORDS];
    uint32_t ntrain, neval, reports;
    unsigned char state[LF_STATE_SIZE]; /* after SAVE_AT batches */
} run;

enum { HOLD_BOTH = 1, REPORT_INSIDE = 2 };

static pid_t start(const char *bin, const char *ds, const char *ev, const char *ep)
{
    const char *argv[] = {"--data", ds, "--eval-data", ev, "--world", "1", "--ranks", "0",
                          "--endpoint", ep, "--quiet", "--samples-per-rank", "4",
                          "--slots", "3", "--epochs", "2", NULL};
    return srv_test_start(bin, ep, argv);
}

static void report(lf_client *c, run *r)
{
    ASSERT_EQ(lf_report_step(c, 1000), 0);
    r->reports++;
}

/* The pass's next batch, recorded; 0 at the pass's end. */
static int eval_take(lf_client *c, run *r, const gpu_test_dtoh *d, lf_batch *b)
{
    int rc = lf_eval_next(c, b, 10000);
    if (rc < 0) TEST_FAIL_("lf_eval_next: %s (%s)", lf_strerror(rc), lf_client_error(c));
    if (rc == 0) return 0;
    ASSERT_LT(r->neval, MAX_RECORDS);
    gpu_test_record_batch(&r->eval[r->neval++], b, d);
    return 1;
}

/* Takes the rest of the pass under way, each batch released at once. */
static void eval_rest(lf_client *c, run *r, const gpu_test_dtoh *d)
{
    lf_batch b;
    while (eval_take(c, r, d, &b)) ASSERT_EQ(lf_release(c, &b), 0);
}

/* One pass: with HOLD_BOTH its first two batches held together (a third
 * is refused at once), with REPORT_INSIDE a step report after its first. */
static void eval_pass(lf_client *c, run *r, const gpu_test_dtoh *d, int how)
{
    lf_batch b[2], extra;
    ASSERT_EQ(lf_eval_begin(c), 0);
    ASSERT_EQ(lf_eval_begin(c), LF_E_ORDER); /* one pass at a time */
    ASSERT_EQ(eval_take(c, r, d, &b[0]), 1);
    if (how & REPORT_INSIDE) report(c, r);
    if (how & HOLD_BOTH) {
        ASSERT_EQ(eval_take(c, r, d, &b[1]), 1);
        ASSERT_EQ(lf_eval_next(c, &extra, 10000), LF_E_ORDER);
        ASSERT_EQ(lf_release(c, &b[1]), 0);
    }
    ASSERT_EQ(lf_release(c, &b[0]), 0);
    eval_rest(c, r, d);
    ASSERT_EQ(lf_eval_next(c, &extra, 0), LF_E_ORDER); /* no pass now */
}

/* The whole training stream, with the passes above where `passes`. */
static void one_run(lf_client *c, run *r, const gpu_test_dtoh *d, int passes)
{
    if (passes) eval_pass(c, r, d, HOLD_BOTH);
    lf_batch b;
    int rc;
    while ((rc = lf_next(c, &b, 10000)) == 0) {
        ASSERT_LT(r->ntrain, MAX_RECORDS);
        gpu_test_record_batch(&r->train[r->ntrain++], &b, d);
        report(c, r);
        ASSERT_EQ(lf_release(c, &b), 0);
        uint32_t n = r->ntrain;
        if (n == SAVE_AT) {
            usleep(100000); /* a prefetcher fills its slots: the pass finds them full */
            ASSERT_EQ(lf_state_save(c, r->state, sizeof r->state), LF_STATE_SIZE);
        }
        if (!passes) continue;
        if (n == SAVE_AT) {
            unsigned char after[LF_STATE_SIZE];
            eval_pass(c, r, d, REPORT_INSIDE);
            ASSERT_EQ(lf_state_save(c, after, sizeof after), LF_STATE_SIZE);
            ASSERT_MEM_EQ(after, r->state, LF_STATE_SIZE);
        }
        if (n == LEAVE_AT) { /* left early: training goes on */
            ASSERT_EQ(lf_eval_begin(c), 0);
            ASSERT_EQ(eval_take(c, r, d, &b), 1);
            ASSERT_EQ(lf_release(c, &b), 0);
        }
        if (n == LEAVE_AT + 3) {
            ASSERT_EQ(lf_eval_begin(c), LF_E_ORDER); /* the pass left is not done */
            eval_rest(c, r, d);
            eval_pass(c, r, d, 0);
        }
    }
    if (rc != LF_E_END) TEST_FAIL_("lf_next: %s (%s)", lf_strerror(rc), lf_client_error(c));
    if (passes) eval_pass(c, r, d, 0); /* the run is over: passes still come */
}

/* Every pass of r (5, one left early) equals the first, of per batches;
 * the first holds each held-out sample once. */
static void check_passes(const run *r, uint32_t per)
{
    ASSERT_EQ(r->neval, 5 * per);
    for (uint32_t p = 1; p < 5; p++) gpu_test_records_equal(r->eval, r->eval + p * per, per, "pass");
    int seen[NEVAL] = {0};
    for (uint32_t i = 0; i < per; i++)
        for (uint32_t k = 0; k < r->eval[i].nsamples; k++) {
            int64_t id = r->eval[i].ids[k];
            ASSERT_TRUE(id >= 0 && id < NEVAL);
            seen[id]++;
        }
    for (int i = 0; i < NEVAL; i++) ASSERT_EQ(seen[i], 1);
}

/* Serves one run: the server started, the client opened (on device 0 for
 * B, d set), the run made, the step reports counted. Returns 0, or the
 * -ENODEV of a machine without a device (why[] says why). */
static int serve(const srv_test_dirs *dirs, const char *ev, run *r, gpu_test_dtoh *d,
                 int passes, char *why, size_t cap)
{
    pid_t srv = start(dirs->bin, dirs->ds, ev, dirs->ep);
    lf_client *c = gpu_test_open(dirs->ep, 1);
    int rc = d ? lf_client_use_device(c, -1, 2) : 0;
    if (rc == -ENODEV) snprintf(why, cap, "%s", lf_client_error(c));
    if (rc != 0 && rc != -ENODEV)
        TEST_FAIL_("lf_client_use_device: %s (%s)", lf_strerror(rc), lf_client_error(c));
    if (rc == 0) {
        if (d) gpu_test_dtoh_load(d);
        one_run(c, r, d, passes);
        gpu_test_expect_steps(dirs->bin, dirs->ep, r->reports);
    }
    lf_client_close(c);
    ASSERT_EQ(srv_test_wait(srv), 0);
    return rc;
}

int main(void)
{
    srv_test_dirs dirs;
    srv_test_dirs_make(&dirs);
    char ev[600];
    snprintf(ev, sizeof ev, "%.500s/ev", test_tmpdir());
    srv_test_tokens(ev, NEVAL, 1000); /* the held-out set: other tokens */
    static run ref, a, b;
    char why[512] = "";

    ASSERT_EQ(serve(&dirs, ev, &ref, NULL, 0, why, sizeof why), 0);
    ASSERT_EQ(serve(&dirs, ev, &a, NULL, 1, why, sizeof why), 0);
    ASSERT_GT(ref.ntrain, LEAVE_AT + 3);
    ASSERT_EQ(a.ntrain, ref.ntrain);
    gpu_test_records_equal(ref.train, a.train, ref.ntrain, "host run with passes: training");
    ASSERT_MEM_EQ(a.state, ref.state, LF_STATE_SIZE);
    uint32_t per = a.neval / 5;
    ASSERT_GT(per, 2);
    check_passes(&a, per);

    gpu_test_dtoh d;
    if (serve(&dirs, ev, &b, &d, 1, why, sizeof why) == -ENODEV) {
        ASSERT_GT(strlen(why), 0);
        TEST_SKIP("no CUDA device: %s (the host runs passed: %u training, %u eval batches)",
                  why, a.ntrain, a.neval);
    }
    ASSERT_EQ(b.ntrain, ref.ntrain);
    gpu_test_records_equal(ref.train, b.train, ref.ntrain, "device run: training");
    ASSERT_MEM_EQ(b.state, ref.state, LF_STATE_SIZE);
    ASSERT_EQ(b.neval, a.neval);
    gpu_test_records_equal(a.eval, b.eval, a.neval, "device run: eval");
    check_passes(&b, per);
    printf("device 0: %u training and %u eval batches (5 passes of %u), bytes and saved "
           "state equal the host runs\n", b.ntrain, b.neval, per);
    return 0;
}
