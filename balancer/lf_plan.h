/*
 * lf_plan.h — levelfeed's balancer: which samples each rank gets, step by step.
 *
 * A plan is a pure function of (samples, parameters, seed, epoch): the same
 * inputs give bit-identical steps on every node, any run, and after a resume
 * from a saved state. Costs are fixed-point integers, ties are broken by
 * sample id, and randomness comes from a counter-based hash keyed by
 * (seed, epoch), so no floating point or platform detail enters a decision.
 *
 * Per step the planner (1) selects a global set of samples whose total cost
 * fills a global budget (independent of world size, unless select is
 * LF_PLAN_SELECT_WORLD: world equal bins), drawing from a
 * locality-aware shuffle through a lookahead window with bounded deferral;
 * (2) splits that set across ranks (k-way Karmarkar–Karp with free per-rank
 * counts over the costliest samples, LPT for the rest, then a move/swap local
 * search under the per-rank memory caps); (3) on request,
 * lays out one rank's samples (pad: sorted by length and cut into
 * micro-batches, each padded to its longest; pack: best-fit decreasing rows
 * of seq_len with cu_seqlens). Step (3) is per rank, so a
 * server computes the global steps but lays out only its local ranks. In
 * pack mode a balanced step also fills whole rows in tokens and the split
 * fills each rank's rows (README.md, "Pack: full rows").
 *
 * Conventions: functions return 0 (or a count) on success and a negative
 * lf_plan_status on failure; out-parameters are untouched on failure.
 * Nothing here prints, exits, aborts, does I/O or starts threads. Memory is
 * allocated at lf_plan_create only; stepping, new epochs and restores write
 * into it. A plan belongs to one thread at a time.
 * README.md beside this file defines every reported metric.
 */
#ifndef LF_PLAN_H
#define LF_PLAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes: negative values are errors. */
typedef enum lf_plan_status {
    LF_PLAN_OK = 0,
    LF_PLAN_E_ARG = -1,          /* a parameter or argument is invalid */
    LF_PLAN_E_NOMEM = -2,        /* allocation failed */
    LF_PLAN_E_STATE = -3,        /* a state blob is malformed or for other inputs */
    LF_PLAN_E_BUFFER = -4,       /* a caller buffer is too small */
    LF_PLAN_E_RANGE = -5,        /* a rank or index is out of range */
    LF_PLAN_E_VERSION = -6,      /* a state blob of another layout version */
    LF_PLAN_E_OVERFLOW = -7,     /* an outlier step's cost could pass 2^63 */
    LF_PLAN_E_WEIGHTS = -8,      /* a state saved inside an epoch under other
                                    mixture weights */
} lf_plan_status;

/* A short static description of a status code. */
const char *lf_plan_strerror(int status);

/* ---- cost model --------------------------------------------------------- */

/* c(L) = a*L + b*L^2 + c0 per sample, in integer cost units, plus d per
 * micro-batch. a is Q16 (cost units per length unit * 2^16), b is Q32 (cost
 * units per length unit squared * 2^32); products are exact in 128 bits and
 * the result saturates at LF_PLAN_COST_MAX. The presets use
 * LF_PLAN_COST_PER_UNIT cost units per token / frame / pixel of linear work. */
#define LF_PLAN_COST_PER_UNIT 16u
#define LF_PLAN_COST_MAX (UINT64_C(1) << 52)

typedef struct lf_plan_cost_model {
    uint64_t a_q16;              /* linear coefficient, Q16 */
    uint64_t b_q32;              /* quadratic coefficient, Q32 */
    uint64_t c0;                 /* per-sample constant, cost units */
    uint64_t d;                  /* per micro-batch overhead, cost units */
} lf_plan_cost_model;

typedef enum lf_plan_preset {
    LF_PLAN_PRESET_TEXT = 0,     /* L = tokens; b/a = 1/(12*hidden) (attention FLOPs) */
    LF_PLAN_PRESET_FRAMES = 1,   /* L = frames; same shape as text, per frame */
    LF_PLAN_PRESET_IMAGES = 2,   /* L = pixels; linear only */
} lf_plan_preset;

/* Fills *m for a preset; hidden is the model width (text, frames; 0: 4096).
 * Returns 0 or LF_PLAN_E_ARG. */
int lf_plan_cost_preset(lf_plan_cost_model *m, int preset, uint32_t hidden);

/* Fills *m from real coefficients (a, b per length unit, c0 and d in cost
 * units), rounded to the nearest fixed-point value. Returns 0 or
 * LF_PLAN_E_ARG (negative, not finite, or too large). */
int lf_plan_cost_set(lf_plan_cost_model *m, double a, double b, double c0, double d);

/* The cost of one sample of length L (without d). */
uint64_t lf_plan_cost(const lf_plan_cost_model *m, uint64_t length);

/* ---- inputs ------------------------------------------------------------- */

/* What the planner knows of one sample. Ids must be unique; blocks group
 * samples that are stored (and read) together. */
