// test_kvpage — the paged KV cache (src/cache/kvpage.c, src/model/gptpaged.c, src/cache/kvsim.c).
//
//   test_vecmat_acc_continues_the_sum    a product split in pieces = one product, bit for bit
//   test_paged_logits_bit_identical      paged = contiguous logits at every step, several
//                                        shapes, B = 1, 3, 16, 256, past the context
//   test_fork_append_free_refcounts      a scripted fork / append / copy-on-write / free,
//                                        the parent freed first
//   test_scripted_ops_keep_counts        random operations: every count equals the number
//                                        of tables holding the block; nothing leaked at the end
//   test_prefix_hash_chain               hits only on full, identical blocks with identical parents
//   test_pool_exhaustion_is_clean        -1, how many blocks were needed, nothing changed
//   test_samples_equal_contiguous_runs   N paged samples = N runs of gpt_generate with seeds s + i
//   test_kvsim_against_hand_counts       utilisation and peaks computed here by hand
//
// The expected logits are those of the contiguous cache (gpt_forward), which
// test_gpt checks against numpy; the paged cache must reproduce them exactly.
#include "testutil.h"

#include "gpt.h"
#include "gptpaged.h"
#include "kvpage.h"
#include "kvsim.h"
#include "ops.h"
#include "sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// Helpers

// A random model of this shape with weights large enough to give peaked
// logits (every tensor drawn from numpy's normal, scaled per kind).
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

// logits (len, V): row k after feeding token k as generation does (position
// k while k < T, else the last T tokens again from position 0). seq NULL:
// the contiguous cache. The first `prefill` tokens go in as one pass.
static void feed(float *logits, GptState *s, const GptModel *m, KvSeq *seq, const int *tokens, int len, int prefill) {
    int T = m->cfg.T, V = m->cfg.V;
    gpt_state_reset(s);
    if (seq) kvseq_truncate(seq, 0);
    for (int k = prefill - 1; k < len; k++) {
        int n = k < T ? (k == prefill - 1 ? prefill : 1) : T, offset = k < T ? k + 1 - n : 0;
        const int *x = tokens + k + 1 - n;
        const float *out = seq ? gpt_forward_paged(s, m, seq, x, n, offset, NULL) : gpt_forward(s, m, x, n, offset);
        if (!out) fail_msg("feed: the pool ran out at token %d", k);
        memcpy(logits + (size_t)k * V, out, sizeof(float) * (size_t)V);
    }
}

// Every block's count must equal the number of table entries naming it, and
// the free list must hold exactly the blocks with count 0.
static void check_counts(const KvPool *p, KvSeq *const *seqs, int n, const char *when) {
    for (int b = 0; b < p->num_blocks; b++) {
        int held = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < seqs[i]->num_blocks; j++) held += seqs[i]->table[j] == b;
        if (p->ref[b] != held) fail_msg("%s: block %d: expected ref %d (tables holding it), got %d", when, b, held, p->ref[b]);
    }
    int zero = 0;
    for (int b = 0; b < p->num_blocks; b++) zero += p->ref[b] == 0;
    if (p->num_free != zero) fail_msg("%s: expected %d free blocks, got %d", when, zero, p->num_free);
    for (int i = 0; i < p->num_free; i++)
        if (p->ref[p->free_list[i]] != 0) fail_msg("%s: block %d is on the free list with ref %d", when, p->free_list[i], p->ref[p->free_list[i]]);
}

// ----------------------------------------------------------------------------
// Tests

