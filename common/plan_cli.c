/*
 * plan_cli.c — the plan's command-line options (see plan_cli.h).
 */
#include "plan_cli.h"
#include "cost_file.h"
#include "index_only.h"
#include "parse_num.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

const char plan_cli_help[] =
    "Cost model c(L) = a*L + b*L^2 + c0, plus d per micro-batch:\n"
    "  --preset P           text, frames or images (default: from the dataset's\n"
    "                       cost field); b/a = 1/(12*hidden)\n"
    "  --hidden H           model width for text/frames (default 4096)\n"
    "  --cost a,b,c0,d      user coefficients instead of a preset\n"
    "  --cost-file F        the same from a cost file (lf-train --calibrate,\n"
    "                       levelfeed.calibrate(); format: balancer/README.md)\n"
    "Plan:\n"
    "  --seed S, --epoch E  plan seed and first epoch (default 0, 0)\n"
    "  --budget C           balanced: global cost per step (default:\n"
    "                       --samples-per-rank x world x mean sample cost; pack:\n"
    "                       the cost of the whole rows per rank nearest to\n"
    "                       --samples-per-rank samples' tokens)\n"
    "  --samples-per-rank S sets the default budget (default 16)\n"
    "  --batch-per-rank B   naive, sorted: samples per rank per step (default:\n"
    "                       balanced's mean per step / world, measured by\n"
    "                       planning balanced's epoch 0 first, so every sampler\n"
    "                       moves as many samples per step)\n"
    "  --max-tokens N       balanced: per-rank cap on tokens per step (default none)\n"
    "  --max-padded N       balanced: per-rank cap on padded tokens per step (default\n"
    "                       none; naive and sorted take a fixed count a rank)\n"
    "  --lookahead N        selection window in samples (default: four steps'\n"
    "                       worth, at least 4096)\n"
    "  --max-defer N        steps a sample may be passed over (default 4)\n"
    "  --outlier P          delay or reject samples costlier than --outlier-cost\n"
    "                       (default delay)\n"
    "  --outlier-cost C     a sample costlier is an outlier (default: budget /\n"
    "                       world; balanced pack: less, where a sample's cost\n"
    "                       above its tokens' price reaches 2/5 of that share)\n"
    "  --outlier-group G    outliers released together (default: world;\n"
    "                       balanced pack: 8 x world)\n"
    "  --locality-blocks N  blocks drawn from at once (default 64)\n"
    "  --layout L           pad or pack (default pad)\n"
    "  --seq-len N          pack row length (default: the power of two nearest\n"
    "                       below a rank's step of --samples-per-rank mean samples\n"
    "                       in 4 rows, halved while a step of epoch 0 holds more\n"
    "                       than --step-bound x the median step's tokens; never\n"
    "                       above the longest sample; start-up says which and why).\n"
    "                       A longer sample is split into pieces of a row, see\n"
    "                       --overflow\n"
    "  --overflow P         split (default) or drop a sample longer than a pack\n"
    "                       row or a cap one sample must fit (--max-tokens,\n"
    "                       --max-padded, --micro-max-padded): split cuts it into\n"
    "                       consecutive pieces of that length, each planned as a\n"
    "                       sample (pack: positions go on across the cut); drop\n"
    "                       leaves it out of every epoch (start-up says how much)\n"
    "  --step-bound X       balanced: an outlier step costs at most X times the\n"
    "                       budget where its outliers allow, outliers going out\n"
    "                       as they come (default 1.25; none: they wait for\n"
    "                       --outlier-group and their step grows by the group)\n"
    "  --micro-max-padded N pad: cap on a micro-batch's samples x its longest\n"
    "                       (default: the longest sample; where a balanced\n"
    "                       epoch of the samples uncut breaks --step-bound, the\n"
    "                       power of two --seq-len's default would be: longer\n"
    "                       samples are served in pieces, start-up says so)\n"
    "  --micro-overhead T   pad: a micro-batch's fixed cost in tokens, weighed\n"
    "                       against padding when cutting (default: d in tokens,\n"
    "                       or 256 when d is 0)\n"
    "  --select S           balanced: step (default) fills each step's budget\n"
    "                       the same for every world size; world composes each\n"
    "                       step for the world, so it splits evenly: on text\n"
    "                       cut into pieces, steps of whole pieces alone and of\n"
    "                       the shorter samples alone, each the cost of k whole\n"
    "                       pieces a rank (the budget moves to it; lf-plan says\n"
    "                       k); else, in pad, world equal bins (the steps then\n"
    "                       depend on --world: a saved state resumes at the\n"
    "                       same world only)\n";

void plan_cli_init(plan_cli *c)
{
    memset(c, 0, sizeof *c);
    lf_plan_params_default(&c->params);
    c->preset = -1;
    c->samples_per_rank = 16;
}

int plan_cli_owns(int code)
{
    return code >= PLAN_CLI_BUDGET && code < PLAN_CLI_END;
}

static int parse_u32(const char *s, uint64_t lo, uint64_t hi, uint32_t *out)
{
    uint64_t v;
    if (parse_u64(s, lo, hi, &v)) return -1;
    *out = (uint32_t)v;
    return 0;
}

