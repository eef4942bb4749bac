// trace_doc — the trace as a document for people: --format html writes one
// self-contained HTML page (inline CSS and script, trace_deck.c; nothing
// fetched from the network) for a browser, a projector or a printout;
// --format md writes Markdown whose tables paste into slides and notes.
//
// HTML: narration as paragraphs in both languages (the one of --lang shown,
// the script's button switches), each document code line above its tensor, each tensor
// a table with the token of each row at its left, score and weight matrices
// coloured with the heat-map palettes of the text trace (trace.c) and a
// legend under them, and every cell's exact value (%.9g, as in JSON) in its
// title, shown when the pointer rests on it. Each step of the lesson is a
// slide (a <section class="slide" id="slide-N">, a printed page); a heading
// opens one too, unless the slide so far holds only headings. With
// JavaScript the page is a deck of those slides, without it one scroll.
// Markdown: the language of --lang only; tensors and tables as Markdown
// tables, code lines in fenced blocks, counts and timings as lines; the
// same slides as the page, a --- line between two.
#include "trace_doc.h"

#include "buf.h"
#include "chart_svg.h"
#include "fileio.h"
#include "provenance.h"
#include "trace_deck.h"
#include "trace_questions.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <unistd.h>

struct TraceDoc {
    Buf page;            // the document so far
    FILE *held;          // tr->out while the document is open
    char *held_text;     // what the lesson printed itself (open_memstream)
    size_t held_len;
    size_t held_used;    // bytes of held_text already in the page
    // The preformatted block being gathered, in each language: what the
    // lesson printed itself (the same in both) and the lined-up lines it
    // said (trace_doc_say), until the next event puts it into the page.
    Buf pre_en, pre_zh;
    int busy;            // 1 while text is rendered for trace_doc_lines_*
    int pass;            // trace_doc_lines_*: 0 the English text, 1 the Chinese
    char *lines_en;
    Lang lang;           // the language of --lang, while busy
    int section_open;    // a slide is open (HTML: a <section>)
    size_t section_at;   // HTML: page.len right after the open slide's <section> tag
    int slides;          // slides so far
    int content;         // the open slide holds more than headings
    unsigned row_roles;  // HTML: bit 1 << role for each row role the open slide marks
    int new_step;        // a step began: the next output opens a section
    int headings;        // headings so far (the first is the title)
    int table_cols;      // columns of the open trace table, or 0
    unsigned char table_left[64];   // 1: that column is left-aligned (text)
    int table_width[64];            // its width in terminal columns
    size_t held_end;     // page.len right after the last block of held text
    size_t lines_end;    // page.len right after the last block of lines
    struct TwinText *twins;   // the texts of both languages handed out (trace_doc_text)
    int compared, identical;  // comparisons made, and those identical bit for bit
};

// A text of both languages that trace_text handed out while the document
// is open, kept until it closes.
struct TwinText {
    struct TwinText *next;
    char s[];   // TWIN_OPEN en TWIN_SPLIT zh TWIN_CLOSE
};

static int is_html(const Trace *tr) { return tr->doc == FORMAT_HTML; }

int trace_doc_active(const Trace *tr) {
    return tr->doc != FORMAT_TEXT && tr->doc_state && !tr->doc_state->busy;
}

// ----------------------------------------------------------------------------
// Texts of both languages
//
// A lesson composes texts with trace_text ("%s tokens" around a number, a
// label put into a table cell, a tensor's code line) before it hands them
// to the trace. While a document is open, trace_text gives both languages
// in one string, \x01en\x02zh\x03 (pairs may nest, as a text of both put into
// another), and the document shows each language its half: so every text
// a lesson composes has its twin, whatever it was put into.

enum { TWIN_OPEN = 1, TWIN_SPLIT = 2, TWIN_CLOSE = 3, TWIN_DEPTH = 32 };

const char *trace_doc_text(const Trace *tr, const char *en, const char *zh) {
    struct TraceDoc *d = tr->doc_state;
    size_t ne = strlen(en), nz = strlen(zh);
    struct TwinText *t = malloc(sizeof *t + ne + nz + 4);
    if (!t) return NULL;
    t->s[0] = TWIN_OPEN;
    memcpy(t->s + 1, en, ne);
    t->s[1 + ne] = TWIN_SPLIT;
    memcpy(t->s + 2 + ne, zh, nz);
    t->s[2 + ne + nz] = TWIN_CLOSE;
    t->s[3 + ne + nz] = '\0';
    t->next = d->twins;
    d->twins = t;
    return t->s;
}

// The first n bytes of s as one language reads them: of each pair, the half
// of lang. Malloc'd, or NULL when memory ran out.
static char *twin_pick(const char *s, size_t n, Lang lang) {
    char *out = malloc(n + 1);
    if (!out) return NULL;
    unsigned char half[TWIN_DEPTH];   // per open pair: LANG_EN in its first half, LANG_ZH in its second
    int depth = 0, muted = 0;         // muted: open pairs in the half of the other language
    size_t o = 0;
    for (size_t i = 0; i < n && s[i]; i++) {
        char c = s[i];
        if (c == TWIN_OPEN && depth < TWIN_DEPTH) {
            half[depth++] = LANG_EN;
            muted += lang != LANG_EN;
        } else if (c == TWIN_SPLIT && depth && half[depth - 1] == LANG_EN) {
            half[depth - 1] = LANG_ZH;
            muted += lang == LANG_EN ? 1 : -1;
        } else if (c == TWIN_CLOSE && depth) {
            muted -= half[--depth] != lang;
        } else if (!muted && c != TWIN_OPEN && c != TWIN_SPLIT && c != TWIN_CLOSE) {
            out[o++] = c;
        }
    }
    out[o] = '\0';
    return out;
}

// en and zh (NULL: the same as en), each read in its language: *e and *z
// malloc'd; returns 0, or -1 when memory ran out (the page then fails).
static int twin_texts(struct TraceDoc *d, const char *en, const char *zh, char **e, char **z) {
    *e = twin_pick(en, strlen(en), LANG_EN);
    *z = twin_pick(zh ? zh : en, strlen(zh ? zh : en), LANG_ZH);
    if (*e && *z) return 0;
    free(*e);
    free(*z);
    *e = *z = NULL;
    d->page.failed = 1;
    return -1;
}

