/*
 * client.c — liblevelfeed's entry points that take the host path or the
 * device path: the top of the client's layers (client_host.h).
 *
 * Until lf_client_use_device, each call goes to the host path (host.c);
 * after it, to the device path (gpu.c), whose prefetch thread then runs the
 * host path itself. What stays here is the trainer's side of the stream:
 * its position (what lf_state_save saves), its last batch (what
 * lf_report_step reports on) and the failure text it reads, fixed as each
 * of its calls returns.
 */
#include "levelfeed.h"

#include "client_gpu.h"
#include "client_host.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Returns rc to the trainer with the failure text as it stands now: the
 * prefetch thread may record one at any time, and the copy lf_client_error
 * hands out must stay put until the trainer's next call. */
static int to_trainer(lf_client *c, int rc)
{
    pthread_mutex_lock(&c->err_mu);
    memcpy(c->err_seen, c->err, sizeof c->err_seen);
    pthread_mutex_unlock(&c->err_mu);
    return rc;
}

/* The trainer's side of the stream (with a device, the prefetch thread
 * runs ahead of it): where a saved state resumes, what a step report is
 * about. Only the trainer's thread touches these. */
static void trainer_got(lf_client *c, const lf_batch *b, uint64_t start_ns)
{
    c->got = 1;
    c->last_start_ns = start_ns;
    c->last_epoch = b->epoch;
    c->last_step = b->step;
    c->last_wait_ns = b->wait_ns;
    c->pos_epoch = b->epoch;
    c->pos_step = b->step + 1;
}

int lf_next(lf_client *c, lf_batch *b, int timeout_ms)
{
    c->asked = 1;
    uint64_t start = lf_client_now_ns();
    int rc = c->gpu ? lf_gpu_next(c->gpu, b, timeout_ms) : lf_client_host_next(c, b, timeout_ms);
    if (rc == LF_E_ORDER)
        lf_client_set_error(c, "every slot holds a batch not released yet: lf_release one first");
    if (rc == LF_E_TIMEOUT) lf_client_set_timeout_error(c, timeout_ms);
    if (rc == 0) trainer_got(c, b, start);
    if (rc == LF_E_END) c->saw_end = 1;
    return to_trainer(c, rc);
}

int lf_eval_begin(lf_client *c)
{
    return to_trainer(c, c->gpu ? lf_gpu_eval_begin(c->gpu) : lf_client_host_eval_begin(c));
}

/* The eval batch does not move the trainer's position (trainer_got).
 * Without a pass the call is refused here: a device's thread is not
 * stopped for it (eval_on is the trainer's thread's alone to write). */
int lf_eval_next(lf_client *c, lf_batch *b, int timeout_ms)
{
    int rc = !c->eval_on ? LF_E_ORDER
             : c->gpu    ? lf_gpu_eval_next(c->gpu, b, timeout_ms)
                         : lf_client_host_eval_next(c, b, timeout_ms);
    if (rc == LF_E_TIMEOUT) lf_client_set_timeout_error(c, timeout_ms);
    return to_trainer(c, rc);
}

int lf_client_use_device(lf_client *c, int device, uint32_t depth)
{
    if (c->asked || c->gpu || c->eval_on) return LF_E_ORDER; /* eval batches held in host slots */
    char why[256] = "";
    int rc = lf_gpu_open(c, device >= 0 ? device : c->device, depth ? depth : 2, &c->gpu, why,
                         sizeof why);
    if (rc < 0) lf_client_set_error(c, why[0] ? why : lf_strerror(rc));
    return to_trainer(c, rc);
}

int lf_release_stream(lf_client *c, const lf_batch *b, void *stream)
{
    return to_trainer(c, c->gpu ? lf_gpu_release(c->gpu, b, stream)
                                : lf_client_host_release(c, b));
}

int lf_release(lf_client *c, const lf_batch *b)
{
    return lf_release_stream(c, b, NULL);
}

int lf_report_step_sync(lf_client *c, uint64_t compute_ns, uint64_t sync_ns)
{
    if (!c->got) return LF_E_ORDER; /* no step to report on yet */
    lf_step_report r = {.epoch = c->last_epoch, .step = c->last_step, .compute_ns = compute_ns,
                        .sync_ns = sync_ns, .wait_ns = c->last_wait_ns,
                        .start_ns = c->last_start_ns};
    return c->gpu ? lf_gpu_report(c->gpu, &r) : lf_client_host_report(c, &r);
}

int lf_report_step(lf_client *c, uint64_t compute_ns)
{
    return lf_report_step_sync(c, compute_ns, LF_WIRE_UNKNOWN);
}

int64_t lf_client_epoch_batches_wait(lf_client *c, int64_t epoch, int timeout_ms)
{
    int64_t n = c->gpu ? lf_gpu_epoch_batches_wait(c->gpu, epoch, timeout_ms)
                       : lf_client_host_epoch_batches_wait(c, epoch, timeout_ms);
    if (n == LF_E_TIMEOUT)
        lf_client_set_error(c, "the server did not tell the epoch's batch count in time "
                               "(it counts a large dataset's first epoch while serving it)");
    return n < 0 ? to_trainer(c, (int)n) : n;
}

int lf_client_report(lf_client *c, char *buf, size_t cap, int timeout_ms)
{
    if (!c->saw_end) return LF_E_ORDER; /* a device's thread may still use the socket */
    return to_trainer(c, lf_client_host_ask_report(c, buf, cap, timeout_ms));
}

/* path made absolute (relative to the working directory: the server
 * writes it, from its own) into out; "" for NULL. 0 or -errno. */
static int absolute(const char *path, char out[LF_WIRE_TRACE_PATH_MAX])
{
    out[0] = 0;
    if (!path) return 0;
    if (!path[0]) return -EINVAL;
    char cwd[LF_WIRE_TRACE_PATH_MAX] = "";
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd)) return -errno;
    int n = snprintf(out, LF_WIRE_TRACE_PATH_MAX, "%s%s%s", cwd, cwd[0] ? "/" : "", path);
    return n < LF_WIRE_TRACE_PATH_MAX ? 0 : -ENAMETOOLONG;
}

int lf_client_trace(lf_client *c, const char *trace_path, const char *chart_path,
                    int timeout_ms)
{
    if (c->gpu && !c->saw_end) return LF_E_ORDER; /* the device's thread has the socket */
    char trace[LF_WIRE_TRACE_PATH_MAX], chart[LF_WIRE_TRACE_PATH_MAX];
    int rc = !trace_path && !chart_path ? -EINVAL : absolute(trace_path, trace);
    if (rc == 0) rc = absolute(chart_path, chart);
    if (rc < 0) return rc;
    return to_trainer(c, lf_client_host_ask_trace(c, trace, chart, timeout_ms));
}

void lf_client_close(lf_client *c)
{
    if (!c) return;
    lf_gpu_close(c->gpu); /* stops its thread: the socket is ours again */
    lf_client_host_close(c);
}

int lf_state_restore(lf_client *c, const void *buf, size_t len)
{
    return to_trainer(c, lf_client_host_state_restore(c, buf, len));
}
