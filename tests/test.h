/*
 * test.h — the few helpers every levelfeed test program uses.
 *
 * One program per test: exit 0 pass, 1 fail, 77 skip (tests/run.sh reads
 * these). Asserts print both sides and the place, then exit 1, so a failing
 * test says what it saw without a debugger.
 */
#ifndef LF_TEST_H
#define LF_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TEST_SKIP_CODE 77

#define TEST_FAIL_(...)                                                       \
    do {                                                                      \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                       \
        fprintf(stderr, __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                  \
        exit(1);                                                              \
    } while (0)

/* Integer comparisons print both sides as signed 64-bit values. A floating
 * operand would be truncated (1.02 > 1.002 read as 1 > 1), so it is refused
 * when the test compiles: compare doubles with ASSERT_DBL_LT / ASSERT_DBL_LE. */
#define TEST_IS_FLOAT_(x) _Generic((x), float: 1, double: 1, long double: 1, default: 0)
#define ASSERT_CMP_(a, op, b)                                                 \
    do {                                                                      \
        _Static_assert(!TEST_IS_FLOAT_(a) && !TEST_IS_FLOAT_(b),              \
                       "integer ASSERT given a floating-point operand");      \
        long long a_ = (long long)(a), b_ = (long long)(b);                   \
        if (!(a_ op b_))                                                      \
            TEST_FAIL_("ASSERT(%s %s %s): %lld vs %lld", #a, #op, #b, a_, b_); \
    } while (0)
#define ASSERT_EQ(a, b) ASSERT_CMP_(a, ==, b)
#define ASSERT_NE(a, b) ASSERT_CMP_(a, !=, b)
#define ASSERT_LT(a, b) ASSERT_CMP_(a, <, b)
#define ASSERT_LE(a, b) ASSERT_CMP_(a, <=, b)
#define ASSERT_GT(a, b) ASSERT_CMP_(a, >, b)
#define ASSERT_GE(a, b) ASSERT_CMP_(a, >=, b)

#define ASSERT_TRUE(x)                                                        \
    do {                                                                      \
        if (!(x)) TEST_FAIL_("ASSERT(%s) is false", #x);                      \
    } while (0)

/* Floating-point comparisons print both sides with 9 significant digits. */
#define ASSERT_DBL_CMP_(a, op, b)                                             \
    do {                                                                      \
        double a_ = (double)(a), b_ = (double)(b);                            \
        if (!(a_ op b_))                                                      \
            TEST_FAIL_("ASSERT(%s %s %s): %.9g vs %.9g", #a, #op, #b, a_, b_); \
    } while (0)
#define ASSERT_DBL_LT(a, b) ASSERT_DBL_CMP_(a, <, b)
#define ASSERT_DBL_LE(a, b) ASSERT_DBL_CMP_(a, <=, b)

#define ASSERT_DBL_NEAR(a, b, tol)                                            \
    do {                                                                      \
        double a_ = (double)(a), b_ = (double)(b);                            \
        if (!(a_ - b_ <= (tol) && b_ - a_ <= (tol)))                          \
            TEST_FAIL_("ASSERT(|%s - %s| <= %s): %.9g vs %.9g", #a, #b, #tol, \
                       a_, b_);                                               \
    } while (0)

#define ASSERT_STR_EQ(a, b)                                                   \
    do {                                                                      \
        const char *a_ = (a), *b_ = (b);                                      \
        if (strcmp(a_, b_) != 0)                                              \
            TEST_FAIL_("ASSERT(%s == %s): \"%s\" vs \"%s\"", #a, #b, a_, b_); \
    } while (0)

/* Byte comparison that reports the first differing offset. */
#define ASSERT_MEM_EQ(a, b, n)                                                \
    do {                                                                      \
        const unsigned char *a_ = (const unsigned char *)(a);                 \
        const unsigned char *b_ = (const unsigned char *)(b);                 \
        size_t n_ = (n);                                                      \
        for (size_t i_ = 0; i_ < n_; i_++)                                    \
            if (a_[i_] != b_[i_])                                             \
                TEST_FAIL_("ASSERT_MEM_EQ(%s, %s, %zu): byte %zu: 0x%02x vs " \
                           "0x%02x", #a, #b, n_, i_, a_[i_], b_[i_]);         \
    } while (0)

#define TEST_SKIP(...)                                                        \
    do {                                                                      \
        printf("skip: ");                                                     \
        printf(__VA_ARGS__);                                                  \
        printf("\n");                                                         \
        exit(TEST_SKIP_CODE);                                                 \
    } while (0)

/* splitmix64: a small, deterministic stream for generating test inputs. */
static inline uint64_t test_rng(uint64_t *state)
{
    uint64_t x = (*state += UINT64_C(0x9e3779b97f4a7c15));
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

#include <ftw.h>
#include <unistd.h>

static char test_tmpdir_path_[4096];

static inline int test_rm_entry_(const char *path, const struct stat *sb, int flag,
                                 struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

static inline void test_rm_tmpdir_(void)
{
    if (test_tmpdir_path_[0] && !getenv("LF_KEEP_TMP"))
        nftw(test_tmpdir_path_, test_rm_entry_, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fresh directory under $TMPDIR (or /tmp), removed when the test exits
 * (kept when LF_KEEP_TMP is set, for debugging). Exits 1 if it cannot be made. */
static inline const char *test_tmpdir(void)
{
    if (test_tmpdir_path_[0]) return test_tmpdir_path_;
    const char *base = getenv("TMPDIR");
    snprintf(test_tmpdir_path_, sizeof test_tmpdir_path_, "%s/lftest.XXXXXX",
             base && *base ? base : "/tmp");
    if (!mkdtemp(test_tmpdir_path_)) TEST_FAIL_("mkdtemp %s failed", test_tmpdir_path_);
    atexit(test_rm_tmpdir_);
    return test_tmpdir_path_;
}

#endif
