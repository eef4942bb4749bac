// test_step — presenter stepping (--step) driven through a pseudo-terminal:
// a pause after each tensor, the prompt erased before the next screen, a
// fresh screen each time, q quitting cleanly; and a clear word when --step
// cannot work (standard input not a terminal, JSON output).
#include "testutil.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char PROMPT[] = "-- Enter: next   q: quit --";

typedef struct {
    int master;
    pid_t pid;
    char *out;   // everything read so far
    size_t len, cap;
} Term;

static void term_start(Term *t, const char *const *args) {
    memset(t, 0, sizeof *t);
    t->pid = kvdemo_spawn_pty(&t->master, args);
    t->cap = 1 << 16;
    t->out = malloc(t->cap);
    assert_non_null(t->out);
    t->out[0] = '\0';
}

// Reads until the text holds `count` prompts (or the child is done);
// returns 1 when they are there.
static int term_wait_prompts(Term *t, int count) {
    for (;;) {
        int seen = 0;
        for (const char *p = t->out; (p = strstr(p, PROMPT)); p++) seen++;
        if (seen >= count) return 1;
        struct pollfd p = {t->master, POLLIN, 0};
        if (poll(&p, 1, 60000) <= 0) return 0;
        if (t->len + 4097 > t->cap) {
            t->cap *= 2;
            t->out = realloc(t->out, t->cap);
            assert_non_null(t->out);
        }
        ssize_t k = read(t->master, t->out + t->len, 4096);
        if (k <= 0) return 0;
        t->len += (size_t)k;
        t->out[t->len] = '\0';
    }
}

static int term_finish(Term *t) {
    term_wait_prompts(t, 1 << 30);   // reads to the end
    int status;
    assert_int_equal(waitpid(t->pid, &status, 0), t->pid);
    close(t->master);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_step_pauses_clears_and_quits(void **state) {
    (void)state;
    const char *args[] = {"lesson", "2", "--trace", "summary", "--step", NULL};
    Term t;
    term_start(&t, args);
    // Two screens: Enter after each.
    for (int i = 1; i <= 2; i++) {
        if (!term_wait_prompts(&t, i)) fail_msg("pause %d never came: %s", i, t.out);
        assert_int_equal(write(t.master, "\n", 1), 1);
    }
    if (!term_wait_prompts(&t, 3)) fail_msg("pause 3 never came: %s", t.out);
    assert_int_equal(write(t.master, "q", 1), 1);
    int status = term_finish(&t);
    if (status != 0) fail_msg("q: exit status %d, expected 0: %s", status, t.out);
    // Every prompt is erased before anything else is shown.
    int prompts = 0;
    for (const char *p = t.out; (p = strstr(p, PROMPT)); p += sizeof PROMPT - 1) {
        prompts++;
        const char *after = p + sizeof PROMPT - 1;
        if (strncmp(after, "\r\x1b[K", 4) != 0) fail_msg("prompt %d is not erased: %.40s", prompts, after);
    }
    assert_int_equal(prompts, 3);
    // Each Enter starts a fresh screen; q shows nothing more (no comparison).
    int clears = 0;
    for (const char *p = t.out; (p = strstr(p, "\x1b[H\x1b[2J")); p++) clears++;
    if (clears != 2) fail_msg("expected 2 fresh screens, got %d", clears);
    if (strstr(t.out, "Comparison")) fail_msg("output went on after q: %s", t.out);
    free(t.out);
}

static void test_step_to_the_end(void **state) {
    (void)state;
    const char *args[] = {"lesson", "2", "--trace", "none", "--step", NULL};
    Term t;
    term_start(&t, args);
    // With no tensors, the pauses are the lesson's own, one a step.
    int i = 1;
    while (term_wait_prompts(&t, i)) {
        assert_int_equal(write(t.master, " ", 1), 1);
        if (++i > 50) fail_msg("more than 50 pauses");
    }
    int status = 0;
    assert_int_equal(waitpid(t.pid, &status, 0), t.pid);
    close(t.master);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (i < 2) fail_msg("no pause at all");
    if (!strstr(t.out, "identical bit for bit")) fail_msg("the lesson did not reach its end: %s", t.out);
    free(t.out);
}

static void test_step_without_a_terminal_says_so(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 2 --step --trace none");
    assert_int_equal(r.status, 0);
    if (!strstr(r.err, "--step") || !strstr(r.err, "ignored")) fail_msg("no word that --step is ignored: %s", r.err);
    if (strstr(r.out, PROMPT) || strstr(r.err, PROMPT)) fail_msg("a prompt without a terminal");
    run_free(&r);
    r = kvdemo_run("lesson 2 --step --format json");
    assert_int_equal(r.status, 0);
    if (!strstr(r.err, "JSON")) fail_msg("no word that --step is ignored with JSON: %s", r.err);
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_pauses_clears_and_quits),
        cmocka_unit_test(test_step_to_the_end),
        cmocka_unit_test(test_step_without_a_terminal_says_so),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
