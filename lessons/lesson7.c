// lesson 7 — GPT 模型单次 inference 输入生成下一个 token，为什么会产生 kv-cache？
// (the KV Cache article, section 7)
//
// GPT writes one token per inference, so a sentence takes one inference per
// token, and inference i+1 feeds only one token more than inference i. Without
// the cache every inference computes k and v again for every token so far:
// 1 + 2 + ... + n = n(n+1)/2 rows after n steps. With the cache it computes
// only k_{i+1} and v_{i+1}: n rows. Space (the cache) for time.
//
// The loop runs over the tokens of the data file (天气真好，出去玩): step s
// feeds the first s tokens. The tokens are taken from the file rather than
// predicted (there is no output layer in this example), which is all the loop
// needs to show what each step computes.
#include "attention.h"
#include "fileio.h"
#include "lessons.h"
#include "ops.h"
#include "timer.h"
#include "toy.h"

#include <stdio.h>
#include <stdlib.h>

enum { DEFAULT_REPEAT = 101 };

// The table: step, tokens, then the K/V rows each way, per step and in total.
static const TraceColumn COLUMNS[] = {
    {"step", "步", 5, 0, NULL},
    {"tokens", "输入", 24, 0, NULL},
    {"no cache", "不使用缓存", 10, 1, "kv_rows_nocache"},
    {"total", "累计", 8, 1, "kv_rows_total_nocache"},
    {"cache", "使用缓存", 10, 1, "kv_rows_cache"},
    {"total", "累计", 8, 1, "kv_rows_total_cache"},
};
static const TraceTable TABLE = {"kv_rows", 6, COLUMNS};

// The whole loop without the cache: every step recomputes all of its tokens.
static void loop_nocache(AttnStep *steps, const ToyData *d, int n) {
    for (int s = 1; s <= n; s++)
        attention_full(&steps[s - 1], d->X, s, d->W_Q, d->W_K, d->W_V, d->scale, 1);
}

// With the cache: one AttnStep holds K and V and grows by a row each step.
static void loop_cache(AttnStep *c, AttnStep *outs, const ToyData *d, int n) {
    attention_full(c, d->X, 1, d->W_Q, d->W_K, d->W_V, d->scale, 1);
    for (int j = 0; j < d->dv; j++) outs[0].output[j] = c->output[j];
    outs[0].kv_rows = c->kv_rows;
    for (int s = 2; s <= n; s++) {
        attention_cached(c, d->X + (s - 1) * d->d, d->W_Q, d->W_K, d->W_V, d->scale);
        for (int j = 0; j < d->dv; j++) outs[s - 1].output[j] = c->output[j];
        outs[s - 1].kv_rows = c->kv_rows;
    }
}

// Frees the n full steps, the n cached output rows (calloc'd: a step not
// yet set up is all zeros, which attn_step_free takes) and the cache.
static void free_steps(AttnStep *steps, AttnStep *outs, int n, AttnStep *c) {
    for (int s = 0; s < n; s++) {
        attn_step_free(&steps[s]);
        attn_step_free(&outs[s]);
    }
    free(steps);
    free(outs);
    attn_step_free(c);
}

// One way of the whole loop, timed: an arm of measure_interleaved, so that
// the two ways take turns and a busy moment falls on both.
typedef struct {
    AttnStep *steps, *c, *outs;   // loop_nocache's steps, loop_cache's cache and rows
    const ToyData *d;
    int n, cached;
} Loop;

static int loop_run(void *ctx, double *seconds) {
    Loop *l = ctx;
    double t0 = timer_now();
    if (l->cached) loop_cache(l->c, l->outs, l->d, l->n);
    else loop_nocache(l->steps, l->d, l->n);
    *seconds = timer_now() - t0;
    return 0;
}

