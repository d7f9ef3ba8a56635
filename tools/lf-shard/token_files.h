/*
 * token_files.h — token ids that were tokenized before they reached
 * lf-shard: Megatron-LM / NeMo indexed datasets (PREFIX.bin + PREFIX.idx)
 * and flat arrays of ids (.npy, or raw little-endian u16/u32 as nanoGPT
 * writes them), read document by document for `create tokens`.
 */
#ifndef LF_SHARD_TOKEN_FILES_H
#define LF_SHARD_TOKEN_FILES_H

#include <stddef.h>
#include <stdint.h>

/* A growing buffer of little-endian ids, each `width` (2 or 4) bytes. */
typedef struct token_buf {
    uint8_t *p;
    size_t cap;                  /* bytes */
    size_t count;                /* ids */
    size_t width;
} token_buf;

/* Appends one id (which must fit the width); -ENOMEM when it cannot grow. */
int token_buf_push(token_buf *b, uint32_t id);

enum { TOKEN_FILE_MEGATRON, TOKEN_FILE_ARRAY };

/* One opened input, both its files mapped read-only. */
typedef struct token_file {
    int kind;                    /* TOKEN_FILE_* */
    char *path;                  /* the ids' file (PREFIX.bin, the array) */
    char *idx_path;              /* Megatron: PREFIX.idx */
    uint8_t *data;               /* the ids' file, whole (mapped read-only) */
    size_t data_size;
    uint8_t *idx;                /* Megatron: the index, whole (read-only) */
    size_t idx_size;
    size_t elem;                 /* bytes per stored id: 1, 2, 4 or 8 */
    int is_signed;               /* a stored id may be negative (then refused) */
    size_t ids_off;              /* array: first id's byte */
    uint64_t nids;               /* array: ids in it */
    uint8_t *offs_map;           /* array: --array-offsets, whole (read-only) */
    size_t offs_size;
    char *offs_path;
    const uint8_t *offs;         /* its first boundary (i64/u64) */
    uint64_t noffs;              /* boundaries: documents + 1 */
    uint64_t nseq;               /* Megatron: sequences (the index's entries) */
    uint64_t ndocs;              /* Megatron: documents */
    uint64_t doc;                /* reading position: next document ... */
    uint64_t pos;                /* ... or, in an array, next id */
} token_file;

/* Opens PREFIX.idx and PREFIX.bin and checks the whole index against the
 * data file (every sequence inside it, document boundaries in order), so
 * reading later cannot run past a file. Returns 0, or -1 with why[] naming
 * the file and the byte offset of what is wrong. */
int token_file_open_megatron(token_file *f, const char *prefix, char *why, size_t why_len);

/* Opens a flat array: a .npy file (told by its magic) of '<u2' or '<u4'
 * ids, or else raw little-endian ids `raw_width` (2 or 4) bytes wide. */
int token_file_open_array(token_file *f, const char *path, size_t raw_width, char *why,
                          size_t why_len);

/* Cuts an opened array into documents at the boundaries in a .npy of
 * int64/uint64 (np.cumsum of the lengths after a 0: first 0, in order, last
 * the array's length), checked whole; -1 with why[] naming file and byte. */
int token_file_set_offsets(token_file *f, const char *path, char *why, size_t why_len);

/* The bytes of ids the file holds (for the progress meter and summary). */
uint64_t token_file_bytes(const token_file *f);

/* Whether every id it can hold fits u16 (stored as u8 or u16). */
int token_file_fits_u16(const token_file *f);

/* Appends the next document's ids to b (converted to b->width). A Megatron
 * document is its sequences in order; an array is cut after each `eos` id
 * (UINT64_MAX: the whole array is one document), or at its offsets. Returns 1 with a document,
 * 0 at the end, or -1 with why[] naming the file and the byte offset of the
 * id that does not fit. *at gets the document's first id's byte offset. */
int token_file_next(token_file *f, uint64_t eos, token_buf *b, uint64_t *at, char *why,
                    size_t why_len);

void token_file_close(token_file *f);

#endif
