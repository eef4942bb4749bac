// lesson 4 — KV Cache 优点 (article §4)
//
// "避免每次采样 token 时重新计算键值向量，利用预先计算好的 k 值和 v 值，可以节省
// 大量计算时间" — the article asserts what the cache saves; this lesson
// measures it on the char GPT of lesson 10 (the shipped model, --model FILE,
// or --init random --preset seed|tiny).
//
// Generating the token after position t:
//   without the cache  forward(tokens[0 .. t], offset 0): t + 1 rows, the whole
//                      prefix recomputed; its attention is causal (row i sees i + 1)
//   with the cache     forward(tokens[t], offset t): 1 row, which reads t + 1
//                      cached keys and values
// FLOPs are counted, not estimated: 2 per multiply-add of every matrix
// product gpt_forward does (projections, attention, MLP, output head),
// from the layer shapes. LayerNorm, softmax, GELU and the biases are left
// out: they are a few operations per number, not per weight.
//
// Legend (gpt.h's): V vocabulary, T context, C embedding, H heads,
// D = C / H head size, L blocks, F = 4 C the MLP's hidden size; t a position,
// p the prompt's tokens, n the generation's steps.
//
// The lesson generates with the cache up to the end of the context (T
// positions), then times both ways at a few positions t and checks that the
// logits agree bit for bit there; then prefill against decode: FLOPs per
// byte read, GFLOP/s and GB/s. Times are measured as measure.h does: a
// warm-up, then --repeat runs (5) of each way taking turns, printed as the
// median with min … max, ratios as x ± e, and a conclusion only where the
// runs' intervals support one.
#include "gptsetup.h"
#include "charts.h"
#include "fileio.h"
#include "lessons.h"
#include "measure.h"
#include "ops.h"
#include "sampler.h"
#include "stats.h"
#include "timer.h"
#include "utf8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEFAULT_REPEAT = MEASURE_RUNS, MAX_POS = 16, BAR_WIDTH = 40 };

// FLOPs of one gpt_forward call, by kind of product.
typedef struct {
    double proj;    // attn.query, key, value, output: 4 products of (C, C) per row and block
    double attn;    // query @ key and weights @ value: 2 · D per cached position, per head
    double mlp;     // mlp.fc1 (C, F) and mlp.fc2 (F, C) per row and block
    double head;    // the output head (C, V), last row only
} Flops;

static double flops_total(Flops f) { return f.proj + f.attn + f.mlp + f.head; }

// What gpt_forward(tokens, n, offset) computes: row i is at position
// offset + i and attends to offset + i + 1 positions.
static Flops count_flops(GptConfig g, int n, int offset) {
    double C = g.C, F = 4.0 * g.C, L = g.L;
    Flops f = {0};
    for (int i = 0; i < n; i++) {
        double seen = offset + i + 1;
        f.proj += L * 4 * 2 * C * C;          // x @ Wq, x @ Wk, x @ Wv, att @ Wo
        f.attn += L * 2 * 2 * C * seen;       // H heads · (q @ key + w @ value) · D = C
        f.mlp += L * (2 * C * F + 2 * F * C); // x @ W1, h @ W2
    }
    f.head = 2.0 * C * g.V;                   // logits of the last row
    return f;
}

// One step of the cached generation: where it fed and what it drew from.
typedef struct {
    GptConfig cfg;
    int *n, *offset;    // (steps)
    float *logits;      // (steps, V)
} Record;

static int record_step(void *ctx, const GptStep *st) {
    Record *r = ctx;
    r->n[st->step] = st->n;
    r->offset[st->step] = st->offset;
    memcpy(r->logits + (size_t)st->step * r->cfg.V, st->logits, sizeof(float) * (size_t)r->cfg.V);
    return 0;
}

// One timed call of gpt_forward(s, m, tokens, n, offset), an arm of
// measure_interleaved; logits (V), when not NULL, gets its logits.
typedef struct {
    GptState *s;
    const GptModel *m;
    const int *tokens;
    int n, offset;
    float *logits;
} Forward;

static int forward_run(void *ctx, double *seconds) {
    Forward *f = ctx;
    double t0 = timer_now();
    const float *out = gpt_forward(f->s, f->m, f->tokens, f->n, f->offset);
    *seconds = timer_now() - t0;
    if (f->logits) memcpy(f->logits, out, sizeof(float) * (size_t)f->m->cfg.V);
    return 0;
}

