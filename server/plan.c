/*
 * plan.c — what lf-server asks of the balancer: the plan over the dataset
 * index, a pre-pass before serving that sizes the ring slots (and, where
 * the epochs are small, counts the first one's samples per block and
 * steps), the plan id clients keep in their saved states,
 * the plan fingerprint the nodes of a job compare, and the batch layout of
 * a job (which tensors, what shapes).
 *
 * The pre-pass sizes the slots without walking an epoch (it once walked
 * every one for the largest batch any local rank gets): every plan is
 * capped (balanced) or a baseline (naive, sorted). A capped plan walks only the
 * first steps of epoch 0 (measure_prefix, as many as place
 * PLAN_CLI_PREFIX_SAMPLES), and every epoch from epoch 0 on is capped at
 * the most padded tokens (images: samples) a rank held in them, and 1/8
 * more (lf_plan_cap_later, lf_plan_cap_later_samples, set on every plan
 * made here once known), which the slots are sized for (fit_cap); a
 * baseline's slots are sized for its fixed count a rank of its longest
 * sample (set_fixed). The planner counts every epoch while serving, epoch
 * 0's by a scout started at once (planner.c), which prints the epoch's
 * balance report (srv_report_*). Where the epochs are small (at most the
 * prefix) start-up walks the first, and counts it (small_epochs).
 */
#include "srv.h"

#include "lf_ring.h"
#include "parse_num.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

int srv_plan_errno(int status)
{
    switch (status) {
    case LF_PLAN_E_NOMEM: return -ENOMEM;
    case LF_PLAN_E_STATE:
    case LF_PLAN_E_VERSION: return -EBADMSG;
    case LF_PLAN_E_BUFFER: return -ENOBUFS;
    case LF_PLAN_E_RANGE: return -ERANGE;
    case LF_PLAN_E_OVERFLOW: return -EOVERFLOW;
    default: return status < 0 ? -EINVAL : status;
    }
}

/* Whether the plan caps its epochs: a balanced plan. Tokens and frames
 * are capped in padded tokens (lf_plan_cap_later: frames [n, longest,
 * width] hold padded x width values), images in samples a rank
 * (lf_plan_cap_later_samples: a decoded image has a fixed size, and a cap
 * on pixels x images would bound no count of them). The rule is part of
 * the plan id, as it is of the sequence. */
static int capped(const srv *s)
{
    return s->cfg.plan.sampler == LF_PLAN_BALANCED;
}

/* Sets the run's cap (s->later_cap, or `cap` where it is not known yet)
 * on plan p, from epoch 0 on; returns the cap in force. */
static uint64_t apply_cap(const srv *s, lf_plan *p, uint64_t cap)
{
    return s->images ? lf_plan_cap_later_samples(p, 0, cap) : lf_plan_cap_later(p, 0, cap);
}

/* What the cap bounds in plan p's current step st: the most samples a
 * rank holds (images), else the most padded tokens. */
static uint64_t step_most(const srv *s, lf_plan *p, const lf_plan_step *st)
{
    return s->images ? plan_cli_step_rank_samples(st) : lf_plan_step_padded(p);
}

/* Whether the plan is a baseline (naive, sorted): a fixed count a rank, so
 * its slots are sized from that bound (lf_plan_fixed_bound) and, as a
 * capped plan's, no epoch is walked at start-up. */
static int fixed(const srv *s)
{
    return s->cfg.plan.sampler != LF_PLAN_BALANCED;
}

/* The cap on every epoch from the plan's epoch 0 on: the most padded
 * tokens on a rank in a step of epoch 0's first steps (those that place
 * PLAN_CLI_PREFIX_SAMPLES: the whole epoch where it is smaller), and 1/8
 * more (plan_cli_cap_of: PLAN_CLI_CAP_PERMILLE / 1000 of it, as lf-plan
 * caps its plan). The rule is in the plan id (CAP_RULE and the figure):
 * where the cap binds, a step differs from the plan without it, so a state
 * saved under another rule is refused. Rule 1 (the whole of epoch 0
 * measured, the cap from epoch 1 on) walked epoch 0 at start-up; rule 2
 * walks the prefix alone, and caps epoch 0 too (past the prefix, which the
 * cap leaves as it was). LF_TEST_CAP_PERMILLE replaces the figure, so
 * tests can make it bind. */
#define CAP_RULE 2u

/* The plan from the run's epoch `epoch` on (the absolute number: epochs do
 * not depend on each other, a plan started at epoch e makes the same steps
 * as one that walked the epochs before it), over the training samples
 * alone (the first ones): with or without --eval-data, the same plan; the
 * later epochs' cap on it once start-up knows it. Returns the balancer's
 * status (LF_PLAN_E_*). */
static int plan_create_status(const srv *s, uint32_t epoch, lf_plan **out)
{
    lf_plan_params prm = s->cfg.plan;   /* its view: s->plan_input, read in place */
    prm.epoch = epoch;
    int rc = lf_plan_create(&prm, NULL, s->train_samples, out);
    if (rc == 0 && s->later_cap) apply_cap(s, *out, s->later_cap);
    return rc;
}

/* A pass's plan is made from s->eval_set, the held-out samples listed once
 * at start-up: not from a list of every sample made again each pass. It is
 * one source, whatever the training's mixture. */
int srv_plan_eval_create(const srv *s, lf_plan **out)
{
    lf_plan_params prm = s->cfg.plan;
    prm.epoch = 0;
    prm.mix.sources = 0;
    uint64_t n = lf_dataset_samples(s->ds) - s->train_samples;
    return srv_plan_errno(lf_plan_create(&prm, s->eval_set, n, out));
}

int srv_plan_create_at(const srv *s, uint32_t e, lf_plan **out)
{
    return srv_plan_errno(plan_create_status(s, s->cfg.plan.epoch + e, out));
}

int srv_plan_create(const srv *s, lf_plan **out)
{
    return srv_plan_create_at(s, 0, out);
}

uint32_t srv_extra_dtype(uint32_t field_type)
{
    return field_type == LF_FIELD_PER_TOKEN_U8 ? LF_DTYPE_U8 : LF_DTYPE_I32;
}

/* The dataset's fine-tuning fields, after a token layout's own tensors:
 * a per-token one shaped as the tokens (its stored type), a per-sample
 * one [n] int64, each under its field's name. */
