/*
 * synth_gen.c — random streams and the token and frame generators.
 *
 * Tokens look a little like text to zstd: ids follow a Zipf-like (log-uniform
 * rank) law, so low ids dominate, and about a quarter of the "phrases" repeat
 * an earlier span of the same sample, so LZ matching has work to do. Frames
 * are smooth per-column profiles plus a drifting offset and small noise,
 * quantized to 1/1024 (exact in i16 fixed point; f16 must round) so the low
 * mantissa bits compress like real features.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "synth.h"

void synth_put_label(synth_slot *s, uint64_t label)
{
    for (int i = 0; i < 8; i++)
        s->label[i] = (uint8_t)(label >> (8 * i));
    s->in[1] = (lf_field_input){.data = s->label, .size = 8};
}

int synth_reserve(synth_slot *s, size_t n)
{
    if (n <= s->cap)
        return 0;
    uint8_t *p = realloc(s->data, n);
    if (!p) {
        snprintf(s->err, sizeof s->err, "out of memory (%zu bytes)", n);
        return -1;
    }
    s->data = p;
    s->cap = n;
    return 0;
}

/* ---- tokens ------------------------------------------------------------------ */

/* The rank law's inverse CDF in ZIPF_SLOTS pieces: a draw picks a piece with
 * its top bits and a place inside it with the rest. Piece k covers ranks
 * [lo[k], lo[k+1]) of the continuous law r = (V+1)^u. */
#define ZIPF_BITS 12
#define ZIPF_SLOTS (1u << ZIPF_BITS)

typedef struct zipf_table {
    float lo[ZIPF_SLOTS + 1];
} zipf_table;

static void *tokens_thread_new(const synth_params *p)
{
    zipf_table *z = malloc(sizeof *z);
    if (!z)
        return NULL;
    double lnv = log((double)p->vocab + 1.0);
    for (uint32_t k = 0; k <= ZIPF_SLOTS; k++)
        z->lo[k] = (float)exp(lnv * k / ZIPF_SLOTS);
    return z;
}

static uint32_t zipf_draw(const zipf_table *z, uint32_t bits, uint32_t vocab)
{
    uint32_t k = bits >> (32 - ZIPF_BITS);
    float frac = (float)(bits & ((1u << (32 - ZIPF_BITS)) - 1)) * 0x1p-20f;
    float r = z->lo[k] + (z->lo[k + 1] - z->lo[k]) * frac;
    uint32_t id = (uint32_t)r - 1u;                /* r >= 1 */
    return id < vocab ? id : vocab - 1;
}

static void tokens_schema(const synth_params *p, lf_schema *s)
{
    memset(s, 0, sizeof *s);
    s->nfields = 1;
    s->cost_field = 0;
    snprintf(s->fields[0].name, LF_FIELD_NAME_MAX, "tokens");
    s->fields[0].type = p->vocab > 65536 ? LF_FIELD_TOKENS_U32 : LF_FIELD_TOKENS_U16;
}

/* Bytes per stored token: u32 ids once the vocabulary passes u16. */
static size_t token_size(const synth_params *p)
{
    return p->vocab > 65536 ? 4 : 2;
}

/* A record of --len-max tokens: one field size, then the tokens. */
static uint64_t tokens_max_record(const synth_params *p, char *opts, size_t n)
{
    snprintf(opts, n, "--len-max %" PRIu64 " tokens of %zu bytes", p->len_max, token_size(p));
    return 4 + p->len_max * token_size(p);
}

static void put_token(uint8_t *dst, uint32_t n, uint32_t id, size_t width)
{
    if (width == 2) {
        dst[2 * (size_t)n] = (uint8_t)id;
        dst[2 * (size_t)n + 1] = (uint8_t)(id >> 8);
    } else {
        for (size_t b = 0; b < 4; b++)
            dst[4 * (size_t)n + b] = (uint8_t)(id >> (8 * b));
    }
}

static int tokens_gen(const synth_params *p, void *t, uint64_t index, synth_slot *s)
{
    const zipf_table *z = t;
    synth_rng r;
    synth_rng_seed(&r, p->seed, index);
    uint32_t len = (uint32_t)synth_rng_length(&r, p->len_median, p->len_sigma, p->len_min, p->len_max);
    size_t width = token_size(p);
    if (synth_reserve(s, (size_t)len * width) < 0)
        return -1;
    uint8_t *dst = s->data;
    uint32_t n = 0;
    while (n < len) {
        uint64_t ctl = synth_rng_next(&r);
        uint32_t phrase = 4 + (uint32_t)(ctl & 15);
        if (phrase > len - n)
            phrase = len - n;
        if ((ctl >> 4 & 3) == 0 && n >= phrase) {  /* repeat an earlier span */
            uint32_t from = (uint32_t)((ctl >> 8) % (n - phrase + 1));
            memmove(dst + (size_t)n * width, dst + (size_t)from * width,
                    (size_t)phrase * width);
            n += phrase;
            continue;
        }
        for (uint32_t i = 0; i < phrase; i += 2) {
            uint64_t bits = synth_rng_next(&r);
            put_token(dst, n + i, zipf_draw(z, (uint32_t)bits, p->vocab), width);
            if (i + 1 < phrase)
                put_token(dst, n + i + 1, zipf_draw(z, (uint32_t)(bits >> 32), p->vocab),
                          width);
        }
        n += phrase;
    }
    s->in[0] = (lf_field_input){.data = dst, .size = (size_t)len * width};
    s->bytes = (size_t)len * width;
    return 0;
}

