// test_train — the training of the char GPT: every layer's backward pass
// against finite differences of its forward, the whole model's gradient,
// the fast matmul against plain loops, a tiny model learning a made-up text,
// a resumed run equal bit for bit to an uninterrupted one, and checkpoints
// that refuse corruption and survive an interrupted save.
//
// Gradient checks: for a layer y = f(x), the test takes loss = sum(y * R)
// with R fixed random, so d loss / d y = R, runs the backward pass with
// dout = R, and compares each analytic gradient with the central difference
// (loss(x + e) - loss(x - e)) / 2e, the loss summed in double. Tolerances
// are relative to the size of the gradient, since the forward is float.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "checkpoint.h"
#include "ops.h"
#include "train.h"

// ---------------------------------------------------------------------------
// Helpers

static uint64_t test_rng = 42;

static float frand(void) {   // uniform in [-1, 1)
    test_rng = test_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((test_rng >> 40) / 8388608.0 - 1.0);
}

static float *rand_array(size_t n, float scale) {
    float *x = malloc(sizeof(float) * n);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = frand() * scale;
    return x;
}

static float *zeros(size_t n) {
    float *x = calloc(n, sizeof(float));
    assert_non_null(x);
    return x;
}

// sum(y * r) in double
static double dot(const float *y, const float *r, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)y[i] * r[i];
    return s;
}

// Compares analytic gradients with numeric ones: |a - n| <= atol + rtol * |n|.
static void check_grad(const char *what, const float *analytic, const double *numeric, size_t n,
                       double atol, double rtol) {
    for (size_t i = 0; i < n; i++) {
        double err = fabs(analytic[i] - numeric[i]);
        if (!(err <= atol + rtol * fabs(numeric[i])))
            fail_msg("%s[%zu]: expected %.6g (finite difference), got %.6g (backward)", what, i,
                     numeric[i], (double)analytic[i]);
    }
}

// The numeric gradient of loss() with respect to each x[i].
typedef double (*LossFn)(void *ctx);
static double *numeric_grad(float *x, size_t n, float eps, LossFn loss, void *ctx) {
    double *g = malloc(sizeof(double) * n);
    assert_non_null(g);
    for (size_t i = 0; i < n; i++) {
        float old = x[i];
        x[i] = old + eps;
        double lp = loss(ctx);
        x[i] = old - eps;
        double lm = loss(ctx);
        x[i] = old;
        g[i] = (lp - lm) / (2.0 * (double)eps);
    }
    return g;
}

// Checks analytic (n) against the finite differences of loss() in x (n).
static void expect_grad(const char *what, const float *analytic, float *x, size_t n, float eps,
                        LossFn loss, void *ctx, double atol, double rtol) {
    double *numeric = numeric_grad(x, n, eps, loss, ctx);
    check_grad(what, analytic, numeric, n, atol, rtol);
    free(numeric);
}

// ---------------------------------------------------------------------------
// The matmul kernel against the plain loop, and with threads against without.

// The order of operations train_matmul promises on AVX-512, written out: each
// element starts from out (when accumulating) plus bias, then takes one fused
// multiply-add per k, k ascending. However the kernel tiles, blocks, copies
// or splits the work among threads, it must give these bits: that is what
// keeps a trained model the same file from one version of kvdemo to the next.
static void matmul_fma_order(float *out, const float *a, const float *b, const float *bias,
                             int accumulate, int64_t a_row, int64_t a_col, int ldb, int ldo, int M,
                             int K, int N) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float *o = out + (int64_t)i * ldo + j;
            float sum = accumulate ? *o : 0.0f;
            if (bias) sum += bias[j];
            for (int k = 0; k < K; k++)
                sum = fmaf(a[i * a_row + k * a_col], b[(int64_t)k * ldb + j], sum);
            *o = sum;
        }
}

