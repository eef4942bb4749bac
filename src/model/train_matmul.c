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

#include "ops.h"
#include "tile.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static int min_int(int a, int b) { return a < b ? a : b; }

// The fast path computes out in tiles of TILE_MR rows by TILE_NR columns
// held in registers (tile.h's tile_matmul), over blocks of KC steps of k.
// Each KC x TILE_NR slice of b is first copied into this thread's
// contiguous buffer (ops_pack_buffer), then every row tile of the slice
// passes over it: read in place, b's rows lie ldb floats apart (1536 or 384
// for the char GPT), a multiple of a large power of two of bytes, so they
// fall into a few sets of the caches and keep evicting each other. A
// transposed a (dW's) has the same trouble, one row of k per a_col floats:
// its lines are asked for A_AHEAD steps ahead (for an a read along its rows
// that prefetch only asks for the same row's next floats, which costs
// nothing).
// Copying, blocking and prefetching change where numbers are read from,
// never an operation on them: every element is still its start value and
// then one fused multiply-add per k in ascending order.
enum { KC = 1024 };                       // a packed slice of 192 KB, in L2
enum { A_AHEAD = 16 };                    // steps of k ahead for a's lines

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
_Static_assert(KC * TILE_NR <= OPS_PACK_FLOATS, "a slice of b fits the pack buffer");

// Rows 0 .. rows-1 of out as tiles of TILE_MR rows and a last smaller one;
// nv vectors of columns (a constant), lanes past N masked off by m. Each sum
// starts from out (from_out, else 0) + bias_first (if not NULL), then one
// fused multiply-add per k of 0 .. kc-1, b's rows ldb floats apart (TILE_NR
// in the packed slice).
static inline __attribute__((always_inline)) void tiles_avx512(
    const int nv, float *out, int ldo, const float *a, int64_t a_row, int64_t a_col,
    const float *b, int64_t ldb, int kc, const __mmask16 *m, int from_out, const float *bias_first,
    int rows) {
    int i = 0;
    for (; i + TILE_MR <= rows; i += TILE_MR) {
        // Ask for the next tile's rows of out a whole tile ahead: it reads
        // them first (the += of the backward pass, or the sums of the
        // previous block of k) and writes them last. Past the end: harmless.
        for (int r = 0; r < TILE_MR; r++)
            for (int q = 0; q < nv; q++)
                _mm_prefetch((const char *)(out + (int64_t)(i + TILE_MR + r) * ldo + 16 * q), _MM_HINT_T0);
        tile_matmul(out + (int64_t)i * ldo, ldo, a + i * a_row, a_row, a_col, b, ldb, m, from_out, bias_first,
                    NULL, OPS_STORE, kc, TILE_MR, nv, A_AHEAD, 0, 0);
    }
    switch (rows - i) {
#define TAIL(R)                                                                                          \
    case R:                                                                                              \
        tile_matmul(out + (int64_t)i * ldo, ldo, a + i * a_row, a_row, a_col, b, ldb, m, from_out,       \
                    bias_first, NULL, OPS_STORE, kc, R, nv, A_AHEAD, 0, 0);                               \
        break;
        TAIL(1) TAIL(2) TAIL(3) TAIL(4) TAIL(5) TAIL(6) TAIL(7)
#undef TAIL
    default: break;
    }
}
#endif

// Rows i0 .. i1-1 of out, all columns, all of K. pack: a buffer of
// OPS_PACK_FLOATS floats for b's slices, or NULL to read b in place (a few
// rows, where a copy would cost more than it saves).
static void matmul_rows(float *out, const float *a, const float *b, const float *bias,
                        int accumulate, int64_t a_row, int64_t a_col, int ldb, int ldo, int i0,
                        int i1, int K, int N, float *pack) {
#if defined(__AVX512F__)
    out += (int64_t)i0 * ldo;
    a += i0 * a_row;
    for (int j0 = 0; j0 < N; j0 += TILE_NR) {
        int nr = min_int(TILE_NR, N - j0), nv = (nr + 15) / 16;
        __mmask16 m[TILE_NV];
        for (int q = 0; q < TILE_NV; q++) m[q] = simd_mask16(nr - 16 * q);
        const float *bj = bias ? bias + j0 : NULL;
        for (int k0 = 0; k0 < K || k0 == 0; k0 += KC) {
            int kc = min_int(KC, K - k0);
            int from_out = k0 > 0 || accumulate;   // the previous blocks' sums, or the += of backward
            const float *bias_first = k0 == 0 ? bj : NULL;
            const float *bk = b + (int64_t)k0 * ldb + j0;
            int64_t ld = ldb;
            if (pack) {   // the slice (kc, nr) into (kc, TILE_NR)
                tile_copy_rows(pack, TILE_NR, bk, ldb, kc, nr, 0);
                bk = pack;
                ld = TILE_NR;
            }
            float *o = out + j0;
            const float *ak = a + k0 * a_col;
            int rows = i1 - i0;
            switch (nv) {
            case 3: tiles_avx512(3, o, ldo, ak, a_row, a_col, bk, ld, kc, m, from_out, bias_first, rows); break;
            case 2: tiles_avx512(2, o, ldo, ak, a_row, a_col, bk, ld, kc, m, from_out, bias_first, rows); break;
            default: tiles_avx512(1, o, ldo, ak, a_row, a_col, bk, ld, kc, m, from_out, bias_first, rows); break;
            }
            if (K == 0) break;
        }
    }
#else
    (void)pack;
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

static void matmul_columns_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const MatmulJob *j = ctx;
    int j0 = begin * TILE_NR, j1 = min_int(end * TILE_NR, j->N);
    if (j0 >= j1) return;
    float *pack = j->M > TILE_MR ? ops_pack_buffer() : NULL;
    matmul_rows(j->out + j0, j->a, j->b + j0, j->bias ? j->bias + j0 : NULL, j->accumulate,
                j->a_row, j->a_col, j->ldb, j->ldo, 0, j->M, j->K, j1 - j0, pack);
}