const synth_kind synth_tokens = {
    .name = "tokens",
    .default_block = 64 << 10,
    .batch = 1024,
    .schema = tokens_schema,
    .thread_new = tokens_thread_new,
    .thread_free = free,
    .gen = tokens_gen,
    .max_record = tokens_max_record,
};

/* ---- frames ------------------------------------------------------------------ */

static void frames_schema(const synth_params *p, lf_schema *s)
{
    memset(s, 0, sizeof *s);
    s->nfields = 2;
    s->cost_field = 0;
    snprintf(s->fields[0].name, LF_FIELD_NAME_MAX, "frames");
    s->fields[0].type = p->frame_type;
    s->fields[0].row_width = p->width;
    snprintf(s->fields[1].name, LF_FIELD_NAME_MAX, "label");
    s->fields[1].type = LF_FIELD_LABEL_I64;
}

static size_t frame_value_size(uint32_t type)
{
    return type == LF_FIELD_FRAMES_F32 ? 4 : 2;
}

static void put_value(uint8_t *dst, float v, uint32_t type)
{
    uint32_t bits;
    switch (type) {
    case LF_FIELD_FRAMES_F32:
        memcpy(&bits, &v, 4);
        for (int b = 0; b < 4; b++)
            dst[b] = (uint8_t)(bits >> (8 * b));
        return;
    case LF_FIELD_FRAMES_F16:
        bits = cli_f32_to_f16(v);
        break;
    default:                                      /* i16: fixed point, 1/1024 */
        bits = (uint16_t)(int16_t)lrintf(fmaxf(-32.0f, fminf(31.99f, v)) * 1024.0f);
        break;
    }
    dst[0] = (uint8_t)bits;
    dst[1] = (uint8_t)(bits >> 8);
}

/* A record of --len-max frames: two field sizes, the frames, the label. */
static uint64_t frames_max_record(const synth_params *p, char *opts, size_t n)
{
    size_t vsize = frame_value_size(p->frame_type);
    snprintf(opts, n, "--len-max %" PRIu64 " frames of --width %u %zu-byte values",
             p->len_max, p->width, vsize);
    return 8 + p->len_max * p->width * vsize + 8;
}

static void *frames_thread_new(const synth_params *p)
{
    return calloc(p->width, sizeof(float));        /* one sample's column profile */
}

static int frames_gen(const synth_params *p, void *t, uint64_t index, synth_slot *s)
{
    float *profile = t;
    synth_rng r;
    synth_rng_seed(&r, p->seed, index);
    uint64_t frames = synth_rng_length(&r, p->len_median, p->len_sigma, p->len_min, p->len_max);
    size_t vsize = frame_value_size(p->frame_type);
    size_t bytes = (size_t)frames * p->width * vsize;
    if (synth_reserve(s, bytes) < 0)
        return -1;
    double phase = synth_rng_unit(&r) * 6.283, scale = 1.0 + 3.0 * synth_rng_unit(&r);
    for (uint32_t c = 0; c < p->width; c++)
        profile[c] = (float)(scale * sin(phase + 0.15 * c) - 0.02 * c);
    float drift = 0;
    uint8_t *dst = s->data;
    for (uint64_t f = 0; f < frames; f++) {
        uint64_t bits = synth_rng_next(&r);
        drift += (float)((int)(bits & 255) - 128) / 2048.0f;
        for (uint32_t c = 0; c < p->width; c++) {
            if (c % 8 == 0)
                bits = synth_rng_next(&r);
            float noise = (float)((int)((bits >> (8 * (c % 8))) & 15) - 8) / 64.0f;
            float v = floorf((profile[c] + drift + noise) * 1024.0f) / 1024.0f;
            put_value(dst, v, p->frame_type);
            dst += vsize;
        }
    }
    s->in[0] = (lf_field_input){.data = s->data, .size = bytes};
    synth_put_label(s, synth_rng_below(&r, p->classes));
    s->bytes = bytes + 8;
    return 0;
}

const synth_kind synth_frames = {
    .name = "frames",
    .default_block = 64 << 10,
    .batch = 256,
    .schema = frames_schema,
    .thread_new = frames_thread_new,
    .thread_free = free,
    .gen = frames_gen,
    .max_record = frames_max_record,
};
