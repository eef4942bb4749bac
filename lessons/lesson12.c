// lesson 12 — beyond the documents: precision
//
// kvdemo's cached and uncached runs agree bit for bit because every kernel
// sums each output in the same order whatever the number of rows. Libraries
// on GPUs do not promise that, and users report "different output with the
// cache". This lesson shows why, then what a smaller cache costs.
//
//   1. summing order   the cached one-row step sums each matmul in 32 slices
//                      added pairwise (as a split-K GPU kernel may), in
//                      fp32: differences in the last bits of the logits
//   2. bf16, fp16      the same with activations and cache rounded to bf16 or
//                      fp16 (round to nearest even, in C): the same tiny
//                      difference now crosses rounding steps 65536 times
//                      coarser, and the text leaves the reference sooner
//   3. a quantised cache  keys and values kept as bf16, fp16, int8 or int4
//                      (values one scale per token and head; keys one scale
//                      per channel for each group of 32 tokens, as KIVI):
//                      bytes per token, the text beside fp32's, and the
//                      validation loss when the text is at hand
//
// kvdemo keeps its float cache layout and stores in it each number exactly as
// the smaller cache would give it back: the arithmetic is that of the smaller
// cache, the bytes are counted for its packed form.
#include "gptsetup.h"
#include "fileio.h"
#include "kvvariant.h"
#include "lessons.h"
#include "ops.h"
#include "paths.h"
#include "progress.h"
#include "sampler.h"
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// MAX_STEPS: the lesson generates with several caches and a run without
// one; past about 1000 steps it would run for hours with nothing more to show.
enum { DEFAULT_STEPS = 256, MAX_STEPS = 1000, LESSON_WINDOWS = 8 };

typedef struct {
    int V;
    float *logits;   // (steps, V)
    int *tokens;     // (n_prompt + steps)
    char *text;
} Run;

static int record_step(void *ctx, const GptStep *st) {
    Run *r = ctx;
    memcpy(r->logits + (size_t)st->step * r->V, st->logits, sizeof(float) * (size_t)r->V);
    return 0;
}

// Generates from the prompt with variant v; returns 0, or 1 out of memory.
static int run_once(Run *r, GptState *s, GptVariant *v, const GptModel *m, const int *prompt, int n_prompt,
                    int steps, int use_cache, const Options *opt) {
    r->V = m->cfg.V;
    KvVariantCaches vc;
    if (kvvariant_attach(&vc, s, v)) return 1;
    free(r->text);
    r->text = gptsetup_generate_text(r->tokens, s, m, prompt, n_prompt, steps, use_cache, opt, record_step, r);
    kvvariant_detach(&vc);
    return r->text ? 0 : 1;
}

// How run b leaves run a: the first step whose logits differ (1-based, 0:
// never) and max |difference| there; the largest difference over the steps
// whose inputs were still the same (before the drawn tokens part); the first
// step that drew another token (0: never).
typedef struct {
    int step;
    double first_diff, max_diff;
    int token_step;
} Divergence;

static Divergence diverge(const Run *a, const Run *b, int n_prompt, int steps) {
    Divergence d = {0, 0, 0, 0};
    for (int t = 0; t < steps; t++) {
        const float *x = a->logits + (size_t)t * a->V, *y = b->logits + (size_t)t * a->V;
        double m = 0;
        for (int j = 0; j < a->V; j++) m = fmax(m, fabs((double)x[j] - (double)y[j]));
        if (m > 0 && !d.step) d.step = t + 1, d.first_diff = m;
        d.max_diff = fmax(d.max_diff, m);
        if (a->tokens[n_prompt + t] != b->tokens[n_prompt + t]) {
            d.token_step = t + 1;
            break;   // from here on the two runs see different texts
        }
    }
    return d;
}

// The corpus for the validation loss: --data FILE, else the downloaded
// tinyshakespeare when it is there, else NULL.
static const char *corpus(const Options *opt, char *buf, size_t size) {
    if (opt->data_path) return opt->data_path;
    const char *p = paths_shipped("data/tinyshakespeare.txt", buf, size);
    return access(p, R_OK) == 0 ? p : NULL;
}

