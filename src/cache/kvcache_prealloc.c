// kvcache_prealloc — LLaMA's KV cache as the article's section 3.1 writes
// it: Attention.__init__ reserves
//   self.cache_k = torch.zeros((max_batch_size, max_seq_len, n_kv_heads, head_dim))
// (and cache_v) once, forward writes the new positions into their slots and
// reads the first start_pos + seqlen of them.
//
// Legend as in kvcache.h: L layers, B batch rows, T positions, H query
// heads, G key/value heads, D head size, N positions fed, S = pos + N.
#include "kvcache.h"

#include "bigmem.h"
#include "ops.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// self.cache_k[:bsz, start_pos : start_pos + seqlen] = xk   (and cache_v = xv)
static void prealloc_append(KvCache *base, int l, const float *k, const float *v, int bsz, int n, int pos) {
    KvPrealloc *c = (KvPrealloc *)base;
    const KvShape *s = &base->shape;
    size_t T = (size_t)s->T, GD = (size_t)s->G * s->D;
    size_t layer = (size_t)l * s->B * T * GD;
    for (int b = 0; b < bsz; b++)
        for (int i = 0; i < n; i++) {
            size_t slot = layer + ((size_t)b * T + pos + i) * GD;
            size_t row = ((size_t)b * n + i) * GD;
            memcpy(c->cache_k + slot, k + row, sizeof(float) * GD);
            memcpy(c->cache_v + slot, v + row, sizeof(float) * GD);
        }
}

// keys = self.cache_k[:bsz, : start_pos + seqlen]   (B, S, G, D)
// scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
// if mask is not None: scores = scores + mask
// scores = F.softmax(scores.float(), dim=-1)
// output = torch.matmul(scores, values)
// Query head h reads key/value head h / rep (rep = H / G; 1 for MHA). The
// mask is the loop's: a column past pos + i gets -inf, what adding the
// article's mask gives (with one row fed, no column is past it: mask = None).
// With a window W (sliding-window attention), row i sees pos+i-W+1 .. pos+i.
static void prealloc_attend(KvCache *base, float *out, float *weights, const float *q, Pool *pool, int l, int bsz,
                            int n, int pos) {
    (void)pool;   // one thread: the row loop below is the article's
    KvPrealloc *c = (KvPrealloc *)base;
    const KvShape *s = &base->shape;
    int H = s->H, G = s->G, D = s->D, T = s->T, S = pos + n, rep = H / G;
    size_t layer = (size_t)l * s->B * T * G * D;
    const float *cache_k = c->cache_k + layer;   // (B, T, G, D) of layer l
    const float *cache_v = c->cache_v + layer;
    float scale = sqrtf((float)D);
    for (int b = 0; b < bsz; b++)
        for (int i = 0; i < n; i++)
            for (int h = 0; h < H; h++) {
                int g = h / rep;
                const float *qh = q + (((size_t)b * n + i) * H + h) * D;
                // the band mask of sliding-window attention (base->window > 0):
                // columns before lo weigh nothing, and are left out of the sums
                int lo = base->window > 0 && pos + i - base->window + 1 > 0 ? pos + i - base->window + 1 : 0;
                float *att = c->scores;   // (S - lo) one row of scores, from column lo
                for (int j = lo; j < S; j++) {
                    const float *k = cache_k + (((size_t)b * T + j) * G + g) * D;
                    float dot = 0.0f;
                    for (int d = 0; d < D; d++) dot += qh[d] * k[d];
                    att[j - lo] = dot / scale;
                    if (j > pos + i) att[j - lo] = -INFINITY;   // + mask[i][j]
                }
                ops_softmax_rows(att, att, 1, S - lo, OPS_DIVIDE);
                if (weights && h == 0) {
                    float *wrow = weights + ((size_t)b * n + i) * S;
                    memset(wrow, 0, sizeof(float) * (size_t)lo);
                    memcpy(wrow + lo, att, sizeof(float) * (size_t)(S - lo));
                }
                float *o = out + (((size_t)b * n + i) * H + h) * D;
                for (int d = 0; d < D; d++) o[d] = 0.0f;
                for (int j = lo; j < S; j++) {
                    const float *v = cache_v + (((size_t)b * T + j) * G + g) * D;
                    for (int d = 0; d < D; d++) o[d] += att[j - lo] * v[d];
                }
            }
}

// As torch.zeros made them.
static void prealloc_reset(KvCache *base) {
    KvPrealloc *c = (KvPrealloc *)base;
    memset(c->mem, 0, base->bytes);
}

static void prealloc_free(KvCache *base) {
    KvPrealloc *c = (KvPrealloc *)base;
    bigmem_free(c->mem, base->bytes);
    free(c->scores);
    memset(c, 0, sizeof *c);
}

static const KvCacheKind PREALLOC = {"preallocated", prealloc_append, prealloc_attend, NULL, prealloc_reset,
                                     prealloc_free, NULL, NULL, NULL};

int kvprealloc_init(KvPrealloc *c, KvShape shape) {
    memset(c, 0, sizeof *c);
    c->base.kind = &PREALLOC;
    c->base.shape = shape;
    size_t floats = (size_t)shape.L * shape.B * shape.T * shape.G * shape.D;
    float **const fields[] = {&c->cache_k, &c->cache_v};
    const size_t sizes[] = {floats, floats};
    c->mem = bigmem_carve(fields, sizes, 2, &c->base.bytes);   // zeroed: torch.zeros
    c->scores = malloc(sizeof(float) * (size_t)shape.T);
    if (!c->mem || !c->scores) {
        prealloc_free(&c->base);
        return -1;
    }
    return 0;
}
