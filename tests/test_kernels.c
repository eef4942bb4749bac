// test_kernels — every fast kernel of ops against its plain twin, on sizes
// that fill whole vectors and sizes that leave a tail. In a portable build
// (make ARCH=, which make test also runs) the fast name is the plain loop
// and these tests pin that down; with AVX-512 they check the vector code.
#include "testutil.h"

#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int SIZES[] = {1, 5, 15, 16, 17, 64, 100, 257, 384, 1536};
enum { NSIZES = sizeof(SIZES) / sizeof(SIZES[0]) };

// n floats uniform in [lo, hi) from a fixed linear congruential sequence.
static float *uniform(int n, float lo, float hi, unsigned *seed) {
    float *x = malloc(sizeof(float) * (size_t)n);
    assert_non_null(x);
    for (int i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        x[i] = lo + (hi - lo) * (float)(*seed >> 8) / 16777216.0f;
    }
    return x;
}

static void test_vecmat_equals_plain(void **state) {
    (void)state;
    unsigned seed = 1;
    for (int a = 0; a < NSIZES; a++)
        for (int b = 0; b < NSIZES; b += 3) {
            int K = SIZES[a], N = SIZES[b], ld = N + 3;   // rows ld apart, as attention reads them
            float *x = uniform(K, -1, 1, &seed), *m = uniform(K * ld, -1, 1, &seed);
            float *fast = uniform(N, 0, 1, &seed), *plain = uniform(N, 0, 1, &seed);
            ops_vecmat(fast, x, m, K, N, ld);
            ops_vecmat_plain(plain, x, m, K, N, ld);
            char what[64];
            snprintf(what, sizeof what, "vecmat K%d N%d", K, N);
            // one fused multiply-add per k against two roundings
            assert_close(fast, plain, N, 1e-6 * K, what);
            free(x), free(m), free(fast), free(plain);
        }
}

static void test_softmax_equals_plain(void **state) {
    (void)state;
    unsigned seed = 2;
    for (int how = OPS_DIVIDE; how <= OPS_RECIPROCAL; how++)
        for (int a = 0; a < NSIZES; a++) {
            int n = SIZES[a];
            float *x = uniform(n, -30, 30, &seed);
            float *fast = malloc(sizeof(float) * (size_t)n), *plain = malloc(sizeof(float) * (size_t)n);
            assert_true(fast && plain);
            if (n > 2) x[n / 2] = -INFINITY;   // a masked score
            float lse_fast, lse_plain;
            ops_softmax_row(fast, &lse_fast, x, n, (OpsNorm)how);
            ops_softmax_row_plain(plain, &lse_plain, x, n, (OpsNorm)how);
            char what[64];
            snprintf(what, sizeof what, "softmax %s n%d", how == OPS_DIVIDE ? "divide" : "reciprocal", n);
            assert_close(fast, plain, n, 1e-6, what);
            if (n > 2 && fast[n / 2] != 0.0f)
                fail_msg("%s: a -inf score must weigh exactly 0, got %.9g", what, fast[n / 2]);
            if (fabsf(lse_fast - lse_plain) > 1e-5f * fmaxf(1.0f, fabsf(lse_plain)))
                fail_msg("%s: log-sum-exp expected %.9g, got %.9g", what, lse_plain, lse_fast);
            // In place, the same bits as out of place.
            ops_softmax_row(x, NULL, x, n, (OpsNorm)how);
            for (int i = 0; i < n; i++)
                if (memcmp(&x[i], &fast[i], sizeof(float)) != 0)
                    fail_msg("%s in place [%d]: expected %.9g, got %.9g", what, i, fast[i], x[i]);
            free(x), free(fast), free(plain);
        }
}

