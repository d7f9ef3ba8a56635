/*
 * phuff.c — entropy decoding of progressive JPEG scans, in place of
 * libjpeg-turbo's.
 *
 * A progressive file is about ten scans over the whole image (DC first,
 * AC first in spectral bands, then refinements of one bit each), and every
 * block above a crop's bottom must be entropy-decoded in every scan before
 * the first pixel comes out. libjpeg-turbo 2.1 decodes these scans
 * (jdphuff.c) with an 8-bit lookahead for the code only, then reads the
 * extra bits, refilling its bit buffer byte by byte with a marker check per
 * byte; on real photographs that was ~80% of a progressive crop's time.
 * This decoder gives the same coefficients (the same output, bit for bit)
 * faster:
 *   - one table lookup on the next LUT_BITS bits gives a whole symbol where
 *     it fits: code + extra bits decoded to the coefficient and its zero
 *     run, or code + run bits to the EOB run length (longer codes go through
 *     the canonical code limits, as libjpeg's slow path);
 *   - a 64-bit bit buffer refilled 8 bytes at a time where none of them is
 *     0xFF (stuffed bytes and markers take the byte-wise path), and only
 *     when fewer than 32 bits are left: one symbol with its extra bits
 *     always fits in what remains;
 *   - refinement scans read the correction bits without branching on them,
 *     and find a block's nonzero coefficients from a 64-bit mask per block
 *     that the decoder keeps beside the coefficient arrays (given by the
 *     caller, tf_phuff_set_masks) instead of loading and comparing the
 *     block's 128 bytes: a block of an EOB run with none in the band is
 *     not touched at all (on real photographs the scans are bound by
 *     memory traffic over arrays larger than the cache);
 *   - in an AC first scan the blocks of an EOB run are passed over in one
 *     step along the row.
 *
 * It plugs into libjpeg through public method pointers only (struct
 * jpeg_entropy_decoder in jpegint.h): libjpeg's own start_pass still runs
 * for every scan (it checks the scan's parameters and Huffman tables and
 * keeps coef_bits, which block smoothing reads); then, before the scan's
 * first iMCU row is consumed, the progress monitor calls
 * tf_phuff_take_scan, which builds our tables, points decode_mcu here and,
 * for the rest of the scan, the input controller's consume_input at
 * consume_row: libjpeg's consume_data gathers block pointers and makes an
 * indirect call per block (~18% of a progressive crop around our decoder);
 * ours decodes an iMCU row a call into the coefficient arrays the
 * controller publishes, the reader in registers along the row.
 * From then on the scan's bytes are ours: our reader keeps its own position
 * and hands it back to the source (and a marker it met, as unread_marker)
 * after the scan's last MCU or when the scan's tail is skipped
 * (tf_phuff_sync), so libjpeg reads the next markers from where libjpeg's
 * own reader would be.
 *
 * Corrupt data is treated as libjpeg treats it, through its warnings and
 * errors (which the caller's error manager turns into a rejection): bits
 * needed past the end of the scan's data (JWRN_HIT_MARKER; the reader pads
 * with zeros meanwhile, as libjpeg does), a code no table has
 * (JWRN_HUFF_BAD_CODE), a refinement symbol with a size other than 1
 * (JWRN_BOGUS_PROGRESSION), a wrong or missing restart marker, the end of
 * the input (the source's fill_input_buffer). No read goes past the
 * source's buffer and no write outside the block given; a zero run past
 * the band writes coefficient 63, as libjpeg's table does.
 */
#include "phuff.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpegint.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#define LUT_BITS 10
#define LUT_SIZE (1u << LUT_BITS)
#define SCAN_TABLES 4            /* DC first: one per component of the scan, at most 4 */

/* A lookup entry (32 bits): bits consumed (0: code longer than LUT_BITS,
 * E_SLOW), kind, zero run (and size above it, or the whole symbol),
 * value. */
enum { E_SLOW = 0, E_COEF = 1, E_SYMBOL = 2, E_EOB = 3 };
#define E_LEN(e)   ((int)((e) & 31u))
#define E_KIND(e)  ((int)(((e) >> 5) & 3u))
#define E_RUN(e)   ((int)(((e) >> 8) & 15u))
#define E_RS(e)    ((int)(((e) >> 8) & 255u))   /* E_SYMBOL: the symbol itself */
#define E_VALUE(e) ((int)(int16_t)((e) >> 16))  /* E_COEF: the coefficient */
#define E_COUNT(e) ((int)((e) >> 16))           /* E_EOB: blocks in the run */

static uint32_t entry(int len, int kind, int rs, unsigned value)
{
    return (uint32_t)len | (uint32_t)kind << 5 | (uint32_t)rs << 8 | (value & 0xffffu) << 16;
}

