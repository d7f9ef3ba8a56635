/*
 * shard_gen.h — deterministic test datasets for the shard format tests.
 *
 * One schema with every field type; sample i's fields are a pure function
 * of i (sizes vary, some fields are empty), so a test can regenerate what it
 * wrote and compare every byte the reader returns.
 */
#ifndef SHARD_GEN_H
#define SHARD_GEN_H

#include "lf_shard.h"
#include "test.h"

#define GEN_FIELDS 8
#ifndef GEN_MAX_COUNT
#define GEN_MAX_COUNT 1500       /* elements of the first field; others up to 200 */
#endif

typedef struct gen_sample {
    uint8_t *buf[GEN_FIELDS];
    lf_field_input in[GEN_FIELDS];
} gen_sample;

/* Every field type once; cost_field picks which one is the cost input. */
static inline void gen_schema(lf_schema *s, uint32_t cost_field)
{
    static const struct { const char *name; uint32_t type, row; } f[GEN_FIELDS] = {
        {"tok16", LF_FIELD_TOKENS_U16, 0}, {"tok32", LF_FIELD_TOKENS_U32, 0},
        {"image", LF_FIELD_JPEG, 0},       {"half", LF_FIELD_FRAMES_F16, 3},
        {"float", LF_FIELD_FRAMES_F32, 2}, {"pcm", LF_FIELD_FRAMES_I16, 5},
        {"blob", LF_FIELD_BYTES, 0},       {"label", LF_FIELD_LABEL_I64, 0},
    };
    memset(s, 0, sizeof *s);
    s->nfields = GEN_FIELDS;
    s->cost_field = cost_field;
    for (uint32_t i = 0; i < GEN_FIELDS; i++) {
        snprintf(s->fields[i].name, sizeof s->fields[i].name, "%s", f[i].name);
        s->fields[i].type = f[i].type;
        s->fields[i].row_width = f[i].row;
    }
}

static inline uint64_t gen_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Sample id's fields; the buffers are malloc'd (gen_free). */
static inline void gen_sample_make(const lf_schema *s, uint64_t id, gen_sample *g)
{
    memset(g, 0, sizeof *g);
    for (uint32_t i = 0; i < s->nfields; i++) {
        uint64_t r = gen_mix(id * 131 + i);
        size_t elem = lf_field_elem_size(&s->fields[i]);
        size_t count = s->fields[i].type == LF_FIELD_LABEL_I64 ? 1
                       : (r % 7 == 0) ? 0                     /* some empty fields */
                       : (size_t)(r >> 8) % (i == 0 ? GEN_MAX_COUNT
                                                   : (GEN_MAX_COUNT < 200 ? GEN_MAX_COUNT : 200));
        size_t size = count * elem;
        g->buf[i] = malloc(size + 1);
        ASSERT_TRUE(g->buf[i] != NULL);
        for (size_t k = 0; k < size; k++)
            g->buf[i][k] = (uint8_t)(gen_mix(r + k / 8) >> (8 * (k % 8)));
        g->in[i].data = g->buf[i];
        g->in[i].size = size;
        if (s->fields[i].type == LF_FIELD_JPEG) {
            g->in[i].width = (uint32_t)(r % 4000);
            g->in[i].height = (uint32_t)((r >> 16) % 3000);
        }
    }
}

static inline void gen_free(gen_sample *g)
{
    for (uint32_t i = 0; i < GEN_FIELDS; i++) free(g->buf[i]);
}

/* Writes samples 0..n-1 into dir; returns the writer's totals. */
static inline lf_writer_stats gen_write(const char *dir, const lf_schema *s,
                                        const lf_writer_options *o, uint64_t n)
{
    lf_writer *w;
    lf_shard_error err = {0};
    lf_writer_stats st;
    int rc = lf_writer_create(dir, s, o, &w, &err);
    if (rc != 0) TEST_FAIL_("lf_writer_create: %s", err.msg);
    for (uint64_t i = 0; i < n; i++) {
        gen_sample g;
        gen_sample_make(s, i, &g);
        int64_t id = lf_writer_add(w, g.in, &err);
        if (id < 0) TEST_FAIL_("lf_writer_add %" PRIu64 ": %s", i, err.msg);
        ASSERT_EQ(id, i);
        gen_free(&g);
    }
    if (lf_writer_finish(w, &st, &err) != 0) TEST_FAIL_("lf_writer_finish: %s", err.msg);
    ASSERT_EQ(st.samples, n);
    return st;
}

