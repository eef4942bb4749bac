// toydata — the numbers of the article's 4-dim example ("天气真好"), read
// from a small text file at run time so a teacher can bring their own.
//
// The file (data/tianqi.txt is the article's; docs/lesson-2.md describes the
// format) has a "scale" line and four matrices, each a name line followed by
// its rows:
//
//   scale 2            # scores = Q @ K.T / scale (default: sqrt(width of W_K))
//   X                  # one row per token, the token first
//   天  0.1  0.3  0.2 -0.1
//   ...
//   W_Q                # (d, dk), then W_K (d, dk) and W_V (d, dv)
//
// Legend: n tokens (rows of X), d width of X, dk width of Q and K, dv width of V.
#ifndef KVDEMO_TOYDATA_H
#define KVDEMO_TOYDATA_H

#include "fileio.h"   // Err

#include <stddef.h>

enum { TOY_MAX_TOKENS = 64, TOY_MAX_WIDTH = 64, TOY_TOKEN_BYTES = 32 };

typedef struct {
    int n, d, dk, dv;
    float scale;                             // scores = Q K^T / scale
    float *X;                                // (n, d)  one row per token
    float *W_Q, *W_K;                        // (d, dk)
    float *W_V;                              // (d, dv)
    char tokens[TOY_MAX_TOKENS][TOY_TOKEN_BYTES];   // the token of each row of X (UTF-8)
    const char *rows[TOY_MAX_TOKENS];        // tokens[i], as row labels for the trace
} ToyData;

// The path of the article's example: data/tianqi.txt in the current folder,
// else next to the kvdemo binary. Returns "data/tianqi.txt" when neither
// exists (so that the error names it).
const char *toydata_default_path(char *buf, size_t size);

// Reads a data file. Returns 0, or -1 with one line in err naming the file,
// the line and what was expected.
int toydata_load(ToyData *t, const char *path, Err err);
void toydata_free(ToyData *t);

#endif
