/*
 * format.c — the byte layout of FORMAT.md in one place: schema checks, and
 * the encoders and decoders of the header, footer, index entries and
 * manifest. The writer and the reader both go through these functions, so
 * the two cannot drift apart. Decoders check every value they can check on
 * their own (magic, version, reserved bytes, sizes); cross-checks between
 * regions are the reader's.
 */
#include "shard_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int shard_fail(lf_shard_error *err, int status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

const char *lf_shard_strerror(int status)
{
    switch (status) {
    case LF_SHARD_OK: return "success";
    case LF_SHARD_E_IO: return "I/O error";
    case LF_SHARD_E_NOMEM: return "out of memory";
    case LF_SHARD_E_FORMAT: return "malformed shard data";
    case LF_SHARD_E_CHECKSUM: return "checksum mismatch";
    case LF_SHARD_E_VERSION: return "unsupported format version";
    case LF_SHARD_E_ARG: return "invalid argument";
    case LF_SHARD_E_RANGE: return "index out of range";
    case LF_SHARD_E_BUFFER: return "buffer too small";
    case LF_SHARD_E_DECOMPRESS: return "decompression failed";
    default: return "unknown status";
    }
}

/* ---- field types -------------------------------------------------------- */

static const char *const type_names[] = {
    [LF_FIELD_TOKENS_U16] = "tokens_u16", [LF_FIELD_TOKENS_U32] = "tokens_u32",
    [LF_FIELD_JPEG] = "jpeg",             [LF_FIELD_FRAMES_F16] = "frames_f16",
    [LF_FIELD_FRAMES_F32] = "frames_f32", [LF_FIELD_FRAMES_I16] = "frames_i16",
    [LF_FIELD_BYTES] = "bytes",           [LF_FIELD_LABEL_I64] = "label_i64",
    [LF_FIELD_PER_TOKEN_U8] = "per_token_u8", [LF_FIELD_PER_TOKEN_I32] = "per_token_i32",
};
#define NTYPES (sizeof type_names / sizeof type_names[0])

const char *lf_field_type_name(uint32_t type)
{
    return type < NTYPES ? type_names[type] : NULL;
}

int lf_field_type_parse(const char *name)
{
    for (size_t t = 1; name && t < NTYPES; t++)
        if (strcmp(name, type_names[t]) == 0) return (int)t;
    return -1;
}

int lf_field_is_per_token(uint32_t type)
{
    return type == LF_FIELD_PER_TOKEN_U8 || type == LF_FIELD_PER_TOKEN_I32;
}

uint32_t lf_schema_version(const lf_schema *s)
{
    for (uint32_t i = 0; i < s->nfields && i < LF_MAX_FIELDS; i++)
        if (lf_field_is_per_token(s->fields[i].type)) return 2;
    return 1;
}

static bool is_frames(uint32_t type)
{
    return type == LF_FIELD_FRAMES_F16 || type == LF_FIELD_FRAMES_F32 ||
           type == LF_FIELD_FRAMES_I16;
}

size_t lf_field_elem_size(const lf_field_def *f)
{
    if (!f) return 0;
    if (is_frames(f->type)) {
        /* a frame row must fit a block several times over; also keeps the
         * product far from overflow */
        if (f->row_width == 0 || f->row_width > LF_MAX_ROW_WIDTH) return 0;
        size_t value = f->type == LF_FIELD_FRAMES_F32 ? 4 : 2;
        return value * f->row_width;
    }
    if (f->row_width != 0) return 0;
    switch (f->type) {
    case LF_FIELD_TOKENS_U16: return 2;
    case LF_FIELD_TOKENS_U32: return 4;
    case LF_FIELD_JPEG: case LF_FIELD_BYTES: case LF_FIELD_PER_TOKEN_U8: return 1;
    case LF_FIELD_LABEL_I64: return 8;
    case LF_FIELD_PER_TOKEN_I32: return 4;
    default: return 0;
    }
}

uint64_t record_cost_length(const lf_schema *s, uint32_t cost_size,
                            uint32_t width, uint32_t height)
{
    const lf_field_def *f = &s->fields[s->cost_field];
    if (f->type == LF_FIELD_JPEG) return (uint64_t)width * height;
    if (f->type == LF_FIELD_LABEL_I64) return 1;
    return cost_size / lf_field_elem_size(f);
}

