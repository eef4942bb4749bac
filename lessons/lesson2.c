// lesson 2 — 为什么要进行 KV Cache？ (the KV Cache article, section 2)
//
// The article's 4-dim example. Given 天气, the model predicts 真 (step 1);
// then 真 is appended and, given 天气真, it predicts 好 (step 2).
//
//   2.1 without the cache: each step feeds every token and recomputes Q, K
//       and V for all of them, then the masked attention.
//   2.2 with the cache: step 1 is the same and keeps K and V; step 2 feeds
//       only 真: its q, k_cur, v_cur; K = cat(K_last, K_cur), same for V;
//       scores (1, 3), weights, output (1, 4). No mask is needed: the new
//       token may look at every earlier one.
//
// `kvdemo lesson 2` runs both and compares: the cached output row equals the
// last row of the full step-2 output bit for bit, with fewer K/V rows and
// fewer multiply-adds. Times are measured around the arithmetic only, as
// measure.h measures: a warm-up, then --repeat runs (101), printed as the
// median with min … max; the comparison times step 2 both ways again,
// taking turns, and says what the runs support.
#include "attention.h"
#include "fileio.h"
#include "lessons.h"
#include "measure.h"
#include "stats.h"
#include "timer.h"
#include "toy.h"

#include <stdio.h>
#include <stdlib.h>

enum { STEP1_TOKENS = 2, STEP2_TOKENS = 3, DEFAULT_REPEAT = 101 };

// What one run leaves behind for the comparison.
typedef struct {
    int kv_rows;
    int64_t proj_madds, attn_madds;
    double *seconds[2];  // (repeat) the runs of step 1 and of step 2
} Run;

// ----------------------------------------------------------------------------
// The arithmetic, timed apart from the printing

// One step's arithmetic, timed (an arm of measure_interleaved). Step 2 of
// the cached run rewinds the cache to step 1's length first (an index, no
// copy), so that every run does the same work.
typedef struct {
    AttnStep *s;
    const ToyData *d;
    int tokens, cached;
} StepRun;

static int step_run(void *ctx, double *seconds) {
    StepRun *r = ctx;
    AttnStep *s = r->s;
    const ToyData *d = r->d;
    double t0 = timer_now();
    if (r->cached) {
        s->N = r->tokens - 1;
        attention_cached(s, d->X + (r->tokens - 1) * d->d, d->W_Q, d->W_K, d->W_V, d->scale);
    } else {
        attention_full(s, d->X, r->tokens, d->W_Q, d->W_K, d->W_V, d->scale, 1);
    }
    *seconds = timer_now() - t0;
    return 0;
}

// The step's arithmetic after a warm-up, repeat times: samples (repeat).
static void time_step(double *samples, AttnStep *s, const ToyData *d, int tokens, int cached, int repeat) {
    StepRun r = {s, d, tokens, cached};
    measure_interleaved(samples, NULL, MEASURE_WARMUP, repeat, step_run, &r, NULL, NULL);
}

static void add_costs(Run *r, const AttnStep *s) {
    r->kv_rows += s->kv_rows;
    r->proj_madds += s->proj_madds;
    r->attn_madds += s->attn_madds;
}

// ----------------------------------------------------------------------------
// What each step shows

// The mask as the article writes it for n tokens:
// torch.tensor([[0, float('-inf')], [0, 0]]).
static const char *mask_literal(const AttnStep *s, int n, char *buf, int size) {
    int len = snprintf(buf, (size_t)size, "mask = torch.tensor([");
    for (int i = 0; i < n && len < size; i++) {
        len += snprintf(buf + len, (size_t)(size - len), "%s[", i ? ", " : "");
        for (int j = 0; j < n && len < size; j++)
            len += snprintf(buf + len, (size_t)(size - len), "%s%s", j ? ", " : "",
                            s->mask[i * n + j] < 0 ? "float('-inf')" : "0");
        if (len < size) len += snprintf(buf + len, (size_t)(size - len), "]");
    }
    if (len < size) snprintf(buf + len, (size_t)(size - len), "])");
    return buf;
}