static void matmul_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const MatmulJob *j = ctx;
    int i0 = begin * TILE_MR, i1 = min_int(end * TILE_MR, j->M);
    if (i0 >= i1) return;
    float *pack = i1 - i0 > TILE_MR ? ops_pack_buffer() : NULL;
    matmul_rows(j->out, j->a, j->b, j->bias, j->accumulate, j->a_row, j->a_col, j->ldb, j->ldo,
                i0, i1, j->K, j->N, pack);
}

void train_matmul(float *out, const float *a, const float *b, const float *bias, int accumulate,
                  Pool *pool, int64_t a_row, int64_t a_col, int ldb, int ldo, int M, int K,
                  int N) {
    MatmulJob job = {out, a, b, bias, accumulate, a_row, a_col, ldb, ldo, M, K, N};
    int tiles = (M + TILE_MR - 1) / TILE_MR, panels = (N + TILE_NR - 1) / TILE_NR;
    int a_transposed = a_row == 1 && a_col != 1;
    if (!pool || pool_threads(pool) == 1 || (int64_t)M * K * N < 65536)
        matmul_task(&job, 0, tiles, 0);
    else if (a_transposed && panels >= 2 * pool_threads(pool)) {
        // dW = x^T @ dy: few rows (the layer's inputs), a long sum over the
        // tokens. Each thread takes whole panels of columns, every row: it
        // reads only its columns of dy, and each slice of dy it copies
        // serves all the rows rather than the thread's share of them.
        pool_run_slices(pool, matmul_columns_task, &job, panels);
    } else
        pool_run_slices(pool, matmul_task, &job, tiles);
}

// ---------------------------------------------------------------------------
// Causal products: see train.h.

void train_matmul_causal(float *out, const float *a, const float *b, int mode, int accumulate,
                          int64_t a_row, int64_t a_col, int ldb, int ldo, int T, int K, int N) {
    // When the sum runs over positions, b (v, k, q or dout) is a head's N
    // columns of a (T, C) tensor, rows ldb = C floats apart, and every tile
    // reads most of its rows: copied once into contiguous rows, they stay in
    // the caches.
    int rows = mode == TRAIN_CAUSAL_K_LE ? T : K;   // the rows of b read
    float *pack = mode != TRAIN_CAUSAL_COLS && ldb > N && (int64_t)rows * N <= OPS_PACK_FLOATS
                      ? ops_pack_buffer()
                      : NULL;
    if (pack) {
        tile_copy_rows(pack, N, b, ldb, rows, N, 0);
        b = pack;
        ldb = N;
    }
    for (int i = 0; i < T; i += TILE_MR) {
        int mr = min_int(TILE_MR, T - i), end = i + mr;
        float *o = out + (int64_t)i * ldo;
        const float *ai = a + i * a_row;
        if (mode == TRAIN_CAUSAL_COLS)
            matmul_rows(o, ai, b, NULL, accumulate, a_row, a_col, ldb, ldo, 0, mr, K,
                        min_int(N, end), NULL);
        else if (mode == TRAIN_CAUSAL_K_LE)
            matmul_rows(o, ai, b, NULL, accumulate, a_row, a_col, ldb, ldo, 0, mr, end, N, NULL);
        else
            matmul_rows(o, ai + i * a_col, b + (int64_t)i * ldb, NULL, accumulate, a_row, a_col,
                        ldb, ldo, 0, mr, K - i, N, NULL);
    }
}

