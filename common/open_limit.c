/*
 * open_limit.c — see open_limit.h.
 */
#include "open_limit.h"

#include <sys/resource.h>

void raise_open_file_limit(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max) return;
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
}
