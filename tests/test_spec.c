// test_spec — speculative decoding (src/model/spec.h) on small random char GPTs:
// the target's verifying pass, the rollback of both caches, and the texts
// and distributions it must give. The references are the target alone:
// its own greedy text (gpt_generate), a cache rebuilt from scratch, and the
// exact probability of every continuation, a product of its softmaxes.
//
//   test_rows_equal_steps           a pass of K+1 rows on a cache = K+1 cached
//                                   steps of one row: every row's residual, bit for bit
//   test_greedy_equals_target       K = 1..8, prompts of 1, 5 and 12 tokens, text past
//                                   the context: speculative text == gpt_generate's
//                                   greedy text, contiguous and paged, three drafts
//                                   (the target itself, a perturbed copy, another model)
//   test_rollback_equals_rebuilt    after the rounds, the target's cache = one rebuilt
//                                   from the text: every key and value, bit for bit
//   test_every_round_equals_rebuilt after every round, the target's and the draft's cache
//                                   = one rebuilt from the kept text, bit for bit, K = 1..8,
//                                   contiguous and paged (read through the block table)
//   test_paged_rollback_blocks      rejected rows give their blocks back to the free
//                                   list; a prompt's shared blocks are never written
//   test_sampling_is_exact          V = 3: every branch of the rejection rule walked
//                                   with its probability; the distribution of the first
//                                   3 tokens = the target's, within 1e-5, K = 1, 2, 3
//   test_check_rejects_mismatch     another vocabulary, a shorter context, gamma 0 / 17
//   test_generate_draft             kvdemo generate --draft: the target's greedy text, the
//                                   shipped models; bad options and files, one line each
#include "testutil.h"

#include "gpt.h"
#include "gptpaged.h"
#include "kvpage.h"
#include "spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ----------------------------------------------------------------------------
// Models

// A random model of this shape, its logits peaked enough that greedy texts
// vary: every tensor drawn from numpy's normal, scaled per kind.
static void random_model(GptModel *m, GptConfig cfg, uint32_t seed) {
    uint32_t vocab[256];
    assert_true(cfg.V <= 256);
    for (int i = 0; i < cfg.V; i++) vocab[i] = (uint32_t)(32 + i);
    char err[256];
    if (gpt_new(m, cfg, vocab, ERR(LANG_EN, err)) != 0) fail_msg("gpt_new: %s", err);
    Mt19937 rng;
    mt19937_seed(&rng, seed);
    for (int i = 0; i < gpt_num_tensors(cfg); i++) {
        GptTensor t = gpt_tensor(m, i);
        for (size_t j = 0; j < t.numel; j++) {
            double g = mt19937_gauss(&rng);
            if (t.kind == GPT_WEIGHT) t.data[j] = (float)(i < 2 ? g : g / sqrt((double)t.rows));
            else if (t.kind == GPT_NORM_WEIGHT) t.data[j] = (float)(1.0 + 0.1 * g);
            else t.data[j] = (float)(0.1 * g);
        }
    }
}

// The target's weights, each moved by a relative eps: a draft that agrees
// with it often, not always.
static void perturbed_copy(GptModel *m, const GptModel *target, double eps, uint32_t seed) {
    char err[256];
    if (gpt_new(m, target->cfg, target->vocab, ERR(LANG_EN, err)) != 0) fail_msg("gpt_new: %s", err);
    Mt19937 rng;
    mt19937_seed(&rng, seed);
    for (size_t i = 0; i < m->num_params; i++)
        m->params[i] = (float)(target->params[i] * (1.0 + eps * mt19937_gauss(&rng)));
}

static const GptConfig TARGET = {.V = 20, .T = 24, .C = 32, .H = 4, .L = 2};
static const GptConfig SMALL = {.V = 20, .T = 24, .C = 16, .H = 2, .L = 1};

static void state(GptState *s, GptConfig cfg) {
    assert_int_equal(gpt_state_init(s, cfg), 0);
}

// ----------------------------------------------------------------------------
// The verifying pass

