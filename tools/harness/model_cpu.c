/*
 * model_cpu.c — lf-train's model on the CPU, in plain loops.
 *
 * A one-block causal transformer, small enough for a 2-core box but with
 * the cost shape of the real thing: linear work per token (embedding,
 * projections, MLP, output layer) and a quadratic term (attention within
 * each sequence, in windows of cfg.window tokens). For a window of L tokens:
 *
 *   x = E[t]                      q,k,v = x Wq, x Wk, x Wv
 *   p = softmax(q k^T / sqrt(D))  causal (j <= i)
 *   h = x + (p v) Wo              y = h + relu(h W1 + b1) W2 + b2
 *   loss = sum_i CE(y_i U + c, t_{i+1})     (next-token prediction)
 *
 * The backward pass is written out by hand below in the reverse order.
 * Logits are formed one row at a time (never L x V). Every buffer is sized
 * for one window up front, so a step allocates nothing.
 */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

lt_layout lt_layout_of(const lt_config *c)
{
    size_t V = (size_t)c->vocab, D = (size_t)c->dim, H = (size_t)c->hidden;
    lt_layout l;
    l.E = 0;
    l.Wq = l.E + V * D;
    l.Wk = l.Wq + D * D;
    l.Wv = l.Wk + D * D;
    l.Wo = l.Wv + D * D;
    l.W1 = l.Wo + D * D;
    l.b1 = l.W1 + D * H;
    l.W2 = l.b1 + H;
    l.b2 = l.W2 + H * D;
    l.U = l.b2 + D;
    l.c = l.U + D * V;
    l.n = l.c + V;
    return l;
}

size_t lt_param_count(const lt_config *c)
{
    return lt_layout_of(c).n;
}

struct lt_cpu {
    lt_config cfg;
    lt_layout l;
    float *params;
    /* activations of one window (W rows) */
    float *x, *q, *k, *v, *a, *h, *z, *y, *p;
    /* their gradients */
    float *dx, *dq, *dk, *dv, *da, *dh, *dz, *logit, *dprow;
};

/* Deterministic uniform init in [-s, s] (same on every rank). */
static float uniform(uint64_t *s, float scale)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return scale * (2.0f * (float)(*s >> 40) / (float)(1 << 24) - 1.0f);
}

static void init_params(lt_cpu *m)
{
    const lt_config *c = &m->cfg;
    const lt_layout *l = &m->l;
    uint64_t s = c->seed * 0x9E3779B97F4A7C15ull + 1;
    memset(m->params, 0, l->n * sizeof *m->params);
    float sd = sqrtf(3.0f / (float)c->dim), sh = sqrtf(3.0f / (float)c->hidden);
    for (size_t i = l->E; i < l->b1; i++) m->params[i] = uniform(&s, i < l->Wq ? 1.0f : sd);
    for (size_t i = l->W2; i < l->b2; i++) m->params[i] = uniform(&s, sh);
    for (size_t i = l->U; i < l->c; i++) m->params[i] = uniform(&s, sd);
}

int lt_cpu_create(const lt_config *c, lt_cpu **out)
{
    lt_cpu *m = calloc(1, sizeof *m);
    if (!m) return -1;
    m->cfg = *c;
    m->l = lt_layout_of(c);
    size_t W = (size_t)c->window, D = (size_t)c->dim, H = (size_t)c->hidden;
    float **bufs[] = {&m->x, &m->q, &m->k, &m->v, &m->a, &m->h, &m->y,
                      &m->dx, &m->dq, &m->dk, &m->dv, &m->da, &m->dh};
    size_t nb = sizeof bufs / sizeof *bufs;
    m->params = malloc(m->l.n * sizeof(float));
    int ok = m->params != NULL;
    for (size_t i = 0; i < nb; i++) ok &= (*bufs[i] = malloc(W * D * sizeof(float))) != NULL;
    ok &= (m->z = malloc(W * H * sizeof(float))) != NULL;
    ok &= (m->dz = malloc(W * H * sizeof(float))) != NULL;
    ok &= (m->p = malloc(W * W * sizeof(float))) != NULL;
    ok &= (m->logit = malloc((size_t)c->vocab * sizeof(float))) != NULL;
    ok &= (m->dprow = malloc(W * sizeof(float))) != NULL;
    if (!ok) {
        lt_cpu_free(m);
        return -1;
    }
    init_params(m);
    *out = m;
    return 0;
}

