/*
 * verify.c — `lf-shard verify`: every checksum of a dataset, or the place
 * where one fails.
 */
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"

static const char verify_help[] =
    "Usage: lf-shard verify DIR\n"
    "\n"
    "Checks every checksum of the dataset: manifest, shard headers, indexes and\n"
    "footers, every data block, and every record's field layout. Prints one line\n"
    "and exits 0 when all hold; on the first failure prints the place (file,\n"
    "shard, block, sample) and exits 1. Shows progress when stderr is a terminal.\n"
    "\n"
    "Example:\n"
    "  lf-shard verify /data/toks || echo damaged\n";

static void on_progress(void *arg, uint64_t blocks_done, uint64_t blocks_total,
                        uint64_t bytes_done)
{
    cli_progress *p = arg;
    if (!p->total)
        p->total = blocks_total;
    cli_progress_update(p, blocks_done, bytes_done, blocks_done);
}

int cmd_verify(int argc, char **argv)
{
    const cli_cmd c = {"verify", verify_help};
    const char *dir = cli_dataset_arg(&c, argc, argv, NULL, NULL);
    cli_progress p;
    lf_shard_error err;
    cli_progress_start(&p, "verify", "blocks", 0);
    int rc = lf_dataset_verify(dir, on_progress, &p, &err);
    cli_progress_clear(&p);
    if (rc < 0)
        cli_die("verify %s: FAILED: %s", dir, err.msg);
    lf_dataset *ds = cli_open_dataset(dir);
    printf("verify %s: ok: %" PRIu64 " samples, %" PRIu64 " blocks, %u shards in %.2f s\n",
           dir, lf_dataset_samples(ds), lf_dataset_blocks(ds), lf_dataset_shards(ds),
           cli_now() - p.start);
    lf_dataset_close(ds);
    return 0;
}
