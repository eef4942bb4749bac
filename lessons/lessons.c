// lessons — the table of lessons: every id of DESIGN.md, in the order of the
// documents, with NULL for those not built yet.
#include "lessons.h"

#include "utf8.h"

#include <stdio.h>
#include <string.h>

const Lesson LESSONS[] = {
    {"1", "Where a KV cache can exist: the causal mask", "KV Cache 是啥：只出现在自回归的 decoder 中",
     "000 §1", lesson1_run, "--data"},
    {"2", "Why the KV cache: the 4-dim example, without and with it", "为什么要进行 KV Cache：4 维示例",
     "000 §2", lesson2_run, "--data --repeat"},
    {"2.1", "Without the KV cache: every step recomputed in full", "不使用 KV Cache 场景", "000 §2.1",
     lesson21_run, "--data --repeat"},
    {"2.2", "With the KV cache: only the new token's row", "使用 KV Cache 场景", "000 §2.2",
     lesson22_run, "--data --repeat"},
    {"3", "The KV cache in LLaMA's generate", "KV Cache 在 Llama 推理流程中的应用", "000 §3.1",
     lesson3_run, "--model --prompt --seed --steps --temperature --top-p"},
    {"4", "What the cache saves: time and FLOPs per token", "KV Cache 优点", "000 §4", lesson4_run,
     "--model --init --preset --seed --steps --prompt --temperature --top-k --repeat --threads"},
    {"5", "What the cache costs: bytes held", "KV Cache 缺点", "000 §5", lesson5_run,
     "--model --init --preset --seed --prompt --temperature --top-k --threads"},
    {"6.1", "PagedAttention: a paged KV cache", "PageAttention 显存优化", "000 §6.1", lesson61_run,
     "--model --init --preset --seed --steps --prompt --temperature --top-k --threads --repeat --block-size --samples"},
    {"6.2", "MHA, GQA and MQA side by side", "MHA、GQA、MQA 优化技术", "000 §6.2", lesson62_run,
     "--preset --steps --repeat --seed --prompt --threads"},
    {"6.3", "FlashAttention: tiled attention, online softmax", "FlashAttention 优化技术", "000 §6.3",
     lesson63_run, "--data --max-n --tile --repeat --threads --model --init --preset --seed"},
    {"7", "Why GPT needs the cache: the generation loop", "GPT 单次推理生成下一个 token，为什么会产生 KV Cache",
     "000 §7", lesson7_run, "--data --steps --repeat"},
    {"8", "Why the cache is large: GPT-3's 164 GB", "为什么 KV Cache 会造成显存很大", "000 §8", lesson8_run, ""},
    {"9", "Why there is a KV cache but no Q cache", "为什么有 KV Cache 而没有 Q Cache", "000 §9",
     lesson9_run, "--data"},
    {"10", "The char GPT of the numpy chapter, with and without the cache", "键值缓存：字符级 GPT 生成",
     "003", lesson10_run, "--model --init --preset --seed --steps --prompt --temperature --top-k --threads --attention --tile --no-race"},
    {"11", "Classic KV cache bugs, injected and caught", "常见的 KV Cache 错误：注入并定位", "beyond",
     lesson11_run, "--model --init --preset --seed --steps --prompt --temperature --top-k --threads --bug"},
    {"12", "Precision: why cached and uncached outputs differ, and a quantised cache",
     "精度：有无缓存的输出为何不同，以及量化的 KV Cache", "beyond", lesson12_run,
     "--model --init --preset --seed --steps --prompt --temperature --top-k --threads --data"},
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
