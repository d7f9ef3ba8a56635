/*
 * tf_tokens.c — token pad/pack and frame pad/pack layouts, checked element
 * by element against hand-written expectations, in every token dtype, plus
 * the rejections (no silent truncation, no overflowing ids, no partial
 * writes).
 */
#include "lf_tf.h"
#include "test.h"

static const uint16_t t16a[3] = {1, 2, 3};
static const uint32_t t32b[2] = {70000, 5};

static void check_i64(const int64_t *got, const int64_t *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            TEST_FAIL_("%s[%zu]: %lld, want %lld", what, i, (long long)got[i], (long long)want[i]);
}

static void test_pad(void)
{
    lf_tf_seq seqs[3] = {{t16a, 3, LF_DTYPE_U16, 0, 0}, {t32b, 2, LF_DTYPE_U32, 0, 0},
                         {NULL, 0, LF_DTYPE_U16, 0, 0}};
    int64_t tok[12], len[3];
    uint8_t mask[12];
    lf_tf_tokens_out o = {LF_DTYPE_I64, tok, sizeof tok, len, sizeof len, mask, sizeof mask,
                          NULL, 0, NULL, 0};
    ASSERT_EQ(lf_tf_tokens_pad(&o, 4, -1, seqs, 3), 0);
    static const int64_t want_tok[12] = {1, 2, 3, -1, 70000, 5, -1, -1, -1, -1, -1, -1};
    static const int64_t want_len[3] = {3, 2, 0};
    static const uint8_t want_mask[12] = {1, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0};
    check_i64(tok, want_tok, 12, "pad tokens");
    check_i64(len, want_len, 3, "pad lengths");
    ASSERT_MEM_EQ(mask, want_mask, 12);

    /* i32 output, no mask, no lengths. */
    int32_t t32[8];
    lf_tf_tokens_out o32 = {LF_DTYPE_I32, t32, sizeof t32, NULL, 0, NULL, 0, NULL, 0, NULL, 0};
    ASSERT_EQ(lf_tf_tokens_pad(&o32, 4, 0, seqs, 2), 0);
    static const int32_t want32[8] = {1, 2, 3, 0, 70000, 5, 0, 0};
    ASSERT_MEM_EQ(t32, want32, sizeof want32);

    /* Rejections leave the outputs as they were. */
    memset(tok, 0x5a, sizeof tok);
    int64_t before[12];
    memcpy(before, tok, sizeof tok);
    ASSERT_EQ(lf_tf_tokens_pad(&o, 2, -1, seqs, 3), LF_TF_E_ARG);      /* 3 tokens > max_len 2 */
    ASSERT_EQ(lf_tf_tokens_pad(&o, 5, -1, seqs, 3), LF_TF_E_BUFFER);   /* 15 cells > 12 */
    ASSERT_MEM_EQ(tok, before, sizeof tok);
    o32.dtype = LF_DTYPE_I32;
    ASSERT_EQ(lf_tf_tokens_pad(&o32, 4, (int64_t)1 << 40, seqs, 2), LF_TF_E_ARG);
    static const uint32_t huge[1] = {0x80000000u};
    lf_tf_seq hs = {huge, 1, LF_DTYPE_U32, 0, 0};
    ASSERT_EQ(lf_tf_tokens_pad(&o32, 4, 0, &hs, 1), LF_TF_E_ARG);      /* > INT32_MAX in i32 */
    o32.dtype = LF_DTYPE_F32;
    ASSERT_EQ(lf_tf_tokens_pad(&o32, 4, 0, seqs, 2), LF_TF_E_ARG);
    lf_tf_seq bad = {t16a, 3, LF_DTYPE_I16, 0, 0};
    ASSERT_EQ(lf_tf_tokens_pad(&o, 4, 0, &bad, 1), LF_TF_E_ARG);
    /* Lengths are i32 with i32 tokens: a longest past INT32_MAX cannot be
     * written (refused before any buffer is looked at). */
    o32.dtype = LF_DTYPE_I32;
    ASSERT_EQ(lf_tf_tokens_pad(&o32, 0x80000000u, 0, NULL, 0), LF_TF_E_ARG);
}