int plan_cli_set(plan_cli *c, int code, const char *a)
{
    static const char *const presets[] = {"text", "frames", "images", NULL};
    static const char *const outliers[] = {"delay", "reject", NULL};
    static const char *const layouts[] = {"pad", "pack", NULL};
    static const char *const overflows[] = {"split", "drop", NULL};
    static const char *const selects[] = {"step", "world", NULL};
    const uint64_t micro_max = UINT64_C(1) << 36;
    lf_plan_params *p = &c->params;
    uint32_t w;
    switch (code) {
    case PLAN_CLI_BUDGET: return parse_u64(a, 1, LF_PLAN_COST_MAX, &p->step_budget);
    case PLAN_CLI_SPR: return parse_u32(a, 1, 1u << 20, &c->samples_per_rank);
    case PLAN_CLI_BPR: return parse_u32(a, 1, 1u << 20, &p->batch_per_rank);
    case PLAN_CLI_MAXTOK: return parse_u64(a, 1, UINT64_MAX, &p->rank_max_tokens);
    case PLAN_CLI_MAXPAD: return parse_u64(a, 1, UINT64_MAX, &p->rank_max_padded);
    case PLAN_CLI_LOOKAHEAD: return parse_u32(a, 1, 1u << 24, &p->lookahead);
    case PLAN_CLI_MAXDEFER: return parse_u32(a, 1, 1u << 20, &p->max_defer);
    case PLAN_CLI_LOCALITY: return parse_u32(a, 1, UINT32_MAX, &p->locality_blocks);
    case PLAN_CLI_OUTLIER: return parse_word(a, outliers, &p->outlier_policy);
    case PLAN_CLI_OCOST: return parse_u64(a, 1, LF_PLAN_COST_MAX, &p->outlier_cost);
    case PLAN_CLI_OGROUP: return parse_u32(a, 1, 1u << 20, &p->outlier_group);
    case PLAN_CLI_PRESET:
        if (parse_word(a, presets, &w)) return -1;
        c->preset = (int)w;
        return 0;
    case PLAN_CLI_HIDDEN: return parse_u32(a, 1, 1u << 24, &c->hidden);
    case PLAN_CLI_COST: {
        lf_plan_cost_model m; /* checked here, so the flag is named */
        c->user_cost = 1;
        return parse_doubles(a, 4, 0, DBL_MAX, c->coef) ||
                       lf_plan_cost_set(&m, c->coef[0], c->coef[1], c->coef[2], c->coef[3])
                   ? -1 : 0;
    }
    case PLAN_CLI_COSTFILE:
        c->user_cost = 1;
        return cost_file_read(a, c->coef, c->why, sizeof c->why);
    case PLAN_CLI_SEED: return parse_u64(a, 0, UINT64_MAX, &p->seed);
    case PLAN_CLI_EPOCH: return parse_u32(a, 0, UINT32_MAX, &p->epoch);
    case PLAN_CLI_LAYOUT: return parse_word(a, layouts, &p->layout);
    case PLAN_CLI_SEQLEN: return parse_u32(a, 1, UINT32_MAX, &p->seq_len);
    case PLAN_CLI_MICROPAD: return parse_u64(a, 1, micro_max, &p->micro_max_padded);
    case PLAN_CLI_MICROOVH: return parse_u64(a, 1, micro_max, &p->micro_overhead);
    case PLAN_CLI_OVERFLOW: return parse_word(a, overflows, &p->overflow);
    case PLAN_CLI_SELECT: return parse_word(a, selects, &p->select);
    case PLAN_CLI_STEPBOUND: {
        double x;
        if (!strcmp(a, "none")) {
            p->step_bound = LF_PLAN_UNBOUNDED;
            return 0;
        }
        if (parse_double(a, 1.0, 1e6, &x)) return -1;
        p->step_bound = (uint32_t)(x * 1000 + 0.5);
        return 0;
    }
    default: return -1;
    }
}

int plan_cli_preset_of(const lf_schema *schema)
{
    uint32_t t = schema->fields[schema->cost_field].type;
    if (t == LF_FIELD_JPEG) return LF_PLAN_PRESET_IMAGES;
    if (t == LF_FIELD_FRAMES_F16 || t == LF_FIELD_FRAMES_F32 || t == LF_FIELD_FRAMES_I16)
        return LF_PLAN_PRESET_FRAMES;
    return LF_PLAN_PRESET_TEXT;
}

/* The view's release (lf_plan_view): arg is the plan_cli_input. */
static void release_pages(void *arg)
{
    plan_cli_input_release(arg);
}

static int input_open(plan_cli_input *in, const lf_dataset *ds, int summary);

/* The view's counts and digest from the index's summary (lf_index_summary:
 * taken when the index was written), where it has them for these n
 * samples: no pass over the lengths for either. */
static void take_summary(plan_cli_input *in, const lf_index_summary *sum)
{
    if (!sum || sum->samples != in->n) return;
    if (sum->digest_kind == LF_PLAN_DIGEST_KIND) {
        in->view.digest = sum->digest;
        in->view.digest_n = in->n;
    }
    int fits = sum->ncounts > 0 && sum->length[sum->ncounts - 1] < PLAN_CLI_HIST_LEN;
    for (uint32_t k = 0; fits && k < sum->ncounts; k++) fits = sum->count[k] <= UINT32_MAX;
    if (!fits || !(in->hist = calloc(PLAN_CLI_HIST_LEN, sizeof *in->hist))) return;
    for (uint32_t k = 0; k < sum->ncounts; k++) in->hist[sum->length[k]] = (uint32_t)sum->count[k];
    in->view.hist = in->hist;
    in->view.hist_len = PLAN_CLI_HIST_LEN;
    in->view.hist_n = in->n;
}

/* ds's summary computed from its lengths, the one beside its index left
 * aside: *sum, its counts in *len and *cnt (malloc'd; NULL where none are
 * kept). Returns 0 or an lf_plan status. */
