/*
 * shard_writer.c — the writer's contract beyond the round trip: output bytes
 * do not depend on the thread count; bad schemas, bad field sizes and bad
 * options are refused with E_ARG; an existing dataset is not overwritten;
 * abort leaves no file behind; progress is reported; schema helpers agree.
 */
#include "unit/shard_gen.h"

#include <dirent.h>

static char *path_in(const char *dir, const char *name)
{
    static char buf[4300];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    ASSERT_TRUE(d != NULL);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* The same input with 1 and 4 threads gives byte-identical files. */
static void test_deterministic(const char *root, const lf_schema *s)
{
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/t1", root);
    snprintf(b, sizeof b, "%s/t4", root);
    lf_writer_options o = {.block_bytes = 8192, .shard_bytes = 64 << 10, .threads = 1};
    lf_writer_stats sa = gen_write(a, s, &o, 150);
    o.threads = 4;
    lf_writer_stats sb = gen_write(b, s, &o, 150);
    ASSERT_MEM_EQ(&sa, &sb, sizeof sa);
    ASSERT_GT(sa.shards, 1);
    const char *names[] = {LF_MANIFEST_NAME, "shard-00000.lfs", "shard-00001.lfs"};
    for (size_t i = 0; i < 3; i++) {
        size_t na, nb;
        uint8_t *pa = gen_slurp(path_in(a, names[i]), &na);
        uint8_t *pb = gen_slurp(path_in(b, names[i]), &nb);
        ASSERT_EQ(na, nb);
        ASSERT_MEM_EQ(pa, pb, na);
        free(pa);
        free(pb);
    }
}

static void expect_create_fails(const char *dir, const lf_schema *s, const lf_writer_options *o,
                                int want)
{
    lf_writer *w = NULL;
    lf_shard_error err = {0};
    ASSERT_EQ(lf_writer_create(dir, s, o, &w, &err), want);
    ASSERT_TRUE(w == NULL);
    ASSERT_EQ(err.status, want);
    ASSERT_TRUE(err.msg[0] != '\0');
}

static void test_bad_arguments(const char *root, const lf_schema *good)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/bad", root);
    lf_schema s = *good;
    s.nfields = 0;
    expect_create_fails(dir, &s, NULL, LF_SHARD_E_ARG);
    s = *good;
    s.cost_field = s.nfields;
    expect_create_fails(dir, &s, NULL, LF_SHARD_E_ARG);
    s = *good;
    strcpy(s.fields[1].name, s.fields[0].name);
    expect_create_fails(dir, &s, NULL, LF_SHARD_E_ARG);
    s = *good;
    s.fields[3].row_width = 0;   /* frames need a row width */
    expect_create_fails(dir, &s, NULL, LF_SHARD_E_ARG);
    s = *good;
    s.fields[0].row_width = 2;   /* tokens take none */
    expect_create_fails(dir, &s, NULL, LF_SHARD_E_ARG);
    s = *good;
    s.fields[2].type = 99;
    expect_create_fails(dir, &s, NULL, LF_SHARD_E_ARG);
    lf_writer_options o = {.zstd_level = 99};
    expect_create_fails(dir, good, &o, LF_SHARD_E_ARG);
    o = (lf_writer_options){.shard_prefix = "a/b"};
    expect_create_fails(dir, good, &o, LF_SHARD_E_ARG);
    o = (lf_writer_options){.shard_prefix = ".hidden"};
    expect_create_fails(dir, good, &o, LF_SHARD_E_ARG);

    /* field sizes that are not whole elements; a label that is not 8 bytes */
    lf_writer *w;
    lf_shard_error err = {0};
    ASSERT_EQ(lf_writer_create(dir, good, &(lf_writer_options){.threads = 1}, &w, &err), 0);
    gen_sample g;
    gen_sample_make(good, 1, &g);
    size_t keep = g.in[0].size;
    g.in[0].size = 3;   /* u16 tokens */
    ASSERT_EQ(lf_writer_add(w, g.in, &err), LF_SHARD_E_ARG);
    g.in[0].size = keep;
    g.in[7].size = 4;   /* label */
    ASSERT_EQ(lf_writer_add(w, g.in, &err), LF_SHARD_E_ARG);
    g.in[7].size = 8;
    static const uint8_t frames[16];
    g.in[4].data = frames;
    g.in[4].size = 12;  /* f32 frames of row width 2: 8-byte elements */
    ASSERT_EQ(lf_writer_add(w, g.in, &err), LF_SHARD_E_ARG);
    g.in[4].size = 16;
    ASSERT_EQ(lf_writer_add(w, g.in, &err), 0);   /* refused samples took no id */
    gen_free(&g);
    ASSERT_EQ(lf_writer_finish(w, NULL, &err), 0);

    /* a directory that already holds a dataset is not written over */
    expect_create_fails(dir, good, NULL, LF_SHARD_E_ARG);
}

