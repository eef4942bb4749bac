// llama — the LLaMA-style model of the article's section 3.1: its weights,
// a char-level tokenizer, the forward pass over a batch with the preallocated
// cache_k / cache_v, sample_top_p, and the generate loop with input_text_mask.
//
// Legend of dimension letters:
//   V vocabulary size       C model size (dim)        L layers
//   H query heads           G key/value heads (n_kv_heads; H % G == 0)
//   D head size = C / H     F hidden size of SwiGLU   B max_batch_size
//   T max_seq_len           N tokens fed per row (seqlen)
//   S start_pos + seqlen: the cache rows a step reads
//
// G = H is multi-head attention (MHA), G = 1 multi-query (MQA), anything in
// between grouped-query (GQA): query head h reads key/value head h / (H / G).
//
// Linear weights are stored (in, out), so y = x @ W as in ops_matmul; a
// PyTorch nn.Linear holds W.T. There are no biases. docs/llama-format.md
// describes the model file byte for byte.
//
// kvdemo's own weights are random (llama_init_random): the text such a model
// writes is noise. The flow of tokens, positions and cache slots is the lesson.
#ifndef KVDEMO_LLAMA_H
#define KVDEMO_LLAMA_H

#include "fileio.h"   // Err
#include "kvcache.h"

#include <stddef.h>
#include <stdint.h>

// ---------------------------------------------------------------------------
// Configuration and weights

typedef struct {
    int vocab_size;       // V
    int dim;              // C
    int n_layers;         // L
    int n_heads;          // H
    int n_kv_heads;       // G
    int head_dim;         // D = C / H (derived; llama_config_check sets it)
    int hidden_dim;       // F
    int max_seq_len;      // T
    float rope_theta;     // 10000, the theta of precompute_freqs_cis
    float norm_eps;       // RMSNorm's eps
    int window;           // 0: full causal attention; W: sliding-window attention, a
                          // position attends to the last W only (the band mask;
                          // trained in with train --window; the model file's version 3)
} LlamaConfig;

// The small model of lesson 3: V = the default vocabulary, C 32, L 2, H 4,
// G 4, F 64, T 32. (The batch, B, is the run state's: llama_state_init.)
LlamaConfig llama_config_default(void);
// Checks that a configuration can be built (positive sizes, H % G == 0,
// C % H == 0, even D, sizes in range) and sets head_dim. Returns 0, or -1
// with a one-line message in err.
int llama_config_check(LlamaConfig *cfg, Err err);

// One layer's weights: pointers into LlamaModel.params, in file order.
typedef struct {
    float *attention_norm;   // (C)       RMSNorm weight before attention
    float *wq;               // (C, H*D)  attention.wq
    float *wk;               // (C, G*D)  attention.wk
    float *wv;               // (C, G*D)  attention.wv
    float *wo;               // (H*D, C)  attention.wo
    float *ffn_norm;         // (C)       RMSNorm weight before the feed-forward
    float *w1;               // (C, F)    feed_forward.w1 (gate)
    float *w2;               // (F, C)    feed_forward.w2 (down)
    float *w3;               // (C, F)    feed_forward.w3 (up)
} LlamaLayerParams;

typedef struct {
    float *tok_embeddings;   // (V, C)
    LlamaLayerParams *layers;// L of them
    float *norm;             // (C) final RMSNorm weight
    float *output;           // (C, V)
} LlamaParams;

// What one call of llama_forward did, kept in the state for a lesson to show
// (the model itself prints nothing). Shapes are those of the article's names
// at the line that names them.
typedef struct {
    int bsz, seqlen, start_pos;   // tokens (bsz, seqlen) fed at start_pos
    // cache_k[:bsz, write_from:write_to] = xk (and cache_v = xv)
    int write_from, write_to;     // start_pos, start_pos + seqlen
    // keys = cache_k[:bsz, :read_to] (and values from cache_v)
    int read_to;                  // start_pos + seqlen
    // The mask exists only when seqlen > 1 (else mask = None).
    int has_mask;
    const float *mask;            // (seqlen, read_to) or NULL; 0 or -inf (NULL also
                                  // when larger than LLAMA_MASK_FLOATS)
    const float *freqs_cis;       // (seqlen, D/2, 2) the rows start_pos.. used
    int xq_shape[4];              // (bsz, seqlen, H, D)   after xq.view
    int xk_shape[4];              // (bsz, seqlen, G, D)   after xk.view
    int keys_shape[4];            // (bsz, read_to, G, D)  cache_k[:bsz, :read_to]
    int values_shape[4];          // (bsz, read_to, G, D)
    int scores_shape[4];          // (bsz, H, seqlen, read_to)
    int64_t rows_computed;        // bsz * seqlen rows through every layer
} LlamaForwardInfo;

