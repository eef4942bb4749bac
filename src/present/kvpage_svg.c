// kvpage_svg — the paged cache as a picture (kvpage_svg.h).
//
// The grid: COLS blocks a row, each a cell of CELL_W x CELL_H pixels: a
// lane of LANE_H for the copy-on-write arrows, the block's id under it, its
// B slots in a bar, under them the logical block it is to its first holder
// and its reference count. An arrow keeps to the lanes and the gaps between
// rows, so that it covers no id and no label (tests/test_slides.c reads the
// boxes back in chromium). Nothing here is read back by kvdemo: the
// lesson's text lines say the same in words.
#include "kvpage_svg.h"

#include <stdio.h>

enum { COLS = 16, CELL_W = 60, LANE_H = 18, CELL_H = LANE_H + 64, BAR_W = 48, BAR_H = 18, PAD = 8, LEGEND_H = 26 };
// Above the id's baseline: the top of its text (11 px type, with room for
// a taller font's ascent), then the arrow's tip, 13 px up.
enum { TIP = 13, HEAD = 8 };
// Under the id's baseline: the bottom of the L/ref line's text.
enum { BELOW = 43 };

// A sequence takes the colour of its index (kvpage_svg.h).
const char *const KVPAGE_SEQ_COLOURS[] = {"#b26b00", "#0072b2", "#2c9661", "#aa00ff", "#d21e3c", "#6651cd", "#b71a83"};
const int KVPAGE_NUM_SEQ_COLOURS = (int)(sizeof KVPAGE_SEQ_COLOURS / sizeof KVPAGE_SEQ_COLOURS[0]);
static const char *const SHARED = KVPAGE_SHARED, *const COW = KVPAGE_COW;

// A label in both languages at (x, y).
static void both(Buf *b, int x, int y, const char *anchor, const char *en, const char *zh) {
    buf_printf(b, "<text class=\"en\" x=\"%d\" y=\"%d\" text-anchor=\"%s\">%s</text>", x, y, anchor, en);
    buf_printf(b, "<text class=\"zh\" x=\"%d\" y=\"%d\" text-anchor=\"%s\">%s</text>", x, y, anchor, zh);
}

// The first sequence holding block k (*logical: its index in that table), or -1.
static int holder(const KvSeq *seqs, int n, int k, int *logical) {
    for (int s = 0; s < n; s++)
        for (int i = 0; i < seqs[s].num_blocks; i++)
            if (seqs[s].table[i] == k) {
                *logical = i;
                return s;
            }
    return -1;
}

// The cell of block k: its left edge and its id's baseline.
static void cell_origin(int k, int *x, int *y) {
    *x = PAD + (k % COLS) * CELL_W;
    *y = PAD + LANE_H + 12 + (k / COLS) * CELL_H;
}

// Block k: its id, its slots, its logical index and reference count.
static void draw_block(Buf *b, const KvPool *p, const KvSeq *seqs, int n, int k) {
    int x, y, logical = 0, s = holder(seqs, n, k, &logical), B = p->B;
    cell_origin(k, &x, &y);
    int bx = x + (CELL_W - BAR_W) / 2 - 4, by = y + 6;
    buf_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"id\">#%d</text>", x + CELL_W / 2 - 4, y, k);
    const char *fill = s < 0 ? "#ffffff" : p->ref[k] > 1 ? SHARED : KVPAGE_SEQ_COLOURS[s % KVPAGE_NUM_SEQ_COLOURS];
    int filled = 0;
    if (s >= 0) {
        filled = seqs[s].len - logical * B;
        filled = filled < 0 ? 0 : filled > B ? B : filled;
    }
    for (int j = 0; j < B; j++) {   // the slots: filled ones coloured, the others white
        double w = (double)BAR_W / B;
        buf_printf(b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" stroke=\"#555\" stroke-width=\"%s\"></rect>",
                   bx + j * w, by, w, BAR_H, j < filled ? fill : "#ffffff", B > 8 ? "0.3" : "0.8");
    }
    buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"%s\" stroke-width=\"%d\"></rect>",
               bx, by, BAR_W, BAR_H, s < 0 ? "#bbb" : "#222", p->ref[k] > 1 ? 3 : 1);
    if (s < 0) return;
    char en[48], zh[48];
    snprintf(en, sizeof en, "L%d · ref %d", logical, p->ref[k]);
    snprintf(zh, sizeof zh, "L%d · 引用 %d", logical, p->ref[k]);
    both(b, x + CELL_W / 2 - 4, by + BAR_H + 13, "middle", en, zh);
}

