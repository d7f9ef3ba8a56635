/*
 * npy.h — a strict reader for the header of NumPy .npy files (versions 1-3),
 * enough for `lf-shard create frames` (2-D, C order, little-endian float32,
 * float16 or int16) and for flat token arrays in `create tokens` (1-D,
 * little-endian uint16 or uint32, as nanoGPT and OLMo save them).
 */
#ifndef LF_SHARD_NPY_H
#define LF_SHARD_NPY_H

#include <stddef.h>
#include <stdint.h>

/* What the caller reads the array as: frames, token ids, or document
 * boundaries (1-D, little-endian int64 or uint64). */
typedef enum npy_kind { NPY_FRAMES, NPY_TOKENS, NPY_OFFSETS } npy_kind;

typedef struct npy_array {
    uint32_t type;               /* frames: LF_FIELD_FRAMES_F32, _F16 or _I16;
                                  * tokens: LF_FIELD_TOKENS_U16 or _U32;
                                  * offsets: 0 */
    size_t vsize;                /* bytes per value */
    uint64_t rows;               /* frames; 1-D kinds: the values */
    uint64_t cols;               /* values per frame (>= 1); 1-D kinds: 1 */
    size_t data_offset;          /* first data byte in the file */
    size_t data_size;            /* rows * cols * value size == rest of the file */
} npy_array;

/* Parses buf[0..size), a whole .npy file, as `kind`. Returns 0, or -1 with a
 * reason in why[0..why_len) ("unsupported dtype '>f8'", "header runs past
 * the file"). */
int npy_parse(const uint8_t *buf, size_t size, npy_kind kind, npy_array *out, char *why,
              size_t why_len);

#endif
