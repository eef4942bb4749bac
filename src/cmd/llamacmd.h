// llamacmd — the commands on a LLaMA-style model file (docs/llama-format.md)
// as on the char GPT's: `generate --model FILE` and `eval --model FILE` take
// either, told apart by the file's magic ("KVLM" against "KVGP").
#ifndef KVDEMO_LLAMACMD_H
#define KVDEMO_LLAMACMD_H

#include "options.h"
#include "trace.h"

// The shipped char-level LLaMA trained on tinyshakespeare (docs/training.md),
// lesson 3's model.
#define LLAMA_SHIPPED_MODEL "data/tinyshakespeare-llama-mha.bin"

// 1 when path names a readable regular file that starts with the LLaMA magic "KVLM".
int llamacmd_is_llama_file(const char *path);

// kvdemo generate --model FILE.bin (a LLaMA file): LLaMA.generate on the
// prompts (--prompt, repeatable: one row of the batch each; default
// "ROMEO:"), --steps tokens after the longest (the context permitting),
// temperature 0.8 and top-p 0.95 as the article's generate unless
// --temperature is given, with the cache or (--no-cache) without it: the
// same text either way. Returns the exit status.
int llamacmd_generate(const Options *opt, Trace *tr);

#endif
