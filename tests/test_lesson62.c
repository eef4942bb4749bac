// test_lesson62 — `kvdemo lesson 6.2 --preset tiny --format json` against
// what the numbers must be, computed here from the configuration the lesson
// prints and from LLaMA-2's published shapes (params.json of the release):
// the K/V shapes, the query head -> key/value head map, the cache's shape and
// bytes per token, the parameters and bytes read per token; cached = uncached
// logits for MHA, GQA and MQA; GQA with n_kv_heads = n_heads = MHA and GQA =
// MHA with repeated heads, bit for bit; the mean-pooled conversion moves the
// logits. No expected value below comes from kvdemo's own output.
//
// Part (3), the shipped trained models: each one's G, parameters and cache
// bytes per token computed here from its file's configuration, its loss on
// the part of data/tinyshakespeare-val-2049.txt that --preset tiny scores
// (the first 257 characters) and the trained MHA model's mean-pooled
// conversions' against the article's Transformer in PyTorch
// (tests/llama_model_loss_reference.py --lesson62 wrote
// tests/fixtures/lesson62_trained.txt), and the conclusions those losses
// imply against MHA's seed-to-seed spread.
#include "testutil.h"

#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ARGS = "lesson 6.2 --preset tiny --format json --repeat 3 --steps 4";
static const char *const RUNS[] = {"mha", "gqa", "mqa"};
enum { FLOAT_BYTES = 4, FP16_BYTES = 2 };

typedef JsonRun Lesson;

static int setup(void **state) {
    *state = json_run_start(ARGS);
    return *state ? 0 : -1;
}

static int teardown(void **state) {
    json_run_free(*state);
    return 0;
}

static const Event *need(const Lesson *l, const char *event, const char *run, const char *name) {
    const Event *x = events_find(l->e, l->n, event, run, -1, name);
    if (!x) fail_msg("no %s event \"%s\" in run %s", event, name, run ? run : "(none)");
    return x;
}

static int64_t count(const Lesson *l, const char *run, const char *name) {
    return (int64_t)need(l, "count", run, name)->value;
}

static void expect_count(const Lesson *l, const char *run, const char *name, int64_t want) {
    int64_t got = count(l, run, name);
    if (got != want)
        fail_msg("%s %s: expected %lld, got %lld", run ? run : "(no run)", name, (long long)want,
                 (long long)got);
}

static void expect_shape(const Lesson *l, const char *run, const char *name, int ndim,
                         const int *want) {
    const Event *x = need(l, "shape", run, name);
    if (x->ndim != ndim) fail_msg("%s %s: expected %d dimensions, got %d", run, name, ndim, x->ndim);
    for (int d = 0; d < ndim; d++)
        if (x->shape[d] != want[d])
            fail_msg("%s %s shape[%d]: expected %d, got %d", run, name, d, want[d], x->shape[d]);
}

