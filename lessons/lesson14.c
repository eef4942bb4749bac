// lesson 14 — beyond the documents: past the window
//
// The numpy chapter's generate ends with "缓存重置：如果序列长度超过上下文尺寸，
// 重置缓存". Its char GPT must: a learned absolute position embedding has no
// row past position T - 1, and it is baked into every cached key and value.
// The LLaMA-style model's rotary positions enter only the distance between
// a query and a key, so its cache can roll.
//
//   1. why the chapter resets    said where it happens
//   2. the two kinds             the slots of a rolling buffer (Mistral) and
//                                of sinks + window (StreamingLLM), position by
//                                position (kvcache_window.c); the receptive
//                                field, W more positions per layer
//   3. the attention sink        the share of attention weight on position 0,
//                                per layer and head, measured before any claim,
//                                on the lesson's model and on the one trained
//                                with the window (over the queries whose band
//                                holds position 0)
//   4. the ways past the window  the loss per character over a stretch of the
//                                validation text 8 contexts long, each way
//                                holding W = 64 positions: reset, recompute,
//                                window only, 1 and 4 sinks + window, 4 sinks
//                                and 1 (bos, the sink token every training
//                                window starts with) with positions within the
//                                cache, and the model
//                                trained with --window 64 on its rolling cache;
//                                bytes and time per token
//   5. what the numbers say      chosen from the figures, not fixed
#include "fileio.h"
#include "lessons.h"
#include "llama.h"
#include "llama_past.h"
#include "ops.h"
#include "paths.h"
#include "stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHIPPED_LLAMA "data/tinyshakespeare-llama-mha.bin"
#define SHIPPED_TEXT "data/tinyshakespeare-val-2049.txt"
#define SHIPPED_WINDOW "data/tinyshakespeare-llama-window64.bin"   // the same recipe, trained with --window 64

// EVERY: the steps whose losses are compared, one in EVERY, so that the
// recomputing way (W rows a step) runs in seconds
enum { W = 64, N_TEXT = 1024, NUM_WAYS = 8, EVERY = 4 };

typedef struct {
    const char *en, *zh;
    LlamaPast way;
    int sinks;
    int in_cache;   // 1: StreamingLLM's positions within the cache (kvwindow_positions_in_cache)
    int trained;    // 1: on the model trained with the window (SHIPPED_WINDOW), not the lesson's
} Way;

static const Way WAYS[NUM_WAYS] = {
    {"reset (the chapter's)", "重置（numpy 章节的做法）", LLAMA_PAST_RESET, 0, 0, 0},
    {"recompute the last W", "每步重算最近 W 个", LLAMA_PAST_RECOMPUTE, 0, 0, 0},
    {"window only", "只有窗口", LLAMA_PAST_CACHE, 0, 0, 0},
    {"1 sink + window", "1 个 sink + 窗口", LLAMA_PAST_CACHE, 1, 0, 0},
    {"4 sinks + window", "4 个 sink + 窗口", LLAMA_PAST_CACHE, 4, 0, 0},
    {"4 sinks, in-cache positions", "4 个 sink，缓存内位置", LLAMA_PAST_CACHE, 4, 1, 0},
    {"1 sink (bos), in-cache pos.", "1 个 sink（bos），缓存内位置", LLAMA_PAST_CACHE, 1, 1, 0},
    {"trained with the window", "训练时就带窗口", LLAMA_PAST_CACHE, 0, 0, 1},
};

typedef struct {
    double loss_in;        // mean loss of the steps at positions W .. T-1, nats per character
    double loss_past;      // of the steps at positions >= T (past the context)
    double loss_all;       // of every step compared
    double per_token;      // mean seconds of a step
    double lo, hi;         // its 10th and 90th percentiles
    size_t bytes;          // of keys and values held
} WayResult;

static void why_reset(Trace *tr) {
    trace_heading(tr, "1. Why the chapter must reset", "1. 为什么 numpy 章节必须重置");
    trace_say(tr,
              "The char GPT adds a learned position embedding wpe[t] to each token before the first layer: "
              "there is no row past t = 255, and every cached key and value was computed from its own wpe[t]. "
              "So its cache can neither roll (a key's position is inside its numbers) nor run past the context: "
              "the chapter drops it and recomputes.\n"
              "The LLaMA-style model rotates q and k by their positions (RoPE); a rotated q . k depends only "
              "on the distance between them. Keys cached after rotation stay right when older rows are evicted, "
              "and the positions may run on past max_seq_len.\n",
              "字符级 GPT 在第一层之前给每个 token 加上学到的位置嵌入 wpe[t]：t = 255 之后没有这一行，"
              "而且缓存里的每个 key 和 value 都是用它自己的 wpe[t] 算出来的。所以它的缓存既不能滚动"
              "（位置就在 key 的数字里），也不能越过上下文：章节只好丢掉缓存重新计算。\n"
              "LLaMA 式模型按位置旋转 q 和 k（RoPE）；旋转后的 q . k 只取决于两者的距离。"
              "旋转之后再缓存的 key 在较旧的行被淘汰后依然正确，位置也可以一直增长，超过 max_seq_len。\n");
}

