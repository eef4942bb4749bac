// lesson 10 — 键值缓存 (seed 003: the numpy GPT chapter's KV cache)
//
// The chapter's char GPT (context 256, embedding 384, 6 heads, 6 blocks)
// writes 256 characters after "ROMEO:" twice: without the cache (4.93 s in
// the chapter's numpy) and with it (0.53 s), the same text both times.
//
//   缓存结构  per block, key kept transposed as (batch, heads, head_dim, length)
//             and value as (batch, heads, length, head_dim)
//   增量计算  a cached step feeds only the newest token; its key and value are
//             appended and it attends to all of them, with no causal mask
//   位置编码  the new token's position embedding is offset by len(tokens) - 1
//   缓存重置  once the text outgrows the context (len(tokens) > 256, which with
//             "ROMEO:" and 256 steps happens at step 252), the cache is dropped
//             and the last 256 tokens are recomputed in full, at every step
//             from there on
//
// Where the chapter concatenates a growing array at every step, kvdemo
// reserves each block's cache for the whole context once and writes the new
// column in place: the same numbers, without a copy per step.
//
// The lesson shows the cache's shapes as it grows, then runs both ways on the
// same prompt and seed and compares texts, logits (bit for bit, every step),
// times and the cost per token. The times are measured as measure.h does:
// after a short warm-up each way, both ways run --repeat times (3: a run
// without the cache takes seconds), interleaved, each printed as its median
// with min … max, and the ratio as x ± e with the verdict its runs support. On a terminal it shows the race instead (the
// two runs side by side, live, as `kvdemo race`); --no-race, a pipe or JSON
// give the runs one after the other.
#include "fileio.h"
#include "flash.h"
#include "gptsetup.h"
#include "lessons.h"
#include "measure.h"
#include "ops.h"
#include "race.h"
#include "race_svg.h"
#include "sampler.h"
#include "screen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { DEFAULT_STEPS = 256, SHOWN_STEPS = 4, DEFAULT_RUNS = 3, WARMUP_STEPS = 16 };

// What a run records at every step: the logits it drew from, its cost.
typedef struct {
    GptConfig cfg;
    float *logits;          // (steps, V)
    int steps_done;
    double seconds;         // forward passes and draws only
    GptCost cost;           // summed over the steps
    int shown;              // steps whose cache shapes were printed
    Trace *tr;              // for the shapes; NULL: show nothing
    double *elapsed;        // (steps) seconds to the end of each step, for the page's replay, or NULL
    int n_prompt;           // len(tokens) before step 1
    // The steps of a cached run that dropped the cache because the text
    // outgrew the context, and what they cost.
    int resets, first_reset;   // how many; the first one's step (1-based)
    double reset_seconds;
    GptCost reset_cost;
} Record;

static void add_cost(GptCost *sum, GptCost c) {
    sum->matmul_flops += c.matmul_flops;
    sum->attention_flops += c.attention_flops;
    sum->weight_bytes += c.weight_bytes;
    sum->cache_bytes += c.cache_bytes;
}

