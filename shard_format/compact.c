/*
 * compact.c — the compact index, index.lfx (FORMAT.md, section 10): what a
 * planner needs of a dataset, 4 bytes a sample and 8 a block, read where it
 * lies.
 *
 * The shard indexes hold 32 bytes a sample, and opening a dataset decodes
 * them into 40-byte entries in memory: at 10^9 samples that is 40 GB on
 * every node before a plan starts. A planner needs only each sample's cost
 * length and its block, and the block follows from the blocks' sample
 * counts (samples are numbered block after block). So index.lfx holds the
 * block table (count and raw size) and then the lengths, and the reader
 * maps it: the lengths stay in the page cache, shared and reclaimable, and
 * what the process allocates grows with blocks.
 *
 * The file is checked as the shards are: its header carries its own hash
 * and the hash of everything after it, and the checksum of the manifest it
 * was written for, so an index left beside a rewritten dataset is refused
 * rather than planned from.
 */
#include "shard_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* Header offsets (FORMAT.md, section 10). */
#define AT_VERSION 8
#define AT_LENGTH_BYTES 12
#define AT_SAMPLES 16
#define AT_BLOCKS 24
#define AT_MANIFEST_HASH 32
#define AT_DATA_HASH 40
#define AT_RESERVED 48
#define AT_SELF_HASH 56

/* ---- writing ------------------------------------------------------------ */

/* A buffered writer that hashes what passes through it. */
typedef struct out_file {
    FILE *f;
    XXH3_state_t hash;
    int failed;                  /* errno of the first failed write, else 0 */
} out_file;

static void out_put(out_file *o, const void *p, size_t n)
{
    XXH3_64bits_update(&o->hash, p, n);
    if (!o->failed && fwrite(p, 1, n, o->f) != n) o->failed = errno ? errno : EIO;
}

/* Writes the block table and the lengths; 0, or a status with err set. */
static int write_body(out_file *o, const lf_index_spec *s, const char *path,
                      lf_shard_error *err)
{
    uint64_t counted = 0;
    for (uint64_t b = 0; b < s->blocks; b++) {
        uint32_t n = 0, raw = 0;
        s->block(s->arg, b, &n, &raw);
        uint8_t e[COMPACT_BLOCK_ENTRY];
        put_u32(e, n);
        put_u32(e + 4, raw);
        out_put(o, e, sizeof e);
        counted += n;
    }
    if (counted != s->samples)
        return shard_fail(err, LF_SHARD_E_ARG, "%s: the blocks hold %" PRIu64 " samples, not %"
                          PRIu64, path, counted, s->samples);
    for (uint64_t i = 0; i < s->samples; i++) {
        uint64_t len = s->length(s->arg, i);
        if (len > UINT32_MAX)
            return shard_fail(err, LF_SHARD_E_ARG, "%s: sample %" PRIu64 ": length %" PRIu64
                              " passes the compact index's 2^32-1", path, i, len);
        uint8_t v[COMPACT_LENGTH_BYTES];
        put_u32(v, (uint32_t)len);
        out_put(o, v, sizeof v);
    }
    return 0;
}

static void encode_header(const lf_index_spec *s, uint64_t data_hash,
                          uint8_t h[COMPACT_HEADER_SIZE])
{
    memset(h, 0, COMPACT_HEADER_SIZE);
    memcpy(h, COMPACT_MAGIC, MAGIC_LEN);
    put_u32(h + AT_VERSION, COMPACT_VERSION);
    put_u32(h + AT_LENGTH_BYTES, COMPACT_LENGTH_BYTES);
    put_u64(h + AT_SAMPLES, s->samples);
    put_u64(h + AT_BLOCKS, s->blocks);
    put_u64(h + AT_MANIFEST_HASH, s->manifest_hash);
    put_u64(h + AT_DATA_HASH, data_hash);
    put_u64(h + AT_SELF_HASH, shard_hash(h, AT_SELF_HASH));
}

