// bench — `kvdemo bench`: the chapter's exercise, the cache against no
// cache over growing lengths, timed so that a class can trust it; the
// machine's limits beside it; a chart as SVG (benchsvg.h).
#ifndef KVDEMO_BENCH_H
#define KVDEMO_BENCH_H

#include "options.h"
#include "trace.h"

// The lengths timed by default: a lesson's worth, inside the shipped
// model's context of 256 with the 6-token prompt (a minute or less).
#define BENCH_DEFAULT_LENGTHS "16,32,64,128,250"

// Runs the bench as the options ask (--steps LIST, --repeat, --csv, --svg,
// --train, --format, ...). Returns 0, or an exit status (2 usage, 1
// failure) after one line on stderr.
int bench_command(const Options *opt, Trace *tr);

#endif