// The weights: read-only once made, so any number of run states (below)
// can share one model, as LLaMA's weights are shared by every request.
typedef struct {
    LlamaConfig cfg;
    uint32_t *vocab;         // (V) Unicode code points by token id; 0 for pad, bos, eos
    float *params;           // every weight, file order: one allocation
    size_t num_params;
    LlamaParams p;           // named views into params
    float *freqs_cis;        // (T, D/2, 2) cos, sin of position t times freq i
    struct Bpe *bpe;         // NULL: vocab above; else llama2.c's tokenizer (bpe.h,
                             // llama2c.h), owned: encode and decode go through it
} LlamaModel;

// What one run needs besides the weights: the preallocated cache of
// Attention.__init__ and the activations of one forward call. Made for a
// model by llama_state_init, for up to B = max_batch_size rows.
typedef struct {
    int max_batch_size;      // B: rows of cache_k / cache_v
    // The preallocated cache of every layer (kvcache.h: kvcache_prealloc.c):
    // cache.cache_k (L, B, T, G, D), element [l][b][t][g][d] at
    // cache_k[(((l*B + b)*T + t)*G + g)*D + d]; cache.cache_v likewise.
    KvPrealloc cache;
    float *mem;              // every buffer below but keep_scores: one allocation (bigmem_carve)
    size_t mem_bytes;        // its size
    // Activations of one forward call, sized for B * T rows (the largest call:
    // the whole batch recomputed from position 0).
    float *x;                // (B*T, C)    h, the residual stream
    float *xb;               // (B*T, C)    a normalised copy of h
    float *xq;               // (B*T, H*D)
    float *xk;               // (B*T, G*D)
    float *xv;               // (B*T, G*D)
    float *attn;             // (B*T, H*D)  attention output before wo
    float *xb2;              // (B*T, C)    wo(...) or w2(...), added to h
    float *hb;               // (B*T, F)    w1(x), then silu(w1(x)) * w3(x)
    float *hb2;              // (B*T, F)    w3(x)
    float *mask;             // (seqlen, S) the mask of the last call, for the trace
    size_t mask_floats;      // its room: min(T * T, LLAMA_MASK_FLOATS)
    float *last;             // (B, C)      h[:, -1, :] after the final norm
    LlamaForwardInfo info;   // what the last llama_forward did
    // For a lesson's trace, NULL unless the caller points it at room for
    // B * T * T floats (the caller owns it; llama_state_free leaves it
    // alone): each llama_forward copies into it layer 0's scores after the
    // softmax for query head 0, scores[:, 0] of shape (bsz, seqlen,
    // start_pos + seqlen), row-major. Keeping them changes no arithmetic.
    float *keep_scores;
    // NULL: the forward pass writes and reads `cache`; else this cache (the
    // caller's, of the model's L, G, D and the state's B), such as lesson
    // 14's rolling ones (kvcache_window.c), with which positions run past T.
    KvCache *kv;
    float *freqs_far;        // (T, D/2, 2) the rotary rows of positions past T, made as needed
    // The threads llama_forward's matmuls run on (pool.h): the caller's, made
    // once from --threads (pool_new_for) and freed after the state; NULL, as
    // llama_state_init leaves it, runs all on the calling thread. The
    // numbers are the same bits whatever the pool.
    Pool *pool;
} LlamaState;

// The mask is built as a tensor (for the trace) up to this many floats, 512 x
// 512; attention itself masks by the loop bound, so any context works.
#define LLAMA_MASK_FLOATS ((size_t)512 * 512)

// Number of floats of all weights of a model of this shape.
size_t llama_num_params(const LlamaConfig *cfg);
// The multiply-adds of the largest matrix product of one token (one row):
// max(C x C of wq, C x F of w1, C x V of the output). --threads 0 picks the
// thread count from it (pool_new_for, pool_threads_for).
int64_t llama_row_work(const LlamaConfig *cfg);
// Allocates a model of this shape: zero weights, empty vocabulary and
// freqs_cis. Returns 0, or -1 with a message.
int llama_new(LlamaModel *m, const LlamaConfig *cfg, Err err);
void llama_free(LlamaModel *m);

