/*
 * lf_shard.h — levelfeed's on-disk dataset format: writer and reader.
 *
 * A dataset is a directory holding shard files and a manifest. A shard holds
 * records (one per sample) grouped in blocks; each block is compressed with
 * zstd on its own and starts on a 4 KiB boundary, so it can be read with one
 * O_DIRECT request. The shard's index lists, per sample, its block, its place
 * inside the decompressed block and its cost inputs (tokens, frames or
 * pixels), so a planner needs only the index. Every stored byte is covered by
 * an xxh3 checksum that the reader checks before it uses the byte.
 * FORMAT.md is the byte-level spec.
 *
 * Conventions: functions return 0 (or a count) on success and a negative
 * lf_shard_status on failure; when an lf_shard_error is passed, it receives a
 * message naming the file, block or sample at fault. Out-parameters are left
 * untouched on failure. Nothing here prints, exits or aborts. The reader is
 * safe to use from many threads once opened (it is read-only); a decoder
 * (lf_block_decoder) belongs to one thread at a time.
 */
#ifndef LF_SHARD_H
#define LF_SHARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The newest format version written and read. A dataset is written as the
 * lowest version it needs: 1 unless it has a per-token field
 * (lf_schema_version) or records pieces of documents
 * (lf_writer_options.pieces), so readers of version 1 still read the rest. */
#define LF_SHARD_VERSION 2
#define LF_SHARD_ALIGN 4096u     /* blocks start on this boundary in the file */
#define LF_MAX_FIELDS 16
#define LF_FIELD_NAME_MAX 32     /* including the terminating NUL */
#define LF_MAX_ROW_WIDTH (1u << 24) /* values per frame of a FRAMES_* field */
/* Largest record (one sample: 4 bytes per field, then the fields), the
 * format's raw block limit: lf_writer_add refuses a larger one. */
#define LF_MAX_RECORD_BYTES (1u << 30)
#define LF_MANIFEST_NAME "manifest.lfm"

/* Status codes: negative values are errors. */
typedef enum lf_shard_status {
    LF_SHARD_OK = 0,
    LF_SHARD_E_IO = -1,          /* a system call failed (message has errno text) */
    LF_SHARD_E_NOMEM = -2,       /* allocation failed */
    LF_SHARD_E_FORMAT = -3,      /* bytes do not follow the format (bad magic, bounds) */
    LF_SHARD_E_CHECKSUM = -4,    /* a checksum does not match the stored bytes */
    LF_SHARD_E_VERSION = -5,     /* written by an unsupported format version */
    LF_SHARD_E_ARG = -6,         /* a caller argument is invalid (schema, field, size) */
    LF_SHARD_E_RANGE = -7,       /* an index (sample, block, shard) is out of range */
    LF_SHARD_E_BUFFER = -8,      /* a caller buffer is too small for the result */
    LF_SHARD_E_DECOMPRESS = -9,  /* zstd rejected a block whose checksum matched */
} lf_shard_status;

/* A short static description of a status code. */
const char *lf_shard_strerror(int status);

/* Filled on failure by functions that take one; msg names the place. */
typedef struct lf_shard_error {
    int status;                  /* the lf_shard_status returned */
    char msg[512];               /* e.g. "shard-00003.lfs: block 17: checksum mismatch" */
} lf_shard_error;

/* ---- schema ------------------------------------------------------------ */

typedef enum lf_field_type {
    LF_FIELD_TOKENS_U16 = 1,     /* array of little-endian u16 token ids */
    LF_FIELD_TOKENS_U32 = 2,     /* array of little-endian u32 token ids */
    LF_FIELD_JPEG = 3,           /* one encoded JPEG image, stored as given */
    LF_FIELD_FRAMES_F16 = 4,     /* frames x row_width IEEE half values */
    LF_FIELD_FRAMES_F32 = 5,     /* frames x row_width float values */
    LF_FIELD_FRAMES_I16 = 6,     /* frames x row_width int16 values */
    LF_FIELD_BYTES = 7,          /* opaque bytes */
    LF_FIELD_LABEL_I64 = 8,      /* one little-endian int64 (a per-sample integer) */
    /* Version 2: one value per token of the cost field (which must be a
     * tokens_* field), in the same order: a loss mask, labels, ... */
    LF_FIELD_PER_TOKEN_U8 = 9,   /* u8 per token */
    LF_FIELD_PER_TOKEN_I32 = 10, /* little-endian int32 per token */
} lf_field_type;

