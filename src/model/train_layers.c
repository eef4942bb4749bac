// train_layers — the layers of the char GPT for training: each forward pass
// keeps what its backward pass needs, each backward pass ADDS into the
// gradients (+=). Outputs first, sizes last; the loops over rows run on the
// Pool, one contiguous slice of tasks per thread (pool_run_slices).
//
// Legend (train.h): N rows = B * T, C embedding, IC/OC a linear layer's
// input and output sizes, H heads, D = C / H, V vocabulary.
//
// Every task writes its own outputs and every sum over tasks runs in a
// fixed order, so the results never depend on the number of threads.
#include "train.h"

#include "ops.h"

#include <math.h>
#include <stdint.h>
#include <string.h>


static int min_int(int a, int b) { return a < b ? a : b; }

// ---------------------------------------------------------------------------
// Linear layer: y = x @ W + b with W stored (in, out), as in the chapter.

void linear_forward(float *out, const float *inp, const float *w, const float *b, Pool *pool,
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
                     const float *inp, const float *w, Pool *pool, int N, int IC, int OC) {
    // dinp (N, IC), dw (IC, OC), db (OC), wt (OC, IC) scratch, dout (N, OC), inp (N, IC)
    LinearJob j = {wt, db, w, dout, N, IC, OC};
    if (dinp) {
        // dinp += dout @ w^T    (w^T made contiguous first, so b rows are contiguous)
        pool_run_slices(pool, transpose_task, &j, IC);
        train_matmul(dinp, dout, wt, NULL, 1, pool, OC, 1, IC, IC, N, OC, IC);
    }
    // dw += inp^T @ dout    (a(i, n) = inp[n * IC + i]: a transposed view)
    train_matmul(dw, inp, dout, NULL, 1, pool, 1, IC, OC, OC, IC, N, OC);
    // db += dout.sum(0)
    if (db) pool_run_slices(pool, bias_grad_task, &j, (OC + 15) / 16);
}

// ---------------------------------------------------------------------------
// LayerNorm over the C features of each row, eps 1e-5.

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
        ops_layernorm(j->out + off, j->mean + r0, j->rstd + r0, j->inp + off, j->w, j->b,
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

size_t layernorm_scratch(int N, int C) { return (size_t)(N + LN_ROWS - 1) / LN_ROWS * 2 * (size_t)C; }

void layernorm_forward_pool(float *out, float *mean, float *rstd, const float *inp,
                                   const float *w, const float *b, Pool *pool, int N, int C) {
    LnJob j = {.out = out, .mean = mean, .rstd = rstd, .inp = inp, .w = w, .b = b, .N = N, .C = C};
    pool_run_slices(pool, layernorm_forward_task, &j, (N + LN_ROWS - 1) / LN_ROWS);
}

void layernorm_backward_pool(float *dinp, float *dw, float *db, float *partial,
                                    const float *dout, const float *inp, const float *w,
                                    const float *mean, const float *rstd, Pool *pool, int N,
                                    int C) {
    int chunks = (N + LN_ROWS - 1) / LN_ROWS;
    LnJob j = {.out = dinp, .partial = partial, .dout = dout, .inp = inp, .w = w,
               .cmean = mean, .crstd = rstd, .N = N, .C = C};
    pool_run_slices(pool, layernorm_backward_task, &j, chunks);
    for (int chunk = 0; chunk < chunks; chunk++) {
        const float *pdw = partial + (int64_t)chunk * 2 * C, *pdb = pdw + C;
        for (int c = 0; c < C; c++) {
            dw[c] += pdw[c];
            db[c] += pdb[c];
        }
    }
}

// ---------------------------------------------------------------------------
// GELU, tanh approximation (ops_gelu, which inference runs too).

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
    if (i0 < i1) ops_gelu(j->out + i0, j->inp + i0, (int)(i1 - i0));
}

static void gelu_backward_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const GeluJob *j = ctx;
    int64_t i0 = begin * j->chunk, i1 = end * j->chunk < j->n ? end * j->chunk : j->n;
    if (i0 < i1) ops_gelu_backward(j->out + i0, j->inp + i0, j->dout + i0, (int)(i1 - i0));
}

