/*
 * reader.c — opens a dataset from its manifest and shard indexes, and gives
 * the server what it needs per block: the stored bytes, a verified
 * decompression, and the fields of each sample.
 *
 * Trust nothing from the disk. Every region is checked before it is used
 * and in an order where each check stands on checked ground:
 *   manifest checksum -> shard file size == manifest's -> footer self hash
 *   == manifest's shard hash -> header hash (in the footer) -> index hash
 *   (in the footer) -> every index entry against the header's counts, the
 *   file's size and its neighbours -> (per read) block hash (in the index)
 *   before zstd sees a byte -> (per record) the field-size table against
 *   the record's size and the index's cost length.
 * The checksums catch corruption; the bounds checks make a file that passes
 * them (a forged or buggy one, or the fuzzer with checksums off) unable to
 * push an offset outside a buffer. Arithmetic on values from the file is done
 * in u64 after range checks that rule out overflow.
 *
 * Index checks are strict: blocks tile the data region exactly, records
 * tile each block exactly, so every byte between header and index belongs
 * to exactly one block and every decompressed byte to exactly one record.
 *
 * Opened mapped (no per-sample table), the open reads each shard's block
 * entries only, and the shard's whole index is checked as above the first
 * time one of its blocks is decoded (shard_index_ready), before its
 * checksum is trusted: so the open reads 32 bytes a block, not a sample.
 *
 * After open the dataset is immutable but for that check's result, a flag
 * a shard set under a lock (one of INDEX_LOCKS), so any number of threads
 * may read it; a decoder holds the per-thread zstd state and no call
 * allocates per block (a shard's first check allocates its 64 KiB buffer).
 */
#include "shard_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* What the open keeps of a shard's checked header and footer, so that a
 * dataset read without a per-sample table (lf_dataset_open_mapped) checks
 * the shard's index the first time one of its blocks is decoded
 * (shard_index_ready), not at open. */
typedef struct shard_index_ref {
    uint32_t version;
    uint32_t source;             /* its directory (ds->sources) */
    uint64_t nsamples, nblocks, index_offset, index_size, raw_bytes, index_hash;
    uint64_t first_sample;       /* dataset-wide id of its sample 0 */
    uint64_t piece_end;          /* once checked: its last sample's doc_offset + length */
    int checked;                 /* 1 once the whole index has passed (atomic access) */
} shard_index_ref;

typedef struct ds_shard {
    char *path;                  /* absolute path, or "<memory>" */
    int fd;                      /* -1 for a shard held in memory */
    const uint8_t *mem;          /* the shard's bytes when fd < 0 */
    uint64_t size;               /* file bytes */
    uint64_t first_block;        /* dataset-wide id of its block 0 */
    shard_index_ref ix;
} ds_shard;

/* Shard i's lazy index check runs under lock i % INDEX_LOCKS, so readers
 * reaching different shards check them at once. */
#define INDEX_LOCKS 64

/* One directory of a dataset opened from several (lf_dataset_open_many). */
typedef struct ds_source {
    char *dir;                   /* as the caller gave it, for messages and reports */
    uint64_t first_sample;       /* dataset-wide id of its sample 0 */
    compact_index compact;       /* its index.lfx mapped, when the dataset holds no
                                    per-sample table (samples NULL) */
} ds_source;

struct lf_dataset {
    lf_schema schema;
    ds_shard *shards;
    uint32_t nshards;
    lf_block_info *blocks;
    uint64_t nblocks, blocks_cap;
    lf_sample_info *samples;     /* NULL when the lengths are read from index.lfx */
    uint64_t nsamples, samples_cap;
    uint32_t max_raw, max_stored;
    bool skip_checksums;         /* fuzzing only (SHARD_OPEN_SKIP_CHECKSUMS) */
    bool index_only;             /* an index without bytes: every read refused */
    bool from_compact;           /* a real dataset opened from index.lfx alone */
    uint64_t piece_end;          /* while opening: the sample before's doc_offset + length */
    uint64_t manifest_hash;      /* the manifest's checksum (lf_dataset_open) */
    ds_source *sources;          /* one for a single directory, else one a directory */
    uint32_t nsources;
    pthread_mutex_t *index_locks; /* INDEX_LOCKS, when shard indexes are checked lazily
                                    (mapped; NULL otherwise: all checked at open) */
};

struct lf_block_decoder {
    ZSTD_DCtx *dctx;
};

/* What the caller knows of a shard before reading it (from the manifest). */
typedef struct shard_expect {
    bool have_manifest;          /* false: a lone shard, take its header's word */
    uint32_t shard_no;
    uint32_t version;            /* the manifest's */
    uint64_t first_sample;
    const manifest_shard *entry;
} shard_expect;

/* ---- raw access ---------------------------------------------------------- */

/* Reads size bytes at off; a short read means the file is shorter than its
 * metadata says. */
static int shard_read(const ds_shard *sh, uint64_t off, void *dst, size_t size,
                      lf_shard_error *err)
{
    if (off > sh->size || size > sh->size - off)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: %zu bytes at %" PRIu64
                          " lie past the end (%" PRIu64 " bytes)", sh->path, size, off, sh->size);
    if (sh->fd < 0) {
        memcpy(dst, sh->mem + off, size);
        return 0;
    }
    uint8_t *p = dst;
    while (size > 0) {
        ssize_t n = pread(sh->fd, p, size, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return shard_fail(err, LF_SHARD_E_IO, "%s: %s", sh->path, strerror(errno));
        if (n == 0)
            return shard_fail(err, LF_SHARD_E_FORMAT, "%s: truncated at %" PRIu64, sh->path, off);
        p += n;
        size -= (size_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

/* ---- shard metadata ------------------------------------------------------ */

/* Reads and checks footer and header; fills *h. */
static int read_meta(const lf_dataset *ds, const ds_shard *sh, const shard_expect *ex,
                     shard_header *h, shard_footer *footer, lf_shard_error *err)
{
    uint8_t fbuf[FOOTER_SIZE];
    const char *why = "";
    if (sh->size < HEADER_SIZE + FOOTER_SIZE)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: %" PRIu64 " bytes is too small",
                          sh->path, sh->size);
    int rc = shard_read(sh, sh->size - FOOTER_SIZE, fbuf, FOOTER_SIZE, err);
    if (rc != 0) return rc;
    shard_footer f;
    rc = footer_decode(fbuf, ds->skip_checksums, &f, &why);
    if (rc != 0) return shard_fail(err, rc, "%s: footer: %s", sh->path, why);
    if (ex->have_manifest && f.self_hash != ex->entry->footer_hash)
        return shard_fail(err, LF_SHARD_E_CHECKSUM, "%s: footer: hash differs from the manifest's",
                          sh->path);
    if (f.file_size != sh->size || f.index_offset < HEADER_SIZE ||
        f.index_offset % LF_SHARD_ALIGN != 0 || f.index_offset > sh->size - FOOTER_SIZE ||
        f.index_size != sh->size - FOOTER_SIZE - f.index_offset)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: footer: sizes do not match the file",
                          sh->path);
    uint8_t *hbuf = malloc(HEADER_SIZE);
    if (!hbuf) return shard_fail(err, LF_SHARD_E_NOMEM, "%s: out of memory", sh->path);
    rc = shard_read(sh, 0, hbuf, HEADER_SIZE, err);
    if (rc == 0 && !ds->skip_checksums && shard_hash(hbuf, HEADER_SIZE) != f.header_hash)
        rc = shard_fail(err, LF_SHARD_E_CHECKSUM, "%s: header: checksum mismatch", sh->path);
    if (rc == 0 && (rc = header_decode(hbuf, h, &why)) != 0)
        shard_fail(err, rc, "%s: header: %s", sh->path, why);
    free(hbuf);
    if (rc != 0) return rc;
    if (h->version != f.version)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: footer version %u, header version %u",
                          sh->path, f.version, h->version);
    if (h->index_offset != f.index_offset || h->index_size != f.index_size || h->nblocks == 0 ||
        h->nsamples > UINT32_MAX ||
        h->nblocks > h->index_size / BLOCK_ENTRY_SIZE ||
        h->nsamples > h->index_size / SAMPLE_ENTRY_SIZE ||
        h->nblocks * BLOCK_ENTRY_SIZE + h->nsamples * SAMPLE_ENTRY_SIZE != h->index_size)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: header: counts do not match the index",
                          sh->path);
    if (ex->have_manifest &&
        (h->version != ex->version || h->shard_no != ex->shard_no ||
         h->first_sample != ex->first_sample ||
         h->nsamples != ex->entry->samples || h->nblocks != ex->entry->blocks ||
         memcmp(&h->schema, &ds->schema, sizeof h->schema) != 0))
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: header does not match the manifest",
                          sh->path);
    *footer = f;
    return 0;
}

/* Checks a block entry against its place in the shard. */
static int check_block(const ds_shard *sh, const shard_header *h, uint64_t j,
                       const shard_block_entry *b, uint64_t want_off, uint64_t want_first,
                       lf_shard_error *err)
{
    if (b->file_offset != want_off || b->stored_size == 0 ||
        b->stored_size % LF_SHARD_ALIGN != 0 || b->stored_size > MAX_BLOCK_STORED ||
        b->stored_size > h->index_offset - want_off)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: block %" PRIu64 ": bad place or size",
                          sh->path, j);
    if (b->raw_size == 0 || b->raw_size > MAX_BLOCK_RAW || b->first_sample != want_first ||
        b->nsamples == 0 || b->nsamples > h->nsamples - want_first)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: block %" PRIu64 ": bad sample range",
                          sh->path, j);
    return 0;
}

/* Checks a sample entry: its block, its place in the block (records tile
 * the block), and cost inputs that fit the record and the schema. */
