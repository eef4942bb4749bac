// train_matmul — the matmul kernel of training, and the causal products of
// attention built on it.
//
// Legend: M, K, N rows of a, inner size, columns of b; T positions.
//
// Training spends nearly all its time here: forward x @ W, and in the
// backward dX = dY @ W^T and dW += X^T @ dY. One kernel serves all three
// because it reads `a` through two strides (a transposed view costs
// nothing) while b and out are read along contiguous rows. It differs from
// ops_matmul in two ways that training needs: it can add into out (the
// backward pass's +=) and it reads a transposed a in place.
#include "train.h"

#include <stdint.h>
#include <stddef.h>

#if defined(__AVX512F__)
#include "simd.h"
#endif

static int min_int(int a, int b) { return a < b ? a : b; }

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
                  Pool *pool, int64_t a_row, int64_t a_col, int ldb, int ldo, int M, int K,
                  int N) {
    MatmulJob job = {out, a, b, bias, accumulate, a_row, a_col, ldb, ldo, M, K, N};
    int tiles = (M + MR - 1) / MR;
    if (!pool || pool_threads(pool) == 1 || (int64_t)M * K * N < 65536)
        matmul_task(&job, 0, tiles, 0);
    else
        pool_run_slices(pool, matmul_task, &job, tiles);
}

// ---------------------------------------------------------------------------
// Causal products: see train.h.

void train_matmul_causal(float *out, const float *a, const float *b, int mode, int accumulate,
                          int64_t a_row, int64_t a_col, int ldb, int ldo, int T, int K, int N) {
    for (int i = 0; i < T; i += MR) {
        int mr = min_int(MR, T - i), end = i + mr;
        float *o = out + (int64_t)i * ldo;
        const float *ai = a + i * a_row;
        if (mode == TRAIN_CAUSAL_COLS)
            matmul_rows(o, ai, b, NULL, accumulate, a_row, a_col, ldb, ldo, 0, mr, K,
                        min_int(N, end));
        else if (mode == TRAIN_CAUSAL_K_LE)
            matmul_rows(o, ai, b, NULL, accumulate, a_row, a_col, ldb, ldo, 0, mr, end, N);
        else
            matmul_rows(o, ai + i * a_col, b + (int64_t)i * ldb, NULL, accumulate, a_row, a_col,
                        ldb, ldo, 0, mr, K - i, N);
    }
}

