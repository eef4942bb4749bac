// trace_doc — the trace as a document for people (--format html|md), for
// trace.c only: lessons and commands call trace.h, never this.
//
// A document is kept in memory and written whole by trace_finish, so that a
// lesson that fails leaves no half-written page behind. While it is open,
// tr->out is a buffer: whatever a lesson prints itself (a table lined up in
// spaces, a bar chart) lands there, and the next trace event puts it into
// the document as preformatted text, so that it keeps its place.
#ifndef KVDEMO_TRACE_DOC_H
#define KVDEMO_TRACE_DOC_H

#include "trace.h"

// 1 while a document is open and the trace is not rendering text for it.
int trace_doc_active(const Trace *tr);

// trace_text while the document is open: en and zh in one string, which
// every event shows in each language (trace_doc.c); NULL when memory ran out.
const char *trace_doc_text(const Trace *tr, const char *en, const char *zh);

void trace_doc_heading(Trace *tr, const char *en, const char *zh);
// A paragraph of narration in both languages (zh NULL: en only).
void trace_doc_say(Trace *tr, const char *en, const char *zh);
// A step of a lesson begins: in HTML, a new section (a printed page can
// start there).
void trace_doc_step(Trace *tr);
// A tensor as a table (one per 2-D slice), its code line above it; heat maps
// and their legend in HTML. A matrix's first old rows are how, the others
// ROW_NEW (trace_cache_rows; how ROW_PLAIN: no marks): in HTML each marked
// row has its class, and the slide shows the legend of the marks before its
// first figure.
void trace_doc_tensor(Trace *tr, const char *shown, const char *code, const Tensor *t, const char *const *rows,
                      TraceHeat heat, TraceKind kind, int old, TraceRowRole how);
// A picture (trace_svg): HTML only. roles: bit 1 << role for each row
// mark it draws, whose legend its slide then shows.
void trace_doc_svg(Trace *tr, const char *svg, unsigned roles);
// A text result (a generated text): preformatted.
void trace_doc_textval(Trace *tr, const char *text);

// Lines of text (counts, values, timings, comparisons) in both languages:
// the caller renders them as text once per language between these two,
// and the document shows them as lines. A function that writes such lines
// starts with IN_BOTH_LANGUAGES(tr, itself(its arguments)): in a document
// that runs the call once per language and returns.
void trace_doc_lines_begin(Trace *tr);
int trace_doc_lines_next(Trace *tr);
#define IN_BOTH_LANGUAGES(tr, call)                   \
    do {                                              \
        if (trace_doc_active(tr)) {                   \
            trace_doc_lines_begin(tr);                \
            do call;                                  \
            while (trace_doc_lines_next(tr));         \
            return;                                   \
        }                                             \
    } while (0)

// A table with ncols columns: its heads in both languages, which columns are
// right-aligned (numbers), their widths in terminal columns, then rows of
// cells; any other event ends it. In HTML a cell that is a bar of a chart
// (only █, ░ and ·, as the text draws one) is drawn as an SVG bar, the
// column's width its whole length; █ and ░ in a head are its colours.
void trace_doc_table_head(Trace *tr, int ncols, const char *const *en, const char *const *zh, const int *right,
                          const int *width);
void trace_doc_table_row(Trace *tr, int ncols, const char *const *cells);

// A comparison (trace_compare) gave identical (1) or not: the page's footer counts them.
void trace_doc_compared(Trace *tr, int identical);

// Opens and closes the document (trace_begin and trace_finish in trace.c).
int trace_doc_open(Trace *tr);
int trace_doc_close(Trace *tr, int rc);

#endif
