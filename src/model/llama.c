// llama — the LLaMA-style model of the article's section 3.1, read top to
// bottom: configuration and weights, the model file, the tokenizer, the
// layers (RMSNorm, rotary embeddings, attention with the preallocated cache,
// SwiGLU), Transformer.forward, sample_top_p, and LLaMA.generate.
//
// Legend (as in llama.h): V vocab, C dim, L layers, H query heads, G key/value
// heads, D head_dim = C / H, F SwiGLU hidden size, B max_batch_size,
// T max_seq_len, N tokens fed per row (seqlen), S = start_pos + seqlen.
//
// One promise shapes this file: the cached run and the --no-cache run give
// the same logits bit for bit. Every number of a row is computed the same way
// whatever other rows are fed with it: matmuls through ops_matmul (same
// summation order for any number of rows), and one score / softmax / output
// row at a time below, where a masked column adds an exact 0 to the sums.
#include "llama.h"

#include "bpe.h"
#include "bigmem.h"
#include "fileio.h"
#include "provenance.h"
#include "timer.h"
#include "utf8.h"

#include "ops.h"
#include "rng.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Configuration and weights

// pad, bos and eos have no character; then '\n', printable ASCII, and the
// characters of the article's prompts and sentence, and some punctuation.
static const uint32_t DEFAULT_CJK[] = {
    0x5929, 0x6c14, 0x771f, 0x597d,   // 天 气 真 好
    0x4f60, 0x4eca, 0x4e0d, 0x9519,   // 你 今 不 错
    0xff0c, 0x3002, 0xff01, 0xff1f,   // ， 。 ！ ？
};
enum { NUM_DEFAULT_CJK = sizeof DEFAULT_CJK / sizeof DEFAULT_CJK[0] };

int llama_default_vocab_size(void) { return 3 + 1 + 95 + NUM_DEFAULT_CJK; }

void llama_vocab_default(LlamaModel *m) {
    assert(m->cfg.vocab_size == llama_default_vocab_size());
    int v = 0;
    m->vocab[v++] = 0;   // pad
    m->vocab[v++] = 0;   // bos
    m->vocab[v++] = 0;   // eos
    m->vocab[v++] = '\n';
    for (uint32_t c = 0x20; c <= 0x7e; c++) m->vocab[v++] = c;
    for (int i = 0; i < NUM_DEFAULT_CJK; i++) m->vocab[v++] = DEFAULT_CJK[i];
}

LlamaConfig llama_config_default(void) {
    LlamaConfig c = {
        .vocab_size = llama_default_vocab_size(),
        .dim = 32,
        .n_layers = 2,
        .n_heads = 4,
        .n_kv_heads = 4,
        .hidden_dim = 64,
        .max_seq_len = 32,
        .rope_theta = 10000.0f,
        .norm_eps = 1e-5f,
    };
    c.head_dim = c.dim / c.n_heads;
    return c;
}

int llama_config_check(LlamaConfig *c, Err err) {
    struct {
        const char *name;
        int value, lo, hi;
    } sizes[] = {
        {"vocab_size", c->vocab_size, 4, 1 << 20},  {"dim", c->dim, 2, 1 << 14},
        {"n_layers", c->n_layers, 1, 256},          {"n_heads", c->n_heads, 1, 1024},
        {"n_kv_heads", c->n_kv_heads, 1, 1024},     {"hidden_dim", c->hidden_dim, 1, 1 << 17},
        {"max_seq_len", c->max_seq_len, 1, 1 << 16},  {"window", c->window, 0, 1 << 16},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (sizes[i].value < sizes[i].lo || sizes[i].value > sizes[i].hi) {
            fileio_fail2(err, "%s is %d; it must be between %d and %d", "%s 是 %d；它必须在 %d 到 %d 之间", sizes[i].name,
                    sizes[i].value, sizes[i].lo, sizes[i].hi);
            return -1;
        }
    }
    if (c->dim % c->n_heads != 0) {
        fileio_fail2(err, "dim %d is not a multiple of n_heads %d", "dim %d 不是 n_heads %d 的倍数", c->dim, c->n_heads);
        return -1;
    }
    if (c->n_heads % c->n_kv_heads != 0) {
        fileio_fail2(err, "n_heads %d is not a multiple of n_kv_heads %d", "n_heads %d 不是 n_kv_heads %d 的倍数", c->n_heads,
                c->n_kv_heads);
        return -1;
    }
    if ((c->dim / c->n_heads) % 2 != 0) {
        fileio_fail2(err, "head_dim %d (dim / n_heads) must be even for the rotary embedding",
                     "head_dim %d（dim / n_heads）必须是偶数，旋转位置编码（RoPE）才能成对旋转",
                c->dim / c->n_heads);
        return -1;
    }
    if (!(isfinite(c->rope_theta) && c->rope_theta > 1.0f)) {
        fileio_fail2(err, "rope_theta %g must be a finite number above 1", "rope_theta %g 必须是大于 1 的有限数",
                     c->rope_theta);
        return -1;
    }
    if (!(isfinite(c->norm_eps) && c->norm_eps > 0.0f && c->norm_eps < 1.0f)) {
        fileio_fail2(err, "norm_eps %g must be between 0 and 1", "norm_eps %g 必须在 0 和 1 之间", c->norm_eps);
        return -1;
    }
    c->head_dim = c->dim / c->n_heads;
    return 0;
}

// The sizes of the weights in file order: one row per tensor of a layer.
typedef struct {
    size_t tok_embeddings, attention_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3, norm, output;
} LlamaSizes;

static LlamaSizes llama_sizes(const LlamaConfig *c) {
    size_t V = (size_t)c->vocab_size, C = (size_t)c->dim, F = (size_t)c->hidden_dim;
    size_t HD = (size_t)c->n_heads * (size_t)(c->dim / c->n_heads);
    size_t GD = (size_t)c->n_kv_heads * (size_t)(c->dim / c->n_heads);
    return (LlamaSizes){
        .tok_embeddings = V * C,
        .attention_norm = C, .wq = C * HD, .wk = C * GD, .wv = C * GD, .wo = HD * C,
        .ffn_norm = C, .w1 = C * F, .w2 = F * C, .w3 = C * F,
        .norm = C, .output = C * V,
    };
}

int64_t llama_row_work(const LlamaConfig *c) {
    int64_t wq = (int64_t)c->dim * c->dim, w1 = (int64_t)c->dim * c->hidden_dim, out = (int64_t)c->dim * c->vocab_size;
    int64_t most = wq > w1 ? wq : w1;
    return most > out ? most : out;
}

size_t llama_num_params(const LlamaConfig *c) {
    LlamaSizes s = llama_sizes(c);
    size_t layer = s.attention_norm + s.wq + s.wk + s.wv + s.wo + s.ffn_norm + s.w1 + s.w2 + s.w3;
    return s.tok_embeddings + (size_t)c->n_layers * layer + s.norm + s.output;
}

