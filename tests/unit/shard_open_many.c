/*
 * shard_open_many.c — several dataset directories opened as one
 * (lf_dataset_open_many): every sample of the union reads back, index entry
 * and bytes, equal to the same sample of its directory opened alone, with
 * shards, blocks and samples numbered one after the other; the source calls
 * say where each directory starts; a directory of another schema is refused
 * with its name and the difference; one directory is lf_dataset_open.
 */
#include "unit/shard_gen.h"

#define NPARTS 3

typedef struct part {
    char dir[4200];
    lf_dataset *ds;
    uint64_t first_sample, first_block;
    uint32_t first_shard;
} part;

/* Block b of ds, decoded into raw (capacity cap); returns its raw size. */
static long decode(lf_block_decoder *d, const lf_dataset *ds, uint64_t b, uint8_t *stored,
                   uint8_t *raw, size_t cap)
{
    lf_shard_error e = {0};
    long n = lf_dataset_read_block(ds, b, stored, cap, &e);
    if (n >= 0) n = lf_block_decode(d, ds, b, stored, (size_t)n, raw, cap, &e);
    if (n < 0) TEST_FAIL_("block %" PRIu64 ": %s", b, e.msg);
    return n;
}

/* The union's sample u against sample k of p alone: index entry, fields. */
static void same_sample(const lf_dataset *all, uint64_t u, const uint8_t *raw_all, long n_all,
                        const part *p, uint64_t k, const uint8_t *raw_one, long n_one)
{
    const lf_sample_info *a = lf_dataset_sample(all, u), *o = lf_dataset_sample(p->ds, k);
    ASSERT_EQ(a->shard, o->shard + p->first_shard);
    ASSERT_EQ(a->block, o->block);
    ASSERT_EQ(a->offset, o->offset);
    ASSERT_EQ(a->size, o->size);
    ASSERT_EQ(a->length, o->length);
    ASSERT_EQ(a->width, o->width);
    ASSERT_EQ(a->height, o->height);
    ASSERT_EQ(a->doc_offset, o->doc_offset);
    ASSERT_EQ(lf_dataset_sample_block(all, u), lf_dataset_sample_block(p->ds, k) + p->first_block);
    lf_field_view va[LF_MAX_FIELDS], vo[LF_MAX_FIELDS];
    lf_shard_error e = {0};
    if (lf_sample_fields(all, u, raw_all, (size_t)n_all, va, &e) != 0) TEST_FAIL_("%s", e.msg);
    if (lf_sample_fields(p->ds, k, raw_one, (size_t)n_one, vo, &e) != 0) TEST_FAIL_("%s", e.msg);
    for (uint32_t f = 0; f < lf_dataset_schema(all)->nfields; f++) {
        ASSERT_EQ(va[f].size, vo[f].size);
        ASSERT_EQ(va[f].count, vo[f].count);
        ASSERT_MEM_EQ(va[f].data, vo[f].data, va[f].size);
    }
}

/* Every block of the union decodes to its part's block; every sample matches. */
static void compare_union(const lf_dataset *all, const part *parts)
{
    lf_block_decoder *d;
    ASSERT_EQ(lf_block_decoder_create(&d), 0);
    size_t cap = lf_dataset_max_block_raw(all) + lf_dataset_max_block_stored(all);
    uint8_t *s1 = malloc(cap), *r1 = malloc(cap), *s2 = malloc(cap), *r2 = malloc(cap);
    ASSERT_TRUE(s1 && r1 && s2 && r2);
    for (uint64_t b = 0; b < lf_dataset_blocks(all); b++) {
        const lf_block_info *bi = lf_dataset_block(all, b);
        uint32_t src = lf_dataset_sample_source(all, bi->first_sample);
        const part *p = &parts[src];
        const lf_block_info *bo = lf_dataset_block(p->ds, b - p->first_block);
        ASSERT_TRUE(bo != NULL);
        ASSERT_EQ(bi->first_sample, bo->first_sample + p->first_sample);
        ASSERT_EQ(bi->nsamples, bo->nsamples);
        ASSERT_EQ(bi->shard, bo->shard + p->first_shard);
        ASSERT_EQ(bi->file_offset, bo->file_offset);
        long na = decode(d, all, b, s1, r1, cap), no = decode(d, p->ds, b - p->first_block, s2,
                                                              r2, cap);
        ASSERT_EQ(na, no);
        ASSERT_MEM_EQ(r1, r2, (size_t)na);
        for (uint32_t k = 0; k < bi->nsamples; k++)
            same_sample(all, bi->first_sample + k, r1, na, p, bo->first_sample + k, r2, no);
    }
    free(s1), free(r1), free(s2), free(r2);
    lf_block_decoder_free(d);
}

