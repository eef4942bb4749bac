// test_gpt — the char GPT: the model file, the forward pass against numpy,
// generation against the chapter's generate, and the KV cache bit for bit.
//
// Fixtures come from tests/gpt_reference.py (the chapter's classes in numpy):
//   gpt_a.kvgp, gpt_b.kvgp  random models written by following docs/model-format.md
//   gpt_forward.txt         logits of every row of full passes
//   gpt_generate.txt        the chapter's generate with np.random.seed(42)
//   gpt_init7.kvgp          what gpt_init_random must make for seed 7
//
//   test_forward_matches_numpy        logits within 1e-4 (relative to the row's largest)
//   test_generate_matches_numpy       the same tokens and text, cached and not
//   test_cache_is_bit_identical       cached and full logits, memcmp at every step
//   test_load_rejects_*               one corrupted variant each, message checked
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "gpt.h"
#include "ops.h"

static const char *MODEL_A = "tests/fixtures/gpt_a.kvgp";
static const char *MODEL_B = "tests/fixtures/gpt_b.kvgp";
static const char *FORWARD = "tests/fixtures/gpt_forward.txt";
static const char *GENERATE = "tests/fixtures/gpt_generate.txt";

// ----------------------------------------------------------------------------
// Helpers

static void load(GptModel *m, const char *path) {
    char err[256];
    if (gpt_load(m, path, ERR(LANG_EN, err)) != 0) fail_msg("gpt_load: %s", err);
}

// A random model of this shape whose weights are large enough to matter
// (gpt_init_random's std 0.02 gives near-uniform logits): every tensor drawn,
// biases and LayerNorm parameters included.
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
            switch (t.kind) {
            case GPT_WEIGHT: t.data[j] = (float)(i < 2 ? g : g / sqrt((double)t.rows)); break;
            case GPT_NORM_WEIGHT: t.data[j] = (float)(1.0 + 0.1 * g); break;
            default: t.data[j] = (float)(0.1 * g); break;
            }
        }
    }
}

// Collects the logits of every generation step: (steps, V).
typedef struct {
    float *logits;
    int V, steps, cached_steps, full_steps;
} Recorder;

static int record_step(void *ctx, const GptStep *step) {
    Recorder *r = ctx;
    memcpy(r->logits + (size_t)step->step * r->V, step->logits, sizeof(float) * (size_t)r->V);
    r->steps = step->step + 1;
    if (step->cached) r->cached_steps++;
    else r->full_steps++;
    return 0;
}

// ----------------------------------------------------------------------------
// The model against numpy

static void test_load_fixture_models(void **state) {
    (void)state;
    GptModel m;
    load(&m, MODEL_A);
    assert_int_equal(m.cfg.V, 30);
    assert_int_equal(m.cfg.T, 16);
    assert_int_equal(m.cfg.C, 32);
    assert_int_equal(m.cfg.H, 4);
    assert_int_equal(m.cfg.L, 2);
    assert_int_equal(m.vocab[0], '\n');
    assert_int_equal(m.vocab[m.cfg.V - 1], 0x6C14);   // 气
    assert_int_equal(m.num_params, gpt_num_params(m.cfg));
    gpt_free(&m);
    load(&m, MODEL_B);
    assert_int_equal(m.cfg.H, 3);
    assert_int_equal(m.cfg.L, 1);
    gpt_free(&m);
}

