/*
 * slot_header.c — fuzz target for the client's parser of a shared-memory
 * batch slot (lf_slot_check): the slot header, its checksum and the encoded
 * layout table behind it, all of which sit in memory another process can
 * write.
 *
 * Input: one mode byte, then the slot bytes (padded with zeros to a whole
 * slot size). Mode bit 0 re-seals the header checksum over the mutated
 * header and layout bytes before the check, so mutations reach the layout
 * decoder behind it (with the checksum as given, almost every mutation stops
 * there). The READY the slot is checked against takes rank, epoch, step and
 * seq from the header itself, so those comparisons pass and the rest runs.
 *
 * A slot that passes must describe only bytes inside the slot, after its own
 * header and layout table, in order and without overlap, each tensor's size
 * equal to its shape's product times its element size.
 */
#include "lf_ring.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The writer's checksum (lf_ring.c): xxh3-64 of the header with checksum 0,
 * then the layout bytes. Computed here only where they lie inside the slot. */
static void reseal(unsigned char *slot, uint64_t slot_size)
{
    lf_slot_header h;
    memcpy(&h, slot, sizeof h);
    if (h.layout_bytes > slot_size - LF_SLOT_HEADER_SIZE) return;
    h.checksum = 0;
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, &h, sizeof h);
    XXH3_64bits_update(&st, slot + LF_SLOT_HEADER_SIZE, h.layout_bytes);
    h.checksum = XXH3_64bits_digest(&st);
    memcpy(slot, &h, sizeof h);
}

static void check_tensor(const lf_tensor_desc *t, uint64_t *prev_end, uint64_t slot_size)
{
    uint64_t elems = 1;
    for (uint32_t d = 0; d < t->rank; d++)
        if (__builtin_mul_overflow(elems, t->shape[d], &elems)) abort();
    uint64_t bytes;
    if (__builtin_mul_overflow(elems, (uint64_t)lf_dtype_size(t->dtype), &bytes)) abort();
    if (bytes != t->size || lf_dtype_size(t->dtype) == 0) abort();
    if (t->offset < *prev_end || t->offset > slot_size || t->size > slot_size - t->offset)
        abort();
    *prev_end = t->offset + t->size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    uint64_t slot_size = (size + LF_SLOT_ALIGN - 1) / LF_SLOT_ALIGN * LF_SLOT_ALIGN;
    if (slot_size == 0) slot_size = LF_SLOT_ALIGN;
    unsigned char *slot = calloc(1, slot_size);
    if (!slot) return 0;
    if (size) memcpy(slot, data, size);
    if (mode & 1) reseal(slot, slot_size);
    lf_slot_header h;
    memcpy(&h, slot, sizeof h);
    lf_msg_ready r = {.slot = 0, .epoch = h.epoch, .step = h.step, .seq = h.seq};
    lf_layout l;
    uint32_t n;
    uint64_t step_tokens;
    const char *why;
    if (lf_slot_check(slot, slot_size, h.rank, &r, &l, &n, &step_tokens, &why) == 0) {
        uint64_t prev_end = LF_SLOT_HEADER_SIZE + (uint64_t)h.layout_bytes;
        if (n != h.nsamples || l.ntensors > LF_LAYOUT_MAX_TENSORS) abort();
        for (uint32_t i = 0; i < l.ntensors; i++) check_tensor(&l.tensors[i], &prev_end, slot_size);
    } else if (why == NULL) {
        abort(); /* every refusal names its check */
    }
    free(slot);
    return 0;
}