static int record_step(void *ctx, const GptStep *st) {
    Record *r = ctx;
    memcpy(r->logits + (size_t)st->step * r->cfg.V, st->logits, sizeof(float) * (size_t)r->cfg.V);
    r->steps_done = st->step + 1;
    r->seconds += st->seconds;
    if (r->elapsed) r->elapsed[st->step] = r->seconds;
    GptCost c = gpt_cost(r->cfg, st->n, st->offset);
    add_cost(&r->cost, c);
    // A step of the cached run that fed everything again, after step 1: the
    // text has outgrown the context and the cache was dropped.
    int n_tokens = r->n_prompt + st->step;   // len(tokens) before this step
    if (st->step > 0 && !st->cached) {
        Trace *tr = r->tr;
        if (tr && !r->resets) {
            r->first_reset = st->step + 1;
            trace_step(tr, st->step + 1);
            trace_say(tr, "  ...", "  ……");
            trace_sayf(tr,
                       "step %d: len(tokens) = %d > %d: the cache is dropped and the last %d tokens are fed at\n"
                       "offset 0, with the causal mask; so again at every later step.",
                       "第 %d 步：len(tokens) = %d > %d，缓存被丢弃，最后 %d 个 token 从偏移 0 起重新输入，\n"
                       "使用因果掩码；之后的每一步都这样。",
                       st->step + 1, n_tokens, r->cfg.T, st->n);
            trace_say(tr,
                      "It must: the positions are learned (wpe has T rows, and each cached key and value holds its\n"
                      "own wpe[t]), so the cache can neither roll nor run past T. Rotary positions can: lesson 14.",
                      "必须如此：位置编码是学到的（wpe 只有 T 行，每个缓存的 key 和 value 都含有自己的 wpe[t]），\n"
                      "所以缓存既不能滚动也不能越过 T。旋转位置编码可以：见第 14 课。");
            int kshape[4] = {1, r->cfg.H, r->cfg.C / r->cfg.H, st->cache_len};
            trace_shape(tr, "key", 4, kshape);
            trace_step(tr, 0);
            trace_count(tr, "first_reset_step", st->step + 1, NULL, NULL);
        }
        r->resets++;
        r->reset_seconds += st->seconds;
        add_cost(&r->reset_cost, c);
    }
    if (r->tr && r->shown < SHOWN_STEPS && (st->step == 0 || st->cached)) {
        Trace *tr = r->tr;
        int H = r->cfg.H, D = r->cfg.C / r->cfg.H, len = st->cache_len;
        trace_step(tr, st->step + 1);
        if (st->cached)
            trace_sayf(tr, "step %d: fed 1 token at offset %d (the cache holds the rest), no causal mask:",
                       "第 %d 步：只输入 1 个 token，位置偏移 %d（其余在缓存中），不用因果掩码：", st->step + 1, st->offset);
        else
            trace_sayf(tr, "step %d: fed %d tokens at offset 0 (no cache yet), with the causal mask:",
                       "第 %d 步：输入全部 %d 个 token，偏移 0（还没有缓存），使用因果掩码：", st->step + 1, st->n);
        int kshape[4] = {1, H, D, len}, vshape[4] = {1, H, len, D};
        trace_shape(tr, "key", 4, kshape);
        trace_shape(tr, "value", 4, vshape);
        r->shown++;
        trace_step(tr, 0);
    }
    return 0;
}

// One generation from the prompt; returns 0 or 1 (out of memory).
static int run_once(Record *r, char **text, GptState *s, const GptModel *m, const int *prompt, int n_prompt,
                    int steps, int use_cache, const Options *opt) {
    int *tokens = malloc(sizeof(int) * (size_t)(n_prompt + steps));
    // np.random.seed(42); trainer.generate(dataset, prompt="ROMEO:", use_cache=...)
    *text = tokens ? gptsetup_generate_text(tokens, s, m, prompt, n_prompt, steps, use_cache, opt, record_step, r) : NULL;
    free(tokens);
    return *text ? 0 : 1;
}

// One way of the timing (measure_interleaved calls it): call 0 is a short
// warm-up, call 1 the lesson's run (its text, logits and cost kept; the
// cached run's shapes traced), later calls only time.
typedef struct {
    Record *rec;
    char **text;
    GptState *s;
    const GptModel *m;
    const int *prompt;
    int n_prompt, steps, use_cache, calls;
    const Options *opt;
    Trace *tr;
    double *seconds;         // (runs) the counted calls' times (measure_interleaved fills it)
    double *reset_seconds;   // (runs) their reset steps' share of it
} Arm;

