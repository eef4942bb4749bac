// checkpoint — a training run saved so that it can resume bit for bit.
//
// A checkpoint holds the recipe, the model shape and vocabulary, the step,
// the batch generator's state, the weights and AdamW's two moment
// estimates, and a checksum. It is written through fileio's atomic write
// (a temporary file, fsync, rename) so that a run killed while saving leaves the
// previous checkpoint whole.
#include "checkpoint.h"

#include "corpus.h"
#include "fileio.h"
#include "train_llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Checkpoints: little-endian, in this order (docs/training.md):
//   "KVTC", u32 version 1, u32 V T C H L, u32 batch iters warmup,
//   f32 lr min_lr weight_decay beta1 beta2 eps grad_clip, u64 seed,
//   u32 step, u64 rng, u64 text_hash, i64 text_tokens, u64 P,
//   u32 vocab[V], f32 params[P], f32 m[P], f32 v[P],
//   u64 FNV-1a of every byte before it.
// The LLaMA-style model's (train_llama.h) is the same with magic "KVTL" and
// u32 G F after L; its V is the text's (without pad, bos, eos). A run with
// sliding-window attention (--window W) writes version 2, with u32 W after
// F: a resumed run keeps the band mask it was trained with.

#define CKPT_MAGIC "KVTC"
#define CKPT_MAGIC_LLAMA "KVTL"
#define CKPT_VERSION 1u
#define CKPT_VERSION_WINDOWED 2u
enum { CKPT_HEADER = 4 + 4 + 5 * 4 + 3 * 4 + 7 * 4 + 8 + 4 + 8 + 8 + 8 + 8,
       CKPT_HEADER_LLAMA = CKPT_HEADER + 8, CKPT_HEADER_WINDOWED = CKPT_HEADER_LLAMA + 4 };

static long ckpt_fail_after = -1;

void train_checkpoint_fail_after(long bytes) { ckpt_fail_after = bytes; }

typedef struct {
    FILE *f;
    uint64_t hash;
    long written;
    int failed;
} CkptWriter;

static void ck_write(CkptWriter *w, const void *data, size_t n) {
    if (w->failed) return;
    if (ckpt_fail_after >= 0 && w->written + (long)n > ckpt_fail_after) {
        // test hook: write the part that fits, then stop as a killed process would
        size_t part = (size_t)(ckpt_fail_after - w->written);
        fwrite(data, 1, part, w->f);
        fflush(w->f);
        w->failed = 2;
        return;
    }
    w->hash = fnv1a(w->hash, data, n);
    if (fwrite(data, 1, n, w->f) != n) w->failed = 1;
    w->written += (long)n;
}
static void ck_u32(CkptWriter *w, uint32_t x) { ck_write(w, &x, 4); }
static void ck_u64(CkptWriter *w, uint64_t x) { ck_write(w, &x, 8); }
static void ck_f32(CkptWriter *w, float x) { ck_write(w, &x, 4); }

