/*
 * lf-plan — plan a dataset's epoch without a server and score the plan.
 *
 * Reads only the dataset's index (length and block of every sample), builds
 * the balanced plan and the two baselines with the same cost model, and
 * prints per sampler the figures balancer/README.md defines. --synth N plans
 * N in-memory samples instead, drawn like `lf-shard synth tokens` lengths
 * (lognormal; blocks of --synth-block consecutive samples), for benchmarks
 * that should not need a million-sample dataset on disk.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lf_shard.h"
#include "score.h"

static const char usage[] =
    "Usage: lf-plan DIR --world N [OPTIONS]\n"
    "       lf-plan --synth N --world N [OPTIONS]\n"
    "Plans an epoch from a dataset's index (no server) and prints, per sampler:\n"
    "per-step max/mean rank cost (p50/p99/max), padding fraction, budget fill,\n"
    "deferral delay in steps (p50/p99/max) and planner time per step.\n"
    "\n"
    "  --world N            ranks (required)\n"
    "  --sampler S          balanced, naive, sorted or all (default all)\n"
    "  --steps N            plan at most N steps per sampler (default: one epoch)\n"
    "  --json               print one JSON object instead of text\n"
    "\n"
    "Cost model c(L) = a*L + b*L^2 + c0, plus d per micro-batch:\n"
    "  --preset P           text, frames or images (default: from the dataset's\n"
    "                       cost field; text for --synth); b/a = 1/(12*hidden)\n"
    "  --hidden H           model width for text/frames (default 4096)\n"
    "  --cost a,b,c0,d      user coefficients instead of a preset\n"
    "\n"
    "Plan parameters (balanced):\n"
    "  --budget C           global cost per step (default: --samples-per-rank x\n"
    "                       world x mean sample cost)\n"
    "  --samples-per-rank S sets the default budget (default 16)\n"
    "  --max-tokens N       per-rank cap on tokens per step\n"
    "  --max-padded N       per-rank cap on padded tokens per step\n"
    "  --lookahead N        selection window in samples (default 4096)\n"
    "  --max-defer N        steps a sample may be passed over (default 4)\n"
    "  --outlier P          delay or reject samples costlier than --outlier-cost\n"
    "                       (default delay)\n"
    "  --outlier-cost C     default budget / world\n"
    "  --outlier-group G    outliers released together (default world)\n"
    "  --locality-blocks N  blocks drawn from at once (default 64)\n"
    "  --seed S, --epoch E  (default 0, 0)\n"
    "  --layout L           pad or pack (default pad)\n"
    "  --seq-len N          pack row length (default: the longest sample)\n"
    "  --micro-max-padded N pad: cap on a micro-batch's samples x its longest\n"
    "                       (default: the longest sample)\n"
    "  --micro-overhead T   pad: a micro-batch's fixed cost in tokens, weighed\n"
    "                       against padding when cutting (default: d in tokens,\n"
    "                       or 256 when d is 0)\n"
    "\n"
    "Baselines: naive (full shuffle, equal counts per rank, as DistributedSampler)\n"
    "and sorted (length-grouped mega-batches, as HF group_by_length) take\n"
    "--batch-per-rank samples per rank per step. By default that is balanced's\n"
    "mean samples per step / world, rounded, so all three move the same number\n"
    "of samples per step (balanced is planned first to measure it).\n"
    "\n"
    "In-memory input (instead of DIR):\n"
    "  --synth N            N samples, lognormal lengths\n"
    "  --len-median M, --len-sigma X, --len-min A, --len-max B\n"
    "                       (default 600, 1.0, 32, 16384; as lf-shard synth tokens)\n"
    "  --synth-block K      samples per block (default 64)\n";

typedef struct opts {
    const char *dir;
    uint64_t synth, synth_block, len_min, len_max;
    double len_median, len_sigma;
    uint32_t samplers;           /* bit per lf_plan_sampler */
    uint64_t steps;
    int json;
    int preset;                  /* -1: from the dataset */
    uint32_t hidden;
    int user_cost;
    double coef[4];
    uint32_t samples_per_rank;
    lf_plan_params prm;
} opts;

static void die_usage(const char *what, const char *arg)
{
    fprintf(stderr, "lf-plan: %s%s\nTry 'lf-plan --help'.\n", what, arg ? arg : "");
    exit(2);
}

