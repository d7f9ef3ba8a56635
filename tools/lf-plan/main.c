/*
 * lf-plan — plan a dataset's epoch without a server and score the plan.
 *
 * Reads only the dataset's index (length and block of every sample), builds
 * the balanced plan and the two baselines with the same cost model, and
 * prints per sampler the figures balancer/README.md defines. --synth N plans
 * N in-memory samples instead, drawn like `lf-shard synth tokens` lengths
 * (lognormal; blocks of --synth-block consecutive samples), for benchmarks
 * that should not need a million-sample dataset on disk. --data A --weight
 * 0.5 --data B --weight 0.5 plans a mixture (common/mix_cli.h) and reports
 * the tokens each source gave against its weight.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index_only.h"
#include "lf_shard.h"
#include "mix_cli.h"
#include "open_limit.h"
#include "parse_num.h"
#include "plan_cli.h"
#include "synth_rng.h"
#include "score.h"
#include "version.h"

static const char usage_head[] =
    "Usage: lf-plan DIR --world N [OPTIONS]\n"
    "       lf-plan --data DIR --weight W [--data DIR --weight W ...] --world N [OPTIONS]\n"
    "       lf-plan --synth N --world N [OPTIONS]\n"
    "Plans an epoch from a dataset's index (no server) and prints, per sampler:\n"
    "per-step max/mean rank cost (p50/p99/max), padding fraction, budget fill,\n"
    "deferral delay in steps (p50/p99/max) and planner time per step.\n"
    "\n"
    "  --world N            ranks (required)\n"
    "  --sampler S          balanced, naive, sorted or all (default all)\n"
    "  --steps N            plan at most N steps per sampler (default: one epoch)\n"
    "  --json               print one JSON object instead of text\n"
    "  --data DIR           a dataset (instead of DIR); several make a mixture\n"
    "  --weight W           its share of the tokens, one per --data in order,\n"
    "                       summing to 1 within 1e-6; each epoch ends when the\n"
    "                       source furthest behind its share runs out, and the\n"
    "                       tokens per source are reported (balancer/README.md)\n"
    "  --version            print the version and exit\n"
    "\n"
    "Baselines: naive (full shuffle, equal counts per rank, as DistributedSampler)\n"
    "and sorted (length-grouped mega-batches, as HF group_by_length) take\n"
    "--batch-per-rank samples per rank per step, and are planned without\n"
    "--max-tokens / --max-padded / --micro-max-padded (caps bind balanced only),\n"
    "over the same pieces: a sample longer than a cap or than pad's default cut\n"
    "is cut for every sampler.\n"
    "\n"
    "In-memory input (instead of DIR):\n"
    "  --synth N            N samples, lognormal lengths drawn with the plan's --seed\n"
    "                       (so lf-shard synth tokens --seed S makes the same set)\n"
    "  --len-median M, --len-sigma X, --len-min A, --len-max B\n"
    "                       (default 600, 1.0, 32, 16384; as lf-shard synth tokens)\n"
    "  --synth-block K      samples per block (default 64)\n"
    "\n";

typedef struct opts {
    mix_cli mix;                 /* the datasets (DIR or --data) and weights */
    uint64_t synth, synth_block, len_min, len_max;
    double len_median, len_sigma;
    uint32_t samplers;           /* bit per lf_plan_sampler */
    uint64_t steps;
    int json;
    int preset;                  /* the data's cost preset: the dataset's, or text */
    plan_cli cli;                /* the plan options, shared with lf-server */
} opts;

static void die_usage(const char *what, const char *arg)
{
    fprintf(stderr, "lf-plan: %s%s\nTry 'lf-plan --help'.\n", what, arg ? arg : "");
    exit(2);
}

static uint64_t flag_u64(const char *name, const char *s, uint64_t lo, uint64_t hi)
{
    uint64_t v;
    if (parse_u64(s, lo, hi, &v)) die_usage("invalid value for --", name);
    return v;
}

static double flag_double(const char *name, const char *s, double lo, double hi)
{
    double v;
    if (parse_double(s, lo, hi, &v)) die_usage("invalid value for --", name);
    return v;
}

