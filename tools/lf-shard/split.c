/*
 * split.c — `lf-shard split DIR --fraction F --out-train T --out-eval E`:
 * a held-out set made from one dataset, deterministically.
 *
 * Which samples go to the held-out side is a function of (seed, sample id)
 * alone: each sample gets a key from a bijective 64-bit mix of the two, and
 * the round(F x N) samples with the smallest keys are held out. So the count
 * is exact (as a user of train_test_split expects), the choice does not
 * depend on shards, blocks or threads, and the same command on any node
 * makes the same two datasets. Keys are distinct because the mix is a
 * bijection of distinct inputs: no tie to break. Finding the threshold keeps
 * 8 bytes a sample for the time of a selection; the copy itself streams
 * block by block and keeps both outputs in the source's order.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "synth_rng.h"

static const char split_help[] =
    "Usage: lf-shard split DIR --fraction F --out-train DIR --out-eval DIR [OPTIONS]\n"
    "\n"
    "Writes two datasets from DIR: a held-out (evaluation) set of round(F x N) of\n"
    "its N samples, chosen by --seed alone, and the training set of the others.\n"
    "Both keep DIR's fields and its order of samples; every block's checksum is\n"
    "checked on the way. The same command gives the same split on every machine,\n"
    "whatever DIR's shard or block sizes. On any error (or Ctrl-C) neither output\n"
    "is left behind.\n"
    "\n"
    "  --fraction F       share of the samples held out, 0 < F < 1 (required)\n"
    "  --out-train DIR    the training set (required): new or empty\n"
    "  --out-eval DIR     the held-out set (required): new or empty\n"
    "  --seed N           which samples are held out (default 0)\n"
    CLI_WRITER_TUNING_HELP("the mean of DIR's blocks")
    "\n"
    "Example:\n"
    "  lf-shard split /data/toks --fraction 0.01 --out-train /data/train --out-eval /data/eval\n"
    "  lf-server --data /data/train --eval-data /data/eval ...\n";

enum { OPT_FRACTION = 1, OPT_OUT_TRAIN, OPT_OUT_EVAL, OPT_SEED };

static const struct option split_opts[] = {
    {"fraction", required_argument, NULL, OPT_FRACTION},
    {"out-train", required_argument, NULL, OPT_OUT_TRAIN},
    {"out-eval", required_argument, NULL, OPT_OUT_EVAL},
    {"seed", required_argument, NULL, OPT_SEED},
    {"help", no_argument, NULL, 'h'},
    CLI_WRITER_TUNING_OPTIONS,
    {0, 0, 0, 0},
};

typedef struct split_args {
    const char *src;
    double fraction;
    uint64_t seed;
    cli_writer_args train, eval;  /* the same tuning, each its own --out */
    int block_given;              /* --block-size was given */
} split_args;

static void parse_args(const cli_cmd *c, int argc, char **argv, split_args *a)
{
    memset(a, 0, sizeof *a);
    a->fraction = -1;
    int id;
    while ((id = cli_getopt(c, argc, argv, split_opts)) != -1) {
        const char *arg = optarg;
        if (id == OPT_FRACTION)
            a->fraction = cli_parse_double(c, "--fraction", arg, 0, 1);
        else if (id == OPT_OUT_TRAIN)
            a->train.out = arg;
        else if (id == OPT_OUT_EVAL)
            a->eval.out = arg;
        else if (id == OPT_SEED)
            a->seed = cli_parse_u64(c, "--seed", arg, 0, UINT64_MAX);
        else if (cli_writer_option(c, id, arg, &a->train))
            a->block_given |= id == CLI_OPT_BLOCK_SIZE;
    }
    a->src = cli_positionals(c, argc, argv, 1, "the dataset directory DIR")[0];
    if (a->fraction <= 0 || a->fraction >= 1)
        cli_usage_error(c, "--fraction F is required, 0 < F < 1 (the share held out)");
    if (!a->train.out || !a->eval.out)
        cli_usage_error(c, "--out-train DIR and --out-eval DIR are both required");
    if (!strcmp(a->train.out, a->eval.out))
        cli_usage_error(c, "--out-train and --out-eval name the same directory %s",
                        a->train.out);
    a->eval.opts = a->train.opts;
}

/* Sample id's key: a bijective mix of (seed, id), so keys never tie. */
static uint64_t sample_key(uint64_t seed, uint64_t id)
{
    synth_rng r;
    synth_rng_seed(&r, seed, id);
    return synth_rng_next(&r);
}

/* The k-th smallest (1-based) of v[0..n), reordering v (quickselect with a
 * middle pivot: the keys are random, so no adversarial order exists). */
static uint64_t kth_smallest(uint64_t *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        uint64_t pivot = v[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) {
                uint64_t t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                if (j == 0) break;
                j--;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            break;               /* v[want] equals the pivot: in place */
    }
    return v[want];
}

