// lesson 5 — KV Cache 缺点 (article §5)
//
// "占用一定的存储空间" — the article says the cache costs memory and no more.
// This lesson measures how much, on the char GPT of lessons 4 and 10:
//
//   bytes per token = 2 (K and V) · L blocks · C channels · 4 bytes (float32)
//
// the bytes the cache holds after each step of a generation (read from the
// GptState's own length), against the weights and against what kvdemo
// reserves up front; then the same for real models (the presets of `kvdemo
// memory`), and the trade of §7's last sentence, 空间换时间, in one table:
// per token, FLOPs the cache saves against bytes it holds.
#include "gptsetup.h"
#include "charts.h"
#include "fileio.h"
#include "lessons.h"
#include "memory.h"
#include "ops.h"
#include "sampler.h"
#include "utf8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FP32_BITS = 32, FP16_BITS = 16, BAR_WIDTH = 40 };

// The cache length after every step of the generation.
typedef struct {
    int *len;   // (steps)
} Lengths;

static int record_len(void *ctx, const GptStep *st) {
    Lengths *l = ctx;
    l->len[st->step] = st->cache_len;
    return 0;
}

// FLOPs the cache saves on the token after position t, and the bytes it
// then holds (t + 1 positions). The char GPT's FLOPs are counted by
// gpt_cost (every multiply-add of its matrix products); a real model's are
// estimated as 2 per parameter per row (Kaplan et al. 2020) plus the
// attention, 4 · layers · (heads · head_dim) per cached position per row.
static double saved_char_gpt(GptConfig g, int t) {
    GptCost full = gpt_cost(g, t + 1, 0), one = gpt_cost(g, 1, t);
    return (full.matmul_flops + full.attention_flops) - (one.matmul_flops + one.attention_flops);
}

static double saved_real(const MemModel *m, int t) {
    double d = (double)m->heads * (m->mla_dim ? 128 : m->head_dim);   // query width
    double rows_saved = t;                                            // t + 1 rows against 1
    double seen_full = (double)(t + 1) * (t + 2) / 2, seen_one = t + 1;
    return 2.0 * m->params * rows_saved + 4.0 * m->layers * d * (seen_full - seen_one);
}

// The trade, one row per model and position: FLOPs saved, bytes held (in
// decimal and binary units; JSON: the bytes), FLOPs per byte.
static const TraceColumn TRADE_COLS[] = {
    {"model", "模型", 18, 0, "model"}, {"t", "t", 7, 1, NULL},
    {"FLOPs saved", "省下 FLOP", 12, 1, "flops_saved"}, {"held", "占用", 11, 1, "bytes_held"},
    {"", "", 11, 1, "held_binary"}, {"FLOP/B", "FLOP/B", 10, 1, "flops_per_byte"},
};
static const TraceTable TRADE = {"trade", 6, TRADE_COLS};

static void trade_row(Trace *tr, const char *run, const char *label, int t, double saved, uint64_t held) {
    char name[48], a[32], b[32], tt[16], sv[32], per[32];
    trace_run(tr, run);
    snprintf(name, sizeof name, "flops_saved[t=%d]", t);
    trace_value(tr, name, saved, "FLOP", NULL, NULL);
    snprintf(name, sizeof name, "bytes_held[t=%d]", t);
    trace_count(tr, name, (int64_t)held, NULL, NULL);
    snprintf(tt, sizeof tt, "%d", t);
    snprintf(sv, sizeof sv, "%.3g", saved);
    if (tr->format == FORMAT_TEXT) memory_decimal(a, sizeof a, (double)held);
    else snprintf(a, sizeof a, "%llu", (unsigned long long)held);
    memory_binary(b, sizeof b, (double)held);
    snprintf(per, sizeof per, "%.1f", saved / (double)held);
    const char *row[] = {label, tt, sv, a, b, per};
    trace_table_row(tr, &TRADE, row);
    trace_run(tr, NULL);
}

