/*
 * gpu.c — the client's GPU path: batches land in device memory before the
 * trainer asks for them.
 *
 * The rank's shared-memory ring is registered with the driver as pinned,
 * read-only host memory (it is mapped read-only), so each copy is one DMA
 * straight out of the slot the server wrote: no staging copy on the host.
 * A prefetch thread owns the control socket from the first lf_next on: it
 * takes each ready host batch, copies the span of its tensors into the next
 * free device slot on its own non-blocking stream, waits for that copy and
 * gives the host slot back to the server at once, so the server refills the
 * host ring while the trainer still works on device copies.
 *
 * Device slots go round in order. The trainer releases one with the stream
 * that still reads it; an event recorded there makes the next copy into that
 * slot wait on the GPU (the CPU does not block), so a slot is never
 * overwritten under a running kernel. No device memory is allocated per
 * batch: the ring is one allocation at start.
 *
 * The trainer's step reports queue here, one entry per lf_report_step, and
 * the thread sends each as its own STEP; once the thread has ended (the
 * stream's end) the trainer's thread sends them itself.
 *
 * Evaluation passes (--eval-data) go through the trainer's thread: the
 * thread lends it the socket. lf_eval_begin and lf_eval_next ask for it
 * (lent); the thread stops at its next turn (parked: at most one socket
 * poll, POLL_MS, and one copy away) and waits, its training slots as they
 * are, until lf_next takes the socket back (or the pass ends). Meanwhile
 * the trainer's thread runs the host path's pass itself, as a host client
 * does, and copies each eval batch into eval slots of its own after the
 * training ones (the ring's eval slot count, 2), freeing the host slot at
 * once; training READYs that come meanwhile wait in the host path's lane.
 * So the training batches prefetched, their order and the trainer's
 * position are those without the pass. A lent socket also carries the
 * trainer's step reports directly (the thread is parked), after the ones
 * queued before.
 */
#include "client_gpu.h"

#include "cudrv.h"
#include "lf_layout.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POLL_MS 50               /* the thread's longest wait on the socket */
#define MAX_DEPTH 64
#define MAX_REPORTS 64           /* step reports queued for the thread */

enum { DS_FREE, DS_READY, DS_HELD };

typedef struct dslot {
    int state;
    int release_pending;         /* ev_released recorded on the trainer's stream */
    lf_cu_ptr mem;
    lf_cu_event ev_copied, ev_released;
    lf_batch b;                  /* what lf_next hands out; tensors -> t */
    lf_tensor t[LF_LAYOUT_MAX_TENSORS];
    char name[LF_LAYOUT_MAX_TENSORS][LF_LAYOUT_NAME_MAX];
    uint64_t shape[LF_LAYOUT_MAX_TENSORS][LF_LAYOUT_MAX_RANK];
} dslot;

struct lf_gpu {
    lf_client *c;
    const lf_cudrv *d;
    lf_cu_device dev;
    lf_cu_ctx ctx;               /* the device's primary context */
    lf_cu_stream stream;
    void *ring;                  /* the registered host ring */
    size_t ring_size;
    uint64_t slot_size;
    lf_cu_ptr mem;               /* depth + neval slots of slot_size bytes */
    uint32_t depth, fill, take;  /* next slot the thread fills / lf_next hands out */
    uint32_t neval;              /* eval slots, after the depth training ones */
    dslot *slots;
    pthread_t thread;
    int thread_started, ctx_retained, registered;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go;                      /* the trainer asked for a batch: START may go out */
    int stop;
    int ended, end_rc;           /* the thread stopped with end_rc (LF_E_END or an error) */
    int lent;                    /* the trainer's thread wants the socket (an eval pass) */
    int parked;                  /* the thread waits while lent: the socket is the trainer's */
    lf_step_report reports[MAX_REPORTS]; /* lf_report_step's, oldest first */
    uint32_t nreports;
    char why[256];
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 0 for a successful driver call, else -EIO with the call named in g->why. */
static int cu(lf_gpu *g, const char *call, lf_cu_result r)
{
    if (r == 0) return 0;
    lf_cudrv_explain(g->d, call, r, g->why, sizeof g->why);
    return -EIO;
}

static int setup_device(lf_gpu *g, int device)
{
    const lf_cudrv *d = g->d;
    int rc = cu(g, "cuDeviceGet", d->device_get(&g->dev, device));
    if (rc == 0) rc = cu(g, "cuDevicePrimaryCtxRetain", d->primary_ctx_retain(&g->ctx, g->dev));
    if (rc < 0) return rc;
    g->ctx_retained = 1;
    if ((rc = cu(g, "cuCtxSetCurrent", d->ctx_set_current(g->ctx))) < 0) return rc;
    int ro = 0;
    rc = cu(g, "cuDeviceGetAttribute",
            d->device_get_attribute(&ro, LF_CU_ATTR_READ_ONLY_HOST_REGISTER, g->dev));
    if (rc == 0 && !ro) {
        snprintf(g->why, sizeof g->why, "CUDA device %d cannot register read-only host "
                 "memory (the ring is mapped read-only)", device);
        return -ENODEV;
    }
    return rc;
}

static int setup_ring(lf_gpu *g)
{
    const lf_cudrv *d = g->d;
    lf_client_ring(g->c, &g->ring, &g->ring_size, &g->slot_size);
    int rc = cu(g, "cuMemHostRegister",
                d->mem_host_register(g->ring, g->ring_size, LF_CU_MEMHOSTREGISTER_READ_ONLY));
    if (rc < 0) return rc;
    g->registered = 1;
    uint32_t n = g->depth + g->neval;
    if ((rc = cu(g, "cuMemAlloc", d->mem_alloc(&g->mem, n * g->slot_size))) < 0) return rc;
    rc = cu(g, "cuStreamCreate", d->stream_create(&g->stream, LF_CU_STREAM_NON_BLOCKING));
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        dslot *s = &g->slots[i];
        s->mem = g->mem + i * g->slot_size;
        rc = cu(g, "cuEventCreate", d->event_create(&s->ev_copied, LF_CU_EVENT_DISABLE_TIMING));
        if (rc == 0)
            rc = cu(g, "cuEventCreate",
                    d->event_create(&s->ev_released, LF_CU_EVENT_DISABLE_TIMING));
    }
    return rc;
}

