// lesson 8 — 为什么 KV Cache 会造成显存很大 (article §8)
//
// The article: GPT-3 175B has 350 GB of weights; with batch b = 64, an input
// of s = 512 tokens and n = 32 generated, its KV cache is 164 GB, about half
// of the weights. The lesson fills the formula in factor by factor,
//
//   bytes = 2 (K and V) · layers · d_model · (s + n) · b · bytes per value
//
// prints the result in decimal and binary units (the article's GB is 10^9),
// then varies b and s + n and finds where the cache outgrows the weights.
// The sizes come from src/cmd/memory.c, the calculator of `kvdemo memory`.
#include "lessons.h"
#include "memory.h"
#include "utf8.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { S_ARTICLE = 512, N_ARTICLE = 32, B_ARTICLE = 64, FP16_BITS = 16 };

static const int BATCHES[] = {1, 8, 64, 128};
static const int LENGTHS[] = {544, 2048, 4096, 32768};
enum { NB = (int)(sizeof BATCHES / sizeof BATCHES[0]), NL = (int)(sizeof LENGTHS / sizeof LENGTHS[0]) };

// "  × 2 bytes               = 4,718,592 B per token", the = signs lined up.
static void step_line(Trace *tr, const char *left, const char *unit, const char *value) {
    char line[256];
    snprintf(line, sizeof line, "  %s%*s = %s %s", left, 28 - utf8_width(left), "", value, unit);
    trace_say(tr, line, line);
}

// The article's sum, one factor a line, against the weights.
static void step_by_step(Trace *tr, const MemModel *g) {
    char d[32], bi[32];
    trace_heading(tr, "Step by step", "逐步计算");
    uint64_t values = 0, per_token = 0, per_seq = 0, total = 0, tokens = S_ARTICLE + N_ARTICLE;
    memory_values_per_token(&values, g);
    memory_bytes_per_token(&per_token, g, FP16_BITS);
    memory_cache_bytes(&per_seq, g, FP16_BITS, tokens, 1);
    memory_cache_bytes(&total, g, FP16_BITS, tokens, B_ARTICLE);
    double weights = g->params * 2.0;
    char s1[40], s2[40], s3[40], s4[40], left[80];
    trace_sayf(tr, "  GPT-3 175B: %d layers, d_model %d (%d heads of %d), fp16: 2 bytes a value",
               "  GPT-3 175B：%d 层，d_model %d（%d 个头，每头 %d 维），fp16：每个数 2 字节", g->layers, g->d_model,
               g->heads, g->head_dim);
    snprintf(left, sizeof left, "2 · %d · %d", g->layers, g->d_model);
    snprintf(s4, sizeof s4, "%s", memory_grouped(s1, sizeof s1, values));
    step_line(tr, left, trace_text(tr, "values per token", "个数 / token"), s4);
    step_line(tr, trace_text(tr, "× 2 bytes", "× 2 字节"), trace_text(tr, "B per token", "B / token"),
              memory_grouped(s2, sizeof s2, per_token));
    snprintf(left, sizeof left, "× (s + n) = (%d + %d) = %d", S_ARTICLE, N_ARTICLE, (int)tokens);
    step_line(tr, left, trace_text(tr, "B per sequence", "B / 序列"), memory_grouped(s3, sizeof s3, per_seq));
    snprintf(left, sizeof left, "× b = %d", B_ARTICLE);
    step_line(tr, left, "B", memory_grouped(s4, sizeof s4, total));
    step_line(tr, "", trace_text(tr, "(decimal, 10^9 bytes: the article's unit)", "（十进制，10^9 字节：原文用的单位）"),
              memory_decimal(d, sizeof d, (double)total));
    step_line(tr, "", trace_text(tr, "(binary, 2^30 bytes)", "（二进制，2^30 字节）"),
              memory_binary(bi, sizeof bi, (double)total));
    trace_count(tr, "layers", g->layers, NULL, NULL);
    trace_count(tr, "d_model", g->d_model, NULL, NULL);
    trace_count(tr, "values_per_token", (int64_t)values, NULL, NULL);
    trace_count(tr, "bytes_per_token", (int64_t)per_token, NULL, NULL);
    trace_count(tr, "tokens", (int64_t)tokens, NULL, NULL);
    trace_count(tr, "batch", B_ARTICLE, NULL, NULL);
    trace_count(tr, "bytes_per_sequence", (int64_t)per_seq, NULL, NULL);
    trace_count(tr, "bytes", (int64_t)total, NULL, NULL);
    trace_value(tr, "weights_bytes", weights, "B", NULL, NULL);
    trace_value(tr, "cache_to_weights", (double)total / weights, "x", NULL, NULL);
    trace_sayf(tr,
               "\n  weights: 175 · 10^9 parameters · 2 bytes = %s = %s\n"
               "  cache / weights = %s / %s = %.2f — the article's \"about 0.5 times\".",
               "\n  权重：175 · 10^9 个参数 · 2 字节 = %s = %s\n"
               "  缓存 / 权重 = %s / %s = %.2f —— 即原文的“大约是模型参数显存的0.5倍”。",
               memory_decimal(s1, sizeof s1, weights), memory_binary(s2, sizeof s2, weights),
               memory_decimal(s3, sizeof s3, (double)total), memory_decimal(s4, sizeof s4, weights),
               (double)total / weights);
    trace_pause(tr);
}