static void count_step(Trace *tr, const char *run, int step, int t, int rows, Flops f, double cum_flops, int64_t cum_rows) {
    trace_run(tr, run);
    trace_step(tr, step);
    trace_count(tr, "position", t, NULL, NULL);
    trace_count(tr, "rows", rows, NULL, NULL);
    trace_count(tr, "proj_flops", (int64_t)f.proj, NULL, NULL);
    trace_count(tr, "attn_flops", (int64_t)f.attn, NULL, NULL);
    trace_count(tr, "mlp_flops", (int64_t)f.mlp, NULL, NULL);
    trace_count(tr, "head_flops", (int64_t)f.head, NULL, NULL);
    trace_count(tr, "flops", (int64_t)flops_total(f), NULL, NULL);
    trace_count(tr, "flops_total", (int64_t)cum_flops, NULL, NULL);
    trace_count(tr, "rows_total", cum_rows, NULL, NULL);
    trace_step(tr, 0);
}

// The FLOPs of a step, in millions: one row per shown step.
static const TraceColumn FLOP_COLS[] = {
    {"t", "t", 5, 1, NULL},           {"rows", "行数", 6, 1, NULL},    {"proj", "投影", 9, 1, NULL},
    {"attn", "注意力", 9, 1, NULL},    {"mlp", "前馈", 9, 1, NULL},     {"head", "输出层", 8, 1, NULL},
    {"total", "合计", 9, 1, NULL},     {"cumulative", "累计", 11, 1, NULL},
};
static const TraceTable FLOP_TABLE = {"mflops", 8, FLOP_COLS};

static void table_row(Trace *tr, int t, int rows, Flops f, double cum) {
    char c[8][32];
    snprintf(c[0], sizeof c[0], "%d", t);
    snprintf(c[1], sizeof c[1], "%d", rows);
    snprintf(c[2], sizeof c[2], "%.2f", f.proj * 1e-6);
    snprintf(c[3], sizeof c[3], "%.3f", f.attn * 1e-6);
    snprintf(c[4], sizeof c[4], "%.2f", f.mlp * 1e-6);
    snprintf(c[5], sizeof c[5], "%.3f", f.head * 1e-6);
    snprintf(c[6], sizeof c[6], "%.2f", flops_total(f) * 1e-6);
    snprintf(c[7], sizeof c[7], "%.1f", cum * 1e-6);
    const char *row[] = {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]};
    trace_table_row(tr, &FLOP_TABLE, row);
}

// A blank line, the table's caption (indented by two: "  Without the
// cache"), then its head.
static void table_head(Trace *tr, const char *en, const char *zh) {
    trace_say(tr, "", "");
    trace_say(tr, en, zh);
    trace_table_head(tr, &FLOP_TABLE);
}

// out = c repeated in proportion to value / max, at least once, at most
// BAR_WIDTH times (c is one character of UTF-8, up to 4 bytes).
static const char *bar(char *out, size_t size, const char *c, double value, double max) {
    int n = max > 0 ? (int)lround(value / max * BAR_WIDTH) : 0;
    if (n < 1) n = 1;
    size_t len = strlen(c), at = 0;
    for (int i = 0; i < n && at + len < size; i++, at += len) memcpy(out + at, c, len);
    out[at] = '\0';
    return out;
}

// A time's cell: text the median with min … max (range 1) or alone, marked
// "!" when its runs disagree; JSON the median in seconds.
static void time_cell(char *buf, size_t size, const Trace *tr, const double *samples, int n, int range) {
    Stats st = stats_of(samples, n);
    if (tr->format != FORMAT_TEXT) {
        snprintf(buf, size, "%.9f", st.median);
        return;
    }
    char t[96];
    if (range) measure_spread_text(t, sizeof t, st);
    else measure_time_text(t, sizeof t, st.median);
    snprintf(buf, size, "%s%s", t, measure_noisy(samples, n) ? " !" : "");
}

// Prefill against decode: one row per kind of step.
static const TraceColumn KIND_COLS[] = {
    {"", "", 34, 0, "kind"},           {"rows", "行", 5, 1, NULL},        {"MFLOP", "MFLOP", 9, 1, NULL},
    {"W MB", "权重 MB", 8, 1, "weight_mb"}, {"KV MB", "KV MB", 8, 1, "kv_mb"}, {"FLOP/B", "FLOP/B", 7, 1, NULL},
    {"time", "耗时", 12, 1, "seconds"},  {"GFLOP/s", "GFLOP/s", 8, 1, NULL}, {"GB/s", "GB/s", 7, 1, NULL},
};
static const TraceTable KINDS = {"prefill_decode", 9, KIND_COLS};