/* Checks sample id's fields (as located by lf_sample_fields) against the
 * generator; returns 0 when equal, -1 otherwise (no assert, so corruption
 * tests can use it). */
static inline int gen_compare(const lf_schema *s, uint64_t id, const lf_field_view *v)
{
    gen_sample g;
    gen_sample_make(s, id, &g);
    int rc = 0;
    for (uint32_t i = 0; i < s->nfields && rc == 0; i++) {
        size_t elem = lf_field_elem_size(&s->fields[i]);
        uint32_t t = s->fields[i].type;
        uint32_t want_count = (t == LF_FIELD_JPEG || t == LF_FIELD_BYTES ||
                               t == LF_FIELD_LABEL_I64) ? 1 : (uint32_t)(g.in[i].size / elem);
        if (v[i].size != g.in[i].size || v[i].count != want_count ||
            (v[i].size && memcmp(v[i].data, g.buf[i], v[i].size) != 0))
            rc = -1;
    }
    gen_free(&g);
    return rc;
}

/* A whole file, malloc'd; fails the test if it cannot be read. */
static inline uint8_t *gen_slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) TEST_FAIL_("cannot open %s", path);
    struct stat st;
    ASSERT_EQ(fstat(fileno(f), &st), 0);
    *size = (size_t)st.st_size;
    uint8_t *p = malloc(*size + 1);
    ASSERT_TRUE(p != NULL);
    ASSERT_EQ(fread(p, 1, *size, f), *size);
    fclose(f);
    return p;
}

/* Reads, decodes and locates every sample of ds, comparing each with the
 * generator. Returns 0 when all of it reads back, else the first failure's
 * status (err filled). Wrong data returned by the reader fails the test. */
static inline int gen_read_all(const lf_dataset *ds, const lf_schema *s, lf_shard_error *err)
{
    lf_block_decoder *d;
    ASSERT_EQ(lf_block_decoder_create(&d), 0);
    size_t scap = lf_dataset_max_block_stored(ds), rcap = lf_dataset_max_block_raw(ds);
    uint8_t *stored = malloc(scap + 1), *raw = malloc(rcap + 1);
    ASSERT_TRUE(stored && raw);
    int first = 0;
    for (uint64_t b = 0; b < lf_dataset_blocks(ds); b++) {
        const lf_block_info *bi = lf_dataset_block(ds, b);
        lf_shard_error e = {0};
        long n = lf_dataset_read_block(ds, b, stored, scap, &e);
        if (n >= 0 && n != (long)bi->stored_size) TEST_FAIL_("block %" PRIu64 ": size %ld", b, n);
        if (n >= 0) n = lf_block_decode(d, ds, b, stored, (size_t)n, raw, rcap, &e);
        if (n >= 0 && n != (long)bi->raw_size) TEST_FAIL_("block %" PRIu64 ": raw %ld", b, n);
        for (uint64_t i = bi->first_sample; n >= 0 && i < bi->first_sample + bi->nsamples; i++) {
            lf_field_view v[LF_MAX_FIELDS];
            int r = lf_sample_fields(ds, i, raw, (size_t)n, v, &e);
            if (r == 0 && gen_compare(s, i, v) != 0)
                TEST_FAIL_("wrong data returned for sample %" PRIu64, i);
            if (r != 0) n = r;
        }
        if (n < 0 && first == 0) {
            first = (int)n;
            *err = e;
        }
    }
    free(raw);
    free(stored);
    lf_block_decoder_free(d);
    return first;
}

#endif
