// screen — a lesson's text fitted to a projector (--step, --width): lines
// wrapped at the width, pages that pause before they scroll, and the last
// pages kept so that b can show them again.
//
// The trace writes into an open_memstream; every time it has written
// something, screen_sync takes the new bytes, cuts them into lines and
// writes each, wrapped, to the terminal. Keeping the text of each page as it
// was written is all that going back needs: a page is redrawn from it, on a
// cleared terminal. (Lessons run straight through; nothing is recomputed.)
#include "screen.h"

#include "fileio.h"
#include "ttyguard.h"
#include "utf8.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

static const char CLEAR[] = "\x1b[H\x1b[2J";   // cursor home, erase the screen

// ----------------------------------------------------------------------------
// Sizes

static int env_number(const char *name, int min) {
    const char *v = getenv(name);
    int n = v ? atoi(v) : 0;
    return n >= min ? n : 0;
}

int screen_terminal_width(int fd) {
    int n = env_number("COLUMNS", 20);
    if (n) return n;
    struct winsize ws;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
    return 80;
}

int screen_default_width(int given) { return given > 0 ? given : screen_terminal_width(STDOUT_FILENO); }

int screen_default_height(void) {
    int n = env_number("LINES", 5);
    if (n) return n;
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row >= 5) return ws.ws_row;
    return 30;
}

// ----------------------------------------------------------------------------
// Columns and wrapping

// The length in bytes of the character (or ANSI sequence) at text[i], and
// the columns it takes when the line is at column col.
static size_t next_char(const char *text, size_t i, size_t len, int col, int *w) {
    unsigned char c = (unsigned char)text[i];
    if (c == '\x1b') {   // ESC [ ... m: a colour, no column
        size_t j = i + 1;
        while (j < len && text[j] != 'm') j++;
        *w = 0;
        return (j < len ? j + 1 : len) - i;
    }
    if (c == '\t') {
        *w = 8 - col % 8;
        return 1;
    }
    if (c < 0x80) {
        *w = c < 0x20 ? 0 : 1;
        return 1;
    }
    uint32_t cp;
    int n = utf8_decode(&cp, (const unsigned char *)text + i, len - i);
    if (n <= 0) {
        *w = 1;
        return 1;
    }
    char one[5] = {0};
    memcpy(one, text + i, (size_t)n);
    *w = utf8_width(one);
    return (size_t)n;
}

int screen_columns(const char *text, size_t len) {
    int col = 0, w;
    for (size_t i = 0; i < len; i += next_char(text, i, len, col, &w), col += w) {
    }
    return col;
}

int screen_wrap(Buf *out, const char *text, size_t len, int width, int col) {
    size_t lead = 0;
    while (lead < len && text[lead] == ' ') lead++;
    int indent = (int)lead < width / 2 ? (int)lead : 0;
    size_t start = 0;     // the current piece's first byte
    size_t body = lead;   // where it may first break (after its indentation)
    size_t space = 0;     // the last space after body, where it breaks best
    int c = col;
    size_t i = 0;
    while (i < len) {
        int w;
        size_t n = next_char(text, i, len, c, &w);
        if (w > 0 && c + w > width && i > body) {
            if (text[i] == ' ') space = i;   // the line is full just before a space
            size_t end = space > body ? space : i;
            size_t next = end;
            while (space > body && next < len && text[next] == ' ') next++;
            buf_appendn(out, text + start, end - start);
            buf_append(out, "\n");
            for (int k = 0; k < indent; k++) buf_append(out, " ");
            c = indent;
            start = body = i = next;
            space = 0;
            continue;
        }
        if (text[i] == ' ' && i > body) space = i;
        c += w;
        i += n;
    }
    buf_appendn(out, text + start, len - start);
    return c;
}

// ----------------------------------------------------------------------------
// Writing and pausing

static int pause_keys(Screen *s, int new_page, int more);

static void term_write(Screen *s, const char *text, size_t n) {
    if (n && fwrite(text, 1, n, s->term) != n && s->term == stdout) fileio_note_stdout_error(errno);
}

