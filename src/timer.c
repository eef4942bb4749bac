// timer — wall-clock time around the arithmetic, and the median of repeats.
#include "timer.h"

#include <stdlib.h>
#include <time.h>

double timer_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double timer_median(double *samples, int n) {
    qsort(samples, (size_t)n, sizeof *samples, compare_double);
    return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}
