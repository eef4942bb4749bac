// race_svg — lesson 10's race replayed in the lesson page (--format html):
// the two runs' bars fill as the runs went, from the time each recorded at
// every step, so that the race plays without a terminal. It plays when its
// slide is shown; closing and opening its summary plays it again
// (<details>, no script needed).
#ifndef KVDEMO_RACE_SVG_H
#define KVDEMO_RACE_SVG_H

#include "buf.h"

// Appends the replay to b: elapsed[0] without the cache, elapsed[1] with it,
// (steps) seconds from the start of the run to the end of each step.
void race_svg(Buf *b, const double *const elapsed[2], int steps);

#endif
