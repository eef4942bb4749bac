// specbench — `kvdemo bench --draft` and `kvdemo race --draft`: speculative
// decoding timed against plain cached decoding, as measure.h times (a
// warm-up, runs interleaved, medians with min … max, the verdict chosen
// from the runs, never a fixed sentence).
//
// Both arms run greedy: the text is then the target's own in both, token
// for token (spec.h), and each run checks it; a run that parts from the
// other is a failure, not a figure.
//
// Legend as in spec.h: V vocabulary, K drafted tokens per round.
#include "specbench.h"

#include "fileio.h"
#include "measure.h"
#include "ops.h"
#include "race.h"
#include "specarms.h"
#include "speccmd.h"
#include "utf8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEFAULT_STEPS = 200, BENCH_K_MAX = 8, NAME = 16 };

// What --draft cannot go with here, then --steps and --temperature.
// Returns 0, or 2 after one line on stderr.
static int check_options(const Options *opt, int *steps, int bench) {
    int rc = speccmd_check_options(opt);
    if (rc) return rc;
    if (opt->n_prompts > 1) {
        fileio_error(opt->lang, "--draft takes one prompt", "--draft 只接受一条提示词");
        return 2;
    }
    if (opt->temperature > 0) {
        fileio_error(opt->lang, "--draft in race and bench runs greedy, so that both texts must be the same: --temperature 0 "
                     "or leave it out",
                     "race 和 bench 的 --draft 用贪心解码，两份文字必须相同：用 --temperature 0 或者不给它");
        return 2;
    }
    *steps = opt->steps > 0 ? opt->steps : DEFAULT_STEPS;
    if (bench && opt->steps_list) {
        char *end;
        long n = strtol(opt->steps_list, &end, 10);
        if (*end || n < 1 || n > 100000) {
            fileio_error(opt->lang, "--steps %s: bench --draft times one length, a number from 1 to 100000",
                         "--steps %s：bench --draft 只测一个长度，1 到 100000 之间的数", opt->steps_list);
            return 2;
        }
        *steps = (int)n;
    }
    return 0;
}

// A time in milliseconds with three significant digits: "412", "41.2", "4.12".
static const char *ms_text(char *out, size_t size, double seconds) {
    double ms = seconds * 1e3;
    snprintf(out, size, ms >= 99.95 ? "%.0f" : ms >= 9.995 ? "%.1f" : "%.2f", ms);   // as they round
    return out;
}

// "412 (401…430)": the median, then min … max, in milliseconds.
static void spread_cell(char *out, size_t size, Stats s) {
    char a[16], b[16], c[16];
    snprintf(out, size, "%s (%s…%s)", ms_text(a, sizeof a, s.median), ms_text(b, sizeof b, s.min),
             ms_text(c, sizeof c, s.max));
}

// The text parted: say where, and fail.
static int differ(const SpecArms *p, int K) {
    fileio_error(p->lang, "K = %d: the speculative text left the target's own at token %d: a bug in the rounds",
                 "K = %d：投机解码的文字在第 %d 个 token 处偏离了目标模型自己的文字：轮次有错误", K, p->differ_at);
    return 1;
}

static double alpha_of(const SpecArms *p) { return spec_alpha(&p->stats); }
static double per_round(const SpecArms *p) {
    return p->stats.rounds ? (double)p->stats.tokens / p->stats.rounds : 0.0;
}

// ----------------------------------------------------------------------------
// bench --draft

static const TraceColumn BENCH_COLS[] = {
    {"K", "K", 2, 1, NULL},
    {"α", "α", 4, 1, "alpha"},
    {"tok/rd", "每轮", 6, 1, "tokens_per_round"},
    {"cached ms", "缓存 毫秒", 15, 1, "cached_ms"},
    {"spec. ms", "投机 毫秒", 15, 1, "speculative_ms"},
    {"speed-up", "加速", 11, 1, "speedup"},
    {"verdict", "结论", 7, 0, NULL},
};
static const TraceTable BENCH_TABLE = {"speculative", 7, BENCH_COLS};

// One K measured: its row, and in JSON the runs of each arm and their comparison.
static void bench_row(Trace *tr, const SpecArms *p, int K, const double *plain, const double *spec, int runs) {
    Stats a = stats_of(plain, runs), b = stats_of(spec, runs);
    MeasureRatio r = measure_ratio(a, b);
    MeasureVerdict v = measure_verdict(plain, runs, spec, runs);
    char k[8], al[16], pr[16], ca[64], sp[64], x[40];
    snprintf(k, sizeof k, "%d", K);
    snprintf(al, sizeof al, "%.2f", alpha_of(p));
    snprintf(pr, sizeof pr, "%.2f", per_round(p));
    spread_cell(ca, sizeof ca, a);
    spread_cell(sp, sizeof sp, b);
    measure_ratio_beside(x, sizeof x, r, v);   // no ± that reaches 1 beside faster or slower
    const char *row[] = {k, al, pr, ca, sp, x, measure_verdict_word(v, tr->lang == LANG_ZH)};
    if (tr->format != FORMAT_JSON) {
        trace_table_row(tr, &BENCH_TABLE, row);
        return;
    }
    char run[NAME];
    snprintf(run, sizeof run, "K=%d", K);
    trace_run(tr, run);
    trace_count(tr, "gamma", K, NULL, NULL);
    trace_value(tr, "alpha", alpha_of(p), "", NULL, NULL);
    trace_value(tr, "tokens_per_round", per_round(p), "tokens", NULL, NULL);
    trace_count(tr, "rounds", p->stats.rounds, NULL, NULL);
    trace_timing_stats(tr, "cached", plain, runs);
    trace_timing_stats(tr, "speculative", spec, runs);
    trace_comparison_of(tr, "speedup", r, v, NULL, NULL);
}

