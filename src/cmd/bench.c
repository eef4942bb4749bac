// bench — `kvdemo bench`: the chapter's exercise timed so that a class can
// trust it.
//
// What it measures, in this order:
//   1. the machine: its FMA peak (a loop of fused multiply-adds in
//      registers) and its memory bandwidth (memcpy of 64 MB), and how long
//      the model takes to open;
//   2. the chapter's exercise: both ways over growing lengths (--steps
//      LIST, by default a lesson's worth: 16, 32, 64, 128, 250), each time
//      per token beside the total; the longest length is the headline, with
//      the matmuls' GFLOP/s and the bytes read per second as fractions of
//      those two limits (it is not timed again on its own);
//   3. with --train, training steps of the same shape.
// Every length is timed --repeat times (default 3), one run of each length
// per round, so that a busy moment spreads over all the lengths instead of
// spoiling one; before the first round, one short warm-up generation each
// way (WARMUP_TOKENS, not counted) brings the model's pages and the caches
// in. Times are reported as hyperfine does: mean ± σ and min … max (the
// CSV adds the medians), with a warning when the runs disagree too much to
// be trusted, and ratios with only the digits the spread allows (stats.h).
// While it runs, a progress line on a terminal's stderr says what is being
// timed and about how long is left. This keeps the default bench inside a
// lesson's minute even on a machine that others are using.
#include "bench.h"

#include "benchmm.h"
#include "benchsvg.h"
#include "bigmem.h"
#include "fileguard.h"
#include "fileio.h"
#include "flash.h"
#include "gptsetup.h"
#include "kvcmd.h"
#include "kvquant.h"
#include "measure.h"
#include "ops.h"
#include "sampler.h"
#include "stats.h"
#include "timer.h"
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { WARMUP_TOKENS = 16, MAX_LENGTHS = 64, BAR_WIDTH = 12 };
enum { TRAIN_BATCH = 16, TRAIN_STEPS = 3 };

// ----------------------------------------------------------------------------
// The progress line: what is being timed and about how long is left, on a
// terminal only (redrawn in place); nothing when stderr is a file or a pipe,
// so that logs and scripts stay clean.

typedef struct {
    int tty, zh;   // zh: the line in Chinese (--lang zh)
    double start;
    // Seconds per unit of estimated work, per mode, once a run of it has
    // been timed: without the cache a unit is a token fed through the model
    // (a step feeds the whole window), with it a step.
    double work_done[2], seconds_done[2];
    double work_left[2];   // of everything not yet run
} Progress;