// Every row t of numpy's full pass against kvdemo's pass over tokens 0..t.
static void check_forward(const char *model_path, const char *key) {
    GptModel m;
    load(&m, model_path);
    GptState s;
    assert_int_equal(gpt_state_init(&s, m.cfg), 0);
    int V = m.cfg.V, T = m.cfg.T;
    double *tok_d = malloc(sizeof(double) * (size_t)T);
    double *expected = malloc(sizeof(double) * (size_t)T * (size_t)V);
    int *tokens = malloc(sizeof(int) * (size_t)T);
    assert_true(tok_d && expected && tokens);
    // The fixture holds passes of 1, 5 and T tokens: read the lines in turn.
    FILE *f = fopen(FORWARD, "r");
    assert_non_null(f);
    char word[128];
    int n = 0, passes = 0;
    char want_tokens[64], want_logits[64];
    snprintf(want_tokens, sizeof(want_tokens), "model_%s_tokens", key);
    snprintf(want_logits, sizeof(want_logits), "model_%s_logits", key);
    while (fscanf(f, "%127s", word) == 1) {
        if (word[0] == '#') {
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n') {}
            continue;
        }
        int count;
        assert_int_equal(fscanf(f, "%d", &count), 1);
        int is_tokens = strcmp(word, want_tokens) == 0, is_logits = strcmp(word, want_logits) == 0;
        for (int i = 0; i < count; i++) {
            double v;
            assert_int_equal(fscanf(f, "%lf", &v), 1);
            if (is_tokens) tokens[i] = (int)v;
            if (is_logits) expected[i] = v;
        }
        if (is_tokens) n = count;
        if (!is_logits) continue;
        assert_int_equal(count, n * V);
        passes++;
        for (int t = 0; t < n; t++) {
            gpt_state_reset(&s);
            const float *got = gpt_forward(&s, &m, tokens, t + 1, 0);
            const double *want = expected + (size_t)t * V;
            double scale = 1.0;
            for (int v = 0; v < V; v++) scale = fmax(scale, fabs(want[v]));
            for (int v = 0; v < V; v++) {
                if (fabs(got[v] - want[v]) > 1e-4 * scale)
                    fail_msg("model %s, pass of %d tokens, row %d, logit %d: numpy %.9g, kvdemo %.9g "
                             "(difference %.3g, tolerance %.3g)",
                             key, n, t, v, want[v], (double)got[v], fabs(got[v] - want[v]), 1e-4 * scale);
            }
        }
    }
    fclose(f);
    assert_int_equal(passes, 3);
    free(tok_d);
    free(expected);
    free(tokens);
    gpt_state_free(&s);
    gpt_free(&m);
}

static void test_forward_matches_numpy(void **state) {
    (void)state;
    check_forward(MODEL_A, "a");
    check_forward(MODEL_B, "b");
}

static void check_generate(const char *model_path, const char *key, int use_cache) {
    GptModel m;
    load(&m, model_path);
    double prompt_d[64], want_tokens[256], want_text[1024];
    char name[64];
    snprintf(name, sizeof(name), "prompt_%s_utf8", key);
    int prompt_len = fixture_array(GENERATE, name, prompt_d, 63);
    char prompt[64];
    for (int i = 0; i < prompt_len; i++) prompt[i] = (char)prompt_d[i];
    prompt[prompt_len] = '\0';
    snprintf(name, sizeof(name), "model_%s_%s_tokens", key, use_cache ? "cache" : "nocache");
    int total = fixture_array(GENERATE, name, want_tokens, 256);
    snprintf(name, sizeof(name), "model_%s_%s_text_utf8", key, use_cache ? "cache" : "nocache");
    int text_len = fixture_array(GENERATE, name, want_text, 1024);

    int tokens[256];
    char err[256];
    int n_prompt = gpt_encode(tokens, &m, prompt, 256, ERR(LANG_EN, err));
    if (n_prompt < 0) fail_msg("gpt_encode: %s", err);
    GptState s;
    Sampler sampler;
    assert_int_equal(gpt_state_init(&s, m.cfg), 0);
    assert_int_equal(sampler_init(&sampler, m.cfg.V, 1.0f, 0, 42), 0);   // np.random.seed(42)
    int len = gpt_generate(tokens, &s, &m, &sampler, n_prompt, total - n_prompt, use_cache, NULL, NULL);
    assert_int_equal(len, total);
    for (int i = 0; i < total; i++)
        if (tokens[i] != (int)want_tokens[i])
            fail_msg("model %s, %s: token %d: numpy %d, kvdemo %d", key, use_cache ? "cache" : "no cache", i,
                     (int)want_tokens[i], tokens[i]);
    char text[1024];
    size_t need = gpt_decode(text, sizeof(text), &m, tokens, len);
    assert_int_equal(need, text_len);
    for (int i = 0; i < text_len; i++)
        if ((unsigned char)text[i] != (int)want_text[i])
            fail_msg("model %s: text byte %d: numpy 0x%02X, kvdemo 0x%02X", key, i, (int)want_text[i],
                     (unsigned char)text[i]);
    sampler_free(&sampler);
    gpt_state_free(&s);
    gpt_free(&m);
}

static void test_generate_matches_numpy(void **state) {
    (void)state;
    for (int use_cache = 0; use_cache <= 1; use_cache++) {
        check_generate(MODEL_A, "a", use_cache);   // 6 + 40 tokens, context 16: past it
        check_generate(MODEL_B, "b", use_cache);
    }
}

