// trace — what a lesson shows: narration, tensors, counts, timings and
// comparisons, as text for people or as JSON Lines for scripts and tests.
#include "trace.h"

#include "buf.h"
#include "fileio.h"
#include "measure.h"
#include "ops.h"
#include "screen.h"
#include "stats.h"
#include "trace_deck.h"
#include "trace_doc.h"
#include "utf8.h"

#include <assert.h>
#include <errno.h>
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

int trace_begin(Trace *tr) {
    if (tr->format != FORMAT_HTML && tr->format != FORMAT_MD) return 0;
    tr->doc = tr->format;
    tr->format = FORMAT_TEXT;   // the lesson prints for people; the document shows it
    tr->color = 0;
    tr->step_pause = 0;
    if (trace_doc_open(tr)) {
        fileio_error(tr->lang, "out of memory", "内存不足");
        tr->doc = FORMAT_TEXT;
        return 1;
    }
    return 0;
}

int trace_finish(Trace *tr, int rc) {
    if (tr->doc == FORMAT_TEXT) return rc;
    rc = trace_doc_close(tr, rc);
    tr->format = tr->doc;
    tr->doc = FORMAT_TEXT;
    return rc;
}

const char *trace_text(const Trace *tr, const char *en, const char *zh) {
    // A document holds both languages: a text the lesson composes from this
    // one keeps both (trace_doc.c); not a format, whose conversions would
    // then take their arguments twice (trace_textf is for those).
    if (zh && strcmp(en, zh) && trace_doc_active(tr) && !strchr(en, '%') && !strchr(zh, '%')) {
        const char *both = trace_doc_text(tr, en, zh);
        if (both) return both;
    }
    return tr->lang == LANG_ZH && zh ? zh : en;
}

const char *trace_textf(const Trace *tr, char *buf, size_t size, const char *fmt_en, const char *fmt_zh, ...) {
    va_list ap;
    va_start(ap, fmt_zh);
    if (trace_doc_active(tr)) {   // both, each formatted, as trace_text gives them
        char en[1024], zh[1024];
        va_list aq;
        va_copy(aq, ap);
        vsnprintf(en, sizeof en, fmt_en, ap);
        vsnprintf(zh, sizeof zh, fmt_zh, aq);
        va_end(aq);
        const char *both = trace_text(tr, en, zh);   // or, when buf is too small for both, one
        snprintf(buf, size, "%s", strlen(both) < size ? both : tr->lang == LANG_ZH ? zh : en);
    } else {
        vsnprintf(buf, size, trace_text(tr, fmt_en, fmt_zh), ap);
    }
    va_end(ap);
    return buf;
}

static int is_json(const Trace *tr) { return tr->format == FORMAT_JSON; }

// ----------------------------------------------------------------------------
// JSON helpers

// A JSON string of s: always valid UTF-8 (a byte that is not, from a data
// file or a model's vocabulary, becomes U+FFFD), control characters escaped
// (C0, which JSON requires, and DEL and C1, so that no line can drive a
// terminal it is shown on).
static void json_string(Buf *b, const char *s) {
    buf_append(b, "\"");
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t c;
        int len = utf8_decode(&c, p + i, n - i);
        if (len == 0) buf_append(b, "\\ufffd"), len = 1;
        else if (c == '"') buf_append(b, "\\\"");
        else if (c == '\\') buf_append(b, "\\\\");
        else if (c == '\n') buf_append(b, "\\n");
        else if (c == '\t') buf_append(b, "\\t");
        else if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) buf_printf(b, "\\u%04x", (unsigned)c);
        else buf_appendn(b, (const char *)p + i, (size_t)len);
        i += (size_t)len;
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

// Everything the trace prints goes out here (after q at a --step pause,
// nothing more is shown).
static void emit(Trace *tr, Buf *b) {
    char *s = buf_take(b);
    if (!s) fileio_note_stdout_error(ENOMEM);   // the text was lost: main says so and exits 1
    if (s && !tr->quit) {
        fputs(s, tr->out);
        tr->shown = 1;
    }
    free(s);
    if (tr->screen) {   // --step, --width: fitted to the screen (it may pause: -- more --)
        screen_sync(tr->screen);
        if (tr->screen->quit) tr->quit = 1;
        return;
    }
    if (fflush(tr->out) != 0 && tr->out == stdout) fileio_note_stdout_error(errno);
}

static void emit_json(Trace *tr, Buf *b) {
    buf_append(b, "}\n");
    emit(tr, b);
}

// ----------------------------------------------------------------------------
// Narration

