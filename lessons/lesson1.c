// lesson 1 — 介绍一下 KV Cache 是啥？ (seed 000, section 1)
//
// "kv cache 只出现在 transformer 结构的自回归的 decoder 中，像 bert 就没有
// kv cache." Why: with the causal mask, a token's output depends only on the
// tokens before it, so adding a token leaves every earlier row unchanged and
// whatever was computed for them can be kept. Without the mask (BERT-like)
// every token looks at every other: the new token changes every earlier row
// and nothing computed before could be reused.
//
// The lesson runs step 1 (天气) and step 2 (天气真) twice: with the causal
// mask ("causal") and without it ("no-mask"), and compares step 2's first
// two output rows with step 1's.
#include "attention.h"
#include "lessons.h"
#include "toy.h"

#include <stdio.h>

enum { STEP1_TOKENS = 2, STEP2_TOKENS = 3 };

static void show_step(Trace *tr, const ToyData *d, const AttnStep *s, int step, int causal) {
    int n = s->M;
    char in[256];
    trace_step(tr, step);
    trace_sayf(tr, "Step %d: \"%s\".", "第%d步：“%s”。", step, toy_tokens(d, 0, n, in, sizeof in));
    Tensor mask = tensor_view2(s->mask, n, n), weights = tensor_view2(s->weights, n, n);
    Tensor out = tensor_view2(s->output, n, d->dv);
    if (causal) trace_tensor(tr, TRACE_FULL, "mask", "torch.triu(full(-inf), diagonal=1)", &mask, d->rows, 0);
    trace_tensor(tr, TRACE_FULL, "weights", "F.softmax(Q @ K.T / 2 + mask, dim=-1)", &weights, d->rows, HEAT_PROBS);
    trace_tensor(tr, TRACE_SUMMARY, "output", "output = torch.matmul(weights, V)", &out, d->rows, 0);
    trace_pause(tr);
}

// Runs both steps with or without the mask and compares the old rows.
static int run(Trace *tr, const ToyData *d, AttnStep *s1, AttnStep *s2, int causal) {
    trace_run(tr, causal ? "causal" : "no-mask");
    attention_full(s1, d->X, STEP1_TOKENS, d->W_Q, d->W_K, d->W_V, d->scale, causal);
    attention_full(s2, d->X, STEP2_TOKENS, d->W_Q, d->W_K, d->W_V, d->scale, causal);
    show_step(tr, d, s1, 1, causal);
    show_step(tr, d, s2, 2, causal);
    trace_step(tr, 0);
    Tensor old1 = tensor_view2(s1->output, STEP1_TOKENS, d->dv);
    Tensor old2 = tensor_view2(s2->output, STEP1_TOKENS, d->dv);
    trace_say(tr, "The rows of 天 and 气 in step 2 against step 1:", "第二步中“天”“气”两行与第一步对比：");
    return trace_compare(tr, "old_rows", "step 1 output", &old1, "step 2 output[:2]", &old2);
}

int lesson1_run(const Options *opt, Trace *tr) {
    if (opt->runs != RUN_BOTH)
        fprintf(stderr, "kvdemo: lesson 1 compares the causal mask with none; --cache/--no-cache ignored\n");
    ToyData d;
    AttnStep steps[2], *s1 = &steps[0], *s2 = &steps[1];   // step 1 and step 2
    if (toy_begin(&d, steps, 2, STEP2_TOKENS, opt, tr->lesson, STEP2_TOKENS)) return 1;
    trace_heading(tr, "Lesson 1 — where a KV cache can exist (seed 000, section 1)",
                  "第 1 课 —— KV Cache 是啥：只出现在自回归的 decoder 中（000 第一节）");
    trace_say(tr,
              "A decoder masks the future: each token attends to itself and the tokens before it.\n"
              "An encoder such as BERT does not. Watch what adding one token does to the earlier rows.\n",
              "decoder 用因果掩码遮住未来：每个 token 只看自己和之前的 token；\n"
              "BERT 这样的 encoder 没有掩码。看看新增一个 token 对之前各行有什么影响。\n");

    trace_heading(tr, "With the causal mask (decoder)", "有因果掩码（decoder）");
    int same_causal = run(tr, &d, s1, s2, 1);
    trace_say(tr,
              same_causal ? "Identical: step 1's K, V and outputs stay valid, so they can be cached.\n"
                          : "They differ: this is a bug in kvdemo.\n",
              same_causal ? "完全相同：第一步的 K、V 与输出依然有效，可以缓存。\n" : "不同：这是 kvdemo 的缺陷。\n");

    trace_heading(tr, "Without a mask (BERT-like encoder)", "无掩码（类似 BERT 的 encoder）");
    int same_free = run(tr, &d, s1, s2, 0);
    trace_say(tr,
              same_free ? "Identical by chance: these numbers cannot show the effect.\n"
                        : "Every earlier row changed: 真 is now seen by 天 and 气, so nothing computed\n"
                          "in step 1 can be reused. There is no KV cache in BERT.\n",
              same_free ? "碰巧相同：这组数字无法展示差别。\n"
                        : "之前的每一行都变了：“天”“气”现在也能看到“真”，第一步的计算无法复用。\n"
                          "所以 BERT 没有 KV Cache。\n");
    toy_end(&d, steps, 2);
    return 0;
}