/* Writes the file at tmp: a zero header, the body, then the header. */
static int write_file(const char *tmp, const lf_index_spec *s, lf_shard_error *err)
{
    out_file o = {.f = fopen(tmp, "wb")};
    if (!o.f) return shard_fail(err, LF_SHARD_E_IO, "%s: %s", tmp, strerror(errno));
    uint8_t h[COMPACT_HEADER_SIZE] = {0};
    if (fwrite(h, 1, sizeof h, o.f) != sizeof h) o.failed = errno ? errno : EIO;
    XXH3_64bits_reset(&o.hash);
    int rc = write_body(&o, s, tmp, err);
    if (rc == 0) {
        encode_header(s, XXH3_64bits_digest(&o.hash), h);
        if (!o.failed && (fseek(o.f, 0, SEEK_SET) != 0 || fwrite(h, 1, sizeof h, o.f) != sizeof h))
            o.failed = errno ? errno : EIO;
        if (!o.failed && (fflush(o.f) != 0 || fsync(fileno(o.f)) != 0)) o.failed = errno;
    }
    if (fclose(o.f) != 0 && !o.failed) o.failed = errno;
    if (rc == 0 && o.failed)
        rc = shard_fail(err, LF_SHARD_E_IO, "%s: %s", tmp, strerror(o.failed));
    return rc;
}

int lf_index_write(const char *dir, const lf_index_spec *spec, lf_shard_error *err)
{
    if (!dir || !spec || !spec->block || !spec->length)
        return shard_fail(err, LF_SHARD_E_ARG, "index: NULL argument");
    char tmp[PATH_MAX], path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s", dir, LF_INDEX_NAME);
    if (n < 0 || (size_t)n >= sizeof path ||
        snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, LF_INDEX_NAME) >= (int)sizeof tmp)
        return shard_fail(err, LF_SHARD_E_ARG, "%s: path too long", dir);
    int rc = write_file(tmp, spec, err);
    /* the summary of the index it replaces goes first: never one beside
     * an index it does not describe (it would be refused) */
    char sum[PATH_MAX];
    if (rc == 0 && snprintf(sum, sizeof sum, "%s/%s", dir, LF_INDEX_SUMMARY_NAME) < (int)sizeof sum &&
        unlink(sum) != 0 && errno != ENOENT)
        rc = shard_fail(err, LF_SHARD_E_IO, "%s: %s", sum, strerror(errno));
    if (rc == 0 && rename(tmp, path) != 0)
        rc = shard_fail(err, LF_SHARD_E_IO, "%s: %s", path, strerror(errno));
    if (rc != 0) unlink(tmp);
    return rc;
}

/* ---- the summary (index-summary.lfx, FORMAT.md section 11) ------------- */

#define SUMMARY_MAGIC "LFISUMM\0"
#define SUMMARY_VERSION 1
#define SUMMARY_HEADER_SIZE 72
#define SUMMARY_ENTRY 16                 /* length u64, count u64 */
#define SU_VERSION 8
#define SU_NCOUNTS 12
#define SU_SAMPLES 16
#define SU_BLOCKS 24
#define SU_INDEX_HASH 32
#define SU_DIGEST 40
#define SU_DIGEST_KIND 48
#define SU_RESERVED 52
#define SU_BODY_HASH 56
#define SU_SELF_HASH 64

/* The path of the summary beside the index at lfx (dir/index.lfx). */
static int summary_path(const char *lfx, char out[PATH_MAX])
{
    const char *slash = strrchr(lfx, '/');
    int n = slash ? snprintf(out, PATH_MAX, "%.*s/%s", (int)(slash - lfx), lfx,
                             LF_INDEX_SUMMARY_NAME)
                  : snprintf(out, PATH_MAX, "%s", LF_INDEX_SUMMARY_NAME);
    return n < 0 || n >= PATH_MAX ? -1 : 0;
}

/* The data hash of the index at path, its header checked (self hash,
 * magic, version); *samples, *blocks its counts. */
