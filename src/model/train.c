// train — how the char GPT learns: forward with saved activations, backward
// for every layer, AdamW, the learning-rate schedule and the training loop.
// The text is corpus.c's, the checkpoint checkpoint.c's, the layers
// train_layers.c's and their matmul train_matmul.c's; the tensors are those
// gpt.c describes.
//
// Legend of dimension letters:
//   B batch (sequences per step)   T context (positions)   C embedding size
//   H heads    D head size = C / H    L blocks    F MLP hidden size = 4 * C
//   V vocabulary size              N rows = B * T (one per token)
//   P number of parameters (floats)
//
// The file reads top to bottom: the initial parameters, the whole model
// (its layers are train_layers.c's), AdamW and the schedule, the loss on
// held-out text, and train_run that ties them together.
#include "train.h"

#include "checkpoint.h"
#include "train_llama.h"
#include "fileio.h"

#include "pool.h"
#include "rng.h"
#include "timer.h"

#include <assert.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PI 3.14159265358979323846

// ---------------------------------------------------------------------------
// The parameters, described once in gpt.c's table of tensors (gpt_tensor):
// each tensor's initial values and whether AdamW decays it.

// m = a view of params (P) as a model of shape cfg, its block table in
// blocks (L). No allocation.
static void model_view(GptModel *m, GptBlockParams *blocks, float *params, GptConfig cfg) {
    *m = (GptModel){.cfg = cfg, .params = params, .num_params = gpt_num_params(cfg)};
    gpt_params_carve(&m->p, blocks, params, cfg);
}

int train_init_params(float *params, GptConfig cfg, uint64_t seed) {
    GptBlockParams *blocks = malloc(sizeof(GptBlockParams) * (size_t)cfg.L);
    if (!blocks) return -1;
    GptModel m;
    model_view(&m, blocks, params, cfg);
    uint64_t rng = seed ^ 0x1D1D1D1D1D1D1D1Dull;
    for (int i = 0; i < gpt_num_tensors(cfg); i++) {
        GptTensor t = gpt_tensor(&m, i);
        for (size_t j = 0; j < t.numel; j++) {
            if (t.init_std == 0.0f) {
                t.data[j] = t.kind == GPT_NORM_WEIGHT ? 1.0f : 0.0f;
            } else {
                // Box-Muller: one normal draw from two uniforms
                double u1 = rng_uniform(&rng), u2 = rng_uniform(&rng);
                t.data[j] = (float)(t.init_std * sqrt(-2.0 * log(u1)) * cos(2.0 * PI * u2));
            }
        }
    }
    free(blocks);
    return 0;
}

int train_decay_mask(uint8_t *decay, float *params, GptConfig cfg) {
    GptBlockParams *blocks = malloc(sizeof(GptBlockParams) * (size_t)cfg.L);
    if (!blocks) return -1;
    GptModel m;
    model_view(&m, blocks, params, cfg);   // only the layout is read
    for (int i = 0; i < gpt_num_tensors(cfg); i++) {
        GptTensor t = gpt_tensor(&m, i);
        memset(decay + (t.data - m.params), t.decay, t.numel);
    }
    free(blocks);
    return 0;
}

// ---------------------------------------------------------------------------
// The whole model. The forward pass keeps every activation the backward pass
// needs, per block; the backward pass walks the blocks in reverse with a
// handful of gradient buffers reused from block to block. All buffers are
// one allocation carved by a table, made once: a training step allocates
// nothing.

struct TrainState {
    GptConfig cfg;
    int B;                    // sequences the buffers hold
    Pool *pool;
    GptBlockParams *blocks;   // (L) views for gpt_params_carve
    GptBlockParams *gblocks;  // (L) the same for the gradients
    float *memory;            // the one allocation
    // activations
    float *res;      // (L+1, N, C) residual stream: res[0] embeddings, res[l+1] after block l
    float *ln1;      // (L, N, C)
    float *ln1_mean, *ln1_rstd;   // (L, N)
    float *q, *k, *v;             // (L, N, C) each
    float *att;      // (L, B, H, T, T) softmax weights
    float *atty;     // (L, N, C) attention output before attn.output
    float *resmid;   // (L, N, C) residual after attention
    float *ln2;      // (L, N, C)
    float *ln2_mean, *ln2_rstd;   // (L, N)
    float *fch;      // (L, N, F) before GELU
    float *fcg;      // (L, N, F) after GELU
    float *lnf;      // (N, C)
    float *lnf_mean, *lnf_rstd;   // (N)
    float *logits;   // (N, V)
    float *probs;    // (N, V)
    float *losses;   // (N)
    // gradients of activations, reused by every block
    float *dres;     // (N, C)
    float *dln;      // (N, C)
    float *datty;    // (N, C)
    float *dq, *dk, *dv;          // (N, C) each
    float *dfcg, *dfch;           // (N, F) each
    float *dlogits;  // (N, V)
    float *wt;       // (max(C F, C V)) a weight matrix transposed
    float *scratch;  // threads * (D T + T T) attention scratch
    float *ln_partial;   // (layernorm_scratch(N, C)) LayerNorm's partial dw, db
};

