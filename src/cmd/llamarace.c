// llamarace — `kvdemo race --model FILE` on a LLaMA-style model file: the
// article's LLaMA.generate (llama.h) on one prompt, without the cache and
// with it, the same seed both times; then race.c's table and verdict: the
// same text or not, and the speed-up with the ± of race.c (the scatter of
// each run's step times, measure_sum_sd, combined as hyperfine does).
//
// Simplified against the char GPT's race: the two runs go one after the
// other on the main thread, with --threads cores each, and the report comes
// at the end (no live panes). The context (max_seq_len) ends the text: the
// article's generate has no reset past it.
#include "llamarace.h"

#include "fileio.h"
#include "llama.h"
#include "measure.h"
#include "ops.h"
#include "race.h"
#include "timer.h"
#include "utf8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEFAULT_STEPS = 256 };

// One run's step times, written by the hook after each step.
typedef struct {
    double last;             // when the previous step ended
    double *step_seconds;    // (T) each step's wall time
    unsigned char *cached;   // (T) 1: the step fed one token to the cache
    int n;
} StepTimes;

static void on_step(const LlamaStep *st, void *ctx) {
    StepTimes *s = ctx;
    double now = timer_now();
    s->step_seconds[s->n] = now - s->last;
    s->cached[s->n] = st->fwd->start_pos > 0;
    s->n++;
    s->last = now;
}

// One generation each way into g[0] (without the cache) and g[1] (with it).
// Returns 0, or -1 with err.
static int run_both(LlamaGeneration g[2], StepTimes times[2], LlamaState *s, const LlamaModel *m,
                    const char *prompt, const Options *opt, int steps, Err err) {
    for (int k = 0; k < 2; k++) {
        // the article's generate(prompts, max_gen_len, temperature=0.8, top_p=0.95)
        LlamaGenOptions go = {.max_gen_len = steps,
                              .temperature = opt->temperature >= 0 ? (float)opt->temperature : 0.8f,
                              .top_p = 0.95f, .use_cache = k == 1, .seed = opt->seed,
                              .hook = on_step, .hook_ctx = &times[k]};
        llama_state_reset(s);
        times[k].n = 0;
        times[k].last = timer_now();
        if (llama_generate(&g[k], s, m, &prompt, 1, &go, err) != 0) return -1;
    }
    return 0;
}

// race.c's table: the two runs side by side, a row each.
static void report_table(Trace *tr, const LlamaGeneration g[2]) {
    const char *lane[2] = {trace_text(tr, "without the cache", "不使用缓存"), trace_text(tr, "with the cache", "使用缓存")};
    race_table(tr, lane, (const int[]){g[0].n_steps, g[1].n_steps}, (const double[]){g[0].seconds, g[1].seconds}, 2, 17);
}

static void report(Trace *tr, const LlamaGeneration g[2], const StepTimes times[2], const LlamaModel *m,
                   int steps) {
    int same = g[0].n_steps == g[1].n_steps && !strcmp(g[0].text[0], g[1].text[0]);
    double t0 = g[0].seconds, t1 = g[1].seconds;
    MeasureRatio ratio = measure_ratio_of(0, 0, 2);
    if (t0 > 0 && t1 > 0) {
        double sd0 = measure_sum_sd(times[0].step_seconds, times[0].cached, times[0].n);
        double sd1 = measure_sum_sd(times[1].step_seconds, times[1].cached, times[1].n);
        ratio = measure_ratio_of(t0 / t1, t0 / t1 * hypot(sd0 / t0, sd1 / t1), 2);
    }
    int verdict = measure_verdict_race(ratio);   // one run each: beyond what races apart differ by
    report_table(tr, g);
    if (tr->format == FORMAT_JSON) {
        const char *names[2] = {"no-cache", "cache"};
        for (int k = 0; k < 2; k++) {
            trace_run(tr, names[k]);
            trace_textval(tr, "text", g[k].text[0]);
            trace_timing(tr, names[k], g[k].seconds, 1);
        }
        trace_run(tr, NULL);
        trace_count(tr, "texts_identical", same, NULL, NULL);
        trace_comparison_of(tr, "speedup", ratio, verdict, NULL, NULL);
        return;
    }
    fputc('\n', tr->out);
    trace_say(tr, same ? "Both runs wrote the same text, character for character."
                       : "The two texts differ: the cache changed the result.",
              same ? "两次写出的文字一字不差。" : "两次写出的文字不同：缓存改变了结果。");
    char said[160];
    measure_compare_text(said, sizeof said, ratio, (MeasureVerdict)verdict, tr->lang == LANG_ZH);
    trace_sayf(tr, "With the cache: %s (%.2f s against %.2f s; ± from the scatter of each run's step times only: "
                   "one race concludes only beyond a factor of %.1f, ± included, as races apart differ by more).",
               "使用缓存：%s（%.2f 秒对 %.2f 秒；± 只来自每次运行内各步耗时的离散程度：不同次的赛跑相差更大，"
               "所以一次赛跑只在相差超过 %.1f 倍（含 ±）时才下结论）。",
               said, t1, t0, MEASURE_RACE_FLOOR);
    if (g[1].total_len < steps + g[1].max_prompt_size)
        trace_sayf(tr, "The context (max_seq_len %d) ended the text: the article's generate stops there.",
                   "上下文（max_seq_len %d）结束了文字：文章的 generate 到这里就停了。", m->cfg.max_seq_len);
    fputc('\n', tr->out);
    utf8_put_shown(tr->out, g[1].text[0], strlen(g[1].text[0]));
    fputc('\n', tr->out);
}