static void bench_head(Trace *tr, const SpecArms *p, int runs) {
    trace_machine(tr, measure_machine());
    trace_sayf(tr, "Speculative decoding against plain cached decoding, %s with the draft %s: %d tokens after \"%s\", "
                   "greedy, %d runs of each arm after a warm-up, interleaved; %d thread%s.",
               "投机解码对比普通的缓存解码，%s，草稿模型 %s：%d 个 token，接在“%s”之后，贪心解码，"
               "每种方式热身一次后交替运行 %d 次；%d 个线程%s。",
               specarms_kind(p, tr->lang == LANG_ZH, 0), p->draft_path, p->steps, p->prompt_text, runs,
               pool_threads(p->pool), pool_threads(p->pool) == 1 || tr->lang == LANG_ZH ? "" : "s");
    if (tr->format != FORMAT_JSON) {
        fputc('\n', tr->out);
        trace_table_head(tr, &BENCH_TABLE);
    }
}

static void bench_foot(Trace *tr) {
    if (tr->format == FORMAT_JSON) {
        trace_run(tr, NULL);
        trace_count(tr, "texts_identical", 1, NULL, NULL);
        return;
    }
    fputc('\n', tr->out);
    trace_say(tr,
              "Times: median (min…max) of the generation alone. Speed-up: cached over speculative, ± as hyperfine.\n"
              "α: drafted tokens accepted among those judged; tok/rd: tokens a round.\n"
              "Both arms wrote the target's own text in every run.",
              "时间：只计生成本身，中位数（最小…最大）。加速：缓存时间除以投机时间，± 同 hyperfine。\n"
              "α：被判定的起草 token 中被接受的比例；每轮：每轮得到的 token 数。\n"
              "每次运行两种方式都写出了目标模型自己的文字。");
}

// Each K: warm-up, runs interleaved, the texts checked, the row.
static int bench_all(Trace *tr, SpecArms *p, const int *ks, int nk, int runs) {
    double *plain = malloc(sizeof(double) * (size_t)runs), *spec = malloc(sizeof(double) * (size_t)runs);
    int rc = 0;
    if (!plain || !spec) {
        fileio_error(tr->lang, "out of memory", "内存不足");
        rc = 1;
    }
    for (int i = 0; i < nk && !rc; i++) {
        rc = specarms_set_gamma(p, ks[i]);
        if (!rc) rc = measure_interleaved(plain, spec, MEASURE_WARMUP, runs, specarms_run_plain, p, specarms_run_spec, p);
        if (!rc && p->differ_at >= 0) rc = differ(p, ks[i]);
        if (!rc) bench_row(tr, p, ks[i], plain, spec, runs);
    }
    free(plain);
    free(spec);
    return rc;
}

int specbench_bench(const Options *opt, Trace *tr) {
    int steps, rc = check_options(opt, &steps, 1);
    if (rc) return rc;
    int ks[BENCH_K_MAX], nk = 0, runs = opt->repeat > 0 ? opt->repeat : MEASURE_RUNS;
    if (opt->given[OPT_GAMMA]) ks[nk++] = opt->gamma;
    else
        for (int k = 1; k <= BENCH_K_MAX; k++) ks[nk++] = k;
    SpecArms p;
    rc = specarms_open(&p, opt, steps, ks[nk - 1]);
    if (rc) return rc;
    Pool *pool = pool_new_for(opt->threads, p.llama ? llama_row_work(&p.lt.cfg) : gpt_row_work(p.gt.cfg));
    specarms_use_pool(&p, pool);
    if (!pool) {
        fileio_error(tr->lang, "could not start %d threads", "无法启动 %d 个线程", ops_threads_asked(opt->threads));
        rc = 1;
    }
    if (!rc && trace_begin(tr)) rc = 1;
    if (!rc) {
        bench_head(tr, &p, runs);
        rc = bench_all(tr, &p, ks, nk, runs);
        if (!rc) bench_foot(tr);
        rc = trace_finish(tr, rc);
    }
    specarms_close(&p);
    pool_free(pool);
    return rc;
}

// ----------------------------------------------------------------------------
// race --draft

