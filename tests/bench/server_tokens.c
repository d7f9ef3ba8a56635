/*
 * server_tokens — the token path's work without the server: on one thread,
 * every block verified and decompressed (lf_block_decode, into one reused
 * buffer) and its samples put through the layout's transform into a ring of
 * slots, block by block. This is the most one decode thread can deliver in
 * the layout on this machine: the zstd decode that `zstd -d` also does, plus
 * the tensor bytes the layout must write (i32 tokens, padding, positions),
 * with the sources still hot in cache and no queues, locks or messages.
 * lf-server's worker is held against it (server.sh) to tell the server's
 * own overhead from the cost of the layout.
 *
 * Modes, each a line "MODE RAW_BYTES CPU_SECONDS TENSOR_BYTES" (best of
 * ROUNDS, thread CPU time), tokens in DTYPE (i32, the server's default, or
 * u16, the stored width, as --token-dtype u16 delivers them):
 *   pad     each block's samples as one batch padded to its longest;
 *   pack    rows of SEQ_LEN tokens (greedy, in block order) with positions
 *           and cu_seqlens;
 *   tokens  the same rows without positions: little more than the tokens
 *           themselves, as the pad layout with --micro-batches writes;
 *   decode  the decode alone, so server.sh can split a mode's time into the
 *           decode and the transform, and scale the transform to the tensor
 *           bytes the server writes: these batches (a block's samples, in
 *           block order) pad and cut rows otherwise than the plan's.
 *
 *   server_tokens DATASET_DIR [SEQ_LEN [DTYPE]]
 */
#include "lf_shard.h"
#include "lf_tf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 3
#define RING_SLOTS 8             /* as many slots as two ranks' rings hold */

enum { MODE_PAD, MODE_PACK, MODE_TOKENS, MODE_DECODE, NMODES };
static const char *const mode_name[NMODES] = {"pad", "pack", "tokens", "decode"};

typedef struct bench {
    lf_dataset *ds;
    uint32_t field, in_dtype, seq_len;
    uint32_t dtype;              /* of the token tensor */
    unsigned char **stored;      /* every block's stored bytes, read beforehand */
    unsigned char *raw;          /* the decode buffer, reused */
    unsigned char *ring;         /* RING_SLOTS slots of slot bytes */
    size_t slot;
    lf_tf_seq *seqs;
    lf_block_decoder *dec;
    uint64_t tensor_bytes;
} bench;

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The largest slot any block's batch needs in any mode. */
static size_t slot_bytes(const lf_dataset *ds, uint32_t seq_len)
{
    size_t most = 0;
    for (uint64_t b = 0; b < lf_dataset_blocks(ds); b++) {
        const lf_block_info *bi = lf_dataset_block(ds, b);
        uint64_t longest = 0;
        for (uint32_t i = 0; i < bi->nsamples; i++) {
            uint64_t len = lf_dataset_sample(ds, bi->first_sample + i)->length;
            longest = len > longest ? len : longest;
        }
        /* pack: at most one row per sample plus one; 2 tensors of at most i32 */
        size_t pad = (size_t)(bi->nsamples * longest + bi->nsamples) * 4;
        size_t pack = (size_t)(bi->nsamples + 1) * seq_len * 8 + (2 * bi->nsamples + 2) * 4;
        size_t need = pad > pack ? pad : pack;
        most = need > most ? need : most;
    }
    return most;
}

/* Block b's samples: their views, rows assigned greedily for pack. Returns
 * the row count (pack) or 0 on failure. */
static uint32_t block_seqs(bench *bh, uint64_t b, uint32_t *longest)
{
    const lf_block_info *bi = lf_dataset_block(bh->ds, b);
    uint32_t row = 0, used = 0;
    *longest = 0;
    for (uint32_t i = 0; i < bi->nsamples; i++) {
        lf_field_view v[LF_MAX_FIELDS];
        lf_shard_error err;
        if (lf_sample_fields(bh->ds, bi->first_sample + i, bh->raw, bi->raw_size, v, &err) < 0) {
            fprintf(stderr, "server_tokens: %s\n", err.msg);
            return 0;
        }
        /* A sample longer than a row is cut to one (the planner would
         * make it an outlier); this set has none at the default 16384. */
        uint32_t n = v[bh->field].count < bh->seq_len ? v[bh->field].count : bh->seq_len;
        if (used + n > bh->seq_len) row++, used = 0;
        used += n;
        bh->seqs[i] = (lf_tf_seq){.tokens = v[bh->field].data, .count = n,
                                  .dtype = bh->in_dtype, .row = row};
        *longest = n > *longest ? n : *longest;
    }
    return row + 1;
}