typedef struct lf_field_def {
    char name[LF_FIELD_NAME_MAX]; /* unique within the schema, NUL-terminated */
    uint32_t type;               /* lf_field_type */
    uint32_t row_width;          /* values per frame for FRAMES_*; 0 otherwise */
} lf_field_def;

typedef struct lf_schema {
    uint32_t nfields;            /* 1..LF_MAX_FIELDS */
    uint32_t cost_field;         /* which field's length is the cost input */
    lf_field_def fields[LF_MAX_FIELDS];
} lf_schema;

/* Bytes of one element of a field type (2 for u16 tokens, row_width * 4 for
 * f32 frames, 1 for jpeg/bytes, 8 for a label); 0 for an invalid definition. */
size_t lf_field_elem_size(const lf_field_def *f);
const char *lf_field_type_name(uint32_t type);   /* "tokens_u16", ... ; NULL if unknown */
int lf_field_type_parse(const char *name);        /* inverse; -1 if unknown */

/* Checks a schema: field count, names, types, row widths, cost field (and
 * that per-token fields go with a token cost field). */
int lf_schema_validate(const lf_schema *s, lf_shard_error *err);

/* The format version a dataset of this schema is written as: 2 when it has
 * a per-token field, else 1. */
uint32_t lf_schema_version(const lf_schema *s);

/* 1 for the per-token types (LF_FIELD_PER_TOKEN_*), else 0. */
int lf_field_is_per_token(uint32_t type);

/* ---- per-sample index --------------------------------------------------- */

/* What the planner knows of a sample without reading its data. */
typedef struct lf_sample_info {
    uint32_t shard;              /* shard number (manifest order) */
    uint32_t block;              /* block number inside the shard */
    uint32_t offset;             /* record's first byte in the decompressed block */
    uint32_t size;               /* record's bytes */
    uint64_t length;             /* cost input L: tokens, frames, or pixels (w*h) */
    uint32_t width, height;      /* JPEG cost field: image size; 0 otherwise */
    uint32_t doc_offset;         /* version 2: a piece of a longer document (lf-shard
                                    --max-len split) starts at this token of it, the
                                    pieces before it being the samples before it; 0 for
                                    a whole document or a first piece */
} lf_sample_info;

typedef struct lf_block_info {
    uint64_t file_offset;        /* where the stored bytes start (4 KiB aligned) */
    uint32_t stored_size;        /* bytes on disk: zstd frame + skippable padding
                                    frame, a multiple of LF_SHARD_ALIGN */
    uint32_t raw_size;           /* decompressed bytes */
    uint64_t checksum;           /* xxh3-64 of the stored bytes, padding included */
    uint64_t first_sample;       /* dataset-wide id of the block's first sample */
    uint32_t nsamples;           /* samples in this block (consecutive ids) */
    uint32_t shard;              /* shard number */
} lf_block_info;

/* ---- reader ------------------------------------------------------------- */

typedef struct lf_dataset lf_dataset;

/* Opens a dataset directory: reads and checks the manifest and every shard's
 * header, index and footer (not the data blocks). Sample ids are dataset-wide,
 * 0..samples-1, in manifest shard order. */
int lf_dataset_open(const char *dir, lf_dataset **out, lf_shard_error *err);
void lf_dataset_close(lf_dataset *ds);   /* accepts NULL */

/* Opens several dataset directories as one dataset (the sources of a
 * mixture): shards, blocks and samples numbered one after the other in the
 * order given, so source s holds samples source_first(s) ..
 * source_first(s+1)-1. Every directory must have the same schema, else
 * LF_SHARD_E_ARG with a message naming the directory and what differs.
 * n == 1 behaves as lf_dataset_open. Returns 0 or a status; *out is
 * untouched on failure. */
