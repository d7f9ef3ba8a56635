/*
 * tf_jpeg_phuff.c — our progressive entropy decoder (transforms/phuff.c)
 * against libjpeg-turbo's.
 *
 * Progressive files made here with libjpeg's compressor: odd sizes (edge
 * blocks), 4:4:4, 4:2:0, 4:2:2 and grayscale, qualities 50 to 100 (q100 on
 * noise gives codes longer than the lookup table), three scan scripts
 * (libjpeg's default; successive approximation of DC and AC in three
 * spectral bands, Al 3..0; DC alone then one AC band per coefficient
 * group), restart intervals of none, 1 and 5 MCUs and one MCU row. Each is
 * decoded whole by lf_tf_jpeg_decode (our entropy decoder, then libjpeg's
 * 8x8 IDCT) and by tjDecompress2 (libjpeg's own): the bytes must be equal.
 *
 * Then damaged copies: a byte of the scan data replaced, or the file cut
 * short, 40 of each file. Where libjpeg decodes a copy without a warning,
 * ours must give the same bytes; where ours accepts one, libjpeg must give
 * the same bytes (it may warn where ours rejects: a marker met before the
 * data's end is reported by each when its reader needs the missing bits,
 * and both readers fill differently; counts printed). Nothing may crash or
 * read out of bounds (the sanitizer builds run this too).
 *
 * The check bites: with a fault planted in phuff.c (a correction bit
 * ignored, or the restart's DC reset left out) this test fails.
 */
#include "lf_tf.h"
#include "test.h"
#include "tf_jpeg_gen.h"

#include <string.h>

#include <turbojpeg.h>

static uint64_t rng = 88172645463325252ull;
static unsigned next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng >> 32);
}

typedef struct variant {
    int w, h, comps, h_samp, v_samp, quality, script;
    unsigned restart_interval;
    int restart_in_rows;
} variant;

static void setup_variant(struct jpeg_compress_struct *cc, void *arg)
{
    const variant *v = arg;
    jpeg_set_quality(cc, v->quality, TRUE);
    if (v->comps == 3) {
        cc->comp_info[0].h_samp_factor = v->h_samp;
        cc->comp_info[0].v_samp_factor = v->v_samp;
    }
    tf_jpeg_gen_progression(cc, v->script, 0, v->restart_interval, v->restart_in_rows);
}

/* Noise over gradients and edges: every coefficient size, long codes at q100. */
static unsigned char noisy(size_t x, uint32_t y)
{
    unsigned t = (unsigned)(x / 3) + y + ((x / 17 + y / 13) % 2 ? 60 : 0) + next_rand() % 40;
    return (unsigned char)(t & 255);
}

static unsigned char *make_jpeg(variant *v, size_t *size)
{
    tf_jpeg_gen g = {(uint32_t)v->w, (uint32_t)v->h, v->comps, setup_variant, noisy, v};
    return tf_jpeg_gen_make(&g, size);
}

static unsigned char ours[400 * 300 * 3], theirs[400 * 300 * 3];

/* libjpeg's own decode into theirs; with TJFLAG_STOPONWARNING a warning
 * fails it, else it decodes on (TurboJPEG still returns -1, with
 * TJERR_WARNING). Returns 0 where theirs holds the image, else -1. */
static int decode_libjpeg(tjhandle tj, const unsigned char *b, size_t n, int w, int h, int flags)
{
    if (tjDecompress2(tj, b, (unsigned long)n, theirs, w, 0, h, TJPF_RGB, flags) == 0) return 0;
    return !(flags & TJFLAG_STOPONWARNING) && tjGetErrorCode(tj) == TJERR_WARNING ? 0 : -1;
}

