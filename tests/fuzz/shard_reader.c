/*
 * shard_reader.c — libFuzzer target for the shard reader.
 *
 * Input: one mode byte, then the bytes of one shard file (or a manifest).
 * Mode bit 0 turns checksum comparisons off, so mutated inputs reach the
 * bounds checks behind them (with checksums on, almost every mutation stops
 * at the first hash); bit 1 selects the manifest decoder instead of a shard.
 * A shard goes through the same code as lf_dataset_open (via
 * lf_dataset_open_memory): footer, header, index; then every block is read,
 * decoded, and every sample's fields are located and read in full, so the
 * sanitizers see any view that points outside its buffer. When a block does
 * not decode, its buffer is filled from the stored bytes and the field
 * locator runs anyway, to exercise it on hostile records; so do
 * lf_block_records and lf_record_fields, as lf-server places records.
 */
#include "shard_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_FUZZ_BLOCK (16u << 20)   /* skip blocks that claim more (memory limit) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t sink;

static void touch(const lf_field_view *v, uint32_t n)
{
    uint8_t x = 0;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t k = 0; k < v[i].size; k++) x ^= ((const uint8_t *)v[i].data)[k];
    sink = x;
}

static void fuzz_block(const lf_dataset *ds, lf_block_decoder *d, uint64_t b,
                       uint8_t *stored, uint8_t *raw)
{
    const lf_block_info *bi = lf_dataset_block(ds, b);
    long n = lf_dataset_read_block(ds, b, stored, bi->stored_size, NULL);
    if (n < 0) return;
    long r = lf_block_decode(d, ds, b, stored, (size_t)n, raw, bi->raw_size, NULL);
    if (r < 0) {   /* hostile records: the raw buffer from the stored bytes */
        size_t k = bi->raw_size < (size_t)n ? bi->raw_size : (size_t)n;
        memcpy(raw, stored, k);
        memset(raw + k, 0xA5, bi->raw_size - k);
        r = bi->raw_size;
    }
    for (uint64_t s = bi->first_sample; s < bi->first_sample + bi->nsamples; s++) {
        lf_field_view v[LF_MAX_FIELDS];
        if (lf_sample_fields(ds, s, raw, (size_t)r, v, NULL) == 0)
            touch(v, lf_dataset_schema(ds)->nfields);
    }
    /* the server's way: the records placed from the block, then each read */
    uint32_t *at = malloc(((size_t)bi->nsamples + 1) * sizeof *at);
    if (at && lf_block_records(ds, b, raw, (size_t)r, at, NULL) == 0)
        for (uint32_t k = 0; k < bi->nsamples; k++) {
            lf_field_view v[LF_MAX_FIELDS];
            if (lf_record_fields(ds, bi->first_sample + k, raw + at[k], at[k + 1] - at[k], v,
                                 NULL) == 0)
                touch(v, lf_dataset_schema(ds)->nfields);
        }
    free(at);
}

static void fuzz_shard(const uint8_t *data, size_t size, unsigned flags)
{
    lf_dataset *ds;
    if (lf_dataset_open_memory(data, size, flags, &ds, NULL) != 0) return;
    lf_block_decoder *d = NULL;
    uint32_t max_raw = lf_dataset_max_block_raw(ds), max_stored = lf_dataset_max_block_stored(ds);
    uint8_t *stored = max_stored <= MAX_FUZZ_BLOCK ? malloc(max_stored) : NULL;
    uint8_t *raw = max_raw <= MAX_FUZZ_BLOCK ? malloc(max_raw) : NULL;
    if (stored && raw && lf_block_decoder_create(&d) == 0)
        for (uint64_t b = 0; b < lf_dataset_blocks(ds); b++) fuzz_block(ds, d, b, stored, raw);
    for (uint64_t s = 0; s < lf_dataset_samples(ds); s++)
        if (lf_dataset_sample_block(ds, s) >= lf_dataset_blocks(ds)) abort();
    lf_block_decoder_free(d);
    free(raw);
    free(stored);
    lf_dataset_close(ds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned mode = data[0];
    unsigned flags = (mode & 1) ? SHARD_OPEN_SKIP_CHECKSUMS : 0;
    if (mode & 2) {
        manifest m;
        if (manifest_decode(data + 1, size - 1, flags != 0, "<fuzz>", &m, NULL) == 0)
            free(m.shards);
    } else {
        fuzz_shard(data + 1, size - 1, flags);
    }
    return 0;
}