// ----------------------------------------------------------------------------
// Escaping

// Text inside an HTML element or a quoted attribute: <, >, &, " as entities;
// "//", "http:", "url(" and "@import" with one character as an entity, so
// that no text of a lesson can read as a link or a fetch (the page shows
// the same characters); terminal colour sequences and other control
// characters dropped.
static void html_text(Buf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0x1b) {   // ESC [ ... letter
            while (i + 1 < n && s[i + 1] && !isalpha((unsigned char)s[i + 1])) i++;
            if (i + 1 < n && s[i + 1]) i++;
            continue;
        }
        if (c == '<') buf_append(b, "&lt;");
        else if (c == '>') buf_append(b, "&gt;");
        else if (c == '&') buf_append(b, "&amp;");
        else if (c == '"') buf_append(b, "&quot;");
        else if (c == '/' && i > 0 && s[i - 1] == '/') buf_append(b, "&#47;");
        else if (c == ':' && ((i >= 4 && !strncasecmp(s + i - 4, "http", 4)) || (i >= 5 && !strncasecmp(s + i - 5, "https", 5))))
            buf_append(b, "&#58;");
        else if (c == '(' && i >= 3 && !strncasecmp(s + i - 3, "url", 3)) buf_append(b, "&#40;");
        else if (c == '@' && !strncasecmp(s + i + 1, "import", 6)) buf_append(b, "&#64;");
        else if (c < 0x20 && c != '\n' && c != '\t') continue;
        else buf_appendn(b, s + i, 1);
    }
}

static void html(Buf *b, const char *s) { html_text(b, s, strlen(s)); }

// Markdown text: the characters that would start emphasis, a link, HTML, a
// table cell or code get a backslash; a line break becomes a hard break
// (table cells: a space).
static void md_text(Buf *b, const char *s, size_t n, int cell) {
    for (size_t i = 0; i < n && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0x1b) {
            while (i + 1 < n && s[i + 1] && !isalpha((unsigned char)s[i + 1])) i++;
            if (i + 1 < n && s[i + 1]) i++;
            continue;
        }
        if (c == '\n') buf_append(b, cell ? " " : "  \n");
        else if (strchr("\\`*_[]<>|#", c) && c) {
            buf_append(b, "\\");
            buf_appendn(b, s + i, 1);
        } else if (c < 0x20) buf_append(b, " ");
        else buf_appendn(b, s + i, 1);
    }
}

// s without the blank lines (and spaces) around it: *n bytes from the result.
static const char *trimmed(const char *s, size_t len, size_t *n) {
    while (len && (*s == '\n' || *s == ' ')) s++, len--;
    while (len && (s[len - 1] == '\n' || s[len - 1] == ' ')) len--;
    *n = len;
    return s;
}

// Text printed for a terminal, made a block: without the blank lines around
// it, its common indent and spaces at line ends; malloc'd, "" when blank.
static char *block_text(const char *s, size_t len) {
    int indent = -1;
    for (size_t i = 0; i < len;) {   // the least indent of a line with text
        size_t j = i;
        while (j < len && s[j] == ' ') j++;
        if (j < len && s[j] != '\n' && (indent < 0 || (int)(j - i) < indent)) indent = (int)(j - i);
        while (j < len && s[j] != '\n') j++;
        i = j + 1;
    }
    Buf b;
    buf_init(&b);
    buf_append(&b, "");
    size_t blank = 0;   // blank lines held back until a line with text comes
    for (size_t i = 0; i < len;) {
        size_t j = i, end;
        while (j < len && s[j] != '\n') j++;
        end = j;
        while (end > i && (s[end - 1] == ' ' || s[end - 1] == '\r')) end--;
        if (end == i) {
            if (b.len) blank++;
        } else {
            for (; blank; blank--) buf_append(&b, "\n");
            if (b.len) buf_append(&b, "\n");
            size_t from = i + (size_t)(indent > 0 ? indent : 0);
            buf_appendn(&b, s + from, end > from ? end - from : 0);
        }
        i = j + 1;
    }
    return buf_take(&b);
}

// ----------------------------------------------------------------------------
// The page

