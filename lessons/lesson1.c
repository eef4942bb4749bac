// lesson 1 — 介绍一下 KV Cache 是啥？ (the KV Cache article, section 1)
//
// "kv cache 只出现在 transformer 结构的自回归的 decoder 中，像 bert 就没有
// kv cache." Why: with the causal mask, a token's output depends only on the
// tokens before it, so adding a token leaves every earlier row unchanged and
// whatever was computed for them can be kept.
//
// Without the mask (BERT-like) the earlier rows' *outputs* change when a
// token is added. In one layer that does not touch K and V: K = X @ W_K row
// by row, and X's old rows are the same. But a layer's outputs are the next
// layer's inputs, so from layer 2 up the old rows of K and V change too, and
// nothing computed before can be reused.
//
// The lesson runs step 1 (天气) and step 2 (天气真) through two layers (the
// second with the same weights, to keep the example small), with the causal
// mask ("causal") and without it ("no-mask"), and compares step 2's old rows
// with step 1's: layer 1's output, layer 1's K, layer 2's K and V.
#include "attention.h"
#include "lessons.h"
#include "toy.h"

#include <stdio.h>

enum { STEP1_TOKENS = 2, STEP2_TOKENS = 3 };

// One step through both layers: layer 2 reads layer 1's output as its X.
typedef struct {
    AttnStep *layer1, *layer2;   // layer2 NULL when the data's widths do not chain
} Step;

static void forward(const ToyData *d, const Step *s, int n, int causal) {
    attention_full(s->layer1, d->X, n, d->W_Q, d->W_K, d->W_V, d->scale, causal);
    if (s->layer2) attention_full(s->layer2, s->layer1->output, n, d->W_Q, d->W_K, d->W_V, d->scale, causal);
}

static void show_step(Trace *tr, const ToyData *d, const Step *s, int step, int causal) {
    const AttnStep *a = s->layer1;
    int n = a->M;
    char in[256], code[128];
    trace_step(tr, step);
    trace_sayf(tr, "Step %d: \"%s\".", "第 %d 步：“%s”。", step, toy_tokens(d, 0, n, in, sizeof in));
    Tensor mask = tensor_view2(a->mask, n, n), weights = tensor_view2(a->weights, n, n);
    Tensor K = tensor_view2(a->K, n, d->dk), out = tensor_view2(a->output, n, d->dv);
    trace_tensor(tr, TRACE_FULL, "K", "K = torch.matmul(X, W_K)", &K, d->rows, HEAT_NONE);
    if (causal) {
        trace_tensor(tr, TRACE_FULL, "mask", "mask = torch.triu(torch.full((n, n), float('-inf')), diagonal=1)", &mask,
                     d->rows, HEAT_NONE);
        toy_caption(d, "weights = F.softmax(Q @ K.T / %s + mask, dim=-1)", code, sizeof code);
    } else {
        toy_caption(d, "weights = F.softmax(Q @ K.T / %s, dim=-1)", code, sizeof code);
    }
    trace_tensor(tr, TRACE_FULL, "weights", code, &weights, d->rows, HEAT_PROBS);
    trace_tensor(tr, TRACE_SUMMARY, "output", "output = torch.matmul(weights, V)", &out, d->rows, HEAT_NONE);
    if (s->layer2) {
        Tensor K2 = tensor_view2(s->layer2->K, n, d->dk), V2 = tensor_view2(s->layer2->V, n, d->dv);
        trace_say(tr, "Layer 2 reads layer 1's output as its X:", "第 2 层把第 1 层的 output 当作它的 X：");
        trace_tensor(tr, TRACE_SUMMARY, "K_layer2", "K = torch.matmul(output, W_K)   # layer 2", &K2, d->rows, HEAT_NONE);
        trace_tensor(tr, TRACE_SUMMARY, "V_layer2", "V = torch.matmul(output, W_V)   # layer 2", &V2, d->rows, HEAT_NONE);
    }
    trace_pause(tr);
}

// The first STEP1_TOKENS rows of a (rows, width) buffer.
static Tensor old_rows(float *m, int width) { return tensor_view2(m, STEP1_TOKENS, width); }

