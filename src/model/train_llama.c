// train_llama — the LLaMA-style model's forward pass for training (every
// activation kept) and its backward pass, layer by layer. The file reads top
// to bottom: the layers that are the LLaMA model's own (RMSNorm, the rotary
// embedding's backward, SwiGLU), the buffers, the forward pass, the backward
// pass. Linear layers, attention and cross-entropy are train_layers.c's.
//
// Legend (train_llama.h): V vocab, C dim, L layers, H query heads, G
// key/value heads, D = C / H, F SwiGLU hidden size, B batch, T positions,
// N = b * T rows; HD = H * D, GD = G * D.
#include "train_llama.h"

#include "train.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int min_int(int a, int b) { return a < b ? a : b; }

// ---------------------------------------------------------------------------
// RMSNorm over the C features of each row, in chunks of RMS_ROWS rows; the
// backward pass's dw is summed per chunk into its own partial, and the
// partials are added in chunk order.

enum { RMS_ROWS = 64 };

typedef struct {
    float *out, *rstd, *dw, *partial;
    const float *x, *w, *dout, *crstd;
    float eps;
    int N, C;
} RmsJob;

static void rmsnorm_forward_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const RmsJob *j = ctx;
    int C = j->C;
    for (int n = begin * RMS_ROWS; n < min_int(end * RMS_ROWS, j->N); n++) {
        const float *x = j->x + (int64_t)n * C;
        float *o = j->out + (int64_t)n * C;
        // x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        float ss = 0.0f;
        for (int c = 0; c < C; c++) ss += x[c] * x[c];
        float r = 1.0f / sqrtf(ss / (float)C + j->eps);
        j->rstd[n] = r;
        // output * self.weight
        for (int c = 0; c < C; c++) o[c] = (x[c] * r) * j->w[c];
    }
}

void rmsnorm_forward_pool(float *out, float *rstd, const float *x, const float *w, float eps,
                          Pool *pool, int N, int C) {
    // out (N, C), rstd (N), x (N, C), w (C)
    RmsJob j = {.out = out, .rstd = rstd, .x = x, .w = w, .eps = eps, .N = N, .C = C};
    pool_run_slices(pool, rmsnorm_forward_task, &j, (N + RMS_ROWS - 1) / RMS_ROWS);
}

static void rmsnorm_backward_task(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const RmsJob *j = ctx;
    int C = j->C;
    for (int chunk = begin; chunk < end; chunk++) {
        float *pdw = j->partial + (int64_t)chunk * C;
        memset(pdw, 0, sizeof(float) * (size_t)C);
        for (int n = chunk * RMS_ROWS; n < min_int((chunk + 1) * RMS_ROWS, j->N); n++) {
            const float *x = j->x + (int64_t)n * C, *dy = j->dout + (int64_t)n * C;
            float *dx = j->out + (int64_t)n * C;
            float r = j->crstd[n], gx_mean = 0.0f;
            for (int c = 0; c < C; c++) gx_mean += dy[c] * j->w[c] * (x[c] * r);
            gx_mean /= (float)C;
            for (int c = 0; c < C; c++) {
                float xhat = x[c] * r;
                pdw[c] += dy[c] * xhat;
                dx[c] += r * (dy[c] * j->w[c] - xhat * gx_mean);
            }
        }
    }
}

size_t rmsnorm_scratch(int N, int C) { return (size_t)(N + RMS_ROWS - 1) / RMS_ROWS * (size_t)C; }

void rmsnorm_backward_pool(float *dx, float *dw, float *partial, const float *dout,
                           const float *x, const float *w, const float *rstd, Pool *pool, int N,
                           int C) {
    // dx (N, C), dw (C), partial (rmsnorm_scratch), dout x (N, C), w (C), rstd (N)
    int chunks = (N + RMS_ROWS - 1) / RMS_ROWS;
    RmsJob j = {.out = dx, .partial = partial, .x = x, .w = w, .dout = dout, .crstd = rstd,
                .N = N, .C = C};
    pool_run_slices(pool, rmsnorm_backward_task, &j, chunks);
    for (int chunk = 0; chunk < chunks; chunk++)
        for (int c = 0; c < C; c++) dw[c] += partial[(int64_t)chunk * C + c];
}

