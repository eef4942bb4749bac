// lesson 13 — beyond the documents: speculative decoding
//
// A cached step of the char GPT reads every weight to make one token
// (lesson 4). A small draft model guesses K tokens cheaply; the target then
// reads its weights once for K + 1 rows, keeps the guesses it agrees with,
// and both caches are cut back past the first one it rejects (spec.h).
//
//   1. one round traced    the drafted tokens, the K + 1 verifying rows, which
//                          are kept, the cache lengths of target and draft
//                          before, after verifying and after the rollback
//   2. greedy              the speculative text against the target's own,
//                          byte for byte
//   3. K = 1 .. 8          α, tokens a round and the measured speed-up over
//                          plain cached decoding (interleaved runs, median
//                          min … max), beside Leviathan et al.'s expected
//                          speed-up from the measured α and cost ratio c
//   4. why it works        bytes read and FLOPs per token (lesson 4's counts),
//                          and the verifying pass of K + 1 rows timed against
//                          one cached step: the measured ratio picks the words
#include "gptsetup.h"
#include "fileio.h"
#include "lessons.h"
#include "measure.h"
#include "ops.h"
#include "spec.h"
#include "speccmd.h"
#include "timer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DEFAULT_STEPS = 200, K_MAX = 8 };

typedef struct {
    GptModel m, d;                // target and draft
    int *prompt, n_prompt, steps;
    int *tokens;                  // (n_prompt + steps + SPEC_GAMMA_MAX + 1)
    GptState ts, ds;
    Sampler greedy;
    SpecMt mt;
    Spec sp;
    int gamma;                    // --gamma: the traced round's and the text's K
    const Options *opt;
} Shared;

// A token as a class reads it: 'a', '\n', ' '.
static const char *shown(char *buf, size_t size, const GptModel *m, int token) {
    char piece[8];
    gpt_decode(piece, sizeof piece, m, &token, 1);
    if (piece[0] == '\n') snprintf(buf, size, "'\\n'");
    else snprintf(buf, size, "'%s'", piece);
    return buf;
}

// The target alone, greedy with its cache: tokens (n_prompt + steps).
static void plain_run(Shared *x) {
    memcpy(x->tokens, x->prompt, sizeof(int) * (size_t)x->n_prompt);
    gpt_state_reset(&x->ts);
    gpt_generate(x->tokens, &x->ts, &x->m, &x->greedy, x->n_prompt, x->steps, 1, NULL, NULL);
}

// Speculative, K a round. Returns len(tokens), or -1.
static int spec_run(Shared *x, int K, SpecRoundFn on_round, void *ctx) {
    memcpy(x->tokens, x->prompt, sizeof(int) * (size_t)x->n_prompt);
    gpt_state_reset(&x->ts);
    gpt_state_reset(&x->ds);
    x->sp.gamma = K;
    return spec_generate(x->tokens, &x->sp, x->n_prompt, x->steps, on_round, ctx);
}

// ----------------------------------------------------------------------------
// 1. One round traced

static int keep_round(void *ctx, const SpecRound *r) {
    SpecRound *keep = ctx;
    *keep = *r;
    return r->round >= 1;   // the second round: the first after the prompt's
}

static void round_table(Trace *tr, const Shared *x, const SpecRound *r) {
    static const TraceColumn cols[] = {
        {"row", "行", 4, 1, NULL},          {"position", "位置", 9, 1, NULL},
        {"fed", "输入", 6, 0, NULL},        {"target's next", "目标模型的下一个", 16, 0, "target"},
        {"drafted", "草稿", 8, 0, NULL},    {"verdict", "结论", 28, 0, NULL},
    };
    TraceTable t = {"verify_rows", 6, cols};
    trace_table_head(tr, &t);
    int first = r->len - 1;   // the position of the round's first fed token
    for (int j = 0; j <= r->gamma; j++) {
        char row[16], pos[16], fed[16], tgt[16], dr[16] = "", verdict[64];
        snprintf(row, sizeof row, "%d", j);
        snprintf(pos, sizeof pos, "%d", first + j);
        shown(fed, sizeof fed, &x->m, j == 0 ? x->tokens[first] : r->drafted[j - 1]);
        shown(tgt, sizeof tgt, &x->m, r->target_tok[j]);
        if (j < r->gamma) shown(dr, sizeof dr, &x->m, r->drafted[j]);
        if (j < r->accepted) snprintf(verdict, sizeof verdict, "%s", trace_text(tr, "accepted", "接受"));
        else if (j == r->accepted && j < r->gamma)
            snprintf(verdict, sizeof verdict, "%s", trace_text(tr, "rejected: the target's is taken", "拒绝：取目标模型的"));
        else if (j == r->accepted) snprintf(verdict, sizeof verdict, "%s", trace_text(tr, "bonus token", "额外的 token"));
        else snprintf(verdict, sizeof verdict, "%s", trace_text(tr, "not reached (after a rejection)", "未用到（在拒绝之后）"));
        const char *cells[] = {row, pos, fed, tgt, dr, verdict};
        trace_table_row(tr, &t, cells);
    }
}