int lf_dataset_open_many(const char *const *dirs, uint32_t n, lf_dataset **out,
                         lf_shard_error *err);
/* Joins datasets already opened, each of one source (any open: a
 * directory's, mapped, for its lengths alone, index-only), into one as
 * lf_dataset_open_many joins directories: their samples, blocks and
 * shards numbered one after the other in the order given, source s part
 * s. Where some parts hold a per-sample table and some not, those without
 * are opened again from their directory with it (an index-only part read
 * from its index.lfx cannot be: LF_SHARD_E_ARG). The union is index-only
 * (lf_dataset_index_only: every read refused, naming the block's source)
 * where any part is. The parts are left without shards or mappings (some
 * may have been replaced): the caller closes every parts[i] whatever the
 * result. Returns 0 or a status (err set); *out is untouched on failure. */
int lf_dataset_join(lf_dataset **parts, uint32_t n, lf_dataset **out, lf_shard_error *err);
/* Sources of a dataset: 1 for lf_dataset_open (and the index-only and
 * in-memory opens), n for lf_dataset_open_many. */
uint32_t lf_dataset_sources(const lf_dataset *ds);
/* First sample id of source `source`; source == sources gives the total
 * samples (so source s spans first(s) .. first(s+1)-1); UINT64_MAX past it. */
uint64_t lf_dataset_source_first(const lf_dataset *ds, uint32_t source);
/* The source holding `sample`; UINT32_MAX when the sample is out of range. */
uint32_t lf_dataset_sample_source(const lf_dataset *ds, uint64_t sample);
/* The directory source `source` was opened from, as the caller gave it
 * (the name of an index-only or in-memory dataset); NULL out of range. */
const char *lf_dataset_source_dir(const lf_dataset *ds, uint32_t source);

const lf_schema *lf_dataset_schema(const lf_dataset *ds);
uint64_t lf_dataset_samples(const lf_dataset *ds);
uint32_t lf_dataset_shards(const lf_dataset *ds);
uint64_t lf_dataset_blocks(const lf_dataset *ds);          /* over all shards */
uint32_t lf_dataset_max_block_raw(const lf_dataset *ds);   /* largest raw_size */
uint32_t lf_dataset_max_block_stored(const lf_dataset *ds);/* largest stored_size */

/* Absolute path of shard i's file, for callers that do their own I/O
 * (io_uring, O_DIRECT). NULL if out of range. */
const char *lf_dataset_shard_path(const lf_dataset *ds, uint32_t shard);

/* The read-only descriptor the dataset holds for shard i's file, for
 * callers that read it themselves with positional reads (pread, io_uring):
 * sharing it keeps one descriptor a shard, so a dataset opens under the
 * same open-file limit for them as for the reader. Owned by the dataset
 * (closed by lf_dataset_close); -1 for a shard held in memory or out of
 * range. */
int lf_dataset_shard_fd(const lf_dataset *ds, uint32_t shard);

/* Index entries. Return NULL when the id is out of range. Blocks are numbered
 * dataset-wide too (0..blocks-1); info->shard says which file.
 * lf_dataset_sample is NULL too for a dataset read from its compact index
 * (lf_dataset_open_mapped, lf_dataset_open_lengths,
 * lf_dataset_open_index_file), which holds no per-sample entries: use
 * lf_dataset_sample_length and lf_dataset_sample_block, which answer for
 * every dataset (the block by a binary search over the blocks there). */
const lf_sample_info *lf_dataset_sample(const lf_dataset *ds, uint64_t sample);
const lf_block_info *lf_dataset_block(const lf_dataset *ds, uint64_t block);
uint64_t lf_dataset_sample_block(const lf_dataset *ds, uint64_t sample); /* dataset-wide block id */

/* Reads block `block`'s stored bytes into dst (pread). Returns the byte count
 * (== stored_size) or a negative status. Does not verify: see below. */
long lf_dataset_read_block(const lf_dataset *ds, uint64_t block, void *dst,
                           size_t dst_cap, lf_shard_error *err);