// The generation, with the cache, to the end of the context: the cache's
// length after each step (lens). Returns 0, or 1 when memory ran out.
static int cache_grows(Trace *tr, const Options *opt, const GptModel *m, GptState *s, int *tokens, int p, int steps,
                       uint64_t per_token, Lengths *lens) {
    GptConfig g = m->cfg;
    Sampler sampler;
    float temperature = opt->temperature >= 0 ? (float)opt->temperature : 1.0f;
    if (sampler_init(&sampler, g.V, temperature, opt->top_k, (uint32_t)opt->seed)) {
        fileio_error(tr->lang, "out of memory", "内存不足");
        return 1;
    }
    gpt_generate(tokens, s, m, &sampler, p, steps, 1, record_len, lens);
    sampler_free(&sampler);

    trace_heading(tr, "The cache as the text grows", "缓存随文本增长");
    char wrote[320], wrote_zh[320];   // the two languages name the numbers in another order
    snprintf(wrote, sizeof wrote,
             "The model wrote %d characters after the %d-character prompt, with the cache, to the end of the\n"
             "context; after each step the cache held one more position (its length is read from the state).",
             steps, p);
    snprintf(wrote_zh, sizeof wrote_zh,
             "模型在 %d 个字符的提示词之后用缓存写了 %d 个字符，直到上下文的末尾；每一步之后缓存多存一个\n"
             "位置（长度取自模型状态本身）。",
             p, steps);
    trace_say(tr, wrote, wrote_zh);
    trace_run(tr, "cache");
    for (int k = 0; k < steps; k++) {
        trace_step(tr, k + 1);
        trace_count(tr, "cache_len", lens->len[k], NULL, NULL);
        trace_count(tr, "bytes_held", (int64_t)per_token * lens->len[k], NULL, NULL);
    }
    trace_step(tr, 0);
    trace_run(tr, NULL);
    return 0;
}

// Eight lengths as bars: the part held (█) of what is reserved (the bar).
static void held_chart(Trace *tr, GptConfig g, int p, uint64_t per_token) {
    char a[40];
    static const TraceColumn CHART_COLS[] = {
        {"t", "t", 5, 1, NULL},
        {"bytes held after the step that fills position t (█), and reserved (the whole bar)",
         "填入位置 t 之后缓存占用的字节（█），以及预留的字节（整条）", BAR_WIDTH, 0, "chart"},
        {"", "", 0, 0, "bytes_held"},
    };
    static const TraceTable CHART = {"held_chart", 3, CHART_COLS};
    trace_say(tr, "", "");
    trace_table_head(tr, &CHART);
    for (int i = 1; i <= 8; i++) {
        int len = i * g.T / 8;
        if (len < p) continue;
        int n = (int)lround((double)len / g.T * BAR_WIDTH);
        char t[16], bars[3 * BAR_WIDTH + 1] = "";
        snprintf(t, sizeof t, "%d", len - 1);
        for (int x = 0; x < BAR_WIDTH; x++) strcat(bars, x < n ? "█" : "·");
        if (tr->format == FORMAT_TEXT) memory_decimal(a, sizeof a, (double)per_token * len);
        else snprintf(a, sizeof a, "%llu", (unsigned long long)per_token * (unsigned long long)len);
        trace_table_row(tr, &CHART, (const char *const[]){t, bars, a});
    }
}

