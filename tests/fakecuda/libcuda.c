/*
 * libcuda.c — a stand-in for the NVIDIA driver (libcuda.so.1) with host
 * memory as "device" memory, so the client's GPU path (client/gpu.c: its
 * thread, slot order, releases, saved position, end of stream) runs under
 * the sanitizers on machines without a GPU. tests/e2e/client_gpu_fake.sh
 * puts it first on LD_LIBRARY_PATH for unit/client_gpu; on a GPU machine
 * the same test runs against the real driver.
 *
 * Only the calls the client and that test make exist. Copies run when they
 * are issued (a stream is in order anyway) after a short sleep, so the
 * prefetch thread and the trainer really interleave; the checks that do
 * not depend on timing are that registration asks for a read-only mapping
 * and that every copy reads registered memory and writes allocated memory.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OK 0u
#define E_INVALID_VALUE 1u
#define E_NOT_REGISTERED 712u   /* CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED */
#define READ_ONLY_FLAG 0x08u
#define MAX_RANGES 64

typedef struct range { uintptr_t lo, hi; } range;
static range registered[MAX_RANGES], allocated[MAX_RANGES];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int ctx_token; /* the one "primary context" */

/* The driver's exports: every function here is looked up with dlsym. */
unsigned int cuInit(unsigned int flags);
unsigned int cuDeviceGetCount(int *n);
unsigned int cuDeviceGet(int *dev, int ordinal);
unsigned int cuDeviceGetAttribute(int *v, unsigned int attr, int dev);
unsigned int cuDevicePrimaryCtxRetain(void **ctx, int dev);
unsigned int cuDevicePrimaryCtxRelease_v2(int dev);
unsigned int cuCtxSetCurrent(void *ctx);
unsigned int cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags);
unsigned int cuMemHostUnregister(void *p);
unsigned int cuMemAlloc_v2(unsigned long long *dptr, size_t bytes);
unsigned int cuMemFree_v2(unsigned long long dptr);
unsigned int cuStreamCreate(void **s, unsigned int flags);
unsigned int cuStreamDestroy_v2(void *s);
unsigned int cuStreamWaitEvent(void *s, void *e, unsigned int flags);
unsigned int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src, size_t n, void *s);
unsigned int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n);
unsigned int cuEventCreate(void **e, unsigned int flags);
unsigned int cuEventDestroy_v2(void *e);
unsigned int cuEventRecord(void *e, void *s);
unsigned int cuEventSynchronize(void *e);
unsigned int cuGetErrorString(unsigned int r, const char **text);

static int add(range *set, uintptr_t lo, size_t n)
{
    for (int i = 0; i < MAX_RANGES; i++)
        if (!set[i].hi) {
            set[i] = (range){lo, lo + n};
            return 0;
        }
    return -1;
}

static int drop(range *set, uintptr_t lo)
{
    for (int i = 0; i < MAX_RANGES; i++)
        if (set[i].hi && set[i].lo == lo) {
            set[i] = (range){0, 0};
            return 0;
        }
    return -1;
}

static int inside(const range *set, uintptr_t p, size_t n)
{
    for (int i = 0; i < MAX_RANGES; i++)
        if (set[i].hi && p >= set[i].lo && p + n <= set[i].hi) return 1;
    return 0;
}

unsigned int cuInit(unsigned int flags) { return flags ? E_INVALID_VALUE : OK; }
unsigned int cuDeviceGetCount(int *n) { *n = 1; return OK; }
unsigned int cuDeviceGet(int *dev, int ordinal)
{
    if (ordinal != 0) return E_INVALID_VALUE;
    *dev = 0;
    return OK;
}
unsigned int cuDeviceGetAttribute(int *v, unsigned int attr, int dev)
{
    (void)dev;
    *v = attr == 113u; /* read-only host registration supported */
    return OK;
}
unsigned int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    (void)dev;
    *ctx = &ctx_token;
    return OK;
}
unsigned int cuDevicePrimaryCtxRelease_v2(int dev) { (void)dev; return OK; }
unsigned int cuCtxSetCurrent(void *ctx) { return ctx == &ctx_token ? OK : E_INVALID_VALUE; }

unsigned int cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags)
{
    if (!(flags & READ_ONLY_FLAG)) return E_INVALID_VALUE; /* the ring is read-only */
    pthread_mutex_lock(&mu);
    int rc = add(registered, (uintptr_t)p, bytes);
    pthread_mutex_unlock(&mu);
    return rc ? E_INVALID_VALUE : OK;
}
unsigned int cuMemHostUnregister(void *p)
{
    pthread_mutex_lock(&mu);
    int rc = drop(registered, (uintptr_t)p);
    pthread_mutex_unlock(&mu);
    return rc ? E_NOT_REGISTERED : OK;
}

unsigned int cuMemAlloc_v2(unsigned long long *dptr, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) return 2u; /* CUDA_ERROR_OUT_OF_MEMORY */
    pthread_mutex_lock(&mu);
    int rc = add(allocated, (uintptr_t)p, bytes);
    pthread_mutex_unlock(&mu);
    if (rc) { free(p); return E_INVALID_VALUE; }
    *dptr = (uintptr_t)p;
    return OK;
}
unsigned int cuMemFree_v2(unsigned long long dptr)
{
    pthread_mutex_lock(&mu);
    int rc = drop(allocated, (uintptr_t)dptr);
    pthread_mutex_unlock(&mu);
    if (rc) return E_INVALID_VALUE;
    free((void *)(uintptr_t)dptr);
    return OK;
}

unsigned int cuStreamCreate(void **s, unsigned int flags) { (void)flags; *s = malloc(1); return OK; }
unsigned int cuStreamDestroy_v2(void *s) { free(s); return OK; }
unsigned int cuStreamWaitEvent(void *s, void *e, unsigned int flags)
{
    return s && e && !flags ? OK : E_INVALID_VALUE;
}

unsigned int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src, size_t n, void *s)
{
    (void)s;
    pthread_mutex_lock(&mu);
    int ok = inside(registered, (uintptr_t)src, n) && inside(allocated, (uintptr_t)dst, n);
    pthread_mutex_unlock(&mu);
    if (!ok) return E_NOT_REGISTERED;
    nanosleep(&(struct timespec){0, 200000}, NULL); /* a DMA takes a while */
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}
unsigned int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n)
{
    pthread_mutex_lock(&mu);
    int ok = inside(allocated, (uintptr_t)src, n);
    pthread_mutex_unlock(&mu);
    if (!ok) return E_INVALID_VALUE;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return OK;
}

unsigned int cuEventCreate(void **e, unsigned int flags) { (void)flags; *e = malloc(1); return OK; }
unsigned int cuEventDestroy_v2(void *e) { free(e); return OK; }
unsigned int cuEventRecord(void *e, void *s) { (void)s; return e ? OK : E_INVALID_VALUE; }
unsigned int cuEventSynchronize(void *e) { return e ? OK : E_INVALID_VALUE; }

unsigned int cuGetErrorString(unsigned int r, const char **text)
{
    *text = r == E_NOT_REGISTERED ? "host memory not registered (fake driver)"
                                  : "error (fake driver)";
    return OK;
}
