// train — how the char GPT learns: forward with saved activations, backward
// for every layer, AdamW, checkpoints, progress, evaluation.
//
// Legend of dimension letters:
//   B batch (sequences per step)   T context (positions)   C embedding size
//   H heads    D head size = C / H    L blocks    F MLP hidden size = 4 * C
//   V vocabulary size              N rows = B * T (one per token)
//   P number of parameters (floats)
//
// The file reads top to bottom: the matmul kernel, the layers (each forward
// next to its backward), the whole model, AdamW, text and batches,
// checkpoints, and train_run that ties them together.
#include "train.h"

#include "fileio.h"
#include "timer.h"
#include "utf8.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__AVX512F__)
#include "simd.h"
#endif

#define PI 3.14159265358979323846

static int min_int(int a, int b) { return a < b ? a : b; }

// ---------------------------------------------------------------------------
// Threads. Training keeps its own small pool: each loop of `count` tasks is
// cut into one contiguous slice per thread, always the same slices for the
// same count. Contiguous slices keep a matmul's rows together (the slice of
// b stays in cache across them), and the results never depend on which
// thread ran what.

struct TrainPool {
    int n;                     // threads, the caller included
    pthread_t *workers;        // (n - 1)
    pthread_mutex_t mu;
    pthread_cond_t start;      // workers wait here for a new loop
    pthread_cond_t finished;   // the caller waits here for the workers
    TrainTaskFn fn;            // the current loop, read under mu
    void *ctx;
    int count;
    unsigned generation;       // bumped for every loop
    int busy;                  // workers still running the current loop
    int quit;
};

typedef struct {
    TrainPool *pool;
    int thread;   // 1 .. n-1
} TrainWorker;

static void slice(int count, int n, int t, int *begin, int *end) {
    *begin = (int)((int64_t)count * t / n);
    *end = (int)((int64_t)count * (t + 1) / n);
}

static void *train_worker(void *arg) {
    TrainWorker w = *(TrainWorker *)arg;
    free(arg);
    TrainPool *p = w.pool;
    unsigned seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->generation == seen && !p->quit) pthread_cond_wait(&p->start, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        TrainTaskFn fn = p->fn;
        void *ctx = p->ctx;
        int begin, end;
        slice(p->count, p->n, w.thread, &begin, &end);
        pthread_mutex_unlock(&p->mu);
        if (begin < end) fn(ctx, begin, end, w.thread);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0) pthread_cond_signal(&p->finished);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

TrainPool *train_pool_new(int threads) {
    if (threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores < 1 ? 1 : (int)cores;
    }
    TrainPool *p = calloc(1, sizeof(TrainPool));
    if (!p) return NULL;
    p->workers = calloc((size_t)threads, sizeof(pthread_t));
    if (!p->workers) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->finished, NULL);
    p->n = 1;
    for (int t = 1; t < threads; t++) {
        TrainWorker *w = malloc(sizeof(TrainWorker));
        if (w) *w = (TrainWorker){p, t};
        if (!w || pthread_create(&p->workers[t - 1], NULL, train_worker, w) != 0) {
            free(w);
            train_pool_free(p);   // joins the workers started so far
            return NULL;
        }
        p->n = t + 1;
    }
    return p;
}

void train_pool_free(TrainPool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->n; t++) pthread_join(p->workers[t - 1], NULL);
    pthread_cond_destroy(&p->finished);
    pthread_cond_destroy(&p->start);
    pthread_mutex_destroy(&p->mu);
    free(p->workers);
    free(p);
}

int train_pool_threads(const TrainPool *p) { return p ? p->n : 1; }

void train_pool_run(TrainPool *p, TrainTaskFn fn, void *ctx, int count) {
    if (count <= 0) return;
    if (!p || p->n == 1 || count == 1) {
        fn(ctx, 0, count, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->count = count;
    p->busy = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    int begin, end;
    slice(count, p->n, 0, &begin, &end);
    if (begin < end) fn(ctx, begin, end, 0);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0) pthread_cond_wait(&p->finished, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

// ---------------------------------------------------------------------------
// The matmul kernel. Training spends nearly all its time here: forward
// x @ W, and in the backward dX = dY @ W^T and dW += X^T @ dY. One kernel
// serves all three because it reads `a` through two strides (a transposed
// view costs nothing) while b and out are read along contiguous rows.
//
// The fast path computes out in tiles of MR rows by NR columns held in
// registers, over blocks of KC steps of k so that the KC x NR slice of b
// stays in cache while every row tile of the slice passes over it.

enum { MR = 6, NR = 64, KC = 256 };

void train_matmul_plain(float *out, const float *a, const float *b, const float *bias,
                        int accumulate, int64_t a_row, int64_t a_col, int ldb, int ldo, int M,
                        int K, int N) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float *o = out + (int64_t)i * ldo + j;
            float sum = accumulate ? *o : 0.0f;
            if (bias) sum += bias[j];
            for (int k = 0; k < K; k++) sum += a[i * a_row + k * a_col] * b[(int64_t)k * ldb + j];
            *o = sum;
        }
    }
}

#if defined(__AVX512F__)
// One tile: rows i .. i+mr-1, the 64 columns masked by m, steps k0 .. k0+kc-1.
// start: 0 continue from out's partial sums, 1 start from bias (or 0),
// 2 start from out + bias.
static inline __attribute__((always_inline)) void tile_avx512(
    int mr, float *out, int ldo, const float *a, int64_t a_row, int64_t a_col, const float *b,
    int ldb, int kc, const __mmask16 *m, int start, const float *bias) {
    __m512 acc[MR][4];
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            __m512 init = _mm512_setzero_ps();
            if (start != 1) init = _mm512_maskz_loadu_ps(m[q], out + (int64_t)r * ldo + 16 * q);
            if (start != 0 && bias)
                init = _mm512_add_ps(init, _mm512_maskz_loadu_ps(m[q], bias + 16 * q));
            acc[r][q] = init;
        }
    }
    for (int k = 0; k < kc; k++) {
        const float *bk = b + (int64_t)k * ldb;
        __m512 b0 = _mm512_maskz_loadu_ps(m[0], bk);
        __m512 b1 = _mm512_maskz_loadu_ps(m[1], bk + 16);
        __m512 b2 = _mm512_maskz_loadu_ps(m[2], bk + 32);
        __m512 b3 = _mm512_maskz_loadu_ps(m[3], bk + 48);
        const float *ak = a + k * a_col;
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            __m512 ar = _mm512_set1_ps(ak[r * a_row]);
            acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(ar, b2, acc[r][2]);
            acc[r][3] = _mm512_fmadd_ps(ar, b3, acc[r][3]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++)
            _mm512_mask_storeu_ps(out + (int64_t)r * ldo + 16 * q, m[q], acc[r][q]);
    }
}
#endif

// Rows i0 .. i1-1 of out, all columns, all of K.
static void matmul_rows(float *out, const float *a, const float *b, const float *bias,
                        int accumulate, int64_t a_row, int64_t a_col, int ldb, int ldo, int i0,
                        int i1, int K, int N) {
#if defined(__AVX512F__)
    for (int j0 = 0; j0 < N; j0 += NR) {
        int nr = min_int(NR, N - j0);
        __mmask16 m[4];
        for (int q = 0; q < 4; q++) {
            int cols = nr - 16 * q;
            m[q] = cols >= 16 ? 0xFFFF : cols <= 0 ? 0 : (__mmask16)((1u << cols) - 1);
        }
        const float *bj = bias ? bias + j0 : NULL;
        for (int k0 = 0; k0 < K || k0 == 0; k0 += KC) {
            int kc = min_int(KC, K - k0);
            int start = k0 > 0 ? 0 : accumulate ? 2 : 1;
            const float *bk = b + (int64_t)k0 * ldb + j0;
            for (int i = i0; i < i1; i += MR) {
                float *o = out + (int64_t)i * ldo + j0;
                const float *ai = a + i * a_row + k0 * a_col;
                switch (min_int(MR, i1 - i)) {
                case 6: tile_avx512(6, o, ldo, ai, a_row, a_col, bk, ldb, kc, m, start, bj); break;
                case 5: tile_avx512(5, o, ldo, ai, a_row, a_col, bk, ldb, kc, m, start, bj); break;
                case 4: tile_avx512(4, o, ldo, ai, a_row, a_col, bk, ldb, kc, m, start, bj); break;
                case 3: tile_avx512(3, o, ldo, ai, a_row, a_col, bk, ldb, kc, m, start, bj); break;
                case 2: tile_avx512(2, o, ldo, ai, a_row, a_col, bk, ldb, kc, m, start, bj); break;
                default: tile_avx512(1, o, ldo, ai, a_row, a_col, bk, ldb, kc, m, start, bj); break;
                }
            }
            if (K == 0) break;
        }
    }
#else
    // Portable path: each row of out is built k by k with a row of b, an
    // inner loop over j that the compiler vectorizes. Same order of sums.
    for (int i = i0; i < i1; i++) {
        float *o = out + (int64_t)i * ldo;
        for (int j = 0; j < N; j++) {
            float init = accumulate ? o[j] : 0.0f;
            o[j] = bias ? init + bias[j] : init;
        }
        for (int k = 0; k < K; k++) {
            float aik = a[i * a_row + k * a_col];
            const float *bk = b + (int64_t)k * ldb;
            for (int j = 0; j < N; j++) o[j] += aik * bk[j];
        }
    }
#endif
}

typedef struct {
    float *out;
    const float *a, *b, *bias;
    int accumulate;
    int64_t a_row, a_col;
    int ldb, ldo, M, K, N;
} MatmulJob;

static void matmul_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const MatmulJob *j = ctx;
    int i0 = begin * MR, i1 = min_int(end * MR, j->M);
    if (i0 < i1)
        matmul_rows(j->out, j->a, j->b, j->bias, j->accumulate, j->a_row, j->a_col, j->ldb,
                    j->ldo, i0, i1, j->K, j->N);
}

void train_matmul(float *out, const float *a, const float *b, const float *bias, int accumulate,
                  TrainPool *pool, int64_t a_row, int64_t a_col, int ldb, int ldo, int M, int K,
                  int N) {
    MatmulJob job = {out, a, b, bias, accumulate, a_row, a_col, ldb, ldo, M, K, N};
    int tiles = (M + MR - 1) / MR;
    if (!pool || train_pool_threads(pool) == 1 || (int64_t)M * K * N < 65536)
        matmul_task(&job, 0, tiles, 0);
    else
        train_pool_run(pool, matmul_task, &job, tiles);
}

