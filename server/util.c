/*
 * util.c — what every thread of lf-server uses: the clock, the fatal
 * error that stops the server, the control thread's wake-up and the
 * counters' updates. It calls no other file of server/, so each of them
 * may call it.
 */
#include "srv.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

uint32_t srv_ring_slots(const srv *s)
{
    return s->cfg.slots + s->eval_slots;
}

uint64_t srv_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void srv_fail(srv *s, const char *fmt, ...)
{
    pthread_mutex_lock(&s->mu);
    if (!s->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->fail_msg, sizeof s->fail_msg, fmt, ap);
        va_end(ap);
        s->failed = 1;
    }
    s->stop = 1;
    pthread_cond_broadcast(&s->cv_plan);
    pthread_cond_broadcast(&s->cv_read);
    pthread_cond_broadcast(&s->cv_work);
    pthread_cond_broadcast(&s->cv_catchup);
    pthread_cond_broadcast(&s->cv_decode);
    pthread_mutex_unlock(&s->mu);
    uint64_t one = 1;
    ssize_t n = write(s->notify_fd, &one, sizeof one);
    (void)n;
}

/* Wakes the control thread unless a wake-up it has not taken yet is pending:
 * it announces every finished job when it takes one (announce clears the
 * flag first), and each write that wakes a sleeping thread costs the worker
 * a system call and an inter-processor interrupt. */
void srv_notify_control(srv *s)
{
    if (atomic_exchange(&s->notify_pending, 1)) return;
    uint64_t one = 1;
    ssize_t n = write(s->notify_fd, &one, sizeof one);
    (void)n; /* an eventfd at its limit is still readable: nothing is lost */
}

const char *srv_sample_shard(const srv *s, uint64_t id)
{
    const lf_block_info *b = lf_dataset_block(s->ds, lf_dataset_sample_block(s->ds, id));
    return b ? lf_dataset_shard_path(s->ds, b->shard) : "?";
}

/* Adds v to a counter of s->m under s->mu: lf-stat copies s->m under it. */
void srv_add_metric(srv *s, uint64_t *counter, uint64_t v)
{
    pthread_mutex_lock(&s->mu);
    *counter += v;
    pthread_mutex_unlock(&s->mu);
}

/* Adds the calling thread's CPU time so far to *sum (at the thread's end). */
void srv_add_thread_cpu(srv *s, uint64_t *sum)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return;
    srv_add_metric(s, sum, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
}
