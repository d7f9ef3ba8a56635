/*
 * digest.c — `lf-shard digest`: one hash of a dataset's content, blind to
 * how it is laid out, so two conversions of the same data can be compared.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cli.h"

static const char digest_help[] =
    "Usage: lf-shard digest DIR\n"
    "\n"
    "Prints an xxh3-64 hash of the dataset's content: its fields' names and types,\n"
    "then every sample's fields in order (byte count and bytes). Shards, blocks and\n"
    "compression do not enter it, so the same samples converted with other options\n"
    "or from other copies of the input give the same digest. Every block's\n"
    "checksum is checked on the way.\n"
    "\n"
    "Example:\n"
    "  lf-shard digest /data/a; lf-shard digest /data/b   # same samples?\n";

static void hash_u64(XXH3_state_t *h, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    XXH3_64bits_update(h, b, sizeof b);
}

static void hash_schema(XXH3_state_t *h, const lf_schema *s)
{
    for (uint32_t f = 0; f < s->nfields; f++) {
        XXH3_64bits_update(h, s->fields[f].name, strlen(s->fields[f].name) + 1);
        hash_u64(h, s->fields[f].type);
        hash_u64(h, s->fields[f].row_width);
    }
}

/* Hashes block b's samples' fields. */
static void hash_block(XXH3_state_t *h, const lf_dataset *ds, lf_block_decoder *dec,
                       uint64_t b, uint8_t *stored, uint8_t *raw)
{
    const lf_block_info *bi = lf_dataset_block(ds, b);
    const lf_schema *s = lf_dataset_schema(ds);
    lf_shard_error err;
    long n = lf_dataset_read_block(ds, b, stored, bi->stored_size, &err);
    if (n >= 0)
        n = lf_block_decode(dec, ds, b, stored, (size_t)n, raw, bi->raw_size, &err);
    if (n < 0)
        cli_die("block %" PRIu64 ": %s", b, err.msg);
    for (uint64_t i = bi->first_sample; i < bi->first_sample + bi->nsamples; i++) {
        lf_field_view v[LF_MAX_FIELDS];
        if (lf_sample_fields(ds, i, raw, (size_t)n, v, &err) < 0)
            cli_die("sample %" PRIu64 ": %s", i, err.msg);
        for (uint32_t f = 0; f < s->nfields; f++) {
            hash_u64(h, v[f].size);
            XXH3_64bits_update(h, v[f].data, v[f].size);
        }
    }
}

int cmd_digest(int argc, char **argv)
{
    const cli_cmd c = {"digest", digest_help};
    const char *dir = cli_dataset_arg(&c, argc, argv, NULL, NULL);
    lf_dataset *ds = cli_open_dataset(dir);
    uint8_t *stored = malloc(lf_dataset_max_block_stored(ds) + 1u);
    uint8_t *raw = malloc(lf_dataset_max_block_raw(ds) + 1u);
    lf_block_decoder *dec = NULL;
    XXH3_state_t *h = XXH3_createState();
    if (!stored || !raw || !h || lf_block_decoder_create(&dec) < 0)
        cli_die("out of memory");
    XXH3_64bits_reset(h);
    hash_schema(h, lf_dataset_schema(ds));
    for (uint64_t b = 0; b < lf_dataset_blocks(ds); b++)
        hash_block(h, ds, dec, b, stored, raw);
    printf("%016" PRIx64 "  %s: %" PRIu64 " samples\n", (uint64_t)XXH3_64bits_digest(h), dir,
           lf_dataset_samples(ds));
    XXH3_freeState(h);
    lf_block_decoder_free(dec);
    free(raw);
    free(stored);
    lf_dataset_close(ds);
    return 0;
}
