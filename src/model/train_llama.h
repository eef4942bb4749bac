// train_llama — how the LLaMA-style model of the article's section 3.1
// (llama.h) learns: a forward pass over whole sequences that keeps every
// activation, and a backward pass for every layer — RMSNorm, the rotary
// embedding (whose backward is the inverse rotation), attention with G
// key/value heads (a shared head's gradient is the sum over its query
// heads), SwiGLU, the classifier and the cross-entropy. The matmuls,
// attention, cross-entropy and AdamW are the char GPT's (train.h), on the
// same pool, so the results do not depend on the number of threads.
//
// Legend (as in llama.h and train.h):
//   V vocabulary   C model size (dim)   L layers   H query heads
//   G key/value heads   D head size = C / H   F SwiGLU hidden size
//   B batch (sequences)   T positions per sequence (<= max_seq_len)
//   N rows = b * T (one per token)   P number of parameters (floats)
//
// The gradients have the weights' shape: they live in a second LlamaModel
// of the same configuration (llama_new), whose named views (p.layers[l].wq,
// ...) then name each tensor's gradient. Backward passes ADD into them
// (+=); the caller zeroes them once per step.
#ifndef KVDEMO_TRAIN_LLAMA_H
#define KVDEMO_TRAIN_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint.h"
#include "llama.h"
#include "pool.h"

typedef struct LlamaTrainState LlamaTrainState;

// Buffers for batches of up to B sequences of T tokens (1 <= T <=
// cfg->max_seq_len) of a model of shape cfg, on pool (NULL: the calling
// thread only). NULL when memory could not be had.
LlamaTrainState *llama_train_state_new(const LlamaConfig *cfg, int B, int T, Pool *pool);
void llama_train_state_free(LlamaTrainState *s);
// logits (b, T, V) of the last llama_train_forward.
const float *llama_train_state_logits(const LlamaTrainState *s);

// Transformer.forward(inputs, start_pos=0) of b (<= B) sequences inputs
// (b, T), with the causal mask and the logits of every position; with
// targets (b, T) returns F.cross_entropy(logits, targets), the mean over
// the b * T rows (else 0).
double llama_train_forward(LlamaTrainState *s, const LlamaModel *m, const int32_t *inputs,
                           const int32_t *targets, int b);
// Backward pass of the last forward (same m, inputs, targets, b):
// grads->params (P) += d loss / d m->params.
void llama_train_backward(LlamaTrainState *s, LlamaModel *grads, const LlamaModel *m,
                          const int32_t *inputs, const int32_t *targets, int b);

// decay (P) = 1 where AdamW's weight decay applies (the embeddings and the
// matrices), 0 for the RMSNorm weights.
void llama_train_decay_mask(uint8_t *decay, const LlamaModel *m);

// ---------------------------------------------------------------------------
// Training runs (train_llama_run.c): `kvdemo train --arch llama`.
//
// The text's vocabulary (corpus.h) becomes the model's after pad, bos and
// eos: character token t is model token t + 3. Every window starts with bos,
// as every prompt of LLaMA.generate does: inputs (bos, c0 .. c[T-2]),
// targets (c0 .. c[T-1]), so position 0 learns the text's first character
// from bos alone.

// The recipe of `kvdemo train --arch llama`: the char GPT's optimizer
// (train_config_default) with the LLaMA shape of preset "seed" (the shipped
// models': T 128, C 128, H 8, G 8, L 4, F 352; 2000 steps of 16 x 128
// tokens, lr 2e-3 after 100 warm-up steps, cosine to 2e-4) or "tiny" (T 32, C 64, H 4,
// G 4, L 2, F 192). Returns 0, or -1 for an unknown preset.
int llama_train_config_default(TrainConfig *cfg, const char *preset);
// The model shape of recipe r for a text of V characters: max_seq_len, dim,
// n_heads, n_layers from r->model, G = r->kv_heads, F = r->hidden, V + 3
// tokens, rope_theta 10000, norm_eps 1e-5. Returns 0, or -1 with err.
int llama_train_config(LlamaConfig *out, const TrainConfig *r, int V, Err err);
// The initial weights of training: normal with std 0.02 (wo and w2, which
// write into the residual stream, 0.02 / sqrt(2 L)), RMSNorm weights 1,
// drawn by Box-Muller from seed. freqs_cis is computed too.
void llama_train_init(LlamaModel *m, uint64_t seed);
// The run train_run makes for r.arch == TRAIN_ARCH_LLAMA, after train_setup.
int llama_train(TrainSetup *su, TrainProgressFn progress, void *user, TrainResult *res, Err err);
// Mean cross-entropy of m (nats per character) on the training and the
// validation split of the text at data_path, in bos-led windows of
// max_seq_len (the whole validation split, and as many windows spread over
// the training split). Either output may be NULL. Returns 0, or -1 with err.
int llama_train_eval(const LlamaModel *m, const char *data_path, int threads, double *train_loss,
                     double *val_loss, TrainEvalProgressFn progress, void *user, Err err);

// The same over the whole of the text at path: its (n - 1) / T windows.
int llama_train_text_loss(const LlamaModel *m, const char *path, int threads, double *loss, Err err);
// The same over the first `chars` characters of it (all of them when chars
// <= 0 or past its end): its (min(n, chars) - 1) / T windows.
int llama_train_text_loss_head(const LlamaModel *m, const char *path, int64_t chars, int threads, double *loss,
                               Err err);

// ---------------------------------------------------------------------------
// Layers (exported for the tests). Rows are processed in fixed chunks, and
// sums over rows (dw) are added chunk by chunk in order.

// out (N, C) = x * rsqrt(mean(x^2) + eps) * w, rstd (N) = that rsqrt.
void rmsnorm_forward_pool(float *out, float *rstd, const float *x, const float *w, float eps,
                          Pool *pool, int N, int C);
// dx (N, C) += d/dx, dw (C) += d/dw of sum(dout * out); with xhat = x * rstd,
// g = dout * w:  dx = rstd * (g - xhat * mean(g * xhat)),  dw = sum_n dout * xhat.
// partial: rmsnorm_scratch(N, C) floats.
size_t rmsnorm_scratch(int N, int C);
void rmsnorm_backward_pool(float *dx, float *dw, float *partial, const float *dout,
                           const float *x, const float *w, const float *rstd, Pool *pool, int N,
                           int C);
// The inverse rotation of llama_apply_rotary_emb: dx (N, nh, D) in place
// becomes the gradient before the rotation, each pair times conj(freqs_cis).
void rope_backward(float *dx, const float *freqs_cis, int N, int nh, int D);
// out (n) = silu(a) * b; da, db (n) = its gradients times dout (written, not added).
void swiglu_forward(float *out, const float *a, const float *b, int64_t n);
void swiglu_backward(float *da, float *db, const float *dout, const float *a, const float *b,
                     int64_t n);

#endif