typedef struct lf_plan_sample {
    uint64_t id;                 /* dataset-wide sample id (ties break by it) */
    uint64_t length;             /* cost input L: tokens, frames or pixels; below
                                    2^32 (the plan keeps 32 bits of it) */
    uint64_t block;              /* storage block, for the locality-aware shuffle */
} lf_plan_sample;

typedef enum lf_plan_sampler {
    LF_PLAN_BALANCED = 0,        /* budget selection + free-count split */
    LF_PLAN_NAIVE = 1,           /* full shuffle, batch_per_rank samples per rank
                                    (as DistributedSampler with a fixed batch) */
    LF_PLAN_SORTED = 2,          /* shuffle, then sort by length inside mega-batches
                                    of 50 global batches (as HF group_by_length) */
} lf_plan_sampler;

typedef enum lf_plan_outlier {
    LF_PLAN_OUTLIER_DELAY = 0,   /* hold outliers; release a group of them together */
    LF_PLAN_OUTLIER_REJECT = 1,  /* leave them out of the epoch and count them */
} lf_plan_outlier;

typedef enum lf_plan_layout {
    LF_PLAN_PAD = 0,             /* one sample a row, sorted longest first and cut
                                    into micro-batches, each padded to its longest */
    LF_PLAN_PACK = 1,            /* best-fit decreasing into rows of seq_len */
} lf_plan_layout;

/* A mixture: the samples are the union of `sources` datasets (a union
 * dataset numbers them one after the other: lf_dataset_open_many), source s
 * holding the sample ids first[s] .. first[s+1]-1 (the last one, from
 * first[sources-1] on), each drawn for its share weight[s] / sum of the
 * weights of an epoch's TOKENS (lengths). Each epoch every source is
 * shuffled afresh (the sampler's order, keyed by seed, epoch and source) and
 * the sources are interleaved so that at every point each one's tokens
 * drawn stay as close as they can to its share of all drawn (the source
 * furthest behind its share gives the next sample); the epoch ends when the
 * source furthest behind has none left, and what the others did not draw
 * is drawn from their next epoch's shuffle (README.md, "Mixtures").
 * sources 0 or 1: no mixture, the plan of old. Every source must hold a
 * sample the plan can place, and the samples of a block one source. */
#define LF_PLAN_MAX_SOURCES 32
#define LF_PLAN_WEIGHT_ONE 1000000u  /* the tools' weights: parts per million */

typedef struct lf_plan_mix {
    uint32_t sources;            /* 0, 1: no mixture; at most LF_PLAN_MAX_SOURCES */
    uint32_t weight[LF_PLAN_MAX_SOURCES];  /* each > 0; shares are weight / sum */
    uint64_t first[LF_PLAN_MAX_SOURCES];   /* first[0] = 0, strictly ascending */
} lf_plan_mix;

/* The source of a sample id (or of a piece's id) under mix: 0 without a
 * mixture. */
uint32_t lf_plan_mix_source(const lf_plan_mix *mix, uint64_t id);

/* Lengths held in several arrays, read as one: a union of datasets
 * (lf_dataset_open_many, a mixture's sources and a held-out set after
 * them) maps each source's index.lfx on its own and numbers their samples
 * one after another. Segment k holds samples first[k] .. first[k+1]-1,
 * sample i's length being lengths[k][i - first[k]] (an empty segment,
 * first[k] = first[k+1], is never read; its lengths may be NULL). chunk
 * says, for each run of 2^LF_PLAN_SEGMENT_SHIFT samples, the segment of
 * the run's first sample, so a read is one table entry, a compare and the
 * length (lf_plan_segments_at; a loop only in a run where segments end,
 * one step a segment ending there): lf_plan_segments_index fills it. The
 * caller owns the struct, the arrays and chunk, and keeps them unchanged
 * while any view of them is read. */
#define LF_PLAN_MAX_SEGMENTS 64
#define LF_PLAN_SEGMENT_SHIFT 12

typedef struct lf_plan_segments {
    uint32_t count;                                 /* 1 .. LF_PLAN_MAX_SEGMENTS */
    const uint32_t *lengths[LF_PLAN_MAX_SEGMENTS];  /* segment k's lengths */
    uint64_t first[LF_PLAN_MAX_SEGMENTS + 1];       /* first[0] = 0, ascending; first[count]
                                                       = the samples in all */
    const uint8_t *chunk;                           /* lf_plan_segments_chunks entries */
} lf_plan_segments;

/* The entries chunk holds for n samples. */
static inline size_t lf_plan_segments_chunks(uint64_t n)
{
    return (size_t)(n >> LF_PLAN_SEGMENT_SHIFT) + 1;
}

/* Checks g (count, first, a non-empty segment's lengths set) and fills
 * chunk (lf_plan_segments_chunks(g->first[g->count]) entries), pointing
 * g->chunk at it. Returns 0 or LF_PLAN_E_ARG. */
int lf_plan_segments_index(lf_plan_segments *g, uint8_t *chunk);