// ---------------------------------------------------------------------------
// The rotary embedding: forward is llama_apply_rotary_emb, (a + bi)(c + di).
// A rotation's transpose is its inverse, the rotation by conj(c + di).

void rope_backward(float *dx, const float *freqs_cis, int N, int nh, int D) {
    // dx (N, nh, D), freqs_cis (N, D/2, 2)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < nh; h++) {
            float *v = dx + ((int64_t)n * nh + h) * D;
            const float *f = freqs_cis + (int64_t)n * D;
            for (int i = 0; i < D / 2; i++) {
                float a = v[2 * i], b = v[2 * i + 1];   // d out
                float c = f[2 * i], d = f[2 * i + 1];   // cos, sin
                v[2 * i] = a * c + b * d;               // (a + bi)(c - di)
                v[2 * i + 1] = b * c - a * d;
            }
        }
}

// ---------------------------------------------------------------------------
// SwiGLU: self.w2(F.silu(self.w1(x)) * self.w3(x)); here the product.

void swiglu_forward(float *out, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = a[i] / (1.0f + expf(-a[i])) * b[i];   // silu(a) * b
}

void swiglu_backward(float *da, float *db, const float *dout, const float *a, const float *b,
                     int64_t n) {
    // silu(a) = a * s with s = sigmoid(a);  silu'(a) = s * (1 + a * (1 - s))
    for (int64_t i = 0; i < n; i++) {
        float s = 1.0f / (1.0f + expf(-a[i]));
        da[i] = dout[i] * b[i] * (s * (1.0f + a[i] * (1.0f - s)));
        db[i] = dout[i] * (a[i] * s);
    }
}

// ---------------------------------------------------------------------------
// The buffers: one allocation carved by a table, made once.

struct LlamaTrainState {
    LlamaConfig cfg;
    int B, T;
    Pool *pool;
    float *memory;
    // activations, per layer
    float *res;      // (L+1, N, C) residual stream: res[0] embeddings, res[l+1] after layer l
    float *xn1;      // (L, N, C)  attention_norm(x)
    float *rstd1;    // (L, N)
    float *q;        // (L, N, HD) rotated
    float *k, *v;    // (L, N, GD) k rotated
    float *att;      // (L, B, H, T, T) softmax weights
    float *atty;     // (L, N, HD) attention output before wo
    float *resmid;   // (L, N, C)  h = x + attention(...)
    float *xn2;      // (L, N, C)  ffn_norm(h)
    float *rstd2;    // (L, N)
    float *h1, *h3;  // (L, N, F)  w1(x), w3(x)
    float *hg;       // (L, N, F)  silu(w1(x)) * w3(x)
    float *xnf;      // (N, C)     norm(h)
    float *rstdf;    // (N)
    float *logits;   // (N, V)
    float *probs;    // (N, V)
    float *losses;   // (N)
    // gradients of activations, reused by every layer
    float *dres;     // (N, C)
    float *dxn;      // (N, C)
    float *datty;    // (N, HD)
    float *dq;       // (N, HD)
    float *dk, *dv;  // (N, GD)
    float *dhg, *dh1, *dh3;   // (N, F)
    float *dlogits;  // (N, V)
    float *wt;       // (max(C HD, C F, C V)) a weight matrix transposed
    float *scratch;  // threads * (D T + T T) attention scratch
    float *partial;  // (rmsnorm_scratch(N, C))
};

