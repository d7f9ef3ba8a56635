/*
 * tokens.c — token batches in the pad and pack layouts.
 *
 * Inputs come straight from shard records: little-endian u16/u32 arrays at
 * any alignment, read with memcpy. Every input is checked before the first
 * byte is written, so a rejected call leaves the outputs as they were (no
 * half-written batch that looks valid).
 */
#include "lf_tf.h"
#include "tf_internal.h"

#include <string.h>

static int64_t load_token(const lf_tf_seq *s, uint32_t i)
{
    const unsigned char *p = s->tokens;
    if (s->dtype == LF_DTYPE_U16) {
        uint16_t v;
        memcpy(&v, p + 2 * (size_t)i, 2);
        return v;
    }
    uint32_t v;
    memcpy(&v, p + 4 * (size_t)i, 4);
    return v;
}

uint32_t lf_tf_index_dtype(uint32_t token_dtype)
{
    return token_dtype == LF_DTYPE_I64 ? LF_DTYPE_I64 : LF_DTYPE_I32;
}

int64_t lf_tf_token_max(uint32_t dtype)
{
    switch (dtype) {
    case LF_DTYPE_U16: return UINT16_MAX;
    case LF_DTYPE_I32: return INT32_MAX;
    case LF_DTYPE_U32: return UINT32_MAX;
    case LF_DTYPE_I64: return INT64_MAX;
    default: return 0;
    }
}

static int check_out(const lf_tf_tokens_out *out, int64_t pad_id)
{
    int64_t most = lf_tf_token_max(out->dtype);
    int64_t least = out->dtype == LF_DTYPE_I32 ? INT32_MIN
                    : out->dtype == LF_DTYPE_I64 ? INT64_MIN : 0;
    return most && pad_id >= least && pad_id <= most ? 0 : LF_TF_E_ARG;
}

/* Every token must survive the output type: a u32 token above INT32_MAX
 * would not fit i32, one above UINT16_MAX not u16. */
static int check_seq(const lf_tf_seq *s, uint32_t out_dtype)
{
    if (s->dtype != LF_DTYPE_U16 && s->dtype != LF_DTYPE_U32) return LF_TF_E_ARG;
    if (s->count && !s->tokens) return LF_TF_E_ARG;
    int64_t most = lf_tf_token_max(out_dtype);
    if (s->dtype == LF_DTYPE_U32 && most < UINT32_MAX)
        for (uint32_t i = 0; i < s->count; i++)
            if (load_token(s, i) > most) return LF_TF_E_ARG;
    return 0;
}

/* The loops below are the token path's hot spot in the server (every token
 * and every padding cell of a batch passes through them), so each is one
 * tight loop per type, which the compiler vectorizes, instead of a type
 * branch per element. The count is read once into a local: an int32 store
 * may alias the uint32 s->count, and re-reading it every iteration kept the
 * u16 -> i32 loop (the default) scalar. */
#define WIDEN(IN, OUT)                                                    \
    do {                                                                  \
        OUT *d = (OUT *)dst + at;                                         \
        const uint32_t count = s->count;                                  \
        for (uint32_t i = 0; i < count; i++) {                            \
            IN v;                                                         \
            memcpy(&v, src + sizeof v * (size_t)i, sizeof v);             \
            d[i] = (OUT)v;                                                \
        }                                                                 \
    } while (0)

/* Copies seq's tokens to dst[at...]: as they are when the output keeps the
 * stored type, else widened (or narrowed, values checked) element by
 * element. I32 and U32 take the same bits for every token check_seq lets
 * through, so one 4-byte loop serves both. */
static void copy_tokens(void *dst, uint32_t dtype, size_t at, const lf_tf_seq *s)
{
    const unsigned char *src = s->tokens;
    if (dtype == s->dtype) {
        size_t es = lf_dtype_size(dtype);
        memcpy((unsigned char *)dst + at * es, src, (size_t)s->count * es);
    } else if (s->dtype == LF_DTYPE_U16) {
        if (dtype == LF_DTYPE_I64) WIDEN(uint16_t, int64_t);
        else WIDEN(uint16_t, uint32_t);
    } else {
        if (dtype == LF_DTYPE_I64) WIDEN(uint32_t, int64_t);
        else if (dtype == LF_DTYPE_U16) WIDEN(uint32_t, uint16_t);
        else WIDEN(uint32_t, uint32_t);
    }
}

#define FILL(OUT, VALUE)                                                  \
    do {                                                                  \
        OUT *d = (OUT *)dst + at;                                         \
        for (size_t i = 0; i < n; i++) d[i] = (OUT)(VALUE);               \
    } while (0)

/* dst[at + i] = v for i < n, in elements of the dtype's width (the bits of
 * v in that width, which is v itself for every value check_out allows). */
static void fill(void *dst, uint32_t dtype, size_t at, size_t n, int64_t v)
{
    switch (lf_dtype_size(dtype)) {
    case 2: FILL(uint16_t, v); break;
    case 4: FILL(uint32_t, v); break;
    default: FILL(int64_t, v);
    }
}

/* dst[at + i] = first + i for i < n: pack's position ids (an index dtype),
 * counting on from a piece's place in its sample. */
