// chart_svg — kvdemo's charts (see chart_svg.h).
//
// A linear scale starts at zero and ends at a round top with four round
// steps below it, so that a chart always has five ticks on the axis: two
// pages of the same lesson, made by two runs whose times differ a little,
// hold the same elements (tests/test_html.c compares them). A log scale
// (bench --svg) puts its ticks at 1, 2 and 5 times the powers of ten.
#include "chart_svg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const CHART_COLOURS[] = {CHART_NO_CACHE, CHART_CACHE, CHART_RESERVED, CHART_AXIS};
const int CHART_NUM_COLOURS = (int)(sizeof CHART_COLOURS / sizeof CHART_COLOURS[0]);

// ----------------------------------------------------------------------------
// Scales and ticks

ChartScale chart_scale_linear(double vmax, double p0, double p1) {
    static const double ROUND[] = {1, 1.5, 2, 2.5, 3, 4, 5, 6, 7.5, 8, 10};
    int steps = CHART_LINEAR_TICKS - 1;
    double need = vmax > 0 ? vmax / steps : 0.25, p = pow(10, floor(log10(need))), step = 10 * p;
    for (size_t i = 0; i < sizeof ROUND / sizeof ROUND[0]; i++)
        if (ROUND[i] * p >= need * (1 - 1e-12)) {
            step = ROUND[i] * p;
            break;
        }
    return (ChartScale){0, step * steps, p0, p1, 0};
}

ChartScale chart_scale_log(double vmin, double vmax, double p0, double p1, double pad) {
    double lo = log10(vmin), hi = log10(vmax);
    if (hi - lo < 0.3) {   // a single value, or nearly equal ones
        double mid = 0.5 * (lo + hi);
        lo = mid - 0.15, hi = mid + 0.15;
    }
    double d = (hi - lo) * pad;
    return (ChartScale){lo - d, hi + d, p0, p1, 1};
}

double chart_at(const ChartScale *s, double v) {
    double x = s->log ? log10(v) : v;
    return s->p0 + (x - s->lo) / (s->hi - s->lo) * (s->p1 - s->p0);
}

int chart_ticks(const ChartScale *s, double *ticks) {
    int n = 0;
    if (!s->log) {
        for (int i = 0; i < CHART_LINEAR_TICKS; i++) ticks[n++] = s->lo + (s->hi - s->lo) * i / (CHART_LINEAR_TICKS - 1);
        return n;
    }
    static const double STEPS[3] = {1, 2, 5};
    for (int e = (int)floor(s->lo); e <= (int)ceil(s->hi); e++)
        for (int k = 0; k < 3 && n < CHART_MAX_TICKS; k++) {
            double v = STEPS[k] * pow(10, e), l = log10(v);
            if (l >= s->lo && l <= s->hi) ticks[n++] = v;
        }
    return n;
}

void chart_seconds_text(char *out, size_t size, double s) {
    if (s >= 1) snprintf(out, size, "%.3g s", s);
    else if (s >= 1e-3) snprintf(out, size, "%.3g ms", s * 1e3);
    else snprintf(out, size, "%.3g µs", s * 1e6);
}

// v in the unit that suits ref (decimal for bytes).
static void unit_text(char *out, size_t size, ChartUnit unit, double v, double ref) {
    static const char *const SECONDS[] = {"µs", "ms", "s"}, *const BYTES[] = {"B", "kB", "MB", "GB", "TB"};
    int k = 0;
    if (unit == CHART_SECONDS) {
        k = ref >= 1 ? 2 : ref >= 1e-3 ? 1 : 0;
        snprintf(out, size, "%.3g %s", v / pow(1e3, k - 2), SECONDS[k]);
    } else if (unit == CHART_BYTES) {
        while (k < 4 && ref >= 1e3 * pow(1e3, k)) k++;
        snprintf(out, size, "%.3g %s", v / pow(1e3, k), BYTES[k]);
    } else {
        snprintf(out, size, "%.6g", v);
    }
}

void chart_tick_text(char *out, size_t size, const ChartScale *s, ChartUnit unit, double v) {
    unit_text(out, size, unit, v, s->log ? v : s->hi);
}

// ----------------------------------------------------------------------------
// A chart for the page

