// gptsetup — what the char GPT's commands (generate, race, bench, eval, init)
// and the lessons on it share: the model the options ask for, the prompt and
// its tokens.
#include "gptsetup.h"

#include "fileio.h"
#include "flash.h"
#include "paths.h"
#include "sampler.h"
#include "train.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const DEFAULT_PROMPT = "ROMEO:";

const char *gptsetup_prompt_text(const Options *opt) {
    return opt->n_prompts ? opt->prompts[0] : DEFAULT_PROMPT;
}

// Why the model cannot read a prompt, in Chinese: the first character it does
// not know, counted from 1 as a class counts, or the byte that is not UTF-8.
static void prompt_reason_zh(char *out, size_t size, const GptModel *m, const char *prompt) {
    const unsigned char *s = (const unsigned char *)prompt;
    size_t n = strlen(prompt);
    int index = 0;
    for (size_t at = 0; at < n; index++) {
        uint32_t c;
        int len = utf8_decode(&c, s + at, n - at);
        if (len == 0) {
            snprintf(out, size, "第 %zu 个字节（0x%02X）不是有效的 UTF-8 文本", at + 1, s[at]);
            return;
        }
        int known = 0;
        for (int v = 0; v < m->cfg.V && !known; v++) known = m->vocab[v] == c;
        if (!known) {
            char name[48];
            snprintf(out, size, "第 %d 个字符%s不在模型的词表里", index + 1, utf8_name(name, sizeof name, c, 1));
            return;
        }
        at += (size_t)len;
    }
}

const char *gptsetup_model_path(const Options *opt, char *buf, size_t size) {
    if (opt->model_path) return opt->model_path;
    return opt->init ? NULL : paths_shipped(GPT_SHIPPED_MODEL, buf, size);
}

int gptsetup_model(GptModel *m, const Options *opt, int fallback, int *random_note) {
    char err[512], buf[4096];
    if (random_note) *random_note = 0;
    if (opt->model_path && opt->init) {
        fileio_error(opt->lang, "--model and --init exclude each other; give one", "--model 和 --init 不能同时给；只给其中一个");
        return 2;
    }
    if (opt->preset && !opt->init) {
        fileio_error(opt->lang, "--preset goes with --init random (a model file has its own shape)",
                     "--preset 要和 --init random 一起用（模型文件有自己的形状）");
        return 2;
    }
    const char *path = gptsetup_model_path(opt, buf, sizeof buf);
    if (!opt->model_path && path) {
        if (access(path, R_OK) != 0) {
            if (!fallback) {
                fileio_error(opt->lang, "no model: %s is missing; give --model FILE or --init random",
                             "没有模型：找不到 %s；请给 --model FILE 或 --init random", GPT_SHIPPED_MODEL);
                return 1;
            }
            path = NULL;
            if (random_note) *random_note = 1;
        }
    }
    if (path) {
        if (gpt_load(m, path, ERR(opt->lang, err))) {
            fileio_error(opt->lang, "%s", "%s", err);
            return 1;
        }
        return 0;
    }
    GptConfig cfg;
    const char *preset = opt->preset ? opt->preset : "seed";
    if (gpt_preset(&cfg, preset)) {
        fileio_error(opt->lang, "unknown preset '%s'; valid: seed, tiny", "没有“%s”这个预设；可用的：seed、tiny", preset);
        return 2;
    }
    uint32_t vocab[256];
    int V = 0;
    for (const unsigned char *c = (const unsigned char *)GPT_SHAKESPEARE_VOCAB; *c; c++) vocab[V++] = *c;
    if (gpt_init_random(m, cfg, vocab, (uint32_t)opt->seed, ERR(opt->lang, err))) {
        fileio_error(opt->lang, "%s", "%s", err);
        return 1;
    }
    return 0;
}

// What the model knows, for a prompt it cannot read: runs of three or more
// letters or digits as ranges, then the others as they are,
// "A-Z, a-z, space, newline and !$&',-.3:;?". Cut with "..." past size.
static void describe_vocab(Lang lang, char *buf, size_t size, const GptModel *m) {
    int V = m->cfg.V;
    uint32_t *cps = malloc(sizeof(uint32_t) * (size_t)V);
    buf[0] = '\0';
    if (!cps) return;
    memcpy(cps, m->vocab, sizeof(uint32_t) * (size_t)V);
    for (int i = 1; i < V; i++)   // insertion sort: V is small
        for (int j = i; j > 0 && cps[j - 1] > cps[j]; j--) {
            uint32_t t = cps[j];
            cps[j] = cps[j - 1];
            cps[j - 1] = t;
        }
    char named[256] = "", singles[256] = "";
    size_t nl = 0, sl = 0;
    for (int i = 0; i < V;) {
        int j = i;
        while (j + 1 < V && cps[j + 1] == cps[j] + 1) j++;
        unsigned char a[5] = {0}, b[5] = {0};
        // Ranges of letters or digits only: ",-." is clearer as it is.
        int alnum = (cps[i] >= 'a' && cps[j] <= 'z') || (cps[i] >= 'A' && cps[j] <= 'Z') ||
                    (cps[i] >= '0' && cps[j] <= '9');
        if (j - i >= 2 && alnum) {
            utf8_encode(a, cps[i]);
            utf8_encode(b, cps[j]);
            nl += (size_t)snprintf(named + nl, nl < sizeof named ? sizeof named - nl : 0, "%s%s-%s",
                                   nl ? fileio_text(lang, ", ", "、") : "", (char *)a, (char *)b);
            i = j + 1;
            continue;
        }
        uint32_t c = cps[i++];
        if (c == ' ' || c == '\n' || c < 0x20 || c == 0x7F) {
            char u[16];
            snprintf(u, sizeof u, "U+%04X", (unsigned)c);
            nl += (size_t)snprintf(named + nl, nl < sizeof named ? sizeof named - nl : 0, "%s%s",
                                   nl ? fileio_text(lang, ", ", "、") : "",
                                   c == ' '    ? fileio_text(lang, "space", "空格")
                                   : c == '\n' ? fileio_text(lang, "newline", "换行")
                                                : u);
        } else {
            utf8_encode(a, c);
            sl += (size_t)snprintf(singles + sl, sl < sizeof singles ? sizeof singles - sl : 0, "%s", (char *)a);
        }
    }
    free(cps);
    int cut = snprintf(buf, size, "%s%s%s", named, named[0] && singles[0] ? fileio_text(lang, " and ", " 以及 ") : "",
                       singles);
    if (nl >= sizeof named || sl >= sizeof singles || (size_t)cut >= size) snprintf(buf + (size > 4 ? size - 4 : 0), 4, "...");
}

