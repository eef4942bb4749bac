// test_measure — the one way kvdemo times things (measure.h), on given
// samples and fake runs: nothing here measures a real time or asserts one.
//
//   test_runs_are_interleaved      warm-up of each arm, then A B A B ..., only counted runs kept
//   test_rounds_take_turns         three arms: a warm-up round, then A B C A B C ..., counted runs kept
//   test_ratio_is_hyperfines       x = median ratio, e = x √((σa/μa)² + (σb/μb)²), e to 2 digits
//   test_verdict_follows_intervals faster / slower / the same within noise / too few
//   test_race_concludes_beyond_races_apart  one race: a verdict only beyond what races apart differ by
//   test_noisy_reads_the_middle_of_many_runs  few runs: stats_noisy; many: their middle half
//   test_sum_sd_ignores_trends     a step cost that grows, and a jump between kinds, are not noise;
//                                  a slow stretch of steps is
//   test_words                     the texts, in English and Chinese, and the busy banner
//   test_printed_figure_agrees_with_verdict  no "1.3 ± 3.8 x faster", no "0.77 ± 0.32: faster":
//                                  the ± beside a verdict says it, or the reason in words
//   test_timed_lessons_print_agreeing_verdicts  lessons 2, 4, 6.3, 10, the race and bench, en and zh:
//                                  every verdict line agrees with its figure
//   test_trace_prints_the_spread   trace_measure and trace_comparison in text and JSON
//   test_value_runs                a quantity of each run (tokens/s, a share): median (min … max)
#include "testutil.h"

#include "measure.h"
#include "trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void expect_near(double got, double want, double tol, const char *what) {
    if (!(fabs(got - want) <= tol)) fail_msg("%s: expected %.9g, got %.9g", what, want, got);
}

static void expect_text(const char *got, const char *want, const char *what) {
    if (strcmp(got, want)) fail_msg("%s: expected \"%s\", got \"%s\"", what, want, got);
}

// ----------------------------------------------------------------------------
// Running

// A fake arm: logs its name, hands out the next of its given times.
typedef struct {
    char name;
    const double *times;
    int next;
    char *log;   // shared by both arms
    int stop_at; // the call that returns 1 (-1: never)
} FakeArm;

static int fake_run(void *ctx, double *seconds) {
    FakeArm *f = ctx;
    strncat(f->log, &f->name, 1);
    if (f->next == f->stop_at) return 1;
    *seconds = f->times[f->next++];
    return 0;
}

static void test_runs_are_interleaved(void **state) {
    (void)state;
    char log[32] = "";
    double ta[] = {9, 1, 2, 3}, tb[] = {8, 4, 5, 6};   // the first of each is the warm-up
    FakeArm a = {'A', ta, 0, log, -1}, b = {'B', tb, 0, log, -1};
    double sa[3], sb[3];
    int rc = measure_interleaved(sa, sb, 1, 3, fake_run, &a, fake_run, &b);
    assert_int_equal(rc, 0);
    expect_text(log, "ABABABAB", "order of the runs");
    for (int i = 0; i < 3; i++) {
        if (sa[i] != ta[i + 1]) fail_msg("a[%d]: expected %g, got %g", i, ta[i + 1], sa[i]);
        if (sb[i] != tb[i + 1]) fail_msg("b[%d]: expected %g, got %g", i, tb[i + 1], sb[i]);
    }
    // One arm alone; a run that fails stops the measurement with its status.
    log[0] = '\0';
    FakeArm c = {'C', ta, 0, log, 2};
    rc = measure_interleaved(sa, NULL, 1, 3, fake_run, &c, NULL, NULL);
    assert_int_equal(rc, 1);
    expect_text(log, "CCC", "a stopped single arm");
}

