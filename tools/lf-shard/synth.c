/*
 * synth.c — `lf-shard synth tokens|images|frames`: deterministic synthetic
 * datasets.
 *
 * Samples are made in batches on --threads threads (cli_parallel; each
 * sample has its own random stream, so the split does not change the bytes),
 * then handed to the writer in id order; the writer's own threads compress
 * while the next batch is generated. A batch holds as many samples as fit
 * SYNTH_BATCH_BYTES at the largest size the options allow (at least one a
 * thread), so memory does not grow with --width or --len-max.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "index_only.h"
#include "synth.h"

static const char synth_help[] =
    "Usage: lf-shard synth tokens|images|frames --out DIR --samples N [--seed S] [OPTIONS]\n"
    "\n"
    "Writes a synthetic dataset. The same options and seed give a byte-identical\n"
    "dataset (any thread count); another seed gives other data. A sample is one\n"
    "record of at most 1 GiB (the format's limit): options whose longest sample\n"
    "(--len-max, times --width for frames) would pass it are refused.\n"
    "\n"
    "  --samples N        number of samples (required)\n"
    "  --seed S           random seed (default 0)\n"
    CLI_WRITER_HELP("64K for tokens and frames, 0 for images")
    "\n"
    "tokens: one field 'tokens' (u16 ids, u32 when --vocab > 65536), Zipf-like ids\n"
    "with repeated phrases; lengths are lognormal:\n"
    "  --len-median N     median tokens per sample (default 600)\n"
    "  --len-sigma X      sigma of log length (default 1.0)\n"
    "  --len-min N        shortest sample (default 32)\n"
    "  --len-max N        longest sample (default 16384)\n"
    "  --vocab N          token ids are 0..N-1 (default 32000)\n"
    "  --index-only       write no samples: DIR gets index-only.lfi, a few lines that\n"
    "                     describe the lengths (u16 tokens), which lf-plan and lf-server\n"
    "                     open as a dataset of --samples samples (up to 2^32-1) in\n"
    "                     blocks of --block-samples (default 64); reading a batch's\n"
    "                     bytes from it fails. For planning and start-up at any size\n"
    "\n"
    "images: fields 'image' (JPEG: gradients, shapes, noise; quality 75..95) and 'label':\n"
    "  --min-side N       smallest side in pixels (default 64)\n"
    "  --max-side N       largest side in pixels (default 1024)\n"
    "  --classes N        labels are 0..N-1 (default 1000)\n"
    "\n"
    "frames: fields 'frames' (rows of --width values) and 'label'; frame counts are\n"
    "lognormal (--len-median default 300, --len-sigma 0.5, --len-min 16, --len-max 4096):\n"
    "  --width N          values per frame (default 80)\n"
    "  --dtype T          f32, f16 or i16 (default f32)\n"
    "  --classes N        labels are 0..N-1 (default 10)\n"
    "\n"
    "Example:\n"
    "  lf-shard synth tokens --out /data/toks --samples 1000000 --seed 7 --len-median 900\n"
    "  lf-shard synth images --out /data/imgs --samples 5000 --max-side 512\n";

enum {
    OPT_SAMPLES = 1,
    OPT_SEED,
    OPT_LEN_MEDIAN,
    OPT_LEN_SIGMA,
    OPT_LEN_MIN,
    OPT_LEN_MAX,
    OPT_VOCAB,
    OPT_MIN_SIDE,
    OPT_MAX_SIDE,
    OPT_CLASSES,
    OPT_WIDTH,
    OPT_DTYPE,
    OPT_INDEX_ONLY,
    OPT_BLOCK_SAMPLES,
};

static const struct option synth_options[] = {
    CLI_WRITER_OPTIONS,
    {"samples", required_argument, NULL, OPT_SAMPLES},
    {"seed", required_argument, NULL, OPT_SEED},
    {"len-median", required_argument, NULL, OPT_LEN_MEDIAN},
    {"len-sigma", required_argument, NULL, OPT_LEN_SIGMA},
    {"len-min", required_argument, NULL, OPT_LEN_MIN},
    {"len-max", required_argument, NULL, OPT_LEN_MAX},
    {"vocab", required_argument, NULL, OPT_VOCAB},
    {"min-side", required_argument, NULL, OPT_MIN_SIDE},
    {"max-side", required_argument, NULL, OPT_MAX_SIDE},
    {"classes", required_argument, NULL, OPT_CLASSES},
    {"width", required_argument, NULL, OPT_WIDTH},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"index-only", no_argument, NULL, OPT_INDEX_ONLY},
    {"block-samples", required_argument, NULL, OPT_BLOCK_SAMPLES},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void set_defaults(const synth_kind *k, synth_params *p, cli_writer_args *wa)
{
    memset(p, 0, sizeof *p);
    memset(wa, 0, sizeof *wa);
    wa->opts.block_bytes = k->default_block;
    int frames = k == &synth_frames;
    p->len_median = frames ? 300 : 600;
    p->len_sigma = frames ? 0.5 : 1.0;
    p->len_min = frames ? 16 : 32;
    p->len_max = frames ? 4096 : 16384;
    p->vocab = 32000;
    p->classes = frames ? 10 : 1000;
    p->min_side = 64;
    p->max_side = 1024;
    p->width = 80;
    p->frame_type = LF_FIELD_FRAMES_F32;
}

/* A kind's own options are refused for the other kinds, so that
 * `synth images --width 80` is an error rather than silently ignored. */
