// ops — the arithmetic of attention on bare float arrays.
//
// Legend of dimension letters used in the shape comments:
//   M, K, N  rows of a, inner size, columns of b in a matmul
//   R, C     rows and columns of a matrix (R tokens, C features)
//
// Every function writes its outputs first and takes its sizes last. The same
// function serves the 4-dim example and the char GPT: where a faster kernel
// exists it hides behind the plain function's name and is tested against the
// plain loop (ops_matmul_plain), so that lessons read like the formula.
//
// The functions that can share their work among threads take the pool to
// run on (pool.h), made by the command or lesson from --threads and handed
// down in its model state; NULL runs everything on the calling thread. The
// numbers are the same bits whatever the pool.
#ifndef KVDEMO_OPS_H
#define KVDEMO_OPS_H

#include "pool.h"

#include <stdint.h>

// out (M, N) = a (M, K) @ b (K, N) + bias (N); bias may be NULL.
// torch.matmul(a, b) / numpy a @ b + bias
// Each out element is summed over k = 0 .. K-1 in that order whatever M is,
// so row t of a many-row product equals the one-row product of row t bit for
// bit: the property that makes a cached step equal a full recomputation.
// The fast kernel (AVX-512 where the compiler targets it, else portable C)
// uses a fused multiply-add per k where the plain loop rounds twice, so the
// two agree to rounding, not bit for bit. Runs on pool's threads (NULL: the
// calling thread).
void ops_matmul(float *out, const float *a, const float *b, const float *bias, Pool *pool, int M, int K, int N);
// b (K, N) in panel order, made once (a model's weights at load): panels of
// the fast kernel's width, each (K, width) contiguous, the last padded with
// zeros. ops_packed_size gives the floats dst must hold.
int64_t ops_packed_size(int K, int N);
void ops_pack(float *dst, const float *b, int K, int N);
// What a matmul does with each finished sum y = a @ b + bias (rounded to
// float first, as when it is stored): store it, add it into out (a residual,
// x = x + y), or store gelu(y). Each the same bits as the matmul followed by
// ops_add or ops_gelu on its output, without a second pass over it.
typedef enum {
    OPS_STORE,      // out = y
    OPS_ADD_INTO,   // out = out + y
    OPS_GELU,       // out = gelu(y)
} OpsThen;
// ops_matmul reading b's panels from panels (ops_pack of b; NULL: none) in
// order, instead of copying each panel first (many rows) or reading b's rows
// in place (one row), then doing `then` with each sum. With OPS_STORE the
// same numbers as ops_matmul bit for bit. out must not overlap a or b.
void ops_matmul_packed(float *out, const float *a, const float *b, const float *panels, const float *bias,
                       OpsThen then, Pool *pool, int M, int K, int N);
// This thread's scratch for a packed panel of b, OPS_PACK_FLOATS floats
// 64-byte aligned, made on its first use and freed when the thread ends;
// NULL without memory (the caller then reads b in place). ops_matmul,
// train_matmul and train_matmul_causal share it: while one holds it, it must
// not call another of them that packs.
enum { OPS_PACK_FLOATS = 4096 * 48 };
float *ops_pack_buffer(void);
// The reference loop, one multiply-add at a time; fast kernels are tested
// against it.
void ops_matmul_plain(float *out, const float *a, const float *b, const float *bias, int M, int K,
                      int N);

// out (C, R) = in (R, C) transposed. torch: in.T
void ops_transpose(float *out, const float *in, int R, int C);

// x (n) /= d, in place. torch: x / d
void ops_div(float *x, float d, int n);

// out (n) = a (n) + b (n). torch: a + b (with -inf + 0 = -inf)
void ops_add(float *out, const float *a, const float *b, int n);

// mask (R, C): 0 where column c <= row r + offset, -inf above.
// torch.triu(torch.full((R, C), float('-inf')), diagonal=offset + 1)
void ops_causal_mask(float *mask, int R, int C, int offset);

// The index of the largest of x (n), the first one on ties.
// np.argmax(x) / torch.argmax(x, dim=-1)
int ops_argmax(const float *x, int n);

// Largest |a[i] - b[i]| over n elements (NaN if either holds NaN), and
// whether the two arrays are equal bit for bit.
double ops_max_abs_diff(const float *a, const float *b, int64_t n);
int ops_bit_identical(const float *a, const float *b, int64_t n);
// Index of the first element of x (n) that is NaN or infinite, or n when
// every one is finite. The fast path tests 64 floats at a time by their
// exponent bits (all ones: not finite), so a model's weights are checked at
// the speed memory delivers them.
int64_t ops_first_nonfinite(const float *x, int64_t n);


// ----------------------------------------------------------------------------
// The char GPT's layers (fast where the machine allows; each output depends
// only on its own row, in the same order whatever the number of rows).

// out (N) = x (K) @ m (K, N), m's rows ld floats apart. numpy: x @ m
// Each out[j] is summed over k in order, as in ops_matmul. Attention uses it
// twice: scores = query @ key with key (D, T) read on its first N columns,
// and output = weights @ value.
void ops_vecmat(float *out, const float *x, const float *m, int K, int N, int ld);
void ops_vecmat_plain(float *out, const float *x, const float *m, int K, int N, int ld);
// out (N) += x (K) @ m (K, N): ops_vecmat with each out[j]'s sum continued
// from its value, term by term in the same order. A product over rows split
// in pieces (the paged cache's blocks) is then equal bit for bit to one
// ops_vecmat over all the rows.
void ops_vecmat_acc(float *out, const float *x, const float *m, int K, int N, int ld);

