// lesson 11 — beyond the documents: classic cache bugs, injected and caught
//
// The numpy chapter's cache is easy to get almost right. The mistakes
// learners report most, each switched on in the cached path only:
//
//   offset        the new token's position embedding is position 0, not
//                 len(tokens) - 1 (the chapter's 位置编码偏移, forgotten)
//   no-append     the new key and value are used for the step but never kept
//   stale         past the context the cache is kept (the chapter's 缓存重置,
//                 removed): old keys stay while positions stop at T - 1
//   mask          a causal mask aligned to the top-left corner on the one-row
//                 cached step: the new query sees key 0 only
//   wrong-layout  the transposed key cache (D, len) read as (len, D)
//   no-scale      the scores of a cached step not divided by sqrt(D)
//
// The run without the cache is the reference. Beside it the correct cached
// run (identical at every step, as lesson 10 shows) and one run per bug; for
// each: the step where the logits first differ and by how much, the first
// character of the text that differs, and a diagnosis to apply to one's own
// code.
//
// Then speculative decoding's rollback (lesson 13), two bugs of the cut that
// follows a rejected draft:
//   no-rollback          the rejected rows stay in the target's cache
//   off-by-one  one row more is cut than the rejection asks
// Greedy, so that the reference is the target's own greedy text, which the
// correct speculative run writes byte for byte: for each, the step where the
// text first leaves it, and the round of the first rollback that mattered.
#include "gptsetup.h"
#include "fileio.h"
#include "kvvariant.h"
#include "lessons.h"
#include "ops.h"
#include "progress.h"
#include "sampler.h"
#include "spec.h"
#include "speccmd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// MAX_STEPS: seven generations of that length, the one without the cache
// recomputing the whole window each step past the context, take about a
// minute at 1000; more would run for hours with nothing to show.
enum { DEFAULT_STEPS = 256, MAX_STEPS = 1000, SHOWN_CHARS = 100 };