/* The largest key held out: samples with a key at or below it go to eval. */
static uint64_t eval_threshold(uint64_t seed, uint64_t n, uint64_t k)
{
    uint64_t *keys = malloc(n * sizeof *keys);
    if (!keys)
        cli_die("out of memory for %" PRIu64 " sample keys (%.1f GB)", n, (double)n * 8e-9);
    for (uint64_t i = 0; i < n; i++)
        keys[i] = sample_key(seed, i);
    uint64_t t = kth_smallest(keys, n, k);
    free(keys);
    return t;
}

/* The source's mean raw block, so both outputs read like it by default. */
static uint32_t mean_block_bytes(const lf_dataset *ds)
{
    uint64_t raw = 0, nb = lf_dataset_blocks(ds);
    for (uint64_t b = 0; b < nb; b++)
        raw += lf_dataset_block(ds, b)->raw_size;
    return nb ? (uint32_t)(raw / nb) : 0;
}

typedef struct split_io {
    const lf_dataset *ds;
    lf_block_decoder *dec;
    uint8_t *stored, *raw;
    uint64_t seed, threshold;
    cli_out train, eval;
} split_io;

/* Copies block b's samples, each to its side. */
static void split_block(split_io *s, uint64_t b)
{
    const lf_block_info *bi = lf_dataset_block(s->ds, b);
    const lf_schema *schema = lf_dataset_schema(s->ds);
    lf_shard_error err;
    long n = lf_dataset_read_block(s->ds, b, s->stored, bi->stored_size, &err);
    if (n >= 0)
        n = lf_block_decode(s->dec, s->ds, b, s->stored, (size_t)n, s->raw, bi->raw_size, &err);
    if (n < 0) {
        cli_warn("block %" PRIu64 " of shard %u: %s", b, bi->shard, err.msg);
        cli_out_fail(&s->train, CLI_EXIT_FAIL);
    }
    for (uint64_t i = bi->first_sample; i < bi->first_sample + bi->nsamples; i++) {
        lf_field_view v[LF_MAX_FIELDS];
        lf_field_input in[LF_MAX_FIELDS];
        if (lf_sample_fields(s->ds, i, s->raw, (size_t)n, v, &err) < 0) {
            cli_warn("sample %" PRIu64 ": %s", i, err.msg);
            cli_out_fail(&s->train, CLI_EXIT_FAIL);
        }
        const lf_sample_info *si = lf_dataset_sample(s->ds, i);
        uint64_t bytes = 0;
        for (uint32_t f = 0; f < schema->nfields; f++) {
            in[f] = (lf_field_input){v[f].data, v[f].size, 0, 0};
            if (schema->fields[f].type == LF_FIELD_JPEG) {
                in[f].width = si->width;
                in[f].height = si->height;
            }
            bytes += v[f].size;
        }
        char where[64];
        snprintf(where, sizeof where, "sample %" PRIu64, i);
        int held_out = sample_key(s->seed, i) <= s->threshold;
        cli_out_add(held_out ? &s->eval : &s->train, in, bytes, i + 1, where);
    }
}

int cmd_split(int argc, char **argv)
{
    const cli_cmd c = {"split", split_help};
    split_args a;
    parse_args(&c, argc, argv, &a);
    lf_dataset *ds = cli_open_dataset(a.src);
    uint64_t n = lf_dataset_samples(ds);
    uint64_t k = (uint64_t)llround(a.fraction * (double)n);
    if (k == 0 || k == n)
        cli_die("%s: --fraction %g of its %" PRIu64 " samples holds out %" PRIu64
                ": one side would be empty; choose F between %g and %g",
                a.src, a.fraction, n, k, n ? 0.5 / (double)n : 0.0,
                n ? 1.0 - 0.5 / (double)n : 0.0);
    if (!a.block_given)
        a.train.opts.block_bytes = a.eval.opts.block_bytes = mean_block_bytes(ds);
    split_io s = {.ds = ds, .seed = a.seed, .threshold = eval_threshold(a.seed, n, k)};
    s.stored = malloc(lf_dataset_max_block_stored(ds) + 1u);
    s.raw = malloc(lf_dataset_max_block_raw(ds) + 1u);
    if (!s.stored || !s.raw || lf_block_decoder_create(&s.dec) < 0)
        cli_die("out of memory");
    cli_out_open(&s.train, &a.train, lf_dataset_schema(ds), "split (train)", n);
    cli_out_open(&s.eval, &a.eval, lf_dataset_schema(ds), "split (eval)", n);
    s.train.peer = &s.eval;
    s.eval.peer = &s.train;
    for (uint64_t b = 0; b < lf_dataset_blocks(ds); b++)
        split_block(&s, b);
    /* Finished one at a time: a finish that fails (a full disk at the
     * manifest) takes its own output and the unfinished one with it. */
    cli_out_finish(&s.eval, "split (eval)");
    s.train.peer = NULL;
    cli_out_finish(&s.train, "split (train)");
    fprintf(stderr, "lf-shard: split %s: %" PRIu64 " samples held out in %s, %" PRIu64
            " for training in %s (--fraction %g, --seed %" PRIu64 ")\n",
            a.src, k, a.eval.out, n - k, a.train.out, a.fraction, a.seed);
    lf_block_decoder_free(s.dec);
    free(s.raw);
    free(s.stored);
    lf_dataset_close(ds);
    return 0;
}
