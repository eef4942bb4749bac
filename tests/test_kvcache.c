// test_kvcache — every kind of KV cache (src/cache/kvcache.h: contiguous,
// preallocated, paged, quantised; rolling and sinks with W = T, before
// they evict: the tests of eviction are tests/test_kvwindow.c's) against
// the same plain loops, written here without any of kvdemo's kernels:
//   out[i] = sum_j softmax_j(q_i . k_j / sqrt(D)) v_j   over j = 0 .. pos+i
// in double, from the keys and values the test appended itself.
//
//   test_attend_matches_plain_loops   append in pieces (a prompt, single steps, a chunk),
//                                     attend after each; every output and head 0's weights
//                                     within 1e-5 of the loops (the quantised kinds: within
//                                     kvcache.h's bound), zero weight past the causal bound
//   test_truncate_equals_rebuilt      append, truncate, append other rows = a cache built
//                                     from scratch with the rows kept: bit for bit
//   test_reset_equals_new             a used cache after reset = a new cache, bit for bit
//   test_paged_equals_contiguous      the same rows and queries: the same bits in both
//   test_layout_formulas              each element where kvcache.h's index formula says
//   test_bytes_are_allocated          the bytes reported are the key and value arrays,
//                                     2 L B T G D 4, and every one of them can be written;
//                                     the paged cache's, the blocks its sequence holds
#include "testutil.h"

#include "kvcache.h"
#include "kvpage.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// The kinds and their shapes

typedef enum { CONTIG, PREALLOC, PAGED, Q_BF16, Q_FP16, Q_INT8, Q_INT4, ROLLING, SINKS, NUM_KINDS } Kind;
static const char *const KIND_NAMES[NUM_KINDS] = {"contiguous",     "preallocated",   "paged",
                                                  "bf16 quantised", "fp16 quantised", "int8 quantised",
                                                  "int4 quantised", "rolling",        "sinks"};
static const KvDtype KIND_DTYPE[NUM_KINDS] = {KV_FP32, KV_FP32, KV_FP32, KV_BF16, KV_FP16,
                                              KV_INT8, KV_INT4, KV_FP32, KV_FP32};

// The quantised kinds' key groups: 4 positions share a key channel's scale,
// so that the shapes below cross several groups and end inside one.
enum { GROUP = 4 };

// The paged cache's blocks: 4 positions each, so that the shapes below
// cross several block boundaries.
enum { BLOCK = 4 };

// A cache of any kind, made here. The paged one gets a pool and a sequence
// of its own, the pool's free list shuffled so that its blocks are scattered.
typedef struct {
    Kind kind;
    KvContig contig;
    KvPrealloc pre;
    KvPaged paged;
    KvQuant quant;
    KvWindow window;
    KvPool pool;
    KvSeq seq;
    KvCache *c;
} Holder;

static void make(Holder *h, Kind kind, KvShape shape) {
    memset(h, 0, sizeof *h);
    h->kind = kind;
    if (kind == CONTIG) {
        assert_int_equal(kvcontig_init(&h->contig, shape), 0);
        h->c = &h->contig.base;
    } else if (kind == PREALLOC) {
        assert_int_equal(kvprealloc_init(&h->pre, shape), 0);
        h->c = &h->pre.base;
    } else if (KIND_DTYPE[kind] != KV_FP32) {
        assert_int_equal(kvquant_cache_init(&h->quant, shape, KIND_DTYPE[kind], GROUP), 0);
        h->c = &h->quant.base;
    } else if (kind == ROLLING || kind == SINKS) {
        assert_int_equal(kvwindow_init(&h->window, shape, kind == SINKS ? 3 : 0), 0);
        h->c = &h->window.base;
    } else {
        int blocks = (shape.T + BLOCK - 1) / BLOCK;
        assert_int_equal(kvpool_init(&h->pool, shape.L, shape.H, shape.D, BLOCK, 2 * blocks), 0);
        kvpool_shuffle(&h->pool, 5);
        assert_int_equal(kvseq_init(&h->seq, &h->pool, shape.T), 0);
        assert_int_equal(kvpaged_init(&h->paged, shape), 0);
        kvpaged_bind(&h->paged, &h->seq, 0);
        h->c = &h->paged.base;
    }
    assert_string_equal(h->c->kind->name, KIND_DTYPE[kind] != KV_FP32 ? "quantised" : KIND_NAMES[kind]);
}