static int check_sample(const lf_dataset *ds, const ds_shard *sh, uint64_t first,
                        uint64_t local, const lf_sample_info *s, uint64_t j, uint32_t want_off,
                        uint32_t raw_size, lf_shard_error *err)
{
    const lf_field_def *cf = &ds->schema.fields[ds->schema.cost_field];
    uint32_t table = ds->schema.nfields * 4;
    if (s->block != j || s->offset != want_off || s->size < table ||
        s->size > raw_size - want_off)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: block %" PRIu64 ": sample %" PRIu64
                          " (dataset sample %" PRIu64 "): bad place in block", sh->path, j,
                          local, first + local);
    bool ok;
    if (cf->type == LF_FIELD_JPEG)
        ok = s->length == (uint64_t)s->width * s->height;
    else if (cf->type == LF_FIELD_LABEL_I64)
        ok = s->length == 1 && s->width == 0 && s->height == 0;
    else
        ok = s->width == 0 && s->height == 0 &&
             s->length <= (s->size - table) / lf_field_elem_size(cf);
    if (!ok)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: block %" PRIu64 ": sample %" PRIu64
                          " (dataset sample %" PRIu64 "): cost inputs do not fit the record",
                          sh->path, j, local, first + local);
    return 0;
}

/* ---- a shard's index, read in pieces ------------------------------------ */

/* The index passes through a buffer of this many bytes (a multiple of the
 * entry size), hashed as it passes, so opening never holds a shard's index
 * whole: 32 bytes a sample of it would be the largest thing in memory.
 * Under glibc's mmap threshold (128 KiB): a freed mapping of 1 MiB raised
 * the threshold and left lf-server 0.8 MB larger on a small dataset
 * (ds-8192), and the reads it saves are negligible (10^7 samples: 0.30 s
 * CPU to open either way). */
#define INDEX_CHUNK (64u << 10)
_Static_assert(BLOCK_ENTRY_SIZE == SAMPLE_ENTRY_SIZE && INDEX_CHUNK % SAMPLE_ENTRY_SIZE == 0,
               "index entries are read one size at a time");

typedef struct index_stream {
    const ds_shard *sh;
    uint64_t at, end;            /* file offsets: the next byte to read, the index's end */
    uint8_t *buf;                /* INDEX_CHUNK bytes */
    size_t len, pos;             /* bytes in buf, the next entry's place in it */
    bool hashing;                /* false when fuzzing without checksums */
    XXH3_state_t hash;
} index_stream;

static int stream_fill(index_stream *st, lf_shard_error *err)
{
    uint64_t left = st->end - st->at;
    size_t n = left < INDEX_CHUNK ? (size_t)left : INDEX_CHUNK;
    int rc = shard_read(st->sh, st->at, st->buf, n, err);
    if (rc != 0) return rc;
    if (st->hashing) XXH3_64bits_update(&st->hash, st->buf, n);
    st->at += n;
    st->len = n;
    st->pos = 0;
    return 0;
}

/* A stream over [at, end) of sh's index; -1 when out of memory. */
static int stream_begin(index_stream *st, const ds_shard *sh, uint64_t at, uint64_t end,
                        bool hashing)
{
    *st = (index_stream){.sh = sh, .at = at, .end = end, .hashing = hashing,
                         .buf = malloc(INDEX_CHUNK)};
    if (!st->buf) return -1;
    if (hashing) XXH3_64bits_reset(&st->hash);
    return 0;
}

/* *e = the next entry; the header's counts make the entries fill the
 * index exactly, so there is always one more when asked. */
static int stream_next(index_stream *st, const uint8_t **e, lf_shard_error *err)
{
    if (st->pos == st->len) {
        int rc = stream_fill(st, err);
        if (rc != 0) return rc;
    }
    *e = st->buf + st->pos;
    st->pos += SAMPLE_ENTRY_SIZE;
    return 0;
}

/* Hashes what is left of the index and compares the hash: a mismatch is
 * what is reported even where an entry failed its checks first (the
 * bytes are damaged, not wrongly written), as when the whole index was
 * hashed before any entry was looked at. Returns rc otherwise. */
static int stream_finish(index_stream *st, uint64_t want, int rc, lf_shard_error *err)
{
    if (!st->hashing) return rc;
    lf_shard_error read_err;
    while (st->at < st->end)
        if (stream_fill(st, &read_err) != 0) return rc != 0 ? rc : shard_fail(err, read_err.status,
                                                                              "%s", read_err.msg);
    if (XXH3_64bits_digest(&st->hash) != want)
        return shard_fail(err, LF_SHARD_E_CHECKSUM, "%s: index: checksum mismatch", st->sh->path);
    return rc;
}

/* Source 0's index.lfx, where its entry for dataset block b (given here
 * as the shard index has it) is compared. */
static int compare_compact_block(const lf_dataset *ds, uint64_t b, const shard_block_entry *e,
                                 lf_shard_error *err)
{
    const uint8_t *c = ds->sources[0].compact.block_table + b * COMPACT_BLOCK_ENTRY;
    if (get_u32(c) == e->nsamples && get_u32(c + 4) == e->raw_size) return 0;
    return shard_fail(err, LF_SHARD_E_FORMAT, "%s/%s: block %" PRIu64 " differs from the shard "
                      "index: run `lf-shard index DIR` to write it again", ds->sources[0].dir,
                      LF_INDEX_NAME, b);
}

/* Reads and checks shard `no`'s block entries into ds's block table. */
static int parse_blocks(lf_dataset *ds, uint32_t no, const shard_header *h, index_stream *st,
                        lf_shard_error *err)
{
    const ds_shard *sh = &ds->shards[no];
    uint64_t off = HEADER_SIZE, first = 0, raw_total = 0;
    for (uint64_t j = 0; j < h->nblocks; j++) {
        const uint8_t *e;
        shard_block_entry b;
        int rc = stream_next(st, &e, err);
        if (rc != 0) return rc;
        block_entry_decode(e, &b);
        rc = check_block(sh, h, j, &b, off, first, err);
        if (rc == 0 && !ds->samples) rc = compare_compact_block(ds, ds->nblocks + j, &b, err);
        if (rc != 0) return rc;
        ds->blocks[ds->nblocks + j] = (lf_block_info){
            .file_offset = b.file_offset, .stored_size = b.stored_size,
            .raw_size = b.raw_size, .checksum = b.checksum,
            .first_sample = ds->nsamples + first, .nsamples = b.nsamples, .shard = no,
        };
        if (b.raw_size > ds->max_raw) ds->max_raw = b.raw_size;
        if (b.stored_size > ds->max_stored) ds->max_stored = b.stored_size;
        off += b.stored_size;
        first += b.nsamples;
        raw_total += b.raw_size;
    }
    if (off != h->index_offset || first != h->nsamples || raw_total != h->raw_bytes)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: blocks do not fill the data region",
                          sh->path);
    return 0;
}

/* A shard's sample entries being checked: where they sit in the dataset
 * and, read without a per-sample table, the index.lfx they are compared
 * with (their source's). */
typedef struct sample_walk {
    const lf_dataset *ds;
    uint32_t no;
    const shard_header *h;
    const lf_block_info *blocks; /* ds's entry for the shard's block 0 */
    uint64_t first;              /* dataset-wide id of its sample 0 */
    const ds_source *src;        /* its source: lengths compared with src->compact when
                                    table is NULL */
    lf_sample_info *table;       /* the per-sample table's entry for its sample 0, or NULL */
    uint64_t piece_end;          /* the sample before's doc_offset + length */
} sample_walk;

/* Sample `local` of the shard (entry s): a piece of a document
 * (doc_offset > 0) follows the piece before it, across shards too, but
 * not across directories; and, read without a table, its length is what
 * index.lfx says. */
static int check_in_dataset(sample_walk *w, uint64_t local, const lf_sample_info *s,
                            lf_shard_error *err)
{
    const char *path = w->ds->shards[w->no].path;
    uint64_t i = w->first + local, in_src = i - w->src->first_sample;
    if (s->doc_offset && (in_src == 0 || w->piece_end != s->doc_offset))
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: sample %" PRIu64 ": a piece at token %u "
                          "of its document does not follow the piece before it", path, i,
                          s->doc_offset);
    w->piece_end = s->doc_offset + s->length;
    if (w->table || compact_length(&w->src->compact, in_src) == s->length) return 0;
    return shard_fail(err, LF_SHARD_E_FORMAT, "%s/%s: sample %" PRIu64 ": length %u, the shard "
                      "index (%s) says %" PRIu64 ": run `lf-shard index DIR` to write it again",
                      w->src->dir, LF_INDEX_NAME, in_src, compact_length(&w->src->compact, in_src),
                      path, s->length);
}

/* Reads and checks the shard's sample entries, block by block (records
 * tile each block), into the per-sample table or, without one, only
 * checks them. */
static int parse_samples(sample_walk *w, index_stream *st, lf_shard_error *err)
{
    const ds_shard *sh = &w->ds->shards[w->no];
    uint64_t local = 0;
    for (uint64_t j = 0; j < w->h->nblocks; j++) {
        const lf_block_info *b = &w->blocks[j];
        uint32_t in_block = 0;
        for (uint32_t k = 0; k < b->nsamples; k++, local++) {
            lf_sample_info one, *s = w->table ? &w->table[local] : &one;
            const uint8_t *e;
            int rc = stream_next(st, &e, err);
            if (rc != 0) return rc;
            if (sample_entry_decode(e, w->h->version, s) != 0)
                return shard_fail(err, LF_SHARD_E_FORMAT, "%s: sample %" PRIu64 " (dataset "
                                  "sample %" PRIu64 "): reserved bytes not zero", sh->path,
                                  local, w->first + local);
            rc = check_sample(w->ds, sh, w->first, local, s, j, in_block, b->raw_size, err);
            if (rc == 0) rc = check_in_dataset(w, local, s, err);
            if (rc != 0) return rc;
            s->shard = w->no;
            in_block += s->size;
        }
        if (in_block != b->raw_size)
            return shard_fail(err, LF_SHARD_E_FORMAT, "%s: block %" PRIu64
                              ": records do not fill the block", sh->path, j);
    }
    return 0;
}

/* A block entry refused at a mapped open, which reads the block entries
 * unhashed: where the whole index's hash differs, the damage is what is
 * reported (as a whole read reports it), not a disagreement with
 * index.lfx that `lf-shard index` would not mend. */
static int damaged_or(const ds_shard *sh, const shard_header *h, uint64_t want, int rc,
                      lf_shard_error *err)
{
    index_stream st;
    if (stream_begin(&st, sh, h->index_offset, h->index_offset + h->index_size, true)) return rc;
    rc = stream_finish(&st, want, rc, err);
    free(st.buf);
    return rc;
}

