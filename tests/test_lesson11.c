// test_lesson11 — the injected cache bugs: each one leaves the run without the
// cache at the step its mechanism predicts, the correct cache never does;
// lesson 11 reports those steps; --bug is refused where it means nothing.
// Lesson 12 through the command line too: its events, and --kv-dtype.
#include "testutil.h"

#include "gpt.h"
#include "kvvariant.h"
#include "sampler.h"
#include "spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { STEPS = 40 };
static const char PROMPT[] = "ROMEO:";   // 6 tokens

// The step (1-based) each bug first changes the logits, from its mechanism,
// for a prompt of P tokens and a context of T:
//   offset, mask, wrong-layout, no-scale: the first cached step, 2
//   no-append: the second cached step, 3 (the first still finds the prompt
//              and its own key, which is all a correct cache holds then)
//   stale: the first step with len(tokens) = T + 1, T - P + 2
//   no-rollback, off-by-one: never, in a run without speculative
//              decoding: they change kvcache_truncate only, which it never calls
static int expected_step(KvBug bug, int T, int P) {
    switch (bug) {
    case KV_BUG_NONE:
    case KV_BUG_NO_ROLLBACK:
    case KV_BUG_OFF_BY_ONE: return 0;
    case KV_BUG_NO_APPEND: return 3;
    case KV_BUG_STALE: return T - P + 2;
    default: return 2;
    }
}

typedef struct {
    int V;
    float *logits;   // (STEPS, V)
} Rec;

static int rec_step(void *ctx, const GptStep *st) {
    Rec *r = ctx;
    memcpy(r->logits + (size_t)st->step * r->V, st->logits, sizeof(float) * (size_t)r->V);
    return 0;
}

static void generate(Rec *r, GptState *s, GptVariant *v, const GptModel *m, const int *prompt, int n, int use_cache) {
    int tokens[64 + STEPS];
    memcpy(tokens, prompt, sizeof(int) * (size_t)n);
    Sampler sm;
    assert_int_equal(sampler_init(&sm, m->cfg.V, 1.0f, 0, 42), 0);
    r->V = m->cfg.V;
    KvVariantCaches vc;
    assert_int_equal(kvvariant_attach(&vc, s, v), 0);
    gpt_generate(tokens, s, m, &sm, n, STEPS, use_cache, rec_step, r);
    kvvariant_detach(&vc);
    sampler_free(&sm);
}

// Every bug on the tiny model (T = 32): the first step whose logits differ
// from the run without the cache is the predicted one, and the steps before
// it are identical bit for bit.
static void test_bugs_diverge_where_predicted(void **state) {
    (void)state;
    GptConfig cfg;
    assert_int_equal(gpt_preset(&cfg, "tiny"), 0);
    uint32_t vocab[65];
    for (int i = 0; i < 65; i++) vocab[i] = (unsigned char)GPT_SHAKESPEARE_VOCAB[i];
    GptModel m;
    char err[256];
    if (gpt_init_random(&m, cfg, vocab, 7, ERR(LANG_EN, err))) fail_msg("%s", err);
    int prompt[8];
    int n = gpt_encode(prompt, &m, PROMPT, 8, ERR(LANG_EN, err));
    assert_int_equal(n, 6);
    GptState s;
    assert_int_equal(gpt_state_init(&s, cfg), 0);
    Rec ref = {0, malloc(sizeof(float) * STEPS * 65)}, run = {0, malloc(sizeof(float) * STEPS * 65)};
    generate(&ref, &s, NULL, &m, prompt, n, 0);
    for (int b = 0; b < KV_NUM_BUGS; b++) {
        GptVariant v = {.bug = (KvBug)b};
        generate(&run, &s, &v, &m, prompt, n, 1);
        int first = 0;
        for (int t = 0; t < STEPS && !first; t++)
            if (memcmp(ref.logits + t * 65, run.logits + t * 65, sizeof(float) * 65)) first = t + 1;
        int want = expected_step((KvBug)b, cfg.T, n);
        if (first != want)
            fail_msg("bug %s: logits first differ at step %d, expected step %d", kvvariant_bug_name((KvBug)b), first, want);
    }
    free(ref.logits);
    free(run.logits);
    gpt_state_free(&s);
    gpt_free(&m);
}