void trace_heading(Trace *tr, const char *en, const char *zh) {
    if (trace_doc_active(tr)) {
        trace_doc_heading(tr, en, zh);
        return;
    }
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
    if (trace_doc_active(tr)) {
        trace_doc_say(tr, en, zh);
        return;
    }
    if (is_json(tr)) return;
    Buf b;
    buf_init(&b);
    buf_printf(&b, "%s\n", trace_text(tr, en, zh));
    emit(tr, &b);
}

void trace_sayf(Trace *tr, const char *fmt_en, const char *fmt_zh, ...) {
    if (trace_doc_active(tr)) {   // a document holds both languages
        va_list ap, aq;
        va_start(ap, fmt_zh);
        va_copy(aq, ap);
        Buf e, z;
        buf_init(&e);
        buf_init(&z);
        buf_vprintf(&e, fmt_en, ap);
        buf_vprintf(&z, fmt_zh ? fmt_zh : fmt_en, aq);
        va_end(aq);
        va_end(ap);
        char *se = buf_take(&e), *sz = buf_take(&z);
        if (se) trace_doc_say(tr, se, sz);
        free(se);
        free(sz);
        return;
    }
    if (is_json(tr)) return;
    va_list ap;
    va_start(ap, fmt_zh);
    Buf b;
    buf_init(&b);
    buf_vprintf(&b, trace_text(tr, fmt_en, fmt_zh), ap);
    va_end(ap);
    buf_append(&b, "\n");
    emit(tr, &b);
}

void trace_run(Trace *tr, const char *run) {
    tr->run = run;
    tr->step = 0;
}

void trace_step(Trace *tr, int step) {
    tr->step = step;
    if (step > 0 && trace_doc_active(tr)) trace_doc_step(tr);
}

// ----------------------------------------------------------------------------
// Tensors

// Heat maps. Colours are the xterm 256-colour palette's, each cell's text
// black or white, whichever contrasts more with its background (at least
// 4.5:1 for every colour below, as WCAG asks of text; test_trace checks it).
//   probabilities  sequential white -> dark blue on a fixed 0 .. 1 scale, so
//                  that two weight matrices can be compared by eye
//   scores         diverging blue -> white -> red centred on 0, scaled to the
//                  largest |score| of the matrix
//   -inf / nan     grey: the cells the mask removed
// Each step is darker than the one before by about the same lightness, so
// that neighbouring steps stay apart for viewers with protanopia,
// deuteranopia or tritanopia too (test_colours simulates them; the 14 and
// 13 steps kvdemo had before merged two neighbours for protan and tritan
// viewers: the xterm cube has too few colours of distinct lightness).
static const int HEAT_SEQ[] = {231, 189, 45, 39, 68, 62, 24, 20, 18};
static const int HEAT_DIV[] = {25, 63, 104, 110, 45, 189, 231, 224, 217, 210, 167, 160, 124};
enum { HEAT_MASKED_BG = 252, HEAT_MASKED_FG = 240 };
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

// The (r, g, b) of a palette index 16 .. 255.
void trace_palette_rgb(int index, int rgb[3]) {
    static const int level[6] = {0, 95, 135, 175, 215, 255};
    if (index >= 232) {
        rgb[0] = rgb[1] = rgb[2] = 8 + 10 * (index - 232);
        return;
    }
    int i = index - 16;
    rgb[0] = level[i / 36];
    rgb[1] = level[i / 6 % 6];
    rgb[2] = level[i % 6];
}

// WCAG relative luminance of a palette index.
double trace_luminance(int index) {
    int rgb[3];
    trace_palette_rgb(index, rgb);
    double lin[3];
    for (int c = 0; c < 3; c++) {
        double v = rgb[c] / 255.0;
        lin[c] = v <= 0.03928 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4);
    }
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2];
}

// The text colour (16 black or 231 white) that reads best on background bg.
int trace_text_on(int bg) {
    double l = trace_luminance(bg);
    return (l + 0.05) / 0.05 >= 1.05 / (l + 0.05) ? 16 : 231;
}

const int *trace_heat_palette(TraceHeat kind, int *n) {
    *n = kind == HEAT_PROBS ? COUNT(HEAT_SEQ) : COUNT(HEAT_DIV);
    return kind == HEAT_PROBS ? HEAT_SEQ : HEAT_DIV;
}

static const char *heat_code(int bg) {
    static char codes[256][32];
    if (!codes[bg][0]) snprintf(codes[bg], sizeof codes[bg], "\x1b[38;5;%d;48;5;%dm", trace_text_on(bg), bg);
    return codes[bg];
}

