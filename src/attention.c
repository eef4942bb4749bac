// attention — scaled dot-product attention with every intermediate kept.
#include "attention.h"

#include "ops.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// F.softmax(scores, dim=-1) as PyTorch computes it on the CPU, so that the
// toy lessons print PyTorch's digits to the last one at any --precision
// (ATen's vectorised softmax over the last dimension, 8 floats a vector):
//   max = the row's largest score
//   e_c = exp(x_c - max)
//   sum = a row shorter than 8: the e_c added left to right; else the e_c
//         added in 8 lanes (the tail into the first lanes), and the lanes
//         folded in halves: ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7))
//   y_c = e_c * (1 / sum)          multiplied, not divided
// Mathematically it is ops_softmax_rows; only the last bit of a weight may
// differ. exp itself is the C library's, which can still differ from
// PyTorch's in the last bit (docs/lesson-2.md says where).
enum { LANES = 8 };

static float pytorch_row_sum(const float *e, int n) {
    if (n < LANES) {
        float sum = e[0];
        for (int c = 1; c < n; c++) sum += e[c];
        return sum;
    }
    float l[LANES];
    memcpy(l, e, sizeof l);
    int c = LANES;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) l[k] += e[c + k];
    for (int k = 0; c + k < n; k++) l[k] += e[c + k];   // the tail, into the first lanes
    for (int k = 0; k < 4; k++) l[k] += l[k + 4];        // halves of 128 bits
    l[0] += l[2];                                         // then of 64
    l[1] += l[3];
    return l[0] + l[1];                                   // then of 32
}

static void softmax_rows_pytorch(float *out, const float *in, int R, int C) {
    for (int r = 0; r < R; r++) {
        const float *x = in + (int64_t)r * C;
        float *y = out + (int64_t)r * C;
        float max = -INFINITY;
        for (int c = 0; c < C; c++)
            if (x[c] > max) max = x[c];
        for (int c = 0; c < C; c++) y[c] = expf(x[c] - max);   // exp(-inf) = 0: a masked score weighs nothing
        float inv = 1.0f / pytorch_row_sum(y, C);
        for (int c = 0; c < C; c++) y[c] *= inv;
    }
}

int attn_step_init(AttnStep *s, int cap, int d, int dk, int dv) {
    memset(s, 0, sizeof *s);
    s->cap = cap;
    s->d = d;
    s->dk = dk;
    s->dv = dv;
    // One allocation, carved: Q, K, Kt (cap*dk each), V, output (cap*dv
    // each), and the four (cap, cap) matrices.
    size_t n = (size_t)cap * (3 * (size_t)dk + 2 * (size_t)dv + 4 * (size_t)cap);
    float *p = calloc(n, sizeof(float));
    if (!p) return -1;
    s->Q = p;
    s->K = s->Q + cap * dk;
    s->Kt = s->K + cap * dk;
    s->V = s->Kt + cap * dk;
    s->output = s->V + cap * dv;
    s->scores = s->output + cap * dv;
    s->mask = s->scores + cap * cap;
    s->masked = s->mask + cap * cap;
    s->weights = s->masked + cap * cap;
    return 0;
}

void attn_step_free(AttnStep *s) {
    free(s->Q);
    memset(s, 0, sizeof *s);
}

void attention_attend(AttnStep *s, int M, int N, float scale, int causal) {
    assert(M <= N && N <= s->cap);
    s->M = M;
    s->N = N;
    // scores = torch.matmul(Q, K.T) / scale
    ops_transpose(s->Kt, s->K, N, s->dk);
    ops_matmul(s->scores, s->Q, s->Kt, NULL, M, s->dk, N);
    ops_div(s->scores, scale, M * N);
    // scores += mask: the M query rows sit at positions N-M .. N-1, so row r
    // may see columns 0 .. N-M+r (torch.triu(mask, diagonal=N-M+1)).
    if (causal) ops_causal_mask(s->mask, M, N, N - M);
    else memset(s->mask, 0, sizeof(float) * (size_t)(M * N));
    ops_add(s->masked, s->scores, s->mask, M * N);
    // scores = F.softmax(scores, dim=-1)
    softmax_rows_pytorch(s->weights, s->masked, M, N);
    // output = torch.matmul(scores, V)
    ops_matmul(s->output, s->weights, s->V, NULL, M, N, s->dv);
    s->attn_madds = (int64_t)M * N * (s->dk + s->dv);
}

void attention_full(AttnStep *s, const float *X, int n, const float *W_Q, const float *W_K,
                    const float *W_V, float scale, int causal) {
    assert(n <= s->cap);
    // Q = torch.matmul(X, W_Q); K = torch.matmul(X, W_K); V = torch.matmul(X, W_V)
    ops_matmul(s->Q, X, W_Q, NULL, n, s->d, s->dk);
    ops_matmul(s->K, X, W_K, NULL, n, s->d, s->dk);
    ops_matmul(s->V, X, W_V, NULL, n, s->d, s->dv);
    s->kv_rows = n;
    s->proj_madds = (int64_t)n * s->d * (2 * s->dk + s->dv);
    attention_attend(s, n, n, scale, causal);
}

void attention_cached(AttnStep *s, const float *x, const float *W_Q, const float *W_K,
                      const float *W_V, float scale) {
    int N = s->N + 1;   // the cached rows plus the new one
    assert(N <= s->cap);
    // q, k_cur, v_cur of the new token only; K = torch.cat([K_last, K_cur])
    ops_matmul(s->Q, x, W_Q, NULL, 1, s->d, s->dk);
    ops_matmul(s->K + (N - 1) * s->dk, x, W_K, NULL, 1, s->d, s->dk);
    ops_matmul(s->V + (N - 1) * s->dv, x, W_V, NULL, 1, s->d, s->dv);
    s->kv_rows = 1;
    s->proj_madds = (int64_t)s->d * (2 * s->dk + s->dv);
    attention_attend(s, 1, N, scale, 0);
}
