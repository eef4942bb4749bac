// trace — what a lesson shows: narration, tensors, counts, timings and
// comparisons, as text for people or as JSON Lines for scripts and tests.
#include "trace.h"

#include "buf.h"
#include "ops.h"
#include "utf8.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void trace_init(Trace *tr, FILE *out) {
    memset(tr, 0, sizeof *tr);
    tr->out = out;
    tr->format = FORMAT_TEXT;
    tr->level = TRACE_FULL;
    tr->precision = 4;
    // The narration follows the user's locale: LC_ALL, then LC_MESSAGES, then LANG.
    const char *names[] = {"LC_ALL", "LC_MESSAGES", "LANG"};
    tr->lang = LANG_EN;
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) {
            tr->lang = strncmp(v, "zh", 2) == 0 ? LANG_ZH : LANG_EN;
            break;
        }
    }
}

const char *trace_text(const Trace *tr, const char *en, const char *zh) {
    return tr->lang == LANG_ZH && zh ? zh : en;
}

static int is_json(const Trace *tr) { return tr->format == FORMAT_JSON; }

// ----------------------------------------------------------------------------
// JSON helpers

static void json_string(Buf *b, const char *s) {
    buf_append(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"') buf_append(b, "\\\"");
        else if (*p == '\\') buf_append(b, "\\\\");
        else if (*p == '\n') buf_append(b, "\\n");
        else if (*p == '\t') buf_append(b, "\\t");
        else if (*p < 0x20) buf_printf(b, "\\u%04x", *p);
        else buf_appendn(b, (const char *)p, 1);
    }
    buf_append(b, "\"");
}

// A float32 in 9 significant digits: enough to read back the same float.
// JSON has no infinities or NaN; they are written as the strings "-inf",
// "inf" and "nan".
static void json_float(Buf *b, double v) {
    if (isnan(v)) buf_append(b, "\"nan\"");
    else if (isinf(v)) buf_append(b, v < 0 ? "\"-inf\"" : "\"inf\"");
    else buf_printf(b, "%.9g", v);
}

// {"lesson":"2","run":"cache","step":2,"event":"...", — the common head.
static void json_head(Buf *b, const Trace *tr, const char *event) {
    buf_append(b, "{\"lesson\":");
    json_string(b, tr->lesson ? tr->lesson : "");
    if (tr->run) {
        buf_append(b, ",\"run\":");
        json_string(b, tr->run);
    }
    if (tr->step > 0) buf_printf(b, ",\"step\":%d", tr->step);
    buf_append(b, ",\"event\":");
    json_string(b, event);
}

static void json_data(Buf *b, const float *x, const int *shape, int ndim) {
    if (ndim == 0) {
        json_float(b, x[0]);
        return;
    }
    size_t stride = 1;
    for (int d = 1; d < ndim; d++) stride *= (size_t)shape[d];
    buf_append(b, "[");
    for (int i = 0; i < shape[0]; i++) {
        if (i) buf_append(b, ",");
        json_data(b, x + (size_t)i * stride, shape + 1, ndim - 1);
    }
    buf_append(b, "]");
}

static void emit(Trace *tr, Buf *b) {
    char *s = buf_take(b);
    if (s) {
        fputs(s, tr->out);
        free(s);
    }
    fflush(tr->out);
}

static void emit_json(Trace *tr, Buf *b) {
    buf_append(b, "}\n");
    emit(tr, b);
}

// ----------------------------------------------------------------------------
// Narration

void trace_heading(Trace *tr, const char *en, const char *zh) {
    Buf b;
    buf_init(&b);
    if (is_json(tr)) {
        // A section marks a boundary: it belongs to the lesson, not to a run.
        Trace lesson_only = *tr;
        lesson_only.run = NULL;
        lesson_only.step = 0;
        json_head(&b, &lesson_only, "section");
        buf_append(&b, ",\"title\":");
        json_string(&b, en);
        emit_json(tr, &b);
        return;
    }
    buf_printf(&b, "\n== %s ==\n\n", trace_text(tr, en, zh));
    emit(tr, &b);
}

void trace_say(Trace *tr, const char *en, const char *zh) {
    if (is_json(tr)) return;
    fprintf(tr->out, "%s\n", trace_text(tr, en, zh));
}