// ---------------------------------------------------------------------------
// Linear layer: y = x @ W + b with W stored (in, out), as in the chapter.

void linear_forward(float *out, const float *inp, const float *w, const float *b, TrainPool *pool,
                    int N, int IC, int OC) {
    // out (N, OC), inp (N, IC), w (IC, OC), b (OC)
    // torch: out = inp @ w + b
    train_matmul(out, inp, w, b, 0, pool, IC, 1, OC, OC, N, IC, OC);
}

// The transpose of w and the column sums of dout, split among the threads
// (by rows of w, by 16 columns of dout: each sum still runs over n in order).
typedef struct {
    float *wt, *db;
    const float *w, *dout;
    int N, IC, OC;
} LinearJob;

static void transpose_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const LinearJob *j = ctx;
    for (int i = begin; i < end; i++)
        for (int o = 0; o < j->OC; o++)
            j->wt[(int64_t)o * j->IC + i] = j->w[(int64_t)i * j->OC + o];
}

static void bias_grad_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const LinearJob *j = ctx;
    int c0 = begin * 16, c1 = min_int(end * 16, j->OC);
    for (int n = 0; n < j->N; n++) {
        const float *d = j->dout + (int64_t)n * j->OC;
        for (int o = c0; o < c1; o++) j->db[o] += d[o];
    }
}

void linear_backward(float *dinp, float *dw, float *db, float *wt, const float *dout,
                     const float *inp, const float *w, TrainPool *pool, int N, int IC, int OC) {
    // dinp (N, IC), dw (IC, OC), db (OC), wt (OC, IC) scratch, dout (N, OC), inp (N, IC)
    LinearJob j = {wt, db, w, dout, N, IC, OC};
    if (dinp) {
        // dinp += dout @ w^T    (w^T made contiguous first, so b rows are contiguous)
        train_pool_run(pool, transpose_task, &j, IC);
        train_matmul(dinp, dout, wt, NULL, 1, pool, OC, 1, IC, IC, N, OC, IC);
    }
    // dw += inp^T @ dout    (a(i, n) = inp[n * IC + i]: a transposed view)
    train_matmul(dw, inp, dout, NULL, 1, pool, 1, IC, OC, OC, IC, N, OC);
    // db += dout.sum(0)
    if (db) train_pool_run(pool, bias_grad_task, &j, (OC + 15) / 16);
}

// ---------------------------------------------------------------------------
// LayerNorm over the C features of each row, eps 1e-5.

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                       const float *b, int N, int C) {
    // out (N, C), mean (N), rstd (N), inp (N, C), w (C), b (C)
    // torch: F.layer_norm(inp, (C,), w, b, eps=1e-5)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (int64_t)n * C;
        float m = 0.0f;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        float var = 0.0f;
        for (int c = 0; c < C; c++) var += (x[c] - m) * (x[c] - m);
        var /= C;   // biased variance, as PyTorch's layer_norm
        float s = 1.0f / sqrtf(var + 1e-5f);
        float *y = out + (int64_t)n * C;
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * s * w[c] + b[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                        const float *w, const float *mean, const float *rstd, int N, int C) {
    // dinp (N, C), dw (C), db (C), dout (N, C), inp (N, C), w (C), mean, rstd (N)
    // With xhat = (x - mean) * rstd and g = dout * w:
    //   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
    for (int n = 0; n < N; n++) {
        const float *x = inp + (int64_t)n * C;
        const float *dy = dout + (int64_t)n * C;
        float *dx = dinp + (int64_t)n * C;
        float m = mean[n], s = rstd[n];
        float g_mean = 0.0f, gx_mean = 0.0f;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * s;
            float g = dy[c] * w[c];
            g_mean += g;
            gx_mean += g * xhat;
        }
        g_mean /= C;
        gx_mean /= C;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * s;
            db[c] += dy[c];
            dw[c] += dy[c] * xhat;
            dx[c] += s * (dy[c] * w[c] - g_mean - xhat * gx_mean);
        }
    }
}

// The same layers over many rows, split among the threads. LayerNorm's
// backward sums dw and db over rows: each fixed chunk of LN_ROWS rows sums
// into its own partial (2C floats of scratch), and the partials are added in
// chunk order, so the result does not depend on the number of threads.
enum { LN_ROWS = 64 };

typedef struct {
    float *out, *mean, *rstd, *dw, *db, *partial;
    const float *inp, *dout, *w, *b, *cmean, *crstd;
    int N, C;
} LnJob;

static void layernorm_forward_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const LnJob *j = ctx;
    int r0 = begin * LN_ROWS, r1 = min_int(end * LN_ROWS, j->N);
    int64_t off = (int64_t)r0 * j->C;
    if (r0 < r1)
        layernorm_forward(j->out + off, j->mean + r0, j->rstd + r0, j->inp + off, j->w, j->b,
                          r1 - r0, j->C);
}

static void layernorm_backward_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const LnJob *j = ctx;
    for (int chunk = begin; chunk < end; chunk++) {
        int r0 = chunk * LN_ROWS, r1 = min_int(r0 + LN_ROWS, j->N);
        int64_t off = (int64_t)r0 * j->C;
        float *pdw = j->partial + (int64_t)chunk * 2 * j->C, *pdb = pdw + j->C;
        memset(pdw, 0, sizeof(float) * 2 * (size_t)j->C);
        layernorm_backward(j->out + off, pdw, pdb, j->dout + off, j->inp + off, j->w,
                           j->cmean + r0, j->crstd + r0, r1 - r0, j->C);
    }
}

// partial: ((N + LN_ROWS - 1) / LN_ROWS) * 2C floats of scratch.
static void layernorm_forward_pool(float *out, float *mean, float *rstd, const float *inp,
                                   const float *w, const float *b, TrainPool *pool, int N, int C) {
    LnJob j = {.out = out, .mean = mean, .rstd = rstd, .inp = inp, .w = w, .b = b, .N = N, .C = C};
    train_pool_run(pool, layernorm_forward_task, &j, (N + LN_ROWS - 1) / LN_ROWS);
}

static void layernorm_backward_pool(float *dinp, float *dw, float *db, float *partial,
                                    const float *dout, const float *inp, const float *w,
                                    const float *mean, const float *rstd, TrainPool *pool, int N,
                                    int C) {
    int chunks = (N + LN_ROWS - 1) / LN_ROWS;
    LnJob j = {.out = dinp, .partial = partial, .dout = dout, .inp = inp, .w = w,
               .cmean = mean, .crstd = rstd, .N = N, .C = C};
    train_pool_run(pool, layernorm_backward_task, &j, chunks);
    for (int chunk = 0; chunk < chunks; chunk++) {
        const float *pdw = partial + (int64_t)chunk * 2 * C, *pdb = pdw + C;
        for (int c = 0; c < C; c++) {
            dw[c] += pdw[c];
            db[c] += pdb[c];
        }
    }
}

// ---------------------------------------------------------------------------
// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

#define GELU_K 0.7978845608028654f   // sqrt(2 / pi)

#if defined(__AVX512F__)
// tanh(GELU_K (x + 0.044715 x^3)) = 1 - 2 / (exp(2 u) + 1)
static inline __m512 gelu_tanh_avx512(__m512 x) {
    __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
    __m512 u = _mm512_mul_ps(_mm512_set1_ps(2.0f * GELU_K),
                             _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x3, x));
    __m512 e = simd_exp16(u, -88.0f, 88.0f);
    __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
}
#endif

void gelu_forward(float *out, const float *inp, int n) {
    // out (n), inp (n). torch: F.gelu(inp, approximate="tanh")
    int i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(inp + i);
        __m512 t = gelu_tanh_avx512(x);
        __m512 half_x = _mm512_mul_ps(_mm512_set1_ps(0.5f), x);
        _mm512_storeu_ps(out + i, _mm512_fmadd_ps(half_x, t, half_x));
    }
#endif
    for (; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
    }
}

void gelu_backward(float *dinp, const float *inp, const float *dout, int n) {
    // dinp (n) += GELU'(inp) * dout
    int i = 0;
#if defined(__AVX512F__)
    const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
    const __m512 k = _mm512_set1_ps(GELU_K), k3 = _mm512_set1_ps(3.0f * 0.044715f);
    for (; i + 16 <= n; i += 16) {
        __m512 x = _mm512_loadu_ps(inp + i);
        __m512 t = gelu_tanh_avx512(x);
        __m512 du = _mm512_mul_ps(k, _mm512_fmadd_ps(k3, _mm512_mul_ps(x, x), one));
        // 0.5 (1 + t) + 0.5 x (1 - t^2) du
        __m512 left = _mm512_mul_ps(half, _mm512_add_ps(one, t));
        __m512 right = _mm512_mul_ps(_mm512_mul_ps(half, x),
                                     _mm512_mul_ps(_mm512_fnmadd_ps(t, t, one), du));
        __m512 grad = _mm512_add_ps(left, right);
        __m512 acc = _mm512_fmadd_ps(grad, _mm512_loadu_ps(dout + i), _mm512_loadu_ps(dinp + i));
        _mm512_storeu_ps(dinp + i, acc);
    }
#endif
    for (; i < n; i++) {
        float x = inp[i];
        float t = tanhf(GELU_K * (x + 0.044715f * x * x * x));
        float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        float grad = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
        dinp[i] += grad * dout[i];
    }
}

// GELU over many rows, split among the threads.
typedef struct {
    float *out;
    const float *inp, *dout;
    int64_t chunk, n;
} GeluJob;

static void gelu_forward_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const GeluJob *j = ctx;
    int64_t i0 = begin * j->chunk, i1 = end * j->chunk < j->n ? end * j->chunk : j->n;
    if (i0 < i1) gelu_forward(j->out + i0, j->inp + i0, (int)(i1 - i0));
}

static void gelu_backward_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const GeluJob *j = ctx;
    int64_t i0 = begin * j->chunk, i1 = end * j->chunk < j->n ? end * j->chunk : j->n;
    if (i0 < i1) gelu_backward(j->out + i0, j->inp + i0, j->dout + i0, (int)(i1 - i0));
}

// ---------------------------------------------------------------------------
// Causal multi-head self-attention. Head h of sequence b reads columns
// h*D .. h*D+D-1 of q, k, v (B, T, C). The causal mask is applied as the
// bound j <= i of the softmax; the weights above the diagonal are 0.

