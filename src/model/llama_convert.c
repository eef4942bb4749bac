// llama_convert — MHA to GQA or MQA before uptraining (llama_convert.h).
//
// Legend (llama.h): C dim, D head size, G0 key/value heads of the source,
// G of the result, r = G0 / G.
#include "llama_convert.h"

#include "fileio.h"
#include "train_llama.h"

#include <string.h>

static const char *const NAMES[] = {"mean", "first", "random"};

const char *llama_convert_name(LlamaConvert how) {
    return NAMES[how];
}

int llama_convert_parse(LlamaConvert *how, const char *name) {
    for (int i = 0; i < 3; i++)
        if (name && strcmp(name, NAMES[i]) == 0) {
            *how = (LlamaConvert)i;
            return 0;
        }
    return -1;
}

int llama_convert_check(const LlamaModel *src, int G, Err err) {
    int G0 = src->cfg.n_kv_heads;
    if (src->bpe)
        return fileio_fail2(err, "only a model with kvdemo's character vocabulary can be converted",
                            "只有使用 kvdemo 字符词表的模型才能转换");
    if (G >= 1 && G < G0 && G0 % G == 0) return 0;
    char valid[128] = "";
    size_t at = 0;
    for (int g = 1; g < G0 && at + 12 < sizeof valid; g++)
        if (G0 % g == 0) at += (size_t)snprintf(valid + at, sizeof valid - at, "%s%d", at ? ", " : "", g);
    if (!at) snprintf(valid, sizeof valid, "none");
    return fileio_fail2(err,
                        "--kv-heads %d cannot be made from %d key/value heads: valid are the divisors of %d below it (%s)",
                        "--kv-heads %d 无法由 %d 个 key/value 头转换得到：可选的是小于 %d 的约数（%s）", G, G0, G0,
                        valid);
}

// wk or wv (C, G*D) of dst: head g = src head g*r (src (C, G0*D)).
static void keep_first(float *to, const float *from, int C, int G0, int G, int D) {
    int r = G0 / G;
    for (int c = 0; c < C; c++)
        for (int g = 0; g < G; g++)
            memcpy(to + ((size_t)c * G + g) * D, from + ((size_t)c * G0 + (size_t)g * r) * D, sizeof(float) * D);
}

// wk, wv of every layer of dst from fresh training weights of its shape.
static int draw_random(LlamaModel *dst, uint64_t seed, Err err) {
    LlamaModel fresh;
    if (llama_new(&fresh, &dst->cfg, err) != 0) return -1;
    llama_train_init(&fresh, seed);
    size_t n = (size_t)dst->cfg.dim * dst->cfg.n_kv_heads * dst->cfg.head_dim;
    for (int l = 0; l < dst->cfg.n_layers; l++) {
        memcpy(dst->p.layers[l].wk, fresh.p.layers[l].wk, sizeof(float) * n);
        memcpy(dst->p.layers[l].wv, fresh.p.layers[l].wv, sizeof(float) * n);
    }
    llama_free(&fresh);
    return 0;
}

int llama_convert(LlamaModel *dst, const LlamaModel *src, int G, LlamaConvert how, uint64_t seed,
                  Err err) {
    if (llama_convert_check(src, G, err) != 0) return -1;
    LlamaConfig cfg = src->cfg;
    cfg.n_kv_heads = G;
    if (llama_config_check(&cfg, err) != 0 || llama_new(dst, &cfg, err) != 0) return -1;
    memcpy(dst->vocab, src->vocab, sizeof(uint32_t) * (size_t)cfg.vocab_size);
    // every weight, and wk, wv mean-pooled (llama.c, as lesson 6.2 shows it)
    llama_pool_kv_heads(dst, src);
    int rc = 0;
    if (how == LLAMA_CONVERT_FIRST)
        for (int l = 0; l < cfg.n_layers; l++) {
            keep_first(dst->p.layers[l].wk, src->p.layers[l].wk, cfg.dim, src->cfg.n_kv_heads, G, cfg.head_dim);
            keep_first(dst->p.layers[l].wv, src->p.layers[l].wv, cfg.dim, src->cfg.n_kv_heads, G, cfg.head_dim);
        }
    else if (how == LLAMA_CONVERT_RANDOM)
        rc = draw_random(dst, seed, err);
    if (rc != 0) llama_free(dst);
    return rc;
}