LlamaTrainState *llama_train_state_new(const LlamaConfig *cfg, int B, int T, Pool *pool) {
    assert(B >= 1 && T >= 1 && T <= cfg->max_seq_len);
    LlamaTrainState *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cfg = *cfg, s->B = B, s->T = T, s->pool = pool;
    size_t N = (size_t)B * T, C = cfg->dim, L = cfg->n_layers, H = cfg->n_heads;
    size_t D = cfg->dim / cfg->n_heads, HD = H * D, GD = cfg->n_kv_heads * D;
    size_t F = cfg->hidden_dim, V = cfg->vocab_size, TT = (size_t)T * T;
    size_t threads = pool ? (size_t)pool_threads(pool) : 1;
    size_t wt = C * HD > C * F ? C * HD : C * F;
    if (C * V > wt) wt = C * V;
    struct { float **ptr; size_t size; } table[] = {
        {&s->res, (L + 1) * N * C}, {&s->xn1, L * N * C}, {&s->rstd1, L * N},
        {&s->q, L * N * HD}, {&s->k, L * N * GD}, {&s->v, L * N * GD},
        {&s->att, L * B * H * TT}, {&s->atty, L * N * HD}, {&s->resmid, L * N * C},
        {&s->xn2, L * N * C}, {&s->rstd2, L * N}, {&s->h1, L * N * F}, {&s->h3, L * N * F},
        {&s->hg, L * N * F}, {&s->xnf, N * C}, {&s->rstdf, N}, {&s->logits, N * V},
        {&s->probs, N * V}, {&s->losses, N}, {&s->dres, N * C}, {&s->dxn, N * C},
        {&s->datty, N * HD}, {&s->dq, N * HD}, {&s->dk, N * GD}, {&s->dv, N * GD},
        {&s->dhg, N * F}, {&s->dh1, N * F}, {&s->dh3, N * F}, {&s->dlogits, N * V},
        {&s->wt, wt}, {&s->scratch, threads * (D * T + TT)},
        {&s->partial, rmsnorm_scratch((int)N, (int)C)},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) total += table[i].size;
    s->memory = calloc(total, sizeof(float));
    if (!s->memory) {
        free(s);
        return NULL;
    }
    float *p = s->memory;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        *table[i].ptr = p;
        p += table[i].size;
    }
    return s;
}

void llama_train_state_free(LlamaTrainState *s) {
    if (!s) return;
    free(s->memory);
    free(s);
}

const float *llama_train_state_logits(const LlamaTrainState *s) { return s->logits; }

void llama_train_decay_mask(uint8_t *decay, const LlamaModel *m) {
    memset(decay, 1, m->num_params);
    size_t C = (size_t)m->cfg.dim;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        memset(decay + (m->p.layers[l].attention_norm - m->params), 0, C);
        memset(decay + (m->p.layers[l].ffn_norm - m->params), 0, C);
    }
    memset(decay + (m->p.norm - m->params), 0, C);
}

// ---------------------------------------------------------------------------
// The forward pass: Transformer.forward(tokens, start_pos=0) over whole
// sequences, the mask causal, every activation kept.

// One TransformerBlock at layer l: res[l] -> res[l+1].
static void block_forward(LlamaTrainState *s, const LlamaModel *m, int l, int b) {
    const LlamaConfig *c = &m->cfg;
    const LlamaLayerParams *w = &m->p.layers[l];
    int T = s->T, C = c->dim, H = c->n_heads, G = c->n_kv_heads, D = c->head_dim;
    int HD = H * D, GD = G * D, F = c->hidden_dim, N = b * T;
    size_t NR = (size_t)s->B * T;   // rows of one layer's slice
    float *x = s->res + l * NR * C, *out = s->res + (l + 1) * NR * C;
    float *xn1 = s->xn1 + l * NR * C, *q = s->q + l * NR * HD, *k = s->k + l * NR * GD;
    float *v = s->v + l * NR * GD, *atty = s->atty + l * NR * HD, *h = s->resmid + l * NR * C;
    float *xn2 = s->xn2 + l * NR * C, *h1 = s->h1 + l * NR * F, *h3 = s->h3 + l * NR * F;
    float *hg = s->hg + l * NR * F, *att = s->att + (size_t)l * s->B * H * T * T;
    // self.attention_norm(x)
    rmsnorm_forward_pool(xn1, s->rstd1 + l * NR, x, w->attention_norm, c->norm_eps, s->pool, N, C);
    // xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
    linear_forward(q, xn1, w->wq, NULL, s->pool, N, C, HD);
    linear_forward(k, xn1, w->wk, NULL, s->pool, N, C, GD);
    linear_forward(v, xn1, w->wv, NULL, s->pool, N, C, GD);
    // xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis[0:T])
    for (int i = 0; i < b; i++) {
        llama_apply_rotary_emb(q + (size_t)i * T * HD, m->freqs_cis, T, H, D);
        llama_apply_rotary_emb(k + (size_t)i * T * GD, m->freqs_cis, T, G, D);
    }
    // scores = softmax(xq @ keys^T / sqrt(D) + mask); output = scores @ values,
    // keys and values of head h / (H / G): repeat_kv without the copy
    // (with cfg.window W, the band mask of sliding-window attention too)
    attention_forward_band(atty, att, q, k, v, s->scratch, s->pool, b, T, H, G, D, c->window);
    // h = x + self.wo(output)
    memcpy(h, x, sizeof(float) * (size_t)N * C);
    train_matmul(h, atty, w->wo, NULL, 1, s->pool, HD, 1, C, C, N, HD, C);
    // out = h + self.w2(F.silu(self.w1(x)) * self.w3(x)), x = self.ffn_norm(h)
    rmsnorm_forward_pool(xn2, s->rstd2 + l * NR, h, w->ffn_norm, c->norm_eps, s->pool, N, C);
    linear_forward(h1, xn2, w->w1, NULL, s->pool, N, C, F);
    linear_forward(h3, xn2, w->w3, NULL, s->pool, N, C, F);
    swiglu_forward(hg, h1, h3, (int64_t)N * F);
    memcpy(out, h, sizeof(float) * (size_t)N * C);
    train_matmul(out, hg, w->w2, NULL, 1, s->pool, F, 1, C, C, N, F, C);
}