/* One Huffman table as this scan uses it. */
typedef struct huff {
    uint32_t lut[LUT_SIZE];
    int32_t maxcode[17];         /* largest code of each length, -1 if none */
    int32_t valoffset[17];       /* huffval index of a code of that length, minus the code */
    uint8_t huffval[256];
} huff;

typedef struct bitreader {
    uint64_t buf;                /* the next bits, first one in the top bit */
    int bits;                    /* bits in buf, zero padding included */
    int pad;                     /* zero bits put in after the data ended */
    const JOCTET *p, *end;       /* the source's bytes not yet in buf */
    int marker;                  /* the marker that ended the data, or 0 */
} bitreader;

enum { SCAN_DC_FIRST, SCAN_DC_REFINE, SCAN_AC_FIRST, SCAN_AC_REFINE };

struct tf_phuff {
    bitreader r;
    int kind;                    /* SCAN_* */
    int Ss, Se, Al;
    unsigned eobrun;             /* blocks left in the current EOB run */
    int last_dc[MAX_COMPS_IN_SCAN];
    unsigned restarts_to_go;
    int next_rst;                /* number of the restart marker expected next */
    uint64_t mcus_left;          /* MCUs of the scan not yet decoded */
    int reading;                 /* r holds the source's position (not handed back) */
    int fast_pdep;               /* the CPU has BMI2 with a fast pdep */
    const huff *dc[MAX_COMPS_IN_SCAN];   /* DC first: each component's table */
    uint64_t *masks[MAX_COMPONENTS];     /* per block, its nonzero AC coefficients
                                          * (zigzag bits), or NULL (tf_phuff_set_masks) */
    size_t mask_stride[MAX_COMPONENTS];  /* masks per block row */
    int last_scan;               /* input_scan_number of the last scan taken, 0: none yet */
    uint64_t zigzag_mask[8][256];        /* bits of a block row -> zigzag positions */
    huff tables[SCAN_TABLES];
};

/* Zigzag position -> natural (row-major) index; the 16 extra entries keep
 * a zero run that overshoots the band inside the block, as libjpeg's. */
static const uint8_t natural[64 + 16] = {
     0,  1,  8, 16,  9,  2,  3, 10, 17, 24, 32, 25, 18, 11,  4,  5,
    12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13,  6,  7, 14, 21, 28,
    35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
    58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
};

/* BMI2 present, and not an AMD CPU before family 0x19 (Zen 3), where pdep
 * is microcoded and takes up to hundreds of cycles. */
static int cpu_fast_pdep(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned a, b, c, d;
    if (!__builtin_cpu_supports("bmi2") || !__get_cpuid(0, &a, &b, &c, &d)) return 0;
    int amd = b == 0x68747541u;  /* "AuthenticAMD" */
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    unsigned family = (a >> 8) & 15u;
    if (family == 15) family += (a >> 20) & 255u;
    return !amd || family >= 0x19;
#else
    return 0;
#endif
}

tf_phuff *tf_phuff_create(void)
{
    tf_phuff *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->fast_pdep = cpu_fast_pdep();
    uint8_t zigzag[64];
    for (int k = 0; k < 64; k++) zigzag[natural[k]] = (uint8_t)k;
    for (int row = 0; row < 8; row++)
        for (int b = 0; b < 256; b++)
            for (int j = 0; j < 8; j++)
                if (b >> j & 1) h->zigzag_mask[row][b] |= 1ull << zigzag[8 * row + j];
    return h;
}

void tf_phuff_free(tf_phuff *h) { free(h); }

/* ---- libjpeg's warnings and errors ------------------------------------- */

/* A warning through the error manager (ours rejects the image there). A
 * manager that returns from it gets what libjpeg gives: decoding goes on. */
__attribute__((cold, noinline))
static void warn(j_decompress_ptr c, int code, int p0, int p1)
{
    c->err->msg_code = code;
    c->err->msg_parm.i[0] = p0;
    c->err->msg_parm.i[1] = p1;
    (*c->err->emit_message)((j_common_ptr)c, -1);
}

__attribute__((cold, noinline))
static void error(j_decompress_ptr c, int code)
{
    c->err->msg_code = code;
    (*c->err->error_exit)((j_common_ptr)c);
}

/* ---- bit reader -------------------------------------------------------- */

/* The next byte of the source; at the end of its buffer, asks the source
 * for more (jpeg_mem_src warns there: premature end of the file). */
static int next_byte(j_decompress_ptr c, bitreader *r)
{
    if (r->p == r->end) {
        static const JOCTET eoi[2] = {0xFF, JPEG_EOI};
        struct jpeg_source_mgr *s = c->src;
        s->next_input_byte = r->p;
        s->bytes_in_buffer = 0;
        if (!(*s->fill_input_buffer)(c)) error(c, JERR_CANT_SUSPEND);
        r->p = s->next_input_byte;
        r->end = r->p + s->bytes_in_buffer;
        if (r->p == r->end) {    /* nothing more: an EOI marker ends the data, as
                                  * jpeg_mem_src's own fill gives */
            r->p = eoi;
            r->end = eoi + 2;
        }
    }
    return *r->p++;
}