// What each bug does, and how to find it in one's own code.
static const struct {
    const char *what_en, *what_zh, *fix_en, *fix_zh;
} BUGS[KV_NUM_BUGS] = {
    [KV_BUG_NONE] = {"the correct cache", "正确的缓存", "", ""},
    [KV_BUG_OFFSET] =
        {"the new token's position embedding is position 0, not len(tokens) - 1",
         "新 token 的位置编码用了位置 0，而不是 len(tokens) - 1",
         "a cached step feeds one token, but its position is the cache length: add the offset "
         "(offset = len(tokens) - 1) to the position embedding. Print the position of every step.",
         "使用缓存时只输入一个 token，但它的位置是缓存长度：位置编码要加偏移量（offset = len(tokens) - 1）。"
         "打印每一步的位置来检查。"},
    [KV_BUG_NO_APPEND] =
        {"the new key and value are used for the step, never kept in the cache",
         "新的键和值只在这一步用了，没有存进缓存",
         "the first cached step is still right; the next one misses the key it should have kept. "
         "The cache must grow by one position every step: print key's shape (1, H, D, len).",
         "第一个使用缓存的步骤（第 2 步）仍然正确，下一步就缺了本该存下的键。缓存每一步都要长一个位置："
         "打印 key 的形状 (1, H, D, len) 来检查。"},
    [KV_BUG_STALE] =
        {"past the context the cache is not reset: old keys stay, positions stop at the last one",
         "超过上下文后没有重置缓存：旧的键还在，位置停在最后一个",
         "the cache then holds the keys of the text's first characters, not of its last T. Once "
         "len(tokens) > context, drop the cache and recompute the last T tokens (the chapter's reset).",
         "这时缓存里是文本开头的键，而不是最后 T 个 token 的键。len(tokens) 超过上下文时，"
         "要丢掉缓存、重新计算最后 T 个 token（原文的“缓存重置”）。"},
    [KV_BUG_MASK] =
        {"a causal mask aligned to the top-left corner on the one-row cached step",
         "在只有一行的缓存步骤上用了左上角对齐的因果掩码",
         "a square mask triu(ones(N, N)) cut to one row keeps key 0 only. A cached step needs no "
         "mask (the chapter), or one aligned to the bottom-right: triu(mask, diagonal=start_pos + 1).",
         "方形掩码 triu(ones(N, N)) 截成一行后只保留第 0 个键。缓存步骤不需要掩码（原文：“有缓存时不要因果掩码”），"
         "或者要右下角对齐：triu(mask, diagonal=start_pos + 1)。"},
    [KV_BUG_WRONG_LAYOUT] =
        {"the transposed key cache (1, H, D, len) read as if it were (1, H, len, D)",
         "转置存放的键缓存 (1, H, D, len) 被当作 (1, H, len, D) 读取",
         "the scores mix positions and channels. Read the cache in the layout it was written in, "
         "and check one score against q . k computed by hand.",
         "注意力分数把位置和通道混在了一起。按写入时的布局读取缓存，并手算一个 q · k 来核对。"},
    [KV_BUG_NO_ROLLBACK] =
        {"speculative decoding: the rejected rows are left in the target's cache",
         "投机解码：被拒绝的行留在了目标模型的缓存里",
         "after a rejection the cache must be cut back to the tokens kept (truncate to len + accepted): "
         "print the cache's length after every round, and compare it with len(tokens) - 1.",
         "拒绝之后，缓存必须回退到被保留的 token（截断到 len + 接受数）：每轮之后打印缓存长度，"
         "并与 len(tokens) - 1 比较。"},
    [KV_BUG_OFF_BY_ONE] =
        {"speculative decoding: the rollback cuts one row more than the rejection asks",
         "投机解码：回退时比拒绝要求的多删了一行",
         "the rows to cut are K - accepted, not K - accepted + 1: the cache keeps len + accepted positions, "
         "those of every token but the last. Print the cache's length after every round.",
         "要删掉的行数是 K - 接受数，而不是 K - 接受数 + 1：缓存保留 len + 接受数 个位置，即除最后一个之外"
         "每个 token 的位置。每轮之后打印缓存长度来检查。"},
    [KV_BUG_NO_SCALE] =
        {"the cached step's scores are not divided by sqrt(head_dim)",
         "缓存步骤的注意力分数没有除以 sqrt(head_dim)",
         "the full pass scales, the cached step does not: its softmax is sharper. Let both paths "
         "call one attention function rather than two copies.",
         "完整计算做了缩放，缓存步骤没有：softmax 更尖锐。让两条路径调用同一个注意力函数，而不是两份拷贝。"},
};

// One generation's logits at every step (steps, V) and its text.
typedef struct {
    int V;
    float *logits;
    int steps_done;
    char *text;
} Run;

static int record_step(void *ctx, const GptStep *st) {
    Run *r = ctx;
    memcpy(r->logits + (size_t)st->step * r->V, st->logits, sizeof(float) * (size_t)r->V);
    r->steps_done = st->step + 1;
    return 0;
}

// Generates from the prompt into r; v NULL is the plain cache. Returns 0, or
// 1 when memory ran out.
static int run_once(Run *r, GptState *s, GptVariant *v, const GptModel *m, const int *prompt, int n_prompt,
                    int steps, int use_cache, const Options *opt) {
    int *tokens = malloc(sizeof(int) * (size_t)(n_prompt + steps));
    r->V = m->cfg.V;
    KvVariantCaches vc;
    if (kvvariant_attach(&vc, s, v)) {
        free(tokens);
        return 1;
    }
    free(r->text);
    r->text = tokens ? gptsetup_generate_text(tokens, s, m, prompt, n_prompt, steps, use_cache, opt, record_step, r) : NULL;
    kvvariant_detach(&vc);
    free(tokens);
    return r->text ? 0 : 1;
}

