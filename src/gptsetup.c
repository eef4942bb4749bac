// gptsetup — what the char GPT's commands (generate, bench, eval, init) and
// lessons 10, 11 and 12 share: the model the options ask for, and a prompt's tokens.
#include "gptsetup.h"

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

int gptsetup_model(GptModel *m, const Options *opt, int fallback, int *random_note) {
    char err[512], buf[4096];
    if (random_note) *random_note = 0;
    if (opt->model_path && opt->init) {
        fprintf(stderr, "kvdemo: --model and --init exclude each other; give one\n");
        return 2;
    }
    if (opt->preset && !opt->init) {
        fprintf(stderr, "kvdemo: --preset goes with --init random (a model file has its own shape)\n");
        return 2;
    }
    const char *path = opt->model_path;
    if (!path && !opt->init) {
        path = paths_shipped(GPT_SHIPPED_MODEL, buf, sizeof buf);
        if (access(path, R_OK) != 0) {
            if (!fallback) {
                fprintf(stderr, "kvdemo: no model: %s is missing; give --model FILE or --init random\n", GPT_SHIPPED_MODEL);
                return 1;
            }
            path = NULL;
            if (random_note) *random_note = 1;
        }
    }
    if (path) {
        if (gpt_load(m, path, err, sizeof err)) {
            fprintf(stderr, "kvdemo: %s\n", err);
            return 1;
        }
        return 0;
    }
    GptConfig cfg;
    const char *preset = opt->preset ? opt->preset : "seed";
    if (gpt_preset(&cfg, preset)) {
        fprintf(stderr, "kvdemo: unknown preset '%s'; valid: seed, tiny\n", preset);
        return 2;
    }
    uint32_t vocab[256];
    int V = 0;
    for (const unsigned char *c = (const unsigned char *)GPT_SHAKESPEARE_VOCAB; *c; c++) vocab[V++] = *c;
    if (gpt_init_random(m, cfg, vocab, (uint32_t)opt->seed, err, sizeof err)) {
        fprintf(stderr, "kvdemo: %s\n", err);
        return 1;
    }
    return 0;
}

// What the model knows, for a prompt it cannot read: runs of three or more
// letters or digits as ranges, then the others as they are,
// "A-Z, a-z, space, newline and !$&',-.3:;?". Cut with "..." past size.
static void describe_vocab(char *buf, size_t size, const GptModel *m) {
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
            nl += (size_t)snprintf(named + nl, nl < sizeof named ? sizeof named - nl : 0, "%s%s-%s", nl ? ", " : "",
                                   (char *)a, (char *)b);
            i = j + 1;
            continue;
        }
        uint32_t c = cps[i++];
        if (c == ' ' || c == '\n' || c < 0x20 || c == 0x7F) {
            char u[16];
            snprintf(u, sizeof u, "U+%04X", (unsigned)c);
            nl += (size_t)snprintf(named + nl, nl < sizeof named ? sizeof named - nl : 0, "%s%s", nl ? ", " : "",
                                   c == ' ' ? "space" : c == '\n' ? "newline" : u);
        } else {
            utf8_encode(a, c);
            sl += (size_t)snprintf(singles + sl, sl < sizeof singles ? sizeof singles - sl : 0, "%s", (char *)a);
        }
    }
    free(cps);
    int cut = snprintf(buf, size, "%s%s%s", named, named[0] && singles[0] ? " and " : "", singles);
    if (nl >= sizeof named || sl >= sizeof singles || (size_t)cut >= size) snprintf(buf + (size > 4 ? size - 4 : 0), 4, "...");
}

int gptsetup_prompt(int **tokens, int *n, const GptModel *m, const char *prompt, int steps) {
    char err[256];
    int max = (int)strlen(prompt);
    if (max == 0) {
        fprintf(stderr, "kvdemo: the prompt is empty; give at least one character, e.g. --prompt \"ROMEO:\"\n");
        return 2;
    }
    *tokens = malloc(sizeof(int) * (size_t)(max + steps));
    if (!*tokens) {
        fprintf(stderr, "kvdemo: out of memory\n");
        return 1;
    }
    *n = gpt_encode(*tokens, m, prompt, max, err, sizeof err);
    if (*n < 0) {
        char known[512];
        describe_vocab(known, sizeof known, m);
        int romeo_tokens[8];
        char ignored[64];
        int romeo = gpt_encode(romeo_tokens, m, DEFAULT_PROMPT, 8, ignored, sizeof ignored) > 0;
        fprintf(stderr, "kvdemo: --prompt: %s; the model knows %d characters: %s%s\n", err, m->cfg.V, known,
                romeo ? "; try --prompt \"ROMEO:\"" : "");
        free(*tokens);
        *tokens = NULL;
        return 2;
    }
    return 0;
}

int gptsetup_attention(const Options *opt, const GptModel *m) {
    int flash = opt->attention && !strcmp(opt->attention, "flash");
    if (opt->tile && !flash) {
        fprintf(stderr, "kvdemo: --tile goes with --attention flash (plain attention has no tiles)\n");
        return 2;
    }
    if (!flash) return flash_gpt_use(FLASH_PLAIN, 0, 0, 0, 0);
    GptConfig g = m->cfg;
    if (flash_gpt_use(FLASH_TILED, opt->tile ? opt->tile : FLASH_DEFAULT_TILE, g.T, g.H, g.C / g.H)) {
        fprintf(stderr, "kvdemo: out of memory\n");
        return 1;
    }
    return 0;
}

void gptsetup_attention_end(void) { flash_gpt_use(FLASH_PLAIN, 0, 0, 0, 0); }

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
