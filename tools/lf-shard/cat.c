/*
 * cat.c — `lf-shard cat DIR INDEX`: one sample's fields, read the way the
 * server reads them (stored block, checksum, decompress, locate fields).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "cli.h"

static const char cat_help[] =
    "Usage: lf-shard cat DIR INDEX [--raw FIELD]\n"
    "\n"
    "Prints sample INDEX (0-based): where it is stored, then one line per field:\n"
    "token ids as numbers, a JPEG's byte size and dimensions, a frame array's\n"
    "shape and first values, a label's value, a per-token field's values, the\n"
    "first bytes of a bytes field. A piece of a longer document (create tokens\n"
    "--max-len N) also says which document and which of its tokens.\n"
    "\n"
    "  --raw FIELD        write only FIELD's stored bytes to stdout (e.g. the JPEG\n"
    "                     file, or the frames as little-endian values)\n"
    "\n"
    "Example:\n"
    "  lf-shard cat /data/toks 42\n"
    "  lf-shard cat /data/imgs 7 --raw image > seven.jpg\n";

#define FIRST_VALUES 8

static uint64_t le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void print_tokens(const lf_field_view *v, size_t width)
{
    const uint8_t *p = v->data;
    for (uint32_t i = 0; i < v->count; i++)
        printf(" %" PRIu64, le(p + (size_t)i * width, width));
}

static void print_value(const uint8_t *p, uint32_t type)
{
    if (type == LF_FIELD_FRAMES_F32) {
        uint32_t bits = (uint32_t)le(p, 4);
        float f;
        memcpy(&f, &bits, 4);
        printf("%g", f);
    } else if (type == LF_FIELD_FRAMES_F16) {
        printf("%g", cli_f16_to_f32((uint16_t)le(p, 2)));
    } else {
        printf("%d", (int16_t)le(p, 2));
    }
}

static void print_frames(const lf_field_def *f, const lf_field_view *v)
{
    size_t vsize = f->type == LF_FIELD_FRAMES_F32 ? 4 : 2;
    uint64_t values = (uint64_t)v->count * f->row_width;
    printf("%u x %u; first values:", v->count, f->row_width);
    for (uint64_t i = 0; i < values && i < FIRST_VALUES; i++) {
        putchar(' ');
        print_value((const uint8_t *)v->data + i * vsize, f->type);
    }
}

static void print_jpeg(const lf_field_view *v)
{
    printf("%u bytes", v->size);
    tjhandle tj = tjInitDecompress();
    int w, h, subsamp, cs;
    if (tj && tjDecompressHeader3(tj, v->data, v->size, &w, &h, &subsamp, &cs) == 0)
        printf(", %dx%d", w, h);
    else
        printf(", header unreadable");
    if (tj)
        tjDestroy(tj);
}

static void print_field(const lf_field_def *f, const lf_field_view *v)
{
    const char *type = lf_field_type_name(f->type);
    printf("%s (%s): ", f->name, type ? type : "?");
    switch (f->type) {
    case LF_FIELD_TOKENS_U16: case LF_FIELD_TOKENS_U32:
        printf("%u tokens:", v->count);
        print_tokens(v, f->type == LF_FIELD_TOKENS_U16 ? 2 : 4);
        break;
    case LF_FIELD_JPEG:
        print_jpeg(v);
        break;
    case LF_FIELD_FRAMES_F16: case LF_FIELD_FRAMES_F32: case LF_FIELD_FRAMES_I16:
        print_frames(f, v);
        break;
    case LF_FIELD_LABEL_I64:
        printf("%" PRId64, (int64_t)le(v->data, v->size < 8 ? v->size : 8));
        break;
    case LF_FIELD_PER_TOKEN_U8:
        printf("%u values:", v->count);
        print_tokens(v, 1);
        break;
    case LF_FIELD_PER_TOKEN_I32:
        printf("%u values:", v->count);
        for (uint32_t i = 0; i < v->count; i++)
            printf(" %" PRId32, (int32_t)le((const uint8_t *)v->data + 4 * (size_t)i, 4));
        break;
    default:
        printf("%u bytes:", v->size);
        for (uint32_t i = 0; i < v->size && i < 32; i++)
            printf(" %02x", ((const uint8_t *)v->data)[i]);
        break;
    }
    putchar('\n');
}

/* A piece of a longer document (lf-shard create tokens --max-len N
 * --overflow split): which document (counted from 0 over the samples that
 * start one) and which of its tokens. */
