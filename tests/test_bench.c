// test_bench — kvdemo bench for a classroom: the chart (--svg) is a
// well-formed, self-contained SVG with one point per measured length and
// mode in each panel; bad --svg paths fail cleanly before any measuring;
// every timing shows its spread; the default lengths fit a lesson; the
// time left is shown on a terminal only.
//
// The SVG checker below is deliberately small: tags balanced and properly
// nested, attribute values quoted, only the five XML entities and numeric
// ones, one root <svg>, and nothing that would fetch from elsewhere.
#include "testutil.h"

#include "benchsvg.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

// ----------------------------------------------------------------------------
// The checker

enum { MAX_POINTS = 256, MAX_DEPTH = 64 };

typedef struct {
    char panel[16], mode[16];
    int tokens;
    double cx, cy;   // the marker's centre (circle cx, cy, or rect x + 4, y + 4)
} SvgPoint;

typedef struct {
    SvgPoint points[MAX_POINTS];
    int n_points;
    int elements;
} SvgInfo;

// The value of attribute name in the tag text [tag, end), into out.
static int attr(const char *tag, const char *end, const char *name, char *out, size_t size) {
    size_t n = strlen(name);
    for (const char *p = tag + 1; p + n + 2 < end; p++) {
        if (p[-1] != ' ' || strncmp(p, name, n) != 0 || p[n] != '=' || p[n + 1] != '"') continue;
        const char *v = p + n + 2, *q = memchr(v, '"', (size_t)(end - v));
        if (!q || (size_t)(q - v) >= size) return 0;
        memcpy(out, v, (size_t)(q - v));
        out[q - v] = '\0';
        return 1;
    }
    return 0;
}

