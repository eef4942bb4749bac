// test_stats — the spread of repeated timings and ratios printed with the
// digits that spread allows, against values worked out by hand here.
#include "testutil.h"

#include "stats.h"
#include "trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void expect_near(double got, double want, double tol, const char *what) {
    if (!(fabs(got - want) <= tol)) fail_msg("%s: expected %.9g, got %.9g", what, want, got);
}

static void test_mean_sd_min_max_median(void **state) {
    (void)state;
    double x[] = {4, 1, 3, 2};
    Stats s = stats_of(x, 4);
    assert_int_equal(s.n, 4);
    expect_near(s.mean, 2.5, 1e-15, "mean");
    // Sample standard deviation: sqrt(((1.5² + 0.5²) · 2) / 3) = sqrt(5/3).
    expect_near(s.sd, sqrt(5.0 / 3.0), 1e-15, "sd");
    expect_near(s.min, 1, 0, "min");
    expect_near(s.max, 4, 0, "max");
    expect_near(s.median, 2.5, 0, "median");
    assert_true(x[0] == 4 && x[1] == 1);   // the caller's order is kept
    double one = 0.25;
    s = stats_of(&one, 1);
    expect_near(s.sd, 0, 0, "sd of one run");
    expect_near(s.median, 0.25, 0, "median of one run");
}

static void test_noise(void **state) {
    (void)state;
    double calm[] = {1.00, 1.02, 0.99, 1.01};
    double busy[] = {1.00, 1.02, 0.99, 1.60};   // one run 1.6 x the fastest
    double wide[] = {1.0, 1.3, 0.8, 1.2};       // σ about 21% of the mean
    assert_int_equal(stats_noisy(stats_of(calm, 4)), 0);
    assert_int_equal(stats_noisy(stats_of(busy, 4)), 1);
    assert_int_equal(stats_noisy(stats_of(wide, 4)), 1);
}

static void test_ratio_digits_follow_the_spread(void **state) {
    (void)state;
    // σ/mean 1% each: the ratio 10 is uncertain by 10 · √2 % = 0.14, so one
    // decimal is all it can say.
    double a[] = {9.9, 10.0, 10.1}, b[] = {0.99, 1.00, 1.01};
    int d;
    double r = stats_ratio(stats_of(a, 3), stats_of(b, 3), &d);
    expect_near(r, 10, 1e-12, "ratio");
    assert_int_equal(d, 1);
    // 10% each: uncertain by 1.4, no decimals.
    double a2[] = {9, 10, 11}, b2[] = {0.9, 1.0, 1.1};
    stats_ratio(stats_of(a2, 3), stats_of(b2, 3), &d);
    assert_int_equal(d, 0);
    // Identical runs: the most the table prints, 3 decimals.
    double a3[] = {2, 2}, b3[] = {1, 1};
    stats_ratio(stats_of(a3, 2), stats_of(b3, 2), &d);
    assert_int_equal(d, 3);
    // One run each: two significant digits (10.83 -> "11", 1.8 -> "1.8").
    double x = 10.83, y = 1, z = 1.8;
    stats_ratio(stats_of(&x, 1), stats_of(&y, 1), &d);
    assert_int_equal(d, 0);
    stats_ratio(stats_of(&z, 1), stats_of(&y, 1), &d);
    assert_int_equal(d, 1);
}

static void timing_busy(Trace *tr) {
    double s[] = {0.010, 0.011, 0.019};
    trace_timing_stats(tr, "step", s, 3);
}

static void ratio_calm(Trace *tr) {
    double a[] = {9.9, 10.0, 10.1}, b[] = {0.99, 1.00, 1.01};
    trace_ratio(tr, "speedup", a, 3, b, 3, "faster", "更快");
}

static void test_trace_shows_the_spread(void **state) {
    (void)state;
    char *t = traced(timing_busy, 0, LANG_EN);
    // mean 13.33 ms, σ = 4.93 ms, 10.00 … 19.00 ms over 3 runs, and a warning.
    if (!strstr(t, "13.33 ms ± 4.93 ms  (10.00 ms … 19.00 ms, 3 runs)")) fail_msg("text: %s", t);
    if (!strstr(t, "rerun")) fail_msg("no warning for a busy machine: %s", t);
    free(t);
    t = traced(timing_busy, 1, LANG_EN);
    if (!strstr(t, "\"seconds\":0.011,") || !strstr(t, "\"noisy\":true")) fail_msg("json: %s", t);
    free(t);
    t = traced(ratio_calm, 0, LANG_EN);
    if (!strstr(t, "faster: 10.0 x")) fail_msg("ratio: %s", t);
    free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mean_sd_min_max_median),
        cmocka_unit_test(test_noise),
        cmocka_unit_test(test_ratio_digits_follow_the_spread),
        cmocka_unit_test(test_trace_shows_the_spread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
