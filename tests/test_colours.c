// test_colours — the page's colours as people see them: the heat-map scales
// stay readable step by step for the common colour-vision deficiencies, and
// every text on its background in the lesson page's style (trace_deck.c),
// the projector mode's included, has the contrast WCAG asks of text.
//
// The deficiencies are simulated with Machado, Oliveira and Fernandes'
// matrices ("A Physiologically-based Model for Simulation of Color Vision
// Deficiency", IEEE TVCG 15(6), 2009; severity 1.0: protanopia,
// deuteranopia, tritanopia), applied to linear sRGB. Two colours are told
// apart when their CIE 1976 distance (ΔE*ab, in CIELAB under D65) is at
// least MIN_DELTA_E: about twice the just-noticeable difference (2.3), so
// that two neighbouring steps of a heat map do not read as one.
#include "testutil.h"

#include "chart_svg.h"
#include "flash_svg.h"
#include "kvpage_svg.h"
#include "trace.h"
#include "trace_deck.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { VIEWS = 4 };
static const double MIN_DELTA_E = 5.0;
static const char *const VIEW_NAME[VIEWS] = {"normal vision", "protanopia", "deuteranopia", "tritanopia"};
static const double MACHADO[VIEWS][3][3] = {
    {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}},
    {{0.152286, 1.052583, -0.204868}, {0.114503, 0.786281, 0.099216}, {-0.003882, -0.048116, 1.051998}},
    {{0.367322, 0.860646, -0.227968}, {0.280085, 0.672501, 0.047413}, {-0.011820, 0.042940, 0.968881}},
    {{1.255528, -0.076749, -0.178779}, {-0.078411, 0.930809, 0.147602}, {0.004733, 0.691367, 0.303900}},
};

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

// sRGB 0 .. 255 to linear light (IEC 61966-2-1).
static double linear(double v) {
    v /= 255;
    return v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4);
}

static double lab_f(double t) {
    return t > 216.0 / 24389 ? cbrt(t) : (24389.0 / 27 * t + 16) / 116;
}

// CIELAB of an sRGB colour as a viewer of this view sees it.
static void seen_lab(const double rgb[3], int view, double lab[3]) {
    double l[3], s[3];
    for (int k = 0; k < 3; k++) l[k] = linear(rgb[k]);
    for (int i = 0; i < 3; i++) {
        s[i] = 0;
        for (int j = 0; j < 3; j++) s[i] += MACHADO[view][i][j] * l[j];
        s[i] = s[i] < 0 ? 0 : s[i] > 1 ? 1 : s[i];
    }
    double x = 0.4124 * s[0] + 0.3576 * s[1] + 0.1805 * s[2], y = 0.2126 * s[0] + 0.7152 * s[1] + 0.0722 * s[2],
           z = 0.0193 * s[0] + 0.1192 * s[1] + 0.9505 * s[2];
    double fx = lab_f(x / 0.95047), fy = lab_f(y), fz = lab_f(z / 1.08883);
    lab[0] = 116 * fy - 16;
    lab[1] = 500 * (fx - fy);
    lab[2] = 200 * (fy - fz);
}

static double delta_e(int a, int b, int view) {
    double ra[3], rb[3], la[3], lb[3];
    xterm_rgb(a, ra);
    xterm_rgb(b, rb);
    seen_lab(ra, view, la);
    seen_lab(rb, view, lb);
    return sqrt((la[0] - lb[0]) * (la[0] - lb[0]) + (la[1] - lb[1]) * (la[1] - lb[1]) + (la[2] - lb[2]) * (la[2] - lb[2]));
}

static void expect_apart(int a, int b, const char *what, int i, int j) {
    for (int v = 0; v < VIEWS; v++) {
        double e = delta_e(a, b, v);
        if (e < MIN_DELTA_E)
            fail_msg("%s, steps %d and %d (colours %d and %d), %s: expected ΔE >= %.1f, got %.2f", what, i, j, a, b,
                     VIEW_NAME[v], MIN_DELTA_E, e);
    }
}

static void test_heat_steps_stay_apart_for_colour_blind_viewers(void **state) {
    (void)state;
    static const char *const NAME[] = {"", "scores scale", "weights scale"};
    for (TraceHeat kind = HEAT_SCORES; kind <= HEAT_PROBS; kind++) {
        int n;
        const int *pal = trace_heat_palette(kind, &n);
        assert_true(n >= 7);
        for (int i = 1; i < n; i++) expect_apart(pal[i - 1], pal[i], NAME[kind], i - 1, i);
    }
}

