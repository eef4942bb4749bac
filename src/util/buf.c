// buf — a growable string, for building printed output before it is written.
#include "buf.h"

#include "utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(Buf *b) { memset(b, 0, sizeof *b); }

void buf_free(Buf *b) {
    free(b->s);
    buf_init(b);
}

static int buf_reserve(Buf *b, size_t extra) {
    if (b->failed) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->failed = 1;
        return 0;
    }
    b->s = s;
    b->cap = cap;
    return 1;
}

void buf_appendn(Buf *b, const char *s, size_t n) {
    if (!buf_reserve(b, n)) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void buf_append(Buf *b, const char *s) { buf_appendn(b, s, strlen(s)); }

void buf_append_shown(Buf *b, const char *s) {
    size_t n = strlen(s), need = utf8_shown(NULL, 0, s, n);
    if (!buf_reserve(b, need)) return;
    utf8_shown(b->s + b->len, need + 1, s, n);
    b->len += need;
}

void buf_vprintf(Buf *b, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n >= 0 && buf_reserve(b, (size_t)n)) {
        vsnprintf(b->s + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
}

void buf_printf(Buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(b, fmt, ap);
    va_end(ap);
}

char *buf_take(Buf *b) {
    if (b->failed) {
        buf_free(b);
        return NULL;
    }
    if (!b->s) buf_append(b, "");
    char *s = b->s;
    buf_init(b);
    return s;
}
