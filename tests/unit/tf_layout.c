/*
 * tf_layout.c — the batch layout: builder placement, encode/decode round
 * trip, and the decoder's checks (each planted fault must be rejected, and a
 * byte-flip sweep must never yield a layout that points outside the slot).
 */
#include "lf_layout.h"
#include "test.h"

#include <errno.h>

static void build_sample(lf_layout *l)
{
    ASSERT_EQ(lf_layout_init(l, 100, 64), 0);
    ASSERT_EQ(l->base, 128);
    uint64_t img[4] = {8, 3, 224, 224}, tok[2] = {4, 33}, lab[1] = {8};
    ASSERT_EQ(lf_layout_add(l, "image", LF_DTYPE_F32, 4, img), 0);
    ASSERT_EQ(lf_layout_add(l, "tokens", LF_DTYPE_I64, 2, tok), 1);
    ASSERT_EQ(lf_layout_add(l, "label", LF_DTYPE_I32, 1, lab), 2);
    ASSERT_EQ(lf_layout_add(l, "step", LF_DTYPE_U64, 0, NULL), 3);
}

static void test_builder(void)
{
    lf_layout l;
    build_sample(&l);
    const lf_tensor_desc *t = lf_layout_find(&l, "image");
    ASSERT_TRUE(t != NULL);
    ASSERT_EQ(t->offset, 128);
    ASSERT_EQ(t->size, 8ull * 3 * 224 * 224 * 4);
    t = lf_layout_find(&l, "tokens");
    ASSERT_EQ(t->offset, 128 + 8ull * 3 * 224 * 224 * 4);   /* already 64-aligned */
    ASSERT_EQ(t->size, 4 * 33 * 8);
    t = lf_layout_find(&l, "label");
    ASSERT_EQ(t->offset % 64, 0);
    ASSERT_EQ(t->offset, lf_layout_find(&l, "tokens")->offset + 1088);
    ASSERT_EQ(lf_layout_find(&l, "step")->size, 8);
    ASSERT_EQ(l.end % 64, 0);
    ASSERT_TRUE(lf_layout_find(&l, "nope") == NULL);

    uint64_t s[1] = {1};
    ASSERT_EQ(lf_layout_add(&l, "image", LF_DTYPE_U8, 1, s), -EINVAL);   /* duplicate */
    ASSERT_EQ(lf_layout_add(&l, "", LF_DTYPE_U8, 1, s), -EINVAL);
    ASSERT_EQ(lf_layout_add(&l, "x", 99, 1, s), -EINVAL);
    ASSERT_EQ(lf_layout_add(&l, "x", LF_DTYPE_U8, 7, s), -EINVAL);
    ASSERT_EQ(lf_layout_add(&l, "0123456789012345678901234567890123", LF_DTYPE_U8, 1, s), -EINVAL);
    uint64_t huge[3] = {1ull << 40, 1ull << 20, 1ull << 10};
    ASSERT_EQ(lf_layout_add(&l, "huge", LF_DTYPE_F32, 3, huge), -EOVERFLOW);
    ASSERT_EQ(lf_layout_init(&l, 0, 32), -EINVAL);
    ASSERT_EQ(lf_layout_init(&l, 0, 96), -EINVAL);
    ASSERT_EQ(lf_layout_init(&l, UINT64_MAX - 10, 64), -EINVAL);
    ASSERT_EQ(lf_layout_init(&l, 0, 4096), 0);
    for (int i = 0; i < LF_LAYOUT_MAX_TENSORS; i++) {
        char name[8];
        snprintf(name, sizeof name, "t%d", i);
        ASSERT_EQ(lf_layout_add(&l, name, LF_DTYPE_U8, 1, s), i);
        ASSERT_EQ(l.tensors[i].offset, 4096ull * (unsigned)i);
    }
    ASSERT_EQ(lf_layout_add(&l, "full", LF_DTYPE_U8, 1, s), -ENOSPC);
}

static void test_roundtrip(void)
{
    lf_layout l, d;
    build_sample(&l);
    unsigned char buf[4096];
    long n = lf_layout_encode(buf, sizeof buf, &l);
    ASSERT_EQ(n, (long)lf_layout_encoded_size(4));
    ASSERT_EQ(n, 32 + 4 * 104);
    ASSERT_EQ(lf_layout_encode(buf, (size_t)n - 1, &l), -ENOBUFS);
    /* Little-endian on the wire whatever the host. */
    ASSERT_EQ(buf[0], 'L'); ASSERT_EQ(buf[1], 'F'); ASSERT_EQ(buf[2], 'L'); ASSERT_EQ(buf[3], 'Y');
    const char *why = NULL;
    ASSERT_EQ(lf_layout_decode(&d, buf, (size_t)n, l.end, &why), 0);
    ASSERT_EQ(d.ntensors, 4);
    ASSERT_EQ(d.base, l.base);
    ASSERT_EQ(d.end, l.end);
    for (uint32_t i = 0; i < 4; i++) {
        ASSERT_STR_EQ(d.tensors[i].name, l.tensors[i].name);
        ASSERT_EQ(d.tensors[i].dtype, l.tensors[i].dtype);
        ASSERT_EQ(d.tensors[i].rank, l.tensors[i].rank);
        ASSERT_EQ(d.tensors[i].offset, l.tensors[i].offset);
        ASSERT_EQ(d.tensors[i].size, l.tensors[i].size);
        ASSERT_MEM_EQ(d.tensors[i].shape, l.tensors[i].shape, sizeof d.tensors[i].shape);
    }
    /* The slot must hold every tensor. */
    ASSERT_EQ(lf_layout_decode(&d, buf, (size_t)n, l.end - 64, &why), -EBADMSG);
    /* Truncated table. */
    ASSERT_EQ(lf_layout_decode(&d, buf, (size_t)n - 1, l.end, &why), -EBADMSG);
    ASSERT_STR_EQ(why, "tensor table truncated");
    ASSERT_EQ(lf_layout_decode(&d, buf, 31, l.end, &why), -EBADMSG);
}

