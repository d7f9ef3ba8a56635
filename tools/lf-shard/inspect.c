/*
 * inspect.c — `lf-shard inspect` (what a dataset holds and how it is stored)
 * and `lf-shard stats` (the distribution of the cost input the balancer
 * plans with). Both read only the manifest and the indexes.
 */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* ---- inspect ------------------------------------------------------------------- */

static const char inspect_help[] =
    "Usage: lf-shard inspect DIR [--blocks]\n"
    "\n"
    "Prints a dataset's schema, its shards (samples, blocks, bytes), the totals and\n"
    "the compression ratio (record bytes / stored block bytes). Reads only the\n"
    "manifest and the shard indexes; 'lf-shard verify' checks the data.\n"
    "\n"
    "  --blocks           also list every block: shard, file offset, stored and raw\n"
    "                     bytes, first sample and sample count\n"
    "\n"
    "Example:\n"
    "  lf-shard inspect /data/toks\n";

typedef struct shard_sum {
    uint64_t samples, blocks, raw, stored;
} shard_sum;

static void print_schema(const lf_schema *s)
{
    printf("schema: %u field%s, cost input from '%s'\n", s->nfields, s->nfields == 1 ? "" : "s",
           s->fields[s->cost_field].name);
    for (uint32_t i = 0; i < s->nfields; i++) {
        const lf_field_def *f = &s->fields[i];
        const char *type = lf_field_type_name(f->type);
        if (f->row_width)
            printf("  %-20s %s x%u\n", f->name, type ? type : "?", f->row_width);
        else
            printf("  %-20s %s\n", f->name, type ? type : "?");
    }
}

static void print_blocks(const lf_dataset *ds)
{
    printf("block  shard  file_offset  stored  raw  first_sample  samples\n");
    for (uint64_t b = 0; b < lf_dataset_blocks(ds); b++) {
        const lf_block_info *bi = lf_dataset_block(ds, b);
        printf("%" PRIu64 "  %u  %" PRIu64 "  %u  %u  %" PRIu64 "  %u\n", b, bi->shard,
               bi->file_offset, bi->stored_size, bi->raw_size, bi->first_sample, bi->nsamples);
    }
}

int cmd_inspect(int argc, char **argv)
{
    const cli_cmd c = {"inspect", inspect_help};
    int blocks;
    const char *dir = cli_dataset_arg(&c, argc, argv, "blocks", &blocks);
    lf_dataset *ds = cli_open_dataset(dir);

    uint32_t nshards = lf_dataset_shards(ds);
    shard_sum *sums = calloc(nshards ? nshards : 1, sizeof *sums), total = {0};
    if (!sums)
        cli_die("out of memory");
    for (uint64_t b = 0; b < lf_dataset_blocks(ds); b++) {
        const lf_block_info *bi = lf_dataset_block(ds, b);
        shard_sum *s = &sums[bi->shard < nshards ? bi->shard : 0];
        s->samples += bi->nsamples;
        s->blocks++;
        s->raw += bi->raw_size;
        s->stored += bi->stored_size;
    }

    printf("dataset: %s\n", dir);
    print_schema(lf_dataset_schema(ds));
    printf("shard  samples  blocks  raw_bytes  stored_bytes  file_bytes  file\n");
    uint64_t file_total = 0;
    for (uint32_t i = 0; i < nshards; i++) {
        const char *path = lf_dataset_shard_path(ds, i);
        struct stat st;
        uint64_t fbytes = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
        const char *base = strrchr(path, '/');
        printf("%u  %" PRIu64 "  %" PRIu64 "  %" PRIu64 "  %" PRIu64 "  %" PRIu64 "  %s\n", i,
               sums[i].samples, sums[i].blocks, sums[i].raw, sums[i].stored, fbytes,
               base ? base + 1 : path);
        total.raw += sums[i].raw;
        total.stored += sums[i].stored;
        file_total += fbytes;
    }
    printf("samples: %" PRIu64 "\n", lf_dataset_samples(ds));
    printf("shards: %u\n", nshards);
    printf("blocks: %" PRIu64 " (largest raw %u bytes, largest stored %u bytes)\n",
           lf_dataset_blocks(ds), lf_dataset_max_block_raw(ds), lf_dataset_max_block_stored(ds));
    printf("record bytes: %" PRIu64 " (%.1f MB)\n", total.raw, (double)total.raw / 1e6);
    printf("stored block bytes: %" PRIu64 " (%.1f MB)\n", total.stored,
           (double)total.stored / 1e6);
    printf("shard file bytes: %" PRIu64 " (%.1f MB, with headers, indexes, padding)\n",
           file_total, (double)file_total / 1e6);
    printf("compression ratio: %.3f\n",
           total.stored ? (double)total.raw / (double)total.stored : 0.0);
    if (blocks)
        print_blocks(ds);
    free(sums);
    lf_dataset_close(ds);
    return 0;
}