// What the lesson's parts share: the model, its state, the prompt, the two
// runs compared (ref: without the cache or in fp32) and the validation text.
typedef struct {
    GptModel m;
    GptState s;
    int *prompt, n_prompt, steps;
    Run ref, run;
    TrainText text;
    int have_text;
    const char *data;   // the validation text's file, or NULL
    ProgressLine progress;   // on a terminal's stderr while a part computes
    const char *kind;        // the cache type being evaluated, for the line
} Shared;

// The progress line while a part's runs compute: what is being run.
static void say_running(Shared *x, const char *part, const char *kind) {
    progress_line_show(&x->progress, "lesson 12, %s: %s, generating %d characters",
                       "第 12 课，%s：%s，生成 %d 个字符", part, kind, x->steps);
}

// The progress line while the validation loss is computed, a window at a time.
static void on_window(int64_t done, int64_t total, void *user) {
    Shared *x = user;
    progress_line_show(&x->progress, "lesson 12, part 3: %s, validation loss, %lld of %lld windows done",
                       "第 12 课，第 3 部分：%s，验证损失，已完成 %lld / %lld 个窗口", x->kind, (long long)done,
                       (long long)total);
}

// 1 and 2: another summing order in the cached step, in fp32, bf16, fp16.
// Returns 0, or 1 when memory ran out.
static int summing_order(Shared *x, Trace *tr, const Options *opt) {
    const GptModel *m = &x->m;
    GptState *s = &x->s;
    Run *ref = &x->ref, *run = &x->run;
    const int *prompt = x->prompt;
    int n_prompt = x->n_prompt, steps = x->steps;
    trace_heading(tr, "1, 2. Another summing order in the cached step, in fp32, bf16 and fp16",
                  "1、2. 缓存步骤换一种求和顺序：fp32、bf16 与 fp16");
    trace_sayf(tr,
               "The cached one-row step sums each matmul in %d slices added pairwise, as a split-K GPU kernel\n"
               "may (a stylised model: each library splits in its own way); the run without the cache sums in\n"
               "order. Both round their activations and cache to the same type. Same seed, same draws: the text\n"
               "changes only when a logit moves far enough.",
               "缓存步骤把每个矩阵乘法分成 %d 段求和、再两两相加，就像 split-K 的 GPU 内核可能做的那样（只是示意：\n"
               "各个库切分的方式各不相同）；不使用缓存的一次按顺序求和。\n"
               "两者把激活和缓存舍入到同一种类型。种子相同、抽样相同：只有 logit 变化足够大时文字才会改变。",
               KV_SPLIT_SLICES);
    const KvDtype acts[3] = {KV_FP32, KV_BF16, KV_FP16};
    for (int a = 0; a < 3; a++) {
        GptVariant plain = {.act_dtype = acts[a], .kv_dtype = acts[a]};
        GptVariant split = {.act_dtype = acts[a], .kv_dtype = acts[a], .split_sum = 1};
        char name[32];
        snprintf(name, sizeof name, "order-%s", kvquant_name(acts[a]));
        trace_run(tr, name);
        say_running(x, trace_text(tr, "parts 1, 2", "第 1、2 部分"), kvquant_name(acts[a]));
        if (run_once(ref, s, &plain, m, prompt, n_prompt, steps, 0, opt)) return 1;
        if (run_once(run, s, &split, m, prompt, n_prompt, steps, 1, opt)) return 1;
        progress_line_clear(&x->progress);
        Divergence d = diverge(ref, run, n_prompt, steps);
        trace_count(tr, "first_step", d.step, NULL, NULL);
        trace_value(tr, "first_abs_diff", d.first_diff, "", NULL, NULL);
        trace_value(tr, "max_abs_diff", d.max_diff, "", NULL, NULL);
        trace_count(tr, "first_token_step", d.token_step, NULL, NULL);
        trace_sayf(tr, "\n  %s:", "\n  %s：", kvquant_name(acts[a]));
        if (!d.step)
            trace_sayf(tr, "    logits identical at all %d steps.", "    全部 %d 步的 logits 相同。", steps);
        else
            trace_sayf(tr,
                       "    logits first differ at step %d, by %.3g; the largest difference while the texts\n"
                       "    agree is %.3g.",
                       "    logits 在第 %d 步首次不同，差 %.3g；文字相同期间的最大差值为 %.3g。", d.step, d.first_diff,
                       d.max_diff);
        if (d.token_step)
            trace_sayf(tr, "    the drawn text first changes at step %d of %d.", "    抽样得到的文字在第 %d 步（共 %d 步）首次改变。",
                       d.token_step, steps);
        else
            trace_sayf(tr, "    the text stays the same over all %d steps.", "    全部 %d 步文字都相同。", steps);
        if (tr->format == FORMAT_JSON) trace_textval(tr, "text", run->text);
        if (a == 1) {
            // the control: bf16, but the same order in both runs
            say_running(x, trace_text(tr, "parts 1, 2", "第 1、2 部分"), kvquant_name(acts[a]));
            if (run_once(run, s, &plain, m, prompt, n_prompt, steps, 1, opt)) return 1;
            progress_line_clear(&x->progress);
            Divergence c = diverge(ref, run, n_prompt, steps);
            trace_count(tr, "same_order_first_step", c.step, NULL, NULL);
            if (!c.step)
                trace_say(tr, "    (with the same summing order, bf16 with and without the cache agree bit for bit:\n"
                              "    rounding alone does not part them; it magnifies a different order)",
                          "    （求和顺序相同时，bf16 使用与不使用缓存时逐位相同：舍入本身不会造成差异，它放大的是顺序的差异）");
        }
    }
    trace_pause(tr);
    return 0;
}

