// utf8 — one character at a time between UTF-8 bytes and Unicode code
// points, for the tokenizers of the char GPT, the LLaMA model and training.
#ifndef KVDEMO_UTF8_H
#define KVDEMO_UTF8_H

#include <stddef.h>
#include <stdint.h>

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

#endif
