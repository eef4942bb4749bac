// test_html — --format html and --format md for every lesson of the LESSONS
// table, in both languages. A small checker in C reads the HTML page: its
// tags balanced (void elements apart), attributes quoted, <, > and & in text
// escaped, no URL that would reach the network, and every value that the
// same lesson's --format json prints present at full precision in a title
// attribute, in order within its tensor. The Markdown's tables have as many
// cells in each row as in their head, and every tensor value appears in
// them as printed. Heat-map cells are checked for contrast (WCAG, >= 4.5:1)
// with the formula written out here. The pages of --lang en and --lang zh
// are the same but for the language shown first: every text is in both.
#include "testutil.h"

#include "buf.h"
#include "flash_svg.h"
#include "lessons.h"
#include "measure.h"
#include "trace.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

// ----------------------------------------------------------------------------
// The HTML checker

static const char *const VOID_ELEMENTS[] = {"area", "base", "br", "col", "embed", "hr", "img",
                                            "input", "link", "meta", "source", "track", "wbr"};

static int is_void(const char *name) {
    for (size_t i = 0; i < sizeof VOID_ELEMENTS / sizeof VOID_ELEMENTS[0]; i++)
        if (!strcasecmp(VOID_ELEMENTS[i], name)) return 1;
    return 0;
}

// Length of an entity at s ("&amp;", "&#47;", "&#x2F;"), or 0 when s is a bare &.
static size_t entity_len(const char *s) {
    const char *p = s + 1;
    if (*p == '#') {
        p++;
        int hex = *p == 'x' || *p == 'X';
        if (hex) p++;
        const char *digits = p;
        while (hex ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p)) p++;
        if (p == digits) return 0;
    } else {
        const char *name = p;
        while (isalnum((unsigned char)*p)) p++;
        if (p == name) return 0;
    }
    return *p == ';' ? (size_t)(p + 1 - s) : 0;
}

// Checks s; returns NULL, or what is wrong ("byte N: ...") in err.
static const char *html_problem(const char *s, char *err, size_t size) {
    char stack[64][16];
    int depth = 0;
    const char *p = s;
#define PROBLEM(...)                                                    \
    do {                                                                \
        int n_ = snprintf(err, size, "byte %ld: ", (long)(p - s));      \
        snprintf(err + n_, size - (size_t)n_, __VA_ARGS__);             \
        return err;                                                     \
    } while (0)
    while (*p) {
        if (!strncmp(p, "<!--", 4)) {
            const char *e = strstr(p, "-->");
            if (!e) PROBLEM("a comment that never ends");
            p = e + 3;
            continue;
        }
        if (!strncasecmp(p, "<!DOCTYPE", 9)) {
            const char *e = strchr(p, '>');
            if (!e) PROBLEM("a DOCTYPE that never ends");
            p = e + 1;
            continue;
        }
        if (*p == '>') PROBLEM("a bare '>' in text");
        if (*p == '&') {
            if (!entity_len(p)) PROBLEM("a bare '&' in text");
            p += entity_len(p);
            continue;
        }
        if (*p != '<') {
            p++;
            continue;
        }
        // A tag: <name attr="v" ...> or </name>.
        p++;
        int closing = *p == '/';
        if (closing) p++;
        char name[16];
        size_t n = 0;
        while (isalnum((unsigned char)*p) && n < sizeof name - 1) name[n++] = (char)tolower((unsigned char)*p++);
        name[n] = '\0';
        if (!n) PROBLEM("a bare '<' in text");
        for (;;) {
            while (isspace((unsigned char)*p)) p++;
            if (*p == '>' || (*p == '/' && p[1] == '>')) break;
            if (closing) PROBLEM("</%s> with attributes", name);
            const char *a = p;
            while (isalnum((unsigned char)*p) || *p == '-' || *p == ':' || *p == '_') p++;
            if (p == a) PROBLEM("<%s>: '%c' where an attribute should be", name, *p ? *p : '0');
            if (*p != '=') continue;   // an attribute without a value
            p++;
            if (*p != '"' && *p != '\'') PROBLEM("<%s>: an attribute value not in quotes", name);
            char q = *p++;
            for (; *p && *p != q; p++) {
                if (*p == '<') PROBLEM("<%s>: '<' in an attribute", name);
                if (*p == '&' && !entity_len(p)) PROBLEM("<%s>: a bare '&' in an attribute", name);
            }
            if (!*p) PROBLEM("<%s>: an attribute value that never ends", name);
            p++;
        }
        int self_closed = *p == '/';
        p += self_closed ? 2 : 1;
        if (closing) {
            if (!depth) PROBLEM("</%s> with nothing open", name);
            if (strcmp(stack[depth - 1], name)) PROBLEM("</%s> closes <%s>", name, stack[depth - 1]);
            depth--;
            continue;
        }
        if (is_void(name) || self_closed) continue;
        if (depth == 64) PROBLEM("elements nested too deep");
        snprintf(stack[depth++], sizeof stack[0], "%s", name);
        if (!strcmp(name, "script") || !strcmp(name, "style")) {   // raw text up to its end tag
            char end[24];
            snprintf(end, sizeof end, "</%s", name);
            const char *e = p;
            while (*e && strncasecmp(e, end, strlen(end))) e++;
            if (!*e) PROBLEM("<%s> never ends", name);
            p = e;
        }
    }
    if (depth) PROBLEM("<%s> is never closed", stack[depth - 1]);
    return NULL;
#undef PROBLEM
}

// Where the page would reach the network (a link, an import, a URL in CSS).
static const char *external_url(const char *s) {
    static const char *const MARKS[] = {"http:", "https:", "//", "@import", "url("};
    for (size_t i = 0; i < sizeof MARKS / sizeof MARKS[0]; i++)
        for (const char *p = s; *p; p++)
            if (!strncasecmp(p, MARKS[i], strlen(MARKS[i]))) return MARKS[i];
    return NULL;
}

// The checker itself: it must catch what it is meant to catch.
static void test_checker_catches_mistakes(void **state) {
    (void)state;
    static const char *const BAD[] = {
        "<p>a < b</p>", "<p>a > b</p>", "<p>fish & chips</p>", "<p><b>x</p></b>", "<p>x",
        "<td title=0.5>x</td>", "</p>", "<p title=\"a<b\">x</p>", "<style>p{}",
    };
    char err[256];
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++)
        if (!html_problem(BAD[i], err, sizeof err)) fail_msg("the checker passed '%s'", BAD[i]);
    static const char *const GOOD[] = {
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"></head><body>"
        "<p>a &lt; b &amp;&#160;c<br></p><style>a>b{}</style></body></html>",
    };
    for (size_t i = 0; i < sizeof GOOD / sizeof GOOD[0]; i++)
        if (html_problem(GOOD[i], err, sizeof err)) fail_msg("the checker refused '%s': %s", GOOD[i], err);
    assert_string_equal(external_url("<a href=\"https://x\">"), "https:");
    assert_string_equal(external_url("p{background:url(a.png)}"), "url(");
    assert_null(external_url("<p>a / b</p>"));
}