// Which position each slot holds after the text reached position p.
static void show_slots(Trace *tr, int Wd, int S, int upto) {
    KvWindow c;
    KvShape shape = {.L = 1, .B = 1, .T = Wd, .H = 1, .G = 1, .D = 2};
    if (kvwindow_init(&c, shape, S) != 0) return;
    int held[16], n = kvwindow_positions(held, &c, upto);
    int slot_of[16];
    for (int i = 0; i < Wd; i++) slot_of[i] = -1;
    for (int i = 0; i < n; i++) slot_of[kvwindow_slot(&c, held[i])] = held[i];
    char line[256];
    int at = 0;
    for (int i = 0; i < Wd; i++) at += snprintf(line + at, sizeof line - (size_t)at, " %d", slot_of[i]);
    trace_sayf(tr, "  %-22s W %d, S %d, after position %d: slots 0 .. %d hold positions%s",
               "  %-22s W %d，S %d，写到位置 %d 之后：槽 0 .. %d 存的位置为%s",
               S ? trace_text(tr, "sinks + window:", "sink + 窗口：") : trace_text(tr, "rolling buffer:", "滚动缓冲区："),
               Wd, S, upto, Wd - 1, line);
    kvcache_free(&c.base);
}

// The positions the two rotary conventions give the rows a query reads, for
// W 8, S 2 after position 19, and the distances the query sees.
static void show_conventions(Trace *tr) {
    KvWindow c;
    KvShape shape = {.L = 1, .B = 1, .T = 8, .H = 1, .G = 1, .D = 2};
    if (kvwindow_init(&c, shape, 2) != 0) return;
    int held[8], p = 19, n = kvwindow_positions(held, &c, p);
    char own[96], own_d[96], slot[96], slot_d[96];
    int a = 0, b = 0, e = 0, f = 0;
    for (int i = 0; i < n; i++) {
        a += snprintf(own + a, sizeof own - (size_t)a, " %d", held[i]);
        b += snprintf(own_d + b, sizeof own_d - (size_t)b, " %d", p - held[i]);
        e += snprintf(slot + e, sizeof slot - (size_t)e, " %d", i);
        f += snprintf(slot_d + f, sizeof slot_d - (size_t)f, " %d", n - 1 - i);
    }
    trace_sayf(tr, "  kvdemo (after rotation, own positions): keys at%s, query at %d: distances%s",
               "  kvdemo（旋转之后，各自的位置）：key 在%s，query 在 %d：距离%s", own, p, own_d);
    trace_sayf(tr, "  StreamingLLM (positions within the cache): keys at%s, query at %d: distances%s\n",
               "  StreamingLLM（缓存内的位置）：key 在%s，query 在 %d：距离%s\n", slot, n - 1, slot_d);
    kvcache_free(&c.base);
}

static void the_kinds(Trace *tr) {
    trace_heading(tr, "2. Two caches that roll", "2. 两种会滚动的缓存");
    trace_say(tr,
              "A rolling buffer of W rows (Mistral 7B) puts position p in slot p mod W: a query at p reads "
              "p - W + 1 .. p, the band mask of sliding-window attention. Sinks + window (StreamingLLM) keep "
              "positions 0 .. S-1 for good and roll the other W - S rows.\n",
              "W 行的滚动缓冲区（Mistral 7B）把位置 p 放在槽 p mod W：位置 p 的 query 读 p - W + 1 .. p，"
              "正是滑动窗口注意力的带状掩码。sink + 窗口（StreamingLLM）永久保留位置 0 .. S-1，其余 W - S 行滚动。\n");
    show_slots(tr, 8, 0, 19);
    show_slots(tr, 8, 2, 19);
    trace_say(tr,
              "\nRotary convention: kvdemo caches keys after rotation, each at its own position, as llama2.c "
              "and Hugging Face do. StreamingLLM caches them before rotation and rotates them at their place in "
              "the cache (decoding the 9th token over [0 1 2 3 6 7 8], positions 0 .. 7), so no distance exceeds "
              "W; here a sink's distance grows with the text.\n",
              "\n旋转约定：kvdemo 像 llama2.c 和 Hugging Face 一样缓存旋转之后的 key，各自在自己的位置上。"
              "StreamingLLM 缓存旋转之前的 key，并按它们在缓存中的位置旋转（在 [0 1 2 3 6 7 8] 上解码第 9 个 token 时，"
              "位置为 0 .. 7），因此距离从不超过 W；这里 sink 的距离随文字增长。\n");
    trace_say(tr,
              "For one step, W 8, S 2, the query at position 19 (section 4 measures both):",
              "以一步为例，W 8、S 2，位置 19 的 query（第 4 节两种都测）：");
    show_conventions(tr);
}

