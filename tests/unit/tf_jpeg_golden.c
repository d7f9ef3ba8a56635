/*
 * tf_jpeg_golden.c — decode + crop + resize + normalize against PIL.
 *
 * tests/data/tf/make_golden.py made small JPEGs (odd sizes, 4:2:0 and 4:4:4,
 * grayscale, CMYK with and without the Adobe marker, progressive, 4:2:0
 * noise cropped at block edges) and PIL's outputs: a full-size decode, or the
 * crop box resized with PIL's BILINEAR/BOX filter (Image.resize(box=)).
 *
 * Tolerances, in u8 levels, and why:
 *   - full decode: exact (PIL runs the same system libjpeg-turbo with the
 *     same settings); CMYK: 1 (PIL's CMYK->RGB rounds differently);
 *   - crop+resize at DCT scale 8/8: max 1 (same decode; our filter sums in
 *     float, PIL's in 22-bit fixed point; both round);
 *   - crop+resize at a reduced DCT scale: mean 1.0, max 10. libjpeg's scaled
 *     IDCT low-passes differently from PIL's full decode + triangle filter;
 *     the difference is small on average and largest at sharp edges (seen:
 *     mean <= 0.9, max <= 7). Area is an exact-coverage box; PIL's BOX takes
 *     whole pixels by their centres: the same at whole shrink factors.
 *   - f32/f16 CHW: the u8 tolerance divided by 255*std (plus f16 rounding).
 * A planted fault (the mirrored reference) must fail the same check.
 * Also: lf_tf_jpeg_augment equals lf_tf_jpeg_crop_resize of the planned box,
 * and three threads give the same bytes as one.
 */
#include "lf_tf.h"
#include "test.h"

#include <math.h>
#include <pthread.h>

#define DATA "tests/data/tf/"

static unsigned char *load(const char *name, size_t *size)
{
    char path[512];
    snprintf(path, sizeof path, DATA "%s", name);
    FILE *f = fopen(path, "rb");
    if (!f) TEST_FAIL_("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    unsigned char *buf = malloc((size_t)n + 1);
    ASSERT_TRUE(buf != NULL);
    ASSERT_EQ(fread(buf, 1, (size_t)n, f), n);
    fclose(f);
    *size = (size_t)n;
    return buf;
}

typedef struct diff { double mean; int max; } diff;

static diff compare_u8(const unsigned char *a, const unsigned char *b, size_t n)
{
    diff d = {0, 0};
    for (size_t i = 0; i < n; i++) {
        int e = abs((int)a[i] - (int)b[i]);
        d.mean += e;
        if (e > d.max) d.max = e;
    }
    d.mean /= (double)n;
    return d;
}

static int within(diff d, double mean_tol, int max_tol)
{
    return d.mean <= mean_tol && d.max <= max_tol;
}

/* The reference mirrored left-right: a wrong answer the check must refuse. */
static void mirror(unsigned char *img, uint32_t w, uint32_t h)
{
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w / 2; x++)
            for (int c = 0; c < 3; c++) {
                unsigned char *l = img + ((size_t)y * w + x) * 3 + c;
                unsigned char *r = img + ((size_t)y * w + (w - 1 - x)) * 3 + c;
                unsigned char t = *l; *l = *r; *r = t;
            }
}

/* f32 / f16 CHW output against the reference normalized here in double,
 * and f32 against our own u8 output before its rounding (within 0.5 level
 * + float noise): on AVX2 CPUs f32 rows take their own horizontal pass. */
static void check_normalized(lf_tf_ws *ws, const unsigned char *jpg, size_t jsize,
                             lf_tf_image_params p, const lf_tf_box *box,
                             const unsigned char *ref, const unsigned char *ours, double u8_tol)
{
    size_t n = (size_t)p.out_w * p.out_h;
    float *f = malloc(n * 3 * sizeof *f);
    uint16_t *h = malloc(n * 3 * sizeof *h);
    ASSERT_TRUE(f && h);
    p.out_dtype = LF_DTYPE_F32;
    ASSERT_EQ(lf_tf_jpeg_crop_resize(ws, f, n * 12, jpg, jsize, &p, box), (long)(n * 12));
    p.out_dtype = LF_DTYPE_F16;
    ASSERT_EQ(lf_tf_jpeg_crop_resize(ws, h, n * 6, jpg, jsize, &p, box), (long)(n * 6));
    for (int c = 0; c < 3; c++) {
        double tol = (u8_tol + 0.5) / (255.0 * p.std[c]);   /* +0.5: ref was rounded to u8 */
        for (size_t i = 0; i < n; i++) {
            double want = (ref[i * 3 + (size_t)c] / 255.0 - p.mean[c]) / p.std[c];
            ASSERT_DBL_NEAR(f[(size_t)c * n + i], want, tol);
            double level = (f[(size_t)c * n + i] * p.std[c] + p.mean[c]) * 255.0;
            ASSERT_DBL_NEAR(level, ours[i * 3 + (size_t)c], 0.502);
            _Float16 hv = (_Float16)f[(size_t)c * n + i];   /* round to nearest even */
            uint16_t bits;
            memcpy(&bits, &hv, 2);
            ASSERT_EQ(h[(size_t)c * n + i], bits);
        }
    }
    free(h);
    free(f);
}

