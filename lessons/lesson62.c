// lesson 6.2 — MHA、GQA、MQA 优化技术 (the KV Cache article, section 6.2)
//
// The article, line by line, and where the lesson shows it:
//
//   MHA: h 个 Query、Key 和 Value 矩阵          n_kv_heads = n_heads
//   MQA: 所有的头共享同一份 Key 和 Value 矩阵      n_kv_heads = 1
//   GQA: 将查询头分成 N 组，每组共享一个 Key 和 Value   n_heads % n_kv_heads = 0
//        -> the shapes of wk, wv, the parameters ("模型体积减小") and which
//           key/value head each query head reads: h // (n_heads / n_kv_heads)
//   (2) 减少了推理过程中的 KV Cache
//        -> cache_k (max_batch, max_seq_len, n_kv_heads, head_dim) per layer;
//           bytes per token = 2 * layers * n_kv_heads * head_dim * bytes
//   (1) 减少了数据的读取
//        -> bytes read per generated token (weights + the cache rows) and the
//           time per token, measured generating with the cache at a long
//           context
//   GQA 和 MQA 需要在模型训练的时候开启
//        -> an MHA model converted by mean-pooling the key/value heads of
//           each group (the GQA paper's conversion): its logits move
//
// Then the checks that must hold: cached = uncached logits for all three; GQA
// with n_kv_heads = n_heads is MHA; GQA is MHA with each key/value head
// repeated for its group (LLaMA-2's repeat_kv). And LLaMA-2-7B and -70B's
// cache per token, computed from their published shapes.
//
// One model, three ways: the MHA model has random, seeded weights; the GQA
// and MQA models are that model converted. The text they would write is
// noise; the shapes, bytes and times are the lesson. Legend as in llama.h:
// V vocab, C dim, L layers, H query heads, G key/value heads, D head_dim,
// F SwiGLU size, B max_batch_size, T max_seq_len, P context before the timed
// tokens, n prompt tokens.
#include "lessons.h"
#include "measure.h"
#include "fileio.h"
#include "llama.h"
#include "llama2c.h"
#include "lesson62_trained.h"
#include "ops.h"
#include "stats.h"
#include "timer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The lesson's sizes (--preset): "seed" is the char GPT's 6 blocks of 384
// with 8 query heads of 48, at a context of 512; "tiny" runs in a blink (the
// tests). F follows LLaMA's rule: 2/3 of 4 * dim, rounded up to a multiple.
typedef struct {
    const char *name;
    int dim, n_layers, n_heads, hidden_dim, max_seq_len;
    int steps, repeat;   // defaults of --steps and --repeat
    long trained_part;   // characters of the validation slice part (3) scores (0: all)
} Size;

static const Size SIZES[] = {
    {"seed", 384, 6, 8, 1024, 512, 32, 9, 0},   // F = 256 * ceil(1024 / 256)
    {"tiny", 64, 2, 8, 192, 48, 8, 1, 257},     // F = 32 * ceil(170 / 32); 2 windows of 128
};

enum {
    NUM_VARIANTS = 3,
    GQA_KV_HEADS = 2,   // GQA: 8 query heads in 2 groups of 4
    PREFILL_CHUNK = 64, // the context is read in this many positions a call
    BYTES_FP16 = 2,
};

static const char *const DEFAULT_PROMPT = "天气真好，你好！";

// One of the three ways: MHA, GQA, MQA.
typedef struct {
    const char *run;     // "mha", "gqa", "mqa": the JSON run
    const char *label;   // "MHA", "GQA", "MQA"
    LlamaModel m;        // context T
    LlamaState st;       // a batch of one row (B = 1)
    float *logits;       // (n, V) over the prompt, with the cache
    float *logits_nc;    // (n, V) over the prompt, without it
    double *samples;     // (repeat) seconds per generated token
    double per_token;    // their median
    int64_t kv_params;   // wk + wv of one layer: 2 * C * G * D
    int64_t cache_tok;   // cache bytes per token
    int64_t weights_read, cache_read;   // bytes read by the last generated token
} Variant;

// ----------------------------------------------------------------------------
// The numbers of the article's two reasons

// Bytes of cache_k + cache_v one token occupies: both caches, every layer,
// n_kv_heads heads of head_dim numbers of `bytes` each.
static int64_t kv_bytes_per_token(int64_t layers, int64_t kv_heads, int64_t head_dim,
                                  int64_t bytes) {
    return 2 * layers * kv_heads * head_dim * bytes;
}

// Bytes of weights one generated token reads: every matrix once, but of the
// embedding table only its own row (tok_embeddings is a lookup).
// Floating-point operations of one generated token at position pos: two per
// multiply-add of every weight matrix (of the embedding none, it is a
// lookup) and of the attention, q . k and weights @ v over pos + 1 rows.
// The key/value projections are the part GQA and MQA shrink.
static int64_t flops_per_token(const LlamaModel *m, int pos, int64_t *kv_proj) {
    const LlamaConfig *c = &m->cfg;
    int64_t C = c->dim, L = c->n_layers, H = c->n_heads, G = c->n_kv_heads, D = c->head_dim;
    int64_t F = c->hidden_dim, V = c->vocab_size;
    *kv_proj = 2 * L * 2 * C * G * D;
    int64_t proj = 2 * (L * (C * H * D + 2 * C * G * D + H * D * C + 3 * C * F) + C * V);
    int64_t attn = 2 * L * H * D * 2 * (int64_t)(pos + 1);
    return proj + attn;
}

static int64_t weight_bytes_read(const LlamaModel *m) {
    const LlamaConfig *c = &m->cfg;
    return (int64_t)(m->num_params - (size_t)c->vocab_size * c->dim + (size_t)c->dim) *
           (int64_t)sizeof(float);
}