/* The segment of sample i, and sample i's length (i < first[count]). */
static inline uint32_t lf_plan_segment_of(const lf_plan_segments *g, uint64_t i)
{
    uint32_t k = g->chunk[i >> LF_PLAN_SEGMENT_SHIFT];
    while (i >= g->first[k + 1]) k++;
    return k;
}

static inline uint32_t lf_plan_segments_at(const lf_plan_segments *g, uint64_t i)
{
    uint32_t k = lf_plan_segment_of(g, i);
    return g->lengths[k][i - g->first[k]];
}

/* The samples as a dataset's index holds them, read where they lie (a
 * mapped index.lfx: 4 bytes a sample) instead of an lf_plan_sample array
 * (24): sample i has id i and length lengths[i] (or, with lengths NULL,
 * segments' sample i: several arrays, a union's); block b holds samples
 * block_start[b] .. block_start[b+1]-1 (blocks + 1 ascending offsets from
 * 0 to n; an empty block is skipped). lf_plan_create,
 * lf_plan_pack_budget and lf_plan_bound_cost's callers read it where they
 * are given no array (samples NULL) and params.view.lengths or .segments is
 * set; given an array, they read the array and ignore the view. A plan
 * created from a view reads the lengths there for as long as it lives (it
 * keeps no copy of them, README.md, *Memory a sample*; samples cut into
 * pieces too): the caller keeps them, unchanged, until lf_plan_free. The
 * block offsets are copied.
 * Changed (issue #35): `segments` is new, after `lengths`; a caller that
 * names the fields it sets (designated initializers) needs no change. */
typedef struct lf_plan_view {
    const uint32_t *lengths;     /* n lengths (NULL: segments', or no view) */
    const lf_plan_segments *segments; /* with lengths NULL: the lengths in
                                    several arrays (NULL: no view). Read
                                    through lf_plan_view_length */
    const uint32_t *block_start; /* blocks + 1 offsets */
    uint32_t blocks;
    /* Optional (NULL: none): called every LF_PLAN_RELEASE_SCAN samples of a
     * pass over all the lengths (creating, a naive or mixed epoch's
     * shuffle) and every LF_PLAN_RELEASE_DRAW samples an epoch's order
     * gives, so a caller whose lengths are a file mapping drops the pages
     * read so far (madvise MADV_DONTNEED) and its resident memory holds
     * what the plan reads between two calls, not the whole file. The plan
     * keeps no pointer into the lengths across a call: it reads them again. */
    void (*release)(void *arg);
    void *release_arg;
    /* Optional (NULL: none): how many of the first hist_n samples have each
     * length, hist[L] for L < hist_len (every one of them shorter). A pass
     * over n = hist_n samples whose order does not matter (sums, counts,
     * the longest: lf_plan_lengths_next) reads these counts instead of n
     * lengths: at 10^8 samples creating a plan made some ten such passes. */
    const uint32_t *hist;
    uint32_t hist_len;
    size_t hist_n;
    /* Optional (digest_n 0: none): lf_plan_view_digest of the first
     * digest_n samples, as the dataset's index summary stores it. A plan
     * of exactly those samples in which none fails a cap starts its
     * sequence hash from it instead of reading every length (at 10^9
     * samples that read was 7 s of start-up, twice); the caller answers for
     * it being the digest of these lengths and blocks. */
    uint64_t digest;
    size_t digest_n;
    /* Optional (NULL: none): lf_plan_cut_make's cut of these samples. A
     * plan of them cut at its length takes it rather than cutting them
     * itself; the caller keeps it until lf_plan_free. */
    const struct lf_plan_cut *cut;
} lf_plan_view;

/* Whether v is a view at all, and its sample i's length. */
static inline int lf_plan_view_set(const lf_plan_view *v)
{
    return v->lengths || v->segments;
}

static inline uint32_t lf_plan_view_length(const lf_plan_view *v, size_t i)
{
    return v->lengths ? v->lengths[i] : lf_plan_segments_at(v->segments, i);
}

/* What lf_plan_view_digest computes: a version of it (an index summary
 * stores it with its digest, and a reader takes a digest of another kind
 * for none). */
#define LF_PLAN_DIGEST_KIND 1u

/* The digest of a view's first n samples (ids 0..n-1, the view's lengths
 * and its blocks, an empty block skipped), the part of a plan's sequence
 * hash that reads every sample, taken as if none failed a cap: what
 * lf_plan_view's digest holds. One pass over the n lengths, releasing the
 * view's pages as lf_plan_view_passed. */
uint64_t lf_plan_view_digest(const lf_plan_view *v, size_t n);

#define LF_PLAN_RELEASE_SCAN (1u << 20)
#define LF_PLAN_RELEASE_DRAW (1u << 14)

/* Plan parameters. lf_plan_params_default fills sensible values; a zero in a
 * field marked (0: ...) selects the default named there. */
