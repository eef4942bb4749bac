// lesson62_trained — lesson 6.2, part (3): what sharing the key/value heads
// costs, measured on trained models. The article says GQA and MQA "需要在模型
// 训练的时候开启"; the GQA paper (Ainslie et al. 2023, §2.1) asks what the
// sharing then costs in quality. kvdemo ships four LLaMA-style models trained
// by one recipe, G = 8 (MHA), 4, 2 and 1 (MQA) key/value heads
// (docs/training.md). For each this part prints, live:
//
//   G, the parameters, the cache bytes per token 2 * L * G * D * 4,
//   the loss on the 2,049-character validation slice (its 16 bos-led
//   windows of T = 128, scored as training and `kvdemo eval` score them),
//   the decode time per token, the four models taking turns (measure.h);
//
// then the trained MHA model mean-pooled to G = 4, 2, 1 (llama_convert, as
// `kvdemo train --from ... --convert mean --iters 0` does) scored on the
// same slice at once, and what the numbers support. The one figure it cannot
// measure live is MHA's seed-to-seed spread (three trainings of twenty
// minutes): that is the page's, and it decides what counts as a tie.
//
// Legend as in llama.h: L layers, G key/value heads, D head_dim, T
// max_seq_len, V vocab, P positions read in before the timed tokens.
#include "lesson62_trained.h"

#include "fileio.h"
#include "llama.h"
#include "llama_convert.h"
#include "measure.h"
#include "memory.h"
#include "ops.h"
#include "paths.h"
#include "stats.h"
#include "timer.h"
#include "train_llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLICE "data/tinyshakespeare-val-2049.txt"

// MHA's seed-to-seed spread of the validation loss: the shipped recipe with
// seeds 1337, 1 and 2, scored on the whole validation split by `kvdemo eval`
// (docs/lesson-6.2.md). A difference within it is a tie.
static const double SEED_SPREAD = 0.0135;

enum {
    NUM_SHIPPED = 4,
    TIMED_STEPS = 32,    // tokens generated and timed: the last positions of the context
    SLICE_BYTES = 4096,  // room for the slice's 2,049 characters
};

typedef struct {
    const char *run;     // the JSON run
    const char *label;
    const char *path;    // the shipped file
    int kv_heads;        // G of its training command (--kv-heads)
} Shipped;

static const Shipped SHIPPED[NUM_SHIPPED] = {
    {"trained-mha", "MHA", "data/tinyshakespeare-llama-mha.bin", 8},
    {"trained-gqa4", "GQA-4", "data/tinyshakespeare-llama-gqa4.bin", 4},
    {"trained-gqa2", "GQA-2", "data/tinyshakespeare-llama-gqa2.bin", 2},
    {"trained-mqa", "MQA", "data/tinyshakespeare-llama-mqa.bin", 1},
};

// One shipped model and what the part measured of it.
typedef struct {
    const Shipped *s;
    int loaded;          // 0: missing or unusable, and said so
    LlamaModel m;
    LlamaState st;       // a batch of one row (B = 1)
    float *logits;       // (V) of the timed run
    int *ctx;            // (P + 1) bos + the slice's first P characters
    int *tok;            // (T) scratch: the context, then the generated tokens
    int P;
    double loss;         // on the slice, nats per character
    double *samples;     // (repeat) seconds per generated token
} Trained;

// ----------------------------------------------------------------------------
// The arithmetic (nothing printed here)

// One timed run (MeasureRun): from position P, each step feeds one token,
// forward(tokens[pos:pos+1], pos), reading cache rows 0..pos, then takes the
// argmax, up to position T - 1. The cache holds rows 0..P-1 already.
static int timed_run(void *arg, double *seconds) {
    Trained *t = arg;
    int V = t->m.cfg.vocab_size, T = t->m.cfg.max_seq_len;
    memcpy(t->tok, t->ctx, sizeof(int) * (size_t)(t->P + 1));
    double t0 = timer_now();
    for (int pos = t->P; pos < T; pos++) {
        llama_forward(t->logits, &t->st, &t->m, t->tok + pos, pos, 1, 1, 1);
        int next = ops_argmax(t->logits, V);
        if (pos + 1 < T) t->tok[pos + 1] = next;
    }
    *seconds = (timer_now() - t0) / (T - t->P);
    return 0;
}

