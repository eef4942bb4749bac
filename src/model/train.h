// train — how the char GPT of the numpy chapter (seed 003) learns: a forward
// pass that keeps every activation, a backward pass for every layer, AdamW
// with warm-up and cosine decay, gradient clipping, checkpoints that resume
// bit for bit, and the loss on held-out text.
//
// Legend of dimension letters (as in gpt.h):
//   B batch (sequences per step)   T context (positions)   C embedding size
//   H heads    D head size = C / H    L blocks    F MLP hidden size = 4 * C
//   V vocabulary size              N rows = B * T (one per token)
//   P number of parameters (floats)
//
// Every layer has a forward and a backward function, outputs first and sizes
// last. Backward functions ADD into the gradients of the parameters and of
// the inputs (+=), so a tensor used twice gets both contributions; the
// caller zeroes them once per step.
#ifndef KVDEMO_TRAIN_H
#define KVDEMO_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "corpus.h"
#include "gpt.h"
#include "pool.h"

// ---------------------------------------------------------------------------
// What to train and how. train_config_default fills in the recipe of the
// shipped model; the CLI overrides fields from its options.

typedef struct {
    const char *data_path;    // the training text, UTF-8
    const char *out_path;     // the final model, written with gpt_save
    const char *ckpt_path;    // the checkpoint; NULL means out_path + ".ckpt"
    const char *resume_path;  // a checkpoint to continue from, or NULL
    GptConfig model;          // T, C, H, L (V comes from the text)
    int batch;                // B sequences of T tokens per step
    int iters;                // optimizer steps in total
    int warmup;               // steps of linear warm-up of the learning rate
    float lr;                 // peak learning rate
    float min_lr;             // learning rate at the end of the cosine decay
    float weight_decay;       // AdamW decay, on matrices only
    float beta1, beta2, eps;  // AdamW moments
    float grad_clip;          // largest global gradient norm (0: no clipping)
    uint64_t seed;            // initial weights and batch draws
    int threads;              // 0: the fastest for the shape (pool_threads_for)
    int eval_every;           // validation loss every N steps (0: only at the end)
    int eval_batches;         // sequences of the validation split per estimate, in batches
    int ckpt_every;           // a checkpoint every N steps (0: only on stop)
    // The architecture: TRAIN_ARCH_GPT (the char GPT; model is its shape)
    // or TRAIN_ARCH_LLAMA (train_llama.h: model's T, C, H, L are max_seq_len,
    // dim, n_heads, n_layers; V is the text's, without pad, bos and eos).
    int arch;
    int kv_heads;             // LLaMA: G key/value heads (H % G == 0)
    int hidden;               // LLaMA: F, SwiGLU's hidden size
    // LLaMA uptraining (llama_convert.h): start from the model in from_path
    // made into kv_heads key/value heads by convert (a LlamaConvert) instead
    // of the initial weights; model, hidden are then that model's. iters
    // may be 0: the converted model is written as it is.
    const char *from_path;    // NULL: train from the initial weights
    int convert;              // LLAMA_CONVERT_MEAN, _FIRST or _RANDOM
    int window;               // LLaMA: 0, or W: sliding-window attention, the band mask of W
                              // (not in a checkpoint: --resume takes it from the command line)
} TrainConfig;

enum { TRAIN_ARCH_GPT = 0, TRAIN_ARCH_LLAMA = 1 };

// The model shapes are gpt_preset's: "seed" is the chapter's model (T 256,
// C 384, H 6, L 6) with the recipe of the shipped model (1500 steps of 16 x
// 256 tokens, lr 1e-3 after 50 warm-up steps, cosine to 1e-4, seed 1337);
// "tiny" (T 32, C 64, H 4, L 2) trains in seconds. NULL means "seed".
// Returns 0, or -1 for an unknown preset name.
int train_config_default(TrainConfig *cfg, const char *preset);