static uint64_t parse_u64(const char *name, const char *s, uint64_t lo, uint64_t hi)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    if (!*s || *end || *s == '-' || v < lo || v > hi) die_usage("invalid value for --", name);
    return v;
}

static double parse_double(const char *name, const char *s, double lo, double hi)
{
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi)) die_usage("invalid value for --", name);
    return v;
}

static int parse_word(const char *name, const char *s, const char *const *words)
{
    for (int i = 0; words[i]; i++)
        if (!strcmp(s, words[i])) return i;
    die_usage("invalid value for --", name);
    return -1;
}

static void parse_cost(opts *o, const char *s)
{
    char *end;
    const char *at = s;
    for (int i = 0; i < 4; i++) {
        o->coef[i] = strtod(at, &end);
        if (end == at || (i < 3 ? *end != ',' : *end != '\0'))
            die_usage("--cost wants a,b,c0,d, got ", s);
        at = end + 1;
    }
    o->user_cost = 1;
}

enum {
    O_WORLD = 256, O_SAMPLER, O_STEPS, O_JSON, O_PRESET, O_HIDDEN, O_COST, O_BUDGET,
    O_SPR, O_MAXTOK, O_MAXPAD, O_LOOKAHEAD, O_MAXDEFER, O_OUTLIER, O_OCOST, O_OGROUP,
    O_LOCALITY, O_SEED, O_EPOCH, O_LAYOUT, O_SEQLEN, O_BPR, O_SYNTH, O_MEDIAN,
    O_SIGMA, O_LMIN, O_LMAX, O_SBLOCK, O_MICROPAD, O_MICROOVH, O_HELP,
};

static const struct option longopts[] = {
    {"world", 1, 0, O_WORLD}, {"sampler", 1, 0, O_SAMPLER}, {"steps", 1, 0, O_STEPS},
    {"json", 0, 0, O_JSON}, {"preset", 1, 0, O_PRESET}, {"hidden", 1, 0, O_HIDDEN},
    {"cost", 1, 0, O_COST}, {"budget", 1, 0, O_BUDGET}, {"samples-per-rank", 1, 0, O_SPR},
    {"max-tokens", 1, 0, O_MAXTOK}, {"max-padded", 1, 0, O_MAXPAD},
    {"lookahead", 1, 0, O_LOOKAHEAD}, {"max-defer", 1, 0, O_MAXDEFER},
    {"outlier", 1, 0, O_OUTLIER}, {"outlier-cost", 1, 0, O_OCOST},
    {"outlier-group", 1, 0, O_OGROUP}, {"locality-blocks", 1, 0, O_LOCALITY},
    {"seed", 1, 0, O_SEED}, {"epoch", 1, 0, O_EPOCH}, {"layout", 1, 0, O_LAYOUT},
    {"seq-len", 1, 0, O_SEQLEN}, {"batch-per-rank", 1, 0, O_BPR}, {"synth", 1, 0, O_SYNTH},
    {"len-median", 1, 0, O_MEDIAN}, {"len-sigma", 1, 0, O_SIGMA}, {"len-min", 1, 0, O_LMIN},
    {"len-max", 1, 0, O_LMAX}, {"synth-block", 1, 0, O_SBLOCK},
    {"micro-max-padded", 1, 0, O_MICROPAD}, {"micro-overhead", 1, 0, O_MICROOVH},
    {"help", 0, 0, O_HELP},
    {0, 0, 0, 0},
};

static const char *const sampler_words[] = {"balanced", "naive", "sorted", "all", NULL};
static const char *const preset_words[] = {"text", "frames", "images", NULL};
static const char *const outlier_words[] = {"delay", "reject", NULL};
static const char *const layout_words[] = {"pad", "pack", NULL};

