// tensor — a float32 tensor (shape and data) and PyTorch-style printing.
//
// The printing follows PyTorch's own rules (torch/_tensor_str.py) so that a
// student can hold kvdemo's output next to the document's: one formatter is
// chosen for the whole tensor from its finite non-zero elements (integer,
// fixed or scientific notation, one width for all), rows are indented under
// "tensor(", vectors wrap at 80 columns, and a tensor of more than 1000
// elements shows only the first and last 3 along each dimension.
#include "tensor.h"

#include "buf.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PRINT_LINEWIDTH = 80, PRINT_THRESHOLD = 1000, PRINT_EDGEITEMS = 3 };

Tensor tensor_new(int ndim, const int *shape) {
    assert(ndim >= 0 && ndim <= TENSOR_MAX_DIMS);
    Tensor t = {.ndim = ndim, .owns = 1};
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        assert(shape[i] >= 0);
        t.shape[i] = shape[i];
        n *= (size_t)shape[i];
    }
    t.data = calloc(n ? n : 1, sizeof(float));
    return t;
}

Tensor tensor_view(float *data, int ndim, const int *shape) {
    assert(ndim >= 0 && ndim <= TENSOR_MAX_DIMS);
    Tensor t = {.ndim = ndim, .data = data, .owns = 0};
    for (int i = 0; i < ndim; i++) t.shape[i] = shape[i];
    return t;
}

Tensor tensor_view2(float *data, int rows, int cols) {
    int shape[2] = {rows, cols};
    return tensor_view(data, 2, shape);
}

void tensor_free(Tensor *t) {
    if (t->owns) free(t->data);
    memset(t, 0, sizeof *t);
}

size_t tensor_numel(const Tensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}

int tensor_rows(const Tensor *t) { return t->ndim ? t->shape[0] : 1; }

// ----------------------------------------------------------------------------
// PyTorch's _Formatter

typedef struct {
    int int_mode;     // every finite non-zero element is a whole number
    int sci_mode;     // "1.2340e-05" instead of "0.0000"
    int width;        // every element is padded to this width
    int precision;    // digits after the point
    int summarize;    // more than PRINT_THRESHOLD elements: show the edges
    float lo, hi;     // finite range, for the heat map
    TensorHeat heat;
    int max_width;    // 0: PyTorch's 80-column wrap; else each row on one
                      // line of at most this many columns, columns elided
    int reserve;      // columns kept free after a row for its closing brackets
} Formatter;

// Is this flat index one that a summarised print shows? (PyTorch's
// get_summarized_data keeps the first and last EDGEITEMS along every
// dimension longer than 2 * EDGEITEMS.)
static int shown(const Tensor *t, size_t flat, int summarize) {
    if (!summarize) return 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int n = t->shape[d];
        int i = (int)(flat % (size_t)n);
        flat /= (size_t)n;
        if (n > 2 * PRINT_EDGEITEMS && i >= PRINT_EDGEITEMS && i < n - PRINT_EDGEITEMS)
            return 0;
    }
    return 1;
}

static void value_text(char *out, size_t size, const Formatter *f, float v) {
    double x = (double)v;
    if (isnan(x)) {
        snprintf(out, size, "nan");
    } else if (isinf(x)) {
        snprintf(out, size, x < 0 ? "-inf" : "inf");
    } else if (f->sci_mode) {
        snprintf(out, size, "%.*e", f->precision, x);
    } else if (f->int_mode) {
        snprintf(out, size, "%.0f.", x);
    } else {
        snprintf(out, size, "%.*f", f->precision, x);
    }
}

static void formatter_init(Formatter *f, const Tensor *t, int precision, TensorHeat heat) {
    size_t n = tensor_numel(t);
    memset(f, 0, sizeof *f);
    f->int_mode = 1;
    f->width = 1;
    f->precision = precision;
    f->summarize = n > PRINT_THRESHOLD;
    f->heat = heat;
    double amin = INFINITY, amax = 0;
    f->lo = INFINITY;
    f->hi = -INFINITY;
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        float v = t->data[i];
        if (!isfinite(v) || !shown(t, i, f->summarize)) continue;
        if (v < f->lo) f->lo = v;
        if (v > f->hi) f->hi = v;
        if (v == 0) continue;
        any = 1;
        double a = fabs((double)v);
        if (a < amin) amin = a;
        if (a > amax) amax = a;
        if ((double)v != ceil((double)v)) f->int_mode = 0;
    }
    if (!any) return;
    if (f->int_mode) {
        f->sci_mode = amax / amin > 1000.0 || amax > 1.0e8;
    } else {
        f->sci_mode = amax / amin > 1000.0 || amax > 1.0e8 || amin < 1.0e-4;
    }
    for (size_t i = 0; i < n; i++) {
        float v = t->data[i];
        if (!isfinite(v) || v == 0 || !shown(t, i, f->summarize)) continue;
        char s[64];
        value_text(s, sizeof s, f, v);
        // In integer mode PyTorch measures "%.0f" and adds one for the point.
        int w = (int)strlen(s);
        if (w > f->width) f->width = w;
    }
}

