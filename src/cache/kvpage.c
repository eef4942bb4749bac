// kvpage — the paged KV cache: block pool, free list, reference counts,
// block tables, fork / append / free with copy-on-write, chained prefix
// hashes, and the attention that reads keys and values through a block table.
//
// Legend: NB blocks in the pool, B positions per block, L layers, H heads,
// D head size, T context, n tokens fed at once.
//
// Reading order: the pool, one block's life (take, drop, copy), sequences
// (fork, append, truncate), prefix hashes, attention through the table.
#include "kvpage.h"

#include "ops.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// The pool: every block reserved once

int kvpool_init(KvPool *p, int L, int H, int D, int B, int num_blocks) {
    memset(p, 0, sizeof *p);
    assert(L > 0 && H > 0 && D > 0 && B > 0 && num_blocks > 0);
    p->num_blocks = num_blocks;
    p->B = B;
    p->L = L;
    p->H = H;
    p->D = D;
    size_t tile = (size_t)L * H * D * B;   // floats of one block's keys (and of its values)
    p->keys = calloc((size_t)num_blocks * tile, sizeof(float));
    p->values = calloc((size_t)num_blocks * tile, sizeof(float));
    p->ref = calloc((size_t)num_blocks, sizeof(int));
    p->free_list = malloc(sizeof(int) * (size_t)num_blocks);
    p->hash = calloc((size_t)num_blocks, sizeof(uint64_t));
    p->block_tokens = calloc((size_t)num_blocks * B, sizeof(int));
    if (!p->keys || !p->values || !p->ref || !p->free_list || !p->hash || !p->block_tokens) {
        kvpool_free(p);
        return -1;
    }
    // Block 0 is handed out first: the stack holds NB-1 .. 0.
    for (int i = 0; i < num_blocks; i++) p->free_list[i] = num_blocks - 1 - i;
    p->num_free = p->min_free = num_blocks;
    return 0;
}

void kvpool_free(KvPool *p) {
    free(p->keys);
    free(p->values);
    free(p->ref);
    free(p->free_list);
    free(p->hash);
    free(p->block_tokens);
    memset(p, 0, sizeof *p);
}

void kvpool_shuffle(KvPool *p, uint32_t seed) {
    uint64_t x = seed * 2654435761u + 1;   // a small LCG is enough to scatter ids
    for (int i = p->num_free - 1; i > 0; i--) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int j = (int)((x >> 33) % (uint64_t)(i + 1));
        int t = p->free_list[i];
        p->free_list[i] = p->free_list[j];
        p->free_list[j] = t;
    }
}

int kvpool_num_free(const KvPool *p) { return p->num_free; }

float *kvpool_key(const KvPool *p, int b, int l, int h) {
    return p->keys + (((int64_t)b * p->L + l) * p->H + h) * p->D * p->B;
}

float *kvpool_value(const KvPool *p, int b, int l, int h) {
    return p->values + (((int64_t)b * p->L + l) * p->H + h) * p->B * p->D;
}

// ----------------------------------------------------------------------------
// One block's life

static void event(KvPool *p, KvEventKind kind, int block, int src) {
    if (!p->on_event) return;
    KvEvent e = {kind, block, src, p->ref[block], src >= 0 ? p->ref[src] : 0};
    p->on_event(p->event_ctx, &e);
}

// A block from the free list, its count 1. The caller has checked there is one.
static int take(KvPool *p) {
    assert(p->num_free > 0);
    int b = p->free_list[--p->num_free];
    if (p->num_free < p->min_free) p->min_free = p->num_free;
    p->ref[b] = 1;
    p->hash[b] = 0;
    event(p, KV_ALLOC, b, -1);
    return b;
}

// One reference less; at 0 the block goes back to the free list.
static void drop(KvPool *p, int b) {
    assert(p->ref[b] > 0);
    if (--p->ref[b] == 0) {
        p->hash[b] = 0;
        p->free_list[p->num_free++] = b;
    }
    event(p, KV_FREE, b, -1);
}

// Copy-on-write of logical block i of s: a fresh block gets the shared
// block's keys and values (every layer), the table points to it, and the
// shared block loses one reference. Only one block is ever copied.
static void copy_on_write(KvSeq *s, int i) {
    KvPool *p = s->pool;
    int src = s->table[i], dst = take(p);
    size_t tile = (size_t)p->L * p->H * p->D * p->B;
    memcpy(p->keys + (size_t)dst * tile, p->keys + (size_t)src * tile, sizeof(float) * tile);
    memcpy(p->values + (size_t)dst * tile, p->values + (size_t)src * tile, sizeof(float) * tile);
    s->table[i] = dst;
    p->ref[src]--;   // still > 0: another sequence holds it
    p->copies++;
    event(p, KV_COW, dst, src);
}