static void test_rows_equal_steps(void **st) {
    (void)st;
    GptModel m;
    random_model(&m, TARGET, 3);
    int C = TARGET.C, tokens[24];
    for (int i = 0; i < 24; i++) tokens[i] = (i * 7 + 3) % TARGET.V;
    for (int packed = 0; packed <= 1; packed++) {
        if (packed) assert_int_equal(gpt_pack(&m), 0);
        for (int prompt = 1; prompt <= 9; prompt += 4) {
            for (int K = 1; K <= 8; K++) {
                GptState many, one;
                state(&many, TARGET);
                state(&one, TARGET);
                gpt_forward(&many, &m, tokens, prompt, 0);
                gpt_forward(&many, &m, tokens + prompt, K + 1, prompt);   // the verifying pass
                gpt_forward(&one, &m, tokens, prompt, 0);
                for (int j = 0; j <= K; j++) {
                    gpt_forward(&one, &m, tokens + prompt + j, 1, prompt + j);   // a cached step
                    char what[160];
                    snprintf(what, sizeof what, "%s, prompt %d, K %d: row %d of the pass against step %d (dim)",
                             packed ? "packed" : "unpacked", prompt, K, j, j);
                    assert_bits(many.x + (size_t)j * C, one.x, C, what);
                }
                gpt_state_free(&many);
                gpt_state_free(&one);
            }
        }
    }
    gpt_free(&m);
}

// ----------------------------------------------------------------------------
// Greedy: the target's own text

// Target and draft, on their contiguous caches or each on a paged sequence
// of one pool (blocks of 4, the free list shuffled).
enum { BLOCK = 4, POOL_BLOCKS = 24 };
typedef struct {
    GptState ts, ds;
    KvPool pool;
    KvSeq tseq, dseq;
    Sampler sampler;
    SpecMt mt;
    Spec sp;
} Pair;

static void pair_init(Pair *r, const GptModel *t, const GptModel *d, int K, int paged, float temperature, int top_k,
                     SpecRandom *rnd) {
    memset(r, 0, sizeof *r);
    state(&r->ts, t->cfg);
    state(&r->ds, d->cfg);
    assert_int_equal(sampler_init(&r->sampler, t->cfg.V, temperature, top_k, 42), 0);
    spec_mt_init(&r->mt, &r->sampler);
    SpecModel tm = {t, &r->ts, NULL}, dm = {d, &r->ds, NULL};
    if (paged) {
        assert_int_equal(kvpool_init(&r->pool, t->cfg.L, t->cfg.H, t->cfg.C / t->cfg.H, BLOCK, POOL_BLOCKS), 0);
        kvpool_shuffle(&r->pool, 9);
        assert_int_equal(kvseq_init(&r->tseq, &r->pool, t->cfg.T), 0);
        tm.seq = &r->tseq;
        // the draft's blocks have its own shape: a pool of its own would
        // be needed; the draft stays contiguous unless it is the target's shape
        if (d->cfg.C == t->cfg.C && d->cfg.H == t->cfg.H && d->cfg.L == t->cfg.L) {
            assert_int_equal(kvseq_init(&r->dseq, &r->pool, d->cfg.T), 0);
            dm.seq = &r->dseq;
        }
    }
    assert_int_equal(spec_init(&r->sp, tm, dm, K, &r->sampler, rnd ? rnd : &r->mt.base), 0);
}

static void pair_free(Pair *r) {
    spec_free(&r->sp);
    if (r->pool.ref) {
        kvseq_free(&r->tseq);
        if (r->dseq.pool) kvseq_free(&r->dseq);
        kvpool_free(&r->pool);
    }
    sampler_free(&r->sampler);
    gpt_state_free(&r->ts);
    gpt_state_free(&r->ds);
}

// tokens (n_prompt + steps): the target alone, greedy, with its cache.
static void target_greedy(int *tokens, const GptModel *m, int n_prompt, int steps) {
    GptState s;
    Sampler greedy;
    state(&s, m->cfg);
    assert_int_equal(sampler_init(&greedy, m->cfg.V, 0.0f, 0, 42), 0);
    assert_int_equal(gpt_generate(tokens, &s, m, &greedy, n_prompt, steps, 1, NULL, NULL), n_prompt + steps);
    sampler_free(&greedy);
    gpt_state_free(&s);
}