// Where run b first leaves the reference a: step (1-based, 0 for never) and
// max |difference| of the logits there; the first differing byte of the
// texts (-1 for none).
typedef struct {
    int step;
    double max_diff;
    long first_char;
} Divergence;

static Divergence diverge(const Run *a, const Run *b, int steps) {
    Divergence d = {0, 0, -1};
    for (int t = 0; t < steps && !d.step; t++) {
        const float *x = a->logits + (size_t)t * a->V, *y = b->logits + (size_t)t * a->V;
        if (memcmp(x, y, sizeof(float) * (size_t)a->V) == 0) continue;
        d.step = t + 1;
        for (int j = 0; j < a->V; j++) d.max_diff = fmax(d.max_diff, fabs((double)x[j] - (double)y[j]));
    }
    size_t n = 0;
    while (a->text[n] && a->text[n] == b->text[n]) n++;
    if (a->text[n] || b->text[n]) d.first_char = (long)n;
    return d;
}

// A character of the text as the class reads it: \n for a newline.
static const char *shown(char c, char *buf) {
    if (c == '\n') return "\\n";
    if (c == '\0') return "(end)";
    buf[0] = c;
    buf[1] = '\0';
    return buf;
}

// What bug b did to the cached run against the reference: where the logits
// and the text first part, the diagnosis, and the start of the text.
static void report(Trace *tr, int b, const Run *ref, const Run *run, int steps, int past_context) {
    const char *name = kvvariant_bug_name((KvBug)b);
    Divergence d = diverge(ref, run, steps);
    if (b == KV_BUG_NONE)
        trace_heading(tr, "With the cache, done right", "使用缓存，正确实现");
    else {
        char head[160];
        snprintf(head, sizeof head, "%s %s", trace_text(tr, "Bug", "错误"), name);
        trace_heading(tr, head, head);
        trace_sayf(tr, "  %s", "  %s", trace_text(tr, BUGS[b].what_en, BUGS[b].what_zh));
    }
    trace_count(tr, "first_step", d.step, NULL, NULL);
    trace_value(tr, "max_abs_diff", d.max_diff, "", NULL, NULL);
    trace_count(tr, "first_char", d.first_char, NULL, NULL);
    if (!d.step) {
        trace_sayf(tr, "  logits identical at all %d steps, bit for bit; the same text.",
                   "  全部 %d 步的 logits 逐位相同；文字相同。", steps);
        if (b == KV_BUG_STALE)
            trace_sayf(tr, "  (this bug shows only once the text outgrows the context, at step %d: give --steps %d)",
                       "  （这个错误要等文本超过上下文才出现，即第 %d 步：请用 --steps %d）", past_context,
                       past_context + 4);
    } else {
        trace_sayf(tr, "  logits first differ at step %d%s, max |difference| %.3g there.",
                   "  logits 在第 %d 步首次不同%s，最大 |差值| 为 %.3g。", d.step,
                   d.step == 2   ? trace_text(tr, " (the first cached step)", "（第一个缓存步骤）")
                   : d.step == 3 ? trace_text(tr, " (the second cached step)", "（第二个缓存步骤）")
                   : d.step == past_context
                       ? trace_text(tr, " (the first step past the context)", "（超过上下文后的第 1 步）")
                       : "",
                   d.max_diff);
        char x[2], y[2];
        if (d.first_char >= 0)
            trace_sayf(tr, "  the text first differs at character %ld (counting from 0): '%s' without the cache, '%s' with it.",
                       "  文字在第 %ld 个字符处（从 0 数起）首次不同：不使用缓存为 '%s'，使用缓存为 '%s'。", d.first_char,
                       shown(ref->text[d.first_char], x), shown(run->text[d.first_char], y));
        else
            trace_say(tr, "  the text is still the same: the draws did not change.",
                      "  文字仍然相同：抽样结果没有改变。");
        trace_sayf(tr, "  diagnosis: %s", "  诊断：%s", trace_text(tr, BUGS[b].fix_en, BUGS[b].fix_zh));
        if (tr->format == FORMAT_JSON) trace_textval(tr, "diagnosis", BUGS[b].fix_en);
    }
    if (tr->format == FORMAT_JSON) trace_textval(tr, "text", run->text);
    const char *more = strlen(run->text) > SHOWN_CHARS ? "..." : "";
    trace_sayf(tr, "  text: %.*s%s\n", "  文字：%.*s%s\n", SHOWN_CHARS, run->text, more);
}