enum {
    O_WORLD = 256, O_SAMPLER, O_STEPS, O_JSON, O_SYNTH, O_MEDIAN, O_SIGMA, O_LMIN, O_LMAX,
    O_SBLOCK, O_HELP, O_VERSION, O_DATA, O_WEIGHT,
};

static const struct option longopts[] = {
    {"world", 1, 0, O_WORLD}, {"sampler", 1, 0, O_SAMPLER}, {"steps", 1, 0, O_STEPS},
    {"json", 0, 0, O_JSON}, {"synth", 1, 0, O_SYNTH}, {"len-median", 1, 0, O_MEDIAN},
    {"len-sigma", 1, 0, O_SIGMA}, {"len-min", 1, 0, O_LMIN}, {"len-max", 1, 0, O_LMAX},
    {"synth-block", 1, 0, O_SBLOCK}, {"help", 0, 0, O_HELP}, {"version", 0, 0, O_VERSION},
    {"data", 1, 0, O_DATA}, {"weight", 1, 0, O_WEIGHT},
    PLAN_CLI_OPTIONS,
    {0, 0, 0, 0},
};

static const char *const sampler_words[] = {"balanced", "naive", "sorted", "all", NULL};

static const char *option_name(int c)
{
    for (const struct option *o = longopts; o->name; o++)
        if (o->val == c) return o->name;
    return "?";
}

static void parse_one(opts *o, int c, const char *a)
{
    const char *name = option_name(c);
    if (plan_cli_owns(c)) {
        if (plan_cli_set(&o->cli, c, a) == 0) return;
        if (o->cli.why[0]) die_usage("", o->cli.why); /* names the file and line */
        die_usage("invalid value for --", name);
    }
    switch (c) {
    case O_WORLD: o->cli.params.world = (uint32_t)flag_u64(name, a, 1, 65536); break;
    case O_SAMPLER: {
        int w = -1;
        for (int i = 0; sampler_words[i]; i++)
            if (!strcmp(a, sampler_words[i])) w = i;
        if (w < 0) die_usage("invalid value for --", name);
        o->samplers = w == 3 ? 7u : 1u << w;
        break;
    }
    case O_STEPS: o->steps = flag_u64(name, a, 1, UINT64_MAX); break;
    case O_JSON: o->json = 1; break;
    case O_SYNTH: o->synth = flag_u64(name, a, 1, UINT32_MAX - 2); break;
    case O_MEDIAN: o->len_median = flag_double(name, a, 1, 1e9); break;
    case O_SIGMA: o->len_sigma = flag_double(name, a, 0, 10); break;
    case O_LMIN: o->len_min = flag_u64(name, a, 1, 1u << 28); break;
    case O_LMAX: o->len_max = flag_u64(name, a, 1, 1u << 28); break;
    case O_SBLOCK: o->synth_block = flag_u64(name, a, 1, UINT32_MAX); break;
    case O_DATA:
    case O_WEIGHT: {
        char why[200];
        if ((c == O_DATA ? mix_cli_data : mix_cli_weight)(&o->mix, a, why, sizeof why))
            die_usage("", why);
        break;
    }
    default: die_usage("unknown option", NULL);
    }
}

static void parse_args(opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    plan_cli_init(&o->cli);
    o->cli.params.world = 0;
    o->samplers = 7;
    o->preset = LF_PLAN_PRESET_TEXT;
    o->len_median = 600;
    o->len_sigma = 1.0;
    o->len_min = 32;
    o->len_max = 16384;
    o->synth_block = 64;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'h' || c == O_HELP) {
            fputs(usage_head, stdout);
            fputs(plan_cli_help, stdout);
            exit(0);
        }
        if (c == O_VERSION) {
            cli_print_version("lf-plan");
            exit(0);
        }
        if (c == '?') die_usage("bad option", NULL);
        parse_one(o, c, optarg);
    }
    if (optind < argc && o->mix.ndata) die_usage("give DIR or --data, not both: ", argv[optind]);
    if (optind < argc) mix_cli_data(&o->mix, argv[optind++], NULL, 0);
    if (optind < argc) die_usage("unexpected argument: ", argv[optind]);
    if (!o->mix.ndata == !o->synth) die_usage("give a dataset DIR (or --data) or --synth N", NULL);
    char why[200];
    if (o->mix.ndata && mix_cli_check(&o->mix, &o->cli.params.mix, why, sizeof why))
        die_usage("", why);
    if (o->cli.params.world == 0) die_usage("--world N is required", NULL);
    if (o->len_min > o->len_max) die_usage("--len-min is above --len-max", NULL);
}