// ----------------------------------------------------------------------------
// Contrast of heat-map cells, WCAG 2: (L1 + 0.05) / (L2 + 0.05).

static double channel(int c) {
    double v = c / 255.0;
    return v <= 0.03928 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4);
}

static double luminance(unsigned rgb) {
    return 0.2126 * channel((int)(rgb >> 16 & 255)) + 0.7152 * channel((int)(rgb >> 8 & 255)) +
           0.0722 * channel((int)(rgb & 255));
}

// Every style="background:#rrggbb;color:#rrggbb" cell reads at >= 4.5:1;
// returns how many there were.
static int check_contrast(const char *html, const char *what) {
    int cells = 0;
    const char *key = "style=\"background:#";
    for (const char *p = html; (p = strstr(p, key)); p++) {
        unsigned bg, fg;
        if (sscanf(p + strlen(key), "%6x;color:#%6x", &bg, &fg) != 2) continue;
        double a = luminance(bg), b = luminance(fg);
        double ratio = (fmax(a, b) + 0.05) / (fmin(a, b) + 0.05);
        if (ratio < 4.5) fail_msg("%s: text #%06x on #%06x has contrast %.2f, expected >= 4.5", what, fg, bg, ratio);
        cells++;
    }
    return cells;
}

// ----------------------------------------------------------------------------
// Slides

// The page's slides: <section class="slide" id="slide-1">, -2, ... in
// order, each holding more than headings (a heading alone would make a
// slide, or a printed page, of its own), and nothing before the script that
// needs it to work: no button, no nav, no onclick (the script makes the
// controls). Returns the number of slides.
static int check_slides(const char *html, const char *what) {
    const char *script = strstr(html, "<script>");
    if (!script) fail_msg("%s: expected the deck's <script>", what);
    static const char *const DEAD[] = {"<button", "<nav", "onclick", "<input"};
    for (size_t i = 0; i < sizeof DEAD / sizeof DEAD[0]; i++) {
        const char *hit = strstr(html, DEAD[i]);
        if (hit && hit < script)
            fail_msg("%s: '%s' at byte %ld, before the script: a control that cannot work without it", what, DEAD[i],
                     (long)(hit - html));
    }
    int n = 0;
    for (const char *p = html; (p = strstr(p, "<section")) && p < script;) {
        char want[64];
        snprintf(want, sizeof want, "<section class=\"slide\" id=\"slide-%d\">", n + 1);
        if (strncmp(p, want, strlen(want))) fail_msg("%s: slide %d: expected '%s', got '%.60s'", what, n + 1, want, p);
        p += strlen(want);
        const char *end = strstr(p, "</section>");
        if (!end) fail_msg("%s: slide %d never ends", what, n + 1);
        // Without its headings, the slide must still hold something.
        const char *q = p;
        int other = 0;
        while (q < end && !other) {
            while (q < end && isspace((unsigned char)*q)) q++;
            if (q < end && (!strncmp(q, "<h1>", 4) || !strncmp(q, "<h2>", 4))) {
                q = strstr(q, q[2] == '1' ? "</h1>" : "</h2>") + 5;
            } else if (q < end) {
                other = 1;
            }
        }
        if (!other) fail_msg("%s: slide %d holds only a heading: '%.*s'", what, n + 1, (int)(end - p), p);
        n++;
        p = end;
    }
    if (!n) fail_msg("%s: expected slides (<section class=\"slide\">), got none", what);
    return n;
}

// ----------------------------------------------------------------------------
// Tensor values

// Every value of every tensor event of json: in the HTML as title="%.9g"
// (JSON's own digits), in order within the tensor.
static void check_titles(const Event *e, int n, const char *html, const char *what) {
    int tensors = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(e[i].event, "tensor")) continue;
        tensors++;
        const char *at = html;
        for (int k = 0; k < e[i].ndata; k++) {
            float v = e[i].data[k];
            char want[64];
            if (isnan(v)) snprintf(want, sizeof want, "title=\"nan\"");
            else if (isinf(v)) snprintf(want, sizeof want, "title=\"%s\"", v < 0 ? "-inf" : "inf");
            else snprintf(want, sizeof want, "title=\"%.9g\"", (double)v);
            const char *hit = strstr(at, want);
            if (!hit)
                fail_msg("%s: tensor %s (step %d, run %s)[%d]: expected %s in the page, got none after byte %ld", what,
                         e[i].name, e[i].step, e[i].run, k, want, (long)(at - html));
            at = hit + strlen(want);
        }
    }
    (void)tensors;
}

// Every value in the Markdown as a cell "| v |" as printed (4 decimals,
// fixed or scientific; whole numbers and truth values as they are), in
// order within its tensor.
static void check_md_values(const Event *e, int n, const char *md, const char *what) {
    for (int i = 0; i < n; i++) {
        if (strcmp(e[i].event, "tensor")) continue;
        const char *at = md;
        for (int k = 0; k < e[i].ndata; k++) {
            float v = e[i].data[k];
            char forms[5][64];
            int nf = 0;
            if (isnan(v)) snprintf(forms[nf++], 64, "| nan |");
            else if (isinf(v)) snprintf(forms[nf++], 64, "| %s |", v < 0 ? "-inf" : "inf");
            else {
                snprintf(forms[nf++], 64, "| %.4f |", (double)v);
                snprintf(forms[nf++], 64, "| %.4e |", (double)v);
                if (v == floorf(v) && fabsf(v) < 1e15f) snprintf(forms[nf++], 64, "| %lld |", (long long)v);
                if (v == 0 || v == 1) snprintf(forms[nf++], 64, "| %s |", v != 0 ? "True" : "False");
            }
            const char *best = NULL;
            int which = 0;
            for (int f = 0; f < nf; f++) {
                const char *hit = strstr(at, forms[f]);
                if (hit && (!best || hit < best)) best = hit, which = f;
            }
            if (!best)
                fail_msg("%s: tensor %s (step %d, run %s)[%d]: expected the cell '%s', got none after byte %ld", what,
                         e[i].name, e[i].step, e[i].run, k, forms[0], (long)(at - md));
            at = best + strlen(forms[which]) - 1;   // the next cell starts at this one's closing |
        }
    }
}

