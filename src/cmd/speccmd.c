// speccmd — kvdemo generate --draft FILE [--gamma K] [--paged]: the char
// GPT's text by speculative decoding (spec.h), and what lesson 13 shares.
//
// Legend as in spec.h: V vocabulary, K drafted tokens per round, T context.
#include "speccmd.h"

#include "fileio.h"
#include "gptsetup.h"
#include "kvpage.h"
#include "ops.h"
#include "paths.h"
#include "spec.h"
#include "timer.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int speccmd_check_options(const Options *opt) {
    if (!opt->given[OPT_DRAFT]) {
        if (!opt->given[OPT_GAMMA]) return 0;
        fileio_error(opt->lang, "--gamma goes with --draft FILE (speculative decoding: tokens drafted a round)",
                     "--gamma 要和 --draft FILE 一起用（投机解码：每轮起草的 token 数）");
        return 2;
    }
    if (opt->runs == RUN_NOCACHE) {
        fileio_error(opt->lang, "--draft needs the KV cache (its rounds roll it back): leave out --no-cache",
                     "--draft 需要 KV 缓存（每轮都要回退它）：去掉 --no-cache");
        return 2;
    }
    if (opt->bug || opt->kv_dtype || opt->samples || opt->attention || opt->tile) {
        fileio_error(opt->lang, "--draft runs on the plain cache: leave out --bug, --kv-dtype, --samples, --attention and --tile",
                     "--draft 使用普通缓存：去掉 --bug、--kv-dtype、--samples、--attention 和 --tile");
        return 2;
    }
    return 0;
}

int speccmd_gamma(const Options *opt) {
    return opt->given[OPT_GAMMA] ? opt->gamma : SPEC_DEFAULT_GAMMA;
}

