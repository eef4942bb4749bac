// test_train_llama — training the LLaMA-style model: the loss and every
// weight's gradient against the article's Transformer run with autograd in
// PyTorch (tests/llama_train_reference.py wrote tests/fixtures/llama_train.txt)
// for MHA (G = H = 4), GQA (G = 2) and MQA (G = 1); and gradients that are
// the same bits whatever the number of threads.
//
// Run from the project's root: make build/tests/test_train_llama && ./build/tests/test_train_llama
#include "testutil.h"

#include "llama.h"
#include "pool.h"
#include "train_llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// C and PyTorch differ in the order of their float32 sums only. The loss is
// a mean of 16 terms near 3-10; a gradient element may differ by TOL_GRAD_REL
// of the largest |gradient| of its tensor (a relative bound on each element
// would fail on the elements that are sums cancelling to nearly 0).
#define TOL_LOSS 2e-5
#define TOL_GRAD_REL 5e-5

enum { FIX_B = 2, FIX_T = 8 };

// One weight tensor of a model: its name in the fixture and its floats.
typedef struct {
    char name[64];
    const float *data;
    size_t n;
} NamedWeights;

// The tensors of m in file order; returns how many (at most max).
static int model_tensors(NamedWeights *t, int max, const LlamaModel *m) {
    const LlamaConfig *c = &m->cfg;
    size_t V = c->vocab_size, C = c->dim, F = c->hidden_dim;
    size_t HD = (size_t)c->n_heads * c->head_dim, GD = (size_t)c->n_kv_heads * c->head_dim;
    int n = 0;
#define ADD(NAME_FMT, L, PTR, SIZE)                                            \
    do {                                                                        \
        assert_true(n < max);                                                   \
        snprintf(t[n].name, sizeof t[n].name, NAME_FMT, L);                     \
        t[n].data = (PTR), t[n].n = (SIZE), n++;                                \
    } while (0)
    ADD("tok_embeddings%.0d", 0, m->p.tok_embeddings, V * C);
    for (int l = 0; l < c->n_layers; l++) {
        const LlamaLayerParams *w = &m->p.layers[l];
        ADD("layers.%d.attention_norm", l, w->attention_norm, C);
        ADD("layers.%d.wq", l, w->wq, C * HD);
        ADD("layers.%d.wk", l, w->wk, C * GD);
        ADD("layers.%d.wv", l, w->wv, C * GD);
        ADD("layers.%d.wo", l, w->wo, HD * C);
        ADD("layers.%d.ffn_norm", l, w->ffn_norm, C);
        ADD("layers.%d.w1", l, w->w1, C * F);
        ADD("layers.%d.w2", l, w->w2, F * C);
        ADD("layers.%d.w3", l, w->w3, C * F);
    }
    ADD("norm%.0d", 0, m->p.norm, C);
    ADD("output%.0d", 0, m->p.output, C * V);
#undef ADD
    return n;
}