/* Reads up to `count` consecutive blocks from `first` with one pread: a
 * shard's blocks lie back to back, so small blocks need not cost a system
 * call each. Stops before the end of first's shard and before dst_cap would
 * be exceeded. Block k's bytes start at dst + (file_offset of k - file_offset
 * of first). Returns the number of blocks read (>= 1), or a negative status
 * (LF_SHARD_E_BUFFER when not even `first` fits). Does not verify. */
long lf_dataset_read_blocks(const lf_dataset *ds, uint64_t first, uint64_t count,
                            void *dst, size_t dst_cap, lf_shard_error *err);

/* ---- index-only datasets ----------------------------------------------- */

/* An index-only dataset is an index without bytes: samples' lengths and
 * blocks, for planning and for timing a server's start-up at sizes whose
 * bytes would not fit a disk (lf-shard synth --index-only). It has one
 * pseudo-shard named `name` (no descriptor: lf_dataset_shard_fd is -1),
 * blocks of block_samples consecutive samples, each sample's record laid
 * out as the writer would (the size table, then `length(arg, i)` elements
 * of schema's cost field). Everything that would read bytes
 * (lf_dataset_read_block(s), lf_block_decode) fails with LF_SHARD_E_ARG and
 * a message naming it. Returns 0 or a negative status (a block past the
 * format's raw limit, more than 2^32-1 samples or blocks). */
typedef uint64_t (*lf_index_length_fn)(void *arg, uint64_t sample);
int lf_dataset_open_index_only(const char *name, const lf_schema *schema, uint64_t samples,
                               uint32_t block_samples, lf_index_length_fn length, void *arg,
                               lf_dataset **out, lf_shard_error *err);
/* 1 for a dataset made by lf_dataset_open_index_only, else 0. */
int lf_dataset_index_only(const lf_dataset *ds);

/* ---- compact index (index.lfx) ------------------------------------------ */

/* A dataset directory may hold index.lfx beside its manifest: every
 * sample's cost length in 4 bytes and each block's sample count and raw
 * size in 8, checksummed and tied to the manifest by its checksum
 * (FORMAT.md, section 10). A planner maps it in place of the shard
 * indexes (lf_dataset_open_lengths), so it holds no per-sample table.
 * `lf-shard create`, `split` and `synth` write it; `lf-shard index DIR`
 * writes it for a dataset made before it existed. */
#define LF_INDEX_NAME "index.lfx"

/* Block b's sample count and raw bytes, for lf_index_write. */
typedef void (*lf_index_block_fn)(void *arg, uint64_t block, uint32_t *nsamples,
                                  uint32_t *raw_size);

typedef struct lf_index_spec {
    uint64_t samples, blocks;
    uint64_t manifest_hash;      /* the manifest's checksum; 0 without a manifest */
    lf_index_block_fn block;     /* called for blocks 0..blocks-1 in order */
    lf_index_length_fn length;   /* called for samples 0..samples-1 in order */
    void *arg;
} lf_index_spec;

/* Writes dir/index.lfx from spec (under a temporary name, renamed when
 * complete). Returns 0, or a status with err naming the file: LF_SHARD_E_ARG
 * when a length passes 2^32-1 or the blocks' counts do not sum to samples. */
int lf_index_write(const char *dir, const lf_index_spec *spec, lf_shard_error *err);

/* Opens the dataset in dir (every shard index checked) and writes its
 * index.lfx. Returns 0 or a status. */
int lf_dataset_write_index(const char *dir, lf_shard_error *err);

/* The index summary (index-summary.lfx beside index.lfx, FORMAT.md section
 * 11): what a planner would otherwise take from a pass over every length
 * at each start-up, taken once when the index is written: how many
 * samples have each length, and the planner's digest of the lengths and
 * blocks (opaque here: balancer/lf_plan.h, lf_plan_view_digest). It is
 * tied to the index.lfx it summarises by that file's data hash, so a
 * summary left beside a rewritten index is refused; lf_index_write
 * removes the one beside it. A directory without it opens as before. */
#define LF_INDEX_SUMMARY_NAME "index-summary.lfx"
#define LF_INDEX_SUMMARY_COUNTS_MAX 65536u