/* Reads the index of a shard whose header is checked, in pieces: its
 * blocks into ds's block table and, with a per-sample table, its samples
 * into it, the whole index hashed. Without one (mapped) only the block
 * entries are read here, each compared with index.lfx: the samples and
 * the hash are checked before any of the shard's blocks is decoded
 * (shard_index_ready), so opening reads 32 bytes a block, not a sample. */
static int read_index(lf_dataset *ds, uint32_t no, const shard_header *h, uint64_t index_hash,
                      lf_shard_error *err)
{
    ds_shard *sh = &ds->shards[no];
    if (h->nblocks > ds->blocks_cap - ds->nblocks || h->nsamples > ds->samples_cap - ds->nsamples)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: more samples than the manifest lists",
                          sh->path);
    bool whole = ds->samples != NULL;
    index_stream st;
    if (stream_begin(&st, sh, h->index_offset,
                     h->index_offset + (whole ? h->index_size : h->nblocks * BLOCK_ENTRY_SIZE),
                     whole && !ds->skip_checksums))
        return shard_fail(err, LF_SHARD_E_NOMEM, "%s: out of memory", sh->path);
    sh->first_block = ds->nblocks;
    sh->ix = (shard_index_ref){.version = h->version, .nsamples = h->nsamples,
                               .nblocks = h->nblocks, .index_offset = h->index_offset,
                               .index_size = h->index_size, .raw_bytes = h->raw_bytes,
                               .index_hash = index_hash, .first_sample = ds->nsamples,
                               .checked = whole};
    int rc = parse_blocks(ds, no, h, &st, err);
    if (rc != 0 && !whole && !ds->skip_checksums) rc = damaged_or(sh, h, index_hash, rc, err);
    sample_walk w = {.ds = ds, .no = no, .h = h, .blocks = &ds->blocks[ds->nblocks],
                     .first = ds->nsamples, .src = &ds->sources[0],
                     .table = whole ? ds->samples + ds->nsamples : NULL,
                     .piece_end = ds->piece_end};
    if (rc == 0 && whole) rc = parse_samples(&w, &st, err);
    rc = stream_finish(&st, index_hash, rc, err);
    free(st.buf);
    if (rc != 0) return rc;
    ds->piece_end = w.piece_end;
    ds->nblocks += h->nblocks;
    ds->nsamples += h->nsamples;
    return 0;
}

/* ---- a shard's index, checked on first use (mapped) --------------------- */

/* Whether shard no's first sample is a piece of a document begun in the
 * shard before (its doc_offset, read unchecked: it only orders the
 * checks, and the check reads it again under the hash). */
static bool starts_with_piece(const lf_dataset *ds, uint32_t no)
{
    const ds_shard *sh = &ds->shards[no];
    uint8_t e[SAMPLE_ENTRY_SIZE];
    lf_sample_info s;
    if (sh->ix.version < 2 ||
        shard_read(sh, sh->ix.index_offset + sh->ix.nblocks * BLOCK_ENTRY_SIZE, e, sizeof e,
                   NULL) != 0 ||
        sample_entry_decode(e, sh->ix.version, &s) != 0)
        return false;
    return s.doc_offset != 0;
}

/* Shard no's block entries, read again under the index hash, are the ones
 * the open kept (and compared with index.lfx then). */
static int same_blocks(const lf_dataset *ds, uint32_t no, index_stream *st, lf_shard_error *err)
{
    const ds_shard *sh = &ds->shards[no];
    for (uint64_t j = 0; j < sh->ix.nblocks; j++) {
        const uint8_t *e;
        shard_block_entry b;
        int rc = stream_next(st, &e, err);
        if (rc != 0) return rc;
        block_entry_decode(e, &b);
        const lf_block_info *k = &ds->blocks[sh->first_block + j];
        if (b.file_offset != k->file_offset || b.stored_size != k->stored_size ||
            b.raw_size != k->raw_size || b.checksum != k->checksum || b.nsamples != k->nsamples)
            return shard_fail(err, LF_SHARD_E_FORMAT, "%s: block %" PRIu64 ": its index entry "
                              "changed after the dataset was opened", sh->path, j);
    }
    return 0;
}

/* Checks shard no's whole index as the open of a per-sample table does
 * (hash, every entry, each sample's length against index.lfx, pieces
 * following pieces), its blocks against those kept at open. The caller
 * holds its lock; the shard before is checked first where a piece
 * crosses into this one. */
static int check_index(const lf_dataset *ds, uint32_t no, lf_shard_error *err)
{
    ds_shard *sh = &ds->shards[no];
    const ds_source *src = &ds->sources[sh->ix.source];
    bool first_of_src = sh->ix.first_sample == src->first_sample;
    shard_header h = {.version = sh->ix.version, .nsamples = sh->ix.nsamples,
                      .nblocks = sh->ix.nblocks, .index_offset = sh->ix.index_offset,
                      .index_size = sh->ix.index_size, .raw_bytes = sh->ix.raw_bytes};
    sample_walk w = {.ds = ds, .no = no, .h = &h, .blocks = &ds->blocks[sh->first_block],
                     .first = sh->ix.first_sample, .src = src};
    if (!first_of_src)   /* not known unless checked: a piece starting this shard is refused */
        w.piece_end = __atomic_load_n(&ds->shards[no - 1].ix.checked, __ATOMIC_ACQUIRE)
                          ? ds->shards[no - 1].ix.piece_end : UINT64_MAX;
    index_stream st;
    if (stream_begin(&st, sh, h.index_offset, h.index_offset + h.index_size,
                     !ds->skip_checksums))
        return shard_fail(err, LF_SHARD_E_NOMEM, "%s: out of memory", sh->path);
    int rc = same_blocks(ds, no, &st, err);
    if (rc == 0) rc = parse_samples(&w, &st, err);
    rc = stream_finish(&st, sh->ix.index_hash, rc, err);
    free(st.buf);
    if (rc == 0) sh->ix.piece_end = w.piece_end;
    return rc;
}

/* 0 once shard no's index is checked (at once after the first time): a
 * dataset read without a per-sample table checks each shard's index here,
 * before the first of its blocks is decoded, so nothing is delivered from
 * a shard whose index is damaged or disagrees with index.lfx. Where the
 * shard starts with a piece of a document, the shards before it in the
 * same piece chain are checked first, from the earliest. */
static int shard_index_ready(const lf_dataset *ds, uint32_t no, lf_shard_error *err)
{
    if (__atomic_load_n(&ds->shards[no].ix.checked, __ATOMIC_ACQUIRE) || ds->index_only)
        return 0;   /* checked at open, or no bytes to hand out (refused where read) */
    if (!ds->index_locks)   /* a mapped open that did not make ready to check: never trusted */
        return shard_fail(err, LF_SHARD_E_ARG, "%s: its index was not checked (the dataset "
                          "was not opened by lf_dataset_open_mapped)", ds->shards[no].path);
    uint32_t from = no;
    while (from > 0 && ds->shards[from].ix.first_sample !=
                           ds->sources[ds->shards[from].ix.source].first_sample &&
           !__atomic_load_n(&ds->shards[from - 1].ix.checked, __ATOMIC_ACQUIRE) &&
           starts_with_piece(ds, from))
        from--;
    int rc = 0;
    for (uint32_t k = from; rc == 0 && k <= no; k++) {
        ds_shard *sh = &ds->shards[k];
        pthread_mutex_t *mu = &ds->index_locks[k % INDEX_LOCKS];
        pthread_mutex_lock(mu);
        if (!__atomic_load_n(&sh->ix.checked, __ATOMIC_ACQUIRE) &&
            (rc = check_index(ds, k, err)) == 0)
            __atomic_store_n(&sh->ix.checked, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(mu);
    }
    return rc;
}

/* Makes ds check its shard indexes on first use (a mapped dataset). */
static int lazy_indexes(lf_dataset *ds, lf_shard_error *err)
{
    if (ds->samples || ds->index_only || ds->index_locks) return 0;   /* or done */
    ds->index_locks = malloc(INDEX_LOCKS * sizeof *ds->index_locks);
    if (!ds->index_locks) return shard_fail(err, LF_SHARD_E_NOMEM, "out of memory");
    for (int i = 0; i < INDEX_LOCKS; i++) pthread_mutex_init(&ds->index_locks[i], NULL);
    return 0;
}

int lf_dataset_check_block_index(const lf_dataset *ds, uint64_t block, lf_shard_error *err)
{
    if (!ds || block >= ds->nblocks)
        return shard_fail(err, LF_SHARD_E_RANGE, "block %" PRIu64 " out of range", block);
    return shard_index_ready(ds, ds->blocks[block].shard, err);
}

int lf_dataset_check_indexes(const lf_dataset *ds, lf_shard_error *err)
{
    if (!ds) return shard_fail(err, LF_SHARD_E_ARG, "dataset: NULL argument");
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < ds->nshards; i++) rc = shard_index_ready(ds, i, err);
    return rc;
}

/* ---- dataset ------------------------------------------------------------ */

void lf_dataset_close(lf_dataset *ds)
{
    if (!ds) return;
    for (uint32_t i = 0; ds->shards && i < ds->nshards; i++) {
        if (ds->shards[i].fd >= 0) close(ds->shards[i].fd);
        free(ds->shards[i].path);
    }
    free(ds->shards);
    free(ds->blocks);
    free(ds->samples);
    for (uint32_t i = 0; ds->sources && i < ds->nsources; i++) {
        free(ds->sources[i].dir);
        compact_unmap(&ds->sources[i].compact);
    }
    free(ds->sources);
    for (int i = 0; ds->index_locks && i < INDEX_LOCKS; i++)
        pthread_mutex_destroy(&ds->index_locks[i]);
    free(ds->index_locks);
    free(ds);
}

/* A dataset of one directory (or one named pseudo-dataset) is its own only source. */
static int set_one_source(lf_dataset *ds, const char *name, lf_shard_error *err)
{
    ds->sources = calloc(1, sizeof *ds->sources);
    if (ds->sources && !(ds->sources[0].dir = strdup(name))) {
        free(ds->sources);
        ds->sources = NULL;
    }
    if (!ds->sources) return shard_fail(err, LF_SHARD_E_NOMEM, "%s: out of memory", name);
    ds->nsources = 1;
    return 0;
}