// Shapes around the kernel's edges: rows 1..7 left after tiles of 8 (70
// leaves 6, 45 leaves 5, 36 four, 27 three, 18 two), one
// tile, a tile and a row, several (split between two threads, each then
// copying b's slices); K = 0, short sums, and K past a block of 1024 steps;
// columns 1, 17 (a second vector of 16), 48 (one tile), 65 and 130 (a tile
// and a partial one), 200 (enough panels of 48 for a^T to be split among the
// threads by columns). Each in the four uses training makes (a or a^T, = or
// +=), with and without bias, and with b's and out's rows wider than N (out's
// extra columns must stay untouched).
static void test_matmul_fast_equals_plain(void **state) {
    (void)state;
    int Ms[] = {1, 7, 8, 9, 18, 27, 36, 45, 70}, Ks[] = {0, 1, 3, 64, 1030}, Ns[] = {1, 17, 48, 65, 130, 200};
    Pool *pool = pool_new(2);
    assert_non_null(pool);
    for (int a = 0; a < 9; a++)
        for (int b = 0; b < 5; b++)
            for (int c = 0; c < 6; c++)
                for (int variant = 0; variant < 16; variant++) {
                    int M = Ms[a], K = Ks[b], N = Ns[c];
                    int transposed = variant & 1, accumulate = variant >> 1 & 1;
                    int wide = variant >> 2 & 1, with_bias = !(variant >> 3 & 1);
                    int ldb = wide ? N + 5 : N, ldo = wide ? N + 3 : N;
                    size_t nout = (size_t)M * ldo;
                    float *A = rand_array((size_t)M * K + 1, 1), *B = rand_array((size_t)K * ldb + 1, 1);
                    float *bias = with_bias ? rand_array(N, 1) : NULL, *fast = rand_array(nout, 1);
                    float *plain = zeros(nout), *threaded = zeros(nout), *order = zeros(nout);
                    memcpy(plain, fast, sizeof(float) * nout);
                    memcpy(threaded, fast, sizeof(float) * nout);
                    memcpy(order, fast, sizeof(float) * nout);
                    int64_t ar = transposed ? 1 : K, ac = transposed ? M : 1;
                    train_matmul(fast, A, B, bias, accumulate, NULL, ar, ac, ldb, ldo, M, K, N);
                    train_matmul(threaded, A, B, bias, accumulate, pool, ar, ac, ldb, ldo, M, K, N);
                    train_matmul_plain(plain, A, B, bias, accumulate, ar, ac, ldb, ldo, M, K, N);
                    matmul_fma_order(order, A, B, bias, accumulate, ar, ac, ldb, ldo, M, K, N);
                    char what[96];
                    snprintf(what, sizeof what, "matmul M%d K%d N%d %s%s%s%s", M, K, N,
                             transposed ? "a^T " : "", accumulate ? "+=" : "=",
                             with_bias ? " bias" : "", wide ? " wide rows" : "");
                    assert_close(fast, plain, (int64_t)nout, 1e-5 * K + 1e-6, what);
#if defined(__AVX512F__)
                    assert_bits(fast, order, (int64_t)nout, what);
#else
                    // the portable path rounds the product and the sum, as the plain loop
                    assert_bits(fast, plain, (int64_t)nout, what);
#endif
                    // the split into threads must not change a single bit
                    assert_bits(threaded, fast, (int64_t)nout, what);
                    free(A), free(B), free(bias), free(fast), free(plain), free(threaded), free(order);
                }
    pool_free(pool);
}

// The causal products against the full product: the terms they skip are
// exact zeros (weights above the diagonal), so every entry they compute has
// the full product's bits. Shapes like one head's: T = 37 positions (not a
// multiple of the kernel's rows), D columns of a (T, C) tensor: D = 20 (one
// panel of 48) or 64 (the char GPT's heads: a panel and part of one), C = 3 D
// (b copied into contiguous rows) or D (b read in place).
static void causal_case(int T, int D, int C) {
    float *q = rand_array((size_t)T * C, 1), *kt = rand_array((size_t)D * T, 1);
    float *v = rand_array((size_t)T * C, 1), *att = rand_array((size_t)T * T, 1);
    for (int i = 0; i < T; i++)
        for (int j = i + 1; j < T; j++) att[i * T + j] = 0.0f;   // causal weights
    for (int accumulate = 0; accumulate < 2; accumulate++) {
        // scores (T, T) = q @ k^T: the entries j <= i
        float *got = rand_array((size_t)T * T, 1), *want = zeros((size_t)T * T);
        memcpy(want, got, sizeof(float) * T * T);
        train_matmul_causal(got, q, kt, TRAIN_CAUSAL_COLS, accumulate, C, 1, T, T, T, D, T);
#if defined(__AVX512F__)
        matmul_fma_order(want, q, kt, NULL, accumulate, C, 1, T, T, T, D, T);
#else
        train_matmul_plain(want, q, kt, NULL, accumulate, C, 1, T, T, T, D, T);
#endif
        for (int i = 0; i < T; i++) assert_bits(got + i * T, want + i * T, i + 1, "causal scores");
        free(got), free(want);
        // out (T, D of C) = att @ v and att^T @ v
        for (int transposed = 0; transposed < 2; transposed++) {
            got = rand_array((size_t)T * C, 1), want = zeros((size_t)T * C);
            memcpy(want, got, sizeof(float) * T * C);
            int64_t ar = transposed ? 1 : T, ac = transposed ? T : 1;
            int mode = transposed ? TRAIN_CAUSAL_K_GE : TRAIN_CAUSAL_K_LE;
            train_matmul_causal(got, att, v, mode, accumulate, ar, ac, C, C, T, T, D);
#if defined(__AVX512F__)
            matmul_fma_order(want, att, v, NULL, accumulate, ar, ac, C, C, T, T, D);
#else
            train_matmul_plain(want, att, v, NULL, accumulate, ar, ac, C, C, T, T, D);
#endif
            assert_bits(got, want, (int64_t)T * C, transposed ? "causal att^T @ v" : "causal att @ v");
            free(got), free(want);
        }
    }
    free(q), free(kt), free(v), free(att);
}