typedef struct lf_index_summary {
    uint64_t samples, blocks;    /* the index's */
    uint32_t ncounts;            /* distinct lengths counted (0: none, as where
                                    there are more than LF_INDEX_SUMMARY_COUNTS_MAX) */
    const uint64_t *length;      /* ncounts lengths, ascending */
    const uint64_t *count;       /* the samples of each (> 0; they sum to samples) */
    uint32_t digest_kind;        /* which digest (the planner's kind; 0: none) */
    uint64_t digest;             /* the planner's digest of the lengths and blocks */
} lf_index_summary;

/* Writes dir/index-summary.lfx for the index.lfx in dir, whose header
 * (checked) must hold s's samples and blocks; ncounts and digest as the
 * caller took them from that index (they are not checked against its
 * lengths here, nor when read). Returns 0, or a status with
 * err naming the file. */
int lf_index_summary_write(const char *dir, const lf_index_summary *s, lf_shard_error *err);

/* The summary of the dataset's index, read and checked at open (its own
 * hashes, version, counts, the index it was written for): NULL where there
 * is none (no index.lfx or no summary beside it, or several sources). */
const lf_index_summary *lf_dataset_index_summary(const lf_dataset *ds);

/* Opens datasets to read their bytes without a per-sample table (as
 * lf_dataset_open_many, n == 1 for one directory): each sample's length is
 * read where it lies, in its directory's index.lfx (mapped), and its
 * record's place in its block from the block's own bytes once decoded
 * (lf_block_records). The open reads each shard's footer, header and
 * block entries (32 bytes a block, each compared with index.lfx: one
 * written for another manifest, or that disagrees, is refused naming
 * `lf-shard index DIR`), not its sample entries: a shard's whole index is
 * read (in pieces), hashed and checked as lf_dataset_open checks it, each
 * sample's length compared with index.lfx, the first time one of its
 * blocks is decoded (lf_block_decode, or lf_dataset_check_block_index
 * before it), and a fault stops that decode with an error naming the
 * shard (and `lf-shard index DIR` where index.lfx disagrees); a failed
 * check is done again at the next decode. So the open costs O(shards +
 * blocks), and what it holds grows with blocks (40 bytes each), not
 * samples. lf_dataset_sample gives NULL. A directory without index.lfx is
 * opened as lf_dataset_open opens it, and so, when the directories are
 * several and any lacks one, is every one. */
int lf_dataset_open_mapped(const char *const *dirs, uint32_t n, lf_dataset **out,
                           lf_shard_error *err);

/* 0 when the index of block's shard is checked, checking it now if it was
 * not (a dataset opened by lf_dataset_open_mapped; any other is checked
 * at open and answers 0 at once); else the check's status, err naming the
 * shard. Safe from any number of threads (one check a shard; shards are
 * checked at once). lf-server calls it before decoding, so a fault in an
 * index stops the server rather than being quarantined as one block. */
int lf_dataset_check_block_index(const lf_dataset *ds, uint64_t block, lf_shard_error *err);

/* Every shard index checked now (lf_dataset_check_block_index for each
 * shard): lf_dataset_verify does it before reading any block. */
int lf_dataset_check_indexes(const lf_dataset *ds, lf_shard_error *err);

/* Opens dir for planning: its manifest and index.lfx, mapped, and no shard
 * file; lf_dataset_sample gives NULL (use lf_dataset_sample_length and
 * lf_dataset_sample_block) and every read of bytes is refused, naming the
 * dataset. A dataset without index.lfx is opened by lf_dataset_open; an
 * index.lfx written for another manifest is refused, naming the
 * `lf-shard index` command that rewrites it. */
int lf_dataset_open_lengths(const char *dir, lf_dataset **out, lf_shard_error *err);

/* Opens the index.lfx at path, of a directory without a manifest (an
 * index-only dataset written by lf-shard synth --index-only), as
 * lf_dataset_open_index_only would open it: one pseudo-shard named `name`
 * (in messages), lengths read in place. */
