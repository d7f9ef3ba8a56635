/*
 * index_only.h — index-only synthetic datasets: a directory holding one
 * small text file, index-only.lfi, that describes N samples of
 * `lf-shard synth tokens` (their lengths drawn from the same per-sample
 * streams, common/synth_rng.h) in blocks of K consecutive samples, and no
 * bytes at all. lf-plan and lf-server open it as they open a dataset
 * (dataset_open), so planning and start-up can be measured at 10^8-10^9
 * samples on a machine whose disk would not hold their bytes; a read of a
 * batch's bytes fails, naming the dataset (lf_dataset_open_index_only).
 *
 * The file: the line `levelfeed-index-only 1` (the version), then one
 * `KEY VALUE` per line, each key once: samples, seed, len-median,
 * len-sigma, len-min, len-max, block-samples. Written by
 * `lf-shard synth tokens --index-only`, with index.lfx beside it (the
 * lengths drawn once, 4 bytes a sample: shard_format/FORMAT.md, section
 * 10), which opening maps rather than draw every length again into a
 * per-sample table; a directory without it (made before it) still opens.
 */
#ifndef LF_INDEX_ONLY_H
#define LF_INDEX_ONLY_H

#include <stddef.h>
#include <stdint.h>

#include "lf_shard.h"

#define INDEX_ONLY_NAME "index-only.lfi"

typedef struct index_only {
    uint64_t samples, seed;
    double len_median, len_sigma;     /* lognormal tokens a sample */
    uint64_t len_min, len_max;
    uint32_t block_samples;           /* consecutive samples a block */
} index_only;

/* Writes dir/index-only.lfi (dir created if missing; it must not hold a
 * dataset already). Returns 0, or -1 with why naming the file and the
 * reason. */
int index_only_write(const char *dir, const index_only *d, char *why, size_t why_size);

/* dataset_open's flags: open a dataset of bytes from its index.lfx alone
 * (lf_dataset_open_lengths), as a planner that reads none of them does;
 * or to read its bytes with its lengths mapped from index.lfx and no
 * per-sample table (lf_dataset_open_mapped), as lf-server does. */
#define DATASET_LENGTHS 1u
#define DATASET_MAPPED 2u

/* Opens dir: as an index-only dataset when it holds index-only.lfi (its
 * lengths mapped from index.lfx when that is there, else drawn again from
 * the description), else with lf_dataset_open (lf_dataset_open_lengths
 * under DATASET_LENGTHS, lf_dataset_open_mapped under DATASET_MAPPED).
 * Returns what those return; err names the file and line of a malformed
 * description. */
int dataset_open(const char *dir, unsigned flags, lf_dataset **out, lf_shard_error *err);

#endif
