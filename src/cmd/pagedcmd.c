// pagedcmd — kvdemo generate --paged [--block-size B] [--num-blocks N]
// [--samples N]: the char GPT writes N continuations of one prompt on the
// paged KV cache (kvpage.h). The prompt is computed once and its blocks are
// shared; each sample's text is the one `kvdemo generate --seed S+i` writes
// with the contiguous cache (sample i draws with np.random.seed(S + i)).
#include "pagedcmd.h"

#include "fileio.h"
#include "gptpaged.h"
#include "gptsetup.h"
#include "memory.h"
#include "ops.h"
#include "timer.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { DEFAULT_STEPS = 256, DEFAULT_BLOCK_SIZE = 16, DEFAULT_SAMPLES = 1 };

// The machine's memory in bytes, or 0 when it cannot be known.
static double machine_bytes(void) {
#ifdef _SC_PHYS_PAGES
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) return (double)pages * (double)page;
#endif
    return 0;
}

// The options --paged refuses or bounds; returns 0, or 2 after one line on stderr.
static int check_options(const Options *opt) {
    if (!opt->paged) {
        fileio_error(opt->lang, "--block-size, --num-blocks and --samples go with --paged (the paged cache)",
                     "--block-size、--num-blocks 和 --samples 要和 --paged（分页缓存）一起用");
        return 2;
    }
    if ((opt->attention && strcmp(opt->attention, "plain") != 0) || opt->tile) {
        fileio_error(opt->lang, "--paged has its own attention through the block table; leave out --attention flash and --tile",
                     "--paged 有自己经由块表的注意力；去掉 --attention flash 和 --tile");
        return 2;
    }
    if (opt->bug || opt->kv_dtype) {
        fileio_error(opt->lang, "--paged keeps float32 keys and values without injected bugs; leave out --bug and --kv-dtype",
                     "--paged 用 float32 保存 key 和 value，也不注入错误；去掉 --bug 和 --kv-dtype");
        return 2;
    }
    if (opt->runs == RUN_NOCACHE) {
        fileio_error(opt->lang, "--paged is a KV cache; it excludes --no-cache", "--paged 就是 KV 缓存；不能和 --no-cache 一起给");
        return 2;
    }
    if (opt->seed + (uint64_t)(opt->samples > 0 ? opt->samples : 1) - 1 > 4294967295ull) {
        fileio_error(opt->lang, "sample i draws with seed --seed + i, which must stay below 2**32; give a smaller --seed",
                     "第 i 个续写用种子 --seed + i 抽样，它必须小于 2**32；请给小一些的 --seed");
        return 2;
    }
    return 0;
}

// Each sample's text (tokens (N, stride)), in text or as events; *text is
// the buffer reused for them. Returns 0, or -1 when memory ran out.
static int show_samples(Trace *tr, const GptModel *m, const Options *opt, const int *tokens, int N, int stride,
                        char **text) {
    for (int i = 0; i < N; i++) {
        const int *tok = tokens + (size_t)i * stride;
        size_t want = gpt_decode(NULL, 0, m, tok, stride);
        char *t = realloc(*text, want + 1);
        if (!t) return -1;
        *text = t;
        gpt_decode(t, want + 1, m, tok, stride);
        char run[32];
        snprintf(run, sizeof run, "sample-%d", i);
        tr->run = run;
        if (tr->format == FORMAT_JSON) {
            trace_count(tr, "seed", (int64_t)(opt->seed + (uint64_t)i), NULL, NULL);
            trace_textval(tr, "text", t);
        } else {
            unsigned long long seed = (unsigned long long)(opt->seed + (uint64_t)i);
            trace_sayf(tr, "-- sample %d (seed %llu, as kvdemo generate --seed %llu) --",
                       "—— 第 %d 个样本（种子 %llu，与 kvdemo generate --seed %llu 相同）——", i, seed, seed);
            utf8_put_shown(tr->out, t, strlen(t));
            fputs("\n\n", tr->out);
        }
    }
    tr->run = NULL;
    return 0;
}