// Cells of a Markdown table line: its unescaped |, less one.
static int md_cells(const char *line, size_t len) {
    int bars = 0;
    for (size_t i = 0; i < len; i++) {
        if (line[i] == '\\') i++;
        else if (line[i] == '|') bars++;
    }
    return bars - 1;
}

// Each table (a line of |, a separator |---|, rows) has as many cells in
// every row as in its head; fenced blocks are left alone. Returns the
// number of tables.
static int check_md_tables(const char *md, const char *what) {
    int tables = 0, head = -1, in_fence = 0, line_no = 0, prev_cells = -1;
    for (const char *p = md; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        line_no++;
        if (!strncmp(p, "```", 3)) in_fence = !in_fence;
        int table_line = !in_fence && len && p[0] == '|';
        if (!table_line) {
            head = -1;
            prev_cells = -1;
        } else if (head < 0 && prev_cells < 0) {
            prev_cells = md_cells(p, len);   // the head, if a separator follows
        } else if (head < 0) {
            if (strspn(p, "|:- ") != len)
                fail_msg("%s: line %d: a table line after a line of | that is no separator: %.*s", what, line_no,
                         (int)len, p);
            head = prev_cells;
            tables++;
            if (md_cells(p, len) != head)
                fail_msg("%s: line %d: separator has %d cells, expected %d", what, line_no, md_cells(p, len), head);
        } else if (md_cells(p, len) != head) {
            fail_msg("%s: line %d: expected %d cells, got %d: %.*s", what, line_no, head, md_cells(p, len), (int)len, p);
        }
        p = nl ? nl + 1 : p + len;
    }
    if (in_fence) fail_msg("%s: a fenced block that never ends", what);
    return tables;
}

// ----------------------------------------------------------------------------
// Both languages whole: the page of --lang en and the page of --lang zh hold
// the same texts, each in both languages, --lang choosing only the one shown
// first (<html lang>). A text that a lesson put into the page in its own
// language alone (a result line, a table cell, a code line) makes them differ.
// The pages come from two runs, so what a measurement prints is set aside:
// every number reads 0 and its time unit goes; a bar of block characters
// reads #; the marks and warnings of a busy machine (lines that begin with
// "!", the busy banner's second line, a "  !" after a time) go.

// Whether s begins a time unit after a number: " ns", " µs", " ms", " s".
static size_t time_unit(const char *s) {
    static const char *const UNITS[] = {" ns", " µs", " ms", " s"};
    for (size_t i = 0; i < sizeof UNITS / sizeof UNITS[0]; i++) {
        size_t n = strlen(UNITS[i]);
        if (!strncmp(s, UNITS[i], n) && !isalpha((unsigned char)s[n])) return n;
    }
    return 0;
}

// s until the end of its line or the next tag.
static const char *line_end(const char *s) {
    while (*s && *s != '\n' && *s != '<') s++;
    return s;
}

// The page as the comparison reads it (malloc'd).
static char *twin_normal(const char *page) {
    char busy[256];
    MeasureMachine m = {.load = 9, .cores = 1};
    const char *second[2];   // the busy banner's second line, in each language
    for (int zh = 0; zh < 2; zh++) {
        measure_busy_text(busy, sizeof busy, m, zh);
        const char *nl = strchr(busy, '\n');
        second[zh] = strdup(nl ? nl + 1 : "");
    }
    Buf b;
    buf_init(&b);
    buf_append(&b, "");
    for (const char *p = page; *p;) {
        char prev = p > page ? p[-1] : '\n';
        if (isdigit((unsigned char)*p)) {
            while (isdigit((unsigned char)*p) || ((*p == '.' || *p == ',') && isdigit((unsigned char)p[1]))) p++;
            p += time_unit(p);
            buf_append(&b, "0");
        } else if ((unsigned char)p[0] == 0xe2 && (unsigned char)p[1] == 0x96 && (unsigned char)p[2] >= 0x80 &&
                   (unsigned char)p[2] <= 0x9f) {
            while ((unsigned char)p[0] == 0xe2 && (unsigned char)p[1] == 0x96 && (unsigned char)p[2] >= 0x80 &&
                   (unsigned char)p[2] <= 0x9f)
                p += 3;
            buf_append(&b, "#");
        } else if ((prev == '\n' || prev == '>') && (!strncmp(p, "! ", 2) || !strncmp(p, second[0], strlen(second[0])) ||
                                                      !strncmp(p, second[1], strlen(second[1])))) {
            p = line_end(p);
            if (*p == '\n') p++;
        } else if (!strncmp(p, "  !", 3) && (p[3] == '\n' || p[3] == '<')) {
            p += 3;
        } else {
            buf_appendn(&b, p, 1);
            p++;
        }
    }
    free((char *)second[0]);
    free((char *)second[1]);
    char *s = buf_take(&b);
    assert_non_null(s);
    // What the marks left empty, and the language of the first view.
    static const char *const EMPTY[] = {"<span class=\"en\" lang=\"en\"></span><span class=\"zh\" lang=\"zh-CN\"></span>",
                                        "\n</span>", "<pre class=\"lines\"></pre>\n", "<html lang=\"zh-CN\">"};
    static const char *const AS[] = {"", "</span>", "", "<html lang=\"en\">"};
    for (size_t i = 0; i < sizeof EMPTY / sizeof EMPTY[0]; i++)
        for (char *at; (at = strstr(s, EMPTY[i]));) {
            size_t n = strlen(EMPTY[i]), k = strlen(AS[i]);
            memcpy(at, AS[i], k);
            memmove(at + k, at + n, strlen(at + n) + 1);
        }
    return s;
}

// Fails at the first line where the two pages differ.
static void check_twins(const char *en_page, const char *zh_page, const char *what) {
    char *a = twin_normal(en_page), *b = twin_normal(zh_page);
    char *fa = strstr(a, "<footer class=\"prov\">"), *fb = strstr(b, "<footer class=\"prov\">");
    if (fa) *fa = '\0';   // the footer's command line says --lang en or --lang zh
    if (fb) *fb = '\0';
    int line = 1;
    const char *p = a, *q = b;
    while (*p && *p == *q) {
        if (*p == '\n') line++;
        p++, q++;
    }
    if (*p || *q) {
        while (p > a && p[-1] != '\n') p--;
        while (q > b && q[-1] != '\n') q--;
        fail_msg("%s: the pages of --lang en and --lang zh differ at line %d (numbers read 0): en page '%.*s', "
                 "zh page '%.*s' (a text in one language only)",
                 what, line, (int)strcspn(p, "\n"), p, (int)strcspn(q, "\n"), q);
    }
    free(a);
    free(b);
}

// ----------------------------------------------------------------------------
// Every lesson, both languages

