// trace — what a lesson shows: narration, tensors, counts, timings and
// comparisons, as text for people or as JSON Lines for scripts and tests.
//
// A lesson never prints directly; it tells the trace what happened and the
// trace decides how (text or JSON, which language, how many tensors, colour).
// docs/trace-format.md documents the JSON events.
#ifndef KVDEMO_TRACE_H
#define KVDEMO_TRACE_H

#include "fileio.h"   // Lang
#include "measure.h"
#include "tensor.h"

#include <stdint.h>
#include <stdio.h>

// FORMAT_HTML and FORMAT_MD are documents for people (trace_doc.c): a lesson
// sees format FORMAT_TEXT and doc FORMAT_HTML or FORMAT_MD (trace_begin).
typedef enum { FORMAT_TEXT, FORMAT_JSON, FORMAT_HTML, FORMAT_MD } TraceFormat;
// How many tensors are printed: TRACE_NONE prints none (comparisons, counts
// and timings still appear), TRACE_SUMMARY the ones a lesson marks as the
// point of a step, TRACE_FULL all of them.
typedef enum { TRACE_NONE, TRACE_SUMMARY, TRACE_FULL } TraceLevel;
// What a matrix holds, for its heat map: HEAT_SCORES on a diverging scale
// centred on 0, HEAT_PROBS (softmax weights) on a fixed 0 .. 1 scale.
typedef enum { HEAT_NONE, HEAT_SCORES, HEAT_PROBS } TraceHeat;
// What a row of a tensor is to the KV cache in the step that shows it, for
// the documents (--format html|md), which mark it; text and JSON are the same
// with or without it (trace_cache_rows).
typedef enum {
    ROW_PLAIN,        // nothing to mark
    ROW_NEW,          // the new token's row, computed in this step (with the cache: appended to it)
    ROW_REUSED,       // read from the cache: an earlier step computed it
    ROW_RECOMPUTED,   // computed again though an earlier step had it: the work the cache saves
} TraceRowRole;

typedef struct {
    FILE *out;              // stdout
    TraceFormat format;
    TraceLevel level;
    Lang lang;
    int precision;          // decimals of printed tensors (text only)
    int color;              // 1: ANSI heat maps on score and weight matrices
    int step_pause;         // 1: wait for Enter after each step (a terminal)
    int heat_maps;          // matrices shown that have a heat map (coloured or not)
    int shown;              // 1 once something was shown since the last --step pause
    int quit;               // 1 after q at a --step pause: nothing more is shown
    struct Screen *screen;  // --step / --width: the page out is fitted to (screen.h), or NULL
    // Where the lesson is; every JSON event carries these.
    const char *lesson;     // "2"
    const char *run;        // "no-cache", "cache", or NULL between runs
    int step;               // 1, 2, ... or 0 outside a step
    // --format html|md: a document (trace_begin .. trace_finish). The lesson
    // then sees format FORMAT_TEXT, so that it prints what it prints for
    // people; out is a buffer whose text the document shows where it was
    // printed, and the document goes to doc_out when it is finished.
    TraceFormat doc;        // FORMAT_HTML, FORMAT_MD, or FORMAT_TEXT: no document
    FILE *doc_out;
    struct TraceDoc *doc_state;
    // For a document's footer (cli.c sets them; NULL / 0 leaves them out).
    const char *version;       // kvdemo's
    int argc;
    char *const *argv;         // the command line
    // trace_cache_rows: the roles of the next tensor's rows.
    int rows_old;              // its first rows_old rows are rows_how, the rest ROW_NEW
    TraceRowRole rows_how;     // ROW_PLAIN: no roles
} Trace;

// Sets the defaults: text, full trace, precision 4, language from LANG,
// no colour, no pauses.
void trace_init(Trace *tr, FILE *out);

// Starts the output of a lesson or command whose format is set: for
// FORMAT_HTML and FORMAT_MD, a document (see Trace.doc). Returns 0, or 1
// after a line on stderr when memory ran out.
int trace_begin(Trace *tr);
// Ends it: a document is written whole when rc is 0, and nothing when the
// run failed. Returns rc, or 1 when the document could not be made.
int trace_finish(Trace *tr, int rc);

// The text in the trace's language (for messages built by the caller).
// While a document is open (--format html|md) it holds both languages,
// which the document shows each in its place: compose with it, never
// measure or compare what it returns. A format goes to trace_textf.
const char *trace_text(const Trace *tr, const char *en, const char *zh);
// buf: fmt_en or fmt_zh (the same conversions) with the arguments, as
// trace_text gives a text (in a document, both). Returns buf.
#if defined(__GNUC__)
__attribute__((format(printf, 4, 6), format(printf, 5, 6)))
#endif
const char *trace_textf(const Trace *tr, char *buf, size_t size, const char *fmt_en, const char *fmt_zh, ...);

