// train_llama_run — `kvdemo train --arch llama`: the LLaMA-style model of the
// article's section 3.1 trained on a text, character by character, with the
// char GPT's loop (train_loop: AdamW, warm-up and cosine decay, clipping,
// evaluations, checkpoints, resume) around train_llama.c's forward and
// backward passes, and the loss of a trained model on a text (`kvdemo eval`).
//
// Legend (train_llama.h): V vocab (pad, bos, eos and the text's characters),
// C dim, L layers, H query heads, G key/value heads, F SwiGLU hidden size,
// B batch, T max_seq_len, P parameters.
#include "train_llama.h"

#include "fileio.h"
#include "llama_convert.h"
#include "rng.h"
#include "train.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PI 3.14159265358979323846

enum { LLAMA_TEXT_OFFSET = LLAMA_EOS_ID + 1 };   // character token t is model token t + 3

int llama_train_config(LlamaConfig *out, const TrainConfig *r, int V, Err err) {
    *out = (LlamaConfig){
        .vocab_size = V + LLAMA_TEXT_OFFSET, .dim = r->model.C, .n_layers = r->model.L,
        .n_heads = r->model.H, .n_kv_heads = r->kv_heads, .hidden_dim = r->hidden,
        .max_seq_len = r->model.T, .rope_theta = 10000.0f, .norm_eps = 1e-5f, .window = r->window,
    };
    return llama_config_check(out, err);
}

int llama_train_config_default(TrainConfig *cfg, const char *preset) {
    if (train_config_default(cfg, "seed") != 0) return -1;   // the char GPT's optimizer
    cfg->arch = TRAIN_ARCH_LLAMA;
    if (!preset || strcmp(preset, "seed") == 0) {
        // docs/training.md says why this shape and recipe
        cfg->model = (GptConfig){.T = 128, .C = 128, .H = 8, .L = 4};
        cfg->kv_heads = 8;
        cfg->hidden = 352;
        cfg->batch = 16;
        cfg->iters = 2000;
        cfg->warmup = 100;
        cfg->lr = 2e-3f;       // a model of 0.8M weights takes twice the char GPT's
        cfg->min_lr = 2e-4f;
        cfg->eval_every = 100;
        cfg->ckpt_every = 100;
    } else if (strcmp(preset, "tiny") == 0) {
        cfg->model = (GptConfig){.T = 32, .C = 64, .H = 4, .L = 2};
        cfg->kv_heads = 4;
        cfg->hidden = 192;
        cfg->batch = 8;
        cfg->iters = 300;
        cfg->warmup = 20;
        cfg->eval_every = 50;
        cfg->ckpt_every = 100;
    } else {
        return -1;
    }
    return 0;
}

// ---------------------------------------------------------------------------
// The initial weights.

// x (n) ~ N(0, std^2), Box-Muller from *rng as train_init_params draws.
static void fill_normal(float *x, size_t n, double std, uint64_t *rng) {
    for (size_t j = 0; j < n; j++) {
        double u1 = rng_uniform(rng), u2 = rng_uniform(rng);
        x[j] = (float)(std * sqrt(-2.0 * log(u1)) * cos(2.0 * PI * u2));
    }
}

static void fill_ones(float *x, size_t n) {
    for (size_t j = 0; j < n; j++) x[j] = 1.0f;
}

void llama_train_init(LlamaModel *m, uint64_t seed) {
    const LlamaConfig *c = &m->cfg;
    size_t V = (size_t)c->vocab_size, C = (size_t)c->dim, F = (size_t)c->hidden_dim;
    size_t HD = (size_t)c->n_heads * c->head_dim, GD = (size_t)c->n_kv_heads * c->head_dim;
    double std = 0.02, proj = 0.02 / sqrt(2.0 * c->n_layers);
    uint64_t rng = seed ^ 0x11A3A11A3A11A3A1ull;
    // in file order, so that the draws follow the weights' bytes
    fill_normal(m->p.tok_embeddings, V * C, std, &rng);
    for (int l = 0; l < c->n_layers; l++) {
        const LlamaLayerParams *w = &m->p.layers[l];
        fill_ones(w->attention_norm, C);
        fill_normal(w->wq, C * HD, std, &rng);
        fill_normal(w->wk, C * GD, std, &rng);
        fill_normal(w->wv, C * GD, std, &rng);
        fill_normal(w->wo, HD * C, proj, &rng);
        fill_ones(w->ffn_norm, C);
        fill_normal(w->w1, C * F, std, &rng);
        fill_normal(w->w2, F * C, proj, &rng);
        fill_normal(w->w3, C * F, std, &rng);
    }
    fill_ones(m->p.norm, C);
    fill_normal(m->p.output, C * V, std, &rng);
}