/* ---- input ---------------------------------------------------------------- */

/* Sample i's length as `lf-shard synth tokens --seed S` draws it (S: the
 * plan's --seed), so --synth N plans the lengths of that dataset. */
static lf_plan_sample *synth_samples(const opts *o)
{
    lf_plan_sample *s = malloc(o->synth * sizeof *s);
    if (!s) {
        fprintf(stderr, "lf-plan: --synth %" PRIu64 ": cannot allocate %" PRIu64 " MiB\n",
                o->synth, o->synth * sizeof *s >> 20);
        return NULL;
    }
    for (uint64_t i = 0; i < o->synth; i++) {
        synth_rng r;
        synth_rng_seed(&r, o->cli.params.seed, i);
        uint64_t len = synth_rng_length(&r, o->len_median, o->len_sigma, o->len_min, o->len_max);
        s[i] = (lf_plan_sample){i, len, i / o->synth_block};
    }
    return s;
}

/* The dataset's samples, read where its index lies (plan_cli_input): the
 * dataset stays open while they are planned. */
static int dataset_input(opts *o, lf_dataset **ds, plan_cli_input *in, size_t *n)
{
    lf_shard_error err;
    if (mix_cli_open(&o->mix, NULL, DATASET_LENGTHS, &o->cli.params.mix, ds, &err)) {
        fprintf(stderr, "lf-plan: %s\n", err.msg);
        return -1;
    }
    int rc = plan_cli_input_open(in, *ds);
    if (rc) {
        fprintf(stderr, "lf-plan: %" PRIu64 " samples: %s\n", lf_dataset_samples(*ds),
                lf_plan_strerror(rc));
        return -1;
    }
    o->preset = plan_cli_preset_of(lf_dataset_schema(*ds));
    o->cli.params.view = in->view;
    *n = in->n;
    return 0;
}

/* ---- output --------------------------------------------------------------- */

/* The dropped tokens' share of all tokens (0 with no tokens). */
static double dropped_share(const plan_score *s)
{
    return s->all_tokens ? (double)s->dropped_tokens / (double)s->all_tokens : 0;
}

static void print_pcts_json(const char *key, const plan_pcts *p)
{
    printf("\"%s\": {\"p50\": %.6f, \"p99\": %.6f, \"max\": %.6f}", key, p->p50, p->p99, p->max);
}

/* A mixture's tokens per source against its weight: "sources": [{"weight",
 * "tokens", "share"}, ...] in --data order; nothing without a mixture. */
static void print_sources_json(const lf_plan_mix *mix, const uint64_t *tokens)
{
    uint64_t total = 0;
    for (uint32_t s = 0; s < mix->sources; s++) total += tokens[s];
    for (uint32_t s = 0; s < mix->sources; s++)
        printf("%s{\"weight\": %.6f, \"tokens\": %" PRIu64 ", \"share\": %.6f}%s",
               s ? ", " : ", \"sources\": [", mix->weight[s] / (double)LF_PLAN_WEIGHT_ONE,
               tokens[s], total ? (double)tokens[s] / (double)total : 0.0,
               s + 1 == mix->sources ? "]" : "");
}

