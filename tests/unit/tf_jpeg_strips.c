/*
 * tf_jpeg_strips.c — a progressive file decoded in strips (transforms/jpeg.c,
 * "strips") gives the bytes of its whole-image decode.
 *
 * Files made here with libjpeg's compressor: 4:2:0, 4:4:4 and grayscale,
 * heights of many iMCU rows with an odd last one; scan scripts libjpeg's
 * default, successive approximation of DC and AC refined to the last bit,
 * and the same stopped one bit short (the coefficients stay approximate,
 * so libjpeg smooths the blocks, reading neighbours two block rows away);
 * restart intervals of none, 3 MCUs and one MCU row. Each is decoded whole
 * (lf_tf_jpeg_decode, and u8 crops by lf_tf_jpeg_crop_resize at the top,
 * middle and bottom and of the whole image, at DCT scales from 1/8 to 8/8),
 * then again under a decode budget that holds strips of 1, 2 and 5 iMCU
 * rows (lf_tf_jpeg_strip_need): the bytes must be equal, and the workspace
 * must hold no more than the budget. A budget below strips of one row is
 * refused (LF_TF_E_LIMIT). A sequential file with one scan per component
 * (multi-scan, read by libjpeg's own decoder) cannot go in strips: its
 * least is its whole need, and a budget below that refuses it.
 *
 * The check bites: with the nonzero masks zeroed only in a decode's first
 * pass (the fault the design warns of: "bad Huffman code"), or the
 * window's rows above a strip cut from 3 to 2, 1 or 0, this test fails.
 * Restart intervals found a fault in the scan tails (jpeg.c, tails_hook):
 * a restart marker the reader had met was taken for the scan's end.
 */
#include "lf_tf.h"
#include "test.h"
#include "tf_jpeg_gen.h"

#include <string.h>

typedef struct variant {
    int w, h, comps, samp, script, stop;
    unsigned restart_interval;
    int restart_in_rows;
} variant;

static void setup_variant(struct jpeg_compress_struct *cc, void *arg)
{
    const variant *v = arg;
    jpeg_set_quality(cc, 85, TRUE);
    if (v->comps == 3) {
        cc->comp_info[0].h_samp_factor = v->samp;
        cc->comp_info[0].v_samp_factor = v->samp;
    }
    tf_jpeg_gen_progression(cc, v->script, v->stop, v->restart_interval, v->restart_in_rows);
}

/* Gradients, edges and a little noise: coefficients in every band. */
static unsigned char sample(size_t x, uint32_t y)
{
    static uint32_t r = 2463534242u;
    r ^= r << 13;
    r ^= r >> 17;
    r ^= r << 5;
    unsigned t = (unsigned)(x / 3) * 2 + y + ((x / 29 + y / 23) % 2 ? 70 : 0) + r % 24;
    return (unsigned char)(t & 255);
}

enum { W_MAX = 240, H_MAX = 330, OUT = 48 };

/* Crops: top, middle, bottom, whole image; output OUT or 2 OUT square, so
 * the DCT scale runs from 1/8 up. */
static void crop_of(const variant *v, int k, lf_tf_box *b, lf_tf_image_params *p)
{
    static const double y[4] = {0, 0.35, 0.7, 0}, hf[4] = {0.25, 0.3, 0.3, 1};
    uint32_t side = k % 2 ? 2 * OUT : OUT;
    lf_tf_image_params_default(p, side, side);
    p->out_dtype = LF_DTYPE_U8;
    *b = (lf_tf_box){k == 3 ? 0 : v->w * 0.2, v->h * y[k], k == 3 ? v->w : v->w * 0.6,
                     v->h * hf[k], k == 1};
}

static const size_t crop_bytes = 2 * OUT * 2 * OUT * 3;

/* The whole decode and the crops, into `out` (whole image, then each crop). */
static void decode_all(lf_tf_ws *ws, const variant *v, const unsigned char *jpg, size_t n,
                       unsigned char *out)
{
    size_t rgb = (size_t)v->w * (size_t)v->h * 3;
    long rc = lf_tf_jpeg_decode(ws, out, rgb, jpg, n, NULL);
    if (rc != (long)rgb) fprintf(stderr, "decode: %s\n", lf_tf_reason(ws));
    ASSERT_EQ(rc, (long)rgb);
    for (int k = 0; k < 4; k++) {
        lf_tf_box b;
        lf_tf_image_params p;
        crop_of(v, k, &b, &p);
        unsigned char *dst = out + rgb + (size_t)k * crop_bytes;
        rc = lf_tf_jpeg_crop_resize(ws, dst, crop_bytes, jpg, n, &p, &b);
        if (rc < 0) fprintf(stderr, "%dx%d comps %d script %d/%d restart %u/%d, crop %d: %s\n",
                            v->w, v->h, v->comps, v->script, v->stop, v->restart_interval,
                            v->restart_in_rows, k, lf_tf_reason(ws));
        ASSERT_EQ(rc, (long)lf_tf_image_out_size(&p));
    }
}

