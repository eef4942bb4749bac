// test_lesson4 — `kvdemo lesson 4` on the tiny preset: every step's FLOPs,
// both ways, against a count made here by looping over the layer shapes,
// weight by weight and key by key (nothing shared with the lesson's own
// count); the K/V rows n·p + n(n−1)/2 against p + n − 1 for several prompt
// lengths p and step counts n; the logits bit for bit; the timings present
// and sane (never their values); text in both languages; bad input.
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ARGS = "lesson 4 --init random --preset tiny --format json --repeat 1";

typedef struct {
    Event *e;
    int n;
} Json;

static int setup(void **state) {
    Json *j = calloc(1, sizeof *j);
    if (!j) return -1;
    j->e = kvdemo_json(ARGS, &j->n);
    *state = j;
    return 0;
}

static int teardown(void **state) {
    Json *j = *state;
    events_free(j->e, j->n);
    free(j);
    return 0;
}

static double need(const Json *j, const char *event, const char *run, int step, const char *name) {
    const Event *x = events_find(j->e, j->n, event, run, step, name);
    if (!x) fail_msg("no %s event %s (run %s, step %d)", event, name, run ? run : "(none)", step);
    return event[0] == 't' ? x->seconds : x->value;
}

static void expect_eq(const char *what, int step, double want, double got) {
    if (want != got) fail_msg("%s at step %d: expected %.0f, got %.0f", what, step, want, got);
}

// The FLOPs of feeding `rows` tokens at positions offset .. offset+rows-1 to
// a char GPT of L blocks, C channels, H heads, V characters: 2 per
// multiply-add, matrix by matrix, head by head, cached key by cached key.
typedef struct {
    double proj, attn, mlp, head;
} Count;

static Count count_by_loops(int L, int C, int H, int V, int rows, int offset) {
    const int shapes[][2] = {{C, C}, {C, C}, {C, C}, {C, C}, {C, 4 * C}, {4 * C, C}};   // Wq Wk Wv Wo W1 W2
    int D = C / H;
    Count c = {0};
    for (int l = 0; l < L; l++)
        for (int r = 0; r < rows; r++) {
            for (int w = 0; w < 6; w++) {
                double madds = (double)shapes[w][0] * shapes[w][1];
                if (w < 4) c.proj += 2 * madds;
                else c.mlp += 2 * madds;
            }
            int pos = offset + r;
            for (int h = 0; h < H; h++)
                for (int key = 0; key <= pos; key++) c.attn += 2.0 * D + 2.0 * D;   // q·k, then w·v
        }
    c.head = 2.0 * C * V;   // the last row's logits only
    return c;
}

static void test_flops_counted_each_step(void **state) {
    const Json *j = *state;
    int L = (int)need(j, "count", NULL, -1, "n_layer"), C = (int)need(j, "count", NULL, -1, "n_embd");
    int H = (int)need(j, "count", NULL, -1, "n_head"), V = (int)need(j, "count", NULL, -1, "vocab_size");
    int T = (int)need(j, "count", NULL, -1, "context"), p = (int)need(j, "count", NULL, -1, "prompt_tokens");
    int steps = (int)need(j, "count", NULL, -1, "steps");
    // The tiny preset is T 32, C 64, H 4, L 2 over tinyshakespeare's 65 characters.
    assert_int_equal(L, 2);
    assert_int_equal(C, 64);
    assert_int_equal(H, 4);
    assert_int_equal(T, 32);
    assert_int_equal(V, 65);
    assert_int_equal(p, 6);   // "ROMEO:"
    assert_int_equal(steps, T - p + 1);   // to the end of the context: the last step feeds T - 1
    const char *runs[2] = {"no-cache", "cache"};
    for (int c = 0; c < 2; c++) {
        double cum = 0;
        for (int k = 0; k < steps; k++) {
            int t = p - 1 + k;
            int rows = c == 0 || k == 0 ? t + 1 : 1, offset = c == 0 || k == 0 ? 0 : t;
            Count want = count_by_loops(L, C, H, V, rows, offset);
            int step = k + 1;
            expect_eq("position", step, t, need(j, "count", runs[c], step, "position"));
            expect_eq(c ? "cache rows" : "no-cache rows", step, rows, need(j, "count", runs[c], step, "rows"));
            expect_eq("proj_flops", step, want.proj, need(j, "count", runs[c], step, "proj_flops"));
            expect_eq("attn_flops", step, want.attn, need(j, "count", runs[c], step, "attn_flops"));
            expect_eq("mlp_flops", step, want.mlp, need(j, "count", runs[c], step, "mlp_flops"));
            expect_eq("head_flops", step, want.head, need(j, "count", runs[c], step, "head_flops"));
            double total = want.proj + want.attn + want.mlp + want.head;
            cum += total;
            expect_eq("flops", step, total, need(j, "count", runs[c], step, "flops"));
            expect_eq("flops_total", step, cum, need(j, "count", runs[c], step, "flops_total"));
        }
        expect_eq(c ? "cache flops_total" : "no-cache flops_total", 0, cum, need(j, "count", runs[c], 0, "flops_total"));
    }
    // With the cache only the attention grows with t: every cached step
    // after the first has the same projections and MLP.
    double proj2 = need(j, "count", "cache", 2, "proj_flops"), proj_last = need(j, "count", "cache", steps, "proj_flops");
    expect_eq("cache proj_flops flat", steps, proj2, proj_last);
    assert_true(need(j, "count", "cache", steps, "attn_flops") > need(j, "count", "cache", 2, "attn_flops"));
}

