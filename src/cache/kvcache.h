// kvcache — the KV cache as a type of its own: one interface that every kind
// of cache implements and that the models use to write and read keys and
// values. A model appends the new positions' keys and values and asks the
// cache to attend; how the rows are laid out, and the order in which their
// sums are taken, belong to the kind.
//
// Legend of dimension letters:
//   L layers          B batch rows reserved (max_batch_size)
//   T positions reserved per row (the context, max_seq_len)
//   H query heads     G key/value heads (n_kv_heads; H % G == 0)
//   D head size       N positions fed at once per row (seqlen)
//   S positions a row reads: pos + N
//
// Query head h reads key/value head h / (H / G): G = H is multi-head
// attention (the char GPT), G = 1 multi-query, anything between grouped-query.
//
// What every kind does, for layer l and the rows b = 0 .. bsz-1 of a batch:
//   append  the keys and values k, v (bsz, N, G*D) of positions pos .. pos+N-1
//   attend  out (bsz, N, H*D) = softmax(q k^T / sqrt(D)) v for the queries
//           q (bsz, N, H*D) at positions pos .. pos+N-1, where row i sees the
//           positions 0 .. pos+i only: the causal rule
//   len     positions 0 .. len-1 are held by every layer
//   truncate  keep positions 0 .. len-1 (speculative decoding's rollback)
//   reset   hold nothing (the memory stays reserved)
//   bytes   the bytes allocated for the keys and values
//   free
//
// The kinds (one file each):
//   kvcache_contig.c    the numpy chapter's layout, the char GPT's cache: one
//                       sequence (B = 1), G = H, T positions reserved per layer
//                       key   [l][h][d][t] at key[((l*H + h)*D + d)*T + t]
//                             (the chapter's key (1, H, D, len), transposed for q @ key)
//                       value [l][h][t][d] at value[((l*H + h)*T + t)*D + d]
//                             (the chapter's value (1, H, len, D))
//   kvcache_prealloc.c  LLaMA's preallocated cache_k / cache_v of the article's
//                       section 3.1, (max_batch_size, max_seq_len, n_kv_heads,
//                       head_dim) per layer:
//                       cache_k [l][b][t][g][d] at cache_k[(((l*B + b)*T + t)*G + g)*D + d]
//                       cache_v likewise
//   kvcache_paged.c     lesson 6.1's paged cache (kvpage.h): one sequence's
//                       positions in a pool's blocks of B, position t in block
//                       table[t / B], slot t % B, each block laid out as the
//                       contiguous cache with B for T
//   kvcache_quant.c     lesson 12's smaller cache: the contiguous layout's
//                       numbers kept as bf16 / fp16 bits, or int8 / int4
//                       codes with their scales, read back to attend
//   kvcache_faulty.c    lesson 11's bugs: a cache over another that goes
//                       wrong on purpose
//   kvcache_window.c    lesson 14's caches for text longer than the context:
//                       a rolling buffer of W rows (Mistral: position p in
//                       slot p mod W) and S sinks + a window (StreamingLLM:
//                       positions 0 .. S-1 kept, then a rolling W - S)
//
// Each kind computes attention in its model's own order of operations, so
// that a model keeps its numbers bit for bit; tests/test_kvcache.c holds
// every kind against the same plain loops.
#ifndef KVDEMO_KVCACHE_H
#define KVDEMO_KVCACHE_H

#include "kvquant.h"
#include "pool.h"

#include <stddef.h>

typedef struct {
    int L, B, T, H, G, D;
} KvShape;

typedef struct KvCache KvCache;