typedef struct lf_plan_params {
    uint32_t sampler;            /* lf_plan_sampler */
    uint32_t world;              /* ranks, >= 1 */
    uint64_t step_budget;        /* balanced: global cost per step (required, > 0) */
    uint32_t batch_per_rank;     /* naive, sorted: samples per rank per step */
    uint64_t rank_max_tokens;    /* memory cap: sum of L per rank per step (0: none) */
    uint64_t rank_max_padded;    /* memory cap: padded tokens per rank per step,
                                    pad: count*max L, pack: rows*seq_len (0: none).
                                    Balanced only: the baselines take a fixed count
                                    a rank, and a cap with them is LF_PLAN_E_ARG */
    uint32_t lookahead;          /* samples the selection may look at (0: four
                                    steps' worth, at least 4096) */
    uint32_t max_defer;          /* steps past its due step after which a sample
                                    goes first (0: 4); see README.md */
    uint32_t outlier_policy;     /* lf_plan_outlier */
    uint64_t outlier_cost;       /* a sample costlier than this is an outlier
                                    (0: step_budget / world; balanced pack:
                                    less, as far as a sample's cost above
                                    its tokens' price reaches 2/5 of a
                                    rank's share of that, see README.md) */
    uint32_t outlier_group;      /* outliers released together (0: world;
                                    balanced pack: 8 * world) */
    uint32_t locality_blocks;    /* blocks drawn from at once (0: 64; 1: block order) */
    uint64_t seed;
    uint32_t epoch;              /* the first epoch planned */
    uint32_t layout;             /* lf_plan_layout */
    uint32_t seq_len;            /* pack: row length (required for pack) */
    lf_plan_cost_model cost;
    /* pad: the rank's sorted samples are cut into micro-batches minimising
     * padded tokens + micro_overhead per micro-batch (see README.md); both
     * fields at most 2^36, else LF_PLAN_E_ARG */
    uint64_t micro_max_padded;   /* pad: cap on one micro-batch's samples * its
                                    longest L (0: the longest sample's L) */
    uint64_t micro_overhead;     /* pad: a micro-batch's fixed cost in tokens, for
                                    the cuts (0: cost.d / cost per token when d > 0,
                                    else LF_PLAN_MICRO_OVERHEAD) */
    uint32_t step_bound;         /* balanced, delay: an outlier step costs at most
                                    step_bound / 1000 x step_budget where its
                                    outliers allow; held outliers go out the
                                    step after they arrive, up to
                                    outlier_group a step
                                    (0: LF_PLAN_STEP_BOUND; LF_PLAN_UNBOUNDED:
                                    groups of outlier_group, their step growing
                                    by the group; see README.md, "Bounded
                                    steps") */
    uint32_t overflow;           /* lf_plan_overflow: a sample longer than a
                                    row or a cap (0: split it into pieces) */
    lf_plan_mix mix;             /* several sources by weight (zero: one) */
    uint32_t select;             /* lf_plan_select: which samples share a step
                                    (0: LF_PLAN_SELECT_STEP) */
    lf_plan_view view;           /* the samples read in place, where the calls
                                    below are given no array (zero: none) */
    uint64_t split_at;           /* overflow split: cut samples longer than
                                    this into pieces of it, whatever the caps
                                    (0: at the row or cap, lf_plan_piece_len):
                                    a baseline without balanced's caps plans
                                    the pieces balanced plans */
} lf_plan_params;

/* A pass over the view that has read i samples (i = 1, 2, ...): calls its
 * release every `every` samples (LF_PLAN_RELEASE_SCAN for a caller's own
 * pass over all of them), where it has one. */
static inline void lf_plan_view_passed(const lf_plan_params *params, size_t i, size_t every)
{
    if (params->view.release && i % every == 0) params->view.release(params->view.release_arg);
}

/* Sample i's length: samples[i].length, or with samples NULL, the view's. */
static inline uint64_t lf_plan_length_at(const lf_plan_params *params,
                                         const lf_plan_sample *samples, size_t i)
{
    return samples ? samples[i].length : lf_plan_view_length(&params->view, i);
}

/* A piece's number sits above this bit of its id; a sample is cut into
 * fewer than LF_PLAN_PIECE_MAX pieces (lf_plan_overflow). */
#define LF_PLAN_PIECE_SHIFT 40
#define LF_PLAN_PIECE_MAX (UINT64_C(1) << 24)

/* A pass over n samples' lengths (samples, or with samples NULL the view's)
 * where their order does not matter: each lf_plan_lengths_next gives a
 * length and how many of the samples have it (0 once done). From the
 * view's counts where it has them for these n samples (lengths ascending,
 * each once), else one sample at a time (in order, count 1: its index is
 * i - 1), releasing the view's pages as lf_plan_view_passed. With `piece`
 * set (lf_plan_piece_len), the lengths are those of the samples as a plan
 * cuts them: a sample of k > 1 pieces (lf_plan_piece_count) counts as k - 1
 * lengths of piece and its last piece's, so a sum or count over the pass is
 * the plan's. */
typedef struct lf_plan_lengths {
    const lf_plan_params *params;
    const lf_plan_sample *samples;
    size_t n, i;
    uint64_t piece;              /* cut at this length (0: no cut) */
    uint64_t rest_len, rest_n;   /* the last pieces of a cut length, still to give */
} lf_plan_lengths;

