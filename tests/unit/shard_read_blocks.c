/*
 * shard_read_blocks — lf_dataset_read_blocks against one-block reads.
 *
 * A dataset of many small blocks over several shards is read in runs of
 * every length 1..9 from every start: each run must stop at its shard's end
 * and before the buffer would overflow, and each block's bytes inside the run
 * must equal lf_dataset_read_block's. Refusals: a buffer too small for the
 * first block, a count of 0, a block out of range.
 */
#include "test.h"
#include "unit/shard_gen.h"

static void check_runs(const lf_dataset *ds, uint8_t *run, uint8_t *one, size_t cap)
{
    uint64_t nb = lf_dataset_blocks(ds);
    lf_shard_error err;
    for (uint64_t first = 0; first < nb; first++) {
        const lf_block_info *fb = lf_dataset_block(ds, first);
        for (uint64_t count = 1; count <= 9; count++) {
            long n = lf_dataset_read_blocks(ds, first, count, run, cap, &err);
            if (n < 1) TEST_FAIL_("block %" PRIu64 " x%" PRIu64 ": %s", first, count, err.msg);
            ASSERT_LE(n, count);
            uint64_t bytes = 0;
            for (uint64_t k = first; k < first + (uint64_t)n; k++) {
                const lf_block_info *b = lf_dataset_block(ds, k);
                ASSERT_EQ(b->shard, fb->shard);
                long m = lf_dataset_read_block(ds, k, one, cap, &err);
                ASSERT_EQ(m, b->stored_size);
                ASSERT_MEM_EQ(run + (b->file_offset - fb->file_offset), one, (size_t)m);
                bytes += b->stored_size;
            }
            ASSERT_LE(bytes, cap);
            /* A shorter run than asked needs a reason: the shard ends, the
             * dataset ends, or the next block would not fit. */
            uint64_t next = first + (uint64_t)n;
            if ((uint64_t)n < count && next < nb) {
                const lf_block_info *b = lf_dataset_block(ds, next);
                ASSERT_TRUE(b->shard != fb->shard || bytes + b->stored_size > cap);
            }
        }
    }
}

int main(void)
{
    const char *dir = test_tmpdir();
    lf_schema s;
    gen_schema(&s, 0);
    /* Small blocks and small shards: many runs cross a shard's end. */
    lf_writer_options o = {.block_bytes = 2048, .shard_bytes = 64 * 1024, .threads = 2};
    gen_write(dir, &s, &o, 300);

    lf_dataset *ds;
    lf_shard_error err;
    if (lf_dataset_open(dir, &ds, &err) != 0) TEST_FAIL_("open: %s", err.msg);
    ASSERT_GT(lf_dataset_shards(ds), 2);
    size_t max = lf_dataset_max_block_stored(ds);
    uint8_t *run = malloc(16 * max), *one = malloc(16 * max);
    ASSERT_TRUE(run && one);

    check_runs(ds, run, one, 16 * max);   /* runs limited by count and shards */
    check_runs(ds, run, one, 3 * max);    /* runs limited by the buffer too */

    const lf_block_info *b0 = lf_dataset_block(ds, 0);
    ASSERT_EQ(lf_dataset_read_blocks(ds, 0, 4, run, b0->stored_size - 1, &err), LF_SHARD_E_BUFFER);
    ASSERT_EQ(lf_dataset_read_blocks(ds, 0, 0, run, 16 * max, &err), LF_SHARD_E_RANGE);
    ASSERT_EQ(lf_dataset_read_blocks(ds, lf_dataset_blocks(ds), 1, run, 16 * max, &err),
              LF_SHARD_E_RANGE);

    printf("shard_read_blocks: %" PRIu64 " blocks in %u shards, runs of 1..9 from every block\n",
           lf_dataset_blocks(ds), lf_dataset_shards(ds));
    free(run);
    free(one);
    lf_dataset_close(ds);
    return 0;
}
