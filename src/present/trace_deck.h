// trace_deck — what makes the lesson page (--format html, trace_doc.c) a
// deck of slides: its style and its script, and the marks of the rows that
// a step appends to the cache, reads from it, or recomputes for nothing.
//
// Each slide is a <section class="slide" id="slide-N">. Without JavaScript
// the page is one readable scroll and shows no button; the script makes it a
// deck (one slide a screen, ← → and Page Up / Down, "step N of M", #slide-N
// in the address, O for the overview) and adds the controls and the
// language button itself. docs/presenting.md says how to use it.
#ifndef KVDEMO_TRACE_DECK_H
#define KVDEMO_TRACE_DECK_H

#include "buf.h"
#include "trace.h"

// The row marks' colours (ROW_NEW, ROW_REUSED, ROW_RECOMPUTED), the same
// in every lesson and every mode (page, projector, print): each at least
// 3:1 on the page's white (WCAG 2.1, 1.4.11) and dark enough under its
// black sign (4.5:1), told apart with the common colour-vision deficiencies
// (tests/test_colours.c). The amber is the charts' "with the cache".
#define TRACE_ROW_NEW_COLOUR "#b26b00"
#define TRACE_ROW_REUSED_COLOUR "#3a87c8"
#define TRACE_ROW_RECOMPUTED_COLOUR "#8c8c8c"

// The page's <style> text and its <script> text (no tags around them).
extern const char *const TRACE_DECK_STYLE;
extern const char *const TRACE_DECK_SCRIPT;

// The CSS class of a row's role ("row-new", "row-reused",
// "row-recomputed"), or NULL for ROW_PLAIN; the same in every lesson.
const char *trace_deck_row_class(TraceRowRole role);
// The legend of the row marks (<p class="rowlegend">, both languages), for
// the roles whose bit 1 << role is set in seen.
void trace_deck_row_legend(Buf *b, unsigned seen);

// The SVG of trace_cache_triangle: two grids, without the cache and with it.
void trace_deck_triangle(Buf *b, int prompt, int steps);

#endif