// The table of rows per step, both ways (JSON: counts, and each step's
// newest output compared). Adds the rows to *tot_nc and *tot_c; returns 1
// when the newest token's output was the same bit for bit at every step.
static int rows_table(Trace *tr, const ToyData *d, const AttnStep *steps, const AttnStep *outs, int n,
                      long long *tot_nc_out, long long *tot_c_out) {
    long long tot_nc = 0, tot_c = 0;
    int all_same = 1;
    for (int s = 1; s <= n; s++) {
        tot_nc += steps[s - 1].kv_rows;
        tot_c += outs[s - 1].kv_rows;
        trace_step(tr, s);
        char in[512];
        toy_tokens(d, 0, s, in, sizeof in);
        char num[5][24];
        snprintf(num[0], sizeof num[0], "%d", s);
        snprintf(num[1], sizeof num[1], "%d", steps[s - 1].kv_rows);
        snprintf(num[2], sizeof num[2], "%lld", tot_nc);
        snprintf(num[3], sizeof num[3], "%d", outs[s - 1].kv_rows);
        snprintf(num[4], sizeof num[4], "%lld", tot_c);
        const char *row[] = {num[0], in, num[1], num[2], num[3], num[4]};
        trace_table_row(tr, &TABLE, row);
        Tensor full = tensor_view2(steps[s - 1].output + (s - 1) * d->dv, 1, d->dv);
        Tensor cached = tensor_view2(outs[s - 1].output, 1, d->dv);
        trace_run(tr, "no-cache");
        trace_step(tr, s);
        trace_count(tr, "kv_rows", steps[s - 1].kv_rows, NULL, NULL);
        trace_count(tr, "kv_rows_total", tot_nc, NULL, NULL);
        trace_run(tr, "cache");
        trace_step(tr, s);
        trace_count(tr, "kv_rows", outs[s - 1].kv_rows, NULL, NULL);
        trace_count(tr, "kv_rows_total", tot_c, NULL, NULL);
        trace_run(tr, NULL);
        trace_step(tr, s);
        if (tr->format == FORMAT_JSON) {
            trace_tensor(tr, TRACE_SUMMARY, "output", NULL, &cached, d->rows + s - 1, HEAT_NONE);
            all_same &= trace_compare(tr, "output", trace_text(tr, "output[-1] without the cache", "不使用缓存的 output[-1]"), &full,
                                      trace_text(tr, "output with the cache", "使用缓存的 output"), &cached);
        } else {
            all_same &= ops_bit_identical(full.data, cached.data, d->dv);
        }
    }
    *tot_nc_out = tot_nc, *tot_c_out = tot_c;
    return all_same;
}

// An HTML or Markdown document shows, under the table, what JSON gives
// scripts: the newest token's output of each step, without the cache and
// with it.
static void doc_outputs(Trace *tr, const ToyData *d, const AttnStep *steps, const AttnStep *outs, int n) {
    if (tr->doc != FORMAT_TEXT) {
        for (int s = 1; s <= n; s++) {
            Tensor full = tensor_view2(steps[s - 1].output + (s - 1) * d->dv, 1, d->dv);
            Tensor cached = tensor_view2(outs[s - 1].output, 1, d->dv);
            trace_sayf(tr, "Step %d: the output of %s.", "第 %d 步：%s 的输出。", s, d->rows[s - 1]);
            trace_tensor(tr, TRACE_SUMMARY, "output", NULL, &cached, d->rows + s - 1, HEAT_NONE);
            trace_compare(tr, "output", trace_text(tr, "output[-1] without the cache", "不使用缓存的 output[-1]"), &full,
                          trace_text(tr, "output with the cache", "使用缓存的 output"), &cached);
        }
    }
}

// A prompt of p tokens: step i feeds p + i - 1 tokens. Without the cache
// n steps compute n*p + n(n-1)/2 rows; with it p + n - 1 (the prompt once,
// then one row a step). Here p = 2, the article's 天气, over the same tokens.
static void with_a_prompt(Trace *tr, int n) {
    if (n >= 2) {
        int p = 2, steps_p = n - p + 1;
        long long nc_p = (long long)steps_p * p + (long long)steps_p * (steps_p - 1) / 2, c_p = p + steps_p - 1;
        trace_sayf(tr,
                   "With a prompt of p tokens, n steps compute n*p + n(n-1)/2 rows without the cache and\n"
                   "p + n - 1 with it. For the article's prompt (p = %d) and the same %d tokens, n = %d:\n"
                   "%lld rows against %lld.",
                   "提示词有 p 个 token 时，n 步共要算 n*p + n(n-1)/2 行（不使用缓存），\n"
                   "使用缓存只要 p + n - 1 行。以文章的提示词（p = %d）跑同样的 %d 个 token，n = %d：\n"
                   "不使用缓存 %lld 行，使用缓存 %lld 行。",
                   p, n, steps_p, nc_p, c_p);
        trace_count(tr, "kv_rows_nocache_prompt2", nc_p, NULL, NULL);
        trace_count(tr, "kv_rows_cache_prompt2", c_p, NULL, NULL);
    }
}

// Why training keeps no cache: it feeds the whole text in one causal pass,
// which computes each row of K and V once (the rows the cached loop made
// over all its steps), and no later step is left to reuse them.
static void say_training(Trace *tr, int n, long long rows) {
    trace_sayf(tr,
               "\nTraining keeps no cache (use_cache=False): it feeds the whole text at once, one pass with the\n"
               "causal mask, which computes every row of K and V once — %lld rows for these %d tokens, as many\n"
               "as the cache computed over all the steps — and no later step is left to reuse them.",
               "\n训练时不用缓存：它一次输入整段文字，做一次带因果掩码的前向，每行 K、V 只算一次——共 %lld 行\n"
               "（这 %d 个 token 各一行），与使用缓存时所有步骤加起来一样多——之后也没有哪一步会再用到它们。",
               rows, n);
}