/* Byte by byte: a 0xFF 0x00 pair is a data byte 0xFF, 0xFF fill bytes
 * before a marker are skipped, and a marker ends the data: from there on
 * the buffer is padded with zeros (counted in pad). */
static void fill_slow(j_decompress_ptr c, bitreader *r)
{
    while (r->bits <= 56) {
        if (r->marker) {
            r->pad += 64 - r->bits;
            r->bits = 64;
            return;
        }
        int b = next_byte(c, r);
        if (b == 0xFF) {
            do b = next_byte(c, r); while (b == 0xFF);
            if (b != 0) {
                r->marker = b;
                continue;
            }
            b = 0xFF;
        }
        r->buf |= (uint64_t)b << (56 - r->bits);
        r->bits += 8;
    }
}

/* Tops the buffer up (from at most 56 bits) to at least 57: 8 bytes at
 * once where none of them is 0xFF, else byte by byte. */
static inline void fill(j_decompress_ptr c, bitreader *r)
{
    if (!r->marker && r->end - r->p >= 8) {
        uint64_t w;
        memcpy(&w, r->p, 8);
        w = __builtin_bswap64(w);
        uint64_t x = ~w;         /* a 0xFF byte of w is a zero byte of x */
        if (!((x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull)) {
            int n = (64 - r->bits) >> 3;
            r->buf |= w >> (64 - 8 * n) << (64 - 8 * n - r->bits);
            r->p += n;
            r->bits += 8 * n;
            return;
        }
    }
    bitreader t = *r;            /* a copy, so r itself can stay in registers */
    fill_slow(c, &t);
    *r = t;
}

static inline void consume(bitreader *r, int n)
{
    r->buf <<= n;
    r->bits -= n;
}

/* n = 1..16 bits as an unsigned number. */
static inline int take(bitreader *r, int n)
{
    int v = (int)(r->buf >> (64 - n));
    consume(r, n);
    return v;
}

/* libjpeg's HUFF_EXTEND: n bits read as a signed value of size n. */
static inline int extend(int v, int n)
{
    return v < (1 << (n - 1)) ? v - (1 << n) + 1 : v;
}

/* ---- tables ------------------------------------------------------------ */

enum { TABLE_DC, TABLE_AC, TABLE_AC_REFINE };

/* The entries of symbol rs with code `code` of length len <= LUT_BITS:
 * where its extra bits fit too, one entry per value of them (the decoded
 * coefficient, or the EOB run's length), else the symbol alone. */
static void lut_put(huff *t, int mode, int code, int len, int rs)
{
    int run = mode == TABLE_DC ? 0 : rs >> 4, size = rs & 15;
    int kind, extra;
    if (mode != TABLE_DC && size == 0) {
        kind = run < 15 ? E_EOB : E_SYMBOL;  /* ZRL: no extra bits, rare */
        extra = run < 15 ? run : 0;
    } else {
        kind = mode == TABLE_AC_REFINE && size != 1 ? E_SYMBOL : E_COEF;
        extra = size;
    }
    if (kind == E_SYMBOL || len + extra > LUT_BITS) {
        kind = E_SYMBOL;
        extra = 0;
    }
    int free_bits = LUT_BITS - len - extra;
    for (int x = 0; x < (1 << extra); x++) {
        uint32_t e;
        if (kind == E_COEF) e = entry(len + extra, E_COEF, run | size << 4,
                                      (unsigned)(size ? extend(x, size) : 0));
        else if (kind == E_EOB) e = entry(len + extra, E_EOB, rs, (1u << run) + (unsigned)x);
        else e = entry(len, E_SYMBOL, rs, 0);
        uint32_t base = ((uint32_t)code << (LUT_BITS - len) | (uint32_t)x << free_bits);
        for (uint32_t i = 0; i < (1u << free_bits); i++) t->lut[base + i] = e;
    }
}

/* Builds t from libjpeg's table (which its start_pass has checked already;
 * checked again here, as jpeg_make_d_derived_tbl does). */
static void huff_build(j_decompress_ptr c, huff *t, const JHUFF_TBL *tbl, int mode)
{
    if (!tbl) error(c, JERR_NO_HUFF_TABLE);
    memset(t->lut, 0, sizeof t->lut);    /* E_SLOW */
    int k = 0;
    uint32_t code = 0;
    for (int len = 1; len <= 16; len++, code <<= 1) {
        int n = tbl->bits[len];
        if (k + n > 256 || code + (uint32_t)n >= (1u << len)) error(c, JERR_BAD_HUFF_TABLE);
        t->maxcode[len] = n ? (int32_t)(code + (uint32_t)n - 1) : -1;
        t->valoffset[len] = k - (int32_t)code;
        for (int i = 0; i < n; i++, k++, code++) {
            int rs = tbl->huffval[k];
            if (mode == TABLE_DC && rs > 15) error(c, JERR_BAD_HUFF_TABLE);
            t->huffval[k] = (uint8_t)rs;
            if (len <= LUT_BITS) lut_put(t, mode, (int)code, len, rs);
        }
    }
}

/* A code longer than LUT_BITS (or none): the canonical limits per length,
 * as libjpeg's jpeg_huff_decode. Returns an E_SYMBOL entry, the code
 * consumed. */
__attribute__((noinline))
static uint32_t slow_symbol(j_decompress_ptr c, const huff *t, bitreader *r)
{
    uint32_t bits16 = (uint32_t)(r->buf >> 48);
    for (int len = 1; len <= 16; len++) {
        int32_t code = (int32_t)(bits16 >> (16 - len));
        if (code <= t->maxcode[len]) {
            consume(r, len);
            return entry(len, E_SYMBOL, t->huffval[(code + t->valoffset[len]) & 255], 0);
        }
    }
    warn(c, JWRN_HUFF_BAD_CODE, 0, 0);
    return entry(0, E_SYMBOL, 0, 0);     /* as libjpeg: symbol 0 */
}

/* The next symbol's entry, its code consumed, and its extra bits where the
 * entry holds them decoded. At least 16 bits remain afterwards. */
static inline uint32_t next_entry(j_decompress_ptr c, const huff *t, bitreader *r)
{
    if (r->bits < 32) fill(c, r);
    uint32_t e = t->lut[r->buf >> (64 - LUT_BITS)];
    if (!E_LEN(e)) {
        bitreader copy = *r;     /* as in fill */
        e = slow_symbol(c, t, &copy);
        *r = copy;
        return e;
    }
    consume(r, E_LEN(e));
    return e;
}

/* ---- the four kinds of scan ---------------------------------------------- */

static inline __attribute__((always_inline))
void dc_first(j_decompress_ptr c, tf_phuff *h, bitreader *r, JBLOCKROW *blocks)
{
    for (int b = 0; b < c->blocks_in_MCU; b++) {
        int ci = c->MCU_membership[b];
        uint32_t e = next_entry(c, h->dc[ci], r);
        int diff = E_VALUE(e);
        if (E_KIND(e) == E_SYMBOL) {
            int s = E_RS(e) & 15;
            diff = s ? extend(take(r, s), s) : 0;
        }
        int last = h->last_dc[ci];
        if ((last >= 0 && diff > INT_MAX - last) || (last < 0 && diff < INT_MIN - last))
            error(c, JERR_BAD_DCT_COEF);
        h->last_dc[ci] = last + diff;
        blocks[b][0][0] = (JCOEF)(int)((unsigned)(last + diff) << h->Al);
    }
}

static inline __attribute__((always_inline))
void dc_refine(j_decompress_ptr c, tf_phuff *h, bitreader *r, JBLOCKROW *blocks)
{
    if (r->bits < c->blocks_in_MCU) fill(c, r);
    for (int b = 0; b < c->blocks_in_MCU; b++)
        if (take(r, 1)) blocks[b][0][0] = (JCOEF)(blocks[b][0][0] | (1 << h->Al));
}

/* Stores coefficient v at zigzag position k (past 63: 63, as libjpeg's
 * table) and keeps the block's mask of nonzero coefficients up to date (a
 * value that does not fit a JCOEF may store 0). */
static inline void put_coef(JCOEF *block, uint64_t *nz, int k, int v)
{
    JCOEF x = (JCOEF)v;
    block[natural[k]] = x;
    uint64_t bit = 1ull << (k < 63 ? k : 63);
    *nz = (*nz & ~bit) | (x ? bit : 0);
}

/* mask: the block's nonzero mask where the masks are kept (read and
 * written only for a block with coefficients in this scan), else NULL. */
static inline __attribute__((always_inline))
void ac_first(j_decompress_ptr c, tf_phuff *h, bitreader *r, JCOEF *block, uint64_t *mask)
{
    if (h->eobrun) {
        h->eobrun--;
        return;
    }
    const huff *t = &h->tables[0];
    int Al = h->Al, Se = h->Se;
    uint64_t nz = mask ? *mask : 0;
    for (int k = h->Ss; k <= Se; k++) {
        uint32_t e = next_entry(c, t, r);
        if (E_KIND(e) == E_COEF) {
            k += E_RUN(e);
            put_coef(block, &nz, k, (int)((unsigned)E_VALUE(e) << Al));
            continue;
        }
        if (E_KIND(e) == E_EOB) {
            h->eobrun = (unsigned)E_COUNT(e) - 1;
            break;
        }
        int run = E_RS(e) >> 4, s = E_RS(e) & 15;
        if (s) {
            k += run;
            put_coef(block, &nz, k, (int)((unsigned)extend(take(r, s), s) << Al));
        } else if (run == 15) {
            k += 15;
        } else {
            h->eobrun = (1u << run) - 1 + (run ? (unsigned)take(r, run) : 0);
            break;
        }
    }
    if (mask) *mask = nz;
}

/* Appends a correction bit (there is one in the buffer) to a coefficient
 * already nonzero: adds p1 with the coefficient's sign where the bit is 1
 * and the coefficient does not have that bit yet; branch-free (the bit is
 * as good as random). */
static inline void correct(bitreader *r, JCOEF *coef, int p1)
{
    int v = *coef, bit = (int)(r->buf >> 63);
    consume(r, 1);
    int add = (bit & ((v & p1) == 0)) * (v >= 0 ? p1 : -p1);
    *coef = (JCOEF)(v + add);
}

/* The correction bits of the coefficients in mask (zigzag positions), in
 * order. */
static inline void correct_all(j_decompress_ptr c, bitreader *r, JCOEF *block, uint64_t mask,
                               int p1)
{
    for (; mask; mask &= mask - 1) {
        if (r->bits < 1) fill(c, r);
        correct(r, &block[natural[__builtin_ctzll(mask)]], p1);
    }
}

/* Bit k set: the coefficient at zigzag position k is nonzero. The
 * natural-order mask comes 16 coefficients per compare, then goes to
 * zigzag order a row (8 bits) per lookup. Where the masks are not kept. */
static inline uint64_t nonzero_zigzag(const tf_phuff *h, const JCOEF *block)
{
    uint64_t nat = 0;
#ifdef __SSE2__
    const __m128i zero = _mm_setzero_si128();
    for (int i = 0; i < 4; i++) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(block + 16 * i));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(block + 16 * i + 8));
        __m128i z = _mm_packs_epi16(_mm_cmpeq_epi16(a, zero), _mm_cmpeq_epi16(b, zero));
        nat |= (uint64_t)(~(unsigned)_mm_movemask_epi8(z) & 0xffffu) << (16 * i);
    }