static void prompt_of(int *tokens, int n, int V) {
    for (int i = 0; i < n; i++) tokens[i] = (i * 5 + 2) % V;
}

static void expect_same_tokens(const int *got, const int *want, int n, const char *what) {
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) fail_msg("%s: token %d: target %d, speculative %d", what, i, want[i], got[i]);
}

static void test_greedy_equals_target(void **st) {
    (void)st;
    GptModel target, drafts[3];
    random_model(&target, TARGET, 3);
    drafts[0] = target;   // the target itself: every token accepted
    perturbed_copy(&drafts[1], &target, 0.3, 5);
    random_model(&drafts[2], SMALL, 7);
    const char *names[3] = {"the target as draft", "a perturbed copy", "another model"};
    const int prompts[3] = {1, 5, 12}, steps = 18;   // 12 + 18 = 30 > T = 24
    int want[64], got[64];
    int some_rejected = 0;
    for (int pi = 0; pi < 3; pi++) {
        int n = prompts[pi];
        prompt_of(want, n, TARGET.V);
        target_greedy(want, &target, n, steps);
        for (int di = 0; di < 3; di++) {
            for (int paged = 0; paged <= 1; paged++) {
                for (int K = 1; K <= 8; K++) {
                    Pair r;
                    pair_init(&r, &target, &drafts[di], K, paged, 0.0f, 0, NULL);
                    prompt_of(got, n, TARGET.V);
                    assert_int_equal(spec_generate(got, &r.sp, n, steps, NULL, NULL), n + steps);
                    char what[160];
                    snprintf(what, sizeof what, "%s, %s cache, prompt %d, K %d", names[di],
                             paged ? "paged" : "contiguous", n, K);
                    expect_same_tokens(got, want, n + steps, what);
                    const SpecStats *s = &r.sp.stats;
                    assert_int_equal(s->tokens + s->plain_steps, steps);
                    assert_int_equal(s->tokens, s->accepted + s->rounds);
                    if (di == 0 && s->rejected != 0) fail_msg("%s: %d rejections of the target's own tokens", what, s->rejected);
                    some_rejected += di > 0 && s->rejected > 0;
                    pair_free(&r);
                }
            }
        }
    }
    assert_true(some_rejected > 0);   // the other drafts were rolled back
    gpt_free(&drafts[1]);
    gpt_free(&drafts[2]);
    gpt_free(&target);
}

// ----------------------------------------------------------------------------
// Rollback against a cache rebuilt from scratch

static void test_rollback_equals_rebuilt(void **st) {
    (void)st;
    GptModel target, draft;
    random_model(&target, TARGET, 3);
    perturbed_copy(&draft, &target, 0.3, 5);
    int T = TARGET.T, H = TARGET.H, D = TARGET.C / TARGET.H, L = TARGET.L, tokens[64];
    for (int K = 1; K <= 8; K++) {
        Pair r;
        pair_init(&r, &target, &draft, K, 0, 0.0f, 0, NULL);
        prompt_of(tokens, 3, TARGET.V);
        int len = spec_generate(tokens, &r.sp, 3, 15, NULL, NULL);   // 18 <= T: rounds only
        assert_int_equal(len, 18);
        assert_true(r.sp.stats.rejected > 0);
        assert_int_equal(r.ts.len, len - 1);
        GptState fresh;
        state(&fresh, TARGET);
        gpt_forward(&fresh, &target, tokens, len - 1, 0);
        // every key and value held: [l][h][d][t] and [l][h][t][d] (kvcache.h)
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < len - 1; t++)
                    for (int d = 0; d < D; d++) {
                        size_t ki = (((size_t)l * H + h) * D + d) * T + t, vi = (((size_t)l * H + h) * T + t) * D + d;
                        char what[160];
                        snprintf(what, sizeof what, "K %d: key and value of layer %d, head %d, position %d, dim %d", K,
                                 l, h, t, d);
                        assert_bits(&r.ts.cache.key[ki], &fresh.cache.key[ki], 1, what);
                        assert_bits(&r.ts.cache.value[vi], &fresh.cache.value[vi], 1, what);
                    }
        // and the next step reads them as the rebuilt cache does
        gpt_forward(&r.ts, &target, tokens + len - 1, 1, len - 1);
        gpt_forward(&fresh, &target, tokens + len - 1, 1, len - 1);
        assert_bits(r.ts.logits, fresh.logits, TARGET.V, "logits of the step after the rounds");
        gpt_state_free(&fresh);
        pair_free(&r);
    }
    gpt_free(&draft);
    gpt_free(&target);
}

