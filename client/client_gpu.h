/*
 * client_gpu.h — what client.c and gpu.c share (internal to liblevelfeed).
 *
 * Once a client uses a device, its prefetch thread (gpu.c) is the only
 * caller of the host-side functions below: it owns the control socket, so
 * the trainer's thread never touches it and the client stays single-owner,
 * but for a failure's text, which both threads record (under a lock).
 */
#ifndef LF_CLIENT_GPU_H
#define LF_CLIENT_GPU_H

#include "levelfeed.h"

/* Host side of client.c, as lf_next / lf_release / lf_report_step were
 * before a device was set. */
int lf_client_host_next(lf_client *c, lf_batch *b, int timeout_ms);
int lf_client_host_release(lf_client *c, const lf_batch *b);
/* A STEP report of the trainer's step (epoch, step): its compute time and
 * the data wait of the lf_next that gave it the batch. */
typedef struct lf_step_report {
    uint32_t epoch;
    uint64_t step, compute_ns, wait_ns;
} lf_step_report;
int lf_client_host_report(lf_client *c, const lf_step_report *r);
/* The mapped ring and its slot size. */
void lf_client_ring(const lf_client *c, void **base, size_t *size, uint64_t *slot_size);
/* Records a failure's text, from either thread; lf_client_error shows it
 * once the trainer's current or next call returns. */
void lf_client_set_error(lf_client *c, const char *text);

typedef struct lf_gpu lf_gpu;

/* Registers the ring, allocates depth device slots, starts the prefetch
 * thread. Returns 0, -ENODEV (no driver or device; reason in why[]),
 * -EINVAL (bad device or depth), -EIO (a CUDA call failed). */
int lf_gpu_open(lf_client *c, int device, uint32_t depth, lf_gpu **out, char *why,
                size_t cap);
/* As lf_next; LF_E_ORDER when the trainer holds every device slot. */
int lf_gpu_next(lf_gpu *g, lf_batch *b, int timeout_ms);
int lf_gpu_release(lf_gpu *g, const lf_batch *b, void *stream);
/* Queues a report for the thread (each goes out as its own STEP). */
int lf_gpu_report(lf_gpu *g, const lf_step_report *r);
/* Stops the thread and frees the device ring. Accepts NULL. */
void lf_gpu_close(lf_gpu *g);

#endif