static void run_case(lf_tf_ws *ws, const char *line)
{
    char name[64], file[64], mode[16];
    double x, y, w, h;
    int flip;
    unsigned ow, oh;
    ASSERT_EQ(sscanf(line, "%63s %63s %lf %lf %lf %lf %d %u %u %15s", name, file, &x, &y, &w,
                     &h, &flip, &ow, &oh, mode), 10);
    size_t jsize, rsize;
    unsigned char *jpg = load(file, &jsize);
    char refname[80];
    snprintf(refname, sizeof refname, "%s.bin", name);
    unsigned char *ref = load(refname, &rsize);
    ASSERT_EQ(rsize, (size_t)ow * oh * 3);
    unsigned char *out = malloc(rsize);
    ASSERT_TRUE(out != NULL);
    int cmyk = strstr(file, "cmyk") != NULL;
    double mean_tol;
    int max_tol;
    if (strcmp(mode, "decode") == 0) {
        lf_tf_jpeg_info info;
        ASSERT_EQ(lf_tf_jpeg_decode(ws, out, rsize, jpg, jsize, &info), (long)rsize);
        ASSERT_EQ(info.width, ow);
        ASSERT_EQ(info.height, oh);
        mean_tol = cmyk ? 1 : 0;
        max_tol = cmyk ? 1 : 0;
    } else {
        lf_tf_image_params p;
        lf_tf_image_params_default(&p, ow, oh);
        p.resize = strcmp(mode, "area") == 0 ? LF_TF_RESIZE_AREA : LF_TF_RESIZE_BILINEAR;
        p.out_dtype = LF_DTYPE_U8;
        lf_tf_box box = {x, y, w, h, flip};
        ASSERT_EQ(lf_tf_jpeg_crop_resize(ws, out, rsize, jpg, jsize, &p, &box), (long)rsize);
        int full_scale = w * 7 / 8 < ow || h * 7 / 8 < oh;   /* the 8/8 DCT scale */
        mean_tol = full_scale ? 1 : 1.0;
        max_tol = full_scale ? 1 + cmyk : 10;
    }
    diff d = compare_u8(out, ref, rsize);
    printf("%-14s %-16s %-8s mean |diff| %.3f  max %d  (tolerance %.1f / %d)\n", name, file,
           mode, d.mean, d.max, mean_tol, max_tol);
    if (!within(d, mean_tol, max_tol)) TEST_FAIL_("%s: outside tolerance", name);
    if (strcmp(mode, "decode") != 0) {
        lf_tf_image_params p;
        lf_tf_image_params_default(&p, ow, oh);
        p.resize = strcmp(mode, "area") == 0 ? LF_TF_RESIZE_AREA : LF_TF_RESIZE_BILINEAR;
        lf_tf_box box = {x, y, w, h, flip};
        check_normalized(ws, jpg, jsize, p, &box, ref, out, max_tol);
    }
    if (ow > 8) {
        mirror(ref, ow, oh);
        diff bad = compare_u8(out, ref, rsize);
        if (within(bad, mean_tol, max_tol)) TEST_FAIL_("%s: planted fault not caught", name);
    }
    free(out);
    free(ref);
    free(jpg);
}

