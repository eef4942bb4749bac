// lesson 2 — 为什么要进行 KV Cache？ (seed 000, section 2)
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
// fewer multiply-adds. Times are measured around the arithmetic only.
#include "attention.h"
#include "lessons.h"
#include "timer.h"
#include "toy.h"

#include <stdio.h>
#include <stdlib.h>

enum { STEP1_TOKENS = 2, STEP2_TOKENS = 3, DEFAULT_REPEAT = 101 };

// What one run leaves behind for the comparison.
typedef struct {
    AttnStep step1, step2;
    double seconds;
    int kv_rows;
    int64_t proj_madds, attn_madds;
} Run;

// ----------------------------------------------------------------------------
// The arithmetic of each run, with nothing printed (this is what is timed)

// 2.1: both steps recomputed in full.
static void compute_nocache(Run *r, const ToyData *d) {
    attention_full(&r->step1, d->X, STEP1_TOKENS, d->W_Q, d->W_K, d->W_V, d->scale, 1);
    attention_full(&r->step2, d->X, STEP2_TOKENS, d->W_Q, d->W_K, d->W_V, d->scale, 1);
}

// 2.2: step 1 in full; its K and V become the cache of step 2, which feeds
// only the new token's row of X.
static void compute_cache(Run *r, const ToyData *d) {
    attention_full(&r->step1, d->X, STEP1_TOKENS, d->W_Q, d->W_K, d->W_V, d->scale, 1);
    // The cache: step 2 starts from step 1's K and V (K_last, V_last).
    AttnStep *s = &r->step2;
    for (int i = 0; i < STEP1_TOKENS * d->dk; i++) s->K[i] = r->step1.K[i];
    for (int i = 0; i < STEP1_TOKENS * d->dv; i++) s->V[i] = r->step1.V[i];
    s->N = STEP1_TOKENS;
    attention_cached(s, d->X + STEP1_TOKENS * d->d, d->W_Q, d->W_K, d->W_V, d->scale);
}

static void time_run(Run *r, const ToyData *d, void (*compute)(Run *, const ToyData *), int repeat) {
    double *samples = malloc(sizeof(double) * (size_t)repeat);
    for (int i = 0; i < repeat; i++) {
        double t0 = timer_now();
        compute(r, d);
        double t1 = timer_now();
        if (samples) samples[i] = t1 - t0;
    }
    r->seconds = samples ? timer_median(samples, repeat) : 0;
    free(samples);
    r->kv_rows = r->step1.kv_rows + r->step2.kv_rows;
    r->proj_madds = r->step1.proj_madds + r->step2.proj_madds;
    r->attn_madds = r->step1.attn_madds + r->step2.attn_madds;
}

// ----------------------------------------------------------------------------
// What each step shows

static void show_full_step(Trace *tr, const ToyData *d, const AttnStep *s, int step) {
    int n = s->M;
    char in[256], next[64];
    toy_tokens(d, 0, n, in, sizeof in);
    toy_tokens(d, n, 1, next, sizeof next);
    trace_step(tr, step);
    trace_sayf(tr, "Step %d: the input is \"%s\" (%d tokens), the model predicts \"%s\".",
               "第%d步：输入为“%s”（%d 个 token），模型预测“%s”。", step, in, n, next);
    trace_say(tr, "Every token's row of Q, K and V is computed again.\n",
              "每个 token 的 Q、K、V 行都要重新计算。\n");
    const char *const *rows = d->rows;
    Tensor X = tensor_view2(d->X, n, d->d);
    Tensor Q = tensor_view2(s->Q, n, d->dk), K = tensor_view2(s->K, n, d->dk);
    Tensor V = tensor_view2(s->V, n, d->dv);
    Tensor scores = tensor_view2(s->scores, n, n), mask = tensor_view2(s->mask, n, n);
    Tensor masked = tensor_view2(s->masked, n, n), weights = tensor_view2(s->weights, n, n);
    Tensor out = tensor_view2(s->output, n, d->dv);
    trace_tensor(tr, TRACE_FULL, "X", "X = torch.tensor(...)", &X, rows, 0);
    trace_tensor(tr, TRACE_FULL, "Q", "Q = torch.matmul(X, W_Q)", &Q, rows, 0);
    trace_tensor(tr, TRACE_SUMMARY, "K", "K = torch.matmul(X, W_K)", &K, rows, 0);
    trace_tensor(tr, TRACE_SUMMARY, "V", "V = torch.matmul(X, W_V)", &V, rows, 0);
    trace_tensor(tr, TRACE_FULL, "scores", "scores = torch.matmul(Q, K.T) / 2", &scores, rows, 1);
    trace_tensor(tr, TRACE_FULL, "mask", "torch.tensor([[0, float('-inf')], ...])", &mask, rows, 0);
    trace_tensor(tr, TRACE_FULL, "masked_scores", "scores += mask", &masked, rows, 1);
    trace_tensor(tr, TRACE_FULL, "weights", "scores = F.softmax(scores, dim=-1)", &weights, rows, 1);
    trace_tensor(tr, TRACE_SUMMARY, "output", "output = torch.matmul(scores, V)", &out, rows, 0);
    trace_count(tr, "kv_rows", s->kv_rows, "rows of K and V computed", "计算的 K、V 行数");
    trace_say(tr, "", "");
    trace_pause(tr);
}

