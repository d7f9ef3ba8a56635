/*
 * client_h2d.c — host-to-device copy rate out of a ring registered the way
 * liblevelfeed's GPU path registers it (a memfd mapped shared and writable,
 * as the client maps it so users may edit batches in place, pinned with
 * cuMemHostRegister READ_ONLY: the GPU only reads it), next to pinned memory from
 * cuMemAllocHost (what cudaHostAlloc gives) on the same device, stream and
 * sizes, in the same run. Issue 6 asks for >= 0.8x. Beside them, the
 * same copies out of plain malloc memory (pageable: the driver stages
 * them through its own pinned buffer), what a loader that pins nothing
 * gets.
 *
 * Usage: client_h2d [SLOT_MIB [TOTAL_MIB]]   (defaults 4 and 2048)
 * Prints one line; without a driver or device it says so and exits 0.
 */
#include "cudrv.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define RING_SLOTS 8

typedef struct extra {
    unsigned int (*alloc_host)(void **p, size_t bytes);
    unsigned int (*free_host)(void *p);
    unsigned int (*stream_sync)(lf_cu_stream s);
} extra;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void must(const lf_cudrv *d, const char *call, unsigned int r)
{
    if (r == 0) return;
    char why[256];
    lf_cudrv_explain(d, call, r, why, sizeof why);
    fprintf(stderr, "client_h2d: %s\n", why);
    exit(1);
}

/* GB/s of copying total bytes, slot by slot round the host buffer, into a
 * device slot ring, all on one stream; the best of three passes. */
static double rate(const lf_cudrv *d, const extra *x, lf_cu_stream st, lf_cu_ptr dev,
                   const unsigned char *host, size_t slot, size_t total)
{
    double best = 0;
    for (int pass = 0; pass < 3; pass++) {
        double t0 = now_s();
        for (size_t done = 0, i = 0; done < total; done += slot, i++)
            must(d, "cuMemcpyHtoDAsync",
                 d->memcpy_htod_async(dev + (i % 2) * slot, host + (i % RING_SLOTS) * slot,
                                      slot, st));
        must(d, "cuStreamSynchronize", x->stream_sync(st));
        double gbs = (double)total / (now_s() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}

int main(int argc, char **argv)
{
    size_t slot = (size_t)(argc > 1 ? atol(argv[1]) : 4) << 20;
    size_t total = (size_t)(argc > 2 ? atol(argv[2]) : 2048) << 20;
    char why[200];
    const lf_cudrv *d = lf_cudrv_get(why, sizeof why);
    int n = 0;
    if (!d || d->device_get_count(&n) != 0 || n == 0) {
        printf("client H2D: skipped: %s\n", d ? "no CUDA device" : why);
        return 0;
    }
    extra x;
    void *f[3] = {lf_cudrv_symbol("cuMemAllocHost_v2"), lf_cudrv_symbol("cuMemFreeHost"),
                  lf_cudrv_symbol("cuStreamSynchronize")};
    if (!f[0] || !f[1] || !f[2]) {
        printf("client H2D: skipped: the driver lacks cuMemAllocHost/cuStreamSynchronize\n");
        return 0;
    }
    memcpy(&x.alloc_host, &f[0], sizeof f[0]);
    memcpy(&x.free_host, &f[1], sizeof f[1]);
    memcpy(&x.stream_sync, &f[2], sizeof f[2]);

    lf_cu_device dev;
    lf_cu_ctx ctx;
    must(d, "cuDeviceGet", d->device_get(&dev, 0));
    must(d, "cuDevicePrimaryCtxRetain", d->primary_ctx_retain(&ctx, dev));
    must(d, "cuCtxSetCurrent", d->ctx_set_current(ctx));
    lf_cu_stream st;
    must(d, "cuStreamCreate", d->stream_create(&st, LF_CU_STREAM_NON_BLOCKING));
    lf_cu_ptr dbuf;
    must(d, "cuMemAlloc", d->mem_alloc(&dbuf, 2 * slot));

    /* The ring as the client sees it: a memfd written by "the server",
     * mapped writable as client/host.c maps it, registered read-only. */
    size_t ring_size = RING_SLOTS * slot;
    int fd = memfd_create("levelfeed-bench-ring", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)ring_size) != 0) { perror("memfd"); return 1; }
    unsigned char *ring = mmap(NULL, ring_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                               fd, 0);
    if (ring == MAP_FAILED) { perror("mmap"); return 1; }
    memset(ring, 0x5a, ring_size);
    must(d, "cuMemHostRegister",
         d->mem_host_register(ring, ring_size, LF_CU_MEMHOSTREGISTER_READ_ONLY));
    void *pinned;
    must(d, "cuMemAllocHost", x.alloc_host(&pinned, ring_size));
    memset(pinned, 0x5a, ring_size);
    unsigned char *pageable = malloc(ring_size);
    if (!pageable) { perror("malloc"); return 1; }
    memset(pageable, 0x5a, ring_size);

    double r_ring = rate(d, &x, st, dbuf, ring, slot, total);
    double r_pinned = rate(d, &x, st, dbuf, pinned, slot, total);
    double r_pageable = rate(d, &x, st, dbuf, pageable, slot, total);
    printf("client H2D, %zu MiB copies, %zu MiB per pass: registered read-only ring %.2f GB/s, "
           "cuMemAllocHost %.2f GB/s: %.2fx (target >= 0.8x); pageable (malloc) %.2f GB/s: "
           "the ring %.2fx it\n", slot >> 20, total >> 20, r_ring, r_pinned, r_ring / r_pinned,
           r_pageable, r_ring / r_pageable);

    d->mem_host_unregister(ring);
    x.free_host(pinned);
    free(pageable);
    d->mem_free(dbuf);
    d->stream_destroy(st);
    d->primary_ctx_release(dev);
    return 0;
}
