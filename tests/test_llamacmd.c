// test_llamacmd — `generate` and `eval` on a LLaMA model file that `kvdemo
// train --arch llama` wrote (on a text made here): the cached and uncached
// generations equal bit for bit (every step's logits) and so the same text,
// eval's figures those of llama_train_eval, bench's rows and race's texts
// with cached == uncached, and the char GPT's options refused on a LLaMA
// file with one line.
//
// Run from the project's root: make build/tests/test_llamacmd && ./build/tests/test_llamacmd
#include "testutil.h"

#include "llama.h"
#include "train_llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[64], data_path[128], model_path[128];

// A made-up text of 12 000 characters from a small grammar.
static void write_text(const char *path) {
    static const char *subj[] = {"the cat", "a dog", "my friend", "the king"};
    static const char *verb[] = {" sees ", " likes ", " sings to "};
    static const char *obj[] = {"the moon.\n", "a tree.\n", "her.\n"};
    FILE *f = fopen(path, "w");
    if (!f) return;
    uint64_t r = 5;
    long written = 0;
    while (written < 12000) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        written += fprintf(f, "%s%s%s", subj[(r >> 33) % 4], verb[(r >> 40) % 3], obj[(r >> 50) % 3]);
    }
    fclose(f);
}

// One GQA model for every test: H 4, G 2, trained 40 steps by the command.
static int setup(void **state) {
    (void)state;
    if (tmpdir_make(tmpdir, sizeof tmpdir, "test-llamacmd") != 0) return -1;
    snprintf(data_path, sizeof data_path, "%s/text.txt", tmpdir);
    snprintf(model_path, sizeof model_path, "%s/model.bin", tmpdir);
    write_text(data_path);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "train --arch llama --preset tiny --kv-heads 2 --iters 40 --threads 1 --data %s --out %s", data_path,
             model_path);
    RunResult r = kvdemo_run(cmd);
    int rc = r.status == 0 ? 0 : -1;
    if (rc) fprintf(stderr, "kvdemo %s: status %d: %s\n", cmd, r.status, r.err);
    run_free(&r);
    return rc;
}

static int teardown(void **state) {
    (void)state;
    return tmpdir_remove(tmpdir);
}