static void test_vecmat_acc_continues_the_sum(void **state) {
    (void)state;
    enum { K = 37, N = 45 };
    float x[K], m[K * N], whole[N], pieces[N];
    Mt19937 rng;
    mt19937_seed(&rng, 3);
    for (int i = 0; i < K; i++) x[i] = (float)mt19937_gauss(&rng);
    for (int i = 0; i < K * N; i++) m[i] = (float)mt19937_gauss(&rng);
    ops_vecmat(whole, x, m, K, N, N);
    const int cuts[][3] = {{1, 2, 36}, {5, 16, 30}, {17, 18, 19}};
    for (int c = 0; c < 3; c++) {
        ops_vecmat(pieces, x, m, cuts[c][0], N, N);
        int from = cuts[c][0];
        for (int j = 1; j <= 3; j++) {
            int to = j < 3 ? cuts[c][j] : K;
            ops_vecmat_acc(pieces, x + from, m + (size_t)from * N, to - from, N, N);
            from = to;
        }
        assert_bits(pieces, whole, N, "x @ m in pieces");
    }
}

static void test_paged_logits_bit_identical(void **state) {
    (void)state;
    const GptConfig shapes[] = {
        {65, 32, 64, 4, 2},   // the tiny preset's shape
        {40, 20, 24, 3, 3},   // a context no block size below divides evenly
    };
    const int sizes[] = {1, 3, 16, 256};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        GptConfig cfg = shapes[sh];
        GptModel m;
        random_model(&m, cfg, 11 + (uint32_t)sh);
        GptState s;
        assert_int_equal(gpt_state_init(&s, cfg), 0);
        int len = cfg.T + 9;   // past the context: the cache is rebuilt once
        int *tokens = malloc(sizeof(int) * (size_t)len);
        float *want = malloc(sizeof(float) * (size_t)len * cfg.V), *got = malloc(sizeof(float) * (size_t)len * cfg.V);
        assert_non_null(tokens);
        assert_non_null(want);
        assert_non_null(got);
        for (int i = 0; i < len; i++) tokens[i] = (i * 7 + 3) % cfg.V;
        for (int prefill = 1; prefill <= 5; prefill += 4) {
            feed(want, &s, &m, NULL, tokens, len, prefill);
            for (size_t b = 0; b < sizeof sizes / sizeof sizes[0]; b++) {
                KvPool pool;
                KvSeq seq;
                int B = sizes[b];
                assert_int_equal(kvpool_init(&pool, cfg.L, cfg.H, cfg.C / cfg.H, B, (cfg.T + B - 1) / B), 0);
                kvpool_shuffle(&pool, 5);
                assert_int_equal(kvseq_init(&seq, &pool, cfg.T), 0);
                memset(got, 0, sizeof(float) * (size_t)len * cfg.V);
                feed(got, &s, &m, &seq, tokens, len, prefill);
                char what[96];
                snprintf(what, sizeof what, "shape %zu, prefill %d, B = %d: logits (step * V + v)", sh, prefill, B);
                int64_t from = (int64_t)(prefill - 1) * cfg.V;
                assert_bits(got + from, want + from, (int64_t)len * cfg.V - from, what);
                kvseq_free(&seq);
                assert_int_equal(kvpool_num_free(&pool), pool.num_blocks);
                kvpool_free(&pool);
            }
        }
        free(tokens);
        free(want);
        free(got);
        gpt_state_free(&s);
        gpt_free(&m);
    }
}

