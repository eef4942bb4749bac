// lesson 9 — 为什么 LLM 推理加速有 KV Cache 而没有 Q Cache？ (the KV Cache
// article, section 9)
//
// The article's argument, in its order:
//
//   1. "K和Q怎么看都很对称": in Q @ K.T, swapping Q and K only transposes the
//      scores. 2. "V的引入破坏了这一对称性": once the weights multiply V, the
//      swap changes the output. 3. Row by row, with the causal mask, the
//      output at position t is
//
//          output_t = sum_{j <= t} softmax_j(q_t · k_j / scale) v_j
//
//      It reads q_t alone, but every k_j and v_j up to t: next step q_t is
//      never needed again, while every k and v is. So K and V are cached, Q
//      is not. 4. Without the mask the sum runs over all j, future ones
//      included — which autoregressive decoding does not have yet.
//
// The claim holds in each layer on its own: every layer has its Q, K, V.
// The lesson shows it on 天气真: the new token 真's output, then the same
// with the old rows of Q changed (it does not move), with an old row of K
// changed and with an old row of V changed (it does). "Changed" is
// x -> -2x + 1, a change nobody could miss.
#include "attention.h"
#include "lessons.h"
#include "toy.h"

#include <stdio.h>
#include <string.h>

enum { TOKENS = 3 };

// ----------------------------------------------------------------------------
// 1 and 2: Q and K are symmetric until V enters

// Shows that K @ Q.T is (Q @ K.T).T, and that the swap moves the output.
static void show_symmetry(Trace *tr, const ToyData *d, AttnStep *orig, AttnStep *s) {
    char code[128];
    trace_heading(tr, "Q and K look symmetric, until V enters", "Q 和 K 看上去对称，直到 V 加进来");
    trace_run(tr, "symmetry");
    attention_full(orig, d->X, TOKENS, d->W_Q, d->W_K, d->W_V, d->scale, 0);
    // Swap: the old K in the place of Q and the old Q in the place of K.
    memcpy(s->Q, orig->K, sizeof(float) * TOKENS * d->dk);
    memcpy(s->K, orig->Q, sizeof(float) * TOKENS * d->dk);
    memcpy(s->V, orig->V, sizeof(float) * TOKENS * d->dv);
    attention_attend(s, TOKENS, TOKENS, d->scale, 0);
    float scores_t[TOKENS * TOKENS];   // (Q @ K.T / scale).T
    for (int i = 0; i < TOKENS; i++)
        for (int j = 0; j < TOKENS; j++) scores_t[j * TOKENS + i] = orig->scores[i * TOKENS + j];
    Tensor scores = tensor_view2(orig->scores, TOKENS, TOKENS), swapped = tensor_view2(s->scores, TOKENS, TOKENS);
    Tensor transposed = tensor_view2(scores_t, TOKENS, TOKENS);
    trace_tensor(tr, TRACE_SUMMARY, "scores", toy_caption(d, "scores = Q @ K.T / %s", code, sizeof code), &scores,
                 d->rows, HEAT_SCORES);
    trace_tensor(tr, TRACE_SUMMARY, "scores_swapped",
                 toy_caption(d, "scores_swapped = K @ Q.T / %s   # Q and K swapped", code, sizeof code), &swapped,
                 d->rows, HEAT_SCORES);
    trace_compare(tr, "scores_swapped", "scores.T", &transposed, "scores_swapped", &swapped);
    trace_say(tr, "Swapping Q and K only transposes the scores: up to here they play the same part.\n",
              "把 Q 和 K 对调，scores 只是转置了一下：到这一步为止，两者的地位一样。\n");
    Tensor out = tensor_view2(orig->output, TOKENS, d->dv), out_swapped = tensor_view2(s->output, TOKENS, d->dv);
    trace_tensor(tr, TRACE_SUMMARY, "output", "output = softmax(scores) @ V", &out, d->rows, HEAT_NONE);
    trace_tensor(tr, TRACE_SUMMARY, "output_swapped", "output_swapped = softmax(scores_swapped) @ V", &out_swapped,
                 d->rows, HEAT_NONE);
    trace_compare(tr, "output_swapped", "output", &out, "output_swapped", &out_swapped);
    trace_say(tr,
              "Once the weights multiply V the swap changes the output: V breaks the symmetry.\n"
              "Row t of the weights is q_t against every k; row t of the output is those weights\n"
              "times every v. So q_t is read by row t alone; k_j and v_j by every row from j on with the\n"
              "causal mask, by every row without it.\n",
              "权重一乘上 V，对调就改变了输出：V 的引入破坏了这种对称。\n"
              "权重的第 t 行是 q_t 和所有 k 算出来的；输出的第 t 行是这些权重乘上所有 v。\n"
              "所以 q_t 只在第 t 行用到；有因果掩码时 k_j、v_j 从第 j 行起每一行都要用，没有掩码时每一行都要用。\n");
    trace_run(tr, NULL);
    trace_pause(tr);
}