static void format_value(Buf *b, const Formatter *f, float v) {
    char s[64];
    value_text(s, sizeof s, f, v);
    const char *color = f->heat ? f->heat(v, f->lo, f->hi) : "";
    if (*color) buf_append(b, color);
    for (int pad = f->width - (int)strlen(s); pad > 0; pad--) buf_append(b, " ");
    buf_append(b, s);
    if (*color) buf_append(b, "\x1b[0m");
}

static void newline_indent(Buf *b, int newlines, int indent) {
    buf_append(b, ",");
    for (int i = 0; i < newlines; i++) buf_append(b, "\n");
    for (int i = 0; i < indent; i++) buf_append(b, " ");
}

// How many elements are shown at each end of a row of n that must fit in
// max_width columns: "[a, b,  ..., y, z]" takes 1 + 2k (width + 2) + 4
// columns. Returns n / 2 or more when the whole row fits (nothing elided).
static int edge_items(const Formatter *f, int n, int indent) {
    int avail = f->max_width - indent - f->reserve;
    if (1 + n * (f->width + 2) - 2 <= avail) return n;
    int k = (avail - 5) / (2 * (f->width + 2));
    return k < 1 ? 1 : k;
}

// _vector_str: elements joined by ", ", as many per line as fit in 80 columns.
// With a max_width (a screen of --step or --width) the row stays on one line
// and the middle columns give way to "...", as PyTorch summarises a long row.
static void format_vector(Buf *b, const Formatter *f, const float *x, int n, int indent) {
    int per_line = (PRINT_LINEWIDTH - indent) / (f->width + 2);
    if (per_line < 1) per_line = 1;
    int edge = PRINT_EDGEITEMS;
    int summarized = f->summarize && n > 2 * PRINT_EDGEITEMS;
    if (f->max_width > 0) {
        int fit = edge_items(f, n, indent);
        if (!summarized || fit < edge) edge = fit;
        summarized = n > 2 * edge;
        per_line = n + 1;
    }
    int count = summarized ? 2 * edge + 1 : n;
    buf_append(b, "[");
    for (int k = 0; k < count; k++) {
        if (k > 0) {
            if (k % per_line == 0) newline_indent(b, 1, indent + 1);
            else buf_append(b, ", ");
        }
        if (summarized && k == edge) {
            buf_append(b, " ...");
            continue;
        }
        int i = summarized && k > edge ? n - (count - k) : k;
        format_value(b, f, x[i]);
    }
    buf_append(b, "]");
}

// _tensor_str_with_formatter: nested brackets, one more space of indent per
// level, and (dims - 1) newlines between slices.
static void format_nested(Buf *b, const Formatter *f, const float *x, const int *shape, int ndim,
                          int indent) {
    if (ndim == 1) {
        format_vector(b, f, x, shape[0], indent);
        return;
    }
    size_t stride = 1;
    for (int d = 1; d < ndim; d++) stride *= (size_t)shape[d];
    int n = shape[0];
    int summarized = f->summarize && n > 2 * PRINT_EDGEITEMS;
    int count = summarized ? 2 * PRINT_EDGEITEMS + 1 : n;
    buf_append(b, "[");
    for (int k = 0; k < count; k++) {
        if (k > 0) newline_indent(b, ndim - 1, indent + 1);
        if (summarized && k == PRINT_EDGEITEMS) {
            buf_append(b, "...");
            continue;
        }
        int i = summarized && k > PRINT_EDGEITEMS ? n - (count - k) : k;
        format_nested(b, f, x + (size_t)i * stride, shape + 1, ndim - 1, indent + 1);
    }
    buf_append(b, "]");
}

char *tensor_format(const Tensor *t, int precision, TensorHeat heat) {
    return tensor_format_width(t, precision, heat, 0);
}

char *tensor_format_width(const Tensor *t, int precision, TensorHeat heat, int max_width) {
    Buf b;
    buf_init(&b);
    const char *prefix = "tensor(";
    buf_append(&b, prefix);
    if (t->ndim > 0 && tensor_numel(t) == 0) {
        buf_append(&b, "[]");
        if (t->ndim != 1) {
            buf_append(&b, ", size=(");
            for (int d = 0; d < t->ndim; d++) buf_printf(&b, d ? ", %d" : "%d", t->shape[d]);
            buf_append(&b, t->ndim == 1 ? ",)" : ")");
        }
    } else {
        Formatter f;
        formatter_init(&f, t, precision, heat);
        f.max_width = max_width;
        f.reserve = t->ndim + 1;   // "]]])" after the last row
        if (t->ndim == 0) format_value(&b, &f, t->data[0]);
        else format_nested(&b, &f, t->data, t->shape, t->ndim, (int)strlen(prefix));
    }
    buf_append(&b, ")");
    return buf_take(&b);
}
