// llamacmd — `kvdemo generate` on a LLaMA-style model file: the article's
// LLaMA.generate (llama.h) on a batch of prompts, with the cache or without
// it, the text and the time of the run. The char GPT's generate is gptcmd.c's;
// the command picks this one when --model names a LLaMA file.
#include "llamacmd.h"

#include "fileio.h"
#include "llama.h"
#include "llama_past.h"
#include "llamaspeccmd.h"
#include "ops.h"
#include "timer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LLAMA_DEFAULT_STEPS = 256 };

int llamacmd_is_llama_file(const char *path) {
    // Through fileio's reader, which refuses a FIFO or a device at once
    // (they would block or be read from): any file it cannot read is not
    // taken for a LLaMA one, and the char GPT's loader says what is wrong.
    uint64_t size;
    FILE *f = path ? fileio_open_read(path, &size, ERR_NONE) : NULL;
    if (!f) return 0;
    char magic[4];
    int yes = fread(magic, 1, 4, f) == 4 && memcmp(magic, "KVLM", 4) == 0;
    fclose(f);
    return yes;
}

// The texts and the figures of a finished generation on threads threads.
static void say_generation(Trace *tr, const LlamaGeneration *g, const LlamaModel *m, int use_cache, int threads,
                           int steps) {
    trace_run(tr, use_cache ? "cache" : "no-cache");
    for (int k = 0; k < g->bsz; k++) {
        if (tr->format == FORMAT_JSON) trace_textval(tr, "text", g->text[k]);
        else fprintf(tr->out, "%s%s\n", k ? "\n" : "", g->text[k]);
    }
    double s = g->seconds > 0 ? g->seconds : 1e-9;
    trace_sayf(tr, "\n-- %d steps in %.3f s, %.0f steps/s, %s; LLaMA-style model: %d query heads, %d key/value heads, %d thread%s",
               "\n—— %d 步，用时 %.3f 秒，每秒 %.0f 步，%s；LLaMA 式模型：%d 个查询头，%d 个 key/value 头，%d 个线程%s",
               g->n_steps, g->seconds, g->n_steps / s,
               use_cache ? trace_text(tr, "with the KV cache", "使用缓存")
                         : trace_text(tr, "without the KV cache", "不使用缓存"),
               m->cfg.n_heads, m->cfg.n_kv_heads, threads, threads == 1 || tr->lang == LANG_ZH ? "" : "s");
    if (g->total_len < steps + g->max_prompt_size)
        trace_sayf(tr, "-- the context (max_seq_len %d) ended the text before --steps %d",
                   "—— 上下文（max_seq_len %d）在 --steps %d 之前就用完了", m->cfg.max_seq_len, steps);
}

// --window W or S,W: *W rows, *S of them sinks. Returns 0, or -1 when the
// text is not one of those.
static int parse_rolling(int *S, int *W, const char *spec) {
    char *end;
    long a = strtol(spec, &end, 10), b = -1;
    if (end == spec) return -1;
    if (*end == ',') {
        const char *rest = end + 1;
        b = strtol(rest, &end, 10);
        if (end == rest) return -1;
    }
    if (*end) return -1;
    *S = b < 0 ? 0 : (int)(a > 65535 ? 65535 : a < 0 ? -1 : a);
    *W = b < 0 ? (int)(a > 65536 ? 65537 : a) : (int)(b > 65536 ? 65537 : b);
    return *W >= 2 && *W <= 65536 && *S >= 0 && *S < *W ? 0 : -1;
}

// `generate --window W` or `--window S,W`: one prompt and --steps tokens on a
// rolling cache of W rows (kvcache_window.c), past the context without
// resets, on pool's threads. Returns 0, or 1 after one line.
static int generate_past(const Options *opt, Trace *tr, const LlamaModel *m, Pool *pool, const char *prompt,
                         int steps, float temperature, int S, int W) {
    char err[512];
    int cap = (int)strlen(prompt) + 2 + steps;
    int *tokens = malloc(sizeof(int) * (size_t)cap);
    char *text = malloc((size_t)llama_token_bytes(m) * (size_t)cap + 1);
    LlamaState s;
    KvWindow kv;
    KvShape shape = {.L = m->cfg.n_layers, .B = 1, .T = W, .H = m->cfg.n_heads, .G = m->cfg.n_kv_heads,
                     .D = m->cfg.head_dim};
    int rc = 1, n = -1;
    memset(&kv, 0, sizeof kv);
    if (!tokens || !text || llama_state_init(&s, m, 1, ERR(tr->lang, err)) != 0) {
        fileio_error(tr->lang, "out of memory for a generation of %d tokens", "内存不足：放不下 %d 个 token 的生成", cap);
        free(tokens), free(text);
        return 1;
    }
    if (kvwindow_init(&kv, shape, S) != 0) {
        fileio_error(tr->lang, "out of memory for a cache of %d rows", "内存不足：放不下 %d 行的缓存", W);
        goto done;
    }
    s.kv = &kv.base;
    s.pool = pool;
    n = llama_encode(tokens, m, prompt, 1, 0, cap - steps, ERR(tr->lang, err));
    if (n < 0) {
        fileio_error(tr->lang, "%s", "%s", err);
        goto done;
    }
    double t0 = timer_now();
    if (llama_past_generate(tokens, &s, m, n, steps, temperature, 0.95f, opt->seed) != 0) {
        fileio_error(tr->lang, "out of memory for sampling", "采样时内存不足");
        goto done;
    }
    double seconds = timer_now() - t0;
    llama_decode(text, m, tokens, n + steps, (size_t)llama_token_bytes(m) * (size_t)cap + 1);
    trace_run(tr, S ? "sinks" : "window");
    if (tr->format == FORMAT_JSON) trace_textval(tr, "text", text);
    else fprintf(tr->out, "%s\n", text);
    trace_sayf(tr, "\n-- %d steps in %.3f s, positions 0 .. %d on a %s cache of %d rows (%d sinks): %zu bytes, "
               "the context (max_seq_len) is %d; no reset",
               "\n—— %d 步，用时 %.3f 秒，位置 0 .. %d，%s缓存 %d 行（%d 个 sink）：%zu 字节；上下文（max_seq_len）为 %d；没有重置",
               steps, seconds, n + steps - 1, S ? trace_text(tr, "sinks + window", "sink + 窗口")
                                                : trace_text(tr, "rolling", "滚动"),
               W, S, kvcache_bytes(&kv.base), m->cfg.max_seq_len);
    if (tr->format == FORMAT_JSON) trace_count(tr, "cache_bytes", (double)kvcache_bytes(&kv.base), NULL, NULL);
    rc = 0;
done:
    kvcache_free(&kv.base);
    llama_state_free(&s);
    free(tokens), free(text);
    return rc;
}