static const char *masked_code(void) {
    static char code[32];
    if (!code[0]) snprintf(code, sizeof code, "\x1b[38;5;%d;48;5;%dm", HEAT_MASKED_FG, HEAT_MASKED_BG);
    return code;
}

int trace_heat_index(TraceHeat kind, float v, float lo, float hi) {
    int n;
    trace_heat_palette(kind, &n);
    double pos;   // 0 .. 1 along the palette
    if (kind == HEAT_PROBS) {
        pos = v;
    } else {
        double m = fmax(fabs((double)lo), fabs((double)hi));
        pos = m > 0 ? 0.5 + 0.5 * (double)v / m : 0.5;
    }
    int i = (int)lround(pos * (n - 1));
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

static const char *heat_probs(float v, float lo, float hi) {
    if (!isfinite(v)) return masked_code();
    return heat_code(HEAT_SEQ[trace_heat_index(HEAT_PROBS, v, lo, hi)]);
}

static const char *heat_scores(float v, float lo, float hi) {
    if (!isfinite(v)) return masked_code();
    return heat_code(HEAT_DIV[trace_heat_index(HEAT_SCORES, v, lo, hi)]);
}

// The legend under a heat map: the palette as coloured cells between its
// end values, and how the masked cells look.
static void heat_legend(Buf *b, const Trace *tr, TraceHeat kind, const Tensor *t) {
    int n;
    const int *pal = trace_heat_palette(kind, &n);
    float m = 0;
    int masked = 0;
    for (size_t i = 0; i < tensor_numel(t); i++) {
        float v = t->data[i];
        if (!isfinite(v)) masked = 1;
        else if (fabsf(v) > m) m = fabsf(v);
    }
    buf_append(b, trace_text(tr, "colour: ", "颜色："));
    if (kind == HEAT_PROBS) buf_append(b, "0 ");
    else buf_printf(b, "%.*f ", tr->precision, -(double)m);
    for (int i = 0; i < n; i++) buf_printf(b, "\x1b[48;5;%dm  ", pal[i]);
    buf_append(b, "\x1b[0m");
    if (kind == HEAT_PROBS)
        buf_append(b, trace_text(tr, " 1 (fixed scale)", " 1（固定刻度）"));
    else
        buf_printf(b, " %.*f%s", tr->precision, (double)m, trace_text(tr, " (white: 0)", "（白色为 0）"));
    if (masked)
        buf_printf(b, trace_text(tr, "; %s-inf\x1b[0m: masked", "；%s-inf\x1b[0m：被掩码"), masked_code());
    buf_append(b, "\n");
}

static void shape_text(Buf *b, int ndim, const int *shape) {
    buf_append(b, "(");
    for (int d = 0; d < ndim; d++) buf_printf(b, d ? ", %d" : "%d", shape[d]);
    buf_append(b, ndim == 1 ? ",)" : ")");
}

void trace_tensor(Trace *tr, TraceLevel level, const char *name, const char *code,
                  const Tensor *t, const char *const *rows, TraceHeat heat) {
    trace_tensor_kind(tr, level, name, name, code, t, rows, heat, TRACE_REAL);
}

// A 1-D or 2-D tensor of whole numbers or truth values as PyTorch prints an
// int64 or bool tensor: every element right-aligned to the widest one,
// tensor([[ 1, 45,  0],\n        [ 1, 47, 48]]) or tensor([[ True, False]]).
// (Rows are not wrapped at 80 columns as PyTorch would: lessons print short ones.)
// With max_width (a screen's), the middle of a row too wide for it is elided
// as "  ...", as PyTorch summarises a long row.
static char *format_whole(const Tensor *t, TraceKind kind, int max_width) {
    int rows = t->ndim == 2 ? t->shape[0] : 1, cols = t->shape[t->ndim - 1];
    char cell[32];
    int width = 1;
    for (int i = 0; i < rows * cols; i++) {
        int n = kind == TRACE_BOOL ? (t->data[i] != 0 ? 4 : 5) : snprintf(cell, sizeof cell, "%lld", (long long)t->data[i]);
        if (n > width) width = n;
    }
    int edge = cols;   // elements shown at each end of a row
    int open = t->ndim == 2 ? 9 : 8, close = t->ndim == 2 ? 3 : 2;
    if (max_width > 0 && open + cols * (width + 2) - 2 + close > max_width) {
        edge = (max_width - open - close - 5) / (2 * (width + 2));
        if (edge < 1) edge = 1;
    }
    Buf b;
    buf_init(&b);
    buf_append(&b, t->ndim == 2 ? "tensor([[" : "tensor([");
    for (int r = 0; r < rows; r++) {
        if (r) buf_append(&b, "],\n        [");
        for (int c = 0; c < cols; c++) {
            if (cols > 2 * edge && c == edge) {
                buf_append(&b, ",  ...");
                c = cols - edge - 1;
                continue;
            }
            float v = t->data[r * cols + c];
            if (kind == TRACE_BOOL) snprintf(cell, sizeof cell, "%s", v != 0 ? "True" : "False");
            else snprintf(cell, sizeof cell, "%lld", (long long)v);
            buf_printf(&b, "%s%*s", c ? ", " : "", width, cell);
        }
    }
    buf_append(&b, t->ndim == 2 ? "]])" : "])");
    return buf_take(&b);
}

void trace_tensor_as(Trace *tr, TraceLevel level, const char *name, const char *shown, const char *code,
                     const Tensor *t, const char *const *rows, TraceHeat heat) {
    trace_tensor_kind(tr, level, name, shown, code, t, rows, heat, TRACE_REAL);
}

void trace_cache_rows(Trace *tr, int old, TraceRowRole how) {
    tr->rows_old = old;
    tr->rows_how = how;
}

// A tensor as a JSON event: its name, shape, row names and data.
static void tensor_json(Trace *tr, const char *name, const Tensor *t, const char *const *rows) {
    Buf b;
    buf_init(&b);
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
}

// The width a tensor's numbers may take: on a screen (--step, --width) each
// row fits in its width, with room for the row's comment when there is
// enough; 0 (no limit) otherwise.
static int tensor_width(const Trace *tr, const Tensor *t, const char *const *rows) {
    int max_width = tr->screen ? tr->screen->width : 0;
    if (max_width && rows && t->ndim == 2) {
        int comment = 0;
        for (int r = 0; r < t->shape[0]; r++) {
            int w = utf8_width(rows[r]);
            if (w > comment) comment = w;
        }
        if (max_width - comment - 4 >= 24) max_width -= comment + 4;
    }
    return max_width;
}

// The formatted numbers s into b. With one printed line per row, the token
// each row belongs to goes at its end as a comment: the digits stay exactly
// PyTorch's. The comments line up after the longest line (the last, with
// "])"); widths are counted in columns, so colour codes do not shift them.
static void tensor_lines(Buf *b, char *s, const Tensor *t, const char *const *rows) {
    int lines = 1;
    for (char *p = s; *p; p++) lines += *p == '\n';
    if (!rows || t->ndim != 2 || lines != t->shape[0]) {
        buf_printf(b, "%s\n", s);
        return;
    }
    int width = 0;
    for (char *p = s, *q; p; p = q ? q + 1 : NULL) {
        q = strchr(p, '\n');
        int len = screen_columns(p, q ? (size_t)(q - p) : strlen(p));
        if (len > width) width = len;
    }
    int r = 0;
    for (char *line = s; line; r++) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        buf_printf(b, "%s%*s  # %s\n", line, width - screen_columns(line, strlen(line)), "", rows[r]);
        line = nl ? nl + 1 : NULL;
    }
}