static int arm_run(void *ctx, double *seconds) {
    Arm *a = ctx;
    int call = a->calls++;
    Record scratch = {.cfg = a->rec->cfg, .logits = a->rec->logits, .n_prompt = a->n_prompt};
    Record *r = call == 1 ? a->rec : &scratch;
    int steps = call == 0 && a->steps > WARMUP_STEPS ? WARMUP_STEPS : a->steps;
    if (call == 1) {
        trace_run(a->tr, a->use_cache ? "cache" : "no-cache");
        if (a->use_cache) r->tr = a->tr;
    }
    char *text = NULL;
    int rc = run_once(r, &text, a->s, a->m, a->prompt, a->n_prompt, steps, a->use_cache, a->opt);
    r->tr = NULL;
    if (call == 1) *a->text = text;
    else free(text);
    if (rc) return rc;
    *seconds = r->seconds;
    if (call >= 1) a->reset_seconds[call - 1] = r->reset_seconds;
    if (call == 1 && a->use_cache) {
        trace_say(a->tr, "  ...\n", "  ……\n");
        trace_pause(a->tr);
    }
    return 0;
}

// The cached run's cost without its reset steps, and what those cost: the
// time's share and the speed of the other steps from each of the runs runs
// of arm a (its seconds and reset seconds), as median with min … max.
static void show_resets(Trace *tr, const Record *r, int steps, const Arm *a, int runs) {
    if (!r->resets) return;
    int kept = steps - r->resets;
    double flops = r->cost.matmul_flops + r->cost.attention_flops;
    double reset_flops = r->reset_cost.matmul_flops + r->reset_cost.attention_flops;
    double *x = malloc(sizeof(double) * 2 * (size_t)runs), *rate = x ? x + runs : NULL;
    char share[96] = "?";
    if (x) {
        for (int i = 0; i < runs; i++) {
            x[i] = 100 * a->reset_seconds[i] / a->seconds[i];
            rate[i] = kept / (a->seconds[i] - a->reset_seconds[i]);
        }
        measure_value_text(share, sizeof share, stats_of(x, runs), "%");
        trace_value_runs(tr, "reset_time_percent", x, runs, "%", NULL, NULL);
    }
    trace_sayf(tr,
               "  %d of the %d steps (from step %d) dropped the cache and fed the whole context:\n"
               "  %.0f%% of this run's arithmetic and %s of its time. The other %d steps:",
               "  有 %d 步（共 %d 步，从第 %d 步起）丢弃了缓存、把整个上下文重新输入：\n"
               "  占这次运行计算量的 %.0f%%、耗时的 %s。其余 %d 步：",
               r->resets, steps, r->first_reset, 100 * reset_flops / flops, share, kept);
    trace_count(tr, "reset_steps", r->resets, NULL, NULL);
    if (kept > 0 && x)
        trace_value_runs(tr, "tokens_per_s_without_resets", rate, runs, "tokens/s", "  speed", "  速度");
    free(x);
    if (kept > 0)
        trace_value(tr, "gflop_per_token_without_resets", (flops - reset_flops) / kept * 1e-9, "GFLOP",
                    "  computed per token", "  每个 token 的计算量");
}

// The cost per token; the speed from each of the runs runs of arm a.
static void show_cost(Trace *tr, const Record *r, int steps, const Arm *a, int runs) {
    double *rate = malloc(sizeof(double) * (size_t)runs);
    if (rate) {
        for (int i = 0; i < runs; i++) rate[i] = steps / a->seconds[i];
        trace_value_runs(tr, "tokens_per_s", rate, runs, "tokens/s", "speed", "速度");
        free(rate);
    } else {
        trace_value(tr, "tokens_per_s", steps / r->seconds, "tokens/s", "speed", "速度");
    }
    trace_value(tr, "gflop_per_token", (r->cost.matmul_flops + r->cost.attention_flops) / steps * 1e-9, "GFLOP",
                "computed per token", "每个 token 的计算量");
    trace_value(tr, "weight_mb_per_token", r->cost.weight_bytes / steps * 1e-6, "MB", "weights read per token",
                "每个 token 读取的权重");
    trace_value(tr, "kv_mb_per_token", r->cost.cache_bytes / steps * 1e-6, "MB", "keys and values read per token",
                "每个 token 读取的键和值");
}