// The products of attention skip what the causal mask makes zero, about half
// of the work. For a (T, T) matrix of weights, row i only has entries at
// columns j <= i, so tile by tile (MR rows from i0):
//   CAUSAL_COLS   out (T, N) with columns j < i0 + MR only (scores, datt;
//                 the caller zeroes the rest)
//   CAUSAL_K_LE   a holds att: the sum over k stops at i0 + MR
//   CAUSAL_K_GE   a holds att^T: the sum over k starts at i0
// The terms skipped are exact zeros, so the result is the full product's.
enum { CAUSAL_COLS, CAUSAL_K_LE, CAUSAL_K_GE };

static void matmul_causal(float *out, const float *a, const float *b, int mode, int accumulate,
                          int64_t a_row, int64_t a_col, int ldb, int ldo, int T, int K, int N) {
    for (int i = 0; i < T; i += MR) {
        int mr = min_int(MR, T - i), end = i + mr;
        float *o = out + (int64_t)i * ldo;
        const float *ai = a + i * a_row;
        if (mode == CAUSAL_COLS)
            matmul_rows(o, ai, b, NULL, accumulate, a_row, a_col, ldb, ldo, 0, mr, K,
                        min_int(N, end));
        else if (mode == CAUSAL_K_LE)
            matmul_rows(o, ai, b, NULL, accumulate, a_row, a_col, ldb, ldo, 0, mr, end, N);
        else
            matmul_rows(o, ai + i * a_col, b + (int64_t)i * ldb, NULL, accumulate, a_row, a_col,
                        ldb, ldo, 0, mr, K - i, N);
    }
}

typedef struct {
    float *out, *att, *dq, *dk, *dv, *scratch;
    const float *q, *k, *v, *dout, *catt;
    int B, T, C, H;
} AttnJob;

static void attention_forward_task(void *ctx, int begin, int end, int thread) {
    const AttnJob *j = ctx;
    int T = j->T, C = j->C, H = j->H, D = C / H;
    float scale = 1.0f / sqrtf((float)D);
    float *kt = j->scratch + (int64_t)thread * D * T;   // (D, T) this head's keys, transposed
    for (int bh = begin; bh < end; bh++) {
        int b = bh / H, h = bh % H;
        const float *q = j->q + (int64_t)b * T * C + h * D;   // (T, D), rows C apart
        const float *k = j->k + (int64_t)b * T * C + h * D;
        const float *v = j->v + (int64_t)b * T * C + h * D;
        float *out = j->out + (int64_t)b * T * C + h * D;
        float *att = j->att + (int64_t)bh * T * T;            // (T, T)
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++) kt[(int64_t)d * T + t] = k[(int64_t)t * C + d];
        // scores = q @ k^T                 torch: q @ k.transpose(-2, -1)
        matmul_causal(att, q, kt, CAUSAL_COLS, 0, C, 1, T, T, T, D, T);
        // att = softmax(scores / sqrt(D) + mask)
        for (int i = 0; i < T; i++) {
            float *row = att + (int64_t)i * T;
            float max = -INFINITY;
            for (int t = 0; t <= i; t++) {
                row[t] *= scale;
                if (row[t] > max) max = row[t];
            }
            float sum = 0.0f;
            for (int t = 0; t <= i; t++) {
                row[t] = expf(row[t] - max);
                sum += row[t];
            }
            float inv = 1.0f / sum;
            for (int t = 0; t <= i; t++) row[t] *= inv;
            for (int t = i + 1; t < T; t++) row[t] = 0.0f;   // masked: weight 0
        }
        // out = att @ v                     torch: att @ v
        matmul_causal(out, att, v, CAUSAL_K_LE, 0, T, 1, C, C, T, T, D);
    }
}

void attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                       float *scratch, TrainPool *pool, int B, int T, int C, int H) {
    // out (B, T, C), att (B, H, T, T), q k v (B, T, C), scratch threads * (D, T)
    AttnJob job = {.out = out, .att = att, .scratch = scratch, .q = q, .k = k, .v = v,
                   .B = B, .T = T, .C = C, .H = H};
    train_pool_run(pool, attention_forward_task, &job, B * H);
}

static void attention_backward_task(void *ctx, int begin, int end, int thread) {
    const AttnJob *j = ctx;
    int T = j->T, C = j->C, H = j->H, D = C / H;
    float scale = 1.0f / sqrtf((float)D);
    float *vt = j->scratch + (int64_t)thread * (D * T + T * T);   // (D, T)
    float *ds = vt + (int64_t)D * T;                               // (T, T)
    for (int bh = begin; bh < end; bh++) {
        int b = bh / H, h = bh % H;
        int64_t off = (int64_t)b * T * C + h * D;
        const float *q = j->q + off, *k = j->k + off, *v = j->v + off, *dout = j->dout + off;
        float *dq = j->dq + off, *dk = j->dk + off, *dv = j->dv + off;
        const float *att = j->catt + (int64_t)bh * T * T;
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++) vt[(int64_t)d * T + t] = v[(int64_t)t * C + d];
        // datt = dout @ v^T
        matmul_causal(ds, dout, vt, CAUSAL_COLS, 0, C, 1, T, T, T, D, T);
        // dv += att^T @ dout
        matmul_causal(dv, att, dout, CAUSAL_K_GE, 1, 1, T, C, C, T, T, D);
        // softmax backward, with the 1/sqrt(D) of the scores folded in:
        // dscores[i, t] = att[i, t] * (datt[i, t] - sum_u att[i, u] datt[i, u]) / sqrt(D)
        for (int i = 0; i < T; i++) {
            const float *a = att + (int64_t)i * T;
            float *d = ds + (int64_t)i * T;
            float dot = 0.0f;
            for (int t = 0; t <= i; t++) dot += a[t] * d[t];
            for (int t = 0; t <= i; t++) d[t] = a[t] * (d[t] - dot) * scale;
            for (int t = i + 1; t < T; t++) d[t] = 0.0f;
        }
        // dq += dscores @ k;  dk += dscores^T @ q
        matmul_causal(dq, ds, k, CAUSAL_K_LE, 1, T, 1, C, C, T, T, D);
        matmul_causal(dk, ds, q, CAUSAL_K_GE, 1, 1, T, C, C, T, T, D);
    }
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *att,
                        const float *q, const float *k, const float *v, float *scratch,
                        TrainPool *pool, int B, int T, int C, int H) {
    // dq dk dv (B, T, C), dout (B, T, C), att (B, H, T, T), scratch threads * (D*T + T*T)
    AttnJob job = {.dq = dq, .dk = dk, .dv = dv, .scratch = scratch, .q = q, .k = k, .v = v,
                   .dout = dout, .catt = att, .B = B, .T = T, .C = C, .H = H};
    train_pool_run(pool, attention_backward_task, &job, B * H);
}

// ---------------------------------------------------------------------------
// Softmax cross-entropy over the vocabulary.

double crossentropy_forward(float *probs, float *losses, const float *logits,
                            const int32_t *targets, int N, int V) {
    // probs (N, V), losses (N), logits (N, V), targets (N)
    // torch: F.cross_entropy(logits, targets)
    double total = 0.0;
    for (int n = 0; n < N; n++) {
        const float *x = logits + (int64_t)n * V;
        float *p = probs + (int64_t)n * V;
        float max = -INFINITY;
        for (int i = 0; i < V; i++)
            if (x[i] > max) max = x[i];
        float sum = 0.0f;
        for (int i = 0; i < V; i++) {
            p[i] = expf(x[i] - max);
            sum += p[i];
        }
        for (int i = 0; i < V; i++) p[i] /= sum;
        // -log p[target] from the logits, exact even when p underflows
        losses[n] = logf(sum) + max - x[targets[n]];
        total += losses[n];
    }
    return total / N;
}

void crossentropy_backward(float *dlogits, const float *probs, const int32_t *targets,
                           float scale, int N, int V) {
    // dlogits (N, V) += (probs - onehot(targets)) * scale
    for (int n = 0; n < N; n++) {
        const float *p = probs + (int64_t)n * V;
        float *d = dlogits + (int64_t)n * V;
        for (int i = 0; i < V; i++) d[i] += (p[i] - (i == targets[n])) * scale;
    }
}

// ---------------------------------------------------------------------------
// The parameters as a table of tensors in file order (gpt.h), with whether
// AdamW decays them: matrices and embeddings yes, biases and LayerNorm no.

typedef struct {
    size_t size;   // floats
    int decay;     // 1: weight decay applies
    float std;     // initial normal std; 0 with fill for constants
    float fill;    // initial value when std is 0
} ParamTensor;

// Fills table (2 + 16 L + 4 entries) and returns the number of entries.
static int param_table(ParamTensor *table, GptConfig g) {
    size_t V = g.V, T = g.T, C = g.C, F = 4 * (size_t)g.C;
    float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * g.L);   // GPT-2's scaled residual init
    int n = 0;
    table[n++] = (ParamTensor){V * C, 1, std, 0};   // token_embedding
    table[n++] = (ParamTensor){T * C, 1, std, 0};   // position_embedding
    for (int l = 0; l < g.L; l++) {
        table[n++] = (ParamTensor){C, 0, 0, 1};             // ln1.weight
        table[n++] = (ParamTensor){C, 0, 0, 0};             // ln1.bias
        for (int i = 0; i < 3; i++) {                       // query, key, value
            table[n++] = (ParamTensor){C * C, 1, std, 0};
            table[n++] = (ParamTensor){C, 0, 0, 0};
        }
        table[n++] = (ParamTensor){C * C, 1, proj_std, 0};  // attn.output
        table[n++] = (ParamTensor){C, 0, 0, 0};
        table[n++] = (ParamTensor){C, 0, 0, 1};             // ln2.weight
        table[n++] = (ParamTensor){C, 0, 0, 0};             // ln2.bias
        table[n++] = (ParamTensor){C * F, 1, std, 0};       // mlp.fc1
        table[n++] = (ParamTensor){F, 0, 0, 0};
        table[n++] = (ParamTensor){F * C, 1, proj_std, 0};  // mlp.fc2
        table[n++] = (ParamTensor){C, 0, 0, 0};
    }
    table[n++] = (ParamTensor){C, 0, 0, 1};       // ln_f.weight
    table[n++] = (ParamTensor){C, 0, 0, 0};       // ln_f.bias
    table[n++] = (ParamTensor){C * V, 1, std, 0}; // head.weight
    table[n++] = (ParamTensor){V, 0, 0, 0};       // head.bias
    return n;
}

static ParamTensor *param_table_new(GptConfig g, int *count) {
    ParamTensor *t = malloc(sizeof(ParamTensor) * (size_t)(6 + 16 * g.L));
    if (t) *count = param_table(t, g);
    return t;
}

