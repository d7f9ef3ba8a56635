/*
 * plan_cli.h — the plan's command-line options, one definition for every
 * program that plans (lf-plan, lf-server), so the same flags give the same
 * plan: the same names, ranges and defaults, and the same defaults drawn
 * from the data (cost preset from the dataset's cost field, step budget,
 * pack row length, the baselines' batch size).
 *
 * A program puts PLAN_CLI_OPTIONS into its getopt_long table, hands every
 * code for which plan_cli_owns() is true to plan_cli_set(), prints
 * plan_cli_help in its --help, and calls plan_cli_finish() once the samples
 * are known. World size and sampler stay the program's own options.
 */
#ifndef LF_PLAN_CLI_H
#define LF_PLAN_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "lf_plan.h"
#include "lf_shard.h"

typedef struct plan_cli {
    lf_plan_params params;       /* world and sampler are set by the program */
    int preset;                  /* LF_PLAN_PRESET_*, -1: from the dataset's cost field */
    uint32_t hidden;             /* model width for the text/frames presets */
    int user_cost;               /* --cost or --cost-file given: coef holds a, b, c0, d */
    double coef[4];
    uint32_t samples_per_rank;   /* sets the default budget and baselines' batch */
    char why[160];               /* plan_cli_finish's refusal in words ("": none) */
    char note[320];              /* plan_cli_finish: what the plan cannot keep (the
                                    step bound, samples longer than pack's row) and
                                    the flag that fixes it; a program prints it at
                                    start-up ("": nothing to say) */
    char seq_len_why[320];       /* plan_cli_finish: pack's --seq-len or pad's
                                    --micro-max-padded when it chose it,
                                    and why ("": given) */
    char overflow[320];          /* plan_cli_finish: the samples longer than a row or
                                    a cap, and what --overflow does with them ("":
                                    none is) */
    /* pad's default cut is decided on the first steps of a balanced epoch
     * 0 of the samples uncut (PLAN_CLI_PREFIX_SAMPLES), planned for its
     * sum-max/sum-mean alone (default_cut). A program that plans those very
     * steps anyway (lf-server's start-up measures them for its cap) sets
     * defer_cut: where the decision needs the figure,
     * plan_cli_finish leaves the samples uncut and sets cut_pending, and the
     * program measures the figure on its own walk (plan_cli_balance) and,
     * where plan_cli_cut_over says so, runs plan_cli_finish again from the
     * options as they were, with cut_figure: the same decision, one balanced
     * epoch and one plan fewer at start-up. */
    int defer_cut;               /* in: the caller measures epoch 0 itself */
    int cut_pending;             /* out: the figure is needed (defer_cut) */
    int cut_known;               /* in: cut_figure holds the figure */
    double cut_figure;           /* epoch 0 uncut, balanced: sum-max/sum-mean */
} plan_cli;

/* Sums over a plan's steps of its costliest rank and of its mean rank:
 * their ratio is an epoch's sum-max/sum-mean (balancer/README.md), summed
 * the one way every program reports and decides on. */
typedef struct plan_cli_balance {
    double sum_max, sum_mean;
} plan_cli_balance;
void plan_cli_balance_add(plan_cli_balance *b, const lf_plan_step *st);
double plan_cli_balance_ratio(const plan_cli_balance *b);   /* 0: nothing costs */

/* The figures of epoch 0 that decide a default (pad's cut, pack's row:
 * default_cut, default_row) are taken on its first steps, as many as place
 * this many samples or pieces (the step that reaches it the last: steps are
 * taken while fewer are placed), not on the whole epoch: what start-up
 * walks for them then does not grow with the dataset. An epoch of fewer
 * is measured whole. lf-server measures its cap on the same steps. */
#define PLAN_CLI_PREFIX_SAMPLES (UINT64_C(1) << 20)

/* The cap a balanced token plan's server puts on every epoch from epoch 0
 * on (lf_plan_cap_later; lf-server's rule 2, in its plan id): the most
 * padded tokens a rank held in a step of epoch 0's first steps (those that
 * place PLAN_CLI_PREFIX_SAMPLES, uncapped), and 1/8 more
 * (PLAN_CLI_CAP_PERMILLE / 1000; the test hook LF_TEST_CAP_PERMILLE=N
 * replaces the figure, so tests can make it bind). lf-plan caps its
 * balanced plan the same way, so it plans what the server serves. */
#define PLAN_CLI_CAP_PERMILLE 1125u
uint64_t plan_cli_cap_permille(void);
/* The most samples a rank holds in step st (what an image plan's cap
 * bounds: lf-server's and lf-plan's measure of the prefix). */
