/*
 * cudrv.c — loads the CUDA driver API from libcuda.so.1 once per process
 * (see cudrv.h for why it is loaded at run time).
 *
 * The symbol names are the driver's exported ones: several calls carry a
 * _v2 suffix in the library, which cuda.h hides behind macros.
 */
#include "cudrv.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static lf_cudrv drv;
static const lf_cudrv *loaded;
static void *driver_lib;
static char load_error[160];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* tests/unit/client_cudrv checks each name against cuda.h's. */
const lf_cudrv_sym lf_cudrv_syms[LF_CUDRV_NSYMS] = {
    {"cuInit", offsetof(lf_cudrv, init)},
    {"cuDeviceGetCount", offsetof(lf_cudrv, device_get_count)},
    {"cuDeviceGet", offsetof(lf_cudrv, device_get)},
    {"cuDeviceGetAttribute", offsetof(lf_cudrv, device_get_attribute)},
    {"cuDevicePrimaryCtxRetain", offsetof(lf_cudrv, primary_ctx_retain)},
    {"cuDevicePrimaryCtxRelease_v2", offsetof(lf_cudrv, primary_ctx_release)},
    {"cuCtxSetCurrent", offsetof(lf_cudrv, ctx_set_current)},
    {"cuMemHostRegister_v2", offsetof(lf_cudrv, mem_host_register)},
    {"cuMemHostUnregister", offsetof(lf_cudrv, mem_host_unregister)},
    {"cuMemAlloc_v2", offsetof(lf_cudrv, mem_alloc)},
    {"cuMemFree_v2", offsetof(lf_cudrv, mem_free)},
    {"cuStreamCreate", offsetof(lf_cudrv, stream_create)},
    {"cuStreamDestroy_v2", offsetof(lf_cudrv, stream_destroy)},
    {"cuStreamWaitEvent", offsetof(lf_cudrv, stream_wait_event)},
    {"cuMemcpyHtoDAsync_v2", offsetof(lf_cudrv, memcpy_htod_async)},
    {"cuEventCreate", offsetof(lf_cudrv, event_create)},
    {"cuEventDestroy_v2", offsetof(lf_cudrv, event_destroy)},
    {"cuEventRecord", offsetof(lf_cudrv, event_record)},
    {"cuEventSynchronize", offsetof(lf_cudrv, event_synchronize)},
    {"cuGetErrorString", offsetof(lf_cudrv, get_error_string)},
};

/* dlsym into a function-pointer slot: POSIX guarantees the conversion. */
static int bind(void *lib, const char *name, void *slot)
{
    void *f = dlsym(lib, name);
    if (!f) {
        snprintf(load_error, sizeof load_error, "libcuda.so.1 has no %s", name);
        return -1;
    }
    memcpy(slot, &f, sizeof f);
    return 0;
}

static void load(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(load_error, sizeof load_error, "no NVIDIA driver: %s", dlerror());
        return;
    }
    for (size_t i = 0; i < LF_CUDRV_NSYMS; i++)
        if (bind(lib, lf_cudrv_syms[i].name, (char *)&drv + lf_cudrv_syms[i].offset) != 0) return;
    lf_cu_result r = drv.init(0);
    if (r != 0) {
        lf_cudrv_explain(&drv, "cuInit", r, load_error, sizeof load_error);
        return;
    }
    driver_lib = lib; /* open for the process's life */
    loaded = &drv;
}

const lf_cudrv *lf_cudrv_get(char *why, size_t cap)
{
    pthread_once(&once, load);
    if (!loaded && why && cap) snprintf(why, cap, "%s", load_error);
    return loaded;
}

void *lf_cudrv_symbol(const char *name)
{
    pthread_once(&once, load);
    return loaded ? dlsym(driver_lib, name) : NULL;
}

void lf_cudrv_explain(const lf_cudrv *d, const char *call, lf_cu_result r, char *why,
                      size_t cap)
{
    const char *text = NULL;
    if (d->get_error_string(r, &text) != 0 || !text) text = "unknown error";
    snprintf(why, cap, "%s: %s (CUDA error %u)", call, text, r);
}
