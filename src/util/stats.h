// stats — what repeated timings say: mean ± σ, min … max, whether the spread
// is too large to trust, and a ratio printed with no more digits than the
// spread allows (hyperfine's report is the model).
#ifndef KVDEMO_STATS_H
#define KVDEMO_STATS_H

typedef struct {
    int n;
    double mean, sd;     // sd: the sample standard deviation (0 when n = 1)
    double min, max, median;
} Stats;

// Of n >= 1 samples (left in their order).
Stats stats_of(const double *samples, int n);
// The median of n >= 1 samples; sorts them in place.
double stats_median(double *samples, int n);

// 1 when the runs disagree too much for their mean to be trusted: σ above
// 10% of the mean, or the slowest run above 1.5 x the fastest.
int stats_noisy(Stats s);

// a.mean / b.mean, and in *decimals (0 .. 3) how many digits after the point
// its uncertainty allows: the ratio's relative uncertainty is that of a and
// b combined (σ/mean of each, in quadrature); the last digit printed is the
// first one the uncertainty reaches. With a single run of either, two
// significant digits.
double stats_ratio(Stats a, Stats b, int *decimals);

#endif