// After every round, both caches against one rebuilt from the kept text,
// on the contiguous cache and on the paged one (read through the block
// table): the rows a rollback keeps, and nothing of what it cut.
typedef struct {
    Pair *r;
    const GptModel *t, *d;
    const int *tokens;
    int paged, K, cut;   // cut: rounds whose rollback cut rows
} RebuildCheck;

// The key and value of (layer l, head h, position t, dim i) in s's
// contiguous cache, or in seq's blocks when seq is not NULL (kvpage.h).
static void cached_kv(float kv[2], const GptState *s, const KvSeq *seq, GptConfig c, int l, int h, int t, int i) {
    int H = c.H, D = c.C / c.H;
    if (!seq) {
        kv[0] = s->cache.key[(((size_t)l * H + h) * D + i) * c.T + t];
        kv[1] = s->cache.value[(((size_t)l * H + h) * c.T + t) * D + i];
        return;
    }
    const KvPool *p = seq->pool;
    size_t b = (size_t)seq->table[t / p->B], j = (size_t)(t % p->B);
    kv[0] = p->keys[(((b * p->L + l) * p->H + h) * p->D + i) * p->B + j];
    kv[1] = p->values[(((b * p->L + l) * p->H + h) * p->B + j) * p->D + i];
}

static void expect_rebuilt(const RebuildCheck *c, const GptModel *m, const GptState *s, const KvSeq *seq, int len,
                           const char *who, int round) {
    GptConfig cfg = m->cfg;
    assert_int_equal(seq ? seq->len : s->len, len);
    if (seq) assert_int_equal(seq->num_blocks, (len + BLOCK - 1) / BLOCK);
    GptState fresh;
    state(&fresh, cfg);
    if (len > 0) gpt_forward(&fresh, m, c->tokens, len, 0);
    for (int l = 0; l < cfg.L; l++)
        for (int h = 0; h < cfg.H; h++)
            for (int t = 0; t < len; t++)
                for (int i = 0; i < cfg.C / cfg.H; i++) {
                    float got[2], want[2];
                    cached_kv(got, s, seq, cfg, l, h, t, i);
                    cached_kv(want, &fresh, NULL, cfg, l, h, t, i);
                    if (memcmp(got, want, sizeof got) != 0)
                        fail_msg("%s cache, K %d, round %d, %s: layer %d head %d position %d dim %d: key %.9g / "
                                 "value %.9g, rebuilt %.9g / %.9g", c->paged ? "paged" : "contiguous", c->K, round,
                                 who, l, h, t, i, got[0], got[1], want[0], want[1]);
                }
    gpt_state_free(&fresh);
}

static int check_round(void *ctx, const SpecRound *info) {
    RebuildCheck *c = ctx;
    assert_int_equal(info->target_after, info->len + info->accepted);
    assert_true(info->draft_after <= info->target_after);
    expect_rebuilt(c, c->t, &c->r->ts, c->paged ? &c->r->tseq : NULL, info->target_after, "target", info->round);
    expect_rebuilt(c, c->d, &c->r->ds, c->paged ? &c->r->dseq : NULL, info->draft_after, "draft", info->round);
    c->cut += info->accepted < info->gamma;
    return 0;
}

