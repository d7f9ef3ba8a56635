/*
 * ctl_msg.c — fuzz target for what a peer can put in front of levelfeed:
 * control messages (lf_wire_decode) and slot bytes (lf_slot_check). The
 * first input byte picks which. A decoded message must re-encode to the
 * same bytes; a slot that passes the check must have every tensor inside
 * the slot.
 */
#include "lf_ring.h"
#include "lf_wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_message(const uint8_t *data, size_t size)
{
    lf_msg m;
    if (lf_wire_decode(data, size, &m) != 0) return;
    static unsigned char again[LF_WIRE_MAX];
    int n = lf_wire_encode(&m, again, sizeof again);
    if (n < 0 || (size_t)n != size || memcmp(again, data, size) != 0) abort();
}

static void fuzz_slot(const uint8_t *data, size_t size)
{
    /* The slot is the input, padded with zeros to a whole slot size. */
    uint64_t slot_size = (size + LF_SLOT_ALIGN - 1) / LF_SLOT_ALIGN * LF_SLOT_ALIGN;
    if (slot_size == 0) slot_size = LF_SLOT_ALIGN;
    unsigned char *slot = calloc(1, slot_size);
    if (!slot) return;
    memcpy(slot, data, size);
    lf_slot_header h;
    memcpy(&h, slot, sizeof h);
    lf_msg_ready r = {.slot = 0, .epoch = h.epoch, .step = h.step, .seq = h.seq};
    lf_layout l;
    uint32_t n;
    const char *why;
    if (lf_slot_check(slot, slot_size, h.rank, &r, &l, &n, &why) == 0) {
        for (uint32_t i = 0; i < l.ntensors; i++)
            if (l.tensors[i].offset > slot_size ||
                l.tensors[i].size > slot_size - l.tensors[i].offset)
                abort();
    }
    free(slot);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    if (data[0] & 1) fuzz_slot(data + 1, size - 1);
    else fuzz_message(data + 1, size - 1);
    return 0;
}
