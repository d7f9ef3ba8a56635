/*
 * jpeg.c — JPEG decode with crop and resize, through libjpeg's own API.
 *
 * The cost of decoding a JPEG is mostly entropy decoding (every coefficient
 * of every scanline above the last one used) plus IDCT, upsampling and color
 * conversion of the pixels produced. A crop of an image that is resized to
 * 224x224 needs neither all those pixels nor full resolution, so:
 *   - libjpeg scales the IDCT by n/8 (n = 1..8); we take the smallest n whose
 *     scaled crop still covers the output, so the resize that follows
 *     shrinks by less than 2x (or up-samples when the crop is small);
 *   - jpeg_crop_scanline limits IDCT/color work to the crop's columns
 *     (widened to an iMCU boundary), jpeg_skip_scanlines skips the rows above
 *     it without IDCT, and we stop after its last row (jpeg_abort), so the
 *     part below the crop is never decoded. The other side of that coin:
 *     damage below the crop goes unnoticed for this crop.
 *   - libjpeg-turbo 2.1 runs the IDCTs of most scaled sizes in plain C; on
 *     CPUs with AVX2 + FMA a vector kernel replaces them ("scaled IDCT").
 * The resize is separable with PIL's filters (triangle for bilinear, exact
 * coverage box for area, both widened by the shrink factor): per output row
 * a vertical pass over the region's columns (a contiguous loop the compiler
 * vectorizes) into one scratch row, then a horizontal pass with one RGB(x)
 * pixel per vector, normalized and stored straight into the caller's layout;
 * compiled for the baseline ISA and for AVX2 + FMA, picked at run time.
 *
 * Hostile input: libjpeg reports errors through error_exit and warnings
 * through emit_message(-1); both long-jump back to guarded() with a reason,
 * so a warning (e.g. "premature end of data") rejects the image. Pixel count
 * is checked right after the header; a progress monitor counts scans;
 * max_memory_to_use bounds libjpeg's own allocations.
 */
#include "lf_tf.h"
#include "phuff.h"
#include "tf_internal.h"

#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include <jpeglib.h>
#include <jerror.h>
#include <jpegint.h>             /* struct jpeg_inverse_dct: see "scaled IDCT" */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#define MAX_JPEG_SIDE 65535u
#define ROWS_PER_READ 16
#define VEC_SLACK 16             /* the scratch row may be read up to 4 lanes past the end */

/* Inlined into each ISA clone of a kernel (see idct_avx2, resize_rows_avx2). */
#define TF_INLINE static inline __attribute__((always_inline))

/* GCC/clang vector extension: 4 lanes, so one RGB(x) pixel is one vector. */
typedef float v4f __attribute__((vector_size(16)));
/* Kernels cloned for AVX2 + FMA (+ F16C, which every AVX2 CPU has, for f16
 * stores). GCC in ISO C mode (-std=c11) fuses a * b + c into an FMA only
 * when asked; clang does by default and has no optimize attribute. */
#if defined(__x86_64__) && defined(__GNUC__)
#define TF_HAVE_AVX2 1
#ifdef __clang__
#define TF_AVX2_FMA __attribute__((target("avx2,fma,f16c")))
#else
#define TF_AVX2_FMA __attribute__((target("avx2,fma,f16c"), optimize("fp-contract=fast")))
#endif
#define TF_AVX2_INLINE TF_AVX2_FMA static inline __attribute__((always_inline))
#endif

static int cpu_has_avx2_fma(void)
{
#ifdef TF_HAVE_AVX2
    unsigned a, b, c, d;         /* clang 14's __builtin_cpu_supports knows no "f16c" */
    int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
#else
    return 0;
#endif
}

/* 8 lanes for the IDCT: one row of coefficients. */
typedef float v8f __attribute__((vector_size(32)));
typedef int16_t v8s __attribute__((vector_size(16)));

#define IDCT_SIZES 7             /* the scaled sizes replaced: 3 5 6 7 10 12 14 */
#define IDCT_MAX_N 14
#define IDCT_COMPS 4             /* components with a replaced IDCT (Y Cb Cr, or CMYK) */

/* Weights of the scaled IDCT (see "scaled IDCT"), built once per workspace. */
typedef struct idct_tables {
    v8f col[IDCT_SIZES][IDCT_MAX_N][8];   /* pass 1: B[v][y] in all lanes, at [y][v] */
    v8f row[IDCT_SIZES][8][2];            /* pass 2: B[u][x], x = lanes 0..15, at [u][half] */
    v8f q[IDCT_COMPS][8];                 /* the image's quantization steps, row v over u */
} idct_tables;

struct tf_error_mgr {
    struct jpeg_error_mgr pub;   /* libjpeg's part; must come first */
    jmp_buf jump;                /* where guarded() waits */
    lf_tf_ws *ws;
};

/* One axis of the separable resize: for output index i, taps
 * [start[i], start[i] + count[i]) of the input with weights w + i * count[i]
 * (every output has the same count; see coeffs_build). */
typedef struct axis_coeffs {
    int32_t *start, *count;
    float *w;
    uint16_t *wq;                /* y axis only: w in 1/32768 units (resize_vertical) */
    v4f *w4;                     /* x axis only: w in output order, each in 4 lanes */
    v8f *w8;                     /* x axis with AVX2 only: w4 paired (resize_horizontal_x8) */
    size_t wcap;                 /* floats in w */
} axis_coeffs;

/* A whole-image coefficient array (see "coefficient memory"). */
typedef struct coef_array {
    JBLOCKARRAY rows;            /* numrows row pointers into the arena */
    JDIMENSION blocks_per_row, numrows;
    int pre_zero;
} coef_array;

#define COEF_ARRAYS MAX_COMPONENTS

typedef struct coef_arena {
    coef_array arr[COEF_ARRAYS];
    int n;                       /* arrays requested for the current image */
    unsigned char *mem;          /* mapped (coef_unmap); high-water size, up to max_memory */
    size_t cap;
    uint64_t budget;             /* what a decode may hold here (lf_tf_ws_set_decode_budget) */
    /* Strips ("strips" below): the iMCU rows [win0, win1) whose blocks are
     * kept, the others sent to one scratch row; win1 == 0: all kept. */
    JDIMENSION win0, win1;
    /* libjpeg's own methods, called for everything that is not ours */
    struct jpeg_memory_mgr orig;
} coef_arena;

/* Skipping the tails of scans (see "scan tails"). */
typedef struct scan_tails {
    JDIMENSION from;             /* first iMCU row no output reads; UINT_MAX: none */
} scan_tails;

/* The resize of one image, compiled per ISA (see "crop + resize"). */
typedef struct resize_job resize_job;
typedef void (*resize_rows_fn)(const lf_tf_ws *ws, const resize_job *r);
static void resize_rows_generic(const lf_tf_ws *ws, const resize_job *r);
#ifdef TF_HAVE_AVX2
static void resize_rows_avx2(const lf_tf_ws *ws, const resize_job *r);
#endif

struct lf_tf_ws {
    lf_tf_limits lim;
    struct jpeg_decompress_struct cinfo;
    struct tf_error_mgr err;
    struct jpeg_progress_mgr progress;
    int status;                  /* set with reason before a long jump */
    char reason[256];
    unsigned char *region;       /* decoded crop region, u8, 3 or 4 channels */
    size_t region_cap;
    float *tmp;                  /* one vertically resized region row: width x 3 (+4) */
    axis_coeffs ax, ay;
    idct_tables *idct;           /* 32-byte aligned */
    inverse_DCT_method_ptr idct_fn;   /* idct_avx2, or NULL: libjpeg's own */
    resize_rows_fn resize_fn;    /* resize_rows_avx2 or resize_rows_generic */
    coef_arena coef;             /* whole-image coefficient buffers, kept across images */
    scan_tails tail;             /* multi-scan files: what no output row reads */
    tf_phuff *phuff;             /* progressive scans' entropy decoder (phuff.c) */
};

/* ---- errors and limits --------------------------------------------------- */

const char *lf_tf_strerror(int status)
{
    switch (status) {
    case LF_TF_OK: return "success";
    case LF_TF_E_ARG: return "invalid argument";
    case LF_TF_E_BUFFER: return "destination buffer too small";
    case LF_TF_E_NOMEM: return "out of memory";
    case LF_TF_E_LIMIT: return "input exceeds a configured limit";
    case LF_TF_E_CORRUPT: return "corrupt or malformed input";
    case LF_TF_E_UNSUPPORTED: return "unsupported input";
    default: return "unknown status";
    }
}

const char *lf_tf_reason(const lf_tf_ws *ws) { return ws->reason; }

/* Records why the current call fails and returns status, for `return fail(...)`. */
static int fail(lf_tf_ws *ws, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(lf_tf_ws *ws, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ws->reason, sizeof ws->reason, fmt, ap);
    va_end(ap);
    ws->status = status;
    return status;
}

/* Leaves libjpeg for guarded() with the current status and reason. */
static void bail(lf_tf_ws *ws) __attribute__((noreturn));
static void bail(lf_tf_ws *ws) { longjmp(ws->err.jump, 1); }

static void on_error_exit(j_common_ptr c)
{
    struct tf_error_mgr *e = (struct tf_error_mgr *)(void *)c->err;
    char msg[JMSG_LENGTH_MAX];
    (*c->err->format_message)(c, msg);
    int st = c->err->msg_code == JERR_OUT_OF_MEMORY ||
             c->err->msg_code == JERR_NO_BACKING_STORE ? LF_TF_E_LIMIT : LF_TF_E_CORRUPT;
    fail(e->ws, st, "libjpeg error: %s", msg);
    bail(e->ws);
}

/* Level -1 is a warning (corrupt data the library would paper over): reject.
 * Levels >= 0 are trace messages: ignore. */
static void on_emit_message(j_common_ptr c, int level)
{
    if (level >= 0) return;
    struct tf_error_mgr *e = (struct tf_error_mgr *)(void *)c->err;
    char msg[JMSG_LENGTH_MAX];
    (*c->err->format_message)(c, msg);
    fail(e->ws, LF_TF_E_CORRUPT, "libjpeg warning: %s", msg);
    bail(e->ws);
}

static void on_output_message(j_common_ptr c) { (void)c; }

static void tails_hook(lf_tf_ws *ws);

/* Called before every step (an iMCU row, or the markers between scans)
 * while a multi-scan file is absorbed, and per output row group. A
 * progressive scan's entropy decoding goes to phuff.c at its first row. */
