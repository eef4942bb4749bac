// gpt — the char-level GPT of the numpy chapter (seed 003): its weights, the
// model file, and the forward pass with and without the KV cache.
//
// Legend of dimension letters:
//   V vocabulary size      T context (max positions)   C embedding size
//   H heads                D head size = C / H         L blocks
//   F hidden size of the MLP = 4 * C                   N tokens fed at once
//
// Linear weights are stored (in, out) as in the chapter's numpy: y = x @ W + b.
// docs/model-format.md describes the file byte for byte.
#ifndef KVDEMO_GPT_H
#define KVDEMO_GPT_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int V, T, C, H, L;
} GptConfig;

// One block's parameters: pointers into GptModel.params, in file order.
typedef struct {
    float *ln1_w, *ln1_b;    // (C), (C)
    float *wq, *bq;          // (C, C), (C)   attn.query
    float *wk, *bk;          // (C, C), (C)   attn.key
    float *wv, *bv;          // (C, C), (C)   attn.value
    float *wo, *bo;          // (C, C), (C)   attn.output
    float *ln2_w, *ln2_b;    // (C), (C)
    float *w1, *b1;          // (C, F), (F)   mlp.fc1
    float *w2, *b2;          // (F, C), (C)   mlp.fc2
} GptBlockParams;

// All parameters are one allocation, carved in the order of the model file.
typedef struct {
    float *wte;              // (V, C) token_embedding
    float *wpe;              // (T, C) position_embedding
    GptBlockParams *blocks;  // L of them (the array is owned by GptModel)
    float *lnf_w, *lnf_b;    // (C), (C)
    float *head_w, *head_b;  // (C, V), (V)
} GptParams;

typedef struct {
    GptConfig cfg;
    uint32_t *vocab;         // (V) Unicode code points, in token-id order
    float *params;           // every parameter, file order
    size_t num_params;
    GptParams p;             // named views into params
} GptModel;

// Number of floats of all parameters of a model of this shape.
size_t gpt_num_params(GptConfig cfg);
// Points p's fields into params (num_params floats, file order). blocks must
// hold cfg.L entries.
void gpt_params_carve(GptParams *p, GptBlockParams *blocks, float *params, GptConfig cfg);

#endif