// Which windows of the validation split the loss below is taken over: as
// many as LESSON_WINDOWS, evenly spaced (kvvariant_eval's choice), by index.
static void say_windows(Trace *tr, const Shared *x, int T) {
    int64_t n_train = x->text.n * 9 / 10, count = kvvariant_window_count(n_train, x->text.n, T);
    int64_t use = count < LESSON_WINDOWS ? count : LESSON_WINDOWS;
    char list[LESSON_WINDOWS * 24] = "";
    for (int64_t i = 0; i < use; i++) {
        size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%lld", i ? ", " : "", (long long)kvvariant_window_index(i, count, use));
    }
    trace_count(tr, "val_windows", count, NULL, NULL);
    trace_count(tr, "val_windows_used", use, NULL, NULL);
    trace_sayf(tr,
               "Validation loss: %lld of the %lld windows of %d characters in the last 10%% of %s, evenly spaced:\n"
               "windows %s (counted from 0). Each window's keys and values go through the cache\n"
               "(kvdemo eval --kv-dtype TYPE takes every window).\n",
               "验证损失：%lld 个窗口，均匀取自 %lld 个 %d 字符的窗口（%s 的最后 10%%）：\n"
               "第 %s 个窗口（从 0 数起）。每个窗口的键和值都经过该缓存（kvdemo eval --kv-dtype TYPE 计算全部窗口）。\n",
               (long long)use, (long long)count, T, x->data, list);
}