// race.c's table: the lane with the cache alone, and the speculative lane.
static void spec_race_table(Trace *tr, const SpecArms *p, const double seconds[2], const int tokens[2]) {
    char spec[48];
    snprintf(spec, sizeof spec, trace_text(tr, "speculative, K = %d", "投机解码，K = %d"), p->gamma);
    const char *lane[2] = {trace_text(tr, "with the cache alone", "只用缓存"), spec};
    race_table(tr, lane, tokens, seconds, 3, 24);
}

// The ratio of one run each, its ± from the scatter of the steps (plain)
// and the rounds (speculative) within each run, as race.c's.
static MeasureRatio race_ratio(const double seconds[2], const double sd[2]) {
    if (seconds[0] <= 0 || seconds[1] <= 0) return measure_ratio_of(0, 0, 1);
    double x = seconds[0] / seconds[1];
    return measure_ratio_of(x, x * hypot(sd[0] / seconds[0], sd[1] / seconds[1]), 2);
}

static void race_report(Trace *tr, const SpecArms *p, const double seconds[2], const double sd[2]) {
    int tokens[2] = {p->len_plain - p->n_prompt, p->len_spec - p->n_prompt}, same = p->differ_at < 0;
    MeasureRatio r = race_ratio(seconds, sd);
    MeasureVerdict v = measure_verdict_race(r);   // one run each: beyond what races apart differ by
    char *text = specarms_text(p);
    trace_machine(tr, measure_machine());
    trace_sayf(tr, "%s writes %d tokens after \"%s\" twice, greedy: with its cache alone, then with the draft %s "
                   "proposing K = %d tokens a round.",
               "%s用贪心解码写两遍 %d 个 token，接在“%s”之后：先只用它的缓存，再由草稿模型 %s 每轮提议 K = %d 个 token。",
               specarms_kind(p, tr->lang == LANG_ZH, 1), tokens[1], p->prompt_text, p->draft_path, p->gamma);
    spec_race_table(tr, p, seconds, tokens);
    if (tr->format == FORMAT_JSON) {
        trace_run(tr, "cache");
        trace_timing(tr, "cache", seconds[0], 1);
        trace_run(tr, "speculative");
        if (text) trace_textval(tr, "text", text);
        trace_timing(tr, "speculative", seconds[1], 1);
        trace_count(tr, "gamma", p->gamma, NULL, NULL);
        trace_value(tr, "alpha", alpha_of(p), "", NULL, NULL);
        trace_value(tr, "tokens_per_round", per_round(p), "tokens", NULL, NULL);
        trace_run(tr, NULL);
        trace_count(tr, "texts_identical", same, NULL, NULL);
        trace_comparison_of(tr, "speedup", r, v, NULL, NULL);
        free(text);
        return;
    }
    char said[160];
    measure_compare_text(said, sizeof said, r, v, tr->lang == LANG_ZH);
    fputc('\n', tr->out);
    trace_say(tr, same ? "Both runs wrote the same text, character for character."
                       : "The two texts differ: the rounds changed the result.",
              same ? "两次写出的文字一字不差。" : "两次写出的文字不同：投机解码的轮次改变了结果。");
    trace_sayf(tr, "Speculative: %s (%.3f s against %.3f s; ± from the scatter of each run's step and round times "
                   "only: one race concludes only beyond a factor of %.1f, ± included, as races apart differ by more; bench --draft "
                   "times several runs). α %.3f, %.2f tokens a round, %d rounds.",
               "投机解码：%s（%.3f 秒对 %.3f 秒；± 只来自每次运行内各步、各轮耗时的离散程度：不同次的赛跑相差更大，"
               "所以一次赛跑只在相差超过 %.1f 倍（含 ±）时才下结论；bench --draft 会计时多次）。α %.3f，每轮 %.2f 个 "
               "token，共 %d 轮。",
               said, seconds[1], seconds[0], MEASURE_RACE_FLOOR, alpha_of(p), per_round(p), p->stats.rounds);
    if (text) {
        fputc('\n', tr->out);
        utf8_put_shown(tr->out, text, strlen(text));
        fputc('\n', tr->out);
    }
    free(text);
}

int specbench_race(const Options *opt, Trace *tr) {
    int steps, rc = check_options(opt, &steps, 0);
    if (rc) return rc;
    SpecArms p;
    int K = speccmd_gamma(opt);
    rc = specarms_open(&p, opt, steps, K);
    if (rc) return rc;
    double seconds[2], sd[2];
    rc = specarms_set_gamma(&p, K);
    if (!rc) {
        specarms_run_plain(&p, &seconds[0]);
        sd[0] = measure_sum_sd(p.times, p.cached, p.n_times);
        specarms_run_spec(&p, &seconds[1]);
        sd[1] = measure_sum_sd(p.times, p.cached, p.n_times);
        if (trace_begin(tr)) rc = 1;
        else {
            race_report(tr, &p, seconds, sd);
            rc = trace_finish(tr, p.differ_at >= 0);
        }
    }
    specarms_close(&p);
    return rc;
}
