// test_attention — the attention steps of section 2 against PyTorch, and the
// cached step equal to the full recomputation bit for bit.
#include "testutil.h"

#include "attention.h"
#include "toydata.h"

#include <stdio.h>
#include <string.h>

static FixSet fx;
static ToyData data;

static int setup(void **state) {
    (void)state;
    fix_load(&fx, "tests/fixtures/toy_tensors.txt");
    char err[256];
    if (toydata_load(&data, "data/tianqi.txt", ERR(LANG_EN, err))) fail_msg("%s", err);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    fix_free(&fx);
    toydata_free(&data);
    return 0;
}

static void check(const char *key, const float *got) {
    const FixTensor *want = fix_get(&fx, key);
    assert_close(got, want->data, want->rows * want->cols, 1e-6, key);
}

// Section 2.1, both steps: every intermediate tensor.
static void test_full_steps(void **state) {
    (void)state;
    AttnStep s;
    assert_int_equal(attn_step_init(&s, 8, 4, 4, 4), 0);
    for (int step = 1; step <= 2; step++) {
        attention_full(&s, data.X, step + 1, data.W_Q, data.W_K, data.W_V, data.scale, 1);
        char key[64];
        const struct {
            const char *name;
            const float *got;
        } t[] = {{"Q", s.Q}, {"K", s.K}, {"V", s.V}, {"scores", s.scores}, {"mask", s.mask},
                 {"masked_scores", s.masked}, {"weights", s.weights}, {"output", s.output}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            snprintf(key, sizeof key, "2/no-cache/%d/%s", step, t[i].name);
            check(key, t[i].got);
        }
        assert_int_equal(s.kv_rows, step + 1);
    }
    attn_step_free(&s);
}

// Section 2.2: the cached step against PyTorch, and against the last row of
// the full step bit for bit, at every length of the data file.
static void test_cached_step(void **state) {
    (void)state;
    AttnStep full, c;
    assert_int_equal(attn_step_init(&full, 8, 4, 4, 4), 0);
    assert_int_equal(attn_step_init(&c, 8, 4, 4, 4), 0);
    attention_full(&c, data.X, 2, data.W_Q, data.W_K, data.W_V, data.scale, 1);
    attention_cached(&c, data.X + 2 * 4, data.W_Q, data.W_K, data.W_V, data.scale);
    check("2/cache/2/Q", c.Q);
    check("2/cache/2/K", c.K);
    check("2/cache/2/V", c.V);
    check("2/cache/2/scores", c.scores);
    check("2/cache/2/weights", c.weights);
    check("2/cache/2/output", c.output);
    assert_int_equal(c.kv_rows, 1);
    for (int n = 3; n <= data.n; n++) {
        if (n > 3) attention_cached(&c, data.X + (n - 1) * 4, data.W_Q, data.W_K, data.W_V, data.scale);
        attention_full(&full, data.X, n, data.W_Q, data.W_K, data.W_V, data.scale, 1);
        assert_bits(c.output, full.output + (n - 1) * 4, 4, "cached output row");
        assert_bits(c.K, full.K, n * 4, "cached K");
        char key[32];
        snprintf(key, sizeof key, "7/-/%d/output", n);
        check(key, c.output);
    }
    attn_step_free(&full);
    attn_step_free(&c);
}

// Without the mask (lesson 1): PyTorch's outputs.
static void test_no_mask(void **state) {
    (void)state;
    AttnStep s;
    assert_int_equal(attn_step_init(&s, 3, 4, 4, 4), 0);
    attention_full(&s, data.X, 3, data.W_Q, data.W_K, data.W_V, data.scale, 0);
    check("1/no-mask/2/output", s.output);
    for (int i = 0; i < 9; i++) assert_true(s.mask[i] == 0.0f);
    attn_step_free(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_steps),
        cmocka_unit_test(test_cached_step),
        cmocka_unit_test(test_no_mask),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
