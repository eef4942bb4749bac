// test_trace — the trace's table: columns line up in terminal columns with
// Chinese text in them, no line ends in spaces, and JSON has one event per
// row with numbers as numbers; trace_compare says rounding or a change.
#include "testutil.h"

#include "trace.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const TraceColumn COLS[] = {
    {"step", "步", 4, 0, NULL},
    {"tokens", "输入", 10, 0, NULL},
    {"rows", "行数", 6, 1, NULL},
    {"total", "累计", 6, 1, "rows_total"},
};
static const TraceTable TABLE = {"t", 4, COLS};
static const char *const ROWS[4][4] = {
    {"1", "天", "1", "1"}, {"2", "天气", "2", "3"}, {"10", "ab", "x y", "-1.5e3"}, {"0x10", ".5", "inf", "1."}};

// Writes the head and four rows into a string, as text or JSON, en or zh.
static char *table_output(TraceFormat format, Lang lang) {
    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    assert_non_null(f);
    Trace tr;
    trace_init(&tr, f);
    tr.format = format;
    tr.lang = lang;
    tr.lesson = "t";
    trace_table_head(&tr, &TABLE);
    for (int r = 0; r < 4; r++) {
        trace_step(&tr, r + 1);
        trace_table_row(&tr, &TABLE, ROWS[r]);
    }
    fclose(f);
    return out;
}

// The terminal column where each cell of a text line starts, found by
// walking the line: a cell starts after a space that follows a non-space.
static void check_line(const char *line, int lineno, const char *const *cells) {
    // Where each column must start: 2 for the indent, then width + 1 each.
    int want = 2;
    const char *p = line;
    for (int c = 0; c < 4; c++) {
        const char *at = strstr(p, cells[c]);
        if (!at) fail_msg("line %d: cell %d \"%s\" missing in \"%s\"", lineno, c, cells[c], line);
        char prefix[256];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(at - line), line);
        int got = utf8_width(prefix);
        // Right-aligned cells end at the column's right edge instead.
        int expected = COLS[c].right ? want + COLS[c].width - utf8_width(cells[c]) : want;
        if (got != expected) fail_msg("line %d, column %d: starts at %d, expected %d: \"%s\"", lineno, c, got, expected, line);
        want += COLS[c].width + 1;
        p = at + strlen(cells[c]);
    }
}

static void test_table_text_lines_up(void **state) {
    (void)state;
    for (int zh = 0; zh < 2; zh++) {
        char *out = table_output(FORMAT_TEXT, zh ? LANG_ZH : LANG_EN);
        char *save = NULL;
        int lineno = 0;
        for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save), lineno++) {
            size_t n = strlen(line);
            if (n && line[n - 1] == ' ') fail_msg("line %d ends in a space: \"%s\"", lineno, line);
            if (lineno == 0) {
                const char *heads[4];
                for (int c = 0; c < 4; c++) heads[c] = zh ? COLS[c].zh : COLS[c].en;
                check_line(line, lineno, heads);
            } else {
                check_line(line, lineno, ROWS[lineno - 1]);
            }
        }
        assert_int_equal(lineno, 5);
        free(out);
    }
}

static void test_table_json_one_event_per_row(void **state) {
    (void)state;
    char *out = table_output(FORMAT_JSON, LANG_ZH);
    int n;
    Event *e = events_parse(out, &n);
    assert_int_equal(n, 5);
    assert_string_equal(e[0].event, "table");
    for (int r = 1; r < 5; r++) {
        assert_string_equal(e[r].event, "row");
        assert_string_equal(e[r].name, "t");
        assert_int_equal(e[r].step, r);
    }
    // The column names are English (or the key), whatever the language.
    assert_non_null(strstr(out, "\"columns\":[\"step\",\"tokens\",\"rows\",\"rows_total\"]"));
    // Numbers as numbers, other cells as strings.
    assert_non_null(strstr(out, "\"cells\":[1,\"天\",1,1]"));
    assert_non_null(strstr(out, "\"cells\":[10,\"ab\",\"x y\",-1.5e3]"));
    // What C reads as a number but JSON does not stays a string.
    assert_non_null(strstr(out, "\"cells\":[\"0x10\",\".5\",\"inf\",\"1.\"]"));
    events_free(e, n);
    free(out);
}