static void parse_one(opts *o, int c, const char *a)
{
    lf_plan_params *p = &o->prm;
    const char *name = longopts[c - O_WORLD].name;
    switch (c) {
    case O_WORLD: p->world = (uint32_t)parse_u64(name, a, 1, 65536); break;
    case O_SAMPLER: {
        int w = parse_word(name, a, sampler_words);
        o->samplers = w == 3 ? 7u : 1u << w;
        break;
    }
    case O_STEPS: o->steps = parse_u64(name, a, 1, UINT64_MAX); break;
    case O_JSON: o->json = 1; break;
    case O_PRESET: o->preset = parse_word(name, a, preset_words); break;
    case O_HIDDEN: o->hidden = (uint32_t)parse_u64(name, a, 1, 1u << 24); break;
    case O_COST: parse_cost(o, a); break;
    case O_BUDGET: p->step_budget = parse_u64(name, a, 1, LF_PLAN_COST_MAX); break;
    case O_SPR: o->samples_per_rank = (uint32_t)parse_u64(name, a, 1, 1u << 20); break;
    case O_MAXTOK: p->rank_max_tokens = parse_u64(name, a, 1, UINT64_MAX); break;
    case O_MAXPAD: p->rank_max_padded = parse_u64(name, a, 1, UINT64_MAX); break;
    case O_LOOKAHEAD: p->lookahead = (uint32_t)parse_u64(name, a, 1, 1u << 24); break;
    case O_MAXDEFER: p->max_defer = (uint32_t)parse_u64(name, a, 1, 1u << 20); break;
    case O_OUTLIER: p->outlier_policy = (uint32_t)parse_word(name, a, outlier_words); break;
    case O_OCOST: p->outlier_cost = parse_u64(name, a, 1, LF_PLAN_COST_MAX); break;
    case O_OGROUP: p->outlier_group = (uint32_t)parse_u64(name, a, 1, 1u << 20); break;
    case O_LOCALITY: p->locality_blocks = (uint32_t)parse_u64(name, a, 1, UINT32_MAX); break;
    case O_SEED: p->seed = parse_u64(name, a, 0, UINT64_MAX); break;
    case O_EPOCH: p->epoch = (uint32_t)parse_u64(name, a, 0, UINT32_MAX); break;
    case O_LAYOUT: p->layout = (uint32_t)parse_word(name, a, layout_words); break;
    case O_SEQLEN: p->seq_len = (uint32_t)parse_u64(name, a, 1, UINT32_MAX); break;
    case O_BPR: p->batch_per_rank = (uint32_t)parse_u64(name, a, 1, 1u << 20); break;
    case O_SYNTH: o->synth = parse_u64(name, a, 1, UINT32_MAX - 2); break;
    case O_MEDIAN: o->len_median = parse_double(name, a, 1, 1e9); break;
    case O_SIGMA: o->len_sigma = parse_double(name, a, 0, 10); break;
    case O_LMIN: o->len_min = parse_u64(name, a, 1, 1u << 28); break;
    case O_LMAX: o->len_max = parse_u64(name, a, 1, 1u << 28); break;
    case O_SBLOCK: o->synth_block = parse_u64(name, a, 1, UINT32_MAX); break;
    case O_MICROPAD: p->micro_max_padded = parse_u64(name, a, 1, UINT64_C(1) << 36); break;
    case O_MICROOVH: p->micro_overhead = parse_u64(name, a, 1, UINT64_C(1) << 36); break;
    default: die_usage("unknown option", NULL);
    }
}

static void parse_args(opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    lf_plan_params_default(&o->prm);
    o->prm.world = 0;
    o->samplers = 7;
    o->preset = -1;
    o->samples_per_rank = 16;
    o->len_median = 600;
    o->len_sigma = 1.0;
    o->len_min = 32;
    o->len_max = 16384;
    o->synth_block = 64;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'h' || c == O_HELP) {
            fputs(usage, stdout);
            exit(0);
        }
        if (c == '?') die_usage("bad option", NULL);
        parse_one(o, c, optarg);
    }
    if (optind < argc) o->dir = argv[optind++];
    if (optind < argc) die_usage("unexpected argument: ", argv[optind]);
    if (!o->dir == !o->synth) die_usage("give a dataset DIR or --synth N", NULL);
    if (o->prm.world == 0) die_usage("--world N is required", NULL);
    if (o->len_min > o->len_max) die_usage("--len-min is above --len-max", NULL);
}

/* ---- input ---------------------------------------------------------------- */

