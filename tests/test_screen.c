// test_screen — the text of --step and --width fitted to a screen: tensor
// rows elided to a width as PyTorch elides them (tests/fixtures/elide.txt,
// made by tests/screen_reference.py), and lines wrapped at a width.
#include "testutil.h"

#include "buf.h"
#include "screen.h"
#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Reads the next case of elide.txt: precision, shape, values, edge items
// and the text PyTorch printed.
static int next_case(FILE *f, int *precision, Tensor *t, int *edge, char **expected) {
    static char line[1 << 16];
    while (fgets(line, sizeof line, f) && line[0] == '#') {
    }
    if (feof(f)) return 0;
    int ndim, shape[4] = {0}, used = 0;
    assert_int_equal(sscanf(line, "case %d %d%n", precision, &ndim, &used), 2);
    char *p = line + used;
    for (int d = 0; d < ndim; d++) shape[d] = (int)strtol(p, &p, 10);
    *t = tensor_new(ndim, shape);
    assert_non_null(t->data);
    assert_non_null(fgets(line, sizeof line, f));
    assert_memory_equal(line, "values", 6);
    p = line + 6;
    for (size_t i = 0; i < tensor_numel(t); i++) t->data[i] = strtof(p, &p);
    assert_non_null(fgets(line, sizeof line, f));
    assert_int_equal(sscanf(line, "edge %d", edge), 1);
    Buf b;
    buf_init(&b);
    while (fgets(line, sizeof line, f) && strcmp(line, "@@\n") != 0) buf_append(&b, line);
    *expected = buf_take(&b);
    assert_non_null(*expected);
    (*expected)[strlen(*expected) - 1] = '\0';   // print() adds the last newline
    return 1;
}

// The widest line of text, in columns (the fixtures are ASCII).
static int widest(const char *text) {
    int w = 0;
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        if ((int)n > w) w = (int)n;
        p += n + (p[n] != '\0');
    }
    return w;
}

static void test_elides_as_pytorch(void **state) {
    (void)state;
    FILE *f = fopen("tests/fixtures/elide.txt", "r");
    assert_non_null(f);
    int precision, edge, cases = 0;
    Tensor t;
    char *expected;
    while (next_case(f, &precision, &t, &edge, &expected)) {
        cases++;
        // At the width of PyTorch's widest line, the same text: as many
        // columns kept at each end as fit.
        int width = widest(expected);
        char *got = tensor_format_width(&t, precision, NULL, width);
        assert_non_null(got);
        if (strcmp(got, expected) != 0)
            fail_msg("case %d (edge %d) at width %d:\nexpected\n%s\ngot\n%s", cases, edge, width, expected, got);
        free(got);
        // One column less: fewer columns kept, and still within the width
        // (one at each end is the least there is).
        if (edge > 1) {
            got = tensor_format_width(&t, precision, NULL, width - 1);
            assert_non_null(got);
            if (widest(got) > width - 1)
                fail_msg("case %d at width %d: a line of %d columns:\n%s", cases, width - 1, widest(got), got);
            if (!strcmp(got, expected)) fail_msg("case %d: width %d kept %d columns at each end", cases, width - 1, edge);
            free(got);
        }
        free(expected);
        tensor_free(&t);
    }
    fclose(f);
    if (cases < 5) fail_msg("expected at least 5 cases in elide.txt, got %d", cases);
}

// Without a width, or when the row fits, nothing is elided.
static void test_no_width_no_elision(void **state) {
    (void)state;
    int shape[2] = {2, 12};
    Tensor t = tensor_new(2, shape);
    assert_non_null(t.data);
    for (int i = 0; i < 24; i++) t.data[i] = 0.25f * (float)(i - 7);
    char *plain = tensor_format(&t, 4, NULL), *zero = tensor_format_width(&t, 4, NULL, 0);
    char *wide = tensor_format_width(&t, 4, NULL, 200);
    assert_string_equal(plain, zero);
    if (strstr(wide, "...")) fail_msg("elided at 200 columns: %s", wide);
    if (strchr(wide, '\n') != strrchr(wide, '\n')) fail_msg("a row of 12 wrapped at 200 columns: %s", wide);
    free(plain);
    free(zero);
    free(wide);
    tensor_free(&t);
}

static void expect_wrap(const char *text, int width, int col, const char *expected, int expected_col) {
    Buf b;
    buf_init(&b);
    buf_append(&b, "");
    int end = screen_wrap(&b, text, strlen(text), width, col);
    char *got = buf_take(&b);
    assert_non_null(got);
    if (strcmp(got, expected) != 0)
        fail_msg("wrap \"%s\" at %d: expected \"%s\", got \"%s\"", text, width, expected, got);
    if (end != expected_col) fail_msg("wrap \"%s\" at %d: expected to end at column %d, got %d", text, width, expected_col, end);
    free(got);
}

static void test_wrap(void **state) {
    (void)state;
    expect_wrap("short", 10, 0, "short", 5);
    // At the last space that fits; the space itself goes.
    expect_wrap("aaa bbb ccc", 7, 0, "aaa bbb\nccc", 3);
    expect_wrap("aaa bbb ccc", 8, 0, "aaa bbb\nccc", 3);
    // Continuation lines keep the indentation.
    expect_wrap("  one two three", 9, 0, "  one two\n  three", 7);
    // A word longer than the line is cut between two characters.
    expect_wrap("abcdefghij", 4, 0, "abcd\nefgh\nij", 2);
    // Chinese: two columns a character, and a line may break between any two.
    expect_wrap("天气真好天气", 5, 0, "天气\n真好\n天气", 4);
    // Colour sequences take no column.
    expect_wrap("\x1b[31mab\x1b[0m cd", 4, 0, "\x1b[31mab\x1b[0m\ncd", 2);
    // A line that goes on where an earlier piece stopped (column 6).
    expect_wrap("xx yy", 8, 6, "xx\nyy", 2);
}

// One width for every command: --width, else $COLUMNS when it is 20 or more,
// else the terminal's, else 80. A pipe has no terminal size.
static void test_terminal_width(void **state) {
    (void)state;
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    const char *old = getenv("COLUMNS");
    char *saved = old ? strdup(old) : NULL;
    const struct {
        const char *columns;   // NULL: unset
        int want;
    } cases[] = {{"57", 57}, {"20", 20}, {"19", 80}, {"wide", 80}, {NULL, 80}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].columns) setenv("COLUMNS", cases[i].columns, 1);
        else unsetenv("COLUMNS");
        int got = screen_terminal_width(fd[1]);
        if (got != cases[i].want)
            fail_msg("COLUMNS=%s on a pipe: expected %d columns, got %d", cases[i].columns ? cases[i].columns : "(unset)",
                     cases[i].want, got);
    }
    setenv("COLUMNS", "57", 1);
    if (screen_default_width(33) != 33) fail_msg("--width 33: expected 33 columns, got %d", screen_default_width(33));
    if (saved) setenv("COLUMNS", saved, 1);
    else unsetenv("COLUMNS");
    free(saved);
    close(fd[0]);
    close(fd[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elides_as_pytorch),
        cmocka_unit_test(test_no_width_no_elision),
        cmocka_unit_test(test_wrap),
        cmocka_unit_test(test_terminal_width),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
