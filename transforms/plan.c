/*
 * plan.c — where to crop and whether to flip: a pure function of
 * (params, image size, epoch, sample id).
 *
 * Randomness is counter-based: a key is hashed from (seed, epoch, sample id)
 * and draw k is hash(key, k), so a sample's crop never depends on which
 * thread or machine decodes it or on what was decoded before. The hash is
 * splitmix64's finalizer, a bijection on 64 bits with good avalanche.
 *
 * Random-resized crop follows torchvision's RandomResizedCrop.get_params:
 * up to 10 tries of (area fraction uniform in [scale_min, scale_max],
 * log-aspect uniform in [log ratio_min, log ratio_max]), w and h rounded
 * half-to-even as Python's round() does, accepted when 0 < w <= width and
 * 0 < h <= height, offsets uniform over the valid integer positions; after
 * 10 misses, the central crop clamped to the ratio range.
 */
#include "lf_tf.h"
#include "tf_internal.h"

#include <math.h>
#include <string.h>

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t sample_key(uint64_t seed, uint64_t epoch, uint64_t sample_id)
{
    return mix64(mix64(mix64(seed ^ 0x6c66746670726e67ull) ^ epoch) ^ sample_id);
}

/* Uniform in [0, 1) from draw number `counter`. */
static double uniform(uint64_t key, uint64_t counter)
{
    return (double)(mix64(key + counter * 0x9e3779b97f4a7c15ull) >> 11) * 0x1p-53;
}

/* Uniform integer in [0, n]. */
static uint32_t uniform_int(uint64_t key, uint64_t counter, uint32_t n)
{
    uint32_t v = (uint32_t)(uniform(key, counter) * ((double)n + 1.0));
    return v > n ? n : v;
}

enum { DRAWS_PER_TRY = 4, RRC_TRIES = 10, DRAW_FLIP = 1000 };

void lf_tf_image_params_default(lf_tf_image_params *p, uint32_t out_w, uint32_t out_h)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    memset(p, 0, sizeof *p);
    p->out_w = out_w;
    p->out_h = out_h;
    p->crop = LF_TF_CROP_RANDOM_RESIZED;
    p->scale_min = 0.08;
    p->scale_max = 1.0;
    p->ratio_min = 3.0 / 4.0;
    p->ratio_max = 4.0 / 3.0;
    p->center_frac = 0.875;
    p->flip_prob = 0.5;
    p->resize = LF_TF_RESIZE_BILINEAR;
    p->out_dtype = LF_DTYPE_F32;
    memcpy(p->mean, mean, sizeof mean);
    memcpy(p->std, std, sizeof std);
}

size_t lf_tf_image_out_size(const lf_tf_image_params *p)
{
    size_t elem = p->out_dtype == LF_DTYPE_U8 || p->out_dtype == LF_DTYPE_F16 ||
                  p->out_dtype == LF_DTYPE_F32 ? lf_dtype_size(p->out_dtype) : 0;
    return (size_t)p->out_w * p->out_h * 3 * elem;
}

static void random_resized(const lf_tf_image_params *p, uint32_t width, uint32_t height,
                           uint64_t key, lf_tf_box *b)
{
    double area = (double)width * height;
    double lr0 = log(p->ratio_min), lr1 = log(p->ratio_max);
    for (uint64_t t = 0; t < RRC_TRIES; t++) {
        uint64_t c = t * DRAWS_PER_TRY;
        double target = area * (p->scale_min + (p->scale_max - p->scale_min) * uniform(key, c));
        double ratio = exp(lr0 + (lr1 - lr0) * uniform(key, c + 1));
        double w = nearbyint(sqrt(target * ratio)), h = nearbyint(sqrt(target / ratio));
        if (w > 0 && w <= width && h > 0 && h <= height) {
            b->w = w;
            b->h = h;
            b->y = uniform_int(key, c + 2, height - (uint32_t)h);
            b->x = uniform_int(key, c + 3, width - (uint32_t)w);
            return;
        }
    }
    double in_ratio = (double)width / height, w = width, h = height;
    if (in_ratio < p->ratio_min) h = nearbyint(w / p->ratio_min);
    else if (in_ratio > p->ratio_max) w = nearbyint(h * p->ratio_max);
    if (h < 1) h = 1;
    if (w < 1) w = 1;
    b->w = w;
    b->h = h;
    b->y = floor((height - h) / 2);
    b->x = floor((width - w) / 2);
}

/* A box of the output's aspect, center_frac of the shorter side, centered. */
static void center(const lf_tf_image_params *p, uint32_t width, uint32_t height, lf_tf_box *b)
{
    double shorter = width < height ? width : height;
    double unit = shorter * p->center_frac / (p->out_w < p->out_h ? p->out_w : p->out_h);
    b->w = fmin(p->out_w * unit, width);
    b->h = fmin(p->out_h * unit, height);
    b->x = (width - b->w) / 2;
    b->y = (height - b->h) / 2;
}

int lf_tf_image_plan(const lf_tf_image_params *p, uint32_t width, uint32_t height,
                     uint64_t epoch, uint64_t sample_id, lf_tf_box *box)
{
    if (!width || !height || !p->out_w || !p->out_h || !(p->flip_prob >= 0 && p->flip_prob <= 1))
        return LF_TF_E_ARG;
    uint64_t key = sample_key(p->seed, epoch, sample_id);
    lf_tf_box b = {0, 0, width, height, 0};
    switch (p->crop) {
    case LF_TF_CROP_FULL:
        break;
    case LF_TF_CROP_CENTER:
        if (!(p->center_frac > 0 && p->center_frac <= 1)) return LF_TF_E_ARG;
        center(p, width, height, &b);
        break;
    case LF_TF_CROP_RANDOM_RESIZED:
        if (!(p->scale_min > 0 && p->scale_min <= p->scale_max && p->scale_max <= 1 &&
              p->ratio_min > 0 && p->ratio_min <= p->ratio_max))
            return LF_TF_E_ARG;
        random_resized(p, width, height, key, &b);
        break;
    default:
        return LF_TF_E_ARG;
    }
    b.flip = uniform(key, DRAW_FLIP) < p->flip_prob;
    *box = b;
    return 0;
}

uint16_t tf_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, mag = x & 0x7fffffffu;
    if (mag >= 0x7f800000u)                       /* inf or nan (kept quiet) */
        return (uint16_t)(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0));
    if (mag >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* rounds past 65504 */
    if (mag < 0x38800000u) {                      /* subnormal half or zero */
        if (mag < 0x33000000u) return (uint16_t)sign;  /* below half the smallest: 0 */
        uint32_t m = (mag & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - (mag >> 23);       /* m * 2^(e-150) in units of 2^-24 */
        uint32_t v = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (v & 1))) v++;
        return (uint16_t)(sign | v);
    }
    uint32_t v = ((mag - 0x38000000u) >> 13);     /* rebias exponent 127 -> 15 */
    uint32_t rem = mag & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (v & 1))) v++;
    return (uint16_t)(sign | v);
}
