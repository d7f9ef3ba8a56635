/*
 * hash_avx2.c — XXH3-64 compiled for AVX2 (see hash.c, which calls it only
 * when the CPU has AVX2). The pragma makes GCC define __AVX2__ here, so
 * xxhash.h picks its AVX2 kernel for this file alone.
 */
#include "shard_internal.h"

#if SHARD_HASH_AVX2
#pragma GCC target("avx2")
#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t shard_hash_avx2(const void *data, size_t size)
{
    return XXH3_64bits(data, size);
}
#endif
