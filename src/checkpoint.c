// checkpoint — a training run saved so that it can resume bit for bit.
//
// A checkpoint holds the recipe, the model shape and vocabulary, the step,
// the batch generator's state, the weights and AdamW's two moment
// estimates, and a checksum. It is written atomically (a temporary file,
// fsync, rename) so that a run killed while saving leaves the previous
// checkpoint whole.
#include "checkpoint.h"

#include "corpus.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Checkpoints: little-endian, in this order (docs/training.md):
//   "KVTC", u32 version 1, u32 V T C H L, u32 batch iters warmup,
//   f32 lr min_lr weight_decay beta1 beta2 eps grad_clip, u64 seed,
//   u32 step, u64 rng, u64 text_hash, i64 text_tokens, u64 P,
//   u32 vocab[V], f32 params[P], f32 m[P], f32 v[P],
//   u64 FNV-1a of every byte before it.

#define CKPT_MAGIC "KVTC"
#define CKPT_VERSION 1u
enum { CKPT_HEADER = 4 + 4 + 5 * 4 + 3 * 4 + 7 * 4 + 8 + 4 + 8 + 8 + 8 + 8 };

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

static int host_little_endian(void) {
    uint32_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

int train_checkpoint_save(const char *path, const TrainCheckpoint *ck, char *err, size_t errlen) {
    if (!host_little_endian()) {
        snprintf(err, errlen, "checkpoints are little-endian; this machine is not");
        return -1;
    }
    size_t len = strlen(path);
    char *tmp = malloc(len + 5);
    if (!tmp) {
        snprintf(err, errlen, "out of memory saving %s", path);
        return -1;
    }
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp", 5);
    CkptWriter w = {fopen(tmp, "wb"), FNV_START, 0, 0};
    if (!w.f) {
        snprintf(err, errlen, "cannot write checkpoint %s: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    const TrainConfig *c = &ck->cfg;
    ck_write(&w, CKPT_MAGIC, 4);
    ck_u32(&w, CKPT_VERSION);
    ck_u32(&w, (uint32_t)c->model.V);
    ck_u32(&w, (uint32_t)c->model.T);
    ck_u32(&w, (uint32_t)c->model.C);
    ck_u32(&w, (uint32_t)c->model.H);
    ck_u32(&w, (uint32_t)c->model.L);
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
        fclose(w.f);
        snprintf(err, errlen, "checkpoint save to %s interrupted", path);
        free(tmp);
        return -1;
    }
    int bad = w.failed || fflush(w.f) != 0 || fsync(fileno(w.f)) != 0;
    bad |= fclose(w.f) != 0;
    if (bad || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write checkpoint %s: %s", path, strerror(errno));
        remove(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    // make the rename itself durable: fsync the directory that holds path
    char *dir = strdup(path);
    if (dir) {
        char *slash = strrchr(dir, '/');
        const char *d = slash ? (slash == dir ? "/" : (*slash = '\0', dir)) : ".";
        int fd = open(d, O_RDONLY);
        if (fd >= 0) {
            fsync(fd);
            close(fd);
        }
        free(dir);
    }
    return 0;
}

static uint32_t rd_u32(const unsigned char *p) {
    uint32_t x;
    memcpy(&x, p, 4);
    return x;
}
static uint64_t rd_u64(const unsigned char *p) {
    uint64_t x;
    memcpy(&x, p, 8);
    return x;
}
static float rd_f32(const unsigned char *p) {
    float x;
    memcpy(&x, p, 4);
    return x;
}

int train_checkpoint_load(const char *path, TrainCheckpoint *ck, char *err, size_t errlen) {
    memset(ck, 0, sizeof(*ck));
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open checkpoint %s: %s", path, strerror(errno));
        return -1;
    }
    unsigned char *buf = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        snprintf(err, errlen, "cannot read checkpoint %s", path);
        fclose(f);
        return -1;
    }
    char shape_err[160];
    const char *why = NULL;
    if (!host_little_endian()) {
        why = "checkpoints are little-endian; this machine is not";
    } else if (size < CKPT_HEADER + 8) {
        why = "too short to be a checkpoint (truncated?)";
    } else if (!(buf = malloc((size_t)size))) {
        why = "out of memory";
    } else if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        why = "read error";
    }
    fclose(f);
    const unsigned char *p = buf;
    TrainConfig *c = &ck->cfg;
    uint64_t P = 0;
    if (!why && memcmp(p, CKPT_MAGIC, 4) != 0)
        why = "wrong magic (not a kvdemo training checkpoint)";
    if (!why && rd_u32(p + 4) != CKPT_VERSION) why = "unsupported version (expected 1)";
    if (!why) {
        const unsigned char *q = p + 8;
        c->model.V = (int)rd_u32(q);
        c->model.T = (int)rd_u32(q + 4);
        c->model.C = (int)rd_u32(q + 8);
        c->model.H = (int)rd_u32(q + 12);
        c->model.L = (int)rd_u32(q + 16);
        c->batch = (int)rd_u32(q + 20);
        c->iters = (int)rd_u32(q + 24);
        c->warmup = (int)rd_u32(q + 28);
        c->lr = rd_f32(q + 32);
        c->min_lr = rd_f32(q + 36);
        c->weight_decay = rd_f32(q + 40);
        c->beta1 = rd_f32(q + 44);
        c->beta2 = rd_f32(q + 48);
        c->eps = rd_f32(q + 52);
        c->grad_clip = rd_f32(q + 56);
        c->seed = rd_u64(q + 60);
        ck->step = (int)rd_u32(q + 68);
        ck->rng = rd_u64(q + 72);
        ck->text_hash = rd_u64(q + 80);
        ck->text_tokens = (int64_t)rd_u64(q + 88);
        P = rd_u64(q + 96);
        GptConfig g = c->model;
        if (gpt_check_config(g, shape_err, sizeof shape_err) != 0)
            why = shape_err;   // the model file's own limits
        else if (c->batch < 1 || c->iters < 1 || c->warmup < 0 || ck->step < 0 ||
                 ck->step > c->iters)
            why = "training step counts out of range";
        else if (P != gpt_num_params(g))
            why = "parameter count does not match the model sizes";
        else if ((uint64_t)size != CKPT_HEADER + 4ull * g.V + 12ull * P + 8)
            why = (uint64_t)size < CKPT_HEADER + 4ull * g.V + 12ull * P + 8
                      ? "file is shorter than its sizes say (truncated)"
                      : "file is longer than its sizes say (trailing bytes)";
    }
    if (!why && fnv1a(FNV_START, p, (size_t)size - 8) != rd_u64(p + size - 8))
        why = "checksum mismatch (the file is corrupted)";
    if (!why) {
        ck->num_params = (size_t)P;
        ck->vocab = malloc(sizeof(uint32_t) * (size_t)c->model.V);
        ck->params = malloc(sizeof(float) * (size_t)P * 3);
        if (!ck->vocab || !ck->params) why = "out of memory";
    }
    if (!why) {
        memcpy(ck->vocab, p + CKPT_HEADER, sizeof(uint32_t) * (size_t)c->model.V);
        memcpy(ck->params, p + CKPT_HEADER + 4 * (size_t)c->model.V, sizeof(float) * (size_t)P * 3);
        ck->m = ck->params + P;
        ck->v = ck->params + 2 * P;
        for (int i = 0; i < c->model.V && !why; i++)
            if (ck->vocab[i] > 0x10FFFF || (i > 0 && ck->vocab[i] <= ck->vocab[i - 1]))
                why = "vocabulary is not sorted distinct code points";
        for (uint64_t i = 0; i < 3 * P && !why; i++)
            if (!isfinite(ck->params[i])) why = "weights or optimizer state hold NaN or infinity";
    }
    free(buf);
    if (why) {
        snprintf(err, errlen, "checkpoint %s rejected: %s", path, why);
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

