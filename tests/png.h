// png — just enough of PNG (RFC 2083) and of its compression (zlib,
// RFC 1950; DEFLATE, RFC 1951) to read the screenshots that headless
// Chromium takes of a lesson page (test_slides): 8-bit RGB or RGBA, not
// interlaced. The checksums (CRC-32 of the chunks, Adler-32 of the stream)
// are not checked: a damaged file fails to inflate or has the wrong size.
#ifndef KVDEMO_TEST_PNG_H
#define KVDEMO_TEST_PNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int width, height;
    uint8_t *rgb;   // (height, width, 3), top row first
} PngImage;

// Reads the PNG file at path into img. Returns 0, or -1 with err saying why
// (no such file, not a PNG, a kind of PNG not read here, damaged).
int png_read(PngImage *img, const char *path, char *err, size_t errlen);
void png_free(PngImage *img);

#endif