static void check_lesson(const Lesson *l) {
    char quick[128], args[256], what[300];
    lesson_quick_args(l->options, quick, sizeof quick);
    snprintf(args, sizeof args, "lesson %s --format json%s", l->id, quick);
    int n;
    Event *e = kvdemo_json(args, &n);
    int values = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(e[i].event, "tensor")) values += e[i].ndata;
    static const char *const LANGS[] = {"en", "zh"};
    char *en_page = NULL;
    for (int g = 0; g < 2; g++) {
        snprintf(args, sizeof args, "lesson %s --format html --lang %s%s", l->id, LANGS[g], quick);
        snprintf(what, sizeof what, "kvdemo %s", args);
        RunResult r = kvdemo_run(args);
        if (r.status != 0) fail_msg("%s: exit status %d, expected 0; stderr: %s", what, r.status, r.err);
        char err[256];
        const char *problem = html_problem(r.out, err, sizeof err);
        if (problem) fail_msg("%s: not well-formed: %s", what, problem);
        const char *url = external_url(r.out);
        if (url) fail_msg("%s: '%s' in the page, expected nothing that reaches the network", what, url);
        char want[300];
        snprintf(want, sizeof want, "<html lang=\"%s\">", g ? "zh-CN" : "en");
        if (!strstr(r.out, want)) fail_msg("%s: expected %s", what, want);
        // Both languages are in the page: the lesson's heading in each.
        snprintf(want, sizeof want, "<span class=\"en\" lang=\"en\">Lesson %s — ", l->id);
        if (!strstr(r.out, want)) fail_msg("%s: expected the English heading '%s'", what, want);
        snprintf(want, sizeof want, "第 %s 课 —— %s", l->id, l->title_zh);
        if (!strstr(r.out, want)) fail_msg("%s: expected the Chinese heading '%s'", what, want);
        if (!strstr(r.out, "@media print")) fail_msg("%s: expected a print style", what);
        check_slides(r.out, what);
        check_titles(e, n, r.out, what);
        check_contrast(r.out, what);
        if (g) check_twins(en_page, r.out, what);
        else en_page = strdup(r.out);
        run_free(&r);

        snprintf(args, sizeof args, "lesson %s --format md --lang %s%s", l->id, LANGS[g], quick);
        snprintf(what, sizeof what, "kvdemo %s", args);
        r = kvdemo_run(args);
        if (r.status != 0) fail_msg("%s: exit status %d, expected 0; stderr: %s", what, r.status, r.err);
        int tables = check_md_tables(r.out, what);
        if (values && !tables) fail_msg("%s: %d tensor values in JSON, but no table", what, values);
        check_md_values(e, n, r.out, what);
        snprintf(want, sizeof want, g ? "# 第 %s 课 —— " : "# Lesson %s — ", l->id);
        if (strncmp(r.out, want, strlen(want))) fail_msg("%s: expected it to begin '%s'", what, want);
        run_free(&r);
    }
    free(en_page);
    events_free(e, n);
}

static void test_every_lesson(void **state) {
    (void)state;
    int built = 0;
    for (int i = 0; i < NUM_LESSONS; i++) {
        if (!LESSONS[i].run) continue;
        char what[64];
        snprintf(what, sizeof what, "test_html: lesson %s's pages", LESSONS[i].id);
        if (LESSONS[i].options[OPT_MODEL] && tests_sanitized_skip(what)) continue;
        check_lesson(&LESSONS[i]);
        built++;
    }
    assert_true(built >= (tests_sanitized() ? 5 : 10));
}

// Lesson 2's page holds its heat maps: coloured cells, a legend for scores
// and one for weights, masked cells in grey.
static void test_heat_maps(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 2 --format html");
    assert_int_equal(r.status, 0);
    int cells = check_contrast(r.out, "lesson 2 --format html");
    if (cells < 20) fail_msg("lesson 2 --format html: expected at least 20 coloured cells, got %d", cells);
    assert_non_null(strstr(r.out, "(scores: blue below 0, white 0, red above)"));
    assert_non_null(strstr(r.out, "(weights: fixed scale 0 to 1)"));
    assert_non_null(strstr(r.out, "title=\"-inf\""));
    assert_non_null(strstr(r.out, ">&gt;&gt;&gt; Q = torch.matmul(X, W_Q)<"));
    run_free(&r);
}

// Lesson 2 as slides: the title with the weights; each run's heading with
// its step 1, then step 2 (with the run's counts); the comparison. No
// heading is a slide of its own. The Markdown has the same slides.
static void test_lesson2_slides(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 2 --format html");
    assert_int_equal(r.status, 0);
    int n = check_slides(r.out, "lesson 2 --format html");
    if (n != 7) fail_msg("lesson 2 --format html: expected 7 slides, got %d", n);
    // The six of the lesson, then the class questions of docs/lesson-2.md,
    // each answer behind its question (<details>).
    static const char *const FIRST[] = {"Lesson 2 — ", "2.1 Without the KV cache", "Step 2: the input",
                                        "2.2 With the KV cache", "Step 2 with the cache", "Comparison",
                                        "<summary><span class=\"en\" lang=\"en\">How many rows of K and V does each run compute for "
                                        "天气真?</span><span class=\"zh\" lang=\"zh-CN\">对“天气真”，两种方式各算了多少行 K、V？</span>"
                                        "</summary>\n<p><span class=\"en\" lang=\"en\">Without the cache 2 + 3 = 5"};
    for (int i = 0; i < 7; i++) {
        char want[32];
        snprintf(want, sizeof want, "id=\"slide-%d\"", i + 1);
        const char *at = strstr(r.out, want), *hit = at ? strstr(at, FIRST[i]) : NULL;
        const char *next = at ? strstr(at, "</section>") : NULL;
        if (!hit || hit > next) fail_msg("lesson 2 --format html: expected '%s' on slide %d", FIRST[i], i + 1);
    }
    run_free(&r);
    // Markdown: the same slides, a --- line (with a blank line before it)
    // between two, and nothing after the last.
    r = kvdemo_run("lesson 2 --format md");
    assert_int_equal(r.status, 0);
    const char *at = r.out;
    static const char *const MD_LAST = "## Questions for the class\n\n1. How many rows of K and V does each run compute "
                                       "for 天气真?\n   Without the cache 2 + 3 = 5";
    for (int i = 0; i < 7; i++) {
        const char *hit = strstr(at, i < 6 ? FIRST[i] : MD_LAST), *rule = strstr(at, "\n\n---\n\n");
        if (!hit) fail_msg("lesson 2 --format md: expected '%s' on slide %d", i < 6 ? FIRST[i] : MD_LAST, i + 1);
        if (i < 6 && (!rule || rule < hit))
            fail_msg("lesson 2 --format md: expected a --- line after '%s' (slide %d)", FIRST[i], i + 1);
        if (i == 6 && rule) fail_msg("lesson 2 --format md: a --- line after the last slide");
        if (rule) at = rule + 7;
    }
    run_free(&r);
}

