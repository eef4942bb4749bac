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

// ----------------------------------------------------------------------------
// Choosing the model and the prompt

int gptcmd_model(GptModel *m, const Options *opt, int fallback, int *random_note) {
    char err[512], buf[4096];
    if (random_note) *random_note = 0;
    if (opt->model_path && opt->init) {
        fprintf(stderr, "kvdemo: --model and --init exclude each other; give one\n");
        return 2;
    }
    if (opt->preset && !opt->init) {
        fprintf(stderr, "kvdemo: --preset goes with --init random (a model file has its own shape)\n");
        return 2;
    }
    const char *path = opt->model_path;
    if (!path && !opt->init) {
        path = paths_shipped(GPT_SHIPPED_MODEL, buf, sizeof buf);
        if (access(path, R_OK) != 0) {
            if (!fallback) {
                fprintf(stderr, "kvdemo: no model: %s is missing; give --model FILE or --init random\n", GPT_SHIPPED_MODEL);
                return 1;
            }
            path = NULL;
            if (random_note) *random_note = 1;
        }
    }
    if (path) {
        if (gpt_load(m, path, err, sizeof err)) {
            fprintf(stderr, "kvdemo: %s\n", err);
            return 1;
        }
        return 0;
    }
    GptConfig cfg;
    const char *preset = opt->preset ? opt->preset : "seed";
    if (gpt_preset(&cfg, preset)) {
        fprintf(stderr, "kvdemo: unknown preset '%s'; valid: seed, tiny\n", preset);
        return 2;
    }
    uint32_t vocab[256];
    int V = 0;
    for (const unsigned char *c = (const unsigned char *)GPT_SHAKESPEARE_VOCAB; *c; c++) vocab[V++] = *c;
    if (gpt_init_random(m, cfg, vocab, (uint32_t)opt->seed, err, sizeof err)) {
        fprintf(stderr, "kvdemo: %s\n", err);
        return 1;
    }
    return 0;
}

int gptcmd_prompt(int **tokens, int *n, const GptModel *m, const char *prompt, int steps) {
    char err[256];
    int max = (int)strlen(prompt);
    if (max == 0) {
        fprintf(stderr, "kvdemo: the prompt is empty; give at least one character, e.g. --prompt \"ROMEO:\"\n");
        return 2;
    }
    *tokens = malloc(sizeof(int) * (size_t)(max + steps));
    if (!*tokens) {
        fprintf(stderr, "kvdemo: out of memory\n");
        return 1;
    }
    *n = gpt_encode(*tokens, m, prompt, max, err, sizeof err);
    if (*n < 0) {
        fprintf(stderr, "kvdemo: --prompt: %s\n", err);
        free(*tokens);
        *tokens = NULL;
        return 2;
    }
    return 0;
}

int gptcmd_attention(const Options *opt, const GptModel *m) {
    int flash = opt->attention && !strcmp(opt->attention, "flash");
    if (opt->tile && !flash) {
        fprintf(stderr, "kvdemo: --tile goes with --attention flash (plain attention has no tiles)\n");
        return 2;
    }
    if (!flash) return flash_gpt_use(FLASH_PLAIN, 0, 0, 0, 0);
    GptConfig g = m->cfg;
    if (flash_gpt_use(FLASH_TILED, opt->tile ? opt->tile : FLASH_DEFAULT_TILE, g.T, g.H, g.C / g.H)) {
        fprintf(stderr, "kvdemo: out of memory\n");
        return 1;
    }
    return 0;
}

void gptcmd_attention_end(void) { flash_gpt_use(FLASH_PLAIN, 0, 0, 0, 0); }

// Threads for the arithmetic: --threads N, or every core.
static int start_threads(const Options *opt) {
    if (ops_set_threads(opt->threads) != 0) {
        fprintf(stderr, "kvdemo: could not start %d threads\n", opt->threads);
        return 1;
    }
    return 0;
}