// A negative score and a positive one of the same size do not look alike.
static void test_scores_signs_stay_apart_for_colour_blind_viewers(void **state) {
    (void)state;
    int n;
    const int *pal = trace_heat_palette(HEAT_SCORES, &n);
    int c = n / 2;
    for (int i = 1; i <= c; i++) expect_apart(pal[c - i], pal[c + i], "scores scale, -x against +x", c - i, c + i);
}

// ----------------------------------------------------------------------------
// The page's style: every text on its background, at least 4.5:1 (WCAG 2,
// success criterion 1.4.3), in the page and in its projector mode.
//
// The style is read as its rules say: a rule that sets a text colour, a
// background or an opacity makes one pair, the colour it does not set taken
// from its mode's body (body, or html.projector body for a rule of the
// projector mode); an opacity mixes the text into its background as the
// browser composites it. (A simplification: a rule is checked with its own
// mode's body only, not with every element it may sit in.)

enum { MAX_RULES = 256 };
typedef struct {
    char sel[160];
    double fg[3], bg[3], fill[3], opacity;
    int has_fg, has_bg, has_fill, has_opacity;
} StyleRule;

// #rgb or #rrggbb at s into rgb (0 .. 255); 0 when s is not one.
static int hex_colour(const char *s, size_t len, double rgb[3]) {
    if (len < 4 || s[0] != '#') return 0;
    unsigned v[6];
    size_t digits = len - 1;
    if (digits != 3 && digits != 6) return 0;
    for (size_t i = 0; i < digits; i++) {
        char c = s[1 + i];
        if (c >= '0' && c <= '9') v[i] = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v[i] = (unsigned)(c - 'a' + 10);
        else return 0;
    }
    for (int k = 0; k < 3; k++) rgb[k] = digits == 3 ? v[k] * 17.0 : v[2 * k] * 16.0 + v[2 * k + 1];
    return 1;
}

// One declaration "name:value" (no ';') into the rule.
static void style_declaration(StyleRule *r, const char *d, size_t len) {
    const char *colon = memchr(d, ':', len);
    if (!colon) return;
    size_t nlen = (size_t)(colon - d), vlen = len - nlen - 1;
    const char *v = colon + 1;
    if (nlen == 5 && !memcmp(d, "color", 5)) r->has_fg = hex_colour(v, vlen, r->fg);
    else if ((nlen == 10 && !memcmp(d, "background", 10)) || (nlen == 16 && !memcmp(d, "background-color", 16)))
        r->has_bg = hex_colour(v, vlen, r->bg);
    else if (nlen == 4 && !memcmp(d, "fill", 4)) r->has_fill = hex_colour(v, vlen, r->fill);
    else if (nlen == 7 && !memcmp(d, "opacity", 7)) r->has_opacity = 1, r->opacity = atof(v);
}

// The rules of css (at-rules' blocks opened and their rules read); returns how many.
static int style_rules(const char *css, StyleRule *rules, int max) {
    int n = 0;
    const char *p = css;
    while (*p) {
        while (*p == '\n' || *p == ' ' || *p == '}') p++;
        const char *open = strchr(p, '{');
        if (!open) break;
        if (*p == '@') {   // @media ...{ : its rules follow
            p = open + 1;
            continue;
        }
        const char *close = strchr(open, '}');
        assert_non_null(close);
        assert_true(n < max);
        StyleRule *r = &rules[n++];
        memset(r, 0, sizeof *r);
        snprintf(r->sel, sizeof r->sel, "%.*s", (int)(open - p), p);
        for (const char *d = open + 1; d < close;) {
            const char *semi = memchr(d, ';', (size_t)(close - d));
            const char *e = semi ? semi : close;
            style_declaration(r, d, (size_t)(e - d));
            d = e + 1;
        }
        p = close + 1;
    }
    return n;
}

static double rgb_luminance(const double rgb[3]) {
    double l[3];
    for (int k = 0; k < 3; k++) l[k] = linear(rgb[k]);
    return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
}

static double rgb_contrast(const double a[3], const double b[3]) {
    double x = rgb_luminance(a) + 0.05, y = rgb_luminance(b) + 0.05;
    return x > y ? x / y : y / x;
}

static const StyleRule *style_find(const StyleRule *rules, int n, const char *sel) {
    for (int i = 0; i < n; i++)
        if (!strcmp(rules[i].sel, sel)) return &rules[i];
    fail_msg("the page's style: expected a rule '%s'", sel);
    return NULL;
}

