/*
 * shard_compact.c — the compact index, index.lfx (FORMAT.md, section 10):
 * written from a dataset's shard indexes, read mapped, it gives every
 * sample's length and block and every block's count, shard and raw size
 * as the full open does, with no per-sample entries; a dataset without it
 * opens as before; a damaged, truncated or stale one (written for another
 * manifest) is refused naming the file, and verify finds one that
 * disagrees with the shard indexes; an index-only one opens from its path.
 * Opened mapped to read its bytes (lf_dataset_open_mapped, as lf-server
 * does), a dataset serves the same blocks and, with each record placed
 * from the decoded block (lf_block_records), the same bytes for every
 * sample as the per-sample table gives, with no table; several
 * directories join mapped unless one lacks index.lfx. Mapped, the open
 * reads block entries only; each shard's whole index is checked before
 * the first of its blocks is decoded, so a shard whose index is damaged
 * or disagrees with index.lfx is refused then, naming it, and the
 * others are served. The index summary beside it (index-summary.lfx)
 * reads back as written and is refused, naming it, where damaged, of
 * another version or written for another index.lfx, and the planner's
 * side writes it from the lengths and finds one that is not theirs
 * (plan_cli_summary_check, lf-shard verify's) (test_summary).
 */
#include "unit/shard_gen.h"
#include "plan_cli.h"

#include <pthread.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