enum { WIDTH = 660, HEIGHT = 400, LEFT = 96, RIGHT = 24, TOP = 74, PLOT_H = 240, LEGEND_STEP = 230, MARK = 4 };
static const int PLOT_W = WIDTH - LEFT - RIGHT;

// Text with &, < and > as entities.
static void put_text(Buf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '&') buf_append(b, "&amp;");
        else if (*s == '<') buf_append(b, "&lt;");
        else if (*s == '>') buf_append(b, "&gt;");
        else buf_appendn(b, s, 1);
    }
}

// A text in both languages at (x, y); attrs more attributes ("" for none).
// zh NULL: the English alone, for both.
static void both(Buf *b, double x, double y, const char *attrs, const char *cls, const char *en, const char *zh) {
    for (int z = 0; z < 2; z++) {
        buf_printf(b, "<text class=\"%s%s%s\" x=\"%.1f\" y=\"%.1f\"%s>", z ? "zh" : "en", *cls ? " " : "", cls, x, y, attrs);
        put_text(b, z && zh ? zh : en);
        buf_append(b, "</text>");
    }
}

static void marker(Buf *b, const ChartSeries *s, double x, double y) {
    if (s->marker == CHART_CIRCLE)
        buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\"", x, y, MARK, s->colour);
    else
        buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"%s\"", x - MARK, y - MARK, 2 * MARK,
                   2 * MARK, s->colour);
}

static const char *marker_end(const ChartSeries *s) { return s->marker == CHART_CIRCLE ? "</circle>" : "</rect>"; }

// One axis: its grid lines, tick marks and numbers, and its label.
static void axis(Buf *b, const Chart *c, const ChartScale *s, int is_y) {
    double ticks[CHART_MAX_TICKS];
    int n = chart_ticks(s, ticks);
    const ChartAxis *a = is_y ? &c->y : &c->x;
    for (int i = 0; i < n; i++) {
        double p = chart_at(s, ticks[i]);
        char t[48];
        chart_tick_text(t, sizeof t, s, a->unit, ticks[i]);
        buf_printf(b, "<g class=\"tick\" data-axis=\"%s\" data-value=\"%.9f\">", is_y ? "y" : "x", ticks[i]);
        if (is_y)
            buf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\"></line><line x1=\"%d\" y1=\"%.1f\" "
                       "x2=\"%d\" y2=\"%.1f\" stroke=\"%s\"></line><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>",
                       LEFT, p, LEFT + PLOT_W, p, CHART_GRID, LEFT - 5, p, LEFT, p, CHART_AXIS, LEFT - 8, p + 4, t);
        else
            buf_printf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"></line><line x1=\"%.1f\" y1=\"%d\" "
                       "x2=\"%.1f\" y2=\"%d\" stroke=\"%s\"></line><text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>",
                       p, TOP, p, TOP + PLOT_H, CHART_GRID, p, TOP + PLOT_H, p, TOP + PLOT_H + 5, CHART_AXIS, p,
                       TOP + PLOT_H + 20, t);
        buf_append(b, "</g>");
    }
    if (is_y) {
        char attrs[96];
        snprintf(attrs, sizeof attrs, " text-anchor=\"middle\" transform=\"rotate(-90 %d %d)\"", 18, TOP + PLOT_H / 2);
        both(b, 18, TOP + PLOT_H / 2, attrs, "axis-label", a->en, a->zh);
    } else {
        both(b, LEFT + PLOT_W / 2.0, TOP + PLOT_H + 42, " text-anchor=\"middle\"", "axis-label", a->en, a->zh);
    }
}