/* Decodes block b and writes its batch into ring slot `slot`. */
static int one_block(bench *bh, int mode, uint64_t b, uint32_t slot)
{
    const lf_block_info *bi = lf_dataset_block(bh->ds, b);
    lf_shard_error err;
    if (lf_block_decode(bh->dec, bh->ds, b, bh->stored[b], bi->stored_size, bh->raw,
                        bi->raw_size, &err) < 0) {
        fprintf(stderr, "server_tokens: %s\n", err.msg);
        return -1;
    }
    if (mode == MODE_DECODE) return 0;
    uint32_t longest, rows = block_seqs(bh, b, &longest);
    if (!rows) return -1;
    unsigned char *s = bh->ring + (size_t)slot * bh->slot;
    lf_tf_tokens_out out = {.dtype = bh->dtype, .tokens = s, .tokens_cap = bh->slot};
    size_t es = lf_dtype_size(bh->dtype), is = 4; /* index tensors: i32 */
    if (mode == MODE_PAD) {
        size_t cells = (size_t)bi->nsamples * longest * es;
        out.tokens_cap = cells;
        out.lengths = s + cells;
        out.lengths_cap = bh->slot - cells;
        bh->tensor_bytes += cells + (size_t)bi->nsamples * is;
        return lf_tf_tokens_pad(&out, longest, 0, bh->seqs, bi->nsamples) < 0 ? -1 : 0;
    }
    size_t cells = (size_t)rows * bh->seq_len, ncu = ((size_t)bi->nsamples + rows + 1) * is;
    out.tokens_cap = cells * es;
    out.cu_seqlens = s + cells * es;
    out.cu_seqlens_cap = ncu;
    if (mode == MODE_PACK) {
        out.positions = s + cells * es + ncu;
        out.positions_cap = cells * is;
    }
    bh->tensor_bytes += cells * es + ncu + (mode == MODE_PACK ? cells * is : 0);
    return lf_tf_tokens_pack(&out, rows, bh->seq_len, 0, bh->seqs, bi->nsamples) < 0 ? -1 : 0;
}

/* One pass over every block: CPU seconds, or < 0 on failure. */
static double one_pass(bench *bh, int mode)
{
    bh->tensor_bytes = 0;
    double t0 = thread_cpu();
    for (uint64_t b = 0; b < lf_dataset_blocks(bh->ds); b++)
        if (one_block(bh, mode, b, (uint32_t)(b % RING_SLOTS)) < 0) return -1;
    return thread_cpu() - t0;
}

static int load(bench *bh, const char *dir)
{
    lf_shard_error err;
    if (lf_dataset_open(dir, &bh->ds, &err) < 0) {
        fprintf(stderr, "server_tokens: %s\n", err.msg);
        return -1;
    }
    const lf_schema *sc = lf_dataset_schema(bh->ds);
    uint32_t type = sc->fields[sc->cost_field].type;
    if (type != LF_FIELD_TOKENS_U16 && type != LF_FIELD_TOKENS_U32) {
        fprintf(stderr, "server_tokens: %s: not a token dataset\n", dir);
        return -1;
    }
    bh->field = sc->cost_field;
    bh->in_dtype = type == LF_FIELD_TOKENS_U16 ? LF_DTYPE_U16 : LF_DTYPE_U32;
    uint64_t nb = lf_dataset_blocks(bh->ds), most = 0;
    bh->stored = calloc(nb, sizeof *bh->stored);
    if (!bh->stored) return -1;
    for (uint64_t b = 0; b < nb; b++) {
        const lf_block_info *bi = lf_dataset_block(bh->ds, b);
        most = bi->nsamples > most ? bi->nsamples : most;
        bh->stored[b] = malloc(bi->stored_size);
        if (!bh->stored[b] ||
            lf_dataset_read_block(bh->ds, b, bh->stored[b], bi->stored_size, &err) < 0) {
            fprintf(stderr, "server_tokens: block %" PRIu64 ": %s\n", b,
                    bh->stored[b] ? err.msg : "out of memory");
            return -1;
        }
    }
    bh->slot = slot_bytes(bh->ds, bh->seq_len);
    bh->raw = malloc(lf_dataset_max_block_raw(bh->ds) + 1);
    bh->ring = malloc(bh->slot * RING_SLOTS);
    bh->seqs = calloc(most + 1, sizeof *bh->seqs);
    if (!bh->raw || !bh->ring || !bh->seqs || lf_block_decoder_create(&bh->dec) < 0) return -1;
    /* Touch the ring once, as the server's rings are touched by earlier batches. */
    memset(bh->ring, 0, bh->slot * RING_SLOTS);
    return 0;
}

int main(int argc, char **argv)
{
    const char *dtype = argc == 4 ? argv[3] : "i32";
    if (argc < 2 || argc > 4 || (strcmp(dtype, "i32") != 0 && strcmp(dtype, "u16") != 0)) {
        fprintf(stderr, "usage: server_tokens DATASET_DIR [SEQ_LEN [i32|u16]]\n");
        return 2;
    }
    bench bh = {.seq_len = argc >= 3 ? (uint32_t)strtoul(argv[2], NULL, 10) : 16384,
                .dtype = dtype[0] == 'u' ? LF_DTYPE_U16 : LF_DTYPE_I32};
    if (bh.seq_len == 0 || load(&bh, argv[1]) < 0) return 1;
    uint64_t raw = 0;
    for (uint64_t b = 0; b < lf_dataset_blocks(bh.ds); b++)
        raw += lf_dataset_block(bh.ds, b)->raw_size;
    for (int mode = 0; mode < NMODES; mode++) {
        double best = 1e30;
        for (int r = 0; r < ROUNDS; r++) {
            double t = one_pass(&bh, mode);
            if (t < 0) return 1;
            best = t < best ? t : best;
        }
        printf("%s %" PRIu64 " %.6f %" PRIu64 "\n", mode_name[mode], raw, best, bh.tensor_bytes);
    }
    return 0;
}
