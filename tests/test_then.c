// test_then — continuing a conversation (generate --then TEXT): the cache
// the first turn built is valid for exactly its prefix, so the second turn's
// prefill feeds only the tokens the cache lacks (the first turn's last drawn
// token and TEXT), and its text is that of a fresh run on the whole prefix,
// byte for byte; without the cache the whole prefix is fed again.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define STEPS 12
#define THEN " JULIET:"   // 8 characters, each a token

// "kvdemo ARGS" with arguments as given (a prompt with newlines), JSON events.
static Event *run_json(const char *const *args, int *n) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = kvdemo_spawn(fds[1], args);
    close(fds[1]);
    char *out = read_to_end(fds[0]);
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("kvdemo %s ... failed:\n%s", args[0], out);
    Event *e = events_parse(out, n);
    free(out);
    return e;
}

static const Event *must_find(const Event *e, int n, const char *event, const char *run, const char *name) {
    const Event *f = events_find(e, n, event, run, -1, name);
    if (!f) fail_msg("no %s event \"%s\" of run %s", event, name, run);
    return f;
}

static void expect_count(const Event *e, int n, const char *run, const char *name, int want) {
    const Event *f = must_find(e, n, "count", run, name);
    if ((int)f->value != want) fail_msg("%s of %s: expected %d, got %g", name, run, want, f->value);
}

static void test_second_turn_prefills_only_new_tokens(void **state) {
    (void)state;
    const char *cached[] = {"generate", "--steps", "12", "--then", THEN, "--threads", "1", "--format", "json", NULL};
    const char *plain[] = {"generate", "--steps", "12", "--then", THEN, "--threads", "1", "--format", "json",
                           "--no-cache", NULL};
    int nc, np, nf;
    Event *c = run_json(cached, &nc);
    Event *p = run_json(plain, &np);
    const char *first = must_find(c, nc, "text", "cache", "text")->text;
    const char *second = must_find(c, nc, "text", "then-cache", "text")->text;
    int prompt = 6, turn1 = prompt + STEPS, then = (int)strlen(THEN);
    // The cache holds the first turn but its last drawn token, never fed.
    expect_count(c, nc, "then-cache", "cache_held", turn1 - 1);
    expect_count(c, nc, "then-cache", "prefill_tokens", 1 + then);
    expect_count(p, np, "then-no-cache", "cache_held", 0);
    expect_count(p, np, "then-no-cache", "prefill_tokens", turn1 + then);
    const char *second_plain = must_find(p, np, "text", "then-no-cache", "text")->text;
    if (strcmp(second, second_plain)) fail_msg("second turn: without the cache \"%s\", with it \"%s\"", second_plain, second);

    // A fresh run whose prompt is the whole prefix writes the same text.
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s%s", first, THEN);
    if (strncmp(second, prefix, strlen(prefix))) fail_msg("the second turn does not start with \"%s\": \"%s\"", prefix, second);
    const char *fresh[] = {"generate", "--steps", "12", "--prompt", prefix, "--threads", "1", "--format", "json", NULL};
    Event *f = run_json(fresh, &nf);
    const char *want = must_find(f, nf, "text", "cache", "text")->text;
    if (strcmp(want, second)) fail_msg("second turn: expected the fresh run's \"%s\", got \"%s\"", want, second);
    events_free(c, nc);
    events_free(p, np);
    events_free(f, nf);
}

// What the text says, in both languages; --then where it has no meaning.
static void test_second_turn_said(void **state) {
    (void)state;
    const RunResult *en = kvdemo_run_once("generate --steps 12 --then ' JULIET:' --threads 1");
    assert_int_equal(en->status, 0);
    if (!strstr(en->out, "-- its prefill fed 9 tokens at offset 17: only what the cache did not hold"))
        fail_msg("no prefill line in:\n%s", en->out);
    if (!strstr(en->out, "the cache holds 17 of them")) fail_msg("no line on the cache in:\n%s", en->out);
    const RunResult *zh = kvdemo_run_once("generate --steps 12 --then ' JULIET:' --threads 1 --lang zh");
    assert_int_equal(zh->status, 0);
    if (!strstr(zh->out, "这一轮的预填输入了 9 个 token（偏移 17）：只是缓存里还没有的"))
        fail_msg("no prefill line in:\n%s", zh->out);
    expect_failure("generate --then x --paged", 2, "--then is the char GPT's plain generate");
    expect_failure("generate --then x --paged --lang zh", 2, "--then 只用于字符级 GPT");
    expect_failure("generate --then '~'", 2, "'~' (U+007E)");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_turn_prefills_only_new_tokens),
        cmocka_unit_test(test_second_turn_said),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
