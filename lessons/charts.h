// charts — the pictures of lessons 4 and 5 in the lesson page (--format
// html; chart_svg.h draws them): lesson 4's time per token against the
// position, both ways, each point the median of its runs with their min …
// max; lesson 5's bytes the cache holds against the sequence length, beside
// what kvdemo reserves. The text and Markdown keep their tables of bars.
#ifndef KVDEMO_CHARTS_H
#define KVDEMO_CHARTS_H

#include "trace.h"

// Lesson 4: npos positions pos (ascending); runs[c] the repeat times of way
// c (0 without the cache, 1 with it) at pos[i], from runs[c] + i · repeat.
void charts_time_per_token(Trace *tr, const int *pos, int npos, const double *const runs[2], int repeat);

// Lesson 5: the lengths len = T/8, 2T/8, ..., T that reach the prompt's p
// tokens (the bars' rows), the bytes held at each (per_token · len) and the
// bytes reserved before the first token.
void charts_bytes_held(Trace *tr, int T, int p, uint64_t per_token, uint64_t reserved);

#endif
