// gpt — the char-level GPT of the numpy chapter (seed 003): its weights, the
// model file, and the forward pass with and without the KV cache.
//
// Legend of dimension letters:
//   V vocabulary size      T context (max positions)   C embedding size
//   H heads                D head size = C / H         L blocks
//   F hidden size of the MLP = 4 * C                   N tokens fed at once
//
// Reading order: the parameter layout, making a model, the file, text and
// tokens, the forward pass, generation, costs.
#include "gpt.h"

#include "bigmem.h"
#include "fileio.h"
#include "provenance.h"
#include "timer.h"
#include "utf8.h"

#include "ops.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// Parameter layout: one block of floats in the model file's order

static size_t block_params(GptConfig cfg) {
    size_t C = (size_t)cfg.C, F = 4 * C;
    // ln1 (2C), query, key, value, output (4 (C*C + C)), ln2 (2C),
    // fc1 (C*F + F), fc2 (F*C + C)
    return 2 * C + 4 * (C * C + C) + 2 * C + (C * F + F) + (F * C + C);
}

size_t gpt_num_params(GptConfig cfg) {
    size_t V = (size_t)cfg.V, T = (size_t)cfg.T, C = (size_t)cfg.C;
    return V * C + T * C + (size_t)cfg.L * block_params(cfg) + 2 * C + C * V + V;
}

// The 16 tensors of a block, in file order. Sizes: 'c' C, 'f' F, '1' one.
static const struct {
    const char *name;
    size_t field;          // offsetof the pointer in GptBlockParams
    char rows, cols;
    GptTensorKind kind;
    int residual;          // 1: a projection into the residual stream (init std / sqrt(2L))
} BLOCK_TENSORS[16] = {
    {"ln1.weight", offsetof(GptBlockParams, ln1_w), '1', 'c', GPT_NORM_WEIGHT, 0},
    {"ln1.bias", offsetof(GptBlockParams, ln1_b), '1', 'c', GPT_NORM_BIAS, 0},
    {"attn.query.weight", offsetof(GptBlockParams, wq), 'c', 'c', GPT_WEIGHT, 0},
    {"attn.query.bias", offsetof(GptBlockParams, bq), '1', 'c', GPT_BIAS, 0},
    {"attn.key.weight", offsetof(GptBlockParams, wk), 'c', 'c', GPT_WEIGHT, 0},
    {"attn.key.bias", offsetof(GptBlockParams, bk), '1', 'c', GPT_BIAS, 0},
    {"attn.value.weight", offsetof(GptBlockParams, wv), 'c', 'c', GPT_WEIGHT, 0},
    {"attn.value.bias", offsetof(GptBlockParams, bv), '1', 'c', GPT_BIAS, 0},
    {"attn.output.weight", offsetof(GptBlockParams, wo), 'c', 'c', GPT_WEIGHT, 1},
    {"attn.output.bias", offsetof(GptBlockParams, bo), '1', 'c', GPT_BIAS, 0},
    {"ln2.weight", offsetof(GptBlockParams, ln2_w), '1', 'c', GPT_NORM_WEIGHT, 0},
    {"ln2.bias", offsetof(GptBlockParams, ln2_b), '1', 'c', GPT_NORM_BIAS, 0},
    {"mlp.fc1.weight", offsetof(GptBlockParams, w1), 'c', 'f', GPT_WEIGHT, 0},
    {"mlp.fc1.bias", offsetof(GptBlockParams, b1), '1', 'f', GPT_BIAS, 0},
    {"mlp.fc2.weight", offsetof(GptBlockParams, w2), 'f', 'c', GPT_WEIGHT, 1},
    {"mlp.fc2.bias", offsetof(GptBlockParams, b2), '1', 'c', GPT_BIAS, 0},
};

static int dim(char letter, GptConfig cfg) {
    return letter == 'c' ? cfg.C : letter == 'f' ? 4 * cfg.C : 1;
}

void gpt_params_carve(GptParams *p, GptBlockParams *blocks, float *params, GptConfig cfg) {
    size_t V = (size_t)cfg.V, T = (size_t)cfg.T, C = (size_t)cfg.C;
    float *at = params;
#define TAKE(field, n) (field = at, at += (n))
    TAKE(p->wte, V * C);
    TAKE(p->wpe, T * C);
    for (int l = 0; l < cfg.L; l++)   // a block's tensors in the table's order, which is the file's
        for (int j = 0; j < 16; j++)
            TAKE(*(float **)((char *)&blocks[l] + BLOCK_TENSORS[j].field),
                 (size_t)dim(BLOCK_TENSORS[j].rows, cfg) * (size_t)dim(BLOCK_TENSORS[j].cols, cfg));
    TAKE(p->lnf_w, C);
    TAKE(p->lnf_b, C);
    TAKE(p->head_w, C * V);
    TAKE(p->head_b, V);
#undef TAKE
    p->blocks = blocks;
    assert((size_t)(at - params) == gpt_num_params(cfg));
}

int gpt_num_tensors(GptConfig cfg) {
    return 2 + 16 * cfg.L + 4;
}

static GptTensor make_tensor(const char *name, float *data, int rows, int cols, GptTensorKind kind) {
    GptTensor t;
    snprintf(t.name, sizeof(t.name), "%s", name);
    t.data = data;
    t.rows = rows;
    t.cols = cols;
    t.numel = (size_t)rows * (size_t)cols;
    t.kind = kind;
    t.init_std = kind == GPT_WEIGHT ? 0.02f : 0.0f;
    t.decay = kind == GPT_WEIGHT;
    return t;
}

