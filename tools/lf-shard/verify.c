/*
 * verify.c — `lf-shard verify`: every checksum of a dataset, or the place
 * where one fails; `lf-shard index`: the compact index written again.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "cli.h"
#include "index_only.h"
#include "plan_cli.h"

static const char verify_help[] =
    "Usage: lf-shard verify DIR\n"
    "\n"
    "Checks every checksum of the dataset: manifest, shard headers, indexes and\n"
    "footers, every data block, every record's field layout, " LF_INDEX_NAME " (when\n"
    "there) against the shard indexes, and " LF_INDEX_SUMMARY_NAME " (when there)\n"
    "against the lengths in " LF_INDEX_NAME ". Prints one line\n"
    "and exits 0 when all hold; on the first failure prints the place (file,\n"
    "shard, block, sample) and exits 1. Shows progress when stderr is a terminal.\n"
    "\n"
    "Example:\n"
    "  lf-shard verify /data/toks || echo damaged\n";

static const char index_help[] =
    "Usage: lf-shard index DIR\n"
    "\n"
    "Writes DIR/" LF_INDEX_NAME ", the compact index a planner maps (each sample's\n"
    "cost length in 4 bytes, each block's count and size in 8, checksummed and tied\n"
    "to the manifest), from the shard indexes, every one of them checked, then\n"
    "DIR/" LF_INDEX_SUMMARY_NAME " beside it (how many samples have each length, and the\n"
    "planner's digest of the lengths: what a planner's start-up would otherwise\n"
    "read every length for). lf-shard create, split and synth write both; this\n"
    "writes them for a dataset made before them, or again after the manifest\n"
    "changed. For an index-only dataset (" INDEX_ONLY_NAME ") it writes the summary\n"
    "of its " LF_INDEX_NAME " alone.\n"
    "\n"
    "Example:\n"
    "  lf-shard index /data/toks && lf-plan /data/toks --world 64\n";

int cmd_index(int argc, char **argv)
{
    const cli_cmd c = {"index", index_help};
    const char *dir = cli_dataset_arg(&c, argc, argv, NULL, NULL);
    lf_shard_error err;
    char desc[PATH_MAX];
    snprintf(desc, sizeof desc, "%s/%s", dir, INDEX_ONLY_NAME);
    int synth = access(desc, F_OK) == 0;     /* its lengths are index.lfx already */
    if (!synth && lf_dataset_write_index(dir, &err) < 0)
        cli_die("index %s: %s", dir, err.msg);
    if (plan_cli_summary_write(dir, &err) < 0)
        cli_die("index %s: %s", dir, err.msg);
    if (!synth) printf("index %s: wrote %s/%s\n", dir, dir, LF_INDEX_NAME);
    printf("index %s: wrote %s/%s\n", dir, dir, LF_INDEX_SUMMARY_NAME);
    return 0;
}

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
    if (rc == 0) rc = plan_cli_summary_check(dir, &err);   /* 1: none there */
    if (rc < 0)
        cli_die("verify %s: FAILED: %s", dir, err.msg);
    lf_dataset *ds = cli_open_dataset(dir);
    printf("verify %s: ok: %" PRIu64 " samples, %" PRIu64 " blocks, %u shards in %.2f s\n",
           dir, lf_dataset_samples(ds), lf_dataset_blocks(ds), lf_dataset_shards(ds),
           cli_now() - p.start);
    lf_dataset_close(ds);
    return 0;
}