// Before n positions are appended: the paged cache's sequence frees the
// blocks past what the cache holds and reserves those of the n new ones,
// as gpt_forward_paged does. The other kinds reserved everything up front.
static void reserve(Holder *h, int n) {
    if (h->kind != PAGED) return;
    int len = kvcache_len(h->c), tokens[64] = {0};
    assert_true(n <= 64);
    kvseq_truncate(&h->seq, len);
    assert_int_equal(kvseq_append(&h->seq, tokens, n, NULL), 0);
    kvpaged_bind(&h->paged, &h->seq, len);
}

static void unmake(Holder *h) {
    kvcache_free(h->c);
    if (h->kind == PAGED) {
        kvseq_free(&h->seq);
        kvpool_free(&h->pool);
    }
}

// The shapes each kind is tried on: the contiguous, paged and quantised
// caches are the chapter's (one sequence, a key per head); the preallocated
// one also takes batches and grouped (G < H) or shared (G = 1) keys.
static int shapes_of(KvShape *out, Kind kind) {
    if (kind != PREALLOC) {
        out[0] = (KvShape){.L = 2, .B = 1, .T = 20, .H = 3, .G = 3, .D = 8};
        out[1] = (KvShape){.L = 1, .B = 1, .T = 16, .H = 2, .G = 2, .D = 5};
        return 2;
    }
    out[0] = (KvShape){.L = 2, .B = 2, .T = 20, .H = 4, .G = 2, .D = 8};
    out[1] = (KvShape){.L = 1, .B = 3, .T = 16, .H = 4, .G = 1, .D = 6};
    out[2] = (KvShape){.L = 2, .B = 1, .T = 16, .H = 2, .G = 2, .D = 4};
    return 3;
}

// ----------------------------------------------------------------------------
// Data and the plain loops

// Numbers in [-1, 1) from a 64-bit LCG (Knuth's MMIX constants), 24 bits each.
static float next_float(uint64_t *state) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(*state >> 40) / (double)(1 << 24) * 2.0 - 1.0);
}

static void fill(float *x, size_t n, uint64_t *state) {
    for (size_t i = 0; i < n; i++) x[i] = next_float(state);
}

// What the test appended, kept its own way: keys and values (L, B, T, G, D).
typedef struct {
    KvShape s;
    float *k, *v;
} Mirror;

static void mirror_init(Mirror *m, KvShape s) {
    m->s = s;
    size_t n = (size_t)s.L * s.B * s.T * s.G * s.D;
    m->k = calloc(n, sizeof(float));
    m->v = calloc(n, sizeof(float));
    assert_non_null(m->k);
    assert_non_null(m->v);
}

static void mirror_free(Mirror *m) {
    free(m->k);
    free(m->v);
}

static size_t at(const KvShape *s, int l, int b, int t, int g) {
    return ((((size_t)l * s->B + b) * s->T + t) * s->G + g) * s->D;
}

// k, v (bsz, n, G*D) of layer l at positions pos.. into the mirror.
static void mirror_append(Mirror *m, int l, const float *k, const float *v, int bsz, int n, int pos) {
    const KvShape *s = &m->s;
    size_t GD = (size_t)s->G * s->D;
    for (int b = 0; b < bsz; b++)
        for (int i = 0; i < n; i++) {
            memcpy(m->k + at(s, l, b, pos + i, 0), k + ((size_t)b * n + i) * GD, sizeof(float) * GD);
            memcpy(m->v + at(s, l, b, pos + i, 0), v + ((size_t)b * n + i) * GD, sizeof(float) * GD);
        }
}