static void page_start(Trace *tr, struct TraceDoc *d) {
    const char *id = tr->lesson ? tr->lesson : "";
    int lesson = isdigit((unsigned char)id[0]);
    if (!is_html(tr)) return;
    buf_printf(&d->page,
               "<!DOCTYPE html>\n<html lang=\"%s\">\n<head>\n<meta charset=\"utf-8\">\n"
               "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>kvdemo %s",
               tr->lang == LANG_ZH ? "zh-CN" : "en", lesson ? "lesson " : "");
    html(&d->page, id);
    // The page holds both languages; CSS shows the one of <html lang>, and
    // the script's button switches it (trace_deck.c).
    buf_printf(&d->page, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", TRACE_DECK_STYLE);
}

// Ends an open trace table.
static void end_table(Trace *tr, struct TraceDoc *d) {
    if (!d->table_cols) return;
    buf_append(&d->page, is_html(tr) ? "</tbody></table>\n" : "\n");
    d->table_cols = 0;
}

// HTML: the legend of the open slide's row marks, put before its first
// figure (after its heading and its sentences, above every table it marks):
// in the flow of the slide, so that it covers nothing at any size of
// screen, and read before the rows it explains.
static void insert_row_legend(struct TraceDoc *d) {
    Buf legend, tail;
    buf_init(&legend);
    buf_init(&tail);
    trace_deck_row_legend(&legend, d->row_roles);
    const char *figure = d->page.s ? strstr(d->page.s + d->section_at, "<figure") : NULL;
    size_t at = figure ? (size_t)(figure - d->page.s) : d->page.len;
    if (legend.s && !d->page.failed) {
        buf_appendn(&tail, d->page.s + at, d->page.len - at);
        d->page.len = at;
        buf_appendn(&d->page, legend.s, legend.len);
        if (tail.s) buf_appendn(&d->page, tail.s, tail.len);
        if (tail.failed) d->page.failed = 1;
        // the ends of the blocks after it move with them
        if (d->held_end > at) d->held_end += legend.len;
        if (d->lines_end > at) d->lines_end += legend.len;
    }
    if (legend.failed) d->page.failed = 1;
    buf_free(&legend);
    buf_free(&tail);
}

// HTML: the end of the open slide, with the legend of its row marks.
static void close_section(struct TraceDoc *d) {
    if (!d->section_open) return;
    insert_row_legend(d);
    d->row_roles = 0;
    buf_append(&d->page, "</section>\n");
}

// A new slide: in HTML a <section class="slide" id="slide-N"> (each one
// starts a printed page), in Markdown a --- line between two.
static void open_section(Trace *tr, struct TraceDoc *d) {
    d->slides++;
    d->content = 0;
    if (!is_html(tr)) {   // a blank line before ---, or it would underline a heading
        if (d->section_open) {
            if (d->page.len && d->page.s[d->page.len - 1] == '\n' && (d->page.len < 2 || d->page.s[d->page.len - 2] != '\n'))
                buf_append(&d->page, "\n");
            buf_append(&d->page, "---\n\n");
        }
        d->section_open = 1;
        return;
    }
    close_section(d);
    buf_printf(&d->page, "<section class=\"slide\" id=\"slide-%d\">\n", d->slides);
    d->section_at = d->page.len;
    d->section_open = 1;
}

// Where a step begins or a heading comes, a new slide; but a slide that
// holds only headings so far takes the step (or the heading) too, so that
// no heading stands alone on a slide or at the bottom of a printed page.
static void step_section(Trace *tr, struct TraceDoc *d) {
    if (!d->section_open || d->content) open_section(tr, d);
}

static void html_both(Buf *b, const char *en, const char *zh);

static const char *held_close(const Trace *tr) { return is_html(tr) ? "</pre>\n" : "\n```\n\n"; }

// What the lesson printed itself since the last call, into the block
// being gathered, in both languages (it is the same in both).
static void absorb_held(struct TraceDoc *d) {
    fflush(d->held);
    if (d->held_used >= d->held_len) return;
    buf_appendn(&d->pre_en, d->held_text + d->held_used, d->held_len - d->held_used);
    buf_appendn(&d->pre_zh, d->held_text + d->held_used, d->held_len - d->held_used);
    d->held_used = d->held_len;
}

// The block gathered since the last event, as preformatted text, in both
// languages where they differ; text printed in several pieces with nothing
// shown between them (a table printed a row at a time) stays one block.
static void flush_held(Trace *tr, struct TraceDoc *d) {
    absorb_held(d);
    if (!d->pre_en.len && !d->pre_zh.len) return;
    char *pe = twin_pick(d->pre_en.s ? d->pre_en.s : "", d->pre_en.len, LANG_EN);
    char *pz = twin_pick(d->pre_zh.s ? d->pre_zh.s : "", d->pre_zh.len, LANG_ZH);
    char *en = pe ? block_text(pe, strlen(pe)) : NULL, *zh = pz ? block_text(pz, strlen(pz)) : NULL;
    free(pe);
    free(pz);
    if (!en || !zh || d->pre_en.failed || d->pre_zh.failed) d->page.failed = 1;   // out of memory: no page
    d->pre_en.len = d->pre_zh.len = 0;
    if (!en || !zh || (!*en && !*zh)) {
        free(en);
        free(zh);
        return;
    }
    const char *close = held_close(tr);
    if (d->held_end && d->held_end == d->page.len && d->page.len >= strlen(close)) {
        d->page.len -= strlen(close);   // reopen the block above
        d->page.s[d->page.len] = '\0';
        buf_append(&d->page, "\n");
    } else {
        end_table(tr, d);
        if (d->new_step || !d->section_open) {   // text said after a step began is on its slide
            step_section(tr, d);
            d->new_step = 0;
        }
        d->content = 1;
        buf_append(&d->page, is_html(tr) ? "<pre class=\"out\">" : "```text\n");
    }
    if (is_html(tr)) html_both(&d->page, en, zh);
    else buf_append(&d->page, tr->lang == LANG_ZH ? zh : en);
    free(en);
    free(zh);
    buf_append(&d->page, close);
    d->held_end = d->page.len;
}

// Before each event that shows something: the lesson's own text, the end of
// a table, and a new section where a step began.
static struct TraceDoc *before(Trace *tr, int keep_table) {
    struct TraceDoc *d = tr->doc_state;
    flush_held(tr, d);
    if (keep_table && d->table_cols) return d;   // the rows of a table stay together
    end_table(tr, d);
    if (d->new_step || !d->section_open) {
        step_section(tr, d);
        d->new_step = 0;
    }
    d->content = 1;
    return d;
}

// <span class="en">en</span><span class="zh">zh</span>, or en alone when
// both say the same.
static void html_both(Buf *b, const char *en, const char *zh) {
    if (!zh || !strcmp(en, zh)) {
        html(b, en);
        return;
    }
    buf_append(b, "<span class=\"en\" lang=\"en\">");
    html(b, en);
    buf_append(b, "</span><span class=\"zh\" lang=\"zh-CN\">");
    html(b, zh);
    buf_append(b, "</span>");
}

// The text of a trace event or of a lesson (pairs of both languages in it,
// or one language), each language its own, in spans where they differ.
static void html_twin(struct TraceDoc *d, Buf *b, const char *en, const char *zh) {
    char *e, *z;
    if (twin_texts(d, en, zh, &e, &z)) return;
    html_both(b, e, z);
    free(e);
    free(z);
}

// The text of the trace's language, plain: for Markdown, which holds one.
static const char *lang_text(const Trace *tr, const char *en, const char *zh) {
    return tr->lang == LANG_ZH && zh ? zh : en;
}

// The same text in Markdown: the trace's language only.
static void md_twin(Trace *tr, Buf *b, const char *en, const char *zh, int cell) {
    const char *s = lang_text(tr, en, zh);
    char *t = twin_pick(s, strlen(s), tr->lang);
    if (!t) {
        b->failed = 1;
        return;
    }
    md_text(b, t, strlen(t), cell);
    free(t);
}

// ----------------------------------------------------------------------------
// Events

void trace_doc_heading(Trace *tr, const char *en, const char *zh) {
    struct TraceDoc *d = tr->doc_state;
    flush_held(tr, d);
    end_table(tr, d);
    step_section(tr, d);
    d->new_step = 0;
    int first = d->headings++ == 0;
    if (is_html(tr)) {
        buf_append(&d->page, first ? "<h1>" : "<h2>");
        html_twin(d, &d->page, en, zh);
        buf_append(&d->page, first ? "</h1>\n" : "</h2>\n");
    } else {
        buf_append(&d->page, first ? "# " : "## ");
        md_twin(tr, &d->page, en, zh, 0);
        buf_append(&d->page, "\n\n");
    }
}

// Text lined up in columns with spaces (a row of a table that a lesson
// says), which a paragraph in a proportional font would scramble.
static int lined_up(const char *s) { return !strncmp(s, "  ", 2) || strstr(s, "   ") != NULL; }

// A paragraph of narration: en and zh each of one language.
static void say_paragraph(Trace *tr, const char *en, const char *zh) {
    struct TraceDoc *d = before(tr, 0);
    size_t ne, nz;
    const char *se = trimmed(en, strlen(en), &ne);
    const char *sz = trimmed(zh, strlen(zh), &nz);
    if (!ne && !nz) return;
    if (!is_html(tr)) {
        md_text(&d->page, tr->lang == LANG_ZH ? sz : se, tr->lang == LANG_ZH ? nz : ne, 0);
        buf_append(&d->page, "\n\n");
        return;
    }
    buf_append(&d->page, "<p>");
    if (ne == nz && !memcmp(se, sz, ne)) {
        html_text(&d->page, se, ne);
    } else {
        buf_append(&d->page, "<span class=\"en\" lang=\"en\">");
        html_text(&d->page, se, ne);
        buf_append(&d->page, "</span><span class=\"zh\" lang=\"zh-CN\">");
        html_text(&d->page, sz, nz);
        buf_append(&d->page, "</span>");
    }
    buf_append(&d->page, "</p>\n");
}

void trace_doc_say(Trace *tr, const char *en, const char *zh) {
    char *e, *z;
    if (twin_texts(tr->doc_state, en, zh, &e, &z)) return;
    if (lined_up(e)) {   // preformatted, with the lesson's own text around it
        struct TraceDoc *d = tr->doc_state;
        absorb_held(d);
        buf_printf(&d->pre_en, "%s\n", e);
        buf_printf(&d->pre_zh, "%s\n", z);
    } else {
        say_paragraph(tr, e, z);
    }
    free(e);
    free(z);
}

void trace_doc_step(Trace *tr) {
    struct TraceDoc *d = tr->doc_state;
    flush_held(tr, d);
    d->new_step = 1;
}

void trace_doc_svg(Trace *tr, const char *svg, unsigned roles) {
    if (!is_html(tr)) return;
    struct TraceDoc *d = before(tr, 0);
    d->row_roles |= roles;
    buf_append(&d->page, "<figure class=\"pic\">\n");
    buf_append(&d->page, svg);
    buf_append(&d->page, "</figure>\n");
}

void trace_doc_textval(Trace *tr, const char *text) {
    struct TraceDoc *d = before(tr, 0);
    if (is_html(tr)) {
        buf_append(&d->page, "<pre class=\"out\">");
        html_twin(d, &d->page, text, NULL);
        buf_append(&d->page, "</pre>\n");
    } else {
        char *t = twin_pick(text, strlen(text), tr->lang);
        buf_append(&d->page, "```text\n");
        if (t) buf_append_shown(&d->page, t);
        else d->page.failed = 1;
        free(t);
        buf_append(&d->page, "\n```\n\n");
    }
}

// ----------------------------------------------------------------------------
// Tensors

// A cell as PyTorch would print it: fixed decimals, or scientific notation
// when the tensor's magnitudes span more than 1000x or reach 1e8 (the rule
// of tensor.c); whole numbers and truth values as they are.
static void cell_text(char *out, size_t size, float v, int precision, int sci, TraceKind kind) {
    if (isnan(v)) snprintf(out, size, "nan");
    else if (isinf(v)) snprintf(out, size, v < 0 ? "-inf" : "inf");
    else if (kind == TRACE_BOOL) snprintf(out, size, v != 0 ? "True" : "False");
    else if (kind == TRACE_INT) snprintf(out, size, "%lld", (long long)v);
    else if (sci) snprintf(out, size, "%.*e", precision, (double)v);
    else snprintf(out, size, "%.*f", precision, (double)v);
}

// The exact value, as JSON writes it.
static void exact_text(char *out, size_t size, float v) {
    if (isnan(v)) snprintf(out, size, "nan");
    else if (isinf(v)) snprintf(out, size, v < 0 ? "-inf" : "inf");
    else snprintf(out, size, "%.9g", (double)v);
}

static int sci_mode(const float *x, size_t n) {
    double amax = 0, amin = INFINITY;
    for (size_t i = 0; i < n; i++) {
        double a = fabs((double)x[i]);
        if (!isfinite(a) || a == 0) continue;
        if (a > amax) amax = a;
        if (a < amin) amin = a;
    }
    if (amax == 0) return 0;
    return amax / amin > 1000.0 || amax > 1.0e8 || amin < 1.0e-4;
}

static void hex_colour(char *out, size_t size, int index) {
    int rgb[3];
    trace_palette_rgb(index, rgb);
    snprintf(out, size, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

enum { MASKED_BG = 252, MASKED_FG = 240 };   // trace.c's grey for -inf / masked cells

// style="background:..;color:.." of a heat-map cell.
static void heat_style(Buf *b, TraceHeat heat, float v, float lo, float hi) {
    int bg, fg;
    if (!isfinite(v)) {
        bg = MASKED_BG, fg = MASKED_FG;
    } else {
        int n;
        const int *pal = trace_heat_palette(heat, &n);
        bg = pal[trace_heat_index(heat, v, lo, hi)];
        fg = trace_text_on(bg);
    }
    char cb[8], cf[8];
    hex_colour(cb, sizeof cb, bg);
    hex_colour(cf, sizeof cf, fg);
    buf_printf(b, " style=\"background:%s;color:%s\"", cb, cf);
}

// The legend under a heat map: the palette between its end values, and the
// grey of masked cells.
static void html_legend(Trace *tr, Buf *b, TraceHeat heat, const float *x, size_t n) {
    float m = 0;
    int masked = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) masked = 1;
        else if (fabsf(x[i]) > m) m = fabsf(x[i]);
    }
    int k;
    const int *pal = trace_heat_palette(heat, &k);
    buf_append(b, "<p class=\"legend\">");
    html_both(b, "colour: ", "颜色：");
    if (heat == HEAT_PROBS) buf_append(b, "0 ");
    else buf_printf(b, "%.*f ", tr->precision, -(double)m);
    for (int i = 0; i < k; i++) {
        char c[8];
        hex_colour(c, sizeof c, pal[i]);
        buf_printf(b, "<span class=\"sw\" style=\"background:%s\">&#160;</span>", c);
    }
    if (heat == HEAT_PROBS) {
        buf_append(b, " 1 ");
        html_both(b, "(weights: fixed scale 0 to 1)", "（权重：固定刻度 0 到 1）");
    } else {
        buf_printf(b, " %.*f ", tr->precision, (double)m);
        html_both(b, "(scores: blue below 0, white 0, red above)", "（分数：蓝色小于 0，白色为 0，红色大于 0）");
    }
    if (masked) {
        char cb[8], cf[8];
        hex_colour(cb, sizeof cb, MASKED_BG);
        hex_colour(cf, sizeof cf, MASKED_FG);
        buf_printf(b, "; <span class=\"sw\" style=\"background:%s;color:%s\">-inf</span> ", cb, cf);
        html_both(b, "masked", "被掩码");
    }
    buf_append(b, "</p>\n");
}

// The rows of a tensor as the cache sees them (trace_cache_rows): the first
// old are how, the others ROW_NEW; how ROW_PLAIN: none.
typedef struct {
    int old;
    TraceRowRole how;
} RowRoles;

static TraceRowRole row_role(const RowRoles *roles, int r) {
    if (!roles || roles->how == ROW_PLAIN) return ROW_PLAIN;
    return r < roles->old ? roles->how : ROW_NEW;
}

// One 2-D slice (rows, cols) of a tensor as a table; in HTML, each row of
// roles gets its class (trace_deck.c), and *seen the bit of its role.
static void slice_table(Trace *tr, Buf *b, const float *x, int rows, int cols, const char *const *labels,
                        TraceHeat heat, TraceKind kind, int sci, float lo, float hi, const RowRoles *roles,
                        unsigned *seen) {
    char cell[64];
    if (is_html(tr)) {
        buf_append(b, "<table>\n<thead><tr><th class=\"tok\">");
        html_both(b, labels ? "token" : "row", labels ? "token" : "行");
        buf_append(b, "</th>");
        for (int c = 0; c < cols; c++) buf_printf(b, "<th>%d</th>", c);
        buf_append(b, "</tr></thead>\n<tbody>\n");
        for (int r = 0; r < rows; r++) {
            const char *cls = trace_deck_row_class(row_role(roles, r));
            if (cls) {
                buf_printf(b, "<tr class=\"%s\"><th class=\"tok\">", cls);
                *seen |= 1u << row_role(roles, r);
            } else {
                buf_append(b, "<tr><th class=\"tok\">");
            }
            if (labels) html_twin(tr->doc_state, b, labels[r], NULL);
            else buf_printf(b, "%d", r);
            buf_append(b, "</th>");
            for (int c = 0; c < cols; c++) {
                float v = x[(size_t)r * cols + c];
                exact_text(cell, sizeof cell, v);
                buf_printf(b, "<td title=\"%s\"", cell);
                if (heat != HEAT_NONE) heat_style(b, heat, v, lo, hi);
                cell_text(cell, sizeof cell, v, tr->precision, sci, kind);
                buf_printf(b, ">%s</td>", cell);
            }
            buf_append(b, "</tr>\n");
        }
        buf_append(b, "</tbody>\n</table>\n");
        return;
    }
    buf_append(b, labels ? lang_text(tr, "| token |", "| token |") : lang_text(tr, "| row |", "| 行 |"));
    for (int c = 0; c < cols; c++) buf_printf(b, " %d |", c);
    buf_append(b, "\n|:---|");
    for (int c = 0; c < cols; c++) buf_append(b, "---:|");
    buf_append(b, "\n");
    for (int r = 0; r < rows; r++) {
        buf_append(b, "| ");
        if (labels) md_twin(tr, b, labels[r], NULL, 1);
        else buf_printf(b, "%d", r);
        buf_append(b, " |");
        for (int c = 0; c < cols; c++) {
            cell_text(cell, sizeof cell, x[(size_t)r * cols + c], tr->precision, sci, kind);
            buf_printf(b, " %s |", cell);
        }
        buf_append(b, "\n");
    }
    buf_append(b, "\n");
}

static void shape_caption(Trace *tr, Buf *b, const char *name, const Tensor *t) {
    if (is_html(tr)) html_twin(tr->doc_state, b, name, NULL);
    else md_twin(tr, b, name, NULL, 0);
    buf_append(b, " (");
    for (int d = 0; d < t->ndim; d++) buf_printf(b, d ? ", %d" : "%d", t->shape[d]);
    buf_append(b, t->ndim == 1 ? ",)" : ")");
}

void trace_doc_tensor(Trace *tr, const char *shown, const char *code, const Tensor *t, const char *const *rows,
                      TraceHeat heat, TraceKind kind, int old, TraceRowRole how) {
    struct TraceDoc *d = before(tr, 0);
    Buf *b = &d->page;
    size_t n = tensor_numel(t);
    if (heat != HEAT_NONE) tr->heat_maps++;
    if (kind != TRACE_REAL) heat = HEAT_NONE;
    int sci = kind == TRACE_REAL && sci_mode(t->data, n);
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(t->data[i])) lo = fminf(lo, t->data[i]), hi = fmaxf(hi, t->data[i]);
    // A 2-D view of each slice: (rows, cols) for a matrix, one row for a
    // vector or a scalar, and (shape[-2], shape[-1]) slices of anything larger.
    int cols = t->ndim >= 1 ? t->shape[t->ndim - 1] : 1;
    int nrows = t->ndim >= 2 ? t->shape[t->ndim - 2] : 1;
    size_t per = (size_t)nrows * (size_t)cols;
    size_t slices = per ? n / per : 0;
    const char *const *labels = rows && t->ndim == 2 ? rows : NULL;
    if (is_html(tr)) {
        buf_append(b, "<figure>\n");
        if (code) {
            buf_append(b, "<pre class=\"code\"><code>&gt;&gt;&gt; ");
            html_twin(d, b, code, NULL);
            buf_append(b, "</code></pre>\n");
        }
        buf_append(b, "<figcaption>");
        shape_caption(tr, b, shown, t);
        buf_append(b, "</figcaption>\n");
    } else {
        if (code) {
            buf_append(b, "```python\n>>> ");
            char *c = twin_pick(code, strlen(code), tr->lang);
            if (c) buf_append(b, c);
            else b->failed = 1;
            free(c);
            buf_append(b, "\n```\n\n");
        }
        buf_append(b, "**");
        shape_caption(tr, b, shown, t);
        buf_append(b, "**\n\n");
    }
    for (size_t s = 0; s < slices; s++) {
        if (slices > 1) {
            // name[i, j] of the leading indices
            int at[TENSOR_MAX_DIMS] = {0};
            size_t rest = s;
            for (int dim = t->ndim - 3; dim >= 0; dim--) {
                at[dim] = (int)(rest % (size_t)t->shape[dim]);
                rest /= (size_t)t->shape[dim];
            }
            char idx[64] = "";
            for (int dim = 0; dim <= t->ndim - 3; dim++)
                snprintf(idx + strlen(idx), sizeof idx - strlen(idx), dim ? ", %d" : "%d", at[dim]);
            if (is_html(tr)) {
                buf_append(b, "<p>");
                html_twin(d, b, shown, NULL);
                buf_printf(b, "[%s]</p>\n", idx);
            } else {
                md_twin(tr, b, shown, NULL, 0);
                buf_printf(b, "\\[%s\\]\n\n", idx);
            }
        }
        RowRoles roles = {old, how};
        slice_table(tr, b, t->data + s * per, nrows, cols, labels, heat, kind, sci, lo, hi,
                    t->ndim == 2 ? &roles : NULL, &d->row_roles);
    }
    if (is_html(tr)) {
        if (heat != HEAT_NONE) html_legend(tr, b, heat, t->data, n);
        buf_append(b, "</figure>\n");
    }
}

