// test_race — generation a class can watch. `kvdemo race`: both runs write
// the text the chapter's numpy generate writes (tests/gpt_reference.py), the
// cached run's resets past the context are counted, and on a terminal the
// race is drawn live without echoing the keys a student types meanwhile.
// `kvdemo generate` streams its text a character at a time, with a tokens/s
// counter on a terminal only.
#include "testutil.h"

#include "buf.h"
#include "utf8.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *MODEL_A = "tests/fixtures/gpt_a.kvgp";   // context 16
static const char *GENERATE = "tests/fixtures/gpt_generate.txt";

static void test_race_texts_are_numpys(void **state) {
    (void)state;
    double want[1024];
    int len = fixture_array(GENERATE, "model_a_nocache_text_utf8", want, 1024);
    char args[256];
    snprintf(args, sizeof args, "race --model %s --steps 40 --seed 42 --format json", MODEL_A);
    int n;
    Event *e = kvdemo_json(args, &n);
    static const char *const runs[2] = {"no-cache", "cache"};
    for (int r = 0; r < 2; r++) {
        const Event *t = events_find(e, n, "text", runs[r], -1, "text");
        if (!t) fail_msg("no text event for the %s run", runs[r]);
        if ((int)strlen(t->text) != len) fail_msg("%s: text of %zu bytes, numpy's has %d", runs[r], strlen(t->text), len);
        for (int i = 0; i < len; i++)
            if ((unsigned char)t->text[i] != (int)want[i])
                fail_msg("%s: text byte %d: numpy 0x%02X, kvdemo 0x%02X", runs[r], i, (int)want[i],
                         (unsigned char)t->text[i]);
        const Event *tm = events_find(e, n, "timing", runs[r], -1, runs[r]);
        if (!tm || !(tm->seconds > 0)) fail_msg("%s: no positive timing", runs[r]);
    }
    // The chapter's reset: a cached step needs len(tokens) <= T = 16. Step s
    // (0-based) starts with 6 + s tokens, so every s >= 1 with 6 + s > 16
    // feeds the whole window again.
    int resets = 0;
    for (int s = 1; s < 40; s++) resets += 6 + s > 16;
    const Event *rs = events_find(e, n, "count", "cache", -1, "reset_steps");
    assert_non_null(rs);
    if ((int)rs->value != resets) fail_msg("reset steps: expected %d, got %d", resets, (int)rs->value);
    const Event *same = events_find(e, n, "count", NULL, -1, "texts_identical");
    assert_non_null(same);
    assert_int_equal((int)same->value, 1);
    events_free(e, n);
}

static void test_race_text_mode_says_both_identical(void **state) {
    (void)state;
    char args[256];
    snprintf(args, sizeof args, "race --model %s --steps 20 --seed 42", MODEL_A);
    RunResult r = kvdemo_run(args);
    if (r.status != 0) fail_msg("exit status %d: %s", r.status, r.err);
    if (!strstr(r.out, "the same text")) fail_msg("no word that the texts are the same: %s", r.out);
    // The ratio as x ± e with the verdict its spread supports (which one is
    // the machine's business, not the test's).
    if (!strstr(r.out, "With the cache: ") || !strstr(r.out, " ± ") || !strstr(r.out, "scatter of each run's step times"))
        fail_msg("no ratio as x ± e: %s", r.out);
    // One race concludes only beyond what races apart differ by, and says so.
    if (!strstr(r.out, "one race concludes only beyond a factor of 2.5, ± included"))
        fail_msg("no word of what one race can conclude: %s", r.out);
    expect_verdict_agrees(strstr(r.out, "With the cache: "), "race's verdict");
    if (strstr(r.out, "\x1b[")) fail_msg("escape sequences in piped output: %s", r.out);
    run_free(&r);
    r = kvdemo_run_env("LANG=zh_CN.UTF-8", args);
    if (r.status != 0 || !strstr(r.out, "一字不差") || !strstr(r.out, "使用缓存：") || !strstr(r.out, " ± ") ||
        !strstr(r.out, "超过 2.5 倍（含 ±）时才下结论"))
        fail_msg("zh: status %d: %s", r.status, r.out);
    expect_verdict_agrees(strstr(r.out, "使用缓存："), "race's verdict, zh");
    run_free(&r);
}