// What every bug above has in common, and the test that finds them all.
static void say_moral(Trace *tr) {
    trace_say(tr,
              "None of these bugs stops the run: there is no error, and text keeps coming — some of it\n"
              "plausible, some plain garbage (read the texts above). The chapter's own code without its reset\n"
              "would crash past the context (an IndexError on the position embedding); kvdemo's stale bug\n"
              "writes the newest token into the last slot instead, and so goes on without a word. Only a\n"
              "comparison with the run without the cache, step by step, finds every one of them — the test to\n"
              "write for any cache of one's own.",
              "这些错误都不会让运行停下：没有报错，文字照样一个个出来——有的看起来像样，有的完全是乱码（见上面\n"
              "的文字）。章节自己的代码若去掉缓存重置，超过上下文时会因位置嵌入的下标越界而崩溃；kvdemo 的\n"
              "stale 错误则把最新的 token 写进最后一个位置，于是一声不响地继续。只有和不使用缓存的结果逐步\n"
              "对比，才能把它们全部找出来——给自己的缓存实现也写这样一个测试。");
}

// The lesson's opening: the model, the prompt, the reference.
static void say_intro(Trace *tr, const Options *opt, GptConfig g, int steps, int random_model) {
    lessons_heading(tr);
    trace_sayf(tr,
               "The char GPT of lesson 10 (context %d, %d blocks) writes %d characters after \"%s\" with seed %llu.\n"
               "The run without the cache is the reference. Each bug below changes only the cached path;\n"
               "kvdemo compares every step's logits with the reference, bit for bit.",
               "第 10 课的字符级 GPT（上下文 %d，%d 个模块）生成 %d 个字符，提示为 \"%s\"（种子 %llu）。\n"
               "不使用缓存的一次是参照。下面每个错误只改动使用缓存的路径；kvdemo 逐步、逐位比较 logits。",
               g.T, g.L, steps, gptsetup_prompt_text(opt), (unsigned long long)opt->seed);
    if (random_model) {
        fileio_error(tr->lang, "%s is missing; lesson 11 runs a random model (its text is noise)", "找不到 %s；第 11 课改用随机模型（生成的文字没有意义）", GPT_SHIPPED_MODEL);
        trace_say(tr, "No trained model was found: the weights are random, the text is noise; the bugs show the same.",
                  "没有找到训练好的模型：权重是随机的，文字没有意义；错误的表现完全一样。");
    }
}

// The progress line while a run computes: which run.
static void say_running(ProgressLine *p, const char *name, int steps) {
    progress_line_show(p, "lesson 11: %s, generating %d characters", "第 11 课：%s，生成 %d 个字符", name, steps);
}

// ----------------------------------------------------------------------------
// Speculative decoding's rollback: two bugs of the cut after a rejection

// What the part shares: the draft, its state, the greedy draws, the target's
// own greedy tokens and a run's.
typedef struct {
    const GptModel *m;
    GptModel d;
    GptState ds;
    Sampler greedy;
    SpecMt mt;
    int gamma, n_prompt, steps;
    int *want, *got;   // (n_prompt + steps): the target alone, greedy; a speculative run
} Rollback;

// The round of a run's first rollback that cuts rows, the one each bug
// gets wrong; len is len(tokens) after it: the text is the target's up to
// there, as nothing before that cut reads a wrong row.
typedef struct {
    int round, len;   // round -1: none
} FirstCut;

