// lesson 6.1 — PageAttention 显存优化 (the KV Cache article, section 6.1)
//
// The article, line by line, and where the lesson shows it:
//
//   借助OS系统中虚拟内存和分页的思想，可以实现在不连续的空间存储连续的kv键值
//   序列的连续逻辑块通过 block table 映射到非连续物理块
//        -> (1) one sequence's block table growing step by step (B = 4):
//           logical block -> physical block, filled slots, and the slot of
//           a position: table[p / B] * B + p % B
//   同一个prompt生成多个输出序列，可以共享 ... 实现copy-on-write机制
//        -> (2) parallel sampling: the prompt's blocks shared (reference
//           counts), the copy when a sample writes into a shared block, the
//           blocks saved; and prefix sharing by chained block hashes
//        -> (3) the same logits as the contiguous cache, bit for bit
//   已有的系统中，由于显存碎片和过度预留，浪费了60%-80%的显存
//        -> (4) a workload served under one budget with each reservation
//           policy and with paging: the share of the cache holding tokens
//        -> (5) the price of small blocks: table lookups and time
//
// The model is the char GPT of lesson 10 (the shipped model, or --model,
// or --init random). Legend as in gpt.h and kvpage.h: V vocabulary, T
// context, B block size, N samples, L layers, H heads, D head size.
#include "gptpaged.h"
#include "fileio.h"
#include "gptsetup.h"
#include "kvpage.h"
#include "kvpage_svg.h"
#include "kvsim.h"
#include "lessons.h"
#include "ops.h"
#include "measure.h"
#include "stats.h"
#include "timer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    TABLE_B = 4,          // part 1's block size: small, so that the class sees blocks fill
    TABLE_STEPS = 6,      // tokens generated in part 1
    DEFAULT_B = 4,        // parts 2 and 3 (--block-size)
    DEFAULT_SAMPLES = 3,  // --samples
    DEFAULT_STEPS = 8,    // tokens per sample (--steps)
    MAX_STEPS = 1000,     // enough for a class; part 3 feeds every token once per block size
    // Part 4: the workload
    SIM_REQUESTS = 1000,
    SIM_MAX_LEN = 2048,   // the longest a request may be, as OPT's 2048 in the vLLM paper
    SIM_BUDGET = 16,      // the budget: 16 maximum-length requests' worth of slots
    // Part 5: the timed attention
    BENCH_LEN = 2048, BENCH_H = 6, BENCH_D = 64, BENCH_CALLS = 10,
};
static const double SIM_PROMPT_MEDIAN = 64, SIM_OUTPUT_MEDIAN = 128, SIM_SIGMA = 1.0;
static const int CHECK_B[] = {1, 3, 16, 256};   // part 3, besides --block-size
static const int SIM_B[] = {1, 4, 16, 64, 256};  // part 4
static const int BENCH_B[] = {1, 16, 256};       // part 5
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

// ----------------------------------------------------------------------------
// Showing blocks

// Where the pool's events go: the trace, and for the page's picture of the
// pool (--format html) the block each block was copied from since the last
// picture.
typedef struct {
    Trace *tr;
    int *cow_src;   // (nb) a block's source, or -1; NULL without a page
    int nb;
} Shown;

static void on_block(void *ctx, const KvEvent *e) {
    static const char *const names[] = {"alloc", "fork", "cow", "free", "share"};
    Shown *sh = ctx;
    trace_block(sh->tr, names[e->kind], e->block, e->src, e->ref, e->src_ref);
    if (e->kind == KV_COW && sh->cow_src && e->block < sh->nb) sh->cow_src[e->block] = e->src;
}

// One character of a token for the table ("\n" shown as ⏎).
static const char *token_text(char *buf, size_t size, const GptModel *m, int token) {
    gpt_decode(buf, size, m, &token, 1);
    if (!strcmp(buf, "\n")) snprintf(buf, size, "⏎");
    return buf;
}

// logical i -> physical b  [R O M E]  4/4 for every block of s.
static void show_table(Trace *tr, const KvSeq *s, const GptModel *m) {
    int B = s->pool->B;
    for (int i = 0; i < s->num_blocks; i++) {
        char line[512], t[8];
        int filled = s->len - i * B < B ? s->len - i * B : B;
        int o = (int)strlen(trace_textf(tr, line, sizeof line, "  logical %d -> physical %-3d [", "  逻辑块 %d -> 物理块 %-3d [",
                                        i, s->table[i]));
        for (int j = 0; j < B && o < (int)sizeof line - 16; j++)
            o += snprintf(line + o, sizeof line - (size_t)o, "%s%s", j ? " " : "",
                          j < filled ? token_text(t, sizeof t, m, s->tokens[i * B + j]) : "_");
        trace_textf(tr, line + o, sizeof line - (size_t)o, "]  %d/%d filled, ref %d", "]  已填 %d/%d，引用计数 %d", filled, B,
                    s->pool->ref[s->table[i]]);
        trace_say(tr, line, line);
        char name[32];
        snprintf(name, sizeof name, "block_table[%d]", i);
        trace_count(tr, name, s->table[i], NULL, NULL);
    }
}

// ----------------------------------------------------------------------------
// The arithmetic (nothing printed here)

// logits (len, V): row k predicts token k+1 after tokens 0..k, fed one token
// a step as generation does: token k at position k while k < T, else the
// last T tokens again from position 0 (the cache rebuilt). seq NULL: the
// contiguous cache; else the paged one. Returns 0, or -1 when the pool ran out.
static int feed(float *logits, GptState *s, const GptModel *m, KvSeq *seq, const int *tokens, int len) {
    int T = m->cfg.T, V = m->cfg.V;
    gpt_state_reset(s);
    if (seq) kvseq_truncate(seq, 0);
    for (int k = 0; k < len; k++) {
        int n = k < T ? 1 : T, offset = k < T ? k : 0;
        const int *x = tokens + k + 1 - n;
        const float *out = seq ? gpt_forward_paged(s, m, seq, x, n, offset, NULL) : gpt_forward(s, m, x, n, offset);
        if (!out) return -1;
        memcpy(logits + (size_t)k * V, out, sizeof(float) * (size_t)V);
    }
    return 0;
}

// The contiguous cache's attention of one query row against len positions
// (gpt.c's loop, heads side by side): key (H, D, Tc), value (H, Tc, D).
typedef struct {
    float *att, *scores;
    const float *q, *key, *value;
    int len, Tc, D;
} ContigJob;

static void contig_heads(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const ContigJob *j = ctx;
    float scale = (float)(1.0 / sqrt((double)j->D));
    for (int h = begin; h < end; h++) {
        float *scores = j->scores + (size_t)h * j->Tc;
        ops_vecmat(scores, j->q + h * j->D, j->key + (size_t)h * j->D * j->Tc, j->D, j->len, j->Tc);
        for (int t = 0; t < j->len; t++) scores[t] *= scale;
        ops_softmax_row(scores, NULL, scores, j->len, OPS_RECIPROCAL);
        ops_vecmat(j->att + h * j->D, scores, j->value + (size_t)h * j->Tc * j->D, j->len, j->D, j->D);
    }
}

// ----------------------------------------------------------------------------
// The lesson

typedef struct {
    GptModel m;
    GptState s;
    KvPool pool;
    KvSeq *seqs;
    int nseqs;
    Sampler *samplers;
    int nsamplers;
    int *tokens, *prompt;
    float *logits_a, *logits_b;
    Shown shown;
} Scene;