// The blocks at the end: in use and at the peak of the pool's NB, against
// every sample's own table (table_blocks) and N contiguous caches of T;
// threads: the run's (pool_threads).
static void show_blocks(Trace *tr, const KvPool *pool, int threads, int N, int steps, int B, int NB, int T,
                        int64_t table_blocks, double seconds) {
    int used = NB - pool->num_free, peak = NB - pool->min_free;
    if (tr->format == FORMAT_JSON) {
        trace_count(tr, "samples", N, NULL, NULL);
        trace_count(tr, "block_size", B, NULL, NULL);
        trace_count(tr, "pool_blocks", NB, NULL, NULL);
        trace_count(tr, "blocks_used", used, NULL, NULL);
        trace_count(tr, "blocks_peak", peak, NULL, NULL);
        trace_count(tr, "blocks_without_sharing", table_blocks, NULL, NULL);
        trace_count(tr, "contiguous_slots", (int64_t)N * T, NULL, NULL);
        trace_count(tr, "copies", pool->copies, NULL, NULL);
        trace_timing(tr, "paged", seconds, 1);
    } else {
        trace_sayf(tr,
                   "-- %d sample%s of %d tokens in %.3f s on the paged KV cache, blocks of %d positions, %d thread%s\n"
                   "   blocks in use at the end: %d (peak %d of the pool's %d); without sharing: %lld "
                   "(blocks saved %.1f%%)\n"
                   "   %d separate contiguous caches of %d positions would hold %lld slots; the paged cache holds %lld\n"
                   "   copy-on-write copies: %lld",
                   "—— %d 个样本%.0s，每个 %d 个 token，用时 %.3f 秒，分页缓存，每块 %d 个位置，%d 个线程%.0s\n"
                   "   结束时在用的块：%d 个（峰值 %d，池里共 %d 个）；不共享时要 %lld 个"
                   "（省下 %.1f%% 的块）\n"
                   "   %d 份各 %d 个位置的连续缓存共要 %lld 个槽位；分页缓存占 %lld 个\n"
                   "   写时复制的次数：%lld",
                   N, N == 1 ? "" : "s", steps, seconds, B, threads, threads == 1 ? "" : "s", used, peak, NB,
                (long long)table_blocks,
                table_blocks ? 100.0 * (double)(table_blocks - used) / (double)table_blocks : 0.0, N, T,
                (long long)N * T, (long long)used * B, (long long)pool->copies);
    }
}

// The pool of NB blocks of B positions for L layers of H heads of D.
// Returns 0, or 1 after one line on stderr.
static int pool_open(Lang lang, KvPool *pool, int L, int H, int D, int B, int NB) {
    // Keys and values, float32, of every layer and head, for every position
    // of every block. A pool larger than the machine is refused before it is
    // asked for (an allocator that overcommits would grant it, and the run
    // would be killed later).
    double pool_bytes = 2.0 * 4.0 * L * H * D * (double)B * NB, machine = machine_bytes();
    if ((machine > 0 && pool_bytes > machine) || kvpool_init(pool, L, H, D, B, NB)) {
        char size[32], have[32];
        memory_binary(size, sizeof size, pool_bytes);
        memory_binary(have, sizeof have, machine);
        fileio_error(lang, "out of memory: the paged cache's %d blocks of %d positions ask for %s (this machine has %s); give "
                     "fewer --num-blocks or a smaller --block-size",
                     "内存不足：分页缓存的 %d 块（每块 %d 个位置）要 %s（这台机器有 %s）；请给小一些的 --num-blocks 或 "
                     "--block-size", NB, B, size, machine > 0 ? have : "?");
        return 1;
    }
    return 0;
}

// Sample fail_sample at step fail_step needed `need` free blocks of the
// pool's NB; N separate caches would need N * per_seq.
static void say_pool_ran_out(Lang lang, const KvPool *pool, int NB, int fail_sample, int fail_step, int need, int N,
                             int per_seq) {
    fileio_error(lang, "the pool of %d blocks ran out: sample %d at step %d needed %d free blocks, %d were left; "
                 "give --num-blocks %d or more (N separate caches need %d)",
                 "%d 块的池用完了：第 %d 个续写在第 %d 步需要 %d 个空闲块，只剩 %d 个；"
                 "请给 --num-blocks %d 或更多（N 个各自独立的缓存需要 %d 块）",
                 NB, fail_sample, fail_step, need, pool->num_free, NB + need - pool->num_free, N * per_seq);
}

// A block longer than the context: every block holds at most T of its B
// positions, and the pool reserves B for each (issue 29, 12: --block-size
// 4096 --samples 64 reserved 4.8 GB for 11 tokens). One line, then the run.
static void say_block_past_context(Lang lang, int B, int T, int L, int H, int D, int NB, int longest) {
    if (B <= T) return;
    char size[32];
    memory_binary(size, sizeof size, 2.0 * 4.0 * L * H * D * (double)B * NB);
    fileio_error(lang, "--block-size %d is longer than the model's %d-token context: the pool of %d blocks reserves %s "
                 "for %d tokens a sample; --block-size %d or less reserves no more than the context",
                 "--block-size %d 比模型 %d 个 token 的上下文还长：%d 块的池要占 %s，每个续写只有 %d 个 token；"
                 "--block-size %d 或更小就不会超过上下文所需",
                 B, T, NB, size, longest, T);
}

