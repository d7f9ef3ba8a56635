/*
 * npy.c — the .npy header parser.
 *
 * The layout: "\x93NUMPY", major and minor version bytes, the header length
 * (u16 LE in version 1, u32 LE in 2 and 3), then the header: a Python dict
 * literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (120, 80), }
 * padded with spaces and a newline. The data follows. Nothing in the file is
 * trusted: every read is checked against the header's end and the file size,
 * unknown keys and types are refused rather than guessed at.
 */
#include "npy.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lf_shard.h"

/* numpy refuses longer headers by default too (max_header_size); a frame
 * array's header needs about a hundred bytes. */
#define NPY_MAX_HEADER 10000

typedef struct cursor {
    const char *base, *p, *end;  /* header text: start, position, end */
    char *why;
    size_t why_len;
} cursor;

static int fail(cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(cursor *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, c->why_len, fmt, ap);
    va_end(ap);
    return -1;
}

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* Consumes `ch` after optional spaces; 0 if it was there. */
static int expect(cursor *c, char ch)
{
    skip_space(c);
    if (c->p >= c->end || *c->p != ch)
        return fail(c, "header: expected '%c' at offset %td", ch, c->p - c->base);
    c->p++;
    return 0;
}

/* A quoted string ('...' or "...", no escapes) into out[0..cap). */
static int parse_string(cursor *c, char *out, size_t cap)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return fail(c, "header: expected a quoted string");
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= cap)
            return fail(c, "header: string too long or escaped");
        if (*c->p < 0x20 || *c->p > 0x7e)   /* keeps messages printable, too */
            return fail(c, "header: control or non-ASCII byte in a string");
        out[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return fail(c, "header: unterminated string");
    c->p++;
    out[n] = '\0';
    return 0;
}

static int parse_bool(cursor *c, int *out)
{
    skip_space(c);
    size_t left = (size_t)(c->end - c->p);
    if (left >= 4 && !memcmp(c->p, "True", 4)) {
        *out = 1;
        c->p += 4;
        return 0;
    }
    if (left >= 5 && !memcmp(c->p, "False", 5)) {
        *out = 0;
        c->p += 5;
        return 0;
    }
    return fail(c, "header: fortran_order is not True or False");
}

/* A tuple of non-negative integers: (), (n,), (n, m), ... up to `max` dims. */
static int parse_shape(cursor *c, uint64_t *dims, int max, int *ndims)
{
    if (expect(c, '(') < 0)
        return -1;
    *ndims = 0;
    for (;;) {
        skip_space(c);
        if (c->p < c->end && *c->p == ')') {
            c->p++;
            return 0;
        }
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return fail(c, "header: shape is not a tuple of integers");
        uint64_t v = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (v > (UINT64_MAX - 9) / 10)
                return fail(c, "header: shape value too large");
            v = v * 10 + (uint64_t)(*c->p++ - '0');
        }
        if (c->p < c->end && *c->p == 'L')   /* written by Python 2 */
            c->p++;
        if (*ndims == max)
            return fail(c, "header: shape has more than %d dimensions", max);
        dims[(*ndims)++] = v;
        skip_space(c);
        if (c->p < c->end && *c->p == ',')
            c->p++;
        else if (c->p >= c->end || *c->p != ')')
            return fail(c, "header: expected ',' or ')' in shape");
    }
}

static int descr_type(cursor *c, npy_kind kind, const char *descr, uint32_t *type,
                      size_t *vsize)
{
    static const struct {
        npy_kind kind;
        const char *descr;
        uint32_t type;
        size_t size;
    } known[] = {
        {NPY_FRAMES, "<f4", LF_FIELD_FRAMES_F32, 4},
        {NPY_FRAMES, "<f2", LF_FIELD_FRAMES_F16, 2},
        {NPY_FRAMES, "<i2", LF_FIELD_FRAMES_I16, 2},
        {NPY_TOKENS, "<u2", LF_FIELD_TOKENS_U16, 2},
        {NPY_TOKENS, "<u4", LF_FIELD_TOKENS_U32, 4},
        {NPY_OFFSETS, "<i8", 0, 8},
        {NPY_OFFSETS, "<u8", 0, 8},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].kind == kind && !strcmp(descr, known[i].descr)) {
            *type = known[i].type;
            *vsize = known[i].size;
            return 0;
        }
    if (kind == NPY_TOKENS)
        return fail(c, "unsupported dtype '%s' (token ids are little-endian u2 or u4: "
                    "'<u2', '<u4')", descr);
    if (kind == NPY_OFFSETS)
        return fail(c, "unsupported dtype '%s' (document offsets are little-endian i8 or "
                    "u8: '<i8', '<u8')", descr);
    return fail(c, "unsupported dtype '%s' (expected little-endian f4, f2 or i2: "
                "'<f4', '<f2', '<i2')", descr);
}