// Loads t->s's file, scores it on the slice and reads bos + text[0:P] into
// its cache, its state on pool's threads. Returns 0; -1 when the file cannot
// be used (err says why); 1 when memory ran out.
static int trained_load(Trained *t, const char *text, const char *slice, long part, int threads, Pool *pool,
                        int repeat, Err err) {
    char buf[4096];
    if (llama_load(&t->m, paths_shipped(t->s->path, buf, sizeof buf), err) != 0) return -1;
    int T = t->m.cfg.max_seq_len;
    t->P = T - TIMED_STEPS;
    if (t->P < 1 || strlen(text) < (size_t)t->P) {
        fileio_fail2(err, "%s: a context of %d leaves no room for %d timed tokens",
                     "%s：上下文 %d 容不下 %d 个计时的 token", t->s->path, T, TIMED_STEPS);
        return -1;
    }
    char head[SLICE_BYTES];
    memcpy(head, text, (size_t)t->P);
    head[t->P] = '\0';
    t->logits = malloc(sizeof(float) * (size_t)t->m.cfg.vocab_size);
    t->ctx = malloc(sizeof(int) * (size_t)T);
    t->tok = malloc(sizeof(int) * (size_t)T);
    t->samples = malloc(sizeof(double) * (size_t)repeat);
    if (!t->logits || !t->ctx || !t->tok || !t->samples) return 1;
    if (llama_state_init(&t->st, &t->m, 1, err) != 0) return 1;
    t->st.pool = pool;
    if (llama_encode(t->ctx, &t->m, head, 1, 0, T, err) != t->P + 1) return -1;
    if (llama_train_text_loss_head(&t->m, slice, part, threads, &t->loss, err) != 0) return -1;
    llama_forward(t->logits, &t->st, &t->m, t->ctx, 0, 1, t->P, t->P);   // not timed
    t->loaded = 1;
    return 0;
}

static void trained_free(Trained *t) {
    llama_state_free(&t->st);
    llama_free(&t->m);
    free(t->logits);
    free(t->ctx);
    free(t->tok);
    free(t->samples);
}

// The slice's text, NUL-terminated, into text (SLICE_BYTES), through
// fileio's reader (a FIFO or a folder refused at once, a short read said).
// Returns its length, or -1 with err (the file cannot be read, or is
// longer than the room).
static long read_slice(char *text, const char *path, Err err) {
    size_t got = 0;
    char *t = fileio_read_text(path, SLICE_BYTES - 1, 0, &got, err);
    if (!t) return -1;
    memcpy(text, t, got + 1);
    free(t);
    return (long)got;
}

// ----------------------------------------------------------------------------
// What the part shows

// A shipped file that cannot be used: which, why, how to get it back.
static void say_missing(Trace *tr, const Shipped *s, const char *why) {
    char kv[32] = "";
    if (s->kv_heads != SHIPPED[0].kv_heads) snprintf(kv, sizeof kv, " --kv-heads %d", s->kv_heads);
    trace_run(tr, s->run);
    trace_sayf(tr,
               "%s is missing or unusable (%s). It ships with kvdemo: `git checkout -- %s` restores "
               "it, or train it again (docs/training.md, minutes on two cores): `kvdemo train --arch "
               "llama%s --data data/tinyshakespeare.txt --out %s`. The part goes on without it.",
               "%s 缺失或无法使用（%s）。它随 kvdemo 一起发布：`git checkout -- %s` 可以恢复；也可以重新训练"
               "（docs/training.md，两个核几分钟）：`kvdemo train --arch llama%s --data data/tinyshakespeare.txt"
               " --out %s`。这一部分不用它，继续。",
               s->path, why, s->path, kv, s->path);
    trace_count(tr, "loaded", 0, NULL, NULL);
}

// "2 * 4 * 8 * 16 * 4 = 4,096 B"
static const char *cache_formula(char *buf, size_t size, const LlamaConfig *c) {
    char v[32];
    snprintf(buf, size, "2 * %d * %d * %d * 4 = %s B", c->n_layers, c->n_kv_heads, c->head_dim,
             memory_grouped(v, sizeof v, (uint64_t)llama_cache_bytes_per_token(c)));
    return buf;
}