/* The text's figures, every one, as JSON. */
static void print_json(const opts *o, const plan_score *sc, int n, size_t nsamples)
{
    const lf_plan_params *p = &o->cli.params;
    printf("{\"samples\": %zu, \"world\": %u, \"budget\": %" PRIu64 ", \"layout\": \"%s\"",
           nsamples, p->world, p->step_budget, p->layout == LF_PLAN_PACK ? "pack" : "pad");
    if (p->layout == LF_PLAN_PACK) printf(", \"seq_len\": %u", p->seq_len);
    printf(", \"samplers\": {");
    for (int i = 0; i < n; i++) {
        const plan_score *s = &sc[i];
        printf("%s\"%s\": {\"steps\": %" PRIu64 ", \"tail_steps\": %" PRIu64
               ", \"samples\": %" PRIu64 ", \"samples_per_step\": %.4f", i ? ", " : "",
               s->name, s->steps, s->tail_steps, s->samples, s->samples_per_step);
        if (strcmp(s->name, "balanced")) printf(", \"batch_per_rank\": %u", s->batch_per_rank);
        else if (s->later_cap)
            printf(", \"%s\": %" PRIu64,
                   o->preset == LF_PLAN_PRESET_IMAGES ? "rank_samples_cap" : "rank_padded_cap",
                   s->later_cap);
        else printf(", \"rank_padded_cap\": null");
        printf(", \"rejected_outliers\": %" PRIu64 ", \"rejected_cap\": %" PRIu64
               ", \"outliers\": %" PRIu64 ", ", s->rejected, s->rejected_cap, s->outliers);
        print_pcts_json("max_over_mean", &s->max_over_mean);
        printf(", ");
        print_pcts_json("max_over_mean_full", &s->max_over_mean_full);
        printf(", \"measured_steps\": %" PRIu64 ", \"epoch_max_over_mean\": %.6f, "
               "\"empty_rank_steps\": %" PRIu64 ", ", s->measured, s->epoch_max_over_mean,
               s->empty_rank_steps);
        print_pcts_json("split_bound", &s->split_bound);
        printf(", \"epoch_split_bound\": %.6f, \"split_bound_exact_steps\": %" PRIu64 ", ",
               s->epoch_split_bound, s->split_bound_exact_steps);
        /* nothing measured is null, not 0 */
        if (s->steps_ok) {
            print_pcts_json("step_tokens_to_median", &s->step_tokens);
            printf(", ");
            print_pcts_json("step_cost_to_median", &s->step_cost);
            printf(", \"step_tokens_min_to_median\": %.6f, \"step_cost_min_to_median\": %.6f",
                   s->step_tokens_min, s->step_cost_min);
        } else {
            printf("\"step_tokens_to_median\": null, \"step_cost_to_median\": null, "
                   "\"step_tokens_min_to_median\": null, \"step_cost_min_to_median\": null");
        }
        if (s->epoch_done)
            printf(", \"dropped_tokens\": %" PRIu64 ", \"dropped_tokens_share\": %.6f",
                   s->dropped_tokens, dropped_share(s));
        else printf(", \"dropped_tokens\": null, \"dropped_tokens_share\": null");
        printf(", \"padding_fraction\": %.6f, \"padding_floor\": %.6f, \"micro_per_rank\": %.4f, "
               "\"budget_fill\": %.6f, ", s->padding_fraction, s->padding_floor, s->micro_per_rank,
               s->budget_fill);
        if (s->level)
            printf("\"world_level\": {\"pieces_a_rank\": %u, \"piece_len\": %" PRIu64
                   ", \"of_budget\": %.6f}, ", s->level_per_rank, s->level_piece_len,
                   s->level_of_budget);
        else printf("\"world_level\": null, ");
        print_pcts_json("delay_steps", &s->delay);
        printf(", ");
        print_pcts_json("outlier_delay_steps", &s->outlier_delay);
        printf(", \"plan_ms_per_step\": %.6f, \"plan_cpu_ms_per_step\": %.6f, \"epoch_s\": %.6f"
               ", \"create_s\": %.6f, \"epoch_cpu_s\": %.6f", s->plan_ms_per_step,
               s->plan_cpu_ms_per_step, s->epoch_s, s->create_s, s->epoch_cpu_s);
        print_sources_json(&p->mix, s->source_tokens);
        printf("}");
    }
    printf("}}\n");
}

/* max/mean over every step and over the epoch, the steps' size against the
 * median step, and what was lost; "not measured" where there was nothing to
 * measure rather than a 0 that reads as perfect. */
