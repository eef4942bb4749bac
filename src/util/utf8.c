// utf8 — one character at a time between UTF-8 bytes and code points.
#include "utf8.h"

#include <stdio.h>
#include <string.h>

int utf8_decode(uint32_t *cp, const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    // 110xxxxx, 1110xxxx, 11110xxx lead 2, 3 and 4 bytes.
    int len = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || (size_t)len > n) return 0;
    uint32_t c = s[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};   // shorter forms are overlong
    if (c < least[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

int utf8_encode(unsigned char *out, uint32_t c) {
    if (c < 0x80) {
        out[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (unsigned char)(0xC0 | c >> 6);
        out[1] = (unsigned char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (unsigned char)(0xE0 | c >> 12);
        out[1] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
        out[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | c >> 18);
    out[1] = (unsigned char)(0x80 | (c >> 12 & 0x3F));
    out[2] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
    out[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

// The wide ranges of Unicode's East Asian Width property, in short: Hangul
// Jamo, CJK radicals to Yi, Hangul syllables, CJK compatibility ideographs,
// vertical and compatibility forms, full-width forms, and planes 2 and 3.
static int wide(uint32_t c) {
    return (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF && c != 0x303F) ||
           (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE30 && c <= 0xFE4F) ||
           (c >= 0xFF00 && c <= 0xFF60) || (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x20000 && c <= 0x3FFFD);
}

int utf8_width(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t left = 0;
    while (p[left]) left++;
    int width = 0;
    while (left > 0) {
        uint32_t c;
        int len = utf8_decode(&c, p, left);
        if (len == 0) len = 1, c = '?';
        width += wide(c) ? 2 : 1;
        p += len;
        left -= (size_t)len;
    }
    return width;
}

int utf8_cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

const char *utf8_quote(char *out, size_t size, const char *s, int max_chars) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), at = 0, used = 0;
    int chars = 0;
    if (size == 0) return out;
    for (; at < n && chars < max_chars; chars++) {
        uint32_t c = 0;
        int len = utf8_decode(&c, p + at, n - at);
        char piece[16];
        int plen;
        if (len == 0 || c < 0x20 || c == 0x7f) {   // an invalid byte, a control character
            len = 1;
            plen = snprintf(piece, sizeof piece, "\\x%02X", p[at]);
        } else if (c >= 0x80 && c <= 0x9f) {   // a C1 control (U+009B is the terminal's CSI): both bytes
            plen = snprintf(piece, sizeof piece, "\\x%02X\\x%02X", p[at], p[at + 1]);
        } else if (c == '"' || c == '\\') {
            plen = snprintf(piece, sizeof piece, "\\%c", (char)c);
        } else {
            memcpy(piece, p + at, (size_t)len);
            plen = len;
        }
        if (used + (size_t)plen + 4 >= size) break;
        memcpy(out + used, piece, (size_t)plen);
        used += (size_t)plen;
        at += (size_t)len;
    }
    if (at < n && used + 4 <= size) {
        memcpy(out + used, "...", 3);
        used += 3;
    }
    out[used] = '\0';
    return out;
}

// The character at p (n bytes left, n > 0) on a terminal: returns its length
// in bytes, and *escape 1 when it must be shown as \xNN each (a control
// character, or a byte that is not UTF-8: one byte), 0 when as it is.
static int shown_char(const unsigned char *p, size_t n, int *escape) {
    uint32_t c;
    int len = utf8_decode(&c, p, n);
    if (len == 0) {
        *escape = 1;
        return 1;
    }
    int crlf = c == '\r' && n > 1 && p[1] == '\n';   // a Windows line end
    *escape = c != '\n' && c != '\t' && !crlf && (c < 0x20 || (c >= 0x7f && c <= 0x9f));
    return len;
}

size_t utf8_shown(char *out, size_t size, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t used = 0;
    for (size_t i = 0; i < n;) {
        int escape, len = shown_char(p + i, n - i, &escape);
        for (int k = 0; k < len; k++) {
            char piece[8];
            int plen = escape ? snprintf(piece, sizeof piece, "\\x%02X", p[i + k]) : 1;
            if (!escape) piece[0] = (char)p[i + k];
            for (int j = 0; j < plen; j++, used++)
                if (used + 1 < size) out[used] = piece[j];
        }
        i += (size_t)len;
    }
    if (size) out[used < size ? used : size - 1] = '\0';
    return used;
}

int utf8_put_shown(FILE *f, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    int rc = 0;
    for (size_t i = 0; i < n;) {
        int escape, len = shown_char(p + i, n - i, &escape);
        for (int k = 0; escape && k < len; k++)
            if (fprintf(f, "\\x%02X", p[i + k]) < 0) rc = EOF;
        if (!escape && fwrite(p + i, 1, (size_t)len, f) != (size_t)len) rc = EOF;
        i += (size_t)len;
    }
    return rc;
}

const char *utf8_name(char *out, size_t size, uint32_t c, int zh) {
    static const struct { uint32_t c; const char *en, *zh; } NAMED[] = {
        {'\n', "newline", "换行符"}, {'\t', "tab", "制表符"}, {' ', "space", "空格"},
        {'\r', "carriage return", "回车符"},
    };
    for (size_t i = 0; i < sizeof NAMED / sizeof NAMED[0]; i++)
        if (NAMED[i].c == c) {
            snprintf(out, size, zh ? "%s（U+%04X）" : "%s (U+%04X)", zh ? NAMED[i].zh : NAMED[i].en, (unsigned)c);
            return out;
        }
    if (c < 0x20 || (c >= 0x7F && c < 0xA0)) {   // C0, DEL, C1: nothing to show
        snprintf(out, size, zh ? "控制字符 U+%04X" : "the control character U+%04X", (unsigned)c);
        return out;
    }
    unsigned char shown[5] = {0};
    utf8_encode(shown, c);
    snprintf(out, size, zh ? "“%s”（U+%04X）" : "'%s' (U+%04X)", (const char *)shown, (unsigned)c);
    return out;
}