// K/V rows over n steps after a p-token prompt.
static void test_row_formulas(void **state) {
    (void)state;
    const struct {
        const char *prompt;
        int p, n;
    } cases[] = {{"R", 1, 5}, {"ROMEO:", 6, 10}, {"First Citizen:", 14, 19}, {"ROMEO:", 6, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[160];
        snprintf(args, sizeof args, "lesson 4 --init random --preset tiny --format json --repeat 1 --prompt \"%s\" --steps %d",
                 cases[i].prompt, cases[i].n);
        Json j;
        j.e = kvdemo_json(args, &j.n);
        int64_t p = cases[i].p, n = cases[i].n;
        expect_eq("prompt_tokens", 0, (double)p, need(&j, "count", NULL, -1, "prompt_tokens"));
        expect_eq("steps", 0, (double)n, need(&j, "count", NULL, -1, "steps"));
        // Without the cache step k feeds p + k rows: n·p + n(n−1)/2 in all.
        expect_eq("no-cache rows_total", 0, (double)(n * p + n * (n - 1) / 2), need(&j, "count", "no-cache", 0, "rows_total"));
        // With it the prompt, then one row a step: p + n − 1.
        expect_eq("cache rows_total", 0, (double)(p + n - 1), need(&j, "count", "cache", 0, "rows_total"));
        // p = 1 is lesson 7's n(n+1)/2 against n.
        if (p == 1) {
            expect_eq("p = 1: n(n+1)/2", 0, (double)(n * (n + 1) / 2), need(&j, "count", "no-cache", 0, "rows_total"));
            expect_eq("p = 1: n", 0, (double)n, need(&j, "count", "cache", 0, "rows_total"));
        }
        events_free(j.e, j.n);
    }
}

static void test_timings_and_logits(void **state) {
    const Json *j = *state;
    int timed = 0;
    for (int i = 0; i < j->n; i++) {
        const Event *x = &j->e[i];
        int t;
        if (strcmp(x->event, "timing") || sscanf(x->name, "per_token[t=%d]", &t) != 1) continue;
        if (!(x->seconds > 0 && isfinite(x->seconds)))
            fail_msg("%s %s: expected a positive time, got %g", x->run, x->name, x->seconds);
        timed++;
    }
    // 16 and 31 at least, both ways.
    if (timed < 4) fail_msg("expected per_token timings at 2 or more positions both ways, got %d", timed);
    assert_true(need(j, "timing", "no-cache", 0, "per_token[t=16]") > 0);
    assert_true(need(j, "timing", "cache", 0, "per_token[t=31]") > 0);
    double speedup = need(j, "value", NULL, 0, "speedup[t=31]");
    if (!(speedup > 0 && isfinite(speedup))) fail_msg("speedup[t=31]: expected a positive ratio, got %g", speedup);
    const Event *cmp = events_find(j->e, j->n, "compare", NULL, -1, "logits");
    assert_non_null(cmp);
    if (cmp->identical != 1) fail_msg("logits: expected identical with and without the cache, max diff %g", cmp->max_abs_diff);
}

static void test_prefill_and_decode(void **state) {
    const Json *j = *state;
    int L = 2, C = 64, H = 4, V = 65, p = 6, T = 32;
    struct {
        const char *run;
        int rows, offset;
    } kinds[] = {{"prefill", p, 0}, {"prefill-context", T, 0}, {"decode", 1, T - 1}};
    double intensity[3];
    for (int k = 0; k < 3; k++) {
        Count c = count_by_loops(L, C, H, V, kinds[k].rows, kinds[k].offset);
        expect_eq(kinds[k].run, 0, c.proj + c.attn + c.mlp + c.head, need(j, "count", kinds[k].run, 0, "flops"));
        expect_eq(kinds[k].run, 0, kinds[k].rows, need(j, "count", kinds[k].run, 0, "rows"));
        double wb = need(j, "count", kinds[k].run, 0, "weight_bytes");
        intensity[k] = need(j, "value", kinds[k].run, 0, "flop_per_byte");
        if (fabs(intensity[k] - (c.proj + c.attn + c.mlp + c.head) / wb) > 1e-6 * intensity[k])
            fail_msg("%s flop_per_byte: expected %g, got %g", kinds[k].run, (c.proj + c.attn + c.mlp + c.head) / wb, intensity[k]);
        double gflops = need(j, "value", kinds[k].run, 0, "gflop_per_s"), gbs = need(j, "value", kinds[k].run, 0, "gb_per_s");
        if (!(gflops > 0 && isfinite(gflops) && gbs > 0 && isfinite(gbs)))
            fail_msg("%s: expected positive GFLOP/s and GB/s, got %g and %g", kinds[k].run, gflops, gbs);
    }
    // Decode does about 2 FLOPs per 4-byte weight; many rows reuse each weight.
    if (!(intensity[2] < 1 && intensity[1] > 10 * intensity[2]))
        fail_msg("expected decode < 1 FLOP/B and a 32-row step > 10x that, got %g and %g", intensity[2], intensity[1]);
}

// What a cached step reads of the weights, tensor by tensor (the chapter's
// model: per block ln1, query, key, value, output, ln2, fc1, fc2; then ln_f,
// the head, and one row of each embedding): the decode row's weight_bytes,
// and the figure the sentence under the table gives, in both languages (it
// once gave every parameter, embeddings whole, beside the table's figure);
// bench's sentence on a cached step's weights gives the same figure.
static double decode_weight_bytes(int L, int C, int V) {
    double block = 2.0 * C + 4 * ((double)C * C + C) + 2.0 * C + ((double)C * 4 * C + 4 * C) + (4.0 * C * C + C);
    return 4 * (L * block + 2.0 * C + (double)C * V + V + C + C);
}

static void test_decode_reads_the_tables_weights(void **state) {
    const Json *j = *state;
    double want = decode_weight_bytes(2, 64, 65);
    expect_eq("decode weight_bytes", 0, want, need(j, "count", "decode", 0, "weight_bytes"));
    char mb[32];
    snprintf(mb, sizeof mb, "%.2f MB", want * 1e-6);
    const char *says[2] = {"A cached step (decode) reads ", "使用缓存的一步（解码）要读取 "};
    for (int lang = 0; lang < 2; lang++) {
        RunResult r = kvdemo_run(lang ? "lesson 4 --init random --preset tiny --repeat 1 --lang zh"
                                      : "lesson 4 --init random --preset tiny --repeat 1 --lang en");
        if (r.status != 0) fail_msg("lesson 4 exited with %d: %s", r.status, r.err);
        const char *at = strstr(r.out, says[lang]);
        if (!at) fail_msg("lesson 4 (%s): no \"%s\" in:\n%s", lang ? "zh" : "en", says[lang], r.out);
        at += strlen(says[lang]);
        if (strncmp(at, mb, strlen(mb)))
            fail_msg("lesson 4 (%s): expected \"%s%s\" (the decode row's W MB), got \"%.*s\"", lang ? "zh" : "en", says[lang],
                     mb, (int)strlen(mb), at);
        run_free(&r);
    }
    // bench gives the same figure, in the same digits, for the same model.
    const char *bench_says[2] = {"a cached step's weights, ", "缓存步的权重 "};
    for (int lang = 0; lang < 2; lang++) {
        RunResult r = kvdemo_run(lang ? "bench --init random --preset tiny --repeat 1 --steps 4 --lang zh"
                                      : "bench --init random --preset tiny --repeat 1 --steps 4 --lang en");
        if (r.status != 0) fail_msg("bench exited with %d: %s", r.status, r.err);
        const char *at = strstr(r.out, bench_says[lang]);
        if (!at || strncmp(at + strlen(bench_says[lang]), mb, strlen(mb)))
            fail_msg("bench (%s): expected \"%s%s\" (lesson 4's decode W MB), got \"%.40s\"", lang ? "zh" : "en",
                     bench_says[lang], mb, at ? at : "(nothing)");
        run_free(&r);
    }
}

static void test_text_both_languages(void **state) {
    (void)state;
    const char *en[] = {"FLOPs per token", "Time per token", "█", "░", "identical bit for bit", "n·p + n(n−1)/2",
                        "memory-bandwidth bound", "lesson 10"};
    const char *zh[] = {"每个 token 的计算量", "每个 token 的耗时", "█", "░", "逐位完全相同", "n·p + n(n−1)/2",
                        "内存带宽受限", "第 10 课"};
    for (int lang = 0; lang < 2; lang++) {
        RunResult r = kvdemo_run_env(lang ? "LANG=zh_CN.UTF-8" : NULL, "lesson 4 --init random --preset tiny --repeat 1");
        if (r.status != 0) fail_msg("lesson 4 exited with %d: %s", r.status, r.err);
        for (int i = 0; i < 8; i++) {
            const char *needle = lang ? zh[i] : en[i];
            if (!strstr(r.out, needle)) fail_msg("lesson 4 (%s): no \"%s\" in:\n%s", lang ? "zh" : "en", needle, r.out);
        }
        run_free(&r);
    }
    // JSON in Chinese: the same counts.
    Json j;
    j.e = kvdemo_json("lesson 4 --init random --preset tiny --format json --repeat 1 --lang zh", &j.n);
    expect_eq("zh no-cache rows_total", 0, 27.0 * 6 + 27 * 26 / 2, need(&j, "count", "no-cache", 0, "rows_total"));
    expect_eq("zh cache rows_total", 0, 6 + 27 - 1, need(&j, "count", "cache", 0, "rows_total"));
    events_free(j.e, j.n);
}

// The sentence after "memory-bandwidth bound" follows this run's GFLOP/s
// ratio x ± e (many rows against one cached row): "shows it" only when
// x - e > 1, "contradicts it" only when x + e < 1, "does not show it"
// between, "too few" with one run. Never a time: the words against the
// numbers printed beside them.
static const char *const BOUND_SAYS[][2] = {
    {"This run shows it:", "这次运行印证了这一点："},
    {"This run does not show it:", "这次运行没有显示出来："},
    {"This run contradicts it:", "这次运行与此相反："},
    {"One run of each: too few", "每种只运行了一次："},
};

static int bound_sentence(const char *out, int lang) {
    int found = -1;
    for (int k = 0; k < 4; k++)
        if (strstr(out, BOUND_SAYS[k][lang])) {
            if (found >= 0) fail_msg("lesson 4: both \"%s\" and \"%s\"", BOUND_SAYS[found][lang], BOUND_SAYS[k][lang]);
            found = k;
        }
    if (found < 0) fail_msg("lesson 4: no sentence on what the run shows in:\n%s", out);
    return found;
}

static void test_bound_follows_the_ratio(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 4 --init random --preset tiny --repeat 3 --format json");
    if (r.status != 0) fail_msg("lesson 4 exited with %d: %s", r.status, r.err);
    const char *at = strstr(r.out, "\"name\":\"gflop_per_s_ratio\"");
    double x, e;
    char verdict[16];
    if (!at || sscanf(at, "\"name\":\"gflop_per_s_ratio\",\"value\":%lf,\"unit\":\"x\",\"error\":%lf,\"decimals\":%*d,"
                          "\"verdict\":\"%15[a-z_]\"", &x, &e, verdict) != 3)
        fail_msg("no gflop_per_s_ratio event with value, error and verdict, got: %.200s", at ? at : "(nothing)");
    const char *want = x - e > 1 ? "faster" : x + e < 1 ? "slower" : "same";
    if (strcmp(verdict, want)) fail_msg("gflop_per_s_ratio %g ± %g: expected verdict %s, got %s", x, e, want, verdict);
    run_free(&r);
    // Text: exactly one sentence, and with one run of each the "too few" one.
    for (int lang = 0; lang < 2; lang++) {
        r = kvdemo_run(lang ? "lesson 4 --init random --preset tiny --repeat 1 --lang zh"
                            : "lesson 4 --init random --preset tiny --repeat 1 --lang en");
        if (r.status != 0) fail_msg("lesson 4 exited with %d: %s", r.status, r.err);
        int k = bound_sentence(r.out, lang);
        if (k != 3) fail_msg("lesson 4 --repeat 1 (%s): expected \"%s\", got \"%s\"", lang ? "zh" : "en", BOUND_SAYS[3][lang],
                             BOUND_SAYS[k][lang]);
        run_free(&r);
    }
    r = kvdemo_run("lesson 4 --init random --preset tiny --repeat 3");
    if (r.status != 0) fail_msg("lesson 4 exited with %d: %s", r.status, r.err);
    int k = bound_sentence(r.out, 0);
    if (k == 3) fail_msg("lesson 4 --repeat 3: \"too few\" with three runs of each");
    // The printed x ± e (rounded: a margin of 0.1 either side of 1).
    at = strstr(r.out, "a ratio of\n");
    if (!at || sscanf(at, "a ratio of\n%lf ± %lf x", &x, &e) != 2) fail_msg("no \"a ratio of x ± e x\" in:\n%s", r.out);
    int clear = x - e > 1.1 ? 0 : x + e < 0.9 ? 2 : x - e < 0.9 && x + e > 1.1 ? 1 : -1;
    if (clear >= 0 && k != clear)
        fail_msg("lesson 4: ratio %g ± %g: expected \"%s\", got \"%s\"", x, e, BOUND_SAYS[clear][0], BOUND_SAYS[k][0]);
    run_free(&r);
}

static void test_bad_input(void **state) {
    (void)state;
    // The tiny preset's context is 32: a 32-character prompt leaves no step.
    expect_failure("lesson 4 --init random --preset tiny --prompt ROMEOROMEOROMEOROMEOROMEOROMEOxx", 2, "context holds 32");
    expect_failure("lesson 4 --init random --preset huge", 2, "--preset");
    expect_failure("lesson 4 --repeat 0", 2, "--repeat");
    RunResult r = kvdemo_run("lesson 4 --init random --preset tiny --repeat 1 --steps 500 --format json");
    assert_int_equal(r.status, 0);
    if (!strstr(r.err, "stops at the context")) fail_msg("expected a note that lesson 4 stops at the context, got: %s", r.err);
    run_free(&r);
}

// The chart of times is a table of the trace, so a document has it as a
// table: its head, then two rows per position of the timing table (█ without
// the cache with t, ░ with it without), none outside the table.
static void test_chart_in_the_trace(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 4 --init random --preset tiny --repeat 1 --format md");
    if (r.status != 0) fail_msg("lesson 4 --format md exited with %d: %s", r.status, r.err);
    const char *head = "| t | time per token against t (█ without the cache, ░ with it) |  |";
    const char *at = strstr(r.out, head);
    if (!at) fail_msg("lesson 4 --format md: expected the chart's head \"%s\" in:\n%s", head, r.out);
    // 16, T/4, T/2, 3T/4 and T - 1, each above the one before: T = 32 gives
    // 16, 24 and 31
    const int pos[] = {16, 24, 31};
    for (int i = 0; i < 3; i++) {
        char row[32];
        snprintf(row, sizeof row, "\n| %d | █", pos[i]);
        const char *found = strstr(at, row);
        if (!found) fail_msg("lesson 4 --format md: expected a chart row \"%s\" after the head", row + 1);
        const char *next = strchr(found + 1, '\n');
        if (!next || strncmp(next, "\n|  | ░", strlen("\n|  | ░")) != 0)
            fail_msg("lesson 4 --format md: expected the cached row \"|  | ░\" after t = %d", pos[i]);
    }
    if (strstr(r.out, "█") < at) fail_msg("lesson 4 --format md: a bar before the chart's head");
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flops_counted_each_step),
        cmocka_unit_test(test_row_formulas),
        cmocka_unit_test(test_timings_and_logits),
        cmocka_unit_test(test_prefill_and_decode),
        cmocka_unit_test(test_decode_reads_the_tables_weights),
        cmocka_unit_test(test_bound_follows_the_ratio),
        cmocka_unit_test(test_text_both_languages),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_chart_in_the_trace),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