static void show_cached_step(Trace *tr, const ToyData *d, const AttnStep *s, int step) {
    int N = s->N, last = N - 1;
    char in[256], next[64];
    toy_tokens(d, last, 1, in, sizeof in);
    toy_tokens(d, N, 1, next, sizeof next);
    trace_step(tr, step);
    trace_sayf(tr,
               "Step %d with the cache: only \"%s\" is fed. Its q, k_cur and v_cur are computed;\n"
               "K and V are the cached K_last, V_last with the new row appended. The model predicts \"%s\".\n",
               "第%d步（使用 KV Cache）：只输入“%s”，只计算它的 q、K_cur、V_cur；\n"
               "再拼接上一步缓存的 K_last、V_last 得到完整的 K、V。模型预测“%s”。\n",
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
    trace_tensor(tr, TRACE_FULL, "X", "X = the new token's row only", &x, rows + last, 0);
    trace_tensor(tr, TRACE_FULL, "Q", "Q = torch.matmul(X, W_Q)", &q, rows + last, 0);
    trace_tensor(tr, TRACE_FULL, "K_last", "K_last = the cached K of step 1", &K_last, rows, 0);
    trace_tensor(tr, TRACE_FULL, "K_cur", "K_cur = torch.matmul(X, W_K)", &K_cur, rows + last, 0);
    trace_tensor(tr, TRACE_SUMMARY, "K", "K = torch.cat([K_last, K_cur])", &K, rows, 0);
    trace_tensor(tr, TRACE_FULL, "V_last", "V_last = the cached V of step 1", &V_last, rows, 0);
    trace_tensor(tr, TRACE_FULL, "V_cur", "V_cur = torch.matmul(X, W_V)", &V_cur, rows + last, 0);
    trace_tensor(tr, TRACE_SUMMARY, "V", "V = torch.cat([V_last, V_cur])", &V, rows, 0);
    trace_tensor(tr, TRACE_FULL, "scores", "scores = torch.matmul(Q, K.T) / 2   (no mask)", &scores,
                 rows + last, 1);
    trace_tensor(tr, TRACE_FULL, "weights", "scores = F.softmax(scores, dim=-1)", &weights, rows + last, 1);
    trace_tensor(tr, TRACE_SUMMARY, "output", "output = torch.matmul(scores, V)", &out, rows + last, 0);
    trace_count(tr, "kv_rows", s->kv_rows, "rows of K and V computed", "计算的 K、V 行数");
    trace_say(tr, "", "");
    trace_pause(tr);
}

static void show_costs(Trace *tr, const Run *r, int repeat, const char *name) {
    trace_count(tr, "kv_rows", r->kv_rows, "rows of K and V computed in the run", "本次运行计算的 K、V 行数");
    trace_count(tr, "proj_madds", r->proj_madds, "multiply-adds of the projections (Q, K, V)",
                "投影（Q、K、V）的乘加次数");
    trace_count(tr, "attn_madds", r->attn_madds, "multiply-adds of the attention (Q K^T, weights V)",
                "注意力（Q K^T、weights V）的乘加次数");
    trace_timing(tr, name, r->seconds, repeat);
}

// ----------------------------------------------------------------------------
// The lesson

static int run_lesson(const Options *opt, Trace *tr, int runs) {
    ToyData d;
    if (toy_load(&d, opt, tr->lesson, STEP2_TOKENS)) return 1;
    Run nc, c;
    if (attn_step_init(&nc.step1, STEP2_TOKENS, d.d, d.dk, d.dv) ||
        attn_step_init(&nc.step2, STEP2_TOKENS, d.d, d.dk, d.dv) ||
        attn_step_init(&c.step1, STEP2_TOKENS, d.d, d.dk, d.dv) ||
        attn_step_init(&c.step2, STEP2_TOKENS, d.d, d.dk, d.dv)) {
        fprintf(stderr, "kvdemo: out of memory\n");
        return 1;
    }
    int repeat = opt->repeat ? opt->repeat : DEFAULT_REPEAT;

    trace_heading(tr, "Lesson 2 — why the KV cache (seed 000, section 2)",
                  "第 2 课 —— 为什么要进行 KV Cache（000 第二节）");
    toy_show_weights(tr, &d);

    if (runs & RUN_NOCACHE) {
        trace_run(tr, "no-cache");
        trace_heading(tr, "2.1 Without the KV cache", "2.1 不使用 KV Cache 场景");
        time_run(&nc, &d, compute_nocache, repeat);
        show_full_step(tr, &d, &nc.step1, 1);
        show_full_step(tr, &d, &nc.step2, 2);
        trace_step(tr, 0);
        show_costs(tr, &nc, repeat, "no-cache");
    }
    if (runs & RUN_CACHE) {
        trace_run(tr, "cache");
        trace_heading(tr, "2.2 With the KV cache", "2.2 使用 KV Cache 场景");
        time_run(&c, &d, compute_cache, repeat);
        show_full_step(tr, &d, &c.step1, 1);
        trace_say(tr, "K and V of step 1 are kept: they are the cache.\n",
                  "保留第一步的 K、V，这就是缓存。\n");
        show_cached_step(tr, &d, &c.step2, 2);
        trace_step(tr, 0);
        show_costs(tr, &c, repeat, "cache");
    }
    if (runs == RUN_BOTH) {
        trace_run(tr, NULL);
        trace_heading(tr, "Comparison", "对比");
        // The cached step's one output row against the last row of the full step.
        Tensor full_last = tensor_view2(nc.step2.output + (STEP2_TOKENS - 1) * d.dv, 1, d.dv);
        Tensor cached = tensor_view2(c.step2.output, 1, d.dv);
        int same = trace_compare(tr, "output", "output[2] without the cache", &full_last,
                                 "output with the cache", &cached);
        trace_sayf(tr, "K/V rows computed: %d without the cache, %d with it.",
                   "计算的 K、V 行数：不使用缓存 %d 行，使用缓存 %d 行。", nc.kv_rows, c.kv_rows);
        trace_sayf(tr, "Multiply-adds: %lld without the cache, %lld with it (%lld saved).",
                   "乘加次数：不使用缓存 %lld，使用缓存 %lld（省下 %lld）。",
                   (long long)(nc.proj_madds + nc.attn_madds), (long long)(c.proj_madds + c.attn_madds),
                   (long long)(nc.proj_madds + nc.attn_madds - c.proj_madds - c.attn_madds));
        trace_count(tr, "madds_saved", nc.proj_madds + nc.attn_madds - c.proj_madds - c.attn_madds, NULL, NULL);
        trace_value(tr, "time_ratio", c.seconds > 0 ? nc.seconds / c.seconds : 0, "x",
                    "time without the cache / time with it", "不使用缓存耗时 / 使用缓存耗时");
        if (!same) trace_say(tr, "The outputs differ: this is a bug in kvdemo.", "输出不同：这是 kvdemo 的缺陷。");
    }
    attn_step_free(&nc.step1);
    attn_step_free(&nc.step2);
    attn_step_free(&c.step1);
    attn_step_free(&c.step2);
    toydata_free(&d);
    return 0;
}

int lesson2_run(const Options *opt, Trace *tr) { return run_lesson(opt, tr, opt->runs); }

int lesson21_run(const Options *opt, Trace *tr) {
    if (opt->runs == RUN_CACHE) fprintf(stderr, "kvdemo: lesson 2.1 is the run without the cache; --cache ignored\n");
    return run_lesson(opt, tr, RUN_NOCACHE);
}

int lesson22_run(const Options *opt, Trace *tr) {
    if (opt->runs == RUN_NOCACHE) fprintf(stderr, "kvdemo: lesson 2.2 is the run with the cache; --no-cache ignored\n");
    return run_lesson(opt, tr, RUN_CACHE);
}