void lt_cpu_free(lt_cpu *m)
{
    if (!m) return;
    float *bufs[] = {m->params, m->x, m->q, m->k, m->v, m->a, m->h, m->z, m->y, m->p,
                     m->dx, m->dq, m->dk, m->dv, m->da, m->dh, m->dz, m->logit, m->dprow};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
    free(m);
}

float *lt_cpu_params(lt_cpu *m)
{
    return m->params;
}

/* out[0..cols) = in[0..rows) W (W row-major rows x cols), plus bias. */
static void vec_mat(const float *in, const float *W, const float *bias, size_t rows,
                    size_t cols, float *out)
{
    if (bias) memcpy(out, bias, cols * sizeof *out);
    else memset(out, 0, cols * sizeof *out);
    for (size_t r = 0; r < rows; r++) {
        float s = in[r];
        const float *w = W + r * cols;
        for (size_t j = 0; j < cols; j++) out[j] += s * w[j];
    }
}

/* The backward of vec_mat: dW += in^T dout, din (+)= W dout. */
static void vec_mat_back(const float *in, const float *W, const float *dout, size_t rows,
                         size_t cols, float *dW, float *din, int accumulate)
{
    for (size_t r = 0; r < rows; r++) {
        const float *w = W + r * cols;
        float *dw = dW + r * cols, s = in[r], acc = 0;
        for (size_t j = 0; j < cols; j++) {
            dw[j] += s * dout[j];
            acc += w[j] * dout[j];
        }
        din[r] = accumulate ? din[r] + acc : acc;
    }
}