// What the progress callback sees: once before the first step (starting 1,
// step = the steps already done, the losses NAN), then after each step.
typedef struct {
    int starting;        // 1 on the call before the first step
    // the run
    int64_t text_chars;  // characters of the training text
    GptConfig model;     // the shape trained (V from the text)
    size_t num_params;   // P
    int batch;           // B
    int threads;         // threads of the pool
    int first_step;      // steps done before this run (a resumed checkpoint's)
    // the step
    int step;            // steps done so far (1 .. iters)
    int iters;           // steps in total
    float loss;          // training loss of this step's batch
    float train_loss;    // latest estimate on the training split, NAN before the first
    float val_loss;      // latest estimate on the validation split, NAN before the first
    float lr;            // learning rate used by this step
    float grad_norm;     // global gradient norm before clipping
    double tokens_per_s; // training throughput since this run (re)started
    double elapsed_s;    // seconds since this run (re)started
    double eta_s;        // seconds left at the current speed
    int evaluated;       // 1 when train_loss and val_loss were computed at this step
    int arch;            // TRAIN_ARCH_*; for LLaMA model is (T, C, H, L, V) as in TrainConfig
    int kv_heads, hidden;   // LLaMA: G and F
} TrainProgress;

// Returns 0 to go on, nonzero to stop after writing a checkpoint (as Ctrl-C).
// The return of the starting call is ignored.
typedef int (*TrainProgressFn)(const TrainProgress *p, void *user);

// Results of train_run.
enum {
    TRAIN_OK = 0,           // all iterations done, model written
    TRAIN_FAILED = 1,       // an error, said in err
    TRAIN_STOPPED = 3,      // stopped by a signal or the callback; checkpoint written
};

// What a run did, for the command's last line.
typedef struct {
    int step;                 // steps done when it ended
    int first_step;           // steps done before it began
    float loss, val_loss;     // the last batch's loss and validation estimate
    double elapsed_s;         // seconds
    double tokens_per_s;      // training throughput (evaluation time left out)
    char ckpt_path[4096];     // where the checkpoint is (or would be)
} TrainResult;

// The largest --iters and --batch the command line takes (cli.c), which a
// checkpoint's recipe is held to as well.
enum { TRAIN_MAX_ITERS = 100000000, TRAIN_MAX_BATCH = 4096 };

// Checks the recipe: batch (1 to TRAIN_MAX_BATCH), iterations (1 to
// TRAIN_MAX_ITERS) and warm-up (0 to the iterations), lr > 0 finite,
// 0 <= min_lr <= lr, 0 <= beta1, beta2 < 1, eps > 0, clip >= 0, decay >= 0,
// all finite. Returns 0, or -1 with why = what is wrong and the values.
int train_config_check(const TrainConfig *cfg, Err why);

// Trains as cfg says. It prints nothing: progress (may be NULL) is called
// before the first step and after each, and the command prints what it
// likes; result (may be NULL) says how the run ended. SIGINT and SIGTERM
// stop it cleanly after the current step: a checkpoint is written and
// TRAIN_STOPPED returned. With cfg->resume_path the run continues from that
// checkpoint with the checkpoint's recipe (the options that shape the result
// are taken from it; threads, eval and checkpoint intervals from cfg), and
// ends bit-identical to an uninterrupted run. Returns TRAIN_OK,
// TRAIN_STOPPED, or TRAIN_FAILED with err = what is wrong.
int train_run(const TrainConfig *cfg, TrainProgressFn progress, void *user, TrainResult *result,
              Err err);

// Mean cross-entropy (nats per character) of model on the training split
// (the first 90%) and the validation split (the last 10%) of the text in
// data_path, over consecutive windows of T + 1 characters. A character
// outside the model's vocabulary is an error. Either output may be NULL to
// skip that split. Returns 0, or -1 with err.
int train_eval(const GptModel *model, const char *data_path, int threads, double *train_loss,
               double *val_loss, Err err);
// The same, calling progress (may be NULL) after each batch of windows with
// the windows done and the windows in all (both splits).
typedef void (*TrainEvalProgressFn)(int64_t done, int64_t total, void *user);
int train_eval_progress(const GptModel *model, const char *data_path, int threads, double *train_loss,
                        double *val_loss, TrainEvalProgressFn progress, void *user, Err err);

// Training speed for `make bench`: tokens per second of whole steps
// (forward, backward, AdamW) of a model of shape cfg on B sequences of
// random tokens, timed over `steps` steps after one untimed step. Returns 0,
// or -1 with err (out of memory).
int train_benchmark(GptConfig cfg, int B, int steps, int threads, double *tokens_per_s, Err err);

// ---------------------------------------------------------------------------
// Layers. Shapes use the legend above; "rows" is the number of token rows.

