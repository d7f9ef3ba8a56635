/*
 * server_blocks — writes every stored block of a dataset, back to back, to
 * one file: a valid multi-frame zstd stream (each block is a zstd frame
 * plus a skippable padding frame), so `zstd -d` can decode exactly what
 * lf-server decodes. Prints the raw (decompressed) byte count.
 *
 *   server_blocks DATASET_DIR OUT_FILE
 */
#include "lf_shard.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: server_blocks DATASET_DIR OUT_FILE\n");
        return 2;
    }
    lf_dataset *ds;
    lf_shard_error err;
    if (lf_dataset_open(argv[1], &ds, &err) < 0) {
        fprintf(stderr, "server_blocks: %s\n", err.msg);
        return 1;
    }
    FILE *out = fopen(argv[2], "wb");
    unsigned char *buf = malloc(lf_dataset_max_block_stored(ds) + 1);
    uint64_t raw = 0;
    int rc = out && buf ? 0 : 1;
    for (uint64_t b = 0; rc == 0 && b < lf_dataset_blocks(ds); b++) {
        const lf_block_info *bi = lf_dataset_block(ds, b);
        long n = lf_dataset_read_block(ds, b, buf, bi->stored_size, &err);
        if (n < 0 || fwrite(buf, 1, (size_t)n, out) != (size_t)n) rc = 1;
        raw += bi->raw_size;
    }
    if (out && fclose(out) != 0) rc = 1;
    if (rc) fprintf(stderr, "server_blocks: failed\n");
    else printf("%" PRIu64 "\n", raw);
    free(buf);
    lf_dataset_close(ds);
    return rc;
}
