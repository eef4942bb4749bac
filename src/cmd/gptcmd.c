// gptcmd — the char GPT's commands: generate, init, train and eval (bench
// is bench.c).
//
//   kvdemo generate   the chapter's generate: text after a prompt, with or
//                     without the cache, and its speed
//   kvdemo init       write a random model file (until a trained one ships,
//                     and for tests)
#include "gptcmd.h"

#include "fileio.h"
#include "kvcmd.h"
#include "llamacmd.h"
#include "llamarace.h"
#include "flash.h"
#include "measure.h"
#include "gptsetup.h"
#include "ops.h"
#include "pagedcmd.h"
#include "race.h"
#include "paths.h"
#include "bigmem.h"
#include "sampler.h"
#include "screen.h"
#include "speccmd.h"
#include "stats.h"
#include "timer.h"
#include "train.h"
#include "utf8.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { DEFAULT_STEPS = 256 };

// s's threads for the arithmetic: --threads N, or the fastest for the shape
// (s->pool, freed by the caller before the state).
static int start_threads(const Options *opt, GptState *s) {
    if (!(s->pool = pool_new_for(opt->threads, gpt_row_work(s->cfg)))) {
        fileio_error(opt->lang, "could not start %d threads", "无法启动 %d 个线程", ops_threads_asked(opt->threads));
        return 1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// kvdemo generate

// What generate shows while it runs: in text, each character is written (and
// flushed) as it is drawn; on a terminal the tokens/s so far stand just
// behind it, in dim text that the next character erases, and piped output
// stays the plain text. The time counted is the steps' own (forward pass and
// draw), never the printing. This is live terminal output, written straight
// to the stream rather than through the trace: the trace gives the whole
// text as one "text" event (JSON) when the run is over.
typedef struct {
    const GptModel *m;
    FILE *out;
    int stream;            // text: write each character as it comes
    Lang lang;             // the counter's language
    int live;              // stdout is a terminal: the counter too
    int width, column;     // the terminal's columns, and where the text is
    int use_cache;
    double seconds;        // sum of the steps' times
    int resets;            // cached run: steps past the context that fed the whole window again
    double reset_seconds;
    int nonfinite_step;    // the first step whose logits were not all finite, or -1
    double *step_seconds;  // (steps) each step's time, for the spread
    unsigned char *cached; // (steps) 1: the step fed one token to the cache
    int first_n;           // tokens the first step fed: the prefill
    const char *run;       // the trace's run name, or NULL: "cache" / "no-cache"
    int threads;           // the state's threads (pool_threads), for the figures
} Stream;

static int stream_step(void *ctx, const GptStep *st) {
    Stream *g = ctx;
    // NaN or infinite logits: the arithmetic overflowed, and every token
    // drawn from them would be noise presented as text.
    for (int i = 0; i < g->m->cfg.V; i++)
        if (!isfinite(st->logits[i])) {
            g->nonfinite_step = st->step;
            return 1;
        }
    g->seconds += st->seconds;
    if (st->step == 0) g->first_n = st->n;
    g->step_seconds[st->step] = st->seconds;
    g->cached[st->step] = (unsigned char)st->cached;
    if (g->use_cache && st->step > 0 && !st->cached) {
        g->resets++;
        g->reset_seconds += st->seconds;
    }
    if (!g->stream) return 0;
    char piece[8];
    gpt_decode(piece, sizeof piece, g->m, &st->token, 1);
    if (g->live) fputs("\x1b[K", g->out);   // the counter behind the text goes
    utf8_put_shown(g->out, piece, strlen(piece));   // a control character of the vocabulary escaped
    g->column = piece[0] == '\n' ? 0 : g->column + 1;
    char counter[48];
    double rate = (st->step + 1) / g->seconds;
    if (g->lang == LANG_ZH) snprintf(counter, sizeof counter, "  每秒 %.0f 个 token", rate);
    else snprintf(counter, sizeof counter, "  %.0f tokens/s", rate);
    int n = utf8_width(counter);   // columns on the screen
    // ESC 7 / ESC 8 keep the cursor where the next character goes; the counter
    // is left out where it would wrap the line.
    if (g->live && g->column + n < g->width) fprintf(g->out, "\x1b" "7\x1b[2m%s\x1b[0m\x1b" "8", counter);
    fflush(g->out);
    return 0;
}

// The error for logits that are not finite at step (from 0). Returns 1.
static int say_nonfinite(Lang lang, int step) {
    return -fileio_error(lang, "step %d: the logits are not finite numbers (NaN or infinity): the arithmetic overflowed "
                         "float32, so the model's weights are far too large or damaged; `kvdemo eval --model FILE` "
                         "measures a model",
                         "第 %d 步：logits 不是有限数（NaN 或无穷大）：运算超出了 float32 的范围，说明模型的权重过大或"
                         "已损坏；可以用 `kvdemo eval --model FILE` 检查模型",
                         step + 1);
}

// A run's time is measured as measure.h measures one run: its ± from the
// scatter of its steps (measure_sum_sd); " ± 12.0 ms" in pm, or "".
static void run_spread(char *pm, size_t size, const Stream *g, int steps) {
    double sd = measure_sum_sd(g->step_seconds, g->cached, steps);
    char sd_text[24];
    if (sd > 0) snprintf(pm, size, " ± %s", measure_time_text(sd_text, sizeof sd_text, sd));
    else if (size) pm[0] = '\0';
}

// Under the run's line: its steps' median with min … max, and the busy
// banner when the machine was busy at the start; JSON: the steps' timing.
static void show_steps(Trace *tr, const Stream *g, int steps, MeasureMachine machine) {
    char each[96];
    measure_spread_text(each, sizeof each, stats_of(g->step_seconds, steps));
    trace_sayf(tr, "-- a step: %s, median of %d; the ± above is their scatter (one run)",
               "—— 每步：%s，%d 步的中位数；上面的 ± 是各步耗时的离散程度（只有一次运行）", each, steps);
    trace_machine(tr, machine);
    if (tr->format == FORMAT_JSON) {
        trace_timing_stats(tr, "step", g->step_seconds, steps);
        trace_value(tr, "seconds_sd", measure_sum_sd(g->step_seconds, g->cached, steps), "s", NULL, NULL);
    }
}

// The figures of a run of `steps` that did `done` (and wrote text): lines
// for people, events for scripts. variant NULL: the plain cache (else its
// cache holds kv_bytes); tile 0: plain attention.
static void say_figures(Trace *tr, const Stream *g, const GptModel *m, const char *text, int steps, int done,
                        double seconds, const GptVariant *variant, size_t kv_bytes, int tile, MeasureMachine machine) {
    int use_cache = g->use_cache;
    trace_run(tr, g->run ? g->run : use_cache ? "cache" : "no-cache");
    // The text went out token by token above; JSON gets it whole.
    if (tr->format == FORMAT_JSON) trace_textval(tr, "text", text);
    if (g->live) fputs("\x1b[K", tr->out);
    // The figures: lines for people, events for scripts.
    char pm[40];
    run_spread(pm, sizeof pm, g, done);
    trace_sayf(tr, "\n\n-- %d tokens in %.3f s%s, %.0f tokens/s, %s, %d thread%s",
               "\n\n—— %d 个 token，用时 %.3f 秒%s，每秒 %.0f 个 token，%s，%d 个线程%.0s", steps, seconds, pm,
               steps / seconds,
               use_cache ? trace_text(tr, "with the KV cache", "使用缓存")
                         : trace_text(tr, "without the KV cache", "不使用缓存"),
               g->threads, g->threads == 1 ? "" : "s");   // zh: %.0s, no plural
    if (variant)
        trace_sayf(tr, "-- keys and values kept as %s%s%s (kvdemo lesson %s explains)",
                   "—— key 和 value 以 %s 保存%s%s（第 %s 课有解释）", kvquant_name(variant->kv_dtype),
                   variant->bug ? trace_text(tr, ", with the bug ", "，带有错误 ") : "",
                   variant->bug ? kvvariant_bug_name(variant->bug) : "", variant->bug ? "11" : "12");
    if (variant && tr->format == FORMAT_JSON) trace_count(tr, "cache_bytes", (int64_t)kv_bytes, NULL, NULL);
    if (tile)
        trace_sayf(tr, "-- flash attention: tiles of %d keys, online softmax; cached steps by flash-decoding",
                   "—— flash attention：每块 %d 个 key，在线 softmax；使用缓存的各步用 flash-decoding",
                   tile);
    if (g->resets)
        trace_sayf(tr,
                   "-- past the context (%d positions) the chapter's generate dropped the cache and fed "
                   "the last %d tokens again at %d steps: %.3f s of the %.3f s.",
                   "—— 超过上下文长度（%d 个位置）后，章节里的 generate 丢掉缓存，把最后 %d 个 token"
                   "重新算了一遍，共 %d 步，用了 %.3f 秒（总共 %.3f 秒）。",
                   m->cfg.T, m->cfg.T, g->resets, g->reset_seconds, seconds);
    show_steps(tr, g, done, machine);
    if (tr->format == FORMAT_JSON) trace_timing(tr, tr->run, seconds, 1);
    trace_value(tr, "tokens_per_s", steps / seconds, "tokens/s", NULL, NULL);
    if (use_cache) {
        trace_count(tr, "reset_steps", g->resets, NULL, NULL);
        trace_value(tr, "reset_seconds", g->reset_seconds, "s", NULL, NULL);
    }
}

// generate --then TEXT: the conversation's second turn. tokens (len: the
// first turn's prompt and text) gets TEXT and steps more; the sampler starts
// again from --seed, as a fresh run would. With the cache, the cache the
// first turn built is valid for exactly that prefix, so the turn's prefill
// feeds only what it lacks (the first turn's last drawn token and TEXT);
// without it, the whole prefix is fed again. Either way the text is that of
// `generate --prompt PREFIX`, PREFIX the first turn's text and TEXT.
static int then_turn(const Options *opt, Trace *tr, Stream *g, const GptModel *m, GptState *s, int **tokens,
                     int len, int steps, float temperature) {
    char err[512];
    size_t n_text = strlen(opt->then_text);   // at most one token a byte
    int *t = realloc(*tokens, sizeof(int) * ((size_t)len + n_text + (size_t)steps));
    if (!t) return -fileio_error(tr->lang, "out of memory", "内存不足");
    *tokens = t;
    int n_then = gpt_encode(t + len, m, opt->then_text, (int)n_text, ERR(tr->lang, err));
    if (n_then <= 0) {
        fileio_error(tr->lang, "--then: %s", "--then：%s",
                     n_then < 0 ? err : fileio_text(tr->lang, "an empty text", "文字为空"));
        return 2;
    }
    Sampler sampler;
    if (sampler_init(&sampler, m->cfg.V, temperature, opt->top_k, (uint32_t)opt->seed))
        return -fileio_error(tr->lang, "out of memory", "内存不足");
    int held = g->use_cache ? s->len : 0;   // positions the cache holds
    *g = (Stream){.m = m, .out = g->out, .use_cache = g->use_cache, .width = g->width, .stream = g->stream,
                  .lang = g->lang, .live = g->live, .step_seconds = g->step_seconds, .cached = g->cached, .nonfinite_step = -1,
                  .run = g->use_cache ? "then-cache" : "then-no-cache"};
    trace_sayf(tr, "\n-- the second turn (--then): %d tokens so far; the cache holds %d of them",
               "\n—— 第二轮（--then）：已有 %d 个 token；缓存里存着其中 %d 个", len + n_then, held);
    if (g->stream) {
        utf8_put_shown(g->out, opt->then_text, strlen(opt->then_text));
        fflush(g->out);
    }
    int end = g->use_cache ? gpt_generate_more(t, s, m, &sampler, len + n_then, steps, stream_step, g)
                           : gpt_generate(t, s, m, &sampler, len + n_then, steps, 0, stream_step, g);
    sampler_free(&sampler);
    if (g->nonfinite_step >= 0) return say_nonfinite(opt->lang, g->nonfinite_step);
    size_t need = gpt_decode(NULL, 0, m, t, end);
    char *text = malloc(need + 1);
    if (!text) return -fileio_error(tr->lang, "out of memory", "内存不足");
    gpt_decode(text, need + 1, m, t, end);
    say_figures(tr, g, m, text, steps, end - len - n_then, g->seconds, NULL, 0, 0, measure_machine());
    free(text);
    trace_sayf(tr, "-- its prefill fed %d token%s at offset %d%s",
               "—— 这一轮的预填输入了 %d 个 token%s（偏移 %d）%s", g->first_n,
               g->first_n == 1 || tr->lang == LANG_ZH ? "" : "s",
               held, g->use_cache ? trace_text(tr, ": only what the cache did not hold", "：只是缓存里还没有的")
                                  : trace_text(tr, ": the whole prefix again, without the cache", "：不使用缓存，整个前缀重算"));
    trace_count(tr, "prefill_tokens", g->first_n, NULL, NULL);
    trace_count(tr, "cache_held", held, NULL, NULL);
    return 0;
}

// A plain generate of the char GPT: its variant and model, then what
// plain_generate_setup makes and plain_generate_free frees.
typedef struct {
    GptVariant variant;   // --bug, --kv-dtype (lessons 11 and 12)
    int use_variant;
    GptModel m;
    GptState s;
    Sampler sampler;
    KvVariantCaches vc;
    int *tokens, n_prompt;   // (n_prompt + steps) the prompt, then the text
    int steps, use_cache;
    float temperature;
    const char *prompt;
    double *step_seconds;    // (steps)
    unsigned char *cached;   // (steps)
    MeasureMachine machine;
} PlainGenerate;

// For a plain generate of the model r->m: the prompt's tokens, the state,
// the sampler, the threads and the attention. Returns 0 or the exit status
// (an error said); what it holds then is for plain_generate_free either way.
static int plain_generate_setup(PlainGenerate *r, const Options *opt) {
    int rc;
    r->steps = opt->steps > 0 ? opt->steps : DEFAULT_STEPS;
    r->use_cache = opt->runs != RUN_NOCACHE;
    r->temperature = opt->temperature >= 0 ? (float)opt->temperature : 1.0f;
    r->prompt = gptsetup_prompt_text(opt);
    rc = gptsetup_prompt(opt->lang, &r->tokens, &r->n_prompt, &r->m, r->prompt, r->steps);
    r->step_seconds = malloc(sizeof(double) * (size_t)r->steps);
    r->cached = malloc((size_t)r->steps);
    r->machine = measure_machine();
    if (!rc && (!r->step_seconds || !r->cached || gpt_state_init(&r->s, r->m.cfg) ||
                sampler_init(&r->sampler, r->m.cfg.V, r->temperature, opt->top_k, (uint32_t)opt->seed))) {
        fileio_error(opt->lang, "out of memory", "内存不足");
        rc = 1;
    }
    if (!rc) rc = start_threads(opt, &r->s);
    if (!rc) rc = gptsetup_attention(opt, &r->s);
    // The weights in panel order (the same numbers; unpacked if no memory)
    // serve a run without the cache, whose every step is a pass of many
    // rows. A cached run goes without them: with the weights in huge pages
    // its steps take as long either way (0.81 and 0.83 ms a step over 128
    // steps, 1.26 and 1.25 over 256, past the context included), and
    // packing costs about 6 ms and 43 MB.
    if (!rc && !r->use_cache) gpt_pack(&r->m);
    if (!rc && r->use_variant && kvvariant_attach(&r->vc, &r->s, &r->variant)) {
        fileio_error(opt->lang, "out of memory", "内存不足");
        rc = 1;
    }
    return rc;
}

// The text after the prompt, streamed as it is drawn, then its figures;
// then --then's second turn. Returns 0 or the exit status (an error said).
static int plain_generate_run(PlainGenerate *r, const Options *opt, Trace *tr) {
    int rc = 0;
    Stream g = {.m = &r->m, .out = tr->out, .use_cache = r->use_cache, .width = screen_default_width(0),
                .stream = tr->format == FORMAT_TEXT, .lang = tr->lang, .step_seconds = r->step_seconds, .cached = r->cached,
                .nonfinite_step = -1, .threads = pool_threads(r->s.pool)};
    g.live = g.stream && isatty(fileno(tr->out));
    if (g.stream) {
        utf8_put_shown(tr->out, r->prompt, strlen(r->prompt));
        const char *nl = strrchr(r->prompt, '\n');
        g.column = (int)strlen(nl ? nl + 1 : r->prompt);
        fflush(tr->out);
    }
    // np.random.seed(seed); trainer.generate(dataset, prompt, steps, use_cache)
    int len = gpt_generate(r->tokens, &r->s, &r->m, &r->sampler, r->n_prompt, r->steps, r->use_cache,
                           stream_step, &g);
    double seconds = g.seconds;
    if (g.nonfinite_step >= 0) {
        if (g.stream) fputs("\n", tr->out);
        rc = say_nonfinite(opt->lang, g.nonfinite_step);
    }
    size_t need = gpt_decode(NULL, 0, &r->m, r->tokens, len);
    char *text = NULL;
    if (!rc && !(text = malloc(need + 1))) {
        fileio_error(tr->lang, "out of memory", "内存不足");
        rc = 1;
    }
    if (!rc) {
        gpt_decode(text, need + 1, &r->m, r->tokens, len);
        say_figures(tr, &g, &r->m, text, r->steps, len - r->n_prompt, seconds, r->use_variant ? &r->variant : NULL,
                    kvcache_bytes(r->s.kv), r->s.cache.tile, r->machine);
    }
    free(text);
    if (!rc && opt->then_text)
        rc = then_turn(opt, tr, &g, &r->m, &r->s, &r->tokens, len, r->steps, r->temperature);
    return rc;
}

static void plain_generate_free(PlainGenerate *r) {
    free(r->tokens);
    free(r->step_seconds);
    free(r->cached);
    sampler_free(&r->sampler);
    kvvariant_detach(&r->vc);
    pool_free(r->s.pool);
    gpt_state_free(&r->s);
    gpt_free(&r->m);
}

int gptcmd_generate(const Options *opt, Trace *tr) {
    if (opt->then_text && (llamacmd_is_llama_file(opt->model_path) || opt->given[OPT_DRAFT] || opt->paged ||
                           opt->samples || opt->bug || opt->kv_dtype || opt->attention)) {
        fileio_error(tr->lang, "--then is the char GPT's plain generate (no --draft, --paged, --samples, --bug, --kv-dtype, --attention)",
                     "--then 只用于字符级 GPT 的普通 generate（不能与 --draft、--paged、--samples、--bug、--kv-dtype、--attention 同用）");
        return 2;
    }
    if (llamacmd_is_llama_file(opt->model_path)) return llamacmd_generate(opt, tr);
    if (opt->rolling) {   // lesson 14: the char GPT's positions are learned, 0 .. T-1
        fileio_error(tr->lang, "--window needs a LLaMA-style model (rotary positions): --model data/tinyshakespeare-llama-mha.bin",
                     "--window 需要 LLaMA 式模型（旋转位置编码）：--model data/tinyshakespeare-llama-mha.bin");
        return 2;
    }
    if (opt->given[OPT_DRAFT] || opt->given[OPT_GAMMA]) return speccmd_generate(opt, tr);
    if (opt->paged || opt->block_size || opt->num_blocks || opt->samples) return pagedcmd_generate(opt, tr);
    PlainGenerate r = {0};
    int rc = kvcmd_variant(&r.variant, &r.use_variant, opt);
    if (rc) return rc;
    rc = gptsetup_model(&r.m, opt, 0, NULL);
    if (rc) return rc;
    rc = plain_generate_setup(&r, opt);
    if (!rc) rc = plain_generate_run(&r, opt, tr);
    plain_generate_free(&r);
    return rc;
}

// ----------------------------------------------------------------------------
// kvdemo init

int gptcmd_init(const Options *opt, Trace *tr) {
    if (!opt->out_path) {
        fileio_error(tr->lang, "init needs --out FILE (and --preset seed|tiny, --seed N)",
                     "`kvdemo init` 需要 --out FILE（以及 --preset seed|tiny、--seed N）");
        return 2;
    }
    Options o = *opt;
    o.init = "random";
    GptModel m;
    int rc = gptsetup_model(&m, &o, 0, NULL);
    if (rc) return rc;
    char err[512];
    if (gpt_save(&m, opt->out_path, ERR(tr->lang, err))) {
        fileio_error(tr->lang, "%s", "%s", err);
        rc = 1;
    } else {
        trace_sayf(tr, "wrote %s: a random model, preset %s, seed %llu, %zu parameters",
                   "已写入 %s：随机模型，预设 %s，种子 %llu，%zu 个参数", opt->out_path,
                   opt->preset ? opt->preset : "seed", (unsigned long long)opt->seed, m.num_params);
    }
    gpt_free(&m);
    return rc;
}

int gptcmd_race(const Options *opt, Trace *tr) {
    if (llamacmd_is_llama_file(opt->model_path)) return llamarace_run(opt, tr);
    GptModel m;
    int rc = gptsetup_model(&m, opt, 0, NULL);
    if (rc) return rc;
    rc = race_model(&m, opt, tr);
    gpt_free(&m);
    return rc;
}