// out (N, OC) = inp (N, IC) @ w (IC, OC) + b (OC).  torch: F.linear / x @ W + b
void linear_forward(float *out, const float *inp, const float *w, const float *b, Pool *pool,
                    int N, int IC, int OC);
// dinp (N, IC) += dout @ w^T; dw (IC, OC) += inp^T @ dout; db (OC) += sum of dout rows.
// wt (OC, IC) is scratch for w transposed. dinp may be NULL.
void linear_backward(float *dinp, float *dw, float *db, float *wt, const float *dout,
                     const float *inp, const float *w, Pool *pool, int N, int IC, int OC);

// LayerNorm's forward pass is ops_layernorm (mean and rstd (N) saved); its
// backward: dinp (N, C) += d loss / d inp, dw, db (C) += their gradients.
void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                        const float *w, const float *mean, const float *rstd, int N, int C);

// The same over many rows on the pool. partial: layernorm_scratch(N, C)
// floats (the backward pass's per-chunk sums of dw and db, added in chunk
// order).
size_t layernorm_scratch(int N, int C);
void layernorm_forward_pool(float *out, float *mean, float *rstd, const float *inp,
                            const float *w, const float *b, Pool *pool, int N, int C);
void layernorm_backward_pool(float *dinp, float *dw, float *db, float *partial,
                             const float *dout, const float *inp, const float *w,
                             const float *mean, const float *rstd, Pool *pool, int N, int C);

// out (n) = GELU(inp) and dinp (n) += GELU'(inp) * dout: ops_gelu and
// ops_gelu_backward over n elements on the pool.  F.gelu(x, approximate="tanh")
void gelu_forward_pool(float *out, const float *inp, Pool *pool, int64_t n);
void gelu_backward_pool(float *dinp, const float *inp, const float *dout, Pool *pool, int64_t n);

// Causal multi-head self-attention of q, k, v (B, T, C) into out (B, T, C);
// att (B, H, T, T) keeps the softmax weights (0 above the diagonal).
//   att = softmax(q @ k^T / sqrt(D) + causal mask); out = att @ v
// scratch: threads * (D * T) floats.
void attention_forward(float *out, float *att, const float *q, const float *k, const float *v,
                       float *scratch, Pool *pool, int B, int T, int C, int H);
// dq, dk, dv (B, T, C) += gradients; scratch: threads * (D*T + T*T) floats.
void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *att,
                        const float *q, const float *k, const float *v, float *scratch,
                        Pool *pool, int B, int T, int C, int H);
// The same with G key/value heads shared by groups of H / G query heads
// (G = H is the above): q, out, dq, dout (B, T, H*D), k, v, dk, dv
// (B, T, G*D); query head h reads key/value head h / (H / G), and a shared
// head's dk, dv are the sums over its query heads, added in head order.
void attention_forward_grouped(float *out, float *att, const float *q, const float *k,
                               const float *v, float *scratch, Pool *pool, int B, int T, int H,
                               int G, int D);
// The same with the band mask of sliding-window attention: query i sees
// keys i - W + 1 .. i only (W = 0: the causal mask alone, as above). The
// backward pass needs nothing more: the weights outside the band are 0.
void attention_forward_band(float *out, float *att, const float *q, const float *k, const float *v,
                            float *scratch, Pool *pool, int B, int T, int H, int G, int D, int W);
void attention_backward_grouped(float *dq, float *dk, float *dv, const float *dout,
                                const float *att, const float *q, const float *k, const float *v,
                                float *scratch, Pool *pool, int B, int T, int H, int G, int D);

// probs (N, V) = softmax(logits); losses (N) = -log probs[target]. Returns the
// mean loss. F.cross_entropy(logits, targets)
double crossentropy_forward(float *probs, float *losses, const float *logits,
                            const int32_t *targets, int N, int V);
// dlogits (N, V) += (probs - onehot(target)) * scale (scale = 1/N for a mean).
void crossentropy_backward(float *dlogits, const float *probs, const int32_t *targets,
                           float scale, int N, int V);

// out (M, N) = a (M, K) @ b (K, N) (+ bias (N)) (+ out when accumulate).
// a's element (i, k) is a[i * a_row + k * a_col], so a may be a transposed
// view; b's and out's rows are ldb and ldo floats apart. Each element is
// summed over k in order 0 .. K-1 whatever the split into threads, so the
// result does not depend on the number of threads. pool may be NULL.
void train_matmul(float *out, const float *a, const float *b, const float *bias, int accumulate,
                  Pool *pool, int64_t a_row, int64_t a_col, int ldb, int ldo, int M, int K,
                  int N);