int llamarace_run(const Options *opt, Trace *tr) {
    char err[512];
    const char *gpt_only = opt->top_k ? "--top-k" : opt->draft_path || opt->given[OPT_GAMMA] ? "--draft"
                           : opt->init ? "--init" : NULL;
    if (gpt_only) {
        fileio_error(tr->lang, "%s is the char GPT's; %s is a LLaMA-style model", "%s 属于字符级 GPT；%s 是 LLaMA 式模型",
                     gpt_only, opt->model_path);
        return 2;
    }
    if (opt->n_prompts > 1) {
        fileio_error(tr->lang, "race takes one --prompt, not %d", "race 只接受一个 --prompt，而不是 %d 个", opt->n_prompts);
        return 2;
    }
    LlamaModel m;
    if (llama_load(&m, opt->model_path, ERR(tr->lang, err)) != 0) {
        fileio_error(tr->lang, "%s", "%s", err);
        return 1;
    }
    const char *prompt = opt->n_prompts ? opt->prompts[0] : "ROMEO:";
    int steps = opt->steps > 0 ? opt->steps : DEFAULT_STEPS, T = m.cfg.max_seq_len, rc = 1;
    LlamaState s;
    LlamaGeneration g[2];
    StepTimes times[2] = {{0}};
    memset(g, 0, sizeof g);
    int state = llama_state_init(&s, &m, 1, ERR(tr->lang, err)) == 0;
    if (state && llama_generation_new(&g[0], &s, &m, ERR(tr->lang, err)) == 0 &&
        llama_generation_new(&g[1], &s, &m, ERR(tr->lang, err)) == 0) {
        for (int k = 0; k < 2; k++) {
            times[k].step_seconds = malloc(sizeof(double) * (size_t)T);
            times[k].cached = malloc((size_t)T);
        }
        if (!times[0].step_seconds || !times[0].cached || !times[1].step_seconds || !times[1].cached)
            snprintf(err, sizeof err, "%s", tr->lang == LANG_ZH ? "内存不足" : "out of memory");
        else if (!(s.pool = pool_new_for(opt->threads, llama_row_work(&m.cfg))))   // freed below
            snprintf(err, sizeof err, tr->lang == LANG_ZH ? "无法启动 %d 个线程" : "could not start %d threads",
                     ops_threads_asked(opt->threads));
        else if (run_both(g, times, &s, &m, prompt, opt, steps, ERR(tr->lang, err)) == 0)
            rc = 0;
    }
    if (!rc) {
        trace_machine(tr, measure_machine());
        trace_sayf(tr, "The LLaMA-style model (%d query heads, %d key/value heads) writes %d tokens after \"%s\" "
                       "twice, with the same seed: without the cache, then with it.",
                   "LLaMA 式模型（%d 个查询头，%d 个 key/value 头）用同一个随机种子写两遍 %d 个 token，接在“%s”"
                   "之后：先不使用缓存，再使用缓存。",
                   m.cfg.n_heads, m.cfg.n_kv_heads, g[1].n_steps, prompt);
        report(tr, g, times, &m, steps);
    } else fileio_error(tr->lang, "%s", "%s", err);
    for (int k = 0; k < 2; k++) {
        llama_generation_free(&g[k]);
        free(times[k].step_seconds);
        free(times[k].cached);
    }
    if (state) pool_free(s.pool), llama_state_free(&s);
    llama_free(&m);
    return rc;
}