char *gptcmd_generate_text(int *tokens, GptState *s, const GptModel *m, const int *prompt, int n_prompt,
                           int steps, int use_cache, const Options *opt, GptStepFn on_step, void *ctx) {
    Sampler sampler;
    float temperature = opt->temperature >= 0 ? (float)opt->temperature : 1.0f;
    if (sampler_init(&sampler, m->cfg.V, temperature, opt->top_k, (uint32_t)opt->seed)) return NULL;
    memcpy(tokens, prompt, sizeof(int) * (size_t)n_prompt);
    // np.random.seed(seed); trainer.generate(dataset, prompt, steps, use_cache)
    int len = gpt_generate(tokens, s, m, &sampler, n_prompt, steps, use_cache, on_step, ctx);
    sampler_free(&sampler);
    size_t need = gpt_decode(NULL, 0, m, tokens, len);
    char *text = malloc(need + 1);
    if (text) gpt_decode(text, need + 1, m, tokens, len);
    return text;
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
    rc = gptcmd_model(&m, opt, 0, NULL);
    if (rc) return rc;
    int steps = opt->steps > 0 ? opt->steps : DEFAULT_STEPS;
    int use_cache = opt->runs != RUN_NOCACHE;
    float temperature = opt->temperature >= 0 ? (float)opt->temperature : 1.0f;
    int *tokens = NULL, n_prompt = 0;
    GptState s = {0};
    Sampler sampler = {0};
    char *text = NULL;
    const char *prompt = opt->n_prompts ? opt->prompts[0] : DEFAULT_PROMPT;
    rc = gptcmd_prompt(&tokens, &n_prompt, &m, prompt, steps);
    if (!rc && (gpt_state_init(&s, m.cfg) || sampler_init(&sampler, m.cfg.V, temperature, opt->top_k, (uint32_t)opt->seed))) {
        fprintf(stderr, "kvdemo: out of memory\n");
        rc = 1;
    }
    if (!rc) rc = start_threads(opt);
    if (!rc) rc = gptcmd_attention(opt, &m);
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
            tr->run = use_cache ? "cache" : "no-cache";
            if (tr->format == FORMAT_JSON) {
                trace_textval(tr, "text", text);
                trace_timing(tr, tr->run, seconds, 1);
                trace_value(tr, "tokens_per_s", steps / seconds, "tokens/s", NULL, NULL);
                if (use_cache) {
                    trace_count(tr, "reset_steps", g.resets, NULL, NULL);
                    trace_value(tr, "reset_seconds", g.reset_seconds, "s", NULL, NULL);
                }
            } else {
                if (g.live) fputs("\x1b[K", tr->out);
                if (tr->lang == LANG_ZH)
                    fprintf(tr->out, "\n\n—— %d 个 token，用时 %.3f 秒，每秒 %.0f 个 token，%s，%d 个线程\n", steps,
                            seconds, steps / seconds, use_cache ? "使用 KV Cache" : "不使用 KV Cache", ops_threads());
                else
                    fprintf(tr->out, "\n\n-- %d tokens in %.3f s, %.0f tokens/s, %s, %d thread%s\n", steps,
                            seconds, steps / seconds, use_cache ? "with the KV cache" : "without the KV cache",
                            ops_threads(), ops_threads() == 1 ? "" : "s");
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
            }
        }
    }
    free(text);
    free(tokens);
    sampler_free(&sampler);
    gpt_state_free(&s);
    gpt_free(&m);
    gptcmd_attention_end();
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
    int rc = gptcmd_model(&m, &o, 0, NULL);
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