// A step that feeds every token so far: each step of the run without the
// cache, and step 1 of the run with it, where it is the prefill whose K and
// V become the cache.
static void show_full_step(Trace *tr, const ToyData *d, const AttnStep *s, int step, int cached_run,
                           const double *seconds, int repeat) {
    int n = s->M;
    char in[256], next[64], code[1024];
    toy_tokens(d, 0, n, in, sizeof in);
    toy_tokens(d, n, 1, next, sizeof next);
    trace_step(tr, step);
    trace_sayf(tr, "Step %d: the input is \"%s\" (%d tokens), the model predicts \"%s\".",
               "第 %d 步：输入“%s”（%d 个 token），模型预测出“%s”。", step, in, n, next);
    if (cached_run)
        trace_say(tr, "This is the prefill: Q, K and V of every prompt token; K and V will be kept as the cache.\n",
                  "这一步是预填充（prefill）：算出提示词每个 token 的 Q、K、V，其中 K、V 留下来作为缓存。\n");
    else if (step == 1)
        trace_say(tr, "Q, K and V are computed for every token of the input.\n", "输入的每个 token 都要算出 Q、K、V。\n");
    else
        trace_say(tr, "Q, K and V are computed again for every token, the ones of step 1 included.\n",
                  "每个 token 的 Q、K、V 都要重新算一遍，第 1 步算过的也不例外。\n");
    const char *const *rows = d->rows;
    Tensor X = tensor_view2(d->X, n, d->d);
    Tensor Q = tensor_view2(s->Q, n, d->dk), K = tensor_view2(s->K, n, d->dk);
    Tensor V = tensor_view2(s->V, n, d->dv);
    Tensor scores = tensor_view2(s->scores, n, n), mask = tensor_view2(s->mask, n, n);
    Tensor masked = tensor_view2(s->masked, n, n), weights = tensor_view2(s->weights, n, n);
    Tensor out = tensor_view2(s->output, n, d->dv);
    // After step 1 without the cache, the rows of the tokens an earlier step
    // saw are computed again for nothing (greyed on the page): the cache's saving.
    int old = step > 1 && !cached_run ? n - 1 : 0;
    TraceRowRole how = old ? ROW_RECOMPUTED : ROW_PLAIN;
    trace_tensor(tr, TRACE_FULL, "X", "X = torch.tensor(...)", &X, rows, HEAT_NONE);
    trace_cache_rows(tr, old, how);
    trace_tensor(tr, TRACE_FULL, "Q", "Q = torch.matmul(X, W_Q)", &Q, rows, HEAT_NONE);
    trace_cache_rows(tr, old, how);
    trace_tensor(tr, TRACE_SUMMARY, "K", "K = torch.matmul(X, W_K)", &K, rows, HEAT_NONE);
    trace_cache_rows(tr, old, how);
    trace_tensor(tr, TRACE_SUMMARY, "V", "V = torch.matmul(X, W_V)", &V, rows, HEAT_NONE);
    trace_cache_rows(tr, old, how);
    trace_tensor(tr, TRACE_FULL, "scores", toy_caption(d, "scores = torch.matmul(Q, K.T) / %s", code, sizeof code),
                 &scores, rows, HEAT_SCORES);
    trace_tensor(tr, TRACE_FULL, "mask", mask_literal(s, n, code, sizeof code), &mask, rows, HEAT_NONE);
    trace_cache_rows(tr, old, how);
    trace_tensor_as(tr, TRACE_FULL, "masked_scores", "scores", "scores += mask", &masked, rows, HEAT_SCORES);
    trace_cache_rows(tr, old, how);
    trace_tensor_as(tr, TRACE_FULL, "weights", "scores", "scores = F.softmax(scores, dim=-1)", &weights, rows, HEAT_PROBS);
    trace_cache_rows(tr, old, how);
    trace_tensor(tr, TRACE_SUMMARY, "output", "output = torch.matmul(scores, V)", &out, rows, HEAT_NONE);
    trace_count(tr, "kv_rows", s->kv_rows, "rows of K and V computed", "算出的 K、V 行数");
    trace_measure(tr, "step", seconds, repeat);
    trace_say(tr, "", "");
    trace_pause(tr);
}