static void path_of(char *out, size_t cap, const char *dir, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

/* ds_c (read from index.lfx) agrees with ds (the shard indexes) everywhere. */
static void check_same(const lf_dataset *ds, const lf_dataset *c)
{
    ASSERT_EQ(lf_dataset_samples(c), lf_dataset_samples(ds));
    ASSERT_EQ(lf_dataset_blocks(c), lf_dataset_blocks(ds));
    ASSERT_EQ(lf_dataset_shards(c), lf_dataset_shards(ds));
    ASSERT_EQ(lf_dataset_max_block_raw(c), lf_dataset_max_block_raw(ds));
    for (uint64_t b = 0; b < lf_dataset_blocks(ds); b++) {
        const lf_block_info *x = lf_dataset_block(ds, b), *y = lf_dataset_block(c, b);
        ASSERT_EQ(y->first_sample, x->first_sample);
        ASSERT_EQ(y->nsamples, x->nsamples);
        ASSERT_EQ(y->raw_size, x->raw_size);
        ASSERT_EQ(y->shard, x->shard);
    }
    for (uint64_t i = 0; i < lf_dataset_samples(ds); i++) {
        ASSERT_EQ(lf_dataset_sample_length(c, i), lf_dataset_sample(ds, i)->length);
        ASSERT_EQ(lf_dataset_sample_length(ds, i), lf_dataset_sample(ds, i)->length);
        ASSERT_EQ(lf_dataset_sample_block(c, i), lf_dataset_sample_block(ds, i));
    }
    ASSERT_TRUE(lf_dataset_sample(c, 0) == NULL);
    ASSERT_EQ(lf_dataset_sample_block(c, lf_dataset_samples(c)), UINT64_MAX);
    ASSERT_EQ(lf_dataset_sample_length(c, lf_dataset_samples(c)), 0);
}

/* A dataset of n samples in dir, several shards, with its index.lfx. */
static void make_dataset(const char *dir, uint32_t cost_field, uint64_t n)
{
    lf_schema s;
    gen_schema(&s, cost_field);
    lf_writer_options o = {.block_bytes = 8192, .shard_bytes = 64 << 10, .threads = 2};
    gen_write(dir, &s, &o, n);
    lf_shard_error err;
    if (lf_dataset_write_index(dir, &err) != 0) TEST_FAIL_("write index: %s", err.msg);
}

static void test_same_as_shards(const char *root, uint32_t cost_field)
{
    char dir[4200], lfx[4300];
    snprintf(dir, sizeof dir, "%s/same%u", root, cost_field);
    make_dataset(dir, cost_field, 700);
    lf_dataset *ds, *c;
    lf_shard_error err;
    ASSERT_EQ(lf_dataset_open(dir, &ds, &err), 0);
    ASSERT_EQ(lf_dataset_open_lengths(dir, &c, &err), 0);
    ASSERT_GT(lf_dataset_shards(ds), 1);
    check_same(ds, c);
    path_of(lfx, sizeof lfx, dir, LF_INDEX_NAME);
    size_t size;
    free(gen_slurp(lfx, &size));
    ASSERT_EQ(size, 64 + 8 * lf_dataset_blocks(ds) + 4 * lf_dataset_samples(ds));
    uint8_t buf[1 << 16];   /* a read is refused, naming the dataset and index.lfx */
    ASSERT_EQ(lf_dataset_read_block(c, 0, buf, sizeof buf, &err), LF_SHARD_E_ARG);
    ASSERT_TRUE(strstr(err.msg, dir) && strstr(err.msg, LF_INDEX_NAME));
    ASSERT_EQ(lf_dataset_verify(dir, NULL, NULL, &err), 0);
    lf_dataset_close(c);
    lf_dataset_close(ds);
}

/* Without index.lfx the planner's open reads the shard indexes. */
static void test_older_dataset(const char *root)
{
    char dir[4200], lfx[4300];
    snprintf(dir, sizeof dir, "%s/older", root);
    make_dataset(dir, 0, 200);
    path_of(lfx, sizeof lfx, dir, LF_INDEX_NAME);
    ASSERT_EQ(unlink(lfx), 0);
    lf_dataset *c;
    lf_shard_error err;
    ASSERT_EQ(lf_dataset_open_lengths(dir, &c, &err), 0);
    ASSERT_TRUE(lf_dataset_sample(c, 0) != NULL);   /* the full open */
    ASSERT_EQ(lf_dataset_sample_length(c, 7), lf_dataset_sample(c, 7)->length);
    lf_dataset_close(c);
}

/* Overwrites one byte of path at off with its complement. */
static void flip(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    ASSERT_TRUE(f != NULL);
    ASSERT_EQ(fseek(f, off, SEEK_SET), 0);
    int ch = fgetc(f);
    ASSERT_EQ(fseek(f, off, SEEK_SET), 0);
    fputc(~ch & 0xff, f);
    fclose(f);
}

/* Opening dir is refused with status, naming file and saying words. */
static void expect_refused_naming(const char *dir, int status, const char *file,
                                  const char *words)
{
    lf_dataset *c = NULL;
    lf_shard_error err = {0};
    ASSERT_EQ(lf_dataset_open_lengths(dir, &c, &err), status);
    ASSERT_TRUE(c == NULL);
    if (!strstr(err.msg, file) || !strstr(err.msg, words))
        TEST_FAIL_("message lacks '%s' or '%s': %s", file, words, err.msg);
}

static void expect_refused(const char *dir, int status, const char *words)
{
    expect_refused_naming(dir, status, LF_INDEX_NAME, words);
}

static void test_damaged(const char *root)
{
    char dir[4200], other[4200], lfx[4300], olfx[4300], cmd[9000];
    snprintf(dir, sizeof dir, "%s/damaged", root);
    snprintf(other, sizeof other, "%s/other", root);
    make_dataset(dir, 0, 300);
    make_dataset(other, 1, 300);   /* the same blocks, another cost field: another manifest */
    path_of(lfx, sizeof lfx, dir, LF_INDEX_NAME);
    path_of(olfx, sizeof olfx, other, LF_INDEX_NAME);
    size_t size;
    free(gen_slurp(lfx, &size));
    flip(lfx, (long)size - 3);                               /* a length */
    expect_refused(dir, LF_SHARD_E_CHECKSUM, "checksum");
    flip(lfx, (long)size - 3);
    flip(lfx, 20);                                           /* the header */
    expect_refused(dir, LF_SHARD_E_CHECKSUM, "header");
    flip(lfx, 20);
    ASSERT_EQ(truncate(lfx, (off_t)size - 4), 0);
    expect_refused(dir, LF_SHARD_E_FORMAT, "counts");
    /* Another dataset's: written for another manifest, stale. */
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", olfx, lfx);
    ASSERT_EQ(system(cmd), 0);
    expect_refused(dir, LF_SHARD_E_FORMAT, "another manifest");
}

/* Every block of m (opened mapped) read as lf-server reads it: decoded,
 * its records placed by lf_block_records, each sample's fields by
 * lf_record_fields; the bytes equal the generator's and t's (the
 * per-sample table's) for the same sample, and the record starts where
 * t's entry says. lf_sample_fields on m (walking the block) agrees. */
static void check_served(const lf_dataset *t, const lf_dataset *m, const lf_schema *s)
{
    lf_block_decoder *d;
    ASSERT_EQ(lf_block_decoder_create(&d), 0);
    size_t scap = lf_dataset_max_block_stored(m), rcap = lf_dataset_max_block_raw(m);
    uint8_t *stored = malloc(scap), *raw = malloc(rcap);
    uint32_t *offsets = malloc((lf_dataset_samples(m) + 1) * sizeof *offsets);
    ASSERT_TRUE(stored && raw && offsets);
    lf_shard_error err;
    for (uint64_t b = 0; b < lf_dataset_blocks(m); b++) {
        const lf_block_info *x = lf_dataset_block(t, b), *y = lf_dataset_block(m, b);
        ASSERT_EQ(y->file_offset, x->file_offset);
        ASSERT_EQ(y->stored_size, x->stored_size);
        ASSERT_EQ(y->checksum, x->checksum);
        long n = lf_dataset_read_block(m, b, stored, scap, &err);
        if (n >= 0) n = lf_block_decode(d, m, b, stored, (size_t)n, raw, rcap, &err);
        if (n < 0) TEST_FAIL_("block %" PRIu64 ": %s", b, err.msg);
        if (lf_block_records(m, b, raw, (size_t)n, offsets, &err) != 0)
            TEST_FAIL_("records of block %" PRIu64 ": %s", b, err.msg);
        ASSERT_EQ(offsets[y->nsamples], y->raw_size);
        for (uint32_t k = 0; k < y->nsamples; k++) {
            uint64_t i = y->first_sample + k;
            lf_field_view vm[LF_MAX_FIELDS], vt[LF_MAX_FIELDS], vw[LF_MAX_FIELDS];
            ASSERT_EQ(offsets[k], lf_dataset_sample(t, i)->offset);
            ASSERT_EQ(lf_record_fields(m, i, raw + offsets[k], offsets[k + 1] - offsets[k], vm,
                                       &err), 0);
            ASSERT_EQ(lf_sample_fields(t, i, raw, (size_t)n, vt, &err), 0);
            ASSERT_EQ(lf_sample_fields(m, i, raw, (size_t)n, vw, &err), 0);
            if (gen_compare(s, i, vm) != 0) TEST_FAIL_("sample %" PRIu64 ": wrong bytes", i);
            for (uint32_t f = 0; f < s->nfields; f++) {
                ASSERT_TRUE(vm[f].data == vt[f].data && vw[f].data == vt[f].data);
                ASSERT_EQ(vm[f].size, vt[f].size);
                ASSERT_EQ(vm[f].count, vt[f].count);
            }
        }
    }
    free(offsets);
    free(raw);
    free(stored);
    lf_block_decoder_free(d);
}

static void test_mapped(const char *root, uint32_t cost_field)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/mapped%u", root, cost_field);
    make_dataset(dir, cost_field, 700);
    lf_dataset *t, *m;
    lf_shard_error err;
    const char *dirs[] = {dir};
    ASSERT_EQ(lf_dataset_open(dir, &t, &err), 0);
    ASSERT_EQ(lf_dataset_open_mapped(dirs, 1, &m, &err), 0);
    check_same(t, m);   /* no per-sample table; lengths, blocks, shards the same */
    ASSERT_EQ(lf_dataset_index_only(m), 0);
    lf_schema s;
    gen_schema(&s, cost_field);
    check_served(t, m, &s);
    lf_dataset_close(m);
    lf_dataset_close(t);
}