// The reciprocal form is the divide form to within one rounding.
static void test_softmax_reciprocal_near_divide(void **state) {
    (void)state;
    unsigned seed = 5;
    for (int a = 0; a < NSIZES; a++) {
        int n = SIZES[a];
        float *x = uniform(n, -30, 30, &seed);
        float *div = malloc(sizeof(float) * (size_t)n), *rec = malloc(sizeof(float) * (size_t)n);
        assert_true(div && rec);
        ops_softmax_row(div, NULL, x, n, OPS_DIVIDE);
        ops_softmax_row(rec, NULL, x, n, OPS_RECIPROCAL);
        for (int i = 0; i < n; i++)
            if (fabsf(rec[i] - div[i]) > 2.5e-7f * div[i])
                fail_msg("softmax n%d [%d]: divided %.9g, times 1/sum %.9g", n, i, div[i], rec[i]);
        free(x), free(div), free(rec);
    }
}

static void test_gelu_equals_plain(void **state) {
    (void)state;
    unsigned seed = 3;
    for (int a = 0; a < NSIZES; a++) {
        int n = SIZES[a];
        float *x = uniform(n, -12, 12, &seed), *dout = uniform(n, -1, 1, &seed);
        float *fast = malloc(sizeof(float) * (size_t)n), *plain = malloc(sizeof(float) * (size_t)n);
        assert_true(fast && plain);
        ops_gelu(fast, x, n);
        ops_gelu_plain(plain, x, n);
        char what[64];
        snprintf(what, sizeof what, "gelu n%d", n);
        for (int i = 0; i < n; i++)   // absolute near 0 (1 + tanh cancels for x < 0), relative up to 12
            if (fabsf(fast[i] - plain[i]) > 1e-6f * fmaxf(1.0f, fabsf(plain[i])))
                fail_msg("%s[%d] (x = %.9g): expected %.9g, got %.9g", what, i, x[i], plain[i], fast[i]);
        // The backward pass adds to what is there: start both from dout.
        for (int i = 0; i < n; i++) fast[i] = plain[i] = dout[i];
        ops_gelu_backward(fast, x, dout, n);
        ops_gelu_backward_plain(plain, x, dout, n);
        snprintf(what, sizeof what, "gelu backward n%d", n);
        // 1 - t^2 cancels where tanh nears -1 or 1: an ulp of t there, times
        // 0.5 x du, which grows as x^2.
        for (int i = 0; i < n; i++)
            if (fabsf(fast[i] - plain[i]) > 1e-6f * fmaxf(1.0f, fabsf(plain[i])) + 1e-7f * x[i] * x[i])
                fail_msg("%s[%d] (x = %.9g): expected %.9g, got %.9g", what, i, x[i], plain[i], fast[i]);
        free(x), free(dout), free(fast), free(plain);
    }
}

static void test_exp_equals_expf(void **state) {
    (void)state;
    unsigned seed = 4;
    for (int a = 0; a < NSIZES; a++) {
        int n = SIZES[a];
        float *x = uniform(n, -100, 88, &seed), *got = malloc(sizeof(float) * (size_t)n);
        assert_non_null(got);
        x[0] = n > 1 ? -INFINITY : 0.0f;
        ops_exp(got, x, n);
        for (int i = 0; i < n; i++) {
            float want = expf(x[i]);
            // within 2 ulp where the result is a normal float; 0 for -inf
            float ulp = nextafterf(want, INFINITY) - want;
            if (want == 0.0f ? got[i] != 0.0f : !(fabsf(got[i] - want) <= 2 * ulp) && want > 1e-37f)
                fail_msg("exp n%d [%d] (x = %.9g): expected %.9g, got %.9g", n, i, x[i], want, got[i]);
        }
        free(x), free(got);
    }
}

static void test_argmax_first_largest(void **state) {
    (void)state;
    const float x[] = {1, 3, -2, 3, 0};
    if (ops_argmax(x, 5) != 1) fail_msg("argmax of {1, 3, -2, 3, 0}: expected 1, got %d", ops_argmax(x, 5));
    const float y[] = {-INFINITY, -5, -1};
    if (ops_argmax(y, 3) != 2) fail_msg("argmax of {-inf, -5, -1}: expected 2, got %d", ops_argmax(y, 3));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vecmat_equals_plain),  cmocka_unit_test(test_softmax_equals_plain),
        cmocka_unit_test(test_softmax_reciprocal_near_divide),
        cmocka_unit_test(test_gelu_equals_plain),    cmocka_unit_test(test_exp_equals_expf),
        cmocka_unit_test(test_argmax_first_largest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