static void print_piece(const lf_dataset *ds, uint64_t i)
{
    const lf_sample_info *si = lf_dataset_sample(ds, i), *next = lf_dataset_sample(ds, i + 1);
    if (!si->doc_offset && !(next && next->doc_offset))
        return;
    uint64_t doc = 0;
    for (uint64_t k = 1; k <= i; k++)
        doc += lf_dataset_sample(ds, k)->doc_offset == 0;
    printf("piece of document %" PRIu64 ": its tokens %u..%" PRIu64 "\n", doc, si->doc_offset,
           si->doc_offset + si->length - 1);
}

/* Reads, checks and decompresses sample `i`'s block into *raw (caller frees). */
static void load_block(const lf_dataset *ds, uint64_t i, uint8_t **raw, size_t *raw_size)
{
    uint64_t b = lf_dataset_sample_block(ds, i);
    const lf_block_info *bi = lf_dataset_block(ds, b);
    lf_block_decoder *dec = NULL;
    lf_shard_error err;
    uint8_t *stored = malloc(bi->stored_size ? bi->stored_size : 1);
    uint8_t *out = malloc(bi->raw_size ? bi->raw_size : 1);
    if (!stored || !out || lf_block_decoder_create(&dec) < 0)
        cli_die("out of memory");
    long n = lf_dataset_read_block(ds, b, stored, bi->stored_size, &err);
    if (n >= 0)
        n = lf_block_decode(dec, ds, b, stored, (size_t)n, out, bi->raw_size, &err);
    if (n < 0)
        cli_die("sample %" PRIu64 ": %s", i, err.msg);
    lf_block_decoder_free(dec);
    free(stored);
    *raw = out;
    *raw_size = (size_t)n;
}

int cmd_cat(int argc, char **argv)
{
    const cli_cmd c = {"cat", cat_help};
    static const struct option opts[] = {
        {"raw", required_argument, NULL, 1},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *raw_field = NULL;
    int id;
    while ((id = cli_getopt(&c, argc, argv, opts)) != -1)
        raw_field = optarg;
    char **pos = cli_positionals(&c, argc, argv, 2, "DIR and INDEX");
    uint64_t i = cli_parse_u64(&c, "INDEX", pos[1], 0, UINT64_MAX);
    lf_dataset *ds = cli_open_dataset(pos[0]);
    const lf_schema *s = lf_dataset_schema(ds);
    if (i >= lf_dataset_samples(ds))
        cli_die("%s: no sample %" PRIu64 " (the dataset has %" PRIu64 ")", pos[0], i,
                lf_dataset_samples(ds));

    int raw_index = -1;
    for (uint32_t f = 0; raw_field && f < s->nfields; f++)
        if (!strcmp(s->fields[f].name, raw_field))
            raw_index = (int)f;
    if (raw_field && raw_index < 0)
        cli_die("%s: no field '%s' in the schema", pos[0], raw_field);

    uint8_t *raw;
    size_t raw_size;
    load_block(ds, i, &raw, &raw_size);   /* refused for an index-only dataset */
    const lf_sample_info *si = lf_dataset_sample(ds, i);
    lf_field_view v[LF_MAX_FIELDS];
    lf_shard_error err;
    if (lf_sample_fields(ds, i, raw, raw_size, v, &err) < 0)
        cli_die("sample %" PRIu64 ": %s", i, err.msg);
    if (raw_index >= 0) {
        if (fwrite(v[raw_index].data, 1, v[raw_index].size, stdout) != v[raw_index].size)
            cli_die("cannot write to stdout");
    } else {
        printf("sample %" PRIu64 " of %" PRIu64 ": shard %u, block %u, %u bytes at offset %u, "
               "cost input %" PRIu64 "\n", i, lf_dataset_samples(ds), si->shard, si->block,
               si->size, si->offset, si->length);
        print_piece(ds, i);
        for (uint32_t f = 0; f < s->nfields; f++)
            print_field(&s->fields[f], &v[f]);
    }
    free(raw);
    lf_dataset_close(ds);
    return 0;
}
