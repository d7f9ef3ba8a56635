/*
 * page_touch — what the first write into each page of a new ring costs
 * here, and what a second one costs: a memfd allocated and mapped as
 * lf-server maps its rings (posix_fallocate, MAP_SHARED | MAP_POPULATE),
 * one byte written in each 4 KiB page, twice, timed on the thread's CPU
 * clock.
 *
 * Where MAP_POPULATE has backed the pages, as it is meant to, both passes
 * cost what the second costs here: a TLB and cache miss, tens of
 * nanoseconds a page. On this project's VM (a PVM guest, 2026-11-26) the
 * first pass cost 10-13 us a page with no page fault the guest could
 * count, whatever MAP_POPULATE or MADV_POPULATE_WRITE did: the cost the
 * image path's workers paid inside the delivery until lf-server touched
 * its rings at start-up (lf_ring_touch, client/lf_ring.c; the client too). server_image.sh
 * prints both beside its figures, so a reader can tell which kind of
 * machine they came from. Prints "FIRST AGAIN" in microseconds a page.
 *
 *   page_touch [MIB]   (64)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Microseconds of CPU a page for one byte written into each page. */
static double write_pages_us(unsigned char *p, size_t size)
{
    double t0 = thread_cpu_s();
    for (size_t at = 0; at < size; at += 4096) ((volatile unsigned char *)p)[at] = 1;
    return (thread_cpu_s() - t0) / (double)(size / 4096) * 1e6;
}

int main(int argc, char **argv)
{
    size_t size = (argc > 1 ? strtoull(argv[1], NULL, 10) : 64) << 20;
    int fd = memfd_create("page_touch", MFD_CLOEXEC);
    int rc = fd < 0 ? errno : posix_fallocate(fd, 0, (off_t)size);
    if (size == 0 || rc != 0) {
        fprintf(stderr, "page_touch: a %zu-byte memfd: %s\n", size, strerror(rc ? rc : EINVAL));
        return 1;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
        perror("page_touch: mmap");
        return 1;
    }
    double first = write_pages_us(p, size), again = write_pages_us(p, size);
    printf("%.3f %.3f\n", first, again);
    munmap(p, size);
    close(fd);
    return 0;
}