// The float sums of at most D products against double ones: far below 1e-5
// for numbers in [-1, 1) and D <= 8
static const double TOLERANCE = 1e-5;

// How far a stored key or value may be from the one appended, for numbers in
// [-1, 1): kvcache.h's ek and ev (a scale is at most 1 / QMAX).
static double stored_error(KvDtype t) {
    switch (t) {
    case KV_BF16: return ldexp(1, -9);
    case KV_FP16: return ldexp(1, -11);
    case KV_INT8: return 0.5 / 127;
    case KV_INT4: return 0.5 / 7;
    default: return 0;
    }
}

// What the loops' numbers may be off by, per output number and per weight
// of head 0 (kvcache.h's bound for a cache that stores within e; 0: exact).
typedef struct {
    double e;
    double *out, *weights;   // (bsz, n, H*D) and (bsz, n, pos+n)
} Bound;

// out (bsz, n, H*D) and head 0's weights (bsz, n, pos+n), in double, as the
// formula at the top says: query head h reads key/value head h / (H / G);
// and into bound, how far a cache storing within bound->e may be from them.
static void plain_attend(double *out, double *weights, Bound *bound, const Mirror *m, const float *q, int l,
                         int bsz, int n, int pos) {
    const KvShape *s = &m->s;
    int H = s->H, G = s->G, D = s->D, S = pos + n;
    double *p = malloc(sizeof(double) * (size_t)S);
    assert_non_null(p);
    for (int b = 0; b < bsz; b++)
        for (int i = 0; i < n; i++)
            for (int h = 0; h < H; h++) {
                int g = h / (H / G);
                const float *qi = q + (((size_t)b * n + i) * H + h) * D;
                double max = -INFINITY, sum = 0, q1 = 0, vmax = 0;
                for (int d = 0; d < D; d++) q1 += fabs(qi[d]);
                double grow = expm1(2 * q1 * bound->e / sqrt((double)D));
                for (int j = 0; j <= pos + i; j++) {
                    const float *kj = m->k + at(s, l, b, j, g);
                    double dot = 0;
                    for (int d = 0; d < D; d++) dot += (double)qi[d] * kj[d];
                    p[j] = dot / sqrt((double)D);
                    if (p[j] > max) max = p[j];
                }
                for (int j = 0; j <= pos + i; j++) sum += p[j] = exp(p[j] - max);
                double *o = out + (((size_t)b * n + i) * H + h) * D;
                for (int d = 0; d < D; d++) o[d] = 0;
                for (int j = 0; j < S; j++) {
                    double w = j <= pos + i ? p[j] / sum : 0;
                    size_t e = ((size_t)b * n + i) * S + j;
                    if (h == 0) weights[e] = w, bound->weights[e] = TOLERANCE + grow * w;
                    const float *vj = m->v + at(s, l, b, j, g);
                    for (int d = 0; d < D; d++) o[d] += w * vj[d];
                    for (int d = 0; d < D && j <= pos + i; d++) vmax = fmax(vmax, fabs(vj[d]));
                }
                for (int d = 0; d < D; d++)
                    bound->out[(((size_t)b * n + i) * H + h) * D + d] = TOLERANCE + bound->e + grow * vmax;
            }
    free(p);
}

// ----------------------------------------------------------------------------
// Appending and attending in pieces

static void expect_near(const float *got, const double *want, const double *bound, size_t n, const char *what,
                        int step) {
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= bound[i]))
            fail_msg("%s, step %d, [%zu]: expected %.9g within %.3g, got %.9g", what, step, i, want[i], bound[i],
                     got[i]);
}