static int summary_of(const lf_dataset *ds, lf_index_summary *sum, uint64_t **len,
                      uint64_t **cnt)
{
    plan_cli_input in;
    *len = *cnt = NULL;
    *sum = (lf_index_summary){.samples = lf_dataset_samples(ds), .blocks = lf_dataset_blocks(ds)};
    int rc = input_open(&in, ds, 0);
    if (rc == 0 && in.view.hist) {
        *len = malloc(PLAN_CLI_HIST_LEN * sizeof **len);
        *cnt = malloc(PLAN_CLI_HIST_LEN * sizeof **cnt);
        for (uint32_t l = 0; *len && *cnt && l < PLAN_CLI_HIST_LEN; l++)
            if (in.hist[l]) (*len)[sum->ncounts] = l, (*cnt)[sum->ncounts++] = in.hist[l];
        if (!*len || !*cnt) rc = LF_PLAN_E_NOMEM;
    }
    if (rc == 0) {
        sum->length = *len;
        sum->count = *cnt;
        sum->digest_kind = LF_PLAN_DIGEST_KIND;
        sum->digest = lf_plan_view_digest(&in.view, in.n);
    }
    plan_cli_input_free(&in);
    return rc;
}

/* Opens dir for its lengths and computes its summary (summary_of); with
 * `fresh`, the summary beside its index removed first (a stale one would
 * refuse the open). Returns 0 or a status with err set. */
static int open_summary(const char *dir, int fresh, lf_dataset **ds, lf_index_summary *sum,
                        uint64_t **len, uint64_t **cnt, lf_shard_error *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, LF_INDEX_SUMMARY_NAME);
    if (fresh && unlink(path) != 0 && errno != ENOENT) {
        err->status = LF_SHARD_E_IO;
        snprintf(err->msg, sizeof err->msg, "%.400s: %s", path, strerror(errno));
        return LF_SHARD_E_IO;
    }
    int rc = dataset_open(dir, DATASET_LENGTHS, ds, err);
    if (rc != 0) return rc;
    if (summary_of(*ds, sum, len, cnt) == 0) return 0;
    lf_dataset_close(*ds);
    free(*len);
    free(*cnt);
    err->status = LF_SHARD_E_NOMEM;
    snprintf(err->msg, sizeof err->msg, "%.400s: out of memory, or too many samples to plan", dir);
    return LF_SHARD_E_NOMEM;
}

/* 0 where ds's summary is sum, 1 where it has none, else LF_SHARD_E_FORMAT
 * with err naming it. */
static int compare_summary(const lf_dataset *ds, const lf_index_summary *sum, const char *dir,
                           lf_shard_error *err)
{
    const lf_index_summary *r = lf_dataset_index_summary(ds);
    if (!r) return 1;
    size_t k = sum->ncounts;
    if (r->ncounts == k && r->digest_kind == sum->digest_kind && r->digest == sum->digest &&
        (!k || (!memcmp(r->length, sum->length, k * sizeof *r->length) &&
                !memcmp(r->count, sum->count, k * sizeof *r->count))))
        return 0;
    err->status = LF_SHARD_E_FORMAT;
    snprintf(err->msg, sizeof err->msg, "%.300s/%s: its length counts or digest are not those of "
             "the lengths in %s: run `lf-shard index DIR` to write it again", dir,
             LF_INDEX_SUMMARY_NAME, LF_INDEX_NAME);
    return LF_SHARD_E_FORMAT;
}

/* dir's summary taken from its lengths and written, or (check) compared
 * with the one there. */
static int summary_pass(const char *dir, int check, lf_shard_error *err)
{
    lf_dataset *ds;
    lf_index_summary sum;
    uint64_t *len, *cnt;
    int rc = open_summary(dir, !check, &ds, &sum, &len, &cnt, err);
    if (rc != 0) return rc;
    rc = check ? compare_summary(ds, &sum, dir, err) : lf_index_summary_write(dir, &sum, err);
    free(len);
    free(cnt);
    lf_dataset_close(ds);
    return rc;
}

int plan_cli_summary_write(const char *dir, lf_shard_error *err)
{
    return summary_pass(dir, 0, err);
}

int plan_cli_summary_check(const char *dir, lf_shard_error *err)
{
    return summary_pass(dir, 1, err);
}

int plan_cli_input_open(plan_cli_input *in, const lf_dataset *ds)
{
    return input_open(in, ds, 1);
}

/* The view's segments of a union ds (each source's mapped lengths, read
 * where they lie: lf_plan_segments), in->seg and in->chunk: 0, or 1 where
 * ds is no union or a source's lengths are not mapped (in->seg then
 * zeroed: the caller copies them), or LF_PLAN_E_NOMEM. */
static int input_segments(plan_cli_input *in, const lf_dataset *ds, uint64_t n)
{
    uint32_t k = lf_dataset_sources(ds);
    if (k < 2 || k > LF_PLAN_MAX_SEGMENTS) return 1;
    in->seg.count = k;
    for (uint32_t s = 0; s <= k; s++) in->seg.first[s] = lf_dataset_source_first(ds, s);
    for (uint32_t s = 0; s < k; s++)
        in->seg.lengths[s] = lf_dataset_source_lengths(ds, s);
    in->chunk = malloc(lf_plan_segments_chunks(n));
    if (!in->chunk) return LF_PLAN_E_NOMEM;
    if (lf_plan_segments_index(&in->seg, in->chunk) == 0) return 0;
    free(in->chunk);   /* a non-empty source's lengths not mapped */
    in->chunk = NULL;
    memset(&in->seg, 0, sizeof in->seg);
    return 1;
}

