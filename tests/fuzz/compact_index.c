/*
 * compact_index.c — libFuzzer target for the compact index's checks
 * (index.lfx, shard_format/compact.c).
 *
 * Input: one mode byte, then the bytes of one index.lfx. Mode bit 0 turns
 * the two hash comparisons off, so mutated inputs reach the count and
 * block checks behind them. The manifest hash the file is checked against
 * is taken from its own header, so that comparison passes and the rest
 * runs. An index that passes must hold every block entry and every length
 * inside the input, which the loop below reads in full under the
 * sanitizers, and its blocks' counts must sum to its samples.
 */
#include "shard_internal.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    bool skip = data[0] & 1;
    data++;
    size--;
    uint64_t manifest_hash = size >= COMPACT_HEADER_SIZE ? get_u64(data + 32) : 0;
    compact_index ci;
    if (compact_check(data, size, manifest_hash, skip, "<fuzz>", &ci, NULL) != 0) return 0;
    uint64_t counted = 0, sum = 0;
    for (uint64_t b = 0; b < ci.blocks; b++)
        counted += get_u32(ci.block_table + b * COMPACT_BLOCK_ENTRY);
    for (uint64_t i = 0; i < ci.samples; i++) sum += compact_length(&ci, i);
    if (counted != ci.samples) abort();
    return (int)(sum & 0);
}