// The configuration each variant prints, and what follows from it.
static void test_shapes_map_and_cache_bytes(void **state) {
    const Lesson *l = *state;
    int64_t H = count(l, "mha", "n_heads");
    for (int i = 0; i < 3; i++) {
        const char *run = RUNS[i];
        int64_t G = count(l, run, "n_kv_heads"), D = count(l, run, "head_dim");
        int64_t C = count(l, run, "dim"), L = count(l, run, "n_layers");
        int64_t F = count(l, run, "hidden_dim"), V = count(l, run, "vocab_size");
        int64_t B = count(l, run, "max_batch_size"), T = count(l, run, "max_seq_len");
        expect_count(l, run, "n_heads", H);
        if (i == 0 && G != H) fail_msg("mha: n_kv_heads expected n_heads %lld, got %lld", (long long)H, (long long)G);
        if (i == 1 && !(G > 1 && G < H && H % G == 0))
            fail_msg("gqa: n_kv_heads expected a divisor of %lld between 1 and it, got %lld", (long long)H, (long long)G);
        if (i == 2 && G != 1) fail_msg("mqa: n_kv_heads expected 1, got %lld", (long long)G);
        if (C != H * D) fail_msg("%s: dim expected n_heads * head_dim = %lld, got %lld", run, (long long)(H * D), (long long)C);
        // wq (C, H*D); wk, wv (C, G*D)
        int wq[2] = {(int)C, (int)(H * D)}, wk[2] = {(int)C, (int)(G * D)};
        expect_shape(l, run, "wq", 2, wq);
        expect_shape(l, run, "wk", 2, wk);
        expect_shape(l, run, "wv", 2, wk);
        expect_count(l, run, "kv_params_per_layer", 2 * C * G * D);
        // every weight: tok_embeddings, L x (2 norms, wq, wk, wv, wo, w1, w2, w3), norm, output
        int64_t params = V * C + L * (2 * C + C * H * D + 2 * C * G * D + H * D * C + 3 * C * F) + C + C * V;
        expect_count(l, run, "params", params);
        // query head h reads key/value head h / (H / G)
        for (int64_t h = 0; h < H; h++) {
            char name[32];
            snprintf(name, sizeof name, "kv_head[%lld]", (long long)h);
            expect_count(l, run, name, h / (H / G));
        }
        // cache_k, cache_v (max_batch_size, max_seq_len, n_kv_heads, head_dim)
        int cache[4] = {(int)B, (int)T, (int)G, (int)D};
        expect_shape(l, run, "cache_k", 4, cache);
        expect_shape(l, run, "cache_v", 4, cache);
        int64_t per_token = 2 * L * G * D * FLOAT_BYTES;
        expect_count(l, run, "cache_bytes_per_token", per_token);
        expect_count(l, run, "cache_bytes", per_token * B * T);
        // the last generated token (position T - 1) reads T cache rows and
        // every weight once, of the embedding table one row
        expect_count(l, run, "cache_bytes_read", per_token * T);
        expect_count(l, run, "weight_bytes_read", (params - V * C + C) * FLOAT_BYTES);
        expect_count(l, run, "bytes_read_per_token", per_token * T + (params - V * C + C) * FLOAT_BYTES);
        const Event *t = need(l, "timing", run, "per_token");
        if (!(t->seconds > 0)) fail_msg("%s per_token: expected a positive time, got %g", run, t->seconds);
        double lo = need(l, "value", run, "per_token_min")->value, hi = need(l, "value", run, "per_token_max")->value;
        if (!(lo > 0 && lo <= t->seconds && t->seconds <= hi))
            fail_msg("%s: expected fastest %g <= median %g <= slowest %g", run, lo, t->seconds, hi);
        // FLOPs of the token at position T - 1: two per multiply-add of every
        // matrix but the embedding lookup, and of q . k and weights @ v over T rows.
        int64_t kv_proj = 2 * L * 2 * C * G * D;
        int64_t flops = 2 * (L * (C * H * D + 2 * C * G * D + H * D * C + 3 * C * F) + C * V) + 2 * L * H * D * 2 * T;
        expect_count(l, run, "kv_proj_flops_per_token", kv_proj);
        expect_count(l, run, "flops_per_token", flops);
    }
    // The timed tokens are the last positions of the context.
    expect_count(l, NULL, "steps", 4);
    expect_count(l, NULL, "context", count(l, "mha", "max_seq_len") - 4);
}

