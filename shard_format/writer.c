/*
 * writer.c — builds a dataset: records into blocks, blocks compressed in
 * parallel, written in order into shard files, then the manifest.
 *
 * The caller's thread appends records to the block being filled. A sealed
 * block goes to a small pool of compression threads; the caller's thread
 * writes finished blocks in submission order, so the file layout does not
 * depend on the thread count or timing. Blocks live in a ring of nslots
 * slots (about two per thread): a slot is filled, queued, compressed,
 * written, then reused, so memory is bounded by the slots' buffers and the
 * index of the shard being written, never by the dataset.
 *
 * Sequence numbers drive the ring: block seq lives in slot seq % nslots;
 * seq_written <= seq_taken <= seq_submit, and the slot being filled is
 * seq_submit's. Workers take seq_taken under the mutex; `done` flips under
 * the mutex, which orders the worker's writes to the slot before the
 * caller's reads of it.
 *
 * Every file is written under a temporary name (".NAME.tmp") and renamed
 * only in lf_writer_finish: shards first, the manifest last, so a directory
 * that has a manifest has all its shards complete. Shard files are written
 * header-last: the header (which holds the counts) is written over its
 * reserved first 4 KiB once the index and footer are in place.
 */
#include "shard_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define MAX_THREADS 256
#define PREFIX_MAX 40
#define LOCK_NAME ".lf-writer.lock"  /* in the output directory while a writer runs */

typedef struct wblock {
    uint8_t *raw;                /* records, back to back */
    size_t raw_size, raw_cap;
    lf_sample_info *samples;     /* offset, size, cost inputs of each record */
    uint32_t nsamples, samples_cap;
    uint8_t *stored;             /* zstd frame + padding frame */
    size_t stored_size, stored_cap;
    uint64_t checksum;
    int status;                  /* compression result, valid once done */
    bool done;
} wblock;

struct lf_writer {
    char dir[PATH_MAX];
    int lock_fd;                 /* holds the flock on DIR/LOCK_NAME, -1 if none */
    uint32_t stale_files;        /* an earlier conversion's temporaries removed */
    uint64_t stale_bytes;
    lf_schema schema;
    uint64_t shard_bytes;
    uint32_t block_bytes;
    int level;
    char prefix[PREFIX_MAX + 1];

    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    pthread_t *threads;
    int nthreads;
    bool stop;
    wblock *slots;
    uint32_t nslots;
    uint64_t seq_submit, seq_taken, seq_written;
    bool filling;                /* slot seq_submit holds records (so it is not free) */

    int fd;                      /* shard being written, -1 if none */
    uint64_t shard_off;          /* its next block's offset */
    uint64_t shard_first_sample;
    shard_block_entry *blocks;   /* its index so far */
    uint64_t nblocks, blocks_cap;
    lf_sample_info *samples;
    uint64_t nsamples, samples_cap;
    uint64_t shard_raw;

    manifest_shard *shards;      /* completed shards, still under temp names */
    uint32_t nshards;
    uint64_t shards_cap;
    uint64_t raw_total;

    uint64_t added;              /* samples accepted by lf_writer_add */
    uint32_t version;            /* the format version written (FORMAT.md, section 8) */
    uint64_t doc_end;            /* the last sample's doc_offset + tokens: where a
                                    following piece of its document starts */
    lf_writer_stats stats;
    lf_writer_progress_fn progress;
    void *progress_arg;
    int failed;                  /* sticky status after the first error */
    lf_shard_error first_err;
};

/* Grows *p (an array of elem-byte items with capacity *cap) to hold need. */
static int grow(void *p, uint64_t *cap, uint64_t need, size_t elem)
{
    if (need <= *cap) return 0;
    uint64_t n = *cap ? *cap : 16;
    while (n < need) n *= 2;
    if (n > SIZE_MAX / elem) return LF_SHARD_E_NOMEM;
    void *q = realloc(*(void **)p, (size_t)(n * elem));
    if (!q) return LF_SHARD_E_NOMEM;
    *(void **)p = q;
    *cap = n;
    return 0;
}

static int grow_bytes(uint8_t **p, size_t *cap, size_t need)
{
    uint64_t c = *cap;
    int rc = grow(p, &c, need, 1);
    *cap = (size_t)c;
    return rc;
}

