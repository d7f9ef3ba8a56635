/*
 * shard_open — what opening a dataset to serve it costs, and what its
 * first block from each shard costs after (issue 35 item 2).
 *
 * Usage: shard_open DIR [BLOCKS]
 *
 * Opens DIR with lf_dataset_open_mapped (as lf-server opens it), then
 * reads and decodes BLOCKS blocks (default 8) spread evenly over the
 * dataset, as a first batch would, then one block of every shard. Prints,
 * for each phase, wall and CPU seconds and the bytes the process read
 * (/proc/self/io rchar: what it asked of the kernel, cached or not), and
 * the peak RSS at the end. A mapped open reads each shard's block entries;
 * a shard's whole index (32 bytes a sample) is read and checked when its
 * first block is decoded, so "first batch" pays for the shards it touches
 * and "every shard" for the rest.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_clock.h"
#include "lf_shard.h"

/* A line of /proc/self/{io,status} as a number; 0 when absent. */
static uint64_t proc_value(const char *file, const char *key)
{
    FILE *f = fopen(file, "r");
    char line[256];
    uint64_t v = 0;
    size_t k = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, k) == 0) v = strtoull(line + k, NULL, 10);
    if (f) fclose(f);
    return v;
}

typedef struct mark {
    double wall, cpu;
    uint64_t rchar;
} mark;

static mark now(void)
{
    return (mark){clock_s(CLOCK_MONOTONIC), clock_s(CLOCK_PROCESS_CPUTIME_ID),
                  proc_value("/proc/self/io", "rchar:")};
}

static void report(const char *what, mark a, mark b)
{
    printf("%-28s wall %8.3f s  cpu %8.3f s  read %10.1f MB\n", what, b.wall - a.wall,
           b.cpu - a.cpu, (double)(b.rchar - a.rchar) / 1e6);
}

static int decode(const lf_dataset *ds, lf_block_decoder *d, uint64_t b, uint8_t *stored,
                  uint8_t *raw)
{
    lf_shard_error err;
    long n = lf_dataset_read_block(ds, b, stored, lf_dataset_max_block_stored(ds), &err);
    if (n >= 0)
        n = lf_block_decode(d, ds, b, stored, (size_t)n, raw, lf_dataset_max_block_raw(ds), &err);
    if (n < 0) fprintf(stderr, "shard_open: block %" PRIu64 ": %s\n", b, err.msg);
    return n < 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: shard_open DIR [BLOCKS]\n");
        return 2;
    }
    uint64_t want = argc > 2 ? strtoull(argv[2], NULL, 10) : 8;
    const char *dirs[] = {argv[1]};
    lf_dataset *ds;
    lf_shard_error err;
    mark m0 = now();
    if (lf_dataset_open_mapped(dirs, 1, &ds, &err) != 0) {
        fprintf(stderr, "shard_open: %s\n", err.msg);
        return 1;
    }
    mark m1 = now();
    printf("%s: %" PRIu64 " samples, %u shards, %" PRIu64 " blocks\n", argv[1],
           lf_dataset_samples(ds), lf_dataset_shards(ds), lf_dataset_blocks(ds));
    report("open (mapped)", m0, m1);
    lf_block_decoder *d;
    uint8_t *stored = malloc(lf_dataset_max_block_stored(ds)),
            *raw = malloc(lf_dataset_max_block_raw(ds));
    if (!stored || !raw || lf_block_decoder_create(&d) != 0) return 1;
    int bad = 0;
    uint64_t nb = lf_dataset_blocks(ds);
    for (uint64_t i = 0; i < want && nb; i++) bad |= decode(ds, d, i * nb / want, stored, raw);
    mark m2 = now();
    char what[64];
    snprintf(what, sizeof what, "first %" PRIu64 " blocks (spread)", want);
    report(what, m1, m2);
    for (uint64_t b = 0, last = UINT64_MAX; b < nb; b++)
        if (lf_dataset_block(ds, b)->shard != last) {
            last = lf_dataset_block(ds, b)->shard;
            bad |= decode(ds, d, b, stored, raw);
        }
    mark m3 = now();
    report("a block of every shard", m2, m3);
    printf("peak RSS %.1f MB\n", (double)proc_value("/proc/self/status", "VmHWM:") / 1024);
    lf_block_decoder_free(d);
    free(raw);
    free(stored);
    lf_dataset_close(ds);
    return bad;
}
