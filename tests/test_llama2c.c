// test_llama2c — llama2.c's model files (src/model/llama2c.c) and tokenizer.bin
// (src/model/bpe.c) against tests/llama2c_reference.py, which wrote both files
// from llama2.c's published format and computed with them in PyTorch:
// encodings, logits, greedy continuations; then cached == uncached bit for
// bit, and every kind of damaged file refused with one line.
//
// Run from the project's root: make build/tests/test_llama2c && ./build/tests/test_llama2c
#include "testutil.h"

#include "bpe.h"
#include "llama.h"
#include "llama2c.h"
#include "ops.h"
#include "utf8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIX "tests/fixtures/llama2c.txt"
#define TOK "tests/fixtures/llama2c_tok.bin"
#define GQA "tests/fixtures/llama2c_gqa.bin"
#define MHA "tests/fixtures/llama2c_mha.bin"
// Logits of the C model and of PyTorch differ in summation order only.
#define TOL_LOGITS 5e-5

static void load(LlamaModel *m, const char *path) {
    char err[512];
    if (llama2c_load(m, path, TOK, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
}

// A fixture array of bytes (-1: none) as a NUL-terminated string.
static void fixture_text(char *out, size_t size, const FixSet *fx, const char *key) {
    const FixTensor *t = fix_get(fx, key);
    size_t n = 0;
    for (int i = 0; i < t->rows * t->cols && t->data[i] >= 0; i++) {
        assert_true(n + 1 < size);
        out[n++] = (char)(int)t->data[i];
    }
    out[n] = '\0';
}

static void expect_ids(const int *got, int n, const FixTensor *want, const char *what) {
    if (n != want->rows * want->cols) fail_msg("%s: expected %d tokens, got %d", what, want->rows * want->cols, n);
    for (int i = 0; i < n; i++)
        if (got[i] != (int)want->data[i])
            fail_msg("%s[%d]: expected token %d, got %d", what, i, (int)want->data[i], got[i]);
}

// ---------------------------------------------------------------------------
// The header and the weights

static void test_header_read(void **state) {
    (void)state;
    LlamaModel a, b;
    load(&a, GQA);
    load(&b, MHA);
    FixSet fx;
    fix_load(&fx, FIX);
    int V = (int)fix_get(&fx, "vocab_size")->data[0];
    const LlamaConfig *c = &a.cfg;
    assert_int_equal(c->vocab_size, V);
    assert_int_equal(c->dim, 16);
    assert_int_equal(c->n_layers, 2);
    assert_int_equal(c->n_heads, 4);
    assert_int_equal(c->n_kv_heads, 2);
    assert_int_equal(b.cfg.n_kv_heads, 4);
    assert_int_equal(c->hidden_dim, 40);
    assert_int_equal(c->max_seq_len, 24);
    // shared classifier: output (C, V) is tok_embeddings (V, C) transposed
    for (int v = 0; v < V; v++)
        for (int i = 0; i < c->dim; i++)
            if (a.p.output[(size_t)i * V + v] != a.p.tok_embeddings[(size_t)v * c->dim + i])
                fail_msg("output[%d][%d]: expected tok_embeddings[%d][%d]", i, v, v, i);
    fix_free(&fx);
    llama_free(&a);
    llama_free(&b);
}

// logits one token at a time with the cache, and of the 4 tokens as one prefill
static void check_logits(const char *path, const char *name) {
    LlamaModel m;
    LlamaState st;
    load(&m, path);
    llama_state_for_test(&st, &m, 1);
    FixSet fx;
    fix_load(&fx, FIX);
    char key[64], what[96];
    int V = m.cfg.vocab_size, tokens[8];
    snprintf(key, sizeof key, "%s.tokens", name);
    const FixTensor *tf = fix_get(&fx, key);
    int n = tf->rows * tf->cols;
    assert_true(n <= 8);
    for (int i = 0; i < n; i++) tokens[i] = (int)tf->data[i];
    float *logits = malloc(sizeof(float) * (size_t)V * n);
    assert_non_null(logits);
    for (int t = 0; t < n; t++) llama_forward(logits + (size_t)t * V, &st, &m, tokens + t, t, 1, 1, 1);
    snprintf(key, sizeof key, "%s.logits", name);
    snprintf(what, sizeof what, "%s logits (position, token)", name);
    assert_close(logits, fix_get(&fx, key)->data, (int64_t)n * V, TOL_LOGITS, what);
    llama_state_reset(&st);
    llama_forward(logits, &st, &m, tokens, 0, 1, n, n);
    snprintf(key, sizeof key, "%s.prefill", name);
    snprintf(what, sizeof what, "%s prefill logits", name);
    assert_close(logits, fix_get(&fx, key)->data, V, TOL_LOGITS, what);
    free(logits);
    fix_free(&fx);
    llama_state_free(&st);
    llama_free(&m);
}

static void test_gqa_shared_logits_match_pytorch(void **state) {
    (void)state;
    check_logits(GQA, "gqa");
}

static void test_mha_own_classifier_logits_match_pytorch(void **state) {
    (void)state;
    check_logits(MHA, "mha");
}

// The greedy continuation of "Once upon a time", token for token, with and
// without the cache, and the logits of the two runs equal bit for bit.
static void check_greedy(const char *path, const char *name) {
    LlamaModel m;
    LlamaState st;
    load(&m, path);
    llama_state_for_test(&st, &m, 1);
    FixSet fx;
    fix_load(&fx, FIX);
    char key[64];
    snprintf(key, sizeof key, "%s.greedy", name);
    const FixTensor *want = fix_get(&fx, key);
    int V = m.cfg.vocab_size, total = want->rows * want->cols, prompt = 0;
    int ids[32];
    assert_true(total <= 32);
    prompt = llama_encode(ids, &m, "Once upon a time", 1, 0, 32, ERR(LANG_EN, key));
    assert_true(prompt > 0 && prompt < total);
    float *logits[2];
    for (int run = 0; run < 2; run++) {
        logits[run] = malloc(sizeof(float) * (size_t)V * total);
        assert_non_null(logits[run]);
        llama_state_reset(&st);
        int n = prompt;
        for (int pos = prompt; pos < total; pos++) {
            float *l = logits[run] + (size_t)pos * V;
            if (run == 0) llama_forward(l, &st, &m, pos == prompt ? ids : ids + pos - 1, pos == prompt ? 0 : pos - 1,
                                        1, pos == prompt ? prompt : 1, pos);
            else llama_forward(l, &st, &m, ids, 0, 1, pos, pos);   // everything again
            ids[n++] = ops_argmax(l, V);
        }
        snprintf(key, sizeof key, "%s greedy (%s)", name, run ? "no cache" : "cache");
        expect_ids(ids, n, want, key);
    }
    assert_bits(logits[0] + (size_t)prompt * V, logits[1] + (size_t)prompt * V, (int64_t)(total - prompt) * V,
                "logits with the cache against without");
    free(logits[0]);
    free(logits[1]);
    fix_free(&fx);
    llama_state_free(&st);
    llama_free(&m);
}

static void test_gqa_greedy_and_cache_bits(void **state) {
    (void)state;
    check_greedy(GQA, "gqa");
}

static void test_mha_greedy_and_cache_bits(void **state) {
    (void)state;
    check_greedy(MHA, "mha");
}

// ---------------------------------------------------------------------------
// The tokenizer

static void test_encode_decode_match_reference(void **state) {
    (void)state;
    LlamaModel m;
    load(&m, GQA);
    FixSet fx;
    fix_load(&fx, FIX);
    int texts = (int)fix_get(&fx, "texts")->data[0];
    assert_true(texts > 0);
    for (int k = 0; k < texts; k++) {
        char key[32], text[128], want[128], got[256], err[512];
        int ids[64];
        snprintf(key, sizeof key, "text%d", k);
        fixture_text(text, sizeof text, &fx, key);
        int n = llama_encode(ids, &m, text, 1, 0, 64, ERR(LANG_EN, err));
        if (n < 0) fail_msg("text%d: %s", k, err);
        snprintf(key, sizeof key, "enc%d", k);
        expect_ids(ids, n, fix_get(&fx, key), key);
        snprintf(key, sizeof key, "dec%d", k);
        fixture_text(want, sizeof want, &fx, key);
        llama_decode(got, &m, ids, n, sizeof got);
        if (strcmp(got, want)) fail_msg("%s: expected \"%s\", got \"%s\"", key, want, got);
    }
    // eos at the end; the prompt longer than max_ids
    char err[512];
    int ids[64];
    int n = llama_encode(ids, &m, "lol", 1, 1, 64, ERR(LANG_EN, err));
    assert_true(n > 1);
    assert_int_equal(ids[n - 1], LLAMA_EOS_ID);
    assert_int_equal(llama_encode(ids, &m, "Once upon a time", 1, 0, 3, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "longer than 3 tokens"));
    assert_int_equal(llama_encode(ids, &m, "a\xff", 1, 0, 64, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "not valid UTF-8"));
    fix_free(&fx);
    llama_free(&m);
}

// A tokenizer in memory: pieces with scores, V of them.
static size_t tokenizer_bytes(unsigned char *b, int max_len, const char *const *pieces, int V) {
    size_t at = 0;
    int32_t ml = max_len;
    memcpy(b, &ml, 4), at += 4;
    for (int i = 0; i < V; i++) {
        float s = -(float)i;
        int32_t len = (int32_t)strlen(pieces[i]);
        memcpy(b + at, &s, 4), memcpy(b + at + 4, &len, 4), at += 8;
        memcpy(b + at, pieces[i], (size_t)len), at += (size_t)len;
    }
    return at;
}

// Without byte tokens, a character with no piece cannot be encoded.
static void test_unencodable_character_refused(void **state) {
    (void)state;
    static const char *const pieces[] = {"<unk>", "\n<s>\n", "\n</s>\n", " ", "a", " a"};
    unsigned char b[256];
    size_t size = tokenizer_bytes(b, 6, pieces, 6);
    Bpe t;
    char err[512];
    if (bpe_parse(&t, b, size, 6, "tok.bin", ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    int ids[16];
    assert_int_equal(bpe_encode(ids, &t, "a", 1, 0, 16, ERR(LANG_EN, err)), 2);
    assert_int_equal(ids[1], 5);   // " a"
    assert_int_equal(bpe_encode(ids, &t, "ab", 1, 0, 16, ERR(LANG_EN, err)), -1);
    if (!strstr(err, "cannot encode 'b'") || strchr(err, '\n')) fail_msg("got \"%s\"", err);
    bpe_free(&t);
}

static void test_bad_tokenizers_refused(void **state) {
    (void)state;
    static const char *const pieces[] = {"<unk>", "\n<s>\n", "\n</s>\n", " ", "a", " a"};
    unsigned char good[256], b[256];
    size_t size = tokenizer_bytes(good, 6, pieces, 6);
    float inf = INFINITY;
    int32_t minus = -1, big = 1 << 20;
    struct {
        const char *what;
        size_t size, at;   // at: where to write 4 bytes (0: nowhere)
        const void *value;
        int V;
        const char *message;
    } cases[] = {
        {"empty", 0, 0, NULL, 6, "too short"},
        {"max_token_length -1", size, 0, &minus, 6, "max_token_length -1"},
        {"max_token_length huge", size, 0, &big, 6, "max_token_length 1048576"},
        {"truncated", size - 2, 0, NULL, 6, "truncated at token 5"},
        {"fewer tokens than V", size, 0, NULL, 7, "truncated at token 6"},
        {"more tokens than V", size, 0, NULL, 5, "after the 5 tokens"},
        {"length -1", size, 8, &minus, 6, "token 0 is -1 bytes"},
        {"score inf", size, 4, &inf, 6, "token 0: its score is not a finite number"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(b, good, size);
        if (cases[i].value) memcpy(b + cases[i].at, cases[i].value, 4);
        Bpe t;
        char err[512] = "";
        if (bpe_parse(&t, b, cases[i].size, cases[i].V, "tok.bin", ERR(LANG_EN, err)) == 0) {
            bpe_free(&t);
            fail_msg("%s: accepted", cases[i].what);
        }
        if (!strstr(err, cases[i].message) || !strstr(err, "tok.bin") || strchr(err, '\n'))
            fail_msg("%s: expected a line with \"%s\", got \"%s\"", cases[i].what, cases[i].message, err);
    }
}

// ---------------------------------------------------------------------------
// Damaged checkpoints

static char *read_all(const char *path, long *size) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)*size + 8);
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

static void test_bad_checkpoints_refused(void **state) {
    (void)state;
    long size;
    char *good = read_all(GQA, &size);
    char *b = malloc((size_t)size + 8);
    assert_non_null(b);
    char path[] = "/tmp/kvdemo-llama2c-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    float nan = NAN;
    int32_t nan_bits;
    memcpy(&nan_bits, &nan, 4);
    // header: dim 0, hidden_dim 4, n_layers 8, n_heads 12, n_kv_heads 16, vocab_size 20, seq_len 24
    struct {
        const char *what;
        long size, at;   // bytes written; where to write 4 bytes (-1: nowhere)
        int32_t value;
        const char *message;
    } cases[] = {
        {"empty", 0, -1, 0, "too short for llama2.c's header"},
        {"short header", 20, -1, 0, "too short for llama2.c's header"},
        {"dim 0", size, 0, 0, "dim is 0"},
        {"n_layers -2", size, 8, -2, "n_layers is -2"},
        {"vocab INT_MIN", size, 20, INT32_MIN, "vocab_size is -2147483648"},
        {"n_heads 3", size, 12, 3, "dim 16 is not a multiple of n_heads 3"},
        {"n_kv_heads 3", size, 16, 3, "n_heads 4 is not a multiple of n_kv_heads 3"},
        {"huge dim", size, 0, 1 << 24, "dim is 16777216"},
        {"huge shape", size, 4, 1 << 17, "truncated"},
        {"seq_len huge", size, 24, 1 << 16, "truncated"},
        {"unshared flag", size, 20, -328, "truncated"},
        {"truncated weights", size - 4, -1, 0, "truncated"},
        {"trailing bytes", size + 4, -1, 0, "trailing bytes"},
        {"nan weight", size, 28 + 4 * 100, nan_bits, "token_embedding_table[100] is not a finite number"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(b, good, (size_t)size);
        memset(b + size, 0, 8);
        if (cases[i].at >= 0) memcpy(b + cases[i].at, &cases[i].value, 4);
        write_all(path, b, cases[i].size);
        LlamaModel m;
        char err[512] = "";
        if (llama2c_load(&m, path, TOK, ERR(LANG_EN, err)) == 0) {
            llama_free(&m);
            fail_msg("%s: the file was accepted", cases[i].what);
        }
        if (!strstr(err, cases[i].message) || !strstr(err, path) || strchr(err, '\n'))
            fail_msg("%s: expected a line with \"%s\", got \"%s\"", cases[i].what, cases[i].message, err);
    }
    unlink(path);
    // the tokenizer of another vocabulary: the model of 328 tokens, a file of more
    LlamaModel m;
    char err[512];
    assert_int_equal(llama2c_load(&m, GQA, GQA, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, GQA));
    assert_int_equal(llama2c_load(&m, "/nonexistent/model.bin", TOK, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "cannot open"));
    free(b);
    free(good);
}

// ---------------------------------------------------------------------------
// The commands and lessons on llama2.c's files

#define PAIR "--model " GQA " --tokenizer " TOK

// generate's greedy text is the reference's continuation, with and without
// the cache; the text before the report is the same both ways.
static void test_generate_greedy_text(void **state) {
    (void)state;
    LlamaModel m;
    load(&m, GQA);
    FixSet fx;
    fix_load(&fx, FIX);
    const FixTensor *want = fix_get(&fx, "gqa.greedy");
    int ids[32], n = want->rows * want->cols;
    for (int i = 0; i < n; i++) ids[i] = (int)want->data[i];
    char text[512], shown[1024];
    int pids[32], prompt = llama_encode(pids, &m, "Once upon a time", 1, 0, 32, ERR(LANG_EN, text));
    assert_true(prompt > 0 && prompt < n);
    llama_decode(text, &m, ids, n, sizeof text);
    utf8_shown(shown, sizeof shown, text, strlen(text));
    const char *runs[] = {"--cache", "--no-cache"};
    for (int k = 0; k < 2; k++) {
        char args[512];
        snprintf(args, sizeof args, "generate " PAIR " --prompt 'Once upon a time' --temperature 0 --steps %d %s",
                 n - prompt, runs[k]);
        RunResult r = kvdemo_run(args);
        if (r.status != 0) fail_msg("kvdemo %s: status %d: %s", args, r.status, r.err);
        char *end = strstr(r.out, "\n\n-- ");
        assert_non_null(end);
        *end = '\0';
        if (strcmp(r.out, shown)) fail_msg("%s: expected \"%s\", got \"%s\"", runs[k], shown, r.out);
        run_free(&r);
    }
    fix_free(&fx);
    llama_free(&m);
}

// The lessons and bench run on the pair, cached == uncached in lesson 3.
static void test_lessons_and_bench_run(void **state) {
    (void)state;
    const char *ok[] = {"lesson 3 " PAIR " --trace summary", "lesson 6.2 " PAIR " --steps 4 --repeat 1",
                        "lesson 6.2 --model " MHA " --tokenizer " TOK " --steps 4 --repeat 1 --lang zh",
                        "bench " PAIR " --steps 4,8 --repeat 1"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        RunResult r = kvdemo_run(ok[i]);
        if (r.status != 0) fail_msg("kvdemo %s: status %d: %s", ok[i], r.status, r.err);
        if (i == 0 && !strstr(r.out, "identical bit for bit")) fail_msg("lesson 3: no bit-for-bit verdict:\n%s", r.out);
        run_free(&r);
    }
}

// A tokenizer of the model's 328 tokens without byte tokens: a character
// with no piece is refused with one line.
static void test_commands_refuse_bad_input(void **state) {
    (void)state;
    char dir[256], tok[300], args[700];
    assert_int_equal(tmpdir_make(dir, sizeof dir, "llama2c"), 0);
    snprintf(tok, sizeof tok, "%s/tok.bin", dir);
    static char names[328][16];
    const char *pieces[328] = {"<unk>", "\n<s>\n", "\n</s>\n", " ", "a"};
    for (int i = 5; i < 328; i++) snprintf(names[i], sizeof names[i], "p%d", i), pieces[i] = names[i];
    static unsigned char b[8192];
    size_t size = tokenizer_bytes(b, 8, pieces, 328);
    write_all(tok, (const char *)b, (long)size);
    snprintf(args, sizeof args, "generate --model " GQA " --tokenizer %s --prompt ab --steps 2", tok);
    expect_failure(args, 2, "cannot encode 'b'");
    snprintf(args, sizeof args, "lesson 3 --model " GQA " --tokenizer %s --prompt ab", tok);
    expect_failure(args, 2, "cannot encode 'b'");
    expect_failure("generate --tokenizer " TOK, 2, "--tokenizer goes with --model");
    expect_failure("lesson 3 --tokenizer " TOK, 2, "--tokenizer goes with --model");
    expect_failure("bench " PAIR " --csv x.csv", 2, "are the char GPT's");
    expect_failure("generate --model " TOK " --tokenizer " TOK, 1, "bad header");
    expect_failure("lesson 6.2 --model " GQA " --tokenizer " MHA, 1, MHA);
    tmpdir_remove(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_read),
        cmocka_unit_test(test_gqa_shared_logits_match_pytorch),
        cmocka_unit_test(test_mha_own_classifier_logits_match_pytorch),
        cmocka_unit_test(test_gqa_greedy_and_cache_bits),
        cmocka_unit_test(test_mha_greedy_and_cache_bits),
        cmocka_unit_test(test_encode_decode_match_reference),
        cmocka_unit_test(test_unencodable_character_refused),
        cmocka_unit_test(test_bad_tokenizers_refused),
        cmocka_unit_test(test_bad_checkpoints_refused),
        cmocka_unit_test(test_generate_greedy_text),
        cmocka_unit_test(test_lessons_and_bench_run),
        cmocka_unit_test(test_commands_refuse_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
