/*
 * model_cuda.cu — lf-train's model on a GPU, the same maths as model_cpu.c
 * (read that file's essay first), with NCCL for the gradient all-reduce.
 *
 * The batch's windows are laid end to end: token i knows the start of its
 * window (wstart) and its target (-1 for a window's last token). Dense
 * products go through one strided GEMM kernel (gemm below, one thread per
 * output element) that covers x W, dY W^T and X^T dY; attention runs one
 * block per query row over its window. Weight gradients of rows that share
 * a parameter (embedding, attention keys and values) use atomicAdd.
 *
 * Parameters are initialised by the CPU model's code and copied over, so a
 * GPU run starts from the same weights as a CPU run with the same seed.
 * Nothing here is timed: the caller times around the synchronous calls.
 */
#include "harness.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

struct lt_gpu {
    lt_config cfg;
    lt_layout l;
    int rank;
    cudaStream_t stream;
    ncclComm_t comm;
    float *params, *grads;       /* device: n, n + LT_EXTRA */
    /* per-token buffers, grown to the largest batch (cap tokens) */
    size_t cap;
    int *tok, *target, *wstart;
    float *x, *q, *k, *v, *a, *h, *z, *y, *p, *dlogit;
    float *dx, *dq, *dk, *dv, *da, *dh, *dz;
};

#define CHECK(call, what)                                                        \
    do {                                                                         \
        cudaError_t e_ = (call);                                                 \
        if (e_ != cudaSuccess) {                                                 \
            snprintf(why, why_size, "%s: %s", what, cudaGetErrorString(e_));     \
            return -1;                                                           \
        }                                                                        \
    } while (0)

#define NCHECK(call, what)                                                       \
    do {                                                                         \
        ncclResult_t r_ = (call);                                                \
        if (r_ != ncclSuccess) {                                                 \
            snprintf(why, why_size, "%s: %s", what, ncclGetErrorString(r_));     \
            return -1;                                                           \
        }                                                                        \
    } while (0)

/* C[m][n] = beta*C[m][n] + bias[n] + sum_k A(m,k) B(k,n), with
 * A(m,k) = A[m*sam + k*sak] and B(k,n) = B[k*sbk + n*sbn]. */
__global__ void gemm(int M, int N, int K, const float *A, int sam, int sak, const float *B,
                     int sbk, int sbn, float *C, float beta, const float *bias)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    for (int m = blockIdx.y; m < M; m += gridDim.y) {   /* M may pass gridDim.y's limit */
        float s = bias ? bias[n] : 0.0f;
        for (int k = 0; k < K; k++) s += A[(size_t)m * sam + (size_t)k * sak] *
                                         B[(size_t)k * sbk + (size_t)n * sbn];
        float *c = &C[(size_t)m * N + n];
        *c = beta != 0.0f ? beta * *c + s : s;
    }
}

static dim3 gemm_grid(int M, int N)
{
    return dim3((unsigned)(N + 127) / 128, (unsigned)(M < 65535 ? M : 65535));
}

/* out = in W (+ bias), in: T x K, W: K x N. */
static void mm(cudaStream_t st, int T, int K, int N, const float *in, const float *W,
               const float *bias, float *out, float beta)
{
    gemm<<<gemm_grid(T, N), 128, 0, st>>>(T, N, K, in, K, 1, W, N, 1, out, beta, bias);
}

/* din (+)= dout W^T, dout: T x N, W: K x N. */
static void mm_dx(cudaStream_t st, int T, int K, int N, const float *dout, const float *W,
                  float *din, float beta)
{
    gemm<<<gemm_grid(T, K), 128, 0, st>>>(T, K, N, dout, N, 1, W, 1, N, din, beta, NULL);
}

/* dW += in^T dout, in: T x K, dout: T x N. */
static void mm_dw(cudaStream_t st, int T, int K, int N, const float *in, const float *dout,
                  float *dW)
{
    gemm<<<gemm_grid(K, N), 128, 0, st>>>(K, N, T, in, 1, K, dout, N, 1, dW, 1.0f, NULL);
}

__global__ void embed(int T, int D, const int *tok, const float *E, float *x)
{
    int i = blockIdx.x, d = threadIdx.x;
    if (i < T && d < D) x[(size_t)i * D + d] = E[(size_t)tok[i] * D + d];
}

