// test_matmul — the fast kernels against the plain loops, and the property
// the KV cache rests on: a row's result does not depend on how many rows are
// computed with it, nor on the number of threads.
//
//   test_matmul_matches_plain          odd shapes, tolerance per element
//   test_matmul_rows_are_independent   row i of an M-row product == a 1-row product, bit for bit
//   test_vecmat / softmax / gelu / layernorm   against double-precision formulas
//   test_matmul_packed_equals_in_place   the char GPT's shapes: packed panels == 1-row products, bit for bit
//   test_matmul_packed_on_two_threads    two threads packing at once (kvdemo race) get their own buffers
//   test_matmul_prepacked_equals_plain_panels   panels packed once at load == b read in place, bit for bit
//   test_matmul_then_equals_two_steps    OPS_ADD_INTO / OPS_GELU == the product, then ops_add / ops_gelu, bit for bit
//   test_vecmat_rows_equals_vecmat       a block of attention rows == each row alone, bit for bit
//   test_pool_runs_every_task_once
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "pool.h"
#include "sampler.h"

// Fills x (n) with uniform numbers in [-1, 1) from numpy's generator.
static void fill(float *x, int64_t n, uint32_t seed) {
    Mt19937 mt;
    mt19937_seed(&mt, seed);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(2.0 * mt19937_random_sample(&mt) - 1.0);
}

static float *alloc_floats(int64_t n) {
    float *x = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    assert_non_null(x);
    return x;
}

static const int SHAPES[][3] = {   // M, K, N: tile sizes are 8 rows and 48 columns
    {1, 1, 1}, {1, 384, 65}, {1, 384, 384}, {3, 5, 7}, {7, 17, 49}, {8, 48, 48}, {9, 33, 97},
    {13, 100, 200}, {17, 64, 16}, {64, 3, 47}, {257, 64, 50}, {31, 1536, 40}, {2, 7, 145},
};

static void check_matmul_matches_plain(int threads) {
    Pool *pool = pool_new(threads);
    assert_non_null(pool);
    for (size_t s = 0; s < sizeof(SHAPES) / sizeof(SHAPES[0]); s++) {
        int M = SHAPES[s][0], K = SHAPES[s][1], N = SHAPES[s][2];
        float *a = alloc_floats((int64_t)M * K), *b = alloc_floats((int64_t)K * N), *bias = alloc_floats(N);
        float *fast = alloc_floats((int64_t)M * N), *plain = alloc_floats((int64_t)M * N);
        fill(a, (int64_t)M * K, 1 + (uint32_t)s);
        fill(b, (int64_t)K * N, 100 + (uint32_t)s);
        fill(bias, N, 200 + (uint32_t)s);
        for (int with_bias = 0; with_bias <= 1; with_bias++) {
            ops_matmul(fast, a, b, with_bias ? bias : NULL, pool, M, K, N);
            ops_matmul_plain(plain, a, b, with_bias ? bias : NULL, M, K, N);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    // Rounding of K products and sums: a few ulp of sum |a||b|.
                    double scale = 1.0;
                    for (int k = 0; k < K; k++) scale += fabs((double)a[(int64_t)i * K + k] * b[(int64_t)k * N + j]);
                    double tol = 4.0 * K * 6e-8 * scale;
                    float want = plain[(int64_t)i * N + j], got = fast[(int64_t)i * N + j];
                    if (!(fabs((double)got - want) <= tol))
                        fail_msg("M=%d K=%d N=%d, bias %d, %d threads: out[%d][%d]: plain %.9g, fast %.9g (tolerance %.3g)",
                                 M, K, N, with_bias, threads, i, j, want, got, tol);
                }
        }
        free(a);
        free(b);
        free(bias);
        free(fast);
        free(plain);
    }
    pool_free(pool);
}

static void test_matmul_matches_plain(void **state) {
    (void)state;
    check_matmul_matches_plain(1);
    check_matmul_matches_plain(2);
}

