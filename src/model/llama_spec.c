// llama_spec — speculative decoding on the LLaMA-style model: a LLaMA
// draft proposes, the target verifies in one pass, both caches are cut back
// to what was kept (llama_spec.h). The rule of sampling is spec.c's.
//
// Legend as in llama_spec.h: V vocabulary, K drafted tokens per round, T
// the target's max_seq_len, C its dim.
#include "llama_spec.h"

#include "ops.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// Setting up

int llama_spec_check(const LlamaModel *target, const LlamaModel *draft, int gamma, Err err) {
    const LlamaConfig *t = &target->cfg, *d = &draft->cfg;
    int same = d->vocab_size == t->vocab_size && !target->bpe && !draft->bpe &&
               memcmp(draft->vocab, target->vocab, sizeof(uint32_t) * (size_t)t->vocab_size) == 0;
    SpecPair pr = {same, d->vocab_size, t->vocab_size, d->max_seq_len, t->max_seq_len, "tokens", " token"};
    return spec_check_pair(&pr, gamma, err);
}

int llama_spec_init(LlamaSpec *sp, LlamaSpecModel target, LlamaSpecModel draft, int gamma, float temperature,
                    float top_p, SpecRandom *rnd) {
    assert(gamma >= 1 && gamma <= SPEC_GAMMA_MAX);
    assert(draft.m->cfg.vocab_size == target.m->cfg.vocab_size && draft.m->cfg.max_seq_len >= target.m->cfg.max_seq_len);
    assert(!target.s->kv && !draft.s->kv);   // the preallocated caches
    memset(sp, 0, sizeof *sp);
    sp->target = target;
    sp->draft = draft;
    sp->gamma = gamma;
    sp->temperature = temperature;
    sp->top_p = top_p;
    sp->rnd = rnd;
    size_t V = (size_t)target.m->cfg.vocab_size, K = (size_t)gamma;
    sp->rows = malloc(sizeof(float) * (K + 1) * V);
    sp->p = malloc(sizeof(float) * (K + 1) * V);
    sp->q = malloc(sizeof(float) * K * V);
    sp->resid = malloc(sizeof(float) * V);
    sp->logits = malloc(sizeof(float) * V);
    sp->sorted = malloc(sizeof(float) * V);
    sp->order = malloc(sizeof(int) * V);
    if (!sp->rows || !sp->p || !sp->q || !sp->resid || !sp->logits || !sp->sorted || !sp->order) {
        llama_spec_free(sp);
        return -1;
    }
    return 0;
}

void llama_spec_free(LlamaSpec *sp) {
    free(sp->rows);
    free(sp->p);
    free(sp->q);
    free(sp->resid);
    free(sp->logits);
    free(sp->sorted);
    free(sp->order);
    sp->rows = sp->p = sp->q = sp->resid = sp->logits = sp->sorted = NULL;
    sp->order = NULL;
}

// ----------------------------------------------------------------------------
// A model's cache and its rollback

int llama_spec_len(const LlamaSpecModel *sm) {
    return kvcache_len(&sm->s->cache.base);
}

void llama_spec_rollback(LlamaSpecModel *sm, int len) {
    assert(len >= 0 && len <= llama_spec_len(sm));
    kvcache_truncate(&sm->s->cache.base, len);
}

// probs (V) = what LLaMA.generate draws from at these logits:
//   probs = torch.softmax(logits / temperature, dim=-1)
//   sample_top_p's probs_sort (masked, renormalised), scattered back by probs_idx
static void row_probs(float *probs, LlamaSpec *sp, const float *logits, int V) {
    float *tmp = sp->resid;
    for (int i = 0; i < V; i++) tmp[i] = logits[i] / sp->temperature;
    ops_softmax_rows(tmp, tmp, 1, V, OPS_DIVIDE);
    llama_sample_top_p(sp->sorted, sp->order, tmp, sp->top_p, 0.0f, V);
    for (int i = 0; i < V; i++) probs[sp->order[i]] = sp->sorted[i];
}

// ----------------------------------------------------------------------------
// One round

// The draft's K tokens into tokens[len .. len+K-1], one cached step each
// (its first step feeds what it has not seen yet); sampling keeps their
// probabilities in sp->q.
static void draft_tokens(LlamaSpec *sp, int *tokens, int len, int K) {
    LlamaSpecModel *d = &sp->draft;
    int V = d->m->cfg.vocab_size;
    for (int i = 0; i < K; i++) {
        int from = i == 0 ? llama_spec_len(d) : len + i - 1;   // the first position not in its cache
        // logits = self.model.forward(tokens[:, from:len+i], from)
        llama_forward(sp->logits, d->s, d->m, tokens + from, from, 1, len + i - from, len + i - from);
        if (sp->temperature <= 0.0f) {
            tokens[len + i] = ops_argmax(sp->logits, V);
        } else {
            float *q = sp->q + (int64_t)i * V;
            row_probs(q, sp, sp->logits, V);
            tokens[len + i] = sp->rnd->choose(sp->rnd, q, V);
        }
    }
}