// ----------------------------------------------------------------------------
// Sequences: fork, append, free

int kvseq_init(KvSeq *s, KvPool *p, int max_positions) {
    memset(s, 0, sizeof *s);
    s->pool = p;
    s->max_blocks = (max_positions + p->B - 1) / p->B;
    s->table = malloc(sizeof(int) * (size_t)(s->max_blocks > 0 ? s->max_blocks : 1));
    s->tokens = malloc(sizeof(int) * (size_t)(s->max_blocks > 0 ? s->max_blocks : 1) * p->B);
    if (!s->table || !s->tokens) {
        free(s->table);
        free(s->tokens);
        memset(s, 0, sizeof *s);
        return -1;
    }
    return 0;
}

void kvseq_free(KvSeq *s) {
    if (s->pool) kvseq_truncate(s, 0);
    free(s->table);
    free(s->tokens);
    memset(s, 0, sizeof *s);
}

void kvseq_truncate(KvSeq *s, int len) {
    KvPool *p = s->pool;
    assert(len >= 0 && len <= s->len);
    int keep = (len + p->B - 1) / p->B;
    while (s->num_blocks > keep) drop(p, s->table[--s->num_blocks]);
    s->len = len;
    // A kept last block now partly filled will be written again: it can no
    // longer be found by its hash (when shared, append copies it first).
    if (len % p->B && p->ref[s->table[keep - 1]] == 1) p->hash[s->table[keep - 1]] = 0;
    s->last_hash = len >= p->B ? p->hash[s->table[len / p->B - 1]] : 0;
}

void kvseq_fork(KvSeq *child, const KvSeq *parent) {
    KvPool *p = parent->pool;
    assert(child->pool == p && child->num_blocks == 0 && child->max_blocks >= parent->num_blocks);
    for (int i = 0; i < parent->num_blocks; i++) {
        int b = parent->table[i];
        child->table[i] = b;
        p->ref[b]++;
        event(p, KV_FORK, b, -1);
    }
    child->num_blocks = parent->num_blocks;
    child->len = parent->len;
    child->last_hash = parent->last_hash;
    memcpy(child->tokens, parent->tokens, sizeof(int) * (size_t)parent->len);
}

// Records the hash of s's logical block i, which has just filled.
static void hash_block(KvSeq *s, int i) {
    KvPool *p = s->pool;
    int b = s->table[i];
    s->last_hash = kvpage_hash(s->last_hash, s->tokens + (size_t)i * p->B, p->B);
    p->hash[b] = s->last_hash;
    memcpy(p->block_tokens + (size_t)b * p->B, s->tokens + (size_t)i * p->B, sizeof(int) * (size_t)p->B);
}

int kvseq_append(KvSeq *s, const int *tokens, int n, int *need_out) {
    KvPool *p = s->pool;
    int B = p->B, end = s->len + n;
    int need = (end + B - 1) / B - s->num_blocks;
    // Writing inside a shared last block copies it first.
    int cow = n > 0 && s->len % B != 0 && p->ref[s->table[s->num_blocks - 1]] > 1;
    need += cow;
    if (need_out) *need_out = need;
    if ((end + B - 1) / B > s->max_blocks || need > p->num_free) return -1;
    if (cow) copy_on_write(s, s->num_blocks - 1);
    for (int i = 0; i < n; i++) {
        if (s->len % B == 0) s->table[s->num_blocks++] = take(p);
        s->tokens[s->len++] = tokens[i];
        if (s->len % B == 0) hash_block(s, s->num_blocks - 1);
    }
    return 0;
}

int kvseq_slot(const KvSeq *s, int pos) {
    int B = s->pool->B;
    assert(pos >= 0 && pos < s->len);
    return s->table[pos / B] * B + pos % B;
}

// ----------------------------------------------------------------------------
// Prefix hashes

uint64_t kvpage_hash(uint64_t parent, const int *tokens, int B) {
    // FNV-1a, 64 bits, over the parent's 8 bytes then each token's 4 bytes.
    uint64_t h = 14695981039346656037ull;
    for (int i = 0; i < 8; i++) h = (h ^ ((parent >> (8 * i)) & 0xFF)) * 1099511628211ull;
    for (int t = 0; t < B; t++)
        for (int i = 0; i < 4; i++) h = (h ^ (((uint32_t)tokens[t] >> (8 * i)) & 0xFF)) * 1099511628211ull;
    return h ? h : 1;   // 0 means "no hash"
}