// How far back a query at position p reaches with a band of W per layer:
// layer 1 reads p - W + 1 .. p, and each row of layer l read W rows of layer
// l - 1, so after layer l the earliest position is p - l (W - 1), about W
// per layer: W L through all L of them.
static void receptive_field(Trace *tr, int L, int W_, int T, int p) {
    trace_sayf(tr,
               "The receptive field: with a window of W = %d in each of the L = %d layers, the query at "
               "position %d reads %d .. %d in layer 1, and each of those rows read W positions of the layer "
               "below. After layer l it reaches back l (W - 1) positions:",
               "感受野：每层窗口 W = %d、共 L = %d 层时，位置 %d 的 query 在第 1 层读 %d .. %d，"
               "而这些行各自又读了下一层的 W 个位置。经过第 l 层，它向前能达到 l (W - 1) 个位置：",
               W_, L, p, p - W_ + 1, p);
    static const TraceColumn cols[] = {
        {"layer", "层", 6, 1, NULL},
        {"earliest position", "最早的位置", 18, 1, "earliest"},
        {"positions seen", "看到的位置数", 14, 1, "positions"},
    };
    TraceTable t = {"receptive_field", 3, cols};
    trace_table_head(tr, &t);
    for (int l = 1; l <= L; l++) {
        char layer[16], from[16], count[16];
        int back = l * (W_ - 1);
        snprintf(layer, sizeof layer, "%d", l);
        snprintf(from, sizeof from, "%d", p - back > 0 ? p - back : 0);
        snprintf(count, sizeof count, "%d", (p - back > 0 ? back : p) + 1);
        const char *cells[] = {layer, from, count};
        trace_table_row(tr, &t, cells);
    }
    int all = L * (W_ - 1) + 1;
    trace_sayf(tr,
               "Through all %d layers: %d positions, about W L = %d, %s the context of %d the model was trained "
               "with. The cache still holds W rows per layer: what lies farther back reaches the query only "
               "through the rows of the layers below, as Mistral's paper says of its window.\n",
               "经过全部 %d 层：%d 个位置，约为 W L = %d，%s模型训练时的上下文 %d。缓存每层仍只存 W 行："
               "更远的内容只能经由下面各层的行传到 query，正如 Mistral 的论文对其窗口的说明。\n",
               L, all, W_ * L, all > T ? trace_text(tr, "more than", "超过了") : trace_text(tr, "within", "没有超过"),
               T);
    trace_count(tr, "receptive_field", all, NULL, NULL);
}

// The mean of 1 / (p + 1) over the queries at positions 0 .. Q-1: the weight
// a uniform softmax would put on position 0.
static double uniform_share(int Q) {
    double uniform = 0;
    for (int p = 0; p < Q; p++) uniform += 1.0 / (p + 1);
    return uniform / Q;
}

