/*
 * lf_layout.h — the batch layout: which tensors a shared-memory slot holds
 * and where. One definition for both sides: the server builds a layout and
 * encodes it into the slot; the client decodes it, with every field checked
 * against the slot size, before it touches a tensor byte.
 *
 * Offsets are bytes from the start of the slot. The builder places tensors
 * one after another from `base` (the first byte after the server's own slot
 * header and the encoded table), each aligned to `align` (a power of two,
 * at least LF_LAYOUT_MIN_ALIGN), so a tensor can be handed to SIMD code or a
 * device copy as is.
 *
 * Encoding (all integers little-endian, LF_LAYOUT_VERSION 1):
 *   header, 32 bytes:
 *     u32 magic "LFLY" (0x594c464c), u16 version, u16 ntensors,
 *     u32 align, u32 reserved (0), u64 base, u64 end
 *   ntensors entries, LF_LAYOUT_ENTRY_SIZE (104) bytes each:
 *     char name[32] (NUL-padded, at least one NUL), u16 dtype, u8 rank,
 *     u8 reserved (0), u32 reserved (0), u64 offset, u64 size,
 *     u64 shape[LF_LAYOUT_MAX_RANK] (unused dimensions 0)
 * The encoded size depends only on the tensor count (lf_layout_encoded_size),
 * so a writer can reserve room for the table before it places tensors.
 *
 * Conventions: functions return 0 (or a byte count / index) on success and a
 * negative errno on failure; out-parameters are untouched on failure. Where a
 * `why` pointer is taken it receives a static string naming the check that
 * failed. Nothing here allocates, prints or aborts.
 */
#ifndef LF_LAYOUT_H
#define LF_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LF_LAYOUT_VERSION 1
#define LF_LAYOUT_MAGIC 0x594c464cu      /* "LFLY" as little-endian bytes */
#define LF_LAYOUT_MIN_ALIGN 64u
#define LF_LAYOUT_MAX_TENSORS 32
#define LF_LAYOUT_MAX_RANK 6
#define LF_LAYOUT_NAME_MAX 32            /* including the terminating NUL */
#define LF_LAYOUT_HEADER_SIZE 32u
#define LF_LAYOUT_ENTRY_SIZE 104u

/* Element types of a tensor. Values are part of the encoding: never renumber. */
typedef enum lf_dtype {
    LF_DTYPE_U8 = 1,
    LF_DTYPE_I8 = 2,
    LF_DTYPE_U16 = 3,
    LF_DTYPE_I16 = 4,
    LF_DTYPE_U32 = 5,
    LF_DTYPE_I32 = 6,
    LF_DTYPE_U64 = 7,
    LF_DTYPE_I64 = 8,
    LF_DTYPE_F16 = 9,            /* IEEE 754 binary16 */
    LF_DTYPE_BF16 = 10,
    LF_DTYPE_F32 = 11,
    LF_DTYPE_F64 = 12,
} lf_dtype;

/* Bytes per element; 0 for an unknown dtype. */
size_t lf_dtype_size(uint32_t dtype);
/* "u8", "f32", ...; NULL for an unknown dtype. */
const char *lf_dtype_name(uint32_t dtype);
/* Element i of an integer tensor of dtype LF_DTYPE_I32 (v truncated) or
 * else LF_DTYPE_I64 = v: lengths, offsets, micro-batch tables. */
void lf_put_int(void *tensor, uint32_t dtype, size_t i, int64_t v);
/* Element i of such a tensor, as lf_put_int wrote it. */
int64_t lf_get_int(const void *tensor, uint32_t dtype, size_t i);

typedef struct lf_tensor_desc {
    char name[LF_LAYOUT_NAME_MAX]; /* NUL-terminated, unique in the layout */
    uint32_t dtype;              /* lf_dtype */
    uint32_t rank;               /* 0..LF_LAYOUT_MAX_RANK (0: a scalar) */
    uint64_t shape[LF_LAYOUT_MAX_RANK]; /* dims beyond rank are 0 */
    uint64_t offset;             /* first byte, from the slot start; aligned */
    uint64_t size;               /* bytes: product(shape) * lf_dtype_size */
} lf_tensor_desc;

typedef struct lf_layout {
    uint32_t ntensors;           /* tensors in use, 0..LF_LAYOUT_MAX_TENSORS */
    uint32_t align;              /* every offset is a multiple of this */
    uint64_t base;               /* no tensor starts before this offset */
    uint64_t end;                /* first byte after the last tensor, aligned */
    lf_tensor_desc tensors[LF_LAYOUT_MAX_TENSORS];
} lf_layout;

/* Starts an empty layout whose first tensor goes at `base` rounded up to
 * `align`. Returns 0, or -EINVAL when align is not a power of two
 * >= LF_LAYOUT_MIN_ALIGN or rounding base overflows. */
int lf_layout_init(lf_layout *l, uint64_t base, uint32_t align);

/* Appends a tensor after the previous one. Returns its index (>= 0), or
 * -EINVAL (bad name/dtype/rank, duplicate name), -ENOSPC (table full),
 * -EOVERFLOW (size or offset does not fit 64 bits). */
int lf_layout_add(lf_layout *l, const char *name, uint32_t dtype, uint32_t rank,
                  const uint64_t *shape);

/* The tensor named `name`, or NULL. */
const lf_tensor_desc *lf_layout_find(const lf_layout *l, const char *name);

/* Bytes the encoding of a layout with `ntensors` tensors takes. */
size_t lf_layout_encoded_size(uint32_t ntensors);

/* Writes the encoding of `l` into dst. Returns the byte count, or -ENOBUFS
 * when dst_cap is too small, -EINVAL for a layout that would not decode. */
long lf_layout_encode(void *dst, size_t dst_cap, const lf_layout *l);

/* Reads an encoding from src (src_size bytes available) and checks it for a
 * slot of slot_size bytes: magic, version, counts, names (NUL-terminated,
 * unique), dtypes, ranks, reserved bytes zero, sizes equal to the shape
 * product, alignment, tensors in order without overlap, base <= every offset,
 * every tensor inside the slot, all without overflow. Returns 0 and fills
 * *out, or -EPROTO (version), -EBADMSG (anything else) with *why set. */
int lf_layout_decode(lf_layout *out, const void *src, size_t src_size,
                     uint64_t slot_size, const char **why);

#ifdef __cplusplus
}
#endif

#endif
