/*
 * synth.h — the synthetic sample generators behind `lf-shard synth`.
 *
 * A sample's content is a pure function of (parameters, seed, sample index):
 * each sample seeds its own random stream, so the generator threads may take
 * samples in any order and the dataset is still byte-identical for a seed.
 */
#ifndef LF_SHARD_SYNTH_H
#define LF_SHARD_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "lf_shard.h"
#include "synth_rng.h"

typedef struct synth_params {
    uint64_t samples;
    uint64_t seed;
    double len_median;           /* tokens or frames per sample: lognormal */
    double len_sigma;
    uint64_t len_min, len_max;
    uint32_t vocab;              /* tokens: ids are 0..vocab-1 */
    uint32_t classes;            /* images, frames: labels are 0..classes-1 */
    uint32_t min_side, max_side; /* images: pixels per side */
    uint32_t width;              /* frames: values per frame */
    uint32_t frame_type;         /* frames: LF_FIELD_FRAMES_F32/F16/I16 */
} synth_params;

/* One generated sample; its buffers are reused across samples. */
typedef struct synth_slot {
    uint8_t *data;               /* the main field's bytes */
    size_t cap;
    uint8_t label[8];            /* little-endian i64 */
    lf_field_input in[2];        /* ready for lf_writer_add */
    uint64_t bytes;              /* input bytes this sample counts for */
    char err[160];               /* set when the generator fails */
} synth_slot;

void synth_put_label(synth_slot *s, uint64_t label);
/* Grows s->data to at least n bytes; -1 (with s->err) on failure. */
int synth_reserve(synth_slot *s, size_t n);

/* A kind of synthetic data. thread_new/free may be NULL. */
typedef struct synth_kind {
    const char *name;
    uint32_t default_block;      /* --block-size when not given */
    uint32_t batch;              /* samples generated between writer calls, at most */
    void (*schema)(const synth_params *p, lf_schema *out);
    void *(*thread_new)(const synth_params *p);
    void (*thread_free)(void *t);
    int (*gen)(const synth_params *p, void *t, uint64_t index, synth_slot *s);
    /* The largest record a sample can make under p, and in `opts` (n
     * bytes; NULL with n 0 for none) the options that set it; NULL where
     * no option can pass LF_MAX_RECORD_BYTES (it also sizes batches). */
    uint64_t (*max_record)(const synth_params *p, char *opts, size_t n);
} synth_kind;

extern const synth_kind synth_tokens, synth_images, synth_frames;

#endif
