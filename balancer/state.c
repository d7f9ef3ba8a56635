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
 *
 * A restore replays the epoch's order up to the cursor, which is as long as
 * the position is late (at 10^9 samples, ~10^9 draws); it does no more than
 * that: the entries are looked up in a table of their own as the replay
 * passes them (no mark a sample), and a baseline of one source in which
 * every sample fits its caps moves its shuffle to the cursor at once
 * (lfp_order_seek: nothing before it is needed, no window, no outliers).
 */
#include <limits.h>
#include <stdlib.h>
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

/* The blob's window and queue entries, each sample once, with whether the
 * replay passed it: open addressing, slot = sample + 1 (0: empty), bit 32
 * set once passed. The replay looks up every sample it draws, nearly all
 * absent: a quarter full, a multiplicative hash, about one probe. */
typedef struct entry_set {
    uint64_t *slot;
    size_t mask;                 /* slots - 1 (a power of 2, 4 x the entries or more) */
    unsigned shift;              /* 64 - log2(slots) */
    size_t count;                /* entries */
} entry_set;

static uint64_t *entry_slot(const entry_set *t, uint32_t s)
{
    size_t i = (size_t)((s * UINT64_C(0x9e3779b97f4a7c15)) >> t->shift);
    while (t->slot[i] && (uint32_t)t->slot[i] != s + 1) i = (i + 1) & t->mask;
    return &t->slot[i];
}

/* The m entries at e (8 bytes each, the sample first) into t: 1, 0 where
 * one is past the samples or twice there, -1 out of memory. */
static int entry_set_fill(entry_set *t, const uint8_t *e, size_t m, size_t n)
{
    size_t slots = 4;
    t->shift = 62;
    while (slots < 4 * m) slots *= 2, t->shift--;
    t->mask = slots - 1;
    t->count = m;
    if (!(t->slot = calloc(slots, sizeof *t->slot))) return -1;
    for (size_t i = 0; i < m; i++) {
        uint32_t s = get32(e + 8 * i);
        uint64_t *x = s < n ? entry_slot(t, s) : NULL;
        if (!x || *x) return 0;
        *x = (uint64_t)s + 1;
    }
    return 1;
}

/* Checks one saved entry: a sample the replay passed, that fits its caps,
 * on the expected side of the outlier threshold (entry_set_fill: once). */
static int entry_ok(const lf_plan *p, const entry_set *t, uint32_t s, int outlier)
{
    if (lfp_capfail(p, s) || !(*entry_slot(t, s) >> 32)) return 0;
    return (lfp_cost(p, s) > p->prm.outlier_cost) == outlier;
}

/* Goes over the order from the epoch's start up to the cursor (drawing it
 * as it goes), noting the entries of t it passes, and as the balanced
 * selection pulled it (refill_window): normal samples advance the due
 * position, outliers under reject are the epoch's rejected ones (the rest
 * were placed, or are in the blob's window and queue). 0 where the order
 * ends before the cursor (a mixture's: its length is known as it is
 * drawn). */
static int replay_pulled(lf_plan *p, size_t cursor, const entry_set *t)
{
    int balanced = p->prm.sampler == LF_PLAN_BALANCED;
    if (!balanced && p->nsrc <= 1 && !p->ncapfail) {   /* cursor <= norder: checked */
        lfp_order_seek(p, cursor);   /* a baseline keeps no entries */
        return 1;
    }
    while (p->cursor < cursor && lfp_order_more(p)) {
        uint32_t s = lfp_order_next(p);
        if (!balanced) continue;
        if (t->count) {
            uint64_t *x = entry_slot(t, s);
            if (*x) *x |= UINT64_C(1) << 32;
        }
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
    const uint8_t *e = b + STATE_HEAD;
    entry_set t;
    int ok = entry_set_fill(&t, e, (size_t)np + no, p->n);
    /* a mixture's epoch is as long as its interleave: known as it is drawn */
    if (ok > 0) ok = replay_pulled(p, (size_t)cursor, &t);
    for (uint32_t i = 0; i < np + no && ok > 0; i++)
        ok = entry_ok(p, &t, get32(e + 8 * i), i >= np);
    free(t.slot);
    if (ok <= 0) {
        lfp_epoch_begin(p, p->prm.epoch);
        return ok < 0 ? LF_PLAN_E_NOMEM : LF_PLAN_E_STATE;
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
