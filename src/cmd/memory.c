// memory — the KV cache's size: the article's §8 formula, real models'
// published shapes, and the `kvdemo memory` calculator built on them.
//
// Every size is a whole number of bytes in uint64_t, and every product is
// checked: a shape that overflows 64 bits is refused, never wrapped.
#include "memory.h"

#include "fileio.h"

#include "gpt.h"
#include "gptsetup.h"
#include "kvvariant.h"
#include "utf8.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <strings.h>

// ----------------------------------------------------------------------------
// The presets: published shapes (docs/memory.md cites each source). params
// is the size in the model's name (175B, 7B, ...), the one its paper uses.

const MemModel MEM_PRESETS[] = {
    {"gpt3-175b", "GPT-3 175B", 96, 96, 96, 128, 12288, 0, 0, 175e9, 16,
     "GPT-3 paper (Brown et al. 2020), Table 2.1", 2048, "GPT-3 paper, Table 2.1: n_ctx 2048"},
    {"opt-13b", "OPT-13B", 40, 40, 40, 128, 5120, 0, 0, 13e9, 16,
     "vLLM paper (Kwon et al. 2023), section 3; OPT paper Table 1", 2048,
     "vLLM paper, section 3: OPT generates sequences of up to 2048 tokens"},
    {"llama-2-7b", "LLaMA-2-7B", 32, 32, 32, 128, 4096, 0, 0, 7e9, 16, "meta-llama/Llama-2-7b-hf config.json", 4096,
     "llama2.c run.c: Llama-2-7B's seq_len 4096"},
    {"llama-2-13b", "LLaMA-2-13B", 40, 40, 40, 128, 5120, 0, 0, 13e9, 16, "meta-llama/Llama-2-13b-hf config.json", 0, NULL},
    {"llama-2-70b", "LLaMA-2-70B", 80, 64, 8, 128, 8192, 0, 0, 70e9, 16, "meta-llama/Llama-2-70b-hf config.json", 0, NULL},
    {"llama-3-8b", "Llama-3-8B", 32, 32, 8, 128, 4096, 0, 0, 8e9, 16, "Llama 3 paper (arXiv 2407.21783), Table 3", 0, NULL},
    {"llama-3-70b", "Llama-3-70B", 80, 64, 8, 128, 8192, 0, 0, 70e9, 16, "Llama 3 paper (arXiv 2407.21783), Table 3", 0, NULL},
    {"llama-3-405b", "Llama-3.1-405B", 126, 128, 8, 128, 16384, 0, 0, 405e9, 16,
     "Llama 3 paper (arXiv 2407.21783), Table 3 (8 KV heads)", 0, NULL},
    {"mistral-7b", "Mistral-7B v0.1", 32, 32, 8, 128, 4096, 0, 4096, 7e9, 16,
     "Mistral 7B paper (arXiv 2310.06825), Table 1; sliding_window 4096", 0, NULL},
    {"mixtral-8x7b", "Mixtral-8x7B", 32, 32, 8, 128, 4096, 0, 0, 47e9, 16,
     "mistralai/Mixtral-8x7B-Instruct-v0.1 config.json (47B parameters: Mixtral paper)", 32768,
     "mistralai/Mixtral-8x7B-Instruct-v0.1 config.json: max_position_embeddings 32768"},
    {"qwen2.5-7b", "Qwen2.5-7B", 28, 28, 4, 128, 3584, 0, 0, 7e9, 16, "Qwen2.5 technical report, Table 1", 0, NULL},
    {"deepseek-v2", "DeepSeek-V2 (MLA)", 60, 128, 0, 0, 5120, 512 + 64, 0, 236e9, 16,
     "DeepSeek-V2 paper (arXiv 2405.04434), section 3.1.2: kv_lora_rank 512 + rope 64", 0, NULL},
    {"deepseek-v3", "DeepSeek-V3 (MLA)", 61, 128, 0, 0, 7168, 512 + 64, 0, 671e9, 16,
     "deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json: kv_lora_rank 512 + rope 64", 0, NULL},
};
const int NUM_MEM_PRESETS = (int)(sizeof MEM_PRESETS / sizeof MEM_PRESETS[0]);