double llama_train_forward(LlamaTrainState *s, const LlamaModel *m, const int32_t *inputs,
                           const int32_t *targets, int b) {
    assert(b >= 1 && b <= s->B);
    const LlamaConfig *c = &m->cfg;
    int T = s->T, C = c->dim, V = c->vocab_size, L = c->n_layers, N = b * T;
    // h = self.tok_embeddings(tokens)
    for (int n = 0; n < N; n++)
        memcpy(s->res + (int64_t)n * C, m->p.tok_embeddings + (int64_t)inputs[n] * C,
               sizeof(float) * (size_t)C);
    for (int l = 0; l < L; l++) block_forward(s, m, l, b);
    // h = self.norm(h); output = self.output(h), every position
    float *last = s->res + (size_t)L * s->B * T * C;
    rmsnorm_forward_pool(s->xnf, s->rstdf, last, m->p.norm, c->norm_eps, s->pool, N, C);
    linear_forward(s->logits, s->xnf, m->p.output, NULL, s->pool, N, C, V);
    if (!targets) return 0.0;
    // F.cross_entropy(logits.view(-1, V), targets.view(-1))
    return crossentropy_forward(s->probs, s->losses, s->logits, targets, N, V);
}

// ---------------------------------------------------------------------------
// The backward pass, layers in reverse. dres holds d loss / d res[l+1] on
// entry to block_backward and d loss / d res[l] on return.

