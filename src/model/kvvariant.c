// kvvariant — the cache done differently on purpose (lessons 11 and 12): a
// GptState pointed at the kinds of cache and the arithmetic a variant asks
// for, and the validation loss through the cache.
//
// Legend of dimension letters:
//   V vocabulary size      T context (max positions)   C embedding size
//   H heads                D head size = C / H         L blocks
//   N tokens fed at once   G tokens per key group (per-channel key scales)
#include "kvvariant.h"

#include "ops.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const BUG_NAMES[KV_NUM_BUGS] = {"none", "offset", "no-append", "stale",
                                                   "mask", "wrong-layout", "no-scale",
                                                   "no-rollback", "off-by-one"};
const char KV_BUG_LIST[] =
    "offset, no-append, stale, mask, wrong-layout, no-scale, no-rollback, off-by-one";

const char *kvvariant_bug_name(KvBug bug) {
    assert(bug >= 0 && bug < KV_NUM_BUGS);
    return BUG_NAMES[bug];
}

int kvvariant_bug_parse(KvBug *bug, const char *name) {
    for (int i = 1; i < KV_NUM_BUGS; i++)
        if (!strcmp(name, BUG_NAMES[i])) {
            *bug = (KvBug)i;
            return 0;
        }
    return -1;
}

// ----------------------------------------------------------------------------
// A state running a variant

int kvvariant_attach(KvVariantCaches *vc, GptState *s, const GptVariant *v) {
    memset(vc, 0, sizeof *vc);
    if (!v) return 0;
    KvCache *kv = &s->cache.base;   // fp32: the state's own contiguous cache
    if (v->kv_dtype != KV_FP32) {
        int group = v->key_group > 0 ? v->key_group : KV_KEY_GROUP;
        if (kvquant_cache_init(&vc->quant, gpt_cache_shape(s->cfg), v->kv_dtype, group)) {
            kvcache_free(&vc->quant.base);
            return -1;
        }
        kv = &vc->quant.base;
    }
    if (v->bug != KV_BUG_NONE) {
        gpt_state_reset(s);   // the inner cache starts empty
        if (kvfaulty_init(&vc->faulty, kv, v->bug)) {
            kvcache_free(&vc->faulty.base);
            kvcache_free(&vc->quant.base);
            return -1;
        }
        kv = &vc->faulty.base;
    }
    vc->s = s;
    gpt_state_use_cache(s, kv);
    s->lowprec = (LowPrec){.act_dtype = v->act_dtype, .split_sum = v->split_sum};
    return 0;
}

void kvvariant_detach(KvVariantCaches *vc) {
    if (!vc->s) return;
    gpt_state_use_cache(vc->s, NULL);
    vc->s->lowprec = (LowPrec){0};
    kvcache_free(&vc->faulty.base);
    kvcache_free(&vc->quant.base);
    memset(vc, 0, sizeof *vc);
}

// ----------------------------------------------------------------------------
// Validation loss through the cache

int64_t kvvariant_window_count(int64_t start, int64_t end, int T) { return (end - start - 1) / T; }

int64_t kvvariant_window_index(int64_t i, int64_t count, int64_t use) { return use >= count ? i : i * count / use; }

int kvvariant_eval(double *loss, const GptModel *m, GptVariant *v, const int32_t *tokens, Pool *pool,
                   int64_t start, int64_t end, int64_t max_windows) {
    return kvvariant_eval_each(loss, m, v, tokens, pool, start, end, max_windows, NULL, NULL);
}

int kvvariant_eval_each(double *loss, const GptModel *m, GptVariant *v, const int32_t *tokens, Pool *pool,
                        int64_t start, int64_t end, int64_t max_windows, KvEvalProgressFn on_window, void *user) {
    GptConfig g = m->cfg;
    int T = g.T, C = g.C, V = g.V;
    int64_t count = kvvariant_window_count(start, end, T);
    if (count < 1) return -1;
    int64_t use = max_windows > 0 && max_windows < count ? max_windows : count;
    GptState s;
    KvVariantCaches vc;
    if (gpt_state_init(&s, g)) return -1;
    s.pool = pool;
    if (kvvariant_attach(&vc, &s, v)) {
        gpt_state_free(&s);
        return -1;
    }
    float *logits = malloc(sizeof(float) * (size_t)T * (size_t)V);   // (T, V)
    int *in = malloc(sizeof(int) * (size_t)T);                       // (T)
    if (!logits || !in) {
        free(logits);
        free(in);
        kvvariant_detach(&vc);
        gpt_state_free(&s);
        return -1;
    }
    double total = 0;
    for (int64_t i = 0; i < use; i++) {
        const int32_t *x = tokens + start + kvvariant_window_index(i, count, use) * T;
        for (int t = 0; t < T; t++) in[t] = x[t];
        gpt_state_reset(&s);
        gpt_forward(&s, m, in, T, 0);
        // every row's logits: self.output(x), the head on all T rows
        ops_layernorm(s.xn, NULL, NULL, s.x, m->p.lnf_w, m->p.lnf_b, T, C);
        ops_matmul(logits, s.xn, m->p.head_w, m->p.head_b, pool, T, C, V);
        for (int t = 0; t < T; t++) {
            // cross-entropy = logsumexp(logits) - logits[target], as training
            // computes it (crossentropy_forward); the row becomes the probabilities
            float *row = logits + (int64_t)t * V, target = row[x[t + 1]], lse;
            ops_softmax_row_plain(row, &lse, row, V, OPS_DIVIDE);
            total += lse - target;
        }
        if (on_window) on_window(i + 1, use, user);
    }
    *loss = total / ((double)use * T);
    free(logits);
    free(in);
    kvvariant_detach(&vc);
    gpt_state_free(&s);
    return 0;
}