static int one_round(Shared *x, Trace *tr) {
    trace_heading(tr, "1. One round, traced", "1. 追踪一轮");
    SpecRound r = {0};
    if (spec_run(x, x->gamma, keep_round, &r) < 0) return 1;
    trace_run(tr, "round");
    trace_sayf(tr,
               "Round %d, K = %d. The text has %d tokens; both caches hold the first %d (all but the last,\n"
               "which this round feeds). The draft proposes %d tokens, one cached step each: its cache %d -> %d.",
               "第 %d 轮，K = %d。文字已有 %d 个 token；两个缓存都存着前 %d 个（除了最后一个，本轮把它送入）。\n"
               "草稿模型提议 %d 个 token，每个一步，都用缓存：它的缓存 %d -> %d。",
               r.round + 1, r.gamma, r.len, r.target_before, r.gamma, r.draft_before, r.draft_drafted);
    trace_sayf(tr,
               "The target feeds the last token and the %d drafted ones in ONE pass of %d rows, appended to its\n"
               "cache: %d -> %d. Row j's logits give the target's token after position %d + j.",
               "目标模型把最后一个 token 和 %d 个草稿 token 放在一次 %d 行的前向里送入，追加到它的缓存：%d -> %d。\n"
               "第 j 行的 logits 给出目标模型在位置 %d + j 之后的 token。",
               r.gamma, r.fed, r.target_before, r.target_verify, r.len - 1);
    round_table(tr, x, &r);
    trace_sayf(tr,
               "\n%d of %d accepted; the target's own token follows them: the round adds %d token(s).\n"
               "Rollback: the target keeps %d positions (%d -> %d), the draft %d (%d -> %d); the next round\n"
               "appends at position %d, as if the rejected rows had never been written.",
               "\n%d 个（共 %d 个）被接受；其后接上目标模型自己的 token，本轮共增加 %d 个 token。\n"
               "回退：目标模型保留 %d 个位置（%d -> %d），草稿模型保留 %d 个（%d -> %d）；下一轮从位置 %d\n"
               "开始追加，就像被拒绝的行从未写入过。",
               r.accepted, r.gamma, r.accepted + 1, r.target_after, r.target_verify, r.target_after, r.draft_after,
               r.draft_drafted, r.draft_after, r.target_after);
    const char *names[] = {"target_before", "target_verify", "target_after", "draft_before", "draft_drafted",
                           "draft_after", "accepted"};
    const int values[] = {r.target_before, r.target_verify, r.target_after, r.draft_before, r.draft_drafted,
                          r.draft_after, r.accepted};
    for (int i = 0; i < 7; i++) trace_count(tr, names[i], values[i], NULL, NULL);
    trace_pause(tr);
    return 0;
}

// ----------------------------------------------------------------------------
// 2. Greedy: the target's own text

static char *text_of(const Shared *x, int len) {
    size_t need = gpt_decode(NULL, 0, &x->m, x->tokens, len);
    char *text = malloc(need + 1);
    if (text) gpt_decode(text, need + 1, &x->m, x->tokens, len);
    return text;
}