/* Records the first failure; later calls return it again. */
static int writer_fail(lf_writer *w, lf_shard_error *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int writer_fail(lf_writer *w, lf_shard_error *err, int status, const char *fmt, ...)
{
    if (!w->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->first_err.msg, sizeof w->first_err.msg, fmt, ap);
        va_end(ap);
        w->first_err.status = status;
        w->failed = status;
    }
    if (err) *err = w->first_err;
    return w->failed;
}

static void shard_file_name(const lf_writer *w, uint32_t no, char *out, size_t cap)
{
    snprintf(out, cap, "%s-%05u.lfs", w->prefix, no);
}

/* out = dir + "/" + (tmp ? "." : "") + name + (tmp ? ".tmp" : ""); the
 * lengths are checked at create (directory) and by construction (names). */
static int file_path(const lf_writer *w, const char *name, bool tmp, char *out, size_t cap)
{
    const char *parts[] = {w->dir, tmp ? "/." : "/", name, tmp ? ".tmp" : ""};
    size_t len = 0;
    for (size_t i = 0; i < 4; i++) {
        size_t n = strlen(parts[i]);
        if (n >= cap - len) return LF_SHARD_E_ARG;
        memcpy(out + len, parts[i], n);
        len += n;
    }
    out[len] = '\0';
    return 0;
}

/* ---- compression pool -------------------------------------------------- */

/* Compresses b->raw into b->stored and pads it with a zstd skippable frame
 * to a multiple of LF_SHARD_ALIGN, so the stored bytes are one valid zstd
 * stream and the padding is covered by the block checksum. */
static int compress_block(ZSTD_CCtx *cctx, int level, wblock *b)
{
    size_t bound = ZSTD_compressBound(b->raw_size) + 2 * LF_SHARD_ALIGN;
    if (grow_bytes(&b->stored, &b->stored_cap, bound) != 0) return LF_SHARD_E_NOMEM;
    size_t n = ZSTD_compressCCtx(cctx, b->stored, b->stored_cap, b->raw, b->raw_size, level);
    if (ZSTD_isError(n)) return LF_SHARD_E_NOMEM;
    size_t padded = (n + LF_SHARD_ALIGN - 1) / LF_SHARD_ALIGN * LF_SHARD_ALIGN;
    if (padded != n && padded - n < PAD_FRAME_HEADER) padded += LF_SHARD_ALIGN;
    if (padded != n) {
        memset(b->stored + n, 0, padded - n);
        put_u32(b->stored + n, PAD_FRAME_MAGIC);
        put_u32(b->stored + n + 4, (uint32_t)(padded - n - PAD_FRAME_HEADER));
    }
    b->stored_size = padded;
    b->checksum = shard_hash(b->stored, padded);
    return 0;
}

static void *worker_main(void *arg)
{
    lf_writer *w = arg;
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->stop && w->seq_taken == w->seq_submit)
            pthread_cond_wait(&w->work_cv, &w->mu);
        if (w->seq_taken == w->seq_submit) break;   /* stopping, queue empty */
        wblock *b = &w->slots[w->seq_taken++ % w->nslots];
        pthread_mutex_unlock(&w->mu);
        int status = cctx ? compress_block(cctx, w->level, b) : LF_SHARD_E_NOMEM;
        pthread_mutex_lock(&w->mu);
        b->status = status;
        b->done = true;
        pthread_cond_broadcast(&w->done_cv);
    }
    pthread_mutex_unlock(&w->mu);
    ZSTD_freeCCtx(cctx);
    return NULL;
}

static void pool_stop(lf_writer *w)
{
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->work_cv);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->nthreads; i++) pthread_join(w->threads[i], NULL);
    w->nthreads = 0;
}

static int pool_start(lf_writer *w, int nthreads)
{
    w->threads = calloc((size_t)nthreads, sizeof *w->threads);
    if (!w->threads) return LF_SHARD_E_NOMEM;
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&w->threads[i], NULL, worker_main, w) != 0) {
            pool_stop(w);
            return LF_SHARD_E_NOMEM;
        }
        w->nthreads = i + 1;
    }
    return 0;
}

static void submit_block(lf_writer *w)
{
    pthread_mutex_lock(&w->mu);
    w->seq_submit++;
    w->filling = false;
    pthread_cond_signal(&w->work_cv);
    pthread_mutex_unlock(&w->mu);
}