// The same with plain loops: the reference the fast kernel is tested against.
void train_matmul_plain(float *out, const float *a, const float *b, const float *bias,
                        int accumulate, int64_t a_row, int64_t a_col, int ldb, int ldo, int M,
                        int K, int N);

// The products of attention skip what the causal mask makes zero, about half
// of the work. For a (T, T) matrix of weights, row i only has entries at
// columns j <= i, so tile by tile (the kernel's rows i0 .. end-1):
//   TRAIN_CAUSAL_COLS   out (T, N) with columns j < end only (scores,
//                       datt; the caller zeroes the rest)
//   TRAIN_CAUSAL_K_LE   a holds att: the sum over k stops at end
//   TRAIN_CAUSAL_K_GE   a holds att^T: the sum over k starts at i0
// The terms skipped are exact zeros, so the result is the full product's.
// Strides as in train_matmul; runs on the calling thread, and copies b into
// this thread's ops_pack_buffer (the caller must not be holding it).
enum { TRAIN_CAUSAL_COLS, TRAIN_CAUSAL_K_LE, TRAIN_CAUSAL_K_GE };
void train_matmul_causal(float *out, const float *a, const float *b, int mode, int accumulate,
                         int64_t a_row, int64_t a_col, int ldb, int ldo, int T, int K, int N);

// ---------------------------------------------------------------------------
// The whole model: activations saved by the forward pass for the backward.

typedef struct TrainState TrainState;

// Buffers for batches of up to B sequences of T tokens of a model of shape
// cfg. NULL when memory could not be had.
TrainState *train_state_new(GptConfig cfg, int B, Pool *pool);
void train_state_free(TrainState *s);
// logits (b, T, V) of the last train_forward.
const float *train_state_logits(const TrainState *s);
// Forward pass of b (<= B) sequences of T tokens inputs (b, T); with targets
// (b, T) returns the mean loss (else 0). model params as in gpt.h.
double train_forward(TrainState *s, const float *params, const int32_t *inputs,
                     const int32_t *targets, int b);
// Backward pass of the last forward (targets needed): grads (P) += d loss / d params.
void train_backward(TrainState *s, float *grads, const float *params, const int32_t *inputs,
                    const int32_t *targets, int b);

// Gives params (P) the initial values of training, as gpt_tensor describes
// each tensor: normal with its init_std (0.02 for the embeddings and
// matrices, the projections into the residual stream scaled by 1/sqrt(2L)),
// biases 0, LayerNorm weights 1. Deterministic in seed. Returns 0, or -1
// when memory could not be had.
int train_init_params(float *params, GptConfig cfg, uint64_t seed);
// decay (P) = 1 where AdamW's weight decay applies (gpt_tensor's decay: the
// matrices and embeddings), else 0. params (P) is any buffer of the model's
// size; only its layout is used. Returns 0, or -1 when memory could not be had.
int train_decay_mask(uint8_t *decay, float *params, GptConfig cfg);

// ---------------------------------------------------------------------------
// AdamW with the global gradient norm clipped.
//   torch.nn.utils.clip_grad_norm_(params, grad_clip)
//   torch.optim.AdamW(params, lr, betas=(beta1, beta2), eps, weight_decay)

// Doubles of scratch train_adamw_update needs for P parameters.
size_t train_adamw_scratch(size_t P);
// Clips grads (P) to the global norm r->grad_clip and applies one AdamW
// step (step 0-based, learning rate lr) to params, m, v (P); decay (P) as
// train_decay_mask makes it. Returns the norm before clipping; the result
// does not depend on the number of threads.
float train_adamw_update(float *params, float *m, float *v, float *grads, const uint8_t *decay,
                         double *scratch, const TrainConfig *r, float lr, int step, Pool *pool,
                         size_t P);

// ---------------------------------------------------------------------------
// Everything a run of training steps holds, allocated at once (train_run and
// train_benchmark): the threads, the activations, the parameters with their
// gradients and AdamW moments, the decay mask and a batch.