static int greedy_text(Shared *x, Trace *tr) {
    trace_heading(tr, "2. Greedy: the same text as the target alone", "2. 贪心解码：与目标模型单独生成的文字相同");
    int len = x->n_prompt + x->steps;
    plain_run(x);
    char *want = text_of(x, len);
    if (spec_run(x, x->gamma, NULL, NULL) != len) {
        free(want);
        return 1;
    }
    char *got = text_of(x, len);
    if (!want || !got) {
        free(want), free(got);
        return 1;
    }
    size_t n = strlen(want), at = 0;
    while (at < n && want[at] == got[at]) at++;
    int same = strcmp(want, got) == 0;
    trace_run(tr, "speculative");
    trace_textval(tr, "text", got);
    if (same)
        trace_sayf(tr, "\nThe target alone and speculative decoding (K = %d) wrote the same %zu bytes: identical.",
                   "\n目标模型单独生成与投机解码（K = %d）写出了相同的 %zu 个字节：完全一致。", x->gamma, n);
    else
        trace_sayf(tr, "\nThe texts differ (K = %d): from byte %zu on.", "\n两段文字不同（K = %d）：从第 %zu 个字节起。",
                   x->gamma, at);
    trace_count(tr, "identical", same, NULL, NULL);
    trace_say(tr,
              "Each verifying row gives the bits the target's own one-row step gives (the kernels sum every\n"
              "output in one order whatever the number of rows), so its argmax is the same token.",
              "每个验证行与目标模型自己单行的一步得到相同的比特（内核无论行数多少，都按同一顺序求和），\n"
              "所以取到的 argmax 是同一个 token。");
    free(want), free(got);
    trace_pause(tr);
    return 0;
}

// ----------------------------------------------------------------------------
// 3. K = 1 .. 8: acceptance and speed-up

typedef struct {
    Shared *x;
    int K;           // 0: the target alone
    SpecStats last;  // the last speculative run's counts
} Arm;

static int arm_run(void *ctx, double *seconds) {
    Arm *a = ctx;
    double start = timer_now();
    if (a->K == 0) plain_run(a->x);
    else if (spec_run(a->x, a->K, NULL, NULL) < 0) return 1;
    *seconds = timer_now() - start;
    if (a->K) a->last = a->x->sp.stats;
    return 0;
}

// The draft alone, greedy with its cache, as the target alone is timed.
static int draft_arm(void *ctx, double *seconds) {
    Shared *x = ctx;
    memcpy(x->tokens, x->prompt, sizeof(int) * (size_t)x->n_prompt);
    gpt_state_reset(&x->ds);
    double start = timer_now();
    gpt_generate(x->tokens, &x->ds, &x->d, &x->greedy, x->n_prompt, x->steps, 1, NULL, NULL);
    *seconds = timer_now() - start;
    return 0;
}

static int target_arm(void *ctx, double *seconds) {
    Arm a = {ctx, 0, {0}};
    return arm_run(&a, seconds);
}

// c, the time of a draft step over a target step, from runs of each alone.
static int cost_ratio(Shared *x, Trace *tr, int runs, double *c, double *tpr) {
    double *t = malloc(sizeof(double) * (size_t)runs * 2), *d = t + runs;
    if (!t) return 1;
    if (measure_interleaved(t, d, MEASURE_WARMUP, runs, target_arm, x, draft_arm, x)) {
        free(t);
        return 1;
    }
    MeasureRatio r = measure_ratio(stats_of(d, runs), stats_of(t, runs));
    *c = r.x;
    *tpr = stats_of(t, runs).median;
    char ts[64], ds[64];
    measure_spread_text(ts, sizeof ts, stats_of(t, runs));
    measure_spread_text(ds, sizeof ds, stats_of(d, runs));
    trace_sayf(tr,
               "%d tokens, each model alone with its cache: the target %s, the draft %s.\n"
               "c = draft step / target step = %.3f.",
               "生成 %d 个 token，各自单独运行、使用缓存：目标模型 %s，草稿模型 %s。\n"
               "c = 草稿模型一步 / 目标模型一步 = %.3f。",
               x->steps, ts, ds, r.x);
    trace_value(tr, "c", r.x, "", NULL, NULL);
    free(t);
    return 0;
}