// The share of attention weight on position 0 over the queries at positions
// 0 .. Q-1 (Q rows of cache: the context, or a windowed model's band), per
// layer and head, and what a uniform softmax would give; trace values named
// prefix + "sink_share_...". Returns the largest share, or -1 when memory ran out.
static double the_sink(Trace *tr, LlamaState *s, const LlamaModel *m, const int *tokens, int Q, const char *prefix) {
    const LlamaConfig *c = &m->cfg;
    KvWindow kv;
    KvShape shape = {.L = c->n_layers, .B = 1, .T = Q, .H = c->n_heads, .G = c->n_kv_heads, .D = c->head_dim};
    if (kvwindow_init(&kv, shape, 0) != 0) return -1;
    s->kv = &kv.base;
    float *logits = malloc(sizeof(float) * (size_t)c->vocab_size);
    if (!logits) {
        kvcache_free(&kv.base);
        s->kv = NULL;
        return -1;
    }
    for (int p = 0; p < Q; p++) llama_forward(logits, s, m, tokens + p, p, 1, 1, 1);
    double uniform = uniform_share(Q);
    trace_sayf(tr,
               "Mean weight on position 0 (bos) over the queries at positions 0 .. %d, per layer and head; "
               "a uniform softmax would give %.3f:",
               "位置 0 .. %d 的 query 放在位置 0（bos）上的平均权重，按层和头列出；均匀的 softmax 为 %.3f：", Q - 1,
               uniform);
    double most = 0;
    char name[64];
    for (int l = 0; l < c->n_layers; l++) {
        char line[512];
        int at = 0;
        for (int h = 0; h < c->n_heads; h++) {
            double share = kv.sink_weight[(size_t)l * c->n_heads + h] / kv.queries[l];
            if (share > most) most = share;
            at += snprintf(line + at, sizeof line - (size_t)at, " %.3f", share);
            snprintf(name, sizeof name, "%ssink_share_l%d_h%d", prefix, l, h);
            trace_value(tr, name, share, "", NULL, NULL);
        }
        trace_sayf(tr, "  layer %d:%s", "  第 %d 层：%s", l, line);
    }
    trace_sayf(tr, "The largest share is %.3f, %.1f times the uniform %.3f.\n",
               "最大的份额是 %.3f，为均匀值的 %.1f 倍（均匀值 %.3f）。\n", most, most / uniform, uniform);
    snprintf(name, sizeof name, "%ssink_share_max", prefix);
    trace_value(tr, name, most, "", NULL, NULL);
    snprintf(name, sizeof name, "%ssink_share_uniform", prefix);
    trace_value(tr, name, uniform, "", NULL, NULL);
    free(logits);
    kvcache_free(&kv.base);
    s->kv = NULL;
    return most;
}

// Section 3: the sink of the lesson's model (over its context T) and of the
// model trained with the window (over the queries whose band holds position
// 0). Returns the largest share of each in *sink and *trained_sink; -1 when
// memory ran out.
static int the_sinks(Trace *tr, double *sink, double *trained_sink, LlamaState *s, const LlamaModel *m,
                     LlamaState *ts, const LlamaModel *tm, const int *tokens) {
    trace_heading(tr, "3. Is there an attention sink?", "3. 有没有 attention sink？");
    *sink = the_sink(tr, s, m, tokens, m->cfg.max_seq_len, "");
    if (*sink < 0) return -1;
    trace_sayf(tr,
               "The model trained with the window (%s, W = %d): a query past position %d no longer sees position "
               "0, so its share is taken over the queries whose band holds it.",
               "训练时就带窗口的模型（%s，W = %d）：位置 %d 之后的 query 已看不到位置 0，所以份额只对带状范围内含有它的 "
               "query 计算。",
               SHIPPED_WINDOW, tm->cfg.window, tm->cfg.window - 1);
    *trained_sink = the_sink(tr, ts, tm, tokens, tm->cfg.window, "window_");
    if (*trained_sink < 0) return -1;
    double x = *trained_sink / uniform_share(tm->cfg.window);
    trace_sayf(tr, "Trained with the window, its largest weight on position 0 is %.1f times a uniform softmax's: %s\n",
               "训练时就带窗口的模型，位置 0 上最大的权重是均匀 softmax 的 %.1f 倍：%s\n", x,
               x > 3 ? trace_text(tr, "some head parks its attention there, while position 0 is in its band.",
                                  "在位置 0 还在带状范围内时，确实有头把注意力停在那里。")
                     : trace_text(tr, "no head parks its attention there; this model has no sink either.",
                                  "没有头把注意力停在那里；这个模型也没有 sink。"));
    return 0;
}

// The mean of n step times (a reset's refeeding steps included) and their
// 10th and 90th percentiles (sorts them).
static void percentiles(WayResult *r, double *t, int n) {
    r->per_token = stats_of(t, n).mean;
    stats_median(t, n);   // sorts t in place
    r->lo = t[n / 10], r->hi = t[n * 9 / 10];
}