static void test_init_random_matches_numpy(void **state) {
    (void)state;
    GptModel want, got;
    load(&want, "tests/fixtures/gpt_init7.kvgp");
    char err[256];
    assert_int_equal(gpt_init_random(&got, want.cfg, want.vocab, 7, ERR(LANG_EN, err)), 0);
    for (size_t i = 0; i < want.num_params; i++)
        if (memcmp(&want.params[i], &got.params[i], sizeof(float)) != 0)
            fail_msg("parameter %zu: numpy %.9g, gpt_init_random %.9g", i, want.params[i], got.params[i]);
    gpt_free(&want);
    gpt_free(&got);
}

// ----------------------------------------------------------------------------
// The KV cache: bit for bit

// Generates steps tokens with and without the cache from the same prompt and
// seed; every step's logits must be the same bytes. With packed, the run
// without the cache uses a copy of the model whose weights gpt_pack put in
// panel order (as kvdemo generate --no-cache does), the cached run the
// model as it is; with packed = 2 the other way round. The state runs on
// pool (NULL: this thread).
static void check_cache_exact_packed(GptConfig cfg, uint32_t seed, int steps, int packed, Pool *pool) {
    GptModel m, mp;
    random_model(&m, cfg, seed);
    random_model(&mp, cfg, seed);
    if (packed) {   // 1: the run without the cache packed; 2: the cached run
        GptModel *which = packed == 1 ? &mp : &m;
        assert_int_equal(gpt_pack(which), 0);
        assert_non_null(which->packed);
    }
    GptState s;
    assert_int_equal(gpt_state_init(&s, cfg), 0);
    s.pool = pool;
    int *tokens = malloc(sizeof(int) * (size_t)(steps + 3));
    Recorder runs[2];
    for (int use_cache = 0; use_cache <= 1; use_cache++) {
        runs[use_cache] = (Recorder){malloc(sizeof(float) * (size_t)steps * (size_t)cfg.V), cfg.V, 0, 0, 0};
        assert_non_null(runs[use_cache].logits);
        int prompt[3] = {0, 1 % cfg.V, 2 % cfg.V};
        int n_prompt = cfg.T < 3 ? cfg.T : 3;
        memcpy(tokens, prompt, sizeof(prompt));
        Sampler sampler;
        assert_int_equal(sampler_init(&sampler, cfg.V, 1.0f, 0, 42), 0);
        gpt_state_reset(&s);
        int len = gpt_generate(tokens, &s, use_cache ? &m : &mp, &sampler, n_prompt, steps, use_cache, record_step,
                               &runs[use_cache]);
        assert_int_equal(len, n_prompt + steps);
        sampler_free(&sampler);
    }
    // The cached run took cached steps up to the context, then full ones.
    int n_prompt = cfg.T < 3 ? cfg.T : 3;
    int expect_cached = cfg.T - n_prompt < steps - 1 ? cfg.T - n_prompt : steps - 1;
    if (expect_cached < 0) expect_cached = 0;
    assert_int_equal(runs[1].cached_steps, expect_cached);
    assert_int_equal(runs[0].cached_steps, 0);
    for (int step = 0; step < steps; step++) {
        const float *full = runs[0].logits + (size_t)step * cfg.V, *cached = runs[1].logits + (size_t)step * cfg.V;
        if (memcmp(full, cached, sizeof(float) * (size_t)cfg.V) == 0) continue;
        int i = 0;
        while (memcmp(&full[i], &cached[i], sizeof(float)) == 0) i++;
        fail_msg("V=%d T=%d C=%d H=%d L=%d, %d threads: step %d, logit %d: without cache %.9g, with cache "
                 "%.9g (not bit-identical)",
                 cfg.V, cfg.T, cfg.C, cfg.H, cfg.L, pool_threads(pool), step, i, full[i], cached[i]);
    }
    free(runs[0].logits);
    free(runs[1].logits);
    free(tokens);
    gpt_state_free(&s);
    gpt_free(&m);
    gpt_free(&mp);
}

static void check_cache_exact(GptConfig cfg, uint32_t seed, int steps, Pool *pool) {
    check_cache_exact_packed(cfg, seed, steps, 0, pool);
    check_cache_exact_packed(cfg, seed, steps, 1, pool);
    check_cache_exact_packed(cfg, seed, steps, 2, pool);
}

static const GptConfig SHAPES[] = {
    {.V = 65, .T = 32, .C = 64, .H = 4, .L = 2},   // the tiny preset
    {.V = 7, .T = 5, .C = 12, .H = 3, .L = 1},     // heads of 4
    {.V = 20, .T = 24, .C = 40, .H = 5, .L = 3},   // C not a multiple of 16, heads of 8
    {.V = 50, .T = 19, .C = 20, .H = 2, .L = 2},   // heads of 10
    {.V = 3, .T = 1, .C = 8, .H = 1, .L = 1},      // a context of one
    {.V = 97, .T = 40, .C = 96, .H = 6, .L = 1},   // a vocabulary past two 48-column panels
};

