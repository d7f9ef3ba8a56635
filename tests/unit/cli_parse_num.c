/*
 * cli_parse_num — common/parse_num.c, the flag number parser every
 * program uses: each accepted form and each refused one (a sign on an
 * unsigned, a space, octal-looking zeros, trailing text, overflow, a bad
 * size suffix) against the value or the refusal expected; the field
 * before a separator, WxH and decimal numbers likewise; parse_word takes
 * only a listed word, exactly.
 */
#include "parse_num.h"
#include "test.h"

typedef struct {
    const char *s;
    int ok;                      /* accepted */
    uint64_t want;               /* its value (as the bits of an int64 for i64) */
} num_case;

enum { KIND_U64, KIND_I64, KIND_SIZE };

/* Parses c->s as kind over the whole range; a refusal must leave the
 * output as it was (7). */
static void check(int kind, const num_case *c)
{
    static const char *const names[] = {"parse_u64", "parse_i64", "parse_size"};
    uint64_t u = 7;
    int64_t i = 7;
    int rc = kind == KIND_U64   ? parse_u64(c->s, 0, UINT64_MAX, &u)
             : kind == KIND_I64 ? parse_i64(c->s, INT64_MIN, INT64_MAX, &i)
                                : parse_size(c->s, 0, UINT64_MAX, &u);
    uint64_t got = kind == KIND_I64 ? (uint64_t)i : u;
    if (c->ok && (rc != 0 || got != c->want))
        TEST_FAIL_("%s('%s'): rc %d, %" PRIu64 ", want %" PRIu64, names[kind], c->s, rc, got,
                   c->want);
    if (!c->ok && (rc == 0 || got != 7))
        TEST_FAIL_("%s('%s') accepted as %" PRIu64, names[kind], c->s, got);
}

int main(void)
{
    static const num_case u64s[] = {
        {"0", 1, 0}, {"42", 1, 42}, {"0100", 1, 100} /* decimal, not octal 64 */,
        {"0x1F", 1, 31}, {"18446744073709551615", 1, UINT64_MAX},
        {"", 0, 0}, {" 1", 0, 0}, {" -1", 0, 0}, {"-1", 0, 0}, {"+1", 0, 0}, {"2x", 0, 0},
        {"1 ", 0, 0}, {"0x", 0, 0}, {"0x0x1", 0, 0}, {"1e3", 0, 0},
        {"18446744073709551616", 0, 0}};
    static const num_case i64s[] = {
        {"-1", 1, (uint64_t)-1}, {"-9223372036854775808", 1, (uint64_t)INT64_MIN},
        {"9223372036854775807", 1, INT64_MAX}, {"9223372036854775808", 0, 0},
        {"-9223372036854775809", 0, 0}, {"--1", 0, 0}, {"- 1", 0, 0}, {"+1", 0, 0},
        {"-", 0, 0}, {"", 0, 0}};
    static const num_case sizes[] = {
        {"16384", 1, 16384}, {"1K", 1, 1024}, {"2MB", 1, 2u << 20}, {"3g", 1, 3ull << 30},
        {"1T", 1, 1ull << 40}, {"", 0, 0}, {"K", 0, 0}, {"1.5G", 0, 0}, {"1Kx", 0, 0},
        {"-1K", 0, 0}, {"1P", 0, 0}, {"17179869184G", 0, 0}, {" 1K", 0, 0}};
    for (size_t k = 0; k < sizeof u64s / sizeof *u64s; k++) check(KIND_U64, &u64s[k]);
    for (size_t k = 0; k < sizeof i64s / sizeof *i64s; k++) check(KIND_I64, &i64s[k]);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) check(KIND_SIZE, &sizes[k]);
    uint64_t u = 7;
    int64_t i = 7;
    ASSERT_NE(parse_u64("0", 1, 10, &u), 0);  /* below lo */
    ASSERT_NE(parse_u64("11", 1, 10, &u), 0); /* above hi */
    ASSERT_NE(parse_i64("-1", 0, 10, &i), 0);
    ASSERT_EQ(u, 7);
    ASSERT_EQ(i, 7);
    /* a field before a separator; WxH; a decimal number */
    ASSERT_EQ(parse_u64_head("42,7", 2, 0, 100, &u), 0);
    ASSERT_EQ(u, 42);
    ASSERT_NE(parse_u64_head("42,7", 0, 0, 100, &u), 0);
    ASSERT_NE(parse_u64_head("4x", 2, 0, 100, &u), 0);
    uint32_t dw = 7, dh = 7;
    ASSERT_EQ(parse_dims("224x160", 1, 1024, &dw, &dh), 0);
    ASSERT_EQ(dw, 224);
    ASSERT_EQ(dh, 160);
    static const char *const bad_dims[] = {"1025x10", "224x224junk", "-1x224", "0x5", "224",
                                           "x224", "224x", " 224x224"};
    for (size_t k = 0; k < sizeof bad_dims / sizeof *bad_dims; k++)
        ASSERT_NE(parse_dims(bad_dims[k], 1, 1024, &dw, &dh), 0);
    ASSERT_EQ(dw, 224);
    double d = 7;
    ASSERT_EQ(parse_double(".25", 0, 1, &d), 0);
    ASSERT_DBL_NEAR(d, 0.25, 0);
    ASSERT_EQ(parse_double("-1.5e1", -100, 0, &d), 0);
    ASSERT_DBL_NEAR(d, -15, 0);
    static const char *const bad_d[] = {"", " 0.5", "+0.5", "-0", "1.5", "nan", "inf",
                                        "0.5x", "1e999"};
    for (size_t k = 0; k < sizeof bad_d / sizeof *bad_d; k++)
        ASSERT_NE(parse_double(bad_d[k], 0, 1, &d), 0);
    ASSERT_DBL_NEAR(d, -15, 0);
    double c[4] = {7, 7, 7, 7};
    ASSERT_EQ(parse_doubles("16,0.0001,0,2.5", 4, 0, 1e9, c), 0);
    ASSERT_DBL_NEAR(c[1], 0.0001, 0);
    ASSERT_DBL_NEAR(c[3], 2.5, 0);
    static const char *const bad_c[] = {"1,2,3", "1,2,3,4,5", "1,,3,4", "1,2,3,4,", " 1,2,3,4",
                                        "1,2,3,-4", "1,2,nan,4", ",1,2,3"};
    for (size_t k = 0; k < sizeof bad_c / sizeof *bad_c; k++)
        ASSERT_NE(parse_doubles(bad_c[k], 4, 0, 1e9, c), 0);
    ASSERT_DBL_NEAR(c[0], 16, 0); /* left alone by the refusals */
    static const char *const words[] = {"bilinear", "area", NULL};
    uint32_t w = 7;
    ASSERT_EQ(parse_word("area", words, &w), 0);
    ASSERT_EQ(w, 1);
    ASSERT_NE(parse_word("Area", words, &w), 0);
    ASSERT_NE(parse_word("", words, &w), 0);
    ASSERT_EQ(w, 1);
    printf("parse_u64, parse_i64, parse_size: %zu forms accepted or refused as expected\n",
           sizeof u64s / sizeof *u64s + sizeof i64s / sizeof *i64s + sizeof sizes / sizeof *sizes);
    return 0;
}
