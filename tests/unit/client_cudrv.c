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

#define SAME_TYPE(member, fn)                                                  \
    _Static_assert(__builtin_types_compatible_p(__typeof__(((lf_cudrv *)0)->member), \
                                                __typeof__(&fn)),              \
                   #member " differs from " #fn)
SAME_TYPE(init, cuInit);
SAME_TYPE(device_get_count, cuDeviceGetCount);
SAME_TYPE(device_get, cuDeviceGet);
SAME_TYPE(primary_ctx_retain, cuDevicePrimaryCtxRetain);
SAME_TYPE(primary_ctx_release, cuDevicePrimaryCtxRelease);
SAME_TYPE(ctx_set_current, cuCtxSetCurrent);
SAME_TYPE(mem_host_register, cuMemHostRegister);
SAME_TYPE(mem_host_unregister, cuMemHostUnregister);
SAME_TYPE(mem_alloc, cuMemAlloc);
SAME_TYPE(mem_free, cuMemFree);
SAME_TYPE(stream_create, cuStreamCreate);
SAME_TYPE(stream_destroy, cuStreamDestroy);
SAME_TYPE(stream_wait_event, cuStreamWaitEvent);
SAME_TYPE(memcpy_htod_async, cuMemcpyHtoDAsync);
SAME_TYPE(event_create, cuEventCreate);
SAME_TYPE(event_destroy, cuEventDestroy);
SAME_TYPE(event_record, cuEventRecord);
SAME_TYPE(event_synchronize, cuEventSynchronize);
SAME_TYPE(get_error_string, cuGetErrorString);
/* cuDeviceGetAttribute takes the enum; cudrv.h passes its value. */
_Static_assert(sizeof(CUdevice_attribute) == sizeof(unsigned int), "attribute size");
_Static_assert(LF_CU_STREAM_NON_BLOCKING == CU_STREAM_NON_BLOCKING, "stream flag");
_Static_assert(LF_CU_EVENT_DISABLE_TIMING == CU_EVENT_DISABLE_TIMING, "event flag");
_Static_assert(LF_CU_MEMHOSTREGISTER_READ_ONLY == CU_MEMHOSTREGISTER_READ_ONLY, "register flag");
_Static_assert(LF_CU_ATTR_READ_ONLY_HOST_REGISTER ==
                   CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, "attribute");

#define NAME_(x) #x
#define NAME(x) NAME_(x)
static void check_names(void)
{
    /* The names cudrv.c passes to dlsym, next to what cuda.h calls. */
    ASSERT_STR_EQ(NAME(cuDevicePrimaryCtxRelease), "cuDevicePrimaryCtxRelease_v2");
    ASSERT_STR_EQ(NAME(cuMemHostRegister), "cuMemHostRegister_v2");
    ASSERT_STR_EQ(NAME(cuMemAlloc), "cuMemAlloc_v2");
    ASSERT_STR_EQ(NAME(cuMemFree), "cuMemFree_v2");
    ASSERT_STR_EQ(NAME(cuStreamDestroy), "cuStreamDestroy_v2");
    ASSERT_STR_EQ(NAME(cuMemcpyHtoDAsync), "cuMemcpyHtoDAsync_v2");
    ASSERT_STR_EQ(NAME(cuEventDestroy), "cuEventDestroy_v2");
    ASSERT_STR_EQ(NAME(cuStreamWaitEvent), "cuStreamWaitEvent");
    ASSERT_STR_EQ(NAME(cuEventRecord), "cuEventRecord");
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
