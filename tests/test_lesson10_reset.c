// test_lesson10_reset — the chapter's generate drops the cache once
// len(tokens) passes the context, and recomputes the whole context at every
// step from there on. Lesson 10 must show it where it happens, say why (the
// learned positions: the cache can neither roll nor run past T), and report
// the cached run's cost with and without those steps.
//
// The tiny preset (context 32) keeps the runs short; the expected steps are
// counted here from the chapter's rule, not taken from kvdemo.
#include "testutil.h"

#include <stdio.h>
#include <string.h>

enum { CONTEXT = 32, PROMPT = 6 };   // the tiny preset's context; len("ROMEO:")

// The chapter's rule: step k (1-based) sees len(tokens) = PROMPT + k - 1 and
// drops the cache when that is more than the context.
static int first_reset(void) {
    for (int k = 1;; k++)
        if (PROMPT + k - 1 > CONTEXT) return k;
}

static const Event *find(const Event *e, int n, const char *event, const char *name) {
    const Event *x = events_find(e, n, event, NULL, -1, name);
    if (!x) fail_msg("no %s event %s", event, name);
    return x;
}

static void test_reset_shown_where_it_happens(void **state) {
    (void)state;
    int steps = 40, n;
    Event *e = kvdemo_json("lesson 10 --init random --preset tiny --steps 40 --format json", &n);
    int want_first = first_reset(), want_resets = steps - want_first + 1;
    int got_first = (int)find(e, n, "count", "first_reset_step")->value;
    int got_resets = (int)find(e, n, "count", "reset_steps")->value;
    if (got_first != want_first) fail_msg("first_reset_step: expected %d, got %d", want_first, got_first);
    if (got_resets != want_resets) fail_msg("reset_steps: expected %d, got %d", want_resets, got_resets);
    // Cheaper per token without the reset steps than with them.
    double all = find(e, n, "value", "gflop_per_token")->value;   // the first is the run without the cache
    const Event *per = NULL;
    for (int i = 0; i < n; i++)
        if (!strcmp(e[i].event, "value") && !strcmp(e[i].name, "gflop_per_token") && !strcmp(e[i].run, "cache")) per = &e[i];
    assert_non_null(per);
    double kept = find(e, n, "value", "gflop_per_token_without_resets")->value;
    if (!(kept > 0 && kept < per->value && per->value < all))
        fail_msg("GFLOP per token: expected without resets (%g) < cached run (%g) < without the cache (%g)", kept,
                 per->value, all);
    assert_true(find(e, n, "value", "tokens_per_s_without_resets")->value > 0);
    double share = find(e, n, "value", "reset_time_percent")->value;
    if (!(share > 0 && share <= 100)) fail_msg("reset_time_percent: expected a share in (0, 100], got %g", share);
    assert_int_equal(find(e, n, "compare", "logits")->identical, 1);
    events_free(e, n);

    // The text says it at that step, with the chapter's len(tokens).
    RunResult r = kvdemo_run("lesson 10 --init random --preset tiny --steps 40");
    assert_int_equal(r.status, 0);
    char want[128];
    snprintf(want, sizeof want, "step %d: len(tokens) = %d > %d: the cache is dropped", want_first, PROMPT + want_first - 1,
             CONTEXT);
    if (!strstr(r.out, want)) fail_msg("expected \"%s\" in the lesson", want);
    // and why it must (issue 27, item 1): learned positions, baked into every row
    const char *why = "so the cache can neither roll nor run past T. Rotary positions can: lesson 14.";
    if (!strstr(r.out, why)) fail_msg("expected \"%s\" where the cache is dropped", why);
    // Speeds and the resets' share of the time from every run: median (min … max).
    const char *spread[] = {"  speed: ", "    speed: ", "% of this run's arithmetic and "};
    for (int i = 0; i < 3; i++) {
        const char *at = strstr(r.out, spread[i]);
        const char *eol = at ? strchr(at, '\n') : NULL;
        const char *open = at ? strstr(at, " (") : NULL, *dots = at ? strstr(at, " … ") : NULL;
        if (!at || !eol || !open || !dots || open > eol || dots > eol)
            fail_msg("expected \"%s\" with a median (min … max) in the lesson", spread[i]);
    }
    run_free(&r);
    r = kvdemo_run("lesson 10 --init random --preset tiny --steps 40 --lang zh");
    snprintf(want, sizeof want, "第 %d 步：len(tokens) = %d > %d，缓存被丢弃", want_first, PROMPT + want_first - 1, CONTEXT);
    if (!strstr(r.out, want)) fail_msg("expected \"%s\" in the lesson", want);
    if (!strstr(r.out, "所以缓存既不能滚动也不能越过 T。旋转位置编码可以：见第 14 课。"))
        fail_msg("expected the reason for the reset, in Chinese, where the cache is dropped");
    run_free(&r);
}

// prompt + steps within the context: no reset, and nothing said about one.
static void test_no_reset_within_the_context(void **state) {
    (void)state;
    int n;
    char args[128];
    snprintf(args, sizeof args, "lesson 10 --init random --preset tiny --steps %d --format json", first_reset() - 1);
    Event *e = kvdemo_json(args, &n);
    assert_null(events_find(e, n, "count", NULL, -1, "reset_steps"));
    events_free(e, n);
    snprintf(args, sizeof args, "lesson 10 --init random --preset tiny --steps %d --format json", first_reset());
    e = kvdemo_json(args, &n);
    assert_int_equal((int)find(e, n, "count", "reset_steps")->value, 1);
    events_free(e, n);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reset_shown_where_it_happens),
        cmocka_unit_test(test_no_reset_within_the_context),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