// One kind of step, prefill or decode: FLOPs per byte of weights read (the
// arithmetic intensity), and the GFLOP/s and GB/s achieved. The bytes moved
// are the weights read plus the keys and values read and written.
static void show_kind(Trace *tr, const char *run, const char *en, const char *zh, GptConfig g, int n, int offset,
                      const double *samples, int repeat) {
    double seconds = stats_of(samples, repeat).median;
    Flops f = count_flops(g, n, offset);
    GptCost c = gpt_cost(g, n, offset);
    double flops = flops_total(f), kv = c.cache_bytes + c.cache_write_bytes, bytes = c.weight_bytes + kv;
    trace_run(tr, run);
    trace_count(tr, "rows", n, NULL, NULL);
    trace_count(tr, "flops", (int64_t)flops, NULL, NULL);
    trace_count(tr, "weight_bytes", (int64_t)c.weight_bytes, NULL, NULL);
    trace_count(tr, "kv_bytes", (int64_t)kv, NULL, NULL);
    trace_value(tr, "flop_per_byte", flops / c.weight_bytes, "FLOP/B", NULL, NULL);
    trace_value(tr, "gflop_per_s", flops / seconds * 1e-9, "GFLOP/s", NULL, NULL);
    trace_value(tr, "gb_per_s", bytes / seconds * 1e-9, "GB/s", NULL, NULL);
    if (tr->format == FORMAT_JSON) trace_measure(tr, "step", samples, repeat);   // text: the table
    char cell[8][104];
    snprintf(cell[0], sizeof cell[0], "%d", n);
    snprintf(cell[1], sizeof cell[1], "%.1f", flops * 1e-6);
    snprintf(cell[2], sizeof cell[2], "%.2f", c.weight_bytes * 1e-6);
    snprintf(cell[3], sizeof cell[3], "%.2f", kv * 1e-6);
    snprintf(cell[4], sizeof cell[4], "%.1f", flops / c.weight_bytes);
    time_cell(cell[5], sizeof cell[5], tr, samples, repeat, 0);
    snprintf(cell[6], sizeof cell[6], "%.2f", flops / seconds * 1e-9);
    snprintf(cell[7], sizeof cell[7], "%.2f", bytes / seconds * 1e-9);
    const char *row[] = {trace_text(tr, en, zh), cell[0], cell[1], cell[2], cell[3], cell[4], cell[5], cell[6], cell[7]};
    trace_table_row(tr, &KINDS, row);
    trace_run(tr, NULL);
}

// What the lesson's parts share: the model and its state, the prompt and
// the generated text (tokens: p + steps), what the generation recorded, and
// the positions timed with their times (sec[0] without the cache, sec[1] with
// it: the medians of their runs, run[c][i]).
typedef struct {
    GptModel m;
    GptConfig g;
    GptState s;
    int *tokens, p, steps, last, repeat;   // last: the position the last step feeds
    Record rec;
    double *samples;                       // (2, MAX_POS + 1, repeat): the runs of each way at each position, then the prefill's
    float *nc_logits, *c_logits;           // (MAX_POS, V): the logits at the timed positions
    int pos[MAX_POS], npos;
    double sec[2][MAX_POS];
} Shared;

// The runs of way c (0 without the cache, 1 with it) at the i-th position
// timed (i = MAX_POS: the prompt's prefill, way 0).
static double *runs_of(const Shared *x, int c, int i) {
    return x->samples + ((size_t)c * (MAX_POS + 1) + (size_t)i) * (size_t)x->repeat;
}

static const char *const RUNS[2] = {"no-cache", "cache"};
// The positions the FLOPs and times tables show (and the first and last).
static const int SHOWN_T[] = {16, 64, 128, 255};