// An arrow from block src to block dst: dst was copied from src. In one
// row it arcs through the lane above the ids, from over src's id to a head
// over dst's; to a row below it leaves src under its L/ref line and comes
// down to the head over dst's id; to a row above it leaves src over its id
// and points up at dst from under dst's L/ref line.
static void draw_cow(Buf *b, int src, int dst) {
    int x1, y1, x2, y2;
    cell_origin(src, &x1, &y1);
    cell_origin(dst, &x2, &y2);
    x1 += CELL_W / 2 - 4, x2 += CELL_W / 2 - 4;
    int tip, dir;   // the head's tip and which way it points (1 down, -1 up)
    if (y1 == y2) {
        tip = y2 - TIP, dir = 1;
        int from = y1 - TIP - 1, to = tip - HEAD + 1, peak = y1 - 12 - LANE_H + 3;
        // a quadratic's middle is (from + 2 c + to) / 4: c puts it at peak
        buf_printf(b, "<path d=\"M%d %d Q%d %d %d %d\" fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\"></path>", x1,
                   from, (x1 + x2) / 2, 2 * peak - (from + to) / 2, x2, to, COW);
    } else {
        dir = y2 > y1 ? 1 : -1;
        int from = dir > 0 ? y1 + BELOW : y1 - TIP - 1;
        tip = dir > 0 ? y2 - TIP : y2 + BELOW;
        buf_printf(b, "<path d=\"M%d %d L%d %d\" fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\"></path>", x1, from, x2,
                   tip - dir * (HEAD - 1), COW);
    }
    buf_printf(b, "<polygon points=\"%d,%d %d,%d %d,%d\" fill=\"%s\"></polygon>", x2 - 5, tip - dir * HEAD, x2 + 5,
               tip - dir * HEAD, x2, tip, COW);
}

// The legend under the grid: a swatch per sequence that holds blocks, the
// grey of shared blocks, and the arrow when one is drawn.
static void draw_legend(Buf *b, const KvSeq *seqs, int n, int y, int arrows) {
    int x = PAD;
    char en[32], zh[32];
    for (int s = 0; s < n; s++) {
        if (!seqs[s].num_blocks) continue;
        buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#222\"></rect>", x,
                   y - 11, KVPAGE_SEQ_COLOURS[s % KVPAGE_NUM_SEQ_COLOURS]);
        snprintf(en, sizeof en, "sequence %d", s);
        snprintf(zh, sizeof zh, "序列 %d", s);
        both(b, x + 18, y, "start", en, zh);
        x += 100;
    }
    buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#222\" stroke-width=\"3\"></rect>",
               x, y - 11, SHARED);
    both(b, x + 18, y, "start", "shared (ref &gt; 1)", "共享（引用计数 &gt; 1）");
    x += 150;
    if (arrows) {
        buf_printf(b, "<path d=\"M%d %d L%d %d\" stroke=\"%s\" stroke-width=\"2.5\"></path>", x, y - 4, x + 18, y - 4, COW);
        both(b, x + 24, y, "start", "copied on write from", "写时复制自");
    }
}

void kvpage_svg(Buf *b, const KvPool *p, const KvSeq *seqs, int n, const int *cow_src) {
    int rows = (p->num_blocks + COLS - 1) / COLS;
    int w = 2 * PAD + COLS * CELL_W, h = PAD + rows * CELL_H + LEGEND_H;
    int arrows = 0;
    for (int k = 0; cow_src && k < p->num_blocks; k++) arrows |= cow_src[k] >= 0;
    buf_printf(b, "<svg class=\"pool\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
               "font-size=\"11\" font-family=\"system-ui, sans-serif\">",
               w, h, w, h);
    for (int k = 0; k < p->num_blocks; k++) draw_block(b, p, seqs, n, k);
    for (int k = 0; cow_src && k < p->num_blocks; k++)
        if (cow_src[k] >= 0) draw_cow(b, cow_src[k], k);
    draw_legend(b, seqs, n, h - 8, arrows);
    buf_append(b, "</svg>\n");
}
