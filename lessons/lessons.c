// lessons — the table of lessons: every id of DESIGN.md, in the order of the
// documents, with NULL for those not built yet.
//
// A lesson's options column lists the options it honours, as designated
// initializers of its array ([OPT_DATA] = 1); the command line tells the
// user about every other option given ("lesson 7 ignores --color"). A lesson
// that only partly honours one (6.2 always times with the cache) lists it
// and says the rest itself.
#include "lessons.h"

#include "utf8.h"

#include <stdio.h>
#include <string.h>

#define O(x) [OPT_##x] = 1
// Every lesson speaks through the trace: text or JSON, English or Chinese,
// fitted to a screen's width (--width).
#define TRACE_FORM O(FORMAT), O(LANG), O(WIDTH)
// Printed tensors: how many, with how many decimals.
#define TENSORS O(TRACE), O(PRECISION)
#define CACHE_RUNS O(CACHE), O(NO_CACHE)
// The char GPT: the model, and one generation after a prompt.
#define GPT_MODEL O(MODEL), O(INIT), O(PRESET), O(SEED), O(THREADS)
#define GPT_DRAWS O(PROMPT), O(TEMPERATURE), O(TOP_K)
// Lessons 4 and 5 count and time by length only: which characters are drawn
// (--seed, --temperature, --top-k) changes none of their figures.
#define GPT_SHAPE O(MODEL), O(INIT), O(PRESET), O(THREADS)