// Returns NULL when svg is well-formed and self-contained, else what is wrong.
static const char *svg_check(const char *svg, SvgInfo *info) {
    static char why[256];
    memset(info, 0, sizeof *info);
    // Nothing fetched from elsewhere: the one URL allowed is the SVG
    // namespace's name, which no browser fetches.
    static const char *const banned[] = {"href", "url(", "@import", "<script", "<foreignObject", "<image", "<!DOCTYPE"};
    for (size_t i = 0; i < sizeof banned / sizeof banned[0]; i++)
        if (strstr(svg, banned[i])) return snprintf(why, sizeof why, "contains \"%s\"", banned[i]), why;
    for (const char *p = svg; (p = strstr(p, "http")); p++)
        if (p < svg + 7 || strncmp(p - 7, "xmlns=\"http://www.w3.org/2000/svg\"", 34) != 0)
            return snprintf(why, sizeof why, "a URL at byte %d", (int)(p - svg)), why;
    char stack[MAX_DEPTH][32];
    int depth = 0, roots = 0;
    const char *p = svg;
    if (strncmp(p, "<?xml ", 6) == 0) {
        p = strstr(p, "?>");
        if (!p) return "an unterminated <?xml";
        p += 2;
    }
    while (*p) {
        if (*p == '&') {   // an entity
            const char *semi = strchr(p, ';');
            static const char *const ok[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
            int known = p[1] == '#' && semi && semi - p <= 8;
            for (size_t i = 0; i < 5 && !known; i++) known = strncmp(p, ok[i], strlen(ok[i])) == 0;
            if (!known) return snprintf(why, sizeof why, "a bare & at byte %d", (int)(p - svg)), why;
            p++;
            continue;
        }
        if (*p == '>') return snprintf(why, sizeof why, "a stray > at byte %d", (int)(p - svg)), why;
        if (*p != '<') {
            if (depth == 0 && *p != '\n' && *p != ' ') return "text outside the root element";
            p++;
            continue;
        }
        if (strncmp(p, "<!--", 4) == 0) {
            const char *e = strstr(p, "-->");
            if (!e) return "an unterminated comment";
            p = e + 3;
            continue;
        }
        // a tag: find its end, outside quoted values
        const char *q = p + 1;
        int quoted = 0;
        for (; *q && (quoted || *q != '>'); q++) {
            if (*q == '"') quoted = !quoted;
            else if (*q == '<' && !quoted) return snprintf(why, sizeof why, "a < inside the tag at byte %d", (int)(p - svg)), why;
        }
        if (!*q) return "an unterminated tag";
        int closing = p[1] == '/', empty = q[-1] == '/';
        const char *name = p + 1 + closing;
        size_t len = strcspn(name, " />\n");
        if (len == 0 || len >= 32) return snprintf(why, sizeof why, "a bad tag name at byte %d", (int)(p - svg)), why;
        // attributes: name="value" pairs, every value quoted
        for (const char *a = name + len; a < q - empty;) {
            while (a < q && (*a == ' ' || *a == '\n')) a++;
            if (a >= q - empty) break;
            const char *eq = a;
            while (eq < q && *eq != '=' && *eq != ' ') eq++;
            if (eq >= q || *eq != '=' || eq[1] != '"')
                return snprintf(why, sizeof why, "an unquoted attribute at byte %d", (int)(a - svg)), why;
            const char *close = memchr(eq + 2, '"', (size_t)(q - eq - 2));
            if (!close) return snprintf(why, sizeof why, "an unclosed value at byte %d", (int)(a - svg)), why;
            if (memchr(eq + 2, '<', (size_t)(close - eq - 2))) return "a < inside an attribute value";
            a = close + 1;
        }
        if (closing) {
            if (depth == 0 || strlen(stack[depth - 1]) != len || strncmp(stack[depth - 1], name, len) != 0)
                return snprintf(why, sizeof why, "</%.*s> at byte %d closes %s", (int)len, name, (int)(p - svg),
                                depth ? stack[depth - 1] : "nothing"), why;
            depth--;
        } else {
            if (depth == 0 && roots++) return "more than one root element";
            if (depth == 0 && strncmp(name, "svg", len) != 0) return "the root element is not <svg>";
            info->elements++;
            char cls[32];
            if (attr(p, q, "class", cls, sizeof cls) && strcmp(cls, "point") == 0) {
                if (info->n_points == MAX_POINTS) return "too many points";
                SvgPoint *pt = &info->points[info->n_points++];
                char v[32];
                if (!attr(p, q, "data-panel", pt->panel, sizeof pt->panel) ||
                    !attr(p, q, "data-mode", pt->mode, sizeof pt->mode) || !attr(p, q, "data-tokens", v, sizeof v))
                    return "a point without its panel, mode and tokens";
                pt->tokens = atoi(v);
                if (attr(p, q, "cy", v, sizeof v)) pt->cy = atof(v);
                else if (attr(p, q, "y", v, sizeof v)) pt->cy = atof(v) + 4;
                else return "a point without a position";
                if (attr(p, q, "cx", v, sizeof v)) pt->cx = atof(v);
                else if (attr(p, q, "x", v, sizeof v)) pt->cx = atof(v) + 4;
            }
            if (!empty) {
                if (depth == MAX_DEPTH) return "nested too deep";
                memcpy(stack[depth], name, len);
                stack[depth++][len] = '\0';
            }
        }
        p = q + 1;
    }
    if (depth) return snprintf(why, sizeof why, "<%s> is never closed", stack[depth - 1]), why;
    if (roots != 1) return "no root element";
    return NULL;
}

// How many points of panel and mode are at tokens.
static int count_points(const SvgInfo *info, const char *panel, const char *mode, int tokens) {
    int n = 0;
    for (int i = 0; i < info->n_points; i++) {
        const SvgPoint *p = &info->points[i];
        n += !strcmp(p->panel, panel) && !strcmp(p->mode, mode) && p->tokens == tokens;
    }
    return n;
}

static const SvgPoint *find_point(const SvgInfo *info, const char *panel, const char *mode, int tokens) {
    for (int i = 0; i < info->n_points; i++) {
        const SvgPoint *p = &info->points[i];
        if (!strcmp(p->panel, panel) && !strcmp(p->mode, mode) && p->tokens == tokens) return p;
    }
    return NULL;
}

// The vertices of panel's reference line for mode (n² without the cache,
// n with it) into x, y; returns how many, or -1 if there is no such line.
static int reference_line(const char *svg, const char *panel, const char *mode, double *x, double *y, int max) {
    char open[64], tag[64];
    snprintf(open, sizeof open, "<g class=\"panel\" id=\"%s\">", panel);
    const char *g = strstr(svg, open);
    if (!g) return -1;
    const char *end = strstr(g, "</g>");
    snprintf(tag, sizeof tag, "<polyline class=\"reference\" data-mode=\"%s\"", mode);
    const char *line = strstr(g, tag);
    if (!line || line > end) return -1;
    const char *pts = strstr(line, "points=\"");
    if (!pts) return -1;
    pts += strlen("points=\"");
    int n = 0;
    double a, b;
    int used;
    while (n < max && sscanf(pts, "%lf,%lf%n", &a, &b, &used) == 2) {
        x[n] = a, y[n] = b, n++;
        pts += used;
    }
    return n;
}

// ----------------------------------------------------------------------------
// The checker itself catches what it should (else the tests below prove
// nothing).

static void test_checker_refuses_bad_svg(void **state) {
    (void)state;
    SvgInfo info;
    const char *good = "<svg xmlns=\"http://www.w3.org/2000/svg\"><g><circle class=\"point\" data-panel=\"total\" "
                       "data-mode=\"cache\" data-tokens=\"16\" cx=\"1\" cy=\"2\"/></g><text>a &amp; b</text></svg>";
    const char *why = svg_check(good, &info);
    if (why) fail_msg("a good SVG refused: %s", why);
    assert_int_equal(info.n_points, 1);
    assert_int_equal(count_points(&info, "total", "cache", 16), 1);
    static const char *const bad[] = {
        "<svg><g></svg>",                                                  // unclosed <g>
        "<svg><g></text></g></svg>",                                       // crossed tags
        "<svg><text>a & b</text></svg>",                                   // bare &
        "<svg><image href=\"x.png\"/></svg>",                              // fetches a file
        "<svg><text>see http://example.com</text></svg>",                  // a URL
        "<svg><rect style=\"fill:url(http://x/y)\"/></svg>",               // a URL in a style
        "<svg><rect width=10/></svg>",                                     // unquoted value
        "<svg></svg><svg></svg>",                                          // two roots
        "<html></html>",                                                   // not an SVG
        "<svg><circle class=\"point\" cx=\"1\" cy=\"1\"/></svg>",          // a point without its data
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!svg_check(bad[i], &info)) fail_msg("bad SVG %zu accepted: %s", i, bad[i]);
}

// ----------------------------------------------------------------------------
// benchsvg_write's chart of n points in memory, checked well-formed (info:
// what the checker found); the caller frees it.
static char *svg_of(const BenchSvgPoint *pts, int n, const char *title, SvgInfo *info) {
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    assert_non_null(f);
    assert_int_equal(benchsvg_write(f, pts, n, title), 0);
    fclose(f);
    const char *why = svg_check(buf, info);
    if (why) fail_msg("not well-formed: %s\n%s", why, buf);
    return buf;
}

// benchsvg_write on numbers chosen here: every point there once, placed by
// its value (log axis: larger times higher up), the title escaped.

static void test_svg_of_known_points(void **state) {
    (void)state;
    // Without the cache the total grows as n², with it as n.
    BenchSvgPoint pts[3];
    int lengths[3] = {16, 64, 256};
    for (int i = 0; i < 3; i++) {
        double n = lengths[i];
        pts[i] = (BenchSvgPoint){lengths[i], {1e-5 * n * n, 1e-3 * n}, {0.9e-5 * n * n, 0.9e-3 * n},
                                 {1.1e-5 * n * n, 1.2e-3 * n}};
    }
    SvgInfo info;
    char *buf = svg_of(pts, 3, "a <title> & \"quotes\"", &info);
    assert_non_null(strstr(buf, "a &lt;title&gt; &amp; &quot;quotes&quot;"));
    static const char *const panels[2] = {"per-token", "total"}, *const modes[2] = {"no-cache", "cache"};
    assert_int_equal(info.n_points, 2 * 2 * 3);
    for (int p = 0; p < 2; p++)
        for (int c = 0; c < 2; c++)
            for (int i = 0; i < 3; i++) {
                int got = count_points(&info, panels[p], modes[c], lengths[i]);
                if (got != 1)
                    fail_msg("%s, %s, %d tokens: expected 1 point, got %d", panels[p], modes[c], lengths[i], got);
            }
    // Total time: each run's points climb with n (y grows downwards).
    for (int c = 0; c < 2; c++)
        for (int i = 1; i < 3; i++) {
            const SvgPoint *a = find_point(&info, "total", modes[c], lengths[i - 1]);
            const SvgPoint *b = find_point(&info, "total", modes[c], lengths[i]);
            if (!(b->cy < a->cy))
                fail_msg("total, %s: %d tokens at y=%g, %d tokens at y=%g: expected higher", modes[c], lengths[i],
                         b->cy, lengths[i - 1], a->cy);
        }
    // Per token: with the cache 1 ms at every length, so one height; on a
    // log axis, n² over n is a straight line: equal steps for equal ratios.
    const SvgPoint *c0 = find_point(&info, "per-token", "cache", 16), *c2 = find_point(&info, "per-token", "cache", 256);
    if (fabs(c0->cy - c2->cy) > 0.15) fail_msg("per token with the cache: y %g and %g, expected equal", c0->cy, c2->cy);
    const SvgPoint *u0 = find_point(&info, "per-token", "no-cache", 16), *u1 = find_point(&info, "per-token", "no-cache", 64),
                   *u2 = find_point(&info, "per-token", "no-cache", 256);
    double d1 = u0->cy - u1->cy, d2 = u1->cy - u2->cy;
    if (!(d1 > 0) || fabs(d1 - d2) > 0.2) fail_msg("per token without the cache: steps %g and %g, expected equal", d1, d2);
    free(buf);
}

// The reference lines as documented (benchsvg.c): in each panel, the n² line
// starts at the first point without the cache and the n line at the first
// point with it, on every measured length; with times that grow exactly as
// n² and n, each line goes through every point of its run.
static void test_svg_reference_lines_through_the_points(void **state) {
    (void)state;
    static const int lengths[4] = {16, 32, 64, 250};
    for (int exact = 1; exact >= 0; exact--) {
        BenchSvgPoint pts[4];
        for (int i = 0; i < 4; i++) {
            double n = lengths[i];
            // exact: 1e-5 n² and 1e-3 n; else a fixed part besides (as a
            // real run has), so that only the first points lie on the lines
            double u = 1e-5 * n * n + (exact ? 0 : 0.01), c = 1e-3 * n + (exact ? 0 : 0.01);
            pts[i] = (BenchSvgPoint){lengths[i], {u, c}, {u, c}, {u, c}};
        }
        SvgInfo info;
        char *buf = svg_of(pts, 4, "reference lines", &info);
        static const char *const panels[2] = {"per-token", "total"}, *const modes[2] = {"no-cache", "cache"};
        for (int p = 0; p < 2; p++)
            for (int c = 0; c < 2; c++) {
                double x[8], y[8];
                int n = reference_line(buf, panels[p], modes[c], x, y, 8);
                if (n != 4) fail_msg("%s, %s: a reference line of %d vertices, expected 4", panels[p], modes[c], n);
                for (int i = 0; i < (exact ? 4 : 1); i++) {
                    const SvgPoint *pt = find_point(&info, panels[p], modes[c], lengths[i]);
                    assert_non_null(pt);
                    if (fabs(x[i] - pt->cx) > 0.11 || fabs(y[i] - pt->cy) > 0.11)
                        fail_msg("%s, %s, %d tokens (%s times): the reference line at (%g, %g), expected the point's "
                                 "(%g, %g)", panels[p], modes[c], lengths[i], exact ? "exact" : "offset", x[i], y[i],
                                 pt->cx, pt->cy);
                }
                if (!exact) {   // the fixed part lifts the later points off the line
                    const SvgPoint *last = find_point(&info, panels[p], modes[c], 250);
                    if (fabs(y[3] - last->cy) < 1)
                        fail_msg("%s, %s: the line ends on the 250-token point (y %g), which is off n and n²",
                                 panels[p], modes[c], last->cy);
                }
            }
        free(buf);
    }
}

// One length only: the axes still have a range, the points are there.
static void test_svg_of_one_point(void **state) {
    (void)state;
    BenchSvgPoint pt = {8, {0.5, 0.5}, {0.5, 0.5}, {0.5, 0.5}};
    SvgInfo info;
    char *buf = svg_of(&pt, 1, "one", &info);
    assert_int_equal(info.n_points, 4);
    assert_null(strstr(buf, "nan"));
    assert_null(strstr(buf, "inf"));
    free(buf);
}

// ----------------------------------------------------------------------------
// Through the command line

static char dir[128];

static int setup(void **state) {
    (void)state;
    return tmpdir_make(dir, sizeof dir, "bench");
}

static int teardown(void **state) {
    (void)state;
    return tmpdir_remove(dir);
}

// One run with the defaults (each bench run is long under the sanitizers):
// the chart has one point per length and mode in each panel, the lengths
// are a lesson's, every time has its spread, training only with --train.
// Issue 29, 8: on a full disk bench --svg said "out of memory". The chart
// written to /dev/full (every write fails with ENOSPC) fails with that
// reason in errno, buffered as a file is and unbuffered.
static void test_svg_full_disk_says_so(void **state) {
    (void)state;
    BenchSvgPoint pt = {16, {1e-3, 1e-4}, {0.9e-3, 0.9e-4}, {1.1e-3, 1.1e-4}};
    for (int unbuffered = 0; unbuffered < 2; unbuffered++) {
        FILE *f = fopen("/dev/full", "w");
        if (!f) skip();   // no /dev/full on this system
        if (unbuffered) setvbuf(f, NULL, _IONBF, 0);
        errno = 0;
        int rc = benchsvg_write(f, &pt, 1, "full");
        int e = errno;
        fclose(f);
        if (rc != -1) fail_msg("unbuffered %d: a chart on a full disk: expected -1, got %d", unbuffered, rc);
        if (e != ENOSPC)
            fail_msg("unbuffered %d: errno expected %d (%s), got %d (%s)", unbuffered, ENOSPC, strerror(ENOSPC), e, strerror(e));
    }
}

static void test_bench_svg_file(void **state) {
    (void)state;
    char svg[256], args[512];
    snprintf(svg, sizeof svg, "%s/chart.svg", dir);
    snprintf(args, sizeof args, "bench --init random --preset tiny --repeat 1 --svg %s", svg);
    RunResult r = kvdemo_run(args);
    if (r.status != 0) fail_msg("kvdemo %s: %s", args, r.err);
    static const int lengths[5] = {16, 32, 64, 128, 250};
    for (int i = 0; i < 5; i++) {
        char row[32];
        snprintf(row, sizeof row, "\n  %6d no cache ", lengths[i]);
        if (!strstr(r.out, row)) fail_msg("bench: no row for %d tokens in:\n%s", lengths[i], r.out);
    }
    // rows of the length table: "±" and "…" on each, and a per-token time
    int rows = 0;
    for (const char *p = r.out; (p = strstr(p, " no cache ")); p++) {
        if (p[-1] < '0' || p[-1] > '9') continue;   // a row starts with its length
        const char *eol = strchr(p, '\n');
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(eol - p), p);
        if (!strstr(line, "±") || !strstr(line, "…")) fail_msg("a row without its spread: %s", line);
        rows++;
    }
    assert_int_equal(rows, 5);
    assert_non_null(strstr(r.out, "after a warm-up of 16 tokens each way"));
    assert_null(strstr(r.out, "training,"));   // only with --train
    // 250 tokens pass the tiny model's context of 32: the reset and its time
    if (!strstr(r.out, "250 tokens with the cache: ")) fail_msg("bench: no line on the reset in:\n%s", r.out);
    // stderr is not a terminal: no progress line at all
    assert_null(strstr(r.err, "left"));
    assert_null(strchr(r.err, '\r'));
    run_free(&r);
    char *s = file_slurp(svg);
    SvgInfo info;
    const char *why = svg_check(s, &info);
    if (why) fail_msg("%s is not well-formed: %s", svg, why);
    static const char *const panels[2] = {"per-token", "total"}, *const modes[2] = {"no-cache", "cache"};
    assert_int_equal(info.n_points, 20);
    for (int p = 0; p < 2; p++)
        for (int c = 0; c < 2; c++)
            for (int i = 0; i < 5; i++) {
                int got = count_points(&info, panels[p], modes[c], lengths[i]);
                if (got != 1)
                    fail_msg("%s, %s, %d tokens: expected 1 point, got %d", panels[p], modes[c], lengths[i], got);
            }
    free(s);
    // written through a temporary file that is gone, its lock too
    if (write_leftovers(svg) != 0) fail_msg("%s: %d temporary or lock files left", svg, write_leftovers(svg));
}

