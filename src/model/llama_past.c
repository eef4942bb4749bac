// llama_past — the LLaMA-style model past its context (llama_past.h): the
// chapter's reset, recomputation of a window, and the rolling caches of
// kvcache_window.c, one token a step.
//
// Legend (llama.h): V vocabulary, T max_seq_len, W positions held.
#include "llama_past.h"

#include "ops.h"
#include "rng.h"
#include "timer.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>

// -log softmax(logits (V))[target], in double.
static double nll(const float *logits, int V, int target) {
    double max = logits[0], sum = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > max) max = logits[v];
    for (int v = 0; v < V; v++) sum += exp((double)logits[v] - max);
    return log(sum) + max - logits[target];
}

// logits of tokens[i] given what `way` keeps of tokens[0 .. i]; *pos is
// where the next token goes in the state's own cache (RESET).
static void past_step(float *logits, LlamaState *s, const LlamaModel *m, const int *tokens, int i, LlamaPast way,
                      int W, int *pos) {
    if (way == LLAMA_PAST_CACHE) {
        llama_forward(logits, s, m, tokens + i, i, 1, 1, 1);   // position i, however far
    } else if (way == LLAMA_PAST_RECOMPUTE) {
        int from = i + 1 > W ? i + 1 - W : 0;                  // tokens[-W:], from position 0
        llama_forward(logits, s, m, tokens + from, 0, 1, i + 1 - from, i + 1 - from);
    } else if (*pos < W) {
        llama_forward(logits, s, m, tokens + i, *pos, 1, 1, 1);
        (*pos)++;
    } else {
        // the cache is full: start again from the last W / 2 tokens
        int keep = W / 2;
        llama_state_reset(s);
        llama_forward(logits, s, m, tokens + i + 1 - keep, 0, 1, keep, keep);
        *pos = keep;
    }
}

void llama_past_run(double *losses, double *seconds, float *logits, LlamaState *s, const LlamaModel *m,
                    const int *tokens, int n, LlamaPast way, int W, int every) {
    assert(W >= 2 && every >= 1 && (way == LLAMA_PAST_CACHE ? s->kv != NULL : W <= m->cfg.max_seq_len));
    if (s->kv) kvcache_reset(s->kv);
    llama_state_reset(s);
    int pos = 0, V = m->cfg.vocab_size;
    for (int i = 0; i + 1 < n; i++) {
        if (way == LLAMA_PAST_RECOMPUTE && i % every != 0) {
            if (seconds) seconds[i] = 0.0;
            if (losses) losses[i] = NAN;
            continue;
        }
        double t0 = timer_now();
        past_step(logits, s, m, tokens, i, way, W, &pos);
        if (seconds) seconds[i] = timer_now() - t0;
        if (losses) losses[i] = nll(logits, V, tokens[i + 1]);
    }
}

int llama_past_generate(int *tokens, LlamaState *s, const LlamaModel *m, int n_prompt, int steps,
                        float temperature, float top_p, uint64_t seed) {
    assert(s->kv && n_prompt >= 1 && steps >= 0);
    int V = m->cfg.vocab_size;
    float *buf = malloc(sizeof(float) * 3 * (size_t)V);
    int *order = malloc(sizeof(int) * (size_t)V);
    if (!buf || !order) {
        free(buf), free(order);
        return -1;
    }
    float *logits = buf, *probs = buf + V, *sorted = buf + 2 * V;
    uint64_t rng = seed;
    kvcache_reset(s->kv);
    llama_state_reset(s);
    for (int i = 0; i + 1 < n_prompt + steps; i++) {
        llama_forward(logits, s, m, tokens + i, i, 1, 1, 1);
        if (i + 1 < n_prompt) continue;   // the prompt's next token is given
        if (temperature > 0.0f) {
            // probs = torch.softmax(logits / temperature, dim=-1); sample_top_p(probs, top_p)
            for (int v = 0; v < V; v++) probs[v] = logits[v] / temperature;
            ops_softmax_rows(probs, probs, 1, V, OPS_DIVIDE);
            float u = (float)(rng_next(&rng) >> 40) / 16777216.0f;   // as llama_generate draws
            tokens[i + 1] = llama_sample_top_p(sorted, order, probs, top_p, u, V);
        } else {
            tokens[i + 1] = ops_argmax(logits, V);
        }
    }
    free(buf), free(order);
    return 0;
}
