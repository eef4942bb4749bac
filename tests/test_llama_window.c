// test_llama_window — sliding-window attention in the LLaMA-style model
// (llama.h's cfg.window, kvcache_window.c's rolling cache), on small models
// with random weights (no training here).
//
//   test_rolling_cache_equals_band_recompute   a model with window W fed one token at a
//                                              time into a rolling cache of W rows, for a
//                                              text 12 W long (3 times its context T):
//                                              the logits of every position bit-identical
//                                              to recomputing the whole text from position
//                                              0 under the band mask (the same weights
//                                              with a context as long as the text)
//   test_shipped_window_model_rolls_exactly    data/tinyshakespeare-llama-window64.bin: its
//                                              rolling cache of 64 rows over 640 characters
//                                              of the validation text (10 turns), bit for
//                                              bit the band recomputation from position 0
//   test_receptive_field_grows_by_w_per_layer  L layers of window W: the logits at p
//                                              change with the token p - L (W - 1), not
//                                              with the one before it
//   test_band_mask_in_training                 training's forward pass with the band gives
//                                              the logits of llama_forward with it, and
//                                              the band changes them (W < T)
//   test_window_in_model_file                  window 0 saves version 2, bit for bit the
//                                              shipped file; window W saves version 3 and
//                                              loads back W
//   test_rotary_after_eviction_matches_reference   rolling and 2 sinks + window of 6 rows on a
//                                              model of context 16, 40 tokens: the logits of
//                                              tests/llama_window_reference.py (float64) and
//                                              of tests/llama_window_torch_reference.py (the
//                                              article's PyTorch code, the rule as a mask)
//                                              within 1e-4
//   test_positions_in_cache_match_reference    StreamingLLM's rotary convention on 2 sinks +
//                                              6: the reference's logits within 1e-4; a
//                                              rolling buffer, and any step before eviction,
//                                              bit for bit kvdemo's convention
//   test_generate_past_the_context             generate --window: a window as long as the
//                                              text writes the text of the cached generate
//                                              (within the context), and 300 steps on 16
//                                              rows run past the context without a reset;
//                                              bad combinations are refused with status 2
//   test_generate_window_model_past_the_context   generate --window 64 on the shipped
//                                              window model, 200 steps past its context of
//                                              128: the greedy text of its weights on a full
//                                              cache of 256 under the band mask, byte for byte
//   test_ways_past_the_window_match_reference  lesson 14's ways (reset, recompute, window,
//                                              1 and 4 sinks, the window model) on the
//                                              shipped models over 256 characters: every
//                                              compared loss within 1e-4 of
//                                              tests/llama_past_torch_reference.py
//   test_sink_shares_match_reference           lesson 14's share of attention on position 0
//                                              per layer and head, both shipped models,
//                                              within 1e-5 of the PyTorch softmax
//   test_lesson14_refuses_window_model         lesson 14 --model with a window model: exit 1,
//                                              one line naming its window, no output
#include "testutil.h"

#include "llama.h"
#include "llama_past.h"
#include "ops.h"
#include "train_llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { W = 8, T_SHORT = 32, P = 12 * W };