// ----------------------------------------------------------------------------
// 3 and 4: change old rows of Q, K or V, and watch the new token's output

static void change_row(float *m, int row, int width) {
    for (int j = 0; j < width; j++) m[row * width + j] = m[row * width + j] * -2.0f + 1.0f;
}

// What each case changes: the old rows of Q (all but the new token's), or
// row 0 of K or of V.
typedef enum { CHANGE_Q, CHANGE_K, CHANGE_V } Change;

// Recomputes the attention from Q, K, V of orig with the change applied in s.
static void rerun(AttnStep *s, const AttnStep *orig, const ToyData *d, int causal, Change what) {
    memcpy(s->Q, orig->Q, sizeof(float) * TOKENS * d->dk);
    memcpy(s->K, orig->K, sizeof(float) * TOKENS * d->dk);
    memcpy(s->V, orig->V, sizeof(float) * TOKENS * d->dv);
    if (what == CHANGE_Q)
        for (int r = 0; r < TOKENS - 1; r++) change_row(s->Q, r, d->dk);
    if (what == CHANGE_K) change_row(s->K, 0, d->dk);
    if (what == CHANGE_V) change_row(s->V, 0, d->dv);
    attention_attend(s, TOKENS, TOKENS, d->scale, causal);
}

static void run(Trace *tr, const ToyData *d, AttnStep *orig, AttnStep *s, int causal) {
    char code[128], scale[32];
    trace_run(tr, causal ? "causal" : "no-mask");
    attention_full(orig, d->X, TOKENS, d->W_Q, d->W_K, d->W_V, d->scale, causal);
    int t = TOKENS - 1;
    Tensor Q = tensor_view2(orig->Q, TOKENS, d->dk), K = tensor_view2(orig->K, TOKENS, d->dk);
    Tensor V = tensor_view2(orig->V, TOKENS, d->dv), W = tensor_view2(orig->weights, TOKENS, TOKENS);
    Tensor out = tensor_view2(orig->output, TOKENS, d->dv);
    Tensor out_t = tensor_view2(orig->output + t * d->dv, 1, d->dv);
    trace_tensor(tr, TRACE_FULL, "Q", "Q = torch.matmul(X, W_Q)", &Q, d->rows, HEAT_NONE);
    trace_tensor(tr, TRACE_FULL, "K", "K = torch.matmul(X, W_K)", &K, d->rows, HEAT_NONE);
    trace_tensor(tr, TRACE_FULL, "V", "V = torch.matmul(X, W_V)", &V, d->rows, HEAT_NONE);
    toy_caption(d, causal ? "S = softmax(Q @ K.T / %s + mask)" : "S = softmax(Q @ K.T / %s)", code, sizeof code);
    trace_tensor(tr, TRACE_FULL, "weights", code, &W, d->rows, HEAT_PROBS);
    trace_tensor(tr, TRACE_SUMMARY, "output", "output = S @ V", &out, d->rows, HEAT_NONE);
    toy_scale(d, scale, sizeof scale);
    if (causal)
        trace_sayf(tr,
                   "The output of %s (row %d) reads row %d of Q and rows 0..%d of K and V:\n"
                   "  output_%d = sum_{j <= %d} softmax_j(q_%d . k_j / %s) v_j\n",
                   "“%s”的输出（第 %d 行）只用到 Q 的第 %d 行，以及 K、V 的第 0..%d 行：\n"
                   "  output_%d = sum_{j <= %d} softmax_j(q_%d . k_j / %s) v_j\n",
                   d->tokens[t], t, t, t, t, t, t, scale);
    else
        trace_sayf(tr,
                   "The output of %s (row %d) reads row %d of Q and every row of K and V:\n"
                   "  output_%d = sum_j softmax_j(q_%d . k_j / %s) v_j\n",
                   "“%s”的输出（第 %d 行）只用到 Q 的第 %d 行，以及 K、V 的每一行：\n"
                   "  output_%d = sum_j softmax_j(q_%d . k_j / %s) v_j\n",
                   d->tokens[t], t, t, t, t, scale);

    static const struct {
        Change what;
        const char *name, *changed, *code, *en, *zh, *output;   // output: the line run after the change
    } cases[] = {
        {CHANGE_Q, "output_old_q_changed", "Q_changed", "Q[:2] = Q[:2] * -2 + 1",
         "Old rows of Q (天, 气) changed, x -> -2x + 1:", "把 Q 的旧行（天、气）改成 -2x + 1：",
         "output = softmax(Q_changed @ K.T / %s%s) @ V"},
        {CHANGE_K, "output_old_k_changed", "K_changed", "K[0] = K[0] * -2 + 1", "Row 0 of K (天) changed, x -> -2x + 1:",
         "把 K 的第 0 行（天）改成 -2x + 1：", "output = softmax(Q @ K_changed.T / %s%s) @ V"},
        {CHANGE_V, "output_old_v_changed", "V_changed", "V[0] = V[0] * -2 + 1", "Row 0 of V (天) changed, x -> -2x + 1:",
         "把 V 的第 0 行（天）改成 -2x + 1：", "output = S @ V_changed"},
    };
    for (int i = 0; i < 3; i++) {
        rerun(s, orig, d, causal, cases[i].what);
        float *m = cases[i].what == CHANGE_Q ? s->Q : cases[i].what == CHANGE_K ? s->K : s->V;
        int width = cases[i].what == CHANGE_V ? d->dv : d->dk;
        Tensor changed_m = tensor_view2(m, TOKENS, width);
        Tensor changed = tensor_view2(s->output, TOKENS, d->dv);
        Tensor changed_t = tensor_view2(s->output + t * d->dv, 1, d->dv);
        trace_say(tr, cases[i].en, cases[i].zh);
        trace_tensor(tr, TRACE_SUMMARY, cases[i].changed, cases[i].code, &changed_m, d->rows, HEAT_NONE);
        // S is recomputed from the changed Q or K; a changed V leaves it as it
        // was (its line has no place for the scale and mask given)
        char line[128];
        snprintf(line, sizeof line, cases[i].output, scale, causal ? " + mask" : "");
        trace_tensor(tr, TRACE_SUMMARY, cases[i].name, line, &changed, d->rows, HEAT_NONE);
        trace_compare(tr, cases[i].name, trace_text(tr, "output of the new token", "新 token 的 output"), &out_t,
                      trace_text(tr, "after the change", "改动之后"), &changed_t);
        trace_say(tr, "", "");
    }
    trace_pause(tr);
}