// A kind's functions. kvcache.c checks the arguments once, for every kind,
// then calls these.
typedef struct {
    const char *name;   // "contiguous", "preallocated", "paged"
    // Writes layer l's k, v (bsz, n, G*D) at positions pos .. pos+n-1.
    void (*append)(KvCache *c, int l, const float *k, const float *v, int bsz, int n, int pos);
    // out (bsz, n, H*D) from q (bsz, n, H*D); weights, when not NULL, gets
    // query head 0's softmax weights (bsz, n, pos+n), zero where masked; the
    // heads on pool's threads where the kind shares them (NULL: this thread).
    void (*attend)(KvCache *c, float *out, float *weights, const float *q, Pool *pool, int l, int bsz, int n,
                   int pos);
    // Keeps positions 0 .. len-1; NULL when there is nothing to do but set len
    // (rows past len are never read).
    void (*truncate)(KvCache *c, int len);
    // Forgets every position (len is then 0).
    void (*reset)(KvCache *c);
    void (*free)(KvCache *c);
    // The ones below may be NULL (kvcache_read_head, kvcache_position and
    // kvcache_make_room say what then).
    // Layer l, head g's keys of positions 0 .. S-1 as floats in the
    // contiguous layout, *key (D, T) rows T apart, *value (T, D): pointers
    // into the cache, or into buf (2*D*T floats) when the kind reads its
    // numbers back into floats there.
    void (*read_head)(KvCache *c, const float **key, const float **value, float *buf, int l, int g, int S);
    // The position a row fed at pos stands at (its position embedding).
    int (*position)(KvCache *c, int pos);
    // The sequence wants a position past T: the position to feed it at.
    int (*make_room)(KvCache *c);
} KvCacheKind;

// The part every kind begins with: a kind's own struct has it as its first
// member, `base`, so that &kind->base is the KvCache the models are handed.
struct KvCache {
    const KvCacheKind *kind;
    KvShape shape;
    int len;        // positions 0 .. len-1 are held by every layer
    size_t bytes;   // bytes allocated for the keys and values (not attention's scratch)
    int window;     // 0, or the band mask: a query at p sees p - window + 1 .. p only
                    // (sliding-window attention; the preallocated kind honours it)
    int rolling;    // 1: positions run on past T, the kind evicting the oldest (kvcache_window.c)
    int raw_keys;   // 1: keys come unrotated and the kind rotates them (positions within the cache)
};

// Writes layer l's keys and values k, v (bsz, n, G*D) of positions pos ..
// pos+n-1. Positions come in order: pos must be len (truncate first to feed
// a position again). len grows to pos + n when the last layer's rows come.
void kvcache_append(KvCache *c, int l, const float *k, const float *v, int bsz, int n, int pos);
// out (bsz, n, H*D) = softmax(q k^T / sqrt(D)) v of layer l for the queries
// q (bsz, n, H*D) at positions pos .. pos+n-1, row i against the keys and
// values of positions 0 .. pos+i: those held and those just appended.
// weights may be NULL; otherwise it gets query head 0's weights (bsz, n, pos+n).
// The work runs on pool, the caller's threads (its model state's; NULL: the
// calling thread): how many threads read the cache is the call's, not the
// cache's, and the numbers are the same bits whatever the pool.
void kvcache_attend(KvCache *c, float *out, float *weights, const float *q, Pool *pool, int l, int bsz, int n,
                    int pos);
// Positions held.
int kvcache_len(const KvCache *c);
// Keeps positions 0 .. len-1 (len <= kvcache_len); the next append is at len.
// What lies past it is never read again, bit for bit as if never written.
void kvcache_truncate(KvCache *c, int len);
// Holds nothing, as a new cache; the memory stays reserved.
void kvcache_reset(KvCache *c);
// Bytes allocated for the keys and values.
size_t kvcache_bytes(const KvCache *c);
// Frees what the kind allocated; a cache whose init failed frees as an
// empty one. The struct itself is the caller's.
void kvcache_free(KvCache *c);
// Layer l, head g's keys and values of positions 0 .. S-1 (S <= T) as
// floats, *key (D, T) rows T apart and *value (T, D), for code that attends
// in its own way: pointers into the cache, or into buf (2*D*T floats).
// Only the kinds with the contiguous layout's heads (G = H, B = 1) offer it.
void kvcache_read_head(KvCache *c, const float **key, const float **value, float *buf, int l, int g, int S);
// The position a row fed at pos (before it is appended) stands at: what
// its position embedding is taken for. pos for every honest kind.
int kvcache_position(KvCache *c, int pos);
// Called when a sequence that fills the cache (len = T) wants one more
// position: the position to feed the next token at, the kind keeping what
// lies before it, or -1 when the kind holds no more than T positions (the
// caller starts over, as the chapter's generate resets its cache).
int kvcache_make_room(KvCache *c);