// The rows of the table under the code line `code` on slide `slide`: their
// classes ("-" for none) and tokens must be as expected.
static void check_rows(const char *html, int slide, const char *code, int n, const char *const *cls,
                       const char *const *tok) {
    char at[32];
    snprintf(at, sizeof at, "id=\"slide-%d\"", slide);
    const char *p = strstr(html, at), *end = p ? strstr(p, "</section>") : NULL;
    p = p ? strstr(p, code) : NULL;
    if (!p || p > end) fail_msg("lesson 2 --format html: expected '%s' on slide %d", code, slide);
    p = strstr(p, "<tbody>");
    for (int r = 0; r < n; r++) {
        p = strstr(p, "<tr");
        char want[128];
        if (strcmp(cls[r], "-")) snprintf(want, sizeof want, "<tr class=\"%s\"><th class=\"tok\">%s</th>", cls[r], tok[r]);
        else snprintf(want, sizeof want, "<tr><th class=\"tok\">%s</th>", tok[r]);
        if (strncmp(p, want, strlen(want)))
            fail_msg("slide %d, '%s', row %d: expected '%s', got '%.60s'", slide, code, r, want, p);
        p += 3;
    }
}

// Lesson 2, the cache drawn: in the cached step 2 (slide 5) K and V are
// the two rows of 天气 read from the cache and the row of 真 appended, and
// the new token's rows are new; in step 2 without the cache (slide 3) the
// rows of 天气 are computed again for nothing. Step 1 marks nothing. Each
// marked slide has the legend of its marks.
static void test_lesson2_cache_rows(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 2 --format html");
    assert_int_equal(r.status, 0);
    const char *tok[3] = {"天", "气", "真"};
    const char *cached[3] = {"row-reused", "row-reused", "row-new"};
    const char *full[3] = {"row-recomputed", "row-recomputed", "row-new"};
    check_rows(r.out, 5, "K = torch.cat([K_last, K_cur])", 3, cached, tok);
    check_rows(r.out, 5, "V = torch.cat([V_last, V_cur])", 3, cached, tok);
    check_rows(r.out, 5, "K_last = K of step 1", 2, cached, tok);
    check_rows(r.out, 5, "K_cur = torch.matmul(X, W_K)", 1, cached + 2, tok + 2);
    check_rows(r.out, 5, "output = torch.matmul(scores, V)", 1, cached + 2, tok + 2);
    const char *plain[2] = {"-", "-"};
    check_rows(r.out, 5, "X = the new token", 1, plain, tok + 2);   // the input: not computed
    check_rows(r.out, 3, "K = torch.matmul(X, W_K)", 3, full, tok);
    check_rows(r.out, 3, "Q = torch.matmul(X, W_Q)", 3, full, tok);
    check_rows(r.out, 3, "output = torch.matmul(scores, V)", 3, full, tok);
    check_rows(r.out, 2, "K = torch.matmul(X, W_K)", 2, plain, tok);
    check_rows(r.out, 4, "V = torch.matmul(X, W_V)", 2, plain, tok);
    static const struct { int slide; const char *want; } LEGEND[] = {
        {3, "sw row-recomputed"}, {3, "sw row-new"}, {5, "sw row-reused"}, {5, "sw row-new"}};
    for (size_t i = 0; i < sizeof LEGEND / sizeof LEGEND[0]; i++) {
        char at[32];
        snprintf(at, sizeof at, "id=\"slide-%d\"", LEGEND[i].slide);
        const char *p = strstr(r.out, at), *end = strstr(p, "</section>"), *hit = strstr(p, LEGEND[i].want);
        if (!hit || hit > end) fail_msg("lesson 2: expected '%s' in the legend of slide %d", LEGEND[i].want, LEGEND[i].slide);
    }
    const char *two = strstr(r.out, "id=\"slide-2\""), *three = strstr(r.out, "id=\"slide-3\"");
    const char *legend = strstr(two, "rowlegend");
    if (legend && legend < three) fail_msg("lesson 2: a row legend on slide 2 (step 1), which marks nothing");
    run_free(&r);
}

// Lesson 3's keys (--init random) at the first two steps (batch row 0, "<bos> 天 气" of the
// article's prompt "天气", then one more position; and batch row 1, "<bos> 你 好",
// at step 1): the article's loop feeds
// tokens[:, 0:3] first (start_pos = min_prompt_size = 3), then with the
// cache tokens[:, 3:4], reading positions 0..2 from the cache; without it
// tokens[:, 0:4], positions 0..2 computed again.
static void check_keys_rows(const char *run, const char *const *step1, const char *const *step2) {
    char args[64];
    snprintf(args, sizeof args, "lesson 3 --init random %s --format html", run);
    RunResult r = kvdemo_run(args);
    assert_int_equal(r.status, 0);
    const char *p = r.out;
    for (int k = 0; k < 3; k++) {   // step 1's of batch rows 0 and 1, then step 2's of batch row 0
        int step = k < 2 ? 1 : 2;
        const char *const *want = step == 1 ? step1 : step2;
        p = strstr(p, "keys = self.cache_k[:bsz, : start_pos + seqlen]");
        if (!p) fail_msg("kvdemo %s: expected the keys of step %d", args, step);
        const char *end = strstr(p, "</table>");
        int n = 0;
        for (const char *tr = p; (tr = strstr(tr, "<tr class=\"")) && tr < end; tr++, n++) {
            const char *cls = tr + strlen("<tr class=\"");
            if (!want[n] || strncmp(cls, want[n], strlen(want[n])) || cls[strlen(want[n])] != '"')
                fail_msg("kvdemo %s: keys of step %d, row %d: expected %s, got '%.16s'", args, step, n,
                         want[n] ? want[n] : "no more marked rows", cls);
        }
        if (want[n]) fail_msg("kvdemo %s: keys of step %d: expected row %d %s, got %d marked rows", args, step, n, want[n], n);
        p = end;
    }
    run_free(&r);
}

static void test_lesson3_cache_rows(void **state) {
    (void)state;
    const char *prefill[] = {"row-new", "row-new", "row-new", NULL};
    const char *cached[] = {"row-reused", "row-reused", "row-reused", "row-new", NULL};
    const char *full[] = {"row-recomputed", "row-recomputed", "row-recomputed", "row-new", NULL};
    check_keys_rows("--cache", prefill, cached);
    check_keys_rows("--no-cache", prefill, full);
}

