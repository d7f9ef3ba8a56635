/*
 * plan_internal.h — what the balancer's source files share; not installed.
 *
 * The plan keeps samples by index (0..n-1 in the caller's array order) and
 * turns indices into ids only when it hands a step out. All memory is
 * allocated in lf_plan_create; the step functions only write into it.
 *
 * Per sample the plan keeps what cannot be derived, in the narrowest type:
 * its length (16 bits where every length fits, else 32), its id only where ids are not the indices
 * (lfp_id), its position by block only where the samples do not come by
 * (block, id) already (lfp_member). Its cost (lfp_cost) and whether it fits
 * no cap (lfp_capfail) are recomputed from the length where needed: at
 * 10^9 samples each byte a sample is a gigabyte on every node.
 *
 * One header for the folder's six files, in sections that each name the
 * file defining them. The calls between the files go one way (plan.c uses
 * order.c, split.c, layout.c and cost.c; layout.c uses split.c and order.c;
 * split.c uses order.c; state.c uses plan.c), never back: no circle, which
 * tests/e2e/layering.sh checks on the objects. The only definitions here
 * are static inline helpers, the same in every file that uses them.
 */
#ifndef LF_PLAN_INTERNAL_H
#define LF_PLAN_INTERNAL_H

#include "lf_plan.h"

/* --- Shared arithmetic, defined here (order.c, plan.c, state.c use it). */

__extension__ typedef unsigned __int128 lfp_u128;
__extension__ typedef __int128 lfp_i128;

