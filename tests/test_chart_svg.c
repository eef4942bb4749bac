// test_chart_svg — the charts of the lesson page (chart_svg.h): round
// scales and their ticks, and the SVG a chart makes read back — both axes
// labelled in both languages, with units, at least two numeric ticks each
// that span the data, one mark per point at its value, whiskers only where
// a spread was measured, every mark in one of the course's colours; then
// lessons 4's and 5's pages, whose charts hold one mark per point the
// lesson's JSON gives.
#include "testutil.h"

#include "chart_svg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// Reading an SVG back

// The value of attribute name in the tag that holds at (up to its '>'),
// into out; 0 when the tag has none.
static int attr(const char *at, const char *name, char *out, size_t size) {
    const char *start = at;
    while (start > at - 4000 && *start != '<') start--;
    const char *end = strchr(at, '>');
    char key[64];
    snprintf(key, sizeof key, " %s=\"", name);
    const char *p = strstr(start, key);
    if (!p || p > end) return 0;
    const char *v = p + strlen(key), *q = strchr(v, '"');
    snprintf(out, size, "%.*s", (int)(q - v), v);
    return 1;
}

static double attr_number(const char *at, const char *name) {
    char v[64];
    if (!attr(at, name, v, sizeof v)) fail_msg("expected %s= in '%.80s'", name, at);
    return atof(v);
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

// The chart of class cls in page (its <svg> ... </svg>, malloc'd).
static char *chart_of(const char *page, const char *cls, const char *what) {
    char key[96];
    snprintf(key, sizeof key, "<svg class=\"chart %s\"", cls);
    const char *a = strstr(page, key);
    if (!a) fail_msg("%s: expected a chart '%s'", what, key);
    const char *e = strstr(a, "</svg>");
    assert_non_null(e);
    return strndup(a, (size_t)(e - a + 6));
}

// Both axes: a label in each language, and at least two ticks whose values
// rise from 0 to cover the data (the highest at or above its largest
// value, and under twice it: no axis twice too long), each with a number
// and, for a unit, that unit.
static void expect_axes(const char *svg, const char *what, double xmax, double ymax, const char *yunits) {
    for (int y = 0; y < 2; y++) {
        for (int z = 0; z < 2; z++) {
            char key[64];
            snprintf(key, sizeof key, "<text class=\"%s axis-label\"", z ? "zh" : "en");
            // x's label comes first, then y's (chart_svg writes x first)
            const char *p = strstr(svg, key);
            if (p && y) p = strstr(p + 1, key);
            if (!p) fail_msg("%s: expected the %s axis's %s label", what, y ? "y" : "x", z ? "Chinese" : "English");
        }
        char key[64];
        snprintf(key, sizeof key, "<g class=\"tick\" data-axis=\"%s\"", y ? "y" : "x");
        double prev = -1, last = 0;
        int n = 0;
        for (const char *p = svg; (p = strstr(p, key)); p++, n++) {
            double v = attr_number(p + 1, "data-value");
            if (n == 0 && v != 0) fail_msg("%s: %s axis: expected its first tick at 0, got %g", what, y ? "y" : "x", v);
            if (v <= prev) fail_msg("%s: %s axis, tick %d: %g after %g, expected ascending", what, y ? "y" : "x", n, v, prev);
            const char *t = strstr(p, "<text"), *tx = strchr(t, '>') + 1;
            if (!strchr("0123456789", *tx)) fail_msg("%s: %s axis, tick %d: text '%.20s', expected a number", what, y ? "y" : "x", n, tx);
            if (y && yunits) {
                int found = 0;
                for (const char *u = yunits; *u; u += strlen(u) + 1) found |= !strncmp(strchr(tx, ' ') ? strchr(tx, ' ') + 1 : "", u, strlen(u));
                if (!found) fail_msg("%s: y tick %d: text '%.20s', expected a unit", what, n, tx);
            }
            last = v, prev = v;
        }
        double max = y ? ymax : xmax;
        if (n < 2) fail_msg("%s: %s axis: expected at least 2 ticks, got %d", what, y ? "y" : "x", n);
        if (last < max * (1 - 1e-9) || last >= 2 * max)
            fail_msg("%s: %s axis: ticks up to %g, expected the last at or above the data's %g and under twice it", what,
                     y ? "y" : "x", last, max);
    }
}

// The marks of series key: n, at x[i], y[i] (relative tolerance tol), each
// in one of the course's colours.
static void expect_points(const char *svg, const char *what, const char *key, int n, const double *x, const double *y,
                          double tol) {
    char want[64];
    snprintf(want, sizeof want, "class=\"point\" data-series=\"%s\"", key);
    int got = count(svg, want);
    if (got != n) fail_msg("%s: series %s: expected %d marks, got %d", what, key, n, got);
    int i = 0;
    for (const char *p = svg; (p = strstr(p, want)); p++, i++) {
        double gx = attr_number(p, "data-x"), gy = attr_number(p, "data-y");
        if (fabs(gx - x[i]) > tol * fabs(x[i]) || fabs(gy - y[i]) > tol * fabs(y[i]) + 1e-12)
            fail_msg("%s: series %s, point %d: expected (%g, %g), got (%g, %g)", what, key, i, x[i], y[i], gx, gy);
        char fill[32];
        assert_true(attr(p, "fill", fill, sizeof fill));
        int known = 0;
        for (int k = 0; k < CHART_NUM_COLOURS; k++) known |= !strcmp(fill, CHART_COLOURS[k]);
        if (!known) fail_msg("%s: series %s, point %d: fill %s, expected one of the course's colours", what, key, i, fill);
    }
}

// ----------------------------------------------------------------------------
// Scales

// A linear scale ends at 4 round steps (1, 1.5, 2, 2.5, 3, 4, 5, 6, 7.5, 8
// times a power of ten) that first reach the largest value.
static void test_linear_scale_round_top(void **state) {
    (void)state;
    static const struct { double vmax, top; } CASES[] = {
        {255, 300}, {256, 300}, {12, 12}, {4.718592e6, 6e6}, {0.244, 0.3}, {3.9e-5, 4e-5}, {1, 1}, {1.01, 1.2}, {0, 1},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        ChartScale s = chart_scale_linear(CASES[i].vmax, 0, 100);
        if (fabs(s.hi - CASES[i].top) > 1e-9 * CASES[i].top || s.lo != 0)
            fail_msg("case %zu: max %g: expected the axis 0 .. %g, got %g .. %g", i, CASES[i].vmax, CASES[i].top, s.lo, s.hi);
        double t[CHART_MAX_TICKS];
        int n = chart_ticks(&s, t);
        assert_int_equal(n, CHART_LINEAR_TICKS);
        for (int k = 0; k < n; k++) {
            double want = CASES[i].top * k / (n - 1);
            if (fabs(t[k] - want) > 1e-9 * CASES[i].top) fail_msg("case %zu, tick %d: expected %g, got %g", i, k, want, t[k]);
        }
        if (chart_at(&s, 0) != 0 || fabs(chart_at(&s, s.hi) - 100) > 1e-9) fail_msg("case %zu: ends not at 0 and 100 px", i);
    }
    // A tick's text takes the unit of the top: 0, 1.5, ..., 6 ms.
    ChartScale s = chart_scale_linear(5.5e-3, 0, 100);
    char t[32];
    chart_tick_text(t, sizeof t, &s, CHART_SECONDS, 1.5e-3);
    assert_string_equal(t, "1.5 ms");
    chart_tick_text(t, sizeof t, &s, CHART_SECONDS, 0);
    assert_string_equal(t, "0 ms");
    s = chart_scale_linear(4.7e6, 0, 100);
    chart_tick_text(t, sizeof t, &s, CHART_BYTES, 4.5e6);
    assert_string_equal(t, "4.5 MB");
}

// A log scale's ticks are 1, 2, 5 times the powers of ten inside it.
static void test_log_scale_ticks(void **state) {
    (void)state;
    ChartScale s = chart_scale_log(3e-4, 4e-2, 300, 0, 0);
    double t[CHART_MAX_TICKS], want[] = {5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2};
    int n = chart_ticks(&s, t);
    assert_int_equal(n, 6);
    for (int k = 0; k < n; k++)
        if (fabs(t[k] - want[k]) > 1e-12) fail_msg("tick %d: expected %g, got %g", k, want[k], t[k]);
    char text[32];
    chart_tick_text(text, sizeof text, &s, CHART_SECONDS, 5e-4);
    assert_string_equal(text, "500 µs");
    if (!(chart_at(&s, 1e-3) > chart_at(&s, 1e-2))) fail_msg("a larger time is not higher up");
}

// ----------------------------------------------------------------------------
// A chart of numbers chosen here

static void test_chart_reads_back(void **state) {
    (void)state;
    double x[4] = {16, 64, 128, 255}, y0[4] = {1e-3, 4e-3, 8e-3, 16e-3}, lo0[4], hi0[4], y1[4] = {5e-4, 5e-4, 6e-4, 6e-4};
    for (int i = 0; i < 4; i++) lo0[i] = 0.9 * y0[i], hi0[i] = 1.1 * y0[i];
    ChartSeries s[2] = {
        {"no-cache", "without the cache", "不使用缓存", CHART_NO_CACHE, CHART_CIRCLE, 0, 4, x, y0, lo0, hi0},
        {"cache", "with <the> cache & more", "使用缓存", CHART_CACHE, CHART_SQUARE, 1, 4, x, y1, NULL, NULL},
    };
    Chart c = {"chart-test", "A title", "标题", {"position t (tokens)", "位置 t（token）", CHART_COUNT},
               {"time per token", "每个 token 的耗时", CHART_SECONDS}, "a note", "注释", 2, s};
    Buf b;
    buf_init(&b);
    chart_svg(&b, &c);
    char *svg = buf_take(&b);
    assert_non_null(svg);
    expect_axes(svg, "chart", 255, 16e-3 * 1.1, "ms\0");
    expect_points(svg, "chart", "no-cache", 4, x, y0, 1e-9);
    expect_points(svg, "chart", "cache", 4, x, y1, 1e-9);
    // whiskers for the series that measured a spread, none for the other
    assert_int_equal(count(svg, "class=\"spread\" data-series=\"no-cache\""), 4);
    assert_int_equal(count(svg, "class=\"spread\" data-series=\"cache\""), 0);
    // a legend entry per series, both languages, the text escaped
    assert_int_equal(count(svg, "<g class=\"legend\""), 2);
    assert_non_null(strstr(svg, ">with &lt;the&gt; cache &amp; more</text>"));
    static const char *const BOTH[] = {">不使用缓存<", ">without the cache<", ">标题<", ">A title<", ">注释<", ">a note<"};
    for (size_t i = 0; i < sizeof BOTH / sizeof BOTH[0]; i++)
        if (!strstr(svg, BOTH[i])) fail_msg("chart: expected '%s'", BOTH[i]);
    // as many English texts as Chinese ones, so the language button leaves none alone
    assert_int_equal(count(svg, "<text class=\"en"), count(svg, "<text class=\"zh"));
    // larger times higher up: y grows downwards
    const char *p = strstr(svg, "class=\"point\" data-series=\"no-cache\"");
    double first = 0;
    for (int i = 0; i < 4; i++, p = strstr(p + 1, "class=\"point\" data-series=\"no-cache\"")) {
        double cy = attr_number(p, "cy");
        if (i && !(cy < first)) fail_msg("chart: point %d at y=%g, expected above the one before (y=%g)", i, cy, first);
        first = cy;
    }
    free(svg);
}

// ----------------------------------------------------------------------------
// The lessons' pages

static int starts(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

// Lesson 4: one mark per position timed, each way, where the JSON run times
// the same positions (they are the lesson's, not the clock's).
static void test_lesson4_time_chart(void **state) {
    (void)state;
    const char *quick = " --steps 8 --repeat 2 --init random --preset tiny";
    char args[160];
    snprintf(args, sizeof args, "lesson 4 --format json%s", quick);
    int n;
    Event *e = kvdemo_json(args, &n);
    double t[2][16], ymax = 0;
    int np[2] = {0, 0};
    for (int i = 0; i < n; i++) {
        if (strcmp(e[i].event, "timing") || !starts(e[i].name, "per_token[t=")) continue;
        int c = !strcmp(e[i].run, "cache");
        assert_true(np[c] < 16);
        t[c][np[c]++] = atof(e[i].name + strlen("per_token[t="));
    }
    events_free(e, n);
    if (np[0] < 2 || np[0] != np[1]) fail_msg("%s: expected the same positions both ways, got %d and %d", args, np[0], np[1]);
    snprintf(args, sizeof args, "lesson 4 --format html%s", quick);
    RunResult r = kvdemo_run(args);
    assert_int_equal(r.status, 0);
    char *svg = chart_of(r.out, "chart-time", args);
    static const char *const KEYS[2] = {"no-cache", "cache"};
    for (int c = 0; c < 2; c++) {
        char want[64];
        snprintf(want, sizeof want, "class=\"point\" data-series=\"%s\"", KEYS[c]);
        double y[16];
        int k = 0;
        for (const char *p = svg; (p = strstr(p, want)) && k < 16; p++, k++) {
            y[k] = attr_number(p, "data-y");
            ymax = fmax(ymax, attr_number(p, "data-hi"));
        }
        expect_points(svg, args, KEYS[c], np[c], t[c], y, 0);
        snprintf(want, sizeof want, "class=\"spread\" data-series=\"%s\"", KEYS[c]);
        if (count(svg, want) != np[c]) fail_msg("%s: %s: expected %d whiskers, got %d", args, KEYS[c], np[c], count(svg, want));
    }
    expect_axes(svg, args, t[0][np[0] - 1], ymax, "ns\0µs\0ms\0s\0");
    free(svg);
    run_free(&r);
}

// Lesson 5: the held bytes of the bars' rows (JSON's held_chart), and what
// is reserved beside each.
static void test_lesson5_bytes_chart(void **state) {
    (void)state;
    const char *args = "lesson 5 --init random --preset tiny --format json";
    const RunResult *j = kvdemo_run_once(args);
    assert_int_equal(j->status, 0);
    TableRow rows[16];
    int n = table_rows_of(j->out, "held_chart", rows, 16);
    if (n < 2) fail_msg("%s: expected at least 2 rows of held_chart, got %d", args, n);
    double x[16], held[16], reserved[16];
    int ne;
    Event *e = events_parse(j->out, &ne);
    const Event *res = events_find(e, ne, "count", NULL, 0, "bytes_reserved");
    assert_non_null(res);
    for (int i = 0; i < n; i++)
        x[i] = table_cell_number(&rows[i], 0) + 1, held[i] = table_cell_number(&rows[i], 2), reserved[i] = res->value;
    events_free(e, ne);
    RunResult r = kvdemo_run("lesson 5 --init random --preset tiny --format html");
    assert_int_equal(r.status, 0);
    char *svg = chart_of(r.out, "chart-bytes", "lesson 5 --format html");
    expect_points(svg, "lesson 5", "held", n, x, held, 1e-12);
    expect_points(svg, "lesson 5", "reserved", n, x, reserved, 1e-12);
    expect_axes(svg, "lesson 5", x[n - 1], reserved[0], "B\0kB\0MB\0");
    if (strstr(svg, "class=\"spread\"")) fail_msg("lesson 5: whiskers on bytes counted, not measured");
    free(svg);
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_scale_round_top),
        cmocka_unit_test(test_log_scale_ticks),
        cmocka_unit_test(test_chart_reads_back),
        cmocka_unit_test(test_lesson4_time_chart),
        cmocka_unit_test(test_lesson5_bytes_chart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
