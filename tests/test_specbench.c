// test_specbench — `kvdemo bench --draft` and `kvdemo race --draft` on the
// shipped pairs (the char GPT and its draft; the LLaMA-style model and its
// draft). No time is asserted, only what the times decide:
//
//   test_bench_verdicts_follow_the_runs  each K's verdict from its runs' min … max
//                                        (faster only when every speculative run beat
//                                        every cached one, slower the other way round,
//                                        so the same whenever they overlap); a row per K = 1..8
//   test_bench_text_table                the table's head and rows, and the sentence that
//                                        both arms wrote the target's text, en and zh
//   test_race_same_text                  race --draft: the speculative text is the one
//                                        `generate --temperature 0` writes with the target
//                                        alone, and the verdict follows x ± e
//   test_usage_errors                    a draft of the other kind, another vocabulary,
//                                        --temperature, a list of lengths, --gamma alone,
//                                        the LLaMA-style model with --paged: one line each
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPT_PAIR "--draft data/tinyshakespeare-draft.bin"
#define LLAMA_PAIR "--model data/tinyshakespeare-llama-mha.bin --draft data/tinyshakespeare-llama-draft.bin"

// The JSON line of out that holds every one of the three needles; NULL if none.
// The line is copied into buf.
static const char *line_with(const char *out, const char *a, const char *b, const char *c, char *buf, size_t size) {
    for (const char *line = out; *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        if (len < size) {
            memcpy(buf, line, len), buf[len] = '\0';
            if (strstr(buf, a) && strstr(buf, b) && strstr(buf, c)) return buf;
        }
        line += len + (eol != NULL);
    }
    return NULL;
}

// The number after "field": in line; NAN when absent.
static double number_of(const char *line, const char *field) {
    char f[48];
    snprintf(f, sizeof f, "\"%s\":", field);
    const char *at = line ? strstr(line, f) : NULL;
    return at ? strtod(at + strlen(f), NULL) : NAN;
}

// The string after "field": in line, into word ("" when absent).
static void word_of(const char *line, const char *field, char *word, size_t size) {
    char f[48];
    snprintf(f, sizeof f, "\"%s\":\"", field);
    const char *at = line ? strstr(line, f) : NULL;
    word[0] = '\0';
    if (at) {
        at += strlen(f);
        size_t n = strcspn(at, "\"");
        if (n >= size) n = size - 1;
        memcpy(word, at, n), word[n] = '\0';
    }
}

// The verdict of run K=k against its two timings (min … max, few runs).
static void expect_verdict_follows(const char *out, int k) {
    char run[32], buf[2048], v[32];
    snprintf(run, sizeof run, "\"run\":\"K=%d\"", k);
    const char *c = line_with(out, run, "\"event\":\"timing\"", "\"name\":\"cached\"", buf, sizeof buf);
    double cmin = number_of(c, "min"), cmax = number_of(c, "max");
    const char *s = line_with(out, run, "\"event\":\"timing\"", "\"name\":\"speculative\"", buf, sizeof buf);
    double smin = number_of(s, "min"), smax = number_of(s, "max");
    if (isnan(cmin) || isnan(cmax) || isnan(smin) || isnan(smax))
        fail_msg("K = %d: expected a cached and a speculative timing with min and max", k);
    const char *x = line_with(out, run, "\"event\":\"value\"", "\"name\":\"speedup\"", buf, sizeof buf);
    word_of(x, "verdict", v, sizeof v);
    // apart, few runs may still say the same (measure.h: x - e must pass 1 too)
    if (!strcmp(v, "faster") ? !(smax < cmin) : !strcmp(v, "slower") ? !(smin > cmax) : strcmp(v, "same") != 0)
        fail_msg("K = %d: verdict \"%s\" from speculative %g … %g s against cached %g … %g s", k, v, smin, smax, cmin,
                 cmax);
}

static void test_bench_verdicts_follow_the_runs(void **state) {
    (void)state;
    RunResult r = kvdemo_run("bench " LLAMA_PAIR " --repeat 2 --steps 40 --format json");
    if (r.status != 0) fail_msg("bench --draft (LLaMA): exit %d: %s", r.status, r.err);
    for (int k = 1; k <= 8; k++) expect_verdict_follows(r.out, k);
    if (!strstr(r.out, "\"name\":\"texts_identical\",\"value\":1"))
        fail_msg("bench --draft (LLaMA): expected texts_identical 1");
    run_free(&r);
    r = kvdemo_run("bench " GPT_PAIR " --gamma 3 --repeat 2 --steps 24 --format json");
    if (r.status != 0) fail_msg("bench --draft --gamma 3 (GPT): exit %d: %s", r.status, r.err);
    expect_verdict_follows(r.out, 3);
    if (strstr(r.out, "\"run\":\"K=1\"")) fail_msg("--gamma 3: expected the row of K = 3 alone");
    run_free(&r);
}

