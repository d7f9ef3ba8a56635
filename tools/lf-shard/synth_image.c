/*
 * synth_image.c — synthetic JPEGs for `lf-shard synth images`.
 *
 * Each image is a bilinear gradient between four random corner colours, a
 * few filled circles and rectangles, and per-pixel noise: smooth areas,
 * hard edges and texture, so the JPEG sizes and decode costs resemble
 * photos'. Sizes are log-uniform per side between --min-side and --max-side
 * with aspect ratios between 1:2 and 2:1. Encoding uses TurboJPEG's exact
 * integer DCT, whose output depends only on the input, not the CPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "synth.h"

typedef struct image_thread {
    tjhandle tj;
    uint8_t *pixels;             /* RGB, grown to the largest image so far */
    size_t cap;
} image_thread;

static void images_schema(const synth_params *p, lf_schema *s)
{
    (void)p;
    memset(s, 0, sizeof *s);
    s->nfields = 2;
    s->cost_field = 0;
    snprintf(s->fields[0].name, LF_FIELD_NAME_MAX, "image");
    s->fields[0].type = LF_FIELD_JPEG;
    snprintf(s->fields[1].name, LF_FIELD_NAME_MAX, "label");
    s->fields[1].type = LF_FIELD_LABEL_I64;
}

static void images_thread_free(void *t)
{
    image_thread *it = t;
    if (!it)
        return;
    if (it->tj)
        tjDestroy(it->tj);
    free(it->pixels);
    free(it);
}

static void *images_thread_new(const synth_params *p)
{
    image_thread *it = calloc(1, sizeof *it);
    if (!it)
        return NULL;
    (void)p;
    it->tj = tjInitCompress();
    if (!it->tj) {
        images_thread_free(it);
        return NULL;
    }
    return it;
}

static uint32_t log_uniform(synth_rng *r, double lo, double hi)
{
    return (uint32_t)lround(exp(log(lo) + synth_rng_unit(r) * (log(hi) - log(lo))));
}

static void gradient(uint8_t *px, uint32_t w, uint32_t h, synth_rng *r)
{
    uint8_t c[4][3];
    for (int k = 0; k < 4; k++)
        for (int ch = 0; ch < 3; ch++)
            c[k][ch] = (uint8_t)synth_rng_below(r, 256);
    for (uint32_t y = 0; y < h; y++) {
        uint32_t fy = h > 1 ? y * 256 / (h - 1) : 0;   /* 0..256 */
        for (uint32_t x = 0; x < w; x++) {
            uint32_t fx = w > 1 ? x * 256 / (w - 1) : 0;
            uint8_t *d = px + ((size_t)y * w + x) * 3;
            for (int ch = 0; ch < 3; ch++) {
                uint32_t top = c[0][ch] * (256 - fx) + c[1][ch] * fx;
                uint32_t bot = c[2][ch] * (256 - fx) + c[3][ch] * fx;
                d[ch] = (uint8_t)((top * (256 - fy) + bot * fy) >> 16);
            }
        }
    }
}

/* A filled circle or rectangle of a random colour somewhere in the image. */
static void shape(uint8_t *px, uint32_t w, uint32_t h, synth_rng *r)
{
    uint32_t cx = (uint32_t)synth_rng_below(r, w), cy = (uint32_t)synth_rng_below(r, h);
    uint32_t rad = 4 + (uint32_t)synth_rng_below(r, (w < h ? w : h) / 3 + 1);
    int circle = synth_rng_below(r, 2) == 0;
    uint8_t col[3];
    for (int ch = 0; ch < 3; ch++)
        col[ch] = (uint8_t)synth_rng_below(r, 256);
    uint32_t x0 = cx > rad ? cx - rad : 0, x1 = cx + rad < w ? cx + rad : w - 1;
    uint32_t y0 = cy > rad ? cy - rad : 0, y1 = cy + rad < h ? cy + rad : h - 1;
    for (uint32_t y = y0; y <= y1; y++)
        for (uint32_t x = x0; x <= x1; x++) {
            int64_t dx = (int64_t)x - cx, dy = (int64_t)y - cy;
            if (circle && dx * dx + dy * dy > (int64_t)rad * rad)
                continue;
            memcpy(px + ((size_t)y * w + x) * 3, col, 3);
        }
}

static void noise(uint8_t *px, size_t n, synth_rng *r)
{
    uint64_t bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % 16 == 0)
            bits = synth_rng_next(r);
        int v = px[i] + (int)((bits >> (4 * (i % 16))) & 15) - 8;
        px[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
}

static int images_gen(const synth_params *p, void *t, uint64_t index, synth_slot *s)
{
    image_thread *it = t;
    synth_rng r;
    synth_rng_seed(&r, p->seed, index);
    uint32_t w = log_uniform(&r, p->min_side, p->max_side);
    double aspect = exp((synth_rng_unit(&r) - 0.5) * 2.0 * log(2.0));
    uint32_t h = (uint32_t)lround(w * aspect);
    h = h < p->min_side ? p->min_side : h > p->max_side ? p->max_side : h;
    size_t need = (size_t)w * h * 3;
    if (need > it->cap) {
        uint8_t *px = realloc(it->pixels, need);
        if (!px) {
            snprintf(s->err, sizeof s->err, "out of memory (%zu bytes)", need);
            return -1;
        }
        it->pixels = px;
        it->cap = need;
    }

    gradient(it->pixels, w, h, &r);
    for (uint64_t k = 1 + synth_rng_below(&r, 5); k > 0; k--)
        shape(it->pixels, w, h, &r);
    noise(it->pixels, (size_t)w * h * 3, &r);

    unsigned long cap = tjBufSize((int)w, (int)h, TJSAMP_420);
    if (synth_reserve(s, cap) < 0)
        return -1;
    unsigned char *jpeg = s->data;
    unsigned long size = cap;
    int quality = 75 + (int)synth_rng_below(&r, 21);
    if (tjCompress2(it->tj, it->pixels, (int)w, 0, (int)h, TJPF_RGB, &jpeg, &size,
                    TJSAMP_420, quality, TJFLAG_NOREALLOC) < 0) {
        snprintf(s->err, sizeof s->err, "JPEG encoding failed: %s", tjGetErrorStr2(it->tj));
        return -1;
    }
    s->in[0] = (lf_field_input){.data = s->data, .size = size, .width = w, .height = h};
    synth_put_label(s, synth_rng_below(&r, p->classes));
    s->bytes = size + 8;
    return 0;
}

const synth_kind synth_images = {
    .name = "images",
    .default_block = 0,
    .batch = 64,
    .schema = images_schema,
    .thread_new = images_thread_new,
    .thread_free = images_thread_free,
    .gen = images_gen,
};
