// gptcmd — the char GPT's commands: generate, init, bench, train, eval.
#ifndef KVDEMO_GPTCMD_H
#define KVDEMO_GPTCMD_H

#include "options.h"
#include "trace.h"

int gptcmd_generate(const Options *opt, Trace *tr);
int gptcmd_init(const Options *opt);
int gptcmd_train(const Options *opt);
int gptcmd_eval(const Options *opt);

#endif