/* The block table, and the per-sample table unless the lengths are read
 * from index.lfx (table false: samples stays NULL). */
static int alloc_tables(lf_dataset *ds, uint64_t blocks, uint64_t samples, bool table,
                        lf_shard_error *err)
{
    if (blocks > SIZE_MAX / sizeof *ds->blocks || samples > SIZE_MAX / sizeof *ds->samples)
        return shard_fail(err, LF_SHARD_E_NOMEM, "index too large");
    ds->blocks = malloc(blocks ? (size_t)blocks * sizeof *ds->blocks : 1);
    if (table) ds->samples = malloc(samples ? (size_t)samples * sizeof *ds->samples : 1);
    if (!ds->blocks || (table && !ds->samples))
        return shard_fail(err, LF_SHARD_E_NOMEM, "out of memory");
    ds->blocks_cap = blocks;
    ds->samples_cap = samples;
    return 0;
}

/* What a non-regular file is, for messages. */
static const char *file_kind_name(mode_t mode)
{
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "an unknown kind of file";
}

/* Opens a dataset file for reading, refusing anything but a regular file:
 * a FIFO in a shard's place would block open() (and then every read)
 * forever, a device would be read as a shard. O_NONBLOCK makes open()
 * return at once whatever the file is; it is cleared once the file is known
 * to be regular, so the descriptor reads as any other (io_uring, say, does
 * not retry a read on an O_NONBLOCK file that would block). *fd is -1 on
 * failure, and the result is 0, -EMFILE (err unset: the caller names the
 * limit to raise) or a status. */
static int open_regular(const char *path, int *fd, struct stat *st, lf_shard_error *err)
{
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0 && errno == EMFILE) return -EMFILE;
    if (*fd < 0 || fstat(*fd, st) != 0 ||
        (S_ISREG(st->st_mode) && fcntl(*fd, F_SETFL, O_RDONLY) != 0)) {
        int rc = shard_fail(err, LF_SHARD_E_IO, "%s: %s", path, strerror(errno));
        if (*fd >= 0) close(*fd);
        *fd = -1;
        return rc;
    }
    if (!S_ISREG(st->st_mode)) {
        close(*fd);
        *fd = -1;
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: not a regular file (%s); a dataset "
                          "holds only regular files: put the real file back, or re-create "
                          "the dataset", path, file_kind_name(st->st_mode));
    }
    return 0;
}

/* Reads and checks dir's manifest; *hash gets its checksum. */
static int read_manifest(const char *dir, manifest *m, uint64_t *hash, lf_shard_error *err)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s", dir, LF_MANIFEST_NAME);
    if (n < 0 || (size_t)n >= sizeof path)
        return shard_fail(err, LF_SHARD_E_ARG, "%s: path too long", dir);
    ds_shard file = {.path = path};
    struct stat st;
    int rc = open_regular(path, &file.fd, &st, err);
    if (rc != 0) return rc;
    uint8_t *buf = NULL;
    if ((uint64_t)st.st_size > MAX_MANIFEST_BYTES)
        rc = shard_fail(err, LF_SHARD_E_FORMAT, "%s: %lld bytes is too large", path,
                        (long long)st.st_size);
    else if (!(buf = malloc((size_t)st.st_size + 1)))
        rc = shard_fail(err, LF_SHARD_E_NOMEM, "%s: out of memory", path);
    file.size = (uint64_t)st.st_size;
    if (rc == 0) rc = shard_read(&file, 0, buf, (size_t)file.size, err);
    if (rc == 0) rc = manifest_decode(buf, (size_t)file.size, false, path, m, err);
    if (rc == 0) *hash = get_u64(buf + file.size - 8);
    free(buf);
    close(file.fd);
    return rc;
}

/* Opens each shard file and checks its size against the manifest, so the
 * tables allocated from the manifest's counts are bounded by real files. */
static int open_files(lf_dataset *ds, const char *dir, const manifest *m, lf_shard_error *err)
{
    for (uint32_t i = 0; i < m->nshards; i++) {
        ds_shard *sh = &ds->shards[i];
        size_t len = strlen(dir) + strlen(m->shards[i].name) + 2;
        if (!(sh->path = malloc(len))) return shard_fail(err, LF_SHARD_E_NOMEM, "out of memory");
        snprintf(sh->path, len, "%s/%s", dir, m->shards[i].name);
        ds->nshards = i + 1;
        struct stat st;
        int rc = open_regular(sh->path, &sh->fd, &st, err);
        if (rc == -EMFILE)
            return shard_fail(err, LF_SHARD_E_IO, "%s: %s: the dataset has %u shards, each "
                              "held open; raise the open-file limit (ulimit -n)", sh->path,
                              strerror(EMFILE), m->nshards);
        if (rc != 0) return rc;
        sh->size = (uint64_t)st.st_size;
        if (sh->size != m->shards[i].file_size)
            return shard_fail(err, LF_SHARD_E_FORMAT, "%s: %" PRIu64 " bytes, manifest says %"
                              PRIu64, sh->path, sh->size, m->shards[i].file_size);
    }
    return 0;
}

/* An index.lfx whose counts are not the manifest's is stale. */
static int compact_counts(const compact_index *ci, const manifest *m, const char *path,
                          lf_shard_error *err)
{
    if (ci->blocks == m->blocks && ci->samples == m->samples) return 0;
    return shard_fail(err, LF_SHARD_E_FORMAT, "%s: its counts differ from the manifest's: run "
                      "`lf-shard index DIR` to write it again", path);
}

/* Opens m's shards in dir and reads their indexes; with lfx (the path of
 * the dataset's index.lfx, hash the manifest's checksum) the lengths are
 * read from it, mapped into source 0, and no per-sample table is made. */
static int open_with_manifest(lf_dataset *ds, const char *dir, const manifest *m,
                              const char *lfx, uint64_t hash, lf_shard_error *err)
{
    ds->schema = m->schema;
    ds->shards = calloc(m->nshards ? m->nshards : 1, sizeof *ds->shards);
    if (!ds->shards) return shard_fail(err, LF_SHARD_E_NOMEM, "out of memory");
    int rc = open_files(ds, dir, m, err);
    compact_index *ci = &ds->sources[0].compact;
    if (rc == 0 && lfx && (rc = compact_map(lfx, hash, ci, err)) == 0)
        rc = compact_counts(ci, m, lfx, err);
    if (rc == 0) rc = alloc_tables(ds, m->blocks, m->samples, !lfx, err);
    uint64_t raw = 0;
    for (uint32_t i = 0; rc == 0 && i < m->nshards; i++) {
        shard_expect ex = {.have_manifest = true, .shard_no = i, .version = m->version,
                           .first_sample = ds->nsamples, .entry = &m->shards[i]};
        shard_header h;
        shard_footer f;
        rc = read_meta(ds, &ds->shards[i], &ex, &h, &f, err);
        if (rc == 0) rc = read_index(ds, i, &h, f.index_hash, err);
        raw += h.raw_bytes;
    }
    if (rc == 0 && raw != m->raw_bytes)
        rc = shard_fail(err, LF_SHARD_E_FORMAT, "%s/%s: raw byte total does not match the shards",
                        dir, LF_MANIFEST_NAME);
    if (rc == 0) compact_release(ci);   /* its block entries, compared */
    return rc;
}

/* dir's index.lfx into path; 1 when it is there, 0 when not (a dataset
 * made before it), or a status (a path too long). */
static int index_path(const char *dir, char path[PATH_MAX], lf_shard_error *err)
{
    int n = snprintf(path, PATH_MAX, "%s/%s", dir, LF_INDEX_NAME);
    if (n < 0 || n >= PATH_MAX) return shard_fail(err, LF_SHARD_E_ARG, "%s: path too long", dir);
    return access(path, F_OK) == 0;
}

/* Hands ds to *out when rc is 0, else closes it; returns rc. */
static int finish_open(lf_dataset *ds, int rc, lf_dataset **out)
{
    if (rc != 0) lf_dataset_close(ds);
    else *out = ds;
    return rc;
}

/* How a directory is opened: its per-sample table built from the shard
 * indexes (lf_dataset_open); its lengths mapped from index.lfx and its
 * shard indexes read for the blocks (lf_dataset_open_mapped); or its
 * index.lfx alone, for planning (lf_dataset_open_lengths). Without
 * index.lfx the last two open as the first. */
typedef enum open_mode { OPEN_TABLE, OPEN_MAPPED, OPEN_LENGTHS } open_mode;

static int open_compact(lf_dataset *ds, const char *abs, const manifest *m, uint64_t hash,
                        const char *path, lf_shard_error *err);

static int open_dir(const char *dir, open_mode mode, lf_dataset **out, lf_shard_error *err)
{
    if (!dir || !out) return shard_fail(err, LF_SHARD_E_ARG, "dataset: NULL argument");
    char lfx[PATH_MAX];
    int has = mode != OPEN_TABLE ? index_path(dir, lfx, err) : 0;
    if (has < 0) return has;
    char *abs = realpath(dir, NULL);
    if (!abs) return shard_fail(err, LF_SHARD_E_IO, "%s: %s", dir, strerror(errno));
    manifest m;
    uint64_t hash = 0;
    int rc = read_manifest(abs, &m, &hash, err);
    if (rc != 0) {
        free(abs);
        return rc;
    }
    lf_dataset *ds = calloc(1, sizeof *ds);
    rc = ds ? set_one_source(ds, dir, err) : shard_fail(err, LF_SHARD_E_NOMEM, "out of memory");
    if (rc == 0 && has && mode == OPEN_LENGTHS) rc = open_compact(ds, abs, &m, hash, lfx, err);
    else if (rc == 0) rc = open_with_manifest(ds, abs, &m, has ? lfx : NULL, hash, err);
    if (rc == 0) ds->manifest_hash = hash;
    free(m.shards);
    free(abs);
    return ds ? finish_open(ds, rc, out) : rc;
}

int lf_dataset_open(const char *dir, lf_dataset **out, lf_shard_error *err)
{
    return open_dir(dir, OPEN_TABLE, out, err);
}