// ----------------------------------------------------------------------------
// Speculative decoding's rollback bugs

// The first round whose rollback cuts rows, the cut each bug gets wrong:
// len(tokens) after it, 0 for none.
static int first_cut(void *ctx, const SpecRound *r) {
    int *len = ctx;
    if (!*len && r->accepted < r->gamma) *len = r->len + r->accepted + 1;
    return 0;
}

// Speculative tokens (n + STEPS) of target m (its cache with bug b) and
// draft d, K a round, greedy.
static void spec_tokens(int *tokens, int *cut, const GptModel *m, const GptModel *d, KvBug b, int K,
                        const int *prompt, int n) {
    GptState ts, ds;
    assert_int_equal(gpt_state_init(&ts, m->cfg), 0);
    assert_int_equal(gpt_state_init(&ds, d->cfg), 0);
    GptVariant v = {.bug = b};
    KvVariantCaches vc;
    assert_int_equal(kvvariant_attach(&vc, &ts, b == KV_BUG_NONE ? NULL : &v), 0);
    Sampler greedy;
    assert_int_equal(sampler_init(&greedy, m->cfg.V, 0.0f, 0, 42), 0);
    SpecMt mt;
    spec_mt_init(&mt, &greedy);
    Spec sp;
    SpecModel tm = {m, &ts, NULL}, dm = {d, &ds, NULL};
    assert_int_equal(spec_init(&sp, tm, dm, K, &greedy, &mt.base), 0);
    memcpy(tokens, prompt, sizeof(int) * (size_t)n);
    *cut = 0;
    assert_int_equal(spec_generate(tokens, &sp, n, STEPS, first_cut, cut), n + STEPS);
    spec_free(&sp);
    sampler_free(&greedy);
    kvvariant_detach(&vc);
    gpt_state_free(&ts);
    gpt_state_free(&ds);
}

// Against the target's own greedy text (gpt_generate, with its cache): the
// correct speculative run writes it for K = 1 .. 8; each rollback bug keeps
// it up to the end of the first round whose rollback cuts rows (nothing
// before that cut reads a wrong row) and leaves it somewhere after.
static void test_rollback_bugs_leave_target_text(void **state) {
    (void)state;
    GptConfig cfg;
    assert_int_equal(gpt_preset(&cfg, "tiny"), 0);
    uint32_t vocab[65];
    for (int i = 0; i < 65; i++) vocab[i] = (unsigned char)GPT_SHAKESPEARE_VOCAB[i];
    GptModel m, d;
    char err[256];
    if (gpt_init_random(&m, cfg, vocab, 7, ERR(LANG_EN, err)) || gpt_init_random(&d, cfg, vocab, 8, ERR(LANG_EN, err)))
        fail_msg("%s", err);
    int prompt[8], n = gpt_encode(prompt, &m, PROMPT, 8, ERR(LANG_EN, err));
    int want[8 + STEPS], got[8 + STEPS];
    GptState s;
    assert_int_equal(gpt_state_init(&s, cfg), 0);
    Sampler greedy;
    assert_int_equal(sampler_init(&greedy, cfg.V, 0.0f, 0, 42), 0);
    memcpy(want, prompt, sizeof(int) * (size_t)n);
    gpt_generate(want, &s, &m, &greedy, n, STEPS, 1, NULL, NULL);
    static const KvBug RUNS[] = {KV_BUG_NONE, KV_BUG_NO_ROLLBACK, KV_BUG_OFF_BY_ONE};
    for (int K = 1; K <= 8; K++)
        for (int r = 0; r < 3; r++) {
            int cut;
            spec_tokens(got, &cut, &m, &d, RUNS[r], K, prompt, n);
            const char *name = kvvariant_bug_name(RUNS[r]);
            int first = n;
            while (first < n + STEPS && got[first] == want[first]) first++;
            if (RUNS[r] == KV_BUG_NONE) {
                if (first < n + STEPS)
                    fail_msg("K = %d, correct rollback: token %d expected %d, got %d", K, first, want[first], got[first]);
                continue;
            }
            if (!cut) fail_msg("K = %d, %s: no round to cut wrongly in %d steps", K, name, STEPS);
            if (first < cut)
                fail_msg("K = %d, %s: token %d expected %d (the target's), got %d, before the first wrong cut at %d", K,
                         name, first, want[first], got[first], cut);
            if (first == n + STEPS) fail_msg("K = %d, %s: the target's text at all %d steps, expected a divergence", K, name, STEPS);
        }
    sampler_free(&greedy);
    gpt_state_free(&s);
    gpt_free(&m);
    gpt_free(&d);
}

