/*
 * shard_read — read throughput of a dataset next to zstd's own limit.
 *
 * Usage: shard_read DIR [THREADS] [ZST_OUT]
 *
 * Three ways over every block of DIR, each the best of a few rounds:
 *   read:   lf_dataset_read_blocks (one pread per run of consecutive blocks,
 *           up to RUN_BYTES) + lf_block_decode (xxh3 check and zstd
 *           decompression): a sequential reader's path;
 *   decode: lf_block_decode on the stored bytes already in memory: the
 *           format's cost without the I/O copy;
 *   zstd:   ZSTD_decompressDCtx on the same bytes in memory: the limit;
 * on 1 thread and on THREADS threads (default: online CPUs). Rates are
 * decompressed MB per second, by wall clock (what the threads delivered
 * together) and per CPU-second of the busy threads (what a loaded machine
 * does not distort); the ratios read/zstd and decode/zstd are the figures to
 * hold against the 0.9 target. With ZST_OUT, every block's stored bytes are
 * also written there back to back: each block is a zstd frame plus a
 * skippable padding frame, so `zstd -d` reads the file.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "bench/bench_clock.h"
#include "lf_shard.h"

#define ROUNDS 5
#define RUN_BYTES (1u << 20)     /* bytes a read pass asks for at once */

enum { MODE_READ, MODE_DECODE, MODE_ZSTD, NMODES };
static const char *const mode_name[NMODES] = {"read", "decode", "zstd"};

typedef struct bench {
    lf_dataset *ds;
    uint64_t nblocks;
    uint8_t **stored;            /* every block's stored bytes, in memory */
    uint64_t raw_total, stored_total;
    uint64_t run;                /* blocks a thread takes at once (RUN_BYTES worth) */
    atomic_uint_fast64_t next;   /* next block to take */
    atomic_int failed;
    int mode;
} bench;

/* One thread's share of a pass; cpu gets its CPU seconds (user + system). */
typedef struct worker_arg {
    bench *b;
    double cpu;
    pthread_t thread;
} worker_arg;

