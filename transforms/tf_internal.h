/*
 * tf_internal.h — helpers shared by the transforms sources; not installed.
 */
#ifndef LF_TF_INTERNAL_H
#define LF_TF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* IEEE binary32 -> binary16, round to nearest even, overflow to infinity. */
uint16_t tf_f32_to_f16(float f);

/* `count` elements of `esize` bytes fit in cap bytes (no overflow). */
static inline int tf_fits(size_t cap, uint64_t count, size_t esize)
{
    uint64_t need;
    return !__builtin_mul_overflow(count, (uint64_t)esize, &need) && need <= cap;
}

#endif