// FLOPs per generated token, both ways. Returns 0, or 1 when the cached run
// did not feed what it should have.
static int flops_per_token(Shared *x, Trace *tr) {
    GptConfig g = x->g;
    int p = x->p, steps = x->steps;
    trace_heading(tr, "FLOPs per token (MFLOP: 10^6; counted from the layer shapes)",
                  "每个 token 的计算量（MFLOP：10^6；按各层形状逐项计数）");
    trace_sayf(tr,
               "The prompt has p = %d tokens. Step 1 feeds all of them (the prefill: the same both ways).\n"
               "Then, for the token after position t: without the cache t + 1 rows are recomputed; with it one\n"
               "row, whose attention reads the t + 1 cached keys and values. Only the attention grows with t.",
               "提示词有 p = %d 个 token。第 1 步把它们全部输入（预填充：两种方式相同）。\n"
               "之后，生成位置 t 之后的 token：不使用缓存时重算 t + 1 行；使用缓存时只算 1 行，\n"
               "它的注意力读取缓存里的 t + 1 个 key 和 value。只有注意力这一项随 t 增长。",
               p);
    double cum[2] = {0, 0};
    int64_t cum_rows[2] = {0, 0};
    for (int c = 0; c < 2; c++) {
        if (c == 0) table_head(tr, "  Without the cache", "  不使用缓存");
        else table_head(tr, "  With the cache", "  使用缓存");
        cum[c] = 0;
        for (int k = 0; k < steps; k++) {
            int t = p - 1 + k;
            int n = c == 0 || k == 0 ? t + 1 : 1, offset = c == 0 || k == 0 ? 0 : t;
            if (c == 1 && (x->rec.n[k] != n || x->rec.offset[k] != offset)) {
                fileio_error(tr->lang, "lesson 4: step %d fed %d tokens at %d, not %d at %d",
                             "第 4 课：第 %d 步在位置 %d 输入了 %d 个 token，而不是在位置 %d 输入 %d 个", k + 1, x->rec.n[k],
                             x->rec.offset[k], n, offset);
                return 1;
            }
            Flops f = count_flops(g, n, offset);
            cum[c] += flops_total(f);
            cum_rows[c] += n;
            count_step(tr, RUNS[c], k + 1, t, n, f, cum[c], cum_rows[c]);
            int show = k == 0 || k == steps - 1;
            for (size_t i = 0; i < sizeof SHOWN_T / sizeof SHOWN_T[0]; i++) show |= t == SHOWN_T[i];
            if (show) table_row(tr, t, n, f, cum[c]);
        }
        trace_run(tr, RUNS[c]);
        trace_count(tr, "rows_total", cum_rows[c], NULL, NULL);
        trace_count(tr, "flops_total", (int64_t)cum[c], NULL, NULL);
        trace_run(tr, NULL);
    }
    int64_t n64 = steps;
    trace_sayf(tr,
               "\nK/V rows over n = %d steps with a p = %d token prompt: without the cache\n"
               "  n·p + n(n−1)/2 = %d·%d + %d·%d/2 = %lld;  with it  p + n − 1 = %d + %d − 1 = %lld.\n"
               "Lesson 7's n(n+1)/2 against n is the case p = 1. All FLOPs: %.3g without the cache, %.3g with it (%.1fx).",
               "\nn = %d 步、提示词 p = %d 个 token 时的 K/V 行数：不使用缓存\n"
               "  n·p + n(n−1)/2 = %d·%d + %d·%d/2 = %lld；使用缓存  p + n − 1 = %d + %d − 1 = %lld。\n"
               "第 7 课的 n(n+1)/2 对 n 就是 p = 1 的情形。总计算量：不使用缓存 %.3g，使用缓存 %.3g（%.1f 倍）。",
               steps, p, steps, p, steps, steps - 1, (long long)(n64 * p + n64 * (n64 - 1) / 2), p, steps,
               (long long)(p + n64 - 1), cum[0], cum[1], cum[0] / cum[1]);
    trace_pause(tr);
    return 0;
}

// The times per token as bars (their medians), two a position, scaled to
// the longest, each with its median and min … max.
static void time_chart(Trace *tr, const Shared *x) {
    const int *pos = x->pos;
    int npos = x->npos;
    const double(*sec)[MAX_POS] = x->sec;
    static const TraceColumn CHART_COLS[] = {
        {"t", "t", 5, 1, NULL},
        {"time per token against t (█ without the cache, ░ with it)",
         "每个 token 的耗时随 t 的变化（█ 不使用缓存，░ 使用缓存）", BAR_WIDTH, 0, "chart"},
        {"", "", 0, 0, "seconds"},
    };
    static const TraceTable CHART = {"per_token_chart", 3, CHART_COLS};
    double max = 0;
    for (int i = 0; i < npos; i++) max = fmax(max, fmax(sec[0][i], sec[1][i]));
    trace_say(tr, "", "");
    trace_table_head(tr, &CHART);
    for (int i = 0; i < npos; i++) {
        for (int c = 0; c < 2; c++) {
            char t[16] = "", bars[4 * BAR_WIDTH + 1], a[104];
            if (c == 0) snprintf(t, sizeof t, "%d", pos[i]);
            time_cell(a, sizeof a, tr, runs_of(x, c, i), x->repeat, 1);
            trace_run(tr, RUNS[c]);
            trace_table_row(tr, &CHART, (const char *const[]){t, bar(bars, sizeof bars, c == 0 ? "█" : "░", sec[c][i], max), a});
        }
    }
    trace_run(tr, NULL);
}

// Under the chart: the warning once, when a time there or in the table is
// marked "!".
static void noisy_note(Trace *tr, const Shared *x) {
    int noisy = 0;
    for (int i = 0; i < x->npos; i++)
        for (int c = 0; c < 2; c++) noisy |= measure_noisy(runs_of(x, c, i), x->repeat);
    if (noisy) trace_say(tr, measure_noisy_text(0), measure_noisy_text(1));
}