// The page's picture of the pool now (kvpage_svg.h), with the copies made
// since the last one; nothing without a page.
static void show_pool(Scene *sc) {
    Shown *sh = &sc->shown;
    if (!sh->cow_src) return;
    Buf b;
    buf_init(&b);
    kvpage_svg(&b, &sc->pool, sc->seqs, sc->nseqs, sh->cow_src);
    char *svg = buf_take(&b);
    if (svg) trace_svg(sh->tr, svg);
    free(svg);
    for (int k = 0; k < sh->nb; k++) sh->cow_src[k] = -1;
}

static void scene_seqs_free(Scene *sc) {
    sc->pool.on_event = NULL;   // the blocks freed between parts are not part of the story
    free(sc->shown.cow_src);
    sc->shown.cow_src = NULL;
    for (int i = 0; i < sc->nseqs; i++) kvseq_free(&sc->seqs[i]);
    free(sc->seqs);
    sc->seqs = NULL;
    sc->nseqs = 0;
    kvpool_free(&sc->pool);
}

// A pool of NB blocks of B and n sequences of T positions on it, blocks
// shown through the trace. Returns 0, or -1 when memory ran out.
static int scene_pool(Scene *sc, Trace *tr, int B, int NB, int n, int show) {
    scene_seqs_free(sc);
    GptConfig c = sc->m.cfg;
    if (kvpool_init(&sc->pool, c.L, c.H, c.C / c.H, B, NB)) return -1;
    if (show) {
        sc->shown = (Shown){tr, NULL, NB};
        if (tr->doc == FORMAT_HTML) {
            if (!(sc->shown.cow_src = malloc(sizeof(int) * (size_t)NB))) return -1;
            for (int k = 0; k < NB; k++) sc->shown.cow_src[k] = -1;
        }
        sc->pool.on_event = on_block;
        sc->pool.event_ctx = &sc->shown;
    }
    sc->seqs = calloc((size_t)n, sizeof *sc->seqs);
    if (!sc->seqs) return -1;
    for (int i = 0; i < n; i++) {
        if (kvseq_init(&sc->seqs[i], &sc->pool, c.T)) return -1;
        sc->nseqs++;
    }
    return 0;
}

static void scene_free(Scene *sc) {
    scene_seqs_free(sc);
    for (int i = 0; i < sc->nsamplers; i++) sampler_free(&sc->samplers[i]);
    free(sc->samplers);
    free(sc->tokens);
    free(sc->prompt);
    free(sc->logits_a);
    free(sc->logits_b);
    pool_free(sc->s.pool);
    gpt_state_free(&sc->s);
    gpt_free(&sc->m);
}

static int oom(Lang lang) {
    fileio_error(lang, "lesson 6.1: out of memory", "第 6.1 课：内存不足");
    return 1;
}

// The model (or a random one, said), the prompt's tokens, the samplers of
// the N samples and the buffers for steps tokens a sample. Returns 0, or
// the lesson's status (sc freed).
static int scene_init(Scene *sc, int *n_prompt, const Options *opt, int N, int steps) {
    int random_model = 0;
    int rc = gptsetup_lesson(&sc->m, &random_model, &sc->prompt, n_prompt, opt, NULL);
    if (rc) return rc;
    if (random_model)
        fileio_error(opt->lang, "lesson 6.1: %s is missing; using a random model of the seed preset (its text is noise)",
                     "第 6.1 课：找不到 %s；改用 seed 形状的随机模型（生成的文字没有意义）", GPT_SHIPPED_MODEL);
    int V = sc->m.cfg.V, stride = *n_prompt + steps;
    int rows = stride > *n_prompt + TABLE_STEPS ? stride : *n_prompt + TABLE_STEPS;
    sc->tokens = malloc(sizeof(int) * (size_t)N * rows);
    sc->samplers = calloc((size_t)N, sizeof *sc->samplers);
    sc->logits_a = malloc(sizeof(float) * (size_t)stride * V);
    sc->logits_b = malloc(sizeof(float) * (size_t)stride * V);
    if (!sc->tokens || !sc->samplers || !sc->logits_a || !sc->logits_b || gpt_state_init(&sc->s, sc->m.cfg)) {
        scene_free(sc);
        return oom(opt->lang);
    }
    float temperature = opt->temperature >= 0 ? (float)opt->temperature : 1.0f;
    for (int i = 0; i < N; i++) {
        if (sampler_init(&sc->samplers[i], V, temperature, opt->top_k, (uint32_t)(opt->seed + (uint64_t)i))) {
            scene_free(sc);
            return oom(opt->lang);
        }
        sc->nsamplers++;
    }
    return 0;
}

// (1) The block table growing, one step at a time.
static int part_table(Scene *sc, Trace *tr, const Options *opt, int n_prompt) {
    const GptModel *m = &sc->m;
    int T = m->cfg.T, NB = (T + TABLE_B - 1) / TABLE_B + 4;
    if (scene_pool(sc, tr, TABLE_B, NB, 1, 1)) return oom(opt->lang);
    kvpool_shuffle(&sc->pool, (uint32_t)opt->seed);
    trace_heading(tr, "(1) The block table: logical blocks mapped to scattered physical blocks",
                  "（1）block table：序列的连续逻辑块映射到非连续物理块");
    trace_sayf(tr,
               "A pool of %d physical blocks of B = %d positions, each holding the keys and values of all "
               "%d layers, taken from a free list (shuffled, as on a busy server). The sequence sees its "
               "positions in order; the block table says where they live: position p is in slot "
               "table[p / B] * B + p %% B of the pool.",
               "一个由 %d 个物理块组成的池，每块 B = %d 个位置，存放全部 %d 层的 key 和 value，从空闲链表"
               "中取用（已打乱，就像繁忙的服务器上那样）。序列按顺序看到自己的位置；block table 记录它们"
               "存放在哪里：位置 p 在池中的槽位 table[p / B] * B + p %% B。",
               NB, TABLE_B, m->cfg.L);
    trace_count(tr, "block_size", TABLE_B, NULL, NULL);
    trace_count(tr, "pool_blocks", NB, NULL, NULL);
    int len = n_prompt < T ? n_prompt : T;
    int *tok = sc->tokens;   // (n_prompt + TABLE_STEPS)
    memcpy(tok, sc->prompt, sizeof(int) * (size_t)n_prompt);
    Sampler *sp = &sc->samplers[0];
    mt19937_seed(&sp->rng, (uint32_t)opt->seed);
    trace_run(tr, "table");
    for (int step = 0; step <= TABLE_STEPS && n_prompt + step <= T; step++) {
        trace_step(tr, step + 1);
        int total = n_prompt + step;
        const float *logits;
        if (step == 0) {
            trace_sayf(tr, "Step %d: the prompt, %d tokens at positions 0..%d:", "第 %d 步：提示词，%d 个 token，位置 0..%d：",
                       step + 1, len, len - 1);
            logits = gpt_forward_paged(&sc->s, m, &sc->seqs[0], tok + total - len, len, 0, NULL);
        } else {
            char t[8];
            trace_sayf(tr, "Step %d: \"%s\" at position %d:", "第 %d 步：\"%s\"，位置 %d：", step + 1,
                       token_text(t, sizeof t, m, tok[total - 1]), total - 1);
            logits = gpt_forward_paged(&sc->s, m, &sc->seqs[0], tok + total - 1, 1, total - 1, NULL);
        }
        if (!logits) return oom(opt->lang);
        show_table(tr, &sc->seqs[0], m);
        show_pool(sc);
        int p = sc->seqs[0].len - 1, slot = kvseq_slot(&sc->seqs[0], p);
        trace_sayf(tr, "  position %d: slot = table[%d / %d] * %d + %d %% %d = %d * %d + %d = %d\n",
                   "  位置 %d：槽位 = table[%d / %d] * %d + %d %% %d = %d * %d + %d = %d\n", p, p, TABLE_B, TABLE_B, p,
                   TABLE_B, sc->seqs[0].table[p / TABLE_B], TABLE_B, p % TABLE_B, slot);
        trace_count(tr, "position", p, NULL, NULL);
        trace_count(tr, "slot", slot, NULL, NULL);
        if (step < TABLE_STEPS) tok[total] = sampler_sample(sp, logits);
    }
    trace_step(tr, 0);
    trace_run(tr, NULL);
    trace_say(tr,
              "A new block is taken only when the last one is full: a sequence wastes at most B - 1 slots, "
              "in its last block.",
              "只有最后一块写满时才取新块：一个序列最多浪费 B - 1 个槽位，都在它的最后一块里。");
    trace_pause(tr);
    return 0;
}

