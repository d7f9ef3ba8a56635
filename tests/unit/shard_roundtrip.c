/*
 * shard_roundtrip.c — every field of every sample reads back equal to what
 * was written, for every field type, with one-record and many-record blocks,
 * one and several shards, one and several compression threads; the index
 * (cost inputs, block and shard numbers) agrees with the data; verify passes.
 */
#include "unit/shard_gen.h"

#include <dirent.h>

typedef struct config {
    const char *name;
    uint64_t samples;
    uint32_t cost_field;
    lf_writer_options opt;
} config;

/* The cost input the index must hold for a generated sample. */
static uint64_t want_length(const lf_schema *s, const gen_sample *g)
{
    const lf_field_def *f = &s->fields[s->cost_field];
    const lf_field_input *in = &g->in[s->cost_field];
    if (f->type == LF_FIELD_JPEG) return (uint64_t)in->width * in->height;
    if (f->type == LF_FIELD_LABEL_I64) return 1;
    return in->size / lf_field_elem_size(f);
}

static void check_index(const lf_dataset *ds, const lf_schema *s)
{
    uint64_t next_sample = 0;
    for (uint64_t b = 0; b < lf_dataset_blocks(ds); b++) {
        const lf_block_info *bi = lf_dataset_block(ds, b);
        ASSERT_TRUE(bi != NULL);
        ASSERT_EQ(bi->file_offset % LF_SHARD_ALIGN, 0);
        ASSERT_EQ(bi->stored_size % LF_SHARD_ALIGN, 0);
        ASSERT_LE(bi->raw_size, lf_dataset_max_block_raw(ds));
        ASSERT_LE(bi->stored_size, lf_dataset_max_block_stored(ds));
        ASSERT_EQ(bi->first_sample, next_sample);
        for (uint64_t i = bi->first_sample; i < bi->first_sample + bi->nsamples; i++) {
            const lf_sample_info *si = lf_dataset_sample(ds, i);
            ASSERT_EQ(lf_dataset_sample_block(ds, i), b);
            ASSERT_EQ(si->shard, bi->shard);
            gen_sample g;
            gen_sample_make(s, i, &g);
            ASSERT_EQ(si->length, want_length(s, &g));
            if (s->fields[s->cost_field].type == LF_FIELD_JPEG) {
                ASSERT_EQ(si->width, g.in[s->cost_field].width);
                ASSERT_EQ(si->height, g.in[s->cost_field].height);
            }
            gen_free(&g);
        }
        next_sample += bi->nsamples;
    }
    ASSERT_EQ(next_sample, lf_dataset_samples(ds));
    ASSERT_TRUE(lf_dataset_block(ds, lf_dataset_blocks(ds)) == NULL);
    ASSERT_TRUE(lf_dataset_sample(ds, lf_dataset_samples(ds)) == NULL);
    ASSERT_TRUE(lf_dataset_shard_path(ds, lf_dataset_shards(ds)) == NULL);
    ASSERT_EQ(lf_dataset_shard_fd(ds, lf_dataset_shards(ds)), -1);
}

/* No temporary file may remain once a writer has finished or aborted. */
static int count_temps(const char *dir)
{
    DIR *dp = opendir(dir);
    ASSERT_TRUE(dp != NULL);
    int n = 0;
    for (struct dirent *e; (e = readdir(dp));)
        if (strstr(e->d_name, ".tmp")) n++;
    closedir(dp);
    return n;
}

static void run_config(const config *c, int no)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/c%d", test_tmpdir(), no);
    lf_schema s;
    gen_schema(&s, c->cost_field);
    lf_writer_stats st = gen_write(dir, &s, &c->opt, c->samples);
    ASSERT_EQ(count_temps(dir), 0);

    lf_dataset *ds;
    lf_shard_error err = {0};
    if (lf_dataset_open(dir, &ds, &err) != 0) TEST_FAIL_("%s: open: %s", c->name, err.msg);
    ASSERT_EQ(lf_dataset_samples(ds), c->samples);
    ASSERT_EQ(lf_dataset_blocks(ds), st.blocks);
    ASSERT_EQ(lf_dataset_shards(ds), st.shards);
    ASSERT_MEM_EQ(lf_dataset_schema(ds), &s, sizeof s);
    if (c->opt.block_bytes == 0) ASSERT_EQ(lf_dataset_blocks(ds), c->samples);
    check_index(ds, &s);
    if (gen_read_all(ds, &s, &err) != 0) TEST_FAIL_("%s: read: %s", c->name, err.msg);
    uint64_t file_bytes = 0;
    for (uint32_t i = 0; i < lf_dataset_shards(ds); i++) {
        struct stat sb, fdsb;
        ASSERT_EQ(stat(lf_dataset_shard_path(ds, i), &sb), 0);
        ASSERT_EQ(lf_dataset_shard_path(ds, i)[0], '/');
        /* the descriptor a server reads through is that very file */
        ASSERT_EQ(fstat(lf_dataset_shard_fd(ds, i), &fdsb), 0);
        ASSERT_EQ(fdsb.st_ino, sb.st_ino);
        ASSERT_EQ(fdsb.st_dev, sb.st_dev);
        file_bytes += (uint64_t)sb.st_size;
    }
    ASSERT_EQ(file_bytes, st.stored_bytes);
    lf_dataset_close(ds);
    if (lf_dataset_verify(dir, NULL, NULL, &err) != 0)
        TEST_FAIL_("%s: verify: %s", c->name, err.msg);
    printf("%-28s %5" PRIu64 " samples %5" PRIu64 " blocks %3u shards %8" PRIu64
           " raw %8" PRIu64 " stored\n", c->name, st.samples, st.blocks, st.shards,
           st.raw_bytes, st.stored_bytes);
}

int main(void)
{
    const config configs[] = {
        {"one-record blocks", 60, 0, {.block_bytes = 0, .threads = 1}},
        {"many-record blocks, shards", 400, 2,
         {.block_bytes = 64 << 10, .threads = 3, .shard_bytes = 200 << 10}},
        {"small blocks, one shard", 300, 4, {.block_bytes = 4096, .threads = 2}},
        {"one-record blocks, shards", 120, 6,
         {.block_bytes = 0, .threads = 2, .shard_bytes = 1, .zstd_level = 9,
          .shard_prefix = "part"}},
        {"label cost, huge blocks", 200, 7, {.block_bytes = 1 << 24, .threads = 1}},
        {"empty dataset", 0, 1, {.threads = 1}},
    };
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) run_config(&configs[i], (int)i);
    return 0;
}