/* A record whose own size table is one byte off (the next record's place
 * moves by one): lf_block_records refuses the block (the records no longer
 * tile it), naming the block; with the table, naming the sample whose
 * entry disagrees. */
static void test_record_off_by_one(const char *root)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/offbyone", root);
    make_dataset(dir, 0, 100);
    const char *dirs[] = {dir};
    lf_dataset *ds[2];
    lf_shard_error err;
    ASSERT_EQ(lf_dataset_open_mapped(dirs, 1, &ds[0], &err), 0);
    ASSERT_EQ(lf_dataset_open(dir, &ds[1], &err), 0);
    uint64_t j = 0;   /* a block of several samples */
    while (lf_dataset_block(ds[0], j)->nsamples < 2) j++;
    char where[64];
    snprintf(where, sizeof where, "block %" PRIu64 ": sample", j);
    for (int w = 0; w < 2; w++) {
        const lf_block_info *b = lf_dataset_block(ds[w], j);
        lf_block_decoder *d;
        ASSERT_EQ(lf_block_decoder_create(&d), 0);
        uint8_t *stored = malloc(b->stored_size), *raw = malloc(b->raw_size);
        uint32_t *offsets = malloc((b->nsamples + 1) * sizeof *offsets);
        ASSERT_EQ(lf_dataset_read_block(ds[w], j, stored, b->stored_size, &err),
                  (long)b->stored_size);
        ASSERT_EQ(lf_block_decode(d, ds[w], j, stored, b->stored_size, raw, b->raw_size, &err),
                  (long)b->raw_size);
        ASSERT_EQ(lf_block_records(ds[w], j, raw, b->raw_size, offsets, &err), 0);
        raw[offsets[0] + 4 * 6]++;   /* the first sample's 'blob' (field 6) one byte longer */
        ASSERT_EQ(lf_block_records(ds[w], j, raw, b->raw_size, offsets, &err), LF_SHARD_E_FORMAT);
        if (!strstr(err.msg, where) ||
            (w == 1 && !strstr(err.msg, "its record's field sizes do not match the index")))
            TEST_FAIL_("off by one: %s", err.msg);
        free(offsets);
        free(raw);
        free(stored);
        lf_block_decoder_free(d);
        lf_dataset_close(ds[w]);
    }
}

/* Two directories join mapped, each's lengths from its own index.lfx;
 * when one has none, both are read with the table. */