// (2) The prompt computed once, into sample 0's blocks; then fork gives
// samples 1..N-1 the same blocks (the first step of gpt_sample_paged,
// shown). Returns 0, or -1 when the pool ran out.
static int sharing_fork(Scene *sc, Trace *tr, int n_prompt, int N) {
    const GptModel *m = &sc->m;
    int T = m->cfg.T, len = n_prompt < T ? n_prompt : T;
    trace_say(tr, "The prompt into sample 0's blocks:", "提示词写入样本 0 的块：");
    if (!gpt_forward_paged(&sc->s, m, &sc->seqs[0], sc->prompt + n_prompt - len, len, 0, NULL)) return -1;
    trace_say(tr, "fork:", "fork：");
    for (int i = 1; i < N; i++) kvseq_fork(&sc->seqs[i], &sc->seqs[0]);
    trace_say(tr, "Reference counts after the fork:", "fork 之后的引用计数：");
    show_table(tr, &sc->seqs[0], m);
    show_pool(sc);
    trace_pause(tr);
    return 0;
}

// (2) Then as gpt_sample_paged: every sample draws its first token from the
// prompt's logits, and each step feeds every sample its newest token; a
// sample writing into a shared block copies it first. Returns 0, or -1
// when the pool ran out.
static int sharing_generate(Scene *sc, Trace *tr, int n_prompt, int N, int steps) {
    const GptModel *m = &sc->m;
    int T = m->cfg.T, stride = n_prompt + steps;
    trace_run(tr, "sample");
    trace_say(tr, "Generation, sample after sample at each step:", "生成：每一步依次处理各个样本：");
    for (int i = 0; i < N; i++) sc->tokens[(size_t)i * stride + n_prompt] = sampler_sample(&sc->samplers[i], sc->s.logits);
    for (int step = 1; step < steps; step++) {
        int now = n_prompt + step;   // len(tokens) of every sample
        trace_step(tr, step + 1);
        trace_sayf(tr, "  step %d, position %d:", "  第 %d 步，位置 %d：", step + 1, now - 1);
        for (int i = 0; i < N; i++) {
            int *tok = sc->tokens + (size_t)i * stride;
            int n = now <= T ? 1 : T, offset = now <= T ? now - 1 : 0;
            const float *logits = gpt_forward_paged(&sc->s, m, &sc->seqs[i], tok + now - n, n, offset, NULL);
            if (!logits) return -1;
            tok[now] = sampler_sample(&sc->samplers[i], logits);
        }
        show_pool(sc);
    }
    trace_step(tr, 0);
    trace_run(tr, NULL);
    return 0;
}

// (2) Each sample's text and block table, and the blocks saved against a
// pool of NB blocks: the vLLM paper's measure. Returns 0, or -1 when memory
// ran out.
static int sharing_saved(Scene *sc, Trace *tr, int N, int stride, int NB) {
    const GptModel *m = &sc->m;
    int64_t table_blocks = 0;
    for (int i = 0; i < N; i++) {
        char run[32], *text = NULL;
        snprintf(run, sizeof run, "sample-%d", i);
        trace_run(tr, run);
        size_t want = gpt_decode(NULL, 0, m, sc->tokens + (size_t)i * stride, stride);
        if (!(text = malloc(want + 1))) return -1;
        gpt_decode(text, want + 1, m, sc->tokens + (size_t)i * stride, stride);
        trace_sayf(tr, "sample %d:", "样本 %d：", i);
        trace_textval(tr, "text", text);
        free(text);
        show_table(tr, &sc->seqs[i], m);
        table_blocks += sc->seqs[i].num_blocks;
    }
    trace_run(tr, NULL);
    int used = NB - kvpool_num_free(&sc->pool);
    trace_sayf(tr,
               "\nBlocks: %lld in the %d tables, %d physical blocks in use. Blocks saved (vLLM paper, "
               "section 6.3) = (blocks without sharing - physical blocks used) / blocks without sharing "
               "= (%lld - %d) / %lld = %.1f%%. Copies made: %lld.",
               "\n块：共 %lld 块（%d 个块表），实际使用 %d 个物理块。节省的块（vLLM 论文第 6.3 节）= "
               "（不共享时的块数 - 实际使用的物理块数）/ 不共享时的块数 = (%lld - %d) / %lld = %.1f%%。"
               "复制次数：%lld。",
               (long long)table_blocks, N, used, (long long)table_blocks, used, (long long)table_blocks,
               100.0 * (double)(table_blocks - used) / (double)table_blocks, (long long)sc->pool.copies);
    trace_count(tr, "blocks_without_sharing", table_blocks, NULL, NULL);
    trace_count(tr, "blocks_used", used, NULL, NULL);
    trace_value(tr, "blocks_saved", (double)(table_blocks - used) / (double)table_blocks, "fraction", NULL, NULL);
    trace_count(tr, "copies", sc->pool.copies, NULL, NULL);
    trace_pause(tr);
    return 0;
}

// The first of seqs[0 .. n-1] whose table holds every one of blocks (k), or -1.
static int holder_of(const KvSeq *seqs, int n, const int *blocks, int k) {
    for (int j = 0; j < n; j++) {
        int all = 1;
        for (int i = 0; i < k && all; i++) {
            int found = 0;
            for (int t = 0; t < seqs[j].num_blocks && !found; t++) found = seqs[j].table[t] == blocks[i];
            all = found;
        }
        if (all) return j;
    }
    return -1;
}