GptTensor gpt_tensor(const GptModel *m, int i) {
    GptConfig cfg = m->cfg;
    const GptParams *p = &m->p;
    assert(i >= 0 && i < gpt_num_tensors(cfg));
    if (i == 0) return make_tensor("token_embedding", p->wte, cfg.V, cfg.C, GPT_WEIGHT);
    if (i == 1) return make_tensor("position_embedding", p->wpe, cfg.T, cfg.C, GPT_WEIGHT);
    i -= 2;
    if (i < 16 * cfg.L) {
        int l = i / 16, j = i % 16;
        char name[40];
        snprintf(name, sizeof(name), "blocks.%d.%s", l, BLOCK_TENSORS[j].name);
        float *data = *(float **)((char *)&p->blocks[l] + BLOCK_TENSORS[j].field);
        GptTensor t = make_tensor(name, data, dim(BLOCK_TENSORS[j].rows, cfg), dim(BLOCK_TENSORS[j].cols, cfg),
                                  BLOCK_TENSORS[j].kind);
        if (BLOCK_TENSORS[j].residual) t.init_std = 0.02f / sqrtf(2.0f * cfg.L);   // GPT-2's scaled init
        return t;
    }
    switch (i - 16 * cfg.L) {
    case 0: return make_tensor("ln_f.weight", p->lnf_w, 1, cfg.C, GPT_NORM_WEIGHT);
    case 1: return make_tensor("ln_f.bias", p->lnf_b, 1, cfg.C, GPT_NORM_BIAS);
    case 2: return make_tensor("head.weight", p->head_w, cfg.C, cfg.V, GPT_WEIGHT);
    default: return make_tensor("head.bias", p->head_b, 1, cfg.V, GPT_BIAS);
    }
}

// ----------------------------------------------------------------------------
// Making a model

const char GPT_SHAKESPEARE_VOCAB[] =
    "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

int gpt_preset(GptConfig *cfg, const char *name) {
    int V = (int)strlen(GPT_SHAKESPEARE_VOCAB);
    if (strcmp(name, "seed") == 0) *cfg = (GptConfig){.V = V, .T = 256, .C = 384, .H = 6, .L = 6};
    else if (strcmp(name, "tiny") == 0) *cfg = (GptConfig){.V = V, .T = 32, .C = 64, .H = 4, .L = 2};
    else return -1;
    return 0;
}

enum {
    GPT_MAX_V = 0x110000,   // every Unicode code point
    GPT_MAX_T = 65536,
    GPT_MAX_C = 16384,
    GPT_MAX_L = 256,
};
#define GPT_MAX_PARAMS ((size_t)1 << 31)

int gpt_check_config(GptConfig cfg, Err err) {
    // Each size alone first, so that the products below cannot overflow.
    if (cfg.V < 1 || cfg.V > GPT_MAX_V)
        return fileio_fail2(err, "vocabulary size V=%d is out of range 1..%d",
                            "词表大小 V=%d 超出范围 1..%d", cfg.V, GPT_MAX_V);
    if (cfg.T < 1 || cfg.T > GPT_MAX_T)
        return fileio_fail2(err, "context T=%d is out of range 1..%d",
                            "上下文 T=%d 超出范围 1..%d", cfg.T, GPT_MAX_T);
    if (cfg.C < 1 || cfg.C > GPT_MAX_C)
        return fileio_fail2(err, "embedding size C=%d is out of range 1..%d",
                            "嵌入维度 C=%d 超出范围 1..%d", cfg.C, GPT_MAX_C);
    if (cfg.H < 1 || cfg.H > cfg.C)
        return fileio_fail2(err, "heads H=%d is out of range 1..C=%d",
                            "头数 H=%d 超出范围 1..C=%d", cfg.H, cfg.C);
    if (cfg.C % cfg.H != 0)
        return fileio_fail2(err, "embedding size C=%d is not divisible by the heads H=%d",
                            "嵌入维度 C=%d 不能被头数 H=%d 整除", cfg.C, cfg.H);
    if (cfg.L < 1 || cfg.L > GPT_MAX_L)
        return fileio_fail2(err, "blocks L=%d is out of range 1..%d",
                            "块数 L=%d 超出范围 1..%d", cfg.L, GPT_MAX_L);
    size_t n = gpt_num_params(cfg);
    if (n > GPT_MAX_PARAMS)
        return fileio_fail2(err, "V=%d T=%d C=%d L=%d make %zu parameters, more than the %zu allowed",
                            "V=%d T=%d C=%d L=%d 共 %zu 个参数，超过上限 %zu",
                            cfg.V, cfg.T, cfg.C, cfg.L, n, GPT_MAX_PARAMS);
    return 0;
}