// Points the named views into params, in file order.
static void llama_params_carve(LlamaModel *m) {
    LlamaSizes s = llama_sizes(&m->cfg);
    float *p = m->params;
    m->p.tok_embeddings = p, p += s.tok_embeddings;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        LlamaLayerParams *w = &m->p.layers[l];
        w->attention_norm = p, p += s.attention_norm;
        w->wq = p, p += s.wq;
        w->wk = p, p += s.wk;
        w->wv = p, p += s.wv;
        w->wo = p, p += s.wo;
        w->ffn_norm = p, p += s.ffn_norm;
        w->w1 = p, p += s.w1;
        w->w2 = p, p += s.w2;
        w->w3 = p, p += s.w3;
    }
    m->p.norm = p, p += s.norm;
    m->p.output = p, p += s.output;
    assert((size_t)(p - m->params) == m->num_params);
}

static float *alloc_floats(size_t n, int *failed) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) *failed = 1;
    return p;
}

// The weights: in huge pages from 2 MB up (bigmem.h), which a large model
// fills with a few hundred page faults where 4 KB pages take tens of
// thousands.
static float *alloc_params(size_t n, int *failed) {
    float *p = bigmem_alloc(n * sizeof(float));
    if (!p) *failed = 1;
    return p;
}

int llama_new(LlamaModel *m, const LlamaConfig *cfg, Err err) {
    memset(m, 0, sizeof *m);
    LlamaConfig c = *cfg;
    if (llama_config_check(&c, err) != 0) return -1;
    m->cfg = c;
    size_t V = (size_t)c.vocab_size, L = (size_t)c.n_layers;
    size_t D = (size_t)c.head_dim, T = (size_t)c.max_seq_len;
    int failed = 0;
    m->num_params = llama_num_params(&c);
    m->params = alloc_params(m->num_params, &failed);
    m->vocab = calloc(V, sizeof(uint32_t));
    m->p.layers = calloc(L, sizeof(LlamaLayerParams));
    if (!m->vocab || !m->p.layers) failed = 1;
    m->freqs_cis = alloc_floats(T * D, &failed);
    if (failed) {
        llama_free(m);
        fileio_fail2(err, "out of memory for a model of %zu weights", "内存不足：放不下 %zu 个权重的模型",
                     llama_num_params(&c));
        return -1;
    }
    llama_params_carve(m);
    llama_precompute_freqs_cis(m->freqs_cis, c.head_dim, c.max_seq_len, c.rope_theta);
    return 0;
}

void llama_free(LlamaModel *m) {
    bpe_free(m->bpe);
    free(m->bpe);
    bigmem_free(m->params, m->num_params * sizeof(float));
    free(m->freqs_cis);
    free(m->vocab);
    free(m->p.layers);
    memset(m, 0, sizeof *m);
}

int llama_state_init(LlamaState *s, const LlamaModel *m, int max_batch_size, Err err) {
    memset(s, 0, sizeof *s);
    if (max_batch_size < 1 || max_batch_size > LLAMA_MAX_BATCH) {
        fileio_fail2(err, "max_batch_size is %d; it must be between 1 and %d",
                     "max_batch_size 是 %d；它必须在 1 到 %d 之间", max_batch_size, LLAMA_MAX_BATCH);
        return -1;
    }
    const LlamaConfig *c = &m->cfg;
    size_t C = (size_t)c->dim, L = (size_t)c->n_layers, H = (size_t)c->n_heads;
    size_t G = (size_t)c->n_kv_heads, D = (size_t)c->head_dim, F = (size_t)c->hidden_dim;
    size_t B = (size_t)max_batch_size, T = (size_t)c->max_seq_len, BT = B * T;
    s->max_batch_size = max_batch_size;
    s->mask_floats = T * T < LLAMA_MASK_FLOATS ? T * T : LLAMA_MASK_FLOATS;
    float **const fields[] = {&s->x,   &s->xb,  &s->xq, &s->xk,   &s->xv,   &s->attn,
                              &s->xb2, &s->hb,  &s->hb2, &s->mask, &s->last};
    const size_t sizes[] = {BT * C, BT * C, BT * H * D, BT * G * D, BT * G * D, BT * H * D,
                            BT * C, BT * F, BT * F,     s->mask_floats, B * C};
    s->mem = bigmem_carve(fields, sizes, (int)(sizeof sizes / sizeof sizes[0]), &s->mem_bytes);   // zeroed
    KvShape shape = {.L = (int)L, .B = (int)B, .T = (int)T, .H = (int)H, .G = (int)G, .D = (int)D};
    s->freqs_far = malloc(sizeof(float) * T * D);
    if (!s->mem || !s->freqs_far || kvprealloc_init(&s->cache, shape) != 0) {
        llama_state_free(s);
        fileio_fail2(err, "out of memory for a cache of %d x %d", "内存不足：放不下 %d x %d 的缓存",
                     max_batch_size, c->max_seq_len);
        return -1;
    }
    s->cache.base.window = c->window;   // the band mask, when the model was trained with one
    return 0;
}

void llama_state_free(LlamaState *s) {
    free(s->freqs_far);
    bigmem_free(s->mem, s->mem_bytes);
    kvcache_free(&s->cache.base);
    memset(s, 0, sizeof *s);
}

void llama_state_reset(LlamaState *s) {
    kvcache_reset(&s->cache.base);   // zeros again, as Attention.__init__ left them
    memset(&s->info, 0, sizeof s->info);
}

int64_t llama_cache_bytes_per_token(const LlamaConfig *c) {
    // cache_k and cache_v each hold G * D floats per token in every layer.
    return 2 * (int64_t)c->n_layers * c->n_kv_heads * (c->dim / c->n_heads) * (int64_t)sizeof(float);
}

// ---------------------------------------------------------------------------
// Random weights and the generator of the draws

// A uniform float in [0, 1) from the top 24 bits of rng.h's next number: the
// weights below and generate's draws. The state starts at the seed.
static float uniform_f32(uint64_t *rng) {
    return (float)(rng_next(rng) >> 40) / 16777216.0f;   // 24 bits / 2^24
}

static void fill_uniform(float *w, size_t n, float bound, uint64_t *rng) {
    for (size_t i = 0; i < n; i++) w[i] = (2.0f * uniform_f32(rng) - 1.0f) * bound;
}

static void fill_ones(float *w, size_t n) {
    for (size_t i = 0; i < n; i++) w[i] = 1.0f;
}

void llama_init_random(LlamaModel *m, uint64_t seed) {
    const LlamaConfig *c = &m->cfg;
    LlamaSizes s = llama_sizes(c);
    uint64_t r = seed;
    float in_c = 1.0f / sqrtf((float)c->dim), in_f = 1.0f / sqrtf((float)c->hidden_dim);
    fill_uniform(m->p.tok_embeddings, s.tok_embeddings, sqrtf(3.0f), &r);   // variance 1
    for (int l = 0; l < c->n_layers; l++) {
        LlamaLayerParams *w = &m->p.layers[l];
        fill_ones(w->attention_norm, s.attention_norm);
        fill_uniform(w->wq, s.wq, in_c, &r);
        fill_uniform(w->wk, s.wk, in_c, &r);
        fill_uniform(w->wv, s.wv, in_c, &r);
        fill_uniform(w->wo, s.wo, in_c, &r);   // H * D = C inputs
        fill_ones(w->ffn_norm, s.ffn_norm);
        fill_uniform(w->w1, s.w1, in_c, &r);
        fill_uniform(w->w2, s.w2, in_f, &r);
        fill_uniform(w->w3, s.w3, in_c, &r);
    }
    fill_ones(m->p.norm, s.norm);
    fill_uniform(m->p.output, s.output, in_c, &r);
}

