// race_svg — the race replayed (race_svg.h).
//
// Each bar is a rect scaled along x by a CSS animation as long as its run
// took; its keyframes put the bar at the share of steps done at the share
// of the time they took, at CHECKPOINTS points, so the run without the
// cache slows as its text grows and the cached one keeps its pace.
#include "race_svg.h"

#include "chart_svg.h"
#include "measure.h"

enum { CHECKPOINTS = 24, TRACK_W = 420, LEFT = 150 };

static const char *const COLOURS[2] = {CHART_NO_CACHE, CHART_CACHE};   // the course's, as the chart bars

void race_svg(Buf *b, const double *const elapsed[2], int steps) {
    buf_append(b, "<details class=\"replay\" open><summary><span class=\"en\" lang=\"en\">the race replayed, at the "
                  "median times measured for this page</span><span class=\"zh\" lang=\"zh-CN\">重放赛跑（按生成这一页时"
                  "实测时间的中位数）</span></summary>\n");
    int h = 96, w = LEFT + TRACK_W + 110;
    buf_printf(b, "<svg class=\"race\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" font-size=\"13\" "
               "font-family=\"system-ui, sans-serif\"><style>",
               w, h, w, h);
    for (int c = 0; c < 2; c++) {
        double total = elapsed[c][steps - 1] > 0 ? elapsed[c][steps - 1] : 1e-9;
        buf_printf(b, "@keyframes kvdemo-race-%d{0%%{transform:scaleX(0)}", c);
        for (int k = 1, shown = -1; k <= CHECKPOINTS; k++) {
            int i = (int)((long long)k * steps / CHECKPOINTS) - 1;
            if (i <= shown) continue;   // fewer steps than checkpoints
            shown = i;
            buf_printf(b, "%.2f%%{transform:scaleX(%.4f)}", 100.0 * elapsed[c][i] / total, (double)(i + 1) / steps);
        }
        buf_append(b, "}");
    }
    buf_append(b, "</style>");
    static const char *const EN[2] = {"without the cache", "with the cache"}, *const ZH[2] = {"不使用缓存", "使用缓存"};
    for (int c = 0; c < 2; c++) {
        int y = 14 + c * 34;
        double total = elapsed[c][steps - 1];
        buf_printf(b, "<text class=\"en\" x=\"0\" y=\"%d\">%s</text><text class=\"zh\" x=\"0\" y=\"%d\">%s</text>", y + 14,
                   EN[c], y + 14, ZH[c]);
        buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"20\" fill=\"%s\" stroke=\"#888\"></rect>", LEFT, y,
                   TRACK_W, CHART_TRACK);
        buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"20\" fill=\"%s\" style=\"transform-box:fill-box;"
                   "transform-origin:left;transform:scaleX(0);animation:kvdemo-race-%d %.3fs linear forwards\"></rect>",
                   LEFT, y, TRACK_W, COLOURS[c], c, total);
        char t[32];
        buf_printf(b, "<text x=\"%d\" y=\"%d\">%s</text>", LEFT + TRACK_W + 8, y + 14, measure_time_text(t, sizeof t, total));
    }
    buf_printf(b, "<text class=\"en\" x=\"0\" y=\"%d\">%d tokens each; a click on the line above plays it again</text>"
               "<text class=\"zh\" x=\"0\" y=\"%d\">各 %d 个 token；再点一下上面那一行可以重放</text>",
               h - 6, steps, h - 6, steps);
    buf_append(b, "</svg></details>\n");
}