void trace_tensor_kind(Trace *tr, TraceLevel level, const char *name, const char *shown, const char *code,
                       const Tensor *t, const char *const *rows, TraceHeat heat, TraceKind kind) {
    int old = tr->rows_old;   // trace_cache_rows holds for this tensor only
    TraceRowRole how = tr->rows_how;
    tr->rows_old = 0;
    tr->rows_how = ROW_PLAIN;
    if (tr->level < level) return;
    if (trace_doc_active(tr)) {
        trace_doc_tensor(tr, shown, code, t, rows, heat, kind, old, how);
        return;
    }
    if (is_json(tr)) {
        tensor_json(tr, name, t, rows);
        return;
    }
    Buf b;
    buf_init(&b);
    if (code) buf_printf(&b, ">>> %s\n", code);
    buf_printf(&b, "%s ", shown);
    shape_text(&b, t->ndim, t->shape);
    buf_append(&b, "\n");
    int colored = heat != HEAT_NONE && tr->color;
    if (heat != HEAT_NONE) tr->heat_maps++;
    int max_width = tensor_width(tr, t, rows);
    char *s = (kind == TRACE_INT || kind == TRACE_BOOL) && (t->ndim == 1 || t->ndim == 2) && tensor_numel(t) > 0
                  ? format_whole(t, kind, max_width)
                  : tensor_format_width(t, tr->precision, !colored ? NULL : heat == HEAT_PROBS ? heat_probs : heat_scores,
                                        max_width);
    if (!s) {
        buf_append(&b, "(out of memory while formatting)\n");
        emit(tr, &b);
        return;
    }
    tensor_lines(&b, s, t, rows);
    if (colored) heat_legend(&b, tr, heat, t);
    buf_append(&b, "\n");
    free(s);
    emit(tr, &b);
    trace_pause(tr);   // --step: one operation a screen
}

