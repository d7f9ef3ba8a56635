/*
 * lf_tf.h — per-sample transforms: JPEG decode + augmentation, token
 * padding/packing, frame batches. Every function writes into buffers the
 * caller supplies (dst, dst_cap, src, src_size) and keeps its scratch memory
 * in a per-thread workspace sized once from limits, so the hot path makes no
 * allocation of its own (libjpeg's per-image pool is the one exception: it is
 * bounded by lf_tf_limits.max_memory).
 *
 * Conventions: functions return >= 0 on success (a byte or element count
 * where that is useful) and a negative lf_tf_status on failure; nothing
 * here prints, exits or aborts. When a JPEG is rejected, lf_tf_reason(ws)
 * says why (e.g. "65500x65500 = 4290250000 pixels > limit 50000000"); the
 * caller adds the sample id. A workspace belongs to one thread at a time;
 * everything else is reentrant. Randomness comes only from
 * (seed, epoch, sample id) through a counter-based hash, so the same sample
 * gets the same crop on any machine and with any thread count.
 */
#ifndef LF_TF_H
#define LF_TF_H

#include <stddef.h>
#include <stdint.h>

#include "lf_layout.h"   /* lf_dtype */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lf_tf_status {
    LF_TF_OK = 0,
    LF_TF_E_ARG = -1,            /* an invalid parameter or input layout */
    LF_TF_E_BUFFER = -2,         /* a dst buffer is too small */
    LF_TF_E_NOMEM = -3,          /* workspace or coefficient buffer allocation failed */
    LF_TF_E_LIMIT = -4,          /* the image exceeds a limit (pixels, scans, memory, region) */
    LF_TF_E_CORRUPT = -5,        /* the decoder reported an error or a warning */
    LF_TF_E_UNSUPPORTED = -6,    /* a valid JPEG we do not handle (e.g. 2-channel) */
} lf_tf_status;

/* A short static description of a status code. */
const char *lf_tf_strerror(int status);

/* ---- workspace ----------------------------------------------------------- */

typedef struct lf_tf_limits {
    uint64_t max_pixels;         /* width*height from the header; default 50e6 */
    uint32_t max_scans;          /* scans of a multi-scan file; default 64 (common
                                  * progressive files have about 10) */
    uint64_t max_memory;         /* libjpeg's max_memory_to_use, bytes; default 256 MiB */
    uint32_t max_out_side;       /* largest out_w / out_h; default 1024 */
    uint64_t max_region_pixels;  /* largest decoded crop region (after DCT
                                  * scaling); default max(4 Mi, max_pixels/32) */
} lf_tf_limits;

/* Fills the defaults above. */
void lf_tf_limits_default(lf_tf_limits *lim);

typedef struct lf_tf_ws lf_tf_ws;

/* Creates a workspace (lim NULL: defaults). Returns 0 and sets *out, or
 * LF_TF_E_ARG / LF_TF_E_NOMEM. Scratch pages are touched only as used. */
int lf_tf_ws_create(const lf_tf_limits *lim, lf_tf_ws **out);
void lf_tf_ws_free(lf_tf_ws *ws);                      /* accepts NULL */

/* Why the last call on this workspace failed ("" after a success). */
const char *lf_tf_reason(const lf_tf_ws *ws);

/* Bytes the workspace holds for whole-image coefficient buffers (multi-scan
 * and progressive files): the largest such image decoded so far, kept for
 * the next one; never more than max_memory. */
size_t lf_tf_ws_decode_memory(const lf_tf_ws *ws);

/* Bytes of those buffers the next decodes may take (0, or over max_memory:
 * max_memory, the default). A progressive file whose whole-image buffers
 * (lf_tf_jpeg_decode_need) exceed it is decoded in strips of iMCU rows,
 * as many as fit (lf_tf_jpeg_strip_need): its scans run again for each
 * strip, and the pixels are the same as decoded whole. One whose strips of
 * a single iMCU row do not fit fails with LF_TF_E_LIMIT, as does a
 * multi-scan file that is not progressive Huffman-coded (sequential with
 * several scans, or arithmetic) whose whole buffers do not fit. Buffers
 * already held above it stay held. */
void lf_tf_ws_set_decode_budget(lf_tf_ws *ws, uint64_t bytes);

/* Frees those buffers (lf_tf_ws_decode_memory becomes 0) and gives the
 * pages of the decoded crop region back to the kernel: for a caller that
 * keeps small ones and lends the memory of large ones out (lf-server). */
void lf_tf_ws_trim(lf_tf_ws *ws);

/* ---- JPEG ---------------------------------------------------------------- */

typedef struct lf_tf_jpeg_info {
    uint32_t width, height;      /* as declared in the frame header */
    uint32_t components;         /* 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK */
    uint32_t progressive;        /* 1 for a progressive (multi-scan) file */
} lf_tf_jpeg_info;