// A path that cannot be written fails at once, in one line, and leaves
// nothing; so does a run that fails.
static void test_bench_svg_bad_paths(void **state) {
    (void)state;
    char args[512], path[300];
    snprintf(args, sizeof args, "bench --init random --preset tiny --steps 4 --repeat 1 --svg %s", dir);
    expect_failure(args, 1, "--svg");
    snprintf(path, sizeof path, "%s/no/such/folder/c.svg", dir);
    snprintf(args, sizeof args, "bench --init random --preset tiny --steps 4 --repeat 1 --svg %s", path);
    expect_failure(args, 1, "No such file or directory");
    assert_int_equal(access(path, F_OK), -1);
    snprintf(path, sizeof path, "%s/never.svg", dir);
    snprintf(args, sizeof args, "bench --model %s/missing.bin --steps 4 --svg %s", dir, path);
    RunResult r = kvdemo_run(args);
    assert_int_equal(r.status, 1);
    run_free(&r);
    assert_int_equal(access(path, F_OK), -1);
    if (write_leftovers(path) != 0) fail_msg("%s: %d temporary or lock files left", path, write_leftovers(path));
    expect_failure("generate --svg x.svg", 2, "unknown option '--svg' for 'generate'");
    expect_failure("bench --svg", 2, "--svg");
}