// kvdemo's own char GPT, from a model file or the seed preset's shape.
static const char *const CHAR_GPT = "char-gpt";

const MemModel *memory_preset(const char *name) {
    for (int i = 0; i < NUM_MEM_PRESETS; i++)
        if (!strcmp(MEM_PRESETS[i].name, name)) return &MEM_PRESETS[i];
    return NULL;
}

static const struct {
    const char *name;
    int bits;
} DTYPES[] = {{"fp32", 32}, {"fp16", 16}, {"bf16", 16}, {"fp8", 8}, {"int8", 8}, {"int4", 4}};

int memory_dtype_bits(const char *dtype) {
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (!strcmp(DTYPES[i].name, dtype)) return DTYPES[i].bits;
    return 0;
}

// ----------------------------------------------------------------------------
// The formula

int memory_mul(uint64_t *out, uint64_t a, uint64_t b) {
    if (a != 0 && b > UINT64_MAX / a) return -1;
    *out = a * b;
    return 0;
}

int memory_values_per_token(uint64_t *out, const MemModel *m) {
    // MLA: one latent per layer, shared by K and V.
    if (m->mla_dim) return memory_mul(out, (uint64_t)m->layers, (uint64_t)m->mla_dim);
    // 2 (K and V) · layers · kv_heads · head_dim
    uint64_t a, b;
    if (memory_mul(&a, 2 * (uint64_t)m->layers, (uint64_t)m->kv_heads) || memory_mul(&b, a, (uint64_t)m->head_dim))
        return -1;
    *out = b;
    return 0;
}

int memory_bytes_per_token(uint64_t *out, const MemModel *m, int bits) {
    uint64_t values, bitcount;
    if (memory_values_per_token(&values, m) || memory_mul(&bitcount, values, (uint64_t)bits)) return -1;
    *out = bitcount / 8 + (bitcount % 8 != 0);
    return 0;
}

int memory_past_context(const MemModel *m, uint64_t tokens) { return m->context > 0 && tokens > (uint64_t)m->context; }

double memory_scale_bytes_per_token(const MemModel *m, const char *dtype) {
    if (!dtype || (strcasecmp(dtype, "int8") && strcasecmp(dtype, "int4"))) return 0;
    if (m->mla_dim) return 4.0 * m->layers;   // the latent: one scale a token and layer
    double C = (double)m->kv_heads * m->head_dim;
    return m->layers * (4.0 * m->kv_heads + 4.0 * C / KV_KEY_GROUP);
}

uint64_t memory_tokens_held(const MemModel *m, uint64_t tokens) {
    return m->window && tokens > (uint64_t)m->window ? (uint64_t)m->window : tokens;
}

int memory_cache_bytes(uint64_t *out, const MemModel *m, int bits, uint64_t tokens, uint64_t batch) {
    uint64_t per_token, per_seq;
    if (memory_bytes_per_token(&per_token, m, bits) ||
        memory_mul(&per_seq, per_token, memory_tokens_held(m, tokens)) || memory_mul(out, per_seq, batch))
        return -1;
    return 0;
}

// ----------------------------------------------------------------------------
// Printing sizes