// On a terminal: the two runs race side by side, live, and end with the same
// text and the ratio of their times (race.c). The race draws on the terminal
// itself, so a --step screen hands it over for the time of the race.
static int race_lesson(const GptModel *m, const Options *opt, Trace *tr) {
    trace_heading(tr, "The race: without and with the cache, side by side",
                  "赛跑：不使用缓存与使用缓存，并排进行");
    trace_pause(tr);
    if (tr->quit) return 0;
    FILE *out = tr->out;
    struct Screen *screen = tr->screen;
    if (screen) {
        screen_sync(screen);
        tr->out = screen->term;
        tr->screen = NULL;
    }
    int rc = race_model(m, opt, tr);
    if (screen) {
        tr->out = out;
        tr->screen = screen;
    }
    if (rc) return rc;
    trace_say(tr,
              "\nThe chapter's numpy: 4.93 s without the cache, 0.53 s with it (9.3x), for 256 tokens.\n"
              "kvdemo lesson 10 --no-race runs them one after the other: the cache's shapes as it grows\n"
              "and the logits of every step compared bit for bit. The chapter's exercise is `kvdemo bench`.",
              "\n原文大意（numpy 章节）：256 个 token，不使用缓存 4.93 秒，使用缓存 0.53 秒（9.3 倍）。\n"
              "kvdemo lesson 10 --no-race 让两次运行先后进行：逐步显示缓存的形状，\n"
              "并逐位比较每一步的 logits。课后练习请运行 `kvdemo bench`。");
    if (opt->runs != RUN_BOTH)
        fileio_error(tr->lang, "lesson 10 always runs both ways to compare them; %s ignored",
                     "第 10 课总是两种方式都跑一遍来比较；忽略 %s", opt->runs == RUN_CACHE ? "--cache" : "--no-cache");
    return 0;
}

// The model and its cache, as the chapter describes them.
static void describe_model(Trace *tr, const GptModel *m, int random_model, int tile) {
    GptConfig g = m->cfg;
    int D = g.C / g.H;
    trace_sayf(tr, "The model: context %d, embedding %d, %d heads of %d, %d blocks, %d characters (%zu parameters).",
               "模型：上下文 %d，嵌入 %d，%d 个头（每头 %d），%d 个模块，词表 %d 个字符（%zu 个参数）。", g.T, g.C, g.H,
               D, g.L, g.V, m->num_params);
    if (random_model) {
        fileio_error(tr->lang, "%s is missing; lesson 10 runs a random model (its text is noise)",
                     "找不到 %s；第 10 课改用随机模型（写出的文字没有意义）", GPT_SHIPPED_MODEL);
        trace_say(tr, "No trained model was found: the weights are random and the text is noise. The cache works the same.",
                  "没有找到训练好的模型：权重是随机的，生成的文字没有意义；缓存的原理完全一样。");
    }
    trace_sayf(tr,
               "Each block keeps its cache for the whole context, reserved once: key (1, %d, %d, %d) and\n"
               "value (1, %d, %d, %d), %.2f MB for all %d blocks. (The chapter concatenates a growing\n"
               "array at every step; kvdemo writes the new column in place: the same numbers, no copy.)\n"
               "The key is kept transposed so that query @ key needs no transpose.\n",
               "每个模块为整个上下文一次性预留缓存：key (1, %d, %d, %d)、value (1, %d, %d, %d)，\n"
               "%.2f MB（%d 个模块合计）。（原文每一步把新的一列拼接到越来越长的数组上；\n"
               "kvdemo 直接写进预留好的位置：数值一样，只是不用每步复制。）\n"
               "key 按转置存放，query @ key 时就不用再转置。\n",
               g.H, D, g.T, g.H, g.T, D, 2.0 * g.L * g.C * g.T * 4 * 1e-6, g.L);
    if (tile)
        trace_sayf(tr, "Attention: flash, in tiles of %d keys with an online softmax (lesson 6.3); a cached step by\n"
                   "flash-decoding. The text must still be the same both ways.\n",
                   "注意力：flash，每块 %d 个键，在线 softmax（第 6.3 课）；缓存步用 flash-decoding。\n"
                   "两种方式生成的文字仍须相同。\n", tile);
}

