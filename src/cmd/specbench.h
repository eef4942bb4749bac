// specbench — `kvdemo bench --draft FILE [--gamma K]` and `kvdemo race
// --draft FILE [--gamma K]`, for the char GPT and for the LLaMA-style model
// (--model LLAMA): speculative decoding against plain cached decoding,
// greedy, so that both arms write the target's own text (specarms.h).
#ifndef KVDEMO_SPECBENCH_H
#define KVDEMO_SPECBENCH_H

#include "options.h"
#include "trace.h"

// bench --draft: for K = --gamma (else each K of 1 .. 8), --repeat runs of
// each arm (default MEASURE_RUNS) after a warm-up, interleaved; a row per K
// with α, tokens a round, both times (median, min … max), the speed-up
// x ± e and measure_verdict's word. --steps N (one length, default 200),
// --prompt, --threads, --format. Returns the exit status.
int specbench_bench(const Options *opt, Trace *tr);

// race --draft: one run of each arm, the plain one first (--gamma K, default
// 4): race.c's table with the speculative lane in place of the one without
// the cache, the same text or not, the speed-up with the ± of the scatter of
// each run's step and round times. Returns the exit status.
int specbench_race(const Options *opt, Trace *tr);

#endif