static void test_cache_is_bit_identical(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof(SHAPES) / sizeof(SHAPES[0]); i++)
        check_cache_exact(SHAPES[i], 10 + (uint32_t)i, 2 * SHAPES[i].T + 5, NULL);   // well past the context
}

static void test_cache_is_bit_identical_with_threads(void **state) {
    (void)state;
    Pool *pool = pool_new(2);
    assert_non_null(pool);
    for (size_t i = 0; i < sizeof(SHAPES) / sizeof(SHAPES[0]); i++)
        check_cache_exact(SHAPES[i], 10 + (uint32_t)i, 2 * SHAPES[i].T + 5, pool);
    pool_free(pool);
}

// Feeding a sequence token by token (a cached step each), in chunks, or all
// at once gives the same last logits, bit for bit.
static void test_chunked_feeding_is_bit_identical(void **state) {
    (void)state;
    GptConfig cfg = {.V = 20, .T = 24, .C = 40, .H = 5, .L = 3};
    GptModel m;
    random_model(&m, cfg, 3);
    GptState s;
    assert_int_equal(gpt_state_init(&s, cfg), 0);
    int tokens[24];
    for (int i = 0; i < 24; i++) tokens[i] = (i * 7 + 3) % cfg.V;
    float full[20], one_by_one[20], chunks[20];
    memcpy(full, gpt_forward(&s, &m, tokens, 24, 0), sizeof(full));
    gpt_state_reset(&s);
    for (int i = 0; i < 24; i++) memcpy(one_by_one, gpt_forward(&s, &m, tokens + i, 1, i), sizeof(full));
    gpt_state_reset(&s);
    gpt_forward(&s, &m, tokens, 10, 0);
    gpt_forward(&s, &m, tokens + 10, 9, 10);
    memcpy(chunks, gpt_forward(&s, &m, tokens + 19, 5, 19), sizeof(full));
    assert_int_equal(s.len, 24);
    assert_memory_equal(full, one_by_one, sizeof(full));
    assert_memory_equal(full, chunks, sizeof(full));
    gpt_state_free(&s);
    gpt_free(&m);
}

// The cache holds each position's key transposed (H, D, T) and value (H, T, D)
// exactly as the key and value layers compute them.
static void test_cache_layout(void **state) {
    (void)state;
    GptConfig cfg = {.V = 7, .T = 5, .C = 12, .H = 3, .L = 1};
    GptModel m;
    random_model(&m, cfg, 4);
    GptState s;
    assert_int_equal(gpt_state_init(&s, cfg), 0);
    int tokens[3] = {1, 4, 2};
    gpt_forward(&s, &m, tokens, 3, 0);
    // Block 0's key and value of position 2, recomputed: LN1(x) @ Wk + bk.
    int C = 12, D = 4, T = 5;
    float x[12], xn[12], k[12], v[12];
    for (int c = 0; c < C; c++) x[c] = m.p.wte[2 * C + c] + m.p.wpe[2 * C + c];
    ops_layernorm(xn, NULL, NULL, x, m.p.blocks[0].ln1_w, m.p.blocks[0].ln1_b, 1, C);
    ops_matmul(k, xn, m.p.blocks[0].wk, m.p.blocks[0].bk, NULL, 1, C, C);
    ops_matmul(v, xn, m.p.blocks[0].wv, m.p.blocks[0].bv, NULL, 1, C, C);
    for (int h = 0; h < 3; h++)
        for (int d = 0; d < D; d++) {
            assert_true(s.cache.key[(h * D + d) * T + 2] == k[h * D + d]);
            assert_true(s.cache.value[(h * T + 2) * D + d] == v[h * D + d]);
        }
    gpt_state_free(&s);
    gpt_free(&m);
}

// ----------------------------------------------------------------------------
// Making, saving and loading

