/*
 * client_gpu.h — the client's device path (gpu.c), internal to liblevelfeed:
 * a prefetch thread on top of the host path (client_host.h), used by
 * client.c once lf_client_use_device has chosen a device.
 */
#ifndef LF_CLIENT_GPU_H
#define LF_CLIENT_GPU_H

#include "client_host.h"

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
/* lf_eval_begin and lf_eval_next with a device: the trainer's thread
 * borrows the socket from the thread until lf_gpu_next (or the pass's
 * end), and each eval batch is copied into an eval slot of the device's;
 * LF_E_ORDER when the trainer holds them all. */
int lf_gpu_eval_begin(lf_gpu *g);
int lf_gpu_eval_next(lf_gpu *g, lf_batch *b, int timeout_ms);
/* lf_client_epoch_batches_wait with a device: the trainer's thread
 * borrows the socket for the wait, and gives it back. */
int64_t lf_gpu_epoch_batches_wait(lf_gpu *g, int64_t epoch, int timeout_ms);
/* Stops the thread and frees the device ring. Accepts NULL. */
void lf_gpu_close(lf_gpu *g);

#endif
