// spec — speculative decoding on the char GPT: a draft proposes, the target
// verifies in one pass, both caches are cut back to what was kept (spec.h).
//
// Legend as in spec.h: V vocabulary, K drafted tokens per round, T the
// target's context, C embedding size.
#include "spec.h"

#include "gptpaged.h"
#include "ops.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// The draws of a Sampler's generator

static int mt_choose(SpecRandom *r, const float *w, int V) {
    Sampler *s = ((SpecMt *)r)->sampler;
    // np.random.choice(V, p=w / w.sum())
    return sampler_choice(&s->rng, s->cdf, w, V);
}

static int mt_accept(SpecRandom *r, double prob) {
    // np.random.random_sample() < prob
    return mt19937_random_sample(&((SpecMt *)r)->sampler->rng) < prob;
}

void spec_mt_init(SpecMt *r, Sampler *sampler) {
    r->base.choose = mt_choose;
    r->base.accept = mt_accept;
    r->sampler = sampler;
}

// ----------------------------------------------------------------------------
// Setting up

int spec_check_pair(const SpecPair *pr, int gamma, Err err) {
    if (gamma < 1 || gamma > SPEC_GAMMA_MAX)
        return fileio_fail2(err, "--gamma %d is out of range: 1 to %d", "--gamma %d 超出范围：须为 1 到 %d", gamma,
                            SPEC_GAMMA_MAX);
    if (!pr->same_vocab)
        return fileio_fail2(err, "the draft's vocabulary (%d %s) is not the target's (%d): they must be the same",
                            "草稿模型的词表（%d 个%s）与目标模型的（%d 个）不同：须为同一词表", pr->draft_V,
                            fileio_text(err.lang, pr->unit_en, pr->unit_zh), pr->target_V);
    if (pr->draft_T < pr->target_T)
        return fileio_fail2(err, "the draft's context %d is shorter than the target's %d: it must be at least as long",
                            "草稿模型的上下文 %d 短于目标模型的 %d：须至少一样长", pr->draft_T, pr->target_T);
    return 0;
}

int spec_check(const GptModel *target, const GptModel *draft, int gamma, Err err) {
    const GptConfig *t = &target->cfg, *d = &draft->cfg;
    SpecPair pr = {d->V == t->V && memcmp(draft->vocab, target->vocab, sizeof(uint32_t) * (size_t)t->V) == 0,
                   d->V, t->V, d->T, t->T, "characters", "字符"};
    return spec_check_pair(&pr, gamma, err);
}

int spec_init(Spec *sp, SpecModel target, SpecModel draft, int gamma, Sampler *sampler, SpecRandom *rnd) {
    assert(gamma >= 1 && gamma <= SPEC_GAMMA_MAX && sampler->V == target.m->cfg.V);
    assert(draft.m->cfg.V == target.m->cfg.V && draft.m->cfg.T >= target.m->cfg.T);
    // plain caches; the target's may be another kind on a contiguous run (lesson 11's rollback bugs)
    assert((!target.seq || target.s->kv == &target.s->cache.base) && draft.s->kv == &draft.s->cache.base);
    memset(sp, 0, sizeof *sp);
    sp->target = target;
    sp->draft = draft;
    sp->gamma = gamma;
    sp->sampler = sampler;
    sp->rnd = rnd;
    size_t V = (size_t)target.m->cfg.V, K = (size_t)gamma;
    sp->rows = malloc(sizeof(float) * (K + 1) * V);
    sp->p = malloc(sizeof(float) * (K + 1) * V);
    sp->q = malloc(sizeof(float) * K * V);
    sp->resid = malloc(sizeof(float) * V);
    sp->xn = malloc(sizeof(float) * (size_t)target.m->cfg.C);
    if (!sp->rows || !sp->p || !sp->q || !sp->resid || !sp->xn) {
        spec_free(sp);
        return -1;
    }
    return 0;
}

void spec_free(Spec *sp) {
    free(sp->rows);
    free(sp->p);
    free(sp->q);
    free(sp->resid);
    free(sp->xn);
    sp->rows = sp->p = sp->q = sp->resid = sp->xn = NULL;
}

// ----------------------------------------------------------------------------
// A model's pass and its rollback

