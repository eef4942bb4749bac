// kvcache_contig — the numpy chapter's KV cache, the char GPT's: one
// sequence, one key and value per head, T positions reserved per layer,
// the key kept transposed (1, H, D, T) for query @ key and the value as
// (1, H, T, D) (kvcache.h gives the index formulas).
//
// Legend as in kvcache.h: L layers, T positions, H heads (= G), D head
// size, N positions fed at once, R query rows attended together.
//
// The chapter grows its cache with np.concatenate each step; here the T
// positions are reserved once and a new row is written into its slot, which
// is the same array without the copy.
#include "kvcache.h"

#include "bigmem.h"
#include "flash.h"
#include "ops.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void kvcontig_write(KvContig *c, int l, const float *k, const float *v, int n, int slot) {
    const KvShape *s = &c->base.shape;
    int T = s->T, H = s->H, D = s->D, C = H * D;
    assert(slot >= 0 && slot + n <= T);
    for (int h = 0; h < H; h++) {
        float *key = c->key + ((int64_t)l * H + h) * D * T;       // (D, T)
        float *value = c->value + ((int64_t)l * H + h) * T * D;   // (T, D)
        for (int d = 0; d < D; d++) {   // key row d: positions slot.. side by side
            float *row = key + (int64_t)d * T + slot;
            for (int i = 0; i < n; i++) row[i] = k[(int64_t)i * C + h * D + d];
        }
        for (int i = 0; i < n; i++)
            memcpy(value + (int64_t)(slot + i) * D, v + (int64_t)i * C + h * D, sizeof(float) * (size_t)D);
    }
}

// key = np.concatenate([key_cache, key], axis=-1), value likewise on axis 2
static void contig_append(KvCache *base, int l, const float *k, const float *v, int bsz, int n, int pos) {
    assert(bsz == 1);
    kvcontig_write((KvContig *)base, l, k, v, n, pos);
}

void kvcontig_attend_head(float *out, float *weights, float *scores, const float *q, const float *key,
                          const float *value, int n, int pos, int C, int D, int T) {
    int S = pos + n;
    // scale = Tensor(np.array(1.0 / np.sqrt(head_embedding_size))), used in float32
    float scale = (float)(1.0 / sqrt((double)D));
    // A block of up to OPS_ROWS_MAX query rows at a time, so that each key
    // and value is read once for the block; row i's numbers are those it
    // gets alone (ops_vecmat_rows), a cached step's included.
    for (int i0 = 0; i0 < n; i0 += OPS_ROWS_MAX) {
        int R = n - i0 < OPS_ROWS_MAX ? n - i0 : OPS_ROWS_MAX;
        int last = pos + i0 + R - 1;   // the block's last position
        const float *qi = q + (int64_t)i0 * C;   // (R, D), rows C apart
        float *oi = out + (int64_t)i0 * C;       // (R, D), rows C apart
        // scores = query @ key * scale on key's first last+1 columns
        // (row r uses its first p+1 of them)
        ops_vecmat_rows(scores, T, qi, C, key, T, R, D, last + 1, 0);
        for (int r = 0; r < R; r++) {
            int p = pos + i0 + r;   // this row sees keys 0 .. p: the causal mask
            float *row = scores + (int64_t)r * T;
            for (int j = 0; j <= p; j++) row[j] *= scale;
            // weights = softmax(scores)
            ops_softmax_row(row, NULL, row, p + 1, OPS_RECIPROCAL);
            if (weights) {
                float *w = weights + (int64_t)(i0 + r) * S;
                memcpy(w, row, sizeof(float) * (size_t)(p + 1));
                memset(w + p + 1, 0, sizeof(float) * (size_t)(S - p - 1));
            }
        }
        // output = weights @ value, row r over value's first p+1 rows
        ops_vecmat_rows(oi, C, scores, T, value, D, R, last + 1, D, 1);
    }
}

typedef struct {
    KvContig *c;
    float *out, *weights;
    const float *q;
    int l, n, pos;
} ContigJob;