int lesson7_run(const Options *opt, Trace *tr) {
    ToyData d;
    if (toy_load(&d, opt, tr->lesson, 2)) return 1;
    int n = opt->steps > 0 ? opt->steps : d.n;
    if (n > d.n) {
        fileio_error(tr->lang, "lesson 7: --steps %d is more than the %d tokens of the data file; give at most %d, or a --data "
                     "file with more rows",
                     "第 7 课：--steps %d 超过了数据文件的 %d 个 token；最多给 %d，或者用行数更多的 --data 文件", n, d.n,
                     d.n);
        toydata_free(&d);
        return 2;
    }
    int repeat = opt->repeat ? opt->repeat : DEFAULT_REPEAT;
    // steps[s-1]: the full recomputation of step s; outs[s-1]: the cached
    // step's output row; c: the growing cache.
    AttnStep *steps = calloc((size_t)n, sizeof *steps), *outs = calloc((size_t)n, sizeof *outs), c = {0};
    int ok = steps && outs && attn_step_init(&c, n, d.d, d.dk, d.dv) == 0;
    for (int s = 0; ok && s < n; s++)
        ok = attn_step_init(&steps[s], s + 1, d.d, d.dk, d.dv) == 0 && attn_step_init(&outs[s], 1, d.d, d.dk, d.dv) == 0;
    if (!ok) {
        fileio_error(tr->lang, "out of memory", "内存不足");
        free_steps(steps, outs, steps && outs ? n : 0, &c);
        toydata_free(&d);
        return 1;
    }
    double *t = malloc(sizeof(double) * 2 * (size_t)repeat);   // (2, repeat): without, with the cache
    if (!t) {
        fileio_error(tr->lang, "out of memory", "内存不足");
        free_steps(steps, outs, n, &c);
        toydata_free(&d);
        return 1;
    }
    Loop nc = {steps, &c, outs, &d, n, 0}, wc = {steps, &c, outs, &d, n, 1};
    MeasureMachine machine = measure_machine();   // the load at the start
    measure_interleaved(t, t + repeat, MEASURE_WARMUP, repeat, loop_run, &nc, loop_run, &wc);

    lessons_heading(tr);
    trace_say(tr,
              "Each step feeds one token more than the step before. Count the rows of K and V\n"
              "each step computes, without the cache and with it.\n",
              "每一步的输入只比上一步多一个 token。下面逐步数出要算多少行 K、V，\n"
              "左边是不使用缓存，右边是使用缓存。\n");
    if (!opt->data_path && n > 3)
        trace_say(tr,
                  "(The article's example stops at 真: the rows of X after it are kvdemo's own numbers,\n"
                  "added to data/tianqi.txt so that the loop runs longer.)\n",
                  "（文章的例子只到“真”为止：之后各行 X 是 kvdemo 自己补的数字，\n"
                  "写在 data/tianqi.txt 里，好让循环多跑几步。）\n");
    trace_table_head(tr, &TABLE);
    long long tot_nc = 0, tot_c = 0;
    int all_same = rows_table(tr, &d, steps, outs, n, &tot_nc, &tot_c);
    trace_cache_triangle(tr, 1, n);   // the page draws the table's rows: step s computes s rows, or 1
    trace_step(tr, 0);
    doc_outputs(tr, &d, steps, outs, n);
    trace_sayf(tr,
               "\nAfter %d steps: %lld rows without the cache (n(n+1)/2 = %d), %lld with it (n = %d).\n"
               "The newest token's output was %s at every step.",
               "\n%d 步之后：不使用缓存共算了 %lld 行（n(n+1)/2 = %d），使用缓存 %lld 行（n = %d）。\n"
               "每一步新 token 的输出%s。",
               n, tot_nc, n * (n + 1) / 2, tot_c, n,
               all_same ? trace_text(tr, "identical bit for bit", "逐位完全相同")
                        : trace_text(tr, "NOT identical (a bug in kvdemo)", "不相同（kvdemo 的缺陷）"));
    with_a_prompt(tr, n);
    say_training(tr, n, tot_c);
    Tensor K = tensor_view2(c.K, n, d.dk), V = tensor_view2(c.V, n, d.dv);
    if (tr->format == FORMAT_TEXT) trace_say(tr, "\nThe cache at the end: one row of K and V per token.\n", "\n最后的缓存：每个 token 一行 K、V。\n");
    trace_tensor(tr, TRACE_FULL, "K", NULL, &K, d.rows, HEAT_NONE);
    trace_tensor(tr, TRACE_FULL, "V", NULL, &V, d.rows, HEAT_NONE);
    trace_count(tr, "kv_rows_nocache", tot_nc, "K/V rows without the cache", "不使用缓存的 K、V 行数");
    trace_count(tr, "kv_rows_cache", tot_c, "K/V rows with the cache", "使用缓存的 K、V 行数");
    trace_machine(tr, machine);
    trace_measure(tr, "no-cache", t, repeat);
    trace_measure(tr, "cache", t + repeat, repeat);
    trace_comparison(tr, "speedup", t, repeat, t + repeat, repeat, "the loop with the cache", "使用缓存的循环");
    free(t);
    free_steps(steps, outs, n, &c);
    toy_precision_note(tr, 0);
    toydata_free(&d);
    return 0;
}