// "18,432" — bytes are easier to read in groups of three.
static const char *grouped(char *buf, size_t size, int64_t v) {
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%lld", (long long)(v < 0 ? -v : v));
    size_t o = 0;
    if (v < 0 && o + 1 < size) buf[o++] = '-';
    for (int i = 0; i < n && o + 2 < size; i++) {
        if (i > 0 && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

// "512 KiB", "1.25 GiB": binary units.
static const char *binary(char *buf, size_t size, int64_t v) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)v;
    int u = 0;
    while (x >= 1024.0 && u < 4) x /= 1024.0, u++;
    snprintf(buf, size, "%.4g %s", x, units[u]);
    return buf;
}

// ----------------------------------------------------------------------------
// The arithmetic (nothing printed here)

// logits (n, V) at every position of ids (n). With the cache: one token a
// call, forward(ids[t:t+1], t). Without: forward(ids[0:t+1], 0) each time.
static void prompt_logits(float *logits, LlamaState *s, const LlamaModel *m, const int *ids, int n,
                          int use_cache) {
    int V = m->cfg.vocab_size;
    for (int t = 0; t < n; t++) {
        if (use_cache) llama_forward(logits + (size_t)t * V, s, m, ids + t, t, 1, 1, n);
        else llama_forward(logits + (size_t)t * V, s, m, ids, 0, 1, t + 1, n);
    }
}

// Reads the context ctx[0:P] into the cache, PREFILL_CHUNK positions a call
// (not timed: it only sets the scene).
static void prefill(float *logits, LlamaState *s, const LlamaModel *m, const int *ctx, int P) {
    for (int at = 0; at < P; at += PREFILL_CHUNK) {
        int n = P - at < PREFILL_CHUNK ? P - at : PREFILL_CHUNK;
        llama_forward(logits, s, m, ctx + at, at, 1, n, n);
    }
}

// Generates `steps` tokens with the cache from position P: each step feeds
// the one new token, forward(tokens[pos:pos+1], pos), reading cache rows
// 0..pos, and takes the argmax. Returns the seconds per token (forward and
// argmax only). tok (T) holds the context; tok[P] is the first token fed.
static double generate_timed(float *logits, LlamaState *s, const LlamaModel *m, int *tok, int P,
                             int steps) {
    int V = m->cfg.vocab_size, T = m->cfg.max_seq_len;
    double t0 = timer_now();
    for (int pos = P; pos < P + steps; pos++) {
        llama_forward(logits, s, m, tok + pos, pos, 1, 1, 1);
        int next = ops_argmax(logits, V);
        if (pos + 1 < T) tok[pos + 1] = next;
    }
    return (timer_now() - t0) / steps;
}

// ----------------------------------------------------------------------------
// What the lesson shows

static void show_variant(Trace *tr, const Variant *v, int64_t mha_params) {
    const LlamaConfig *c = &v->m.cfg;
    int H = c->n_heads, G = c->n_kv_heads, D = c->head_dim, C = c->dim;
    trace_run(tr, v->run);
    if (G == H)
        trace_sayf(tr,
                   "MHA (multi-head attention): %d query heads and %d key/value heads: every "
                   "head has its own Query, Key and Value matrix.",
                   "MHA（Multi-head Attention）：%d 个查询头、%d 个 key/value 头：h 个 Query、Key "
                   "和 Value 矩阵，每个头各有一份。",
                   H, G);
    else if (G == 1)
        trace_sayf(tr,
                   "MQA (multi-query attention): %d query heads share 1 key/value head: every "
                   "head keeps its own Query, all share one Key and one Value matrix.",
                   "MQA：%d 个查询头共享 1 个 key/value 头：所有的头之间共享同一份 Key 和 Value "
                   "矩阵，每个头只单独保留了一份 Query 参数。",
                   H);
    else
        trace_sayf(tr,
                   "GQA (grouped-query attention): %d query heads in %d groups of %d; each group "
                   "shares one Key and one Value matrix.",
                   "GQA：%d 个查询头分成 %d 组，每组 %d 个，每个组共享一个 Key 和 Value 矩阵。", H,
                   G, H / G);
    trace_count(tr, "n_heads", H, NULL, NULL);
    trace_count(tr, "n_kv_heads", G, NULL, NULL);
    trace_count(tr, "head_dim", D, NULL, NULL);
    trace_count(tr, "dim", C, NULL, NULL);
    trace_count(tr, "n_layers", c->n_layers, NULL, NULL);
    trace_count(tr, "hidden_dim", c->hidden_dim, NULL, NULL);
    trace_count(tr, "vocab_size", c->vocab_size, NULL, NULL);
    int wq[2] = {C, H * D}, wk[2] = {C, G * D};
    trace_shape(tr, "wq", 2, wq);
    trace_shape(tr, "wk", 2, wk);
    trace_shape(tr, "wv", 2, wk);
    trace_count(tr, "kv_params_per_layer", v->kv_params, "parameters of wk + wv in one layer",
                "每层 wk + wv 的参数量");
    trace_count(tr, "params", (int64_t)v->m.num_params, "parameters of the whole model",
                "整个模型的参数量");
    if (G != H)
        trace_sayf(tr, "  %.1f%% of MHA's: the model is smaller.", "  是 MHA 的 %.1f%%：模型体积减小。",
                   100.0 * (double)v->m.num_params / (double)mha_params);
    // Which key/value head query head h reads: h // (n_heads // n_kv_heads).
    for (int h = 0; h < H; h++) {
        char name[32];
        snprintf(name, sizeof name, "kv_head[%d]", h);
        trace_count(tr, name, h / (H / G), NULL, NULL);
    }
    trace_say(tr, "", "");
}

// The map of query heads to key/value heads, one row per variant.
static void show_head_map(Trace *tr, const Variant *vs) {
    int H = vs[0].m.cfg.n_heads;
    trace_run(tr, NULL);
    trace_say(tr,
              "Which key/value head each query head reads: kv_head = h // (n_heads // n_kv_heads)",
              "每个查询头读取哪个 key/value 头：kv_head = h // (n_heads // n_kv_heads)");
    // One column for the variant, then one per query head (at most 32 shown).
    enum { MAX_SHOWN = 32 };
    int shown = H < MAX_SHOWN ? H : MAX_SHOWN;
    TraceColumn cols[1 + MAX_SHOWN] = {{"query head h", "查询头 h", 22, 0, "variant"}};
    char heads[MAX_SHOWN][12], cells[1 + MAX_SHOWN][64];
    const char *row[1 + MAX_SHOWN];
    for (int h = 0; h < shown; h++) {
        snprintf(heads[h], sizeof heads[h], "%d", h);
        cols[1 + h] = (TraceColumn){heads[h], heads[h], 2, 1, NULL};
    }
    TraceTable table = {"kv_head_map", 1 + shown, cols};
    trace_table_head(tr, &table);
    for (int i = 0; i < NUM_VARIANTS; i++) {
        int G = vs[i].m.cfg.n_kv_heads;
        snprintf(cells[0], sizeof cells[0], "%s (n_kv_heads %d)", vs[i].label, G);
        for (int h = 0; h < shown; h++) snprintf(cells[1 + h], sizeof cells[1 + h], "%d", h / (H / G));
        for (int c = 0; c <= shown; c++) row[c] = cells[c];
        trace_table_row(tr, &table, row);
    }
    trace_say(tr, "", "");
}

static void show_cache(Trace *tr, const Variant *v) {
    const LlamaConfig *c = &v->m.cfg;
    char a[32], b[32], d[32];
    trace_run(tr, v->run);
    int B = v->st.max_batch_size;
    int shape[4] = {B, c->max_seq_len, c->n_kv_heads, c->head_dim};
    trace_count(tr, "max_batch_size", B, NULL, NULL);
    trace_count(tr, "max_seq_len", c->max_seq_len, NULL, NULL);
    trace_sayf(tr, "%s: cache_k and cache_v of each of the %d layers:",
               "%s：%d 层中每一层的 cache_k 和 cache_v：", v->label, c->n_layers);
    trace_shape(tr, "cache_k", 4, shape);
    trace_shape(tr, "cache_v", 4, shape);
    trace_sayf(tr, "  bytes per token = 2 * n_layers * n_kv_heads * head_dim * 4 = 2 * %d * %d * %d * 4 = %s B",
               "  每个 token 的字节数 = 2 * n_layers * n_kv_heads * head_dim * 4 = 2 * %d * %d * %d * 4 = %s B",
               c->n_layers, c->n_kv_heads, c->head_dim, grouped(a, sizeof a, v->cache_tok));
    trace_count(tr, "cache_bytes_per_token", v->cache_tok, NULL, NULL);
    int64_t all = v->cache_tok * B * c->max_seq_len;
    trace_sayf(tr, "  the whole cache, %d x %d tokens: %s B (%s)", "  整个缓存，%d x %d 个 token：%s B（%s）",
               B, c->max_seq_len, grouped(b, sizeof b, all), binary(d, sizeof d, all));
    trace_count(tr, "cache_bytes", all, NULL, NULL);
    trace_say(tr, "", "");
}

static void show_reads(Trace *tr, const Variant *v, int T, int repeat) {
    char a[32], b[32], d[32], e[32], f[32], g[32];
    trace_run(tr, v->run);
    int64_t total = v->weights_read + v->cache_read;
    trace_sayf(tr,
               "%s: the token at position %d reads %s B of weights + %s B of cache (%d rows of "
               "%s B) = %s B (%s)",
               "%s：位置 %d 的 token 读取权重 %s B + 缓存 %s B（%d 行，每行 %s B）= %s B（%s）",
               v->label, T - 1, grouped(a, sizeof a, v->weights_read),
               grouped(b, sizeof b, v->cache_read), T, grouped(d, sizeof d, v->cache_tok),
               grouped(e, sizeof e, total), binary(f, sizeof f, total));
    trace_count(tr, "weight_bytes_read", v->weights_read, NULL, NULL);
    trace_count(tr, "cache_bytes_read", v->cache_read, NULL, NULL);
    trace_count(tr, "bytes_read_per_token", total, NULL, NULL);
    int64_t kv_proj, flops = flops_per_token(&v->m, T - 1, &kv_proj);
    trace_sayf(tr, "  and computes %s FLOP, %s of them in the key/value projections (wk, wv)",
               "  计算量 %s FLOP，其中 key/value 投影（wk、wv）占 %s", grouped(a, sizeof a, flops),
               grouped(g, sizeof g, kv_proj));
    trace_count(tr, "flops_per_token", flops, NULL, NULL);
    trace_count(tr, "kv_proj_flops_per_token", kv_proj, NULL, NULL);
    // The time: its median with min … max (measure.h).
    Stats st = stats_of(v->samples, repeat);
    trace_measure(tr, "per_token", v->samples, repeat);
    trace_value(tr, "per_token_min", st.min, "s", NULL, NULL);
    trace_value(tr, "per_token_max", st.max, "s", NULL, NULL);
}

// ----------------------------------------------------------------------------
// Real models: the cache per token from LLaMA-2's published shapes

typedef struct {
    const char *name;   // the JSON run
    const char *label, *label_zh;
    int n_layers, dim, n_heads, n_kv_heads;
} Published;

// params.json of the LLaMA-2 release; 70B is GQA with 8 key/value heads.
// The third row is 70B as it would be with MHA (n_kv_heads = n_heads).
static const Published LLAMA2[] = {
    {"llama-2-7b", "LLaMA-2-7B (MHA)", "LLaMA-2-7B（MHA）", 32, 4096, 32, 32},
    {"llama-2-70b", "LLaMA-2-70B (GQA)", "LLaMA-2-70B（GQA）", 80, 8192, 64, 8},
    {"llama-2-70b-mha", "LLaMA-2-70B as MHA", "LLaMA-2-70B 若用 MHA", 80, 8192, 64, 64},
};
enum { LLAMA2_CONTEXT = 4096 };   // max_seq_len of LLaMA-2

static void show_real_models(Trace *tr) {
    trace_heading(tr, "Real models: LLaMA-2's cache per token (fp16, 2 bytes a number)",
                  "真实模型：LLaMA-2 每个 token 的 KV Cache（fp16，每个数 2 字节）");
    for (size_t i = 0; i < sizeof LLAMA2 / sizeof LLAMA2[0]; i++) {
        const Published *p = &LLAMA2[i];
        int head_dim = p->dim / p->n_heads;
        int64_t tok = kv_bytes_per_token(p->n_layers, p->n_kv_heads, head_dim, BYTES_FP16);
        int64_t seq = tok * LLAMA2_CONTEXT;
        char a[32], b[32], c[32];
        trace_run(tr, p->name);
        trace_sayf(tr,
                   "%s: dim %d, %d layers, %d query heads, %d key/value heads of %d:\n"
                   "  2 * %d * %d * %d * %d = %s B = %s per token; %s for %d tokens",
                   "%s：dim %d，%d 层，%d 个查询头，%d 个 key/value 头（每头 %d 维）：\n"
                   "  2 * %d * %d * %d * %d = %s B，即每个 token %s；整段 %s（%d 个 token）",
                   trace_text(tr, p->label, p->label_zh), p->dim, p->n_layers, p->n_heads, p->n_kv_heads, head_dim, p->n_layers,
                   p->n_kv_heads, head_dim, BYTES_FP16, grouped(a, sizeof a, tok),
                   binary(b, sizeof b, tok), binary(c, sizeof c, seq), LLAMA2_CONTEXT);
        trace_count(tr, "n_layers", p->n_layers, NULL, NULL);
        trace_count(tr, "n_heads", p->n_heads, NULL, NULL);
        trace_count(tr, "n_kv_heads", p->n_kv_heads, NULL, NULL);
        trace_count(tr, "head_dim", head_dim, NULL, NULL);
        trace_count(tr, "cache_bytes_per_token", tok, NULL, NULL);
        trace_count(tr, "cache_bytes_4096", seq, NULL, NULL);
    }
    trace_run(tr, NULL);
    const Published *g = &LLAMA2[1], *m = &LLAMA2[2];
    int64_t gqa = kv_bytes_per_token(g->n_layers, g->n_kv_heads, g->dim / g->n_heads, BYTES_FP16);
    int64_t mha = kv_bytes_per_token(m->n_layers, m->n_kv_heads, m->dim / m->n_heads, BYTES_FP16);
    trace_sayf(tr,
               "\nLLaMA-2-70B keeps %lld times less cache per token than it would with MHA: "
               "n_heads / n_kv_heads = %d / %d.",
               "\nLLaMA-2-70B 若用 MHA，每个 token 的 KV Cache 会是现在的 %lld 倍：n_heads / n_kv_heads = %d / %d。",
               (long long)(mha / gqa), g->n_heads, g->n_kv_heads);
    // Per sequence the cache stays far below the weights (70 · 10^9 parameters
    // in fp16): it takes a batch to pass them.
    double weights = 70e9 * BYTES_FP16, seq = (double)gqa * LLAMA2_CONTEXT;
    int64_t batch = (int64_t)ceil(weights / seq);
    char a[32], b[32];
    snprintf(a, sizeof a, "%.2f GB", seq * 1e-9);
    snprintf(b, sizeof b, "%.0f GB", weights * 1e-9);
    trace_count(tr, "batch_for_cache_to_pass_weights", batch, NULL, NULL);
    trace_sayf(tr,
               "Still, one sequence of %d tokens holds %s of cache beside %s of weights (70 * 10^9 parameters\n"
               "* 2 bytes): the cache passes the weights only with a batch of %lld such sequences.",
               "不过一个 %d 个 token 的序列只有 %s 的 KV Cache，而权重有 %s（70 * 10^9 个参数 * 2 字节）：\n"
               "要 %lld 个这样的序列组成一批，缓存才超过权重。",
               LLAMA2_CONTEXT, a, b, (long long)batch);
}

// ----------------------------------------------------------------------------
// What the lesson's claims share

// The three models, the checks' model, the prompt and the sizes of the timed
// run.
typedef struct {
    Variant vs[NUM_VARIANTS];   // MHA, GQA, MQA
    LlamaModel chk;         // G = H, T = n: the checks against MHA
    LlamaState chk_st;      // its state (B = 1)
    float *chk_logits;      // (n, V)
    float *logits;          // (V) scratch of the timed run
    int *ids, *ctx, *tok;   // the prompt (n), the context (T), scratch (T)
    int n, V, T, P, steps, repeat;
    const Options *opt;
    LlamaModel file;        // --model FILE: the MHA model's weights (params NULL: random ones)
    char prompt_text[96];   // "\"天气真好，你好！\"" as the narration quotes it
    Pool *pool;             // --threads, every state's
} Demo;

// ----------------------------------------------------------------------------
// The article's claims, in its order

// The article's definitions: who shares the Key and Value matrices, and the
// smaller model that follows ("模型体积减小").
static void show_sharing(Trace *tr, const Demo *d) {
    const Variant *vs = d->vs;
    const LlamaModel *mha = &d->vs[0].m;
    trace_heading(tr, "MHA, MQA, GQA: who shares the Key and Value matrices",
                  "MHA、MQA、GQA：谁共享 Key 和 Value 矩阵");
    for (int i = 0; i < NUM_VARIANTS; i++) show_variant(tr, &vs[i], (int64_t)mha->num_params);
    show_head_map(tr, vs);
    trace_say(tr,
              "GQA and MQA share key/value heads, so the model is smaller; GQA is the compromise "
              "between MQA and MHA.",
              "GQA 以及 MQA 都可以实现一定程度的 Key value 的共享，从而可以使模型体积减小，"
              "GQA 是 MQA 和 MHA 的折中方案。");
    trace_pause(tr);
}

// Each variant's time per generated token (vs[i].samples, repeat runs, and
// their median per_token): a context of T positions read into its cache,
// P prefilled, then steps tokens generated, after a warm-up round. Returns
// the machine as it was before the runs.
static MeasureMachine time_generated_tokens(Demo *d) {
    Variant *vs = d->vs;
    float *logits = d->logits;
    const int *ids = d->ids;
    int *ctx = d->ctx;
    int *tok = d->tok;
    int n = d->n;
    int T = d->T;
    int P = d->P;
    int steps = d->steps;
    int repeat = d->repeat;
    for (int t = 0; t < T; t++) ctx[t] = t == 0 || n == 1 ? ids[0] : ids[1 + (t - 1) % (n - 1)];
    for (int i = 0; i < NUM_VARIANTS; i++) prefill(logits, &vs[i].st, &vs[i].m, ctx, P);
    MeasureMachine machine = measure_machine();
    // A warm-up round, not counted; then the variants take turns, so that a
    // busy machine slows all of them alike (measure.h's interleaving).
    for (int i = 0; i < NUM_VARIANTS; i++) {
        memcpy(tok, ctx, sizeof(int) * (size_t)T);
        generate_timed(logits, &vs[i].st, &vs[i].m, tok, P, steps);
    }
    for (int r = 0; r < repeat; r++)
        for (int i = 0; i < NUM_VARIANTS; i++) {
            memcpy(tok, ctx, sizeof(int) * (size_t)T);
            vs[i].samples[r] = generate_timed(logits, &vs[i].st, &vs[i].m, tok, P, steps);
        }
    for (int i = 0; i < NUM_VARIANTS; i++) vs[i].per_token = stats_median(vs[i].samples, repeat);
    return machine;
}

// GQA's and MQA's bytes, FLOPs and time per token against MHA's, at the
// last position (T - 1), over repeat runs each.
static void show_ratios_to_mha(Trace *tr, const Variant *vs, int T, int repeat) {
    // Bytes and FLOPs are exact; the time ratio is a measurement on a
    // machine that may be doing other work: the verdict its runs support.
    int64_t kv0, flops0 = flops_per_token(&vs[0].m, T - 1, &kv0);
    for (int i = 1; i < NUM_VARIANTS; i++) {
        trace_run(tr, vs[i].run);
        int64_t kv, flops = flops_per_token(&vs[i].m, T - 1, &kv);
        double bytes_ratio = (double)(vs[i].weights_read + vs[i].cache_read) /
                             (double)(vs[0].weights_read + vs[0].cache_read);
        double flops_ratio = (double)flops / (double)flops0;
        Stats mha = stats_of(vs[0].samples, repeat), this = stats_of(vs[i].samples, repeat);
        MeasureRatio time_ratio = measure_ratio(this, mha);   // this one's time / MHA's
        MeasureVerdict verdict = measure_verdict(vs[0].samples, repeat, vs[i].samples, repeat);   // this one against MHA
        // The time ratio beside the bytes and FLOPs (below 1 when faster),
        // alone; then the verdict in its own direction with the figure that
        // supports it ("0.77 ± 0.32 x: faster" read as a contradiction).
        MeasureRatio speedup = measure_ratio(mha, this);
        char xe[32], en[128], zh[128];
        trace_sayf(tr, "  %s against MHA per token: bytes read %.3f x, FLOPs %.3f x, time %s x%s%s",
                   "  %s 与 MHA 相比（每个 token）：读取字节 %.3f 倍，计算量 %.3f 倍，耗时 %s 倍%s%s",
                   vs[i].label, bytes_ratio, flops_ratio,
                   measure_ratio_alone(xe, sizeof xe, time_ratio.x),
                   verdict == MEASURE_TOO_FEW ? trace_text(tr, ": ", "：") : trace_text(tr, ", that is ", "，即"),
                   verdict == MEASURE_TOO_FEW
                       ? trace_text(tr, measure_verdict_word(verdict, 0), measure_verdict_word(verdict, 1))
                       : trace_text(tr, measure_compare_text(en, sizeof en, speedup, verdict, 0),
                                    measure_compare_text(zh, sizeof zh, speedup, verdict, 1)));
        trace_value(tr, "bytes_read_ratio", bytes_ratio, "x", NULL, NULL);
        trace_value(tr, "flops_ratio", flops_ratio, "x", NULL, NULL);
        trace_comparison_of(tr, "time_ratio", time_ratio, verdict, NULL, NULL);
    }
}

// Reason (1), "减少了数据的读取": prefill, time the generated tokens, and count
// the bytes and FLOPs each one needs.
static void show_less_data_read(Trace *tr, Demo *d) {
    const Variant *vs = d->vs;
    int T = d->T;
    int P = d->P;
    int steps = d->steps;
    int repeat = d->repeat;
    MeasureMachine machine = time_generated_tokens(d);

    trace_heading(tr, "(1) Less data read: bytes and time per generated token",
                  "（1）减少了数据的读取：每生成一个 token 读取的字节数和耗时");
    trace_sayf(tr,
               "Each model reads a context of %d positions into its cache (the prompt repeated, "
               "%d positions a call, not timed), then generates %d tokens with the cache, at "
               "positions %d to %d: each step feeds one token, forward(tokens[pos:pos+1], pos), "
               "and reads every cached row. Time is the forward pass and the argmax only, per "
               "token, the median of %d runs (after one not counted), with min … max.\n"
               "A token reads every weight matrix once (of tok_embeddings only its row) and the "
               "cache rows 0..pos of every layer.",
               "每个模型先把 %d 个位置的上下文读入缓存（重复的提示词，每次 %d 个位置，不计时），"
               "再使用缓存生成 %d 个 token，位置 %d 到 %d：每一步输入一个 token，"
               "forward(tokens[pos:pos+1], pos)，读取缓存中所有的行。计时只含前向计算和 argmax，"
               "按 token 平均，取 %d 次运行的中位数（之前先跑一次不计），附最小 … 最大。\n"
               "每个 token 读取每个权重矩阵一次（tok_embeddings 只读它那一行）以及每一层缓存的第 "
               "0..pos 行。",
               P, PREFILL_CHUNK, steps, P, T - 1, repeat);
    trace_count(tr, "context", P, NULL, NULL);
    trace_count(tr, "steps", steps, NULL, NULL);
    trace_machine(tr, machine);
    for (int i = 0; i < NUM_VARIANTS; i++) show_reads(tr, &vs[i], T, repeat);
    trace_run(tr, NULL);
    trace_say(tr, "", "");
    show_ratios_to_mha(tr, vs, T, repeat);
    trace_run(tr, NULL);
    trace_say(tr,
              "\nEvery query head does the same attention arithmetic in all three. What shrinks is "
              "what has to be fetched — wk and wv, and the cache rows, which grow with the context "
              "(and with the batch) — and, with the smaller wk and wv, the arithmetic of the "
              "key/value projections too. Bytes and FLOPs are counted exactly; the times are "
              "measured, and each time ratio above says only what its runs support: on a busy "
              "machine often the same within noise.",
              "\n三种方式里，每个查询头的注意力计算量都一样。变少的是要读取的数据：wk、wv，"
              "以及随上下文（和批大小）增长的缓存行；wk、wv 变小了，key/value 投影的计算量也跟着变少。"
              "字节数和计算量是精确计数；耗时是实测的，上面每个耗时之比只说它的各次运行支持的结论："
              "机器忙的时候常常是在噪声范围内相同。");
    trace_pause(tr);
}

// Reason (2), "减少了推理过程中的KV Cache".
static void show_smaller_cache(Trace *tr, const Demo *d) {
    const Variant *vs = d->vs;
    trace_heading(tr, "(2) A smaller KV cache during inference",
                  "（2）减少了推理过程中的KV Cache");
    for (int i = 0; i < NUM_VARIANTS; i++) show_cache(tr, &vs[i]);
    trace_run(tr, NULL);
    trace_sayf(tr, "MHA's cache is %lld times GQA's and %lld times MQA's: n_heads / n_kv_heads.",
               "MHA 的缓存是 GQA 的 %lld 倍、MQA 的 %lld 倍：n_heads / n_kv_heads。",
               (long long)(vs[0].cache_tok / vs[1].cache_tok),
               (long long)(vs[0].cache_tok / vs[2].cache_tok));
    trace_pause(tr);
}

// kvdemo's own checks: what must not change. Returns 0, or 1 when one fails.
static int show_invariants(Trace *tr, Demo *d) {
    Variant *vs = d->vs;
    LlamaModel *mha = &d->vs[0].m;
    LlamaModel *chk = &d->chk;
    float *chk_logits = d->chk_logits;
    const int *ids = d->ids;
    int n = d->n;
    int V = d->V;
    const Options *opt = d->opt;
    const char *prompt_text = d->prompt_text;
    int rc = 0;
    trace_heading(tr, "What must not change", "哪些结果必须保持不变");
    trace_sayf(tr, "The logits at each of the %d positions of bos + %s, one run per check.",
               "在 %d 个位置（bos + %s）上的 logits，每项检查各跑一次。", n, prompt_text);
    for (int i = 0; i < NUM_VARIANTS; i++) {
        prompt_logits(vs[i].logits, &vs[i].st, &vs[i].m, ids, n, 1);
        if (opt->runs == RUN_BOTH) prompt_logits(vs[i].logits_nc, &vs[i].st, &vs[i].m, ids, n, 0);
    }
    for (int i = 0; i < NUM_VARIANTS && opt->runs == RUN_BOTH; i++) {
        trace_run(tr, vs[i].run);
        Tensor a = tensor_view2(vs[i].logits_nc, n, V), b = tensor_view2(vs[i].logits, n, V);
        char an[64], bn[64];
        snprintf(an, sizeof an, "%s %s", vs[i].label,
                 trace_text(tr, "logits without the cache", "不使用缓存的 logits"));
        snprintf(bn, sizeof bn, "%s", trace_text(tr, "with the cache", "使用缓存"));
        if (!trace_compare(tr, "logits", an, &a, bn, &b)) rc = 1;
    }
    // GQA with n_kv_heads = n_heads: the mean of groups of one head is MHA.
    llama_pool_kv_heads(chk, mha);
    prompt_logits(chk_logits, &d->chk_st, chk, ids, n, 1);
    {
        trace_run(tr, "mha");
        Tensor a = tensor_view2(vs[0].logits, n, V), b = tensor_view2(chk_logits, n, V);
        if (!trace_compare(tr, "gqa_n_kv_heads_eq_n_heads",
                           trace_text(tr, "MHA logits", "MHA 的 logits"), &a,
                           trace_text(tr, "GQA with n_kv_heads = n_heads (groups of one head)",
                                      "n_kv_heads = n_heads 的 GQA（每组一个头）"),
                           &b))
            rc = 1;
    }
    // GQA and MQA are MHA with each key/value head repeated for its group.
    for (int i = 1; i < NUM_VARIANTS; i++) {
        llama_repeat_kv_heads(chk, &vs[i].m);
        prompt_logits(chk_logits, &d->chk_st, chk, ids, n, 1);
        trace_run(tr, vs[i].run);
        Tensor a = tensor_view2(vs[i].logits, n, V), b = tensor_view2(chk_logits, n, V);
        char an[64];
        trace_textf(tr, an, sizeof an, "%s logits", "%s 的 logits", vs[i].label);
        if (!trace_compare(tr, "repeat_kv", an, &a,
                           trace_text(tr, "MHA with each wk, wv head repeated for its group (repeat_kv)",
                                      "每组的 wk、wv 头重复给组内每个查询头的 MHA（repeat_kv）"),
                           &b))
            rc = 1;
    }
    trace_run(tr, NULL);
    trace_say(tr,
              "\nGrouping changes which key/value head a query head reads, nothing else: GQA is MHA "
              "whose heads of a group have equal wk and wv.",
              "\n分组只改变查询头读取哪个 key/value 头：GQA 就是组内各头 wk、wv 相同的 MHA。");
    trace_pause(tr);
    return rc;
}

// "需要注意的是GQA和MQA需要在模型训练的时候开启": an MHA model converted moves.
static void show_conversion(Trace *tr, const Demo *d) {
    const Variant *vs = d->vs;
    int n = d->n;
    int V = d->V;
    const char *prompt_text = d->prompt_text;
    trace_heading(tr, "GQA and MQA must be chosen at training time: converting an MHA model",
                  "GQA 和 MQA 需要在模型训练的时候开启：转换一个 MHA 模型");
    trace_sayf(tr,
               "The GQA paper converts a multi-head checkpoint by mean-pooling the key and value "
               "heads of each group: wk of GQA head g = mean of MHA's heads g*r .. g*r + r - 1 "
               "(r = n_kv_heads of MHA / of GQA); wq, wo and the rest stay. The GQA and MQA models "
               "above were made this way. Their logits on %s against MHA's:",
               "GQA 论文把多头模型转换为分组模型的方法是：对每组的 key 和 value 头取平均。GQA 的第 g "
               "个头的 wk = MHA 第 g*r .. g*r + r - 1 个头的平均（r = MHA 与 GQA 的 n_kv_heads 之比）；"
               "wq、wo 等其余权重不变。上面的 GQA 和 MQA 模型就是这样得到的。它们在 %s 上的 logits "
               "与 MHA 相比：",
               prompt_text);
    for (int i = 1; i < NUM_VARIANTS; i++) {
        trace_run(tr, vs[i].run);
        Tensor a = tensor_view2(vs[0].logits, n, V), b = tensor_view2(vs[i].logits, n, V);
        char bn[96];
        trace_textf(tr, bn, sizeof bn, "%s converted (mean-pooled, n_kv_heads %d)", "转换得到的 %s（取平均，n_kv_heads %d）",
                    vs[i].label, vs[i].m.cfg.n_kv_heads);
        trace_compare(tr, "converted_vs_mha", trace_text(tr, "MHA logits", "MHA 的 logits"), &a,
                      bn, &b);
        int agree = 0;
        for (int t = 0; t < n; t++)
            agree += ops_argmax(vs[0].logits + (size_t)t * V, V) ==
                     ops_argmax(vs[i].logits + (size_t)t * V, V);
        trace_sayf(tr, "  the most likely next token agrees with MHA at %d of %d positions",
                   "  最可能的下一个 token 与 MHA 相同的位置：%d / %d", agree, n);
        trace_count(tr, "argmax_agree", agree, NULL, NULL);
    }
    trace_run(tr, NULL);
    trace_say(tr,
              "\nThe outputs move: after averaging, the query heads of a group read keys and "
              "values that are no longer those of their own heads. A trained MHA model has learnt "
              "to use its own heads; its converted copy computes something else until it is trained "
              "again. That is "
              "why GQA and MQA are chosen when the model is trained (or the converted model is "
              "trained further, as the GQA paper does for a small part of the original training).",
              "\n输出变了：取平均之后，组内的查询头读到的 key 和 value 已不是它自己那个头的了。"
              "训练好的 MHA 模型学会的是使用各自的头，转换后的副本在重新训练之前算的是另一回事。所以 GQA "
              "和 MQA 需要在模型训练的时候开启，按照相应的模式生成模型（或者像 GQA 论文那样，"
              "转换后再用原训练量的一小部分继续训练）。");
    trace_say(tr,
              "This conversion is of the lesson's own MHA model above; part (3) converts a trained one "
              "and measures what it costs.",
              "这里转换的是上面本课自己的 MHA 模型；第（3）部分转换一个训练好的模型，并测出它的代价。");
    trace_pause(tr);
}

// ----------------------------------------------------------------------------
// The lesson: three models from one, then the claims

// The size (--preset), the tokens timed (--steps) and the repeats (--repeat)
// into d; a word on the options the lesson only partly follows. Returns 0, or
// 2 with a message.
static int demo_options(Demo *d, const Size **size, const Options *opt) {
    *size = &SIZES[0];
    if (opt->preset) {
        *size = NULL;
        for (size_t i = 0; i < sizeof SIZES / sizeof SIZES[0]; i++)
            if (!strcmp(SIZES[i].name, opt->preset)) *size = &SIZES[i];
        if (!*size) {
            fileio_error(opt->lang, "lesson 6.2: --preset takes seed or tiny, not '%s'", "第 6.2 课：--preset 取 seed 或 tiny，不能是“%s”",
                         opt->preset);
            return 2;
        }
    }
    d->opt = opt;
    d->T = d->file.params ? d->file.cfg.max_seq_len : (*size)->max_seq_len;
    d->steps = opt->steps > 0 ? opt->steps : (*size)->steps;
    if (opt->steps <= 0 && d->file.params && d->steps > d->T / 2) d->steps = d->T / 2;   // a file's short context
    if (d->steps >= d->T) {
        fileio_error(opt->lang, "lesson 6.2: --steps %d leaves no context before the timed tokens; "
                     "with --preset %s (context %d) it takes 1 to %d",
                     "第 6.2 课：--steps %d 让计时的 token 之前没有上下文；--preset %s（上下文 %d）时它取 1 到 %d",
                     d->steps, (*size)->name, d->T, d->T - 1);
        return 2;
    }
    d->repeat = opt->repeat > 0 ? opt->repeat : (*size)->repeat;
    d->P = d->T - d->steps;   // positions read in before the first timed token
    if (opt->n_prompts > 1) fileio_error(opt->lang, "lesson 6.2 uses the first --prompt only", "第 6.2 课只用第一个 --prompt");
    if (opt->runs != RUN_BOTH)
        fileio_error(opt->lang, "lesson 6.2 always times generation with the cache; --cache and "
                     "--no-cache only leave out the comparison of the two",
                     "第 6.2 课总是给使用缓存的生成计时；--cache 和 --no-cache 只是省去两者的对比");
    return 0;
}

// GQA's n_kv_heads for H query heads: GQA_KV_HEADS when it groups them, else
// the smallest divisor between 1 and H; -1 when there is none (H prime, or 2).
static int gqa_kv_heads(int H) {
    if (H % GQA_KV_HEADS == 0 && H > GQA_KV_HEADS) return GQA_KV_HEADS;
    for (int g = 2; g < H; g++)
        if (H % g == 0) return g;
    return -1;
}

// mha (G = H) = the model of --model FILE; a file model of G < H has each
// key/value head repeated for its group (LLaMA-2's repeat_kv on the weights),
// the same network. Its tokenizer moves to mha.
static void mha_from_file(LlamaModel *mha, LlamaModel *file) {
    if (file->cfg.n_kv_heads == file->cfg.n_heads) {
        memcpy(mha->params, file->params, sizeof(float) * file->num_params);
        memcpy(mha->vocab, file->vocab, sizeof(uint32_t) * (size_t)file->cfg.vocab_size);
    } else {
        llama_repeat_kv_heads(mha, file);
    }
    mha->bpe = file->bpe;
    file->bpe = NULL;
}

// The three models (MHA with random weights, GQA and MQA converted from it),
// each with a state of one row; the prompt; the checks' model; the buffers of
// the claims. Returns 0, or 1 (no memory) or 2 (a bad --prompt) with a message.
static int demo_new(Lang lang, Demo *d, const Size *size, const char *prompt) {
    char err[512];
    LlamaConfig cfg = llama_config_default();
    cfg.dim = size->dim;
    cfg.n_layers = size->n_layers;
    cfg.n_heads = size->n_heads;
    cfg.hidden_dim = size->hidden_dim;
    if (d->file.params) cfg = d->file.cfg;   // --model: its shape, as MHA
    cfg.n_kv_heads = cfg.n_heads;
    cfg.max_seq_len = d->T;
    int gqa = gqa_kv_heads(cfg.n_heads);
    if (gqa < 0) {
        fileio_error(lang, "lesson 6.2: the model's %d query heads cannot be grouped: GQA needs n_kv_heads between 1 "
                     "and n_heads that divides n_heads",
                     "第 6.2 课：模型的 %d 个查询头无法分组：GQA 需要一个介于 1 和 n_heads 之间、能整除 n_heads 的 "
                     "n_kv_heads",
                     cfg.n_heads);
        return 2;
    }
    int kv_heads[NUM_VARIANTS] = {cfg.n_heads, gqa, 1};
    for (int i = 0; i < NUM_VARIANTS; i++) {
        cfg.n_kv_heads = kv_heads[i];
        if (llama_new(&d->vs[i].m, &cfg, ERR(lang, err)) != 0 ||
            llama_state_init(&d->vs[i].st, &d->vs[i].m, 1, ERR(lang, err)) != 0) {
            fileio_error(lang, "lesson 6.2: %s", "第 6.2 课：%s", err);
            return 1;
        }
    }
    LlamaModel *mha = &d->vs[0].m;
    if (d->file.params) mha_from_file(mha, &d->file);
    else {
        llama_vocab_default(mha);
        llama_init_random(mha, d->opt->seed);
    }
    for (int i = 1; i < NUM_VARIANTS; i++) llama_pool_kv_heads(&d->vs[i].m, mha);

    // The prompt: bos + its characters (n tokens).
    int T = d->T, V = d->V = cfg.vocab_size;
    d->ids = malloc(sizeof(int) * (size_t)T);
    d->ctx = malloc(sizeof(int) * (size_t)T);
    d->tok = malloc(sizeof(int) * (size_t)T);
    d->logits = malloc(sizeof(float) * (size_t)V);
    if (!d->ids || !d->ctx || !d->tok || !d->logits) goto oom;
    int n = d->n = llama_encode(d->ids, mha, prompt, 1, 0, T, ERR(lang, err));
    if (n < 0) {
        fileio_error(lang, "lesson 6.2: --prompt: %s", "第 6.2 课：--prompt：%s", err);
        return 2;
    }
    snprintf(d->prompt_text, sizeof d->prompt_text, "\"%s\"", prompt);
    for (int i = 0; i < NUM_VARIANTS; i++) {
        Variant *v = &d->vs[i];
        const LlamaConfig *c = &v->m.cfg;
        v->logits = malloc(sizeof(float) * (size_t)n * V);
        v->logits_nc = malloc(sizeof(float) * (size_t)n * V);
        v->samples = malloc(sizeof(double) * (size_t)d->repeat);
        if (!v->logits || !v->logits_nc || !v->samples) goto oom;
        v->kv_params = 2 * (int64_t)c->dim * c->n_kv_heads * c->head_dim;
        v->cache_tok = kv_bytes_per_token(c->n_layers, c->n_kv_heads, c->head_dim, sizeof(float));
        v->weights_read = weight_bytes_read(&v->m);
        v->cache_read = v->cache_tok * T;   // the last token reads rows 0 .. T-1
        // The lesson's formula is the model's own.
        if (v->cache_tok != llama_cache_bytes_per_token(c)) {
            fileio_error(lang, "lesson 6.2: cache bytes per token disagree with llama.c",
                         "第 6.2 课：每个 token 的缓存字节数与 llama.c 算的不一致");
            return 1;
        }
    }
    LlamaConfig chk_cfg = cfg;
    chk_cfg.n_kv_heads = cfg.n_heads;
    chk_cfg.max_seq_len = n;
    d->chk_logits = malloc(sizeof(float) * (size_t)n * V);
    if (!d->chk_logits || llama_new(&d->chk, &chk_cfg, ERR(lang, err)) != 0 ||
        llama_state_init(&d->chk_st, &d->chk, 1, ERR(lang, err)) != 0)
        goto oom;
    return 0;
oom:
    fileio_error(lang, "lesson 6.2: out of memory", "第 6.2 课：内存不足");
    return 1;
}

static void demo_free(Demo *d) {
    for (int i = 0; i < NUM_VARIANTS; i++) {
        llama_state_free(&d->vs[i].st);
        llama_free(&d->vs[i].m);
        free(d->vs[i].logits);
        free(d->vs[i].logits_nc);
        free(d->vs[i].samples);
    }
    llama_state_free(&d->chk_st);
    llama_free(&d->chk);
    llama_free(&d->file);
    free(d->chk_logits);
    free(d->ids);
    free(d->ctx);
    free(d->tok);
    free(d->logits);
    pool_free(d->pool);
}

// The opening: one model, three ways.
static void show_models(Trace *tr, const Demo *d) {
    const LlamaConfig *c = &d->vs[0].m.cfg;
    trace_sayf(tr,
               "One LLaMA-style model three ways: dim %d, %d layers, %d query heads of head_dim "
               "%d, SwiGLU %d, vocabulary %d, contexts of up to %d positions.\n"
               "The MHA model's weights are random (seed %llu), so its text would be noise; the "
               "GQA and MQA models are the MHA model converted (see below). The shapes, bytes "
               "and times are the lesson.\n",
               "同一个 LLaMA 式模型的三种形态：dim %d，%d 层，%d 个查询头（head_dim %d），"
               "SwiGLU %d，词表 %d，上下文最长 %d 个位置。\n"
               "MHA 模型的权重是随机的（seed %llu），写出的文字没有意义；GQA 和 MQA 模型由 MHA "
               "模型转换而来（见下文）。要看的是形状、字节数和耗时。\n",
               c->dim, c->n_layers, c->n_heads, c->head_dim, c->hidden_dim, c->vocab_size, d->T,
               (unsigned long long)d->opt->seed);
}

// The opening with --model FILE: the same, the weights the file's.
static void show_file_models(Trace *tr, const Demo *d) {
    const LlamaConfig *c = &d->vs[0].m.cfg;
    trace_sayf(tr,
               "One LLaMA-style model three ways: dim %d, %d layers, %d query heads of head_dim "
               "%d, SwiGLU %d, vocabulary %d, contexts of up to %d positions.\n"
               "The MHA model's weights are those of %s (%s, n_kv_heads %d in the file%s); the GQA and "
               "MQA models are the MHA model converted (see below).\n",
               "同一个 LLaMA 式模型的三种形态：dim %d，%d 层，%d 个查询头（head_dim %d），"
               "SwiGLU %d，词表 %d，上下文最长 %d 个位置。\n"
               "MHA 模型的权重取自 %s（%s，文件里 n_kv_heads 为 %d%s）；GQA 和 MQA 模型由 MHA "
               "模型转换而来（见下文）。\n",
               c->dim, c->n_layers, c->n_heads, c->head_dim, c->hidden_dim, c->vocab_size, d->T,
               d->opt->model_path,
               d->opt->tokenizer_path ? trace_text(tr, "llama2.c's checkpoint", "llama2.c 的模型文件")
                                      : trace_text(tr, "kvdemo's LLaMA file", "kvdemo 的 LLaMA 文件"),
               d->file.cfg.n_kv_heads,
               d->file.cfg.n_kv_heads < c->n_heads
                   ? trace_text(tr, ": its key/value heads repeated for their groups, the same network",
                                "：每个 key/value 头为其组内的查询头复制一份，网络不变")
                   : "");
}

int lesson62_run(const Options *opt, Trace *tr) {
    Demo d = {.vs = {{.run = "mha", .label = "MHA"}, {.run = "gqa", .label = "GQA"}, {.run = "mqa", .label = "MQA"}}};
    const Size *size;
    if (opt->tokenizer_path && !opt->model_path) {
        fileio_error(tr->lang, "lesson 6.2: --tokenizer goes with --model FILE, llama2.c's checkpoint",
                     "第 6.2 课：--tokenizer 要和 --model FILE（llama2.c 的模型文件）一起用");
        return 2;
    }
    char err[512];
    if (opt->model_path && llama_load_any(&d.file, opt->model_path, opt->tokenizer_path, ERR(tr->lang, err)) != 0) {
        fileio_error(tr->lang, "%s", "%s", err);
        return 1;
    }
    int rc = demo_options(&d, &size, opt);
    if (rc) {
        llama_free(&d.file);
        return rc;
    }
    LlamaConfig shape = d.file.params ? d.file.cfg : llama_config_default();
    if (!d.file.params) shape.dim = size->dim, shape.hidden_dim = size->hidden_dim;
    if (!(d.pool = pool_new_for(opt->threads, llama_row_work(&shape)))) {   // --threads, 0: the fastest for the shape
        fileio_error(tr->lang, "could not start %d threads", "无法启动 %d 个线程", ops_threads_asked(opt->threads));
        llama_free(&d.file);
        return 1;
    }
    const char *prompt = opt->n_prompts > 0 ? opt->prompts[0] : DEFAULT_PROMPT;
    rc = demo_new(opt->lang, &d, size, prompt);
    for (int i = 0; i < NUM_VARIANTS; i++) d.vs[i].st.pool = d.pool;   // every state on the lesson's threads
    d.chk_st.pool = d.pool;
    if (!rc) {
        lessons_heading(tr);
        if (d.file.params) show_file_models(tr, &d);
        else show_models(tr, &d);
        show_sharing(tr, &d);
        show_less_data_read(tr, &d);
        show_smaller_cache(tr, &d);
        if (show_invariants(tr, &d)) rc = 1;
        show_conversion(tr, &d);
        if (lesson62_trained(opt, tr, d.pool, d.repeat, size->trained_part)) rc = 1;
        show_real_models(tr);
    }
    demo_free(&d);
    return rc;
}