// The most rows a state's batch may hold (llama_state_init's range is 1 to it).
enum { LLAMA_MAX_BATCH = 64 };
// Allocates the cache and activations of a run of up to max_batch_size rows
// of model m's context. Returns 0, or -1 with a one-line message (a batch
// outside 1..LLAMA_MAX_BATCH, or no memory).
int llama_state_init(LlamaState *s, const LlamaModel *m, int max_batch_size, Err err);
void llama_state_free(LlamaState *s);
// Empties the cache and forgets the last call: the state is as new, its
// memory still reserved (keep_scores is left as it is).
void llama_state_reset(LlamaState *s);

// Seeded random weights (uniform in +-1/sqrt(fan_in), norms 1), drawn from
// rng.h's generator started at seed, 24 bits a weight. The text a
// model with these weights writes is noise.
void llama_init_random(LlamaModel *m, uint64_t seed);
// kvdemo's vocabulary: pad, bos, eos, '\n', printable ASCII, the characters
// of the default prompts and of 天气真好你好今天不错, and a few Chinese
// punctuation marks. llama_default_vocab_size() is its V.
int llama_default_vocab_size(void);
void llama_vocab_default(LlamaModel *m);   // needs cfg.vocab_size == that V

// The model file (docs/llama-format.md): reads and checks everything.
// Returns 0, or -1 with a one-line message naming the file and the problem.
int llama_load(LlamaModel *m, const char *path, Err err);
// Writes the model file through a temporary file (fileio.h): never half written; a
// path that exists and is not a regular file is refused.
int llama_save(const LlamaModel *m, const char *path, Err err);

// Copies src into dst with the key/value heads of each group mean-pooled
// (the GQA paper's conversion of a multi-head checkpoint): dst must have
// src's shape except n_kv_heads, which must divide src's.
void llama_pool_kv_heads(LlamaModel *dst, const LlamaModel *src);
// The other way: dst (G = H) is src (G < H) with key/value head g of src
// copied to every query head of its group, LLaMA-2's repeat_kv done once on
// the weights; the other weights are copied as they are. dst must have src's
// shape except n_kv_heads, which must be n_heads.
void llama_repeat_kv_heads(LlamaModel *dst, const LlamaModel *src);

// Bytes of cache_k + cache_v one token occupies: 2 * L * G * D * 4.
int64_t llama_cache_bytes_per_token(const LlamaConfig *cfg);

// ---------------------------------------------------------------------------
// Tokenizer: one token per Unicode code point of the vocabulary.

enum { LLAMA_PAD_ID = 0, LLAMA_BOS_ID = 1, LLAMA_EOS_ID = 2 };

// ids (n) = tokenizer.encode(text, bos, eos). Returns n, or -1 with a message
// naming the first character not in the vocabulary (or invalid UTF-8, or
// more than max_ids tokens), or -2 with a message when memory ran out (a
// llama2.c tokenizer's work space).
int llama_encode(int *ids, const LlamaModel *m, const char *text, int bos, int eos, int max_ids,
                 Err err);
// out = tokenizer.decode(ids (n)) as UTF-8; pad, bos and eos decode to
// nothing. Returns the number of bytes written (out always NUL-terminated).
size_t llama_decode(char *out, const LlamaModel *m, const int *ids, int n, size_t out_size);
// The UTF-8 text of one token ("" for pad, bos, eos); buf holds >= 5 bytes.
// With a tokenizer (m->bpe) the text is the tokenizer's, not buf.
const char *llama_token_text(char *buf, const LlamaModel *m, int id);
// The most bytes one token's text takes: 4 (a code point), or the
// tokenizer's longest piece.
int llama_token_bytes(const LlamaModel *m);

// ---------------------------------------------------------------------------
// Layers (exported for the tests and lessons)

// out (N, C) = RMSNorm(x (N, C)) * w (C)
// x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
void llama_rmsnorm(float *out, const float *x, const float *w, float eps, int N, int C);
// freqs_cis (T, D/2, 2) = precompute_freqs_cis(D, T, theta) as (cos, sin).
void llama_precompute_freqs_cis(float *freqs_cis, int D, int T, float theta);
// The n rows of positions from, from, + 1, ... of the same table, however
// far (a rolling cache's positions pass T): row t is the same bits as
// llama_precompute_freqs_cis's row t.
void llama_freqs_cis_rows(float *freqs_cis, int D, int from, int n, float theta);
// x (N, nh, D) rotated in place: row n by freqs_cis row n (N, D/2, 2).
// The pairs (x[2i], x[2i+1]) are complex numbers times freqs_cis[n, i].
void llama_apply_rotary_emb(float *x, const float *freqs_cis, int N, int nh, int D);