static void test_every_round_equals_rebuilt(void **st) {
    (void)st;
    GptModel target, draft;
    random_model(&target, TARGET, 3);
    perturbed_copy(&draft, &target, 0.3, 5);   // the target's shape: its own paged sequence too
    int tokens[64];
    for (int paged = 0; paged <= 1; paged++)
        for (int K = 1; K <= 8; K++) {
            Pair r;
            pair_init(&r, &target, &draft, K, paged, 0.0f, 0, NULL);
            RebuildCheck c = {&r, &target, &draft, tokens, paged, K, 0};
            prompt_of(tokens, 3, TARGET.V);
            assert_int_equal(spec_generate(tokens, &r.sp, 3, 15, check_round, &c), 18);   // 18 <= T: rounds only
            if (c.cut == 0) fail_msg("%s cache, K %d: no round cut rows", paged ? "paged" : "contiguous", K);
            pair_free(&r);
        }
    gpt_free(&draft);
    gpt_free(&target);
}

// ----------------------------------------------------------------------------
// The paged cache: blocks given back, shared blocks never written

typedef struct {
    Pair *r;
    const KvSeq *parent;
    int checked;
} BlockCheck;

// After each round: the target's sequence holds what the round kept, in
// just the blocks it needs, and every other block of the pool is free.
static int check_blocks(void *ctx, const SpecRound *info) {
    BlockCheck *c = ctx;
    KvPool *p = &c->r->pool;
    const KvSeq *seqs[3] = {c->parent, &c->r->tseq, &c->r->dseq};
    assert_int_equal(c->r->tseq.len, info->target_after);
    assert_int_equal(c->r->tseq.num_blocks, (info->target_after + BLOCK - 1) / BLOCK);
    char held[POOL_BLOCKS] = {0};
    int used = 0;
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < seqs[i]->num_blocks; b++)
            if (!held[seqs[i]->table[b]]++) used++;
    if (kvpool_num_free(p) != POOL_BLOCKS - used)
        fail_msg("round %d: %d blocks free, expected %d (the pool less the %d the sequences hold)", info->round,
                 kvpool_num_free(p), POOL_BLOCKS - used, used);
    c->checked++;
    return 0;
}

static void test_paged_rollback_blocks(void **st) {
    (void)st;
    GptModel target, draft;
    random_model(&target, TARGET, 3);
    perturbed_copy(&draft, &target, 0.3, 5);
    int tokens[64], want[64], n = 10, steps = 12;
    prompt_of(want, n, TARGET.V);
    target_greedy(want, &target, n, steps);
    for (int K = 1; K <= 8; K++) {
        Pair r;
        pair_init(&r, &target, &draft, K, 1, 0.0f, 0, NULL);
        // A parent sequence computes the prompt; the target's forks it and
        // keeps all but the last position, inside a shared block (10 = 2 * 4 + 2).
        KvSeq parent;
        assert_int_equal(kvseq_init(&parent, &r.pool, TARGET.T), 0);
        prompt_of(tokens, n, TARGET.V);
        assert_non_null(gpt_forward_paged(&r.ts, &target, &parent, tokens, n, 0, NULL));
        kvseq_fork(&r.tseq, &parent);
        spec_rollback(&r.sp.target, n - 1);
        size_t tile = (size_t)TARGET.L * TARGET.C * BLOCK, nb = (size_t)parent.num_blocks;
        float *before = malloc(sizeof(float) * 2 * tile * nb);
        assert_non_null(before);
        for (size_t b = 0; b < nb; b++) {
            memcpy(before + 2 * b * tile, r.pool.keys + (size_t)parent.table[b] * tile, sizeof(float) * tile);
            memcpy(before + (2 * b + 1) * tile, r.pool.values + (size_t)parent.table[b] * tile, sizeof(float) * tile);
        }
        BlockCheck check = {&r, &parent, 0};
        assert_int_equal(spec_generate(tokens, &r.sp, n, steps, check_blocks, &check), n + steps);
        assert_true(check.checked > 0);
        char what[160];
        snprintf(what, sizeof what, "K %d: greedy on a forked paged sequence", K);
        expect_same_tokens(tokens, want, n + steps, what);
        for (size_t b = 0; b < nb; b++) {
            snprintf(what, sizeof what, "K %d: the prompt's shared block %zu (layer, head, slot)", K, b);
            assert_bits(r.pool.keys + (size_t)parent.table[b] * tile, before + 2 * b * tile, (int64_t)tile, what);
            assert_bits(r.pool.values + (size_t)parent.table[b] * tile, before + (2 * b + 1) * tile, (int64_t)tile,
                        what);
        }
        free(before);
        kvseq_free(&parent);
        pair_free(&r);
    }
    gpt_free(&draft);
    gpt_free(&target);
}