int lesson9_run(const Options *opt, Trace *tr) {
    ToyData d;
    AttnStep steps[2], *orig = &steps[0], *s = &steps[1];   // as computed; rerun after a change
    if (toy_begin(&d, steps, 2, TOKENS, opt, tr->lesson, TOKENS)) return 1;
    lessons_heading(tr);
    toy_show_scale(tr, &d);
    trace_say(tr,
              "Each step of decoding uses only the newest token's q, and never again; it uses every\n"
              "k and v so far, and again at the next step. This holds in each layer on its own.\n",
              "解码时每一步只用到最新 token 的 q，用完就不再需要；而之前所有的 k、v 这一步要用，\n"
              "下一步还要再用。每一层都是如此。\n");
    show_symmetry(tr, &d, orig, s);

    trace_heading(tr, "With the causal mask", "有因果掩码");
    run(tr, &d, orig, s, 1);
    trace_say(tr,
              "Old queries never reach the new token's output: there is nothing to gain from caching Q.\n"
              "Old keys and values do, at every later step: they are worth caching.\n",
              "旧的 q 完全影响不到新 token 的输出，缓存 Q 没有用处；\n"
              "旧的 k、v 之后每一步都要用到，值得缓存。\n");

    trace_heading(tr, "Without the causal mask", "没有因果掩码");
    run(tr, &d, orig, s, 0);
    trace_say(tr,
              "Without the mask the new token's output still ignores old queries, but every row except\n"
              "the last now has weight on later tokens (see S above): position t would need the\n"
              "future k and v, which autoregressive decoding does not have yet.\n",
              "没有因果掩码时，新 token 的输出依然与旧的 q 无关；但除了最后一行，每一行的权重都落到了\n"
              "后面的 token 上（见上面的 S）：算位置 t 要用到后面的 k、v，而自回归推理时还没有它们。\n");
    toy_precision_note(tr, 1);
    toy_end(&d, steps, 2);
    return 0;
}