static void test_presets(void **state) {
    (void)state;
    GptConfig cfg;
    assert_int_equal(gpt_preset(&cfg, "seed"), 0);
    assert_true(cfg.V == 65 && cfg.T == 256 && cfg.C == 384 && cfg.H == 6 && cfg.L == 6);
    assert_int_equal(gpt_num_params(cfg), 10795841);
    assert_int_equal(gpt_preset(&cfg, "tiny"), 0);
    assert_true(cfg.V == 65 && cfg.T == 32 && cfg.C == 64 && cfg.H == 4 && cfg.L == 2);
    assert_int_equal(gpt_preset(&cfg, "huge"), -1);
    assert_int_equal(strlen(GPT_SHAKESPEARE_VOCAB), 65);
    for (int i = 1; i < 65; i++) assert_true(GPT_SHAKESPEARE_VOCAB[i - 1] < GPT_SHAKESPEARE_VOCAB[i]);
    GptModel m;
    uint32_t vocab[65];
    for (int i = 0; i < 65; i++) vocab[i] = (unsigned char)GPT_SHAKESPEARE_VOCAB[i];
    char err[256];
    assert_int_equal(gpt_preset(&cfg, "tiny"), 0);
    assert_int_equal(gpt_init_random(&m, cfg, vocab, 1, ERR(LANG_EN, err)), 0);
    assert_true(m.p.blocks[1].ln2_w[5] == 1.0f && m.p.blocks[1].b1[7] == 0.0f && m.p.head_b[3] == 0.0f);
    assert_true(m.p.wte[0] != 0.0f && fabsf(m.p.wte[0]) < 0.2f);
    GptTensor t = gpt_tensor(&m, 2 + 16 + 12);   // block 1's fc1 weight
    assert_string_equal(t.name, "blocks.1.mlp.fc1.weight");
    assert_true(t.rows == 64 && t.cols == 256 && t.data == m.p.blocks[1].w1);
    t = gpt_tensor(&m, gpt_num_tensors(cfg) - 2);
    assert_string_equal(t.name, "head.weight");
    assert_true(t.rows == 64 && t.cols == 65);
    gpt_free(&m);
}

static char tmpdir[64];

static int make_tmpdir(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/kvdemo-test-gpt-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state) {
    (void)state;
    char path[128];
    static const char *names[] = {"model.kvgp", "bad.kvgp"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", tmpdir, names[i]);
        unlink(path);
    }
    return rmdir(tmpdir);
}

static void test_save_then_load(void **state) {
    (void)state;
    GptModel m, back;
    load(&m, MODEL_A);
    char path[128], err[256];
    snprintf(path, sizeof(path), "%s/model.kvgp", tmpdir);
    if (gpt_save(&m, path, ERR(LANG_EN, err)) != 0) fail_msg("gpt_save: %s", err);
    load(&back, path);
    assert_memory_equal(&m.cfg, &back.cfg, sizeof(GptConfig));
    assert_memory_equal(m.vocab, back.vocab, sizeof(uint32_t) * (size_t)m.cfg.V);
    assert_memory_equal(m.params, back.params, sizeof(float) * m.num_params);
    // The same bytes as numpy wrote.
    FILE *a = fopen(MODEL_A, "rb"), *b = fopen(path, "rb");
    assert_true(a && b);
    int ca, cb;
    long at = 0;
    do {
        ca = fgetc(a);
        cb = fgetc(b);
        if (ca != cb) fail_msg("byte %ld: numpy wrote %d, gpt_save wrote %d", at, ca, cb);
        at++;
    } while (ca != EOF);
    fclose(a);
    fclose(b);
    // No temporary file is left beside it; a save into a missing folder fails cleanly.
    assert_int_equal(gpt_save(&m, "/nonexistent-kvdemo/model.kvgp", ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "/nonexistent-kvdemo/model.kvgp"));
    gpt_free(&m);
    gpt_free(&back);
}

// ----------------------------------------------------------------------------
// Corrupted files: each refused with a message that names the problem

static unsigned char *read_all(const char *path, long *size) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)*size + 16);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)*size, f), (size_t)*size);
    fclose(f);
    return b;
}

static void put_u32(unsigned char *b, uint32_t x) {
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(x >> (8 * i));
}

