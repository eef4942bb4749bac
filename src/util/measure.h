// measure — one way to time what a lesson or a command prints, so that a
// class can trust a time or a ratio of times:
//
//   - a warm-up run of each arm first, not counted (pages, caches, clocks);
//   - several counted runs (MEASURE_RUNS unless --repeat says otherwise),
//     never a single one by default;
//   - the two arms of a comparison interleaved, A B A B ..., so that a busy
//     moment of the machine falls on both and not on one;
//   - a time printed as its median with min … max ("3.71 s (3.61 … 3.92 s)");
//   - a ratio printed as x ± e the way hyperfine prints it, e to two
//     significant digits and x to the same decimal;
//   - a mark and a warning when the runs disagree by more than stats_noisy's
//     share or when the load average at the start exceeds the cores;
//   - the conclusion chosen from the intervals: faster, slower, or the same
//     within noise — never a fixed sentence.
//
// The statistics come from stats.h (mean, σ, min, max, median, noisy); this
// file adds the running, the ratio's error, the verdict and the words.
#ifndef KVDEMO_MEASURE_H
#define KVDEMO_MEASURE_H

#include "stats.h"

#include <stddef.h>

enum {
    MEASURE_RUNS = 5,   // counted runs of each arm by default
    MEASURE_WARMUP = 1, // uncounted runs of each arm before them
    MEASURE_BLOCKS = 16,// blocks a run's steps are cut into (measure_sum_sd)
    MEASURE_MANY = 8    // from this many runs the verdict sets aside each arm's outer quarters
    ,MEASURE_SEPARATE = 5 // from this many runs intervals apart decide alone, whatever e
};

// One run of an arm: does the work and writes in *seconds how long the part
// that counts took (a run may time only its arithmetic, not its printing).
// Returns 0, or nonzero to stop the measurement (out of memory, interrupted).
typedef int (*MeasureRun)(void *ctx, double *seconds);

// Runs arm a (and arm b unless it is NULL) warmup times each, then runs
// times each, interleaved a, b, a, b, ...; the counted times go to
// a_s[runs] and b_s[runs]. Returns 0, or the first nonzero a run returned.
int measure_interleaved(double *a_s, double *b_s, int warmup, int runs, MeasureRun a, void *actx, MeasureRun b,
                        void *bctx);

// The same for any number of arms: warmup uncounted rounds, then runs
// rounds of arm 0, 1, ..., arms - 1 in turn; arm i's counted times go to
// samples[i][runs]. Returns 0, or the first nonzero a run returned.
int measure_rounds(double *const *samples, int arms, int warmup, int runs, const MeasureRun *run, void *const *ctx);

// 1 when n runs disagree too much to be trusted: stats_noisy (σ above 10%
// of the mean, or the slowest above 1.5 x the fastest), or from
// MEASURE_MANY runs on the middle half: its ends more than 10% apart (a
// hundred runs of a few hundred nanoseconds always hold a stray one).
int measure_noisy(const double *x, int n);

// How much longer arm a took than arm b: x = median(a) / median(b), and its
// error as hyperfine computes it, e = x · √((σa/μa)² + (σb/μb)²).
// decimals: how many digits after the point print x and e, e to two
// significant digits (0 .. 3). With a single run of either arm e is 0 and x
// gets two significant digits.
typedef struct {
    double x, e;
    int decimals;
    int n;          // the fewer runs of the two arms
} MeasureRatio;
MeasureRatio measure_ratio(Stats a, Stats b);
// The same from a ratio x and its error e known some other way (n runs).
MeasureRatio measure_ratio_of(double x, double e, int n);

// What the measurement supports about arm b (nb runs) against arm a (na):
// b is faster when the runs' intervals do not overlap, b's below a's, and
// either x - e > 1 or each arm has MEASURE_SEPARATE runs or more (five runs
// of each all apart happen by chance 2 times in 252); slower the other way
// round; else the same within noise. The interval is min … max, or with
// MEASURE_MANY runs or more the middle half (one stray run among a hundred
// always overlaps). One run: too few.
typedef enum {
    MEASURE_SAME,     // the intervals overlap: the same within noise
    MEASURE_FASTER,   // b is faster
    MEASURE_SLOWER,   // b is slower
    MEASURE_TOO_FEW   // one run of an arm: no spread, no conclusion
} MeasureVerdict;
MeasureVerdict measure_verdict(const double *a, int na, const double *b, int nb);
// The verdict of a ratio alone (when there are no separate runs): from x ± e.
MeasureVerdict measure_verdict_ratio(MeasureRatio r);
// The verdict of a race: one run of each arm, e from the scatter of the
// steps within each run (measure_sum_sd). A whole run slowed by the machine
// moves all its steps alike and e cannot see it: races of the char GPT a
// few minutes apart have read 4.9 x and 11.5 x, 2.3 times apart. So one
// race says faster only when x - e clears MEASURE_RACE_FLOOR, slower only
// when x + e lies under 1 / MEASURE_RACE_FLOOR; else too few (one run
// each), and the same within noise when x ± e holds 1.
#define MEASURE_RACE_FLOOR 2.5
MeasureVerdict measure_verdict_race(MeasureRatio r);
// 1 when x ± e says what v says: faster with x - e > 1, slower with
// 1 / x ± e / x² (as slower prints it) above 1, the same with 1 inside x ± e,
// or v too few. A reader who sees "1.3 ± 3.8" beside "faster" sees a
// contradiction even when five runs of each lying apart support the
// verdict: 0 then, and the texts below give the reason instead of the ±.
int measure_agrees(MeasureRatio r, MeasureVerdict v);
// The verdict of arm a against arm b from v, b's against a (faster and
// slower swap): for a ratio printed the other way round, b's time over a's.
MeasureVerdict measure_verdict_mirror(MeasureVerdict v);

