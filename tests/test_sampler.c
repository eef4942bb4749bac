// test_sampler — the sampler against numpy's own draws
// (tests/fixtures/gpt_sampler.txt, written by tests/gpt_reference.py).
//
// numpy's legacy RandomState after np.random.seed(42): random_sample,
// standard_normal and normal must match bit for bit; np.sum of float32 bit
// for bit (pairwise order); the chapter's softmax within a few ulp (numpy's
// exp is its own SIMD code, ours is libm's expf); np.random.choice draw for
// draw.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "sampler.h"

static const char *FIXTURE = "tests/fixtures/gpt_sampler.txt";

static void test_random_sample_matches_numpy(void **state) {
    (void)state;
    double expected[20];
    int n = fixture_array(FIXTURE, "random_sample", expected, 20);
    assert_int_equal(n, 20);
    Mt19937 mt;
    mt19937_seed(&mt, 42);   // np.random.seed(42)
    for (int i = 0; i < n; i++) {
        double got = mt19937_random_sample(&mt);
        if (got != expected[i]) fail_msg("random_sample[%d]: expected %.17g, got %.17g", i, expected[i], got);
    }
    // The largest seed numpy accepts.
    n = fixture_array(FIXTURE, "random_sample_seed_max", expected, 3);
    mt19937_seed(&mt, 4294967295u);
    for (int i = 0; i < n; i++) {
        double got = mt19937_random_sample(&mt);
        if (got != expected[i]) fail_msg("seed 2**32-1: random_sample[%d]: expected %.17g, got %.17g", i, expected[i], got);
    }
}

static void test_gauss_matches_numpy(void **state) {
    (void)state;
    double expected[21];
    int n = fixture_array(FIXTURE, "standard_normal", expected, 21);
    Mt19937 mt;
    mt19937_seed(&mt, 42);
    for (int i = 0; i < n; i++) {
        double got = mt19937_gauss(&mt);
        if (got != expected[i]) fail_msg("standard_normal[%d]: expected %.17g, got %.17g", i, expected[i], got);
    }
    // np.random.normal(0.0, 0.02, 9).astype(np.float32): gpt_init_random's draws
    n = fixture_array(FIXTURE, "normal_002", expected, 21);
    mt19937_seed(&mt, 42);
    for (int i = 0; i < n; i++) {
        float got = (float)(0.0 + 0.02 * mt19937_gauss(&mt));
        if (got != (float)expected[i]) fail_msg("normal(0, 0.02)[%d]: expected %.9g, got %.9g", i, expected[i], got);
    }
}

static void test_pairwise_sum_matches_numpy(void **state) {
    (void)state;
    static const int sizes[] = {1, 7, 8, 9, 65, 127, 128, 129, 200, 1000, 4099};
    float *x = malloc(sizeof(float) * 4099);
    assert_non_null(x);
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        int n = sizes[s];
        // x = np.random.RandomState(7).random_sample(n).astype(np.float32)
        Mt19937 mt;
        mt19937_seed(&mt, 7);
        for (int i = 0; i < n; i++) x[i] = (float)mt19937_random_sample(&mt);
        char name[32];
        snprintf(name, sizeof(name), "sum_%d", n);
        double expected;
        fixture_array(FIXTURE, name, &expected, 1);
        float got = sampler_sum(x, n);
        if (got != (float)expected) fail_msg("np.sum of %d float32: expected %.9g, got %.9g", n, expected, got);
    }
    free(x);
}

static void test_softmax_matches_chapter(void **state) {
    (void)state;
    double logits_d[65], probs_d[65];
    assert_int_equal(fixture_array(FIXTURE, "logits", logits_d, 65), 65);
    assert_int_equal(fixture_array(FIXTURE, "probs", probs_d, 65), 65);
    float logits[65], probs[65];
    for (int i = 0; i < 65; i++) logits[i] = (float)logits_d[i];
    sampler_softmax(probs, NULL, logits, 1.0f, 0, 65);
    for (int i = 0; i < 65; i++) {
        float expected = (float)probs_d[i];
        // numpy's float32 exp and libm's expf may differ in the last bit.
        if (fabsf(probs[i] - expected) > 4e-7f * expected)
            fail_msg("probs[%d]: expected %.9g, got %.9g", i, expected, probs[i]);
    }
}