const char *memory_grouped(char *buf, size_t size, uint64_t v) {
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
    size_t o = 0;
    for (int i = 0; i < n && o + 2 < size; i++) {
        if (i > 0 && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

static const char *scaled(char *buf, size_t size, double bytes, double base, const char *const *units) {
    int u = 0;
    while (bytes >= base && units[u + 1]) bytes /= base, u++;
    if (u == 0) snprintf(buf, size, "%.0f %s", bytes, units[0]);
    else snprintf(buf, size, "%.*f %s", bytes < 10 ? 2 : 1, bytes, units[u]);
    return buf;
}

const char *memory_decimal(char *buf, size_t size, double bytes) {
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB", NULL};
    return scaled(buf, size, bytes, 1000.0, units);
}

const char *memory_binary(char *buf, size_t size, double bytes) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", NULL};
    return scaled(buf, size, bytes, 1024.0, units);
}

int memory_parse_size(double *bytes, const char *text) {
    static const struct {
        const char *unit;
        double scale;
    } UNITS[] = {{"B", 1},        {"KB", 1e3},           {"MB", 1e6},           {"GB", 1e9},
                 {"TB", 1e12},    {"KiB", 1024.0},       {"MiB", 1048576.0},    {"GiB", 1073741824.0},
                 {"TiB", 1099511627776.0}};
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || !(v > 0) || !isfinite(v)) return -1;
    while (*end == ' ') end++;
    for (size_t i = 0; i < sizeof UNITS / sizeof UNITS[0]; i++) {
        if (strcasecmp(end, UNITS[i].unit)) continue;
        *bytes = v * UNITS[i].scale;
        return *bytes < 1.8e19 ? 0 : -1;
    }
    return -1;
}

// ----------------------------------------------------------------------------
// kvdemo memory

// One line on stderr in lang for a usage error; returns its exit status, 2.
// en and zh take the same arguments (tests/test_zh.c checks).
static int usage(Lang lang, const char *en, const char *zh, ...) __attribute__((format(printf, 2, 4)));
static int usage(Lang lang, const char *en, const char *zh, ...) {
    va_list ap;
    va_start(ap, zh);
    fileio_verror(lang, "memory", en, zh, ap);
    va_end(ap);
    return 2;
}

static void preset_names(char *buf, size_t size) {
    buf[0] = '\0';
    for (int i = 0; i < NUM_MEM_PRESETS; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s, ", MEM_PRESETS[i].name);
    }
    size_t len = strlen(buf);
    snprintf(buf + len, size - len, "%s", CHAR_GPT);
}

// The char GPT as a MemModel: MHA, L layers of C = H · D, in float32.
static void from_gpt(MemModel *out, GptConfig cfg, size_t num_params, const char *label, const char *source) {
    *out = (MemModel){CHAR_GPT, label, cfg.L, cfg.H, cfg.H, cfg.C / cfg.H, cfg.C, 0, 0, (double)num_params, 32,
                      source, cfg.T, "its context T"};
}

static void print_list(Trace *tr) {
    char a[32], b[32], layers[16], heads[16], kv_heads[16], head_dim[16], source[256];
    if (tr->format == FORMAT_TEXT)
        fprintf(tr->out, "%s\n\n", trace_text(tr, "KV cache presets (bytes per token at 16 bits a value; kvdemo memory --model NAME)",
                                    "KV Cache 预设（每个 token 的字节数，每个数 16 位；kvdemo memory --model 名称）"));
    static const TraceColumn COLS[] = {
        {"name", "名称", 13, 0, NULL},        {"layers", "层数", 6, 1, NULL},
        {"heads", "头数", 6, 1, NULL},        {"kv_heads", "KV 头数", 8, 1, NULL},
        {"head_dim", "头维度", 8, 1, NULL},   {"MLA", "MLA", 5, 1, "mla_dim"},
        {"B/token", "字节/token", 12, 1, "bytes_per_token"}, {"source", "来源", 0, 0, "source"},
    };
    static const TraceTable TABLE = {"presets", 8, COLS};
    trace_table_head(tr, &TABLE);
    for (int i = 0; i < NUM_MEM_PRESETS; i++) {
        const MemModel *m = &MEM_PRESETS[i];
        uint64_t tok = 0;
        memory_bytes_per_token(&tok, m, 16);
        if (tr->format == FORMAT_JSON) {
            trace_run(tr, m->name);
            trace_count(tr, "layers", m->layers, NULL, NULL);
            trace_count(tr, "kv_heads", m->kv_heads, NULL, NULL);
            trace_count(tr, "head_dim", m->head_dim, NULL, NULL);
            trace_count(tr, "mla_dim", m->mla_dim, NULL, NULL);
            trace_count(tr, "window", m->window, NULL, NULL);
            trace_count(tr, "bytes_per_token", (int64_t)tok, NULL, NULL);
        }
        // Text groups the digits; JSON keeps numbers.
        snprintf(layers, sizeof layers, "%d", m->layers);
        snprintf(heads, sizeof heads, "%d", m->heads);
        snprintf(kv_heads, sizeof kv_heads, "%d", m->kv_heads);
        snprintf(head_dim, sizeof head_dim, "%d", m->head_dim);
        snprintf(b, sizeof b, "%d", m->mla_dim);
        if (tr->format == FORMAT_TEXT) memory_grouped(a, sizeof a, tok);
        else snprintf(a, sizeof a, "%llu", (unsigned long long)tok);
        snprintf(source, sizeof source, "%s%s", m->source,
                 m->window ? trace_text(tr, " (window caps the cache)", "（窗口限制缓存长度）") : "");
        const char *row[] = {m->name, layers, heads, kv_heads, head_dim, m->mla_dim || tr->format == FORMAT_JSON ? b : "-", a, source};
        trace_table_row(tr, &TABLE, row);
    }
    if (tr->format == FORMAT_JSON) {
        trace_run(tr, NULL);
        return;
    }
    fprintf(tr->out, "  %-13s %s\n", CHAR_GPT,
           trace_text(tr, "kvdemo's char GPT (the seed preset's shape, float32); --model FILE reads a model file's shape",
                      "kvdemo 的字符级 GPT（seed 预设的形状，float32）；--model 文件 读取模型文件的形状"));
}

// One size in bytes, both units: "1,342,177,280 B = 1.34 GB = 1.25 GiB".
static void print_size(Trace *tr, const char *name, uint64_t bytes, const char *label) {
    char g[40], d[32], b[32];
    trace_count(tr, name, (int64_t)bytes, NULL, NULL);
    if (tr->format == FORMAT_TEXT)
        fprintf(tr->out, "  %s%*s %s B = %s = %s\n", label, 34 - utf8_width(label), "", memory_grouped(g, sizeof g, bytes),
               memory_decimal(d, sizeof d, (double)bytes), memory_binary(b, sizeof b, (double)bytes));
}

// Under a length longer than the model's context: the mark, and what it means.
static void past_context_note(Trace *tr, const MemModel *m, uint64_t tokens) {
    trace_count(tr, "past_context", memory_past_context(m, tokens), NULL, NULL);
    if (tr->format != FORMAT_TEXT || !memory_past_context(m, tokens)) return;
    char n[32];
    fprintf(tr->out, trace_text(tr, "  ! past the model's %s-token context: no sequence of %s can be that long\n",
                                "  ! 超过了模型 %s 个 token 的上下文：%s 的序列不可能这么长\n"),
            memory_grouped(n, sizeof n, (uint64_t)m->context), m->label);
}

// What "fits" leaves out.
// vLLM sizes its pool the same way, in blocks (REFERENCES §1.3, vllm
// #8031): pool = total · gpu_memory_utilization − the peak it profiles
// (here the weights only: kvdemo runs no model to profile the activations),
// cut into blocks of 16 tokens; the "Maximum concurrency for N tokens per
// request: X.XXx" of its log is blocks · 16 / N.
enum { VLLM_BLOCK = 16 };
static const double VLLM_UTILIZATION = 0.9;

static void vllm_pool(Trace *tr, double gpu, double weights, uint64_t per_token, uint64_t tokens) {
    double pool = gpu * VLLM_UTILIZATION - weights;
    double blocks = pool > 0 ? floor(pool / ((double)per_token * VLLM_BLOCK)) : 0;
    double concurrency = blocks * VLLM_BLOCK / (double)tokens;
    trace_count(tr, "vllm_blocks", (int64_t)blocks, NULL, NULL);
    trace_value(tr, "vllm_max_concurrency", concurrency, "x", NULL, NULL);
    if (tr->format != FORMAT_TEXT) return;
    char g[32], w[32], p[32], b[32];
    memory_decimal(g, sizeof g, gpu);
    memory_decimal(w, sizeof w, weights);
    memory_decimal(p, sizeof p, pool > 0 ? pool : 0);
    memory_decimal(b, sizeof b, (double)per_token * VLLM_BLOCK);
    fprintf(tr->out,
            trace_text(tr,
                       "  vLLM's pool (gpu_memory_utilization %.2g, blocks of %d tokens):\n"
                       "    %s · %.2g − %s of weights = %s = %.0f blocks of %s\n"
                       "    (vLLM subtracts the peak it profiles, activations too); its log's \"maximum concurrency\"\n"
                       "    for %llu tokens a request: %.0f · %d / %llu = %.2fx\n",
                       "  vLLM 的池（gpu_memory_utilization %.2g，每块 %d 个 token）：\n"
                       "    %s · %.2g − 权重 %s = %s = %.0f 块，每块 %s\n"
                       "    （vLLM 减去的是它实测的峰值，激活也在内）；它日志里的最大并发数，\n"
                       "    每个请求 %llu 个 token 时：%.0f · %d / %llu = %.2fx\n"),
            VLLM_UTILIZATION, VLLM_BLOCK, g, VLLM_UTILIZATION, w, p, blocks, b, (unsigned long long)tokens, blocks,
            VLLM_BLOCK, (unsigned long long)tokens, concurrency);
}

static const char *upper_bound_text(const Trace *tr) {
    return trace_text(tr, "  (an upper bound: the activations and the runtime's own memory are not counted)",
                      "  （这是上限：没有算激活值和运行时自身占用的显存）");
}

// The options memory_cmd needs besides --list; names lists the presets.
// Returns 0, or 2 after one line on stderr.
static int check_shape_options(const Options *opt, int custom, const char *names) {
    if (custom && opt->model_path)
        return usage(opt->lang, "--model and --layers/--kv-heads/--head-dim exclude each other; give a preset or a shape",
                     "--model 和 --layers/--kv-heads/--head-dim 不能同时给；给一个预设，或者给一个形状");
    if (custom && !(opt->layers && opt->kv_heads && opt->head_dim))
        return usage(opt->lang, "a shape needs all three of --layers, --kv-heads and --head-dim",
                     "形状要同时给出 --layers、--kv-heads 和 --head-dim 三项");
    if (!custom && !opt->model_path)
        return usage(opt->lang, "give --model NAME (one of %s, or a model file) or --layers, --kv-heads and --head-dim",
                     "请给 --model NAME（%s 之一，或一个模型文件），或给 --layers、--kv-heads 和 --head-dim", names);
    if (!opt->tokens && !opt->gpu_memory)
        return usage(opt->lang, "give --tokens N (tokens per sequence: prompt + generated), or --gpu-memory SIZE to find the "
                     "longest context",
                     "请给 --tokens N（每个序列的 token 数：提示词加生成的），或给 --gpu-memory SIZE 求能放下的最长上下文");
    return 0;
}

// The model asked for: a shape given by hand, a preset, kvdemo's char GPT,
// or a model file's header. Returns 0, or an exit status after one line on
// stderr.
static int resolve_model(MemModel *out, const Options *opt, int custom, const char *names) {
    MemModel m;
    if (custom) {
        m = (MemModel){"custom", "custom shape", opt->layers, opt->kv_heads, opt->kv_heads, opt->head_dim,
                       0, 0, 0, 0, 16, "given on the command line", 0, NULL};
    } else if (memory_preset(opt->model_path)) {
        m = *memory_preset(opt->model_path);
    } else if (!strcmp(opt->model_path, CHAR_GPT)) {
        GptConfig cfg;
        gpt_preset(&cfg, "seed");
        from_gpt(&m, cfg, gpt_num_params(cfg), "kvdemo's char GPT", "the seed preset: the numpy chapter's shape");
    } else {
        uint64_t size;
        char why[512];
        FILE *f = fileio_open_read(opt->model_path, &size, ERR(opt->lang, why));
        if (!f && access(opt->model_path, F_OK) != 0)
            return usage(opt->lang, "unknown model '%s'; presets: %s, or a kvdemo model file",
                         "没有“%s”这个模型；预设有：%s，也可以给一个 kvdemo 模型文件", opt->model_path, names);
        if (!f) {
            fileio_error(opt->lang, "memory: %s", "memory：%s", why);
            return 1;
        }
        fclose(f);
        // Only the shape is needed: the header, not the weights.
        GptConfig cfg;
        char err[512];
        if (gpt_load_config(&cfg, opt->model_path, ERR(opt->lang, err))) {
            fileio_error(opt->lang, "memory: %s", "memory：%s", err);
            return 1;
        }
        from_gpt(&m, cfg, gpt_num_params(cfg), opt->model_path, "the model file's shape");
    }
    *out = m;
    return 0;
}

// What the model is: its shape as events, and for people a line of the formula.
static void describe_shape(Trace *tr, const MemModel *mp, int bits, const char *dtype, const char *bpv,
                           uint64_t batch, uint64_t tokens, uint64_t scales) {
    MemModel m = *mp;
    char a[40];
    trace_count(tr, "layers", m.layers, NULL, NULL);
    trace_count(tr, "kv_heads", m.kv_heads, NULL, NULL);
    trace_count(tr, "head_dim", m.head_dim, NULL, NULL);
    trace_count(tr, "mla_dim", m.mla_dim, NULL, NULL);
    trace_count(tr, "window", m.window, NULL, NULL);
    trace_count(tr, "bits", bits, NULL, NULL);
    trace_count(tr, "batch", (int64_t)batch, NULL, NULL);
    if (tokens) trace_count(tr, "tokens", (int64_t)tokens, NULL, NULL);
    if (tokens) trace_count(tr, "tokens_held", (int64_t)memory_tokens_held(&m, tokens), NULL, NULL);
    if (tr->format == FORMAT_TEXT) {
        fprintf(tr->out, "%s — %s%s\n", m.label, trace_text(tr, "source: ", "来源："), m.source);
        if (m.mla_dim)
            fprintf(tr->out, trace_text(tr, "  MLA: %d layers · %d (latent + rope dims) · %s bytes (%s); no factor 2: K and V share the latent\n",
                              "  MLA：%d 层 · %d（潜向量 + rope 维）· %s 字节（%s）；没有因子 2：K 和 V 共用潜向量\n"),
                   m.layers, m.mla_dim, bpv, dtype);
        else
            fprintf(tr->out, trace_text(tr, "  2 (K and V) · %d layers · %d KV heads · head_dim %d · %s bytes (%s)%s\n",
                              "  2（K 和 V）· %d 层 · %d 个 KV 头 · head_dim %d · %s 字节（%s）%s\n"),
                   m.layers, m.kv_heads, m.head_dim, bpv, dtype,
                   m.kv_heads < m.heads ? trace_text(tr, " — GQA: fewer KV heads than query heads",
                                                     " —— GQA：KV 头少于查询头")
                                        : "");
        if (scales)
            fprintf(tr->out, trace_text(tr, "  + %llu B of fp32 scales a token (%s is quantised: lesson 12's layout, one scale a\n"
                                            "    head for the values, one a channel per %d tokens for the keys)\n",
                                        "  + 每个 token %llu B 的 fp32 缩放因子（%s 是量化格式：按第 12 课的布局，值每个头一个，\n"
                                        "    键每个通道每 %d 个 token 一个）\n"),
                    (unsigned long long)scales, dtype, KV_KEY_GROUP);
        if (m.window)
            fprintf(tr->out, trace_text(tr, "  sliding window of %d tokens: the cache stops growing there\n",
                              "  滑动窗口 %d 个 token：缓存长到窗口大小就不再增长\n"),
                   m.window);
        if (m.context)
            fprintf(tr->out, trace_text(tr, "  context: %s tokens a sequence at most (%s)\n", "  上下文：每个序列最多 %s 个 token（%s）\n"),
                    memory_grouped(a, sizeof a, (uint64_t)m.context), m.context_source);
        fprintf(tr->out, "\n");
    }
    trace_count(tr, "scale_bytes_per_token", (int64_t)scales, NULL, NULL);
    trace_count(tr, "context", m.context, NULL, NULL);
}

// What fits beside the weights in --gpu-memory gpu: how many sequences of
// tokens, or (without --tokens) the longest context. Returns 1 when not
// even one token of each sequence fits (nothing more is said), else 0.
static int fit_gpu(Trace *tr, const MemModel *mp, double gpu, const char *cache_dtype, uint64_t batch,
                   uint64_t tokens, uint64_t per_token, uint64_t per_seq) {
    MemModel m = *mp;
    char a[40], b[40];
    double weights = m.params * m.bits / 8.0;   // the model's own dtype: --dtype is the cache's
    trace_value(tr, "gpu_bytes", gpu, "B", NULL, NULL);
    trace_value(tr, "weights_bytes", weights, "B", NULL, NULL);
    char d1[32], b1[32], d2[32], b2[32];
    if (tr->format == FORMAT_TEXT && m.params == 0)
        fprintf(tr->out, "\n  %s", trace_text(tr, "(a shape given by hand has no known parameter count: weights counted as 0)",
                                               "（手动给出的形状没有已知的参数量：权重按 0 计）"));
    if (tr->format == FORMAT_TEXT)
        fprintf(tr->out, trace_text(tr, "\n  GPU memory %s = %s; weights %.4g billion parameters · %d bytes (%s%s) = %s = %s\n",
                          "\n  显存 %s = %s；权重 %.4g × 10^9 个参数 · %d 字节（%s%s）= %s = %s\n"),
               memory_decimal(d1, sizeof d1, gpu), memory_binary(b1, sizeof b1, gpu), m.params / 1e9, m.bits / 8,
               m.bits == 32 ? "fp32" : "fp16",
               cache_dtype ? trace_text(tr, "; --dtype sets the cache's values, not the weights'", "；--dtype 只设缓存的数值，不改权重")
                           : "",
               memory_decimal(d2, sizeof d2, weights), memory_binary(b2, sizeof b2, weights));
    double left = gpu - weights;
    if (left < (double)per_token * (double)batch) {
        trace_count(tr, "sequences_fit", 0, NULL, NULL);
        if (tr->format == FORMAT_TEXT)
            fprintf(tr->out, "%s\n", trace_text(tr, "  Beside the weights there is no room for even one token of each sequence.",
                                                 "  放下权重之后，连每个序列一个 token 的空间都不够了。"));
        return 1;
    }
    trace_value(tr, "left_bytes", left, "B", NULL, NULL);
    if (tr->format == FORMAT_TEXT)
        fprintf(tr->out, trace_text(tr, "  left for the cache: %s = %s\n", "  留给缓存：%s = %s\n"),
               memory_decimal(d1, sizeof d1, left), memory_binary(b1, sizeof b1, left));
    if (tokens) {
        double fit = floor(left / (double)per_seq);
        trace_count(tr, "sequences_fit", (int64_t)fit, NULL, NULL);
        if (tr->format == FORMAT_TEXT)
            fprintf(tr->out, trace_text(tr, "  sequences of %llu tokens that fit: at most %.0f%s\n%s\n",
                              "  能放下的 %llu token 序列：至多 %.0f 个%s\n%s\n"),
                   (unsigned long long)tokens, fit,
                   fit >= (double)batch ? trace_text(tr, " (the batch fits)", "（整批放得下）")
                                        : trace_text(tr, " (the batch does not fit)", "（整批放不下）"),
                   upper_bound_text(tr));
        vllm_pool(tr, gpu, weights, per_token, tokens);
    } else {
        // The longest context: tokens = left / (per_token · batch).
        double longest = floor(left / ((double)per_token * (double)batch));
        if (m.window && longest >= m.window) {
            if (tr->format == FORMAT_TEXT)
                fprintf(tr->out, trace_text(tr, "  any length: the window caps each sequence's cache at %d tokens\n",
                                  "  任意长度：窗口把每个序列的缓存限制在 %d 个 token\n"),
                       m.window);
        } else {
            trace_count(tr, "max_tokens", (int64_t)longest, NULL, NULL);
            snprintf(b, sizeof b, "%llu", (unsigned long long)batch);
            if (tr->format == FORMAT_TEXT)
                fprintf(tr->out, trace_text(tr, "  the longest context, batch of %s: at most %s tokens a sequence\n%s\n",
                                  "  批大小 %s 时，每个序列至多 %s 个 token\n%s\n"),
                       b, memory_grouped(a, sizeof a, (uint64_t)longest), upper_bound_text(tr));
            past_context_note(tr, &m, (uint64_t)longest);
        }
    }
    return 0;
}

int memory_cmd(const Options *opt, Trace *tr) {
    char names[512];
    preset_names(names, sizeof names);
    int custom = opt->layers || opt->kv_heads || opt->head_dim;
    if (opt->list) {
        if (opt->model_path || custom || opt->tokens || opt->gpu_memory || opt->dtype || opt->batch)
            return usage(opt->lang, "--list takes no other option", "--list 不能和其他选项一起给");
        print_list(tr);
        return 0;
    }
    int rc = check_shape_options(opt, custom, names);
    if (rc) return rc;

    MemModel m = {0};
    rc = resolve_model(&m, opt, custom, names);
    if (rc) return rc;
    int bits = opt->dtype ? memory_dtype_bits(opt->dtype) : m.bits;
    const char *dtype = opt->dtype ? opt->dtype : bits == 32 ? "fp32" : "fp16";
    uint64_t batch = opt->batch ? (uint64_t)opt->batch : 1;
    uint64_t tokens = (uint64_t)opt->tokens;
    uint64_t per_token, per_seq = 0, total = 0;
    uint64_t scales = (uint64_t)ceil(memory_scale_bytes_per_token(&m, dtype));   // int8 / int4: lesson 12's
    if (memory_bytes_per_token(&per_token, &m, bits) || (per_token += scales) < scales ||
        (tokens && memory_mul(&per_seq, per_token, memory_tokens_held(&m, tokens))) ||
        (tokens && memory_mul(&total, per_seq, batch))) {
        fileio_error(tr->lang, "memory: the cache's size does not fit in 64 bits; give smaller sizes",
                     "memory：缓存的大小超出了 64 位整数；请给小一些的数");
        return 2;
    }
    double gpu = 0;
    if (opt->gpu_memory && memory_parse_size(&gpu, opt->gpu_memory))
        return usage(opt->lang, "--gpu-memory takes a size with its unit, such as 80GB, 24GiB or 512MB, not '%s'",
                     "--gpu-memory 取带单位的大小，例如 80GB、24GiB 或 512MB，不能是“%s”", opt->gpu_memory);

    // What the model is.
    char a[40], b[40], bpv[16];
    if (bits % 8) snprintf(bpv, sizeof bpv, "%d/8", bits);
    else snprintf(bpv, sizeof bpv, "%d", bits / 8);
    describe_shape(tr, &m, bits, dtype, bpv, batch, tokens, scales);
    print_size(tr, "bytes_per_token", per_token, trace_text(tr, "per token", "每个 token"));
    if (tokens) {
        snprintf(a, sizeof a, trace_text(tr, "per sequence (%s tokens)", "每个序列（%s 个 token）"),
                 memory_grouped(b, sizeof b, tokens));
        print_size(tr, "bytes_per_sequence", per_seq, a);
        past_context_note(tr, &m, tokens);
        snprintf(a, sizeof a, trace_text(tr, "batch of %s", "批大小 %s"), memory_grouped(b, sizeof b, batch));
        print_size(tr, "bytes", total, a);
    }

    if (opt->gpu_memory && fit_gpu(tr, &m, gpu, opt->dtype, batch, tokens, per_token, per_seq)) return 0;
    if (tr->format == FORMAT_TEXT)
        fprintf(tr->out, "\n%s\n", trace_text(tr, "GB, MB, kB: powers of 1000; GiB, MiB, KiB: powers of 1024.",
                                    "GB、MB、kB 按 1000 进位；GiB、MiB、KiB 按 1024 进位。"));
    return 0;
}
