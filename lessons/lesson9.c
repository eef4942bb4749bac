// lesson 9 — 为什么 LLM 推理加速有 KV Cache 而没有 Q Cache？ (seed 000, section 9)
//
// The article's argument: write attention row by row. With the causal mask
// the output at position t is
//
//     output_t = sum_{j <= t} softmax_j(q_t · k_j / sqrt(d)) v_j
//
// It reads q_t alone, but every k_j and v_j up to t. Next step, q_t is never
// needed again, while every k and v is needed again: so K and V are cached,
// Q is not. Without the mask the sum runs over all j, future ones included —
// which autoregressive decoding does not have yet.
//
// The lesson shows it on 天气真: the new token 真's output, then the same with
// the old rows of Q changed (it does not move), with an old row of K changed
// and with an old row of V changed (it does). "Changed" is x -> -2x + 1.
#include "attention.h"
#include "lessons.h"
#include "toy.h"

#include <stdio.h>
#include <string.h>

enum { TOKENS = 3 };

static void change_row(float *m, int row, int width) {
    for (int j = 0; j < width; j++) m[row * width + j] = m[row * width + j] * -2.0f + 1.0f;
}

// Recomputes the attention from (possibly changed) Q, K, V held in s.
static void rerun(AttnStep *s, const AttnStep *orig, const ToyData *d, int causal, const char *what) {
    memcpy(s->Q, orig->Q, sizeof(float) * TOKENS * d->dk);
    memcpy(s->K, orig->K, sizeof(float) * TOKENS * d->dk);
    memcpy(s->V, orig->V, sizeof(float) * TOKENS * d->dv);
    if (!strcmp(what, "q")) {
        for (int r = 0; r < TOKENS - 1; r++) change_row(s->Q, r, d->dk);
    } else if (!strcmp(what, "k")) {
        change_row(s->K, 0, d->dk);
    } else if (!strcmp(what, "v")) {
        change_row(s->V, 0, d->dv);
    }
    attention_attend(s, TOKENS, TOKENS, d->scale, causal);
}

static void run(Trace *tr, const ToyData *d, AttnStep *orig, AttnStep *s, int causal) {
    trace_run(tr, causal ? "causal" : "no-mask");
    attention_full(orig, d->X, TOKENS, d->W_Q, d->W_K, d->W_V, d->scale, causal);
    int t = TOKENS - 1;
    Tensor Q = tensor_view2(orig->Q, TOKENS, d->dk), K = tensor_view2(orig->K, TOKENS, d->dk);
    Tensor V = tensor_view2(orig->V, TOKENS, d->dv), W = tensor_view2(orig->weights, TOKENS, TOKENS);
    Tensor out = tensor_view2(orig->output, TOKENS, d->dv);
    Tensor out_t = tensor_view2(orig->output + t * d->dv, 1, d->dv);
    trace_tensor(tr, TRACE_FULL, "Q", "Q = torch.matmul(X, W_Q)", &Q, d->rows, 0);
    trace_tensor(tr, TRACE_FULL, "K", "K = torch.matmul(X, W_K)", &K, d->rows, 0);
    trace_tensor(tr, TRACE_FULL, "V", "V = torch.matmul(X, W_V)", &V, d->rows, 0);
    trace_tensor(tr, TRACE_FULL, "weights", "S = softmax(Q @ K.T / 2 + mask)", &W, d->rows, HEAT_PROBS);
    trace_tensor(tr, TRACE_SUMMARY, "output", "output = S @ V", &out, d->rows, 0);
    trace_sayf(tr,
               "The output of %s (row %d) reads row %d of Q and rows 0..%d of K and V:\n"
               "  output_%d = sum_j softmax_j(q_%d . k_j / 2) v_j\n",
               "“%s”的输出（第 %d 行）只用到 Q 的第 %d 行，以及 K、V 的第 0..%d 行：\n"
               "  output_%d = sum_j softmax_j(q_%d . k_j / 2) v_j\n",
               d->tokens[t], t, t, t, t, t);

    static const struct {
        const char *what, *name, *en, *zh;
    } cases[] = {
        {"q", "output_old_q_changed", "Old rows of Q (天, 气) changed:", "改变 Q 的旧行（天、气）："},
        {"k", "output_old_k_changed", "Row 0 of K (天) changed:", "改变 K 的第 0 行（天）："},
        {"v", "output_old_v_changed", "Row 0 of V (天) changed:", "改变 V 的第 0 行（天）："},
    };
    for (int i = 0; i < 3; i++) {
        rerun(s, orig, d, causal, cases[i].what);
        Tensor changed = tensor_view2(s->output, TOKENS, d->dv);
        Tensor changed_t = tensor_view2(s->output + t * d->dv, 1, d->dv);
        trace_say(tr, cases[i].en, cases[i].zh);
        trace_tensor(tr, TRACE_SUMMARY, cases[i].name, NULL, &changed, d->rows, 0);
        trace_compare(tr, cases[i].name, "output of the new token", &out_t, "after the change", &changed_t);
        trace_say(tr, "", "");
    }
    trace_pause(tr);
}

int lesson9_run(const Options *opt, Trace *tr) {
    if (opt->runs != RUN_BOTH)
        fprintf(stderr, "kvdemo: lesson 9 compares the causal mask with none; --cache/--no-cache ignored\n");
    ToyData d;
    AttnStep steps[2], *orig = &steps[0], *s = &steps[1];   // as computed; rerun after a change
    if (toy_begin(&d, steps, 2, TOKENS, opt, tr->lesson, TOKENS)) return 1;
    trace_heading(tr, "Lesson 9 — why a KV cache and no Q cache (seed 000, section 9)",
                  "第 9 课 —— 为什么有 KV Cache 而没有 Q Cache（000 第九节）");
    trace_say(tr,
              "Q and K look symmetric in Q @ K.T, but V breaks the symmetry: the new token's\n"
              "output uses its own q and every k and v so far.\n",
              "Q @ K.T 中 Q 和 K 看上去对称，但 V 的引入破坏了对称性：\n新 token 的输出只用到它自己的 q，却用到之前所有的 k 和 v。\n");
    trace_heading(tr, "With the causal mask", "有因果掩码");
    run(tr, &d, orig, s, 1);
    trace_say(tr,
              "Old queries never reach the new token's output: there is nothing to gain from caching Q.\n"
              "Old keys and values do, at every later step: they are worth caching.\n",
              "旧的 q 对新 token 的输出毫无影响，缓存 Q 没有意义；\n旧的 k、v 在之后每一步都要用到，值得缓存。\n");
    trace_heading(tr, "Without the causal mask", "无因果掩码");
    run(tr, &d, orig, s, 0);
    trace_say(tr,
              "Without the mask the new token's output still ignores old queries, but every row's\n"
              "weights now include later tokens (see the weights above): position t would need\n"
              "the future k and v, which autoregressive decoding does not have yet.\n",
              "没有因果掩码时，新 token 的输出依然与旧的 q 无关；但每一行的权重都包含之后的 token（见上面的 weights），\n"
              "计算位置 t 需要未来的 k、v，而自回归推理时还得不到它们。\n");
    toy_end(&d, steps, 2);
    return 0;
}
