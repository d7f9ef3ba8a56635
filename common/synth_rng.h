/*
 * synth_rng.h — the per-sample random streams of synthetic data, shared by
 * `lf-shard synth` (which writes the samples) and `lf-plan --synth` (which
 * plans their lengths in memory), so both draw the same lengths for a seed.
 *
 * Sample i's stream is seeded from (seed, i) alone, so samples can be made
 * in any order, on any thread, and still come out the same.
 */
#ifndef LF_SYNTH_RNG_H
#define LF_SYNTH_RNG_H

#include <stdint.h>

/* A deterministic 64-bit random stream (splitmix64). */
typedef struct synth_rng {
    uint64_t s;
} synth_rng;

void synth_rng_seed(synth_rng *r, uint64_t seed, uint64_t index);
uint64_t synth_rng_next(synth_rng *r);
double synth_rng_unit(synth_rng *r);                /* [0, 1) */
uint64_t synth_rng_below(synth_rng *r, uint64_t n); /* [0, n), n > 0 */

/* A lognormal length round(median * exp(sigma * N(0,1))) clamped to
 * [min, max]: a sample's token or frame count. */
uint64_t synth_rng_length(synth_rng *r, double median, double sigma, uint64_t min,
                          uint64_t max);

#endif