// Writes size bytes of b as a model file, loads it, and checks that the load
// fails with a message containing each of the given pieces.
static void expect_refused(const unsigned char *b, long size, const char *what, const char *piece1, const char *piece2) {
    char path[128], err[256];
    snprintf(path, sizeof(path), "%s/bad.kvgp", tmpdir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    GptModel m;
    err[0] = '\0';
    if (gpt_load(&m, path, ERR(LANG_EN, err)) == 0) fail_msg("%s: the file was accepted", what);
    if (!strstr(err, path)) fail_msg("%s: the message does not name the file: %s", what, err);
    if (!strstr(err, piece1) || (piece2 && !strstr(err, piece2)))
        fail_msg("%s: expected a message with \"%s\"%s%s%s, got: %s", what, piece1, piece2 ? " and \"" : "",
                 piece2 ? piece2 : "", piece2 ? "\"" : "", err);
    if (strchr(err, '\n')) fail_msg("%s: the message is more than one line: %s", what, err);
}

enum { OFF_VERSION = 4, OFF_V = 8, OFF_T = 12, OFF_C = 16, OFF_H = 20, OFF_L = 24, OFF_VOCAB = 28 };

static void test_load_rejects_truncated(void **state) {
    (void)state;
    long size;
    unsigned char *b = read_all(MODEL_B, &size);
    expect_refused(b, size - 1, "one byte short", "truncated", "takes 32088");
    expect_refused(b, size / 2, "half a file", "truncated", NULL);
    expect_refused(b, 10, "half a header", "truncated", "header");
    expect_refused(b, 0, "an empty file", "truncated", NULL);
    free(b);
    GptModel m;
    char err[256];
    assert_int_equal(gpt_load(&m, "tests/fixtures/no-such-model.kvgp", ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "cannot open"));
}

static void test_load_rejects_magic_and_version(void **state) {
    (void)state;
    long size;
    unsigned char *b = read_all(MODEL_B, &size);
    memcpy(b, "GGUF", 4);
    expect_refused(b, size, "wrong magic", "not a kvdemo model", "\"GGUF\"");
    memcpy(b, "KVGP", 4);
    put_u32(b + OFF_VERSION, 3);
    expect_refused(b, size, "version 3", "version 3", "reads versions 1 and 2");
    free(b);
}

// Version 2 ends with the Adler-32 of everything before it (numpy's file
// writes it with zlib.adler32): a flipped bit anywhere in the weights, or a
// damaged checksum, is refused; a version 1 file (no checksum) still loads.
static void test_load_checks_the_checksum(void **state) {
    (void)state;
    long size;
    unsigned char *b = read_all(MODEL_B, &size);
    unsigned char *orig = read_all(MODEL_B, &size);
    long first_weight = OFF_VOCAB + 4L * 11;   // MODEL_B has V = 11
    long flips[] = {first_weight, first_weight + 1000, size - 5, size / 2};
    for (int i = 0; i < 4; i++) {
        for (int bits = 1; bits <= 64; bits *= 8) {   // 1, 8 and 64 flipped bits
            memcpy(b, orig, (size_t)size);
            for (int k = 0; k < bits; k++) b[flips[i] - k / 8 * 4] ^= (unsigned char)(1u << (k % 8 == 7 ? 0 : k % 8));
            char what[64];
            snprintf(what, sizeof what, "%d bits flipped before byte %ld", bits, flips[i]);
            expect_refused(b, size, what, "checksum mismatch", "damaged");
        }
    }
    memcpy(b, orig, (size_t)size);
    b[size - 1] ^= 0x10;
    expect_refused(b, size, "a damaged checksum", "checksum mismatch", NULL);
    // version 1: the same bytes without the last 4, unchecked
    memcpy(b, orig, (size_t)size);
    put_u32(b + OFF_VERSION, 1);
    char path[128], err[256];
    snprintf(path, sizeof(path), "%s/bad.kvgp", tmpdir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, (size_t)size - 4, f), (size_t)size - 4);
    fclose(f);
    GptModel v1, v2;
    if (gpt_load(&v1, path, ERR(LANG_EN, err)) != 0) fail_msg("a version 1 file: %s", err);
    load(&v2, MODEL_B);
    assert_bits(v1.params, v2.params, (int64_t)v2.num_params, "version 1 against version 2 weights");
    gpt_free(&v1);
    gpt_free(&v2);
    free(b);
    free(orig);
}

static void test_load_rejects_bad_sizes(void **state) {
    (void)state;
    long size;
    unsigned char *b = read_all(MODEL_B, &size);
    unsigned char *orig = read_all(MODEL_B, &size);
    put_u32(b + OFF_V, 0);
    expect_refused(b, size, "V = 0", "vocabulary size V=0", "out of range");
    memcpy(b, orig, (size_t)size);
    put_u32(b + OFF_T, 0xFFFFFFFFu);
    expect_refused(b, size, "T = 2**32-1", "context T=4294967295 is out of range", NULL);
    memcpy(b, orig, (size_t)size);
    put_u32(b + OFF_C, 1u << 30);
    expect_refused(b, size, "huge C", "embedding size C=1073741824", "out of range");
    memcpy(b, orig, (size_t)size);
    put_u32(b + OFF_L, 0);
    expect_refused(b, size, "L = 0", "blocks L=0", NULL);
    memcpy(b, orig, (size_t)size);
    put_u32(b + OFF_H, 5);   // C = 24
    expect_refused(b, size, "C not divisible by H", "C=24 is not divisible by the heads H=5", NULL);
    memcpy(b, orig, (size_t)size);
    put_u32(b + OFF_V, 100000);   // in range, but the file is far too short for it
    expect_refused(b, size, "a larger V than the file holds", "truncated", "V=100000");
    memcpy(b, orig, (size_t)size);
    put_u32(b + OFF_L, 200);
    put_u32(b + OFF_C, 16384);
    put_u32(b + OFF_H, 1);
    expect_refused(b, size, "too many parameters", "parameters, more than", NULL);
    free(b);
    free(orig);
}