static int add_extras(const srv *s, lf_layout *l, uint32_t rank, const uint64_t *tokens,
                      uint64_t n)
{
    const lf_schema *sc = lf_dataset_schema(s->ds);
    int rc = 0;
    for (uint32_t e = 0; rc >= 0 && e < s->nextras; e++) {
        const lf_field_def *f = &sc->fields[s->extra_field[e]];
        if (f->type == LF_FIELD_LABEL_I64)
            rc = lf_layout_add(l, f->name, LF_DTYPE_I64, 1, &n);
        else
            rc = lf_layout_add(l, f->name, srv_extra_dtype(f->type), rank, tokens);
    }
    return rc;
}

/* Start-up's plan for the walk from epoch index e, where e is 0 and it is
 * there (only the starting thread walks from 0: no other touches it). */
static int plan_take(srv *s, uint32_t e, lf_plan **out)
{
    if (e != 0 || !s->spare) return srv_plan_create_at(s, e, out);
    *out = s->spare;
    s->spare = NULL;
    if (s->later_cap) apply_cap(s, *out, s->later_cap);
    return 0;
}

/* Rewinds a walked plan to its first epoch's start and keeps it for the
 * planner: the steps that follow are the same as a new plan's
 * (lf_plan_state_restore's promise; e2e/plan_golden and the servers'
 * tests compare them). */
static void plan_give_back(srv *s, lf_plan *p)
{
    if (s->spare_start && lf_plan_state_restore(p, s->spare_start,
                                                (size_t)s->spare_start_size) == 0)
        s->spare = p;
    else
        lf_plan_free(p);
}

int srv_plan_first(srv *s, lf_plan **out)
{
    return plan_take(s, 0, out);
}

void srv_plan_spare_free(srv *s)
{
    lf_plan_free(s->spare);
    free(s->spare_start);
    plan_cli_input_free(&s->plan_input);   /* the plans that read it are freed */
    lf_plan_cut_free(s->cut);
    s->cut = NULL;
    s->cfg.plan.view.cut = NULL;
    s->spare = NULL;
    s->spare_start = NULL;
}

/* Every batch's sample_ids [n], and where they apply sample_offsets [n]
 * (pieces: each one's first token in its sample) and source [n] (a
 * mixture: each sample's --data number, int32). */
static int add_ids(const srv *s, lf_layout *l, uint64_t n)
{
    int rc = lf_layout_add(l, "sample_ids", LF_DTYPE_U64, 1, &n);
    if (rc >= 0 && s->pieces) rc = lf_layout_add(l, "sample_offsets", LF_DTYPE_U64, 1, &n);
    if (rc >= 0 && s->mixture) rc = lf_layout_add(l, "source", LF_DTYPE_I32, 1, &n);
    return rc;
}

/* The tensors add_ids adds. */
static uint32_t id_tensors(const srv *s) { return 1 + (uint32_t)s->pieces + (uint32_t)s->mixture; }

/* --micro-batches: tokens [cells] (the micro-batches one after another,
 * each padded to its own length), lengths [n], micro [rows, 2] (each one's
 * samples and padded length), sample_ids [n]. */
static int micro_layout(const srv *s, uint32_t n, uint32_t rows, uint64_t cells, lf_layout *l)
{
    uint32_t dt = s->cfg.token_dtype, idx = lf_tf_index_dtype(dt);
    uint64_t flat[1] = {cells}, ids[1] = {n}, micro[2] = {rows, 2};
    int rc = lf_layout_init(l, LF_SLOT_HEADER_SIZE +
                                   lf_layout_encoded_size(3 + id_tensors(s) + s->nextras),
                            LF_LAYOUT_MIN_ALIGN);
    if (rc >= 0) rc = lf_layout_add(l, "tokens", dt, 1, flat);
    if (rc >= 0) rc = lf_layout_add(l, "lengths", idx, 1, ids);
    if (rc >= 0) rc = lf_layout_add(l, "micro", idx, 2, micro);
    if (rc >= 0) rc = add_ids(s, l, n);
    if (rc >= 0) rc = add_extras(s, l, 1, flat, n);
    return rc < 0 ? rc : 0;
}

/* The tensors of a token batch of n samples in `rows` rows of row_len. */
static int token_layout(const srv *s, uint32_t n, uint32_t rows, uint32_t row_len,
                        lf_layout *l)
{
    int pack = s->cfg.plan.layout == LF_PLAN_PACK;
    uint32_t dt = s->cfg.token_dtype, idx = lf_tf_index_dtype(dt);
    uint32_t ntensors = (pack ? 4 : 2) + id_tensors(s) + s->nextras;
    int rc = lf_layout_init(l, LF_SLOT_HEADER_SIZE + lf_layout_encoded_size(ntensors),
                            LF_LAYOUT_MIN_ALIGN);
    uint64_t grid[2] = {rows, row_len}, ids[1] = {n}, cu[1] = {(uint64_t)n + rows + 1};
    if (rc >= 0) rc = lf_layout_add(l, "tokens", dt, 2, grid);
    if (rc >= 0 && pack) rc = lf_layout_add(l, "positions", idx, 2, grid);
    if (rc >= 0 && pack) rc = lf_layout_add(l, "cu_seqlens", idx, 1, cu);
    if (rc >= 0 && pack) rc = lf_layout_add(l, "max_seqlen", idx, 0, NULL);
    if (rc >= 0 && !pack) rc = lf_layout_add(l, "lengths", idx, 1, ids);
    if (rc >= 0) rc = add_ids(s, l, n);
    if (rc >= 0) rc = add_extras(s, l, 2, grid, n);
    return rc < 0 ? rc : 0;
}

/* An image batch: n images (u8 HWC, or f16/f32 CHW), labels if the schema
 * has one, and the sample ids. */
static int image_layout(const srv *s, uint32_t n, lf_layout *l)
{
    const lf_tf_image_params *p = &s->cfg.image;
    int hwc = p->out_dtype == LF_DTYPE_U8, has_label = s->label_field >= 0;
    uint32_t ntensors = 1 + id_tensors(s) + (uint32_t)has_label;
    uint64_t img[4] = {n, hwc ? p->out_h : 3, hwc ? p->out_w : p->out_h, hwc ? 3 : p->out_w};
    uint64_t ids[1] = {n};
    int rc = lf_layout_init(l, LF_SLOT_HEADER_SIZE + lf_layout_encoded_size(ntensors),
                            LF_LAYOUT_MIN_ALIGN);
    if (rc >= 0) rc = lf_layout_add(l, "images", p->out_dtype, 4, img);
    if (rc >= 0 && has_label) rc = lf_layout_add(l, "labels", LF_DTYPE_I64, 1, ids);
    if (rc >= 0) rc = add_ids(s, l, n);
    return rc < 0 ? rc : 0;
}

/* A frames batch: n samples padded to the longest (row_len frames) with
 * zeros ([rows, row_len, width]: rows n), their frame counts, the labels
 * if any, the sample ids. */
