// llamaspeccmd — kvdemo generate --model LLAMA --draft LLAMADRAFT [--gamma K]:
// speculative decoding on the LLaMA-style model (llama_spec.h).
//
// Simplified against the char GPT's: the text is written once, at the end,
// so that the time printed is the rounds' alone.
#include "llamaspeccmd.h"

#include "fileio.h"
#include "llama_spec.h"
#include "ops.h"
#include "paths.h"
#include "sampler.h"
#include "speccmd.h"
#include "timer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The draft --draft names (else the shipped one), checked against the
// target. Returns 0, or an exit status after one line on stderr.
static int load_draft(Lang lang, LlamaModel *draft, const LlamaModel *target, const char *path, int gamma) {
    char err[512];
    if (llama_load(draft, path, ERR(lang, err)) != 0) {
        fileio_error(lang, "%s", "%s", err);
        return 1;
    }
    if (llama_spec_check(target, draft, gamma, ERR(lang, err)) != 0) {
        fileio_error(lang, "%s: %s", "%s：%s", path, err);
        llama_free(draft);
        return 1;
    }
    return 0;
}

// The rounds on tokens (n_prompt of them, room for cap), then the text and
// the figures. Returns the exit status.
static int run(Trace *tr, const Options *opt, const LlamaModel *m, const LlamaModel *d, int gamma, int *tokens,
               int n_prompt, int steps, const char *draft_path) {
    float temperature = opt->temperature >= 0 ? (float)opt->temperature : 0.8f;
    LlamaState ts, ds;
    Pool *pool = NULL;   // --threads, the target's and the draft's
    Sampler sampler = {0};
    LlamaSpec sp = {0};
    SpecMt mt;
    char err[512];
    int rc = 1, have_t = 0, have_d = 0;
    size_t text_bytes = (size_t)llama_token_bytes(m) * (size_t)(n_prompt + steps) + 1;
    char *text = malloc(text_bytes);
    if (text && (have_t = llama_state_init(&ts, m, 1, ERR(tr->lang, err)) == 0) &&
        (have_d = llama_state_init(&ds, d, 1, ERR(tr->lang, err)) == 0) &&
        sampler_init(&sampler, m->cfg.vocab_size, temperature > 0 ? temperature : 1.0f, 0, (uint32_t)opt->seed) == 0) {
        spec_mt_init(&mt, &sampler);
        LlamaSpecModel tm = {m, &ts}, dm = {d, &ds};
        if (llama_spec_init(&sp, tm, dm, gamma, temperature, 0.95f, &mt.base) == 0) rc = 0;
    }
    if (rc) fileio_error(tr->lang, "out of memory", "内存不足");
    if (!rc && !(pool = pool_new_for(opt->threads, llama_row_work(&m->cfg)))) {
        fileio_error(tr->lang, "could not start %d threads", "无法启动 %d 个线程", ops_threads_asked(opt->threads));
        rc = 1;
    }
    if (!rc) {
        ts.pool = ds.pool = pool;
        double start = timer_now();
        int len = llama_spec_generate(tokens, &sp, n_prompt, steps, NULL, NULL);
        double seconds = timer_now() - start;
        llama_decode(text, m, tokens, len, text_bytes);
        trace_run(tr, "speculative");
        if (tr->format == FORMAT_JSON) trace_textval(tr, "text", text);
        else fprintf(tr->out, "%s", text);
        Spec view = {.gamma = gamma, .stats = sp.stats};
        speccmd_show_figures(tr, &view, pool_threads(pool), len - n_prompt, seconds > 0 ? seconds : 1e-9, draft_path);
        int asked = opt->steps > 0 ? opt->steps : steps;
        if (len < n_prompt + asked)
            trace_sayf(tr, "-- the context (max_seq_len %d) ended the text before --steps %d",
                       "—— 上下文（max_seq_len %d）在 --steps %d 之前就用完了", m->cfg.max_seq_len, asked);
    }
    llama_spec_free(&sp);
    sampler_free(&sampler);
    if (have_t) llama_state_free(&ts);
    if (have_d) llama_state_free(&ds);
    pool_free(pool);
    free(text);
    return rc;
}

int llamaspeccmd_generate(const Options *opt, Trace *tr) {
    char err[512], buf[4096];
    int rc = speccmd_check_options(opt);
    if (rc) return rc;
    if (opt->n_prompts > 1) {
        fileio_error(tr->lang, "--draft takes one prompt", "--draft 只接受一条提示词");
        return 2;
    }
    const char *draft_path = opt->draft_path ? opt->draft_path : paths_shipped(LLAMA_SPEC_SHIPPED_DRAFT, buf, sizeof buf);
    const char *prompt = opt->n_prompts ? opt->prompts[0] : "ROMEO:";
    int steps = opt->steps > 0 ? opt->steps : 256, gamma = speccmd_gamma(opt);
    LlamaModel m, d;
    if (llama_load(&m, opt->model_path, ERR(tr->lang, err)) != 0) {
        fileio_error(tr->lang, "%s", "%s", err);
        return 1;
    }
    rc = load_draft(opt->lang, &d, &m, draft_path, gamma);
    if (rc) {
        llama_free(&m);
        return rc;
    }
    int cap = m.cfg.max_seq_len;
    if (steps > cap) steps = cap;
    int *tokens = malloc(sizeof(int) * (size_t)cap * 2);
    int n = tokens ? llama_encode(tokens, &m, prompt, 1, 0, cap, ERR(tr->lang, err)) : -1;
    if (!tokens) snprintf(err, sizeof err, "out of memory");
    if (n < 0) {
        fileio_error(tr->lang, "%s", "%s", err);
        rc = 1;
    } else {
        rc = run(tr, opt, &m, &d, gamma, tokens, n, steps, draft_path);
    }
    free(tokens);
    llama_free(&d);
    llama_free(&m);
    return rc;
}