// ---------------------------------------------------------------------------
// The architecture as train_loop sees it.

typedef struct {
    LlamaTrainState *s;
    const LlamaModel *m;   // its params are the loop's
    LlamaModel *grads;     // its params are the loop's grads
} LlamaArch;

// inputs (bos, c0 .. c[T-2]), targets (c0 .. c[T-1]) in model tokens.
static void llama_window(int32_t *inputs, int32_t *targets, const int32_t *tokens, int64_t start,
                         int T) {
    const int32_t *x = tokens + start;
    inputs[0] = LLAMA_BOS_ID;
    for (int t = 1; t < T; t++) inputs[t] = x[t - 1] + LLAMA_TEXT_OFFSET;
    for (int t = 0; t < T; t++) targets[t] = x[t] + LLAMA_TEXT_OFFSET;
}

static double llama_arch_forward(void *ctx, const float *params, const int32_t *inputs,
                                 const int32_t *targets, int b) {
    LlamaArch *a = ctx;
    assert(params == a->m->params);
    return llama_train_forward(a->s, a->m, inputs, targets, b);
}

static void llama_arch_backward(void *ctx, float *grads, const float *params,
                                const int32_t *inputs, const int32_t *targets, int b) {
    LlamaArch *a = ctx;
    assert(params == a->m->params && grads == a->grads->params);
    llama_train_backward(a->s, a->grads, a->m, inputs, targets, b);
}

static TrainArch llama_arch(LlamaArch *a, int B) {
    return (TrainArch){a, B, a->m->cfg.max_seq_len, llama_window, llama_arch_forward,
                       llama_arch_backward};
}

// ---------------------------------------------------------------------------
// A run: the model, its gradients, AdamW's moments, the activations.

typedef struct {
    LlamaModel model, grads;
    Pool *pool;
    LlamaTrainState *s;
    float *mv;            // (2, P) AdamW's m and v
    uint8_t *decay;       // (P)
    double *partial;      // (train_adamw_scratch(P))
    int32_t *io;          // (2, B, T) inputs and targets
} LlamaRun;

static void llama_run_free(LlamaRun *u) {
    free(u->io);
    free(u->partial);
    free(u->decay);
    free(u->mv);
    llama_train_state_free(u->s);
    pool_free(u->pool);
    llama_free(&u->grads);
    llama_free(&u->model);
    memset(u, 0, sizeof *u);
}

// Returns 0, or -1 with err (out of memory, or a shape no model file holds).
static int llama_run_new(LlamaRun *u, const LlamaConfig *cfg, int B, int threads, Err err) {
    memset(u, 0, sizeof *u);
    if (llama_new(&u->model, cfg, err) != 0 || llama_new(&u->grads, cfg, err) != 0) {
        llama_run_free(u);
        return -1;
    }
    size_t P = u->model.num_params;
    u->pool = pool_new_for(threads, llama_row_work(cfg));
    u->s = u->pool ? llama_train_state_new(cfg, B, cfg->max_seq_len, u->pool) : NULL;
    u->mv = calloc(2 * P, sizeof(float));
    u->decay = malloc(P);
    u->partial = malloc(sizeof(double) * train_adamw_scratch(P));
    u->io = malloc(sizeof(int32_t) * 2 * (size_t)B * (size_t)cfg->max_seq_len);
    if (!u->s || !u->mv || !u->decay || !u->partial || !u->io) {
        llama_run_free(u);
        return fileio_fail2(err, "out of memory for training", "训练时内存不足");
    }
    llama_train_decay_mask(u->decay, &u->model);
    return 0;
}

// Uptraining (r->from_path): *conv = the model at from_path converted as r
// says (llama_convert.h), and r's shape made its. Its vocabulary must be the
// text's. Returns 0, or -1 with err.
static int llama_from(LlamaModel *conv, TrainSetup *su, Err err) {
    TrainConfig *r = &su->r;
    LlamaModel src;
    if (llama_load(&src, r->from_path, err) != 0) return -1;
    const LlamaConfig *c = &src.cfg;
    int V = su->text.V, same = !src.bpe && c->vocab_size == V + LLAMA_TEXT_OFFSET &&
                               memcmp(src.vocab + LLAMA_TEXT_OFFSET, su->text.vocab, sizeof(uint32_t) * (size_t)V) == 0;
    int rc = -1;
    if (!same)
        fileio_fail2(err, "%s was not trained on the characters of %s: their vocabularies differ",
                     "%s 不是用 %s 的字符训练的：两者的词表不同", r->from_path, r->data_path);
    else if (llama_convert(conv, &src, r->kv_heads, (LlamaConvert)r->convert, r->seed, err) == 0) {
        r->model = (GptConfig){.T = c->max_seq_len, .C = c->dim, .H = c->n_heads, .L = c->n_layers, .V = V};
        r->hidden = c->hidden_dim;
        rc = 0;
    }
    llama_free(&src);
    return rc;
}