typedef struct {
    Pool *pool;          // r.threads threads
    TrainState *s;       // activations of batches of B sequences
    float *memory;       // (4, P) the four below, one allocation
    float *params;       // (P) the model, laid out as gpt.h says
    float *grads;        // (P) d loss / d params
    float *m, *v;        // (P) AdamW's first and second moments
    uint8_t *decay;      // (P) train_decay_mask
    double *partial;     // (train_adamw_scratch(P)) AdamW's scratch
    int32_t *inputs;     // (B, T) a batch's tokens
    int32_t *targets;    // (B, T) each one's next token
} TrainBuffers;

// Allocates b for a model of shape cfg, batches of B and threads threads
// and fills b->decay; the numbers in params, grads, m, v are left to the
// caller. Returns 0, or -1 when memory (or a thread) could not be had, b then
// holding nothing to free. train_buffers_free(b) releases it all.
int train_buffers_new(TrainBuffers *b, GptConfig cfg, int B, int threads);
void train_buffers_free(TrainBuffers *b);

// ---------------------------------------------------------------------------
// The loop of training steps, whatever the architecture: train_run's for the
// char GPT, llama_train_run's (train_llama.h) for the LLaMA-style model.

// What the loop asks of a model: how a window of the text becomes inputs and
// targets, and the forward and backward passes over b <= B of them.
typedef struct {
    void *ctx;   // the architecture's state (activations, views of the weights)
    int B, T;    // sequences a batch holds, positions per sequence
    // inputs, targets (T) of the window of the text at tokens + start
    void (*window)(int32_t *inputs, int32_t *targets, const int32_t *tokens, int64_t start, int T);
    // the mean loss of inputs, targets (b, T) under params (P)
    double (*forward)(void *ctx, const float *params, const int32_t *inputs, const int32_t *targets,
                      int b);
    // grads (P) += its gradient (after forward on the same batch)
    void (*backward)(void *ctx, float *grads, const float *params, const int32_t *inputs,
                     const int32_t *targets, int b);
} TrainArch;

// Everything train_loop works on, set up by the caller.
typedef struct {
    TrainArch arch;
    const TrainConfig *r;     // the recipe (r->ckpt_path set)
    const TrainText *text;    // the text, and its train_text_hash
    uint64_t text_hash;
    int64_t n_train;          // tokens of the training split
    Pool *pool;
    float *params, *grads, *m, *v;   // (P)
    const uint8_t *decay;     // (P)
    double *partial;          // (train_adamw_scratch(P))
    size_t P;
    int32_t *inputs, *targets;   // (B, T)
} TrainLoop;

// Steps from *step (done so far; *rng the batch generator's state then) to
// r->iters, as train_run says: progress is called before the first step and
// after each, evaluations and checkpoints as the recipe asks, SIGINT and
// SIGTERM stop after a step with a checkpoint. pr is filled by the caller
// (shape, text, threads) and updated here; res likewise. Returns TRAIN_OK,
// TRAIN_STOPPED or TRAIN_FAILED with err.
int train_loop(const TrainLoop *lp, int *step, uint64_t *rng, TrainProgress *pr,
               TrainProgressFn progress, void *user, TrainResult *res, Err err);

// The mean loss of windows as train_loss_windows_progress below, for any
// architecture; inputs, targets (a->B, a->T) are scratch.
double train_arch_loss_windows(const TrainArch *a, const float *params, const int32_t *tokens,
                               int64_t start, int64_t end, int64_t max_windows, int32_t *inputs,
                               int32_t *targets, TrainEvalProgressFn progress, void *user,
                               int64_t done, int64_t total);

// Mean loss of windows of tokens start .. end-1: window w feeds T tokens and
// predicts each next one. With max_windows (> 0) smaller than the number of
// windows, that many are taken evenly spaced. inputs and targets (B, T) are
// scratch. NAN when no window fits.
double train_loss_windows(TrainState *s, const float *params, const int32_t *tokens,
                          int64_t start, int64_t end, int64_t max_windows, int32_t *inputs,
                          int32_t *targets);
// The same, calling progress (may be NULL) after each batch with done + the
// windows done so far and total.
double train_loss_windows_progress(TrainState *s, const float *params, const int32_t *tokens,
                                   int64_t start, int64_t end, int64_t max_windows, int32_t *inputs,
                                   int32_t *targets, TrainEvalProgressFn progress, void *user,
                                   int64_t done, int64_t total);

#endif
