// stats — mean ± σ, min … max, noise and honest ratios of repeated timings.
#include "stats.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double stats_median(double *samples, int n) {
    assert(n >= 1);
    qsort(samples, (size_t)n, sizeof *samples, compare_double);
    return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

Stats stats_of(const double *samples, int n) {
    Stats s = {.n = n, .min = INFINITY, .max = -INFINITY};
    if (n <= 0) return s;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        sum += samples[i];
        if (samples[i] < s.min) s.min = samples[i];
        if (samples[i] > s.max) s.max = samples[i];
    }
    s.mean = sum / n;
    double sq = 0;
    for (int i = 0; i < n; i++) sq += (samples[i] - s.mean) * (samples[i] - s.mean);
    s.sd = n > 1 ? sqrt(sq / (n - 1)) : 0;
    // The median of a sorted copy (the caller's order is kept).
    double small[64], *sorted = n <= 64 ? small : malloc(sizeof(double) * (size_t)n);
    if (!sorted) {
        s.median = s.mean;
        return s;
    }
    memcpy(sorted, samples, sizeof(double) * (size_t)n);
    s.median = stats_median(sorted, n);
    if (sorted != small) free(sorted);
    return s;
}

int stats_noisy(Stats s) {
    if (s.n < 2 || !(s.mean > 0)) return 0;
    return s.sd > 0.10 * s.mean || s.max > 1.5 * s.min;
}

double stats_ratio(Stats a, Stats b, int *decimals) {
    double r = b.mean > 0 ? a.mean / b.mean : 0;
    int d;
    if (!(r > 0)) {
        d = 0;
    } else if (a.n < 2 || b.n < 2) {
        d = 1 - (int)floor(log10(r));   // two significant digits
    } else {
        double u = hypot(a.sd / a.mean, b.sd / b.mean) * r;
        d = u > 0 ? -(int)floor(log10(u)) : 3;
    }
    *decimals = d < 0 ? 0 : d > 3 ? 3 : d;
    return r;
}