int llama_train(TrainSetup *su, TrainProgressFn progress, void *user, TrainResult *res, Err err) {
    TrainConfig *r = &su->r;
    LlamaModel conv = {0};
    int from = r->from_path && !r->resume_path;
    if (from && llama_from(&conv, su, err) != 0) return TRAIN_FAILED;
    LlamaConfig cfg;
    char why[256];
    int ok = llama_train_config(&cfg, r, su->text.V, ERR(err.lang, why)) == 0;
    if (!ok) fileio_fail2(err, "bad model shape: %s", "模型形状不对：%s", why);
    LlamaRun u;
    if (!ok || train_setup_check(su, cfg.max_seq_len, res, err) != 0 ||
        llama_run_new(&u, &cfg, r->batch, r->threads, err) != 0) {
        if (from) llama_free(&conv);
        return TRAIN_FAILED;
    }
    size_t P = u.model.num_params;
    float *m = u.mv, *v = u.mv + P;
    // the vocabulary: pad, bos, eos, then the text's characters
    memcpy(u.model.vocab + LLAMA_TEXT_OFFSET, su->text.vocab, sizeof(uint32_t) * (size_t)su->text.V);
    int step = 0;
    uint64_t rng = r->seed ^ 0xBA7C4E5BA7C4E5ull;
    if (r->resume_path) {
        memcpy(u.model.params, su->ck.params, sizeof(float) * P);
        memcpy(m, su->ck.m, sizeof(float) * P);
        memcpy(v, su->ck.v, sizeof(float) * P);
        step = su->ck.step;
        rng = su->ck.rng;
        train_checkpoint_free(&su->ck);
    } else if (from) {
        memcpy(u.model.params, conv.params, sizeof(float) * P);
        llama_free(&conv);
    } else {
        llama_train_init(&u.model, r->seed);
    }
    res->step = res->first_step = step;
    GptConfig shape = r->model;   // (T, C, H, L, V) as the progress line shows them
    TrainProgress pr = {1, su->text.n, shape, P, r->batch, pool_threads(u.pool), step, step, r->iters,
                        NAN, NAN, NAN, NAN, NAN, 0, 0, NAN, 0, TRAIN_ARCH_LLAMA, cfg.n_kv_heads,
                        cfg.hidden_dim};
    LlamaArch la = {u.s, &u.model, &u.grads};
    int B = r->batch;
    TrainLoop lp = {llama_arch(&la, B), r, &su->text, su->text_hash, su->n_train, u.pool,
                    u.model.params, u.grads.params, m, v, u.decay, u.partial, P,
                    u.io, u.io + (size_t)B * cfg.max_seq_len};
    // --iters 0 after a conversion: the converted model as it is
    int status = r->iters == 0 ? TRAIN_OK : train_loop(&lp, &step, &rng, &pr, progress, user, res, err);
    if (status == TRAIN_OK && llama_save(&u.model, r->out_path, err) != 0) status = TRAIN_FAILED;
    llama_run_free(&u);
    return status;
}

// ---------------------------------------------------------------------------
// The loss of a model on a text.

typedef struct {
    uint32_t cp;   // a character
    int32_t id;    // its model token minus 3
} VocabEntry;

static int cmp_entry(const void *a, const void *b) {
    uint32_t x = ((const VocabEntry *)a)->cp, y = ((const VocabEntry *)b)->cp;
    return (x > y) - (x < y);
}

// The text in the model's vocabulary: its characters (ids 3 ..) sorted for
// train_text_load, then each token mapped back to its id minus 3, which is
// what llama_window adds back. Returns 0, or -1 with err.
static int load_text(TrainText *text, const LlamaModel *m, const char *path, Err err) {
    int n = m->cfg.vocab_size - LLAMA_TEXT_OFFSET;
    VocabEntry *e = malloc(sizeof(VocabEntry) * (size_t)n);
    uint32_t *sorted = malloc(sizeof(uint32_t) * (size_t)n);
    int rc = -1;
    if (!e || !sorted) {
        fileio_fail2(err, "out of memory for evaluation", "评估时内存不足");
        goto done;
    }
    for (int i = 0; i < n; i++) e[i] = (VocabEntry){m->vocab[LLAMA_TEXT_OFFSET + i], i};
    qsort(e, (size_t)n, sizeof(VocabEntry), cmp_entry);
    for (int i = 0; i < n; i++) sorted[i] = e[i].cp;
    if (train_text_load(text, path, sorted, n, err) != 0) goto done;
    for (int64_t i = 0; i < text->n; i++) text->tokens[i] = e[text->tokens[i]].id;
    rc = 0;
done:
    free(sorted);
    free(e);
    return rc;
}