int lf_dataset_open_index_file(const char *path, const char *name, const lf_schema *schema,
                               lf_dataset **out, lf_shard_error *err);

/* Sample's cost length (as lf_dataset_sample's length), whichever way the
 * dataset was opened; 0 when the sample is out of range. */
uint64_t lf_dataset_sample_length(const lf_dataset *ds, uint64_t sample);

/* Every sample's cost length where one index.lfx holds them, read in place:
 * lf_dataset_samples(ds) u32s in the mapping, valid until
 * lf_dataset_close (a planner's view of them, balancer/lf_plan.h,
 * lf_plan_view). NULL where they are not so (a per-sample table, several
 * sources, a big-endian host): use lf_dataset_sample_length. */
const uint32_t *lf_dataset_mapped_lengths(const lf_dataset *ds);

/* The same for one source of a union (lf_dataset_open_many,
 * lf_dataset_join: each source's index.lfx mapped on its own): source s's
 * lf_dataset_source_first(s+1) - lf_dataset_source_first(s) lengths, its
 * sample k being the dataset's source_first(s) + k; NULL where they are
 * not so, or s out of range. lf_dataset_mapped_lengths is source 0's of
 * a dataset of one source. */
const uint32_t *lf_dataset_source_lengths(const lf_dataset *ds, uint32_t source);

/* Per-thread decompression state; allocation happens here, not per block. */
typedef struct lf_block_decoder lf_block_decoder;
int lf_block_decoder_create(lf_block_decoder **out);
void lf_block_decoder_free(lf_block_decoder *d);          /* accepts NULL */

/* Verifies the stored bytes against the block's checksum, then decompresses
 * into dst (capacity >= raw_size). Returns raw_size or a negative status; on
 * any failure dst holds no usable data. */
long lf_block_decode(lf_block_decoder *d, const lf_dataset *ds, uint64_t block,
                     const void *stored, size_t stored_size, void *dst,
                     size_t dst_cap, lf_shard_error *err);

/* A field of one sample, pointing into a decompressed block. */
typedef struct lf_field_view {
    const void *data;            /* first byte (alignment: none guaranteed) */
    uint32_t size;               /* bytes */
    uint32_t count;              /* elements: tokens, frames; 1 for jpeg/bytes/label */
} lf_field_view;

/* Locates the fields of `sample` inside its decompressed block `raw`
 * (raw_size bytes, as produced by lf_block_decode). out[] gets one view per
 * schema field. Every length is bounds-checked against the record. Without
 * a per-sample table (lf_dataset_open_mapped) it walks the block's records
 * before the sample, so a reader of many samples of a block uses
 * lf_block_records once and lf_record_fields for each. */
int lf_sample_fields(const lf_dataset *ds, uint64_t sample, const void *raw,
                     size_t raw_size, lf_field_view *out, lf_shard_error *err);

/* Where each record of decoded block `block` (raw, raw_size bytes) lies,
 * from the records themselves: each is its table of field sizes and then
 * the fields, and they tile the block (FORMAT.md, section 5), so record k
 * (the block's k-th sample) starts where record k-1 ends. offsets (the
 * block's nsamples + 1 entries) gets each record's first byte and then
 * raw_size. Checks that the records end exactly at the block's end, and,
 * where the dataset holds per-sample entries, that each lies where its
 * entry says. Returns 0, or LF_SHARD_E_FORMAT naming the shard, block and
 * sample. */
int lf_block_records(const lf_dataset *ds, uint64_t block, const void *raw, size_t raw_size,
                     uint32_t *offsets, lf_shard_error *err);

/* The fields of `sample` in its record (size bytes; with lf_block_records'
 * offsets, raw + offsets[k] and offsets[k+1] - offsets[k] for the block's
 * k-th sample), checked as lf_sample_fields checks them. */
int lf_record_fields(const lf_dataset *ds, uint64_t sample, const void *record, size_t size,
                     lf_field_view *out, lf_shard_error *err);

/* Checks every checksum of the dataset (manifest, headers, indexes, footers,
 * every block, and every record's field layout), and its index.lfx, when it
 * has one, against the shard indexes. Returns 0 when all hold;
 * on the first failure returns its status and err names shard, block and
 * sample. `progress`, when set, is called after each block. */
