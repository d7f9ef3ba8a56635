/*
 * client_ring.c — ring and slot headers: what the server writes, the client
 * accepts; any changed header or layout byte, a READY that names another
 * batch, or a layout that leaves the slot is refused.
 */
#include "lf_ring.h"
#include "test.h"

#include <errno.h>

#define SLOT 8192u

static void make_layout(lf_layout *l, uint64_t rows)
{
    uint64_t grid[2] = {rows, 16}, ids[1] = {rows};
    ASSERT_EQ(lf_layout_init(l, LF_SLOT_HEADER_SIZE + lf_layout_encoded_size(2), 64), 0);
    ASSERT_GE(lf_layout_add(l, "tokens", LF_DTYPE_I32, 2, grid), 0);
    ASSERT_GE(lf_layout_add(l, "sample_ids", LF_DTYPE_U64, 1, ids), 0);
}

int main(void)
{
    static unsigned char slot[SLOT];
    lf_layout l, got;
    make_layout(&l, 8);
    lf_msg_ready r = {.slot = 1, .epoch = 2, .step = 3, .seq = 4};
    ASSERT_EQ(lf_slot_write_header(slot, SLOT, 5, &r, 8, 12345, &l), 0);
    const char *why;
    uint32_t nsamples = 0;
    uint64_t step_tokens = 0;
    ASSERT_EQ(lf_slot_check(slot, SLOT, 5, &r, &got, &nsamples, &step_tokens, &why), 0);
    ASSERT_EQ(nsamples, 8);
    ASSERT_EQ(step_tokens, 12345);
    ASSERT_EQ(got.ntensors, 2);
    ASSERT_STR_EQ(got.tensors[1].name, "sample_ids");
    ASSERT_EQ(got.tensors[0].size, 8 * 16 * 4);

    /* Every header and layout byte is covered: flip one, the check fails. */
    lf_slot_header h;
    memcpy(&h, slot, sizeof h);
    size_t covered = LF_SLOT_HEADER_SIZE + h.layout_bytes;
    for (size_t i = 0; i < covered; i++) {
        if (i >= sizeof h && i < LF_SLOT_HEADER_SIZE) continue; /* unused header tail */
        slot[i] ^= 0x01;
        ASSERT_EQ(lf_slot_check(slot, SLOT, 5, &r, &got, &nsamples, &step_tokens, &why), -EBADMSG);
        slot[i] ^= 0x01;
    }
    ASSERT_EQ(lf_slot_check(slot, SLOT, 5, &r, &got, &nsamples, &step_tokens, &why), 0);

    /* A READY for another batch or rank does not match the slot. */
    lf_msg_ready other = r;
    other.seq = 5;
    ASSERT_EQ(lf_slot_check(slot, SLOT, 5, &other, &got, &nsamples, &step_tokens, &why), -EBADMSG);
    other = r;
    other.step = 9;
    ASSERT_EQ(lf_slot_check(slot, SLOT, 5, &other, &got, &nsamples, &step_tokens, &why), -EBADMSG);
    ASSERT_EQ(lf_slot_check(slot, SLOT, 6, &r, &got, &nsamples, &step_tokens, &why), -EBADMSG);

    /* A layout that would end past a (smaller) slot is refused, even with a
     * valid checksum: the client checks against the slot size it mapped. */
    make_layout(&l, 200); /* 200 * 16 * 4 = 12800 bytes > SLOT */
    ASSERT_EQ(lf_slot_write_header(slot, SLOT, 5, &r, 200, 12345, &l), 0);
    ASSERT_EQ(lf_slot_check(slot, SLOT, 5, &r, &got, &nsamples, &step_tokens, &why), -EBADMSG);
    ASSERT_TRUE(why != NULL);

    /* A slot too small for the header, and a layout size past the slot. */
    ASSERT_EQ(lf_slot_check(slot, 64, 5, &r, &got, &nsamples, &step_tokens, &why), -EBADMSG);
    make_layout(&l, 8);
    ASSERT_EQ(lf_slot_write_header(slot, SLOT, 5, &r, 8, 12345, &l), 0);
    memcpy(&h, slot, sizeof h);
    h.layout_bytes = SLOT;
    memcpy(slot, &h, sizeof h);
    ASSERT_EQ(lf_slot_check(slot, SLOT, 5, &r, &got, &nsamples, &step_tokens, &why), -EBADMSG);

    /* Ring header: sizes must match the WELCOME and the mapping. */
    ASSERT_EQ(lf_ring_segment_size(0, 4096), 0);
    ASSERT_EQ(lf_ring_segment_size(2, 4095), 0);
    ASSERT_EQ(lf_ring_segment_size(2, UINT64_MAX / 2), 0);
    ASSERT_EQ(lf_ring_segment_size(LF_RING_MAX_SLOTS + 1, 4096), 0);
    static unsigned char seg[4096 + 2 * 4096];
    lf_ring_header_write(seg, 3, 2, 4096, 1);
    lf_msg_welcome w = {.rank = 3, .nslots = 2, .slot_size = 4096,
                        .segment_size = sizeof seg};
    ASSERT_EQ(lf_ring_header_check(seg, sizeof seg, &w), 0);
    ASSERT_EQ(lf_ring_header_check(seg, sizeof seg - 1, &w), -EBADMSG);
    w.rank = 4;
    ASSERT_EQ(lf_ring_header_check(seg, sizeof seg, &w), -EBADMSG);
    w.rank = 3;
    w.nslots = 3;
    ASSERT_EQ(lf_ring_header_check(seg, sizeof seg, &w), -EBADMSG);
    /* a ring of version 1 (a server before step_tokens): refused as another
     * version, which the client names, not as a damaged header */
    w.nslots = 2;
    lf_ring_header old;
    memcpy(&old, seg, sizeof old);
    old.version = 1;
    memcpy(seg, &old, sizeof old);
    ASSERT_EQ(lf_ring_header_check(seg, sizeof seg, &w), -EPROTONOSUPPORT);
    printf("ring ok\n");
    return 0;
}