int speccmd_draft(GptModel *draft, const GptModel *target, const Options *opt, int gamma) {
    char buf[4096], err[512];
    const char *path = opt->draft_path ? opt->draft_path : paths_shipped(SPEC_SHIPPED_DRAFT, buf, sizeof buf);
    if (gpt_load(draft, path, ERR(opt->lang, err)) != 0) {
        fileio_error(opt->lang, "%s", "%s", err);
        return 1;
    }
    if (spec_check(target, draft, gamma, ERR(opt->lang, err)) != 0) {
        fileio_error(opt->lang, "%s: %s", "%s：%s", path, err);
        gpt_free(draft);
        return 1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// kvdemo generate --draft

// Each round's tokens as they come (text), after the prompt.
typedef struct {
    const GptModel *m;
    FILE *out;
    const int *tokens;
    int shown;   // tokens written so far
} SpecShow;

static void show_upto(SpecShow *g, int len) {
    for (; g->shown < len; g->shown++) {
        char piece[8];
        gpt_decode(piece, sizeof piece, g->m, &g->tokens[g->shown], 1);
        utf8_put_shown(g->out, piece, strlen(piece));
    }
    fflush(g->out);
}

static int show_round(void *ctx, const SpecRound *r) {
    show_upto(ctx, r->len + r->accepted + 1);
    return 0;
}

// The two paged pools and sequences of --paged, one per model.
typedef struct {
    KvPool pool[2];
    KvSeq seq[2];
} SpecPaged;

static int paged_init(SpecPaged *p, const GptModel *const models[2], const Options *opt) {
    memset(p, 0, sizeof *p);
    int B = opt->block_size > 0 ? opt->block_size : 16;
    for (int i = 0; i < 2; i++) {
        const GptConfig *c = &models[i]->cfg;
        int NB = (c->T + B - 1) / B;
        if (i == 0 && opt->num_blocks > 0) NB = opt->num_blocks;
        if (kvpool_init(&p->pool[i], c->L, c->H, c->C / c->H, B, NB) || kvseq_init(&p->seq[i], &p->pool[i], c->T))
            return -1;
    }
    return 0;
}

static void paged_free(SpecPaged *p) {
    for (int i = 0; i < 2; i++) {
        if (p->seq[i].pool) kvseq_free(&p->seq[i]);
        if (p->pool[i].ref) kvpool_free(&p->pool[i]);
    }
}

// The figures under the text: lines for people, events for scripts.
static void show_figures(Trace *tr, const Spec *sp, int threads, int steps, double seconds, const char *draft_path) {
    const SpecStats *st = &sp->stats;
    double per_round = st->rounds ? (double)st->tokens / st->rounds : 0.0;
    trace_sayf(tr, "\n\n-- %d tokens in %.3f s, %.0f tokens/s, speculative decoding with the KV cache, %d thread%s",
               "\n\n—— %d 个 token，用时 %.3f 秒，每秒 %.0f 个 token，投机解码，使用缓存，%d 个线程%s", steps, seconds,
               steps / seconds, threads, threads == 1 || tr->lang == LANG_ZH ? "" : "s");
    trace_sayf(tr, "-- draft %s, K = %d: %d rounds, %d of %d drafted tokens accepted (α %.3f), %.2f tokens a round",
               "—— 草稿模型 %s，K = %d：%d 轮，%d 个 token 被接受（共起草 %d 个，α %.3f），每轮 %.2f 个 token",
               draft_path, sp->gamma, st->rounds, st->accepted, st->drafted, spec_alpha(st), per_round);
    if (st->plain_steps)
        trace_sayf(tr, "-- past the context the target alone made the last %d tokens, as the chapter's generate",
                   "—— 超过上下文后，最后 %d 个 token 由目标模型单独生成，同章节里的 generate", st->plain_steps);
    if (tr->format == FORMAT_JSON) trace_timing(tr, tr->run, seconds, 1);
    trace_value(tr, "tokens_per_s", steps / seconds, "tokens/s", NULL, NULL);
    trace_count(tr, "gamma", sp->gamma, NULL, NULL);
    trace_count(tr, "rounds", st->rounds, NULL, NULL);
    trace_count(tr, "drafted", st->drafted, NULL, NULL);
    trace_count(tr, "accepted", st->accepted, NULL, NULL);
    trace_count(tr, "plain_steps", st->plain_steps, NULL, NULL);
    trace_value(tr, "alpha", spec_alpha(st), "", NULL, NULL);
    trace_value(tr, "tokens_per_round", per_round, "tokens", NULL, NULL);
}

// The run itself, models loaded: the text, or an exit status.
static int run(Trace *tr, const Options *opt, const GptModel *m, const GptModel *d, int gamma) {
    int steps = opt->steps > 0 ? opt->steps : 256, *tokens = NULL, n_prompt = 0, rc;
    const char *prompt = gptsetup_prompt_text(opt);
    rc = gptsetup_prompt(opt->lang, &tokens, &n_prompt, m, prompt, steps);
    if (rc) return rc;
    float temperature = opt->temperature >= 0 ? (float)opt->temperature : 1.0f;
    GptState ts = {0}, ds = {0};
    Pool *pool = NULL;   // --threads, the target's and the draft's
    Sampler sampler = {0};
    SpecPaged paged = {0};
    Spec sp = {0};
    SpecMt mt;
    const GptModel *models[2] = {m, d};
    if (gpt_state_init(&ts, m->cfg) || gpt_state_init(&ds, d->cfg) ||
        sampler_init(&sampler, m->cfg.V, temperature, opt->top_k, (uint32_t)opt->seed) ||
        (opt->paged && paged_init(&paged, models, opt))) {
        fileio_error(tr->lang, "out of memory", "内存不足");
        rc = 1;
    }
    spec_mt_init(&mt, &sampler);
    SpecModel tm = {m, &ts, opt->paged ? &paged.seq[0] : NULL}, dm = {d, &ds, opt->paged ? &paged.seq[1] : NULL};
    if (!rc && spec_init(&sp, tm, dm, gamma, &sampler, &mt.base)) {
        fileio_error(tr->lang, "out of memory", "内存不足");
        rc = 1;
    }
    if (!rc && !(pool = pool_new_for(opt->threads, gpt_row_work(m->cfg)))) {
        fileio_error(tr->lang, "could not start %d threads", "无法启动 %d 个线程", ops_threads_asked(opt->threads));
        rc = 1;
    }
    ts.pool = ds.pool = pool;
    if (!rc) {
        SpecShow g = {m, tr->out, tokens, tr->format == FORMAT_TEXT ? 0 : n_prompt + steps};
        if (tr->format == FORMAT_TEXT) show_upto(&g, n_prompt);
        double start = timer_now();
        int len = spec_generate(tokens, &sp, n_prompt, steps, tr->format == FORMAT_TEXT ? show_round : NULL, &g);
        double seconds = timer_now() - start;
        if (len < 0) {
            rc = 1;
            fileio_error(tr->lang, "the paged pool ran out of blocks: give --num-blocks more, or leave it out",
                         "分页缓存池的块用完了：把 --num-blocks 调大，或者不给它");
        } else {
            show_upto(&g, len);
            trace_run(tr, "speculative");
            size_t need = gpt_decode(NULL, 0, m, tokens, len);
            char *text = malloc(need + 1);
            if (text && tr->format == FORMAT_JSON) {
                gpt_decode(text, need + 1, m, tokens, len);
                trace_textval(tr, "text", text);
            }
            free(text);
            char buf[4096];
            show_figures(tr, &sp, pool_threads(pool), steps, seconds,
                         opt->draft_path ? opt->draft_path : paths_shipped(SPEC_SHIPPED_DRAFT, buf, sizeof buf));
        }
    }
    spec_free(&sp);
    paged_free(&paged);
    sampler_free(&sampler);
    gpt_state_free(&ts);
    gpt_state_free(&ds);
    pool_free(pool);
    free(tokens);
    return rc;
}

int speccmd_generate(const Options *opt, Trace *tr) {
    int rc = speccmd_check_options(opt);
    if (rc) return rc;
    GptModel m, d;
    rc = gptsetup_model(&m, opt, 0, NULL);
    if (rc) return rc;
    int gamma = speccmd_gamma(opt);
    rc = speccmd_draft(&d, &m, opt, gamma);
    if (!rc) {
        rc = run(tr, opt, &m, &d, gamma);
        gpt_free(&d);
    }
    gpt_free(&m);
    return rc;
}

void speccmd_show_figures(Trace *tr, const Spec *sp, int threads, int steps, double seconds, const char *draft_path) {
    show_figures(tr, sp, threads, steps, seconds, draft_path);
}