static void test_matmul_causal_equals_full(void **state) {
    (void)state;
    static const int shapes[][2] = {{20, 60}, {20, 20}, {64, 192}, {64, 64}};   // D, C
    for (int i = 0; i < 4; i++) causal_case(37, shapes[i][0], shapes[i][1]);
}

// ---------------------------------------------------------------------------
// Linear: out = inp @ w + b

typedef struct {
    float *out, *inp, *w, *b, *r;
    int N, IC, OC;
} LinearCase;

static double linear_loss(void *ctx) {
    LinearCase *c = ctx;
    linear_forward(c->out, c->inp, c->w, c->b, NULL, c->N, c->IC, c->OC);
    return dot(c->out, c->r, (size_t)c->N * c->OC);
}

static void test_linear_backward(void **state) {
    (void)state;
    LinearCase c = {.N = 7, .IC = 5, .OC = 19};
    size_t nin = (size_t)c.N * c.IC, nw = (size_t)c.IC * c.OC, nout = (size_t)c.N * c.OC;
    c.out = zeros(nout), c.inp = rand_array(nin, 1), c.w = rand_array(nw, 1);
    c.b = rand_array(c.OC, 1), c.r = rand_array(nout, 1);
    float *dinp = zeros(nin), *dw = zeros(nw), *db = zeros(c.OC), *wt = zeros(nw);
    linear_backward(dinp, dw, db, wt, c.r, c.inp, c.w, NULL, c.N, c.IC, c.OC);
    expect_grad("linear dinp", dinp, c.inp, nin, 1e-2f, linear_loss, &c, 1e-3, 1e-3);
    expect_grad("linear dw", dw, c.w, nw, 1e-2f, linear_loss, &c, 1e-3, 1e-3);
    expect_grad("linear db", db, c.b, c.OC, 1e-2f, linear_loss, &c, 1e-3, 1e-3);
    // gradients accumulate: a second backward adds the same again
    float *dw2 = malloc(sizeof(float) * nw);
    memcpy(dw2, dw, sizeof(float) * nw);
    linear_backward(dinp, dw, db, wt, c.r, c.inp, c.w, NULL, c.N, c.IC, c.OC);
    for (size_t i = 0; i < nw; i++) dw2[i] *= 2;
    assert_close(dw, dw2, (int64_t)nw, 1e-5, "linear dw after two backward passes (+=)");
    free(dw2);
    free(c.out), free(c.inp), free(c.w), free(c.b), free(c.r);
    free(dinp), free(dw), free(db), free(wt);
}

// ---------------------------------------------------------------------------
// LayerNorm

typedef struct {
    float *out, *mean, *rstd, *inp, *w, *b, *r;
    int N, C;
} LnCase;

static double ln_loss(void *ctx) {
    LnCase *c = ctx;
    ops_layernorm(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C);
    return dot(c->out, c->r, (size_t)c->N * c->C);
}