static void on_progress(j_common_ptr c)
{
    j_decompress_ptr d = (j_decompress_ptr)c;
    lf_tf_ws *ws = ((struct tf_error_mgr *)(void *)c->err)->ws;
    if ((uint32_t)d->input_scan_number > ws->lim.max_scans) {
        fail(ws, LF_TF_E_LIMIT, "more than %u scans", ws->lim.max_scans);
        bail(ws);
    }
    tf_phuff_take_scan(ws->phuff, d);
    tails_hook(ws);
}

void lf_tf_limits_default(lf_tf_limits *lim)
{
    lim->max_pixels = 50000000;
    lim->max_scans = 64;
    lim->max_memory = 256u << 20;
    lim->max_out_side = 1024;
    lim->max_region_pixels = 0;  /* derived in lf_tf_ws_create */
}

/* ---- scaled IDCT --------------------------------------------------------- */
/*
 * libjpeg-turbo 2.1 has SIMD IDCTs for 8x8, 4x4 and 2x2 outputs only. The
 * other scaled sizes run plain C: 3, 5, 6, 7 for luma at n/8, and 6, 10, 12,
 * 14 for 4:2:0 chroma, which libjpeg brings to luma resolution inside the
 * IDCT (2n x 2n outputs) instead of upsampling. They took a quarter of a
 * crop's instructions (callgrind), so these sizes get one vectorized float
 * kernel instead: out = 128 + B^T D B with D the dequantized coefficients,
 * B[u][x] = C(u)/2 cos((2x+1) u pi / 2N), C(0) = 1/sqrt(2), over the first
 * min(N, 8) frequencies per axis: libjpeg's definition of a scaled IDCT
 * (an N-point IDCT of the low frequencies, the DC keeping its level).
 * Pass 1 makes one 8-lane vector per output row (over u) from the
 * coefficient rows; pass 2 one or two 8-lane vectors of output pixels per
 * row. Float rounding differs from libjpeg's fixed point by at most a level
 * (tests/unit/tf_jpeg_idct compares with tjDecompress2 at every scale).
 *
 * It goes in through libjpeg's per-component IDCT pointers, set after
 * jpeg_start_decompress (idct_install). struct jpeg_inverse_dct comes from
 * jpegint.h, which the dev package installs but which is libjpeg's internal
 * interface; its layout has not changed since libjpeg 6b.
 */

static int idct_size_index(int n)
{
    switch (n) {
    case 3: return 0;
    case 5: return 1;
    case 6: return 2;
    case 7: return 3;
    case 10: return 4;
    case 12: return 5;
    case 14: return 6;
    default: return -1;
    }
}

static double idct_basis(int n, int u, int x)
{
    double c = u ? 0.5 : 0.5 / sqrt(2.0);
    return c * cos((2 * x + 1) * u * M_PI / (2.0 * n));
}

static void idct_tables_build(idct_tables *t)
{
    static const int sizes[IDCT_SIZES] = {3, 5, 6, 7, 10, 12, 14};
    memset(t, 0, sizeof *t);
    for (int si = 0; si < IDCT_SIZES; si++) {
        int n = sizes[si], k = n < 8 ? n : 8;
        for (int f = 0; f < k; f++)
            for (int x = 0; x < n; x++) {
                float b = (float)idct_basis(n, f, x);
                for (int l = 0; l < 8; l++) t->col[si][x][f][l] = b;
                t->row[si][f][x / 8][x % 8] = b;
            }
    }
}

#ifdef TF_HAVE_AVX2
/* The kernel runs only with AVX2 + FMA (cpu_has_avx2_fma): the same source
 * built for baseline x86-64 cost 3x libjpeg's C, so without them libjpeg
 * keeps its own IDCTs. */

/* 1 + the highest nonzero row or column index among the block's first
 * k x k coefficients (0 for an all-zero block). Columns from the OR of the
 * rows; rows from three rounds of saturating packs, which keep a nonzero
 * int16 nonzero and leave row v in bytes 2v and 2v + 1. */
TF_AVX2_INLINE int idct_extent(const JCOEF *coef, int k)
{
    __m128i r[8], any = _mm_setzero_si128(), zero = _mm_setzero_si128();
    for (int v = 0; v < 8; v++) {
        r[v] = v < k ? _mm_loadu_si128((const __m128i *)(const void *)(coef + 8 * v)) : zero;
        any = _mm_or_si128(any, r[v]);
    }
    unsigned cols = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi16(any, zero)) & 0xffffu;
    cols &= (1u << (2 * k)) - 1;
    __m128i lo = _mm_packs_epi16(_mm_packs_epi16(r[0], r[1]), _mm_packs_epi16(r[2], r[3]));
    __m128i hi = _mm_packs_epi16(_mm_packs_epi16(r[4], r[5]), _mm_packs_epi16(r[6], r[7]));
    unsigned rows = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_packs_epi16(lo, hi), zero));
    rows &= 0xffffu;
    unsigned both = rows | cols;
    return both ? (31 - __builtin_clz(both)) / 2 + 1 : 0;
}

/* Rounds (to nearest even), clamps to 0..255 and stores one output row of
 * 8 or 16 samples. min first: a huge value (corrupt data) would convert to
 * INT_MIN; the saturating packs clamp the rest. */
TF_AVX2_INLINE void idct_store_row(const v8f *acc, int halves, unsigned char *dst)
{
    const __m256 top = _mm256_set1_ps(255.0f);
    __m256i a = _mm256_cvtps_epi32(_mm256_min_ps((__m256)acc[0], top));
    if (halves == 1) {
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
        _mm_storel_epi64((__m128i *)(void *)dst, _mm_packus_epi16(w, w));
        return;
    }
    __m256i b = _mm256_cvtps_epi32(_mm256_min_ps((__m256)acc[1], top));
    __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xd8);
    _mm_storeu_si128((__m128i *)(void *)dst,
                     _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)));
}

/* One N x N block using the first f <= min(N, 8) frequencies per axis; si,
 * n and f are constants after inlining, so every loop unrolls. */
TF_AVX2_INLINE void idct_block(const idct_tables *t, int si, int n, int f, const v8f *q,
                               const JCOEF *coef, JSAMPARRAY out, JDIMENSION col)
{
    const int halves = (n + 7) / 8;
    v8f d[8];
    for (int v = 0; v < f; v++) {
        v8s s;
        memcpy(&s, coef + 8 * v, sizeof s);
        d[v] = __builtin_convertvector(s, v8f) * q[v];
    }
    float rows[IDCT_MAX_N][8];
    for (int y = 0; y < n; y++) {
        v8f acc = d[0] * t->col[si][y][0];
        for (int v = 1; v < f; v++) acc += d[v] * t->col[si][y][v];
        memcpy(rows[y], &acc, sizeof acc);
    }
    for (int y = 0; y < n; y++) {
        v8f acc[2];
        for (int h = 0; h < halves; h++) {
            acc[h] = (v8f){128, 128, 128, 128, 128, 128, 128, 128};
            for (int u = 0; u < f; u++) acc[h] += rows[y][u] * t->row[si][u][h];
        }
        unsigned char px[16];
        idct_store_row(acc, halves, px);
        memcpy(out[y] + col, px, (size_t)n);
    }
}

/* Blocks are sparse (in the bench set 4:2:0 chroma reaches 2-4 rows and
 * columns, luma 4-6), so a block whose coefficients stop within the first
 * 2 or 4 frequencies per axis takes an instance that reads only those. */
TF_AVX2_INLINE void idct_sparse(const idct_tables *t, int si, int n, const v8f *q,
                                const JCOEF *coef, JSAMPARRAY out, JDIMENSION col)
{
    const int k = n < 8 ? n : 8;
    int e = idct_extent(coef, k);
    if (k > 2 && e <= 2) idct_block(t, si, n, 2, q, coef, out, col);
    else if (k > 4 && e <= 4) idct_block(t, si, n, 4, q, coef, out, col);
    else idct_block(t, si, n, k, q, coef, out, col);
}

TF_AVX2_FMA
static void idct_avx2(j_decompress_ptr c, jpeg_component_info *comp, JCOEFPTR coef,
                      JSAMPARRAY out, JDIMENSION col)
{
    const idct_tables *t = ((struct tf_error_mgr *)(void *)c->err)->ws->idct;
    const v8f *q = t->q[comp->component_index];
    switch (comp->DCT_scaled_size) {   /* only the sizes idct_install chose */
    case 3: idct_sparse(t, 0, 3, q, coef, out, col); break;
    case 5: idct_sparse(t, 1, 5, q, coef, out, col); break;
    case 6: idct_sparse(t, 2, 6, q, coef, out, col); break;
    case 7: idct_sparse(t, 3, 7, q, coef, out, col); break;
    case 10: idct_sparse(t, 4, 10, q, coef, out, col); break;
    case 12: idct_sparse(t, 5, 12, q, coef, out, col); break;
    default: idct_sparse(t, 6, 14, q, coef, out, col); break;
    }
}
#endif

/* After jpeg_start_decompress: every component whose IDCT size is one of
 * ours and whose quantization table is known gets the vector kernel. */
static void idct_install(lf_tf_ws *ws)
{
    j_decompress_ptr c = &ws->cinfo;
    if (!ws->idct_fn) return;
    for (int ci = 0; ci < c->num_components && ci < IDCT_COMPS; ci++) {
        const jpeg_component_info *comp = &c->comp_info[ci];
        if (idct_size_index(comp->DCT_scaled_size) < 0 || !comp->quant_table) continue;
        for (int i = 0; i < DCTSIZE2; i++)
            ws->idct->q[ci][i / 8][i % 8] = comp->quant_table->quantval[i];
        c->idct->inverse_DCT[ci] = ws->idct_fn;
    }
}

/* ---- coefficient memory ------------------------------------------------- */
/*
 * A progressive (multi-scan) file is absorbed whole before its first
 * scanline comes out: libjpeg keeps a coefficient array per component, 2
 * bytes per coefficient (3 bytes per pixel at 4:2:0, 6 at 4:4:4), whatever
 * the DCT scale. Its own memory manager allocates those arrays per image and
 * zeroes them; freed at the end of the image, glibc hands such large blocks
 * back to the kernel, so every progressive image paid fresh page faults and
 * zeroing of pages the kernel had just cleared: ~70% of the time of a crop
 * of a 1920x1080 progressive photo in dev-images/ (perf: memset, page
 * faults, brk trimming). Here they come from one arena per workspace, kept
 * at its high-water size, so the pages stay mapped and only the memset
 * remains. The workspace's decode memory is then one known figure
 * (lf_tf_ws_decode_memory), bounded by max_memory.
 *
 * The arrays go in through the memory manager's methods, which are public
 * (struct jpeg_memory_mgr in jpeglib.h): request_virt_barray,
 * realize_virt_arrays and access_virt_barray are replaced, free_pool is
 * wrapped; libjpeg's own methods keep everything else. The decompressor
 * requests these arrays only in JPOOL_IMAGE, at most one per component.
 */
