// test_llama_state — a LLaMA model's weights apart from its run state.
//
// One LlamaModel, read-only, serves any number of LlamaStates (each its own
// cache and scratch), as one set of weights serves every request: two runs
// taking turns on one model compute what each computes alone, bit for bit; a
// state emptied by llama_state_reset computes what a new one does; and a
// batch outside 1..LLAMA_MAX_BATCH is refused with one line.
//
// Run from the project's root: make build/tests/test_llama_state && ./build/tests/test_llama_state
#include "testutil.h"

#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BSZ = 2, LEN = 9, PROMPT = 5 };

// Two different batches of token ids, (BSZ, LEN) each: the runs below.
static const int TOKENS[2][BSZ * LEN] = {
    {1, 10, 20, 30, 40, 50, 60, 70, 80, 1, 11, 21, 31, 41, 51, 61, 71, 81},
    {1, 90, 80, 70, 60, 50, 40, 30, 20, 1, 5, 6, 7, 8, 9, 10, 11, 12},
};

// One call of a run as generate makes them with the cache: call 0 feeds the
// prompt, tokens[:, 0:PROMPT] at 0; call i > 0 feeds tokens[:, p:p+1] at p =
// PROMPT + i - 1. logits (BSZ, V) of that call.
static void run_call(float *logits, LlamaState *s, const LlamaModel *m, const int *tokens, int i) {
    if (i == 0) llama_forward(logits, s, m, tokens, 0, BSZ, PROMPT, LEN);
    else llama_forward(logits, s, m, tokens + PROMPT + i - 1, PROMPT + i - 1, BSZ, 1, LEN);
}
enum { CALLS = LEN - PROMPT + 1 };

// logits (CALLS, BSZ, V) of a whole run on state s.
static void run_all(float *logits, LlamaState *s, const LlamaModel *m, const int *tokens) {
    int V = m->cfg.vocab_size;
    for (int i = 0; i < CALLS; i++) run_call(logits + (size_t)i * BSZ * V, s, m, tokens, i);
}

static void test_two_states_share_one_model(void **state) {
    (void)state;
    int kv[] = {4, 2, 1};   // MHA, GQA, MQA
    for (int k = 0; k < 3; k++) {
        LlamaModel m;
        llama_model_for_test(&m, 4, kv[k], 21 + k);
        int V = m.cfg.vocab_size;
        size_t n = (size_t)CALLS * BSZ * V;
        float *alone[2], *turns[2];
        for (int r = 0; r < 2; r++) {
            alone[r] = malloc(sizeof(float) * n);
            turns[r] = malloc(sizeof(float) * n);
            assert_non_null(alone[r]);
            assert_non_null(turns[r]);
        }
        // one state used twice: run 0, then (reset) run 1
        LlamaState one;
        llama_state_for_test(&one, &m, BSZ);
        run_all(alone[0], &one, &m, TOKENS[0]);
        llama_state_reset(&one);
        run_all(alone[1], &one, &m, TOKENS[1]);
        // two states on the same model, taking turns call by call
        LlamaState a, b;
        llama_state_for_test(&a, &m, BSZ);
        llama_state_for_test(&b, &m, 4);   // a larger batch than it is fed: the same numbers
        for (int i = 0; i < CALLS; i++) {
            run_call(turns[0] + (size_t)i * BSZ * V, &a, &m, TOKENS[0], i);
            run_call(turns[1] + (size_t)i * BSZ * V, &b, &m, TOKENS[1], i);
        }
        for (int r = 0; r < 2; r++) {
            char what[96];
            snprintf(what, sizeof what, "n_kv_heads %d, run %d: logits (call, row, token) of two states in turns",
                     kv[k], r);
            assert_bits(turns[r], alone[r], (int64_t)n, what);
        }
        // the two runs differ, so the comparison above could have failed
        assert_true(memcmp(alone[0], alone[1], sizeof(float) * n) != 0);
        llama_state_free(&a);
        llama_state_free(&b);
        llama_state_free(&one);
        for (int r = 0; r < 2; r++) free(alone[r]), free(turns[r]);
        llama_free(&m);
    }
}

static void test_state_reusable_after_reset(void **state) {
    (void)state;
    LlamaModel m;
    llama_model_for_test(&m, 4, 2, 31);
    int V = m.cfg.vocab_size;
    size_t n = (size_t)CALLS * BSZ * V;
    float *fresh = malloc(sizeof(float) * n), *again = malloc(sizeof(float) * n);
    assert_non_null(fresh);
    assert_non_null(again);
    LlamaState s;
    llama_state_for_test(&s, &m, BSZ);
    run_all(fresh, &s, &m, TOKENS[0]);
    // another run fills the cache with other keys and values
    run_all(again, &s, &m, TOKENS[1]);
    llama_state_reset(&s);
    // cache_k, cache_v (L, B, T, G, D)
    size_t floats = (size_t)m.cfg.n_layers * BSZ * m.cfg.max_seq_len * m.cfg.n_kv_heads * m.cfg.head_dim;
    for (size_t i = 0; i < floats; i++)
        if (s.cache.cache_k[i] != 0.0f || s.cache.cache_v[i] != 0.0f)
            fail_msg("cache after reset [%zu]: expected 0 and 0, got %g and %g", i, s.cache.cache_k[i],
                     s.cache.cache_v[i]);
    assert_int_equal(s.info.rows_computed, 0);
    run_all(again, &s, &m, TOKENS[0]);
    assert_bits(again, fresh, (int64_t)n, "logits (call, row, token) of a run after reset");
    llama_state_free(&s);
    free(fresh);
    free(again);
    llama_free(&m);
}

static void test_bad_max_batch_size_refused(void **state) {
    (void)state;
    LlamaModel m;
    llama_model_for_test(&m, 4, 4, 1);
    int bad[] = {0, -1, LLAMA_MAX_BATCH + 1, 1 << 30};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        LlamaState s;
        char err[256] = "", want[64], range[32];
        if (llama_state_init(&s, &m, bad[i], ERR(LANG_EN, err)) == 0) {
            llama_state_free(&s);
            fail_msg("max_batch_size %d: expected a refusal, got a state", bad[i]);
        }
        snprintf(want, sizeof want, "max_batch_size is %d", bad[i]);
        snprintf(range, sizeof range, "between 1 and %d", LLAMA_MAX_BATCH);
        if (!strstr(err, want) || !strstr(err, range) || strchr(err, '\n'))
            fail_msg("max_batch_size %d: expected one line with \"%s\" and \"%s\", got \"%s\"", bad[i], want,
                     range, err);
        assert_null(s.cache.cache_k);
        llama_state_free(&s);   // a refused state frees as an empty one
    }
    int good[] = {1, LLAMA_MAX_BATCH};
    for (size_t i = 0; i < 2; i++) {
        LlamaState s;
        llama_state_for_test(&s, &m, good[i]);
        assert_int_equal(s.max_batch_size, good[i]);
        llama_state_free(&s);
    }
    llama_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_states_share_one_model),
        cmocka_unit_test(test_state_reusable_after_reset),
        cmocka_unit_test(test_bad_max_batch_size_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