// Row i of every M-row product equals the 1-row product of row i, whatever M
// and the thread count: tail rows, full tiles and threads included.
static void test_matmul_rows_are_independent(void **state) {
    (void)state;
    enum { K = 77, N = 101, MAXM = 40 };
    float *a = alloc_floats(MAXM * K), *b = alloc_floats(K * N), *bias = alloc_floats(N);
    float *one = alloc_floats((int64_t)MAXM * N), *many = alloc_floats((int64_t)MAXM * N);
    fill(a, MAXM * K, 5);
    fill(b, K * N, 6);
    fill(bias, N, 7);
    for (int i = 0; i < MAXM; i++) ops_matmul(one + (int64_t)i * N, a + (int64_t)i * K, b, bias, NULL, 1, K, N);
    for (int threads = 1; threads <= 3; threads++) {
        Pool *pool = pool_new(threads);
        assert_non_null(pool);
        for (int M = 1; M <= MAXM; M++) {
            ops_matmul(many, a, b, bias, pool, M, K, N);
            for (int64_t e = 0; e < (int64_t)M * N; e++)
                if (memcmp(&many[e], &one[e], sizeof(float)) != 0)
                    fail_msg("M=%d, %d threads: out[%d][%d] = %.9g, the 1-row product gives %.9g", M, threads,
                             (int)(e / N), (int)(e % N), many[e], one[e]);
        }
        pool_free(pool);
    }
    free(a);
    free(b);
    free(bias);
    free(one);
    free(many);
}

// More than 8 rows copy each panel of b into a contiguous buffer first; a
// single row reads b in place. The char GPT's shapes (rows 1536 and 6144
// bytes apart), a narrow tail panel, and a K past the packing limit (read in
// place whatever M): every row equals its 1-row product bit for bit.
static void test_matmul_packed_equals_in_place(void **state) {
    (void)state;
    static const int shapes[][3] = {{40, 384, 1536}, {17, 1536, 384}, {9, 48, 100}, {12, 4097, 50}};
    for (int threads = 1; threads <= 2; threads++) {
        Pool *pool = pool_new(threads);
        assert_non_null(pool);
        for (int s = 0; s < 4; s++) {
            int M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
            float *a = alloc_floats((int64_t)M * K), *b = alloc_floats((int64_t)K * N), *bias = alloc_floats(N);
            float *one = alloc_floats(N), *many = alloc_floats((int64_t)M * N);
            fill(a, (int64_t)M * K, 11 + (uint32_t)s);
            fill(b, (int64_t)K * N, 21 + (uint32_t)s);
            fill(bias, N, 31 + (uint32_t)s);
            ops_matmul(many, a, b, bias, pool, M, K, N);
            for (int i = 0; i < M; i++) {
                ops_matmul(one, a + (int64_t)i * K, b, bias, pool, 1, K, N);
                for (int j = 0; j < N; j++)
                    if (memcmp(&one[j], &many[(int64_t)i * N + j], sizeof(float)) != 0)
                        fail_msg("M=%d K=%d N=%d, %d threads: out[%d][%d] = %.9g packed, %.9g in place", M, K, N,
                                 threads, i, j, many[(int64_t)i * N + j], one[j]);
            }
            free(a), free(b), free(bias), free(one), free(many);
        }
        pool_free(pool);
    }
}

// b packed once into panel order (ops_pack) gives what b read in place
// gives, bit for bit, for one row and many, whole and partial panels.
static void test_matmul_prepacked_equals_plain_panels(void **state) {
    (void)state;
    static const int shapes[][3] = {{40, 384, 1536}, {17, 1536, 384}, {9, 48, 100}, {1, 64, 50},
                                    {1, 384, 1536}, {1, 1536, 384}, {3, 5, 7}};
    for (int s = 0; s < 7; s++) {
        int M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        float *a = alloc_floats((int64_t)M * K), *b = alloc_floats((int64_t)K * N), *bias = alloc_floats(N);
        float *panels = alloc_floats(ops_packed_size(K, N));
        float *plain = alloc_floats((int64_t)M * N), *packed = alloc_floats((int64_t)M * N);
        assert_true(ops_packed_size(K, N) >= (int64_t)K * N);
        fill(a, (int64_t)M * K, 71 + (uint32_t)s);
        fill(b, (int64_t)K * N, 81 + (uint32_t)s);
        fill(bias, N, 91 + (uint32_t)s);
        ops_pack(panels, b, K, N);
        ops_matmul(plain, a, b, bias, NULL, M, K, N);
        // With two threads, panels finish in any order: a panel that wrote
        // past its own columns would show, sooner or later, in 20 rounds.
        for (int threads = 1; threads <= 2; threads++) {
            Pool *pool = pool_new(threads);
            assert_non_null(pool);
            for (int round = 0; round < 20; round++) {
                memset(packed, 0xFF, sizeof(float) * (size_t)M * N);
                ops_matmul_packed(packed, a, b, panels, bias, OPS_STORE, pool, M, K, N);
                if (memcmp(plain, packed, sizeof(float) * (size_t)M * N) != 0)
                    fail_msg("M=%d K=%d N=%d, %d threads: the product from packed panels differs from the plain one",
                             M, K, N, threads);
            }
            pool_free(pool);
        }
        free(a), free(b), free(bias), free(panels), free(plain), free(packed);
    }
}