/* plan_cli_input_open, taking the index's summary where `summary` is set. */
static int input_open(plan_cli_input *in, const lf_dataset *ds, int summary)
{
    uint64_t n = lf_dataset_samples(ds), blocks = lf_dataset_blocks(ds);
    memset(in, 0, sizeof *in);
    if (n >= UINT32_MAX - 1) return LF_PLAN_E_ARG;   /* as lf_plan_create's n */
    const uint32_t *mapped = lf_dataset_mapped_lengths(ds);
    int segs = mapped ? 1 : input_segments(in, ds, n), copy = !mapped && segs == 1;
    in->block_start = malloc((blocks + 1) * sizeof *in->block_start);
    if (copy) in->own = malloc((n ? n : 1) * sizeof *in->own);
    if (segs < 0 || !in->block_start || (copy && !in->own)) {
        plan_cli_input_free(in);
        return LF_PLAN_E_NOMEM;
    }
    for (uint64_t b = 0; b < blocks; b++) {
        const lf_block_info *bi = lf_dataset_block(ds, b);
        in->block_start[b] = (uint32_t)bi->first_sample;
        for (uint64_t i = bi->first_sample; in->own && i < bi->first_sample + bi->nsamples; i++)
            in->own[i] = (uint32_t)lf_dataset_sample_length(ds, i);
    }
    in->block_start[blocks] = (uint32_t)n;
    in->n = (size_t)n;
    in->view = (lf_plan_view){.lengths = mapped ? mapped : in->own,
                              .segments = segs == 0 ? &in->seg : NULL,
                              .block_start = in->block_start, .blocks = (uint32_t)blocks,
                              .release = in->own ? NULL : release_pages, .release_arg = in};
    plan_cli_input_release(in);   /* what opening the dataset read (its checks) */
    if (summary) take_summary(in, lf_dataset_index_summary(ds));
    plan_cli_input_count(in, in->n);
    if (summary && !in->view.digest_n) {
        /* no summary gave it (a union of sources, or a dataset indexed
         * before summaries): taken once here, not by each plan made of the
         * input (a server makes two before its first batch: at 1.1 x 10^9
         * samples 4 s each) */
        in->view.digest = lf_plan_view_digest(&in->view, in->n);
        in->view.digest_n = in->n;
    }
    return 0;
}

/* Samples i .. end-1's lengths, or the first *k of them that lie in one
 * array (a segment's end): where they are. */
static const uint32_t *lengths_run(const lf_plan_view *v, size_t i, size_t end, size_t *k)
{
    *k = end - i;
    if (v->lengths) return v->lengths + i;
    const lf_plan_segments *g = v->segments;
    uint32_t s = lf_plan_segment_of(g, i);
    if (g->first[s + 1] < end) *k = (size_t)g->first[s + 1] - i;
    return g->lengths[s] + (i - g->first[s]);
}

void plan_cli_input_count(plan_cli_input *in, size_t n)
{
    if (in->view.hist && in->view.hist_n == n) return;
    free(in->hist);
    in->view.hist = in->hist = calloc(PLAN_CLI_HIST_LEN, sizeof *in->hist);
    in->view.hist_len = PLAN_CLI_HIST_LEN;
    in->view.hist_n = n;
    size_t i = 0;
    while (in->hist && i < n) {
        size_t end = n - i > LF_PLAN_RELEASE_SCAN ? i + LF_PLAN_RELEASE_SCAN : n, k;
        uint32_t most = 0;
        for (size_t at = i; at < end; at += k) {
            const uint32_t *len = lengths_run(&in->view, at, end, &k);
            for (size_t j = 0; j < k; j++) most |= len[j];
        }
        if (most >= PLAN_CLI_HIST_LEN) break;
        for (; i < end; i += k) {
            const uint32_t *len = lengths_run(&in->view, i, end, &k);
            for (size_t j = 0; j < k; j++) in->hist[len[j]]++;
        }
        if (in->view.release) in->view.release(in->view.release_arg);
    }
    if (i < n) {   /* a length past the counts, or none allocated */
        free(in->hist);
        in->view.hist = in->hist = NULL;
    }
}

void plan_cli_input_free(plan_cli_input *in)
{
    free(in->own);
    free(in->block_start);
    free(in->hist);
    free(in->chunk);
    memset(in, 0, sizeof *in);
}

/* Drops the whole pages of the n u32s at len from the process. */
static void release_range(const uint32_t *len, size_t n)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)len, e = (uintptr_t)(len + n);
    a = (a + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;   /* whole pages */
    e = e / (uintptr_t)page * (uintptr_t)page;
    /* a read-only file mapping: its pages leave the process, not the page
     * cache, and are read back from there when touched again */
    if (e > a) madvise((void *)a, e - a, MADV_DONTNEED);
}

void plan_cli_input_release(const plan_cli_input *in)
{
    if (in->own || !in->n) return;
    if (in->view.lengths) release_range(in->view.lengths, in->n);
    for (uint32_t s = 0; !in->view.lengths && s < in->seg.count; s++)
        if (in->seg.first[s + 1] > in->seg.first[s])
            release_range(in->seg.lengths[s], (size_t)(in->seg.first[s + 1] - in->seg.first[s]));
}

/* The balanced plan of epoch 0 under p, whatever p's sampler and epoch:
 * what the defaults drawn from a plan are measured on. */