void trace_shape(Trace *tr, const char *name, int ndim, const int *shape) {
    IN_BOTH_LANGUAGES(tr, trace_shape(tr, name, ndim, shape));
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
    IN_BOTH_LANGUAGES(tr, trace_count(tr, name, value, en, zh));
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
    buf_printf(&b, "  %s%s%lld\n", trace_text(tr, en, zh), trace_text(tr, ": ", "："), (long long)value);
    emit(tr, &b);
}

// Units and the names of timed runs as the text says them; JSON keeps the
// names scripts read ("s", "cache").
static const struct {
    const char *en, *zh;
} WORDS[] = {
    {"x", "倍"}, {"s", "秒"}, {"tokens/s", "token/秒"}, {"step", "这一步"}, {"cache", "使用缓存"},
    {"no-cache", "不使用缓存"}, {"run", "整次运行"},
};

// The names of timed runs that a script reads but a class should not see:
// the words the text shows in their place, in both languages.
static const struct {
    const char *name, *en, *zh;
} SHOWN[] = {
    {"per_token", "per token", "每个 token"},
};

static const char *word_text(const Trace *tr, const char *en) {
    for (size_t i = 0; i < sizeof SHOWN / sizeof SHOWN[0]; i++)
        if (!strcmp(SHOWN[i].name, en)) return tr->lang == LANG_ZH ? SHOWN[i].zh : SHOWN[i].en;
    if (tr->lang != LANG_ZH) return en;
    for (size_t i = 0; i < sizeof WORDS / sizeof WORDS[0]; i++)
        if (!strcmp(WORDS[i].en, en)) return WORDS[i].zh;
    return en;
}

void trace_value(Trace *tr, const char *name, double value, const char *unit, const char *en,
                 const char *zh) {
    IN_BOTH_LANGUAGES(tr, trace_value(tr, name, value, unit, en, zh));
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
    const char *colon = trace_text(tr, ": ", "：");
    unit = word_text(tr, unit);
    if (fabs(value) >= 1000 && fabs(value) < 1e12) buf_printf(&b, "  %s%s%.0f %s\n", trace_text(tr, en, zh), colon, value, unit);
    else buf_printf(&b, "  %s%s%.4g %s\n", trace_text(tr, en, zh), colon, value, unit);
    emit(tr, &b);
}

// 0.000001234 s reads better as 1.23 µs.
static void time_text(Buf *b, double s) {
    if (s < 1e-6) buf_printf(b, "%.0f ns", s * 1e9);
    else if (s < 1e-3) buf_printf(b, "%.2f µs", s * 1e6);
    else if (s < 1) buf_printf(b, "%.2f ms", s * 1e3);
    else buf_printf(b, "%.3f s", s);
}

// The start of a timing: {..."event":"timing","name":..,"seconds":..,"repeat":..
// in JSON (the caller adds any more fields and ends it), "  time (name): " in text.
static void timing_head(Buf *b, const Trace *tr, const char *name, double seconds, int repeat) {
    if (is_json(tr)) {
        json_head(b, tr, "timing");
        buf_append(b, ",\"name\":");
        json_string(b, name);
        buf_printf(b, ",\"seconds\":%.9g,\"repeat\":%d", seconds, repeat);
    } else if (tr->lang == LANG_ZH) {
        buf_printf(b, "  耗时（%s）：", word_text(tr, name));
    } else {
        buf_printf(b, "  time (%s): ", word_text(tr, name));
    }
}

void trace_timing(Trace *tr, const char *name, double seconds, int repeat) {
    IN_BOTH_LANGUAGES(tr, trace_timing(tr, name, seconds, repeat));
    Buf b;
    buf_init(&b);
    timing_head(&b, tr, name, seconds, repeat);
    if (is_json(tr)) {
        emit_json(tr, &b);
        return;
    }
    time_text(&b, seconds);
    if (repeat > 1) buf_printf(&b, trace_text(tr, " (median of %d runs)", "（%d 次运行的中位数）"), repeat);
    buf_append(&b, "\n");
    emit(tr, &b);
}