// A cached step at the last position against one at the first: whether its
// time grew with t is what the runs' intervals say, not what the FLOPs say.
static void cached_against_first(Trace *tr, const Shared *x) {
    if (x->npos < 2) return;
    int last = x->npos - 1;
    char en[96], zh[96];
    snprintf(en, sizeof en, "a cached step at t = %d against one at t = %d", x->pos[last], x->pos[0]);
    snprintf(zh, sizeof zh, "t = %d 处使用缓存的一步，与 t = %d 处相比", x->pos[last], x->pos[0]);
    trace_comparison(tr, "cached_last_against_first", runs_of(x, 1, 0), x->repeat, runs_of(x, 1, last), x->repeat, en,
                     zh);
}

// The positions timed into x->pos, smallest first: 16, T/4, T/2, 3T/4 and
// the last position (16, 64, 128, 192, 255), those from the prompt's end
// p to the last. Returns how many.
static int time_positions(Shared *x) {
    int npos = 0;
    for (int i = 0; i <= 4 && npos < MAX_POS; i++) {
        int t = i == 0 ? 16 : i * x->g.T / 4;
        if (i == 4) t = x->last;
        if (t < x->p || t > x->last || (npos && x->pos[npos - 1] >= t)) continue;
        x->pos[npos++] = t;
    }
    return npos;
}

// One forward pass at each of the npos positions, largest first, timed
// repeat times each way in turn: the runs, their medians (x->sec), and the
// logits of both ways there (the cached run's from the generation).
static void time_forwards(Shared *x, int npos) {
    GptConfig g = x->g;
    for (int i = npos - 1; i >= 0; i--) {
        int t = x->pos[i];
        Forward nc = {&x->s, &x->m, x->tokens, t + 1, 0, x->nc_logits + (size_t)i * g.V},
                c = {&x->s, &x->m, x->tokens + t, 1, t, NULL};
        measure_interleaved(runs_of(x, 0, i), runs_of(x, 1, i), MEASURE_WARMUP, x->repeat, forward_run, &nc,
                            forward_run, &c);
        for (int k = 0; k < 2; k++) x->sec[k][i] = stats_of(runs_of(x, k, i), x->repeat).median;
        // The cached run's own logits at t, drawn from during the generation.
        memcpy(x->c_logits + (size_t)i * g.V, x->rec.logits + (size_t)(t - x->p + 1) * g.V,
               sizeof(float) * (size_t)g.V);
    }
}

// The table of the times at the npos positions (those of SHOWN_T and the
// last), with each ratio; JSON gets every position's runs and comparison.
static void time_table(Trace *tr, const Shared *x, int npos) {
    const int *pos = x->pos;
    int repeat = x->repeat;
    // Time per token at the table's positions: text in µs or ms, JSON in
    // seconds.
    static const TraceColumn TIME_COLS[] = {
        {"t", "t", 5, 1, NULL},
        {"no cache", "不使用缓存", 28, 1, "nocache_seconds"},
        {"cache", "使用缓存", 28, 1, "cache_seconds"},
        {"ratio", "倍数", 13, 1, "ratio"},
    };
    static const TraceTable TIMES = {"per_token", 4, TIME_COLS};
    trace_say(tr, "", "");
    trace_table_head(tr, &TIMES);
    for (int i = 0; i < npos; i++) {
        char name[32], a[104], b[104];
        snprintf(name, sizeof name, "per_token[t=%d]", pos[i]);
        for (int c = 0; c < 2 && tr->format == FORMAT_JSON; c++) {   // text: the table below
            trace_run(tr, RUNS[c]);
            trace_measure(tr, name, runs_of(x, c, i), repeat);
        }
        trace_run(tr, NULL);
        snprintf(name, sizeof name, "speedup[t=%d]", pos[i]);
        Stats s0 = stats_of(runs_of(x, 0, i), repeat), s1 = stats_of(runs_of(x, 1, i), repeat);
        MeasureRatio r = measure_ratio(s0, s1);
        if (tr->format == FORMAT_JSON) trace_comparison_of(tr, name, r, measure_verdict(runs_of(x, 0, i), repeat, runs_of(x, 1, i), repeat), NULL, NULL);
        int in_table = 0;
        for (size_t k = 0; k < sizeof SHOWN_T / sizeof SHOWN_T[0]; k++) in_table |= pos[i] == SHOWN_T[k];
        if (in_table || i == npos - 1) {
            char t[16], ratio[48];
            snprintf(t, sizeof t, "%d", pos[i]);
            time_cell(a, sizeof a, tr, runs_of(x, 0, i), repeat, 1);
            time_cell(b, sizeof b, tr, runs_of(x, 1, i), repeat, 1);
            char xe[32];
            if (tr->format == FORMAT_TEXT) snprintf(ratio, sizeof ratio, "%sx", measure_ratio_text(xe, sizeof xe, r));
            else snprintf(ratio, sizeof ratio, "%.9g", r.x);
            const char *row[] = {t, a, b, ratio};
            trace_table_row(tr, &TIMES, row);
        }
    }
}

