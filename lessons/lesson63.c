// lesson 6.3 — FlashAttention 优化技术 (the KV Cache article, section 6.3)
//
// The article in four sentences, and where the lesson shows each:
//
//   利用 GPU 硬件非均匀的存储器层次结构 ... A100: HBM 40-80GB at 1.5-2.0 TB/s,
//   192KB SRAM per each of 108 SMs at about 19 TB/s
//        -> the memory-traffic table: bytes the standard algorithm and the
//           tiled one move to and from slow memory, and A100 times from them
//   将矩阵计算过程，softmax 函数尽可能在 SRAM 中处理并保留中间结果
//        -> the online softmax: a row's max m and normaliser l kept while the
//           row streams past, and the merge of two partial (m, l)
//   如何有效分割矩阵的计算过程 ... Tiling 算法
//        -> tiled attention (FlashAttention's Algorithm 1 in FlashAttention-2's
//           loop order) traced tile by tile on the 4-dim example with 2 x 2
//           tiles, with the causal mask in tiles; the result equals lesson 2's
//   (measured) one head of d = 64 at N = 1k, 4k (16k with --max-n): plain,
//           which writes the N x N matrix, against tiled: time and peak memory;
//           and flash-decoding: one row's tiles on several threads
//
// Legend: N tokens (queries and keys), d head size, Br query rows of a
// block, Bc keys of a tile, M fast memory (elements).
#include "attention.h"
#include "fileio.h"
#include "flash.h"
#include "flash_svg.h"
#include "gpt.h"
#include "gptsetup.h"
#include "lessons.h"
#include "measure.h"
#include "ops.h"
#include "rng.h"
#include "stats.h"
#include "timer.h"
#include "toy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
    TOKENS = 3,          // 天气真: lesson 2's step 2
    TILE = 2,            // Br = Bc = 2: every tile fits on a screen
    HEAD = 64,           // d of the measured head and of the traffic table
    DEFAULT_MAX_N = 4096,
    DECODE_N = 65536,    // keys of the flash-decoding demonstration
};

// A100, as the article and FlashAttention's section 2.1 give it.
static const double A100_SRAM_BYTES = 192.0 * 1024, A100_HBM_LO = 1.5e12, A100_HBM_HI = 2.0e12;

// ----------------------------------------------------------------------------
// Online softmax on one score row

static void online_softmax(Trace *tr, const ToyData *d, const AttnStep *s) {
    int n = TOKENS;
    const float *x = s->masked + (n - 1) * n;   // the row of 真: three scores, no -inf
    const char *row = d->rows[n - 1];
    trace_heading(tr, "1. The online softmax (Milakov & Gimelshein 2018)", "1. 在线 softmax（online softmax）");
    trace_say(tr,
              "The score row of \"真\" from lesson 2, step 2. The safe softmax reads it three times:\n"
              "pass 1 the max m, pass 2 the sum l of e^(x - m), pass 3 y = e^(x - m) / l.",
              "取第 2 课第 2 步中“真”的一行分数。安全 softmax 要读三遍：\n"
              "第一遍求最大值 m，第二遍求 l = Σ e^(x - m)，第三遍算 y = e^(x - m) / l。");
    float xr[TOKENS], y_safe[TOKENS], y_online[TOKENS];
    memcpy(xr, x, sizeof xr);
    Tensor tx = tensor_view2(xr, 1, n);
    trace_tensor(tr, TRACE_SUMMARY, "x", "x = scores[2]", &tx, &row, HEAT_SCORES);
    int64_t reads_safe = 0, reads_online = 0;
    float m = -INFINITY, l = 0;
    for (int j = 0; j < n; j++, reads_safe++) m = fmaxf(m, x[j]);
    for (int j = 0; j < n; j++, reads_safe++) l += expf(x[j] - m);
    for (int j = 0; j < n; j++, reads_safe++) y_safe[j] = expf(x[j] - m) / l;
    trace_value(tr, "safe_m", m, "", "pass 1: m = max(x)", "第一遍：m = max(x)");
    trace_value(tr, "safe_l", l, "", "pass 2: l = sum(e^(x - m))", "第二遍：l = Σ e^(x - m)");
    Tensor ys = tensor_view2(y_safe, 1, n);
    trace_tensor(tr, TRACE_SUMMARY, "y_safe", trace_text(tr, "pass 3: y = e^(x - m) / l", "第三遍：y = e^(x - m) / l"), &ys, &row,
                 HEAT_PROBS);

    trace_say(tr,
              "\nThe online softmax keeps m and l while the row streams past, one element at a time:\n"
              "m_j = max(m_{j-1}, x_j),  l_j = l_{j-1} e^(m_{j-1} - m_j) + e^(x_j - m_j).",
              "\n在线 softmax 在一遍扫描中同时维护 m 和 l，每次一个元素：\n"
              "m_j = max(m_{j-1}, x_j)，l_j = l_{j-1} e^(m_{j-1} - m_j) + e^(x_j - m_j)。");
    FlashStat st = {-INFINITY, 0};
    for (int j = 0; j < n; j++, reads_online++) {
        flash_online_step(&st, x[j]);
        char nm[16], nl[16];
        snprintf(nm, sizeof nm, "m[%d]", j);
        snprintf(nl, sizeof nl, "l[%d]", j);
        trace_sayf(tr, "  j = %d  x = %8.5f   m = %8.5f   l = %8.5f", "  j = %d  x = %8.5f   m = %8.5f   l = %8.5f", j,
                   x[j], st.m, st.l);
        trace_value(tr, nm, st.m, "", NULL, NULL);
        trace_value(tr, nl, st.l, "", NULL, NULL);
    }
    for (int j = 0; j < n; j++, reads_online++) y_online[j] = expf(x[j] - st.m) / st.l;
    Tensor yo = tensor_view2(y_online, 1, n);
    trace_tensor(tr, TRACE_SUMMARY, "y_online", "y = e^(x - m) / l", &yo, &row, HEAT_PROBS);
    trace_compare(tr, "online_vs_safe", trace_text(tr, "safe softmax (three passes)", "安全 softmax（三遍）"), &ys,
                  trace_text(tr, "online softmax (two passes)", "在线 softmax（两遍）"), &yo);
    trace_count(tr, "reads_safe", reads_safe, "elements read by the safe softmax", "安全 softmax 读取的元素数");
    trace_count(tr, "reads_online", reads_online, "elements read by the online softmax", "在线 softmax 读取的元素数");
    trace_say(tr,
              "(Per element, counting the write of y too: the safe softmax makes 4 memory accesses, the\n"
              "online one 3 — Milakov & Gimelshein's 1.33x.)",
              "（每个元素连同写出 y：安全 softmax 4 次访存，在线 softmax 3 次——即 Milakov 与 Gimelshein 的 1.33 倍。）");

    // The merge: the row cut in two, each part's (m, l) on its own, then merged.
    FlashStat a = {-INFINITY, 0}, b = {-INFINITY, 0};
    for (int j = 0; j < 2; j++) flash_online_step(&a, x[j]);
    for (int j = 2; j < n; j++) flash_online_step(&b, x[j]);
    FlashStat ab = flash_stat_merge(a, b);
    trace_sayf(tr,
               "\nThe merge: cut the row into [x0, x1] and [x2]. Each part alone: (m, l) = (%.5f, %.5f) and\n"
               "(%.5f, %.5f). Merged: m = max(m1, m2) = %.5f, l = l1 e^(m1 - m) + l2 e^(m2 - m) = %.5f,\n"
               "the whole row's (m, l). This merge is what lets tiles, and threads, work apart.",
               "\n合并：把这一行切成 [x0, x1] 和 [x2]，各自求 (m, l)：(%.5f, %.5f) 与 (%.5f, %.5f)。\n"
               "合并后 m = max(m1, m2) = %.5f，l = l1 e^(m1 - m) + l2 e^(m2 - m) = %.5f，\n"
               "正是整行的 (m, l)。分块和多线程都靠这个合并。",
               a.m, a.l, b.m, b.l, ab.m, ab.l);
    trace_value(tr, "merge_m", ab.m, "", NULL, NULL);
    trace_value(tr, "merge_l", ab.l, "", NULL, NULL);
    trace_say(tr, "", "");
    trace_pause(tr);
}