void trace_timing_stats(Trace *tr, const char *name, const double *samples, int n) {
    IN_BOTH_LANGUAGES(tr, trace_timing_stats(tr, name, samples, n));
    Stats st = stats_of(samples, n);
    Buf b;
    buf_init(&b);
    timing_head(&b, tr, name, st.median, n);
    if (is_json(tr)) {
        buf_printf(&b, ",\"mean\":%.9g,\"sd\":%.9g,\"min\":%.9g,\"max\":%.9g,\"noisy\":%s", st.mean, st.sd, st.min,
                   st.max, stats_noisy(st) ? "true" : "false");
        emit_json(tr, &b);
        return;
    }
    time_text(&b, st.mean);
    if (n > 1) {
        buf_append(&b, " ± ");
        time_text(&b, st.sd);
        buf_append(&b, "  (");
        time_text(&b, st.min);
        buf_append(&b, " … ");
        time_text(&b, st.max);
        buf_printf(&b, trace_text(tr, ", %d runs)", "，%d 次运行）"), n);
    }
    buf_append(&b, "\n");
    if (stats_noisy(st))
        buf_append(&b, trace_text(tr, "  (the runs disagree by more than 10%: the machine was busy; rerun)\n",
                                  "  （各次运行相差超过 10%：机器当时很忙，请再运行一次）\n"));
    emit(tr, &b);
}

void trace_ratio(Trace *tr, const char *name, const double *a, int na, const double *b, int nb, const char *en,
                 const char *zh) {
    IN_BOTH_LANGUAGES(tr, trace_ratio(tr, name, a, na, b, nb, en, zh));
    Stats sa = stats_of(a, na), sb = stats_of(b, nb);
    int decimals;
    double r = stats_ratio(sa, sb, &decimals);
    Buf o;
    buf_init(&o);
    if (is_json(tr)) {
        json_head(&o, tr, "value");
        buf_append(&o, ",\"name\":");
        json_string(&o, name);
        buf_printf(&o, ",\"value\":%.9g,\"unit\":\"x\",\"decimals\":%d", r, decimals);
        emit_json(tr, &o);
        return;
    }
    buf_printf(&o, "  %s: %.*f x\n", trace_text(tr, en, zh), decimals, r);
    emit(tr, &o);
}

void trace_machine(Trace *tr, MeasureMachine m) {
    if (is_json(tr)) {
        trace_value(tr, "load_average", m.load, "", NULL, NULL);
        trace_count(tr, "cores", m.cores, NULL, NULL);
        trace_count(tr, "machine_busy", measure_busy(m), NULL, NULL);
        return;
    }
    if (!measure_busy(m)) return;
    IN_BOTH_LANGUAGES(tr, trace_machine(tr, m));
    char text[320];
    Buf b;
    buf_init(&b);
    buf_printf(&b, "%s\n", measure_busy_text(text, sizeof text, m, tr->lang == LANG_ZH));
    emit(tr, &b);
}

void trace_measure(Trace *tr, const char *name, const double *samples, int n) {
    Stats st = stats_of(samples, n);
    int noisy = measure_noisy(samples, n);
    if (is_json(tr)) {   // the median as "seconds", with mean, sd, min, max and noisy
        Buf j;
        buf_init(&j);
        timing_head(&j, tr, name, st.median, n);
        buf_printf(&j, ",\"mean\":%.9g,\"sd\":%.9g,\"min\":%.9g,\"max\":%.9g,\"noisy\":%s", st.mean, st.sd, st.min,
                   st.max, noisy ? "true" : "false");
        emit_json(tr, &j);
        return;
    }
    IN_BOTH_LANGUAGES(tr, trace_measure(tr, name, samples, n));
    char spread[96];
    Buf b;
    buf_init(&b);
    timing_head(&b, tr, name, st.median, n);
    buf_append(&b, measure_spread_text(spread, sizeof spread, st));
    if (n > 1) buf_printf(&b, trace_text(tr, ", median of %d runs", "，%d 次运行的中位数"), n);
    if (noisy) buf_printf(&b, "  !\n  %s", measure_noisy_text(tr->lang == LANG_ZH));
    buf_append(&b, "\n");
    emit(tr, &b);
}