// ----------------------------------------------------------------------------
// Lines of text in both languages

void trace_doc_lines_begin(Trace *tr) {
    struct TraceDoc *d = tr->doc_state;
    flush_held(tr, d);
    d->busy = 1;
    d->pass = 0;
    d->lang = tr->lang;
    tr->lang = LANG_EN;
}

// What was printed into the buffer since the last call (malloc'd).
static char *take_held(struct TraceDoc *d) {
    fflush(d->held);
    size_t n = d->held_len - d->held_used;
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, d->held_text + d->held_used, n);
        s[n] = '\0';
    }
    d->held_used = d->held_len;
    return s;
}

// Each line without its indent, a hard break after it.
static void md_lines(Buf *b, const char *s) {
    size_t n;
    s = trimmed(s, strlen(s), &n);
    if (!n) return;
    for (const char *p = s; p < s + n;) {
        const char *nl = memchr(p, '\n', (size_t)(s + n - p));
        const char *end = nl ? nl : s + n;
        while (p < end && *p == ' ') p++;
        if (p < end) {
            md_text(b, p, (size_t)(end - p), 0);
            buf_append(b, "  \n");
        }
        p = nl ? nl + 1 : end;
    }
    buf_append(b, "\n");
}

int trace_doc_lines_next(Trace *tr) {
    struct TraceDoc *d = tr->doc_state;
    if (d->pass == 0) {
        d->lines_en = take_held(d);
        d->pass = 1;
        tr->lang = LANG_ZH;
        return 1;
    }
    char *zh = take_held(d);
    char *en = d->lines_en;
    d->lines_en = NULL;
    tr->lang = d->lang;
    d->busy = 0;
    // Each pass read in its language: a name the lesson composed has both.
    char *pe = en ? twin_pick(en, strlen(en), LANG_EN) : NULL, *pz = zh ? twin_pick(zh, strlen(zh), LANG_ZH) : NULL;
    if (!pe || !pz) d->page.failed = 1;
    char *be = block_text(pe ? pe : "", pe ? strlen(pe) : 0), *bz = block_text(pz ? pz : "", pz ? strlen(pz) : 0);
    free(pe);
    free(pz);
    if (be && bz && (*be || *bz)) {
        before(tr, 0);
        // Lines that follow lines with nothing between them join their block.
        const char *close = is_html(tr) ? "</pre>\n" : "\n";
        int join = d->lines_end && d->lines_end == d->page.len && d->page.len >= strlen(close);
        if (join) {
            d->page.len -= strlen(close);
            d->page.s[d->page.len] = '\0';
        }
        if (is_html(tr)) {
            buf_append(&d->page, join ? "\n" : "<pre class=\"lines\">");
            html_both(&d->page, be, bz);
            buf_append(&d->page, "</pre>\n");
        } else {
            md_lines(&d->page, tr->lang == LANG_ZH ? bz : be);
        }
        d->lines_end = d->page.len;
    }
    free(be);
    free(bz);
    free(en);
    free(zh);
    return 0;
}