/* The lone shard of a memory dataset: its header is the schema's only source. */
static int open_lone_shard(lf_dataset *ds, lf_shard_error *err)
{
    shard_expect ex = {.have_manifest = false};
    shard_header h;
    shard_footer f;
    int rc = read_meta(ds, &ds->shards[0], &ex, &h, &f, err);
    if (rc != 0) return rc;
    ds->schema = h.schema;
    rc = alloc_tables(ds, h.nblocks, h.nsamples, true, err);
    return rc == 0 ? read_index(ds, 0, &h, f.index_hash, err) : rc;
}

int lf_dataset_open_memory(const void *data, size_t size, unsigned flags,
                           lf_dataset **out, lf_shard_error *err)
{
    lf_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return shard_fail(err, LF_SHARD_E_NOMEM, "out of memory");
    ds->skip_checksums = (flags & SHARD_OPEN_SKIP_CHECKSUMS) != 0;
    ds->shards = calloc(1, sizeof *ds->shards);
    char *path = strdup("<memory>");
    int rc;
    if (ds->shards && path) {
        ds->shards[0] = (ds_shard){.path = path, .fd = -1, .mem = data, .size = size};
        ds->nshards = 1;
        rc = set_one_source(ds, path, err);
        if (rc == 0) rc = open_lone_shard(ds, err);
    } else {
        free(path);
        rc = shard_fail(err, LF_SHARD_E_NOMEM, "out of memory");
    }
    if (rc != 0) {
        lf_dataset_close(ds);
        return rc;
    }
    *out = ds;
    return 0;
}

/* Sample i's record in the raw block the index-only dataset pretends:
 * the size table, then L elements of the cost field (the writer's layout,
 * so every figure drawn from sizes is what real bytes would give). */
static int index_only_sample(lf_dataset *ds, uint64_t i, uint64_t len, uint32_t block,
                             uint64_t *raw, lf_shard_error *err)
{
    const lf_field_def *f = &ds->schema.fields[ds->schema.cost_field];
    uint64_t size = 4ull * ds->schema.nfields + len * lf_field_elem_size(f);
    if (len > LF_MAX_RECORD_BYTES || size > LF_MAX_RECORD_BYTES - *raw)
        return shard_fail(err, LF_SHARD_E_ARG, "%s: sample %" PRIu64 ": length %" PRIu64
                          " makes block %u pass the format's %u raw bytes", ds->shards[0].path,
                          i, len, block, LF_MAX_RECORD_BYTES);
    ds->samples[i] = (lf_sample_info){.shard = 0, .block = block, .offset = (uint32_t)*raw,
                                      .size = (uint32_t)size, .length = len};
    *raw += size;
    return 0;
}

/* Fills the tables: block b holds samples b*per .. b*per+per-1, each block
 * one page "on disk" (nothing is), every checksum 0. */
static int index_only_tables(lf_dataset *ds, uint64_t samples, uint32_t per,
                             lf_index_length_fn length, void *arg, lf_shard_error *err)
{
    uint64_t nblocks = (samples + per - 1) / per;
    if (nblocks > UINT32_MAX)
        return shard_fail(err, LF_SHARD_E_ARG, "%s: %" PRIu64 " blocks: a shard holds at most "
                          "2^32-1: raise the samples a block", ds->shards[0].path, nblocks);
    int rc = alloc_tables(ds, nblocks, samples, true, err);
    for (uint64_t b = 0; rc == 0 && b < nblocks; b++) {
        uint64_t first = b * per, n = samples - first < per ? samples - first : per, raw = 0;
        for (uint64_t i = first; rc == 0 && i < first + n; i++)
            rc = index_only_sample(ds, i, length(arg, i), (uint32_t)b, &raw, err);
        ds->blocks[b] = (lf_block_info){.file_offset = LF_SHARD_ALIGN * (b + 1),
                                        .stored_size = LF_SHARD_ALIGN, .raw_size = (uint32_t)raw,
                                        .first_sample = first, .nsamples = (uint32_t)n};
        if (raw > ds->max_raw) ds->max_raw = (uint32_t)raw;
    }
    ds->nblocks = nblocks;
    ds->nsamples = samples;
    ds->max_stored = LF_SHARD_ALIGN;
    return rc;
}

/* *out = an index-only dataset of schema with one pseudo-shard named name
 * and no table yet. Returns 0, or the schema's refusal or
 * LF_SHARD_E_NOMEM (err set) with *out untouched: the status is returned,
 * not left in err alone, since callers may pass no err. */
static int index_only_shell(const char *name, const lf_schema *schema, lf_dataset **out,
                            lf_shard_error *err)
{
    int rc = lf_schema_validate(schema, err);
    if (rc != 0) return rc;
    lf_dataset *ds = calloc(1, sizeof *ds);
    if (ds) ds->shards = calloc(1, sizeof *ds->shards);
    char *path = ds && ds->shards ? strdup(name) : NULL;
    if (!path || set_one_source(ds, name, err) != 0) {
        free(path);
        lf_dataset_close(ds);
        return shard_fail(err, LF_SHARD_E_NOMEM, "%s: out of memory", name);
    }
    ds->shards[0] = (ds_shard){.path = path, .fd = -1};
    ds->nshards = 1;
    ds->schema = *schema;
    ds->index_only = true;
    *out = ds;
    return 0;
}

int lf_dataset_open_index_only(const char *name, const lf_schema *schema, uint64_t samples,
                               uint32_t block_samples, lf_index_length_fn length, void *arg,
                               lf_dataset **out, lf_shard_error *err)
{
    if (!name || !schema || !length || !out || block_samples == 0 || samples > UINT32_MAX)
        return shard_fail(err, LF_SHARD_E_ARG, "index-only dataset: invalid argument");
    lf_dataset *ds;
    int rc = index_only_shell(name, schema, &ds, err);
    if (rc != 0) return rc;
    return finish_open(ds, index_only_tables(ds, samples, block_samples, length, arg, err), out);
}

/* ---- compact index (compact.c) ------------------------------------------- */

/* Fills the block table from the mapped index.lfx. With a manifest, block
 * b belongs to the shard whose block range holds it, and each shard's
 * blocks must hold the samples the manifest lists for it; without, every
 * block is shard 0's. Blocks are given pseudo places (nothing is read). */
static int compact_tables(lf_dataset *ds, const manifest *m, const char *path,
                          lf_shard_error *err)
{
    const compact_index *ci = &ds->sources[0].compact;
    int rc = m ? compact_counts(ci, m, path, err) : 0;
    if (rc != 0) return rc;
    if (ci->blocks > SIZE_MAX / sizeof *ds->blocks ||
        !(ds->blocks = malloc(ci->blocks ? (size_t)ci->blocks * sizeof *ds->blocks : 1)))
        return shard_fail(err, LF_SHARD_E_NOMEM, "%s: out of memory", path);
    uint32_t shard = 0;
    uint64_t first = 0, shard_first = 0;
    uint64_t shard_end = m && m->nshards ? m->shards[0].blocks : UINT64_MAX;
    for (uint64_t b = 0; b < ci->blocks; b++) {
        if (b == shard_end) {   /* the manifest's block total is ci->blocks: shard+1 exists */
            if (first - shard_first != m->shards[shard].samples) break;
            shard_first = first;
            ds->shards[++shard].first_block = b;
            shard_end += m->shards[shard].blocks;
        }
        const uint8_t *e = ci->block_table + b * COMPACT_BLOCK_ENTRY;
        ds->blocks[b] = (lf_block_info){.file_offset = LF_SHARD_ALIGN * (b + 1),
                                        .stored_size = LF_SHARD_ALIGN, .raw_size = get_u32(e + 4),
                                        .first_sample = first, .nsamples = get_u32(e),
                                        .shard = shard};
        if (ds->blocks[b].raw_size > ds->max_raw) ds->max_raw = ds->blocks[b].raw_size;
        first += ds->blocks[b].nsamples;
    }
    if (m && m->nshards && first - shard_first != m->shards[shard].samples)
        return shard_fail(err, LF_SHARD_E_FORMAT, "%s: its blocks do not hold the samples the "
                          "manifest lists for %s: run `lf-shard index DIR` to write it again",
                          path, m->shards[shard].name);
    ds->nblocks = ci->blocks;
    ds->nsamples = ci->samples;
    ds->max_stored = LF_SHARD_ALIGN;
    compact_release(ci);
    return 0;
}

int lf_dataset_open_index_file(const char *path, const char *name, const lf_schema *schema,
                               lf_dataset **out, lf_shard_error *err)
{
    if (!path || !name || !schema || !out)
        return shard_fail(err, LF_SHARD_E_ARG, "index file: NULL argument");
    lf_dataset *ds;
    int rc = index_only_shell(name, schema, &ds, err);
    if (rc != 0) return rc;
    rc = compact_map(path, 0, &ds->sources[0].compact, err);
    if (rc == 0) rc = compact_tables(ds, NULL, path, err);
    return finish_open(ds, rc, out);
}

/* A dataset of m's shards (named, never opened) read from index.lfx. */
static int open_compact(lf_dataset *ds, const char *abs, const manifest *m, uint64_t hash,
                        const char *path, lf_shard_error *err)
{
    ds->schema = m->schema;
    ds->index_only = ds->from_compact = true;
    ds->shards = calloc(m->nshards ? m->nshards : 1, sizeof *ds->shards);
    if (!ds->shards) return shard_fail(err, LF_SHARD_E_NOMEM, "out of memory");
    /* Each shard is still opened once, so a missing, resized or irregular
     * one is refused as lf_dataset_open refuses it; none is kept open. */
    int rc = open_files(ds, abs, m, err);
    for (uint32_t i = 0; i < ds->nshards; i++) {
        if (ds->shards[i].fd >= 0) close(ds->shards[i].fd);
        ds->shards[i].fd = -1;
    }
    if (rc == 0) rc = compact_map(path, hash, &ds->sources[0].compact, err);
    return rc == 0 ? compact_tables(ds, m, path, err) : rc;
}

const lf_index_summary *lf_dataset_index_summary(const lf_dataset *ds)
{
    return ds && ds->nsources == 1 && ds->sources[0].compact.has_summary
               ? &ds->sources[0].compact.summary
               : NULL;
}

int lf_dataset_open_lengths(const char *dir, lf_dataset **out, lf_shard_error *err)
{
    return open_dir(dir, OPEN_LENGTHS, out, err);
}

