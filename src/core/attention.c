// attention — scaled dot-product attention with every intermediate kept.
// The worked examples are a few numbers wide: every matmul runs on the
// calling thread (the NULL pool, ops.h).
#include "attention.h"

#include "ops.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

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
    ops_matmul(s->scores, s->Q, s->Kt, NULL, NULL, M, s->dk, N);
    ops_div(s->scores, scale, M * N);
    // scores += mask: the M query rows sit at positions N-M .. N-1, so row r
    // may see columns 0 .. N-M+r (torch.triu(mask, diagonal=N-M+1)).
    if (causal) ops_causal_mask(s->mask, M, N, N - M);
    else memset(s->mask, 0, sizeof(float) * (size_t)(M * N));
    ops_add(s->masked, s->scores, s->mask, M * N);
    // scores = F.softmax(scores, dim=-1)
    // (as PyTorch computes it on the CPU, to the last bit: ops.h, OPS_PYTORCH)
    ops_softmax_rows(s->weights, s->masked, M, N, OPS_PYTORCH);
    // output = torch.matmul(scores, V)
    ops_matmul(s->output, s->weights, s->V, NULL, NULL, M, N, s->dv);
    s->attn_madds = (int64_t)M * N * (s->dk + s->dv);
}

void attention_full(AttnStep *s, const float *X, int n, const float *W_Q, const float *W_K,
                    const float *W_V, float scale, int causal) {
    assert(n <= s->cap);
    // Q = torch.matmul(X, W_Q); K = torch.matmul(X, W_K); V = torch.matmul(X, W_V)
    ops_matmul(s->Q, X, W_Q, NULL, NULL, n, s->d, s->dk);
    ops_matmul(s->K, X, W_K, NULL, NULL, n, s->d, s->dk);
    ops_matmul(s->V, X, W_V, NULL, NULL, n, s->d, s->dv);
    s->kv_rows = n;
    s->proj_madds = (int64_t)n * s->d * (2 * s->dk + s->dv);
    attention_attend(s, n, n, scale, causal);
}

void attention_cached(AttnStep *s, const float *x, const float *W_Q, const float *W_K,
                      const float *W_V, float scale) {
    int N = s->N + 1;   // the cached rows plus the new one
    assert(N <= s->cap);
    // q, k_cur, v_cur of the new token only; K = torch.cat([K_last, K_cur])
    ops_matmul(s->Q, x, W_Q, NULL, NULL, 1, s->d, s->dk);
    ops_matmul(s->K + (N - 1) * s->dk, x, W_K, NULL, NULL, 1, s->d, s->dk);
    ops_matmul(s->V + (N - 1) * s->dv, x, W_V, NULL, NULL, 1, s->d, s->dv);
    s->kv_rows = 1;
    s->proj_madds = (int64_t)s->d * (2 * s->dk + s->dv);
    attention_attend(s, 1, N, scale, 0);
}