// What scoring windows needs: the threads, the activations of B windows,
// their inputs and targets.
typedef struct {
    Pool *pool;
    LlamaTrainState *s;
    int32_t *io;   // (2, B, T)
    LlamaArch la;
    TrainArch a;
} LlamaScorer;

static void scorer_free(LlamaScorer *e) {
    free(e->io);
    llama_train_state_free(e->s);
    pool_free(e->pool);
}

// Returns 0, or -1 with err (out of memory).
static int scorer_new(LlamaScorer *e, const LlamaModel *m, int threads, Err err) {
    enum { B = 8 };
    int T = m->cfg.max_seq_len;
    memset(e, 0, sizeof *e);
    e->pool = pool_new_for(threads, llama_row_work(&m->cfg));
    e->s = e->pool ? llama_train_state_new(&m->cfg, B, T, e->pool) : NULL;
    e->io = malloc(sizeof(int32_t) * 2 * (size_t)B * T);
    if (!e->s || !e->io) {
        scorer_free(e);
        return fileio_fail2(err, "out of memory for evaluation", "评估时内存不足");
    }
    e->la = (LlamaArch){e->s, m, NULL};
    e->a = llama_arch(&e->la, B);
    return 0;
}

// The mean loss of the windows of tokens start .. end-1 (max_windows of them
// spread evenly, 0: all), as train_arch_loss_windows.
static double scorer_loss(LlamaScorer *e, const TrainText *text, int64_t start, int64_t end,
                          int64_t max_windows, TrainEvalProgressFn progress, void *user, int64_t done,
                          int64_t total) {
    int32_t *inputs = e->io, *targets = e->io + (size_t)e->a.B * e->a.T;
    return train_arch_loss_windows(&e->a, e->la.m->params, text->tokens, start, end, max_windows, inputs,
                                   targets, progress, user, done, total);
}

int llama_train_eval(const LlamaModel *m, const char *data_path, int threads, double *train_loss,
                     double *val_loss, TrainEvalProgressFn progress, void *user, Err err) {
    TrainText text;
    if (load_text(&text, m, data_path, err) != 0) return -1;
    int T = m->cfg.max_seq_len;
    int64_t n_train = train_text_split(&text);
    LlamaScorer e;
    int rc = -1;
    if (n_train < T + 1 || text.n - n_train < T + 1)
        fileio_fail2(err, "%s is too short: each split needs more than %d characters",
                     "%s 太短：训练集和验证集各要多于 %d 个字符", data_path, T);
    else if (scorer_new(&e, m, threads, err) == 0) {
        // the whole validation split; as many windows spread over the training split
        int64_t val_windows = (text.n - n_train - 1) / T;
        int64_t train_windows = (n_train - 1) / T < val_windows ? (n_train - 1) / T : val_windows;
        int64_t total = (val_loss ? val_windows : 0) + (train_loss ? train_windows : 0);
        if (val_loss) *val_loss = scorer_loss(&e, &text, n_train, text.n, 0, progress, user, 0, total);
        if (train_loss)
            *train_loss = scorer_loss(&e, &text, 0, n_train, val_windows, progress, user,
                                      val_loss ? val_windows : 0, total);
        scorer_free(&e);
        rc = 0;
    }
    train_text_free(&text);
    return rc;
}

int llama_train_text_loss(const LlamaModel *m, const char *path, int threads, double *loss, Err err) {
    return llama_train_text_loss_head(m, path, 0, threads, loss, err);
}

int llama_train_text_loss_head(const LlamaModel *m, const char *path, int64_t chars, int threads, double *loss,
                               Err err) {
    TrainText text;
    if (load_text(&text, m, path, err) != 0) return -1;
    if (chars > 0 && chars < text.n) text.n = chars;
    int T = m->cfg.max_seq_len;
    LlamaScorer e;
    int rc = -1;
    if (text.n < T + 1)
        fileio_fail2(err, "%s is too short: it needs more than %d characters", "%s 太短：需要多于 %d 个字符",
                     path, T);
    else if (scorer_new(&e, m, threads, err) == 0) {
        *loss = scorer_loss(&e, &text, 0, text.n, 0, NULL, NULL, 0, 0);
        scorer_free(&e);
        rc = 0;
    }
    train_text_free(&text);
    return rc;
}