#else
    for (int i = 0; i < 64; i++) nat |= (uint64_t)(block[i] != 0) << i;
#endif
    uint64_t zz = 0;
    for (int row = 0; row < 8; row++) zz |= h->zigzag_mask[row][(nat >> (8 * row)) & 255];
    return zz;
}

/* x without its n lowest set bits (n <= 15). BMI2's pdep places bit n at
 * x's n-th set bit in one step where it is fast (not on AMD before Zen 3:
 * microcoded there); else a loop, whose varying count costs a branch miss.
 * pdep through asm: the rest of the file stays baseline x86-64. */
static inline uint64_t drop_low_bits(const tf_phuff *h, uint64_t x, int n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (h->fast_pdep) {
        uint64_t bit, keep = ~0ull << n;
        __asm__("pdep %2, %1, %0" : "=r"(bit) : "r"(keep), "rm"(x));
        return bit;
    }
#else
    (void)h;
#endif
    for (int i = 0; i < n && x; i++) x &= x - 1;
    return x;
}

/* Zigzag positions k.. (k <= 64). */
static inline uint64_t from_pos(int k) { return k < 64 ? ~0ull << k : 0; }

/* mask as in ac_first; without it the block's nonzero coefficients are
 * found from the block itself. With it, a block with none in the band and
 * inside an EOB run is not touched at all. */
