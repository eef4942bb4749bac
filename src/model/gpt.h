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
//
// The model, as the chapter's classes compute it (LayerNorm eps 1e-5, GELU
// with the tanh approximation, D = C / H):
//   x = wte[tokens] + wpe[offset .. offset+N-1]                GPTEmbedding
//   per block:  x = x + attn(LN1(x)) @ Wo + bo                 GPTAttention
//               x = x + GELU(LN2(x) @ W1 + b1) @ W2 + b2       GPTFeedForward
//   logits = LN_f(x) @ W_head + b_head                         GPTOutput
//
// Errors from the outside world (files, memory, text) come back as -1 with
// one line in err naming the problem; a programmer's mistake (a token out of
// range, a position past the context) is an assert.
#ifndef KVDEMO_GPT_H
#define KVDEMO_GPT_H

#include "fileio.h"   // Err
#include "kvcache.h"
#include "lowprec.h"
#include "sampler.h"

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
    float *params;           // every parameter, file order, in bigmem (huge pages)
    size_t num_params;
    GptParams p;             // named views into params
    // The blocks' linear weights again in the matmul's panel order
    // (gpt_pack), read by passes of many rows; NULL until packed.
    float *packed;
    size_t packed_floats;
    GptBlockParams *packed_blocks;   // (L) wq, wk, wv, wo, w1, w2 point into packed; the rest NULL
} GptModel;

// Number of floats of all parameters of a model of this shape.
size_t gpt_num_params(GptConfig cfg);
// Points p's fields into params (num_params floats, file order). blocks must
// hold cfg.L entries.
void gpt_params_carve(GptParams *p, GptBlockParams *blocks, float *params, GptConfig cfg);

// ----------------------------------------------------------------------------
// The model: making, loading, saving, freeing

// The model file's magic and version (docs/model-format.md).
// Version 2 ends with a checksum; version 1 files (without one) still load.
#define GPT_MAGIC "KVGP"
enum { GPT_VERSION = 2, GPT_VERSION_UNCHECKED = 1 };

// Presets: "seed" is the chapter's model (T=256, C=384, H=6, L=6) on the
// tinyshakespeare vocabulary (V=65); "tiny" (T=32, C=64, H=4, L=2) has the
// same vocabulary and runs in a blink, for tests and classrooms.
// Fills cfg; returns 0, or -1 for an unknown name.
int gpt_preset(GptConfig *cfg, const char *name);
// The 65 characters of tinyshakespeare, sorted: the presets' vocabulary, as
// text ("\n !$&',-.3:;?ABC...xyz"); every one is a single byte.
extern const char GPT_SHAKESPEARE_VOCAB[];

// Checks a configuration against the loader's ranges (V 1..1114112, T
// 1..65536, C 1..16384 divisible by H, L 1..256, at most 2**31 parameters).
// Returns 0, or -1 with err naming the size that is wrong.
int gpt_check_config(GptConfig cfg, Err err);

// A model of this shape with every parameter 0; vocab (V code points) is
// copied. Returns 0, or -1 with err (bad shape, bad vocabulary, no memory).
int gpt_new(GptModel *m, GptConfig cfg, const uint32_t *vocab, Err err);
// gpt_new, then the chapter's initialisation drawn from numpy's RandomState:
// np.random.seed(seed), then for every tensor in file order, LayerNorm
// weights 1, biases (LayerNorm's and the linear layers') 0, every other
// tensor np.random.normal(0, 0.02, shape).astype(np.float32).
int gpt_init_random(GptModel *m, GptConfig cfg, const uint32_t *vocab, uint32_t seed, Err err);
// Reads a model file, checking everything: magic, version, each size, C
// divisible by H, the file's length against the sizes, the code points
// (valid, not surrogates, distinct), every weight finite, nothing after the
// last tensor. Returns 0, or -1 with err = "PATH: what is wrong".
int gpt_load(GptModel *m, const char *path, Err err);
// Only the shape of the model in path, from its header (checked as gpt_load
// checks it, the file's size included); the weights are not read. For
// `kvdemo memory --model FILE`. Returns 0, or -1 with err.
int gpt_load_config(GptConfig *cfg, const char *path, Err err);
// Writes the model to path through a temporary file (fileio.h), so path is never left
// half written; a path that exists and is not a regular file is refused, and
// so is a weight that is not finite (gpt_load would refuse the file).
// Returns 0, or -1 with err.
int gpt_save(const GptModel *m, const char *path, Err err);
void gpt_free(GptModel *m);
// Copies the blocks' linear weights once into the matmul's panel order, so
// that passes of many rows (without the cache) read them in order; the
// numbers do not change, bit for bit. Call it again after changing the
// weights. Returns 0, or -1 without memory (the model then works unpacked).
int gpt_pack(GptModel *m);