// ----------------------------------------------------------------------------
// Tiled attention on the 4-dim example, traced tile by tile

// The setting: Q, K, V of lesson 2's step 2 cut into tiles, and the update
// of Algorithm 1 in words. s_code gets the tile's score line for the trace.
static void tiled_intro(Trace *tr, const ToyData *d, const AttnStep *s, char *s_code, size_t size) {
    int N = TOKENS, dv = d->dv, dk = d->dk;
    trace_heading(tr, "2. Tiled attention, 2 x 2 tiles (FlashAttention Algorithm 1, FlashAttention-2 loop order)",
                  "2. 分块注意力，2 x 2 的块（FlashAttention 算法 1，FlashAttention-2 的循环顺序）");
    // The words, the scale and the size from the data (a teacher's --data too).
    char words[64], scale_text[32];
    toy_tokens(d, 0, N, words, sizeof words);
    toy_scale(d, scale_text, sizeof scale_text);
    toy_caption(d, "S_ij = Q_i @ K_j.T / %s   (+ mask on the diagonal)", s_code, size);
    trace_sayf(tr,
               "Q, K and V of %s (lesson 2, step 2) are cut into blocks of Br = %d query rows and tiles of\n"
               "Bc = %d keys. For each query block Q_i (outer loop) and each tile K_j, V_j (inner loop):\n"
               "S_ij = Q_i K_j^T / %s, m~ = rowmax(S_ij), P~ = exp(S_ij - m~), l~ = rowsum(P~), then\n"
               "m_new = max(m, m~), l = e^(m - m_new) l + e^(m~ - m_new) l~, O = e^(m - m_new) O + e^(m~ - m_new) P~ V_j.\n"
               "The full %d x %d score matrix is never written: only one tile at a time.",
               "把%s（第 2 课第 2 步）的 Q、K、V 切成 Br = %d 行的查询块和 Bc = %d 个键的块。\n"
               "外层循环查询块 Q_i，内层循环 K_j、V_j：S_ij = Q_i K_j^T / %s，m~ = 行最大值，P~ = exp(S_ij - m~)，\n"
               "l~ = 行和，再更新 m_new = max(m, m~)，l = e^(m - m_new) l + e^(m~ - m_new) l~，\n"
               "O = e^(m - m_new) O + e^(m~ - m_new) P~ V_j。完整的 %d x %d 分数矩阵从不写出，每次只有一块。",
               words, TILE, TILE, scale_text, N, N);
    Tensor tQ = tensor_view2(s->Q, N, dk), tK = tensor_view2(s->K, N, dk), tV = tensor_view2(s->V, N, dv);
    trace_tensor(tr, TRACE_FULL, "Q", "Q = torch.matmul(X, W_Q)", &tQ, d->rows, HEAT_NONE);
    trace_tensor(tr, TRACE_FULL, "K", "K = torch.matmul(X, W_K)", &tK, d->rows, HEAT_NONE);
    trace_tensor(tr, TRACE_FULL, "V", "V = torch.matmul(X, W_V)", &tV, d->rows, HEAT_NONE);
}

// One query block's running state and one tile's pieces, in Algorithm 1's
// names; br query rows, bc keys, dv values wide.
typedef struct {
    float S[TILE * TILE], P[TILE * TILE];   // (br, bc) the tile's scores S_ij and P~_ij
    float Ot[TILE * TOY_MAX_WIDTH];         // (br, dv) P~_ij @ V_j
    float mt[TILE], lt[TILE];               // (br) m~_ij, l~_ij: the tile's rowmax and rowsum
    float m[TILE], l[TILE];                 // (br) m_i, l_i: the block's so far
    float On[TILE * TOY_MAX_WIDTH];         // (br, dv) O_i / l_i: the output so far
} Tiles;

// Tile (i0, j0): each query row of the block against keys j0..j0+bc-1
// (masked past the row), merged into m, l and O (N, dv); Kt is K^T (dk, N).
static void tile_update(Tiles *t, float *O, const ToyData *d, const AttnStep *s, const float *Kt, int i0, int br,
                        int j0, int bc) {
    int N = TOKENS, dv = d->dv, dk = d->dk;
    float scale = 1.0f / d->scale;   // scores = Q K^T / d->scale
    for (int r = 0; r < br; r++) {
        int row = i0 + r, valid = row - j0 + 1 < bc ? row - j0 + 1 : bc;
        FlashStat part = flash_tile(t->S + r * bc, t->P + r * bc, t->Ot + r * dv, s->Q + row * dk, Kt + j0, N,
                                    s->V + j0 * dv, dv, bc, valid < 0 ? 0 : valid, dk, scale);
        t->mt[r] = part.m, t->lt[r] = part.l;
        FlashStat st = {t->m[r], t->l[r]};
        flash_merge(&st, O + row * dv, part, t->Ot + r * dv, dv);
        t->m[r] = st.m, t->l[r] = st.l;
        for (int k = 0; k < dv; k++) t->On[r * dv + k] = O[row * dv + k] / t->l[r];
    }
}

// What tile (i0, j0) computed, each with its line of Algorithm 1.
static void tile_show(Trace *tr, Tiles *t, float *O, const ToyData *d, const char *s_code, int i0, int br, int bc) {
    int dv = d->dv;
    const char *const *rows = d->rows + i0;
    Tensor tS = tensor_view2(t->S, br, bc), tP = tensor_view2(t->P, br, bc);
    Tensor tmt = tensor_view2(t->mt, br, 1), tlt = tensor_view2(t->lt, br, 1);
    Tensor tm = tensor_view2(t->m, br, 1), tl = tensor_view2(t->l, br, 1);
    Tensor tO = tensor_view2(O + i0 * dv, br, dv), tOn = tensor_view2(t->On, br, dv);
    trace_tensor(tr, TRACE_FULL, "S_ij", s_code, &tS, rows, HEAT_SCORES);
    trace_tensor(tr, TRACE_FULL, "m~", "m~_ij = rowmax(S_ij)", &tmt, rows, HEAT_NONE);
    trace_tensor(tr, TRACE_FULL, "P~", "P~_ij = exp(S_ij - m~_ij)", &tP, rows, HEAT_PROBS);
    trace_tensor(tr, TRACE_FULL, "l~", "l~_ij = rowsum(P~_ij)", &tlt, rows, HEAT_NONE);
    trace_tensor(tr, TRACE_SUMMARY, "m", "m_i = max(m_i, m~_ij)", &tm, rows, HEAT_NONE);
    trace_tensor(tr, TRACE_SUMMARY, "l", "l_i = e^(m_i - m_new) l_i + e^(m~_ij - m_new) l~_ij", &tl, rows, HEAT_NONE);
    trace_tensor(tr, TRACE_FULL, "O~", "O_i = e^(m_i - m_new) O_i + e^(m~_ij - m_new) P~_ij @ V_j", &tO, rows, HEAT_NONE);
    trace_tensor(tr, TRACE_SUMMARY, "O", "O_i / l_i   (Algorithm 1, line 12: O so far)", &tOn, rows, HEAT_NONE);
    trace_say(tr, "", "");
    trace_pause(tr);
}

// Tiled against plain attention: the same in exact arithmetic (FlashAttention,
// Theorem 1: the algorithm returns O = softmax(Q K^T) V exactly); in float32
// the sums and the exponentials run in another order, so the bits may part.
enum { OUT_APART = 0, OUT_EQUAL = 1, OUT_OVERFLOW = -1 };