/* ---- the prefetch thread ------------------------------------------------ */

/* While the trainer's thread has the socket (an eval pass), waits until it
 * gives it back (under mu). */
static void park(lf_gpu *g)
{
    if (!g->lent || g->stop) return;
    g->parked = 1;
    pthread_cond_broadcast(&g->cv);
    while (g->lent && !g->stop) pthread_cond_wait(&g->cv, &g->mu);
    g->parked = 0;
}

/* Waits until there are step reports to send, or the trainer has asked
 * for a batch and slot s is free, parked meanwhile whenever the socket is
 * lent. Returns -1 on stop, 1 when s may be filled, 0 when only reports
 * wait. */
static int wait_for_work(lf_gpu *g, const dslot *s)
{
    pthread_mutex_lock(&g->mu);
    for (park(g); !g->stop && !g->nreports && (!g->go || s->state != DS_FREE); park(g))
        pthread_cond_wait(&g->cv, &g->mu);
    int rc = g->stop ? -1 : g->go && s->state == DS_FREE;
    pthread_mutex_unlock(&g->mu);
    return rc;
}

/* Takes the queued reports (under mu); the queue has room again. */
static uint32_t take_reports(lf_gpu *g, lf_step_report *out)
{
    uint32_t n = g->nreports;
    memcpy(out, g->reports, n * sizeof *out);
    g->nreports = 0;
    pthread_cond_broadcast(&g->cv);
    return n;
}

static int send_reports(lf_client *c, const lf_step_report *r, uint32_t n)
{
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++)
        rc = lf_client_host_report(c, &r[i]);
    return rc;
}

static int send_queued_reports(lf_gpu *g)
{
    lf_step_report r[MAX_REPORTS];
    pthread_mutex_lock(&g->mu);
    uint32_t n = take_reports(g, r);
    pthread_mutex_unlock(&g->mu);
    return send_reports(g->c, r, n);
}