// ----------------------------------------------------------------------------
// Tables

// ----------------------------------------------------------------------------
// Bars of a chart (lessons 4 and 5 draw them in text with █, ░ and ·)

static const char *const BAR_FULL = "\u2588", *const BAR_LIGHT = "\u2591", *const BAR_EMPTY = "\u00b7";
// The course's colours (chart_svg.h): without the cache (█) and with it (░).
static const char *const BAR_FULL_COLOUR = CHART_NO_CACHE, *const BAR_LIGHT_COLOUR = CHART_CACHE;
enum { BAR_PX = 6 };   // pixels a terminal column of the bar

// A cell that is a bar (only the three characters) as an SVG bar whose
// track is width columns long; returns 0 when it is no bar.
static int bar_cell(Buf *b, const char *s, int width) {
    int full = 0, light = 0, empty = 0;
    for (const char *p = s; *p;) {
        if (!strncmp(p, BAR_FULL, strlen(BAR_FULL))) full++, p += strlen(BAR_FULL);
        else if (!strncmp(p, BAR_LIGHT, strlen(BAR_LIGHT))) light++, p += strlen(BAR_LIGHT);
        else if (!strncmp(p, BAR_EMPTY, strlen(BAR_EMPTY))) empty++, p += strlen(BAR_EMPTY);
        else return 0;
    }
    int n = full + light + empty, w;
    if (!n) return 0;
    if (width < n) width = n;
    w = width * BAR_PX;
    buf_printf(b, "<svg class=\"bar\" width=\"%d\" height=\"14\" viewBox=\"0 0 %d 14\" role=\"img\">"
               "<rect x=\"0.5\" y=\"1.5\" width=\"%d\" height=\"11\" fill=\"%s\" stroke=\"#888\"></rect>",
               w + 1, w + 1, w, CHART_TRACK);
    if (full)
        buf_printf(b, "<rect x=\"0.5\" y=\"1.5\" width=\"%d\" height=\"11\" fill=\"%s\"></rect>", full * BAR_PX, BAR_FULL_COLOUR);
    if (light)
        buf_printf(b, "<rect x=\"%d.5\" y=\"1.5\" width=\"%d\" height=\"11\" fill=\"%s\"></rect>", full * BAR_PX,
                   light * BAR_PX, BAR_LIGHT_COLOUR);
    buf_append(b, "</svg>");
    return 1;
}

