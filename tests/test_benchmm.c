// test_benchmm — the matmuls of one pass, timed alone (src/cmd/benchmm.c).
//
//   test_benchmm_flops_match_the_shapes   the FLOP count against gpt_forward's matmul shapes, summed here
//   test_benchmm_runs_on_a_tiny_shape     a run returns its count and finite, positive rates, on the caller's pool of 1 and 2
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "benchmm.h"
#include "gpt.h"
#include "ops.h"

// 2 M K N over the matmuls of one uncached pass of n tokens, shape by shape
// as gpt_forward calls them.
static double flops_of_shapes(GptConfig cfg, int n) {
    int C = cfg.C, F = 4 * cfg.C;
    const int block[][3] = {   // M, K, N
        {n, C, C}, {n, C, C}, {n, C, C},   // query, key, value
        {n, C, C},                         // output
        {n, C, F}, {n, F, C},              // fc1, fc2
    };
    double sum = 0;
    for (int l = 0; l < cfg.L; l++)
        for (int i = 0; i < 6; i++) sum += 2.0 * block[i][0] * block[i][1] * block[i][2];
    return sum + 2.0 * 1 * C * cfg.V;   // the head, last row only
}

static void test_benchmm_flops_match_the_shapes(void **state) {
    (void)state;
    const char *presets[] = {"seed", "tiny"};
    for (int i = 0; i < 2; i++) {
        GptConfig cfg;
        assert_int_equal(gpt_preset(&cfg, presets[i]), 0);
        double want = flops_of_shapes(cfg, cfg.T), got = benchmm_flops(&cfg, cfg.T);
        if (got != want) fail_msg("%s: expected %.0f FLOPs, got %.0f", presets[i], want, got);
        // and the count kvdemo bench uses for a pass of the same length
        double cost = gpt_cost(cfg, cfg.T, 0).matmul_flops;
        if (got != cost) fail_msg("%s: gpt_cost counts %.0f FLOPs, benchmm %.0f", presets[i], cost, got);
    }
    // The seed model's 256-token pass, worked out by hand:
    // 6 x 256 x (4 x 2 x 384 x 384 + 2 x 2 x 384 x 1536) + 2 x 384 x 65
    GptConfig seed;
    assert_int_equal(gpt_preset(&seed, "seed"), 0);
    if (benchmm_flops(&seed, 256) != 5435817984.0 + 49920.0)
        fail_msg("seed: expected 5435867904 FLOPs, got %.0f", benchmm_flops(&seed, 256));
}

static void test_benchmm_runs_on_a_tiny_shape(void **state) {
    (void)state;
    const GptConfig shapes[] = {{.V = 5, .T = 3, .C = 8, .H = 2, .L = 1}, {.V = 65, .T = 32, .C = 64, .H = 4, .L = 2}};
    for (int threads = 1; threads <= 2; threads++)
        for (int s = 0; s < 2; s++) {
            Pool *pool = pool_new(threads);
            assert_non_null(pool);
            BenchMM r = {0};
            assert_int_equal(benchmm_run(&shapes[s], pool, 3, &r), 0);
            assert_int_equal(r.tokens, shapes[s].T);
            if (r.flops != flops_of_shapes(shapes[s], shapes[s].T))
                fail_msg("shape %d: expected %.0f FLOPs, got %.0f", s, flops_of_shapes(shapes[s], shapes[s].T), r.flops);
            double rates[] = {r.best_gflops, r.median_gflops, r.fma_best_gflops, r.fma_median_gflops, r.median_fraction};
            for (int i = 0; i < 5; i++)
                if (!(isfinite(rates[i]) && rates[i] > 0)) fail_msg("shape %d, %d threads: rate %d is %g", s, threads, i, rates[i]);
            if (r.best_gflops < r.median_gflops) fail_msg("best %g below median %g", r.best_gflops, r.median_gflops);
            assert_int_equal(pool_threads(pool), threads);   // the caller's pool, untouched
            pool_free(pool);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_benchmm_flops_match_the_shapes),
        cmocka_unit_test(test_benchmm_runs_on_a_tiny_shape),
    };
    return cmocka_run_group_tests_name("benchmm", tests, NULL, NULL);
}