static char model[64], draft[64], text[64];

static int setup(void **state) {
    (void)state;
    snprintf(model, sizeof model, "/tmp/kvdemo-l11-%d.bin", (int)getpid());
    snprintf(text, sizeof text, "/tmp/kvdemo-l11-%d.txt", (int)getpid());
    snprintf(draft, sizeof draft, "/tmp/kvdemo-l11-%d-draft.bin", (int)getpid());
    char args[128];
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "init --preset tiny --seed %d --out %s", 7 + i, i ? draft : model);
        RunResult r = kvdemo_run(args);
        if (r.status != 0) fail_msg("kvdemo %s: %s", args, r.err);
        run_free(&r);
    }
    FILE *f = fopen(text, "w");
    if (!f) fail_msg("cannot write %s", text);
    for (int i = 0; i < 60; i++) fputs("To be, or not to be: that is the question.\n", f);
    fclose(f);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(model);
    unlink(draft);
    unlink(text);
    return 0;
}

// The lesson reports, per bug, the step the mechanism predicts (stale: past
// the context, T - 6 + 2 = 28), and none for the correct cache.
static void test_lesson11_reports(void **state) {
    (void)state;
    char args[256];
    int n;
    snprintf(args, sizeof args, "lesson 11 --model %s --draft %s --steps %d --format json", model, draft, STEPS);
    Event *e = kvdemo_json(args, &n);
    for (int b = 0; b < KV_NUM_BUGS; b++) {
        const char *name = kvvariant_bug_name((KvBug)b);
        if (b == KV_BUG_NO_ROLLBACK || b == KV_BUG_OFF_BY_ONE) continue;   // below
        const Event *first = events_find(e, n, "count", name, -1, "first_step");
        if (!first) fail_msg("no first_step for %s", name);
        int want = expected_step((KvBug)b, 32, 6);
        if ((int)first->value != want) fail_msg("%s: first_step expected %d, got %g", name, want, first->value);
        const Event *diff = events_find(e, n, "value", name, -1, "max_abs_diff");
        assert_non_null(diff);
        if (b == KV_BUG_NONE ? diff->value != 0 : !(diff->value > 0))
            fail_msg("%s: max_abs_diff %g", name, diff->value);
        if (b != KV_BUG_NONE) assert_non_null(events_find(e, n, "text", name, -1, "diagnosis"));
        assert_non_null(events_find(e, n, "text", name, -1, "text"));
    }
    // the rollback bugs: the correct speculative run never leaves the
    // target's greedy text; each bug does, not before the end of the first
    // round whose cut it gets wrong
    const char *spec_runs[3] = {"speculative", "no-rollback", "off-by-one"};
    for (int i = 0; i < 3; i++) {
        const Event *first = events_find(e, n, "count", spec_runs[i], -1, "first_step");
        const Event *at = events_find(e, n, "count", spec_runs[i], -1, "first_char");
        const Event *cut = events_find(e, n, "count", spec_runs[i], -1, "cut_len");
        if (!first || !at || !cut) fail_msg("%s: no first_step, first_char or cut_len", spec_runs[i]);
        if (i == 0 ? first->value != 0 : !(first->value > 0 && at->value >= cut->value && cut->value > 0))
            fail_msg("%s: first_step %g, first_char %g, first wrong cut at %g", spec_runs[i], first->value, at->value,
                     cut->value);
        if (i) assert_non_null(events_find(e, n, "text", spec_runs[i], -1, "diagnosis"));
    }
    events_free(e, n);
    // --bug picks one, beside the correct cache
    snprintf(args, sizeof args, "lesson 11 --model %s --steps 10 --format json --bug mask", model);
    e = kvdemo_json(args, &n);
    assert_non_null(events_find(e, n, "count", "mask", -1, "first_step"));
    assert_non_null(events_find(e, n, "count", "none", -1, "first_step"));
    assert_null(events_find(e, n, "count", "offset", -1, "first_step"));
    assert_null(events_find(e, n, "count", "no-rollback", -1, "first_step"));
    events_free(e, n);
    // stale within the context: no divergence, and the lesson says how many steps it needs
    snprintf(args, sizeof args, "lesson 11 --model %s --steps 10 --bug stale", model);
    RunResult r = kvdemo_run(args);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "--steps 32"));
    // the closing words claim no "plausible text": they name the chapter's
    // crash that kvdemo's stale bug avoids
    if (!strstr(r.out, "some plain garbage") || !strstr(r.out, "IndexError") || strstr(r.out, "plausible text."))
        fail_msg("lesson 11's closing words: expected \"some plain garbage\" and the IndexError, no \"plausible text.\"");
    run_free(&r);
    snprintf(args, sizeof args, "lesson 11 --model %s --steps 10 --bug offset --lang zh", model);
    r = kvdemo_run(args);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "诊断"));
    run_free(&r);
    // issue 28 §4: the first cached step is step 2 (step 1 is the prompt's
    // prefill), in Chinese as in English
    snprintf(args, sizeof args, "lesson 11 --model %s --steps 10 --bug no-append --lang zh", model);
    r = kvdemo_run(args);
    assert_int_equal(r.status, 0);
    if (!strstr(r.out, "第一个使用缓存的步骤（第 2 步）仍然正确") || !strstr(r.out, "在第 3 步首次不同（第二个缓存步骤）"))
        fail_msg("lesson 11 --bug no-append --lang zh: expected the first cached step called step 2, got:\n%s", r.out);
    run_free(&r);
    snprintf(args, sizeof args, "lesson 11 --model %s --steps 10 --bug no-append", model);
    r = kvdemo_run(args);
    assert_int_equal(r.status, 0);
    if (!strstr(r.out, "first differ at step 3 (the second cached step)"))
        fail_msg("lesson 11 --bug no-append: expected step 3 called the second cached step, got:\n%s", r.out);
    run_free(&r);
}