/* Offset of the first byte after the first SOS segment, or 0. */
static size_t scan_data_start(const unsigned char *b, size_t n)
{
    for (size_t i = 2; i + 4 <= n && b[i] == 0xFF;) {
        size_t len = (size_t)b[i + 2] << 8 | b[i + 3];
        if (b[i + 1] == 0xDA) return i + 2 + len;
        i += 2 + len;
    }
    return 0;
}

typedef struct tally { int same, rejected, total; } tally;

static void damaged(lf_tf_ws *ws, tjhandle tj, const variant *v, const unsigned char *good,
                    size_t n, tally *t)
{
    size_t start = scan_data_start(good, n), rgb = (size_t)v->w * (size_t)v->h * 3;
    ASSERT_TRUE(start > 0 && start < n);
    unsigned char *b = malloc(n);
    ASSERT_TRUE(b != NULL);
    for (int k = 0; k < 40; k++) {
        memcpy(b, good, n);
        size_t len = n;
        if (k % 4 == 3) len = start + next_rand() % (n - start);     /* cut short */
        else b[start + next_rand() % (n - 2 - start)] = (unsigned char)next_rand();
        long rc = lf_tf_jpeg_decode(ws, ours, sizeof ours, b, len, NULL);
        int strict = decode_libjpeg(tj, b, len, v->w, v->h, TJFLAG_STOPONWARNING);
        t->total++;
        if (strict == 0) {       /* libjpeg saw nothing wrong: ours must agree */
            if (rc != (long)rgb) fprintf(stderr, "rejected where libjpeg did not: %s\n", lf_tf_reason(ws));
            ASSERT_EQ(rc, (long)rgb);
            ASSERT_MEM_EQ(ours, theirs, rgb);
            t->same++;
        } else if (rc >= 0) {    /* ours accepted: libjpeg's bytes must be the same */
            ASSERT_EQ(decode_libjpeg(tj, b, len, v->w, v->h, 0), 0);
            ASSERT_MEM_EQ(ours, theirs, rgb);
            t->same++;
        } else {
            ASSERT_TRUE(rc == LF_TF_E_CORRUPT || rc == LF_TF_E_LIMIT);
            t->rejected++;
        }
    }
    free(b);
}

int main(void)
{
    lf_tf_ws *ws = NULL;
    ASSERT_EQ(lf_tf_ws_create(NULL, &ws), 0);
    tjhandle tj = tjInitDecompress();
    ASSERT_TRUE(tj != NULL);
    static const int sampling[4][3] = {{3, 1, 1}, {3, 2, 2}, {3, 2, 1}, {1, 1, 1}};
    static const int quality[3] = {50, 90, 100};
    static const unsigned restarts[4] = {0, 1, 5, 0};
    int files = 0;
    tally t = {0, 0, 0};
    for (int s = 0; s < 4; s++)
        for (int script = 0; script < SCRIPTS; script++)
            for (int r = 0; r < 4; r++) {
                variant v = {101 + 40 * s, 77 + 30 * r, sampling[s][0], sampling[s][1],
                             sampling[s][2], quality[(s + script + r) % 3], script,
                             restarts[r], r == 3};
                size_t n;
                unsigned char *jpg = make_jpeg(&v, &n);
                size_t rgb = (size_t)v.w * (size_t)v.h * 3;
                ASSERT_EQ(lf_tf_jpeg_decode(ws, ours, sizeof ours, jpg, n, NULL), (long)rgb);
                ASSERT_EQ(decode_libjpeg(tj, jpg, n, v.w, v.h, TJFLAG_STOPONWARNING), 0);
                ASSERT_MEM_EQ(ours, theirs, rgb);
                damaged(ws, tj, &v, jpg, n, &t);
                free(jpg);
                files++;
            }
    printf("tf_jpeg_phuff: %d progressive files identical to libjpeg's decode; damaged copies: "
           "%d same bytes, %d rejected by ours where libjpeg warned, of %d\n",
           files, t.same, t.rejected, t.total);
    tjDestroy(tj);
    lf_tf_ws_free(ws);
    return 0;
}