/* ---- stats ------------------------------------------------------------------------ */

static const char stats_help[] =
    "Usage: lf-shard stats DIR [--json]\n"
    "\n"
    "Prints the distribution of the cost input (tokens, frames, or pixels per\n"
    "sample, from the index): count, total, mean, percentiles p0 p10 p50 p90 p99\n"
    "and max (nearest rank), and a histogram with logarithmic bins.\n"
    "\n"
    "  --json             print one JSON object instead\n"
    "\n"
    "Example:\n"
    "  lf-shard stats /data/toks --json | jq .p99\n";

#define HIST_BINS 16
#define HIST_WIDTH 50

typedef struct cost_stats {
    uint64_t n, total;
    uint64_t pct[6];             /* p0 p10 p50 p90 p99 max */
    uint64_t lo[HIST_BINS + 1];  /* bin k holds [lo[k], lo[k+1]) */
    uint64_t count[HIST_BINS];
    int bins;
} cost_stats;

static const int pct_of[6] = {0, 10, 50, 90, 99, 100};
static const char *const pct_name[6] = {"p0", "p10", "p50", "p90", "p99", "max"};

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Log-spaced edges from the smallest to past the largest value; fewer bins
 * when the range holds fewer distinct integers. The edges are integers
 * clamped to the top (doubles lose the last digits past 2^53, and a forged
 * index can hold any 64-bit cost), and the last bin takes the rest. */
static void histogram(const uint64_t *v, uint64_t n, cost_stats *st)
{
    uint64_t top = v[n - 1] == UINT64_MAX ? UINT64_MAX : v[n - 1] + 1;
    double lo = v[0] ? (double)v[0] : 1.0, hi = (double)top;
    int bins = 0;
    st->lo[0] = v[0];
    for (int k = 1; k <= HIST_BINS; k++) {
        double d = ceil(lo * pow(hi / lo, (double)k / HIST_BINS));
        uint64_t e = k == HIST_BINS || d >= hi ? top : (uint64_t)d;
        if (e > st->lo[bins])
            st->lo[++bins] = e;
    }
    st->bins = bins;
    memset(st->count, 0, sizeof st->count);
    for (uint64_t i = 0, k = 0; i < n; i++) {
        while (k + 1 < (uint64_t)bins && v[i] >= st->lo[k + 1])
            k++;
        st->count[k]++;
    }
}

static void cost_collect(const lf_dataset *ds, cost_stats *st)
{
    memset(st, 0, sizeof *st);
    st->n = lf_dataset_samples(ds);
    if (st->n == 0)
        return;
    uint64_t *v = malloc(st->n * sizeof *v);
    if (!v)
        cli_die("out of memory");
    for (uint64_t i = 0; i < st->n; i++) {
        v[i] = lf_dataset_sample_length(ds, i);
        st->total = v[i] > UINT64_MAX - st->total ? UINT64_MAX : st->total + v[i];
    }
    qsort(v, st->n, sizeof *v, by_value);
    for (int k = 0; k < 6; k++) {
        uint64_t rank = (uint64_t)ceil((double)pct_of[k] / 100.0 * (double)st->n);
        st->pct[k] = v[rank ? rank - 1 : 0];
    }
    histogram(v, st->n, st);
    free(v);
}

