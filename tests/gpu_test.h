/*
 * gpu_test.h — what the client's GPU-path tests share (unit/client_gpu,
 * unit/client_gpu_eval): rank 0's client, a batch recorded the same way
 * from host memory or copied back from the device, and the server's count
 * of step reports. Each test runs against the real driver, or the
 * stand-in of tests/fakecuda (e2e/client_gpu_fake).
 */
#ifndef LF_GPU_TEST_H
#define LF_GPU_TEST_H

#include "cudrv.h"
#include "levelfeed.h"
#include "srv_test.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#define GPU_TEST_MAX_IDS 16

/* One batch as a test compares it: its place, and a digest of each
 * tensor's bytes; sample_ids' first values (-1 past nsamples). */
typedef struct gpu_test_record {
    uint32_t epoch, nsamples, ntensors;
    uint64_t step;
    uint64_t digest[8];
    int64_t ids[GPU_TEST_MAX_IDS];
} gpu_test_record;

/* Device-to-host copies for the checks, through the driver like the client. */
typedef struct gpu_test_dtoh {
    int (*device_get)(int *dev, int ordinal);
    int (*ctx_retain)(void **ctx, int dev);
    int (*ctx_set)(void *ctx);
    int (*copy)(void *dst, unsigned long long src, size_t bytes);
} gpu_test_dtoh;

/* Loads the copy and makes device 0's primary context current. */
static inline void gpu_test_dtoh_load(gpu_test_dtoh *d)
{
    const char *names[] = {"cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent",
                           "cuMemcpyDtoH_v2"};
    void *slots[] = {&d->device_get, &d->ctx_retain, &d->ctx_set, &d->copy};
    for (int i = 0; i < 4; i++) {
        void *f = lf_cudrv_symbol(names[i]);
        ASSERT_TRUE(f != NULL);
        memcpy(slots[i], &f, sizeof f);
    }
    int dev;
    void *ctx;
    ASSERT_EQ(d->device_get(&dev, 0), 0);
    ASSERT_EQ(d->ctx_retain(&ctx, dev), 0);
    ASSERT_EQ(d->ctx_set(ctx), 0);
}

/* Rank 0 of world_size on the server at ep, device 0 its default. */
static inline lf_client *gpu_test_open(const char *ep, int world_size)
{
    lf_client_options o;
    lf_client_options_default(&o);
    o.rank = 0;
    o.world_size = world_size;
    o.device = 0;
    o.endpoint = ep;
    lf_client *c;
    ASSERT_EQ(lf_client_open(&o, &c), 0);
    return c;
}

/* Records b: tensor bytes from the host (d NULL: every tensor must be in
 * host memory only) or copied back from the device (every tensor in
 * device memory only). */
static inline void gpu_test_record_batch(gpu_test_record *x, const lf_batch *b,
                                         const gpu_test_dtoh *d)
{
    memset(x, 0, sizeof *x); /* padding too: records are compared whole */
    x->epoch = b->epoch;
    x->step = b->step;
    x->nsamples = b->nsamples;
    x->ntensors = b->ntensors;
    memset(x->ids, 0xff, sizeof x->ids);
    ASSERT_LE(b->ntensors, 8);
    for (uint32_t i = 0; i < b->ntensors; i++) {
        lf_tensor t = b->tensors[i];
        void *buf = NULL;
        if (!d) {
            ASSERT_TRUE(t.host != NULL && t.device == NULL);
        } else {
            ASSERT_TRUE(t.host == NULL && t.device != NULL);
            buf = malloc(t.size ? t.size : 1);
            ASSERT_EQ(d->copy(buf, (unsigned long long)(uintptr_t)t.device, t.size), 0);
            t.host = buf;
        }
        x->digest[i] = XXH3_64bits(t.host, t.size);
        for (uint32_t k = 0; strcmp(t.name, "sample_ids") == 0 && k < b->nsamples; k++) {
            ASSERT_LT(k, GPU_TEST_MAX_IDS);
            x->ids[k] = lf_tensor_int(&t, k);
        }
        free(buf);
    }
}

/* The n records of y equal those of x, what names them said on failure. */
static inline void gpu_test_records_equal(const gpu_test_record *x, const gpu_test_record *y,
                                          uint32_t n, const char *what)
{
    for (uint32_t i = 0; i < n; i++)
        if (memcmp(&x[i], &y[i], sizeof x[i]) != 0)
            TEST_FAIL_("%s: batch %u differs (epoch %u step %" PRIu64 " vs epoch %u step %"
                       PRIu64 ")", what, i, x[i].epoch, x[i].step, y[i].epoch, y[i].step);
}

/* The server counts every STEP; they arrive on the client's connection
 * while lf-stat asks on its own, so the count is polled for up to 5 s. */
static inline void gpu_test_expect_steps(const char *bin, const char *ep, uint32_t want)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%.4000s/lf-stat' '%.4000s' --json", bin, ep);
    long got = -1;
    for (int i = 0; i < 100 && got != want; i++) {
        if (i) usleep(50000);
        FILE *p = popen(cmd, "r");
        ASSERT_TRUE(p != NULL);
        static char out[1 << 16];
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = 0;
        pclose(p);
        const char *at = strstr(out, "\"steps_reported\"");
        got = at ? strtol(strchr(at, ':') + 1, NULL, 10) : -1;
    }
    if (got != want) TEST_FAIL_("the server counted %ld steps, %u were reported", got, want);
}

#endif