// A heading (text) and a "section" event (JSON).
void trace_heading(Trace *tr, const char *en, const char *zh);
// A paragraph of narration; text only (JSON readers do not need prose).
void trace_say(Trace *tr, const char *en, const char *zh);
// The compiler checks the English format against the arguments; the
// Chinese one must have the same conversions in the same order
// (tests/test_zh.c checks every call in the sources).
#if defined(__GNUC__)
__attribute__((format(printf, 2, 4)))
#endif
void trace_sayf(Trace *tr, const char *fmt_en, const char *fmt_zh, ...);

// Start a run ("no-cache", "cache", ...) or a step inside it; step 0 ends it.
void trace_run(Trace *tr, const char *run);
void trace_step(Trace *tr, int step);

// A tensor under its document name. level: the least trace level that shows
// it. code: the document's line that computes it ("Q = torch.matmul(X, W_Q)"),
// shown above it in text, or NULL. rows: a label per row (the token each row
// belongs to) or NULL. heat: what the matrix holds (coloured, with a legend,
// when colour is on), or HEAT_NONE.
void trace_tensor(Trace *tr, TraceLevel level, const char *name, const char *code,
                  const Tensor *t, const char *const *rows, TraceHeat heat);
// The same, shown in the text under the document's name (`scores`, which the
// article reuses for three tensors) and in JSON under a name of its own
// (`masked_scores`), so that scripts can tell them apart.
void trace_tensor_as(Trace *tr, TraceLevel level, const char *name, const char *shown, const char *code,
                     const Tensor *t, const char *const *rows, TraceHeat heat);
// The same, for tensors whose values are of another kind: TRACE_INT prints
// token ids as PyTorch prints an integer tensor (tensor([[ 1, 45]])),
// TRACE_BOOL a mask of truth values (tensor([[ True, False]])); JSON is the
// same as for any tensor (numbers, 1 and 0 for truth values).
typedef enum { TRACE_REAL, TRACE_INT, TRACE_BOOL } TraceKind;
void trace_tensor_kind(Trace *tr, TraceLevel level, const char *name, const char *shown, const char *code,
                       const Tensor *t, const char *const *rows, TraceHeat heat, TraceKind kind);
// The rows of the next tensor shown, as the cache sees them: its first `old`
// rows are `how` (ROW_REUSED in a cached step, ROW_RECOMPUTED in a step
// without the cache), the others ROW_NEW. The next trace_tensor* call takes
// them, shown or not; the one after has none.
//   trace_cache_rows(tr, last, ROW_REUSED);   // K_last's rows, then k_cur's
//   trace_tensor(tr, TRACE_SUMMARY, "K", "K = torch.cat([K_last, K_cur])", &K, rows, 0);
void trace_cache_rows(Trace *tr, int old, TraceRowRole how);
// A picture for the HTML page: one <svg> element drawn by the caller (no
// address in it; its labels in both languages, elements of class en and
// zh). Nothing in text, JSON or Markdown, where the lesson's lines say the
// same in words.
void trace_svg(Trace *tr, const char *svg);
// The K/V rows each step of a generation computes, drawn in the HTML page:
// a grid, a row a step and a column a position, for the run without the
// cache (every position recomputed but the newest) beside the run with it
// (the newest appended, the others reused), in the row marks' colours: the
// triangle the cache removes. The first step feeds the prompt's tokens, each
// step after it one more. Nothing in text, JSON or Markdown.
void trace_cache_triangle(Trace *tr, int prompt, int steps);
// A shape only, for tensors too large to print: key (1, 6, 64, 7).
void trace_shape(Trace *tr, const char *name, int ndim, const int *shape);
// A whole number worth counting (rows computed, multiply-adds, bytes). With
// en NULL it is a JSON event only (the text shows it some other way, e.g. a table).
void trace_count(Trace *tr, const char *name, int64_t value, const char *en, const char *zh);
// A measured quantity with a unit ("s", "GB", "tokens/s", ...); with en NULL a
// JSON event only.
void trace_value(Trace *tr, const char *name, double value, const char *unit, const char *en,
                 const char *zh);
