/*
 * shard_internal.h — what the writer, the reader and the fuzz target share
 * inside shard_format/: the on-disk layout (FORMAT.md in constants), the
 * little-endian codecs for header, footer, index entries and manifest, and
 * the entry point that opens a shard from memory. Not installed, not part of
 * the public API.
 */
#ifndef LF_SHARD_INTERNAL_H
#define LF_SHARD_INTERNAL_H

#include "lf_shard.h"

#include <stdarg.h>
#include <stdbool.h>

/* ---- layout constants (FORMAT.md) ------------------------------------- */

#define SHARD_MAGIC "LFSHARD\0"          /* header bytes 0..7 */
#define FOOTER_MAGIC "LFSFOOT\0"         /* footer bytes 0..7 */
#define MANIFEST_MAGIC "LFMANIF\0"       /* manifest bytes 0..7 */
#define MAGIC_LEN 8

#define HEADER_SIZE LF_SHARD_ALIGN       /* the header region, blocks follow */
#define HEADER_SCHEMA_AT 128             /* schema inside the header */
#define SCHEMA_FIELD_SIZE 40             /* name[32] type u32 row_width u32 */
#define SCHEMA_SIZE (8 + LF_MAX_FIELDS * SCHEMA_FIELD_SIZE)
#define FOOTER_SIZE 64
#define BLOCK_ENTRY_SIZE 32
#define SAMPLE_ENTRY_SIZE 32
#define MANIFEST_SCHEMA_AT 64
#define MANIFEST_SHARDS_AT 768
#define MANIFEST_ENTRY_SIZE 96
#define MANIFEST_NAME_MAX 64             /* shard file name, NUL included */

/* Largest decompressed block (and so largest record) the format allows;
 * keeps every in-block offset and size in u32 and block sizes in a long. */
#define MAX_BLOCK_RAW LF_MAX_RECORD_BYTES
/* Largest stored block: compressed bound of MAX_BLOCK_RAW plus padding. */
#define MAX_BLOCK_STORED (MAX_BLOCK_RAW + (MAX_BLOCK_RAW >> 7) + 2 * LF_SHARD_ALIGN)
/* A manifest larger than this is refused before it is read. */
#define MAX_MANIFEST_BYTES (64u << 20)

/* zstd skippable frame that pads a block to the 4 KiB boundary. */
#define PAD_FRAME_MAGIC 0x184D2A5Eu
#define PAD_FRAME_HEADER 8

/* ---- little-endian access ---------------------------------------------- */

static inline uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static inline void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