// A matmul that adds its sums into out (OPS_ADD_INTO) or stores their GELU
// (OPS_GELU) gives the bits of the plain product followed by ops_add or
// ops_gelu, in every kind of tile: one row (in place and packed), many rows
// with partial tiles and panels, with and without bias, on 1 and 2 threads.
static void test_matmul_then_equals_two_steps(void **state) {
    (void)state;
    // one row: whole 192-wide panels, one whole then a partial one (200), 3
    // vectors (40), 1 vector (50 = 48 + 2); many rows: tiles and panels whole and partial
    static const int shapes[][3] = {{1, 384, 1536}, {1, 64, 200}, {1, 64, 40}, {1, 64, 50},
                                    {13, 384, 1536}, {9, 1536, 100}, {3, 5, 7}};
    for (int s = 0; s < 7; s++) {
        int M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        int64_t MN = (int64_t)M * N;
        float *a = alloc_floats((int64_t)M * K), *b = alloc_floats((int64_t)K * N), *bias = alloc_floats(N);
        float *panels = alloc_floats(ops_packed_size(K, N)), *x = alloc_floats(MN);
        float *y = alloc_floats(MN), *want = alloc_floats(MN), *got = alloc_floats(MN);
        fill(a, (int64_t)M * K, 101 + (uint32_t)s);
        fill(b, (int64_t)K * N, 111 + (uint32_t)s);
        fill(bias, N, 121 + (uint32_t)s);
        fill(x, MN, 131 + (uint32_t)s);
        ops_pack(panels, b, K, N);
        for (int threads = 1; threads <= 2; threads++) {
            Pool *pool = pool_new(threads);
            assert_non_null(pool);
            for (int c = 0; c < 8; c++) {
                OpsThen then = c % 2 ? OPS_GELU : OPS_ADD_INTO;
                const float *bi = c / 2 % 2 ? NULL : bias, *pk = c / 4 ? panels : NULL;
                ops_matmul(y, a, b, bi, pool, M, K, N);
                if (then == OPS_GELU) ops_gelu(want, y, (int)MN);
                else ops_add(want, x, y, (int)MN);
                memcpy(got, x, sizeof(float) * (size_t)MN);
                ops_matmul_packed(got, a, b, pk, bi, then, pool, M, K, N);
                for (int64_t i = 0; i < MN; i++)
                    if (memcmp(&want[i], &got[i], sizeof(float)) != 0)
                        fail_msg("M=%d K=%d N=%d, %s%s%s, %d threads: out[%lld][%lld] expected %.9g, got %.9g", M, K,
                                 N, then == OPS_GELU ? "gelu" : "add into", bi ? ", bias" : "",
                                 pk ? ", packed" : "", threads, (long long)(i / N), (long long)(i % N), want[i],
                                 got[i]);
            }
            pool_free(pool);
        }
        free(a), free(b), free(bias), free(panels), free(x), free(y), free(want), free(got);
    }
}

typedef struct {
    const float *a, *b;
    float *out;
    int M, K, N, rounds;
} MatmulArgs;

static void *matmul_thread(void *p) {
    MatmulArgs *m = p;
    for (int r = 0; r < m->rounds; r++) ops_matmul(m->out, m->a, m->b, NULL, NULL, m->M, m->K, m->N);
    return NULL;
}