static void test_page_style_text_contrast(void **state) {
    (void)state;
    static StyleRule rules[MAX_RULES];
    int n = style_rules(TRACE_DECK_STYLE, rules, MAX_RULES), pairs = 0;
    const StyleRule *body[2] = {style_find(rules, n, "body"), style_find(rules, n, "html.projector body")};
    for (int m = 0; m < 2; m++) assert_true(body[m]->has_fg && body[m]->has_bg);
    for (int i = 0; i < n; i++) {
        const StyleRule *r = &rules[i];
        if (!r->has_fg && !r->has_bg && !r->has_opacity) continue;
        const StyleRule *b = body[strstr(r->sel, "html.projector") != NULL];
        double fg[3], bg[3];
        for (int k = 0; k < 3; k++) {
            fg[k] = r->has_fg ? r->fg[k] : b->fg[k];
            bg[k] = r->has_bg ? r->bg[k] : b->bg[k];
            if (r->has_opacity) fg[k] = r->opacity * fg[k] + (1 - r->opacity) * bg[k];
        }
        double c = rgb_contrast(fg, bg);
        if (c < 4.5)
            fail_msg("the page's style, rule '%s': text (%.0f,%.0f,%.0f) on (%.0f,%.0f,%.0f): expected contrast >= 4.5, "
                     "got %.2f", r->sel, fg[0], fg[1], fg[2], bg[0], bg[1], bg[2], c);
        pairs++;
    }
    // The projector mode's own rules are among them (a test of the parser).
    if (pairs < 20) fail_msg("the page's style: expected at least 20 colour pairs, got %d", pairs);
}

// ----------------------------------------------------------------------------
// The charts' and bars' colours: every line, mark and bar at least 3:1
// against what it is drawn on (WCAG 2.1, success criterion 1.4.11,
// non-text contrast): the chart's background, the bars' track, and the
// page's body in both modes (the bars and charts sit on it). The grid is a
// help to the eye, not a part to tell apart, and is left out as WCAG does.

static void test_chart_colours_contrast(void **state) {
    (void)state;
    static StyleRule rules[MAX_RULES];
    int n = style_rules(TRACE_DECK_STYLE, rules, MAX_RULES);
    const StyleRule *body[2] = {style_find(rules, n, "body"), style_find(rules, n, "html.projector body")};
    double bg[4][3];
    const char *bg_name[4] = {"the chart's background", "the bars' track", "the page (body)", "the projector's page"};
    assert_true(hex_colour(CHART_BACKGROUND, strlen(CHART_BACKGROUND), bg[0]));
    assert_true(hex_colour(CHART_TRACK, strlen(CHART_TRACK), bg[1]));
    for (int m = 0; m < 2; m++) {
        assert_true(body[m]->has_bg);
        memcpy(bg[2 + m], body[m]->bg, sizeof bg[0]);
    }
    assert_true(CHART_NUM_COLOURS >= 3);
    for (int i = 0; i < CHART_NUM_COLOURS; i++) {
        double fg[3];
        if (!hex_colour(CHART_COLOURS[i], strlen(CHART_COLOURS[i]), fg))
            fail_msg("chart colour %d: '%s' is no #rrggbb", i, CHART_COLOURS[i]);
        for (int k = 0; k < 4; k++) {
            double c = rgb_contrast(fg, bg[k]);
            if (c < 3)
                fail_msg("chart colour %d (%s) on %s (%.0f,%.0f,%.0f): expected contrast >= 3, got %.2f", i,
                         CHART_COLOURS[i], bg_name[k], bg[k][0], bg[k][1], bg[k][2], c);
        }
    }
    // The two ways stay apart for colour-blind viewers too.
    double a[3], b[3], la[3], lb[3];
    hex_colour(CHART_NO_CACHE, strlen(CHART_NO_CACHE), a);
    hex_colour(CHART_CACHE, strlen(CHART_CACHE), b);
    for (int v = 0; v < VIEWS; v++) {
        seen_lab(a, v, la);
        seen_lab(b, v, lb);
        double e = sqrt((la[0] - lb[0]) * (la[0] - lb[0]) + (la[1] - lb[1]) * (la[1] - lb[1]) + (la[2] - lb[2]) * (la[2] - lb[2]));
        if (e < 2 * MIN_DELTA_E)
            fail_msg("without and with the cache, %s: expected ΔE >= %.1f, got %.2f", VIEW_NAME[v], 2 * MIN_DELTA_E, e);
    }
}

// ----------------------------------------------------------------------------
// Every legend's colours: each mark at least 3:1 against every background it
// is drawn on (WCAG 2.1, 1.4.11), and every two marks of one legend apart by
// at least 2 * MIN_DELTA_E for each view (a legend's colours name different
// things, unlike a heat map's neighbouring steps).