static void test_bench_text_table(void **state) {
    (void)state;
    RunResult r = kvdemo_run("bench " GPT_PAIR " --gamma 2 --repeat 2 --steps 16");
    if (r.status != 0) fail_msg("bench --draft: exit %d: %s", r.status, r.err);
    if (!strstr(r.out, "cached ms") || !strstr(r.out, "speed-up") || !strstr(r.out, " ± "))
        fail_msg("expected the table's head and a speed-up x ± e: %s", r.out);
    if (!strstr(r.out, "Both arms wrote the target's own text in every run."))
        fail_msg("expected the sentence on the texts: %s", r.out);
    // one row: K, then a verdict word at its end
    const char *row = strstr(r.out, "\n   2 ");
    if (!row) {
        fail_msg("expected the row of K = 2: %s", r.out);
        return;
    }
    const char *eol = strchr(row + 1, '\n');
    size_t n = eol ? (size_t)(eol - row) : strlen(row);
    char line[256];
    snprintf(line, sizeof line, "%.*s", (int)n, row + 1);
    if (!strstr(line, "faster") && !strstr(line, "slower") && !strstr(line, "the same within noise"))
        fail_msg("K = 2: expected a verdict word at the end of \"%s\"", line);
    run_free(&r);
    r = kvdemo_run_env("LANG=zh_CN.UTF-8", "bench " LLAMA_PAIR " --gamma 2 --repeat 2 --steps 16");
    if (r.status != 0 || !strstr(r.out, "缓存 毫秒") || !strstr(r.out, "两种方式都写出了目标模型自己的文字"))
        fail_msg("zh: status %d: %s", r.status, r.out);
    run_free(&r);
}

// The text of the "text" event of run `run` in out, into buf.
static void text_of(const char *out, const char *run, char *buf, size_t size) {
    int n;
    Event *e = events_parse(out, &n);
    const Event *t = events_find(e, n, "text", run, -1, "text");
    if (!t) fail_msg("no text event in run %s", run ? run : "(any)");
    snprintf(buf, size, "%s", t->text);
    events_free(e, n);
}

static void expect_race(const char *pair, const char *alone) {
    char args[512], want[256], got[256], buf[2048], v[32];
    snprintf(args, sizeof args, "generate %s --temperature 0 --steps 30 --format json", alone);
    RunResult g = kvdemo_run(args);
    if (g.status != 0) fail_msg("%s: exit %d: %s", args, g.status, g.err);
    text_of(g.out, NULL, want, sizeof want);
    run_free(&g);
    snprintf(args, sizeof args, "race %s --steps 30 --format json", pair);
    RunResult r = kvdemo_run(args);
    if (r.status != 0) fail_msg("%s: exit %d: %s", args, r.status, r.err);
    text_of(r.out, "speculative", got, sizeof got);
    if (strcmp(got, want)) fail_msg("%s: speculative text \"%s\", the target alone wrote \"%s\"", args, got, want);
    if (!strstr(r.out, "\"name\":\"texts_identical\",\"value\":1")) fail_msg("%s: expected texts_identical 1", args);
    const char *x = line_with(r.out, "\"event\":\"value\"", "\"name\":\"speedup\"", "\"verdict\"", buf, sizeof buf);
    double ratio = number_of(x, "value"), e = number_of(x, "error");
    word_of(x, "verdict", v, sizeof v);
    // One race: faster or slower only beyond what races apart differ by
    // (MEASURE_RACE_FLOOR = 2.5 in measure.h), else too few, or the same when x ± e holds 1.
    const char *want_v = ratio - e > 2.5 ? "faster" : ratio + e < 1 / 2.5 ? "slower" : ratio - e > 1 || ratio + e < 1 ? "too_few" : "same";
    if (isnan(ratio) || isnan(e) || strcmp(v, want_v))
        fail_msg("%s: verdict \"%s\" from %g ± %g, expected \"%s\"", args, v, ratio, e, want_v);
    run_free(&r);
}

static void test_race_same_text(void **state) {
    (void)state;
    expect_race(GPT_PAIR, "");
    expect_race(LLAMA_PAIR, "--model data/tinyshakespeare-llama-mha.bin");
    RunResult r = kvdemo_run("race " GPT_PAIR " --steps 12 --gamma 2");
    if (r.status != 0) fail_msg("race --draft: exit %d: %s", r.status, r.err);
    if (!strstr(r.out, "speculative, K = 2") || !strstr(r.out, "with the cache alone") ||
        !strstr(r.out, "Both runs wrote the same text") || !strstr(r.out, "Speculative: "))
        fail_msg("race --draft: expected both lanes and the verdict: %s", r.out);
    run_free(&r);
    // In Chinese the table says token, as every zh page does (not 词元).
    r = kvdemo_run("race " GPT_PAIR " --steps 12 --gamma 2 --lang zh");
    if (r.status != 0 || !strstr(r.out, "token/秒") || !strstr(r.out, "投机解码，K = 2") || strstr(r.out, "词元"))
        fail_msg("race --draft --lang zh: status %d, expected the table's token/秒 and no 词元: %s", r.status, r.out);
    run_free(&r);
}

static void test_usage_errors(void **state) {
    (void)state;
    expect_failure("bench --draft data/tinyshakespeare-llama-draft.bin", 1, "must be of its target's kind");
    expect_failure("race --model data/tinyshakespeare-llama-mha.bin --draft data/tinyshakespeare-draft.bin", 1,
                   "must be of its target's kind");
    expect_failure("bench --model tests/fixtures/gpt_a.kvgp " GPT_PAIR, 1, "vocabulary");
    expect_failure("race " GPT_PAIR " --temperature 0.8", 2, "--temperature 0");
    expect_failure("bench " GPT_PAIR " --steps 16,32", 2, "one length");
    expect_failure("bench --gamma 3", 2, "--gamma goes with --draft");
    expect_failure("race " GPT_PAIR " --gamma 17", 2, "--gamma");
    expect_failure("generate " LLAMA_PAIR " --paged", 2, "no paged cache kind");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_verdicts_follow_the_runs),
        cmocka_unit_test(test_bench_text_table),
        cmocka_unit_test(test_race_same_text),
        cmocka_unit_test(test_usage_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
