// race — `kvdemo race`: the char GPT writes the same text twice at once,
// without and with the KV cache, each run on its own core, and a terminal
// watches both fill at their real speeds. Both end with the same text.
#ifndef KVDEMO_RACE_H
#define KVDEMO_RACE_H

#include "gpt.h"
#include "options.h"
#include "trace.h"

// Runs the race the options ask for (--model / --init, --prompt, --steps,
// --seed, --temperature, --top-k); on a terminal both runs are drawn live,
// elsewhere only the result is printed. Returns 0, or an exit status after
// one line on stderr.
int race_run(const Options *opt, Trace *tr);
// The same race on a model already loaded (lesson 10 on a terminal).
int race_model(const GptModel *m, const Options *opt, Trace *tr);

#endif
