// flash — tiled attention with an online softmax (FlashAttention), its
// memory traffic, and flash-decoding for a cached step.
//
// Legend of dimension letters:
//   N  queries and keys of one head      d  head size (of Q, K and V)
//   Br query rows of a block              Bc keys of a tile
//   n  keys one query row attends to      ld floats between rows of a matrix
//
// The idea, for one query row q against keys K and values V:
//
//   softmax(q K^T) V = sum_j e^{s_j - m} v_j / sum_j e^{s_j - m},  s_j = q.k_j * scale
//
// and any split of the keys into tiles gives, per tile, a partial result
//   m~ = max_j s_j,  l~ = sum_j e^{s_j - m~},  O~ = sum_j e^{s_j - m~} v_j
// that two tiles merge exactly (the log-sum-exp rule):
//   m = max(m1, m2),  l = e^{m1-m} l1 + e^{m2-m} l2,  O = e^{m1-m} O1 + e^{m2-m} O2
// and at the end output = O / l. No row of N scores is ever kept whole.
//
// Everything here builds on one tile (flash_tile) and one merge
// (flash_merge): the tiled head, the char GPT's full passes and its cached
// step (flash-decoding: the tiles on separate threads, merged after in tile
// order). Because every row folds the same tiles in the same order, a row
// gets the same bits whichever way it is computed and on however many
// threads.
#ifndef KVDEMO_FLASH_H
#define KVDEMO_FLASH_H

#include "pool.h"

#include <stdint.h>

// ----------------------------------------------------------------------------
// Online softmax (Milakov & Gimelshein 2018)

// The running max and normaliser of a row (or of a tile of it): m starts at
// -inf and l at 0.
typedef struct {
    float m;   // max of the scores seen
    float l;   // sum of e^{s - m} over them
} FlashStat;

// One more element x: m' = max(m, x); l' = l e^{m - m'} + e^{x - m'}.
void flash_online_step(FlashStat *st, float x);
// The merge of two partial (m, l): [m1, l1] (+) [m2, l2]. Associative and
// commutative up to rounding; with an empty side (m = -inf) it returns the
// other exactly.
FlashStat flash_stat_merge(FlashStat a, FlashStat b);

// ----------------------------------------------------------------------------
// One tile and the merge

// One query row q (d) against a tile of bc keys: kt points at the tile's
// first key in a transposed key matrix (d rows, ldk floats apart: the char
// GPT's key cache (D, T)), v at its first value (bc rows, ldv apart).
// Only the first valid keys count (the causal mask of a diagonal tile); the
// others are masked: s = -inf, p = 0.
//   s (bc)  S_ij's row = q . k_j * scale, -inf where masked
//   p (bc)  P~_ij's row = e^{s_j - m~} (p may be s)
//   o (d)   O~ = p @ V_j, not divided by l~
// Returns (m~, l~); with valid = 0, (-inf, 0) and o = 0.
FlashStat flash_tile(float *s, float *p, float *o, const float *q, const float *kt, int ldk, const float *v,
                     int ldv, int bc, int valid, int d, float scale);

// The running row (st, O (d)) absorbs a tile's (part, o (d)):
// FlashAttention-2's un-normalised update, O = e^{m-m'} O + e^{m~-m'} O~.
void flash_merge(FlashStat *st, float *O, FlashStat part, const float *o, int d);

// ----------------------------------------------------------------------------
// One head: plain against tiled

// Floats of scratch flash_tiled_head needs.
int64_t flash_scratch_floats(int Br, int Bc, int d);

// Tiles a run computed and skipped (causal: tiles above the diagonal).
typedef struct {
    int64_t tiles, skipped, masked;   // masked: diagonal tiles with a mask
} FlashCounts;

// The standard algorithm: P (N, N) = softmax(Q Kt * scale + mask), then
// O (N, d) = P V; Q (N, d), Kt (d, N) the keys transposed, V (N, d).
// P is materialised: N * N floats (1 GiB at N = 16384). On the calling
// thread, as flash_tiled_head.
void flash_plain_head(float *O, float *P, const float *Q, const float *Kt, const float *V, int N, int d,
                      float scale, int causal);

// The tiled algorithm, FlashAttention's Algorithm 1 in FlashAttention-2's
// loop order: query blocks of Br rows outside, key tiles of Bc inside; with
// causal, tiles above the diagonal are skipped and the diagonal tiles
// masked. scratch holds flash_scratch_floats(Br, Bc, d); counts may be NULL.
void flash_tiled_head(float *O, float *scratch, FlashCounts *counts, const float *Q, const float *Kt,
                      const float *V, int N, int d, float scale, int causal, int Br, int Bc);

// One query row q (d) against n keys (kt (d, ldk), v (n, ldv)), in tiles
// of Bc: out (d) = softmax(q K^T * scale) V. scratch holds Bc + d floats.
void flash_row(float *out, float *scratch, const float *q, const float *kt, int ldk, const float *v, int ldv,
               int n, int d, float scale, int Bc);

// Flash-decoding: flash_row's result (bit for bit) with the tiles computed
// on pool's threads (NULL: the calling thread) and merged after, in tile order.
// scratch holds flash_decode_floats(n, d, Bc).
int64_t flash_decode_floats(int n, int d, int Bc);
void flash_decode(float *out, float *scratch, const float *q, const float *kt, int ldk, const float *v, int ldv,
                  Pool *pool, int n, int d, float scale, int Bc);

// ----------------------------------------------------------------------------
// The memory traffic (elements moved to and from slow memory, per head)

// FlashAttention's block sizes for fast memory of M elements:
// Bc = ceil(M / 4d), Br = min(ceil(M / 4d), d) (Algorithm 1, line 1).
void flash_block_sizes(int64_t M, int d, int *Br, int *Bc);
// The standard algorithm (Algorithm 0): read Q, K; write S; read S; write P;
// read P, V; write O: 4 N^2 + 4 N d.
double flash_traffic_standard(int64_t N, int d);
// Algorithm 1 (key tiles outside): K, V once (2 N d); for each of the
// ceil(N / Bc) key tiles, every Q_i, O_i, l_i, m_i read and O_i, l_i, m_i
// written: 3 N d + 4 N.
double flash_traffic_fa1(int64_t N, int d, int Bc);
// FlashAttention-2's order (query blocks outside): Q and O once (2 N d), the
// log-sum-exp once (N), K and V once per query block (ceil(N / Br) 2 N d).
double flash_traffic_fa2(int64_t N, int d, int Br);

// ----------------------------------------------------------------------------
// The char GPT's attention in tiles (the contiguous cache's, when asked: kvcache.h)

enum { FLASH_DEFAULT_TILE = 64 };

// Floats of scratch flash_gpt_attention needs, for a model of context T,
// H heads of D, tiles of `tile` keys (the contiguous cache reserves it,
// kvcontig_set_tile).
int64_t flash_gpt_scratch_floats(int T, int H, int D, int tile);
// Attention of n rows (positions offset .. offset+n-1) of every head:
// q, att (n, H*D) heads side by side; key (H, D, T) and value (H, T, D) are
// one block's cache. A full pass (n > 1) shares the heads among pool's
// threads (NULL: the calling thread) and runs flash_row on each row; a
// cached step (n = 1) is flash-decoding: the H x tiles pieces on the
// threads, then merged.
// scratch holds flash_gpt_scratch_floats(T, H, D, tile).
void flash_gpt_attention(float *att, float *scratch, const float *q, const float *key, const float *value,
                         Pool *pool, int n, int offset, int T, int H, int D, int tile);

#endif