// Checks a vocabulary: valid code points, no surrogates, no repeats. sorted
// (V) is scratch.
static int check_vocab(uint32_t *sorted, const uint32_t *vocab, int V, Err err) {
    for (int i = 0; i < V; i++) {
        uint32_t c = vocab[i];
        if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
            return fileio_fail2(err, "vocabulary entry %d is 0x%X, not a Unicode character",
                                "词表第 %d 项是 0x%X，不是 Unicode 字符", i, c);
    }
    memcpy(sorted, vocab, sizeof(uint32_t) * (size_t)V);
    qsort(sorted, (size_t)V, sizeof(uint32_t), utf8_cmp);
    for (int i = 1; i < V; i++)
        if (sorted[i] == sorted[i - 1])
            return fileio_fail2(err, "vocabulary holds U+%04X twice",
                                "词表中 U+%04X 出现了两次", sorted[i]);
    return 0;
}

int gpt_new(GptModel *m, GptConfig cfg, const uint32_t *vocab, Err err) {
    memset(m, 0, sizeof(*m));
    if (gpt_check_config(cfg, err) != 0) return -1;
    m->cfg = cfg;
    m->num_params = gpt_num_params(cfg);
    m->vocab = malloc(sizeof(uint32_t) * (size_t)cfg.V);
    m->params = bigmem_alloc(m->num_params * sizeof(float));   // zeroed, in huge pages where it can be
    m->p.blocks = calloc((size_t)cfg.L, sizeof(GptBlockParams));
    if (!m->vocab || !m->params || !m->p.blocks) {
        gpt_free(m);
        return fileio_fail2(err, "out of memory for a model of %zu parameters",
                            "内存不足，放不下 %zu 个参数的模型", gpt_num_params(cfg));
    }
    // m->vocab serves as the scratch of the check, then receives the vocabulary.
    if (check_vocab(m->vocab, vocab, cfg.V, err) != 0) {
        gpt_free(m);
        return -1;
    }
    memcpy(m->vocab, vocab, sizeof(uint32_t) * (size_t)cfg.V);
    gpt_params_carve(&m->p, m->p.blocks, m->params, cfg);
    return 0;
}

int gpt_pack(GptModel *m) {
    GptConfig cfg = m->cfg;
    int C = cfg.C, F = 4 * cfg.C;
    bigmem_free(m->packed, m->packed_floats * sizeof(float));
    free(m->packed_blocks);
    m->packed_floats = (size_t)cfg.L * (size_t)(4 * ops_packed_size(C, C) + ops_packed_size(C, F) + ops_packed_size(F, C));
    m->packed = bigmem_alloc(m->packed_floats * sizeof(float));
    m->packed_blocks = calloc((size_t)cfg.L, sizeof(GptBlockParams));
    if (!m->packed || !m->packed_blocks) {
        bigmem_free(m->packed, m->packed_floats * sizeof(float));
        free(m->packed_blocks);
        m->packed = NULL, m->packed_blocks = NULL, m->packed_floats = 0;
        return -1;
    }
    float *at = m->packed;
    for (int l = 0; l < cfg.L; l++) {
        const GptBlockParams *b = &m->p.blocks[l];
        GptBlockParams *pb = &m->packed_blocks[l];
#define PACK(field, K, N) (ops_pack(at, b->field, K, N), pb->field = at, at += ops_packed_size(K, N))
        PACK(wq, C, C);
        PACK(wk, C, C);
        PACK(wv, C, C);
        PACK(wo, C, C);
        PACK(w1, C, F);
        PACK(w2, F, C);
#undef PACK
    }
    return 0;
}

int gpt_init_random(GptModel *m, GptConfig cfg, const uint32_t *vocab, uint32_t seed, Err err) {
    if (gpt_new(m, cfg, vocab, err) != 0) return -1;
    Mt19937 rng;
    mt19937_seed(&rng, seed);   // np.random.seed(seed)
    for (int i = 0; i < gpt_num_tensors(cfg); i++) {
        GptTensor t = gpt_tensor(m, i);
        for (size_t j = 0; j < t.numel; j++) {
            switch (t.kind) {
            case GPT_WEIGHT:   // np.random.normal(0, 0.02, shape).astype(np.float32)
                t.data[j] = (float)(0.0 + 0.02 * mt19937_gauss(&rng));
                break;
            case GPT_NORM_WEIGHT: t.data[j] = 1.0f; break;
            default: t.data[j] = 0.0f; break;
            }
        }
    }
    return 0;
}

void gpt_free(GptModel *m) {
    free(m->vocab);
    bigmem_free(m->packed, m->packed_floats * sizeof(float));
    free(m->packed_blocks);
    bigmem_free(m->params, m->num_params * sizeof(float));
    free(m->p.blocks);
    memset(m, 0, sizeof(*m));
}

// ----------------------------------------------------------------------------
// The model file (docs/model-format.md)
//
// Little-endian: "KVGP", uint32 version, V, T, C, H, L; V uint32 code points;
// every tensor as float32 in file order; then (version 2) the uint32 Adler-32
// of every byte before it; nothing after.

enum { HEADER_BYTES = 4 + 6 * 4 };

// Floats are stored little-endian; a big-endian host swaps them in place.
static void swap_floats_if_big_endian(float *x, size_t n) {
    if (fileio_host_is_little_endian()) return;
    for (size_t i = 0; i < n; i++) {
        unsigned char b[4];
        memcpy(b, &x[i], 4);
        x[i] = le_get_f32(b);
    }
}

// Bytes of a file with this configuration and version.
static uint64_t file_bytes(GptConfig cfg, uint32_t version) {
    return HEADER_BYTES + 4 * (uint64_t)cfg.V + 4 * (uint64_t)gpt_num_params(cfg) + (version == GPT_VERSION ? 4 : 0);
}