static int speedups(Shared *x, Trace *tr, SpecStats *per_k) {
    trace_heading(tr, "3. Acceptance and speed-up for K = 1 .. 8", "3. K = 1 .. 8 的接受率与加速比");
    int runs = x->opt->repeat > 0 ? x->opt->repeat : MEASURE_RUNS;
    trace_machine(tr, measure_machine());
    double c, plain_median;
    trace_run(tr, "cost");
    if (cost_ratio(x, tr, runs, &c, &plain_median)) return 1;
    trace_sayf(tr,
               "Leviathan et al.: a round makes (1 - α^(K+1)) / (1 - α) tokens on average and costs K c + 1\n"
               "target steps, if verifying K + 1 rows costs one step. Each row below times the target alone and\n"
               "speculative decoding, %d runs each, interleaved (median, min … max).",
               "Leviathan 等人的分析：每轮平均产生 (1 - α^(K+1)) / (1 - α) 个 token，代价是 K c + 1 个目标模型步\n"
               "（假设验证 K + 1 行只花一步的时间）。下表每行对目标模型单独生成和投机解码各计时 %d 次，交替进行\n"
               "（中位数，最小 … 最大）。",
               runs);
    static const TraceColumn cols[] = {
        {"K", "K", 2, 1, NULL},
        {"α", "α", 6, 1, "alpha"},
        {"tokens/round", "每轮 token", 12, 1, "tokens_per_round"},
        {"expected", "预期加速", 8, 1, NULL},
        {"target alone", "目标模型单独", 26, 0, "plain"},
        {"speculative", "投机解码", 26, 0, NULL},
        {"measured", "实测加速", 24, 0, NULL},
    };
    TraceTable t = {"speedup", 7, cols};
    trace_table_head(tr, &t);
    double *a = malloc(sizeof(double) * (size_t)runs * 2), *b = a + runs;
    if (!a) return 1;
    for (int K = 1; K <= K_MAX; K++) {
        Arm plain = {x, 0, {0}}, spec = {x, K, {0}};
        if (measure_interleaved(a, b, MEASURE_WARMUP, runs, arm_run, &plain, arm_run, &spec)) {
            free(a);
            return 1;
        }
        per_k[K] = spec.last;
        double alpha = spec_alpha(&spec.last);
        MeasureRatio r = measure_ratio(stats_of(a, runs), stats_of(b, runs));
        MeasureVerdict v = measure_verdict(a, runs, b, runs);
        char k[16], al[16], tpr[16], exp[16], pa[64], sa[64], ratio[32], meas[192];
        snprintf(k, sizeof k, "%d", K);
        snprintf(al, sizeof al, "%.3f", alpha);
        snprintf(tpr, sizeof tpr, "%.2f", (double)spec.last.tokens / spec.last.rounds);
        snprintf(exp, sizeof exp, "%.2f", spec_expected_speedup(alpha, K, c));
        measure_spread_text(pa, sizeof pa, stats_of(a, runs));
        measure_spread_text(sa, sizeof sa, stats_of(b, runs));
        measure_ratio_beside(ratio, sizeof ratio, r, v);   // no ± that reaches 1 beside faster or slower
        snprintf(meas, sizeof meas, "%s x, %s", ratio,
                 trace_text(tr, measure_verdict_word(v, 0), measure_verdict_word(v, 1)));
        const char *cells[] = {k, al, tpr, exp, pa, sa, meas};
        trace_table_row(tr, &t, cells);
    }
    free(a);
    trace_say(tr,
              "\"faster\" only where the runs' intervals do not overlap; α and tokens a round are the same in\n"
              "every run (greedy). The expected column assumes a pass of K + 1 rows costs what one step costs;\n"
              "where it costs more (K + 1 times the FLOPs, part 4), the measured speed-up falls below it.",
              "只有当两组运行的区间不重叠时才写「更快」；α 和每轮 token 数在每次运行中都相同（贪心解码）。\n"
              "「预期加速」一列假设 K + 1 行的一次前向只花一步的时间；如果花得更多（FLOPs 是 K + 1 倍，见第 4 部分），\n"
              "实测加速就会低于预期。");
    trace_pause(tr);
    return 0;
}

// ----------------------------------------------------------------------------
// 4. Why it works: the weights read once for K + 1 rows

// The verifying pass timed: n rows of the target at offset, as a round
// feeds them, PASS_REPS times a run (one pass takes milliseconds).
enum { PASS_REPS = 8 };
typedef struct {
    Shared *x;
    const int *feed;   // (n) tokens: the values do not change the time
    int n, offset;
} PassArm;

