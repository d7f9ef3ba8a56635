/*
 * score.h — lf-plan's scoring: runs one sampler over an epoch and measures
 * what the balancer promises (balance, padding, budget fill, deferral,
 * planner time). balancer/README.md defines each figure.
 */
#ifndef LF_PLAN_SCORE_H
#define LF_PLAN_SCORE_H

#include "lf_plan.h"

typedef struct plan_pcts {
    double p50, p99, max;        /* nearest-rank percentiles */
} plan_pcts;

typedef struct plan_score {
    const char *name;            /* balanced, naive, sorted */
    uint64_t steps;              /* steps planned */
    uint64_t samples;            /* samples placed */
    uint64_t rejected, rejected_cap;
    uint64_t outliers;           /* samples released as outliers */
    uint64_t tail_steps;         /* epoch-final steps, left out of fill and of
                                    max_over_mean_full */
    uint64_t measured;           /* steps with a max/mean (cost > 0) */
    plan_pcts max_over_mean;     /* per step, every step: max rank cost / mean */
    plan_pcts max_over_mean_full;/* the same over the steps before the tail */
    double epoch_max_over_mean;  /* Σ over every step of max rank cost ÷ Σ of mean */
    plan_pcts split_bound;       /* per step: the least max/mean any split of its
                                    samples could reach (a lower bound: score.c,
                                    split_floor), of the samples' cost */
    double epoch_split_bound;    /* Σ of those least maxima ÷ Σ of the means */
    uint64_t split_bound_exact_steps; /* steps whose floor is the optimum (a
                                    small step searched to the end), not
                                    only a bound */
    uint64_t empty_rank_steps;   /* (step, rank) pairs with no sample */
    int steps_ok;                /* a median step to compare with (tokens and cost > 0) */
    plan_pcts step_tokens;       /* per step: global tokens ÷ the median step's */
    plan_pcts step_cost;         /* per step: global cost ÷ the median step's */
    double step_tokens_min, step_cost_min;  /* the least such ratio */
    int epoch_done;              /* a whole epoch ran: dropped_tokens is measured */
    uint64_t dropped_tokens;     /* Σ L of the samples the epoch did not place */
    uint64_t all_tokens;         /* Σ L of every sample, for dropped's share */
    double padding_fraction;     /* (padded - tokens) / padded, over every rank-step */
    double micro_per_rank;       /* micro-batches per rank-step (pack: rows) */
    double padding_floor;        /* pack: the least padding any split of the same
                                    steps could reach (a row per rank with samples,
                                    and enough rows for the step's tokens) */
    double budget_fill;          /* sum step cost / sum step budget */
    uint64_t level;              /* select world, whole pieces: a step's cost
                                    (lf_plan_world_level; 0: not so) */
    uint64_t level_piece_len;    /* ... of level_per_rank whole pieces a rank
                                    of this many tokens */
    uint32_t level_per_rank;
    double level_of_budget;      /* level / the budget asked */
    plan_pcts delay;             /* per non-outlier sample: steps passed over */
    plan_pcts outlier_delay;     /* per outlier: steps waited */
    double plan_ms_per_step;     /* next_step + every rank's layout, wall clock */
    double plan_cpu_ms_per_step; /* the same in process CPU time (a loaded machine) */
    double create_s, epoch_s;    /* lf_plan_create; create + every step */
    double epoch_cpu_s;          /* epoch_s in process CPU time */
    double samples_per_step;     /* mean over non-tail steps */
    uint32_t batch_per_rank;     /* baselines: what they ran with */
    uint64_t source_tokens[LF_PLAN_MAX_SOURCES]; /* a mixture: tokens placed per source */
    uint64_t later_cap;          /* balanced: the cap on a rank's padded tokens
                                    (lf_plan_cap_later), or on its samples
                                    (images: lf_plan_cap_later_samples) in
                                    force, 0: none */
} plan_score;

/* Plans up to max_steps steps (0: one epoch) and scores them; where
 * later_cap is set, capped from epoch 0 on there as lf-server caps its
 * balanced plans: a rank's padded tokens (lf_plan_cap_later), or with
 * cap_samples its samples (lf_plan_cap_later_samples: images). Returns 0
 * or a negative lf_plan_status. */
int plan_score_run(const lf_plan_params *prm, const lf_plan_sample *samples,
                   size_t n, uint64_t max_steps, uint64_t later_cap, int cap_samples,
                   plan_score *out);

#endif
