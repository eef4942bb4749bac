// attention — scaled dot-product attention as the article's section 2 writes
// it, keeping every intermediate tensor so that a lesson can show it.
//
// Legend: M query rows fed in this step, N key/value rows attended to,
// d width of X, dk width of Q and K, dv width of V.
//
//   Q = X @ W_Q;  K = X @ W_K;  V = X @ W_V
//   scores = Q @ K.T / scale
//   scores += mask                  (causal: -inf above the diagonal)
//   weights = softmax(scores, dim=-1)
//   output = weights @ V
//
// A step without the cache feeds all N tokens (M = N); a step with the cache
// feeds one token (M = 1), appends its k and v to the cached K and V, and
// needs no mask: the newest token may look at every earlier one.
#ifndef KVDEMO_ATTENTION_H
#define KVDEMO_ATTENTION_H

#include <stdint.h>

typedef struct {
    int M, N, d, dk, dv;   // sizes of the step last computed
    int cap;               // most rows any buffer can hold
    float *Q;              // (M, dk)
    float *K, *V;          // (N, dk), (N, dv); with the cache: K_last + K_cur
    float *Kt;             // (dk, N)  K.T
    float *scores;         // (M, N)   Q @ K.T / scale, before the mask
    float *mask;           // (M, N)   0 or -inf
    float *masked;         // (M, N)   scores + mask
    float *weights;        // (M, N)   softmax(scores + mask)
    float *output;         // (M, dv)  weights @ V
    // What this step cost: rows of K and V computed, multiply-adds of the
    // projections (Q, K, V) and of the attention (Q @ K.T and weights @ V).
    int kv_rows;
    int64_t proj_madds, attn_madds;
} AttnStep;

// Buffers for steps of up to cap tokens; returns 0, or -1 when memory ran out.
int attn_step_init(AttnStep *s, int cap, int d, int dk, int dv);
void attn_step_free(AttnStep *s);

// Without the cache: all n rows of X (n, d) in full. causal 1 adds the
// causal mask, 0 leaves every token free to look at every other (BERT-like).
void attention_full(AttnStep *s, const float *X, int n, const float *W_Q, const float *W_K,
                    const float *W_V, float scale, int causal);

// With the cache: s holds the previous step's K and V (N rows); x (1, d) is
// the new token. Computes only its q, k, v, appends k and v (K_last + K_cur)
// and attends with no mask. s->Q, the k and v rows are the new token's.
void attention_cached(AttnStep *s, const float *x, const float *W_Q, const float *W_K,
                      const float *W_V, float scale);

// The attention part alone, from Q (M, dk), K (N, dk), V (N, dv) already in
// s: scores, mask (causal with the query rows at positions N-M .. N-1, or
// none), weights and output. Used by both steps, and by lesson 9 to rerun
// attention after changing a row of Q, K or V.
void attention_attend(AttnStep *s, int M, int N, float scale, int causal);

#endif