enum { MAX_MARKS = 16, MAX_BACKS = 4 };
typedef struct {
    const char *what;
    int n, nback;
    const char *name[MAX_MARKS];
    double rgb[MAX_MARKS][3];
    const char *back_name[MAX_BACKS];
    double back[MAX_BACKS][3];
} Legend;

static void legend_mark(Legend *g, const char *name, const char *hex) {
    assert_true(g->n < MAX_MARKS);
    if (!hex_colour(hex, strlen(hex), g->rgb[g->n])) fail_msg("%s, %s: '%s' is no #rrggbb", g->what, name, hex);
    g->name[g->n++] = name;
}

static void legend_back(Legend *g, const char *name, const double rgb[3]) {
    assert_true(g->nback < MAX_BACKS);
    memcpy(g->back[g->nback], rgb, sizeof g->back[0]);
    g->back_name[g->nback++] = name;
}

static double rgb_delta_e(const double a[3], const double b[3], int view) {
    double la[3], lb[3];
    seen_lab(a, view, la);
    seen_lab(b, view, lb);
    return sqrt((la[0] - lb[0]) * (la[0] - lb[0]) + (la[1] - lb[1]) * (la[1] - lb[1]) + (la[2] - lb[2]) * (la[2] - lb[2]));
}

static void expect_legend(const Legend *g) {
    for (int i = 0; i < g->n; i++)
        for (int k = 0; k < g->nback; k++) {
            double c = rgb_contrast(g->rgb[i], g->back[k]);
            if (c < 3)
                fail_msg("%s, mark %d (%s, %.0f,%.0f,%.0f) on %s: expected contrast >= 3, got %.2f", g->what, i, g->name[i],
                         g->rgb[i][0], g->rgb[i][1], g->rgb[i][2], g->back_name[k], c);
        }
    for (int i = 0; i < g->n; i++)
        for (int j = i + 1; j < g->n; j++)
            for (int v = 0; v < VIEWS; v++) {
                double e = rgb_delta_e(g->rgb[i], g->rgb[j], v);
                if (e < 2 * MIN_DELTA_E)
                    fail_msg("%s, marks %d and %d (%s and %s), %s: expected ΔE >= %.1f, got %.2f", g->what, i, j, g->name[i],
                             g->name[j], VIEW_NAME[v], 2 * MIN_DELTA_E, e);
            }
}

static const double WHITE[3] = {255, 255, 255};

// The page's body in its modes: the page (and its print, which sets no
// colour of its own) and the projector.
static void page_backs(Legend *g, const StyleRule *rules, int n) {
    const char *sel[2] = {"body", "html.projector body"};
    const char *name[2] = {"the page (and its print)", "the projector's page"};
    for (int m = 0; m < 2; m++) {
        const StyleRule *b = style_find(rules, n, sel[m]);
        assert_true(b->has_bg);
        legend_back(g, name[m], b->bg);
    }
}

// A rule's colour, as expected: the rule sel sets background (or fill) to hex.
static void expect_rule_colour(const StyleRule *rules, int n, const char *sel, int fill, const char *hex) {
    const StyleRule *r = style_find(rules, n, sel);
    double want[3];
    assert_true(hex_colour(hex, strlen(hex), want));
    const double *got = fill ? r->fill : r->bg;
    if (!(fill ? r->has_fill : r->has_bg) || memcmp(got, want, sizeof want))
        fail_msg("the page's style, rule '%s': expected %s %s, got (%.0f,%.0f,%.0f)", sel, fill ? "fill" : "background",
                 hex, got[0], got[1], got[2]);
}