// Two threads of the caller's own (as kvdemo race runs its two
// generations) multiply different matrices at the same time: each packs into
// its own buffer, and each gets what it gets alone.
static void test_matmul_packed_on_two_threads(void **state) {
    (void)state;
    enum { M = 24, K = 384, N = 384 };
    float *a[2], *b[2], *alone[2], *together[2];
    MatmulArgs args[2];
    for (int t = 0; t < 2; t++) {
        a[t] = alloc_floats(M * K), b[t] = alloc_floats(K * N);
        alone[t] = alloc_floats(M * N), together[t] = alloc_floats(M * N);
        fill(a[t], M * K, 41 + (uint32_t)t);
        fill(b[t], K * N, 51 + (uint32_t)t);
        ops_matmul(alone[t], a[t], b[t], NULL, NULL, M, K, N);
        args[t] = (MatmulArgs){a[t], b[t], together[t], M, K, N, 200};
    }
    pthread_t th[2];
    for (int t = 0; t < 2; t++) assert_int_equal(pthread_create(&th[t], NULL, matmul_thread, &args[t]), 0);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++) {
        if (memcmp(alone[t], together[t], sizeof(float) * M * N) != 0)
            fail_msg("thread %d: its product changed when another thread multiplied at the same time", t);
        free(a[t]), free(b[t]), free(alone[t]), free(together[t]);
    }
}

static void test_vecmat(void **state) {
    (void)state;
    enum { K = 70, LD = 300 };
    float *x = alloc_floats(K), *m = alloc_floats(K * LD), *out = alloc_floats(LD), *prefix = alloc_floats(LD);
    fill(x, K, 8);
    fill(m, K * LD, 9);
    ops_vecmat(out, x, m, K, 259, LD);   // the first 259 columns of a (K, 300) matrix
    for (int j = 0; j < 259; j++) {
        double want = 0;
        for (int k = 0; k < K; k++) want += (double)x[k] * m[k * LD + j];
        if (fabs(out[j] - want) > 1e-5) fail_msg("vecmat out[%d]: %.9g, double sum %.9g", j, out[j], want);
    }
    // Fewer columns: the same bits for the columns kept (a cached step reads a
    // shorter key than the last row of a full pass, never another order).
    for (int n = 1; n < 259; n += 13) {
        ops_vecmat(prefix, x, m, K, n, LD);
        assert_memory_equal(prefix, out, sizeof(float) * (size_t)n);
    }
    free(x);
    free(m);
    free(out);
    free(prefix);
}

// ops_vecmat_rows against ops_vecmat row by row, memcmp: every block size,
// strided rows as attention reads them (q rows C apart, key rows T apart),
// widths under, at and past 64 columns, with and without the causal lengths.
static void test_vecmat_rows_equals_vecmat(void **state) {
    (void)state;
    enum { LDX = 300, LDM = 260, LDO = 270, MAXK = 200 };
    float *x = alloc_floats(OPS_ROWS_MAX * LDX), *m = alloc_floats(MAXK * LDM);
    float *got = alloc_floats(OPS_ROWS_MAX * LDO), *want = alloc_floats(LDO);
    fill(x, OPS_ROWS_MAX * LDX, 61);
    fill(m, MAXK * LDM, 62);
    static const int sizes[][2] = {{64, 64}, {6, 200}, {13, 1}, {200, 64}, {7, 130}, {64, 257}};   // K, N
    for (int s = 0; s < 6; s++)
        for (int causal = 0; causal <= 1; causal++)
            for (int R = 1; R <= OPS_ROWS_MAX; R++) {
                int K = sizes[s][0], N = sizes[s][1] < LDM ? sizes[s][1] : LDM;
                if (causal && K < R) continue;
                ops_vecmat_rows(got, LDO, x, LDX, m, LDM, R, K, N, causal);
                for (int r = 0; r < R; r++) {
                    int len = causal ? K - R + 1 + r : K;
                    ops_vecmat(want, x + (int64_t)r * LDX, m, len, N, LDM);
                    for (int j = 0; j < N; j++)
                        if (memcmp(&want[j], &got[(int64_t)r * LDO + j], sizeof(float)) != 0)
                            fail_msg("K=%d N=%d R=%d causal %d: row %d col %d: %.9g in the block, %.9g alone", K, N,
                                     R, causal, r, j, got[(int64_t)r * LDO + j], want[j]);
                }
            }
    free(x), free(m), free(got), free(want);
}