// LLaMA-2's published shapes: 7B dim 4096, 32 layers, 32 heads (MHA); 70B
// dim 8192, 80 layers, 64 heads, 8 key/value heads (GQA). fp16: 2 bytes.
static void test_llama2_cache_per_token(void **state) {
    const Lesson *l = *state;
    struct {
        const char *run;
        int64_t layers, dim, heads, kv_heads;
    } models[] = {
        {"llama-2-7b", 32, 4096, 32, 32},
        {"llama-2-70b", 80, 8192, 64, 8},
        {"llama-2-70b-mha", 80, 8192, 64, 64},
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        int64_t head_dim = models[i].dim / models[i].heads;
        int64_t want = 2 * models[i].layers * models[i].kv_heads * head_dim * FP16_BYTES;
        expect_count(l, models[i].run, "n_layers", models[i].layers);
        expect_count(l, models[i].run, "n_kv_heads", models[i].kv_heads);
        expect_count(l, models[i].run, "head_dim", head_dim);
        expect_count(l, models[i].run, "cache_bytes_per_token", want);
        expect_count(l, models[i].run, "cache_bytes_4096", want * 4096);
    }
    // The figures of the brief, as a reader would check them by hand.
    assert_int_equal(count(l, "llama-2-7b", "cache_bytes_per_token"), 524288);
    assert_int_equal(count(l, "llama-2-70b", "cache_bytes_per_token"), 327680);
    assert_int_equal(count(l, "llama-2-70b-mha", "cache_bytes_per_token"), 2621440);
    // Per sequence the cache does not dominate: 140 GB of weights over
    // 4096 · 327,680 B = 1.34 GB a sequence takes a batch of 105.
    expect_count(l, NULL, "batch_for_cache_to_pass_weights", (int64_t)ceil(140e9 / (4096.0 * 327680)));
}

static void expect_identical(const Lesson *l, const char *run, const char *name) {
    const Event *x = need(l, "compare", run, name);
    if (x->identical != 1)
        fail_msg("%s %s: expected identical bit for bit, got max |difference| %g", run, name,
                 x->max_abs_diff);
}

static void test_outputs_that_must_not_move(void **state) {
    const Lesson *l = *state;
    for (int i = 0; i < 3; i++) expect_identical(l, RUNS[i], "logits");   // cached = uncached
    expect_identical(l, "mha", "gqa_n_kv_heads_eq_n_heads");
    expect_identical(l, "gqa", "repeat_kv");
    expect_identical(l, "mqa", "repeat_kv");
}

static void test_pooled_conversion_moves_the_logits(void **state) {
    const Lesson *l = *state;
    for (int i = 1; i < 3; i++) {
        const Event *x = need(l, "compare", RUNS[i], "converted_vs_mha");
        if (x->identical != 0 || !(x->max_abs_diff > 0))
            fail_msg("%s converted_vs_mha: expected logits that differ from MHA's, got identical %d, "
                     "max |difference| %g",
                     RUNS[i], x->identical, x->max_abs_diff);
    }
}

