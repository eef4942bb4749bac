// specarms — a draft and its target run two ways, greedy: the target
// alone with its cache, and speculative decoding (specarms.h). The two arms
// of `kvdemo bench --draft` and `kvdemo race --draft`.
//
// Legend as in spec.h: V vocabulary, K drafted tokens per round, T the
// target's context.
#include "specarms.h"

#include "fileio.h"
#include "gptsetup.h"
#include "llamacmd.h"
#include "llamaspeccmd.h"
#include "ops.h"
#include "paths.h"
#include "speccmd.h"
#include "timer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { HAVE_GT = 1, HAVE_GD = 2, HAVE_LT = 4, HAVE_LD = 8, HAVE_GTS = 16, HAVE_GDS = 32, HAVE_LTS = 64,
       HAVE_LDS = 128 };

const char *specarms_kind(const SpecArms *p, int zh, int cap) {
    if (p->llama) return zh ? "LLaMA 式模型" : cap ? "The LLaMA-style model" : "the LLaMA-style model";
    return zh ? "字符级 GPT" : cap ? "The char GPT" : "the char GPT";
}

// ----------------------------------------------------------------------------
// Opening: the models, of one kind, and the prompt

// A model file's kind by its magic: 1 a LLaMA-style model ("KVLM"), 0 a
// char GPT ("KVGP"), -1 neither or unreadable (its loader says why).
static int file_kind(const char *path) {
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return -1;   // a FIFO would block
    if (llamacmd_is_llama_file(path)) return 1;
    FILE *f = fopen(path, "rb");
    char magic[4];
    int gpt = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "KVGP", 4) == 0;
    if (f) fclose(f);
    return gpt ? 0 : -1;
}

// A draft of another kind than the target's cannot verify anything: its
// tokens are not the target's. Returns 0, or 1 after one line on stderr.
static int check_kinds(const SpecArms *p, const char *target_path) {
    int kind = file_kind(p->draft_path);
    if (kind < 0 || kind == p->llama) return 0;
    const char *kind_en[2] = {"a char GPT", "a LLaMA-style model"}, *kind_zh[2] = {"字符级 GPT", "LLaMA 式模型"};
    int d = !p->llama;
    fileio_error(p->lang, "--draft %s is %s and the target %s is %s: a draft must be of its target's kind (%s)",
                 "--draft %s 是%s，目标模型 %s 是%s：草稿模型必须与目标模型同一种类（%s）", p->draft_path,
                 fileio_text(p->lang, kind_en[d], kind_zh[d]), target_path, fileio_text(p->lang, kind_en[!d], kind_zh[!d]),
                 p->llama ? LLAMA_SPEC_SHIPPED_DRAFT : SPEC_SHIPPED_DRAFT);
    return 1;
}

static int open_gpt(SpecArms *p, const Options *opt, int gamma_max) {
    int rc = gptsetup_model(&p->gt, opt, 0, NULL);
    if (rc) return rc;
    p->loaded |= HAVE_GT;
    rc = speccmd_draft(&p->gd, &p->gt, opt, gamma_max);
    if (rc) return rc;
    p->loaded |= HAVE_GD;
    rc = gptsetup_prompt(opt->lang, &p->prompt, &p->n_prompt, &p->gt, p->prompt_text, p->steps);
    if (rc) return rc;
    if (gpt_state_init(&p->gts, p->gt.cfg)) return -1;
    p->loaded |= HAVE_GTS;
    if (gpt_state_init(&p->gds, p->gd.cfg)) return -1;
    p->loaded |= HAVE_GDS;
    return 0;
}

static int open_llama(SpecArms *p, const Options *opt, int gamma_max) {
    char err[512];
    if (llama_load(&p->lt, opt->model_path, ERR(opt->lang, err)) != 0) goto fail;
    p->loaded |= HAVE_LT;
    if (llama_load(&p->ld, p->draft_path, ERR(opt->lang, err)) != 0) goto fail;
    p->loaded |= HAVE_LD;
    if (llama_spec_check(&p->lt, &p->ld, gamma_max, ERR(opt->lang, err)) != 0) {
        fileio_error(opt->lang, "%s: %s", "%s：%s", p->draft_path, err);
        return 1;
    }
    int T = p->lt.cfg.max_seq_len;
    p->prompt = malloc(sizeof(int) * (size_t)T);
    if (!p->prompt) return -1;
    p->n_prompt = llama_encode(p->prompt, &p->lt, p->prompt_text, 1, 0, T, ERR(opt->lang, err));
    if (p->n_prompt < 0) goto fail;
    if (p->n_prompt + p->steps > T) p->steps = T - p->n_prompt;   // the context ends the text
    if (llama_state_init(&p->lts, &p->lt, 1, ERR(opt->lang, err)) != 0) goto fail;
    p->loaded |= HAVE_LTS;
    if (llama_state_init(&p->lds, &p->ld, 1, ERR(opt->lang, err)) != 0) goto fail;
    p->loaded |= HAVE_LDS;
    return 0;
fail:
    fileio_error(opt->lang, "%s", "%s", err);
    return 1;
}