// One way over tokens (n): its losses, times and bytes. Returns 0, or -1
// when memory ran out.
static int run_way(WayResult *r, const Way *w, LlamaState *s, const LlamaModel *m, const int *tokens, int n,
                   double *losses, double *seconds, float *logits) {
    const LlamaConfig *c = &m->cfg;
    KvWindow kv;
    memset(&kv, 0, sizeof kv);
    if (w->way == LLAMA_PAST_CACHE) {
        KvShape shape = {.L = c->n_layers, .B = 1, .T = W, .H = c->n_heads, .G = c->n_kv_heads, .D = c->head_dim};
        if (kvwindow_init(&kv, shape, w->sinks) != 0) return -1;
        if (w->in_cache && kvwindow_positions_in_cache(&kv, c->rope_theta) != 0) {
            kvcache_free(&kv.base);
            return -1;
        }
        s->kv = &kv.base;
    }
    llama_past_run(losses, seconds, logits, s, m, tokens, n, w->way, W, EVERY);
    double sum[3] = {0}, count[3] = {0};   // W .. T-1, T .., all
    int k = 0, T = c->max_seq_len;
    for (int i = 0; i + 1 < n; i++) {
        if (i % EVERY != 0) continue;
        int part = i >= T ? 1 : i >= W ? 0 : -1;
        if (part >= 0) sum[part] += losses[i], count[part] += 1;
        sum[2] += losses[i], count[2] += 1;
        seconds[k++] = seconds[i];   // the steps compared
    }
    r->loss_in = sum[0] / count[0], r->loss_past = sum[1] / count[1], r->loss_all = sum[2] / count[2];
    percentiles(r, seconds, k);
    // the bytes of W positions' keys and values, whichever cache holds them
    r->bytes = (size_t)llama_cache_bytes_per_token(c) * W;
    kvcache_free(&kv.base);
    s->kv = NULL;
    return 0;
}

// The ways on the lesson's model (s, m) and, for the last, on the model
// trained with the window (ts, tm; the same vocabulary, so the same tokens).
static int five_ways(Trace *tr, WayResult *res, LlamaState *s, const LlamaModel *m, LlamaState *ts,
                     const LlamaModel *tm, const int *tokens, int n) {
    trace_heading(tr, "4. Ways past the window", "4. 越过窗口的几种做法");
    trace_sayf(tr,
               "%d characters of the validation text after bos (%d contexts of %d), each way holding W = %d "
               "positions of keys and values. Loss: -log p(next character), nats, mean over one step in %d: "
               "at positions %d .. %d (past W, within the context), from %d on (past the context), and all.",
               "验证集文字中 bos 之后的 %d 个字符（%d 个长度为 %d 的上下文），每种做法都只保留 W = %d 个位置的 key 和 value。"
               "损失为 -log p(下一个字符)，单位 nat，每 %d 步取一步求平均：位置 %d .. %d（超过 W、仍在上下文内）、"
               "从 %d 起（超过上下文）以及全部。",
               n - 1, (n - 1) / m->cfg.max_seq_len, m->cfg.max_seq_len, W, EVERY, W, m->cfg.max_seq_len - 1,
               m->cfg.max_seq_len);
    double *losses = malloc(sizeof(double) * (size_t)n), *seconds = malloc(sizeof(double) * (size_t)n);
    float *logits = malloc(sizeof(float) * (size_t)m->cfg.vocab_size);
    int rc = !losses || !seconds || !logits ? -1 : 0;
    for (int i = 0; i < NUM_WAYS && rc == 0; i++)
        rc = run_way(&res[i], &WAYS[i], WAYS[i].trained ? ts : s, WAYS[i].trained ? tm : m, tokens, n, losses,
                     seconds, logits);
    free(losses), free(seconds), free(logits);
    if (rc) return rc;
    static const TraceColumn cols[] = {
        {"way", "做法", 28, 0, NULL},          {"rows", "行数", 5, 1, NULL},
        {"cache bytes", "缓存字节", 12, 1, "cache_bytes"}, {"loss W..T", "W..T 损失", 10, 1, "loss_in"},
        {"loss past T", "T 之后损失", 12, 1, "loss_past"}, {"loss, all", "全部损失", 10, 1, "loss_all"},
        {"ms/token", "毫秒/token", 10, 1, "ms_per_token"}, {"p10 … p90", "p10 … p90", 15, 1, "ms_spread"},
    };
    TraceTable t = {"past_window", 8, cols};
    trace_table_head(tr, &t);
    for (int i = 0; i < NUM_WAYS; i++) {
        char rows[16], bytes[24], in[16], past[16], all[16], ms[16], spread[40];
        snprintf(in, sizeof in, "%.3f", res[i].loss_in);
        snprintf(rows, sizeof rows, "%d", W);
        snprintf(bytes, sizeof bytes, "%zu", res[i].bytes);
        snprintf(past, sizeof past, "%.3f", res[i].loss_past);
        snprintf(all, sizeof all, "%.3f", res[i].loss_all);
        snprintf(ms, sizeof ms, "%.3f", res[i].per_token * 1e3);
        snprintf(spread, sizeof spread, "%.3f … %.3f", res[i].lo * 1e3, res[i].hi * 1e3);
        const char *cells[] = {trace_text(tr, WAYS[i].en, WAYS[i].zh), rows, bytes, in, past, all, ms, spread};
        trace_table_row(tr, &t, cells);
    }
    trace_sayf(tr, "(The full cache of the context would hold %d rows, %lld bytes. Times: one run, the mean "
                   "step and the 10th to 90th percentiles of the steps.)\n",
               "（整个上下文的缓存有 %d 行、%lld 字节。时间：一次运行，各步的平均值及第 10 到第 90 百分位。）\n",
               m->cfg.max_seq_len, (long long)llama_cache_bytes_per_token(&m->cfg) * m->cfg.max_seq_len);
    return 0;
}