// Attention of rows 0..n-1 (positions pos..pos+n-1) for the heads
// begin..end-1 (one task per head, on the caller's pool).
static void contig_heads(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const ContigJob *job = ctx;
    const KvShape *s = &job->c->base.shape;
    int T = s->T, H = s->H, D = s->D, C = H * D;
    for (int h = begin; h < end; h++) {
        const float *key = job->c->key + ((int64_t)job->l * H + h) * D * T;       // (D, T)
        const float *value = job->c->value + ((int64_t)job->l * H + h) * T * D;   // (T, D)
        float *scores = job->c->scores + (int64_t)h * OPS_ROWS_MAX * T;            // (R, T)
        kvcontig_attend_head(job->out + h * D, h == 0 ? job->weights : NULL, scores, job->q + h * D, key, value,
                             job->n, job->pos, C, D, T);
    }
}

// output = softmax(query @ key * scale) @ value, the heads side by side
static void contig_attend(KvCache *base, float *out, float *weights, const float *q, Pool *pool, int l, int bsz,
                          int n, int pos) {
    assert(bsz == 1);
    KvContig *c = (KvContig *)base;
    const KvShape *s = &base->shape;
    if (c->tile) {   // the same in tiles with an online softmax (lesson 6.3)
        assert(!weights);
        int64_t layer = (int64_t)l * s->H * s->D * s->T;
        flash_gpt_attention(out, c->flash, q, c->key + layer, c->value + layer, pool, n, pos, s->T, s->H, s->D,
                            c->tile);
        return;
    }
    ContigJob job = {c, out, weights, q, l, n, pos};
    pool_run(pool, contig_heads, &job, s->H);
}

int kvcontig_set_tile(KvContig *c, int tile) {
    const KvShape *s = &c->base.shape;
    free(c->flash);
    c->flash = NULL;
    c->tile = 0;
    if (tile == 0) return 0;
    c->flash = malloc(sizeof(float) * (size_t)flash_gpt_scratch_floats(s->T, s->H, s->D, tile));
    if (!c->flash) return -1;
    c->tile = tile;
    return 0;
}

// The arrays themselves: nothing to read back.
static void contig_read_head(KvCache *base, const float **key, const float **value, float *buf, int l, int h,
                             int S) {
    (void)buf, (void)S;
    KvContig *c = (KvContig *)base;
    const KvShape *s = &base->shape;
    *key = c->key + ((int64_t)l * s->H + h) * s->D * s->T;
    *value = c->value + ((int64_t)l * s->H + h) * s->T * s->D;
}

// Nothing to clear: a position is written before it is read.
static void contig_reset(KvCache *base) {
    (void)base;
}

static void contig_free(KvCache *base) {
    KvContig *c = (KvContig *)base;
    bigmem_free(c->mem, c->base.bytes);
    bigmem_free(c->scores, c->scores_bytes);
    free(c->flash);
    memset(c, 0, sizeof *c);
}

static const KvCacheKind CONTIG = {"contiguous", contig_append, contig_attend, NULL, contig_reset, contig_free,
                                   contig_read_head, NULL, NULL};

int kvcontig_init(KvContig *c, KvShape shape) {
    assert(shape.B == 1 && shape.G == shape.H);   // the chapter's: one sequence, a key per head
    memset(c, 0, sizeof *c);
    c->base.kind = &CONTIG;
    c->base.shape = shape;
    size_t LHTD = (size_t)shape.L * shape.H * shape.T * shape.D;
    float **const fields[] = {&c->key, &c->value};
    const size_t sizes[] = {LHTD, LHTD};
    c->mem = bigmem_carve(fields, sizes, 2, &c->base.bytes);   // zeroed
    c->scores_bytes = sizeof(float) * (size_t)shape.H * OPS_ROWS_MAX * (size_t)shape.T;
    c->scores = bigmem_alloc(c->scores_bytes);
    if (!c->mem || !c->scores) {
        contig_free(&c->base);
        return -1;
    }
    return 0;
}