static void test_layernorm_backward(void **state) {
    (void)state;
    LnCase c = {.N = 6, .C = 24};
    size_t n = (size_t)c.N * c.C;
    c.out = zeros(n), c.mean = zeros(c.N), c.rstd = zeros(c.N);
    c.inp = rand_array(n, 2), c.w = rand_array(c.C, 1), c.b = rand_array(c.C, 1);
    c.r = rand_array(n, 1);
    ln_loss(&c);
    // PyTorch's layer_norm: mean 0 and biased variance 1 before w and b
    for (int i = 0; i < c.N; i++) {
        double m = 0, v = 0;
        for (int j = 0; j < c.C; j++) m += c.inp[i * c.C + j];
        m /= c.C;
        for (int j = 0; j < c.C; j++) v += (c.inp[i * c.C + j] - m) * (c.inp[i * c.C + j] - m);
        v /= c.C;
        float want_mean = (float)m, want_rstd = (float)(1.0 / sqrt(v + 1e-5));
        assert_close(&c.mean[i], &want_mean, 1, 1e-5, "layernorm mean");
        assert_close(&c.rstd[i], &want_rstd, 1, 1e-4 * want_rstd, "layernorm rstd");
    }
    float *dinp = zeros(n), *dw = zeros(c.C), *db = zeros(c.C);
    layernorm_backward(dinp, dw, db, c.r, c.inp, c.w, c.mean, c.rstd, c.N, c.C);
    expect_grad("layernorm dinp", dinp, c.inp, n, 1e-2f, ln_loss, &c, 2e-3, 2e-3);
    expect_grad("layernorm dw", dw, c.w, c.C, 1e-2f, ln_loss, &c, 1e-3, 1e-3);
    expect_grad("layernorm db", db, c.b, c.C, 1e-2f, ln_loss, &c, 1e-3, 1e-3);
    free(c.out), free(c.mean), free(c.rstd), free(c.inp), free(c.w), free(c.b), free(c.r);
    free(dinp), free(dw), free(db);
}

// ---------------------------------------------------------------------------
// GELU (tanh approximation)

typedef struct {
    float *out, *inp, *r;
    int n;
} GeluCase;

static double gelu_loss(void *ctx) {
    GeluCase *c = ctx;
    ops_gelu(c->out, c->inp, c->n);
    return dot(c->out, c->r, (size_t)c->n);
}

static void test_gelu(void **state) {
    (void)state;
    GeluCase c = {.n = 100};   // 6 vectors of 16 and a tail of 4
    c.out = zeros(c.n), c.inp = rand_array(c.n, 5), c.r = rand_array(c.n, 1);
    c.inp[0] = 0, c.inp[1] = 20, c.inp[2] = -20, c.inp[3] = 1e-4f;
    ops_gelu(c.out, c.inp, c.n);
    // against the formula in double: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    for (int i = 0; i < c.n; i++) {
        double x = c.inp[i];
        float want = (float)(0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) *
                                                 (x + 0.044715 * x * x * x))));
        char what[48];
        snprintf(what, sizeof what, "gelu(%g)", x);
        assert_close(&c.out[i], &want, 1, 1e-6 + 1e-6 * fabs(want), what);
    }
    float *dinp = zeros(c.n);
    ops_gelu_backward(dinp, c.inp, c.r, c.n);
    double *g = numeric_grad(c.inp, c.n, 1e-3f, gelu_loss, &c);
    check_grad("gelu dinp", dinp, g, c.n, 2e-3, 2e-3);
    free(g), free(c.out), free(c.inp), free(c.r), free(dinp);
}

// ---------------------------------------------------------------------------
// Causal multi-head attention

typedef struct {
    float *out, *att, *q, *k, *v, *r, *scratch;
    int B, T, C, H;
} AttnCase;

static double attn_loss(void *ctx) {
    AttnCase *c = ctx;
    attention_forward(c->out, c->att, c->q, c->k, c->v, c->scratch, NULL, c->B, c->T, c->C, c->H);
    return dot(c->out, c->r, (size_t)c->B * c->T * c->C);
}

