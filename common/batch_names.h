/*
 * batch_names.h — the names of a token batch's own tensors, which a
 * dataset's fine-tuning fields (served under their own names beside them)
 * may not take: lf-shard refuses such a --field, lf-server such a dataset.
 */
#ifndef LF_BATCH_NAMES_H
#define LF_BATCH_NAMES_H

/* The list, for messages. */
#define BATCH_OWN_NAMES "tokens, lengths, positions, cu_seqlens, max_seqlen, micro, " \
                        "sample_ids, sample_offsets, source"

/* 1 when `name` is one of BATCH_OWN_NAMES. */
int batch_own_name(const char *name);

#endif