// One row a model: G, parameters, cache per token, loss, time; and the same
// as JSON events of its run.
static void show_table(Trace *tr, const Trained *ts, int repeat) {
    static const TraceColumn cols[] = {
        {"model", "模型", 7, 0, NULL},
        {"G", "G", 2, 1, NULL},
        {"parameters", "参数量", 10, 1, NULL},
        {"cache per token 2*L*G*D*4", "每 token 缓存 2*L*G*D*4", 27, 0, "cache_per_token"},
        {"val loss", "验证损失", 8, 1, "val_loss"},
        {"decode time per token", "每 token 解码耗时", 27, 0, "per_token"},
    };
    TraceTable table = {"trained_models", 6, cols};
    trace_run(tr, NULL);
    trace_table_head(tr, &table);
    for (int i = 0; i < NUM_SHIPPED; i++) {
        const Trained *t = &ts[i];
        if (!t->loaded) continue;
        const LlamaConfig *c = &t->m.cfg;
        char g[16], p[32], cache[64], loss[32], time[64];
        snprintf(g, sizeof g, "%d", c->n_kv_heads);
        memory_grouped(p, sizeof p, (uint64_t)t->m.num_params);
        cache_formula(cache, sizeof cache, c);
        snprintf(loss, sizeof loss, "%.4f", t->loss);
        Stats st = stats_of(t->samples, repeat);
        measure_spread_text(time, sizeof time, st);
        if (repeat > 1 && measure_noisy(t->samples, repeat)) strncat(time, " !", sizeof time - strlen(time) - 1);
        const char *row[] = {t->s->label, g, p, cache, loss, time};
        trace_table_row(tr, &table, row);
    }
    for (int i = 0; i < NUM_SHIPPED; i++) {
        const Trained *t = &ts[i];
        if (!t->loaded) continue;
        Stats st = stats_of(t->samples, repeat);
        trace_run(tr, t->s->run);
        trace_count(tr, "n_kv_heads", t->m.cfg.n_kv_heads, NULL, NULL);
        trace_count(tr, "params", (int64_t)t->m.num_params, NULL, NULL);
        trace_count(tr, "cache_bytes_per_token", llama_cache_bytes_per_token(&t->m.cfg), NULL, NULL);
        trace_value(tr, "val_loss", t->loss, "nats", NULL, NULL);
        trace_value(tr, "per_token", st.median, "s", NULL, NULL);
        trace_value(tr, "per_token_min", st.min, "s", NULL, NULL);
        trace_value(tr, "per_token_max", st.max, "s", NULL, NULL);
    }
    trace_run(tr, NULL);
    if (repeat > 1)
        for (int i = 0; i < NUM_SHIPPED; i++)
            if (ts[i].loaded && measure_noisy(ts[i].samples, repeat)) {
                trace_say(tr, measure_noisy_text(0), measure_noisy_text(1));
                break;
            }
}

// The first loaded model, or NULL.
static const Trained *first_loaded(const Trained *ts) {
    for (int i = 0; i < NUM_SHIPPED; i++)
        if (ts[i].loaded) return &ts[i];
    return NULL;
}

