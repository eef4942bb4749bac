// toy — what the lessons on the 4-dim example (1, 2, 7, 9) share: loading
// the data file named by --data (or the article's), and showing the weights.
#ifndef KVDEMO_TOY_H
#define KVDEMO_TOY_H

#include "attention.h"
#include "options.h"
#include "toydata.h"
#include "trace.h"

// Loads opt->data_path or the default; on failure prints one line on stderr
// and returns -1. min_tokens: the rows of X the lesson needs.
int toy_load(ToyData *data, const Options *opt, const char *lesson, int min_tokens);

// toy_load, then n AttnSteps of up to cap tokens each. Returns 0, or -1
// after one line on stderr with nothing left allocated.
int toy_begin(ToyData *data, AttnStep *steps, int n, int cap, const Options *opt, const char *lesson,
              int min_tokens);
// Frees what toy_begin made.
void toy_end(ToyData *data, AttnStep *steps, int n);

// The three weight matrices, once, before the runs.
void toy_show_weights(Trace *tr, const ToyData *data);

// The scale as the printed code writes it: "2", "math.sqrt(2)" when it is the
// default sqrt(dk) of a data file without a "scale" line, else "%g". Captions
// are built from it so that the code shown is the code run on these numbers.
const char *toy_scale(const ToyData *data, char *buf, int size);
// A caption with the scale put in: fmt holds one %s ("Q @ K.T / %s").
const char *toy_caption(const ToyData *data, const char *fmt, char *buf, int size);
// The scale as a JSON event ("scale"), for scripts that check the captions.
void toy_show_scale(Trace *tr, const ToyData *data);

// From --precision 7 on (text only), where the digits can stop matching
// PyTorch's print: in a build without FMA (its matrix products round twice
// where PyTorch's round once), and, when exp_differs, where PyTorch's exp and
// the C library's differ in the last bit for one of the lesson's weights.
void toy_precision_note(Trace *tr, int exp_differs);

// The first n tokens joined ("天气真"), for headings.
const char *toy_tokens(const ToyData *data, int first, int n, char *buf, int size);

#endif