// The σ of a sum of n per-step times t[0..n) of one run, from the steps'
// own scatter. The run is cut into blocks of n / MEASURE_BLOCKS steps of
// one kind (kind[i], e.g. cached or not; NULL: all alike), so that a busy
// stretch of several steps counts as the noise it is; for each three
// consecutive blocks of a kind the second difference of their sums,
// S[k-1] - 2 S[k] + S[k+1], removes any trend in the step's cost (a longer
// context), and its variance is 6 σ² for independent blocks; the sum's σ is
// σ √(blocks). Returns 0 when no kind fills three blocks.
double measure_sum_sd(const double *t, const unsigned char *kind, int n);

// The machine at the start of a measurement: its one-minute load average
// (-1 when it cannot be read) and its cores.
typedef struct {
    double load;
    int cores;
} MeasureMachine;
MeasureMachine measure_machine(void);
// 1 when other programs were already running on every core.
int measure_busy(MeasureMachine m);

// Words, English or Chinese (zh = 1), written to out and returned:
// "3.71 s", "15.0 s", "45.2 ms", "812 µs", "150 ns" (three significant digits);
const char *measure_time_text(char *out, size_t size, double seconds);
// "3.71 s (3.61 … 3.92 s)" — the median, then min … max; one run: "3.71 s";
const char *measure_spread_text(char *out, size_t size, Stats s);
// A quantity measured once a run, as its median then min … max, three
// significant digits: "29.4 tokens/s (27.1 … 31.0)", "82.0% (78.1 … 85.3)"
// (a unit "%" follows the number); one run: "29.4 tokens/s";
const char *measure_value_text(char *out, size_t size, Stats s, const char *unit);
// "6.4 ± 0.3";
const char *measure_ratio_text(char *out, size_t size, MeasureRatio r);
// "6.4 ± 0.3 x faster", "1.7 ± 0.2 x slower" (1 / x, so that the number
// is at least 1), "the same within noise (1.03 ± 0.08 x)", or
// "9.4 x (one run each: too few to conclude)". Where x ± e does not say
// what v says (measure_agrees), the reason in words instead of the ±:
// "1.3 x faster (the 5 runs of each lie apart)", "the same within noise
// (1.5 x, but the runs overlap)"; x then with the digits that show on
// which side of 1 it lies ("1.04", not "1.0");
const char *measure_compare_text(char *out, size_t size, MeasureRatio r, MeasureVerdict v, int zh);
// x alone, two significant digits, and more while it would print as 1
// ("1.04", not "1.0"; "0.996", not "1.00"): the side of 1 it lies on is
// what a verdict beside it says;
const char *measure_ratio_alone(char *out, size_t size, double x);
// The ratio for a table cell beside verdict v: "6.4 ± 0.3" when x ± e
// agrees with v, else x alone as measure_compare_text gives it ("1.3").
const char *measure_ratio_beside(char *out, size_t size, MeasureRatio r, MeasureVerdict v);
// "faster", "slower", "the same within noise", "too few runs to say" (zh:
// 更快, 更慢, 在噪声范围内相同, 运行次数太少，无法判断): the verdict alone.
const char *measure_verdict_word(MeasureVerdict v, int zh);
// The verdict word with its reason when x ± e does not give it: "faster
// (runs apart)", "the same within noise (runs overlap)"; else the word.
const char *measure_verdict_text(char *out, size_t size, MeasureRatio r, MeasureVerdict v, int zh);
// The warning under a line marked "!" (runs that disagree), and the banner
// of a busy machine ("" when m is not busy).
const char *measure_noisy_text(int zh);
const char *measure_busy_text(char *out, size_t size, MeasureMachine m, int zh);

#endif