// A small, fast, seedable generator (splitmix64): its whole state is one
// uint64, which the checkpoint stores.
static uint64_t rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Uniform in (0, 1): 53 random bits, never 0.
static double rng_uniform(uint64_t *state) {
    return ((rng_next(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

void train_init_params(float *params, GptConfig cfg, uint64_t seed) {
    int count;
    ParamTensor *table = param_table_new(cfg, &count);
    assert(table);
    uint64_t rng = seed ^ 0x1D1D1D1D1D1D1D1Dull;
    float *p = params;
    for (int t = 0; t < count; t++) {
        for (size_t i = 0; i < table[t].size; i++) {
            if (table[t].std == 0.0f) {
                p[i] = table[t].fill;
            } else {
                // Box-Muller: one normal draw from two uniforms
                double u1 = rng_uniform(&rng), u2 = rng_uniform(&rng);
                p[i] = (float)(table[t].std * sqrt(-2.0 * log(u1)) * cos(2.0 * PI * u2));
            }
        }
        p += table[t].size;
    }
    free(table);
}

// ---------------------------------------------------------------------------
// The whole model. The forward pass keeps every activation the backward pass
// needs, per block; the backward pass walks the blocks in reverse with a
// handful of gradient buffers reused from block to block. All buffers are
// one allocation carved by a table, made once: a training step allocates
// nothing.

struct TrainState {
    GptConfig cfg;
    int B;                    // sequences the buffers hold
    TrainPool *pool;
    GptBlockParams *blocks;   // (L) views for gpt_params_carve
    GptBlockParams *gblocks;  // (L) the same for the gradients
    float *memory;            // the one allocation
    // activations
    float *res;      // (L+1, N, C) residual stream: res[0] embeddings, res[l+1] after block l
    float *ln1;      // (L, N, C)
    float *ln1_mean, *ln1_rstd;   // (L, N)
    float *q, *k, *v;             // (L, N, C) each
    float *att;      // (L, B, H, T, T) softmax weights
    float *atty;     // (L, N, C) attention output before attn.output
    float *resmid;   // (L, N, C) residual after attention
    float *ln2;      // (L, N, C)
    float *ln2_mean, *ln2_rstd;   // (L, N)
    float *fch;      // (L, N, F) before GELU
    float *fcg;      // (L, N, F) after GELU
    float *lnf;      // (N, C)
    float *lnf_mean, *lnf_rstd;   // (N)
    float *logits;   // (N, V)
    float *probs;    // (N, V)
    float *losses;   // (N)
    // gradients of activations, reused by every block
    float *dres;     // (N, C)
    float *dln;      // (N, C)
    float *datty;    // (N, C)
    float *dq, *dk, *dv;          // (N, C) each
    float *dfcg, *dfch;           // (N, F) each
    float *dlogits;  // (N, V)
    float *wt;       // (max(C F, C V)) a weight matrix transposed
    float *scratch;  // threads * (D T + T T) attention scratch
    float *ln_partial;   // (N / LN_ROWS rounded up, 2C) LayerNorm's partial dw, db
};

TrainState *train_state_new(GptConfig g, int B, TrainPool *pool) {
    TrainState *s = calloc(1, sizeof(TrainState));
    if (!s) return NULL;
    s->cfg = g;
    s->B = B;
    s->pool = pool;
    size_t N = (size_t)B * g.T, C = g.C, F = 4 * C, L = g.L, V = g.V, T = g.T;
    size_t D = C / g.H, threads = pool ? (size_t)train_pool_threads(pool) : 1;
    size_t wt = C * F > C * V ? C * F : C * V;
    struct { float **ptr; size_t size; } table[] = {
        {&s->res, (L + 1) * N * C}, {&s->ln1, L * N * C}, {&s->ln1_mean, L * N},
        {&s->ln1_rstd, L * N}, {&s->q, L * N * C}, {&s->k, L * N * C}, {&s->v, L * N * C},
        {&s->att, L * B * g.H * T * T}, {&s->atty, L * N * C}, {&s->resmid, L * N * C},
        {&s->ln2, L * N * C}, {&s->ln2_mean, L * N}, {&s->ln2_rstd, L * N},
        {&s->fch, L * N * F}, {&s->fcg, L * N * F}, {&s->lnf, N * C}, {&s->lnf_mean, N},
        {&s->lnf_rstd, N}, {&s->logits, N * V}, {&s->probs, N * V}, {&s->losses, N},
        {&s->dres, N * C}, {&s->dln, N * C}, {&s->datty, N * C}, {&s->dq, N * C},
        {&s->dk, N * C}, {&s->dv, N * C}, {&s->dfcg, N * F}, {&s->dfch, N * F},
        {&s->dlogits, N * V}, {&s->wt, wt}, {&s->scratch, threads * (D * T + T * T)},
        {&s->ln_partial, (N + LN_ROWS - 1) / LN_ROWS * 2 * C},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) total += table[i].size;
    s->memory = malloc(total * sizeof(float));
    s->blocks = malloc(sizeof(GptBlockParams) * L);
    s->gblocks = malloc(sizeof(GptBlockParams) * L);
    if (!s->memory || !s->blocks || !s->gblocks) {
        train_state_free(s);
        return NULL;
    }
    float *p = s->memory;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        *table[i].ptr = p;
        p += table[i].size;
    }
    return s;
}

void train_state_free(TrainState *s) {
    if (!s) return;
    free(s->memory);
    free(s->blocks);
    free(s->gblocks);
    free(s);
}

double train_forward(TrainState *s, const float *params, const int32_t *inputs,
                     const int32_t *targets, int b) {
    assert(b >= 1 && b <= s->B);
    GptConfig g = s->cfg;
    int T = g.T, C = g.C, F = 4 * g.C, V = g.V, N = b * T;
    size_t NC = (size_t)s->B * T * C, NF = (size_t)s->B * T * F, NN = (size_t)s->B * T;
    GptParams p;
    gpt_params_carve(&p, s->blocks, (float *)params, g);

    // x = token_embedding(inputs) + position_embedding(arange(T))
    for (int n = 0; n < N; n++) {
        const float *te = p.wte + (int64_t)inputs[n] * C, *pe = p.wpe + (int64_t)(n % T) * C;
        float *x = s->res + (int64_t)n * C;
        for (int c = 0; c < C; c++) x[c] = te[c] + pe[c];
    }
    for (int l = 0; l < g.L; l++) {
        const GptBlockParams *w = &p.blocks[l];
        float *res_in = s->res + l * NC, *res_out = s->res + (l + 1) * NC;
        float *ln1 = s->ln1 + l * NC, *q = s->q + l * NC, *k = s->k + l * NC;
        float *v = s->v + l * NC, *atty = s->atty + l * NC, *resmid = s->resmid + l * NC;
        float *ln2 = s->ln2 + l * NC, *fch = s->fch + l * NF, *fcg = s->fcg + l * NF;
        float *att = s->att + (size_t)l * s->B * g.H * T * T;
        // h = ln1(x)
        layernorm_forward_pool(ln1, s->ln1_mean + l * NN, s->ln1_rstd + l * NN, res_in, w->ln1_w,
                               w->ln1_b, s->pool, N, C);
        // q, k, v = query(h), key(h), value(h)
        linear_forward(q, ln1, w->wq, w->bq, s->pool, N, C, C);
        linear_forward(k, ln1, w->wk, w->bk, s->pool, N, C, C);
        linear_forward(v, ln1, w->wv, w->bv, s->pool, N, C, C);
        // a = softmax(q k^T / sqrt(D) + mask) v, per head
        attention_forward(atty, att, q, k, v, s->scratch, s->pool, b, T, C, g.H);
        // x = x + output(a)
        memcpy(resmid, res_in, sizeof(float) * (size_t)N * C);
        train_matmul(resmid, atty, w->wo, w->bo, 1, s->pool, C, 1, C, C, N, C, C);
        // x = x + fc2(gelu(fc1(ln2(x))))
        layernorm_forward_pool(ln2, s->ln2_mean + l * NN, s->ln2_rstd + l * NN, resmid, w->ln2_w,
                               w->ln2_b, s->pool, N, C);
        linear_forward(fch, ln2, w->w1, w->b1, s->pool, N, C, F);
        GeluJob gj = {fcg, fch, NULL, 4096, (int64_t)N * F};
        train_pool_run(s->pool, gelu_forward_task, &gj, (int)((gj.n + gj.chunk - 1) / gj.chunk));
        memcpy(res_out, resmid, sizeof(float) * (size_t)N * C);
        train_matmul(res_out, fcg, w->w2, w->b2, 1, s->pool, F, 1, C, C, N, F, C);
    }
    // logits = head(ln_f(x))
    layernorm_forward_pool(s->lnf, s->lnf_mean, s->lnf_rstd, s->res + g.L * NC, p.lnf_w, p.lnf_b,
                           s->pool, N, C);
    linear_forward(s->logits, s->lnf, p.head_w, p.head_b, s->pool, N, C, V);
    if (!targets) return 0.0;
    return crossentropy_forward(s->probs, s->losses, s->logits, targets, N, V);
}

void train_backward(TrainState *s, float *grads, const float *params, const int32_t *inputs,
                    const int32_t *targets, int b) {
    GptConfig g = s->cfg;
    int T = g.T, C = g.C, F = 4 * g.C, V = g.V, N = b * T;
    size_t NC = (size_t)s->B * T * C, NF = (size_t)s->B * T * F, NN = (size_t)s->B * T;
    size_t nc = sizeof(float) * (size_t)N * C, nf = sizeof(float) * (size_t)N * F;
    GptParams p, d;
    gpt_params_carve(&p, s->blocks, (float *)params, g);
    gpt_params_carve(&d, s->gblocks, grads, g);

    // loss = cross_entropy(logits, targets).mean()
    memset(s->dlogits, 0, sizeof(float) * (size_t)N * V);
    crossentropy_backward(s->dlogits, s->probs, targets, 1.0f / N, N, V);
    memset(s->dln, 0, nc);
    linear_backward(s->dln, d.head_w, d.head_b, s->wt, s->dlogits, s->lnf, p.head_w, s->pool, N,
                    C, V);
    memset(s->dres, 0, nc);
    layernorm_backward_pool(s->dres, d.lnf_w, d.lnf_b, s->ln_partial, s->dln, s->res + g.L * NC,
                            p.lnf_w, s->lnf_mean, s->lnf_rstd, s->pool, N, C);
    for (int l = g.L - 1; l >= 0; l--) {
        const GptBlockParams *w = &p.blocks[l];
        GptBlockParams *dw = &d.blocks[l];
        float *res_in = s->res + l * NC;
        float *ln1 = s->ln1 + l * NC, *q = s->q + l * NC, *k = s->k + l * NC;
        float *v = s->v + l * NC, *atty = s->atty + l * NC, *resmid = s->resmid + l * NC;
        float *ln2 = s->ln2 + l * NC, *fch = s->fch + l * NF, *fcg = s->fcg + l * NF;
        float *att = s->att + (size_t)l * s->B * g.H * T * T;
        // x = x + fc2(gelu(fc1(ln2(x)))): dres flows to both terms
        memset(s->dfcg, 0, nf);
        linear_backward(s->dfcg, dw->w2, dw->b2, s->wt, s->dres, fcg, w->w2, s->pool, N, F, C);
        memset(s->dfch, 0, nf);
        GeluJob gj = {s->dfch, fch, s->dfcg, 4096, (int64_t)N * F};
        train_pool_run(s->pool, gelu_backward_task, &gj, (int)((gj.n + gj.chunk - 1) / gj.chunk));
        memset(s->dln, 0, nc);
        linear_backward(s->dln, dw->w1, dw->b1, s->wt, s->dfch, ln2, w->w1, s->pool, N, C, F);
        layernorm_backward_pool(s->dres, dw->ln2_w, dw->ln2_b, s->ln_partial, s->dln, resmid,
                                w->ln2_w, s->ln2_mean + l * NN, s->ln2_rstd + l * NN, s->pool, N,
                                C);
        // x = x + output(attention(ln1(x)))
        memset(s->datty, 0, nc);
        linear_backward(s->datty, dw->wo, dw->bo, s->wt, s->dres, atty, w->wo, s->pool, N, C, C);
        memset(s->dq, 0, nc);
        memset(s->dk, 0, nc);
        memset(s->dv, 0, nc);
        attention_backward(s->dq, s->dk, s->dv, s->datty, att, q, k, v, s->scratch, s->pool, b, T,
                           C, g.H);
        memset(s->dln, 0, nc);
        linear_backward(s->dln, dw->wq, dw->bq, s->wt, s->dq, ln1, w->wq, s->pool, N, C, C);
        linear_backward(s->dln, dw->wk, dw->bk, s->wt, s->dk, ln1, w->wk, s->pool, N, C, C);
        linear_backward(s->dln, dw->wv, dw->bv, s->wt, s->dv, ln1, w->wv, s->pool, N, C, C);
        layernorm_backward_pool(s->dres, dw->ln1_w, dw->ln1_b, s->ln_partial, s->dln, res_in,
                                w->ln1_w, s->ln1_mean + l * NN, s->ln1_rstd + l * NN, s->pool, N,
                                C);
    }
    // x = token_embedding(inputs) + position_embedding(arange(T))
    for (int n = 0; n < N; n++) {
        const float *dx = s->dres + (int64_t)n * C;
        float *dte = d.wte + (int64_t)inputs[n] * C, *dpe = d.wpe + (int64_t)(n % T) * C;
        for (int c = 0; c < C; c++) {
            dte[c] += dx[c];
            dpe[c] += dx[c];
        }
    }
}

// ---------------------------------------------------------------------------
// AdamW with the global gradient norm clipped.
//   torch.nn.utils.clip_grad_norm_(params, grad_clip)
//   torch.optim.AdamW(params, lr, betas=(beta1, beta2), eps, weight_decay)

typedef struct {
    float *params, *grads, *m, *v;
    const uint8_t *decay;   // (P) 1 where weight decay applies
    double *partial;        // (chunks) sums of squares, for the norm
    size_t n;               // P
    float lr, beta1, beta2, eps, wd, grad_scale, bc1, bc2;
} AdamJob;

enum { ADAM_CHUNK = 1 << 16 };

static void grad_norm_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const AdamJob *j = ctx;
    for (int c = begin; c < end; c++) {
        size_t i0 = (size_t)c * ADAM_CHUNK, i1 = i0 + ADAM_CHUNK < j->n ? i0 + ADAM_CHUNK : j->n;
        double sum = 0.0;
        for (size_t i = i0; i < i1; i++) sum += (double)j->grads[i] * j->grads[i];
        j->partial[c] = sum;
    }
}

static void adamw_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const AdamJob *j = ctx;
    size_t i0 = (size_t)begin * ADAM_CHUNK, i1 = (size_t)end * ADAM_CHUNK;
    if (i1 > j->n) i1 = j->n;
    for (size_t i = i0; i < i1; i++) {
        float g = j->grads[i] * j->grad_scale;
        float m = j->beta1 * j->m[i] + (1.0f - j->beta1) * g;
        float v = j->beta2 * j->v[i] + (1.0f - j->beta2) * g * g;
        j->m[i] = m;
        j->v[i] = v;
        float mhat = m / j->bc1, vhat = v / j->bc2;
        float p = j->params[i];
        // decoupled weight decay: p -= lr * wd * p, on matrices only
        float decay = j->decay[i] ? j->wd * p : 0.0f;
        j->params[i] = p - j->lr * (mhat / (sqrtf(vhat) + j->eps) + decay);
    }
}

// Clips grads (P) to the global norm r->grad_clip and applies one AdamW
// step (step 0-based) to params, m, v (P). partial holds one double per
// chunk of ADAM_CHUNK. Returns the norm before clipping.
static float adamw_update(float *params, float *m, float *v, float *grads, const uint8_t *decay,
                          double *partial, const TrainConfig *r, float lr, int step,
                          TrainPool *pool, size_t P) {
    int chunks = (int)((P + ADAM_CHUNK - 1) / ADAM_CHUNK);
    AdamJob aj = {params, grads, m, v, decay, partial, P, lr, r->beta1, r->beta2, r->eps,
                  r->weight_decay, 1.0f, 0, 0};
    train_pool_run(pool, grad_norm_task, &aj, chunks);
    double sq = 0.0;
    for (int c = 0; c < chunks; c++) sq += partial[c];   // in order: the same sum every run
    float norm = (float)sqrt(sq);
    if (r->grad_clip > 0 && norm > r->grad_clip) aj.grad_scale = r->grad_clip / norm;
    // bias corrections of the moments: 1 - beta^t
    aj.bc1 = 1.0f - powf(r->beta1, (float)(step + 1));
    aj.bc2 = 1.0f - powf(r->beta2, (float)(step + 1));
    train_pool_run(pool, adamw_task, &aj, chunks);
    return norm;
}

// The learning rate of step `step` (0-based): linear warm-up to lr, then
// cosine decay to min_lr at the last step.
static float lr_at(const TrainConfig *c, int step) {
    if (step < c->warmup) return c->lr * (float)(step + 1) / (float)c->warmup;
    int span = c->iters - c->warmup;
    double ratio = span > 1 ? (double)(step - c->warmup) / (span - 1) : 1.0;
    double coeff = 0.5 * (1.0 + cos(PI * ratio));
    return (float)(c->min_lr + coeff * (c->lr - c->min_lr));
}

// ---------------------------------------------------------------------------
// Text as tokens: UTF-8 decoded into code points, the vocabulary their
// sorted distinct values.

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int vocab_find(const uint32_t *vocab, int V, uint32_t cp) {
    int lo = 0, hi = V - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (vocab[mid] == cp) return mid;
        if (vocab[mid] < cp) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

int train_text_load(TrainText *text, const char *path, const uint32_t *vocab, int V) {
    memset(text, 0, sizeof(*text));
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "kvdemo: cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    // A file beyond the limit is refused before it is read (a pipe, whose
    // size is unknown, when the limit is passed).
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size > TRAIN_MAX_TEXT_BYTES) {
        fprintf(stderr, "kvdemo: %s is %llu bytes; a training text may hold at most %llu MiB\n", path,
                (unsigned long long)st.st_size, TRAIN_MAX_TEXT_BYTES >> 20);
        fclose(f);
        return 1;
    }
    unsigned char *bytes = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n > TRAIN_MAX_TEXT_BYTES) {
            fprintf(stderr, "kvdemo: %s holds more than %llu MiB; a training text may hold at most that\n",
                    path, TRAIN_MAX_TEXT_BYTES >> 20);
            free(bytes);
            fclose(f);
            return 1;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1 << 20;
            unsigned char *nb = realloc(bytes, cap);
            if (!nb) {
                fprintf(stderr, "kvdemo: out of memory reading %s\n", path);
                free(bytes);
                fclose(f);
                return 1;
            }
            bytes = nb;
        }
        size_t got = fread(bytes + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        fprintf(stderr, "kvdemo: error reading %s\n", path);
        free(bytes);
        return 1;
    }
    uint32_t *cps = malloc(sizeof(uint32_t) * (n + 1));
    text->tokens = malloc(sizeof(int32_t) * (n + 1));
    if (!cps || !text->tokens) {
        fprintf(stderr, "kvdemo: out of memory reading %s\n", path);
        free(bytes);
        free(cps);
        train_text_free(text);
        return 1;
    }
    int64_t count = 0;
    for (size_t i = 0; i < n;) {
        int len = utf8_decode(&cps[count], bytes + i, n - i);
        if (len == 0) {
            fprintf(stderr, "kvdemo: %s is not valid UTF-8 (byte %zu)\n", path, i);
            free(bytes);
            free(cps);
            train_text_free(text);
            return 1;
        }
        i += (size_t)len;
        count++;
    }
    free(bytes);
    if (vocab) {
        text->vocab = malloc(sizeof(uint32_t) * (size_t)V);
        if (text->vocab) memcpy(text->vocab, vocab, sizeof(uint32_t) * (size_t)V);
        text->V = V;
    } else {
        // the sorted distinct code points: sort a copy, keep the first of each run
        text->vocab = malloc(sizeof(uint32_t) * (size_t)(count + 1));
        if (text->vocab) {
            memcpy(text->vocab, cps, sizeof(uint32_t) * (size_t)count);
            qsort(text->vocab, (size_t)count, sizeof(uint32_t), cmp_u32);
            int v = 0;
            for (int64_t i = 0; i < count; i++)
                if (v == 0 || text->vocab[v - 1] != text->vocab[i])
                    text->vocab[v++] = text->vocab[i];
            text->V = v;
        }
    }
    if (!text->vocab) {
        fprintf(stderr, "kvdemo: out of memory reading %s\n", path);
        free(cps);
        train_text_free(text);
        return 1;
    }
    for (int64_t i = 0; i < count; i++) {
        int id = vocab_find(text->vocab, text->V, cps[i]);
        if (id < 0) {
            fprintf(stderr, "kvdemo: %s: character U+%04X at position %lld is not in the model's "
                            "vocabulary\n", path, (unsigned)cps[i], (long long)i);
            free(cps);
            train_text_free(text);
            return 1;
        }
        text->tokens[i] = id;
    }
    text->n = count;
    free(cps);
    return 0;
}