// ops_vecmat for R rows of x at once (R <= OPS_ROWS_MAX), each m element
// read once for all of them: out row r (ldo floats apart) = x row r (ldx
// apart) @ m (K, N), m's rows ldm apart. With causal, row r sums only over
// k = 0 .. K - R + r (the last row over all K; K >= R), as a block of
// consecutive queries sees one more key per row. Every out element is the
// sum ops_vecmat makes of the same row and length, bit for bit: attention
// over a block of rows equals attention row by row, and a cached step's one
// row.
enum { OPS_ROWS_MAX = 6 };
void ops_vecmat_rows(float *out, int ldo, const float *x, int ldx, const float *m, int ldm, int R, int K,
                     int N, int causal);

// y (n) = softmax of x (n): exp(x - max), then each divided by the sum
// (OPS_DIVIDE: F.softmax, numpy's exp / np.sum(exp)) or multiplied by 1 / sum
// (OPS_RECIPROCAL: attention, as kvdemo trains and runs the char GPT, and as
// PyTorch's CPU softmax normalises).
// y may be x; a -inf score becomes a weight of exactly 0. lse, if not NULL,
// receives log(sum) + max, the log of the sum of exp(x), for a loss.
// OPS_PYTORCH is F.softmax(x, dim=-1) as PyTorch computes it on the CPU
// (ATen's vectorised softmax over the last dimension, 8 floats a vector), so
// that the toy lessons print PyTorch's digits to the last one:
//   sum = a row shorter than 8: the e_c added left to right; else the e_c
//         added in 8 lanes (the tail into the first lanes), and the lanes
//         folded in halves: ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7))
//   y_c = e_c * (1 / sum)
// (exp itself is the C library's, which can still differ from PyTorch's in
// the last bit: docs/lesson-2.md says where).
// The fast exp is within 2 ulp of expf and the sum runs in 16 lanes; the plain
// twin sums expf in order, the arithmetic the shipped model was trained with
// (OPS_PYTORCH always takes the plain path, expf and 8 lanes).
// Either way the order depends on n only, so a row's weights are the same
// bits in a full pass and in a cached step.
typedef enum { OPS_DIVIDE, OPS_RECIPROCAL, OPS_PYTORCH } OpsNorm;
void ops_softmax_row(float *y, float *lse, const float *x, int n, OpsNorm how);
void ops_softmax_row_plain(float *y, float *lse, const float *x, int n, OpsNorm how);
// out (R, C) = softmax of each row of in (R, C), F.softmax(in, dim=-1):
// ops_softmax_row_plain row by row, normalised by how. out may be in.
void ops_softmax_rows(float *out, const float *in, int R, int C, OpsNorm how);

// out (R, C) = LayerNorm of each row of x (R, C) with weight w (C), bias b (C),
// eps 1e-5: (x - mean) * rstd * w + b, var the biased variance, rstd =
// 1 / sqrt(var + eps); float sums in order. Training and inference share it.
// F.layer_norm(x, (C,), w, b, 1e-5). mean and rstd (R), if not NULL, receive
// each row's mean and 1 / sqrt(var + eps) (for a backward pass).
void ops_layernorm(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                   int R, int C);

// out (n) = GELU of x (n), tanh approximation; out may be x. Training and
// inference share it. F.gelu(x, approximate='tanh'), numpy:
// 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
// Each fast kernel above and below has a plain twin (_plain) compiled in
// every build, the loop it is tested against; without AVX-512 the fast name
// runs the plain loop. The fast GELU takes tanh(u) as 1 - 2 / (exp(2 u) + 1).
void ops_gelu(float *out, const float *x, int n);
void ops_gelu_plain(float *out, const float *x, int n);   // the same formula with tanhf
// dx (n) += GELU'(x) * dout (n), the derivative of the formula above:
// 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
void ops_gelu_backward(float *dx, const float *x, const float *dout, int n);
void ops_gelu_backward_plain(float *dx, const float *x, const float *dout, int n);
// exp(x) (n) by the fast kernels' own exp (AVX-512: within 2 ulp of expf,
// saturating at -104 and 89); out may be x. The plain twin is expf.
void ops_exp(float *out, const float *x, int n);

// ----------------------------------------------------------------------------
// Threads of the fast kernels.

// How many threads --threads n asks for: n, or for n <= 0 one a core (the
// number the message gives when pool_new_for could not start them).
int ops_threads_asked(int n);

// ----------------------------------------------------------------------------
// The machine's limits, for kvdemo bench to hold the kernels against.

// A register-only loop of fused multiply-adds (16 independent vectors of
// sums, nothing read from memory), iters rounds in each of tasks tasks spread
// over pool's threads. Returns the floating-point operations done (2 per
// multiply-add); the caller times it. The portable build runs the same loop
// in plain C, which is that build's peak.
double ops_fma_loop(Pool *pool, int64_t iters, int tasks);
// dst (n) = src (n), copied in pieces of 1 MB spread over pool's threads
// (memcpy each). Returns the bytes moved: read plus written, 8 n.
double ops_copy_loop(float *dst, const float *src, Pool *pool, int64_t n);

#endif