// Says why two ways of attention's bits differ: in full the first time
// (*said), then in a line.
static void rounding_note(Trace *tr, int identical, int *said) {
    if (identical) return;
    if (*said) {
        trace_say(tr, "(Rounding again, as part 2 says.)", "（同样是舍入，见第 2 部分。）");
        return;
    }
    *said = 1;
    trace_say(tr,
              "The bits differ by rounding: the tiled loop adds the terms in another order, and takes each\n"
              "exponential against its tile's max, rescaling when a later tile raises it. In exact arithmetic\n"
              "the two are equal: FlashAttention returns exactly softmax(Q K^T / scale) V (its Theorem 1).",
              "各位的差异来自舍入：分块循环按另一种顺序求和，并以块内的最大值求指数，后面的块把最大值抬高时再缩放。\n"
              "在精确算术下两者相等：FlashAttention 的输出恰好是 softmax(Q K^T / scale) V（其定理 1）。");
}

static int all_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static double max_abs(const float *x, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

// The first of Q, K, V, the scores, plain attention's output and the tiled
// O that holds an inf or a NaN, its name in what (en, zh); 0 when all are finite.
static int overflowed(const char *what[2], const AttnStep *s, const float *O, int dk, int dv) {
    int N = TOKENS;
    const struct {
        const float *x;
        int64_t n;
        const char *en, *zh;
    } parts[] = {
        {s->Q, (int64_t)N * dk, "Q = X @ W_Q", "Q = X @ W_Q"},
        {s->K, (int64_t)N * dk, "K = X @ W_K", "K = X @ W_K"},
        {s->V, (int64_t)N * dv, "V = X @ W_V", "V = X @ W_V"},
        {s->scores, (int64_t)N * N, "the scores Q @ K.T / scale", "分数 Q @ K.T / scale"},
        {s->output, (int64_t)N * dv, "plain attention's output", "普通注意力的输出"},
        {O, (int64_t)N * dv, "the tiled loop's sum O (divided by l only at the end)", "分块循环的累加和 O（最后才除以 l）"},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (!all_finite(parts[i].x, parts[i].n)) {
            what[0] = parts[i].en, what[1] = parts[i].zh;
            return 1;
        }
    return 0;
}

// The tiled output O (N, dv) against lesson 2's and against the kernel the
// char GPT and the measurements use (flash_tiled_head on Kt, K transposed),
// with the tiles counted. The output is a weighted mean of V's rows, so its
// rounding grows with them: the bound is 1e-6 of the largest |V|. Returns
// OUT_EQUAL within it, OUT_APART past it, OUT_OVERFLOW (said, with what
// overflowed in what, en and zh) when float32 cannot hold the numbers.
static int tiled_result(Trace *tr, const ToyData *d, const AttnStep *s, float *O, const float *Kt, int computed,
                        int skipped, int masked, int *said, const char *what[2]) {
    int N = TOKENS, dv = d->dv, dk = d->dk;
    float scale = 1.0f / d->scale;
    float Ok[TOKENS * TOY_MAX_WIDTH];
    Tensor tOut = tensor_view2(O, N, dv), plain = tensor_view2(s->output, N, dv);
    trace_tensor(tr, TRACE_SUMMARY, "output",
                 trace_text(tr, "O = diag(l)^-1 O   (once, at the end: FlashAttention-2)",
                            "O = diag(l)^-1 O   （只在最后做一次：FlashAttention-2）"),
                 &tOut, d->rows, HEAT_NONE);
    trace_count(tr, "tiles_computed", computed, "tiles computed", "计算的块数");
    trace_count(tr, "tiles_skipped", skipped, "tiles skipped (above the diagonal)", "跳过的块数（对角线之上）");
    trace_count(tr, "tiles_masked", masked, "tiles masked (on the diagonal)", "加掩码的块数（对角线上）");
    int identical = trace_compare(tr, "output_vs_plain",
                                  trace_text(tr, "lesson 2's output (plain attention)", "第 2 课的输出（普通注意力）"), &plain,
                                  trace_text(tr, "tiled output", "分块的输出"), &tOut);
    double diff = ops_max_abs_diff(s->output, O, (int64_t)N * dv);
    int over = overflowed(what, s, O, dk, dv);
    if (!over) rounding_note(tr, identical, said);
    // The same through the kernel the char GPT and the measurements use.
    float scratch[TILE + TOY_MAX_WIDTH + 2 * TILE];
    FlashCounts c;
    flash_tiled_head(Ok, scratch, &c, s->Q, Kt, s->V, N, dk, scale, 1, TILE, TILE);
    Tensor tk = tensor_view2(Ok, N, dv);
    trace_compare(tr, "trace_vs_kernel", trace_text(tr, "the trace above", "上面逐块的计算"), &tOut, "flash_tiled_head", &tk);
    if (over) {
        trace_sayf(tr, "Not compared: %s overflows float32 on these numbers%.0s\n(inf or NaN: a float32 holds at most 3.4e38).",
                   "未比较：在这些数上%.0s%s超出了 float32 的范围（inf 或 NaN：float32 最大约 3.4e38）。", what[0], what[1]);
        trace_say(tr, "", "");
        return OUT_OVERFLOW;
    }
    double bound = 1e-6 * max_abs(s->V, (int64_t)N * dv);
    trace_value(tr, "output_bound", bound, "", NULL, NULL);
    if (diff <= bound)
        trace_sayf(tr, "Within 1e-6 x max|V| = %.3g of lesson 2 (the output is a weighted mean of V's rows): yes.",
                   "与第 2 课的差在 1e-6 x max|V| = %.3g 以内（输出是 V 各行的加权平均）：是。", bound);
    else
        trace_sayf(tr, "Within 1e-6 x max|V| = %.3g of lesson 2 (the output is a weighted mean of V's rows): NO.",
                   "与第 2 课的差在 1e-6 x max|V| = %.3g 以内（输出是 V 各行的加权平均）：否。", bound);
    trace_say(tr, "", "");
    return diff <= bound ? OUT_EQUAL : OUT_APART;
}

// The tiles in FlashAttention-2's order: query blocks outside, key tiles
// inside, those above the diagonal skipped. Returns what tiled_result does.
static int tiled_trace(Trace *tr, const ToyData *d, const AttnStep *s, int *said, const char *what[2]) {
    int N = TOKENS, dv = d->dv;
    float Kt[TOY_MAX_WIDTH * TOKENS], O[TOKENS * TOY_MAX_WIDTH];   // K^T (dk, N), O (N, dv)
    char s_code[96];
    Tiles t;
    ops_transpose(Kt, s->K, N, d->dk);
    tiled_intro(tr, d, s, s_code, sizeof s_code);
    int tile = 0, skipped = 0, masked = 0, computed = 0;
    for (int i0 = 0, bi = 1; i0 < N; i0 += TILE, bi++) {
        int br = N - i0 < TILE ? N - i0 : TILE;
        for (int r = 0; r < br; r++) t.m[r] = -INFINITY, t.l[r] = 0;
        memset(O + i0 * dv, 0, sizeof(float) * (size_t)(br * dv));
        for (int j0 = 0, bj = 1; j0 < N; j0 += TILE, bj++) {
            int bc = N - j0 < TILE ? N - j0 : TILE;
            trace_step(tr, ++tile);
            if (j0 > i0 + br - 1) {
                skipped++;
                trace_sayf(tr, "tile (%d, %d): keys %d..%d are all after queries %d..%d: above the diagonal, skipped.\n",
                           "块 (%d, %d)：键 %d..%d 都在查询 %d..%d 之后，整块在对角线之上，跳过。\n", bi, bj, j0,
                           j0 + bc - 1, i0, i0 + br - 1);
                continue;
            }
            computed++;
            int diag = j0 + bc - 1 > i0;
            masked += diag;
            trace_sayf(tr, "tile (%d, %d): queries %d..%d against keys %d..%d%s", "块 (%d, %d)：查询 %d..%d 对键 %d..%d%s",
                       bi, bj, i0, i0 + br - 1, j0, j0 + bc - 1,
                       trace_text(tr, diag ? " — on the diagonal: masked" : "", diag ? "——对角线上的块：加掩码" : ""));
            tile_update(&t, O, d, s, Kt, i0, br, j0, bc);
            if (tr->doc == FORMAT_HTML) {   // the page draws where the tile is, and m and l so far
                Buf pic;
                buf_init(&pic);
                flash_svg(&pic, N, TILE, i0, j0, d->rows, t.m, t.l, br);
                char *svg = buf_take(&pic);
                if (svg) trace_svg(tr, svg);
                free(svg);
            }
            tile_show(tr, &t, O, d, s_code, i0, br, bc);
        }
        for (int r = 0; r < br; r++)
            for (int k = 0; k < dv; k++) O[(i0 + r) * dv + k] /= t.l[r];
    }
    trace_step(tr, 0);
    return tiled_result(tr, d, s, O, Kt, computed, skipped, masked, said, what);
}

// ----------------------------------------------------------------------------
// The memory traffic: counted

// The key tiles Bc of the table, and its columns: the elements moved by each
// algorithm, in MB.
enum { NB = 5 };
static const int BC[NB] = {16, 32, 48, 64, 192};
static const TraceColumn TRAFFIC_COLS[] = {
    {"N", "N", 5, 1, NULL},
    {"standard", "标准", 11, 1, NULL},
    {"Bc=16", "Bc=16", 11, 1, NULL},
    {"Bc=32", "Bc=32", 11, 1, NULL},
    {"Bc=48", "Bc=48", 11, 1, NULL},
    {"Bc=64", "Bc=64", 11, 1, NULL},
    {"Bc=192", "Bc=192", 11, 1, NULL},
    {"FA2 Br=64", "FA2 Br=64", 11, 1, NULL},
    {"  (MB moved)", "  （搬运的 MB）", 0, 0, "unit"},   // a head only: the cells are empty
};
static const TraceTable TRAFFIC = {"traffic_mb", sizeof TRAFFIC_COLS / sizeof TRAFFIC_COLS[0], TRAFFIC_COLS};
// N, standard, one column a Bc of BC, FA2, the unit
_Static_assert(sizeof TRAFFIC_COLS / sizeof TRAFFIC_COLS[0] == 2 + NB + 2, "a traffic column per Bc of BC");

static void traffic_table(Trace *tr) {
    int Br, Bc;
    flash_block_sizes((int64_t)(A100_SRAM_BYTES / 4), HEAD, &Br, &Bc);
    trace_heading(tr, "3. Memory traffic: what moves between slow and fast memory",
                  "3. 访存量：慢速显存（HBM）与快速 SRAM 之间搬运的数据");
    trace_sayf(tr,
               "One head, d = %d, float32, counted in elements (x 4 bytes). Standard attention (Algorithm 0)\n"
               "writes S and P to slow memory and reads them back: 4 N^2 + 4 N d (Theorem 2: Theta(N d + N^2)).\n"
               "Tiled (Algorithm 1) reads K, V once and, for each of the ceil(N / Bc) key tiles, every Q_i, O_i,\n"
               "l_i, m_i and writes O_i, l_i, m_i: 2 N d + ceil(N / Bc)(3 N d + 4 N) — Theta(N^2 d^2 / M) with\n"
               "Bc = M / 4d. A100's 192 KB of SRAM holds M = %d floats: Bc = ceil(M / 4d) = %d,\n"
               "Br = min(Bc, d) = %d.\n"
               "FlashAttention-2's order (query blocks outside) reads K, V once per query block:\n"
               "2 N d + N + ceil(N / Br) 2 N d.\n",
               "一个头，d = %d，float32，按元素计数（乘 4 为字节）。标准注意力（算法 0）把 S、P 写到慢速显存再读回：\n"
               "4 N^2 + 4 N d（定理 2：Θ(N d + N^2)）。分块（算法 1）K、V 只读一次；对 ceil(N / Bc) 个键块中的每一块，\n"
               "读一遍全部 Q_i、O_i、l_i、m_i 并写回 O_i、l_i、m_i：2 N d + ceil(N / Bc)(3 N d + 4 N)——Bc = M / 4d 时为 Θ(N^2 d^2 / M)。\n"
               "A100 的 192 KB SRAM 可放 M = %d 个 float：Bc = ceil(M / 4d) = %d，Br = min(Bc, d) = %d。\n"
               "FlashAttention-2 的顺序（外层循环查询块）每个查询块读一遍 K、V：2 N d + N + ceil(N / Br) 2 N d。\n",
               HEAD, (int)(A100_SRAM_BYTES / 4), Bc, Br);
    trace_table_head(tr, &TRAFFIC);
    for (int64_t N = 256; N <= 16384; N *= 2) {
        double std = flash_traffic_standard(N, HEAD);
        double fa1[NB];
        for (int b = 0; b < NB; b++) fa1[b] = flash_traffic_fa1(N, HEAD, BC[b]);
        double fa2 = flash_traffic_fa2(N, HEAD, Br);
        // The cells in MB; in text a tiled cell ends in "!" (more than the
        // standard algorithm) or a space, so that the numbers line up.
        int text = tr->format != FORMAT_JSON;
        char cell[2 + NB + 1][24];
        snprintf(cell[0], sizeof cell[0], "%lld", (long long)N);
        snprintf(cell[1], sizeof cell[1], "%.2f", std * 4e-6);
        for (int b = 0; b < NB; b++)
            snprintf(cell[2 + b], sizeof cell[2 + b], "%.2f%s", fa1[b] * 4e-6, !text ? "" : fa1[b] > std ? "!" : " ");
        snprintf(cell[2 + NB], sizeof cell[2 + NB], "%.2f%s", fa2 * 4e-6, text ? " " : "");
        const char *row[2 + NB + 2];
        for (int c = 0; c < 2 + NB + 1; c++) row[c] = cell[c];
        row[2 + NB + 1] = "";   // the unit column's head only
        trace_table_row(tr, &TRAFFIC, row);
        char name[48];
        snprintf(name, sizeof name, "standard_N%lld", (long long)N);
        trace_count(tr, name, (int64_t)std, NULL, NULL);
        for (int b = 0; b < NB; b++) {
            snprintf(name, sizeof name, "fa1_bc%d_N%lld", BC[b], (long long)N);
            trace_count(tr, name, (int64_t)fa1[b], NULL, NULL);
        }
        snprintf(name, sizeof name, "fa2_br%d_N%lld", Br, (long long)N);
        trace_count(tr, name, (int64_t)fa2, NULL, NULL);
    }
    trace_count(tr, "a100_Bc", Bc, NULL, NULL);
    trace_count(tr, "a100_Br", Br, NULL, NULL);
    trace_say(tr,
              "(! = more bytes than the standard algorithm.) For large N the ratio standard / tiled is about\n"
              "4 Bc / 3d: tiles smaller than 3d/4 = 48 keys move MORE bytes than not tiling at all. The saving\n"
              "comes from tiles sized to the fast memory — Theorem 2's M.",
              "（! 表示比标准算法搬运得更多。）N 很大时，标准 / 分块 ≈ 4 Bc / 3d：小于 3d/4 = 48 个键的块\n"
              "反而比不分块搬运得更多。节省来自按快速内存大小切块——即定理 2 中的 M。");
    double s16 = flash_traffic_standard(16384, HEAD) * 4, t16 = flash_traffic_fa1(16384, HEAD, Bc) * 4;
    trace_sayf(tr,
               "\nA100 at N = 16384, one head: standard %.2f GB -> %.2f-%.2f ms at 2.0-1.5 TB/s of HBM;\n"
               "tiled with Bc = %d: %.2f GB -> %.2f-%.2f ms. (Bytes / bandwidth only: a lower bound that ignores\n"
               "the arithmetic and the 19 TB/s SRAM traffic.)\n",
               "\nA100，N = 16384，一个头：标准算法 %.2f GB，按 HBM 2.0-1.5 TB/s 需 %.2f-%.2f ms；\n"
               "分块 Bc = %d：%.2f GB，需 %.2f-%.2f ms。（只算字节 / 带宽：忽略计算和 19 TB/s 的 SRAM 访问，是下限。）\n",
               s16 * 1e-9, s16 / A100_HBM_HI * 1e3, s16 / A100_HBM_LO * 1e3, Bc, t16 * 1e-9, t16 / A100_HBM_HI * 1e3,
               t16 / A100_HBM_LO * 1e3);
    trace_value(tr, "a100_ms_standard_16k", s16 / A100_HBM_HI * 1e3, "ms", NULL, NULL);
    trace_value(tr, "a100_ms_tiled_16k", t16 / A100_HBM_HI * 1e3, "ms", NULL, NULL);
    trace_pause(tr);
}

// ----------------------------------------------------------------------------
// Measured: one head, plain against tiled, each in a child process so that
// its peak memory is its own

// Q, K^T, V (N, d) of uniform numbers in (-1, 1) from a fixed seed.
static void fill_random(float *x, int64_t n, uint64_t *state) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)(rng_uniform(state) * 2.0 - 1.0);
}

