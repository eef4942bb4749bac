// test_threads — what --threads 0 means: the thread count pool_threads_for
// chooses from a model's shape (its largest matrix product of one token),
// for the presets and the shipped models, and that a count given by hand
// is kept. The expected counts are worked out here from the shapes (C x 4C
// of fc1, C x F of LLaMA's w1) and the rule (pool.h); nothing here is
// timed.
#include "testutil.h"

#include "gpt.h"
#include "llama.h"
#include "ops.h"
#include "pool.h"

#include <stdio.h>

static void expect_threads(long long work, int cores, int want, const char *what) {
    int got = pool_threads_for(work, cores);
    if (got != want)
        fail_msg("%s: %lld multiply-adds on %d cores: expected %d threads, got %d", what, work, cores, want, got);
}

// The rule itself: one thread a POOL_MIN_WORK share, at least 1, at most the cores.
static void test_rule_counts_shares_of_work(void **state) {
    (void)state;
    expect_threads(0, 8, 1, "no work");
    expect_threads(POOL_MIN_WORK - 1, 8, 1, "just under one share");
    expect_threads(POOL_MIN_WORK, 8, 1, "one share");
    expect_threads(2LL * POOL_MIN_WORK - 1, 8, 1, "just under two shares");
    expect_threads(2LL * POOL_MIN_WORK, 8, 2, "two shares");
    expect_threads(5LL * POOL_MIN_WORK, 8, 5, "five shares");
    expect_threads(5LL * POOL_MIN_WORK, 2, 2, "five shares on two cores");
    expect_threads(1LL << 40, 1, 1, "a huge product on one core");
}

// The presets: the chapter's (C = 384: fc1 384 x 1536 = 589,824, four
// shares: every core of up to four) and tiny (C = 64: 64 x 256 = 16,384,
// not one share: one thread).
static void test_presets(void **state) {
    (void)state;
    GptConfig seed, tiny;
    assert_int_equal(gpt_preset(&seed, "seed"), 0);
    assert_int_equal(gpt_preset(&tiny, "tiny"), 0);
    if (gpt_row_work(seed) != 589824) fail_msg("seed: expected 589824 multiply-adds, got %lld", (long long)gpt_row_work(seed));
    if (gpt_row_work(tiny) != 16384) fail_msg("tiny: expected 16384 multiply-adds, got %lld", (long long)gpt_row_work(tiny));
    expect_threads(gpt_row_work(seed), 2, 2, "seed preset");
    expect_threads(gpt_row_work(seed), 4, 4, "seed preset");
    expect_threads(gpt_row_work(seed), 16, 4, "seed preset");
    expect_threads(gpt_row_work(tiny), 16, 1, "tiny preset");
    // A vocabulary wider than 4 C makes the head the largest product: C x V.
    GptConfig wide = {.V = 50000, .T = 8, .C = 64, .H = 4, .L = 1};
    if (gpt_row_work(wide) != 64LL * 50000)
        fail_msg("C 64, V 50000: expected %lld multiply-adds, got %lld", 64LL * 50000, (long long)gpt_row_work(wide));
}

// The shipped files: the 42 MB char GPT on every core (of up to four), its
// draft (C = 128: 65,536) and the LLaMA-style models (C = 128, F = 352:
// 45,056) on one thread.
static void test_shipped_models(void **state) {
    (void)state;
    static const struct {
        const char *path;
        int gpt, want_on_8;
    } FILES[] = {
        {"data/tinyshakespeare-gpt.bin", 1, 4},        {"data/tinyshakespeare-draft.bin", 1, 1},
        {"data/tinyshakespeare-llama-mha.bin", 0, 1},  {"data/tinyshakespeare-llama-gqa4.bin", 0, 1},
        {"data/tinyshakespeare-llama-draft.bin", 0, 1},
    };
    for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) {
        char err[512];
        long long work;
        if (FILES[i].gpt) {
            GptConfig g;
            if (gpt_load_config(&g, FILES[i].path, ERR(LANG_EN, err))) fail_msg("%s", err);
            work = gpt_row_work(g);
        } else {
            LlamaModel m;
            if (llama_load(&m, FILES[i].path, ERR(LANG_EN, err))) fail_msg("%s", err);
            work = llama_row_work(&m.cfg);
            llama_free(&m);
        }
        expect_threads(work, 8, FILES[i].want_on_8, FILES[i].path);
    }
}

// The threads of --threads n for a shape (pool_new_for, the one way every
// command and lesson makes its pool): 0 takes the rule's count (capped by
// this machine's cores), a count given by hand is kept whatever the shape.
static void expect_pool(int n, int64_t work, int want, const char *what) {
    Pool *p = pool_new_for(n, work);
    assert_non_null(p);
    if (pool_threads(p) != want) fail_msg("%s, --threads %d: expected %d threads, got %d", what, n, want, pool_threads(p));
    pool_free(p);
}

static void test_pools_follow_the_rule(void **state) {
    (void)state;
    GptConfig seed, tiny;
    gpt_preset(&seed, "seed");
    gpt_preset(&tiny, "tiny");
    int cores = pool_cores(), want = cores < 4 ? cores : 4;
    expect_pool(0, gpt_row_work(tiny), 1, "tiny");
    expect_pool(0, gpt_row_work(seed), want, "seed");
    expect_pool(3, gpt_row_work(tiny), 3, "tiny");
    expect_pool(1, gpt_row_work(seed), 1, "seed");
    // Training's pools take the same rule.
    Pool *p = pool_new_for(0, gpt_row_work(tiny));
    assert_non_null(p);
    if (pool_threads(p) != 1) fail_msg("tiny's training pool, --threads 0: expected 1 thread, got %d", pool_threads(p));
    pool_free(p);
    p = pool_new_for(2, gpt_row_work(tiny));
    assert_non_null(p);
    if (pool_threads(p) != 2) fail_msg("tiny's training pool, --threads 2: expected 2 threads, got %d", pool_threads(p));
    pool_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_counts_shares_of_work),
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_shipped_models),
        cmocka_unit_test(test_pools_follow_the_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