// Checks the header h of a file of `size` bytes; fills cfg. Returns 0 or -1
// with err.
static int check_header(GptConfig *cfg, const unsigned char *h, uint64_t size, const char *path, Err err) {
    if (memcmp(h, GPT_MAGIC, 4) != 0)
        return fileio_fail2(err, "%s: not a kvdemo model: magic is \"%c%c%c%c\", expected \"%s\"",
                            "%s：不是 kvdemo 模型：文件头是“%c%c%c%c”，应为“%s”", path,
                            h[0] >= 32 && h[0] < 127 ? h[0] : '?', h[1] >= 32 && h[1] < 127 ? h[1] : '?',
                            h[2] >= 32 && h[2] < 127 ? h[2] : '?', h[3] >= 32 && h[3] < 127 ? h[3] : '?',
                            GPT_MAGIC);
    uint32_t version = le_get_u32(h + 4);
    if (version != GPT_VERSION && version != GPT_VERSION_UNCHECKED)
        return fileio_fail2(err, "%s: model file version %u, this kvdemo reads versions %d and %d",
                            "%s：模型文件版本为 %u，这个 kvdemo 读取版本 %d 和 %d", path,
                            version, GPT_VERSION_UNCHECKED, GPT_VERSION);
    // The five sizes; one beyond int's range is out of range whatever it is.
    static const char *const size_names[2][5] = {
        {"vocabulary size V", "context T", "embedding size C", "heads H", "blocks L"},
        {"词表大小 V", "上下文 T", "嵌入维度 C", "头数 H", "块数 L"},
    };
    int sizes[5];
    for (int i = 0; i < 5; i++) {
        uint32_t x = le_get_u32(h + 8 + 4 * i);
        if (x > 0x7fffffff) return fileio_fail2(err, "%s: %s=%u is out of range",
                                                "%s：%s=%u 超出范围", path,
                                                size_names[err.lang == LANG_ZH][i], x);
        sizes[i] = (int)x;
    }
    *cfg = (GptConfig){sizes[0], sizes[1], sizes[2], sizes[3], sizes[4]};
    char why[200];
    if (gpt_check_config(*cfg, ERR(err.lang, why)) != 0) return fileio_fail2(err, "%s: %s",
                                                                           "%s：%s", path, why);
    uint64_t need = file_bytes(*cfg, version);
    if (size < need)
        return fileio_fail2(err,
                           "%s: truncated: %llu bytes, a model with V=%d T=%d C=%d H=%d L=%d takes %llu bytes",
                           "%s：文件不完整：只有 %llu 字节，V=%d T=%d C=%d H=%d L=%d 的模型需要 %llu 字节",
                           path, (unsigned long long)size, cfg->V, cfg->T, cfg->C, cfg->H, cfg->L,
                           (unsigned long long)need);
    if (size > need)
        return fileio_fail2(err,
                           "%s: %llu trailing bytes after the last tensor (a model with V=%d T=%d C=%d H=%d "
                           "L=%d takes %llu bytes)",
                           "%s：最后一个张量之后多出 %llu 字节（V=%d T=%d C=%d H=%d "
                           "L=%d 的模型需要 %llu 字节）",
                           path, (unsigned long long)(size - need), cfg->V, cfg->T, cfg->C, cfg->H, cfg->L,
                           (unsigned long long)need);
    return 0;
}

// Names the weight at index bad of m->params (not finite). Returns -1 with err.
static int name_nonfinite(const GptModel *m, size_t bad, const char *path, Err err) {
    for (int i = 0; i < gpt_num_tensors(m->cfg); i++) {
        GptTensor t = gpt_tensor(m, i);
        size_t first = (size_t)(t.data - m->params);
        if (bad < first || bad >= first + t.numel) continue;
        size_t j = bad - first, r = j / (size_t)t.cols, c = j % (size_t)t.cols;
        if (t.rows == 1)
            return fileio_fail2(err, "%s: %s[%zu] is %g: every weight must be finite",
                                "%s：%s[%zu] 是 %g：每个权重都必须是有限数", path, t.name, c,
                                (double)m->params[bad]);
        return fileio_fail2(err, "%s: %s[%zu][%zu] is %g: every weight must be finite",
                            "%s：%s[%zu][%zu] 是 %g：每个权重都必须是有限数", path, t.name, r,
                            c, (double)m->params[bad]);
    }
    return fileio_fail2(err, "%s: weight %zu is not finite",
                        "%s：第 %zu 个权重不是有限数", path, bad);
}

// Every weight finite: names the first one that is not. Returns 0 or -1 with err.
static int check_weights(const GptModel *m, const char *path, Err err) {
    size_t bad = (size_t)ops_first_nonfinite(m->params, (int64_t)m->num_params);
    return bad < m->num_params ? name_nonfinite(m, bad, path, err) : 0;
}

// Reads the 4 bytes after the weights and compares them with sum, the
// Adler-32 of everything before. Returns 0 or -1 with err.
static int check_sum(FILE *f, uint32_t sum, const char *path, Err err) {
    unsigned char b[4];
    if (fread(b, 1, 4, f) != 4)
        return fileio_fail2(err, "%s: cannot read the checksum: %s", "%s：读取校验和时出错：%s", path,
                            fileio_read_reason(err.lang, f));
    if (le_get_u32(b) != sum)
        return fileio_fail2(err,
                            "%s: checksum mismatch: the file is damaged (copy it again, or train it again)",
                            "%s：校验和不符：文件已损坏（请重新复制，或重新训练）", path);
    provenance_note(path, sum);   // the lesson page's footer names the weights
    return 0;
}