/* ---- shard files ------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t size, uint64_t off)
{
    const uint8_t *p = buf;
    while (size > 0) {
        ssize_t n = pwrite(fd, p, size, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? -errno : -EIO;
        p += n;
        size -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

static int open_shard(lf_writer *w, lf_shard_error *err)
{
    char name[MANIFEST_NAME_MAX], path[PATH_MAX];
    if (w->nshards == UINT32_MAX)
        return writer_fail(w, err, LF_SHARD_E_RANGE, "%s: too many shards", w->dir);
    shard_file_name(w, w->nshards, name, sizeof name);
    file_path(w, name, true, path, sizeof path);
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0)
        return writer_fail(w, err, LF_SHARD_E_IO, "%s: %s", path, strerror(errno));
    w->shard_off = HEADER_SIZE;
    w->shard_first_sample = w->stats.samples;
    w->nblocks = w->nsamples = w->shard_raw = 0;
    w->stats.shards = w->nshards + 1;
    return 0;
}

/* Encodes the open shard's header, and its index followed by its footer
 * into a new buffer (*tail_size bytes); NULL when out of memory. */
static uint8_t *encode_shard_meta(const lf_writer *w, uint8_t header[HEADER_SIZE],
                                  shard_footer *f, size_t *tail_size)
{
    size_t index_size = (size_t)(w->nblocks * BLOCK_ENTRY_SIZE + w->nsamples * SAMPLE_ENTRY_SIZE);
    uint8_t *buf = malloc(index_size + FOOTER_SIZE);
    if (!buf) return NULL;
    for (uint64_t i = 0; i < w->nblocks; i++)
        block_entry_encode(&w->blocks[i], buf + i * BLOCK_ENTRY_SIZE);
    uint8_t *samples = buf + w->nblocks * BLOCK_ENTRY_SIZE;
    for (uint64_t i = 0; i < w->nsamples; i++)
        sample_entry_encode(&w->samples[i], samples + i * SAMPLE_ENTRY_SIZE);
    shard_header h = {
        .shard_no = w->nshards, .first_sample = w->shard_first_sample,
        .nsamples = w->nsamples, .nblocks = w->nblocks, .index_offset = w->shard_off,
        .index_size = index_size, .raw_bytes = w->shard_raw, .schema = w->schema,
        .version = w->version,
    };
    header_encode(&h, header);
    *f = (shard_footer){
        .index_offset = w->shard_off, .index_size = index_size,
        .header_hash = shard_hash(header, HEADER_SIZE),
        .index_hash = shard_hash(buf, index_size),
        .file_size = w->shard_off + index_size + FOOTER_SIZE,
        .version = w->version,
    };
    footer_encode(f, buf + index_size);
    *tail_size = index_size + FOOTER_SIZE;
    return buf;
}

/* Writes index, footer and header of the open shard, syncs and closes it,
 * and lists it for the manifest. */
static int close_shard(lf_writer *w, lf_shard_error *err)
{
    char name[MANIFEST_NAME_MAX];
    shard_file_name(w, w->nshards, name, sizeof name);
    uint8_t header[HEADER_SIZE];
    shard_footer f;
    size_t tail_size;
    uint8_t *tail = NULL;
    if (grow(&w->shards, &w->shards_cap, w->nshards + 1, sizeof *w->shards) != 0 ||
        !(tail = encode_shard_meta(w, header, &f, &tail_size)))
        return writer_fail(w, err, LF_SHARD_E_NOMEM, "%s: out of memory", name);
    int rc = write_all(w->fd, tail, tail_size, w->shard_off);
    if (rc == 0) rc = write_all(w->fd, header, HEADER_SIZE, 0);
    if (rc == 0 && fsync(w->fd) != 0) rc = -errno;
    free(tail);
    if (close(w->fd) != 0 && rc == 0) rc = -errno;
    w->fd = -1;
    if (rc != 0) {
        char path[PATH_MAX];
        file_path(w, name, true, path, sizeof path);
        unlink(path); /* not listed yet, so remove_temps would not find it */
        return writer_fail(w, err, LF_SHARD_E_IO, "%s: %s", path, strerror(-rc));
    }
    manifest_shard *s = &w->shards[w->nshards++];
    memset(s, 0, sizeof *s);
    memcpy(s->name, name, sizeof name);
    s->samples = w->nsamples;
    s->blocks = w->nblocks;
    s->file_size = f.file_size;
    s->footer_hash = f.self_hash;
    w->stats.stored_bytes += tail_size;
    w->raw_total += w->shard_raw;
    return 0;
}

