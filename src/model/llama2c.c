// llama2c — llama2.c's checkpoint read into a LlamaModel (llama2c.h).
//
// Legend as in llama.h: V vocabulary, C dim, L layers, H query heads, G
// key/value heads, D = C / H, F hidden_dim, T seq_len.
//
// The file, after its header (all tensors row-major float32, PyTorch's
// nn.Linear layout (out, in)):
//   token_embedding_table (V, C)
//   rms_att_weight (L, C)   wq (L, H*D, C)   wk (L, G*D, C)   wv (L, G*D, C)
//   wo (L, C, H*D)          rms_ffn_weight (L, C)
//   w1 (L, F, C)            w2 (L, C, F)     w3 (L, F, C)
//   rms_final_weight (C)
//   freq_cis_real (T, D/2)  freq_cis_imag (T, D/2)   unused: kvdemo computes its own
//   wcls (V, C)             only when the header's vocab_size is negative
#include "llama2c.h"

#include "bpe.h"
#include "fileio.h"
#include "ops.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// One per-layer tensor of the file: where it goes in LlamaLayerParams and
// its PyTorch shape (rows = out, cols = in; rows 1 for a norm, kept as is).
typedef struct {
    size_t field;   // offsetof(LlamaLayerParams, ...)
    int rows, cols;
} LayerTensor;

// The header's seven numbers into a configuration; *shared is 1 when the
// classifier is the embedding. Returns 0, or -1 with a message.
static int read_header(LlamaConfig *c, int *shared, const unsigned char *h, const char *path, Err err) {
    int32_t v[7];
    for (int i = 0; i < 7; i++) v[i] = (int32_t)le_get_u32(h + 4 * i);
    static const char *const names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                                         "seq_len"};
    for (int i = 0; i < 7; i++)
        if (v[i] == 0 || (v[i] < 0 && i != 5) || v[i] == INT32_MIN) {
            fileio_fail2(err, "%s: bad header: %s is %d; it must be positive (vocab_size may be negative)",
                         "%s：文件头有误：%s 是 %d；它必须是正数（只有 vocab_size 可以为负）", path, names[i],
                         (int)v[i]);
            return -1;
        }
    *shared = v[5] > 0;
    *c = (LlamaConfig){.dim = v[0], .hidden_dim = v[1], .n_layers = v[2], .n_heads = v[3], .n_kv_heads = v[4],
                       .vocab_size = v[5] > 0 ? v[5] : -v[5], .max_seq_len = v[6],
                       .rope_theta = 10000.0f, .norm_eps = 1e-5f};
    char why[160];
    if (llama_config_check(c, ERR(err.lang, why)) != 0) {
        fileio_fail2(err, "%s: bad header: %s", "%s：文件头有误：%s", path, why);
        return -1;
    }
    return 0;
}

// The file's size for this header: the header, the weights, the two freq_cis
// tables and the classifier when it is not shared. The header's ranges keep
// every product far inside 64 bits.
static uint64_t file_bytes(const LlamaConfig *c, int shared) {
    uint64_t V = (uint64_t)c->vocab_size, C = (uint64_t)c->dim, L = (uint64_t)c->n_layers;
    uint64_t F = (uint64_t)c->hidden_dim, T = (uint64_t)c->max_seq_len, D = (uint64_t)c->head_dim;
    uint64_t GD = (uint64_t)c->n_kv_heads * D;
    uint64_t floats = V * C + L * (2 * C + 2 * C * C + 2 * GD * C + 3 * F * C) + C + T * D + (shared ? 0 : V * C);
    return LLAMA2C_HEADER_BYTES + 4 * floats;
}