TrainState *train_state_new(GptConfig g, int B, Pool *pool) {
    TrainState *s = calloc(1, sizeof(TrainState));
    if (!s) return NULL;
    s->cfg = g;
    s->B = B;
    s->pool = pool;
    size_t N = (size_t)B * g.T, C = g.C, F = 4 * C, L = g.L, V = g.V, T = g.T;
    size_t D = C / g.H, threads = pool ? (size_t)pool_threads(pool) : 1;
    size_t wt = C * F > C * V ? C * F : C * V;
    struct { float **ptr; size_t size; } table[] = {
        {&s->res, (L + 1) * N * C}, {&s->ln1, L * N * C}, {&s->ln1_mean, L * N},
        {&s->ln1_rstd, L * N}, {&s->q, L * N * C}, {&s->k, L * N * C}, {&s->v, L * N * C},
        {&s->att, L * B * g.H * T * T}, {&s->atty, L * N * C}, {&s->resmid, L * N * C},
        {&s->ln2, L * N * C}, {&s->ln2_mean, L * N}, {&s->ln2_rstd, L * N},
        {&s->fch, L * N * F}, {&s->fcg, L * N * F}, {&s->lnf, N * C}, {&s->lnf_mean, N},
        {&s->lnf_rstd, N}, {&s->logits, N * V}, {&s->probs, N * V}, {&s->losses, N},
        {&s->dres, N * C}, {&s->dln, N * C}, {&s->datty, N * C}, {&s->dq, N * C},
        {&s->dk, N * C}, {&s->dv, N * C}, {&s->dfcg, N * F}, {&s->dfch, N * F},
        {&s->dlogits, N * V}, {&s->wt, wt}, {&s->scratch, threads * (D * T + T * T)},
        {&s->ln_partial, layernorm_scratch((int)N, (int)C)},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) total += table[i].size;
    s->memory = malloc(total * sizeof(float));
    s->blocks = malloc(sizeof(GptBlockParams) * L);
    s->gblocks = malloc(sizeof(GptBlockParams) * L);
    if (!s->memory || !s->blocks || !s->gblocks) {
        train_state_free(s);
        return NULL;
    }
    float *p = s->memory;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        *table[i].ptr = p;
        p += table[i].size;
    }
    return s;
}

void train_state_free(TrainState *s) {
    if (!s) return;
    free(s->memory);
    free(s->blocks);
    free(s->gblocks);
    free(s);
}

const float *train_state_logits(const TrainState *s) { return s->logits; }

int train_buffers_new(TrainBuffers *b, GptConfig g, int B, int threads) {
    *b = (TrainBuffers){0};
    size_t P = gpt_num_params(g), BT = (size_t)B * g.T;
    b->pool = pool_new_for(threads, gpt_row_work(g));   // 0: the fastest for the shape
    b->s = b->pool ? train_state_new(g, B, b->pool) : NULL;
    b->memory = malloc(sizeof(float) * 4 * P);
    b->decay = malloc(P);
    b->partial = malloc(sizeof(double) * train_adamw_scratch(P));
    b->inputs = malloc(sizeof(int32_t) * 2 * BT);
    if (!b->s || !b->memory || !b->decay || !b->partial || !b->inputs) goto fail;
    b->params = b->memory, b->grads = b->memory + P, b->m = b->memory + 2 * P, b->v = b->memory + 3 * P;
    b->targets = b->inputs + BT;
    if (train_decay_mask(b->decay, b->params, g) != 0) goto fail;
    return 0;
fail:
    train_buffers_free(b);
    return -1;
}

void train_buffers_free(TrainBuffers *b) {
    free(b->inputs);
    free(b->partial);
    free(b->decay);
    free(b->memory);
    train_state_free(b->s);
    pool_free(b->pool);
    *b = (TrainBuffers){0};
}