int kvseq_share_prefix(KvSeq *s, const int *tokens, int n) {
    KvPool *p = s->pool;
    int B = p->B;
    assert(s->len == 0 && n >= 1);
    int full = (n - 1) / B;   // whole blocks before the last token
    if (full > s->max_blocks) full = s->max_blocks;
    for (int i = 0; i < full; i++) {
        const int *t = tokens + (size_t)i * B;
        uint64_t h = kvpage_hash(s->last_hash, t, B);
        int found = -1;
        for (int b = 0; b < p->num_blocks && found < 0; b++)
            if (p->ref[b] > 0 && p->hash[b] == h &&
                memcmp(p->block_tokens + (size_t)b * B, t, sizeof(int) * (size_t)B) == 0)
                found = b;
        if (found < 0) break;
        p->ref[found]++;
        s->table[s->num_blocks++] = found;
        memcpy(s->tokens + s->len, t, sizeof(int) * (size_t)B);
        s->len += B;
        s->last_hash = h;
        event(p, KV_SHARE, found, -1);
    }
    return s->len;
}

// ----------------------------------------------------------------------------
// Attention through the block table

void kvpage_write(KvSeq *s, int l, const float *k, const float *v, int n, int offset) {
    const KvPool *p = s->pool;
    int H = p->H, D = p->D, B = p->B, C = H * D;
    assert(offset + n <= s->len);
    for (int i = 0; i < n; i++) {
        int pos = offset + i, b = s->table[pos / B], j = pos % B;
        for (int h = 0; h < H; h++) {
            // key tile (D, B): column j; value tile (B, D): row j
            float *key = kvpool_key(p, b, l, h), *value = kvpool_value(p, b, l, h);
            const float *kh = k + (int64_t)i * C + h * D, *vh = v + (int64_t)i * C + h * D;
            for (int d = 0; d < D; d++) key[(int64_t)d * B + j] = kh[d];
            memcpy(value + (int64_t)j * D, vh, sizeof(float) * (size_t)D);
        }
    }
}

typedef struct {
    const KvSeq *s;
    float *att, *scores, *weights;
    const float *q;
    int l, n, offset, T;
} PagedJob;

static void paged_heads(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const PagedJob *job = ctx;
    const KvPool *p = job->s->pool;
    const int *table = job->s->table;
    int H = p->H, D = p->D, B = p->B, C = H * D;
    // scale = 1 / sqrt(head size) in float32, as the contiguous attention
    float scale = (float)(1.0 / sqrt((double)D));
    for (int h = begin; h < end; h++) {
        float *scores = job->scores + (int64_t)h * job->T;   // (T)
        for (int i = 0; i < job->n; i++) {
            int pos = job->offset + i;   // this row sees positions 0 .. pos
            const float *q = job->q + (int64_t)i * C + h * D;
            float *out = job->att + (int64_t)i * C + h * D;
            // scores = query @ key * scale, one block's (D, B) key tile at a time:
            // block b holds positions b*B .. b*B + B-1
            for (int b = 0; b * B <= pos; b++) {
                int cnt = pos + 1 - b * B < B ? pos + 1 - b * B : B;
                ops_vecmat(scores + b * B, q, kvpool_key(p, table[b], job->l, h), D, cnt, B);
            }
            for (int j = 0; j <= pos; j++) scores[j] *= scale;
            // weights = softmax(scores)
            ops_softmax_row(scores, NULL, scores, pos + 1, OPS_RECIPROCAL);
            if (job->weights && h == 0) {   // head 0's weights (n, offset+n), 0 past pos
                float *w = job->weights + (int64_t)i * (job->offset + job->n);
                memcpy(w, scores, sizeof(float) * (size_t)(pos + 1));
                memset(w + pos + 1, 0, sizeof(float) * (size_t)(job->n - 1 - i));
            }
            // output = weights @ value: the sums run on from block to block in
            // position order, as over one contiguous value
            for (int b = 0; b * B <= pos; b++) {
                int cnt = pos + 1 - b * B < B ? pos + 1 - b * B : B;
                const float *value = kvpool_value(p, table[b], job->l, h);
                if (b == 0) ops_vecmat(out, scores, value, cnt, D, D);
                else ops_vecmat_acc(out, scores + b * B, value, cnt, D, D);
            }
        }
    }
}

void kvpage_attention(const KvSeq *s, float *att, float *scores, float *weights, const float *q, Pool *pool, int l,
                      int n, int offset, int T) {
    assert(offset + n <= s->len && offset + n <= T);
    PagedJob job = {s, att, scores, weights, q, l, n, offset, T};
    pool_run(pool, paged_heads, &job, s->pool->H);
}
