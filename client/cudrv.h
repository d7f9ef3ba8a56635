/*
 * cudrv.h — the few CUDA driver API calls the client's GPU path makes,
 * loaded at run time from libcuda.so.1 (internal to liblevelfeed).
 *
 * Why the driver API through dlopen, not the CUDA runtime at link time:
 * liblevelfeed then builds and runs the same with or without a CUDA
 * toolkit; the GPU path works wherever an NVIDIA driver is installed, and
 * the driver's stable soname works with whatever CUDA runtime the trainer
 * (PyTorch, the harness) uses. The primary context is the one the runtime
 * uses too, so streams and device pointers are interchangeable with it.
 *
 * The types below use the driver's own struct tags and integer types, so
 * tests/unit/client_cudrv.c can check every pointer type against <cuda.h>
 * where the toolkit is installed.
 */
#ifndef LF_CUDRV_H
#define LF_CUDRV_H

#include <stddef.h>

typedef unsigned int lf_cu_result;       /* CUresult; 0 is success */
typedef int lf_cu_device;                /* CUdevice */
typedef unsigned long long lf_cu_ptr;    /* CUdeviceptr */
typedef struct CUctx_st *lf_cu_ctx;      /* CUcontext */
typedef struct CUstream_st *lf_cu_stream; /* CUstream */
typedef struct CUevent_st *lf_cu_event;  /* CUevent */

/* Flag and attribute values from cuda.h (checked by the same test). */
#define LF_CU_STREAM_NON_BLOCKING 0x1u
#define LF_CU_EVENT_DISABLE_TIMING 0x2u
#define LF_CU_MEMHOSTREGISTER_READ_ONLY 0x08u
#define LF_CU_ATTR_READ_ONLY_HOST_REGISTER 113u

typedef struct lf_cudrv {
    lf_cu_result (*init)(unsigned int flags);
    lf_cu_result (*device_get_count)(int *count);
    lf_cu_result (*device_get)(lf_cu_device *dev, int ordinal);
    lf_cu_result (*device_get_attribute)(int *value, unsigned int attr, lf_cu_device dev);
    lf_cu_result (*primary_ctx_retain)(lf_cu_ctx *ctx, lf_cu_device dev);
    lf_cu_result (*primary_ctx_release)(lf_cu_device dev);
    lf_cu_result (*ctx_set_current)(lf_cu_ctx ctx);
    lf_cu_result (*mem_host_register)(void *p, size_t bytes, unsigned int flags);
    lf_cu_result (*mem_host_unregister)(void *p);
    lf_cu_result (*mem_alloc)(lf_cu_ptr *dptr, size_t bytes);
    lf_cu_result (*mem_free)(lf_cu_ptr dptr);
    lf_cu_result (*stream_create)(lf_cu_stream *s, unsigned int flags);
    lf_cu_result (*stream_destroy)(lf_cu_stream s);
    lf_cu_result (*stream_wait_event)(lf_cu_stream s, lf_cu_event e, unsigned int flags);
    lf_cu_result (*memcpy_htod_async)(lf_cu_ptr dst, const void *src, size_t bytes,
                                      lf_cu_stream s);
    lf_cu_result (*event_create)(lf_cu_event *e, unsigned int flags);
    lf_cu_result (*event_destroy)(lf_cu_event e);
    lf_cu_result (*event_record)(lf_cu_event e, lf_cu_stream s);
    lf_cu_result (*event_synchronize)(lf_cu_event e);
    lf_cu_result (*get_error_string)(lf_cu_result r, const char **text);
} lf_cudrv;

/* Where load() finds each member: the driver's exported name (several carry
 * a _v2 suffix that cuda.h hides behind macros) and the member's offset. */
typedef struct lf_cudrv_sym {
    const char *name;
    size_t offset;
} lf_cudrv_sym;
#define LF_CUDRV_NSYMS (sizeof(lf_cudrv) / sizeof(void (*)(void)))
extern const lf_cudrv_sym lf_cudrv_syms[LF_CUDRV_NSYMS];

/* The process's driver table, loaded and cuInit'ed once. Returns NULL and
 * a reason in why[] when there is no usable driver (no libcuda.so.1, a
 * missing symbol, cuInit failing: no device or no kernel module). */
const lf_cudrv *lf_cudrv_get(char *why, size_t cap);

/* Any other symbol of the loaded driver (NULL when none is loaded or it
 * lacks the name): what tests and benchmarks need beyond the table. */
void *lf_cudrv_symbol(const char *name);

/* "cuXxx: the driver's text" for a failed call, into why[]. */
void lf_cudrv_explain(const lf_cudrv *d, const char *call, lf_cu_result r, char *why,
                      size_t cap);

#endif
