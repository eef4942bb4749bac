// rng — the one small random generator of kvdemo's own draws (splitmix64).
//
// Where a document's numpy code draws, kvdemo reproduces numpy's generator
// instead (sampler.h); this one serves what no document specifies: training's
// initial weights and batches, the random tokens of benchmarks, and the seed
// of the LLaMA lessons' generator. Its whole state is one uint64, which a
// training checkpoint stores.
#ifndef KVDEMO_RNG_H
#define KVDEMO_RNG_H

#include <stdint.h>

// The next 64 random bits; advances *state.
uint64_t rng_next(uint64_t *state);
// Uniform in (0, 1): 53 random bits, never 0 (so log(u) is finite).
double rng_uniform(uint64_t *state);

#endif