static lf_tf_ws *ws_of(j_common_ptr c) { return ((struct tf_error_mgr *)(void *)c->err)->ws; }

static jvirt_barray_ptr coef_request(j_common_ptr c, int pool, boolean pre_zero,
                                     JDIMENSION blocks_per_row, JDIMENSION numrows,
                                     JDIMENSION maxaccess)
{
    (void)maxaccess;             /* the whole array is always in memory */
    lf_tf_ws *ws = ws_of(c);
    coef_arena *a = &ws->coef;
    if (pool != JPOOL_IMAGE || a->n == COEF_ARRAYS) {
        fail(ws, LF_TF_E_UNSUPPORTED, "coefficient array request outside the image pool");
        bail(ws);
    }
    coef_array *arr = &a->arr[a->n++];
    *arr = (coef_array){NULL, blocks_per_row, numrows, pre_zero};
    return (jvirt_barray_ptr)(void *)arr;
}

/* Bytes of one array in the arena: the blocks of `kept` block rows (a
 * multiple of 128), a nonzero mask per block of all `numrows` rows
 * (phuff.c's, tf_phuff_set_masks), then a row pointer per row, rounded up
 * to 64. */
static uint64_t coef_bytes(JDIMENSION blocks_per_row, JDIMENSION numrows, JDIMENSION kept)
{
    uint64_t b = (uint64_t)kept * blocks_per_row * sizeof(JBLOCK) +
                 (uint64_t)numrows * blocks_per_row * sizeof(uint64_t) +
                 (uint64_t)numrows * sizeof(JBLOCKROW);
    return (b + 63) & ~(uint64_t)63;
}

/* Block rows of component ci's array (numrows in all) that keep their
 * blocks: all, or in strips the window's, from *first, plus the scratch
 * row that takes the others' (the last slot). */
static JDIMENSION coef_kept(const lf_tf_ws *ws, int ci, JDIMENSION numrows, JDIMENSION *first)
{
    const coef_arena *a = &ws->coef;
    *first = 0;
    if (!a->win1 || ci >= ws->cinfo.num_components) return numrows;
    uint64_t v = (unsigned)ws->cinfo.comp_info[ci].v_samp_factor;
    uint64_t r0 = a->win0 * v, r1 = a->win1 * v;
    if (r1 > numrows) r1 = numrows;
    if (r0 > r1) r0 = r1;
    *first = (JDIMENSION)r0;
    return (JDIMENSION)(r1 - r0) + 1;
}

/* Block rows of component ci's array that scans will write: not those in
 * the skipped scan tails (see "scan tails"; the decompressor requests one
 * array per component, in component order). */
static JDIMENSION coef_rows_used(const lf_tf_ws *ws, int ci, JDIMENSION numrows)
{
    const struct jpeg_decompress_struct *c = &ws->cinfo;
    if (ws->tail.from == UINT_MAX || ci >= c->num_components) return numrows;
    uint64_t used = (uint64_t)ws->tail.from * (unsigned)c->comp_info[ci].v_samp_factor;
    return used < numrows ? (JDIMENSION)used : numrows;
}

/* The arena is mapped by itself, not malloc'd: freed, its pages go back
 * to the kernel at once. From glibc's heap they did not: after the first
 * free of a block over its mmap threshold (a whole 7000x7000 image's 149
 * MiB), glibc raises the threshold to 32 MiB, serves smaller blocks from
 * each thread's heap and keeps them there after free, so 16 workers
 * trimming 13 MiB strip buffers held 117 MiB under a 42 MiB limit
 * (e2e/server_decode_memory). */
static void coef_unmap(coef_arena *a)
{
    if (a->mem) munmap(a->mem, a->cap);
    a->mem = NULL;
    a->cap = 0;
}

