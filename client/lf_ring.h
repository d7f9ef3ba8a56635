/*
 * lf_ring.h — the shared-memory ring one rank reads its batches from.
 *
 * One segment per rank, created by the server as a memfd (mode 0600) and
 * handed to that rank's client over a Unix socket, so it never has a name in
 * /dev/shm and disappears when the last process holding it exits, whatever
 * the way it exits. The segment is:
 *
 *   [ring header, LF_RING_HEADER_SIZE bytes]
 *   [slot 0][slot 1]...[slot nslots-1]        each slot_size bytes
 *
 * and a slot is:
 *
 *   [slot header, LF_SLOT_HEADER_SIZE bytes]
 *   [encoded lf_layout (transforms/lf_layout.h), layout_bytes]
 *   [tensors at the offsets the layout gives, from the slot start]
 *
 * Ownership of a slot moves by control messages only (READY hands it to the
 * client, RELEASE gives it back); the server never reads anything a client
 * could have written, so a client can only spoil its own batches. The client
 * checks everything it reads from a slot (lf_slot_check) because the segment
 * is writable memory shared with another process. Integers in the segment
 * are in the host's byte order: both sides run on the same host.
 */
#ifndef LF_RING_H
#define LF_RING_H

#include <stddef.h>
#include <stdint.h>

#include "lf_layout.h"
#include "lf_wire.h"

#define LF_RING_MAGIC 0x47524c46u   /* "FLRG" */
#define LF_SLOT_MAGIC 0x4c534c46u   /* "FLSL" */
#define LF_RING_VERSION 2          /* 2: the slot header carries step_tokens */
#define LF_RING_HEADER_SIZE 4096u
#define LF_SLOT_HEADER_SIZE 128u
#define LF_SLOT_ALIGN 4096u         /* slot_size is a multiple of this */
#define LF_RING_MAX_SLOTS 1024u

typedef struct lf_ring_header {
    uint32_t magic;              /* LF_RING_MAGIC */
    uint32_t version;            /* LF_RING_VERSION */
    uint32_t rank;               /* the rank this ring feeds */
    uint32_t nslots;
    uint64_t slot_size;
    uint64_t segment_size;
    uint32_t server_pid;
    uint32_t reserved;
} lf_ring_header;

typedef struct lf_slot_header {
    uint32_t magic;              /* LF_SLOT_MAGIC */
    uint32_t version;            /* LF_RING_VERSION */
    uint32_t rank;
    uint32_t epoch;
    uint64_t step;
    uint64_t seq;                /* per-rank batch sequence number */
    uint32_t nsamples;           /* samples in the batch */
    uint32_t layout_bytes;       /* encoded layout right after this header */
    uint64_t step_tokens;        /* the step's global tokens: sum of L over every
                                    rank's samples (for a loss normalised by tokens) */
    uint64_t checksum;           /* xxh3-64 of this header (checksum 0) + layout bytes */
} lf_slot_header;

/* Segment bytes for a ring; 0 when the numbers are out of range. */
uint64_t lf_ring_segment_size(uint32_t nslots, uint64_t slot_size);

/* Offset of slot `slot` from the segment start. */
uint64_t lf_ring_slot_offset(uint32_t slot, uint64_t slot_size);

/* Reads one byte of every 4 KiB page of a freshly mapped ring, so that the
 * first access to each page is paid here, at start-up or connect, and not
 * by the server's workers writing a batch or the trainer reading one.
 * MAP_POPULATE maps the pages, but a hypervisor may still back each one
 * only at the process's first access: under this project's PVM virtual
 * machine that access cost 8-13 us of the accessing thread's CPU a page,
 * read or write, and a second one 0.01-0.06 us, with no page fault the
 * guest could count. Left to lf-server's workers it came to 0.27 s of the
 * 0.70 s a worker spent on 2000 small images (one epoch, 120 MiB of rings);
 * on bare metal the pass costs tens of ns a page (tests/bench/page_touch
 * prints both). */
void lf_ring_touch(const void *segment, uint64_t size);

/* Server: fills the ring header at the segment start. */
void lf_ring_header_write(void *segment, uint32_t rank, uint32_t nslots,
                          uint64_t slot_size, uint32_t server_pid);

/* Client: checks the ring header against what WELCOME announced.
 * Returns 0, -EPROTONOSUPPORT (a ring of another LF_RING_VERSION: a server
 * of another release) or -EBADMSG. */
int lf_ring_header_check(const void *segment, uint64_t mapped_size,
                         const lf_msg_welcome *w);

/* Server: writes the slot header and the encoded layout at the slot start;
 * step_tokens is the step's global token count. Returns 0, or a negative
 * errno when the layout does not fit. */
int lf_slot_write_header(void *slot, uint64_t slot_size, uint32_t rank,
                         const lf_msg_ready *r, uint32_t nsamples, uint64_t step_tokens,
                         const lf_layout *layout);

/* Client: checks a slot announced by READY r: magic, version, rank, epoch,
 * step, seq, layout size and checksum, then decodes the layout against the
 * slot size. Returns 0 and fills *layout (and *nsamples, *step_tokens), or
 * -EBADMSG with *why naming the check that failed. */
int lf_slot_check(const void *slot, uint64_t slot_size, uint32_t rank,
                  const lf_msg_ready *r, lf_layout *layout, uint32_t *nsamples,
                  uint64_t *step_tokens, const char **why);

#endif