// What kvdemo args writes on a terminal (it must succeed); the caller frees it.
static char *on_terminal(const char *const *args) {
    int master;
    pid_t pid = kvdemo_spawn_pty(&master, args);
    char *out = read_to_end(master);
    int status;
    waitpid(pid, &status, 0);
    close(master);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("kvdemo %s ... on a terminal failed:\n%s", args[0], out);
    return out;
}

// On a terminal the progress line says about how long is left.
static void test_bench_eta_on_terminal(void **state) {
    (void)state;
    const char *args[] = {"bench", "--init", "random", "--preset", "tiny", "--steps", "4,8", "--repeat", "1", NULL};
    char *out = on_terminal(args);
    if (!strstr(out, " left)")) fail_msg("no time left in the progress line:\n%s", out);
    // 8 tokens after the 6-token prompt stay inside the context of 32
    if (!strstr(out, "the chapter's reset never runs")) fail_msg("no footnote on the reset:\n%s", out);
    assert_non_null(strstr(out, "warm-up"));
    free(out);
}

// ----------------------------------------------------------------------------
// bench for a Chinese class: under --lang zh every line is Chinese, the
// progress line on a terminal and the footnotes included, with the
// article's terms. A word of three or more ASCII letters is left only if it
// is a unit, a program, a function of the documents or an option name.

