// timer — wall-clock time around the arithmetic (stats.h sums up repeats).
#ifndef KVDEMO_TIMER_H
#define KVDEMO_TIMER_H

// Seconds on a monotonic clock (only differences mean anything).
double timer_now(void);

#endif