static int balanced_epoch0(const lf_plan_params *p, const lf_plan_sample *s, size_t n,
                           lf_plan **plan)
{
    lf_plan_params bp = *p;
    bp.sampler = LF_PLAN_BALANCED;
    bp.epoch = 0;
    return lf_plan_create(&bp, s, n, plan);
}

/* The baselines' batch: balanced's mean samples per full step / world, so
 * every sampler moves as many samples per step. It has to be measured: with
 * long-tailed costs a budget of k mean costs holds far more than k samples,
 * because the costliest samples go to outlier steps of their own. Measured
 * on epoch 0 whatever --epoch says, so a run started at epoch E gets the
 * batch, and so the plan, of epoch E of a run started at 0; on its first
 * PLAN_CLI_PREFIX_SAMPLES (as the cap and pad's cut: a walk that does not
 * grow with the dataset; it walked the whole epoch, 48-51 s CPU at 10^8
 * samples), which is the whole epoch of a dataset no larger. */
static int baseline_batch(lf_plan_params *p, const lf_plan_sample *s, size_t n)
{
    lf_plan *plan;
    int rc = balanced_epoch0(p, s, n, &plan);
    if (rc) return rc;
    lf_plan_step st;
    uint64_t steps = 0, samples = 0, placed = 0;
    while (placed < PLAN_CLI_PREFIX_SAMPLES && (rc = lf_plan_next_step(plan, &st)) == 1) {
        placed += st.nsamples;
        if (!(st.flags & LF_PLAN_STEP_TAIL)) {
            steps++;
            samples += st.nsamples;
        }
    }
    lf_plan_free(plan);
    if (rc < 0) return rc;
    uint64_t per_rank = steps ? (samples + steps * p->world / 2) / (steps * p->world) : 0;
    p->batch_per_rank = per_rank < 1 ? 1 : per_rank > (1u << 20) ? 1u << 20 : (uint32_t)per_rank;
    return 0;
}

/* Samples longer than a pack row or a cap one sample must fit: how many,
 * their share of the tokens, and what --overflow does with them (split:
 * pieces, each placed; drop: left out of every epoch). */
static void note_overflow(plan_cli *c, const lf_plan_sample *s, size_t n, uint64_t tokens)
{
    lf_plan_params split = c->params;
    split.overflow = LF_PLAN_OVERFLOW_SPLIT;
    uint64_t limit = lf_plan_piece_len(&split), over = 0, over_tok = 0, pieces = 0, len, k;
    lf_plan_lengths w = lf_plan_lengths_of(&split, s, limit ? n : 0, 0);
    while (lf_plan_lengths_next(&w, &len, &k))
        if (len > limit) {
            over += k;
            over_tok += len * k;
            pieces += (len + limit - 1) / limit * k;
        }
    c->overflow[0] = '\0';
    if (!over) return;
    const char *what = c->params.layout == LF_PLAN_PACK ? "a row (--seq-len, --max-tokens)"
                                                        : "a cap (--max-tokens, --max-padded, "
                                                          "--micro-max-padded)";
    double share = 100.0 * (double)over_tok / (double)tokens;
    if (c->params.overflow == LF_PLAN_OVERFLOW_SPLIT)
        snprintf(c->overflow, sizeof c->overflow, "%" PRIu64 " samples (%.2f %% of the "
                 "tokens) are longer than %s of %" PRIu64 " tokens: split into %" PRIu64
                 " pieces, each placed (--overflow split; 0 tokens dropped by it)", over,
                 share, what, limit, pieces);
    else
        snprintf(c->overflow, sizeof c->overflow, "--overflow drop drops %" PRIu64
                 " samples, %" PRIu64 " tokens (%.2f %% of the tokens), longer than %s of %"
                 PRIu64 " tokens: --overflow split keeps them as pieces", over, over_tok,
                 share, what, limit);
}

/* pad: an outlier step costs the group times its costliest outlier
 * (lf_plan_bound_cost); say how many samples (pieces, as the plan cuts
 * them) cost more than the bound allows, how far over their steps go, and
 * what fixes it. */
static void note_bound(plan_cli *c, const lf_plan_sample *s, size_t n)
{
    const lf_plan_params *p = &c->params;
    uint64_t lim = lf_plan_bound_cost(p), over = 0, cmax = 0, keep = 0, len, k;
    if (lim == UINT64_MAX) return;
    lf_plan_lengths w = lf_plan_lengths_of(p, s, n, lf_plan_piece_len(p));
    while (lf_plan_lengths_next(&w, &len, &k)) {
        uint64_t cost = lf_plan_cost(&p->cost, len);
        if (cost > lim) over += k;
        if (cost > cmax) cmax = cost;
        if (cost <= lim && len > keep) keep = len;
    }
    if (!over) return;
    uint64_t g = p->outlier_group ? p->outlier_group : p->world;
    double ratio = (double)cmax * (double)g / (double)p->step_budget;
    double spr = ceil((double)c->samples_per_rank * (double)cmax / (double)lim);
    snprintf(c->note, sizeof c->note, "%" PRIu64 " samples cost more than --step-bound %.3g "
             "allows (a step holding one costs %.3g x the budget at most): split them at "
             "conversion (lf-shard --max-len %" PRIu64 "), or raise the budget "
             "(--samples-per-rank %.0f)", over, p->step_bound == 0 ? LF_PLAN_STEP_BOUND / 1e3
             : p->step_bound / 1e3, ratio, keep, spr);
}

/* Sums over samples cut at piece (0: none): cost (in a double: a uint64_t
 * sum wraps past 2^64 with costs in FLOPs), tokens, the longest, how many.
 * The cost is the double summed sample by sample, in order: from the
 * view's counts (lf_plan_lengths) where that sum is exact (below 2^53),
 * else sample by sample, so the budget drawn from it keeps its rounding. */