// Whose blocks request B reused: the lookup takes the first block in the
// pool with each hash, which is a sample's while a sample still holds the
// prefix (request A, computed without a lookup, then holds copies), else
// request A's. Counted as reused_from_sample: the sample, or -1 for A.
static void say_reused(Trace *tr, const Scene *sc, const KvSeq *a, const KvSeq *b, int N, int reused, int computed) {
    int k = b->num_blocks < reused / b->pool->B ? b->num_blocks : reused / b->pool->B;
    char found[128] = "", copies[128] = "";
    for (int i = 0; i < k; i++) {
        size_t at = strlen(found), ac = strlen(copies);
        snprintf(found + at, sizeof found - at, "%s%d", i ? ", " : "", b->table[i]);
        if (i < a->num_blocks) snprintf(copies + ac, sizeof copies - ac, "%s%d", i ? ", " : "", a->table[i]);
    }
    int j = holder_of(sc->seqs, N + 1, b->table, k);   // the samples, then A
    trace_count(tr, "reused_from_sample", j < N ? j : -1, NULL, NULL);
    if (j >= 0 && j < N)
        trace_sayf(tr,
                   "  request B: reused %d positions (%d blocks), computed %d. The blocks found, %s, are sample %d's:\n"
                   "  request A, computed without a lookup, holds copies of them (%s) that B does not use.",
                   "  请求 B：复用 %d 个位置（%d 块），计算 %d 个。找到的块 %s 是样本 %d 的：\n"
                   "  请求 A 没有查找就完整计算，它的块（%s）是这些块的重复，B 没有用到。",
                   reused, k, computed, found, j, copies);
    else
        trace_sayf(tr,
                   "  request B: reused %d positions (%d blocks), computed %d. The blocks found, %s, are %s.",
                   "  请求 B：复用 %d 个位置（%d 块），计算 %d 个。找到的块 %s %s。", reused, k, computed, found,
                   j == N ? trace_text(tr, "request A's", "是请求 A 的") : trace_text(tr, "of several sequences", "分属几个序列"));
}

// Prefix sharing: request A computes the first tokens of sample 0's text
// in full, without a lookup; request B, with the same text, looks its full
// blocks up by hash, and the lesson says whose it found.
static int prefix_sharing(Scene *sc, Trace *tr, int B, int N, int stride) {
    const GptModel *m = &sc->m;
    int T = m->cfg.T;
    trace_heading(tr, "Prefix sharing: full blocks found by a chained hash",
                  "前缀共享：用链式哈希找到完整的块");
    int n = 10 < stride ? 10 : stride;
    if (n > T) n = T;
    const int *text = sc->tokens;
    KvSeq *a = &sc->seqs[N], *b = &sc->seqs[N + 1], *c = &sc->seqs[N + 2];
    trace_sayf(tr,
               "Each full block gets hash(parent block's hash, its %d token ids). Request A computes the "
               "first %d tokens of sample 0 in full, without a lookup. Request B has the same %d tokens: it "
               "looks its full blocks up, block by block, and reuses the first block in the pool with each "
               "hash (reference + 1); its last token is always computed (its logits are needed).",
               "每个写满的块有一个哈希：hash(父块的哈希, 它的 %d 个 token id)。请求 A 不查找，完整计算样本 0 "
               "的前 %d 个 token。请求 B 有同样的 %d 个 token：它逐块查找自己的完整块，复用池中第一个哈希相同的块"
               "（引用计数 + 1）；最后一个 token 总要计算（需要它的 logits）。",
               B, n, n);
    trace_run(tr, "prefix");
    int V = m->cfg.V;
    const float *lg = gpt_forward_paged(&sc->s, m, a, text, n, 0, NULL);
    if (!lg) return oom(tr->lang);
    memcpy(sc->logits_b, lg, sizeof(float) * (size_t)V);
    int reused = kvseq_share_prefix(b, text, n);
    say_reused(tr, sc, a, b, N, reused, n - reused);
    trace_count(tr, "prefix_tokens", n, NULL, NULL);
    trace_count(tr, "reused_positions", reused, NULL, NULL);
    trace_count(tr, "reused_blocks", reused / B, NULL, NULL);
    lg = gpt_forward_paged(&sc->s, m, b, text + reused, n - reused, reused, NULL);
    if (!lg) return oom(tr->lang);
    memcpy(sc->logits_a, lg, sizeof(float) * (size_t)V);
    {
        Tensor x = tensor_view2(sc->logits_a, 1, V), y = tensor_view2(sc->logits_b, 1, V);
        trace_compare(tr, "prefix_logits", trace_text(tr, "request B's logits, prefix reused", "请求 B 复用前缀后的 logits"),
                      &x, trace_text(tr, "request A's, computed in full", "请求 A 完整计算的 logits"), &y);
    }
    // One early token changed: every later block's hash changes.
    int changed[64];
    memcpy(changed, text, sizeof(int) * (size_t)n);
    changed[1] = (changed[1] + 1) % V;
    int reused2 = kvseq_share_prefix(c, changed, n);
    trace_say(tr, "  The chained hashes of both, block by block:", "  两者的链式哈希，逐块：");
    uint64_t ha = 0, hb = 0;
    for (int i = 0; (i + 1) * B <= n; i++) {
        ha = kvpage_hash(ha, text + i * B, B);
        hb = kvpage_hash(hb, changed + i * B, B);
        trace_sayf(tr, "  block %d: %016llx  vs  %016llx  %s", "  块 %d：%016llx  vs  %016llx  %s", i,
                   (unsigned long long)ha, (unsigned long long)hb,
                   ha == hb ? trace_text(tr, "same", "相同") : trace_text(tr, "different", "不同"));
    }
    trace_sayf(tr, "  token 1 changed: reused %d positions; one early token changes every later block's hash.",
               "  改动第 1 个 token：复用 %d 个位置；一个靠前的 token 改变其后每一块的哈希。", reused2);
    trace_count(tr, "reused_positions_changed", reused2, NULL, NULL);
    trace_run(tr, NULL);
    trace_pause(tr);
    return 0;
}

// (2) Parallel sampling with copy-on-write, then prefix sharing by hashes.
static int part_sharing(Scene *sc, Trace *tr, const Options *opt, int n_prompt, int B, int N, int steps) {
    int T = sc->m.cfg.T, stride = n_prompt + steps;
    int longest = stride < T ? stride : T, NB = N * ((longest + B - 1) / B) + 2 * ((10 + B - 1) / B) + 2;
    if (scene_pool(sc, tr, B, NB, N + 3, 1)) return oom(opt->lang);
    trace_heading(tr, "(2) One prompt, several outputs: shared blocks and copy-on-write",
                  "（2）同一个 prompt 生成多个输出序列：共享块与 copy-on-write");
    trace_sayf(tr,
               "%d samples continue the same prompt (%d tokens) with blocks of B = %d. The prompt is "
               "computed once, for sample 0; fork gives samples 1..%d the same blocks (reference count "
               "+ 1, nothing copied). Sample i draws with np.random.seed(%llu + i). When a sample writes "
               "into a block that others share, that block is copied first (copy-on-write), and only that "
               "block.",
               "%d 个样本续写同一个提示词（%d 个 token），块大小 B = %d。提示词只为样本 0 计算一次；fork "
               "让样本 1..%d 共享同样的块（引用计数 + 1，不复制）。样本 i 用 np.random.seed(%llu + i) 采样。"
               "某个样本要写入被共享的块时，先复制这一块（copy-on-write），且只复制这一块。",
               N, n_prompt, B, N - 1, (unsigned long long)opt->seed);
    trace_run(tr, "fork");
    trace_count(tr, "block_size", B, NULL, NULL);
    trace_count(tr, "samples", N, NULL, NULL);
    for (int i = 0; i < N; i++) {
        memcpy(sc->tokens + (size_t)i * stride, sc->prompt, sizeof(int) * (size_t)n_prompt);
        mt19937_seed(&sc->samplers[i].rng, (uint32_t)(opt->seed + (uint64_t)i));
    }
    if (sharing_fork(sc, tr, n_prompt, N) || sharing_generate(sc, tr, n_prompt, N, steps) ||
        sharing_saved(sc, tr, N, stride, NB))
        return oom(opt->lang);
    return prefix_sharing(sc, tr, B, N, stride);
}

