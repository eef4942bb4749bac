// buf — a growable string, for building printed output before it is written.
#ifndef KVDEMO_BUF_H
#define KVDEMO_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct {
    char *s;        // NUL-terminated text, or NULL before the first append
    size_t len;     // bytes in s, without the NUL
    size_t cap;     // bytes allocated
    int failed;     // 1 once an allocation failed; later appends do nothing
} Buf;

void buf_init(Buf *b);
void buf_free(Buf *b);
void buf_append(Buf *b, const char *s);
void buf_appendn(Buf *b, const char *s, size_t n);
// s as a terminal should show it: control characters escaped (utf8_shown).
void buf_append_shown(Buf *b, const char *s);
void buf_printf(Buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void buf_vprintf(Buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
// Hands the text over to the caller (who frees it); NULL if anything failed.
char *buf_take(Buf *b);

#endif