static void test_fork_append_free_refcounts(void **state) {
    (void)state;
    enum { B = 4, NB = 8 };
    KvPool p;
    KvSeq a, b;
    assert_int_equal(kvpool_init(&p, 1, 1, 2, B, NB), 0);
    assert_int_equal(kvseq_init(&a, &p, 32), 0);
    assert_int_equal(kvseq_init(&b, &p, 32), 0);
    KvSeq *both[] = {&a, &b};
    int toks[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    // a: 6 positions = one full block and one with 2 of 4 slots
    assert_int_equal(kvseq_append(&a, toks, 6, NULL), 0);
    assert_int_equal(a.num_blocks, 2);
    assert_int_equal(p.num_free, NB - 2);
    // keys and values of a's positions 4 and 5: k = 10 * pos + d
    float k[6 * 2], v[6 * 2];
    for (int i = 0; i < 12; i++) k[i] = (float)(10 * (i / 2) + i % 2), v[i] = -k[i];
    kvpage_write(&a, 0, k, v, 6, 0);
    // fork: the same blocks, counts 2, nothing taken from the pool
    kvseq_fork(&b, &a);
    assert_int_equal(b.len, 6);
    assert_int_equal(b.table[0], a.table[0]);
    assert_int_equal(b.table[1], a.table[1]);
    assert_int_equal(p.ref[a.table[0]], 2);
    assert_int_equal(p.ref[a.table[1]], 2);
    assert_int_equal(p.num_free, NB - 2);
    check_counts(&p, both, 2, "after fork");
    // b appends inside the shared last block: copy-on-write
    int shared = a.table[1];
    assert_int_equal(kvseq_append(&b, toks + 6, 1, NULL), 0);
    assert_int_not_equal(b.table[1], shared);
    assert_int_equal(b.table[0], a.table[0]);
    assert_int_equal(p.ref[shared], 1);
    assert_int_equal(p.ref[b.table[1]], 1);
    assert_int_equal(p.ref[a.table[0]], 2);
    assert_int_equal(p.copies, 1);
    assert_int_equal(p.num_free, NB - 3);
    check_counts(&p, both, 2, "after copy-on-write");
    // the copy holds the shared block's keys and values: positions 4 and 5
    for (int pos = 4; pos < 6; pos++)
        for (int d = 0; d < 2; d++) {
            float want = (float)(10 * pos + d);
            float got = kvpool_key(&p, b.table[1], 0, 0)[d * B + pos % B];
            if (got != want) fail_msg("copied key (pos %d, d %d): expected %g, got %g", pos, d, want, got);
            got = kvpool_value(&p, b.table[1], 0, 0)[(pos % B) * 2 + d];
            if (got != -want) fail_msg("copied value (pos %d, d %d): expected %g, got %g", pos, d, -want, got);
        }
    // a appends into its own last block, now held by a alone: no copy
    assert_int_equal(kvseq_append(&a, toks + 6, 1, NULL), 0);
    assert_int_equal(a.table[1], shared);
    assert_int_equal(p.copies, 1);
    // a fills its block and takes a new one
    assert_int_equal(kvseq_append(&a, toks + 7, 2, NULL), 0);
    assert_int_equal(a.num_blocks, 3);
    check_counts(&p, both, 2, "after a grew");
    // the parent freed first: its own blocks return, the shared one stays for b
    int first = a.table[0];
    kvseq_free(&a);
    assert_int_equal(p.ref[first], 1);
    assert_int_equal(p.num_free, NB - 2);
    KvSeq *only_b[] = {&b};
    check_counts(&p, only_b, 1, "after freeing the parent");
    // b still reads its positions: the slot formula on its table
    assert_int_equal(kvseq_slot(&b, 6), b.table[1] * B + 2);
    kvseq_free(&b);
    assert_int_equal(p.num_free, NB);
    for (int i = 0; i < NB; i++) assert_int_equal(p.ref[i], 0);
    kvpool_free(&p);
}

static void test_scripted_ops_keep_counts(void **state) {
    (void)state;
    enum { NSEQ = 5, NB = 40, B = 3, MAXP = 30 };
    KvPool p;
    KvSeq seqs[NSEQ];
    KvSeq *all[NSEQ];
    assert_int_equal(kvpool_init(&p, 1, 1, 1, B, NB), 0);
    for (int i = 0; i < NSEQ; i++) {
        assert_int_equal(kvseq_init(&seqs[i], &p, MAXP), 0);
        all[i] = &seqs[i];
    }
    Mt19937 rng;
    mt19937_seed(&rng, 9);
    int toks[MAXP] = {0};
    for (int op = 0; op < 2000; op++) {
        int i = (int)(mt19937_next(&rng) % NSEQ), j = (int)(mt19937_next(&rng) % NSEQ);
        int what = (int)(mt19937_next(&rng) % 4);
        if (what == 0 && i != j) {
            kvseq_truncate(&seqs[j], 0);
            kvseq_fork(&seqs[j], &seqs[i]);
        } else if (what == 1) {
            int n = 1 + (int)(mt19937_next(&rng) % 5);
            if (seqs[i].len + n <= MAXP) {
                int before = p.num_free, need;
                int rc = kvseq_append(&seqs[i], toks, n, &need);
                if (rc == 0 && before - p.num_free != need)
                    fail_msg("op %d: append took %d blocks, said it needs %d", op, before - p.num_free, need);
                if (rc != 0 && need <= before) fail_msg("op %d: append refused with %d free for a need of %d", op, before, need);
            }
        } else if (what == 2) {
            kvseq_truncate(&seqs[i], (int)(mt19937_next(&rng) % (unsigned)(seqs[i].len + 1)));
        } else {
            kvseq_truncate(&seqs[i], 0);
        }
        char when[32];
        snprintf(when, sizeof when, "op %d", op);
        check_counts(&p, all, NSEQ, when);
    }
    for (int i = 0; i < NSEQ; i++) kvseq_free(&seqs[i]);
    if (p.num_free != NB) fail_msg("after freeing every sequence: expected %d free blocks, got %d", NB, p.num_free);
    kvpool_free(&p);
}

static void test_prefix_hash_chain(void **state) {
    (void)state;
    enum { B = 4, NB = 16 };
    KvPool p;
    KvSeq a, b, c, d;
    assert_int_equal(kvpool_init(&p, 1, 1, 1, B, NB), 0);
    assert_int_equal(kvseq_init(&a, &p, 32), 0);
    assert_int_equal(kvseq_init(&b, &p, 32), 0);
    assert_int_equal(kvseq_init(&c, &p, 32), 0);
    assert_int_equal(kvseq_init(&d, &p, 32), 0);
    int text[10] = {5, 1, 4, 1, 5, 9, 2, 6, 5, 3};
    assert_int_equal(kvseq_append(&a, text, 10, NULL), 0);   // two full blocks, one of 2
    // 10 shared tokens with B = 4: exactly the 2 full blocks are reused
    assert_int_equal(kvseq_share_prefix(&b, text, 10), 8);
    assert_int_equal(b.table[0], a.table[0]);
    assert_int_equal(b.table[1], a.table[1]);
    assert_int_equal(p.ref[a.table[0]], 2);
    assert_int_equal(p.ref[a.table[2]], 1);   // the partial block is never shared by hash
    kvseq_truncate(&b, 0);
    // 8 tokens: the last must be computed, so only the first block
    assert_int_equal(kvseq_share_prefix(&b, text, 8), 4);
    kvseq_truncate(&b, 0);
    // one early token changed: no block reused
    int changed[10];
    memcpy(changed, text, sizeof changed);
    changed[1] = 7;
    assert_int_equal(kvseq_share_prefix(&c, changed, 10), 0);
    // a token of the second block changed: the first still matches
    memcpy(changed, text, sizeof changed);
    changed[5] = 7;
    assert_int_equal(kvseq_share_prefix(&d, changed, 10), 4);
    // the chain: equal tokens under a different parent hash differently
    uint64_t h0 = kvpage_hash(0, text, B), h0x = kvpage_hash(0, (int[]){5, 7, 4, 1}, B);
    assert_true(h0 != h0x);
    assert_true(kvpage_hash(h0, text + 4, B) != kvpage_hash(h0x, text + 4, B));
    assert_true(kvpage_hash(h0, text + 4, B) == kvpage_hash(h0, text + 4, B));
    // a freed block can no longer be found
    kvseq_free(&a);
    kvseq_free(&c);
    kvseq_free(&d);
    assert_int_equal(kvseq_share_prefix(&b, text, 10), 0);
    kvseq_free(&b);
    assert_int_equal(p.num_free, NB);
    kvpool_free(&p);
}

static void test_pool_exhaustion_is_clean(void **state) {
    (void)state;
    KvPool p;
    KvSeq a, b;
    assert_int_equal(kvpool_init(&p, 1, 1, 1, 4, 2), 0);
    assert_int_equal(kvseq_init(&a, &p, 64), 0);
    assert_int_equal(kvseq_init(&b, &p, 64), 0);
    int toks[9] = {0};
    int need = 0;
    assert_int_equal(kvseq_append(&a, toks, 9, &need), -1);
    assert_int_equal(need, 3);
    assert_int_equal(a.len, 0);
    assert_int_equal(p.num_free, 2);
    assert_int_equal(kvseq_append(&a, toks, 6, NULL), 0);
    kvseq_fork(&b, &a);
    // b's copy-on-write needs one free block; none is left
    assert_int_equal(kvseq_append(&a, toks, 3, NULL), -1);
    assert_int_equal(kvseq_append(&b, toks, 1, &need), -1);
    assert_int_equal(need, 1);
    assert_int_equal(b.len, 6);
    // gpt_forward_paged says so with NULL, computing nothing
    GptConfig cfg = {65, 32, 64, 4, 2};
    GptModel m;
    random_model(&m, cfg, 2);
    GptState s;
    assert_int_equal(gpt_state_init(&s, cfg), 0);
    KvPool gp;
    KvSeq gs;
    assert_int_equal(kvpool_init(&gp, cfg.L, cfg.H, cfg.C / cfg.H, 4, 1), 0);
    assert_int_equal(kvseq_init(&gs, &gp, cfg.T), 0);
    int five[5] = {1, 2, 3, 4, 5};
    assert_null(gpt_forward_paged(&s, &m, &gs, five, 5, 0, &need));
    assert_int_equal(need, 2);
    assert_ptr_equal(s.kv, &s.cache.base);   // the contiguous cache again
    kvseq_free(&gs);
    kvpool_free(&gp);
    gpt_state_free(&s);
    gpt_free(&m);
    kvseq_free(&a);
    kvseq_free(&b);
    kvpool_free(&p);
}

static void test_samples_equal_contiguous_runs(void **state) {
    (void)state;
    enum { N = 3, STEPS = 45, B = 3 };
    GptConfig cfg = {65, 32, 64, 4, 2};
    GptModel m;
    random_model(&m, cfg, 4);
    GptState s;
    assert_int_equal(gpt_state_init(&s, cfg), 0);
    int prompt[5] = {10, 20, 30, 40, 50}, n_prompt = 5, stride = n_prompt + STEPS;
    int tokens[N * (5 + STEPS)], want[5 + STEPS];
    KvPool pool;
    KvSeq seqs[N];
    Sampler samplers[N];
    assert_int_equal(kvpool_init(&pool, cfg.L, cfg.H, cfg.C / cfg.H, B, N * ((cfg.T + B - 1) / B)), 0);
    for (int i = 0; i < N; i++) {
        memcpy(tokens + i * stride, prompt, sizeof prompt);
        assert_int_equal(kvseq_init(&seqs[i], &pool, cfg.T), 0);
        assert_int_equal(sampler_init(&samplers[i], cfg.V, 1.0f, 0, 100 + i), 0);
    }
    int fs, fstep, need;
    assert_int_equal(gpt_sample_paged(tokens, stride, &s, &m, seqs, samplers, N, n_prompt, STEPS, &fs, &fstep, &need), 0);
    assert_true(pool.copies >= 1);   // the prompt's last block (2 of 3 slots) was shared
    for (int i = 0; i < N; i++) {
        Sampler one;
        assert_int_equal(sampler_init(&one, cfg.V, 1.0f, 0, 100 + i), 0);
        memcpy(want, prompt, sizeof prompt);
        gpt_state_reset(&s);
        assert_int_equal(gpt_generate(want, &s, &m, &one, n_prompt, STEPS, 1, NULL, NULL), stride);
        for (int t = 0; t < stride; t++)
            if (tokens[i * stride + t] != want[t])
                fail_msg("sample %d, token %d: expected %d (contiguous, seed %d), got %d", i, t, want[t], 100 + i,
                         tokens[i * stride + t]);
        sampler_free(&one);
    }
    for (int i = 0; i < N; i++) {
        kvseq_free(&seqs[i]);
        sampler_free(&samplers[i]);
    }
    assert_int_equal(kvpool_num_free(&pool), pool.num_blocks);
    kvpool_free(&pool);
    gpt_state_free(&s);
    gpt_free(&m);
}

static void test_kvsim_against_hand_counts(void **state) {
    (void)state;
    // Two requests, M = 8, B = 4: (prompt 3, output 2) holds 3, 4, 5 tokens
    // over its 3 steps; (1, 4) holds 1 .. 5 over 5 steps.
    KvRequest reqs[2] = {{3, 2}, {1, 4}};
    KvSimResult r;
    // max: 8 slots each step: (3+4+5 + 1+2+3+4+5) / (8*3 + 8*5) = 27 / 64
    assert_int_equal(kvsim_run(&r, reqs, 2, KVSIM_MAX, 8, 1, 16), 0);
    assert_true(fabs(r.utilisation - 27.0 / 64) < 1e-12);
    assert_true(fabs(r.never_used - (3 * 3.0 + 5 * 3.0) / 64) < 1e-12);
    assert_int_equal(r.peak_running, 2);
    assert_int_equal(r.steps, 5);
    // the same budget of 8 fits one at a time: 3 + 5 steps
    assert_int_equal(kvsim_run(&r, reqs, 2, KVSIM_MAX, 8, 1, 8), 0);
    assert_int_equal(r.peak_running, 1);
    assert_int_equal(r.steps, 8);
    // pow2: 8 and 8 (5 -> 8): as max here; oracle: 5 and 5 -> 27 / 40
    assert_int_equal(kvsim_run(&r, reqs, 2, KVSIM_ORACLE, 8, 1, 16), 0);
    assert_true(fabs(r.utilisation - 27.0 / 40) < 1e-12);
    assert_true(fabs(r.never_used) < 1e-12);
    // paged B = 4: req 1 holds 4, 4, 8 slots; req 2 4, 4, 4, 4, 8 -> 27 / 40
    assert_int_equal(kvsim_run(&r, reqs, 2, KVSIM_PAGED, 8, 4, 16), 0);
    assert_true(fabs(r.utilisation - 27.0 / 40) < 1e-12);
    assert_true(fabs(r.never_used - 13.0 / 40) < 1e-12);
    assert_int_equal(r.preempted, 0);
    // a budget of 8 with B = 4: both start (4 + 4), then both need a block at
    // once: the later one is preempted, and the counts stay those of each
    // request's own tokens
    assert_int_equal(kvsim_run(&r, reqs, 2, KVSIM_PAGED, 8, 4, 8), 0);
    assert_true(r.preempted >= 1);
    assert_true(fabs(r.utilisation - 27.0 / 40) < 1e-12);
    assert_int_equal(kvsim_reserved(KVSIM_POW2, 1, 25, 2048, 1), 32);   // the vLLM paper's 25 -> 32
    assert_int_equal(kvsim_reserved(KVSIM_POW2, 1, 2000, 2048, 1), 2048);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vecmat_acc_continues_the_sum),
        cmocka_unit_test(test_paged_logits_bit_identical),
        cmocka_unit_test(test_fork_append_free_refcounts),
        cmocka_unit_test(test_scripted_ops_keep_counts),
        cmocka_unit_test(test_prefix_hash_chain),
        cmocka_unit_test(test_pool_exhaustion_is_clean),
        cmocka_unit_test(test_samples_equal_contiguous_runs),
        cmocka_unit_test(test_kvsim_against_hand_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
