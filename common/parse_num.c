/*
 * parse_num.c — strict integer parsing for command-line flags.
 *
 * strtoull alone takes " -1" as 2^64 - 1, "0100" (base 0) as 64 and "2x" as
 * 2 where the caller forgets the end pointer: a typo would quietly become
 * another run. Here the text must be the number and nothing else.
 */
#include "parse_num.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The digits of s (after any '-' the caller allows): "0x" then hex, else
 * decimal; NULL when s does not start with a digit. */
static const char *digits(const char *s, int *base)
{
    *base = s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10;
    const char *d = *base == 16 ? s + 2 : s;
    int ok = *base == 16 ? isxdigit((unsigned char)d[0]) && d[1] != 'x' && d[1] != 'X'
                         : isdigit((unsigned char)d[0]);
    return ok ? d : NULL;
}

int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    int base;
    const char *d = digits(s, &base);
    if (!d) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(d, &end, base);
    if (*end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int parse_env_u64(const char *name, uint64_t lo, uint64_t hi, uint64_t *out)
{
    const char *v = getenv(name);
    return v && parse_u64(v, lo, hi, out) == 0;
}

int parse_u64_head(const char *s, size_t n, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char num[32];
    if (n >= sizeof num) return -1;
    memcpy(num, s, n);
    num[n] = '\0';
    return parse_u64(num, lo, hi, out);
}

int parse_dims(const char *s, uint64_t lo, uint64_t hi, uint32_t *w, uint32_t *h)
{
    const char *x = strchr(s, 'x');
    uint64_t a, b;
    if (!x || parse_u64_head(s, (size_t)(x - s), lo, hi, &a) || parse_u64(x + 1, lo, hi, &b))
        return -1;
    *w = (uint32_t)a;
    *h = (uint32_t)b;
    return 0;
}

int parse_double(const char *s, double lo, double hi, double *out)
{
    const char *d = s[0] == '-' && lo < 0 ? s + 1 : s;
    if (!isdigit((unsigned char)d[0]) && d[0] != '.') return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno || !isfinite(v) || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

int parse_doubles(const char *s, size_t n, double lo, double hi, double *out)
{
    double v[8];
    if (n == 0 || n > sizeof v / sizeof *v) return -1;
    for (size_t i = 0; i < n; i++) {
        size_t len = i + 1 < n ? strcspn(s, ",") : strlen(s);
        char field[64];
        if ((i + 1 < n && s[len] != ',') || len >= sizeof field) return -1;
        memcpy(field, s, len);
        field[len] = '\0';
        if (parse_double(field, lo, hi, &v[i])) return -1;
        s += len + 1;
    }
    memcpy(out, v, n * sizeof *v);
    return 0;
}

int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    int neg = s[0] == '-';
    uint64_t mag, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (parse_u64(s + neg, 0, limit, &mag)) return -1;
    int64_t v = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    if (v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int parse_size(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    size_t n = strspn(s, "0123456789");
    const char *suffix = s + n;
    int shift = 0;
    switch (*suffix) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    case 'T': case 't': shift = 40; break;
    default: break;
    }
    const char *rest = suffix + (shift > 0);
    if (shift && (*rest == 'B' || *rest == 'b')) rest++;
    uint64_t v;
    if (*rest || parse_u64_head(s, n, 0, UINT64_MAX >> shift, &v)) return -1;
    v <<= shift;
    if (v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int parse_word(const char *s, const char *const *words, uint32_t *out)
{
    for (uint32_t i = 0; words[i]; i++)
        if (strcmp(s, words[i]) == 0) {
            *out = i;
            return 0;
        }
    return -1;
}
