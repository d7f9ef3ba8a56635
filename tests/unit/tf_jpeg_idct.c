/*
 * tf_jpeg_idct.c — our scaled IDCT against libjpeg-turbo's own.
 *
 * jpeg.c replaces libjpeg's plain-C IDCTs for the scaled sizes 3, 5, 6, 7,
 * 10, 12 and 14 with a vectorized float kernel. Here a whole image is
 * decoded at each scale n/8 twice: by tjDecompress2 (libjpeg's IDCTs) and by
 * lf_tf_jpeg_crop_resize with the full image as the box and the scaled size
 * as the output, so the resize is the identity and the DCT scale is n/8.
 * Images: TurboJPEG-compressed in memory, sides multiples of 16, edges and
 * noise (large high-frequency coefficients, clamped pixels), 4:2:0, 4:2:2,
 * 4:4:4, grayscale, progressive, qualities 50 and 100.
 *
 * Tolerances, in u8 levels of the RGB output:
 *   - scales where libjpeg keeps its own IDCT (1, 2, 4, 8/8): exact;
 *   - scales 3, 5, 6, 7/8: max 3, mean 0.25. Both compute the same scaled
 *     IDCT; libjpeg in 13-bit fixed point with a rounding per pass, ours in
 *     float with one rounding, so a component can differ by 1 and YCbCr->RGB
 *     adds Y's and Cr's differences (1 + 1.402 x 1 + rounding -> up to 3);
 *     seen: max 3 (grayscale 1), mean <= 0.05. The library uses the kernel
 *     only on CPUs with AVX2 + FMA (else libjpeg's own: exact); there some
 *     pixels must differ, or the kernel did not run.
 * A planted fault (the reference upside down) must fail the same check.
 */
#include "lf_tf.h"
#include "test.h"

#include <turbojpeg.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#define W 96
#define H 64

typedef struct diff { double mean; int max; size_t differ; } diff;

static diff compare_u8(const unsigned char *a, const unsigned char *b, size_t n)
{
    diff d = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        int e = abs((int)a[i] - (int)b[i]);
        d.mean += e;
        d.differ += e != 0;
        if (e > d.max) d.max = e;
    }
    d.mean /= (double)n;
    return d;
}

/* Gradients, a hard-edged bright square, a black bar and noise. */
static void paint(unsigned char *px, unsigned seed)
{
    uint64_t s = seed;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            int noise = (int)(s >> 59) - 16;
            int v[3] = {x * 255 / W, y * 255 / H, 128 + noise * 3};
            if (x >= 20 && x < 44 && y >= 10 && y < 34) v[0] = v[1] = v[2] = 255;
            if (y >= 48 && y < 52) v[0] = v[1] = v[2] = 0;
            for (int c = 0; c < 3; c++) {
                int t = v[c] + noise;
                px[(y * W + x) * 3 + c] = (unsigned char)(t < 0 ? 0 : t > 255 ? 255 : t);
            }
        }
}

typedef struct sample { const char *name; int subsamp, quality, flags; } sample;

/* The reference upside down: a wrong answer the check must refuse. */
static void flip_rows(unsigned char *img, int w, int h)
{
    unsigned char tmp[W * 3];
    size_t row = (size_t)w * 3;
    for (int y = 0; y < h / 2; y++) {
        unsigned char *a = img + (size_t)y * row, *b = img + (size_t)(h - 1 - y) * row;
        memcpy(tmp, a, row);
        memcpy(a, b, row);
        memcpy(b, tmp, row);
    }
}

/* jpeg.c's condition for the kernel (cpu_has_avx2_fma). */
static int kernel_used(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned a, b, c, d;
    int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
#else
    return 0;
#endif
}

static int scale_is_ours(int n) { return kernel_used() && (n == 3 || n == 5 || n == 6 || n == 7); }

static int within(diff d, int n)
{
    return scale_is_ours(n) ? d.max <= 3 && d.mean <= 0.25 : d.max == 0;
}

static void check_sample(lf_tf_ws *ws, tjhandle cj, tjhandle dj, const sample *s, unsigned seed)
{
    static unsigned char px[W * H * 3], ours[W * H * 3], ref[W * H * 3];
    paint(px, seed);
    unsigned char *jpg = NULL;
    unsigned long size = 0;
    ASSERT_EQ(tjCompress2(cj, px, W, 0, H, TJPF_RGB, &jpg, &size, s->subsamp, s->quality,
                          s->flags), 0);
    for (int n = 1; n <= 8; n++) {
        int w = W * n / 8, h = H * n / 8;
        ASSERT_EQ(tjDecompress2(dj, jpg, size, ref, w, 0, h, TJPF_RGB, 0), 0);
        lf_tf_image_params p;
        lf_tf_image_params_default(&p, (uint32_t)w, (uint32_t)h);
        p.out_dtype = LF_DTYPE_U8;
        lf_tf_box box = {0, 0, W, H, 0};
        long rc = lf_tf_jpeg_crop_resize(ws, ours, sizeof ours, jpg, size, &p, &box);
        if (rc < 0) TEST_FAIL_("%s n=%d: %s", s->name, n, lf_tf_reason(ws));
        size_t bytes = (size_t)w * h * 3;
        diff d = compare_u8(ours, ref, bytes);
        printf("%-10s n=%d  %2dx%-2d  mean %.3f  max %d  differing %zu\n", s->name, n, w, h,
               d.mean, d.max, d.differ);
        if (!within(d, n)) TEST_FAIL_("%s at %d/8 outside the tolerance", s->name, n);
        if (scale_is_ours(n) && d.differ == 0)
            TEST_FAIL_("%s at %d/8: identical to libjpeg, the vector IDCT did not run", s->name, n);
        flip_rows(ref, w, h);
        if (within(compare_u8(ours, ref, bytes), n))
            TEST_FAIL_("%s at %d/8: the upside-down reference passed", s->name, n);
    }
    tjFree(jpg);
}

int main(void)
{
    static const sample samples[] = {
        {"420 q50", TJSAMP_420, 50, 0},
        {"420 q100", TJSAMP_420, 100, 0},
        {"422 q90", TJSAMP_422, 90, 0},
        {"444 q100", TJSAMP_444, 100, 0},
        {"gray q90", TJSAMP_GRAY, 90, 0},
        {"420 prog", TJSAMP_420, 90, TJFLAG_PROGRESSIVE},
    };
    tjhandle cj = tjInitCompress(), dj = tjInitDecompress();
    lf_tf_ws *ws = NULL;
    ASSERT_TRUE(cj && dj);
    ASSERT_EQ(lf_tf_ws_create(NULL, &ws), 0);
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
        check_sample(ws, cj, dj, &samples[i], (unsigned)i + 1);
    lf_tf_ws_free(ws);
    tjDestroy(dj);
    tjDestroy(cj);
    printf("tf_jpeg_idct: %zu images x 8 scales ok\n", sizeof samples / sizeof samples[0]);
    return 0;
}
