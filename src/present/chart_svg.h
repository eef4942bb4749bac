// chart_svg — the charts kvdemo draws: lesson 4's time per token and lesson
// 5's bytes held in the lesson page (--format html), and bench --svg's
// file (benchsvg.c). One place for what every chart needs: a scale from
// values to pixels (linear from zero, or logarithmic), its ticks at round
// numbers, a tick's text with its unit, the colours of the course, and, for
// the page, a whole chart: labelled axes, ticks, a legend, a line and a mark
// per point, and the spread as whiskers where the runs measured one, every
// text in both languages (elements of class en and zh, which the page's
// language button shows one at a time).
#ifndef KVDEMO_CHART_SVG_H
#define KVDEMO_CHART_SVG_H

#include "buf.h"

#include <stddef.h>

// The course's colours, the same in the page's bars, its charts, lesson
// 10's race and bench --svg: without the cache the bars' blue (█), with it
// their amber (░), darkened to 4.2:1 on white (#e69f00 was 2.25:1: WCAG
// 1.4.11 asks 3:1 of the parts of a chart); what is reserved, and
// reference lines, grey. Each is at least 3:1 on the chart's background and
// on the bars' track (tests/test_colours.c).
#define CHART_NO_CACHE "#0072b2"    // Okabe-Ito blue
#define CHART_CACHE "#b26b00"       // Okabe-Ito's amber (#e69f00) at 35% lightness
#define CHART_RESERVED "#666666"
#define CHART_AXIS "#333333"
#define CHART_BACKGROUND "#ffffff"
#define CHART_TRACK "#f4f4f4"       // the track a bar fills
#define CHART_GRID "#e5e5e5"        // grid lines: a help to the eye, not a part to tell apart

// Every colour a chart's data or axes are drawn in (for the contrast test).
extern const char *const CHART_COLOURS[];
extern const int CHART_NUM_COLOURS;

// ----------------------------------------------------------------------------
// Scales and ticks

typedef enum { CHART_COUNT, CHART_SECONDS, CHART_BYTES } ChartUnit;

typedef struct {
    double lo, hi;   // the values at the ends (log10 of them on a log scale)
    double p0, p1;   // their pixels
    int log;         // 1: logarithmic
} ChartScale;

enum { CHART_LINEAR_TICKS = 5, CHART_MAX_TICKS = 32 };

// From 0 to a round top >= vmax, in CHART_LINEAR_TICKS - 1 equal round
// steps (the same count of ticks whatever the data: 0, 75, 150, 225, 300).
ChartScale chart_scale_linear(double vmax, double p0, double p1);
// Logarithmic from vmin to vmax (> 0), widened to at least a factor of 2
// and by pad (a share of the range) at each end.
ChartScale chart_scale_log(double vmin, double vmax, double p0, double p1, double pad);
// The pixel of value v.
double chart_at(const ChartScale *s, double v);
// The ticks' values (ticks: CHART_MAX_TICKS), ascending: the linear steps,
// or 1, 2 and 5 times each power of ten in range. Returns how many.
int chart_ticks(const ChartScale *s, double *ticks);
// A tick's text: a count as it is; seconds and bytes with their unit, on a
// linear scale the unit of its top (0, 1.5, ... 6 ms), on a log scale each
// value's own.
void chart_tick_text(char *out, size_t size, const ChartScale *s, ChartUnit unit, double v);
// Seconds in the unit that suits them, 3 significant digits ("1.23 ms").
void chart_seconds_text(char *out, size_t size, double seconds);

// ----------------------------------------------------------------------------
// A chart for the page

typedef enum { CHART_CIRCLE, CHART_SQUARE } ChartMarker;

typedef struct {
    const char *key;       // its data-series attribute ("no-cache")
    const char *en, *zh;   // its name in the legend
    const char *colour;    // one of CHART_COLOURS
    ChartMarker marker;
    int dashed;            // its line dashed (told apart without colour too)
    int n;
    const double *x, *y;   // (n) the points, x ascending
    const double *lo, *hi; // (n) the spread of each y (min … max of the runs), or NULL: none measured
} ChartSeries;

typedef struct {
    const char *en, *zh;   // the axis's label, with its unit where the ticks do not carry it
    ChartUnit unit;
} ChartAxis;

typedef struct {
    const char *id;                  // the chart's class ("chart-time")
    const char *title_en, *title_zh;
    ChartAxis x, y;                  // both linear from 0
    const char *note_en, *note_zh;   // a line under the chart, or NULL
    int nseries;
    const ChartSeries *series;
} Chart;

// Appends the chart as one <svg> to b. Every point is a mark of class
// "point" with data-series, data-x and data-y (and data-lo, data-hi with a
// spread); every tick a <g class="tick" data-axis="x|y" data-value="v">.
void chart_svg(Buf *b, const Chart *c);

#endif
