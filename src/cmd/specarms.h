// specarms — a draft and its target, the char GPT's or the LLaMA-style
// model's, run two ways on one prompt, greedy: plain cached decoding (the
// target alone, one token a step) and speculative decoding (spec.h,
// llama_spec.h: the draft proposes K tokens a round, the target verifies
// them in one pass). What `kvdemo bench --draft` and `kvdemo race --draft`
// (specbench.c) time. Greedy, both ways write the target's own text, token
// for token; each run checks it.
//
// Legend as in spec.h: V vocabulary, K drafted tokens per round, T the
// target's context.
#ifndef KVDEMO_SPECARMS_H
#define KVDEMO_SPECARMS_H

#include "gpt.h"
#include "llama.h"
#include "llama_spec.h"
#include "options.h"
#include "sampler.h"
#include "spec.h"

typedef struct {
    int llama;                  // 1: the LLaMA-style pair; 0: the char GPT's
    Lang lang;                  // the language of its error lines (--lang)
    const char *draft_path;     // the draft's file (--draft)
    char draft_buf[4096];
    GptModel gt, gd;            // the char GPT's target and draft
    GptState gts, gds;
    LlamaModel lt, ld;          // the LLaMA-style target and draft
    LlamaState lts, lds;
    Sampler sampler;            // temperature 0: the argmax (V)
    SpecMt mt;
    Spec gsp;                   // the round's scratch of the K set last
    LlamaSpec lsp;
    int gamma;                  // K of gsp / lsp, 0 before pair_set_gamma
    const char *prompt_text;
    int *prompt;                // (n_prompt) the prompt's tokens (LLaMA: bos first)
    int n_prompt, steps;        // steps: tokens asked after the prompt
    int *plain, *spec;          // (n_prompt + steps) the last text of each arm
    int len_plain, len_spec;
    float *logits;              // (V) LLaMA's plain step
    int differ_at;              // -1; else the first token where an arm's text left the other's
    SpecStats stats;            // of the last speculative run
    double *times;              // (n_prompt + steps) the last run's step (or round) times
    unsigned char *cached;      // (n_prompt + steps) 1: the step or round fed no prompt
    int n_times;
    int loaded;                 // bits of what pair_close frees
    Pool *pool;                 // every state's threads (specarms_use_pool; NULL: the calling thread)
} SpecArms;

// Loads the target (--model, else the shipped char GPT) and the draft
// (--draft) of the same kind, checks them for K up to gamma_max, and the
// prompt (--prompt, default "ROMEO:") with steps tokens after it. Returns
// 0, or an exit status (2 usage, 1 failure) after one line on stderr, with
// nothing left to free.
int specarms_open(SpecArms *p, const Options *opt, int steps, int gamma_max);
void specarms_close(SpecArms *p);
// From now on every state of p (target and draft) runs on pool, the
// caller's (made from --threads, freed by it after specarms_close).
void specarms_use_pool(SpecArms *p, Pool *pool);
// The speculative arm drafts K tokens a round from now on. Returns 0, or 1
// after one line on stderr (out of memory).
int specarms_set_gamma(SpecArms *p, int K);

// One run of each arm, from fresh caches (MeasureRun: ctx is the pair):
// the time of the generation alone into *seconds, the text into plain or
// spec, the step or round times into times; differ_at set when the two last
// texts differ. Return 0.
int specarms_run_plain(void *ctx, double *seconds);
int specarms_run_spec(void *ctx, double *seconds);

// The target's and the draft's kinds in words ("the char GPT", "the
// LLaMA-style model"), English or Chinese; cap: to begin a sentence.
const char *specarms_kind(const SpecArms *p, int zh, int cap);
// The decoded text of the speculative arm's last run, malloc'd (NULL: no memory).
char *specarms_text(const SpecArms *p);

#endif