static void test_softmax(void **state) {
    (void)state;
    enum { N = 203 };
    float *x = alloc_floats(N), *y = alloc_floats(N);
    fill(x, N, 10);
    for (int i = 0; i < N; i++) x[i] *= 30.0f;   // a wide range, some exps underflow to 0 relative to the max
    x[5] = -1e30f;
    for (int n = 1; n <= N; n += 17) {
        ops_softmax_row(y, NULL, x, n, OPS_DIVIDE);
        double max = -INFINITY, sum = 0;
        for (int i = 0; i < n; i++) max = fmax(max, x[i]);
        for (int i = 0; i < n; i++) sum += exp((double)x[i] - max);
        double total = 0;
        for (int i = 0; i < n; i++) {
            double want = exp((double)x[i] - max) / sum;
            // float32's x - max is off by up to half an ulp of |x - max|, and exp
            // turns that into a relative error of |x - max| * 2**-24.
            double tol = (1e-6 + fabs((double)x[i] - max) * 6e-8) * want + 1e-30;
            if (fabs(y[i] - want) > tol) fail_msg("softmax n=%d [%d]: %.9g, exact %.9g", n, i, y[i], want);
            total += y[i];
        }
        assert_true(fabs(total - 1.0) < 1e-5);
    }
    free(x);
    free(y);
}

static void test_gelu(void **state) {
    (void)state;
    enum { N = 1001 };
    float *x = alloc_floats(N), *y = alloc_floats(N);
    for (int i = 0; i < N; i++) x[i] = -12.0f + 24.0f * i / (N - 1);
    x[0] = -100.0f;
    x[N - 1] = 100.0f;
    ops_gelu(y, x, N);
    for (int i = 0; i < N; i++) {
        double v = x[i];
        double want = 0.5 * v * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
        // 1 + tanh cancels for x < 0 in float32 (the chapter's numpy too). The
        // fast kernel's tanh, 1 - 2 / (exp(2u) + 1), rounds exp(2u) + 1 and the
        // difference to 1, each to an ulp of 1 (1.2e-7): 1 + tanh is off by up
        // to 2.4e-7 (-1 exactly once exp(2u) < 6e-8), times x / 2.
        if (!(fabs(y[i] - want) <= 2e-7 * fabs(want) + 1.2e-7 * fabs(v) + 1e-9))
            fail_msg("gelu(%.9g): %.9g, exact %.9g", x[i], y[i], want);
    }
    // In place, and the same bits in place as out of place.
    float *z = alloc_floats(N);
    memcpy(z, x, sizeof(float) * N);
    ops_gelu(z, z, N);
    assert_memory_equal(z, y, sizeof(float) * N);
    free(x);
    free(y);
    free(z);
}

