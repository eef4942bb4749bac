// measure — warm-up, interleaved runs, ratios as x ± e, and a verdict the
// intervals support (measure.h).
#include "measure.h"

#include "pool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int measure_interleaved(double *a_s, double *b_s, int warmup, int runs, MeasureRun a, void *actx, MeasureRun b,
                        void *bctx) {
    double ignored;
    for (int i = 0; i < warmup + runs; i++) {
        double *sa = i < warmup ? &ignored : &a_s[i - warmup];
        int rc = a(actx, sa);
        if (rc) return rc;
        if (!b) continue;
        double *sb = i < warmup ? &ignored : &b_s[i - warmup];
        if ((rc = b(bctx, sb))) return rc;
    }
    return 0;
}

int measure_rounds(double *const *samples, int arms, int warmup, int runs, const MeasureRun *run, void *const *ctx) {
    double ignored;
    for (int i = 0; i < warmup + runs; i++)
        for (int k = 0; k < arms; k++) {
            int rc = run[k](ctx[k], i < warmup ? &ignored : &samples[k][i - warmup]);
            if (rc) return rc;
        }
    return 0;
}

// Digits after the point for e to two significant digits (0 .. 3).
static int decimals_of(double e) {
    int d = 1 - (int)floor(log10(e));
    return d < 0 ? 0 : d > 3 ? 3 : d;
}

MeasureRatio measure_ratio_of(double x, double e, int n) {
    MeasureRatio r = {.x = x, .e = n >= 2 ? e : 0, .n = n};
    if (!(x > 0)) r.decimals = 0;
    else if (n < 2) r.decimals = decimals_of(x);   // two significant digits of x itself
    else if (r.e > 0) r.decimals = decimals_of(r.e);
    else r.decimals = 3;                           // identical runs: as many as is ever printed
    return r;
}

MeasureRatio measure_ratio(Stats a, Stats b) {
    int n = a.n < b.n ? a.n : b.n;
    double x = b.median > 0 ? a.median / b.median : 0;
    double e = a.mean > 0 && b.mean > 0 ? x * hypot(a.sd / a.mean, b.sd / b.mean) : 0;
    return measure_ratio_of(x, e, n);
}

MeasureVerdict measure_verdict_ratio(MeasureRatio r) {
    if (r.n < 2) return MEASURE_TOO_FEW;
    if (r.x - r.e > 1) return MEASURE_FASTER;
    if (r.x + r.e < 1) return MEASURE_SLOWER;
    return MEASURE_SAME;
}

// The figure beside verdict v, in v's direction: slower gives 1 / x (b took
// 1 / x as long) with the same relative error, so that the number is at least 1.
static MeasureRatio in_direction(MeasureRatio r, MeasureVerdict v) {
    if (v != MEASURE_SLOWER || !(r.x > 0)) return r;
    double inv = 1 / r.x;
    return measure_ratio_of(inv, r.e * inv * inv, r.n);
}

// Slower is read from 1 / x ± e / x², whose lower end 1 / x - e / x² lies
// above 1 only when x - e > x² (which gives x + e < 1 as well).
MeasureVerdict measure_verdict_race(MeasureRatio r) {
    MeasureVerdict v = measure_verdict_ratio(r);
    if (v == MEASURE_FASTER && !(r.x - r.e > MEASURE_RACE_FLOOR)) return MEASURE_TOO_FEW;
    if (v == MEASURE_SLOWER && !(r.x + r.e < 1 / MEASURE_RACE_FLOOR)) return MEASURE_TOO_FEW;
    return v;
}

int measure_agrees(MeasureRatio r, MeasureVerdict v) {
    if (v == MEASURE_TOO_FEW) return 1;
    MeasureVerdict said = measure_verdict_ratio(in_direction(r, v));
    return v == MEASURE_SLOWER ? said == MEASURE_FASTER : said == v;
}