// dst = src except wk and wv, which the caller converts: dst must have src's
// shape except n_kv_heads.
static void copy_but_kv_heads(LlamaModel *dst, const LlamaModel *src) {
    const LlamaConfig *a = &src->cfg, *b = &dst->cfg;
    assert(a->vocab_size == b->vocab_size && a->dim == b->dim && a->n_layers == b->n_layers &&
           a->n_heads == b->n_heads && a->hidden_dim == b->hidden_dim);
    LlamaSizes sa = llama_sizes(a);
    memcpy(dst->vocab, src->vocab, sizeof(uint32_t) * (size_t)a->vocab_size);
    memcpy(dst->p.tok_embeddings, src->p.tok_embeddings, sizeof(float) * sa.tok_embeddings);
    for (int l = 0; l < a->n_layers; l++) {
        const LlamaLayerParams *ws = &src->p.layers[l];
        LlamaLayerParams *wd = &dst->p.layers[l];
        memcpy(wd->attention_norm, ws->attention_norm, sizeof(float) * sa.attention_norm);
        memcpy(wd->wq, ws->wq, sizeof(float) * sa.wq);
        memcpy(wd->wo, ws->wo, sizeof(float) * sa.wo);
        memcpy(wd->ffn_norm, ws->ffn_norm, sizeof(float) * sa.ffn_norm);
        memcpy(wd->w1, ws->w1, sizeof(float) * sa.w1);
        memcpy(wd->w2, ws->w2, sizeof(float) * sa.w2);
        memcpy(wd->w3, ws->w3, sizeof(float) * sa.w3);
    }
    memcpy(dst->p.norm, src->p.norm, sizeof(float) * sa.norm);
    memcpy(dst->p.output, src->p.output, sizeof(float) * sa.output);
}

void llama_pool_kv_heads(LlamaModel *dst, const LlamaModel *src) {
    const LlamaConfig *a = &src->cfg, *b = &dst->cfg;
    assert(a->n_kv_heads % b->n_kv_heads == 0);
    copy_but_kv_heads(dst, src);
    int C = a->dim, D = a->head_dim, r = a->n_kv_heads / b->n_kv_heads;
    for (int l = 0; l < a->n_layers; l++) {
        // wk, wv (C, G*D): new head g = mean of old heads g*r .. g*r + r - 1
        const float *from[2] = {src->p.layers[l].wk, src->p.layers[l].wv};
        float *to[2] = {dst->p.layers[l].wk, dst->p.layers[l].wv};
        for (int t = 0; t < 2; t++)
            for (int c = 0; c < C; c++)
                for (int g = 0; g < b->n_kv_heads; g++)
                    for (int d = 0; d < D; d++) {
                        float sum = 0.0f;
                        for (int k = 0; k < r; k++)
                            sum += from[t][(size_t)c * a->n_kv_heads * D + (size_t)(g * r + k) * D + d];
                        to[t][(size_t)c * b->n_kv_heads * D + (size_t)g * D + d] = sum / (float)r;
                    }
    }
}

void llama_repeat_kv_heads(LlamaModel *dst, const LlamaModel *src) {
    const LlamaConfig *a = &src->cfg;
    assert(dst->cfg.n_kv_heads == dst->cfg.n_heads);
    copy_but_kv_heads(dst, src);
    int C = a->dim, D = a->head_dim, H = a->n_heads, G = a->n_kv_heads, rep = H / G;
    for (int l = 0; l < a->n_layers; l++) {
        // wk, wv (C, H*D) of dst: the columns of head h are those of src head h / rep
        const LlamaLayerParams *ws = &src->p.layers[l];
        LlamaLayerParams *wd = &dst->p.layers[l];
        for (int c = 0; c < C; c++)
            for (int h = 0; h < H; h++) {
                size_t to = (size_t)c * H * D + (size_t)h * D;
                size_t from = (size_t)c * G * D + (size_t)(h / rep) * D;
                memcpy(wd->wk + to, ws->wk + from, sizeof(float) * (size_t)D);
                memcpy(wd->wv + to, ws->wv + from, sizeof(float) * (size_t)D);
            }
    }
}

// ---------------------------------------------------------------------------
// The model file (docs/llama-format.md): "KVLM", uint32 version 2, uint32
// V C L H G F T, float32 rope_theta and norm_eps, uint32 vocab (V), then
// every weight as float32 in file order, then the uint32 Adler-32 of every
// byte before it. All little-endian. Version 1 is the same without the
// checksum, and still loads. Version 3 is version 2 with one more uint32
// after norm_eps, the window of sliding-window attention (a model trained
// with --window); a model without one is written as version 2, byte for
// byte as before.

enum { LLAMA_FILE_VERSION = 2, LLAMA_FILE_UNCHECKED = 1, LLAMA_FILE_WINDOWED = 3, LLAMA_HEADER_BYTES = 44,
       LLAMA_WINDOWED_HEADER_BYTES = 48 };

// The vocabulary: no character for pad, bos, eos; then distinct code points.
// Returns 0 or -1 with err.
static int check_vocab(const LlamaModel *m, const char *path, Err err) {
    int V = m->cfg.vocab_size;
    for (int i = 0; i < V; i++) {
        uint32_t cp = m->vocab[i];
        int special = i <= LLAMA_EOS_ID;
        if (special ? cp != 0 : (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)))
            return fileio_fail2(err, "%s: vocab[%d] = %u is not %s", "%s：vocab[%d] = %u 不是%s", path, i, cp,
                                special ? (err.lang == LANG_ZH ? " 0（编号 0、1、2 是 pad、bos、eos）" : "0 (ids 0, 1, 2 are pad, bos, eos)")
                                        : (err.lang == LANG_ZH ? " Unicode 字符" : "a Unicode character"));
    }
    uint32_t *sorted = malloc(sizeof(uint32_t) * (size_t)V);
    if (!sorted) return fileio_fail2(err, "%s: out of memory", "%s：内存不足", path);
    memcpy(sorted, m->vocab, sizeof(uint32_t) * (size_t)V);
    qsort(sorted, (size_t)V, sizeof(uint32_t), utf8_cmp);
    int rc = 0;
    for (int i = LLAMA_EOS_ID + 2; i < V && rc == 0; i++)
        if (sorted[i] == sorted[i - 1])
            rc = fileio_fail2(err, "%s: character U+%04X appears twice in the vocabulary",
                              "%s：字符 U+%04X 在词表里出现了两次", path, sorted[i]);
    free(sorted);
    return rc;
}