// 3: a smaller cache. Returns 0, or 1 when memory ran out.
static int smaller_cache(Shared *x, Trace *tr, const Options *opt) {
    const GptModel *m = &x->m;
    GptState *s = &x->s;
    Run *ref = &x->ref, *run = &x->run;
    const int *prompt = x->prompt;
    int n_prompt = x->n_prompt, steps = x->steps;
    GptConfig g = m->cfg;
    trace_run(tr, NULL);
    trace_heading(tr, "3. A smaller cache: bf16, fp16, int8, int4", "3. 更小的缓存：bf16、fp16、int8、int4");
    trace_sayf(tr,
               "Keys and values kept in fewer bits. int8 and int4 are symmetric: values one scale per token and\n"
               "head; keys one scale per channel for each group of %d tokens, the newest group kept in full\n"
               "precision until it is complete (KIVI). Bytes per token are for all %d blocks, packed.",
               "键和值用更少的位保存。int8 与 int4 为对称量化：值每个 token 每个头一个缩放因子；键按通道、\n"
               "每 %d 个 token 一组共享一个缩放因子，最新的不完整分组保持全精度（KIVI）。每个 token 的字节数按全部 %d 个模块、紧凑存放计算。",
               KV_KEY_GROUP, g.L);
    if (x->have_text)
        say_windows(tr, x, g.T);
    else
        trace_sayf(tr, "(for the validation loss give --data FILE, or get tinyshakespeare into this folder:\n `%s`)\n",
                   "（要得到验证损失，请给出 --data FILE，或把 `tinyshakespeare` 下载到当前文件夹：\n `%s`）\n", CORPUS_GET);
    const KvDtype kinds[5] = {KV_FP32, KV_BF16, KV_FP16, KV_INT8, KV_INT4};
    double fp32_bytes = kvquant_bytes_per_token(KV_FP32, g.L, g.C, g.H, KV_KEY_GROUP);
    const TraceColumn cols[] = {
        {"cache", "缓存", 6, 0, "cache"},
        {"bytes/token", "字节/token", 16, 1, "bytes_per_token"},
        {"of fp32", "占 fp32", 9, 1, "percent_of_fp32"},
        {x->have_text ? "val. loss" : "", x->have_text ? "验证损失" : "", 16, 1, "val_loss"},
        {"", "", 0, 0, "text"},
    };
    const TraceTable table = {"kv_dtypes", 5, cols};
    trace_table_head(tr, &table);
    for (int k = 0; k < 5; k++) {
        GptVariant v = {.kv_dtype = kinds[k], .key_group = KV_KEY_GROUP};
        char name[32];
        snprintf(name, sizeof name, "kv-%s", kvquant_name(kinds[k]));
        trace_run(tr, name);
        Run *r = k == 0 ? ref : run;   // fp32's text stays in ref
        x->kind = kvquant_name(kinds[k]);
        say_running(x, trace_text(tr, "part 3", "第 3 部分"), x->kind);
        if (run_once(r, s, &v, m, prompt, n_prompt, steps, 1, opt)) return 1;
        double bytes = kvquant_bytes_per_token(kinds[k], g.L, g.C, g.H, KV_KEY_GROUP);
        double loss = NAN;
        if (x->have_text) {
            int64_t n_train = x->text.n * 9 / 10;
            on_window(0, LESSON_WINDOWS, x);
            if (kvvariant_eval_each(&loss, m, &v, x->text.tokens, x->s.pool, n_train, x->text.n, LESSON_WINDOWS, on_window, x))
                return 1;
        }
        progress_line_clear(&x->progress);
        if (x->have_text) trace_value(tr, "val_loss", loss, "nats", NULL, NULL);
        trace_value(tr, "bytes_per_token", bytes, "B", NULL, NULL);
        Divergence d = diverge(ref, r, n_prompt, steps);
        trace_count(tr, "first_token_step", d.token_step, NULL, NULL);
        if (tr->format == FORMAT_JSON) trace_textval(tr, "text", r->text);
        // One row: in text the percentage with its sign, in JSON the number.
        char bytes_cell[32], pct[32], lossbuf[32] = "", note[128];
        snprintf(bytes_cell, sizeof bytes_cell, "%.0f", bytes);
        snprintf(pct, sizeof pct, tr->format == FORMAT_TEXT ? "%.1f%%" : "%.1f", 100 * bytes / fp32_bytes);
        if (x->have_text) snprintf(lossbuf, sizeof lossbuf, "%.4f", loss);
        if (k == 0) snprintf(note, sizeof note, "%s", trace_text(tr, "(the reference text)", "（参照文字）"));
        else if (!d.token_step) snprintf(note, sizeof note, "%s", trace_text(tr, "same text as fp32", "文字与 fp32 相同"));
        else snprintf(note, sizeof note, trace_text(tr, "text leaves fp32's at step %d", "文字在第 %d 步与 fp32 分开"), d.token_step);
        const char *row[] = {kvquant_name(kinds[k]), bytes_cell, pct, lossbuf, note};
        trace_table_row(tr, &table, row);
    }
    if (tr->format != FORMAT_JSON) {   // JSON has each run's text already
        trace_say(tr, "", "");
        trace_say(tr, "fp32's text:", "fp32 的文字：");
        trace_textval(tr, "text", ref->text);
        trace_say(tr, "", "");
        trace_say(tr, "int4's text:", "int4 的文字：");
        trace_textval(tr, "text", run->text);
    }
    trace_say(tr,
              "\nThe cache keeps the narrow numbers themselves (int4: two codes a byte, with their fp32 scales;\n"
              "the newest key group waits in fp32) and reads a head back into floats to attend.",
              "\n缓存真的存放这些更窄的数（int4 两个码占一个字节，另有 fp32 的 scale；最新的一组 key 先以 fp32 等着），做注意力时把一个头读回成浮点数。");
    return 0;
}

