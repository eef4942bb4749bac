// llama2ccmd — generate and bench on llama2.c's models (llama2ccmd.h).
//
// The loop is llama2.c's generate, on kvdemo's LLaMA forward pass (llama.h):
// the prompt (BOS first) is read in one call, then each new token is fed at
// its position and the cache grows by one row; without the cache every step
// feeds tokens[0 : pos] again from position 0. The next token is the argmax
// (--temperature 0) or drawn by sample_top_p (top_p 0.9, llama2.c's default)
// from softmax(logits / temperature). As in llama2.c, a BOS (the start of
// the next story) or an EOS ends the text.
//
// Legend as in llama.h: V vocabulary, T max_seq_len, n prompt tokens.
#include "llama2ccmd.h"

#include "bpe.h"
#include "fileio.h"
#include "llama.h"
#include "llama2c.h"
#include "ops.h"
#include "rng.h"
#include "timer.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEFAULT_STEPS = 256, MAX_LENGTHS = 32, DEFAULT_REPEAT = 3 };
static const char DEFAULT_PROMPT[] = "Once upon a time";
static const float TOP_P = 0.9f;

// One run: the model, its state of one row, and what the steps need.
typedef struct {
    LlamaModel m;
    LlamaState st;
    int *tokens;        // (T) the prompt, then what was generated
    float *logits;      // (V)
    float *sorted;      // (V) scratch of sample_top_p
    int *order;         // (V)
    float temperature;  // 0: argmax
    uint64_t rng;       // the draws: rng.h's generator started at --seed
} Run;

// Loads the model pair and makes the run's buffers. Returns 0, or the exit
// status after a message.
static int run_new(Run *r, const Options *opt) {
    memset(r, 0, sizeof *r);
    if (!opt->model_path) {
        fileio_error(opt->lang, "--tokenizer goes with --model FILE, llama2.c's checkpoint (stories15M.bin, ...)",
                     "--tokenizer 要和 --model FILE（llama2.c 的模型文件，如 stories15M.bin）一起用");
        return 2;
    }
    char err[512];
    // llama2.c's pair, or (bench only, no --tokenizer) a KVLM file
    if (llama_load_any(&r->m, opt->model_path, opt->tokenizer_path, ERR(opt->lang, err)) != 0) {
        fileio_error(opt->lang, "%s", "%s", err);
        return 1;
    }
    size_t V = (size_t)r->m.cfg.vocab_size, T = (size_t)r->m.cfg.max_seq_len;
    r->tokens = malloc(sizeof(int) * T);
    r->logits = malloc(sizeof(float) * V);
    r->sorted = malloc(sizeof(float) * V);
    r->order = malloc(sizeof(int) * V);
    if (!r->tokens || !r->logits || !r->sorted || !r->order ||
        llama_state_init(&r->st, &r->m, 1, ERR(opt->lang, err)) != 0) {
        fileio_error(opt->lang, "out of memory", "内存不足");
        return 1;
    }
    r->temperature = opt->temperature >= 0 ? (float)opt->temperature : 1.0f;
    r->rng = opt->seed;
    if (!(r->st.pool = pool_new_for(opt->threads, llama_row_work(&r->m.cfg)))) {   // run_free frees it
        fileio_error(opt->lang, "could not start %d threads", "无法启动 %d 个线程", ops_threads_asked(opt->threads));
        return 1;
    }
    return 0;
}

static void run_free(Run *r) {
    pool_free(r->st.pool);
    llama_state_free(&r->st);
    llama_free(&r->m);
    free(r->tokens);
    free(r->logits);
    free(r->sorted);
    free(r->order);
}

// The token after r->logits: argmax, or a top-p draw at the temperature.
static int run_pick(Run *r) {
    int V = r->m.cfg.vocab_size;
    if (r->temperature <= 0.0f) return ops_argmax(r->logits, V);
    // probs = softmax(logits / temperature); next = sample_top_p(probs, top_p)
    for (int i = 0; i < V; i++) r->logits[i] /= r->temperature;
    ops_softmax_rows(r->logits, r->logits, 1, V, OPS_DIVIDE);
    float u = (float)(rng_next(&r->rng) >> 40) / 16777216.0f;   // 24 bits
    return llama_sample_top_p(r->sorted, r->order, r->logits, TOP_P, u, V);
}

