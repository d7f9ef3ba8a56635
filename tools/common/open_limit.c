/*
 * open_limit.c — see open_limit.h.
 */
#include "open_limit.h"

#include <sys/resource.h>

long raise_open_file_limit(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) return -1;
    if (r.rlim_cur < r.rlim_max) {
        rlim_t want = r.rlim_max;
        r.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &r) != 0 && getrlimit(RLIMIT_NOFILE, &r) != 0) return -1;
    }
    return r.rlim_cur == RLIM_INFINITY ? -1 : (long)r.rlim_cur;
}
