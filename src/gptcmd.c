// gptcmd — the char GPT's commands: generate, init and bench.
//
//   kvdemo generate   the chapter's generate: text after a prompt, with or
//                     without the cache, and its speed
//   kvdemo init       write a random model file (until a trained one ships,
//                     and for tests)
//   kvdemo bench      the chapter's exercise: cache against no cache over
//                     growing lengths, measured side by side in one run
#include "gptcmd.h"

#include "fileio.h"
#include "kvcmd.h"
#include "flash.h"
#include "gptsetup.h"
#include "ops.h"
#include "pagedcmd.h"
#include "paths.h"
#include "sampler.h"
#include "timer.h"
#include "train.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { DEFAULT_STEPS = 256 };
static const char *const DEFAULT_PROMPT = "ROMEO:";

// Threads for the arithmetic: --threads N, or every core.
static int start_threads(const Options *opt) {
    if (ops_set_threads(opt->threads) != 0) {
        fprintf(stderr, "kvdemo: could not start %d threads\n", opt->threads);
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
// draw), never the printing.
typedef struct {
    const GptModel *m;
    FILE *out;
    int stream;            // text: write each character as it comes
    int live;              // stdout is a terminal: the counter too
    int width, column;     // the terminal's columns, and where the text is
    int use_cache;
    double seconds;        // sum of the steps' times
    int resets;            // cached run: steps past the context that fed the whole window again
    double reset_seconds;
} Stream;

static int stream_step(void *ctx, const GptStep *st) {
    Stream *g = ctx;
    g->seconds += st->seconds;
    if (g->use_cache && st->step > 0 && !st->cached) {
        g->resets++;
        g->reset_seconds += st->seconds;
    }
    if (!g->stream) return 0;
    char piece[8];
    gpt_decode(piece, sizeof piece, g->m, &st->token, 1);
    if (g->live) fputs("\x1b[K", g->out);   // the counter behind the text goes
    fputs(piece, g->out);
    g->column = piece[0] == '\n' ? 0 : g->column + 1;
    char counter[48];
    int n = snprintf(counter, sizeof counter, "  %.0f tokens/s", (st->step + 1) / g->seconds);
    // ESC 7 / ESC 8 keep the cursor where the next character goes; the counter
    // is left out where it would wrap the line.
    if (g->live && g->column + n < g->width) fprintf(g->out, "\x1b" "7\x1b[2m%s\x1b[0m\x1b" "8", counter);
    fflush(g->out);
    return 0;
}

static int columns(void) {
    const char *c = getenv("COLUMNS");
    int n = c ? atoi(c) : 0;
    return n > 0 ? n : 80;
}

int gptcmd_generate(const Options *opt, Trace *tr) {
    if (opt->paged || opt->block_size || opt->num_blocks || opt->samples) return pagedcmd_generate(opt, tr);
    GptVariant variant;   // --bug, --kv-dtype (lessons 11 and 12)
    int use_variant;
    int rc = kvcmd_variant(&variant, &use_variant, opt);
    if (rc) return rc;
    GptModel m;
    rc = gptsetup_model(&m, opt, 0, NULL);
    if (rc) return rc;
    int steps = opt->steps > 0 ? opt->steps : DEFAULT_STEPS;
    int use_cache = opt->runs != RUN_NOCACHE;
    float temperature = opt->temperature >= 0 ? (float)opt->temperature : 1.0f;
    int *tokens = NULL, n_prompt = 0;
    GptState s = {0};
    Sampler sampler = {0};
    char *text = NULL;
    const char *prompt = opt->n_prompts ? opt->prompts[0] : DEFAULT_PROMPT;
    rc = gptsetup_prompt(&tokens, &n_prompt, &m, prompt, steps);
    if (!rc && (gpt_state_init(&s, m.cfg) || sampler_init(&sampler, m.cfg.V, temperature, opt->top_k, (uint32_t)opt->seed))) {
        fprintf(stderr, "kvdemo: out of memory\n");
        rc = 1;
    }
    if (!rc) rc = start_threads(opt);
    if (!rc) rc = gptsetup_attention(opt, &m);
    if (!rc && use_variant) s.variant = &variant;
    if (!rc) {
        Stream g = {.m = &m, .out = tr->out, .use_cache = use_cache, .width = columns(),
                    .stream = tr->format == FORMAT_TEXT};
        g.live = g.stream && isatty(fileno(tr->out));
        if (g.stream) {
            fputs(prompt, tr->out);
            const char *nl = strrchr(prompt, '\n');
            g.column = (int)strlen(nl ? nl + 1 : prompt);
            fflush(tr->out);
        }
        // np.random.seed(seed); trainer.generate(dataset, prompt, steps, use_cache)
        int len = gpt_generate(tokens, &s, &m, &sampler, n_prompt, steps, use_cache, stream_step, &g);
        double seconds = g.seconds;
        size_t need = gpt_decode(NULL, 0, &m, tokens, len);
        text = malloc(need + 1);
        if (!text) {
            fprintf(stderr, "kvdemo: out of memory\n");
            rc = 1;
        } else {
            gpt_decode(text, need + 1, &m, tokens, len);
            trace_run(tr, use_cache ? "cache" : "no-cache");
            // The text went out token by token above; JSON gets it whole.
            if (tr->format == FORMAT_JSON) trace_textval(tr, "text", text);
            if (g.live) fputs("\x1b[K", tr->out);
            // The figures: lines for people, events for scripts.
            trace_sayf(tr, "\n\n-- %d tokens in %.3f s, %.0f tokens/s, %s, %d thread%s",
                       "\n\n—— %d 个 token，用时 %.3f 秒，每秒 %.0f 个 token，%s，%d 个线程%s", steps, seconds,
                       steps / seconds,
                       use_cache ? trace_text(tr, "with the KV cache", "使用 KV Cache")
                                 : trace_text(tr, "without the KV cache", "不使用 KV Cache"),
                       ops_threads(), ops_threads() == 1 || tr->lang == LANG_ZH ? "" : "s");
            if (use_variant)
                trace_sayf(tr, "-- keys and values kept as %s%s%s (kvdemo lesson %s explains)",
                           "—— key 和 value 以 %s 保存%s%s（第 %s 课有解释）", kvquant_name(variant.kv_dtype),
                           variant.bug ? trace_text(tr, ", with the bug ", "，带有错误 ") : "",
                           variant.bug ? kvvariant_bug_name(variant.bug) : "", variant.bug ? "11" : "12");
            if (flash_gpt_tiled())
                trace_sayf(tr, "-- flash attention: tiles of %d keys, online softmax; cached steps by flash-decoding",
                           "—— flash attention：每块 %d 个 key，在线 softmax；使用缓存的各步用 flash-decoding",
                           flash_gpt_tile());
            if (g.resets)
                trace_sayf(tr,
                           "-- past the context (%d positions) the chapter's generate dropped the cache and fed "
                           "the last %d tokens again at %d steps: %.3f s of the %.3f s.",
                           "—— 超过上下文长度（%d 个位置）后，章节里的 generate 丢掉缓存，把最后 %d 个 token "
                           "重新算了一遍，共 %d 步，用了 %.3f 秒（总共 %.3f 秒）。",
                           m.cfg.T, m.cfg.T, g.resets, g.reset_seconds, seconds);
            if (tr->format == FORMAT_JSON) trace_timing(tr, tr->run, seconds, 1);
            trace_value(tr, "tokens_per_s", steps / seconds, "tokens/s", NULL, NULL);
            if (use_cache) {
                trace_count(tr, "reset_steps", g.resets, NULL, NULL);
                trace_value(tr, "reset_seconds", g.reset_seconds, "s", NULL, NULL);
            }
        }
    }
    free(text);
    free(tokens);
    sampler_free(&sampler);
    gpt_state_free(&s);
    gpt_free(&m);
    gptsetup_attention_end();
    ops_set_threads(1);
    return rc;
}

// ----------------------------------------------------------------------------
// kvdemo init

int gptcmd_init(const Options *opt) {
    if (!opt->out_path) {
        fprintf(stderr, "kvdemo: init needs --out FILE (and --preset seed|tiny, --seed N)\n");
        return 2;
    }
    Options o = *opt;
    o.init = "random";
    GptModel m;
    int rc = gptsetup_model(&m, &o, 0, NULL);
    if (rc) return rc;
    char err[512];
    if (gpt_save(&m, opt->out_path, err, sizeof err)) {
        fprintf(stderr, "kvdemo: %s\n", err);
        rc = 1;
    } else {
        printf("wrote %s: a random model, preset %s, seed %llu, %zu parameters\n", opt->out_path,
               opt->preset ? opt->preset : "seed", (unsigned long long)opt->seed, m.num_params);
    }
    gpt_free(&m);
    return rc;
}

// ----------------------------------------------------------------------------
// kvdemo bench

// One measured generation: time, and what it computed and read.
typedef struct {
    double seconds;          // median over the repeats
    double matmul_flops;     // of the whole generation
    double bytes_read;       // weights and cache
} Measure;

typedef struct {
    GptConfig cfg;
    double flops, bytes;
} CostCtx;

static int add_cost(void *ctx, const GptStep *st) {
    CostCtx *c = ctx;
    GptCost k = gpt_cost(c->cfg, st->n, st->offset);
    c->flops += k.matmul_flops;
    c->bytes += k.weight_bytes + k.cache_bytes;
    return 0;
}

static Measure measure(GptState *s, const GptModel *m, int *tokens, int n_prompt, int steps, int use_cache,
                       const Options *opt, int repeat, double *samples) {
    Measure r = {0};
    float temperature = opt->temperature >= 0 ? (float)opt->temperature : 1.0f;
    CostCtx c = {.cfg = m->cfg};
    for (int i = 0; i < repeat; i++) {
        Sampler sampler;
        if (sampler_init(&sampler, m->cfg.V, temperature, opt->top_k, (uint32_t)opt->seed)) return r;
        // The costs are counted as the steps go (a few additions a step);
        // every repeat does the same steps, so the last count stands.
        c.flops = c.bytes = 0;
        double t0 = timer_now();
        gpt_generate(tokens, s, m, &sampler, n_prompt, steps, use_cache, add_cost, &c);
        samples[i] = timer_now() - t0;
        sampler_free(&sampler);
    }
    r.seconds = timer_median(samples, repeat);
    r.matmul_flops = c.flops;
    r.bytes_read = c.bytes;
    return r;
}

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int tty = isatty(STDERR_FILENO);
    fputs(tty ? "\r\x1b[K" : "", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(tty ? "" : "\n", stderr);
    fflush(stderr);
    va_end(ap);
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

// A bar of c, of length proportional to value / max, at most width long.
static void bar(char *out, size_t size, char c, double value, double max, int width) {
    int n = max > 0 ? (int)lround(value / max * width) : 0;
    if (value > 0 && n == 0) n = 1;
    if (n > (int)size - 1) n = (int)size - 1;
    memset(out, c, (size_t)n);
    out[n] = '\0';
}

int gptcmd_bench(const Options *opt, Trace *tr) {
    int lengths[64];
    int n_lengths = parse_lengths(lengths, 64, opt->steps_list ? opt->steps_list : "16,64,256,512,1024");
    if (n_lengths <= 0) {
        fprintf(stderr, "kvdemo: --steps takes a comma-separated list of lengths from 1 to 100000, e.g. 16,64,256, not '%s'\n",
                opt->steps_list);
        return 2;
    }
    // The CSV is written through its temporary file (fileio.h), opened now so
    // that a path that cannot be written is found before the measurements,
    // and a failed or interrupted run leaves no half-written table behind.
    AtomicFile csv_file = {0};
    FILE *csv = NULL;
    char err[512];
    if (opt->csv_path) {
        if (fileio_open(&csv_file, opt->csv_path, err, sizeof err) != 0) {
            fprintf(stderr, "kvdemo: --csv %s\n", err);
            return 1;
        }
        csv = csv_file.f;
    }
    GptModel m;
    int random_model = 0;
    int rc = gptsetup_model(&m, opt, 1, &random_model);
    if (rc) {
        if (csv) fileio_abort(&csv_file);
        return rc;
    }
    if (random_model)
        fprintf(stderr, "kvdemo: %s is missing; timing a random model of the seed preset (the speed is the same)\n",
                GPT_SHIPPED_MODEL);
    int max_len = 256;
    for (int i = 0; i < n_lengths; i++)
        if (lengths[i] > max_len) max_len = lengths[i];
    int repeat = opt->repeat ? opt->repeat : 3;
    int *tokens = NULL, n_prompt = 0;
    GptState s = {0};
    double *samples = malloc(sizeof(double) * (size_t)repeat);
    Measure (*table)[2] = calloc((size_t)n_lengths, sizeof *table);
    GptVariant variant;   // --kv-dtype (lesson 12)
    int use_variant;
    if (kvcmd_variant(&variant, &use_variant, opt)) {
        rc = 2;
        goto done;
    }
    rc = gptsetup_prompt(&tokens, &n_prompt, &m, opt->n_prompts ? opt->prompts[0] : DEFAULT_PROMPT, max_len);
    if (!rc && (!samples || !table || gpt_state_init(&s, m.cfg))) {
        fprintf(stderr, "kvdemo: out of memory\n");
        rc = 1;
    }
    if (!rc) rc = start_threads(opt);
    if (!rc) rc = gptsetup_attention(opt, &m);
    if (rc) goto done;
    if (use_variant) s.variant = &variant;

    // The headline: the chapter's run, 256 tokens after the prompt, both ways.
    Measure head[2];
    for (int c = 0; c < 2; c++) {
        progress("bench: %d tokens %s (%d runs)", DEFAULT_STEPS, c ? "with the cache" : "without the cache", repeat);
        head[c] = measure(&s, &m, tokens, n_prompt, DEFAULT_STEPS, c, opt, repeat, samples);
    }
    // The exercise: both ways over growing lengths.
    for (int i = 0; i < n_lengths; i++)
        for (int c = 0; c < 2; c++) {
            progress("bench: %d of %d, %d tokens %s", 2 * i + c + 1, 2 * n_lengths, lengths[i],
                     c ? "with the cache" : "without the cache");
            table[i][c] = measure(&s, &m, tokens, n_prompt, lengths[i], c, opt, repeat, samples);
        }
    // Training speed of the same shape: whole steps (forward, backward,
    // AdamW) on 16 sequences of T tokens, as the shipped model was trained.
    double train_tps = 0;
    enum { TRAIN_BATCH = 16, TRAIN_STEPS = 3 };
    progress("bench: %d training steps of %d x %d tokens", TRAIN_STEPS, TRAIN_BATCH, m.cfg.T);
    if (train_benchmark(m.cfg, TRAIN_BATCH, TRAIN_STEPS, opt->threads, &train_tps)) {
        rc = 1;
        goto done;
    }
    if (isatty(STDERR_FILENO)) progress("%s", "");

    GptConfig g = m.cfg;
    const char *prompt = opt->n_prompts ? opt->prompts[0] : DEFAULT_PROMPT;
    trace_sayf(tr, "kvdemo bench: T=%d C=%d H=%d L=%d V=%d (%zu parameters), %d threads, median of %d runs\n",
               "kvdemo bench：T=%d C=%d H=%d L=%d V=%d（%zu 个参数），%d 个线程，%d 次运行的中位数\n", g.T, g.C,
               g.H, g.L, g.V, m.num_params, ops_threads(), repeat);
    if (use_variant)
        trace_sayf(tr, "keys and values kept as %s: the arithmetic of such a cache, in kvdemo's float layout\n",
                   "key 和 value 以 %s 保存：按这种缓存的算术，用 kvdemo 的浮点布局\n", kvquant_name(variant.kv_dtype));
    if (flash_gpt_tiled())
        trace_sayf(tr, "attention: flash, tiles of %d keys (cached steps by flash-decoding)\n",
                   "注意力：flash，每块 %d 个键（缓存步用 flash-decoding）\n", flash_gpt_tile());
    trace_sayf(tr, "%d tokens after \"%s\":", "%d 个词元，接在 \"%s\" 之后：", DEFAULT_STEPS, prompt);
    // The headline: the chapter's 256 tokens, both ways.
    static const TraceColumn HEAD_COLS[] = {
        {"", "", 17, 0, "run"},
        {"s", "秒", 10, 1, "seconds"},
        {"tokens/s", "词元/秒", 10, 1, "tokens_per_s"},
        {"matmul GFLOP/s", "矩阵乘 GFLOP/s", 15, 1, "matmul_gflops"},
        {"reads GB/s", "读取 GB/s", 11, 1, "read_gbps"},
    };
    static const TraceTable HEAD = {"tokens_256", 5, HEAD_COLS};
    trace_table_head(tr, &HEAD);
    for (int c = 0; c < 2; c++) {
        const Measure *h = &head[c];
        char cells[4][32];
        snprintf(cells[0], sizeof cells[0], "%.3f", h->seconds);
        snprintf(cells[1], sizeof cells[1], "%.0f", DEFAULT_STEPS / h->seconds);
        snprintf(cells[2], sizeof cells[2], "%.1f", h->matmul_flops / h->seconds * 1e-9);
        snprintf(cells[3], sizeof cells[3], "%.2f", h->bytes_read / h->seconds * 1e-9);
        const char *row[] = {c ? trace_text(tr, "with the cache", "有缓存") : trace_text(tr, "without the cache", "无缓存"),
                             cells[0], cells[1], cells[2], cells[3]};
        trace_run(tr, c ? "cache" : "no-cache");
        trace_table_row(tr, &HEAD, row);
        if (tr->format == FORMAT_JSON) trace_timing(tr, "tokens_256", h->seconds, repeat);
        trace_value(tr, "matmul_gflops", h->matmul_flops / h->seconds * 1e-9, "GFLOP/s", NULL, NULL);
        trace_value(tr, "read_gbps", h->bytes_read / h->seconds * 1e-9, "GB/s", NULL, NULL);
    }
    trace_run(tr, NULL);
    trace_sayf(tr, "  the cache is %.1fx faster (the chapter's numpy: 4.93 s and 0.53 s, 9.3x)\n",
               "  有缓存快 %.1f 倍（原文 numpy：4.93 秒与 0.53 秒，9.3 倍）\n", head[0].seconds / head[1].seconds);
    trace_sayf(tr, "training, batch %d x %d: %.0f tokens/s (about %.0f GFLOP/s counting 6 x parameters per token)\n",
               "训练，批 %d x %d：每秒 %.0f 个词元（按每个词元 6 x 参数量计，约 %.0f GFLOP/s）\n", TRAIN_BATCH, g.T,
               train_tps, 6.0 * (double)m.num_params * train_tps * 1e-9);
    trace_value(tr, "train_tokens_per_s", train_tps, "tokens/s", NULL, NULL);
    // The exercise: both ways over growing lengths, with a bar of each time.
    static const TraceColumn LEN_COLS[] = {
        {"tokens", "词元", 8, 1, NULL},
        {"no cache s", "无缓存 秒", 12, 1, "nocache_seconds"},
        {"cache s", "有缓存 秒", 12, 1, "cache_seconds"},
        {"speedup", "加速", 9, 1, NULL},
        {"  time (# without the cache, = with it)", "  耗时（# 无缓存，= 有缓存）", 0, 0, "chart"},
    };
    static const TraceTable LENGTHS = {"lengths", 5, LEN_COLS};
    trace_table_head(tr, &LENGTHS);
    double tmax = 0;
    for (int i = 0; i < n_lengths; i++) tmax = fmax(tmax, fmax(table[i][0].seconds, table[i][1].seconds));
    for (int i = 0; i < n_lengths; i++) {
        char cells[4][32], bars[2][40];
        snprintf(cells[0], sizeof cells[0], "%d", lengths[i]);
        snprintf(cells[1], sizeof cells[1], "%.4f", table[i][0].seconds);
        snprintf(cells[2], sizeof cells[2], "%.4f", table[i][1].seconds);
        snprintf(cells[3], sizeof cells[3], "%.1fx", table[i][0].seconds / table[i][1].seconds);
        bar(bars[0], sizeof bars[0], '#', table[i][0].seconds, tmax, 30);
        bar(bars[1], sizeof bars[1], '=', table[i][1].seconds, tmax, 30);
        char chart[96];
        snprintf(chart, sizeof chart, "  %s", bars[0]);
        const char *row[] = {cells[0], cells[1], cells[2], cells[3], chart};
        trace_table_row(tr, &LENGTHS, row);
        if (tr->format == FORMAT_TEXT) {
            snprintf(chart, sizeof chart, "  %s", bars[1]);
            const char *second[] = {"", "", "", "", chart};
            trace_table_row(tr, &LENGTHS, second);
        }
        for (int c = 0; c < 2; c++) {
            char name[32];
            snprintf(name, sizeof name, "tokens_%d", lengths[i]);
            trace_run(tr, c ? "cache" : "no-cache");
            if (tr->format == FORMAT_JSON) trace_timing(tr, name, table[i][c].seconds, repeat);
        }
        trace_run(tr, NULL);
    }
    trace_sayf(tr,
               "\nOnce the prompt and the generated tokens together pass %d (with this %d-token prompt,\n"
               "from step %d on) the chapter's generate drops the cache and recomputes the last %d tokens\n"
               "in full at every step, so from there both ways cost the same per token.",
               "\n提示词与生成的词元合计超过 %d 个后（这个提示词有 %d 个词元，从第 %d 步起），原文的 generate\n"
               "丢掉缓存，每一步完整重算最后 %d 个词元，所以从那以后两种方式每个词元的代价相同。",
               g.T, n_prompt, g.T - n_prompt + 2, g.T);
    if (csv) {
        fprintf(csv, "tokens,nocache_seconds,cache_seconds,speedup,nocache_tokens_per_s,cache_tokens_per_s\n");
        for (int i = 0; i < n_lengths; i++)
            fprintf(csv, "%d,%.6f,%.6f,%.3f,%.1f,%.1f\n", lengths[i], table[i][0].seconds, table[i][1].seconds,
                    table[i][0].seconds / table[i][1].seconds, lengths[i] / table[i][0].seconds,
                    lengths[i] / table[i][1].seconds);
        csv = NULL;
        if (fileio_commit(&csv_file, err, sizeof err) != 0) {
            fprintf(stderr, "kvdemo: --csv %s\n", err);
            rc = 1;
        }
    }
done:
    if (csv) fileio_abort(&csv_file);
    free(samples);
    free(table);
    free(tokens);
    gpt_state_free(&s);
    gpt_free(&m);
    gptsetup_attention_end();
    ops_set_threads(1);
    return rc;
}

// ----------------------------------------------------------------------------
// kvdemo train and kvdemo eval

// The corpus: --data FILE, else data/tinyshakespeare.txt (from `make data`).
static const char *corpus_path(const Options *opt, char *buf, size_t size) {
    if (opt->data_path) return opt->data_path;
    const char *p = paths_shipped("data/tinyshakespeare.txt", buf, size);
    if (access(p, R_OK) != 0) {
        fprintf(stderr, "kvdemo: no training text: give --data FILE, or run `make data` to download tinyshakespeare\n");
        return NULL;
    }
    return p;
}

int gptcmd_train(const Options *opt) {
    if (!opt->out_path) {
        fprintf(stderr, "kvdemo: train needs --out FILE, the model to write (e.g. --out data/my-gpt.bin)\n");
        return 2;
    }
    TrainConfig cfg;
    const char *preset = opt->preset ? opt->preset : "seed";
    if (train_config_default(&cfg, preset)) {
        fprintf(stderr, "kvdemo: unknown preset '%s'; valid: seed, tiny\n", preset);
        return 2;
    }
    char buf[4096];
    cfg.data_path = corpus_path(opt, buf, sizeof buf);
    if (!cfg.data_path) return 1;
    cfg.out_path = opt->out_path;
    cfg.resume_path = opt->resume_path;
    if (opt->context) cfg.model.T = opt->context;
    if (opt->embedding) cfg.model.C = opt->embedding;
    if (opt->heads) cfg.model.H = opt->heads;
    if (opt->blocks) cfg.model.L = opt->blocks;
    if (cfg.model.C % cfg.model.H != 0) {
        fprintf(stderr, "kvdemo: --embedding %d is not divisible by --heads %d; pick sizes where it is (e.g. 384 and 6)\n",
                cfg.model.C, cfg.model.H);
        return 2;
    }
    if (opt->iters) cfg.iters = opt->iters;
    if (opt->batch) cfg.batch = opt->batch;
    if (opt->lr > 0) cfg.lr = (float)opt->lr;
    if (cfg.min_lr > cfg.lr) cfg.min_lr = cfg.lr;
    if (opt->eval_every) cfg.eval_every = cfg.ckpt_every = opt->eval_every;
    if (opt->given_seed) cfg.seed = opt->seed;
    if (cfg.warmup > cfg.iters) cfg.warmup = cfg.iters / 10;
    cfg.threads = opt->threads;
    // train_run says where the checkpoint is when it stops early.
    return train_run(&cfg, NULL, NULL) == TRAIN_OK ? 0 : 1;
}

int gptcmd_eval(const Options *opt) {
    if (opt->kv_dtype) return kvcmd_eval(opt);   // through the cache (lesson 12)
    GptModel m;
    int rc = gptsetup_model(&m, opt, 0, NULL);
    if (rc) return rc;
    char buf[4096];
    const char *data = corpus_path(opt, buf, sizeof buf);
    double train_loss, val_loss;
    if (!data || train_eval(&m, data, opt->threads, &train_loss, &val_loss)) {
        gpt_free(&m);
        return 1;
    }
    printf("train loss %.4f, validation loss %.4f (nats per character; the first 90%% and the last 10%% of %s)\n",
           train_loss, val_loss, data);
    gpt_free(&m);
    return 0;
}
