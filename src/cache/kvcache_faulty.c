// kvcache_faulty — lesson 11's classic cache bugs as a kind of kvcache.h: a
// cache that keeps its rows in another one (contiguous or quantised) and
// goes wrong on purpose, the way a hand-written cache does. The model has no
// bug code at all: it asks its cache where a row stands, appends, attends,
// and asks for room past the context, as it does with every kind.
//
// Legend as in kvcache.h: L layers, T positions, H heads (= G), D head
// size, N positions fed at once.
//
// A cached step is a pass at pos > 0; a pass from position 0 (no cache) is
// never touched, so a run without the cache stays the reference.
//   offset        kvcache_position says 0, 1, .. for a cached step's rows:
//                 position_embedding(range(n)) where the chapter adds offset
//   no-append     the new rows go into a scratch slot just past what the
//                 last pass from 0 fed and are overwritten by the next
//                 step's: the cache never grows, each step sees the prompt
//                 and itself
//   stale         past the context the cache makes room at T - 1 rather
//                 than be rebuilt: the old keys stay, the newest token
//                 always at the last position
//   mask          a top-left causal mask: row i of a cached step sees
//                 keys 0 .. i only (torch.triu(mask, diagonal=1) on a
//                 (1, len) score row keeps column 0)
//   wrong-layout  the transposed key (D, len) read as if it were (len, D)
//   no-scale      the scores not divided by sqrt(D)
// and two of speculative decoding's rollback (spec.h), which go wrong in
// kvcache_truncate alone, so that only a run that rolls back shows them:
//   no-rollback   the rejected rows stay: the cache's own length is not cut
//                 back, the next rows go after them, and every later query
//                 sees them. (Once they would push a row past T, the newest
//                 rows overwrite the last ones instead, to keep running.)
//   off-by-one  a truncate that cuts rows cuts one more than asked:
//                 the next rows overwrite the last kept one, which no query
//                 sees again
// Both keep the model's positions honest: only where the rows sit moves,
// position p at slot p + shift of the inner cache.
#include "kvcache.h"

#include "bigmem.h"
#include "ops.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

// Where the rows fed at pos go in the inner cache.
static int faulty_slot(const KvFaulty *c, int pos) {
    if (c->bug == KV_BUG_NO_APPEND && pos > 0) return c->prefill;
    return pos + c->shift;   // shift is 0 but after a rollback bug's truncate
}

static int faulty_position(KvCache *base, int pos) {
    KvFaulty *c = (KvFaulty *)base;
    int offset = base->len;   // the pass's first position: the cache holds 0 .. offset-1
    return c->bug == KV_BUG_OFFSET && offset > 0 ? pos - offset : pos;
}

static int faulty_make_room(KvCache *base) {
    KvFaulty *c = (KvFaulty *)base;
    return c->bug == KV_BUG_STALE ? base->shape.T - 1 : -1;
}

static void faulty_append(KvCache *base, int l, const float *k, const float *v, int bsz, int n, int pos) {
    KvFaulty *c = (KvFaulty *)base;
    if (pos == 0) c->prefill = n;
    int T = base->shape.T;
    if (l == 0 && pos + c->shift + n > T) c->shift = T - n - pos;   // no-rollback's rows fill the context
    int slot = faulty_slot(c, pos);
    // the inner cache forgets what lies past the slot (no-append's last
    // scratch row, or nothing), then takes the rows there
    if (kvcache_len(c->inner) > slot) kvcache_truncate(c->inner, slot);
    kvcache_append(c->inner, l, k, v, bsz, n, slot);
}

// The scores (seen) of query q (D) against key (D, T) for row i at position
// p, times scale, as the bug computes them; returns how many the softmax takes.
static int faulty_scores(KvBug bug, float *scores, const float *q, const float *key, float scale, int i, int p,
                         int D, int T) {
    int seen = bug == KV_BUG_MASK ? i + 1 : p + 1;
    if (bug == KV_BUG_NO_SCALE) scale = 1;
    if (bug == KV_BUG_WRONG_LAYOUT) {
        // The chapter's key (1, H, D, len) read as if it were (1, H, len, D),
        // numpy's key.reshape(1, H, len, D): element [t][d] is number k = t*D + d
        // of the (D, len) array written so far, its row k / len and column
        // k % len. Only the len = seen columns written are read.
        for (int t = 0; t < seen; t++) {
            float sum = 0;
            for (int d = 0; d < D; d++) {
                int k = t * D + d;
                sum += q[d] * key[(int64_t)(k / seen) * T + k % seen];
            }
            scores[t] = sum;
        }
    } else {
        ops_vecmat(scores, q, key, D, seen, T);
    }
    for (int j = 0; j < seen; j++) scores[j] *= scale;
    return seen;
}