// One step of a run: n new positions for every row of the batch, at len.
// Every layer appends its keys and values, then attends with its queries
// (drawn from state), as a model's forward pass does; the outputs are held
// against the plain loops.
static void step_and_check(Holder *hd, Mirror *m, int bsz, int n, uint64_t *state, const char *what, int step) {
    KvCache *c = hd->c;
    reserve(hd, n);
    const KvShape *s = &c->shape;
    int pos = kvcache_len(c), S = pos + n;
    size_t kv = (size_t)bsz * n * s->G * s->D, qn = (size_t)bsz * n * s->H * s->D;
    float *k = malloc(sizeof(float) * kv), *v = malloc(sizeof(float) * kv), *q = malloc(sizeof(float) * qn);
    float *out = malloc(sizeof(float) * qn), *w = malloc(sizeof(float) * (size_t)bsz * n * S);
    double *want = malloc(sizeof(double) * qn), *want_w = malloc(sizeof(double) * (size_t)bsz * n * S);
    Bound bound = {stored_error(KIND_DTYPE[hd->kind]), malloc(sizeof(double) * qn),
                   malloc(sizeof(double) * (size_t)bsz * n * S)};
    assert_true(k && v && q && out && w && want && want_w && bound.out && bound.weights);
    for (int l = 0; l < s->L; l++) {
        fill(k, kv, state);
        fill(v, kv, state);
        fill(q, qn, state);
        kvcache_append(c, l, k, v, bsz, n, pos);
        mirror_append(m, l, k, v, bsz, n, pos);
        kvcache_attend(c, out, w, q, NULL, l, bsz, n, pos);
        plain_attend(want, want_w, &bound, m, q, l, bsz, n, pos);
        expect_near(out, want, bound.out, qn, what, step);
        expect_near(w, want_w, bound.weights, (size_t)bsz * n * S, what, step);
    }
    assert_int_equal(kvcache_len(c), S);
    free(k), free(v), free(q), free(out), free(w), free(want), free(want_w), free(bound.out), free(bound.weights);
}

static void test_attend_matches_plain_loops(void **state) {
    (void)state;
    for (int kind = 0; kind < NUM_KINDS; kind++) {
        KvShape shapes[4];
        int count = shapes_of(shapes, (Kind)kind);
        for (int si = 0; si < count; si++) {
            KvShape s = shapes[si];
            Holder h;
            make(&h, (Kind)kind, s);
            Mirror m;
            mirror_init(&m, s);
            uint64_t rng = 7 + (uint64_t)si;
            char what[160];
            snprintf(what, sizeof what, "%s cache, shape %d (L %d B %d T %d H %d G %d D %d)", KIND_NAMES[kind], si,
                     s.L, s.B, s.T, s.H, s.G, s.D);
            // a prompt of 5, single steps, a chunk of 9 (more rows than the
            // contiguous attention takes in one block, OPS_ROWS_MAX), a chunk
            // of 3, then the rest of the context
            int pieces[] = {5, 1, 1, 9, 1, 3};
            int step = 0;
            for (size_t p = 0; p < sizeof pieces / sizeof pieces[0] && kvcache_len(h.c) + pieces[p] <= s.T; p++)
                step_and_check(&h, &m, s.B, pieces[p], &rng, what, step++);
            if (kvcache_len(h.c) < s.T) step_and_check(&h, &m, s.B, s.T - kvcache_len(h.c), &rng, what, step++);
            assert_int_equal(kvcache_len(h.c), s.T);
            mirror_free(&m);
            unmake(&h);
        }
    }
}

// ----------------------------------------------------------------------------
// Truncate and reset against a cache built from scratch

// Appends n positions to every layer of c from the values state draws
// (the same draws give the same rows).
static void append_rows(Holder *h, int bsz, int n, uint64_t seed) {
    KvCache *c = h->c;
    reserve(h, n);
    const KvShape *s = &c->shape;
    size_t kv = (size_t)bsz * n * s->G * s->D;
    float *k = malloc(sizeof(float) * kv), *v = malloc(sizeof(float) * kv);
    assert_true(k && v);
    int pos = kvcache_len(c);
    for (int l = 0; l < s->L; l++) {
        uint64_t st = seed * 1000 + (uint64_t)l;
        fill(k, kv, &st);
        fill(v, kv, &st);
        kvcache_append(c, l, k, v, bsz, n, pos);
    }
    free(k), free(v);
}

