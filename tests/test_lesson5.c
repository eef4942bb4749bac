// test_lesson5 — `kvdemo lesson 5` on the tiny preset against what the
// cache really holds: this test reserves its own GptState, fills its cache
// with NaN, feeds the prompt and then one token a step, and counts the
// numbers written — that count, × 4 bytes, must be the lesson's bytes held
// after each step; the reservation must be the state's own cache.key and
// cache.value. Real models against published bytes per token (LLaMA-2-7B
// 524,288, LLaMA-2-70B 327,680, OPT-13B 819,200), the trade table's FLOPs
// against a loop over the layer shapes; text in both languages.
#include "testutil.h"

#include "gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ARGS = "lesson 5 --init random --preset tiny --format json";

static double need(const Event *e, int n, const char *event, const char *run, int step, const char *name) {
    const Event *x = events_find(e, n, event, run, step, name);
    if (!x) fail_msg("no %s event %s (run %s, step %d)", event, name, run ? run : "(none)", step);
    return x->value;
}

static void expect_eq(const char *what, double want, double got) {
    if (want != got) fail_msg("%s: expected %.0f, got %.0f", what, want, got);
}

static void test_bytes_against_gpt_state(void **state) {
    (void)state;
    GptConfig cfg;
    assert_int_equal(gpt_preset(&cfg, "tiny"), 0);
    int n;
    Event *e = kvdemo_json(ARGS, &n);
    int L = cfg.L, C = cfg.C, T = cfg.T, p = 6;   // "ROMEO:"
    expect_eq("bytes_per_token = 2 · L · C · 4", 2.0 * L * C * 4, need(e, n, "count", NULL, -1, "bytes_per_token"));
    expect_eq("weight_bytes", 4.0 * (double)gpt_num_params(cfg), need(e, n, "count", NULL, -1, "weight_bytes"));

    // The state's own cache, filled with NaN so that every number a forward
    // pass writes can be counted.
    uint32_t vocab[65];
    for (int i = 0; i < 65; i++) vocab[i] = (unsigned char)GPT_SHAKESPEARE_VOCAB[i];
    GptModel m;
    char err[256];
    assert_int_equal(gpt_init_random(&m, cfg, vocab, 42, ERR(LANG_EN, err)), 0);
    GptState s;
    assert_int_equal(gpt_state_init(&s, cfg), 0);
    size_t per_cache = (size_t)L * T * C;   // (L, H, D, T) and (L, H, T, D)
    expect_eq("bytes_reserved (the state's cache.key and cache.value)",
              2.0 * (double)(s.cache.value - s.cache.key) * sizeof(float), need(e, n, "count", NULL, -1, "bytes_reserved"));
    expect_eq("bytes_reserved = 2 · L · T · C · 4", 2.0 * per_cache * 4, need(e, n, "count", NULL, -1, "bytes_reserved"));
    for (size_t i = 0; i < per_cache; i++) s.cache.key[i] = s.cache.value[i] = NAN;
    int tokens[64];
    for (int i = 0; i < T; i++) tokens[i] = (i * 7) % cfg.V;
    int steps = T - p + 1;
    for (int k = 0; k < steps; k++) {
        if (k == 0) gpt_forward(&s, &m, tokens, p, 0);
        else gpt_forward(&s, &m, tokens + p - 1 + k, 1, p - 1 + k);
        size_t written = 0;
        for (size_t i = 0; i < per_cache; i++) written += !isnan(s.cache.key[i]) + !isnan(s.cache.value[i]);
        const Event *held = events_find(e, n, "count", "cache", k + 1, "bytes_held");
        if (!held) fail_msg("no bytes_held at step %d", k + 1);
        if (held->value != (double)written * 4)
            fail_msg("bytes_held at step %d: expected %zu (numbers written · 4), got %.0f", k + 1, written * 4, held->value);
    }
    assert_null(events_find(e, n, "count", "cache", steps + 1, "bytes_held"));
    gpt_state_free(&s);
    gpt_free(&m);
    events_free(e, n);
}