// Lesson 6.1's pool as pictures: after the fork of 3 samples the prompt's
// first block is held by all three (ref 3, drawn shared); the next step
// copies a shared block on write, drawn as an arrow under its legend.
static void test_lesson61_pool_pictures(void **state) {
    (void)state;
    const char *args = "lesson 6.1 --samples 3 --steps 8 --repeat 1 --init random --preset tiny --format html";
    RunResult r = kvdemo_run(args);
    assert_int_equal(r.status, 0);
    int pools = 0, shared3 = 0, arrows = 0;
    for (const char *p = r.out; (p = strstr(p, "<svg class=\"pool\"")); p++) {
        const char *end = strstr(p, "</svg>");
        if (!end) fail_msg("kvdemo %s: a pool picture that never ends", args);
        pools++;
        const char *ref = strstr(p, "L0 · ref 3");
        shared3 += ref && ref < end;
        const char *arrow = strstr(p, "<path d=\"M"), *legend = strstr(p, "copied on write from");
        arrows += arrow && arrow < end && legend && legend < end;
    }
    if (pools < 3) fail_msg("kvdemo %s: expected a pool picture a step, got %d", args, pools);
    if (!shared3) fail_msg("kvdemo %s: expected a picture with block L0 shared by the 3 samples (ref 3)", args);
    if (!arrows) fail_msg("kvdemo %s: expected a copy-on-write arrow in a picture", args);
    run_free(&r);
}

// Lessons 4 and 5 chart with bars of █, ░ and ·; their pages draw each bar
// as an SVG bar (░ is all but invisible on a projector) and keep no bar
// characters in a cell.
static void test_bars_are_drawn(void **state) {
    (void)state;
    static const char *const ARGS[] = {"lesson 4 --steps 8 --repeat 1 --init random --preset tiny --format html",
                                       "lesson 5 --init random --preset tiny --format html"};
    for (int i = 0; i < 2; i++) {
        RunResult r = kvdemo_run(ARGS[i]);
        assert_int_equal(r.status, 0);
        int bars = 0;
        for (const char *p = r.out; (p = strstr(p, "<svg class=\"bar\"")); p++) bars++;
        if (bars < 4) fail_msg("kvdemo %s: expected SVG bars in the chart, got %d", ARGS[i], bars);
        for (const char *p = r.out; (p = strstr(p, "<td")); p++) {
            const char *text = strchr(p, '>') + 1, *end = strstr(text, "</td>");
            const char *hit = strstr(text, "\u2588"), *light = strstr(text, "\u2591");
            if ((hit && hit < end) || (light && light < end))
                fail_msg("kvdemo %s: a cell still drawn in characters: '%.60s'", ARGS[i], text);
        }
        run_free(&r);
    }
}

// Lesson 7's page draws the triangle the cache removes: for its 8 steps,
// n(n+1)/2 = 36 K/V rows without the cache and n = 8 with it (§7); each
// step after the first a run of earlier positions (greyed, or reused) and
// its new one.
static void test_lesson7_triangle(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 7 --steps 8 --format html");
    assert_int_equal(r.status, 0);
    const char *svg = strstr(r.out, "<svg class=\"triangle\""), *end = svg ? strstr(svg, "</svg>") : NULL;
    if (!end) fail_msg("lesson 7 --steps 8 --format html: expected the triangle's picture");
    static const struct { const char *what; int n; } WANT[] = {
        {"without the cache: 36 K/V rows", 1}, {"with the cache: 8 K/V rows", 1},
        {"class=\"row-recomputed\"", 7}, {"class=\"row-reused\"", 7}, {"<rect class=\"row-new\"", 16}};
    for (size_t i = 0; i < sizeof WANT / sizeof WANT[0]; i++) {
        int n = 0;
        for (const char *p = svg; (p = strstr(p, WANT[i].what)) && p < end; p++) n++;
        if (n != WANT[i].n) fail_msg("lesson 7's triangle: expected %d x '%s', got %d", WANT[i].n, WANT[i].what, n);
    }
    run_free(&r);
}

// The page's footer says what made it: kvdemo's version, the command line
// and the comparisons identical bit for bit (lesson 2 makes one, the
// cached output against the uncached one's last row, and they are).
static void test_footer(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 2 --format html");
    assert_int_equal(r.status, 0);
    const char *f = strstr(r.out, "<footer class=\"prov\">");
    if (!f) fail_msg("lesson 2 --format html: expected a footer");
    static const char *const WANT[] = {"kvdemo 0.", "<code>kvdemo lesson 2 --format html</code>",
                                       "1 of 1 comparisons identical bit for bit", "1 次比较中 1 次逐位相同"};
    for (size_t i = 0; i < sizeof WANT / sizeof WANT[0]; i++)
        if (!strstr(f, WANT[i])) fail_msg("lesson 2's footer: expected '%s', got '%.300s'", WANT[i], f);
    run_free(&r);
}

// The footer names the model file a lesson read and the checksum the file
// carries: its last 4 bytes, little-endian (docs/model-format.md), read here.
static void test_footer_names_the_weights(void **state) {
    (void)state;
    const char *model = "data/tinyshakespeare-draft.bin";
    FILE *f = fopen(model, "rb");
    assert_non_null(f);
    unsigned char b[4];
    assert_int_equal(fseek(f, -4, SEEK_END), 0);
    assert_int_equal(fread(b, 1, 4, f), 4);
    fclose(f);
    unsigned sum = b[0] | b[1] << 8 | b[2] << 16 | (unsigned)b[3] << 24;
    RunResult r = kvdemo_run("lesson 10 --model data/tinyshakespeare-draft.bin --steps 4 --repeat 1 --format html");
    assert_int_equal(r.status, 0);
    const char *foot = strstr(r.out, "<footer class=\"prov\">");
    if (!foot) fail_msg("lesson 10 --format html: expected a footer");
    char want[2][160];
    snprintf(want[0], sizeof want[0], "<code>%s</code><span class=\"en\" lang=\"en\"> (Adler-32 %08x) · </span>", model, sum);
    snprintf(want[1], sizeof want[1], "（Adler-32 %08x）· ", sum);
    for (int i = 0; i < 2; i++)
        if (!strstr(foot, want[i])) fail_msg("lesson 10's footer: expected '%s', got '%.400s'", want[i], foot);
    run_free(&r);
}

