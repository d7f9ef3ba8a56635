/*
 * synth_rng.c — per-sample random streams for synthetic data (synth_rng.h).
 */
#include "synth_rng.h"

#include <math.h>

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void synth_rng_seed(synth_rng *r, uint64_t seed, uint64_t index)
{
    r->s = mix64(mix64(seed ^ 0x6c662d7368617264ull) ^ index);
}

uint64_t synth_rng_next(synth_rng *r)
{
    r->s += 0x9e3779b97f4a7c15ull;
    return mix64(r->s);
}

double synth_rng_unit(synth_rng *r)
{
    return (double)(synth_rng_next(r) >> 11) * 0x1p-53;
}

uint64_t synth_rng_below(synth_rng *r, uint64_t n)
{
    return synth_rng_next(r) % n;   /* bias below 2^-40 for our n: irrelevant */
}

uint64_t synth_rng_length(synth_rng *r, double median, double sigma, uint64_t min,
                          uint64_t max)
{
    double u1 = 1.0 - synth_rng_unit(r);          /* (0, 1]: log is finite */
    double u2 = synth_rng_unit(r);
    double z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
    double len = round(median * exp(sigma * z));
    if (len < (double)min)
        return min;
    if (len > (double)max)
        return max;
    return (uint64_t)len;
}