static int frames_layout(const srv *s, uint32_t n, uint32_t rows, uint32_t row_len,
                         lf_layout *l)
{
    int has_label = s->label_field >= 0;
    uint32_t ntensors = 2 + id_tensors(s) + (uint32_t)has_label;
    uint64_t grid[3] = {rows, row_len, s->frame_width}, ids[1] = {n};
    int rc = lf_layout_init(l, LF_SLOT_HEADER_SIZE + lf_layout_encoded_size(ntensors),
                            LF_LAYOUT_MIN_ALIGN);
    if (rc >= 0) rc = lf_layout_add(l, "frames", s->frame_dtype, 3, grid);
    if (rc >= 0) rc = lf_layout_add(l, "lengths", LF_DTYPE_I64, 1, ids);
    if (rc >= 0 && has_label) rc = lf_layout_add(l, "labels", LF_DTYPE_I64, 1, ids);
    if (rc >= 0) rc = add_ids(s, l, n);
    return rc < 0 ? rc : 0;
}

/* cells: --micro-batches only, the padded cells of all micro-batches. */
static int batch_layout(const srv *s, uint32_t n, uint32_t rows, uint32_t row_len,
                        uint64_t cells, lf_layout *l)
{
    if (s->images) return image_layout(s, n, l);
    if (s->frames) return frames_layout(s, n, n, row_len, l);
    if (s->cfg.micro_batches) return micro_layout(s, n, rows, cells, l);
    return token_layout(s, n, rows, row_len, l);
}

int srv_job_layout(const srv *s, const srv_job *j, lf_layout *l)
{
    uint64_t cells = 0;
    for (uint32_t i = 0; j->micro_len && i < j->n; i++) cells += j->micro_len[j->row_of[i]];
    return batch_layout(s, j->n, j->rows, j->row_len, cells, l);
}

/* What walk_plan calls: step (unless NULL) once for every step of the
 * run's epochs, then batch for each local rank's batch of it, in order;
 * epoch_end (unless NULL) when an epoch has been planned to its end, with
 * the plan, whose counts are then the epoch's. */
typedef struct walk_hooks {
    void (*step)(void *arg, lf_plan *p, const lf_plan_step *st);
    int (*batch)(srv *s, void *arg, const lf_plan_step *st, const lf_plan_batch *b);
    void (*epoch_end)(void *arg, const lf_plan *p);
} walk_hooks;

/* Walks epochs e0 .. e1-1 of the run's plan through the hooks. */
static int walk_plan(srv *s, uint32_t e0, uint32_t e1, const walk_hooks *h, void *arg)
{
    lf_plan *p;
    int rc = plan_take(s, e0, &p);
    if (rc < 0) return rc;
    for (uint32_t e = e0; e < e1 && rc >= 0; e++) {
        lf_plan_step st;
        while (rc >= 0 && (rc = srv_plan_errno(lf_plan_next_step(p, &st))) == 1) {
            /* start-up's progress, and its stop on a signal (startup.c) */
            atomic_fetch_add_explicit(&s->planned, st.nsamples, memory_order_relaxed);
            if (atomic_load_explicit(&s->startup_stop, memory_order_relaxed)) {
                rc = -EINTR;
                break;
            }
            if (h->step) h->step(arg, p, &st);
            for (uint32_t li = 0; li < s->cfg.nlocal && rc >= 0; li++) {
                lf_plan_batch b;
                rc = srv_plan_errno(lf_plan_rank_batch(p, s->cfg.local[li], &b));
                if (rc >= 0) rc = h->batch(s, arg, &st, &b);
            }
        }
        if (rc >= 0 && h->epoch_end) h->epoch_end(arg, p);
    }
    if (e0 == 0) plan_give_back(s, p);
    else lf_plan_free(p);
    return rc < 0 ? rc : 0;
}

/* Start-up warns when an epoch holds back more than OUTLIER_WARN_PCT % of
 * its samples as (delayed) outliers and they wait for their group more
 * than OUTLIER_WARN_PCT % of its steps on average. Either alone is by
 * design: the default pack plan makes 1.3-7.5 % of lognormal lengths
 * outliers that wait a few steps, and the default pad plan's rare outliers
 * (0.1 %) wait up to a sixth of an epoch at world 32 to fill a group. Both
 * together are what balancer/README.md warns of (the ordinary samples run
 * out before the outliers): on 100k such samples, world 32 at 6.3 %
 * outliers waiting 10 % of the epoch, world 128 at 5.0 % waiting 9 %,
 * steps were 73-89 % filled and max/mean p99 was 4-4.5. */
#define OUTLIER_WARN_PCT 5

/* One epoch's delayed outliers, from its steps (lf-plan reports the same
 * count as "outliers N released in groups"). */
typedef struct outlier_tally {
    uint32_t epoch;
    uint64_t steps, samples, outliers, wait_sum;
    uint32_t wait_max;
} outlier_tally;

/* The run's first epoch as a trainer will see it, every step counted, the
 * tail included (lf-plan's figures, balancer/README.md): Σ of each step's
 * costliest rank against Σ of its mean, the worst step, each step's global
 * tokens (for their spread against the median step) and ranks left empty.
 * Start-up prints it, so a plan whose steps a trainer cannot rely on is
 * seen before training, not after. */
typedef struct step_tally {
    plan_cli_balance bal;        /* sum-max/sum-mean, as lf-plan sums it */
    double worst;
    uint64_t source_tokens[LF_PLAN_MAX_SOURCES]; /* a mixture: the epoch's per source */
    uint64_t *tokens;            /* per step; NULL when out of memory */
    uint64_t steps, cap, empty;
    uint64_t level, level_piece_len; /* --select world's steps of whole pieces */
    uint32_t level_k;
} step_tally;

/* The samples an epoch leaves out: outliers under --outlier reject, and
 * samples that fit no cap or row (the same ones every epoch: both follow
 * from a sample's length alone), with the first few ids to name. */
#define LEFT_OUT_IDS 4
typedef struct left_out {
    int counted;
    uint64_t rejected, capped, tokens;   /* samples (or pieces), and their tokens */
    uint64_t ids[LEFT_OUT_IDS];
    size_t nids;
} left_out;

/* A walk of epochs e0 .. e1-1 (start-up's: the first; a scout's report:
 * srv_report_*): the largest slot they need, the epochs with too many
 * outliers (the one with the most, how many), and what its first epoch
 * leaves out. */
typedef struct prepass_part {
    srv *s;
    uint32_t e0, e1;
    uint64_t slot_size;
    outlier_tally cur, worst;
    uint32_t flagged;
    left_out left;
    step_tally balance;          /* its first epoch's steps (part 0: the run's first) */
    int measure;                 /* part 0 of a capped plan: the most padded tokens */
    uint64_t padded;             /* a rank held in a step of its first epoch */
    int rc;
} prepass_part;