static void test_mapped_many(const char *root)
{
    char a[4200], b[4200], lfx[4300];
    snprintf(a, sizeof a, "%s/many-a", root);
    snprintf(b, sizeof b, "%s/many-b", root);
    make_dataset(a, 0, 150);
    make_dataset(b, 0, 90);
    const char *dirs[] = {a, b};
    lf_dataset *t, *m;
    lf_shard_error err;
    ASSERT_EQ(lf_dataset_open_many(dirs, 2, &t, &err), 0);
    ASSERT_EQ(lf_dataset_open_mapped(dirs, 2, &m, &err), 0);
    check_same(t, m);
    ASSERT_EQ(lf_dataset_sources(m), 2);
    ASSERT_EQ(lf_dataset_source_first(m, 1), 150);
    ASSERT_EQ(lf_dataset_sample_source(m, 149), 0);
    ASSERT_EQ(lf_dataset_sample_source(m, 150), 1);
    lf_dataset_close(m);
    path_of(lfx, sizeof lfx, b, LF_INDEX_NAME);
    ASSERT_EQ(unlink(lfx), 0);
    ASSERT_EQ(lf_dataset_open_mapped(dirs, 2, &m, &err), 0);
    ASSERT_TRUE(lf_dataset_sample(m, 0) != NULL && lf_dataset_sample(m, 200) != NULL);
    ASSERT_EQ(lf_dataset_sample_length(m, 200), lf_dataset_sample_length(t, 200));
    lf_dataset_close(m);
    lf_dataset_close(t);
}

static uint64_t manifest_hash(const char *dir)
{
    char path[4300];
    path_of(path, sizeof path, dir, LF_MANIFEST_NAME);
    size_t size;
    uint8_t *m = gen_slurp(path, &size);
    uint64_t h = 0;
    for (int k = 7; k >= 0; k--) h = h << 8 | m[size - 8 + (size_t)k];
    free(m);
    return h;
}

typedef struct spec_arg {
    const lf_dataset *ds;
    uint64_t wrong;              /* this sample's length is given one more */
} spec_arg;

static uint64_t spec_length(void *arg, uint64_t i)
{
    const spec_arg *a = arg;
    return lf_dataset_sample_length(a->ds, i) + (i == a->wrong);
}

static void spec_block(void *arg, uint64_t b, uint32_t *n, uint32_t *raw)
{
    const spec_arg *a = arg;
    *n = lf_dataset_block(a->ds, b)->nsamples;
    *raw = lf_dataset_block(a->ds, b)->raw_size;
}

/* Block b of ds read and decoded as lf-server does: its raw size, or a
 * negative status (err set). */
static long decode_one(const lf_dataset *ds, uint64_t b, lf_shard_error *err)
{
    const lf_block_info *bi = lf_dataset_block(ds, b);
    lf_block_decoder *d;
    ASSERT_EQ(lf_block_decoder_create(&d), 0);
    uint8_t *stored = malloc(bi->stored_size), *raw = malloc(bi->raw_size);
    ASSERT_TRUE(stored && raw);
    long n = lf_dataset_read_block(ds, b, stored, bi->stored_size, err);
    if (n >= 0) n = lf_block_decode(d, ds, b, stored, (size_t)n, raw, bi->raw_size, err);
    free(raw);
    free(stored);
    lf_block_decoder_free(d);
    return n;
}

/* A well-formed index.lfx for the right manifest that disagrees with the
 * shard indexes: verify names the sample. */
static void test_verify_disagreement(const char *root)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/disagree", root);
    make_dataset(dir, 0, 300);
    lf_dataset *ds;
    lf_shard_error err;
    ASSERT_EQ(lf_dataset_open(dir, &ds, &err), 0);
    spec_arg a = {ds, 123};
    lf_index_spec spec = {.samples = lf_dataset_samples(ds), .blocks = lf_dataset_blocks(ds),
                          .manifest_hash = manifest_hash(dir), .block = spec_block,
                          .length = spec_length, .arg = &a};
    ASSERT_EQ(lf_index_write(dir, &spec, &err), 0);
    lf_dataset_close(ds);
    ASSERT_EQ(lf_dataset_verify(dir, NULL, NULL, &err), LF_SHARD_E_FORMAT);
    if (!strstr(err.msg, "sample 123")) TEST_FAIL_("verify: %s", err.msg);
    /* Opened to serve, the open reads the block entries only (they agree);
     * the shard holding sample 123 is refused the same way before any of
     * its blocks is decoded, its first block too, every time; the other
     * shards' blocks are served. */
    const char *dirs[] = {dir};
    ASSERT_EQ(lf_dataset_open_mapped(dirs, 1, &ds, &err), 0);
    ASSERT_GE(lf_dataset_shards(ds), 2);
    uint32_t bad = lf_dataset_block(ds, lf_dataset_sample_block(ds, 123))->shard;
    uint32_t refused = 0, served = 0;
    for (int pass = 0; pass < 2; pass++)
        for (uint64_t b = 0; b < lf_dataset_blocks(ds); b++) {
            long n = decode_one(ds, b, &err);
            if (lf_dataset_block(ds, b)->shard != bad) {
                if (n < 0) TEST_FAIL_("block %" PRIu64 " of a sound shard: %s", b, err.msg);
                served++;
                continue;
            }
            ASSERT_EQ(n, LF_SHARD_E_FORMAT);
            if (!strstr(err.msg, "sample 123") || !strstr(err.msg, "lf-shard index") ||
                !strstr(err.msg, lf_dataset_shard_path(ds, bad)))
                TEST_FAIL_("block %" PRIu64 " served mapped: %s", b, err.msg);
            ASSERT_EQ(lf_dataset_check_block_index(ds, b, &err), LF_SHARD_E_FORMAT);
            refused++;
        }
    ASSERT_TRUE(refused > 0 && served > 0);
    ASSERT_EQ(lf_dataset_check_indexes(ds, &err), LF_SHARD_E_FORMAT);
    lf_dataset_close(ds);
}

