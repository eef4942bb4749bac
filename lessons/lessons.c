// lessons — the table of lessons: every id of DESIGN.md, in the order of the
// documents, with NULL for those not built yet.
#include "lessons.h"

#include <string.h>

const Lesson LESSONS[] = {
    {"1", "Where a KV cache can exist: the causal mask", "KV Cache 是啥：只有因果解码器才有",
     "000 §1", lesson1_run, "--data"},
    {"2", "Why the KV cache: the 4-dim example, without and with it", "为什么要进行 KV Cache：4 维示例",
     "000 §2", lesson2_run, "--data --repeat"},
    {"2.1", "Without the KV cache: every step recomputed in full", "不使用 KV Cache 场景", "000 §2.1",
     lesson21_run, "--data --repeat"},
    {"2.2", "With the KV cache: only the new token's row", "使用 KV Cache 场景", "000 §2.2",
     lesson22_run, "--data --repeat"},
    {"3", "The KV cache in LLaMA's generate", "KV Cache 在 Llama 推理流程中的应用", "000 §3.1",
     lesson3_run, "--model --prompt --seed --steps --temperature --top-p"},
    {"4", "What the cache saves: time and FLOPs per token", "KV Cache 优点", "000 §4", NULL, ""},
    {"5", "What the cache costs: bytes held", "KV Cache 缺点", "000 §5", NULL, ""},
    {"6.1", "PagedAttention: a paged KV cache", "PageAttention 显存优化", "000 §6.1", NULL, ""},
    {"6.2", "MHA, GQA and MQA side by side", "MHA、GQA、MQA 优化技术", "000 §6.2", lesson62_run,
     "--preset --steps --repeat --seed --prompt --threads"},
    {"6.3", "FlashAttention: tiled attention, online softmax", "FlashAttention 优化技术", "000 §6.3",
     lesson63_run, "--data --max-n --tile --repeat --threads --model --init --preset --seed"},
    {"7", "Why GPT needs the cache: the generation loop", "GPT 单次推理生成下一个 token，为什么会产生 KV Cache",
     "000 §7", lesson7_run, "--data --steps"},
    {"8", "Why the cache is large: GPT-3's 164 GB", "为什么 KV Cache 会造成显存很大", "000 §8", NULL, ""},
    {"9", "Why there is a KV cache but no Q cache", "为什么有 KV Cache 而没有 Q Cache", "000 §9",
     lesson9_run, "--data"},
    {"10", "The char GPT of the numpy chapter, with and without the cache", "键值缓存：字符级 GPT 生成",
     "003", lesson10_run, "--model --init --preset --seed --steps --prompt --temperature --top-k --threads --attention --tile"},
};
const int NUM_LESSONS = (int)(sizeof LESSONS / sizeof LESSONS[0]);

const Lesson *lessons_find(const char *id) {
    for (int i = 0; i < NUM_LESSONS; i++)
        if (strcmp(LESSONS[i].id, id) == 0) return &LESSONS[i];
    return NULL;
}