static void test_rounds_take_turns(void **state) {
    (void)state;
    char log[32] = "";
    double ta[] = {9, 1, 2}, tb[] = {8, 3, 4}, tc[] = {7, 5, 6};   // the first of each is the warm-up
    FakeArm a = {'A', ta, 0, log, -1}, b = {'B', tb, 0, log, -1}, c = {'C', tc, 0, log, -1};
    double sa[2], sb[2], sc[2];
    double *samples[] = {sa, sb, sc};
    MeasureRun runs[] = {fake_run, fake_run, fake_run};
    void *ctx[] = {&a, &b, &c};
    assert_int_equal(measure_rounds(samples, 3, 1, 2, runs, ctx), 0);
    expect_text(log, "ABCABCABC", "order of the runs");
    const double *want[] = {ta, tb, tc};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 2; i++)
            if (samples[k][i] != want[k][i + 1])
                fail_msg("arm %d run %d: expected %g, got %g", k, i, want[k][i + 1], samples[k][i]);
    // A run that fails stops the rounds with its status.
    log[0] = '\0';
    a.next = b.next = 0, c.next = 0, b.stop_at = 1;
    assert_int_equal(measure_rounds(samples, 3, 1, 2, runs, ctx), 1);
    expect_text(log, "ABCAB", "rounds stopped by arm B");
}

// ----------------------------------------------------------------------------
// Ratio and verdict

static void test_ratio_is_hyperfines(void **state) {
    (void)state;
    // a: 9, 10, 11 (median 10, mean 10, σ 1); b: 0.9, 1.0, 1.1 (σ 0.1):
    // x = 10, e = 10 · √(0.1² + 0.1²) = 1.41421356: two digits of e, "10.0 ± 1.4".
    double a[] = {9, 10, 11}, b[] = {0.9, 1.0, 1.1};
    MeasureRatio r = measure_ratio(stats_of(a, 3), stats_of(b, 3));
    expect_near(r.x, 10, 1e-12, "x");
    expect_near(r.e, 10 * sqrt(0.02), 1e-12, "e");
    assert_int_equal(r.decimals, 1);
    char t[64];
    expect_text(measure_ratio_text(t, sizeof t, r), "10.0 ± 1.4", "ratio text");
    // The median, not the mean: one slow run of a (30) moves the mean, not x.
    double a2[] = {10, 30, 10.2}, b2[] = {1, 1, 1};
    r = measure_ratio(stats_of(a2, 3), stats_of(b2, 3));
    expect_near(r.x, 10.2, 1e-12, "x of medians");
    // σ/μ of a2 = 11.49 / 16.73 = 0.687, of b2 0: e = 7.00, "10.2 ± 7.0".
    expect_text(measure_ratio_text(t, sizeof t, r), "10.2 ± 7.0", "ratio text, wide");
    // A small error: e to two digits is three decimals.
    r = measure_ratio_of(1.2153, 0.0342, 5);
    expect_text(measure_ratio_text(t, sizeof t, r), "1.215 ± 0.034", "ratio text, narrow");
    // One run each: no error, two significant digits of x.
    r = measure_ratio_of(10.83, 0.5, 1);
    expect_near(r.e, 0, 0, "e of one run");
    expect_text(measure_ratio_text(t, sizeof t, r), "11", "ratio text, one run");
    // A hundred or more keeps two significant digits: of x alone with one
    // run, of e (and x at its place) with several.
    r = measure_ratio_of(303.4, 0, 1);
    expect_text(measure_ratio_text(t, sizeof t, r), "300", "ratio text, one run of 303");
    r = measure_ratio_of(1021, 1353, 5);
    expect_text(measure_ratio_text(t, sizeof t, r), "1000 ± 1400", "ratio text, 1021 ± 1353");
    r = measure_ratio_of(40.2, 540, 5);
    expect_text(measure_ratio_text(t, sizeof t, r), "40 ± 540", "ratio text, 40.2 ± 540");
}