static void what_it_says(Trace *tr, const WayResult *r, double uniform_x, int T) {
    trace_heading(tr, "5. What the numbers say", "5. 数字说明了什么");
    const WayResult *reset = &r[0], *recompute = &r[1], *window = &r[2], *sinks4 = &r[4];
    trace_sayf(tr, "Recomputing the last W at every step is the quality baseline: %.3f nats past T, at %.0f times "
                   "the time per token of the rolling window. The window alone gives %.3f.",
               "每步重算最近 W 个是质量基准：T 之后 %.3f nat，每个 token 的时间是滚动窗口的 %.0f 倍。只用窗口得 %.3f。",
               recompute->loss_past, recompute->per_token / window->per_token, window->loss_past);
    trace_sayf(tr, "The largest weight on position 0 is %.1f times a uniform softmax's: %s",
               "位置 0 上最大的权重是均匀 softmax 的 %.1f 倍：%s", uniform_x,
               uniform_x > 3 ? trace_text(tr, "some head parks its attention there.", "确实有头把注意力停在那里。")
                             : trace_text(tr, "no head parks its attention there; this model has no sink.",
                                          "没有头把注意力停在那里；这个模型没有 sink。"));
    double in = sinks4->loss_in - window->loss_in, past = sinks4->loss_past - window->loss_past;
    if (past > 0.05)
        trace_sayf(tr, "Here 4 sinks cost %.3f nats past T, and %.3f within the context (positions W .. %d, a sink "
                       "at most %d away): cached at their own positions, the sinks end up farther from the query "
                       "than any distance the model was trained on. StreamingLLM re-applies positions within the "
                       "cache, so that no distance exceeds W.",
                   "这里 4 个 sink 在 T 之后多损失 %.3f nat，在上下文之内多损失 %.3f nat（位置 W .. %d，sink 最远 %d）："
                   "按各自的位置缓存，sink 离 query 的距离超过了模型训练时见过的任何距离。"
                   "StreamingLLM 在缓存内部重新分配位置，使距离不超过 W。",
                   past, in, T - 1, T - 1);
    else if (past < -0.05)
        trace_sayf(tr, "4 sinks + window beat the window alone by %.3f nats past T: keeping the first positions "
                       "helps, as StreamingLLM found.",
                   "4 个 sink + 窗口在 T 之后比只用窗口好 %.3f nat：保留最前面的位置有帮助，与 StreamingLLM 的发现一致。",
                   -past);
    else
        trace_sayf(tr, "4 sinks + window and the window alone differ by %.3f nats past T: the same within 0.05.",
                   "4 个 sink + 窗口与只用窗口在 T 之后相差 %.3f nat：在 0.05 之内，相同。", past);
    const WayResult *in_cache = &r[5], *bos = &r[6], *trained = &r[7];
    double fixed = in_cache->loss_past - window->loss_past;
    trace_sayf(tr, "With StreamingLLM's positions within the cache, 4 sinks give %.3f nats past T (%.3f at their "
                   "own positions, %.3f for the window alone): %s",
               "用 StreamingLLM 的缓存内位置，4 个 sink 在 T 之后为 %.3f nat（按各自位置为 %.3f，只用窗口为 %.3f）：%s",
               in_cache->loss_past, sinks4->loss_past, window->loss_past,
               fixed > 0.05 ? trace_text(tr, "the sinks still cost more than the window alone.",
                                         "sink 仍比只用窗口差。")
               : fixed < -0.05 ? trace_text(tr, "now the sinks help.", "这时 sink 有帮助了。")
                               : trace_text(tr, "the harm is gone, and so is any gain: this model has no sink to keep.",
                                            "害处没有了，好处也没有：这个模型本来就没有要保留的 sink。"));
    double kept = bos->loss_past - window->loss_past;
    trace_sayf(tr, "Every training window starts with bos, a learnable token at position 0 of every sequence: "
                   "StreamingLLM's remedy (its sink token, section 3.3) is in the recipe already. Kept alone, with "
                   "positions within the cache, it gives %.3f nats past T (%.3f for the window alone): %s",
               "每个训练窗口都以 bos 开头，即每个序列位置 0 上一个可学习的 token：StreamingLLM 的补救办法"
               "（它的 sink token，第 3.3 节）本来就在配方里。只保留它、用缓存内位置，T 之后为 %.3f nat（只用窗口为 "
               "%.3f）：%s",
               bos->loss_past, window->loss_past,
               kept < -0.05 ? trace_text(tr, "keeping it helps.", "保留它有帮助。")
               : kept > 0.05 ? trace_text(tr, "keeping it costs more than it gives.", "保留它反而更差。")
                             : trace_text(tr, "the same within 0.05; trained in, it still did not become a sink "
                                              "at this scale.",
                                          "在 0.05 之内相同；即使训练进去，在这个规模上它也没有成为 sink。"));
    trace_sayf(tr, "The model trained with the band mask of W (%s), on its rolling cache of W rows, gives %.3f "
                   "nats past T against the window's %.3f on the model trained without: %s",
               "训练时就用 W 的带状掩码的模型（%s）用它 W 行的滚动缓存，T 之后为 %.3f nat，没带窗口训练的模型只用窗口为 "
               "%.3f：%s",
               SHIPPED_WINDOW, trained->loss_past, window->loss_past,
               trained->loss_past < window->loss_past - 0.05
                   ? trace_text(tr, "trained for the window, it does better with the same W rows.",
                                "为窗口而训练，同样的 W 行做得更好。")
               : trained->loss_past > window->loss_past + 0.05
                   ? trace_text(tr, "it does worse with the same W rows.", "同样的 W 行，它更差。")
                   : trace_text(tr, "the same within 0.05; its rolling cache is exact by construction (the "
                                    "logits of recomputation under the band, bit for bit), where the other's is "
                                    "an approximation that happens to hold here.",
                                "在 0.05 之内相同；它的滚动缓存在构造上就是精确的（与在带状掩码下重算的 logits "
                                "逐位相同），而另一个只是碰巧在这里成立的近似。"));
    trace_sayf(tr, "The chapter's reset gives %.3f nats past T: after each restart the model sees only W / 2 "
                   "characters, and it costs %.1f times the window's time per token.\n",
               "numpy 章节的重置在 T 之后为 %.3f nat：每次重新开始后模型只看得到 W / 2 个字符，"
               "每个 token 的时间是窗口的 %.1f 倍。\n",
               reset->loss_past, reset->per_token / window->per_token);
}

