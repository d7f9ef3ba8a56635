/*
 * parse_num.h — numbers (and words) from the command line, strictly: every
 * program's flags read them the same way.
 */
#ifndef LF_PARSE_NUM_H
#define LF_PARSE_NUM_H

#include <stddef.h>
#include <stdint.h>

/* A whole decimal (or 0x hexadecimal) integer in [lo, hi]: no sign for the
 * unsigned form, no leading space or zero-led octal, no trailing text, no
 * overflow. Returns 0 with *out set, or -1 leaving *out alone. */
int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);

/* The environment variable `name` as parse_u64 reads it (a test hook's
 * value): 1 with *out set where it is set and valid, else 0. */
int parse_env_u64(const char *name, uint64_t lo, uint64_t hi, uint64_t *out);

/* parse_u64 of the first n characters of s (a field before a separator). */
int parse_u64_head(const char *s, size_t n, uint64_t lo, uint64_t hi, uint64_t *out);

/* "WxH": two parse_u64 values in [lo, hi] (hi <= UINT32_MAX). */
int parse_dims(const char *s, uint64_t lo, uint64_t hi, uint32_t *w, uint32_t *h);

/* A finite decimal number in [lo, hi]: starts with a digit or '.', or a '-'
 * where lo < 0; no space, no trailing text. */
int parse_double(const char *s, double lo, double hi, double *out);

/* n parse_double values in [lo, hi] separated by commas ("1,0.5,0,2"),
 * n <= 8: all or nothing, *out (n entries) left alone on failure. */
int parse_doubles(const char *s, size_t n, double lo, double hi, double *out);

/* A byte count: decimal digits, then K, M, G or T (powers of 1024, either
 * case, an optional B after), in [lo, hi]. */
int parse_size(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* A word from words (NULL-terminated): its index in *out, or -1. */
int parse_word(const char *s, const char *const *words, uint32_t *out);

#endif