// ----------------------------------------------------------------------------
// The kinds

// The contiguous cache of the numpy chapter (see above).
typedef struct {
    KvCache base;
    float *key;      // (L, H, D, T) transposed, as the chapter's key (1, H, D, len)
    float *value;    // (L, H, T, D) as the chapter's value (1, H, len, D)
    float *mem;      // key and value: one allocation (bigmem) of base.bytes
    float *scores;   // (H, R, T) scratch: the scores of R = OPS_ROWS_MAX query rows per head
    size_t scores_bytes;
    int tile;        // 0: attend plainly; else in tiles of `tile` keys with an online softmax
                     // (lesson 6.3, flash.h: flash_gpt_attention; weights are then not kept)
    float *flash;    // flash_gpt_scratch_floats of scratch when tile > 0
} KvContig;

// Reserves a contiguous cache of shape (B = 1 and G = H: the chapter's).
// Returns 0, or -1 when memory ran out (then kvcache_free(&c->base) is safe).
int kvcontig_init(KvContig *c, KvShape shape);
// Writes k, v (n, H*D) of layer l at slots slot .. slot+n-1 in the layout
// above, and nothing else: no length kept. kvcache_append's work, open to
// the lessons that put rows where the chapter would not (lesson 11's bugs,
// lesson 12's rounding read the same arrays).
void kvcontig_write(KvContig *c, int l, const float *k, const float *v, int n, int slot);
// From now on c attends in tiles of `tile` keys (FlashAttention's online
// softmax, flash-decoding for a one-row step), or plainly for tile 0; a
// property of this cache alone. Returns 0, or -1 when memory ran out (then
// c attends plainly).
int kvcontig_set_tile(KvContig *c, int tile);

// LLaMA's preallocated cache (see above).
typedef struct {
    KvCache base;
    float *cache_k;   // (L, B, T, G, D)
    float *cache_v;   // (L, B, T, G, D)
    float *mem;       // cache_k and cache_v: one allocation (bigmem) of base.bytes
    float *scores;    // (T) scratch: one row of scores, then its softmax
} KvPrealloc;

// Reserves a preallocated cache of shape. Returns 0, or -1 when memory ran
// out (then kvcache_free(&c->base) is safe).
int kvprealloc_init(KvPrealloc *c, KvShape shape);

// The paged cache (see above) of one sequence at a time.
struct KvSeq;
typedef struct {
    KvCache base;
    struct KvSeq *seq;   // the sequence written and read (kvpaged_bind)
    float *scores;       // (H, T) scratch: one row of scores per head
} KvPaged;

// Reserves the scratch of a paged cache of shape (B = 1, G = H); it holds no
// sequence until bound. Returns 0, or -1 when memory ran out.
int kvpaged_init(KvPaged *c, KvShape shape);
// From now on the cache is seq, holding its positions 0 .. len-1 (len <=
// seq->len). The blocks of the positions to be appended must be in seq's
// table already (kvseq_append): append writes into them, it does not
// reserve them. bytes becomes the blocks in the table.
void kvpaged_bind(KvPaged *c, struct KvSeq *seq, int len);

// One head of the contiguous kind's attention, for the kinds that read
// their numbers back into that layout: out (n, D) rows C apart from q
// (n, D) rows C apart, against key (D, T) and value (T, D) of positions
// 0 .. pos+n-1, row i seeing 0 .. pos+i; scores (R, T) scratch; weights,
// when not NULL, gets the softmax weights (n, pos+n), zero where masked.
void kvcontig_attend_head(float *out, float *weights, float *scores, const float *q, const float *key,
                          const float *value, int n, int pos, int C, int D, int T);