// The Adler-32 of the header h, the vocabulary and the weights as read
// (still in the file's byte order) against the 4 bytes that follow them in
// f. Returns 0 or -1 with err.
static int check_sum(FILE *f, const unsigned char *h, size_t hbytes, const LlamaModel *m, const char *path,
                     Err err) {
    uint32_t sum = fileio_adler32(1, h, hbytes);
    sum = fileio_adler32(sum, m->vocab, sizeof(uint32_t) * (size_t)m->cfg.vocab_size);
    sum = fileio_adler32(sum, m->params, sizeof(float) * m->num_params);
    unsigned char b[4];
    if (fread(b, 1, 4, f) != 4)
        return fileio_fail2(err, "%s: cannot read the checksum: %s", "%s：读取校验和时出错：%s", path,
                            fileio_read_reason(err.lang, f));
    if (le_get_u32(b) != sum)
        return fileio_fail2(err, "%s: checksum mismatch: the file is damaged (copy it again, or write it again)",
                            "%s：校验和不符：文件已损坏（请重新复制，或重新写出）", path);
    provenance_note(path, sum);   // the lesson page's footer names the weights
    return 0;
}

// The header from f (size bytes long) into h (hbytes of it: the windowed
// version's is longer), its version and the shape it gives, checked.
// Returns 0 or -1 with err.
static int read_header(LlamaConfig *c, uint32_t *version, unsigned char *h, size_t *hbytes, FILE *f,
                       uint64_t size, const char *path, Err err) {
    char why[160];
    size_t got = fread(h, 1, LLAMA_HEADER_BYTES, f);
    if (got < 4 && got < size)   // the file holds more: the read failed, or it shrank
        return fileio_fail2(err, "%s: cannot read its header: %s", "%s：无法读取文件头：%s", path,
                            fileio_read_reason(err.lang, f));
    if (got < 4 || memcmp(h, "KVLM", 4) != 0)
        return fileio_fail2(err, "%s: not a kvdemo LLaMA model file (it does not start with \"KVLM\")",
                            "%s：不是 kvdemo 的 LLaMA 模型文件（开头不是“KVLM”）", path);
    if (got < LLAMA_HEADER_BYTES)
        return fileio_fail2(err, "%s: truncated header (%zu of %d bytes)",
                            "%s：文件头不完整（只有 %zu 字节，应有 %d 字节）", path, got, LLAMA_HEADER_BYTES);
    *version = le_get_u32(h + 4);
    if (*version != LLAMA_FILE_VERSION && *version != LLAMA_FILE_UNCHECKED && *version != LLAMA_FILE_WINDOWED)
        return fileio_fail2(err, "%s: version %u; this kvdemo reads versions %d, %d and %d",
                            "%s：版本 %u；这个 kvdemo 读的是版本 %d、%d 和 %d", path, *version, LLAMA_FILE_UNCHECKED,
                            LLAMA_FILE_VERSION, LLAMA_FILE_WINDOWED);
    *hbytes = *version == LLAMA_FILE_WINDOWED ? LLAMA_WINDOWED_HEADER_BYTES : LLAMA_HEADER_BYTES;
    if (*hbytes > LLAMA_HEADER_BYTES && fread(h + LLAMA_HEADER_BYTES, 1, 4, f) != 4)
        return fileio_fail2(err, "%s: truncated header (no window after norm_eps)",
                            "%s：文件头不完整（norm_eps 之后没有 window）", path);
    uint32_t u[7];
    for (int i = 0; i < 7; i++) {
        u[i] = le_get_u32(h + 8 + 4 * i);
        if (u[i] > (1u << 30)) u[i] = 1u << 30;   // out of every range below
    }
    *c = (LlamaConfig){
        .vocab_size = (int)u[0], .dim = (int)u[1], .n_layers = (int)u[2], .n_heads = (int)u[3],
        .n_kv_heads = (int)u[4], .hidden_dim = (int)u[5], .max_seq_len = (int)u[6],
        .rope_theta = le_get_f32(h + 36), .norm_eps = le_get_f32(h + 40),
        .window = *hbytes > LLAMA_HEADER_BYTES ? (int)(le_get_u32(h + 44) > (1u << 30) ? 1u << 30 : le_get_u32(h + 44)) : 0,
    };
    if (llama_config_check(c, ERR(err.lang, why)) != 0)
        return fileio_fail2(err, "%s: bad header: %s", "%s：文件头有误：%s", path, why);
    return 0;
}

// The file must be exactly header + vocab + weights (+ checksum) long.
// Returns 0 or -1 with err.
static int check_file_size(uint64_t size, size_t hbytes, uint32_t version, const LlamaConfig *c,
                           const char *path, Err err) {
    uint64_t want = hbytes + 4ull * (uint64_t)c->vocab_size + 4ull * llama_num_params(c) +
                    (version != LLAMA_FILE_UNCHECKED ? 4 : 0);
    if (size == want) return 0;
    return fileio_fail2(err,
                        "%s: %llu bytes, but a model of this header (V %d, C %d, L %d, H %d, G %d, F %d, "
                        "T %d) takes %llu: %s",
                        "%s：%llu 字节，而按文件头（V %d、C %d、L %d、H %d、G %d、F %d、T %d）应为 %llu 字节：%s",
                        path, (unsigned long long)size, c->vocab_size, c->dim, c->n_layers, c->n_heads,
                        c->n_kv_heads, c->hidden_dim, c->max_seq_len, (unsigned long long)want,
                        size < want ? (err.lang == LANG_ZH ? "文件不完整" : "truncated")
                                    : (err.lang == LANG_ZH ? "末尾多出字节" : "trailing bytes"));
}

// The vocabulary and the weights of m (made for its header) from f, their
// checksum checked (but in version 1), put in the host's byte order, then
// checked: a valid vocabulary, finite weights. Returns 0 or -1 with err.
static int read_body(LlamaModel *m, FILE *f, const unsigned char *h, size_t hbytes, uint32_t version,
                     const char *path, Err err) {
    int V = m->cfg.vocab_size;
    size_t n_params = m->num_params;
    if (fread(m->vocab, sizeof(uint32_t), (size_t)V, f) != (size_t)V ||
        fread(m->params, sizeof(float), n_params, f) != n_params)
        return fileio_fail2(err, "%s: cannot read the vocabulary and weights: %s",
                            "%s：读取词表和权重时出错：%s", path, fileio_read_reason(err.lang, f));
    if (version != LLAMA_FILE_UNCHECKED && check_sum(f, h, hbytes, m, path, err) != 0) return -1;
    if (!fileio_host_is_little_endian()) {
        for (int i = 0; i < V; i++) m->vocab[i] = le_get_u32((unsigned char *)&m->vocab[i]);
        for (size_t i = 0; i < n_params; i++) m->params[i] = le_get_f32((unsigned char *)&m->params[i]);
    }
    if (check_vocab(m, path, err) != 0) return -1;
    for (size_t i = 0; i < n_params; i++)
        if (!isfinite(m->params[i]))
            return fileio_fail2(err, "%s: weight %zu is not a finite number", "%s：第 %zu 个权重不是有限数",
                                path, i);
    return 0;
}

