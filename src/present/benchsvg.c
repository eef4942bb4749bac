// benchsvg — bench's chart as a plain SVG file (see benchsvg.h).
//
// Two panels side by side. Left: time per token; right: total time. Both
// axes are logarithmic, so a time that grows as n is a straight line of
// slope 1 and one that grows as n² a line of slope 2: the reference lines
// (grey, dashed) start at the first point of each run and show the slopes
// the class should expect. Each point carries a <title>, which a browser
// shows on hover: the length, the mean and the min … max of the runs.
#include "benchsvg.h"

#include "chart_svg.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <string.h>

enum { WIDTH = 1000, HEIGHT = 460, PANEL_W = 370, PANEL_H = 300, TOP = 80, LEFT = 80, GAP = 110 };

static const char *const MODE_NAME[2] = {"without the cache", "with the cache"};
static const char *const MODE_KEY[2] = {"no-cache", "cache"};
// The course's colours (chart_svg.h), told apart by the marker too:
// circles without the cache, squares with it.
static const char *const MODE_COLOR[2] = {CHART_NO_CACHE, CHART_CACHE};

// Text with &, < and > (and quotes, for attributes) escaped.
static void put_escaped(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

// The y value of panel p (0: per token, 1: total) of a time s at n tokens.
static double panel_value(int panel, double s, int n) { return panel ? s : s / n; }

// The range of panel p's y values: every point with its min … max, and the
// reference lines.
static void panel_range(double *lo, double *hi, const BenchSvgPoint *pt, int n, int p) {
    double ymin = INFINITY, ymax = 0;
    double n0 = pt[0].tokens;
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < 2; c++) {
            ymin = fmin(ymin, panel_value(p, pt[i].min[c], pt[i].tokens));
            ymax = fmax(ymax, panel_value(p, pt[i].max[c], pt[i].tokens));
        }
        double r = pt[i].tokens / n0;
        ymin = fmin(ymin, fmin(panel_value(p, pt[0].mean[1] * r, pt[i].tokens),
                               panel_value(p, pt[0].mean[0] * r * r, pt[i].tokens)));
        ymax = fmax(ymax, fmax(panel_value(p, pt[0].mean[1] * r, pt[i].tokens),
                               panel_value(p, pt[0].mean[0] * r * r, pt[i].tokens)));
    }
    *lo = ymin;
    *hi = ymax;
}

// The y grid (1, 2, 5 times each power of ten in range) and the x axis: the
// measured lengths.
static void panel_grid(FILE *f, const BenchSvgPoint *pt, int n, const ChartScale *ax, const ChartScale *ay, double x0) {
    double ticks[CHART_MAX_TICKS];
    for (int k = 0, nt = chart_ticks(ay, ticks); k < nt; k++) {
        double y = chart_at(ay, ticks[k]);
        char label[32];
        chart_tick_text(label, sizeof label, ay, CHART_SECONDS, ticks[k]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n", x0, y, x0 + PANEL_W, y,
                CHART_GRID);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"12\">%s</text>\n", x0 - 6, y + 4,
                label);
    }
    // x: the measured lengths
    for (int i = 0; i < n; i++) {
        double x = chart_at(ax, pt[i].tokens);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"/>\n", x, TOP, x,
                TOP + PANEL_H, CHART_GRID);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\">%d</text>\n", x,
                TOP + PANEL_H + 16, pt[i].tokens);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\">tokens generated "
               "(log scale)</text>\n", x0 + PANEL_W / 2.0, TOP + PANEL_H + 36);
}

// The reference lines: ∝ n from the first cached point, ∝ n² from the first
// uncached one.
static void panel_references(FILE *f, const BenchSvgPoint *pt, int n, int p, const ChartScale *ax, const ChartScale *ay) {
    double n0 = pt[0].tokens;
    for (int c = 0; c < 2; c++) {
        fprintf(f, "<polyline class=\"reference\" data-mode=\"%s\" data-growth=\"%s\" fill=\"none\" stroke=\"%s\" "
                   "stroke-dasharray=\"6 4\" points=\"", MODE_KEY[c], c ? "n" : "n2", CHART_RESERVED);
        double last_x = 0, last_y = 0;
        for (int i = 0; i < n; i++) {
            double r = pt[i].tokens / n0, s = c ? pt[0].mean[1] * r : pt[0].mean[0] * r * r;
            last_x = chart_at(ax, pt[i].tokens), last_y = chart_at(ay, panel_value(p, s, pt[i].tokens));
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", last_x, last_y);
        }
        fprintf(f, "\"/>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"12\" fill=\"#666\">%s</text>\n",
                last_x - 4, last_y + (c ? 14 : -6), c ? "total ∝ n" : "total ∝ n²");
    }
}