// Reads n floats into buf and checks that they are finite; what names the
// tensor in the message, whose first float here is what[first]. Returns 0,
// or -1.
static int read_floats(float *buf, size_t n, size_t first, FILE *f, const char *what, const char *path, Err err) {
    if (fread(buf, sizeof(float), n, f) != n) {
        fileio_fail2(err, "%s: cannot read %s: %s", "%s：读取 %s 时出错：%s", path, what, fileio_read_reason(err.lang, f));
        return -1;
    }
    if (!fileio_host_is_little_endian())
        for (size_t i = 0; i < n; i++) buf[i] = le_get_f32((unsigned char *)&buf[i]);
    size_t bad = (size_t)ops_first_nonfinite(buf, (int64_t)n);
    if (bad < n) {
        fileio_fail2(err, "%s: %s[%zu] is not a finite number", "%s：%s[%zu] 不是有限数", path, what,
                     first + bad);
        return -1;
    }
    return 0;
}

// A tensor is read READ_ROWS rows at a time into a buffer that stays in the
// cache, and each piece is written transposed into its columns of out.
enum { READ_ROWS = 256 };

// out (cols, rows) = the tensor of rows x cols read from f, transposed
// (kvdemo's (in, out) from PyTorch's (out, in)); a norm (rows 1) as it is.
// buf holds READ_ROWS * cols floats.
static int read_tensor(float *out, float *buf, int rows, int cols, FILE *f, const char *what, const char *path,
                       Err err) {
    if (rows == 1) return read_floats(out, (size_t)cols, 0, f, what, path, err);
    for (int r0 = 0; r0 < rows; r0 += READ_ROWS) {
        int n = rows - r0 < READ_ROWS ? rows - r0 : READ_ROWS;
        if (read_floats(buf, (size_t)n * cols, (size_t)r0 * cols, f, what, path, err) != 0) return -1;
        // out[c][r0 + r] = buf[r][c], 32 columns at a time
        for (int c0 = 0; c0 < cols; c0 += 32)
            for (int c = c0; c < cols && c < c0 + 32; c++)
                for (int r = 0; r < n; r++) out[(size_t)c * rows + r0 + r] = buf[(size_t)r * cols + c];
    }
    return 0;
}

// Every weight, in the file's order, into m (made for the header's shape).
static int read_weights(LlamaModel *m, float *buf, int shared, FILE *f, const char *path, Err err) {
    const LlamaConfig *c = &m->cfg;
    int V = c->vocab_size, C = c->dim, F = c->hidden_dim, HD = c->n_heads * c->head_dim;
    int GD = c->n_kv_heads * c->head_dim;
    const LayerTensor kinds[] = {
        {offsetof(LlamaLayerParams, attention_norm), 1, C}, {offsetof(LlamaLayerParams, wq), HD, C},
        {offsetof(LlamaLayerParams, wk), GD, C},            {offsetof(LlamaLayerParams, wv), GD, C},
        {offsetof(LlamaLayerParams, wo), C, HD},            {offsetof(LlamaLayerParams, ffn_norm), 1, C},
        {offsetof(LlamaLayerParams, w1), F, C},             {offsetof(LlamaLayerParams, w2), C, F},
        {offsetof(LlamaLayerParams, w3), F, C},
    };
    static const char *const names[] = {"rms_att_weight", "wq", "wk", "wv", "wo", "rms_ffn_weight", "w1", "w2", "w3"};
    // token_embedding_table (V, C) is kvdemo's tok_embeddings as it is
    if (read_floats(m->p.tok_embeddings, (size_t)V * C, 0, f, "token_embedding_table", path, err) != 0)
        return -1;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int l = 0; l < c->n_layers; l++) {
            float *dst = *(float **)((char *)&m->p.layers[l] + kinds[k].field);
            if (read_tensor(dst, buf, kinds[k].rows, kinds[k].cols, f, names[k], path, err) != 0) return -1;
        }
    if (read_floats(m->p.norm, (size_t)C, 0, f, "rms_final_weight", path, err) != 0) return -1;
    // freq_cis_real and freq_cis_imag: llama.c's precompute_freqs_cis makes the same table
    if (fseek(f, (long)((size_t)c->max_seq_len * c->head_dim * sizeof(float)), SEEK_CUR) != 0) {
        fileio_fail2(err, "%s: cannot skip freq_cis: %s", "%s：跳过 freq_cis 时出错：%s", path, fileio_strerror(err.lang, errno));
        return -1;
    }
    // output (C, V) = wcls.T, or token_embedding_table.T when they are shared
    if (shared) ops_transpose(m->p.output, m->p.tok_embeddings, V, C);
    else if (read_tensor(m->p.output, buf, V, C, f, "wcls", path, err) != 0) return -1;
    return 0;
}