static void test_verdict_follows_intervals(void **state) {
    (void)state;
    double slow[] = {9, 10, 11}, fast[] = {0.9, 1.0, 1.1};
    assert_int_equal(measure_verdict(slow, 3, fast, 3), MEASURE_FASTER);
    assert_int_equal(measure_verdict(fast, 3, slow, 3), MEASURE_SLOWER);
    // Overlapping runs, as lesson 4's steps at t = 16 and t = 64 were: no conclusion.
    double p[] = {1.0, 1.3, 0.9, 1.2}, q[] = {1.1, 0.95, 1.25, 1.0};
    assert_int_equal(measure_verdict(p, 4, q, 4), MEASURE_SAME);
    // A small gap, tight runs: x = 1.21, e = 1.21 √(0.00826² + 0.01²) = 0.0157, disjoint: faster.
    double a3[] = {1.2, 1.21, 1.22}, b3[] = {0.99, 1.0, 1.01};
    assert_int_equal(measure_verdict(a3, 3, b3, 3), MEASURE_FASTER);
    // Every run of b beat every run of a, but one wild run of a makes e larger than x - 1.
    double a4[] = {1.02, 1.03, 3.0}, b4[] = {1.0, 1.0, 1.01};
    assert_int_equal(measure_verdict(a4, 3, b4, 3), MEASURE_SAME);
    // With five runs each, all of b below all of a decides alone, wild run or not
    // (x = 1.03 / 1.0, e about 0.9 from a's 3.0): faster; and the other way, slower.
    double a6[] = {1.02, 1.03, 3.0, 1.05, 1.04}, b6[] = {1.0, 1.0, 1.01, 0.99, 1.0};
    MeasureRatio r6 = measure_ratio(stats_of(a6, 5), stats_of(b6, 5));
    if (!(r6.x - r6.e < 1)) fail_msg("the case needs x - e < 1: x %g e %g", r6.x, r6.e);
    assert_int_equal(measure_verdict(a6, 5, b6, 5), MEASURE_FASTER);
    assert_int_equal(measure_verdict(b6, 5, a6, 5), MEASURE_SLOWER);
    assert_int_equal(measure_verdict(a6, 4, b6, 4), MEASURE_SAME);   // four runs: not enough alone
    // x - e > 1 but the runs overlap: the same within noise.
    double a5[] = {1.5, 1.5, 1.5, 1.5, 0.9}, b5[] = {1.0, 1.0, 1.0, 1.0, 1.0};
    MeasureRatio r5 = measure_ratio(stats_of(a5, 5), stats_of(b5, 5));
    if (!(r5.x - r5.e > 1)) fail_msg("the case needs x - e > 1: x %g e %g", r5.x, r5.e);
    assert_int_equal(measure_verdict(a5, 5, b5, 5), MEASURE_SAME);
    // Many runs, each arm with a stray slow one: the middle halves decide.
    // (x = 2.01, e = 0.76; b's middle half 1.00 … 1.02 lies below a's 2.00 … 2.10.)
    double many_a[9] = {2.0, 2.1, 2.0, 2.05, 3.0, 2.0, 2.1, 2.02, 2.03};
    double many_b[9] = {1.0, 1.02, 2.2, 1.01, 1.0, 1.03, 1.0, 1.01, 1.02};
    assert_int_equal(measure_verdict(many_a, 9, many_b, 9), MEASURE_FASTER);
    // ... but with fewer than MEASURE_MANY runs b's stray 2.2 overlaps a's 2.0: no claim.
    assert_int_equal(measure_verdict(many_a, 5, many_b, 5), MEASURE_SAME);
    // One run: no conclusion.
    assert_int_equal(measure_verdict(slow, 1, fast, 1), MEASURE_TOO_FEW);
    // From a ratio alone.
    assert_int_equal(measure_verdict_ratio(measure_ratio_of(6.4, 0.3, 2)), MEASURE_FASTER);
    assert_int_equal(measure_verdict_ratio(measure_ratio_of(0.6, 0.1, 2)), MEASURE_SLOWER);
    assert_int_equal(measure_verdict_ratio(measure_ratio_of(1.1, 0.2, 2)), MEASURE_SAME);
}

static void test_race_concludes_beyond_races_apart(void **state) {
    (void)state;
    // One race, e from within its runs: faster only when x - e clears 2.5
    // (races minutes apart read 4.9 x and 11.5 x), slower only under 1 / 2.5.
    static const struct {
        double x, e;
        MeasureVerdict want;
    } CASES[] = {
        {9.18, 0.13, MEASURE_FASTER},  // the README's quiet race
        {2.94, 0.30, MEASURE_FASTER},  // its busy one: 2.64 clears 2.5
        {2.6, 0.3, MEASURE_TOO_FEW},   // 2.3: a slowed run could make it
        {1.6, 0.05, MEASURE_TOO_FEW},  // measure_verdict_ratio alone said faster
        {1.1, 0.3, MEASURE_SAME},      // x ± e holds 1
        {0.3, 0.05, MEASURE_SLOWER},   // 0.35 under 0.4
        {0.6, 0.05, MEASURE_TOO_FEW},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        MeasureRatio r = measure_ratio_of(CASES[i].x, CASES[i].e, 2);
        MeasureVerdict got = measure_verdict_race(r);
        if (got != CASES[i].want)
            fail_msg("race %g ± %g: expected verdict %d, got %d", CASES[i].x, CASES[i].e, CASES[i].want, got);
    }
    char t[256];
    MeasureRatio r = measure_ratio_of(1.6, 0.05, 2);
    expect_text(measure_compare_text(t, sizeof t, r, measure_verdict_race(r), 0),
                "1.600 ± 0.050 x (one run each: too few to conclude)", "race too close to call");
    expect_text(measure_compare_text(t, sizeof t, r, measure_verdict_race(r), 1),
                "1.600 ± 0.050 倍（每种只运行了一次，不足以下结论）", "race too close to call, zh");
}