/* Rewrites one u64 field of entry i and expects the decoder to reject it. */
static void expect_rejected_u64(const unsigned char *good, long n, uint64_t slot,
                                size_t at, uint64_t v, const char *want)
{
    unsigned char bad[4096];
    memcpy(bad, good, (size_t)n);
    for (int k = 0; k < 8; k++) bad[at + (size_t)k] = (unsigned char)(v >> (8 * k));
    lf_layout d;
    const char *why = NULL;
    ASSERT_EQ(lf_layout_decode(&d, bad, (size_t)n, slot, &why), -EBADMSG);
    ASSERT_STR_EQ(why, want);
}

static void test_planted_faults(void)
{
    lf_layout l;
    build_sample(&l);
    unsigned char buf[4096];
    long n = lf_layout_encode(buf, sizeof buf, &l);
    uint64_t slot = l.end;
    size_t e1 = 32 + 104;              /* entry 1 ("tokens") */
    expect_rejected_u64(buf, n, slot, e1 + 40, l.tensors[1].offset + 8, "tensor offset not aligned");
    expect_rejected_u64(buf, n, slot, e1 + 40, l.tensors[0].offset, "tensor overlaps the table or the previous tensor");
    expect_rejected_u64(buf, n, slot, e1 + 48, 1, "tensor size does not match its shape");
    expect_rejected_u64(buf, n, slot, e1 + 56, UINT64_MAX, "tensor size does not match its shape");
    expect_rejected_u64(buf, n, UINT64_MAX, e1 + 40, UINT64_MAX - 63, "tensor extends past the slot");
    expect_rejected_u64(buf, n, slot, e1 + 56 + 8 * 3, 5, "dimension beyond rank not zero");
    expect_rejected_u64(buf, n, slot, 16, l.base + 1, "base or end not aligned");
    expect_rejected_u64(buf, n, slot, 24, slot + 64, "base/end outside the slot");

    unsigned char bad[4096];
    lf_layout d;
    const char *why = NULL;
    memcpy(bad, buf, (size_t)n); bad[4] = 2;
    ASSERT_EQ(lf_layout_decode(&d, bad, (size_t)n, slot, &why), -EPROTO);
    memcpy(bad, buf, (size_t)n); bad[0] ^= 1;
    ASSERT_EQ(lf_layout_decode(&d, bad, (size_t)n, slot, &why), -EBADMSG);
    memcpy(bad, buf, (size_t)n); memcpy(bad + e1, "image", 6);
    ASSERT_EQ(lf_layout_decode(&d, bad, (size_t)n, slot, &why), -EBADMSG);
    ASSERT_STR_EQ(why, "duplicate tensor name");
    memcpy(bad, buf, (size_t)n); memset(bad + e1, 'a', 32);
    ASSERT_EQ(lf_layout_decode(&d, bad, (size_t)n, slot, &why), -EBADMSG);
    memcpy(bad, buf, (size_t)n); bad[6] = 33;
    ASSERT_EQ(lf_layout_decode(&d, bad, sizeof bad, slot, &why), -EBADMSG);
    ASSERT_STR_EQ(why, "too many tensors");
}

/* Every single-byte change either is rejected or decodes to a layout whose
 * tensors all lie inside the slot, aligned, in order. */
static void test_flip_sweep(void)
{
    lf_layout l;
    build_sample(&l);
    unsigned char buf[4096], bad[4096];
    long n = lf_layout_encode(buf, sizeof buf, &l);
    uint64_t slot = l.end + 4096;
    long accepted = 0;
    for (long i = 0; i < n; i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(bad, buf, (size_t)n);
            bad[i] ^= (unsigned char)(1u << bit);
            lf_layout d;
            const char *why = NULL;
            if (lf_layout_decode(&d, bad, (size_t)n, slot, &why) != 0) {
                ASSERT_TRUE(why != NULL);
                continue;
            }
            accepted++;
            uint64_t prev = d.base;
            for (uint32_t t = 0; t < d.ntensors; t++) {
                ASSERT_GE(d.tensors[t].offset, prev);
                ASSERT_EQ(d.tensors[t].offset % d.align, 0);
                ASSERT_LE(d.tensors[t].offset + d.tensors[t].size, slot);
                prev = d.tensors[t].offset + d.tensors[t].size;
            }
        }
    }
    printf("flip sweep: %ld of %ld single-bit changes still decode (all in bounds)\n",
           accepted, n * 8);
}

int main(void)
{
    ASSERT_EQ(lf_dtype_size(LF_DTYPE_F16), 2);
    ASSERT_EQ(lf_dtype_size(0), 0);
    ASSERT_EQ(lf_dtype_size(1000), 0);
    ASSERT_STR_EQ(lf_dtype_name(LF_DTYPE_I64), "i64");
    test_builder();
    test_roundtrip();
    test_planted_faults();
    test_flip_sweep();
    printf("tf_layout: ok\n");
    return 0;
}