typedef struct {
    double seconds;   // the median of the runs
    double lo, hi;    // the fastest and the slowest run
    double peak_mib;  // the child's peak resident memory above what it started with, MiB
    double checksum;  // sum of O, to see both computed the same thing
} Measured;

static long max_rss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

// In the child: allocate, fill, time one run. Returns 0, or -1 (no memory).
static int measure_here(Measured *out, int tiled, int N, int d, int Bc, int repeat) {
    long base = max_rss_kb();
    size_t nd = (size_t)N * d;
    float *Q = malloc(sizeof(float) * nd), *Kt = malloc(sizeof(float) * nd), *V = malloc(sizeof(float) * nd);
    float *O = malloc(sizeof(float) * nd);
    float *work = tiled ? malloc(sizeof(float) * (size_t)flash_scratch_floats(HEAD, Bc, d))
                        : malloc(sizeof(float) * (size_t)N * (size_t)N);   // P (N, N)
    int rc = -1;
    if (Q && Kt && V && O && work) {
        uint64_t seed = 42;
        fill_random(Q, (int64_t)nd, &seed);
        fill_random(Kt, (int64_t)nd, &seed);
        fill_random(V, (int64_t)nd, &seed);
        float scale = 1.0f / sqrtf((float)d);
        double *samples = malloc(sizeof(double) * (size_t)repeat);
        // a warm-up run first, not counted: its page faults would be the
        // slowest run's time
        if (tiled) flash_tiled_head(O, work, NULL, Q, Kt, V, N, d, scale, 0, HEAD, Bc);
        else flash_plain_head(O, work, Q, Kt, V, N, d, scale, 0);
        for (int r = 0; samples && r < repeat; r++) {
            double t0 = timer_now();
            if (tiled) flash_tiled_head(O, work, NULL, Q, Kt, V, N, d, scale, 0, HEAD, Bc);
            else flash_plain_head(O, work, Q, Kt, V, N, d, scale, 0);
            samples[r] = timer_now() - t0;
        }
        if (samples) {
            Stats st = stats_of(samples, repeat);
            out->seconds = st.median;
            out->lo = st.min;
            out->hi = st.max;
            out->peak_mib = (double)(max_rss_kb() - base) / 1024.0;   // ru_maxrss is in KiB
            double sum = 0;
            for (size_t i = 0; i < nd; i++) sum += O[i];
            out->checksum = sum;
            rc = 0;
        }
        free(samples);
    }
    free(Q), free(Kt), free(V), free(O), free(work);
    return rc;
}