// One tensor of the model, in file order: 0 token_embedding,
// 1 position_embedding, then 16 per block ("blocks.0.ln1.weight", ...), then
// ln_f.weight, ln_f.bias, head.weight, head.bias.
typedef enum { GPT_WEIGHT, GPT_BIAS, GPT_NORM_WEIGHT, GPT_NORM_BIAS } GptTensorKind;
typedef struct {
    char name[40];        // as in docs/model-format.md: "blocks.3.attn.key.weight"
    float *data;          // into GptModel.params
    size_t numel;
    int rows, cols;       // (rows, cols); vectors have rows = 1
    GptTensorKind kind;   // what it is initialised to (and whether it decays)
    float init_std;       // std of kvdemo train's normal initial values (0: a constant,
                          // 1 for NORM_WEIGHT, else 0); GPT-2's 0.02, scaled by
                          // 1/sqrt(2L) for the two projections into the residual
                          // stream. gpt_init_random follows the numpy chapter
                          // instead: 0.02 for every weight.
    int decay;            // 1: AdamW's weight decay applies (the weights)
} GptTensor;

int gpt_num_tensors(GptConfig cfg);   // 2 + 16 L + 4
GptTensor gpt_tensor(const GptModel *m, int i);

// ----------------------------------------------------------------------------
// Text <-> tokens

// tokens (at most max_tokens) = the token ids of UTF-8 text. Returns how many,
// or -1 with err naming the first character outside the vocabulary (or the
// first invalid UTF-8 byte, or the length when it exceeds max_tokens).
int gpt_encode(int *tokens, const GptModel *m, const char *text, int max_tokens, Err err);
// out (cap bytes) = the UTF-8 text of tokens (n), NUL-terminated and cut to
// fit as snprintf does. Returns the length the whole text needs, without NUL.
size_t gpt_decode(char *out, size_t cap, const GptModel *m, const int *tokens, int n);

// ----------------------------------------------------------------------------
// The forward pass and its KV cache

// Everything one sequence needs, reserved once for the whole context: the
// activations of up to T tokens fed at once, and the cache of every block.
typedef struct {
    GptConfig cfg;
    int len;              // positions 0 .. len-1 are held in the cache
    float *x;             // (T, C) the residual stream of the fed tokens
    float *xn;            // (T, C) LayerNorm output
    float *q;             // (T, C) query, heads side by side: (N, H, D)
    float *k;             // (T, C) key of the fed tokens (then put in the cache)
    float *v;             // (T, C) value of the fed tokens (then put in the cache)
    float *att;           // (T, C) attention output, heads side by side
    float *proj;          // (T, C) lowprec's attn.output / mlp.fc2, before x += (the plain
                          // forward adds them into x as they are made)
    float *hidden;        // (T, F) mlp.fc1 output, then GELU of it
    float *logits;        // (V) logits of the last fed token
    float *mem;           // the one allocation all of the above live in (bigmem)
    size_t mem_bytes;     // its size
    // The cache, exactly the chapter's layout, T positions reserved per block
    // (kvcache.h: kvcache_contig.c). Block l's key: element [h][d][t] at
    // cache.key[((l*H + h)*D + d)*T + t], the chapter's key (1, H, D, len)
    // transposed for query @ key; value: [h][t][d] at
    // cache.value[((l*H + h)*T + t)*D + d], value (1, H, len, D).
    KvContig cache;
    // Lesson 12's arithmetic of other hardware (lowprec.h): all zero, the
    // plain float32 pass. gpt_state_init zeroes it; the caller sets it.
    LowPrec lowprec;
    // The paged cache (kvcache_paged.c): a sequence's blocks of a pool
    // (kvpage.h), read through its block table; gpt_forward_paged binds it.
    KvPaged paged;
    // The cache gpt_forward appends to and attends through: &cache.base,
    // a caller's cache (gpt_state_use_cache), or &paged.base during
    // gpt_forward_paged.
    KvCache *kv;
    // The threads gpt_forward's matmuls, LayerNorms and attention heads run
    // on (pool.h): the caller's, made once from --threads (pool_new_for) and
    // freed after the state; NULL, as gpt_state_init leaves it, runs all on
    // the calling thread. The numbers are the same bits whatever the pool.
    Pool *pool;
} GptState;

