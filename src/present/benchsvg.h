// benchsvg — bench's chart as a plain SVG file: time per token and total
// time against the number of generated tokens, without and with the cache,
// on logarithmic axes (so 16 tokens and 1024 both show), with reference
// lines growing as n and as n² beside them. One self-contained file: no
// script, no font or style sheet from elsewhere, no link; any browser shows
// it, and it prints.
#ifndef KVDEMO_BENCHSVG_H
#define KVDEMO_BENCHSVG_H

#include <stdio.h>

// One measured length: mean, min and max seconds of the whole generation,
// [0] without the cache, [1] with it.
typedef struct {
    int tokens;
    double mean[2], min[2], max[2];
} BenchSvgPoint;

// Writes the chart of n >= 1 points (lengths ascending, every time > 0) to
// f. title is plain text (escaped here), and f is flushed at the end.
// Returns 0, or -1 if a write failed, with errno its reason (ENOSPC: the
// disk is full), for the caller's message.
int benchsvg_write(FILE *f, const BenchSvgPoint *points, int n, const char *title);

#endif
