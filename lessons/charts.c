// charts — lessons 4's and 5's pictures for the page (charts.h).
#include "charts.h"

#include "buf.h"
#include "chart_svg.h"
#include "stats.h"

#include <stdio.h>
#include <stdlib.h>

enum { MAX_POINTS = 16 };

static void put(Trace *tr, const Chart *c) {
    Buf b;
    buf_init(&b);
    chart_svg(&b, c);
    char *svg = buf_take(&b);
    if (svg) trace_svg(tr, svg);
    free(svg);
}

void charts_time_per_token(Trace *tr, const int *pos, int npos, const double *const runs[2], int repeat) {
    if (tr->doc != FORMAT_HTML || npos < 1) return;
    if (npos > MAX_POINTS) npos = MAX_POINTS;
    double x[MAX_POINTS], y[2][MAX_POINTS], lo[2][MAX_POINTS], hi[2][MAX_POINTS];
    for (int i = 0; i < npos; i++) {
        x[i] = pos[i];
        for (int c = 0; c < 2; c++) {
            Stats s = stats_of(runs[c] + (size_t)i * (size_t)repeat, repeat);
            y[c][i] = s.median, lo[c][i] = s.min, hi[c][i] = s.max;
        }
    }
    ChartSeries series[2] = {
        {"no-cache", "without the cache", "不使用缓存", CHART_NO_CACHE, CHART_CIRCLE, 0, npos, x, y[0], lo[0], hi[0]},
        {"cache", "with the cache", "使用缓存", CHART_CACHE, CHART_SQUARE, 1, npos, x, y[1], lo[1], hi[1]},
    };
    char en[96], zh[96];
    snprintf(en, sizeof en, "each point: the median of %d runs; whiskers: their min … max", repeat);
    snprintf(zh, sizeof zh, "每个点：%d 次运行的中位数；须线：最小 … 最大", repeat);
    Chart c = {"chart-time", "Time per token against the position t", "每个 token 的耗时随位置 t 的变化",
               {"position t of the token fed (tokens)", "输入 token 的位置 t（token）", CHART_COUNT},
               {"time per token (one forward pass)", "每个 token 的耗时（一次前向计算）", CHART_SECONDS},
               en, zh, 2, series};
    put(tr, &c);
}

void charts_bytes_held(Trace *tr, int T, int p, uint64_t per_token, uint64_t reserved) {
    if (tr->doc != FORMAT_HTML) return;
    double x[8], held[8], kept[8];
    int n = 0;
    for (int i = 1; i <= 8; i++) {
        int len = i * T / 8;
        if (len < p) continue;
        x[n] = len, held[n] = (double)per_token * len, kept[n] = (double)reserved;
        n++;
    }
    if (!n) return;
    ChartSeries series[2] = {
        {"held", "held (the positions filled)", "占用（已填入的位置）", CHART_NO_CACHE, CHART_CIRCLE, 0, n, x, held, NULL, NULL},
        {"reserved", "reserved before the first token", "第一个 token 之前预留", CHART_RESERVED, CHART_SQUARE, 1, n, x, kept,
         NULL, NULL},
    };
    Chart c = {"chart-bytes", "Bytes the cache holds against the sequence length", "缓存占用的字节随序列长度的变化",
               {"sequence length (tokens in the cache)", "序列长度（缓存里的 token 数）", CHART_COUNT},
               {"bytes (decimal: 1 MB = 10^6 B)", "字节（十进制：1 MB = 10^6 B）", CHART_BYTES},
               "counted from the shapes, not measured: no spread", "按形状计数，不是测量：没有离散", 2, series};
    put(tr, &c);
}