static void test_attention_backward(void **state) {
    (void)state;
    AttnCase c = {.B = 2, .T = 7, .C = 12, .H = 3};
    int D = c.C / c.H;
    size_t n = (size_t)c.B * c.T * c.C;
    c.out = zeros(n), c.att = zeros((size_t)c.B * c.H * c.T * c.T);
    c.q = rand_array(n, 1), c.k = rand_array(n, 1), c.v = rand_array(n, 1), c.r = rand_array(n, 1);
    c.scratch = zeros((size_t)D * c.T + (size_t)c.T * c.T);
    attn_loss(&c);
    // the mask: weights above the diagonal are 0, each row sums to 1
    for (int bh = 0; bh < c.B * c.H; bh++)
        for (int i = 0; i < c.T; i++) {
            float sum = 0;
            for (int j = 0; j < c.T; j++) {
                float a = c.att[((size_t)bh * c.T + i) * c.T + j];
                if (j > i && a != 0.0f)
                    fail_msg("att[%d][%d][%d]: expected 0 (masked), got %g", bh, i, j, a);
                sum += a;
            }
            float one = 1.0f;
            assert_close(&sum, &one, 1, 1e-5, "attention row sum");
        }
    float *dq = zeros(n), *dk = zeros(n), *dv = zeros(n);
    attention_backward(dq, dk, dv, c.r, c.att, c.q, c.k, c.v, c.scratch, NULL, c.B, c.T, c.C, c.H);
    expect_grad("attention dq", dq, c.q, n, 1e-2f, attn_loss, &c, 1e-3, 5e-3);
    expect_grad("attention dk", dk, c.k, n, 1e-2f, attn_loss, &c, 1e-3, 5e-3);
    expect_grad("attention dv", dv, c.v, n, 1e-2f, attn_loss, &c, 1e-3, 5e-3);
    free(c.out), free(c.att), free(c.q), free(c.k), free(c.v), free(c.r), free(c.scratch);
    free(dq), free(dk), free(dv);
}

// ---------------------------------------------------------------------------
// Softmax cross-entropy

typedef struct {
    float *probs, *losses, *logits;
    int32_t *targets;
    int N, V;
} CeCase;

static double ce_loss(void *ctx) {
    CeCase *c = ctx;
    return crossentropy_forward(c->probs, c->losses, c->logits, c->targets, c->N, c->V);
}

static void test_crossentropy_backward(void **state) {
    (void)state;
    CeCase c = {.N = 5, .V = 11};
    size_t n = (size_t)c.N * c.V;
    c.probs = zeros(n), c.losses = zeros(c.N), c.logits = rand_array(n, 3);
    int32_t targets[5] = {0, 10, 3, 3, 7};
    c.targets = targets;
    double mean = ce_loss(&c);
    // -log softmax(logits)[target], in double
    double want_mean = 0;
    for (int i = 0; i < c.N; i++) {
        double mx = -1e30, s = 0;
        for (int j = 0; j < c.V; j++) mx = fmax(mx, c.logits[i * c.V + j]);
        for (int j = 0; j < c.V; j++) s += exp(c.logits[i * c.V + j] - mx);
        want_mean += (log(s) + mx - c.logits[i * c.V + targets[i]]) / c.N;
    }
    float got = (float)mean, want = (float)want_mean;
    assert_close(&got, &want, 1, 1e-5, "cross-entropy mean loss");
    float *dlogits = zeros(n);
    crossentropy_backward(dlogits, c.probs, c.targets, 1.0f / c.N, c.N, c.V);
    double *g = numeric_grad(c.logits, n, 1e-2f, ce_loss, &c);
    check_grad("cross-entropy dlogits", dlogits, g, n, 1e-4, 1e-3);
    free(g), free(c.probs), free(c.losses), free(c.logits), free(dlogits);
}

// ---------------------------------------------------------------------------
// The whole model: every parameter's gradient against finite differences.

typedef struct {
    TrainState *s;
    float *params;
    int32_t *inputs, *targets;
    int B;
} ModelCase;

static double model_loss(void *ctx) {
    ModelCase *c = ctx;
    return train_forward(c->s, c->params, c->inputs, c->targets, c->B);
}

static void test_model_backward(void **state) {
    (void)state;
    GptConfig g = {7, 5, 8, 2, 2};   // V T C H L
    ModelCase c = {.B = 2};
    c.s = train_state_new(g, c.B, NULL);
    assert_non_null(c.s);
    size_t P = gpt_num_params(g);
    // larger than the training init, so that every gradient is well above rounding
    c.params = rand_array(P, 0.3f);
    int32_t inputs[10] = {0, 1, 2, 3, 4, 5, 6, 0, 2, 4};
    int32_t targets[10] = {1, 2, 3, 4, 5, 6, 0, 3, 5, 1};
    c.inputs = inputs, c.targets = targets;
    float *grads = zeros(P);
    model_loss(&c);
    train_backward(c.s, grads, c.params, inputs, targets, c.B);
    double *num = numeric_grad(c.params, P, 1e-2f, model_loss, &c);
    check_grad("model d loss / d params", grads, num, P, 2e-4, 2e-2);
    free(num), free(grads), free(c.params);
    train_state_free(c.s);
}

// ---------------------------------------------------------------------------
// Training end to end on a made-up text, in a temporary folder.

static char tmpdir[64];

static int make_tmpdir(void **state) {
    (void)state;
    return tmpdir_make(tmpdir, sizeof tmpdir, "test-train");
}