/* The largest value bin k holds: the last bin ends at the maximum. */
static uint64_t bin_last(const cost_stats *st, int k)
{
    return k == st->bins - 1 ? st->pct[5] : st->lo[k + 1] - 1;
}

static const char *cost_unit(const lf_schema *s)
{
    switch (s->fields[s->cost_field].type) {
    case LF_FIELD_TOKENS_U16: case LF_FIELD_TOKENS_U32: return "tokens";
    case LF_FIELD_JPEG: return "pixels";
    case LF_FIELD_FRAMES_F16: case LF_FIELD_FRAMES_F32: case LF_FIELD_FRAMES_I16: return "frames";
    default: return "bytes";
    }
}

static void stats_text(const char *dir, const lf_schema *s, const cost_stats *st)
{
    printf("dataset: %s\n", dir);
    printf("cost input: %s of field '%s'\n", cost_unit(s), s->fields[s->cost_field].name);
    printf("samples: %" PRIu64 "\ntotal: %" PRIu64 "\nmean: %.1f\n", st->n, st->total,
           st->n ? (double)st->total / (double)st->n : 0.0);
    if (!st->n)
        return;
    for (int k = 0; k < 6; k++)
        printf("%s: %" PRIu64 "\n", pct_name[k], st->pct[k]);
    uint64_t most = 0;
    for (int k = 0; k < st->bins; k++)
        most = st->count[k] > most ? st->count[k] : most;
    printf("histogram (%s, log bins):\n", cost_unit(s));
    for (int k = 0; k < st->bins; k++) {
        int bar = (int)((st->count[k] * HIST_WIDTH + most - 1) / most);
        printf("  %10" PRIu64 " .. %-10" PRIu64 " %9" PRIu64 " %.*s\n", st->lo[k],
               bin_last(st, k), st->count[k], bar,
               "##################################################");
    }
}

static void stats_json(const char *dir, const lf_schema *s, const cost_stats *st)
{
    json_t *o = json_object(), *hist = json_array();
    if (!o || !hist)
        cli_die("out of memory");
    json_object_set_new(o, "dataset", json_string(dir));
    json_object_set_new(o, "cost_field", json_string(s->fields[s->cost_field].name));
    json_object_set_new(o, "unit", json_string(cost_unit(s)));
    json_object_set_new(o, "samples", json_integer((json_int_t)st->n));
    json_object_set_new(o, "total", json_integer((json_int_t)st->total));
    json_object_set_new(o, "mean", json_real(st->n ? (double)st->total / (double)st->n : 0));
    for (int k = 0; st->n && k < 6; k++)
        json_object_set_new(o, pct_name[k], json_integer((json_int_t)st->pct[k]));
    for (int k = 0; k < st->bins; k++)
        json_array_append_new(hist, json_pack("{s:I,s:I,s:I}", "lo", (json_int_t)st->lo[k],
                                              "hi", (json_int_t)bin_last(st, k), "count",
                                              (json_int_t)st->count[k]));
    json_object_set_new(o, "histogram", hist);
    if (json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10)) < 0)
        cli_die("cannot write JSON");
    putchar('\n');
    json_decref(o);
}

int cmd_stats(int argc, char **argv)
{
    const cli_cmd c = {"stats", stats_help};
    int json;
    const char *dir = cli_dataset_arg(&c, argc, argv, "json", &json);
    lf_dataset *ds = cli_open_dataset(dir);
    cost_stats st;
    cost_collect(ds, &st);
    if (json)
        stats_json(dir, lf_dataset_schema(ds), &st);
    else
        stats_text(dir, lf_dataset_schema(ds), &st);
    lf_dataset_close(ds);
    return 0;
}