/* How many pieces a sample of len tokens is cut into at `piece` (0: none):
 * 1 when it fits, or when it would need LF_PLAN_PIECE_MAX or more (it is
 * then left out, as under drop). */
static inline uint64_t lf_plan_piece_count(uint64_t len, uint64_t piece)
{
    if (!piece || len <= piece) return 1;
    uint64_t k = len / piece + (len % piece != 0);
    return k < LF_PLAN_PIECE_MAX ? k : 1;
}

/* A pass over n samples (samples, or the view's) cut at piece (0: none). */
static inline lf_plan_lengths lf_plan_lengths_of(const lf_plan_params *params,
                                                 const lf_plan_sample *samples, size_t n,
                                                 uint64_t piece)
{
    lf_plan_lengths w = {params, samples, n, 0, piece, 0, 0};
    return w;
}

static inline int lf_plan_lengths_next(lf_plan_lengths *w, uint64_t *len, uint64_t *count)
{
    const lf_plan_view *v = &w->params->view;
    if (w->rest_n) {
        *len = w->rest_len;
        *count = w->rest_n;
        w->rest_n = 0;
        return 1;
    }
    if (!w->samples && v->hist && v->hist_n == w->n) {
        while (w->i < v->hist_len && !v->hist[w->i]) w->i++;
        if (w->i >= v->hist_len) return 0;
        *len = w->i;
        *count = v->hist[w->i++];
    } else {
        if (w->i >= w->n) return 0;
        *len = lf_plan_length_at(w->params, w->samples, w->i);
        *count = 1;
        lf_plan_view_passed(w->params, ++w->i, LF_PLAN_RELEASE_SCAN);
    }
    uint64_t k = lf_plan_piece_count(*len, w->piece);
    if (k > 1) {   /* k - 1 whole pieces now, the last one next */
        w->rest_len = *len - (k - 1) * w->piece;
        w->rest_n = *count;
        *len = w->piece;
        *count *= k - 1;
    }
    return 1;
}

/* How a balanced pad step's samples are chosen (README.md, "Selection for
 * the world").
 *  - STEP (the default): the step's cost fills the global budget, whatever
 *    the world size, so the global sequence is the same for every world and
 *    a state restores onto another world;
 *  - WORLD: the step is composed as world bins of budget / world each, each
 *    sample placed in the fullest bin it fits (best fit; samples of 1/8 of
 *    a bin or more first), the step closing when every bin is within 2^-10
 *    of its share; where they cannot all be filled, the step is made again
 *    of those heavy samples alone up to the emptiest bin's level, if that
 *    is more even; a step that costs less than its budget less 1/128 is
 *    selected as by default instead (so steps keep step_bound and samples
 *    max_defer); the split starts from the bins where they are more even
 *    than its own result. On text cut into pieces of one length, where
 *    whole pieces (the longest placeable length) hold half the cost or
 *    more, steps are instead made of whole pieces alone (world x k, k a
 *    rank, exactly even) or of every other sample alone, every step at
 *    the cost of k whole pieces a rank, k the nearest to budget / world
 *    (the budget moves to it; not so where it would move by more than a
 *    quarter): lf_plan_world_level. The sequence then
 *    depends on world (it is in the plan's hash: a state restores onto the
 *    same world only). Balanced only: the baselines, whose steps are a
 *    fixed count, ignore it. In pack only the steps of whole pieces are
 *    made for the world (a whole piece is a full row; pack's outlier cost
 *    is then raised to a rank's share); otherwise pack plans as by
 *    default. */
typedef enum lf_plan_select {
    LF_PLAN_SELECT_STEP = 0,
    LF_PLAN_SELECT_WORLD = 1,
} lf_plan_select;

/* A sample longer than a pack row (seq_len) or than a memory cap that one
 * sample must fit (rank_max_tokens, rank_max_padded, micro_max_padded) is
 * either cut into consecutive pieces of lf_plan_piece_len tokens, the last
 * shorter, each planned, costed and placed as a sample of its own (split,
 * the default: every token is placed once an epoch), or left out of every
 * epoch and counted in rejected_cap (drop). A piece's id is its sample's id
 * plus its number above LF_PLAN_PIECE_SHIFT (piece 0 keeps the sample's
 * id): lf_plan_piece_sample and lf_plan_piece_index take it apart, and
 * piece k starts at token k x lf_plan_piece_len of its sample. Splitting
 * needs sample ids below 2^40 (LF_PLAN_E_ARG otherwise); a sample of 2^24
 * pieces or more is left out as under drop. See README.md, "Long samples". */
typedef enum lf_plan_overflow {
    LF_PLAN_OVERFLOW_SPLIT = 0,
    LF_PLAN_OVERFLOW_DROP = 1,
} lf_plan_overflow;


/* The pieces' length under params (as given to lf_plan_create): split_at
 * where set; else pack, seq_len or rank_max_tokens, the smaller; pad, the
 * smallest of the caps set. 0: nothing is split (drop, or no row or cap). */