#ifdef KVDEMO_COVERAGE
// make coverage: the child ends with _exit, which writes no gcov counts;
// libgcov's __gcov_dump writes them first (the Makefile defines this).
void __gcov_dump(void);
#define COVERAGE_DUMP() __gcov_dump()
#else
#define COVERAGE_DUMP() ((void)0)
#endif

// Runs measure_here in a child process; returns 0, or -1.
static int measure_apart(Measured *out, int tiled, int N, int d, int Bc, int repeat) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]), close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        Measured m;
        int ok = measure_here(&m, tiled, N, d, Bc, repeat) == 0 && write(fd[1], &m, sizeof m) == (ssize_t)sizeof m;
        COVERAGE_DUMP();
        _exit(ok ? 0 : 1);
    }
    close(fd[1]);
    ssize_t got = read(fd[0], out, sizeof *out);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return got == (ssize_t)sizeof *out && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static const TraceColumn MEASURED_COLS[] = {
    {"N", "N", 5, 1, NULL},
    {"plain", "普通", 26, 1, NULL},
    {"tiled", "分块", 26, 1, NULL},
    {"plain peak MiB", "普通峰值 MiB", 15, 1, NULL},
    {"tiled peak MiB", "分块峰值 MiB", 15, 1, NULL},
};
static const TraceTable MEASURED = {"measured", sizeof MEASURED_COLS / sizeof MEASURED_COLS[0], MEASURED_COLS};

// What part 4's times support, from the ranges of the runs at each N: the
// memory is what the CPU shows; which way is faster, only when the ranges
// say so.
static void measured_verdict(Trace *tr, int faster, int slower, int same, int repeat) {
    trace_say(tr,
              "\nWhat the CPU shows: the memory, plain growing as N^2 and tiled as N. What only a GPU shows: the\n"
              "speed-up. A CPU has no 19 TB/s SRAM beside slow memory, its caches already keep a row of scores\n"
              "close, and the tiled loop here is not vectorised as a GPU kernel is.",
              "\nCPU 上看得到的：内存——普通注意力按 N^2 增长，分块按 N。只有 GPU 上才看得到的：加速。CPU 没有紧挨着\n"
              "慢速内存的 19 TB/s SRAM，它的缓存本来就能留住一行分数，这里的分块循环也不像 GPU 内核那样充分并行。");
    if (repeat < 2) {
        trace_say(tr,
                  "The times above are one run each (the default here): too few to say which way is faster; with\n"
                  "--repeat 5 the lesson compares the ranges of the runs.",
                  "上面的耗时每种只运行一次（这里的默认）：不足以判断哪种更快；加 --repeat 5 时，本课会比较各次运行的范围。");
        return;
    }
    trace_count(tr, "tiled_faster_at", faster, NULL, NULL);
    trace_count(tr, "tiled_slower_at", slower, NULL, NULL);
    trace_count(tr, "tiled_same_at", same, NULL, NULL);
    trace_sayf(tr,
               "Over %d runs each, tiled was faster at %d of the sizes, slower at %d, and the same within noise\n"
               "(the runs' ranges overlapping) at %d.",
               "每种运行 %d 次：分块在 %d 个规模上更快，%d 个更慢，%d 个在噪声范围内相同（各次运行的范围重叠）。",
               repeat, faster, slower, same);
}