static inline __attribute__((always_inline))
void ac_refine(j_decompress_ptr c, tf_phuff *h, bitreader *r, JCOEF *block, uint64_t *mask)
{
    int p1 = 1 << h->Al, Se = h->Se, k = h->Ss;
    const huff *t = &h->tables[0];
    uint64_t nz = (mask ? *mask : nonzero_zigzag(h, block)) & ~from_pos(Se + 1);
    if (!h->eobrun) {
        for (; k <= Se; k++) {
            uint32_t e = next_entry(c, t, r);
            int run, s = 0;
            if (E_KIND(e) == E_COEF) {
                run = E_RUN(e);
                s = E_VALUE(e) > 0 ? p1 : -p1;
            } else if (E_KIND(e) == E_EOB) {
                h->eobrun = (unsigned)E_COUNT(e);
                break;
            } else {
                run = E_RS(e) >> 4;
                int size = E_RS(e) & 15;
                if (size) {
                    if (size != 1) warn(c, JWRN_BOGUS_PROGRESSION, c->cur_comp_info[0]->component_index, k);
                    s = take(r, 1) ? p1 : -p1;
                } else if (run != 15) {
                    h->eobrun = (1u << run) + (run ? (unsigned)take(r, run) : 0);
                    break;
                }
            }
            /* The new coefficient goes in the (run+1)-th position from k
             * still zero (or past the band: Se + 1, as libjpeg), the
             * nonzero ones before it get their correction bits. */
            uint64_t zeros = drop_low_bits(h, ~nz & from_pos(k) & ~from_pos(Se + 1), run);
            int p = zeros ? __builtin_ctzll(zeros) : Se + 1;
            correct_all(c, r, block, nz & from_pos(k) & ~from_pos(p), p1);
            k = p;
            if (s) {             /* s != 0 fits a JCOEF (Al <= 13) */
                block[natural[k]] = (JCOEF)s;
                if (mask) *mask |= 1ull << (k < 63 ? k : 63);
            }
        }
    }
    if (h->eobrun) {
        correct_all(c, r, block, nz & from_pos(k), p1);
        h->eobrun--;
    }
}