static void test_noisy_reads_the_middle_of_many_runs(void **state) {
    (void)state;
    double few[] = {1.00, 1.02, 0.99, 1.60};   // stats_noisy: the slowest 1.6 x the fastest
    assert_int_equal(measure_noisy(few, 4), 1);
    // 101 runs of 140 ns, a few stray ones up to 290 ns: the middle half agrees.
    double many[101];
    for (int i = 0; i < 101; i++) many[i] = i % 20 == 7 ? 290e-9 : 140e-9 + (i % 5) * 1e-9;
    assert_int_equal(measure_noisy(many, 101), 0);
    // Half of them slow: the middle half spans 140 … 290 ns.
    for (int i = 0; i < 101; i++) many[i] = i % 2 ? 290e-9 : 140e-9;
    assert_int_equal(measure_noisy(many, 101), 1);
}

// ----------------------------------------------------------------------------
// The error of a run's sum of step times

static void test_sum_sd_ignores_trends(void **state) {
    (void)state;
    // A step cost growing linearly (an uncached step reads a longer context):
    // no scatter at all.
    double t[64];
    for (int i = 0; i < 64; i++) t[i] = 0.01 + 0.0001 * i;
    expect_near(measure_sum_sd(t, NULL, 64), 0, 1e-15, "linear trend");
    // 64 steps make 16 blocks of 4. Blocks alternately d slower and d faster
    // per step: each block sum is 4 (0.01 ± d), each second difference
    // ±16 d, so σ_block² = 256 d² / 6 and the sum's σ = 16 d / √6 · √16.
    double d = 0.001;
    for (int i = 0; i < 64; i++) t[i] = 0.01 + ((i / 4) % 2 ? d : -d);
    expect_near(measure_sum_sd(t, NULL, 64), 16 * d / sqrt(6.0) * 4, 1e-12, "alternating blocks");
    // Noise that alternates inside each block cancels in its sum: not the
    // noise of the total either.
    for (int i = 0; i < 64; i++) t[i] = 0.01 + (i % 2 ? d : -d);
    expect_near(measure_sum_sd(t, NULL, 64), 0, 1e-15, "alternating steps");
    // A jump between kinds (the cached run's reset steps) is not noise.
    unsigned char kind[64];
    for (int i = 0; i < 64; i++) t[i] = i < 40 ? 0.002 : 0.02, kind[i] = i >= 40;
    expect_near(measure_sum_sd(t, kind, 64), 0, 1e-15, "jump between kinds");
    if (!(measure_sum_sd(t, NULL, 64) > 0)) fail_msg("the same jump without kinds: expected a scatter");
    expect_near(measure_sum_sd(t, NULL, 2), 0, 0, "two steps");
}

// ----------------------------------------------------------------------------
// Words

