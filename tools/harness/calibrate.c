/*
 * calibrate.c — lf-train --calibrate: the cost model of this model on this
 * machine, fitted so that it comes out the same run after run.
 *
 * Why a design, not the training run. The fit used to take every rank-step
 * of a training run as a point: features (ΣL, ΣL², n) against the step's
 * compute. Those features are nearly collinear by construction: a plan
 * fills every step to a budget (balanced) or a fixed count (naive), so ΣL,
 * ΣL² and n move together, and n alone is almost constant. The 3x3 normal
 * equations were then ill-conditioned: a few percent of timing noise moved
 * b by 7x and c0 by 80x between two runs on the CPU (issue 27).
 *
 * So the model is timed on batches chosen to separate the terms: lengths
 * spread geometrically from --calibrate-lengths MIN to MAX (the quadratic
 * term shows at the long end, the linear one at the short end), each in
 * batches of 1, 2 and 4 samples (c0, per sample, apart from d, per batch).
 * Every point is timed --calibrate-repeats times per rank, in a shuffled
 * order each round (a slow drift of the machine falls on every point
 * alike), after one untimed warm-up round; a rank's point is the median of
 * its repeats (a preempted timing does not move it). On the CPU the time is
 * the thread's CPU time, which other processes on the same cores do not
 * inflate; every rank computes at once, as in training.
 *
 * The fit is least squares weighted by 1/t² (relative errors: the short
 * batches count as much as the long ones, whose times are 100x larger),
 * columns scaled before solving. It prints per coefficient its standard
 * error, and a term whose estimate is not at least 3 standard errors above
 * zero is one the data cannot separate from noise: it is fixed at 0, said so
 * with its t, and the rest refitted (b, c0, d in the order of weakest t; a is
 * never fixed: without it there is no cost). Costs are scaled to
 * LF_PLAN_COST_PER_UNIT units per token of linear work, as the presets.
 */
#include "harness.h"
#include "cost_file.h"
#include "lf_plan.h"

#include <mpi.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NLEN 8                   /* lengths in the design */
#define NCOUNT 3                 /* batch sizes: 1, 2, 4 samples */
#define NTERM 4                  /* a, b, c0, d */
#define T_MIN 3.0                /* a term below this many standard errors is fixed */

static const char *const term_name[NTERM] = {"a", "b", "c0", "d"};
static const char *const term_unit[NTERM] = {"ns/token", "ns/token^2", "ns/sample", "ns/batch"};

typedef struct point {
    uint32_t len, count;         /* count samples of len tokens */
} point;

/* The geometric spread of lengths, duplicates (short spans) dropped. */
static int design(const lt_calib_opts *c, point *p)
{
    uint32_t lens[NLEN];
    int nl = 0, np = 0;
    double ratio = pow((double)c->max_len / c->min_len, 1.0 / (NLEN - 1));
    for (int i = 0; i < NLEN; i++) {
        uint32_t L = (uint32_t)lround(c->min_len * pow(ratio, i));
        if (nl == 0 || L > lens[nl - 1]) lens[nl++] = L;
    }
    for (int i = 0; i < nl; i++)
        for (uint32_t k = 1; k <= 4; k *= 2) p[np++] = (point){lens[i], k};
    return np;
}