// The verifying pass: tokens[t .. len+K-1] at t = the target's cache length,
// and the logits of its last K + 1 rows into sp->rows: self.output(h)[row],
// each row alone, as a cached step computes its one row (the same bits).
// Returns the rows fed.
static int verify(LlamaSpec *sp, const int *tokens, int len, int K) {
    LlamaSpecModel *t = &sp->target;
    const LlamaModel *m = t->m;
    int from = llama_spec_len(t), n = len + K - from, V = m->cfg.vocab_size, C = m->cfg.dim;
    llama_forward(sp->logits, t->s, m, tokens + from, from, 1, n, n);
    // t->s->xb (n, C) holds h = self.norm(h) of every row fed
    for (int j = 0; j <= K; j++)
        ops_matmul(sp->rows + (int64_t)j * V, t->s->xb + (int64_t)(n - K - 1 + j) * C, m->p.output, NULL, t->s->pool, 1,
                   C, V);
    return n;
}

// Which drafted tokens stay, and the token after them (tokens[len + a]).
// Returns a, the number kept. target_tok[j] gets the target's token at row j.
static int decide(LlamaSpec *sp, int *tokens, int len, int K, int *target_tok) {
    int V = sp->target.m->cfg.vocab_size;
    const int *drafted = tokens + len;
    if (sp->temperature <= 0.0f) {
        // greedy: keep while the draft's token is the target's argmax
        int a = 0;
        for (int j = 0; j <= K; j++) target_tok[j] = ops_argmax(sp->rows + (int64_t)j * V, V);
        while (a < K && drafted[a] == target_tok[a]) a++;
        tokens[len + a] = target_tok[a];
        return a;
    }
    for (int j = 0; j <= K; j++) row_probs(sp->p + (int64_t)j * V, sp, sp->rows + (int64_t)j * V, V);
    int token, a = spec_sample_rule(&token, target_tok, sp->resid, sp->p, sp->q, drafted, K, V, sp->rnd);
    tokens[len + a] = token;
    return a;
}

// One round of K drafted tokens at len(tokens) = len. Returns the new len(tokens).
static int round_run(LlamaSpec *sp, int *tokens, int len, int K, SpecRound *info) {
    LlamaSpecModel *t = &sp->target, *d = &sp->draft;
    info->len = len;
    info->gamma = K;
    info->target_before = llama_spec_len(t);
    info->draft_before = llama_spec_len(d);
    draft_tokens(sp, tokens, len, K);
    info->draft_drafted = llama_spec_len(d);
    memcpy(info->drafted, tokens + len, sizeof(int) * (size_t)K);
    info->fed = verify(sp, tokens, len, K);
    info->target_verify = llama_spec_len(t);
    int a = decide(sp, tokens, len, K, info->target_tok);
    info->accepted = a;
    info->token = tokens[len + a];
    info->rows = sp->rows;
    // The rows of the rejected tokens go: both keep len + a positions.
    llama_spec_rollback(t, len + a);
    if (llama_spec_len(d) > len + a) llama_spec_rollback(d, len + a);
    info->target_after = llama_spec_len(t);
    info->draft_after = llama_spec_len(d);
    sp->stats.rounds++;
    sp->stats.drafted += K;
    sp->stats.accepted += a;
    sp->stats.rejected += a < K;
    sp->stats.tokens += a + 1;
    return len + a + 1;
}

int llama_spec_generate(int *tokens, LlamaSpec *sp, int n_prompt, int steps, SpecRoundFn on_round, void *ctx) {
    int T = sp->target.m->cfg.max_seq_len, len = n_prompt, end = n_prompt + steps;
    assert(n_prompt >= 1 && steps >= 0);
    // total_len = min(params.max_seq_len, max_gen_len + max_prompt_size), as llama_generate
    if (end > T) end = T;
    memset(&sp->stats, 0, sizeof sp->stats);
    while (len < end) {
        // no more tokens than asked for: the last fed position is end - 2 < T
        int K = sp->gamma;
        if (K > end - len - 1) K = end - len - 1;
        SpecRound info = {.round = sp->stats.rounds};
        len = round_run(sp, tokens, len, K, &info);
        if (on_round && on_round(ctx, &info) != 0) return len;
    }
    return len;
}