static void check_kind(const cli_cmd *c, const synth_kind *k, int id)
{
    int tokens = k == &synth_tokens, images = k == &synth_images, frames = k == &synth_frames;
    int ok = 1;
    switch (id) {
    case OPT_LEN_MEDIAN: case OPT_LEN_SIGMA: case OPT_LEN_MIN: case OPT_LEN_MAX:
        ok = tokens || frames; break;
    case OPT_VOCAB: case OPT_INDEX_ONLY: case OPT_BLOCK_SAMPLES: ok = tokens; break;
    case OPT_MIN_SIDE: case OPT_MAX_SIDE: ok = images; break;
    case OPT_CLASSES: ok = images || frames; break;
    case OPT_WIDTH: case OPT_DTYPE: ok = frames; break;
    default: break;
    }
    if (!ok)
        cli_usage_error(c, "option '--%s' does not apply to %s",
                        cli_option_name(synth_options, id), k->name);
}

static int frame_type_arg(const cli_cmd *c, const char *s)
{
    if (!strcmp(s, "f32")) return LF_FIELD_FRAMES_F32;
    if (!strcmp(s, "f16")) return LF_FIELD_FRAMES_F16;
    if (!strcmp(s, "i16")) return LF_FIELD_FRAMES_I16;
    cli_usage_error(c, "--dtype: invalid value '%s' (expected f32, f16 or i16)", s);
}

/* A sample the writer would refuse is refused here, before a batch of
 * samples that large is generated (one was allocated per batch slot first:
 * 4 GiB for four 1 GiB frame samples before the first was rejected). */
static void check_max_record(const cli_cmd *c, const synth_kind *k, const synth_params *p)
{
    char opts[96];
    if (!k->max_record)
        return;
    uint64_t most = k->max_record(p, opts, sizeof opts);
    if (most > LF_MAX_RECORD_BYTES)
        cli_usage_error(c, "%s make a sample of up to %" PRIu64 " bytes, above the record "
                        "limit of %u bytes", opts, most, LF_MAX_RECORD_BYTES);
}

static void parse_args(const cli_cmd *c, const synth_kind *k, int argc, char **argv,
                       synth_params *p, cli_writer_args *wa, index_only *io)
{
    int have_samples = 0, id;
    set_defaults(k, p, wa);
    while ((id = cli_getopt(c, argc, argv, synth_options)) != -1) {
        const char *a = optarg;
        if (cli_writer_option(c, id, a, wa))
            continue;
        check_kind(c, k, id);
        switch (id) {
        case OPT_SAMPLES:
            p->samples = cli_parse_u64(c, "--samples", a, 1, UINT32_MAX);
            have_samples = 1;
            break;
        case OPT_SEED: p->seed = cli_parse_u64(c, "--seed", a, 0, UINT64_MAX); break;
        case OPT_LEN_MEDIAN: p->len_median = cli_parse_double(c, "--len-median", a, 1, 1e9); break;
        case OPT_LEN_SIGMA: p->len_sigma = cli_parse_double(c, "--len-sigma", a, 0, 10); break;
        case OPT_LEN_MIN: p->len_min = cli_parse_u64(c, "--len-min", a, 1, 1u << 28); break;
        case OPT_LEN_MAX: p->len_max = cli_parse_u64(c, "--len-max", a, 1, 1u << 28); break;
        case OPT_VOCAB: p->vocab = (uint32_t)cli_parse_u64(c, "--vocab", a, 1, UINT32_MAX); break;
        case OPT_MIN_SIDE: p->min_side = (uint32_t)cli_parse_u64(c, "--min-side", a, 8, 8192); break;
        case OPT_MAX_SIDE: p->max_side = (uint32_t)cli_parse_u64(c, "--max-side", a, 8, 8192); break;
        case OPT_CLASSES: p->classes = (uint32_t)cli_parse_u64(c, "--classes", a, 1, INT32_MAX); break;
        case OPT_WIDTH: p->width = (uint32_t)cli_parse_u64(c, "--width", a, 1, 1u << 16); break;
        case OPT_DTYPE: p->frame_type = (uint32_t)frame_type_arg(c, a); break;
        case OPT_INDEX_ONLY: io->samples = 1; break;
        case OPT_BLOCK_SAMPLES:
            io->block_samples = (uint32_t)cli_parse_u64(c, "--block-samples", a, 1, UINT32_MAX);
            break;
        default: break;
        }
    }
    cli_positionals(c, argc, argv, 0, "");
    cli_writer_check(c, wa);
    if (!have_samples)
        cli_usage_error(c, "--samples N is required");
    if (p->len_min > p->len_max)
        cli_usage_error(c, "--len-min %" PRIu64 " is above --len-max %" PRIu64,
                        p->len_min, p->len_max);
    if (p->min_side > p->max_side)
        cli_usage_error(c, "--min-side %u is above --max-side %u", p->min_side, p->max_side);
    if (io->block_samples && !io->samples)
        cli_usage_error(c, "--block-samples applies to --index-only only");
    check_max_record(c, k, p);
}