void train_text_free(TrainText *text) {
    free(text->vocab);
    free(text->tokens);
    memset(text, 0, sizeof(*text));
}

// FNV-1a, 64 bits: the checksum of checkpoints and the fingerprint of a text.
static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001B3ull;
    }
    return h;
}
#define FNV_START 0xCBF29CE484222325ull

// ---------------------------------------------------------------------------
// Checkpoints: little-endian, in this order (docs/training.md):
//   "KVTC", u32 version 1, u32 V T C H L, u32 batch iters warmup,
//   f32 lr min_lr weight_decay beta1 beta2 eps grad_clip, u64 seed,
//   u32 step, u64 rng, u64 text_hash, i64 text_tokens, u64 P,
//   u32 vocab[V], f32 params[P], f32 m[P], f32 v[P],
//   u64 FNV-1a of every byte before it.

#define CKPT_MAGIC "KVTC"
#define CKPT_VERSION 1u
enum { CKPT_HEADER = 4 + 4 + 5 * 4 + 3 * 4 + 7 * 4 + 8 + 4 + 8 + 8 + 8 + 8 };

static long ckpt_fail_after = -1;

void train_checkpoint_fail_after(long bytes) { ckpt_fail_after = bytes; }

typedef struct {
    FILE *f;
    uint64_t hash;
    long written;
    int failed;
} CkptWriter;