static int on_cut(void *ctx, const SpecRound *r) {
    FirstCut *f = ctx;
    if (f->round < 0 && r->accepted < r->gamma) {
        f->round = r->round;
        f->len = r->len + r->accepted + 1;
    }
    return 0;
}

// One speculative run of the target on s (with bug b's cache) into x->got.
// Returns 0, or 1 when memory ran out.
static int rollback_run(Rollback *x, GptState *s, KvBug b, FirstCut *cut) {
    GptVariant v = {.bug = b};
    KvVariantCaches vc;
    Spec sp;
    if (kvvariant_attach(&vc, s, b == KV_BUG_NONE ? NULL : &v)) return 1;
    gpt_state_reset(s);
    gpt_state_reset(&x->ds);
    SpecModel tm = {x->m, s, NULL}, dm = {&x->d, &x->ds, NULL};
    int rc = spec_init(&sp, tm, dm, x->gamma, &x->greedy, &x->mt.base);
    if (!rc) {
        memcpy(x->got, x->want, sizeof(int) * (size_t)x->n_prompt);
        *cut = (FirstCut){-1, 0};
        rc = spec_generate(x->got, &sp, x->n_prompt, x->steps, on_cut, cut) < 0;
    }
    spec_free(&sp);
    kvvariant_detach(&vc);
    return rc ? 1 : 0;
}

// Where the run left the target's text, said as the other bugs' are.
static void rollback_report(Trace *tr, const Rollback *x, KvBug b, const FirstCut *cut) {
    int n = x->n_prompt + x->steps, at = x->n_prompt;
    while (at < n && x->got[at] == x->want[at]) at++;
    int step = at < n ? at - x->n_prompt + 1 : 0;
    if (b == KV_BUG_NONE)
        trace_heading(tr, "Speculative decoding, rolled back right", "投机解码，正确回退");
    else {
        char head[160];
        snprintf(head, sizeof head, "%s %s", trace_text(tr, "Bug", "错误"), kvvariant_bug_name(b));
        trace_heading(tr, head, head);
        trace_sayf(tr, "  %s", "  %s", trace_text(tr, BUGS[b].what_en, BUGS[b].what_zh));
    }
    trace_count(tr, "first_step", step, NULL, NULL);
    trace_count(tr, "first_char", step ? at : -1, NULL, NULL);
    trace_count(tr, "cut_round", cut->round + 1, NULL, NULL);
    trace_count(tr, "cut_len", cut->len, NULL, NULL);
    if (cut->round >= 0)
        trace_sayf(tr, "  the first rollback that cut rows was round %d's, the text then %d characters long.",
                   "  第一次删掉行的回退在第 %d 轮，当时文字长 %d 个字符。", cut->round + 1, cut->len);
    if (!step) {
        trace_sayf(tr, "  the target's own greedy text at all %d steps, byte for byte.",
                   "  全部 %d 步都是目标模型自己的贪心文字，逐字节相同。", x->steps);
    } else {
        char a[8], c[8], sa[2], sc[2];
        gpt_decode(a, sizeof a, x->m, &x->want[at], 1);
        gpt_decode(c, sizeof c, x->m, &x->got[at], 1);
        trace_sayf(tr, "  the text first leaves the target's at step %d (character %d): '%s' from the target, '%s' here.",
                   "  文字在第 %d 步（第 %d 个字符）首次偏离目标模型的：目标模型为 '%s'，这里为 '%s'。", step, at,
                   shown(a[0], sa), shown(c[0], sc));
        trace_sayf(tr, "  diagnosis: %s", "  诊断：%s", trace_text(tr, BUGS[b].fix_en, BUGS[b].fix_zh));
        if (tr->format == FORMAT_JSON) trace_textval(tr, "diagnosis", BUGS[b].fix_en);
    }
    size_t need = gpt_decode(NULL, 0, x->m, x->got, n);
    char *text = malloc(need + 1);
    if (!text) return;
    gpt_decode(text, need + 1, x->m, x->got, n);
    if (tr->format == FORMAT_JSON) trace_textval(tr, "text", text);
    trace_sayf(tr, "  text: %.*s%s\n", "  文字：%.*s%s\n", SHOWN_CHARS, text, strlen(text) > SHOWN_CHARS ? "..." : "");
    free(text);
}

