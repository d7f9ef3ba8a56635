/*
 * state.c — saving and restoring a plan's position.
 *
 * An epoch's order is a pure function of (samples, seed, epoch), so the blob
 * holds only what the order cannot give back: the epoch, the step, the
 * cursor into the order, the pending window and the held outliers with
 * their ages. What the cursor has passed is recomputed: the rejected
 * outliers, and the due position (the summed cost of the normal samples
 * pulled, which passes 2^64 with costs in FLOPs: version 1 saved it in 64
 * bits, wrapped, and a resume then dated new samples thousands of steps
 * early). Version 3: the same layout; the epoch's last steps share what
 * is left (plan.c, tail_budget), so a version 2 position would go on into
 * another sequence than the one it was saved from, and is refused.
 * Version 4: bounded steps (pad's default, plan.c release_bounded) release
 * outliers at their due step, which a held outlier's second word holds in
 * place of the steps it waited; the layout is the same.
 * Layout, all little-endian:
 *   u32 magic "LFPS", u32 version, u64 sequence hash,
 *   u32 epoch, u32 epoch_done, u64 step, u64 cursor, u32 np, u32 no,
 *   np x (u32 sample index, u32 due step),
 *   no x (u32 sample index, u32 waited; bounded: u32 due step).
 * A mixture's blob ends in one more u64, the hash of its weights (the
 * sequence hash covers its sources but not their weights): restored onto a
 * plan of other weights, a position between epochs starts the next epoch
 * with the plan's weights, one inside an epoch is LF_PLAN_E_WEIGHTS (the
 * interleave it was saved in is gone). A plan of one source writes and
 * reads the layout of old, byte for byte.
 * Restoring checks every field against the plan before changing anything:
 * indices in range, each sample at most once, pending samples before the
 * cursor and on the right side of the outlier threshold. A blob of another
 * version is LF_PLAN_E_VERSION (its fields mean something else).
 */
#include <limits.h>
#include <string.h>

#include "plan_internal.h"

#define STATE_MAGIC 0x5350464cu  /* "LFPS" */
#define STATE_VERSION 4u
#define STATE_HEAD 48u

static void put32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *b)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)b[i] << (8 * i);
    return v;
}

static uint64_t get64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)b[i] << (8 * i);
    return v;
}

/* The bytes a mixture's blob ends in: its weights' hash. */
static size_t mix_tail(const lf_plan *p) { return p->nsrc > 1 ? LF_PLAN_STATE_WEIGHTS_TAIL : 0; }

/* A mixture's blob saved under other weights: between epochs (after the
 * epoch's last step, or before its first) the next epoch starts with the
 * plan's weights; inside one the saved interleave is gone. */
static int restore_reweighed(lf_plan *p, uint32_t epoch, uint32_t done, uint64_t step,
                             uint64_t cursor, uint32_t pending)
{
    if (pending || (!done && (step || cursor))) return LF_PLAN_E_WEIGHTS;
    if (done && epoch == UINT32_MAX) return LF_PLAN_E_STATE;
    lfp_epoch_begin(p, done ? epoch + 1 : epoch);
    return 0;
}

long lf_plan_state_save(const lf_plan *p, void *buf, size_t cap)
{
    if (!p || (cap && !buf)) return LF_PLAN_E_ARG;
    size_t size = STATE_HEAD + 8 * (p->np + p->no) + mix_tail(p);
    if (size > (size_t)LONG_MAX) return LF_PLAN_E_ARG;
    if (cap < size) return cap ? LF_PLAN_E_BUFFER : (long)size;
    uint8_t *b = buf;
    put32(b, STATE_MAGIC);
    put32(b + 4, STATE_VERSION);
    put64(b + 8, p->hash);
    put32(b + 16, p->epoch);
    put32(b + 20, (uint32_t)p->epoch_done);
    put64(b + 24, p->step);
    put64(b + 32, p->cursor);
    put32(b + 40, (uint32_t)p->np);
    put32(b + 44, (uint32_t)p->no);
    b += STATE_HEAD;
    for (size_t i = 0; i < p->np; i++, b += 8) { put32(b, p->pidx[i]); put32(b + 4, p->page[i]); }
    for (size_t i = 0; i < p->no; i++, b += 8) { put32(b, p->oidx[i]); put32(b + 4, p->owait[i]); }
    if (mix_tail(p)) put64(b, p->weights_hash);
    return (long)size;
}

/* Sample s's mark, 2 bits: 0 not passed by the cursor, 1 passed, 2 passed
 * and in the blob's window or queue. */
static unsigned mark_of(const lf_plan *p, uint32_t s)
{
    return (p->mark[s / 4] >> (2 * (s % 4))) & 3u;
}