/* --index-only: the description alone (common/index_only.h). */
static void index_only_run(const synth_params *p, const cli_writer_args *wa, index_only *io)
{
    char why[512];
    *io = (index_only){.samples = p->samples, .seed = p->seed, .len_median = p->len_median,
                       .len_sigma = p->len_sigma, .len_min = p->len_min,
                       .len_max = p->len_max,
                       .block_samples = io->block_samples ? io->block_samples : 64};
    if (index_only_write(wa->out, io, why, sizeof why))
        cli_die("%s", why);
    printf("lf-shard: synth %s: %" PRIu64 " samples described in %s/%s, index only (no "
           "sample bytes: lf-plan and lf-server's start-up take it, a read is refused)\n",
           wa->out, io->samples, wa->out, INDEX_ONLY_NAME);
}

/* ---- batch generation --------------------------------------------------------- */

typedef struct gen_batch {
    const synth_kind *kind;
    const synth_params *p;
    void **state;                /* the kind's per-thread state, by tid */
    synth_slot *slots;
    uint64_t base;               /* id of slots[0] */
} gen_batch;

static void gen_one(void *arg, size_t j, unsigned tid)
{
    gen_batch *g = arg;
    synth_slot *s = &g->slots[j];
    s->err[0] = '\0';
    if (g->kind->gen(g->p, g->state[tid], g->base + j, s) < 0 && !s->err[0])
        snprintf(s->err, sizeof s->err, "generator failed");
}

/* What a batch may take at worst: its samples are all generated before
 * the writer takes the first, and wide frames made 256 samples of up to
 * 1 GiB each. Fewer samples a batch then, but at least one a thread. */
#define SYNTH_BATCH_BYTES (64u << 20)

static uint32_t batch_samples(const synth_kind *k, const synth_params *p, unsigned threads)
{
    if (!k->max_record)
        return k->batch;
    uint64_t fit = SYNTH_BATCH_BYTES / k->max_record(p, NULL, 0);
    if (fit < threads)
        fit = threads;
    return fit < k->batch ? (uint32_t)fit : k->batch;
}

static void synth_run(const synth_kind *k, const synth_params *p, const cli_writer_args *wa)
{
    unsigned n = cli_thread_count(wa);
    uint32_t batch = batch_samples(k, p, n);
    void **state = calloc(n, sizeof *state);
    synth_slot *slots = calloc(batch, sizeof *slots);
    if (!state || !slots)
        cli_die("out of memory");
    for (unsigned t = 0; t < n; t++)
        if (k->thread_new && !(state[t] = k->thread_new(p)))
            cli_die("out of memory");

    lf_schema schema;
    k->schema(p, &schema);
    cli_out out;
    cli_out_open(&out, wa, &schema, "synth", p->samples);
    gen_batch g = {.kind = k, .p = p, .state = state, .slots = slots};
    for (g.base = 0; g.base < p->samples; g.base += batch) {
        uint64_t left = p->samples - g.base;
        uint32_t count = (uint32_t)(left < batch ? left : batch);
        cli_parallel(count, n, gen_one, &g);
        for (uint32_t j = 0; j < count; j++) {
            char where[48];
            snprintf(where, sizeof where, "sample %" PRIu64, g.base + j);
            if (slots[j].err[0]) {
                cli_warn("%s: %s", where, slots[j].err);
                cli_out_fail(&out, CLI_EXIT_FAIL);
            }
            cli_out_add(&out, slots[j].in, slots[j].bytes, g.base + j + 1, where);
        }
    }
    cli_out_finish(&out, "synth");

    for (unsigned t = 0; t < n; t++)
        if (k->thread_free)
            k->thread_free(state[t]);
    for (uint32_t j = 0; j < batch; j++)
        free(slots[j].data);
    free(slots);
    free(state);
}

int cmd_synth(int argc, char **argv)
{
    static const synth_kind *const kinds[] = {&synth_tokens, &synth_images, &synth_frames};
    cli_cmd top = {"synth", synth_help};
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            fputs(synth_help, stdout);
            return 0;
        }
        cli_usage_error(&top, "missing the kind: tokens, images or frames");
    }
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(argv[1], kinds[i]->name))
            continue;
        char name[32];
        snprintf(name, sizeof name, "synth %s", kinds[i]->name);
        cli_cmd c = {name, synth_help};
        synth_params p;
        cli_writer_args wa;
        index_only io = {0};
        parse_args(&c, kinds[i], argc - 1, argv + 1, &p, &wa, &io);
        if (io.samples) index_only_run(&p, &wa, &io);
        else synth_run(kinds[i], &p, &wa);
        return 0;
    }
    cli_usage_error(&top, "unknown kind '%s' (expected tokens, images or frames)", argv[1]);
}
