// timer — wall-clock time around the arithmetic, and the median of repeats.
#ifndef KVDEMO_TIMER_H
#define KVDEMO_TIMER_H

// Seconds on a monotonic clock (only differences mean anything).
double timer_now(void);
// The median of n samples; sorts them in place.
double timer_median(double *samples, int n);

#endif