static uint64_t length_of(void *arg, uint64_t sample)
{
    return lf_dataset_sample_length(arg, sample);
}

static void block_of(void *arg, uint64_t block, uint32_t *nsamples, uint32_t *raw_size)
{
    const lf_block_info *b = lf_dataset_block(arg, block);
    *nsamples = b->nsamples;
    *raw_size = b->raw_size;
}

int lf_dataset_write_index(const char *dir, lf_shard_error *err)
{
    lf_dataset *ds;
    int rc = lf_dataset_open(dir, &ds, err);
    if (rc != 0) return rc;
    lf_index_spec spec = {.samples = ds->nsamples, .blocks = ds->nblocks,
                          .manifest_hash = ds->manifest_hash, .block = block_of,
                          .length = length_of, .arg = ds};
    rc = lf_index_write(dir, &spec, err);
    lf_dataset_close(ds);
    return rc;
}

int lf_dataset_index_only(const lf_dataset *ds) { return ds->index_only; }

/* ---- several directories as one ------------------------------------------ */

/* Says in `why` how schema b differs from a (the first difference); 0 when
 * they are the same. */
static int schema_difference(const lf_schema *a, const lf_schema *b, char *why, size_t cap)
{
    if (a->nfields != b->nfields) {
        snprintf(why, cap, "%u fields, not %u", b->nfields, a->nfields);
        return 1;
    }
    for (uint32_t i = 0; i < a->nfields; i++) {
        const lf_field_def *fa = &a->fields[i], *fb = &b->fields[i];
        const char *ta = lf_field_type_name(fa->type), *tb = lf_field_type_name(fb->type);
        if (strncmp(fa->name, fb->name, sizeof fa->name) != 0 || fa->type != fb->type) {
            snprintf(why, cap, "field %u is '%.*s' (%s), not '%.*s' (%s)", i,
                     (int)sizeof fb->name, fb->name, tb ? tb : "?",
                     (int)sizeof fa->name, fa->name, ta ? ta : "?");
            return 1;
        }
        if (fa->row_width != fb->row_width) {
            snprintf(why, cap, "field '%.*s' has rows of %u values, not %u",
                     (int)sizeof fa->name, fa->name, fb->row_width, fa->row_width);
            return 1;
        }
    }
    if (a->cost_field != b->cost_field) {
        snprintf(why, cap, "its cost field is '%.*s', not '%.*s'",
                 (int)sizeof b->fields[0].name, b->fields[b->cost_field].name,
                 (int)sizeof a->fields[0].name, a->fields[a->cost_field].name);
        return 1;
    }
    return 0;
}

/* Moves part's shards (and its mapped index.lfx, when ds has no
 * per-sample table) into ds after those already there and copies its
 * index with every shard, block and sample number moved past them; part
 * keeps no descriptor, path or mapping, so closing it closes nothing of
 * ds. */
static void append_part(lf_dataset *ds, lf_dataset *part, ds_source *src)
{
    for (uint32_t i = 0; i < part->nshards; i++) {
        ds_shard *sh = &ds->shards[ds->nshards + i];
        *sh = part->shards[i];
        sh->first_block += ds->nblocks;
        sh->ix.first_sample += ds->nsamples;
        sh->ix.source = (uint32_t)(src - ds->sources);
        part->shards[i] = (ds_shard){.fd = -1};
    }
    for (uint64_t j = 0; j < part->nblocks; j++) {
        lf_block_info *b = &ds->blocks[ds->nblocks + j];
        *b = part->blocks[j];
        b->first_sample += ds->nsamples;
        b->shard += ds->nshards;
    }
    for (uint64_t k = 0; ds->samples && k < part->nsamples; k++) {
        lf_sample_info *s = &ds->samples[ds->nsamples + k];
        *s = part->samples[k];
        s->shard += ds->nshards;
    }
    if (!ds->samples) {
        src->compact = part->sources[0].compact;
        part->sources[0].compact = (compact_index){0};
    }
    ds->index_only |= part->index_only;   /* a union reads no byte of any part if it */
    if (part->max_raw > ds->max_raw) ds->max_raw = part->max_raw;
    if (part->max_stored > ds->max_stored) ds->max_stored = part->max_stored;
    ds->nshards += part->nshards;
    ds->nblocks += part->nblocks;
    ds->nsamples += part->nsamples;
}

/* Makes one dataset of the opened parts, in order; the parts are left
 * without shards (the caller closes them). */
static int join_parts(lf_dataset **parts, const char *const *dirs, uint32_t n,
                      lf_dataset *ds, lf_shard_error *err)
{
    uint64_t shards = 0, blocks = 0, samples = 0;
    for (uint32_t i = 0; i < n; i++) {
        shards += parts[i]->nshards;
        blocks += parts[i]->nblocks;
        samples += parts[i]->nsamples;
    }
    if (shards > UINT32_MAX)
        return shard_fail(err, LF_SHARD_E_ARG, "%s..%s: %" PRIu64 " shards together: at most "
                          "2^32-1", dirs[0], dirs[n - 1], shards);
    ds->schema = parts[0]->schema;
    ds->shards = calloc(shards ? (size_t)shards : 1, sizeof *ds->shards);
    ds->sources = calloc(n, sizeof *ds->sources);
    if (!ds->shards || !ds->sources) return shard_fail(err, LF_SHARD_E_NOMEM, "out of memory");
    ds->nsources = n;
    for (uint32_t i = 0; i < n; i++)
        if (!(ds->sources[i].dir = strdup(dirs[i])))
            return shard_fail(err, LF_SHARD_E_NOMEM, "%s: out of memory", dirs[i]);
    int rc = alloc_tables(ds, blocks, samples, parts[0]->samples != NULL, err);
    ds->from_compact = true;
    for (uint32_t i = 0; i < n; i++) ds->from_compact &= parts[i]->from_compact;
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        ds->sources[i].first_sample = ds->nsamples;
        append_part(ds, parts[i], &ds->sources[i]);
    }
    return rc;
}

/* The joined dataset holds one kind of index: when some of the parts were
 * opened mapped (their index.lfx) and some not (made before it), those
 * opened mapped are opened again with the per-sample table (an index-only
 * one cannot be: LF_SHARD_E_ARG). */
static int same_kind(const char *const *dirs, uint32_t n, lf_dataset **parts,
                     lf_shard_error *err)
{
    uint32_t mapped = 0;
    for (uint32_t i = 0; i < n; i++) mapped += parts[i]->samples == NULL;
    for (uint32_t i = 0; mapped > 0 && mapped < n && i < n; i++) {
        if (parts[i]->samples) continue;
        if (parts[i]->index_only && !parts[i]->from_compact)
            return shard_fail(err, LF_SHARD_E_ARG, "%s: an index-only dataset read from its "
                              "%s cannot be joined with %s, which has none: write the index "
                              "there with `lf-shard index DIR`", dirs[i], LF_INDEX_NAME,
                              dirs[i ? 0 : 1]);
        lf_dataset_close(parts[i]);
        parts[i] = NULL;
        int rc = open_dir(dirs[i], OPEN_TABLE, &parts[i], err);
        if (rc != 0) return rc;
    }
    return 0;
}

/* 0 where part i's schema is part 0's, else LF_SHARD_E_ARG naming both
 * (dirs: the parts' names). */
static int same_schema(lf_dataset *const *parts, const char *const *dirs, uint32_t i,
                       lf_shard_error *err)
{
    char why[256];
    if (schema_difference(&parts[0]->schema, &parts[i]->schema, why, sizeof why))
        return shard_fail(err, LF_SHARD_E_ARG, "%s: its schema differs from %s's: %s; "
                          "datasets read as one need the same fields (convert them "
                          "with the same lf-shard options)", dirs[i], dirs[0], why);
    return 0;
}

/* Opens dirs[0..n) each as a dataset, checking each schema against the first's. */
static int open_parts(const char *const *dirs, uint32_t n, open_mode mode, lf_dataset **parts,
                      lf_shard_error *err)
{
    for (uint32_t i = 0; i < n; i++) {
        int rc = open_dir(dirs[i], mode, &parts[i], err);
        if (rc == 0) rc = same_schema(parts, dirs, i, err);
        if (rc != 0) return rc;
    }
    return 0;
}

/* *out = the opened parts (of one schema, named dirs) as one dataset; the
 * parts are left for the caller to close. */
static int join_opened(lf_dataset **parts, const char *const *dirs, uint32_t n,
                       lf_dataset **out, lf_shard_error *err)
{
    lf_dataset *ds = calloc(1, sizeof *ds);
    int rc = ds ? same_kind(dirs, n, parts, err)
                : shard_fail(err, LF_SHARD_E_NOMEM, "out of memory");
    if (rc == 0) rc = join_parts(parts, dirs, n, ds, err);
    if (rc == 0) rc = lazy_indexes(ds, err);
    return finish_open(ds, rc, out);
}

static int open_many(const char *const *dirs, uint32_t n, open_mode mode, lf_dataset **out,
                     lf_shard_error *err)
{
    if (!dirs || !out || n == 0)
        return shard_fail(err, LF_SHARD_E_ARG, "datasets: NULL argument or none given");
    if (n == 1) return open_dir(dirs[0], mode, out, err);
    lf_dataset **parts = calloc(n, sizeof *parts);
    int rc = parts ? open_parts(dirs, n, mode, parts, err)
                   : shard_fail(err, LF_SHARD_E_NOMEM, "out of memory");
    if (rc == 0) rc = join_opened(parts, dirs, n, out, err);
    for (uint32_t i = 0; parts && i < n; i++) lf_dataset_close(parts[i]);
    free(parts);
    return rc;
}

int lf_dataset_join(lf_dataset **parts, uint32_t n, lf_dataset **out, lf_shard_error *err)
{
    if (!parts || !out || n == 0)
        return shard_fail(err, LF_SHARD_E_ARG, "datasets to join: NULL argument or none");
    for (uint32_t i = 0; i < n; i++)
        if (!parts[i] || parts[i]->nsources != 1)
            return shard_fail(err, LF_SHARD_E_ARG, "datasets to join: one is none, or of "
                              "several sources");
    /* the names, copied: same_kind may close a part */
    char **names = calloc(n, sizeof *names);
    int rc = names ? 0 : shard_fail(err, LF_SHARD_E_NOMEM, "out of memory");
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        if (!(names[i] = strdup(parts[i]->sources[0].dir)))
            rc = shard_fail(err, LF_SHARD_E_NOMEM, "out of memory");
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        rc = same_schema(parts, (const char *const *)names, i, err);
    if (rc == 0) rc = join_opened(parts, (const char *const *)names, n, out, err);
    for (uint32_t i = 0; names && i < n; i++) free(names[i]);
    free(names);
    return rc;
}

