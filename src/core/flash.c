// flash — tiled attention with an online softmax, its memory traffic, and
// flash-decoding (see flash.h for the formulas).
//
// Legend: N queries and keys, d head size, Br query rows of a block, Bc keys
// of a tile, n keys one row attends to, ld floats between rows.
//
// Reading order: the online softmax, one tile and the merge, a row, one
// head plain and tiled, flash-decoding, the traffic counts, the char GPT's
// hook.
#include "flash.h"

#include "ops.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// Online softmax

void flash_online_step(FlashStat *st, float x) {
    // m_j = max(m_{j-1}, x_j);  d_j = d_{j-1} e^{m_{j-1} - m_j} + e^{x_j - m_j}
    if (x == -INFINITY) return;   // a masked score adds e^{-inf} = 0
    float m = st->m > x ? st->m : x;
    st->l = st->l * expf(st->m - m) + expf(x - m);
    st->m = m;
}

FlashStat flash_stat_merge(FlashStat a, FlashStat b) {
    if (a.m == -INFINITY) return b;
    if (b.m == -INFINITY) return a;
    float m = a.m > b.m ? a.m : b.m;
    FlashStat r = {m, a.l * expf(a.m - m) + b.l * expf(b.m - m)};
    return r;
}

// ----------------------------------------------------------------------------
// One tile and the merge

FlashStat flash_tile(float *s, float *p, float *o, const float *q, const float *kt, int ldk, const float *v,
                     int ldv, int bc, int valid, int d, float scale) {
    assert(valid >= 0 && valid <= bc);
    FlashStat st = {-INFINITY, 0.0f};
    // S_ij = Q_i K_j^T * scale, on the keys the mask leaves
    if (valid > 0) ops_vecmat(s, q, kt, d, valid, ldk);
    for (int j = 0; j < valid; j++) {
        s[j] *= scale;
        if (s[j] > st.m) st.m = s[j];   // m~_ij = rowmax(S_ij)
    }
    for (int j = valid; j < bc; j++) s[j] = -INFINITY;
    if (valid == 0) {
        for (int j = 0; j < bc; j++) p[j] = 0.0f;
        memset(o, 0, sizeof(float) * (size_t)d);
        return st;
    }
    // P~_ij = exp(S_ij - m~_ij);  l~_ij = rowsum(P~_ij)
    for (int j = 0; j < valid; j++) {
        p[j] = expf(s[j] - st.m);
        st.l += p[j];
    }
    for (int j = valid; j < bc; j++) p[j] = 0.0f;
    // O~ = P~_ij V_j
    ops_vecmat(o, p, v, valid, d, ldv);
    return st;
}

void flash_merge(FlashStat *st, float *O, FlashStat part, const float *o, int d) {
    if (part.m == -INFINITY) return;   // nothing in the tile: the row is unchanged
    // m_new = max(m, m~);  l_new = e^{m - m_new} l + e^{m~ - m_new} l~
    float m = st->m > part.m ? st->m : part.m;
    float a = expf(st->m - m), b = expf(part.m - m);
    st->l = a * st->l + b * part.l;
    // O = e^{m - m_new} O + e^{m~ - m_new} O~   (divided by l once, at the end)
    for (int i = 0; i < d; i++) O[i] = a * O[i] + b * o[i];
    st->m = m;
}

// ----------------------------------------------------------------------------
// A row

void flash_row(float *out, float *scratch, const float *q, const float *kt, int ldk, const float *v, int ldv,
               int n, int d, float scale, int Bc) {
    float *s = scratch, *o = scratch + Bc;   // (Bc), (d)
    FlashStat st = {-INFINITY, 0.0f};
    memset(out, 0, sizeof(float) * (size_t)d);
    for (int j0 = 0; j0 < n; j0 += Bc) {
        int bc = n - j0 < Bc ? n - j0 : Bc;
        FlashStat part = flash_tile(s, s, o, q, kt + j0, ldk, v + (int64_t)j0 * ldv, ldv, bc, bc, d, scale);
        flash_merge(&st, out, part, o, d);
    }
    for (int i = 0; i < d; i++) out[i] /= st.l;
}

// ----------------------------------------------------------------------------
// One head: plain and tiled

int64_t flash_scratch_floats(int Br, int Bc, int d) { return (int64_t)Bc + d + 2 * (int64_t)Br; }