/* ---- restarts and the scan --------------------------------------------- */

/* At a restart interval's end: the bits left in the buffer are dropped (as
 * libjpeg does), the data must go on with the restart marker expected, and
 * the predictions and the EOB run start over. */
__attribute__((noinline))
static void restart(j_decompress_ptr c, tf_phuff *h, bitreader *r)
{
    int skipped = 0, m = r->marker;
    while (!m) {
        int b = next_byte(c, r);
        if (b != 0xFF) {
            skipped++;
            continue;
        }
        do b = next_byte(c, r); while (b == 0xFF);
        if (b) m = b;
        else skipped += 2;
    }
    if (skipped) warn(c, JWRN_EXTRANEOUS_DATA, skipped, m);
    if (m != JPEG_RST0 + h->next_rst) warn(c, JWRN_MUST_RESYNC, m, JPEG_RST0 + h->next_rst);
    r->buf = 0;
    r->bits = r->pad = r->marker = 0;
    h->next_rst = (h->next_rst + 1) & 7;
    h->restarts_to_go = c->restart_interval;
    h->eobrun = 0;
    memset(h->last_dc, 0, sizeof h->last_dc);
}

/* One MCU of a scan of the given kind, with r in registers; after the
 * scan's last MCU the reader is handed back to the source. Inlined with a
 * constant kind into the row loops below. */
static inline __attribute__((always_inline))
void mcu(j_decompress_ptr c, tf_phuff *h, bitreader *r, JBLOCKROW *blocks, uint64_t *mask,
         int kind)
{
    if (c->restart_interval) {
        if (!h->restarts_to_go) {
            bitreader t = *r;    /* a copy, so r itself can stay in registers */
            restart(c, h, &t);
            *r = t;
        }
        h->restarts_to_go--;
    }
    switch (kind) {
    case SCAN_DC_FIRST: dc_first(c, h, r, blocks); break;
    case SCAN_DC_REFINE: dc_refine(c, h, r, blocks); break;
    case SCAN_AC_FIRST: ac_first(c, h, r, blocks[0][0], mask); break;
    default: ac_refine(c, h, r, blocks[0][0], mask); break;
    }
    if (r->bits < r->pad) {      /* read past the data: libjpeg's warning */
        warn(c, JWRN_HIT_MARKER, 0, 0);
        r->pad = r->bits;        /* said once, as libjpeg */
    }
    if (--h->mcus_left == 0) {
        /* The scan's end: read on as far as a full buffer goes, as
         * libjpeg's reader, which fills up to 57 bits whenever it runs
         * short, may have done: stray bytes it took in before the marker
         * pass unnoticed there, so they do here too. */
        if (r->bits <= 56) fill(c, r);
        h->r = *r;
        tf_phuff_sync(h, c);
    }
}

/* The masks of the current image are no longer kept (see
 * tf_phuff_set_masks). */
static void drop_masks(tf_phuff *h)
{
    memset(h->masks, 0, sizeof h->masks);
}

/* An MCU through the method pointer: the block's mask is not at hand, so
 * an AC scan here stops the masks. */
static boolean decode_mcu(j_decompress_ptr c, JBLOCKROW *blocks)
{
    tf_phuff *h = c->client_data;
    if (h->kind == SCAN_AC_FIRST || h->kind == SCAN_AC_REFINE) drop_masks(h);
    bitreader r = h->r;
    mcu(c, h, &r, blocks, NULL, h->kind);
    h->r = r;
    return TRUE;
}

/* An MCU through decode_mcu as it stands (ours, or the scan tails' skip),
 * for the row loops below: the kind after SCAN_AC_REFINE. */
enum { SCAN_BY_POINTER = SCAN_AC_REFINE + 1 };

