// gptpaged — the char GPT (gpt.h) on the paged KV cache (kvpage.h): one
// forward through a sequence's block table, and parallel sampling, several
// continuations of one prompt that share its blocks.
//
// Legend as in gpt.h: V vocabulary, T context, N samples.
#ifndef KVDEMO_GPTPAGED_H
#define KVDEMO_GPTPAGED_H

#include "gpt.h"
#include "kvpage.h"
#include "sampler.h"

// gpt_forward of tokens (n) at positions offset .. offset+n-1 with the cache
// of sequence seq: keeps seq's positions 0 .. offset-1 (offset <= seq->len),
// makes room for the n new ones (new blocks, copy-on-write), and runs the
// model with attention reading through seq's block table. The logits (V) are
// equal bit for bit to gpt_forward's on a contiguous cache holding the same
// positions. Returns them, or NULL with nothing computed when the pool has
// too few free blocks (*need, may be NULL, gets how many the step needs).
const float *gpt_forward_paged(GptState *s, const GptModel *m, KvSeq *seq, const int *tokens, int n, int offset,
                               int *need);

// Parallel sampling, as gpt_generate with the cache for each of N samples:
// the prompt (tokens[0 .. n_prompt-1], its last T tokens once more than T) is
// computed once into seqs[0], which is forked into seqs[1 .. N-1]; sample i
// draws its tokens with samplers[i] and feeds each new token through seqs[i];
// once its text outgrows the context it recomputes its last T tokens from
// position 0, as gpt_generate does. tokens is (N, stride): row i starts with
// the prompt and gets the steps drawn tokens after it. seqs are initialised
// on one pool, empty, of T positions each.
// Returns 0, or -1 when the pool ran out of blocks: *fail_sample and
// *fail_step say where, *need how many free blocks the step needed.
int gpt_sample_paged(int *tokens, int stride, GptState *s, const GptModel *m, KvSeq *seqs, Sampler *samplers,
                     int N, int n_prompt, int steps, int *fail_sample, int *fail_step, int *need);

#endif