// (3) The same logits, paged and contiguous, for several block sizes.
static int part_same(Scene *sc, Trace *tr, int n_prompt, int B, int steps, int *all_identical) {
    const GptModel *m = &sc->m;
    int V = m->cfg.V, len = n_prompt + steps, T = m->cfg.T;
    trace_heading(tr, "(3) The same logits: paged against contiguous, bit for bit",
                  "（3）同样的 logits：分页缓存与连续缓存逐位相同");
    trace_sayf(tr,
               "Sample 0's %d tokens fed one at a time (past %d positions the last %d again from position "
               "0, as generate does), once with the contiguous cache and once per block size with the "
               "paged one. Attention reads keys and values through the block table, block by block, "
               "summing in the same order.",
               "把样本 0 的 %d 个 token 逐个输入（超过 %d 个位置时，像 generate 那样从位置 0 重新输入最后 %d "
               "个），用连续缓存算一次，再用每种块大小的分页缓存各算一次。注意力通过 block table 逐块读取 "
               "key 和 value，求和顺序相同。",
               len, T, T);
    feed(sc->logits_a, &sc->s, m, NULL, sc->tokens, len);
    int sizes[COUNT(CHECK_B) + 1], ns = 0;
    for (int i = 0; i < COUNT(CHECK_B); i++) sizes[ns++] = CHECK_B[i];
    int dup = 0;
    for (int i = 0; i < ns; i++) dup |= sizes[i] == B;
    if (!dup) sizes[ns++] = B;
    *all_identical = 1;
    for (int i = 0; i < ns; i++) {
        int NB = (T + sizes[i] - 1) / sizes[i];
        if (scene_pool(sc, tr, sizes[i], NB, 1, 0)) return oom(tr->lang);
        if (feed(sc->logits_b, &sc->s, m, &sc->seqs[0], sc->tokens, len)) return oom(tr->lang);
        char run[32], bn[64];
        snprintf(run, sizeof run, "B=%d", sizes[i]);
        trace_run(tr, run);
        trace_textf(tr, bn, sizeof bn, "paged, B = %d", "分页，B = %d", sizes[i]);
        Tensor x = tensor_view2(sc->logits_a, len, V), y = tensor_view2(sc->logits_b, len, V);
        *all_identical &= trace_compare(tr, "logits", trace_text(tr, "contiguous cache", "连续缓存"), &x, bn, &y);
    }
    trace_run(tr, NULL);
    trace_pause(tr);
    return 0;
}

// (4)'s table, one row a policy: in text the shares with their sign and the
// requests at once with their peak, in JSON the numbers alone (the peak is
// the run's peak_running).
static const TraceColumn POLICY_COLS[] = {
    {"policy", "策略", 24, 0, "policy"},
    {"tokens %", "token %", 9, 1, "tokens_percent"},
    {"never/empty", "从未用/空", 11, 1, "never_used_percent"},
    {"at once (peak)", "并发（峰值）", 14, 1, "at_once_mean"},
    {"steps", "步数", 7, 1, "steps"},
    {"preempted", "被抢占", 9, 1, "preempted"},
};
static const TraceTable POLICIES = {"policies", COUNT(POLICY_COLS), POLICY_COLS};

// The workload served under each policy, a row each; paged_waste gets the
// never-used share of the block sizes of (5). Returns 0, or 1 when memory
// ran out.
static int policies_table(Trace *tr, const KvRequest *reqs, int64_t S, double *paged_waste) {
    trace_table_head(tr, &POLICIES);
    struct {
        const char *run, *en, *zh;
        KvPolicy policy;
        int B;
    } rows[3 + COUNT(SIM_B)] = {
        {"max", "reserve max length", "按最大长度预留", KVSIM_MAX, 0},
        {"pow2", "reserve power of two", "按 2 的幂预留", KVSIM_POW2, 0},
        {"oracle", "reserve exact (oracle)", "按实际长度预留（预知长度）", KVSIM_ORACLE, 0},
    };
    char names[COUNT(SIM_B)][32];
    for (int i = 0; i < COUNT(SIM_B); i++) {
        snprintf(names[i], sizeof names[i], "paged-%d", SIM_B[i]);
        rows[3 + i].run = names[i];
        rows[3 + i].en = rows[3 + i].zh = names[i];
        rows[3 + i].policy = KVSIM_PAGED;
        rows[3 + i].B = SIM_B[i];
    }
    int text = tr->format != FORMAT_JSON;
    for (int i = 0; i < 3 + COUNT(SIM_B); i++) {
        KvSimResult res;
        if (kvsim_run(&res, reqs, SIM_REQUESTS, rows[i].policy, SIM_MAX_LEN, rows[i].B ? rows[i].B : 1, S)) return 1;
        char cell[5][32];
        snprintf(cell[0], sizeof cell[0], text ? "%.1f%%" : "%.1f", 100 * res.utilisation);
        snprintf(cell[1], sizeof cell[1], text ? "%.1f%%" : "%.1f", 100 * res.never_used);
        if (text)   // the peaks line up on a terminal
            snprintf(cell[2], sizeof cell[2], tr->doc == FORMAT_TEXT ? "%.1f (%3d)" : "%.1f (%d)", res.mean_running,
                     res.peak_running);
        else snprintf(cell[2], sizeof cell[2], "%.1f", res.mean_running);
        snprintf(cell[3], sizeof cell[3], "%lld", (long long)res.steps);
        snprintf(cell[4], sizeof cell[4], "%lld", (long long)res.preempted);
        trace_run(tr, rows[i].run);
        trace_table_row(tr, &POLICIES,
                        (const char *const[]){trace_text(tr, rows[i].en, rows[i].zh), cell[0], cell[1], cell[2], cell[3], cell[4]});
        trace_value(tr, "utilisation", res.utilisation, "fraction", NULL, NULL);
        trace_value(tr, "never_used", res.never_used, "fraction", NULL, NULL);
        trace_value(tr, "mean_running", res.mean_running, "requests", NULL, NULL);
        trace_count(tr, "peak_running", res.peak_running, NULL, NULL);
        trace_count(tr, "steps", res.steps, NULL, NULL);
        trace_count(tr, "preempted", res.preempted, NULL, NULL);
        for (int j = 0; j < COUNT(BENCH_B); j++)
            if (rows[i].policy == KVSIM_PAGED && rows[i].B == BENCH_B[j]) paged_waste[j] = res.never_used;
    }
    return 0;
}