// One line of the terminal: a page that is full pauses first ("-- more --").
static void put_piece(Screen *s, const char *text, size_t n, int newline) {
    if (s->quit) return;
    if (s->col == 0 && s->pausing && s->height > 0 && s->lines >= s->height - 1) {
        if (pause_keys(s, 1, 1)) return;
    }
    term_write(s, text, n);
    buf_appendn(&s->page, text, n);
    s->fresh = 1;
    s->col += screen_columns(text, n);
    if (newline) {
        term_write(s, "\n", 1);
        buf_append(&s->page, "\n");
        s->lines++;
        s->col = 0;
    }
}

// The line kept in s->line, wrapped; newline: it is complete.
static void put_line(Screen *s, int newline) {
    Buf wrapped;
    buf_init(&wrapped);
    buf_append(&wrapped, "");
    screen_wrap(&wrapped, s->line.s ? s->line.s : "", s->line.len, s->width, s->col);
    char *text = buf_take(&wrapped);
    if (!text) {   // out of memory: the line as it is
        put_piece(s, s->line.s ? s->line.s : "", s->line.len, newline);
    } else {
        for (char *p = text;;) {
            char *nl = strchr(p, '\n');
            put_piece(s, p, nl ? (size_t)(nl - p) : strlen(p), nl ? 1 : newline);
            if (!nl) break;
            p = nl + 1;
        }
    }
    free(text);
    buf_free(&s->line);
    buf_init(&s->line);
}

int screen_open(Screen *s, FILE *term, int width, int height, int pausing, int zh) {
    memset(s, 0, sizeof *s);
    s->term = term;
    s->width = width;
    s->height = height;
    s->pausing = pausing;
    s->zh = zh;
    buf_init(&s->line);
    buf_init(&s->page);
    s->mem = open_memstream(&s->mem_text, &s->mem_len);
    return s->mem ? 0 : -1;
}

// The lines of the terminal that text (len bytes, whole lines) takes when
// it starts at column col.
static int wrapped_lines(const Screen *s, const char *text, size_t len) {
    int lines = 0, col = s->col;
    for (size_t i = 0; i < len;) {
        size_t n = 0;
        while (i + n < len && text[i + n] != '\n') n++;
        if (i + n == len) break;   // an open line: counted when it ends
        Buf b;
        buf_init(&b);
        screen_wrap(&b, text + i, n, s->width, col);
        lines++;
        for (size_t k = 0; k < b.len; k++) lines += b.s[k] == '\n';
        buf_free(&b);
        col = 0;
        i += n + 1;
    }
    return lines;
}

void screen_sync(Screen *s) {
    if (fflush(s->mem) != 0) return;
    // What the trace wrote at once (a tensor, a paragraph) stays on one
    // page when it fits on one: a page it would overflow ends first.
    if (s->pausing && s->height > 0 && s->lines > 0 && !s->quit) {
        int need = wrapped_lines(s, s->mem_text, s->mem_len);
        if (s->lines + need > s->height - 1 && need <= s->height - 1 && s->col == 0) pause_keys(s, 1, 1);
    }
    // Taken: the stream starts again at its beginning (its length is then
    // where it stands, as POSIX has it for open_memstream).
    for (size_t i = 0; i < s->mem_len && !s->quit; i++) {
        if (s->mem_text[i] == '\n') put_line(s, 1);
        else buf_appendn(&s->line, s->mem_text + i, 1);
    }
    fseeko(s->mem, 0, SEEK_SET);
    if (fflush(s->term) != 0 && s->term == stdout) fileio_note_stdout_error(errno);
}

// Clears the terminal and shows text (a page kept, or the current one).
static void redraw(Screen *s, const char *text) {
    fputs(CLEAR, s->term);
    fputs(text ? text : "", s->term);
    fflush(s->term);
}