int specarms_open(SpecArms *p, const Options *opt, int steps, int gamma_max) {
    memset(p, 0, sizeof *p);
    p->lang = opt->lang;
    p->differ_at = -1;
    p->steps = steps;
    p->prompt_text = opt->n_prompts ? opt->prompts[0] : "ROMEO:";
    p->llama = llamacmd_is_llama_file(opt->model_path);
    p->draft_path = opt->draft_path ? opt->draft_path
                                    : paths_shipped(p->llama ? LLAMA_SPEC_SHIPPED_DRAFT : SPEC_SHIPPED_DRAFT,
                                                    p->draft_buf, sizeof p->draft_buf);
    char buf[4096];
    const char *target = p->llama ? opt->model_path : gptsetup_model_path(opt, buf, sizeof buf);
    int rc = target && check_kinds(p, target);
    if (!rc) rc = p->llama ? open_llama(p, opt, gamma_max) : open_gpt(p, opt, gamma_max);
    if (!rc) {
        int V = p->llama ? p->lt.cfg.vocab_size : p->gt.cfg.V;
        size_t n = (size_t)(p->n_prompt + p->steps);
        p->plain = malloc(sizeof(int) * n);
        p->spec = malloc(sizeof(int) * n);
        p->times = malloc(sizeof(double) * n);
        p->cached = malloc(n);
        p->logits = malloc(sizeof(float) * (size_t)V);
        if (!p->plain || !p->spec || !p->times || !p->cached || !p->logits ||
            sampler_init(&p->sampler, V, 0.0f, 0, (uint32_t)opt->seed))
            rc = -1;
        else spec_mt_init(&p->mt, &p->sampler);
    }
    if (rc < 0) fileio_error(opt->lang, "out of memory", "内存不足");
    if (rc) specarms_close(p);
    return rc < 0 ? 1 : rc;
}

static void free_spec(SpecArms *p) {
    if (p->gamma && p->llama) llama_spec_free(&p->lsp);
    else if (p->gamma) spec_free(&p->gsp);
    p->gamma = 0;
}

void specarms_use_pool(SpecArms *p, Pool *pool) {
    p->pool = pool;
    p->gts.pool = p->gds.pool = pool;
    p->lts.pool = p->lds.pool = pool;
}

void specarms_close(SpecArms *p) {
    free_spec(p);
    if (p->loaded & HAVE_GTS) gpt_state_free(&p->gts);
    if (p->loaded & HAVE_GDS) gpt_state_free(&p->gds);
    if (p->loaded & HAVE_LTS) llama_state_free(&p->lts);
    if (p->loaded & HAVE_LDS) llama_state_free(&p->lds);
    if (p->loaded & HAVE_GT) gpt_free(&p->gt);
    if (p->loaded & HAVE_GD) gpt_free(&p->gd);
    if (p->loaded & HAVE_LT) llama_free(&p->lt);
    if (p->loaded & HAVE_LD) llama_free(&p->ld);
    sampler_free(&p->sampler);
    free(p->prompt);
    free(p->plain);
    free(p->spec);
    free(p->times);
    free(p->cached);
    free(p->logits);
    memset(p, 0, sizeof *p);
}

int specarms_set_gamma(SpecArms *p, int K) {
    free_spec(p);
    int rc;
    if (p->llama) {
        LlamaSpecModel tm = {&p->lt, &p->lts}, dm = {&p->ld, &p->lds};
        rc = llama_spec_init(&p->lsp, tm, dm, K, 0.0f, 0.95f, &p->mt.base);
    } else {
        SpecModel tm = {&p->gt, &p->gts, NULL}, dm = {&p->gd, &p->gds, NULL};
        rc = spec_init(&p->gsp, tm, dm, K, &p->sampler, &p->mt.base);
    }
    if (rc) {
        fileio_error(p->lang, "out of memory", "内存不足");
        return 1;
    }
    p->gamma = K;
    return 0;
}