// The runs: a line, a bar from min to max, and a marker per length.
static void panel_series(FILE *f, const BenchSvgPoint *pt, int n, int p, const ChartScale *ax, const ChartScale *ay) {
    for (int c = 0; c < 2; c++) {
        fprintf(f, "<polyline class=\"series\" data-mode=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s "
                   "points=\"", MODE_KEY[c], MODE_COLOR[c], c ? " stroke-dasharray=\"2 3\"" : "");
        for (int i = 0; i < n; i++)
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", chart_at(ax, pt[i].tokens),
                    chart_at(ay, panel_value(p, pt[i].mean[c], pt[i].tokens)));
        fprintf(f, "\"/>\n");
        for (int i = 0; i < n; i++) {
            int t = pt[i].tokens;
            double x = chart_at(ax, t), y = chart_at(ay, panel_value(p, pt[i].mean[c], t));
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n", x,
                    chart_at(ay, panel_value(p, pt[i].min[c], t)), x, chart_at(ay, panel_value(p, pt[i].max[c], t)),
                    MODE_COLOR[c]);
            char mean[32], lo[32], hi[32];
            chart_seconds_text(mean, sizeof mean, panel_value(p, pt[i].mean[c], t));
            chart_seconds_text(lo, sizeof lo, panel_value(p, pt[i].min[c], t));
            chart_seconds_text(hi, sizeof hi, panel_value(p, pt[i].max[c], t));
            if (c == 0) {
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" ", x, y, MODE_COLOR[c]);
            } else {
                fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"%s\" ", x - 4, y - 4,
                        MODE_COLOR[c]);
            }
            fprintf(f, "class=\"point\" data-panel=\"%s\" data-mode=\"%s\" data-tokens=\"%d\"",
                    p ? "total" : "per-token", MODE_KEY[c], t);
            fprintf(f, "><title>%d tokens %s: %s%s (%s … %s)</title></%s>\n", t, MODE_NAME[c], mean,
                    p ? "" : " per token", lo, hi, c ? "rect" : "circle");
        }
    }
}

static void panel(FILE *f, const BenchSvgPoint *pt, int n, int p, double x0) {
    double ymin, ymax;
    panel_range(&ymin, &ymax, pt, n, p);
    ChartScale ax = chart_scale_log(pt[0].tokens, pt[n - 1].tokens, x0, x0 + PANEL_W, 0.06);
    ChartScale ay = chart_scale_log(ymin, ymax, TOP + PANEL_H, TOP, 0.04);
    fprintf(f, "<g class=\"panel\" id=\"%s\">\n", p ? "total" : "per-token");
    fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"%s\"/>\n", x0, TOP,
            PANEL_W, PANEL_H, CHART_AXIS);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-weight=\"bold\">%s</text>\n",
            x0 + PANEL_W / 2.0, TOP - 12, p ? "total time" : "time per token");
    panel_grid(f, pt, n, &ax, &ay, x0);
    panel_references(f, pt, n, p, &ax, &ay);
    panel_series(f, pt, n, p, &ax, &ay);
    fprintf(f, "</g>\n");
}

int benchsvg_write(FILE *f, const BenchSvgPoint *points, int n, const char *title) {
    assert(n >= 1);
    errno = 0;   // from here on set only by what failed
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"14\">\n", WIDTH, HEIGHT, WIDTH, HEIGHT);
    fprintf(f, "<title>");
    put_escaped(f, title);
    fprintf(f, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%d\" y=\"26\" font-size=\"16\" font-weight=\"bold\">", LEFT);
    put_escaped(f, title);
    fprintf(f, "</text>\n");
    // the legend
    int lx = LEFT;
    for (int c = 0; c < 2; c++, lx += 200) {
        if (c == 0) fprintf(f, "<circle cx=\"%d\" cy=\"46\" r=\"4\" fill=\"%s\"/>\n", lx + 4, MODE_COLOR[c]);
        else fprintf(f, "<rect x=\"%d\" y=\"42\" width=\"8\" height=\"8\" fill=\"%s\"/>\n", lx, MODE_COLOR[c]);
        fprintf(f, "<text x=\"%d\" y=\"51\" font-size=\"13\">%s</text>\n", lx + 14, MODE_NAME[c]);
    }
    fprintf(f, "<line x1=\"%d\" y1=\"46\" x2=\"%d\" y2=\"46\" stroke=\"%s\" stroke-dasharray=\"6 4\"/>\n", lx,
            lx + 24, CHART_RESERVED);
    fprintf(f, "<text x=\"%d\" y=\"51\" font-size=\"13\">total time growing as n, as n²; bars: "
               "min … max of the runs</text>\n", lx + 30);
    for (int p = 0; p < 2; p++) panel(f, points, n, p, LEFT + p * (PANEL_W + GAP));
    fprintf(f, "</svg>\n");
    // A full disk is found by a write or by this flush, with its reason in
    // errno: the caller can say "No space left on device", not "out of memory".
    if (fflush(f) != 0 || ferror(f)) {
        if (!errno) errno = EIO;
        return -1;
    }
    return 0;
}