static int index_header(const char *path, uint64_t *data_hash, uint64_t *samples,
                        uint64_t *blocks, lf_shard_error *err)
{
    uint8_t h[COMPACT_HEADER_SIZE];
    FILE *f = fopen(path, "rb");
    if (!f) return shard_fail(err, LF_SHARD_E_IO, "%s: %s", path, strerror(errno));
    size_t got = fread(h, 1, sizeof h, f);
    fclose(f);
    if (got != sizeof h || memcmp(h, COMPACT_MAGIC, MAGIC_LEN) != 0 ||
        shard_hash(h, AT_SELF_HASH) != get_u64(h + AT_SELF_HASH) ||
        get_u32(h + AT_VERSION) != COMPACT_VERSION)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: not a levelfeed compact index of "
                          "version %u", path, COMPACT_VERSION);
    *data_hash = get_u64(h + AT_DATA_HASH);
    *samples = get_u64(h + AT_SAMPLES);
    *blocks = get_u64(h + AT_BLOCKS);
    return 0;
}

/* The counts' entries of s into body (SUMMARY_ENTRY bytes each). */
static void encode_counts(const lf_index_summary *s, uint8_t *body)
{
    for (uint32_t k = 0; k < s->ncounts; k++) {
        put_u64(body + (size_t)k * SUMMARY_ENTRY, s->length[k]);
        put_u64(body + (size_t)k * SUMMARY_ENTRY + 8, s->count[k]);
    }
}

int lf_index_summary_write(const char *dir, const lf_index_summary *s, lf_shard_error *err)
{
    if (!dir || !s || s->ncounts > LF_INDEX_SUMMARY_COUNTS_MAX ||
        (s->ncounts && (!s->length || !s->count)))
        return shard_fail(err, LF_SHARD_E_ARG, "index summary: invalid argument");
    char lfx[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX];
    if (snprintf(lfx, sizeof lfx, "%s/%s", dir, LF_INDEX_NAME) >= (int)sizeof lfx ||
        summary_path(lfx, path) != 0 ||
        snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, LF_INDEX_SUMMARY_NAME) >= (int)sizeof tmp)
        return shard_fail(err, LF_SHARD_E_ARG, "%s: path too long", dir);
    uint64_t index_hash = 0, samples = 0, blocks = 0;
    int rc = index_header(lfx, &index_hash, &samples, &blocks, err);
    if (rc != 0) return rc;
    if (samples != s->samples || blocks != s->blocks)
        return shard_fail(err, LF_SHARD_E_ARG, "%s: %" PRIu64 " samples in %" PRIu64 " blocks, "
                          "not the summary's %" PRIu64 " in %" PRIu64, lfx, samples, blocks,
                          s->samples, s->blocks);
    size_t size = SUMMARY_HEADER_SIZE + (size_t)s->ncounts * SUMMARY_ENTRY;
    uint8_t *b = calloc(1, size);
    if (!b) return shard_fail(err, LF_SHARD_E_NOMEM, "%s: out of memory", path);
    memcpy(b, SUMMARY_MAGIC, MAGIC_LEN);
    put_u32(b + SU_VERSION, SUMMARY_VERSION);
    put_u32(b + SU_NCOUNTS, s->ncounts);
    put_u64(b + SU_SAMPLES, s->samples);
    put_u64(b + SU_BLOCKS, s->blocks);
    put_u64(b + SU_INDEX_HASH, index_hash);
    put_u64(b + SU_DIGEST, s->digest_kind ? s->digest : 0);
    put_u32(b + SU_DIGEST_KIND, s->digest_kind);
    encode_counts(s, b + SUMMARY_HEADER_SIZE);
    put_u64(b + SU_BODY_HASH, shard_hash(b + SUMMARY_HEADER_SIZE, size - SUMMARY_HEADER_SIZE));
    put_u64(b + SU_SELF_HASH, shard_hash(b, SU_SELF_HASH));
    FILE *f = fopen(tmp, "wb");
    int failed = !f ? errno : 0;
    if (f && fwrite(b, 1, size, f) != size) failed = errno ? errno : EIO;
    if (f && !failed && (fflush(f) != 0 || fsync(fileno(f)) != 0)) failed = errno;
    if (f && fclose(f) != 0 && !failed) failed = errno;
    free(b);
    if (!failed && rename(tmp, path) != 0) failed = errno;
    if (!failed) return 0;
    if (f) unlink(tmp);
    return shard_fail(err, LF_SHARD_E_IO, "%s: %s", f ? path : tmp, strerror(failed));
}

