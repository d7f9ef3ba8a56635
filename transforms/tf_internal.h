/*
 * tf_internal.h — helpers shared by the transforms sources; not installed.
 */
#ifndef LF_TF_INTERNAL_H
#define LF_TF_INTERNAL_H

#include <stdint.h>

/* IEEE binary32 -> binary16, round to nearest even, overflow to infinity. */
uint16_t tf_f32_to_f16(float f);

#endif