__global__ void embed_grad(int T, int D, const int *tok, const float *dx, float *dE)
{
    int i = blockIdx.x, d = threadIdx.x;
    if (i < T && d < D) atomicAdd(&dE[(size_t)tok[i] * D + d], dx[(size_t)i * D + d]);
}

/* Causal attention of row i over [wstart[i], i]; p row-major T x W. */
__global__ void attn_fwd(int T, int D, int W, const int *wstart, const float *q,
                         const float *k, const float *v, float *p, float *a)
{
    int i = blockIdx.x;
    if (i >= T) return;
    int s = wstart[i], n = i - s + 1;
    float scale = rsqrtf((float)D), *pr = p + (size_t)i * W;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float acc = 0;
        for (int d = 0; d < D; d++) acc += q[(size_t)i * D + d] * k[(size_t)(s + j) * D + d];
        pr[j] = scale * acc;
    }
    __syncthreads();
    if (threadIdx.x == 0) {      /* rows are at most W long: a serial softmax */
        float mx = -INFINITY, sum = 0;
        for (int j = 0; j < n; j++) mx = fmaxf(mx, pr[j]);
        for (int j = 0; j < n; j++) sum += (pr[j] = expf(pr[j] - mx));
        for (int j = 0; j < n; j++) pr[j] /= sum;
    }
    __syncthreads();
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0;
        for (int j = 0; j < n; j++) acc += pr[j] * v[(size_t)(s + j) * D + d];
        a[(size_t)i * D + d] = acc;
    }
}

/* Backward of attn_fwd for row i: dq_i, and dk_j, dv_j (atomic). */
__global__ void attn_bwd(int T, int D, int W, const int *wstart, const float *q,
                         const float *k, const float *v, const float *p, const float *da,
                         float *dq, float *dk, float *dv)
{
    int i = blockIdx.x;
    if (i >= T) return;
    int s = wstart[i], n = i - s + 1;
    float scale = rsqrtf((float)D);
    const float *pr = p + (size_t)i * W, *dai = da + (size_t)i * D;
    __shared__ float pdp;
    if (threadIdx.x == 0) {
        float acc = 0;
        for (int j = 0; j < n; j++) {
            float dp = 0;
            for (int d = 0; d < D; d++) dp += dai[d] * v[(size_t)(s + j) * D + d];
            acc += pr[j] * dp;
        }
        pdp = acc;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float dp = 0;
        for (int d = 0; d < D; d++) dp += dai[d] * v[(size_t)(s + j) * D + d];
        float ds = scale * pr[j] * (dp - pdp);
        for (int d = 0; d < D; d++) {
            atomicAdd(&dv[(size_t)(s + j) * D + d], pr[j] * dai[d]);
            atomicAdd(&dk[(size_t)(s + j) * D + d], ds * q[(size_t)i * D + d]);
            atomicAdd(&dq[(size_t)i * D + d], ds * k[(size_t)(s + j) * D + d]);
        }
    }
}

/* Row softmax of the logits against target: dlogit = softmax - onehot (0
 * for a row without target), loss and target count into extra[0..1]. */
__global__ void softmax_xent(int T, int V, const int *target, float *lg, float *extra)
{
    int i = blockIdx.x;
    if (i >= T) return;
    float *r = lg + (size_t)i * V;
    int t = target[i];
    if (t < 0) {
        for (int j = 0; j < V; j++) r[j] = 0;
        return;
    }
    float mx = -INFINITY, sum = 0;
    for (int j = 0; j < V; j++) mx = fmaxf(mx, r[j]);
    float shifted = r[t] - mx;
    for (int j = 0; j < V; j++) sum += (r[j] = expf(r[j] - mx));
    for (int j = 0; j < V; j++) r[j] = r[j] / sum - (j == t ? 1.0f : 0.0f);
    atomicAdd(&extra[0], logf(sum) - shifted);
    atomicAdd(&extra[1], 1.0f);
}

__global__ void relu(size_t n, const float *z, float *r)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) r[i] = fmaxf(z[i], 0.0f);
}

__global__ void relu_back(size_t n, const float *z, float *dz)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n && z[i] <= 0.0f) dz[i] = 0.0f;
}

__global__ void add(size_t n, const float *x, float *y)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}

/* Bias gradient: db[n] += sum_i d[i][n]. */
__global__ void bias_grad(int T, int N, const float *d, float *db)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    float s = 0;
    for (int i = 0; i < T; i++) s += d[(size_t)i * N + n];
    db[n] += s;
}

