// png — a PNG screenshot read into RGB pixels (png.h): the chunks, the
// zlib stream inflated (stored, fixed and dynamic Huffman blocks), the
// scanlines' filters undone.
#include "png.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// DEFLATE (RFC 1951)

typedef struct {
    const uint8_t *in;
    size_t n, pos;
    uint32_t bitbuf;
    int nbits;
    uint8_t *out;
    size_t len, cap;
} Inflate;

// A canonical Huffman code: how many codes of each length, and the symbols
// in code order.
typedef struct {
    short count[16];
    short symbol[320];
} Huffman;

// The next `need` bits, the first one lowest; -1 past the end of the input.
static int bits(Inflate *z, int need) {
    while (z->nbits < need) {
        if (z->pos >= z->n) return -1;
        z->bitbuf |= (uint32_t)z->in[z->pos++] << z->nbits;
        z->nbits += 8;
    }
    int v = (int)(z->bitbuf & ((1u << need) - 1));
    z->bitbuf >>= need;
    z->nbits -= need;
    return v;
}

static int put(Inflate *z, uint8_t byte) {
    if (z->len == z->cap) return -1;
    z->out[z->len++] = byte;
    return 0;
}

static void huffman_build(Huffman *h, const short *lengths, int n) {
    short offs[16];
    memset(h->count, 0, sizeof h->count);
    for (int s = 0; s < n; s++) h->count[lengths[s]]++;
    offs[1] = 0;
    for (int len = 1; len < 15; len++) offs[len + 1] = (short)(offs[len] + h->count[len]);
    for (int s = 0; s < n; s++)
        if (lengths[s]) h->symbol[offs[lengths[s]]++] = (short)s;
}

// One symbol, read a bit at a time (codes are sent first bit highest).
static int huffman_decode(Inflate *z, const Huffman *h) {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len <= 15; len++) {
        int b = bits(z, 1);
        if (b < 0) return -1;
        code |= b;
        int count = h->count[len];
        if (code - count < first) return h->symbol[index + (code - first)];
        index += count;
        first = (first + count) << 1;
        code <<= 1;
    }
    return -1;
}

