/*
 * jpeg_oversize — an image dataset as an lf-shard older than its size
 * check wrote it: a copy of dataset IN into OUT in which sample SAMPLE's
 * JPEG frame header claims WIDTHxHEIGHT (65000x65000 unless given), its
 * index entry saying the same, as lf-shard stored what the header said.
 * The scans stay the original ones: the server's transform refuses the
 * image on its header's size, before it reads them.
 *
 * A test helper (e2e/server_refused_image), not a tool: lf-shard itself
 * refuses such a file, and no production binary writes one.
 *
 *   jpeg_oversize IN OUT SAMPLE [WIDTHxHEIGHT]
 */
#include "lf_shard.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sets the size in the first start-of-frame segment of a JPEG (SOF0..15
 * but DHT, JPG and DAC): P, then height and width, big-endian. Returns 0,
 * or -1 when there is none. */
static int patch_sof(uint8_t *p, size_t n, uint32_t w, uint32_t h)
{
    size_t at = 2;   /* after SOI */
    while (at + 9 <= n) {
        if (p[at] != 0xFF) return -1;
        uint8_t m = p[at + 1];
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            p[at + 5] = (uint8_t)(h >> 8), p[at + 6] = (uint8_t)h;
            p[at + 7] = (uint8_t)(w >> 8), p[at + 8] = (uint8_t)w;
            return 0;
        }
        at += 2 + ((size_t)p[at + 2] << 8 | p[at + 3]);
    }
    return -1;
}

/* Adds sample id (fields located in its decoded block raw) to the writer,
 * the JPEG field patched when id is the one to spoil. */
static int copy_sample(const lf_dataset *ds, lf_writer *wr, uint64_t id, const void *raw,
                       size_t raw_size, uint64_t spoil, uint32_t w, uint32_t h)
{
    const lf_schema *sc = lf_dataset_schema(ds);
    lf_field_view v[LF_MAX_FIELDS];
    lf_field_input in[LF_MAX_FIELDS];
    lf_shard_error err;
    uint8_t *copy = NULL;
    if (lf_sample_fields(ds, id, raw, raw_size, v, &err) < 0) {
        fprintf(stderr, "jpeg_oversize: %s\n", err.msg);
        return -1;
    }
    for (uint32_t f = 0; f < sc->nfields; f++) {
        in[f] = (lf_field_input){.data = v[f].data, .size = v[f].size};
        if (sc->fields[f].type != LF_FIELD_JPEG) continue;
        in[f].width = lf_dataset_sample(ds, id)->width;
        in[f].height = lf_dataset_sample(ds, id)->height;
        if (id != spoil) continue;
        if (!(copy = malloc(v[f].size))) return -1;
        memcpy(copy, v[f].data, v[f].size);
        if (patch_sof(copy, v[f].size, w, h) < 0) {
            fprintf(stderr, "jpeg_oversize: sample %" PRIu64 ": no frame header\n", id);
            free(copy);
            return -1;
        }
        in[f] = (lf_field_input){.data = copy, .size = v[f].size, .width = w, .height = h};
    }
    int64_t rc = lf_writer_add(wr, in, &err);
    free(copy);
    if (rc < 0) fprintf(stderr, "jpeg_oversize: %s\n", err.msg);
    return rc < 0 ? -1 : 0;
}

/* Copies every block's samples in id order. */
static int copy_all(const lf_dataset *ds, lf_writer *wr, uint64_t spoil, uint32_t w, uint32_t h)
{
    lf_block_decoder *dec;
    lf_shard_error err;
    if (lf_block_decoder_create(&dec) < 0) return -1;
    int rc = 0;
    for (uint64_t b = 0; rc == 0 && b < lf_dataset_blocks(ds); b++) {
        const lf_block_info *bi = lf_dataset_block(ds, b);
        void *stored = malloc(bi->stored_size), *raw = malloc(bi->raw_size ? bi->raw_size : 1);
        if (!stored || !raw ||
            lf_dataset_read_block(ds, b, stored, bi->stored_size, &err) < 0 ||
            lf_block_decode(dec, ds, b, stored, bi->stored_size, raw, bi->raw_size, &err) < 0) {
            fprintf(stderr, "jpeg_oversize: block %" PRIu64 ": %s\n", b,
                    stored && raw ? err.msg : "out of memory");
            rc = -1;
        }
        for (uint32_t i = 0; rc == 0 && i < bi->nsamples; i++)
            rc = copy_sample(ds, wr, bi->first_sample + i, raw, bi->raw_size, spoil, w, h);
        free(stored);
        free(raw);
    }
    lf_block_decoder_free(dec);
    return rc;
}

int main(int argc, char **argv)
{
    unsigned w = 65000, h = 65000;
    if (argc < 4 || argc > 5 || (argc == 5 && sscanf(argv[4], "%ux%u", &w, &h) != 2) ||
        w == 0 || h == 0 || w > 65535 || h > 65535) {
        fprintf(stderr, "usage: jpeg_oversize IN OUT SAMPLE [WIDTHxHEIGHT]\n");
        return 2;
    }
    uint64_t spoil = strtoull(argv[3], NULL, 10);
    lf_dataset *ds;
    lf_shard_error err;
    if (lf_dataset_open(argv[1], &ds, &err) < 0) {
        fprintf(stderr, "jpeg_oversize: %s\n", err.msg);
        return 1;
    }
    /* Small blocks of several samples: the spoiled sample has neighbours
     * in its block, which must still be delivered. */
    lf_writer_options opts = {.block_bytes = 16384, .threads = 1};
    lf_writer *wr;
    int rc = lf_writer_create(argv[2], lf_dataset_schema(ds), &opts, &wr, &err);
    if (rc < 0) fprintf(stderr, "jpeg_oversize: %s\n", err.msg);
    if (rc == 0 && copy_all(ds, wr, spoil, w, h) < 0) {
        lf_writer_abort(wr);
        rc = -1;
    } else if (rc == 0 && (rc = lf_writer_finish(wr, NULL, &err)) < 0) {
        fprintf(stderr, "jpeg_oversize: %s\n", err.msg);
    }
    lf_dataset_close(ds);
    return rc < 0 ? 1 : 0;
}