int pagedcmd_generate(const Options *opt, Trace *tr) {
    int rc = check_options(opt);
    if (rc) return rc;
    GptModel m;
    rc = gptsetup_model(&m, opt, 0, NULL);
    if (rc) return rc;
    int steps = opt->steps > 0 ? opt->steps : DEFAULT_STEPS;
    int N = opt->samples > 0 ? opt->samples : DEFAULT_SAMPLES;
    int B = opt->block_size > 0 ? opt->block_size : DEFAULT_BLOCK_SIZE;
    int T = m.cfg.T, H = m.cfg.H, D = m.cfg.C / m.cfg.H, L = m.cfg.L;
    float temperature = opt->temperature >= 0 ? (float)opt->temperature : 1.0f;
    const char *prompt = gptsetup_prompt_text(opt);
    int *prompt_tokens = NULL, n_prompt = 0, *tokens = NULL;
    GptState s = {0};
    KvPool pool = {0};
    KvSeq *seqs = NULL;
    Sampler *samplers = NULL;
    char *text = NULL;
    rc = gptsetup_prompt(opt->lang, &prompt_tokens, &n_prompt, &m, prompt, 0);
    if (rc) goto done;
    // Enough blocks for N separate sequences of the longest length the run
    // reaches: sharing can only need fewer.
    int longest = n_prompt + steps < T ? n_prompt + steps : T;
    int per_seq = (longest + B - 1) / B;
    int NB = opt->num_blocks > 0 ? opt->num_blocks : N * per_seq;
    int stride = n_prompt + steps;
    tokens = malloc(sizeof(int) * (size_t)N * stride);
    seqs = calloc((size_t)N, sizeof *seqs);
    samplers = calloc((size_t)N, sizeof *samplers);
    if (!tokens || !seqs || !samplers || gpt_state_init(&s, m.cfg)) goto oom;
    rc = pool_open(opt->lang, &pool, L, H, D, B, NB);
    if (rc) goto done;
    say_block_past_context(opt->lang, B, T, L, H, D, NB, longest);   // a pool that opened: one error line otherwise
    for (int i = 0; i < N; i++) {
        memcpy(tokens + (size_t)i * stride, prompt_tokens, sizeof(int) * (size_t)n_prompt);
        if (kvseq_init(&seqs[i], &pool, T) ||
            sampler_init(&samplers[i], m.cfg.V, temperature, opt->top_k, (uint32_t)(opt->seed + (uint64_t)i)))
            goto oom;
    }
    if (!(s.pool = pool_new_for(opt->threads, gpt_row_work(m.cfg)))) {   // the threads: s's, freed below
        fileio_error(tr->lang, "could not start %d threads", "无法启动 %d 个线程", ops_threads_asked(opt->threads));
        rc = 1;
        goto done;
    }
    int fail_sample = 0, fail_step = 0, need = 0;
    double t0 = timer_now();
    int ok = gpt_sample_paged(tokens, stride, &s, &m, seqs, samplers, N, n_prompt, steps, &fail_sample, &fail_step,
                              &need) == 0;
    double seconds = timer_now() - t0;
    if (!ok) {
        say_pool_ran_out(opt->lang, &pool, NB, fail_sample, fail_step, need, N, per_seq);
        rc = 1;
        goto done;
    }
    // Blocks held at the end: every sample's table, against the distinct
    // physical blocks in use (the vLLM paper's "blocks saved", section 6.3).
    int64_t table_blocks = 0;
    for (int i = 0; i < N; i++) table_blocks += seqs[i].num_blocks;
    if (show_samples(tr, &m, opt, tokens, N, stride, &text)) goto oom;
    show_blocks(tr, &pool, pool_threads(s.pool), N, steps, B, NB, T, table_blocks, seconds);
    goto done;
oom:
    fileio_error(tr->lang, "out of memory", "内存不足");
    rc = 1;
done:
    for (int i = 0; seqs && i < N; i++) kvseq_free(&seqs[i]);
    for (int i = 0; samplers && i < N; i++) sampler_free(&samplers[i]);
    free(seqs);
    free(samplers);
    kvpool_free(&pool);
    free(text);
    free(tokens);
    free(prompt_tokens);
    pool_free(s.pool);
    gpt_state_free(&s);
    gpt_free(&m);
    return rc;
}