double train_forward(TrainState *s, const float *params, const int32_t *inputs,
                     const int32_t *targets, int b) {
    assert(b >= 1 && b <= s->B);
    GptConfig g = s->cfg;
    int T = g.T, C = g.C, F = 4 * g.C, V = g.V, N = b * T;
    size_t NC = (size_t)s->B * T * C, NF = (size_t)s->B * T * F, NN = (size_t)s->B * T;
    GptParams p;
    gpt_params_carve(&p, s->blocks, (float *)params, g);

    // x = token_embedding(inputs) + position_embedding(arange(T))
    for (int n = 0; n < N; n++) {
        const float *te = p.wte + (int64_t)inputs[n] * C, *pe = p.wpe + (int64_t)(n % T) * C;
        float *x = s->res + (int64_t)n * C;
        for (int c = 0; c < C; c++) x[c] = te[c] + pe[c];
    }
    for (int l = 0; l < g.L; l++) {
        const GptBlockParams *w = &p.blocks[l];
        float *res_in = s->res + l * NC, *res_out = s->res + (l + 1) * NC;
        float *ln1 = s->ln1 + l * NC, *q = s->q + l * NC, *k = s->k + l * NC;
        float *v = s->v + l * NC, *atty = s->atty + l * NC, *resmid = s->resmid + l * NC;
        float *ln2 = s->ln2 + l * NC, *fch = s->fch + l * NF, *fcg = s->fcg + l * NF;
        float *att = s->att + (size_t)l * s->B * g.H * T * T;
        // h = ln1(x)
        layernorm_forward_pool(ln1, s->ln1_mean + l * NN, s->ln1_rstd + l * NN, res_in, w->ln1_w,
                               w->ln1_b, s->pool, N, C);
        // q, k, v = query(h), key(h), value(h)
        linear_forward(q, ln1, w->wq, w->bq, s->pool, N, C, C);
        linear_forward(k, ln1, w->wk, w->bk, s->pool, N, C, C);
        linear_forward(v, ln1, w->wv, w->bv, s->pool, N, C, C);
        // a = softmax(q k^T / sqrt(D) + mask) v, per head
        attention_forward(atty, att, q, k, v, s->scratch, s->pool, b, T, C, g.H);
        // x = x + output(a)
        memcpy(resmid, res_in, sizeof(float) * (size_t)N * C);
        train_matmul(resmid, atty, w->wo, w->bo, 1, s->pool, C, 1, C, C, N, C, C);
        // x = x + fc2(gelu(fc1(ln2(x))))
        layernorm_forward_pool(ln2, s->ln2_mean + l * NN, s->ln2_rstd + l * NN, resmid, w->ln2_w,
                               w->ln2_b, s->pool, N, C);
        linear_forward(fch, ln2, w->w1, w->b1, s->pool, N, C, F);
        gelu_forward_pool(fcg, fch, s->pool, (int64_t)N * F);
        memcpy(res_out, resmid, sizeof(float) * (size_t)N * C);
        train_matmul(res_out, fcg, w->w2, w->b2, 1, s->pool, F, 1, C, C, N, F, C);
    }
    // logits = head(ln_f(x))
    layernorm_forward_pool(s->lnf, s->lnf_mean, s->lnf_rstd, s->res + g.L * NC, p.lnf_w, p.lnf_b,
                           s->pool, N, C);
    linear_forward(s->logits, s->lnf, p.head_w, p.head_b, s->pool, N, C, V);
    if (!targets) return 0.0;
    return crossentropy_forward(s->probs, s->losses, s->logits, targets, N, V);
}

void train_backward(TrainState *s, float *grads, const float *params, const int32_t *inputs,
                    const int32_t *targets, int b) {
    GptConfig g = s->cfg;
    int T = g.T, C = g.C, F = 4 * g.C, V = g.V, N = b * T;
    size_t NC = (size_t)s->B * T * C, NF = (size_t)s->B * T * F, NN = (size_t)s->B * T;
    size_t nc = sizeof(float) * (size_t)N * C, nf = sizeof(float) * (size_t)N * F;
    GptParams p, d;
    gpt_params_carve(&p, s->blocks, (float *)params, g);
    gpt_params_carve(&d, s->gblocks, grads, g);

    // loss = cross_entropy(logits, targets).mean()
    memset(s->dlogits, 0, sizeof(float) * (size_t)N * V);
    crossentropy_backward(s->dlogits, s->probs, targets, 1.0f / N, N, V);
    memset(s->dln, 0, nc);
    linear_backward(s->dln, d.head_w, d.head_b, s->wt, s->dlogits, s->lnf, p.head_w, s->pool, N,
                    C, V);
    memset(s->dres, 0, nc);
    layernorm_backward_pool(s->dres, d.lnf_w, d.lnf_b, s->ln_partial, s->dln, s->res + g.L * NC,
                            p.lnf_w, s->lnf_mean, s->lnf_rstd, s->pool, N, C);
    for (int l = g.L - 1; l >= 0; l--) {
        const GptBlockParams *w = &p.blocks[l];
        GptBlockParams *dw = &d.blocks[l];
        float *res_in = s->res + l * NC;
        float *ln1 = s->ln1 + l * NC, *q = s->q + l * NC, *k = s->k + l * NC;
        float *v = s->v + l * NC, *atty = s->atty + l * NC, *resmid = s->resmid + l * NC;
        float *ln2 = s->ln2 + l * NC, *fch = s->fch + l * NF, *fcg = s->fcg + l * NF;
        float *att = s->att + (size_t)l * s->B * g.H * T * T;
        // x = x + fc2(gelu(fc1(ln2(x)))): dres flows to both terms
        memset(s->dfcg, 0, nf);
        linear_backward(s->dfcg, dw->w2, dw->b2, s->wt, s->dres, fcg, w->w2, s->pool, N, F, C);
        memset(s->dfch, 0, nf);
        gelu_backward_pool(s->dfch, fch, s->dfcg, s->pool, (int64_t)N * F);
        memset(s->dln, 0, nc);
        linear_backward(s->dln, dw->w1, dw->b1, s->wt, s->dfch, ln2, w->w1, s->pool, N, C, F);
        layernorm_backward_pool(s->dres, dw->ln2_w, dw->ln2_b, s->ln_partial, s->dln, resmid,
                                w->ln2_w, s->ln2_mean + l * NN, s->ln2_rstd + l * NN, s->pool, N,
                                C);
        // x = x + output(attention(ln1(x)))
        memset(s->datty, 0, nc);
        linear_backward(s->datty, dw->wo, dw->bo, s->wt, s->dres, atty, w->wo, s->pool, N, C, C);
        memset(s->dq, 0, nc);
        memset(s->dk, 0, nc);
        memset(s->dv, 0, nc);
        attention_backward(s->dq, s->dk, s->dv, s->datty, att, q, k, v, s->scratch, s->pool, b, T,
                           C, g.H);
        memset(s->dln, 0, nc);
        linear_backward(s->dln, dw->wq, dw->bq, s->wt, s->dq, ln1, w->wq, s->pool, N, C, C);
        linear_backward(s->dln, dw->wk, dw->bk, s->wt, s->dk, ln1, w->wk, s->pool, N, C, C);
        linear_backward(s->dln, dw->wv, dw->bv, s->wt, s->dv, ln1, w->wv, s->pool, N, C, C);
        layernorm_backward_pool(s->dres, dw->ln1_w, dw->ln1_b, s->ln_partial, s->dln, res_in,
                                w->ln1_w, s->ln1_mean + l * NN, s->ln1_rstd + l * NN, s->pool, N,
                                C);
    }
    // x = token_embedding(inputs) + position_embedding(arange(T))
    for (int n = 0; n < N; n++) {
        const float *dx = s->dres + (int64_t)n * C;
        float *dte = d.wte + (int64_t)inputs[n] * C, *dpe = d.wpe + (int64_t)(n % T) * C;
        for (int c = 0; c < C; c++) {
            dte[c] += dx[c];
            dpe[c] += dx[c];
        }
    }
}

