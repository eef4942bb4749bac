// kvvariant — the char GPT's cache done differently on purpose: the classic
// cache bugs of lesson 11, and the smaller numbers and other summing order
// of lesson 12. gpt_forward consults a GptState's variant (NULL: the plain
// cache, bit for bit equal to no cache) through the hooks below; all the
// work is here, so that gpt.c keeps reading like the chapter.
//
// Legend of dimension letters:
//   V vocabulary size      T context (max positions)   C embedding size
//   H heads                D head size = C / H         L blocks
//   N tokens fed at once   G tokens per key group (per-channel key scales)
//
// A "cached step" is a gpt_forward with offset > 0: it reads what earlier
// calls left in the cache. Every bug changes cached steps only, so a run
// without the cache stays the reference.
#ifndef KVDEMO_KVVARIANT_H
#define KVDEMO_KVVARIANT_H

#include "gpt.h"
#include "kvquant.h"

typedef enum {
    KV_BUG_NONE,
    KV_BUG_OFFSET,        // the new token's position embedding is position 0, not len(tokens) - 1
    KV_BUG_NO_APPEND,     // the new key and value are used for the step, never kept in the cache
    KV_BUG_STALE,         // past the context the cache is not reset: old keys stay, positions stop at T - 1
    KV_BUG_MASK,          // a causal mask aligned to the top-left corner: the one new row sees key 0 only
    KV_BUG_WRONG_LAYOUT,  // the transposed key cache (D, T) read as if it were (T, D)
    KV_BUG_NO_SCALE,      // scores not divided by sqrt(D)
    KV_NUM_BUGS
} KvBug;

struct GptVariant {
    KvBug bug;
    KvDtype kv_dtype;     // how the cache keeps keys and values (default fp32)
    KvDtype act_dtype;    // activations rounded to fp32 (nothing), bf16 or fp16
    int split_sum;        // 1: a cached one-row step sums each matmul in KV_SPLIT_SLICES slices, then adds the slices
    int key_group;        // G: tokens that share a key's per-channel scale (int8/int4), 32 unless set
    int prefill_len;      // (kept by the hooks) len after the last pass from offset 0
};
typedef struct GptVariant GptVariant;

enum { KV_KEY_GROUP = 32 };
// The slices a split_sum step cuts each matmul's sum into (a power of 2).
enum { KV_SPLIT_SLICES = 32 };

// "offset", "no-append", "stale", "mask", "wrong-layout", "no-scale" ("none" for KV_BUG_NONE).
const char *kvvariant_bug_name(KvBug bug);
// Returns 0, or -1 for an unknown name.
int kvvariant_bug_parse(KvBug *bug, const char *name);
// "offset, no-append, stale, mask, wrong-layout, no-scale"
extern const char KV_BUG_LIST[];

// ----------------------------------------------------------------------------
// The hooks gpt_forward and gpt_generate call when s->variant is set

// The position whose embedding row i of a pass at offset gets.
int kvvariant_position(const GptVariant *v, int offset, int i);
// The cache slot of row 0 of this pass (rows go to slot .. slot+n-1 and see
// slots 0 .. slot+i); offset unless a bug says otherwise.
int kvvariant_slot(GptVariant *v, int offset, int n);
// Block l's keys and values just written at slot .. slot+n-1, kept the way
// kv_dtype keeps them (rounded, or quantised and read back).
void kvvariant_store(const GptVariant *v, GptState *s, int l, int slot, int n);
// scores (pos+1) of query q (D) against key (D, T) for row i at position
// pos, times scale; returns how many of them the softmax takes.
int kvvariant_scores(const GptVariant *v, float *scores, const float *q, const float *key, float scale, int i,
                     int pos, int cached, int D, int T);
// out (N, Nout) = in (N, K) @ w (K, Nout) + b, then rounded to act_dtype.
void kvvariant_linear(const GptVariant *v, float *out, const float *in, const float *w, const float *b, int n,
                      int K, int Nout, int cached);
// x (n) rounded to act_dtype, in place.
void kvvariant_settle(const GptVariant *v, float *x, int64_t n);
// 1 when generation past the context keeps the cache (the stale bug).
int kvvariant_keeps_stale(const GptVariant *v);

// ----------------------------------------------------------------------------
// Validation loss through the cache

// Mean cross-entropy (nats per token) of tokens[start+1 .. end-1], in
// windows of T as `kvdemo eval` takes them (max_windows > 0: that many,
// evenly spaced), each window one pass from offset 0 whose keys and values
// go through v's cache (NULL: the plain one). Every row's logits come from
// the final LayerNorm and head of its own residual stream. Returns 0, or -1
// when memory ran out or the range holds no window.
// The windows kvvariant_eval scores in tokens[start .. end-1]: count of T
// there, and the index of the i-th of use of them (evenly spaced,
// i * count / use; with use >= count, every window: i).
int64_t kvvariant_window_count(int64_t start, int64_t end, int T);
int64_t kvvariant_window_index(int64_t i, int64_t count, int64_t use);

int kvvariant_eval(double *loss, const GptModel *m, GptVariant *v, const int32_t *tokens, int64_t start,
                   int64_t end, int64_t max_windows);

#endif