static void model_with(LlamaModel *m, int T, int window, uint64_t seed) {
    LlamaConfig c = llama_config_default();
    c.max_seq_len = T;
    c.window = window;
    char err[256];
    if (llama_new(m, &c, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    llama_vocab_default(m);
    llama_init_random(m, seed);
}

static void tokens_of(int *tokens, int n, int V, uint64_t seed) {
    uint64_t r = seed;
    for (int i = 0; i < n; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        tokens[i] = 3 + (int)((r >> 33) % (uint64_t)(V - 3));
    }
}

static void test_rolling_cache_equals_band_recompute(void **state) {
    (void)state;
    LlamaModel m, big;
    model_with(&m, T_SHORT, W, 5);
    model_with(&big, P, W, 5);   // the same weights: the context is not a weight
    assert_int_equal((int)m.num_params, (int)big.num_params);
    LlamaState s, full;
    llama_state_for_test(&s, &m, 1);
    llama_state_for_test(&full, &big, 1);
    KvWindow roll;
    KvShape shape = {.L = m.cfg.n_layers, .B = 1, .T = W, .H = m.cfg.n_heads, .G = m.cfg.n_kv_heads,
                     .D = m.cfg.head_dim};
    assert_int_equal(kvwindow_init(&roll, shape, 0), 0);
    s.kv = &roll.base;
    int V = m.cfg.vocab_size, tokens[P];
    tokens_of(tokens, P, V, 9);
    float *got = malloc(sizeof(float) * V), *want = malloc(sizeof(float) * V);
    assert_true(got && want);
    for (int p = 0; p < P; p++) {
        llama_forward(got, &s, &m, tokens + p, p, 1, 1, 1);
        llama_forward(want, &full, &big, tokens, 0, 1, p + 1, P);
        char what[96];
        snprintf(what, sizeof what, "logits at position %d (context %d, window %d)", p, T_SHORT, W);
        assert_bits(got, want, V, what);
    }
    assert_int_equal(kvcache_len(&roll.base), P);
    assert_true(kvcache_bytes(&roll.base) < kvcache_bytes(&full.cache.base) / 8);
    free(got), free(want);
    kvcache_free(&roll.base);
    llama_state_free(&s);
    llama_state_free(&full);
    llama_free(&m);
    llama_free(&big);
}

// The receptive field: with a band of W in each of L layers, the logits at
// position p depend on the tokens p - L (W - 1) .. p and on no earlier one
// (lesson 14's table): a token changed at p - L (W - 1) changes them, one
// changed a position earlier leaves them bit-identical.
static void test_receptive_field_grows_by_w_per_layer(void **state) {
    (void)state;
    LlamaModel m;
    model_with(&m, P, W, 7);
    int L = m.cfg.n_layers, V = m.cfg.vocab_size, p = P - 1, edge = p - L * (W - 1);
    assert_true(edge > 0);
    LlamaState s;
    llama_state_for_test(&s, &m, 1);
    int tokens[P];
    tokens_of(tokens, P, V, 21);
    float *base = malloc(sizeof(float) * V), *got = malloc(sizeof(float) * V);
    assert_true(base && got);
    llama_forward(base, &s, &m, tokens, 0, 1, P, P);
    for (int at = edge - 1; at <= edge; at++) {
        int keep = tokens[at];
        tokens[at] = 3 + (keep - 3 + 1) % (V - 3);   // another character
        llama_forward(got, &s, &m, tokens, 0, 1, P, P);
        tokens[at] = keep;
        int same = ops_bit_identical(base, got, V);
        if (at < edge && !same)
            fail_msg("token %d changed: %d layers of window %d reach back to %d only, yet logits at %d changed", at,
                     L, W, edge, p);
        if (at == edge && same)
            fail_msg("token %d changed: expected the logits at %d to change (%d layers of window %d reach it), "
                     "got the same bits", at, p, L, W);
    }
    free(base), free(got);
    llama_state_free(&s);
    llama_free(&m);
}

// The shipped model trained with --window 64 (lesson 14's last way): its
// rolling cache of 64 rows, fed the validation text one character at a time
// for 5 contexts (10 turns of the cache), gives at each checked position the
// logits of recomputing the whole text from position 0 under the band mask
// (the same weights with a context as long as the text), bit for bit.
static void test_shipped_window_model_rolls_exactly(void **state) {
    (void)state;
    enum { N = 5 * 128, WIN = 64 };
    LlamaModel m, big;
    char err[256];
    if (llama_load(&m, "data/tinyshakespeare-llama-window64.bin", ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    if (m.cfg.window != WIN) fail_msg("window of the shipped model: expected %d, got %d", WIN, m.cfg.window);
    LlamaConfig c = m.cfg;
    c.max_seq_len = N;   // the context is not a weight
    if (llama_new(&big, &c, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    assert_int_equal((int)big.num_params, (int)m.num_params);
    memcpy(big.params, m.params, sizeof(float) * m.num_params);
    memcpy(big.vocab, m.vocab, sizeof(uint32_t) * (size_t)c.vocab_size);
    FILE *f = fopen("data/tinyshakespeare-val-2049.txt", "rb");
    assert_non_null(f);
    static char text[N + 1];
    size_t got = fread(text, 1, N - 1, f);
    fclose(f);
    text[got] = '\0';
    int tokens[N + 2];
    int n = llama_encode(tokens, &m, text, 1, 0, N + 2, ERR(LANG_EN, err));
    if (n < N) fail_msg("validation text: expected %d tokens, got %d: %s", N, n, err);
    LlamaState s, full;
    llama_state_for_test(&s, &m, 1);
    llama_state_for_test(&full, &big, 1);
    KvWindow roll;
    KvShape shape = {.L = c.n_layers, .B = 1, .T = WIN, .H = c.n_heads, .G = c.n_kv_heads, .D = c.head_dim};
    assert_int_equal(kvwindow_init(&roll, shape, 0), 0);
    s.kv = &roll.base;
    int V = c.vocab_size;
    float *mine = malloc(sizeof(float) * V), *want = malloc(sizeof(float) * V);
    assert_true(mine && want);
    for (int p = 0; p < N; p++) {
        llama_forward(mine, &s, &m, tokens + p, p, 1, 1, 1);
        if (p != 63 && p != 127 && p != 300 && p != N - 1) continue;
        llama_forward(want, &full, &big, tokens, 0, 1, p + 1, N);
        char what[96];
        snprintf(what, sizeof what, "shipped window model, logits at position %d (rolling cache of %d)", p, WIN);
        assert_bits(mine, want, V, what);
    }
    assert_true(kvcache_bytes(&roll.base) * 2 == (size_t)llama_cache_bytes_per_token(&c) * 128);
    free(mine), free(want);
    kvcache_free(&roll.base);
    llama_state_free(&s);
    llama_state_free(&full);
    llama_free(&m);
    llama_free(&big);
}

// max |a - b| over n, and the index where it is.
static double max_diff(const float *a, const float *b, int n, int *at) {
    double most = 0;
    for (int i = 0; i < n; i++)
        if (fabs((double)a[i] - b[i]) > most) most = fabs((double)a[i] - b[i]), *at = i;
    return most;
}

static void test_band_mask_in_training(void **state) {
    (void)state;
    enum { T = 24, BAND = 5 };
    LlamaModel m, full;
    model_with(&m, T, BAND, 3);
    model_with(&full, T, 0, 3);
    int V = m.cfg.vocab_size, tokens[T];
    int32_t in[T];
    tokens_of(tokens, T, V, 4);
    for (int t = 0; t < T; t++) in[t] = tokens[t];
    LlamaTrainState *ts = llama_train_state_new(&m.cfg, 1, T, NULL);
    assert_non_null(ts);
    llama_train_forward(ts, &m, in, NULL, 1);
    const float *train_logits = llama_train_state_logits(ts);
    LlamaState s, sf;
    llama_state_for_test(&s, &m, 1);
    llama_state_for_test(&sf, &full, 1);
    float *logits = malloc(sizeof(float) * V), *lf = malloc(sizeof(float) * V);
    assert_true(logits && lf);
    int differs = 0;
    for (int t = 0; t < T; t++) {
        llama_forward(logits, &s, &m, tokens, 0, 1, t + 1, T);
        llama_forward(lf, &sf, &full, tokens, 0, 1, t + 1, T);
        int at = 0;
        double d = max_diff(train_logits + (size_t)t * V, logits, V, &at);
        if (!(d <= 1e-4))
            fail_msg("position %d, logit %d: expected %.7g (llama_forward, band %d), got %.7g (training)", t, at,
                     logits[at], BAND, train_logits[(size_t)t * V + at]);
        if (t >= BAND && max_diff(logits, lf, V, &at) > 1e-3) differs = 1;
        if (t < BAND && !ops_bit_identical(logits, lf, V))
            fail_msg("position %d < band %d: the band should change nothing yet", t, BAND);
    }
    if (!differs) fail_msg("the band of %d changed no logit of a text of %d: it is not applied", BAND, T);
    free(logits), free(lf);
    llama_state_free(&s);
    llama_state_free(&sf);
    llama_train_state_free(ts);
    llama_free(&m);
    llama_free(&full);
}

static void test_window_in_model_file(void **state) {
    (void)state;
    char dir[256], path[300], err[256];
    assert_int_equal(tmpdir_make(dir, sizeof dir, "llama-window"), 0);
    snprintf(path, sizeof path, "%s/m.bin", dir);
    // the shipped model (no window): loaded and saved, the same bytes
    LlamaModel m;
    assert_int_equal(llama_load(&m, "data/tinyshakespeare-llama-mha.bin", ERR(LANG_EN, err)), 0);
    assert_int_equal(m.cfg.window, 0);
    assert_int_equal(llama_save(&m, path, ERR(LANG_EN, err)), 0);
    char *a = file_slurp("data/tinyshakespeare-llama-mha.bin"), *b = file_slurp(path);
    assert_non_null(a);
    assert_non_null(b);
    size_t n = 44 + 4 * (size_t)m.cfg.vocab_size + 4 * m.num_params + 4;
    assert_int_equal(b[4], 2);   // version 2
    assert_memory_equal(a, b, n);
    free(a), free(b);
    llama_free(&m);
    // a windowed one: version 3, 4 bytes more, the window back
    model_with(&m, 16, 6, 1);
    assert_int_equal(llama_save(&m, path, ERR(LANG_EN, err)), 0);
    LlamaModel back;
    assert_int_equal(llama_load(&back, path, ERR(LANG_EN, err)), 0);
    assert_int_equal(back.cfg.window, 6);
    assert_true(ops_bit_identical(back.params, m.params, (int64_t)m.num_params));
    b = file_slurp(path);
    assert_int_equal(b[4], 3);
    free(b);
    llama_free(&back);
    llama_free(&m);
    assert_int_equal(tmpdir_remove(dir), 0);
}

// Rotary positions right after eviction and past the context, against
// tests/llama_window_reference.py (the article's Transformer in float64,
// the window rules of issue 27) on tests/fixtures/llama_mha.bin (T 16):
// 40 tokens, a rolling cache of 6 rows and 2 sinks + a window of 6.
// StreamingLLM's convention (kvwindow_positions_in_cache): 2 sinks + a
// window of 6 on the fixture model, 40 tokens, the logits of
// tests/llama_window_reference.py's keys cached before rotation and rotated
// at 0 .. cnt-1 (the query at cnt - 1) within 1e-4; before the first
// eviction, and on a rolling buffer throughout, bit for bit kvdemo's own
// convention; after it, different (the sinks moved up to the window).
static void test_positions_in_cache_match_reference(void **state) {
    (void)state;
    FixSet fx;
    fix_load(&fx, "tests/fixtures/llama_window_in_cache.txt");
    LlamaModel m;
    char err[256];
    if (llama_load(&m, "tests/fixtures/llama_mha.bin", ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    const FixTensor *tok = fix_get(&fx, "tokens"), *want = fix_get(&fx, "sinks_in_cache_logits");
    int n = tok->cols, V = m.cfg.vocab_size, tokens[64];
    assert_true(n <= 64 && V <= 64 && n > 2 * m.cfg.max_seq_len);
    assert_int_equal(want->rows, n);
    for (int i = 0; i < n; i++) tokens[i] = (int)tok->data[i];
    for (int S = 0; S <= 2; S += 2) {
        LlamaState s, own;
        llama_state_for_test(&s, &m, 1);
        llama_state_for_test(&own, &m, 1);
        KvWindow kv, kv_own;
        KvShape shape = {.L = m.cfg.n_layers, .B = 1, .T = 6, .H = m.cfg.n_heads, .G = m.cfg.n_kv_heads,
                         .D = m.cfg.head_dim};
        assert_int_equal(kvwindow_init(&kv, shape, S), 0);
        assert_int_equal(kvwindow_positions_in_cache(&kv, m.cfg.rope_theta), 0);
        assert_int_equal(kvwindow_init(&kv_own, shape, S), 0);
        s.kv = &kv.base;
        own.kv = &kv_own.base;
        float logits[64], mine[64];
        int differs = 0;
        for (int p = 0; p < n; p++) {
            llama_forward(logits, &s, &m, tokens + p, p, 1, 1, 1);
            llama_forward(mine, &own, &m, tokens + p, p, 1, 1, 1);
            char what[96];
            snprintf(what, sizeof what, "S %d, positions in the cache, at position %d", S, p);
            if (S == 0 || p < 6) assert_bits(logits, mine, V, what);
            else differs |= !ops_bit_identical(logits, mine, V);
            if (S == 2) assert_close(logits, want->data + (size_t)p * V, V, 1e-4, what);
        }
        if (S == 2 && !differs) fail_msg("2 sinks: positions in the cache changed no logit after eviction");
        kvcache_free(&kv.base);
        kvcache_free(&kv_own.base);
        llama_state_free(&s);
        llama_state_free(&own);
    }
    llama_free(&m);
    fix_free(&fx);
}

// Against two references of the same rule: tests/llama_window_reference.py
// (plain Python, float64, a cache that evicts as kvdemo's does) and
// tests/llama_window_torch_reference.py (the article's PyTorch Transformer,
// one pass over the text with the window rule as its mask).
static void rotary_after_eviction(const char *fixture) {
    FixSet fx;
    fix_load(&fx, fixture);
    LlamaModel m;
    char err[256];
    if (llama_load(&m, "tests/fixtures/llama_mha.bin", ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    const FixTensor *tok = fix_get(&fx, "tokens");
    int n = tok->cols, V = m.cfg.vocab_size, tokens[64];
    assert_true(n <= 64 && n > 2 * m.cfg.max_seq_len);
    for (int i = 0; i < n; i++) tokens[i] = (int)tok->data[i];
    const char *names[2] = {"rolling_logits", "sinks_logits"};
    for (int k = 0; k < 2; k++) {
        const FixTensor *want = fix_get(&fx, names[k]);
        assert_int_equal(want->rows, n);
        assert_int_equal(want->cols, V);
        LlamaState s;
        llama_state_for_test(&s, &m, 1);
        KvWindow kv;
        KvShape shape = {.L = m.cfg.n_layers, .B = 1, .T = 6, .H = m.cfg.n_heads, .G = m.cfg.n_kv_heads,
                         .D = m.cfg.head_dim};
        assert_int_equal(kvwindow_init(&kv, shape, k == 0 ? 0 : 2), 0);
        s.kv = &kv.base;
        float logits[64];
        assert_true(V <= 64);
        for (int p = 0; p < n; p++) {
            llama_forward(logits, &s, &m, tokens + p, p, 1, 1, 1);
            char what[160];
            snprintf(what, sizeof what, "%s: %s at position %d (logit index)", fixture, names[k], p);
            assert_close(logits, want->data + (size_t)p * V, V, 1e-4, what);
        }
        kvcache_free(&kv.base);
        llama_state_free(&s);
    }
    llama_free(&m);
    fix_free(&fx);
}

static void test_rotary_after_eviction_matches_reference(void **state) {
    (void)state;
    rotary_after_eviction("tests/fixtures/llama_window.txt");
    rotary_after_eviction("tests/fixtures/llama_window_torch.txt");
}

// The generated text: stdout up to the first blank line.
static char *text_of(const char *out) {
    const char *end = strstr(out, "\n\n");
    size_t n = end ? (size_t)(end - out) : strlen(out);
    char *t = malloc(n + 1);
    assert_non_null(t);
    memcpy(t, out, n);
    t[n] = '\0';
    return t;
}

static void test_generate_past_the_context(void **state) {
    (void)state;
    const char *model = "--model data/tinyshakespeare-llama-mha.bin --temperature 0";
    char args[256];
    snprintf(args, sizeof args, "generate %s --steps 100", model);
    RunResult plain = kvdemo_run(args);
    snprintf(args, sizeof args, "generate %s --steps 100 --window 128", model);
    RunResult rolled = kvdemo_run(args);
    assert_int_equal(plain.status, 0);
    assert_int_equal(rolled.status, 0);
    char *a = text_of(plain.out), *b = text_of(rolled.out);
    if (strcmp(a, b) != 0) fail_msg("expected the cached generate's text\n%s\ngot\n%s", a, b);
    free(a), free(b);
    run_free(&plain), run_free(&rolled);
    snprintf(args, sizeof args, "generate %s --steps 300 --window 4,16", model);
    RunResult far = kvdemo_run(args);
    assert_int_equal(far.status, 0);
    if (!strstr(far.out, "positions 0 .. 306 on a sinks + window cache of 16 rows (4 sinks)"))
        fail_msg("expected positions 0 .. 306 on 16 rows, got:\n%s", far.out);
    run_free(&far);
    expect_failure("generate --window 8", 2, "needs a LLaMA-style model");
    expect_failure("generate --model data/tinyshakespeare-llama-mha.bin --window 8,8", 2, "S below W");
    expect_failure("generate --model data/tinyshakespeare-llama-mha.bin --window 1", 2, "2 to 65536");
    expect_failure("generate --model data/tinyshakespeare-llama-mha.bin --window 4,x", 2, "or S,W");
}

// generate --window W on the model trained with the window writes, past its
// context, the greedy text of the same weights with a context as long as the
// text, decoded one token at a time on its full cache under the band mask:
// the rolling cache changes nothing, and nothing is reset.
static void test_generate_window_model_past_the_context(void **state) {
    (void)state;
    enum { STEPS = 200, N = 256, WIN = 64 };
    LlamaModel m, big;
    char err[256];
    if (llama_load(&m, "data/tinyshakespeare-llama-window64.bin", ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    LlamaConfig c = m.cfg;
    assert_int_equal(c.window, WIN);
    c.max_seq_len = N;   // the context is not a weight
    if (llama_new(&big, &c, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    memcpy(big.params, m.params, sizeof(float) * m.num_params);
    memcpy(big.vocab, m.vocab, sizeof(uint32_t) * (size_t)c.vocab_size);
    int tokens[N], n = llama_encode(tokens, &big, "ROMEO:", 1, 0, N, ERR(LANG_EN, err));
    assert_true(n > 0 && n + STEPS <= N && n + STEPS > m.cfg.max_seq_len);
    LlamaState full;
    llama_state_for_test(&full, &big, 1);
    float logits[512];
    assert_true(c.vocab_size <= 512);
    for (int p = 0; p < n + STEPS - 1; p++) {
        llama_forward(logits, &full, &big, tokens + p, p, 1, 1, 1);
        if (p >= n - 1) tokens[p + 1] = ops_argmax(logits, c.vocab_size);
    }
    static char want[N * 4 + 1];
    llama_decode(want, &big, tokens, n + STEPS, sizeof want);
    char args[160];
    snprintf(args, sizeof args, "generate --model data/tinyshakespeare-llama-window64.bin --window %d "
             "--temperature 0 --steps %d", WIN, STEPS);
    RunResult r = kvdemo_run(args);
    assert_int_equal(r.status, 0);
    char *got = text_of(r.out);
    size_t i = 0;
    while (got[i] && got[i] == want[i]) i++;
    if (got[i] || want[i])
        fail_msg("kvdemo %s: byte %zu: expected '%c' (band mask on the full cache), got '%c'", args, i, want[i],
                 got[i]);
    if (!strstr(r.out, "positions 0 .. 206 on a rolling cache of 64 rows (0 sinks)"))
        fail_msg("kvdemo %s: expected positions 0 .. 206 on 64 rows, got:\n%s", args, r.out);
    free(got);
    run_free(&r);
    llama_state_free(&full);
    llama_free(&big);
    llama_free(&m);
}

// Lesson 14's ways past the window (llama_past_run, the lesson's W 64 and
// one step in 4) on the shipped models, over bos and the first 256
// characters of the validation text: every compared step's loss within 1e-4
// of tests/llama_past_torch_reference.py, the article's PyTorch code with
// each way stated without a cache (a mask, or a causal pass over the tokens
// it keeps).
static void test_ways_past_the_window_match_reference(void **state) {
    (void)state;
    enum { WIN = 64, EVERY = 4 };
    static const struct {
        const char *name;
        LlamaPast way;
        int sinks, trained;
    } ways[] = {{"reset", LLAMA_PAST_RESET, 0, 0},  {"recompute", LLAMA_PAST_RECOMPUTE, 0, 0},
                {"window", LLAMA_PAST_CACHE, 0, 0}, {"sinks1", LLAMA_PAST_CACHE, 1, 0},
                {"sinks4", LLAMA_PAST_CACHE, 4, 0}, {"trained", LLAMA_PAST_CACHE, 0, 1}};
    FixSet fx;
    fix_load(&fx, "tests/fixtures/llama_past.txt");
    const FixTensor *tok = fix_get(&fx, "tokens");
    int n = tok->cols, *tokens = malloc(sizeof(int) * (size_t)n);
    double *losses = malloc(sizeof(double) * (size_t)n);
    assert_true(tokens && losses);
    for (int i = 0; i < n; i++) tokens[i] = (int)tok->data[i];
    LlamaModel models[2];
    char err[256];
    const char *paths[2] = {"data/tinyshakespeare-llama-mha.bin", "data/tinyshakespeare-llama-window64.bin"};
    for (int k = 0; k < 2; k++)
        if (llama_load(&models[k], paths[k], ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    float logits[512];
    assert_true(models[0].cfg.vocab_size <= 512 && n > 2 * models[0].cfg.max_seq_len);
    for (size_t w = 0; w < sizeof ways / sizeof ways[0]; w++) {
        const LlamaModel *m = &models[ways[w].trained];
        const FixTensor *want = fix_get(&fx, ways[w].name);
        assert_int_equal(want->cols, (n - 2) / EVERY + 1);
        LlamaState s;
        llama_state_for_test(&s, m, 1);
        KvWindow kv;
        KvShape shape = {.L = m->cfg.n_layers, .B = 1, .T = WIN, .H = m->cfg.n_heads, .G = m->cfg.n_kv_heads,
                         .D = m->cfg.head_dim};
        if (ways[w].way == LLAMA_PAST_CACHE) {
            assert_int_equal(kvwindow_init(&kv, shape, ways[w].sinks), 0);
            s.kv = &kv.base;
        }
        llama_past_run(losses, NULL, logits, &s, m, tokens, n, ways[w].way, WIN, EVERY);
        for (int i = 0; i + 1 < n; i += EVERY) {
            double expected = want->data[i / EVERY];
            if (!(fabs(losses[i] - expected) <= 1e-4))
                fail_msg("%s: loss at position %d: expected %.6f (PyTorch), got %.6f", ways[w].name, i, expected,
                         losses[i]);
        }
        if (ways[w].way == LLAMA_PAST_CACHE) kvcache_free(&kv.base);
        s.kv = NULL;
        llama_state_free(&s);
    }
    llama_free(&models[0]);
    llama_free(&models[1]);
    free(tokens);
    free(losses);
    fix_free(&fx);
}

// Lesson 14's sink measurement: the mean attention weight on position 0 per
// layer and head, as the window cache sums it (kv.sink_weight / kv.queries),
// over the queries 0 .. 127 of the shipped model and 0 .. 63 of the window
// model, against the softmax of the article's PyTorch Attention
// (tests/llama_past_torch_reference.py), within 1e-5.
static void test_sink_shares_match_reference(void **state) {
    (void)state;
    FixSet fx;
    fix_load(&fx, "tests/fixtures/llama_past.txt");
    const FixTensor *tok = fix_get(&fx, "tokens");
    int tokens[128];
    assert_true(tok->cols >= 128);
    for (int i = 0; i < 128; i++) tokens[i] = (int)tok->data[i];
    const char *paths[2] = {"data/tinyshakespeare-llama-mha.bin", "data/tinyshakespeare-llama-window64.bin"};
    const char *names[2] = {"sink_mha", "sink_window"};
    const int queries[2] = {128, 64};
    for (int k = 0; k < 2; k++) {
        LlamaModel m;
        char err[256];
        if (llama_load(&m, paths[k], ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
        const LlamaConfig *c = &m.cfg;
        const FixTensor *want = fix_get(&fx, names[k]);
        assert_int_equal(want->rows, c->n_layers);
        assert_int_equal(want->cols, c->n_heads);
        LlamaState s;
        llama_state_for_test(&s, &m, 1);
        KvWindow kv;
        KvShape shape = {.L = c->n_layers, .B = 1, .T = queries[k], .H = c->n_heads, .G = c->n_kv_heads,
                         .D = c->head_dim};
        assert_int_equal(kvwindow_init(&kv, shape, 0), 0);
        s.kv = &kv.base;
        float logits[512];
        assert_true(c->vocab_size <= 512);
        for (int p = 0; p < queries[k]; p++) llama_forward(logits, &s, &m, tokens + p, p, 1, 1, 1);
        for (int l = 0; l < c->n_layers; l++)
            for (int h = 0; h < c->n_heads; h++) {
                double got = kv.sink_weight[(size_t)l * c->n_heads + h] / kv.queries[l];
                double expected = want->data[(size_t)l * c->n_heads + h];
                if (!(fabs(got - expected) <= 1e-5))
                    fail_msg("%s: share on position 0, layer %d head %d: expected %.6f (PyTorch), got %.6f", paths[k],
                             l, h, expected, got);
            }
        kvcache_free(&kv.base);
        s.kv = NULL;
        llama_state_free(&s);
        llama_free(&m);
    }
    fix_free(&fx);
}

// Lesson 14 sets its model against the window model it loads beside it: a
// --model trained with a window is refused before any work, in both languages.
static void test_lesson14_refuses_window_model(void **state) {
    (void)state;
    const char *args[2] = {"lesson 14 --model data/tinyshakespeare-llama-window64.bin",
                           "--lang zh lesson 14 --model data/tinyshakespeare-llama-window64.bin"};
    const char *says[2] = {"was trained with --window 64; lesson 14 takes a model trained without a window",
                           "训练时用了 --window 64；第 14 课要的是不带窗口训练的模型"};
    for (int i = 0; i < 2; i++) {
        RunResult r = kvdemo_run(args[i]);
        if (r.status != 1 || count_lines(r.err) != 1 || !strstr(r.err, says[i]) || r.out[0])
            fail_msg("kvdemo %s: expected exit 1, no output and one line \"%s\", got exit %d, %zu bytes out and \"%s\"",
                     args[i], says[i], r.status, strlen(r.out), r.err);
        run_free(&r);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rolling_cache_equals_band_recompute),
        cmocka_unit_test(test_receptive_field_grows_by_w_per_layer),
        cmocka_unit_test(test_shipped_window_model_rolls_exactly),
        cmocka_unit_test(test_band_mask_in_training),
        cmocka_unit_test(test_window_in_model_file),
        cmocka_unit_test(test_generate_past_the_context),
        cmocka_unit_test(test_rotary_after_eviction_matches_reference),
        cmocka_unit_test(test_positions_in_cache_match_reference),
        cmocka_unit_test(test_lesson14_refuses_window_model),
        cmocka_unit_test(test_generate_window_model_past_the_context),
        cmocka_unit_test(test_ways_past_the_window_match_reference),
        cmocka_unit_test(test_sink_shares_match_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