// A series: its line, then per point the whisker of its spread and its mark.
static void series(Buf *b, const Chart *c, const ChartSeries *s, const ChartScale *sx, const ChartScale *sy) {
    buf_printf(b, "<polyline class=\"series\" data-series=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"",
               s->key, s->colour, s->dashed ? " stroke-dasharray=\"6 4\"" : "");
    for (int i = 0; i < s->n; i++) buf_printf(b, "%s%.1f,%.1f", i ? " " : "", chart_at(sx, s->x[i]), chart_at(sy, s->y[i]));
    buf_append(b, "\"></polyline>\n");
    for (int i = 0; i < s->n; i++) {
        double x = chart_at(sx, s->x[i]), y = chart_at(sy, s->y[i]);
        char xt[48], yt[48], lo[48] = "", hi[48] = "";
        unit_text(xt, sizeof xt, c->x.unit, s->x[i], s->x[i]);
        unit_text(yt, sizeof yt, c->y.unit, s->y[i], s->y[i]);
        if (s->lo && s->hi) {
            double y0 = chart_at(sy, s->lo[i]), y1 = chart_at(sy, s->hi[i]);
            buf_printf(b, "<path class=\"spread\" data-series=\"%s\" stroke=\"%s\" stroke-width=\"1.5\" fill=\"none\" "
                       "d=\"M%.1f %.1fV%.1fM%.1f %.1fh%dM%.1f %.1fh%d\"></path>",
                       s->key, s->colour, x, y0, y1, x - MARK, y0, 2 * MARK, x - MARK, y1, 2 * MARK);
            unit_text(lo, sizeof lo, c->y.unit, s->lo[i], s->lo[i]);
            unit_text(hi, sizeof hi, c->y.unit, s->hi[i], s->hi[i]);
        }
        marker(b, s, x, y);
        buf_printf(b, " class=\"point\" data-series=\"%s\" data-x=\"%.9g\" data-y=\"%.9f\"", s->key, s->x[i], s->y[i]);
        if (s->lo && s->hi) buf_printf(b, " data-lo=\"%.9f\" data-hi=\"%.9f\"", s->lo[i], s->hi[i]);
        buf_printf(b, "><title>%s: %s", xt, yt);
        if (s->lo && s->hi) buf_printf(b, " (%s … %s)", lo, hi);
        buf_printf(b, "</title>%s\n", marker_end(s));
    }
}

static void legend(Buf *b, const Chart *c) {
    for (int k = 0; k < c->nseries; k++) {
        const ChartSeries *s = &c->series[k];
        int x = LEFT + k * LEGEND_STEP, y = 44;
        buf_printf(b, "<g class=\"legend\" data-series=\"%s\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                   "stroke-width=\"2\"%s></line>",
                   s->key, x, y, x + 28, y, s->colour, s->dashed ? " stroke-dasharray=\"6 4\"" : "");
        marker(b, s, x + 14, y);
        buf_printf(b, ">%s", marker_end(s));
        both(b, x + 36, y + 5, "", "", s->en, s->zh);
        buf_append(b, "</g>\n");
    }
}

void chart_svg(Buf *b, const Chart *c) {
    double xmax = 0, ymax = 0;
    for (int k = 0; k < c->nseries; k++)
        for (int i = 0; i < c->series[k].n; i++) {
            const ChartSeries *s = &c->series[k];
            xmax = fmax(xmax, s->x[i]);
            ymax = fmax(ymax, s->hi ? fmax(s->hi[i], s->y[i]) : s->y[i]);
        }
    ChartScale sx = chart_scale_linear(xmax, LEFT, LEFT + PLOT_W), sy = chart_scale_linear(ymax, TOP + PLOT_H, TOP);
    buf_printf(b, "<svg class=\"chart %s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" font-size=\"13\" "
               "font-family=\"system-ui, sans-serif\"><rect width=\"%d\" height=\"%d\" fill=\"%s\"></rect>\n",
               c->id, WIDTH, HEIGHT, WIDTH, HEIGHT, WIDTH, HEIGHT, CHART_BACKGROUND);
    both(b, LEFT, 20, " font-weight=\"bold\" font-size=\"15\"", "title", c->title_en, c->title_zh);
    legend(b, c);
    axis(b, c, &sx, 0);
    axis(b, c, &sy, 1);
    buf_printf(b, "<path class=\"axes\" stroke=\"%s\" stroke-width=\"1.5\" fill=\"none\" d=\"M%d %dV%dH%d\"></path>\n",
               CHART_AXIS, LEFT, TOP, TOP + PLOT_H, LEFT + PLOT_W);
    for (int k = 0; k < c->nseries; k++) series(b, c, &c->series[k], &sx, &sy);
    if (c->note_en) both(b, LEFT, HEIGHT - 10, "", "note", c->note_en, c->note_zh);
    buf_append(b, "</svg>\n");
}