/* augment = plan + crop_resize, the same bytes from two workspaces. */
static void test_augment_matches_plan(void)
{
    size_t n;
    unsigned char *jpg = load("large.jpg", &n);
    lf_tf_ws *a = NULL, *b = NULL;
    ASSERT_EQ(lf_tf_ws_create(NULL, &a), 0);
    ASSERT_EQ(lf_tf_ws_create(NULL, &b), 0);
    lf_tf_image_params p;
    lf_tf_image_params_default(&p, 64, 64);
    p.seed = 77;
    size_t sz = lf_tf_image_out_size(&p);
    ASSERT_EQ(sz, 64 * 64 * 3 * 4);
    float *o1 = malloc(sz), *o2 = malloc(sz);
    ASSERT_TRUE(o1 && o2);
    for (uint64_t id = 0; id < 20; id++) {
        lf_tf_jpeg_info info;
        ASSERT_EQ(lf_tf_jpeg_augment(a, o1, sz, jpg, n, &p, 1, id, &info), (long)sz);
        ASSERT_EQ(info.width, 480);
        ASSERT_EQ(info.height, 360);
        lf_tf_box box;
        ASSERT_EQ(lf_tf_image_plan(&p, 480, 360, 1, id, &box), 0);
        ASSERT_EQ(lf_tf_jpeg_crop_resize(b, o2, sz, jpg, n, &p, &box), (long)sz);
        ASSERT_MEM_EQ(o1, o2, sz);
    }
    free(o2);
    free(o1);
    lf_tf_ws_free(b);
    lf_tf_ws_free(a);
    free(jpg);
}

/* Threads with their own workspaces, each taking every third id in
 * descending order, give the same bytes as one workspace taking the ids in
 * ascending order: the output depends on (seed, epoch, id) only. */
enum { NTHREADS = 3, NSAMPLES = 24, SIDE = 32 };

struct thread_job {
    const unsigned char *jpg;
    size_t size;
    int first;                   /* this thread takes ids first, first+N, ... */
    float (*out)[SIDE * SIDE * 3];
    long rc;
};

static void thread_params(lf_tf_image_params *p)
{
    lf_tf_image_params_default(p, SIDE, SIDE);
    p->seed = 5;
}

static void *augment_some(void *arg)
{
    struct thread_job *t = arg;
    lf_tf_ws *ws = NULL;
    lf_tf_image_params p;
    thread_params(&p);
    t->rc = lf_tf_ws_create(NULL, &ws);
    for (int id = NSAMPLES - 1 - t->first; id >= 0 && t->rc >= 0; id -= NTHREADS)
        t->rc = lf_tf_jpeg_augment(ws, t->out[id], sizeof t->out[id], t->jpg, t->size, &p, 3,
                                   (uint64_t)id, NULL);
    lf_tf_ws_free(ws);
    return NULL;
}

static void test_threads(void)
{
    size_t n;
    unsigned char *jpg = load("progressive.jpg", &n);
    static float seq[NSAMPLES][SIDE * SIDE * 3], par[NSAMPLES][SIDE * SIDE * 3];
    lf_tf_ws *ws = NULL;                                /* one workspace, ascending ids */
    lf_tf_image_params p;
    thread_params(&p);
    ASSERT_EQ(lf_tf_ws_create(NULL, &ws), 0);
    for (int id = 0; id < NSAMPLES; id++)
        ASSERT_EQ(lf_tf_jpeg_augment(ws, seq[id], sizeof seq[id], jpg, n, &p, 3, (uint64_t)id, NULL),
                  (long)sizeof seq[id]);
    lf_tf_ws_free(ws);
    pthread_t th[NTHREADS];
    struct thread_job jobs[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        jobs[i] = (struct thread_job){jpg, n, i, par, 0};
        ASSERT_EQ(pthread_create(&th[i], NULL, augment_some, &jobs[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) {
        ASSERT_EQ(pthread_join(th[i], NULL), 0);
        ASSERT_GE(jobs[i].rc, 0);
    }
    ASSERT_MEM_EQ(seq, par, sizeof seq);
    free(jpg);
}

int main(void)
{
    lf_tf_ws *ws = NULL;
    ASSERT_EQ(lf_tf_ws_create(NULL, &ws), 0);
    FILE *f = fopen(DATA "cases.txt", "r");
    if (!f) TEST_FAIL_("cannot open " DATA "cases.txt (run from the repository root)");
    char line[512];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        run_case(ws, line);
        cases++;
    }
    fclose(f);
    ASSERT_GE(cases, 10);
    lf_tf_ws_free(ws);
    lf_tf_ws_free(NULL);
    test_augment_matches_plan();
    test_threads();
    printf("tf_jpeg_golden: %d cases ok\n", cases);
    return 0;
}