/* Checks the summary's bytes (size of them, read from path) against the
 * index ci it sits beside (its data hash data_hash) and fills ci's. */
static int summary_decode(const uint8_t *b, size_t size, const char *path, uint64_t data_hash,
                          compact_index *ci, lf_shard_error *err)
{
    static const char redo[] = "run `lf-shard index DIR` to write it again";
    if (size < SUMMARY_HEADER_SIZE || memcmp(b, SUMMARY_MAGIC, MAGIC_LEN) != 0 ||
        shard_hash(b, SU_SELF_HASH) != get_u64(b + SU_SELF_HASH))
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: not a levelfeed index summary, or its "
                          "header is damaged: %s", path, redo);
    if (get_u32(b + SU_VERSION) != SUMMARY_VERSION)
        return shard_fail(err, LF_SHARD_E_VERSION, "%s: version %u (this reader knows %u): "
                          "%s", path, get_u32(b + SU_VERSION), SUMMARY_VERSION, redo);
    uint32_t k = get_u32(b + SU_NCOUNTS);
    if (k > LF_INDEX_SUMMARY_COUNTS_MAX || size != SUMMARY_HEADER_SIZE + (size_t)k * SUMMARY_ENTRY ||
        get_u32(b + SU_RESERVED) != 0 ||
        shard_hash(b + SUMMARY_HEADER_SIZE, size - SUMMARY_HEADER_SIZE) != get_u64(b + SU_BODY_HASH))
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: damaged (size, counts or checksum): %s",
                          path, redo);
    if (get_u64(b + SU_INDEX_HASH) != data_hash || get_u64(b + SU_SAMPLES) != ci->samples ||
        get_u64(b + SU_BLOCKS) != ci->blocks)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: written for another %s than the one "
                          "beside it: %s", path, LF_INDEX_NAME, redo);
    uint64_t *len = malloc((k ? k : 1) * sizeof *len), *cnt = malloc((k ? k : 1) * sizeof *cnt);
    uint64_t sum = 0;
    int ok = len && cnt;
    for (uint32_t i = 0; ok && i < k; i++) {
        len[i] = get_u64(b + SUMMARY_HEADER_SIZE + (size_t)i * SUMMARY_ENTRY);
        cnt[i] = get_u64(b + SUMMARY_HEADER_SIZE + (size_t)i * SUMMARY_ENTRY + 8);
        ok = cnt[i] > 0 && cnt[i] <= ci->samples - sum && len[i] <= UINT32_MAX &&
             (i == 0 || len[i] > len[i - 1]);
        sum += cnt[i];
    }
    if (!ok || (k && sum != ci->samples)) {
        free(len);
        free(cnt);
        return !len || !cnt ? shard_fail(err, LF_SHARD_E_NOMEM, "%s: out of memory", path)
                            : shard_fail(err, LF_SHARD_E_FORMAT, "%s: its length counts are "
                                         "not ascending or do not sum to the index's samples: "
                                         "%s", path, redo);
    }
    uint32_t kind = get_u32(b + SU_DIGEST_KIND);
    ci->summary = (lf_index_summary){.samples = ci->samples, .blocks = ci->blocks, .ncounts = k,
                                     .length = len, .count = cnt, .digest_kind = kind,
                                     .digest = kind ? get_u64(b + SU_DIGEST) : 0};
    ci->has_summary = true;
    return 0;
}