int llama2c_load(LlamaModel *m, const char *model_path, const char *tokenizer_path, Err err) {
    memset(m, 0, sizeof *m);
    uint64_t size = 0;
    FILE *f = fileio_open_read(model_path, &size, err);
    if (!f) return -1;
    unsigned char h[LLAMA2C_HEADER_BYTES];
    LlamaConfig c;
    int shared = 1;
    float *buf = NULL;
    if (fread(h, 1, sizeof h, f) != sizeof h) {
        fileio_fail2(err, "%s: %llu bytes: too short for llama2.c's header of seven int32 (28 bytes)",
                     "%s：只有 %llu 字节，放不下 llama2.c 的文件头（7 个 int32，28 字节）", model_path,
                     (unsigned long long)size);
        goto fail;
    }
    if (read_header(&c, &shared, h, model_path, err) != 0) goto fail;
    uint64_t want = file_bytes(&c, shared);
    if (size != want) {
        fileio_fail2(err,
                     "%s: %llu bytes, but llama2.c's header (dim %d, hidden_dim %d, n_layers %d, n_heads %d, "
                     "n_kv_heads %d, vocab_size %d %s, seq_len %d) says %llu: %s",
                     "%s：%llu 字节，而按 llama2.c 的文件头（dim %d、hidden_dim %d、n_layers %d、n_heads %d、"
                     "n_kv_heads %d、vocab_size %d %s、seq_len %d）应为 %llu 字节：%s",
                     model_path, (unsigned long long)size, c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads,
                     c.vocab_size, shared ? fileio_text(err.lang, "shared", "共享分类器") : fileio_text(err.lang, "own wcls", "独立分类器"),
                     c.max_seq_len, (unsigned long long)want,
                     size < want ? fileio_text(err.lang, "truncated", "文件不完整") : fileio_text(err.lang, "trailing bytes", "末尾多出字节"));
        goto fail;
    }
    char why[160];
    if (llama_new(m, &c, ERR(err.lang, why)) != 0) {
        fileio_fail2(err, "%s: %s", "%s：%s", model_path, why);
        goto fail;
    }
    // room for READ_ROWS rows of the widest tensor read transposed (w2: F; wo: H*D = C)
    buf = malloc(sizeof(float) * READ_ROWS * (size_t)(c.dim > c.hidden_dim ? c.dim : c.hidden_dim));
    if (!buf) {
        fileio_fail2(err, "%s: out of memory", "%s：内存不足", model_path);
        goto fail;
    }
    if (read_weights(m, buf, shared, f, model_path, err) != 0) goto fail;
    m->bpe = calloc(1, sizeof *m->bpe);
    if (!m->bpe) {
        fileio_fail2(err, "%s: out of memory", "%s：内存不足", tokenizer_path);
        goto fail;
    }
    if (bpe_load(m->bpe, tokenizer_path, c.vocab_size, err) != 0) goto fail;
    free(buf);
    fclose(f);
    return 0;
fail:
    free(buf);
    fclose(f);
    llama_free(m);
    return -1;
}

int llama_load_any(LlamaModel *m, const char *model_path, const char *tokenizer_path, Err err) {
    if (tokenizer_path) return llama2c_load(m, model_path, tokenizer_path, err);
    return llama_load(m, model_path, err);
}
