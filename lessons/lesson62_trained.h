// lesson62_trained — lesson 6.2's part (3): what sharing key/value heads
// costs, measured live on the four trained models kvdemo ships.
#ifndef KVDEMO_LESSON62_TRAINED_H
#define KVDEMO_LESSON62_TRAINED_H

#include "options.h"
#include "pool.h"
#include "trace.h"

// Loads data/tinyshakespeare-llama-{mha,gqa4,gqa2,mqa}.bin and prints, for
// each, G, the parameters, the cache bytes per token, the validation loss on
// data/tinyshakespeare-val-2049.txt and the decode time per token (the four
// interleaved, opt->repeat runs), then the trained MHA model mean-pooled to
// G = 4, 2, 1 and scored at once, and what the numbers support. A missing
// file is named with the way to get it, and the part goes on without it.
// repeat: counted runs of the timing; part: the characters of the slice
// scored (0: all of them); pool: the threads of the decoding (the lesson's).
// Returns 0, or 1 (no memory).
int lesson62_trained(const Options *opt, Trace *tr, Pool *pool, int repeat, long part);

#endif
