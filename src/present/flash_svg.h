// flash_svg — FlashAttention's tiles as a picture for the lesson page
// (--format html, lesson 6.3): the N x N score matrix cut into tiles, the
// tiles done, the one being processed framed, those above the diagonal
// skipped, the masked cells grey; beside it the running max m_i and sum l_i
// of the query rows the tile updates. Labels in both languages (elements of
// class en and zh).
#ifndef KVDEMO_FLASH_SVG_H
#define KVDEMO_FLASH_SVG_H

#include "buf.h"

// Appends one <svg> to b: N tokens (rows the tokens' labels), tiles of
// tile x tile, tile (i0, j0) being processed (its first query and key);
// m and l (br) the running max and sum of queries i0 .. i0 + br - 1.
void flash_svg(Buf *b, int N, int tile, int i0, int j0, const char *const *rows, const float *m, const float *l,
               int br);

#endif
