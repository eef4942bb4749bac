// lessons — the table of lessons: every id of DESIGN.md, in the order of the
// documents, with NULL for those not built yet.
//
// A lesson's last column is the options it honours, as OPTION_BIT masks; the
// command line tells the user about every other option given ("lesson 7
// ignores --color"). A lesson that only partly honours one (6.2 always times
// with the cache) lists it and says the rest itself.
#include "lessons.h"

#include <string.h>

#define O(x) OPTION_BIT(OPT_##x)
// Every lesson speaks through the trace: text or JSON, English or Chinese.
#define TRACE_FORM (O(FORMAT) | O(LANG))
// Printed tensors: how many, with how many decimals.
#define TENSORS (O(TRACE) | O(PRECISION))
#define CACHE_RUNS (O(CACHE) | O(NO_CACHE))

const Lesson LESSONS[] = {
    {"1", "Where a KV cache can exist: the causal mask", "KV Cache 是啥：只有因果解码器才有",
     "000 §1", lesson1_run, TRACE_FORM | TENSORS | O(STEP) | O(COLOR) | O(DATA)},
    {"2", "Why the KV cache: the 4-dim example, without and with it", "为什么要进行 KV Cache：4 维示例",
     "000 §2", lesson2_run, TRACE_FORM | TENSORS | O(STEP) | O(COLOR) | CACHE_RUNS | O(DATA) | O(REPEAT)},
    {"2.1", "Without the KV cache: every step recomputed in full", "不使用 KV Cache 场景", "000 §2.1",
     lesson21_run, TRACE_FORM | TENSORS | O(STEP) | O(COLOR) | O(NO_CACHE) | O(DATA) | O(REPEAT)},
    {"2.2", "With the KV cache: only the new token's row", "使用 KV Cache 场景", "000 §2.2",
     lesson22_run, TRACE_FORM | TENSORS | O(STEP) | O(COLOR) | O(CACHE) | O(DATA) | O(REPEAT)},
    {"3", "The KV cache in LLaMA's generate", "KV Cache 在 Llama 推理流程中的应用", "000 §3.1",
     lesson3_run, TRACE_FORM | TENSORS | O(STEP) | O(COLOR) | CACHE_RUNS | O(MODEL) | O(PROMPT) | O(SEED) | O(STEPS) |
                      O(TEMPERATURE) | O(TOP_P)},
    {"4", "What the cache saves: time and FLOPs per token", "KV Cache 优点", "000 §4", NULL, 0},
    {"5", "What the cache costs: bytes held", "KV Cache 缺点", "000 §5", NULL, 0},
    {"6.1", "PagedAttention: a paged KV cache", "PageAttention 显存优化", "000 §6.1", NULL, 0},
    {"6.2", "MHA, GQA and MQA side by side", "MHA、GQA、MQA 优化技术", "000 §6.2", lesson62_run,
     TRACE_FORM | O(STEP) | CACHE_RUNS | O(PRESET) | O(STEPS) | O(REPEAT) | O(SEED) | O(PROMPT) | O(THREADS)},
    {"6.3", "FlashAttention: tiled attention, online softmax", "FlashAttention 优化技术", "000 §6.3",
     NULL, 0},
    {"7", "Why GPT needs the cache: the generation loop", "GPT 单次推理生成下一个 token，为什么会产生 KV Cache",
     "000 §7", lesson7_run, TRACE_FORM | TENSORS | O(DATA) | O(STEPS) | O(REPEAT)},
    {"8", "Why the cache is large: GPT-3's 164 GB", "为什么 KV Cache 会造成显存很大", "000 §8", NULL, 0},
    {"9", "Why there is a KV cache but no Q cache", "为什么有 KV Cache 而没有 Q Cache", "000 §9",
     lesson9_run, TRACE_FORM | TENSORS | O(STEP) | O(COLOR) | O(DATA)},
    {"10", "The char GPT of the numpy chapter, with and without the cache", "键值缓存：字符级 GPT 生成",
     "003", lesson10_run, TRACE_FORM | O(STEP) | O(MODEL) | O(INIT) | O(PRESET) | O(SEED) | O(STEPS) | O(PROMPT) |
                              O(TEMPERATURE) | O(TOP_K) | O(THREADS)},
};
const int NUM_LESSONS = (int)(sizeof LESSONS / sizeof LESSONS[0]);

const Lesson *lessons_find(const char *id) {
    for (int i = 0; i < NUM_LESSONS; i++)
        if (strcmp(LESSONS[i].id, id) == 0) return &LESSONS[i];
    return NULL;
}