__global__ void sgd(size_t n, float lr, const float *g, float *p)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    float targets = g[n + 1];
    if (i < n && targets > 0) p[i] -= lr / targets * g[i];
}

static unsigned blocks(size_t n)
{
    return (unsigned)((n + 255) / 256);
}

/* ---- buffers ------------------------------------------------------------ */

static void free_tokens(lt_gpu *m)
{
    void *bufs[] = {m->tok, m->target, m->wstart, m->x, m->q, m->k, m->v, m->a, m->h, m->z,
                    m->y, m->p, m->dlogit, m->dx, m->dq, m->dk, m->dv, m->da, m->dh, m->dz};
    for (void *b : bufs) cudaFree(b);
    m->cap = 0;
}

static int grow_tokens(lt_gpu *m, size_t T, char *why, size_t why_size)
{
    if (T <= m->cap) return 0;
    free_tokens(m);
    size_t n = 1024;
    while (n < T) n *= 2;
    size_t D = m->cfg.dim, H = m->cfg.hidden, V = m->cfg.vocab, W = m->cfg.window;
    CHECK(cudaMalloc(&m->tok, n * sizeof(int)), "cudaMalloc");
    CHECK(cudaMalloc(&m->target, n * sizeof(int)), "cudaMalloc");
    CHECK(cudaMalloc(&m->wstart, n * sizeof(int)), "cudaMalloc");
    float **dbufs[] = {&m->x, &m->q, &m->k, &m->v, &m->a, &m->h, &m->y,
                       &m->dx, &m->dq, &m->dk, &m->dv, &m->da, &m->dh};
    for (float **b : dbufs) CHECK(cudaMalloc(b, n * D * sizeof(float)), "cudaMalloc");
    CHECK(cudaMalloc(&m->z, n * H * sizeof(float)), "cudaMalloc");
    CHECK(cudaMalloc(&m->dz, n * H * sizeof(float)), "cudaMalloc");
    CHECK(cudaMalloc(&m->p, n * W * sizeof(float)), "cudaMalloc");
    CHECK(cudaMalloc(&m->dlogit, n * V * sizeof(float)), "cudaMalloc");
    m->cap = n;
    return 0;
}

/* ---- the C interface ---------------------------------------------------- */

extern "C" size_t lt_gpu_nccl_id_size(void)
{
    return sizeof(ncclUniqueId);
}

extern "C" int lt_gpu_nccl_id(void *id, char *why, size_t why_size)
{
    int n = 0;
    CHECK(cudaGetDeviceCount(&n), "no usable CUDA device");
    NCHECK(ncclGetUniqueId((ncclUniqueId *)id), "ncclGetUniqueId");
    return 0;
}

extern "C" int lt_gpu_name(int device, char *name, size_t size)
{
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return -1;
    snprintf(name, size, "%s", prop.name);
    return 0;
}

