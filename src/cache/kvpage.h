// kvpage — a paged KV cache, as PagedAttention (vLLM) keeps it: a pool of
// fixed-size physical blocks reserved once, a block table per sequence, a
// reference count per block, copy-on-write, and prefix sharing by chained
// block hashes.
//
// Legend of dimension letters:
//   NB blocks in the pool    B positions per block (the block size)
//   L layers (the char GPT's blocks)   H heads   D head size   T context
//
// A sequence's positions are contiguous to the model and scattered in the
// pool: position p lives in physical block table[p / B], slot p % B, i.e. at
// the pool-wide slot table[p / B] * B + p % B. A block holds B positions of
// every layer's key and value, laid out as the char GPT's contiguous cache
// is (gpt.h), one (D, B) key tile and one (B, D) value tile per layer and
// head:
//   key of (block b, layer l, head h, dim d, slot j)   keys[(((b*L + l)*H + h)*D + d)*B + j]
//   value of (block b, layer l, head h, slot j, dim d) values[(((b*L + l)*H + h)*B + j)*D + d]
//
// The three primitives of the vLLM paper (section 5.2): fork (a child shares
// all its parent's blocks: reference counts + 1, nothing copied), append
// (into the last block; a full last block takes a free one; a last block
// whose count is > 1 is first copied to a fresh block: copy-on-write) and
// free (blocks whose count reaches 0 go back to the free list).
//
// Simplifications, said out loud: the free list is a stack; a block whose
// count reaches 0 forgets its hash (vLLM V1 keeps such blocks findable until
// they are reused); looking a hash up scans the pool (vLLM keeps a
// dictionary), which is short for a classroom's pool.
#ifndef KVDEMO_KVPAGE_H
#define KVDEMO_KVPAGE_H

#include "pool.h"

#include <stdint.h>

// What happened to a block, for a lesson that shows it.
typedef enum { KV_ALLOC, KV_FORK, KV_COW, KV_FREE, KV_SHARE } KvEventKind;
typedef struct {
    KvEventKind kind;
    int block;   // the physical block
    int src;     // KV_COW: the block copied from; otherwise -1
    int ref;     // its reference count afterwards (KV_COW: of block; src's is src_ref)
    int src_ref; // KV_COW: src's count afterwards
} KvEvent;
typedef void (*KvEventFn)(void *ctx, const KvEvent *e);

typedef struct KvPool {
    int num_blocks, B;     // NB, B
    int L, H, D;
    float *keys;           // (NB, L, H, D, B)
    float *values;         // (NB, L, H, B, D)
    int *ref;              // (NB) reference counts; 0: on the free list
    int *free_list;        // (NB) free block ids; the next one handed out is free_list[num_free - 1]
    int num_free;
    int min_free;          // the fewest free blocks seen: peak use = NB - min_free
    uint64_t *hash;        // (NB) chained hash of a full block, 0 when it has none
    int *block_tokens;     // (NB, B) the token ids a hashed block holds
    int64_t copies;        // copy-on-write copies made
    KvEventFn on_event;    // may be NULL
    void *event_ctx;
} KvPool;

typedef struct KvSeq {
    KvPool *pool;
    int *table;            // (max_blocks) logical block -> physical block
    int num_blocks;        // entries of table in use
    int max_blocks;        // ceil(max positions / B)
    int len;               // positions held: 0 .. len-1
    int *tokens;           // (max_blocks * B) the token id at each position
    uint64_t last_hash;    // the chained hash of the last full block (0 before the first)
} KvSeq;

// Reserves a pool of num_blocks blocks of B positions for a model of L
// layers, H heads of D. Returns 0, or -1 when memory ran out.
int kvpool_init(KvPool *p, int L, int H, int D, int B, int num_blocks);
void kvpool_free(KvPool *p);
// Shuffles the free list (a seeded Fisher-Yates), so that the blocks a
// sequence gets are visibly scattered, as on a busy server.
void kvpool_shuffle(KvPool *p, uint32_t seed);
int kvpool_num_free(const KvPool *p);
// The (D, B) key tile and (B, D) value tile of block b, layer l, head h.
float *kvpool_key(const KvPool *p, int b, int l, int h);
float *kvpool_value(const KvPool *p, int b, int l, int h);

// An empty sequence of up to max_positions positions. Returns 0, or -1
// when memory ran out.
int kvseq_init(KvSeq *s, KvPool *p, int max_positions);
// Frees the sequence's blocks (reference counts - 1) and its table.
void kvseq_free(KvSeq *s);
// Keeps positions 0 .. len-1 and frees the blocks no longer needed; a block
// that keeps positions stays (its later slots will be written again).
void kvseq_truncate(KvSeq *s, int len);
// child (initialised, empty) = parent: the same blocks, each count + 1.
void kvseq_fork(KvSeq *child, const KvSeq *parent);
// Makes room for tokens (n) at positions len .. len+n-1: a new block when
// the last is full, a copy of the last block first when it is shared
// (copy-on-write). Hashes every block that fills. Returns 0, or -1 with
// nothing changed when the pool has too few free blocks (or the sequence
// would pass max_positions); *need (may be NULL) gets the free blocks the
// append would take.
int kvseq_append(KvSeq *s, const int *tokens, int n, int *need);
// The pool-wide slot of position pos: table[pos / B] * B + pos % B.
int kvseq_slot(const KvSeq *s, int pos);

// The chained hash of a full block: of its parent's hash (0 for the first
// block) and its B token ids (FNV-1a over their bytes, 64 bits; never 0).
uint64_t kvpage_hash(uint64_t parent, const int *tokens, int B);
// A new sequence (empty) whose prompt (n tokens) starts with full blocks
// that the pool already holds reuses them (count + 1) instead of computing
// them: block i is reused when a block with its chained hash and its tokens
// exists, and the search stops at the first miss. At least the prompt's last
// token is left to compute (its logits are needed). Returns the positions
// reused, a multiple of B.
int kvseq_share_prefix(KvSeq *s, const int *tokens, int n);

// ----------------------------------------------------------------------------
// Attention through the block table (the paged kind of kvcache.h, kvcache_paged.c)

// Writes the keys and values of n fed tokens of layer l, k and v (n, H*D),
// at positions offset .. offset+n-1 (already appended).
void kvpage_write(KvSeq *s, int l, const float *k, const float *v, int n, int offset);
// att (n, H*D) = softmax(q @ key * scale) @ value for rows at positions
// offset .. offset+n-1 of layer l, reading keys and values block by block
// through the table. Row i sees positions 0 .. offset+i. scores (H, T) is
// scratch; weights, when not NULL, gets head 0's weights (n, offset+n), 0
// past each row's last position. The same operations in the same order as
// the contiguous cache's attention (kvcache_contig.c), so the results are
// equal bit for bit. Heads run on pool's threads (NULL: the calling thread).
void kvpage_attention(const KvSeq *s, float *att, float *scores, float *weights, const float *q, Pool *pool, int l,
                      int n, int offset, int T);

#endif