// FLOPs of rows fed at offset..: 2 per multiply-add, weight by weight and
// cached key by cached key (as test_lesson4's count).
static double flops_by_loops(GptConfig g, int rows, int offset) {
    double f = 0;
    const double shapes[][2] = {{g.C, g.C}, {g.C, g.C}, {g.C, g.C}, {g.C, g.C}, {g.C, 4.0 * g.C}, {4.0 * g.C, g.C}};
    for (int l = 0; l < g.L; l++)
        for (int r = 0; r < rows; r++) {
            for (int w = 0; w < 6; w++) f += 2 * shapes[w][0] * shapes[w][1];
            for (int h = 0; h < g.H; h++)
                for (int key = 0; key <= offset + r; key++) f += 4.0 * (g.C / g.H);
        }
    return f + 2.0 * g.C * g.V;
}

static void test_real_models_and_trade(void **state) {
    (void)state;
    GptConfig cfg;
    gpt_preset(&cfg, "tiny");
    int n;
    Event *e = kvdemo_json(ARGS, &n);
    const struct {
        const char *name;
        double per_token, weights;
    } pub[] = {{"llama-2-7b", 524288, 7e9 * 2}, {"llama-2-70b", 327680, 70e9 * 2}, {"opt-13b", 819200, 13e9 * 2},
               {"gpt3-175b", 4718592, 175e9 * 2}};
    for (int i = 0; i < 4; i++) {
        expect_eq(pub[i].name, pub[i].per_token, need(e, n, "count", pub[i].name, -1, "bytes_per_token"));
        expect_eq(pub[i].name, ceil(pub[i].weights / pub[i].per_token), need(e, n, "count", pub[i].name, -1, "tokens_to_equal_weights"));
    }
    // Mistral's window keeps one sequence's cache below its weights.
    assert_null(events_find(e, n, "count", "mistral-7b", -1, "tokens_to_equal_weights"));
    // Past the cited contexts (REFERENCES.md: GPT-3 and OPT 2048, LLaMA-2-7B 4096, Mixtral 32768):
    // marked; a model with none cited is never marked.
    const struct { const char *name; double context, per_token, weights; } ctx[] = {
        {"gpt3-175b", 2048, 4718592, 175e9 * 2}, {"opt-13b", 2048, 819200, 13e9 * 2},
        {"llama-2-7b", 4096, 524288, 7e9 * 2},  {"mixtral-8x7b", 32768, 131072, 47e9 * 2},
        {"llama-2-70b", 0, 327680, 70e9 * 2}};
    for (int i = 0; i < 5; i++) {
        double cross = ceil(ctx[i].weights / ctx[i].per_token);
        expect_eq(ctx[i].name, ctx[i].context > 0 && cross > ctx[i].context, need(e, n, "count", ctx[i].name, -1, "past_context"));
    }
    // The char GPT's trade at t = 16: t + 1 rows recomputed against 1.
    double saved = flops_by_loops(cfg, 17, 0) - flops_by_loops(cfg, 1, 16);
    expect_eq("char-gpt flops_saved[t=16]", saved, need(e, n, "value", "char-gpt", -1, "flops_saved[t=16]"));
    expect_eq("char-gpt bytes_held[t=16]", 2.0 * cfg.L * cfg.C * 4 * 17, need(e, n, "count", "char-gpt", -1, "bytes_held[t=16]"));
    // LLaMA-2-7B at t = 512: 2 FLOPs per parameter per row saved, plus the
    // attention of 4 · layers · 4096 per cached position.
    double rows = 512, seen = 513.0 * 514 / 2 - 513;
    double want = 2 * 7e9 * rows + 4.0 * 32 * 4096 * seen;
    double got = need(e, n, "value", "llama-2-7b", -1, "flops_saved[t=512]");
    if (fabs(got - want) > 1e-6 * want) fail_msg("llama-2-7b flops_saved[t=512]: expected %g, got %g", want, got);
    expect_eq("llama-2-7b bytes_held[t=512]", 524288.0 * 513, need(e, n, "count", "llama-2-7b", -1, "bytes_held[t=512]"));
    // What each byte saves at t = 4095, 70B against 7B: not "the larger the
    // model" alone; 8x of it is GQA's 64 query heads over 8 key/value heads.
    double seen4k = 4096.0 * 4097 / 2 - 4096;
    double per7 = (2 * 7e9 * 4095 + 4.0 * 32 * 4096 * seen4k) / (524288.0 * 4096);
    double per70 = (2 * 70e9 * 4095 + 4.0 * 80 * 64 * 128 * seen4k) / (327680.0 * 4096);
    got = need(e, n, "value", NULL, -1, "flops_per_byte_ratio");
    if (fabs(got - per70 / per7) > 1e-9 * got) fail_msg("flops_per_byte_ratio: expected %g, got %g", per70 / per7, got);
    events_free(e, n);
    RunResult r = kvdemo_run("lesson 5 --init random --preset tiny");
    char want_text[160];
    snprintf(want_text, sizeof want_text, "LLaMA-2-70B saves %.0fx as much per byte as LLaMA-2-7B", per70 / per7);
    if (!strstr(r.out, want_text) || !strstr(r.out, "8x of that comes from its 64 query heads sharing 8 key/value heads"))
        fail_msg("lesson 5: expected \"%s\" and the GQA share of it", want_text);
    if (strstr(r.out, "the larger the model")) fail_msg("lesson 5 still says \"the larger the model\"");
    if (!strstr(r.out, "26,703 tokens !") || !strstr(r.out, "! marks a\ncount past the model's context"))
        fail_msg("lesson 5: expected LLaMA-2-7B's 26,703 tokens marked past its context, and the mark explained");
    run_free(&r);
}