// wrong-layout reads the key cache as (len, D) over the len columns its run
// has written, never past them: the difference at step 2 is the same however
// many steps follow. (Reading past them took in what the reference run
// without the cache had left there, which grows with --steps.)
static void test_wrong_layout_independent_of_steps(void **state) {
    (void)state;
    int steps[] = {3, 8, 20};
    double at_3 = 0;
    for (int i = 0; i < 3; i++) {
        char args[256];
        int n;
        snprintf(args, sizeof args, "lesson 11 --model %s --steps %d --format json --bug wrong-layout", model, steps[i]);
        Event *e = kvdemo_json(args, &n);
        const Event *first = events_find(e, n, "count", "wrong-layout", -1, "first_step");
        const Event *diff = events_find(e, n, "value", "wrong-layout", -1, "max_abs_diff");
        assert_non_null(first);
        assert_non_null(diff);
        if ((int)first->value != 2) fail_msg("--steps %d: first_step expected 2, got %g", steps[i], first->value);
        if (i == 0) at_3 = diff->value;
        else if (diff->value != at_3)
            fail_msg("--steps %d: max_abs_diff at step 2 expected %.9g (as with --steps 3), got %.9g", steps[i], at_3,
                     diff->value);
        events_free(e, n);
    }
    assert_true(at_3 > 0);
}