/* Grows *slot_size to the slot layout l needs. */
static void grow_to(const lf_layout *l, uint64_t *slot_size)
{
    uint64_t need = (l->end + LF_SLOT_ALIGN - 1) / LF_SLOT_ALIGN * LF_SLOT_ALIGN;
    if (need > *slot_size) *slot_size = need;
}

/* Grows *slot_size to the slot batch b needs. */
static int fit_slot(const srv *s, const lf_plan_batch *b, uint64_t *slot_size)
{
    lf_layout l;
    int micro = s->cfg.micro_batches;
    int rc = batch_layout(s, b->nsamples, micro ? b->micro : b->rows, b->row_len,
                          b->padded_tokens, &l);
    if (rc == 0) grow_to(&l, slot_size);
    return rc;
}

/* Grows *slot_size to what any batch of at most n samples and `padded`
 * padded tokens (frames: frames) needs: every tensor of that layout at
 * least as large as the batch's (pad, tokens [n, longest] within [1,
 * padded], frames [n, longest, width] within [1, padded, width]; pack,
 * rows within padded / seq_len; micro-batches, cells within padded and at
 * most n of them; images, n of them), in the same order, so every offset
 * too. */
static int fit_cap(const srv *s, uint64_t padded, uint64_t n, uint64_t *slot_size)
{
    uint32_t seq = s->cfg.plan.seq_len;
    if (padded > UINT32_MAX || n > UINT32_MAX) return -EOVERFLOW;
    lf_layout l;
    int rc;
    if (s->images) rc = image_layout(s, (uint32_t)n, &l);
    else if (s->frames) rc = frames_layout(s, (uint32_t)n, 1, (uint32_t)padded, &l);
    else if (s->cfg.micro_batches) rc = micro_layout(s, (uint32_t)n, (uint32_t)n, padded, &l);
    else if (s->cfg.plan.layout == LF_PLAN_PACK)
        rc = token_layout(s, (uint32_t)n, (uint32_t)(padded / seq), seq, &l);
    else rc = token_layout(s, (uint32_t)n, 1, (uint32_t)padded, &l);
    if (rc == 0) grow_to(&l, slot_size);
    return rc;
}

/* Sizes the slot from the batch, and counts its samples per block (each
 * epoch's counts are its own row, written by the one thread walking it). */
static int grow_slot(srv *s, void *arg, const lf_plan_step *st, const lf_plan_batch *b)
{
    prepass_part *part = arg;
    uint64_t e = st->epoch - s->cfg.plan.epoch, nb = lf_dataset_blocks(s->ds) + 1;
    if (e < s->counted_epochs)
        for (uint32_t i = 0; i < b->nsamples; i++)
            s->epoch_uses[e * nb + lf_dataset_sample_block(s->ds,
                                                           lf_plan_piece_sample(b->ids[i]))]++;
    return fit_slot(s, b, &part->slot_size);
}

/* Adds n flagged epochs, o the one with the most outliers among them, to
 * a count and its worst so far. */
static void flag_epochs(uint32_t *flagged, outlier_tally *worst, uint32_t n,
                        const outlier_tally *o)
{
    if (n && (!*flagged || o->outliers > worst->outliers)) *worst = *o;
    *flagged += n;
}

static int outliers_excessive(const outlier_tally *o)
{
    /* in doubles: a warning's threshold, and steps x outliers may pass 2^64 */
    return o->outliers * 100 > o->samples * OUTLIER_WARN_PCT &&
           (double)o->wait_sum * 100 > (double)o->outliers * (double)o->steps * OUTLIER_WARN_PCT;
}

/* Adds a step of the part's first epoch to its balance tally. */
static void tally_balance(step_tally *b, const lf_plan_step *st)
{
    uint64_t max = 0, tokens = 0;
    double sum = 0;
    for (uint32_t r = 0; r < st->world; r++) {
        sum += (double)st->rank_cost[r];
        tokens += st->rank_tokens[r];
        if (st->rank_cost[r] > max) max = st->rank_cost[r];
        b->empty += st->rank_start[r + 1] == st->rank_start[r];
    }
    plan_cli_balance_add(&b->bal, st);
    if (sum > 0 && (double)max * st->world / sum > b->worst) b->worst = (double)max * st->world / sum;
    if (b->steps == b->cap) {
        uint64_t cap = b->cap ? b->cap * 2 : 1024;
        uint64_t *t = realloc(b->tokens, cap * sizeof *t);
        if (!t) free(b->tokens); /* the figure is lost, not the start-up */
        b->tokens = t;
        b->cap = t ? cap : 0;
    }
    if (b->tokens) b->tokens[b->steps] = tokens;
    b->steps++;
}

/* The tokens of a plan id: its sample's, or its piece's. */
static uint64_t id_tokens(const srv *s, uint64_t id)
{
    uint64_t len = lf_dataset_sample_length(s->ds, lf_plan_piece_sample(id));
    uint64_t at = lf_plan_piece_index(id) * s->piece_len;
    return s->piece_len && len - at > s->piece_len ? s->piece_len : len - at;
}

/* Counts a step in the part's report: its first epoch's balance, and its
 * released outliers and what they waited (the first noutliers ids; their
 * delay is the steps each waited for its group). */
static void report_step(prepass_part *part, const lf_plan_step *st)
{
    srv *s = part->s;
    uint32_t e = st->epoch - s->cfg.plan.epoch;
    if (e == part->e0) tally_balance(&part->balance, st);
    for (uint32_t i = 0; e == part->e0 && s->mixture && i < st->nsamples; i++)
        part->balance.source_tokens[lf_plan_mix_source(&s->cfg.plan.mix, st->ids[i])] +=
            id_tokens(s, st->ids[i]);
    outlier_tally *o = &part->cur;
    o->epoch = st->epoch;
    o->steps++;
    o->samples += st->nsamples;
    o->outliers += st->noutliers;
    for (uint32_t i = 0; i < st->noutliers; i++) {
        o->wait_sum += st->delay[i];
        if (st->delay[i] > o->wait_max) o->wait_max = st->delay[i];
    }
}

/* The prepass's step: counted in its epoch's steps (each rank's batch
 * count, which WELCOME tells the clients; the entry is the one walking
 * thread's), and in the part's report. */