typedef struct {
    KvFaulty *c;
    float *out, *weights;
    const float *q;
    int l, n, pos;
} FaultyJob;

// The heads begin..end-1, one row at a time: rows 0..n-1 at slots
// slot..slot+n-1 of the inner cache, scored the bug's way.
static void faulty_heads(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const FaultyJob *job = ctx;
    KvFaulty *c = job->c;
    int T = c->base.shape.T, H = c->base.shape.H, D = c->base.shape.D, C = H * D;
    int slot = faulty_slot(c, job->pos), S = job->pos + job->n;
    KvBug bug = job->pos > 0 ? c->bug : KV_BUG_NONE;   // a pass from 0 goes right
    // scale = Tensor(np.array(1.0 / np.sqrt(head_embedding_size))), used in float32
    float scale = (float)(1.0 / sqrt((double)D));
    for (int h = begin; h < end; h++) {
        const float *key, *value;
        kvcache_read_head(c->inner, &key, &value, c->buf + (int64_t)h * 2 * D * T, job->l, h, slot + job->n);
        float *scores = c->scores + (int64_t)h * T;   // (T)
        for (int i = 0; i < job->n; i++) {
            const float *q = job->q + (int64_t)i * C + h * D;   // (D)
            float *out = job->out + (int64_t)i * C + h * D;     // (D)
            int seen = faulty_scores(bug, scores, q, key, scale, i, slot + i, D, T);
            // weights = softmax(scores)
            ops_softmax_row(scores, NULL, scores, seen, OPS_RECIPROCAL);
            if (job->weights && h == 0) {
                float *w = job->weights + (int64_t)i * S;
                memset(w, 0, sizeof(float) * (size_t)S);
                memcpy(w, scores, sizeof(float) * (size_t)(seen < S ? seen : S));
            }
            // output = weights @ value, over value's first seen rows
            ops_vecmat(out, scores, value, seen, D, D);
        }
    }
}

static void faulty_attend(KvCache *base, float *out, float *weights, const float *q, Pool *pool, int l, int bsz,
                          int n, int pos) {
    assert(bsz == 1);
    FaultyJob job = {(KvFaulty *)base, out, weights, q, l, n, pos};
    pool_run(pool, faulty_heads, &job, base->shape.H);
}

// base->len is still the length before the cut.
static void faulty_truncate(KvCache *base, int len) {
    KvFaulty *c = (KvFaulty *)base;
    if (c->bug == KV_BUG_NO_ROLLBACK) c->shift += base->len - len;   // the rows stay where they are
    if (c->bug == KV_BUG_OFF_BY_ONE && len < base->len && len + c->shift > 0) c->shift--;   // one row too many
    int keep = len + c->shift;
    if (kvcache_len(c->inner) > keep) kvcache_truncate(c->inner, keep);
}

static void faulty_reset(KvCache *base) {
    KvFaulty *c = (KvFaulty *)base;
    kvcache_reset(c->inner);
    c->prefill = 0;
    c->shift = 0;
}

// The inner cache is the caller's.
static void faulty_free(KvCache *base) {
    KvFaulty *c = (KvFaulty *)base;
    bigmem_free(c->buf, c->scratch_bytes);
    memset(c, 0, sizeof *c);
}

static const KvCacheKind FAULTY = {"faulty",    faulty_append, faulty_attend,   faulty_truncate, faulty_reset,
                                   faulty_free, NULL,          faulty_position, faulty_make_room};

int kvfaulty_init(KvFaulty *c, KvCache *inner, KvBug bug) {
    const KvShape *s = &inner->shape;
    assert(s->B == 1 && s->G == s->H && inner->kind->read_head && kvcache_len(inner) == 0);
    memset(c, 0, sizeof *c);
    c->base.kind = &FAULTY;
    c->base.shape = *s;
    c->base.bytes = kvcache_bytes(inner);
    c->inner = inner;
    c->bug = bug;
    c->scratch_bytes = sizeof(float) * (size_t)s->H * ((size_t)2 * s->D * s->T + (size_t)s->T);
    c->buf = bigmem_alloc(c->scratch_bytes);
    if (!c->buf) {
        faulty_free(&c->base);
        return -1;
    }
    c->scores = c->buf + (size_t)s->H * 2 * s->D * s->T;
    return 0;
}
