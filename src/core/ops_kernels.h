// ops_kernels — what ops.c and ops_avx512.c share, for those two files only:
// the matmul's panel kernel and its sizes, LayerNorm's two halves and the
// plain pieces the fast kernels fall back on. ops.c drives the matmul
// (packing, threads) and defines the portable kernels; ops_avx512.c defines
// the same functions with AVX-512 when the compiler targets it.
#ifndef KVDEMO_OPS_KERNELS_H
#define KVDEMO_OPS_KERNELS_H

#include "ops.h"
#include "tile.h"

#include <stdint.h>

// The matmul's panel: OPS_NR columns (OPS_ROW_NR for one row alone); more
// rows than OPS_MR copy the panel first (ops.c, packing).
#if defined(__AVX512F__)
enum { OPS_MR = TILE_MR, OPS_NR = TILE_NR, OPS_ROW_NR = TILE_ROW_NR };
#else
enum { OPS_NR = 16, OPS_ROW_NR = OPS_NR, OPS_MR = 1 };
#endif

// The columns j0 .. j0 + width - 1 of out (M, N) = a (M, K) @ the panel bp
// (K rows, ldb floats apart) + bias, then what `then` says; width OPS_NR, or
// OPS_ROW_NR when M is 1 and bp is read in place.
void ops_matmul_panel(float *out, const float *a, const float *bp, int64_t ldb, const float *bias, OpsThen then,
                      int M, int K, int N, int j0);

// The first index i in from .. n-1 whose x[i] is not finite, or n.
int64_t ops_first_nonfinite_from(const float *x, int64_t from, int64_t n);

// mean m (R) and variance var (R) of each row of x (R, C), summed over c in
// order in float: the plain loop, and the kernel (its lanes do the same).
void ops_layernorm_stats_plain(float *m, float *var, const float *x, int R, int C);
void ops_layernorm_stats(float *m, float *var, const float *x, int R, int C);
// y (C) = (x - m) * s * w + b, rounded after each operation.
void ops_layernorm_apply(float *y, const float *x, float m, float s, const float *w, const float *b, int C);

// The peak's loop: FMA_CHAINS * 16 independent chains of acc = acc * x + y
// run iters times; returns their sum (so that the compiler keeps them).
enum { FMA_CHAINS = 16 };   // independent sums: more than latency x ports
float ops_fma_chains(int64_t iters);

#endif