int lf_dataset_open_many(const char *const *dirs, uint32_t n, lf_dataset **out,
                         lf_shard_error *err)
{
    return open_many(dirs, n, OPEN_TABLE, out, err);
}

int lf_dataset_open_mapped(const char *const *dirs, uint32_t n, lf_dataset **out,
                           lf_shard_error *err)
{
    int rc = open_many(dirs, n, OPEN_MAPPED, out, err);
    if (rc == 0 && (rc = lazy_indexes(*out, err)) != 0) {
        lf_dataset_close(*out);
        *out = NULL;
    }
    return rc;
}

uint32_t lf_dataset_sources(const lf_dataset *ds) { return ds->nsources; }

uint64_t lf_dataset_source_first(const lf_dataset *ds, uint32_t source)
{
    if (source < ds->nsources) return ds->sources[source].first_sample;
    return source == ds->nsources ? ds->nsamples : UINT64_MAX;
}

/* Of n >= 1 entries whose first samples ascend from entry 0's (at or
 * before `sample`), the last whose first sample is at or before it: the
 * source or block holding it. first points at entry 0's first sample,
 * entry k's lies stride bytes after entry k-1's. An empty source starts
 * where the next one does, so it is never the answer. */
static uint64_t last_starting_at(const uint64_t *first, size_t stride, uint64_t n,
                                 uint64_t sample)
{
    const char *base = (const char *)first;
    uint64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (*(const uint64_t *)(const void *)(base + mid * stride) <= sample) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

uint32_t lf_dataset_sample_source(const lf_dataset *ds, uint64_t sample)
{
    if (sample >= ds->nsamples) return UINT32_MAX;
    return (uint32_t)last_starting_at(&ds->sources[0].first_sample, sizeof *ds->sources,
                                      ds->nsources, sample);
}

const char *lf_dataset_source_dir(const lf_dataset *ds, uint32_t source)
{
    return source < ds->nsources ? ds->sources[source].dir : NULL;
}

const lf_schema *lf_dataset_schema(const lf_dataset *ds) { return &ds->schema; }
uint64_t lf_dataset_samples(const lf_dataset *ds) { return ds->nsamples; }
uint32_t lf_dataset_shards(const lf_dataset *ds) { return ds->nshards; }
uint64_t lf_dataset_blocks(const lf_dataset *ds) { return ds->nblocks; }
uint32_t lf_dataset_max_block_raw(const lf_dataset *ds) { return ds->max_raw; }
uint32_t lf_dataset_max_block_stored(const lf_dataset *ds) { return ds->max_stored; }

const char *lf_dataset_shard_path(const lf_dataset *ds, uint32_t shard)
{
    return shard < ds->nshards ? ds->shards[shard].path : NULL;
}

int lf_dataset_shard_fd(const lf_dataset *ds, uint32_t shard)
{
    return shard < ds->nshards ? ds->shards[shard].fd : -1;
}

const lf_sample_info *lf_dataset_sample(const lf_dataset *ds, uint64_t sample)
{
    return sample < ds->nsamples && ds->samples ? &ds->samples[sample] : NULL;
}

uint64_t lf_dataset_sample_length(const lf_dataset *ds, uint64_t sample)
{
    if (sample >= ds->nsamples) return 0;
    if (ds->samples) return ds->samples[sample].length;
    const ds_source *src = &ds->sources[lf_dataset_sample_source(ds, sample)];
    return compact_length(&src->compact, sample - src->first_sample);
}

const uint32_t *lf_dataset_mapped_lengths(const lf_dataset *ds)
{
    return ds->nsources == 1 ? lf_dataset_source_lengths(ds, 0) : NULL;
}

const uint32_t *lf_dataset_source_lengths(const lf_dataset *ds, uint32_t source)
{
    const uint8_t *v = source < ds->nsources ? ds->sources[source].compact.lengths : NULL;
    if (ds->samples || !v || (uintptr_t)v % sizeof(uint32_t) ||
        __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)   /* index.lfx is little-endian */
        return NULL;
    return (const uint32_t *)(const void *)v;
}

const lf_block_info *lf_dataset_block(const lf_dataset *ds, uint64_t block)
{
    return block < ds->nblocks ? &ds->blocks[block] : NULL;
}

uint64_t lf_dataset_sample_block(const lf_dataset *ds, uint64_t sample)
{
    if (sample >= ds->nsamples) return UINT64_MAX;
    if (ds->samples) {
        const lf_sample_info *s = &ds->samples[sample];
        return ds->shards[s->shard].first_block + s->block;
    }
    return last_starting_at(&ds->blocks[0].first_sample, sizeof *ds->blocks, ds->nblocks, sample);
}

/* ---- blocks ------------------------------------------------------------- */

/* An index-only dataset has no bytes to read: said with its name, so a
 * run that reaches a batch is told which dataset and why. */
static int refuse_index_only(const lf_dataset *ds, uint64_t block, lf_shard_error *err)
{
    /* a union's: the block's source (lf_dataset_join) */
    uint32_t s = lf_dataset_sample_source(ds, ds->blocks[block].first_sample);
    const ds_source *src = &ds->sources[s < ds->nsources ? s : 0];
    if (ds->from_compact)
        return shard_fail(err, LF_SHARD_E_ARG, "%s: block %" PRIu64 ": the dataset was opened "
                          "from its %s alone, for planning, so none of its bytes are read "
                          "(open it with lf_dataset_open to read them)", src->dir,
                          block, LF_INDEX_NAME);
    uint64_t end = lf_dataset_source_first(ds, (uint32_t)(src - ds->sources) + 1);
    return shard_fail(err, LF_SHARD_E_ARG, "%s: block %" PRIu64 ": an index-only dataset "
                      "describes its %" PRIu64 " samples but holds none of their bytes, so "
                      "no batch can be read from it (it is for planning and start-up "
                      "measurements: make the samples with lf-shard synth without "
                      "--index-only to serve them)", ds->shards[ds->blocks[block].shard].path,
                      block, end - src->first_sample);
}

long lf_dataset_read_blocks(const lf_dataset *ds, uint64_t first, uint64_t count,
                            void *dst, size_t dst_cap, lf_shard_error *err)
{
    if (!ds || first >= ds->nblocks || count == 0)
        return shard_fail(err, LF_SHARD_E_RANGE, "block %" PRIu64 " out of range", first);
    if (ds->index_only) return refuse_index_only(ds, first, err);
    const lf_block_info *b = &ds->blocks[first];
    const ds_shard *sh = &ds->shards[b->shard];
    if (dst_cap < b->stored_size)
        return shard_fail(err, LF_SHARD_E_BUFFER, "%s: block %" PRIu64 ": %u bytes, buffer %zu",
                          sh->path, first, b->stored_size, dst_cap);
    /* Extend the run while the next block is in the same shard and fits;
     * the index was checked at open, so offsets are contiguous and in range. */
    uint64_t n = 1, bytes = b->stored_size;
    while (n < count && first + n < ds->nblocks && b[n].shard == b->shard &&
           b[n].stored_size <= dst_cap - bytes) {
        bytes += b[n].stored_size;
        n++;
    }
    int rc = shard_read(sh, b->file_offset, dst, (size_t)bytes, err);
    return rc != 0 ? rc : (long)n;
}

long lf_dataset_read_block(const lf_dataset *ds, uint64_t block, void *dst,
                           size_t dst_cap, lf_shard_error *err)
{
    long n = lf_dataset_read_blocks(ds, block, 1, dst, dst_cap, err);
    return n < 0 ? n : (long)ds->blocks[block].stored_size;
}

int lf_block_decoder_create(lf_block_decoder **out)
{
    if (!out) return LF_SHARD_E_ARG;
    lf_block_decoder *d = malloc(sizeof *d);
    if (!d) return LF_SHARD_E_NOMEM;
    d->dctx = ZSTD_createDCtx();
    if (!d->dctx) {
        free(d);
        return LF_SHARD_E_NOMEM;
    }
    *out = d;
    return 0;
}

void lf_block_decoder_free(lf_block_decoder *d)
{
    if (!d) return;
    ZSTD_freeDCtx(d->dctx);
    free(d);
}

long lf_block_decode(lf_block_decoder *d, const lf_dataset *ds, uint64_t block,
                     const void *stored, size_t stored_size, void *dst,
                     size_t dst_cap, lf_shard_error *err)
{
    if (!d || !ds || !stored || !dst)
        return shard_fail(err, LF_SHARD_E_ARG, "block decode: NULL argument");
    if (block >= ds->nblocks)
        return shard_fail(err, LF_SHARD_E_RANGE, "block %" PRIu64 " out of range", block);
    if (ds->index_only) return refuse_index_only(ds, block, err);
    const lf_block_info *b = &ds->blocks[block];
    const char *path = ds->shards[b->shard].path;
    uint64_t local = block - ds->shards[b->shard].first_block;
    int rc = shard_index_ready(ds, b->shard, err);   /* its checksum below is the index's */
    if (rc != 0) return rc;
    if (stored_size != b->stored_size)
        return shard_fail(err, LF_SHARD_E_ARG, "%s: block %" PRIu64 ": %zu stored bytes given, "
                          "index says %u", path, block, stored_size, b->stored_size);
    if (dst_cap < b->raw_size)
        return shard_fail(err, LF_SHARD_E_BUFFER, "%s: block %" PRIu64 ": needs %u bytes, "
                          "buffer %zu", path, block, b->raw_size, dst_cap);
    if (!ds->skip_checksums && shard_hash(stored, stored_size) != b->checksum)
        return shard_fail(err, LF_SHARD_E_CHECKSUM, "%s: block %" PRIu64 " (dataset block %"
                          PRIu64 ", samples %" PRIu64 "..%" PRIu64 "): checksum mismatch",
                          path, local, block, b->first_sample,
                          b->first_sample + b->nsamples - 1);
    size_t n = ZSTD_decompressDCtx(d->dctx, dst, b->raw_size, stored, stored_size);
    if (ZSTD_isError(n) || n != b->raw_size)
        return shard_fail(err, LF_SHARD_E_DECOMPRESS, "%s: block %" PRIu64 " (dataset block %"
                          PRIu64 "): %s", path, local, block,
                          ZSTD_isError(n) ? ZSTD_getErrorName(n) : "wrong decompressed size");
    return (long)n;
}

/* ---- records ------------------------------------------------------------ */

/* A record's fault, as a format error naming the shard file, its block
 * and the sample (found here, off the hot path). */
__attribute__((format(printf, 4, 5)))
static int record_fail(const lf_dataset *ds, uint64_t sample, lf_shard_error *err,
                       const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    uint64_t block = lf_dataset_sample_block(ds, sample);
    const ds_shard *sh = &ds->shards[ds->blocks[block].shard];
    return shard_fail(err, LF_SHARD_E_FORMAT, "%s: block %" PRIu64 ": sample %" PRIu64 ": %s",
                      sh->path, block - sh->first_block, sample, what);
}

/* The size of the record at byte `at` of a decoded block, from its own
 * table of field sizes: the table, then the fields (FORMAT.md, section 5).
 * False when the table or the fields would pass the block's end. */
static bool record_size(const lf_dataset *ds, const uint8_t *raw, size_t raw_size, size_t at,
                        uint32_t *size)
{
    uint64_t table = 4ull * ds->schema.nfields, total = table;
    if (at > raw_size || table > raw_size - at) return false;
    for (uint32_t i = 0; i < ds->schema.nfields; i++) total += get_u32(raw + at + 4 * i);
    if (total > raw_size - at) return false;   /* 16 fields of u32: no overflow in u64 */
    *size = (uint32_t)total;
    return true;
}

int lf_block_records(const lf_dataset *ds, uint64_t block, const void *raw, size_t raw_size,
                     uint32_t *offsets, lf_shard_error *err)
{
    if (!ds || !raw || !offsets) return shard_fail(err, LF_SHARD_E_ARG, "records: NULL argument");
    if (block >= ds->nblocks)
        return shard_fail(err, LF_SHARD_E_RANGE, "block %" PRIu64 " out of range", block);
    const lf_block_info *b = &ds->blocks[block];
    if (raw_size != b->raw_size)
        return shard_fail(err, LF_SHARD_E_ARG, "%s: block %" PRIu64 ": %zu bytes given, the "
                          "index says %u", ds->shards[b->shard].path,
                          block - ds->shards[b->shard].first_block, raw_size, b->raw_size);
    size_t at = 0;
    for (uint32_t k = 0; k < b->nsamples; k++) {
        uint64_t i = b->first_sample + k;
        const lf_sample_info *s = ds->samples ? &ds->samples[i] : NULL;
        uint32_t size;
        if (!record_size(ds, raw, raw_size, at, &size))
            return record_fail(ds, i, err, "its record's field sizes pass the block's end");
        if (s && (s->offset != at || s->size != size))   /* where the index says */
            return record_fail(ds, i, err, "its record's field sizes do not match the index");
        offsets[k] = (uint32_t)at;
        at += size;
    }
    if (at != raw_size)
        return record_fail(ds, b->first_sample + b->nsamples - 1, err, "the block's records end "
                           "at byte %zu of its %zu", at, raw_size);
    offsets[b->nsamples] = (uint32_t)at;
    return 0;
}

int lf_record_fields(const lf_dataset *ds, uint64_t sample, const void *record, size_t size,
                     lf_field_view *out, lf_shard_error *err)
{
    if (!ds || !record || !out) return shard_fail(err, LF_SHARD_E_ARG, "fields: NULL argument");
    if (sample >= ds->nsamples)
        return shard_fail(err, LF_SHARD_E_RANGE, "sample %" PRIu64 " out of range", sample);
    const uint8_t *rec = record;
    const lf_schema *sc = &ds->schema;
    uint64_t pos = (uint64_t)sc->nfields * 4;
    if (size < pos) return record_fail(ds, sample, err, "a record of %zu bytes", size);
    lf_field_view v[LF_MAX_FIELDS];
    for (uint32_t i = 0; i < sc->nfields; i++) {
        const lf_field_def *f = &sc->fields[i];
        uint32_t fsize = get_u32(rec + 4 * i);
        size_t elem = lf_field_elem_size(f);
        if (fsize > size - pos || fsize % elem != 0 ||
            (f->type == LF_FIELD_LABEL_I64 && fsize != 8))
            return record_fail(ds, sample, err, "field '%s': bad size %u", f->name, fsize);
        bool counted = f->type != LF_FIELD_JPEG && f->type != LF_FIELD_BYTES &&
                       f->type != LF_FIELD_LABEL_I64;
        v[i] = (lf_field_view){.data = rec + pos, .size = fsize,
                               .count = counted ? (uint32_t)(fsize / elem) : 1};
        pos += fsize;
    }
    const lf_field_def *cf = &sc->fields[sc->cost_field];
    uint32_t csize = v[sc->cost_field].size;
    /* a JPEG's cost is its pixels, which the index alone checks */
    uint64_t want = lf_dataset_sample_length(ds, sample);
    if (pos != size || (cf->type != LF_FIELD_JPEG && record_cost_length(sc, csize, 0, 0) != want))
        return record_fail(ds, sample, err, "fields do not match the record or its index entry");
    for (uint32_t i = 0; i < sc->nfields; i++)   /* a value per token, no more, no less */
        if (lf_field_is_per_token(sc->fields[i].type) && v[i].count != v[sc->cost_field].count)
            return record_fail(ds, sample, err, "field '%s' has %u values for %u tokens",
                               sc->fields[i].name, v[i].count, v[sc->cost_field].count);
    memcpy(out, v, sc->nfields * sizeof *v);
    return 0;
}

/* Where sample's record lies in its decoded block: from the per-sample
 * table, or, without one, by walking the records before it. */
static int find_record(const lf_dataset *ds, uint64_t sample, const uint8_t *raw,
                       size_t raw_size, size_t *at, uint32_t *size, lf_shard_error *err)
{
    if (ds->samples) {
        const lf_sample_info *s = &ds->samples[sample];
        if ((uint64_t)s->offset + s->size > raw_size)
            return record_fail(ds, sample, err, "its record lies past the %zu given bytes",
                               raw_size);
        *at = s->offset;
        *size = s->size;
        return 0;
    }
    uint64_t first = ds->blocks[lf_dataset_sample_block(ds, sample)].first_sample;
    *at = 0;
    for (uint64_t i = first; i <= sample; i++) {
        if (!record_size(ds, raw, raw_size, *at, size))
            return record_fail(ds, i, err, "its record's field sizes pass the block's end");
        if (i < sample) *at += *size;
    }
    return 0;
}

int lf_sample_fields(const lf_dataset *ds, uint64_t sample, const void *raw,
                     size_t raw_size, lf_field_view *out, lf_shard_error *err)
{
    if (!ds || !raw || !out) return shard_fail(err, LF_SHARD_E_ARG, "fields: NULL argument");
    if (sample >= ds->nsamples)
        return shard_fail(err, LF_SHARD_E_RANGE, "sample %" PRIu64 " out of range", sample);
    size_t at = 0;
    uint32_t size = 0;
    int rc = find_record(ds, sample, raw, raw_size, &at, &size, err);
    return rc != 0 ? rc : lf_record_fields(ds, sample, (const uint8_t *)raw + at, size, out, err);
}

/* ---- verify -------------------------------------------------------------- */

/* Every block read, checked, decoded, and each of its records located
 * (lf_block_records) and its fields checked. */
static int verify_blocks(const lf_dataset *ds, lf_verify_progress_fn progress, void *arg,
                         lf_shard_error *err)
{
    uint32_t most = 0;   /* samples in the fullest block */
    for (uint64_t j = 0; j < ds->nblocks; j++)
        if (ds->blocks[j].nsamples > most) most = ds->blocks[j].nsamples;
    lf_block_decoder *d = NULL;
    uint8_t *stored = malloc(ds->max_stored ? ds->max_stored : 1);
    uint8_t *raw = malloc(ds->max_raw ? ds->max_raw : 1);
    uint32_t *offsets = malloc(((size_t)most + 1) * sizeof *offsets);
    int rc = stored && raw && offsets ? lf_block_decoder_create(&d) : LF_SHARD_E_NOMEM;
    if (rc != 0) shard_fail(err, rc, "verify: out of memory");
    lf_field_view views[LF_MAX_FIELDS];
    uint64_t bytes = 0;
    for (uint64_t j = 0; rc == 0 && j < ds->nblocks; j++) {
        const lf_block_info *b = &ds->blocks[j];
        long n = lf_dataset_read_block(ds, j, stored, ds->max_stored, err);
        if (n >= 0) n = lf_block_decode(d, ds, j, stored, (size_t)n, raw, ds->max_raw, err);
        if (n >= 0 && (rc = lf_block_records(ds, j, raw, (size_t)n, offsets, err)) != 0) n = rc;
        for (uint32_t k = 0; n >= 0 && k < b->nsamples; k++)
            if ((rc = lf_record_fields(ds, b->first_sample + k, raw + offsets[k],
                                       offsets[k + 1] - offsets[k], views, err)) != 0)
                n = rc;
        if (n < 0) rc = (int)n;
        bytes += b->stored_size;
        if (rc == 0 && progress) progress(arg, j + 1, ds->nblocks, bytes);
    }
    lf_block_decoder_free(d);
    free(offsets);
    free(raw);
    free(stored);
    return rc;
}

int lf_dataset_verify(const char *dir, lf_verify_progress_fn progress,
                      void *arg, lf_shard_error *err)
{
    lf_dataset *ds;   /* mapped: every entry of index.lfx compared with the shard indexes */
    const char *dirs[] = {dir};
    int rc = lf_dataset_open_mapped(dirs, 1, &ds, err);
    if (rc != 0) return rc;
    rc = lf_dataset_check_indexes(ds, err);   /* every shard index, before any block */
    if (rc == 0) rc = verify_blocks(ds, progress, arg, err);
    lf_dataset_close(ds);
    return rc;
}