static void ck_write(CkptWriter *w, const void *data, size_t n) {
    if (w->failed) return;
    if (ckpt_fail_after >= 0 && w->written + (long)n > ckpt_fail_after) {
        // test hook: write the part that fits, then stop as a killed process would
        size_t part = (size_t)(ckpt_fail_after - w->written);
        fwrite(data, 1, part, w->f);
        fflush(w->f);
        w->failed = 2;
        return;
    }
    w->hash = fnv1a(w->hash, data, n);
    if (fwrite(data, 1, n, w->f) != n) w->failed = 1;
    w->written += (long)n;
}
static void ck_u32(CkptWriter *w, uint32_t x) { ck_write(w, &x, 4); }
static void ck_u64(CkptWriter *w, uint64_t x) { ck_write(w, &x, 8); }
static void ck_f32(CkptWriter *w, float x) { ck_write(w, &x, 4); }

int train_checkpoint_save(const char *path, const TrainCheckpoint *ck) {
    char err[512];
    if (!fileio_host_is_little_endian()) {
        fprintf(stderr, "kvdemo: checkpoints are little-endian; this machine is not\n");
        return 1;
    }
    AtomicFile a;
    if (fileio_open(&a, path, err, sizeof err) != 0) {
        fprintf(stderr, "kvdemo: cannot write the checkpoint: %s\n", err);
        return 1;
    }
    CkptWriter w = {a.f, FNV_START, 0, 0};
    const TrainConfig *c = &ck->cfg;
    ck_write(&w, CKPT_MAGIC, 4);
    ck_u32(&w, CKPT_VERSION);
    ck_u32(&w, (uint32_t)c->model.V);
    ck_u32(&w, (uint32_t)c->model.T);
    ck_u32(&w, (uint32_t)c->model.C);
    ck_u32(&w, (uint32_t)c->model.H);
    ck_u32(&w, (uint32_t)c->model.L);
    ck_u32(&w, (uint32_t)c->batch);
    ck_u32(&w, (uint32_t)c->iters);
    ck_u32(&w, (uint32_t)c->warmup);
    ck_f32(&w, c->lr);
    ck_f32(&w, c->min_lr);
    ck_f32(&w, c->weight_decay);
    ck_f32(&w, c->beta1);
    ck_f32(&w, c->beta2);
    ck_f32(&w, c->eps);
    ck_f32(&w, c->grad_clip);
    ck_u64(&w, c->seed);
    ck_u32(&w, (uint32_t)ck->step);
    ck_u64(&w, ck->rng);
    ck_u64(&w, ck->text_hash);
    ck_u64(&w, (uint64_t)ck->text_tokens);
    ck_u64(&w, (uint64_t)ck->num_params);
    ck_write(&w, ck->vocab, sizeof(uint32_t) * (size_t)c->model.V);
    ck_write(&w, ck->params, sizeof(float) * ck->num_params);
    ck_write(&w, ck->m, sizeof(float) * ck->num_params);
    ck_write(&w, ck->v, sizeof(float) * ck->num_params);
    uint64_t sum = w.hash;
    ck_u64(&w, sum);
    if (w.failed == 2) {   // the test hook: leave the partial temp file, as a crash would
        fclose(a.f);
        a.f = NULL;
        free(a.tmp);
        a.tmp = NULL;
        fileio_abort(&a);
        fprintf(stderr, "kvdemo: checkpoint save to %s interrupted\n", path);
        return 1;
    }
    if (fileio_commit(&a, err, sizeof err) != 0) {
        fprintf(stderr, "kvdemo: cannot write the checkpoint: %s\n", err);
        return 1;
    }
    return 0;
}

int train_config_check(const TrainConfig *c, char *why, size_t n) {
    const char *bad = NULL;
    if (c->batch < 1 || c->iters < 1 || c->warmup < 0 || c->warmup > c->iters)
        bad = "batch and iterations must be at least 1, warm-up from 0 to the iterations";
    else if (!(c->lr > 0 && isfinite(c->lr)))
        bad = "the learning rate must be a finite number above 0";
    else if (!(c->min_lr >= 0 && c->min_lr <= c->lr))
        bad = "min_lr must be from 0 to the learning rate";
    else if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
        bad = "beta1 and beta2 must be from 0 to below 1";
    else if (!(c->eps > 0 && isfinite(c->eps)))
        bad = "eps must be a finite number above 0";
    else if (!(c->grad_clip >= 0 && isfinite(c->grad_clip)))
        bad = "the gradient clip must be a finite number, 0 or more";
    else if (!(c->weight_decay >= 0 && isfinite(c->weight_decay)))
        bad = "the weight decay must be a finite number, 0 or more";
    if (!bad) return 0;
    snprintf(why, n, "%s (lr %g, min_lr %g, beta1 %g, beta2 %g, eps %g, clip %g, decay %g, batch %d, "
                     "iterations %d, warm-up %d)", bad, (double)c->lr, (double)c->min_lr, (double)c->beta1,
             (double)c->beta2, (double)c->eps, (double)c->grad_clip, (double)c->weight_decay, c->batch,
             c->iters, c->warmup);
    return -1;
}

int train_checkpoint_load(const char *path, TrainCheckpoint *ck) {
    memset(ck, 0, sizeof(*ck));
    char err[512], recipe[300];
    uint64_t size = 0;
    FILE *f = fileio_open_read(path, &size, err, sizeof err);
    if (!f) {
        fprintf(stderr, "kvdemo: cannot read the checkpoint: %s\n", err);
        return 1;
    }
    // The header first: the magic, the sizes and the recipe are checked, and
    // the file's length against them, before the rest is read.
    unsigned char h[CKPT_HEADER];
    unsigned char *buf = NULL;
    const char *why = NULL;
    TrainConfig *c = &ck->cfg;
    uint64_t P = 0;
    if (!fileio_host_is_little_endian())
        why = "checkpoints are little-endian; this machine is not";
    else if (size < CKPT_HEADER + 8)
        why = "too short to be a checkpoint (truncated?)";
    else if (fread(h, 1, CKPT_HEADER, f) != CKPT_HEADER)
        why = "read error";
    else if (memcmp(h, CKPT_MAGIC, 4) != 0)
        why = "wrong magic (not a kvdemo training checkpoint)";
    else if (le_get_u32(h + 4) != CKPT_VERSION)
        why = "unsupported version (expected 1)";
    if (!why) {
        const unsigned char *q = h + 8;
        uint32_t sizes[8];
        for (int i = 0; i < 8; i++) sizes[i] = le_get_u32(q + 4 * i);
        c->model.V = (int)sizes[0];
        c->model.T = (int)sizes[1];
        c->model.C = (int)sizes[2];
        c->model.H = (int)sizes[3];
        c->model.L = (int)sizes[4];
        c->batch = (int)sizes[5];
        c->iters = (int)sizes[6];
        c->warmup = (int)sizes[7];
        c->lr = le_get_f32(q + 32);
        c->min_lr = le_get_f32(q + 36);
        c->weight_decay = le_get_f32(q + 40);
        c->beta1 = le_get_f32(q + 44);
        c->beta2 = le_get_f32(q + 48);
        c->eps = le_get_f32(q + 52);
        c->grad_clip = le_get_f32(q + 56);
        c->seed = le_get_u64(q + 60);
        uint32_t step = le_get_u32(q + 68);
        ck->step = (int)step;
        ck->rng = le_get_u64(q + 72);
        ck->text_hash = le_get_u64(q + 80);
        ck->text_tokens = (int64_t)le_get_u64(q + 88);
        P = le_get_u64(q + 96);
        GptConfig g = c->model;
        int too_big = 0;
        for (int i = 0; i < 8; i++) too_big |= sizes[i] > 0x7fffffff;
        if (too_big || step > 0x7fffffff || g.V < 1 || g.V > 0x110000 || g.T < 1 || g.T > 65536 || g.C < 1 ||
            g.C > 65536 || g.H < 1 || g.L < 1 || g.L > 1024 || g.C % g.H != 0)
            why = "model sizes out of range or embedding not divisible by heads";
        else if (c->batch < 1 || c->iters < 1 || c->warmup < 0 || ck->step < 0 || ck->step > c->iters)
            why = "training step counts out of range";
        else if (train_config_check(c, recipe, sizeof recipe) != 0)
            why = recipe;
        else if (P != gpt_num_params(g))
            why = "parameter count does not match the model sizes";
        else if (size != CKPT_HEADER + 4ull * g.V + 12ull * P + 8)
            why = size < CKPT_HEADER + 4ull * g.V + 12ull * P + 8
                      ? "file is shorter than its sizes say (truncated)"
                      : "file is longer than its sizes say (trailing bytes)";
    }
    // Then the rest, whose length the header now vouches for.
    if (!why && !(buf = malloc((size_t)size)))
        why = "out of memory";
    if (!why) {
        memcpy(buf, h, CKPT_HEADER);
        if (fread(buf + CKPT_HEADER, 1, (size_t)size - CKPT_HEADER, f) != (size_t)size - CKPT_HEADER)
            why = "read error";
    }
    fclose(f);
    const unsigned char *p = buf;
    if (!why && fnv1a(FNV_START, p, (size_t)size - 8) != le_get_u64(p + size - 8))
        why = "checksum mismatch (the file is corrupted)";
    if (!why) {
        ck->num_params = (size_t)P;
        ck->vocab = malloc(sizeof(uint32_t) * (size_t)c->model.V);
        ck->params = malloc(sizeof(float) * (size_t)P * 3);
        if (!ck->vocab || !ck->params) why = "out of memory";
    }
    if (!why) {
        memcpy(ck->vocab, p + CKPT_HEADER, sizeof(uint32_t) * (size_t)c->model.V);
        memcpy(ck->params, p + CKPT_HEADER + 4 * (size_t)c->model.V, sizeof(float) * (size_t)P * 3);
        ck->m = ck->params + P;
        ck->v = ck->params + 2 * P;
        for (int i = 0; i < c->model.V && !why; i++)
            if (ck->vocab[i] > 0x10FFFF || (i > 0 && ck->vocab[i] <= ck->vocab[i - 1]))
                why = "vocabulary is not sorted distinct code points";
        for (uint64_t i = 0; i < 3 * P && !why; i++)
            if (!isfinite(ck->params[i])) why = "weights or optimizer state hold NaN or infinity";
    }
    free(buf);
    if (why) {
        fprintf(stderr, "kvdemo: checkpoint %s rejected: %s\n", path, why);
        train_checkpoint_free(ck);
        return 1;
    }
    return 0;
}