uint64_t lf_plan_piece_len(const lf_plan_params *params);

/* A view's samples cut into pieces, made once for all the plans of the
 * view: each plan otherwise cuts them itself (a pass over the lengths, and
 * a bit a piece and a count a 64, 0.19 bytes a piece: at 10^9 samples cut
 * at 1024 tokens 290 MB a plan, and a server holds two or three plans at
 * once). lf_plan_cut_make cuts params->view's first n samples at
 * lf_plan_piece_len(params); *out stays NULL where no sample is cut.
 * Returns 0, LF_PLAN_E_ARG (no view, or 2^32 - 2 pieces or more) or
 * LF_PLAN_E_NOMEM. The view's lengths are read while it cuts, not kept. */
typedef struct lf_plan_cut lf_plan_cut;
int lf_plan_cut_make(const lf_plan_params *params, size_t n, lf_plan_cut **out);
void lf_plan_cut_free(lf_plan_cut *cut);   /* accepts NULL */

/* A plan id's sample id, and its piece number (0: the sample's start, or
 * the whole sample). */
uint64_t lf_plan_piece_sample(uint64_t id);
uint64_t lf_plan_piece_index(uint64_t id);

#define LF_PLAN_MICRO_OVERHEAD 256u
#define LF_PLAN_STEP_BOUND 1250u        /* 1.25 x the budget */
#define LF_PLAN_UNBOUNDED UINT32_MAX

/* pad: the most an outlier may cost for its step to stay within the bound.
 * A balanced step with an outlier of cost c costs outlier_group x c (every
 * rank at its level: the group is world by default), so c may be at most
 * step_bound / 1000 x step_budget / outlier_group. lf-plan and lf-server
 * say at start-up how many samples cost more, and which flag fixes it.
 * params as given to lf_plan_create (zeros: the defaults). Returns
 * UINT64_MAX where no such limit applies (unbounded, reject, pack, the
 * baselines). */
uint64_t lf_plan_bound_cost(const lf_plan_params *params);

/* Defaults: balanced, world 1, text preset (hidden 4096), pad, delay policy. */
void lf_plan_params_default(lf_plan_params *p);

/* pack: the step budget that buys rows_per_rank full rows of seq_len tokens
 * per rank (world * rows_per_rank rows a step), each row priced at the mean
 * cost per token of the samples that are not outliers (outlier_cost, or its
 * default budget / world). In pack mode a balanced plan fills a step's rows
 * in tokens as well as its budget in cost; with a budget that buys whole
 * rows both fill together (see README.md). params, samples: as for lf_plan_create,
 * step_budget ignored. Returns 0 or a negative status (LF_PLAN_E_ARG: not
 * pack, no seq_len, or no sample fits a row). */
int lf_plan_pack_budget(const lf_plan_params *params, const lf_plan_sample *samples, size_t n,
                        uint32_t rows_per_rank, uint64_t *budget);

/* ---- the plan ----------------------------------------------------------- */

typedef struct lf_plan lf_plan;

/* Creates a plan over n samples: samples[0..n), copied as narrow as they
 * allow (2 bytes a sample, 4 with a length of 2^16 or more, where ids are
 * 0..n-1 and the samples come by (block, id), as a dataset's index gives
 * them; 8 more where the ids are other, 4 more where not by block), or,
 * with samples NULL, params->view, read in place and not copied (see
 * lf_plan_view: it must outlive the plan; README.md, *Memory a sample*).
 * Samples longer than a row or cap are cut into pieces (lf_plan_overflow),
 * a bit a piece kept. A length of 2^32 or more is LF_PLAN_E_ARG. Checks the
 * parameters; samples that can never be placed (longer than a memory cap or
 * than seq_len in pack mode, under drop; of 2^24 pieces or more under
 * split) are rejected and counted, whatever the outlier policy. Returns 0
 * or a
 * negative status: LF_PLAN_E_OVERFLOW when delayed outliers could make a
 * step cost more than 2^63 (step_budget + outlier_group, in pack rounded up
 * to a multiple of world, times the costliest outlier; with costs near
 * 2^52, groups of 2^11 and more). */
int lf_plan_create(const lf_plan_params *params, const lf_plan_sample *samples,
                   size_t n, lf_plan **out);
void lf_plan_free(lf_plan *plan);    /* accepts NULL */

/* The split's version: which rank each of a step's samples goes to. A
 * change to the split that keeps the global sequence (what a saved state
 * holds and restores onto) but moves samples between ranks bumps it; a
 * job's servers put it in their plan fingerprint, so nodes whose splits
 * differ refuse to train together instead of serving a sample twice.
 * 2: the local search's set exchanges (split.c, best_exchange). */
#define LF_PLAN_SPLIT_VERSION 2u

#define LF_PLAN_STEP_OUTLIERS 1u /* this step releases a group of outliers */
#define LF_PLAN_STEP_TAIL 2u     /* the epoch's last step: it takes what is left */