static void show_intro(Trace *tr, const Trained *ts, const char *slice, long chars, long part, int repeat) {
    const Trained *t = first_loaded(ts);
    if (!t) return;
    const LlamaConfig *c = &t->m.cfg;
    int T = c->max_seq_len;
    long windows = (part - 1) / T;
    // Both languages composed here, so that a page (which holds both) keeps both.
    char en[160], zh[160];
    if (part < chars) {
        snprintf(en, sizeof en, "the first %ld of its %ld characters (--preset tiny: a part; the lesson's default "
                 "scores all)", part, chars);
        snprintf(zh, sizeof zh, "其中前 %ld 个字符（共 %ld 个；--preset tiny 只取一部分，本课默认全部打分）", part, chars);
    } else {
        snprintf(en, sizeof en, "all its %ld characters", chars);
        snprintf(zh, sizeof zh, "它的全部 %ld 个字符", chars);
    }
    const char *scored = trace_text(tr, en, zh);
    trace_sayf(tr,
               "kvdemo ships four LLaMA-style models trained by one recipe (docs/training.md), with 8, 4, 2 "
               "and 1 key/value heads: dim %d, %d layers, %d query heads of head_dim %d, context %d. Each is "
               "scored live on %s, the beginning of tinyshakespeare's validation split, %s: %ld windows of "
               "%d, bos first, the mean cross-entropy in nats per character (the whole split: `kvdemo eval "
               "--model FILE --data data/tinyshakespeare.txt`). Then each reads the slice's first %d characters into its "
               "cache (not timed) and generates %d tokens with the cache, at positions %d to %d; the time is "
               "per token, the median of %d runs with min … max, the four models taking turns.",
               "kvdemo 附带四个用同一配方训练的 LLaMA 式模型（docs/training.md），key/value 头分别为 8、4、2、1："
               "dim %d，%d 层，%d 个查询头（head_dim %d），上下文 %d。每个模型现场在 %s 上打分，即语料验证集（最后 10%%）"
               "的开头，取%s：%ld 个长 %d 的窗口，以 bos 开头，取平均交叉熵（每字符 nat；整个验证集："
               "`kvdemo eval --model FILE --data data/tinyshakespeare.txt`）。然后每个模型把这段文字的前 %d 个字符读入缓存"
               "（不计时），再使用缓存生成 %d 个 token，位置 %d 到 %d；耗时按 token 计，取 %d 次运行的中位数，"
               "附最小 … 最大，四个模型轮流运行。",
               c->dim, c->n_layers, c->n_heads, c->head_dim, T, slice, scored, windows, T, t->P, TIMED_STEPS,
               t->P, T - 1, repeat);
    trace_count(tr, "slice_characters", chars, NULL, NULL);
    trace_count(tr, "scored_characters", part, NULL, NULL);
    trace_count(tr, "scored_windows", windows, NULL, NULL);
    trace_count(tr, "timed_steps", TIMED_STEPS, NULL, NULL);
}

// Each sharing model's loss against MHA's, and what the seed spread makes
// of the differences.
static void show_loss_verdict(Trace *tr, const Trained *ts, long chars) {
    const Trained *mha = &ts[0];
    if (!mha->loaded) {
        trace_say(tr, "Without the MHA model there is nothing to compare the sharings' losses with.",
                  "没有 MHA 模型，各共享方式的损失就无从比较。");
        return;
    }
    int compared = 0, ties = 0, smallest = mha->m.cfg.n_kv_heads;
    trace_say(tr, "", "");
    for (int i = 1; i < NUM_SHIPPED; i++) {
        const Trained *t = &ts[i];
        if (!t->loaded) continue;
        double d = t->loss - mha->loss;
        int tie = fabs(d) <= SEED_SPREAD;
        compared++, ties += tie;
        if (t->m.cfg.n_kv_heads < smallest) smallest = t->m.cfg.n_kv_heads;
        trace_run(tr, t->s->run);
        trace_sayf(tr, "  %s against MHA: %+.4f nats per character: %s", "  %s 与 MHA 相比：每字符 %+.4f nat：%s",
                   t->s->label, d,
                   tie ? trace_text(tr, "a tie, within the seed spread", "在种子间差异之内，打平")
                   : d < 0 ? trace_text(tr, "lower by more than the seed spread", "低出种子间差异以上")
                           : trace_text(tr, "higher by more than the seed spread", "高出种子间差异以上"));
        trace_value(tr, "loss_vs_mha", d, "nats", NULL, NULL);
        trace_count(tr, "loss_verdict", tie ? 0 : d < 0 ? -1 : 1, NULL, NULL);   // lower, tie, higher
    }
    trace_run(tr, NULL);
    if (!compared) return;
    if (ties == compared)
        trace_sayf(tr,
                   "\nWhat these numbers support: a tie. Every sharing model lies within MHA's seed-to-seed "
                   "spread of MHA (%.4f nats: MHA trained with 3 seeds, scored on the whole validation split; "
                   "docs/lesson-6.2.md). Sharing the key/value heads cost nothing measurable here, while the "
                   "cache per token is %d times smaller from MHA to G = %d.",
                   "\n这些数字支持的结论：打平。每个共享模型与 MHA 的差都在 MHA 的种子间差异之内（%.4f nat：MHA "
                   "用 3 个种子训练，在整个验证集上打分；docs/lesson-6.2.md）。在这里共享 key/value 头没有带来可测的"
                   "损失，而每个 token 的缓存小了 %d 倍（从 MHA 到 G = %d）。",
                   SEED_SPREAD, mha->m.cfg.n_kv_heads / smallest, smallest);
    else
        trace_sayf(tr,
                   "\nWhat these numbers support: not a tie everywhere: %d of %d sharing models differ from "
                   "MHA by more than MHA's seed-to-seed spread (%.4f nats: MHA trained with 3 seeds, scored on "
                   "the whole validation split; docs/lesson-6.2.md). But %ld characters are a small sample of "
                   "the split: the page's table scores the whole split (`kvdemo eval`) against the same spread.",
                   "\n这些数字支持的结论：并非处处打平：有 %d 个共享模型（共 %d 个）与 MHA 的差超过 MHA 的种子间差异"
                   "（%.4f nat：MHA 用 3 个种子训练，在整个验证集上打分；docs/lesson-6.2.md）。不过 %ld 个字符只是"
                   "验证集中很小的样本：本课页面的表在整个验证集上（`kvdemo eval`）按同样的差异比较。",
                   compared - ties, compared, SEED_SPREAD, chars);
    trace_count(tr, "loss_ties", ties, NULL, NULL);
}