void trace_value_runs(Trace *tr, const char *name, const double *x, int n, const char *unit, const char *en,
                      const char *zh) {
    Stats st = stats_of(x, n);
    int noisy = measure_noisy(x, n);
    Buf b;
    buf_init(&b);
    if (is_json(tr)) {
        json_head(&b, tr, "value");
        buf_append(&b, ",\"name\":");
        json_string(&b, name);
        buf_printf(&b, ",\"value\":%.9g,\"unit\":", st.median);
        json_string(&b, unit);
        buf_printf(&b, ",\"min\":%.9g,\"max\":%.9g,\"runs\":%d,\"noisy\":%s", st.min, st.max, n,
                   noisy ? "true" : "false");
        emit_json(tr, &b);
        return;
    }
    if (!en) return;   // a value for scripts only
    IN_BOTH_LANGUAGES(tr, trace_value_runs(tr, name, x, n, unit, en, zh));
    char v[128];
    buf_printf(&b, "  %s%s%s", trace_text(tr, en, zh), trace_text(tr, ": ", "："),
               measure_value_text(v, sizeof v, st, word_text(tr, unit)));
    if (n > 1) buf_printf(&b, trace_text(tr, ", median of %d runs", "，%d 次运行的中位数"), n);
    buf_append(&b, noisy ? "  !\n" : "\n");
    emit(tr, &b);
}

void trace_comparison(Trace *tr, const char *name, const double *a, int na, const double *b, int nb, const char *en,
                      const char *zh) {
    IN_BOTH_LANGUAGES(tr, trace_comparison(tr, name, a, na, b, nb, en, zh));
    Stats sa = stats_of(a, na), sb = stats_of(b, nb);
    trace_comparison_of(tr, name, measure_ratio(sa, sb), measure_verdict(a, na, b, nb), en, zh);
}

static const char *verdict_name(int verdict) {
    static const char *const NAMES[] = {"same", "faster", "slower", "too_few"};
    return verdict >= 0 && verdict < 4 ? NAMES[verdict] : "same";
}

void trace_comparison_of(Trace *tr, const char *name, MeasureRatio r, int verdict, const char *en, const char *zh) {
    IN_BOTH_LANGUAGES(tr, trace_comparison_of(tr, name, r, verdict, en, zh));
    Buf o;
    buf_init(&o);
    if (is_json(tr)) {
        json_head(&o, tr, "value");
        buf_append(&o, ",\"name\":");
        json_string(&o, name);
        buf_printf(&o, ",\"value\":%.9g,\"unit\":\"x\",\"error\":%.9g,\"decimals\":%d,\"verdict\":\"%s\"", r.x, r.e,
                   r.decimals, verdict_name(verdict));
        emit_json(tr, &o);
        return;
    }
    if (!en) return;   // a value for scripts only
    char text[128];
    measure_compare_text(text, sizeof text, r, (MeasureVerdict)verdict, tr->lang == LANG_ZH);
    buf_printf(&o, "  %s%s%s\n", trace_text(tr, en, zh), trace_text(tr, ": ", "："), text);
    emit(tr, &o);
}

// A difference of at most this share of the largest |value| is rounding
// (the last bits differ): "不完全相同"; a larger one is a change: "不同".
// English says "NOT identical" for both.
#define ROUNDING_SHARE 1e-4

static double max_abs(const float *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
    return m;
}

int trace_compare(Trace *tr, const char *name, const char *a_name, const Tensor *a,
                  const char *b_name, const Tensor *b) {
    if (trace_doc_active(tr)) {   // a document: the text in both languages
        int same;
        trace_doc_lines_begin(tr);
        do same = trace_compare(tr, name, a_name, a, b_name, b);
        while (trace_doc_lines_next(tr));
        trace_doc_compared(tr, same);
        return same;
    }
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
                   : diff <= ROUNDING_SHARE * max_abs(a->data, n)
                       ? trace_text(tr, "NOT identical", "不完全相同")   // in the last bits
                       : trace_text(tr, "NOT identical", "不同"));
    emit(tr, &o);
    return identical;
}

void trace_cache_triangle(Trace *tr, int prompt, int steps) {
    if (!trace_doc_active(tr) || tr->doc != FORMAT_HTML || prompt < 1 || steps < 1) return;
    Buf b;
    buf_init(&b);
    trace_deck_triangle(&b, prompt, steps);
    char *svg = buf_take(&b);
    if (svg) trace_doc_svg(tr, svg, 1u << ROW_NEW | 1u << ROW_REUSED | 1u << ROW_RECOMPUTED);
    free(svg);
}

void trace_svg(Trace *tr, const char *svg) {
    if (trace_doc_active(tr)) trace_doc_svg(tr, svg, 0);
}

