// kvcache — the one place where a cache's operations are checked and handed
// to its kind (kvcache.h): the rules every kind shares live here, each
// kind's layout and arithmetic in its own file.
//
// Legend as in kvcache.h: L layers, B batch rows, T positions, H query
// heads, G key/value heads, D head size, N positions fed at once.
#include "kvcache.h"

#include <assert.h>

void kvcache_append(KvCache *c, int l, const float *k, const float *v, int bsz, int n, int pos) {
    const KvShape *s = &c->shape;
    assert(l >= 0 && l < s->L && bsz >= 1 && bsz <= s->B && n >= 1);
    // in order: the positions held, then these (truncate first to feed one again)
    assert(pos == c->len && (c->rolling || pos + n <= s->T));
    c->kind->append(c, l, k, v, bsz, n, pos);
    if (l == s->L - 1) c->len = pos + n;   // every layer holds them now
}

void kvcache_attend(KvCache *c, float *out, float *weights, const float *q, Pool *pool, int l, int bsz, int n,
                    int pos) {
    const KvShape *s = &c->shape;
    assert(l >= 0 && l < s->L && bsz >= 1 && bsz <= s->B && n >= 1);
    // the rows read: held (pos <= len) or appended to layer l just before
    assert(pos >= 0 && pos <= c->len && (c->rolling || pos + n <= s->T));
    c->kind->attend(c, out, weights, q, pool, l, bsz, n, pos);
}

int kvcache_len(const KvCache *c) {
    return c->len;
}

void kvcache_truncate(KvCache *c, int len) {
    assert(len >= 0 && len <= c->len);
    if (c->kind->truncate) c->kind->truncate(c, len);
    c->len = len;
}

void kvcache_reset(KvCache *c) {
    c->kind->reset(c);
    c->len = 0;
}

size_t kvcache_bytes(const KvCache *c) {
    return c->bytes;
}

void kvcache_free(KvCache *c) {
    if (c->kind) c->kind->free(c);
}

void kvcache_read_head(KvCache *c, const float **key, const float **value, float *buf, int l, int g, int S) {
    const KvShape *s = &c->shape;
    assert(c->kind->read_head && l >= 0 && l < s->L && g >= 0 && g < s->G && S >= 0 && S <= s->T);
    c->kind->read_head(c, key, value, buf, l, g, S);
}

int kvcache_position(KvCache *c, int pos) {
    return c->kind->position ? c->kind->position(c, pos) : pos;
}

int kvcache_make_room(KvCache *c) {
    assert(c->len == c->shape.T);
    return c->kind->make_room ? c->kind->make_room(c) : -1;
}