// A cache that keeps keys and values as bf16, fp16, int8 or int4 (lesson
// 12), with the contiguous kind's shape (B = 1, G = H), and reads them back
// into floats to attend (kvcache_quant.c). bf16 and fp16 keep each number's
// 16 bits; int8 and int4 keep codes with fp32 scales (kvquant.h): a value's
// D numbers share one scale per position and head; a key channel's numbers
// share one per group of `group` positions, KIVI's per-channel keys, the
// group quantised when its last position comes, its positions kept in fp32
// until then (the residual). int4 codes go two a byte, even index low.
// How far its attention is from the exact one on the numbers appended: when
// each key read back is within ek of the one appended and each value within
// ev (bf16 2^-9 |x|; fp16 2^-11 |x|, 2^-25 below 2^-14; int8 and int4 half
// a scale, scale = the largest |x| sharing it / QMAX; the residual's keys
// exact), a score q.k / sqrt(D) moves by at most delta = |q|_1 ek / sqrt(D),
// a weight by at most (e^(2 delta) - 1) times itself, and an output number
// by at most ev + (e^(2 delta) - 1) max |v| (tests/test_kvcache.c holds
// every dtype to it). A truncate into a complete group keeps its keys as
// read back, to be rounded again when the group fills: up to 2 ek there; a
// cut at a group's boundary keeps the bits.
typedef struct {
    KvCache base;
    KvDtype dtype;          // KV_BF16, KV_FP16, KV_INT8 or KV_INT4
    int group;              // positions that share a key channel's scale
    void *key;              // (L, H, D, T) 16-bit numbers, or codes
    void *value;            // (L, H, T, D) likewise
    float *value_scale;     // (L, H, T) int8 / int4: per position and head
    float *key_scale;       // (L, H, D, T / group) int8 / int4: per channel and complete group
    float *residual;        // (L, H, D, group) int8 / int4: the incomplete group's keys, slot t % group
    void *mem;              // all of the above: one allocation (bigmem), each array 64-byte aligned
    size_t mem_bytes;       // its size: base.bytes and the alignment's padding
    float *buf;             // (H, 2*D*T) scratch: each head's keys and values read back as floats
    float *scores;          // (H, R, T) scratch, R = OPS_ROWS_MAX
    size_t scratch_bytes;   // of buf and scores
} KvQuant;

// Reserves a quantised cache of shape (B = 1, G = H) keeping dtype (not
// KV_FP32: that is the contiguous kind), key scales shared by group
// positions. base.bytes is kvquant_cache_bytes. Returns 0, or -1 when memory
// ran out (then kvcache_free(&c->base) is safe).
int kvquant_cache_init(KvQuant *c, KvShape shape, KvDtype dtype, int group);

// Lesson 11's classic cache bugs, each a way a cache can go wrong on a
// cached step (a pass at pos > 0). A step without the cache is never
// touched, so a run without it stays the reference. The last two go wrong
// in kvcache_truncate only: speculative decoding's rollback (spec.h).
typedef enum {
    KV_BUG_NONE,
    KV_BUG_OFFSET,        // the new token's position embedding is position 0, not len(tokens) - 1
    KV_BUG_NO_APPEND,     // the new key and value are used for the step, never kept in the cache
    KV_BUG_STALE,         // past the context the cache is not reset: old keys stay, positions stop at T - 1
    KV_BUG_MASK,          // a causal mask aligned to the top-left corner: the one new row sees key 0 only
    KV_BUG_WRONG_LAYOUT,  // the transposed key cache (D, T) read as if it were (T, D)
    KV_BUG_NO_SCALE,      // scores not divided by sqrt(D)
    KV_BUG_NO_ROLLBACK,   // speculative decoding: a truncate keeps the rejected rows, the next rows go after them
    KV_BUG_OFF_BY_ONE,    // speculative decoding: a truncate that removes rows removes one more
    KV_NUM_BUGS
} KvBug;