uint64_t plan_cli_step_rank_samples(const lf_plan_step *st);
/* The cap for a prefix whose most padded tokens are `most` (at least 1). */
uint64_t plan_cli_cap_of(uint64_t most);
/* plan_cli_cap_of the prefix of p's balanced epoch 0 (s NULL: the view's
 * samples), measured on a plan of its own, into *cap (0 on failure): of
 * the most padded tokens a rank held in a step, or with `samples` (an
 * image plan, capped in images) of the most samples. Returns 0 or a
 * negative lf_plan status. */
int plan_cli_later_cap(const lf_plan_params *p, const lf_plan_sample *s, size_t n,
                       int samples, uint64_t *cap);

/* Whether a balanced epoch 0 of figure sum-max/sum-mean, uncut, calls for
 * pad's default cut under c's --step-bound (it cannot be balanced uncut). */
int plan_cli_cut_over(const plan_cli *c, double figure);

enum {
    PLAN_CLI_BUDGET = 1000, PLAN_CLI_SPR, PLAN_CLI_BPR, PLAN_CLI_MAXTOK, PLAN_CLI_MAXPAD,
    PLAN_CLI_LOOKAHEAD, PLAN_CLI_MAXDEFER, PLAN_CLI_LOCALITY, PLAN_CLI_OUTLIER,
    PLAN_CLI_OCOST, PLAN_CLI_OGROUP, PLAN_CLI_PRESET, PLAN_CLI_HIDDEN, PLAN_CLI_COST,
    PLAN_CLI_SEED, PLAN_CLI_EPOCH, PLAN_CLI_LAYOUT, PLAN_CLI_SEQLEN, PLAN_CLI_MICROPAD,
    PLAN_CLI_MICROOVH, PLAN_CLI_STEPBOUND, PLAN_CLI_COSTFILE, PLAN_CLI_OVERFLOW,
    PLAN_CLI_SELECT, PLAN_CLI_END,
};

/* getopt_long entries for the codes above (all take a value). */
#define PLAN_CLI_OPTIONS                                                            \
    {"budget", 1, 0, PLAN_CLI_BUDGET}, {"samples-per-rank", 1, 0, PLAN_CLI_SPR},    \
    {"batch-per-rank", 1, 0, PLAN_CLI_BPR}, {"max-tokens", 1, 0, PLAN_CLI_MAXTOK},  \
    {"max-padded", 1, 0, PLAN_CLI_MAXPAD}, {"lookahead", 1, 0, PLAN_CLI_LOOKAHEAD}, \
    {"max-defer", 1, 0, PLAN_CLI_MAXDEFER},                                         \
    {"locality-blocks", 1, 0, PLAN_CLI_LOCALITY},                                   \
    {"outlier", 1, 0, PLAN_CLI_OUTLIER}, {"outlier-cost", 1, 0, PLAN_CLI_OCOST},    \
    {"outlier-group", 1, 0, PLAN_CLI_OGROUP}, {"preset", 1, 0, PLAN_CLI_PRESET},    \
    {"hidden", 1, 0, PLAN_CLI_HIDDEN}, {"cost", 1, 0, PLAN_CLI_COST},               \
    {"seed", 1, 0, PLAN_CLI_SEED}, {"epoch", 1, 0, PLAN_CLI_EPOCH},                 \
    {"layout", 1, 0, PLAN_CLI_LAYOUT}, {"seq-len", 1, 0, PLAN_CLI_SEQLEN},          \
    {"micro-max-padded", 1, 0, PLAN_CLI_MICROPAD},                                  \
    {"micro-overhead", 1, 0, PLAN_CLI_MICROOVH}, {"step-bound", 1, 0, PLAN_CLI_STEPBOUND}, \
    {"cost-file", 1, 0, PLAN_CLI_COSTFILE}, {"overflow", 1, 0, PLAN_CLI_OVERFLOW}, \
    {"select", 1, 0, PLAN_CLI_SELECT}

/* The --help lines for these options. */
extern const char plan_cli_help[];

void plan_cli_init(plan_cli *c);

/* Whether `code` is one of PLAN_CLI_OPTIONS'. */
int plan_cli_owns(int code);

/* Applies option `code` with its value. Returns 0, or -1 when the value is
 * out of range or not one of the option's words; for --cost-file, why then
 * says which line of the file and what is wrong. */
int plan_cli_set(plan_cli *c, int code, const char *value);

/* The cost preset a dataset's cost field calls for (tokens: text, frames,
 * JPEG: images). */
int plan_cli_preset_of(const lf_schema *schema);