// Reserves the state of one sequence of up to cfg.T positions. Returns 0, or
// -1 when memory ran out.
int gpt_state_init(GptState *s, GptConfig cfg);
void gpt_state_free(GptState *s);
// Drops the cache (len = 0); the memory stays reserved.
void gpt_state_reset(GptState *s);
// The shape of the char GPT's cache: B = 1, G = H, T positions of D = C / H.
KvShape gpt_cache_shape(GptConfig cfg);
// From now on gpt_forward appends to and attends through kv, the caller's
// (of gpt_cache_shape's shape; lesson 11's faulty cache, lesson 12's
// quantised one), and s is reset; kv NULL goes back to s's own contiguous
// cache.
void gpt_state_use_cache(GptState *s, KvCache *kv);

// Feeds tokens (n) at positions offset .. offset+n-1: their key and value go
// into the cache at those positions, row i attends to cache positions
// 0 .. offset+i, and the logits (V) of the last fed token are returned (they
// are s->logits). The cache must already hold positions 0 .. offset-1
// (offset <= s->len) and offset + n <= T; afterwards s->len = offset + n.
// offset 0 with n tokens is the chapter's pass without cache (the loop
// bound 0 .. i is its causal mask); n = 1 at offset len is its cached step,
// which attends to every cached key. Nothing is allocated; matmuls and
// attention heads run on s->pool's threads.
// Row i computes the same numbers in both cases, bit for bit.
const float *gpt_forward(GptState *s, const GptModel *m, const int *tokens, int n, int offset);

// ----------------------------------------------------------------------------
// Generation, as the chapter's GPTTrainerWithCache.generate

// What one generation step did, for a caller that shows or times the steps.
typedef struct {
    int step;               // 0 .. steps-1
    int cached;             // 1: only the newest token was fed, against the cache
    int n;                  // tokens fed
    int offset;             // position of the first fed token
    int cache_len;          // positions in the cache after the step: the
                            // chapter's key (1, H, D, cache_len)
    int token;              // the token drawn
    const float *logits;    // (V) the logits it was drawn from
    const float *probs;     // (V) the sampler's probabilities
    double seconds;         // wall time of the forward pass and the draw
} GptStep;
// Called after every step; a nonzero return stops the generation.
typedef int (*GptStepFn)(void *ctx, const GptStep *step);

// tokens holds n_prompt >= 1 prompt tokens and has room for n_prompt + steps.
// Each step: the first, without the cache, or once len(tokens) > T, feeds
// the last T tokens at offset 0 (rebuilding the cache); with use_cache and a
// cache, it feeds only tokens[-1] at offset len(tokens) - 1 (past T, at the
// position kvcache_make_room gives, when the cache makes room). Then it draws
// the next token with the sampler and appends it. Returns the number of
// tokens at the end (n_prompt + steps, unless on_step stopped it). on_step
// may be NULL; nothing is printed.
int gpt_generate(int *tokens, GptState *s, const GptModel *m, Sampler *sampler, int n_prompt, int steps,
                 int use_cache, GptStepFn on_step, void *ctx);
// A conversation's next turn with the cache kept: s's cache holds the
// positions 0 .. s->len-1 of tokens, built from exactly those tokens (the
// turn before: its last drawn token not fed yet), and tokens holds len >
// s->len of them (the new turn's text appended) with room for steps more.
// The first step feeds only tokens s->len .. len-1, at offset s->len (the
// turn's prefill: what the cache does not hold); the others feed one token
// each, as gpt_generate with use_cache. Each row is the one a fresh run on
// all len tokens computes, so the text is that run's, bit for bit. Returns
// the number of tokens at the end.
int gpt_generate_more(int *tokens, GptState *s, const GptModel *m, Sampler *sampler, int len, int steps,
                      GptStepFn on_step, void *ctx);

// ----------------------------------------------------------------------------
// Costs, for lessons and benchmarks

// What gpt_forward of n tokens at offset reads and computes.
typedef struct {
    double matmul_flops;      // 2 * multiply-adds of the linear layers (head: last row only)
    double attention_flops;   // 2 * multiply-adds of query @ key and weights @ value
    double weight_bytes;      // parameters read: every block, ln_f and head, n rows of each embedding
    double cache_bytes;       // keys and values read from the cache
    double cache_write_bytes; // keys and values written to it
} GptCost;
GptCost gpt_cost(GptConfig cfg, int n, int offset);

// The multiply-adds of the largest matrix product of one token (one row):
// max(C x 4C of fc1, C x V of the head). --threads 0 picks the thread count
// from it (pool_new_for, pool_threads_for).
int64_t gpt_row_work(GptConfig cfg);

#endif
