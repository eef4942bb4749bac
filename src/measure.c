// measure — warm-up, interleaved runs, ratios as x ± e, and a verdict the
// intervals support (measure.h).
#include "measure.h"

#include "pool.h"

#include <math.h>
#include <stdio.h>

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

MeasureVerdict measure_verdict(Stats a, Stats b) {
    MeasureVerdict v = measure_verdict_ratio(measure_ratio(a, b));
    if (v == MEASURE_FASTER && !(b.max < a.min)) return MEASURE_SAME;
    if (v == MEASURE_SLOWER && !(b.min > a.max)) return MEASURE_SAME;
    return v;
}

double measure_sum_sd(const double *t, const unsigned char *kind, int n) {
    double sq = 0;
    int m = 0;
    for (int i = 1; i + 1 < n; i++) {
        if (kind && (kind[i - 1] != kind[i] || kind[i + 1] != kind[i])) continue;
        double d2 = t[i - 1] - 2 * t[i] + t[i + 1];
        sq += d2 * d2;
        m++;
    }
    if (!m) return 0;
    double sd_step = sqrt(sq / m / 6);   // var(t[i-1] - 2 t[i] + t[i+1]) = (1 + 4 + 1) σ²
    return sd_step * sqrt((double)n);
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

const char *measure_time_text(char *out, size_t size, double s) {
    if (s >= 1) snprintf(out, size, "%.3g s", s);
    else if (s >= 1e-3) snprintf(out, size, "%.3g ms", s * 1e3);
    else snprintf(out, size, "%.3g µs", s * 1e6);
    return out;
}

const char *measure_spread_text(char *out, size_t size, Stats s) {
    char med[32], lo[32], hi[32];
    measure_time_text(med, sizeof med, s.median);
    if (s.n < 2) {
        snprintf(out, size, "%s", med);
        return out;
    }
    // min and max in the unit of max, the unit printed once.
    double k = s.max >= 1 ? 1 : s.max >= 1e-3 ? 1e3 : 1e6;
    const char *unit = s.max >= 1 ? "s" : s.max >= 1e-3 ? "ms" : "µs";
    snprintf(lo, sizeof lo, "%.3g", s.min * k);
    snprintf(hi, sizeof hi, "%.3g", s.max * k);
    snprintf(out, size, "%s (%s … %s %s)", med, lo, hi, unit);
    return out;
}

const char *measure_ratio_text(char *out, size_t size, MeasureRatio r) {
    if (r.n < 2) snprintf(out, size, "%.*f", r.decimals, r.x);
    else snprintf(out, size, "%.*f ± %.*f", r.decimals, r.x, r.decimals, r.e);
    return out;
}

const char *measure_compare_text(char *out, size_t size, MeasureRatio r, MeasureVerdict v, int zh) {
    char x[64];
    if (v == MEASURE_SLOWER && r.x > 0) {   // b took 1 / x as long: say how many times slower
        double inv = 1 / r.x;
        r = measure_ratio_of(inv, r.e * inv * inv, r.n);   // the same relative error
    }
    measure_ratio_text(x, sizeof x, r);
    switch (v) {
    case MEASURE_FASTER: snprintf(out, size, zh ? "快 %s 倍" : "%s x faster", x); break;
    case MEASURE_SLOWER: snprintf(out, size, zh ? "慢 %s 倍" : "%s x slower", x); break;
    case MEASURE_SAME:
        snprintf(out, size, zh ? "在噪声范围内相同（%s 倍）" : "the same within noise (%s x)", x);
        break;
    case MEASURE_TOO_FEW:
        snprintf(out, size, zh ? "%s 倍（每种只运行了一次，不足以下结论）" : "%s x (one run each: too few to conclude)", x);
        break;
    }
    return out;
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
             zh ? "! 机器很忙：开始时的平均负载 %.1f 超过了 %d 个核，其他程序在争用处理器；下面的时间会更慢、更分散"
                : "! machine busy: the load average at the start, %.1f, exceeds the %d cores; other programs share "
                  "them, so the times below are slower and wider than on a quiet machine",
             m.load, m.cores);
    return out;
}