void gelu_forward_pool(float *out, const float *inp, Pool *pool, int64_t n) {
    GeluJob j = {out, inp, NULL, 4096, n};
    pool_run_slices(pool, gelu_forward_task, &j, (int)((n + j.chunk - 1) / j.chunk));
}

void gelu_backward_pool(float *dinp, const float *inp, const float *dout, Pool *pool, int64_t n) {
    GeluJob j = {dinp, inp, dout, 4096, n};
    pool_run_slices(pool, gelu_backward_task, &j, (int)((n + j.chunk - 1) / j.chunk));
}

// ---------------------------------------------------------------------------
// Causal self-attention with H query heads and G key/value heads (G = H for
// the char GPT). Query head h of sequence b reads columns h*D .. h*D+D-1 of
// q (B, T, H*D) and columns g*D .. g*D+D-1, g = h / (H / G), of k and v
// (B, T, G*D). The causal mask is applied as the bound j <= i of the
// softmax; the weights above the diagonal are 0.

typedef struct {
    float *out, *att, *dq, *dk, *dv, *scratch;
    const float *q, *k, *v, *dout, *catt;
    int B, T, H, G, D;
    int W;   // 0, or the band mask's width (sliding-window attention)
} AttnJob;

static void attention_forward_task(void *ctx, int begin, int end, int thread) {
    const AttnJob *j = ctx;
    int T = j->T, H = j->H, D = j->D, QC = H * D, KC = j->G * D, rep = H / j->G;
    float scale = 1.0f / sqrtf((float)D);
    float *kt = j->scratch + (int64_t)thread * D * T;   // (D, T) this head's keys, transposed
    for (int bh = begin; bh < end; bh++) {
        int b = bh / H, h = bh % H, g = h / rep;
        const float *q = j->q + (int64_t)b * T * QC + h * D;   // (T, D), rows QC apart
        const float *k = j->k + (int64_t)b * T * KC + g * D;   // (T, D), rows KC apart
        const float *v = j->v + (int64_t)b * T * KC + g * D;
        float *out = j->out + (int64_t)b * T * QC + h * D;
        float *att = j->att + (int64_t)bh * T * T;             // (T, T)
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++) kt[(int64_t)d * T + t] = k[(int64_t)t * KC + d];
        // scores = q @ k^T                 torch: q @ k.transpose(-2, -1)
        train_matmul_causal(att, q, kt, TRAIN_CAUSAL_COLS, 0, QC, 1, T, T, T, D, T);
        // att = softmax(scores / sqrt(D) + mask), the mask as the bound t <= i.
        // The plain kernel (expf, summed in order): the arithmetic the shipped
        // model was trained with, so that docs/training.md's recipe gives it.
        // With a band of W, the columns before lo = i - W + 1 are masked too.
        for (int i = 0; i < T; i++) {
            float *row = att + (int64_t)i * T;
            int lo = j->W > 0 && i - j->W + 1 > 0 ? i - j->W + 1 : 0;
            for (int t = lo; t <= i; t++) row[t] *= scale;
            ops_softmax_row_plain(row + lo, NULL, row + lo, i + 1 - lo, OPS_RECIPROCAL);
            for (int t = 0; t < lo; t++) row[t] = 0.0f;       // outside the band: weight 0
            for (int t = i + 1; t < T; t++) row[t] = 0.0f;   // masked: weight 0
        }
        // out = att @ v                     torch: att @ v
        train_matmul_causal(out, att, v, TRAIN_CAUSAL_K_LE, 0, T, 1, KC, QC, T, T, D);
    }
}