// token: the Chinese word too (docs/glossary.md: one Chinese word per concept).
static const char *const ASCII_ALLOWED[] = {"kvdemo", "bench", "FMA", "GFLOP", "memcpy", "ROMEO", "numpy",
                                            "generate", "steps", "token"};

// Fails at the first word of 3+ ASCII letters of text not in ASCII_ALLOWED
// (testutil's scan, as test_zh's), naming the word and its line. A
// terminal's escapes ("\x1b[K") are taken out first: they are not words.
static void expect_no_english(const char *raw, const char *what) {
    char *text = strdup(raw), *o = text;
    assert_non_null(text);
    for (const char *p = raw; *p;) {
        if (*p == '\x1b' && p[1] == '[') {
            for (p += 2; *p && !isalpha((unsigned char)*p); p++) continue;
            if (*p) p++;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    for (const char *line = text; *line;) {
        size_t len = strcspn(line, "\r\n"), at = 0, w, n;
        while (english_word_next(line, len, &at, &w, &n))
            if (!word_in_list(line + w, n, ASCII_ALLOWED, sizeof ASCII_ALLOWED / sizeof ASCII_ALLOWED[0]))
                fail_msg("%s: the English word \"%.*s\" under --lang zh, in: %.*s", what, (int)n, line + w, (int)len,
                         line);
        line += len;
        line += strspn(line, "\r\n");
    }
    free(text);
}

static void test_bench_speaks_chinese(void **state) {
    (void)state;
    // Lengths past the tiny model's context of 32 (the reset footnote),
    // and training.
    const char *args = "bench --lang zh --init random --preset tiny --steps 8,40 --repeat 2 --train";
    RunResult r = kvdemo_run(args);
    if (r.status != 0) fail_msg("kvdemo %s: %s", args, r.err);
    expect_no_english(r.out, "stdout");
    expect_no_english(r.err, "stderr");
    static const char *const terms[] = {"个 token", "不使用缓存", "使用缓存", "均值 ± σ", "重算了窗口", "训练"};
    for (size_t i = 0; i < sizeof terms / sizeof terms[0]; i++)
        if (!strstr(r.out, terms[i])) fail_msg("no \"%s\" in bench's Chinese output:\n%s", terms[i], r.out);
    run_free(&r);
    // Lengths inside the context: the other footnote.
    args = "bench --lang zh --init random --preset tiny --steps 4 --repeat 1";
    r = kvdemo_run(args);
    if (r.status != 0) fail_msg("kvdemo %s: %s", args, r.err);
    expect_no_english(r.out, "stdout");
    if (!strstr(r.out, "重置一次也没有发生")) fail_msg("no footnote on the reset:\n%s", r.out);
    run_free(&r);
    // On a terminal: the progress line, with the time left.
    const char *argv[] = {"bench", "--lang", "zh", "--init", "random", "--preset", "tiny", "--steps", "4,8",
                          "--repeat", "1", NULL};
    char *out = on_terminal(argv);
    expect_no_english(out, "the terminal");
    if (!strstr(out, "热身") || (!strstr(out, "还剩") && !strstr(out, "不到一秒"))) fail_msg("no Chinese progress line with the time left:\n%s", out);
    free(out);
}


// Issue 29, 8: on a full disk bench --svg said "out of memory". A chart that
// cannot be written whole (here a file size limit, which fails as a full
// disk does, with EFBIG for ENOSPC) fails with its reason, and leaves nothing.
static void test_bench_svg_write_failure_names_its_reason(void **state) {
    (void)state;
    const char *bin = getenv("KVDEMO_BIN");
    char svg[256], cmd[1024];
    snprintf(svg, sizeof svg, "%s/limited.svg", dir);
    snprintf(cmd, sizeof cmd, "trap '' XFSZ; ulimit -f 1; %s bench --init random --preset tiny --repeat 1 --steps 16,32 "
             "--svg %s </dev/null", bin && *bin ? bin : "./kvdemo", svg);
    RunResult r = shell_run(cmd);
    if (r.status != 1) fail_msg("a chart past the size limit: exit status expected 1, got %d: %s", r.status, r.err);
    if (!strstr(r.err, "--svg") || !strstr(r.err, strerror(EFBIG)) || strstr(r.err, "out of memory"))
        fail_msg("expected \"--svg ... %s\", got: %s", strerror(EFBIG), r.err);
    run_free(&r);
    assert_int_equal(access(svg, F_OK), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_refuses_bad_svg),
        cmocka_unit_test(test_svg_of_known_points),
        cmocka_unit_test(test_svg_of_one_point),
        cmocka_unit_test(test_svg_reference_lines_through_the_points),
        cmocka_unit_test(test_svg_full_disk_says_so),
        cmocka_unit_test(test_bench_svg_file),
        cmocka_unit_test(test_bench_svg_bad_paths),
        cmocka_unit_test(test_bench_svg_write_failure_names_its_reason),
        cmocka_unit_test(test_bench_eta_on_terminal),
        cmocka_unit_test(test_bench_speaks_chinese),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
