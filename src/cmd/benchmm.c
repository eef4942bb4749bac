// benchmm — the matmuls of one full pass of the char GPT, timed alone
// (see benchmm.h).
//
// Legend: T tokens of the pass, C embedding size, F = 4 C, V vocabulary,
// L blocks.
#include "benchmm.h"

#include "bigmem.h"
#include "ops.h"
#include "rng.h"
#include "stats.h"
#include "timer.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

double benchmm_flops(const GptConfig *cfg, int n) { return gpt_cost(*cfg, n, 0).matmul_flops; }

// Everything one pass reads and writes, one allocation carved in this order.
typedef struct {
    float *w;        // (L, 4 packed (C, C) + packed (C, F) + packed (F, C)) the blocks' weights in panel order
    float *bias;     // (F) shared by every layer (the values do not change the time)
    float *head_w;   // (C, V) read in place, as gpt_forward's head
    float *xn;       // (T, C) input of query, key, value, fc1
    float *att;      // (T, C) input of output
    float *q, *k, *v, *proj;   // (T, C) each
    float *hidden;   // (T, F)
    float *logits;   // (V)
} Pass;

// One uncached pass's matrix products, in gpt_forward's order and shapes
// (gpt_forward adds two of them into x and takes GELU of one as it stores
// them; here every one is stored: the products alone).
static void pass_run(const Pass *p, const GptConfig *cfg, Pool *pool, int T) {
    int C = cfg->C, F = 4 * cfg->C, V = cfg->V;
    int64_t cc = ops_packed_size(C, C), cf = ops_packed_size(C, F), fc = ops_packed_size(F, C);
    const float *w = p->w;
    for (int l = 0; l < cfg->L; l++) {
        // With the panels given, b in place is not read (NULL here).
        ops_matmul_packed(p->q, p->xn, NULL, w, p->bias, OPS_STORE, pool, T, C, C), w += cc;
        ops_matmul_packed(p->k, p->xn, NULL, w, p->bias, OPS_STORE, pool, T, C, C), w += cc;
        ops_matmul_packed(p->v, p->xn, NULL, w, p->bias, OPS_STORE, pool, T, C, C), w += cc;
        ops_matmul_packed(p->proj, p->att, NULL, w, p->bias, OPS_STORE, pool, T, C, C), w += cc;
        ops_matmul_packed(p->hidden, p->xn, NULL, w, p->bias, OPS_STORE, pool, T, C, F), w += cf;
        ops_matmul_packed(p->proj, p->hidden, NULL, w, p->bias, OPS_STORE, pool, T, F, C), w += fc;
    }
    ops_matmul(p->logits, p->xn + (int64_t)(T - 1) * C, p->head_w, p->bias, pool, 1, C, V);
}

int benchmm_run(const GptConfig *cfg, Pool *pool, int repeat, BenchMM *out) {
    assert(repeat >= 1 && cfg->T >= 1);
    int T = cfg->T, C = cfg->C, F = 4 * cfg->C, V = cfg->V;
    size_t sizes[] = {
        (size_t)cfg->L * (size_t)(4 * ops_packed_size(C, C) + ops_packed_size(C, F) + ops_packed_size(F, C)),
        (size_t)(F > V ? F : V), (size_t)C * V, (size_t)T * C, (size_t)T * C,
        (size_t)T * C, (size_t)T * C, (size_t)T * C, (size_t)T * C, (size_t)T * F, (size_t)V,
    };
    enum { PARTS = sizeof(sizes) / sizeof(sizes[0]) };
    Pass p;
    float **const parts[PARTS] = {&p.w, &p.bias, &p.head_w, &p.xn, &p.att, &p.q, &p.k, &p.v, &p.proj, &p.hidden, &p.logits};
    size_t bytes = 0;
    float *mem = bigmem_carve(parts, sizes, PARTS, &bytes);
    double *rate = malloc(sizeof(double) * 3 * (size_t)repeat);
    if (!mem || !rate) {
        bigmem_free(mem, bytes);
        free(rate);
        return -1;
    }
    // Weights in [-0.05, 0.05), activations in [-1, 1): no overflow, no
    // subnormals (which would slow the arithmetic). Where ops_pack pads a
    // partial panel with zeros there are random numbers here; the kernel
    // masks those columns off, so the time is the same.
    uint64_t seed = 15;
    for (size_t i = 0; i < sizes[0]; i++) p.w[i] = (float)(0.1 * rng_uniform(&seed) - 0.05);
    for (size_t i = 0; i < sizes[2]; i++) p.head_w[i] = (float)(0.1 * rng_uniform(&seed) - 0.05);
    for (size_t i = 0; i < sizes[3]; i++) p.xn[i] = p.att[i] = (float)(2 * rng_uniform(&seed) - 1);

    double flops = benchmm_flops(cfg, T);
    int tasks = 8 * pool_threads(pool);
    int64_t iters = (int64_t)(flops / (2.0 * 16 * 16 * tasks)) + 1;   // the FMA loop: 512 FLOPs an iteration
    double *mm = rate, *fma = rate + repeat, *frac = rate + 2 * repeat;
    pass_run(&p, cfg, pool, T);   // warm-up: pages touched, threads awake
    ops_fma_loop(pool, iters, tasks);
    for (int i = 0; i < repeat; i++) {
        double t0 = timer_now();
        pass_run(&p, cfg, pool, T);
        double t1 = timer_now();
        double done = ops_fma_loop(pool, iters, tasks);
        double t2 = timer_now();
        mm[i] = flops / (t1 - t0) * 1e-9;
        fma[i] = done / (t2 - t1) * 1e-9;
        frac[i] = mm[i] / fma[i];
    }
    out->tokens = T;
    out->flops = flops;
    Stats smm = stats_of(mm, repeat), sfma = stats_of(fma, repeat);
    out->median_fraction = stats_of(frac, repeat).median;
    out->median_gflops = smm.median, out->best_gflops = smm.max;
    out->fma_median_gflops = sfma.median, out->fma_best_gflops = sfma.max;
    bigmem_free(mem, bytes);
    free(rate);
    return 0;
}