/* A budget one byte below `least` refuses the file before allocating. */
static void refused_below(lf_tf_ws *ws, const unsigned char *jpg, size_t n, long least,
                          unsigned char *out, size_t cap)
{
    lf_tf_ws_trim(ws);
    lf_tf_ws_set_decode_budget(ws, (uint64_t)least - 1);
    ASSERT_EQ(lf_tf_jpeg_decode(ws, out, cap, jpg, n, NULL), LF_TF_E_LIMIT);
    ASSERT_EQ(lf_tf_ws_decode_memory(ws), 0);
}

static void setup_sequential(struct jpeg_compress_struct *cc, void *arg)
{
    static jpeg_scan_info scans[3];
    (void)arg;
    for (int c = 0; c < 3; c++) tf_jpeg_gen_scan(scans, c, 1, c, 0, 63, 0, 0);
    cc->scan_info = scans;
    cc->num_scans = 3;
}

/* A sequential file with a scan per component. */
static void sequential_scans(lf_tf_ws *ws)
{
    tf_jpeg_gen g = {W_MAX, H_MAX, 3, setup_sequential, sample, NULL};
    size_t n, rgb = (size_t)W_MAX * H_MAX * 3;
    unsigned char *jpg = tf_jpeg_gen_make(&g, &n), *out = malloc(rgb);
    ASSERT_TRUE(out != NULL);
    long whole = lf_tf_jpeg_decode_need(ws, jpg, n);
    ASSERT_TRUE(whole > 0);
    ASSERT_EQ(lf_tf_jpeg_strip_need(ws, jpg, n, 1), whole);
    lf_tf_ws_trim(ws);
    lf_tf_ws_set_decode_budget(ws, (uint64_t)whole);
    ASSERT_EQ(lf_tf_jpeg_decode(ws, out, rgb, jpg, n, NULL), (long)rgb);
    refused_below(ws, jpg, n, whole, out, rgb);
    free(out);
    free(jpg);
}

int main(void)
{
    lf_tf_ws *ws = NULL;
    ASSERT_EQ(lf_tf_ws_create(NULL, &ws), 0);
    static const int kinds[3][2] = {{3, 2}, {3, 1}, {1, 1}};     /* components, sampling */
    static const int scripts[3][2] = {{SCRIPT_DEFAULT, 0}, {SCRIPT_APPROX, 0}, {SCRIPT_APPROX, 1}};
    static const unsigned restarts[3] = {0, 3, 0};
    int files = 0, decodes = 0;
    for (int k = 0; k < 3; k++)
        for (int s = 0; s < 3; s++)
            for (int r = 0; r < 3; r++) {
                variant v = {W_MAX - 13 * k - 7 * r, H_MAX - 9 * s - 5 * r, kinds[k][0],
                             kinds[k][1], scripts[s][0], scripts[s][1], restarts[r], r == 2};
                tf_jpeg_gen g = {(uint32_t)v.w, (uint32_t)v.h, v.comps, setup_variant, sample,
                                 &v};
                size_t n;
                unsigned char *jpg = tf_jpeg_gen_make(&g, &n);
                size_t all = (size_t)v.w * (size_t)v.h * 3 + 4 * crop_bytes;
                unsigned char *a = malloc(all), *b = malloc(all);
                ASSERT_TRUE(a && b);
                memset(a, 0x5a, all);
                lf_tf_ws_set_decode_budget(ws, 0);
                decode_all(ws, &v, jpg, n, a);
                static const uint32_t rows[3] = {1, 2, 5};
                for (int i = 0; i < 3; i++) {
                    long budget = lf_tf_jpeg_strip_need(ws, jpg, n, rows[i]);
                    ASSERT_TRUE(budget > 0 && budget < lf_tf_jpeg_decode_need(ws, jpg, n));
                    lf_tf_ws_trim(ws);
                    lf_tf_ws_set_decode_budget(ws, (uint64_t)budget);
                    memset(b, 0x5a, all);
                    decode_all(ws, &v, jpg, n, b);
                    ASSERT_LE(lf_tf_ws_decode_memory(ws), (size_t)budget);
                    if (memcmp(a, b, all))
                        fprintf(stderr, "file %d (%dx%d, %d comps, script %d stop %d, restart "
                                "%u/%d), strips of %u iMCU rows differ\n", files, v.w, v.h,
                                v.comps, v.script, v.stop, v.restart_interval,
                                v.restart_in_rows, rows[i]);
                    ASSERT_MEM_EQ(a, b, all);
                    decodes += 5;
                }
                /* Below strips of one row: refused, nothing allocated. */
                refused_below(ws, jpg, n, lf_tf_jpeg_strip_need(ws, jpg, n, 1), b, all);
                free(a);
                free(b);
                free(jpg);
                files++;
            }
    sequential_scans(ws);
    printf("tf_jpeg_strips: %d progressive files, %d decodes in strips of 1, 2, 5 iMCU rows: "
           "identical to the whole-image decodes; a sequential multi-scan file only whole\n",
           files, decodes);
    lf_tf_ws_free(ws);
    return 0;
}