// Real models: bytes per token in fp16 and the length at which the cache
// weighs as much as the weights.
static void real_models(Trace *tr) {
    char a[40], b[40], c[96], d[40];   // c: a text of both languages in a document
    trace_heading(tr, "Real models (fp16: 2 bytes a value; `kvdemo memory --list`)",
                  "真实模型（fp16：每个数 2 字节；`kvdemo memory --list`）");
    static const TraceColumn MODEL_COLS[] = {
        {"model", "模型", 15, 0, "model"},
        {"B/token", "B/token", 11, 1, "bytes_per_token"},
        {"weights", "权重", 11, 1, "weight_bytes"},
        {"cache = weights", "缓存 = 权重", 21, 1, "tokens_to_equal_weights"},
    };
    static const TraceTable MODELS = {"real_models", 4, MODEL_COLS};
    trace_table_head(tr, &MODELS);
    for (int i = 0; i < NUM_MEM_PRESETS; i++) {
        const MemModel *r = &MEM_PRESETS[i];
        uint64_t tok = 0;
        memory_bytes_per_token(&tok, r, FP16_BITS);
        double w = r->params * 2.0, cross = ceil(w / (double)tok);
        trace_run(tr, r->name);
        trace_count(tr, "bytes_per_token", (int64_t)tok, NULL, NULL);
        trace_value(tr, "weight_bytes", w, "B", NULL, NULL);
        // With a window the cache of one sequence stops growing.
        int never = r->window && cross > r->window;
        if (!never) trace_count(tr, "tokens_to_equal_weights", (int64_t)cross, NULL, NULL);
        // Past the model's cited context: only a batch's tokens together get there.
        int past = memory_past_context(r, (uint64_t)cross);
        trace_count(tr, "past_context", past, NULL, NULL);
        // Text: grouped digits and units, "!" past the context; JSON: the numbers.
        if (tr->format == FORMAT_TEXT) {
            trace_textf(tr, c, sizeof c, "%s tokens%s", "%s 个 token%s", memory_grouped(a, sizeof a, (uint64_t)cross),
                        past ? " !" : "  ");
            memory_grouped(b, sizeof b, tok);
            memory_decimal(d, sizeof d, w);
        } else {
            snprintf(c, sizeof c, "%.0f", cross);
            snprintf(b, sizeof b, "%llu", (unsigned long long)tok);
            snprintf(d, sizeof d, "%.0f", w);
        }
        const char *row[] = {r->name, b, d, never ? trace_text(tr, "never (window)  ", "不会（窗口）  ") : c};
        trace_table_row(tr, &MODELS, row);
        trace_run(tr, NULL);
    }
    trace_sayf(tr,
               "\nThe last column is how many tokens the cache must hold, all sequences of a batch together, to be\n"
               "as large as the weights (a batch of b sequences gets there b times sooner: lesson 8). ! marks a\n"
               "count past the model's context (GPT-3 and OPT-13B 2,048, LLaMA-2-7B 4,096, Mixtral 32,768 tokens;\n"
               "`kvdemo memory --model NAME` cites each): no single sequence gets there, only a batch. The others\n"
               "have no context cited here. Models with fewer key/value heads (GQA) or one latent (MLA) go much\n"
               "further.",
               "\n最后一列：缓存（一个批次所有序列合计）要存多少个 token 才和权重一样大（b 个序列的批次快 b 倍\n"
               "到达：第 8 课）。! 表示这个数超过了模型的上下文（GPT-3 和 OPT-13B 2,048，LLaMA-2-7B 4,096，\n"
               "Mixtral-8x7B 32,768 个 token；`kvdemo memory --model NAME` 给出各自的出处）：单个序列到不了，只有整批\n"
               "才会。其余模型这里没有引用上下文长度。KV 头更少的模型（GQA）或只存一个潜向量的模型（多头潜在注意力）\n"
               "能走得远得多。");
    trace_pause(tr);
}