int lesson12_run(const Options *opt, Trace *tr) {
    Shared x = {.steps = opt->steps > 0 ? opt->steps : DEFAULT_STEPS};
    if (x.steps > MAX_STEPS) {
        fileio_error(tr->lang, "lesson 12 takes --steps 1 to %d; kvdemo generate --kv-dtype NAME writes longer texts",
                     "第 12 课的 --steps 取 1 到 %d；更长的文字请用 kvdemo generate --kv-dtype NAME", MAX_STEPS);
        return 2;
    }
    int random_model;
    int rc = gptsetup_lesson(&x.m, &random_model, &x.prompt, &x.n_prompt, opt, NULL);
    if (rc) return rc;
    GptConfig g = x.m.cfg;
    char buf[4096];
    x.data = corpus(opt, buf, sizeof buf);
    if (x.data) {
        char err[512];
        if (train_text_load(&x.text, x.data, x.m.vocab, g.V, ERR(tr->lang, err)) != 0) {
            fileio_error(tr->lang, "%s", "%s", err);
            rc = 1;
            goto done;
        }
        x.have_text = 1;
        if ((x.text.n - x.text.n * 9 / 10 - 1) / g.T < 1) {
            fileio_error(tr->lang, "%s is too short: its last 10%% needs more than %d characters",
                         "%s 太短：它最后 10%% 的文本要多于 %d 个字符", x.data, g.T);
            rc = 1;
            goto done;
        }
    }
    for (Run *r = &x.ref; r; r = r == &x.ref ? &x.run : NULL) {
        r->logits = malloc(sizeof(float) * (size_t)x.steps * (size_t)g.V);
        r->tokens = malloc(sizeof(int) * (size_t)(x.n_prompt + x.steps));
        if (!r->logits || !r->tokens) goto oom;
    }
    if (gpt_state_init(&x.s, g) || !(x.s.pool = pool_new_for(opt->threads, gpt_row_work(g)))) goto oom;
    progress_line_init(&x.progress, tr->lang == LANG_ZH);

    lessons_heading(tr);
    trace_sayf(tr,
               "The char GPT of lesson 10 writes %d characters after \"%s\" (seed %llu). kvdemo's own cache gives\n"
               "the same logits as no cache, bit for bit: its kernels sum every output in one order.",
               "第 10 课的字符级 GPT 生成 %d 个字符，提示为 \"%s\"（种子 %llu）。kvdemo 自己的缓存与不使用缓存的\n"
               "logits 逐位相同：它的内核对每个输出都按同一顺序求和。",
               x.steps, gptsetup_prompt_text(opt), (unsigned long long)opt->seed);
    if (random_model) {
        fileio_error(tr->lang, "%s is missing; lesson 12 runs a random model (its text is noise)", "找不到 %s；第 12 课改用随机模型（生成的文字没有意义）", GPT_SHIPPED_MODEL);
        trace_say(tr, "No trained model was found: the weights are random, the text is noise.",
                  "没有找到训练好的模型：权重是随机的，文字没有意义。");
    }
    if (summing_order(&x, tr, opt) || smaller_cache(&x, tr, opt)) goto oom;
    goto done;
oom:
    progress_line_clear(&x.progress);
    fileio_error(tr->lang, "out of memory", "内存不足");
    rc = 1;
done:
    free(x.ref.logits);
    free(x.run.logits);
    free(x.ref.tokens);
    free(x.run.tokens);
    free(x.ref.text);
    free(x.run.text);
    free(x.prompt);
    if (x.have_text) train_text_free(&x.text);
    pool_free(x.s.pool);
    gpt_state_free(&x.s);
    gpt_free(&x.m);
    return rc;
}