/* Bytes of coefficient buffers that decoding this JPEG takes in the
 * workspace (lf_tf_ws_decode_memory afterwards, at least): 0 for a
 * single-scan file, which decodes row by row; about 2 bytes per sample of
 * each component for a progressive one, whatever the crop or DCT scale.
 * Reads the header only. Returns >= 0, or < 0 as lf_tf_jpeg_info_get. */
long lf_tf_jpeg_decode_need(lf_tf_ws *ws, const void *src, size_t src_size);

/* The same in strips of `rows` iMCU rows (0: whole; see
 * lf_tf_ws_set_decode_budget): the least a progressive file can be decoded
 * in is lf_tf_jpeg_strip_need(ws, src, size, 1). A multi-scan file that
 * cannot go in strips (sequential with several scans, or arithmetic-coded)
 * needs its whole buffers whatever `rows`. */
long lf_tf_jpeg_strip_need(lf_tf_ws *ws, const void *src, size_t src_size, uint32_t rows);

/* Reads the header only (plus the limit checks). Returns 0 or < 0. */
int lf_tf_jpeg_info_get(lf_tf_ws *ws, const void *src, size_t src_size,
                        lf_tf_jpeg_info *info);

/* Decodes the whole image at full size into dst as u8 RGB, HWC (width*height*3
 * bytes). Returns the byte count or < 0. */
long lf_tf_jpeg_decode(lf_tf_ws *ws, void *dst, size_t dst_cap,
                       const void *src, size_t src_size, lf_tf_jpeg_info *info);

typedef enum lf_tf_crop {
    LF_TF_CROP_FULL = 0,         /* the whole image, stretched to out_w x out_h */
    LF_TF_CROP_CENTER = 1,       /* centered box, side = center_frac * shorter side */
    LF_TF_CROP_RANDOM_RESIZED = 2, /* torchvision RandomResizedCrop */
} lf_tf_crop;

typedef enum lf_tf_resize {
    LF_TF_RESIZE_BILINEAR = 0,   /* triangle filter, widened when shrinking (PIL's BILINEAR) */
    LF_TF_RESIZE_AREA = 1,       /* the mean of the covered area, partly covered pixels
                                    weighted by their part (PIL's BOX takes whole pixels
                                    by their centres: the same at whole shrink factors) */
} lf_tf_resize;

typedef struct lf_tf_image_params {
    uint32_t out_w, out_h;       /* output size, 1..max_out_side */
    uint32_t crop;               /* lf_tf_crop */
    double scale_min, scale_max; /* random-resized: area fraction range (0.08, 1) */
    double ratio_min, ratio_max; /* random-resized: w/h range (3/4, 4/3) */
    double center_frac;          /* center crop: box side / shorter side (0.875) */
    double flip_prob;            /* horizontal flip probability (0.5; 0 for eval) */
    uint32_t resize;             /* lf_tf_resize */
    uint32_t out_dtype;          /* LF_DTYPE_U8: RGB HWC, no normalization;
                                  * LF_DTYPE_F16 / F32: CHW, (x/255 - mean)/std */
    float mean[3], std[3];       /* per channel R, G, B, in [0,1] units */
    uint64_t seed;               /* run seed; mixed with epoch and sample id */
} lf_tf_image_params;

/* Training defaults: random-resized crop to out_w x out_h, torchvision's
 * scale/ratio, flip 0.5, bilinear, f32 CHW with ImageNet mean/std. */
void lf_tf_image_params_default(lf_tf_image_params *p, uint32_t out_w, uint32_t out_h);

/* Where to crop in source pixel coordinates, and whether to flip. */
typedef struct lf_tf_box {
    double x, y, w, h;           /* may be fractional (center crop) */
    int flip;                    /* 1: mirror left-right */
} lf_tf_box;

/* The crop box and flip for one sample of an image of width x height: a pure
 * function of (p, width, height, epoch, sample_id). Returns 0 or LF_TF_E_ARG. */
int lf_tf_image_plan(const lf_tf_image_params *p, uint32_t width, uint32_t height,
                     uint64_t epoch, uint64_t sample_id, lf_tf_box *box);

/* Bytes of one output image for p (out_w*out_h*3*element size). */
size_t lf_tf_image_out_size(const lf_tf_image_params *p);

/* Decodes the region of src that `box` needs, at the smallest DCT scale
 * (1/8..8/8) whose scaled box still covers out_w x out_h, resizes it to
 * out_w x out_h, flips it if box->flip, and writes p->out_dtype into dst.
 * Returns the byte count (lf_tf_image_out_size) or < 0. */
long lf_tf_jpeg_crop_resize(lf_tf_ws *ws, void *dst, size_t dst_cap,
                            const void *src, size_t src_size,
                            const lf_tf_image_params *p, const lf_tf_box *box);