static void load(LlamaModel *m) {
    char err[256];
    if (llama_load(m, model_path, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
}

// Two prompts of different lengths, sampled: every step's logits with the
// cache equal those without it, bit for bit.
static void test_cached_logits_equal_uncached_bits(void **state) {
    (void)state;
    LlamaModel m;
    load(&m);
    char err[256];
    const char *prompts[] = {"the king", "a "};
    LlamaState s[2];
    LlamaGeneration g[2];
    for (int run = 0; run < 2; run++) {
        if (llama_state_init(&s[run], &m, 2, ERR(LANG_EN, err)) != 0 ||
            llama_generation_new(&g[run], &s[run], &m, ERR(LANG_EN, err)) != 0)
            fail_msg("%s", err);
        LlamaGenOptions go = {.max_gen_len = 20, .temperature = 0.8f, .top_p = 0.95f, .use_cache = run, .seed = 7};
        if (llama_generate(&g[run], &s[run], &m, prompts, 2, &go, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    }
    assert_int_equal(g[0].n_steps, g[1].n_steps);
    assert_true(g[0].n_steps > 10);
    assert_bits(g[1].logits, g[0].logits, (int64_t)g[0].n_steps * 2 * m.cfg.vocab_size,
                "logits with the cache (expected: without it)");
    for (int k = 0; k < 2; k++) assert_string_equal(g[1].text[k], g[0].text[k]);
    for (int run = 0; run < 2; run++) {
        llama_generation_free(&g[run]);
        llama_state_free(&s[run]);
    }
    llama_free(&m);
}

// The text generate prints, up to its figures ("\n-- ").
static char *generated(const char *flags) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "generate --model %s --prompt 'the cat' --steps 20 --seed 3 %s", model_path, flags);
    RunResult r = kvdemo_run(cmd);
    if (r.status != 0) fail_msg("kvdemo %s: expected status 0, got %d: %s", cmd, r.status, r.err);
    char *end = strstr(r.out, "\n-- ");
    if (!end) fail_msg("kvdemo %s: no figures line in: %s", cmd, r.out);
    *end = 0;
    char *text = strdup(r.out);
    run_free(&r);
    return text;
}

static void test_generate_same_text_with_and_without_cache(void **state) {
    (void)state;
    char *with = generated("--cache"), *without = generated("--no-cache");
    if (strncmp(with, "the cat", 7) != 0) fail_msg("expected the prompt first, got \"%s\"", with);
    assert_true(strlen(with) > 7);
    assert_string_equal(without, with);
    free(with);
    free(without);
}

static void test_eval_prints_llama_train_eval(void **state) {
    (void)state;
    LlamaModel m;
    load(&m);
    double train_loss, val_loss;
    char err[256], want[128], cmd[512];
    assert_int_equal(llama_train_eval(&m, data_path, 1, &train_loss, &val_loss, NULL, NULL, ERR(LANG_EN, err)), 0);
    llama_free(&m);
    snprintf(want, sizeof want, "train loss %.4f, validation loss %.4f", train_loss, val_loss);
    snprintf(cmd, sizeof cmd, "eval --model %s --data %s --threads 2", model_path, data_path);
    RunResult r = kvdemo_run(cmd);
    if (r.status != 0 || !strstr(r.out, want))
        fail_msg("kvdemo %s: expected status 0 and \"%s\", got %d: %s%s", cmd, want, r.status, r.out, r.err);
    run_free(&r);
}

static void test_gpt_options_refused_on_a_llama_file(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "generate --model %s --paged", model_path);
    expect_failure(cmd, 2, "--paged is the char GPT's");
    snprintf(cmd, sizeof cmd, "eval --model %s --data %s --kv-dtype int8", model_path, data_path);
    expect_failure(cmd, 2, "--kv-dtype is the char GPT's");
}

// bench on a LLaMA file (told apart by its magic): a row per length, and
// the cached and uncached runs agree (the same greedy tokens, the last
// logits bit for bit); the char GPT's --csv refused with one line.
static void test_bench_on_a_llama_file(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "bench --model %s --steps 4,8 --repeat 1 --format json", model_path);
    RunResult r = kvdemo_run(cmd);
    if (r.status != 0) fail_msg("kvdemo %s: status %d: %s", cmd, r.status, r.err);
    TableRow rows[4];
    int n = table_rows_of(r.out, "llama2c_bench", rows, 4);
    if (n != 2) fail_msg("kvdemo %s: expected 2 rows, got %d:\n%s", cmd, n, r.out);
    for (int i = 0; i < 2; i++)
        if (table_cell_number(&rows[i], 0) != 4 * (i + 1))
            fail_msg("row %d: expected length %d, got %g", i, 4 * (i + 1), table_cell_number(&rows[i], 0));
    int ne;
    Event *e = events_parse(r.out, &ne);
    const Event *same = events_find(e, ne, "count", NULL, -1, "identical");
    if (!same || same->value != 1) fail_msg("kvdemo %s: cached and uncached runs differ", cmd);
    events_free(e, ne);
    run_free(&r);
    snprintf(cmd, sizeof cmd, "bench --model %s --csv /dev/null", model_path);
    expect_failure(cmd, 2, "--csv, --svg and --train are the char GPT's");
}

// race on a LLaMA file: the two runs' table, the same text without and
// with the cache (and so the same as generate's, same seed), a speed-up.
static void test_race_on_a_llama_file(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "race --model %s --prompt 'the cat' --steps 24 --format json", model_path);
    RunResult r = kvdemo_run(cmd);
    if (r.status != 0) fail_msg("kvdemo %s: status %d: %s", cmd, r.status, r.err);
    TableRow rows[4];
    if (table_rows_of(r.out, "race", rows, 4) != 2) fail_msg("kvdemo %s: expected the race table:\n%s", cmd, r.out);
    int n;
    Event *e = events_parse(r.out, &n);
    const Event *same = events_find(e, n, "count", NULL, -1, "texts_identical");
    if (!same || same->value != 1) fail_msg("kvdemo %s: the texts differ", cmd);
    const Event *with = events_find(e, n, "text", "cache", -1, "text");
    const Event *without = events_find(e, n, "text", "no-cache", -1, "text");
    assert_non_null(with);
    assert_non_null(without);
    assert_string_equal(with->text, without->text);
    if (strncmp(with->text, "the cat", 7) || strlen(with->text) <= 7)
        fail_msg("expected \"the cat\" and more, got \"%s\"", with->text);
    assert_int_equal((int)table_cell_number(&rows[0], 1), 24);
    assert_int_equal((int)table_cell_number(&rows[1], 1), 24);
    assert_non_null(events_find(e, n, "value", NULL, -1, "speedup"));
    events_free(e, n);
    run_free(&r);
    snprintf(cmd, sizeof cmd, "race --model %s --top-k 5", model_path);
    expect_failure(cmd, 2, "--top-k is the char GPT's");
}