static void count_up(void *dst, uint32_t dtype, size_t at, size_t n, uint64_t first)
{
    if (dtype == LF_DTYPE_I32) FILL(int32_t, first + i);
    else FILL(int64_t, first + i);
}

int lf_tf_tokens_pad(const lf_tf_tokens_out *out, uint32_t max_len, int64_t pad_id,
                     const lf_tf_seq *seqs, uint32_t n)
{
    if (check_out(out, pad_id) || (n && !seqs)) return LF_TF_E_ARG;
    uint32_t idx = lf_tf_index_dtype(out->dtype);
    size_t es = lf_dtype_size(out->dtype), is = lf_dtype_size(idx);
    uint64_t cells = (uint64_t)n * max_len;
    if (idx == LF_DTYPE_I32 && max_len > INT32_MAX) return LF_TF_E_ARG; /* lengths in i32 */
    if (!out->tokens || !tf_fits(out->tokens_cap, cells, es) ||
        (out->lengths && !tf_fits(out->lengths_cap, n, is)) ||
        (out->mask && !tf_fits(out->mask_cap, cells, 1)))
        return LF_TF_E_BUFFER;
    for (uint32_t i = 0; i < n; i++) {
        if (seqs[i].count > max_len) return LF_TF_E_ARG;
        int rc = check_seq(&seqs[i], out->dtype);
        if (rc) return rc;
    }
    for (uint32_t i = 0; i < n; i++) {
        size_t row = (size_t)i * max_len;
        copy_tokens(out->tokens, out->dtype, row, &seqs[i]);
        fill(out->tokens, out->dtype, row + seqs[i].count, max_len - seqs[i].count, pad_id);
        if (out->lengths) lf_put_int(out->lengths, idx, i, seqs[i].count);
        if (out->mask) {
            memset(out->mask + row, 1, seqs[i].count);
            memset(out->mask + row + seqs[i].count, 0, max_len - seqs[i].count);
        }
    }
    return 0;
}

/* Rows nondecreasing and in range, each row's tokens within seq_len. */
static int check_pack_rows(uint32_t rows, uint32_t seq_len, const lf_tf_seq *seqs, uint32_t n)
{
    uint64_t used = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (seqs[i].row >= rows || (i && seqs[i].row < seqs[i - 1].row)) return LF_TF_E_ARG;
        if (i && seqs[i].row != seqs[i - 1].row) used = 0;
        used += seqs[i].count;
        if (used > seq_len) return LF_TF_E_ARG;
    }
    return 0;
}

long lf_tf_tokens_pack(const lf_tf_tokens_out *out, uint32_t rows, uint32_t seq_len,
                       int64_t pad_id, const lf_tf_seq *seqs, uint32_t n)
{
    if (check_out(out, pad_id) || (n && !seqs)) return LF_TF_E_ARG;
    uint32_t idx = lf_tf_index_dtype(out->dtype);
    size_t es = lf_dtype_size(out->dtype), is = lf_dtype_size(idx);
    uint64_t cells = (uint64_t)rows * seq_len, ncu = (uint64_t)n + rows + 1;
    if (idx == LF_DTYPE_I32 && cells > INT32_MAX) return LF_TF_E_ARG; /* cu_seqlens in i32 */
    if (!out->tokens || !tf_fits(out->tokens_cap, cells, es) ||
        (out->positions && !tf_fits(out->positions_cap, cells, is)) ||
        (out->cu_seqlens && !tf_fits(out->cu_seqlens_cap, ncu, is)))
        return LF_TF_E_BUFFER;
    int rc = check_pack_rows(rows, seq_len, seqs, n);
    for (uint32_t i = 0; i < n && !rc; i++) {
        rc = check_seq(&seqs[i], out->dtype);
        if (idx == LF_DTYPE_I32 && (uint64_t)seqs[i].first_pos + seqs[i].count > INT32_MAX)
            rc = LF_TF_E_ARG; /* its positions would not fit i32 */
    }
    if (rc) return rc;

    uint32_t i = 0;
    size_t segs = 0;
    if (out->cu_seqlens) lf_put_int(out->cu_seqlens, idx, segs, 0);
    for (uint32_t r = 0; r < rows; r++) {
        size_t at = (size_t)r * seq_len, row_end = at + seq_len;
        for (; i < n && seqs[i].row == r; i++) {
            if (!seqs[i].count) continue;
            copy_tokens(out->tokens, out->dtype, at, &seqs[i]);
            if (out->positions)
                count_up(out->positions, idx, at, seqs[i].count, seqs[i].first_pos);
            at += seqs[i].count;
            if (out->cu_seqlens) lf_put_int(out->cu_seqlens, idx, ++segs, (int64_t)at);
        }
        if (at == row_end) continue;
        fill(out->tokens, out->dtype, at, row_end - at, pad_id);
        if (out->positions) fill(out->positions, idx, at, row_end - at, 0);
        if (out->cu_seqlens) lf_put_int(out->cu_seqlens, idx, ++segs, (int64_t)row_end);
    }
    if (out->cu_seqlens)
        for (size_t k = segs + 1; k < ncu; k++)
            lf_put_int(out->cu_seqlens, idx, k, (int64_t)cells);
    return (long)segs + 1;
}