static uint64_t synth_next(uint64_t *state)
{
    uint64_t x = (*state += UINT64_C(0x9e3779b97f4a7c15));
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* Lognormal lengths by Box-Muller, rounded and clamped to [min, max]. */
static lf_plan_sample *synth_samples(const opts *o)
{
    lf_plan_sample *s = malloc(o->synth * sizeof *s);
    if (!s) return NULL;
    uint64_t st = o->prm.seed ^ UINT64_C(0x5eed);
    for (uint64_t i = 0; i < o->synth; i++) {
        double u1 = ((double)(synth_next(&st) >> 11) + 0.5) * 0x1p-53;
        double u2 = (double)(synth_next(&st) >> 11) * 0x1p-53;
        double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        double len = nearbyint(o->len_median * exp(o->len_sigma * z));
        if (len < (double)o->len_min) len = (double)o->len_min;
        if (len > (double)o->len_max) len = (double)o->len_max;
        s[i] = (lf_plan_sample){i, (uint64_t)len, i / o->synth_block};
    }
    return s;
}

static int preset_of(const lf_schema *schema)
{
    uint32_t t = schema->fields[schema->cost_field].type;
    if (t == LF_FIELD_JPEG) return LF_PLAN_PRESET_IMAGES;
    if (t == LF_FIELD_FRAMES_F16 || t == LF_FIELD_FRAMES_F32 || t == LF_FIELD_FRAMES_I16)
        return LF_PLAN_PRESET_FRAMES;
    return LF_PLAN_PRESET_TEXT;
}

/* Reads every sample's length and block from the dataset's index. */
static lf_plan_sample *dataset_samples(opts *o, size_t *n)
{
    lf_dataset *ds = NULL;
    lf_shard_error err;
    if (lf_dataset_open(o->dir, &ds, &err)) {
        fprintf(stderr, "lf-plan: %s\n", err.msg);
        return NULL;
    }
    uint64_t count = lf_dataset_samples(ds);
    lf_plan_sample *s = count < UINT32_MAX - 2 ? malloc((count + 1) * sizeof *s) : NULL;
    if (!s) fprintf(stderr, "lf-plan: %" PRIu64 " samples: out of memory\n", count);
    for (uint64_t i = 0; s && i < count; i++) {
        const lf_sample_info *info = lf_dataset_sample(ds, i);
        s[i] = (lf_plan_sample){i, info->length, lf_dataset_sample_block(ds, i)};
    }
    if (o->preset < 0) o->preset = preset_of(lf_dataset_schema(ds));
    lf_dataset_close(ds);
    *n = (size_t)count;
    return s;
}

/* Fills in what depends on the data: cost model, budget, seq_len. */
static int finish_params(opts *o, const lf_plan_sample *s, size_t n)
{
    lf_plan_params *p = &o->prm;
    int rc = o->user_cost
                 ? lf_plan_cost_set(&p->cost, o->coef[0], o->coef[1], o->coef[2], o->coef[3])
                 : lf_plan_cost_preset(&p->cost, o->preset < 0 ? 0 : o->preset, o->hidden);
    if (rc) return rc;
    uint64_t total = 0, longest = 0;
    for (size_t i = 0; i < n; i++) {
        total += lf_plan_cost(&p->cost, s[i].length);
        if (s[i].length > longest) longest = s[i].length;
    }
    if (!p->step_budget && n)
        p->step_budget = (uint64_t)((double)total / (double)n * o->samples_per_rank * p->world);
    if (p->layout == LF_PLAN_PACK && !p->seq_len)
        p->seq_len = longest > UINT32_MAX ? UINT32_MAX : (uint32_t)longest;
    return 0;
}

/* ---- output --------------------------------------------------------------- */

static void print_pcts_json(const char *key, const plan_pcts *p)
{
    printf("\"%s\": {\"p50\": %.6f, \"p99\": %.6f, \"max\": %.6f}", key, p->p50, p->p99, p->max);
}

static void print_json(const plan_score *sc, int n)
{
    printf("{\"samplers\": {");
    for (int i = 0; i < n; i++) {
        const plan_score *s = &sc[i];
        printf("%s\"%s\": {", i ? ", " : "", s->name);
        print_pcts_json("max_over_mean", &s->max_over_mean);
        printf(", \"padding_fraction\": %.6f, \"padding_floor\": %.6f, \"micro_per_rank\": %.4f, "
               "\"budget_fill\": %.6f, ", s->padding_fraction, s->padding_floor, s->micro_per_rank,
               s->budget_fill);
        print_pcts_json("delay_steps", &s->delay);
        printf(", \"plan_ms_per_step\": %.6f, \"steps\": %" PRIu64 ", \"samples\": %" PRIu64 "}",
               s->plan_ms_per_step, s->steps, s->samples);
    }
    printf("}}\n");
}

static void print_text(const opts *o, const plan_score *sc, int n, size_t nsamples)
{
    const lf_plan_params *p = &o->prm;
    printf("lf-plan: %zu samples, world %u, budget %" PRIu64 " per step, layout %s",
           nsamples, p->world, p->step_budget, layout_words[p->layout]);
    if (p->layout == LF_PLAN_PACK) printf(" (seq_len %u)", p->seq_len);
    printf("\n");
    for (int i = 0; i < n; i++) {
        const plan_score *s = &sc[i];
        printf("\n%s: %" PRIu64 " steps (%" PRIu64 " tail), %" PRIu64 " samples placed, "
               "%.1f per step", s->name, s->steps, s->tail_steps, s->samples,
               s->samples_per_step);
        if (strcmp(s->name, "balanced")) printf(" (%u per rank)", s->batch_per_rank);
        printf("\n  rejected          %" PRIu64 " outliers, %" PRIu64 " over a cap or row\n",
               s->rejected, s->rejected_cap);
        printf("  max/mean cost     p50 %.5f  p99 %.5f  max %.5f\n", s->max_over_mean.p50,
               s->max_over_mean.p99, s->max_over_mean.max);
        printf("  padding fraction  %.4f%%, %.2f micro-batches per rank-step",
               s->padding_fraction * 100, s->micro_per_rank);
        if (p->layout == LF_PLAN_PACK)
            printf(" (floor for any split of these steps: %.4f%%)", s->padding_floor * 100);
        printf("\n");
        printf("  budget fill       %.4f%%\n", s->budget_fill * 100);
        printf("  delay (steps)     p50 %.0f  p99 %.0f  max %.0f\n", s->delay.p50, s->delay.p99,
               s->delay.max);
        if (s->outliers)
            printf("  outliers          %" PRIu64 " released in groups, waited p50 %.0f "
                   "p99 %.0f max %.0f steps\n", s->outliers, s->outlier_delay.p50,
                   s->outlier_delay.p99, s->outlier_delay.max);
        printf("  planner           %.4f ms/step (CPU %.4f), epoch %.3f s (create %.3f s, "
               "CPU %.3f s)\n", s->plan_ms_per_step, s->plan_cpu_ms_per_step, s->epoch_s,
               s->create_s, s->epoch_cpu_s);
    }
}

int main(int argc, char **argv)
{
    opts o;
    parse_args(&o, argc, argv);
    size_t n = (size_t)o.synth;
    lf_plan_sample *samples = o.synth ? synth_samples(&o) : dataset_samples(&o, &n);
    if (!samples) return 1;
    int rc = finish_params(&o, samples, n);
    plan_score sc[3];
    int nsc = 0;
    static const char *const names[] = {"balanced", "naive", "sorted"};
    double per_step = 0;
    for (uint32_t s = 0; !rc && s < 3; s++) {
        int wanted = (o.samplers >> s) & 1;
        int needed = s == LF_PLAN_BALANCED && !o.prm.batch_per_rank && (o.samplers & 6);
        if (!wanted && !needed) continue;
        lf_plan_params p = o.prm;
        p.sampler = s;
        if (s != LF_PLAN_BALANCED && !p.batch_per_rank) {
            long bpr = lround(per_step / p.world);
            p.batch_per_rank = bpr < 1 ? 1 : (uint32_t)bpr;
        }
        plan_score one;
        rc = plan_score_run(&p, samples, n, o.steps, &one);
        if (rc) break;
        one.name = names[s];
        if (s == LF_PLAN_BALANCED) per_step = one.samples_per_step;
        if (wanted) sc[nsc++] = one;
    }
    free(samples);
    if (rc) {
        fprintf(stderr, "lf-plan: %s\n", lf_plan_strerror(rc));
        return 1;
    }
    if (o.json) print_json(sc, nsc);
    else print_text(&o, sc, nsc, n);
    return 0;
}