int llama_load(LlamaModel *m, const char *path, Err err) {
    memset(m, 0, sizeof *m);
    uint64_t size = 0;
    char why[160];
    FILE *f = fileio_open_read(path, &size, err);
    if (!f) return -1;
    unsigned char h[LLAMA_WINDOWED_HEADER_BYTES];
    size_t hbytes = 0;
    uint32_t version = 0;
    LlamaConfig c;
    if (read_header(&c, &version, h, &hbytes, f, size, path, err) != 0) goto fail;
    if (check_file_size(size, hbytes, version, &c, path, err) != 0) goto fail;
    if (llama_new(m, &c, ERR(err.lang, why)) != 0) {
        fileio_fail2(err, "%s: %s", "%s：%s", path, why);
        goto fail;
    }
    if (read_body(m, f, h, hbytes, version, path, err) != 0) goto fail;
    fclose(f);
    return 0;
fail:
    fclose(f);
    llama_free(m);
    return -1;
}

int llama_save(const LlamaModel *m, const char *path, Err err) {
    const LlamaConfig *c = &m->cfg;
    AtomicFile a;
    if (fileio_open(&a, path, err) != 0) return -1;
    unsigned char h[LLAMA_WINDOWED_HEADER_BYTES];
    size_t hbytes = c->window ? LLAMA_WINDOWED_HEADER_BYTES : LLAMA_HEADER_BYTES;
    memcpy(h, "KVLM", 4);
    uint32_t fields[] = {c->window ? LLAMA_FILE_WINDOWED : LLAMA_FILE_VERSION, (uint32_t)c->vocab_size, (uint32_t)c->dim,
                         (uint32_t)c->n_layers, (uint32_t)c->n_heads, (uint32_t)c->n_kv_heads,
                         (uint32_t)c->hidden_dim, (uint32_t)c->max_seq_len};
    for (int i = 0; i < 8; i++) le_put_u32(h + 4 + 4 * i, fields[i]);
    le_put_f32(h + 36, c->rope_theta);
    le_put_f32(h + 40, c->norm_eps);
    le_put_u32(h + 44, (uint32_t)c->window);   // written in version 3 only
    fwrite(h, 1, hbytes, a.f);
    uint32_t sum = fileio_adler32(1, h, hbytes);
    unsigned char b[4];
    for (int i = 0; i < c->vocab_size; i++) {
        le_put_u32(b, m->vocab[i]);
        fwrite(b, 1, 4, a.f);
        sum = fileio_adler32(sum, b, 4);
    }
    for (size_t i = 0; i < m->num_params; i++) {
        le_put_f32(b, m->params[i]);
        fwrite(b, 1, 4, a.f);
        sum = fileio_adler32(sum, b, 4);
    }
    le_put_u32(b, sum);
    fwrite(b, 1, 4, a.f);
    return fileio_commit(&a, err);   // a write error above fails here, with its reason
}


// ---------------------------------------------------------------------------
// Tokenizer: tokenizer.encode(x, bos=True, eos=False) over code points

int llama_encode(int *ids, const LlamaModel *m, const char *text, int bos, int eos, int max_ids,
                 Err err) {
    if (m->bpe) return bpe_encode(ids, m->bpe, text, bos, eos, max_ids, err);
    // The reason first, then the prompt, shortened and with invalid bytes
    // escaped, so that the line stays one readable line.
    char quoted[200];
    utf8_quote(quoted, sizeof quoted, text, 40);
    int n = 0;
    if (bos) {
        if (n >= max_ids) goto too_long;
        ids[n++] = LLAMA_BOS_ID;
    }
    for (const unsigned char *s = (const unsigned char *)text; *s;) {
        uint32_t cp;
        int len = utf8_decode(&cp, s, strlen((const char *)s));
        if (len == 0) {
            fileio_fail2(err, "the prompt is not valid UTF-8 at byte %d (0x%02X): \"%s\"",
                         "提示词在字节偏移 %d 处（0x%02X）不是有效的 UTF-8 文本：“%s”",
                        (int)(s - (const unsigned char *)text), *s, quoted);
            return -1;
        }
        int id = -1;
        for (int v = LLAMA_EOS_ID + 1; v < m->cfg.vocab_size; v++)
            if (m->vocab[v] == cp) {
                id = v;
                break;
            }
        if (id < 0) {
            char one[8] = {0}, shown[24];
            memcpy(one, s, (size_t)len);
            fileio_fail2(err,
                         "unknown character '%s' (U+%04X) at byte %d of the prompt: the model's vocabulary "
                         "has %d tokens and not this one: \"%s\"",
                         "未知字符“%s”（U+%04X），位于提示词的字节偏移 %d 处：模型的词表有 %d 个 token，没有这个字符：“%s”",
                        utf8_quote(shown, sizeof shown, one, 1), cp, (int)(s - (const unsigned char *)text),
                        m->cfg.vocab_size, quoted);
            return -1;
        }
        if (n >= max_ids) goto too_long;
        ids[n++] = id;
        s += len;
    }
    if (eos) {
        if (n >= max_ids) goto too_long;
        ids[n++] = LLAMA_EOS_ID;
    }
    return n;
too_long:
    fileio_fail2(err, "the prompt is longer than %d tokens (%zu bytes): \"%s\"",
                 "提示词超过了 %d 个 token（%zu 字节）：“%s”", max_ids, strlen(text),
                quoted);
    return -1;
}

const char *llama_token_text(char *buf, const LlamaModel *m, int id) {
    assert(id >= 0 && id < m->cfg.vocab_size);
    if (m->bpe) return bpe_token_text(m->bpe, -1, id);
    int n = id <= LLAMA_EOS_ID ? 0 : utf8_encode((unsigned char *)buf, m->vocab[id]);
    buf[n] = '\0';
    return buf;
}

int llama_token_bytes(const LlamaModel *m) { return m->bpe ? m->bpe->max_text_bytes : 4; }

size_t llama_decode(char *out, const LlamaModel *m, const int *ids, int n, size_t out_size) {
    assert(out_size > 0);
    if (m->bpe) return bpe_decode(out, m->bpe, ids, n, out_size);
    size_t len = 0;
    char ch[5];
    for (int i = 0; i < n; i++) {
        size_t k = strlen(llama_token_text(ch, m, ids[i]));
        if (len + k + 1 > out_size) break;   // the caller sizes out for 4 bytes a token
        memcpy(out + len, ch, k);
        len += k;
    }
    out[len] = '\0';
    return len;
}

// ---------------------------------------------------------------------------
// Layers

void llama_rmsnorm(float *out, const float *x, const float *w, float eps, int N, int C) {
    // x (N, C), w (C) -> out (N, C)
    for (int n = 0; n < N; n++) {
        const float *xn = x + (size_t)n * C;
        float *on = out + (size_t)n * C;
        // x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        float ss = 0.0f;
        for (int c = 0; c < C; c++) ss += xn[c] * xn[c];
        float r = 1.0f / sqrtf(ss / (float)C + eps);
        // output * self.weight
        for (int c = 0; c < C; c++) on[c] = (xn[c] * r) * w[c];
    }
}

void llama_precompute_freqs_cis(float *freqs_cis, int D, int T, float theta) {
    // freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    // t = torch.arange(end); freqs = torch.outer(t, freqs).float()
    // freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64
    // (LLaMA precomputes max_seq_len * 2 rows; T rows are all kvdemo reads.)
    llama_freqs_cis_rows(freqs_cis, D, 0, T, theta);
}

