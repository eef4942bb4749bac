// ops_avx512 — the fast kernels of ops.c with AVX-512 intrinsics, behind
// the same names as its portable ones (ops.h): the matmul's register tiles,
// one-row products, softmax, GELU, exp, LayerNorm's statistics and the
// machine's peak. Each does the plain loop's operations in the plain loop's
// order per element, so that tests/test_ops.c and test_kernels.c hold it to
// the plain loops (bit for bit where ops.h says so). Compiled only when the
// compiler targets AVX-512 (make's default -march=native on such a CPU);
// otherwise this file is empty and ops.c's portable kernels are built.
#include "ops.h"

#if defined(__AVX512F__)

#include "ops_kernels.h"
#include "simd.h"
#include "tile.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

// ----------------------------------------------------------------------------
// Checks


int64_t ops_first_nonfinite(const float *x, int64_t n) {
    const __m512i exponent = _mm512_set1_epi32(0x7f800000);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __mmask16 bad = 0;
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            __m512i u = _mm512_and_si512(_mm512_loadu_si512((const void *)(x + i + 16 * v)), exponent);
            bad |= _mm512_cmpeq_epi32_mask(u, exponent);
        }
        if (bad) return ops_first_nonfinite_from(x, i, n);
    }
    return ops_first_nonfinite_from(x, i, n);
}

// ----------------------------------------------------------------------------
// The matmul's panel: register tiles (tile.h)


// The tile is tile.h's (OPS_MR, OPS_NR and OPS_ROW_NR: ops_kernels.h).
enum { OPS_NV = TILE_NV, OPS_ROW_NV = TILE_ROW_NV };
enum { OPS_PREFETCH = 8 };                                  // rows of b ahead, read in place
enum { OPS_PANEL_AHEAD = 32 };                              // rows of a packed panel ahead, first tile

// One tile: rows (1..OPS_MR) rows of a from a0, nv vectors of 16 columns of
// the panel bp (its first column is out's column j0; its rows ldb floats
// apart: N in b itself, OPS_NR in a packed copy), lanes beyond N masked off
// by mask[v]; each sum from 0, then + bias, then to out as `then` says.
// rows, nv, ahead (rows of b to prefetch ahead, 0: none) and whole (b
// loaded without masks) are constants: see tile_matmul.
static inline __attribute__((always_inline)) void
matmul_tile(float *out, const float *a0, const float *bp, int64_t ldb, const float *bias, OpsThen then, int K,
            int N, int j0, const __mmask16 *mask, const int rows, const int nv, const int ahead, const int whole) {
    tile_matmul(out + j0, N, a0, K, 1, bp, ldb, mask, 0, NULL, bias ? bias + j0 : NULL, then, K, rows, nv, 0, ahead,
                whole);
}