/* Reads the summary beside the index at lfx, where there is one. */
static int read_summary(const char *lfx, uint64_t data_hash, compact_index *ci,
                        lf_shard_error *err)
{
    char path[PATH_MAX];
    if (summary_path(lfx, path) != 0) return 0;   /* as if none: the index opened */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);   /* a FIFO would block */
    if (fd < 0 && errno == ENOENT) return 0;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int rc = shard_fail(err, LF_SHARD_E_IO, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return rc;
    }
    /* mapped, not read into a buffer: a megabyte malloc'd and freed would
     * raise glibc's mmap threshold, and the server's decode buffers would
     * then come from (and stay in) its heap */
    size_t max = SUMMARY_HEADER_SIZE + (size_t)LF_INDEX_SUMMARY_COUNTS_MAX * SUMMARY_ENTRY;
    size_t size = S_ISREG(st.st_mode) && (uint64_t)st.st_size <= max ? (size_t)st.st_size : 0;
    void *m = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    close(fd);
    int rc = m == MAP_FAILED ? summary_decode((const uint8_t *)"", 0, path, data_hash, ci, err)
                             : summary_decode(m, size, path, data_hash, ci, err);
    if (m != MAP_FAILED) munmap(m, size);
    return rc;
}

/* ---- reading ------------------------------------------------------------ */

/* Checks the header of a file of `size` bytes; fills ci's counts. */
static int check_header(const uint8_t *h, uint64_t size, uint64_t manifest_hash,
                        bool skip_hashes, const char *path, compact_index *ci,
                        lf_shard_error *err)
{
    if (size < COMPACT_HEADER_SIZE || memcmp(h, COMPACT_MAGIC, MAGIC_LEN) != 0)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: not a levelfeed compact index", path);
    if (!skip_hashes && shard_hash(h, AT_SELF_HASH) != get_u64(h + AT_SELF_HASH))
        return shard_fail(err, LF_SHARD_E_CHECKSUM, "%s: header: checksum mismatch", path);
    if (get_u32(h + AT_VERSION) != COMPACT_VERSION)
        return shard_fail(err, LF_SHARD_E_VERSION, "%s: version %u (this reader knows %u)", path,
                          get_u32(h + AT_VERSION), COMPACT_VERSION);
    uint64_t samples = get_u64(h + AT_SAMPLES), blocks = get_u64(h + AT_BLOCKS);
    uint64_t room = size - COMPACT_HEADER_SIZE;
    if (get_u32(h + AT_LENGTH_BYTES) != COMPACT_LENGTH_BYTES || get_u64(h + AT_RESERVED) != 0 ||
        blocks > room / COMPACT_BLOCK_ENTRY || samples > room / COMPACT_LENGTH_BYTES ||
        blocks * COMPACT_BLOCK_ENTRY + samples * COMPACT_LENGTH_BYTES != room ||
        blocks > samples || (samples > 0 && blocks == 0))
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: header: counts do not match the file's "
                          "%" PRIu64 " bytes", path, size);
    if (get_u64(h + AT_MANIFEST_HASH) != manifest_hash)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: written for another manifest than the one "
                          "beside it (the dataset was rewritten): run `lf-shard index DIR` to "
                          "write it again", path);
    ci->samples = samples;
    ci->blocks = blocks;
    return 0;
}

/* Every block holds samples, and the blocks hold them all. */
static int check_blocks(const compact_index *ci, const char *path, lf_shard_error *err)
{
    uint64_t counted = 0;
    for (uint64_t b = 0; b < ci->blocks; b++) {
        const uint8_t *e = ci->block_table + b * COMPACT_BLOCK_ENTRY;
        uint32_t n = get_u32(e), raw = get_u32(e + 4);
        if (n == 0 || n > ci->samples - counted || raw > MAX_BLOCK_RAW)
            return shard_fail(err, LF_SHARD_E_FORMAT, "%s: block %" PRIu64 ": bad sample count "
                              "or raw size", path, b);
        counted += n;
    }
    if (counted != ci->samples)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: the blocks hold %" PRIu64 " of its %"
                          PRIu64 " samples", path, counted, ci->samples);
    return 0;
}