/* lf_tf_image_plan + lf_tf_jpeg_crop_resize: the per-sample augmentation.
 * info (may be NULL) receives the header fields. Returns bytes or < 0. */
long lf_tf_jpeg_augment(lf_tf_ws *ws, void *dst, size_t dst_cap,
                        const void *src, size_t src_size,
                        const lf_tf_image_params *p, uint64_t epoch,
                        uint64_t sample_id, lf_tf_jpeg_info *info);

/* ---- tokens -------------------------------------------------------------- */

/* One sample's tokens as stored (little-endian, any alignment). */
typedef struct lf_tf_seq {
    const void *tokens;          /* count values of `dtype` */
    uint32_t count;
    uint32_t dtype;              /* LF_DTYPE_U16 or LF_DTYPE_U32 */
    uint32_t row;                /* pack: the row it goes to (nondecreasing) */
    uint32_t first_pos;          /* pack: its first token's position: 0, or a
                                    piece's offset in its sample (positions
                                    continue across the cut) */
} lf_tf_seq;

/* Output buffers; a buffer a layout does not use may be NULL (with cap 0).
 * Tokens use `dtype`: LF_DTYPE_I32 or I64, the types an embedding lookup
 * takes, or LF_DTYPE_U16 or U32, the stored widths, copied as they are (u16
 * halves the bytes written, shared and sent to the GPU against i32; the
 * trainer widens on the device). Lengths, positions and cu_seqlens use
 * lf_tf_index_dtype(dtype). */
typedef struct lf_tf_tokens_out {
    uint32_t dtype;              /* LF_DTYPE_I32, I64, U16 or U32 */
    void *tokens; size_t tokens_cap;        /* pad: n x max_len; pack: rows x seq_len */
    void *lengths; size_t lengths_cap;      /* pad: n lengths (optional) */
    uint8_t *mask; size_t mask_cap;         /* pad: n x max_len, 1 = token (optional) */
    void *positions; size_t positions_cap;  /* pack: rows x seq_len (optional) */
    void *cu_seqlens; size_t cu_seqlens_cap;/* pack: n + rows + 1 entries */
} lf_tf_tokens_out;

/* The dtype of a token batch's lengths, positions and cu_seqlens: I64 for
 * I64 tokens, else I32 (counts and offsets need more than u16). */
uint32_t lf_tf_index_dtype(uint32_t token_dtype);

/* The largest token (or pad id) a token tensor of `dtype` holds; 0 for a
 * dtype the token layouts do not write. */
int64_t lf_tf_token_max(uint32_t dtype);

/* Pad layout: row i holds seqs[i], then pad_id up to max_len. A sequence
 * longer than max_len is an error (never silently cut). Returns 0 or < 0. */
int lf_tf_tokens_pad(const lf_tf_tokens_out *out, uint32_t max_len, int64_t pad_id,
                     const lf_tf_seq *seqs, uint32_t n);

/* Pack layout: rows x seq_len; each row holds its sequences (seqs[i].row,
 * nondecreasing) back to back, then pad_id. positions count from each
 * sequence's first_pos (0 for a whole sample; pads get 0). cu_seqlens are the segment boundaries of the
 * flattened rows*seq_len stream, each row's padding being a segment of its
 * own, so no real token shares a segment with a pad: it starts at 0 and ends
 * at rows*seq_len; unused trailing entries repeat rows*seq_len. Returns the
 * number of meaningful cu_seqlens entries (segments + 1) or < 0. */
long lf_tf_tokens_pack(const lf_tf_tokens_out *out, uint32_t rows, uint32_t seq_len,
                       int64_t pad_id, const lf_tf_seq *seqs, uint32_t n);

/* ---- frames -------------------------------------------------------------- */

/* One sample's frames: nframes rows of `width` values (dtype given per call,
 * LF_DTYPE_F16, F32 or I16, stored little-endian, any alignment). */
typedef struct lf_tf_frames {
    const void *data;
    uint32_t nframes;
} lf_tf_frames;

/* Pad: dst is n x max_frames x width values, zero after each sample's frames;
 * lengths (optional, n int64) gets each nframes. Returns 0 or < 0. */
int lf_tf_frames_pad(void *dst, size_t dst_cap, int64_t *lengths, size_t lengths_cap,
                     uint32_t dtype, uint32_t width, uint32_t max_frames,
                     const lf_tf_frames *items, uint32_t n);

/* Pack: dst holds all frames back to back (total x width values); offsets
 * (n + 1 int64) gets each sample's first frame and the total. Returns the
 * total frame count or < 0. */
long lf_tf_frames_pack(void *dst, size_t dst_cap, int64_t *offsets, size_t offsets_cap,
                       uint32_t dtype, uint32_t width,
                       const lf_tf_frames *items, uint32_t n);

#ifdef __cplusplus
}
#endif

#endif
