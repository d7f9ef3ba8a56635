/*
 * layout.c — builder, encoder and validating decoder of lf_layout.h.
 *
 * The decoder is the trust boundary between the server and a client: the
 * bytes live in shared memory that a buggy or stale writer may have left in
 * any state, so every count, offset and size is checked, and every sum and
 * product is done with overflow checks before it is compared with the slot.
 */
#include "lf_layout.h"

#include <errno.h>
#include <string.h>

static const struct { const char *name; size_t size; } dtypes[] = {
    [LF_DTYPE_U8] = {"u8", 1},   [LF_DTYPE_I8] = {"i8", 1},
    [LF_DTYPE_U16] = {"u16", 2}, [LF_DTYPE_I16] = {"i16", 2},
    [LF_DTYPE_U32] = {"u32", 4}, [LF_DTYPE_I32] = {"i32", 4},
    [LF_DTYPE_U64] = {"u64", 8}, [LF_DTYPE_I64] = {"i64", 8},
    [LF_DTYPE_F16] = {"f16", 2}, [LF_DTYPE_BF16] = {"bf16", 2},
    [LF_DTYPE_F32] = {"f32", 4}, [LF_DTYPE_F64] = {"f64", 8},
};

size_t lf_dtype_size(uint32_t dtype)
{
    return dtype < sizeof dtypes / sizeof dtypes[0] ? dtypes[dtype].size : 0;
}

const char *lf_dtype_name(uint32_t dtype)
{
    return dtype < sizeof dtypes / sizeof dtypes[0] ? dtypes[dtype].name : NULL;
}

void lf_put_int(void *tensor, uint32_t dtype, size_t i, int64_t v)
{
    if (dtype == LF_DTYPE_I32) ((int32_t *)tensor)[i] = (int32_t)v;
    else ((int64_t *)tensor)[i] = v;
}

int64_t lf_get_int(const void *tensor, uint32_t dtype, size_t i)
{
    if (dtype == LF_DTYPE_I32) return ((const int32_t *)tensor)[i];
    return ((const int64_t *)tensor)[i];
}

/* x rounded up to a power-of-two `align`; 0 when that overflows (x > 0). */
static uint64_t align_up(uint64_t x, uint64_t align)
{
    uint64_t r = (x + align - 1) & ~(align - 1);
    return r < x ? 0 : r;
}

static int valid_align(uint32_t align)
{
    return align >= LF_LAYOUT_MIN_ALIGN && (align & (align - 1)) == 0;
}

/* Bytes of a tensor: product of its dims times the element size. */
static int tensor_bytes(uint32_t dtype, uint32_t rank, const uint64_t *shape,
                        uint64_t *out)
{
    uint64_t n = lf_dtype_size(dtype);
    for (uint32_t i = 0; i < rank; i++)
        if (__builtin_mul_overflow(n, shape[i], &n)) return -EOVERFLOW;
    *out = n;
    return 0;
}

int lf_layout_init(lf_layout *l, uint64_t base, uint32_t align)
{
    if (!valid_align(align)) return -EINVAL;
    uint64_t b = align_up(base, align);
    if (base && !b) return -EINVAL;
    memset(l, 0, sizeof *l);
    l->align = align;
    l->base = b;
    l->end = b;
    return 0;
}

const lf_tensor_desc *lf_layout_find(const lf_layout *l, const char *name)
{
    for (uint32_t i = 0; i < l->ntensors && i < LF_LAYOUT_MAX_TENSORS; i++)
        if (strncmp(l->tensors[i].name, name, LF_LAYOUT_NAME_MAX) == 0)
            return &l->tensors[i];
    return NULL;
}

int lf_layout_add(lf_layout *l, const char *name, uint32_t dtype, uint32_t rank,
                  const uint64_t *shape)
{
    size_t len = name ? strnlen(name, LF_LAYOUT_NAME_MAX) : 0;
    if (len == 0 || len >= LF_LAYOUT_NAME_MAX || !lf_dtype_size(dtype) ||
        rank > LF_LAYOUT_MAX_RANK || (rank && !shape) || lf_layout_find(l, name))
        return -EINVAL;
    if (l->ntensors >= LF_LAYOUT_MAX_TENSORS) return -ENOSPC;
    uint64_t size, end;
    if (tensor_bytes(dtype, rank, shape, &size) != 0) return -EOVERFLOW;
    if (__builtin_add_overflow(l->end, size, &end)) return -EOVERFLOW;
    uint64_t end_aligned = align_up(end, l->align);
    if (end && !end_aligned) return -EOVERFLOW;

    lf_tensor_desc *t = &l->tensors[l->ntensors];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, len);
    t->dtype = dtype;
    t->rank = rank;
    for (uint32_t i = 0; i < rank; i++) t->shape[i] = shape[i];
    t->offset = l->end;
    t->size = size;
    l->end = end_aligned;
    return (int)l->ntensors++;
}

size_t lf_layout_encoded_size(uint32_t ntensors)
{
    return LF_LAYOUT_HEADER_SIZE + (size_t)ntensors * LF_LAYOUT_ENTRY_SIZE;
}

/* ---- little-endian field access ---------------------------------------- */