static void print_balance(const plan_score *s)
{
    if (!s->measured) {
        printf("  max/mean cost     not measured (no step with a cost)\n");
    } else {
        printf("  max/mean cost     p50 %.5f  p99 %.5f  max %.5f  (every step); "
               "epoch sum-max/sum-mean %.5f\n", s->max_over_mean.p50, s->max_over_mean.p99,
               s->max_over_mean.max, s->epoch_max_over_mean);
    }
    if (s->steps > s->tail_steps && s->measured)
        printf("                    p50 %.5f  p99 %.5f  max %.5f  (before the tail step)\n",
               s->max_over_mean_full.p50, s->max_over_mean_full.p99, s->max_over_mean_full.max);
    else
        printf("                    not measured before the tail: the run is its tail step\n");
    /* after max/mean's two lines, which read as one */
    if (s->measured)
        printf("  split's floor     p50 %.5f  p99 %.5f  max %.5f  (no split of the same "
               "steps does better); epoch %.5f; the optimum in %" PRIu64 " steps\n",
               s->split_bound.p50, s->split_bound.p99, s->split_bound.max,
               s->epoch_split_bound, s->split_bound_exact_steps);
    if (s->steps_ok)
        printf("  step / median     tokens min %.3f  p99 %.3f  max %.3f;  cost min %.3f  "
               "p99 %.3f  max %.3f\n", s->step_tokens_min, s->step_tokens.p99,
               s->step_tokens.max, s->step_cost_min, s->step_cost.p99, s->step_cost.max);
    else
        printf("  step / median     not measured (the median step is empty)\n");
    printf("  empty rank-steps  %" PRIu64 "\n", s->empty_rank_steps);
    if (s->epoch_done && s->dropped_tokens)
        printf("  tokens dropped    %" PRIu64 " (%.4f %% of the tokens; %" PRIu64 " samples or "
               "pieces left out: %" PRIu64 " outliers, %" PRIu64 " over a cap or row)\n",
               s->dropped_tokens, 100 * dropped_share(s), s->rejected + s->rejected_cap,
               s->rejected, s->rejected_cap);
    else if (s->epoch_done)
        printf("  tokens dropped    0 (every token placed once; 0 samples left out)\n");
    else
        printf("  tokens dropped    not measured (--steps ended the run inside the epoch)\n");
}

static void print_text(const opts *o, const plan_score *sc, int n, size_t nsamples)
{
    const lf_plan_params *p = &o->cli.params;
    printf("lf-plan: %zu samples, world %u, budget %" PRIu64 " per step, layout %s",
           nsamples, p->world, p->step_budget, p->layout == LF_PLAN_PACK ? "pack" : "pad");
    if (p->layout == LF_PLAN_PACK) printf(" (seq_len %u)", p->seq_len);
    printf("\n");
    for (int i = 0; i < n; i++) {
        const plan_score *s = &sc[i];
        printf("\n%s: %" PRIu64 " steps (%" PRIu64 " tail), %" PRIu64 " samples placed, "
               "%.1f per step", s->name, s->steps, s->tail_steps, s->samples,
               s->samples_per_step);
        if (strcmp(s->name, "balanced")) printf(" (%u per rank)", s->batch_per_rank);
        if (s->later_cap)
            printf("\n  capped            a rank's step at %" PRIu64 " %s (as lf-server: the "
                   "most in epoch 0's first %" PRIu64 " samples x %.3f)",
                   s->later_cap, o->preset == LF_PLAN_PRESET_IMAGES   ? "images"
                                 : o->preset == LF_PLAN_PRESET_FRAMES ? "padded frames"
                                                                      : "padded tokens",
                   (uint64_t)PLAN_CLI_PREFIX_SAMPLES, (double)plan_cli_cap_permille() / 1000);
        printf("\n  rejected          %" PRIu64 " outliers, %" PRIu64 " over a cap or row\n",
               s->rejected, s->rejected_cap);
        print_balance(s);
        printf("  padding fraction  %.4f%%, %.2f micro-batches per rank-step",
               s->padding_fraction * 100, s->micro_per_rank);
        if (p->layout == LF_PLAN_PACK)
            printf(" (floor for any split of these steps: %.4f%%)", s->padding_floor * 100);
        printf("\n");
        printf("  budget fill       %.4f%%\n", s->budget_fill * 100);
        if (s->level)
            printf("  select world      every step %u whole pieces of %" PRIu64 " tokens a rank "
                   "or its cost in shorter samples: %.4f x the budget\n", s->level_per_rank,
                   s->level_piece_len, s->level_of_budget);
        printf("  delay (steps)     p50 %.0f  p99 %.0f  max %.0f\n", s->delay.p50, s->delay.p99,
               s->delay.max);
        if (s->outliers)
            printf("  outliers          %" PRIu64 " released in groups, waited p50 %.0f "
                   "p99 %.0f max %.0f steps\n", s->outliers, s->outlier_delay.p50,
                   s->outlier_delay.p99, s->outlier_delay.max);
        printf("  planner           %.4f ms/step (CPU %.4f), epoch %.3f s (create %.3f s, "
               "CPU %.3f s)\n", s->plan_ms_per_step, s->plan_cpu_ms_per_step, s->epoch_s,
               s->create_s, s->epoch_cpu_s);
        mix_cli_report(stdout, "  tokens by source  ", &o->mix, &p->mix, s->source_tokens);
    }
}