// gpt_forward of tokens (n) at offset on the model's cache, contiguous or
// paged. Returns the last row's logits, or NULL when the pool is full.
static const float *forward(SpecModel *sm, const int *tokens, int n, int offset) {
    if (sm->seq) return gpt_forward_paged(sm->s, sm->m, sm->seq, tokens, n, offset, NULL);
    return gpt_forward(sm->s, sm->m, tokens, n, offset);
}

void spec_rollback(SpecModel *sm, int len) {
    GptState *s = sm->s;
    assert(len >= 0 && len <= s->len);
    if (sm->seq) kvseq_truncate(sm->seq, len);   // emptied blocks go back to the free list
    else kvcache_truncate(s->kv, len);
    s->len = len;
}

// logits (V) of row `row` of the last pass: gpt_forward's last two lines,
// logits = self.output(x)[row], on that row alone (one row, as a cached
// step computes it: the same bits).
static void row_logits(float *logits, float *xn, const SpecModel *sm, int row) {
    const GptModel *m = sm->m;
    int C = m->cfg.C;
    const float *x = sm->s->x + (int64_t)row * C;
    ops_layernorm(xn, NULL, NULL, x, m->p.lnf_w, m->p.lnf_b, 1, C);
    ops_matmul(logits, xn, m->p.head_w, m->p.head_b, sm->s->pool, 1, C, m->cfg.V);
}

// ----------------------------------------------------------------------------
// One round

// The draft's K tokens into tokens[len .. len+K-1], one cached step each
// (its first step feeds what it has not seen yet); sampling keeps their
// probabilities in sp->q. Returns 0, or -1 when the pool is full.
static int draft_tokens(Spec *sp, int *tokens, int len, int K) {
    SpecModel *d = &sp->draft;
    int V = d->m->cfg.V, greedy = sp->sampler->temperature <= 0.0f;
    for (int i = 0; i < K; i++) {
        int from = i == 0 ? d->s->len : len + i - 1;   // the first position not in its cache
        const float *logits = forward(d, tokens + from, len + i - from, from);
        if (!logits) return -1;
        if (greedy) {
            tokens[len + i] = ops_argmax(logits, V);
        } else {
            float *q = sp->q + (int64_t)i * V;
            sampler_softmax(q, sp->resid, logits, sp->sampler->temperature, sp->sampler->top_k, V);
            tokens[len + i] = sp->rnd->choose(sp->rnd, q, V);
        }
    }
    return 0;
}

// The verifying pass: tokens[t .. len+K-1] at t = the target's cache length,
// and the logits of its last K + 1 rows into sp->rows. Returns the rows
// fed, or -1 when the pool is full.
static int verify(Spec *sp, const int *tokens, int len, int K) {
    SpecModel *t = &sp->target;
    int from = t->s->len, n = len + K - from, V = t->m->cfg.V;
    if (!forward(t, tokens + from, n, from)) return -1;
    for (int j = 0; j <= K; j++) row_logits(sp->rows + (int64_t)j * V, sp->xn, t, n - K - 1 + j);
    return n;
}

// Which drafted tokens stay, and the token after them (tokens[len + a]).
// Returns a, the number kept. target_tok[j] gets the target's token at row j.
static int decide(Spec *sp, int *tokens, int len, int K, int *target_tok) {
    int V = sp->target.m->cfg.V;
    const int *drafted = tokens + len;
    if (sp->sampler->temperature <= 0.0f) {
        // greedy: keep while the draft's token is the target's argmax
        int a = 0;
        for (int j = 0; j <= K; j++) target_tok[j] = ops_argmax(sp->rows + (int64_t)j * V, V);
        while (a < K && drafted[a] == target_tok[a]) a++;
        tokens[len + a] = target_tok[a];
        return a;
    }
    for (int j = 0; j <= K; j++) {
        float *p = sp->p + (int64_t)j * V;
        sampler_softmax(p, sp->resid, sp->rows + (int64_t)j * V, sp->sampler->temperature, sp->sampler->top_k, V);
    }
    int token, a = spec_sample_rule(&token, target_tok, sp->resid, sp->p, sp->q, drafted, K, V, sp->rnd);
    tokens[len + a] = token;
    return a;
}

