// timer — wall-clock time around the arithmetic (stats.h sums up repeats).
#include "timer.h"

#include <time.h>

double timer_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