void train_checkpoint_free(TrainCheckpoint *ck) {
    free(ck->vocab);
    free(ck->params);   // m and v live in the same allocation
    memset(ck, 0, sizeof(*ck));
}

// ---------------------------------------------------------------------------
// The recipe.

int train_config_default(TrainConfig *cfg, const char *preset) {
    memset(cfg, 0, sizeof(*cfg));
    if (!preset) preset = "seed";
    // the shapes are gpt_preset's; V comes from the text
    if (gpt_preset(&cfg->model, preset) != 0) return -1;
    cfg->model.V = 0;
    if (strcmp(preset, "seed") == 0) {
        cfg->batch = 16;
        cfg->iters = 1500;
        cfg->warmup = 50;
        cfg->eval_every = 100;
        cfg->ckpt_every = 100;
    } else {   // tiny
        cfg->batch = 8;
        cfg->iters = 300;
        cfg->warmup = 20;
        cfg->eval_every = 50;
        cfg->ckpt_every = 100;
    }
    cfg->lr = 1e-3f;
    cfg->min_lr = 1e-4f;
    cfg->weight_decay = 0.1f;
    cfg->beta1 = 0.9f;
    cfg->beta2 = 0.95f;
    cfg->eps = 1e-8f;
    cfg->grad_clip = 1.0f;
    cfg->seed = 1337;
    cfg->eval_batches = 4;
    return 0;
}

// ---------------------------------------------------------------------------
// Loss over windows of the text: window w feeds tokens start + w T ..
// start + w T + T - 1 and predicts each next one. With max_windows smaller
// than the number of windows, that many are taken evenly spaced.

static double loss_over_windows(TrainState *s, const float *params, const int32_t *tokens,
                                int64_t start, int64_t end, int64_t max_windows,
                                int32_t *inputs, int32_t *targets) {
    int T = s->cfg.T;
    int64_t count = (end - start - 1) / T;
    if (count < 1) return NAN;
    int64_t use = max_windows > 0 && max_windows < count ? max_windows : count;
    double total = 0.0;
    for (int64_t w0 = 0; w0 < use; w0 += s->B) {
        int b = (int)(use - w0 < s->B ? use - w0 : s->B);
        for (int i = 0; i < b; i++) {
            int64_t w = (w0 + i) * count / use;
            const int32_t *x = tokens + start + w * T;
            memcpy(inputs + (int64_t)i * T, x, sizeof(int32_t) * (size_t)T);
            memcpy(targets + (int64_t)i * T, x + 1, sizeof(int32_t) * (size_t)T);
        }
        total += train_forward(s, params, inputs, targets, b) * b;
    }
    return total / use;
}

int train_eval(const GptModel *model, const char *data_path, int threads, double *train_loss,
               double *val_loss) {
    TrainText text;
    if (train_text_load(&text, data_path, model->vocab, model->cfg.V) != 0) return 1;
    GptConfig g = model->cfg;
    int64_t n_train = text.n * 9 / 10;
    if (n_train < g.T + 1 || text.n - n_train < g.T + 1) {
        fprintf(stderr, "kvdemo: %s is too short: each split needs more than %d characters\n",
                data_path, g.T);
        train_text_free(&text);
        return 1;
    }
    int B = 8;
    TrainPool *pool = train_pool_new(threads);
    TrainState *s = pool ? train_state_new(g, B, pool) : NULL;
    int32_t *io = malloc(sizeof(int32_t) * 2 * (size_t)B * g.T);
    if (!s || !io) {
        fprintf(stderr, "kvdemo: out of memory for evaluation\n");
        free(io);
        train_state_free(s);
        train_pool_free(pool);
        train_text_free(&text);
        return 1;
    }
    int64_t val_windows = (text.n - n_train - 1) / g.T;
    if (val_loss)
        *val_loss = loss_over_windows(s, model->params, text.tokens, n_train, text.n, 0, io,
                                      io + B * g.T);
    // the training split is 9 times longer: as many windows as validation
    // has, spread evenly over it, give the same precision in a tenth of the time
    if (train_loss)
        *train_loss = loss_over_windows(s, model->params, text.tokens, 0, n_train, val_windows,
                                        io, io + B * g.T);
    free(io);
    train_state_free(s);
    train_pool_free(pool);
    train_text_free(&text);
    return 0;
}

// ---------------------------------------------------------------------------
// Progress: one line rewritten in place on a terminal, log lines otherwise.