// Step k of a generation after a prompt of n tokens: the logits for position
// n + k, the token picked into tokens[n + k]. Returns that token.
static int run_step(Run *r, int n, int k, int use_cache) {
    int pos = n + k;
    if (!use_cache) llama_forward(r->logits, &r->st, &r->m, r->tokens, 0, 1, pos, pos);
    else if (k == 0) llama_forward(r->logits, &r->st, &r->m, r->tokens, 0, 1, n, n);   // the prompt
    else llama_forward(r->logits, &r->st, &r->m, r->tokens + pos - 1, pos - 1, 1, 1, 1);
    return r->tokens[pos] = run_pick(r);
}

// ----------------------------------------------------------------------------
// kvdemo generate

// Text written as it comes, held back while a character's bytes are still
// arriving (byte tokens give a character one byte at a time).
typedef struct {
    FILE *out;
    char pending[64];
    size_t n;
} Stream;

static void stream_put(Stream *s, const char *piece) {
    size_t k = strlen(piece);
    if (s->n + k > sizeof s->pending) {   // cannot be a character any more: out as it is
        utf8_put_shown(s->out, s->pending, s->n);
        s->n = 0;
    }
    if (k > sizeof s->pending) k = sizeof s->pending;
    memcpy(s->pending + s->n, piece, k);
    s->n += k;
    // the complete characters go out; a started one stays
    size_t cut = s->n;
    for (size_t back = 1; back <= 3 && back <= s->n; back++) {
        unsigned char c = (unsigned char)s->pending[s->n - back];
        if ((c & 0xC0) == 0x80) continue;
        int need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if ((size_t)need > back) cut = s->n - back;
        break;
    }
    utf8_put_shown(s->out, s->pending, cut);
    memmove(s->pending, s->pending + cut, s->n - cut);
    s->n -= cut;
    fflush(s->out);
}

// Runs the generation: returns the tokens generated, their time in *seconds.
static int generate_loop(Run *r, int n, int steps, int use_cache, Stream *s, double *seconds) {
    const Bpe *t = r->m.bpe;
    int k = 0;
    *seconds = 0;
    for (; k < steps; k++) {
        double t0 = timer_now();
        int id = run_step(r, n, k, use_cache);
        *seconds += timer_now() - t0;
        if (id == LLAMA_BOS_ID || id == LLAMA_EOS_ID) break;
        if (s) stream_put(s, bpe_token_text(t, r->tokens[n + k - 1], id));
    }
    return k;
}

static void generate_report(Trace *tr, const Run *r, int n, int got, int steps, double seconds, int use_cache) {
    size_t size = (size_t)llama_token_bytes(&r->m) * (size_t)(n + got) + 1;
    char *text = malloc(size);
    if (text && tr->format == FORMAT_JSON) {
        llama_decode(text, &r->m, r->tokens, n + got, size);
        trace_textval(tr, "text", text);
    }
    free(text);
    trace_run(tr, use_cache ? "cache" : "no-cache");
    trace_sayf(tr, "\n\n-- %d tokens in %.3f s, %.0f tokens/s, %s, %d thread%s",
               "\n\n—— %d 个 token，用时 %.3f 秒，每秒 %.0f 个 token，%s，%d 个线程%s", got, seconds,
               seconds > 0 ? got / seconds : 0.0,
               use_cache ? trace_text(tr, "with the KV cache", "使用缓存") : trace_text(tr, "without the KV cache", "不使用缓存"),
               pool_threads(r->st.pool), pool_threads(r->st.pool) == 1 || tr->lang == LANG_ZH ? "" : "s");
    if (got < steps)
        trace_sayf(tr, "-- the model wrote BOS or EOS after %d of %d tokens: the story is over",
                   "—— 模型在 %d / %d 个 token 后写出了 BOS 或 EOS：故事讲完了", got, steps);
    if (tr->format == FORMAT_JSON) trace_timing(tr, tr->run, seconds, 1);
    trace_value(tr, "tokens_per_s", seconds > 0 ? got / seconds : 0.0, "tokens/s", NULL, NULL);
}