static int remove_tmpdir(void **state) {
    (void)state;
    return tmpdir_remove(tmpdir);
}

static void tmp_path(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/%s", tmpdir, name);
}

// A made-up text: sentences drawn from a small grammar, 24 000 characters.
// Its characters are far from uniform, so a model that learns shows it.
static void write_text(const char *path) {
    static const char *subj[] = {"the cat", "a dog", "my friend", "the king", "a bird"};
    static const char *verb[] = {" sees ", " likes ", " follows ", " sings to "};
    static const char *obj[] = {"the moon.\n", "a tree.\n", "the sea.\n", "her.\n", "him.\n"};
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    uint64_t r = 7;
    long written = 0;
    while (written < 24000) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int s = (int)((r >> 33) % 5), v = (int)((r >> 40) % 4), o = (int)((r >> 50) % 5);
        written += fprintf(f, "%s%s%s", subj[s], verb[v], obj[o]);
    }
    fclose(f);
}

static void tiny_config(TrainConfig *cfg, const char *data, const char *out) {
    assert_int_equal(train_config_default(cfg, "tiny"), 0);
    cfg->model = (GptConfig){0, 32, 32, 2, 1};
    cfg->batch = 8;
    cfg->iters = 200;
    cfg->warmup = 10;
    cfg->lr = 3e-3f;
    cfg->threads = 2;
    cfg->eval_every = 0;
    cfg->ckpt_every = 0;
    cfg->data_path = data;
    cfg->out_path = out;
}

static int read_file(const char *path, unsigned char **data, long *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc((size_t)*size + 1);
    size_t got = fread(*data, 1, (size_t)*size, f);
    fclose(f);
    return got == (size_t)*size ? 0 : -1;
}

static void test_tiny_model_learns(void **state) {
    (void)state;
    char err[256];
    char data[128], out[128];
    tmp_path(data, sizeof data, "text.txt");
    tmp_path(out, sizeof out, "tiny.bin");
    write_text(data);
    TrainConfig cfg;
    tiny_config(&cfg, data, out);
    assert_int_equal(train_run(&cfg, NULL, NULL, NULL, ERR(LANG_EN, err)), TRAIN_OK);
    GptModel m;
    if (gpt_load(&m, out, ERR(LANG_EN, err)) != 0)
        fail_msg("the trained model does not load: %s", err);
    double train_loss, val_loss;
    assert_int_equal(train_eval(&m, data, 2, &train_loss, &val_loss, ERR(LANG_EN, err)), 0);
    // A uniform guess over the 22 characters costs ln 22 = 3.09 nats; the
    // grammar's words are fixed, so a model that learned them is far below.
    const double bound = 1.2;
    print_message("tiny model after %d steps: train loss %.4f, validation loss %.4f (bound %.2f)\n",
                  cfg.iters, train_loss, val_loss, bound);
    if (!(val_loss < bound))
        fail_msg("validation loss after %d steps: expected < %.2f, got %.4f (train %.4f)",
                 cfg.iters, bound, val_loss, train_loss);
    gpt_free(&m);
}

// Stops after a given number of steps, as Ctrl-C would.
static int stop_at(const TrainProgress *p, void *user) { return p->step == *(int *)user; }

static void test_resume_is_bit_identical(void **state) {
    (void)state;
    char err[512];
    char data[128], full[128], pieces[128], ckpt[128];
    tmp_path(data, sizeof data, "text.txt");
    tmp_path(full, sizeof full, "full.bin");
    tmp_path(pieces, sizeof pieces, "pieces.bin");
    tmp_path(ckpt, sizeof ckpt, "pieces.ckpt");
    write_text(data);
    TrainConfig cfg;
    tiny_config(&cfg, data, full);
    cfg.iters = 40;
    assert_int_equal(train_run(&cfg, NULL, NULL, NULL, ERR(LANG_EN, err)), TRAIN_OK);

    // the same run stopped at step 17, then resumed (with another thread count)
    cfg.out_path = pieces;
    cfg.ckpt_path = ckpt;
    int stop = 17;
    assert_int_equal(train_run(&cfg, stop_at, &stop, NULL, ERR(LANG_EN, err)), TRAIN_STOPPED);
    assert_int_equal(access(pieces, F_OK), -1);   // no model before the end
    TrainConfig resume = cfg;
    resume.resume_path = ckpt;
    resume.threads = 1;
    resume.lr = 1.0f;   // ignored: the checkpoint's recipe wins
    assert_int_equal(train_run(&resume, NULL, NULL, NULL, ERR(LANG_EN, err)), TRAIN_OK);

    unsigned char *a = NULL, *b = NULL;
    long na = 0, nb = 0;
    assert_int_equal(read_file(full, &a, &na), 0);
    assert_int_equal(read_file(pieces, &b, &nb), 0);
    assert_int_equal(na, nb);
    for (long i = 0; i < na; i++)
        if (a[i] != b[i])
            fail_msg("model byte %ld: expected 0x%02x (uninterrupted run), got 0x%02x (resumed)",
                     i, a[i], b[i]);
    free(a), free(b);
}