// Issue 29, 6: a string from a data file or a model's vocabulary may hold
// bytes that are not UTF-8 and control characters. Its JSON line is valid
// UTF-8 all the same, every control character escaped (JSON requires it
// below 0x20; DEL and C1 so that the line cannot drive a terminal).
static void test_json_strings_valid_utf8(void **state) {
    (void)state;
    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    assert_non_null(f);
    Trace tr;
    trace_init(&tr, f);
    tr.format = FORMAT_JSON;
    tr.lesson = "t";
    trace_textval(&tr, "te\x1bxt", "a\xff\x1b[31m\xc2\x9b\x7f\"\\\xe5\xa4\xa9\xed\xa0\x80\xe5\xa4");
    fclose(f);
    const char *want = "{\"lesson\":\"t\",\"event\":\"text\",\"name\":\"te\\u001bxt\",\"text\":"
                       "\"a\\ufffd\\u001b[31m\\u009b\\u007f\\\"\\\\天\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\"}\n";
    if (strcmp(out, want) != 0) fail_msg("expected %s got      %s", want, out);
    for (size_t i = 0; i < size;) {
        uint32_t c;
        int len = utf8_decode(&c, (const unsigned char *)out + i, size - i);
        if (len == 0) fail_msg("byte %zu: expected valid UTF-8, got 0x%02x", i, (unsigned char)out[i]);
        if (c < 0x20 && c != '\n') fail_msg("byte %zu: a raw control character U+%04X", i, (unsigned)c);
        i += (size_t)len;
    }
    free(out);
}

// trace_compare's words (issue 28 §4): in Chinese a difference in the last
// bits (at most 1e-4 of the largest |value|) is 不完全相同, a larger one a
// change, 不同; English says "NOT identical" for both, and equal bits are
// identical in both languages.
static char *compare_output(Lang lang, float second) {
    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    assert_non_null(f);
    Trace tr;
    trace_init(&tr, f);
    tr.lang = lang;
    tr.lesson = "t";
    float x[2] = {1.0f, 2.0f}, y[2] = {1.0f, second};
    Tensor a = tensor_view2(x, 1, 2), b = tensor_view2(y, 1, 2);
    trace_compare(&tr, "c", "a", &a, "b", &b);
    fclose(f);
    return out;
}

static void test_compare_says_rounding_or_change(void **state) {
    (void)state;
    static const struct {
        Lang lang;
        float second;
        const char *want, *not_want;
    } CASES[] = {
        {LANG_ZH, 2.0f, "最大绝对差 = 0，逐位完全相同\n", "不"},
        {LANG_ZH, 2.0000002f, "，不完全相同\n", "逐位"},   // one step of the last bit
        {LANG_ZH, 3.0f, "最大绝对差 = 1，不同\n", "不完全相同"},
        {LANG_EN, 2.0000002f, ", NOT identical\n", "bit for bit"},
        {LANG_EN, 3.0f, "max |difference| = 1, NOT identical\n", "bit for bit"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char *out = compare_output(CASES[i].lang, CASES[i].second);
        if (!strstr(out, CASES[i].want) || strstr(out, CASES[i].not_want))
            fail_msg("case %zu: expected \"%s\" and no \"%s\", got:\n%s", i, CASES[i].want, CASES[i].not_want, out);
        free(out);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_text_lines_up),
        cmocka_unit_test(test_table_json_one_event_per_row),
        cmocka_unit_test(test_json_strings_valid_utf8),
        cmocka_unit_test(test_compare_says_rounding_or_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
