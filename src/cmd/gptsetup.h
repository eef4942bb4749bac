// gptsetup — what the char GPT's commands and the lessons on it share: the
// model the options ask for (a file, a random model, or the shipped one), the
// prompt and its tokens. Commands live in gptcmd; lessons include only this
// (and race.h, the race itself, in lesson 10).
#ifndef KVDEMO_GPTSETUP_H
#define KVDEMO_GPTSETUP_H

#include "gpt.h"
#include "options.h"

// The shipped model, trained by `kvdemo train` (docs/training.md).
#define GPT_SHIPPED_MODEL "data/tinyshakespeare-gpt.bin"

// The model the options ask for: --model FILE, or --init random (with
// --preset, default seed, and --seed), or else the shipped model. When the
// shipped model is missing and fallback is 1, a random model of the seed
// preset is made instead and *random_note is set to 1 (the caller says so).
// Returns 0, or an exit status (2 usage, 1 failure) after one line on stderr.
int gptsetup_model(GptModel *m, const Options *opt, int fallback, int *random_note);
// The model file those options lead to: --model, else the shipped model
// (which may be missing), or NULL with --init. May use buf.
const char *gptsetup_model_path(const Options *opt, char *buf, size_t size);

// The prompt the options give (--prompt), else the chapter's "ROMEO:".
const char *gptsetup_prompt_text(const Options *opt);

// The prompt's tokens (allocated, with room for steps more), or an exit
// status after one line on stderr naming the character the model lacks and
// the characters it knows (in lang).
int gptsetup_prompt(Lang lang, int **tokens, int *n, const GptModel *m, const char *prompt, int steps);

// How the lessons on the char GPT start: the model the options ask for, the
// shipped one falling back to a random one (*random_note, as gptsetup_model),
// and the prompt's tokens (--prompt, else "ROMEO:"). With fit, a lesson id
// ("4"), the tokens have room for the whole context and the prompt must be
// shorter than it. Returns 0, or an exit status after one line on stderr
// with nothing left to free.
int gptsetup_lesson(GptModel *m, int *random_note, int **tokens, int *n, const Options *opt, const char *fit);

// The attention --attention and --tile ask for (flash.h): how s's
// contiguous cache attends (kvcontig_set_tile), for s alone. Returns 0, or
// an exit status after one line on stderr.
int gptsetup_attention(const Options *opt, GptState *s);

// One generation as the options ask (--seed, --temperature, --top-k): the
// prompt's n_prompt tokens are copied into tokens (room for n_prompt +
// steps), a fresh sampler draws steps more, and the text (prompt included) is
// returned, malloc'd; NULL when memory ran out. on_step as gpt_generate's.
char *gptsetup_generate_text(int *tokens, GptState *s, const GptModel *m, const int *prompt, int n_prompt,
                             int steps, int use_cache, const Options *opt, GptStepFn on_step, void *ctx);

#endif
