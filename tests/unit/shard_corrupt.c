/*
 * shard_corrupt.c — damaged datasets are detected, never crash the reader,
 * never yield wrong data.
 *
 * A small dataset (several shards, several blocks each) is written once.
 * Then, one at a time, a single byte is flipped at over a thousand positions
 * spread over every region of every file (manifest, each header, each block
 * including its padding, each index, each footer), and each file is cut
 * short at over a hundred lengths (and grown by a byte). After each change:
 *   - the reader (open, then read + decode every block, then locate every
 *     sample's fields) must fail somewhere with a format/checksum kind of
 *     status whose message names the damaged file, and every field it did
 *     return must equal the original;
 *   - so must the mapped reader (lf_dataset_open_mapped, from the
 *     dataset's index.lfx, each shard index checked when the first of its
 *     blocks is decoded, as lf-server reads it);
 *   - lf_dataset_verify must fail the same way.
 * The file is restored before the next change. The pristine dataset must
 * pass first, before and after, so a detection is never a reader that fails
 * on everything.
 */
#define GEN_MAX_COUNT 60
#include "unit/shard_gen.h"

#include <fcntl.h>
#include <stdbool.h>
#include <unistd.h>

typedef struct file {
    char path[4200];
    const char *name;            /* for messages: the part after the directory */
    uint8_t *orig;
    size_t size;
} file;

typedef struct tally {
    long flips, truncations;
    long by_region[5];           /* manifest, header, block, index, footer */
} tally;

enum { R_MANIFEST, R_HEADER, R_BLOCK, R_INDEX, R_FOOTER };
static const char *const region_names[] = {"manifest", "header", "block", "index", "footer"};

static const char *g_dir;
static lf_schema g_schema;

static bool bad_kind(int rc)
{
    return rc == LF_SHARD_E_FORMAT || rc == LF_SHARD_E_CHECKSUM ||
           rc == LF_SHARD_E_VERSION || rc == LF_SHARD_E_DECOMPRESS;
}

/* Runs the reader over the whole dataset, opened with the per-sample
 * table (mapped false) or mapped (index.lfx; each shard index checked when
 * the first of its blocks is decoded, as lf-server reads): 0 if it all
 * reads back intact, else the first failure's status (err filled). */
static int read_everything(bool mapped, lf_shard_error *err)
{
    lf_dataset *ds;
    const char *dirs[] = {g_dir};
    int rc = mapped ? lf_dataset_open_mapped(dirs, 1, &ds, err) : lf_dataset_open(g_dir, &ds, err);
    if (rc != 0) return rc;
    rc = gen_read_all(ds, &g_schema, err);
    lf_dataset_close(ds);
    return rc;
}

/* Each way of reading (the table, mapped, verify) fails with a format or
 * checksum kind of status naming the damaged file. */
static void expect_detected(const file *f, const char *what, size_t pos)
{
    static const char *const ways[] = {"the reader", "the mapped reader", "verify"};
    for (int w = 0; w < 3; w++) {
        lf_shard_error err = {0};
        int rc = w < 2 ? read_everything(w == 1, &err) : lf_dataset_verify(g_dir, NULL, NULL, &err);
        if (rc == 0) TEST_FAIL_("%s %s at %zu: not detected by %s", f->name, what, pos, ways[w]);
        if (!bad_kind(rc) || !strstr(err.msg, f->name))
            TEST_FAIL_("%s %s at %zu: %s: status %d: %s", f->name, what, pos, ways[w], rc,
                       err.msg);
    }
}

static void put_file(const file *f, size_t size)
{
    int fd = open(f->path, O_WRONLY | O_TRUNC);
    ASSERT_TRUE(fd >= 0);
    ASSERT_EQ(write(fd, f->orig, size), (long)size);
    close(fd);
}

static void flip_at(const file *f, size_t pos, tally *t, int region)
{
    uint8_t mask = (uint8_t)(pos % 3 == 0 ? 0xFF : 1u << (pos % 8));
    uint8_t byte = f->orig[pos] ^ mask;
    int fd = open(f->path, O_WRONLY);
    ASSERT_TRUE(fd >= 0);
    ASSERT_EQ(pwrite(fd, &byte, 1, (off_t)pos), 1);
    expect_detected(f, "flip", pos);
    ASSERT_EQ(pwrite(fd, &f->orig[pos], 1, (off_t)pos), 1);
    close(fd);
    t->flips++;
    t->by_region[region]++;
}

/* Flips about `count` bytes spread evenly over [from, to), both ends included. */
static void flip_range(const file *f, size_t from, size_t to, size_t count, tally *t, int region)
{
    if (to <= from) return;
    size_t step = (to - from) / count;
    if (step == 0) step = 1;
    for (size_t pos = from; pos < to; pos += step) flip_at(f, pos, t, region);
    if ((to - 1 - from) % step != 0) flip_at(f, to - 1, t, region);
}