// out (L, bsz, n, H*D): every layer's attention of queries drawn from seed
// at positions pos .. pos+n-1.
static void attend_all(float *out, KvCache *c, int bsz, int n, int pos, uint64_t seed) {
    const KvShape *s = &c->shape;
    size_t qn = (size_t)bsz * n * s->H * s->D;
    float *q = malloc(sizeof(float) * qn);
    assert_non_null(q);
    uint64_t st = seed;
    fill(q, qn, &st);
    for (int l = 0; l < s->L; l++) kvcache_attend(c, out + (size_t)l * qn, NULL, q, NULL, l, bsz, n, pos);
    free(q);
}

static void test_truncate_equals_rebuilt(void **state) {
    (void)state;
    for (int kind = 0; kind < NUM_KINDS; kind++) {
        KvShape shapes[4];
        int count = shapes_of(shapes, (Kind)kind);
        for (int si = 0; si < count; si++) {
            KvShape s = shapes[si];
            // a quantised cache cut inside a complete group rounds its keys
            // again (kvcache.h; test_kvquant.c holds that case): cut at 8
            int keep = KIND_DTYPE[kind] != KV_FP32 ? 2 * GROUP : 7, extra = 5, B = s.B;
            size_t outn = (size_t)s.L * B * extra * s.H * s.D;
            float *got = malloc(sizeof(float) * outn), *want = malloc(sizeof(float) * outn);
            assert_true(got && want);
            // rolled back: keep rows, 6 more (rejected drafts), cut to keep, then 5 others
            Holder a;
            make(&a, (Kind)kind, s);
            append_rows(&a, B, keep, 1);
            append_rows(&a, B, 6, 2);
            kvcache_truncate(a.c, keep);
            assert_int_equal(kvcache_len(a.c), keep);
            append_rows(&a, B, extra, 3);
            attend_all(got, a.c, B, extra, keep, 4);
            // from scratch: the keep rows (in other pieces), then the 5
            Holder b;
            make(&b, (Kind)kind, s);
            append_rows(&b, B, keep, 1);
            append_rows(&b, B, extra, 3);
            attend_all(want, b.c, B, extra, keep, 4);
            char what[160];
            snprintf(what, sizeof what, "%s cache, shape %d: attention after truncate (layer, row, dim)",
                     KIND_NAMES[kind], si);
            assert_bits(got, want, (int64_t)outn, what);
            unmake(&a);
            unmake(&b);
            free(got), free(want);
        }
    }
}

static void test_reset_equals_new(void **state) {
    (void)state;
    for (int kind = 0; kind < NUM_KINDS; kind++) {
        KvShape shapes[4];
        shapes_of(shapes, (Kind)kind);
        KvShape s = shapes[0];
        size_t outn = (size_t)s.L * s.B * 4 * s.H * s.D;
        float *got = malloc(sizeof(float) * outn), *want = malloc(sizeof(float) * outn);
        assert_true(got && want);
        Holder a, b;
        make(&a, (Kind)kind, s);
        append_rows(&a, s.B, s.T, 9);   // every slot used by another sequence
        kvcache_reset(a.c);
        assert_int_equal(kvcache_len(a.c), 0);
        append_rows(&a, s.B, 4, 5);
        attend_all(got, a.c, s.B, 4, 0, 6);
        make(&b, (Kind)kind, s);
        append_rows(&b, s.B, 4, 5);
        attend_all(want, b.c, s.B, 4, 0, 6);
        char what[160];
        snprintf(what, sizeof what, "%s cache: attention after reset", KIND_NAMES[kind]);
        assert_bits(got, want, (int64_t)outn, what);
        unmake(&a);
        unmake(&b);
        free(got), free(want);
    }
}