/* A shard index whose sample entries are damaged (a byte of one flipped;
 * its block entries intact): the mapped open, which reads block entries
 * only, succeeds; the shard's blocks are refused with the index's checksum
 * mismatch, naming the shard file, before any is decoded; the other
 * shards' blocks are served. A flipped block entry is refused at open as
 * the damage it is (the index's checksum), not as index.lfx disagreeing. */
/* A new dataset of n samples at root/name (into dir), opened mapped. */
static lf_dataset *new_mapped(char dir[4200], const char *root, const char *name, uint64_t n)
{
    snprintf(dir, 4200, "%s/%s", root, name);
    make_dataset(dir, 0, n);
    const char *dirs[] = {dir};
    lf_dataset *ds;
    lf_shard_error err;
    if (lf_dataset_open_mapped(dirs, 1, &ds, &err) != 0) TEST_FAIL_("open %s: %s", dir, err.msg);
    return ds;
}

static void test_damaged_sample_entry(const char *root)
{
    char dir[4200], path[4300];
    lf_dataset *ds = new_mapped(dir, root, "entry", 300);
    const char *dirs[] = {dir};
    lf_shard_error err;
    uint32_t shard = lf_dataset_shards(ds) - 1;   /* the last: its index ends at the footer */
    ASSERT_GE(shard, 1);
    uint64_t blocks = 0, samples = 0;
    for (uint64_t b = 0; b < lf_dataset_blocks(ds); b++)
        if (lf_dataset_block(ds, b)->shard == shard) {
            blocks++;
            samples += lf_dataset_block(ds, b)->nsamples;
        }
    snprintf(path, sizeof path, "%s", lf_dataset_shard_path(ds, shard));
    lf_dataset_close(ds);
    size_t size;
    free(gen_slurp(path, &size));
    long index_at = (long)size - 64 - 32 * (long)(blocks + samples);
    long entry = index_at + 32 * (long)blocks + 24;   /* its first sample's length */
    flip(path, entry);
    ASSERT_EQ(lf_dataset_open_mapped(dirs, 1, &ds, &err), 0);
    uint32_t refused = 0, served = 0;
    for (uint64_t b = 0; b < lf_dataset_blocks(ds); b++) {
        long n = decode_one(ds, b, &err);
        if (lf_dataset_block(ds, b)->shard != shard) {
            if (n < 0) TEST_FAIL_("block %" PRIu64 " of a sound shard: %s", b, err.msg);
            served++;
        } else if (n != LF_SHARD_E_CHECKSUM || !strstr(err.msg, path) ||
                   !strstr(err.msg, "index: checksum mismatch")) {
            TEST_FAIL_("block %" PRIu64 " of the damaged shard: %ld: %s", b, n, err.msg);
        } else {
            refused++;
        }
    }
    ASSERT_TRUE(refused == blocks && served > 0);
    lf_dataset_close(ds);
    ASSERT_EQ(lf_dataset_verify(dir, NULL, NULL, &err), LF_SHARD_E_CHECKSUM);
    flip(path, entry);
    flip(path, index_at + 28);   /* its first block's sample count */
    ASSERT_EQ(lf_dataset_open_mapped(dirs, 1, &ds, &err), LF_SHARD_E_CHECKSUM);
    if (!strstr(err.msg, path) || strstr(err.msg, "lf-shard index"))
        TEST_FAIL_("a flipped block entry: %s", err.msg);
    flip(path, index_at + 28);
    ASSERT_EQ(lf_dataset_verify(dir, NULL, NULL, &err), 0);
}

