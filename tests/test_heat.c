// test_heat — heat maps that tell the truth: weights on a fixed 0 .. 1 scale,
// scores on a scale centred on 0, every cell's text readable (WCAG contrast
// of at least 4.5:1, computed here from the xterm palette's definition), a
// legend under each map, and the row comments aligned with colour on; one
// colour meaning per kind of tensor across the lessons, by name only.
#include "testutil.h"

#include "trace.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// The xterm 256-colour palette, from its definition: a 6x6x6 cube from 16
// with levels 0, 95, 135, ..., 255, then 24 greys 8, 18, ..., 238 from 232.
static void xterm_rgb(int index, double rgb[3]) {
    if (index >= 232) {
        rgb[0] = rgb[1] = rgb[2] = 8 + 10 * (index - 232);
        return;
    }
    int i = index - 16, c[3] = {i / 36, i / 6 % 6, i % 6};
    for (int k = 0; k < 3; k++) rgb[k] = c[k] ? 55 + 40 * c[k] : 0;
}

// WCAG 2 relative luminance and contrast ratio.
static double luminance(int index) {
    double rgb[3], l[3];
    xterm_rgb(index, rgb);
    for (int k = 0; k < 3; k++) {
        double v = rgb[k] / 255;
        l[k] = v <= 0.03928 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4);
    }
    return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
}

static double contrast(int a, int b) {
    double x = luminance(a) + 0.05, y = luminance(b) + 0.05;
    return x > y ? x / y : y / x;
}

static void test_every_cell_is_readable(void **state) {
    (void)state;
    for (TraceHeat kind = HEAT_SCORES; kind <= HEAT_PROBS; kind++) {
        int n;
        const int *pal = trace_heat_palette(kind, &n);
        assert_true(n >= 8);
        for (int i = 0; i < n; i++) {
            double c = contrast(pal[i], trace_text_on(pal[i]));
            if (c < 4.5) fail_msg("palette %d entry %d (colour %d): text contrast %.2f, expected >= 4.5", kind, i, pal[i], c);
        }
    }
}

static void test_weights_scale_runs_white_to_dark(void **state) {
    (void)state;
    int n;
    const int *pal = trace_heat_palette(HEAT_PROBS, &n);
    for (int i = 1; i < n; i++)
        if (!(luminance(pal[i]) < luminance(pal[i - 1])))
            fail_msg("weights palette entry %d: luminance %.3f, expected below entry %d's %.3f", i, luminance(pal[i]),
                     i - 1, luminance(pal[i - 1]));
    // A fixed scale: 0 is the first colour and 1 the last, whatever the
    // matrix's own range (a row of 0.4 .. 0.6 does not reach the darkest).
    assert_int_equal(trace_heat_index(HEAT_PROBS, 0.0f, 0.4f, 0.6f), 0);
    assert_int_equal(trace_heat_index(HEAT_PROBS, 1.0f, 0.0f, 1.0f), n - 1);
    int mid = trace_heat_index(HEAT_PROBS, 0.6f, 0.4f, 0.6f);
    int want = (int)lround(0.6 * (n - 1));
    if (mid != want) fail_msg("0.6 on the fixed scale: expected entry %d, got %d", want, mid);
}

static void test_scores_scale_is_centred_on_zero(void **state) {
    (void)state;
    int n;
    const int *pal = trace_heat_palette(HEAT_SCORES, &n);
    assert_int_equal(n % 2, 1);
    int c = n / 2;
    double white = luminance(231);
    if (fabs(luminance(pal[c]) - white) > 1e-9) fail_msg("the centre colour %d is not white", pal[c]);
    for (int i = 1; i <= c; i++) {
        if (!(luminance(pal[i]) > luminance(pal[i - 1]))) fail_msg("negative side: entry %d not lighter than %d", i, i - 1);
        if (!(luminance(pal[n - 1 - i]) > luminance(pal[n - i]))) fail_msg("positive side: entry %d not lighter than %d", n - 1 - i, n - i);
    }
    // 0 is white whatever the range; the largest |score| reaches an end.
    assert_int_equal(trace_heat_index(HEAT_SCORES, 0.0f, 0.02f, 0.07f), c);
    assert_int_equal(trace_heat_index(HEAT_SCORES, 0.07f, 0.02f, 0.07f), n - 1);
    assert_int_equal(trace_heat_index(HEAT_SCORES, -0.5f, -0.5f, 0.25f), 0);
    assert_int_equal(trace_heat_index(HEAT_SCORES, 0.25f, -0.5f, 0.25f), c + (int)lround(0.25 / 0.5 * c));
}

// The visible text of a line: without the ANSI colour sequences.
static void strip(char *dst, const char *src, size_t len) {
    size_t j = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\x1b') {
            while (i < len && src[i] != 'm') i++;
            continue;
        }
        dst[j++] = src[i];
    }
    dst[j] = '\0';
}

// Columns before "  # " on a line (multi-byte characters count one column;
// the matrices' lines hold digits only before the comment).
static int comment_column(const char *line) {
    const char *hash = strstr(line, "  # ");
    return hash ? (int)(hash - line) : -1;
}