// (4) Waste on a workload.
static int part_waste(Trace *tr, const Options *opt, double *paged_waste) {
    KvRequest *reqs = malloc(sizeof *reqs * SIM_REQUESTS);
    if (!reqs) return oom(opt->lang);
    kvsim_workload(reqs, SIM_REQUESTS, (uint32_t)opt->seed, SIM_PROMPT_MEDIAN, SIM_OUTPUT_MEDIAN, SIM_SIGMA,
                   SIM_MAX_LEN);
    int64_t S = (int64_t)SIM_BUDGET * SIM_MAX_LEN;
    trace_heading(tr, "(4) Waste: reserving per request against paging", "（4）浪费：按请求预留与分页对比");
    int64_t sum_p = 0, sum_o = 0;
    int max_f = 0;
    for (int r = 0; r < SIM_REQUESTS; r++) {
        sum_p += reqs[r].prompt;
        sum_o += reqs[r].output;
        if (reqs[r].prompt + reqs[r].output > max_f) max_f = reqs[r].prompt + reqs[r].output;
    }
    trace_sayf(tr,
               "%d requests (np.random.seed(%llu)); prompt and output lengths log-normal, long-tailed: "
               "round(exp(N(log %g, %g))) and round(exp(N(log %g, %g))), a request at most %d tokens. Mean "
               "prompt %.0f, mean output %.0f, longest request %d. Served first come first served under a "
               "budget of %lld slots (%d maximum-length requests), one token per running request a step. "
               "Each step counts the tokens every running request holds against the slots it reserves.",
               "%d 个请求（np.random.seed(%llu)）；提示词和输出长度服从长尾的对数正态分布："
               "round(exp(N(log %g, %g))) 与 round(exp(N(log %g, %g)))，每个请求最多 %d 个 token。提示词平均 "
               "%.0f，输出平均 %.0f，最长的请求 %d。在 %lld 个槽位（%d 个最长请求）的预算下先来先服务，"
               "每一步每个运行中的请求生成一个 token。每一步统计各请求持有的 token 与预留的槽位。",
               SIM_REQUESTS, (unsigned long long)opt->seed, SIM_PROMPT_MEDIAN, SIM_SIGMA, SIM_OUTPUT_MEDIAN, SIM_SIGMA,
               SIM_MAX_LEN, (double)sum_p / SIM_REQUESTS, (double)sum_o / SIM_REQUESTS, max_f, (long long)S,
               SIM_BUDGET);
    trace_count(tr, "requests", SIM_REQUESTS, NULL, NULL);
    trace_count(tr, "max_len", SIM_MAX_LEN, NULL, NULL);
    trace_count(tr, "budget_slots", S, NULL, NULL);
    if (tr->format == FORMAT_JSON || tr->doc != FORMAT_TEXT) {   // for scripts, and in a document
        float *lengths = malloc(sizeof(float) * 2 * SIM_REQUESTS);
        if (!lengths) {
            free(reqs);
            return oom(opt->lang);
        }
        for (int r = 0; r < SIM_REQUESTS; r++) lengths[2 * r] = (float)reqs[r].prompt, lengths[2 * r + 1] = (float)reqs[r].output;
        Tensor t = tensor_view2(lengths, SIM_REQUESTS, 2);
        trace_tensor(tr, TRACE_NONE, "requests", NULL, &t, NULL, HEAT_NONE);
        free(lengths);
    }
    if (policies_table(tr, reqs, S, paged_waste)) {
        free(reqs);
        return oom(opt->lang);
    }
    trace_run(tr, NULL);
    trace_say(tr,
              "\ntokens %: the share of reserved slots holding real tokens. never/empty names two measures: "
              "for a reservation, the slots reserved beyond the request's final length, which no token "
              "ever fills (the rest of its waste is reserved for tokens still to come); for paging, the "
              "empty slots of the last blocks at each step, which the request's later tokens do fill. "
              "at once: requests served together, mean over the steps (and peak). preempted: requests "
              "stopped to free blocks; each resumes later by recomputing its tokens in one step, as a "
              "prompt is read, and the simulation charges that recomputation nothing more: paging's steps "
              "are a lower bound (vLLM recomputes or swaps the blocks out, section 4.5).\n"
              "The article: existing systems waste 60-80% of the cache memory to fragmentation and "
              "over-reservation (the vLLM blog's rounding; the vLLM paper, section 1, section 3.1 and "
              "Fig. 2: only 20.4-38.2% of it holds token states). vLLM: waste under 4%, only in the last "
              "block. kvdemo's figures above come from its own workload: what carries over is the order "
              "of the policies and why.",
              "\ntoken %：预留槽位中存放真实 token 的比例。从未用/空是两种量：预留时，是超出请求最终长度的"
              "预留槽位，永远不会有 token 填进去（其余的浪费是为尚未生成的 token 预留的）；分页时，是每一步"
              "最后一块的空槽位，请求之后的 token 会填上它们。并发：同时服务的请求数，按步平均（括号中为峰值）。"
              "被抢占：为腾出块而暂停的请求；它之后用一步重新计算已有的 token（像读入提示词一样）再继续，"
              "模拟不为这次重算多计任何代价：分页的步数是下限（vLLM 会重新计算或把块换出，论文第 4.5 节）。\n"
              "文章：已有的系统中，由于显存碎片和过度预留，浪费了60%-80%的显存（vLLM 博客的约数；vLLM "
              "论文第 1 节、第 3.1 节和图 2：只有 20.4%-38.2% 存放 token 状态）。vLLM：浪费不到 4%，只在"
              "最后一块。上面是 kvdemo 自己的工作负载的数字：可以推广的是各策略的排序及其原因。");
    free(reqs);
    trace_pause(tr);
    return 0;
}

// The keys and values k, v (len, C) of (5) in a pool of blocks of B, shuffled
// (seed) so that a sequence's blocks are not in order. Returns 0, or -1 when
// memory ran out (nothing left to free).
static int paged_cache(KvPool *pool, KvSeq *seq, int B, const float *k, const float *v, uint32_t seed) {
    int H = BENCH_H, D = BENCH_D, len = BENCH_LEN;
    if (kvpool_init(pool, 1, H, D, B, (len + B - 1) / B)) return -1;
    if (kvseq_init(seq, pool, len)) {
        kvpool_free(pool);
        return -1;
    }
    kvpool_shuffle(pool, seed);
    int *zeros = calloc((size_t)len, sizeof(int));
    if (!zeros || kvseq_append(seq, zeros, len, NULL)) {
        free(zeros);
        kvseq_free(seq);
        kvpool_free(pool);
        return -1;
    }
    free(zeros);
    kvpage_write(seq, 0, k, v, len, 0);
    return 0;
}

// What (5) times: one query row q (C) against len positions of keys and
// values k, v (len, C), seeded; the same keys and values in the contiguous
// cache's layout key (H, D, len) and value (H, len, D); the two outputs
// att_c, att_p (C); scores (H, len); samples (1 + NB, repeat) the times of
// the runs, the contiguous cache's first, then each block size's; pool the
// threads the heads are shared among (the lesson's).
enum { NB = sizeof BENCH_B / sizeof BENCH_B[0], NARMS = 1 + NB };
typedef struct {
    float *k, *v, *q, *key, *value, *att_c, *att_p, *scores;
    double *samples;
    int repeat;
    Pool *pool;
} Bench;

static void bench_free(Bench *b) {
    free(b->k), free(b->v), free(b->q), free(b->key), free(b->value);
    free(b->att_c), free(b->att_p), free(b->scores), free(b->samples);
}

// Returns 0, or -1 when memory ran out (b freed).
static int bench_init(Bench *b, uint32_t seed, int repeat) {
    int H = BENCH_H, D = BENCH_D, len = BENCH_LEN, C = H * D;
    size_t kv = sizeof(float) * (size_t)C * len;
    *b = (Bench){malloc(kv), malloc(kv), malloc(sizeof(float) * (size_t)C), malloc(kv), malloc(kv),
                 malloc(sizeof(float) * (size_t)C), malloc(sizeof(float) * (size_t)C),
                 malloc(sizeof(float) * (size_t)H * len), malloc(sizeof(double) * NARMS * (size_t)repeat), repeat,
                 NULL};
    if (!b->k || !b->v || !b->q || !b->key || !b->value || !b->att_c || !b->att_p || !b->scores || !b->samples) {
        bench_free(b);
        return -1;
    }
    // Seeded keys, values and query (numpy's normal draws, scaled).
    Mt19937 mt;
    mt19937_seed(&mt, seed);
    for (int64_t i = 0; i < (int64_t)C * len; i++) b->k[i] = (float)(0.5 * mt19937_gauss(&mt));
    for (int64_t i = 0; i < (int64_t)C * len; i++) b->v[i] = (float)(0.5 * mt19937_gauss(&mt));
    for (int i = 0; i < C; i++) b->q[i] = (float)(0.5 * mt19937_gauss(&mt));
    for (int t = 0; t < len; t++)
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d++) {
                b->key[((size_t)h * D + d) * len + t] = b->k[(size_t)t * C + h * D + d];
                b->value[((size_t)h * len + t) * D + d] = b->v[(size_t)t * C + h * D + d];
            }
    return 0;
}