void llama_freqs_cis_rows(float *freqs_cis, int D, int from, int n, float theta) {
    for (int r = 0; r < n; r++)
        for (int i = 0; i < D / 2; i++) {
            float freq = 1.0f / powf(theta, (float)(2 * i) / (float)D);
            float angle = (float)(from + r) * freq;
            freqs_cis[((size_t)r * (D / 2) + i) * 2 + 0] = cosf(angle);
            freqs_cis[((size_t)r * (D / 2) + i) * 2 + 1] = sinf(angle);
        }
}

void llama_apply_rotary_emb(float *x, const float *freqs_cis, int N, int nh, int D) {
    // x (N, nh, D), freqs_cis (N, D/2, 2)
    // xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    // xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < nh; h++) {
            float *v = x + ((size_t)n * nh + h) * D;
            const float *f = freqs_cis + (size_t)n * D;
            for (int i = 0; i < D / 2; i++) {
                float a = v[2 * i], b = v[2 * i + 1];     // a + bi
                float c = f[2 * i], d = f[2 * i + 1];     // cos + i sin
                v[2 * i] = a * c - b * d;                 // (a + bi)(c + di)
                v[2 * i + 1] = a * d + b * c;
            }
        }
}

static void set4(int *s, int a, int b, int c, int d) { s[0] = a, s[1] = b, s[2] = c, s[3] = d; }

void llama_forward(float *logits, LlamaState *s, const LlamaModel *m, const int *tokens,
                   int start_pos, int bsz, int seqlen, int stride) {
    const LlamaConfig *c = &m->cfg;
    int C = c->dim, H = c->n_heads, G = c->n_kv_heads, D = c->head_dim, F = c->hidden_dim;
    int V = c->vocab_size;
    assert(bsz >= 1 && bsz <= s->max_batch_size && seqlen >= 1 && start_pos >= 0);
    // the state was made for a model of this shape (llama_state_init)
    KvCache *kv = s->kv ? s->kv : &s->cache.base;
    Pool *pool = s->pool;   // the threads the matmuls share (NULL: this one)
    assert(kv->shape.L == c->n_layers && (kv->rolling || kv->shape.T == c->max_seq_len) && kv->shape.G == G &&
           kv->shape.D == D);
    assert((kv->rolling ? seqlen : start_pos + seqlen) <= c->max_seq_len && stride >= seqlen);
    int N = bsz * seqlen, S = start_pos + seqlen;
    // the rows from start_pos on are fed (again): the cache keeps those before
    kvcache_truncate(kv, start_pos);

    // h = self.tok_embeddings(tokens)   (bsz, seqlen, C)
    for (int b = 0; b < bsz; b++)
        for (int n = 0; n < seqlen; n++) {
            int id = tokens[(size_t)b * stride + n];
            assert(id >= 0 && id < V);
            memcpy(s->x + ((size_t)b * seqlen + n) * C, m->p.tok_embeddings + (size_t)id * C,
                   sizeof(float) * C);
        }
    // freqs_cis = self.freqs_cis[start_pos : start_pos + seqlen]
    // (past T, which only a rolling cache reaches, the same rows made here)
    const float *freqs_cis = m->freqs_cis + (size_t)start_pos * D;
    if (start_pos + seqlen > c->max_seq_len) {
        llama_freqs_cis_rows(s->freqs_far, D, start_pos, seqlen, c->rope_theta);
        freqs_cis = s->freqs_far;
    }

    // mask = None
    // if seqlen > 1:
    //     mask = torch.full((1, 1, seqlen, seqlen), float("-inf"))
    //     mask = torch.triu(mask, diagonal=start_pos + 1)
    // The article's mask has seqlen columns; the scores have start_pos +
    // seqlen. They agree only at start_pos 0, which is the only time generate
    // feeds more than one token (the prompt, at prev_pos 0); at start_pos > 0
    // the article's line would not broadcast, and its diagonal start_pos + 1
    // is the right one only for the full width. kvdemo builds the full width,
    // triu(full((seqlen, start_pos + seqlen), -inf), diagonal=start_pos + 1),
    // which is the article's mask whenever the article's runs at all. With one
    // token (seqlen 1) there is no mask: the new row may see every cached
    // position, all of which are earlier.
    // Attention masks by the loop bound (a column past start_pos + n gets
    // -inf, exactly what adding the mask gives); the mask as a tensor is
    // built for the trace only, when it fits the LLAMA_MASK_FLOATS kept for it
    // (a model of context 65536 would otherwise need 17 GB for it).
    int masked = seqlen > 1;
    const float *mask = NULL;
    if (masked && !kv->rolling && (size_t)seqlen * S <= s->mask_floats) {
        ops_causal_mask(s->mask, seqlen, S, start_pos);
        for (int i = 0; i < seqlen && c->window; i++)   // the band: what lies W back and more
            for (int j = 0; j <= start_pos + i - c->window; j++) s->mask[(size_t)i * S + j] = -INFINITY;
        mask = s->mask;
    }

    for (int l = 0; l < c->n_layers; l++) {
        const LlamaLayerParams *w = &m->p.layers[l];
        // h = x + self.attention.forward(self.attention_norm(x), start_pos, freqs_cis, mask)
        llama_rmsnorm(s->xb, s->x, w->attention_norm, c->norm_eps, N, C);
        // xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        ops_matmul(s->xq, s->xb, w->wq, NULL, pool, N, C, H * D);
        ops_matmul(s->xk, s->xb, w->wk, NULL, pool, N, C, G * D);
        ops_matmul(s->xv, s->xb, w->wv, NULL, pool, N, C, G * D);
        // xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)
        for (int b = 0; b < bsz; b++) {
            llama_apply_rotary_emb(s->xq + (size_t)b * seqlen * H * D, freqs_cis, seqlen, H, D);
            if (!kv->raw_keys)   // a cache that rotates keys itself (kvcache_window.c) takes them raw
                llama_apply_rotary_emb(s->xk + (size_t)b * seqlen * G * D, freqs_cis, seqlen, G, D);
        }
        // self.cache_k[:bsz, start_pos : start_pos + seqlen] = xk   (and cache_v = xv)
        kvcache_append(kv, l, s->xk, s->xv, bsz, seqlen, start_pos);
        // output = softmax(xq @ keys.transpose(2, 3) / sqrt(head_dim) + mask) @ values
        // (kvcache_prealloc.c; layer 0's query head 0 kept for a trace)
        kvcache_attend(kv, s->attn, l == 0 ? s->keep_scores : NULL, s->xq, pool, l, bsz, seqlen, start_pos);
        // return self.wo(output)
        ops_matmul(s->xb2, s->attn, w->wo, NULL, pool, N, H * D, C);
        for (size_t i = 0; i < (size_t)N * C; i++) s->x[i] += s->xb2[i];

        // out = h + self.feed_forward.forward(self.ffn_norm(h))
        // feed_forward: self.w2(F.silu(self.w1(x)) * self.w3(x))
        llama_rmsnorm(s->xb, s->x, w->ffn_norm, c->norm_eps, N, C);
        ops_matmul(s->hb, s->xb, w->w1, NULL, pool, N, C, F);
        ops_matmul(s->hb2, s->xb, w->w3, NULL, pool, N, C, F);
        for (size_t i = 0; i < (size_t)N * F; i++) {
            float a = s->hb[i];
            s->hb[i] = a / (1.0f + expf(-a)) * s->hb2[i];   // silu(a) = a * sigmoid(a)
        }
        ops_matmul(s->xb2, s->hb, w->w2, NULL, pool, N, F, C);
        for (size_t i = 0; i < (size_t)N * C; i++) s->x[i] += s->xb2[i];
    }

    // h = self.norm(h)
    llama_rmsnorm(s->xb, s->x, m->p.norm, c->norm_eps, N, C);
    // output = self.output(h[:, -1, :])  # only compute last logits
    for (int b = 0; b < bsz; b++)
        memcpy(s->last + (size_t)b * C, s->xb + ((size_t)b * seqlen + seqlen - 1) * C,
               sizeof(float) * C);
    ops_matmul(logits, s->last, m->p.output, NULL, pool, bsz, C, V);

    LlamaForwardInfo *info = &s->info;
    info->bsz = bsz, info->seqlen = seqlen, info->start_pos = start_pos;
    info->write_from = start_pos, info->write_to = S, info->read_to = S;
    info->has_mask = masked;
    info->mask = mask;
    info->freqs_cis = freqs_cis;
    set4(info->xq_shape, bsz, seqlen, H, D);
    set4(info->xk_shape, bsz, seqlen, G, D);
    set4(info->keys_shape, bsz, S, G, D);
    set4(info->values_shape, bsz, S, G, D);
    set4(info->scores_shape, bsz, H, seqlen, S);
    info->rows_computed = N;
}