static void test_race_usage_errors(void **state) {
    (void)state;
    expect_failure("race --no-cache", 2, "unknown option '--no-cache' for 'race'");
    expect_failure("race --steps 0", 2, "--steps takes a whole number from 1");
    expect_failure("race --prompt 天气", 2, "--prompt");
}


// generate through a pipe: the first characters arrive while the generation
// is still running (a reader need not wait for the end), and what arrives in
// the end is the plain text, without escape sequences.
static void test_generate_streams_through_a_pipe(void **state) {
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    const char *args[] = {"generate", "--model", MODEL_A, "--no-cache", "--steps", "600", "--seed", "42", NULL};
    pid_t pid = kvdemo_spawn(fds[1], args);
    close(fds[1]);
    char first[64];
    struct pollfd p = {fds[0], POLLIN, 0};
    assert_true(poll(&p, 1, 120000) == 1);
    ssize_t k = read(fds[0], first, sizeof first - 1);
    assert_true(k > 0);
    int status;
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done != 0) fail_msg("generate had already ended when its first bytes arrived: it did not stream");
    char *rest = read_to_end(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    first[k] = '\0';
    if (strncmp(first, "ROMEO:", 6) != 0) fail_msg("the stream does not start with the prompt: %s", first);
    if (strchr(first, '\x1b') || strchr(rest, '\x1b')) fail_msg("escape sequences in piped output");
    if (!strstr(rest, "tokens/s")) fail_msg("no summary line at the end: %s", rest);
    free(rest);
    close(fds[0]);
}

// On a terminal the tokens/s counter stands behind the text while it grows.
static void test_generate_counter_on_a_terminal(void **state) {
    (void)state;
    int master;
    const char *args[] = {"generate", "--steps", "30", "--seed", "42", NULL};
    pid_t pid = kvdemo_spawn_pty(&master, args);
    char *out = read_to_end(master);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    // ESC 7, dim "  N tokens/s", ESC 8: drawn behind the text, then erased.
    if (!strstr(out, "\x1b" "7\x1b[2m  ")) fail_msg("no live counter on the terminal: %s", out);
    if (!strstr(out, "\x1b[K")) fail_msg("the counter is never erased: %s", out);
    free(out);
    close(master);
}

static void test_race_live_on_a_terminal(void **state) {
    (void)state;
    int master;
    const char *args[] = {"race", "--steps", "40", "--seed", "42", "--model", MODEL_A, NULL};
    pid_t pid = kvdemo_spawn_pty(&master, args);
    // Once the race has started (its first line is out), a student types.
    char first[256];
    struct pollfd p = {master, POLLIN, 0};
    assert_true(poll(&p, 1, 60000) == 1);
    ssize_t k = read(master, first, sizeof first - 1);
    assert_true(k > 0);
    first[k] = '\0';
    const char keys[] = "qzqz\n";
    assert_int_equal(write(master, keys, sizeof keys - 1), (ssize_t)(sizeof keys - 1));
    char *out = read_to_end(master);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("race on a terminal: status %d: %s%s", status, first, out);
    if (strstr(first, "qzqz") || strstr(out, "qzqz")) fail_msg("the typed keys were echoed: %s%s", first, out);
    if (!strstr(out, "without the cache") || !strstr(out, "with the cache") || !strstr(out, "done"))
        fail_msg("no live lines for both runs: %s", out);
    if (!strstr(out, "\x1b[K")) fail_msg("the live lines are not drawn in place: %s", out);
    free(out);
    close(master);
}

// The terminal's text without its escape sequences and carriage returns.
static char *without_escapes(const char *all) {
    char *plain = malloc(strlen(all) + 1);
    assert_non_null(plain);
    size_t j = 0;
    for (size_t i = 0; all[i]; i++) {
        if (all[i] == '\x1b') {
            while (all[i] && !(all[i] >= 'A' && all[i] <= 'Z') && !(all[i] >= 'a' && all[i] <= 'z')) i++;
            if (!all[i]) break;
            continue;
        }
        if (all[i] != '\r') plain[j++] = all[i];
    }
    plain[j] = '\0';
    return plain;
}