static void test_lesson2_colours_legends_and_alignment(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 2 --color always");
    if (r.status != 0) fail_msg("lesson 2 --color always: status %d: %s", r.status, r.err);
    if (!strstr(r.out, "\x1b[")) fail_msg("no colour with --color always");
    if (!strstr(r.out, "colour: 0 ") || !strstr(r.out, " 1 (fixed scale)")) fail_msg("no weights legend");
    if (!strstr(r.out, "(white: 0)")) fail_msg("no scores legend");
    if (!strstr(r.out, "-inf\x1b[0m: masked")) fail_msg("the legend does not say how masked cells look");
    // Within each matrix, the row comments start in one column.
    int prev = -1, lines = 0, checked = 0;
    for (char *p = r.out; *p;) {
        char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[1024];
        if (len >= sizeof line) len = sizeof line - 1;
        strip(line, p, len);
        int col = comment_column(line);
        if (col >= 0 && prev >= 0 && strstr(line, "]")) {
            if (col != prev) fail_msg("line %d: comment at column %d, the row above's at %d: %s", lines, col, prev, line);
            checked++;
        }
        prev = col;
        lines++;
        p = nl ? nl + 1 : p + len;
    }
    if (checked < 10) fail_msg("only %d aligned comment pairs seen", checked);
    run_free(&r);
    r = kvdemo_run("lesson 2 --color never");
    if (strchr(r.out, '\x1b')) fail_msg("colour codes with --color never");
    run_free(&r);
    r = kvdemo_run("lesson 2 --color always --lang zh");
    if (!strstr(r.out, "颜色：0 ") || !strstr(r.out, "固定刻度")) fail_msg("no Chinese legend");
    run_free(&r);
}

static void test_lessons_without_matrices_say_colour_does_nothing(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 7 --color always");
    assert_int_equal(r.status, 0);
    if (!strstr(r.err, "--color changes nothing")) fail_msg("lesson 7 does not say --color changes nothing: %s", r.err);
    run_free(&r);
    r = kvdemo_run("lesson 2 --color always");
    if (strstr(r.err, "--color")) fail_msg("lesson 2 honours --color but says otherwise: %s", r.err);
    run_free(&r);
}

// Every trace_tensor* call of the lessons names what its matrix holds
// (HEAT_NONE, HEAT_SCORES, HEAT_PROBS), never a bare number: lesson 6.3 once
// painted softmax weights on the scores' scale, and lesson 3's mask got a
// legend of -0.0000 … 0.0000.
static void test_heat_kinds_are_named(void **state) {
    (void)state;
    DIR *d = opendir("lessons");
    if (!d) fail_msg("cannot open lessons/");
    int calls = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 3 || strcmp(e->d_name + n - 2, ".c")) continue;
        char path[512];
        snprintf(path, sizeof path, "lessons/%s", e->d_name);
        char *src = file_slurp(path);
        for (char *p = src; (p = strstr(p, "trace_tensor")); p++) {
            char *open = strchr(p, '(');
            if (!open || (p >= src + 5 && !strncmp(p - 5, "void ", 5))) continue;
            // Its top-level arguments, strings and nested parentheses skipped.
            const char *arg[16];
            int nargs = 0, depth = 0;
            char *end = open;
            for (; *end; end++) {
                if (*end == '"') {
                    for (end++; *end && *end != '"'; end++)
                        if (*end == '\\' && end[1]) end++;
                    continue;
                }
                if (*end == '(' || *end == '[' || *end == '{') {
                    if (depth++ == 0 && nargs < 16) arg[nargs++] = end + 1;
                } else if (*end == ')' || *end == ']' || *end == '}') {
                    if (--depth == 0) break;
                } else if (*end == ',' && depth == 1 && nargs < 16) {
                    arg[nargs++] = end + 1;
                }
            }
            if (!*end || nargs < 7) continue;   // a declaration or a mention in a comment
            // The heat is the last argument, or the one before a TraceKind.
            const char *last = arg[nargs - 1];
            while (*last == ' ' || *last == '\n') last++;
            if (!strncmp(last, "TRACE_INT", 9) || !strncmp(last, "TRACE_BOOL", 10) || !strncmp(last, "TRACE_REAL", 10)) {
                last = arg[nargs - 2];
                while (*last == ' ' || *last == '\n') last++;
            }
            if (strncmp(last, "HEAT_", 5)) {
                int line = 1;
                for (char *q = src; q < p; q++) line += *q == '\n';
                fail_msg("%s:%d: the heat of a trace_tensor call is \"%.12s\", expected HEAT_NONE, HEAT_SCORES or HEAT_PROBS",
                         path, line, last);
            }
            calls++;
            p = end;
        }
        free(src);
    }
    closedir(d);
    if (calls < 40) fail_msg("expected the lessons' trace_tensor calls (40 or more), found %d", calls);
    // Lesson 6.3: x = scores[2] on the scores' scale, its softmax on the weights'.
    RunResult r = kvdemo_run("lesson 6.3 --color always --trace summary --max-n 1024 --repeat 1 --init random --preset tiny");
    char *plain = malloc(strlen(r.out) + 1);
    strip(plain, r.out, strlen(r.out));
    const char *y = strstr(plain, "y_safe (1, 3)"), *x = strstr(plain, "x = scores[2]");
    const char *ylegend = y ? strstr(y, "colour: ") : NULL, *xlegend = x ? strstr(x, "colour: ") : NULL;
    if (!ylegend || strncmp(strchr(ylegend, '\n') - strlen("(fixed scale)"), "(fixed scale)", 13))
        fail_msg("lesson 6.3: y_safe's legend is not the weights' fixed 0 .. 1 scale: %.80s", ylegend ? ylegend : "(none)");
    if (!xlegend || !strstr(xlegend, "(white: 0)") || strstr(xlegend, "(white: 0)") > strchr(xlegend, '\n'))
        fail_msg("lesson 6.3: x's legend is not the scores' scale: %.80s", xlegend ? xlegend : "(none)");
    free(plain);
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_cell_is_readable),
        cmocka_unit_test(test_weights_scale_runs_white_to_dark),
        cmocka_unit_test(test_scores_scale_is_centred_on_zero),
        cmocka_unit_test(test_lesson2_colours_legends_and_alignment),
        cmocka_unit_test(test_heat_kinds_are_named),
        cmocka_unit_test(test_lessons_without_matrices_say_colour_does_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
