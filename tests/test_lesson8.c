// test_lesson8 — `kvdemo lesson 8` against the article's §8 and the published
// figures of REFERENCES §3.3: GPT-3 175B (96 layers, d_model 12288, fp16) at
// b = 64, s + n = 544 holds 164,282,499,072 B = 164.3 GB = 153.0 GiB against
// 350 GB of weights (0.47); the table's cells and the crossover recomputed
// here from the formula, in text and JSON, English and Chinese.
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint64_t PER_TOKEN = 2ull * 96 * 12288 * 2;   // 2 · layers · d_model · fp16
static const double WEIGHTS = 175e9 * 2;

static double count_of(const Event *e, int n, const char *name) {
    const Event *x = events_find(e, n, "count", NULL, -1, name);
    if (!x) fail_msg("no count event %s", name);
    return x->value;
}

static void expect_u64(const char *what, uint64_t want, double got) {
    if ((double)want != got) fail_msg("%s: expected %llu, got %.0f", what, (unsigned long long)want, got);
}

static void test_json(void **state) {
    (void)state;
    int n;
    Event *e = kvdemo_json("lesson 8 --format json", &n);
    expect_u64("bytes_per_token", 4718592, count_of(e, n, "bytes_per_token"));
    expect_u64("bytes_per_token (formula)", PER_TOKEN, count_of(e, n, "bytes_per_token"));
    expect_u64("bytes", 164282499072ull, count_of(e, n, "bytes"));
    expect_u64("bytes_per_sequence", PER_TOKEN * 544, count_of(e, n, "bytes_per_sequence"));
    const Event *w = events_find(e, n, "value", NULL, -1, "weights_bytes");
    assert_non_null(w);
    if (w->value != WEIGHTS) fail_msg("weights_bytes: expected %g, got %g", WEIGHTS, w->value);
    const Event *r = events_find(e, n, "value", NULL, -1, "cache_to_weights");
    assert_non_null(r);
    if (fabs(r->value - 164282499072.0 / WEIGHTS) > 1e-6) fail_msg("cache_to_weights: expected 0.469, got %g", r->value);
    // Every cell of the table: PER_TOKEN · tokens · b.
    int cells = 0;
    for (int i = 0; i < n; i++) {
        int b, t;
        if (strcmp(e[i].event, "count") || sscanf(e[i].name, "bytes[b=%d,tokens=%d]", &b, &t) != 2) continue;
        expect_u64(e[i].name, PER_TOKEN * (uint64_t)t * (uint64_t)b, e[i].value);
        cells++;
    }
    if (cells < 4) fail_msg("expected a table of at least 4 cells, got %d", cells);
    // Lengths past GPT-3's 2048-token context (its paper's Table 2.1) are marked.
    const int lengths[] = {544, 2048, 4096, 32768};
    for (int i = 0; i < 4; i++) {
        char name[48];
        snprintf(name, sizeof name, "past_context[tokens=%d]", lengths[i]);
        expect_u64(name, lengths[i] > 2048, count_of(e, n, name));
    }
    // The cache equals the weights at b · (s + n) = weights / per token.
    expect_u64("crossover_tokens", (uint64_t)ceil(WEIGHTS / (double)PER_TOKEN), count_of(e, n, "crossover_tokens"));
    expect_u64("crossover_length_b64", (uint64_t)ceil(WEIGHTS / (double)PER_TOKEN / 64),
               count_of(e, n, "crossover_length_b64"));
    events_free(e, n);
}

static void test_text_both_languages(void **state) {
    (void)state;
    const char *needles_en[] = {"164,282,499,072 B", "164.3 GB", "153.0 GiB", "the article's unit", "350.0 GB", "0.47", "74,175",
                                "\n  4096 !", "! past GPT-3's 2048-token context", "The article: GPT-3 175B"};
    const char *needles_zh[] = {"164,282,499,072 B", "164.3 GB", "153.0 GiB", "原文用的单位", "350.0 GB", "0.47", "74,175",
                                "\n  4096 !", "! 超过了 GPT-3 的 2048 个 token 上下文", "原文大意：GPT-3 175B"};
    for (int lang = 0; lang < 2; lang++) {
        RunResult r = kvdemo_run_env(lang ? "LANG=zh_CN.UTF-8" : NULL, "lesson 8");
        if (r.status != 0) fail_msg("lesson 8 exited with %d: %s", r.status, r.err);
        for (int i = 0; i < 10; i++) {
            const char *needle = lang ? needles_zh[i] : needles_en[i];
            if (!strstr(r.out, needle)) fail_msg("lesson 8 (%s): no \"%s\" in:\n%s", lang ? "zh" : "en", needle, r.out);
        }
        if (r.err[0]) fail_msg("lesson 8 wrote to stderr: %s", r.err);
        run_free(&r);
    }
    // JSON in Chinese: the same numbers.
    int n;
    Event *e = kvdemo_json("lesson 8 --format json --lang zh", &n);
    expect_u64("zh bytes", 164282499072ull, count_of(e, n, "bytes"));
    events_free(e, n);
}

// `kvdemo list` no longer marks lessons 4, 5 and 8 "not built yet", and
// each of them runs.
static void test_list_marks_them_built(void **state) {
    (void)state;
    RunResult r = kvdemo_run("list");
    assert_int_equal(r.status, 0);
    const char *ids[] = {"4 ", "5 ", "8 "};
    for (int i = 0; i < 3; i++) {
        const char *line = r.out;
        while (line && strncmp(line, ids[i], strlen(ids[i]))) {
            line = strchr(line, '\n');
            if (line) line++;
        }
        if (!line) fail_msg("kvdemo list has no line for lesson %s", ids[i]);
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[256];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < 255 ? len : 255), line);
        if (strstr(buf, "not built yet")) fail_msg("lesson %s is still marked: %s", ids[i], buf);
    }
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_text_both_languages),
        cmocka_unit_test(test_list_marks_them_built),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
