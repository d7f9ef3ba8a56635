/*
 * lf_ring.c — ring and slot headers: written by the server, checked by the
 * client (see lf_ring.h for the segment layout and who owns what).
 *
 * The client copies the header out of shared memory once and checks the
 * copy, so a concurrent writer cannot change a field between its check and
 * its use.
 */
#include "lf_ring.h"

#include <errno.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t lf_ring_segment_size(uint32_t nslots, uint64_t slot_size)
{
    if (nslots == 0 || nslots > LF_RING_MAX_SLOTS) return 0;
    if (slot_size < LF_SLOT_ALIGN || slot_size % LF_SLOT_ALIGN) return 0;
    if (slot_size > (UINT64_MAX - LF_RING_HEADER_SIZE) / nslots) return 0;
    return LF_RING_HEADER_SIZE + (uint64_t)nslots * slot_size;
}

uint64_t lf_ring_slot_offset(uint32_t slot, uint64_t slot_size)
{
    return LF_RING_HEADER_SIZE + (uint64_t)slot * slot_size;
}

void lf_ring_touch(const void *segment, uint64_t size)
{
    const volatile unsigned char *page = segment;
    unsigned char sink = 0;
    for (uint64_t at = 0; at < size; at += 4096) sink ^= page[at];
    (void)sink;
}

void lf_ring_header_write(void *segment, uint32_t rank, uint32_t nslots,
                          uint64_t slot_size, uint32_t server_pid)
{
    lf_ring_header h = {
        .magic = LF_RING_MAGIC, .version = LF_RING_VERSION, .rank = rank,
        .nslots = nslots, .slot_size = slot_size,
        .segment_size = lf_ring_segment_size(nslots, slot_size),
        .server_pid = server_pid,
    };
    memcpy(segment, &h, sizeof h);
}

int lf_ring_header_check(const void *segment, uint64_t mapped_size,
                         const lf_msg_welcome *w)
{
    lf_ring_header h;
    if (mapped_size < sizeof h) return -EBADMSG;
    memcpy(&h, segment, sizeof h);
    uint64_t want = lf_ring_segment_size(w->nslots, w->slot_size);
    if (h.magic != LF_RING_MAGIC) return -EBADMSG;
    if (h.version != LF_RING_VERSION) return -EPROTONOSUPPORT;
    if (want == 0 || h.segment_size != want || want != w->segment_size ||
        want > mapped_size)
        return -EBADMSG;
    if (h.rank != w->rank || h.nslots != w->nslots || h.slot_size != w->slot_size)
        return -EBADMSG;
    return 0;
}

static uint64_t slot_checksum(const lf_slot_header *h, const void *layout_bytes)
{
    lf_slot_header copy = *h;
    copy.checksum = 0;
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, &copy, sizeof copy);
    XXH3_64bits_update(&st, layout_bytes, h->layout_bytes);
    return XXH3_64bits_digest(&st);
}

int lf_slot_write_header(void *slot, uint64_t slot_size, uint32_t rank,
                         const lf_msg_ready *r, uint32_t nsamples, uint64_t step_tokens,
                         const lf_layout *layout)
{
    unsigned char *base = slot;
    if (slot_size < LF_SLOT_HEADER_SIZE) return -ENOBUFS;
    long n = lf_layout_encode(base + LF_SLOT_HEADER_SIZE,
                              slot_size - LF_SLOT_HEADER_SIZE, layout);
    if (n < 0) return (int)n;
    lf_slot_header h;
    memset(&h, 0, sizeof h);
    h.magic = LF_SLOT_MAGIC;
    h.version = LF_RING_VERSION;
    h.rank = rank;
    h.epoch = r->epoch;
    h.step = r->step;
    h.seq = r->seq;
    h.nsamples = nsamples;
    h.step_tokens = step_tokens;
    h.layout_bytes = (uint32_t)n;
    h.checksum = slot_checksum(&h, base + LF_SLOT_HEADER_SIZE);
    memcpy(base, &h, sizeof h);
    return 0;
}

int lf_slot_check(const void *slot, uint64_t slot_size, uint32_t rank,
                  const lf_msg_ready *r, lf_layout *layout, uint32_t *nsamples,
                  uint64_t *step_tokens, const char **why)
{
    const unsigned char *base = slot;
    lf_slot_header h;
    *why = "slot smaller than its header";
    if (slot_size < LF_SLOT_HEADER_SIZE) return -EBADMSG;
    memcpy(&h, base, sizeof h);
    *why = "slot magic or version";
    if (h.magic != LF_SLOT_MAGIC || h.version != LF_RING_VERSION) return -EBADMSG;
    *why = "slot rank/epoch/step/seq differ from READY";
    if (h.rank != rank || h.epoch != r->epoch || h.step != r->step || h.seq != r->seq)
        return -EBADMSG;
    *why = "slot layout size";
    if (h.layout_bytes == 0 || h.layout_bytes > slot_size - LF_SLOT_HEADER_SIZE)
        return -EBADMSG;
    /* Copy the layout bytes too, so the checksum and the decode see the
     * same bytes even if the shared memory changes under us. */
    unsigned char enc[LF_LAYOUT_HEADER_SIZE + LF_LAYOUT_MAX_TENSORS * LF_LAYOUT_ENTRY_SIZE];
    if (h.layout_bytes > sizeof enc) return -EBADMSG;
    memcpy(enc, base + LF_SLOT_HEADER_SIZE, h.layout_bytes);
    *why = "slot header checksum";
    if (slot_checksum(&h, enc) != h.checksum) return -EBADMSG;
    lf_layout l;
    if (lf_layout_decode(&l, enc, h.layout_bytes, slot_size, why) != 0) return -EBADMSG;
    *why = "layout overlaps the slot header";
    if (l.base < LF_SLOT_HEADER_SIZE + h.layout_bytes) return -EBADMSG;
    *layout = l;
    *nsamples = h.nsamples;
    *step_tokens = h.step_tokens;
    *why = NULL;
    return 0;
}