/* The blocks of an iMCU row of a one-component scan (one block an MCU),
 * left to right and top to bottom, the reader in registers throughout.
 * In an AC first scan the blocks of an EOB run are passed over in one
 * step (nothing to read or write there), up to the scan's last block,
 * which goes through mcu() for the scan's end. */
static inline __attribute__((always_inline))
void blocks_of_row(j_decompress_ptr c, tf_phuff *h, JBLOCKARRAY rows, int nrows, int kind)
{
    const jpeg_component_info *comp = c->cur_comp_info[0];
    int ci = comp->component_index;
    JDIMENSION ncols = c->MCUs_per_row;
    uint64_t *masks = kind == SCAN_AC_FIRST || kind == SCAN_AC_REFINE ? h->masks[ci] : NULL;
    size_t row0 = (size_t)c->input_iMCU_row * (size_t)comp->v_samp_factor;
    bitreader r = h->r;
    for (int y = 0; y < nrows; y++) {
        uint64_t *m = masks ? masks + (row0 + (size_t)y) * h->mask_stride[ci] : NULL;
        for (JDIMENSION x = 0; x < ncols; x++) {
            JBLOCKROW b = rows[y] + x;
            if (kind == SCAN_AC_FIRST && h->eobrun && !c->restart_interval) {
                uint64_t n = h->eobrun;
                if (n > ncols - x) n = ncols - x;
                if (n > h->mcus_left - 1) n = h->mcus_left - 1;
                h->eobrun -= (unsigned)n;
                h->mcus_left -= n;
                x += (JDIMENSION)n;
                if (x == ncols) break;
                b = rows[y] + x;
            }
            if (kind == SCAN_BY_POINTER) (*c->entropy->decode_mcu)(c, &b);
            else mcu(c, h, &r, &b, m ? m + x : NULL, kind);
        }
    }
    if (kind != SCAN_BY_POINTER) h->r = r;
}

/* An interleaved scan's iMCU row (one MCU row; DC scans only): each MCU's
 * blocks gathered as libjpeg's consume_data does. */
static inline __attribute__((always_inline))
void mcus_of_row(j_decompress_ptr c, tf_phuff *h, JBLOCKARRAY *rows, int kind)
{
    JBLOCKROW blocks[C_MAX_BLOCKS_IN_MCU];
    bitreader r = h->r;
    for (JDIMENSION x = 0; x < c->MCUs_per_row; x++) {
        int n = 0;
        for (int ci = 0; ci < c->comps_in_scan; ci++) {
            const jpeg_component_info *comp = c->cur_comp_info[ci];
            for (int y = 0; y < comp->MCU_height; y++)
                for (int bx = 0; bx < comp->MCU_width; bx++)
                    blocks[n++] = rows[ci][y] + x * (JDIMENSION)comp->MCU_width + (JDIMENSION)bx;
        }
        if (kind == SCAN_BY_POINTER) (*c->entropy->decode_mcu)(c, blocks);
        else mcu(c, h, &r, blocks, NULL, kind);
    }
    if (kind != SCAN_BY_POINTER) h->r = r;
}

/* In place of libjpeg's consume_data (jdcoefct.c) for the scans we read:
 * an iMCU row a call, as there, into the coefficient arrays the controller
 * publishes (coef_arrays), but without an indirect call per MCU, our
 * reader in registers along the row, and the loop made for each kind of
 * scan. Once the scan tails' skip has replaced our decode_mcu, the MCUs go
 * through that. */
static int consume_row(j_decompress_ptr c)
{
    tf_phuff *h = c->client_data;
    JBLOCKARRAY rows[MAX_COMPS_IN_SCAN];
    for (int ci = 0; ci < c->comps_in_scan; ci++) {
        const jpeg_component_info *comp = c->cur_comp_info[ci];
        rows[ci] = (*c->mem->access_virt_barray)((j_common_ptr)c, c->coef->coef_arrays[comp->component_index],
                                                 c->input_iMCU_row * (JDIMENSION)comp->v_samp_factor,
                                                 (JDIMENSION)comp->v_samp_factor, TRUE);
    }
    if (!c->entropy->insufficient_data) c->master->last_good_iMCU_row = c->input_iMCU_row;
    int kind = c->entropy->decode_mcu == decode_mcu ? h->kind : SCAN_BY_POINTER;
    if (c->comps_in_scan > 1) {
        switch (kind) {
        case SCAN_DC_FIRST: mcus_of_row(c, h, rows, SCAN_DC_FIRST); break;
        case SCAN_DC_REFINE: mcus_of_row(c, h, rows, SCAN_DC_REFINE); break;
        default: mcus_of_row(c, h, rows, SCAN_BY_POINTER); break;
        }
    } else {
        const jpeg_component_info *comp = c->cur_comp_info[0];
        int nrows = c->input_iMCU_row + 1 < c->total_iMCU_rows ? comp->v_samp_factor : comp->last_row_height;
        switch (kind) {
        case SCAN_DC_FIRST: blocks_of_row(c, h, rows[0], nrows, SCAN_DC_FIRST); break;
        case SCAN_DC_REFINE: blocks_of_row(c, h, rows[0], nrows, SCAN_DC_REFINE); break;
        case SCAN_AC_FIRST: blocks_of_row(c, h, rows[0], nrows, SCAN_AC_FIRST); break;
        case SCAN_AC_REFINE: blocks_of_row(c, h, rows[0], nrows, SCAN_AC_REFINE); break;
        default: blocks_of_row(c, h, rows[0], nrows, SCAN_BY_POINTER); break;
        }
    }
    if (++c->input_iMCU_row < c->total_iMCU_rows) return JPEG_ROW_COMPLETED;
    (*c->inputctl->finish_input_pass)(c);
    return JPEG_SCAN_COMPLETED;
}