// The rows' legend (new, reused, recomputed): the same colours in the
// tables' token cells, the legend's swatches and the triangle's cells, in
// every mode; and every swatch or SVG cell the style colours at least 3:1 on
// its mode's page.
static void test_row_marks_contrast_and_apart(void **state) {
    (void)state;
    static StyleRule rules[MAX_RULES];
    int n = style_rules(TRACE_DECK_STYLE, rules, MAX_RULES), marks = 0;
    Legend g = {.what = "the rows' legend"};
    page_backs(&g, rules, n);
    static const char *const ROLE[3] = {"row-new", "row-reused", "row-recomputed"};
    const char *hex[3] = {TRACE_ROW_NEW_COLOUR, TRACE_ROW_REUSED_COLOUR, TRACE_ROW_RECOMPUTED_COLOUR};
    char sel[160];
    for (int i = 0; i < 3; i++) {
        legend_mark(&g, ROLE[i], hex[i]);
        snprintf(sel, sizeof sel, "tr.%s>th.tok,.sw.%s", ROLE[i], ROLE[i]);
        expect_rule_colour(rules, n, sel, 0, hex[i]);
        snprintf(sel, sizeof sel, "svg rect.%s", ROLE[i]);
        expect_rule_colour(rules, n, sel, 1, hex[i]);
    }
    expect_legend(&g);
    for (int i = 0; i < n; i++) {
        const StyleRule *r = &rules[i];
        if (!strstr(r->sel, ".sw") && !strstr(r->sel, "svg rect")) continue;
        if (!r->has_bg && !r->has_fill) continue;
        const double *c = r->has_fill ? r->fill : r->bg;
        int projector = strstr(r->sel, "html.projector") != NULL;
        double k = rgb_contrast(c, g.back[projector]);
        if (k < 3)
            fail_msg("the page's style, rule '%s': mark (%.0f,%.0f,%.0f) on %s: expected contrast >= 3, got %.2f", r->sel,
                     c[0], c[1], c[2], g.back_name[projector], k);
        marks++;
    }
    if (marks < 6) fail_msg("the page's style: expected at least 6 marks (swatches, SVG cells), got %d", marks);
}

// Lesson 6.1's pool: the sequences' colours, the shared grey and the
// copy-on-write arrow, on the white of the picture and of the empty slots.
static void test_pool_colours_contrast_and_apart(void **state) {
    (void)state;
    static const char *const SEQ[] = {"sequence 0", "sequence 1", "sequence 2", "sequence 3", "sequence 4", "sequence 5",
                                      "sequence 6", "sequence 7", "sequence 8", "sequence 9"};
    Legend g = {.what = "lesson 6.1's pool"};
    legend_back(&g, "the page and an empty slot (white)", WHITE);
    assert_true(KVPAGE_NUM_SEQ_COLOURS >= 4 && KVPAGE_NUM_SEQ_COLOURS <= 10);
    for (int i = 0; i < KVPAGE_NUM_SEQ_COLOURS; i++) legend_mark(&g, SEQ[i], KVPAGE_SEQ_COLOURS[i]);
    legend_mark(&g, "shared", KVPAGE_SHARED);
    legend_mark(&g, "copied on write (arrow)", KVPAGE_COW);
    expect_legend(&g);
}

// Lesson 6.3's tiles: done and skipped as the browser composites them over
// a cell (FLASH_OPACITY), the frame of the tile being processed; each on
// both kinds of cell, white and masked.
static void test_tile_colours_contrast_and_apart(void **state) {
    (void)state;
    double masked[3], a = atof(FLASH_OPACITY);
    assert_true(hex_colour(FLASH_MASKED, strlen(FLASH_MASKED), masked));
    assert_true(a > 0 && a <= 1);
    const char *fill[2] = {FLASH_DONE, FLASH_SKIPPED}, *name[2] = {"done", "skipped"};
    const double *cell[2] = {WHITE, masked};
    const char *cell_name[2] = {"a white cell", "a masked cell"};
    for (int c = 0; c < 2; c++) {   // the marks over cell c
        Legend g = {.what = "lesson 6.3's tiles"};
        for (int k = 0; k < 2; k++) legend_back(&g, cell_name[k], cell[k]);
        for (int i = 0; i < 2; i++) {
            legend_mark(&g, name[i], fill[i]);
            for (int k = 0; k < 3; k++) g.rgb[i][k] = a * g.rgb[i][k] + (1 - a) * cell[c][k];
        }
        legend_mark(&g, "this tile (frame)", FLASH_CURRENT);
        expect_legend(&g);
    }
}

// The charts' colours, every two apart (the lines, the reserved bars, the axes).
static void test_chart_colours_apart(void **state) {
    (void)state;
    Legend g = {.what = "the charts' colours"};
    legend_back(&g, "the chart's background", WHITE);
    for (int i = 0; i < CHART_NUM_COLOURS; i++) legend_mark(&g, CHART_COLOURS[i], CHART_COLOURS[i]);
    expect_legend(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heat_steps_stay_apart_for_colour_blind_viewers),
        cmocka_unit_test(test_scores_signs_stay_apart_for_colour_blind_viewers),
        cmocka_unit_test(test_page_style_text_contrast),
        cmocka_unit_test(test_chart_colours_contrast),
        cmocka_unit_test(test_chart_colours_apart),
        cmocka_unit_test(test_row_marks_contrast_and_apart),
        cmocka_unit_test(test_pool_colours_contrast_and_apart),
        cmocka_unit_test(test_tile_colours_contrast_and_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