// Runs both steps with or without the mask and compares the old rows.
// Returns 1 when layer 2's old K and V rows stayed bit-identical.
static int run(Trace *tr, const ToyData *d, const Step *s1, const Step *s2, int causal) {
    trace_run(tr, causal ? "causal" : "no-mask");
    forward(d, s1, STEP1_TOKENS, causal);
    forward(d, s2, STEP2_TOKENS, causal);
    show_step(tr, d, s1, 1, causal);
    show_step(tr, d, s2, 2, causal);
    trace_step(tr, 0);
    trace_say(tr, "The rows of the old tokens in step 2 against step 1:", "第 2 步中旧 token 的各行与第 1 步对比：");
    Tensor a = old_rows(s1->layer1->output, d->dv), b = old_rows(s2->layer1->output, d->dv);
    trace_compare(tr, "old_rows", trace_text(tr, "step 1 output", "第 1 步的 output"), &a,
                  trace_text(tr, "step 2 output[:2]", "第 2 步的 output[:2]"), &b);
    a = old_rows(s1->layer1->K, d->dk), b = old_rows(s2->layer1->K, d->dk);
    trace_compare(tr, "old_K", trace_text(tr, "step 1 K", "第 1 步的 K"), &a, trace_text(tr, "step 2 K[:2]", "第 2 步的 K[:2]"),
                  &b);
    if (!s1->layer2) return 1;
    a = old_rows(s1->layer2->K, d->dk), b = old_rows(s2->layer2->K, d->dk);
    int same = trace_compare(tr, "old_K_layer2", trace_text(tr, "step 1 K (layer 2)", "第 1 步第 2 层的 K"), &a,
                             trace_text(tr, "step 2 K[:2] (layer 2)", "第 2 步第 2 层的 K[:2]"), &b);
    a = old_rows(s1->layer2->V, d->dv), b = old_rows(s2->layer2->V, d->dv);
    same &= trace_compare(tr, "old_V_layer2", trace_text(tr, "step 1 V (layer 2)", "第 1 步第 2 层的 V"), &a,
                              trace_text(tr, "step 2 V[:2] (layer 2)", "第 2 步第 2 层的 V[:2]"), &b);
    return same;
}

int lesson1_run(const Options *opt, Trace *tr) {
    ToyData d;
    AttnStep a[4];   // layer 1 and layer 2 of step 1, then of step 2
    if (toy_begin(&d, a, 4, STEP2_TOKENS, opt, tr->lesson, STEP2_TOKENS)) return 1;
    int two_layers = d.dv == d.d;
    Step s1 = {&a[0], two_layers ? &a[1] : NULL}, s2 = {&a[2], two_layers ? &a[3] : NULL};
    lessons_heading(tr);
    toy_show_scale(tr, &d);
    trace_say(tr,
              "A decoder masks the future: each token attends to itself and the tokens before it.\n"
              "An encoder such as BERT does not. Watch what adding one token does to the earlier rows,\n"
              "in layer 1 and in layer 2 (here with the same weights as layer 1).\n",
              "decoder 用因果掩码挡住后面的 token：每个 token 只看自己和它前面的 token；\n"
              "BERT 这样的 encoder 没有掩码。来看新加一个 token 之后，前面各行会不会变，\n"
              "先看第 1 层，再看第 2 层（这里第 2 层沿用第 1 层的权重）。\n");
    if (!two_layers)
        trace_sayf(tr, "(This data's V is %d wide and X %d: a second layer cannot read it, so only layer 1 is run.)\n",
                   "（这份数据的 V 宽 %d、X 宽 %d，第 2 层接不上，所以只算第 1 层。）\n", d.dv, d.d);

    trace_heading(tr, "With the causal mask (decoder)", "有因果掩码（decoder）");
    int same_causal = run(tr, &d, &s1, &s2, 1);
    trace_say(tr,
              same_causal ? "Identical in every layer: step 1's K, V and outputs stay valid, so they can be cached.\n"
                          : "They differ: this is a bug in kvdemo.\n",
              same_causal ? "每一层都完全相同：第 1 步的 K、V 和输出依然有效，可以缓存。\n"
                          : "不相同：这是 kvdemo 的缺陷。\n");

    trace_heading(tr, "Without a mask (BERT-like encoder)", "没有掩码（类似 BERT 的 encoder）");
    int same_free = run(tr, &d, &s1, &s2, 0);
    if (!two_layers)
        trace_say(tr,
                  "The old outputs changed: 真 is now seen by the tokens before it. (Layer 1's K and V\n"
                  "rows do not change, K = X @ W_K row by row; a second layer's would.)\n",
                  "旧的输出变了：前面的 token 现在也看得到“真”。（第 1 层的 K、V 行不变，\n"
                  "因为 K = X @ W_K 是逐行算的；第 2 层的 K、V 就会变。）\n");
    else
        trace_say(tr,
                  same_free ? "Identical by chance: these numbers cannot show the effect.\n"
                            : "Layer 1's K rows did not move (K = X @ W_K row by row, and X's old rows are the\n"
                              "same), but the old outputs did: 真 is now seen by the tokens before it. Those\n"
                              "outputs are layer 2's input, so from layer 2 up the old K and V rows change:\n"
                              "what step 1 computed cannot be reused. There is no KV cache in BERT.\n",
                  same_free ? "碰巧相同：这组数字看不出差别。\n"
                            : "第 1 层的 K 行没有变（K = X @ W_K 逐行计算，X 的旧行没变），但旧的输出变了：\n"
                              "前面的 token 现在也看得到“真”。这些输出是第 2 层的输入，所以从第 2 层起，\n"
                              "旧 token 的 K、V 行都变了，第 1 步算出的东西不能再用。所以 BERT 没有 KV Cache。\n");
    toy_precision_note(tr, 0);
    toy_end(&d, a, 4);
    return 0;
}