// The columns j0 .. j0 + width - 1 of out, every row. One row alone (a
// cached step) takes panels four times wider, so that each row of b is read
// 768 contiguous bytes at a time: the same operations per element, better
// streaming of the weights from memory.
void ops_matmul_panel(float *out, const float *a, const float *bp, int64_t ldb, const float *bias, OpsThen then,
                      int M, int K, int N, int j0) {
    __mmask16 mask[OPS_ROW_NV];
    for (int v = 0; v < OPS_ROW_NV; v++) mask[v] = simd_mask16(N - j0 - 16 * v);
    if (M == 1) {
        // A narrow b (the 4-dim example's 4 columns) needs fewer vectors than
        // the panel holds; each element's sum is the same either way.
        int cols = N - j0;
        if (ldb == OPS_NR && cols > OPS_NR) cols = OPS_NR;   // a packed panel is OPS_NR wide
        // One row reads a packed panel once, from memory: prefetched well
        // ahead, as the first tile of many rows does (below).
        if (ldb == OPS_NR) matmul_tile(out, a, bp, ldb, bias, then, K, N, j0, mask, 1, cols <= 16 ? 1 : OPS_NV, OPS_PANEL_AHEAD, 1);
        else if (cols <= 16) matmul_tile(out, a, bp, ldb, bias, then, K, N, j0, mask, 1, 1, OPS_PREFETCH, 0);
        else if (cols <= OPS_NR) matmul_tile(out, a, bp, ldb, bias, then, K, N, j0, mask, 1, OPS_NV, OPS_PREFETCH, 0);
        else if (cols < OPS_ROW_NR) matmul_tile(out, a, bp, ldb, bias, then, K, N, j0, mask, 1, OPS_ROW_NV, OPS_PREFETCH, 0);
        else matmul_tile(out, a, bp, ldb, bias, then, K, N, j0, mask, 1, OPS_ROW_NV, OPS_PREFETCH, 1);
        return;
    }
    int i = 0;
    if (ldb == OPS_NR) {
        // A packed panel is read in order, which the hardware prefetches well
        // once it is in the caches: the first tile, which brings it from
        // memory, asks for it well ahead; the others need no prefetch
        // instructions (they would take issue slots).
        if (M >= OPS_MR) {
            matmul_tile(out, a, bp, ldb, bias, then, K, N, j0, mask, OPS_MR, OPS_NV, OPS_PANEL_AHEAD, 0);
            i = OPS_MR;
        }
        for (; i + OPS_MR <= M; i += OPS_MR)
            matmul_tile(out + (int64_t)i * N, a + (int64_t)i * K, bp, ldb, bias, then, K, N, j0, mask, OPS_MR, OPS_NV, 0, 0);
    } else {
        for (; i + OPS_MR <= M; i += OPS_MR)
            matmul_tile(out + (int64_t)i * N, a + (int64_t)i * K, bp, ldb, bias, then, K, N, j0, mask, OPS_MR, OPS_NV,
                        OPS_PREFETCH, 0);
    }
    switch (M - i) {   // the last rows: the same tile, fewer rows
    case 0: break;
    // (a few rows alone bring their packed panel from memory too)
#define TAIL(R) case R: matmul_tile(out + (int64_t)i * N, a + (int64_t)i * K, bp, ldb, bias, then, K, N, j0, mask, R, OPS_NV, \
                                    ldb != OPS_NR ? OPS_PREFETCH : i == 0 ? OPS_PANEL_AHEAD : 0, 0); break;
    TAIL(1) TAIL(2) TAIL(3) TAIL(4) TAIL(5) TAIL(6) TAIL(7)
#undef TAIL
    }
}


// ----------------------------------------------------------------------------
// The char GPT's layers

// exp saturates at -104 (0 in float; -inf too) and 89 (inf in float).
static inline __m512 exp16(__m512 x) { return simd_exp16(x, -104.0f, 89.0f); }

void ops_vecmat(float *out, const float *x, const float *m, int K, int N, int ld) {
    // out[j] = sum_k x[k] * m[k][j]: 8 vectors of sums in registers at a time
    enum { NV = 8 };
    for (int j0 = 0; j0 < N; j0 += 16 * NV) {
        __mmask16 mask[NV];
        __m512 acc[NV];
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            int left = N - j0 - 16 * v;
            mask[v] = left <= 0 ? 0 : simd_mask16(left);
            acc[v] = _mm512_setzero_ps();
        }
        for (int k = 0; k < K; k++) {
            __m512 xk = _mm512_set1_ps(x[k]);
            const float *mk = m + (int64_t)k * ld + j0;
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++)
                acc[v] = _mm512_fmadd_ps(xk, _mm512_maskz_loadu_ps(mask[v], mk + 16 * v), acc[v]);
        }
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) _mm512_mask_storeu_ps(out + j0 + 16 * v, mask[v], acc[v]);
    }
}

