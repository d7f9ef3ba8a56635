/*
 * shard_per_token.c — per-token fields (format version 2): a dataset with
 * one is written as version 2 in manifest, header and footer, one without
 * stays version 1 (so version-1 readers still read it); the values come
 * back with as many elements as the tokens; a sample whose per-token field
 * is one value short is refused by the writer, and a per-token field beside
 * a non-token cost field by the schema check. Pieces of documents
 * (lf_writer_add_piece, also version 2): each records where it starts in its
 * document, the reader gives it back, and a piece that does not follow the
 * one before it, or without lf_writer_options.pieces, is refused.
 */
#include "unit/shard_gen.h"

static void ft_schema(lf_schema *s, int per_token)
{
    memset(s, 0, sizeof *s);
    s->nfields = per_token ? 3 : 2;
    snprintf(s->fields[0].name, LF_FIELD_NAME_MAX, "tokens");
    s->fields[0].type = LF_FIELD_TOKENS_U32;
    snprintf(s->fields[1].name, LF_FIELD_NAME_MAX, "prompt_len");
    s->fields[1].type = LF_FIELD_LABEL_I64;
    snprintf(s->fields[2].name, LF_FIELD_NAME_MAX, "loss_mask");
    s->fields[2].type = LF_FIELD_PER_TOKEN_U8;
}

/* The u32 at byte `at` of a file: a version field. */
static uint32_t file_u32(const char *dir, const char *name, long at)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t n;
    uint8_t *p = gen_slurp(path, &n);
    long off = at < 0 ? (long)n + at : at;
    uint32_t v = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 | (uint32_t)p[off + 2] << 16 |
                 (uint32_t)p[off + 3] << 24;
    free(p);
    return v;
}

/* Writes 5 samples of i+1 tokens, prompt_len i / 2, mask 0 before it. */
static void write_set(const char *dir, const lf_schema *s)
{
    lf_writer *w;
    lf_shard_error err;
    ASSERT_EQ(lf_writer_create(dir, s, NULL, &w, &err), 0);
    for (uint32_t i = 0; i < 5; i++) {
        uint32_t tok[8];
        uint8_t mask[8];
        int64_t prompt = i / 2;
        for (uint32_t k = 0; k <= i; k++) {
            tok[k] = 1000 + 10 * i + k;
            mask[k] = k >= prompt;
        }
        lf_field_input in[3] = {{.data = tok, .size = 4 * (i + 1)},
                                {.data = &prompt, .size = 8},
                                {.data = mask, .size = i + 1}};
        ASSERT_EQ(lf_writer_add(w, in, &err), (int64_t)i);
    }
    ASSERT_EQ(lf_writer_finish(w, NULL, &err), 0);
}

static void check_versions(const char *dir, uint32_t want)
{
    ASSERT_EQ(file_u32(dir, LF_MANIFEST_NAME, 8), want);
    ASSERT_EQ(file_u32(dir, "shard-00000.lfs", 8), want);
    ASSERT_EQ(file_u32(dir, "shard-00000.lfs", -64 + 8), want);
}

/* A document of 7 tokens in pieces of 3, 3, 1, then one of 2 tokens. */
static void test_pieces(const char *root)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/pieces", root);
    lf_schema s;
    ft_schema(&s, 0);
    s.nfields = 1;
    lf_writer_options o = {.pieces = 1, .block_bytes = 1 << 16};
    lf_writer *w;
    lf_shard_error err;
    uint32_t tok[3] = {1, 2, 3};
    lf_field_input in3 = {.data = tok, .size = 12}, in1 = {.data = tok, .size = 4};
    ASSERT_EQ(lf_writer_create(dir, &s, NULL, &w, &err), 0);   /* no .pieces: refused */
    ASSERT_EQ(lf_writer_add_piece(w, &in3, 3, &err), LF_SHARD_E_ARG);
    lf_writer_abort(w);
    ASSERT_EQ(lf_writer_create(dir, &s, &o, &w, &err), 0);
    ASSERT_EQ(lf_writer_add_piece(w, &in3, 0, &err), 0);
    ASSERT_EQ(lf_writer_add_piece(w, &in3, 4, &err), LF_SHARD_E_ARG);   /* a gap */
    ASSERT_EQ(lf_writer_add_piece(w, &in3, 3, &err), 1);
    ASSERT_EQ(lf_writer_add_piece(w, &in1, 6, &err), 2);
    ASSERT_EQ(lf_writer_add_piece(w, &in1, 0, &err), 3);
    ASSERT_EQ(lf_writer_finish(w, NULL, &err), 0);
    check_versions(dir, 2);
    lf_dataset *ds;
    ASSERT_EQ(lf_dataset_open(dir, &ds, &err), 0);
    static const uint32_t want[4] = {0, 3, 6, 0};
    for (uint64_t i = 0; i < 4; i++)
        ASSERT_EQ(lf_dataset_sample(ds, i)->doc_offset, want[i]);
    lf_dataset_close(ds);
}