int lf_schema_validate(const lf_schema *s, lf_shard_error *err)
{
    if (!s) return shard_fail(err, LF_SHARD_E_ARG, "schema: NULL");
    if (s->nfields < 1 || s->nfields > LF_MAX_FIELDS)
        return shard_fail(err, LF_SHARD_E_ARG, "schema: %u fields (1..%d allowed)",
                          s->nfields, LF_MAX_FIELDS);
    if (s->cost_field >= s->nfields)
        return shard_fail(err, LF_SHARD_E_ARG, "schema: cost field %u of %u fields",
                          s->cost_field, s->nfields);
    for (uint32_t i = 0; i < s->nfields; i++) {
        const lf_field_def *f = &s->fields[i];
        size_t len = strnlen(f->name, LF_FIELD_NAME_MAX);
        if (len == 0 || len == LF_FIELD_NAME_MAX)
            return shard_fail(err, LF_SHARD_E_ARG,
                              "schema: field %u: name empty or not terminated", i);
        if (lf_field_elem_size(f) == 0)
            return shard_fail(err, LF_SHARD_E_ARG,
                              "schema: field '%s': bad type %u or row width %u",
                              f->name, f->type, f->row_width);
        uint32_t cost = s->fields[s->cost_field].type;
        if (lf_field_is_per_token(f->type) && cost != LF_FIELD_TOKENS_U16 &&
            cost != LF_FIELD_TOKENS_U32)
            return shard_fail(err, LF_SHARD_E_ARG, "schema: per-token field '%s' needs a "
                              "tokens_u16 or tokens_u32 cost field", f->name);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(f->name, s->fields[j].name) == 0)
                return shard_fail(err, LF_SHARD_E_ARG,
                                  "schema: field name '%s' used twice", f->name);
    }
    return 0;
}

/* ---- schema encoding ---------------------------------------------------- */