void tf_phuff_sync(tf_phuff *h, j_decompress_ptr c)
{
    if (!h->reading || !c->entropy || c->entropy->decode_mcu != decode_mcu) return;
    c->src->next_input_byte = h->r.p;
    c->src->bytes_in_buffer = (size_t)(h->r.end - h->r.p);
    if (h->r.marker) c->unread_marker = h->r.marker;
    h->reading = 0;
}

void tf_phuff_set_masks(tf_phuff *h, int ci, uint64_t *masks, size_t stride)
{
    if (ci < 0 || ci >= MAX_COMPONENTS) return;
    h->masks[ci] = masks;
    h->mask_stride[ci] = stride;
    h->last_scan = 0;
}

int tf_phuff_masks_held(const tf_phuff *h, j_decompress_ptr c)
{
    if (h->last_scan != c->input_scan_number) return 0;
    for (int ci = 0; ci < c->num_components; ci++)
        if (!h->masks[ci]) return 0;
    return 1;
}

void tf_phuff_take_scan(tf_phuff *h, j_decompress_ptr c)
{
    if (!c->progressive_mode || !c->entropy || !c->coef || !c->coef->coef_arrays || !c->inputctl ||
        !c->master ||
        c->inputctl->consume_input != c->coef->consume_data || c->input_iMCU_row != 0 ||
        c->entropy->decode_mcu == decode_mcu || c->unread_marker || c->client_data != h)
        return;
    /* A scan before this one that libjpeg decoded (or the first of an image
     * whose masks were not given) left masks we cannot trust. */
    if (c->input_scan_number != h->last_scan + 1) drop_masks(h);
    h->last_scan = c->input_scan_number;
    int dc = c->Ss == 0;
    h->kind = dc ? (c->Ah ? SCAN_DC_REFINE : SCAN_DC_FIRST) : (c->Ah ? SCAN_AC_REFINE : SCAN_AC_FIRST);
    h->Ss = c->Ss;
    h->Se = c->Se;
    h->Al = c->Al;
    if (h->kind == SCAN_DC_FIRST) {
        for (int ci = 0; ci < c->comps_in_scan; ci++) {
            int no = c->cur_comp_info[ci]->dc_tbl_no, same = -1;
            for (int cj = 0; cj < ci; cj++)
                if (c->cur_comp_info[cj]->dc_tbl_no == no) same = cj;
            if (same >= 0) {
                h->dc[ci] = h->dc[same];
                continue;
            }
            if (no < 0 || no >= NUM_HUFF_TBLS) error(c, JERR_NO_HUFF_TABLE);
            huff_build(c, &h->tables[ci], c->dc_huff_tbl_ptrs[no], TABLE_DC);
            h->dc[ci] = &h->tables[ci];
        }
    } else if (!dc) {
        int no = c->cur_comp_info[0]->ac_tbl_no;
        if (no < 0 || no >= NUM_HUFF_TBLS) error(c, JERR_NO_HUFF_TABLE);
        huff_build(c, &h->tables[0], c->ac_huff_tbl_ptrs[no],
                   h->kind == SCAN_AC_REFINE ? TABLE_AC_REFINE : TABLE_AC);
    }
    h->eobrun = 0;
    memset(h->last_dc, 0, sizeof h->last_dc);
    h->restarts_to_go = c->restart_interval;
    h->next_rst = 0;
    h->mcus_left = (uint64_t)c->MCUs_per_row * c->MCU_rows_in_scan;
    h->r = (bitreader){0, 0, 0, c->src->next_input_byte,
                       c->src->next_input_byte + c->src->bytes_in_buffer, 0};
    h->reading = 1;
    c->entropy->decode_mcu = decode_mcu;
    c->inputctl->consume_input = consume_row;    /* until the scan's end
                                                  * (finish_input_pass) */
}
