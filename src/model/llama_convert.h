// llama_convert — a multi-head LLaMA-style model made into one with fewer
// key/value heads, as the GQA paper does before uptraining (Ainslie et al.
// 2023, §2.1): each group of r = G0 / G consecutive key/value heads (the
// heads that repeat_kv gives to the same query heads) becomes one head by
// mean-pooling the group's wk and wv columns, by keeping the group's first
// head, or by a random initialisation (the training's, llama_train_init).
// Every other weight is copied as it is. `kvdemo train --arch llama --from
// FILE --kv-heads G --convert mean|first|random` uptrains the result.
//
// Legend (llama.h): C dim, D head size, G0 key/value heads of the source,
// G of the result, r = G0 / G heads per group.
#ifndef KVDEMO_LLAMA_CONVERT_H
#define KVDEMO_LLAMA_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "llama.h"

typedef enum { LLAMA_CONVERT_MEAN, LLAMA_CONVERT_FIRST, LLAMA_CONVERT_RANDOM } LlamaConvert;

// "mean", "first", "random".
const char *llama_convert_name(LlamaConvert how);
// Returns 0, or -1 for a name that is none of the three.
int llama_convert_parse(LlamaConvert *how, const char *name);

// Checks that src (a model with kvdemo's vocabulary) can become a model of
// G key/value heads: 1 <= G < G0 and G0 % G == 0. Returns 0, or -1 with a
// one-line message in err naming the valid G.
int llama_convert_check(const LlamaModel *src, int G, Err err);

// dst = a new model (llama_new; llama_free it) of src's shape with G
// key/value heads, src's vocabulary and every weight of src but wk, wv
// (C, G*D) of each layer, whose head g (columns g*D .. g*D + D - 1) is
//   mean:   (sum over k of src head g*r + k, in order, in float) / r
//   first:  src head g*r
//   random: llama_train_init's draws for a model of dst's shape from seed.
// Returns 0, or -1 with err (llama_convert_check's, or out of memory).
int llama_convert(LlamaModel *dst, const LlamaModel *src, int G, LlamaConvert how, uint64_t seed,
                  Err err);

#endif