static void show_cached_step(Trace *tr, const ToyData *d, const AttnStep *s, int step, const double *seconds,
                             int repeat) {
    int N = s->N, last = N - 1;
    char in[256], next[64], code[256];
    toy_tokens(d, last, 1, in, sizeof in);
    toy_tokens(d, N, 1, next, sizeof next);
    trace_step(tr, step);
    trace_sayf(tr,
               "Step %d with the cache: only \"%s\" is fed. Its q, k_cur and v_cur are computed;\n"
               "K and V are the cached K_last, V_last with the new row appended. The model predicts \"%s\".\n",
               "第 %d 步（使用缓存）：只输入“%s”，只算它的 q、K_cur、V_cur；\n"
               "把它们接在缓存的 K_last、V_last 后面，就是完整的 K、V。模型预测出“%s”。\n",
               step, in, next);
    const char *const *rows = d->rows;
    Tensor x = tensor_view2(d->X + last * d->d, 1, d->d);
    Tensor q = tensor_view2(s->Q, 1, d->dk);
    Tensor K_last = tensor_view2(s->K, last, d->dk), V_last = tensor_view2(s->V, last, d->dv);
    Tensor K_cur = tensor_view2(s->K + last * d->dk, 1, d->dk);
    Tensor V_cur = tensor_view2(s->V + last * d->dv, 1, d->dv);
    Tensor K = tensor_view2(s->K, N, d->dk), V = tensor_view2(s->V, N, d->dv);
    Tensor scores = tensor_view2(s->scores, 1, N), weights = tensor_view2(s->weights, 1, N);
    Tensor out = tensor_view2(s->output, 1, d->dv);
    trace_tensor(tr, TRACE_FULL, "X", trace_text(tr, "X = the new token's row only", "X = 只有新 token 这一行"), &x,
                 rows + last, HEAT_NONE);
    // The page marks each row: the new token's, computed now (appended to K
    // and V), and the last rows of K and V, read from the cache.
    trace_cache_rows(tr, 0, ROW_NEW);
    trace_tensor(tr, TRACE_FULL, "Q", "Q = torch.matmul(X, W_Q)", &q, rows + last, HEAT_NONE);
    trace_cache_rows(tr, last, ROW_REUSED);
    trace_tensor(tr, TRACE_FULL, "K_last", trace_text(tr, "K_last = K of step 1, from the cache", "K_last = 缓存里第 1 步的 K"),
                 &K_last, rows, HEAT_NONE);
    trace_cache_rows(tr, 0, ROW_NEW);
    trace_tensor(tr, TRACE_FULL, "K_cur", "K_cur = torch.matmul(X, W_K)", &K_cur, rows + last, HEAT_NONE);
    trace_cache_rows(tr, last, ROW_REUSED);
    trace_tensor(tr, TRACE_SUMMARY, "K", "K = torch.cat([K_last, K_cur])", &K, rows, HEAT_NONE);
    trace_cache_rows(tr, last, ROW_REUSED);
    trace_tensor(tr, TRACE_FULL, "V_last", trace_text(tr, "V_last = V of step 1, from the cache", "V_last = 缓存里第 1 步的 V"),
                 &V_last, rows, HEAT_NONE);
    trace_cache_rows(tr, 0, ROW_NEW);
    trace_tensor(tr, TRACE_FULL, "V_cur", "V_cur = torch.matmul(X, W_V)", &V_cur, rows + last, HEAT_NONE);
    trace_cache_rows(tr, last, ROW_REUSED);
    trace_tensor(tr, TRACE_SUMMARY, "V", "V = torch.cat([V_last, V_cur])", &V, rows, HEAT_NONE);
    char code_zh[sizeof code];
    toy_caption(d, "scores = torch.matmul(Q, K.T) / %s   # no mask", code, sizeof code);
    toy_caption(d, "scores = torch.matmul(Q, K.T) / %s   # 不加掩码", code_zh, sizeof code_zh);
    trace_cache_rows(tr, 0, ROW_NEW);
    trace_tensor(tr, TRACE_FULL, "scores", trace_text(tr, code, code_zh), &scores, rows + last, HEAT_SCORES);
    trace_cache_rows(tr, 0, ROW_NEW);
    trace_tensor_as(tr, TRACE_FULL, "weights", "scores", "scores = F.softmax(scores, dim=-1)", &weights, rows + last, HEAT_PROBS);
    trace_cache_rows(tr, 0, ROW_NEW);
    trace_tensor(tr, TRACE_SUMMARY, "output", "output = torch.matmul(scores, V)", &out, rows + last, HEAT_NONE);
    trace_count(tr, "kv_rows", s->kv_rows, "rows of K and V computed", "算出的 K、V 行数");
    trace_measure(tr, "step", seconds, repeat);
    trace_say(tr, "", "");
    trace_pause(tr);
}