// The paged cache does the contiguous one's arithmetic in the same order
// (kvpage.h): the same rows appended and the same queries give the same
// bits, whatever blocks the rows landed in.
static void test_paged_equals_contiguous(void **state) {
    (void)state;
    KvShape shapes[4];
    int count = shapes_of(shapes, PAGED);
    for (int si = 0; si < count; si++) {
        KvShape s = shapes[si];
        Holder a, b;
        make(&a, CONTIG, s);
        make(&b, PAGED, s);
        int pieces[] = {5, 1, 1, 6, 1};
        size_t most = (size_t)s.L * 6 * s.H * s.D;
        float *got = malloc(sizeof(float) * most), *want = malloc(sizeof(float) * most);
        assert_true(got && want);
        for (int p = 0; p < 5; p++) {
            int pos = kvcache_len(a.c), n = pieces[p];
            append_rows(&a, 1, n, (uint64_t)p + 20);
            append_rows(&b, 1, n, (uint64_t)p + 20);
            attend_all(want, a.c, 1, n, pos, (uint64_t)p + 40);
            attend_all(got, b.c, 1, n, pos, (uint64_t)p + 40);
            char what[160];
            snprintf(what, sizeof what, "shape %d, piece %d: paged against contiguous (layer, row, dim)", si, p);
            assert_bits(got, want, (int64_t)s.L * n * s.H * s.D, what);
        }
        free(got), free(want);
        unmake(&a);
        unmake(&b);
    }
}

// ----------------------------------------------------------------------------
// Layout and bytes

// Every element of key and value is a distinct number, found where the
// header's formula puts it.
static void test_layout_formulas(void **state) {
    (void)state;
    KvShape s = {.L = 2, .B = 1, .T = 6, .H = 3, .G = 3, .D = 4};
    Holder h;
    make(&h, CONTIG, s);
    int C = s.H * s.D, n = 5;
    float k[5 * 12], v[5 * 12];
    for (int l = 0; l < s.L; l++) {
        // k of row i, head h, dim d: 1000 l + 100 i + 10 h + d (v: negative)
        for (int i = 0; i < n; i++)
            for (int c = 0; c < C; c++)
                k[i * C + c] = (float)(1000 * l + 100 * i + 10 * (c / s.D) + c % s.D), v[i * C + c] = -k[i * C + c];
        kvcache_append(h.c, l, k, v, 1, n, 0);
    }
    for (int l = 0; l < s.L; l++)
        for (int hh = 0; hh < s.H; hh++)
            for (int t = 0; t < n; t++)
                for (int d = 0; d < s.D; d++) {
                    float want = (float)(1000 * l + 100 * t + 10 * hh + d);
                    float key = h.contig.key[((l * s.H + hh) * s.D + d) * s.T + t];
                    float value = h.contig.value[((l * s.H + hh) * s.T + t) * s.D + d];
                    if (key != want || value != -want)
                        fail_msg("contiguous [l %d][h %d][t %d][d %d]: expected %g and %g, got %g and %g", l, hh, t,
                                 d, want, -want, key, value);
                }
    unmake(&h);

    KvShape p = {.L = 2, .B = 2, .T = 6, .H = 4, .G = 2, .D = 3};
    make(&h, PREALLOC, p);
    int GD = p.G * p.D;
    float pk[2 * 5 * 6], pv[2 * 5 * 6];
    for (int l = 0; l < p.L; l++) {
        // k of batch row b, position i, head g, dim d: 10000 b + 1000 l + 100 i + 10 g + d
        for (int b = 0; b < p.B; b++)
            for (int i = 0; i < n; i++)
                for (int c = 0; c < GD; c++) {
                    int e = (b * n + i) * GD + c;
                    pk[e] = (float)(10000 * b + 1000 * l + 100 * i + 10 * (c / p.D) + c % p.D), pv[e] = -pk[e];
                }
        kvcache_append(h.c, l, pk, pv, p.B, n, 0);
    }
    for (int l = 0; l < p.L; l++)
        for (int b = 0; b < p.B; b++)
            for (int t = 0; t < n; t++)
                for (int g = 0; g < p.G; g++)
                    for (int d = 0; d < p.D; d++) {
                        float want = (float)(10000 * b + 1000 * l + 100 * t + 10 * g + d);
                        size_t e = ((((size_t)l * p.B + b) * p.T + t) * p.G + g) * p.D + d;
                        if (h.pre.cache_k[e] != want || h.pre.cache_v[e] != -want)
                            fail_msg("preallocated [l %d][b %d][t %d][g %d][d %d]: expected %g and %g, got %g and %g",
                                     l, b, t, g, d, want, -want, h.pre.cache_k[e], h.pre.cache_v[e]);
                    }
    unmake(&h);
}

