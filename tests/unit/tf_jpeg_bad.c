/*
 * tf_jpeg_bad.c — hostile and broken JPEGs are rejected with a reason.
 *
 * Each bad input goes through the full decode and the augment path; the
 * test checks the status and that a reason was given, then checks that the
 * workspace still decodes a good image. Rejection times and the peak RSS are
 * printed (the <= 50 ms goal is measured by the benchmark, not gated here).
 * The scan bomb is made here with libjpeg's compressor and a custom scan
 * script: every coefficient band refined bit by bit, 2090 scans, a valid
 * file that the scan limit must stop (and that decodes with the limit off).
 * The other inputs are a baseline 173x131 image made the same way, damaged;
 * degenerate valid sizes (1x1, 1x300, 300x1) must decode.
 * With --write DIR the generated inputs are written out (fuzz corpus seeds,
 * and the hostile set tests/bench/tf.sh times).
 */
#include "lf_tf.h"
#include "test.h"
#include "tf_jpeg_gen.h"

#include <ctype.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

enum { BASELINE, BOMB, PROGRESSIVE };

struct kind_arg { int subsample, kind, nscans; };

/* BOMB: one scan per coefficient band per bit (Al 10..0). */
static void setup_kind(struct jpeg_compress_struct *cc, void *arg)
{
    static jpeg_scan_info scans[11 + 3 * 63 * 11];
    struct kind_arg *a = arg;
    int components = cc->num_components, n = 0;
    for (int al = 10; al >= 0; al--) {            /* DC, all components interleaved */
        jpeg_scan_info *s = &scans[n++];
        memset(s, 0, sizeof *s);
        s->comps_in_scan = components;
        for (int c = 0; c < components; c++) s->component_index[c] = c;
        s->Ah = al == 10 ? 0 : al + 1;
        s->Al = al;
    }
    for (int c = 0; c < components; c++)
        for (int k = 1; k < 64; k++)
            for (int al = 10; al >= 0; al--) {
                jpeg_scan_info *s = &scans[n++];
                s->comps_in_scan = 1;
                s->component_index[0] = c;
                s->Ss = s->Se = k;
                s->Ah = al == 10 ? 0 : al + 1;
                s->Al = al;
            }
    if (!a->subsample && components == 3) cc->comp_info[0].h_samp_factor = cc->comp_info[0].v_samp_factor = 1;
    if (a->kind == BOMB) {
        cc->scan_info = scans;
        cc->num_scans = n;
    } else if (a->kind == PROGRESSIVE) {
        jpeg_simple_progression(cc);
        n = cc->num_scans;
    } else {
        n = 1;
    }
    a->nscans = n;
}

static unsigned char smooth_texture(size_t x, uint32_t y)
{
    return (unsigned char)(x / 2 + y / 3 + ((x ^ y) & 7));
}

/* A valid JPEG: baseline; (BOMB) one scan per coefficient band per bit
 * (Al 10..0); or (PROGRESSIVE) libjpeg's default progressive script. */
static unsigned char *make_jpeg(uint32_t w, uint32_t h, int components, int subsample,
                                int kind, size_t *size, int *nscans)
{
    struct kind_arg a = {subsample, kind, 0};
    tf_jpeg_gen g = {w, h, components, setup_kind, smooth_texture, &a};
    unsigned char *buf = tf_jpeg_gen_make(&g, size);
    *nscans = a.nscans;
    return buf;
}

/* Offset of the first marker 0xFF `code` after SOI, or -1. */
static long find_marker(const unsigned char *b, size_t n, unsigned char code)
{
    for (size_t i = 2; i + 1 < n; i++)
        if (b[i] == 0xFF && b[i + 1] == code) return (long)i;
    return -1;
}

/* Overwrites the last 8 bytes of each scan's entropy-coded data that has
 * at least 64 with 0xFF 0x00 pairs (a run of 1 bits: no Huffman code);
 * returns the number of scans damaged. */
