/*
 * frames.c — frame arrays (rows of a fixed width) batched by padding to the
 * batch maximum or by packing back to back with offsets. Values are copied
 * as stored (little-endian, the host order on every target we build for).
 */
#include "lf_tf.h"
#include "tf_internal.h"

#include <string.h>

/* Bytes of one frame row; 0 for a dtype frames cannot have or an overflow. */
static size_t row_bytes(uint32_t dtype, uint32_t width)
{
    if (dtype != LF_DTYPE_F16 && dtype != LF_DTYPE_F32 && dtype != LF_DTYPE_I16) return 0;
    return (size_t)width * lf_dtype_size(dtype);
}

static int check_items(const lf_tf_frames *items, uint32_t n, uint32_t max_frames)
{
    if (n && !items) return LF_TF_E_ARG;
    for (uint32_t i = 0; i < n; i++)
        if (items[i].nframes > max_frames || (items[i].nframes && !items[i].data))
            return LF_TF_E_ARG;
    return 0;
}

int lf_tf_frames_pad(void *dst, size_t dst_cap, int64_t *lengths, size_t lengths_cap,
                     uint32_t dtype, uint32_t width, uint32_t max_frames,
                     const lf_tf_frames *items, uint32_t n)
{
    size_t row = row_bytes(dtype, width);
    if (!row || check_items(items, n, max_frames)) return LF_TF_E_ARG;
    uint64_t cells = (uint64_t)n * max_frames;
    if (!dst || !tf_fits(dst_cap, cells, row) || (lengths && !tf_fits(lengths_cap, n, sizeof *lengths)))
        return LF_TF_E_BUFFER;
    unsigned char *o = dst;
    size_t slot = (size_t)max_frames * row;
    for (uint32_t i = 0; i < n; i++) {
        size_t used = (size_t)items[i].nframes * row;
        if (used) memcpy(o + i * slot, items[i].data, used);
        memset(o + i * slot + used, 0, slot - used);
        if (lengths) lengths[i] = items[i].nframes;
    }
    return 0;
}

long lf_tf_frames_pack(void *dst, size_t dst_cap, int64_t *offsets, size_t offsets_cap,
                       uint32_t dtype, uint32_t width,
                       const lf_tf_frames *items, uint32_t n)
{
    size_t row = row_bytes(dtype, width);
    if (!row || check_items(items, n, UINT32_MAX)) return LF_TF_E_ARG;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += items[i].nframes;
    if ((total && !dst) || !tf_fits(dst_cap, total, row) ||
        (offsets && !tf_fits(offsets_cap, (uint64_t)n + 1, sizeof *offsets)))
        return LF_TF_E_BUFFER;
    unsigned char *o = dst;
    uint64_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (offsets) offsets[i] = (int64_t)at;
        if (items[i].nframes) memcpy(o + at * row, items[i].data, (size_t)items[i].nframes * row);
        at += items[i].nframes;
    }
    if (offsets) offsets[n] = (int64_t)at;
    return (long)total;
}