// The same sum for other batches and lengths, and where the cache equals
// the weights.
static void other_batches(Trace *tr, const MemModel *g) {
    uint64_t per_token = 0;
    memory_bytes_per_token(&per_token, g, FP16_BITS);
    double weights = g->params * 2.0;
    char s1[40], s2[40], s3[40], s4[40];
    trace_heading(tr, "Other batches and lengths (GB = 10^9 bytes; * where the cache outgrows the weights)",
                  "其他批大小与长度（GB = 10^9 字节；* 表示缓存超过了权重）");
    // One column of lengths, one per batch; a cell is GB in text (* past
    // the weights) and bytes in JSON.
    char heads[NB][16];
    TraceColumn cols[NB + 1];
    cols[0] = (TraceColumn){"s + n", "s + n", 12, 0, "tokens"};
    for (int j = 0; j < NB; j++) {
        snprintf(heads[j], sizeof heads[j], "b = %d", BATCHES[j]);
        cols[j + 1] = (TraceColumn){heads[j], heads[j], 12, 1, NULL};
    }
    const TraceTable table = {"bytes", NB + 1, cols};
    trace_table_head(tr, &table);
    for (int i = 0; i < NL; i++) {
        char cells[NB + 1][32];
        const char *row[NB + 1];
        // Past GPT-3's context (Table 2.1: 2048): marked "!" in text.
        int past = memory_past_context(g, (uint64_t)LENGTHS[i]);
        snprintf(cells[0], sizeof cells[0], "%d%s", LENGTHS[i], past && tr->format == FORMAT_TEXT ? " !" : "");
        row[0] = cells[0];
        for (int j = 0; j < NB; j++) {
            uint64_t bytes = 0;
            memory_cache_bytes(&bytes, g, FP16_BITS, (uint64_t)LENGTHS[i], (uint64_t)BATCHES[j]);
            char name[64];
            snprintf(name, sizeof name, "bytes[b=%d,tokens=%d]", BATCHES[j], LENGTHS[i]);
            trace_count(tr, name, (int64_t)bytes, NULL, NULL);
            if (tr->format == FORMAT_TEXT)
                snprintf(cells[j + 1], sizeof cells[j + 1], "%.1f GB%s", (double)bytes / 1e9,
                         (double)bytes > weights ? "*" : " ");
            else
                snprintf(cells[j + 1], sizeof cells[j + 1], "%llu", (unsigned long long)bytes);
            row[j + 1] = cells[j + 1];
        }
        trace_table_row(tr, &table, row);
        snprintf(cells[0], sizeof cells[0], "past_context[tokens=%d]", LENGTHS[i]);
        trace_count(tr, cells[0], past, NULL, NULL);
    }
    trace_sayf(tr, "\n  ! past GPT-3's %d-token context (GPT-3 paper, Table 2.1): no sequence is that long; such a\n"
                   "    row is what a model of this shape would hold if it took that many tokens.",
               "\n  ! 超过了 GPT-3 的 %d 个 token 上下文（GPT-3 论文表 2.1）：没有这么长的序列；这样的一行是\n"
               "    同样形状、但能接受这么多 token 的模型会占用的缓存。",
               g->context);

    // Where the cache equals the weights: b · (s + n) · bytes per token = weights.
    uint64_t crossover = (uint64_t)ceil(weights / (double)per_token);
    trace_count(tr, "crossover_tokens", (int64_t)crossover, NULL, NULL);
    trace_count(tr, "crossover_length_b64", (int64_t)((crossover + B_ARTICLE - 1) / B_ARTICLE), NULL, NULL);
    trace_sayf(tr,
               "\nThe cache equals the weights when b · (s + n) · %s B = %s, that is when the batch holds\n"
               "%s tokens in all: at b = 64 from s + n = %llu on; a single sequence would need %s tokens,\n"
               "far beyond GPT-3's 2048-token context. The cache grows with every token of every sequence;\n"
               "the weights do not. `kvdemo memory` does this sum for other models (docs/memory.md).",
               "\n当 b · (s + n) · %s B = %s 时缓存等于权重，也就是整批共 %s 个 token：\n"
               "b = 64 时 s + n 达到 %llu 即超过；单个序列需要 %s 个 token，远超 GPT-3 的 2048 上下文。\n"
               "缓存随每个序列的每个 token 增长，权重不会。其他模型请用 `kvdemo memory`（见 docs/memory.md）。",
               memory_grouped(s1, sizeof s1, per_token), memory_decimal(s2, sizeof s2, weights),
               memory_grouped(s3, sizeof s3, crossover), (unsigned long long)((crossover + B_ARTICLE - 1) / B_ARTICLE),
               memory_grouped(s4, sizeof s4, crossover));
}

int lesson8_run(const Options *opt, Trace *tr) {
    (void)opt;   // the article's example has no option
    const MemModel *g = memory_preset("gpt3-175b");

    lessons_heading(tr);
    trace_say(tr,
              "The article: GPT-3 175B, 350 GB of weights; batch b = 64, input s = 512 tokens, output n = 32:\n"
              "the KV cache takes 164 GB, about half of the weights. The formula, every factor named:\n\n"
              "  bytes = 2 (K and V) · layers · d_model · (s + n) · b · bytes per value\n\n"
              "d_model = heads · head_dim, since GPT-3 gives every query head its own key and value heads\n"
              "(MHA); with GQA it is kv_heads · head_dim (lesson 6.2).",
              "原文大意：GPT-3 175B，权重 350 GB；批大小 b = 64，输入 s = 512 个 token，输出 n = 32 个：\n"
              "KV Cache 占 164 GB，约为权重的 0.5 倍。公式，每个因子都写出来：\n\n"
              "  字节数 = 2（K 和 V）· 层数 · d_model · (s + n) · b · 每个数的字节数\n\n"
              "d_model = 头数 · head_dim，因为 GPT-3 每个查询头都有自己的 key、value 头（MHA）；\n"
              "GQA 时换成 kv_heads · head_dim（第 6.2 课）。");

    step_by_step(tr, g);
    other_batches(tr, g);
    return 0;
}