static void test_words(void **state) {
    (void)state;
    char t[256];
    expect_text(measure_time_text(t, sizeof t, 3.7061), "3.71 s", "seconds");
    expect_text(measure_time_text(t, sizeof t, 0.04523), "45.2 ms", "milliseconds");
    expect_text(measure_time_text(t, sizeof t, 0.000812), "812 µs", "microseconds");
    expect_text(measure_time_text(t, sizeof t, 15.0), "15.0 s", "trailing zero kept");
    expect_text(measure_time_text(t, sizeof t, 1.5e-7), "150 ns", "nanoseconds");
    double s[] = {3.92, 3.61, 3.7061};
    expect_text(measure_spread_text(t, sizeof t, stats_of(s, 3)), "3.71 s (3.61 … 3.92 s)", "spread");
    double ms[] = {0.0009, 0.0011, 0.001};   // each end in its own unit
    expect_text(measure_spread_text(t, sizeof t, stats_of(ms, 3)), "1.00 ms (900 µs … 1.10 ms)", "spread across units");
    expect_text(measure_spread_text(t, sizeof t, stats_of(s, 1)), "3.92 s", "one run");
    expect_text(measure_compare_text(t, sizeof t, measure_ratio_of(6.43, 0.35, 3), MEASURE_FASTER, 0),
                "6.43 ± 0.35 x faster", "faster");
    expect_text(measure_compare_text(t, sizeof t, measure_ratio_of(6.43, 0.35, 3), MEASURE_FASTER, 1),
                "快 6.43 ± 0.35 倍", "faster, zh");
    // Slower: 1 / 0.5 = 2, the relative error kept: 0.05 / 0.5 · 2 = 0.2.
    expect_text(measure_compare_text(t, sizeof t, measure_ratio_of(0.5, 0.05, 3), MEASURE_SLOWER, 0),
                "2.00 ± 0.20 x slower", "slower");
    expect_text(measure_compare_text(t, sizeof t, measure_ratio_of(1.03, 0.08, 3), MEASURE_SAME, 0),
                "the same within noise (1.030 ± 0.080 x)", "same");
    expect_text(measure_compare_text(t, sizeof t, measure_ratio_of(1.03, 0.08, 3), MEASURE_SAME, 1),
                "在噪声范围内相同（1.030 ± 0.080 倍）", "same, zh");
    expect_text(measure_compare_text(t, sizeof t, measure_ratio_of(9.43, 0, 1), MEASURE_TOO_FEW, 0),
                "9.4 x (one run each: too few to conclude)", "too few");
    expect_text(measure_verdict_word(MEASURE_SAME, 0), "the same within noise", "verdict word");
    expect_text(measure_verdict_word(MEASURE_SLOWER, 1), "更慢", "verdict word, zh");
    MeasureMachine quiet = {0.8, 2}, busy = {3.1, 2}, unknown = {-1, 2};
    assert_int_equal(measure_busy(quiet), 0);
    assert_int_equal(measure_busy(busy), 1);
    assert_int_equal(measure_busy(unknown), 0);
    expect_text(measure_busy_text(t, sizeof t, quiet, 0), "", "quiet machine");
    if (!strstr(measure_busy_text(t, sizeof t, busy, 0), "machine busy: the load average at the start, 3.1, exceeds the 2 cores"))
        fail_msg("busy banner: %s", t);
    if (!strstr(measure_busy_text(t, sizeof t, busy, 1), "机器很忙：开始时的平均负载 3.1 超过了 2 个核"))
        fail_msg("busy banner, zh: %s", t);
}

// What a reader concludes from the printed text alone must be what v says
// (testutil's expect_verdict_agrees), in both languages.
static void expect_consistent(MeasureRatio r, MeasureVerdict v, const char *what) {
    static const int WANT[] = {'=', 'f', 's', 0};   // by MeasureVerdict
    for (int zh = 0; zh < 2; zh++) {
        char t[256];
        measure_compare_text(t, sizeof t, r, v, zh);
        int said = expect_verdict_agrees(t, what);
        if (v != MEASURE_TOO_FEW && said != WANT[v]) fail_msg("%s: \"%s\" read as '%c'", what, t, said ? said : '0');
    }
}