// The two runs compared: their texts, their logits bit for bit, their times
// (arm[c].seconds of runs runs each).
static void compare_runs(Trace *tr, const Record rec[2], char *const text[2], int steps, const Arm arm[2], int runs) {
    trace_run(tr, NULL);
    trace_heading(tr, "Comparison", "对比");
    size_t len0 = strlen(text[0]), len1 = strlen(text[1]), first = 0;
    while (first < len0 && first < len1 && text[0][first] == text[1][first]) first++;
    int same_text = len0 == len1 && first == len0;
    trace_count(tr, "text_identical", same_text, NULL, NULL);
    if (same_text) trace_say(tr, "The two texts are identical.", "两段文字完全相同。");
    else trace_sayf(tr, "The texts differ from byte %zu on.", "两段文字从第 %zu 个字节起不同。", first);
    int sh[2] = {rec[0].steps_done, rec[0].cfg.V};
    Tensor l0 = tensor_view(rec[0].logits, 2, sh), l1 = tensor_view(rec[1].logits, 2, sh);
    trace_compare(tr, "logits", trace_text(tr, "logits of every step without the cache", "不使用缓存时每一步的 logits"), &l0,
                  trace_text(tr, "with the cache", "使用缓存时的"), &l1);
    trace_comparison(tr, "speedup", arm[0].seconds, runs, arm[1].seconds, runs, "with the cache", "使用缓存");
    char a[96], b[96];
    measure_spread_text(a, sizeof a, stats_of(arm[0].seconds, runs));
    measure_spread_text(b, sizeof b, stats_of(arm[1].seconds, runs));
    trace_sayf(tr,
               "\nThe chapter's numpy: 4.93 s without the cache, 0.53 s with it (9.3x), for 256 tokens.\n"
               "Here: %s and %s for %d tokens on %d thread%s.\n"
               "The chapter's exercise — is the cache's advantage larger for longer texts? — is `kvdemo bench`.",
               "\n原文大意（numpy 章节）：256 个 token，不使用缓存 4.93 秒，使用缓存 0.53 秒（9.3 倍）。\n"
               "这里：%s 与 %s，%d 个 token，%d 个线程%s。\n"
               "课后练习——生成长度越长，缓存的优势越明显吗？——请运行 `kvdemo bench`。",
               a, b, steps, pool_threads(arm[0].s->pool), pool_threads(arm[0].s->pool) == 1 ? "" : trace_text(tr, "s", ""));
}

// The medians of each way's runs, for the cost per token and the resets' share.
static void take_medians(Record rec[2], const Arm arm[2], int runs) {
    for (int c = 0; c < 2; c++) {
        rec[c].seconds = stats_of(arm[c].seconds, runs).median;
        rec[c].reset_seconds = stats_of(arm[c].reset_seconds, runs).median;
    }
}

// The page replays the race from the recorded times of each step
// (rec[c].elapsed, kept for HTML only: the last timed run's), scaled so
// that each bar ends at its way's median, the time the text gives.
static void replay_race(Trace *tr, Record rec[2], int steps) {
    for (int c = 0; c < 2; c++) {
        double end = rec[c].elapsed[steps - 1];
        if (end > 0)
            for (int i = 0; i < steps; i++) rec[c].elapsed[i] *= rec[c].seconds / end;
    }
    Buf b;
    buf_init(&b);
    race_svg(&b, (const double *const[]){rec[0].elapsed, rec[1].elapsed}, steps);
    char *replay = buf_take(&b);
    if (replay) trace_svg(tr, replay);
    free(replay);
}