static void coef_realize(j_common_ptr c)
{
    lf_tf_ws *ws = ws_of(c);
    coef_arena *a = &ws->coef;
    uint64_t total = 0;
    JDIMENSION first;
    for (int i = 0; i < a->n; i++)
        total += coef_bytes(a->arr[i].blocks_per_row, a->arr[i].numrows,
                            coef_kept(ws, i, a->arr[i].numrows, &first));
    if (total > ws->lim.max_memory) {
        fail(ws, LF_TF_E_LIMIT, "coefficient buffers of %llu bytes > memory limit %llu",
             (unsigned long long)total, (unsigned long long)ws->lim.max_memory);
        bail(ws);
    }
    if (total > a->cap) {
        coef_unmap(a);
        void *m = mmap(NULL, (size_t)total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        a->mem = m == MAP_FAILED ? NULL : m;
        a->cap = a->mem ? (size_t)total : 0;
        if (!a->mem) {
            fail(ws, LF_TF_E_NOMEM, "no memory for %llu bytes of coefficients",
                 (unsigned long long)total);
            bail(ws);
        }
    }
    unsigned char *p = a->mem;
    for (int i = 0; i < COEF_ARRAYS; i++) tf_phuff_set_masks(ws->phuff, i, NULL, 0);
    for (int i = 0; i < a->n; i++) {
        coef_array *arr = &a->arr[i];
        JDIMENSION kept = coef_kept(ws, i, arr->numrows, &first);
        size_t row_bytes = (size_t)arr->blocks_per_row * sizeof(JBLOCK);
        size_t blocks = row_bytes * kept;
        size_t mask_row_bytes = (size_t)arr->blocks_per_row * sizeof(uint64_t);
        uint64_t *masks = (uint64_t *)(void *)(p + blocks);
        if (arr->pre_zero) {     /* the masks hold only for blocks that start at zero */
            JDIMENSION used = coef_rows_used(ws, i, arr->numrows);
            JDIMENSION zeroed = used > first ? used - first : 0;
            memset(p, 0, row_bytes * (zeroed < kept ? zeroed : kept));
            /* every pass of a strip decode starts from zero masks: each
             * runs the scans from the start */
            memset(masks, 0, mask_row_bytes * used);
            tf_phuff_set_masks(ws->phuff, i, masks, arr->blocks_per_row);
        }
        arr->rows = (JBLOCKARRAY)(void *)(p + blocks + mask_row_bytes * arr->numrows);
        JDIMENSION scratch = a->win1 ? kept - 1 : kept;
        for (JDIMENSION r = 0; r < arr->numrows; r++) {
            JDIMENSION slot = r >= first && r - first < scratch ? r - first : kept - 1;
            arr->rows[r] = (JBLOCKROW)(void *)(p + slot * row_bytes);
        }
        p += coef_bytes(arr->blocks_per_row, arr->numrows, kept);
    }
    a->orig.realize_virt_arrays(c);
}

static JBLOCKARRAY coef_access(j_common_ptr c, jvirt_barray_ptr ptr, JDIMENSION start,
                               JDIMENSION num_rows, boolean writable)
{
    (void)writable;
    coef_array *arr = (coef_array *)(void *)ptr;
    if (!arr->rows || start > arr->numrows || num_rows > arr->numrows - start) {
        lf_tf_ws *ws = ws_of(c);
        fail(ws, LF_TF_E_CORRUPT, "coefficient rows %u+%u outside 0..%u", start, num_rows,
             arr->numrows);
        bail(ws);
    }
    return arr->rows + start;
}

static void coef_free_pool(j_common_ptr c, int pool)
{
    coef_arena *a = &ws_of(c)->coef;
    if (pool == JPOOL_IMAGE) a->n = 0;
    a->orig.free_pool(c, pool);
}

/* After jpeg_create_decompress. */
static void coef_install(lf_tf_ws *ws)
{
    struct jpeg_memory_mgr *m = ws->cinfo.mem;
    ws->coef.orig = *m;
    m->request_virt_barray = coef_request;
    m->realize_virt_arrays = coef_realize;
    m->access_virt_barray = coef_access;
    m->free_pool = coef_free_pool;
}

size_t lf_tf_ws_decode_memory(const lf_tf_ws *ws) { return ws->coef.cap; }

void lf_tf_ws_set_decode_budget(lf_tf_ws *ws, uint64_t bytes)
{
    ws->coef.budget = bytes && bytes < ws->lim.max_memory ? bytes : ws->lim.max_memory;
}

void lf_tf_ws_trim(lf_tf_ws *ws)
{
    coef_unmap(&ws->coef);
    /* the region's pages too: a large image's crop at a small DCT scale
     * leaves megabytes of them (2.3 MiB for 7000x7000 at 1/8) */
    madvise(ws->region, ws->region_cap, MADV_DONTNEED);
}

/* ---- scan tails ------------------------------------------------------------ */
/*
 * A progressive file is absorbed whole before its first scanline comes out,
 * and each of its scans (about 10) runs over the whole image. Huffman data
 * has no restart markers in common files, so every block above the crop's
 * bottom must be entropy-decoded in every scan; the blocks below it need
 * not. Once a scan reaches the first iMCU row that no output row reads,
 * the rest of its data is passed over: the source jumps to the next marker
 * (in entropy-coded data a 0xFF byte is always followed by 0x00 or a
 * restart marker, so the first other one ends the scan), and the remaining
 * blocks are left as they are (not even zeroed: coef_realize). Their
 * coefficients are never used: decoding stops after the crop's last row. Damage there goes unnoticed for this
 * crop, as below a baseline crop.
 *
 * The hook is libjpeg's entropy decoder's public method pointer
 * (struct jpeg_entropy_decoder in jpegint.h): each scan's start_pass sets
 * decode_mcu, and the progress monitor, called before every iMCU row of
 * the absorption (jpeg_start_decompress), replaces it at the scan's first
 * row in the tail. Only public fields are read (input_iMCU_row,
 * unread_marker, src); a scan that ends in the tail ends at its total
 * iMCU rows, and the next scan's start_pass restarts from row 0.
 */

/* Moves the source to the next marker that is not a restart: the end of the
 * current scan's entropy-coded data, or the end of the input. */
static void seek_marker(struct jpeg_source_mgr *s)
{
    const JOCTET *p = s->next_input_byte, *end = p + s->bytes_in_buffer;
    while ((p = memchr(p, 0xFF, (size_t)(end - p))) != NULL && end - p >= 2) {
        JOCTET m = p[1];
        if (m != 0x00 && m != 0xFF && (m < JPEG_RST0 || m > JPEG_RST0 + 7)) break;
        p++;
    }
    if (!p || end - p < 2) p = end;
    s->bytes_in_buffer -= (size_t)(p - s->next_input_byte);
    s->next_input_byte = p;
}

/* The decode_mcu of a scan's tail: no bit read, no block touched. */
static boolean skip_mcu(j_decompress_ptr c, JBLOCKROW *blocks)
{
    (void)c; (void)blocks;
    return TRUE;
}

/* From the progress monitor, before the absorption's next step: where that
 * step is a scan's first iMCU row in the tail, the source moves to the
 * scan's end and the scan's remaining blocks go to skip_mcu. Per row, not
 * per block: the blocks above the tail run libjpeg's decoder unwrapped. */
static void tails_hook(lf_tf_ws *ws)
{
    j_decompress_ptr c = &ws->cinfo;
    if (ws->tail.from == UINT_MAX || c->input_iMCU_row < ws->tail.from || !c->inputctl ||
        !c->inputctl->has_multiple_scans || !c->entropy || c->entropy->decode_mcu == skip_mcu)
        return;
    /* The bit reader stops at a marker it meets and keeps it in
     * unread_marker: then the source is already past the scan. phuff.c's
     * reader hands its position and marker back first. */
    tf_phuff_sync(ws->phuff, c);
    /* A restart marker met is inside the scan's data: the scan ends at
     * the next other marker (before this, libjpeg read on from the
     * restart, took the data up to it for garbage and warned: seen with
     * restart intervals in strips, whose tails fall on every row,
     * unit/tf_jpeg_strips). */
    if (c->unread_marker >= JPEG_RST0 && c->unread_marker <= JPEG_RST0 + 7) c->unread_marker = 0;
    if (!c->unread_marker) seek_marker(c->src);
    c->entropy->decode_mcu = skip_mcu;
}

/* Before jpeg_start_decompress, after jpeg_calc_output_dimensions: output
 * rows from y_end on will not be read. A margin of 3 iMCU rows: libjpeg's
 * upsampler reads the iMCU row after the last one it outputs (context
 * rows), and block smoothing (files whose scans leave coefficients
 * unrefined) reads two block rows beyond that. */
static void tails_set(lf_tf_ws *ws, uint32_t y_end)
{
    j_decompress_ptr c = &ws->cinfo;
    uint32_t imcu_rows = (uint32_t)(c->max_v_samp_factor * c->min_DCT_scaled_size);
    uint64_t from = (uint64_t)(y_end - 1) / imcu_rows + 1 + 3;
    ws->tail.from = from < c->total_iMCU_rows ? (JDIMENSION)from : UINT_MAX;
}

/* ---- strips ---------------------------------------------------------------- */
/*
 * Where a progressive file's whole-image coefficient buffers exceed the
 * workspace's decode budget (lf_tf_ws_set_decode_budget; lf-server lends
 * what --memory-limit leaves), its output rows are decoded in strips of S
 * iMCU rows, one pass of libjpeg per strip: header, all scans from the
 * start, then the strip's rows (jpeg_skip_scanlines to its first row, as a
 * crop does). In a pass only the block rows around the strip keep their
 * coefficients (the window: STRIP_ABOVE iMCU rows above it: the skip
 * decodes the row above the strip for the upsampler's context, and block
 * smoothing of that row reads two more; and the scan tails' 3 below; with
 * 2 above, unit/tf_jpeg_strips fails on its smoothed files); the blocks
 * above the window are entropy-decoded into one scratch
 * row, as their bits must be read to reach the strip's, and those below it
 * are not decoded at all (scan tails). What makes the scratch row safe:
 * phuff.c parses a refinement scan from the nonzero masks, never from a
 * block's coefficients, so the masks are kept for the whole image (8
 * bytes a block, 1/16 of the coefficients) and start from zero in every
 * pass (coef_realize); a file with a scan phuff.c does not read (not
 * Huffman-coded) is refused in strips (tf_phuff_masks_held). The strip's
 * output rows are those of the whole-image decode, bit for bit
 * (unit/tf_jpeg_strips): the same coefficients reach every block the IDCT,
 * smoothing and upsampling of those rows read. The cost: every pass
 * entropy-decodes the scans down to its window's end, so N passes cost
 * about (N + 1) / 2 whole entropy decodes.
 */
#define STRIP_ABOVE 3

/* Each array's geometry as jdcoefct.c requests it: its blocks rounded up
 * to whole MCUs. */
static void coef_geometry(const jpeg_component_info *comp, JDIMENSION *bpr, JDIMENSION *rows)
{
    JDIMENSION h = (JDIMENSION)comp->h_samp_factor, v = (JDIMENSION)comp->v_samp_factor;
    *bpr = (comp->width_in_blocks + h - 1) / h * h;
    *rows = (comp->height_in_blocks + v - 1) / v * v;
}

/* Strips need phuff.c for every scan: a progressive Huffman-coded file.
 * A sequential file with several scans (components not interleaved) or an
 * arithmetic-coded one is read by libjpeg's own decoder, which finds a
 * refinement's nonzero coefficients in the blocks themselves. */
static int strips_possible(j_decompress_ptr c)
{
    return c->progressive_mode && !c->arith_code;
}

/* Bytes of coefficient memory a multi-scan file takes, after its header:
 * whole (s == 0, or where it cannot go in strips), or in strips of s iMCU
 * rows. */
static uint64_t strip_bytes(j_decompress_ptr c, JDIMENSION s)
{
    uint64_t total = 0;
    if (!strips_possible(c)) s = 0;
    for (int ci = 0; ci < c->num_components; ci++) {
        JDIMENSION bpr, rows, kept;
        coef_geometry(&c->comp_info[ci], &bpr, &rows);
        uint64_t win = ((uint64_t)s + STRIP_ABOVE + 3) * (unsigned)c->comp_info[ci].v_samp_factor;
        kept = !s ? rows : win < rows ? (JDIMENSION)win + 1 : rows + 1;
        total += coef_bytes(bpr, rows, kept);
    }
    return total;
}

/* iMCU rows per strip within the budget: 0 where the whole image fits
 * (or a single-scan file, which needs none), else the most that fit. */
static JDIMENSION strip_rows(lf_tf_ws *ws)
{
    j_decompress_ptr c = &ws->cinfo;
    uint64_t budget = ws->coef.budget, whole = strip_bytes(c, 0);
    if (!c->inputctl->has_multiple_scans || whole <= budget) return 0;
    if (!strips_possible(c)) {
        fail(ws, LF_TF_E_LIMIT, "coefficient buffers of %llu bytes > decode memory %llu (a "
             "multi-scan file that is not progressive Huffman cannot go in strips)",
             (unsigned long long)whole, (unsigned long long)budget);
        bail(ws);
    }
    if (strip_bytes(c, 1) > budget) {
        fail(ws, LF_TF_E_LIMIT, "coefficient buffers of %llu bytes, and %llu in strips of one "
             "iMCU row, > decode memory %llu", (unsigned long long)whole,
             (unsigned long long)strip_bytes(c, 1), (unsigned long long)budget);
        bail(ws);
    }
    JDIMENSION lo = 1, hi = c->total_iMCU_rows;     /* strip_bytes(lo) fits */
    while (lo < hi) {
        JDIMENSION mid = lo + (hi - lo + 1) / 2;
        if (strip_bytes(c, mid) <= budget) lo = mid; else hi = mid - 1;
    }
    return lo;
}

/* ---- workspace ----------------------------------------------------------- */

/* The y axis (vertical) also gets 16-bit weights, the x axis broadcast ones. */
static int coeffs_alloc(axis_coeffs *a, uint32_t max_out, int vertical, int paired)
{
    /* Taps per output are at most 2*support+2 with support = in/out, so all
     * outputs together need at most 2*in + 2*out weights. */
    a->wcap = 2 * (size_t)MAX_JPEG_SIDE + 2 * (size_t)max_out + 64;
    a->start = malloc(max_out * sizeof *a->start);
    a->count = malloc(max_out * sizeof *a->count);
    a->w = malloc(a->wcap * sizeof *a->w);
    a->wq = vertical ? malloc(a->wcap * sizeof *a->wq) : NULL;
    a->w4 = vertical ? NULL : aligned_alloc(sizeof(v4f), a->wcap * sizeof *a->w4);
    a->w8 = paired ? aligned_alloc(sizeof(v8f), a->wcap / 2 * sizeof *a->w8) : NULL;
    return a->start && a->count && a->w && (vertical ? !!a->wq : !!a->w4) &&
           (!paired || a->w8) ? 0 : LF_TF_E_NOMEM;
}

static void coeffs_free(axis_coeffs *a)
{
    free(a->w8);
    free(a->w4);
    free(a->wq);
    free(a->w);
    free(a->count);
    free(a->start);
}

/* Frees what lf_tf_ws_create allocated, the workspace itself last. */
static void free_buffers(lf_tf_ws *ws)
{
    coeffs_free(&ws->ay);
    coeffs_free(&ws->ax);
    coef_unmap(&ws->coef);
    tf_phuff_free(ws->phuff);
    free(ws->idct);
    free(ws->tmp);
    if (ws->region) munmap(ws->region, ws->region_cap);
    free(ws);
}

static void install_handlers(lf_tf_ws *ws)
{
    ws->cinfo.err = jpeg_std_error(&ws->err.pub);
    ws->err.pub.error_exit = on_error_exit;
    ws->err.pub.emit_message = on_emit_message;
    ws->err.pub.output_message = on_output_message;
    ws->err.ws = ws;
    ws->progress.progress_monitor = on_progress;
}

int lf_tf_ws_create(const lf_tf_limits *lim, lf_tf_ws **out)
{
    lf_tf_limits l;
    if (lim) l = *lim; else lf_tf_limits_default(&l);
    if (!l.max_pixels || !l.max_scans || !l.max_memory || !l.max_out_side ||
        l.max_out_side > MAX_JPEG_SIDE)
        return LF_TF_E_ARG;
    if (!l.max_region_pixels) {
        l.max_region_pixels = l.max_pixels / 32;
        if (l.max_region_pixels < (4u << 20)) l.max_region_pixels = 4u << 20;
    }
    if (l.max_region_pixels > ((uint64_t)1 << 34)) return LF_TF_E_ARG;

    lf_tf_ws *ws = calloc(1, sizeof *ws);
    if (!ws) return LF_TF_E_NOMEM;
    ws->lim = l;
    ws->region_cap = (size_t)l.max_region_pixels * 4;
    void *region = mmap(NULL, ws->region_cap, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ws->region = region == MAP_FAILED ? NULL : region;
    ws->tmp = malloc(((size_t)MAX_JPEG_SIDE * 3 + VEC_SLACK) * sizeof *ws->tmp);
    ws->idct = aligned_alloc(sizeof(v8f), sizeof *ws->idct);
    ws->phuff = tf_phuff_create();
    int avx2 = cpu_has_avx2_fma();
    if (!ws->region || !ws->tmp || !ws->idct || !ws->phuff || coeffs_alloc(&ws->ax, l.max_out_side, 0, avx2) ||
        coeffs_alloc(&ws->ay, l.max_out_side, 1, 0))
        goto fail_alloc;
    idct_tables_build(ws->idct);
    ws->idct_fn = NULL;
    ws->resize_fn = resize_rows_generic;
#ifdef TF_HAVE_AVX2
    if (avx2) {
        ws->idct_fn = idct_avx2;
        ws->resize_fn = resize_rows_avx2;
    }
#endif

    /* jpeg_create_decompress reports failure through error_exit. */
    install_handlers(ws);
    if (setjmp(ws->err.jump)) goto fail_alloc;
    jpeg_create_decompress(&ws->cinfo);
    ws->cinfo.mem->max_memory_to_use = (long)l.max_memory;
    ws->coef.budget = l.max_memory;
    coef_install(ws);
    ws->cinfo.progress = &ws->progress;
    ws->cinfo.client_data = ws->phuff;
    *out = ws;
    return 0;

fail_alloc:
    free_buffers(ws);
    return LF_TF_E_NOMEM;
}

void lf_tf_ws_free(lf_tf_ws *ws)
{
    if (!ws) return;
    jpeg_destroy_decompress(&ws->cinfo);
    free_buffers(ws);
}

/* Runs fn with libjpeg's errors routed back here, and leaves the
 * decompressor ready for the next image whatever happened. */
typedef long (*job_fn)(lf_tf_ws *ws, void *ctx);

static long guarded(lf_tf_ws *ws, job_fn fn, void *ctx)
{
    ws->reason[0] = '\0';
    ws->status = LF_TF_OK;
    if (setjmp(ws->err.jump)) {
        jpeg_abort_decompress(&ws->cinfo);
        return ws->status;
    }
    long rc = fn(ws, ctx);
    jpeg_abort_decompress(&ws->cinfo);
    if (rc >= 0) ws->reason[0] = '\0';
    return rc;
}

/* ---- header -------------------------------------------------------------- */

/* Reads the header and applies the checks that come before any big work. */
static int read_header(lf_tf_ws *ws, const void *src, size_t src_size, lf_tf_jpeg_info *info)
{
    j_decompress_ptr c = &ws->cinfo;
    if (!src || src_size == 0) return fail(ws, LF_TF_E_CORRUPT, "empty input");
    if (src_size > (unsigned long)-1) return fail(ws, LF_TF_E_LIMIT, "input too large");
    jpeg_mem_src(c, (const unsigned char *)src, (unsigned long)src_size);
    ws->tail = (scan_tails){UINT_MAX};
    ws->coef.win0 = ws->coef.win1 = 0;
    if (jpeg_read_header(c, TRUE) != JPEG_HEADER_OK)
        return fail(ws, LF_TF_E_CORRUPT, "no image in the datastream");
    uint64_t pixels = (uint64_t)c->image_width * c->image_height;
    if (pixels > ws->lim.max_pixels)
        return fail(ws, LF_TF_E_LIMIT, "%ux%u = %llu pixels > limit %llu", c->image_width,
                    c->image_height, (unsigned long long)pixels,
                    (unsigned long long)ws->lim.max_pixels);
    switch (c->jpeg_color_space) {
    case JCS_GRAYSCALE: case JCS_YCbCr: case JCS_RGB:
        c->out_color_space = JCS_EXT_RGB;
        break;
    case JCS_CMYK: case JCS_YCCK:
        c->out_color_space = JCS_CMYK;
        break;
    default:
        return fail(ws, LF_TF_E_UNSUPPORTED, "%d components, color space %d",
                    c->num_components, (int)c->jpeg_color_space);
    }
    if (info) {
        info->width = c->image_width;
        info->height = c->image_height;
        info->components = (uint32_t)c->num_components;
        info->progressive = c->progressive_mode ? 1 : 0;
    }
    return 0;
}

static long info_job(lf_tf_ws *ws, void *ctx)
{
    struct { const void *src; size_t size; lf_tf_jpeg_info *info; } *j = ctx;
    return read_header(ws, j->src, j->size, j->info);
}

int lf_tf_jpeg_info_get(lf_tf_ws *ws, const void *src, size_t src_size,
                        lf_tf_jpeg_info *info)
{
    struct { const void *src; size_t size; lf_tf_jpeg_info *info; } j = {src, src_size, info};
    return (int)guarded(ws, info_job, &j);
}

/* What coef_realize will take for this header: libjpeg's coefficient
 * controller keeps whole-image arrays only for a multi-scan file, one per
 * component (jdcoefct.c); in strips of j->rows iMCU rows, the strip's. */
struct need_ctx { const void *src; size_t size; uint32_t rows; };

static long need_job(lf_tf_ws *ws, void *ctx)
{
    struct need_ctx *j = ctx;
    int rc = read_header(ws, j->src, j->size, NULL);
    if (rc) return rc;
    j_decompress_ptr c = &ws->cinfo;
    if (!c->inputctl->has_multiple_scans) return 0;
    uint64_t total = strip_bytes(c, j->rows);
    return total > LONG_MAX ? LONG_MAX : (long)total;
}

long lf_tf_jpeg_decode_need(lf_tf_ws *ws, const void *src, size_t src_size)
{
    return lf_tf_jpeg_strip_need(ws, src, src_size, 0);
}

long lf_tf_jpeg_strip_need(lf_tf_ws *ws, const void *src, size_t src_size, uint32_t rows)
{
    struct need_ctx j = {src, src_size, rows};
    return guarded(ws, need_job, &j);
}

/* ---- decoding rows, whole or in strips ------------------------------------- */

/* Output rows [y0, y1) of columns [x0, x1) after the header (scale set):
 * emit reads rows ya..yb-1 each pass, with the columns libjpeg decodes
 * (xoff, cw) set. */
typedef struct rows_job rows_job;
struct rows_job {
    const void *src; size_t size;
    uint32_t x0, x1, y0, y1;
    JDIMENSION xoff, cw;
    void (*emit)(lf_tf_ws *ws, rows_job *j, uint32_t ya, uint32_t yb);
    void *arg;
};

/* Before a pass after the first: the decompressor as the caller left it
 * after the header (header read again, the same scale). */
static void pass_restart(lf_tf_ws *ws, const rows_job *j)
{
    j_decompress_ptr c = &ws->cinfo;
    unsigned num = c->scale_num, denom = c->scale_denom;
    jpeg_abort_decompress(c);
    if (read_header(ws, j->src, j->size, NULL)) bail(ws);
    c->scale_num = num;
    c->scale_denom = denom;
    jpeg_calc_output_dimensions(c);
}

/* One pass: the scans absorbed with the blocks of iMCU rows from win0 on
 * kept (strips: those up to the scan tails; whole: all), then rows
 * ya..yb-1 out. */
static void pass_run(lf_tf_ws *ws, rows_job *j, int strips, JDIMENSION win0, uint32_t ya,
                     uint32_t yb)
{
    j_decompress_ptr c = &ws->cinfo;
    tails_set(ws, strips ? yb : j->y1);
    if (strips) {
        ws->coef.win0 = win0;
        ws->coef.win1 = ws->tail.from == UINT_MAX ? c->total_iMCU_rows : ws->tail.from;
    }
    jpeg_start_decompress(c);
    if (strips && !tf_phuff_masks_held(ws->phuff, c)) {
        fail(ws, LF_TF_E_UNSUPPORTED, "a progressive file with scans phuff.c does not read "
             "needs its whole coefficient buffers (%llu bytes > decode memory %llu)",
             (unsigned long long)strip_bytes(c, 0), (unsigned long long)ws->coef.budget);
        bail(ws);
    }
    /* A column of margin each side where the image has one: libjpeg's
     * chroma upsampling takes the region's edges for the image's and
     * copies the edge chroma instead of blending in the neighbour's, which
     * would colour columns x0 and x1 - 1 wrongly (4:2:0 and 4:2:2). */
    j->xoff = j->x0 > 0 ? j->x0 - 1 : 0;
    j->cw = (j->x1 < c->output_width ? j->x1 + 1 : j->x1) - j->xoff;
    if (j->cw < c->output_width) jpeg_crop_scanline(c, &j->xoff, &j->cw);
    idct_install(ws);
    if (ya > 0 && jpeg_skip_scanlines(c, ya) != ya) {
        fail(ws, LF_TF_E_CORRUPT, "could not skip to row %u", ya);
        bail(ws);
    }
    j->emit(ws, j, ya, yb);
}

/* Decodes j's rows: in one pass where the whole-image coefficients fit the
 * decode budget, else in strips (see "strips"). */
static void decode_rows(lf_tf_ws *ws, rows_job *j)
{
    j_decompress_ptr c = &ws->cinfo;
    JDIMENSION s = strip_rows(ws);
    if (!s) {
        pass_run(ws, j, 0, 0, j->y0, j->y1);
        return;
    }
    uint64_t per = (uint64_t)c->max_v_samp_factor * (unsigned)c->min_DCT_scaled_size;
    uint64_t first = j->y0 / per, end = (j->y1 - 1) / per + 1;
    for (uint64_t a = first; a < end; a += s) {
        uint64_t ya = a * per > j->y0 ? a * per : j->y0;
        uint64_t yb = (a + s) * per < j->y1 ? (a + s) * per : j->y1;
        if (a != first) pass_restart(ws, j);
        pass_run(ws, j, 1, (JDIMENSION)(a > STRIP_ABOVE ? a - STRIP_ABOVE : 0), (uint32_t)ya,
                 (uint32_t)yb);
    }
}

/* ---- pixels -------------------------------------------------------------- */

/* CMYK as libjpeg hands it out -> RGB, in place (3*i <= 4*i). The bytes
 * are taken as inverted ink (255 = no ink), as Adobe writes them and as PIL
 * reads every CMYK JPEG, Adobe marker or not: PIL is the reference users
 * compare with (torchvision). */
static void cmyk_to_rgb(unsigned char *row, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned k = row[4 * i + 3];
        /* channel = (255-c)(255-k)/255 in ink terms, rounded */
        for (int ch = 0; ch < 3; ch++)
            row[3 * i + (size_t)ch] = (unsigned char)((row[4 * i + (size_t)ch] * k + 127) / 255);
    }
}

/* Reads `nrows` scanlines of `width` pixels into rows of `stride` bytes,
 * converting CMYK to RGB. */
static void read_rows(lf_tf_ws *ws, unsigned char *dst, size_t stride, uint32_t nrows,
                      uint32_t width)
{
    j_decompress_ptr c = &ws->cinfo;
    int cmyk = c->out_color_space == JCS_CMYK;
    uint32_t done = 0;
    while (done < nrows) {
        JSAMPROW rows[ROWS_PER_READ];
        uint32_t want = nrows - done < ROWS_PER_READ ? nrows - done : ROWS_PER_READ;
        for (uint32_t i = 0; i < want; i++) rows[i] = dst + (size_t)(done + i) * stride;
        JDIMENSION got = jpeg_read_scanlines(c, rows, want);
        if (got == 0) {
            fail(ws, LF_TF_E_CORRUPT, "decoder returned no scanline");
            bail(ws);
        }
        if (cmyk)
            for (JDIMENSION i = 0; i < got; i++) cmyk_to_rgb(rows[i], width);
        done += got;
    }
}

/* ---- full decode --------------------------------------------------------- */

struct decode_ctx {
    void *dst; size_t dst_cap;
    const void *src; size_t src_size;
    lf_tf_jpeg_info *info;
};

/* Full-size rows ya..yb-1 into the caller's buffer (j->arg). */
static void decode_emit(lf_tf_ws *ws, rows_job *j, uint32_t ya, uint32_t yb)
{
    j_decompress_ptr c = &ws->cinfo;
    size_t stride = (size_t)c->output_width * 3;
    unsigned char *out = (unsigned char *)j->arg + ya * stride;
    if (c->out_color_space != JCS_CMYK) {
        read_rows(ws, out, stride, yb - ya, c->output_width);
        return;
    }
    /* 4-byte pixels do not fit the 3-byte rows: go through the workspace. */
    for (uint32_t y = ya; y < yb; y++, out += stride) {
        read_rows(ws, ws->region, 0, 1, c->output_width);
        memcpy(out, ws->region, stride);
    }
}

static long decode_job(lf_tf_ws *ws, void *ctx)
{
    struct decode_ctx *j = ctx;
    j_decompress_ptr c = &ws->cinfo;
    int rc = read_header(ws, j->src, j->src_size, j->info);
    if (rc) return rc;
    size_t need = (size_t)c->image_width * c->image_height * 3;
    if (j->dst_cap < need)
        return fail(ws, LF_TF_E_BUFFER, "need %zu bytes, have %zu", need, j->dst_cap);
    if (c->out_color_space == JCS_CMYK && (size_t)c->image_width * 4 > ws->region_cap)
        return fail(ws, LF_TF_E_LIMIT, "row too wide for the workspace");
    jpeg_calc_output_dimensions(c);
    rows_job r = {j->src, j->src_size, 0, c->output_width, 0, c->output_height, 0, 0,
                  decode_emit, j->dst};
    decode_rows(ws, &r);
    jpeg_finish_decompress(c);
    return (long)need;
}

long lf_tf_jpeg_decode(lf_tf_ws *ws, void *dst, size_t dst_cap,
                       const void *src, size_t src_size, lf_tf_jpeg_info *info)
{
    struct decode_ctx j = {dst, dst_cap, src, src_size, info};
    return guarded(ws, decode_job, &j);
}

/* ---- resize coefficients --------------------------------------------------- */

static double filter_triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Weight of input pixel x for an output centered at `center`: PIL's triangle
 * at x's center, or (area) the length of [x, x+1) inside the output's
 * footprint [center - support, center + support). */
static double tap_weight(long x, double center, double support, double fscale, int box)
{
    if (!box) return filter_triangle((x + 0.5 - center) / fscale);
    double lo = fmax((double)x, center - support), hi = fmin(x + 1.0, center + support);
    return hi > lo ? hi - lo : 0.0;
}

/* Weights mapping input span [in0, in0 + in_len) (scaled-image coordinates,
 * fractional) onto `out` pixels: each output pixel's center maps into the
 * input, the filter widens by the shrink factor, taps are clipped to
 * [0, in_size) and normalized (PIL's scheme, with an exact-coverage box for
 * area). Every output gets the same tap count (the largest, windows shifted
 * to stay inside the input, extra taps weighted 0) so the resize loops run a
 * constant trip count that the branch predictor learns. Returns 0 or
 * LF_TF_E_LIMIT when the weight table would overflow. */
static int coeffs_build(axis_coeffs *a, double in0, double in_len, uint32_t in_size,
                        uint32_t out, int box)
{
    double scale = in_len / out;
    double fscale = scale > 1.0 ? scale : 1.0;
    double support = (box ? 0.5 : 1.0) * fscale;
    int32_t taps = 1;
    for (uint32_t i = 0; i < out; i++) {        /* pass 1: each output's taps */
        double center = in0 + (i + 0.5) * scale;
        long lo = (long)floor(center - support), hi = (long)ceil(center + support);
        if (lo < 0) lo = 0;
        if (hi > (long)in_size) hi = (long)in_size;
        if (hi <= lo) {            /* a box edge past the image: nearest pixel */
            lo = center < 0 ? 0 : (long)in_size - 1 < (long)center ? (long)in_size - 1 : (long)center;
            hi = lo + 1;
        }
        a->start[i] = (int32_t)lo;
        a->count[i] = (int32_t)(hi - lo);
        if (a->count[i] > taps) taps = a->count[i];
    }
    if ((size_t)taps * out > a->wcap) return LF_TF_E_LIMIT;
    for (uint32_t i = 0; i < out; i++) {        /* pass 2: weights in a fixed window */
        double center = in0 + (i + 0.5) * scale;
        long lo = a->start[i], hi = lo + a->count[i];
        long first = lo + taps > (long)in_size ? (long)in_size - taps : lo;
        float *w = a->w + (size_t)i * (size_t)taps;
        double sum = 0;
        for (long x = first; x < first + taps; x++) {
            double k = x >= lo && x < hi ? tap_weight(x, center, support, fscale, box) : 0.0;
            w[x - first] = (float)k;
            sum += k;
        }
        if (sum <= 0) {            /* no tap under the filter: take the real ones evenly */
            for (long x = lo; x < hi; x++) w[x - first] = 1.0f;
            sum = (double)(hi - lo);
        }
        for (int32_t k = 0; k < taps; k++) w[k] = (float)(w[k] / sum);
        a->start[i] = (int32_t)first;
        a->count[i] = taps;
    }
    return 0;
}

/* First input index used by any output, and one past the last. */
static void coeffs_span(const axis_coeffs *a, uint32_t out, uint32_t *lo, uint32_t *hi)
{
    *lo = (uint32_t)a->start[0];
    *hi = (uint32_t)(a->start[out - 1] + a->count[out - 1]);
    for (uint32_t i = 0; i < out; i++) {
        if ((uint32_t)a->start[i] < *lo) *lo = (uint32_t)a->start[i];
        if ((uint32_t)(a->start[i] + a->count[i]) > *hi) *hi = (uint32_t)(a->start[i] + a->count[i]);
    }
}

/* ---- crop + resize ------------------------------------------------------- */

static unsigned char to_u8(float v)
{
    return v <= 0.f ? 0 : v >= 255.f ? 255 : (unsigned char)(v + 0.5f);
}

/* Smallest n (scale n/8) that keeps the box at least out_w x out_h. */
static int pick_scale(const lf_tf_box *b, uint32_t out_w, uint32_t out_h)
{
    for (int n = 1; n < 8; n++)
        if (b->w * n / 8 >= out_w && b->h * n / 8 >= out_h) return n;
    return 8;
}

static v4f load_f32x4(const float *p)
{
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Vertical pass for output row y: the taps' region rows, weighted, into
 * ws->tmp (n = width x 3 floats). Row 0 is input row y0. Plain loops over
 * contiguous bytes with the taps inside, so with a constant tap count the
 * compiler unrolls the taps and vectorizes the columns (module.mk: -O3).
 *
 * The common tap counts (2..5) sum in 16-bit fixed point: a byte shifted to
 * the high half times a weight in 1/32768 units, high half of the product
 * (pmulhuw) = x * w / 256, i.e. levels in 1/128 units, 8 columns per SSE2
 * operation instead of 4 floats after a byte -> float conversion per tap.
 * Each tap truncates (< 1/128 level); the sum starts at taps/2 units to
 * center that, so the error stays within +-0.02 level for 5 taps. The sum
 * fits: weights add up to exactly 32768 (coeffs_quantize), so it is at most
 * 255 * 128 + 2. Other tap counts take the float loop. */
TF_INLINE void resize_vertical_fixed_k(const lf_tf_ws *ws, const unsigned char *region,
                                       size_t stride, size_t n, uint32_t y, uint32_t y0,
                                       int32_t taps)
{
    const axis_coeffs *a = &ws->ay;
    const unsigned char *src = region + (size_t)(a->start[y] - (int32_t)y0) * stride;
    const uint16_t *w = a->wq + (size_t)y * (size_t)taps;
    float *restrict t = ws->tmp;
    for (size_t x = 0; x < n; x++) {
        uint16_t acc = (uint16_t)(taps / 2);
        for (int32_t k = 0; k < taps; k++) {
            uint16_t hi = (uint16_t)(src[(size_t)k * stride + x] << 8);
            acc = (uint16_t)(acc + (uint16_t)(((uint32_t)hi * w[k]) >> 16));
        }
        t[x] = (float)acc * (1.0f / 128);
    }
    t[n] = 0;                    /* the 4th lane of the last pixel's load */
}

TF_INLINE void resize_vertical_float(const lf_tf_ws *ws, const unsigned char *region,
                                     size_t stride, size_t n, uint32_t y, uint32_t y0)
{
    const axis_coeffs *a = &ws->ay;
    int32_t taps = a->count[0];
    const unsigned char *src = region + (size_t)(a->start[y] - (int32_t)y0) * stride;
    const float *w = a->w + (size_t)y * (size_t)taps;
    float *restrict t = ws->tmp;
    for (size_t x = 0; x < n; x++) {
        float acc = 0;
        for (int32_t k = 0; k < taps; k++) acc += w[k] * src[(size_t)k * stride + x];
        t[x] = acc;
    }
    t[n] = 0;
}

TF_INLINE void resize_vertical(const lf_tf_ws *ws, const unsigned char *region, size_t stride,
                               size_t n, uint32_t y, uint32_t y0)
{
    switch (ws->ay.count[0]) {   /* the common tap counts, as constants */
    case 2: resize_vertical_fixed_k(ws, region, stride, n, y, y0, 2); break;
    case 3: resize_vertical_fixed_k(ws, region, stride, n, y, y0, 3); break;
    case 4: resize_vertical_fixed_k(ws, region, stride, n, y, y0, 4); break;
    case 5: resize_vertical_fixed_k(ws, region, stride, n, y, y0, 5); break;
    default: resize_vertical_float(ws, region, stride, n, y, y0); break;
    }
}

/* The y weights in 1/32768 units for resize_vertical_fixed_k, each output's
 * adding up to exactly 32768 (the rounding remainder goes to its largest
 * weight), so a sum of bytes cannot pass 255 * 128. */
static void coeffs_quantize(axis_coeffs *a, uint32_t out)
{
    size_t taps = (size_t)a->count[0];
    for (uint32_t i = 0; i < out; i++) {
        const float *w = a->w + i * taps;
        uint16_t *q = a->wq + i * taps;
        int32_t sum = 0;
        size_t big = 0;
        for (size_t k = 0; k < taps; k++) {
            q[k] = (uint16_t)lrintf(w[k] * 32768.0f);
            sum += q[k];
            if (q[k] > q[big]) big = k;
        }
        q[big] = (uint16_t)(q[big] + (32768 - sum));
    }
}

/* Writes output pixel `at` (= y * out_w + x) from its RGB(x) vector in the
 * output dtype and layout: u8 HWC, or normalized f32/f16 CHW. Called with a
 * constant dtype, so each resize_horizontal_k instance has one store. */
TF_INLINE void store_pixel(void *dst, uint32_t dtype, const v4f *norm, size_t plane,
                           size_t at, v4f v)
{
    if (dtype == LF_DTYPE_U8) {
        unsigned char *o = (unsigned char *)dst + at * 3;
        for (int c = 0; c < 3; c++) o[c] = to_u8(v[c]);
        return;
    }
    v = v * norm[0] + norm[1];
    for (int c = 0; c < 3; c++) {
        if (dtype == LF_DTYPE_F32) ((float *)dst)[(size_t)c * plane + at] = v[c];
        else ((uint16_t *)dst)[(size_t)c * plane + at] = tf_f32_to_f16(v[c]);
    }
}

/* Horizontal pass of ws->tmp into output row y, one RGB(x) vector per output
 * pixel. The x coefficients are in output order (mirrored already for a
 * flip) with starts relative to the region (crop_resize_decoded), so the loop
 * walks them linearly; with constant taps and dtype it unrolls completely. */
TF_INLINE void resize_horizontal_k(const lf_tf_ws *ws, void *dst, uint32_t y, uint32_t i0,
                                   const lf_tf_image_params *p, const v4f *norm,
                                   int32_t taps, uint32_t dtype)
{
    const axis_coeffs *a = &ws->ax;
    uint32_t W = p->out_w;
    size_t plane = (size_t)W * p->out_h, row = (size_t)y * W;
    const v4f *w = a->w4 + (size_t)i0 * (size_t)taps;
    for (uint32_t i = i0; i < W; i++, w += taps) {
        const float *t = ws->tmp + (size_t)a->start[i] * 3;
        v4f acc = {0, 0, 0, 0};
        for (int32_t k = 0; k < taps; k++) acc += w[k] * load_f32x4(t + 3 * k);
        store_pixel(dst, dtype, norm, plane, row + i, acc);
    }
}

TF_INLINE void resize_horizontal_t(const lf_tf_ws *ws, void *dst, uint32_t y, uint32_t i0,
                                   const lf_tf_image_params *p, const v4f *norm,
                                   uint32_t dtype)
{
    switch (ws->ax.count[0]) {   /* the common tap counts, as constants */
    case 2: resize_horizontal_k(ws, dst, y, i0, p, norm, 2, dtype); break;
    case 3: resize_horizontal_k(ws, dst, y, i0, p, norm, 3, dtype); break;
    case 4: resize_horizontal_k(ws, dst, y, i0, p, norm, 4, dtype); break;
    case 5: resize_horizontal_k(ws, dst, y, i0, p, norm, 5, dtype); break;
    default: resize_horizontal_k(ws, dst, y, i0, p, norm, ws->ax.count[0], dtype); break;
    }
}

/* Output pixels i0.. of row y. */
TF_INLINE void resize_horizontal(const lf_tf_ws *ws, void *dst, uint32_t y, uint32_t i0,
                                 const lf_tf_image_params *p, const v4f *norm)
{
    switch (p->out_dtype) {      /* the dtype as a constant too */
    case LF_DTYPE_U8: resize_horizontal_t(ws, dst, y, i0, p, norm, LF_DTYPE_U8); break;
    case LF_DTYPE_F32: resize_horizontal_t(ws, dst, y, i0, p, norm, LF_DTYPE_F32); break;
    default: resize_horizontal_t(ws, dst, y, i0, p, norm, LF_DTYPE_F16); break;
    }
}

#ifdef TF_HAVE_AVX2
/* u8 HWC store of 8 pixels, acc[j] = [pixel j | pixel j + 4] as RGB(x):
 * rounded as to_u8 does (+0.5, truncated; the saturating packs clamp),
 * packed to bytes in pixel order, every 4th byte dropped, 24 bytes out. */
TF_AVX2_INLINE void store_x8_u8(unsigned char *o, const __m256 *acc)
{
    const __m256 half = _mm256_set1_ps(0.5f);
    __m256i i[4];
    for (int j = 0; j < 4; j++) i[j] = _mm256_cvttps_epi32(_mm256_add_ps(acc[j], half));
    __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
    const __m256i rgb = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,
                                         0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    b = _mm256_shuffle_epi8(b, rgb);   /* lane 0: pixels 0-3, lane 1: 4-7, 12 bytes each */
    __m128i half_lo = _mm256_castsi256_si128(b), half_hi = _mm256_extracti128_si256(b, 1);
    uint32_t tail[2] = {(uint32_t)_mm_extract_epi32(half_lo, 2), (uint32_t)_mm_extract_epi32(half_hi, 2)};
    _mm_storel_epi64((__m128i *)(void *)o, half_lo);
    memcpy(o + 8, &tail[0], 4);
    _mm_storel_epi64((__m128i *)(void *)(o + 12), half_hi);
    memcpy(o + 20, &tail[1], 4);
}

/* Normalized f32/f16 CHW store of 8 pixels: the four vectors transpose
 * into 8 R, 8 G and 8 B values with 7 shuffles, normalized and stored whole
 * (f16 rounded to nearest even by F16C, as tf_f32_to_f16 does). */
TF_AVX2_INLINE void store_x8_chw(void *dst, size_t plane, size_t at, const __m256 *acc,
                                 const __m256 *scale, const __m256 *shift, uint32_t dtype)
{
    /* acc[j] = [Rj Gj Bj - | Rj+4 Gj+4 Bj+4 -] */
    __m256 rg01 = _mm256_unpacklo_ps(acc[0], acc[1]), rg23 = _mm256_unpacklo_ps(acc[2], acc[3]);
    __m256 b01 = _mm256_unpackhi_ps(acc[0], acc[1]), b23 = _mm256_unpackhi_ps(acc[2], acc[3]);
    __m256 ch[3] = {_mm256_shuffle_ps(rg01, rg23, 0x44), _mm256_shuffle_ps(rg01, rg23, 0xee),
                    _mm256_shuffle_ps(b01, b23, 0x44)};
    for (int c = 0; c < 3; c++) {
        __m256 v = _mm256_fmadd_ps(ch[c], scale[c], shift[c]);
        size_t i = (size_t)c * plane + at;
        if (dtype == LF_DTYPE_F32) _mm256_storeu_ps((float *)dst + i, v);
        else _mm_storeu_si128((__m128i *)(void *)((uint16_t *)dst + i),
                              _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
}

/* Horizontal pass with AVX2, 8 pixels per step: pixels j and j + 4 of a
 * group share a 256-bit vector (weights paired in w8), so a tap is one
 * load, one insert and one FMA for two pixels; then one store per group
 * instead of 8 (u8) or 24 (f32/f16) single ones. Returns the pixels done:
 * whole groups. */
TF_AVX2_INLINE uint32_t resize_horizontal_x8_k(const lf_tf_ws *ws, void *dst, uint32_t y,
                                               const lf_tf_image_params *p, const v4f *norm,
                                               int32_t taps, uint32_t dtype)
{
    const axis_coeffs *a = &ws->ax;
    size_t plane = (size_t)p->out_w * p->out_h, row = (size_t)y * p->out_w;
    const v8f *w = a->w8;
    __m256 scale[3], shift[3];
    for (int c = 0; c < 3; c++) {
        scale[c] = _mm256_set1_ps(norm[0][c]);
        shift[c] = _mm256_set1_ps(norm[1][c]);
    }
    uint32_t g = 0;
    for (; g + 8 <= p->out_w; g += 8) {
        __m256 acc[4];
        for (int j = 0; j < 4; j++) {
            const float *lo = ws->tmp + (size_t)a->start[g + j] * 3;
            const float *hi = ws->tmp + (size_t)a->start[g + j + 4] * 3;
            acc[j] = _mm256_setzero_ps();
            for (int32_t k = 0; k < taps; k++, w++) {
                __m256 px = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo + 3 * k)),
                                                 _mm_loadu_ps(hi + 3 * k), 1);
                acc[j] = _mm256_fmadd_ps((__m256)*w, px, acc[j]);
            }
        }
        if (dtype == LF_DTYPE_U8) store_x8_u8((unsigned char *)dst + (row + g) * 3, acc);
        else store_x8_chw(dst, plane, row + g, acc, scale, shift, dtype);
    }
    return g;
}

TF_AVX2_INLINE uint32_t resize_horizontal_x8_t(const lf_tf_ws *ws, void *dst, uint32_t y,
                                               const lf_tf_image_params *p, const v4f *norm,
                                               uint32_t dtype)
{
    switch (ws->ax.count[0]) {   /* the common tap counts, as constants */
    case 2: return resize_horizontal_x8_k(ws, dst, y, p, norm, 2, dtype);
    case 3: return resize_horizontal_x8_k(ws, dst, y, p, norm, 3, dtype);
    case 4: return resize_horizontal_x8_k(ws, dst, y, p, norm, 4, dtype);
    case 5: return resize_horizontal_x8_k(ws, dst, y, p, norm, 5, dtype);
    default: return resize_horizontal_x8_k(ws, dst, y, p, norm, ws->ax.count[0], dtype);
    }
}

TF_AVX2_FMA
static uint32_t resize_horizontal_x8(const lf_tf_ws *ws, void *dst, uint32_t y,
                                     const lf_tf_image_params *p, const v4f *norm)
{
    switch (p->out_dtype) {      /* the dtype as a constant too */
    case LF_DTYPE_U8: return resize_horizontal_x8_t(ws, dst, y, p, norm, LF_DTYPE_U8);
    case LF_DTYPE_F32: return resize_horizontal_x8_t(ws, dst, y, p, norm, LF_DTYPE_F32);
    default: return resize_horizontal_x8_t(ws, dst, y, p, norm, LF_DTYPE_F16);
    }
}
#endif

/* One image's resize: the region's columns the filters read, its row
 * stride, bytes per row (n), first row y0, output and normalization. */
struct resize_job {
    v4f norm[2];                 /* x * norm[0] + norm[1] */
    const unsigned char *cols;
    size_t stride, n;
    uint32_t y0;
    void *dst;
    const lf_tf_image_params *p;
};

/* x8: rows go through resize_horizontal_x8 first (AVX2 only). */
TF_INLINE void resize_rows(const lf_tf_ws *ws, const resize_job *r, int x8)
{
    for (uint32_t y = 0; y < r->p->out_h; y++) {
        resize_vertical(ws, r->cols, r->stride, r->n, y, r->y0);
        uint32_t done = 0;
#ifdef TF_HAVE_AVX2
        if (x8) done = resize_horizontal_x8(ws, r->dst, y, r->p, r->norm);
#endif
        resize_horizontal(ws, r->dst, y, done, r->p, r->norm);
    }
}

/* resize_rows for the baseline ISA and for AVX2 + FMA (16 columns per
 * vertical step, fused multiply-adds, 8 pixels per horizontal step), picked
 * at run time. */
static void resize_rows_generic(const lf_tf_ws *ws, const resize_job *r) { resize_rows(ws, r, 0); }

#ifdef TF_HAVE_AVX2
TF_AVX2_FMA
static void resize_rows_avx2(const lf_tf_ws *ws, const resize_job *r) { resize_rows(ws, r, 1); }
#endif

/* w8 for resize_horizontal_x8: per group of 8 outputs, for pair j = 0..3
 * and each tap, output j's weight in lanes 0-3 and output j+4's in 4-7. */
static void coeffs_pair(axis_coeffs *a, uint32_t out)
{
    size_t taps = (size_t)a->count[0], n = 0;
    for (uint32_t g = 0; g + 8 <= out; g += 8)
        for (uint32_t j = 0; j < 4; j++)
            for (size_t k = 0; k < taps; k++) {
                float lo = a->w4[(g + j) * taps + k][0], hi = a->w4[(g + j + 4) * taps + k][0];
                a->w8[n++] = (v8f){lo, lo, lo, lo, hi, hi, hi, hi};
            }
}

/* Makes the x coefficients relative to region column x0 and puts them in
 * output order (mirrored for a flip), each weight in all 4 lanes (w4), so
 * the horizontal pass reads them front to back and a tap is one load,
 * multiply and add. */
static void coeffs_place(axis_coeffs *a, uint32_t out, uint32_t x0, int flip)
{
    size_t taps = (size_t)a->count[0];
    for (uint32_t i = 0; i < out; i++) {
        size_t s = flip ? out - 1 - i : i;
        for (size_t k = 0; k < taps; k++) {
            float v = a->w[s * taps + k];
            a->w4[i * taps + k] = (v4f){v, v, v, v};
        }
        a->start[i] -= (int32_t)x0;
    }
    for (uint32_t i = 0, j = out - 1; flip && i < j; i++, j--) {
        int32_t t = a->start[i];
        a->start[i] = a->start[j];
        a->start[j] = t;
    }
    if (a->w8) coeffs_pair(a, out);
}

struct crop_ctx {
    void *dst; size_t dst_cap;
    const void *src; size_t src_size;
    const lf_tf_image_params *p;
    const lf_tf_box *box;        /* NULL: plan it from (epoch, sample_id) */
    uint64_t epoch, sample_id;
    lf_tf_jpeg_info *info;
};

static int check_box(lf_tf_ws *ws, const lf_tf_box *b, uint32_t width, uint32_t height)
{
    const double slack = 1e-6;
    if (!(b->w > 0 && b->h > 0 && b->x >= -slack && b->y >= -slack &&
          b->x + b->w <= width + slack && b->y + b->h <= height + slack))
        return fail(ws, LF_TF_E_ARG, "crop box (%g,%g %gx%g) outside the %ux%u image",
                    b->x, b->y, b->w, b->h, width, height);
    return 0;
}

/* Crop rows ya..yb-1 into the workspace's region, row y0 first. */
static void region_emit(lf_tf_ws *ws, rows_job *j, uint32_t ya, uint32_t yb)
{
    j_decompress_ptr c = &ws->cinfo;
    size_t stride = (size_t)j->cw * (c->out_color_space == JCS_CMYK ? 4 : 3);
    if ((uint64_t)stride * (j->y1 - j->y0) > ws->region_cap) {
        fail(ws, LF_TF_E_LIMIT, "crop region %ux%u at scale %u/8 exceeds the workspace limit",
             j->cw, j->y1 - j->y0, c->scale_num);
        bail(ws);
    }
    read_rows(ws, ws->region + (ya - j->y0) * stride, stride, yb - ya, j->cw);
}

/* Chooses the DCT scale and the region, decodes it and resizes it. */
static long crop_resize_decoded(lf_tf_ws *ws, const struct crop_ctx *j, const lf_tf_box *b)
{
    j_decompress_ptr c = &ws->cinfo;
    const lf_tf_image_params *p = j->p;
    int n = pick_scale(b, p->out_w, p->out_h);
    c->scale_num = (unsigned)n;
    c->scale_denom = 8;
    jpeg_calc_output_dimensions(c);
    double s = n / 8.0;
    int box = p->resize == LF_TF_RESIZE_AREA;
    if (coeffs_build(&ws->ax, b->x * s, b->w * s, c->output_width, p->out_w, box) ||
        coeffs_build(&ws->ay, b->y * s, b->h * s, c->output_height, p->out_h, box))
        return fail(ws, LF_TF_E_LIMIT, "resize filter too wide");
    uint32_t x0, x1, y0, y1;
    coeffs_span(&ws->ax, p->out_w, &x0, &x1);
    coeffs_span(&ws->ay, p->out_h, &y0, &y1);
    coeffs_quantize(&ws->ay, p->out_h);

    rows_job d = {j->src, j->src_size, x0, x1, y0, y1, 0, 0, region_emit, NULL};
    decode_rows(ws, &d);
    size_t stride = (size_t)d.cw * (c->out_color_space == JCS_CMYK ? 4 : 3);
    /* libjpeg widened the region to an iMCU boundary (xoff < x0 where
     * x0 > 0, x1 <= xoff + cw); the filters read only columns x0..x1. */
    resize_job r = {{{0, 0, 0, 0}, {0, 0, 0, 0}}, ws->region + (size_t)(x0 - d.xoff) * 3,
                    stride, (size_t)(x1 - x0) * 3, y0, j->dst, p};
    for (int ch = 0; ch < 3; ch++) {
        r.norm[0][ch] = 1.0f / (255.0f * p->std[ch]);
        r.norm[1][ch] = -p->mean[ch] / p->std[ch];
    }
    coeffs_place(&ws->ax, p->out_w, x0, b->flip);
    ws->resize_fn(ws, &r);
    return (long)lf_tf_image_out_size(p);
}

static long crop_job(lf_tf_ws *ws, void *ctx)
{
    struct crop_ctx *j = ctx;
    const lf_tf_image_params *p = j->p;
    if (!p->out_w || !p->out_h || p->out_w > ws->lim.max_out_side ||
        p->out_h > ws->lim.max_out_side)
        return fail(ws, LF_TF_E_ARG, "output %ux%u outside 1..%u", p->out_w, p->out_h,
                    ws->lim.max_out_side);
    size_t need = lf_tf_image_out_size(p);
    if (!need) return fail(ws, LF_TF_E_ARG, "bad output dtype %u", p->out_dtype);
    if (p->resize != LF_TF_RESIZE_BILINEAR && p->resize != LF_TF_RESIZE_AREA)
        return fail(ws, LF_TF_E_ARG, "bad resize mode %u", p->resize);
    for (int c = 0; c < 3 && p->out_dtype != LF_DTYPE_U8; c++)
        if (!(p->std[c] > 0 && p->std[c] < INFINITY && fabsf(p->mean[c]) < INFINITY))
            return fail(ws, LF_TF_E_ARG, "mean/std of channel %d not usable", c);
    if (j->dst_cap < need) return fail(ws, LF_TF_E_BUFFER, "need %zu bytes, have %zu", need, j->dst_cap);
    lf_tf_jpeg_info info;
    int rc = read_header(ws, j->src, j->src_size, &info);
    if (rc) return rc;
    if (j->info) *j->info = info;
    lf_tf_box planned;
    const lf_tf_box *b = j->box;
    if (!b) {
        if (lf_tf_image_plan(p, info.width, info.height, j->epoch, j->sample_id, &planned))
            return fail(ws, LF_TF_E_ARG, "invalid crop parameters");
        b = &planned;
    }
    rc = check_box(ws, b, info.width, info.height);
    if (rc) return rc;
    return crop_resize_decoded(ws, j, b);
}

long lf_tf_jpeg_crop_resize(lf_tf_ws *ws, void *dst, size_t dst_cap,
                            const void *src, size_t src_size,
                            const lf_tf_image_params *p, const lf_tf_box *box)
{
    struct crop_ctx j = {dst, dst_cap, src, src_size, p, box, 0, 0, NULL};
    if (!box) return fail(ws, LF_TF_E_ARG, "no crop box");
    return guarded(ws, crop_job, &j);
}

long lf_tf_jpeg_augment(lf_tf_ws *ws, void *dst, size_t dst_cap,
                        const void *src, size_t src_size,
                        const lf_tf_image_params *p, uint64_t epoch,
                        uint64_t sample_id, lf_tf_jpeg_info *info)
{
    struct crop_ctx j = {dst, dst_cap, src, src_size, p, NULL, epoch, sample_id, info};
    return guarded(ws, crop_job, &j);
}