static void show_costs(Trace *tr, const Run *r, int repeat, const char *name) {
    trace_count(tr, "kv_rows", r->kv_rows, "rows of K and V computed in the run", "本次运行计算的 K、V 行数");
    trace_count(tr, "proj_madds", r->proj_madds, "multiply-adds of the projections (Q, K, V)",
                "投影（Q、K、V）的乘加次数");
    trace_count(tr, "attn_madds", r->attn_madds, "multiply-adds of the attention (Q K^T, weights V)",
                "注意力（Q K^T、weights V）的乘加次数");
    // Both steps of the i-th run: the run's time (the runs themselves were apart).
    double *both = malloc(sizeof(double) * (size_t)repeat);
    if (!both) return;
    for (int i = 0; i < repeat; i++) both[i] = r->seconds[0][i] + r->seconds[1][i];
    trace_measure(tr, name, both, repeat);
    free(both);
}

// Step 2 both ways again, taking turns (measure.h), and what the runs say:
// "step 2 with the cache: 1.7 ± 0.3 x faster", or "the same within noise".
static void compare_times(Trace *tr, AttnStep *nc2, AttnStep *cache, const ToyData *d, double *a, double *b,
                          int repeat) {
    StepRun full = {nc2, d, STEP2_TOKENS, 0}, cached = {cache, d, STEP2_TOKENS, 1};
    trace_machine(tr, measure_machine());   // the busy banner, as every timed lesson gives it
    measure_interleaved(a, b, MEASURE_WARMUP, repeat, step_run, &full, step_run, &cached);
    trace_comparison(tr, "step2_time_ratio", a, repeat, b, repeat, "step 2 with the cache (timed again, in turns)",
                     "第 2 步使用缓存（轮流重新计时）");
}

// ----------------------------------------------------------------------------
// The lesson

