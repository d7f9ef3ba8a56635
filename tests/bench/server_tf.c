/*
 * server_tf — the transforms-only rate the image path is compared with:
 * every JPEG of a dataset, already read and decompressed, through
 * lf_tf_jpeg_augment on one thread (random-resized crop, flip 0.5, f32),
 * one untimed pass, then whole passes until at least 0.5 s of CPU (a small
 * set, e.g. the 123 real photographs, would otherwise be timed over a few
 * dozen milliseconds).
 * Prints images per second of wall time and per CPU second.
 *
 *   server_tf DATASET_DIR WxH
 */
#include "bench/bench_clock.h"
#include "lf_shard.h"
#include "lf_tf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every sample of the dataset through the transform once, seeded as the
 * server seeds epoch `pass`. */
static int pass_once(const lf_dataset *ds, unsigned char **raw, const lf_tf_image_params *p,
                     lf_tf_ws *ws, unsigned char *out, size_t each, uint64_t pass)
{
    uint32_t field = lf_dataset_schema(ds)->cost_field;
    lf_shard_error err;
    for (uint64_t i = 0; i < lf_dataset_samples(ds); i++) {
        uint64_t b = lf_dataset_sample_block(ds, i);
        lf_field_view v[LF_MAX_FIELDS];
        if (lf_sample_fields(ds, i, raw[b], lf_dataset_block(ds, b)->raw_size, v, &err) < 0) {
            fprintf(stderr, "server_tf: sample %" PRIu64 ": %s\n", i, err.msg);
            return -1;
        }
        long n = lf_tf_jpeg_augment(ws, out, each, v[field].data, v[field].size, p, pass, i, NULL);
        if (n < 0) {
            fprintf(stderr, "server_tf: sample %" PRIu64 ": %s\n", i, lf_tf_strerror((int)n));
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    unsigned w, h;
    if (argc != 3 || sscanf(argv[2], "%ux%u", &w, &h) != 2) {
        fprintf(stderr, "usage: server_tf DATASET_DIR WxH\n");
        return 2;
    }
    lf_dataset *ds;
    lf_shard_error err;
    if (lf_dataset_open(argv[1], &ds, &err) < 0) {
        fprintf(stderr, "server_tf: %s\n", err.msg);
        return 1;
    }
    uint64_t nb = lf_dataset_blocks(ds), ns = lf_dataset_samples(ds);
    unsigned char **raw = calloc(nb, sizeof *raw);
    unsigned char *stored = malloc(lf_dataset_max_block_stored(ds) + 1);
    lf_block_decoder *dec;
    lf_tf_ws *ws;
    if (!raw || !stored || lf_block_decoder_create(&dec) < 0 || lf_tf_ws_create(NULL, &ws) < 0)
        return 1;
    for (uint64_t b = 0; b < nb; b++) {
        const lf_block_info *bi = lf_dataset_block(ds, b);
        raw[b] = malloc(bi->raw_size + 1);
        long n = lf_dataset_read_block(ds, b, stored, bi->stored_size, &err);
        if (!raw[b] || n < 0 ||
            lf_block_decode(dec, ds, b, stored, (size_t)n, raw[b], bi->raw_size, &err) < 0) {
            fprintf(stderr, "server_tf: block %" PRIu64 ": %s\n", b, err.msg);
            return 1;
        }
    }
    lf_tf_image_params p;
    lf_tf_image_params_default(&p, w, h);
    size_t each = lf_tf_image_out_size(&p);
    unsigned char *out = malloc(each);
    /* One pass before the clock: the workspace grows to the largest image
     * on its first pass, and on this project's VM each of its new pages
     * costs ~9 us at its first access (server/README.md, *Figures*), a
     * fifth of a 0.5 s timing on dev-images/. The figure is the
     * transform's steady rate. */
    if (pass_once(ds, raw, &p, ws, out, each, UINT64_MAX) < 0) return 1;
    double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), cpu = 0;
    uint64_t done = 0;
    for (uint64_t pass = 0; done == 0 || cpu < 0.5; pass++) {
        if (pass_once(ds, raw, &p, ws, out, each, pass) < 0) return 1;
        done += ns;
        cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    }
    double secs = clock_s(CLOCK_MONOTONIC) - t0;
    printf("%.1f %.1f\n", (double)done / secs, (double)done / cpu);
    for (uint64_t b = 0; b < nb; b++) free(raw[b]);
    free(raw);
    free(stored);
    free(out);
    lf_tf_ws_free(ws);
    lf_block_decoder_free(dec);
    lf_dataset_close(ds);
    return 0;
}
