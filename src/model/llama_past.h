// llama_past — the LLaMA-style model past its context (lesson 14,
// `generate --window`): a long text fed through it in the ways issue 27
// compares, each holding at most W positions of keys and values.
//
//   LLAMA_PAST_RESET      the numpy chapter's way out: a cache of W positions;
//                         when it is full, drop it and feed the last W / 2
//                         tokens again from position 0, then go on cached
//   LLAMA_PAST_RECOMPUTE  the last W tokens recomputed from position 0 at every
//                         step: the quality baseline, W times the rows
//   LLAMA_PAST_CACHE      one token a step into the rolling cache the state
//                         points at (s->kv: kvcache_window.c, a window or sinks
//                         + window), at its own position however far
//
// Legend (llama.h): V vocabulary, T max_seq_len, W positions held.
#ifndef KVDEMO_LLAMA_PAST_H
#define KVDEMO_LLAMA_PAST_H

#include "llama.h"

typedef enum { LLAMA_PAST_RESET, LLAMA_PAST_RECOMPUTE, LLAMA_PAST_CACHE } LlamaPast;

// Feeds tokens (n) the way `way` says, W <= T positions held (for
// LLAMA_PAST_CACHE, s->kv's), and writes for each step i = 0 .. n-2
// losses[i] = -log softmax(logits)[tokens[i + 1]] and seconds[i], the time
// of its forward pass (either may be NULL). logits (V) is scratch.
// LLAMA_PAST_RECOMPUTE, which needs no step before, computes only the steps
// i % every == 0 (losses NAN and seconds 0 at the others); every >= 1.
void llama_past_run(double *losses, double *seconds, float *logits, LlamaState *s, const LlamaModel *m,
                    const int *tokens, int n, LlamaPast way, int W, int every);

// Generation without resets on s->kv's rolling cache: the prompt tokens[0 ..
// n_prompt-1], then `steps` tokens sampled at temperature (0: argmax) and
// top_p, as llama_generate draws them from seed, written on in tokens
// (n_prompt + steps). Returns 0, or -1 when memory ran out.
int llama_past_generate(int *tokens, LlamaState *s, const LlamaModel *m, int n_prompt, int steps,
                        float temperature, float top_p, uint64_t seed);

#endif