static void format_duration(char *out, size_t n, double s) {
    if (!(s >= 0) || s > 1e7) {
        snprintf(out, n, "--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(out, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(out, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(out, n, "%lds", t);
}

static void print_progress(const TrainProgress *p, int tty) {
    char el[32], eta[32], val[32];
    format_duration(el, sizeof el, p->elapsed_s);
    format_duration(eta, sizeof eta, p->eta_s);
    if (isnan(p->val_loss)) snprintf(val, sizeof val, "  -   ");
    else snprintf(val, sizeof val, "%.4f", p->val_loss);
    if (tty) {
        fprintf(stderr, "\r\033[Kstep %d/%d  loss %.4f  val %s  lr %.2e  %.0f tok/s  %s  ETA %s",
                p->step, p->iters, p->loss, val, p->lr, p->tokens_per_s, el, eta);
        if (p->step == p->iters) fputc('\n', stderr);
    } else if (p->evaluated || p->step % 10 == 0 || p->step == p->iters) {
        fprintf(stderr, "step %d/%d loss %.4f val %s lr %.2e norm %.3f %.0f tok/s elapsed %s "
                        "ETA %s\n", p->step, p->iters, p->loss, val, p->lr, p->grad_norm,
                p->tokens_per_s, el, eta);
    }
    fflush(stderr);
}

// ---------------------------------------------------------------------------
// train_run: the loop that ties everything together.

static volatile sig_atomic_t stop_requested = 0;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

// Draws B windows of T + 1 tokens from the training split.
static void draw_batch(int32_t *inputs, int32_t *targets, const int32_t *tokens, int64_t n_train,
                       int B, int T, uint64_t *rng) {
    for (int b = 0; b < B; b++) {
        int64_t start = (int64_t)(rng_next(rng) % (uint64_t)(n_train - T));
        memcpy(inputs + (int64_t)b * T, tokens + start, sizeof(int32_t) * (size_t)T);
        memcpy(targets + (int64_t)b * T, tokens + start + 1, sizeof(int32_t) * (size_t)T);
    }
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static int save_checkpoint(const char *path, const TrainConfig *r, const TrainText *text,
                           uint64_t text_hash, int step, uint64_t rng, const float *params,
                           const float *m, const float *v, size_t P) {
    TrainCheckpoint ck = {*r, text->vocab, step, rng, text_hash, text->n,
                          (float *)params, (float *)m, (float *)v, P};
    return train_checkpoint_save(path, &ck);
}

int train_run(const TrainConfig *cfg, TrainProgressFn progress, void *user) {
    TrainConfig r = *cfg;
    TrainCheckpoint ck = {0};
    int status = TRAIN_FAILED;
    TrainText text = {0};
    TrainPool *pool = NULL;
    TrainState *s = NULL;
    float *memory = NULL;
    uint8_t *decay = NULL;
    ParamTensor *table = NULL;
    double *partial = NULL;
    int32_t *io = NULL;
    char *ckpt_default = NULL;
    GptBlockParams *blocks = NULL;

    if (r.resume_path) {
        if (train_checkpoint_load(r.resume_path, &ck) != 0) return TRAIN_FAILED;
        // the recipe is the checkpoint's: only then does the run end as an
        // uninterrupted one would
        TrainConfig c = ck.cfg;
        r.model = c.model;
        r.batch = c.batch;
        r.iters = c.iters;
        r.warmup = c.warmup;
        r.lr = c.lr;
        r.min_lr = c.min_lr;
        r.weight_decay = c.weight_decay;
        r.beta1 = c.beta1;
        r.beta2 = c.beta2;
        r.eps = c.eps;
        r.grad_clip = c.grad_clip;
        r.seed = c.seed;
    }
    if (train_text_load(&text, r.data_path, r.resume_path ? ck.vocab : NULL,
                        r.resume_path ? ck.cfg.model.V : 0) != 0)
        goto done;
    r.model.V = text.V;
    GptConfig g = r.model;
    uint64_t text_hash = fnv1a(fnv1a(FNV_START, text.vocab, sizeof(uint32_t) * (size_t)text.V),
                               text.tokens, sizeof(int32_t) * (size_t)text.n);
    if (r.resume_path && (text_hash != ck.text_hash || text.n != ck.text_tokens)) {
        fprintf(stderr, "kvdemo: %s is not the text checkpoint %s was trained on\n", r.data_path,
                r.resume_path);
        goto done;
    }
    int64_t n_train = text.n * 9 / 10;
    if (g.T < 1 || g.C < 1 || g.H < 1 || g.L < 1 || g.C % g.H != 0) {
        fprintf(stderr, "kvdemo: bad model shape: context %d, embedding %d, heads %d, blocks %d "
                        "(the embedding must divide by the heads)\n", g.T, g.C, g.H, g.L);
        goto done;
    }
    if (n_train < g.T + 1 || text.n - n_train < g.T + 1) {
        fprintf(stderr, "kvdemo: %s is too short for context %d: %lld characters, each split "
                        "needs more than %d\n", r.data_path, g.T, (long long)text.n, g.T);
        goto done;
    }
    char why[512];
    if (train_config_check(&r, why, sizeof why) != 0) {
        fprintf(stderr, "kvdemo: bad training recipe: %s\n", why);
        goto done;
    }
    if (!r.ckpt_path) {
        size_t len = strlen(r.out_path);
        ckpt_default = malloc(len + 6);
        if (!ckpt_default) goto oom;
        memcpy(ckpt_default, r.out_path, len);
        memcpy(ckpt_default + len, ".ckpt", 6);
        r.ckpt_path = ckpt_default;
    }
    // The model and the checkpoint are written after the work: a path that
    // cannot be written (a folder, a device, a missing or read-only folder)
    // is found now, by creating and removing its temporary file.
    if (fileio_check_writable(r.out_path, why, sizeof why) != 0 ||
        fileio_check_writable(r.ckpt_path, why, sizeof why) != 0) {
        fprintf(stderr, "kvdemo: %s\n", why);
        goto done;
    }

    size_t P = gpt_num_params(g);
    pool = train_pool_new(r.threads);
    if (!pool) goto oom;
    s = train_state_new(g, r.batch, pool);
    memory = malloc(sizeof(float) * 4 * P);   // params, grads, m, v
    decay = malloc(P);
    int ntables = 0;
    table = param_table_new(g, &ntables);
    int chunks = (int)((P + ADAM_CHUNK - 1) / ADAM_CHUNK);
    partial = malloc(sizeof(double) * (size_t)chunks);
    io = malloc(sizeof(int32_t) * 2 * (size_t)r.batch * g.T);
    blocks = malloc(sizeof(GptBlockParams) * (size_t)g.L);
    if (!s || !memory || !decay || !table || !partial || !io || !blocks) goto oom;
    float *params = memory, *grads = memory + P, *m = memory + 2 * P, *v = memory + 3 * P;
    int32_t *inputs = io, *targets = io + (size_t)r.batch * g.T;
    for (int t = 0, at = 0; t < ntables; at += (int)table[t].size, t++)
        memset(decay + at, table[t].decay, table[t].size);

    int step = 0;
    uint64_t rng = r.seed ^ 0xBA7C4E5BA7C4E5ull;
    if (r.resume_path) {
        memcpy(params, ck.params, sizeof(float) * P);
        memcpy(m, ck.m, sizeof(float) * P);
        memcpy(v, ck.v, sizeof(float) * P);
        step = ck.step;
        rng = ck.rng;
        train_checkpoint_free(&ck);
    } else {
        train_init_params(params, g, r.seed);
        memset(m, 0, sizeof(float) * P);
        memset(v, 0, sizeof(float) * P);
    }

    int tty = isatty(2);
    if (!r.quiet)
        fprintf(stderr, "kvdemo train: %s, %lld characters, vocabulary %d; context %d, "
                        "embedding %d, heads %d, blocks %d: %zu parameters; batch %d x %d, "
                        "%d steps%s, %d threads\n", r.data_path, (long long)text.n, g.V, g.T,
                g.C, g.H, g.L, P, r.batch, g.T, r.iters,
                r.resume_path ? " (resumed)" : "", train_pool_threads(pool));
    if (r.resume_path && !r.quiet)
        fprintf(stderr, "resuming at step %d of %d from %s\n", step, r.iters, r.resume_path);

    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    stop_requested = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    double t0 = timer_now(), eval_time = 0.0;
    double last_print = -1.0;
    int first_step = step;
    float val = NAN, loss = NAN;
    int64_t val_max = (int64_t)r.eval_batches * r.batch;
    status = TRAIN_OK;
    while (step < r.iters) {
        // one step: batch, forward, backward, clip, AdamW
        draw_batch(inputs, targets, text.tokens, n_train, r.batch, g.T, &rng);
        loss = (float)train_forward(s, params, inputs, targets, r.batch);
        memset(grads, 0, sizeof(float) * P);
        train_backward(s, grads, params, inputs, targets, r.batch);
        float lr = lr_at(&r, step);
        float norm = adamw_update(params, m, v, grads, decay, partial, &r, lr, step, pool, P);
        step++;
        // A non-finite loss or gradient leaves weights that no model file may
        // hold: stop, keeping the last good checkpoint as it is.
        if (!isfinite(loss) || !isfinite(norm) || !all_finite(params, P)) {
            fprintf(stderr, "\nkvdemo: the %s became %s at step %d; the last checkpoint (%s) is kept; "
                            "try a lower --lr\n", isfinite(loss) ? "weights" : "loss",
                    isnan(loss) || isnan(norm) ? "NaN" : "infinite", step, r.ckpt_path);
            status = TRAIN_FAILED;
            break;
        }

        int evaluated = 0;
        if ((r.eval_every > 0 && step % r.eval_every == 0) || step == r.iters) {
            double e0 = timer_now();
            val = (float)loss_over_windows(s, params, text.tokens, n_train, text.n, val_max,
                                           inputs, targets);
            eval_time += timer_now() - e0;
            evaluated = 1;
        }
        int stop = stop_requested;
        double elapsed = timer_now() - t0, train_time = elapsed - eval_time;
        TrainProgress pr = {step, r.iters, loss, val, lr, norm, 0, elapsed, NAN, evaluated};
        if (train_time > 0) {
            pr.tokens_per_s = (double)(step - first_step) * r.batch * g.T / train_time;
            pr.eta_s = train_time / (step - first_step) * (r.iters - step);
        }
        // a terminal gets at most 10 updates a second
        int due = !tty || evaluated || step == r.iters || elapsed - last_print >= 0.1;
        if (progress) {
            stop |= progress(&pr, user) != 0;
        } else if (!r.quiet && due) {
            print_progress(&pr, tty);
            last_print = elapsed;
        }
        stop |= stop_requested;

        if (stop || (r.ckpt_every > 0 && step % r.ckpt_every == 0 && step < r.iters)) {
            if (save_checkpoint(r.ckpt_path, &r, &text, text_hash, step, rng, params, m, v, P)) {
                status = TRAIN_FAILED;
                break;
            }
            if (stop) {
                if (!r.quiet)
                    fprintf(stderr, "%sstopped at step %d of %d; checkpoint %s (continue with "
                                    "--resume %s)\n", tty ? "\n" : "", step, r.iters, r.ckpt_path,
                            r.ckpt_path);
                status = TRAIN_STOPPED;
                break;
            }
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);

    if (status == TRAIN_OK) {
        GptModel model = {.cfg = g, .vocab = text.vocab, .params = params, .num_params = P};
        gpt_params_carve(&model.p, blocks, params, g);
        char err[256];
        if (gpt_save(&model, r.out_path, err, sizeof err) != 0) {
            fprintf(stderr, "kvdemo: %s\n", err);
            status = TRAIN_FAILED;
            goto done;
        }
        if (!r.quiet) {
            double elapsed = timer_now() - t0;
            char el[32];
            format_duration(el, sizeof el, elapsed);
            fprintf(stderr, "done: %d steps in %s (%.0f tokens/s), last batch loss %.4f, "
                            "validation estimate %.4f; model written to %s\n", r.iters - first_step,
                    el, (double)(r.iters - first_step) * r.batch * g.T /
                            (elapsed - eval_time > 0 ? elapsed - eval_time : 1),
                    loss, val, r.out_path);
        }
    }
    goto done;
oom:
    fprintf(stderr, "kvdemo: out of memory for training\n");
    status = TRAIN_FAILED;
done:
    if (ck.params || ck.vocab) train_checkpoint_free(&ck);
    free(blocks);
    free(io);
    free(partial);
    free(table);
    free(decay);
    free(memory);
    train_state_free(s);
    train_pool_free(pool);
    train_text_free(&text);
    free(ckpt_default);
    return status;
}

// ---------------------------------------------------------------------------
// The speed of training, for `make bench`: whole steps (forward, backward,
// AdamW) on random tokens, after one step that is not timed (first touch of
// the memory).

int train_benchmark(GptConfig cfg, int B, int steps, int threads, double *tokens_per_s) {
    TrainConfig r;
    train_config_default(&r, "seed");
    size_t P = gpt_num_params(cfg);
    int count = 0;
    TrainPool *pool = train_pool_new(threads);
    TrainState *s = pool ? train_state_new(cfg, B, pool) : NULL;
    float *memory = malloc(sizeof(float) * 4 * P);
    uint8_t *decay = malloc(P);
    ParamTensor *table = param_table_new(cfg, &count);
    double *partial = malloc(sizeof(double) * ((P + ADAM_CHUNK - 1) / ADAM_CHUNK));
    int32_t *io = malloc(sizeof(int32_t) * 2 * (size_t)B * cfg.T);
    int status = 1;
    if (s && memory && decay && table && partial && io) {
        float *params = memory, *grads = memory + P, *m = memory + 2 * P, *v = memory + 3 * P;
        for (int t = 0, at = 0; t < count; at += (int)table[t].size, t++)
            memset(decay + at, table[t].decay, table[t].size);
        train_init_params(params, cfg, 1);
        memset(m, 0, sizeof(float) * 2 * P);   // m and v
        uint64_t rng = 1;
        for (size_t i = 0; i < 2 * (size_t)B * cfg.T; i++)
            io[i] = (int32_t)(rng_next(&rng) % (uint64_t)cfg.V);
        double t0 = 0.0;
        for (int step = 0; step <= steps; step++) {
            if (step == 1) t0 = timer_now();
            train_forward(s, params, io, io + (size_t)B * cfg.T, B);
            memset(grads, 0, sizeof(float) * P);
            train_backward(s, grads, params, io, io + (size_t)B * cfg.T, B);
            adamw_update(params, m, v, grads, decay, partial, &r, r.lr, step, pool, P);
        }
        *tokens_per_s = steps > 0 ? (double)steps * B * cfg.T / (timer_now() - t0) : 0.0;
        status = 0;
    } else {
        fprintf(stderr, "kvdemo: out of memory for the training benchmark\n");
    }
    free(io);
    free(partial);
    free(table);
    free(decay);
    free(memory);
    train_state_free(s);
    train_pool_free(pool);
    return status;
}