extern "C" int lt_gpu_create(const lt_config *c, int device, int rank, int world,
                             const void *nccl_id, lt_gpu **out, char *why, size_t why_size)
{
    int count = 0;
    CHECK(cudaGetDeviceCount(&count), "no usable CUDA device");
    if (count == 0) {
        snprintf(why, why_size, "no CUDA device");
        return -1;
    }
    lt_gpu *m = (lt_gpu *)calloc(1, sizeof *m);
    lt_cpu *init = NULL;
    if (!m || lt_cpu_create(c, &init) < 0) {
        free(m);
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    *out = m;                    /* the caller frees it on failure too */
    m->cfg = *c;
    m->l = lt_layout_of(c);
    m->rank = rank;
    size_t n = m->l.n;
    CHECK(cudaSetDevice(device % count), "cudaSetDevice");
    CHECK(cudaStreamCreate(&m->stream), "cudaStreamCreate");
    CHECK(cudaMalloc(&m->params, n * sizeof(float)), "cudaMalloc");
    CHECK(cudaMalloc(&m->grads, (n + LT_EXTRA) * sizeof(float)), "cudaMalloc");
    cudaError_t e = cudaMemcpy(m->params, lt_cpu_params(init), n * sizeof(float),
                               cudaMemcpyHostToDevice);
    lt_cpu_free(init);
    CHECK(e, "cudaMemcpy");
    NCHECK(ncclCommInitRank(&m->comm, world, *(const ncclUniqueId *)nccl_id, rank),
           "ncclCommInitRank");
    return 0;
}

extern "C" void lt_gpu_free(lt_gpu *m)
{
    if (!m) return;
    free_tokens(m);
    if (m->comm) ncclCommDestroy(m->comm);
    cudaFree(m->grads);
    cudaFree(m->params);
    if (m->stream) cudaStreamDestroy(m->stream);
    free(m);
}

/* The batch's windows end to end: ids, targets and window starts. */
static size_t flatten(const lt_gpu *m, const lt_batch *b, std::vector<int> &tok,
                      std::vector<int> &target, std::vector<int> &wstart)
{
    lt_window_iter it = {0, 0};
    const int32_t *t;
    size_t L;
    while ((L = lt_next_window(b, (size_t)m->cfg.window, &it, &t)) > 0) {
        int start = (int)tok.size();
        for (size_t i = 0; i < L; i++) {
            tok.push_back(t[i]);
            target.push_back(i + 1 < L ? t[i + 1] : -1);
            wstart.push_back(start);
        }
    }
    return tok.size();
}

static void forward(lt_gpu *m, int T)
{
    const lt_layout &l = m->l;
    const float *P = m->params;
    int D = m->cfg.dim, H = m->cfg.hidden, V = m->cfg.vocab, W = m->cfg.window;
    cudaStream_t st = m->stream;
    embed<<<T, D, 0, st>>>(T, D, m->tok, P + l.E, m->x);
    mm(st, T, D, D, m->x, P + l.Wq, NULL, m->q, 0);
    mm(st, T, D, D, m->x, P + l.Wk, NULL, m->k, 0);
    mm(st, T, D, D, m->x, P + l.Wv, NULL, m->v, 0);
    attn_fwd<<<T, 128, 0, st>>>(T, D, W, m->wstart, m->q, m->k, m->v, m->p, m->a);
    cudaMemcpyAsync(m->h, m->x, (size_t)T * D * sizeof(float), cudaMemcpyDeviceToDevice, st);
    mm(st, T, D, D, m->a, P + l.Wo, NULL, m->h, 1.0f);          /* h = x + a Wo */
    mm(st, T, D, H, m->h, P + l.W1, P + l.b1, m->z, 0);
    relu<<<blocks((size_t)T * H), 256, 0, st>>>((size_t)T * H, m->z, m->dz);  /* r in dz */
    cudaMemcpyAsync(m->y, m->h, (size_t)T * D * sizeof(float), cudaMemcpyDeviceToDevice, st);
    mm(st, T, H, D, m->dz, P + l.W2, P + l.b2, m->y, 1.0f);     /* y = h + r W2 + b2 */
    mm(st, T, D, V, m->y, P + l.U, P + l.c, m->dlogit, 0);
}

static void backward(lt_gpu *m, int T)
{
    const lt_layout &l = m->l;
    const float *P = m->params;
    float *g = m->grads;
    int D = m->cfg.dim, H = m->cfg.hidden, V = m->cfg.vocab, W = m->cfg.window;
    cudaStream_t st = m->stream;
    size_t TD = (size_t)T * D, TH = (size_t)T * H;
    softmax_xent<<<T, 1, 0, st>>>(T, V, m->target, m->dlogit, g + l.n);
    mm_dw(st, T, D, V, m->y, m->dlogit, g + l.U);
    bias_grad<<<blocks(V), 256, 0, st>>>(T, V, m->dlogit, g + l.c);
    mm_dx(st, T, D, V, m->dlogit, P + l.U, m->dh, 0);           /* dy, kept in dh */
    /* MLP: r = relu(z) again (dz held it), then dz from dy */
    relu<<<blocks(TH), 256, 0, st>>>(TH, m->z, m->dz);
    mm_dw(st, T, H, D, m->dz, m->dh, g + l.W2);
    bias_grad<<<blocks(D), 256, 0, st>>>(T, D, m->dh, g + l.b2);
    mm_dx(st, T, H, D, m->dh, P + l.W2, m->dz, 0);
    relu_back<<<blocks(TH), 256, 0, st>>>(TH, m->z, m->dz);
    mm_dw(st, T, D, H, m->h, m->dz, g + l.W1);
    bias_grad<<<blocks(H), 256, 0, st>>>(T, H, m->dz, g + l.b1);
    mm_dx(st, T, D, H, m->dz, P + l.W1, m->dh, 1.0f);           /* dh = dy + dz W1^T */
    mm_dw(st, T, D, D, m->a, m->dh, g + l.Wo);
    mm_dx(st, T, D, D, m->dh, P + l.Wo, m->da, 0);
    cudaMemsetAsync(m->dq, 0, TD * sizeof(float), st);
    cudaMemsetAsync(m->dk, 0, TD * sizeof(float), st);
    cudaMemsetAsync(m->dv, 0, TD * sizeof(float), st);
    attn_bwd<<<T, 128, 0, st>>>(T, D, W, m->wstart, m->q, m->k, m->v, m->p, m->da, m->dq,
                                m->dk, m->dv);
    cudaMemcpyAsync(m->dx, m->dh, TD * sizeof(float), cudaMemcpyDeviceToDevice, st);
    mm_dx(st, T, D, D, m->dq, P + l.Wq, m->dx, 1.0f);
    mm_dx(st, T, D, D, m->dk, P + l.Wk, m->dx, 1.0f);
    mm_dx(st, T, D, D, m->dv, P + l.Wv, m->dx, 1.0f);
    mm_dw(st, T, D, D, m->x, m->dq, g + l.Wq);
    mm_dw(st, T, D, D, m->x, m->dk, g + l.Wk);
    mm_dw(st, T, D, D, m->x, m->dv, g + l.Wv);
    embed_grad<<<T, D, 0, st>>>(T, D, m->tok, m->dx, g + l.E);
}

extern "C" int lt_gpu_step(lt_gpu *m, const lt_batch *b, float active, char *why,
                           size_t why_size)
{
    size_t n = m->l.n;
    CHECK(cudaMemsetAsync(m->grads, 0, (n + LT_EXTRA) * sizeof(float), m->stream),
          "cudaMemset");
    std::vector<int> tok, target, wstart;
    size_t T = active > 0 ? flatten(m, b, tok, target, wstart) : 0;
    if (T > 0) {
        if (grow_tokens(m, T, why, why_size) < 0) return -1;
        CHECK(cudaMemcpyAsync(m->tok, tok.data(), T * sizeof(int), cudaMemcpyHostToDevice,
                              m->stream), "cudaMemcpy tokens");
        CHECK(cudaMemcpyAsync(m->target, target.data(), T * sizeof(int),
                              cudaMemcpyHostToDevice, m->stream), "cudaMemcpy targets");
        CHECK(cudaMemcpyAsync(m->wstart, wstart.data(), T * sizeof(int),
                              cudaMemcpyHostToDevice, m->stream), "cudaMemcpy windows");
        forward(m, (int)T);
        backward(m, (int)T);
    }
    CHECK(cudaMemcpyAsync(m->grads + n + 2, &active, sizeof active, cudaMemcpyHostToDevice,
                          m->stream), "cudaMemcpy");
    CHECK(cudaGetLastError(), "kernel launch");
    CHECK(cudaStreamSynchronize(m->stream), "forward/backward");
    return 0;
}

extern "C" int lt_gpu_allreduce(lt_gpu *m, float *extra, char *why, size_t why_size)
{
    size_t n = m->l.n;
    NCHECK(ncclAllReduce(m->grads, m->grads, n + LT_EXTRA, ncclFloat, ncclSum, m->comm,
                         m->stream), "ncclAllReduce");
    CHECK(cudaMemcpyAsync(extra, m->grads + n, LT_EXTRA * sizeof(float),
                          cudaMemcpyDeviceToHost, m->stream), "cudaMemcpy");
    CHECK(cudaStreamSynchronize(m->stream), "all-reduce");
    return 0;
}

extern "C" int lt_gpu_grads(lt_gpu *m, float *host, char *why, size_t why_size)
{
    CHECK(cudaMemcpyAsync(host, m->grads, (m->l.n + LT_EXTRA) * sizeof(float),
                          cudaMemcpyDeviceToHost, m->stream), "cudaMemcpy gradients");
    CHECK(cudaStreamSynchronize(m->stream), "gradients");
    return 0;
}

extern "C" int lt_gpu_sgd(lt_gpu *m, float lr, float *host_params, char *why,
                          size_t why_size)
{
    size_t n = m->l.n;
    sgd<<<blocks(n), 256, 0, m->stream>>>(n, lr, m->grads, m->params);
    CHECK(cudaGetLastError(), "sgd");
    CHECK(cudaMemcpyAsync(host_params, m->params, n * sizeof(float), cudaMemcpyDeviceToHost,
                          m->stream), "cudaMemcpy params");
    CHECK(cudaStreamSynchronize(m->stream), "sgd");
    return 0;
}