int train_checkpoint_save(const char *path, const TrainCheckpoint *ck, Err err) {
    char why[512];
    if (!fileio_host_is_little_endian())
        return fileio_fail2(err, "checkpoints are little-endian; this machine is not",
                            "检查点是小端字节序的，这台机器不是");
    AtomicFile a;
    if (fileio_open(&a, path, ERR(err.lang, why)) != 0)
        return fileio_fail2(err, "cannot write the checkpoint: %s", "无法写入检查点：%s", why);
    CkptWriter w = {a.f, FNV_START, 0, 0};
    const TrainConfig *c = &ck->cfg;
    int llama = c->arch == TRAIN_ARCH_LLAMA, windowed = llama && c->window;
    ck_write(&w, llama ? CKPT_MAGIC_LLAMA : CKPT_MAGIC, 4);
    ck_u32(&w, windowed ? CKPT_VERSION_WINDOWED : CKPT_VERSION);
    ck_u32(&w, (uint32_t)c->model.V);
    ck_u32(&w, (uint32_t)c->model.T);
    ck_u32(&w, (uint32_t)c->model.C);
    ck_u32(&w, (uint32_t)c->model.H);
    ck_u32(&w, (uint32_t)c->model.L);
    if (llama) {
        ck_u32(&w, (uint32_t)c->kv_heads);
        ck_u32(&w, (uint32_t)c->hidden);
        if (windowed) ck_u32(&w, (uint32_t)c->window);
    }
    ck_u32(&w, (uint32_t)c->batch);
    ck_u32(&w, (uint32_t)c->iters);
    ck_u32(&w, (uint32_t)c->warmup);
    ck_f32(&w, c->lr);
    ck_f32(&w, c->min_lr);
    ck_f32(&w, c->weight_decay);
    ck_f32(&w, c->beta1);
    ck_f32(&w, c->beta2);
    ck_f32(&w, c->eps);
    ck_f32(&w, c->grad_clip);
    ck_u64(&w, c->seed);
    ck_u32(&w, (uint32_t)ck->step);
    ck_u64(&w, ck->rng);
    ck_u64(&w, ck->text_hash);
    ck_u64(&w, (uint64_t)ck->text_tokens);
    ck_u64(&w, (uint64_t)ck->num_params);
    ck_write(&w, ck->vocab, sizeof(uint32_t) * (size_t)c->model.V);
    ck_write(&w, ck->params, sizeof(float) * ck->num_params);
    ck_write(&w, ck->m, sizeof(float) * ck->num_params);
    ck_write(&w, ck->v, sizeof(float) * ck->num_params);
    uint64_t sum = w.hash;
    ck_u64(&w, sum);
    if (w.failed == 2) {   // the test hook: leave the partial temp file, as a crash would
        fclose(a.f);
        a.f = NULL;
        free(a.tmp);
        a.tmp = NULL;
        fileio_abort(&a);
        return fileio_fail2(err, "checkpoint save to %s interrupted", "保存检查点 %s 时被打断", path);
    }
    if (fileio_commit(&a, ERR(err.lang, why)) != 0)
        return fileio_fail2(err, "cannot write the checkpoint: %s", "无法写入检查点：%s", why);
    return 0;
}

// The parameters of the shape in c (either architecture), or 0 with why
// (room: n bytes) saying what is wrong with the shape.
static uint64_t shape_params(const TrainConfig *c, Err why) {
    if (c->arch != TRAIN_ARCH_LLAMA)
        return gpt_check_config(c->model, why) != 0 ? 0 : gpt_num_params(c->model);
    LlamaConfig lc;
    if (llama_train_config(&lc, c, c->model.V, why) != 0) return 0;
    return llama_num_params(&lc);
}