// A head's text, its bar characters drawn in the bars' colours.
static void html_head_text(Buf *b, const char *s) {
    for (const char *p = s; *p;) {
        const char *f = strstr(p, BAR_FULL), *l = strstr(p, BAR_LIGHT), *next = f && (!l || f < l) ? f : l;
        if (!next) {
            html(b, p);
            return;
        }
        html_text(b, p, (size_t)(next - p));
        buf_printf(b, "<span class=\"sw\" style=\"color:%s\">%s</span>", next == f ? BAR_FULL_COLOUR : BAR_LIGHT_COLOUR,
                   BAR_FULL);
        p = next + strlen(next == f ? BAR_FULL : BAR_LIGHT);
    }
}

// e and z, each of one language, each put by put, in spans where they differ.
static void html_spans(Buf *b, const char *e, const char *z, void (*put)(Buf *, const char *)) {
    if (!strcmp(e, z)) {
        put(b, e);
    } else {
        buf_append(b, "<span class=\"en\" lang=\"en\">");
        put(b, e);
        buf_append(b, "</span><span class=\"zh\" lang=\"zh-CN\">");
        put(b, z);
        buf_append(b, "</span>");
    }
}

static void html_head(struct TraceDoc *d, Buf *b, const char *en, const char *zh) {
    char *e, *z;
    if (twin_texts(d, en, zh, &e, &z)) return;
    html_spans(b, e, z, html_head_text);
    free(e);
    free(z);
}

