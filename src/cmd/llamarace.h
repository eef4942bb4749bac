// llamarace — `kvdemo race --model FILE` when FILE is a LLaMA-style model
// (llamacmd.h tells it by its magic): the article's generate without and
// with the cache, the same seed, race.c's table and verdict (the same text,
// the speed-up with its ±), the two runs one after the other.
#ifndef KVDEMO_LLAMARACE_H
#define KVDEMO_LLAMARACE_H

#include "options.h"
#include "trace.h"

// --prompt TEXT (one, default "ROMEO:"), --steps N (default 256, the
// context permitting), --temperature (default 0.8, top-p 0.95), --seed,
// --threads, --format. Returns the exit status.
int llamarace_run(const Options *opt, Trace *tr);

#endif
