// test_llama_shipped — the trained LLaMA-style model kvdemo ships
// (data/tinyshakespeare-llama-mha.bin, docs/training.md): its loss on a
// fixed stretch of tinyshakespeare's validation split against the article's
// Transformer in PyTorch (tests/llama_model_loss_reference.py wrote
// tests/fixtures/llama_shipped_loss.txt), and its generation with the cache
// equal bit for bit to the one without it. No corpus is needed: the stretch
// is tests/fixtures/tinyshakespeare_val_1025.txt.
//
// Run from the project's root: make build/tests/test_llama_shipped && ./build/tests/test_llama_shipped
#include "testutil.h"

#include "llama.h"
#include "train_llama.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SHIPPED "data/tinyshakespeare-llama-mha.bin"
#define STRETCH "tests/fixtures/tinyshakespeare_val_1025.txt"

// The C sums in float32 in another order than PyTorch: the mean of 1024
// cross-entropies near 1.5 may differ in the 5th decimal.
#define TOL_LOSS 1e-4

static void load(LlamaModel *m) {
    char err[256];
    if (llama_load(m, SHIPPED, err, sizeof err) != 0) fail_msg("%s", err);
}

static void test_loss_on_the_stretch_matches_pytorch(void **state) {
    (void)state;
    FixSet fx;
    fix_load(&fx, "tests/fixtures/llama_shipped_loss.txt");
    const FixTensor *want = fix_get(&fx, "loss");
    LlamaModel m;
    load(&m);
    char err[256];
    for (int threads = 1; threads <= 2; threads++) {
        double loss;
        if (llama_train_text_loss(&m, STRETCH, threads, &loss, err, sizeof err) != 0) fail_msg("%s", err);
        if (!(fabs(loss - want->data[0]) <= TOL_LOSS))
            fail_msg("loss of %s on %s (%d threads): expected %.6f (PyTorch), got %.6f", SHIPPED, STRETCH,
                     threads, (double)want->data[0], loss);
    }
    llama_free(&m);
    fix_free(&fx);
}

static void test_cached_generation_equals_uncached_bits(void **state) {
    (void)state;
    LlamaModel m;
    load(&m);
    char err[256];
    const char *prompts[] = {"ROMEO:", "JULIET:\nO Romeo, "};
    LlamaState s[2];
    LlamaGeneration g[2];
    for (int run = 0; run < 2; run++) {
        if (llama_state_init(&s[run], &m, 2, err, sizeof err) != 0 ||
            llama_generation_new(&g[run], &s[run], &m, err, sizeof err) != 0)
            fail_msg("%s", err);
        LlamaGenOptions go = {.max_gen_len = 60, .temperature = 0.8f, .top_p = 0.95f, .use_cache = run, .seed = 1};
        if (llama_generate(&g[run], &s[run], &m, prompts, 2, &go, err, sizeof err) != 0) fail_msg("%s", err);
    }
    assert_int_equal(g[1].n_steps, g[0].n_steps);
    assert_bits(g[1].logits, g[0].logits, (int64_t)g[0].n_steps * 2 * m.cfg.vocab_size,
                "logits with the cache (expected: without it)");
    for (int k = 0; k < 2; k++) assert_string_equal(g[1].text[k], g[0].text[k]);
    for (int run = 0; run < 2; run++) {
        llama_generation_free(&g[run]);
        llama_state_free(&s[run]);
    }
    llama_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_on_the_stretch_matches_pytorch),
        cmocka_unit_test(test_cached_generation_equals_uncached_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