void trace_doc_table_head(Trace *tr, int ncols, const char *const *en, const char *const *zh, const int *right,
                          const int *width) {
    struct TraceDoc *d = before(tr, 0);
    Buf *b = &d->page;
    if (is_html(tr)) {
        buf_append(b, "<table>\n<thead><tr>");
        for (int i = 0; i < ncols; i++) {
            buf_append(b, right[i] ? "<th>" : "<th class=\"l\">");
            html_head(d, b, en[i], zh ? zh[i] : NULL);
            buf_append(b, "</th>");
        }
        buf_append(b, "</tr></thead>\n<tbody>\n");
    } else {
        buf_append(b, "|");
        for (int i = 0; i < ncols; i++) {
            buf_append(b, " ");
            md_twin(tr, b, en[i], zh ? zh[i] : NULL, 1);
            buf_append(b, " |");
        }
        buf_append(b, "\n|");
        for (int i = 0; i < ncols; i++) buf_append(b, right[i] ? "---:|" : ":---|");
        buf_append(b, "\n");
    }
    d->table_cols = ncols > 0 ? ncols : 1;
    for (int i = 0; i < ncols && i < 64; i++) d->table_left[i] = !right[i], d->table_width[i] = width[i];
}

void trace_doc_table_row(Trace *tr, int ncols, const char *const *cells) {
    struct TraceDoc *d = before(tr, 1);
    Buf *b = &d->page;
    if (!d->table_cols) {   // a row without a head: a table of its own
        d->table_cols = ncols;
        memset(d->table_left, 0, sizeof d->table_left);
        memset(d->table_width, 0, sizeof d->table_width);
        if (is_html(tr)) buf_append(b, "<table>\n<tbody>\n");
        else {
            buf_append(b, "|");
            for (int i = 0; i < ncols; i++) buf_append(b, "   |");
            buf_append(b, "\n|");
            for (int i = 0; i < ncols; i++) buf_append(b, "---|");
            buf_append(b, "\n");
        }
    }
    if (is_html(tr)) {
        buf_append(b, "<tr>");
        for (int i = 0; i < ncols; i++) {
            buf_append(b, i < 64 && d->table_left[i] ? "<td class=\"l\">" : "<td>");
            if (!bar_cell(b, cells[i], i < 64 ? d->table_width[i] : 0)) html_twin(d, b, cells[i], NULL);
            buf_append(b, "</td>");
        }
        buf_append(b, "</tr>\n");
    } else {
        buf_append(b, "|");
        for (int i = 0; i < ncols; i++) {
            buf_append(b, " ");
            md_twin(tr, b, cells[i], NULL, 1);
            buf_append(b, " |");
        }
        buf_append(b, "\n");
    }
}

// ----------------------------------------------------------------------------
// Opening and closing

void trace_doc_compared(Trace *tr, int identical) {
    tr->doc_state->compared++;
    tr->doc_state->identical += identical != 0;
}

// The model files the run read, each with its own checksum (provenance.h),
// so that a page can be matched with the weights that made it.
static void page_footer_models(Buf *b) {
    for (int i = 0; i < provenance_count(); i++) {
        const ProvenanceFile *f = provenance_get(i);
        char en[64], zh[64];
        html_both(b, "weights ", "权重 ");
        buf_append(b, "<code>");
        html(b, f->path);
        buf_append(b, "</code>");
        snprintf(en, sizeof en, " (Adler-32 %08x) · ", (unsigned)f->adler32);
        snprintf(zh, sizeof zh, "（Adler-32 %08x）· ", (unsigned)f->adler32);
        html_both(b, en, zh);
    }
}