int gpt_load_config(GptConfig *cfg, const char *path, Err err) {
    uint64_t size = 0;
    FILE *f = fileio_open_read(path, &size, err);
    if (!f) return -1;
    unsigned char h[HEADER_BYTES];
    int rc = 0;
    if (size < HEADER_BYTES)
        rc = fileio_fail2(err, "%s: truncated: %llu bytes, the header alone takes %d bytes",
                          "%s：文件不完整：只有 %llu 字节，光文件头就要 %d 字节", path, (unsigned long long)size,
                          HEADER_BYTES);
    else if (fread(h, 1, HEADER_BYTES, f) != HEADER_BYTES)
        rc = fileio_fail2(err, "%s: cannot read the header: %s", "%s：读取文件头时出错：%s", path,
                          fileio_read_reason(err.lang, f));
    else rc = check_header(cfg, h, size, path, err);
    fclose(f);
    return rc;
}

int gpt_load(GptModel *m, const char *path, Err err) {
    memset(m, 0, sizeof(*m));
    uint64_t size = 0;
    unsigned char *raw = NULL;
    uint32_t *vocab = NULL;
    char why[200];
    FILE *f = fileio_open_read(path, &size, err);
    if (!f) return -1;
    unsigned char h[HEADER_BYTES];
    GptConfig cfg;
    if (size < HEADER_BYTES) {
        fileio_fail2(err, "%s: truncated: %llu bytes, the header alone takes %d bytes",
                     "%s：文件不完整：只有 %llu 字节，光文件头就要 %d 字节", path,
                     (unsigned long long)size, HEADER_BYTES);
        goto fail;
    }
    if (fread(h, 1, HEADER_BYTES, f) != HEADER_BYTES) {
        fileio_fail2(err, "%s: cannot read the header: %s", "%s：读取文件头时出错：%s", path,
                     fileio_read_reason(err.lang, f));
        goto fail;
    }
    if (check_header(&cfg, h, size, path, err) != 0) goto fail;
    uint32_t sum = fileio_adler32(1, h, HEADER_BYTES);   // of the bytes as they are in the file
    // The vocabulary, read into a temporary array and checked by gpt_new.
    raw = malloc(4 * (size_t)cfg.V);
    vocab = malloc(sizeof(uint32_t) * (size_t)cfg.V);
    if (!raw || !vocab) {
        fileio_fail2(err, "%s: out of memory",
                     "%s：内存不足", path);
        goto fail;
    }
    if (fread(raw, 4, (size_t)cfg.V, f) != (size_t)cfg.V) {
        fileio_fail2(err, "%s: cannot read the vocabulary: %s", "%s：读取词表时出错：%s", path,
                     fileio_read_reason(err.lang, f));
        goto fail;
    }
    sum = fileio_adler32(sum, raw, 4 * (size_t)cfg.V);
    for (int i = 0; i < cfg.V; i++) vocab[i] = le_get_u32(raw + 4 * i);
    if (gpt_new(m, cfg, vocab, ERR(err.lang, why)) != 0) {
        fileio_fail2(err, "%s: %s",
                     "%s：%s", path, why);
        goto fail;
    }
    // The weights are read 2 MB at a time into the model's huge pages, and
    // each piece is checked for NaN and infinity while it is still in the
    // cache. (Mapping the file instead copies nothing, but its 4 KB pages
    // cost more to touch the first time than reading into 2 MB ones:
    // docs/model-format.md.)
    enum { PIECE = (2 << 20) / sizeof(float) };
    for (size_t at = 0; at < m->num_params; at += PIECE) {
        size_t n = m->num_params - at < PIECE ? m->num_params - at : PIECE;
        if (fread(m->params + at, sizeof(float), n, f) != n) {
            fileio_fail2(err, "%s: cannot read the weights: %s", "%s：读取权重时出错：%s", path,
                         fileio_read_reason(err.lang, f));
            goto fail;
        }
        sum = fileio_adler32(sum, m->params + at, n * sizeof(float));
        swap_floats_if_big_endian(m->params + at, n);
        size_t bad = at + (size_t)ops_first_nonfinite(m->params + at, (int64_t)n);
        if (bad < at + n) {
            name_nonfinite(m, bad, path, err);
            goto fail;
        }
    }
    if (le_get_u32(h + 4) == GPT_VERSION && check_sum(f, sum, path, err) != 0) goto fail;
    fclose(f);
    free(raw);
    free(vocab);
    return 0;
fail:
    fclose(f);
    free(raw);
    free(vocab);
    gpt_free(m);
    return -1;
}

// Writes n bytes to f and continues the checksum over them.
static void put_bytes(FILE *f, uint32_t *sum, const void *data, size_t n) {
    fwrite(data, 1, n, f);
    *sum = fileio_adler32(*sum, data, n);
}