typedef struct sample_sums {
    double cost;
    uint64_t tokens, longest, count;
} sample_sums;

static sample_sums sum_samples(const lf_plan_params *p, const lf_plan_sample *s, size_t n,
                               uint64_t piece)
{
    sample_sums t = {0, 0, 0, 0};
    unsigned __int128 cost = 0;
    lf_plan_lengths w = lf_plan_lengths_of(p, s, n, piece);
    uint64_t len, k;
    while (lf_plan_lengths_next(&w, &len, &k)) {
        cost += (unsigned __int128)lf_plan_cost(&p->cost, len) * k;
        t.tokens += len * k;
        t.count += k;
        if (len > t.longest) t.longest = len;
    }
    t.cost = (double)cost;
    if (cost >> 53) {
        lf_plan_params q = *p;
        q.view.hist = NULL;
        w = lf_plan_lengths_of(&q, s, n, piece);
        for (t.cost = 0; lf_plan_lengths_next(&w, &len, &k);)
            for (uint64_t j = 0; j < k; j++) t.cost += (double)lf_plan_cost(&p->cost, len);
    }
    return t;
}

/* Whether every sample the plan cuts has an id its pieces can be numbered
 * above (below 2^40: lf_plan_overflow); a view's ids, its indices, have. */
static int cut_ids_fit(const lf_plan_params *p, const lf_plan_sample *s, size_t n)
{
    uint64_t piece = lf_plan_piece_len(p);
    for (size_t i = 0; s && piece && i < n; i++)
        if (lf_plan_piece_count(s[i].length, piece) > 1 && lf_plan_piece_sample(s[i].id) != s[i].id)
            return 0;
    return 1;
}

/* The default budget, from the samples as the plan will have them (pieces
 * of the longer ones: --samples-per-rank counts what a rank gets). */
static int default_budget(plan_cli *c, const lf_plan_sample *s, size_t n)
{
    lf_plan_params *p = &c->params;
    sample_sums t = sum_samples(p, s, n, lf_plan_piece_len(p));
    if (p->layout == LF_PLAN_PACK) {
        /* whole rows: those --samples-per-rank samples' tokens come nearest to */
        double rows = (double)t.tokens / (double)t.count * c->samples_per_rank / p->seq_len;
        uint32_t whole = rows < 1.5 ? 1 : rows > (1u << 20) ? 1u << 20 : (uint32_t)(rows + 0.5);
        return lf_plan_pack_budget(p, s, n, whole, &p->step_budget);
    }
    double budget = t.cost / (double)t.count * c->samples_per_rank * p->world;
    if (budget > (double)LF_PLAN_COST_MAX) {
        snprintf(c->why, sizeof c->why, "the default step budget (%.4g) is above the "
                 "planner's limit 2^52: pass --budget, or scale --cost down", budget);
        return LF_PLAN_E_ARG;
    }
    p->step_budget = (uint64_t)budget;
    return 0;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Figures of a balanced epoch 0's first steps (PLAN_CLI_PREFIX_SAMPLES;
 * of a smaller epoch, every step counted, the tail too):
 * tokens, its largest step's global tokens over the median step's (0 when
 * no step has tokens); epoch, sum over steps of the costliest rank over
 * sum of the mean rank (0 when nothing costs). */
typedef struct epoch_fig {
    double tokens, epoch;
    uint64_t padded;             /* the most padded tokens a rank held in a step */
    uint64_t rank_samples;       /* the most samples a rank held in a step */
} epoch_fig;

void plan_cli_balance_add(plan_cli_balance *b, const lf_plan_step *st)
{
    uint64_t most = 0;
    for (uint32_t r = 0; r < st->world; r++) {
        b->sum_mean += (double)st->rank_cost[r] / st->world;
        if (st->rank_cost[r] > most) most = st->rank_cost[r];
    }
    b->sum_max += (double)most;
}

double plan_cli_balance_ratio(const plan_cli_balance *b)
{
    return b->sum_mean > 0 ? b->sum_max / b->sum_mean : 0;
}

static int measure_epoch0(const lf_plan_params *p, const lf_plan_sample *s, size_t n,
                          epoch_fig *f)
{
    f->padded = f->rank_samples = 0;
    lf_plan *plan;
    int rc = balanced_epoch0(p, s, n, &plan);
    if (rc) return rc;
    uint64_t *tok = NULL, steps = 0, cap = 0, placed = 0;
    plan_cli_balance bal = {0, 0};
    lf_plan_step st;
    while (placed < PLAN_CLI_PREFIX_SAMPLES && (rc = lf_plan_next_step(plan, &st)) == 1) {
        placed += st.nsamples;
        if (steps == cap) {
            uint64_t *t = realloc(tok, (cap = cap ? 2 * cap : 256) * sizeof *t);
            if (!t) { rc = LF_PLAN_E_NOMEM; break; }
            tok = t;
        }
        tok[steps] = 0;
        for (uint32_t r = 0; r < st.world; r++) tok[steps] += st.rank_tokens[r];
        plan_cli_balance_add(&bal, &st);
        steps++;
        uint64_t padded = lf_plan_step_padded(plan);
        if (padded > f->padded) f->padded = padded;
        uint64_t most = plan_cli_step_rank_samples(&st);
        if (most > f->rank_samples) f->rank_samples = most;
    }
    lf_plan_free(plan);
    if (rc == 1) rc = 0; /* the prefix measured */
    f->tokens = f->epoch = 0;
    if (rc == 0 && steps) {
        qsort(tok, steps, sizeof *tok, cmp_u64);
        uint64_t median = tok[(steps + 1) / 2 - 1];
        if (median) f->tokens = (double)tok[steps - 1] / (double)median;
        f->epoch = plan_cli_balance_ratio(&bal);
    }
    free(tok);
    return rc;
}