int gptsetup_prompt(Lang lang, int **tokens, int *n, const GptModel *m, const char *prompt, int steps) {
    char err[256];
    int max = (int)strlen(prompt);
    if (max == 0) {
        fileio_error(lang, "the prompt is empty; give at least one character, e.g. --prompt \"ROMEO:\"",
                     "提示词是空的；至少给一个字符，例如 --prompt \"ROMEO:\"");
        return 2;
    }
    *tokens = malloc(sizeof(int) * (size_t)(max + steps));
    if (!*tokens) {
        fileio_error(lang, "out of memory", "内存不足");
        return 1;
    }
    *n = gpt_encode(*tokens, m, prompt, max, ERR(lang, err));
    if (*n < 0) {
        char known[512];
        describe_vocab(lang, known, sizeof known, m);
        int romeo_tokens[8];
        int romeo = gpt_encode(romeo_tokens, m, DEFAULT_PROMPT, 8, ERR_NONE) > 0;
        if (lang == LANG_ZH) prompt_reason_zh(err, sizeof err, m, prompt);
        fileio_error(lang, "--prompt: %s; the model knows %d characters: %s%s", "--prompt：%s；模型认识 %d 个字符：%s%s",
                     err, m->cfg.V, known,
                     romeo ? fileio_text(lang, "; try --prompt \"ROMEO:\"", "；可以试试 --prompt \"ROMEO:\"") : "");
        free(*tokens);
        *tokens = NULL;
        return 2;
    }
    return 0;
}

int gptsetup_lesson(GptModel *m, int *random_note, int **tokens, int *n, const Options *opt, const char *fit) {
    *random_note = 0;
    int rc = gptsetup_model(m, opt, 1, random_note);
    if (rc) return rc;
    int T = m->cfg.T;
    if (fit && T < 2) {   // no prompt leaves room for a token to come
        fileio_error(opt->lang, "lesson %s needs a model whose context holds at least 2 tokens (the prompt and the next); "
                     "this one holds %d",
                     "第 %s 课需要上下文至少能放 2 个 token 的模型（提示词和下一个）；这个模型只能放 %d 个", fit, T);
        gpt_free(m);
        return 2;
    }
    rc = gptsetup_prompt(opt->lang, tokens, n, m, gptsetup_prompt_text(opt), fit ? T + 1 : 0);
    if (!rc && fit && *n >= T) {
        fileio_error(opt->lang, "lesson %s: the prompt has %d tokens; the context holds %d, so give at most %d",
                     "第 %s 课：提示词有 %d 个 token；上下文只能放 %d 个，所以最多给 %d 个", fit, *n, T, T - 1);
        free(*tokens);
        *tokens = NULL;
        rc = 2;
    }
    if (rc) gpt_free(m);
    return rc;
}

int gptsetup_attention(const Options *opt, GptState *s) {
    int flash = opt->attention && !strcmp(opt->attention, "flash");
    if (opt->tile && !flash) {
        fileio_error(opt->lang, "--tile goes with --attention flash (plain attention has no tiles)",
                     "--tile 要和 --attention flash 一起用（普通注意力没有分块）");
        return 2;
    }
    if (kvcontig_set_tile(&s->cache, flash ? (opt->tile ? opt->tile : FLASH_DEFAULT_TILE) : 0)) {
        fileio_error(opt->lang, "out of memory", "内存不足");
        return 1;
    }
    return 0;
}

char *gptsetup_generate_text(int *tokens, GptState *s, const GptModel *m, const int *prompt, int n_prompt,
                           int steps, int use_cache, const Options *opt, GptStepFn on_step, void *ctx) {
    Sampler sampler;
    float temperature = opt->temperature >= 0 ? (float)opt->temperature : 1.0f;
    if (sampler_init(&sampler, m->cfg.V, temperature, opt->top_k, (uint32_t)opt->seed)) return NULL;
    memcpy(tokens, prompt, sizeof(int) * (size_t)n_prompt);
    // np.random.seed(seed); trainer.generate(dataset, prompt, steps, use_cache)
    int len = gpt_generate(tokens, s, m, &sampler, n_prompt, steps, use_cache, on_step, ctx);
    sampler_free(&sampler);
    size_t need = gpt_decode(NULL, 0, m, tokens, len);
    char *text = malloc(need + 1);
    if (text) gpt_decode(text, need + 1, m, tokens, len);
    return text;
}