const Lesson LESSONS[] = {
    {"1", "Where a KV cache can exist: the causal mask", "KV Cache 是啥：只出现在自回归的 decoder 中",
     "000 §1", lesson1_run, {TRACE_FORM, TENSORS, O(STEP), O(COLOR), O(DATA)},
     "with a causal mask, adding a token leaves the earlier rows unchanged; without one (BERT-like) it changes them, so nothing can be cached",
     "有因果掩码时，新增一个 token 不改变之前各行；没有掩码（如 BERT）时会改变，因此无法缓存"},
    {"2", "Why the KV cache: the 4-dim example, without and with it", "为什么要进行 KV Cache：4 维示例",
     "000 §2", lesson2_run, {TRACE_FORM, TENSORS, O(STEP), O(COLOR), CACHE_RUNS, O(DATA), O(REPEAT)},
     "the 4-dim example: steps 1 and 2 recomputed in full (2.1), then step 2 with the cache (2.2), and both compared",
     "4 维示例：第 1、2 步完整重算（2.1），再用缓存算第 2 步（2.2），最后对比两者"},
    {"2.1", "Without the KV cache: every step recomputed in full", "不使用 KV Cache 场景", "000 §2.1",
     lesson21_run, {TRACE_FORM, TENSORS, O(STEP), O(COLOR), O(NO_CACHE), O(DATA), O(REPEAT)},
     "steps 1 and 2 of the 4-dim example, each recomputed in full: every row of Q, K and V",
     "4 维示例的第 1、2 步，每步完整重算 Q、K、V 的每一行"},
    {"2.2", "With the KV cache: only the new token's row", "使用 KV Cache 场景", "000 §2.2",
     lesson22_run, {TRACE_FORM, TENSORS, O(STEP), O(COLOR), O(CACHE), O(DATA), O(REPEAT)},
     "step 2 with the cache: only the new row of Q, K and V is computed, and K, V are concatenated",
     "使用缓存的第 2 步：只计算新一行的 Q、K、V，K、V 拼接到缓存之后"},
    {"3", "The KV cache in LLaMA's generate", "KV Cache 在 Llama 推理流程中的应用", "000 §3.1",
     lesson3_run, {TRACE_FORM, TENSORS, O(STEP), O(COLOR), CACHE_RUNS, O(MODEL), O(PROMPT), O(SEED), O(STEPS), O(TEMPERATURE), O(TOP_P), O(TOKENIZER), O(INIT)},
     "LLaMA's generate on two prompts, on the trained model: start_pos, tokens[:, prev_pos:cur_pos], the preallocated cache_k and cache_v, the mask, sampling",
     "LLaMA 的 generate 在训练过的模型上处理两个提示词：start_pos、tokens[:, prev_pos:cur_pos]、预分配的 cache_k 和 cache_v、掩码、采样"},
    {"4", "What the cache saves: time and FLOPs per token", "KV Cache 优点", "000 §4", lesson4_run,
     {TRACE_FORM, O(STEP), GPT_SHAPE, O(PROMPT), O(STEPS), O(REPEAT)},
     "what the cache saves: FLOPs per token counted both ways, time per token at several positions, prefill against decode",
     "缓存省下了什么：两种方式下每个 token 的 FLOPs，若干位置上每个 token 的时间，prefill 与 decode 对比"},
    {"5", "What the cache costs: bytes held", "KV Cache 缺点", "000 §5", lesson5_run,
     {TRACE_FORM, O(STEP), GPT_SHAPE, O(PROMPT)},
     "what the cache costs: bytes held per step against the weights and the reservation; real models; FLOPs saved per byte held",
     "缓存的代价：每一步占用的字节数，与权重和预留空间对比；真实模型；每占用一个字节省下的 FLOPs"},
    {"6.1", "PagedAttention: a paged KV cache", "PageAttention 显存优化", "000 §6.1", lesson61_run,
     {TRACE_FORM, O(STEP), GPT_MODEL, GPT_DRAWS, O(STEPS), O(REPEAT), O(BLOCK_SIZE), O(SAMPLES)},
     "a paged cache: block table, reference counts, copy-on-write, prefix hashes; the same logits as the contiguous cache; the waste of reserving against paging",
     "分页缓存：块表、引用计数、写时复制、前缀哈希；与连续缓存相同的 logits；预留与分页的浪费对比"},
    {"6.2", "MHA, GQA and MQA side by side", "MHA、GQA、MQA 优化技术", "000 §6.2", lesson62_run,
     {TRACE_FORM, O(STEP), CACHE_RUNS, O(PRESET), O(STEPS), O(REPEAT), O(SEED), O(PROMPT), O(THREADS), O(MODEL), O(TOKENIZER)},
     "MHA, GQA and MQA side by side: key/value heads shared by groups of query heads, cache bytes and bytes read per token",
     "MHA、GQA、MQA 并排：一组查询头共享 key/value 头；每个 token 的缓存字节数与读取字节数"},
    {"6.3", "FlashAttention: tiled attention, online softmax", "FlashAttention 优化技术", "000 §6.3",
     lesson63_run, {TRACE_FORM, TENSORS, O(STEP), O(COLOR), O(DATA), O(MAX_N), O(TILE), O(REPEAT), O(THREADS), O(MODEL), O(INIT), O(PRESET), O(SEED)},
     "tiled attention with an online softmax, equal to the plain one; the HBM/SRAM traffic of both",
     "分块注意力与在线 softmax，结果与普通注意力相同；两者的 HBM/SRAM 读写量"},
    {"7", "Why GPT needs the cache: the generation loop", "GPT 单次推理生成下一个 token，为什么会产生 KV Cache",
     "000 §7", lesson7_run, {TRACE_FORM, TENSORS, O(STEP), O(DATA), O(STEPS), O(REPEAT)},
     "the generation loop: how many K/V rows each step computes with and without the cache, n(n+1)/2 against n",
     "生成循环：每一步使用与不使用缓存各计算多少行 K、V，n(n+1)/2 对 n"},
    {"8", "Why the cache is large: GPT-3's 164 GB", "为什么 KV Cache 会造成显存很大", "000 §8", lesson8_run,
     {TRACE_FORM, O(STEP)},
     "cache size = 2 * layers * d_model * (s+n) * b * bytes: GPT-3's 164 GB against 350 GB of weights, factor by factor; where the cache outgrows the weights",
     "缓存大小 = 2 * 层数 * d_model * (s+n) * b * 字节数：GPT-3 的 164 GB，而权重是 350 GB，逐项计算；缓存何时超过权重"},
    {"9", "Why there is a KV cache but no Q cache", "为什么有 KV Cache 而没有 Q Cache", "000 §9",
     lesson9_run, {TRACE_FORM, TENSORS, O(STEP), O(COLOR), O(DATA)},
     "why no Q cache: old queries never reach the new token's output, with and without the causal mask",
     "为什么没有 Q 缓存：旧的 query 不影响新 token 的输出，有没有因果掩码都一样"},
    {"10", "The char GPT of the numpy chapter, with and without the cache", "键值缓存：字符级 GPT 生成",
     "003", lesson10_run, {TRACE_FORM, O(STEP), O(MODEL), O(INIT), O(PRESET), O(SEED), O(STEPS), O(PROMPT), O(TEMPERATURE), O(TOP_K), O(THREADS), O(ATTENTION), O(TILE), O(NO_RACE), O(REPEAT)},
     "the numpy chapter's char GPT: 256 characters after \"ROMEO:\" both ways, the same text, both timed; on a terminal the two race side by side, live (--no-race: the cache's shapes as it grows, one run after the other)",
     "numpy 章节的字符级 GPT：\"ROMEO:\" 之后生成 256 个字符，两种方式文字相同，分别计时；在终端上两次运行实时并排赛跑（--no-race：先后运行，并显示缓存形状的增长）"},
    {"11", "Classic KV cache bugs, injected and caught", "常见的 KV Cache 错误：注入并定位", "beyond",
     lesson11_run, {TRACE_FORM, O(STEP), GPT_MODEL, GPT_DRAWS, O(STEPS), O(BUG), O(DRAFT), O(GAMMA)},
     "six classic cache bugs injected into the cached path, each caught at the first step where the text parts from the run without the cache; two more in speculative decoding's rollback, caught where the text leaves the target's own",
     "把六种常见的缓存错误注入使用缓存的路径，找出每一种与不用缓存的结果第一次不同的那一步；另有两种出在投机解码的回退里，找出文字偏离目标模型自己文字的那一步"},
    {"12", "Precision: why cached and uncached outputs differ, and a quantised cache",
     "精度：使用与不使用缓存时输出为何不同，以及量化的 KV Cache", "beyond", lesson12_run,
     {TRACE_FORM, O(STEP), GPT_MODEL, GPT_DRAWS, O(STEPS), O(DATA)},
     "why cached and uncached outputs can differ (the summing order, bf16 and fp16), and a cache kept as bf16, fp16, int8 or int4: bytes saved against loss",
     "使用与不使用缓存时输出为何会不同（求和顺序、bf16 与 fp16），以及以 bf16、fp16、int8、int4 保存的缓存：省下的字节与损失"},
    {"13", "Speculative decoding: draft, verify, roll the cache back",
     "投机解码：草稿模型提议，目标模型验证，缓存回退", "beyond", lesson13_run,
     {TRACE_FORM, O(STEP), GPT_MODEL, O(PROMPT), O(STEPS), O(REPEAT), O(DRAFT), O(GAMMA)},
     "speculative decoding: one round traced (drafted tokens, the K + 1 verifying rows, both caches rolled back), greedy text equal to the target's byte for byte, acceptance and measured speed-up for K = 1 .. 8 beside Leviathan et al.'s",
     "投机解码：追踪一轮（草稿 token、K + 1 个验证行、两个缓存的回退），贪心文字与目标模型逐字节相同，K = 1 .. 8 的接受率和实测加速比，与 Leviathan 等人的预期对照"},
    {"14", "Past the window: reset, rolling cache, attention sinks", "越过窗口：重置、滚动缓存与 attention sink",
     "beyond", lesson14_run, {TRACE_FORM, O(STEP), O(MODEL), O(THREADS)},
     "past the window: why the chapter resets, a rolling buffer and sinks + window as caches, the attention sink measured, and five ways past the window compared on the validation text: loss, bytes and time per token",
     "越过窗口：章节为何重置，滚动缓冲区与 sink + 窗口两种缓存，实测 attention sink，并在验证集文字上比较越过窗口的五种做法：损失、字节数与每个 token 的时间"},
};
const int NUM_LESSONS = (int)(sizeof LESSONS / sizeof LESSONS[0]);