// The bytes a cache reports are its key and value arrays side by side,
// 2 L B T G D floats of 4 bytes, and all of them are its own to write (the
// sanitizer build checks the writes). The paged cache reports the blocks
// its sequence holds: none at first, then whole blocks of keys and values.
static void test_bytes_are_allocated(void **state) {
    (void)state;
    for (int kind = CONTIG; kind <= PREALLOC; kind++) {
        KvShape shapes[4];
        int count = shapes_of(shapes, (Kind)kind);
        for (int si = 0; si < count; si++) {
            KvShape s = shapes[si];
            Holder h;
            make(&h, (Kind)kind, s);
            size_t floats = (size_t)s.L * s.B * s.T * s.G * s.D;
            size_t line = 16;   // each array starts on its own 64-byte line
            size_t want = 2 * ((floats + line - 1) / line * line) * sizeof(float);
            if (kvcache_bytes(h.c) != want)
                fail_msg("%s cache, shape %d: expected %zu bytes (2 x %zu floats, each array on whole 64-byte "
                         "lines), got %zu",
                         KIND_NAMES[kind], si, want, floats, kvcache_bytes(h.c));
            float *first = kind == CONTIG ? h.contig.key : h.pre.cache_k;
            float *second = kind == CONTIG ? h.contig.value : h.pre.cache_v;
            assert_true((size_t)(second - first) * sizeof(float) * 2 == want);
            memset(first, 0x7f, kvcache_bytes(h.c));
            unmake(&h);
        }
    }
    KvShape shapes[4];
    int count = shapes_of(shapes, PAGED);
    for (int si = 0; si < count; si++) {
        KvShape s = shapes[si];
        Holder h;
        make(&h, PAGED, s);
        assert_int_equal(kvcache_bytes(h.c), 0);
        for (int n = 1; n <= s.T; n++) {
            append_rows(&h, 1, 1, (uint64_t)n);
            size_t blocks = (size_t)(n + BLOCK - 1) / BLOCK;
            size_t want = blocks * BLOCK * 2 * s.L * s.H * s.D * sizeof(float);
            if (kvcache_bytes(h.c) != want)
                fail_msg("paged cache, shape %d, %d positions: expected %zu bytes (%zu blocks of %d), got %zu", si,
                         n, want, blocks, BLOCK, kvcache_bytes(h.c));
        }
        unmake(&h);
    }
    // the char GPT's seed shape: 2 · L · T · C · 4 = 4,718,592 bytes (lesson 5's reservation)
    Holder h;
    make(&h, CONTIG, (KvShape){.L = 6, .B = 1, .T = 256, .H = 6, .G = 6, .D = 64});
    assert_int_equal(kvcache_bytes(h.c), 2 * 6 * 256 * 384 * 4);
    unmake(&h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attend_matches_plain_loops),
        cmocka_unit_test(test_truncate_equals_rebuilt),
        cmocka_unit_test(test_reset_equals_new),
        cmocka_unit_test(test_paged_equals_contiguous),
        cmocka_unit_test(test_layout_formulas),
        cmocka_unit_test(test_bytes_are_allocated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