static int pass_arm(void *ctx, double *seconds) {
    PassArm *a = ctx;
    double start = timer_now();
    // gpt_forward cuts the cache back to offset first: every pass the same
    for (int r = 0; r < PASS_REPS; r++) gpt_forward(&a->x->ts, &a->x->m, a->feed, a->n, a->offset);
    *seconds = (timer_now() - start) / PASS_REPS;
    return 0;
}

// One verdict for all K from the measured ratios: the same as one step,
// slower but far below K + 1 steps, or about K + 1 steps.
static void say_pass_verdict(Trace *tr, int same, int first_slower, double r_max) {
    if (same == K_MAX)
        trace_say(tr, "For every K the pass of K + 1 rows took what one step takes, within noise: the weights are read once.",
                  "对每个 K，K + 1 行的一次前向都与一步用时相同（在噪声范围内）：权重只读了一遍。");
    else if (r_max < (K_MAX + 1) / 2.0)
        trace_sayf(tr,
                   "From K = %d on the pass is slower than one step; at K = %d it still takes only %.2f steps, not %d:\n"
                   "most of a step is reading the weights, which the rows share.",
                   "从 K = %d 起这次前向比一步慢，但 K = %d 时只用了 %.2f 步的时间，而不是 %d 步：一步的大部分时间\n"
                   "是在读权重，而这些行共用这一遍读取。",
                   first_slower, K_MAX, r_max, K_MAX + 1);
    else
        trace_sayf(tr,
                   "From K = %d the pass is slower than one step, and at K = %d it takes %.2f steps, close to %d: on this\n"
                   "machine a step is not bound by reading the weights, and speculative decoding gains little.",
                   "从 K = %d 起这次前向比一步慢，K = %d 时用了 %.2f 步的时间，接近 %d 步：在这台机器上一步并不受\n"
                   "读权重的限制，投机解码收获很少。",
                   first_slower, K_MAX, r_max, K_MAX + 1);
}

// The pass of K + 1 rows against one cached step, both at offset, the
// cache holding offset positions, interleaved, with spread.
static int pass_times(Shared *x, Trace *tr, int offset) {
    int runs = x->opt->repeat > 0 ? x->opt->repeat : MEASURE_RUNS, len = x->n_prompt + x->steps;
    int feed[K_MAX + 1], same = 0, first_slower = 0, too_few = 0;
    double r_max = 0, *a = malloc(sizeof(double) * (size_t)runs * 2), *b = a + runs;
    if (!a) return 1;
    for (int j = 0; j <= K_MAX; j++) feed[j] = x->tokens[(offset + j) % len];
    plain_run(x);   // the cache holds the text: offset positions and more
    trace_run(tr, "verify");
    trace_sayf(tr, "\nThe verifying pass timed at position %d against one cached step there (%d runs each, interleaved):",
               "\n在位置 %d 给验证前向计时，与同一位置的一个缓存步对比（各 %d 次，交替进行）：", offset, runs);
    static const TraceColumn cols[] = {
        {"K", "K", 2, 1, NULL},
        {"one step", "一步", 26, 0, "step"},
        {"pass of K + 1 rows", "K + 1 行的一次前向", 26, 0, "pass"},
        {"in steps", "折合步数", 12, 1, "ratio"},
        {"verdict", "结论", 22, 0, NULL},
    };
    TraceTable t = {"verify_pass", 5, cols};
    trace_table_head(tr, &t);
    for (int K = 1; K <= K_MAX; K++) {
        PassArm step = {x, feed, 1, offset}, pass = {x, feed, K + 1, offset};
        if (measure_interleaved(a, b, MEASURE_WARMUP, runs, pass_arm, &step, pass_arm, &pass)) break;
        MeasureRatio r = measure_ratio(stats_of(b, runs), stats_of(a, runs));
        MeasureVerdict v = measure_verdict(a, runs, b, runs);
        same += v == MEASURE_SAME || v == MEASURE_FASTER;
        too_few |= v == MEASURE_TOO_FEW;
        if (v == MEASURE_SLOWER && !first_slower) first_slower = K;
        if (K == K_MAX) r_max = r.x;
        char k[16], st[64], pa[64], ratio[32];
        snprintf(k, sizeof k, "%d", K);
        measure_spread_text(st, sizeof st, stats_of(a, runs));
        measure_spread_text(pa, sizeof pa, stats_of(b, runs));
        measure_ratio_beside(ratio, sizeof ratio, r, measure_verdict_mirror(v));   // r: pass over step
        const char *cells[] = {k, st, pa, ratio, trace_text(tr, measure_verdict_word(v, 0), measure_verdict_word(v, 1))};
        trace_table_row(tr, &t, cells);
    }
    free(a);
    trace_count(tr, "slower_from_k", too_few ? -1 : first_slower, NULL, NULL);   // 0: never; -1: too few runs
    trace_value(tr, "pass_steps_k8", r_max, "steps", NULL, NULL);
    if (too_few)
        trace_say(tr, "One run each: too few to say whether the pass costs more than a step.",
                  "每组只运行了一次：太少，无法判断这次前向是否比一步更花时间。");
    else
        say_pass_verdict(tr, same, first_slower ? first_slower : 1, r_max);
    return 0;
}