static void test_printed_figure_agrees_with_verdict(void **state) {
    (void)state;
    char t[256];
    // Five runs of each apart, one wild run of a: the verdict is faster, but
    // x = 1.04 / 1.00 with e = 1.04 · 0.615 = 0.64 (σ of a's 3.0): "1.04 ± 0.64
    // x faster" before.
    double a6[] = {1.02, 1.03, 3.0, 1.05, 1.04}, b6[] = {1.0, 1.0, 1.01, 0.99, 1.0};
    MeasureRatio r = measure_ratio(stats_of(a6, 5), stats_of(b6, 5));
    MeasureVerdict v = measure_verdict(a6, 5, b6, 5);
    assert_int_equal(v, MEASURE_FASTER);
    assert_int_equal(measure_agrees(r, v), 0);
    expect_text(measure_compare_text(t, sizeof t, r, v, 0), "1.04 x faster (the 5 runs of each lie apart)", "apart");
    expect_text(measure_compare_text(t, sizeof t, r, v, 1), "快 1.04 倍（两边各 5 次运行互不重叠）", "apart, zh");
    expect_text(measure_ratio_beside(t, sizeof t, r, v), "1.04", "cell beside faster");
    expect_text(measure_verdict_text(t, sizeof t, r, v, 0), "faster (runs apart)", "verdict cell");
    expect_text(measure_verdict_text(t, sizeof t, r, v, 1), "更快（运行互不重叠）", "verdict cell, zh");
    expect_consistent(r, v, "apart, faster");
    // The other way round: slower, its ratio printed as 1 / x above 1.
    MeasureRatio back = measure_ratio(stats_of(b6, 5), stats_of(a6, 5));
    assert_int_equal(measure_verdict(b6, 5, a6, 5), MEASURE_SLOWER);
    expect_text(measure_compare_text(t, sizeof t, back, MEASURE_SLOWER, 0), "1.04 x slower (the 5 runs of each lie apart)",
                "apart, slower");
    // Lesson 6.2's "0.77 ± 0.32 倍：更快": GQA's time over MHA's beside the
    // verdict of GQA against MHA. MHA 1.30 … 1.34; GQA 1.00 … 1.03 and one
    // wild fast run of 0.2 that widens e. The time ratio in its cell loses
    // the ± that crosses 1; the verdict speaks in its own direction.
    double mha[] = {1.30, 1.32, 1.31, 1.33, 1.34}, gqa[] = {0.2, 1.0, 1.01, 1.02, 1.03};
    MeasureRatio time = measure_ratio(stats_of(gqa, 5), stats_of(mha, 5));   // GQA's time / MHA's
    v = measure_verdict(mha, 5, gqa, 5);                                      // GQA against MHA
    assert_int_equal(v, MEASURE_FASTER);
    // x = 1.01 / 1.32 = 0.765, e = 0.765 · √(0.428² + 0.012²) = 0.328.
    expect_text(measure_ratio_text(t, sizeof t, time), "0.77 ± 0.33", "the old cell");
    expect_text(measure_ratio_beside(t, sizeof t, time, measure_verdict_mirror(v)), "0.77", "time cell");
    MeasureRatio speedup = measure_ratio(stats_of(mha, 5), stats_of(gqa, 5));
    expect_text(measure_compare_text(t, sizeof t, speedup, v, 1), "快 1.3 倍（两边各 5 次运行互不重叠）", "6.2, zh");
    expect_consistent(speedup, v, "6.2");
    // x - e above 1 but the runs overlap: the same within noise, and the
    // text says why instead of a ± that excludes 1.
    double a5[] = {1.5, 1.5, 1.5, 1.5, 0.9}, b5[] = {1.0, 1.0, 1.0, 1.0, 1.0};
    r = measure_ratio(stats_of(a5, 5), stats_of(b5, 5));
    v = measure_verdict(a5, 5, b5, 5);
    assert_int_equal(v, MEASURE_SAME);
    expect_text(measure_compare_text(t, sizeof t, r, v, 0), "the same within noise (1.5 x, but the runs overlap)",
                "overlap");
    expect_text(measure_compare_text(t, sizeof t, r, v, 1), "在噪声范围内相同（1.5 倍，但两边的运行时间有重叠）",
                "overlap, zh");
    expect_text(measure_verdict_text(t, sizeof t, r, v, 0), "the same within noise (runs overlap)", "overlap cell");
    // Many runs: the middle halves decided.
    double many_a[9] = {2.0, 2.1, 2.0, 2.05, 30.0, 2.0, 2.1, 2.02, 2.03};
    double many_b[9] = {1.0, 1.02, 2.2, 1.01, 1.0, 1.03, 1.0, 1.01, 1.02};
    r = measure_ratio(stats_of(many_a, 9), stats_of(many_b, 9));
    v = measure_verdict(many_a, 9, many_b, 9);
    assert_int_equal(v, MEASURE_FASTER);
    expect_text(measure_compare_text(t, sizeof t, r, v, 0), "2.0 x faster (the middle halves of 9 runs each lie apart)",
                "many");
    // Where x ± e says it, nothing changes.
    expect_text(measure_ratio_beside(t, sizeof t, measure_ratio_of(6.43, 0.35, 3), MEASURE_FASTER), "6.43 ± 0.35",
                "cell that agrees");
    expect_text(measure_verdict_text(t, sizeof t, measure_ratio_of(6.43, 0.35, 3), MEASURE_FASTER, 0), "faster",
                "verdict that agrees");
    // Constructed runs of every kind (a fixed generator, no clock): each
    // text agrees with its verdict.
    uint32_t seed = 12345;
    for (int k = 0; k < 2000; k++) {
        double a[9], b[9];
        int n = 2 + k % 8;
        double gap = 0.7 + (k % 13) * 0.05;
        for (int i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            double u = (seed >> 8) / 16777216.0;
            seed = seed * 1664525u + 1013904223u;
            double w = (seed >> 8) / 16777216.0;
            a[i] = gap * (1 + 0.05 * u + (u > 0.9 ? 2 * w : 0));   // now and then a wild run
            b[i] = 1 + 0.05 * w + (w < 0.1 ? 3 * u : 0);
        }
        char what[32];
        snprintf(what, sizeof what, "case %d", k);
        v = measure_verdict(a, n, b, n);
        expect_consistent(measure_ratio(stats_of(a, n), stats_of(b, n)), v, what);
        expect_consistent(measure_ratio(stats_of(b, n), stats_of(a, n)), measure_verdict(b, n, a, n), what);
    }
}

