// utf8 — one character at a time between UTF-8 bytes and Unicode code
// points, for the tokenizers of the char GPT, the LLaMA model and training.
#ifndef KVDEMO_UTF8_H
#define KVDEMO_UTF8_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// Decodes the character at the start of s (n bytes available); returns its
// length (1..4), or 0 when the bytes are not valid UTF-8 (overlong, a
// surrogate, beyond U+10FFFF, or cut off by n).
int utf8_decode(uint32_t *cp, const unsigned char *s, size_t n);
// Writes the UTF-8 bytes of code point c (at most 4) to out; returns how many.
int utf8_encode(unsigned char *out, uint32_t c);
// Columns a terminal gives the UTF-8 text s: 2 for East Asian wide and
// full-width characters (天, ，), 1 for the others (invalid bytes count 1).
int utf8_width(const char *s);

// qsort's comparison of two code points (uint32_t), ascending.
int utf8_cmp(const void *a, const void *b);

// Writes s to out (size bytes) fit to quote in a one-line message: its
// first max_chars characters, invalid bytes and control characters (C0,
// DEL and C1) escaped as \xNN, byte by byte, and "..." when there was more.
// Returns out.
const char *utf8_quote(char *out, size_t size, const char *s, int max_chars);

// The character c named for a message, its code point only beside it:
// 'é' (U+00E9), or for one that shows nothing its name: newline (U+000A),
// tab (U+0009), space (U+0020), carriage return, the control character
// U+001B; in Chinese (zh 1) “é”（U+00E9）, 换行符（U+000A）. Returns out.
const char *utf8_name(char *out, size_t size, uint32_t c, int zh);

// Text for a terminal (or a document): s (n bytes) with newlines, tabs and
// CR LF line ends as they are and every other control character (C0, DEL, C1) and every byte
// that is not UTF-8 written as \xNN, so that a model's vocabulary or a data
// file cannot move the cursor, recolour or clear the screen. Text without
// them is unchanged. utf8_shown writes it to out (size bytes, always ended
// by NUL) and returns its whole length, as snprintf does; utf8_put_shown
// writes it to f and returns 0, or EOF when a write failed.
size_t utf8_shown(char *out, size_t size, const char *s, size_t n);
int utf8_put_shown(FILE *f, const char *s, size_t n);

#endif
