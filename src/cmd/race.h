// race — the char GPT writes the same text twice at once, without and with
// the KV cache, each run on its own core, and a terminal watches both fill at
// their real speeds. Both end with the same text. Not a command: `kvdemo
// race` (gptcmd_race) and lesson 10 on a terminal both run it on a model
// they have loaded.
#ifndef KVDEMO_RACE_H
#define KVDEMO_RACE_H

#include "gpt.h"
#include "options.h"
#include "trace.h"

// Runs the race on model m as the options ask (--prompt, --steps, --seed,
// --temperature, --top-k); on a terminal both runs are drawn live, elsewhere
// only the result is printed. Returns 0, or an exit status after one line on
// stderr.
int race_model(const GptModel *m, const Options *opt, Trace *tr);

// The race's table, a row a lane (the LLaMA race and race --draft print it
// too): its name (lane_width columns), its tokens, its seconds with
// decimals digits after the point, and its tokens/s.
void race_table(Trace *tr, const char *const lane[2], const int tokens[2], const double seconds[2], int decimals,
                int lane_width);

#endif