static void test_pack(void)
{
    /* Unaligned u16 input: tokens start at an odd address. */
    unsigned char raw[1 + 6 * 2];
    static const uint16_t r1[6] = {30, 31, 32, 33, 34, 35};
    memcpy(raw + 1, r1, sizeof r1);
    static const uint16_t a[3] = {10, 11, 12};
    static const uint32_t b[2] = {20, 21};
    lf_tf_seq seqs[3] = {{a, 3, LF_DTYPE_U16, 0, 0}, {b, 2, LF_DTYPE_U32, 0, 0},
                         {raw + 1, 6, LF_DTYPE_U16, 1, 0}};
    int64_t tok[12], pos[12], cu[6];
    lf_tf_tokens_out o = {LF_DTYPE_I64, tok, sizeof tok, NULL, 0, NULL, 0,
                          pos, sizeof pos, cu, sizeof cu};
    ASSERT_EQ(lf_tf_tokens_pack(&o, 2, 6, 0, seqs, 3), 5);
    static const int64_t want_tok[12] = {10, 11, 12, 20, 21, 0, 30, 31, 32, 33, 34, 35};
    static const int64_t want_pos[12] = {0, 1, 2, 0, 1, 0, 0, 1, 2, 3, 4, 5};
    static const int64_t want_cu[6] = {0, 3, 5, 6, 12, 12};
    check_i64(tok, want_tok, 12, "pack tokens");
    check_i64(pos, want_pos, 12, "pack positions");
    check_i64(cu, want_cu, 6, "cu_seqlens");

    /* An empty middle row is one pad segment; i32 output; pad id 7. */
    int32_t t[12], p[12], c[7];
    lf_tf_seq s2[3] = {{a, 3, LF_DTYPE_U16, 0, 0}, {b, 2, LF_DTYPE_U32, 2, 0}, {a, 1, LF_DTYPE_U16, 2, 0}};
    lf_tf_tokens_out o2 = {LF_DTYPE_I32, t, sizeof t, NULL, 0, NULL, 0, p, sizeof p, c, sizeof c};
    ASSERT_EQ(lf_tf_tokens_pack(&o2, 3, 4, 7, s2, 3), 7);
    static const int32_t wt[12] = {10, 11, 12, 7, 7, 7, 7, 7, 20, 21, 10, 7};
    static const int32_t wp[12] = {0, 1, 2, 0, 0, 0, 0, 0, 0, 1, 0, 0};
    static const int32_t wc[7] = {0, 3, 4, 8, 10, 11, 12};
    ASSERT_MEM_EQ(t, wt, sizeof wt);
    ASSERT_MEM_EQ(p, wp, sizeof wp);
    ASSERT_MEM_EQ(c, wc, sizeof wc);

    /* A piece of a sample: its positions go on from where it starts in the
     * sample (first_pos), across the cut; past i32, refused. */
    lf_tf_seq piece[2] = {{a, 3, LF_DTYPE_U16, 0, 4096}, {b, 2, LF_DTYPE_U32, 1, 0}};
    ASSERT_EQ(lf_tf_tokens_pack(&o2, 2, 4, 7, piece, 2), 5);
    static const int32_t pp[8] = {4096, 4097, 4098, 0, 0, 1, 0, 0};
    ASSERT_MEM_EQ(p, pp, sizeof pp);
    piece[0].first_pos = INT32_MAX - 2;
    ASSERT_EQ(lf_tf_tokens_pack(&o2, 2, 4, 7, piece, 2), LF_TF_E_ARG);

    /* Rejections. */
    lf_tf_seq over[2] = {{a, 3, LF_DTYPE_U16, 0, 0}, {b, 2, LF_DTYPE_U32, 0, 0}};
    ASSERT_EQ(lf_tf_tokens_pack(&o, 2, 4, 0, over, 2), LF_TF_E_ARG);    /* 5 > seq_len 4 */
    lf_tf_seq back[2] = {{a, 1, LF_DTYPE_U16, 1, 0}, {b, 1, LF_DTYPE_U32, 0, 0}};
    ASSERT_EQ(lf_tf_tokens_pack(&o, 2, 6, 0, back, 2), LF_TF_E_ARG);    /* rows decrease */
    lf_tf_seq far[1] = {{a, 1, LF_DTYPE_U16, 2, 0}};
    ASSERT_EQ(lf_tf_tokens_pack(&o, 2, 6, 0, far, 1), LF_TF_E_ARG);     /* row >= rows */
    /* i32 cu_seqlens end at rows x seq_len: past INT32_MAX they would wrap
     * (2 x (2^30 + 1) once gave {0, 1073741825, -2147483646}). */
    ASSERT_EQ(lf_tf_tokens_pack(&o2, 2, (1u << 30) + 1, 0, NULL, 0), LF_TF_E_ARG);
    o.cu_seqlens_cap = 5 * sizeof(int64_t);
    ASSERT_EQ(lf_tf_tokens_pack(&o, 2, 6, 0, seqs, 3), LF_TF_E_BUFFER); /* needs n+rows+1 */
    o.cu_seqlens_cap = sizeof cu;
    ASSERT_EQ(lf_tf_tokens_pack(&o, 3, 6, 0, seqs, 3), LF_TF_E_BUFFER); /* 18 cells > 12 */
    ASSERT_EQ(lf_tf_tokens_pack(&o, UINT32_MAX, UINT32_MAX, 0, seqs, 3), LF_TF_E_BUFFER);
}