// ----------------------------------------------------------------------------
// The two arms

// The time since the last step or round, kept with whether it fed the prompt.
static void keep_time(SpecArms *p, int cached, double *last) {
    double now = timer_now();
    p->times[p->n_times] = now - *last;
    p->cached[p->n_times++] = (unsigned char)cached;
    *last = now;
}

typedef struct {
    SpecArms *p;
    double last;
} Clock;

static int on_step(void *ctx, const GptStep *st) {
    Clock *c = ctx;
    keep_time(c->p, st->cached, &c->last);
    return 0;
}

static int on_round(void *ctx, const SpecRound *r) {
    Clock *c = ctx;
    keep_time(c->p, r->round > 0, &c->last);
    return 0;
}

// The target alone on the LLaMA pair, greedy, as llama_spec_generate ends
// it (no position past T - 1 fed): the prompt in one pass, then
//   logits = self.model.forward(tokens[:, prev_pos:cur_pos], prev_pos)
//   next_token = torch.argmax(logits[:, -1], dim=-1)
// one token a step.
static int llama_plain(SpecArms *p, int *tokens, Clock *c) {
    int T = p->lt.cfg.max_seq_len, end = p->n_prompt + p->steps, len = p->n_prompt, from = 0;
    if (end > T) end = T;
    while (len < end) {
        llama_forward(p->logits, &p->lts, &p->lt, tokens + from, from, 1, len - from, len - from);
        tokens[len] = ops_argmax(p->logits, p->lt.cfg.vocab_size);
        keep_time(p, from > 0, &c->last);
        from = len++;
    }
    return len;
}

// differ_at: the first token where the two last texts part, or -1.
static void compare(SpecArms *p) {
    if (!p->len_plain || !p->len_spec) return;
    int n = p->len_plain < p->len_spec ? p->len_plain : p->len_spec, i = 0;
    while (i < n && p->plain[i] == p->spec[i]) i++;
    if (i < n || p->len_plain != p->len_spec) p->differ_at = i;
}

int specarms_run_plain(void *ctx, double *seconds) {
    SpecArms *p = ctx;
    Clock c = {p, 0};
    memcpy(p->plain, p->prompt, sizeof(int) * (size_t)p->n_prompt);
    p->n_times = 0;
    double start = c.last = timer_now();
    if (p->llama) {
        llama_state_reset(&p->lts);
        c.last = start = timer_now();
        p->len_plain = llama_plain(p, p->plain, &c);
    } else {
        gpt_state_reset(&p->gts);
        c.last = start = timer_now();
        p->len_plain = gpt_generate(p->plain, &p->gts, &p->gt, &p->sampler, p->n_prompt, p->steps, 1, on_step, &c);
    }
    *seconds = timer_now() - start;
    compare(p);
    return 0;
}

int specarms_run_spec(void *ctx, double *seconds) {
    SpecArms *p = ctx;
    Clock c = {p, 0};
    memcpy(p->spec, p->prompt, sizeof(int) * (size_t)p->n_prompt);
    p->n_times = 0;
    double start;
    if (p->llama) {
        llama_state_reset(&p->lts);
        llama_state_reset(&p->lds);
        c.last = start = timer_now();
        p->len_spec = llama_spec_generate(p->spec, &p->lsp, p->n_prompt, p->steps, on_round, &c);
        p->stats = p->lsp.stats;
    } else {
        gpt_state_reset(&p->gts);
        gpt_state_reset(&p->gds);
        c.last = start = timer_now();
        p->len_spec = spec_generate(p->spec, &p->gsp, p->n_prompt, p->steps, on_round, &c);
        p->stats = p->gsp.stats;
    }
    *seconds = timer_now() - start;
    compare(p);
    return 0;
}

char *specarms_text(const SpecArms *p) {
    size_t need = p->llama ? (size_t)llama_token_bytes(&p->lt) * (size_t)p->len_spec + 1
                           : gpt_decode(NULL, 0, &p->gt, p->spec, p->len_spec) + 1;
    char *text = malloc(need);
    if (!text) return NULL;
    if (p->llama) llama_decode(text, &p->lt, p->spec, p->len_spec, need);
    else gpt_decode(text, need, &p->gt, p->spec, p->len_spec);
    return text;
}
