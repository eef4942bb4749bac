// llama_spec — speculative decoding on the LLaMA-style model: the char
// GPT's round (spec.h) with a small LLaMA draft. Each round the draft
// proposes K tokens, one cached step at a time; the target checks them in
// one llama_forward of K + 1 rows appended to its preallocated cache; the
// accepted prefix stays, the rest of both caches is cut back
// (kvcache_truncate), and the target's token at the first rejection (or the
// bonus token after K acceptances) is appended.
//
// Legend of dimension letters:
//   V vocabulary (the target's and the draft's: the same)
//   K drafted tokens per round (gamma)     T the target's max_seq_len
//   C the target's dim
//
// Greedy (temperature 0): a drafted token is kept when it is the target's
// argmax at that row. A row of the verifying pass has the same bits as a
// cached step of one row, so the text is llama_generate's greedy text, byte
// for byte, whatever the draft proposes.
//
// Sampling: p and q are what LLaMA.generate draws from, softmax(logits /
// temperature) cut to its top-p nucleus and renormalised (sample_top_p),
// and spec_sample_rule decides (Leviathan / Chen): the tokens follow the
// target's own distribution, though not its draws.
//
// The text: tokens[0] is bos; as llama_generate, no position past T - 1 is
// fed, so a text holds at most T tokens, bos included.
#ifndef KVDEMO_LLAMA_SPEC_H
#define KVDEMO_LLAMA_SPEC_H

#include "llama.h"
#include "spec.h"

// One model and its run state (batch 1, its preallocated cache).
typedef struct {
    const LlamaModel *m;
    LlamaState *s;
} LlamaSpecModel;

typedef struct {
    LlamaSpecModel target, draft;
    int gamma;             // K, 1 .. SPEC_GAMMA_MAX
    float temperature;     // 0: greedy
    float top_p;           // sample_top_p's p (with temperature > 0)
    SpecRandom *rnd;       // sampling's draws (unused when greedy)
    SpecStats stats;       // of the last llama_spec_generate
    float *rows;           // (K+1, V) the target's logits at the verifying rows
    float *p;              // (K+1, V) the target's probabilities there
    float *q;              // (K, V) the draft's probabilities of its K steps
    float *resid;          // (V) scratch: max(0, p - q)
    float *logits;         // (V) the draft's logits of one step
    float *sorted;         // (V) scratch of sample_top_p
    int *order;            // (V) scratch of sample_top_p
} LlamaSpec;

// Checks that the draft fits the target: the same vocabulary, a
// max_seq_len at least the target's, and 1 <= gamma <= SPEC_GAMMA_MAX.
// Returns 0, or -1 with err naming the mismatch in err's language.
int llama_spec_check(const LlamaModel *target, const LlamaModel *draft, int gamma, Err err);
// Reserves the scratch (states are the caller's: batch 1, fresh or reset).
// Returns 0, or -1 when memory ran out.
int llama_spec_init(LlamaSpec *sp, LlamaSpecModel target, LlamaSpecModel draft, int gamma, float temperature,
                    float top_p, SpecRandom *rnd);
void llama_spec_free(LlamaSpec *sp);

// tokens holds n_prompt >= 1 tokens (bos first) and has room for n_prompt +
// steps. Appends tokens until there are n_prompt + steps, or T. Returns
// len(tokens) at the end (on_round may stop it early: the length so far).
int llama_spec_generate(int *tokens, LlamaSpec *sp, int n_prompt, int steps, SpecRoundFn on_round, void *ctx);

// The cache of m keeps positions 0 .. len-1: the rollback of a round.
void llama_spec_rollback(LlamaSpecModel *m, int len);
// Positions m's cache holds.
int llama_spec_len(const LlamaSpecModel *m);

#endif