static int measured(Trace *tr, const Options *opt) {
    int max_n = opt->max_n ? opt->max_n : DEFAULT_MAX_N, Bc = opt->tile ? opt->tile : FLASH_DEFAULT_TILE;
    int repeat = opt->repeat ? opt->repeat : 1;
    trace_heading(tr, "4. Measured on this machine: one head, d = 64, no mask",
                  "4. 本机实测：一个头，d = 64，不加掩码");
    trace_sayf(tr,
               "Here the CPU's caches play SRAM and its DRAM plays HBM. Plain attention writes the N x N matrix\n"
               "(N^2 x 4 bytes: 1 GiB at N = 16384); tiled keeps one row of %d scores per query. Each runs in its\n"
               "own process; peak memory is that process's growth in resident memory (MiB: 2^20 bytes). Q, K, V:\n"
               "fixed random numbers.\n",
               "这里 CPU 的缓存扮演 SRAM，内存扮演 HBM。普通注意力写出 N x N 矩阵（N^2 x 4 字节：N = 16384 时 1 GiB）；\n"
               "分块每个查询只保留 %d 个分数。各自在单独的进程中运行；峰值内存是该进程常驻内存的增长（MiB：2^20 字节）。\n"
               "Q、K、V 为固定的随机数。\n",
               Bc);
    trace_table_head(tr, &MEASURED);
    int rc = 0, faster = 0, slower = 0, same = 0;   // tiled against plain, by N
    for (int N = 1024; N <= max_n; N *= 4) {
        Measured mp, mt;
        if (measure_apart(&mp, 0, N, HEAD, Bc, repeat) || measure_apart(&mt, 1, N, HEAD, Bc, repeat)) {
            fileio_error(tr->lang, "lesson 6.3: the measurement at N = %d failed (out of memory, or no process could be started)",
                         "第 6.3 课：N = %d 的测量失败（内存不足，或无法启动进程）", N);
            rc = 1;
            break;
        }
        char name[32];
        if (tr->format == FORMAT_JSON) {   // the text shows them in the table
            snprintf(name, sizeof name, "plain_N%d", N);
            trace_timing(tr, name, mp.seconds, repeat);
            snprintf(name, sizeof name, "tiled_N%d", N);
            trace_timing(tr, name, mt.seconds, repeat);
        }
        snprintf(name, sizeof name, "plain_peak_mib_N%d", N);
        trace_value(tr, name, mp.peak_mib, "MiB", NULL, NULL);
        snprintf(name, sizeof name, "tiled_peak_mib_N%d", N);
        trace_value(tr, name, mt.peak_mib, "MiB", NULL, NULL);
        // the runs' ranges, [fastest, slowest], apart or not (each way runs in
        // its own process, so the two cannot take turns: ranges are all)
        faster += mt.hi < mp.lo, slower += mt.lo > mp.hi, same += !(mt.hi < mp.lo) && !(mt.lo > mp.hi);
        snprintf(name, sizeof name, "checksum_diff_N%d", N);
        trace_value(tr, name, fabs(mp.checksum - mt.checksum), "", NULL, NULL);
        char cell[5][48];
        snprintf(cell[0], sizeof cell[0], "%d", N);
        // median (fastest … slowest), as measure.h prints a time
        if (tr->format == FORMAT_JSON) {   // the numbers; the timing events carry the runs
            snprintf(cell[1], sizeof cell[1], "%.4f", mp.seconds);
            snprintf(cell[2], sizeof cell[2], "%.4f", mt.seconds);
        } else {
            measure_spread_text(cell[1], sizeof cell[1], (Stats){.n = repeat, .median = mp.seconds, .min = mp.lo, .max = mp.hi});
            measure_spread_text(cell[2], sizeof cell[2], (Stats){.n = repeat, .median = mt.seconds, .min = mt.lo, .max = mt.hi});
        }
        snprintf(cell[3], sizeof cell[3], "%.1f", mp.peak_mib);
        snprintf(cell[4], sizeof cell[4], "%.1f", mt.peak_mib);
        trace_table_row(tr, &MEASURED, (const char *const[]){cell[0], cell[1], cell[2], cell[3], cell[4]});
    }
    if (max_n < 16384)
        trace_say(tr, "(N = 16384 takes --max-n 16384: 1 GiB for plain attention, and a minute or so.)",
                  "（N = 16384 需加 --max-n 16384：普通注意力要 1 GiB 内存，约需一分钟。）");
    if (!rc) measured_verdict(tr, faster, slower, same, repeat);
    trace_pause(tr);
    return rc;
}

// ----------------------------------------------------------------------------
// Flash-decoding: one query row against a long cache, its tiles on threads

// One query row q (d) against n keys and values, kt = K^T (d, n) and v (n, d),
// timed over the first len of them: out1 and outp (d) the outputs of the two
// ways, scratch flash_decode's, row and dec (repeat) the times of the runs;
// pool the threads of flash-decoding (--threads; 0: one a core).
typedef struct {
    float *kt, *v, *scratch;
    double *row, *dec;
    float q[HEAD], out1[HEAD], outp[HEAD];
    int n, Bc, repeat, len;
    Pool *pool;
} Decode;

// One thread, tile after tile (flash_row). A MeasureRun.
static int row_run(void *ctx, double *seconds) {
    Decode *x = ctx;
    double t0 = timer_now();
    flash_row(x->out1, x->scratch, x->q, x->kt, x->n, x->v, HEAD, x->len, HEAD, 1.0f / sqrtf((float)HEAD), x->Bc);
    *seconds = timer_now() - t0;
    return 0;
}

// The tiles on x->pool's threads, merged after (flash_decode). A MeasureRun.
static int decode_run(void *ctx, double *seconds) {
    Decode *x = ctx;
    double t0 = timer_now();
    flash_decode(x->outp, x->scratch, x->q, x->kt, x->n, x->v, HEAD, x->pool, x->len, HEAD, 1.0f / sqrtf((float)HEAD),
                 x->Bc);
    *seconds = timer_now() - t0;
    return 0;
}

// The first len keys both ways, taking turns (measure.h; neither run fails).
static void decode_times(Decode *x, int len) {
    x->len = len;
    measure_interleaved(x->row, x->dec, MEASURE_WARMUP, x->repeat, row_run, x, decode_run, x);
}

// The times of one cache length, and flash-decoding against the row: text
// in words, JSON as trace_timing_stats and a comparison event.
// measure_compare_text in both languages, as trace_text gives a text.
static const char *compare_text(const Trace *tr, char *en, char *zh, size_t size, MeasureRatio r, MeasureVerdict v) {
    return trace_text(tr, measure_compare_text(en, size, r, v, 0), measure_compare_text(zh, size, r, v, 1));
}

static MeasureVerdict decode_report(Trace *tr, const Decode *x, int len, int threads) {
    char name[48], row[96], dec[96], cmp[96], cmp_zh[96];
    Stats sr = stats_of(x->row, x->repeat), sd = stats_of(x->dec, x->repeat);
    MeasureVerdict v = measure_verdict(x->row, x->repeat, x->dec, x->repeat);
    MeasureRatio r = measure_ratio(sr, sd);
    if (tr->format == FORMAT_JSON) {
        snprintf(name, sizeof name, "row_1_thread_N%d", len);
        trace_timing_stats(tr, name, x->row, x->repeat);
        snprintf(name, sizeof name, "flash_decoding_N%d", len);
        trace_timing_stats(tr, name, x->dec, x->repeat);
        snprintf(name, sizeof name, "flash_decoding_vs_row_N%d", len);
        trace_comparison_of(tr, name, r, v, NULL, NULL);
        return v;
    }
    trace_sayf(tr, "  %6d keys   one thread, tile after tile   %s\n"
                   "               flash-decoding, %d threads     %s\n"
                   "               flash-decoding: %s\n",
               "  %6d 个键   单线程逐块                 %s\n"
               "                flash-decoding，%d 个线程   %s\n"
               "                flash-decoding：%s\n", len,
               measure_spread_text(row, sizeof row, sr), threads, measure_spread_text(dec, sizeof dec, sd),
               compare_text(tr, cmp, cmp_zh, sizeof cmp, r, v));
    return v;
}