int spec_sample_rule(int *token, int *target_tok, float *resid, const float *P, const float *Q, const int *drafted,
                     int K, int V, SpecRandom *r) {
    for (int j = 0; j <= K; j++) target_tok[j] = -1;
    for (int j = 0; j < K; j++) {
        const float *p = P + (int64_t)j * V, *q = Q + (int64_t)j * V;
        int x = drafted[j];
        // keep x with probability min(1, p(x) / q(x)) (q(x) > 0: x was drawn from q)
        double keep = (double)p[x] >= (double)q[x] ? 1.0 : (double)p[x] / (double)q[x];
        if (r->accept(r, keep)) {
            target_tok[j] = x;
            continue;
        }
        // rejected: draw from max(0, p - q), normalised
        double sum = 0.0;
        for (int i = 0; i < V; i++) {
            resid[i] = p[i] > q[i] ? p[i] - q[i] : 0.0f;
            sum += resid[i];
        }
        *token = target_tok[j] = r->choose(r, sum > 0.0 ? resid : p, V);
        return j;
    }
    // all K kept: the bonus token from the last row
    *token = target_tok[K] = r->choose(r, P + (int64_t)K * V, V);
    return K;
}

// One round of K drafted tokens at len(tokens) = len. Returns the new
// len(tokens), or -1 when the pool is full.
static int round_run(Spec *sp, int *tokens, int len, int K, SpecRound *info) {
    SpecModel *t = &sp->target, *d = &sp->draft;
    info->len = len;
    info->gamma = K;
    info->target_before = t->s->len;
    info->draft_before = d->s->len;
    if (draft_tokens(sp, tokens, len, K) != 0) return -1;
    info->draft_drafted = d->s->len;
    memcpy(info->drafted, tokens + len, sizeof(int) * (size_t)K);
    info->fed = verify(sp, tokens, len, K);
    if (info->fed < 0) return -1;
    info->target_verify = t->s->len;
    int a = decide(sp, tokens, len, K, info->target_tok);
    info->accepted = a;
    info->token = tokens[len + a];
    info->rows = sp->rows;
    // The rows of the rejected tokens go: both keep len + a positions.
    spec_rollback(t, len + a);
    if (d->s->len > len + a) spec_rollback(d, len + a);
    info->target_after = t->s->len;
    info->draft_after = d->s->len;
    sp->stats.rounds++;
    sp->stats.drafted += K;
    sp->stats.accepted += a;
    sp->stats.rejected += a < K;
    sp->stats.tokens += a + 1;
    return len + a + 1;
}

int spec_generate(int *tokens, Spec *sp, int n_prompt, int steps, SpecRoundFn on_round, void *ctx) {
    int T = sp->target.m->cfg.T, len = n_prompt, end = n_prompt + steps;
    assert(n_prompt >= 1 && steps >= 0);
    memset(&sp->stats, 0, sizeof sp->stats);
    while (len < end && len <= T) {
        // no more tokens than asked for, no position past the context
        int K = sp->gamma;
        if (K > end - len - 1) K = end - len - 1;
        if (K > T - len) K = T - len;
        SpecRound info = {.round = sp->stats.rounds};
        len = round_run(sp, tokens, len, K, &info);
        if (len < 0) return -1;
        if (on_round && on_round(ctx, &info) != 0) return len;
    }
    if (len < end) {
        // Past the context: the chapter's recomputation, the target alone.
        sp->stats.plain_steps = end - len;
        len = gpt_generate(tokens, sp->target.s, sp->target.m, sp->sampler, len, end - len, 1, NULL, NULL);
    }
    return len;
}

// ----------------------------------------------------------------------------
// Leviathan et al.'s analysis

double spec_alpha(const SpecStats *st) {
    int judged = st->accepted + st->rejected;
    return judged > 0 ? (double)st->accepted / judged : 0.0;
}

double spec_expected_tokens(double alpha, int K) {
    if (alpha >= 1.0) return K + 1.0;
    double a = 1.0;   // alpha^(K+1)
    for (int i = 0; i <= K; i++) a *= alpha;
    return (1.0 - a) / (1.0 - alpha);
}

double spec_expected_speedup(double alpha, int K, double c) {
    return spec_expected_tokens(alpha, K) / (K * c + 1.0);
}