/* Adds block b (just written at offset off) to the open shard's index. */
static int index_block(lf_writer *w, const wblock *b, uint64_t off)
{
    if (grow(&w->blocks, &w->blocks_cap, w->nblocks + 1, sizeof *w->blocks) != 0 ||
        grow(&w->samples, &w->samples_cap, w->nsamples + b->nsamples, sizeof *w->samples) != 0)
        return LF_SHARD_E_NOMEM;
    w->blocks[w->nblocks] = (shard_block_entry){
        .file_offset = off, .stored_size = (uint32_t)b->stored_size,
        .raw_size = (uint32_t)b->raw_size, .checksum = b->checksum,
        .first_sample = (uint32_t)w->nsamples, .nsamples = b->nsamples,
    };
    for (uint32_t i = 0; i < b->nsamples; i++) {
        lf_sample_info s = b->samples[i];
        s.shard = w->nshards;
        s.block = (uint32_t)w->nblocks;
        w->samples[w->nsamples + i] = s;
    }
    w->nblocks++;
    w->nsamples += b->nsamples;
    w->shard_raw += b->raw_size;
    return 0;
}

/* Waits for the oldest queued block, writes it to the current shard (opening
 * one when needed) and frees its slot; closes the shard once it is full. */
static int write_oldest(lf_writer *w, lf_shard_error *err)
{
    wblock *b = &w->slots[w->seq_written % w->nslots];
    pthread_mutex_lock(&w->mu);
    while (!b->done) pthread_cond_wait(&w->done_cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    uint64_t seq = w->seq_written;
    if (b->status != 0)
        return writer_fail(w, err, b->status, "%s: block %" PRIu64 ": compression failed",
                           w->dir, seq);
    if (w->fd < 0 && open_shard(w, err) != 0) return w->failed;
    int rc = write_all(w->fd, b->stored, b->stored_size, w->shard_off);
    if (rc != 0)
        return writer_fail(w, err, LF_SHARD_E_IO, "%s: shard %u: %s", w->dir, w->nshards,
                           strerror(-rc));
    if (index_block(w, b, w->shard_off) != 0)
        return writer_fail(w, err, LF_SHARD_E_NOMEM, "%s: out of memory", w->dir);
    w->shard_off += b->stored_size;
    w->stats.blocks++;
    w->stats.samples += b->nsamples;
    w->stats.raw_bytes += b->raw_size;
    w->stats.stored_bytes += b->stored_size + (w->nblocks == 1 ? HEADER_SIZE : 0);
    b->raw_size = 0;
    b->nsamples = 0;
    b->done = false;
    w->seq_written = seq + 1;
    if (w->progress) w->progress(w->progress_arg, &w->stats);
    /* shard-local block and sample numbers are u32: close before they could
     * overflow (a block holds fewer than MAX_BLOCK_RAW / 4 records) */
    if (w->shard_off - HEADER_SIZE >= w->shard_bytes || w->nblocks == UINT32_MAX ||
        w->nsamples > UINT32_MAX - MAX_BLOCK_RAW / 4)
        return close_shard(w, err);
    return 0;
}

/* The slot being filled; writes the oldest block first if the ring is full. */
static int filling_slot(lf_writer *w, wblock **out, lf_shard_error *err)
{
    while (w->seq_submit - w->seq_written >= w->nslots)
        if (write_oldest(w, err) != 0) return w->failed;
    *out = &w->slots[w->seq_submit % w->nslots];
    return 0;
}

/* ---- public API --------------------------------------------------------- */

static int resolve_options(lf_writer *w, const lf_writer_options *o, int *threads,
                           lf_shard_error *err)
{
    lf_writer_options d = {0};
    if (!o) o = &d;
    w->shard_bytes = o->shard_bytes ? o->shard_bytes : (1ull << 30);
    w->block_bytes = o->block_bytes;
    if (w->block_bytes > MAX_BLOCK_RAW)
        return shard_fail(err, LF_SHARD_E_ARG, "block size %u above %u", w->block_bytes,
                          MAX_BLOCK_RAW);
    w->level = o->zstd_level ? o->zstd_level : 3;
    if (w->level < 1 || w->level > ZSTD_maxCLevel())
        return shard_fail(err, LF_SHARD_E_ARG, "zstd level %d out of range", w->level);
    *threads = o->threads;
    if (*threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        *threads = n > 0 ? (int)(n < MAX_THREADS ? n : MAX_THREADS) : 1;
    }
    if (*threads > MAX_THREADS)
        return shard_fail(err, LF_SHARD_E_ARG, "%d threads above %d", *threads, MAX_THREADS);
    const char *prefix = o->shard_prefix ? o->shard_prefix : "shard";
    size_t len = strlen(prefix);
    if (len == 0 || len > PREFIX_MAX || strchr(prefix, '/') || prefix[0] == '.')
        return shard_fail(err, LF_SHARD_E_ARG, "bad shard prefix '%s'", prefix);
    memcpy(w->prefix, prefix, len + 1);
    return 0;
}

/* ---- the output directory ------------------------------------------------
 *
 * One writer at a time per directory: two conversions into one directory
 * would write the same temporary names and publish a mix. The writer holds
 * an flock on DIR/LOCK_NAME from create to finish or abort; the kernel drops
 * it when the process dies (kill -9 included), so a stale lock file never
 * blocks. The file holds the owner's pid, for the second writer's message.
 * It is unlinked before it is unlocked, so a writer that locked an inode
 * that has since been unlinked sees that and retries with the new file.
 *
 * Under the lock the directory must be empty but for files the writer
 * itself names: ".NAME.tmp" for a shard ("PREFIX-NNNNN.lfs", any prefix) or
 * the manifest. Those are an earlier, killed conversion's and are removed;
 * anything else is the user's, and the writer refuses the directory rather
 * than write beside (or over) it.
 */

/* Whether `name` is a temporary name the writer gives its files. */
static bool is_writer_temp(const char *name)
{
    size_t len = strlen(name);
    static const char shard_tail[] = ".lfs.tmp", manifest_temp[] = "." LF_MANIFEST_NAME ".tmp";
    if (strcmp(name, manifest_temp) == 0) return true;
    size_t tail = sizeof shard_tail - 1;
    if (name[0] != '.' || len < tail + 7 || strcmp(name + len - tail, shard_tail) != 0)
        return false;
    size_t digits = 0;   /* "-NNNNN" (five or more digits) before the tail */
    while (digits < len - tail - 2 && name[len - tail - 1 - digits] >= '0' &&
           name[len - tail - 1 - digits] <= '9')
        digits++;
    return digits >= 5 && name[len - tail - 1 - digits] == '-';
}

static int lock_path(const char *dir, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/%s", dir, LOCK_NAME);
    return n < 0 || (size_t)n >= cap ? LF_SHARD_E_ARG : 0;
}

/* The pid in a lock file held by another writer (0 if it has none yet). */
static long lock_owner(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = '\0';
    return strtol(buf, NULL, 10);
}

/* Takes the directory's lock into w->lock_fd. */
static int take_lock(lf_writer *w, lf_shard_error *err)
{
    char path[PATH_MAX];
    if (lock_path(w->dir, path, sizeof path) != 0)
        return shard_fail(err, LF_SHARD_E_ARG, "%s: path too long", w->dir);
    for (;;) {
        int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) return shard_fail(err, LF_SHARD_E_IO, "%s: %s", path, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            long pid = e == EWOULDBLOCK ? lock_owner(fd) : 0;
            close(fd);
            if (e != EWOULDBLOCK)
                return shard_fail(err, LF_SHARD_E_IO, "%s: %s", path, strerror(e));
            char who[48] = "";
            if (pid > 0) snprintf(who, sizeof who, " (pid %ld)", pid);
            return shard_fail(err, LF_SHARD_E_ARG, "%s: another conversion%s is writing "
                              "into this directory (it holds %s); wait for it to end, or "
                              "give another output directory", w->dir, who, LOCK_NAME);
        }
        struct stat held, named;
        bool gone = false;   /* the name no longer exists: retry, else fail */
        if (fstat(fd, &held) != 0 || (stat(path, &named) != 0 && !(gone = errno == ENOENT))) {
            int e = errno;
            close(fd);
            return shard_fail(err, LF_SHARD_E_IO, "%s: %s", path, strerror(e));
        }
        if (!gone && held.st_ino == named.st_ino && held.st_dev == named.st_dev) {
            char pid[32];
            int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
            /* best effort: without it a second writer's message lacks the pid */
            if (ftruncate(fd, 0) == 0) write_all(fd, pid, (size_t)n, 0);
            w->lock_fd = fd;
            return 0;
        }
        close(fd);   /* unlinked (or replaced) by a writer that ended: retry */
    }
}