int gpt_save(const GptModel *m, const char *path, Err err) {
    // Never write what gpt_load would refuse.
    if (check_weights(m, path, err) != 0) return -1;
    AtomicFile a;
    if (fileio_open(&a, path, err) != 0) return -1;
    GptConfig cfg = m->cfg;
    unsigned char h[HEADER_BYTES];
    memcpy(h, GPT_MAGIC, 4);
    uint32_t fields[6] = {GPT_VERSION, (uint32_t)cfg.V, (uint32_t)cfg.T, (uint32_t)cfg.C, (uint32_t)cfg.H,
                          (uint32_t)cfg.L};
    for (int i = 0; i < 6; i++) le_put_u32(h + 4 + 4 * i, fields[i]);
    uint32_t sum = 1;
    put_bytes(a.f, &sum, h, sizeof(h));
    for (int i = 0; i < cfg.V; i++) {
        unsigned char b[4];
        le_put_u32(b, m->vocab[i]);
        put_bytes(a.f, &sum, b, 4);
    }
    if (fileio_host_is_little_endian()) {
        put_bytes(a.f, &sum, m->params, sizeof(float) * m->num_params);
    } else {
        for (size_t i = 0; i < m->num_params; i++) {
            unsigned char b[4];
            le_put_f32(b, m->params[i]);
            put_bytes(a.f, &sum, b, 4);
        }
    }
    unsigned char b[4];
    le_put_u32(b, sum);
    fwrite(b, 1, 4, a.f);
    return fileio_commit(&a, err);   // a write error above fails here, with its reason
}


// ----------------------------------------------------------------------------
// Text <-> tokens (UTF-8 against the vocabulary's code points)

int gpt_encode(int *tokens, const GptModel *m, const char *text, int max_tokens, Err err) {
    const unsigned char *s = (const unsigned char *)text;
    int n = 0;
    for (size_t at = 0; s[at];) {
        uint32_t c;
        int len = utf8_decode(&c, s + at, strlen(text + at));
        if (len == 0) return fileio_fail2(err, "the text is not valid UTF-8 at byte %zu (0x%02X)",
                                          "文字在第 %zu 个字节处不是合法的 UTF-8（0x%02X）", at, s[at]);
        int id = -1;
        for (int v = 0; v < m->cfg.V && id < 0; v++)
            if (m->vocab[v] == c) id = v;
        if (id < 0) {
            char name[48];
            utf8_name(name, sizeof name, c, err.lang == LANG_ZH);
            return fileio_fail2(err, "character %s at position %d is not in the model's vocabulary",
                                "字符%s（第 %d 个）不在模型的词表里", name, n);
        }
        if (n == max_tokens) return fileio_fail2(err, "the text is longer than %d characters",
                                                 "文字超过 %d 个字符", max_tokens);
        tokens[n++] = id;
        at += (size_t)len;
    }
    return n;
}

size_t gpt_decode(char *out, size_t cap, const GptModel *m, const int *tokens, int n) {
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        assert(tokens[i] >= 0 && tokens[i] < m->cfg.V);
        unsigned char b[4];
        int k = utf8_encode(b, m->vocab[tokens[i]]);
        if (cap > 0 && len + (size_t)k < cap) memcpy(out + len, b, (size_t)k);
        else if (cap > 0 && len < cap) cap = len + 1;   // no half characters: stop writing here
        len += (size_t)k;
    }
    if (cap > 0) out[len < cap ? len : cap - 1] = '\0';
    return len;
}

// ----------------------------------------------------------------------------
// The forward pass

int gpt_state_init(GptState *s, GptConfig cfg) {
    memset(s, 0, sizeof(*s));
    s->cfg = cfg;
    size_t T = (size_t)cfg.T, C = (size_t)cfg.C, F = 4 * C;
    size_t sizes[] = {
        T * C, T * C, T * C, T * C, T * C, T * C, T * C,   // x, xn, q, k, v, att, proj
        T * F,                                             // hidden
        (size_t)cfg.V,                                     // logits
    };
    float **const fields[] = {&s->x, &s->xn, &s->q, &s->k, &s->v, &s->att, &s->proj, &s->hidden, &s->logits};
    // zeroed, in huge pages where it can be
    s->mem = bigmem_carve(fields, sizes, (int)(sizeof(sizes) / sizeof(sizes[0])), &s->mem_bytes);
    KvShape shape = gpt_cache_shape(cfg);
    s->kv = &s->cache.base;
    if (!s->mem || kvcontig_init(&s->cache, shape) != 0 || kvpaged_init(&s->paged, shape) != 0) {
        gpt_state_free(s);
        return -1;
    }
    return 0;
}

void gpt_state_free(GptState *s) {
    bigmem_free(s->mem, s->mem_bytes);
    kvcache_free(&s->cache.base);
    kvcache_free(&s->paged.base);
    memset(s, 0, sizeof(*s));
}

void gpt_state_reset(GptState *s) {
    s->len = 0;
    kvcache_reset(s->kv);
}

KvShape gpt_cache_shape(GptConfig cfg) {
    return (KvShape){.L = cfg.L, .B = 1, .T = cfg.T, .H = cfg.H, .G = cfg.H, .D = cfg.C / cfg.H};
}

void gpt_state_use_cache(GptState *s, KvCache *kv) {
    s->kv = kv ? kv : &s->cache.base;
    gpt_state_reset(s);
}

// LayerNorm of rows begin..end-1 of in into out.
typedef struct {
    float *out;
    const float *in, *w, *b;
    int R, C;
} RowsJob;

enum { LAYERNORM_CHUNK = 16 };   // rows per task

