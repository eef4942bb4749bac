// progress — the terminal's progress line of the long lessons and commands
// (progress.h).
#include "progress.h"

#include "timer.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

void progress_line_init(ProgressLine *p, int zh) {
    *p = (ProgressLine){.tty = isatty(STDERR_FILENO), .zh = zh};
}

void progress_line_show(ProgressLine *p, const char *en, const char *zh, ...) {
    if (!p->tty) return;
    va_list ap;
    va_start(ap, zh);
    fflush(stdout);   // what the lesson printed first stays above the line
    fputs("\r\x1b[K", stderr);
    vfprintf(stderr, p->zh ? zh : en, ap);
    va_end(ap);
    fflush(stderr);
    p->shown = 1;
    p->last = timer_now();
}

int progress_line_every(const ProgressLine *p) {
    return timer_now() - p->last >= 0.1;
}

void progress_line_clear(ProgressLine *p) {
    if (!p->shown) return;
    fputs("\r\x1b[K", stderr);
    fflush(stderr);
    p->shown = 0;
}