static void progress_show(const Progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress_show(const Progress *p, const char *fmt, ...) {
    if (!p->tty) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("\r\x1b[K", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    // The time left: each mode's remaining work at the rate measured so
    // far; unknown until both modes have been timed once.
    if (p->seconds_done[0] > 0 && p->seconds_done[1] > 0) {
        double left = 0;
        for (int c = 0; c < 2; c++) left += p->work_left[c] * p->seconds_done[c] / p->work_done[c];
        if (left >= 1) fprintf(stderr, p->zh ? "（大约还剩 %.0f 秒）" : "  (about %.0f s left)", ceil(left));
        else fputs(p->zh ? "（不到一秒就完成）" : "  (less than a second left)", stderr);
    }
    fflush(stderr);
}

static void progress_end(const Progress *p) {
    if (p->tty) fputs("\r\x1b[K", stderr), fflush(stderr);
}

// The work of one generation of `steps` tokens after n_prompt, as the
// chapter's generate feeds it (see gpt_generate): the units of Progress.
static double generation_work(int T, int n_prompt, int steps, int use_cache) {
    double work = 0;
    for (int k = 0; k < steps; k++) {
        int len = n_prompt + k;
        work += use_cache ? (k == 0 || len > T ? (len < T ? len : T) : 1) : (len < T ? len : T);
    }
    return work;
}

// ----------------------------------------------------------------------------
// Measurements

// One measured generation.
typedef struct {
    int steps, use_cache;
    double *samples;         // (repeat) seconds of each timed run
    Stats st;                // of samples
    double matmul_flops;     // of one run
    double bytes_read;       // weights and cache, of one run
    double reset_seconds;    // of the last run: steps past the context that recompute the window
    int reset_steps;         //   (with the cache; the chapter's reset)
} Measure;

typedef struct {
    GptConfig cfg;
    int use_cache;
    double flops, bytes, reset_seconds;
    int reset_steps;
} CostCtx;

static int add_cost(void *ctx, const GptStep *st) {
    CostCtx *c = ctx;
    GptCost k = gpt_cost(c->cfg, st->n, st->offset);
    c->flops += k.matmul_flops;
    c->bytes += k.weight_bytes + k.cache_bytes;
    if (c->use_cache && !st->cached && st->step > 0) {
        c->reset_seconds += st->seconds;
        c->reset_steps++;
    }
    return 0;
}

typedef struct {
    GptState *s;
    const GptModel *m;
    int *tokens, n_prompt;
    const Options *opt;
    int repeat;
    Progress *progress;
} Bench;

// One timed generation of m->steps tokens by b: run `run` of m (or, with
// run < 0, a warm-up whose time is not kept).
static int measure_run(Bench *b, Measure *m, int run, const char *what) {
    float temperature = b->opt->temperature >= 0 ? (float)b->opt->temperature : 1.0f;
    CostCtx c = {.cfg = b->m->cfg, .use_cache = m->use_cache};
    double work = generation_work(b->m->cfg.T, b->n_prompt, m->steps, m->use_cache);
    Progress *p = b->progress;
    if (run < 0) progress_show(p, p->zh ? "bench：热身，%s" : "bench: warm-up, %s", what);
    else progress_show(p, p->zh ? "bench：第 %d 轮，共 %d 轮，%s" : "bench: round %d of %d, %s", run + 1, b->repeat, what);
    Sampler sampler;
    if (sampler_init(&sampler, b->m->cfg.V, temperature, b->opt->top_k, (uint32_t)b->opt->seed)) {
        fileio_error(b->opt->lang, "out of memory", "内存不足");
        return 1;
    }
    // The costs are counted as the steps go (a few additions a step);
    // every run does the same steps, so the last count stands.
    double t0 = timer_now();
    gpt_generate(b->tokens, b->s, b->m, &sampler, b->n_prompt, m->steps, m->use_cache, add_cost, &c);
    double t = timer_now() - t0;
    sampler_free(&sampler);
    p->work_done[m->use_cache] += work;
    p->seconds_done[m->use_cache] += t;
    p->work_left[m->use_cache] -= work;
    if (run < 0) return 0;
    m->samples[run] = t;
    m->matmul_flops = c.flops;
    m->bytes_read = c.bytes;
    m->reset_seconds = c.reset_seconds;
    m->reset_steps = c.reset_steps;
    return 0;
}

// The machine's limits, each measured repeat times: rates (per second) in
// rate[0 .. repeat-1]. The FMA loop runs 8 tasks per thread, about 4 GFLOP
// in all; the copy moves 64 MB, more than the caches hold, after one copy
// that brings the pages in. Returns 0, or -1 without memory.
enum { COPY_FLOATS = (64 << 20) / sizeof(float) };

static void machine_peak(double *rate, Pool *pool, int repeat) {
    int tasks = 8 * pool_threads(pool);
    ops_fma_loop(pool, 1 << 16, tasks);   // warm-up: the threads awake, the clock up
    for (int i = 0; i < repeat; i++) {
        double t0 = timer_now();
        double flops = ops_fma_loop(pool, 1 << 19, tasks);
        rate[i] = flops / (timer_now() - t0);
    }
}

static int machine_bandwidth(double *rate, Pool *pool, int repeat) {
    size_t bytes = sizeof(float) * COPY_FLOATS;
    float *src = bigmem_alloc(bytes), *dst = bigmem_alloc(bytes);
    if (!src || !dst) {
        bigmem_free(src, bytes);
        bigmem_free(dst, bytes);
        return -1;
    }
    for (size_t i = 0; i < COPY_FLOATS; i++) src[i] = (float)(i & 1023);
    ops_copy_loop(dst, src, pool, COPY_FLOATS);   // warm-up: every page in
    for (int i = 0; i < repeat; i++) {
        double t0 = timer_now();
        double moved = ops_copy_loop(dst, src, pool, COPY_FLOATS);
        rate[i] = moved / (timer_now() - t0);
    }
    bigmem_free(src, bytes);
    bigmem_free(dst, bytes);
    return 0;
}

// Opening the model again repeat - 1 times (the first opening is samples[0]).
static void model_reopen(double *samples, int repeat, const Options *opt) {
    for (int i = 1; i < repeat; i++) {
        GptModel again;
        double t0 = timer_now();
        if (gptsetup_model(&again, opt, 1, NULL) != 0) {
            samples[i] = samples[0];
            continue;
        }
        samples[i] = timer_now() - t0;
        gpt_free(&again);
    }
}

// Parses "16,64,256" into lengths; returns how many, or -1.
static int parse_lengths(int *out, int max, const char *list) {
    int n = 0;
    const char *p = list;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 100000 || n == max || (*end && *end != ',')) return -1;
        out[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return n;
}

// ----------------------------------------------------------------------------
// The report: three tables through the trace (trace_table_head/row: lined
// up in text, "table" and "row" events in JSON), and the sentences around them.

// The unit that suits a time of s seconds: its name, and what s is multiplied by.
static const char *time_unit(double s, double *scale) {
    if (s >= 1) return *scale = 1, "s";
    if (s >= 1e-3) return *scale = 1e3, "ms";
    return *scale = 1e6, "µs";
}

// A time in the unit that suits it: "2.61 s", "45.2 ms", "812 µs".
static const char *time_text(char *out, size_t size, double s) {
    double k;
    const char *unit = time_unit(s, &k);
    snprintf(out, size, "%.3g %s", s * k, unit);
    return out;
}

// "45.2 ± 1.2 ms" and "43.1 … 47.9 ms" of seconds, times scale (1 / tokens
// for per token), each in the unit of its larger end.
static void spread_cells(char *mean_sd, size_t a, char *range, size_t b, Stats st, double scale) {
    double k;
    const char *unit = time_unit(st.mean * scale, &k);
    double sd = st.sd * scale * k;
    snprintf(mean_sd, a, sd >= 10 ? "%.3g ± %.0f %s" : "%.3g ± %.2g %s", st.mean * scale * k, sd, unit);
    unit = time_unit(st.max * scale, &k);
    snprintf(range, b, "%.3g … %.3g %s", st.min * scale * k, st.max * scale * k, unit);
}

// The same for a rate: "512 ± 3.1 GFLOP/s" and "508 … 515 GFLOP/s".
static void rate_cells(char *mean_sd, size_t a, char *range, size_t b, Stats st, double scale, const char *unit) {
    snprintf(mean_sd, a, st.sd * scale >= 10 ? "%.4g ± %.0f %s" : "%.4g ± %.2g %s", st.mean * scale, st.sd * scale,
             unit);
    snprintf(range, b, "%.4g … %.4g %s", st.min * scale, st.max * scale, unit);
}

// A bar of c, of length proportional to value / max, at most width long.
static void bar(char *out, size_t size, char c, double value, double max, int width) {
    int n = max > 0 ? (int)lround(value / max * width) : 0;
    if (value > 0 && n == 0) n = 1;
    if (n > (int)size - 1) n = (int)size - 1;
    memset(out, c, (size_t)n);
    out[n] = '\0';
}

typedef struct {
    const GptModel *m;
    const Options *opt;
    int repeat, n_prompt, random_model;
    Stats peak, bandwidth, open;
    const Measure *head[2];   // the longest length's pair in table: the headline
    int n_lengths;
    Measure (*table)[2];
    double train_tps;   // 0 unless --train
    BenchMM mm;         // the matmuls of a full pass, timed alone (mm.tokens 0 if not run)
    int noisy;          // a timing above was marked noisy
    int tile;           // --attention flash's tile (0: plain attention)
    Pool *pool;         // the threads of every run (the state's, from --threads)
} Report;

static const char *noisy_mark(Report *r, Stats st) {
    if (!stats_noisy(st)) return "";
    r->noisy = 1;
    return "!";
}

// The machine: its FMA peak, its memory bandwidth, opening the model.
static void report_machine(Trace *tr, Report *r) {
    char a[64], b[64];
    // The machine.
    static const TraceColumn MACHINE_COLS[] = {
        {"the machine", "机器", 28, 0, "what"},
        {"mean ± σ", "均值 ± σ", 21, 0, "mean_sd"},
        {"min … max", "最小 … 最大", 22, 0, "min_max"},
        {"", "", 1, 0, "noisy"},
    };
    static const TraceTable MACHINE = {"machine", 4, MACHINE_COLS};
    trace_table_head(tr, &MACHINE);
    rate_cells(a, sizeof a, b, sizeof b, r->peak, 1e-9, "GFLOP/s");
    trace_table_row(tr, &MACHINE, (const char *const[]){trace_text(tr, "FMA peak (register loop)", "FMA 峰值（寄存器循环）"),
                                                         a, b, noisy_mark(r, r->peak)});
    rate_cells(a, sizeof a, b, sizeof b, r->bandwidth, 1e-9, "GB/s");
    trace_table_row(tr, &MACHINE, (const char *const[]){trace_text(tr, "memory (memcpy of 64 MB)", "内存（memcpy 64 MB）"),
                                                         a, b, noisy_mark(r, r->bandwidth)});
    if (r->random_model) {
        trace_table_row(tr, &MACHINE, (const char *const[]){trace_text(tr, "opening the model", "打开模型"),
                                                             trace_text(tr, "(a random model)", "（随机模型）"), "", ""});
    } else {
        spread_cells(a, sizeof a, b, sizeof b, r->open, 1);
        trace_table_row(tr, &MACHINE, (const char *const[]){trace_text(tr, "opening the model", "打开模型"), a, b,
                                                             noisy_mark(r, r->open)});
    }
}

// The chapter's run: the longest length both ways, and what the cache gains.
static void report_headline(Trace *tr, Report *r) {
    GptConfig g = r->m->cfg;
    const char *prompt = gptsetup_prompt_text(r->opt);
    char a[64], b[64];
    // The chapter's run.
    static const TraceColumn HEAD_COLS[] = {
        {"", "", 28, 0, "run"},
        {"mean ± σ", "均值 ± σ", 21, 0, "mean_sd"},
        {"min … max", "最小 … 最大", 22, 0, "min_max"},
        {"per token", "每个 token", 9, 1, "per_token"},
        {"", "", 1, 0, "noisy"},
    };
    static const TraceTable HEAD = {"headline", 5, HEAD_COLS};
    int head_steps = r->head[0]->steps;
    trace_sayf(tr, "\n%d tokens after \"%s\" (the longest length below):", "\n%d 个 token，接在 \"%s\" 之后（即下表最长的一行）：",
               head_steps, prompt);
    trace_table_head(tr, &HEAD);
    for (int c = 0; c < 2; c++) {
        const Measure *h = r->head[c];
        char per[32];
        spread_cells(a, sizeof a, b, sizeof b, h->st, 1);
        trace_run(tr, c ? "cache" : "no-cache");
        trace_table_row(tr, &HEAD, (const char *const[]){
                                       c ? trace_text(tr, "with the cache", "使用缓存") : trace_text(tr, "without the cache", "不使用缓存"),
                                       a, b, time_text(per, sizeof per, h->st.mean / head_steps), noisy_mark(r, h->st)});
        double gflops = h->matmul_flops / h->st.mean * 1e-9, gbps = h->bytes_read / h->st.mean * 1e-9;
        trace_sayf(tr, "      %.0f tokens/s; matmuls %.1f GFLOP/s = %.0f%% of the FMA peak; reads %.2f GB/s = %.0f%% of memcpy",
                   "      每秒 %.0f 个 token；矩阵乘 %.1f GFLOP/s = FMA 峰值的 %.0f%%；读取 %.2f GB/s = memcpy 的 %.0f%%",
                   head_steps / h->st.mean, gflops, 100 * gflops / (r->peak.mean * 1e-9), gbps,
                   100 * gbps / (r->bandwidth.mean * 1e-9));
        if (c == 0 && r->mm.tokens > 0)
            trace_sayf(tr, "      matmuls alone (a %d-token pass): %.1f GFLOP/s median, %.1f best = %.0f%% of the FMA loop run beside them",
                       "      单独计时矩阵乘（%d 个 token 的一次完整计算）：中位数 %.1f GFLOP/s，最好 %.1f = 同时运行的 FMA 循环的 %.0f%%",
                       r->mm.tokens, r->mm.median_gflops, r->mm.best_gflops, 100 * r->mm.median_fraction);
        // The FMA loop is the peak: matmuls well above it mean the loop was
        // slowed (a check that once was a test, which a busy machine failed).
        if (c == 0 && r->mm.tokens > 0 && r->mm.median_fraction > 1.1)
            trace_say(tr, "      (more than 10% above the FMA loop, which should be the peak: the loop was slowed by other\n"
                          "      work on the cores; run again on a quieter machine)",
                      "      （比本应是峰值的 FMA 循环还快 10% 以上：FMA 循环被核上的其他任务拖慢了；请在较空闲的机器上重跑）");
    }
    trace_run(tr, NULL);
    char said[128];
    const Measure *h0 = r->head[0], *h1 = r->head[1];
    MeasureVerdict v = measure_verdict(h0->samples, r->repeat, h1->samples, r->repeat);
    measure_compare_text(said, sizeof said, measure_ratio(h0->st, h1->st), v, tr->lang == LANG_ZH);
    trace_sayf(tr, "  with the cache: %s (the chapter's numpy, 256 tokens: 4.93 s and 0.53 s, 9.3x)\n"
                   "  (reads count the weights and the cache once per step; a cached step's weights, %.2f MB,\n"
                   "  can partly stay in the last-level cache, so reads may pass the memcpy rate)",
               "  使用缓存：%s（numpy 章节生成 256 个 token：4.93 秒与 0.53 秒，9.3 倍）\n"
               "  （读取量按每步读一次权重和缓存计算；缓存步的权重 %.2f MB 可能部分留在末级缓存里，\n"
               "  所以读取速度可能超过 memcpy）",
               said, gpt_cost(g, 1, 0).weight_bytes * 1e-6);   // lesson 4's decode row: its W MB
    if (r->train_tps > 0)
        trace_sayf(tr, "\ntraining, batch %d x %d: %.0f tokens/s (about %.0f GFLOP/s counting 6 x parameters per token)",
                   "\n训练，批 %d x %d：每秒 %.0f 个 token（按每个 token 6 x 参数量计，约 %.0f GFLOP/s）", TRAIN_BATCH, g.T,
                   r->train_tps, 6.0 * (double)r->m->num_params * r->train_tps * 1e-9);
}

// Both ways over the lengths, with a bar of the time per token (which
// stays visible from the shortest run to the longest).
static void report_lengths(Trace *tr, Report *r) {
    char a[64], b[64];
    static const TraceColumn LEN_COLS[] = {
        {"tokens", "token", 6, 1, NULL},
        {"run", "运行", 10, 0, NULL},
        {"mean ± σ", "均值 ± σ", 17, 0, "mean_sd"},
        {"min … max", "最小 … 最大", 18, 0, "min_max"},
        {"per token", "每个 token", 9, 1, "per_token"},
        {"speedup", "加速", 14, 1, NULL},
        {" per token: # no cache, = cache", " 每个 token：# 不使用缓存，= 使用缓存", 0, 0, "chart"},
    };
    static const TraceTable LENGTHS = {"lengths", 7, LEN_COLS};
    trace_say(tr, "", "");
    trace_table_head(tr, &LENGTHS);
    double per_max = 0;
    for (int i = 0; i < r->n_lengths; i++)
        for (int c = 0; c < 2; c++) per_max = fmax(per_max, r->table[i][c].st.mean / r->table[i][c].steps);
    for (int i = 0; i < r->n_lengths; i++) {
        for (int c = 0; c < 2; c++) {
            const Measure *x = &r->table[i][c];
            char tokens[16], per[32], speed[32] = "", chart[64], bars[32];
            spread_cells(a, sizeof a, b, sizeof b, x->st, 1);
            tokens[0] = '\0';   // the count once per length, on its first line
            if (!c) snprintf(tokens, sizeof tokens, "%d", x->steps);
            if (c) {   // x ± e, or x alone where the runs decide (measure_ratio_beside)
                const Measure *w = &r->table[i][0];
                MeasureVerdict v = measure_verdict(w->samples, r->repeat, x->samples, r->repeat);
                char q[24];
                snprintf(speed, sizeof speed, "%s x", measure_ratio_beside(q, sizeof q, measure_ratio(w->st, x->st), v));
            }
            bar(bars, sizeof bars, c ? '=' : '#', x->st.mean / x->steps, per_max, BAR_WIDTH);
            snprintf(chart, sizeof chart, " %s%s", bars, stats_noisy(x->st) ? "  !" : "");
            r->noisy |= stats_noisy(x->st);
            trace_run(tr, c ? "cache" : "no-cache");
            trace_table_row(tr, &LENGTHS, (const char *const[]){tokens, c ? trace_text(tr, "cache", "使用缓存") : trace_text(tr, "no cache", "不使用缓存"),
                                                                 a, b, time_text(per, sizeof per, x->st.mean / x->steps), speed, chart});
        }
    }
    trace_run(tr, NULL);
    if (r->noisy)
        trace_sayf(tr, "\n! the runs of a line marked ! disagree by more than %d%%: the machine was busy; rerun",
                   "\n! 标 ! 的行，各次运行相差超过 %d%%：机器当时很忙，请再运行一次", 10);
}

// Past the context: the chapter's reset, and what it cost; or that no
// length here reaches it.
static void report_resets(Trace *tr, Report *r) {
    GptConfig g = r->m->cfg;
    int resets = 0;
    for (int i = 0; i < r->n_lengths; i++) resets += r->table[i][1].reset_steps > 0;
    if (!resets) {
        trace_sayf(tr,
                   "\nEvery length here stays inside the context of %d (this %d-token prompt and at most %d\n"
                   "tokens), so the chapter's reset never runs; --steps longer than that shows it.",
                   "\n这里每个长度都在 %d 的上下文之内（这个提示词有 %d 个 token，最多再生成 %d 个），\n"
                   "所以原文的重置一次也没有发生；--steps 给出更长的长度就能看到它。",
                   g.T, r->n_prompt, g.T - r->n_prompt + 1);
        return;
    }
    trace_sayf(tr,
               "\nOnce the prompt and the generated tokens together pass %d (with this %d-token prompt,\n"
               "from step %d on) the chapter's generate drops the cache and recomputes the last %d tokens\n"
               "in full at every step, so from there both ways cost the same per token.",
               "\n提示词与生成的 token 合计超过 %d 个后（这个提示词有 %d 个 token，从第 %d 步起），原文的 generate\n"
               "丢掉缓存，每一步完整重算最后 %d 个 token，所以从那以后两种方式每个 token 的代价相同。",
               g.T, r->n_prompt, g.T - r->n_prompt + 2, g.T);
    for (int i = 0; i < r->n_lengths; i++) {
        const Measure *x = &r->table[i][1];
        if (x->reset_steps == 0) continue;
        double total = x->samples[r->repeat - 1];
        char reset[32], all[32];
        trace_sayf(tr, "  %d tokens with the cache: %d steps recomputed the window, %s of %s (%.0f%%)",
                   "  使用缓存生成 %d 个 token：%d 步重算了窗口，用时 %s，共 %s（%.0f%%）", x->steps, x->reset_steps,
                   time_text(reset, sizeof reset, x->reset_seconds), time_text(all, sizeof all, total),
                   total > 0 ? 100 * x->reset_seconds / total : 0);
    }
}

static void print_report(Trace *tr, Report *r, const GptVariant *variant) {
    GptConfig g = r->m->cfg;
    trace_sayf(tr, "kvdemo bench: T=%d C=%d H=%d L=%d V=%d (%zu parameters), %d threads;\n"
                   "every time is %d runs, after a warm-up of %d tokens each way: mean ± σ (min … max)\n",
               "kvdemo bench：T=%d C=%d H=%d L=%d V=%d（%zu 个参数），%d 个线程；\n"
               "每个时间都是 %d 次运行（之前两种方式各热身 %d 个 token）：均值 ± σ（最小 … 最大）\n",
               g.T, g.C, g.H, g.L, g.V, r->m->num_params, pool_threads(r->pool), r->repeat, WARMUP_TOKENS);
    if (variant)
        trace_sayf(tr, "keys and values kept as %s (read back into floats to attend)\n",
                   "键和值按 %s 保存（做注意力时读回成浮点数）\n", kvquant_name(variant->kv_dtype));
    if (r->tile)
        trace_sayf(tr, "attention: flash, tiles of %d keys (cached steps by flash-decoding)\n",
                   "注意力：flash，每块 %d 个键（缓存步用 flash-decoding）\n", r->tile);
    report_machine(tr, r);
    report_headline(tr, r);
    report_lengths(tr, r);
    report_resets(tr, r);
}

static void print_json(Trace *tr, const Report *r, const double *open_s) {
    // the limits as rates (their means), and the seconds of each run of the loops
    trace_value(tr, "fma_peak_gflops", r->peak.mean * 1e-9, "GFLOP/s", NULL, NULL);
    trace_value(tr, "memcpy_gbps", r->bandwidth.mean * 1e-9, "GB/s", NULL, NULL);
    for (int k = 0; k < 2; k++) {
        double spread[3] = {(k ? r->bandwidth : r->peak).sd, (k ? r->bandwidth : r->peak).min,
                            (k ? r->bandwidth : r->peak).max};
        static const char *const names[2][3] = {{"fma_peak_gflops_sd", "fma_peak_gflops_min", "fma_peak_gflops_max"},
                                                {"memcpy_gbps_sd", "memcpy_gbps_min", "memcpy_gbps_max"}};
        for (int j = 0; j < 3; j++) trace_value(tr, names[k][j], spread[j] * 1e-9, k ? "GB/s" : "GFLOP/s", NULL, NULL);
    }
    if (!r->random_model) trace_timing_stats(tr, "open_model", open_s, r->repeat);
    if (r->train_tps > 0) trace_value(tr, "train_tokens_per_s", r->train_tps, "tokens/s", NULL, NULL);
    if (r->mm.tokens > 0) {
        trace_value(tr, "matmul_pass_tokens", r->mm.tokens, "tokens", NULL, NULL);
        trace_value(tr, "matmul_pass_gflops_median", r->mm.median_gflops, "GFLOP/s", NULL, NULL);
        trace_value(tr, "matmul_pass_gflops_best", r->mm.best_gflops, "GFLOP/s", NULL, NULL);
        trace_value(tr, "matmul_pass_fraction_of_fma", r->mm.median_fraction, "fraction", NULL, NULL);
    }
    for (int c = 0; c < 2; c++) {
        const Measure *h = r->head[c];
        trace_run(tr, c ? "cache" : "no-cache");
        // the headline's rates (its timing is its length's tokens_N below)
        double gflops = h->matmul_flops / h->st.mean * 1e-9, gbps = h->bytes_read / h->st.mean * 1e-9;
        trace_value(tr, "matmul_gflops", gflops, "GFLOP/s", NULL, NULL);
        trace_value(tr, "matmul_fraction_of_peak", gflops / (r->peak.mean * 1e-9), "fraction", NULL, NULL);
        trace_value(tr, "read_gbps", gbps, "GB/s", NULL, NULL);
        trace_value(tr, "read_fraction_of_memcpy", gbps / (r->bandwidth.mean * 1e-9), "fraction", NULL, NULL);
        for (int i = 0; i < r->n_lengths; i++) {
            const Measure *x = &r->table[i][c];
            char name[48];
            snprintf(name, sizeof name, "tokens_%d", x->steps);
            trace_timing_stats(tr, name, x->samples, r->repeat);
            snprintf(name, sizeof name, "tokens_%d_per_token", x->steps);
            trace_value(tr, name, x->st.mean / x->steps, "s", NULL, NULL);
            if (x->reset_steps) {
                snprintf(name, sizeof name, "tokens_%d_reset_seconds", x->steps);
                trace_value(tr, name, x->reset_seconds, "s", NULL, NULL);
            }
        }
    }
    trace_run(tr, NULL);
    for (int i = 0; i < r->n_lengths; i++) {
        char name[32];
        snprintf(name, sizeof name, "speedup_%d", r->table[i][0].steps);
        trace_ratio(tr, name, r->table[i][0].samples, r->repeat, r->table[i][1].samples, r->repeat, "", "");
    }
}

static void write_csv(FILE *f, const Report *r) {
    fprintf(f, "tokens,nocache_seconds,cache_seconds,speedup,nocache_tokens_per_s,cache_tokens_per_s,"
               "nocache_sd,nocache_min,nocache_max,cache_sd,cache_min,cache_max,"
               "nocache_per_token_s,cache_per_token_s,nocache_median,cache_median\n");
    for (int i = 0; i < r->n_lengths; i++) {
        const Measure *x = r->table[i];
        int n = x[0].steps;
        fprintf(f, "%d,%.6f,%.6f,%.3f,%.1f,%.1f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.9f,%.9f,%.6f,%.6f\n", n, x[0].st.mean,
                x[1].st.mean, x[0].st.mean / x[1].st.mean, n / x[0].st.mean, n / x[1].st.mean, x[0].st.sd,
                x[0].st.min, x[0].st.max, x[1].st.sd, x[1].st.min, x[1].st.max, x[0].st.mean / n,
                x[1].st.mean / n, x[0].st.median, x[1].st.median);
    }
}

static int write_svg(FILE *f, const Report *r) {
    // (n_lengths is 1 or more; through unsigned, GCC sees that no negative count reaches calloc)
    BenchSvgPoint *pt = calloc((unsigned)r->n_lengths, sizeof *pt);
    if (!pt) return -1;
    int n = 0;
    // lengths ascending, each once (the list may repeat or go down)
    for (int i = 0; i < r->n_lengths; i++) {
        int t = r->table[i][0].steps, at = 0;
        while (at < n && pt[at].tokens < t) at++;
        if (at < n && pt[at].tokens == t) continue;
        memmove(pt + at + 1, pt + at, sizeof *pt * (size_t)(n - at));
        pt[at].tokens = t;
        for (int c = 0; c < 2; c++) {
            Stats st = r->table[i][c].st;
            pt[at].mean[c] = st.mean, pt[at].min[c] = st.min, pt[at].max[c] = st.max;
        }
        n++;
    }
    char title[200];
    snprintf(title, sizeof title, "kvdemo bench: the char GPT generating after \"%s\", without and with the KV cache",
             gptsetup_prompt_text(r->opt));
    int rc = benchsvg_write(f, pt, n, title);
    int e = errno;   // the write's reason, for the message
    free(pt);
    errno = e;
    return rc;
}

// ----------------------------------------------------------------------------

// The CSV and the SVG are written through temporary files (fileio.h),
// opened now so that a path that cannot be written is found before the
// measurements, and a failed or interrupted run leaves no half-written
// file behind. Returns 0, or an exit status after one line on stderr.
static const char *const OUT_OPTION[2] = {"--csv", "--svg"};

static int open_outputs(AtomicFile out_file[2], const char *out_path[2], const Options *opt) {
    char err[512], model_buf[4096];
    FileRole outputs[2] = {{"--csv", opt->csv_path}, {"--svg", opt->svg_path}};
    FileRole model = {opt->model_path ? "--model" : fileio_text(opt->lang, "the shipped model", "自带的模型"),
                      gptsetup_model_path(opt, model_buf, sizeof model_buf)};
    if (fileguard_check(opt->lang, outputs, 2, &model, 1)) return 2;
    for (int k = 0; k < 2; k++) {
        if (!out_path[k]) continue;
        if (fileio_open(&out_file[k], out_path[k], ERR(opt->lang, err)) != 0) {
            fprintf(stderr, "kvdemo: %s %s\n", OUT_OPTION[k], err);
            if (k) fileio_abort(&out_file[0]);
            return 1;
        }
    }
    return 0;
}

// The measures (both ways over every length, repeat samples each) in
// r->table, the headline the first of the longest, and their work counted
// into the progress.
static void plan_measures(Report *r, Measure *measures, double *samples, const int *lengths, Progress *progress) {
    int n_measures = 2 * r->n_lengths, repeat = r->repeat, T = r->m->cfg.T, n_prompt = r->n_prompt;
    int longest = 0;   // the headline: the first of the longest lengths
    for (int i = 0; i < n_measures; i++) {
        Measure *x = &measures[i];
        x->steps = lengths[i / 2];
        x->use_cache = i % 2;
        x->samples = samples + (size_t)repeat * (size_t)i;
        progress->work_left[x->use_cache] += repeat * generation_work(T, n_prompt, x->steps, x->use_cache);
        if (x->steps > lengths[longest]) longest = i / 2;
    }
    r->head[0] = &r->table[longest][0], r->head[1] = &r->table[longest][1];
}

// The machine first: its FMA peak and memory bandwidth, and how long the
// model takes to open (t_open the first time), into r. open_s, peak and
// bandwidth hold repeat samples each. Returns 0, or 1 after one line on stderr.
static int measure_machine_into(Report *r, double *open_s, double *peak, double *bandwidth, double t_open,
                                Progress *progress) {
    int repeat = r->repeat;
    progress_show(progress, progress->zh ? "bench：机器的 FMA 峰值与内存带宽" : "bench: the machine's FMA peak and memory bandwidth");
    machine_peak(peak, r->pool, repeat);
    if (machine_bandwidth(bandwidth, r->pool, repeat)) {
        fileio_error(r->opt->lang, "out of memory", "内存不足");
        return 1;
    }
    open_s[0] = t_open;
    if (!r->random_model) {
        progress_show(progress, progress->zh ? "bench：打开模型" : "bench: opening the model");
        model_reopen(open_s, repeat, r->opt);
    }
    r->peak = stats_of(peak, repeat), r->bandwidth = stats_of(bandwidth, repeat);
    r->open = stats_of(open_s, r->random_model ? 1 : repeat);
    return 0;
}

// The exercise: a short warm-up each way (warm), then round after round,
// both ways over every length; then the matmuls alone and, with --train,
// training, into r. Returns 0, or an exit status after one line on stderr.
static int run_measures(Report *r, Bench *b, Measure warm[2], Measure *measures, Progress *progress) {
    int rc = 0, repeat = r->repeat, n_measures = 2 * r->n_lengths;
    const Options *opt = r->opt;
    GptConfig g = r->m->cfg;
    static const char *const WHAT[2][2] = {{"%d tokens without the cache", "%d tokens with the cache"},
                                           {"%d 个 token，不使用缓存", "%d 个 token，使用缓存"}};
    for (int i = -2; i < repeat * n_measures && !rc; i++) {
        Measure *x = i < 0 ? &warm[i + 2] : &measures[i % n_measures];
        char what[64];
        snprintf(what, sizeof what, WHAT[progress->zh][x->use_cache], x->steps);
        rc = measure_run(b, x, i < 0 ? -1 : i / n_measures, what);
    }
    for (int i = 0; i < n_measures; i++) measures[i].st = stats_of(measures[i].samples, repeat);
    // The matmuls of a full pass of the context, timed alone beside the FMA
    // loop (benchmm.h): how near the kernel comes to the peak when attention
    // and the rest are left out.
    if (!rc) {
        progress_show(progress, progress->zh ? "bench：单独计时矩阵乘" : "bench: the matmuls alone");
        if (benchmm_run(&g, r->pool, repeat, &r->mm)) r->mm.tokens = 0;
    }
    // Training speed of the same shape (--train): whole steps (forward,
    // backward, AdamW) on 16 sequences of T tokens, as the shipped model was
    // trained.
    if (!rc && opt->bench_train) {
        progress_show(progress, progress->zh ? "bench：%d 个训练步，每步 %d x %d 个 token" : "bench: %d training steps of %d x %d tokens",
                      TRAIN_STEPS, TRAIN_BATCH, g.T);
        char terr[256];
        rc = train_benchmark(g, TRAIN_BATCH, TRAIN_STEPS, opt->threads, &r->train_tps, ERR(opt->lang, terr));
        if (rc) fileio_error(opt->lang, "%s", "%s", terr);
    }
    return rc;
}

// The report (text, JSON), then the CSV and the SVG, each committed in
// place of its path; a committed path becomes NULL in out_path. Returns 0,
// or 1 after one line on stderr.
static int write_outputs(Trace *tr, Report *r, const GptVariant *variant, const double *open_s,
                         AtomicFile out_file[2], const char *out_path[2]) {
    print_report(tr, r, variant);
    if (tr->format == FORMAT_JSON) print_json(tr, r, open_s);
    if (out_path[0]) write_csv(out_file[0].f, r);
    if (out_path[1] && write_svg(out_file[1].f, r) != 0) {
        if (errno == ENOMEM) fileio_error(tr->lang, "--svg %s: out of memory", "--svg %s：内存不足", out_path[1]);
        else fileio_error(tr->lang, "--svg %s: cannot write: %s", "--svg %s：无法写入：%s", out_path[1], fileio_strerror(tr->lang, errno));
        return 1;
    }
    int rc = 0;
    char err[512];
    for (int k = 0; k < 2; k++) {
        if (!out_path[k]) continue;
        out_path[k] = NULL;
        if (fileio_commit(&out_file[k], ERR(tr->lang, err)) != 0) {
            fprintf(stderr, "kvdemo: %s %s\n", OUT_OPTION[k], err);
            rc = 1;
        }
    }
    return rc;
}

// lengths (at most MAX_LENGTHS) from --steps; returns how many, or 0 after
// one line on stderr.
static int steps_list(int *lengths, const Options *opt) {
    const char *list = opt->steps_list ? opt->steps_list : BENCH_DEFAULT_LENGTHS;
    int n_lengths = parse_lengths(lengths, MAX_LENGTHS, list);
    if (n_lengths <= 0) {
        fileio_error(opt->lang, "--steps takes a comma-separated list of lengths from 1 to 100000, e.g. 16,64,256, not '%s'",
                     "--steps 要给一串用逗号分隔的长度，每个 1 到 100000，例如 16,64,256，而不是“%s”", list);
        return 0;
    }
    return n_lengths;
}

// The model, timed (*t_open) as it opens; a random one when the shipped
// model is missing, said on stderr. Returns 0, or an exit status.
static int open_model(GptModel *m, int *random_model, double *t_open, const Options *opt) {
    double t0 = timer_now();
    int rc = gptsetup_model(m, opt, 1, random_model);
    *t_open = timer_now() - t0;
    if (!rc && *random_model)
        fileio_error(opt->lang, "%s is missing; timing a random model of the seed preset (the speed is the same)",
                     "找不到 %s；改为计时一个 seed 预设形状的随机模型（速度相同）", GPT_SHIPPED_MODEL);
    return rc;
}

// s for the runs: the threads (--threads), its attention (--attention),
// the caches of a variant (NULL: the plain cache). Returns 0, or an exit
// status after one line on stderr.
static int state_setup(GptState *s, KvVariantCaches *vc, const GptVariant *variant, const Options *opt,
                       GptConfig cfg) {
    if (gpt_state_init(s, cfg)) {
        fileio_error(opt->lang, "out of memory", "内存不足");
        return 1;
    }
    if (!(s->pool = pool_new_for(opt->threads, gpt_row_work(cfg)))) {
        fileio_error(opt->lang, "could not start %d threads", "无法启动 %d 个线程", ops_threads_asked(opt->threads));
        return 1;
    }
    int rc = gptsetup_attention(opt, s);
    if (rc) return rc;
    if (variant && kvvariant_attach(vc, s, variant)) {
        fileio_error(opt->lang, "out of memory", "内存不足");
        return 1;
    }
    return 0;
}

int bench_command(const Options *opt, Trace *tr) {
    int lengths[MAX_LENGTHS];
    int n_lengths = steps_list(lengths, opt);
    if (n_lengths <= 0) return 2;
    AtomicFile out_file[2] = {{0}, {0}};   // CSV, SVG
    const char *out_path[2] = {opt->csv_path, opt->svg_path};
    int rc = open_outputs(out_file, out_path, opt);
    if (rc) return rc;
    GptModel m;
    int random_model = 0;
    double t_open;
    rc = open_model(&m, &random_model, &t_open, opt);
    if (rc) {
        for (int k = 0; k < 2; k++)
            if (out_path[k]) fileio_abort(&out_file[k]);
        return rc;
    }
    int max_len = WARMUP_TOKENS;
    for (int i = 0; i < n_lengths; i++)
        if (lengths[i] > max_len) max_len = lengths[i];
    int repeat = opt->repeat ? opt->repeat : 3;
    int *tokens = NULL, n_prompt = 0;
    GptState s = {0};
    int n_measures = 2 * n_lengths;
    double *samples = malloc(sizeof(double) * (size_t)repeat * (size_t)(n_measures + 3));
    Measure *measures = calloc((size_t)n_measures, sizeof *measures);
    GptVariant variant;   // --kv-dtype (lesson 12)
    int use_variant;
    KvVariantCaches vc = {0};
    Progress progress = {.tty = isatty(STDERR_FILENO), .zh = tr->lang == LANG_ZH, .start = timer_now()};
    Report r = {.m = &m, .opt = opt, .repeat = repeat, .random_model = random_model, .n_lengths = n_lengths};
    if (kvcmd_variant(&variant, &use_variant, opt)) {
        rc = 2;
        goto done;
    }
    rc = gptsetup_prompt(opt->lang, &tokens, &n_prompt, &m, gptsetup_prompt_text(opt), max_len);
    if (!rc && (!samples || !measures)) {
        fileio_error(tr->lang, "out of memory", "内存不足");
        rc = 1;
    }
    if (!rc) rc = state_setup(&s, &vc, use_variant ? &variant : NULL, opt, m.cfg);
    r.tile = s.cache.tile;
    r.pool = s.pool;
    if (rc) goto done;
    r.n_prompt = n_prompt;
    r.table = (Measure(*)[2])measures;
    plan_measures(&r, measures, samples, lengths, &progress);
    Measure warm[2] = {{.steps = WARMUP_TOKENS, .use_cache = 0}, {.steps = WARMUP_TOKENS, .use_cache = 1}};
    for (int c = 0; c < 2; c++) progress.work_left[c] += generation_work(m.cfg.T, n_prompt, WARMUP_TOKENS, c);

    double *open_s = samples + (size_t)repeat * (size_t)n_measures, *peak = open_s + repeat,
           *bandwidth = peak + repeat;
    if (measure_machine_into(&r, open_s, peak, bandwidth, t_open, &progress)) {
        rc = 1;
        goto done;
    }
    gpt_pack(&m);   // for the passes of many rows (the same numbers; unpacked if no memory)

    Bench b = {&s, &m, tokens, n_prompt, opt, repeat, &progress};
    rc = run_measures(&r, &b, warm, measures, &progress);
    progress_end(&progress);
    if (rc) goto done;

    rc = write_outputs(tr, &r, use_variant ? &variant : NULL, open_s, out_file, out_path);
done:
    progress_end(&progress);
    for (int k = 0; k < 2; k++)
        if (out_path[k]) fileio_abort(&out_file[k]);
    free(samples);
    free(measures);
    free(tokens);
    kvvariant_detach(&vc);
    pool_free(s.pool);
    gpt_state_free(&s);
    gpt_free(&m);
    return rc;
}
