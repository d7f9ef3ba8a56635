/*
 * plan_step_mix.c — what a balanced pad plan's steps hold, on documents cut
 * into pieces of one length (issue #27 item 4; balancer/README.md,
 * "Selection for the world"): for each band of max/mean, the steps' whole
 * pieces and short ends (a document's last piece, shorter than the cut),
 * and the short ends' supply against what equal bins would need.
 *
 *   plan_step_mix LENGTHS PIECE WORLD PER_RANK step|world [-v]
 *
 * LENGTHS: document lengths in tokens, one a line (tests/data/plan/
 * dev_text_lengths.txt: dev-text.jsonl's 2,595); each document a block, cut
 * at PIECE by pad's micro-batch cap; budget PER_RANK mean pieces a rank, as
 * lf-plan's default. -v prints every step over 1.002 with its ranks'
 * lengths. Figures, never a verdict: it always exits 0 once planned.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lf_plan.h"

#define MAXDOCS 1000000u
#define MAXSTEPS 65536u

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* A piece's length: k-th of a document of len tokens cut at piece. */
static uint64_t piece_len(uint64_t len, uint64_t k, uint64_t piece)
{
    uint64_t rest = len - k * piece;
    return rest < piece ? rest : piece;
}

static void usage(void)
{
    fprintf(stderr, "usage: plan_step_mix LENGTHS PIECE WORLD PER_RANK step|world [-v]\n");
    exit(2);
}

/* The short ends' supply (the whole epoch in view): their count a bin,
 * their share of the cost, and how many groups of world of them (in cost
 * order, disjoint) lie within 2^-9 of a bin of each other, as a step of one
 * short end a bin on equal whole pieces would need (p99 1.002). */
static void supply(const lf_plan_params *p, const lf_plan_sample *docs, size_t n, uint64_t piece,
                   double bin, double steps)
{
    double *ends = malloc((n + 1) * sizeof *ends), total = 0;
    size_t m = 0;
    if (!ends) exit(1);
    for (size_t i = 0; i < n; i++) {
        double full = (double)(docs[i].length / piece);
        total += full * (double)lf_plan_cost(&p->cost, piece);
        if (docs[i].length % piece) {
            ends[m] = (double)lf_plan_cost(&p->cost, docs[i].length % piece);
            total += ends[m++];
        }
    }
    qsort(ends, m, sizeof *ends, cmp_dbl);
    double sum = 0, small = 0, tol = bin / 512;
    for (size_t i = 0; i < m; i++) {
        sum += ends[i];
        if (ends[i] < bin / 8) small++;
    }
    size_t groups = 0, w = p->world;
    for (size_t i = 0; i + w <= m;) {
        if (ends[i + w - 1] - ends[i] <= tol) {
            groups++;
            i += w;
        } else {
            i++;
        }
    }
    printf("short ends: %zu (%.2f a bin), %.1f %% of the cost, %.0f under 1/8 of a bin; "
           "groups of %zu within 2^-9 of a bin: %zu for %.0f steps\n",
           m, (double)m / (steps * (double)w), 100 * sum / total, small, w, groups, steps);
    free(ends);
}

