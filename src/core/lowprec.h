// lowprec — lesson 12's arithmetic of other hardware, an option of the char
// GPT's forward pass (GptState.lowprec): activations rounded to bf16 or
// fp16 after each step, as a model run in those types holds them, and a
// one-row matmul summed in slices, as a GPU matrix-vector kernel sums it.
// Neither touches the KV cache: a cache of narrow numbers is a kind of
// kvcache.h (kvcache_quant.c).
//
// Legend of dimension letters:
//   N rows fed at once    K inputs of a matmul    M its outputs
#ifndef KVDEMO_LOWPREC_H
#define KVDEMO_LOWPREC_H

#include "kvquant.h"
#include "pool.h"

#include <stdint.h>

typedef struct {
    KvDtype act_dtype;   // activations rounded to fp32 (nothing, the default), bf16 or fp16
    int split_sum;       // 1: a cached one-row step sums each matmul in LOWPREC_SLICES slices, then adds the slices
} LowPrec;

// The slices a split_sum step cuts each matmul's sum into (a power of 2).
enum { LOWPREC_SLICES = 32 };

// 1 when p changes anything (otherwise the forward pass is the plain one).
int lowprec_on(const LowPrec *p);
// x (n) rounded to act_dtype, in place (nothing for fp32).
void lowprec_round(const LowPrec *p, float *x, int64_t n);
// out (N, M) = in (N, K) @ w (K, M) + b, summed as p says (cached: a step
// against the cache; the plain sum on pool's threads), then rounded to
// act_dtype.
void lowprec_linear(const LowPrec *p, float *out, const float *in, const float *w, const float *b, Pool *pool,
                    int n, int K, int M, int cached);

#endif