// Reads the header q (after magic and version; the sizes, the recipe, the
// state) into ck and checks it against the file's size. Returns NULL, or
// what is wrong (in shape_err or recipe, or a fixed text).
static const char *parse_header(TrainCheckpoint *ck, const unsigned char *q, int hn, uint64_t size,
                                uint64_t *P, Err shape_err, Err recipe) {
    TrainConfig *c = &ck->cfg;
    int ns = hn == CKPT_HEADER_WINDOWED ? 11 : hn == CKPT_HEADER_LLAMA ? 10 : 8;
    uint32_t sizes[11];
    for (int i = 0; i < ns; i++) sizes[i] = le_get_u32(q + 4 * i);
    c->model.V = (int)sizes[0];
    c->model.T = (int)sizes[1];
    c->model.C = (int)sizes[2];
    c->model.H = (int)sizes[3];
    c->model.L = (int)sizes[4];
    if (ns >= 10) {
        c->arch = TRAIN_ARCH_LLAMA;
        c->kv_heads = (int)sizes[5];
        c->hidden = (int)sizes[6];
    }
    if (ns == 11) c->window = (int)sizes[7];   // version 2 only
    c->batch = (int)sizes[ns - 3];
    c->iters = (int)sizes[ns - 2];
    c->warmup = (int)sizes[ns - 1];
    q += 4 * ns;
    c->lr = le_get_f32(q);
    c->min_lr = le_get_f32(q + 4);
    c->weight_decay = le_get_f32(q + 8);
    c->beta1 = le_get_f32(q + 12);
    c->beta2 = le_get_f32(q + 16);
    c->eps = le_get_f32(q + 20);
    c->grad_clip = le_get_f32(q + 24);
    c->seed = le_get_u64(q + 28);
    uint32_t step = le_get_u32(q + 36);
    ck->step = (int)step;
    ck->rng = le_get_u64(q + 40);
    ck->text_hash = le_get_u64(q + 48);
    ck->text_tokens = (int64_t)le_get_u64(q + 56);
    *P = le_get_u64(q + 64);
    int too_big = step > 0x7fffffff;
    for (int i = 0; i < ns; i++) too_big |= sizes[i] > 0x7fffffff;
    if (too_big) return fileio_text(recipe.lang, "sizes or step counts out of range", "大小或步数超出范围");
    if (ns == 11 && c->window == 0)
        return fileio_text(recipe.lang, "version 2 holds a window, and it is 0", "版本 2 含有窗口大小，而它是 0");
    uint64_t want_p = shape_params(c, shape_err);
    if (!want_p) return shape_err.text;   // the model file's own limits
    if (train_config_check(c, recipe) != 0)
        return recipe.text;   // the limits of the command line (--iters, --batch)
    if (ck->step > c->iters) {
        fileio_fail2(recipe, "its step %d is past its iterations (%d)", "它的步数 %d 超过了迭代次数（%d）",
                     ck->step, c->iters);
        return recipe.text;
    }
    if (*P != want_p)
        return fileio_text(recipe.lang, "parameter count does not match the model sizes", "参数个数与模型大小不符");
    uint64_t want = (uint64_t)hn + 4ull * (uint64_t)c->model.V + 12ull * *P + 8;
    if (size < want)
        return fileio_text(recipe.lang, "file is shorter than its sizes say (truncated)", "文件比它的大小字段说的短（不完整）");
    if (size > want)
        return fileio_text(recipe.lang, "file is longer than its sizes say (trailing bytes)", "文件比它的大小字段说的长（末尾多出字节）");
    return NULL;
}