typedef void (*lf_verify_progress_fn)(void *arg, uint64_t blocks_done,
                                      uint64_t blocks_total, uint64_t bytes_done);
int lf_dataset_verify(const char *dir, lf_verify_progress_fn progress,
                      void *arg, lf_shard_error *err);

/* ---- writer ------------------------------------------------------------- */

typedef struct lf_writer_options {
    uint64_t shard_bytes;        /* start a new shard past this many stored bytes (0: 1 GiB) */
    uint32_t block_bytes;        /* raw bytes per block; 0: one record per block */
    int zstd_level;              /* 1..19 (0: 3) */
    int threads;                 /* compression threads (0: online CPUs) */
    const char *shard_prefix;    /* file name prefix (NULL: "shard") */
    int pieces;                  /* 1: samples may be pieces of longer documents
                                    (lf_writer_add_piece); written as version 2 */
} lf_writer_options;

/* One field's input for lf_writer_add. */
typedef struct lf_field_input {
    const void *data;            /* the field's bytes, laid out as on disk */
    size_t size;                 /* bytes; must be a multiple of the element size */
    uint32_t width, height;      /* JPEG only: image size, stored in the index */
} lf_field_input;

typedef struct lf_writer_stats {
    uint64_t samples;            /* records written */
    uint64_t blocks;
    uint32_t shards;
    uint64_t raw_bytes;          /* record bytes before compression */
    uint64_t stored_bytes;       /* shard bytes on disk, all regions */
} lf_writer_stats;

typedef void (*lf_writer_progress_fn)(void *arg, const lf_writer_stats *so_far);

typedef struct lf_writer lf_writer;

/* Creates a writer into directory `dir` (created if missing). Files are
 * written under temporary names (".NAME.tmp") and renamed when complete; the
 * manifest is renamed last, so a dataset without one is not a dataset.
 * The writer holds an flock on dir/.lf-writer.lock until finish or abort: a
 * second writer into the same directory fails (LF_SHARD_E_ARG, naming the
 * first one's pid). `dir` must be empty but for temporary files of an
 * earlier, interrupted writer (removed here: see lf_writer_stale_removed);
 * a manifest or any other file is refused, LF_SHARD_E_ARG, naming it. */
int lf_writer_create(const char *dir, const lf_schema *schema,
                     const lf_writer_options *opts, lf_writer **out,
                     lf_shard_error *err);

/* How many temporary files an earlier, interrupted writer had left in the
 * directory, which lf_writer_create removed; *bytes (optional) gets their
 * total size. */
uint32_t lf_writer_stale_removed(const lf_writer *w, uint64_t *bytes);

/* Adds one sample: fields[] has schema->nfields entries, in schema order. The
 * bytes are copied. Returns the sample's id or a negative status. */
int64_t lf_writer_add(lf_writer *w, const lf_field_input *fields,
                      lf_shard_error *err);

/* Adds one sample that is the piece of a document starting at its token
 * doc_offset (0: a whole document or its first piece); a piece at an offset
 * above 0 must follow the piece before it: the previous sample's doc_offset
 * plus its tokens (cost length) is doc_offset, else LF_SHARD_E_ARG. Needs
 * lf_writer_options.pieces. lf_writer_add is this with doc_offset 0. */
int64_t lf_writer_add_piece(lf_writer *w, const lf_field_input *fields, uint32_t doc_offset,
                            lf_shard_error *err);

/* Called from lf_writer_add about once per completed block (optional). */
void lf_writer_set_progress(lf_writer *w, lf_writer_progress_fn fn, void *arg);

/* Flushes everything, writes the manifest and renames it into place. Frees
 * the writer whatever the outcome; *stats (optional) gets the totals. */
int lf_writer_finish(lf_writer *w, lf_writer_stats *stats, lf_shard_error *err);

/* Abandons a writer: removes its temporary files, frees it. Accepts NULL. */
void lf_writer_abort(lf_writer *w);

#ifdef __cplusplus
}
#endif
#endif
