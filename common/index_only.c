/*
 * index_only.c — index-only synthetic datasets (index_only.h).
 *
 * The description is a handful of numbers; the lengths are drawn from the
 * streams `lf-shard synth tokens` and `lf-plan --synth` draw them from, so
 * the three agree for a seed. They are drawn once, when the dataset is
 * written, into index.lfx (4 bytes a sample), which opening maps: a
 * process planning 10^9 samples then holds no per-sample table of its own.
 * A directory without index.lfx (written before it) draws them again.
 */
#include "index_only.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "parse_num.h"
#include "plan_cli.h"
#include "synth_rng.h"

#define HEADER "levelfeed-index-only 1"

static uint64_t synth_length(void *arg, uint64_t i);

static const char *const keys[] = {"samples", "seed", "len-median", "len-sigma", "len-min",
                                   "len-max", "block-samples", NULL};

/* Block b's samples and raw bytes: the size table and u16 tokens of each
 * (the record lf_dataset_open_index_only lays out); a block past the
 * format's limit gets UINT32_MAX, which opening refuses naming it. */
static void synth_block(void *arg, uint64_t b, uint32_t *nsamples, uint32_t *raw_size)
{
    const index_only *d = arg;
    uint64_t first = b * d->block_samples, end = first + d->block_samples, raw = 0;
    if (end > d->samples) end = d->samples;
    for (uint64_t i = first; i < end; i++) raw += 4 + 2 * synth_length(arg, i);
    *nsamples = (uint32_t)(end - first);
    *raw_size = raw > LF_MAX_RECORD_BYTES ? UINT32_MAX : (uint32_t)raw;
}

/* Writes dir/index.lfx: the lengths drawn once; and their summary
 * (plan_cli_summary_write), which needs index-only.lfi written first. */
static int write_lengths(const char *dir, const index_only *d, char *why, size_t why_size)
{
    index_only copy = *d;   /* the callbacks' argument is not const */
    lf_index_spec spec = {.samples = d->samples,
                          .blocks = (d->samples + d->block_samples - 1) / d->block_samples,
                          .block = synth_block, .length = synth_length, .arg = &copy};
    lf_shard_error err;
    if (lf_index_write(dir, &spec, &err) == 0 && plan_cli_summary_write(dir, &err) == 0)
        return 0;
    snprintf(why, why_size, "%s", err.msg);
    return -1;
}

int index_only_write(const char *dir, const index_only *d, char *why, size_t why_size)
{
    char path[PATH_MAX], manifest[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, INDEX_ONLY_NAME);
    snprintf(manifest, sizeof manifest, "%s/%s", dir, LF_MANIFEST_NAME);
    struct stat st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(why, why_size, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if (stat(manifest, &st) == 0) {
        snprintf(why, why_size, "%s: a dataset is already there: give an empty directory",
                 dir);
        return -1;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(why, why_size, "%s: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, HEADER "\n# lf-shard synth tokens --index-only: lengths without bytes\n"
            "samples %" PRIu64 "\nseed %" PRIu64 "\nlen-median %.17g\nlen-sigma %.17g\n"
            "len-min %" PRIu64 "\nlen-max %" PRIu64 "\nblock-samples %u\n", d->samples,
            d->seed, d->len_median, d->len_sigma, d->len_min, d->len_max, d->block_samples);
    if (fclose(f) != 0) {
        snprintf(why, why_size, "%s: %s", path, strerror(errno));
        return -1;
    }
    return write_lengths(dir, d, why, why_size);
}

/* Takes one `KEY VALUE` line into d; seen: a bit per key. Returns 0 or -1. */
static int take_line(char *line, index_only *d, unsigned *seen)
{
    char *sp = strchr(line, ' ');
    if (!sp) return -1;
    *sp = '\0';
    const char *v = sp + 1;
    uint32_t k;
    if (parse_word(line, keys, &k) || (*seen >> k) & 1) return -1;
    *seen |= 1u << k;
    uint64_t u = 0;
    switch (k) {
    case 0: return parse_u64(v, 1, UINT32_MAX, &d->samples);
    case 1: return parse_u64(v, 0, UINT64_MAX, &d->seed);
    case 2: return parse_double(v, 1, 1e9, &d->len_median);
    case 3: return parse_double(v, 0, 10, &d->len_sigma);
    case 4: return parse_u64(v, 1, 1u << 28, &d->len_min);
    case 5: return parse_u64(v, 1, 1u << 28, &d->len_max);
    default:
        if (parse_u64(v, 1, UINT32_MAX, &u)) return -1;
        d->block_samples = (uint32_t)u;
        return 0;
    }
}

/* Reads path into *d; err names the line at fault. */
static int read_description(const char *path, index_only *d, lf_shard_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        err->status = LF_SHARD_E_IO;
        snprintf(err->msg, sizeof err->msg, "%.400s: %s", path, strerror(errno));
        return LF_SHARD_E_IO;
    }
    char line[256];
    unsigned seen = 0, lineno = 0;
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\n")] = '\0';
        if (lineno == 1) rc = strcmp(line, HEADER) ? -1 : 0;
        else if (line[0] && line[0] != '#') rc = take_line(line, d, &seen);
    }
    fclose(f);
    if (rc == 0 && (seen != (1u << 7) - 1 || d->len_min > d->len_max)) {
        rc = -1;
        lineno = 0;
    }
    if (rc == 0) return 0;
    err->status = LF_SHARD_E_FORMAT;
    if (lineno)
        snprintf(err->msg, sizeof err->msg, "%.300s: line %u: expected '%s' on the first line, "
                 "then KEY VALUE, each of %s ... once", path, lineno, HEADER, keys[0]);
    else
        snprintf(err->msg, sizeof err->msg, "%.300s: each of samples, seed, len-median, "
                 "len-sigma, len-min, len-max, block-samples once, len-min <= len-max", path);
    return LF_SHARD_E_FORMAT;
}