static void release_lock(lf_writer *w)
{
    char path[PATH_MAX];
    if (w->lock_fd < 0) return;
    if (lock_path(w->dir, path, sizeof path) == 0) unlink(path);
    close(w->lock_fd);
    w->lock_fd = -1;
}

/* Removes an earlier conversion's temporary file `name` if it is a regular
 * file (one of another kind is left: writing over it fails, naming it). */
static void remove_stale(lf_writer *w, int dfd, const char *name)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return;
    if (unlinkat(dfd, name, 0) != 0) return;
    w->stale_files++;
    w->stale_bytes += (uint64_t)st.st_size;
}

/* With the lock held: removes stale temporaries, refuses any other file. */
static int check_dir_contents(lf_writer *w, lf_shard_error *err)
{
    DIR *d = opendir(w->dir);
    if (!d) return shard_fail(err, LF_SHARD_E_IO, "%s: %s", w->dir, strerror(errno));
    if (faccessat(dirfd(d), LF_MANIFEST_NAME, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
        closedir(d);
        return shard_fail(err, LF_SHARD_E_ARG, "%s: already holds a dataset", w->dir);
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (errno = 0, e = readdir(d))) {
        const char *n = e->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, LOCK_NAME)) continue;
        if (is_writer_temp(n)) remove_stale(w, dirfd(d), n);
        else
            rc = shard_fail(err, LF_SHARD_E_ARG, "%s: not empty and not a levelfeed dataset "
                            "(it holds '%s'); the writer does not write beside files it did "
                            "not make: give a new or empty directory", w->dir, n);
    }
    if (rc == 0 && errno != 0)
        rc = shard_fail(err, LF_SHARD_E_IO, "%s: %s", w->dir, strerror(errno));
    closedir(d);
    return rc;
}