/* A document in pieces across shards (one block a shard): opened mapped,
 * the shard that starts with a piece is served first, before the shards
 * whose pieces it follows, which are checked first, from the earliest
 * (their last piece's end is what its first piece must start at). */
static void test_pieces_across_shards(const char *root)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/pieces", root);
    lf_schema s = {.nfields = 1, .cost_field = 0};
    snprintf(s.fields[0].name, sizeof s.fields[0].name, "tokens");
    s.fields[0].type = LF_FIELD_TOKENS_U32;
    lf_writer_options o = {.pieces = 1, .block_bytes = 0, .shard_bytes = 4096, .threads = 1};
    lf_writer *w;
    lf_shard_error err;
    uint32_t tok[3] = {1, 2, 3};
    lf_field_input in3 = {.data = tok, .size = 12};
    ASSERT_EQ(lf_writer_create(dir, &s, &o, &w, &err), 0);
    static const uint32_t at[5] = {0, 3, 6, 9, 0};   /* one document of 12, then one of 3 */
    for (uint32_t i = 0; i < 5; i++) ASSERT_EQ(lf_writer_add_piece(w, &in3, at[i], &err), (int64_t)i);
    ASSERT_EQ(lf_writer_finish(w, NULL, &err), 0);
    ASSERT_EQ(lf_dataset_write_index(dir, &err), 0);
    const char *dirs[] = {dir};
    lf_dataset *ds;
    ASSERT_EQ(lf_dataset_open_mapped(dirs, 1, &ds, &err), 0);
    ASSERT_EQ(lf_dataset_shards(ds), 5);
    static const uint64_t order[5] = {3, 4, 0, 2, 1};   /* shard 3 first: 0, 1, 2 before it */
    for (int k = 0; k < 5; k++) {
        uint64_t b = order[k];
        ASSERT_EQ(lf_dataset_block(ds, b)->shard, b);
        if (decode_one(ds, b, &err) < 0) TEST_FAIL_("block %" PRIu64 ": %s", b, err.msg);
    }
    lf_dataset_close(ds);
    ASSERT_EQ(lf_dataset_verify(dir, NULL, NULL, &err), 0);
}

typedef struct racer {
    const lf_dataset *ds;
    uint32_t start;              /* the block it begins at, going round */
    uint64_t bad;                /* blocks it could not decode */
} racer;

static void *race_blocks(void *arg)
{
    racer *r = arg;
    uint64_t n = lf_dataset_blocks(r->ds);
    lf_shard_error err;
    for (uint64_t k = 0; k < n; k++) r->bad += decode_one(r->ds, (r->start + k) % n, &err) < 0;
    return NULL;
}

/* Threads decoding at once from a mapped dataset whose shard indexes are
 * all unchecked: each shard's lazy check runs once, under its lock, and
 * every thread decodes every block (ThreadSanitizer's build checks the
 * flag's ordering). */