// Bytes the token at position T - 1 reads: every weight matrix once (of
// tok_embeddings its row only) and T cache rows of every layer.
static int64_t weight_bytes_read(const LlamaModel *m) {
    return (int64_t)(m->num_params - (size_t)m->cfg.vocab_size * m->cfg.dim + (size_t)m->cfg.dim) *
           (int64_t)sizeof(float);
}

// Each sharing model's time against MHA's, the verdict its runs support,
// and what the bytes read say about why.
static void show_time_verdict(Trace *tr, const Trained *ts, int repeat) {
    const Trained *mha = &ts[0];
    if (!mha->loaded) return;
    int counts[4] = {0};   // by MeasureVerdict
    int compared = 0;
    for (int i = 1; i < NUM_SHIPPED; i++) {
        const Trained *t = &ts[i];
        if (!t->loaded) continue;
        MeasureRatio r = measure_ratio(stats_of(t->samples, repeat), stats_of(mha->samples, repeat));
        MeasureVerdict v = measure_verdict(mha->samples, repeat, t->samples, repeat);
        MeasureRatio speedup = measure_ratio(stats_of(mha->samples, repeat), stats_of(t->samples, repeat));
        char xe[32], en[128], zh[128];
        trace_run(tr, t->s->run);
        trace_sayf(tr, "  %s against MHA: decode time %s x%s%s", "  %s 与 MHA 相比：解码耗时 %s 倍%s%s", t->s->label,
                   measure_ratio_alone(xe, sizeof xe, r.x),
                   v == MEASURE_TOO_FEW ? trace_text(tr, ": ", "：") : trace_text(tr, ", that is ", "，即"),
                   v == MEASURE_TOO_FEW ? trace_text(tr, measure_verdict_word(v, 0), measure_verdict_word(v, 1))
                                        : trace_text(tr, measure_compare_text(en, sizeof en, speedup, v, 0),
                                                     measure_compare_text(zh, sizeof zh, speedup, v, 1)));
        trace_comparison_of(tr, "time_ratio", r, v, NULL, NULL);
        counts[v]++, compared++;
    }
    trace_run(tr, NULL);
    if (!compared) return;
    const LlamaConfig *c = &mha->m.cfg;
    int64_t w = weight_bytes_read(&mha->m), kv = llama_cache_bytes_per_token(c) * c->max_seq_len;
    char a[32], b[32];
    trace_sayf(tr,
               "The token at position %d of MHA reads %s B of weights and %s B of cache (%.0f%% of the "
               "bytes): fewer key/value heads can save at most that share.",
               "MHA 在位置 %d 的 token 读取权重 %s B、缓存 %s B（占读取字节的 %.0f%%）：减少 key/value 头最多"
               "只能省下这一部分。",
               c->max_seq_len - 1, memory_grouped(a, sizeof a, (uint64_t)w), memory_grouped(b, sizeof b, (uint64_t)kv),
               100.0 * (double)kv / (double)(w + kv));
    if (counts[MEASURE_TOO_FEW])
        trace_say(tr, "One run each: too few to say anything of the times (--repeat N, N >= 2).",
                  "每个模型只运行了一次：太少，对耗时说不出什么（--repeat N，N >= 2）。");
    else if (counts[MEASURE_SAME] == compared)
        trace_say(tr, "What the times support: a tie too; every sharing model's runs overlap MHA's.",
                  "耗时支持的结论：同样打平；每个共享模型的各次运行都与 MHA 的重叠。");
    else
        trace_sayf(tr, "What the times support: %d of %d sharing models faster than MHA, %d slower, %d the same within noise.",
                   "耗时支持的结论：%d 个共享模型（共 %d 个）比 MHA 快，%d 个更慢，%d 个在噪声范围内相同。",
                   counts[MEASURE_FASTER], compared, counts[MEASURE_SLOWER], counts[MEASURE_SAME]);
}

