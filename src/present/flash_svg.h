// flash_svg — FlashAttention's tiles as a picture for the lesson page
// (--format html, lesson 6.3): the N x N score matrix cut into tiles, the
// tiles done, the one being processed framed, those above the diagonal
// skipped, the masked cells grey; beside it the running max m_i and sum l_i
// of the query rows the tile updates. Labels in both languages (elements of
// class en and zh).
#ifndef KVDEMO_FLASH_SVG_H
#define KVDEMO_FLASH_SVG_H

#include "buf.h"

// The picture's colours: the tiles done and skipped (filled, FLASH_OPACITY
// over the cells), the frame of the tile being processed, the masked cells
// (a help to the eye, under the tiles). Done, skipped and the frame are at
// least 3:1 on both kinds of cell (WCAG 2.1, 1.4.11; the sky blue and grey
// at 0.45 were 1.3 and 2.0:1) and apart with the common colour-vision
// deficiencies (tests/test_colours.c).
#define FLASH_DONE "#0072b2"
#define FLASH_SKIPPED "#595959"
#define FLASH_OPACITY "0.85"
#define FLASH_CURRENT "#a33a00"
#define FLASH_MASKED "#ececec"

// Appends one <svg> to b: N tokens (rows the tokens' labels), tiles of
// tile x tile, tile (i0, j0) being processed (its first query and key);
// m and l (br) the running max and sum of queries i0 .. i0 + br - 1.
void flash_svg(Buf *b, int N, int tile, int i0, int j0, const char *const *rows, const float *m, const float *l,
               int br);

#endif