const Lesson *lessons_find(const char *id) {
    for (int i = 0; i < NUM_LESSONS; i++)
        if (strcmp(LESSONS[i].id, id) == 0) return &LESSONS[i];
    return NULL;
}

// ----------------------------------------------------------------------------
// Names a class reads: the documents, the headings, the list

// The two documents by the name a teacher gives them; the table keeps the
// file ids of DESIGN.md ("000 §2.1", "003").
static const struct {
    const char *file, *en, *zh;
} DOCUMENTS[] = {
    {"000", "KV Cache article", "KV Cache 篇"},
    {"003", "numpy chapter", "numpy 章节"},
    {"beyond", "beyond the documents", "文档之外"},
};

const char *lessons_section(const Lesson *l, Lang lang, char *buf, int size) {
    const char *rest = l->section;
    const char *doc = l->section;
    for (size_t i = 0; i < sizeof DOCUMENTS / sizeof DOCUMENTS[0]; i++) {
        size_t n = strlen(DOCUMENTS[i].file);
        if (!strncmp(l->section, DOCUMENTS[i].file, n)) {
            doc = lang == LANG_ZH ? DOCUMENTS[i].zh : DOCUMENTS[i].en;
            rest = l->section + n;
            break;
        }
    }
    if (doc == l->section) rest = "";
    snprintf(buf, (size_t)size, "%s%s", doc, rest);
    return buf;
}