static void prepass_step(void *arg, lf_plan *p, const lf_plan_step *st)
{
    prepass_part *part = arg;
    uint32_t e = st->epoch - part->s->cfg.plan.epoch;
    if (e < LF_WIRE_EPOCHS_MAX) part->s->epoch_steps[e]++;
    uint64_t padded = part->measure && e == part->e0 ? step_most(part->s, p, st) : 0;
    if (padded > part->padded) part->padded = padded;
    report_step(part, st);
}

/* An epoch planned: its outlier tally kept if excessive, and, for the
 * part's first epoch, what it left out. */
static void end_epoch(void *arg, const lf_plan *p)
{
    prepass_part *part = arg;
    const outlier_tally *o = &part->cur;
    if (o->steps && outliers_excessive(o)) flag_epochs(&part->flagged, &part->worst, 1, o);
    part->cur = (outlier_tally){0};
    left_out *l = &part->left;
    if (l->counted) return;
    step_tally *b = &part->balance;
    b->level = lf_plan_world_level(p, &b->level_piece_len, &b->level_k);
    lf_plan_counts c;
    lf_plan_counts_get(p, &c);
    l->counted = 1;
    l->rejected = c.rejected;
    l->capped = c.rejected_cap;
    l->tokens = c.rejected_tokens;
    uint64_t all = lf_plan_rejected_ids(p, l->ids, LEFT_OUT_IDS);
    l->nids = all < LEFT_OUT_IDS ? (size_t)all : LEFT_OUT_IDS;
}

static void prepass_walk(prepass_part *part)
{
    static const walk_hooks hooks = {prepass_step, grow_slot, end_epoch};
    part->rc = walk_plan(part->s, part->e0, part->e1, &hooks, part);
}

/* Says once, naming the flags, that the plan holds back too many outliers
 * for too long (`flagged` epochs; o: the one with the most). */
static void warn_outliers(const srv *s, const outlier_tally *o, uint32_t flagged)
{
    char alike[64] = "";
    if (flagged == s->cfg.epochs && flagged > 1)
        snprintf(alike, sizeof alike, " (the run's %u epochs alike)", flagged);
    else if (flagged > 1)
        snprintf(alike, sizeof alike, " (%u of the run's %u epochs alike)", flagged,
                 s->cfg.epochs);
    fprintf(stderr, "lf-server: warning: epoch %u holds back %" PRIu64 " of its %" PRIu64
            " samples (%.1f%%) as outliers, costlier than --outlier-cost (by default at most "
            "a rank's share of --budget): they wait for their group %.0f steps on average, "
            "at most %u, of the epoch's %" PRIu64 "%s\n", o->epoch, o->outliers,
            o->samples, 100.0 * (double)o->outliers / (double)o->samples,
            (double)o->wait_sum / (double)o->outliers, o->wait_max, o->steps, alike);
    fprintf(stderr, "lf-server: with that many outliers waiting that long, steps run short "
            "of ordinary samples and ranks go unequal: raise --budget (now %" PRIu64 "; its "
            "default follows --samples-per-rank) or --outlier-cost; lf-plan with the same flags "
            "reports the plan's balance\n", s->cfg.plan.step_budget);
}

/* The share of the dataset's tokens an epoch leaves out, in percent. */
static double dropped_pct(const srv *s, const left_out *l)
{
    uint64_t all = 0;
    for (uint64_t i = 0; i < s->train_samples; i++)
        all += lf_dataset_sample_length(s->ds, i);
    return all ? 100.0 * (double)l->tokens / (double)all : 0;
}

/* Says what every epoch leaves out, naming the first samples and the
 * flags that decide it: such samples are never delivered. */
