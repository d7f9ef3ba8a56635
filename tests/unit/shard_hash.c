/*
 * shard_hash.c — the format's checksum is plain XXH3-64 (seed 0) whichever
 * copy hash.c picks for this CPU: compared with the baseline xxhash build
 * over lengths around every internal stripe and block boundary, and over
 * unaligned starts. A file written on one machine must check on any other.
 */
#include "shard_internal.h"
#include "test.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

int main(void)
{
    enum { MAX = 20000 };
    uint8_t *buf = malloc(MAX + 64);
    ASSERT_TRUE(buf != NULL);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < MAX + 64; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    for (size_t len = 0; len <= MAX; len += len < 300 ? 1 : 97)
        for (size_t start = 0; start < 3; start++)
            if (shard_hash(buf + start, len) != XXH3_64bits(buf + start, len))
                TEST_FAIL_("length %zu at offset %zu differs", len, start);
    ASSERT_EQ(shard_hash("", 0), XXH3_64bits("", 0));
    printf("shard_hash == XXH3_64bits (avx2 copy built: %d)\n", SHARD_HASH_AVX2);
    free(buf);
    return 0;
}