/* Counter-based hash (SplitMix64 finaliser): the only randomness there is. */
static inline uint64_t lfp_mix(uint64_t x)
{
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* A uniform draw below n from (key, counter); the bias is below n / 2^64. */
static inline uint64_t lfp_below(uint64_t key, uint64_t counter, uint64_t n)
{
    uint64_t r = lfp_mix(key ^ lfp_mix(counter));
    return (uint64_t)(((lfp_u128)r * n) >> 64);
}

/* --- Costs: cost.c. lf_plan_cost without a division: a term saturates
 * where coef * x passes LF_PLAN_COST_MAX << shift, compared in 128 bits
 * (coef < 2^64 and x < 2^64 multiply within them), which is where x passes
 * the largest x whose term stays below the limit, floor((LF_PLAN_COST_MAX
 * << shift) / coef), the bound the model's definition names: for integers,
 * x > floor(M / c) exactly when c * x > M. Cheap enough to recompute from
 * the length wherever the plan needs a cost (a pass over 10^8 samples
 * spent half its time in the two 128-bit divisions that bound was). */

typedef struct lfp_coster {
    uint64_t a, b, c0;           /* lf_plan_cost_model's a_q16, b_q32, c0 */
} lfp_coster;

void lfp_coster_init(lfp_coster *c, const lf_plan_cost_model *m);

/* coef * x >> shift, LF_PLAN_COST_MAX past the limit. x of 2^64 or more
 * (a length of 2^32 or more, squared: lf_plan_cost's, never the plan's)
 * divides. */
static inline uint64_t lfp_term(uint64_t coef, lfp_u128 x, unsigned shift)
{
    lfp_u128 lim = (lfp_u128)LF_PLAN_COST_MAX << shift;
    if (coef == 0 || x == 0) return 0;
    if (x >> 64 ? x > lim / coef : (lfp_u128)coef * (uint64_t)x > lim) return LF_PLAN_COST_MAX;
    return (uint64_t)(((lfp_u128)coef * x) >> shift);
}

static inline uint64_t lfp_sat_add(uint64_t x, uint64_t y)
{
    uint64_t s = x + y;
    return (s < x || s > LF_PLAN_COST_MAX) ? LF_PLAN_COST_MAX : s;
}

/* lf_plan_cost(model, len), bit for bit. */
static inline uint64_t lfp_coster_cost(const lfp_coster *c, uint64_t len)
{
    uint64_t lin = lfp_term(c->a, len, 16);
    uint64_t quad = lfp_term(c->b, (lfp_u128)len * len, 32);
    return lfp_sat_add(lfp_sat_add(lin, quad), c->c0);
}

/* Can a sample of this length ever be placed, whatever the others? */
static inline int lfp_fits_alone(const lf_plan_params *p, uint64_t len)
{
    if (p->rank_max_tokens && len > p->rank_max_tokens) return 0;
    if (p->layout == LF_PLAN_PACK) return len <= p->seq_len;
    if (p->micro_max_padded && len > p->micro_max_padded) return 0;
    return !(p->rank_max_padded && len > p->rank_max_padded);
}

/* A pass over every sample: for (i = 0 .. n), calling the view's release
 * every LF_PLAN_RELEASE_SCAN samples (lf_plan_view), params q. */
#define LFP_SCAN(q, i, n) \
    for (size_t i = 0; i < (n); lf_plan_view_passed((q), ++i, LF_PLAN_RELEASE_SCAN))

/* Checks a view (lf_plan_view) of n samples: its lengths (or segments:
 * lfp_segments_check) and blocks set, the block offsets ascending from 0
 * to n (pieces.c). 0 or LF_PLAN_E_ARG. */
int lfp_view_check(const lf_plan_params *p, size_t n);

/* Whether g holds n samples or more, first ascending from 0, a non-empty
 * segment's lengths set and chunk what lf_plan_segments_index writes for
 * the first n (segments.c: one entry a chunk, not a sample). 0 or
 * LF_PLAN_E_ARG. */
int lfp_segments_check(const lf_plan_segments *g, size_t n);

/* --- Samples cut into pieces: pieces.c. The plan's index s is a piece; a
 * sample's pieces are consecutive, in the samples' order (without a cut
 * the pieces are the samples). Which sample a piece is of, and its number
 * there, come from a bit a piece, set on each sample's first, and a count
 * a 64 pieces: 0.19 bytes a piece, where an array of the pieces was 24
 * while creating and the plan kept 10 (issue #35: 10^9 cut samples). */
typedef struct lfp_pieces {
    uint64_t len;                /* a whole piece's tokens; 0: no sample is
                                    cut (nothing else set) */
    uint64_t *first;             /* a bit a piece and one past the last:
                                    set on each sample's first piece */
    uint32_t *rank;              /* per 64 pieces: the samples begun before
                                    them (one more entry: all of them) */
    size_t words;                /* 64-bit words in first */
} lfp_pieces;

/* Whether piece s is a sample's first (s up to the pieces: the last bit is
 * set). */
static inline int lfp_piece_starts(const lfp_pieces *c, size_t s)
{
    return (int)(c->first[s >> 6] >> (s & 63) & 1);
}

/* The sample piece s is of, and *j its number there. */
static inline size_t lfp_piece_of(const lfp_pieces *c, size_t s, uint64_t *j)
{
    size_t w = s >> 6;
    uint64_t upto = c->first[w] & (~UINT64_C(0) >> (63 - (s & 63)));
    size_t i = c->rank[w] + (size_t)__builtin_popcountll(upto) - 1;
    while (!upto) upto = c->first[--w];   /* the sample began words before */
    *j = s - (w << 6 | (size_t)(63 - __builtin_clzll(upto)));
    return i;
}

/* Piece j's tokens of a sample of len tokens cut at piece. */
static inline uint64_t lfp_piece_tokens(uint64_t len, uint64_t piece, uint64_t j)
{
    uint64_t k = lf_plan_piece_count(len, piece);
    return k == 1 ? len : j + 1 < k ? piece : len - (k - 1) * piece;
}

/* list[lo..*n) holds some samples' first pieces, by id: appends their
 * other pieces after them, by (piece number, id), the order of their ids
 * (a piece's number sits above its sample's id). */
static inline void lfp_pieces_follow(const lfp_pieces *c, uint32_t *list, size_t lo, size_t *n)
{
    for (size_t hi = *n; lo < hi; lo = hi, hi = *n)
        for (size_t e = lo; e < hi; e++)
            if (!lfp_piece_starts(c, (size_t)list[e] + 1)) list[(*n)++] = list[e] + 1;
}

/* Cuts p's p->nraw samples (smp, or the view's) at piece: sets p->pc
 * where a sample is cut, and p->n to the pieces. 0, LF_PLAN_E_ARG (a cut
 * sample's id of 2^40 or more; 2^32 - 2 pieces or more) or
 * LF_PLAN_E_NOMEM. */
int lfp_pieces_make(lf_plan *p, const lf_plan_sample *smp, uint64_t piece);

/* Turns p's groups (group_start, group_members) from samples into pieces
 * where samples are cut: a group's pieces, by (block, id) as ever where a
 * group_members is kept. 0 or LF_PLAN_E_NOMEM. */
int lfp_pieces_groups(lf_plan *p);

/* --- Sorting: order.c. */

/* A sort key: longest first, then smaller id. */
typedef struct lfp_key {
    uint64_t len;
    uint64_t id;
    uint32_t idx;
} lfp_key;

/* Sorts keys longest first, then smaller id; tmp has room for n keys. */
void lfp_sort_keys(lfp_key *keys, size_t n, lfp_key *tmp);

/* --- The split of one step over the ranks: split.c. */

/* A KK subset: its sum (plus its tuple's base) and its items, a list
 * through lfp_split.next. */
typedef struct lfp_subset {
    uint64_t sum;
    uint32_t head, tail;
} lfp_subset;

/* The local search's last resort (split.c, best_exchange): sets of up to
 * LFP_SET_ITEMS items of one rank for a set of the other, at most
 * LFP_SETS_MAX sets listed a rank. */
#define LFP_SET_ITEMS 4u
#define LFP_SETS_MAX 4096u

/* Split scratch, sized for the largest step at create time. */
typedef struct lfp_split {
    uint32_t world;
    size_t maxn;
    /* Karmarkar-Karp: tuples of non-empty subsets, each a min-heap by sum */
    lfp_subset *sub[2];          /* slot arenas (double-buffered for compaction) */
    size_t arena_limit, arena_used;
    int arena_cur;
    uint32_t *tup_off, *tup_len, *tup_cap; /* per tuple: slice of the current arena */
    uint64_t *tup_base;          /* subtracted from every stored sum */
    uint64_t *tup_max;           /* largest stored sum (spread: tup_max - tup_base) */
    uint64_t *tup_seq;           /* creation order, for deterministic ties */
    uint32_t *heap;              /* tuple ids, max-heap by spread */
    size_t heap_len;
    uint32_t *next;              /* per item: next item in its subset */
    lfp_subset *tmp;             /* 2 * world: the subsets a merge pairs */
    uint32_t *tmp_ord, *tmp_aux; /* world + 1 scratch */
    /* per rank after the split */
    uint32_t *assign;            /* per item: rank */
    uint64_t *cost, *tokens;     /* per rank */
    uint64_t *excess;            /* per rank: Σ item excess (pack's row fill) */
    uint32_t leaves;             /* LPT tournament: ranks rounded up to a power of 2 */
    uint32_t *tree;              /* 2 * leaves: each node's winning rank */
    uint64_t *tree_cost;         /* leaves: each rank's cost */
    uint32_t *fit_tree;          /* pack's row fill: 2 * leaves, ranks out of play */
    uint64_t *fit;               /* leaves: the longest item each can take, + 1 */
    lfp_key *lo_keys;            /* 2 * maxn: a swap search's cheaper rank, sorted */
    lfp_key *rank_keys;          /* 2 * world: the ranks' costs, to sort */
    lfp_key *set_keys;           /* 3 * LFP_SETS_MAX: an exchange's sets of each
                                    rank (sum, entry) and the sort's scratch */
    uint32_t *set_items;         /* 2 * LFP_SETS_MAX * LFP_SET_ITEMS: their items */
    uint32_t *rank_order;        /* world: the ranks, cheapest first, in a search */
    uint32_t *rank_rows;         /* pack: per rank, rows opened by the row fill */
    uint32_t *row_head;          /* pack: per rank, its first row (NONE: none) */
    uint32_t *row_next;          /* pack: per row, the rank's next row */
    uint32_t *row_of;            /* pack: per item, its row (NONE: over the rows) */
    uint64_t *row_room;          /* pack: per row, tokens left (rows <= items) */
    uint32_t nrows;              /* pack: rows opened this step */
    uint32_t *members;           /* items grouped by rank (rank_start) */
    uint32_t *rank_start;        /* world + 1 */
    uint64_t *scratch, *room;    /* item-sized scratch for cap checks */
    lfp_key *keys;               /* items by cost, costliest first; 2 * maxn */
    uint64_t *offset;            /* per rank: cost besides its items (d per
                                    micro-batch), set by the caller for a polish */
} lfp_split;

/* One split instance: item costs, lengths and ids (for ties). */
typedef struct lfp_items {
    size_t n;
    const uint64_t *cost;
    const uint64_t *len;
    const uint64_t *id;
    const uint64_t *excess;      /* pack: cost above the leanest price per token,
                                    what KK and the row fill even out (NULL: pad) */
    const uint8_t *urgent;       /* pack: left out, it would wait past max_defer */
    size_t kk;                   /* items KK places at least (else world * 4) */
} lfp_items;

/* Memory caps applied by the split (0: none). */
typedef struct lfp_caps {
    uint64_t max_tokens;
    uint64_t max_padded;
    uint32_t layout;
    uint32_t seq_len;
    uint64_t row_tokens;         /* pack: a rank's whole rows this step, in tokens:
                                    a cap, and what the small items fill up to */
    uint64_t max_samples;        /* items a rank (lf_plan_cap_later_samples) */
} lfp_caps;

int lfp_split_init(lfp_split *s, uint32_t world, size_t maxn);
void lfp_split_free(lfp_split *s);

/* Splits items over s->world ranks. Items the caps leave no room for get
 * assign = UINT32_MAX (the caller defers them). Fills assign, cost, tokens,
 * members and rank_start. Returns the number of unplaced items. */
size_t lfp_split_run(lfp_split *s, const lfp_items *it, const lfp_caps *caps);

/* Reruns the local search with s->offset added to each rank's cost (the
 * split's assign must be current; offsets are zeroed by lfp_split_run). */
void lfp_split_polish(lfp_split *s, const lfp_items *it, const lfp_caps *caps);

/* --- One rank's layout: layout.c (lfp_micro_cut), split.c (lfp_pack_rows,
 * which the split's row fill uses too). */

/* Cuts lens_desc[0..n) (longest first) into micro-batches of consecutive
 * items minimising sum(items * first L) + overhead per micro-batch, each
 * with items * first L <= cap (every L <= cap); deterministic (layout.c).
 * start gets the micro+1 offsets; best and cut are (n+1)-sized scratch.
 * Returns the micro-batch count. */
uint32_t lfp_micro_cut(const uint64_t *lens_desc, size_t n, uint64_t cap, uint64_t overhead,
                       uint64_t *best, uint32_t *cut, uint32_t *start);

/* Best-fit decreasing: packs lens_desc[0..n) (longest first, each <= seq_len)
 * into rows of seq_len; row_of[i] (optional) gets item i's row, rows in the
 * order they were opened. room is n-sized scratch. Returns the row count. */
uint32_t lfp_pack_rows(const uint64_t *lens_desc, size_t n, uint32_t seq_len,
                       uint64_t *room, uint32_t *row_of);

/* A uniform shuffle of [0, n) drawn as it goes (order.c): a Feistel network
 * of PERM_ROUNDS rounds on 2 x half bits (2^(2 half) >= n), its round keys
 * from (seed, epoch), walked along its cycle until it lands below n. */
#define LFP_PERM_ROUNDS 6
typedef struct lfp_perm {
    uint64_t n;                  /* the domain */
    uint64_t x;                  /* the next position to map */
    uint32_t half;               /* bits a half */
    uint64_t key[LFP_PERM_ROUNDS];
} lfp_perm;

/* A locality-aware order drawn as it goes (order.c): the open blocks'
 * pending samples are pool (the source's part of p->pool), the blocks
 * p->gperm + glo in shuffled order, each one's pending count grem[g]
 * (p->grem). */
typedef struct lfp_draw {
    uint64_t key;                /* the draws' key, from (seed, epoch, source) */
    uint32_t glo, ng;            /* the source's groups */
    uint32_t next, open;         /* the next block to open; blocks open */
    size_t pool_n;               /* samples in the pool */
    uint64_t t;                  /* draws made: the next draw's counter */
    size_t left;                 /* draws left */
    uint32_t *pool, *pool_group; /* the open blocks' pending samples, their groups */
    uint32_t *grem;              /* per group (all of the plan's): samples pending */
} lfp_draw;

/* One source of a mixture, drawn as it goes (order.c): balanced, its own
 * locality-aware order (draw); naive and sorted, its own shuffle (perm) of
 * its members lo .. lo + perm.n - 1 (a source's blocks are consecutive,
 * so are its members), samples that fit no cap skipped. */
typedef struct lfp_source {
    lfp_draw draw;               /* balanced */
    lfp_perm perm;               /* naive, sorted */
    uint32_t lo;                 /* its first member (p->group_start[src_group[s]]) */
    size_t pool_at;              /* balanced: its pool's place in p->pool */
    size_t placeable;            /* its samples that fit a cap: an epoch's most */
    size_t left;                 /* not yet drawn this epoch */
    uint64_t tokens;             /* drawn this epoch: the interleave's measure */
} lfp_source;

/* Where a mixture's interleave is: every source's draw and whose turn is
 * next (the least tokens against its weight). The epoch's order ends when
 * the source whose turn it is has none left. A copy walks ahead of it
 * (lfp_order_left). */
typedef struct lfp_mixpos {
    lfp_source src[LF_PLAN_MAX_SOURCES];
    uint32_t turn;
} lfp_mixpos;

/* --- The plan: plan.c creates it and steps it; order.c builds its order,
 * layout.c lays out its ranks' batches, state.c saves and restores it. */

struct lf_plan {
    lf_plan_params prm;          /* resolved: no zero defaults left */
    size_t n;                    /* samples planned: the pieces */
    size_t nraw;                 /* samples given (n where none is cut) */
    lfp_pieces pc;               /* the pieces of the samples given */
    int pc_shared;               /* pc is the view's cut's (prm.view.cut), not
                                    the plan's to free */
    uint16_t *len16;             /* per sample given: its length, where */
    const uint32_t *len32;       /* every length is below 2^16, else in 32 bits:
                                    len32_own, or the caller's view (prm.view:
                                    read in place, it outlives the plan); both
                                    NULL: the view's segments (several arrays) */
    uint32_t *len32_own;         /* the copy len32 points at (NULL: a view) */
    uint64_t *id;                /* per sample given: its id; NULL: ids are
                                    0..nraw-1 */
    lfp_coster coster;           /* prm.cost, for lfp_cost */
    size_t ncapfail;             /* samples that fit no cap or row (lfp_capfail) */
    uint64_t longest_fit;        /* the longest sample that fits (lf_plan_cap_later) */
    uint64_t shortest_fit;       /* the shortest (UINT64_MAX: none; lf_plan_rank_samples_max) */
    uint64_t capfail_tokens;     /* their tokens: left out every epoch */
    uint32_t ngroups;
    uint32_t *group_start;       /* ngroups + 1 offsets into group_members */
    uint32_t *group_members;     /* samples by (block, id); NULL: the samples
                                    came so, member k is sample k */
    uint32_t *gperm, *grem;      /* per group: shuffled order, samples pending */
    uint64_t gperm_key;          /* one source: the key gperm is shuffled by (valid
                                    when gperm_made), so an epoch begun again (a
                                    rewind, a restore) keeps it */
    int gperm_made;
    uint32_t *pool, *pool_group; /* the open blocks' pending samples and their
                                    groups while building an order */
    size_t pool_cap;             /* the most samples locality_blocks blocks hold */
    lfp_key *keys;               /* 2 * sort_cap entries of sort scratch */
    size_t sort_cap;             /* sorted: mega-batch size (at most n); else maxstep */
    uint64_t hash;               /* of the samples and the sequence parameters */
    /* a mixture (order.c); one source: nsrc 1 */
    uint32_t nsrc;               /* sources */
    uint32_t src_group[LF_PLAN_MAX_SOURCES + 1]; /* source s's blocks: groups
                                    src_group[s] .. src_group[s+1]-1 */
    uint64_t hash_v1;            /* naive/sorted: the hash order version 1
                                    gave (plan.c version_hash); else 0 */
    uint64_t weights_hash;       /* of the weights, apart from hash: a state
                                    restores onto other weights between epochs */
    /* pack: a step fills rows of seq_len in tokens besides its budget in cost */
    uint64_t rows;               /* rows a normal step fills (0: pad, no rows) */
    lfp_u128 price;              /* Q32 cost per token of a row (plan.c) */
    lfp_u128 lean_q;             /* Q32: the least cost per token of a sample
                                    that is no outlier */
    uint64_t rich_l;             /* the length of the one with the most */

    /* lf_plan_cap_later: set by the caller, not part of the state */
    uint64_t later_cap;          /* 0: none */
    uint64_t later_samples;      /* lf_plan_cap_later_samples (0: none) */
    uint32_t later_from;         /* the first epoch it holds in */

    /* position */
    uint32_t epoch;
    int epoch_done;              /* the last call returned 0 */
    uint64_t step;               /* steps done in this epoch */
    /* the epoch's order (capfail samples left out) is drawn as the window
     * refills, never held whole (order.c) */
    lfp_draw draw;               /* one source, balanced: where the drawing is */
    lfp_perm perm;               /* one source, naive/sorted: the shuffle */
    lfp_mixpos mix;              /* a mixture: its sources' draws, interleaved */
    size_t mega_lo, mega_n;      /* sorted: the mega-batch in keys[0..mega_n),
                                    from order position mega_lo */
    size_t norder;               /* one source: the order's length (a
                                    mixture's is known when drawn) */
    size_t cursor;               /* order positions drawn */
    uint32_t *pidx, *page;       /* pending window: sample, due step */
    uint32_t due_floor;          /* no pending entry is due before this step
                                    (a bound: the late pass is skipped below it) */
    uint64_t due_step, due_rem;  /* the summed cost of the normal samples pulled
                                    so far, as steps of step_budget and the
                                    remainder (the sum itself passes 2^64) */
    size_t np;
    uint32_t *oidx, *owait;      /* held outliers: sample, steps waited */
    size_t no, ocap;
    uint32_t *rej;               /* outliers rejected this epoch */
    size_t nrej;
    uint64_t emitted;            /* placed this epoch */

    /* current step */
    size_t maxstep;              /* the most samples a step holds (baselines: <= n) */
    int have_step;
    uint32_t *sidx, *sdelay;     /* the step's samples and their delays */
    uint8_t *sfrom_o;            /* per step item: came from the outlier queue */
    uint8_t *ptaken;             /* per pending entry: taken this step */
    uint64_t *sids;
    size_t ns, nout;
    uint64_t tok_cap;            /* pack: the step's rows in tokens */
    uint32_t *rank_start;
    uint64_t *rank_ids, *rank_cost, *rank_tokens;
    uint32_t *rank_idx;          /* rank_ids as sample indices */
    uint32_t *rank_sorted;       /* the same, each rank's in the split's order
                                    (cost, then id), valid if sorted_ok */
    int sorted_ok;
    lf_plan_step cur;
    lfp_split split;
    uint64_t *item_cost, *item_len, *item_id;   /* the step's items, for the split */
    uint64_t *item_excess;       /* pack: cost - leanest price * L */
    uint8_t *item_urgent;        /* pack: an outlier, or max_defer steps late */
    uint32_t *keep_assign;       /* the split kept while balancing overheads */
    /* select WORLD (plan.c, "selection for the world"): the step as bins */
    uint64_t bin_cap;            /* a bin's share of the step's budget (0: off) */
    uint64_t bin_tol;            /* a bin this far below its share is full */
    uint32_t bins_short;         /* bins not yet full */
    uint64_t *bin;               /* per rank: the cost of its bin */
    uint32_t *sbin;              /* per step item: its bin */
    uint32_t *swin;              /* per step item: its window entry, if the scan
                                    took it (it may give it back), else NONE */
    /* select WORLD on text cut into pieces (plan.c, "steps of whole pieces") */
    uint64_t level;              /* every step's cost: world x piece_k whole
                                    pieces (0: off, the budget's) */
    uint64_t piece_len, piece_cost;   /* a whole piece: the longest placeable
                                    length, and its cost */
    uint32_t piece_k;            /* whole pieces a bin */
    int level_known;             /* level worked out (once, at the first epoch) */

    /* one rank's layout */
    uint64_t *b_ids, *b_lens, *b_room;
    lfp_key *b_keys;             /* 2 * maxstep: sort keys and scratch */
    uint32_t *b_row_of, *b_row_start, *b_cu, *b_fill;
    uint32_t *b_micro_start, *b_micro_len, *b_cut;
    uint64_t *b_best;            /* micro-batch cuts: best objective per prefix */
};

/* Sample s's length (of the samples given: lfp_given_len; of a piece:
 * lfp_len), cost, id, whether it fits no cap or row (never placed: the
 * micro_max_padded default, set after, is the longest that fits, so the
 * answer is the same), and the sample at position k by (block, id). */
static inline uint64_t lfp_given_len(const lf_plan *p, size_t i)
{
    if (p->len32) return p->len32[i];   /* a view of one array: its read, first */
    return p->len16 ? p->len16[i] : lf_plan_segments_at(p->prm.view.segments, i);
}

static inline uint64_t lfp_len(const lf_plan *p, size_t s)
{
    if (!p->pc.len) return lfp_given_len(p, s);
    uint64_t j;
    size_t i = lfp_piece_of(&p->pc, s, &j);
    return lfp_piece_tokens(lfp_given_len(p, i), p->pc.len, j);
}

static inline uint64_t lfp_cost(const lf_plan *p, size_t s)
{
    return lfp_coster_cost(&p->coster, lfp_len(p, s));
}

static inline uint64_t lfp_id(const lf_plan *p, size_t s)
{
    if (!p->pc.len) return p->id ? p->id[s] : s;
    uint64_t j;
    size_t i = lfp_piece_of(&p->pc, s, &j);
    return (p->id ? p->id[i] : i) | j << LF_PLAN_PIECE_SHIFT;
}

static inline int lfp_capfail(const lf_plan *p, size_t s)
{
    return !lfp_fits_alone(&p->prm, lfp_len(p, s));
}

static inline uint32_t lfp_member(const lf_plan *p, size_t k)
{
    return p->group_members ? p->group_members[k] : (uint32_t)k;
}

/* Adds one sample's cost (at most step_budget: not an outlier) to the
 * due position. */
static inline void lfp_due_add(lf_plan *p, uint64_t cost)
{
    uint64_t b = p->level ? p->level : p->prm.step_budget;
    p->due_rem += cost;
    while (p->due_rem >= b) {
        p->due_rem -= b;
        p->due_step++;
    }
}

/* Starts drawing the order of p->epoch: order.c. */
void lfp_order_build(lf_plan *p);

/* Position x of the shuffle q (x < q->n), a bijection of [0, q->n): order.c. */
uint64_t lfp_perm_at(const lfp_perm *q, uint64_t x);

/* Starts q as the shuffle of [0, n) keyed by key: order.c. */
void lfp_perm_start(lfp_perm *q, uint64_t n, uint64_t key);

/* The order's next sample (lfp_order_more): order.c. */
uint32_t lfp_order_draw(lf_plan *p);

/* Does the order give another sample this epoch? */
static inline int lfp_order_more(const lf_plan *p)
{
    if (p->nsrc <= 1) return p->cursor < p->norder;
    return p->cursor < p->mega_lo + p->mega_n || p->mix.src[p->mix.turn].left > 0;
}

/* The samples the order has still to give, or limit where that is fewer:
 * one source knows; a naive or sorted mixture walks ahead on a copy of its
 * sources' shuffles (at most limit draws; none where every source has
 * limit left). A baseline's step asks for its own size and a world more
 * (select_fixed); a balanced mixture is never asked (its copy would need
 * the pools and the groups' counts). order.c. */
size_t lfp_order_left(const lf_plan *p, size_t limit);

/* Moves the order of one source, naive or sorted, in which every sample
 * fits its caps, from its epoch's start to position cursor (<= norder)
 * without drawing what comes before (sorted: the mega-batch holding the
 * cursor): order.c. */
void lfp_order_seek(lf_plan *p, size_t cursor);

/* A shuffle's draws read lengths all over the view: each read of a mapped
 * length maps the pages around it too (the kernel's fault-around, 64 KiB;
 * where the page cache holds the index in large folios, as ext4 on Linux
 * 6.18 does, a whole folio: 250 KiB a read on average here), so
 * LF_PLAN_RELEASE_DRAW's 2^14 draws held 1 GB of a 4 GB view at 10^9
 * samples, and 2^12 draws did too once the folios were large. A view of
 * more than LFP_SHUFFLE_VIEW_HELD bytes is released every 2^10 draws
 * (10^9 naive, --steps 2000: peak 1.80 -> 1.43 GB, system time 13 -> 18 s;
 * every 2^8, 1.26 GB but 24 s: each release walks the whole mapping); a
 * smaller one every 2^14 (a release every 2^12 cost 3.6x the system time
 * of a 10^7-sample epoch, 40 MB, whose pages came back at once). The shuffle
 * counts its draws (order.c), and a baseline's steps, which read their
 * samples' lengths again, its positions (lfp_order_next); a balanced
 * order reads block by block and keeps LF_PLAN_RELEASE_DRAW. */
#define LFP_SHUFFLE_VIEW_HELD (UINT64_C(256) << 20)

static inline size_t lfp_shuffle_release(const lf_plan *p)
{
    return (uint64_t)p->nraw * sizeof(uint32_t) > LFP_SHUFFLE_VIEW_HELD ? 1u << 10
                                                                     : LF_PLAN_RELEASE_DRAW;
}

/* The sample at the cursor, the cursor moved past it (lfp_order_more). */
static inline uint32_t lfp_order_next(lf_plan *p)
{
    lf_plan_view_passed(&p->prm, ++p->cursor, p->prm.sampler == LF_PLAN_BALANCED
                                                  ? LF_PLAN_RELEASE_DRAW
                                                  : lfp_shuffle_release(p));
    return lfp_order_draw(p);
}

/* Checks and sets up a mixture's sources (p's samples, groups and capfail
 * filled): order.c. Returns 0 or LF_PLAN_E_ARG / LF_PLAN_E_NOMEM. */
int lfp_mix_init(lf_plan *p);

/* Restarts the position at the beginning of epoch e: plan.c. */
void lfp_epoch_begin(lf_plan *p, uint32_t e);

#endif