static void say_rollback_intro(Trace *tr, const Rollback *x, const Options *opt) {
    trace_heading(tr, "Speculative decoding's rollback (lesson 13)", "投机解码的回退（第 13 课）");
    trace_sayf(tr,
               "The draft %s proposes K = %d tokens a round; the target verifies them in one pass of K + 1 rows,\n"
               "and the rows of the rejected tokens are cut from its cache (kvcache_truncate). Greedy decoding:\n"
               "the reference is now the target's own greedy text, which a correct speculative run writes byte\n"
               "for byte. Each bug below changes only that cut.",
               "草稿模型 %s 每轮提议 K = %d 个 token；目标模型用一次 K + 1 行的前向验证它们，\n"
               "被拒绝的 token 的行从它的缓存中删掉（kvcache_truncate）。贪心解码：参照现在是目标模型自己的\n"
               "贪心文字，正确的投机解码会逐字节写出它。下面每个错误只改动这一步删除。",
               opt->draft_path ? opt->draft_path : SPEC_SHIPPED_DRAFT, x->gamma);
}

// The part: the draft, the target's greedy text, then the correct run and
// each rollback bug (only: one of them, or KV_BUG_NONE for both). Returns 0,
// or an exit status after one line on stderr.
static int rollback_part(Trace *tr, GptState *s, const GptModel *m, const int *prompt, int n_prompt, int steps,
                         KvBug only, const Options *opt, ProgressLine *progress) {
    Rollback x = {.m = m, .n_prompt = n_prompt, .steps = steps, .gamma = speccmd_gamma(opt)};
    int rc = speccmd_draft(&x.d, m, opt, x.gamma);
    if (rc) {
        if (opt->draft_path) return rc;
        trace_say(tr, "(no draft model: speculative decoding's rollback is left out)", "（没有草稿模型：略去投机解码的回退）");
        return 0;
    }
    size_t n = (size_t)(n_prompt + steps + SPEC_GAMMA_MAX + 1);
    x.want = malloc(sizeof(int) * 2 * n);
    x.got = x.want + n;
    if (!x.want || gpt_state_init(&x.ds, x.d.cfg) || sampler_init(&x.greedy, m->cfg.V, 0.0f, 0, 42)) rc = 1;
    if (!rc) {
        x.ds.pool = s->pool;   // the draft on the target's threads
        spec_mt_init(&x.mt, &x.greedy);
        say_rollback_intro(tr, &x, opt);
        memcpy(x.want, prompt, sizeof(int) * (size_t)n_prompt);
        gpt_state_reset(s);
        gpt_generate(x.want, s, m, &x.greedy, n_prompt, steps, 1, NULL, NULL);
    }
    static const KvBug RUNS[] = {KV_BUG_NONE, KV_BUG_NO_ROLLBACK, KV_BUG_OFF_BY_ONE};
    for (int i = 0; i < 3 && !rc; i++) {
        KvBug b = RUNS[i];
        if (only && b != only && b != KV_BUG_NONE) continue;
        trace_run(tr, b == KV_BUG_NONE ? "speculative" : kvvariant_bug_name(b));
        say_running(progress, b == KV_BUG_NONE ? trace_text(tr, "speculative decoding", "投机解码") : kvvariant_bug_name(b),
                    steps);
        FirstCut cut;
        rc = rollback_run(&x, s, b, &cut);
        progress_line_clear(progress);
        if (!rc) rollback_report(tr, &x, b, &cut);
        trace_pause(tr);
    }
    if (rc) fileio_error(tr->lang, "out of memory", "内存不足");
    free(x.want);
    sampler_free(&x.greedy);
    gpt_state_free(&x.ds);
    gpt_free(&x.d);
    return rc;
}