static void block_backward(LlamaTrainState *s, LlamaModel *grads, const LlamaModel *m, int l,
                           int b) {
    const LlamaConfig *c = &m->cfg;
    const LlamaLayerParams *w = &m->p.layers[l];
    LlamaLayerParams *dw = &grads->p.layers[l];
    int T = s->T, C = c->dim, H = c->n_heads, G = c->n_kv_heads, D = c->head_dim;
    int HD = H * D, GD = G * D, F = c->hidden_dim, N = b * T;
    size_t NR = (size_t)s->B * T;
    float *x = s->res + l * NR * C;
    float *xn1 = s->xn1 + l * NR * C, *q = s->q + l * NR * HD, *k = s->k + l * NR * GD;
    float *v = s->v + l * NR * GD, *atty = s->atty + l * NR * HD, *h = s->resmid + l * NR * C;
    float *xn2 = s->xn2 + l * NR * C, *h1 = s->h1 + l * NR * F, *h3 = s->h3 + l * NR * F;
    float *hg = s->hg + l * NR * F, *att = s->att + (size_t)l * s->B * H * T * T;
    size_t nc = sizeof(float) * (size_t)N * C;
    // out = h + w2(silu(w1(x)) * w3(x)): dres flows to both terms
    memset(s->dhg, 0, sizeof(float) * (size_t)N * F);
    linear_backward(s->dhg, dw->w2, NULL, s->wt, s->dres, hg, w->w2, s->pool, N, F, C);
    swiglu_backward(s->dh1, s->dh3, s->dhg, h1, h3, (int64_t)N * F);
    memset(s->dxn, 0, nc);
    linear_backward(s->dxn, dw->w1, NULL, s->wt, s->dh1, xn2, w->w1, s->pool, N, C, F);
    linear_backward(s->dxn, dw->w3, NULL, s->wt, s->dh3, xn2, w->w3, s->pool, N, C, F);
    rmsnorm_backward_pool(s->dres, dw->ffn_norm, s->partial, s->dxn, h, w->ffn_norm,
                          s->rstd2 + l * NR, s->pool, N, C);
    // h = x + wo(attention(attention_norm(x)))
    memset(s->datty, 0, sizeof(float) * (size_t)N * HD);
    linear_backward(s->datty, dw->wo, NULL, s->wt, s->dres, atty, w->wo, s->pool, N, HD, C);
    memset(s->dq, 0, sizeof(float) * (size_t)N * HD);
    memset(s->dk, 0, sizeof(float) * (size_t)N * GD);
    memset(s->dv, 0, sizeof(float) * (size_t)N * GD);
    attention_backward_grouped(s->dq, s->dk, s->dv, s->datty, att, q, k, v, s->scratch, s->pool,
                               b, T, H, G, D);
    // apply_rotary_emb's backward: the inverse rotation
    for (int i = 0; i < b; i++) {
        rope_backward(s->dq + (size_t)i * T * HD, m->freqs_cis, T, H, D);
        rope_backward(s->dk + (size_t)i * T * GD, m->freqs_cis, T, G, D);
    }
    memset(s->dxn, 0, nc);
    linear_backward(s->dxn, dw->wq, NULL, s->wt, s->dq, xn1, w->wq, s->pool, N, C, HD);
    linear_backward(s->dxn, dw->wk, NULL, s->wt, s->dk, xn1, w->wk, s->pool, N, C, GD);
    linear_backward(s->dxn, dw->wv, NULL, s->wt, s->dv, xn1, w->wv, s->pool, N, C, GD);
    rmsnorm_backward_pool(s->dres, dw->attention_norm, s->partial, s->dxn, x, w->attention_norm,
                          s->rstd1 + l * NR, s->pool, N, C);
}

void llama_train_backward(LlamaTrainState *s, LlamaModel *grads, const LlamaModel *m,
                          const int32_t *inputs, const int32_t *targets, int b) {
    const LlamaConfig *c = &m->cfg;
    assert(grads->num_params == m->num_params);
    int T = s->T, C = c->dim, V = c->vocab_size, L = c->n_layers, N = b * T;
    size_t nc = sizeof(float) * (size_t)N * C;
    // loss = F.cross_entropy(...).mean()
    memset(s->dlogits, 0, sizeof(float) * (size_t)N * V);
    crossentropy_backward(s->dlogits, s->probs, targets, 1.0f / (float)N, N, V);
    // output = self.output(self.norm(h))
    memset(s->dxn, 0, nc);
    linear_backward(s->dxn, grads->p.output, NULL, s->wt, s->dlogits, s->xnf, m->p.output,
                    s->pool, N, C, V);
    memset(s->dres, 0, nc);
    rmsnorm_backward_pool(s->dres, grads->p.norm, s->partial, s->dxn,
                          s->res + (size_t)L * s->B * T * C, m->p.norm, s->rstdf, s->pool, N, C);
    for (int l = L - 1; l >= 0; l--) block_backward(s, grads, m, l, b);
    // h = self.tok_embeddings(tokens): rows in order, so a repeated token's
    // contributions add up the same way every run
    for (int n = 0; n < N; n++) {
        const float *dx = s->dres + (int64_t)n * C;
        float *dte = grads->p.tok_embeddings + (int64_t)inputs[n] * C;
        for (int i = 0; i < C; i++) dte[i] += dx[i];
    }
}
