// flash_svg — FlashAttention's tiles as a picture (flash_svg.h).
//
// The tiles are visited as lesson 6.3 visits them (FlashAttention-2's
// order): the query blocks i0 = 0, tile, ..., and within each the key
// blocks j0 = 0, tile, ...; a tile is done when it comes before (i0, j0).
#include "flash_svg.h"

enum { CELL = 40, LEFT = 36, TOP = 30 };

static void both(Buf *b, int x, int y, const char *en, const char *zh) {
    buf_printf(b, "<text class=\"en\" x=\"%d\" y=\"%d\">%s</text><text class=\"zh\" x=\"%d\" y=\"%d\">%s</text>", x, y, en, x,
               y, zh);
}

// A label of the lesson's (a token): <, > and & as entities.
static void label(Buf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '<') buf_append(b, "&lt;");
        else if (*s == '>') buf_append(b, "&gt;");
        else if (*s == '&') buf_append(b, "&amp;");
        else buf_appendn(b, s, 1);
    }
}

void flash_svg(Buf *b, int N, int tile, int i0, int j0, const char *const *rows, const float *m, const float *l,
               int br) {
    int side = N * CELL, w = LEFT + side + 250, h = TOP + side + 34;
    buf_printf(b, "<svg class=\"tiles\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" font-size=\"12\" "
               "font-family=\"system-ui, sans-serif\">", w, h, w, h);
    both(b, LEFT, 16, "scores S = Q K^T, N x N, in tiles", "分数 S = Q K^T，N x N，分块");
    for (int r = 0; r < N; r++) {   // the cells: masked ones (key after query) grey
        buf_printf(b, "<text x=\"4\" y=\"%d\">", TOP + r * CELL + CELL / 2 + 4);
        label(b, rows[r]);
        buf_append(b, "</text>");
        for (int c = 0; c < N; c++)
            buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#bbb\"></rect>",
                       LEFT + c * CELL, TOP + r * CELL, CELL, CELL, c > r ? FLASH_MASKED : "#ffffff");
    }
    for (int ti = 0; ti < N; ti += tile)   // the tiles: done, current, skipped, to come
        for (int tj = 0; tj < N; tj += tile) {
            int bh = N - ti < tile ? N - ti : tile, bw = N - tj < tile ? N - tj : tile;
            int skipped = tj > ti + bh - 1, current = ti == i0 && tj == j0;
            int done = !skipped && (ti < i0 || (ti == i0 && tj < j0));
            const char *fill = done ? FLASH_DONE : skipped ? FLASH_SKIPPED : "none";
            buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" fill-opacity=\"" FLASH_OPACITY "\" "
                       "stroke=\"%s\" stroke-width=\"%d\"></rect>",
                       LEFT + tj * CELL, TOP + ti * CELL, bw * CELL, bh * CELL, fill, current ? FLASH_CURRENT : "#444",
                       current ? 4 : 1);
        }
    int x = LEFT + side + 16, y = TOP + 12;
    both(b, x, y, "running, after this tile:", "这一块之后的累计值：");
    for (int r = 0; r < br; r++) {
        y += 18;
        buf_printf(b, "<text x=\"%d\" y=\"%d\">", x, y);
        label(b, rows[i0 + r]);
        buf_printf(b, ": m = %.4f, l = %.4f</text>", (double)m[r], (double)l[r]);
    }
    int ly = TOP + side + 22;
    buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"" FLASH_DONE "\" fill-opacity=\"" FLASH_OPACITY "\" stroke=\"#444\"></rect>",
               LEFT, ly - 10);
    both(b, LEFT + 16, ly, "done", "已算");
    buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"none\" stroke=\"" FLASH_CURRENT "\" stroke-width=\"3\"></rect>",
               LEFT + 70, ly - 10);
    both(b, LEFT + 86, ly, "this tile", "当前块");
    buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"" FLASH_SKIPPED "\" fill-opacity=\"" FLASH_OPACITY "\" stroke=\"#444\"></rect>",
               LEFT + 160, ly - 10);
    both(b, LEFT + 176, ly, "skipped (above the diagonal)", "跳过（对角线之上）");
    buf_append(b, "</svg>\n");
}