void trace_sayf(Trace *tr, const char *fmt_en, const char *fmt_zh, ...) {
    if (is_json(tr)) return;
    va_list ap;
    va_start(ap, fmt_zh);
    vfprintf(tr->out, trace_text(tr, fmt_en, fmt_zh), ap);
    va_end(ap);
    fputc('\n', tr->out);
}

void trace_run(Trace *tr, const char *run) {
    tr->run = run;
    tr->step = 0;
}

void trace_step(Trace *tr, int step) { tr->step = step; }

// ----------------------------------------------------------------------------
// Tensors

// A blue-to-red ramp of the 256-colour palette, low values blue.
static const char *heat_color(float v, float lo, float hi) {
    static const int ramp[] = {27, 33, 39, 45, 51, 50, 49, 48, 47, 46, 82, 118, 154, 190, 226,
                               220, 214, 208, 202, 196};
    static char codes[sizeof ramp / sizeof ramp[0]][24];
    const int n = (int)(sizeof ramp / sizeof ramp[0]);
    if (!isfinite(v)) return "\x1b[2m";   // -inf (masked) shown dim
    if (!codes[0][0])
        for (int i = 0; i < n; i++) snprintf(codes[i], sizeof codes[i], "\x1b[30;48;5;%dm", ramp[i]);
    int i = hi > lo ? (int)((v - lo) / (hi - lo) * (float)(n - 1) + 0.5f) : n / 2;
    if (i < 0) i = 0;
    if (i >= n) i = n - 1;
    return codes[i];
}

static void shape_text(Buf *b, int ndim, const int *shape) {
    buf_append(b, "(");
    for (int d = 0; d < ndim; d++) buf_printf(b, d ? ", %d" : "%d", shape[d]);
    buf_append(b, ndim == 1 ? ",)" : ")");
}

void trace_tensor(Trace *tr, TraceLevel level, const char *name, const char *code,
                  const Tensor *t, const char *const *rows, int heat) {
    if (tr->level < level) return;
    Buf b;
    buf_init(&b);
    if (is_json(tr)) {
        json_head(&b, tr, "tensor");
        buf_append(&b, ",\"name\":");
        json_string(&b, name);
        buf_append(&b, ",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) buf_printf(&b, d ? ",%d" : "%d", t->shape[d]);
        buf_append(&b, "]");
        if (rows) {
            buf_append(&b, ",\"rows\":[");
            for (int i = 0; i < tensor_rows(t); i++) {
                if (i) buf_append(&b, ",");
                json_string(&b, rows[i]);
            }
            buf_append(&b, "]");
        }
        buf_append(&b, ",\"data\":");
        json_data(&b, t->data, t->shape, t->ndim);
        emit_json(tr, &b);
        return;
    }
    if (code) buf_printf(&b, ">>> %s\n", code);
    buf_printf(&b, "%s ", name);
    shape_text(&b, t->ndim, t->shape);
    buf_append(&b, "\n");
    char *s = tensor_format(t, tr->precision, heat && tr->color ? heat_color : NULL);
    if (!s) {
        buf_append(&b, "(out of memory while formatting)\n");
        emit(tr, &b);
        return;
    }
    // With one printed line per row, the token each row belongs to goes at
    // its end as a comment: the digits stay exactly PyTorch's.
    int lines = 1;
    for (char *p = s; *p; p++) lines += *p == '\n';
    if (rows && t->ndim == 2 && lines == t->shape[0]) {
        // The comments line up after the longest line (the last, with "])").
        int width = 0;
        for (char *p = s, *q; p; p = q ? q + 1 : NULL) {
            q = strchr(p, '\n');
            int len = q ? (int)(q - p) : (int)strlen(p);
            if (len > width) width = len;
        }
        int r = 0;
        for (char *line = s; line; r++) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = '\0';
            buf_printf(&b, "%-*s  # %s\n", width, line, rows[r]);
            line = nl ? nl + 1 : NULL;
        }
    } else {
        buf_printf(&b, "%s\n", s);
    }
    buf_append(&b, "\n");
    free(s);
    emit(tr, &b);
}

