/*
 * token_files.c — reading already tokenized corpora for `create tokens`.
 *
 * Megatron-LM's indexed dataset (the "MMIDIDX" layout that
 * preprocess_data.py and NeMo write) is two files. PREFIX.bin holds the ids
 * of every sequence back to back, in the index's dtype. PREFIX.idx is, all
 * little-endian:
 *
 *   byte 0   magic "MMIDIDX\0\0" (9 bytes)
 *   byte 9   version, u64 (1)
 *   byte 17  dtype code, u8: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
 *            8 uint16 (6 and 7 are floats, never token ids)
 *   byte 18  sequence count S, u64
 *   byte 26  document boundary count D, u64
 *   byte 34  S sequence lengths (i32, in ids), then S sequence pointers
 *            (i64, byte offsets into .bin), then D document boundaries
 *            (i64: document d is sequences [b[d], b[d+1]); b[0] = 0 and
 *            b[D-1] = S), then, in multimodal datasets only, S mode bytes.
 *
 * A document is usually one sequence; preprocess_data.py --split-sentences
 * makes one a sentence, and they are joined again here. Nothing is
 * trusted: open checks every sequence against the .bin's size and every
 * boundary's order, naming the file and the byte, so a truncated .bin is
 * found before anything is written, and reading cannot leave the maps.
 *
 * Flat arrays (nanoGPT's train.bin, OLMo's .npy) are one stream of ids;
 * documents are cut after each EOS id, or at the boundaries of an offsets
 * .npy, or the whole array is one.
 */
#include "token_files.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "npy.h"

#define MEGATRON_MAGIC "MMIDIDX\0\0"
#define MEGATRON_HEADER 34

static int fail(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t why_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
    return -1;
}

static uint64_t le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int token_buf_push(token_buf *b, uint32_t id)
{
    if ((b->count + 1) * b->width > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        uint8_t *p = realloc(b->p, cap);
        if (!p)
            return -ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    uint8_t *d = b->p + b->count * b->width;
    for (size_t i = 0; i < b->width; i++)
        d[i] = (uint8_t)(id >> (8 * i));
    b->count++;
    return 0;
}

/* Maps a whole file read-only (an empty one as NULL, size 0). */
static int map_file(const char *path, uint8_t **data, size_t *size, char *why,
                    size_t why_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return fail(why, why_len, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(why, why_len, "%s: not a regular file", path);
    }
    *size = (size_t)st.st_size;
    *data = NULL;
    void *m = *size ? mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    int e = errno;
    close(fd);
    if (m == MAP_FAILED)
        return fail(why, why_len, "%s: cannot map it: %s", path, strerror(e));
    if (m)
        madvise(m, *size, MADV_SEQUENTIAL);
    *data = m;
    return 0;
}

static int megatron_dtype(token_file *f, unsigned code, char *why, size_t why_len)
{
    static const struct {
        unsigned code;
        size_t elem;
        int is_signed;
    } known[] = {{1, 1, 0}, {2, 1, 1}, {3, 2, 1}, {4, 4, 1}, {5, 8, 1}, {8, 2, 0}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].code == code) {
            f->elem = known[i].elem;
            f->is_signed = known[i].is_signed;
            return 0;
        }
    return fail(why, why_len, "%s: byte 17: dtype code %u is not an integer type (token ids "
                "are uint8 1, int8 2, int16 3, int32 4, int64 5 or uint16 8)", f->idx_path, code);
}

/* n boundaries (i64/u64) at `p`, byte `at` of `path`: the first 0, none
 * smaller than the one before, the last `last`; `what` names what `last`
 * counts, for the message. */
static int check_bounds(const uint8_t *p, uint64_t n, uint64_t last, const char *path,
                        size_t at, const char *what, char *why, size_t why_len)
{
    for (uint64_t d = 0; d < n; d++) {
        uint64_t b = le(p + d * 8, 8), prev = d ? le(p + (d - 1) * 8, 8) : 0;
        if ((d == 0 && b != 0) || b < prev || b > last || (d == n - 1 && b != last))
            return fail(why, why_len, "%s: byte %zu: boundary %" PRIu64 " is %" PRId64
                        " (boundaries run from 0 up to %" PRIu64 ", %s)", path,
                        at + (size_t)d * 8, d, (int64_t)b, last, what);
    }
    return 0;
}