static void test_load_rejects_bad_vocabulary(void **state) {
    (void)state;
    long size;
    unsigned char *b = read_all(MODEL_B, &size);
    put_u32(b + OFF_VOCAB + 4 * 3, 0xD800);
    expect_refused(b, size, "a surrogate code point", "vocabulary entry 3 is 0xD800", NULL);
    put_u32(b + OFF_VOCAB + 4 * 3, 0x110000);
    expect_refused(b, size, "a code point past U+10FFFF", "vocabulary entry 3 is 0x110000", NULL);
    put_u32(b + OFF_VOCAB + 4 * 3, 'A');   // entry 2 is 'A' already
    expect_refused(b, size, "a repeated character", "U+0041 twice", NULL);
    free(b);
}

static void test_load_rejects_nan_and_trailing_bytes(void **state) {
    (void)state;
    long size;
    unsigned char *b = read_all(MODEL_B, &size);
    GptModel m;
    load(&m, MODEL_B);
    // A NaN in block 0's key weight, row 2, column 5.
    size_t at = (size_t)(m.p.blocks[0].wk - m.params) + 2 * 24 + 5;
    long offset = OFF_VOCAB + 4L * m.cfg.V + 4L * (long)at;
    unsigned char saved[4];
    memcpy(saved, b + offset, 4);
    put_u32(b + offset, 0x7FC00000u);   // a quiet NaN
    expect_refused(b, size, "a NaN weight", "blocks.0.attn.key.weight[2][5] is nan", "finite");
    put_u32(b + offset, 0xFF800000u);   // -inf
    expect_refused(b, size, "an infinite weight", "blocks.0.attn.key.weight[2][5] is -inf", NULL);
    memcpy(b + offset, saved, 4);
    put_u32(b + size - 8, 0x7F800000u);   // the last head bias, before the checksum
    expect_refused(b, size, "an infinite head bias", "head.bias[10] is inf", NULL);
    unsigned char *orig = read_all(MODEL_B, &size);
    memcpy(b, orig, (size_t)size);
    free(orig);
    memset(b + size, 0, 4);
    expect_refused(b, size + 4, "four trailing bytes", "4 trailing bytes", NULL);
    gpt_free(&m);
    free(b);
}

// A model of several MB is read and checked 2 MB at a time: a NaN in the
// last piece, or one that straddles nothing in particular, is still found and
// named; the same file without it loads and equals what was saved.
static void test_load_checks_every_piece(void **state) {
    (void)state;
    GptConfig cfg = {.V = 65, .T = 32, .C = 256, .H = 4, .L = 2};
    GptModel m;
    random_model(&m, cfg, 3);
    assert_true(m.num_params * sizeof(float) > ((size_t)3 << 21));   // more than three pieces
    char path[128], err[256];
    snprintf(path, sizeof(path), "%s/big.kvgp", tmpdir);
    if (gpt_save(&m, path, ERR(LANG_EN, err)) != 0) fail_msg("gpt_save: %s", err);
    GptModel back;
    load(&back, path);
    // read into memory of the model's own, on a 2 MB boundary (huge pages)
    assert_int_equal((uintptr_t)back.params % ((uintptr_t)2 << 20), 0);
    assert_int_equal(back.num_params, m.num_params);
    assert_bits(back.params, m.params, (int64_t)m.num_params, "a multi-piece model read back");
    gpt_free(&back);
    long size;
    unsigned char *b = read_all(path, &size);
    // block 1's fc2 weight, row 1000, column 7: past the third 2 MB piece
    size_t at = (size_t)(m.p.blocks[1].w2 - m.params) + 1000 * 256 + 7;
    assert_true(at * sizeof(float) > ((size_t)3 << 21));
    put_u32(b + OFF_VOCAB + 4 * 65 + 4 * at, 0x7FC00000u);
    expect_refused(b, size, "a NaN in a late piece", "blocks.1.mlp.fc2.weight[1000][7] is nan", NULL);
    free(b);
    gpt_free(&m);
    unlink(path);
}