int main(int argc, char **argv)
{
    opts o;
    parse_args(&o, argc, argv);
    raise_open_file_limit(); /* one descriptor per shard file */
    size_t n = (size_t)o.synth;
    /* --synth: an array of its own; a dataset: its index, read in place */
    lf_plan_sample *samples = NULL;
    lf_dataset *ds = NULL;
    plan_cli_input in = {0};
    if (o.synth ? !(samples = synth_samples(&o)) : dataset_input(&o, &ds, &in, &n) != 0) {
        plan_cli_input_free(&in);
        lf_dataset_close(ds);
        return 1;
    }
    int rc = plan_cli_finish(&o.cli, o.preset, samples, n, (o.samplers & 6) != 0);
    plan_cli_input_release(&in);
    if (!rc && o.cli.seq_len_why[0]) fprintf(stderr, "lf-plan: %s\n", o.cli.seq_len_why);
    if (!rc && o.cli.overflow[0]) fprintf(stderr, "lf-plan: %s\n", o.cli.overflow);
    if (!rc && o.cli.note[0]) fprintf(stderr, "lf-plan: note: %s\n", o.cli.note);
    /* The baselines are planned without balanced's caps, over the pieces
     * the caps cut (a user of DistributedSampler trains on the same
     * chunks): otherwise they would plan whole documents that balanced
     * plans in pieces, no like-for-like comparison. */
    uint64_t split_at = lf_plan_piece_len(&o.cli.params);
    /* cut once for every plan below (balanced's and the baselines', at the
     * same length) where the samples are read in place */
    lf_plan_cut *cut = NULL;
    if (!rc && !samples) rc = lf_plan_cut_make(&o.cli.params, n, &cut);
    o.cli.params.view.cut = cut;
    /* A balanced plan is capped from epoch 0 on as lf-server caps it
     * (plan_cli_later_cap: its rule 2), so lf-plan plans what it serves:
     * tokens and frames in padded tokens, images in samples a rank. */
    uint64_t later_cap = 0;
    int cap_samples = o.preset == LF_PLAN_PRESET_IMAGES;
    if (!rc && (o.samplers & 1))
        rc = plan_cli_later_cap(&o.cli.params, samples, n, cap_samples, &later_cap);
    plan_score sc[3];
    int nsc = 0;
    static const char *const names[] = {"balanced", "naive", "sorted"};
    for (uint32_t s = 0; !rc && s < 3; s++) {
        if (!((o.samplers >> s) & 1)) continue;
        lf_plan_params p = o.cli.params;
        p.sampler = s;
        int baseline = s != LF_PLAN_BALANCED;
        if (baseline) { /* the caps are balanced's, its pieces theirs */
            p.rank_max_tokens = p.rank_max_padded = p.micro_max_padded = 0;
            p.split_at = split_at;
        }
        rc = plan_score_run(&p, samples, n, o.steps, baseline ? 0 : later_cap, cap_samples,
                            &sc[nsc]);
        sc[nsc].name = names[s];
        if (!rc) nsc++;
    }
    free(samples);
    lf_plan_cut_free(cut);
    plan_cli_input_free(&in);   /* the plans, which read it, are freed */
    lf_dataset_close(ds);
    if (rc) {
        fprintf(stderr, "lf-plan: %s\n", o.cli.why[0] ? o.cli.why : lf_plan_strerror(rc));
        return 1;
    }
    if (o.json) print_json(&o, sc, nsc, n);
    else print_text(&o, sc, nsc, n);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "lf-plan: cannot write to stdout\n");
        return 1;
    }
    return 0;
}