// ----------------------------------------------------------------------------
// Sampling: every branch of the rejection rule, with its probability

// A SpecRandom that, instead of drawing, takes the decisions of one path
// through the tree of every decision and multiplies their probabilities.
// Running it again after walk_next takes the next path, depth first.
enum { WALK_MAX = 64 };
typedef struct {
    SpecRandom base;
    int choice[WALK_MAX], options[WALK_MAX];
    int fixed;     // decisions replayed from the last path
    int depth;     // decisions taken in this run
    double prob;   // the probability of this run's path
} Walk;

static int walk_take(Walk *w, int options) {
    assert_true(w->depth < WALK_MAX);
    int i = w->depth++;
    if (i >= w->fixed) w->choice[i] = 0;
    w->options[i] = options;
    return w->choice[i];
}

static int walk_choose(SpecRandom *r, const float *weights, int V) {
    Walk *w = (Walk *)r;
    int x = walk_take(w, V);
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += weights[i];
    w->prob *= weights[x] / sum;
    return x;
}

static int walk_accept(SpecRandom *r, double prob) {
    Walk *w = (Walk *)r;
    int reject = walk_take(w, 2);
    w->prob *= reject ? 1.0 - prob : prob;
    return !reject;
}

// The next path: the last decision with an option left takes it, later
// ones start again from their first. Returns 0 when every path was walked.
static int walk_next(Walk *w) {
    for (int i = w->depth - 1; i >= 0; i--) {
        if (w->choice[i] + 1 < w->options[i]) {
            w->choice[i]++;
            w->fixed = i + 1;
            w->depth = 0;
            w->prob = 1.0;
            return 1;
        }
    }
    return 0;
}

// want (V^3): the target's probability of each 3 tokens after the prompt,
// p(a | prompt) p(b | prompt a) p(c | prompt a b), each a full pass.
static void target_exact(double *want, const GptModel *m, const int *prompt, int n, float temperature, int top_k) {
    int V = m->cfg.V, tokens[16];
    GptState s;
    state(&s, m->cfg);
    float *p = malloc(sizeof(float) * (size_t)V * 2);
    assert_non_null(p);
    memcpy(tokens, prompt, sizeof(int) * (size_t)n);
    for (int o = 0; o < V * V * V; o++) {
        double prob = 1.0;
        int x[3] = {o / (V * V), o / V % V, o % V};
        for (int i = 0; i < 3; i++) {
            const float *logits = gpt_forward(&s, m, tokens, n + i, 0);
            sampler_softmax(p, p + V, logits, temperature, top_k, V);
            prob *= p[x[i]];
            tokens[n + i] = x[i];
        }
        want[o] = prob;
    }
    free(p);
    gpt_state_free(&s);
}