static void model_from_file(LlamaModel *m, const char *path) {
    char err[256];
    if (llama_load(m, path, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
}

static void grads_for(LlamaModel *g, const LlamaModel *m) {
    char err[256];
    if (llama_new(g, &m->cfg, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
}

// Fails at the first element of got further than tol * max|want| from want.
static void expect_gradient(const char *what, const float *got, const float *want, size_t n) {
    double big = 0.0;
    for (size_t i = 0; i < n; i++) big = fmax(big, fabs(want[i]));
    double tol = TOL_GRAD_REL * big;
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol))
            fail_msg("%s[%zu]: expected %.9g, got %.9g (tolerance %.3g = %g x the largest |gradient| %.6g)",
                     what, i, want[i], got[i], tol, TOL_GRAD_REL, big);
}

// ---------------------------------------------------------------------------
// Against PyTorch

static void check_against_pytorch(const char *name) {
    char path[128], key[160];
    snprintf(path, sizeof path, "tests/fixtures/llama_%s.bin", name);
    LlamaModel m, g;
    model_from_file(&m, path);
    grads_for(&g, &m);
    FixSet fx;
    fix_load(&fx, "tests/fixtures/llama_train.txt");
    snprintf(key, sizeof key, "%s.tokens", name);
    const FixTensor *tok = fix_get(&fx, key);
    assert_int_equal(tok->rows * tok->cols, FIX_B * (FIX_T + 1));
    int32_t inputs[FIX_B * FIX_T], targets[FIX_B * FIX_T];
    for (int b = 0; b < FIX_B; b++)
        for (int t = 0; t < FIX_T; t++) {
            inputs[b * FIX_T + t] = (int32_t)tok->data[b * (FIX_T + 1) + t];
            targets[b * FIX_T + t] = (int32_t)tok->data[b * (FIX_T + 1) + t + 1];
        }
    LlamaTrainState *s = llama_train_state_new(&m.cfg, FIX_B, FIX_T, NULL);
    assert_non_null(s);
    double loss = llama_train_forward(s, &m, inputs, targets, FIX_B);
    snprintf(key, sizeof key, "%s.loss", name);
    double want_loss = fix_get(&fx, key)->data[0];
    if (!(fabs(loss - want_loss) <= TOL_LOSS))
        fail_msg("%s loss: expected %.9g, got %.9g (tolerance %g)", name, want_loss, loss, TOL_LOSS);
    llama_train_backward(s, &g, &m, inputs, targets, FIX_B);
    NamedWeights t[64];
    int n = model_tensors(t, 64, &g);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%.8s.grad.%.63s", name, t[i].name);
        const FixTensor *want = fix_get(&fx, key);
        assert_int_equal((size_t)want->rows * want->cols, t[i].n);
        expect_gradient(key, t[i].data, want->data, t[i].n);
    }
    llama_train_state_free(s);
    fix_free(&fx);
    llama_free(&g);
    llama_free(&m);
}

static void test_mha_gradients_match_pytorch(void **state) {
    (void)state;
    check_against_pytorch("mha");
}

static void test_gqa_gradients_match_pytorch(void **state) {
    (void)state;
    check_against_pytorch("gqa");
}

static void test_mqa_gradients_match_pytorch(void **state) {
    (void)state;
    check_against_pytorch("mqa");
}

// ---------------------------------------------------------------------------
// The same bits whatever the number of threads

// A model large enough that the matmuls are split among the threads
// (train_matmul keeps products under 65536 multiply-adds on one thread).
static void big_model(LlamaModel *m, int G) {
    LlamaConfig c = llama_config_default();
    c.dim = 64, c.n_heads = 8, c.n_kv_heads = G, c.hidden_dim = 160, c.max_seq_len = 32;
    char err[256];
    if (llama_new(m, &c, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    llama_vocab_default(m);
    llama_init_random(m, 5);
}

// loss and grads (P) of one step of b sequences on a pool of `threads`.
static double step_on(float *grads_out, const LlamaModel *m, const int32_t *inputs,
                      const int32_t *targets, int b, int T, int threads) {
    Pool *pool = pool_new(threads);
    assert_non_null(pool);
    LlamaTrainState *s = llama_train_state_new(&m->cfg, b, T, pool);
    assert_non_null(s);
    LlamaModel g;
    grads_for(&g, m);
    double loss = llama_train_forward(s, m, inputs, targets, b);
    llama_train_backward(s, &g, m, inputs, targets, b);
    memcpy(grads_out, g.params, sizeof(float) * m->num_params);
    llama_free(&g);
    llama_train_state_free(s);
    pool_free(pool);
    return loss;
}

static void check_threads(int G) {
    enum { B = 4, T = 32 };
    LlamaModel m;
    big_model(&m, G);
    int32_t inputs[B * T], targets[B * T];
    uint32_t r = 12345;
    for (int i = 0; i < B * T; i++) {
        r = r * 1103515245u + 12345u;
        inputs[i] = (int32_t)((r >> 8) % (uint32_t)m.cfg.vocab_size);
        targets[i] = (int32_t)((r >> 20) % (uint32_t)m.cfg.vocab_size);
    }
    float *g1 = malloc(sizeof(float) * m.num_params), *g2 = malloc(sizeof(float) * m.num_params);
    assert_non_null(g1);
    assert_non_null(g2);
    double l1 = step_on(g1, &m, inputs, targets, B, T, 1);
    double l2 = step_on(g2, &m, inputs, targets, B, T, 2);
    if (memcmp(&l1, &l2, sizeof l1) != 0)
        fail_msg("loss: 1 thread %.17g, 2 threads %.17g", l1, l2);
    assert_bits(g2, g1, (int64_t)m.num_params, "gradients, 2 threads against 1");
    free(g1);
    free(g2);
    llama_free(&m);
}

static void test_gqa_gradients_same_bits_for_1_and_2_threads(void **state) {
    (void)state;
    check_threads(2);
}

static void test_mha_and_mqa_gradients_same_bits_for_1_and_2_threads(void **state) {
    (void)state;
    check_threads(8);
    check_threads(1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mha_gradients_match_pytorch),
        cmocka_unit_test(test_gqa_gradients_match_pytorch),
        cmocka_unit_test(test_mqa_gradients_match_pytorch),
        cmocka_unit_test(test_gqa_gradients_same_bits_for_1_and_2_threads),
        cmocka_unit_test(test_mha_and_mqa_gradients_same_bits_for_1_and_2_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