int train_checkpoint_load(const char *path, TrainCheckpoint *ck, Err err) {
    memset(ck, 0, sizeof(*ck));
    char why_open[512], shape_err[160], recipe[300];
    uint64_t size = 0;
    FILE *f = fileio_open_read(path, &size, ERR(err.lang, why_open));
    if (!f) return fileio_fail2(err, "cannot read the checkpoint: %s", "无法读取检查点：%s", why_open);
    // The header first: the magic, the sizes and the recipe are checked, and
    // the file's length against them, before the rest is read.
    unsigned char h[CKPT_HEADER_WINDOWED];
    unsigned char *buf = NULL;
    const char *why = NULL;
    TrainConfig *c = &ck->cfg;
    uint64_t P = 0;
    int hn = CKPT_HEADER;
    if (!fileio_host_is_little_endian())
        why = fileio_text(err.lang, "checkpoints are little-endian; this machine is not", "检查点是小端字节序的，这台机器不是");
    else if (size < CKPT_HEADER + 8)
        why = fileio_text(err.lang, "too short to be a checkpoint (truncated?)", "太短，不是检查点（文件不完整？）");
    else if (fread(h, 1, CKPT_HEADER, f) != CKPT_HEADER)
        why = fileio_read_reason(err.lang, f);
    else if (memcmp(h, CKPT_MAGIC, 4) != 0 && memcmp(h, CKPT_MAGIC_LLAMA, 4) != 0)
        why = fileio_text(err.lang, "wrong magic (not a kvdemo training checkpoint)", "文件头不对（不是 kvdemo 的训练检查点）");
    else if (le_get_u32(h + 4) != CKPT_VERSION &&
             !(memcmp(h, CKPT_MAGIC_LLAMA, 4) == 0 && le_get_u32(h + 4) == CKPT_VERSION_WINDOWED))
        why = fileio_text(err.lang, "unsupported version (expected 1, or 2 for a LLaMA-style run with --window)",
                          "不支持的版本（应为 1；带 --window 的 LLaMA 式训练为 2）");
    else if (memcmp(h, CKPT_MAGIC_LLAMA, 4) == 0) {
        hn = le_get_u32(h + 4) == CKPT_VERSION_WINDOWED ? CKPT_HEADER_WINDOWED : CKPT_HEADER_LLAMA;
        if (size < (uint64_t)hn + 8)
            why = fileio_text(err.lang, "too short to be a checkpoint (truncated?)", "太短，不是检查点（文件不完整？）");
        else if (fread(h + CKPT_HEADER, 1, (size_t)(hn - CKPT_HEADER), f) != (size_t)(hn - CKPT_HEADER))
            why = fileio_read_reason(err.lang, f);
    }
    if (!why) why = parse_header(ck, h + 8, hn, size, &P, ERR(err.lang, shape_err), ERR(err.lang, recipe));
    // Then the rest, whose length the header now vouches for.
    if (!why && !(buf = malloc((size_t)size)))
        why = fileio_text(err.lang, "out of memory", "内存不足");
    if (!why) {
        memcpy(buf, h, (size_t)hn);
        if (fread(buf + hn, 1, (size_t)size - (size_t)hn, f) != (size_t)size - (size_t)hn)
            why = fileio_read_reason(err.lang, f);
    }
    fclose(f);
    const unsigned char *p = buf;
    if (!why && fnv1a(FNV_START, p, (size_t)size - 8) != le_get_u64(p + size - 8))
        why = fileio_text(err.lang, "checksum mismatch (the file is corrupted)", "校验和不符（文件已损坏）");
    if (!why) {
        ck->num_params = (size_t)P;
        ck->vocab = malloc(sizeof(uint32_t) * (size_t)c->model.V);
        ck->params = malloc(sizeof(float) * (size_t)P * 3);
        if (!ck->vocab || !ck->params) why = fileio_text(err.lang, "out of memory", "内存不足");
    }
    if (!why) {
        memcpy(ck->vocab, p + hn, sizeof(uint32_t) * (size_t)c->model.V);
        memcpy(ck->params, p + hn + 4 * (size_t)c->model.V, sizeof(float) * (size_t)P * 3);
        ck->m = ck->params + P;
        ck->v = ck->params + 2 * P;
        for (int i = 0; i < c->model.V && !why; i++)
            if (ck->vocab[i] > 0x10FFFF || (i > 0 && ck->vocab[i] <= ck->vocab[i - 1]))
                why = fileio_text(err.lang, "vocabulary is not sorted distinct code points", "词表不是排好序、互不相同的码点");
        for (uint64_t i = 0; i < 3 * P && !why; i++)
            if (!isfinite(ck->params[i])) why = fileio_text(err.lang, "weights or optimizer state hold NaN or infinity",
                                                            "权重或优化器状态里有 NaN 或无穷大");
        // v = beta2 v + (1 - beta2) g², never below 0: AdamW takes its root.
        for (uint64_t i = 0; i < P && !why; i++)
            if (ck->v[i] < 0) {
                fileio_fail2(ERR(err.lang, recipe), "AdamW's second moment v[%llu] is %g; it is never below 0",
                             "AdamW 的二阶矩 v[%llu] 是 %g；它不会小于 0", (unsigned long long)i, (double)ck->v[i]);
                why = recipe;
            }
    }
    free(buf);
    if (why) {
        fileio_fail2(err, "checkpoint %s rejected: %s", "检查点 %s 不能用：%s", path, why);
        train_checkpoint_free(ck);
        return -1;
    }
    return 0;
}

void train_checkpoint_free(TrainCheckpoint *ck) {
    free(ck->vocab);
    free(ck->params);   // m and v live in the same allocation
    memset(ck, 0, sizeof(*ck));
}