// Time per token at a few positions, largest first (a cached step at t
// leaves the cache holding 0 .. t, all a smaller t needs): 16, T/4, T/2,
// 3T/4 and the last position (16, 64, 128, 192, 255).
static void time_per_token(Shared *x, Trace *tr) {
    GptConfig g = x->g;
    float *nc_logits = x->nc_logits, *c_logits = x->c_logits;
    int repeat = x->repeat;
    int npos = time_positions(x);
    trace_heading(tr, "Time per token", "每个 token 的耗时");
    trace_sayf(tr,
               "Each time is the median, with min … max, of %d runs of one forward pass (--repeat N), on %d thread%s,\n"
               "after a warm-up, the two ways taking turns: without the cache forward(tokens[0:t+1]), with it\n"
               "forward(tokens[t], offset t).",
               "每个时间是单次前向计算 %d 次运行的中位数，附最小 … 最大（--repeat N），%d 个线程%s，先热身，\n"
               "两种方式轮流运行：不使用缓存 forward(tokens[0:t+1])，使用缓存 forward(tokens[t], offset t)。",
               repeat, pool_threads(x->s.pool), pool_threads(x->s.pool) == 1 ? "" : trace_text(tr, "s", ""));
    trace_machine(tr, measure_machine());
    time_forwards(x, npos);
    time_table(tr, x, npos);
    x->npos = npos;
    cached_against_first(tr, x);
    time_chart(tr, x);
    charts_time_per_token(tr, x->pos, x->npos, (const double *const[]){runs_of(x, 0, 0), runs_of(x, 1, 0)}, x->repeat);
    noisy_note(tr, x);
    int sh[2] = {npos, g.V};
    Tensor l0 = tensor_view(nc_logits, 2, sh), l1 = tensor_view(c_logits, 2, sh);
    trace_compare(tr, "logits", trace_text(tr, "logits at these positions without the cache", "这些位置不使用缓存时的 logits"),
                  &l0, trace_text(tr, "with the cache", "使用缓存时"), &l1);
    trace_pause(tr);
}

// What this run's two GFLOP/s rates support about the paragraph above: the
// words follow the ratio's interval (x ± e), never a fixed sentence.
static void bound_verdict(Trace *tr, int rows, MeasureRatio rates) {
    switch (measure_verdict_ratio(rates)) {
    case MEASURE_FASTER:
        trace_sayf(tr, "This run shows it: the %d rows did more arithmetic a second than one cached row.",
                   "这次运行印证了这一点：%d 行每秒完成的运算多于使用缓存的一行。", rows);
        break;
    case MEASURE_SAME:
        trace_say(tr, "This run does not show it: the two rates are the same within noise (a busy machine blurs them;\n"
                      "run it again, or with --repeat 11).",
                  "这次运行没有显示出来：两个速率在噪声范围内相同（机器繁忙会掩盖差别；\n请再运行一次，或加 --repeat 11）。");
        break;
    case MEASURE_SLOWER:
        trace_say(tr, "This run contradicts it: one cached row ran at the higher rate. Other programs took the processor\n"
                      "during the many-row runs; run it again on a quieter machine.",
                  "这次运行与此相反：使用缓存的一行速率更高。多行运行时其他程序占用了处理器；\n请在更空闲的机器上再运行一次。");
        break;
    default:
        trace_say(tr, "One run of each: too few to say what this machine shows.",
                  "每种只运行了一次：次数太少，无法判断这台机器的表现。");
    }
}

