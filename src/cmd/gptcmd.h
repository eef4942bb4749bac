// gptcmd — the char GPT's commands: generate, race, init, bench; train and
// eval (in traincmd.c).
#ifndef KVDEMO_GPTCMD_H
#define KVDEMO_GPTCMD_H

#include "options.h"
#include "trace.h"

int gptcmd_generate(const Options *opt, Trace *tr);
// kvdemo init: a random model written to --out; one line through the trace.
int gptcmd_init(const Options *opt, Trace *tr);
// kvdemo race: the model the options ask for (--model / --init), then race_model.
int gptcmd_race(const Options *opt, Trace *tr);
// train and eval live in traincmd.c; bench in bench.c.
int gptcmd_train(const Options *opt, Trace *tr);
int gptcmd_eval(const Options *opt, Trace *tr);

#endif