// One way of (5)'s attention, a run of BENCH_CALLS calls (measure_rounds
// calls it): the contiguous cache (paged 0) or a block table; the output in
// att_c or att_p.
typedef struct {
    Bench *b;
    int paged;
    KvPool pool;
    KvSeq seq;
} Way;

static void way_call(Way *w) {
    Bench *b = w->b;
    if (!w->paged) {
        ContigJob cj = {b->att_c, b->scores, b->q, b->key, b->value, BENCH_LEN, BENCH_LEN, BENCH_D};
        pool_run(b->pool, contig_heads, &cj, BENCH_H);
    } else {
        kvpage_attention(&w->seq, b->att_p, b->scores, NULL, b->q, b->pool, 0, 1, BENCH_LEN - 1, BENCH_LEN);
    }
}

// Seconds per query row: the run's time over its calls.
static int way_run(void *ctx, double *seconds) {
    double t0 = timer_now();
    for (int c = 0; c < BENCH_CALLS; c++) way_call(ctx);
    *seconds = (timer_now() - t0) / BENCH_CALLS;
    return 0;
}

// The ways: the contiguous cache, then a block table a block size (the pool
// shuffled by seed). Returns 0, or -1 when memory ran out (those made freed).
static int ways_init(Way *w, Bench *b, uint32_t seed) {
    w[0] = (Way){.b = b};
    for (int i = 0; i < NB; i++) {
        w[1 + i] = (Way){.b = b, .paged = 1};
        if (paged_cache(&w[1 + i].pool, &w[1 + i].seq, BENCH_B[i], b->k, b->v, seed)) {
            for (int j = 1; j <= i; j++) kvseq_free(&w[j].seq), kvpool_free(&w[j].pool);
            return -1;
        }
    }
    return 0;
}

static void ways_free(Way *w) {
    for (int i = 1; i < NARMS; i++) kvseq_free(&w[i].seq), kvpool_free(&w[i].pool);
}

// (5)'s table, one row a block size after the contiguous cache's: in text
// the median with min … max (and "!" when its runs disagree), the ratio as
// x ± e and the waste with its sign; in JSON the numbers alone, the time in
// seconds.
static const TraceColumn BLOCK_COLS[] = {
    {"B", "B", 10, 0, "B"},
    {"lookups/head", "每头查表", 12, 1, "lookups_per_head"},
    {"time", "耗时", 28, 1, "seconds"},
    {"vs contiguous", "相对连续缓存", 14, 1, "time_ratio"},
    {"waste (4)", "浪费（4）", 9, 1, "waste_percent"},
};
static const TraceTable BLOCK_SIZES = {"block_sizes", COUNT(BLOCK_COLS), BLOCK_COLS};

// One row: B (or the contiguous cache's name), the lookups per head (0:
// "-"), the runs' times, their ratio to the contiguous cache's (NULL: "1";
// its ± only where it says what v, paged against contiguous, says) and the
// waste (negative: none shown).
static void block_row(Trace *tr, const char *B, int lookups, const double *samples, int n, const MeasureRatio *r,
                      MeasureVerdict v, double waste) {
    int text = tr->format != FORMAT_JSON;
    char cell[4][104] = {"-", "", "", ""};
    Stats st = stats_of(samples, n);
    if (lookups > 0) snprintf(cell[0], sizeof cell[0], "%d", lookups);
    if (text) {
        char t[96], xe[48];
        snprintf(cell[1], sizeof cell[1], "%s%s", measure_spread_text(t, sizeof t, st),
                 measure_noisy(samples, n) ? " !" : "");
        // r is paged's time over contiguous's: the verdict of contiguous against paged beside it
        snprintf(cell[2], sizeof cell[2], "%sx", r ? measure_ratio_beside(xe, sizeof xe, *r, measure_verdict_mirror(v)) : "1");
    } else {
        snprintf(cell[1], sizeof cell[1], "%.9f", st.median);
        snprintf(cell[2], sizeof cell[2], "%.2f", r ? r->x : 1.0);
    }
    if (waste >= 0) snprintf(cell[3], sizeof cell[3], text ? "%.1f%%" : "%.1f", 100 * waste);
    trace_table_row(tr, &BLOCK_SIZES, (const char *const[]){B, cell[0], cell[1], cell[2], cell[3]});
}

// Under (5)'s table: what the runs support about each block size against the
// contiguous cache (faster, slower or the same within noise, from verdict[i],
// with its reason where the ratio's ± does not say it, from against[i]:
// contiguous's time over paged's), and the warning when a time is marked "!".
static void block_verdicts(Trace *tr, const Bench *b, const MeasureVerdict *verdict, const MeasureRatio *against) {
    char en[512], zh[512];
    int ae = snprintf(en, sizeof en, "  Paged against contiguous, from these runs' intervals:");
    int az = snprintf(zh, sizeof zh, "  分页与连续缓存相比（按这几次运行的区间）：");
    for (int i = 0; i < NB && ae < (int)sizeof en - 64 && az < (int)sizeof zh - 64; i++) {
        char w[96];
        ae += snprintf(en + ae, sizeof en - (size_t)ae, "%s B = %d %s", i ? "," : "", BENCH_B[i],
                       measure_verdict_text(w, sizeof w, against[i], verdict[i], 0));
        az += snprintf(zh + az, sizeof zh - (size_t)az, "%sB = %d %s", i ? "，" : "", BENCH_B[i],
                       measure_verdict_text(w, sizeof w, against[i], verdict[i], 1));
    }
    snprintf(en + ae, sizeof en - (size_t)ae, ".");
    snprintf(zh + az, sizeof zh - (size_t)az, "。");
    trace_say(tr, en, zh);
    int noisy = 0;
    for (int i = 0; i < NARMS; i++) noisy |= measure_noisy(b->samples + (size_t)i * b->repeat, b->repeat);
    if (noisy) trace_say(tr, measure_noisy_text(0), measure_noisy_text(1));
}