int llama2ccmd_generate(const Options *opt, Trace *tr) {
    Run r;
    int rc = run_new(&r, opt);
    const char *prompt = opt->n_prompts > 0 ? opt->prompts[0] : DEFAULT_PROMPT;
    int T = r.m.cfg.max_seq_len, n = 0;
    char err[512];
    if (!rc && (n = llama_encode(r.tokens, &r.m, prompt, 1, 0, T - 1, ERR(tr->lang, err))) < 0) {
        fileio_error(tr->lang, "--prompt: %s (the model's context is %d tokens)", "--prompt：%s（模型的上下文是 %d 个 token）", err, T);
        rc = n == -2 ? 1 : 2;   // out of memory is no usage error
    }
    if (!rc) {
        int steps = opt->steps > 0 ? opt->steps : DEFAULT_STEPS;
        if (steps > T - n) steps = T - n;   // the context holds no more
        int use_cache = opt->runs != RUN_NOCACHE;
        Stream s = {.out = tr->out};
        if (tr->format == FORMAT_TEXT) {
            utf8_put_shown(tr->out, prompt, strlen(prompt));
            fflush(tr->out);
        }
        double seconds;
        int got = generate_loop(&r, n, steps, use_cache, tr->format == FORMAT_TEXT ? &s : NULL, &seconds);
        if (s.n) utf8_put_shown(tr->out, s.pending, s.n);
        generate_report(tr, &r, n, got, steps, seconds, use_cache);
    }
    run_free(&r);
    return rc;
}

// ----------------------------------------------------------------------------
// kvdemo bench (llama2.c's pair, or a KVLM file: cli.c picks this for both)