/* u16 and u32 outputs keep the stored width: tokens copied or converted,
 * pad ids in range, lengths, positions and cu_seqlens in i32. */
static void test_stored_width(void)
{
    unsigned char raw[1 + 3 * 2];        /* unaligned u16 input */
    memcpy(raw + 1, t16a, sizeof t16a);
    static const uint32_t small32[2] = {65535, 9};
    lf_tf_seq seqs[2] = {{raw + 1, 3, LF_DTYPE_U16, 0, 0}, {small32, 2, LF_DTYPE_U32, 0, 0}};
    uint16_t t16[8];
    int32_t len[2];
    lf_tf_tokens_out o = {LF_DTYPE_U16, t16, sizeof t16, len, sizeof len, NULL, 0,
                          NULL, 0, NULL, 0};
    ASSERT_EQ(lf_tf_index_dtype(LF_DTYPE_U16), LF_DTYPE_I32);
    ASSERT_EQ(lf_tf_index_dtype(LF_DTYPE_I64), LF_DTYPE_I64);
    ASSERT_EQ(lf_tf_tokens_pad(&o, 4, 65535, seqs, 2), 0);
    static const uint16_t want16[8] = {1, 2, 3, 65535, 65535, 9, 65535, 65535};
    static const int32_t want_len[2] = {3, 2};
    ASSERT_MEM_EQ(t16, want16, sizeof want16);
    ASSERT_MEM_EQ(len, want_len, sizeof want_len);

    /* A u32 token or a pad id past 65535 does not fit u16; no write. */
    memset(t16, 0x5a, sizeof t16);
    uint16_t before[8];
    memcpy(before, t16, sizeof t16);
    lf_tf_seq big = {t32b, 2, LF_DTYPE_U32, 0, 0};
    ASSERT_EQ(lf_tf_tokens_pad(&o, 4, 0, &big, 1), LF_TF_E_ARG);
    ASSERT_EQ(lf_tf_tokens_pad(&o, 4, 65536, seqs, 2), LF_TF_E_ARG);
    ASSERT_EQ(lf_tf_tokens_pad(&o, 4, -1, seqs, 2), LF_TF_E_ARG);
    ASSERT_MEM_EQ(t16, before, sizeof t16);
    o.lengths_cap = sizeof len - 1;      /* lengths are i32, not u16 */
    ASSERT_EQ(lf_tf_tokens_pad(&o, 4, 0, seqs, 2), LF_TF_E_BUFFER);

    /* u32 output: u16 widened, u32 as is (70000 too), pad id 2^32 - 1. */
    uint32_t t32[4], p32[4];
    int32_t cu[4];
    lf_tf_seq s2[2] = {{t16a, 1, LF_DTYPE_U16, 0, 0}, {t32b, 2, LF_DTYPE_U32, 0, 0}};
    lf_tf_tokens_out o32 = {LF_DTYPE_U32, t32, sizeof t32, NULL, 0, NULL, 0,
                            p32, sizeof p32, cu, sizeof cu};
    ASSERT_EQ(lf_tf_tokens_pack(&o32, 1, 4, UINT32_MAX, s2, 2), 4);
    static const uint32_t wt[4] = {1, 70000, 5, UINT32_MAX}, wp[4] = {0, 0, 1, 0};
    static const int32_t wc[4] = {0, 1, 3, 4};
    ASSERT_MEM_EQ(t32, wt, sizeof wt);
    ASSERT_MEM_EQ(p32, wp, sizeof wp);
    ASSERT_MEM_EQ(cu, wc, sizeof wc);
    ASSERT_EQ(lf_tf_tokens_pack(&o32, 1, 4, (int64_t)1 << 32, s2, 2), LF_TF_E_ARG);
    ASSERT_EQ(lf_tf_token_max(LF_DTYPE_F32), 0);
}