// On a 60-column terminal every line the race draws fits in 60 columns (a
// line one column too wide scrolled the screen at every redraw), and Ctrl-C
// marks the runs it stopped "interrupted", never "done".
static void test_race_fits_and_says_interrupted(void **state) {
    (void)state;
    int master;
    // The shipped model: long enough a race for Ctrl-C to stop it midway.
    const char *args[] = {"race", "--steps", "1000", "--seed", "42", "--model", "data/tinyshakespeare-gpt.bin", NULL};
    setenv("COLUMNS", "60", 1);
    pid_t pid = kvdemo_spawn_pty(&master, args);
    unsetenv("COLUMNS");
    char first[4096];
    struct pollfd p = {master, POLLIN, 0};
    assert_true(poll(&p, 1, 60000) == 1);
    ssize_t k = read(master, first, sizeof first - 1);
    assert_true(k > 0);
    first[k] = '\0';
    nanosleep(&(struct timespec){1, 0}, NULL);
    kill(pid, SIGINT);
    char *out = read_to_end(master);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    size_t n = strlen(first) + strlen(out);
    char *all = malloc(n + 1);
    assert_non_null(all);
    snprintf(all, n + 1, "%s%s", first, out);
    char *plain = without_escapes(all);
    if (!strstr(plain, "interrupted"))
        fail_msg("Ctrl-C: no run marked interrupted (status %d, %zu bytes) in:\n%.2000s", status, n, plain);
    int lines = 0;
    for (char *line = plain; line && *line; lines++) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (strstr(line, "tokens/s") && utf8_width(line) > 60) fail_msg("a race line of %d columns on a 60-column terminal: %s", utf8_width(line), line);
        line = nl ? nl + 1 : NULL;
    }
    free(all);
    free(plain);
    free(out);
    close(master);
}

// The widest line of text that holds mark ("/1000", a run's progress; "" for
// every line).
static int widest_line(char *text, const char *mark) {
    int widest = 0;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (strstr(line, mark) && utf8_width(line) > widest) widest = utf8_width(line);
        line = nl ? nl + 1 : NULL;
    }
    return widest;
}

// Bytes that arrive on fd within ms milliseconds.
static char *read_for(int fd, int ms) {
    Buf b;
    buf_init(&b);
    char chunk[4096];
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        int left = ms - (int)((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000);
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, left) <= 0) break;
        ssize_t k = read(fd, chunk, sizeof chunk);
        if (k <= 0) break;
        buf_appendn(&b, chunk, (size_t)k);
    }
    return buf_take(&b);
}

// A terminal made narrower during the race (SIGWINCH): the lines drawn after
// it fit the new width (the width was read once, and a resize broke every
// redraw). The race starts at the pty's 120 columns, is cut to 50.
static void test_race_follows_a_resize(void **state) {
    (void)state;
    int master;
    const char *args[] = {"race", "--steps", "1000", "--seed", "42", "--model", "data/tinyshakespeare-gpt.bin", NULL};
    unsetenv("COLUMNS");
    pid_t pid = kvdemo_spawn_pty_size(&master, args, 120);
    struct pollfd p = {master, POLLIN, 0};
    assert_true(poll(&p, 1, 60000) == 1);   // the model is loaded and the race has begun
    char *before = read_for(master, 500), *plain = without_escapes(before);
    int wide = widest_line(plain, "/1000");
    if (wide <= 50) fail_msg("before the resize: expected a run line wider than 50 columns, the widest was %d", wide);
    struct winsize ws = {.ws_row = 30, .ws_col = 50};
    assert_int_equal(ioctl(master, TIOCSWINSZ, &ws), 0);   // the kernel sends SIGWINCH
    free(read_for(master, 200));                           // redraws that may have started before it
    char *after = read_for(master, 500), *late = without_escapes(after);
    kill(pid, SIGINT);
    free(read_to_end(master));
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!strstr(late, "/1000")) fail_msg("no run line drawn after the resize (status %d):\n%.2000s", status, late);
    int got = widest_line(late, "");
    if (got > 50) fail_msg("after the resize to 50 columns: expected lines of at most 50 columns, got %d:\n%.2000s", got, late);
    free(before), free(plain), free(after), free(late);
    close(master);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_race_texts_are_numpys),
        cmocka_unit_test(test_race_text_mode_says_both_identical),
        cmocka_unit_test(test_race_usage_errors),
        cmocka_unit_test(test_race_live_on_a_terminal),
        cmocka_unit_test(test_race_fits_and_says_interrupted),
        cmocka_unit_test(test_race_follows_a_resize),
        cmocka_unit_test(test_generate_streams_through_a_pipe),
        cmocka_unit_test(test_generate_counter_on_a_terminal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