// Every timed lesson and the race, as a class runs them: each line that
// gives a verdict with a figure says with the figure what the words say.
// (Which verdict is the machine's business; that they agree is the code's.)
static void test_timed_lessons_print_agreeing_verdicts(void **state) {
    (void)state;
    static const char *const RUNS[] = {
        "lesson 2 --repeat 5",
        "lesson 4 --init random --preset tiny --repeat 5",
        "lesson 6.3 --repeat 5 --max-n 1024",
        "lesson 10 --init random --preset tiny --repeat 5",
        "race --steps 30",
        "bench --init random --preset tiny --steps 8,40 --repeat 5",
    };
    static const char *const LANGS[] = {"en", "zh"};
    for (size_t i = 0; i < sizeof RUNS / sizeof RUNS[0]; i++)
        for (int k = 0; k < 2; k++) {
            char args[160];
            snprintf(args, sizeof args, "%s --lang %s", RUNS[i], LANGS[k]);
            RunResult r = kvdemo_run(args);
            if (r.status != 0) fail_msg("kvdemo %s: exit %d: %s", args, r.status, r.err);
            int said = 0;
            for (const char *line = r.out; *line; line += strcspn(line, "\n"), line += *line == '\n') {
                size_t n = strcspn(line, "\n");
                char l[512];
                snprintf(l, sizeof l, "%.*s", (int)(n < sizeof l ? n : sizeof l - 1), line);
                // one run each (a race too close to call) is a verdict too: "too few to conclude"
                said += expect_verdict_agrees(line, args) != 0 || strstr(l, "too few to conclude") ||
                        strstr(l, "不足以下结论");
            }
            if (!said) fail_msg("kvdemo %s: no verdict with a figure in:\n%s", args, r.out);
            run_free(&r);
        }
}

// ----------------------------------------------------------------------------
// Through the trace

static void measure_busy_runs(Trace *tr) {
    double s[] = {0.010, 0.011, 0.019};
    trace_measure(tr, "step", s, 3);
}

static void compare_calm(Trace *tr) {
    double a[] = {9, 10, 11}, b[] = {0.9, 1.0, 1.1};
    trace_comparison(tr, "speedup", a, 3, b, 3, "with the cache", "使用缓存");
}

static void measure_per_token(Trace *tr) {
    double s[] = {0.010, 0.0101, 0.0102};
    trace_measure(tr, "per_token", s, 3);
}