// ---------------------------------------------------------------------------
// Sampling

// Does token a come after token b in torch.sort(descending=True)? Larger
// probabilities first; equal ones by token id, so the order is reproducible.
static int sorts_after(const float *probs, int a, int b) {
    if (probs[a] != probs[b]) return probs[a] < probs[b];
    return a > b;
}

// order (V) = token ids by descending probability: a heap sort, which needs
// no memory beyond order itself.
static void sort_desc(int *order, const float *probs, int V) {
    for (int i = 0; i < V; i++) order[i] = i;
    for (int end = V, start = V / 2 - 1;;) {
        int root;
        if (start >= 0) {
            root = start--;          // building the heap
        } else {
            if (--end <= 0) break;   // moving the heap's top to the end
            int t = order[0];
            order[0] = order[end], order[end] = t;
            root = 0;
        }
        // sift down: the heap's top is the element that sorts last
        for (int child; (child = 2 * root + 1) < end; root = child) {
            if (child + 1 < end && sorts_after(probs, order[child + 1], order[child])) child++;
            if (!sorts_after(probs, order[child], order[root])) break;
            int t = order[root];
            order[root] = order[child], order[child] = t;
        }
    }
}

int llama_sample_top_p(float *sorted, int *order, const float *probs, float p, float uniform,
                       int V) {
    // probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True)
    sort_desc(order, probs, V);
    for (int i = 0; i < V; i++) sorted[i] = probs[order[i]];
    // probs_sum = torch.cumsum(probs_sort, dim=-1)
    // mask = probs_sum - probs_sort > p
    // probs_sort[mask] = 0.0
    // (PyTorch's cumsum of float32 on the CPU adds in double; so does this.)
    double run = 0.0;
    for (int i = 0; i < V; i++) {
        run += sorted[i];
        float probs_sum = (float)run;
        if (probs_sum - sorted[i] > p) sorted[i] = 0.0f;
    }
    // probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
    float sum = 0.0f;
    for (int i = 0; i < V; i++) sum += sorted[i];
    for (int i = 0; i < V; i++) sorted[i] /= sum;
    // next_token = torch.multinomial(probs_sort, num_samples=1), made explicit:
    // the first position whose cumulative probability exceeds one uniform
    // draw in [0, 1) (the inverse CDF); if rounding leaves the total just
    // under the draw, the last position still kept.
    run = 0.0;
    int pick = -1, last_kept = 0;
    for (int i = 0; i < V && pick < 0; i++) {
        if (sorted[i] == 0.0f) continue;
        last_kept = i;
        run += sorted[i];
        if ((double)uniform < run) pick = i;
    }
    if (pick < 0) pick = last_kept;
    // next_token = torch.gather(probs_idx, -1, next_token)
    return order[pick];
}

// ---------------------------------------------------------------------------
// LLaMA.generate

int llama_generation_new(LlamaGeneration *g, const LlamaState *s, const LlamaModel *m, Err err) {
    memset(g, 0, sizeof *g);
    size_t B = (size_t)s->max_batch_size, T = (size_t)m->cfg.max_seq_len;
    size_t V = (size_t)m->cfg.vocab_size;
    g->tokens = calloc(B * T, sizeof(int));
    g->input_text_mask = calloc(B * T, 1);
    g->logits = calloc(T * B * V, sizeof(float));
    g->probs = calloc(B * V, sizeof(float));
    g->sorted = calloc(V, sizeof(float));
    g->order = calloc(V, sizeof(int));
    g->sampled = calloc(B, sizeof(int));
    g->next_token = calloc(B, sizeof(int));
    g->kept = calloc(B, 1);
    g->text = calloc(B, sizeof(char *));
    size_t row = (size_t)llama_token_bytes(m) * T + 1;   // the text of T tokens
    char *text = calloc(B * row, 1);
    if (!g->tokens || !g->input_text_mask || !g->logits || !g->probs || !g->sorted ||
        !g->order || !g->sampled || !g->next_token || !g->kept || !g->text || !text) {
        free(text);
        llama_generation_free(g);
        fileio_fail2(err, "out of memory for a generation of %zu x %zu tokens", "内存不足：放不下 %zu x %zu 个 token 的生成",
                     B, T);
        return -1;
    }
    for (size_t b = 0; b < B; b++) g->text[b] = text + b * row;
    return 0;
}

void llama_generation_free(LlamaGeneration *g) {
    if (g->text) free(g->text[0]);
    free(g->text);
    free(g->tokens);
    free(g->input_text_mask);
    free(g->logits);
    free(g->probs);
    free(g->sorted);
    free(g->order);
    free(g->sampled);
    free(g->next_token);
    free(g->kept);
    memset(g, 0, sizeof *g);
}