void flash_plain_head(float *O, float *P, const float *Q, const float *Kt, const float *V, int N, int d,
                      float scale, int causal) {
    // S = Q K^T * scale, written whole (N, N)
    ops_matmul(P, Q, Kt, NULL, NULL, N, d, N);   // on this thread, as the tiled head
    for (int64_t i = 0; i < (int64_t)N * N; i++) P[i] *= scale;
    // + mask: -inf above the diagonal
    if (causal)
        for (int64_t r = 0; r < N; r++)
            for (int64_t c = r + 1; c < N; c++) P[r * N + c] = -INFINITY;
    // P = softmax(S), in place; O = P V
    ops_softmax_rows(P, P, N, N, OPS_DIVIDE);
    ops_matmul(O, P, V, NULL, NULL, N, N, d);
}

void flash_tiled_head(float *O, float *scratch, FlashCounts *counts, const float *Q, const float *Kt,
                      const float *V, int N, int d, float scale, int causal, int Br, int Bc) {
    float *s = scratch, *o = s + Bc, *m = o + d, *l = m + Br;   // (Bc), (d), (Br), (Br)
    FlashCounts c = {0, 0, 0};
    // for each query block Q_i (FlashAttention-2: query blocks outside)
    for (int i0 = 0; i0 < N; i0 += Br) {
        int br = N - i0 < Br ? N - i0 : Br;
        for (int r = 0; r < br; r++) m[r] = -INFINITY, l[r] = 0.0f;
        memset(O + (int64_t)i0 * d, 0, sizeof(float) * (size_t)br * (size_t)d);
        // for each key/value tile K_j, V_j
        for (int j0 = 0; j0 < N; j0 += Bc) {
            int bc = N - j0 < Bc ? N - j0 : Bc;
            if (causal && j0 > i0 + br - 1) {   // the whole tile is above the diagonal
                c.skipped++;
                continue;
            }
            c.tiles++;
            if (causal && j0 + bc - 1 > i0) c.masked++;   // the diagonal crosses it
            for (int r = 0; r < br; r++) {
                int row = i0 + r, valid = bc;
                if (causal) valid = row - j0 + 1 < bc ? row - j0 + 1 : bc;
                if (valid < 0) valid = 0;
                FlashStat part = flash_tile(s, s, o, Q + (int64_t)row * d, Kt + j0, N, V + (int64_t)j0 * d, d,
                                            bc, valid, d, scale);
                FlashStat st = {m[r], l[r]};
                flash_merge(&st, O + (int64_t)row * d, part, o, d);
                m[r] = st.m, l[r] = st.l;
            }
        }
        // O_i = diag(l_i)^-1 O_i
        for (int r = 0; r < br; r++)
            for (int k = 0; k < d; k++) O[(int64_t)(i0 + r) * d + k] /= l[r];
    }
    if (counts) *counts = c;
}

// ----------------------------------------------------------------------------
// Flash-decoding: the tiles of one row on the threads, merged after

// Each tile's piece: s/p (Bc), o (d), then m and l.
static int64_t piece_floats(int Bc, int d) { return (int64_t)Bc + d + 2; }

int64_t flash_decode_floats(int n, int d, int Bc) {
    return (int64_t)((n + Bc - 1) / Bc) * piece_floats(Bc, d);
}

typedef struct {
    float *pieces;
    const float *q, *kt, *v;
    int ldk, ldv, n, d, Bc, tiles;   // tiles per row
    int64_t per_row;                 // floats between rows' pieces
    int heads_ld_q, heads_ld_kt, heads_ld_v;   // per head: q, kt, v offsets (0 for one head)
    float scale;
} DecodeJob;

// out (d) = the pieces of one row merged in tile order, then / l.
static void decode_fold(float *out, const float *pieces, int tiles, int Bc, int d) {
    FlashStat st = {-INFINITY, 0.0f};
    memset(out, 0, sizeof(float) * (size_t)d);
    for (int t = 0; t < tiles; t++) {
        const float *piece = pieces + t * piece_floats(Bc, d), *o = piece + Bc, *ml = o + d;
        FlashStat part = {ml[0], ml[1]};
        flash_merge(&st, out, part, o, d);
    }
    for (int i = 0; i < d; i++) out[i] /= st.l;
}