void trace_shape(Trace *tr, const char *name, int ndim, const int *shape) {
    Buf b;
    buf_init(&b);
    if (is_json(tr)) {
        json_head(&b, tr, "shape");
        buf_append(&b, ",\"name\":");
        json_string(&b, name);
        buf_append(&b, ",\"shape\":[");
        for (int d = 0; d < ndim; d++) buf_printf(&b, d ? ",%d" : "%d", shape[d]);
        buf_append(&b, "]");
        emit_json(tr, &b);
        return;
    }
    buf_printf(&b, "  %s ", name);
    shape_text(&b, ndim, shape);
    buf_append(&b, "\n");
    emit(tr, &b);
}

// ----------------------------------------------------------------------------
// Numbers

void trace_count(Trace *tr, const char *name, int64_t value, const char *en, const char *zh) {
    Buf b;
    buf_init(&b);
    if (is_json(tr)) {
        json_head(&b, tr, "count");
        buf_append(&b, ",\"name\":");
        json_string(&b, name);
        buf_printf(&b, ",\"value\":%lld", (long long)value);
        emit_json(tr, &b);
        return;
    }
    if (!en) return;   // a count for scripts only
    buf_printf(&b, "  %s: %lld\n", trace_text(tr, en, zh), (long long)value);
    emit(tr, &b);
}

void trace_value(Trace *tr, const char *name, double value, const char *unit, const char *en,
                 const char *zh) {
    Buf b;
    buf_init(&b);
    if (is_json(tr)) {
        json_head(&b, tr, "value");
        buf_append(&b, ",\"name\":");
        json_string(&b, name);
        buf_append(&b, ",\"value\":");
        json_float(&b, value);
        buf_append(&b, ",\"unit\":");
        json_string(&b, unit);
        emit_json(tr, &b);
        return;
    }
    if (!en) return;   // a value for scripts only
    // 14960 reads better than 1.496e+04; 0.002305 than 2.305e-03.
    if (fabs(value) >= 1000 && fabs(value) < 1e12) buf_printf(&b, "  %s: %.0f %s\n", trace_text(tr, en, zh), value, unit);
    else buf_printf(&b, "  %s: %.4g %s\n", trace_text(tr, en, zh), value, unit);
    emit(tr, &b);
}

// 0.000001234 s reads better as 1.23 µs.
static void time_text(Buf *b, double s) {
    if (s < 1e-6) buf_printf(b, "%.0f ns", s * 1e9);
    else if (s < 1e-3) buf_printf(b, "%.2f µs", s * 1e6);
    else if (s < 1) buf_printf(b, "%.2f ms", s * 1e3);
    else buf_printf(b, "%.3f s", s);
}

void trace_timing(Trace *tr, const char *name, double seconds, int repeat) {
    Buf b;
    buf_init(&b);
    if (is_json(tr)) {
        json_head(&b, tr, "timing");
        buf_append(&b, ",\"name\":");
        json_string(&b, name);
        buf_printf(&b, ",\"seconds\":%.9g,\"repeat\":%d", seconds, repeat);
        emit_json(tr, &b);
        return;
    }
    buf_printf(&b, "  %s (%s): ", trace_text(tr, "time", "耗时"), name);
    time_text(&b, seconds);
    if (repeat > 1) buf_printf(&b, trace_text(tr, " (median of %d runs)", "（%d 次运行的中位数）"), repeat);
    buf_append(&b, "\n");
    emit(tr, &b);
}

int trace_compare(Trace *tr, const char *name, const char *a_name, const Tensor *a,
                  const char *b_name, const Tensor *b) {
    size_t n = tensor_numel(a);
    int same_shape = a->ndim == b->ndim && n == tensor_numel(b);
    for (int d = 0; same_shape && d < a->ndim; d++) same_shape = a->shape[d] == b->shape[d];
    int identical = same_shape && ops_bit_identical(a->data, b->data, (int64_t)n);
    double diff = same_shape ? ops_max_abs_diff(a->data, b->data, (int64_t)n) : NAN;
    Buf o;
    buf_init(&o);
    if (is_json(tr)) {
        json_head(&o, tr, "compare");
        buf_append(&o, ",\"name\":");
        json_string(&o, name);
        buf_append(&o, ",\"a\":");
        json_string(&o, a_name);
        buf_append(&o, ",\"b\":");
        json_string(&o, b_name);
        buf_printf(&o, ",\"identical\":%s,\"max_abs_diff\":", identical ? "true" : "false");
        json_float(&o, diff);
        emit_json(tr, &o);
        return identical;
    }
    buf_printf(&o, "  %s  vs  %s\n", a_name, b_name);
    if (!same_shape) buf_append(&o, trace_text(tr, "  shapes differ\n", "  形状不同\n"));
    else
        buf_printf(&o, trace_text(tr, "  max |difference| = %g, %s\n", "  最大绝对差 = %g，%s\n"), diff,
                   identical ? trace_text(tr, "identical bit for bit", "逐位完全相同")
                             : trace_text(tr, "NOT identical", "不完全相同"));
    emit(tr, &o);
    return identical;
}