int lesson11_run(const Options *opt, Trace *tr) {
    KvBug only = KV_BUG_NONE;
    if (opt->bug && kvvariant_bug_parse(&only, opt->bug)) {
        fileio_error(tr->lang, "unknown bug '%s'; valid: %s", "没有“%s”这种错误；可用的：%s", opt->bug, KV_BUG_LIST);
        return 2;
    }
    int steps = opt->steps > 0 ? opt->steps : DEFAULT_STEPS;
    if (steps > MAX_STEPS) {
        fileio_error(tr->lang, "lesson 11 takes --steps 1 to %d; kvdemo generate --bug NAME writes longer texts with a bug",
                     "第 11 课的 --steps 取 1 到 %d；更长的文字请用 kvdemo generate --bug NAME", MAX_STEPS);
        return 2;
    }
    GptModel m;
    int random_model, *prompt, n_prompt;
    int rc = gptsetup_lesson(&m, &random_model, &prompt, &n_prompt, opt, NULL);
    if (rc) return rc;
    GptState s = {0};
    Run ref = {0}, run = {0};
    ProgressLine progress;   // on a terminal's stderr while a run computes
    progress_line_init(&progress, tr->lang == LANG_ZH);
    ref.logits = malloc(sizeof(float) * (size_t)steps * (size_t)m.cfg.V);
    run.logits = malloc(sizeof(float) * (size_t)steps * (size_t)m.cfg.V);
    if (!ref.logits || !run.logits || gpt_state_init(&s, m.cfg) ||
        !(s.pool = pool_new_for(opt->threads, gpt_row_work(m.cfg))))   // s's threads, freed below
        goto oom;
    GptConfig g = m.cfg;
    // The step at which the text first outgrows the context: len(tokens) = T + 1.
    int past_context = g.T - n_prompt + 2;

    say_intro(tr, opt, g, steps, random_model);

    trace_run(tr, "no-cache");
    say_running(&progress, trace_text(tr, "without the cache (the reference)", "不使用缓存（参照）"), steps);
    if (run_once(&ref, &s, NULL, &m, prompt, n_prompt, steps, 0, opt)) goto oom;
    progress_line_clear(&progress);
    trace_heading(tr, "Without the cache (the reference)", "不使用缓存（参照）");
    trace_textval(tr, "text", ref.text);

    for (int b = 0; b < KV_NUM_BUGS; b++) {
        if (only && b != (int)only && b != KV_BUG_NONE) continue;
        if (b == KV_BUG_NO_ROLLBACK || b == KV_BUG_OFF_BY_ONE) continue;   // below, rolling back
        GptVariant v = {.bug = (KvBug)b};
        const char *name = kvvariant_bug_name((KvBug)b);
        trace_run(tr, name);
        const char *what = b == KV_BUG_NONE ? trace_text(tr, "with the cache, done right", "使用缓存，正确实现") : name;
        say_running(&progress, what, steps);
        if (run_once(&run, &s, &v, &m, prompt, n_prompt, steps, 1, opt)) goto oom;
        progress_line_clear(&progress);
        report(tr, b, &ref, &run, steps, past_context);
        trace_pause(tr);
    }
    if (!only || only == KV_BUG_NO_ROLLBACK || only == KV_BUG_OFF_BY_ONE) {
        rc = rollback_part(tr, &s, &m, prompt, n_prompt, steps, only, opt, &progress);
        if (rc) goto done;
    }
    trace_run(tr, NULL);
    say_moral(tr);
    goto done;
oom:
    progress_line_clear(&progress);
    fileio_error(tr->lang, "out of memory", "内存不足");
    rc = 1;
done:
    free(ref.logits);
    free(run.logits);
    free(ref.text);
    free(run.text);
    free(prompt);
    pool_free(s.pool);
    gpt_state_free(&s);
    gpt_free(&m);
    return rc;
}