int llamacmd_generate(const Options *opt, Trace *tr) {
    char err[512];
    const char *gpt_only = opt->paged || opt->block_size || opt->num_blocks || opt->samples ? "--paged"
                           : opt->bug      ? "--bug"
                           : opt->kv_dtype ? "--kv-dtype"
                           : opt->attention ? "--attention"
                           : opt->top_k    ? "--top-k"
                           : NULL;
    if (gpt_only && !strcmp(gpt_only, "--paged")) {
        // lesson 6.1's paged kind computes in the char GPT's order of sums
        // (G = H): the LLaMA-style model runs on its preallocated cache only
        fileio_error(tr->lang, "--paged is the char GPT's; %s is a LLaMA-style model, which has no paged cache kind "
                     "(it runs on its preallocated cache_k / cache_v): leave out --paged",
                     "--paged 属于字符级 GPT；%s 是 LLaMA 式模型，没有分页缓存（它用预分配的 cache_k / cache_v）："
                     "去掉 --paged",
                     opt->model_path);
        return 2;
    }
    if (gpt_only) {
        fileio_error(tr->lang, "%s is the char GPT's; %s is a LLaMA-style model", "%s 属于字符级 GPT；%s 是 LLaMA 式模型",
                     gpt_only, opt->model_path);
        return 2;
    }
    if (opt->given[OPT_DRAFT] || opt->given[OPT_GAMMA]) return llamaspeccmd_generate(opt, tr);
    LlamaModel m;
    if (llama_load(&m, opt->model_path, ERR(tr->lang, err)) != 0) {
        fileio_error(tr->lang, "%s", "%s", err);
        return 1;
    }
    Pool *pool = pool_new_for(opt->threads, llama_row_work(&m.cfg));   // the state's threads, freed below
    if (!pool) {
        fileio_error(tr->lang, "could not start %d threads", "无法启动 %d 个线程", ops_threads_asked(opt->threads));
        llama_free(&m);
        return 1;
    }
    static const char *const romeo[] = {"ROMEO:"};
    const char *const *prompts = opt->n_prompts ? opt->prompts : romeo;
    int n = opt->n_prompts ? opt->n_prompts : 1;
    int steps = opt->steps > 0 ? opt->steps : LLAMA_DEFAULT_STEPS;
    int use_cache = opt->runs != RUN_NOCACHE;
    if (opt->rolling) {
        int S = 0, W = 0, rc = 2;
        if (parse_rolling(&S, &W, opt->rolling) != 0)
            fileio_error(tr->lang, "--window %s: W rows (2 to 65536), or S,W: S sinks among the W (S below W)",
                         "--window %s：W 行（2 到 65536），或 S,W：W 行中含 S 个 sink（S 小于 W）", opt->rolling);
        else if (n > 1 || !use_cache)
            fileio_error(tr->lang, "--window takes one prompt, with the cache", "--window 只接受一条提示词，并使用缓存");
        else
            rc = generate_past(opt, tr, &m, pool, prompts[0], steps, opt->temperature >= 0 ? (float)opt->temperature : 0.8f,
                               S, W);
        pool_free(pool);
        llama_free(&m);
        return rc;
    }
    // the article's generate(prompts, max_gen_len, temperature=0.8, top_p=0.95)
    LlamaGenOptions go = {.max_gen_len = steps,
                          .temperature = opt->temperature >= 0 ? (float)opt->temperature : 0.8f,
                          .top_p = 0.95f, .use_cache = use_cache, .seed = opt->seed};
    LlamaState s;
    LlamaGeneration g;
    int rc = 1;
    if (llama_state_init(&s, &m, n, ERR(tr->lang, err)) != 0) goto fail_model;
    s.pool = pool;
    if (llama_generation_new(&g, &s, &m, ERR(tr->lang, err)) != 0) goto fail_state;
    if (llama_generate(&g, &s, &m, prompts, n, &go, ERR(tr->lang, err)) == 0) {
        say_generation(tr, &g, &m, use_cache, pool_threads(pool), steps);
        rc = 0;
    }
    llama_generation_free(&g);
fail_state:
    llama_state_free(&s);
fail_model:
    if (rc) fileio_error(tr->lang, "%s", "%s", err);
    pool_free(pool);
    llama_free(&m);
    return rc;
}