// The model trained with the window (SHIPPED_WINDOW) into tm, and its state:
// window W and m's vocabulary, so that the lesson's tokens are its too.
// Returns 0, or 1 after one line on stderr (tm and ts then need no free).
static int load_trained(Lang lang, LlamaModel *tm, LlamaState *ts, const LlamaModel *m, const char *mpath) {
    char buf[4096], err[512];
    const char *path = paths_shipped(SHIPPED_WINDOW, buf, sizeof buf);
    if (llama_load(tm, path, ERR(lang, err)) != 0) {
        fileio_error(lang, "%s", "%s", err);
        return 1;
    }
    int V = m->cfg.vocab_size;
    if (tm->cfg.window != W || tm->cfg.vocab_size != V || memcmp(tm->vocab, m->vocab, sizeof(uint32_t) * V) != 0) {
        fileio_error(lang, "%s: expected a model trained with --window %d on the vocabulary of %s",
                     "%s：应为用 --window %d、以 %s 的词表训练的模型", path, W, mpath);
        llama_free(tm);
        return 1;
    }
    if (llama_state_init(ts, tm, 1, ERR(lang, err)) != 0) {
        fileio_error(lang, "%s", "%s", err);
        llama_free(tm);
        return 1;
    }
    return 0;
}

// The lesson's model into m: one trained without a window, since sections 3
// to 5 set it against the model trained with one (SHIPPED_WINDOW, loaded
// beside it); a model with a window would be compared with itself, and its
// sink share taken over queries that cannot see position 0. Returns 0, or 1
// after one line on stderr (m then needs no free).
static int load_lesson_model(Lang lang, LlamaModel *m, const char *path) {
    char err[512];
    if (llama_load(m, path, ERR(lang, err)) != 0) {
        fileio_error(lang, "%s", "%s", err);
        return 1;
    }
    if (m->cfg.window) {
        fileio_error(lang, "%s was trained with --window %d; lesson 14 takes a model trained without a window "
                     "(it loads %s beside it): give data/tinyshakespeare-llama-mha.bin or another such model",
                     "%s 训练时用了 --window %d；第 14 课要的是不带窗口训练的模型（它会在旁边载入 %s）："
                     "请给 data/tinyshakespeare-llama-mha.bin 或其他这样的模型",
                     path, m->cfg.window, SHIPPED_WINDOW);
        llama_free(m);
        return 1;
    }
    return 0;
}