// The trade: FLOPs saved against bytes held, per token, for the char GPT and
// two LLaMA 2 models.
static void the_trade(Trace *tr, GptConfig g, uint64_t per_token) {
    trace_heading(tr, "The trade: FLOPs saved against bytes held, per token",
                  "这笔账（以空间换时间）：每个 token 省下的计算量与占用的字节");
    trace_sayf(tr,
               "For the token after position t: FLOPs the cache saves (t + 1 rows recomputed against 1), and the\n"
               "bytes it holds then (t + 1 positions). The char GPT's FLOPs are counted; the real models' are\n"
               "estimated as 2 per parameter per row (Kaplan et al. 2020) plus the attention. %s",
               "生成位置 t 之后的 token 时：缓存省下的计算量（重算 t + 1 行对比只算 1 行），以及此时缓存占用的\n"
               "字节（t + 1 个位置）。字符级 GPT 的计算量是逐项数出来的；真实模型按每个参数每行 2 次运算\n"
               "（缩放定律论文的近似，2020）加上注意力估算。%s",
               trace_text(tr, "This is §7's 空间换时间: space traded for time.", "这就是第 7 节说的“空间换时间”。"));
    trace_say(tr, "", "");
    trace_table_head(tr, &TRADE);
    const int char_t[] = {16, 64, 128, 255};
    for (size_t i = 0; i < sizeof char_t / sizeof char_t[0]; i++) {
        int t = char_t[i] < g.T ? char_t[i] : g.T - 1;
        if (i > 0 && t <= char_t[i - 1] && char_t[i - 1] < g.T) continue;
        trade_row(tr, "char-gpt", trace_text(tr, "char GPT", "字符级 GPT"), t, saved_char_gpt(g, t),
                  per_token * (uint64_t)(t + 1));
        if (t == g.T - 1) break;
    }
    const char *real[] = {"llama-2-7b", "llama-2-70b"};
    const int real_t[] = {512, 2048, 4095};
    for (int r = 0; r < 2; r++) {
        const MemModel *rm = memory_preset(real[r]);
        uint64_t tok = 0;
        memory_bytes_per_token(&tok, rm, FP16_BITS);
        for (int i = 0; i < 3; i++)
            trade_row(tr, rm->name, rm->label, real_t[i], saved_real(rm, real_t[i]), tok * (uint64_t)(real_t[i] + 1));
    }
    // Per byte held, at the last position: what a larger model and its
    // shared key/value heads each contribute.
    const MemModel *small = memory_preset(real[0]), *large = memory_preset(real[1]);
    uint64_t tok_small = 0, tok_large = 0;
    memory_bytes_per_token(&tok_small, small, FP16_BITS);
    memory_bytes_per_token(&tok_large, large, FP16_BITS);
    int t = real_t[2];
    double per_small = saved_real(small, t) / ((double)tok_small * (t + 1));
    double per_large = saved_real(large, t) / ((double)tok_large * (t + 1));
    int gqa = large->heads / large->kv_heads;
    trace_value(tr, "flops_per_byte_ratio", per_large / per_small, "x", NULL, NULL);
    trace_sayf(tr,
               "\nEach byte the cache holds spares the FLOPs of the last column on this one token, and as many again\n"
               "on every later token. The trade is better the more weights each cached value stands for: a wider\n"
               "model, and fewer key/value heads. %s saves %.0fx as much per byte as %s at\n"
               "t = %d, and %dx of that comes from its %d query heads sharing %d key/value heads (GQA). The price\n"
               "is memory that grows with the text and with the batch, and that limits how many sequences fit\n"
               "(lesson 8).",
               "\n缓存占用的每个字节，在这一个 token 上就省下最后一列那么多运算，之后每个 token 还要再省。\n"
               "每个缓存的数代表的权重越多，这笔账越划算：模型越宽、KV 头越少越好。%s 每字节省下的运算\n"
               "达到 %.0f 倍（与 %s 相比，t = %d），其中 %d 倍来自它的 %d 个查询头共用 %d 个 KV 头（GQA）。\n"
               "代价是随文本长度和批大小增长的显存，它限制了能同时容纳的序列数（第 8 课）。",
               large->label, per_large / per_small, small->label, t, gqa, large->heads, large->kv_heads);
}

