// llamacmd — `kvdemo generate` on a LLaMA-style model file: the article's
// LLaMA.generate (llama.h) on a batch of prompts, with the cache or without
// it, the text and the time of the run. The char GPT's generate is gptcmd.c's;
// the command picks this one when --model names a LLaMA file.
#include "llamacmd.h"

#include "fileio.h"
#include "llama.h"
#include "ops.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

enum { LLAMA_DEFAULT_STEPS = 256 };

int llamacmd_is_llama_file(const char *path) {
    // Only a regular file is opened here: a FIFO or a device would block or
    // be read from, and the char GPT's loader says what is wrong with them.
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char magic[4];
    int yes = fread(magic, 1, 4, f) == 4 && memcmp(magic, "KVLM", 4) == 0;
    fclose(f);
    return yes;
}

// The texts and the figures of a finished generation.
static void say_generation(Trace *tr, const LlamaGeneration *g, const LlamaModel *m, int use_cache,
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
               m->cfg.n_heads, m->cfg.n_kv_heads, ops_threads(),
               ops_threads() == 1 || tr->lang == LANG_ZH ? "" : "s");
    if (g->total_len < steps + g->max_prompt_size)
        trace_sayf(tr, "-- the context (max_seq_len %d) ended the text before --steps %d",
                   "—— 上下文（max_seq_len %d）在 --steps %d 之前就用完了", m->cfg.max_seq_len, steps);
}

int llamacmd_generate(const Options *opt, Trace *tr) {
    char err[512];
    const char *gpt_only = opt->paged || opt->block_size || opt->num_blocks || opt->samples ? "--paged"
                           : opt->bug      ? "--bug"
                           : opt->kv_dtype ? "--kv-dtype"
                           : opt->attention ? "--attention"
                           : opt->top_k    ? "--top-k"
                           : opt->draft_path || opt->given[OPT_GAMMA] ? "--draft"
                           : NULL;
    if (gpt_only) {
        fileio_error("%s is the char GPT's; %s is a LLaMA-style model", "%s 属于字符级 GPT；%s 是 LLaMA 式模型",
                     gpt_only, opt->model_path);
        return 2;
    }
    LlamaModel m;
    if (llama_load(&m, opt->model_path, err, sizeof err) != 0) {
        fileio_error("%s", "%s", err);
        return 1;
    }
    if (ops_set_threads(opt->threads) != 0) {
        fileio_error("could not start %d threads", "无法启动 %d 个线程", ops_threads_asked(opt->threads));
        llama_free(&m);
        return 1;
    }
    static const char *const romeo[] = {"ROMEO:"};
    const char *const *prompts = opt->n_prompts ? opt->prompts : romeo;
    int n = opt->n_prompts ? opt->n_prompts : 1;
    int steps = opt->steps > 0 ? opt->steps : LLAMA_DEFAULT_STEPS;
    int use_cache = opt->runs != RUN_NOCACHE;
    // the article's generate(prompts, max_gen_len, temperature=0.8, top_p=0.95)
    LlamaGenOptions go = {.max_gen_len = steps,
                          .temperature = opt->temperature >= 0 ? (float)opt->temperature : 0.8f,
                          .top_p = 0.95f, .use_cache = use_cache, .seed = opt->seed};
    LlamaState s;
    LlamaGeneration g;
    int rc = 1;
    if (llama_state_init(&s, &m, n, err, sizeof err) != 0) goto fail_model;
    if (llama_generation_new(&g, &s, &m, err, sizeof err) != 0) goto fail_state;
    if (llama_generate(&g, &s, &m, prompts, n, &go, err, sizeof err) == 0) {
        say_generation(tr, &g, &m, use_cache, steps);
        rc = 0;
    }
    llama_generation_free(&g);
fail_state:
    llama_state_free(&s);
fail_model:
    if (rc) fileio_error("%s", "%s", err);
    llama_free(&m);
    return rc;
}