static uint64_t next_rand(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

/* A warm-up round, then `repeats` rounds, each a fresh shuffle of the
 * points, every point followed by the reference batch (index np). */
static void timing_order(uint32_t *order, int np, int repeats)
{
    uint64_t s = 27;
    uint32_t o[NLEN * NCOUNT];
    for (int r = 0; r <= repeats; r++) {
        for (int i = 0; i < np; i++) o[i] = (uint32_t)i;
        for (int i = np - 1; i > 0; i--) {
            uint32_t j = (uint32_t)(next_rand(&s) % (uint64_t)(i + 1)), t = o[i];
            o[i] = o[j];
            o[j] = t;
        }
        for (int i = 0; i < np; i++) {
            *order++ = o[i];
            *order++ = (uint32_t)np;
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t k)
{
    qsort(v, k, sizeof *v, cmp_double);
    return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

/* Per point, the median over its timed repeats (the warm-up round left
 * out) of its time over the reference's just after it, times the
 * reference's median: the machine's speed, which drifts under load, is
 * divided out pair by pair. */
static int medians(const uint32_t *order, const double *ns, int np, int repeats, double *med)
{
    size_t first = 2 * (size_t)np, end = first * (size_t)(repeats + 1), k = 0;
    double *ref = malloc((end - first) / 2 * sizeof *ref), v[LT_CALIB_REPEATS_MAX];
    if (!ref) return -1;
    for (size_t i = first; i < end; i += 2) ref[k++] = ns[i + 1];
    double scale = median(ref, k);
    for (int p = 0; p < np; p++) {
        k = 0;
        for (size_t i = first; i < end; i += 2)
            if (order[i] == (uint32_t)p) v[k++] = ns[i] / ns[i + 1];
        med[p] = median(v, k) * scale;
    }
    free(ref);
    return 0;
}

/* ---- the fit ------------------------------------------------------------- */

typedef struct fit {
    int free[NTERM];             /* 1: fitted, 0: fixed at 0 */
    double coef[NTERM], se[NTERM];
    double se_shape;             /* standard error of b/a (delta method) */
    double r2;                   /* of the times themselves */
    double rms_rel;              /* root mean square relative residual */
} fit;

static void features(const point *p, double x[NTERM])
{
    double L = p->len, n = p->count;
    x[0] = n * L;
    x[1] = n * L * L;
    x[2] = n;
    x[3] = 1;
}

/* Inverts the k x k matrix M in place (Gauss-Jordan, partial pivoting). */
static int invert(double M[NTERM][NTERM], int k)
{
    double I[NTERM][NTERM] = {{0}};
    for (int i = 0; i < k; i++) I[i][i] = 1;
    for (int c = 0; c < k; c++) {
        int piv = c;
        for (int r = c + 1; r < k; r++)
            if (fabs(M[r][c]) > fabs(M[piv][c])) piv = r;
        if (fabs(M[piv][c]) < 1e-12) return -1; /* columns scaled: ~1 on the diagonal */
        for (int j = 0; j < k; j++) {
            double t = M[c][j];
            M[c][j] = M[piv][j];
            M[piv][j] = t;
            t = I[c][j];
            I[c][j] = I[piv][j];
            I[piv][j] = t;
        }
        double d = M[c][c];
        for (int j = 0; j < k; j++) {
            M[c][j] /= d;
            I[c][j] /= d;
        }
        for (int r = 0; r < k; r++) {
            if (r == c) continue;
            double m = M[r][c];
            for (int j = 0; j < k; j++) {
                M[r][j] -= m * M[c][j];
                I[r][j] -= m * I[c][j];
            }
        }
    }
    memcpy(M, I, sizeof I);
    return 0;
}

/* Weighted least squares over the free terms of f. 0, or -1 when the
 * points cannot determine them. */
static int solve(const point *p, const double *y, int m, fit *f)
{
    int idx[NTERM], k = 0;
    for (int j = 0; j < NTERM; j++)
        if (f->free[j]) idx[k++] = j;
    if (m <= k) return -1;
    double scale[NTERM] = {0}, A[NTERM][NTERM] = {{0}}, g[NTERM] = {0};
    for (int i = 0; i < m; i++) {
        double x[NTERM], w = 1 / (y[i] * y[i]);
        features(&p[i], x);
        for (int a = 0; a < k; a++) scale[a] += w * x[idx[a]] * x[idx[a]];
    }
    for (int a = 0; a < k; a++) scale[a] = sqrt(scale[a]);
    for (int i = 0; i < m; i++) {
        double x[NTERM], w = 1 / (y[i] * y[i]);
        features(&p[i], x);
        for (int a = 0; a < k; a++) {
            for (int b = 0; b < k; b++)
                A[a][b] += w * x[idx[a]] / scale[a] * x[idx[b]] / scale[b];
            g[a] += w * x[idx[a]] / scale[a] * y[i];
        }
    }
    if (invert(A, k) < 0) return -1;
    memset(f->coef, 0, sizeof f->coef);
    memset(f->se, 0, sizeof f->se);
    for (int a = 0; a < k; a++) {
        double beta = 0;
        for (int b = 0; b < k; b++) beta += A[a][b] * g[b];
        f->coef[idx[a]] = beta / scale[a];
    }
    double wres = 0, res = 0, mean = 0, tot = 0;
    for (int i = 0; i < m; i++) mean += y[i] / m;
    for (int i = 0; i < m; i++) {
        double x[NTERM], e = y[i];
        features(&p[i], x);
        for (int j = 0; j < NTERM; j++) e -= f->coef[j] * x[j];
        wres += e * e / (y[i] * y[i]);
        res += e * e;
        tot += (y[i] - mean) * (y[i] - mean);
    }
    double s2 = wres / (m - k);
    for (int a = 0; a < k; a++) f->se[idx[a]] = sqrt(s2 * A[a][a]) / scale[a];
    /* b/a is the shape the planner sees (a is fixed at so many units a
     * token): its relative variance, with the covariance of a and b */
    double ra = f->se[0] / f->coef[0], rb = f->free[1] ? f->se[1] / f->coef[1] : 0;
    double cab = f->free[1] ? s2 * A[0][1] / (scale[0] * scale[1]) / (f->coef[0] * f->coef[1]) : 0;
    double rel2 = ra * ra + rb * rb - 2 * cab;
    f->se_shape = f->free[1] && rel2 > 0 ? sqrt(rel2) * f->coef[1] / f->coef[0] : 0;
    f->r2 = tot > 0 ? 1 - res / tot : 0;
    f->rms_rel = sqrt(wres / m);
    return 0;
}

static double t_of(const fit *f, int j)
{
    return f->se[j] > 0 ? f->coef[j] / f->se[j] : (f->coef[j] > 0 ? INFINITY : 0);
}

/* Fits, then fixes at 0 the weakest term the data cannot separate (t below
 * T_MIN) until every free term holds; fixed[j] keeps the t it had when
 * fixed. 0, or -1 (no fit, or a itself not measurable). */
static int fit_terms(const point *p, const double *y, int m, fit *f, double fixed_t[NTERM])
{
    for (int j = 0; j < NTERM; j++) f->free[j] = 1;
    for (;;) {
        if (solve(p, y, m, f) < 0) return -1;
        int weak = -1;
        for (int j = 1; j < NTERM; j++)
            if (f->free[j] && t_of(f, j) < T_MIN && (weak < 0 || t_of(f, j) < t_of(f, weak)))
                weak = j;
        if (weak < 0) return t_of(f, 0) >= T_MIN ? 0 : -1;
        fixed_t[weak] = t_of(f, weak);
        f->free[weak] = 0;
    }
}

/* ---- output -------------------------------------------------------------- */

static void print_fit(const fit *f, const double fixed_t[NTERM], int points, char *notes,
                      size_t size)
{
    size_t used = 0;
    for (int j = 0; j < NTERM; j++) {
        char line[256];
        if (f->free[j])
            snprintf(line, sizeof line, "  %-2s = %.4g %s, standard error %.2g (%.1f %%)\n",
                     term_name[j], f->coef[j], term_unit[j], f->se[j],
                     100 * f->se[j] / f->coef[j]);
        else
            snprintf(line, sizeof line, "  %-2s = 0: the data cannot separate it from noise "
                     "(t = %.2g, under %.0f): fixed at 0\n", term_name[j], fixed_t[j], T_MIN);
        fputs(line, stdout);
        used += (size_t)snprintf(notes + used, size - used, "#%s", line + 1);
        if (used >= size) used = size - 1;
    }
    if (f->free[1])
        printf("  b/a = %.4g per token (the planner's shape), standard error %.1f %%\n",
               f->coef[1] / f->coef[0], 100 * f->se_shape / (f->coef[1] / f->coef[0]));
    printf("  R^2 = %.5f, rms relative residual %.2f %% over %d points\n", f->r2,
           100 * f->rms_rel, points);
    snprintf(notes + used, size - used, "# R^2 %.5f, rms relative residual %.2f %% over %d "
             "points\n", f->r2, 100 * f->rms_rel, points);
}

/* The fit in cost units (a = LF_PLAN_COST_PER_UNIT per token), the flags
 * and the cost file. */
static int publish(const fit *f, const lt_calib_opts *c, const char *notes)
{
    double unit = f->coef[0] / LF_PLAN_COST_PER_UNIT, k[NTERM];
    for (int j = 0; j < NTERM; j++) k[j] = f->coef[j] / unit;
    printf("  a = %.4g ns/token, b = %.4g ns/token^2, c0 = %.4g ns/sample, R^2 = %.4f\n",
           f->coef[0], f->coef[1], f->coef[2], f->r2);
    printf("  flags: lf-server --cost %.9g,%.9g,%.9g,%.9g   lf-plan --cost %.9g,%.9g,%.9g,%.9g\n",
           k[0], k[1], k[2], k[3], k[0], k[1], k[2], k[3]);
    lf_plan_cost_model m;
    if (lf_plan_cost_set(&m, k[0], k[1], k[2], k[3])) {
        fprintf(stderr, "lf-train: --calibrate: the fit does not fit the planner's fixed point\n");
        return -1;
    }
    if (!c->cost_file) return 0;
    int rc = cost_file_write(c->cost_file, k, unit, notes);
    if (rc < 0) {
        fprintf(stderr, "lf-train: --cost-file %s: cannot write: %s\n", c->cost_file,
                strerror(-rc));
        return -1;
    }
    printf("  cost file: %s (lf-plan, lf-server, lf-train --cost-file %s)\n", c->cost_file,
           c->cost_file);
    return 0;
}

/* Rank 0: every rank's medians, fitted and published. */
static int fit_and_publish(const point *p, int np, const double *all, int world,
                           const lt_calib_opts *c)
{
    int m = np * world;
    point *pts = malloc((size_t)m * sizeof *pts);
    if (!pts) return -1;
    for (int i = 0; i < m; i++) pts[i] = p[i % np];
    fit f;
    double fixed_t[NTERM] = {0};
    printf("calibration: %d lengths %u..%u x batches of 1, 2, 4 samples, %d repeats a rank "
           "(median), %d ranks; compute = a*L + b*L^2 + c0 per sample + d per batch, "
           "least squares on relative error\n", np / NCOUNT, p[0].len, p[np - 1].len,
           c->repeats, world);
    int rc = fit_terms(pts, all, m, &f, fixed_t);
    if (rc < 0) {
        fprintf(stderr, "lf-train: --calibrate: the timings do not determine a (the cost per "
                "token): widen --calibrate-lengths or raise --calibrate-repeats\n");
    } else {
        char notes[2048] = "# fit by lf-train --calibrate:\n";
        size_t n = strlen(notes);
        print_fit(&f, fixed_t, m, notes + n, sizeof notes - n);
        rc = publish(&f, c, notes);
    }
    free(pts);
    return rc;
}

int lt_calibrate(const lt_train_opts *o, const lt_calib_opts *c)
{
    int rank, world, rc = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    point p[NLEN * NCOUNT];
    int np = design(c, p);
    size_t norder = 2 * (size_t)np * (size_t)(c->repeats + 1), ntok = 4 * (size_t)c->max_len;
    uint32_t *order = malloc(norder * sizeof *order);
    double *ns = malloc(norder * sizeof *ns), med[NLEN * NCOUNT];
    double *all = rank == 0 ? malloc((size_t)np * (size_t)world * sizeof *all) : NULL;
    int32_t *tok = malloc(ntok * sizeof *tok);
    lt_seq seqs[NLEN * NCOUNT + 1][4];
    lt_batch b[NLEN * NCOUNT + 1];
    int ok = order && ns && tok && (rank != 0 || all);
    uint64_t s = 11;
    for (size_t i = 0; ok && i < ntok; i++)
        tok[i] = (int32_t)(next_rand(&s) % (uint64_t)o->model.vocab);
    for (int i = 0; i < np; i++) {
        for (uint32_t k = 0; k < p[i].count; k++)
            seqs[i][k] = (lt_seq){(uint64_t)k * p[i].len, p[i].len};
        b[i] = (lt_batch){tok, seqs[i], p[i].count};
    }
    /* the reference: one sample of the middle length */
    b[np] = (lt_batch){tok, seqs[np], 1};
    seqs[np][0] = (lt_seq){0, p[np / 2 / NCOUNT * NCOUNT].len};
    if (!ok) fprintf(stderr, "lf-train rank %d: --calibrate: out of memory\n", rank);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!ok) rc = -1;
    if (rc == 0) {
        timing_order(order, np, c->repeats);
        rc = lt_time_batches(o, b, order, norder, ns);
    }
    if (rc == 0) {
        ok = medians(order, ns, np, c->repeats, med) == 0;
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
        rc = ok ? 0 : -1;
    }
    if (rc == 0) {
        MPI_Gather(med, np, MPI_DOUBLE, all, np, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (rank == 0) rc = fit_and_publish(p, np, all, world, c);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(order);
    free(ns);
    free(all);
    free(tok);
    return rc;
}