// One key from the terminal (its end: EOF). The arrow keys and Page Up/Down
// send several bytes; they are read whole and read as b (back) or Enter.
static int read_key(void) {
    unsigned char k[8];
    if (read(STDIN_FILENO, k, 1) != 1) return EOF;
    if (k[0] != '\x1b') return k[0];
    struct termios t, quick;
    if (tcgetattr(STDIN_FILENO, &t) != 0) return '\x1b';
    quick = t;
    quick.c_cc[VMIN] = 0;
    quick.c_cc[VTIME] = 1;   // what follows an ESC comes within 0.1 s
    tcsetattr(STDIN_FILENO, TCSANOW, &quick);
    ssize_t n = read(STDIN_FILENO, k + 1, sizeof k - 1);
    tcsetattr(STDIN_FILENO, TCSANOW, &t);
    if (n >= 2 && k[1] == '[' && (k[2] == 'A' || k[2] == 'D' || k[2] == '5')) return 'b';   // up, left, Page Up
    return '\x1b';
}

static void keep_page(Screen *s) {
    char *text = buf_take(&s->page);
    buf_init(&s->page);
    if (!text) return;
    if (s->n_history == SCREEN_HISTORY) {
        free(s->history[0]);
        memmove(s->history, s->history + 1, sizeof s->history[0] * (SCREEN_HISTORY - 1));
        s->n_history--;
    }
    s->history[s->n_history++] = text;
}

// The pause itself: the prompt on stderr (erased again, so that it never
// stays in the scrollback), keys until one goes on. view runs over the kept
// pages; n_history is the page the lesson is on.
static int pause_keys(Screen *s, int new_page, int more) {
    if (!s->pausing || s->quit) return s->quit;
    s->fresh = 0;
    fflush(s->term);
    struct termios saved, raw;
    int have = tcgetattr(STDIN_FILENO, &saved) == 0;
    if (have) {
        raw = saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        // Ctrl-C, SIGTERM or SIGHUP now would leave the shell without echo.
        ttyguard_arm(STDIN_FILENO, &saved);
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    }
    int view = s->n_history;
    for (;;) {
        char prompt[160];
        if (view < s->n_history)
            snprintf(prompt, sizeof prompt, s->zh ? "-- %d/%d  回车  b：往前  q：退出 --" : "-- page %d/%d  Enter  b: back  q: quit --",
                     view + 1, s->n_history + 1);
        else
            snprintf(prompt, sizeof prompt, "%s",
                     more ? (s->zh ? "-- 未完  回车  b：上一屏  q：退出 --" : "-- more --  Enter  b: back  q: quit --")
                          : (s->zh ? "-- 回车：下一步  b：上一屏  q：退出 --" : "-- Enter: next  b: back  q: quit --"));
        // The prompt stays on one line (or erasing it would leave a piece).
        size_t n = 0;
        for (int col = 0, w; prompt[n]; col += w) {
            size_t k = next_char(prompt, n, strlen(prompt), col, &w);
            if (col + w > s->width - 1) break;
            n += k;
        }
        fwrite(prompt, 1, n, stderr);
        fflush(stderr);
        int c = read_key();
        fputs("\r\x1b[K", stderr);
        fflush(stderr);
        if (c == 'q' || c == 'Q' || c == EOF) {
            s->quit = 1;
            break;
        }
        if (c == 'b' || c == 'B') {
            if (view > 0) redraw(s, s->history[--view]);
            continue;
        }
        if (view < s->n_history) {
            view++;
            redraw(s, view < s->n_history ? s->history[view] : s->page.s);
            continue;
        }
        break;
    }
    if (have) {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
        ttyguard_disarm();
    }
    if (!s->quit && new_page) {
        keep_page(s);
        fputs(CLEAR, s->term);
        fflush(s->term);
        s->lines = 0;
        s->col = 0;
    }
    return s->quit;
}

int screen_pause(Screen *s, int new_page) {
    screen_sync(s);
    if (s->line.len) put_line(s, 0);   // a line still open is shown as it is
    return pause_keys(s, new_page, 0);
}

void screen_close(Screen *s) {
    if (!s->quit) {
        screen_sync(s);
        if (s->line.len) put_line(s, 0);
    }
    fclose(s->mem);
    free(s->mem_text);
    buf_free(&s->line);
    buf_free(&s->page);
    for (int i = 0; i < s->n_history; i++) free(s->history[i]);
    if (fflush(s->term) != 0 && s->term == stdout) fileio_note_stdout_error(errno);
    memset(s, 0, sizeof *s);
}
