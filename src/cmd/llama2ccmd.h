// llama2ccmd — generate and bench on llama2.c's models (--model FILE
// --tokenizer FILE, llama2c.h): the LLaMA-style model writes text after a
// prompt, with or without the KV cache, and its speed is measured.
#ifndef KVDEMO_LLAMA2CCMD_H
#define KVDEMO_LLAMA2CCMD_H

#include "options.h"
#include "trace.h"

// kvdemo generate --model FILE --tokenizer FILE: returns the exit status.
int llama2ccmd_generate(const Options *opt, Trace *tr);
// kvdemo bench --model FILE --tokenizer FILE, or --model FILE.bin a KVLM
// file (llamacmd.h): tokens per second with and without the cache over
// --steps LIST lengths, and cached == uncached (the same greedy tokens, the
// last logits bit for bit). Returns the exit status.
int llama2ccmd_bench(const Options *opt, Trace *tr);

#endif