// Against the formula in double, and each row of a many-row LayerNorm ==
// that row alone, bit for bit. R = 85: a block of 64 rows (16 side by side
// at a time), one of 21 (16 side by side, then 5 one by one). C: less than
// one block of 16 columns, exactly one, and five and a partial one.
static void test_layernorm(void **state) {
    (void)state;
    enum { R = 85 };
    static const int widths[] = {4, 16, 83};
    for (int t = 0; t < 3; t++) {
        int C = widths[t];
        float *x = alloc_floats(R * C), *w = alloc_floats(C), *b = alloc_floats(C), *y = alloc_floats(R * C);
        float *alone = alloc_floats(C), mean[R], rstd[R];
        fill(x, R * C, 11 + (uint32_t)t);
        fill(w, C, 12);
        fill(b, C, 13);
        for (int i = 0; i < R * C; i++) x[i] = 3.0f + 5.0f * x[i];   // an offset: the mean matters
        ops_layernorm(y, mean, rstd, x, w, b, R, C);
        for (int r = 0; r < R; r++) {
            double m = 0, v = 0;
            for (int c = 0; c < C; c++) m += x[r * C + c];
            m /= C;
            for (int c = 0; c < C; c++) v += (x[r * C + c] - m) * (x[r * C + c] - m);
            v /= C;
            if (fabs(mean[r] - m) > 1e-6 * fabs(m)) fail_msg("C=%d: mean[%d] = %.9g, exact %.9g", C, r, mean[r], m);
            if (fabs(rstd[r] - 1 / sqrt(v + 1e-5)) > 1e-6 / sqrt(v))
                fail_msg("C=%d: rstd[%d] = %.9g, exact %.9g", C, r, rstd[r], 1 / sqrt(v + 1e-5));
            for (int c = 0; c < C; c++) {
                double want = (x[r * C + c] - m) / sqrt(v + 1e-5) * w[c] + b[c];
                if (fabs(y[r * C + c] - want) > 2e-6)
                    fail_msg("C=%d: layernorm [%d][%d]: %.9g, exact %.9g", C, r, c, y[r * C + c], want);
            }
            // One row alone: the same bits.
            ops_layernorm(alone, NULL, NULL, x + r * C, w, b, 1, C);
            for (int c = 0; c < C; c++)
                if (memcmp(&alone[c], &y[r * C + c], sizeof(float)) != 0)
                    fail_msg("C=%d: row %d column %d: %.9g among %d rows, %.9g alone", C, r, c, y[r * C + c], R,
                             alone[c]);
        }
        free(x), free(w), free(b), free(y), free(alone);
    }
}

typedef struct {
    int *hits;   // (count) how many times each task ran
} Count;

static void count_tasks(void *ctx, int begin, int end, int thread) {
    Count *c = ctx;
    assert_true(thread >= 0 && thread < 4);
    for (int i = begin; i < end; i++) __atomic_fetch_add(&c->hits[i], 1, __ATOMIC_RELAXED);
}

static void test_pool_runs_every_task_once(void **state) {
    (void)state;
    int hits[1000];
    for (int threads = 1; threads <= 4; threads++) {
        Pool *pool = pool_new(threads);
        assert_non_null(pool);
        assert_int_equal(pool_threads(pool), threads);
        for (int count = 0; count <= 1000; count += count < 10 ? 1 : 197) {
            memset(hits, 0, sizeof(hits));
            Count c = {hits};
            for (int round = 0; round < 3; round++) pool_run(pool, count_tasks, &c, count);
            for (int i = 0; i < count; i++)
                if (hits[i] != 3) fail_msg("%d threads, %d tasks: task %d ran %d times in 3 loops", threads, count, i, hits[i]);
        }
        pool_free(pool);
    }
    assert_true(pool_cores() >= 1);
    pool_free(NULL);
}

// Many short loops back to back whose task counts change every time: a
// worker late for one loop must never run a task of the next.
static void test_pool_back_to_back_loops(void **state) {
    (void)state;
    static const int counts[] = {3, 17, 2, 40, 1, 9, 64, 5};
    int hits[64];
    for (int threads = 2; threads <= 3; threads++) {
        Pool *pool = pool_new(threads);
        assert_non_null(pool);
        for (int round = 0; round < 20000; round++) {
            int count = counts[round % 8];
            memset(hits, 0, sizeof(hits));
            Count c = {hits};
            pool_run(pool, count_tasks, &c, count);
            for (int i = 0; i < 64; i++)
                if (hits[i] != (i < count)) fail_msg("%d threads, loop %d of %d tasks: task %d ran %d times", threads, round, count, i, hits[i]);
        }
        pool_free(pool);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_matches_plain),
        cmocka_unit_test(test_matmul_rows_are_independent),
        cmocka_unit_test(test_matmul_packed_equals_in_place),
        cmocka_unit_test(test_matmul_packed_on_two_threads),
        cmocka_unit_test(test_matmul_prepacked_equals_plain_panels),
        cmocka_unit_test(test_matmul_then_equals_two_steps),
        cmocka_unit_test(test_vecmat),
        cmocka_unit_test(test_vecmat_rows_equals_vecmat),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_pool_runs_every_task_once),
        cmocka_unit_test(test_pool_back_to_back_loops),
    };
    return cmocka_run_group_tests_name("matmul", tests, NULL, NULL);
}