// --bug where it means nothing, or names no bug: one line, exit 2.
static void test_bug_refused(void **state) {
    (void)state;
    // runs that would last hours are refused at once, naming the way to longer texts
    expect_failure("lesson 11 --steps 100000", 2, "lesson 11 takes --steps 1 to 1000; kvdemo generate --bug NAME");
    expect_failure("lesson 12 --steps 1001", 2, "lesson 12 takes --steps 1 to 1000; kvdemo generate --kv-dtype NAME");
    expect_failure("lesson 12 --steps 5000 --lang zh", 2, "第 12 课的 --steps 取 1 到 1000");
    char args[256];
    snprintf(args, sizeof args, "lesson 11 --model %s --bug nope", model);
    expect_failure(args, 2, "offset|no-append|stale|mask|wrong-layout|no-scale");
    expect_failure("lesson 2 --bug offset", 2, "--bug works with lesson 11 and generate");
    expect_failure("lesson 12 --bug offset", 2, "--bug works with lesson 11 and generate");
    snprintf(args, sizeof args, "generate --model %s --bug offset --no-cache", model);
    expect_failure(args, 2, "means nothing with --no-cache");
    snprintf(args, sizeof args, "generate --model %s --bug no-rollback", model);
    expect_failure(args, 2, "only lesson 11 runs with it: kvdemo lesson 11 --bug no-rollback");
    expect_failure("bench --bug offset", 2, "unknown option '--bug' for 'bench'");
    expect_failure("eval --bug offset", 2, "unknown option '--bug' for 'eval'");
    snprintf(args, sizeof args, "generate --model %s --kv-dtype int9", model);
    expect_failure(args, 2, "fp32|bf16|fp16|int8|int4");
    expect_failure("lesson 11 --kv-dtype int8", 2, "unknown option '--kv-dtype' for 'lesson'");
    snprintf(args, sizeof args, "generate --model %s --kv-dtype int8 --attention flash", model);
    expect_failure(args, 2, "drop --attention flash");
}

// generate --bug: the text leaves the correct one; --kv-dtype fp32: the
// default's text exactly.
static void test_generate_options(void **state) {
    (void)state;
    char args[256];
    const char *variants[3] = {"", "--kv-dtype fp32", "--bug mask"};
    char texts[3][256];
    for (int i = 0; i < 3; i++) {
        int n;
        snprintf(args, sizeof args, "generate --model %s --steps 30 --format json %s", model, variants[i]);
        Event *e = kvdemo_json(args, &n);
        const Event *t = events_find(e, n, "text", NULL, -1, "text");
        assert_non_null(t);
        snprintf(texts[i], sizeof texts[i], "%s", t->text);
        events_free(e, n);
    }
    assert_string_equal(texts[1], texts[0]);
    assert_string_not_equal(texts[2], texts[0]);
}