// race on a LLaMA file as text, past the context: the verdict that both
// runs wrote the same text, the speed-up, the context's end said, the
// text; and race's own refusals: the char GPT's options, two prompts, a
// LLaMA file cut short.
static void test_race_text_and_refusals(void **state) {
    (void)state;
    RunResult r = kvdemo_run("race --model tests/fixtures/llama_mha.bin --prompt 天气 --steps 40 --seed 5");
    static const char *const SAYS[] = {"Both runs wrote the same text, character for character.", "With the cache: ",
                                       "The context (max_seq_len 16) ended the text", "\n天气"};
    for (int i = 0; i < 4; i++)
        if (r.status != 0 || !strstr(r.out, SAYS[i]))
            fail_msg("race past the context: expected exit 0 and \"%s\", got %d: %s%s", SAYS[i], r.status, r.out,
                     r.err);
    run_free(&r);
    static const struct {
        const char *flags, *says;
        int status;
    } REFUSED[] = {
        {"--init random", "--init is the char GPT's; tests/fixtures/llama_mha.bin is a LLaMA-style model", 2},
        {"--prompt 天气 --prompt 你好", "race takes one --prompt, not 2", 2},
    };
    char cmd[512];
    for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++) {
        snprintf(cmd, sizeof cmd, "race --model tests/fixtures/llama_mha.bin %s", REFUSED[i].flags);
        expect_failure(cmd, REFUSED[i].status, REFUSED[i].says);
    }
    char cut[160];
    snprintf(cut, sizeof cut, "%s/cut.bin", tmpdir);   // the header and a little more: told a LLaMA file, then short
    FILE *in = fopen("tests/fixtures/llama_mha.bin", "rb"), *out = fopen(cut, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char head[200];
    assert_int_equal(fread(head, 1, sizeof head, in), sizeof head);
    assert_int_equal(fwrite(head, 1, sizeof head, out), sizeof head);
    fclose(in);
    assert_int_equal(fclose(out), 0);
    snprintf(cmd, sizeof cmd, "race --model %s --prompt 天气", cut);
    expect_failure(cmd, 1, cut);
    unlink(cut);
}

// generate on the T = 16 fixture past its context says where the text
// ended; --window's refusals (two prompts, --no-cache) and the char GPT's
// sampling option are one line and exit 2.
static void test_generate_context_and_refusals(void **state) {
    (void)state;
    RunResult r = kvdemo_run("generate --model tests/fixtures/llama_mha.bin --prompt 天气 --steps 30 --seed 5");
    const char *end = "-- the context (max_seq_len 16) ended the text before --steps 30";
    if (r.status != 0 || strncmp(r.out, "天气", strlen("天气")) != 0 || !strstr(r.out, end))
        fail_msg("generate past the context: expected exit 0, the text from \"天气\" and \"%s\", got %d: %s%s", end,
                 r.status, r.out, r.err);
    run_free(&r);
    expect_failure("generate --model tests/fixtures/llama_mha.bin --prompt 天气 --prompt 你好 --window 8", 2,
                   "--window takes one prompt, with the cache");
    expect_failure("generate --model tests/fixtures/llama_mha.bin --prompt 天气 --window 8 --no-cache", 2,
                   "--window takes one prompt, with the cache");
    expect_failure("generate --model tests/fixtures/llama_mha.bin --top-k 3", 2,
                   "--top-k is the char GPT's; tests/fixtures/llama_mha.bin is a LLaMA-style model");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cached_logits_equal_uncached_bits),
        cmocka_unit_test(test_generate_same_text_with_and_without_cache),
        cmocka_unit_test(test_eval_prints_llama_train_eval),
        cmocka_unit_test(test_gpt_options_refused_on_a_llama_file),
        cmocka_unit_test(test_bench_on_a_llama_file),
        cmocka_unit_test(test_race_on_a_llama_file),
        cmocka_unit_test(test_race_text_and_refusals),
        cmocka_unit_test(test_generate_context_and_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