/* Copies the span of hb's tensors into s and describes them there. */
static int copy_in(lf_gpu *g, dslot *s, const lf_batch *hb)
{
    const unsigned char *lo = NULL, *hi = NULL;
    for (uint32_t i = 0; i < hb->ntensors; i++) {
        const unsigned char *p = hb->tensors[i].host;
        if (!lo || p < lo) lo = p;
        if (!hi || p + hb->tensors[i].size > hi) hi = p + hb->tensors[i].size;
    }
    if (hb->ntensors > LF_LAYOUT_MAX_TENSORS || (size_t)(hi - lo) > g->slot_size) {
        snprintf(g->why, sizeof g->why, "batch %llu does not fit a device slot",
                 (unsigned long long)hb->seq);
        return LF_E_PROTOCOL;
    }
    const lf_cudrv *d = g->d;
    int rc = 0;
    if (s->release_pending)
        rc = cu(g, "cuStreamWaitEvent", d->stream_wait_event(g->stream, s->ev_released, 0));
    s->release_pending = 0;
    if (rc == 0 && hi > lo)
        rc = cu(g, "cuMemcpyHtoDAsync",
                d->memcpy_htod_async(s->mem, lo, (size_t)(hi - lo), g->stream));
    if (rc == 0) rc = cu(g, "cuEventRecord", d->event_record(s->ev_copied, g->stream));
    if (rc == 0) rc = cu(g, "cuEventSynchronize", d->event_synchronize(s->ev_copied));
    if (rc < 0) return rc;
    s->b = *hb;
    s->b.tensors = s->t;
    s->b.slot = (uint32_t)(s - g->slots);
    for (uint32_t i = 0; i < hb->ntensors; i++) {
        const lf_tensor *t = &hb->tensors[i];
        snprintf(s->name[i], LF_LAYOUT_NAME_MAX, "%s", t->name);
        memcpy(s->shape[i], t->shape, t->ndim * sizeof *t->shape);
        s->t[i] = *t;
        s->t[i].name = s->name[i];
        s->t[i].shape = s->shape[i];
        s->t[i].host = NULL; /* the host slot goes back to the server now */
        s->t[i].device = (void *)(uintptr_t)(s->mem + (lf_cu_ptr)((const unsigned char *)t->host - lo));
    }
    return 0;
}

