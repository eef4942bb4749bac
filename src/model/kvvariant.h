// kvvariant — the char GPT's cache done differently on purpose, as lessons
// 11 and 12 and the commands' --bug and --kv-dtype ask: which kinds of cache
// (kvcache.h) and which arithmetic (lowprec.h) a GptState runs with, and the
// validation loss through such a cache. The kinds do the work
// (kvcache_faulty.c, kvcache_quant.c); gpt.c knows none of this.
//
// Legend of dimension letters:
//   V vocabulary size      T context (max positions)   C embedding size
//   H heads                D head size = C / H         L blocks
//   N tokens fed at once   G tokens per key group (per-channel key scales)
#ifndef KVDEMO_KVVARIANT_H
#define KVDEMO_KVVARIANT_H

#include "gpt.h"
#include "kvquant.h"

// What a run asks for; all zero is the plain cache, bit for bit equal to no cache.
struct GptVariant {
    KvBug bug;            // lesson 11: a faulty cache (kvcache_faulty.c)
    KvDtype kv_dtype;     // how the cache keeps keys and values (default fp32)
    KvDtype act_dtype;    // activations rounded to fp32 (nothing), bf16 or fp16
    int split_sum;        // 1: a cached one-row step sums each matmul in KV_SPLIT_SLICES slices, then adds the slices
    int key_group;        // G: tokens that share a key's per-channel scale (int8/int4), 32 unless set
};
typedef struct GptVariant GptVariant;

enum { KV_KEY_GROUP = 32 };
// The slices a split_sum step cuts each matmul's sum into (a power of 2).
enum { KV_SPLIT_SLICES = LOWPREC_SLICES };

// "offset", "no-append", "stale", "mask", "wrong-layout", "no-scale", "no-rollback",
// "off-by-one" ("none" for KV_BUG_NONE).
const char *kvvariant_bug_name(KvBug bug);
// Returns 0, or -1 for an unknown name.
int kvvariant_bug_parse(KvBug *bug, const char *name);
// "offset, no-append, stale, mask, wrong-layout, no-scale, no-rollback, off-by-one"
extern const char KV_BUG_LIST[];

// ----------------------------------------------------------------------------
// A state running a variant

// The caches a variant needs beside the state's own: a quantised one when
// kv_dtype is not fp32, a faulty one over it (or over the state's own) when
// there is a bug.
typedef struct {
    GptState *s;       // the state they serve, NULL when nothing is attached
    KvQuant quant;
    KvFaulty faulty;
} KvVariantCaches;

// From now on s runs v (NULL: the plain cache; then nothing is reserved):
// its caches reserved in vc, s pointed at them and reset, its arithmetic
// set. Returns 0, or -1 when memory ran out (s is then as it was).
int kvvariant_attach(KvVariantCaches *vc, GptState *s, const GptVariant *v);
// s back to its own cache and plain arithmetic, vc's caches freed.
void kvvariant_detach(KvVariantCaches *vc);

// ----------------------------------------------------------------------------
// Validation loss through the cache

// Mean cross-entropy (nats per token) of tokens[start+1 .. end-1], in
// windows of T as `kvdemo eval` takes them (max_windows > 0: that many,
// evenly spaced), each window one pass from offset 0 whose keys and values
// go through v's cache (NULL: the plain one). Every row's logits come from
// the final LayerNorm and head of its own residual stream, on pool's threads
// (NULL: the calling thread). Returns 0, or -1 when memory ran out or the
// range holds no window.
// The windows kvvariant_eval scores in tokens[start .. end-1]: count of T
// there, and the index of the i-th of use of them (evenly spaced,
// i * count / use; with use >= count, every window: i).
int64_t kvvariant_window_count(int64_t start, int64_t end, int T);
int64_t kvvariant_window_index(int64_t i, int64_t count, int64_t use);

int kvvariant_eval(double *loss, const GptModel *m, GptVariant *v, const int32_t *tokens, Pool *pool,
                   int64_t start, int64_t end, int64_t max_windows);

// kvvariant_eval, calling on_window(done, total, user) after each window
// (for a progress line; NULL: none).
typedef void (*KvEvalProgressFn)(int64_t done, int64_t total, void *user);
int kvvariant_eval_each(double *loss, const GptModel *m, GptVariant *v, const int32_t *tokens, Pool *pool,
                        int64_t start, int64_t end, int64_t max_windows, KvEvalProgressFn on_window, void *user);

#endif