static int why(Shared *x, Trace *tr, const SpecStats *per_k) {
    trace_heading(tr, "4. Why it works: the weights read once for K + 1 rows",
                  "4. 为什么有效：K + 1 行只读一遍权重");
    int off = x->n_prompt + x->steps / 2;   // a position halfway through the text
    GptCost one = gpt_cost(x->m.cfg, 1, off), draft = gpt_cost(x->d.cfg, 1, off);
    double plain_bytes = one.weight_bytes + one.cache_bytes, plain_flops = one.matmul_flops + one.attention_flops;
    trace_sayf(tr,
               "A cached step of the target at position %d reads %.1f MB (weights and cache) for %.1f MFLOP:\n"
               "about %.1f FLOP a byte, so it waits on memory (lesson 4). A pass of K + 1 rows reads the same\n"
               "weights once and does K + 1 times the FLOPs. Per token made (measured tokens a round, the\n"
               "draft's K steps included):",
               "目标模型在位置 %d 的一个缓存步读取 %.1f MB（权重和缓存），计算 %.1f MFLOP：\n"
               "每字节约 %.1f FLOP，所以它在等内存（第 4 课）。K + 1 行的一次前向把同样的权重只读一遍，\n"
               "FLOPs 是 K + 1 倍。按每个产生的 token 计（每轮 token 数为实测，含草稿模型的 K 步）：",
               off, plain_bytes / 1e6, plain_flops / 1e6, plain_flops / plain_bytes);
    static const TraceColumn cols[] = {
        {"K", "K", 2, 1, NULL},
        {"MB read per token", "每 token 读取 MB", 18, 1, "mb_per_token"},
        {"x alone", "相对单独", 8, 1, "bytes_ratio"},
        {"MFLOP per token", "每 token MFLOP", 16, 1, "mflop_per_token"},
        {"x alone", "相对单独", 8, 1, "flops_ratio"},
    };
    TraceTable t = {"per_token", 5, cols};
    trace_table_head(tr, &t);
    for (int K = 1; K <= K_MAX; K++) {
        GptCost v = gpt_cost(x->m.cfg, K + 1, off);
        double tpr = per_k[K].rounds ? (double)per_k[K].tokens / per_k[K].rounds : 1.0;
        double bytes = (v.weight_bytes + v.cache_bytes + K * (draft.weight_bytes + draft.cache_bytes)) / tpr;
        double flops = (v.matmul_flops + v.attention_flops + K * (draft.matmul_flops + draft.attention_flops)) / tpr;
        char k[16], mb[16], br[16], mf[16], fr[16];
        snprintf(k, sizeof k, "%d", K);
        snprintf(mb, sizeof mb, "%.2f", bytes / 1e6);
        snprintf(br, sizeof br, "%.2f", bytes / plain_bytes);
        snprintf(mf, sizeof mf, "%.2f", flops / 1e6);
        snprintf(fr, sizeof fr, "%.2f", flops / plain_flops);
        const char *cells[] = {k, mb, br, mf, fr};
        trace_table_row(tr, &t, cells);
    }
    int T = x->m.cfg.T, at = off < T - K_MAX - 1 ? off : T - K_MAX - 1;
    if (at >= 1 && pass_times(x, tr, at)) return 1;
    trace_say(tr,
              "Fewer bytes per token, more FLOPs (the rejected rows are computed for nothing): a good trade\n"
              "while a step waits on memory. The draft must also be cheap (small c) and often right (large α).",
              "每个 token 读取的字节更少，FLOPs 更多（被拒绝的行白算了）：当一步在等内存时这很划算。\n"
              "草稿模型还必须便宜（c 小）并且经常猜对（α 大）。");
    trace_pause(tr);
    return 0;
}