// Task k: head k / tiles, tile k % tiles.
static void decode_tiles(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const DecodeJob *job = ctx;
    for (int k = begin; k < end; k++) {
        int h = k / job->tiles, t = k % job->tiles;
        int j0 = t * job->Bc, bc = job->n - j0 < job->Bc ? job->n - j0 : job->Bc;
        float *piece = job->pieces + h * job->per_row + t * piece_floats(job->Bc, job->d);
        float *s = piece, *o = piece + job->Bc, *ml = o + job->d;
        FlashStat st = flash_tile(s, s, o, job->q + (int64_t)h * job->heads_ld_q,
                                  job->kt + (int64_t)h * job->heads_ld_kt + j0, job->ldk,
                                  job->v + (int64_t)h * job->heads_ld_v + (int64_t)j0 * job->ldv, job->ldv, bc,
                                  bc, job->d, job->scale);
        ml[0] = st.m, ml[1] = st.l;
    }
}

void flash_decode(float *out, float *scratch, const float *q, const float *kt, int ldk, const float *v, int ldv,
                  Pool *pool, int n, int d, float scale, int Bc) {
    int tiles = (n + Bc - 1) / Bc;
    DecodeJob job = {scratch, q, kt, v, ldk, ldv, n, d, Bc, tiles, 0, 0, 0, 0, scale};
    pool_run(pool, decode_tiles, &job, tiles);
    decode_fold(out, scratch, tiles, Bc, d);
}

// ----------------------------------------------------------------------------
// The memory traffic

void flash_block_sizes(int64_t M, int d, int *Br, int *Bc) {
    int64_t b = (M + 4 * (int64_t)d - 1) / (4 * (int64_t)d);   // ceil(M / 4d)
    *Bc = (int)b;
    *Br = (int)(b < d ? b : d);
}

double flash_traffic_standard(int64_t N, int d) { return 4.0 * (double)N * N + 4.0 * (double)N * d; }

double flash_traffic_fa1(int64_t N, int d, int Bc) {
    double tiles = (double)((N + Bc - 1) / Bc);
    return 2.0 * N * d + tiles * (3.0 * N * d + 4.0 * N);
}

double flash_traffic_fa2(int64_t N, int d, int Br) {
    double blocks = (double)((N + Br - 1) / Br);
    return 2.0 * N * d + (double)N + blocks * 2.0 * N * d;
}

// ----------------------------------------------------------------------------
// The char GPT's attention

int64_t flash_gpt_scratch_floats(int T, int H, int D, int tile) {
    assert(tile >= 1 && T >= 1 && H >= 1 && D >= 1);
    // per head a row's tile and output (tile + D), then the decode pieces
    return (int64_t)H * (tile + D) + (int64_t)H * flash_decode_floats(T, D, tile);
}

typedef struct {
    float *att, *scratch;
    const float *q, *key, *value;
    int n, offset, T, H, D, tile;
    float scale;
} GptRowsJob;

// Every row of the heads begin..end-1, tile by tile (flash_row).
static void gpt_heads(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const GptRowsJob *job = ctx;
    int T = job->T, D = job->D, C = job->H * D, tile = job->tile;
    for (int h = begin; h < end; h++) {
        float *scratch = job->scratch + (int64_t)h * (tile + D);
        const float *kt = job->key + (int64_t)h * D * T;     // (D, T)
        const float *v = job->value + (int64_t)h * T * D;    // (T, D)
        for (int i = 0; i < job->n; i++)   // row i sees keys 0 .. offset+i
            flash_row(job->att + (int64_t)i * C + h * D, scratch, job->q + (int64_t)i * C + h * D, kt, T, v, D,
                      job->offset + i + 1, D, job->scale, tile);
    }
}

void flash_gpt_attention(float *att, float *scratch, const float *q, const float *key, const float *value,
                         Pool *pool, int n, int offset, int T, int H, int D, int tile) {
    assert(tile >= 1);
    // scale = 1 / sqrt(head_embedding_size), in float32, as gpt.c's
    float scale = (float)(1.0 / sqrt((double)D));
    if (n > 1) {
        GptRowsJob job = {att, scratch, q, key, value, n, offset, T, H, D, tile, scale};
        pool_run(pool, gpt_heads, &job, H);
        return;
    }
    // A cached step: H x tiles pieces on the threads, each head merged after.
    int len = offset + 1, tiles = (len + tile - 1) / tile;
    float *pieces = scratch + (int64_t)H * (tile + D);
    int64_t per_head = flash_decode_floats(T, D, tile);
    DecodeJob job = {pieces, q, key, value, T, D, len, D, tile, tiles, per_head, D, D * T, T * D, scale};
    pool_run(pool, decode_tiles, &job, H * tiles);
    for (int h = 0; h < H; h++) decode_fold(att + h * D, pieces + h * per_head, tiles, tile, D);
}