// Lesson 12 on the tiny model: the other summing order changes cached
// steps only, by rounding-sized amounts in fp32; the same order in bf16 is
// bit-identical; bytes per token from the definition; the validation loss
// of int8 close to fp32's.
static void test_lesson12(void **state) {
    (void)state;
    char args[256];
    int n;
    snprintf(args, sizeof args, "lesson 12 --model %s --steps %d --format json --data %s", model, STEPS, text);
    Event *e = kvdemo_json(args, &n);
    const Event *first = events_find(e, n, "count", "order-fp32", -1, "first_step");
    const Event *diff = events_find(e, n, "value", "order-fp32", -1, "first_abs_diff");
    assert_non_null(first);
    assert_non_null(diff);
    // step 1 is the pass without the cache: identical by construction
    if (first->value != 0 && (first->value < 2 || !(diff->value > 0 && diff->value < 1e-4)))
        fail_msg("order-fp32: first difference at step %g of %g, expected a step >= 2 and a size below 1e-4", first->value,
                 diff->value);
    const Event *control = events_find(e, n, "count", "order-bf16", -1, "same_order_first_step");
    assert_non_null(control);
    assert_int_equal((int)control->value, 0);
    // tiny: L 2, C 64, H 4, key groups of 32
    const char *kinds[5] = {"kv-fp32", "kv-bf16", "kv-fp16", "kv-int8", "kv-int4"};
    double want[5] = {2 * 2 * 64 * 4.0, 2 * 2 * 64 * 2.0, 2 * 2 * 64 * 2.0, 2 * (2 * 64 + 4 * 4 + 4 * 64 / 32.0),
                      2 * (64 + 4 * 4 + 4 * 64 / 32.0)};
    double loss[5];
    for (int k = 0; k < 5; k++) {
        const Event *b = events_find(e, n, "value", kinds[k], -1, "bytes_per_token");
        assert_non_null(b);
        if (b->value != want[k]) fail_msg("%s: bytes_per_token expected %g, got %g", kinds[k], want[k], b->value);
        const Event *l = events_find(e, n, "value", kinds[k], -1, "val_loss");
        assert_non_null(l);
        loss[k] = l->value;
        assert_non_null(events_find(e, n, "text", kinds[k], -1, "text"));
    }
    if (!(fabs(loss[3] - loss[0]) < 0.05)) fail_msg("int8 loss %g, fp32 %g", loss[3], loss[0]);
    if (!(fabs(loss[1] - loss[0]) < 0.05)) fail_msg("bf16 loss %g, fp32 %g", loss[1], loss[0]);
    events_free(e, n);
    // eval --kv-dtype fp32 agrees with the plain eval's validation loss
    snprintf(args, sizeof args, "eval --model %s --data %s", model, text);
    RunResult r = kvdemo_run(args);
    assert_int_equal(r.status, 0);
    double tl, vl, ql;
    assert_int_equal(sscanf(r.out, "train loss %lf, validation loss %lf", &tl, &vl), 2);
    run_free(&r);
    snprintf(args, sizeof args, "eval --model %s --data %s --kv-dtype fp32", model, text);
    r = kvdemo_run(args);
    assert_int_equal(r.status, 0);
    assert_int_equal(sscanf(r.out, "validation loss %lf", &ql), 1);
    if (fabs(ql - vl) > 1e-3) fail_msg("eval --kv-dtype fp32: %g, plain eval %g", ql, vl);
    run_free(&r);
}

// Lesson 12 says which windows its validation loss is over: 8 of the
// split's, evenly spaced as kvdemo eval spaces them (window i * count / 8),
// not "the first 8". 600 lines of 43 characters: the last 10% holds 2580
// characters, (2580 - 1) / 32 = 80 windows of the tiny model's 32.
static void test_lesson12_names_its_windows(void **state) {
    (void)state;
    char path[64], args[256];
    snprintf(path, sizeof path, "/tmp/kvdemo-l12-%d.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) fail_msg("cannot write %s", path);
    for (int i = 0; i < 600; i++) fputs("To be, or not to be: that is the question.\n", f);
    fclose(f);
    long n = 600 * 43, n_train = n * 9 / 10, count = (n - n_train - 1) / 32;
    char list[128] = "";
    for (long i = 0; i < 8; i++) {
        size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%ld", i ? ", " : "", i * count / 8);
    }
    char en[2][160], zh[2][160];
    snprintf(en[0], sizeof en[0], "8 of the %ld windows of 32 characters", count);
    snprintf(en[1], sizeof en[1], "windows %s (counted from 0)", list);
    snprintf(zh[0], sizeof zh[0], "8 个窗口，均匀取自 %ld 个 32 字符的窗口", count);
    snprintf(zh[1], sizeof zh[1], "第 %s 个窗口（从 0 数起）", list);
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "lesson 12 --model %s --steps 4 --data %s --lang %s", model, path, k ? "zh" : "en");
        RunResult r = kvdemo_run(args);
        if (r.status != 0) fail_msg("%s: exit %d: %s", args, r.status, r.err);
        for (int i = 0; i < 2; i++) {
            const char *want = k ? zh[i] : en[i];
            if (!strstr(r.out, want)) fail_msg("%s: expected \"%s\" in:\n%s", args, want, r.out);
        }
        if (strstr(r.out, "the first 8 windows") || strstr(r.out, "前 8 个窗口"))
            fail_msg("%s: still says the first 8 windows", args);
        run_free(&r);
    }
    snprintf(args, sizeof args, "lesson 12 --model %s --steps 4 --data %s --format json", model, path);
    int ne;
    Event *e = kvdemo_json(args, &ne);
    const Event *total = events_find(e, ne, "count", NULL, -1, "val_windows");
    const Event *used = events_find(e, ne, "count", NULL, -1, "val_windows_used");
    if (!total || !used) fail_msg("%s: expected counts val_windows and val_windows_used", args);
    if (total->value != count || used->value != 8)
        fail_msg("%s: expected %ld windows, 8 used; got %g and %g", args, count, total->value, used->value);
    events_free(e, ne);
    unlink(path);
}

