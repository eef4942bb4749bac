// kvcache_window — lesson 14's caches for text longer than the context, as
// kinds of the one cache interface (kvcache.h): W rows per layer, whatever
// the position.
//
//   rolling buffer (S = 0)   Mistral 7B's: position p in slot p mod W; a
//                            query at p reads p - W + 1 .. p, the band mask of
//                            sliding-window attention. Bytes capped at W rows.
//   sinks + window (S > 0)   StreamingLLM's: positions 0 .. S-1 in slots
//                            0 .. S-1 for good, position p >= S in slot
//                            S + (p - S) mod (W - S); a query at p reads the
//                            sinks and the W - S positions up to p.
//
// Keys are cached after rotation, at their own positions (llama2.c, Hugging
// Face): a rotated q . k depends on the distance between them only, so the
// rows kept stay right after eviction. StreamingLLM instead caches keys
// before rotation and rotates them at their place in the cache ([0 1 2 3
// 6 7 8] decoding the 9th token gets positions 0 .. 7): every distance stays
// below W, where here a sink's distance grows with the text. Lesson 14 shows
// that convention too (kvwindow_positions_in_cache): the model hands the
// keys over unrotated, and each query's rows are rotated at the consecutive
// positions p - cnt + 1 .. p, the distances StreamingLLM's 0 .. cnt-1 give
// (RoPE sees distances only; the query keeps its own position p).
//
// Attention is the preallocated kind's (kvcache_prealloc.c), one score row
// at a time, over the positions held oldest first: a rolling buffer of W
// rows gives, bit for bit, what the preallocated cache gives under the band
// mask of the same W (tests/test_kvwindow.c).
//
// Legend as in kvcache.h: L layers, B batch rows, W = T rows held, H query
// heads, G key/value heads, D head size, N positions fed at once.
#include "kvcache.h"

#include "bigmem.h"
#include "ops.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int kvwindow_slot(const KvWindow *c, int p) {
    int W = c->base.shape.T, S = c->sinks;
    assert(p >= 0);
    return p < S ? p : S + (p - S) % (W - S);
}

int kvwindow_positions(int *out, const KvWindow *c, int p) {
    int W = c->base.shape.T, S = c->sinks, n = 0;
    if (p < W) {   // nothing evicted yet
        for (int j = 0; j <= p; j++) out[n++] = j;
        return n;
    }
    for (int j = 0; j < S; j++) out[n++] = j;
    for (int j = p - (W - S) + 1; j <= p; j++) out[n++] = j;
    return n;
}

// cache_k[:bsz, slot(p)] = xk for p = pos .. pos+n-1   (and cache_v = xv)
static void window_append(KvCache *base, int l, const float *k, const float *v, int bsz, int n, int pos) {
    KvWindow *c = (KvWindow *)base;
    const KvShape *s = &base->shape;
    size_t W = (size_t)s->T, GD = (size_t)s->G * s->D;
    // a chunk that wrapped would overwrite keys its own first rows read
    assert(n == 1 || pos + n <= s->T);
    size_t layer = (size_t)l * s->B * W * GD;
    for (int b = 0; b < bsz; b++)
        for (int i = 0; i < n; i++) {
            size_t slot = layer + ((size_t)b * W + (size_t)kvwindow_slot(c, pos + i)) * GD;
            size_t row = ((size_t)b * n + i) * GD;
            memcpy(c->cache_k + slot, k + row, sizeof(float) * GD);
            memcpy(c->cache_v + slot, v + row, sizeof(float) * GD);
        }
}

// With raw keys (kvwindow_positions_in_cache): c->freqs (cnt, D/2, 2) =
// cos, sin of the positions p - cnt + 1 .. p the rows read get, computed as
// the model's freqs_cis (llama_freqs_cis_rows, a layer above this one):
// freqs = 1.0 / (theta ** (arange(0, D, 2) / D)); polar(1, outer(t, freqs)).
static void window_freqs(KvWindow *c, int p, int cnt) {
    int D = c->base.shape.D;
    for (int r = 0; r < cnt; r++)
        for (int i = 0; i < D / 2; i++) {
            float freq = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)D);
            float angle = (float)(p - cnt + 1 + r) * freq;
            c->freqs[((size_t)r * (D / 2) + i) * 2 + 0] = cosf(angle);
            c->freqs[((size_t)r * (D / 2) + i) * 2 + 1] = sinf(angle);
        }
}

// out (D) = k (D) rotated by f (D/2, 2): apply_rotary_emb's (a + bi)(cos + i sin).
static const float *window_rotate(float *out, const float *k, const float *f, int D) {
    for (int i = 0; i < D / 2; i++) {
        float a = k[2 * i], b = k[2 * i + 1], cs = f[2 * i], sn = f[2 * i + 1];
        out[2 * i] = a * cs - b * sn;
        out[2 * i + 1] = a * sn + b * cs;
    }
    return out;
}

