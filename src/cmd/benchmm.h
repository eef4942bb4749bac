// benchmm — the matmuls of one full pass of the char GPT, timed alone.
//
// kvdemo bench divides a pass's matmul FLOPs by the whole pass's time, so
// attention, LayerNorm and GELU count against the matmuls. Here only the
// calls gpt_forward makes to ops_matmul_packed (and the head's ops_matmul)
// for one uncached pass of T tokens are run and timed: the same kernel, the
// same shapes, the same packed weights and thread count, on random numbers.
// Beside it, in the same run, the FMA loop (ops_fma_loop): the matmuls'
// rate is read as a fraction of it, which a loaded machine changes less than
// either rate alone.
//
// Legend (gpt.h): T tokens of the pass (the model's context), C embedding
// size, F = 4 C, V vocabulary, L blocks.
#ifndef KVDEMO_BENCHMM_H
#define KVDEMO_BENCHMM_H

#include "gpt.h"

typedef struct {
    int tokens;                    // T: rows of every block's matmuls
    double flops;                  // of one pass's matmuls (2 per multiply-add)
    double best_gflops, median_gflops;          // the matmuls, over the repeats
    double fma_best_gflops, fma_median_gflops;  // the FMA loop, in the same repeats
    double median_fraction;        // median over repeats of matmuls / FMA loop
} BenchMM;

// The FLOPs of the matmuls of one uncached pass of n tokens:
//   L blocks x (query, key, value, output (n, C) @ (C, C); fc1 (n, C) @ (C, F);
//   fc2 (n, F) @ (F, C)), then the head on the last row, (1, C) @ (C, V).
double benchmm_flops(const GptConfig *cfg, int n);

// Times repeat (>= 1) passes of cfg's matmuls on pool's threads (the
// bench's, as its passes; NULL: the calling thread), after one untimed pass,
// each repeat followed by an FMA loop of as many FLOPs as the pass. Returns
// 0, or -1 when memory is missing.
int benchmm_run(const GptConfig *cfg, Pool *pool, int repeat, BenchMM *out);

#endif
