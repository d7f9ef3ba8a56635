/*
 * mix_cli.h — a mixture on the command line, one definition for every
 * program that plans (lf-plan, lf-server): `--data A --weight 0.5 --data B
 * --weight 0.3 ...`, the datasets opened as one (lf_dataset_join,
 * sources numbered in the order given) and the weights turned into the
 * balancer's integer parts per million (lf_plan_mix), the same way on every
 * node. One --data without --weight is the plan of old.
 *
 * The weights are decimals that must sum to 1 within 1e-6 (they are not
 * normalised: a sum of 0.9 is a typo, not a wish); each is rounded to parts
 * per million by the largest-remainder rule (ties to the earlier source),
 * so the integers sum to exactly 10^6 and every node derives the same.
 */
#ifndef LF_MIX_CLI_H
#define LF_MIX_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lf_plan.h"
#include "lf_shard.h"

typedef struct mix_cli {
    uint32_t ndata, nweight;
    const char *data[LF_PLAN_MAX_SOURCES];  /* --data, in order */
    double weight[LF_PLAN_MAX_SOURCES];     /* --weight, in order */
} mix_cli;

/* One --data DIR / --weight W. Return 0, or -1 with why (too many, not a
 * decimal in (0, 1]). */
int mix_cli_data(mix_cli *m, const char *dir, char *why, size_t why_size);
int mix_cli_weight(mix_cli *m, const char *value, char *why, size_t why_size);

/* Checks the weights against the datasets (one each, or none with a single
 * dataset; a sum of 1 within 1e-6) and fills mix's sources and weights
 * (parts per million); mix->first is mix_cli_open's. Returns 0, or -1 with
 * why in the flags' words. */
int mix_cli_check(const mix_cli *m, lf_plan_mix *mix, char *why, size_t why_size);

/* Opens the datasets as one, held_out (lf-server's --eval-data; NULL:
 * none) the last source after them: each as dataset_open opens it
 * (index-only descriptions included; open_flags as dataset_open's), then
 * several joined (lf_dataset_join: under DATASET_LENGTHS and
 * DATASET_MAPPED each source's index.lfx stays mapped, no per-sample
 * table; an index-only source makes the union index-only), and fills
 * mix->first from it.
 * Returns what those return. */
int mix_cli_open(const mix_cli *m, const char *held_out, unsigned open_flags, lf_plan_mix *mix,
                 lf_dataset **ds, lf_shard_error *err);

/* Prints, per source, "PREFIXsource S DIR: weight W, T tokens (share X)"
 * for tokens[s] drawn; nothing without a mixture. */
void mix_cli_report(FILE *f, const char *prefix, const mix_cli *m, const lf_plan_mix *mix,
                    const uint64_t *tokens);

#endif