// A time measured around the arithmetic only; repeat > 1 gives the median
// of that many runs.
void trace_timing(Trace *tr, const char *name, double seconds, int repeat);
// The times of n repeated runs (after warm-up): mean ± σ and min … max,
// with a warning when they disagree too much to be trusted; JSON gives the
// median as "seconds" with mean, sd, min, max and noisy.
void trace_timing_stats(Trace *tr, const char *name, const double *samples, int n);
// The ratio of two sets of timings' means ("how many times faster"), printed
// with as many digits as their spread allows.
void trace_ratio(Trace *tr, const char *name, const double *a, int na, const double *b, int nb, const char *en,
                 const char *zh);
// The machine at the start of a measurement: the busy banner when its load
// average exceeds its cores (nothing otherwise); JSON: load_average, cores
// and machine_busy (0 or 1).
void trace_machine(Trace *tr, MeasureMachine m);
// The times of n runs measured as measure.h does: "  time (name): 3.71 s
// (3.61 … 3.92 s), median of 3 runs", with a mark and a warning under it
// when they disagree too much to be trusted; JSON as trace_timing_stats.
void trace_measure(Trace *tr, const char *name, const double *samples, int n);
// A quantity worked out from each of n runs (tokens/s, a share of the time):
// "  en: 29.4 tokens/s (27.1 … 31.0), median of 3 runs", marked "!" when the
// runs disagree (measure_noisy); with en NULL a JSON event only. JSON: a
// value event with the median as "value", and "min", "max", "runs", "noisy".
void trace_value_runs(Trace *tr, const char *name, const double *x, int n, const char *unit, const char *en,
                      const char *zh);
// Arm b against arm a (b's runs a's, interleaved): "  en: 6.4 ± 0.3 x
// faster", "... x slower" or "the same within noise (1.03 ± 0.08 x)", the
// words chosen by measure_verdict; JSON: a value event with "error",
// "decimals" and "verdict" ("faster", "slower", "same", "too_few").
void trace_comparison(Trace *tr, const char *name, const double *a, int na, const double *b, int nb, const char *en,
                      const char *zh);
// The same from a ratio and a verdict worked out by the caller (MeasureVerdict);
// with en NULL a JSON event only.
void trace_comparison_of(Trace *tr, const char *name, MeasureRatio r, int verdict, const char *en, const char *zh);
// Two tensors that should agree: identical bit for bit, and max |a - b|.
// Returns 1 when they are identical.
int trace_compare(Trace *tr, const char *name, const char *a_name, const Tensor *a,
                  const char *b_name, const Tensor *b);
// A short text result (a generated text, a token): {"event":"text",...}.
void trace_textval(Trace *tr, const char *name, const char *text);
// A table: a head, then rows of cells. Text lines up each cell in its
// column's width, measured in terminal columns (a Chinese character takes
// two); JSON has one "table" event with the column names, then one "row"
// event per row whose cells are numbers when they read as numbers.
typedef struct {
    const char *en, *zh;   // the column's head; en is also its JSON name
    int width;             // terminal columns the cells are padded to
    int right;             // 1: right-aligned (numbers)
    const char *key;       // its JSON name when en is not unique, or NULL
} TraceColumn;

typedef struct {
    const char *name;          // the JSON events' name: "kv_rows"
    int ncols;
    const TraceColumn *cols;   // (ncols)
} TraceTable;

void trace_table_head(Trace *tr, const TraceTable *t);
// cells: ncols texts.
void trace_table_row(Trace *tr, const TraceTable *t, const char *const *cells);

// What happened to a block of the paged cache (lesson 6.1): name is alloc,
// fork, cow, free or share; src is the block copied from (cow) or -1; ref
// and src_ref the reference counts afterwards. JSON: {"event":"block",...};
// text: one line, unless the trace level is none.
void trace_block(Trace *tr, const char *name, int block, int src, int ref, int src_ref);
// With --step on a terminal: a prompt, then one key: q quits (nothing more
// is shown), b shows the screen before again (Enter then goes forward), any
// other goes on, on a fresh screen. Every tensor pauses after itself; a
// lesson pauses at the end of each step. Nothing happens when nothing was
// shown since the last pause. (The screen, screen.h, does the work.)
void trace_pause(Trace *tr);
// The same after a row of a table that grows a row a key: the rows above stay.
void trace_pause_row(Trace *tr);

// The heat maps' colours, for tests: the palette of a kind (n entries of the
// xterm 256-colour palette), the entry a value gets, an index's (r, g, b),
// its WCAG luminance, and the text colour (16 or 231) put on it.
const int *trace_heat_palette(TraceHeat kind, int *n);
int trace_heat_index(TraceHeat kind, float v, float lo, float hi);
void trace_palette_rgb(int index, int rgb[3]);
double trace_luminance(int index);
int trace_text_on(int bg);

#endif