static int damage_scan_ends(unsigned char *b, size_t n)
{
    int damaged = 0;
    for (size_t i = 2; i + 4 < n; i++) {
        if (b[i] != 0xFF || b[i + 1] != 0xDA) continue;
        size_t start = i + 2 + ((size_t)b[i + 2] << 8 | b[i + 3]), end = start;
        while (end + 1 < n && !(b[end] == 0xFF && b[end + 1] != 0x00 &&
                                (b[end + 1] < 0xD0 || b[end + 1] > 0xD7)))
            end++;
        if (end - start >= 64) {
            for (size_t k = end - 8; k < end; k += 2) b[k] = 0xFF, b[k + 1] = 0x00;
            damaged++;
        }
        i = end;
    }
    return damaged;
}

static unsigned char *dup_bytes(const unsigned char *b, size_t n)
{
    unsigned char *d = malloc(n + 1);
    ASSERT_TRUE(d != NULL);
    memcpy(d, b, n);
    return d;
}

static unsigned char out[1024 * 1024 * 3];
static const char *write_dir;    /* --write DIR: keep the inputs rejected under the */
static lf_tf_ws *default_ws;     /* default limits (this workspace) there */

static void write_file(const char *name, const unsigned char *b, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/", write_dir);
    size_t at = strlen(path);
    for (const char *c = name; *c && at + 5 < sizeof path; c++)   /* "a, b %" -> "a--b-" */
        path[at++] = isalnum((unsigned char)*c) ? (char)tolower((unsigned char)*c) : '-';
    memcpy(path + at, ".jpg", 5);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) TEST_FAIL_("cannot write %s", path);
}

/* Both entry points must reject with `want` and a reason, quickly or not. */
static void expect_rejected(lf_tf_ws *ws, const char *what, const unsigned char *b, size_t n,
                            int want)
{
    if (write_dir && ws == default_ws) write_file(what, b, n);
    lf_tf_image_params p;
    lf_tf_image_params_default(&p, 224, 224);
    p.crop = LF_TF_CROP_FULL;
    double t0 = now_ms();
    long rc = lf_tf_jpeg_decode(ws, out, sizeof out, b, n, NULL);
    double t1 = now_ms();
    printf("%-30s decode  %8.3f ms  %s\n", what, t1 - t0, lf_tf_reason(ws));
    ASSERT_EQ(rc, want);
    ASSERT_TRUE(lf_tf_reason(ws)[0] != '\0');
    t0 = now_ms();
    rc = lf_tf_jpeg_augment(ws, out, sizeof out, b, n, &p, 0, 42, NULL);
    t1 = now_ms();
    printf("%-30s augment %8.3f ms  %s\n", what, t1 - t0, lf_tf_reason(ws));
    ASSERT_EQ(rc, want);
    ASSERT_TRUE(lf_tf_reason(ws)[0] != '\0');
}

static void expect_good(lf_tf_ws *ws, const unsigned char *b, size_t n)
{
    lf_tf_jpeg_info info;
    long rc = lf_tf_jpeg_decode(ws, out, sizeof out, b, n, &info);
    if (rc < 0) TEST_FAIL_("good image rejected: %s", lf_tf_reason(ws));
    ASSERT_EQ(rc, (long)info.width * info.height * 3);
    ASSERT_STR_EQ(lf_tf_reason(ws), "");
}