// A cache that misbehaves on purpose (kvcache_faulty.c): it keeps its rows
// in another cache (contiguous or quantised: one that offers
// kvcache_read_head) and goes wrong the way bug says.
typedef struct {
    KvCache base;
    KvCache *inner;     // where the rows are kept (the caller's)
    KvBug bug;
    int prefill;        // positions the last pass from position 0 fed (no-append's scratch slot)
    int shift;          // no-rollback, off-by-one: position p's rows are at slot p + shift of inner
    float *buf;         // (H, 2*D*T) scratch for kvcache_read_head
    float *scores;      // (H, T) scratch: one row of scores per head
    size_t scratch_bytes;
} KvFaulty;

// A faulty cache over inner (empty, of the contiguous kind's shape; it
// stays the caller's, who frees it after this one). base.bytes is inner's.
// Returns 0, or -1 when memory ran out (then kvcache_free(&c->base) is safe).
int kvfaulty_init(KvFaulty *c, KvCache *inner, KvBug bug);

// Lesson 14's caches for text past the context (kvcache_window.c): W rows
// per layer and batch row, positions without end. With S = 0, a rolling
// buffer: position p in slot p mod W, a query at p reads p - W + 1 .. p,
// which is the band mask of sliding-window attention (Mistral). With S > 0,
// attention sinks (StreamingLLM): positions 0 .. S-1 stay in slots 0 .. S-1
// for good, position p >= S goes to slot S + (p - S) mod (W - S), and a
// query at p reads 0 .. S-1 and p - (W - S) + 1 .. p.
// Rotary convention: keys are cached after rotation, each at its own
// position, as llama2.c and Hugging Face do; only distances between a query
// and a key enter a rotated dot product, so they stay right after eviction.
// (StreamingLLM caches keys before rotation and rotates them again at their
// place in the cache, so that no distance exceeds W: kvdemo's distances from
// a sink grow without end instead.)
// Layout: cache_k [l][b][slot][g][d] at cache_k[(((l*B + b)*W + slot)*G + g)*D + d],
// cache_v likewise; shape.T is W. A chunk of n > 1 positions must not wrap
// (pos + n <= W): its first rows would need keys it overwrites.
typedef struct {
    KvCache base;
    int sinks;          // S: the first positions, kept for good (0: a rolling buffer)
    float *cache_k;     // (L, B, W, G, D)
    float *cache_v;     // (L, B, W, G, D)
    float *mem;         // cache_k and cache_v: one allocation (bigmem) of base.bytes
    float *scores;      // (W) scratch: one row of scores, then its softmax
    double *sink_weight;// (L, H) attention weight on position 0, summed over the queries since reset
    double *queries;    // (L) queries summed in sink_weight
    float rope_theta;   // with base.raw_keys: the rotary base the kind rotates keys with
    float *freqs;       // (W, D/2, 2) with base.raw_keys: cos, sin of the positions a query's keys get
} KvWindow;

// Reserves a cache of shape.T = W rows with the first `sinks` kept (0 <=
// sinks < W). Returns 0, or -1 when memory ran out (then kvcache_free is safe).
int kvwindow_init(KvWindow *c, KvShape shape, int sinks);
// The slot of position p (kvcache_window.c's rule above).
int kvwindow_slot(const KvWindow *c, int p);
// The positions a query at p reads, oldest first, into out (W); returns how many.
int kvwindow_positions(int *out, const KvWindow *c, int p);
// StreamingLLM's rotary convention instead of kvdemo's (lesson 14): keys
// are cached before rotation (the model leaves them unrotated: base.raw_keys)
// and the cnt rows a query at p reads, oldest first, are rotated at the
// consecutive positions p - cnt + 1 .. p, the distances that positions 0 ..
// cnt-1 within the cache give. A rolling buffer (S = 0) and any query before
// the first eviction get their own positions, bit for bit kvdemo's. Returns
// 0, or -1 when memory ran out.
int kvwindow_positions_in_cache(KvWindow *c, float rope_theta);

#endif