int main(int argc, char **argv)
{
    if (argc < 6) usage();
    uint64_t piece = strtoull(argv[2], NULL, 10);
    uint32_t world = (uint32_t)strtoul(argv[3], NULL, 10), per_rank = (uint32_t)strtoul(argv[4], NULL, 10);
    int verbose = argc > 6 && strcmp(argv[6], "-v") == 0;
    if (!piece || !world || !per_rank) usage();
    FILE *f = fopen(argv[1], "r");
    if (!f) usage();
    static lf_plan_sample docs[MAXDOCS];
    size_t n = 0;
    unsigned long long len;
    while (n < MAXDOCS && fscanf(f, "%llu", &len) == 1) {
        docs[n] = (lf_plan_sample){n, len, n};
        n++;
    }
    fclose(f);
    lf_plan_params p;
    lf_plan_params_default(&p);
    p.world = world;
    p.micro_max_padded = piece;
    if (strcmp(argv[5], "world") == 0) p.select = LF_PLAN_SELECT_WORLD;
    else if (strcmp(argv[5], "step") != 0) usage();
    uint64_t sum = 0, m = 0, dl, dk;
    lf_plan_lengths w = lf_plan_lengths_of(&p, docs, n, lf_plan_piece_len(&p));
    while (lf_plan_lengths_next(&w, &dl, &dk)) {
        sum += lf_plan_cost(&p.cost, dl) * dk;
        m += dk;
    }
    if (m == n) return 1;   /* nothing cut */
    p.step_budget = sum / m * per_rank * world;
    double cpiece = (double)lf_plan_cost(&p.cost, piece), bin = (double)p.step_budget / world;
    lf_plan *plan;
    if (lf_plan_create(&p, docs, n, &plan)) return 1;
    static double ratio[MAXSTEPS], tok[MAXSTEPS];
    /* bands of max/mean: <= 1.002, <= 1.01, <= 1.05, more */
    static const double band_top[] = {1.002, 1.01, 1.05, INFINITY};
    double b_steps[4] = {0}, b_full[4] = {0}, b_ends[4] = {0}, b_endcost[4] = {0}, b_fill[4] = {0};
    double sum_max = 0, sum_mean = 0;
    uint32_t steps = 0, delay_max = 0;
    lf_plan_step st;
    while (steps < MAXSTEPS && lf_plan_next_step(plan, &st) == 1) {
        double max = 0, total = 0, tokens = 0, full = 0, ends = 0, endcost = 0;
        for (uint32_t r = 0; r < world; r++) {
            double c = (double)st.rank_cost[r];
            total += c;
            tokens += (double)st.rank_tokens[r];
            if (c > max) max = c;
        }
        for (uint32_t i = 0; i < st.nsamples; i++) {
            uint64_t d = lf_plan_piece_sample(st.ids[i]), k = lf_plan_piece_index(st.ids[i]);
            uint64_t l = piece_len(docs[d].length, k, piece);
            if (l == piece) {
                full++;
            } else {
                ends++;
                endcost += (double)lf_plan_cost(&p.cost, l) / cpiece;
            }
            if (st.delay[i] > delay_max) delay_max = st.delay[i];
        }
        double r = max / (total / world);
        int b = 0;
        while (r > band_top[b]) b++;
        b_steps[b]++, b_full[b] += full, b_ends[b] += ends, b_endcost[b] += endcost;
        b_fill[b] += total / (double)st.budget;
        if (verbose && r > 1.002) {
            printf("step %u: max/mean %.5f, cost/budget %.4f, %g whole pieces, %g short ends\n",
                   steps, r, total / (double)st.budget, full, ends);
            for (uint32_t q = 0; q < world; q++) {
                printf("  rank %u, %.3f pieces:", q, (double)st.rank_cost[q] / cpiece);
                for (uint32_t i = st.rank_start[q]; i < st.rank_start[q + 1]; i++) {
                    uint64_t d = lf_plan_piece_sample(st.rank_ids[i]);
                    uint64_t l = piece_len(docs[d].length, lf_plan_piece_index(st.rank_ids[i]), piece);
                    printf(" %llu", (unsigned long long)l);
                }
                printf("\n");
            }
        }
        ratio[steps] = r;
        tok[steps++] = tokens;
        sum_max += max;
        sum_mean += total / world;
        if (st.flags & LF_PLAN_STEP_TAIL) break;
    }
    lf_plan_free(plan);
    if (!steps) return 1;
    qsort(ratio, steps, sizeof *ratio, cmp_dbl);
    qsort(tok, steps, sizeof *tok, cmp_dbl);
    printf("cut %llu, world %u, %u a rank, select %s: a bin %.3f pieces; %u steps, epoch %.5f, "
           "p99 %.5f, step tokens max/median %.3f, delay max %u\n",
           (unsigned long long)piece, world, per_rank, argv[5], bin / cpiece, steps,
           sum_max / sum_mean, ratio[(size_t)ceil(0.99 * steps) - 1],
           tok[steps - 1] / tok[(steps - 1) / 2], delay_max);
    for (int b = 0; b < 4; b++) {
        if (!b_steps[b]) continue;
        printf("  max/mean %s %-6g %4.0f steps: a step %.1f whole pieces, %.1f short ends "
               "(%.2f pieces of cost), cost/budget %.4f\n",
               b < 3 ? "<=" : "> ", b < 3 ? band_top[b] : band_top[2], b_steps[b],
               b_full[b] / b_steps[b], b_ends[b] / b_steps[b], b_endcost[b] / b_steps[b],
               b_fill[b] / b_steps[b]);
    }
    supply(&p, docs, n, piece, bin, (double)steps);
    return 0;
}