// ---------------------------------------------------------------------------
// AdamW with the global gradient norm clipped.
//   torch.nn.utils.clip_grad_norm_(params, grad_clip)
//   torch.optim.AdamW(params, lr, betas=(beta1, beta2), eps, weight_decay)

typedef struct {
    float *params, *grads, *m, *v;
    const uint8_t *decay;   // (P) 1 where weight decay applies
    double *partial;        // (chunks) sums of squares, for the norm
    size_t n;               // P
    float lr, beta1, beta2, eps, wd, grad_scale, bc1, bc2;
} AdamJob;

enum { ADAM_CHUNK = 1 << 16 };

static void grad_norm_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const AdamJob *j = ctx;
    for (int c = begin; c < end; c++) {
        size_t i0 = (size_t)c * ADAM_CHUNK, i1 = i0 + ADAM_CHUNK < j->n ? i0 + ADAM_CHUNK : j->n;
        double sum = 0.0;
        for (size_t i = i0; i < i1; i++) sum += (double)j->grads[i] * j->grads[i];
        j->partial[c] = sum;
    }
}

static void adamw_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const AdamJob *j = ctx;
    size_t i0 = (size_t)begin * ADAM_CHUNK, i1 = (size_t)end * ADAM_CHUNK;
    if (i1 > j->n) i1 = j->n;
    for (size_t i = i0; i < i1; i++) {
        float g = j->grads[i] * j->grad_scale;
        float m = j->beta1 * j->m[i] + (1.0f - j->beta1) * g;
        float v = j->beta2 * j->v[i] + (1.0f - j->beta2) * g * g;
        j->m[i] = m;
        j->v[i] = v;
        float mhat = m / j->bc1, vhat = v / j->bc2;
        float p = j->params[i];
        // decoupled weight decay: p -= lr * wd * p, on matrices only
        float decay = j->decay[i] ? j->wd * p : 0.0f;
        j->params[i] = p - j->lr * (mhat / (sqrtf(vhat) + j->eps) + decay);
    }
}

size_t train_adamw_scratch(size_t P) { return (P + ADAM_CHUNK - 1) / ADAM_CHUNK; }


// Clips grads (P) to the global norm r->grad_clip and applies one AdamW
// step (step 0-based) to params, m, v (P). partial holds one double per
// chunk of ADAM_CHUNK. Returns the norm before clipping.
float train_adamw_update(float *params, float *m, float *v, float *grads, const uint8_t *decay,
                          double *partial, const TrainConfig *r, float lr, int step,
                          Pool *pool, size_t P) {
    int chunks = (int)((P + ADAM_CHUNK - 1) / ADAM_CHUNK);
    AdamJob aj = {params, grads, m, v, decay, partial, P, lr, r->beta1, r->beta2, r->eps,
                  r->weight_decay, 1.0f, 0, 0};
    pool_run_slices(pool, grad_norm_task, &aj, chunks);
    double sq = 0.0;
    for (int c = 0; c < chunks; c++) sq += partial[c];   // in order: the same sum every run
    float norm = (float)sqrt(sq);
    if (r->grad_clip > 0 && norm > r->grad_clip) aj.grad_scale = r->grad_clip / norm;
    // bias corrections of the moments: 1 - beta^t
    aj.bc1 = 1.0f - powf(r->beta1, (float)(step + 1));
    aj.bc2 = 1.0f - powf(r->beta2, (float)(step + 1));
    pool_run_slices(pool, adamw_task, &aj, chunks);
    return norm;
}

// The learning rate of step `step` (0-based): linear warm-up to lr, then
// cosine decay to min_lr at the last step.
static float lr_at(const TrainConfig *c, int step) {
    if (step < c->warmup) return c->lr * (float)(step + 1) / (float)c->warmup;
    int span = c->iters - c->warmup;
    double ratio = span > 1 ? (double)(step - c->warmup) / (span - 1) : 1.0;
    double coeff = 0.5 * (1.0 + cos(PI * ratio));
    return (float)(c->min_lr + coeff * (c->lr - c->min_lr));
}