// The trained MHA model mean-pooled to G key/value heads and scored on the
// slice at once. Returns 0, or 1 (no memory).
static int show_converted(Trace *tr, const Trained *ts, const char *slice, long part, int threads) {
    const Trained *mha = &ts[0];
    if (!mha->loaded) return 0;
    char err[512];
    trace_sayf(tr,
               "\nThe same question the GQA paper's way: the trained MHA model converted by mean-pooling "
               "each group's key and value heads (llama_convert, the model `kvdemo train --from %s "
               "--kv-heads G --convert mean --iters 0` writes), scored on the slice at once (α = 0):",
               "\n换成 GQA 论文的做法：把训练好的 MHA 模型按组对 key 和 value 头取平均来转换（llama_convert，"
               "即 `kvdemo train --from %s --kv-heads G --convert mean --iters 0` 写出的模型），直接在这段文字上"
               "打分（α = 0）：",
               mha->s->path);
    double lo = INFINITY, hi = -INFINITY;
    int within = 0, converted = 0;
    for (int i = 1; i < NUM_SHIPPED; i++) {
        int G = SHIPPED[i].kv_heads;
        LlamaModel m;
        double loss;
        if (llama_convert_check(&mha->m, G, ERR(tr->lang, err)) != 0) continue;   // another shape
        if (llama_convert(&m, &mha->m, G, LLAMA_CONVERT_MEAN, 0, ERR(tr->lang, err)) != 0) return 1;
        int rc = llama_train_text_loss_head(&m, slice, part, threads, &loss, ERR(tr->lang, err));
        llama_free(&m);
        if (rc != 0) return 1;
        double gap = loss - mha->loss;
        char run[32], en[96] = "", zh[96] = "";
        snprintf(run, sizeof run, "converted-%s", SHIPPED[i].run + strlen("trained-"));
        if (ts[i].loaded) {   // both languages, for a page that holds both
            snprintf(en, sizeof en, "; %s, trained with G = %d from the start: %.4f", ts[i].s->label, G, ts[i].loss);
            snprintf(zh, sizeof zh, "；%s 从头按 G = %d 训练：%.4f", ts[i].s->label, G, ts[i].loss);
        }
        const char *trained = ts[i].loaded ? trace_text(tr, en, zh) : "";
        trace_run(tr, run);
        trace_sayf(tr, "  G = %d: %.4f at once, %+.4f against MHA (its source)%s",
                   "  G = %d：转换后直接为 %.4f，比来源 MHA %+.4f%s", G, loss, gap, trained);
        trace_count(tr, "n_kv_heads", G, NULL, NULL);
        trace_value(tr, "val_loss", loss, "nats", NULL, NULL);
        trace_value(tr, "loss_vs_mha", gap, "nats", NULL, NULL);
        lo = fmin(lo, gap), hi = fmax(hi, gap);
        within += fabs(gap) <= SEED_SPREAD, converted++;
    }
    trace_run(tr, NULL);
    if (!converted) return 0;
    if (!within)
        trace_sayf(tr,
                   "What these numbers support: converting is not free. At once every converted model is "
                   "%.2f to %.2f nats worse than its source, far past the seed spread (%.4f): its query heads "
                   "read keys and values they never learnt to use. That is the article's \"GQA 和 MQA 需要在模型"
                   "训练的时候开启\", in numbers. The GQA paper uptrains the converted model for a few per cent of "
                   "the steps; the page's table has kvdemo's uptraining runs and the command of each.",
                   "这些数字支持的结论：转换不是免费的。转换后直接打分，每个模型都比来源差 %.2f 到 %.2f nat，"
                   "远超种子间差异（%.4f）：它的查询头读到的 key 和 value 是它从没学会使用的。这就是文章说的"
                   "“GQA 和 MQA 需要在模型训练的时候开启”，用数字说出来。GQA 论文会把转换后的模型再训练原步数的"
                   "百分之几；本课页面的表给出了 kvdemo 的这些继续训练的结果和每一行的命令。",
                   lo, hi, SEED_SPREAD);
    else
        trace_sayf(tr,
                   "What these numbers support: %d of %d conversions cost nothing measurable at once (within "
                   "the seed spread %.4f of their source).",
                   "这些数字支持的结论：%d 个转换（共 %d 个）直接打分就没有可测的损失（与来源之差在种子间差异 %.4f "
                   "之内）。",
                   within, converted, SEED_SPREAD);
    return 0;
}