void trace_textval(Trace *tr, const char *name, const char *text) {
    if (trace_doc_active(tr)) {
        trace_doc_textval(tr, text);
        return;
    }
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
    buf_append_shown(&b, text);   // a model's text: its control characters escaped
    buf_append(&b, "\n");
    emit(tr, &b);
}

// ----------------------------------------------------------------------------
// Tables

// "  " then each cell padded to its column's width, one space apart; no
// spaces at the end of the line.
static void table_line(Buf *b, const TraceTable *t, const char *const *texts, int max_width) {
    buf_append(b, "  ");
    size_t line_start = b->len - 2;
    for (int i = 0; i < t->ncols; i++) {
        int pad = t->cols[i].width - utf8_width(texts[i]);
        if (pad < 0) pad = 0;
        if (i) buf_append(b, " ");
        if (t->cols[i].right) buf_printf(b, "%*s%s", pad, "", texts[i]);
        else buf_printf(b, "%s%*s", texts[i], pad, "");
    }
    while (b->s && b->len > line_start + 2 && b->s[b->len - 1] == ' ') b->s[--b->len] = '\0';
    // On a screen narrower than the table (--width, --step): the line is cut
    // at the width and ends in "…", so that a table is never wrapped like prose.
    if (b->s && max_width > 1 && screen_columns(b->s + line_start, b->len - line_start) > max_width) {
        size_t end = b->len;
        while (end > line_start && screen_columns(b->s + line_start, end - line_start) > max_width - 1) {
            end--;
            while (end > line_start && ((unsigned char)b->s[end] & 0xC0) == 0x80) end--;   // a whole character
        }
        b->len = end;
        b->s[end] = '\0';
        buf_append(b, "…");
    }
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
    if (trace_doc_active(tr)) {   // a document: an HTML or Markdown table
        const char *en[64], *zh[64];
        int right[64], width[64];
        assert(t->ncols <= 64);
        for (int i = 0; i < t->ncols; i++)
            en[i] = t->cols[i].en, zh[i] = t->cols[i].zh, right[i] = t->cols[i].right, width[i] = t->cols[i].width;
        trace_doc_table_head(tr, t->ncols, en, zh, right, width);
        return;
    }
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
    table_line(&b, t, heads, tr->screen ? tr->screen->width : 0);
    emit(tr, &b);
}

void trace_table_row(Trace *tr, const TraceTable *t, const char *const *cells) {
    if (trace_doc_active(tr)) {
        trace_doc_table_row(tr, t->ncols, cells);
        return;
    }
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
    table_line(&b, t, cells, tr->screen ? tr->screen->width : 0);
    emit(tr, &b);
    trace_pause_row(tr);   // --step: the table grows a row a key
}

// A pause of --step (on a terminal: cli opens the screen only there). The
// screen shows the prompt, reads the keys and starts the next page; a table
// row keeps the rows above it (new_screen 0).
static void pause_for_key(Trace *tr, int new_screen) {
    if (!tr->step_pause || tr->quit || !tr->screen) return;
    screen_sync(tr->screen);
    if (!tr->shown && !tr->screen->fresh) return;
    tr->shown = 0;
    if (screen_pause(tr->screen, new_screen)) tr->quit = 1;
}

void trace_block(Trace *tr, const char *name, int block, int src, int ref, int src_ref) {
    IN_BOTH_LANGUAGES(tr, trace_block(tr, name, block, src, ref, src_ref));
    Buf b;
    buf_init(&b);
    if (is_json(tr)) {
        json_head(&b, tr, "block");
        buf_append(&b, ",\"name\":");
        json_string(&b, name);
        buf_printf(&b, ",\"block\":%d,\"src\":%d,\"ref\":%d", block, src, ref);
        if (src >= 0) buf_printf(&b, ",\"src_ref\":%d", src_ref);
        emit_json(tr, &b);
        return;
    }
    if (tr->level == TRACE_NONE) return;
    if (src >= 0)
        buf_printf(&b, trace_text(tr, "    [%s] block %d -> block %d (refs %d and %d)\n", "    [%s] 块 %d -> 块 %d（引用计数 %d 和 %d）\n"),
                   name, src, block, src_ref, ref);
    else
        buf_printf(&b, trace_text(tr, "    [%s] block %d (ref %d)\n", "    [%s] 块 %d（引用计数 %d）\n"), name, block, ref);
    emit(tr, &b);
}
void trace_pause(Trace *tr) { pause_for_key(tr, 1); }
void trace_pause_row(Trace *tr) { pause_for_key(tr, 0); }