// ---------------------------------------------------------------------------
// The recipe.

int train_config_default(TrainConfig *cfg, const char *preset) {
    memset(cfg, 0, sizeof(*cfg));
    if (!preset) preset = "seed";
    // the shapes are gpt_preset's; V comes from the text
    if (gpt_preset(&cfg->model, preset) != 0) return -1;
    cfg->model.V = 0;
    if (strcmp(preset, "seed") == 0) {
        cfg->batch = 16;
        cfg->iters = 1500;
        cfg->warmup = 50;
        cfg->eval_every = 100;
        cfg->ckpt_every = 100;
    } else {   // tiny
        cfg->batch = 8;
        cfg->iters = 300;
        cfg->warmup = 20;
        cfg->eval_every = 50;
        cfg->ckpt_every = 100;
    }
    cfg->lr = 1e-3f;
    cfg->min_lr = 1e-4f;
    cfg->weight_decay = 0.1f;
    cfg->beta1 = 0.9f;
    cfg->beta2 = 0.95f;
    cfg->eps = 1e-8f;
    cfg->grad_clip = 1.0f;
    cfg->seed = 1337;
    cfg->eval_batches = 4;
    return 0;
}

int train_config_check(const TrainConfig *c, Err why) {
    const char *bad = NULL;
    // (0 iterations: an uptraining's converted model written as it is)
    if (c->batch < 1 || c->batch > TRAIN_MAX_BATCH || c->iters < (c->from_path ? 0 : 1) ||
        c->iters > TRAIN_MAX_ITERS || c->warmup < 0 ||
        c->warmup > c->iters)
        bad = fileio_text(why.lang, "the batch must be from 1 to 4096, the iterations from 1 to 100000000 and the warm-up from 0 "
                          "to the iterations",
                          "批大小必须在 1 到 4096 之间，迭代次数在 1 到 100000000 之间，预热步数在 0 到迭代次数之间");
    else if (!(c->lr > 0 && isfinite(c->lr)))
        bad = fileio_text(why.lang, "the learning rate must be a finite number above 0", "学习率必须是大于 0 的有限数");
    else if (!(c->min_lr >= 0 && c->min_lr <= c->lr))
        bad = fileio_text(why.lang, "min_lr must be from 0 to the learning rate", "min_lr 必须在 0 到学习率之间");
    else if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
        bad = fileio_text(why.lang, "beta1 and beta2 must be from 0 to below 1", "beta1 和 beta2 必须不小于 0 且小于 1");
    else if (!(c->eps > 0 && isfinite(c->eps)))
        bad = fileio_text(why.lang, "eps must be a finite number above 0", "eps 必须是大于 0 的有限数");
    else if (!(c->grad_clip >= 0 && isfinite(c->grad_clip)))
        bad = fileio_text(why.lang, "the gradient clip must be a finite number, 0 or more", "梯度裁剪必须是不小于 0 的有限数");
    else if (!(c->weight_decay >= 0 && isfinite(c->weight_decay)))
        bad = fileio_text(why.lang, "the weight decay must be a finite number, 0 or more", "权重衰减必须是不小于 0 的有限数");
    if (!bad) return 0;
    fileio_fail2(why,
                 "%s (lr %g, min_lr %g, beta1 %g, beta2 %g, eps %g, clip %g, decay %g, batch %d, "
                 "iterations %d, warm-up %d)",
                 "%s（lr %g，min_lr %g，beta1 %g，beta2 %g，eps %g，裁剪 %g，衰减 %g，批大小 %d，"
                 "迭代 %d 次，预热 %d 步）", bad, (double)c->lr, (double)c->min_lr, (double)c->beta1,
             (double)c->beta2, (double)c->eps, (double)c->grad_clip, (double)c->weight_decay, c->batch,
             c->iters, c->warmup);
    return -1;
}

// ---------------------------------------------------------------------------
// The loss on held-out text.

// Loss over windows of the text: window w feeds tokens start + w T ..
// start + w T + T - 1 and predicts each next one. With max_windows smaller
// than the number of windows, that many are taken evenly spaced.

double train_loss_windows(TrainState *s, const float *params, const int32_t *tokens,
                          int64_t start, int64_t end, int64_t max_windows,
                          int32_t *inputs, int32_t *targets) {
    return train_loss_windows_progress(s, params, tokens, start, end, max_windows, inputs, targets,
                                       NULL, NULL, 0, 0);
}

// The char GPT's window: T tokens in, each next one out.
static void gpt_window(int32_t *inputs, int32_t *targets, const int32_t *tokens, int64_t start, int T) {
    memcpy(inputs, tokens + start, sizeof(int32_t) * (size_t)T);
    memcpy(targets, tokens + start + 1, sizeof(int32_t) * (size_t)T);
}

static double gpt_arch_forward(void *ctx, const float *params, const int32_t *inputs,
                               const int32_t *targets, int b) {
    return train_forward(ctx, params, inputs, targets, b);
}

static void gpt_arch_backward(void *ctx, float *grads, const float *params, const int32_t *inputs,
                              const int32_t *targets, int b) {
    train_backward(ctx, grads, params, inputs, targets, b);
}

static TrainArch gpt_arch(TrainState *s) {
    return (TrainArch){s, s->B, s->cfg.T, gpt_window, gpt_arch_forward, gpt_arch_backward};
}