static void warn_left_out(const srv *s, const left_out *l)
{
    char why[256] = "", ids[128] = "";
    int n = 0;
    if (l->rejected)
        n = snprintf(why, sizeof why, "%" PRIu64 " outlier(s) (--outlier reject: costlier "
                     "than --outlier-cost)", l->rejected);
    if (l->capped)
        snprintf(why + n, sizeof why - (size_t)n, "%s%" PRIu64 " that fit no cap or row "
                 "(--max-tokens, --max-padded, --micro-max-padded, --seq-len)",
                 n ? " and " : "", l->capped);
    for (size_t i = 0, m = 0; i < l->nids; i++)
        m += (size_t)snprintf(ids + m, sizeof ids - m, "%s%" PRIu64, i ? ", " : "", l->ids[i]);
    fprintf(stderr, "lf-server: warning: each epoch leaves out %" PRIu64 " of the %" PRIu64
            " samples, %.2f %% of the tokens, never delivered: %s; sample(s) %s%s\n",
            l->rejected + l->capped, s->train_samples, dropped_pct(s, l), why, ids,
            l->rejected + l->capped > l->nids ? ", ..." : "");
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* One line: the first epoch's balance, every step counted; "not measured"
 * where there is nothing to measure rather than a 0. */
static void report_balance(const srv *s, step_tally *b, const left_out *l)
{
    char spread[96] = "step tokens against the median step: not measured";
    if (b->tokens && b->steps) {
        qsort(b->tokens, b->steps, sizeof *b->tokens, cmp_u64);
        uint64_t median = b->tokens[(b->steps + 1) / 2 - 1];
        if (median)
            snprintf(spread, sizeof spread, "step tokens %.3f-%.3fx the median step's",
                     (double)b->tokens[0] / (double)median,
                     (double)b->tokens[b->steps - 1] / (double)median);
    }
    char ratio[64] = "epoch sum-max/sum-mean not measured";
    if (b->bal.sum_mean > 0)
        snprintf(ratio, sizeof ratio, "epoch sum-max/sum-mean %.5f, worst step %.5f",
                 plan_cli_balance_ratio(&b->bal), b->worst);
    char dropped[128] = "nothing dropped: 0 samples, 0 tokens (0 % of the tokens)";
    if (l->rejected + l->capped)
        snprintf(dropped, sizeof dropped, "dropped %" PRIu64 " sample(s) or piece(s), %" PRIu64
                 " tokens (%.2f %% of the tokens)", l->rejected + l->capped, l->tokens,
                 dropped_pct(s, l));
    fprintf(stderr, "lf-server: plan: epoch %u, every step counted: %" PRIu64 " steps, %s; %s; "
            "%" PRIu64 " empty rank-step(s); %s\n", s->cfg.plan.epoch, b->steps, ratio, spread,
            b->empty, dropped);
    if (b->level)
        fprintf(stderr, "lf-server: plan: --select world: every step %u whole pieces of %" PRIu64
                " tokens a rank, or their cost in shorter samples: %.4f x the budget\n",
                b->level_k, b->level_piece_len,
                s->cfg.plan.step_budget ? (double)b->level / (double)s->cfg.plan.step_budget : 0);
    char head[64];
    snprintf(head, sizeof head, "lf-server: plan: epoch %u draws ", s->cfg.plan.epoch);
    mix_cli_report(stderr, head, &s->cfg.mix, &s->cfg.plan.mix, b->source_tokens);
}

/* pad's default cut, deferred to this walk (main.c, dataset_defaults):
 * part 0's epoch 0 is the balanced epoch 0 of the samples uncut that
 * plan_cli_finish would have planned for the decision alone (the same
 * parameters, as the cut is pending only for a balanced plan from epoch
 * 0, and the same sums: plan_cli_balance). Returns -EAGAIN where the cut
 * applies: the walk was of a plan that is not served. */
static int cut_decided(srv *s, const plan_cli_balance *b)
{
    if (!s->cfg.cli.cut_pending) return 0;
    s->cfg.cli.cut_pending = 0;
    s->cut_figure = plan_cli_balance_ratio(b);
    return plan_cli_cut_over(&s->cfg.cli, s->cut_figure) ? -EAGAIN : 0;
}

/* Prints the run's first epoch's report (part: the one that walked it;
 * flagged epochs, worst: those with too many outliers). */
static void report_parts(const srv *s, prepass_part *part, uint32_t flagged,
                         const outlier_tally *worst)
{
    if (!s->cfg.quiet) report_balance(s, &part->balance, &part->left);
    if (flagged) warn_outliers(s, worst, flagged);
    if (part->left.rejected + part->left.capped) warn_left_out(s, &part->left);
}

srv_report *srv_report_new(srv *s)
{
    prepass_part *part = calloc(1, sizeof *part);
    if (part) *part = (prepass_part){.s = s, .e0 = 0, .e1 = 1};
    return (srv_report *)part;
}

void srv_report_step(srv_report *r, const lf_plan_step *st)
{
    report_step((prepass_part *)r, st);
}

void srv_report_print(srv_report *r, const lf_plan *p)
{
    prepass_part *part = (prepass_part *)r;
    end_epoch(part, p);
    report_parts(part->s, part, part->flagged, &part->worst);
    srv_report_free(r);
}

void srv_report_free(srv_report *r)
{
    prepass_part *part = (prepass_part *)r;
    if (part) free(part->balance.tokens);
    free(part);
}

/* Walks the run's first epoch (start-up's where the epochs are small:
 * small_epochs): the slots its batches need, its counts and its report;
 * *padded (unless NULL): the most padded tokens a rank held in a step of
 * it, where pad's deferred cut is decided (before the report: a cut walks
 * anew). */
static int walk_first_epoch(srv *s, uint64_t *padded)
{
    prepass_part part = {.s = s, .e0 = 0, .e1 = 1, .measure = padded != NULL};
    if (!s->cfg.quiet)
        fprintf(stderr, "lf-server: planning 1 epoch(s) of %" PRIu64 " samples to size the "
                "rings\n", s->train_samples);
    prepass_walk(&part);
    int rc = part.rc;
    if (part.slot_size > s->slot_size) s->slot_size = part.slot_size;
    if (padded) *padded = part.padded;
    if (rc == 0) rc = cut_decided(s, &part.balance.bal);
    if (rc == 0) report_parts(s, &part, part.flagged, &part.worst);
    free(part.balance.tokens);
    return rc;
}

/* A plan id: the plan's state blob (its first size bytes), the parameters
 * beside it and the later epochs' cap rule where one applies (rule, or
 * NULL); never 0, which means "no state". */
static uint64_t plan_hash(const void *blob, size_t size, const uint64_t *extra,
                          size_t extra_size, double flip_prob, const uint64_t *rule,
                          size_t rule_size)
{
    XXH3_state_t h;
    XXH3_64bits_reset(&h);
    XXH3_64bits_update(&h, blob, size);
    XXH3_64bits_update(&h, extra, extra_size);
    XXH3_64bits_update(&h, &flip_prob, sizeof flip_prob);
    if (rule) XXH3_64bits_update(&h, rule, rule_size);
    return XXH3_64bits_digest(&h) | 1;
}

/* The plan id: the plan's own hash of samples and sequence parameters (p,
 * in its initial state) plus everything else that shapes a rank's stream,
 * the later epochs' cap rule included (capped). */
static int compute_plan_id(srv *s, const lf_plan *p)
{
    long n = lf_plan_state_save(p, NULL, 0);
    unsigned char *blob = n > 0 ? malloc((size_t)n) : NULL;
    if (blob) n = lf_plan_state_save(p, blob, (size_t)n);
    if (!blob || n < 0) {
        free(blob);
        return n < 0 ? srv_plan_errno((int)n) : -ENOMEM;
    }
    const lf_plan_params *pp = &s->cfg.plan;
    const lf_tf_image_params *ip = &s->cfg.image;
    /* the plan's hash leaves out what only splits and cuts a step: the
     * cost per micro-batch d (it moves samples between ranks) and the
     * micro-batch cuts' overhead and cap */
    uint64_t extra[] = {pp->world, pp->layout, pp->seq_len, pp->rank_max_tokens,
                        pp->rank_max_padded, pp->cost.d, pp->micro_overhead,
                        pp->micro_max_padded, s->cfg.token_dtype, (uint64_t)s->cfg.pad_id,
                        (uint64_t)s->cfg.micro_batches,
                        ip->out_w, ip->out_h, ip->crop, ip->out_dtype, ip->resize};
    uint64_t rule[] = {CAP_RULE, plan_cli_cap_permille()};
    const uint64_t *r = capped(s) ? rule : NULL;
    s->plan_id = plan_hash(blob, (size_t)n, extra, sizeof extra, ip->flip_prob, r, sizeof rule);
    /* the same without the mixture's weights, the hash the blob ends in */
    size_t tail = s->cfg.plan.mix.sources > 1 ? LF_PLAN_STATE_WEIGHTS_TAIL : 0;
    s->base_id = plan_hash(blob, (size_t)n - tail, extra, sizeof extra, ip->flip_prob, r,
                           sizeof rule);
    s->spare_start = blob; /* p's start, to rewind it to (plan_give_back) */
    s->spare_start_size = n;
    return 0;
}

/* The plan fingerprint: the plan id (the samples' lengths and locality
 * groups, every sequence parameter, world, layout, transform), the split's
 * version (LF_PLAN_SPLIT_VERSION: not in the plan id, as a saved state
 * holds the sequence, which a new split keeps), the block
 * layout (each block's first sample, sample count and raw size: a copy
 * converted at another --block-size differs even where its groups come out
 * the same) and the epochs served (--epoch, --epochs: a node serving fewer
 * would leave its ranks short). Not the local ranks: it is the same on every
 * node of a job exactly when their servers plan the same global sequence.
 * The plan id alone stays what saved states carry, so a state restores into
 * a run started at a later --epoch. */
static void compute_fingerprint(srv *s)
{
    uint64_t head[] = {s->plan_id, LF_PLAN_SPLIT_VERSION, s->cfg.plan.epoch, s->cfg.epochs,
                       s->train_blocks};
    XXH3_state_t h;
    XXH3_64bits_reset(&h);
    XXH3_64bits_update(&h, head, sizeof head);
    for (uint64_t b = 0; b < s->train_blocks; b++) {
        const lf_block_info *bi = lf_dataset_block(s->ds, b);
        uint64_t v[3] = {bi->first_sample, bi->nsamples, bi->raw_size};
        XXH3_64bits_update(&h, v, sizeof v);
    }
    s->fingerprint = XXH3_64bits_digest(&h);
}

int srv_plan_identify(srv *s)
{
    lf_plan *p;
    int rc = plan_create_status(s, s->cfg.plan.epoch, &p);
    if (rc < 0) {
        fprintf(stderr, "lf-server: plan: %s\n", lf_plan_strerror(rc));
        return -ECANCELED; /* reported */
    }
    rc = compute_plan_id(s, p);
    if (rc < 0) lf_plan_free(p);
    else s->spare = p; /* kept: the prepass walks it, the planner then plans with it */
    if (rc < 0) {
        fprintf(stderr, "lf-server: plan id: %s\n", strerror(-rc));
        return -ECANCELED;
    }
    compute_fingerprint(s);
    return 0;
}

/* An eval pass: the slot fits its batches too, each rank gets eval_steps
 * of them, and start-up says how it looks (empty rank-batches and samples
 * left out, which a pass should have none of). */
static int eval_prepass(srv *s)
{
    lf_plan *p;
    uint64_t n = lf_dataset_samples(s->ds) - s->train_samples;
    s->eval_set = malloc(n * sizeof *s->eval_set); /* kept: its ids are not 0..n-1 */
    if (!s->eval_set) return -ENOMEM;
    for (uint64_t b = s->train_blocks; b < lf_dataset_blocks(s->ds); b++) {
        const lf_block_info *bi = lf_dataset_block(s->ds, b);
        for (uint64_t i = bi->first_sample; i < bi->first_sample + bi->nsamples; i++)
            s->eval_set[i - s->train_samples] =
                (lf_plan_sample){i, lf_dataset_sample_length(s->ds, i), b};
    }
    int rc = srv_plan_eval_create(s, &p);
    lf_plan_step st;
    uint64_t empty = 0, placed = 0;
    while (rc >= 0 && (rc = srv_plan_errno(lf_plan_next_step(p, &st))) == 1) {
        s->eval_steps++;
        placed += st.nsamples;
        for (uint32_t r = 0; r < st.world; r++) empty += st.rank_start[r + 1] == st.rank_start[r];
        for (uint32_t li = 0; li < s->cfg.nlocal && rc >= 0; li++) {
            lf_plan_batch b;
            rc = srv_plan_errno(lf_plan_rank_batch(p, s->cfg.local[li], &b));
            if (rc >= 0) rc = fit_slot(s, &b, &s->slot_size);
        }
    }
    lf_plan_counts c;
    if (rc >= 0) lf_plan_counts_get(p, &c);
    lf_plan_free(p);
    if (rc < 0) return rc;
    if (!s->cfg.quiet || empty || c.rejected + c.rejected_cap)
        fprintf(stderr, "lf-server: eval: %s: %" PRIu64 " samples, %u batch(es) a rank a pass, "
                "%" PRIu64 " sample(s) or piece(s) placed, %" PRIu64 " empty rank-batch(es), %"
                PRIu64 " left out\n", s->cfg.eval_dir, lf_dataset_samples(s->ds) - s->train_samples,
                s->eval_steps, placed, empty, c.rejected + c.rejected_cap);
    return 0;
}

/* The most padded tokens (images: samples) a rank holds in a step of the plan's epoch 0's
 * first steps (those that place PLAN_CLI_PREFIX_SAMPLES, as plan_cli
 * measures its defaults on), uncapped, and their balance (pad's deferred
 * cut decides on it): the absolute epoch 0, for a run started at --epoch E
 * caps its epochs as a run from 0 does (a state saved in one resumes in
 * the other onto the same steps). The plan made for the plan id walks them
 * where it starts there, and is rewound. Counted in start-up's progress. */
static int measure_prefix(srv *s, uint64_t *most, plan_cli_balance *bal)
{
    lf_plan *p = NULL;
    int own = s->cfg.plan.epoch != 0;
    int rc = own ? srv_plan_errno(plan_create_status(s, 0, &p)) : plan_take(s, 0, &p);
    lf_plan_step st;
    uint64_t placed = 0;
    while (rc >= 0 && placed < PLAN_CLI_PREFIX_SAMPLES &&
           (rc = srv_plan_errno(lf_plan_next_step(p, &st))) == 1) {
        placed += st.nsamples;
        atomic_fetch_add_explicit(&s->planned, st.nsamples, memory_order_relaxed);
        if (atomic_load_explicit(&s->startup_stop, memory_order_relaxed)) rc = -EINTR;
        uint64_t padded = step_most(s, p, &st);
        if (padded > *most) *most = padded;
        plan_cli_balance_add(bal, &st);
    }
    if (own) lf_plan_free(p);
    else if (p) plan_give_back(s, p);
    return rc < 0 ? rc : 0;
}

/* The cap from the prefix's most padded tokens (images: samples; x
 * CAP_PERMILLE), as the balancer takes it (at least one sample's), from
 * epoch 0 on, and the slots it needs: no batch of any epoch needs more. */
static int set_cap(srv *s, uint64_t most)
{
    lf_plan *p;
    int rc = plan_take(s, 0, &p); /* the start-up's plan: it takes the cap too */
    if (rc < 0) return rc;
    s->later_cap = apply_cap(s, p, plan_cli_cap_of(most));
    rc = s->images ? fit_cap(s, 0, s->later_cap, &s->slot_size)
                   : fit_cap(s, s->later_cap, lf_plan_rank_samples_max(p, s->later_cap),
                             &s->slot_size);
    s->spare = p; /* still at its first epoch's start */
    if (rc == 0 && !s->cfg.quiet)
        fprintf(stderr, "lf-server: plan: every epoch planned while serving, a rank's step "
                "capped at %" PRIu64 " %s (the most in epoch 0's first %" PRIu64
                " samples, %" PRIu64 ", x %.3f), the ring slots sized for it\n", s->later_cap,
                s->images ? "images" : s->frames ? "padded frames" : "padded tokens",
                (uint64_t)PLAN_CLI_PREFIX_SAMPLES, most, (double)plan_cli_cap_permille() / 1000);
    return rc;
}

/* A baseline's slots: sized for its bound (lf_plan_fixed_bound: the most
 * samples a rank holds in any step, each at most the longest placed, pad
 * padding them to it, pack a row each at most), which holds for every
 * epoch: no epoch is walked for it. */
static int set_fixed(srv *s)
{
    lf_plan *p;
    int rc = plan_take(s, 0, &p); /* the start-up's plan, given back as it is */
    if (rc < 0) return rc;
    uint64_t longest, n = lf_plan_fixed_bound(p, &longest);
    uint64_t each = s->cfg.plan.layout == LF_PLAN_PACK ? s->cfg.plan.seq_len : longest;
    rc = n > UINT32_MAX || each > UINT32_MAX ? -EOVERFLOW
                                              : fit_cap(s, n * each, n, &s->slot_size);
    s->spare = p;
    if (rc == 0 && !s->cfg.quiet)
        fprintf(stderr, "lf-server: plan: every epoch planned while serving, a rank's step at "
                "most %" PRIu64 " sample(s) (--batch-per-rank %u, or one more in an epoch's "
                "last step) of at most %" PRIu64 " %s, the ring slots sized for it\n", n,
                s->cfg.plan.batch_per_rank, longest,
                s->images ? "pixels" : s->frames ? "frames" : "tokens");
    return rc;
}

/* Whether the epochs of a capped or baseline plan are no larger than the
 * prefix (PLAN_CLI_PREFIX_SAMPLES): start-up then walks the run's first
 * epoch, as a capped plan measures the prefix where that is the same
 * epoch, and counts it (a walk of at most the prefix's size), so WELCOME
 * tells its count as before. The test hook LF_TEST_SCOUT_EPOCH0=1 leaves
 * it to the planner's scout whatever its size, as on a large dataset: the
 * slots are then the bound's alone. */
static int small_epochs(const srv *s)
{
    uint64_t t;
    return s->plan_samples <= PLAN_CLI_PREFIX_SAMPLES &&
           !(parse_env_u64("LF_TEST_SCOUT_EPOCH0", 1, 1, &t));
}

int srv_plan_prepass(srv *s)
{
    /* a second time after pad's default cut: anew (main.c, cut_again) */
    free(s->epoch_uses);
    free(s->epoch_steps);
    s->epoch_uses = NULL;
    atomic_store(&s->planned, 0);
    s->slot_size = LF_SLOT_ALIGN;
    s->later_cap = 0;
    s->counted_epochs = 0;
    s->epochs_planned = 0;
    s->epoch_steps = calloc(s->cfg.epochs < LF_WIRE_EPOCHS_MAX ? s->cfg.epochs : LF_WIRE_EPOCHS_MAX,
                            sizeof *s->epoch_steps);
    if (!s->epoch_steps) return -ENOMEM;
    int rc = 0;
    /* A capped plan measures its prefix and a baseline takes its bound,
     * and neither walks an epoch, the planner counting every epoch (and
     * telling it: EPOCH), epoch 0 by a scout started as it serves; unless
     * its epochs are small: then it walks the run's first (counted and
     * reported, as every epoch of balanced images), which for a capped
     * plan is the prefix where the run starts at epoch 0 and the cap,
     * above the prefix's most, cannot bind in it (LF_TEST_CAP_PERMILLE
     * below 1000 makes it bind): measured as it is walked. */
    uint32_t walked = small_epochs(s) ? 1 : 0;
    int measure_first = capped(s) && (!walked || s->cfg.plan.epoch != 0 ||
                                      plan_cli_cap_permille() < 1000);
    uint64_t most = 0, prefix = s->plan_samples < PLAN_CLI_PREFIX_SAMPLES
                                    ? s->plan_samples : PLAN_CLI_PREFIX_SAMPLES;
    atomic_store(&s->plan_total, (measure_first ? prefix : 0) + s->plan_samples * walked);
    if (measure_first) {
        plan_cli_balance bal = {0, 0};
        rc = measure_prefix(s, &most, &bal);
        if (rc == 0) rc = cut_decided(s, &bal);
        if (rc == 0) rc = set_cap(s, most);
    }
    if (rc == 0 && fixed(s)) rc = set_fixed(s);
    if (rc == 0 && walked) {
        s->counted_epochs = 1; /* its counts kept: no scout walks it again */
        s->epoch_uses = calloc(1, (lf_dataset_blocks(s->ds) + 1) * sizeof *s->epoch_uses);
        if (!s->epoch_uses) return -ENOMEM;
        rc = walk_first_epoch(s, capped(s) && !measure_first ? &most : NULL);
        s->epochs_planned = 1;
    }
    if (rc == 0 && capped(s) && !measure_first) rc = set_cap(s, most);
    if (rc == 0 && !s->cfg.quiet) /* the work start-up did, which tests count */
        fprintf(stderr, "lf-server: plan: start-up walked %" PRIu64 " sample(s) or piece(s), "
                "%u of the run's %u epoch(s)\n", atomic_load(&s->planned), walked,
                s->cfg.epochs);
    if (rc == 0 && s->eval_slots) rc = eval_prepass(s);
    plan_cli_input_release(&s->plan_input);   /* the pages the walk touched */
    return rc;
}

/* A sample's id, and a piece's as ID@OFFSET (its first token in the
 * sample), as lf-rank-loop --out writes them. */
void srv_print_id(FILE *f, uint64_t id, uint64_t piece_len, char sep)
{
    uint64_t k = lf_plan_piece_index(id);
    fprintf(f, "%c%" PRIu64, sep, lf_plan_piece_sample(id));
    if (k) fprintf(f, "@%" PRIu64, k * piece_len);
}

static int print_batch(srv *s, void *arg, const lf_plan_step *st, const lf_plan_batch *b)
{
    (void)arg;
    printf("%u %" PRIu64 " %u %u", st->epoch, st->step, b->rank, b->nsamples);
    for (uint32_t i = 0; i < b->nsamples; i++) srv_print_id(stdout, b->ids[i], s->piece_len, i ? ',' : ' ');
    printf("\n");
    return 0;
}

int srv_print_plan(srv *s)
{
    static const walk_hooks hooks = {.batch = print_batch};
    uint64_t most = 0;
    plan_cli_balance bal = {0, 0};
    int rc = capped(s) ? measure_prefix(s, &most, &bal) : 0;
    if (rc == 0 && capped(s)) rc = set_cap(s, most);
    return rc < 0 ? rc : walk_plan(s, 0, s->cfg.epochs, &hooks, NULL);
}