// ----------------------------------------------------------------------------

static int setup(Shared *x, const Options *opt) {
    int random_model, rc = gptsetup_lesson(&x->m, &random_model, &x->prompt, &x->n_prompt, opt, NULL);
    if (rc) return rc;
    int T = x->m.cfg.T;
    x->steps = opt->steps > 0 ? opt->steps : DEFAULT_STEPS;
    if (x->steps > T - x->n_prompt) {
        fileio_error(opt->lang, "lesson 13 takes --steps 1 to %d (the prompt and the text within the context of %d); "
                     "kvdemo generate --draft FILE writes longer texts",
                     "第 13 课的 --steps 取 1 到 %d（提示词和文字都在 %d 的上下文之内）；更长的文字请用 "
                     "kvdemo generate --draft FILE",
                     T - x->n_prompt, T);
        return 2;
    }
    x->gamma = speccmd_gamma(opt);
    if ((rc = speccmd_draft(&x->d, &x->m, opt, x->gamma))) return rc;
    x->tokens = malloc(sizeof(int) * (size_t)(x->n_prompt + x->steps + SPEC_GAMMA_MAX + 1));
    int kmax = x->gamma > K_MAX ? x->gamma : K_MAX;
    if (!x->tokens || gpt_state_init(&x->ts, x->m.cfg) || gpt_state_init(&x->ds, x->d.cfg) ||
        sampler_init(&x->greedy, x->m.cfg.V, 0.0f, 0, 42)) {
        fileio_error(opt->lang, "out of memory", "内存不足");
        return 1;
    }
    spec_mt_init(&x->mt, &x->greedy);
    SpecModel tm = {&x->m, &x->ts, NULL}, dm = {&x->d, &x->ds, NULL};
    if (spec_init(&x->sp, tm, dm, kmax, &x->greedy, &x->mt.base) ||
        !(x->ts.pool = pool_new_for(opt->threads, gpt_row_work(x->m.cfg)))) {
        fileio_error(opt->lang, "out of memory", "内存不足");
        return 1;
    }
    x->ds.pool = x->ts.pool;   // the draft on the target's threads; lesson13_run frees them
    return 0;
}

int lesson13_run(const Options *opt, Trace *tr) {
    Shared x = {.opt = opt};
    int rc = setup(&x, opt);
    if (!rc) {
        char buf[4096];
        lessons_heading(tr);
        trace_sayf(tr,
                   "Target: %s (%zu parameters). Draft: %s (%zu parameters, the same %d characters).\n"
                   "Greedy decoding, %d characters after \"%s\".",
                   "目标模型：%s（%zu 个参数）。草稿模型：%s（%zu 个参数，同样的 %d 个字符）。\n"
                   "贪心解码，生成 %d 个字符，提示为 \"%s\"。",
                   gptsetup_model_path(opt, buf, sizeof buf) ? gptsetup_model_path(opt, buf, sizeof buf)
                                                             : trace_text(tr, "a random model", "随机模型"),
                   x.m.num_params, opt->draft_path ? opt->draft_path : SPEC_SHIPPED_DRAFT, x.d.num_params, x.m.cfg.V,
                   x.steps, gptsetup_prompt_text(opt));
        SpecStats per_k[K_MAX + 1] = {{0}};
        if (one_round(&x, tr) || greedy_text(&x, tr) || speedups(&x, tr, per_k)) {
            fileio_error(tr->lang, "out of memory", "内存不足");
            rc = 1;
        } else if (why(&x, tr, per_k)) {
            fileio_error(tr->lang, "out of memory", "内存不足");
            rc = 1;
        }
    }
    spec_free(&x.sp);
    sampler_free(&x.greedy);
    pool_free(x.ts.pool);
    gpt_state_free(&x.ts);
    gpt_state_free(&x.ds);
    free(x.tokens);
    free(x.prompt);
    if (x.d.params) gpt_free(&x.d);
    if (x.m.params) gpt_free(&x.m);
    return rc;
}