static void check_sources(const lf_dataset *all, const part *parts, const char *const *dirs)
{
    ASSERT_EQ(lf_dataset_sources(all), NPARTS);
    for (uint32_t i = 0; i < NPARTS; i++) {
        const part *p = &parts[i];
        uint64_t n = lf_dataset_samples(p->ds);
        ASSERT_EQ(lf_dataset_source_first(all, i), p->first_sample);
        ASSERT_STR_EQ(lf_dataset_source_dir(all, i), dirs[i]);
        ASSERT_EQ(lf_dataset_sample_source(all, p->first_sample), i);
        ASSERT_EQ(lf_dataset_sample_source(all, p->first_sample + n - 1), i);
        for (uint32_t s = 0; s < lf_dataset_shards(p->ds); s++)
            ASSERT_STR_EQ(lf_dataset_shard_path(all, p->first_shard + s),
                          lf_dataset_shard_path(p->ds, s));
    }
    ASSERT_EQ(lf_dataset_source_first(all, NPARTS), lf_dataset_samples(all));
    ASSERT_EQ(lf_dataset_source_first(all, NPARTS + 1), UINT64_MAX);
    ASSERT_EQ(lf_dataset_sample_source(all, lf_dataset_samples(all)), UINT32_MAX);
    ASSERT_TRUE(lf_dataset_source_dir(all, NPARTS) == NULL);
}

/* A directory whose schema differs is refused, named, with the difference. */
static void refuse_other_schema(const char *const *dirs, const char *want)
{
    lf_dataset *ds = NULL;
    lf_shard_error e = {0};
    ASSERT_EQ(lf_dataset_open_many(dirs, NPARTS, &ds, &e), LF_SHARD_E_ARG);
    ASSERT_TRUE(ds == NULL);
    printf("refused: %s\n", e.msg);
    ASSERT_TRUE(strstr(e.msg, dirs[NPARTS - 1]) != NULL);
    ASSERT_TRUE(strstr(e.msg, want) != NULL);
}

int main(void)
{
    static const lf_writer_options opt[NPARTS] = {
        {.block_bytes = 16 << 10, .threads = 2, .shard_bytes = 60 << 10},
        {.block_bytes = 0, .threads = 1},
        {.block_bytes = 8 << 10, .threads = 2, .shard_bytes = 30 << 10},
    };
    static const uint64_t samples[NPARTS] = {150, 40, 90};
    lf_schema s;
    gen_schema(&s, 0);
    part parts[NPARTS];
    const char *dirs[NPARTS];
    lf_shard_error e = {0};
    for (uint32_t i = 0; i < NPARTS; i++) {
        part *p = &parts[i];
        snprintf(p->dir, sizeof p->dir, "%s/part%u", test_tmpdir(), i);
        gen_write(p->dir, &s, &opt[i], samples[i]);
        if (lf_dataset_open(p->dir, &p->ds, &e) != 0) TEST_FAIL_("%s", e.msg);
        p->first_sample = i ? parts[i - 1].first_sample + lf_dataset_samples(parts[i - 1].ds) : 0;
        p->first_block = i ? parts[i - 1].first_block + lf_dataset_blocks(parts[i - 1].ds) : 0;
        p->first_shard = i ? parts[i - 1].first_shard + lf_dataset_shards(parts[i - 1].ds) : 0;
        dirs[i] = p->dir;
        ASSERT_EQ(lf_dataset_sources(p->ds), 1);
        ASSERT_STR_EQ(lf_dataset_source_dir(p->ds, 0), p->dir);
        ASSERT_EQ(lf_dataset_source_first(p->ds, 1), samples[i]);
    }
    ASSERT_TRUE(lf_dataset_shards(parts[0].ds) > 1 && lf_dataset_shards(parts[2].ds) > 1);

    lf_dataset *all;
    if (lf_dataset_open_many(dirs, NPARTS, &all, &e) != 0) TEST_FAIL_("%s", e.msg);
    ASSERT_EQ(lf_dataset_samples(all), samples[0] + samples[1] + samples[2]);
    ASSERT_EQ(lf_dataset_shards(all), parts[2].first_shard + lf_dataset_shards(parts[2].ds));
    ASSERT_EQ(lf_dataset_blocks(all), parts[2].first_block + lf_dataset_blocks(parts[2].ds));
    ASSERT_MEM_EQ(lf_dataset_schema(all), &s, sizeof s);
    check_sources(all, parts, dirs);
    compare_union(all, parts);
    lf_dataset_close(all);

    /* one directory: lf_dataset_open's dataset */
    if (lf_dataset_open_many(dirs, 1, &all, &e) != 0) TEST_FAIL_("%s", e.msg);
    ASSERT_EQ(lf_dataset_sources(all), 1);
    ASSERT_EQ(lf_dataset_samples(all), samples[0]);
    ASSERT_EQ(lf_dataset_sample_source(all, samples[0] - 1), 0);
    lf_dataset_close(all);

    /* the last directory of another schema: cost field, then field count */
    char other[4200];
    lf_schema s2;
    gen_schema(&s2, 1);
    snprintf(other, sizeof other, "%s/other-cost", test_tmpdir());
    gen_write(other, &s2, &opt[1], 10);
    dirs[NPARTS - 1] = other;
    refuse_other_schema(dirs, "cost field is 'tok32', not 'tok16'");
    gen_schema(&s2, 0);
    s2.nfields = GEN_FIELDS - 1;
    snprintf(other, sizeof other, "%s/other-fields", test_tmpdir());
    gen_write(other, &s2, &opt[1], 10);
    refuse_other_schema(dirs, "7 fields, not 8");
    for (uint32_t i = 0; i < NPARTS; i++) lf_dataset_close(parts[i].ds);
    printf("ok: %u directories as one, every sample equal to its directory's\n", NPARTS);
    return 0;
}