static int prepare_dir(lf_writer *w, lf_shard_error *err)
{
    if (mkdir(w->dir, 0777) != 0 && errno != EEXIST)
        return shard_fail(err, LF_SHARD_E_IO, "%s: %s", w->dir, strerror(errno));
    int rc = take_lock(w, err);
    return rc != 0 ? rc : check_dir_contents(w, err);
}

uint32_t lf_writer_stale_removed(const lf_writer *w, uint64_t *bytes)
{
    if (bytes) *bytes = w ? w->stale_bytes : 0;
    return w ? w->stale_files : 0;
}

static void writer_free(lf_writer *w)
{
    if (w->nthreads) pool_stop(w);
    release_lock(w);
    for (uint32_t i = 0; w->slots && i < w->nslots; i++) {
        free(w->slots[i].raw);
        free(w->slots[i].samples);
        free(w->slots[i].stored);
    }
    free(w->slots);
    free(w->threads);
    free(w->blocks);
    free(w->samples);
    free(w->shards);
    pthread_cond_destroy(&w->done_cv);
    pthread_cond_destroy(&w->work_cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

int lf_writer_create(const char *dir, const lf_schema *schema,
                     const lf_writer_options *opts, lf_writer **out,
                     lf_shard_error *err)
{
    if (!dir || !out) return shard_fail(err, LF_SHARD_E_ARG, "writer: NULL argument");
    int rc = lf_schema_validate(schema, err);
    if (rc != 0) return rc;
    /* room for "/.NAME.tmp" after the directory */
    if (strlen(dir) + MANIFEST_NAME_MAX + 8 >= PATH_MAX)
        return shard_fail(err, LF_SHARD_E_ARG, "%s: path too long", dir);
    lf_writer *w = calloc(1, sizeof *w);
    if (!w) return shard_fail(err, LF_SHARD_E_NOMEM, "writer: out of memory");
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->work_cv, NULL);
    pthread_cond_init(&w->done_cv, NULL);
    w->fd = -1;
    w->lock_fd = -1;
    strcpy(w->dir, dir);
    w->schema = *schema;
    w->version = opts && opts->pieces ? 2 : lf_schema_version(schema);
    int threads = 0;
    rc = resolve_options(w, opts, &threads, err);
    if (rc == 0) rc = prepare_dir(w, err);
    if (rc == 0) {
        w->nslots = (uint32_t)threads * 2 + 2;
        w->slots = calloc(w->nslots, sizeof *w->slots);
        rc = w->slots ? pool_start(w, threads) : LF_SHARD_E_NOMEM;
        if (rc != 0) shard_fail(err, rc, "writer: cannot start %d threads", threads);
    }
    if (rc != 0) {
        writer_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

void lf_writer_set_progress(lf_writer *w, lf_writer_progress_fn fn, void *arg)
{
    if (!w) return;
    w->progress = fn;
    w->progress_arg = arg;
}

/* Checks the fields of one sample; *size gets the record's bytes. */
static int record_size(const lf_writer *w, const lf_field_input *fields, size_t *size,
                       lf_shard_error *err)
{
    uint64_t total = (uint64_t)w->schema.nfields * 4;
    for (uint32_t i = 0; i < w->schema.nfields; i++) {
        const lf_field_def *f = &w->schema.fields[i];
        size_t elem = lf_field_elem_size(f);
        if (fields[i].size % elem != 0 || (fields[i].size && !fields[i].data) ||
            (f->type == LF_FIELD_LABEL_I64 && fields[i].size != 8))
            return shard_fail(err, LF_SHARD_E_ARG,
                              "sample %" PRIu64 ": field '%s': %zu bytes is not a whole "
                              "number of %zu-byte elements", w->added, f->name,
                              fields[i].size, elem);
        if (fields[i].size > MAX_BLOCK_RAW)
            return shard_fail(err, LF_SHARD_E_ARG, "field '%s': %zu bytes is too large",
                              f->name, fields[i].size);
        total += fields[i].size;
    }
    const lf_field_def *cf = &w->schema.fields[w->schema.cost_field];
    size_t tokens = fields[w->schema.cost_field].size / lf_field_elem_size(cf);
    for (uint32_t i = 0; i < w->schema.nfields; i++) {
        const lf_field_def *f = &w->schema.fields[i];
        if (lf_field_is_per_token(f->type) && fields[i].size / lf_field_elem_size(f) != tokens)
            return shard_fail(err, LF_SHARD_E_ARG, "sample %" PRIu64 ": field '%s': %zu "
                              "values for %zu tokens (a per-token field has one a token)",
                              w->added, f->name, fields[i].size / lf_field_elem_size(f), tokens);
    }
    if (total > MAX_BLOCK_RAW)
        return shard_fail(err, LF_SHARD_E_ARG, "record of %" PRIu64 " bytes above %u",
                          total, MAX_BLOCK_RAW);
    *size = (size_t)total;
    return 0;
}

/* Appends the record to block b. */
static int append_record(lf_writer *w, wblock *b, const lf_field_input *fields, size_t size)
{
    uint64_t scap = b->samples_cap;
    if (grow_bytes(&b->raw, &b->raw_cap, b->raw_size + size) != 0 ||
        grow(&b->samples, &scap, b->nsamples + 1, sizeof *b->samples) != 0)
        return LF_SHARD_E_NOMEM;
    b->samples_cap = (uint32_t)scap;
    uint8_t *p = b->raw + b->raw_size;
    const lf_field_input *cost = &fields[w->schema.cost_field];
    b->samples[b->nsamples++] = (lf_sample_info){
        .offset = (uint32_t)b->raw_size, .size = (uint32_t)size,
        .length = record_cost_length(&w->schema, (uint32_t)cost->size, cost->width,
                                     cost->height),
        .width = w->schema.fields[w->schema.cost_field].type == LF_FIELD_JPEG ? cost->width : 0,
        .height = w->schema.fields[w->schema.cost_field].type == LF_FIELD_JPEG ? cost->height : 0,
    };
    for (uint32_t i = 0; i < w->schema.nfields; i++, p += 4) put_u32(p, (uint32_t)fields[i].size);
    for (uint32_t i = 0; i < w->schema.nfields; i++) {
        if (fields[i].size) memcpy(p, fields[i].data, fields[i].size);
        p += fields[i].size;
    }
    b->raw_size += size;
    w->filling = true;
    return 0;
}

int64_t lf_writer_add(lf_writer *w, const lf_field_input *fields, lf_shard_error *err)
{
    return lf_writer_add_piece(w, fields, 0, err);
}

int64_t lf_writer_add_piece(lf_writer *w, const lf_field_input *fields, uint32_t doc_offset,
                            lf_shard_error *err)
{
    if (!w || !fields) return shard_fail(err, LF_SHARD_E_ARG, "writer: NULL argument");
    if (w->failed) return writer_fail(w, err, w->failed, "%s", "");
    if (doc_offset && (w->version < 2 || doc_offset != w->doc_end))
        return shard_fail(err, LF_SHARD_E_ARG, "sample %" PRIu64 ": a piece at token %u of "
                          "its document %s", w->added, doc_offset, w->version < 2
                          ? "needs lf_writer_options.pieces"
                          : "does not follow the piece before it");
    size_t size = 0;
    int rc = record_size(w, fields, &size, err);
    if (rc != 0) return rc;
    wblock *b = NULL;
    if (filling_slot(w, &b, err) != 0) return w->failed;
    if (b->nsamples > 0 && b->raw_size + size > w->block_bytes) {
        submit_block(w);
        if (filling_slot(w, &b, err) != 0) return w->failed;
    }
    if (append_record(w, b, fields, size) != 0)
        return writer_fail(w, err, LF_SHARD_E_NOMEM, "%s: out of memory", w->dir);
    b->samples[b->nsamples - 1].doc_offset = doc_offset;
    w->doc_end = doc_offset + b->samples[b->nsamples - 1].length;
    if (b->raw_size >= w->block_bytes) submit_block(w);
    return (int64_t)w->added++;
}

/* Writes the manifest under its temporary name and syncs it. */
static int write_manifest_temp(lf_writer *w, const char *path, lf_shard_error *err)
{
    manifest m = {
        .nshards = w->nshards, .samples = w->stats.samples, .blocks = w->stats.blocks,
        .raw_bytes = w->raw_total, .stored_bytes = w->stats.stored_bytes,
        .schema = w->schema, .shards = w->shards, .version = w->version,
    };
    size_t size = manifest_size(m.nshards);
    uint8_t *buf = malloc(size);
    if (!buf) return writer_fail(w, err, LF_SHARD_E_NOMEM, "%s: out of memory", w->dir);
    manifest_encode(&m, buf);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd < 0 ? -errno : write_all(fd, buf, size, 0);
    if (rc == 0 && fsync(fd) != 0) rc = -errno;
    if (fd >= 0 && close(fd) != 0 && rc == 0) rc = -errno;
    free(buf);
    if (rc != 0) return writer_fail(w, err, LF_SHARD_E_IO, "%s: %s", path, strerror(-rc));
    return 0;
}

/* The manifest is written first (the likeliest write to fail, on a full
 * disk), then the shards and the manifest take their final names. A failure
 * takes back the shards already renamed: no final name is left behind. */
static int publish(lf_writer *w, lf_shard_error *err)
{
    char from[PATH_MAX], to[PATH_MAX], mtmp[PATH_MAX];
    file_path(w, LF_MANIFEST_NAME, true, mtmp, sizeof mtmp);
    if (write_manifest_temp(w, mtmp, err) != 0) {
        unlink(mtmp);
        return w->failed;
    }
    uint32_t renamed = 0;
    int rc = 0;
    while (rc == 0 && renamed < w->nshards) {
        file_path(w, w->shards[renamed].name, true, from, sizeof from);
        file_path(w, w->shards[renamed].name, false, to, sizeof to);
        if (rename(from, to) != 0) rc = -errno;
        else renamed++;
    }
    if (rc == 0) {
        file_path(w, LF_MANIFEST_NAME, false, to, sizeof to);
        if (rename(mtmp, to) != 0) rc = -errno;
    }
    if (rc != 0) {
        writer_fail(w, err, LF_SHARD_E_IO, "%s: %s", to, strerror(-rc));
        unlink(mtmp);
        for (uint32_t i = 0; i < renamed; i++) {
            file_path(w, w->shards[i].name, false, to, sizeof to);
            unlink(to);
        }
        return w->failed;
    }
    int dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);   /* best effort: the rename is already visible */
        close(dfd);
    }
    return 0;
}

/* Removes every temporary file the writer made (the open shard's too). */
static void remove_temps(lf_writer *w)
{
    char name[MANIFEST_NAME_MAX], path[PATH_MAX];
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
        w->nshards++;   /* so the loop below removes it */
    }
    for (uint32_t i = 0; i < w->nshards; i++) {
        shard_file_name(w, i, name, sizeof name);
        file_path(w, name, true, path, sizeof path);
        unlink(path);
    }
}

int lf_writer_finish(lf_writer *w, lf_writer_stats *stats, lf_shard_error *err)
{
    if (!w) return shard_fail(err, LF_SHARD_E_ARG, "writer: NULL argument");
    if (!w->failed && w->filling) submit_block(w);
    while (!w->failed && w->seq_written < w->seq_submit) write_oldest(w, err);
    if (!w->failed && w->fd >= 0) close_shard(w, err);
    if (!w->failed) publish(w, err);
    int rc = w->failed;
    if (rc != 0) {
        if (err) *err = w->first_err;
        remove_temps(w);
    } else if (stats) {
        *stats = w->stats;
    }
    writer_free(w);
    return rc;
}

void lf_writer_abort(lf_writer *w)
{
    if (!w) return;
    pool_stop(w);   /* no worker touches a slot after this */
    remove_temps(w);
    writer_free(w);
}
