// gptpaged — the char GPT on the paged KV cache: a forward through a block
// table, and parallel sampling that shares the prompt's blocks.
//
// Legend as in gpt.h: V vocabulary, T context, N samples.
#include "gptpaged.h"

#include <assert.h>

const float *gpt_forward_paged(GptState *s, const GptModel *m, KvSeq *seq, const int *tokens, int n, int offset,
                               int *need) {
    assert(offset <= seq->len && offset + n <= m->cfg.T);
    kvseq_truncate(seq, offset);
    if (kvseq_append(seq, tokens, n, need) != 0) return NULL;
    // The state's len follows the sequence's; the contiguous cache is not
    // touched while the paged one is in use.
    s->len = offset;
    kvpaged_bind(&s->paged, seq, offset);
    KvCache *was = s->kv;
    s->kv = &s->paged.base;
    const float *logits = gpt_forward(s, m, tokens, n, offset);
    s->kv = was;
    return logits;
}

int gpt_sample_paged(int *tokens, int stride, GptState *s, const GptModel *m, KvSeq *seqs, Sampler *samplers,
                     int N, int n_prompt, int steps, int *fail_sample, int *fail_step, int *need) {
    int T = m->cfg.T;
    assert(N >= 1 && n_prompt >= 1 && n_prompt + steps <= stride);
    for (int step = 0; step < steps; step++) {
        int len = n_prompt + step;   // len(tokens) of every sample
        for (int i = 0; i < N; i++) {
            int *tok = tokens + (size_t)i * stride;
            const float *logits;
            if (step == 0 && i > 0) {
                // The prompt was computed once, for sample 0: share its blocks.
                kvseq_truncate(&seqs[i], 0);
                kvseq_fork(&seqs[i], &seqs[0]);
                logits = s->logits;
            } else if (step > 0 && len <= T) {
                // feature = tokens[-1:]; offset = len(tokens) - 1
                logits = gpt_forward_paged(s, m, &seqs[i], tok + len - 1, 1, len - 1, need);
            } else {
                // feature = tokens[-T:]; offset = 0: the cache is rebuilt
                int n = len < T ? len : T;
                logits = gpt_forward_paged(s, m, &seqs[i], tok + len - n, n, 0, need);
            }
            if (!logits) {
                *fail_sample = i;
                *fail_step = step;
                return -1;
            }
            tok[len] = sampler_sample(&samplers[i], logits);
        }
    }
    return 0;
}