int main(int argc, char **argv)
{
    write_dir = argc == 3 && strcmp(argv[1], "--write") == 0 ? argv[2] : NULL;
    lf_tf_ws *ws = NULL;
    ASSERT_EQ(lf_tf_ws_create(NULL, &ws), 0);
    default_ws = ws;
    size_t gn;
    int one;
    unsigned char *good = make_jpeg(173, 131, 3, 1, BASELINE, &gn, &one);
    expect_good(ws, good, gn);

    /* Zero bytes, and bytes that are all zero. */
    static const unsigned char zeros[1000];
    expect_rejected(ws, "zero bytes", zeros, 0, LF_TF_E_CORRUPT);
    expect_rejected(ws, "1000 zero bytes", zeros, sizeof zeros, LF_TF_E_CORRUPT);
    expect_good(ws, good, gn);

    /* Truncated: in the entropy data, and inside the headers. */
    expect_rejected(ws, "truncated at 50%", good, gn / 2, LF_TF_E_CORRUPT);
    expect_rejected(ws, "truncated at 90%", good, gn * 9 / 10, LF_TF_E_CORRUPT);
    expect_rejected(ws, "truncated after 100 bytes", good, 100, LF_TF_E_CORRUPT);
    expect_rejected(ws, "SOI only", good, 2, LF_TF_E_CORRUPT);
    expect_good(ws, good, gn);

    /* Wrong markers. */
    unsigned char *b = dup_bytes(good, gn);
    b[1] = 0xD9;                                        /* EOI where SOI belongs */
    expect_rejected(ws, "EOI instead of SOI", b, gn, LF_TF_E_CORRUPT);
    memcpy(b, good, gn);
    long sof = find_marker(good, gn, 0xC0);
    ASSERT_GT(sof, 0);
    b[sof + 1] = 0xC3;                                  /* lossless: not supported */
    expect_rejected(ws, "SOF3 (lossless)", b, gn, LF_TF_E_CORRUPT);
    memcpy(b, good, gn);
    long sos = find_marker(good, gn, 0xDA);
    ASSERT_GT(sos, 0);
    b[sos + 1] = 0x01;                                  /* TEM where SOS belongs */
    expect_rejected(ws, "SOS replaced by TEM", b, gn, LF_TF_E_CORRUPT);
    memcpy(b, good, gn);
    long dht = find_marker(good, gn, 0xC4);
    ASSERT_GT(dht, 0);
    b[dht + 4] = 0x7F;                                  /* bad table class/index */
    expect_rejected(ws, "DHT with bad table id", b, gn, LF_TF_E_CORRUPT);
    memcpy(b, good, gn);
    b[sos + 40] ^= 0xFF;                                /* damage the entropy data */
    b[sos + 41] = 0xFF;
    b[sos + 42] = 0xD0;                                 /* a stray RST marker */
    expect_rejected(ws, "stray marker in the data", b, gn, LF_TF_E_CORRUPT);
    expect_good(ws, good, gn);

    /* A declared 65500x65500 image: rejected from the header. */
    memcpy(b, good, gn);
    b[sof + 5] = 0xFF; b[sof + 6] = 0xDC;               /* height 65500 */
    b[sof + 7] = 0xFF; b[sof + 8] = 0xDC;               /* width 65500 */
    expect_rejected(ws, "declared 65500x65500", b, gn, LF_TF_E_LIMIT);
    free(b);

    /* The scan bomb: rejected by the scan limit, decodable without it. */
    size_t bn;
    int nscans;
    unsigned char *bomb = make_jpeg(64, 48, 3, 1, BOMB, &bn, &nscans);
    printf("scan bomb: %d scans, %zu bytes\n", nscans, bn);
    ASSERT_GE(nscans, 2000);
    expect_rejected(ws, "64x48, 2090 scans", bomb, bn, LF_TF_E_LIMIT);
    ASSERT_TRUE(strstr(lf_tf_reason(ws), "scans") != NULL);
    lf_tf_limits lim;
    lf_tf_limits_default(&lim);
    lim.max_scans = 5000;
    lf_tf_ws *lax = NULL;
    ASSERT_EQ(lf_tf_ws_create(&lim, &lax), 0);
    expect_good(lax, bomb, bn);
    lf_tf_ws_free(lax);
    free(bomb);

    /* The same at 1024x1024: each scan walks 16k blocks, so the limit is
     * what keeps the rejection short. */
    bomb = make_jpeg(1024, 1024, 3, 1, BOMB, &bn, &nscans);
    printf("large scan bomb: %d scans, %zu bytes\n", nscans, bn);
    expect_rejected(ws, "1024x1024, 2090 scans", bomb, bn, LF_TF_E_LIMIT);
    free(bomb);

    /* Memory bound: a progressive 4:4:4 image needs a whole-image
     * coefficient buffer (512*512*3*2 bytes). Under the default limit it
     * decodes; the workspace keeps the buffer (512*512*3 coefficients of 2
     * bytes, an 8-byte mask per 64 of them, plus row pointers) for the next
     * progressive image instead of growing, and the pixels are the same. */
    unsigned char *prog = make_jpeg(512, 512, 3, 0, BOMB, &bn, &nscans);
    lf_tf_ws *roomy = NULL;
    lf_tf_limits_default(&lim);
    lim.max_scans = 5000;
    ASSERT_EQ(lf_tf_ws_create(&lim, &roomy), 0);
    expect_good(roomy, prog, bn);
    size_t held = lf_tf_ws_decode_memory(roomy);
    printf("progressive 512x512 4:4:4: %zu bytes of coefficients held\n", held);
    ASSERT_TRUE(held >= 512 * 512 * 3 * 2 / 16 * 17 && held < 512 * 512 * 3 * 2 / 16 * 17 + 64 * 1024);
    static unsigned char first[512 * 512 * 3];
    memcpy(first, out, sizeof first);
    expect_good(roomy, prog, bn);
    ASSERT_EQ(lf_tf_ws_decode_memory(roomy), held);
    ASSERT_TRUE(memcmp(first, out, sizeof first) == 0);
    /* The prediction from the header is what the decode takes (lf-server
     * reserves it before decoding); a single-scan file takes none. */
    ASSERT_EQ(lf_tf_jpeg_decode_need(roomy, prog, bn), (long)held);
    ASSERT_EQ(lf_tf_jpeg_decode_need(roomy, good, gn), 0);
    long least = lf_tf_jpeg_strip_need(roomy, prog, bn, 1);
    lf_tf_ws_trim(roomy);
    ASSERT_EQ(lf_tf_ws_decode_memory(roomy), 0);
    expect_good(roomy, prog, bn);
    ASSERT_TRUE(memcmp(first, out, sizeof first) == 0);
    lf_tf_ws_free(roomy);
    /* A 1 MiB limit decodes it in strips (unit/tf_jpeg_strips), the same
     * pixels, holding no more than the limit; a limit below strips of one
     * iMCU row refuses it before allocating. */
    lf_tf_limits_default(&lim);
    lim.max_memory = 1u << 20;
    lim.max_scans = 5000;
    lf_tf_ws *tight = NULL;
    ASSERT_EQ(lf_tf_ws_create(&lim, &tight), 0);
    expect_good(tight, prog, bn);
    ASSERT_TRUE(memcmp(first, out, sizeof first) == 0);
    ASSERT_LE(lf_tf_ws_decode_memory(tight), (size_t)1 << 20);
    lf_tf_ws_free(tight);
    lim.max_memory = (uint64_t)least - 1;
    ASSERT_EQ(lf_tf_ws_create(&lim, &tight), 0);
    expect_rejected(tight, "strips of one row > the limit", prog, bn, LF_TF_E_LIMIT);
    ASSERT_EQ(lf_tf_ws_decode_memory(tight), 0);
    expect_good(tight, good, gn);
    lf_tf_ws_free(tight);
    free(prog);

    /* Scan tails: a crop of the top of a progressive image decodes no block
     * of any scan far below it, so damage at the end of every scan's data
     * (the image's last rows), which a full decode rejects, leaves that
     * crop as it was; a crop reaching the bottom sees it. */
    unsigned char *tall = make_jpeg(64, 1024, 3, 1, PROGRESSIVE, &bn, &nscans);
    unsigned char *torn = dup_bytes(tall, bn);
    int damaged = damage_scan_ends(torn, bn);
    printf("progressive 64x1024: %d scans, the ends of %d damaged\n", nscans, damaged);
    ASSERT_GE(damaged, 5);
    ASSERT_EQ(lf_tf_jpeg_decode(ws, out, sizeof out, torn, bn, NULL), LF_TF_E_CORRUPT);
    lf_tf_image_params tp;
    lf_tf_image_params_default(&tp, 64, 96);
    tp.out_dtype = LF_DTYPE_U8;
    lf_tf_box top = {0, 0, 64, 96, 0}, bottom = {0, 1024 - 96, 64, 96, 0};
    static unsigned char want[64 * 96 * 3];
    ASSERT_EQ(lf_tf_jpeg_crop_resize(ws, want, sizeof want, tall, bn, &tp, &top), (long)sizeof want);
    long trc = lf_tf_jpeg_crop_resize(ws, out, sizeof out, torn, bn, &tp, &top);
    if (trc < 0) TEST_FAIL_("top crop of the damaged file: %s", lf_tf_reason(ws));
    ASSERT_TRUE(memcmp(want, out, sizeof want) == 0);
    ASSERT_EQ(lf_tf_jpeg_crop_resize(ws, out, sizeof out, torn, bn, &tp, &bottom), LF_TF_E_CORRUPT);
    free(torn);
    free(tall);

    /* A pixel limit below the image. */
    lf_tf_limits_default(&lim);
    lim.max_pixels = 173 * 131 - 1;
    ASSERT_EQ(lf_tf_ws_create(&lim, &tight), 0);
    expect_rejected(tight, "one pixel over max_pixels", good, gn, LF_TF_E_LIMIT);
    lf_tf_ws_free(tight);

    /* Bad arguments are rejected before any decoding. */
    lf_tf_image_params p;
    lf_tf_image_params_default(&p, 0, 224);
    ASSERT_EQ(lf_tf_jpeg_augment(ws, out, sizeof out, good, gn, &p, 0, 0, NULL), LF_TF_E_ARG);
    lf_tf_image_params_default(&p, 224, 224);
    ASSERT_EQ(lf_tf_jpeg_augment(ws, out, 100, good, gn, &p, 0, 0, NULL), LF_TF_E_BUFFER);
    ASSERT_EQ(lf_tf_jpeg_decode(ws, out, 100, good, gn, NULL), LF_TF_E_BUFFER);
    p.std[1] = 0;                                        /* would divide by zero */
    ASSERT_EQ(lf_tf_jpeg_augment(ws, out, sizeof out, good, gn, &p, 0, 0, NULL), LF_TF_E_ARG);
    lf_tf_image_params_default(&p, 224, 224);
    p.resize = 9;
    ASSERT_EQ(lf_tf_jpeg_augment(ws, out, sizeof out, good, gn, &p, 0, 0, NULL), LF_TF_E_ARG);
    lf_tf_image_params_default(&p, 224, 224);
    lf_tf_box box = {100, 0, 100, 10, 0};                /* past the right edge */
    ASSERT_EQ(lf_tf_jpeg_crop_resize(ws, out, sizeof out, good, gn, &p, &box), LF_TF_E_ARG);
    ASSERT_TRUE(strstr(lf_tf_reason(ws), "outside") != NULL);
    expect_good(ws, good, gn);

    /* Degenerate but valid sizes decode: 1x1 and 1x300 (the fallback crop),
     * every output pixel of the 1x1 image the same. */
    static const uint32_t sizes[3][2] = {{1, 1}, {1, 300}, {300, 1}};
    for (int i = 0; i < 3; i++) {
        size_t tn;
        unsigned char *tiny = make_jpeg(sizes[i][0], sizes[i][1], 3, 1, BASELINE, &tn, &one);
        lf_tf_image_params_default(&p, 16, 16);
        p.out_dtype = LF_DTYPE_U8;
        ASSERT_EQ(lf_tf_jpeg_augment(ws, out, sizeof out, tiny, tn, &p, 0, 3, NULL), 16 * 16 * 3);
        for (int k = 3; i == 0 && k < 16 * 16 * 3; k++) ASSERT_EQ(out[k], out[k % 3]);
        free(tiny);
    }

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("peak RSS %ld KiB\n", ru.ru_maxrss);
    /* Bounded memory: a decoder that believed the 65500x65500 header would
     * need 12 GiB; everything here fits in far less than 256 MiB (ASan too). */
    ASSERT_LT(ru.ru_maxrss, 256 * 1024);
    free(good);
    lf_tf_ws_free(ws);
    printf("tf_jpeg_bad: ok\n");
    return 0;
}