// A bar of width proportional to value / max, in at most width cells.
static void bar(FILE *f, char c, double value, double max, int width) {
    int n = max > 0 ? (int)lround(value / max * width) : 0;
    if (value > 0 && n == 0) n = 1;
    for (int i = 0; i < n; i++) fputc(c, f);
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
    int rc = gptcmd_model(&m, opt, 1, &random_model);
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
    rc = gptcmd_prompt(&tokens, &n_prompt, &m, opt->n_prompts ? opt->prompts[0] : DEFAULT_PROMPT, max_len);
    if (!rc && (!samples || !table || gpt_state_init(&s, m.cfg))) {
        fprintf(stderr, "kvdemo: out of memory\n");
        rc = 1;
    }
    if (!rc) rc = start_threads(opt);
    if (!rc) rc = gptcmd_attention(opt, &m);
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
    char terr[256];
    if (train_benchmark(m.cfg, TRAIN_BATCH, TRAIN_STEPS, opt->threads, &train_tps, terr, sizeof terr)) {
        fprintf(stderr, "kvdemo: %s\n", terr);
        rc = 1;
        goto done;
    }
    if (isatty(STDERR_FILENO)) progress("%s", "");

    GptConfig g = m.cfg;
    if (tr->format == FORMAT_TEXT) {
        printf("kvdemo bench: T=%d C=%d H=%d L=%d V=%d (%zu parameters), %d threads, median of %d runs\n\n", g.T,
               g.C, g.H, g.L, g.V, m.num_params, ops_threads(), repeat);
        if (use_variant)
            printf("keys and values kept as %s: the arithmetic of such a cache, in kvdemo's float layout\n\n",
                   kvquant_name(variant.kv_dtype));
        if (flash_gpt_tiled())
            printf("attention: flash, tiles of %d keys (cached steps by flash-decoding)\n\n", flash_gpt_tile());
        printf("%d tokens after \"%s\":\n", DEFAULT_STEPS, opt->n_prompts ? opt->prompts[0] : DEFAULT_PROMPT);
        for (int c = 0; c < 2; c++) {
            const Measure *h = &head[c];
            printf("  %-17s %8.3f s  %8.0f tokens/s  matmuls %6.1f GFLOP/s  reads %6.2f GB/s\n",
                   c ? "with the cache" : "without the cache", h->seconds, DEFAULT_STEPS / h->seconds,
                   h->matmul_flops / h->seconds * 1e-9, h->bytes_read / h->seconds * 1e-9);
        }
        printf("  the cache is %.1fx faster (the chapter's numpy: 4.93 s and 0.53 s, 9.3x)\n\n",
               head[0].seconds / head[1].seconds);
        printf("training, batch %d x %d: %.0f tokens/s (about %.0f GFLOP/s counting 6 x parameters per token)\n\n",
               TRAIN_BATCH, g.T, train_tps, 6.0 * (double)m.num_params * train_tps * 1e-9);
        printf("%8s %12s %12s %9s   time (# without the cache, = with it)\n", "tokens", "no cache s", "cache s",
               "speedup");
        double tmax = 0;
        for (int i = 0; i < n_lengths; i++) tmax = fmax(tmax, fmax(table[i][0].seconds, table[i][1].seconds));
        for (int i = 0; i < n_lengths; i++) {
            printf("%8d %12.4f %12.4f %8.1fx   ", lengths[i], table[i][0].seconds, table[i][1].seconds,
                   table[i][0].seconds / table[i][1].seconds);
            bar(stdout, '#', table[i][0].seconds, tmax, 30);
            printf("\n%47s", "");
            bar(stdout, '=', table[i][1].seconds, tmax, 30);
            printf("\n");
        }
        // len(tokens) at step k is the prompt plus k - 1: past the context
        // from step T - n_prompt + 2 on.
        printf("\nOnce the prompt and the generated tokens together pass %d (with this %d-token prompt,\n"
               "from step %d on) the chapter's generate drops the cache and recomputes the last %d tokens\n"
               "in full at every step, so from there both ways cost the same per token.\n",
               g.T, n_prompt, g.T - n_prompt + 2, g.T);
    } else {
        trace_value(tr, "train_tokens_per_s", train_tps, "tokens/s", NULL, NULL);
        for (int c = 0; c < 2; c++) {
            tr->run = c ? "cache" : "no-cache";
            trace_timing(tr, "tokens_256", head[c].seconds, repeat);
            trace_value(tr, "matmul_gflops", head[c].matmul_flops / head[c].seconds * 1e-9, "GFLOP/s", NULL, NULL);
            trace_value(tr, "read_gbps", head[c].bytes_read / head[c].seconds * 1e-9, "GB/s", NULL, NULL);
            for (int i = 0; i < n_lengths; i++) {
                char name[32];
                snprintf(name, sizeof name, "tokens_%d", lengths[i]);
                trace_timing(tr, name, table[i][c].seconds, repeat);
            }
        }
    }
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
    gptcmd_attention_end();
    ops_set_threads(1);
    return rc;
}

