// kvvariant — the cache done differently on purpose (lessons 11 and 12): the
// hooks gpt_forward consults when a GptState has a variant, and the
// validation loss through the cache.
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
                                                   "mask", "wrong-layout", "no-scale"};
const char KV_BUG_LIST[] = "offset, no-append, stale, mask, wrong-layout, no-scale";

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
// Lesson 11: where a cached step goes wrong

int kvvariant_position(const GptVariant *v, int offset, int i) {
    // offset: position_embedding(range(n)) where the chapter adds the offset
    if (v->bug == KV_BUG_OFFSET && offset > 0) return i;
    return offset + i;
}

int kvvariant_slot(GptVariant *v, int offset, int n) {
    if (offset == 0) v->prefill_len = n;
    // no-append: the new key goes into a scratch slot just past what the
    // first pass cached, and is overwritten by the next step's; the cache
    // never grows, so each step sees the prompt and itself only.
    if (v->bug == KV_BUG_NO_APPEND && offset > 0) return v->prefill_len;
    return offset;
}

int kvvariant_keeps_stale(const GptVariant *v) {
    return v->bug == KV_BUG_STALE;
}

int kvvariant_scores(const GptVariant *v, float *scores, const float *q, const float *key, float scale, int i,
                     int pos, int cached, int D, int T) {
    KvBug bug = cached ? v->bug : KV_BUG_NONE;
    int seen = pos + 1;
    if (bug == KV_BUG_MASK) seen = i + 1;   // torch.triu(mask, diagonal=1) on a (1, len) score row: row 0 keeps column 0
    if (bug == KV_BUG_NO_SCALE) scale = 1;
    if (bug == KV_BUG_WRONG_LAYOUT) {
        // The chapter's key (1, H, D, len) read as if it were (1, H, len, D),
        // numpy's key.reshape(1, H, len, D): element [t][d] is number k = t*D + d
        // of the (D, len) array written so far, its row k / len and column
        // k % len. Only the len = seen columns written are read (the cache
        // holds T; what lies past len is another run's, or nothing).
        for (int t = 0; t < seen; t++) {
            float sum = 0;
            for (int d = 0; d < D; d++) {
                int k = t * D + d;
                sum += q[d] * key[(int64_t)(k / seen) * T + k % seen];
            }
            scores[t] = sum;
        }
    } else {
        ops_vecmat(scores, q, key, D, seen, T);
    }
    for (int j = 0; j < seen; j++) scores[j] *= scale;
    return seen;
}

// ----------------------------------------------------------------------------
// Lesson 12: smaller numbers in the cache and the activations

void kvvariant_store(const GptVariant *v, GptState *s, int l, int slot, int n) {
    int T = s->cfg.T, C = s->cfg.C, H = s->cfg.H, D = C / H;
    float *key = s->cache.key + (int64_t)l * H * D * T;     // (H, D, T)
    float *value = s->cache.value + (int64_t)l * H * T * D; // (H, T, D)
    KvDtype t = v->kv_dtype;
    if (t == KV_FP32) return;
    if (t == KV_BF16 || t == KV_FP16) {
        for (int h = 0; h < H; h++) {
            for (int d = 0; d < D; d++) kvquant_round(key + ((int64_t)h * D + d) * T + slot, n, t);
            kvquant_round(value + ((int64_t)h * T + slot) * D, (int64_t)n * D, t);
        }
        return;
    }
    // int8 / int4. Values: one scale per token and head, over its D numbers.
    for (int h = 0; h < H; h++)
        for (int p = slot; p < slot + n; p++) kvquant_fake_quant(value + ((int64_t)h * T + p) * D, D, 1, t);
    // Keys, as KIVI: one scale per channel, shared by a group of G tokens.
    // A group is quantised when its last token arrives; until then its keys
    // stay in full precision (KIVI's residual).
    int G = v->key_group > 0 ? v->key_group : KV_KEY_GROUP;
    for (int g = slot / G; (g + 1) * G <= slot + n; g++) {   // the groups whose last token is new
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d++) kvquant_fake_quant(key + ((int64_t)h * D + d) * T + g * G, G, 1, t);
    }
}

void kvvariant_settle(const GptVariant *v, float *x, int64_t n) {
    if (v->act_dtype != KV_FP32) kvquant_round(x, n, v->act_dtype);
}

enum { SLICES = KV_SPLIT_SLICES, COLS = 16 };

// out (N) = in (K) @ w (K, N) + b, as a GPU matrix-vector kernel sums it:
// K split into SLICES slices, each summed on its own, the partial sums then
// added pairwise (16 + 16, 8 + 8, ...). The same terms as ops_matmul, in
// another order: the result differs in the last bits.
static void matvec_split(float *out, const float *in, const float *w, const float *b, int K, int N) {
    int per = (K + SLICES - 1) / SLICES;
    for (int j0 = 0; j0 < N; j0 += COLS) {
        int cols = N - j0 < COLS ? N - j0 : COLS;
        float part[SLICES][COLS] = {{0}};
        for (int c = 0; c < SLICES; c++)
            for (int k = c * per; k < (c + 1) * per && k < K; k++)
                for (int j = 0; j < cols; j++) part[c][j] += in[k] * w[(int64_t)k * N + j0 + j];
        for (int half = SLICES / 2; half >= 1; half /= 2)
            for (int c = 0; c < half; c++)
                for (int j = 0; j < cols; j++) part[c][j] += part[c + half][j];
        for (int j = 0; j < cols; j++) out[j0 + j] = part[0][j] + (b ? b[j0 + j] : 0.0f);
    }
}

void kvvariant_linear(const GptVariant *v, float *out, const float *in, const float *w, const float *b, int n,
                      int K, int Nout, int cached) {
    if (v->split_sum && cached && n == 1) matvec_split(out, in, w, b, K, Nout);
    else ops_matmul(out, in, w, b, n, K, Nout);
    kvvariant_settle(v, out, (int64_t)n * Nout);
}

// ----------------------------------------------------------------------------
// Validation loss through the cache

int64_t kvvariant_window_count(int64_t start, int64_t end, int T) { return (end - start - 1) / T; }

int64_t kvvariant_window_index(int64_t i, int64_t count, int64_t use) { return use >= count ? i : i * count / use; }

int kvvariant_eval(double *loss, const GptModel *m, GptVariant *v, const int32_t *tokens, int64_t start,
                   int64_t end, int64_t max_windows) {
    GptConfig g = m->cfg;
    int T = g.T, C = g.C, V = g.V;
    int64_t count = kvvariant_window_count(start, end, T);
    if (count < 1) return -1;
    int64_t use = max_windows > 0 && max_windows < count ? max_windows : count;
    GptState s;
    if (gpt_state_init(&s, g)) return -1;
    s.variant = v;
    float *logits = malloc(sizeof(float) * (size_t)T * (size_t)V);   // (T, V)
    int *in = malloc(sizeof(int) * (size_t)T);                       // (T)
    if (!logits || !in) {
        free(logits);
        free(in);
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
        ops_matmul(logits, s.xn, m->p.head_w, m->p.head_b, T, C, V);
        for (int t = 0; t < T; t++) {
            // cross-entropy = logsumexp(logits) - logits[target], as training
            // computes it (crossentropy_forward); the row becomes the probabilities
            float *row = logits + (int64_t)t * V, target = row[x[t + 1]], lse;
            ops_softmax_row_plain(row, &lse, row, V, OPS_DIVIDE);
            total += lse - target;
        }
    }
    *loss = total / ((double)use * T);
    free(logits);
    free(in);
    gpt_state_free(&s);
    return 0;
}