static void mark_set(lf_plan *p, uint32_t s, unsigned v)
{
    unsigned sh = 2 * (s % 4);
    p->mark[s / 4] = (uint8_t)((p->mark[s / 4] & ~(3u << sh)) | v << sh);
}

/* Checks one saved entry: a sample placed once, seen before the cursor, on
 * the expected side of the outlier threshold. */
static int entry_ok(lf_plan *p, uint32_t s, int outlier)
{
    if (s >= p->n || lfp_capfail(p, s) || mark_of(p, s) != 1) return 0;
    mark_set(p, s, 2);
    return (lfp_cost(p, s) > p->prm.outlier_cost) == outlier;
}

/* Goes over the order from the epoch's start up to the cursor (drawing it
 * as it goes), marking each sample passed, and as the balanced selection
 * pulled it (refill_window): normal samples advance the due position,
 * outliers under reject are the epoch's rejected ones (the rest were
 * placed, or are in the blob's window and queue). 0 where the order ends
 * before the cursor (a mixture's: its length is known as it is drawn). */
static int replay_pulled(lf_plan *p, size_t cursor)
{
    int balanced = p->prm.sampler == LF_PLAN_BALANCED;
    /* cleared where some restore marked it: a rewind to an epoch's start
     * (cursor 0, which no saved entry can pass: entry_ok) marks nothing,
     * and leaves the n / 4 bytes untouched (250 MB at 10^9 samples, which
     * lf-server's start-up rewound its plan through) */
    if (p->marked) memset(p->mark, 0, p->n / 4 + 1);
    p->marked = cursor > 0;
    while (p->cursor < cursor && lfp_order_more(p)) {
        uint32_t s = lfp_order_next(p);
        mark_set(p, s, 1);
        if (!balanced) continue;
        if (lfp_cost(p, s) <= p->prm.outlier_cost) lfp_due_add(p, lfp_cost(p, s));
        else if (p->prm.outlier_policy == LF_PLAN_OUTLIER_REJECT) p->rej[p->nrej++] = s;
    }
    return p->cursor == cursor;
}

int lf_plan_state_restore(lf_plan *p, const void *buf, size_t size)
{
    if (!p || !buf) return LF_PLAN_E_ARG;
    const uint8_t *b = buf;
    if (size < 8 || get32(b) != STATE_MAGIC) return LF_PLAN_E_STATE;
    if (get32(b + 4) != STATE_VERSION) return LF_PLAN_E_VERSION;
    if (size >= STATE_HEAD && p->hash_v1 && get64(b + 8) == p->hash_v1)
        return LF_PLAN_E_VERSION;  /* naive/sorted saved under order version 1 */
    if (size < STATE_HEAD || get64(b + 8) != p->hash) return LF_PLAN_E_STATE;
    uint32_t epoch = get32(b + 16), done = get32(b + 20);
    uint64_t step = get64(b + 24), cursor = get64(b + 32);
    uint32_t np = get32(b + 40), no = get32(b + 44);
    if (done > 1 || np > p->prm.lookahead || no > p->ocap ||
        size != STATE_HEAD + 8 * ((size_t)np + no) + mix_tail(p))
        return LF_PLAN_E_STATE;
    if (mix_tail(p) && get64(b + size - 8) != p->weights_hash)
        return restore_reweighed(p, epoch, done, step, cursor, np + no);
    /* one source: every epoch's order is as long; a mixture's, checked below */
    if (cursor > (p->nsrc > 1 ? p->n : p->norder)) return LF_PLAN_E_STATE;
    if ((p->prm.sampler != LF_PLAN_BALANCED && (np || no)) ||
        (p->prm.outlier_policy == LF_PLAN_OUTLIER_REJECT && no))
        return LF_PLAN_E_STATE;

    lfp_epoch_begin(p, epoch);
    /* a mixture's epoch is as long as its interleave: known as it is drawn */
    int ok = replay_pulled(p, (size_t)cursor);
    const uint8_t *e = b + STATE_HEAD;
    for (uint32_t i = 0; i < np + no && ok; i++) ok = entry_ok(p, get32(e + 8 * i), i >= np);
    if (!ok) {
        lfp_epoch_begin(p, p->prm.epoch);
        return LF_PLAN_E_STATE;
    }
    for (uint32_t i = 0; i < np; i++) {
        p->pidx[i] = get32(e + 8 * i);
        p->page[i] = get32(e + 8 * i + 4);
    }
    for (uint32_t i = 0; i < no; i++) {
        p->oidx[i] = get32(e + 8 * (np + i));
        p->owait[i] = get32(e + 8 * (np + i) + 4);
    }
    p->np = np;
    p->no = no;
    p->due_floor = 0;            /* unknown: the next step looks at every entry */
    p->step = step;
    p->epoch_done = (int)done;
    p->emitted = cursor - p->nrej - np - no;
    return 0;
}