static void put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
static void put32(unsigned char *p, uint32_t v) { put16(p, (uint16_t)v); put16(p + 2, (uint16_t)(v >> 16)); }
static void put64(unsigned char *p, uint64_t v) { put32(p, (uint32_t)v); put32(p + 4, (uint32_t)(v >> 32)); }
static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get32(const unsigned char *p) { return get16(p) | (uint32_t)get16(p + 2) << 16; }
static uint64_t get64(const unsigned char *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

/* Entry field offsets (see the encoding in lf_layout.h). */
enum { E_NAME = 0, E_DTYPE = 32, E_RANK = 34, E_RES8 = 35, E_RES32 = 36,
       E_OFFSET = 40, E_SIZE = 48, E_SHAPE = 56 };

long lf_layout_encode(void *dst, size_t dst_cap, const lf_layout *l)
{
    if (l->ntensors > LF_LAYOUT_MAX_TENSORS || !valid_align(l->align)) return -EINVAL;
    size_t need = lf_layout_encoded_size(l->ntensors);
    if (dst_cap < need) return -ENOBUFS;
    unsigned char *p = dst;
    memset(p, 0, need);
    put32(p, LF_LAYOUT_MAGIC);
    put16(p + 4, LF_LAYOUT_VERSION);
    put16(p + 6, (uint16_t)l->ntensors);
    put32(p + 8, l->align);
    put64(p + 16, l->base);
    put64(p + 24, l->end);
    for (uint32_t i = 0; i < l->ntensors; i++) {
        const lf_tensor_desc *t = &l->tensors[i];
        unsigned char *e = p + lf_layout_encoded_size(i);
        memcpy(e + E_NAME, t->name, strnlen(t->name, LF_LAYOUT_NAME_MAX - 1));
        put16(e + E_DTYPE, (uint16_t)t->dtype);
        e[E_RANK] = (unsigned char)t->rank;
        put64(e + E_OFFSET, t->offset);
        put64(e + E_SIZE, t->size);
        for (uint32_t d = 0; d < LF_LAYOUT_MAX_RANK; d++)
            put64(e + E_SHAPE + 8 * d, t->shape[d]);
    }
    return (long)need;
}

#define REJECT(msg)                                                           \
    do {                                                                      \
        if (why) *why = (msg);                                                \
        return -EBADMSG;                                                      \
    } while (0)

/* Decodes and checks entry i; `prev_end` is where the previous tensor ended. */
static int decode_entry(lf_layout *l, uint32_t i, const unsigned char *e,
                        uint64_t *prev_end, uint64_t slot_size, const char **why)
{
    lf_tensor_desc *t = &l->tensors[i];
    memcpy(t->name, e + E_NAME, LF_LAYOUT_NAME_MAX);
    size_t len = strnlen(t->name, LF_LAYOUT_NAME_MAX);
    if (len == 0 || len == LF_LAYOUT_NAME_MAX) REJECT("tensor name empty or unterminated");
    for (size_t k = len; k < LF_LAYOUT_NAME_MAX; k++)
        if (t->name[k]) REJECT("tensor name padding not zero");
    for (uint32_t j = 0; j < i; j++)
        if (strcmp(l->tensors[j].name, t->name) == 0) REJECT("duplicate tensor name");
    t->dtype = get16(e + E_DTYPE);
    t->rank = e[E_RANK];
    if (!lf_dtype_size(t->dtype)) REJECT("unknown dtype");
    if (t->rank > LF_LAYOUT_MAX_RANK) REJECT("rank too large");
    if (e[E_RES8] || get32(e + E_RES32)) REJECT("reserved entry bytes not zero");
    for (uint32_t d = 0; d < LF_LAYOUT_MAX_RANK; d++) {
        t->shape[d] = get64(e + E_SHAPE + 8 * d);
        if (d >= t->rank && t->shape[d]) REJECT("dimension beyond rank not zero");
    }
    t->offset = get64(e + E_OFFSET);
    t->size = get64(e + E_SIZE);
    uint64_t bytes, end;
    if (tensor_bytes(t->dtype, t->rank, t->shape, &bytes) != 0 || bytes != t->size)
        REJECT("tensor size does not match its shape");
    if (t->offset % l->align) REJECT("tensor offset not aligned");
    if (t->offset < *prev_end) REJECT("tensor overlaps the table or the previous tensor");
    if (__builtin_add_overflow(t->offset, t->size, &end) || end > slot_size)
        REJECT("tensor extends past the slot");
    *prev_end = end;
    return 0;
}

int lf_layout_decode(lf_layout *out, const void *src, size_t src_size,
                     uint64_t slot_size, const char **why)
{
    const unsigned char *p = src;
    if (src_size < LF_LAYOUT_HEADER_SIZE) REJECT("shorter than the layout header");
    if (get32(p) != LF_LAYOUT_MAGIC) REJECT("bad layout magic");
    if (get16(p + 4) != LF_LAYOUT_VERSION) {
        if (why) *why = "unsupported layout version";
        return -EPROTO;
    }
    lf_layout l;
    memset(&l, 0, sizeof l);
    l.ntensors = get16(p + 6);
    l.align = get32(p + 8);
    l.base = get64(p + 16);
    l.end = get64(p + 24);
    if (l.ntensors > LF_LAYOUT_MAX_TENSORS) REJECT("too many tensors");
    if (src_size < lf_layout_encoded_size(l.ntensors)) REJECT("tensor table truncated");
    if (!valid_align(l.align)) REJECT("alignment not a power of two >= 64");
    if (get32(p + 12)) REJECT("reserved header bytes not zero");
    if (l.base % l.align || l.end % l.align) REJECT("base or end not aligned");
    if (l.base > l.end || l.end > slot_size) REJECT("base/end outside the slot");
    uint64_t prev_end = l.base;
    for (uint32_t i = 0; i < l.ntensors; i++) {
        int rc = decode_entry(&l, i, p + lf_layout_encoded_size(i), &prev_end,
                              slot_size, why);
        if (rc) return rc;
    }
    if (prev_end > l.end) REJECT("a tensor ends past the layout end");
    *out = l;
    return 0;
}