// What the long cache's verdict supports, and what a GPU shows.
static void decode_conclusion(Trace *tr, MeasureVerdict v, int n, int threads) {
    double mib = 2.0 * n * HEAD * sizeof(float) / 1048576.0;
    if (v == MEASURE_FASTER)
        trace_sayf(tr, "On the long cache flash-decoding was faster here: its %d threads shared the %.0f MiB of keys\n"
                       "and values of one row.",
                   "这里在长缓存上 flash-decoding 更快：%d 个线程分担了一行要读的 %.0f MiB 的 key 和 value。", threads, mib);
    else
        trace_sayf(tr, "On the long cache flash-decoding was %s here: one row against %.0f MiB of keys and\n"
                       "values is bound by memory bandwidth, and a second core on the same memory adds little of it.",
                   "这里在长缓存上，与单线程逐块相比 flash-decoding %s：一行查询对 %.0f MiB 的 key 和 value，受限于内存带宽，\n"
                   "同一内存上再加一个核几乎不增加带宽。",
                   trace_text(tr, measure_verdict_word(v, 0), measure_verdict_word(v, 1)), mib);
    trace_say(tr,
              "On a GPU, with thousands of threads and one row per head idle without it, it pays: at batch 1 and a\n"
              "64K context its authors measured attention fall from 2300.6 µs (FlashAttention-2) to 64.4 µs, 35.7x\n"
              "(\"Flash-Decoding for long-context inference\", Dao, Haziza, Massa, Sizov, 2023). On a short cache\n"
              "there is little to share: the hand-over to the threads and the merge are a large part of the time.\n",
              "在 GPU 上，成千上万个线程本来只有每个头一行可算，它就划算了：批大小 1、上下文 64K 时，作者测得注意力从\n"
              "2300.6 µs（FlashAttention-2）降到 64.4 µs，快 35.7 倍（Flash-Decoding 的作者博文，2023）。\n"
              "缓存很短时可分的很少：线程交接与合并占了大部分时间。\n");
}

static int flash_decoding(Trace *tr, const Options *opt) {
    Decode x = {.n = DECODE_N, .Bc = opt->tile ? opt->tile : FLASH_DEFAULT_TILE,
                .repeat = opt->repeat ? opt->repeat : MEASURE_RUNS};
    int d = HEAD;
    size_t nd = (size_t)x.n * d;
    x.kt = malloc(sizeof(float) * nd), x.v = malloc(sizeof(float) * nd);
    x.scratch = malloc(sizeof(float) * (size_t)(flash_decode_floats(x.n, d, x.Bc) + x.Bc + d));
    x.row = malloc(sizeof(double) * (size_t)x.repeat), x.dec = malloc(sizeof(double) * (size_t)x.repeat);
    if (!x.kt || !x.v || !x.scratch || !x.row || !x.dec) {
        free(x.kt), free(x.v), free(x.scratch), free(x.row), free(x.dec);
        fileio_error(tr->lang, "out of memory", "内存不足");
        return 1;
    }
    // The kernel alone, no model's shape to size it: --threads, 0 one a core.
    if (!(x.pool = pool_new(opt->threads))) {
        free(x.kt), free(x.v), free(x.scratch), free(x.row), free(x.dec);
        fileio_error(tr->lang, "could not start %d threads", "无法启动 %d 个线程", ops_threads_asked(opt->threads));
        return 1;
    }
    uint64_t seed = 7;
    fill_random(x.kt, (int64_t)nd, &seed);
    fill_random(x.v, (int64_t)nd, &seed);
    fill_random(x.q, d, &seed);
    trace_heading(tr, "5. Flash-decoding: a cached step's one row, its tiles on several threads",
                  "5. Flash-decoding：缓存步只有一行查询，把它的块分给多个线程");
    trace_sayf(tr,
               "A cached step has one query row. Tiled attention parallelises over rows (and heads), so one row\n"
               "of one head runs on one thread. Flash-decoding splits the cached keys (up to %d) into tiles of %d,\n"
               "computes each tile's (m, l, O) on whichever thread is free, and merges them in tile order with\n"
               "the rule of section 1: the result is the same bits on any number of threads. The two ways take\n"
               "turns, %d runs each after a warm-up.",
               "缓存步只有一行查询。分块注意力按行（和头）并行，于是一个头的一行只能在一个线程上算。Flash-decoding\n"
               "把缓存中的键（最多 %d 个）切成每块 %d 个，各块的 (m, l, O) 由空闲线程计算，再按块的顺序用第 1 节的规则合并：\n"
               "无论多少线程，结果逐位相同。两种方式先热身，再轮流各运行 %d 次。",
               x.n, x.Bc, x.repeat);
    trace_machine(tr, measure_machine());
    int rc = 0;
    MeasureVerdict long_cache = MEASURE_TOO_FEW;
    static const int SIZES[] = {256, DECODE_N};   // a short cache and a long one
    for (int z = 0; !rc && z < 2; z++) {
        int len = SIZES[z];
        decode_times(&x, len);
        int threads = pool_threads(x.pool);
        char name[48];
        Tensor ta = tensor_view2(x.out1, 1, d), tb = tensor_view2(x.outp, 1, d);
        snprintf(name, sizeof name, "decode_vs_row_N%d", len);
        trace_compare(tr, name, trace_text(tr, "one thread, tile after tile", "单线程逐块"), &ta, "flash-decoding", &tb);
        long_cache = decode_report(tr, &x, len, threads);
        if (z == 1) decode_conclusion(tr, long_cache, len, threads);
    }
    free(x.kt), free(x.v), free(x.scratch), free(x.row), free(x.dec);
    pool_free(x.pool);
    return rc;
}

// ----------------------------------------------------------------------------
// The char GPT's cached step at the context length: plain against flash

// The char GPT's cached step at position T-1 (the cache holds T-1
// positions), with the attention plain or in tiles; its logits in logits (V).
typedef struct {
    GptState *s;
    const GptModel *m;
    const int *tokens;
    float *logits;
    int tiled, tile;
} GptStep1;

// One such step. A MeasureRun: the switch of attention is not timed.
static int gpt_step_run(void *ctx, double *seconds) {
    GptStep1 *x = ctx;
    GptConfig g = x->m->cfg;
    if (kvcontig_set_tile(&x->s->cache, x->tiled ? x->tile : 0)) return 1;
    double t0 = timer_now();
    const float *out = gpt_forward(x->s, x->m, x->tokens + g.T - 1, 1, g.T - 1);
    *seconds = timer_now() - t0;
    memcpy(x->logits, out, sizeof(float) * (size_t)g.V);
    return 0;
}

// The two ways' times (plain in t[0 .. repeat), flash after), and what they
// support about flash-decoding in this step.
static void gpt_step_report(Trace *tr, const double *t, int repeat) {
    MeasureVerdict v = measure_verdict(t, repeat, t + repeat, repeat);
    MeasureRatio r = measure_ratio(stats_of(t, repeat), stats_of(t + repeat, repeat));
    if (tr->format == FORMAT_JSON) {
        trace_timing_stats(tr, "gpt_step_plain", t, repeat);
        trace_timing_stats(tr, "gpt_step_flash", t + repeat, repeat);
        trace_comparison_of(tr, "gpt_step_flash_vs_plain", r, v, NULL, NULL);
        return;
    }
    char a[96], b[96], c[96], c_zh[96];
    trace_sayf(tr, "  the cached step, plain   %s\n                   flash   %s\n  flash: %s",
               "  这一缓存步，普通   %s\n              flash   %s\n  flash：%s", measure_spread_text(a, sizeof a, stats_of(t, repeat)),
               measure_spread_text(b, sizeof b, stats_of(t + repeat, repeat)),
               compare_text(tr, c, c_zh, sizeof c, r, v));
    trace_say(tr,
              v == MEASURE_SAME || v == MEASURE_TOO_FEW
                  ? "The attention is a small part of this step (most of it reads the weights), and six heads already\n"
                    "share out over a few threads: here the two times do not tell apart.\n"
                  : "The attention is a small part of this step (most of it reads the weights), and six heads already\n"
                    "share out over a few threads; what separates the two times here is mostly the tiles' extra merge\n"
                    "and the machine's noise — run it again to see whether it holds.\n",
              v == MEASURE_SAME || v == MEASURE_TOO_FEW
                  ? "注意力只占这一步的一小部分（大部分时间在读权重），而且 6 个头已足以分给几个线程：这里两种耗时分不出高下。\n"
                  : "注意力只占这一步的一小部分（大部分时间在读权重），而且 6 个头已足以分给几个线程；这里两种耗时的差别\n"
                    "主要来自分块多出的合并和机器的噪声——再运行一次，看它是否还成立。\n");
}