static void test_trace_prints_the_spread(void **state) {
    (void)state;
    // A run's JSON name is shown in words: "per token", not per_token.
    char *w = traced(measure_per_token, 0, LANG_EN);
    if (!strstr(w, "  time (per token): 10.1 ms")) fail_msg("per_token in words: %s", w);
    free(w);
    w = traced(measure_per_token, 0, LANG_ZH);
    if (!strstr(w, "  耗时（每个 token）：10.1 ms")) fail_msg("per_token in words, zh: %s", w);
    free(w);
    w = traced(measure_per_token, 1, LANG_EN);
    if (!strstr(w, "\"name\":\"per_token\"")) fail_msg("per_token's JSON name: %s", w);
    free(w);
    char *t = traced(measure_busy_runs, 0, LANG_EN);
    if (!strstr(t, "  time (step): 11.0 ms (10.0 … 19.0 ms), median of 3 runs  !\n")) fail_msg("text: %s", t);
    if (!strstr(t, "disagree by more than 10%")) fail_msg("no warning under a noisy time: %s", t);
    free(t);
    t = traced(measure_busy_runs, 0, LANG_ZH);
    if (!strstr(t, "11.0 ms (10.0 … 19.0 ms)，3 次运行的中位数  !") || !strstr(t, "请再运行一次")) fail_msg("zh: %s", t);
    free(t);
    t = traced(measure_busy_runs, 1, LANG_EN);
    if (!strstr(t, "\"seconds\":0.011,") || !strstr(t, "\"min\":0.01,") || !strstr(t, "\"noisy\":true"))
        fail_msg("json: %s", t);
    free(t);
    t = traced(compare_calm, 0, LANG_EN);
    if (!strstr(t, "  with the cache: 10.0 ± 1.4 x faster\n")) fail_msg("comparison: %s", t);
    free(t);
    t = traced(compare_calm, 1, LANG_EN);
    if (!strstr(t, "\"value\":10,") || !strstr(t, "\"error\":1.41421356") || !strstr(t, "\"verdict\":\"faster\""))
        fail_msg("comparison json: %s", t);
    free(t);
}

static void rates(Trace *tr) {
    double x[] = {20.0, 31.0, 29.43};   // σ over 10% of the mean: marked
    trace_value_runs(tr, "tokens_per_s", x, 3, "tokens/s", "speed", "速度");
    double share[] = {82.04, 78.1, 85.3, 81.0, 82.5};   // within 10% of one another: no mark
    trace_value_runs(tr, "share", share, 5, "%", "share", "占比");
}

static void test_value_runs(void **state) {
    (void)state;
    char t[256];
    double x[] = {27.14, 31.0, 29.43};
    expect_text(measure_value_text(t, sizeof t, stats_of(x, 3), "tokens/s"), "29.4 tokens/s (27.1 … 31.0)", "rate");
    expect_text(measure_value_text(t, sizeof t, stats_of(x, 1), "tokens/s"), "27.1 tokens/s", "one run");
    double p[] = {82.04, 78.1, 85.3};
    expect_text(measure_value_text(t, sizeof t, stats_of(p, 3), "%"), "82.0% (78.1 … 85.3)", "a share");
    double big[] = {4408, 3199, 5333};
    expect_text(measure_value_text(t, sizeof t, stats_of(big, 3), "tokens/s"), "4408 tokens/s (3199 … 5333)",
                "four digits: whole");
    char *o = traced(rates, 0, LANG_EN);
    if (!strstr(o, "  speed: 29.4 tokens/s (20.0 … 31.0), median of 3 runs  !\n")) fail_msg("text: %s", o);
    if (!strstr(o, "  share: 82.0% (78.1 … 85.3), median of 5 runs\n")) fail_msg("text, calm runs: %s", o);
    free(o);
    o = traced(rates, 0, LANG_ZH);
    if (!strstr(o, "  速度：29.4 ")) fail_msg("zh: %s", o);
    if (!strstr(o, "，3 次运行的中位数  !")) fail_msg("zh: %s", o);
    free(o);
    o = traced(rates, 1, LANG_EN);
    if (!strstr(o, "\"name\":\"tokens_per_s\",\"value\":29.43,\"unit\":\"tokens/s\",\"min\":20,\"max\":31,"
                   "\"runs\":3,\"noisy\":true"))
        fail_msg("json: %s", o);
    free(o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_are_interleaved),
        cmocka_unit_test(test_rounds_take_turns),
        cmocka_unit_test(test_ratio_is_hyperfines),
        cmocka_unit_test(test_verdict_follows_intervals),
        cmocka_unit_test(test_race_concludes_beyond_races_apart),
        cmocka_unit_test(test_noisy_reads_the_middle_of_many_runs),
        cmocka_unit_test(test_sum_sd_ignores_trends),
        cmocka_unit_test(test_words),
        cmocka_unit_test(test_printed_figure_agrees_with_verdict),
        cmocka_unit_test(test_timed_lessons_print_agreeing_verdicts),
        cmocka_unit_test(test_trace_prints_the_spread),
        cmocka_unit_test(test_value_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
