// test_llama_convert — an MHA model made into GQA and MQA before
// uptraining (src/model/llama_convert.c): mean-pooled and first-head
// conversions against the article's Transformer in PyTorch
// (tests/llama_convert_reference.py wrote tests/fixtures/llama_convert.txt),
// bit for bit, every weight; the random conversion's key/value heads are
// the training's initial draws and its other weights the source's; a G that
// no grouping gives is refused with a message naming the valid ones.
//
// Run from the project's root: make build/tests/test_llama_convert && ./build/tests/test_llama_convert
#include "testutil.h"

#include "llama.h"
#include "llama_convert.h"
#include "train_llama.h"

#include <string.h>

#define FIXTURE "tests/fixtures/llama_convert.txt"

// The reference's shape: V 8, C 8, L 2, H 4, F 16, T 8, G key/value heads.
static LlamaConfig shape(int G) {
    return (LlamaConfig){.vocab_size = 8, .dim = 8, .n_layers = 2, .n_heads = 4, .n_kv_heads = G,
                         .hidden_dim = 16, .max_seq_len = 8, .rope_theta = 10000.0f, .norm_eps = 1e-5f};
}

static void source(LlamaModel *m, const FixSet *fx) {
    char err[256];
    LlamaConfig c = shape(4);
    if (llama_new(m, &c, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    const FixTensor *w = fix_get(fx, "source");
    if ((size_t)w->rows * w->cols != m->num_params)
        fail_msg("%s: source has %lld weights, the model %zu", FIXTURE, (long long)w->rows * w->cols, m->num_params);
    memcpy(m->params, w->data, sizeof(float) * m->num_params);
    for (int i = 3; i < 8; i++) m->vocab[i] = 'a' + (uint32_t)i;
}

static void test_mean_and_first_match_pytorch(void **state) {
    (void)state;
    FixSet fx;
    fix_load(&fx, FIXTURE);
    LlamaModel src;
    source(&src, &fx);
    const int Gs[] = {2, 1};
    const LlamaConvert hows[] = {LLAMA_CONVERT_MEAN, LLAMA_CONVERT_FIRST};
    char err[256], key[32], what[64];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            LlamaModel dst;
            if (llama_convert(&dst, &src, Gs[i], hows[j], 1, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
            snprintf(key, sizeof key, "%s_%d", llama_convert_name(hows[j]), Gs[i]);
            const FixTensor *want = fix_get(&fx, key);
            assert_int_equal(dst.cfg.n_kv_heads, Gs[i]);
            if ((size_t)want->rows * want->cols != dst.num_params)
                fail_msg("%s: expected %lld weights (PyTorch), got %zu", key, (long long)want->rows * want->cols, dst.num_params);
            snprintf(what, sizeof what, "weights converted by %s", key);
            assert_bits(dst.params, want->data, (int64_t)dst.num_params, what);
            assert_memory_equal(dst.vocab, src.vocab, sizeof(uint32_t) * 8);
            llama_free(&dst);
        }
    llama_free(&src);
    fix_free(&fx);
}

// Every weight of a and b but wk, wv equal bit for bit.
static void expect_same_but_kv(const LlamaModel *a, const LlamaModel *b) {
    const LlamaConfig *c = &a->cfg;
    size_t C = (size_t)c->dim, F = (size_t)c->hidden_dim, HD = (size_t)c->n_heads * c->head_dim;
    assert_bits(a->p.tok_embeddings, b->p.tok_embeddings, (int64_t)(c->vocab_size * C), "tok_embeddings");
    for (int l = 0; l < c->n_layers; l++) {
        const LlamaLayerParams *x = &a->p.layers[l], *y = &b->p.layers[l];
        assert_bits(x->attention_norm, y->attention_norm, (int64_t)C, "attention_norm");
        assert_bits(x->wq, y->wq, (int64_t)(C * HD), "wq");
        assert_bits(x->wo, y->wo, (int64_t)(HD * C), "wo");
        assert_bits(x->ffn_norm, y->ffn_norm, (int64_t)C, "ffn_norm");
        assert_bits(x->w1, y->w1, (int64_t)(C * F), "w1");
        assert_bits(x->w2, y->w2, (int64_t)(F * C), "w2");
        assert_bits(x->w3, y->w3, (int64_t)(C * F), "w3");
    }
    assert_bits(a->p.norm, b->p.norm, (int64_t)C, "norm");
    assert_bits(a->p.output, b->p.output, (int64_t)(C * c->vocab_size), "output");
}

static void test_random_draws_the_initial_weights(void **state) {
    (void)state;
    FixSet fx;
    fix_load(&fx, FIXTURE);
    LlamaModel src, dst, fresh;
    source(&src, &fx);
    char err[256];
    if (llama_convert(&dst, &src, 2, LLAMA_CONVERT_RANDOM, 99, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    LlamaConfig c = shape(2);
    if (llama_new(&fresh, &c, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    llama_train_init(&fresh, 99);
    expect_same_but_kv(&dst, &src);
    int64_t n = (int64_t)c.dim * 2 * (c.dim / c.n_heads);
    for (int l = 0; l < c.n_layers; l++) {
        assert_bits(dst.p.layers[l].wk, fresh.p.layers[l].wk, n, "wk (expected: llama_train_init's)");
        assert_bits(dst.p.layers[l].wv, fresh.p.layers[l].wv, n, "wv (expected: llama_train_init's)");
    }
    llama_free(&fresh);
    llama_free(&dst);
    llama_free(&src);
    fix_free(&fx);
}

static void test_impossible_groupings_refused(void **state) {
    (void)state;
    FixSet fx;
    fix_load(&fx, FIXTURE);
    LlamaModel src, dst;
    source(&src, &fx);
    char err[256];
    const int bad[] = {3, 4, 8, 0};
    for (int i = 0; i < 4; i++) {
        if (llama_convert(&dst, &src, bad[i], LLAMA_CONVERT_MEAN, 1, ERR(LANG_EN, err)) == 0)
            fail_msg("G %d from 4 key/value heads: expected a refusal, got a model", bad[i]);
        if (!strstr(err, "valid are the divisors of 4 below it (1, 2)"))
            fail_msg("G %d: expected the valid G named, got: %s", bad[i], err);
    }
    LlamaConvert how;
    assert_int_equal(llama_convert_parse(&how, "first"), 0);
    assert_int_equal(how, LLAMA_CONVERT_FIRST);
    assert_int_equal(llama_convert_parse(&how, "middle"), -1);
    llama_free(&src);
    fix_free(&fx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mean_and_first_match_pytorch),
        cmocka_unit_test(test_random_draws_the_initial_weights),
        cmocka_unit_test(test_impossible_groupings_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
