// llamaspeccmd — `kvdemo generate --model LLAMA --draft LLAMADRAFT --gamma K`:
// the LLaMA-style model's text by speculative decoding (llama_spec.h), a
// small LLaMA draft proposing K tokens a round and the target verifying
// them in one pass. The char GPT's is speccmd.c's; llamacmd.c hands a LLaMA
// file with --draft here.
#ifndef KVDEMO_LLAMASPECCMD_H
#define KVDEMO_LLAMASPECCMD_H

#include "options.h"
#include "trace.h"

// The shipped LLaMA draft, trained by `kvdemo train --arch llama` (docs/training.md).
#define LLAMA_SPEC_SHIPPED_DRAFT "data/tinyshakespeare-llama-draft.bin"

// One prompt (default "ROMEO:"), --steps tokens after it (the context
// permitting), greedy under --temperature 0, else temperature (default 0.8)
// and top-p 0.95 as the article's generate. Returns the exit status.
int llamaspeccmd_generate(const Options *opt, Trace *tr);

#endif