static uint64_t synth_length(void *arg, uint64_t i)
{
    const index_only *d = arg;
    synth_rng r;
    synth_rng_seed(&r, d->seed, i);
    return synth_rng_length(&r, d->len_median, d->len_sigma, d->len_min, d->len_max);
}

/* Opens the lengths in lfx, which must be the ones d describes (desc:
 * the description's path, the dataset's name in messages). */
static int open_mapped(const char *lfx, const char *desc, const lf_schema *s,
                       const index_only *d, lf_dataset **out, lf_shard_error *err)
{
    lf_dataset *ds;
    int rc = lf_dataset_open_index_file(lfx, desc, s, &ds, err);
    if (rc != 0) return rc;
    uint64_t blocks = (d->samples + d->block_samples - 1) / d->block_samples;
    if (lf_dataset_samples(ds) == d->samples && lf_dataset_blocks(ds) == blocks) {
        *out = ds;
        return 0;
    }
    lf_dataset_close(ds);
    err->status = LF_SHARD_E_FORMAT;
    snprintf(err->msg, sizeof err->msg, "%.300s: %" PRIu64 " samples in blocks of %u, but %s "
             "holds other counts: write the directory again with lf-shard synth tokens "
             "--index-only", desc, d->samples, d->block_samples, LF_INDEX_NAME);
    return LF_SHARD_E_FORMAT;
}

int dataset_open(const char *dir, unsigned flags, lf_dataset **out, lf_shard_error *err)
{
    char path[PATH_MAX], lfx[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, INDEX_ONLY_NAME);
    if (stat(path, &st) != 0) {
        if (flags & DATASET_LENGTHS) return lf_dataset_open_lengths(dir, out, err);
        if (flags & DATASET_MAPPED) return lf_dataset_open_mapped(&dir, 1, out, err);
        return lf_dataset_open(dir, out, err);
    }
    index_only d = {0};
    int rc = read_description(path, &d, err);
    if (rc != 0) return rc;
    lf_schema s = {.nfields = 1, .cost_field = 0};
    snprintf(s.fields[0].name, LF_FIELD_NAME_MAX, "tokens");
    s.fields[0].type = LF_FIELD_TOKENS_U16;
    snprintf(lfx, sizeof lfx, "%s/%s", dir, LF_INDEX_NAME);
    if (stat(lfx, &st) == 0) return open_mapped(lfx, path, &s, &d, out, err);
    return lf_dataset_open_index_only(path, &s, d.samples, d.block_samples, synth_length, &d,
                                      out, err);
}