// One block of rows (1 .. OPS_ROWS_MAX, a constant once inlined) and up to
// 64 columns: R x 4 vectors of sums in registers.
static inline __attribute__((always_inline)) void
vecmat_rows_tile(float *out, int ldo, const float *x, int ldx, const float *m, int ldm, const int R, int K,
                 int causal, const __mmask16 *mask) {
    __m512 acc[OPS_ROWS_MAX][4];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) acc[r][v] = _mm512_setzero_ps();
    // Every row takes k = 0 .. shared-1; then row r goes on to K - R + r.
    int shared = causal ? K - R + 1 : K;
    int k = 0;
    for (; k < shared; k++) {
        __m512 mv[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) mv[v] = _mm512_maskz_loadu_ps(mask[v], m + (int64_t)k * ldm + 16 * v);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            __m512 xr = _mm512_set1_ps(x[(int64_t)r * ldx + k]);
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++) acc[r][v] = _mm512_fmadd_ps(xr, mv[v], acc[r][v]);
        }
    }
    for (; k < K; k++) {
        int first = k - shared + 1;   // rows first .. R-1 still sum
        __m512 mv[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) mv[v] = _mm512_maskz_loadu_ps(mask[v], m + (int64_t)k * ldm + 16 * v);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            if (r < first) continue;
            __m512 xr = _mm512_set1_ps(x[(int64_t)r * ldx + k]);
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++) acc[r][v] = _mm512_fmadd_ps(xr, mv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) _mm512_mask_storeu_ps(out + (int64_t)r * ldo + 16 * v, mask[v], acc[r][v]);
}

void ops_vecmat_rows(float *out, int ldo, const float *x, int ldx, const float *m, int ldm, int R, int K,
                     int N, int causal) {
    assert(R >= 1 && R <= OPS_ROWS_MAX && (!causal || K >= R));
    for (int j0 = 0; j0 < N; j0 += 64) {
        __mmask16 mask[4];
        for (int v = 0; v < 4; v++) {
            int left = N - j0 - 16 * v;
            mask[v] = left <= 0 ? 0 : simd_mask16(left);
        }
        switch (R) {
#define ROWS(n) case n: vecmat_rows_tile(out + j0, ldo, x, ldx, m + j0, ldm, n, K, causal, mask); break;
        ROWS(1) ROWS(2) ROWS(3) ROWS(4) ROWS(5) ROWS(6)
#undef ROWS
        }
    }
}

void ops_vecmat_acc(float *out, const float *x, const float *m, int K, int N, int ld) {
    // ops_vecmat, the sums starting from out instead of 0
    for (int j0 = 0; j0 < N; j0 += 16) {
        __mmask16 mask = simd_mask16(N - j0);
        __m512 acc = _mm512_maskz_loadu_ps(mask, out + j0);
        for (int k = 0; k < K; k++)
            acc = _mm512_fmadd_ps(_mm512_set1_ps(x[k]), _mm512_maskz_loadu_ps(mask, m + (int64_t)k * ld + j0), acc);
        _mm512_mask_storeu_ps(out + j0, mask, acc);
    }
}

void ops_softmax_row(float *y, float *lse, const float *x, int n, OpsNorm how) {
    if (how == OPS_PYTORCH) {
        ops_softmax_row_plain(y, lse, x, n, how);
        return;
    }
    // max, then exp(x - max) summed in 16 lanes, then / sum or * (1 / sum)
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int i = 0; i < n; i += 16)
        vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(vmax, simd_mask16(n - i), x + i));
    float max = _mm512_reduce_max_ps(vmax);
    __m512 vsum = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 mask = simd_mask16(n - i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + i), _mm512_set1_ps(max)));
        e = _mm512_maskz_mov_ps(mask, e);
        vsum = _mm512_add_ps(vsum, e);
        _mm512_mask_storeu_ps(y + i, mask, e);
    }
    // The 16 lanes added in a fixed tree: the order depends on n only.
    float sum = _mm512_reduce_add_ps(vsum);
    __m512 s = _mm512_set1_ps(how == OPS_RECIPROCAL ? 1.0f / sum : sum);
    for (int i = 0; i < n; i += 16) {
        __mmask16 mask = simd_mask16(n - i);
        __m512 e = _mm512_maskz_loadu_ps(mask, y + i);
        _mm512_mask_storeu_ps(y + i, mask, how == OPS_RECIPROCAL ? _mm512_mul_ps(e, s) : _mm512_div_ps(e, s));
    }
    if (lse) *lse = logf(sum) + max;
}