/* One global step. Pointers stay valid until the next lf_plan_next_step,
 * lf_plan_state_restore or lf_plan_free. */
typedef struct lf_plan_step {
    uint32_t epoch;
    uint64_t step;               /* step number inside the epoch, from 0 */
    uint32_t world;
    uint32_t flags;              /* LF_PLAN_STEP_* */
    uint32_t nsamples;           /* samples in this step, all ranks */
    uint32_t noutliers;          /* the first noutliers ids are released outliers */
    const uint64_t *ids;         /* the global sequence: nsamples ids in selection
                                    order, independent of world size */
    const uint32_t *delay;       /* per ids[i]: steps placed after its due step
                                    (an outlier: steps it waited for its group) */
    const uint32_t *rank_start;  /* world+1 offsets into rank_ids */
    const uint64_t *rank_ids;    /* each rank's samples, rank by rank, each in
                                    selection order */
    const uint64_t *rank_cost;   /* world predicted costs: sum c(L) + d per micro-batch,
                                    saturating at UINT64_MAX */
    const uint64_t *rank_tokens; /* world sums of L */
    uint64_t cost;               /* sum c(L) over the step */
    uint64_t budget;             /* what the selection filled against */
    uint32_t cap_deferred;       /* samples pushed to the next step because no rank
                                    had room under the memory cap (world-dependent) */
} lf_plan_step;

/* Plans the next step. Returns 1 and fills *step, or 0 when the epoch is
 * finished (the next call starts the next epoch), or a negative status. */
int lf_plan_next_step(lf_plan *plan, lf_plan_step *step);

/* One rank's layout for the current step. Pointers stay valid until the next
 * lf_plan_next_step (for any rank). */
typedef struct lf_plan_batch {
    uint32_t rank;
    uint32_t nsamples;
    const uint64_t *ids;         /* layout order: pad, longest first (ties by
                                    smaller id), micro-batch by micro-batch;
                                    pack, row by row */
    const uint64_t *lengths;     /* L per ids[i] */
    uint32_t rows;               /* pad: nsamples; pack: rows of seq_len */
    const uint32_t *row_start;   /* rows+1 offsets into ids */
    const uint32_t *cu_seqlens;  /* pack: row r's boundaries are the row_start[r+1]
                                    - row_start[r] + 1 values from index
                                    row_start[r] + r (0, l1, l1+l2, ...); pad: NULL */
    uint32_t row_len;            /* pad: longest L; pack: seq_len */
    uint64_t tokens;             /* sum of L */
    uint64_t padded_tokens;      /* sum over micro-batches of samples * micro_len:
                                    pad, each micro-batch padded to its longest;
                                    pack, rows * seq_len */
    uint64_t cost;               /* sum c(L) + d per micro-batch, saturating at
                                    UINT64_MAX */
    /* Micro-batches (run one after another, gradients accumulated): pad, runs
     * of consecutive ids each padded to micro_len[j] (its first, longest L);
     * pack, one per row (micro_len = seq_len). A consumer that ignores these
     * and pads all nsamples to row_len gets the single-batch layout. */
    uint32_t micro;              /* micro-batches */
    const uint32_t *micro_start; /* micro+1 offsets into ids */
    const uint32_t *micro_len;   /* per micro-batch: padded length */
} lf_plan_batch;

/* Lays out rank `rank` of the current step. Returns 0 or a negative status
 * (LF_PLAN_E_RANGE for a bad rank or no current step). */
int lf_plan_rank_batch(lf_plan *plan, uint32_t rank, lf_plan_batch *batch);

/* Totals since lf_plan_create (or since the restored state's epoch start). */
typedef struct lf_plan_counts {
    uint32_t epoch;              /* current epoch */
    uint64_t emitted;            /* samples placed this epoch */
    uint64_t rejected;           /* outliers rejected this epoch (reject policy) */
    uint64_t rejected_cap;       /* samples that fit no memory cap or row: every epoch */
    uint64_t pending;            /* samples not yet placed this epoch; a
                                    mixture's, UINT64_MAX until its order
                                    has ended (the epoch ends where a source
                                    runs out: known as it is drawn) */
    uint64_t rejected_tokens;    /* Σ L of the rejected and rejected_cap samples */
} lf_plan_counts;
void lf_plan_counts_get(const lf_plan *plan, lf_plan_counts *c);

/* Ids of the samples rejected so far this epoch (outlier policy reject, and
 * those that fit no cap), up to cap; returns how many there are in all. */
size_t lf_plan_rejected_ids(const lf_plan *plan, uint64_t *ids, size_t cap);

/* ---- a cap from a later epoch on ------------------------------------------
 *
 * A server sizes its ring slots before it serves. Rather than plan every
 * epoch first, it can plan one, take the most padded tokens any rank held
 * in it and cap the epochs after it there (with some room): the cap is
 * then what the slots must hold. lf_plan_step_padded measures a step;
 * lf_plan_cap_later sets the cap. Unlike rank_max_padded, the cap leaves a
 * step alone unless the step's split gives some rank more: only then is
 * the step split again under it (as rank_max_padded would split it), the
 * samples no rank has room for carried to the next step. So epochs that
 * stay within it are bit-identical to a plan without it, and the others
 * differ from that step on (a server versions that rule in its plan
 * fingerprint). The cap is no parameter and not in the saved state: set it
 * on every plan of the run, also one a state is restored into. Balanced
 * plans only (the baselines take a fixed count a rank). */