static void test_text_both_languages(void **state) {
    (void)state;
    const char *en[] = {"1,024 B per token", "reserves all of it", "cache = weights", "never (window)", "FLOP/B", "空间换时间"};
    const char *zh[] = {"每个 token 1,024 B", "全部预留", "缓存 = 权重", "不会（窗口）", "FLOP/B", "空间换时间"};
    for (int lang = 0; lang < 2; lang++) {
        RunResult r = kvdemo_run_env(lang ? "LANG=zh_CN.UTF-8" : NULL, "lesson 5 --init random --preset tiny");
        if (r.status != 0) fail_msg("lesson 5 exited with %d: %s", r.status, r.err);
        for (int i = 0; i < 6; i++) {
            const char *needle = lang ? zh[i] : en[i];
            if (!strstr(r.out, needle)) fail_msg("lesson 5 (%s): no \"%s\" in:\n%s", lang ? "zh" : "en", needle, r.out);
        }
        run_free(&r);
    }
    // JSON in Chinese: the same numbers.
    int n;
    Event *e = kvdemo_json("lesson 5 --init random --preset tiny --format json --lang zh", &n);
    expect_eq("zh bytes_per_token", 1024, need(e, n, "count", NULL, -1, "bytes_per_token"));
    events_free(e, n);
    expect_failure("lesson 5 --init random --preset tiny --prompt ROMEOROMEOROMEOROMEOROMEOROMEOxx", 2, "context holds 32");
}

// The chart of bytes held is a table of the trace, so a document has it as
// a table (it was printed around the trace, into the document's preformatted
// text): one row per eighth of the context from the prompt on, the last one
// the whole context, 2 · L · C · 4 · T bytes.
static void test_chart_in_the_trace(void **state) {
    (void)state;
    GptConfig cfg;
    gpt_preset(&cfg, "tiny");
    RunResult r = kvdemo_run("lesson 5 --init random --preset tiny --format md");
    if (r.status != 0) fail_msg("lesson 5 --format md exited with %d: %s", r.status, r.err);
    const char *head = "| t | bytes held after the step that fills position t (█), and reserved (the whole bar) |";
    if (!strstr(r.out, head)) fail_msg("lesson 5 --format md: expected the chart's head \"%s\" in:\n%s", head, r.out);
    char last[512] = "", bytes[32];
    snprintf(last, sizeof last, "| %d | ", cfg.T - 1);
    for (int i = 0; i < 40; i++) strcat(last, "█");
    snprintf(bytes, sizeof bytes, " | %.1f kB |", 2.0 * cfg.L * cfg.C * 4 * cfg.T / 1000);
    strcat(last, bytes);
    if (!strstr(r.out, last)) fail_msg("lesson 5 --format md: expected the chart's last row \"%s\" in:\n%s", last, r.out);
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_against_gpt_state),
        cmocka_unit_test(test_real_models_and_trade),
        cmocka_unit_test(test_text_both_languages),
        cmocka_unit_test(test_chart_in_the_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