void ops_gelu(float *out, const float *x, int n) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 mask = simd_mask16(n - i);
        _mm512_mask_storeu_ps(out + i, mask, gelu16(_mm512_maskz_loadu_ps(mask, x + i)));
    }
}

void ops_gelu_backward(float *dx, const float *x, const float *dout, int n) {
    const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
    const __m512 k = _mm512_set1_ps(GELU_K), k3 = _mm512_set1_ps(3.0f * 0.044715f);
    for (int i = 0; i < n; i += 16) {
        __mmask16 mask = simd_mask16(n - i);
        __m512 v = _mm512_maskz_loadu_ps(mask, x + i);
        __m512 t = gelu_tanh16(v);
        __m512 du = _mm512_mul_ps(k, _mm512_fmadd_ps(k3, _mm512_mul_ps(v, v), one));
        // 0.5 (1 + t) + 0.5 x (1 - t^2) du
        __m512 left = _mm512_mul_ps(half, _mm512_add_ps(one, t));
        __m512 right = _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_mul_ps(_mm512_fnmadd_ps(t, t, one), du));
        __m512 grad = _mm512_add_ps(left, right);
        __m512 acc = _mm512_fmadd_ps(grad, _mm512_maskz_loadu_ps(mask, dout + i), _mm512_maskz_loadu_ps(mask, dx + i));
        _mm512_mask_storeu_ps(dx + i, mask, acc);
    }
}

void ops_exp(float *out, const float *x, int n) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 mask = simd_mask16(n - i);
        _mm512_mask_storeu_ps(out + i, mask, exp16(_mm512_maskz_loadu_ps(mask, x + i)));
    }
}


// ----------------------------------------------------------------------------
// LayerNorm

// Columns c0 .. c0+15 of 16 rows of x (rows ldx floats apart; columns from
// `left` on read as 0) into col[0..15], column j's 16 rows in col[j]'s lanes:
// a 16 x 16 transpose in registers, 64 shuffles.
static inline void transpose16(__m512 col[16], const float *x, int64_t ldx, int left) {
    __mmask16 mask = simd_mask16(left);
    __m512 a[16], b[16];
    // rows 2i, 2i+1 interleaved, in each 128-bit lane L: columns 4L, 4L+1 (a[2i]) and 4L+2, 4L+3 (a[2i+1])
    for (int i = 0; i < 8; i++) {
        __m512 r0 = _mm512_maskz_loadu_ps(mask, x + 2 * i * ldx), r1 = _mm512_maskz_loadu_ps(mask, x + (2 * i + 1) * ldx);
        a[2 * i] = _mm512_unpacklo_ps(r0, r1);
        a[2 * i + 1] = _mm512_unpackhi_ps(r0, r1);
    }
    // rows 4g .. 4g+3, in each 128-bit lane L: column 4L + k in b[4g + k]
    for (int g = 0; g < 4; g++) {
        __m512d lo = _mm512_castps_pd(a[4 * g]), hi = _mm512_castps_pd(a[4 * g + 1]);
        __m512d lo2 = _mm512_castps_pd(a[4 * g + 2]), hi2 = _mm512_castps_pd(a[4 * g + 3]);
        b[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo, lo2));
        b[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo, lo2));
        b[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi, hi2));
        b[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi, hi2));
    }
    // column 4L + k: lane L of b[k], b[4 + k], b[8 + k], b[12 + k], one 128-bit lane each
    for (int k = 0; k < 4; k++) {
        __m512 c0 = _mm512_shuffle_f32x4(b[k], b[4 + k], 0x44), c1 = _mm512_shuffle_f32x4(b[k], b[4 + k], 0xEE);
        __m512 c2 = _mm512_shuffle_f32x4(b[8 + k], b[12 + k], 0x44), c3 = _mm512_shuffle_f32x4(b[8 + k], b[12 + k], 0xEE);
        col[k] = _mm512_shuffle_f32x4(c0, c2, 0x88);
        col[4 + k] = _mm512_shuffle_f32x4(c0, c2, 0xDD);
        col[8 + k] = _mm512_shuffle_f32x4(c1, c3, 0x88);
        col[12 + k] = _mm512_shuffle_f32x4(c1, c3, 0xDD);
    }
}