double train_loss_windows_progress(TrainState *s, const float *params, const int32_t *tokens,
                                   int64_t start, int64_t end, int64_t max_windows, int32_t *inputs,
                                   int32_t *targets, TrainEvalProgressFn progress, void *user,
                                   int64_t done, int64_t all) {
    TrainArch a = gpt_arch(s);
    return train_arch_loss_windows(&a, params, tokens, start, end, max_windows, inputs, targets,
                                   progress, user, done, all);
}

double train_arch_loss_windows(const TrainArch *a, const float *params, const int32_t *tokens,
                               int64_t start, int64_t end, int64_t max_windows, int32_t *inputs,
                               int32_t *targets, TrainEvalProgressFn progress, void *user,
                               int64_t done, int64_t all) {
    int T = a->T;
    int64_t count = (end - start - 1) / T;
    if (count < 1) return NAN;
    int64_t use = max_windows > 0 && max_windows < count ? max_windows : count;
    double total = 0.0;
    for (int64_t w0 = 0; w0 < use; w0 += a->B) {
        int b = (int)(use - w0 < a->B ? use - w0 : a->B);
        for (int i = 0; i < b; i++) {
            int64_t w = (w0 + i) * count / use;
            a->window(inputs + (int64_t)i * T, targets + (int64_t)i * T, tokens, start + w * T, T);
        }
        total += a->forward(a->ctx, params, inputs, targets, b) * b;
        if (progress) progress(done + w0 + b, all > 0 ? all : use, user);
    }
    return total / use;
}

// ---------------------------------------------------------------------------
// train_run: the loop that ties everything together.

static volatile sig_atomic_t stop_requested = 0;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