int main(void)
{
    const char *root = test_tmpdir();
    char v1[4200], v2[4200], bad[4200];
    snprintf(v1, sizeof v1, "%s/v1", root);
    snprintf(v2, sizeof v2, "%s/v2", root);
    snprintf(bad, sizeof bad, "%s/bad", root);
    lf_schema s;
    ft_schema(&s, 0);
    ASSERT_EQ(lf_schema_version(&s), 1);
    write_set(v1, &s);
    check_versions(v1, 1);
    ft_schema(&s, 1);
    ASSERT_EQ(lf_schema_version(&s), 2);
    write_set(v2, &s);
    check_versions(v2, 2);

    lf_dataset *ds;
    lf_shard_error err;
    ASSERT_EQ(lf_dataset_open(v2, &ds, &err), 0);
    uint8_t raw[4096], stored[4 * LF_SHARD_ALIGN];
    lf_block_decoder *d;
    ASSERT_EQ(lf_block_decoder_create(&d), 0);
    for (uint64_t i = 0; i < 5; i++) {
        uint64_t bi = lf_dataset_sample_block(ds, i);
        const lf_block_info *b = lf_dataset_block(ds, bi);
        ASSERT_EQ(lf_dataset_read_block(ds, bi, stored, sizeof stored, &err),
                  (long)b->stored_size);
        ASSERT_EQ(lf_block_decode(d, ds, bi, stored, b->stored_size, raw, sizeof raw, &err),
                  (long)b->raw_size);
        lf_field_view v[LF_MAX_FIELDS];
        ASSERT_EQ(lf_sample_fields(ds, i, raw, b->raw_size, v, &err), 0);
        ASSERT_EQ(v[2].count, v[0].count);
        int64_t prompt;
        memcpy(&prompt, v[1].data, 8);
        ASSERT_EQ(prompt, (int64_t)i / 2);
        for (uint32_t k = 0; k < v[2].count; k++)
            ASSERT_EQ(((const uint8_t *)v[2].data)[k], (uint8_t)(k >= prompt));
    }
    lf_block_decoder_free(d);
    lf_dataset_close(ds);
    ASSERT_EQ(lf_dataset_verify(v2, NULL, NULL, &err), 0);

    lf_writer *w;
    ASSERT_EQ(lf_writer_create(bad, &s, NULL, &w, &err), 0);
    uint32_t tok[3] = {1, 2, 3};
    uint8_t mask[2] = {0, 1};
    int64_t prompt = 1;
    lf_field_input in[3] = {{.data = tok, .size = 12}, {.data = &prompt, .size = 8},
                            {.data = mask, .size = 2}};
    ASSERT_EQ(lf_writer_add(w, in, &err), LF_SHARD_E_ARG);
    ASSERT_TRUE(strstr(err.msg, "loss_mask") != NULL);
    lf_writer_abort(w);

    s.fields[0].type = LF_FIELD_JPEG;   /* a per-token field needs tokens to count */
    ASSERT_EQ(lf_schema_validate(&s, &err), LF_SHARD_E_ARG);
    test_pieces(root);
    return 0;
}
