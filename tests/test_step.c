// test_step — presenter stepping (--step) driven through a pseudo-terminal:
// a pause after each tensor, the prompt erased before the next screen, a
// fresh screen each time, q quitting cleanly, b showing the screen before
// again, screens that fit their width (--width); and a clear word when
// --step cannot work (standard input not a terminal, JSON output).
#define _XOPEN_SOURCE 600   // ptsname
#include "testutil.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static const char PROMPT[] = "-- Enter: next  b: back  q: quit --";
static const char ANY_PROMPT[] __attribute__((unused)) = "q: quit --";   // the end of every prompt (next, more, an earlier page)
static const char ANY_PROMPT_ZH[] = "q：退出 --";
static const char CLEAR[] = "\x1b[H\x1b[2J";

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

// Reads until the text holds `count` times needle (or the child is done);
// returns 1 when they are there.
static int term_wait_text(Term *t, const char *needle, int count) {
    for (;;) {
        int seen = 0;
        for (const char *p = t->out; (p = strstr(p, needle)); p++) seen++;
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

static int term_wait_prompts(Term *t, int count) { return term_wait_text(t, PROMPT, count); }

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

// The screen between a clear (or the start) and the prompt after it.
static char *screen_text(const char *from, const char *prompt) {
    const char *end = strstr(from, prompt);
    assert_non_null(end);
    char *s = strndup(from, (size_t)(end - from));
    assert_non_null(s);
    return s;
}

static void expect_same_screen(const char *what, const char *expected, const char *got, size_t got_len) {
    size_t n = strlen(expected), i = 0;
    while (i < n && i < got_len && expected[i] == got[i]) i++;
    if (i < n || got_len != n)
        fail_msg("%s: differs at byte %zu of %zu (got %zu bytes): expected \"%.40s\", got \"%.40s\"", what, i, n, got_len,
                 expected + (i < n ? i : n), got + (i < got_len ? i : got_len));
}

static void test_step_back_shows_the_screen_before(void **state) {
    (void)state;
    const char *args[] = {"lesson", "2", "--trace", "summary", "--step", NULL};
    Term t;
    term_start(&t, args);
    if (!term_wait_prompts(&t, 1)) fail_msg("pause 1 never came: %s", t.out);
    char *screen1 = screen_text(t.out, PROMPT);
    size_t mark = t.len;
    assert_int_equal(write(t.master, "\n", 1), 1);
    if (!term_wait_prompts(&t, 2)) fail_msg("pause 2 never came: %s", t.out);
    const char *clear = strstr(t.out + mark, CLEAR);
    assert_non_null(clear);
    char *screen2 = screen_text(clear + strlen(CLEAR), PROMPT);
    if (!strcmp(screen1, screen2)) fail_msg("the two screens are the same: %s", screen1);

    // b: the first screen again, on a cleared terminal, with its own prompt.
    mark = t.len;
    assert_int_equal(write(t.master, "b", 1), 1);
    if (!term_wait_text(&t, "-- page 1/2", 1)) fail_msg("b showed no earlier page: %s", t.out + mark);
    clear = strstr(t.out + mark, CLEAR);
    if (!clear) fail_msg("b did not clear the screen: %s", t.out + mark);
    const char *from = clear + strlen(CLEAR);
    expect_same_screen("the screen b shows", screen1, from, (size_t)(strstr(from, "-- page 1/2") - from));

    // b again: there is nothing before the first screen; still page 1.
    // Enter: forward, to the screen the lesson stands at, and its prompt.
    mark = t.len;
    assert_int_equal(write(t.master, "\n", 1), 1);
    if (!term_wait_prompts(&t, 3)) fail_msg("Enter did not come back to the lesson: %s", t.out + mark);
    clear = strstr(t.out + mark, CLEAR);
    if (!clear) fail_msg("going forward did not clear the screen: %s", t.out + mark);
    from = clear + strlen(CLEAR);
    expect_same_screen("the screen Enter comes back to", screen2, from, (size_t)(strstr(from, PROMPT) - from));

    // q still quits, at once and cleanly.
    assert_int_equal(write(t.master, "q", 1), 1);
    int status = term_finish(&t);
    if (status != 0) fail_msg("q: exit status %d, expected 0", status);
    if (strstr(t.out, "Comparison")) fail_msg("output went on after q");
    free(screen1);
    free(screen2);
    free(t.out);
}

// Columns of a code point on a terminal, counted here on their own: 2 for
// the East Asian wide and full-width blocks a lesson prints, else 1.
static int wide(unsigned cp) {
    return (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0xA4CF) || (cp >= 0xAC00 && cp <= 0xD7A3) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
           (cp >= 0xFFE0 && cp <= 0xFFE6);
}

// Fails when a line of the terminal's text goes past `width` columns or a
// page (from one clear to the next) has more than `height` lines. Colour
// and cursor sequences take no column; \r goes back to column 0.
static void expect_fits(const char *out, int width, int height) {
    int col = 0, line = 1, page_lines = 0;
    for (const unsigned char *p = (const unsigned char *)out; *p;) {
        if (*p == 0x1b) {
            if (!strncmp((const char *)p, CLEAR, strlen(CLEAR))) page_lines = 0;
            p++;
            if (*p == '[') p++;
            while (*p && !(*p >= 0x40 && *p <= 0x7e)) p++;
            if (*p) p++;
            continue;
        }
        if (*p == '\r' || *p == '\n') {
            if (*p == '\n') {
                line++;
                if (++page_lines > height - 1) fail_msg("line %d: a page of more than %d lines and its prompt", line, height - 1);
            }
            col = 0;
            p++;
            continue;
        }
        unsigned cp = *p;
        int n = 1;
        if (*p >= 0xf0) cp = *p & 0x07, n = 4;
        else if (*p >= 0xe0) cp = *p & 0x0f, n = 3;
        else if (*p >= 0xc0) cp = *p & 0x1f, n = 2;
        for (int k = 1; k < n && p[k]; k++) cp = cp << 6 | (p[k] & 0x3f);
        col += wide(cp) ? 2 : 1;
        if (col > width) {
            const char *start = (const char *)p;
            while (start > out && start[-1] != '\n') start--;
            fail_msg("line %d: expected at most %d columns, got %d: %.120s", line, width, col, start);
        }
        while (n-- > 0 && *p) p++;
    }
}

// Every prompt answered with Enter up to the end; returns the exit status.
static int step_to_the_end(Term *t, const char *prompt, int *pauses) {
    int i = 1;
    while (term_wait_text(t, prompt, i)) {
        assert_int_equal(write(t->master, "\n", 1), 1);
        if (++i > 400) fail_msg("more than 400 pauses");
    }
    *pauses = i - 1;
    int status = 0;
    assert_int_equal(waitpid(t->pid, &status, 0), t->pid);
    close(t->master);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_step_width_elides_and_pages(void **state) {
    (void)state;
    // Lesson 2 in full, in Chinese (two columns a character), 40 columns
    // wide: every tensor row of 4 values with its comment is too wide. A
    // page of 11 lines ($LINES) is too short for some steps.
    const char *args[] = {"lesson", "2", "--step", "--width", "40", "--lang", "zh", "--color", "always", NULL};
    Term t;
    setenv("LINES", "11", 1);
    term_start(&t, args);
    unsetenv("LINES");
    int pauses, status = step_to_the_end(&t, ANY_PROMPT_ZH, &pauses);
    if (status != 0) fail_msg("exit status %d: %s", status, t.out);
    if (!strstr(t.out, "逐位完全相同")) fail_msg("the lesson did not reach its end: %s", t.out);
    if (!strstr(t.out, "  ...")) fail_msg("no elided tensor at 40 columns: %s", t.out);
    expect_fits(t.out, 40, 11);
    if (!strstr(t.out, "-- 未完  回车")) fail_msg("no page was full (-- more --) in %d pauses", pauses);
    // A tensor is never cut from its name and shape by a page's end: no
    // clear between the line before "tensor(" and it (the printed values,
    // not the code line's "torch.tensor(").
    for (const char *p = t.out; (p = strstr(p, "tensor(")); p++) {
        if (p > t.out && p[-1] == '.') continue;
        const char *line = p;
        while (line > t.out && line[-1] != '\n') line--;
        const char *clear = strstr(line, CLEAR);
        if (clear && clear < p) fail_msg("a page ends between a tensor's shape and its values: %.80s", line > t.out + 80 ? line - 80 : t.out);
    }
    free(t.out);
}

// Rows of lesson 7's table shown so far: lines (after any erased prompt)
// that start with two spaces and the step's number.
static int table_rows(const char *out) {
    int rows = 0;
    for (const char *line = out; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *start = line;
        for (const char *k; (k = strstr(start, "\x1b[K")) && k < line + len;) start = k + 3;
        if (start[0] == ' ' && start[1] == ' ' && start[2] >= '1' && start[2] <= '9') rows++;
        line = end ? end + 1 : NULL;
    }
    return rows;
}

static void test_step_lesson7_grows_a_row_a_key(void **state) {
    (void)state;
    const char *args[] = {"lesson", "7", "--step", "--lang", "en", NULL};
    Term t;
    term_start(&t, args);
    const int pauses = 6;
    for (int k = 1; k <= pauses; k++) {
        if (!term_wait_prompts(&t, k)) fail_msg("pause %d never came: %s", k, t.out);
        int rows = table_rows(t.out);
        if (rows != k) fail_msg("pause %d: expected %d rows of the table, got %d: %s", k, k, rows, t.out);
        assert_int_equal(write(t.master, "\n", 1), 1);
    }
    if (!term_wait_prompts(&t, pauses + 1)) fail_msg("pause %d never came", pauses + 1);
    assert_int_equal(write(t.master, "q", 1), 1);
    int status = term_finish(&t);
    if (status != 0) fail_msg("q: exit status %d, expected 0", status);
    // The rows above stay: no clear from the first row on.
    const char *first = strstr(t.out, "  1 ");
    assert_non_null(first);
    if (strstr(first, CLEAR)) fail_msg("the table's screen was cleared between two rows: %s", first);
    free(t.out);
}

// Lesson 10 on a terminal is the race: both runs side by side, live, each
// with its bar (█) and tokens/s. On a pipe, and with --no-race, the runs
// come one after the other, the cache's shapes first.
static char *pty_output(const char *const *args, int *status) {
    int master;
    pid_t pid = kvdemo_spawn_pty(&master, args);
    char *out = read_to_end(master);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    close(master);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

static const char BAR[] = "\xe2\x96\x88";   // █
static const char SHAPES[] = "The cache as it grows";

static void test_lesson10_races_on_a_terminal_only(void **state) {
    (void)state;
    const char *race[] = {"lesson", "10", "--init", "random", "--preset", "tiny", "--steps", "8", "--lang", "en", NULL};
    int status;
    char *out = pty_output(race, &status);
    if (status != 0) fail_msg("lesson 10 on a terminal: exit status %d: %s", status, out);
    if (!strstr(out, BAR) || !strstr(out, "without the cache  ") || !strstr(out, "tokens/s"))
        fail_msg("lesson 10 on a terminal did not race: %s", out);
    if (!strstr(out, "Both runs wrote the same text")) fail_msg("the race did not end with the texts compared: %s", out);
    if (strstr(out, SHAPES)) fail_msg("lesson 10 on a terminal ran one way after the other: %s", out);
    free(out);

    const char *no_race[] = {"lesson", "10", "--init", "random", "--preset", "tiny", "--steps", "8", "--lang", "en", "--no-race", NULL};
    out = pty_output(no_race, &status);
    if (status != 0) fail_msg("--no-race: exit status %d: %s", status, out);
    if (strstr(out, BAR) || !strstr(out, SHAPES)) fail_msg("--no-race on a terminal still raced: %s", out);
    free(out);

    RunResult r = kvdemo_run("lesson 10 --init random --preset tiny --steps 8 --lang en");
    assert_int_equal(r.status, 0);
    if (strstr(r.out, BAR) || !strstr(r.out, SHAPES)) fail_msg("lesson 10 on a pipe raced: %s", r.out);
    run_free(&r);
}

// The terminal's line modes of the pseudo-terminal behind t (its other end is
// held open, so that they outlive the child that changed them).
static tcflag_t term_lflag(int slave) {
    struct termios m;
    assert_int_equal(tcgetattr(slave, &m), 0);
    return m.c_lflag & (ECHO | ICANON);
}

// Issue 29, 3: a signal at a pause once left the terminal without echo and
// line editing for the shell that comes next. Sent at the first pause (or,
// key "\x03", typed as Ctrl-C), each signal must end kvdemo as that signal
// (the exit status says so) with ECHO and ICANON back. No shell runs between
// the test and kvdemo, so none can put the modes back in its place.
static void signal_at_pause(const char *const *args, const char *wait_for, int sig, const char *key) {
    Term t;
    term_start(&t, args);
    int slave = open(ptsname(t.master), O_RDWR | O_NOCTTY);
    assert_true(slave >= 0);
    if (!term_wait_text(&t, wait_for, 1)) fail_msg("signal %d: \"%s\" never came: %s", sig, wait_for, t.out);
    // The pause (or race) runs with echo and line editing off.
    if (term_lflag(slave) != 0) fail_msg("signal %d: the terminal still echoes while kvdemo waits", sig);
    if (key) assert_int_equal(write(t.master, key, strlen(key)), (ssize_t)strlen(key));
    else assert_int_equal(kill(t.pid, sig), 0);
    int status;
    pid_t done = 0;
    // Read what comes meanwhile, so that kvdemo never waits on a full terminal.
    struct pollfd p = {t.master, POLLIN, 0};
    for (int i = 0; i < 600 && (done = waitpid(t.pid, &status, WNOHANG)) == 0; i++) {
        char sink[4096];
        if (poll(&p, 1, 100) == 1 && read(t.master, sink, sizeof sink) <= 0) break;
    }
    if (done == 0) {   // a minute on: kvdemo did not end
        kill(t.pid, SIGKILL);
        done = waitpid(t.pid, &status, 0);
    }
    assert_int_equal(done, t.pid);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != sig)
        fail_msg("signal %d: expected the exit status to report signal %d, got status 0x%x", sig, sig, (unsigned)status);
    tcflag_t got = term_lflag(slave);
    if (got != (ECHO | ICANON))
        fail_msg("signal %d: terminal modes after the exit: expected ECHO %d ICANON %d, got ECHO %d ICANON %d", sig, 1, 1,
                 (got & ECHO) != 0, (got & ICANON) != 0);
    close(slave);
    close(t.master);
    free(t.out);
}

static void test_step_signal_restores_the_terminal(void **state) {
    (void)state;
    const char *args[] = {"lesson", "2", "--trace", "summary", "--step", NULL};
    signal_at_pause(args, PROMPT, SIGINT, "\x03");   // Ctrl-C typed at the pause
    signal_at_pause(args, PROMPT, SIGINT, NULL);
    signal_at_pause(args, PROMPT, SIGTERM, NULL);
    signal_at_pause(args, PROMPT, SIGHUP, NULL);
    signal_at_pause(args, PROMPT, SIGQUIT, NULL);
}

// race turns echo off while it runs; Ctrl-C stops it cleanly (its own
// handler), SIGTERM and SIGHUP end it with the terminal given back.
static void test_race_signal_restores_the_terminal(void **state) {
    (void)state;
    const char *args[] = {"race", "--steps", "100000", "--seed", "42", NULL};
    signal_at_pause(args, "without the cache  ", SIGTERM, NULL);
    signal_at_pause(args, "without the cache  ", SIGHUP, NULL);
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
    // The screen's size is the default's (80 x 30: the pseudo-terminal has
    // none) or --width, whatever the shell running the tests has.
    unsetenv("COLUMNS");
    unsetenv("LINES");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_pauses_clears_and_quits),
        cmocka_unit_test(test_step_to_the_end),
        cmocka_unit_test(test_step_back_shows_the_screen_before),
        cmocka_unit_test(test_step_width_elides_and_pages),
        cmocka_unit_test(test_step_lesson7_grows_a_row_a_key),
        cmocka_unit_test(test_lesson10_races_on_a_terminal_only),
        cmocka_unit_test(test_step_without_a_terminal_says_so),
        cmocka_unit_test(test_step_signal_restores_the_terminal),
        cmocka_unit_test(test_race_signal_restores_the_terminal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
