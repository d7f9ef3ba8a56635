/*
 * client_cudrv.c — the client's run-time CUDA driver table (client/cudrv.h).
 *
 * Where the CUDA toolkit's <cuda.h> is available (CUDA=1 builds pass
 * LF_HAVE_CUDA_H), every function-pointer type, flag and attribute value of
 * cudrv.h is checked against the driver's own declarations at compile time,
 * and each symbol name cudrv.c looks up against the name cuda.h maps the
 * call to (several carry a _v2 suffix). At run time: without a driver the
 * table is NULL with a reason naming libcuda.so.1; with one it is complete.
 */
#include "cudrv.h"
#include "test.h"

#ifdef LF_HAVE_CUDA_H
#include <cuda.h>

/* cuDeviceGetAttribute takes the enum; cudrv.h passes its value. */
_Static_assert(sizeof(CUdevice_attribute) == sizeof(unsigned int), "attribute size");
_Static_assert(LF_CU_STREAM_NON_BLOCKING == CU_STREAM_NON_BLOCKING, "stream flag");
_Static_assert(LF_CU_EVENT_DISABLE_TIMING == CU_EVENT_DISABLE_TIMING, "event flag");
_Static_assert(LF_CU_MEMHOSTREGISTER_READ_ONLY == CU_MEMHOSTREGISTER_READ_ONLY, "register flag");
_Static_assert(LF_CU_ATTR_READ_ONLY_HOST_REGISTER ==
                   CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, "attribute");

#define NAME_(x) #x
#define NAME(x) NAME_(x)

/* The name cudrv.c's table gives the member at `offset`. */
static const char *table_name(size_t offset)
{
    for (size_t i = 0; i < LF_CUDRV_NSYMS; i++)
        if (lf_cudrv_syms[i].offset == offset) return lf_cudrv_syms[i].name;
    return "(not in the table)";
}

/* Member `member` has fn's type, and cudrv.c looks it up by the name cuda.h
 * maps fn to (e.g. cuMemAlloc_v2). */
#define SAME_NAME(member, fn) ASSERT_STR_EQ(table_name(offsetof(lf_cudrv, member)), NAME(fn))
#define SAME(member, fn)                                                       \
    do {                                                                       \
        _Static_assert(__builtin_types_compatible_p(                           \
                           __typeof__(((lf_cudrv *)0)->member), __typeof__(&fn)), \
                       #member " differs from " #fn);                          \
        SAME_NAME(member, fn);                                                 \
    } while (0)

static void check_names(void)
{
    SAME(init, cuInit);
    SAME(device_get_count, cuDeviceGetCount);
    SAME(device_get, cuDeviceGet);
    SAME_NAME(device_get_attribute, cuDeviceGetAttribute); /* its enum is an int here */
    SAME(primary_ctx_retain, cuDevicePrimaryCtxRetain);
    SAME(primary_ctx_release, cuDevicePrimaryCtxRelease);
    SAME(ctx_set_current, cuCtxSetCurrent);
    SAME(mem_host_register, cuMemHostRegister);
    SAME(mem_host_unregister, cuMemHostUnregister);
    SAME(mem_alloc, cuMemAlloc);
    SAME(mem_free, cuMemFree);
    SAME(stream_create, cuStreamCreate);
    SAME(stream_destroy, cuStreamDestroy);
    SAME(stream_wait_event, cuStreamWaitEvent);
    SAME(memcpy_htod_async, cuMemcpyHtoDAsync);
    SAME(event_create, cuEventCreate);
    SAME(event_destroy, cuEventDestroy);
    SAME(event_record, cuEventRecord);
    SAME(event_synchronize, cuEventSynchronize);
    SAME(get_error_string, cuGetErrorString);
    ASSERT_EQ(LF_CUDRV_NSYMS, 20); /* a member added to cudrv.h is added here too */
    printf("cudrv.h: types, flags and symbol names match <cuda.h> %d\n", CUDA_VERSION);
}
#else
static void check_names(void)
{
    printf("cudrv.h: not checked against <cuda.h> (built without the CUDA toolkit)\n");
}
#endif

int main(void)
{
    check_names();
    char why[200] = "";
    const lf_cudrv *d = lf_cudrv_get(why, sizeof why);
    const lf_cudrv *again = lf_cudrv_get(NULL, 0);
    ASSERT_TRUE(d == again); /* loaded once */
    if (!d) {
        ASSERT_TRUE(strstr(why, "libcuda.so.1") || strstr(why, "cuInit"));
        ASSERT_TRUE(lf_cudrv_symbol("cuInit") == NULL);
        printf("no driver here: %s\n", why);
        return 0;
    }
    const void *const *fn = (const void *const *)d;
    for (size_t i = 0; i < sizeof *d / sizeof(void *); i++) ASSERT_TRUE(fn[i] != NULL);
    ASSERT_TRUE(lf_cudrv_symbol("cuMemcpyDtoH_v2") != NULL);
    ASSERT_TRUE(lf_cudrv_symbol("no_such_symbol") == NULL);
    int n = -1;
    ASSERT_EQ(d->device_get_count(&n), 0);
    printf("driver loaded: %d device(s)\n", n);
    return 0;
}