// Prefill against decode: FLOPs per byte of weights read.
static void prefill_against_decode(Shared *x, Trace *tr) {
    GptConfig g = x->g;
    GptState *s = &x->s;
    const GptModel *m = &x->m;
    const int *tokens = x->tokens;
    int npos = x->npos;
    int p = x->p, repeat = x->repeat;
    int *pos = x->pos;
    double (*sec)[MAX_POS] = x->sec;
    trace_heading(tr, "Prefill against decode: FLOPs per byte of weights read", "预填充与解码：每读取一个字节的权重做多少次运算");
    Forward prompt = {s, m, tokens, p, 0, NULL};
    measure_interleaved(runs_of(x, 0, MAX_POS), NULL, MEASURE_WARMUP, repeat, forward_run, &prompt, NULL, NULL);
    trace_table_head(tr, &KINDS);
    show_kind(tr, "prefill", "prefill of the prompt", "预填充：提示词", g, p, 0, runs_of(x, 0, MAX_POS), repeat);
    show_kind(tr, "prefill-context", "no cache at the last position", "不使用缓存：最后一个位置", g, pos[npos - 1] + 1, 0,
              runs_of(x, 0, npos - 1), repeat);
    show_kind(tr, "decode", "cached step at the last position", "使用缓存：最后一个位置", g, 1, pos[npos - 1],
              runs_of(x, 1, npos - 1), repeat);
    char range[96];
    measure_spread_text(range, sizeof range, stats_of(runs_of(x, 0, MAX_POS), repeat));
    trace_sayf(tr, "(time: the median of %d runs, \"!\" where they disagree; the prefill's ran %s;\n"
                   "the other two rows' ranges are in the time table above)",
               "（耗时：%d 次运行的中位数，各次相差过大的标 \"!\"；预填充的范围：%s；\n"
               "另外两行的范围见上面的耗时表）",
               repeat, range);
    int tl = pos[npos - 1];
    // the decode row's "W MB": what a cached step reads of the weights
    double weights_mb = gpt_cost(g, 1, tl).weight_bytes * 1e-6;
    double flops_many = flops_total(count_flops(g, tl + 1, 0)), flops_one = flops_total(count_flops(g, 1, tl));
    double rate_many = flops_many / sec[0][npos - 1];
    double rate_one = flops_one / sec[1][npos - 1];
    // The rates' ratio is the FLOPs' ratio times the times' (one / many), with the times' error.
    MeasureRatio times = measure_ratio(stats_of(runs_of(x, 1, npos - 1), repeat), stats_of(runs_of(x, 0, npos - 1), repeat));
    double scale = flops_many / flops_one;
    MeasureRatio rates = measure_ratio_of(times.x * scale, times.e * scale, times.n);
    trace_comparison_of(tr, "gflop_per_s_ratio", rates, measure_verdict_ratio(rates), NULL, NULL);
    char xe[32];
    trace_sayf(tr,
               "\nMeasured here: %d rows at once ran at %.2f GFLOP/s, one cached row at %.2f GFLOP/s, a ratio of\n"
               "%s x from the same weights (± from the runs' spread; --repeat 11 narrows it).",
               "\n这里实测：一次 %d 行达到 %.2f GFLOP/s，使用缓存的一行 %.2f GFLOP/s，同样的权重下相差\n"
               "%s 倍（± 来自各次运行的离散程度；--repeat 11 会更窄）。",
               tl + 1, rate_many * 1e-9, rate_one * 1e-9, measure_ratio_text(xe, sizeof xe, rates));
    trace_sayf(tr,
               "\nA cached step (decode) reads %.2f MB of weights (every block's and the head's, and one row of each\n"
               "embedding: its W MB above) to do about 2 FLOPs per weight: about 0.5 FLOP per byte. The\n"
               "processor could do far more arithmetic per byte than that, so decode should be limited by how\n"
               "fast memory delivers the weights (memory-bandwidth bound). A step of many rows (the prefill, or\n"
               "a step without the cache) uses each weight once per row, so its FLOPs per byte grow with the\n"
               "rows and it should be limited by the arithmetic instead (compute bound), at a higher GFLOP/s.\n"
               "(A small model may sit partly in the processor's caches, so its GB/s can exceed the memory's.)",
               "\n使用缓存的一步（解码）要读取 %.2f MB 权重（每个模块和输出层的全部权重，加上每个嵌入表的一行：\n"
               "即上表的“权重 MB”），每个权重只做约 2 次运算：约每字节 0.5 次。\n"
               "处理器每字节能做的运算远多于此，所以解码应当受限于内存送来权重的速度（内存带宽受限）。\n"
               "多行的一步（预填充，或不使用缓存的一步）每个权重每行用一次，每字节的运算数随行数增长，\n"
               "于是应当受限于运算本身（计算受限），GFLOP/s 更高。（小模型可能部分放在处理器缓存里，\n"
               "所以 GB/s 可能超过内存带宽。）",
               weights_mb);
    bound_verdict(tr, tl + 1, rates);
    trace_sayf(tr,
               "\nLesson 4 stops at the context (%d positions). Past it the chapter drops the cache and recomputes\n"
               "the last %d tokens at every step, so both ways cost the same there: `kvdemo lesson 10 --steps 300`.",
               "\n第 4 课在上下文长度（%d 个位置）处停止。超过之后，第 10 课的章节会清空缓存，每一步重算最后\n"
               "%d 个 token，两种方式的代价相同：`kvdemo lesson 10 --steps 300`。",
               g.T, g.T);
}

