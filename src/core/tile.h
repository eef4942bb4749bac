// tile — the register tile that both fast matmuls are built from: ops_avx512.c's
// (inference, y = a @ b + bias then stored, added or through GELU) and
// train_matmul.c's (training, out = start + a @ b, a possibly transposed).
// One kernel, so that a change to how the sums are held in registers is
// made once; what differs between the two is its parameters.
//
// Legend: K the length of each sum; rows (1..TILE_MR) the tile's rows of
// out, nv its vectors of 16 columns.
//
// Every sum it makes: its start value (0, out, bias or out + bias), then one
// fused multiply-add per k in ascending order, then + bias (if bias_last),
// then what `then` says. Inference starts from 0 and adds bias at the end;
// training starts from its bias and out and adds nothing at the end: two
// orders of operations, each kept exactly, since the tests and the saved
// models hold their bits.
#ifndef KVDEMO_TILE_H
#define KVDEMO_TILE_H

#include "ops.h"    // OpsThen
#include "simd.h"   // gelu16

#include <stdint.h>
#include <string.h>

enum { TILE_MR = 8, TILE_NV = 3, TILE_NR = 16 * TILE_NV };   // an 8 x 48 tile: 24 zmm of sums
enum { TILE_ROW_NV = 12, TILE_ROW_NR = 16 * TILE_ROW_NV };    // one row alone: 1 x 192, 12 zmm

// dst (rows, cols), its rows ldd floats apart = src (rows, cols), rows lds
// floats apart: b's rows copied into a buffer where they lie close, so that
// they do not crowd a few sets of the caches (see ops.c and train_matmul.c).
// ahead: rows of src to prefetch ahead of the copy (0: none; past the end:
// harmless). A whole tile's width is copied with moves of a constant size.
static inline void tile_copy_rows(float *dst, int64_t ldd, const float *src, int64_t lds, int rows,
                                  int cols, int ahead) {
    for (int k = 0; k < rows; k++, src += lds, dst += ldd) {
        if (ahead)
            for (int j = 0; j < cols; j += 16) __builtin_prefetch(src + ahead * lds + j);
        if (cols == TILE_NR) memcpy(dst, src, sizeof(float) * TILE_NR);
        else memcpy(dst, src, sizeof(float) * (size_t)cols);
    }
}

#if defined(__AVX512F__)
// out (rows, 16 nv), its rows ldo floats apart, from a (rows, K) read as
// a[r * a_row + k * a_col] (a_col = 1: along its rows; a_row = 1: a
// transposed view) and b (K, 16 nv), its rows ldb floats apart. Lanes past
// the tile's last column are masked off by mask[v], in every load and store
// of out and bias; whole (a constant) = 1 loads b without masks, when every
// lane it reads lies in b (the same numbers, and no masks to keep: a
// one-row tile has 12 of them, more than the mask registers).
//   start:  from_out: out's value (else 0), + bias_first[j] if not NULL;
//   sums:   + a[r][k] * b[k][j], one fused multiply-add per k ascending;
//   end:    + bias_last[j] if not NULL, then `then` (OPS_STORE: stored,
//           OPS_ADD_INTO: added into out, OPS_GELU: stored through GELU).
// Prefetch: b_ahead rows of b ahead, a_ahead steps of k ahead for a (0:
// none; past the end: harmless). Inlined with constant rows, nv, whole and
// aheads, so that the loops unroll into straight register code.
static inline __attribute__((always_inline)) void
tile_matmul(float *out, int64_t ldo, const float *a, int64_t a_row, int64_t a_col, const float *b,
            int64_t ldb, const __mmask16 *mask, int from_out, const float *bias_first,
            const float *bias_last, OpsThen then, int K, const int rows, const int nv,
            const int a_ahead, const int b_ahead, const int whole) {
    // The loops over r and v are unrolled so that acc lives in registers.
    __m512 acc[TILE_MR][TILE_ROW_NV];
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++) {
#pragma GCC unroll 12
        for (int v = 0; v < nv; v++) {
            __m512 init = _mm512_setzero_ps();
            if (from_out) init = _mm512_maskz_loadu_ps(mask[v], out + r * ldo + 16 * v);
            if (bias_first) init = _mm512_add_ps(init, _mm512_maskz_loadu_ps(mask[v], bias_first + 16 * v));
            acc[r][v] = init;
        }
    }
    const float *bk = b;
    for (int k = 0; k < K; k++, bk += ldb) {
        // The hardware does not guess these rows well on its own: b's when
        // the weights come from memory, a's when a is transposed.
        if (b_ahead)
#pragma GCC unroll 12
            for (int v = 0; v < nv; v++) _mm_prefetch((const char *)(bk + b_ahead * ldb + 16 * v), _MM_HINT_T0);
        __m512 bv[TILE_ROW_NV];
#pragma GCC unroll 12
        for (int v = 0; v < nv; v++)
            bv[v] = whole ? _mm512_loadu_ps(bk + 16 * v) : _mm512_maskz_loadu_ps(mask[v], bk + 16 * v);
        // (a + k * a_col, not a pointer stepped by a_col: GCC then makes a
        // copy of the loop for a_col = 1, where a's rows take fewer registers)
        const float *ak = a + k * a_col;
        if (a_ahead) _mm_prefetch((const char *)(ak + a_ahead * a_col), _MM_HINT_T0);
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            __m512 av = _mm512_set1_ps(ak[r * a_row]);
#pragma GCC unroll 12
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 12
    for (int v = 0; v < nv; v++) {
        __m512 bb = bias_last ? _mm512_maskz_loadu_ps(mask[v], bias_last + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            float *to = out + r * ldo + 16 * v;
            __m512 y = bias_last ? _mm512_add_ps(acc[r][v], bb) : acc[r][v];
            if (then == OPS_ADD_INTO) y = _mm512_add_ps(_mm512_maskz_loadu_ps(mask[v], to), y);
            else if (then == OPS_GELU) y = gelu16(y);
            _mm512_mask_storeu_ps(to, mask[v], y);
        }
    }
}
#endif   // __AVX512F__

#endif