// One query row of head h against the positions held for it, oldest first:
// att = softmax(q . k / sqrt(D)), o = att @ v, in the preallocated kind's
// order of operations (with raw keys, each key rotated first at its place).
static void window_attend_row(KvWindow *c, float *o, float *wrow, const float *qh, const float *cache_k,
                              const float *cache_v, const int *held, int cnt, int g) {
    const KvShape *s = &c->base.shape;
    int G = s->G, D = s->D;
    float scale = sqrtf((float)D), *att = c->scores;
    for (int j = 0; j < cnt; j++) {
        const float *k = cache_k + ((size_t)kvwindow_slot(c, held[j]) * G + g) * D;
        if (c->base.raw_keys) k = window_rotate(c->freqs + (size_t)s->T * D, k, c->freqs + (size_t)j * D, D);
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot += qh[d] * k[d];
        att[j] = dot / scale;
    }
    ops_softmax_rows(att, att, 1, cnt, OPS_DIVIDE);
    if (wrow)
        for (int j = 0; j < cnt; j++) wrow[held[j]] = att[j];
    for (int d = 0; d < D; d++) o[d] = 0.0f;
    for (int j = 0; j < cnt; j++) {
        const float *v = cache_v + ((size_t)kvwindow_slot(c, held[j]) * G + g) * D;
        for (int d = 0; d < D; d++) o[d] += att[j] * v[d];
    }
}

static void window_attend(KvCache *base, float *out, float *weights, const float *q, Pool *pool, int l, int bsz,
                          int n, int pos) {
    (void)pool;   // one thread, as the preallocated kind
    KvWindow *c = (KvWindow *)base;
    const KvShape *s = &base->shape;
    int H = s->H, G = s->G, D = s->D, W = s->T, S = pos + n, rep = H / G;
    size_t per_row = (size_t)W * G * D, layer = (size_t)l * s->B * per_row;
    int *held = (int *)(c->scores + W);   // (W) the positions a query reads
    for (int b = 0; b < bsz; b++)
        for (int i = 0; i < n; i++) {
            int cnt = kvwindow_positions(held, c, pos + i);
            if (base->raw_keys) window_freqs(c, pos + i, cnt);
            float *wrow = weights ? weights + ((size_t)b * n + i) * S : NULL;
            if (wrow) memset(wrow, 0, sizeof(float) * (size_t)S);   // zero where not held
            c->queries[l] += 1.0;
            for (int h = 0; h < H; h++) {
                const float *qh = q + (((size_t)b * n + i) * H + h) * D;
                float *o = out + (((size_t)b * n + i) * H + h) * D;
                window_attend_row(c, o, h == 0 ? wrow : NULL, qh, c->cache_k + layer + b * per_row,
                                  c->cache_v + layer + b * per_row, held, cnt, h / rep);
                if (held[0] == 0) c->sink_weight[(size_t)l * H + h] += c->scores[0];
            }
        }
}

// Back to len: possible while nothing has been evicted (or to 0).
static void window_truncate(KvCache *base, int len) {
    assert(len == 0 || len == base->len || base->len <= base->shape.T);
    (void)len;
}

static void window_reset(KvCache *base) {
    KvWindow *c = (KvWindow *)base;
    memset(c->mem, 0, base->bytes);
    memset(c->sink_weight, 0, sizeof(double) * (size_t)base->shape.L * base->shape.H);
    memset(c->queries, 0, sizeof(double) * (size_t)base->shape.L);
}

static void window_free(KvCache *base) {
    KvWindow *c = (KvWindow *)base;
    bigmem_free(c->mem, base->bytes);
    free(c->scores);
    free(c->sink_weight);
    free(c->queries);
    free(c->freqs);
    memset(c, 0, sizeof *c);
}

static const KvCacheKind ROLLING = {"rolling", window_append, window_attend, window_truncate, window_reset,
                                    window_free, NULL, NULL, NULL};
static const KvCacheKind SINKS = {"sinks", window_append, window_attend, window_truncate, window_reset,
                                  window_free, NULL, NULL, NULL};

int kvwindow_init(KvWindow *c, KvShape shape, int sinks) {
    memset(c, 0, sizeof *c);
    assert(shape.T >= 1 && sinks >= 0 && sinks < shape.T);
    c->base.kind = sinks ? &SINKS : &ROLLING;
    c->base.shape = shape;
    c->base.rolling = 1;
    c->sinks = sinks;
    size_t floats = (size_t)shape.L * shape.B * shape.T * shape.G * shape.D;
    float **const fields[] = {&c->cache_k, &c->cache_v};
    const size_t sizes[] = {floats, floats};
    c->mem = bigmem_carve(fields, sizes, 2, &c->base.bytes);   // zeroed
    // scores (W floats), then the positions held (W ints)
    c->scores = malloc((sizeof(float) + sizeof(int)) * (size_t)shape.T);
    c->sink_weight = calloc((size_t)shape.L * shape.H, sizeof(double));
    c->queries = calloc((size_t)shape.L, sizeof(double));
    if (!c->mem || !c->scores || !c->sink_weight || !c->queries) {
        window_free(&c->base);
        return -1;
    }
    return 0;
}

int kvwindow_positions_in_cache(KvWindow *c, float rope_theta) {
    const KvShape *s = &c->base.shape;
    assert(s->D % 2 == 0 && rope_theta > 1.0f);
    // (W, D/2, 2) cos and sin, then one rotated key (D)
    if (!c->freqs && !(c->freqs = malloc(sizeof(float) * ((size_t)s->T + 1) * s->D))) return -1;
    c->rope_theta = rope_theta;
    c->base.raw_keys = 1;
    return 0;
}