int lesson4_run(const Options *opt, Trace *tr) {
    Shared x = {.repeat = opt->repeat > 0 ? opt->repeat : DEFAULT_REPEAT};
    int random_model;
    int rc = gptsetup_lesson(&x.m, &random_model, &x.tokens, &x.p, opt, "4");
    if (rc) return rc;
    GptConfig g = x.g = x.rec.cfg = x.m.cfg;
    int p = x.p;
    // Generate up to the end of the context: the last step feeds position T - 1.
    int max_steps = g.T - p + 1;
    int steps = opt->steps > 0 && opt->steps < max_steps ? opt->steps : max_steps;
    if (steps < 2) steps = 2;   // the prefill, then at least one cached step
    if (opt->steps > max_steps)
        fileio_error(tr->lang, "lesson 4 stops at the context: %d steps, not %d (lesson 10 goes past it)",
                     "第 4 课到上下文的尽头就停：%d 步，而不是 %d 步（第 10 课会越过它）", max_steps, opt->steps);
    x.steps = steps;

    x.rec.n = malloc(sizeof(int) * (size_t)steps);
    x.rec.offset = malloc(sizeof(int) * (size_t)steps);
    x.rec.logits = malloc(sizeof(float) * (size_t)steps * (size_t)g.V);
    x.samples = malloc(sizeof(double) * 2 * (MAX_POS + 1) * (size_t)x.repeat);
    x.nc_logits = malloc(sizeof(float) * MAX_POS * (size_t)g.V);
    x.c_logits = malloc(sizeof(float) * MAX_POS * (size_t)g.V);
    if (!x.rec.n || !x.rec.offset || !x.rec.logits || !x.samples || !x.nc_logits || !x.c_logits ||
        gpt_state_init(&x.s, g) || !(x.s.pool = pool_new_for(opt->threads, gpt_row_work(g)))) {
        fileio_error(tr->lang, "out of memory", "内存不足");
        rc = 1;
        goto done;
    }
    x.last = p - 1 + steps - 1;

    lessons_heading(tr);
    trace_say(tr,
              "The article: the cache avoids recomputing keys and values at every sampled token, and so saves\n"
              "much computing time. Here it is counted and timed on the char GPT of lesson 10.",
              "原文：“避免每次采样token时重新计算键值向量，利用预先计算好的k值和v值，可以节省大量计算时间”。\n"
              "这里在第 10 课的字符级 GPT 上把它数出来、测出来。");
    trace_sayf(tr, "The model: context %d, embedding %d, %d heads, %d blocks, %d characters (%zu parameters).",
               "模型：上下文 %d，嵌入 %d，%d 个头，%d 个模块，词表 %d 个字符（%zu 个参数）。", g.T, g.C, g.H, g.L, g.V,
               x.m.num_params);
    if (random_model) {
        fileio_error(tr->lang, "%s is missing; lesson 4 runs a random model", "找不到 %s；第 4 课改用随机模型", GPT_SHIPPED_MODEL);
        trace_say(tr, "No trained model was found: the weights are random. The costs are the same.",
                  "没有找到训练好的模型：权重是随机的。计算量和耗时与训练好的模型相同。");
    }
    trace_count(tr, "n_layer", g.L, NULL, NULL);
    trace_count(tr, "n_embd", g.C, NULL, NULL);
    trace_count(tr, "n_head", g.H, NULL, NULL);
    trace_count(tr, "vocab_size", g.V, NULL, NULL);
    trace_count(tr, "context", g.T, NULL, NULL);
    trace_count(tr, "prompt_tokens", p, NULL, NULL);
    trace_count(tr, "steps", steps, NULL, NULL);

    // ------------------------------------------------------------------------
    // The generation, with the cache, to the end of the context.
    Sampler sampler;
    float temperature = opt->temperature >= 0 ? (float)opt->temperature : 1.0f;
    if (sampler_init(&sampler, g.V, temperature, opt->top_k, (uint32_t)opt->seed)) {
        fileio_error(tr->lang, "out of memory", "内存不足");
        rc = 1;
        goto done;
    }
    gpt_generate(x.tokens, &x.s, &x.m, &sampler, p, steps, 1, record_step, &x.rec);
    sampler_free(&sampler);
    if ((rc = flops_per_token(&x, tr))) goto done;
    time_per_token(&x, tr);
    prefill_against_decode(&x, tr);
done:
    free(x.rec.n);
    free(x.rec.offset);
    free(x.rec.logits);
    free(x.samples);
    free(x.nc_logits);
    free(x.c_logits);
    free(x.tokens);
    pool_free(x.s.pool);
    gpt_state_free(&x.s);
    gpt_free(&x.m);
    return rc;
}
