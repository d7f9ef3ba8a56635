/*
 * bench_clock.h — the benchmarks' one clock reader: seconds on any clock
 * (CLOCK_MONOTONIC for wall time, CLOCK_PROCESS_CPUTIME_ID or
 * CLOCK_THREAD_CPUTIME_ID for CPU time), as a double.
 */
#ifndef LF_BENCH_CLOCK_H
#define LF_BENCH_CLOCK_H

#include <time.h>

static inline double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