static void layernorm_rows(void *ctx, int begin, int end, int thread) {
    (void)thread;
    RowsJob *job = ctx;
    int from = begin * LAYERNORM_CHUNK, to = end * LAYERNORM_CHUNK < job->R ? end * LAYERNORM_CHUNK : job->R;
    int64_t first = (int64_t)from * job->C;
    ops_layernorm(job->out + first, NULL, NULL, job->in + first, job->w, job->b, to - from, job->C);
}

// out (R, C) = LayerNorm of in (R, C), rows shared among pool's threads.
static void layernorm_parallel(float *out, const float *in, const float *w, const float *b, Pool *pool, int R,
                               int C) {
    RowsJob job = {out, in, w, b, R, C};
    pool_run(pool, layernorm_rows, &job, (R + LAYERNORM_CHUNK - 1) / LAYERNORM_CHUNK);
}

typedef struct {
    float *x;
    int64_t n;
} GeluJob;

enum { GELU_CHUNK = 4096 };   // elements per task

static void gelu_chunks(void *ctx, int begin, int end, int thread) {
    (void)thread;
    GeluJob *job = ctx;
    int64_t from = (int64_t)begin * GELU_CHUNK, to = (int64_t)end * GELU_CHUNK;
    if (to > job->n) to = job->n;
    ops_gelu(job->x + from, job->x + from, (int)(to - from));
}

// out (n, N) = in (n, K) @ w (K, N) + bias, then what `then` says (ops.h):
// stored, added into out (a residual), or put through GELU, as each tile of
// the product is finished. With lesson 12's arithmetic (lowprec.h) the
// product is summed and rounded its own way first, then added or put
// through GELU in a second pass and rounded again; an added product waits
// in s->proj.
static void linear(GptState *s, float *out, const float *in, const float *w, const float *packed,
                   const float *bias, OpsThen then, int n, int K, int N, int cached) {
    const LowPrec *lp = &s->lowprec;
    if (!lowprec_on(lp)) {
        ops_matmul_packed(out, in, w, packed, bias, then, s->pool, n, K, N);
        return;
    }
    int64_t count = (int64_t)n * N;
    float *y = then == OPS_ADD_INTO ? s->proj : out;
    assert(then != OPS_ADD_INTO || N == s->cfg.C);   // s->proj is (T, C)
    lowprec_linear(lp, y, in, w, bias, s->pool, n, K, N, cached);
    if (then == OPS_STORE) return;
    if (then == OPS_ADD_INTO) {
        for (int64_t i = 0; i < count; i++) out[i] += y[i];
    } else {
        GeluJob gelu = {out, count};
        pool_run(s->pool, gelu_chunks, &gelu, (int)((count + GELU_CHUNK - 1) / GELU_CHUNK));
    }
    lowprec_round(lp, out, count);
}

const float *gpt_forward(GptState *s, const GptModel *m, const int *tokens, int n, int offset) {
    GptConfig cfg = m->cfg;
    int T = cfg.T, C = cfg.C, H = cfg.H, F = 4 * C, V = cfg.V;
    assert(s->cfg.T == T && s->cfg.C == C && s->cfg.H == H && s->cfg.L == cfg.L && s->cfg.V == V);
    assert(n >= 1 && offset >= 0 && offset <= s->len && offset + n <= T);
    const GptParams *p = &m->p;
    const LowPrec *lp = &s->lowprec;   // lesson 12's rounding: nothing in fp32
    int cached = offset > 0;
    KvCache *kv = s->kv;   // the contiguous cache, or another kind (kvcache.h)
    Pool *pool = s->pool;  // the threads the work is shared among (NULL: this one)
    // positions past offset are fed again: the cache forgets them first
    kvcache_truncate(kv, offset);

    // x = token_embedding(tokens) + position_embedding(range(offset, offset + n))
    for (int i = 0; i < n; i++) {
        assert(tokens[i] >= 0 && tokens[i] < V);
        int pos = kvcache_position(kv, offset + i);   // offset + i: the cache says where the row stands
        const float *te = p->wte + (int64_t)tokens[i] * C, *pe = p->wpe + (int64_t)pos * C;
        float *x = s->x + (int64_t)i * C;
        for (int c = 0; c < C; c++) x[c] = te[c] + pe[c];
    }
    lowprec_round(lp, s->x, (int64_t)n * C);

    for (int l = 0; l < cfg.L; l++) {
        const GptBlockParams *b = &p->blocks[l];
        // the same weights in panel order, when gpt_pack made them
        const GptBlockParams *pk = m->packed_blocks ? &m->packed_blocks[l] : &(GptBlockParams){0};
        // norm = self.normalize(x)
        layernorm_parallel(s->xn, s->x, b->ln1_w, b->ln1_b, pool, n, C);
        lowprec_round(lp, s->xn, (int64_t)n * C);
        // query, key, value = self.query(norm), self.key(norm), self.value(norm)   (N, C)
        linear(s, s->q, s->xn, b->wq, pk->wq, b->bq, OPS_STORE, n, C, C, cached);
        linear(s, s->k, s->xn, b->wk, pk->wk, b->bk, OPS_STORE, n, C, C, cached);
        linear(s, s->v, s->xn, b->wv, pk->wv, b->bv, OPS_STORE, n, C, C, cached);
        // key = np.concatenate([key_cache, key], axis=-1), value likewise
        kvcache_append(kv, l, s->k, s->v, 1, n, offset);
        // att = softmax(query @ key * scale) @ value, heads side by side   (N, C)
        // (--attention flash: the same in tiles with an online softmax, as the
        // contiguous cache is told to, kvcontig_set_tile)
        kvcache_attend(kv, s->att, NULL, s->q, pool, l, 1, n, offset);
        lowprec_round(lp, s->att, (int64_t)n * C);
        // x = x + self.output(att)
        linear(s, s->x, s->att, b->wo, pk->wo, b->bo, OPS_ADD_INTO, n, C, C, cached);
        // x = x + fc2(gelu(fc1(self.normalize(x))))
        layernorm_parallel(s->xn, s->x, b->ln2_w, b->ln2_b, pool, n, C);
        lowprec_round(lp, s->xn, (int64_t)n * C);
        linear(s, s->hidden, s->xn, b->w1, pk->w1, b->b1, OPS_GELU, n, C, F, cached);
        linear(s, s->x, s->hidden, b->w2, pk->w2, b->b2, OPS_ADD_INTO, n, F, C, cached);
    }
    s->len = offset + n;

    // logits = self.output(x)[-1]: final LayerNorm and head, last row only
    const float *last = s->x + (int64_t)(n - 1) * C;
    ops_layernorm(s->xn, NULL, NULL, last, p->lnf_w, p->lnf_b, 1, C);
    ops_matmul(s->logits, s->xn, p->head_w, p->head_b, pool, 1, C, V);
    return s->logits;
}