static void count_progress(void *arg, const lf_writer_stats *st)
{
    uint64_t *calls = arg;
    ASSERT_GT(st->blocks, 0);
    calls[0]++;
    calls[1] = st->samples;
}

static void test_abort_and_progress(const char *root, const lf_schema *s)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/abort", root);
    lf_writer *w;
    lf_shard_error err = {0};
    lf_writer_options o = {.block_bytes = 0, .shard_bytes = 4096, .threads = 2};
    ASSERT_EQ(lf_writer_create(dir, s, &o, &w, &err), 0);
    uint64_t calls[2] = {0, 0};
    lf_writer_set_progress(w, count_progress, calls);
    for (uint64_t i = 0; i < 40; i++) {
        gen_sample g;
        gen_sample_make(s, i, &g);
        ASSERT_EQ(lf_writer_add(w, g.in, &err), (int64_t)i);
        gen_free(&g);
    }
    ASSERT_GT(count_entries(dir), 0);   /* shards written so far, under temp names */
    ASSERT_GT(calls[0], 10);
    lf_writer_abort(w);
    ASSERT_EQ(count_entries(dir), 0);
    lf_dataset *ds;
    ASSERT_EQ(lf_dataset_open(dir, &ds, &err), LF_SHARD_E_IO);
    lf_writer_abort(NULL);

    /* finish reports progress once per block, the last with every sample */
    snprintf(dir, sizeof dir, "%s/progress", root);
    ASSERT_EQ(lf_writer_create(dir, s, &o, &w, &err), 0);
    calls[0] = calls[1] = 0;
    lf_writer_set_progress(w, count_progress, calls);
    for (uint64_t i = 0; i < 25; i++) {
        gen_sample g;
        gen_sample_make(s, i, &g);
        ASSERT_EQ(lf_writer_add(w, g.in, &err), (int64_t)i);
        gen_free(&g);
    }
    ASSERT_EQ(lf_writer_finish(w, NULL, &err), 0);
    ASSERT_EQ(calls[0], 25);
    ASSERT_EQ(calls[1], 25);
}

static void test_type_names(void)
{
    for (int t = LF_FIELD_TOKENS_U16; t <= LF_FIELD_PER_TOKEN_I32; t++) {
        const char *name = lf_field_type_name((uint32_t)t);
        ASSERT_TRUE(name != NULL);
        ASSERT_EQ(lf_field_type_parse(name), t);
    }
    ASSERT_TRUE(lf_field_type_name(0) == NULL);
    ASSERT_TRUE(lf_field_type_name(11) == NULL);
    ASSERT_EQ(lf_field_type_parse("nope"), -1);
    ASSERT_EQ(lf_field_type_parse(NULL), -1);
    lf_field_def f = {.type = LF_FIELD_FRAMES_F32, .row_width = 3};
    ASSERT_EQ(lf_field_elem_size(&f), 12);
    f = (lf_field_def){.type = LF_FIELD_LABEL_I64};
    ASSERT_EQ(lf_field_elem_size(&f), 8);
    for (int st = LF_SHARD_E_DECOMPRESS; st <= 0; st++)
        ASSERT_TRUE(strcmp(lf_shard_strerror(st), "unknown status") != 0);
    ASSERT_STR_EQ(lf_shard_strerror(-100), "unknown status");
}

int main(void)
{
    const char *root = test_tmpdir();
    lf_schema s;
    gen_schema(&s, 0);
    test_type_names();
    test_deterministic(root, &s);
    test_bad_arguments(root, &s);
    test_abort_and_progress(root, &s);
    return 0;
}