static int map_file(const char *path, compact_index *ci, lf_shard_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int rc = shard_fail(err, LF_SHARD_E_IO, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return rc;
    }
    int rc = 0;
    if (!S_ISREG(st.st_mode) || st.st_size < COMPACT_HEADER_SIZE)
        rc = shard_fail(err, LF_SHARD_E_FORMAT, "%s: not a regular file of at least %d bytes",
                        path, COMPACT_HEADER_SIZE);
    else if ((uint64_t)st.st_size > SIZE_MAX)
        rc = shard_fail(err, LF_SHARD_E_NOMEM, "%s: too large to map", path);
    void *m = rc == 0 ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (rc == 0 && m == MAP_FAILED)
        rc = shard_fail(err, LF_SHARD_E_IO, "%s: mmap: %s", path, strerror(errno));
    close(fd);   /* the mapping keeps the file */
    if (rc == 0) *ci = (compact_index){.base = m, .map = m, .size = (size_t)st.st_size};
    return rc;
}

/* The data hash of a file mapping at bytes (page-aligned), a window at a
 * time, each window's pages let go once hashed (madvise MADV_DONTNEED: the
 * mapping is read-only, they stay in the page cache and are read back from
 * there when touched): checking an index of 10^9 samples (4 GB) would
 * otherwise leave all of it in the process's resident memory. */
#define HASH_WINDOW ((size_t)8 << 20)

static uint64_t hash_mapped(const uint8_t *bytes, size_t size)
{
    XXH3_state_t h;
    XXH3_64bits_reset(&h);
    for (size_t at = COMPACT_HEADER_SIZE; at < size;) {
        size_t end = at + HASH_WINDOW < size ? (at + HASH_WINDOW) / HASH_WINDOW * HASH_WINDOW
                                             : size;
        XXH3_64bits_update(&h, bytes + at, end - at);
        if (end < size) madvise((void *)(uintptr_t)bytes, end, MADV_DONTNEED);
        at = end;
    }
    return XXH3_64bits_digest(&h);
}

/* compact_check, with `mapped`: bytes are a file mapping, hashed by
 * hash_mapped. */
static int check_bytes(const uint8_t *bytes, size_t size, uint64_t manifest_hash,
                       bool skip_hashes, bool mapped, const char *path, compact_index *ci,
                       lf_shard_error *err)
{
    compact_index c = {.map = bytes, .size = size};
    int rc = check_header(bytes, size, manifest_hash, skip_hashes, path, &c, err);
    if (rc == 0 && !skip_hashes &&
        (mapped ? hash_mapped(bytes, size)
                : shard_hash(bytes + COMPACT_HEADER_SIZE, size - COMPACT_HEADER_SIZE)) !=
            get_u64(bytes + AT_DATA_HASH))
        rc = shard_fail(err, LF_SHARD_E_CHECKSUM, "%s: checksum mismatch", path);
    if (rc == 0) {
        c.block_table = bytes + COMPACT_HEADER_SIZE;
        c.lengths = c.block_table + c.blocks * COMPACT_BLOCK_ENTRY;
        rc = check_blocks(&c, path, err);
    }
    if (rc == 0) *ci = c;
    return rc;
}

int compact_check(const uint8_t *bytes, size_t size, uint64_t manifest_hash, bool skip_hashes,
                  const char *path, compact_index *ci, lf_shard_error *err)
{
    return check_bytes(bytes, size, manifest_hash, skip_hashes, false, path, ci, err);
}

int compact_map(const char *path, uint64_t manifest_hash, compact_index *ci,
                lf_shard_error *err)
{
    compact_index m;
    int rc = map_file(path, &m, err);
    if (rc == 0) rc = check_bytes(m.map, m.size, manifest_hash, false, true, path, ci, err);
    if (rc == 0) ci->base = m.base;
    else compact_unmap(&m);
    if (rc == 0 && (rc = read_summary(path, get_u64(ci->map + AT_DATA_HASH), ci, err)) != 0)
        compact_unmap(ci);
    return rc;
}

void compact_release(const compact_index *ci)
{
    if (ci->base) madvise(ci->base, ci->size, MADV_DONTNEED);
}

void compact_unmap(compact_index *ci)
{
    if (ci->base) munmap(ci->base, ci->size);
    free((void *)(uintptr_t)ci->summary.length);
    free((void *)(uintptr_t)ci->summary.count);
    *ci = (compact_index){0};
}