/* The most padded tokens a rank holds in the current step, the figure
 * rank_max_padded caps: pad, its samples x its longest L; pack, its rows
 * (best-fit decreasing, as lf_plan_rank_batch lays them) x seq_len. 0 with
 * no current step. */
uint64_t lf_plan_step_padded(lf_plan *plan);

/* From epoch `from` on (the absolute epoch number), no rank gets more than
 * max_padded padded tokens in a step. max_padded is first raised to what
 * one sample the plan places needs alone (pad: the longest L; pack:
 * seq_len), so every sample still fits. Returns the cap in force, or 0 for
 * a plan that is not balanced (nothing set). */
uint64_t lf_plan_cap_later(lf_plan *plan, uint32_t from, uint64_t max_padded);

/* The same for the samples a rank holds in a step (a piece counts as a
 * sample), for a server whose slot holds a fixed size a sample (decoded
 * images): from epoch `from` on, no rank gets more than max_samples (at
 * least 1) in a step, a step over it split again under it as above, the
 * samples no rank has room for carried to the next step. Sets the same
 * `from` as lf_plan_cap_later (one for both). Returns the cap in force, or
 * 0 for a plan that is not balanced (nothing set). */
uint64_t lf_plan_cap_later_samples(lf_plan *plan, uint32_t from, uint64_t max_samples);

/* The most samples one rank can hold in a step of at most max_padded
 * padded tokens: a step's most samples, and no more than max_padded over
 * the shortest L the plan places (a piece counts as a sample). */
uint64_t lf_plan_rank_samples_max(const lf_plan *plan, uint64_t max_padded);

/* A baseline plan (naive, sorted: a fixed count a rank, no cap): the most
 * samples one rank holds in any step of any epoch (batch_per_rank, one
 * more in the step an epoch's rest of fewer than world samples joins, and
 * no more than the samples there are over world, rounded up), and in
 * *longest (unless NULL) the longest L the plan places (a piece counts as
 * a sample). So a server sizes its ring slots without planning an epoch:
 * pad, samples x longest padded tokens; pack, a row a sample at most.
 * 0 (and *longest 0) for a balanced plan. */
uint64_t lf_plan_fixed_bound(const lf_plan *plan, uint64_t *longest);

/* Select WORLD on text cut into pieces of one length (most of the cost in
 * whole pieces): every step costs world x *per_rank whole pieces of
 * *piece_len tokens, the budget moved to that level (see
 * LF_PLAN_SELECT_WORLD). Returns the level (a step's cost), or 0 where the
 * steps are not made so (*piece_len and *per_rank then 0). */
uint64_t lf_plan_world_level(const lf_plan *plan, uint64_t *piece_len, uint32_t *per_rank);

/* ---- state -------------------------------------------------------------- */

/* Saves the plan's position (epoch, step, stream cursor, pending window,
 * outlier queue) at a step boundary. Returns the blob's size, or
 * LF_PLAN_E_BUFFER with nothing written when cap is too small (call with
 * cap 0 to learn the size). The blob holds a hash of the samples and of the
 * parameters that shape the global sequence. */
long lf_plan_state_save(const lf_plan *plan, void *buf, size_t cap);

/* A mixture's blob (sources > 1) ends in this many bytes, a hash of its
 * weights: the blob less them identifies the plan with the weights left
 * out (lf-server's plan id without the weights, for a resume across a
 * change of weights at an epoch boundary). */
#define LF_PLAN_STATE_WEIGHTS_TAIL 8

/* Restores a saved position into a plan made from the same samples and
 * sequence parameters (a mixture: the same sources; see below for its
 * weights); the following steps are bit-identical to the saved
 * plan's. world, the memory caps and layout may differ (a world-size change
 * keeps the global sequence and re-splits it, provided outlier_cost and
 * outlier_group were set explicitly, as their defaults follow world). A
 * balanced pack plan fills rows, so its sequence depends on seq_len and on
 * world too: it restores only onto pack with the same seq_len.
 * Returns 0, LF_PLAN_E_VERSION (a blob of another layout version, such as
 * version 1, whose 64-bit cost sum wrapped) or LF_PLAN_E_STATE; a blob whose
 * header matches but whose entries do not leaves the plan at the start of
 * its first epoch. A mixture's weights may differ from the saved plan's
 * only where the state lies between epochs (saved after lf_plan_next_step
 * returned 0, or before the first step of an epoch): the next epoch is
 * then drawn with the plan's weights; inside an epoch it is
 * LF_PLAN_E_WEIGHTS, the plan unchanged. */
int lf_plan_state_restore(lf_plan *plan, const void *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
