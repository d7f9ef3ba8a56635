/*
 * shard_golden.c — the committed fuzz seeds are golden files of format v1.
 *
 * tests/fuzz/corpus/shard_reader/ holds small shards and manifests written by
 * this writer (one mode byte in front, see tests/fuzz/shard_reader.c). This
 * test checks that today's reader still reads the valid ones back exactly
 * (every field equal to the generator's), so a change that breaks files
 * already on disk fails here, and that the broken ones are still detected.
 *
 * `LF_WRITE_SEEDS=DIR shard_golden` writes the seeds to DIR instead (used
 * to make the corpus; the bytes depend on the zstd version, the reading does
 * not).
 */
#define GEN_MAX_COUNT 12
#include "unit/shard_gen.h"
#include "shard_internal.h"

/* ANY: for the fuzzer only (checksums off, so zstd may return other bytes) */
enum expect { VALID, VALID_MANIFEST, DETECTED, ANY };

typedef struct seed {
    const char *name;
    uint8_t mode;                /* fuzz mode byte: bit 0 no checksums, bit 1 manifest */
    const char *dataset;         /* which generated dataset (subdirectory) */
    const char *file;            /* file inside it */
    uint32_t cost_field;         /* the dataset's schema */
    enum expect expect;
    long damage_at;              /* >= 0: flip this byte (negative from the end) */
    long truncate_to;            /* > 0: keep this many bytes */
} seed;

static const seed seeds[] = {
    {"valid-onerec", 0, "a", "shard-00000.lfs", 0, VALID, -1, 0},
    {"valid-multi", 0, "b", "shard-00000.lfs", 2, VALID, -1, 0},
    {"valid-multi-nock", 1, "b", "shard-00000.lfs", 2, VALID, -1, 0},
    {"valid-label", 1, "c", "shard-00000.lfs", 7, VALID, -1, 0},
    {"valid-manifest", 2, "c", LF_MANIFEST_NAME, 7, VALID_MANIFEST, -1, 0},
    {"valid-manifest-nock", 3, "c", LF_MANIFEST_NAME, 7, VALID_MANIFEST, -1, 0},
    {"broken-block-flip", 0, "b", "shard-00000.lfs", 2, DETECTED, 4200, 0},
    {"broken-header-flip", 0, "b", "shard-00000.lfs", 2, DETECTED, 40, 0},
    {"broken-truncated", 0, "a", "shard-00000.lfs", 0, DETECTED, -1, 6000},
    {"broken-footer-flip", 0, "a", "shard-00000.lfs", 0, DETECTED, -10, 0},
    {"broken-manifest-flip", 2, "c", LF_MANIFEST_NAME, 7, DETECTED, 20, 0},
    {"broken-index-nock", 1, "b", "shard-00000.lfs", 2, DETECTED, -90, 0},
    {"broken-block-nock", 1, "a", "shard-00000.lfs", 0, ANY, 4200, 0},
};
#define NSEEDS (sizeof seeds / sizeof seeds[0])

static void write_datasets(const char *root)
{
    static const struct { const char *dir; uint32_t cost; uint64_t n; lf_writer_options o; } d[] = {
        {"a", 0, 2, {.block_bytes = 0, .threads = 1}},
        {"b", 2, 6, {.block_bytes = 1 << 20, .threads = 1}},
        {"c", 7, 3, {.block_bytes = 0, .shard_bytes = 1, .threads = 1}},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s", root, d[i].dir);
        lf_schema s;
        gen_schema(&s, d[i].cost);
        gen_write(dir, &s, &d[i].o, d[i].n);
    }
}

/* The seed's bytes (mode byte first), made from a freshly written dataset. */
static uint8_t *make_seed(const char *root, const seed *sd, size_t *size)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s/%s", root, sd->dataset, sd->file);
    size_t n;
    uint8_t *file = gen_slurp(path, &n);
    uint8_t *out = malloc(n + 1);
    out[0] = sd->mode;
    memcpy(out + 1, file, n);
    free(file);
    if (sd->damage_at != -1) {
        size_t at = sd->damage_at >= 0 ? (size_t)sd->damage_at : n - (size_t)-sd->damage_at;
        ASSERT_LT(at, n);
        out[1 + at] ^= 0x5A;
    }
    *size = sd->truncate_to > 0 ? (size_t)sd->truncate_to + 1 : n + 1;
    return out;
}

static void write_seeds(const char *to)
{
    const char *root = test_tmpdir();
    write_datasets(root);
    for (size_t i = 0; i < NSEEDS; i++) {
        size_t n;
        uint8_t *p = make_seed(root, &seeds[i], &n);
        char path[4300];
        snprintf(path, sizeof path, "%s/%s", to, seeds[i].name);
        FILE *f = fopen(path, "wb");
        if (!f) TEST_FAIL_("cannot write %s", path);
        ASSERT_EQ(fwrite(p, 1, n, f), n);
        fclose(f);
        free(p);
    }
}

/* 0 when the shard in p opens and reads back equal to the generator. */
static int read_shard(const seed *sd, const uint8_t *p, size_t n, lf_shard_error *err)
{
    lf_schema s;
    gen_schema(&s, sd->cost_field);
    unsigned flags = (sd->mode & 1) ? SHARD_OPEN_SKIP_CHECKSUMS : 0;
    lf_dataset *ds;
    int rc = lf_dataset_open_memory(p + 1, n - 1, flags, &ds, err);
    if (rc != 0) return rc;
    ASSERT_MEM_EQ(lf_dataset_schema(ds), &s, sizeof s);
    rc = gen_read_all(ds, &s, err);
    lf_dataset_close(ds);
    return rc;
}

static void check_seed(const char *dir, const seed *sd)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, sd->name);
    size_t n;
    uint8_t *p = gen_slurp(path, &n);
    ASSERT_GT(n, 1);
    ASSERT_EQ(p[0], sd->mode);
    lf_shard_error err = {0};
    int rc;
    if (sd->mode & 2) {
        manifest m;
        rc = manifest_decode(p + 1, n - 1, sd->mode & 1, sd->name, &m, &err);
        if (rc == 0) {
            ASSERT_EQ(m.nshards, 3);
            ASSERT_EQ(m.samples, 3);
            free(m.shards);
        }
    } else if (sd->expect != ANY) {
        rc = read_shard(sd, p, n, &err);
    } else {
        rc = 0;   /* replayed by the fuzz target, not read here */
    }
    if (sd->expect == DETECTED && rc == 0) TEST_FAIL_("%s: damage not detected", sd->name);
    if (sd->expect != DETECTED && rc != 0) TEST_FAIL_("%s: %s", sd->name, err.msg);
    printf("%-22s %6zu bytes  %s\n", sd->name, n,
           rc ? err.msg : sd->expect == ANY ? "(fuzz replay only)" : "reads back equal");
    free(p);
}

int main(void)
{
    const char *to = getenv("LF_WRITE_SEEDS");
    if (to && *to) {
        write_seeds(to);
        return 0;
    }
    const char *root = getenv("LF_ROOT");
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/shard_reader", root && *root ? root : ".");
    for (size_t i = 0; i < NSEEDS; i++) check_seed(dir, &seeds[i]);
    return 0;
}