void schema_encode(const lf_schema *s, uint8_t *out)
{
    memset(out, 0, SCHEMA_SIZE);
    put_u32(out, s->nfields);
    put_u32(out + 4, s->cost_field);
    for (uint32_t i = 0; i < s->nfields && i < LF_MAX_FIELDS; i++) {
        uint8_t *p = out + 8 + i * SCHEMA_FIELD_SIZE;
        size_t len = strnlen(s->fields[i].name, LF_FIELD_NAME_MAX - 1);
        memcpy(p, s->fields[i].name, len);
        put_u32(p + 32, s->fields[i].type);
        put_u32(p + 36, s->fields[i].row_width);
    }
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

int schema_decode(const uint8_t *in, lf_schema *s, const char **why)
{
    lf_schema t;
    memset(&t, 0, sizeof t);
    t.nfields = get_u32(in);
    t.cost_field = get_u32(in + 4);
    if (t.nfields < 1 || t.nfields > LF_MAX_FIELDS) {
        *why = "schema field count out of range";
        return LF_SHARD_E_FORMAT;
    }
    for (uint32_t i = 0; i < LF_MAX_FIELDS; i++) {
        const uint8_t *p = in + 8 + i * SCHEMA_FIELD_SIZE;
        if (i >= t.nfields) {
            if (!all_zero(p, SCHEMA_FIELD_SIZE)) {
                *why = "unused schema entry not zero";
                return LF_SHARD_E_FORMAT;
            }
            continue;
        }
        size_t len = strnlen((const char *)p, LF_FIELD_NAME_MAX);
        if (len == LF_FIELD_NAME_MAX || !all_zero(p + len, LF_FIELD_NAME_MAX - len)) {
            *why = "schema field name not NUL-padded";
            return LF_SHARD_E_FORMAT;
        }
        memcpy(t.fields[i].name, p, len);
        t.fields[i].type = get_u32(p + 32);
        t.fields[i].row_width = get_u32(p + 36);
    }
    if (lf_schema_validate(&t, NULL) != 0) {
        *why = "schema invalid";
        return LF_SHARD_E_FORMAT;
    }
    *s = t;
    return 0;
}

/* ---- header ------------------------------------------------------------- */

void header_encode(const shard_header *h, uint8_t out[HEADER_SIZE])
{
    memset(out, 0, HEADER_SIZE);
    memcpy(out, SHARD_MAGIC, MAGIC_LEN);
    put_u32(out + 8, h->version);
    put_u32(out + 12, HEADER_SIZE);
    put_u32(out + 16, h->shard_no);
    put_u64(out + 24, h->first_sample);
    put_u64(out + 32, h->nsamples);
    put_u64(out + 40, h->nblocks);
    put_u64(out + 48, h->index_offset);
    put_u64(out + 56, h->index_size);
    put_u64(out + 64, h->raw_bytes);
    schema_encode(&h->schema, out + HEADER_SCHEMA_AT);
}

int header_decode(const uint8_t in[HEADER_SIZE], shard_header *h, const char **why)
{
    if (memcmp(in, SHARD_MAGIC, MAGIC_LEN) != 0) {
        *why = "bad header magic";
        return LF_SHARD_E_FORMAT;
    }
    uint32_t version = get_u32(in + 8);
    if (version < 1 || version > LF_SHARD_VERSION) {
        *why = "header version not supported";
        return LF_SHARD_E_VERSION;
    }
    if (get_u32(in + 12) != HEADER_SIZE || !all_zero(in + 20, 4) ||
        !all_zero(in + 72, HEADER_SCHEMA_AT - 72) ||
        !all_zero(in + HEADER_SCHEMA_AT + SCHEMA_SIZE,
                  HEADER_SIZE - HEADER_SCHEMA_AT - SCHEMA_SIZE)) {
        *why = "header size or reserved bytes wrong";
        return LF_SHARD_E_FORMAT;
    }
    shard_header t;
    t.shard_no = get_u32(in + 16);
    t.first_sample = get_u64(in + 24);
    t.nsamples = get_u64(in + 32);
    t.nblocks = get_u64(in + 40);
    t.index_offset = get_u64(in + 48);
    t.index_size = get_u64(in + 56);
    t.raw_bytes = get_u64(in + 64);
    int rc = schema_decode(in + HEADER_SCHEMA_AT, &t.schema, why);
    if (rc != 0) return rc;
    if (version < lf_schema_version(&t.schema)) {
        *why = "header version 1 with a version 2 schema";
        return LF_SHARD_E_FORMAT;
    }
    t.version = version;
    *h = t;
    return 0;
}

/* ---- footer ------------------------------------------------------------- */

void footer_encode(shard_footer *f, uint8_t out[FOOTER_SIZE])
{
    memcpy(out, FOOTER_MAGIC, MAGIC_LEN);
    put_u32(out + 8, f->version);
    put_u32(out + 12, 0);
    put_u64(out + 16, f->index_offset);
    put_u64(out + 24, f->index_size);
    put_u64(out + 32, f->header_hash);
    put_u64(out + 40, f->index_hash);
    put_u64(out + 48, f->file_size);
    f->self_hash = shard_hash(out, FOOTER_SIZE - 8);
    put_u64(out + 56, f->self_hash);
}

int footer_decode(const uint8_t in[FOOTER_SIZE], bool skip_hash, shard_footer *f,
                  const char **why)
{
    uint64_t self = get_u64(in + 56);
    if (!skip_hash && shard_hash(in, FOOTER_SIZE - 8) != self) {
        *why = "checksum mismatch";
        return LF_SHARD_E_CHECKSUM;
    }
    if (memcmp(in, FOOTER_MAGIC, MAGIC_LEN) != 0 || get_u32(in + 12) != 0) {
        *why = "bad footer magic";
        return LF_SHARD_E_FORMAT;
    }
    uint32_t version = get_u32(in + 8);
    if (version < 1 || version > LF_SHARD_VERSION) {
        *why = "footer version not supported";
        return LF_SHARD_E_VERSION;
    }
    f->version = version;
    f->index_offset = get_u64(in + 16);
    f->index_size = get_u64(in + 24);
    f->header_hash = get_u64(in + 32);
    f->index_hash = get_u64(in + 40);
    f->file_size = get_u64(in + 48);
    f->self_hash = self;
    return 0;
}

/* ---- index entries ------------------------------------------------------ */

void block_entry_encode(const shard_block_entry *b, uint8_t out[BLOCK_ENTRY_SIZE])
{
    put_u64(out, b->file_offset);
    put_u32(out + 8, b->stored_size);
    put_u32(out + 12, b->raw_size);
    put_u64(out + 16, b->checksum);
    put_u32(out + 24, b->first_sample);
    put_u32(out + 28, b->nsamples);
}

void block_entry_decode(const uint8_t in[BLOCK_ENTRY_SIZE], shard_block_entry *b)
{
    b->file_offset = get_u64(in);
    b->stored_size = get_u32(in + 8);
    b->raw_size = get_u32(in + 12);
    b->checksum = get_u64(in + 16);
    b->first_sample = get_u32(in + 24);
    b->nsamples = get_u32(in + 28);
}

void sample_entry_encode(const lf_sample_info *s, uint8_t out[SAMPLE_ENTRY_SIZE])
{
    put_u32(out, s->block);
    put_u32(out + 4, s->offset);
    put_u32(out + 8, s->size);
    put_u32(out + 12, s->width);
    put_u32(out + 16, s->height);
    put_u32(out + 20, s->doc_offset);
    put_u64(out + 24, s->length);
}

int sample_entry_decode(const uint8_t in[SAMPLE_ENTRY_SIZE], uint32_t version,
                        lf_sample_info *s)
{
    if (version < 2 && get_u32(in + 20) != 0) return LF_SHARD_E_FORMAT;
    s->doc_offset = get_u32(in + 20);
    s->block = get_u32(in);
    s->offset = get_u32(in + 4);
    s->size = get_u32(in + 8);
    s->width = get_u32(in + 12);
    s->height = get_u32(in + 16);
    s->length = get_u64(in + 24);
    return 0;
}

/* ---- manifest ----------------------------------------------------------- */

size_t manifest_size(uint32_t nshards)
{
    return MANIFEST_SHARDS_AT + (size_t)nshards * MANIFEST_ENTRY_SIZE + 8;
}

void manifest_encode(const manifest *m, uint8_t *out)
{
    size_t size = manifest_size(m->nshards);
    memset(out, 0, size);
    memcpy(out, MANIFEST_MAGIC, MAGIC_LEN);
    put_u32(out + 8, m->version);
    put_u32(out + 12, m->nshards);
    put_u64(out + 16, m->samples);
    put_u64(out + 24, m->blocks);
    put_u64(out + 32, m->raw_bytes);
    put_u64(out + 40, m->stored_bytes);
    schema_encode(&m->schema, out + MANIFEST_SCHEMA_AT);
    for (uint32_t i = 0; i < m->nshards; i++) {
        uint8_t *p = out + MANIFEST_SHARDS_AT + (size_t)i * MANIFEST_ENTRY_SIZE;
        const manifest_shard *s = &m->shards[i];
        memcpy(p, s->name, strnlen(s->name, MANIFEST_NAME_MAX - 1));
        put_u64(p + 64, s->samples);
        put_u64(p + 72, s->blocks);
        put_u64(p + 80, s->file_size);
        put_u64(p + 88, s->footer_hash);
    }
    put_u64(out + size - 8, shard_hash(out, size - 8));
}

/* A shard name is a plain file name in the dataset directory. */
static bool shard_name_ok(const uint8_t *p)
{
    size_t len = strnlen((const char *)p, MANIFEST_NAME_MAX);
    if (len == 0 || len == MANIFEST_NAME_MAX || !all_zero(p + len, MANIFEST_NAME_MAX - len))
        return false;
    if (memchr(p, '/', len) || (p[0] == '.' && (len == 1 || (len == 2 && p[1] == '.'))))
        return false;
    return true;
}

static int by_shard_name(const void *a, const void *b)
{
    return strcmp((*(const manifest_shard *const *)a)->name,
                  (*(const manifest_shard *const *)b)->name);
}

/* Each shard file listed once: the names sorted, then neighbours compared,
 * n log n. Comparing every pair took 70 s for 160 k shards. */
static int check_unique_names(const manifest *m, const char *path, lf_shard_error *err)
{
    if (m->nshards < 2) return 0;
    const manifest_shard **v = malloc((size_t)m->nshards * sizeof *v);
    if (!v) return shard_fail(err, LF_SHARD_E_NOMEM, "%s: out of memory", path);
    for (uint32_t i = 0; i < m->nshards; i++) v[i] = &m->shards[i];
    qsort(v, m->nshards, sizeof *v, by_shard_name);
    int rc = 0;
    for (uint32_t i = 1; rc == 0 && i < m->nshards; i++)
        if (strcmp(v[i - 1]->name, v[i]->name) == 0)
            rc = shard_fail(err, LF_SHARD_E_FORMAT, "%s: shard file %s listed twice", path,
                            v[i]->name);
    free(v);
    return rc;
}

/* Reads the shard entries and checks that the totals add up. */
static int manifest_decode_shards(const uint8_t *in, const char *path, manifest *m,
                                  lf_shard_error *err)
{
    uint64_t samples = 0, blocks = 0, stored = 0;
    for (uint32_t i = 0; i < m->nshards; i++) {
        const uint8_t *p = in + MANIFEST_SHARDS_AT + (size_t)i * MANIFEST_ENTRY_SIZE;
        manifest_shard *s = &m->shards[i];
        if (!shard_name_ok(p))
            return shard_fail(err, LF_SHARD_E_FORMAT, "%s: shard %u: bad file name", path, i);
        memcpy(s->name, p, MANIFEST_NAME_MAX);
        s->samples = get_u64(p + 64);
        s->blocks = get_u64(p + 72);
        s->file_size = get_u64(p + 80);
        s->footer_hash = get_u64(p + 88);
        /* per-entry bounds keep the sums below from overflowing: each
         * sample and block takes 32 index bytes of a file of file_size */
        if (s->file_size > (UINT64_MAX >> 8) || s->blocks == 0 || s->blocks > s->samples ||
            s->samples > s->file_size / SAMPLE_ENTRY_SIZE || s->samples > UINT32_MAX)
            return shard_fail(err, LF_SHARD_E_FORMAT,
                              "%s: shard %u (%s): counts out of range", path, i, s->name);
        samples += s->samples;
        blocks += s->blocks;
        stored += s->file_size;
    }
    int rc = check_unique_names(m, path, err);
    if (rc != 0) return rc;
    if (samples != m->samples || blocks != m->blocks || stored != m->stored_bytes)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: totals do not match the shard list", path);
    return 0;
}

int manifest_decode(const uint8_t *in, size_t size, bool skip_hash, const char *path,
                    manifest *m, lf_shard_error *err)
{
    const char *why = "";
    if (size < manifest_size(0))
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: truncated (%zu bytes)", path, size);
    if (!skip_hash && shard_hash(in, size - 8) != get_u64(in + size - 8))
        return shard_fail(err, LF_SHARD_E_CHECKSUM, "%s: checksum mismatch", path);
    if (memcmp(in, MANIFEST_MAGIC, MAGIC_LEN) != 0)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: bad magic", path);
    uint32_t version = get_u32(in + 8);
    if (version < 1 || version > LF_SHARD_VERSION)
        return shard_fail(err, LF_SHARD_E_VERSION, "%s: version %u not supported", path,
                          version);
    manifest t;
    memset(&t, 0, sizeof t);
    t.nshards = get_u32(in + 12);
    if ((size - manifest_size(0)) / MANIFEST_ENTRY_SIZE != t.nshards ||
        size != manifest_size(t.nshards))
        return shard_fail(err, LF_SHARD_E_FORMAT,
                          "%s: %zu bytes do not hold %u shards", path, size, t.nshards);
    if (!all_zero(in + 48, MANIFEST_SCHEMA_AT - 48) ||
        !all_zero(in + MANIFEST_SCHEMA_AT + SCHEMA_SIZE,
                  MANIFEST_SHARDS_AT - MANIFEST_SCHEMA_AT - SCHEMA_SIZE))
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: reserved bytes not zero", path);
    t.samples = get_u64(in + 16);
    t.blocks = get_u64(in + 24);
    t.raw_bytes = get_u64(in + 32);
    t.stored_bytes = get_u64(in + 40);
    int rc = schema_decode(in + MANIFEST_SCHEMA_AT, &t.schema, &why);
    if (rc != 0) return shard_fail(err, rc, "%s: %s", path, why);
    if (version < lf_schema_version(&t.schema))
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: version %u, but its schema needs "
                          "version %u", path, version, lf_schema_version(&t.schema));
    t.version = version;
    t.shards = calloc(t.nshards ? t.nshards : 1, sizeof *t.shards);
    if (!t.shards) return shard_fail(err, LF_SHARD_E_NOMEM, "%s: out of memory", path);
    rc = manifest_decode_shards(in, path, &t, err);
    if (rc != 0) {
        free(t.shards);
        return rc;
    }
    *m = t;
    return 0;
}