static inline void put_u64(uint8_t *p, uint64_t v)
{
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

/* xxh3-64 with seed 0, the only checksum of the format (hash.c). */
uint64_t shard_hash(const void *data, size_t size);

/* GCC on x86-64 also builds an AVX2 copy, used when the CPU has AVX2. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SHARD_HASH_AVX2 1
uint64_t shard_hash_avx2(const void *data, size_t size);
#else
#define SHARD_HASH_AVX2 0
#endif

/* ---- errors ------------------------------------------------------------ */

/* Fills err (when set) with status and a printf-style message; returns status. */
int shard_fail(lf_shard_error *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- header, footer, index entries, manifest ---------------------------- */

typedef struct shard_header {
    uint32_t version;            /* the format version (1 or 2) */
    uint32_t shard_no;           /* position in the manifest */
    uint64_t first_sample;       /* dataset-wide id of the shard's sample 0 */
    uint64_t nsamples;
    uint64_t nblocks;
    uint64_t index_offset;       /* index region: block table then sample table */
    uint64_t index_size;
    uint64_t raw_bytes;          /* sum of the blocks' raw sizes */
    lf_schema schema;
} shard_header;

typedef struct shard_footer {
    uint32_t version;            /* the header's (encode: the writer sets it) */
    uint64_t index_offset;
    uint64_t index_size;
    uint64_t header_hash;        /* xxh3 of the whole header region */
    uint64_t index_hash;         /* xxh3 of the index region */
    uint64_t file_size;
    uint64_t self_hash;          /* xxh3 of footer bytes 0..55 */
} shard_footer;

/* One block entry as stored: shard-local sample numbering. */
typedef struct shard_block_entry {
    uint64_t file_offset;
    uint32_t stored_size;
    uint32_t raw_size;
    uint64_t checksum;
    uint32_t first_sample;       /* shard-local */
    uint32_t nsamples;
} shard_block_entry;

typedef struct manifest_shard {
    char name[MANIFEST_NAME_MAX];
    uint64_t samples;
    uint64_t blocks;
    uint64_t file_size;
    uint64_t footer_hash;        /* footer self_hash: names the shard's content */
} manifest_shard;

typedef struct manifest {
    uint32_t version;            /* the format version (1 or 2), as every shard's */
    uint32_t nshards;
    uint64_t samples, blocks, raw_bytes, stored_bytes;
    lf_schema schema;
    manifest_shard *shards;      /* nshards entries (malloc'd by the decoder) */
} manifest;

void schema_encode(const lf_schema *s, uint8_t *out);
/* Decodes and validates; checks unused bytes are zero. *why gets a reason. */
int schema_decode(const uint8_t *in, lf_schema *s, const char **why);

void header_encode(const shard_header *h, uint8_t out[HEADER_SIZE]);
int header_decode(const uint8_t in[HEADER_SIZE], shard_header *h, const char **why);

void footer_encode(shard_footer *f, uint8_t out[FOOTER_SIZE]);  /* sets self_hash */
/* Checks magic, version, self hash (unless skip_hash). */
int footer_decode(const uint8_t in[FOOTER_SIZE], bool skip_hash, shard_footer *f,
                  const char **why);

void block_entry_encode(const shard_block_entry *b, uint8_t out[BLOCK_ENTRY_SIZE]);
void block_entry_decode(const uint8_t in[BLOCK_ENTRY_SIZE], shard_block_entry *b);
/* Sample entry: the block number is shard-local. */
void sample_entry_encode(const lf_sample_info *s, uint8_t out[SAMPLE_ENTRY_SIZE]);
/* Version 1 entries must hold 0 where version 2 keeps doc_offset. */
int sample_entry_decode(const uint8_t in[SAMPLE_ENTRY_SIZE], uint32_t version,
                        lf_sample_info *s);

/* Bytes the encoded manifest takes for nshards shards. */
size_t manifest_size(uint32_t nshards);
void manifest_encode(const manifest *m, uint8_t *out);
/* Decodes and checks a manifest held in memory (size bytes): checksum (unless
 * skip_hash), layout, names, totals; messages name `path`. m->shards is
 * malloc'd on success. */
int manifest_decode(const uint8_t *in, size_t size, bool skip_hash, const char *path,
                    manifest *m, lf_shard_error *err);

/* ---- compact index (index.lfx, FORMAT.md section 10) -------------------- */

#define COMPACT_MAGIC "LFINDEX\0"
#define COMPACT_VERSION 1
#define COMPACT_HEADER_SIZE 64
#define COMPACT_BLOCK_ENTRY 8            /* nsamples u32, raw_size u32 */
#define COMPACT_LENGTH_BYTES 4           /* one u32 cost length a sample */

/* A compact index mapped read-only and checked (compact_map): its block
 * table and lengths are read in place, never copied. */
typedef struct compact_index {
    void *base;                  /* the mapping, for munmap (NULL when unmapped) */
    const uint8_t *map;          /* the whole file */
    size_t size;
    uint64_t samples, blocks;
    const uint8_t *block_table;  /* blocks entries of COMPACT_BLOCK_ENTRY bytes */
    const uint8_t *lengths;      /* samples u32 lengths */
    bool has_summary;            /* index-summary.lfx beside it, read and checked */
    lf_index_summary summary;    /* its contents (length and count malloc'd) */
} compact_index;

/* Checks the size bytes of an index.lfx: self hash, magic, version, exact
 * size, data hash (the two hashes not when skip_hashes: fuzzing only), that
 * it was written for the manifest whose checksum is manifest_hash (0: a
 * dataset without manifest), and that its blocks' counts sum to its
 * samples; fills *ci (base NULL: bytes are the caller's). Returns 0 or a
 * status with err naming path. */
int compact_check(const uint8_t *bytes, size_t size, uint64_t manifest_hash, bool skip_hashes,
                  const char *path, compact_index *ci, lf_shard_error *err);
/* Maps path and checks it as compact_check does; then reads and checks
 * the summary beside it (index-summary.lfx, FORMAT.md section 11), where
 * there is one. */
int compact_map(const char *path, uint64_t manifest_hash, compact_index *ci,
                lf_shard_error *err);
void compact_unmap(compact_index *ci);   /* accepts an unmapped one */
/* Drops the mapping's pages from the process (madvise MADV_DONTNEED: they
 * stay in the page cache, read back from there when touched): once the
 * open has read the block table into its own, the 8 bytes a block it
 * touched (125 MB at 10^9 samples in blocks of 64) would otherwise stay
 * in its resident memory. */
void compact_release(const compact_index *ci);

static inline uint32_t compact_length(const compact_index *ci, uint64_t sample)
{
    return get_u32(ci->lengths + sample * COMPACT_LENGTH_BYTES);
}

/* ---- record layout ------------------------------------------------------ */

/* A record is a table of nfields u32 field sizes followed by the fields'
 * bytes in schema order. The cost length of a record's fields (tokens,
 * frames, bytes; 1 for a label; width * height for a JPEG). */
uint64_t record_cost_length(const lf_schema *s, uint32_t cost_size,
                            uint32_t width, uint32_t height);

/* ---- reader internals -------------------------------------------------- */

/* Skip every checksum comparison (fuzzing only, so the fuzzer can reach the
 * checks behind them). */
#define SHARD_OPEN_SKIP_CHECKSUMS 1u

/* Opens one shard held in memory as a one-shard dataset (no manifest).
 * `data` must outlive the dataset; read_block copies from it. The same
 * parsing code as lf_dataset_open. */
int lf_dataset_open_memory(const void *data, size_t size, unsigned flags,
                           lf_dataset **out, lf_shard_error *err);

#endif