// The footer: what made the page (kvdemo's version, the command line, the
// model files and their checksums, the machine) and how many of its
// comparisons were identical bit for bit.
static void page_footer(Trace *tr, struct TraceDoc *d) {
    Buf *b = &d->page;
    struct utsname u;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    buf_append(b, "<footer class=\"prov\"><p>");
    if (tr->version) {
        buf_append(b, "kvdemo ");
        html(b, tr->version);
        buf_append(b, " · ");
    }
    if (tr->argc > 0) {
        buf_append(b, "<code>kvdemo");
        for (int i = 1; i < tr->argc; i++) {
            buf_append(b, " ");
            html(b, tr->argv[i]);
        }
        buf_append(b, "</code> · ");
    }
    page_footer_models(b);
    if (!uname(&u)) html(b, u.machine);
    char en[160], zh[160];
    snprintf(en, sizeof en, ", %ld cores · ", cores);
    snprintf(zh, sizeof zh, "，%ld 个核 · ", cores);
    html_both(b, en, zh);
    snprintf(en, sizeof en, "%d of %d comparisons identical bit for bit", d->identical, d->compared);
    snprintf(zh, sizeof zh, "%d 次比较中 %d 次逐位相同", d->compared, d->identical);
    html_both(b, en, zh);
    buf_append(b, "</p></footer>\n");
}

// Text of a doc page: `code` as <code>.
static void html_md_text(Buf *b, const char *s) {
    int code = 0;
    for (const char *p = s; *p;) {
        const char *tick = strchr(p, '`'), *end = tick ? tick : p + strlen(p);
        html_text(b, p, (size_t)(end - p));
        if (!tick) break;
        buf_append(b, (code = !code) ? "<code>" : "</code>");
        p = tick + 1;
    }
    if (code) buf_append(b, "</code>");
}

// Markdown's last slide: the questions of the page's language (English
// where the Chinese page has fewer), each answer indented under its item.
static void questions_md(Trace *tr, struct TraceDoc *d, const Question *en, int ne, const Question *zh, int nz) {
    int in_zh = tr->lang == LANG_ZH && nz >= ne;
    const Question *q = in_zh ? zh : en;
    open_section(tr, d);
    buf_append(&d->page, in_zh ? "## 课堂提问\n\n" : "## Questions for the class\n\n");
    for (int i = 0; i < ne; i++) {
        buf_printf(&d->page, "%d. %s\n", i + 1, q[i].question);
        for (const char *p = q[i].answer; *p;) {
            const char *eol = strchr(p, '\n');
            size_t n = eol ? (size_t)(eol - p) : strlen(p);
            if (n) buf_printf(&d->page, "   %.*s\n", (int)n, p);
            p += n + (eol != NULL);
        }
    }
    buf_append(&d->page, "\n");
}

// The last slide: the class questions of the lesson's doc page, each
// answer shown on a click (<details>, which needs no script).
static void questions_slide(Trace *tr, struct TraceDoc *d) {
    enum { MAX_QUESTIONS = 16 };
    Question en[MAX_QUESTIONS], zh[MAX_QUESTIONS];
    if (!tr->lesson) return;
    int ne = questions_read(tr->lang, en, MAX_QUESTIONS, tr->lesson, 0), nz = questions_read(tr->lang, zh, MAX_QUESTIONS, tr->lesson, 1);
    if (ne && !is_html(tr)) {
        questions_md(tr, d, en, ne, zh, nz);
    } else if (ne) {
        open_section(tr, d);
        buf_append(&d->page, "<h2>");
        html_both(&d->page, "Questions for the class", "课堂提问");
        buf_append(&d->page, "</h2>\n<ol class=\"questions\">\n");
        for (int i = 0; i < ne; i++) {
            buf_append(&d->page, "<li><details><summary>");
            html_spans(&d->page, en[i].question, i < nz ? zh[i].question : en[i].question, html_md_text);
            buf_append(&d->page, "</summary>\n<p>");
            html_spans(&d->page, en[i].answer, i < nz ? zh[i].answer : en[i].answer, html_md_text);
            buf_append(&d->page, "</p></details></li>\n");
        }
        buf_append(&d->page, "</ol>\n");
    }
    questions_free(en, ne);
    questions_free(zh, nz);
}

int trace_doc_open(Trace *tr) {
    struct TraceDoc *d = calloc(1, sizeof *d);
    if (!d) return -1;
    buf_init(&d->page);
    buf_init(&d->pre_en);
    buf_init(&d->pre_zh);
    d->held = open_memstream(&d->held_text, &d->held_len);
    if (!d->held) {
        free(d);
        return -1;
    }
    tr->doc_state = d;
    tr->doc_out = tr->out;
    tr->out = d->held;
    page_start(tr, d);
    return 0;
}

int trace_doc_close(Trace *tr, int rc) {
    struct TraceDoc *d = tr->doc_state;
    if (!d) return rc;
    flush_held(tr, d);
    end_table(tr, d);
    questions_slide(tr, d);
    if (is_html(tr)) {
        close_section(d);
        page_footer(tr, d);
        buf_printf(&d->page, "<script>\n%s</script>\n</body>\n</html>\n", TRACE_DECK_SCRIPT);
    }
    tr->out = tr->doc_out;
    tr->doc_state = NULL;
    fclose(d->held);
    free(d->held_text);
    free(d->lines_en);
    buf_free(&d->pre_en);
    buf_free(&d->pre_zh);
    while (d->twins) {
        struct TwinText *t = d->twins;
        d->twins = t->next;
        free(t);
    }
    char *page = buf_take(&d->page);
    free(d);
    // A lesson that failed leaves nothing on standard output: its error is
    // on stderr, and a redirected file is not left half-written.
    if (!rc && !page) {
        fileio_error(tr->lang, "out of memory while writing the document", "写文档时内存不足");
        rc = 1;
    }
    if (!rc) {
        // A write that fails is said once at exit (main.c), with its reason:
        // the page is larger than the buffer, so fputs itself meets it.
        if ((fputs(page, tr->out) == EOF || fflush(tr->out) != 0) && tr->out == stdout) fileio_note_stdout_error(errno);
    }
    free(page);
    return rc;
}