void lessons_heading(Trace *tr) {
    const Lesson *l = lessons_find(tr->lesson);
    if (!l) return;
    char sec_en[64], sec_zh[64], en[256], zh[256];
    snprintf(en, sizeof en, "Lesson %s — %s (%s)", l->id, l->title_en,
             lessons_section(l, LANG_EN, sec_en, sizeof sec_en));
    snprintf(zh, sizeof zh, "第 %s 课 —— %s（%s）", l->id, l->title_zh,
             lessons_section(l, LANG_ZH, sec_zh, sizeof sec_zh));
    trace_heading(tr, en, zh);
}

// text, then spaces up to width terminal columns (a CJK character takes two).
static void pad(FILE *f, const char *text, int width) {
    fputs(text, f);
    for (int i = utf8_width(text); i < width; i++) fputc(' ', f);
}

void lessons_print_list(FILE *f, Lang lang, int brief) {
    const char *not_built = lang == LANG_ZH ? "（尚未实现）" : "  (not built yet)";
    int sec_width = 0;
    char sec[64];
    for (int i = 0; i < NUM_LESSONS; i++) {
        int w = utf8_width(lessons_section(&LESSONS[i], lang, sec, sizeof sec));
        if (w > sec_width) sec_width = w;
    }
    for (int i = 0; i < NUM_LESSONS; i++) {
        const Lesson *l = &LESSONS[i];
        const char *title = lang == LANG_ZH ? l->title_zh : l->title_en;
        if (brief) {
            fputs("  ", f);
            pad(f, l->id, 5);
            fprintf(f, "%s%s\n", title, l->run ? "" : not_built);
            continue;
        }
        // id, section, the title in the chosen language, the other below.
        pad(f, l->id, 5);
        pad(f, lessons_section(l, lang, sec, sizeof sec), sec_width + 2);
        fprintf(f, "%s%s\n", title, l->run ? "" : not_built);
        for (int c = 0; c < 5 + sec_width + 2; c++) fputc(' ', f);
        fprintf(f, "%s\n", lang == LANG_ZH ? l->title_en : l->title_zh);
    }
}