static const short LEN_BASE[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                   31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const short LEN_EXTRA[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const short DIST_BASE[30] = {1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,    65,    97,    129,
                                    193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const short DIST_EXTRA[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

// The symbols of one Huffman block up to its end (256). Returns 0 or -1.
static int inflate_codes(Inflate *z, const Huffman *lit, const Huffman *dist) {
    for (;;) {
        int s = huffman_decode(z, lit);
        if (s < 0) return -1;
        if (s < 256) {
            if (put(z, (uint8_t)s)) return -1;
            continue;
        }
        if (s == 256) return 0;
        s -= 257;
        if (s >= 29) return -1;
        int extra = bits(z, LEN_EXTRA[s]), d = huffman_decode(z, dist);
        if (extra < 0 || d < 0 || d >= 30) return -1;
        int len = LEN_BASE[s] + extra, dextra = bits(z, DIST_EXTRA[d]);
        if (dextra < 0) return -1;
        size_t back = (size_t)(DIST_BASE[d] + dextra);
        if (back > z->len) return -1;
        for (int i = 0; i < len; i++)
            if (put(z, z->out[z->len - back])) return -1;
    }
}

static int inflate_stored(Inflate *z) {
    z->bitbuf = 0, z->nbits = 0;   // to the next byte
    if (z->pos + 4 > z->n) return -1;
    unsigned len = z->in[z->pos] | z->in[z->pos + 1] << 8, nlen = z->in[z->pos + 2] | z->in[z->pos + 3] << 8;
    z->pos += 4;
    if ((len ^ 0xffffu) != nlen || z->pos + len > z->n) return -1;
    for (unsigned i = 0; i < len; i++)
        if (put(z, z->in[z->pos++])) return -1;
    return 0;
}

static int inflate_fixed(Inflate *z) {
    short lengths[288];
    Huffman lit, dist;
    for (int s = 0; s < 288; s++) lengths[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
    huffman_build(&lit, lengths, 288);
    for (int s = 0; s < 30; s++) lengths[s] = 5;
    huffman_build(&dist, lengths, 30);
    return inflate_codes(z, &lit, &dist);
}

static int inflate_dynamic(Inflate *z) {
    static const short ORDER[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    int nlit = bits(z, 5) + 257, ndist = bits(z, 5) + 1, ncode = bits(z, 4) + 4;
    if (nlit > 286 || ndist > 30 || ncode < 4) return -1;
    short lengths[320] = {0};
    for (int i = 0; i < ncode; i++) {
        int b = bits(z, 3);
        if (b < 0) return -1;
        lengths[ORDER[i]] = (short)b;
    }
    Huffman lencode, lit, dist;
    huffman_build(&lencode, lengths, 19);
    for (int i = 0; i < nlit + ndist;) {
        int s = huffman_decode(z, &lencode), rep = 0;
        short v = 0;
        if (s < 0) return -1;
        if (s < 16) {
            lengths[i++] = (short)s;
            continue;
        }
        if (s == 16) {
            if (!i) return -1;
            v = lengths[i - 1], rep = 3 + bits(z, 2);
        } else {
            rep = s == 17 ? 3 + bits(z, 3) : 11 + bits(z, 7);
        }
        if (rep < 3 || i + rep > nlit + ndist) return -1;
        while (rep--) lengths[i++] = v;
    }
    huffman_build(&lit, lengths, nlit);
    huffman_build(&dist, lengths + nlit, ndist);
    return inflate_codes(z, &lit, &dist);
}

// A zlib stream (2 bytes of header, DEFLATE blocks) into out[cap]; returns
// the bytes written, or -1.
static long zlib_inflate(uint8_t *out, size_t cap, const uint8_t *in, size_t n) {
    if (n < 2 || (in[0] & 0x0f) != 8 || ((in[0] << 8) | in[1]) % 31) return -1;
    Inflate z = {.in = in, .n = n, .pos = 2, .out = out, .cap = cap};
    int last;
    do {
        last = bits(&z, 1);
        int type = bits(&z, 2), rc = -1;
        if (last < 0 || type < 0) return -1;
        if (type == 0) rc = inflate_stored(&z);
        else if (type == 1) rc = inflate_fixed(&z);
        else if (type == 2) rc = inflate_dynamic(&z);
        if (rc) return -1;
    } while (!last);
    return (long)z.len;
}

// ----------------------------------------------------------------------------
// PNG (RFC 2083)

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c) {
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

// Undoes each scanline's filter in raw (height rows of 1 + stride bytes),
// then keeps R, G, B of each pixel (bpp 3 or 4 bytes) in img->rgb.
static int png_unfilter(PngImage *img, uint8_t *raw, int bpp) {
    size_t stride = (size_t)img->width * (size_t)bpp;
    for (int y = 0; y < img->height; y++) {
        uint8_t *row = raw + (size_t)y * (stride + 1), f = row[0], *cur = row + 1;
        const uint8_t *up = y ? cur - (stride + 1) : NULL;
        if (f > 4) return -1;
        for (size_t i = 0; i < stride; i++) {
            int a = i >= (size_t)bpp ? cur[i - (size_t)bpp] : 0, b = up ? up[i] : 0,
                c = up && i >= (size_t)bpp ? up[i - (size_t)bpp] : 0;
            int add = f == 1 ? a : f == 2 ? b : f == 3 ? (a + b) / 2 : f == 4 ? paeth(a, b, c) : 0;
            cur[i] = (uint8_t)(cur[i] + add);
        }
        for (int x = 0; x < img->width; x++)
            memcpy(img->rgb + ((size_t)y * (size_t)img->width + (size_t)x) * 3, cur + (size_t)x * (size_t)bpp, 3);
    }
    return 0;
}

static uint8_t *file_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *b = NULL;
    size_t cap = 0;
    *n = 0;
    for (;;) {
        if (*n == cap) {
            uint8_t *nb = realloc(b, cap = cap ? 2 * cap : 1 << 16);
            if (!nb) break;
            b = nb;
        }
        size_t got = fread(b + *n, 1, cap - *n, f);
        if (!got) break;
        *n += got;
    }
    fclose(f);
    return b;
}

int png_read(PngImage *img, const char *path, char *err, size_t errlen) {
    memset(img, 0, sizeof *img);
    size_t n = 0, zlen = 0;
    uint8_t *file = file_bytes(path, &n), *z = file ? malloc(n) : NULL, *raw = NULL;
    const char *why = !file ? "cannot be read" : !z ? "is too large for memory" : n < 33 || memcmp(file, "\x89PNG\r\n\x1a\n", 8) ? "is not a PNG" : NULL;
    int bpp = 0;
    for (size_t at = 8; !why && at + 12 <= n;) {   // the chunks: IHDR, IDAT ..., IEND
        size_t len = be32(file + at);
        const uint8_t *type = file + at + 4, *data = file + at + 8;
        if (at + 12 + len > n) why = "is cut short";
        else if (!memcmp(type, "IHDR", 4)) {
            img->width = (int)be32(data), img->height = (int)be32(data + 4);
            bpp = data[9] == 2 ? 3 : data[9] == 6 ? 4 : 0;
            if (data[8] != 8 || !bpp || data[12] || img->width <= 0 || img->height <= 0 || img->width > 8192 ||
                img->height > 8192)
                why = "is not an 8-bit RGB or RGBA PNG without interlacing (the kind read here)";
        } else if (!memcmp(type, "IDAT", 4)) {
            memcpy(z + zlen, data, len);
            zlen += len;
        }
        at += 12 + len;
    }
    size_t rawlen = (size_t)img->height * ((size_t)img->width * (size_t)bpp + 1);
    if (!why && !bpp) why = "has no header (IHDR)";
    if (!why && (!(raw = malloc(rawlen)) || !(img->rgb = malloc((size_t)img->width * (size_t)img->height * 3))))
        why = "is too large for memory";
    if (!why && zlib_inflate(raw, rawlen, z, zlen) != (long)rawlen) why = "is damaged: its pixels do not inflate";
    if (!why && png_unfilter(img, raw, bpp)) why = "is damaged: a scanline has an unknown filter";
    free(file);
    free(z);
    free(raw);
    if (!why) return 0;
    snprintf(err, errlen, "%s %s", path, why);
    png_free(img);
    return -1;
}

void png_free(PngImage *img) {
    free(img->rgb);
    img->rgb = NULL;
}
