// test_llama_shipped — the trained LLaMA-style models kvdemo ships
// (data/tinyshakespeare-llama-mha.bin and its three sharings -gqa4, -gqa2,
// -mqa, docs/training.md): each one's loss on a fixed stretch of
// tinyshakespeare's validation split against the article's Transformer in
// PyTorch (tests/llama_model_loss_reference.py wrote
// tests/fixtures/llama_shipped_loss*.txt), and each one's generation with
// the cache equal bit for bit to the one without it. No corpus is needed:
// the stretch is tests/fixtures/tinyshakespeare_val_1025.txt.
//
// Run from the project's root: make build/tests/test_llama_shipped && ./build/tests/test_llama_shipped
#include "testutil.h"

#include "llama.h"
#include "train_llama.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// Each shipped model, its key/value heads and the fixture of its loss.
static const struct {
    const char *path;
    int kv_heads;
    const char *fixture;
} SHIPPED[] = {
    {"data/tinyshakespeare-llama-mha.bin", 8, "tests/fixtures/llama_shipped_loss.txt"},
    {"data/tinyshakespeare-llama-gqa4.bin", 4, "tests/fixtures/llama_shipped_loss_gqa4.txt"},
    {"data/tinyshakespeare-llama-gqa2.bin", 2, "tests/fixtures/llama_shipped_loss_gqa2.txt"},
    {"data/tinyshakespeare-llama-mqa.bin", 1, "tests/fixtures/llama_shipped_loss_mqa.txt"},
};
enum { N_SHIPPED = sizeof SHIPPED / sizeof SHIPPED[0] };

#define STRETCH "tests/fixtures/tinyshakespeare_val_1025.txt"

// The C sums in float32 in another order than PyTorch: the mean of 1024
// cross-entropies near 1.5 may differ in the 5th decimal.
#define TOL_LOSS 1e-4

// Loads shipped model k and checks that it has the shape its name says.
static void load(LlamaModel *m, int k) {
    char err[256];
    if (llama_load(m, SHIPPED[k].path, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    if (m->cfg.n_heads != 8 || m->cfg.n_kv_heads != SHIPPED[k].kv_heads)
        fail_msg("%s: expected 8 query heads and %d key/value heads, got %d and %d", SHIPPED[k].path,
                 SHIPPED[k].kv_heads, m->cfg.n_heads, m->cfg.n_kv_heads);
}

static void check_loss(int k) {
    FixSet fx;
    fix_load(&fx, SHIPPED[k].fixture);
    const FixTensor *want = fix_get(&fx, "loss");
    LlamaModel m;
    load(&m, k);
    char err[256];
    for (int threads = 1; threads <= 2; threads++) {
        double loss;
        if (llama_train_text_loss(&m, STRETCH, threads, &loss, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
        if (!(fabs(loss - want->data[0]) <= TOL_LOSS))
            fail_msg("loss of %s on %s (%d threads): expected %.6f (PyTorch), got %.6f", SHIPPED[k].path,
                     STRETCH, threads, (double)want->data[0], loss);
    }
    llama_free(&m);
    fix_free(&fx);
}

// Under the sanitizers, MHA and MQA only (G = 8 and 1): the sharings between
// take the same code, and the fast pass checks all four.
static int left_out(int k, const char *test) {
    if (k == 0 || k == N_SHIPPED - 1) return 0;
    char what[160];
    snprintf(what, sizeof what, "test_llama_shipped: %s on %s", test, SHIPPED[k].path);
    return tests_sanitized_skip(what);
}

static void test_loss_on_the_stretch_matches_pytorch(void **state) {
    (void)state;
    for (int k = 0; k < N_SHIPPED; k++)
        if (!left_out(k, "the loss")) check_loss(k);
}

static void check_cached_generation(int k) {
    LlamaModel m;
    load(&m, k);
    char err[256];
    const char *prompts[] = {"ROMEO:", "JULIET:\nO Romeo, "};
    LlamaState s[2];
    LlamaGeneration g[2];
    for (int run = 0; run < 2; run++) {
        if (llama_state_init(&s[run], &m, 2, ERR(LANG_EN, err)) != 0 ||
            llama_generation_new(&g[run], &s[run], &m, ERR(LANG_EN, err)) != 0)
            fail_msg("%s", err);
        LlamaGenOptions go = {.max_gen_len = 60, .temperature = 0.8f, .top_p = 0.95f, .use_cache = run, .seed = 1};
        if (llama_generate(&g[run], &s[run], &m, prompts, 2, &go, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    }
    assert_int_equal(g[1].n_steps, g[0].n_steps);
    assert_bits(g[1].logits, g[0].logits, (int64_t)g[0].n_steps * 2 * m.cfg.vocab_size,
                "logits with the cache (expected: without it)");
    for (int i = 0; i < 2; i++) assert_string_equal(g[1].text[i], g[0].text[i]);
    for (int run = 0; run < 2; run++) {
        llama_generation_free(&g[run]);
        llama_state_free(&s[run]);
    }
    llama_free(&m);
}

static void test_cached_generation_equals_uncached_bits(void **state) {
    (void)state;
    for (int k = 0; k < N_SHIPPED; k++)
        if (!left_out(k, "cached generation")) check_cached_generation(k);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_on_the_stretch_matches_pytorch),
        cmocka_unit_test(test_cached_generation_equals_uncached_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