/* The shape `kind` needs: frames (rows, values), the others (values,). */
static int check_shape(cursor *c, npy_kind kind, const uint64_t *dims, int ndims,
                       npy_array *out)
{
    if (kind != NPY_FRAMES) {
        if (ndims != 1)
            return fail(c, "shape has %d dimensions; %s needs 1", ndims,
                        kind == NPY_TOKENS ? "a token array" : "an offsets array");
        out->rows = dims[0];
        out->cols = 1;
        return 0;
    }
    if (ndims != 2)
        return fail(c, "shape has %d dimensions; frames need 2 (frames, values)", ndims);
    if (dims[1] == 0)
        return fail(c, "shape (%llu, 0): a frame needs at least one value",
                    (unsigned long long)dims[0]);
    out->rows = dims[0];
    out->cols = dims[1];
    return 0;
}

static int parse_dict(cursor *c, npy_kind kind, npy_array *out)
{
    char key[32], descr[32];
    int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0, ndims = 0;
    uint64_t dims[8];
    if (expect(c, '{') < 0)
        return -1;
    for (;;) {
        skip_space(c);
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            break;
        }
        if (parse_string(c, key, sizeof key) < 0 || expect(c, ':') < 0)
            return -1;
        if (!strcmp(key, "descr")) {
            if (parse_string(c, descr, sizeof descr) < 0)
                return -1;
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            if (parse_bool(c, &fortran) < 0)
                return -1;
            have_order = 1;
        } else if (!strcmp(key, "shape")) {
            if (parse_shape(c, dims, 8, &ndims) < 0)
                return -1;
            have_shape = 1;
        } else {
            return fail(c, "header: unknown key '%s'", key);
        }
        skip_space(c);
        if (c->p < c->end && *c->p == ',')
            c->p++;
    }
    skip_space(c);
    if (c->p != c->end)
        return fail(c, "header: unexpected text after the dictionary");
    if (!have_descr || !have_order || !have_shape)
        return fail(c, "header: missing %s", !have_descr ? "'descr'"
                    : !have_order ? "'fortran_order'" : "'shape'");
    if (descr_type(c, kind, descr, &out->type, &out->vsize) < 0)
        return -1;
    if (fortran)
        return fail(c, "Fortran-order arrays are not supported (save with C order)");
    return check_shape(c, kind, dims, ndims, out);
}

int npy_parse(const uint8_t *buf, size_t size, npy_kind kind, npy_array *out, char *why,
              size_t why_len)
{
    cursor c = {.why = why, .why_len = why_len};
    if (size < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return fail(&c, "not a .npy file (bad magic)");
    uint8_t major = buf[6];
    size_t start, hlen;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        start = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12)
            return fail(&c, "file ends inside the header length");
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
               (size_t)buf[11] << 24;
        start = 12;
    } else {
        return fail(&c, "unsupported .npy version %u.%u", major, buf[7]);
    }
    if (hlen > size - start)
        return fail(&c, "header (%zu bytes) runs past the end of the file", hlen);
    if (hlen > NPY_MAX_HEADER)
        return fail(&c, "header of %zu bytes is longer than %d", hlen, NPY_MAX_HEADER);
    npy_array a;
    c.base = c.p = (const char *)buf + start;
    c.end = c.p + hlen;
    if (parse_dict(&c, kind, &a) < 0)
        return -1;
    a.data_offset = start + hlen;
    size_t left = size - a.data_offset, vsize = a.vsize;
    if (a.rows > left / vsize / a.cols)   /* also keeps the product below from overflowing */
        return fail(&c, "file ends inside the data: %zu bytes for shape (%llu, %llu)", left,
                    (unsigned long long)a.rows, (unsigned long long)a.cols);
    if (a.rows * a.cols * vsize != left)
        return fail(&c, "%zu bytes after the data of shape (%llu, %llu)",
                    left - (size_t)(a.rows * a.cols * vsize), (unsigned long long)a.rows,
                    (unsigned long long)a.cols);
    a.data_size = left;
    *out = a;
    return 0;
}