// ---------------------------------------------------------------------------
// The model training optimises is the model generate runs: train_forward on
// tests/fixtures/gpt_a.kvgp against the numpy chapter's model
// (tests/train_reference.py), the reference gpt_forward is tested against.

static void test_train_forward_matches_numpy(void **state) {
    (void)state;
    const char *fix = "tests/fixtures/train_forward.txt";
    GptModel m;
    char err[256];
    if (gpt_load(&m, "tests/fixtures/gpt_a.kvgp", ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    int B = 2, T = m.cfg.T, V = m.cfg.V;
    double *tok = malloc(sizeof(double) * (size_t)B * (T + 1));
    double *want = malloc(sizeof(double) * (size_t)B * T * V);
    int32_t *inputs = malloc(sizeof(int32_t) * (size_t)B * T);
    int32_t *targets = malloc(sizeof(int32_t) * (size_t)B * T);
    assert_true(tok && want && inputs && targets);
    assert_int_equal(fixture_array(fix, "train_a_tokens", tok, B * (T + 1)), B * (T + 1));
    assert_int_equal(fixture_array(fix, "train_a_logits", want, B * T * V), B * T * V);
    double want_loss;
    assert_int_equal(fixture_array(fix, "train_a_loss", &want_loss, 1), 1);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            inputs[b * T + t] = (int32_t)tok[b * (T + 1) + t];
            targets[b * T + t] = (int32_t)tok[b * (T + 1) + t + 1];
        }
    for (int threads = 1; threads <= 2; threads++) {
        Pool *pool = threads > 1 ? pool_new(threads) : NULL;
        TrainState *s = train_state_new(m.cfg, B, pool);
        assert_non_null(s);
        double loss = train_forward(s, m.params, inputs, targets, B);
        const float *got = train_state_logits(s);
        for (int i = 0; i < B * T * V; i++) {
            double scale = fmax(1.0, fabs(want[i]));
            if (fabs(got[i] - want[i]) > 1e-4 * scale)
                fail_msg("%d threads: logits[%d] (sequence %d, row %d, token %d): numpy %.9g, "
                         "train_forward %.9g", threads, i, i / (T * V), i / V % T, i % V, want[i],
                         (double)got[i]);
        }
        if (fabs(loss - want_loss) > 1e-5 * fabs(want_loss))
            fail_msg("%d threads: loss: numpy %.9g, train_forward %.9g", threads, want_loss, loss);
        train_state_free(s);
        pool_free(pool);
    }
    free(tok), free(want), free(inputs), free(targets);
    gpt_free(&m);
}

// ---------------------------------------------------------------------------
// Checkpoints

// Runs train_checkpoint_load; returns its result and the message in msg
// (empty when it loaded).
static int load_captured(const char *path, TrainCheckpoint *ck, char *msg, size_t n) {
    msg[0] = '\0';
    return train_checkpoint_load(path, ck, (Err){LANG_EN, msg, n});
}

// A small checkpoint with recognisable contents.
static void make_checkpoint(TrainCheckpoint *ck, float value) {
    memset(ck, 0, sizeof(*ck));
    train_config_default(&ck->cfg, "tiny");
    ck->cfg.model = (GptConfig){3, 4, 8, 2, 1};
    static uint32_t vocab[3] = {'a', 'b', 'c'};
    ck->vocab = vocab;
    ck->step = 5;
    ck->rng = 0x1234;
    ck->text_hash = 99;
    ck->text_tokens = 1000;
    ck->num_params = gpt_num_params(ck->cfg.model);
    ck->params = malloc(sizeof(float) * 3 * ck->num_params);
    assert_non_null(ck->params);
    for (size_t i = 0; i < 3 * ck->num_params; i++) ck->params[i] = value + (float)i;
    ck->m = ck->params + ck->num_params;
    ck->v = ck->params + 2 * ck->num_params;
}

static void test_checkpoint_round_trip_and_corruption(void **state) {
    (void)state;
    char path[128], bad[128], msg[512];
    tmp_path(path, sizeof path, "a.ckpt");
    tmp_path(bad, sizeof bad, "bad.ckpt");
    TrainCheckpoint ck, got;
    make_checkpoint(&ck, 0.5f);
    assert_int_equal(train_checkpoint_save(path, &ck, ERR(LANG_EN, msg)), 0);
    assert_int_equal(load_captured(path, &got, msg, sizeof msg), 0);
    assert_int_equal(got.step, 5);
    assert_int_equal(got.rng, 0x1234);
    assert_int_equal(got.num_params, ck.num_params);
    assert_bits(got.params, ck.params, (int64_t)(3 * ck.num_params), "checkpoint params, m, v");
    train_checkpoint_free(&got);

    unsigned char *bytes = NULL;
    long size = 0;
    assert_int_equal(read_file(path, &bytes, &size), 0);
    struct {
        const char *name;
        long offset;     // byte to change, or -1
        long length;     // bytes to write
        const char *expect;
    } cases[] = {
        {"one flipped bit in the weights", size / 2, size, "checksum"},
        {"truncated", -1, size - 100, "truncated"},
        {"cut inside the header", -1, 20, "too short"},
        {"wrong magic", 0, size, "magic"},
        {"trailing bytes", -1, size + 4, "trailing"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned char *copy = calloc((size_t)size + 8, 1);
        memcpy(copy, bytes, (size_t)size);
        if (cases[i].offset >= 0) copy[cases[i].offset] ^= 0x10;
        FILE *f = fopen(bad, "wb");
        assert_non_null(f);
        fwrite(copy, 1, (size_t)cases[i].length, f);
        fclose(f);
        free(copy);
        int rc = load_captured(bad, &got, msg, sizeof msg);
        if (rc == 0)
            fail_msg("%s: expected the checkpoint to be refused, it loaded", cases[i].name);
        if (!strstr(msg, cases[i].expect) || !strstr(msg, "bad.ckpt"))
            fail_msg("%s: expected a message naming the file and \"%s\", got \"%s\"", cases[i].name,
                     cases[i].expect, msg);
    }
    free(bytes);
    free(ck.params);
}

static void test_interrupted_save_keeps_previous(void **state) {
    (void)state;
    char path[128], msg[512];
    tmp_path(path, sizeof path, "keep.ckpt");
    TrainCheckpoint old, newer, got;
    make_checkpoint(&old, 1.0f);
    make_checkpoint(&newer, 2.0f);
    newer.step = 6;
    assert_int_equal(train_checkpoint_save(path, &old, ERR(LANG_EN, msg)), 0);
    // the next save dies half way through the temporary file
    train_checkpoint_fail_after(300);
    int rc = train_checkpoint_save(path, &newer, ERR(LANG_EN, msg));
    train_checkpoint_fail_after(-1);
    assert_int_not_equal(rc, 0);
    if (!strstr(msg, "keep.ckpt")) fail_msg("expected an error naming keep.ckpt, got \"%s\"", msg);
    assert_int_equal(load_captured(path, &got, msg, sizeof msg), 0);
    assert_int_equal(got.step, 5);
    assert_bits(got.params, old.params, (int64_t)(3 * old.num_params),
                "checkpoint after an interrupted save");
    train_checkpoint_free(&got);
    // and the next save, over the stale temporary file, succeeds
    assert_int_equal(train_checkpoint_save(path, &newer, ERR(LANG_EN, msg)), 0);
    assert_int_equal(load_captured(path, &got, msg, sizeof msg), 0);
    assert_int_equal(got.step, 6);
    train_checkpoint_free(&got);
    free(old.params), free(newer.params);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_fast_equals_plain),
        cmocka_unit_test(test_matmul_causal_equals_full),
        cmocka_unit_test(test_train_forward_matches_numpy),
        cmocka_unit_test(test_linear_backward),
        cmocka_unit_test(test_layernorm_backward),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_attention_backward),
        cmocka_unit_test(test_crossentropy_backward),
        cmocka_unit_test(test_model_backward),
        cmocka_unit_test(test_tiny_model_learns),
        cmocka_unit_test(test_resume_is_bit_identical),
        cmocka_unit_test(test_checkpoint_round_trip_and_corruption),
        cmocka_unit_test(test_interrupted_save_keeps_previous),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