void attention_forward_band(float *out, float *att, const float *q, const float *k, const float *v,
                            float *scratch, Pool *pool, int B, int T, int H, int G, int D, int W) {
    // out (B, T, H*D), att (B, H, T, T), q (B, T, H*D), k v (B, T, G*D), scratch threads * (D, T)
    AttnJob job = {.out = out, .att = att, .scratch = scratch, .q = q, .k = k, .v = v,
                   .B = B, .T = T, .H = H, .G = G, .D = D, .W = W};
    pool_run_slices(pool, attention_forward_task, &job, B * H);
}

void attention_forward_grouped(float *out, float *att, const float *q, const float *k,
                               const float *v, float *scratch, Pool *pool, int B, int T, int H,
                               int G, int D) {
    attention_forward_band(out, att, q, k, v, scratch, pool, B, T, H, G, D, 0);
}

void attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                       float *scratch, Pool *pool, int B, int T, int C, int H) {
    attention_forward_grouped(out, att, q, k, v, scratch, pool, B, T, H, H, C / H);
}

// One task is a key/value head g of one sequence and its H / G query heads,
// taken in order: each adds its share into the shared dk, dv of g (the
// gradient of a shared head is the sum over its query heads), in the same
// order whatever the number of threads.
static void attention_backward_task(void *ctx, int begin, int end, int thread) {
    const AttnJob *j = ctx;
    int T = j->T, H = j->H, G = j->G, D = j->D, QC = H * D, KC = G * D, rep = H / G;
    float scale = 1.0f / sqrtf((float)D);
    float *vt = j->scratch + (int64_t)thread * (D * T + T * T);   // (D, T)
    float *ds = vt + (int64_t)D * T;                               // (T, T)
    for (int bg = begin; bg < end; bg++) {
        int b = bg / G, g = bg % G;
        int64_t koff = (int64_t)b * T * KC + g * D;
        const float *k = j->k + koff, *v = j->v + koff;
        float *dk = j->dk + koff, *dv = j->dv + koff;
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++) vt[(int64_t)d * T + t] = v[(int64_t)t * KC + d];
        for (int h = g * rep; h < (g + 1) * rep; h++) {
            int64_t qoff = (int64_t)b * T * QC + h * D;
            const float *q = j->q + qoff, *dout = j->dout + qoff;
            float *dq = j->dq + qoff;
            const float *att = j->catt + ((int64_t)b * H + h) * T * T;
            // datt = dout @ v^T
            train_matmul_causal(ds, dout, vt, TRAIN_CAUSAL_COLS, 0, QC, 1, T, T, T, D, T);
            // dv += att^T @ dout
            train_matmul_causal(dv, att, dout, TRAIN_CAUSAL_K_GE, 1, 1, T, QC, KC, T, T, D);
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
            train_matmul_causal(dq, ds, k, TRAIN_CAUSAL_K_LE, 1, T, 1, KC, QC, T, T, D);
            train_matmul_causal(dk, ds, q, TRAIN_CAUSAL_K_GE, 1, 1, T, QC, KC, T, T, D);
        }
    }
}

void attention_backward_grouped(float *dq, float *dk, float *dv, const float *dout,
                                const float *att, const float *q, const float *k, const float *v,
                                float *scratch, Pool *pool, int B, int T, int H, int G, int D) {
    // dq (B, T, H*D), dk dv (B, T, G*D), dout (B, T, H*D), att (B, H, T, T),
    // scratch threads * (D*T + T*T)
    AttnJob job = {.dq = dq, .dk = dk, .dv = dv, .scratch = scratch, .q = q, .k = k, .v = v,
                   .dout = dout, .catt = att, .B = B, .T = T, .H = H, .G = G, .D = D};
    pool_run_slices(pool, attention_backward_task, &job, B * G);
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *att,
                        const float *q, const float *k, const float *v, float *scratch,
                        Pool *pool, int B, int T, int C, int H) {
    attention_backward_grouped(dq, dk, dv, dout, att, q, k, v, scratch, pool, B, T, H, H, C / H);
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
        float lse;   // log(sum(exp(x)))
        ops_softmax_row_plain(p, &lse, x, V, OPS_DIVIDE);
        // -log p[target] from the logits, exact even when p underflows
        losses[n] = lse - x[targets[n]];
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

