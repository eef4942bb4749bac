// test_llama — the LLaMA-style model of section 3.1 against the article's
// code run in PyTorch (tests/llama_reference.py wrote the fixtures), and the
// promises lessons 3 and 6.2 rest on: cached and uncached logits equal bit
// for bit, GQA equal to MHA with repeated key/value heads, files checked.
//
// Run from the project's root: make build/tests/test_llama && ./build/tests/test_llama
#include "testutil.h"

#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Logits of the C model and of PyTorch differ in summation order only.
#define TOL_LOGITS 5e-5
#define TOL_ROPE 2e-6

static void model_from_file(LlamaModel *m, const char *path) {
    char err[256];
    if (llama_load(m, path, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
}

// ---------------------------------------------------------------------------
// Rotary embeddings: precompute_freqs_cis and apply_rotary_emb

static void test_freqs_cis_matches_pytorch(void **state) {
    (void)state;
    FixSet fx;
    fix_load(&fx, "tests/fixtures/llama_rope.txt");
    const FixTensor *want = fix_get(&fx, "freqs_cis");   // (16, 4, 2)
    float got[16 * 4 * 2];
    llama_precompute_freqs_cis(got, 8, 16, 10000.0f);
    assert_close(got, want->data, 16 * 8, TOL_ROPE, "freqs_cis");
    fix_free(&fx);
}

static void test_rope_matches_pytorch(void **state) {
    (void)state;
    FixSet fx;
    fix_load(&fx, "tests/fixtures/llama_rope.txt");
    int start_pos = (int)fix_get(&fx, "start_pos")->data[0];
    float freqs_cis[16 * 4 * 2];
    llama_precompute_freqs_cis(freqs_cis, 8, 16, 10000.0f);
    // xq (2, 5, 4, 8) and xk (2, 5, 2, 8) rotated by freqs_cis[start_pos : start_pos + 5]
    struct {
        const char *in, *out;
        int nh;
    } cases[] = {{"xq", "xq_out", 4}, {"xk", "xk_out", 2}};
    for (int i = 0; i < 2; i++) {
        const FixTensor *x = fix_get(&fx, cases[i].in), *want = fix_get(&fx, cases[i].out);
        int n = x->rows * x->cols;
        float *got = malloc(sizeof(float) * (size_t)n);
        assert_non_null(got);
        memcpy(got, x->data, sizeof(float) * (size_t)n);
        for (int b = 0; b < 2; b++)
            llama_apply_rotary_emb(got + (size_t)b * 5 * cases[i].nh * 8, freqs_cis + start_pos * 8,
                                   5, cases[i].nh, 8);
        assert_close(got, want->data, n, TOL_ROPE, cases[i].out);
        free(got);
    }
    fix_free(&fx);
}

// ---------------------------------------------------------------------------
// sample_top_p

static void test_sample_top_p_matches_pytorch(void **state) {
    (void)state;
    FixSet fx;
    fix_load(&fx, "tests/fixtures/llama_top_p.txt");
    int cases = (int)fix_get(&fx, "cases")->data[0];
    assert_true(cases > 0);
    for (int i = 0; i < cases; i++) {
        char key[64];
#define GET(what) (snprintf(key, sizeof key, "case%d.%s", i, what), fix_get(&fx, key))
        const FixTensor *probs = GET("probs");
        int V = probs->cols * probs->rows;
        float p = GET("p")->data[0], u = GET("uniform")->data[0];
        int want_token = (int)GET("token")->data[0];
        const FixTensor *want_sort = GET("probs_sort"), *want_idx = GET("probs_idx");
        float sorted[64];
        int order[64];
        assert_true(V <= 64);
        int got = llama_sample_top_p(sorted, order, probs->data, p, u, V);
        float order_f[64];
        for (int k = 0; k < V; k++) order_f[k] = (float)order[k];
        snprintf(key, sizeof key, "case%d.probs_idx", i);
        assert_close(order_f, want_idx->data, V, 0.0, key);
        snprintf(key, sizeof key, "case%d.probs_sort", i);
        assert_close(sorted, want_sort->data, V, 1e-6, key);
        if (got != want_token)
            fail_msg("case%d (p %g, uniform %g): expected token %d, got %d", i, p, u, want_token,
                     got);
#undef GET
    }
    fix_free(&fx);
}

// The same seed gives the same weights; another seed, others.
static void test_init_random_is_seeded(void **state) {
    (void)state;
    LlamaModel a, b, c;
    llama_model_for_test(&a, 4, 2, 42);
    llama_model_for_test(&b, 4, 2, 42);
    llama_model_for_test(&c, 4, 2, 43);
    assert_bits(b.params, a.params, (int64_t)a.num_params, "weights of two models of seed 42");
    assert_true(memcmp(a.params, c.params, sizeof(float) * a.num_params) != 0);
    llama_free(&a);
    llama_free(&b);
    llama_free(&c);
}

// ---------------------------------------------------------------------------
// A whole model against the article's classes

static void check_model_fixture(const char *name) {
    char bin[128], txt[128], what[160];
    snprintf(bin, sizeof bin, "tests/fixtures/llama_%s.bin", name);
    snprintf(txt, sizeof txt, "tests/fixtures/llama_%s.txt", name);
    LlamaModel m;
    LlamaState st;
    model_from_file(&m, bin);
    llama_state_for_test(&st, &m, 2);
    FixSet fx;
    fix_load(&fx, txt);
    int V = m.cfg.vocab_size;

    // forward(tokens[:, 0:5], 0), then (tokens[:, 5:6], 5), then (tokens[:, 6:7], 6)
    const FixTensor *tf = fix_get(&fx, "tokens");   // (2, 7)
    int tokens[2 * 7];
    for (int i = 0; i < 14; i++) tokens[i] = (int)tf->data[i];
    struct {
        const char *key;
        int from, to;
    } calls[] = {{"logits_0_5", 0, 5}, {"logits_5_6", 5, 6}, {"logits_6_7", 6, 7}};
    float logits[2 * 64];
    assert_true(V <= 64);
    for (int i = 0; i < 3; i++) {
        llama_forward(logits, &st, &m, tokens + calls[i].from, calls[i].from, 2,
                      calls[i].to - calls[i].from, 7);
        snprintf(what, sizeof what, "%s %s", name, calls[i].key);
        assert_close(logits, fix_get(&fx, calls[i].key)->data, 2 * V, TOL_LOGITS, what);
    }

    // generate(["天气", "你好，今天"], max_gen_len=6): argmax, then top-p draws
    const char *prompts[] = {"天气", "你好，今天"};
    const char *runs[] = {"argmax", "top_p"};
    LlamaGeneration g;
    char err[256];
    if (llama_generation_new(&g, &st, &m, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    for (int r = 0; r < 2; r++) {
        char key[64];
        snprintf(key, sizeof key, "%s.temperature", runs[r]);
        LlamaGenOptions o = {.max_gen_len = 6, .use_cache = 1,
                             .temperature = fix_get(&fx, key)->data[0]};
        snprintf(key, sizeof key, "%s.top_p", runs[r]);
        o.top_p = fix_get(&fx, key)->data[0];
        snprintf(key, sizeof key, "%s.seed", runs[r]);
        o.seed = (uint64_t)fix_get(&fx, key)->data[0];
        if (llama_generate(&g, &st, &m, prompts, 2, &o, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
        snprintf(key, sizeof key, "%s.tokens", runs[r]);
        const FixTensor *want = fix_get(&fx, key);
        assert_int_equal(g.bsz * g.total_len, want->rows * want->cols);
        for (int i = 0; i < g.bsz * g.total_len; i++)
            if (g.tokens[i] != (int)want->data[i])
                fail_msg("%s %s tokens[%d][%d]: expected %d, got %d", name, runs[r],
                         i / g.total_len, i % g.total_len, (int)want->data[i], g.tokens[i]);
        snprintf(key, sizeof key, "%s.logits", runs[r]);
        want = fix_get(&fx, key);
        assert_int_equal(g.n_steps * g.bsz * V, want->rows * want->cols);
        snprintf(what, sizeof what, "%s %s logits", name, runs[r]);
        assert_close(g.logits, want->data, (int64_t)g.n_steps * g.bsz * V, TOL_LOGITS, what);
    }
    llama_generation_free(&g);
    fix_free(&fx);
    llama_state_free(&st);
    llama_free(&m);
}

static void test_mha_matches_pytorch(void **state) {
    (void)state;
    check_model_fixture("mha");
}
static void test_gqa_matches_pytorch(void **state) {
    (void)state;
    check_model_fixture("gqa");
}
static void test_mqa_matches_pytorch(void **state) {
    (void)state;
    check_model_fixture("mqa");
}

// ---------------------------------------------------------------------------
// GQA = MHA whose key/value heads repeat within each group

static void test_gqa_equals_mha_bit_for_bit(void **state) {
    (void)state;
    int kv[] = {8, 4, 2, 1};   // MHA (repeated once: itself), GQA, GQA, MQA
    int tokens[3 * 9];
    for (int i = 0; i < 27; i++) tokens[i] = 3 + (i * 37) % 100;
    for (int k = 0; k < 4; k++) {
        LlamaModel gqa, mha;
        LlamaState gqa_st, mha_st;
        llama_model_for_test(&gqa, 8, kv[k], 100 + k);
        llama_model_for_test(&mha, 8, 8, 999);
        llama_repeat_kv_heads(&mha, &gqa);
        llama_state_for_test(&gqa_st, &gqa, 4);
        llama_state_for_test(&mha_st, &mha, 4);
        int V = gqa.cfg.vocab_size;
        float a[3 * 128], b[3 * 128];
        // a prompt of 6 at 0, then three single tokens with the cache
        int steps[][2] = {{0, 6}, {6, 7}, {7, 8}, {8, 9}};
        for (int s = 0; s < 4; s++) {
            int from = steps[s][0], n = steps[s][1] - from;
            llama_forward(a, &gqa_st, &gqa, tokens + from, from, 3, n, 9);
            llama_forward(b, &mha_st, &mha, tokens + from, from, 3, n, 9);
            char what[64];
            snprintf(what, sizeof what, "n_kv_heads %d, step %d: logits", kv[k], s);
            assert_bits(a, b, 3 * V, what);
        }
        // The GQA paper's conversion: mean-pooling the repeated heads gives
        // back the grouped model (r copies of x average to x up to rounding).
        LlamaModel pooled;
        llama_model_for_test(&pooled, 8, kv[k], 5);
        llama_pool_kv_heads(&pooled, &mha);
        assert_close(pooled.params, gqa.params, (int64_t)gqa.num_params, 1e-7,
                     "pooled weights");
        llama_free(&pooled);
        llama_state_free(&gqa_st);
        llama_state_free(&mha_st);
        llama_free(&gqa);
        llama_free(&mha);
    }
}

// ---------------------------------------------------------------------------
// The cache changes the work, never the numbers

typedef struct {
    int steps, masks, max_read;
    int kept_at[8][2];   // step's kept flags for two rows
    int seqlen[8], start_pos[8], write_from[8], write_to[8], read_to[8];
    float mask_first[9];
    int scores_shape[4];
} Record;

static void record_step(const LlamaStep *s, void *ctx) {
    Record *r = ctx;
    int i = r->steps++;
    if (i >= 8) return;
    r->kept_at[i][0] = s->kept[0];
    r->kept_at[i][1] = s->bsz > 1 ? s->kept[1] : 0;
    r->seqlen[i] = s->fwd->seqlen;
    r->start_pos[i] = s->fwd->start_pos;
    r->write_from[i] = s->fwd->write_from;
    r->write_to[i] = s->fwd->write_to;
    r->read_to[i] = s->fwd->read_to;
    if (s->fwd->has_mask) {
        r->masks++;
        if (i == 0 && s->fwd->seqlen == 3) memcpy(r->mask_first, s->fwd->mask, sizeof r->mask_first);
    }
    if (i == 1) memcpy(r->scores_shape, s->fwd->scores_shape, sizeof r->scores_shape);
}

static void test_cache_equals_no_cache(void **state) {
    (void)state;
    int kv[] = {4, 2, 1};   // MHA, GQA, MQA
    const char *prompts[] = {"天气", "你好，今天不错"};
    for (int k = 0; k < 3; k++) {
        LlamaModel m;
        LlamaState with_st, without_st;
        llama_model_for_test(&m, 4, kv[k], 7);
        llama_state_for_test(&with_st, &m, 4);
        llama_state_for_test(&without_st, &m, 4);
        char err[256];
        LlamaGeneration with, without;
        if (llama_generation_new(&with, &with_st, &m, ERR(LANG_EN, err)) != 0 ||
            llama_generation_new(&without, &without_st, &m, ERR(LANG_EN, err)) != 0)
            fail_msg("%s", err);
        LlamaGenOptions o = {.max_gen_len = 12, .temperature = 0.8f, .top_p = 0.95f,
                             .use_cache = 1, .seed = 3};
        if (llama_generate(&with, &with_st, &m, prompts, 2, &o, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
        o.use_cache = 0;
        if (llama_generate(&without, &without_st, &m, prompts, 2, &o, ERR(LANG_EN, err)) != 0)
            fail_msg("%s", err);
        char what[64];
        snprintf(what, sizeof what, "n_kv_heads %d: logits of every step", kv[k]);
        assert_int_equal(with.n_steps, without.n_steps);
        assert_bits(without.logits, with.logits,
                    (int64_t)with.n_steps * with.bsz * m.cfg.vocab_size, what);
        for (int i = 0; i < with.bsz * with.total_len; i++) assert_int_equal(with.tokens[i], without.tokens[i]);
        assert_string_equal(with.text[0], without.text[0]);
        assert_string_equal(with.text[1], without.text[1]);
        // the cache feeds each position once; without it, 0..cur_pos every step
        assert_true(with.rows_computed < without.rows_computed);
        llama_generation_free(&with);
        llama_generation_free(&without);
        llama_state_free(&with_st);
        llama_state_free(&without_st);
        llama_free(&m);
    }
}

// A prompt fed in two pieces (the second at start_pos > 0 with seqlen > 1,
// where the article's (seqlen, seqlen) mask would not fit) gives the logits
// of the prompt fed at once.
static void test_prompt_in_pieces(void **state) {
    (void)state;
    LlamaModel m;
    LlamaState st;
    llama_model_for_test(&m, 4, 2, 8);
    llama_state_for_test(&st, &m, 4);
    int tokens[2 * 6] = {1, 10, 20, 30, 40, 50, 1, 60, 70, 80, 90, 99};
    int V = m.cfg.vocab_size;
    float whole[2 * 128], pieces[2 * 128];
    llama_forward(whole, &st, &m, tokens, 0, 2, 6, 6);
    llama_forward(pieces, &st, &m, tokens, 0, 2, 2, 6);
    llama_forward(pieces, &st, &m, tokens + 2, 2, 2, 4, 6);
    assert_true(st.info.has_mask);
    assert_int_equal(st.info.scores_shape[3], 6);
    // row 0 of the (4, 6) mask sees positions 0..2
    assert_true(st.info.mask[2] == 0.0f && isinf(st.info.mask[3]) && st.info.mask[3] < 0);
    assert_bits(pieces, whole, 2 * V, "logits after the prompt in two pieces");
    llama_state_free(&st);
    llama_free(&m);
}

// What lesson 3 will show: the mask at the first step only, the cache slots
// written and read, and input_text_mask keeping the longer prompt.
static void test_generate_record(void **state) {
    (void)state;
    LlamaModel m;
    LlamaState st;
    llama_model_for_test(&m, 4, 4, 9);
    llama_state_for_test(&st, &m, 4);
    LlamaGeneration g;
    char err[256];
    if (llama_generation_new(&g, &st, &m, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    Record r = {0};
    const char *prompts[] = {"天气", "你好好"};   // 3 and 4 tokens with bos
    LlamaGenOptions o = {.max_gen_len = 4, .temperature = 0.0f, .top_p = 0.95f, .use_cache = 1,
                         .hook = record_step, .hook_ctx = &r};
    if (llama_generate(&g, &st, &m, prompts, 2, &o, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    assert_int_equal(g.min_prompt_size, 3);
    assert_int_equal(g.max_prompt_size, 4);
    assert_int_equal(g.total_len, 8);          // min(32, 4 + 4)
    assert_int_equal(r.steps, 5);              // cur_pos 3 .. 7
    assert_int_equal(r.masks, 1);              // only when seqlen > 1
    // step 1: tokens[:, 0:3] at 0; the mask triu(full((3, 3), -inf), diagonal=1)
    assert_int_equal(r.seqlen[0], 3);
    assert_int_equal(r.start_pos[0], 0);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            float want = j > i ? -INFINITY : 0.0f;
            if (r.mask_first[i * 3 + j] != want)
                fail_msg("mask[%d][%d]: expected %g, got %g", i, j, want, r.mask_first[i * 3 + j]);
        }
    // step 2: tokens[:, 3:4] at 3 writes slot 3, reads 0..3
    assert_int_equal(r.seqlen[1], 1);
    assert_int_equal(r.write_from[1], 3);
    assert_int_equal(r.write_to[1], 4);
    assert_int_equal(r.read_to[1], 4);
    int want_scores[4] = {2, 4, 1, 4};
    assert_memory_equal(r.scores_shape, want_scores, sizeof want_scores);
    // step 1 writes cur_pos 3: row 1's prompt token "好" is kept, row 0 samples
    assert_int_equal(r.kept_at[0][0], 0);
    assert_int_equal(r.kept_at[0][1], 1);
    assert_int_equal(r.kept_at[1][1], 0);
    // decoding cuts at len(prompt) + max_gen_len and drops bos
    assert_int_equal(strncmp(g.text[1], "你好好", strlen("你好好")), 0);
    assert_true(strlen(g.text[0]) >= strlen("天气"));
    llama_generation_free(&g);
    llama_state_free(&st);
    llama_free(&m);
}

// ---------------------------------------------------------------------------
// Tokenizer

static void test_tokenizer(void **state) {
    (void)state;
    LlamaModel m;
    llama_model_for_test(&m, 4, 4, 1);
    int ids[16];
    char err[256];
    int n = llama_encode(ids, &m, "天气 ok", 1, 1, 16, ERR(LANG_EN, err));
    assert_int_equal(n, 7);
    assert_int_equal(ids[0], LLAMA_BOS_ID);
    assert_int_equal(ids[6], LLAMA_EOS_ID);
    char out[64];
    llama_decode(out, &m, ids, n, sizeof out);
    assert_string_equal(out, "天气 ok");
    for (int i = 0; i < 4; i++) {
        const char *need = (const char *[]){"天气", "你好", "天气真好", "今天不错"}[i];
        if (llama_encode(ids, &m, need, 1, 0, 16, ERR(LANG_EN, err)) < 0) fail_msg("%s", err);
    }
    assert_int_equal(llama_encode(ids, &m, "天猫", 1, 0, 16, ERR(LANG_EN, err)), -1);
    if (!strstr(err, "'猫'") || !strstr(err, "U+732B"))
        fail_msg("the message should name the character: %s", err);
    assert_int_equal(llama_encode(ids, &m, "a\xff", 1, 0, 16, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "UTF-8"));
    assert_int_equal(llama_encode(ids, &m, "abcdef", 1, 0, 4, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "longer than 4"));
    llama_free(&m);
}

// ---------------------------------------------------------------------------
// The model file

static char *read_all(const char *path, long *size) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)*size + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)*size, f), (size_t)*size);
    fclose(f);
    return b;
}

static void write_all(const char *path, const char *b, long size) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, (size_t)size, f), (size_t)size);
    fclose(f);
}

static void put32(char *b, uint32_t v) { memcpy(b, &v, 4); }   // the tests run little-endian

static void test_corrupt_files_refused(void **state) {
    (void)state;
    long size;
    char *good = read_all("tests/fixtures/llama_gqa.bin", &size);
    char *b = malloc((size_t)size + 8);
    assert_non_null(b);
    char path[] = "/tmp/kvdemo-llama-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    float nan = NAN;
    struct {
        const char *what;
        long size;       // bytes written
        long at;         // where to change 4 bytes (-1: nowhere)
        uint32_t value;
        const char *message;
    } cases[] = {
        {"magic", size, 0, 0x4d4c5658, "not a kvdemo LLaMA model file"},
        {"version", size, 4, 4, "version 4; this kvdemo reads versions 1, 2 and 3"},
        {"n_kv_heads 3", size, 24, 3, "not a multiple of n_kv_heads 3"},
        {"dim 0", size, 12, 0, "dim is 0"},
        {"huge vocab", size, 8, 0xffffffffu, "vocab_size"},
        {"truncated header", 20, -1, 0, "truncated header"},
        {"truncated weights", size - 4, -1, 0, "truncated"},
        {"trailing bytes", size + 4, -1, 0, "trailing bytes"},
        {"vocab[0] not 0", size, 44, 65, "vocab[0] = 65"},
        {"duplicate char", size, 44 + 4 * 4, 'a', "appears twice"},
        {"surrogate", size, 44 + 4 * 5, 0xd800, "not a Unicode character"},
        {"nan weight", size, 44 + 4 * 27 + 4 * 100, 0, "weight 100 is not a finite number"},
    };
    memcpy(&cases[11].value, &nan, 4);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(b, good, (size_t)size);
        memset(b + size, 0, 8);
        if (cases[i].at >= 0) put32(b + cases[i].at, cases[i].value);
        write_all(path, b, cases[i].size);
        LlamaModel m;
        char err[512] = "";
        if (llama_load(&m, path, ERR(LANG_EN, err)) == 0) {
            llama_free(&m);
            fail_msg("%s: the file was accepted", cases[i].what);
        }
        if (!strstr(err, cases[i].message) || !strstr(err, path) || strchr(err, '\n'))
            fail_msg("%s: expected a line with \"%s\", got \"%s\"", cases[i].what,
                     cases[i].message, err);
    }
    unlink(path);
    LlamaModel m;
    char err[512];
    assert_int_equal(llama_load(&m, "/nonexistent/model.bin", ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "cannot open"));
    free(b);
    free(good);
}

static void test_save_load_round_trip(void **state) {
    (void)state;
    LlamaModel a, b;
    llama_model_for_test(&a, 4, 2, 77);
    char path[] = "/tmp/kvdemo-llama-save-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char err[512];
    if (llama_save(&a, path, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    assert_int_equal(write_leftovers(path), 0);   // nothing left behind
    if (llama_load(&b, path, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    // Version 2 ends with the Adler-32 of the rest (zlib.adler32: the
    // fixtures of tests/llama_reference.py are version 1, which still load):
    // a flipped bit anywhere is refused, and so is a damaged checksum.
    long size;
    char *file = read_all(path, &size);
    if (size != 44 + 4L * a.cfg.vocab_size + 4L * (long)a.num_params + 4) fail_msg("version 2 file: %ld bytes", size);
    if (file[4] != 2) fail_msg("llama_save wrote version %d, expected 2", file[4]);
    long at[] = {44 + 4L * 5, 44 + 4L * a.cfg.vocab_size + 123, size - 5, size - 1};
    for (int i = 0; i < 4; i++) {
        file[at[i]] ^= 0x04;
        write_all(path, file, size);
        file[at[i]] ^= 0x04;
        LlamaModel c;
        char why[512] = "";
        if (llama_load(&c, path, ERR(LANG_EN, why)) == 0) fail_msg("a bit flipped at byte %ld: the file was accepted", at[i]);
        if (!strstr(why, "checksum mismatch"))
            fail_msg("a bit flipped at byte %ld: expected \"checksum mismatch\", got %s", at[i], why);
    }
    free(file);
    unlink(path);
    assert_memory_equal(&a.cfg, &b.cfg, sizeof a.cfg);
    assert_memory_equal(a.vocab, b.vocab, sizeof(uint32_t) * (size_t)a.cfg.vocab_size);
    assert_bits(b.params, a.params, (int64_t)a.num_params, "weights after save and load");
    llama_free(&a);
    llama_free(&b);
}

static void test_config_checked(void **state) {
    (void)state;
    LlamaConfig c = llama_config_default();
    char err[256];
    assert_int_equal(llama_config_check(&c, ERR(LANG_EN, err)), 0);
    assert_int_equal(c.head_dim, c.dim / c.n_heads);
    c.n_kv_heads = 3;
    assert_int_equal(llama_config_check(&c, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "n_kv_heads"));
    c = llama_config_default();
    c.dim = 36;   // head_dim 9: odd
    assert_int_equal(llama_config_check(&c, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "even"));
    c = llama_config_default();
    assert_int_equal(llama_cache_bytes_per_token(&c), 2 * 2 * 4 * 8 * 4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_freqs_cis_matches_pytorch),
        cmocka_unit_test(test_rope_matches_pytorch),
        cmocka_unit_test(test_sample_top_p_matches_pytorch),
        cmocka_unit_test(test_init_random_is_seeded),
        cmocka_unit_test(test_mha_matches_pytorch),
        cmocka_unit_test(test_gqa_matches_pytorch),
        cmocka_unit_test(test_mqa_matches_pytorch),
        cmocka_unit_test(test_gqa_equals_mha_bit_for_bit),
        cmocka_unit_test(test_cache_equals_no_cache),
        cmocka_unit_test(test_prompt_in_pieces),
        cmocka_unit_test(test_generate_record),
        cmocka_unit_test(test_tokenizer),
        cmocka_unit_test(test_corrupt_files_refused),
        cmocka_unit_test(test_save_load_round_trip),
        cmocka_unit_test(test_config_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