// The prompts as the rows of g->tokens, bsz of them: each encoded with bos
// (T apart first), then total_len = min(T, max_gen_len + the longest), the
// rows moved total_len apart and padded, and the mask of the prompt's tokens.
// Returns 0, or -1 with err when a prompt cannot be encoded.
static int generate_prompts(LlamaGeneration *g, const LlamaModel *m, const char *const *prompts, int bsz,
                            int max_gen_len, Err err) {
    int T = m->cfg.max_seq_len;
    // prompt_tokens = [self.tokenizer.encode(x, bos=True, eos=False) for x in prompts]
    // (encoded T apart first; moved to total_len apart once total_len is known)
    g->min_prompt_size = T, g->max_prompt_size = 0;
    for (int k = 0; k < bsz; k++) {
        int n = llama_encode(g->tokens + (size_t)k * T, m, prompts[k], 1, 0, T, err);
        if (n < 0) return -1;
        g->prompt_len[k] = n;
        if (n < g->min_prompt_size) g->min_prompt_size = n;
        if (n > g->max_prompt_size) g->max_prompt_size = n;
    }
    // total_len = min(params.max_seq_len, max_gen_len + max_prompt_size)
    int total_len = max_gen_len + g->max_prompt_size;
    if (total_len > T) total_len = T;
    g->total_len = total_len;
    // tokens = torch.full((bsz, total_len), self.tokenizer.pad_id)
    // tokens[k, : len(t)] = torch.tensor(t)
    for (int k = 0; k < bsz; k++) {
        int *row = g->tokens + (size_t)k * total_len;
        memmove(row, g->tokens + (size_t)k * T, sizeof(int) * (size_t)g->prompt_len[k]);
        for (int t = g->prompt_len[k]; t < total_len; t++) row[t] = LLAMA_PAD_ID;
    }
    // input_text_mask = tokens != self.tokenizer.pad_id
    for (int i = 0; i < bsz * total_len; i++) g->input_text_mask[i] = g->tokens[i] != LLAMA_PAD_ID;
    return 0;
}

// The token of row b at cur_pos from its logits lb (V of them): drawn or the
// argmax, unless the prompt already holds one there; written into tokens.
static void generate_next_token(LlamaGeneration *g, const float *lb, int b, int cur_pos,
                                const LlamaGenOptions *opt, uint64_t *rng, int V) {
    if (opt->temperature > 0.0f) {
        // probs = torch.softmax(logits / temperature, dim=-1)
        // next_token = sample_top_p(probs, top_p)
        float *pb = g->probs + (size_t)b * V;
        for (int i = 0; i < V; i++) pb[i] = lb[i] / opt->temperature;
        ops_softmax_rows(pb, pb, 1, V, OPS_DIVIDE);
        g->sampled[b] = llama_sample_top_p(g->sorted, g->order, pb, opt->top_p, uniform_f32(rng), V);
    } else {
        // next_token = torch.argmax(logits, dim=-1)
        g->sampled[b] = ops_argmax(lb, V);
    }
    // next_token = torch.where(input_text_mask[:, cur_pos], tokens[:, cur_pos], next_token)
    size_t at = (size_t)b * g->total_len + cur_pos;
    g->kept[b] = g->input_text_mask[at];
    g->next_token[b] = g->kept[b] ? g->tokens[at] : g->sampled[b];
    // tokens[:, cur_pos] = next_token
    g->tokens[at] = g->next_token[b];
}

// What the step that has just written cur_pos hands to opt->hook.
static void generate_call_hook(const LlamaGeneration *g, const LlamaState *s, const float *logits,
                               int prev_pos, int cur_pos, const LlamaGenOptions *opt) {
    LlamaStep st = {
        .step = g->n_steps, .prev_pos = opt->use_cache ? prev_pos : 0, .cur_pos = cur_pos,
        .bsz = g->bsz, .total_len = g->total_len, .tokens = g->tokens,
        .input_text_mask = g->input_text_mask, .fwd = &s->info, .logits = logits,
        .probs = opt->temperature > 0.0f ? g->probs : NULL, .sampled = g->sampled,
        .next_token = g->next_token, .kept = g->kept,
    };
    opt->hook(&st, opt->hook_ctx);
}

// Each row of g->tokens cut to its prompt and max_gen_len, then to its first
// eos, decoded into g->text.
static void generate_decode(LlamaGeneration *g, const LlamaModel *m, int max_gen_len) {
    int T = m->cfg.max_seq_len;
    // for i, t in enumerate(tokens.tolist()):
    //     t = t[: len(prompt_tokens[i]) + max_gen_len]   # cut to max gen len
    //     t = t[: t.index(self.tokenizer.eos_id)]        # cut to eos tok if any
    //     decoded.append(self.tokenizer.decode(t))
    for (int b = 0; b < g->bsz; b++) {
        const int *row = g->tokens + (size_t)b * g->total_len;
        int n = g->prompt_len[b] + max_gen_len;
        if (n > g->total_len) n = g->total_len;
        for (int i = 0; i < n; i++)
            if (row[i] == LLAMA_EOS_ID) {
                n = i;
                break;
            }
        llama_decode(g->text[b], m, row, n, (size_t)llama_token_bytes(m) * T + 1);
    }
}

int llama_generate(LlamaGeneration *g, LlamaState *s, const LlamaModel *m,
                   const char *const *prompts, int n_prompts, const LlamaGenOptions *opt,
                   Err err) {
    int V = m->cfg.vocab_size;
    // bsz = len(prompts); assert bsz <= params.max_batch_size
    int bsz = n_prompts;
    if (bsz < 1 || bsz > s->max_batch_size) {
        fileio_fail2(err, "%d prompts; the model's batch holds 1 to %d", "%d 条提示词；模型的 batch 只能放 1 到 %d 条", bsz,
                s->max_batch_size);
        return -1;
    }
    if (opt->max_gen_len < 0 || !(opt->temperature >= 0.0f) || !(opt->top_p >= 0.0f)) {
        fileio_fail2(err, "max_gen_len, temperature and top_p must not be negative",
                     "max_gen_len、temperature 和 top_p 不能为负");
        return -1;
    }
    g->bsz = bsz;
    if (generate_prompts(g, m, prompts, bsz, opt->max_gen_len, err) != 0) return -1;
    int total_len = g->total_len;

    uint64_t rng = opt->seed;   // the draws of sample_top_p
    g->seconds = 0.0;
    g->rows_computed = 0;
    g->n_steps = 0;
    int start_pos = g->min_prompt_size, prev_pos = 0;
    for (int cur_pos = start_pos; cur_pos < total_len; cur_pos++) {
        double t0 = timer_now();
        float *logits = g->logits + (size_t)g->n_steps * bsz * V;
        if (opt->use_cache) {
            // logits = self.model.forward(tokens[:, prev_pos:cur_pos], prev_pos)
            llama_forward(logits, s, m, g->tokens + prev_pos, prev_pos, bsz, cur_pos - prev_pos,
                          total_len);
        } else {
            // --no-cache: forward(tokens[:, 0:cur_pos], 0), everything again
            llama_forward(logits, s, m, g->tokens, 0, bsz, cur_pos, total_len);
        }
        g->rows_computed += s->info.rows_computed;
        for (int b = 0; b < bsz; b++)
            generate_next_token(g, logits + (size_t)b * V, b, cur_pos, opt, &rng, V);
        g->seconds += timer_now() - t0;
        g->n_steps++;
        if (opt->hook) generate_call_hook(g, s, logits, prev_pos, cur_pos, opt);
        prev_pos = cur_pos;
    }
    generate_decode(g, m, opt->max_gen_len);
    return 0;
}