// (5) Block size: table lookups and time of the attention. identical: 1 when
// every block size's output equals the contiguous one's bit for bit.
static int part_time(Trace *tr, const Options *opt, Pool *pool, const double *paged_waste, int *identical) {
    int len = BENCH_LEN, C = BENCH_H * BENCH_D;
    int repeat = opt->repeat > 0 ? opt->repeat : MEASURE_RUNS, json = tr->format == FORMAT_JSON;
    trace_heading(tr, "(5) The block-size trade: waste against table lookups",
                  "（5）块大小的取舍：浪费与查表次数");
    trace_sayf(tr,
               "One query row of %d heads of %d attends to %d positions: with the contiguous cache, and "
               "through a block table with blocks of B. Smaller blocks waste less (part 4) but need "
               "ceil(%d / B) table lookups per head and shorter pieces of arithmetic. Time per query row "
               "(%d calls a run): the median, with min … max, of %d runs after a warm-up, the %d ways taking turns.",
               "一个查询行（%d 个头，每头 %d 维）对 %d 个位置做注意力：用连续缓存，以及通过块大小为 B 的 "
               "block table。块越小浪费越少（第 4 部分），但每个头要查表 ceil(%d / B) 次，每段计算也更短。"
               "每个查询行的耗时（每次运行调用 %d 次）：先热身，%d 次运行的中位数，附最小 … 最大，%d 种方式轮流运行。",
               BENCH_H, BENCH_D, len, len, BENCH_CALLS, repeat, NARMS);
    trace_machine(tr, measure_machine());
    Bench b;
    Way way[NARMS];
    if (bench_init(&b, (uint32_t)opt->seed, repeat)) return oom(opt->lang);
    b.pool = pool;
    if (ways_init(way, &b, (uint32_t)opt->seed)) {
        bench_free(&b);
        return oom(opt->lang);
    }
    double *samples[NARMS];
    MeasureRun runs[NARMS];
    void *ctx[NARMS];
    for (int i = 0; i < NARMS; i++) samples[i] = b.samples + (size_t)i * repeat, runs[i] = way_run, ctx[i] = &way[i];
    measure_rounds(samples, NARMS, MEASURE_WARMUP, repeat, runs, ctx);
    trace_table_head(tr, &BLOCK_SIZES);
    trace_run(tr, "contiguous");
    block_row(tr, trace_text(tr, "contiguous", "连续缓存"), 0, samples[0], repeat, NULL, MEASURE_SAME, -1);
    if (json) trace_measure(tr, "attention", samples[0], repeat);
    trace_run(tr, NULL);
    *identical = 1;
    MeasureVerdict verdict[NB];
    MeasureRatio against[NB];   // contiguous's time over paged's: the verdict's direction
    for (int i = 0; i < NB; i++) {
        int B = BENCH_B[i], lookups = (len + B - 1) / B;
        MeasureRatio r = measure_ratio(stats_of(samples[1 + i], repeat), stats_of(samples[0], repeat));
        verdict[i] = measure_verdict(samples[0], repeat, samples[1 + i], repeat);   // paged against contiguous
        against[i] = measure_ratio(stats_of(samples[0], repeat), stats_of(samples[1 + i], repeat));
        char run[32], name[16];
        snprintf(run, sizeof run, "B=%d", B);
        snprintf(name, sizeof name, "%d", B);
        trace_run(tr, run);
        block_row(tr, name, lookups, samples[1 + i], repeat, &r, verdict[i], paged_waste[i]);
        way_call(&way[0]);        // the outputs once more, each way's own
        way_call(&way[1 + i]);
        Tensor x = tensor_view2(b.att_c, 1, C), y = tensor_view2(b.att_p, 1, C);
        if (json) {
            trace_count(tr, "lookups_per_head", lookups, NULL, NULL);
            trace_measure(tr, "attention", samples[1 + i], repeat);
            trace_value(tr, "time_ratio", r.x, "x", NULL, NULL);
            trace_comparison_of(tr, "paged_against_contiguous", against[i], verdict[i], NULL, NULL);
            *identical &= trace_compare(tr, "attention", "contiguous output", &x, "paged output", &y);
        } else {
            *identical &= ops_bit_identical(b.att_c, b.att_p, C);
        }
    }
    trace_run(tr, NULL);
    block_verdicts(tr, &b, verdict, against);
    ways_free(way);
    bench_free(&b);
    trace_say(tr, *identical ? "  The outputs of every B equal the contiguous one's, bit for bit." : "  The outputs DIFFER.",
              *identical ? "  每种 B 的输出都与连续缓存的逐位相同。" : "  输出不同。");
    trace_say(tr,
              "\nThe waste rises with B, the lookups fall. vLLM uses 16 by default; its paper (section 7.2) "
              "finds 16-128 best on ShareGPT and 16-32 on Alpaca, and its attention kernel 20-26% slower "
              "than a contiguous one (section 7.1).",
              "\n浪费随 B 增大，查表次数随 B 减少。vLLM 默认 16；其论文（第 7.2 节）发现 ShareGPT 上 16-128 "
              "最好，Alpaca 上 16-32，它的注意力核比连续缓存的慢 20-26%（第 7.1 节）。");
    return 0;
}

int lesson61_run(const Options *opt, Trace *tr) {
    int B = opt->block_size > 0 ? opt->block_size : DEFAULT_B;
    int N = opt->samples > 0 ? opt->samples : DEFAULT_SAMPLES;
    int steps = opt->steps > 0 ? opt->steps : DEFAULT_STEPS;
    if (steps > MAX_STEPS) {
        fileio_error(tr->lang, "lesson 6.1 takes --steps 1 to %d (tokens per sample); kvdemo generate --paged writes longer texts",
                     "第 6.1 课的 --steps 取 1 到 %d（每个续写的 token 数）；更长的文字请用 kvdemo generate --paged",
                     MAX_STEPS);
        return 2;
    }
    if (opt->seed + (uint64_t)N - 1 > 4294967295ull) {
        fileio_error(tr->lang, "lesson 6.1: sample i draws with seed --seed + i, which must stay below 2**32; give a smaller --seed",
                     "第 6.1 课：第 i 个续写用种子 --seed + i 抽样，它必须小于 2**32；请给小一些的 --seed");
        return 2;
    }
    Scene sc = {0};
    int n_prompt = 0;
    int rc = scene_init(&sc, &n_prompt, opt, N, steps);
    if (rc) return rc;
    if (!(sc.s.pool = pool_new_for(opt->threads, gpt_row_work(sc.m.cfg)))) {   // --threads, 0: the fastest for the shape
        scene_free(&sc);
        fileio_error(tr->lang, "could not start %d threads", "无法启动 %d 个线程", ops_threads_asked(opt->threads));
        return 1;
    }

    GptConfig c = sc.m.cfg;
    lessons_heading(tr);
    trace_sayf(tr,
               "The char GPT of lesson 10 (T = %d, C = %d, %d heads, %d layers) with a paged KV cache: "
               "PageAttention borrows virtual memory and paging from the operating system, so that a "
               "sequence's contiguous keys and values can be stored in non-contiguous memory.\n",
               "第 10 课的字符级 GPT（T = %d，C = %d，%d 个头，%d 层）配上分页 KV 缓存：PageAttention 借助"
               "OS系统中虚拟内存和分页的思想，可以实现在不连续的空间存储连续的kv键值。\n",
               c.T, c.C, c.H, c.L);
    int identical = 1, identical5 = 1;
    double paged_waste[COUNT(BENCH_B)] = {0};
    rc = part_table(&sc, tr, opt, n_prompt);
    if (!rc) rc = part_sharing(&sc, tr, opt, n_prompt, B, N, steps);
    if (!rc) rc = part_same(&sc, tr, n_prompt, B, steps, &identical);
    if (!rc) rc = part_waste(tr, opt, paged_waste);
    if (!rc) rc = part_time(tr, opt, sc.s.pool, paged_waste, &identical5);
    if (!rc && (!identical || !identical5)) {
        fileio_error(tr->lang, "lesson 6.1: the paged cache's results differ from the contiguous cache's",
                     "第 6.1 课：分页缓存的结果与连续缓存的不一致");
        rc = 1;
    }
    scene_free(&sc);
    return rc;
}