static void test_text_languages_and_errors(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 6.2 --preset tiny --repeat 1 --lang zh");
    if (r.status != 0) fail_msg("kvdemo lesson 6.2 --lang zh exited with %d: %s", r.status, r.err);
    const char *terms[] = {"MHA", "GQA", "MQA", "减少了数据的读取", "减少了推理过程中的KV Cache",
                           "需要在模型训练的时候开启", "（3）共享的代价：在训练好的模型上实测", "这些数字支持的结论",
                           // issue 28 §4: the ratios the right way up (MHA's cache is the larger)
                           "MHA 的缓存是 GQA 的 4 倍、MQA 的 8 倍：n_heads / n_kv_heads。",
                           "会是现在的 8 倍：n_heads / n_kv_heads = 64 / 8。"};
    for (size_t i = 0; i < sizeof terms / sizeof terms[0]; i++)
        if (!strstr(r.out, terms[i])) fail_msg("lesson 6.2 --lang zh: expected \"%s\" in the text", terms[i]);
    run_free(&r);

    r = kvdemo_run("lesson 6.2 --preset tiny --repeat 1 --lang en");
    if (r.status != 0) fail_msg("kvdemo lesson 6.2 exited with %d: %s", r.status, r.err);
    if (!strstr(r.out, "identical bit for bit") || !strstr(r.out, "524,288 B"))
        fail_msg("lesson 6.2: expected the comparisons and LLaMA-2-7B's bytes in the text");
    // Time ratios are measurements: with a single run (--repeat 1) there is
    // no spread, so two significant digits and no conclusion; the FLOPs are
    // counted beside the bytes.
    int ratios = 0;
    for (const char *p = r.out; (p = strstr(p, "FLOPs ")) && (p = strstr(p, ", time ")); p++, ratios++) {
        p += strlen(", time ");
        int digits = 0;
        const char *q = p;
        while (*q == '0' || *q == '.') q++;   // leading zeros are not significant
        for (; (*q >= '0' && *q <= '9') || *q == '.'; q++) digits += *q != '.';
        if (digits < 1 || digits > 2) fail_msg("time ratio \"%.12s\": expected 1 or 2 significant digits, got %d", p, digits);
        if (strncmp(q, " x: too few runs to say", 23)) fail_msg("one run: expected \"x: too few runs to say\", got \"%.30s\"", q);
    }
    assert_int_equal(ratios, 2);
    if (!strstr(r.out, "measured") || !strstr(r.out, "FLOPs"))
        fail_msg("lesson 6.2: expected the times called measured and the FLOPs beside the bytes");
    run_free(&r);
    // With runs, one of the verdicts (which one is the machine's), in its
    // own direction with a figure that says it (issue 28: "0.77 ± 0.32 倍：
    // 更快" read as a contradiction), after the time ratio beside the bytes.
    static const char *const LANGS[] = {"en", "zh"}, *const AFTER[] = {", that is ", "，即"};
    for (int k = 0; k < 2; k++) {
        char args[96];
        snprintf(args, sizeof args, "lesson 6.2 --preset tiny --repeat 5 --lang %s", LANGS[k]);
        r = kvdemo_run(args);
        if (r.status != 0) fail_msg("kvdemo %s exited with %d: %s", args, r.status, r.err);
        ratios = 0;
        const char *key = k ? " 与 MHA 相比（每个 token）：" : " against MHA per token: ";
        for (const char *p = r.out; (p = strstr(p, key)); p++) {
            const char *eol = strchr(p, '\n'), *verdict = strstr(p, AFTER[k]);
            if (!eol || !verdict || verdict > eol) fail_msg("%s: expected \"%s\" and a verdict in \"%.160s\"", args, AFTER[k], p);
            const char *pm = strstr(p, " ± ");
            if (pm && pm < verdict) fail_msg("%s: the time ratio beside the bytes has a ±: \"%.160s\"", args, p);
            if (!expect_verdict_agrees(verdict, args)) fail_msg("%s: no verdict in \"%.*s\"", args, (int)(eol - p), p);
            ratios++;
        }
        assert_int_equal(ratios, 2);
        run_free(&r);
    }

    // A --steps that leaves no context is a usage error, with one line on stderr.
    r = kvdemo_run("lesson 6.2 --preset tiny --steps 100000");
    if (r.status != 2) fail_msg("--steps 100000: expected exit status 2, got %d", r.status);
    if (count_lines(r.err) != 1 || !strstr(r.err, "--steps"))
        fail_msg("--steps 100000: expected one line naming --steps on stderr, got \"%s\"", r.err);
    run_free(&r);

    r = kvdemo_run("lesson 6.2 --preset tiny --prompt '日本'");
    if (r.status != 2) fail_msg("a prompt outside the vocabulary: expected exit status 2, got %d", r.status);
    run_free(&r);
}

// ----------------------------------------------------------------------------
// Part (3): the trained models

#define TRAINED_FIXTURE "tests/fixtures/lesson62_trained.txt"
// The C sums in float32 in another order than PyTorch (test_llama_shipped's
// tolerance): the mean of 2048 cross-entropies may differ in the 5th decimal.
#define TOL_LOSS 1e-4
// MHA's seed-to-seed spread of the validation loss, docs/lesson-6.2.md (3
// trainings of the shipped recipe): a difference within it is a tie.
#define SEED_SPREAD 0.0135