// logits (bsz, V) = Transformer.forward(tokens[:, 0:seqlen], start_pos)
// for tokens (bsz, seqlen) whose rows are `stride` ints apart (so tokens +
// prev_pos of a (bsz, total_len) array is tokens[:, prev_pos:cur_pos]).
// Writes the state's cache rows [start_pos, start_pos + seqlen) and reads
// [0, that end); needs bsz <= B and start_pos + seqlen <= T (any start_pos
// with a rolling cache in s->kv). With cfg.window W, row i attends to
// positions start_pos + i - W + 1 .. start_pos + i only. Fills s->info.
void llama_forward(float *logits, LlamaState *s, const LlamaModel *m, const int *tokens,
                   int start_pos, int bsz, int seqlen, int stride);

// ---------------------------------------------------------------------------
// Sampling

// sample_top_p(probs (V), p) of the LLaMA code, with the draw made explicit:
//   probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True)
//   probs_sum = torch.cumsum(probs_sort, dim=-1)
//   mask = probs_sum - probs_sort > p
//   probs_sort[mask] = 0.0
//   probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
//   next_token = torch.multinomial(probs_sort, num_samples=1)  -- here: the
//     first k whose running sum of probs_sort exceeds `uniform` (inverse CDF;
//     the last kept token if rounding leaves none)
//   next_token = torch.gather(probs_idx, -1, next_token)
// sorted (V) and order (V) receive probs_sort (masked and renormalised) and
// probs_idx; ties sort by token id. Returns the token id.
int llama_sample_top_p(float *sorted, int *order, const float *probs, float p, float uniform,
                       int V);

// ---------------------------------------------------------------------------
// LLaMA.generate

// One step of the loop, handed to the hook after the token is written.
typedef struct {
    int step;                      // 1, 2, ...
    int prev_pos, cur_pos;         // forward(tokens[:, prev_pos:cur_pos], prev_pos)
    int bsz, total_len;
    const int *tokens;             // (bsz, total_len) after this step's write
    const unsigned char *input_text_mask;   // (bsz, total_len) tokens != pad_id at the start
    const LlamaForwardInfo *fwd;   // the forward call of this step
    const float *logits;           // (bsz, V)
    const float *probs;            // (bsz, V) softmax(logits / temperature), NULL at temperature 0
    const int *sampled;            // (bsz) what sampling (or argmax) chose
    const int *next_token;         // (bsz) written to tokens[:, cur_pos]
    const unsigned char *kept;     // (bsz) 1 where input_text_mask kept a prompt token
} LlamaStep;
typedef void (*LlamaStepHook)(const LlamaStep *s, void *ctx);

typedef struct {
    int max_gen_len;
    float temperature;   // 0: argmax
    float top_p;
    int use_cache;       // 0: every step recomputes tokens[:, 0:cur_pos] from 0
    uint64_t seed;       // of the draws: rng.h's generator started at seed, one
                         // uniform float (24 bits) per row and step
    LlamaStepHook hook;  // NULL, or called after each step
    void *hook_ctx;
} LlamaGenOptions;

// Everything a generation produced; allocated once for the state's B and T.
typedef struct {
    int bsz, total_len, min_prompt_size, max_prompt_size, n_steps;
    int prompt_len[LLAMA_MAX_BATCH]; // (bsz) len(prompt_tokens[k]), bos included
    int *tokens;                   // (B, T) as the loop left it (row stride total_len)
    unsigned char *input_text_mask;// (B, T) likewise
    float *logits;                 // (T, B, V) step s's logits at s * bsz * V
    float *probs;                  // (B, V) scratch
    float *sorted;                 // (V) scratch of sample_top_p
    int *order;                    // (V) scratch of sample_top_p
    int *sampled, *next_token;     // (B)
    unsigned char *kept;           // (B)
    char **text;                   // (B) decoded, cut at len(prompt) + max_gen_len and eos
    double seconds;                // forward passes and sampling only (not the hook)
    int64_t rows_computed;         // sum over steps of bsz * seqlen
} LlamaGeneration;

int llama_generation_new(LlamaGeneration *g, const LlamaState *s, const LlamaModel *m, Err err);
void llama_generation_free(LlamaGeneration *g);

// LLaMA.generate(prompts, max_gen_len, temperature, top_p) as in the article,
// with the prompts encoded with bos. Returns 0, or -1 with a message (a
// character not in the vocabulary, more prompts than B, prompts too long).
// g must have been made for s (llama_generation_new).
int llama_generate(LlamaGeneration *g, LlamaState *s, const LlamaModel *m,
                   const char *const *prompts, int n_prompts, const LlamaGenOptions *opt,
                   Err err);

#endif
