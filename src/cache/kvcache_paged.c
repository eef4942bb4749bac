// kvcache_paged — the paged cache of lesson 6.1 as a kind of kvcache.h: one
// sequence's positions in the blocks of a pool (kvpage.h), written and read
// through its block table, with the contiguous kind's arithmetic in the same
// order, so that the two agree bit for bit.
//
// Legend as in kvcache.h: L layers, T positions, H heads (= G), D head
// size, N positions fed at once; B here is kvpage.h's block size.
//
// The blocks belong to the pool and the sequence: kvseq_append reserves
// them (it needs the tokens, for the prefix hashes, and may find the pool
// full, which a caller wants to know before anything is computed), and
// kvseq_truncate frees them. This kind only writes and reads them.
#include "kvcache.h"

#include "kvpage.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

// Positions pos .. pos+n-1, already reserved in the sequence's blocks.
static void paged_append(KvCache *base, int l, const float *k, const float *v, int bsz, int n, int pos) {
    assert(bsz == 1);
    kvpage_write(((KvPaged *)base)->seq, l, k, v, n, pos);
}

static void paged_attend(KvCache *base, float *out, float *weights, const float *q, Pool *pool, int l, int bsz,
                         int n, int pos) {
    KvPaged *c = (KvPaged *)base;
    assert(bsz == 1);
    kvpage_attention(c->seq, out, c->scores, weights, q, pool, l, n, pos, base->shape.T);
}

// The blocks stay the sequence's until kvseq_truncate or kvseq_free.
static void paged_reset(KvCache *base) {
    (void)base;
}

static void paged_free(KvCache *base) {
    KvPaged *c = (KvPaged *)base;
    free(c->scores);
    memset(c, 0, sizeof *c);
}

static const KvCacheKind PAGED = {"paged", paged_append, paged_attend, NULL, paged_reset, paged_free, NULL, NULL, NULL};

int kvpaged_init(KvPaged *c, KvShape shape) {
    assert(shape.B == 1 && shape.G == shape.H);
    memset(c, 0, sizeof *c);
    c->base.kind = &PAGED;
    c->base.shape = shape;
    c->scores = malloc(sizeof(float) * (size_t)shape.H * (size_t)shape.T);
    if (!c->scores) {
        paged_free(&c->base);
        return -1;
    }
    return 0;
}

void kvpaged_bind(KvPaged *c, KvSeq *seq, int len) {
    const KvShape *s = &c->base.shape;
    const KvPool *p = seq->pool;
    assert(p->L == s->L && p->H == s->H && p->D == s->D && len <= seq->len);
    c->seq = seq;
    c->base.len = len;
    // the blocks in the sequence's table: a (D, B) key tile and a (B, D)
    // value tile per layer and head each (shared blocks count for every
    // sequence holding them)
    c->base.bytes = (size_t)seq->num_blocks * 2 * p->L * p->H * p->D * p->B * sizeof(float);
}