static const struct {
    const char *run, *file, *fixture, *converted, *converted_fixture;
    int kv_heads;
} TRAINED[] = {
    {"trained-mha", "data/tinyshakespeare-llama-mha.bin", "tiny_loss_mha", NULL, NULL, 8},
    {"trained-gqa4", "data/tinyshakespeare-llama-gqa4.bin", "tiny_loss_gqa4", "converted-gqa4", "tiny_converted_4", 4},
    {"trained-gqa2", "data/tinyshakespeare-llama-gqa2.bin", "tiny_loss_gqa2", "converted-gqa2", "tiny_converted_2", 2},
    {"trained-mqa", "data/tinyshakespeare-llama-mqa.bin", "tiny_loss_mqa", "converted-mqa", "tiny_converted_1", 1},
};
enum { N_TRAINED = sizeof TRAINED / sizeof TRAINED[0] };

static double fixture_value(const FixSet *fx, const char *name) {
    return fix_get(fx, name)->data[0];
}

static void expect_loss(const Lesson *l, const char *run, const char *name, double want) {
    double got = need(l, "value", run, name)->value;
    if (!(fabs(got - want) <= TOL_LOSS))
        fail_msg("%s %s: expected %.6f (PyTorch), got %.6f", run, name, want, got);
}

// Every number of the table but the time, from the files and PyTorch.
static void test_trained_models_match_their_files_and_pytorch(void **state) {
    const Lesson *l = *state;
    FixSet fx;
    fix_load(&fx, TRAINED_FIXTURE);
    for (int i = 0; i < N_TRAINED; i++) {
        LlamaModel m;
        char err[256];
        if (llama_load(&m, TRAINED[i].file, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
        const LlamaConfig *c = &m.cfg;
        int64_t C = c->dim, L = c->n_layers, H = c->n_heads, G = c->n_kv_heads, D = C / H;
        int64_t F = c->hidden_dim, V = c->vocab_size;
        if (G != TRAINED[i].kv_heads)
            fail_msg("%s: expected %d key/value heads, got %lld", TRAINED[i].file, TRAINED[i].kv_heads, (long long)G);
        const char *run = TRAINED[i].run;
        expect_count(l, run, "n_kv_heads", G);
        expect_count(l, run, "params", V * C + L * (2 * C + C * H * D + 2 * C * G * D + H * D * C + 3 * C * F) + C + C * V);
        expect_count(l, run, "cache_bytes_per_token", 2 * L * G * D * FLOAT_BYTES);
        expect_loss(l, run, "val_loss", fixture_value(&fx, TRAINED[i].fixture));
        const Event *t = need(l, "value", run, "per_token");
        double lo = need(l, "value", run, "per_token_min")->value, hi = need(l, "value", run, "per_token_max")->value;
        if (!(lo > 0 && lo <= t->value && t->value <= hi))
            fail_msg("%s: expected fastest %g <= median %g <= slowest %g", run, lo, t->value, hi);
        if (TRAINED[i].converted) {
            expect_count(l, TRAINED[i].converted, "n_kv_heads", G);
            expect_loss(l, TRAINED[i].converted, "val_loss", fixture_value(&fx, TRAINED[i].converted_fixture));
        }
        llama_free(&m);
    }
    // --preset tiny scores the slice's first 257 characters: 2 windows of 128
    expect_count(l, NULL, "slice_characters", 2049);
    expect_count(l, NULL, "scored_characters", 257);
    expect_count(l, NULL, "scored_windows", 256 / 128);
    fix_free(&fx);
}

// The conclusions follow from PyTorch's losses and the seed spread.
static void test_trained_conclusions_follow_the_losses(void **state) {
    const Lesson *l = *state;
    FixSet fx;
    fix_load(&fx, TRAINED_FIXTURE);
    double mha = fixture_value(&fx, "tiny_loss_mha");
    int ties = 0, costly = 0;
    for (int i = 1; i < N_TRAINED; i++) {
        double d = fixture_value(&fx, TRAINED[i].fixture) - mha;
        int want = fabs(d) <= SEED_SPREAD ? 0 : d < 0 ? -1 : 1;
        ties += want == 0;
        expect_count(l, TRAINED[i].run, "loss_verdict", want);
        costly += fixture_value(&fx, TRAINED[i].converted_fixture) - mha > SEED_SPREAD;
    }
    expect_count(l, NULL, "loss_ties", ties);
    fix_free(&fx);
    RunResult r = kvdemo_run("lesson 6.2 --preset tiny --repeat 2 --lang en");
    if (r.status != 0) fail_msg("kvdemo lesson 6.2 exited with %d: %s", r.status, r.err);
    const char *tie = "What these numbers support: a tie.", *free_ = "converting is not free";
    if ((ties == N_TRAINED - 1) != (strstr(r.out, tie) != NULL))
        fail_msg("%d of %d sharings tie with MHA: expected \"%s\" %s the text", ties, N_TRAINED - 1, tie,
                 ties == N_TRAINED - 1 ? "in" : "not in");
    if ((costly == N_TRAINED - 1) != (strstr(r.out, free_) != NULL))
        fail_msg("%d of %d conversions cost more than the spread: expected \"%s\" %s the text", costly,
                 N_TRAINED - 1, free_, costly == N_TRAINED - 1 ? "in" : "not in");
    run_free(&r);
}

// A shipped model that is missing: the part names it, says how to get it,
// and goes on with the other three (kvdemo copied beside a data/ folder
// without the GQA-4 model, so that it finds nothing else).
static void test_missing_model_is_named_and_skipped(void **state) {
    (void)state;
    char dir[256], cmd[2048];
    if (tmpdir_make(dir, sizeof dir, "lesson62") != 0) fail_msg("no temporary folder");
    const char *bin = getenv("KVDEMO_BIN");
    snprintf(cmd, sizeof cmd,
             "mkdir %s/data && cp %s %s/kvdemo && cp data/tinyshakespeare-llama-mha.bin "
             "data/tinyshakespeare-llama-gqa2.bin data/tinyshakespeare-llama-mqa.bin "
             "data/tinyshakespeare-val-2049.txt %s/data/ && cd %s && env -u LANG -u LC_ALL ./kvdemo lesson 6.2 "
             "--preset tiny --repeat 1 --lang en </dev/null",
             dir, bin && *bin ? bin : "./kvdemo", dir, dir, dir);
    RunResult r = shell_run(cmd);
    tmpdir_remove(dir);
    if (r.status != 0) fail_msg("lesson 6.2 without the GQA-4 model: expected exit 0, got %d: %s", r.status, r.err);
    const char *want[] = {"data/tinyshakespeare-llama-gqa4.bin is missing", "git checkout -- data/tinyshakespeare-llama-gqa4.bin",
                          "--kv-heads 4 --data data/tinyshakespeare.txt --out data/tinyshakespeare-llama-gqa4.bin",
                          "  GQA-2 against MHA: ", "  MQA against MHA: ", "G = 4: "};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(r.out, want[i])) fail_msg("lesson 6.2 without the GQA-4 model: expected \"%s\" in the text", want[i]);
    if (strstr(r.out, "  GQA-4 against MHA: ")) fail_msg("lesson 6.2 without the GQA-4 model: expected no GQA-4 row");
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes_map_and_cache_bytes),
        cmocka_unit_test(test_llama2_cache_per_token),
        cmocka_unit_test(test_outputs_that_must_not_move),
        cmocka_unit_test(test_pooled_conversion_moves_the_logits),
        cmocka_unit_test(test_text_languages_and_errors),
        cmocka_unit_test(test_trained_models_match_their_files_and_pytorch),
        cmocka_unit_test(test_trained_conclusions_follow_the_losses),
        cmocka_unit_test(test_missing_model_is_named_and_skipped),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