void ops_layernorm_stats(float *m, float *var, const float *x, int R, int C) {
    int r = 0;
    __m512 n = _mm512_set1_ps((float)C);
    for (; r + 16 <= R; r += 16) {
        const float *x0 = x + (int64_t)r * C;
        __m512 col[16], sum = _mm512_setzero_ps();
        for (int c0 = 0; c0 < C; c0 += 16) {
            int cols = C - c0 < 16 ? C - c0 : 16;
            transpose16(col, x0 + c0, C, cols);
            for (int j = 0; j < cols; j++) sum = _mm512_add_ps(sum, col[j]);
        }
        __m512 mean = _mm512_div_ps(sum, n), sq = _mm512_setzero_ps();
        for (int c0 = 0; c0 < C; c0 += 16) {
            int cols = C - c0 < 16 ? C - c0 : 16;
            transpose16(col, x0 + c0, C, cols);
            for (int j = 0; j < cols; j++) {
                __m512 d = _mm512_sub_ps(col[j], mean);
                sq = _mm512_add_ps(sq, _mm512_mul_ps(d, d));
            }
        }
        _mm512_storeu_ps(m + r, mean);
        _mm512_storeu_ps(var + r, _mm512_div_ps(sq, n));
    }
    ops_layernorm_stats_plain(m + r, var + r, x + (int64_t)r * C, R - r, C);
}

// y (C) = (x - m) * s * w + b, rounded after each operation as the plain loop.
void ops_layernorm_apply(float *y, const float *x, float m, float s, const float *w, const float *b, int C) {
    __m512 mv = _mm512_set1_ps(m), sv = _mm512_set1_ps(s);
    for (int c = 0; c < C; c += 16) {
        __mmask16 mask = simd_mask16(C - c);
        __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + c), mv), sv);
        t = _mm512_add_ps(_mm512_mul_ps(t, _mm512_maskz_loadu_ps(mask, w + c)), _mm512_maskz_loadu_ps(mask, b + c));
        _mm512_mask_storeu_ps(y + c, mask, t);
    }
}

// ----------------------------------------------------------------------------
// The machine's limits

// FMA_CHAINS vectors of acc = acc * x + y; their sum.
float ops_fma_chains(int64_t iters) {
    // acc = acc * x + y with x, y chosen so that acc stays near 1:
    // no overflow, no denormals, the same speed every round.
    __m512 acc[FMA_CHAINS];
    const __m512 x = _mm512_set1_ps(0.9999999f), y = _mm512_set1_ps(1e-7f);
#pragma GCC unroll 16
    for (int j = 0; j < FMA_CHAINS; j++) acc[j] = _mm512_set1_ps(1.0f + (float)j * 1e-3f);
    for (int64_t i = 0; i < iters; i++)
#pragma GCC unroll 16
        for (int j = 0; j < FMA_CHAINS; j++) acc[j] = _mm512_fmadd_ps(acc[j], x, y);
    __m512 sum = acc[0];
    for (int j = 1; j < FMA_CHAINS; j++) sum = _mm512_add_ps(sum, acc[j]);
    float r = _mm512_reduce_add_ps(sum);
    return r;
}

#else
typedef int ops_avx512_unused;   // C wants a declaration in every file
#endif