uint64_t plan_cli_step_rank_samples(const lf_plan_step *st)
{
    uint64_t most = 0;
    for (uint32_t r = 0; r < st->world; r++)
        if (st->rank_start[r + 1] - st->rank_start[r] > most)
            most = st->rank_start[r + 1] - st->rank_start[r];
    return most;
}

uint64_t plan_cli_cap_permille(void)
{
    uint64_t v;
    return parse_env_u64("LF_TEST_CAP_PERMILLE", 1, 1000000, &v) ? v : PLAN_CLI_CAP_PERMILLE;
}

uint64_t plan_cli_cap_of(uint64_t most)
{
    uint64_t k = plan_cli_cap_permille(), want = most / 1000 * k + most % 1000 * k / 1000;
    return want > 0 ? want : 1;
}

int plan_cli_later_cap(const lf_plan_params *p, const lf_plan_sample *s, size_t n,
                       int samples, uint64_t *cap)
{
    epoch_fig fig;
    int rc = measure_epoch0(p, s, n, &fig);
    *cap = rc ? 0 : plan_cli_cap_of(samples ? fig.rank_samples : fig.padded);
    return rc;
}

#define SEQ_ROWS 4        /* rows a rank's step should hold, at least */
#define SEQ_MIN 64        /* the shortest row chosen */
#define SEQ_TRIES 5       /* halvings tried against the step bound */

/* The row field a default cut sets: pack's --seq-len, pad's
 * --micro-max-padded (a cap one sample must fit: longer ones are cut). */
static void set_row(lf_plan_params *p, uint64_t row)
{
    if (p->layout == LF_PLAN_PACK) p->seq_len = (uint32_t)row;
    else p->micro_max_padded = row;
}

/* pack's default --seq-len, and pad's default cut. A row as long as the
 * longest document put a whole epoch of real text into one step; rows
 * shorter than a rank's share of a step make a piece of a row cost more
 * than a rank's rows can even out (pack's outliers: steps of 1.7-8.6x the
 * median's tokens on real text at one row a rank). So: the power of two
 * nearest below a rank's token mass a step (--samples-per-rank mean
 * samples) over SEQ_ROWS rows, no longer than the longest sample; then,
 * while a balanced epoch 0 has a step of more than --step-bound times the
 * median step's tokens, half of it (at most SEQ_TRIES times; longer
 * samples are cut into pieces, so no token is lost). pad cuts the same
 * way, as --micro-max-padded would, but only where its epoch 0 uncut
 * breaks the bound (default_cut). Leaves the choice and why in
 * seq_len_why. */
static int default_row(plan_cli *c, const lf_plan_sample *s, size_t n, uint64_t tokens,
                       uint64_t longest)
{
    lf_plan_params *p = &c->params;
    double mass = (double)tokens / (double)n * c->samples_per_rank;
    uint64_t seq = SEQ_MIN;
    uint64_t most = p->rank_max_padded ? p->rank_max_padded : UINT64_MAX;   /* a row must fit */
    while (seq * 2 <= mass / SEQ_ROWS && seq * 2 <= longest && seq * 2 <= most &&
           seq * 2 <= (1u << 30))
        seq *= 2;
    if (longest <= seq) seq = longest;
    double bound = (p->step_bound ? p->step_bound : LF_PLAN_STEP_BOUND) / 1e3;
    epoch_fig fig = {0, 0, 0, 0};
    uint64_t budget = p->step_budget;
    int measured = 0, rc = 0;
    for (int tries = 0; p->step_bound != LF_PLAN_UNBOUNDED && tries < SEQ_TRIES; tries++) {
        set_row(p, seq);
        p->step_budget = budget;
        if (!budget) rc = default_budget(c, s, n);
        if (!rc) rc = measure_epoch0(p, s, n, &fig);
        if (rc) return rc;
        measured = fig.tokens > 0;
        if (fig.tokens <= bound || seq / 2 < SEQ_MIN) break;
        seq /= 2;
    }
    set_row(p, seq);
    p->step_budget = budget;
    int n_ = snprintf(c->seq_len_why, sizeof c->seq_len_why, "--%s %" PRIu64 " (default: "
                      "a rank's step of %u mean samples, %.0f tokens, in %u %s or more",
                      p->layout == LF_PLAN_PACK ? "seq-len" : "micro-max-padded", seq,
                      c->samples_per_rank, mass, SEQ_ROWS,
                      p->layout == LF_PLAN_PACK ? "rows" : "pieces");
    if (measured)
        snprintf(c->seq_len_why + n_, sizeof c->seq_len_why - (size_t)n_, "; epoch 0's "
                 "largest step %.3fx the median step's tokens, %s --step-bound %.3g%s)",
                 fig.tokens, fig.tokens <= bound ? "within" : "over", bound,
                 longest > seq ? "; longer samples are served in pieces" : "");
    else
        snprintf(c->seq_len_why + n_, sizeof c->seq_len_why - (size_t)n_, "%s)",
                 longest > seq ? "; longer samples are served in pieces" : "");
    return 0;
}