// Lesson 6.3's page draws each tile it computes over the 3 x 3 scores of
// 天气真 in 2 x 2 tiles: (1, 1), (2, 1) and (2, 2); (1, 2) lies above the
// diagonal and is skipped. Beside each, m and l of the tile's query rows
// (the first block holds two query rows, the second one).
static void test_lesson63_tiles(void **state) {
    (void)state;
    const char *args = "lesson 6.3 --repeat 1 --max-n 1024 --init random --preset tiny --format html";
    RunResult r = kvdemo_run(args);
    assert_int_equal(r.status, 0);
    static const int ROWS[] = {2, 1, 1};
    int n = 0;
    for (const char *p = r.out; (p = strstr(p, "<svg class=\"tiles\"")); p++, n++) {
        const char *end = strstr(p, "</svg>");
        int m = 0;
        for (const char *q = p; (q = strstr(q, ": m = ")) && q < end; q++) m++;
        if (n < 3 && m != ROWS[n]) fail_msg("kvdemo %s: tile picture %d: expected m and l of %d rows, got %d", args, n + 1, ROWS[n], m);
        const char *frame = strstr(p, "stroke=\"" FLASH_CURRENT "\" stroke-width=\"4\"");
        if (!frame || frame > end) fail_msg("kvdemo %s: tile picture %d: expected the tile being processed framed", args, n + 1);
    }
    if (n != 3) fail_msg("kvdemo %s: expected 3 tile pictures (the tiles computed), got %d", args, n);
    run_free(&r);
}

// Lesson 10's page replays the race: a bar a run, each animated through
// keyframes from the times its run recorded step by step, the shares of
// time never going back and both bars full at the end (100%, all steps).
static void test_lesson10_replay(void **state) {
    (void)state;
    const char *args = "lesson 10 --steps 8 --repeat 1 --init random --preset tiny --format html";
    RunResult r = kvdemo_run(args);
    assert_int_equal(r.status, 0);
    const char *d = strstr(r.out, "<details class=\"replay\" open>");
    if (!d) fail_msg("kvdemo %s: expected the race's replay, open", args);
    for (int c = 0; c < 2; c++) {
        char name[64];
        snprintf(name, sizeof name, "@keyframes kvdemo-race-%d{", c);
        const char *k = strstr(d, name), *end = k ? strchr(k + strlen(name), '}') : NULL;
        while (end && end[1] != '}' && end[1] != '@' && end[1] != '<') end = strchr(end + 1, '}');
        if (!k || !end) fail_msg("kvdemo %s: expected the keyframes of run %d", args, c);
        double last = -1;
        for (const char *p = k + strlen(name); p < end;) {
            double at = strtod(p, NULL);
            if (at < last) fail_msg("kvdemo %s: run %d's keyframes go back in time: %g after %g", args, c, at, last);
            last = at;
            p = strchr(p, '}');
            if (!p) break;
            p++;
        }
        if (!strstr(k, "100.00%{transform:scaleX(1.0000)}") || strstr(k, "100.00%{transform:scaleX(1.0000)}") > end + 1)
            fail_msg("kvdemo %s: run %d's bar should be full at the end of its time", args, c);
        snprintf(name, sizeof name, "animation:kvdemo-race-%d ", c);
        if (!strstr(d, name)) fail_msg("kvdemo %s: expected run %d's bar animated ('%s')", args, c, name);
    }
    run_free(&r);
    // With three runs each bar ends at its way's median, the time the text gives.
    args = "lesson 10 --steps 8 --repeat 3 --init random --preset tiny --format html";
    r = kvdemo_run(args);
    assert_int_equal(r.status, 0);
    static const char *const RUN[2] = {"time (no-cache): ", "time (cache): "};
    const char *label = strstr(r.out, "<details class=\"replay\" open>");
    for (int c = 0; c < 2 && label; c++) {
        const char *t = strstr(r.out, RUN[c]);
        char want[32] = "", got[32] = "";
        if (t) sscanf(t + strlen(RUN[c]), "%31[^(]", want);
        size_t n = strlen(want);
        while (n && want[n - 1] == ' ') want[--n] = 0;
        label = strstr(label, "\">");   // the next label: the bar's time
        while (label && !(label[2] >= '0' && label[2] <= '9')) label = strstr(label + 2, "\">");
        if (label) sscanf(label + 2, "%31[^<]", got);
        if (!want[0] || strcmp(want, got))
            fail_msg("kvdemo %s: run %d's replay should end at the median \"%s\", got \"%s\"", args, c, want, got);
        if (label) label += 2;
    }
    if (!label) fail_msg("kvdemo %s: expected the replay with both bars' times", args);
    run_free(&r);
}

// The trace itself, without a lesson: text that HTML and Markdown must
// escape, a 3-D tensor, -inf, and what a lesson prints around the trace.
static char *render(TraceFormat format, int fail) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    Trace tr;
    trace_init(&tr, f);
    tr.format = format;
    tr.lesson = "test";
    assert_int_equal(trace_begin(&tr), 0);
    trace_heading(&tr, "A <b> & c", "甲 <b> & 丙");
    trace_say(&tr, "x < y && z > 0 // http://nowhere", "中文 x < y");
    float m[6] = {1.5f, -INFINITY, 0.25f, 3, 1e-6f, 0};
    Tensor t2 = tensor_view2(m, 2, 3);
    const char *rows[2] = {"<a>", "|&"};
    trace_cache_rows(&tr, 1, ROW_REUSED);   // this tensor only
    trace_tensor(&tr, TRACE_FULL, "scores", "s = q @ k.T", &t2, rows, HEAT_SCORES);
    trace_tensor(&tr, TRACE_FULL, "again", NULL, &t2, rows, HEAT_NONE);
    Tensor t3 = tensor_view(m, 3, (const int[]){3, 1, 2});
    trace_tensor(&tr, TRACE_FULL, "cache_k", NULL, &t3, NULL, HEAT_NONE);
    fprintf(tr.out, "  step  a|b  <c>\n");
    fprintf(tr.out, "  1     2    3\n");
    trace_count(&tr, "rows", 3, "rows", "行");
    static const TraceColumn COLS[] = {{"name", "名字", 8, 0, NULL}, {"a|b", "甲", 6, 1, NULL}};
    static const TraceTable TABLE = {"demo", 2, COLS};
    trace_table_head(&tr, &TABLE);
    trace_table_row(&tr, &TABLE, (const char *const[]){"<x>", "1"});
    trace_step(&tr, 1);   // a step between rows keeps the table whole
    trace_count(&tr, "hidden", 5, NULL, NULL);
    trace_table_row(&tr, &TABLE, (const char *const[]){"y|z", "2"});
    trace_step(&tr, 0);
    trace_count(&tr, "hidden", 4, NULL, NULL);
    int rc = trace_finish(&tr, fail);
    assert_int_equal(rc, fail);
    fclose(f);
    return text;
}