MeasureVerdict measure_verdict_mirror(MeasureVerdict v) {
    return v == MEASURE_FASTER ? MEASURE_SLOWER : v == MEASURE_SLOWER ? MEASURE_FASTER : v;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The interval of n runs the verdict reads: min … max, or from
// MEASURE_MANY runs on the middle half. Returns 0, or -1 out of memory.
static int interval(double *lo, double *hi, const double *x, int n) {
    double small[64], *s = n <= 64 ? small : malloc(sizeof(double) * (size_t)n);
    if (!s) return -1;
    memcpy(s, x, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, compare_double);
    int cut = n >= MEASURE_MANY ? (n - 1) / 4 : 0;
    *lo = s[cut], *hi = s[n - 1 - cut];
    if (s != small) free(s);
    return 0;
}

int measure_noisy(const double *x, int n) {
    if (n < MEASURE_MANY) return stats_noisy(stats_of(x, n));
    double lo, hi;
    return !interval(&lo, &hi, x, n) && hi > 1.10 * lo;
}

MeasureVerdict measure_verdict(const double *a, int na, const double *b, int nb) {
    MeasureVerdict v = measure_verdict_ratio(measure_ratio(stats_of(a, na), stats_of(b, nb)));
    double alo, ahi, blo, bhi;
    if (v == MEASURE_TOO_FEW) return v;
    if (interval(&alo, &ahi, a, na) || interval(&blo, &bhi, b, nb)) return MEASURE_SAME;   // no memory: no claim
    int apart_decides = na >= MEASURE_SEPARATE && nb >= MEASURE_SEPARATE;
    if (bhi < alo && (v == MEASURE_FASTER || apart_decides)) return MEASURE_FASTER;
    if (blo > ahi && (v == MEASURE_SLOWER || apart_decides)) return MEASURE_SLOWER;
    return MEASURE_SAME;
}

double measure_sum_sd(const double *t, const unsigned char *kind, int n) {
    int b = n / MEASURE_BLOCKS > 1 ? n / MEASURE_BLOCKS : 1;   // steps per block
    double sq = 0, prev2 = 0, prev1 = 0;
    int m = 0, have = 0;   // have: full blocks in a row of the current kind
    for (int i = 0; i < n;) {
        if (i > 0 && kind && kind[i - 1] != kind[i]) have = 0;   // another kind of step begins
        int j = i;
        double sum = 0;
        while (j < n && j - i < b && (!kind || kind[j] == kind[i])) sum += t[j++];
        if (j - i < b) {   // the kind ended inside the block: it takes no part
            have = 0;
            i = j;
            continue;
        }
        if (have >= 2) {
            double d2 = prev2 - 2 * prev1 + sum;
            sq += d2 * d2;
            m++;
        }
        prev2 = prev1, prev1 = sum, have++;
        i = j;
    }
    if (!m) return 0;
    double sd_block = sqrt(sq / m / 6);   // var(S[k-1] - 2 S[k] + S[k+1]) = (1 + 4 + 1) σ²
    return sd_block * sqrt((double)n / b);
}

// The one-minute load average from /proc/loadavg, or -1.
static double load_average(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    double load = -1;
    if (!f) return -1;
    if (fscanf(f, "%lf", &load) != 1) load = -1;
    fclose(f);
    return load;
}

MeasureMachine measure_machine(void) {
    MeasureMachine m = {load_average(), pool_cores()};
    return m;
}

int measure_busy(MeasureMachine m) { return m.cores > 0 && m.load > m.cores; }

// v (> 0) to three significant digits, trailing zeros kept: 15.0, 2.20, 812.
static void three_digits(char *out, size_t size, double v) {
    int d = v > 0 ? 2 - (int)floor(log10(v)) : 2;
    if (d < 0) d = 0;
    snprintf(out, size, "%.*f", d, v);
}

// The unit of a time of s seconds, and what s is multiplied by.
static const char *time_unit(double s, double *k) {
    if (s >= 1) return *k = 1, "s";
    if (s >= 1e-3) return *k = 1e3, "ms";
    if (s >= 1e-6) return *k = 1e6, "µs";
    return *k = 1e9, "ns";
}

const char *measure_time_text(char *out, size_t size, double s) {
    double k;
    const char *unit = time_unit(s, &k);
    char v[24];
    three_digits(v, sizeof v, s * k);
    snprintf(out, size, "%s %s", v, unit);
    return out;
}

const char *measure_spread_text(char *out, size_t size, Stats s) {
    char med[40], lo[40], hi[40];
    measure_time_text(med, sizeof med, s.median);
    if (s.n < 2) {
        snprintf(out, size, "%s", med);
        return out;
    }
    // "(3.61 … 3.92 s)" when both ends have one unit, else "(900 µs … 1.10 ms)".
    double kmin, kmax;
    const char *umin = time_unit(s.min, &kmin), *umax = time_unit(s.max, &kmax);
    if (umin == umax) {
        three_digits(lo, sizeof lo, s.min * kmin);
        three_digits(hi, sizeof hi, s.max * kmax);
        snprintf(out, size, "%s (%s … %s %s)", med, lo, hi, umax);
    } else {
        measure_time_text(lo, sizeof lo, s.min);
        measure_time_text(hi, sizeof hi, s.max);
        snprintf(out, size, "%s (%s … %s)", med, lo, hi);
    }
    return out;
}

const char *measure_value_text(char *out, size_t size, Stats s, const char *unit) {
    char med[40], lo[40], hi[40];
    const char *gap = unit[0] == '%' || unit[0] == '\0' ? "" : " ";
    three_digits(med, sizeof med, s.median);
    if (s.n < 2) {
        snprintf(out, size, "%s%s%s", med, gap, unit);
        return out;
    }
    three_digits(lo, sizeof lo, s.min);
    three_digits(hi, sizeof hi, s.max);
    snprintf(out, size, "%s%s%s (%s … %s)", med, gap, unit, lo, hi);
    return out;
}

// v rounded to the place of ref's second significant digit when that place
// is 10 or more (303 -> 300 beside itself; 1021 -> 1000 beside ± 1353),
// so that a ratio of a hundred or more keeps two significant digits too.
static double two_digits_of(double v, double ref) {
    if (!(ref >= 100)) return v;
    double place = pow(10, floor(log10(ref)) - 1);
    return round(v / place) * place;
}

const char *measure_ratio_text(char *out, size_t size, MeasureRatio r) {
    double ref = r.n < 2 || !(r.e > 0) ? r.x : r.e;
    double x = r.decimals ? r.x : two_digits_of(r.x, ref);
    double e = r.decimals ? r.e : two_digits_of(r.e, ref);
    if (r.n < 2) snprintf(out, size, "%.*f", r.decimals, x);
    else snprintf(out, size, "%.*f ± %.*f", r.decimals, x, r.decimals, e);
    return out;
}

const char *measure_ratio_alone(char *out, size_t size, double x) {
    if (x >= 100) {
        snprintf(out, size, "%.0f", two_digits_of(x, x));
        return out;
    }
    for (int d = x > 0 ? decimals_of(x) : 0;; d++) {
        snprintf(out, size, "%.*f", d, x);
        if (d >= 6 || x == 1 || strtod(out, NULL) != 1) break;
    }
    return out;
}

const char *measure_ratio_beside(char *out, size_t size, MeasureRatio r, MeasureVerdict v) {
    if (measure_agrees(r, v)) return measure_ratio_text(out, size, r);
    measure_ratio_alone(out, size, r.x);
    return out;
}

// Why the verdict stands where x ± e does not say it: the runs' intervals
// (measure_verdict), all runs or from MEASURE_MANY their middle halves.
static const char *reason_text(char *out, size_t size, MeasureVerdict v, int n, int zh) {
    if (v == MEASURE_SAME) snprintf(out, size, zh ? "，但两边的运行时间有重叠" : ", but the runs overlap");
    else if (n >= MEASURE_MANY)
        snprintf(out, size, zh ? "（两边各 %d 次运行的中间一半互不重叠）" : " (the middle halves of %d runs each lie apart)", n);
    else snprintf(out, size, zh ? "（两边各 %d 次运行互不重叠）" : " (the %d runs of each lie apart)", n);
    return out;
}

const char *measure_compare_text(char *out, size_t size, MeasureRatio r, MeasureVerdict v, int zh) {
    char x[64], why[96] = "";
    int agrees = measure_agrees(r, v);
    r = in_direction(r, v);
    if (agrees) measure_ratio_text(x, sizeof x, r);
    else measure_ratio_alone(x, sizeof x, r.x), reason_text(why, sizeof why, v, r.n, zh);
    switch (v) {
    case MEASURE_FASTER: snprintf(out, size, zh ? "快 %s 倍%s" : "%s x faster%s", x, why); break;
    case MEASURE_SLOWER: snprintf(out, size, zh ? "慢 %s 倍%s" : "%s x slower%s", x, why); break;
    case MEASURE_SAME:
        snprintf(out, size, zh ? "在噪声范围内相同（%s 倍%s）" : "the same within noise (%s x%s)", x, why);
        break;
    case MEASURE_TOO_FEW:
        snprintf(out, size, zh ? "%s 倍（每种只运行了一次，不足以下结论）" : "%s x (one run each: too few to conclude)", x);
        break;
    }
    return out;
}

const char *measure_verdict_word(MeasureVerdict v, int zh) {
    switch (v) {
    case MEASURE_FASTER: return zh ? "更快" : "faster";
    case MEASURE_SLOWER: return zh ? "更慢" : "slower";
    case MEASURE_SAME: return zh ? "在噪声范围内相同" : "the same within noise";
    case MEASURE_TOO_FEW: break;
    }
    return zh ? "运行次数太少，无法判断" : "too few runs to say";
}

const char *measure_noisy_text(int zh) {
    return zh ? "! 标 ! 的时间，各次运行相差超过 10%：机器当时很忙，请再运行一次"
              : "! the runs of a time marked ! disagree by more than 10%: the machine was busy; rerun";
}

const char *measure_busy_text(char *out, size_t size, MeasureMachine m, int zh) {
    if (!measure_busy(m)) {
        if (size) out[0] = '\0';
        return out;
    }
    snprintf(out, size,
             zh ? "! 机器很忙：开始时的平均负载 %.1f 超过了 %d 个核，其他程序在争用处理器；\n"
                  "  这时测的时间会比空闲的机器上更慢、更分散"
                : "! machine busy: the load average at the start, %.1f, exceeds the %d cores; other programs\n"
                  "  share them, so the times are slower and wider than on a quiet machine",
             m.load, m.cores);
    return out;
}

const char *measure_verdict_text(char *out, size_t size, MeasureRatio r, MeasureVerdict v, int zh) {
    const char *word = measure_verdict_word(v, zh);
    if (measure_agrees(r, v)) snprintf(out, size, "%s", word);
    else if (v == MEASURE_SAME) snprintf(out, size, zh ? "%s（运行有重叠）" : "%s (runs overlap)", word);
    else snprintf(out, size, zh ? "%s（运行互不重叠）" : "%s (runs apart)", word);
    return out;
}