static float dot(const float *a, const float *b, size_t n)
{
    float s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static void axpy(float alpha, const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

/* Causal softmax attention of rows 0..L-1: p (L x L, row i uses j <= i), a. */
static void attention(lt_cpu *m, size_t L)
{
    size_t D = (size_t)m->cfg.dim;
    float scale = 1.0f / sqrtf((float)D);
    for (size_t i = 0; i < L; i++) {
        float *p = m->p + i * L, mx = -INFINITY, sum = 0;
        for (size_t j = 0; j <= i; j++) {
            p[j] = scale * dot(m->q + i * D, m->k + j * D, D);
            mx = fmaxf(mx, p[j]);
        }
        for (size_t j = 0; j <= i; j++) sum += (p[j] = expf(p[j] - mx));
        float *a = m->a + i * D;
        memset(a, 0, D * sizeof *a);
        for (size_t j = 0; j <= i; j++) axpy(p[j] /= sum, m->v + j * D, a, D);
    }
}

static void attention_back(lt_cpu *m, size_t L)
{
    size_t D = (size_t)m->cfg.dim;
    float scale = 1.0f / sqrtf((float)D), *dp = m->dprow;
    memset(m->dq, 0, L * D * sizeof(float));
    memset(m->dk, 0, L * D * sizeof(float));
    memset(m->dv, 0, L * D * sizeof(float));
    for (size_t i = 0; i < L; i++) {
        const float *p = m->p + i * L, *da = m->da + i * D;
        float pdp = 0;
        for (size_t j = 0; j <= i; j++) {
            axpy(p[j], da, m->dv + j * D, D);
            dp[j] = dot(da, m->v + j * D, D);
            pdp += p[j] * dp[j];
        }
        /* softmax backward: ds_ij = p_ij (dp_ij - sum_k p_ik dp_ik) */
        for (size_t j = 0; j <= i; j++) {
            float ds = scale * p[j] * (dp[j] - pdp);
            axpy(ds, m->k + j * D, m->dq + i * D, D);
            axpy(ds, m->q + i * D, m->dk + j * D, D);
        }
    }
}

/* Output layer and loss of row i: adds the loss, fills dy_i (in dh). */
static double output_row(lt_cpu *m, const float *y, int target, float *g, float *dy)
{
    const lt_layout *l = &m->l;
    size_t D = (size_t)m->cfg.dim, V = (size_t)m->cfg.vocab;
    float *lg = m->logit, mx = -INFINITY;
    vec_mat(y, m->params + l->U, m->params + l->c, D, V, lg);
    for (size_t j = 0; j < V; j++) mx = fmaxf(mx, lg[j]);
    double sum = 0, shifted = lg[target] - mx;
    for (size_t j = 0; j < V; j++) sum += (lg[j] = expf(lg[j] - mx));
    double loss = log(sum) - shifted;
    for (size_t j = 0; j < V; j++) lg[j] = (float)(lg[j] / sum) - (j == (size_t)target);
    axpy(1.0f, lg, g + l->c, V);
    vec_mat_back(y, m->params + l->U, lg, D, V, g + l->U, dy, 0);
    return loss;
}

/* Forward through the block for rows 0..L-1 (attention included). */
static void forward(lt_cpu *m, const int32_t *t, size_t L)
{
    const lt_layout *l = &m->l;
    const float *P = m->params;
    size_t D = (size_t)m->cfg.dim, H = (size_t)m->cfg.hidden;
    for (size_t i = 0; i < L; i++) {
        float *x = m->x + i * D;
        memcpy(x, P + l->E + (size_t)t[i] * D, D * sizeof *x);
        vec_mat(x, P + l->Wq, NULL, D, D, m->q + i * D);
        vec_mat(x, P + l->Wk, NULL, D, D, m->k + i * D);
        vec_mat(x, P + l->Wv, NULL, D, D, m->v + i * D);
    }
    attention(m, L);
    float *r = m->dz;                    /* scratch row of H */
    for (size_t i = 0; i < L; i++) {
        float *h = m->h + i * D, *z = m->z + i * H, *y = m->y + i * D;
        vec_mat(m->a + i * D, P + l->Wo, NULL, D, D, h);
        axpy(1.0f, m->x + i * D, h, D);
        vec_mat(h, P + l->W1, P + l->b1, D, H, z);
        for (size_t j = 0; j < H; j++) r[j] = fmaxf(z[j], 0.0f);
        vec_mat(r, P + l->W2, P + l->b2, H, D, y);
        axpy(1.0f, h, y, D);
    }
}

/* Backward of the MLP and Wo for row i, from dy (in dh) to da. */
static void block_back_row(lt_cpu *m, size_t i, float *g)
{
    const lt_layout *l = &m->l;
    const float *P = m->params;
    size_t D = (size_t)m->cfg.dim, H = (size_t)m->cfg.hidden;
    float *dh = m->dh + i * D, *dy = m->dx; /* dx row 0 as scratch */
    float *r = m->dz, *dz = m->dz + H;
    const float *z = m->z + i * H;
    memcpy(dy, dh, D * sizeof *dy);
    axpy(1.0f, dy, g + l->b2, D);
    for (size_t j = 0; j < H; j++) r[j] = fmaxf(z[j], 0.0f);
    vec_mat_back(r, P + l->W2, dy, H, D, g + l->W2, dz, 0);
    for (size_t j = 0; j < H; j++) dz[j] = z[j] > 0 ? dz[j] : 0.0f;
    axpy(1.0f, dz, g + l->b1, H);
    vec_mat_back(m->h + i * D, P + l->W1, dz, D, H, g + l->W1, dh, 1);
    vec_mat_back(m->a + i * D, P + l->Wo, dh, D, D, g + l->Wo, m->da + i * D, 0);
}

/* One window of L >= 2 tokens: forward, loss, backward into g. */
static double window_step(lt_cpu *m, const int32_t *t, size_t L, float *g)
{
    const lt_layout *l = &m->l;
    const float *P = m->params;
    size_t D = (size_t)m->cfg.dim;
    double loss = 0;
    forward(m, t, L);
    for (size_t i = 0; i < L; i++) {
        float *dh = m->dh + i * D;
        if (i + 1 < L) loss += output_row(m, m->y + i * D, t[i + 1], g, dh);
        else memset(dh, 0, D * sizeof *dh);
        block_back_row(m, i, g);
    }
    attention_back(m, L);
    for (size_t i = 0; i < L; i++) {
        float *dx = m->dx + i * D, *x = m->x + i * D;
        /* the residual path: dx = dh, plus the q/k/v projections */
        memcpy(dx, m->dh + i * D, D * sizeof *dx);
        vec_mat_back(x, P + l->Wq, m->dq + i * D, D, D, g + l->Wq, dx, 1);
        vec_mat_back(x, P + l->Wk, m->dk + i * D, D, D, g + l->Wk, dx, 1);
        vec_mat_back(x, P + l->Wv, m->dv + i * D, D, D, g + l->Wv, dx, 1);
        axpy(1.0f, dx, g + l->E + (size_t)t[i] * D, D);
    }
    return loss;
}

size_t lt_next_window(const lt_batch *b, size_t window, lt_window_iter *it, const int32_t **t)
{
    for (; it->seq < b->nseqs; it->seq++, it->off = 0) {
        size_t len = b->seqs[it->seq].len, off = it->off;
        if (off + 1 < len) {
            *t = b->tokens + b->seqs[it->seq].start + off;
            it->off += window;
            return len - off < window ? len - off : window;
        }
    }
    return 0;
}

void lt_cpu_step(lt_cpu *m, const lt_batch *b, float *grads)
{
    double loss = 0, targets = 0;
    lt_window_iter it = {0};
    const int32_t *t;
    size_t L;
    while ((L = lt_next_window(b, (size_t)m->cfg.window, &it, &t)) > 0) {
        loss += window_step(m, t, L, grads);
        targets += (double)(L - 1);
    }
    grads[m->l.n] += (float)loss;
    grads[m->l.n + 1] += (float)targets;
}

void lt_sgd(float *params, const float *grads, size_t n, float lr)
{
    float targets = grads[n + 1];
    if (targets <= 0) return;
    float s = lr / targets;
    for (size_t i = 0; i < n; i++) params[i] -= s * grads[i];
}

/* Central differences of the summed loss against lt_cpu_step's gradient
 * on a small fixed batch, every parameter; returns the largest relative
 * error (|num - ana| / (|num| + |ana| + 1e-2)), or -1 without memory.
 * plant: spoil one analytic component first, as a backward bug would. */
double lt_cpu_gradcheck(const lt_config *c, int plant)
{
    enum { NTOK = 13 };
    int32_t tok[NTOK];
    for (int i = 0; i < NTOK; i++) tok[i] = (int32_t)((i * 7 + 3) % c->vocab);
    lt_seq seqs[2] = {{0, 8}, {8, NTOK - 8}};
    lt_batch b = {tok, seqs, 2};
    lt_cpu *m;
    if (lt_cpu_create(c, &m) < 0) return -1;
    size_t n = m->l.n;
    float *g = calloc(n + LT_EXTRA, sizeof *g), *g2 = calloc(n + LT_EXTRA, sizeof *g2);
    double worst = g && g2 ? 0 : -1;
    if (g) lt_cpu_step(m, &b, g);
    if (g && plant) g[m->l.Wq] += 0.05f;
    for (size_t i = 0; worst >= 0 && i < n; i++) {
        float keep = m->params[i], h = 1e-2f;
        double loss[2];
        for (int side = 0; side < 2; side++) {
            m->params[i] = keep + (side ? -h : h);
            memset(g2, 0, (n + LT_EXTRA) * sizeof *g2);
            lt_cpu_step(m, &b, g2);
            loss[side] = g2[n];
        }
        m->params[i] = keep;
        double num = (loss[0] - loss[1]) / (2.0 * h);
        worst = fmax(worst, fabs(num - g[i]) / (fabs(num) + fabs(g[i]) + 1e-2));
    }
    free(g);
    free(g2);
    lt_cpu_free(m);
    return worst;
}
