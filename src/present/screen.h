// screen — a lesson's text fitted to a projector: --step and --width.
//
// While a screen is open, the trace (and any lesson that prints a table
// itself) writes into memory; the screen takes that text line by line, wraps
// each line at the width (at a space when there is one), and writes it to
// the terminal. With --step on a terminal it also pauses: when a page is full
// ("-- more --", so that nothing scrolls off) and whenever the trace asks
// (after a tensor, a table row, a step). It keeps the text of the last pages,
// so that b at a pause shows the one before again and Enter goes forward
// through them back to where the lesson stands. Without a screen, kvdemo's
// output is byte for byte what it always was.
#ifndef KVDEMO_SCREEN_H
#define KVDEMO_SCREEN_H

#include "buf.h"

#include <stdio.h>

enum { SCREEN_HISTORY = 64 };   // pages kept for b (the oldest are dropped)

typedef struct Screen {
    FILE *term;          // where the fitted text goes (stdout)
    FILE *mem;           // what the trace writes into (open_memstream)
    char *mem_text;      // mem's buffer and its length, as of the last fflush
    size_t mem_len;
    int width;           // columns of a line
    int height;          // lines of a page; 0: no pages (no --step)
    int pausing;         // 1: --step on a terminal: keys, pages, history
    int zh;              // 1: prompts in Chinese
    Buf line;            // the current line, not yet written
    int col;             // columns already written on the current line
    int lines;           // lines written on the current page
    Buf page;            // the current page as it was written
    char *history[SCREEN_HISTORY];   // earlier pages, oldest first
    int n_history;
    int fresh;           // 1 when something was written since the last pause
    int quit;            // 1 after q (or the end of the input) at a pause
} Screen;

// The width and height a screen gets: --width (0: not given), else $COLUMNS,
// else the terminal's size, else 80; $LINES, the terminal's, else 30.
int screen_default_width(int given);
// The columns of a line on the terminal behind fd (STDERR_FILENO for a
// progress line): $COLUMNS (20 or more), else the terminal's, else 80.
int screen_terminal_width(int fd);
int screen_default_height(void);

// Opens a screen writing to term; returns 0, or -1 when memory ran out. The
// trace then writes to s->mem.
int screen_open(Screen *s, FILE *term, int width, int height, int pausing, int zh);
// Takes what was written to s->mem since the last call and shows it (wrapped,
// with a -- more -- pause when a page fills up).
void screen_sync(Screen *s);
// A pause of --step: a prompt, then keys until one that goes on; b goes back
// one page, Enter forward again. new_page 1 clears the terminal afterwards
// (one operation a screen), 0 keeps the page (a table that grows a row a
// key). Returns 1 when the user quit.
int screen_pause(Screen *s, int new_page);
// Shows what is left and frees the screen; term gets its text from now on.
void screen_close(Screen *s);

// Wraps one line (no newline) of text at width columns, the first piece
// starting at column col: at the last space that fits, else between two
// characters; continuation lines keep the line's indentation. ANSI colour
// sequences take no column, East Asian wide characters two. Appends the
// pieces to out, separated by "\n" (no newline after the last); returns the
// column where the last piece ends.
int screen_wrap(Buf *out, const char *text, size_t len, int width, int col);

// The columns text (len bytes) takes on a terminal.
int screen_columns(const char *text, size_t len);

#endif