static void truncate_file(const file *f, tally *t)
{
    size_t count = 25, step = f->size / count;
    for (size_t len = 0; len < f->size; len += step ? step : 1) {
        put_file(f, len);
        expect_detected(f, "truncation", len);
        t->truncations++;
    }
    put_file(f, f->size - 1);
    expect_detected(f, "truncation", f->size - 1);
    t->truncations++;
    int fd = open(f->path, O_WRONLY | O_APPEND);   /* one byte too many */
    ASSERT_EQ(write(fd, "", 1), 1);
    close(fd);
    expect_detected(f, "extension", f->size);
    put_file(f, f->size);
}

static void load(file *f, const char *dir, const char *name)
{
    snprintf(f->path, sizeof f->path, "%s/%s", dir, name);
    f->name = strrchr(f->path, '/') + 1;
    f->orig = gen_slurp(f->path, &f->size);
}

/* Flips over every region of one shard file, using the dataset's index for
 * the block boundaries. */
static void damage_shard(const lf_dataset *ds, uint32_t shard, const file *f, tally *t)
{
    flip_range(f, 0, 800, 60, t, R_HEADER);                /* fields and schema */
    flip_range(f, 800, LF_SHARD_ALIGN, 12, t, R_HEADER);   /* reserved zeros */
    uint64_t index_at = LF_SHARD_ALIGN;
    for (uint64_t b = 0; b < lf_dataset_blocks(ds); b++) {
        const lf_block_info *bi = lf_dataset_block(ds, b);
        if (bi->shard != shard) continue;
        flip_range(f, bi->file_offset, bi->file_offset + bi->stored_size, 14, t, R_BLOCK);
        index_at = bi->file_offset + bi->stored_size;
    }
    flip_range(f, index_at, f->size - 64, 40, t, R_INDEX);
    flip_range(f, f->size - 64, f->size, 64, t, R_FOOTER);
}

/* A shard file that is gone: open fails with an I/O status naming it. */
static void missing_shard(void)
{
    char from[4300], to[4300];
    snprintf(from, sizeof from, "%s/shard-00001.lfs", g_dir);
    snprintf(to, sizeof to, "%s/moved", g_dir);
    ASSERT_EQ(rename(from, to), 0);
    lf_shard_error err = {0};
    lf_dataset *ds;
    ASSERT_EQ(lf_dataset_open(g_dir, &ds, &err), LF_SHARD_E_IO);
    ASSERT_TRUE(strstr(err.msg, "shard-00001.lfs") != NULL);
    ASSERT_EQ(lf_dataset_verify(g_dir, NULL, NULL, &err), LF_SHARD_E_IO);
    ASSERT_EQ(rename(to, from), 0);
}

int main(void)
{
    g_dir = test_tmpdir();
    gen_schema(&g_schema, 0);
    lf_writer_options o = {.block_bytes = 2048, .shard_bytes = 3 * 4096, .threads = 2};
    gen_write(g_dir, &g_schema, &o, 40);

    lf_shard_error err = {0};
    if (lf_dataset_write_index(g_dir, &err) != 0) TEST_FAIL_("index: %s", err.msg);
    for (int w = 0; w < 2; w++)
        if (read_everything(w == 1, &err) != 0) TEST_FAIL_("pristine dataset fails: %s", err.msg);
    ASSERT_EQ(lf_dataset_verify(g_dir, NULL, NULL, &err), 0);

    lf_dataset *ds;
    ASSERT_EQ(lf_dataset_open(g_dir, &ds, &err), 0);
    ASSERT_GE(lf_dataset_shards(ds), 3);
    ASSERT_GE(lf_dataset_blocks(ds), 2 * lf_dataset_shards(ds));
    tally t = {0};
    file m;
    load(&m, g_dir, LF_MANIFEST_NAME);
    flip_range(&m, 0, m.size, 150, &t, R_MANIFEST);
    truncate_file(&m, &t);
    for (uint32_t s = 0; s < lf_dataset_shards(ds); s++) {
        file f;
        load(&f, g_dir, strrchr(lf_dataset_shard_path(ds, s), '/') + 1);
        damage_shard(ds, s, &f, &t);
        truncate_file(&f, &t);
        free(f.orig);
    }
    free(m.orig);
    lf_dataset_close(ds);

    /* the dataset is whole again after all the restores */
    ASSERT_EQ(read_everything(false, &err), 0);
    ASSERT_EQ(read_everything(true, &err), 0);
    missing_shard();
    printf("%ld flips (", t.flips);
    for (int r = 0; r < 5; r++) printf("%s%s %ld", r ? ", " : "", region_names[r], t.by_region[r]);
    printf("), %ld truncations: all detected\n", t.truncations);
    ASSERT_GE(t.flips, 1000);
    ASSERT_GE(t.truncations, 100);
    for (int r = 0; r < 5; r++) ASSERT_GE(t.by_region[r], 50);
    return 0;
}