static int decode_one(bench *b, uint64_t blk, lf_block_decoder *dec, ZSTD_DCtx *z,
                      const uint8_t *src, uint8_t *out)
{
    const lf_block_info *bi = lf_dataset_block(b->ds, blk);
    if (b->mode == MODE_ZSTD) {
        size_t r = ZSTD_decompressDCtx(z, out, bi->raw_size, src, bi->stored_size);
        return ZSTD_isError(r) || r != bi->raw_size ? -1 : 0;
    }
    lf_shard_error err;
    if (lf_block_decode(dec, b->ds, blk, src, bi->stored_size, out, bi->raw_size, &err) < 0) {
        fprintf(stderr, "shard_read: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* Blocks [blk, end): read from the file in runs (read mode) or taken from
 * memory (decode, zstd modes), each then decoded. */
static int one_run(bench *b, uint64_t blk, uint64_t end, lf_block_decoder *dec, ZSTD_DCtx *z,
                   uint8_t *in, size_t in_cap, uint8_t *out)
{
    while (blk < end) {
        if (b->mode != MODE_READ) {
            if (decode_one(b, blk, dec, z, b->stored[blk], out) < 0) return -1;
            blk++;
            continue;
        }
        lf_shard_error err;
        long n = lf_dataset_read_blocks(b->ds, blk, end - blk, in, in_cap, &err);
        if (n < 0) {
            fprintf(stderr, "shard_read: %s\n", err.msg);
            return -1;
        }
        uint64_t base = lf_dataset_block(b->ds, blk)->file_offset;
        for (uint64_t k = blk; k < blk + (uint64_t)n; k++)
            if (decode_one(b, k, dec, z, in + (lf_dataset_block(b->ds, k)->file_offset - base),
                           out) < 0)
                return -1;
        blk += (uint64_t)n;
    }
    return 0;
}

static void *worker(void *arg)
{
    worker_arg *w = arg;
    bench *b = w->b;
    double cpu0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    lf_block_decoder *dec = NULL;
    ZSTD_DCtx *z = ZSTD_createDCtx();
    size_t in_cap = RUN_BYTES > lf_dataset_max_block_stored(b->ds)
                        ? RUN_BYTES : lf_dataset_max_block_stored(b->ds);
    uint8_t *in = malloc(in_cap);
    uint8_t *out = malloc(lf_dataset_max_block_raw(b->ds));
    if (!z || !in || !out || lf_block_decoder_create(&dec) < 0) {
        atomic_store(&b->failed, 1);
        goto out;
    }
    for (;;) {
        uint64_t blk = atomic_fetch_add(&b->next, b->run);
        if (blk >= b->nblocks || atomic_load(&b->failed))
            break;
        uint64_t end = blk + b->run < b->nblocks ? blk + b->run : b->nblocks;
        if (one_run(b, blk, end, dec, z, in, in_cap, out) < 0)
            atomic_store(&b->failed, 1);
    }
out:
    lf_block_decoder_free(dec);
    ZSTD_freeDCtx(z);
    free(in);
    free(out);
    w->cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    return NULL;
}

/* One pass over every block on `threads` threads: wall seconds returned, the
 * threads' CPU seconds summed into *cpu. */
static double one_pass(bench *b, int mode, int threads, worker_arg *w, double *cpu)
{
    b->mode = mode;
    atomic_store(&b->next, 0);
    double t0 = clock_s(CLOCK_MONOTONIC);
    for (int i = 0; i < threads; i++) {
        w[i] = (worker_arg){.b = b};
        if (pthread_create(&w[i].thread, NULL, worker, &w[i]) != 0)
            exit(1);
    }
    *cpu = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(w[i].thread, NULL);
        *cpu += w[i].cpu;
    }
    if (atomic_load(&b->failed)) {
        fprintf(stderr, "shard_read: a block failed\n");
        exit(1);
    }
    return clock_s(CLOCK_MONOTONIC) - t0;
}

/* Best wall and CPU seconds of ROUNDS passes per mode, the modes taking turns
 * in every round so that load from other processes hits them alike. */
static void report(bench *b, int threads)
{
    double wall[NMODES], cpu[NMODES];
    worker_arg *w = calloc((size_t)threads, sizeof *w);
    if (!w)
        exit(1);
    for (int m = 0; m < NMODES; m++)
        wall[m] = cpu[m] = 1e30;
    for (int r = 0; r < ROUNDS; r++)
        for (int m = 0; m < NMODES; m++) {
            double c, t = one_pass(b, m, threads, w, &c);
            wall[m] = t < wall[m] ? t : wall[m];
            cpu[m] = c < cpu[m] ? c : cpu[m];
        }
    free(w);
    double mb = (double)b->raw_total / 1e6;
    const double *s[2] = {wall, cpu};
    for (int k = 0; k < 2; k++)
        printf("%7d  %-5s  %9.1f  %11.1f  %9.1f  %9.3f  %11.3f\n", threads, k ? "cpu" : "wall",
               mb / s[k][MODE_READ], mb / s[k][MODE_DECODE], mb / s[k][MODE_ZSTD],
               s[k][MODE_ZSTD] / s[k][MODE_READ], s[k][MODE_ZSTD] / s[k][MODE_DECODE]);
}

/* Loads every block's stored bytes (and writes them to zst_out if set). */
static void load_blocks(bench *b, const char *zst_out)
{
    lf_shard_error err;
    FILE *f = zst_out ? fopen(zst_out, "wb") : NULL;
    if (zst_out && !f) {
        perror(zst_out);
        exit(1);
    }
    b->stored = calloc(b->nblocks, sizeof *b->stored);
    for (uint64_t i = 0; b->stored && i < b->nblocks; i++) {
        const lf_block_info *bi = lf_dataset_block(b->ds, i);
        b->stored[i] = malloc(bi->stored_size);
        if (!b->stored[i] ||
            lf_dataset_read_block(b->ds, i, b->stored[i], bi->stored_size, &err) < 0) {
            fprintf(stderr, "shard_read: block %" PRIu64 ": cannot load\n", i);
            exit(1);
        }
        if (f && fwrite(b->stored[i], 1, bi->stored_size, f) != bi->stored_size) {
            perror(zst_out);
            exit(1);
        }
        b->raw_total += bi->raw_size;
        b->stored_total += bi->stored_size;
    }
    if (!b->stored || (f && fclose(f) != 0)) {
        fprintf(stderr, "shard_read: out of memory or write error\n");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: shard_read DIR [THREADS] [ZST_OUT]\n");
        return 2;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = argc > 2 ? atoi(argv[2]) : (int)(cpus > 0 ? cpus : 1);
    if (threads < 1)
        threads = 1;
    bench b;
    memset(&b, 0, sizeof b);
    lf_shard_error err;
    if (lf_dataset_open(argv[1], &b.ds, &err) < 0) {
        fprintf(stderr, "shard_read: %s\n", err.msg);
        return 1;
    }
    b.nblocks = lf_dataset_blocks(b.ds);
    b.run = RUN_BYTES / lf_dataset_max_block_stored(b.ds);
    if (b.run == 0) b.run = 1;
    load_blocks(&b, argc > 3 ? argv[3] : NULL);
    printf("%" PRIu64 " blocks, %.1f MB raw, %.1f MB stored; MB/s of raw bytes, best of %d\n",
           b.nblocks, (double)b.raw_total / 1e6, (double)b.stored_total / 1e6, ROUNDS);
    printf("threads  clock  %9s  %11s  %9s  %9s  %11s\n", mode_name[MODE_READ],
           mode_name[MODE_DECODE], mode_name[MODE_ZSTD], "read/zstd", "decode/zstd");
    report(&b, 1);
    if (threads > 1)
        report(&b, threads);
    for (uint64_t i = 0; i < b.nblocks; i++)
        free(b.stored[i]);
    free(b.stored);
    lf_dataset_close(b.ds);
    return 0;
}
