// gptcmd — the char GPT's commands (generate, init, bench; train and eval in traincmd.c), and the model
// choice they share with lesson 10.
#ifndef KVDEMO_GPTCMD_H
#define KVDEMO_GPTCMD_H

#include "gpt.h"
#include "options.h"
#include "trace.h"

// The shipped model, trained by `kvdemo train` (docs/training.md).
#define GPT_SHIPPED_MODEL "data/tinyshakespeare-gpt.bin"

// The model the options ask for: --model FILE, or --init random (with
// --preset, default seed, and --seed), or else the shipped model. When the
// shipped model is missing and fallback is 1, a random model of the seed
// preset is made instead and *random_note is set to 1 (the caller says so).
// Returns 0, or an exit status (2 usage, 1 failure) after one line on stderr.
int gptcmd_model(GptModel *m, const Options *opt, int fallback, int *random_note);

// The prompt's tokens (allocated, with room for steps more), or an exit
// status after one line on stderr naming the character the model lacks.
int gptcmd_prompt(int **tokens, int *n, const GptModel *m, const char *prompt, int steps);

// The attention --attention and --tile ask for (flash.h): sets the char
// GPT's attention for model m. Returns 0, or an exit status after one line on
// stderr. gptcmd_attention_end goes back to plain attention.
int gptcmd_attention(const Options *opt, const GptModel *m);
void gptcmd_attention_end(void);

// One generation as the options ask (--seed, --temperature, --top-k): the
// prompt's n_prompt tokens are copied into tokens (room for n_prompt +
// steps), a fresh sampler draws steps more, and the text (prompt included) is
// returned, malloc'd; NULL when memory ran out. on_step as gpt_generate's.
char *gptcmd_generate_text(int *tokens, GptState *s, const GptModel *m, const int *prompt, int n_prompt,
                           int steps, int use_cache, const Options *opt, GptStepFn on_step, void *ctx);

int gptcmd_generate(const Options *opt, Trace *tr);
int gptcmd_init(const Options *opt);
int gptcmd_bench(const Options *opt, Trace *tr);
// train and eval live in traincmd.c.
int gptcmd_train(const Options *opt, Trace *tr);
int gptcmd_eval(const Options *opt, Trace *tr);

#endif