/* A dataset's samples as the planner reads them, in place (lf_plan_view:
 * ids 0..n-1): the lengths where the dataset's index.lfx maps them
 * (lf_dataset_mapped_lengths; a union of several sources, each one's
 * index.lfx: lf_dataset_source_lengths, the view's segments `seg`, with
 * one byte of `chunk` a 4096 samples), else copied into `own` (4 bytes a
 * sample: a dataset opened whole, with a per-sample table); each block's
 * first sample (4 bytes a block). Mapped, the view's release is
 * plan_cli_input_release, so
 * the pages a plan has read leave the process as it goes (its release_arg
 * is `in`: the struct stays where it is while the view is used). A program puts `view` into the plan's parameters and
 * passes no sample array (plan_cli_finish, lf_plan_create: samples NULL).
 * The dataset stays open, and the input unfreed, while any plan made from
 * it lives (the plan reads the lengths where they lie). */
typedef struct plan_cli_input {
    lf_plan_view view;
    size_t n;                    /* samples */
    uint32_t *own;               /* the lengths copied (NULL: mapped) */
    lf_plan_segments seg;        /* a union's (view.segments; count 0: none) */
    uint8_t *chunk;              /* seg.chunk (NULL: none) */
    uint32_t *block_start;       /* blocks + 1 offsets (view.block_start) */
    uint32_t *hist;              /* view.hist (NULL: none) */
} plan_cli_input;

/* Fills *in from ds, the view's length counts included (over all n
 * samples: plan_cli_input_count), and its digest (lf_plan_view's), both
 * from the index's summary where it has one (lf_dataset_index_summary),
 * so no pass reads every length for them. Returns 0, LF_PLAN_E_NOMEM, or
 * LF_PLAN_E_ARG (2^32 - 2 samples or more). */
int plan_cli_input_open(plan_cli_input *in, const lf_dataset *ds);

/* Writes dir's index summary (lf_index_summary_write) for the index.lfx
 * there, a dataset's or an index-only one's: its length counts (none where
 * a length is PLAN_CLI_HIST_LEN or more) and the view's digest
 * (lf_plan_view_digest), each one pass over the lengths, once, so a
 * planner's start-up makes neither; a summary already there (stale or
 * not) is removed first, never read. Returns 0 or a status with err set. */
int plan_cli_summary_write(const char *dir, lf_shard_error *err);

/* Takes dir's summary again from its lengths and compares it with the one
 * written (lf-shard verify). Returns 0 when they are the same, 1 where
 * there is none, or a status with err set (LF_SHARD_E_FORMAT: they
 * differ, naming it and lf-shard index). */
int plan_cli_summary_check(const char *dir, lf_shard_error *err);

/* Counts the lengths of the first n samples (n <= in->n) into the view's
 * hist (lf_plan_view: the passes of a plan over those n samples read
 * PLAN_CLI_HIST_LEN counts instead of n lengths); where a length is
 * PLAN_CLI_HIST_LEN or more, or the counts cannot be allocated, the view
 * has none (the passes read every length, as before). Nothing where they
 * are of n samples already. */
#define PLAN_CLI_HIST_LEN (1u << 16)
void plan_cli_input_count(plan_cli_input *in, size_t n);
void plan_cli_input_free(plan_cli_input *in);   /* then zeroed; accepts a zeroed one */

/* Drops the pages of the mapped lengths from the process (madvise
 * MADV_DONTNEED on a read-only file mapping: they stay in the page cache
 * and are read back from there when touched): the pages a scan of every
 * length touched would otherwise count in its resident memory until the
 * end. Nothing for copied lengths. */
void plan_cli_input_release(const plan_cli_input *in);

/* Completes the parameters from the data: the cost model (preset
 * `dataset_preset` unless --preset or --cost was given), the step budget
 * (--samples-per-rank x world x mean sample cost), the pack row length (see
 * plan_cli_help) and, when `baselines` is set and --batch-per-rank was not
 * given, the baselines' batch: balanced's mean samples per step / world (one
 * balanced epoch is planned to measure it), so every sampler moves as many
 * samples per step. params.world must be set. Returns 0 or a negative
 * lf_plan status; for the refusals a user can cause (no samples, every
 * sample free, a cap or outlier cost that cannot hold) why says which, in
 * the words of the flags. note says what the plan will not keep (steps over
 * --step-bound, samples longer than pack's row) and the flag that fixes it.
 * s NULL: the samples are c->params.view's (plan_cli_input). */
int plan_cli_finish(plan_cli *c, int dataset_preset, const lf_plan_sample *s, size_t n,
                    int baselines);

#endif