static int run_lesson(const Options *opt, Trace *tr, int runs) {
    // Without the cache each step has its own tensors; with it, one AttnStep
    // is the cache: step 1 fills K and V, step 2 appends its row to them.
    ToyData d;
    AttnStep steps[3];
    if (toy_begin(&d, steps, 3, STEP2_TOKENS, opt, tr->lesson, STEP2_TOKENS)) return 1;
    AttnStep *nc1 = &steps[0], *nc2 = &steps[1], *cache = &steps[2];
    int repeat = opt->repeat ? opt->repeat : DEFAULT_REPEAT;
    Run nc = {0}, c = {0};
    double *times = malloc(sizeof(double) * 6 * (size_t)repeat);   // 4 steps' runs, then the comparison's 2
    if (!times) {
        toy_end(&d, steps, 3);
        fileio_error(tr->lang, "out of memory", "内存不足");
        return 1;
    }
    for (int k = 0; k < 2; k++) nc.seconds[k] = times + k * repeat, c.seconds[k] = times + (2 + k) * repeat;

    lessons_heading(tr);
    toy_show_scale(tr, &d);
    toy_show_weights(tr, &d);

    if (runs & RUN_NOCACHE) {
        trace_run(tr, "no-cache");
        trace_heading(tr, "2.1 Without the KV cache", "2.1 不使用 KV Cache 场景");
        time_step(nc.seconds[0], nc1, &d, STEP1_TOKENS, 0, repeat);
        show_full_step(tr, &d, nc1, 1, 0, nc.seconds[0], repeat);
        time_step(nc.seconds[1], nc2, &d, STEP2_TOKENS, 0, repeat);
        show_full_step(tr, &d, nc2, 2, 0, nc.seconds[1], repeat);
        add_costs(&nc, nc1);
        add_costs(&nc, nc2);
        trace_step(tr, 0);
        show_costs(tr, &nc, repeat, "no-cache");
    }
    if (runs & RUN_CACHE) {
        trace_run(tr, "cache");
        trace_heading(tr, "2.2 With the KV cache", "2.2 使用 KV Cache 场景");
        time_step(c.seconds[0], cache, &d, STEP1_TOKENS, 0, repeat);
        show_full_step(tr, &d, cache, 1, 1, c.seconds[0], repeat);
        add_costs(&c, cache);
        trace_say(tr, "K and V of step 1 are kept: they are the cache.\n", "第 1 步的 K、V 留了下来，这就是缓存。\n");
        time_step(c.seconds[1], cache, &d, STEP2_TOKENS, 1, repeat);
        show_cached_step(tr, &d, cache, 2, c.seconds[1], repeat);
        add_costs(&c, cache);
        trace_step(tr, 0);
        show_costs(tr, &c, repeat, "cache");
    }
    if (runs == RUN_BOTH) {
        trace_run(tr, NULL);
        trace_heading(tr, "Comparison", "对比");
        // The cached step's one output row against the last row of the full step.
        Tensor full_last = tensor_view2(nc2->output + (STEP2_TOKENS - 1) * d.dv, 1, d.dv);
        Tensor cached = tensor_view2(cache->output, 1, d.dv);
        int same = trace_compare(tr, "output", trace_text(tr, "output[2] without the cache", "不使用缓存的 output[2]"),
                                 &full_last, trace_text(tr, "output with the cache", "使用缓存的 output"), &cached);
        trace_sayf(tr, "K/V rows computed: %d without the cache, %d with it.",
                   "计算的 K、V 行数：不使用缓存 %d 行，使用缓存 %d 行。", nc.kv_rows, c.kv_rows);
        trace_sayf(tr, "Multiply-adds: %lld without the cache, %lld with it (%lld saved).",
                   "乘加次数：不使用缓存 %lld，使用缓存 %lld（省下 %lld）。",
                   (long long)(nc.proj_madds + nc.attn_madds), (long long)(c.proj_madds + c.attn_madds),
                   (long long)(nc.proj_madds + nc.attn_madds - c.proj_madds - c.attn_madds));
        trace_count(tr, "madds_saved", nc.proj_madds + nc.attn_madds - c.proj_madds - c.attn_madds, NULL, NULL);
        compare_times(tr, nc2, cache, &d, times + 4 * repeat, times + 5 * repeat, repeat);
        trace_say(tr,
                  "(At this size a step takes a few hundred nanoseconds, much of it overhead: the counts\n"
                  "show the saving best. Lesson 10 shows it in seconds.)",
                  "（这么小的规模，一步只要几百纳秒，大部分是固定开销；乘加次数最能说明节省。\n第 10 课用秒来展示。）");
        if (!same) trace_say(tr, "The outputs differ: this is a bug in kvdemo.", "输出不同：这是 kvdemo 的缺陷。");
    }
    toy_precision_note(tr, 0);
    toy_end(&d, steps, 3);
    free(times);
    return 0;
}

int lesson2_run(const Options *opt, Trace *tr) { return run_lesson(opt, tr, opt->runs); }

int lesson21_run(const Options *opt, Trace *tr) {
    return run_lesson(opt, tr, RUN_NOCACHE);
}

int lesson22_run(const Options *opt, Trace *tr) {
    return run_lesson(opt, tr, RUN_CACHE);
}