static void test_trace_documents(void **state) {
    (void)state;
    char *h = render(FORMAT_HTML, 0);
    char err[256];
    const char *problem = html_problem(h, err, sizeof err);
    if (problem) fail_msg("trace as HTML: %s\n%s", problem, h);
    if (external_url(h)) fail_msg("trace as HTML: '%s' in the page", external_url(h));
    static const char *const WANT[] = {
        "<h1><span class=\"en\" lang=\"en\">A &lt;b&gt; &amp; c</span>",   // both languages, escaped
        "<span class=\"zh\" lang=\"zh-CN\">甲 &lt;b&gt; &amp; 丙</span></h1>",
        "<th class=\"tok\">&lt;a&gt;</th>",                                  // row labels escaped
        "title=\"-inf\"", "title=\"9.99999997e-07\"", "title=\"1.5\"",
        "&gt;&gt;&gt; s = q @ k.T",                                         // the code line
        "cache_k[2]",                                                       // slices of a 3-D tensor
        "step  a|b  &lt;c&gt;\n1     2    3</pre>",                            // printed text, one block
        "rows: 3", "行：3",
        "<tr class=\"row-reused\"><th class=\"tok\">&lt;a&gt;</th>",          // trace_cache_rows: old, then new
        "<tr class=\"row-new\"><th class=\"tok\">|&amp;</th>",
        "<p class=\"rowlegend\"><span class=\"sw row-new\">",
        "<th class=\"l\"><span class=\"en\" lang=\"en\">name</span><span class=\"zh\" lang=\"zh-CN\">名字</span></th><th>",
        "<tr><td class=\"l\">&lt;x&gt;</td><td>1</td></tr>\n<tr><td class=\"l\">y|z</td><td>2</td></tr>\n</tbody></table>",
    };
    for (size_t i = 0; i < sizeof WANT / sizeof WANT[0]; i++)
        if (!strstr(h, WANT[i])) fail_msg("trace as HTML: expected '%s' in\n%s", WANT[i], h);
    assert_null(strstr(h, "hidden"));
    // The roles held for one tensor: the same tensor again has none.
    const char *again = strstr(h, "again (2, 3)");
    assert_non_null(again);
    if (strstr(again, "<tr class=")) fail_msg("trace as HTML: row marks after the tensor they were for: %s", strstr(again, "<tr class="));
    free(h);

    char *md = render(FORMAT_MD, 0);
    check_md_tables(md, "trace as Markdown");
    static const char *const WANT_MD[] = {
        "# A \\<b\\> & c\n",
        "```python\n>>> s = q @ k.T\n```",
        "| token | 0 | 1 | 2 |\n|:---|---:|---:|---:|\n| \\<a\\> | 1.5000e+00 | -inf | 2.5000e-01 |\n",
        "| \\|& | 3.0000e+00 | 1.0000e-06 | 0.0000e+00 |",
        "```text\nstep  a|b  <c>\n1     2    3\n```",
        "rows: 3  \n",
        "| name | a\\|b |\n|:---|---:|\n| \\<x\\> | 1 |\n| y\\|z | 2 |\n",
    };
    for (size_t i = 0; i < sizeof WANT_MD / sizeof WANT_MD[0]; i++)
        if (!strstr(md, WANT_MD[i])) fail_msg("trace as Markdown: expected '%s' in\n%s", WANT_MD[i], md);
    free(md);

    // A run that failed writes nothing.
    char *none = render(FORMAT_HTML, 1);
    assert_string_equal(none, "");
    free(none);
}

// What html and md do with --step, with commands, and when a lesson fails.
static void test_options_and_commands(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 2 --format html --step");
    assert_int_equal(r.status, 0);
    if (count_lines(r.err) != 1 || !strstr(r.err, "--step"))
        fail_msg("lesson 2 --format html --step: expected one line on stderr about --step, got '%s'", r.err);
    run_free(&r);
    expect_failure("bench --format html", 2, "--format takes one of text|json, not 'html'");
    r = kvdemo_run("lesson 2 --format md --color always");
    assert_int_equal(r.status, 0);
    if (count_lines(r.err) != 1 || !strstr(r.err, "--color ignored"))
        fail_msg("lesson 2 --format md --color always: expected one line saying --color is ignored, got '%s'", r.err);
    run_free(&r);
    expect_failure("race --format md", 2, "--format takes one of text|json, not 'md'");
    expect_failure("lesson 2 --format pdf", 2, "text|json|html|md");
    // A lesson that fails writes no page at all.
    r = kvdemo_run("lesson 2 --format html --data /nonexistent/tianqi.txt");
    assert_int_not_equal(r.status, 0);
    assert_string_equal(r.out, "");
    run_free(&r);
    // memory and generate print through the trace: they make documents too.
    r = kvdemo_run("memory --format html --model gpt3-175b --tokens 1024");
    if (r.status != 0) fail_msg("memory --format html: exit status %d; stderr: %s", r.status, r.err);
    char err[256];
    const char *problem = html_problem(r.out, err, sizeof err);
    if (problem) fail_msg("memory --format html: %s", problem);
    run_free(&r);
    r = kvdemo_run("generate --format md --init random --preset tiny --steps 8");
    if (r.status != 0) fail_msg("generate --format md: exit status %d; stderr: %s", r.status, r.err);
    assert_non_null(strstr(r.out, "```text\nROMEO:"));
    run_free(&r);
    // A page holds both languages: the English plural stays out of the Chinese.
    r = kvdemo_run("generate --format html --init random --preset tiny --steps 8 --threads 2");
    if (r.status != 0) fail_msg("generate --format html: exit status %d; stderr: %s", r.status, r.err);
    if (!strstr(r.out, "2 threads") || !strstr(r.out, "2 个线程") || strstr(r.out, "个线程s"))
        fail_msg("generate --format html: expected \"2 threads\" and \"2 个线程\" without an \"s\", got %s",
                 strstr(r.out, "个线程s") ? "\"个线程s\"" : "one missing");
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_catches_mistakes),
        cmocka_unit_test(test_trace_documents),
        cmocka_unit_test(test_heat_maps),
        cmocka_unit_test(test_lesson2_slides),
        cmocka_unit_test(test_lesson2_cache_rows),
        cmocka_unit_test(test_lesson3_cache_rows),
        cmocka_unit_test(test_lesson61_pool_pictures),
        cmocka_unit_test(test_bars_are_drawn),
        cmocka_unit_test(test_lesson7_triangle),
        cmocka_unit_test(test_footer),
        cmocka_unit_test(test_footer_names_the_weights),
        cmocka_unit_test(test_lesson63_tiles),
        cmocka_unit_test(test_lesson10_replay),
        cmocka_unit_test(test_options_and_commands),
        cmocka_unit_test(test_every_lesson),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
