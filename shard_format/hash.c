/*
 * hash.c — the format's one checksum, XXH3-64 (seed 0), at the CPU's width.
 *
 * Every stored byte is hashed before use, so the checksum sits on the read
 * path beside zstd. The build targets baseline x86-64 (SSE2); with GCC on
 * x86-64 a second copy is compiled for AVX2 (hash_avx2.c, about 2.5x faster
 * on cached data) and picked at run time when the CPU has it. Both copies
 * compute the same function, so files never depend on the machine.
 */
#include "shard_internal.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t shard_hash(const void *data, size_t size)
{
#if SHARD_HASH_AVX2
    if (__builtin_cpu_supports("avx2")) return shard_hash_avx2(data, size);
#endif
    return XXH3_64bits(data, size);
}