int lesson62_trained(const Options *opt, Trace *tr, Pool *pool, int repeat, long part) {
    char buf[4096], text[SLICE_BYTES + 1], err[512];
    trace_heading(tr, "(3) What sharing costs, measured on the trained models",
                  "（3）共享的代价：在训练好的模型上实测");
    const char *slice = paths_shipped(SLICE, buf, sizeof buf);
    long chars = read_slice(text, slice, ERR(tr->lang, err));
    if (part <= 0 || part > chars) part = chars;
    if (chars < 0) {
        trace_sayf(tr, "%s cannot be read (%s): it ships with kvdemo (`git checkout -- %s`). This part needs it; "
                       "it is left out.",
                   "无法读取 %s（%s）：它随 kvdemo 一起发布（`git checkout -- %s`）。这一部分需要它，故略去。", slice,
                   err, SLICE);
        return 0;
    }
    Trained ts[NUM_SHIPPED];
    memset(ts, 0, sizeof ts);
    int rc = 0, arms = 0;
    double *samples[NUM_SHIPPED];
    MeasureRun runs[NUM_SHIPPED];
    void *ctx[NUM_SHIPPED];
    for (int i = 0; i < NUM_SHIPPED && !rc; i++) {
        ts[i].s = &SHIPPED[i];
        int r = trained_load(&ts[i], text, slice, part, opt->threads, pool, repeat, ERR(tr->lang, err));
        if (r < 0) say_missing(tr, ts[i].s, err);
        else if (r > 0) rc = 1;
        else samples[arms] = ts[i].samples, runs[arms] = timed_run, ctx[arms] = &ts[i], arms++;
    }
    if (!rc) {
        MeasureMachine machine = measure_machine();
        if (arms) measure_rounds(samples, arms, MEASURE_WARMUP, repeat, runs, ctx);
        trace_run(tr, NULL);
        show_intro(tr, ts, slice, chars, part, repeat);
        trace_machine(tr, machine);
        if (arms) show_table(tr, ts, repeat);
        show_loss_verdict(tr, ts, part);
        show_time_verdict(tr, ts, repeat);
        rc = show_converted(tr, ts, slice, part, opt->threads);
        trace_pause(tr);
    }
    if (rc) fileio_error(tr->lang, "lesson 6.2: out of memory", "第 6.2 课：内存不足");
    for (int i = 0; i < NUM_SHIPPED; i++) trained_free(&ts[i]);
    return rc;
}