static void test_sampling_is_exact(void **st) {
    (void)st;
    const GptConfig tiny = {.V = 3, .T = 8, .C = 8, .H = 2, .L = 1};
    GptModel target, draft;
    random_model(&target, tiny, 11);
    random_model(&draft, tiny, 12);
    const int prompt[2] = {0, 2};
    const float temps[2] = {1.0f, 0.7f};
    const int top_ks[2] = {0, 2};
    double want[27], got[27];
    for (int ti = 0; ti < 2; ti++) {
        target_exact(want, &target, prompt, 2, temps[ti], top_ks[ti]);
        for (int K = 1; K <= 3; K++) {
            Walk w = {.base = {walk_choose, walk_accept}, .prob = 1.0};
            Pair r;
            pair_init(&r, &target, &draft, K, 0, temps[ti], top_ks[ti], &w.base);
            memset(got, 0, sizeof got);
            int paths = 0, tokens[16];
            do {
                gpt_state_reset(&r.ts);
                gpt_state_reset(&r.ds);
                memcpy(tokens, prompt, sizeof prompt);
                assert_int_equal(spec_generate(tokens, &r.sp, 2, 3, NULL, NULL), 5);
                got[(tokens[2] * 3 + tokens[3]) * 3 + tokens[4]] += w.prob;
                paths++;
            } while (walk_next(&w));
            double total = 0.0;
            for (int o = 0; o < 27; o++) total += got[o];
            if (fabs(total - 1.0) > 1e-9) fail_msg("K %d: the %d paths' probabilities sum to %.12f", K, paths, total);
            for (int o = 0; o < 27; o++)
                if (fabs(got[o] - want[o]) > 1e-5)
                    fail_msg("temperature %.1f, top-k %d, K %d: tokens %d %d %d: target %.8f, speculative %.8f",
                             temps[ti], top_ks[ti], K, o / 9, o / 3 % 3, o % 3, want[o], got[o]);
            pair_free(&r);
        }
    }
    gpt_free(&draft);
    gpt_free(&target);
}

// ----------------------------------------------------------------------------
// What spec_check refuses

static void test_check_rejects_mismatch(void **st) {
    (void)st;
    GptModel target, other_vocab, short_ctx;
    random_model(&target, TARGET, 3);
    GptConfig v = SMALL, t = SMALL;
    v.V = 21;
    t.T = 16;
    random_model(&other_vocab, v, 4);
    random_model(&short_ctx, t, 4);
    char err[256];
    assert_int_equal(spec_check(&target, &target, 4, ERR(LANG_EN, err)), 0);
    assert_int_equal(spec_check(&target, &other_vocab, 4, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "vocabulary (21 characters) is not the target's (20)"));
    assert_int_equal(spec_check(&target, &short_ctx, 4, ERR(LANG_ZH, err)), -1);
    assert_non_null(strstr(err, "上下文 16 短于目标模型的 24"));
    assert_int_equal(spec_check(&target, &target, 0, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "--gamma 0 is out of range: 1 to 16"));
    assert_int_equal(spec_check(&target, &target, 17, ERR(LANG_EN, err)), -1);
    gpt_free(&short_ctx);
    gpt_free(&other_vocab);
    gpt_free(&target);
}

// ----------------------------------------------------------------------------
// kvdemo generate --draft

// The "text" event of a JSON run, from its name to the end of its line.
static char *text_event(const char *args) {
    RunResult r = kvdemo_run(args);
    if (r.status) fail_msg("kvdemo %s: exit status %d: %s", args, r.status, r.err);
    const char *at = strstr(r.out, "\"name\":\"text\"");
    if (!at) fail_msg("kvdemo %s: no text event in: %.200s", args, r.out);
    char *text = strndup(at, strcspn(at, "\n"));
    run_free(&r);
    return text;
}