// "16,64,256" into lengths; returns how many, or -1.
static int parse_lengths(int *out, int max, const char *list) {
    int n = 0;
    for (const char *p = list; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 100000 || n == max || (*end && *end != ',')) return -1;
        out[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The median time of `repeat` greedy generations of len tokens after BOS.
// The last generation's tokens stay in r->tokens, its last logits in r->logits.
static double bench_time(Run *r, int len, int use_cache, int repeat) {
    double t[64];
    if (repeat > 64) repeat = 64;
    for (int i = 0; i < repeat; i++) {
        llama_state_reset(&r->st);
        r->tokens[0] = LLAMA_BOS_ID;
        t[i] = 0;
        for (int k = 0; k < len; k++) {
            double t0 = timer_now();
            run_step(r, 1, k, use_cache);
            t[i] += timer_now() - t0;
        }
    }
    qsort(t, (size_t)repeat, sizeof t[0], cmp_double);
    return t[repeat / 2];
}

static int bench_args(int *lengths, const Options *opt) {
    if (opt->csv_path || opt->svg_path || opt->bench_train) {
        fileio_error(opt->lang, "bench on a LLaMA-style model: --csv, --svg and --train are the char GPT's",
                     "在 LLaMA 式模型上 bench：--csv、--svg 和 --train 只用于字符级 GPT");
        return -2;
    }
    const char *list = opt->steps_list ? opt->steps_list : "16,64,128,255";
    int n = parse_lengths(lengths, MAX_LENGTHS, list);
    if (n <= 0) {
        fileio_error(opt->lang, "--steps takes a comma-separated list of lengths from 1 to 100000, e.g. 16,64,256, not '%s'",
                     "--steps 要给一串用逗号分隔的长度，每个 1 到 100000，例如 16,64,256，而不是“%s”", list);
        return -2;
    }
    return n;
}

int llama2ccmd_bench(const Options *opt, Trace *tr) {
    int lengths[MAX_LENGTHS], n = bench_args(lengths, opt);
    if (n < 0) return 2;
    Run r;
    int rc = run_new(&r, opt);
    if (!rc) {
        r.temperature = 0.0f;   // greedy: every run the same tokens
        int T = r.m.cfg.max_seq_len, repeat = opt->repeat > 0 ? opt->repeat : DEFAULT_REPEAT;
        static const TraceColumn cols[] = {
            {"tokens", "token 数", 8, 1, NULL},   {"no cache (s)", "不用缓存（秒）", 14, 1, NULL},
            {"cache (s)", "使用缓存（秒）", 14, 1, NULL}, {"tokens/s cached", "缓存时每秒 token", 16, 1, NULL},
            {"speed-up", "加速比", 9, 1, NULL},
        };
        TraceTable table = {"llama2c_bench", 5, cols};
        trace_sayf(tr, "%s: dim %d, %d layers, %d heads (%d key/value), vocabulary %d, context %d; greedy "
                       "tokens after BOS, median of %d, %d thread%s",
                   "%s：dim %d，%d 层，%d 个头（%d 个 key/value 头），词表 %d，上下文 %d；BOS 之后贪心生成，"
                   "取 %d 次的中位数，%d 个线程%s",
                   opt->model_path, r.m.cfg.dim, r.m.cfg.n_layers, r.m.cfg.n_heads, r.m.cfg.n_kv_heads,
                   r.m.cfg.vocab_size, T, repeat, pool_threads(r.st.pool),
                   pool_threads(r.st.pool) == 1 || tr->lang == LANG_ZH ? "" : "s");
        trace_table_head(tr, &table);
        int same = 1;
        int *saved = malloc(sizeof(int) * (size_t)T);
        float *saved_logits = malloc(sizeof(float) * (size_t)r.m.cfg.vocab_size);
        if (!saved || !saved_logits) {
            fileio_error(tr->lang, "out of memory", "内存不足");
            free(saved), free(saved_logits), run_free(&r);
            return 1;
        }
        for (int i = 0, last = 0; i < n; i++) {
            int len = lengths[i] < T ? lengths[i] : T - 1;   // BOS + len tokens fit the context
            if (len == last) continue;                       // a length past the context, once
            last = len;
            double nc = bench_time(&r, len, 0, repeat);
            memcpy(saved, r.tokens, sizeof(int) * (size_t)(len + 1));
            memcpy(saved_logits, r.logits, sizeof(float) * (size_t)r.m.cfg.vocab_size);
            double c = bench_time(&r, len, 1, repeat);
            // cached == uncached: the same greedy tokens, the last logits bit for bit
            same &= !memcmp(saved, r.tokens, sizeof(int) * (size_t)(len + 1)) &&
                    !memcmp(saved_logits, r.logits, sizeof(float) * (size_t)r.m.cfg.vocab_size);
            char cells[5][32];
            snprintf(cells[0], 32, "%d", len);
            snprintf(cells[1], 32, "%.4g", nc);
            snprintf(cells[2], 32, "%.4g", c);
            snprintf(cells[3], 32, "%.0f", len / c);
            snprintf(cells[4], 32, "%.2f", nc / c);
            const char *row[5] = {cells[0], cells[1], cells[2], cells[3], cells[4]};
            trace_table_row(tr, &table, row);
        }
        free(saved), free(saved_logits);
        trace_sayf(tr, "\ncached == uncached at every length: %s",
                   "\n每个长度上使用缓存 == 不使用缓存：%s",
                   same ? trace_text(tr, "the same tokens, the last logits bit for bit", "token 相同，最后一步的 logits 逐位相同")
                        : trace_text(tr, "NO: they differ, a bug in kvdemo", "否：两者不同，这是 kvdemo 的缺陷"));
        trace_count(tr, "identical", same, NULL, NULL);
        if (!same) rc = 1;
    }
    run_free(&r);
    return rc;
}