int plan_cli_cut_over(const plan_cli *c, double figure)
{
    const lf_plan_params *p = &c->params;
    return figure > (p->step_bound ? p->step_bound : LF_PLAN_STEP_BOUND) / 1e3;
}

/* pad's default cut. Unsplit real text holds documents costing far more
 * than a rank's share of a step (up to 627k tokens): the default budget,
 * a mean cost their quadratic term dominates, put the whole epoch into one
 * or two steps (epoch sum-max/sum-mean 2.4-2.8 at world 8, 12.6 at 64, a
 * step of 28x the median's tokens). Where no cap is set, a sample costs
 * more than --step-bound allows, and a balanced epoch 0 of the samples as
 * they are costs more than the bound over a perfect split (sum-max /
 * sum-mean over it: the epoch cannot be balanced uncut), pad cuts them as
 * pack rows them (default_row). A step over the bound in tokens alone
 * does not cut: on 1M synthetic samples at 4 a rank (steps up to 5x the
 * median's tokens, balanced) the cut was 512 tokens, 88 % of the tokens
 * in pieces, and p99 1.13; start-up names those samples and the flags
 * instead (note_bound). The check costs a balanced epoch 0 at start-up,
 * only where a sample costs more than the bound allows; under defer_cut the
 * caller's own walk of that epoch gives the figure (plan_cli.h). */
static int default_cut(plan_cli *c, const lf_plan_sample *s, size_t n, uint64_t tokens,
                       uint64_t longest)
{
    lf_plan_params *p = &c->params;
    if (p->step_bound == LF_PLAN_UNBOUNDED) return 0;
    uint64_t budget = p->step_budget;
    int rc = budget ? 0 : default_budget(c, s, n);
    lf_plan_params q = *p;
    q.sampler = LF_PLAN_BALANCED;
    uint64_t lim = rc ? UINT64_MAX : lf_plan_bound_cost(&q);
    int over = 0;
    if (p->outlier_cost > p->step_budget) lim = UINT64_MAX;   /* refused below, by name */
    lf_plan_lengths w = lf_plan_lengths_of(p, s, lim != UINT64_MAX ? n : 0, 0);
    uint64_t len, k;
    while (!over && lf_plan_lengths_next(&w, &len, &k)) over = lf_plan_cost(&p->cost, len) > lim;
    epoch_fig fig = {.epoch = c->cut_known ? c->cut_figure : 0};
    c->cut_pending = over && !c->cut_known && c->defer_cut;
    if (over && !c->cut_known && !c->defer_cut) rc = measure_epoch0(p, s, n, &fig);
    p->step_budget = budget;
    if (rc || !over || c->cut_pending || !plan_cli_cut_over(c, fig.epoch)) return rc;
    if ((rc = default_row(c, s, n, tokens, longest))) return rc;
    if (p->micro_max_padded >= longest) p->micro_max_padded = 0;   /* nothing cut */
    return 0;
}

int plan_cli_finish(plan_cli *c, int dataset_preset, const lf_plan_sample *s, size_t n,
                    int baselines)
{
    lf_plan_params *p = &c->params;
    int preset = c->preset >= 0 ? c->preset : dataset_preset;
    int rc = c->user_cost
                 ? lf_plan_cost_set(&p->cost, c->coef[0], c->coef[1], c->coef[2], c->coef[3])
                 : lf_plan_cost_preset(&p->cost, preset, c->hidden);
    if (rc) return rc;
    sample_sums all = sum_samples(p, s, n, 0);
    c->why[0] = c->seq_len_why[0] = '\0';
    c->cut_pending = 0;
    if (n == 0) snprintf(c->why, sizeof c->why, "the dataset has no samples");
    else if (all.cost == 0)
        snprintf(c->why, sizeof c->why, "every sample costs 0 under this cost model "
                 "(--cost a,b,c0,d: a, b or c0 above 0)");
    else if (p->layout == LF_PLAN_PACK && p->rank_max_padded && p->rank_max_padded < p->seq_len)
        snprintf(c->why, sizeof c->why, "--max-padded %" PRIu64 " is less than one row "
                 "(--seq-len %u)", p->rank_max_padded, p->seq_len);
    if (c->why[0]) return LF_PLAN_E_ARG;
    if (p->layout == LF_PLAN_PACK && !p->seq_len &&
        (rc = default_row(c, s, n, all.tokens, all.longest)))
        return rc;
    if (p->layout == LF_PLAN_PAD && p->overflow == LF_PLAN_OVERFLOW_SPLIT &&
        !p->micro_max_padded && !p->rank_max_tokens && !p->rank_max_padded &&
        (rc = default_cut(c, s, n, all.tokens, all.longest)))
        return rc;
    if (!cut_ids_fit(p, s, n)) {
        snprintf(c->why, sizeof c->why, "cannot split the samples longer than a row or cap "
                 "(sample ids must be below 2^40): pass --overflow drop");
        return LF_PLAN_E_ARG;
    }
    if (!p->step_budget) rc = default_budget(c, s, n);
    if (!rc && p->sampler == LF_PLAN_BALANCED && p->outlier_cost > p->step_budget) {
        snprintf(c->why, sizeof c->why, "--outlier-cost %" PRIu64 " is above the step "
                 "budget %" PRIu64, p->outlier_cost, p->step_budget);
        rc = LF_PLAN_E_ARG;
    }
    c->note[0] = '\0';
    note_overflow(c, s, n, all.tokens);
    if (!rc && p->layout != LF_PLAN_PACK) note_bound(c, s, n);
    if (!rc && baselines && !p->batch_per_rank) return baseline_batch(p, s, n);
    return rc;
}