static void test_generate_draft(void **st) {
    (void)st;
    // past the context (228 + 32 > 256): rounds (K = 8: 9 of them, 38 drafted
    // tokens rejected), then the chapter's recomputation for the last 3
    // tokens. A long prompt costs one pass: steps from "ROMEO:" would cost
    // one each, and a pass each past the context.
#define SPEC_PROMPT                                                                                          \
    "--prompt 'ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the " \
    "sun. Arise, fair sun, and kill the envious moon, Who is already sick and pale with grief, That thou "   \
    "her maid art far more fair than she.' --temperature 0 --steps 32 --format json"
    char *want = text_event("generate " SPEC_PROMPT);
    for (int K = 1; K <= 8; K += 7) {
        char args[512];
        snprintf(args, sizeof args, "generate --draft data/tinyshakespeare-draft.bin --gamma %d " SPEC_PROMPT "%s", K,
                 K == 8 ? " --paged --block-size 4" : "");
        char *got = text_event(args);
        if (strcmp(got, want)) fail_msg("kvdemo %s:\n  target alone %.120s\n  speculative  %.120s", args, want, got);
        free(got);
    }
    free(want);
    char tiny[] = "/tmp/kvdemo-spec-XXXXXX", args[512];
    int fd = mkstemp(tiny);
    assert_true(fd >= 0);
    close(fd);
    snprintf(args, sizeof args, "init --preset tiny --out %s", tiny);
    RunResult r = kvdemo_run(args);
    assert_int_equal(r.status, 0);
    run_free(&r);
    expect_failure("generate --gamma 3", 2, "--gamma goes with --draft FILE");
    expect_failure("generate --draft data/tinyshakespeare-draft.bin --gamma 0", 2, "--gamma takes a whole number from 1 to 16");
    expect_failure("generate --draft data/tinyshakespeare-draft.bin --no-cache", 2, "--draft needs the KV cache");
    expect_failure("generate --draft data/tinyshakespeare-draft.bin --bug offset", 2, "--draft runs on the plain cache");
    expect_failure("generate --draft /nonexistent/draft.bin", 1, "/nonexistent/draft.bin");
    snprintf(args, sizeof args, "generate --draft %s", tiny);
    expect_failure(args, 1, "the draft's context 32 is shorter than the target's 256");
    snprintf(args, sizeof args, "--lang zh generate --draft %s", tiny);
    expect_failure(args, 1, "草稿模型的上下文 32 短于目标模型的 256");
    expect_failure("--lang zh generate --gamma 2", 2, "--gamma 要和 --draft FILE 一起用");
    unlink(tiny);
}

// generate --draft as text shows each round's tokens as they come: what it
// wrote before its figures is the text of the same run as JSON; a paged
// pool too small for the rounds is said, exit 1. (Two random tiny models
// of the default vocabulary, T 32.)
static void test_generate_draft_text(void **st) {
    (void)st;
    char target[] = "/tmp/kvdemo-spec-t-XXXXXX", draft[] = "/tmp/kvdemo-spec-d-XXXXXX", args[512];
    char *paths[2] = {target, draft};
    for (int i = 0; i < 2; i++) {
        int fd = mkstemp(paths[i]);
        assert_true(fd >= 0);
        close(fd);
        snprintf(args, sizeof args, "init --preset tiny --seed %d --out %s", 7 + i, paths[i]);
        RunResult r = kvdemo_run(args);
        if (r.status != 0) fail_msg("kvdemo %s: %s", args, r.err);
        run_free(&r);
    }
    snprintf(args, sizeof args, "generate --model %s --draft %s --prompt ROMEO: --temperature 0 --steps 20 --format json",
             target, draft);
    int n;
    Event *e = kvdemo_json(args, &n);
    const Event *text = events_find(e, n, "text", "speculative", -1, "text");
    if (!text) fail_msg("kvdemo %s: no text event", args);
    char want[512];
    if (snprintf(want, sizeof want, "%.400s\n\n-- 20 tokens in ", text->text) >= (int)sizeof want) fail_msg("a long text");
    events_free(e, n);
    snprintf(args, sizeof args, "generate --model %s --draft %s --prompt ROMEO: --temperature 0 --steps 20", target,
             draft);
    RunResult r = kvdemo_run(args);
    if (r.status != 0 || strncmp(r.out, want, strlen(want)) != 0)
        fail_msg("kvdemo %s: expected exit 0 and \"%s...\", got %d: \"%s\"%s", args, want, r.status, r.out, r.err);
    run_free(&r);
    snprintf(args, sizeof args, "generate --model %s --draft %s --prompt ROMEO: --paged --block-size 2 --num-blocks 2",
             target, draft);
    expect_failure(args, 1, "the paged pool ran out of blocks: give --num-blocks more, or leave it out");
    unlink(target);
    unlink(draft);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_equal_steps),
        cmocka_unit_test(test_greedy_equals_target),
        cmocka_unit_test(test_rollback_equals_rebuilt),
        cmocka_unit_test(test_every_round_equals_rebuilt),
        cmocka_unit_test(test_paged_rollback_blocks),
        cmocka_unit_test(test_sampling_is_exact),
        cmocka_unit_test(test_check_rejects_mismatch),
        cmocka_unit_test(test_generate_draft),
        cmocka_unit_test(test_generate_draft_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