/* The index's arrays fit the file; then every boundary and sequence. */
static int megatron_check(token_file *f, uint64_t nbounds, char *why, size_t why_len)
{
    uint64_t s = f->nseq;
    if (s > (f->idx_size - MEGATRON_HEADER) / 12 ||
        nbounds > (f->idx_size - MEGATRON_HEADER - s * 12) / 8)
        return fail(why, why_len, "%s: the header says %" PRIu64 " sequences and %" PRIu64
                    " document boundaries, which need %" PRIu64 " bytes; the file has %zu: "
                    "truncated, or not this format", f->idx_path, s, nbounds,
                    (uint64_t)MEGATRON_HEADER + s * 12 + nbounds * 8, f->idx_size);
    size_t end = MEGATRON_HEADER + (size_t)(s * 12 + nbounds * 8);
    if (f->idx_size != end && f->idx_size != end + s)   /* + one mode byte a sequence */
        return fail(why, why_len, "%s: byte %zu: %zu bytes past the index's arrays",
                    f->idx_path, end, f->idx_size - end);
    if (nbounds == 0)
        return fail(why, why_len, "%s: byte 26: no document boundaries (there is at least "
                    "the first, 0)", f->idx_path);
    f->ndocs = nbounds - 1;
    if (check_bounds(f->idx + MEGATRON_HEADER + s * 12, nbounds, s, f->idx_path,
                     MEGATRON_HEADER + (size_t)s * 12, "the sequences", why, why_len) < 0)
        return -1;
    for (uint64_t i = 0; i < s; i++) {
        int64_t len = (int32_t)le(f->idx + MEGATRON_HEADER + i * 4, 4);
        size_t at = MEGATRON_HEADER + (size_t)(s * 4 + i * 8);
        int64_t ptr = (int64_t)le(f->idx + at, 8);
        if (len < 0 || ptr < 0 || (uint64_t)ptr > f->data_size ||
            (uint64_t)len > (f->data_size - (uint64_t)ptr) / f->elem)
            return fail(why, why_len, "%s: sequence %" PRIu64 " (%s byte %zu) is %" PRId64
                        " ids at byte %" PRId64 ", past the end of the file (%zu bytes): "
                        "truncated, or not the .bin of this .idx", f->path, i, f->idx_path,
                        at, len, ptr, f->data_size);
    }
    return 0;
}

static char *with_suffix(const char *prefix, const char *suffix)
{
    size_t n = strlen(prefix);
    char *s = malloc(n + strlen(suffix) + 1);
    if (!s)
        cli_die("out of memory");
    memcpy(s, prefix, n);
    strcpy(s + n, suffix);
    return s;
}

int token_file_open_megatron(token_file *f, const char *prefix, char *why, size_t why_len)
{
    memset(f, 0, sizeof *f);
    f->kind = TOKEN_FILE_MEGATRON;
    f->path = with_suffix(prefix, ".bin");
    f->idx_path = with_suffix(prefix, ".idx");
    if (map_file(f->idx_path, &f->idx, &f->idx_size, why, why_len) < 0 ||
        map_file(f->path, &f->data, &f->data_size, why, why_len) < 0)
        return -1;
    if (f->idx_size < 9 || memcmp(f->idx, MEGATRON_MAGIC, 9) != 0)
        return fail(why, why_len, "%s: byte 0: not a Megatron indexed dataset index (it "
                    "starts with 'MMIDIDX\\0\\0'; the older 'TNTIDX' and other formats are "
                    "not read)", f->idx_path);
    if (f->idx_size < MEGATRON_HEADER)
        return fail(why, why_len, "%s: the file ends at byte %zu, inside the %d-byte header",
                    f->idx_path, f->idx_size, MEGATRON_HEADER);
    uint64_t version = le(f->idx + 9, 8);
    if (version != 1)
        return fail(why, why_len, "%s: byte 9: version %" PRIu64 " (only 1 is known)",
                    f->idx_path, version);
    if (megatron_dtype(f, f->idx[17], why, why_len) < 0)
        return -1;
    f->nseq = le(f->idx + 18, 8);
    return megatron_check(f, le(f->idx + 26, 8), why, why_len);
}

int token_file_open_array(token_file *f, const char *path, size_t raw_width, char *why,
                          size_t why_len)
{
    memset(f, 0, sizeof *f);
    f->kind = TOKEN_FILE_ARRAY;
    f->path = cli_strdup(path);
    if (map_file(path, &f->data, &f->data_size, why, why_len) < 0)
        return -1;
    if (f->data_size >= 6 && !memcmp(f->data, "\x93NUMPY", 6)) {
        npy_array a;
        char npy_why[256];
        if (npy_parse(f->data, f->data_size, NPY_TOKENS, &a, npy_why, sizeof npy_why) < 0)
            return fail(why, why_len, "%s: %s", path, npy_why);
        f->elem = a.vsize;
        f->ids_off = a.data_offset;
        f->nids = a.rows;
        return 0;
    }
    f->elem = raw_width;
    if (f->data_size % raw_width)
        return fail(why, why_len, "%s: byte %zu: the file ends inside an id (%zu bytes is not "
                    "a multiple of %zu; is --array-dtype right?)", path,
                    f->data_size - f->data_size % raw_width, f->data_size, raw_width);
    f->nids = f->data_size / raw_width;
    return 0;
}

int token_file_set_offsets(token_file *f, const char *path, char *why, size_t why_len)
{
    f->offs_path = cli_strdup(path);
    if (map_file(path, &f->offs_map, &f->offs_size, why, why_len) < 0)
        return -1;
    npy_array a;
    char npy_why[256];
    if (npy_parse(f->offs_map, f->offs_size, NPY_OFFSETS, &a, npy_why, sizeof npy_why) < 0)
        return fail(why, why_len, "%s: %s", path, npy_why);
    f->offs = f->offs_map + a.data_offset;
    f->noffs = a.rows;
    if (!f->noffs)
        return fail(why, why_len, "%s: no boundaries (want 0 first and %" PRIu64 ", the ids in "
                    "%s, last)", path, f->nids, f->path);
    char what[600];
    snprintf(what, sizeof what, "the ids in %s", f->path);
    return check_bounds(f->offs, f->noffs, f->nids, path, a.data_offset, what, why, why_len);
}

