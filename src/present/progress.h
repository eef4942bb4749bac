// progress — one line on a terminal's stderr that says what a long
// computation is doing (as `eval` and `bench` have), drawn in place and
// wiped before the lesson prints again; nothing at all when stderr is a file
// or a pipe, so that logs, scripts and tests stay clean.
#ifndef KVDEMO_PROGRESS_H
#define KVDEMO_PROGRESS_H

typedef struct {
    int tty;       // stderr is a terminal: the only case that draws
    int zh;        // the line in Chinese (--lang zh)
    int shown;     // a line is on the screen, to be wiped
    double last;   // when it was last drawn (timer_now), for progress_line_every
} ProgressLine;

void progress_line_init(ProgressLine *p, int zh);

// Draws the line: the format of p's language (en or zh, same conversions)
// with the arguments.
void progress_line_show(ProgressLine *p, const char *en, const char *zh, ...);

// 1 when the line was last drawn more than a tenth of a second ago (a loop
// of many short steps redraws at most ten times a second).
int progress_line_every(const ProgressLine *p);

// Wipes the line, if one is shown.
void progress_line_clear(ProgressLine *p);

#endif