static void publish(lf_gpu *g, dslot *s)
{
    pthread_mutex_lock(&g->mu);
    s->state = DS_READY;
    g->fill = (g->fill + 1) % g->depth;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void *prefetch_main(void *arg)
{
    lf_gpu *g = arg;
    int rc = cu(g, "cuCtxSetCurrent", g->d->ctx_set_current(g->ctx));
    while (rc == 0) {
        dslot *s = &g->slots[g->fill];
        int room = wait_for_work(g, s);
        if (room < 0) return NULL;
        if ((rc = send_queued_reports(g)) < 0 || !room) continue;
        lf_batch hb;
        rc = lf_client_host_next(g->c, &hb, POLL_MS);
        if (rc == LF_E_TIMEOUT) { rc = 0; continue; }
        if (rc < 0) break;
        rc = copy_in(g, s, &hb);
        int released = lf_client_host_release(g->c, &hb);
        if (rc == 0) rc = released;
        if (rc == 0) publish(g, s);
    }
    if (g->why[0]) lf_client_set_error(g->c, g->why);
    /* The reports queued so far go out (at the stream's end the server
     * still listens); ended is set with the queue empty, and from then on
     * lf_gpu_report sends them from the trainer's thread. */
    lf_step_report r[MAX_REPORTS];
    for (;;) {
        pthread_mutex_lock(&g->mu);
        uint32_t n = take_reports(g, r);
        if (n == 0) {
            g->ended = 1;
            g->end_rc = rc;
            pthread_mutex_unlock(&g->mu);
            break;
        }
        pthread_mutex_unlock(&g->mu);
        if (rc == LF_E_END) send_reports(g->c, r, n);
    }
    return NULL;
}

/* ---- the trainer's side ------------------------------------------------- */

int lf_gpu_open(lf_client *c, int device, uint32_t depth, lf_gpu **out, char *why,
                size_t cap)
{
    if (device < 0 || depth == 0 || depth > MAX_DEPTH) return -EINVAL;
    const lf_cudrv *d = lf_cudrv_get(why, cap);
    if (!d) return -ENODEV;
    int n = 0;
    if (d->device_get_count(&n) != 0 || device >= n) {
        snprintf(why, cap, "no CUDA device %d (%d present)", device, n);
        return -ENODEV;
    }
    lf_gpu *g = calloc(1, sizeof *g);
    if (!g) return -ENOMEM;
    g->c = c;
    g->d = d;
    g->depth = depth;
    g->neval = lf_client_host_eval_slots(c);
    pthread_mutex_init(&g->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    g->slots = calloc(depth + g->neval, sizeof *g->slots);
    int rc = g->slots ? setup_device(g, device) : -ENOMEM;
    if (rc == 0) rc = setup_ring(g);
    if (rc == 0) {
        rc = -pthread_create(&g->thread, NULL, prefetch_main, g);
        g->thread_started = rc == 0;
    }
    if (rc < 0) {
        snprintf(why, cap, "%s", g->why[0] ? g->why : "out of memory");
        lf_gpu_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

/* Waits for the cv until deadline_ns (0: forever); 1 when it passed. */
static int wait_until(lf_gpu *g, uint64_t deadline_ns)
{
    if (!deadline_ns) return pthread_cond_wait(&g->cv, &g->mu), 0;
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                          .tv_nsec = (long)(deadline_ns % 1000000000u)};
    return pthread_cond_timedwait(&g->cv, &g->mu, &ts) == ETIMEDOUT;
}

int lf_gpu_next(lf_gpu *g, lf_batch *b, int timeout_ms)
{
    uint64_t start = now_ns();
    uint64_t deadline = timeout_ms < 0 ? 0 : start + (uint64_t)timeout_ms * 1000000u;
    pthread_mutex_lock(&g->mu);
    if (!g->go || g->lent) { /* START may go out; a lent socket is the thread's again */
        g->go = 1;
        g->lent = 0;
        pthread_cond_broadcast(&g->cv);
    }
    dslot *s = &g->slots[g->take];
    if (s->state == DS_HELD && !g->ended) { /* the trainer holds every device slot */
        pthread_mutex_unlock(&g->mu);
        return LF_E_ORDER;
    }
    int late = 0;
    while (s->state != DS_READY && !g->ended && !late) late = wait_until(g, deadline);
    if (s->state != DS_READY) {
        int rc = g->ended ? g->end_rc : LF_E_TIMEOUT;
        pthread_mutex_unlock(&g->mu);
        return rc;
    }
    s->state = DS_HELD;
    *b = s->b;
    g->take = (g->take + 1) % g->depth;
    b->wait_ns = now_ns() - start;
    pthread_mutex_unlock(&g->mu);
    return 0;
}

int lf_gpu_release(lf_gpu *g, const lf_batch *b, void *stream)
{
    if (b->slot >= g->depth + g->neval) return -EINVAL;
    dslot *s = &g->slots[b->slot];
    pthread_mutex_lock(&g->mu);
    int held = s->state == DS_HELD && s->b.seq == b->seq;
    pthread_mutex_unlock(&g->mu);
    if (!held) return -EINVAL;
    /* The trainer's thread may have no current context (a fresh thread). */
    const lf_cudrv *d = g->d;
    char why[256];
    lf_cu_result r = d->ctx_set_current(g->ctx);
    if (r == 0) r = d->event_record(s->ev_released, (lf_cu_stream)stream);
    if (r != 0) {
        lf_cudrv_explain(d, "cuEventRecord (lf_release)", r, why, sizeof why);
        lf_client_set_error(g->c, why);
        return -EIO;
    }
    pthread_mutex_lock(&g->mu);
    s->release_pending = 1;
    s->state = DS_FREE;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return 0;
}

/* Whether the trainer's thread may use the socket: the thread has ended,
 * or waits while it is lent (under mu). Only the trainer's thread gives a
 * lent socket back, so this holds until it does. */
static int trainer_has_socket(const lf_gpu *g)
{
    return g->ended || (g->lent && g->parked);
}

int lf_gpu_report(lf_gpu *g, const lf_step_report *r)
{
    pthread_mutex_lock(&g->mu);
    /* A full queue waits for the thread: it wakes for reports, and sends
     * them between copies (at most a socket poll apart). */
    while (!trainer_has_socket(g) && g->nreports == MAX_REPORTS)
        pthread_cond_wait(&g->cv, &g->mu);
    int direct = trainer_has_socket(g);
    if (!direct) {
        g->reports[g->nreports++] = *r;
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
    if (!direct) return 0;
    int rc = send_queued_reports(g); /* queued before the socket was lent: in order */
    return rc < 0 ? rc : send_reports(g->c, r, 1);
}

/* ---- evaluation passes: the trainer's thread borrows the socket --------- */

/* Lends the socket to the trainer's thread and waits, until deadline_ns
 * (0: forever), for the thread to park (or to have ended): 0, or
 * LF_E_TIMEOUT with the loan still asked for (the thread parks at its next
 * turn; the next call finds it parked). Then sends the reports queued
 * before, so they keep their order. */
static int borrow(lf_gpu *g, uint64_t deadline_ns)
{
    pthread_mutex_lock(&g->mu);
    if (!g->lent) {
        g->lent = 1;
        pthread_cond_broadcast(&g->cv);
    }
    int late = 0;
    while (!trainer_has_socket(g) && !late) late = wait_until(g, deadline_ns);
    int has = trainer_has_socket(g);
    pthread_mutex_unlock(&g->mu);
    return has ? send_queued_reports(g) : LF_E_TIMEOUT;
}

/* The thread takes the socket again (a pass over or refused). */
static void give_back(lf_gpu *g)
{
    pthread_mutex_lock(&g->mu);
    g->lent = 0;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

int lf_gpu_eval_begin(lf_gpu *g)
{
    int rc = borrow(g, 0);
    if (rc == 0) rc = lf_client_host_eval_begin(g->c);
    if (rc < 0) give_back(g);
    return rc;
}

/* The first eval slot the trainer does not hold, or NULL. */
static dslot *free_eval_slot(lf_gpu *g)
{
    dslot *s = NULL;
    pthread_mutex_lock(&g->mu);
    for (uint32_t i = g->depth; i < g->depth + g->neval && !s; i++)
        if (g->slots[i].state == DS_FREE) s = &g->slots[i];
    pthread_mutex_unlock(&g->mu);
    return s;
}

/* Copies the host eval batch hb into s on the trainer's thread (the
 * thread is parked or has ended: the stream is free) and gives hb's host
 * slot back. A failure's text goes to the client (g->why is the thread's
 * otherwise). */
static int eval_copy(lf_gpu *g, dslot *s, const lf_batch *hb)
{
    int rc = cu(g, "cuCtxSetCurrent", g->d->ctx_set_current(g->ctx));
    if (rc == 0) rc = copy_in(g, s, hb);
    int released = lf_client_host_release(g->c, hb);
    if (rc < 0) {
        lf_client_set_error(g->c, g->why);
        g->why[0] = 0;
        return rc;
    }
    return released;
}

/* Milliseconds left until deadline_ns, rounded up; -1 (wait forever) for
 * a deadline of 0. */
static int ms_left(uint64_t deadline_ns)
{
    if (!deadline_ns) return -1;
    uint64_t now = now_ns();
    return now >= deadline_ns ? 0 : (int)((deadline_ns - now + 999999u) / 1000000u);
}

int lf_gpu_eval_next(lf_gpu *g, lf_batch *b, int timeout_ms)
{
    uint64_t start = now_ns();
    uint64_t deadline = timeout_ms < 0 ? 0 : start + (uint64_t)timeout_ms * 1000000u;
    int rc = borrow(g, deadline);
    if (rc < 0) return rc;
    dslot *s = free_eval_slot(g);
    /* Every eval slot held: the pass's end may still be told (as on the
     * host path, where the last batches may be held), a batch not. */
    if (!s && (rc = lf_client_host_eval_over(g->c)) <= 0) return rc < 0 ? rc : LF_E_ORDER;
    lf_batch hb;
    rc = lf_client_host_eval_next(g->c, &hb, ms_left(deadline));
    if (rc == 0) give_back(g); /* the pass is over: the thread prefetches again */
    if (rc <= 0) return rc;
    if ((rc = eval_copy(g, s, &hb)) < 0) return rc;
    pthread_mutex_lock(&g->mu);
    s->state = DS_HELD;
    *b = s->b;
    pthread_mutex_unlock(&g->mu);
    b->wait_ns = now_ns() - start;
    return 1;
}

/* The count may be known already (the thread read its EPOCH): the socket
 * is borrowed only where it is not, and given back unless an eval pass
 * had it lent already (lf_gpu_next takes it back then). */
int64_t lf_gpu_epoch_batches_wait(lf_gpu *g, int64_t epoch, int timeout_ms)
{
    int64_t n = lf_client_epoch_batches(g->c, epoch);
    if (n != -EAGAIN) return n;
    uint64_t deadline = timeout_ms < 0 ? 0 : now_ns() + (uint64_t)timeout_ms * 1000000u;
    pthread_mutex_lock(&g->mu);
    int was_lent = g->lent;
    pthread_mutex_unlock(&g->mu);
    int rc = borrow(g, deadline);
    if (rc == 0) n = lf_client_host_epoch_batches_wait(g->c, epoch, ms_left(deadline));
    if (!was_lent) give_back(g);
    return rc < 0 ? rc : n;
}

void lf_gpu_close(lf_gpu *g)
{
    if (!g) return;
    if (g->thread_started) {
        pthread_mutex_lock(&g->mu);
        g->stop = 1;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->thread, NULL);
        send_reports(g->c, g->reports, g->nreports); /* queued before the close */
    }
    const lf_cudrv *d = g->d;
    if (g->ctx_retained) {
        d->ctx_set_current(g->ctx);
        for (uint32_t i = 0; g->slots && i < g->depth + g->neval; i++) {
            if (g->slots[i].ev_copied) d->event_destroy(g->slots[i].ev_copied);
            if (g->slots[i].ev_released) d->event_destroy(g->slots[i].ev_released);
        }
        if (g->stream) d->stream_destroy(g->stream);
        if (g->mem) d->mem_free(g->mem);
        if (g->registered) d->mem_host_unregister(g->ring);
        d->primary_ctx_release(g->dev);
    }
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g->slots);
    free(g);
}