// ----------------------------------------------------------------------------
// Text <-> tokens

static void test_encode_decode(void **state) {
    (void)state;
    GptModel m;
    load(&m, MODEL_A);   // vocabulary "\n !,.:?ADEMORabdehilmnorstéж天气"
    int tokens[32];
    char err[256];
    const char *text = "ROMEO:\n天气 é ж!";
    int n = gpt_encode(tokens, &m, text, 32, ERR(LANG_EN, err));
    if (n < 0) fail_msg("gpt_encode: %s", err);
    assert_int_equal(n, 14);
    assert_int_equal(m.vocab[tokens[7]], 0x5929);   // 天
    char back[64];
    assert_int_equal(gpt_decode(back, sizeof(back), &m, tokens, n), strlen(text));
    assert_string_equal(back, text);
    // Cut to fit, never in the middle of a character.
    char small[9];
    assert_int_equal(gpt_decode(small, sizeof(small), &m, tokens, n), strlen(text));
    assert_string_equal(small, "ROMEO:\n");   // 天 (3 bytes) would not fit
    assert_int_equal(gpt_decode(NULL, 0, &m, tokens, n), strlen(text));

    assert_int_equal(gpt_encode(tokens, &m, "ROMEO, X", 32, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "'X' (U+0058) at position 7"));
    assert_int_equal(gpt_encode(tokens, &m, "ROME\tO", 32, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "tab (U+0009) at position 4"));
    assert_int_equal(gpt_encode(tokens, &m, "日", 32, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "'日' (U+65E5)"));
    assert_int_equal(gpt_encode(tokens, &m, "RO\xff", 32, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "not valid UTF-8 at byte 2"));
    assert_int_equal(gpt_encode(tokens, &m, "\xed\xa0\x80", 32, ERR(LANG_EN, err)), -1);   // a surrogate
    assert_non_null(strstr(err, "not valid UTF-8"));
    assert_int_equal(gpt_encode(tokens, &m, "ROMEO", 3, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "longer than 3"));
    assert_int_equal(gpt_encode(tokens, &m, "", 3, ERR(LANG_EN, err)), 0);
    gpt_free(&m);
}

// ----------------------------------------------------------------------------
// Costs

static void test_cost(void **state) {
    (void)state;
    GptConfig cfg;
    gpt_preset(&cfg, "seed");
    GptCost full = gpt_cost(cfg, 256, 0), step = gpt_cost(cfg, 1, 255);
    // 2 * (4 C^2 + 2 C F) multiply-adds per token and block, and the head for one row.
    double per_token = 2.0 * 6 * (4.0 * 384 * 384 + 2.0 * 384 * 1536);
    assert_true(full.matmul_flops == 256 * per_token + 2.0 * 384 * 65);
    assert_true(step.matmul_flops == per_token + 2.0 * 384 * 65);
    // The last row of the full pass and the cached step both read 256 positions.
    assert_true(step.cache_bytes == 4.0 * 2 * 6 * 384 * 256);
    assert_true(full.cache_bytes == 4.0 * 2 * 6 * 384 * (256.0 * 257 / 2));
    // A cached step reads every weight once: about 43 MB.
    assert_true(step.weight_bytes > 41e6 && step.weight_bytes < 44e6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_fixture_models),
        cmocka_unit_test(test_forward_matches_numpy),
        cmocka_unit_test(test_generate_matches_numpy),
        cmocka_unit_test(test_init_random_matches_numpy),
        cmocka_unit_test(test_cache_is_bit_identical),
        cmocka_unit_test(test_cache_is_bit_identical_with_threads),
        cmocka_unit_test(test_chunked_feeding_is_bit_identical),
        cmocka_unit_test(test_cache_layout),
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_save_then_load),
        cmocka_unit_test(test_load_rejects_truncated),
        cmocka_unit_test(test_load_rejects_magic_and_version),
        cmocka_unit_test(test_load_checks_the_checksum),
        cmocka_unit_test(test_load_rejects_bad_sizes),
        cmocka_unit_test(test_load_rejects_bad_vocabulary),
        cmocka_unit_test(test_load_rejects_nan_and_trailing_bytes),
        cmocka_unit_test(test_load_checks_every_piece),
        cmocka_unit_test(test_encode_decode),
        cmocka_unit_test(test_cost),
    };
    return cmocka_run_group_tests_name("gpt", tests, make_tmpdir, remove_tmpdir);
}
