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
//
// Each kind computes attention in its model's own order of operations, so
// that a model keeps its numbers bit for bit; tests/test_kvcache.c holds
// every kind against the same plain loops.
#ifndef KVDEMO_KVCACHE_H
#define KVDEMO_KVCACHE_H

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
    // query head 0's softmax weights (bsz, n, pos+n), zero where masked.
    void (*attend)(KvCache *c, float *out, float *weights, const float *q, int l, int bsz, int n, int pos);
    // Keeps positions 0 .. len-1; NULL when there is nothing to do but set len
    // (rows past len are never read).
    void (*truncate)(KvCache *c, int len);
    // Forgets every position (len is then 0).
    void (*reset)(KvCache *c);
    void (*free)(KvCache *c);
} KvCacheKind;

// The part every kind begins with: a kind's own struct has it as its first
// member, `base`, so that &kind->base is the KvCache the models are handed.
struct KvCache {
    const KvCacheKind *kind;
    KvShape shape;
    int len;        // positions 0 .. len-1 are held by every layer
    size_t bytes;   // bytes allocated for the keys and values (not attention's scratch)
};

// Writes layer l's keys and values k, v (bsz, n, G*D) of positions pos ..
// pos+n-1. Positions come in order: pos must be len (truncate first to feed
// a position again). len grows to pos + n when the last layer's rows come.
void kvcache_append(KvCache *c, int l, const float *k, const float *v, int bsz, int n, int pos);
// out (bsz, n, H*D) = softmax(q k^T / sqrt(D)) v of layer l for the queries
// q (bsz, n, H*D) at positions pos .. pos+n-1, row i against the keys and
// values of positions 0 .. pos+i: those held and those just appended.
// weights may be NULL; otherwise it gets query head 0's weights (bsz, n, pos+n).
void kvcache_attend(KvCache *c, float *out, float *weights, const float *q, int l, int bsz, int n, int pos);
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
} KvContig;

// Reserves a contiguous cache of shape (B = 1 and G = H: the chapter's).
// Returns 0, or -1 when memory ran out (then kvcache_free(&c->base) is safe).
int kvcontig_init(KvContig *c, KvShape shape);
// Writes k, v (n, H*D) of layer l at slots slot .. slot+n-1 in the layout
// above, and nothing else: no length kept. kvcache_append's work, open to
// the lessons that put rows where the chapter would not (lesson 11's bugs,
// lesson 12's rounding read the same arrays).
void kvcontig_write(KvContig *c, int l, const float *k, const float *v, int n, int slot);

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

#endif