static void test_lazy_threads(const char *root)
{
    char dir[4200];
    lf_dataset *ds = new_mapped(dir, root, "threads", 600);
    lf_shard_error err;
    ASSERT_GE(lf_dataset_shards(ds), 4);
    pthread_t t[4];
    racer r[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (racer){.ds = ds, .start = (uint32_t)(i * lf_dataset_blocks(ds) / 4)};
        ASSERT_EQ(pthread_create(&t[i], NULL, race_blocks, &r[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        ASSERT_EQ(r[i].bad, 0);
    }
    ASSERT_EQ(lf_dataset_check_indexes(ds, &err), 0);
    lf_dataset_close(ds);
}

static uint64_t ten_by_i(void *arg, uint64_t i)
{
    (void)arg;
    return i == 9 ? (uint64_t)UINT32_MAX + 1 : 10 * i + 1;
}

static void threes(void *arg, uint64_t b, uint32_t *n, uint32_t *raw)
{
    (void)arg;
    *n = b < 3 ? 3 : 1;
    *raw = 100;
}

/* A manifest-less index (index-only): blocks of 3, lengths in place; a
 * length past u32 is refused and leaves no file. */
static void test_index_file(const char *root)
{
    char dir[4200], lfx[4300];
    snprintf(dir, sizeof dir, "%s/io", root);
    ASSERT_EQ(mkdir(dir, 0777), 0);
    path_of(lfx, sizeof lfx, dir, LF_INDEX_NAME);
    lf_index_spec spec = {.samples = 10, .blocks = 4, .block = threes, .length = ten_by_i};
    lf_shard_error err;
    ASSERT_EQ(lf_index_write(dir, &spec, &err), LF_SHARD_E_ARG);
    ASSERT_TRUE(strstr(err.msg, "sample 9") != NULL);
    ASSERT_NE(access(lfx, F_OK), 0);
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, LF_INDEX_NAME);
    ASSERT_NE(access(tmp, F_OK), 0);
    spec.samples = 5;   /* the blocks' counts no longer sum to the samples */
    ASSERT_EQ(lf_index_write(dir, &spec, &err), LF_SHARD_E_ARG);
    spec.blocks = 2;
    spec.samples = 6;
    ASSERT_EQ(lf_index_write(dir, &spec, &err), 0);
    lf_schema s = {.nfields = 1};
    snprintf(s.fields[0].name, sizeof s.fields[0].name, "tokens");
    s.fields[0].type = LF_FIELD_TOKENS_U16;
    lf_dataset *c;
    ASSERT_EQ(lf_dataset_open_index_file(lfx, "the-name", &s, &c, &err), 0);
    ASSERT_EQ(lf_dataset_samples(c), 6);
    ASSERT_EQ(lf_dataset_blocks(c), 2);
    ASSERT_EQ(lf_dataset_index_only(c), 1);
    for (uint64_t i = 0; i < 6; i++) {
        ASSERT_EQ(lf_dataset_sample_length(c, i), 10 * i + 1);
        ASSERT_EQ(lf_dataset_sample_block(c, i), i / 3);
    }
    uint8_t buf[4096];
    ASSERT_EQ(lf_dataset_read_block(c, 1, buf, sizeof buf, &err), LF_SHARD_E_ARG);
    ASSERT_TRUE(strstr(err.msg, "the-name") != NULL);
    lf_dataset_close(c);
    /* A refused schema is told as itself, not as out of memory, with or
     * without an error record. */
    lf_schema bad = {.nfields = 0};
    ASSERT_EQ(lf_dataset_open_index_file(lfx, "the-name", &bad, &c, &err), LF_SHARD_E_ARG);
    ASSERT_EQ(lf_dataset_open_index_file(lfx, "the-name", &bad, &c, NULL), LF_SHARD_E_ARG);
    /* A manifest's hash where none is wanted: refused as stale. */
    spec.manifest_hash = 42;
    ASSERT_EQ(lf_index_write(dir, &spec, &err), 0);
    ASSERT_EQ(lf_dataset_open_index_file(lfx, "the-name", &s, &c, &err), LF_SHARD_E_FORMAT);
}

/* The summary's counts of ds's lengths (ascending) into len/cnt; how many. */
static uint32_t count_lengths(const lf_dataset *ds, uint64_t *len, uint64_t *cnt)
{
    uint32_t k = 0;
    for (uint64_t l = 0; l < (1u << 16); l++) {
        uint64_t c = 0;
        for (uint64_t i = 0; i < lf_dataset_samples(ds); i++) c += lf_dataset_sample_length(ds, i) == l;
        if (c) len[k] = l, cnt[k++] = c;
    }
    return k;
}

/* Writes path's bytes (size) back with the u32 at off set to v and the
 * header's self hash (its last 8 of 72 bytes) taken again. */
static void rewrite_u32(const char *path, uint8_t *b, size_t size, size_t off, uint32_t v)
{
    memcpy(b + off, &v, 4);
    uint64_t h = XXH3_64bits(b, 64);
    memcpy(b + 64, &h, 8);
    FILE *f = fopen(path, "wb");
    ASSERT_TRUE(f != NULL && fwrite(b, 1, size, f) == size);
    fclose(f);
}

/* Refused naming the summary, saying words, then how to write it again. */
static void expect_summary_refused(const char *dir, int status, const char *words)
{
    char w[200];
    snprintf(w, sizeof w, "%s: run `lf-shard index DIR`", words);
    expect_refused_naming(dir, status, LF_INDEX_SUMMARY_NAME, w);
}

/* The index summary (FORMAT.md section 11): none without the file; written,
 * it reads back as given, opened for lengths or mapped; a damaged one, one
 * of an unknown version, or one written for another index.lfx is refused
 * naming it and lf-shard index; lf_index_write removes it with the index
 * it summarised; counts that are not the index's are not taken to write. */
static void test_summary(const char *root)
{
    char dir[4200], other[4200], path[4300], opath[4300];
    snprintf(dir, sizeof dir, "%s/summary", root);
    snprintf(other, sizeof other, "%s/summary-other", root);
    make_dataset(dir, 0, 300);
    make_dataset(other, 0, 301);
    path_of(path, sizeof path, dir, LF_INDEX_SUMMARY_NAME);
    path_of(opath, sizeof opath, other, LF_INDEX_SUMMARY_NAME);
    lf_dataset *c;
    lf_shard_error err;
    ASSERT_EQ(lf_dataset_open_lengths(dir, &c, &err), 0);
    ASSERT_TRUE(lf_dataset_index_summary(c) == NULL);   /* none written */
    static uint64_t len[1u << 16], cnt[1u << 16];
    lf_index_summary w = {.samples = 300, .blocks = lf_dataset_blocks(c),
                          .ncounts = count_lengths(c, len, cnt), .length = len, .count = cnt,
                          .digest_kind = 7, .digest = 0x1234567890abcdefULL};
    lf_dataset_close(c);
    ASSERT_GT(w.ncounts, 1);
    w.samples = 299;
    ASSERT_EQ(lf_index_summary_write(dir, &w, &err), LF_SHARD_E_ARG);
    w.samples = 300;
    ASSERT_EQ(lf_index_summary_write(dir, &w, &err), 0);
    for (int mapped = 0; mapped <= 1; mapped++) {
        const char *d = dir;
        ASSERT_EQ(mapped ? lf_dataset_open_mapped(&d, 1, &c, &err)
                         : lf_dataset_open_lengths(dir, &c, &err), 0);
        const lf_index_summary *r = lf_dataset_index_summary(c);
        ASSERT_TRUE(r != NULL);
        ASSERT_EQ(r->samples, 300);
        ASSERT_EQ(r->blocks, w.blocks);
        ASSERT_EQ(r->ncounts, w.ncounts);
        ASSERT_EQ(r->digest_kind, 7);
        ASSERT_EQ(r->digest, w.digest);
        ASSERT_TRUE(memcmp(r->length, len, w.ncounts * sizeof *len) == 0);
        ASSERT_TRUE(memcmp(r->count, cnt, w.ncounts * sizeof *cnt) == 0);
        lf_dataset_close(c);
    }
    size_t size;
    uint8_t *keep = gen_slurp(path, &size);
    flip(path, (long)size - 2);                              /* a count */
    expect_summary_refused(dir, LF_SHARD_E_FORMAT, "damaged (size, counts or checksum)");
    flip(path, (long)size - 2);
    flip(path, 44);                                          /* the digest: the header */
    expect_summary_refused(dir, LF_SHARD_E_FORMAT, "header is damaged");
    flip(path, 44);
    uint8_t *b = gen_slurp(path, &size);
    rewrite_u32(path, b, size, 8, 2);                        /* version 2 */
    expect_summary_refused(dir, LF_SHARD_E_VERSION, "version 2 (this reader knows 1)");
    rewrite_u32(path, b, size, 8, 1);
    ASSERT_EQ(lf_dataset_open_lengths(dir, &c, &err), 0);   /* as written */
    lf_dataset_close(c);
    /* Another index's summary beside this one: stale. */
    w.samples = 301;
    ASSERT_EQ(lf_dataset_open_lengths(other, &c, &err), 0);
    w.blocks = lf_dataset_blocks(c);
    w.ncounts = count_lengths(c, len, cnt);
    lf_dataset_close(c);
    ASSERT_EQ(lf_index_summary_write(other, &w, &err), 0);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", opath, path);
    ASSERT_EQ(system(cmd), 0);
    expect_summary_refused(dir, LF_SHARD_E_FORMAT, "another index.lfx than the one beside it");
    /* Written by the planner's side (plan_cli_summary_write, which removes
     * the stale one first), it is the lengths' (plan_cli_summary_check, as
     * lf-shard verify checks it); one of another digest is not. */
    ASSERT_EQ(plan_cli_summary_write(dir, &err), 0);
    ASSERT_EQ(plan_cli_summary_check(dir, &err), 0);
    ASSERT_EQ(lf_dataset_open_lengths(dir, &c, &err), 0);
    w = *lf_dataset_index_summary(c);
    w.digest++;
    ASSERT_EQ(lf_index_summary_write(dir, &w, &err), 0);
    lf_dataset_close(c);
    ASSERT_EQ(plan_cli_summary_check(dir, &err), LF_SHARD_E_FORMAT);
    if (!strstr(err.msg, "not those of the lengths") || !strstr(err.msg, "lf-shard index DIR"))
        TEST_FAIL_("a wrong digest: %s", err.msg);
    /* Writing the index again removes its summary. */
    ASSERT_EQ(lf_dataset_write_index(dir, &err), 0);
    ASSERT_TRUE(access(path, F_OK) != 0);
    ASSERT_EQ(plan_cli_summary_check(dir, &err), 1);
    ASSERT_EQ(lf_dataset_open_lengths(dir, &c, &err), 0);
    ASSERT_TRUE(lf_dataset_index_summary(c) == NULL);
    lf_dataset_close(c);
    free(b);
    free(keep);
}

int main(void)
{
    const char *root = test_tmpdir();
    test_same_as_shards(root, 0);   /* tokens */
    test_same_as_shards(root, 2);   /* jpeg: width x height */
    test_older_dataset(root);
    test_mapped(root, 0);   /* tokens */
    test_mapped(root, 2);   /* jpeg */
    test_record_off_by_one(root);
    test_mapped_many(root);
    test_damaged(root);
    test_verify_disagreement(root);
    test_damaged_sample_entry(root);
    test_pieces_across_shards(root);
    test_lazy_threads(root);
    test_index_file(root);
    test_summary(root);
    return 0;
}