int lesson14_run(const Options *opt, Trace *tr) {
    char buf[4096], err[512];
    const char *path = opt->model_path ? opt->model_path : paths_shipped(SHIPPED_LLAMA, buf, sizeof buf);
    LlamaModel m;
    if (load_lesson_model(opt->lang, &m, path) != 0) return 1;
    char tbuf[4096];
    const char *tpath = paths_shipped(SHIPPED_TEXT, tbuf, sizeof tbuf);
    size_t got = 0;   // the text's first 4095 bytes, through fileio's reader
    char *text = fileio_read_text(tpath, 4095, 1, &got, ERR(tr->lang, err));
    if (!text) {
        fileio_error(tr->lang, "%s", "%s", err);
        llama_free(&m);
        return 1;
    }
    int *tokens = malloc(sizeof(int) * (got + 2));
    int n = tokens ? llama_encode(tokens, &m, text, 1, 0, (int)got + 2, ERR(tr->lang, err)) : -1;
    free(text);
    Pool *pool = NULL;   // --threads, both states' (0: the fastest for the shape, as every lesson)
    if (!got || n < N_TEXT + 1 || !(pool = pool_new_for(opt->threads, llama_row_work(&m.cfg)))) {
        fileio_error(tr->lang, "%s: cannot read %d characters of the validation text in the model's vocabulary%s%s",
                     "%s：无法按模型的词表读出验证集文字的 %d 个字符%s%s", tpath, N_TEXT, n < 0 ? ": " : "",
                     n < 0 ? err : "");
        free(tokens);
        llama_free(&m);
        return 1;
    }
    n = N_TEXT + 1;
    LlamaState s, ts;
    LlamaModel tm;
    int rc = 1;
    if (load_trained(opt->lang, &tm, &ts, &m, path) != 0) {
        pool_free(pool);
        free(tokens);
        llama_free(&m);
        return 1;
    }
    if (llama_state_init(&s, &m, 1, ERR(tr->lang, err)) != 0) {
        fileio_error(tr->lang, "%s", "%s", err);
        pool_free(pool);
        free(tokens);
        llama_free(&m);
        llama_state_free(&ts);
        llama_free(&tm);
        return 1;
    }
    s.pool = ts.pool = pool;
    lessons_heading(tr);
    trace_sayf(tr, "Model: %s (LLaMA-style, rotary positions, context %d, %zu parameters). Text: %s.\n",
               "模型：%s（LLaMA 式，旋转位置编码，上下文 %d，%zu 个参数）。文字：%s。\n", path, m.cfg.max_seq_len,
               m.num_params, tpath);
    why_reset(tr);
    trace_pause(tr);
    the_kinds(tr);
    receptive_field(tr, m.cfg.n_layers, W, m.cfg.max_seq_len, N_TEXT - 1);
    trace_pause(tr);
    double sink, trained_sink;
    int ok = the_sinks(tr, &sink, &trained_sink, &s, &m, &ts, &tm, tokens) == 0;
    trace_pause(tr);
    WayResult res[NUM_WAYS];
    if (ok && five_ways(tr, res, &s, &m, &ts, &tm, tokens, n) == 0) {
        trace_pause(tr);
        what_it_says(tr, res, sink / uniform_share(m.cfg.max_seq_len), m.cfg.max_seq_len);
        rc = 0;
    } else {
        fileio_error(tr->lang, "out of memory", "内存不足");
    }
    llama_state_free(&s);
    llama_state_free(&ts);
    llama_free(&tm);
    pool_free(pool);
    free(tokens);
    llama_free(&m);
    return rc;
}