// ----------------------------------------------------------------------------
// Generation

// The generation loop; have_cache: s's cache already holds tokens
// 0 .. s->len-1 (gpt_generate_more), else the first step feeds the prompt.
static int generate_steps(int *tokens, GptState *s, const GptModel *m, Sampler *sampler, int n_prompt, int steps,
                          int use_cache, int have_cache, GptStepFn on_step, void *ctx) {
    int T = m->cfg.T;
    assert(n_prompt >= 1 && steps >= 0 && sampler->V == m->cfg.V);
    int len = n_prompt;       // len(tokens)
    for (int step = 0; step < steps; step++) {
        double start = timer_now();
        GptStep info = {.step = step};
        // past the context the cache may make room (kvcache_make_room:
        // none of kvdemo's honest kinds does; the chapter resets)
        int room = use_cache && have_cache && len > T ? kvcache_make_room(s->kv) : -1;
        if (use_cache && have_cache && (len <= T || room >= 0)) {
            // feature = Tensor([tokens[-1:]]); offset = len(tokens) - 1
            // (a new turn's first step: tokens[s->len:], all the cache lacks)
            info.cached = 1;
            info.n = len <= T ? len - s->len : 1;
            info.offset = len <= T ? s->len : room;
        } else {
            // feature = Tensor([tokens[-context_size:]]); offset = 0; caches = None
            info.n = len < T ? len : T;
            info.offset = 0;
            gpt_state_reset(s);
        }
        // logits, caches = self.model(feature, use_cache, caches, offset)
        const float *logits = gpt_forward(s, m, tokens + len - info.n, info.n, info.offset);
        have_cache = use_cache;
        int token = sampler_sample(sampler, logits);
        tokens[len++] = token;
        info.seconds = timer_now() - start;
        info.cache_len = s->len;
        info.token = token;
        info.logits = logits;
        info.probs = sampler->probs;
        if (on_step && on_step(ctx, &info) != 0) break;
    }
    return len;
}

int gpt_generate(int *tokens, GptState *s, const GptModel *m, Sampler *sampler, int n_prompt, int steps,
                 int use_cache, GptStepFn on_step, void *ctx) {
    return generate_steps(tokens, s, m, sampler, n_prompt, steps, use_cache, 0, on_step, ctx);
}

int gpt_generate_more(int *tokens, GptState *s, const GptModel *m, Sampler *sampler, int len, int steps,
                      GptStepFn on_step, void *ctx) {
    assert(s->len < len);
    return generate_steps(tokens, s, m, sampler, len, steps, 1, 1, on_step, ctx);
}

// ----------------------------------------------------------------------------
// Costs

int64_t gpt_row_work(GptConfig cfg) {
    int64_t fc1 = (int64_t)cfg.C * 4 * cfg.C, head = (int64_t)cfg.C * cfg.V;
    return fc1 > head ? fc1 : head;
}

GptCost gpt_cost(GptConfig cfg, int n, int offset) {
    double C = cfg.C, F = 4.0 * cfg.C, V = cfg.V, L = cfg.L;
    GptCost cost = {0};
    double block_weights = 4 * (C * C + C) + (C * F + F) + (F * C + C);   // the linear layers
    cost.matmul_flops = 2.0 * n * L * (4 * C * C + 2 * C * F) + 2.0 * C * V;
    // Row i sees offset+i+1 positions: sum over rows of (offset + i + 1).
    double seen = (double)n * offset + (double)n * (n + 1) / 2.0;
    cost.attention_flops = 2.0 * 2.0 * L * C * seen;   // query @ key, then weights @ value
    cost.weight_bytes = 4.0 * (L * (block_weights + 4 * C) + 2 * C + C * V + V + 2.0 * n * C);
    cost.cache_bytes = 4.0 * 2.0 * L * C * seen;
    cost.cache_write_bytes = 4.0 * 2.0 * L * C * n;
    return cost;
}