uint64_t token_file_bytes(const token_file *f)
{
    return f->kind == TOKEN_FILE_ARRAY ? f->nids * f->elem : f->data_size;
}

int token_file_fits_u16(const token_file *f)
{
    return f->elem <= 2 && !f->is_signed;
}

/* Appends n ids stored at byte `off` of the data, checking each fits. */
static int append_ids(const token_file *f, size_t off, uint64_t n, token_buf *b, char *why,
                      size_t why_len)
{
    const uint8_t *p = f->data + off;
    if (f->elem == b->width && !f->is_signed) {    /* the common case: a copy */
        uint64_t need = (b->count + n) * b->width;
        if (need > b->cap) {
            uint8_t *q = realloc(b->p, need);
            if (!q)
                return fail(why, why_len, "%s: byte %zu: out of memory for a document of "
                            "%" PRIu64 " ids", f->path, off, b->count + n);
            b->p = q;
            b->cap = need;
        }
        memcpy(b->p + b->count * b->width, p, n * b->width);
        b->count += n;
        return 0;
    }
    uint64_t max = b->width == 2 ? 65535 : UINT32_MAX;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v = le(p + i * f->elem, f->elem);
        size_t at = off + (size_t)(i * f->elem);
        if (f->is_signed && v >> (8 * f->elem - 1)) {   /* sign-extended for the message */
            int64_t neg = (int64_t)(v | (f->elem == 8 ? 0 : ~0ull << (8 * f->elem)));
            return fail(why, why_len, "%s: byte %zu: id %" PRId64 " is negative (is this a "
                        "token file?)", f->path, at, neg);
        }
        if (v > max)
            return fail(why, why_len, "%s: byte %zu: id %" PRIu64 " does not fit %s", f->path,
                        at, v, b->width == 2 ? "u16 (give --dtype u32)" : "u32");
        if (token_buf_push(b, (uint32_t)v) < 0)
            return fail(why, why_len, "%s: byte %zu: out of memory", f->path, off);
    }
    return 0;
}

static int next_megatron(token_file *f, token_buf *b, uint64_t *at, char *why, size_t why_len)
{
    if (f->doc >= f->ndocs)
        return 0;
    const uint8_t *bounds = f->idx + MEGATRON_HEADER + f->nseq * 12;
    uint64_t first = le(bounds + f->doc * 8, 8), end = le(bounds + (f->doc + 1) * 8, 8);
    *at = first < f->nseq ? le(f->idx + MEGATRON_HEADER + f->nseq * 4 + first * 8, 8) : 0;
    for (uint64_t i = first; i < end; i++) {
        uint64_t len = le(f->idx + MEGATRON_HEADER + i * 4, 4);
        uint64_t ptr = le(f->idx + MEGATRON_HEADER + f->nseq * 4 + i * 8, 8);
        if (append_ids(f, (size_t)ptr, len, b, why, why_len) < 0)
            return -1;
    }
    f->doc++;
    return 1;
}

/* The number of ids from f->pos up to and with the next `eos` (or the end). */
static uint64_t run_to_eos(const token_file *f, uint64_t eos)
{
    const uint8_t *p = f->data + f->ids_off;
    uint64_t i = f->pos;
    if (eos != UINT64_MAX)
        while (i < f->nids && le(p + i * f->elem, f->elem) != eos)
            i++;
    return (i < f->nids ? i + 1 : f->nids) - f->pos;
}

static int next_array(token_file *f, uint64_t eos, token_buf *b, uint64_t *at, char *why,
                      size_t why_len)
{
    if (f->offs ? f->doc + 1 >= f->noffs : f->pos >= f->nids)
        return 0;
    if (f->offs)
        f->pos = le(f->offs + f->doc * 8, 8);
    uint64_t n = f->offs ? le(f->offs + (f->doc + 1) * 8, 8) - f->pos : run_to_eos(f, eos);
    *at = f->ids_off + f->pos * f->elem;
    if (append_ids(f, (size_t)*at, n, b, why, why_len) < 0)
        return -1;
    f->pos += n;
    f->doc++;
    return 1;
}

int token_file_next(token_file *f, uint64_t eos, token_buf *b, uint64_t *at, char *why,
                    size_t why_len)
{
    if (f->kind == TOKEN_FILE_MEGATRON)
        return next_megatron(f, b, at, why, why_len);
    return next_array(f, eos, b, at, why, why_len);
}

void token_file_close(token_file *f)
{
    if (f->data)
        munmap(f->data, f->data_size);
    if (f->idx)
        munmap(f->idx, f->idx_size);
    if (f->offs_map)
        munmap(f->offs_map, f->offs_size);
    free(f->path);
    free(f->idx_path);
    free(f->offs_path);
    memset(f, 0, sizeof *f);
}