static int gpt_step(Trace *tr, const Options *opt, int *said) {
    GptModel m;
    int random_model = 0;
    int rc = gptsetup_model(&m, opt, 1, &random_model);
    if (rc) return rc;
    GptConfig g = m.cfg;
    int repeat = opt->repeat ? opt->repeat : 5, tile = opt->tile ? opt->tile : FLASH_DEFAULT_TILE;
    int *tokens = malloc(sizeof(int) * (size_t)g.T);
    float *lp = malloc(sizeof(float) * (size_t)g.V), *lf = malloc(sizeof(float) * (size_t)g.V);
    double *samples = malloc(sizeof(double) * 2 * (size_t)repeat);   // plain, then flash
    GptState s = {0};
    if (!tokens || !lp || !lf || !samples || gpt_state_init(&s, g) || !(s.pool = pool_new_for(opt->threads, gpt_row_work(g)))) {
        fileio_error(tr->lang, "out of memory", "内存不足");
        rc = 1;
        goto done;
    }
    if (random_model)
        fileio_error(tr->lang, "%s is missing; lesson 6.3 times a random model of the seed preset",
                     "找不到 %s；第 6.3 课改为给 seed 形状的随机模型计时", GPT_SHIPPED_MODEL);
    for (int i = 0; i < g.T; i++) tokens[i] = (i * 7 + 1) % g.V;
    trace_heading(tr, "6. The char GPT (lesson 10): a cached step at the context length",
                  "6. 字符级 GPT（第 10 课）：上下文长度处的一个缓存步");
    gpt_state_reset(&s);
    gpt_forward(&s, &m, tokens, g.T - 1, 0);   // the cache of T - 1 positions, then the step, both ways in turns
    GptStep1 plain = {&s, &m, tokens, lp, 0, tile}, flash = {&s, &m, tokens, lf, 1, tile};
    if (measure_interleaved(samples, samples + repeat, MEASURE_WARMUP, repeat, gpt_step_run, &plain, gpt_step_run,
                            &flash)) {
        fileio_error(tr->lang, "out of memory", "内存不足");
        rc = 1;
        goto done;
    }
    kvcontig_set_tile(&s.cache, 0);
    trace_sayf(tr,
               "The token at position %d reads %d cached positions in each of %d heads and %d blocks, on %d thread%s.\n"
               "Plain: each head's row on one thread. Flash (tiles of %d): the heads' tiles shared out (flash-decoding).",
               "位置 %d 的 token 要读 %d 个缓存位置（%d 个头、%d 个模块各一份），%d 个线程%.0s。\n"
               "普通：每个头的一行在一个线程上算。Flash（每块 %d）：各头的块分给各线程（flash-decoding）。",
               g.T - 1, g.T, g.H, g.L, pool_threads(s.pool), pool_threads(s.pool) == 1 ? "" : "s", tile);
    trace_machine(tr, measure_machine());
    gpt_step_report(tr, samples, repeat);
    Tensor a = tensor_view2(lp, 1, g.V), b = tensor_view2(lf, 1, g.V);
    int same = trace_compare(tr, "gpt_step_logits", trace_text(tr, "logits, plain attention", "logits，普通注意力"), &a,
                             trace_text(tr, "flash attention", "flash 注意力"), &b);
    rounding_note(tr, same, said);
done:
    pool_free(s.pool);
    gpt_state_free(&s);
    gpt_free(&m);
    free(tokens), free(lp), free(lf), free(samples);
    return rc;
}

// ----------------------------------------------------------------------------
// The lesson

int lesson63_run(const Options *opt, Trace *tr) {
    ToyData d;
    AttnStep s;
    if (toy_begin(&d, &s, 1, TOKENS, opt, tr->lesson, TOKENS)) return 1;
    if (d.dk != d.dv || d.dk > TOY_MAX_WIDTH) {
        fileio_error(tr->lang, "lesson 6.3 needs Q, K and V of one width (W_Q, W_K, W_V with as many columns)",
                     "第 6.3 课要求 Q、K、V 一样宽（W_Q、W_K、W_V 列数相同）");
        toy_end(&d, &s, 1);
        return 1;
    }
    lessons_heading(tr);
    trace_say(tr,
              "The article: an A100 has 40-80 GB of HBM at 1.5-2.0 TB/s and 192 KB of SRAM for every 108\n"
              "streaming multiprocessors at about 19 TB/s; the FlashAttention paper (section 2.1) says 192 KB\n"
              "on each of its 108 streaming multiprocessors. FlashAttention keeps the matrix products and the\n"
              "softmax in SRAM, tile by tile, and writes only the result back to HBM.\n",
              "原文：“A100 GPU有40-80GB的高带宽内存(HBM)，带宽为1.5-2.0 TB/s，而每108个流处理器有192KB的SRAM，\n"
              "带宽估计在19TB/s左右。”FlashAttention 论文（第 2.1 节）的说法是：108 个流处理器每个有 192KB 的 SRAM。\n"
              "原文大意：FlashAttention 把矩阵计算和 softmax 尽量放在 SRAM 中逐块完成，只把结果写回 HBM。\n");
    // Lesson 2's step 2, plain: Q, K, V, the masked scores and the output.
    attention_full(&s, d.X, TOKENS, d.W_Q, d.W_K, d.W_V, d.scale, 1);
    trace_run(tr, "online-softmax");
    online_softmax(tr, &d, &s);
    trace_run(tr, "tiled");
    int said = 0;   // why the bits differ, said once
    const char *what[2] = {NULL, NULL};   // what overflowed, en and zh
    int ok = tiled_trace(tr, &d, &s, &said, what);
    toy_end(&d, &s, 1);
    trace_run(tr, "traffic");
    traffic_table(tr);
    trace_run(tr, "measured");
    int rc = measured(tr, opt);
    trace_run(tr, "flash-decoding");
    if (!rc) rc = flash_decoding(tr, opt);
    trace_run(tr, "gpt");
    if (!rc) rc = gpt_step(tr, opt, &said);
    trace_run(tr, NULL);
    if (ok == OUT_OVERFLOW) {
        fileio_error(tr->lang, "lesson 6.3: %s overflows float32 on these numbers (inf or NaN)%.0s: scale the numbers of "
                     "--data down (a float32 holds at most 3.4e38)",
                     "第 6.3 课：在这些数上%.0s%s超出了 float32 的范围（inf 或 NaN）：请把 --data 中的数缩小（float32 最大约 3.4e38）",
                     what[0], what[1]);
        return 1;
    }
    if (ok == OUT_APART) {
        fileio_error(tr->lang, "lesson 6.3: the tiled output is not within 1e-6 x max|V| of plain attention (a bug in kvdemo)",
                     "第 6.3 课：分块计算的输出与普通注意力相差超过 1e-6 x max|V|（这是 kvdemo 的缺陷）");
        return 1;
    }
    return rc;
}