static void test_frames(void)
{
    static const float fa[2 * 3] = {1, 2, 3, 4, 5, 6}, fb[1 * 3] = {7, 8, 9};
    lf_tf_frames items[3] = {{fa, 2}, {NULL, 0}, {fb, 1}};
    float pad[3 * 2 * 3];
    int64_t len[3];
    memset(pad, 0x7f, sizeof pad);
    ASSERT_EQ(lf_tf_frames_pad(pad, sizeof pad, len, sizeof len, LF_DTYPE_F32, 3, 2, items, 3), 0);
    static const float want_pad[18] = {1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0, 7, 8, 9, 0, 0, 0};
    ASSERT_MEM_EQ(pad, want_pad, sizeof want_pad);
    static const int64_t want_len[3] = {2, 0, 1};
    check_i64(len, want_len, 3, "frame lengths");
    ASSERT_EQ(lf_tf_frames_pad(pad, sizeof pad, NULL, 0, LF_DTYPE_F32, 3, 1, items, 3), LF_TF_E_ARG);
    ASSERT_EQ(lf_tf_frames_pad(pad, sizeof pad - 1, NULL, 0, LF_DTYPE_F32, 3, 2, items, 3), LF_TF_E_BUFFER);
    ASSERT_EQ(lf_tf_frames_pad(pad, sizeof pad, NULL, 0, LF_DTYPE_U8, 3, 2, items, 3), LF_TF_E_ARG);

    float packed[3 * 3];
    int64_t off[4];
    ASSERT_EQ(lf_tf_frames_pack(packed, sizeof packed, off, sizeof off, LF_DTYPE_F32, 3, items, 3), 3);
    static const float want_packed[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    static const int64_t want_off[4] = {0, 2, 2, 3};
    ASSERT_MEM_EQ(packed, want_packed, sizeof want_packed);
    check_i64(off, want_off, 4, "frame offsets");
    ASSERT_EQ(lf_tf_frames_pack(packed, sizeof packed, off, 3 * sizeof *off, LF_DTYPE_F32, 3, items, 3),
              LF_TF_E_BUFFER);

    /* i16 rows of width 2 from an unaligned source. */
    unsigned char raw[1 + 3 * 2 * 2];
    static const int16_t v[6] = {-1, 2, -3, 4, -5, 6};
    memcpy(raw + 1, v, sizeof v);
    lf_tf_frames iv[2] = {{raw + 1, 1}, {raw + 1 + 4, 2}};
    int16_t pk[6];
    ASSERT_EQ(lf_tf_frames_pack(pk, sizeof pk, NULL, 0, LF_DTYPE_I16, 2, iv, 2), 3);
    ASSERT_MEM_EQ(pk, v, sizeof v);
}

int main(void)
{
    test_pad();
    test_pack();
    test_stored_width();
    test_frames();
    printf("tf_tokens: ok\n");
    return 0;
}
