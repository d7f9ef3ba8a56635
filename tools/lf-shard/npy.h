/*
 * npy.h — a strict reader for the header of NumPy .npy files (versions 1-3),
 * enough for `lf-shard create frames`: 2-D, C order, little-endian
 * float32, float16 or int16.
 */
#ifndef LF_SHARD_NPY_H
#define LF_SHARD_NPY_H

#include <stddef.h>
#include <stdint.h>

typedef struct npy_array {
    uint32_t type;               /* LF_FIELD_FRAMES_F32, _F16 or _I16 */
    uint64_t rows;               /* frames */
    uint64_t cols;               /* values per frame (>= 1) */
    size_t data_offset;          /* first data byte in the file */
    size_t data_size;            /* rows * cols * value size == rest of the file */
} npy_array;

/* Parses buf[0..size), a whole .npy file. Returns 0, or -1 with a reason in
 * why[0..why_len) ("unsupported dtype '>f8'", "header runs past the file"). */
int npy_parse(const uint8_t *buf, size_t size, npy_array *out, char *why, size_t why_len);

#endif