// Without the race: both ways timed runs times in turn, the cached one's
// first run tracing the cache as it grows; then each way's text and cost,
// the comparison and the page's replay. Returns 0, or -1 out of memory.
static int timed_runs(Trace *tr, Record rec[2], char *const text[2], Arm arm[2], int steps, int runs) {
    trace_machine(tr, measure_machine());
    trace_sayf(tr,
               "Both ways are timed %d times, taking turns (with the cache, without, with, ...), after a warm-up\n"
               "of %d tokens each way; each time below is the median of the runs, with min … max.\n",
               "两种方式各计时 %d 次，轮流进行（使用缓存、不使用缓存、使用缓存……），之前各热身 %d 个 token；\n"
               "下面每个时间都是这些运行的中位数，附最小 … 最大。\n",
               runs, steps < WARMUP_STEPS ? steps : WARMUP_STEPS);
    trace_heading(tr, "The cache as it grows (block 0; every block alike)", "缓存的增长（第 0 个模块；每个模块相同）");
    // The cached run's first timed run traces the shapes; then without the
    // cache; then both again, in turn.
    if (measure_interleaved(arm[1].seconds, arm[0].seconds, 1, runs, arm_run, &arm[1], arm_run, &arm[0])) return -1;
    take_medians(rec, arm, runs);

    for (int c = 0; c < 2; c++) {
        trace_run(tr, c ? "cache" : "no-cache");
        trace_heading(tr, c ? "With the cache" : "Without the cache", c ? "使用缓存" : "不使用缓存");
        trace_textval(tr, "text", text[c]);
        trace_say(tr, "", "");
        show_cost(tr, &rec[c], steps, &arm[c], runs);
        if (c) show_resets(tr, &rec[c], steps, &arm[c], runs);
        trace_measure(tr, c ? "cache" : "no-cache", arm[c].seconds, runs);
        trace_say(tr, "", "");
    }

    compare_runs(tr, rec, text, steps, arm, runs);
    if (rec[0].elapsed && rec[1].elapsed) replay_race(tr, rec, steps);
    return 0;
}

int lesson10_run(const Options *opt, Trace *tr) {
    GptModel m;
    int random_model, *prompt, n_prompt;
    int rc = gptsetup_lesson(&m, &random_model, &prompt, &n_prompt, opt, NULL);
    if (rc) return rc;
    int steps = opt->steps > 0 ? opt->steps : DEFAULT_STEPS;
    int runs = opt->repeat > 0 ? opt->repeat : DEFAULT_RUNS;
    GptState s = {0};
    Record rec[2];
    memset(rec, 0, sizeof rec);
    char *text[2] = {NULL, NULL};
    Arm arm[2];
    memset(arm, 0, sizeof arm);
    double *times = malloc(sizeof(double) * 4 * (size_t)runs);   // seconds and reset seconds of both ways
    for (int c = 0; c < 2; c++) {
        rec[c].cfg = m.cfg;
        rec[c].n_prompt = n_prompt;
        rec[c].logits = malloc(sizeof(float) * (size_t)steps * (size_t)m.cfg.V);
        rec[c].elapsed = tr->doc == FORMAT_HTML ? calloc((size_t)steps, sizeof(double)) : NULL;
        arm[c] = (Arm){&rec[c], &text[c], &s, &m, prompt, n_prompt, steps, c, 0, opt, tr, NULL, NULL};
        if (times) arm[c].seconds = times + 2 * c * runs, arm[c].reset_seconds = times + (2 * c + 1) * runs;
    }
    if (!times || !rec[0].logits || !rec[1].logits || gpt_state_init(&s, m.cfg) ||
        !(s.pool = pool_new_for(opt->threads, gpt_row_work(m.cfg)))) {   // s's threads, freed below
        fileio_error(tr->lang, "out of memory", "内存不足");
        rc = 1;
        goto done;
    }
    if ((rc = gptsetup_attention(opt, &s))) goto done;
    lessons_heading(tr);
    describe_model(tr, &m, random_model, s.cache.tile);

    if (tr->format == FORMAT_TEXT && !opt->no_race && isatty(STDOUT_FILENO)) {
        rc = race_lesson(&m, opt, tr);
        goto done;
    }

    if (timed_runs(tr, rec, text, arm, steps, runs)) goto oom;
    goto done;
oom:
    fileio_error(tr->lang, "out of memory", "内存不足");
    rc = 1;
done:
    free(times);
    free(text[0]);
    free(text[1]);
    free(rec[0].logits);
    free(rec[1].logits);
    free(rec[0].elapsed);
    free(rec[1].elapsed);
    free(prompt);
    pool_free(s.pool);
    gpt_state_free(&s);
    gpt_free(&m);
    return rc;
}