void trace_textval(Trace *tr, const char *name, const char *text) {
    Buf b;
    buf_init(&b);
    if (is_json(tr)) {
        json_head(&b, tr, "text");
        buf_append(&b, ",\"name\":");
        json_string(&b, name);
        buf_append(&b, ",\"text\":");
        json_string(&b, text);
        emit_json(tr, &b);
        return;
    }
    buf_printf(&b, "%s\n", text);
    emit(tr, &b);
}

// ----------------------------------------------------------------------------
// Tables

// "  " then each cell padded to its column's width, one space apart; no
// spaces at the end of the line.
static void table_line(Buf *b, const TraceTable *t, const char *const *texts) {
    buf_append(b, "  ");
    size_t line_start = b->len;
    for (int i = 0; i < t->ncols; i++) {
        int pad = t->cols[i].width - utf8_width(texts[i]);
        if (pad < 0) pad = 0;
        if (i) buf_append(b, " ");
        if (t->cols[i].right) buf_printf(b, "%*s%s", pad, "", texts[i]);
        else buf_printf(b, "%s%*s", texts[i], pad, "");
    }
    while (b->s && b->len > line_start && b->s[b->len - 1] == ' ') b->s[--b->len] = '\0';
    buf_append(b, "\n");
}

// Is s a number as JSON writes one: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
static int is_json_number(const char *s) {
    if (*s == '-') s++;
    if (*s == '0') s++;
    else if (*s >= '1' && *s <= '9') while (*s >= '0' && *s <= '9') s++;
    else return 0;
    if (*s == '.') {
        if (!(*++s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!(*s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    return *s == '\0';
}

void trace_table_head(Trace *tr, const TraceTable *t) {
    Buf b;
    buf_init(&b);
    if (is_json(tr)) {
        json_head(&b, tr, "table");
        buf_append(&b, ",\"name\":");
        json_string(&b, t->name);
        buf_append(&b, ",\"columns\":[");
        for (int i = 0; i < t->ncols; i++) {
            if (i) buf_append(&b, ",");
            json_string(&b, t->cols[i].key ? t->cols[i].key : t->cols[i].en);
        }
        buf_append(&b, "]");
        emit_json(tr, &b);
        return;
    }
    const char *heads[64];
    assert(t->ncols <= 64);
    for (int i = 0; i < t->ncols; i++) heads[i] = trace_text(tr, t->cols[i].en, t->cols[i].zh);
    table_line(&b, t, heads);
    emit(tr, &b);
}

void trace_table_row(Trace *tr, const TraceTable *t, const char *const *cells) {
    Buf b;
    buf_init(&b);
    if (is_json(tr)) {
        json_head(&b, tr, "row");
        buf_append(&b, ",\"name\":");
        json_string(&b, t->name);
        buf_append(&b, ",\"cells\":[");
        for (int i = 0; i < t->ncols; i++) {
            if (i) buf_append(&b, ",");
            if (is_json_number(cells[i])) buf_append(&b, cells[i]);
            else json_string(&b, cells[i]);
        }
        buf_append(&b, "]");
        emit_json(tr, &b);
        return;
    }
    table_line(&b, t, cells);
    emit(tr, &b);
}

void trace_pause(Trace *tr) {
    if (!tr->step_pause || !isatty(STDIN_FILENO)) return;
    fprintf(stderr, "%s", trace_text(tr, "-- press Enter to go on --", "-- 按回车继续 --"));
    fflush(stderr);
    int c;
    while ((c = getchar()) != EOF && c != '\n') {
    }
}