int lesson5_run(const Options *opt, Trace *tr) {
    GptModel m;
    int random_model, *tokens, p;
    int rc = gptsetup_lesson(&m, &random_model, &tokens, &p, opt, "5");
    if (rc) return rc;
    GptConfig g = m.cfg;
    GptState s = {0};
    Lengths lens = {0};
    char a[40], b[40], c[40], d[40];
    int steps = g.T - p + 1;   // the last step feeds position T - 1: the cache is full
    lens.len = malloc(sizeof(int) * (size_t)steps);
    if (!lens.len || gpt_state_init(&s, g) || !(s.pool = pool_new_for(opt->threads, gpt_row_work(g)))) {
        fileio_error(tr->lang, "out of memory", "内存不足");
        rc = 1;
        goto done;
    }

    lessons_heading(tr);
    trace_say(tr, "The article: the cache takes up storage. How much, and against what?",
              "原文：“占用一定的存储空间”。占用多少？和什么相比？");
    if (random_model) {
        fileio_error(tr->lang, "%s is missing; lesson 5 runs a random model", "找不到 %s；第 5 课改用随机模型", GPT_SHIPPED_MODEL);
        trace_say(tr, "No trained model was found: the weights are random. The sizes are the same.",
                  "没有找到训练好的模型：权重是随机的。大小完全一样。");
    }
    MemModel gm = {"char-gpt", "char GPT", g.L, g.H, g.H, g.C / g.H, g.C, 0, 0, (double)m.num_params, FP32_BITS, "", g.T, "its context T"};
    uint64_t per_token = 0;
    memory_bytes_per_token(&per_token, &gm, FP32_BITS);
    double weights = 4.0 * (double)m.num_params;
    // What gpt_state_init reserved for the cache: its key and value,
    // L · T · C floats each (gpt.h, kvcache.h).
    uint64_t reserved = kvcache_bytes(&s.cache.base);
    trace_count(tr, "n_layer", g.L, NULL, NULL);
    trace_count(tr, "n_embd", g.C, NULL, NULL);
    trace_count(tr, "context", g.T, NULL, NULL);
    trace_count(tr, "bytes_per_token", (int64_t)per_token, NULL, NULL);
    trace_count(tr, "weight_bytes", (int64_t)weights, NULL, NULL);
    trace_count(tr, "bytes_reserved", (int64_t)reserved, NULL, NULL);
    trace_sayf(tr,
               "\nThe char GPT: %d blocks, embedding %d, float32. Per token, every block keeps a key and a value\n"
               "of %d numbers:  2 · %d · %d · 4 bytes = %s B per token.\n"
               "Its weights: %s parameters · 4 bytes = %s (%s).",
               "\n字符级 GPT：%d 个模块，嵌入 %d，float32。每个 token 在每个模块各存一个 key 和一个 value，\n"
               "各 %d 个数：2 · %d · %d · 4 字节 = 每个 token %s B。\n"
               "权重：%s 个参数 · 4 字节 = %s（%s）。",
               g.L, g.C, g.C, g.L, g.C, memory_grouped(a, sizeof a, per_token), memory_grouped(d, sizeof d, m.num_params),
               memory_decimal(b, sizeof b, weights), memory_binary(c, sizeof c, weights));

    if ((rc = cache_grows(tr, opt, &m, &s, tokens, p, steps, per_token, &lens))) goto done;
    held_chart(tr, g, p, per_token);
    charts_bytes_held(tr, g.T, p, per_token, reserved);
    char e[40], f[40];
    trace_sayf(tr,
               "\nAfter the whole context (%d tokens) the cache holds %s B = %s = %s: %.1f%% of the weights (%s).\n"
               "kvdemo reserves all of it before the first token (gpt_state_init: key_cache (L, H, D, T) and\n"
               "value_cache (L, H, T, D), %s B), as LLaMA's code does with max_seq_len; the chapter's numpy\n"
               "concatenates a row at a time instead, so its cache holds only what is used so far: t · %s B after\n"
               "t tokens. Reserving wastes memory on short texts, but nothing is allocated during generation.",
               "\n填满整个上下文（%d 个 token）后缓存占 %s B = %s = %s：为权重的 %.1f%%（权重 %s）。\n"
               "kvdemo 在第一个 token 之前就全部预留（gpt_state_init：key_cache (L, H, D, T)、\n"
               "value_cache (L, H, T, D)，%s B），和 LLaMA 代码按 max_seq_len 预分配一样；numpy 章节则每步拼接一行，\n"
               "只占已用的部分：t 个 token 后 t · %s B。预留在短文本上浪费内存，但生成时不再分配内存。",
               g.T, memory_grouped(a, sizeof a, per_token * (uint64_t)g.T),
               memory_decimal(b, sizeof b, (double)per_token * g.T), memory_binary(c, sizeof c, (double)per_token * g.T),
               100.0 * (double)per_token * g.T / weights, memory_decimal(d, sizeof d, weights),
               memory_grouped(e, sizeof e, reserved), memory_grouped(f, sizeof f, per_token));
    trace_pause(tr);

    real_models(tr);

    the_trade(tr, g, per_token);
done:
    free(lens.len);
    free(tokens);
    pool_free(s.pool);
    gpt_state_free(&s);
    gpt_free(&m);
    return rc;
}