// Draws B windows from the training split.
static void draw_batch(const TrainArch *a, int32_t *inputs, int32_t *targets, const int32_t *tokens,
                       int64_t n_train, int B, uint64_t *rng) {
    int T = a->T;
    for (int b = 0; b < B; b++) {
        int64_t start = (int64_t)(rng_next(rng) % (uint64_t)(n_train - T));
        a->window(inputs + (int64_t)b * T, targets + (int64_t)b * T, tokens, start, T);
    }
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static int save_checkpoint(const TrainLoop *lp, int step, uint64_t rng, Err err) {
    TrainCheckpoint ck = {*lp->r, lp->text->vocab, step, rng, lp->text_hash, lp->text->n,
                          lp->params, lp->m, lp->v, lp->P};
    return train_checkpoint_save(lp->r->ckpt_path, &ck, err);
}

// One step: a batch, forward, backward, clip, AdamW. Returns the batch's
// loss; *norm the gradient norm, *lr the learning rate used.
static float one_step(const TrainLoop *lp, int step, uint64_t *rng, float *lr, float *norm) {
    const TrainConfig *r = lp->r;
    const TrainArch *a = &lp->arch;
    draw_batch(a, lp->inputs, lp->targets, lp->text->tokens, lp->n_train, r->batch, rng);
    float loss = (float)a->forward(a->ctx, lp->params, lp->inputs, lp->targets, r->batch);
    memset(lp->grads, 0, sizeof(float) * lp->P);
    a->backward(a->ctx, lp->grads, lp->params, lp->inputs, lp->targets, r->batch);
    *lr = lr_at(r, step);
    *norm = train_adamw_update(lp->params, lp->m, lp->v, lp->grads, lp->decay, lp->partial, r, *lr,
                               step, lp->pool, lp->P);
    return loss;
}

// A non-finite loss or gradient leaves weights that no model file may
// hold. Returns 0 when the step's loss, norm and weights are finite, else
// -1 with err (the last good checkpoint is kept as it is).
static int check_finite(const TrainLoop *lp, float loss, float norm, int step, Err err) {
    if (isfinite(loss) && isfinite(norm) && all_finite(lp->params, lp->P)) return 0;
    return fileio_fail2(err, "the %s became %s at step %d; the last checkpoint (%s) is kept; try a lower --lr",
                        "%s变成了%s（第 %d 步）；上一个检查点（%s）保留不动；请试试更小的 --lr",
                        isfinite(loss) ? fileio_text(err.lang, "weights", "权重") : fileio_text(err.lang, "loss", "损失"),
                        isnan(loss) || isnan(norm) ? "NaN" : fileio_text(err.lang, "infinite", "无穷大"), step,
                        lp->r->ckpt_path);
}

// nanoGPT's estimate_loss into pr: the same number of windows (eval_max)
// from each split (the training split's spread evenly over it). Only the
// activations are touched, so the trained bytes do not change. Returns the
// seconds it took.
static double estimate_loss(const TrainLoop *lp, TrainProgress *pr, int64_t eval_max) {
    double e0 = timer_now();
    const int32_t *tok = lp->text->tokens;
    pr->val_loss = (float)train_arch_loss_windows(&lp->arch, lp->params, tok, lp->n_train, lp->text->n, eval_max,
                                                  lp->inputs, lp->targets, NULL, NULL, 0, 0);
    pr->train_loss = (float)train_arch_loss_windows(&lp->arch, lp->params, tok, 0, lp->n_train, eval_max,
                                                    lp->inputs, lp->targets, NULL, NULL, 0, 0);
    return timer_now() - e0;
}

// The step's figures into pr and res: its loss, rate and norm, the time
// elapsed, and the speed of the training alone (train_time seconds since
// first_step) with the time left at it.
static void note_step(TrainProgress *pr, TrainResult *res, const TrainLoop *lp, int step, int first_step,
                      float loss, float lr, float norm, double elapsed, double train_time) {
    pr->step = step;
    pr->loss = loss;
    pr->lr = lr;
    pr->grad_norm = norm;
    pr->elapsed_s = elapsed;
    pr->tokens_per_s = 0;
    pr->eta_s = NAN;
    if (train_time > 0) {
        pr->tokens_per_s = (double)(step - first_step) * lp->r->batch * lp->arch.T / train_time;
        pr->eta_s = train_time / (step - first_step) * (lp->r->iters - step);
    }
    res->step = step;
    res->loss = loss;
    res->val_loss = pr->val_loss;
    res->elapsed_s = elapsed;
    res->tokens_per_s = pr->tokens_per_s;
}

int train_loop(const TrainLoop *lp, int *step_io, uint64_t *rng_io, TrainProgress *pr,
               TrainProgressFn progress, void *user, TrainResult *res, Err err) {
    const TrainConfig *r = lp->r;
    int step = *step_io, first_step = step;
    uint64_t rng = *rng_io;
    if (progress) progress(pr, user);
    pr->starting = 0;

    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    stop_requested = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    double t0 = timer_now(), eval_time = 0.0;
    int64_t eval_max = (int64_t)r->eval_batches * r->batch;
    int status = TRAIN_OK;
    while (step < r->iters) {
        float lr, norm, loss = one_step(lp, step, &rng, &lr, &norm);
        step++;
        if (check_finite(lp, loss, norm, step, err) != 0) {
            status = TRAIN_FAILED;
            break;
        }
        pr->evaluated = 0;
        if ((r->eval_every > 0 && step % r->eval_every == 0) || step == r->iters) {
            eval_time += estimate_loss(lp, pr, eval_max);
            pr->evaluated = 1;
        }
        int stop = stop_requested;
        double elapsed = timer_now() - t0;
        note_step(pr, res, lp, step, first_step, loss, lr, norm, elapsed, elapsed - eval_time);
        if (progress) stop |= progress(pr, user) != 0;
        stop |= stop_requested;

        if (stop || (r->ckpt_every > 0 && step % r->ckpt_every == 0 && step < r->iters)) {
            if (save_checkpoint(lp, step, rng, err)) {
                status = TRAIN_FAILED;
                break;
            }
            if (stop) {
                status = TRAIN_STOPPED;
                break;
            }
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    res->elapsed_s = timer_now() - t0;
    *step_io = step;
    *rng_io = rng;
    return status;
}

int train_setup(TrainSetup *su, const TrainConfig *cfg, TrainResult *res, Err err) {
    memset(su, 0, sizeof *su);
    su->r = *cfg;
    TrainConfig *r = &su->r;
    TrainCheckpoint *ck = &su->ck;
    memset(res, 0, sizeof *res);
    res->loss = res->val_loss = NAN;
    if (r->resume_path) {
        if (train_checkpoint_load(r->resume_path, ck, err) != 0) return -1;
        // the recipe is the checkpoint's: only then does the run end as an
        // uninterrupted one would
        const TrainConfig *c = &ck->cfg;
        // --window with --resume may only repeat the checkpoint's band
        if (r->window && r->window != c->window && !c->window)
            return fileio_fail2(err, "--window %d: checkpoint %s was trained without a window; resume it "
                                "without --window", "--window %d：检查点 %s 训练时没有窗口；续训时不要给 --window",
                                r->window, r->resume_path);
        if (r->window && r->window != c->window)
            return fileio_fail2(err, "--window %d: checkpoint %s was trained with --window %d; resume it "
                                "with that or without --window", "--window %d：检查点 %s 训练时用的是 --window %d；"
                                "续训时给同样的值，或不给 --window", r->window, r->resume_path, c->window);
        r->window = c->window;
        r->model = c->model;
        r->arch = c->arch;
        r->kv_heads = c->kv_heads;
        r->hidden = c->hidden;
        r->batch = c->batch;
        r->iters = c->iters;
        r->warmup = c->warmup;
        r->lr = c->lr;
        r->min_lr = c->min_lr;
        r->weight_decay = c->weight_decay;
        r->beta1 = c->beta1;
        r->beta2 = c->beta2;
        r->eps = c->eps;
        r->grad_clip = c->grad_clip;
        r->seed = c->seed;
    }
    if (train_text_load(&su->text, r->data_path, r->resume_path ? ck->vocab : NULL,
                        r->resume_path ? ck->cfg.model.V : 0, err) != 0)
        return -1;
    r->model.V = su->text.V;
    su->text_hash = train_text_hash(&su->text);
    if (r->resume_path && (su->text_hash != ck->text_hash || su->text.n != ck->text_tokens))
        return fileio_fail2(err, "%s is not the text checkpoint %s was trained on",
                            "%s 不是检查点 %s 训练时用的文本", r->data_path, r->resume_path);
    su->n_train = train_text_split(&su->text);
    return 0;
}

int train_setup_check(TrainSetup *su, int T, TrainResult *res, Err err) {
    TrainConfig *r = &su->r;
    char why[512];
    if (su->n_train < T + 1 || su->text.n - su->n_train < T + 1)
        return fileio_fail2(err, "%s is too short for context %d: %lld characters, each split needs more than %d",
                            "%s 对上下文 %d 来说太短：只有 %lld 个字符，训练集和验证集各要多于 %d 个",
                            r->data_path, T, (long long)su->text.n, T);
    if (train_config_check(r, ERR(err.lang, why)) != 0)
        return fileio_fail2(err, "bad training recipe: %s", "训练参数不对：%s", why);
    // The checkpoint goes next to the model: PATH.ckpt for --out PATH.
    if (r->ckpt_path) snprintf(res->ckpt_path, sizeof res->ckpt_path, "%s", r->ckpt_path);
    else if ((size_t)snprintf(res->ckpt_path, sizeof res->ckpt_path, "%s.ckpt", r->out_path) >= sizeof res->ckpt_path)
        return fileio_fail2(err, "the path %.60s... is too long", "路径 %.60s... 太长", r->out_path);
    r->ckpt_path = res->ckpt_path;
    // The model and the checkpoint are written after the work: a path that
    // cannot be written (a folder, a device, a missing or read-only folder)
    // or that another kvdemo is writing is found now, and both stay locked
    // for this run until the end.
    if (fileio_claim(r->out_path, err) != 0) return -1;
    su->claimed_out = 1;
    if (fileio_claim(r->ckpt_path, err) != 0) return -1;
    su->claimed_ckpt = 1;
    return 0;
}

void train_setup_free(TrainSetup *su) {
    if (su->claimed_out) fileio_release(su->r.out_path);
    if (su->claimed_ckpt) fileio_release(su->r.ckpt_path);
    if (su->ck.params || su->ck.vocab) train_checkpoint_free(&su->ck);
    train_text_free(&su->text);
    memset(su, 0, sizeof *su);
}

// The char GPT's run, once train_setup has read the text (and checkpoint).
static int gpt_train(TrainSetup *su, TrainProgressFn progress, void *user, TrainResult *res,
                     Err err) {
    TrainConfig *r = &su->r;
    GptConfig g = r->model;
    char why[512];
    if (gpt_check_config(g, ERR(err.lang, why)) != 0)   // the model file's own limits
        return fileio_fail2(err, "bad model shape: %s", "模型形状不对：%s", why), TRAIN_FAILED;
    if (train_setup_check(su, g.T, res, err) != 0) return TRAIN_FAILED;
    int status = TRAIN_FAILED;
    TrainBuffers tb = {0};
    size_t P = gpt_num_params(g);
    GptBlockParams *blocks = malloc(sizeof(GptBlockParams) * (size_t)g.L);
    if (!blocks || train_buffers_new(&tb, g, r->batch, r->threads) != 0) goto oom;
    int step = 0;
    uint64_t rng = r->seed ^ 0xBA7C4E5BA7C4E5ull;
    if (r->resume_path) {
        memcpy(tb.params, su->ck.params, sizeof(float) * P);
        memcpy(tb.m, su->ck.m, sizeof(float) * P);
        memcpy(tb.v, su->ck.v, sizeof(float) * P);
        step = su->ck.step;
        rng = su->ck.rng;
        train_checkpoint_free(&su->ck);
    } else {
        if (train_init_params(tb.params, g, r->seed) != 0) goto oom;
        memset(tb.m, 0, sizeof(float) * P);
        memset(tb.v, 0, sizeof(float) * P);
    }
    res->step = res->first_step = step;
    TrainProgress pr = {1, su->text.n, g, P, r->batch, pool_threads(tb.pool), step, step, r->iters,
                        NAN, NAN, NAN, NAN, NAN, 0, 0, NAN, 0, TRAIN_ARCH_GPT, 0, 0};
    TrainLoop lp = {gpt_arch(tb.s), r, &su->text, su->text_hash, su->n_train, tb.pool, tb.params,
                    tb.grads, tb.m, tb.v, tb.decay, tb.partial, P, tb.inputs, tb.targets};
    status = train_loop(&lp, &step, &rng, &pr, progress, user, res, err);
    if (status == TRAIN_OK) {
        GptModel model = {.cfg = g, .vocab = su->text.vocab, .params = tb.params, .num_params = P};
        gpt_params_carve(&model.p, blocks, tb.params, g);
        if (gpt_save(&model, r->out_path, err) != 0) status = TRAIN_FAILED;
    }
    goto done;
oom:
    fileio_fail2(err, "out of memory for training", "训练时内存不足");
    status = TRAIN_FAILED;
done:
    free(blocks);
    train_buffers_free(&tb);
    return status;
}

int train_run(const TrainConfig *cfg, TrainProgressFn progress, void *user, TrainResult *result,
              Err err) {
    TrainResult res_local;
    TrainResult *res = result ? result : &res_local;
    TrainSetup su;
    int status = TRAIN_FAILED;
    if (train_setup(&su, cfg, res, err) == 0)
        status = su.r.arch == TRAIN_ARCH_LLAMA ? llama_train(&su, progress, user, res, err)
                                               : gpt_train(&su, progress, user, res, err);
    train_setup_free(&su);
    return status;
}
