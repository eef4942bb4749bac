// speccmd — `kvdemo generate --draft FILE [--gamma K]`: the char GPT's text
// by speculative decoding (spec.h), a small draft proposing K tokens a
// round and the target verifying them in one pass; and what lesson 13
// shares with it (the draft the options ask for, the models set up).
#ifndef KVDEMO_SPECCMD_H
#define KVDEMO_SPECCMD_H

#include "gpt.h"
#include "options.h"
#include "spec.h"
#include "trace.h"

// The shipped draft, trained by `kvdemo train` (docs/training.md).
#define SPEC_SHIPPED_DRAFT "data/tinyshakespeare-draft.bin"
enum { SPEC_DEFAULT_GAMMA = 4 };

// The options that cannot go with --draft or --gamma (a bug, another kind
// of cache, a run without the cache, --gamma alone). Returns 0, or 2 after
// one line on stderr.
int speccmd_check_options(const Options *opt);
// The draft --draft names (else the shipped one), checked against the
// target (spec_check). Returns 0, or an exit status after one line on stderr.
int speccmd_draft(GptModel *draft, const GptModel *target, const Options *opt, int gamma);
// --gamma, or SPEC_DEFAULT_GAMMA.
int speccmd_gamma(const Options *opt);

int speccmd_generate(const Options *opt, Trace *tr);

// The figures under a speculative text (tokens, time, α, tokens a round),
// lines for people and events for scripts: sp's gamma and stats only, so
// that the LLaMA-style model's command (llamaspeccmd.c) shows the same;
// threads: the run's (pool_threads).
void speccmd_show_figures(Trace *tr, const Spec *sp, int threads, int steps, double seconds, const char *draft_path);

#endif