// The output of kvdemo ARGS (words split at spaces) on a terminal: stdout
// and stderr together, as a class sees them.
static char *on_terminal(const char *args) {
    char copy[512], *argv[32];
    snprintf(copy, sizeof copy, "%s", args);
    int n = 0;
    for (char *w = strtok(copy, " "); w && n < 31; w = strtok(NULL, " ")) argv[n++] = w;
    argv[n] = NULL;
    int master;
    pid_t pid = kvdemo_spawn_pty(&master, (const char *const *)argv);
    char *out = read_to_end(master);
    close(master);
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("kvdemo %s on a terminal: status %d", args, status);
    return out;
}

// Lessons 11 and 12 and eval --kv-dtype compute for many seconds with
// nothing to print: on a terminal a progress line on stderr says which run
// (drawn in place, wiped before the lesson prints), in the lesson's
// language; on a pipe, nothing. setup's text has 8 validation windows.
static void test_progress_lines(void **state) {
    (void)state;
    static const struct {
        const char *args, *line;
    } CASES[] = {
        {"lesson 11 --model M --steps 4 --bug offset", "lesson 11: without the cache (the reference), generating 4 characters"},
        {"lesson 11 --model M --steps 4 --bug offset", "lesson 11: offset, generating 4 characters"},
        {"lesson 11 --model M --steps 4 --lang zh", "第 11 课：使用缓存，正确实现，生成 4 个字符"},
        {"lesson 12 --model M --steps 4 --data D", "lesson 12, parts 1, 2: bf16, generating 4 characters"},
        {"lesson 12 --model M --steps 4 --data D", "lesson 12, part 3: int4, validation loss, 8 of 8 windows done"},
        {"lesson 12 --model M --steps 4 --data D --lang zh", "第 12 课，第 3 部分：int8，验证损失，已完成 8 / 8 个窗口"},
        {"eval --model M --data D --kv-dtype int8", "eval --kv-dtype: 8 of 8 windows (100%)"},
        {"eval --model M --data D --kv-dtype int4 --lang zh", "评估（--kv-dtype）：第 8 / 8 个窗口（100%）"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char args[512];
        size_t o = 0;
        for (const char *a = CASES[i].args; *a && o + 80 < sizeof args; a++) {   // M: the model, D: the text
            if (*a == 'M' || *a == 'D') o += (size_t)snprintf(args + o, sizeof args - o, "%s", *a == 'M' ? model : text);
            else args[o++] = *a;
        }
        args[o] = '\0';
        char *out = on_terminal(args);
        char want[256];
        snprintf(want, sizeof want, "\r\x1b[K%s", CASES[i].line);
        if (!strstr(out, want)) fail_msg("kvdemo %s on a terminal: expected the progress line \"%s\", got:\n%s", args, CASES[i].line, out);
        free(out);
        RunResult r = kvdemo_run(args);   // stderr a pipe
        if (r.status != 0 || strchr(r.err, '\r') || strstr(r.err, CASES[i].line))
            fail_msg("kvdemo %s on a pipe: expected no progress line, got status %d and: %s", args, r.status, r.err);
        run_free(&r);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bugs_diverge_where_predicted),
        cmocka_unit_test(test_rollback_bugs_leave_target_text),
        cmocka_unit_test(test_lesson11_reports),
        cmocka_unit_test(test_wrong_layout_independent_of_steps),
        cmocka_unit_test(test_bug_refused),
        cmocka_unit_test(test_generate_options),
        cmocka_unit_test(test_lesson12),
        cmocka_unit_test(test_lesson12_names_its_windows),
        cmocka_unit_test(test_progress_lines),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