static void test_choice_matches_numpy(void **state) {
    (void)state;
    double probs_d[65], expected[500];
    fixture_array(FIXTURE, "probs", probs_d, 65);
    int n = fixture_array(FIXTURE, "choice", expected, 500);
    assert_int_equal(n, 500);
    float probs[65];
    for (int i = 0; i < 65; i++) probs[i] = (float)probs_d[i];
    double cdf[65];
    Mt19937 mt;
    mt19937_seed(&mt, 42);
    for (int i = 0; i < n; i++) {
        int got = sampler_choice(&mt, cdf, probs, 65);
        if (got != (int)expected[i]) fail_msg("draw %d: np.random.choice gave %d, got %d", i, (int)expected[i], got);
    }
    // The whole step from the logits (the sampler's own softmax) draws the same.
    double logits_d[65];
    fixture_array(FIXTURE, "logits", logits_d, 65);
    float logits[65];
    for (int i = 0; i < 65; i++) logits[i] = (float)logits_d[i];
    Sampler s;
    assert_int_equal(sampler_init(&s, 65, 1.0f, 0, 42), 0);
    for (int i = 0; i < n; i++) {
        int got = sampler_sample(&s, logits);
        if (got != (int)expected[i]) fail_msg("sampler_sample draw %d: numpy drew %d, got %d", i, (int)expected[i], got);
    }
    sampler_free(&s);
}

static void test_temperature_zero_is_argmax(void **state) {
    (void)state;
    float logits[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
    Sampler s;
    assert_int_equal(sampler_init(&s, 5, 0.0f, 0, 42), 0);
    Mt19937 before = s.rng;
    for (int i = 0; i < 3; i++) assert_int_equal(sampler_sample(&s, logits), 1);   // the first of the ties
    assert_memory_equal(&before, &s.rng, sizeof(Mt19937));   // no draw was made
    assert_true(s.probs[1] == 1.0f && s.probs[3] == 0.0f);
    sampler_free(&s);
}

static void test_top_k_keeps_the_k_largest(void **state) {
    (void)state;
    float logits[6] = {0.1f, 3.0f, -2.0f, 2.5f, 1.0f, 2.9f};
    Sampler s;
    assert_int_equal(sampler_init(&s, 6, 1.0f, 3, 42), 0);
    for (int i = 0; i < 200; i++) {
        int t = sampler_sample(&s, logits);
        if (t != 1 && t != 3 && t != 5) fail_msg("top-k 3 drew token %d (logit %g)", t, logits[t]);
    }
    float sum = 0.0f;
    for (int i = 0; i < 6; i++) sum += s.probs[i];
    assert_true(fabsf(sum - 1.0f) < 1e-6f);
    assert_true(s.probs[0] == 0.0f && s.probs[2] == 0.0f && s.probs[4] == 0.0f);
    sampler_free(&s);
    // A higher temperature flattens: the smallest kept probability grows.
    float cold[6], hot[6], scratch[6];
    sampler_softmax(cold, scratch, logits, 0.5f, 0, 6);
    sampler_softmax(hot, scratch, logits, 2.0f, 0, 6);
    assert_true(hot[2] > cold[2] && hot[1] < cold[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_sample_matches_numpy),
        cmocka_unit_test(test_gauss_matches_numpy),
        cmocka_unit_test(test_pairwise_sum_matches_numpy),
        cmocka_unit_test(test_softmax_matches_chapter),
        cmocka_unit_test(test_choice_matches_numpy),
        cmocka_unit_test(test_temperature_zero_is_argmax),
        cmocka_unit_test(test_top_k_keeps_the_k_largest),
    };
    return cmocka_run_group_tests_name("sampler", tests, NULL, NULL);
}
