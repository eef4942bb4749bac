// ops — the arithmetic of attention on bare float arrays: the plain loops,
// the portable kernels, the matmul's packing and threads. The AVX-512
// kernels behind the same names are in ops_avx512.c (ops_kernels.h says
// what the two files share); a build without AVX-512 (make ARCH=) takes the
// portable kernels here.
#include "ops.h"

#include "ops_kernels.h"
#include "pool.h"
#include "simd.h"
#include "tile.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void ops_matmul_plain(float *out, const float *a, const float *b, const float *bias, int M, int K,
                      int N) {
    // out[i][j] = sum_k a[i][k] * b[k][j] (+ bias[j])
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float sum = 0.0f;
            for (int k = 0; k < K; k++) sum += a[(int64_t)i * K + k] * b[(int64_t)k * N + j];
            out[(int64_t)i * N + j] = bias ? sum + bias[j] : sum;
        }
    }
}

void ops_transpose(float *out, const float *in, int R, int C) {
    // In blocks of 32 x 32: the 32 rows read and the 32 rows written stay in
    // the cache while the block is copied, where one column written at a
    // time down a large matrix (a model's classifier at load) misses it on
    // every float.
    enum { BLOCK = 32 };
    for (int r0 = 0; r0 < R; r0 += BLOCK)
        for (int c0 = 0; c0 < C; c0 += BLOCK) {
            int r1 = r0 + BLOCK < R ? r0 + BLOCK : R, c1 = c0 + BLOCK < C ? c0 + BLOCK : C;
            for (int c = c0; c < c1; c++)
                for (int r = r0; r < r1; r++) out[(int64_t)c * R + r] = in[(int64_t)r * C + c];
        }
}

void ops_div(float *x, float d, int n) {
    for (int i = 0; i < n; i++) x[i] /= d;
}

void ops_add(float *out, const float *a, const float *b, int n) {
    for (int i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void ops_causal_mask(float *mask, int R, int C, int offset) {
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) mask[(int64_t)r * C + c] = c > r + offset ? -INFINITY : 0.0f;
}

void ops_softmax_rows(float *out, const float *in, int R, int C, OpsNorm how) {
    for (int r = 0; r < R; r++)
        ops_softmax_row_plain(out + (int64_t)r * C, NULL, in + (int64_t)r * C, C, how);
}

int ops_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

double ops_max_abs_diff(const float *a, const float *b, int64_t n) {
    double max = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) return NAN;
        if (a[i] == b[i]) continue;   // equal infinities differ by nothing
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > max) max = d;
    }
    return max;
}

int ops_bit_identical(const float *a, const float *b, int64_t n) {
    return memcmp(a, b, sizeof(float) * (size_t)n) == 0;
}

// A float is finite unless its 8 exponent bits are all ones.
int64_t ops_first_nonfinite_from(const float *x, int64_t from, int64_t n) {
    for (int64_t i = from; i < n; i++)
        if (!isfinite(x[i])) return i;
    return n;
}

#if !defined(__AVX512F__)   // ops_avx512.c has the fast one
int64_t ops_first_nonfinite(const float *x, int64_t n) {
    // Blocks of 64: the largest |x| bit pattern of each, a loop compilers
    // turn into vector code; a block at or above the infinity's pattern holds
    // the culprit.
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        uint32_t worst = 0;
        for (int j = 0; j < 64; j++) {
            uint32_t u;
            memcpy(&u, &x[i + j], 4);
            u &= 0x7fffffffu;
            worst = u > worst ? u : worst;
        }
        if (worst >= 0x7f800000u) return ops_first_nonfinite_from(x, i, n);
    }
    return ops_first_nonfinite_from(x, i, n);
}
#endif

// ----------------------------------------------------------------------------
// The fast matmul: register tiles, several threads.
//
// out (M, N) is cut into panels of OPS_NR columns; a thread owns whole
// panels. Inside a panel, tiles of up to OPS_MR rows keep an (MR, NR) block
// of sums in registers while k runs from 0 to K-1, reading one row of b's
// panel and one element of each row of a per k. Every out element is thus
// sum_k a[i][k] * b[k][j] accumulated in k order, one fused multiply-add per
// k (the portable path: one multiply and one add), then + bias[j], then
// what `then` says (stored, added into out, or through GELU): the same
// operations whatever M is, whichever tile or thread the row falls in, and
// for a partial tile or panel as for a full one (the tail is masked, not
// computed another way). That is what makes a cached step (M = 1) equal the
// matching row of a full pass bit for bit.

int ops_threads_asked(int n) { return n > 0 ? n : pool_cores(); }

#if !defined(__AVX512F__)   // the portable path: plain C in the same order (k ascending, then + bias)

void ops_matmul_panel(float *out, const float *a, const float *bp, int64_t ldb, const float *bias, OpsThen then,
                      int M, int K, int N, int j0) {
    int w = N - j0 < OPS_NR ? N - j0 : OPS_NR;
    for (int i = 0; i < M; i++) {
        const float *ai = a + (int64_t)i * K;
        float acc[OPS_NR] = {0};
        for (int k = 0; k < K; k++) {
            const float *bk = bp + k * ldb;
            for (int j = 0; j < w; j++) acc[j] += ai[k] * bk[j];
        }
        float *oi = out + (int64_t)i * N + j0;
        for (int j = 0; j < w; j++) {
            float y = bias ? acc[j] + bias[j0 + j] : acc[j];
            oi[j] = then == OPS_ADD_INTO ? oi[j] + y : y;
        }
        if (then == OPS_GELU) ops_gelu_plain(oi, oi, w);
    }
}
#endif

typedef struct {
    float *out;
    const float *a, *b, *bias;
    const float *panels;   // b in panel order (ops_pack), or NULL
    OpsThen then;
    int M, K, N;
} MatmulJob;

// Packing. Read in place, a panel's rows lie N floats apart; when N * 4
// bytes is a multiple of a large power of two (1536 or 6144 bytes for the
// char GPT), every row of the panel falls into the same few sets of the
// caches, which then hold a fraction of the panel and reread it from memory
// for every tile of rows. Several tiles of rows (M > OPS_MR) first copy the
// panel into a contiguous (K, OPS_NR) buffer of this thread's and read it
// from there. The copy changes where the numbers are read from, not one
// operation on them: the packed and the plain panel give the same bits.
enum { OPS_PACK_MAX_K = 4096 };   // longer sums read the panel in place
enum { OPS_PACK_AHEAD = 16 };     // rows of b prefetched ahead of the copy

static pthread_key_t pack_key;
static pthread_once_t pack_once = PTHREAD_ONCE_INIT;
static int pack_key_ok;

static void pack_key_make(void) { pack_key_ok = pthread_key_create(&pack_key, free) == 0; }

// (ops.h) It holds a (OPS_PACK_MAX_K, OPS_NR) panel.
_Static_assert(OPS_PACK_MAX_K * OPS_NR <= OPS_PACK_FLOATS, "a panel fits the pack buffer");

float *ops_pack_buffer(void) {
    pthread_once(&pack_once, pack_key_make);
    if (!pack_key_ok) return NULL;
    float *buf = pthread_getspecific(pack_key);
    if (!buf) {
        buf = aligned_alloc(64, sizeof(float) * OPS_PACK_FLOATS);
        if (buf && pthread_setspecific(pack_key, buf) != 0) {
            free(buf);
            buf = NULL;
        }
    }
    return buf;
}

static void matmul_panels(void *ctx, int begin, int end, int thread) {
    (void)thread;
    MatmulJob *job = ctx;
    int width = job->M == 1 ? OPS_ROW_NR : OPS_NR;
    if (job->panels) {   // packed once, ahead: read each panel in order
        for (int p = begin; p < end; p++)
            ops_matmul_panel(job->out, job->a, job->panels + (int64_t)p * job->K * OPS_NR, OPS_NR, job->bias, job->then, job->M,
                         job->K, job->N, p * OPS_NR);
        return;
    }
    float *pack = job->M > OPS_MR && job->K <= OPS_PACK_MAX_K ? ops_pack_buffer() : NULL;
    for (int p = begin; p < end; p++) {
        int j0 = p * width;
        if (!pack) {
            ops_matmul_panel(job->out, job->a, job->b + j0, job->N, job->bias, job->then, job->M, job->K, job->N, j0);
            continue;
        }
        int w = job->N - j0 < OPS_NR ? job->N - j0 : OPS_NR;
        // The weights come from memory: a whole panel asks for its rows ahead.
        tile_copy_rows(pack, OPS_NR, job->b + j0, job->N, job->K, w, w == OPS_NR ? OPS_PACK_AHEAD : 0);
        ops_matmul_panel(job->out, job->a, pack, OPS_NR, job->bias, job->then, job->M, job->K, job->N, j0);
    }
}

int64_t ops_packed_size(int K, int N) {
    return (int64_t)(N + OPS_NR - 1) / OPS_NR * OPS_NR * K;
}

void ops_pack(float *dst, const float *b, int K, int N) {
    for (int j0 = 0; j0 < N; j0 += OPS_NR) {
        int w = N - j0 < OPS_NR ? N - j0 : OPS_NR;
        for (int k = 0; k < K; k++, dst += OPS_NR) {
            memcpy(dst, b + (int64_t)k * N + j0, sizeof(float) * (size_t)w);
            for (int j = w; j < OPS_NR; j++) dst[j] = 0.0f;
        }
    }
}

void ops_matmul(float *out, const float *a, const float *b, const float *bias, Pool *pool, int M, int K, int N) {
    ops_matmul_packed(out, a, b, NULL, bias, OPS_STORE, pool, M, K, N);
}

void ops_matmul_packed(float *out, const float *a, const float *b, const float *panels, const float *bias,
                       OpsThen then, Pool *pool, int M, int K, int N) {
    // out (M, N) = a (M, K) @ b (K, N) + bias (N)        numpy: a @ b + bias
    // (OPS_ADD_INTO: out += ...; OPS_GELU: out = gelu(...))
    if (M <= 0 || N <= 0) return;
    MatmulJob job = {out, a, b, bias, panels, then, M, K, N};
    int width = M == 1 && !panels ? OPS_ROW_NR : OPS_NR;
    int count = (N + width - 1) / width;
    // Waking the other threads costs microseconds: only for work that is worth it.
    if ((int64_t)M * K * N < 65536) matmul_panels(&job, 0, count, 0);
    else pool_run(pool, matmul_panels, &job, count);
}

// ----------------------------------------------------------------------------
// The char GPT's layers: the plain loops first (compiled in every build, the
// reference of the tests), then the fast kernels.

void ops_vecmat_plain(float *out, const float *x, const float *m, int K, int N, int ld) {
    for (int j = 0; j < N; j++) out[j] = 0.0f;
    for (int k = 0; k < K; k++) {
        const float *mk = m + (int64_t)k * ld;
        for (int j = 0; j < N; j++) out[j] += x[k] * mk[j];
    }
}

// The sum of e (n) in PyTorch's order (ops.h, OPS_PYTORCH): 8 lanes, then
// folded in halves.
enum { PYTORCH_LANES = 8 };
static float pytorch_row_sum(const float *e, int n) {
    if (n < PYTORCH_LANES) {
        float sum = e[0];
        for (int c = 1; c < n; c++) sum += e[c];
        return sum;
    }
    float l[PYTORCH_LANES];
    memcpy(l, e, sizeof l);
    int c = PYTORCH_LANES;
    for (; c + PYTORCH_LANES <= n; c += PYTORCH_LANES)
        for (int k = 0; k < PYTORCH_LANES; k++) l[k] += e[c + k];
    for (int k = 0; c + k < n; k++) l[k] += e[c + k];   // the tail, into the first lanes
    for (int k = 0; k < 4; k++) l[k] += l[k + 4];        // halves of 128 bits
    l[0] += l[2];                                         // then of 64
    l[1] += l[3];
    return l[0] + l[1];                                   // then of 32
}

void ops_softmax_row_plain(float *y, float *lse, const float *x, int n, OpsNorm how) {
    // exp = np.exp(x - np.max(x)); exp / np.sum(exp)
    float max = -INFINITY;
    for (int i = 0; i < n; i++)
        if (x[i] > max) max = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        y[i] = expf(x[i] - max);   // exp(-inf) = 0: a masked score weighs nothing
        if (how != OPS_PYTORCH) sum += y[i];
    }
    if (how == OPS_PYTORCH) sum = pytorch_row_sum(y, n);
    if (how != OPS_DIVIDE) {
        float inv = 1.0f / sum;
        for (int i = 0; i < n; i++) y[i] *= inv;
    } else {
        for (int i = 0; i < n; i++) y[i] /= sum;
    }
    if (lse) *lse = logf(sum) + max;
}

void ops_gelu_plain(float *out, const float *x, int n) {
    for (int i = 0; i < n; i++) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + 0.044715f * v * v * v)));
    }
}

void ops_gelu_backward_plain(float *dx, const float *x, const float *dout, int n) {
    for (int i = 0; i < n; i++) {
        float v = x[i];
        float t = tanhf(GELU_K * (v + 0.044715f * v * v * v));
        float du = GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
        float grad = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
        dx[i] += grad * dout[i];
    }
}

#if !defined(__AVX512F__)   // portable C: the plain loops, with libm's expf (ops_avx512.c: the fast ones)

void ops_vecmat_rows(float *out, int ldo, const float *x, int ldx, const float *m, int ldm, int R, int K,
                     int N, int causal) {
    assert(R >= 1 && R <= OPS_ROWS_MAX && (!causal || K >= R));
    for (int r = 0; r < R; r++)
        ops_vecmat(out + (int64_t)r * ldo, x + (int64_t)r * ldx, m, causal ? K - R + 1 + r : K, N, ldm);
}

void ops_vecmat_acc(float *out, const float *x, const float *m, int K, int N, int ld) {
    for (int k = 0; k < K; k++) {
        const float *mk = m + (int64_t)k * ld;
        for (int j = 0; j < N; j++) out[j] += x[k] * mk[j];
    }
}

void ops_vecmat(float *out, const float *x, const float *m, int K, int N, int ld) {
    ops_vecmat_plain(out, x, m, K, N, ld);
}

void ops_softmax_row(float *y, float *lse, const float *x, int n, OpsNorm how) {
    ops_softmax_row_plain(y, lse, x, n, how);
}

void ops_gelu(float *out, const float *x, int n) { ops_gelu_plain(out, x, n); }

void ops_gelu_backward(float *dx, const float *x, const float *dout, int n) {
    ops_gelu_backward_plain(dx, x, dout, n);
}

void ops_exp(float *out, const float *x, int n) {
    for (int i = 0; i < n; i++) out[i] = expf(x[i]);
}
#endif

// mean = x.mean(-1, keepdims=True) and var = ((x - mean) ** 2).mean(-1,
// keepdims=True) of each row of x (R, C) into m (R) and var (R), each summed
// over c in order, in float. The fast kernel keeps 16 rows side by side in the
// lanes of one vector (transposing 16 x 16 blocks), so that their sums
// advance together instead of one long chain of additions at a time: each
// lane does what the plain loop does for its row.
void ops_layernorm_stats_plain(float *m, float *var, const float *x, int R, int C) {
    for (int r = 0; r < R; r++) {
        const float *xr = x + (int64_t)r * C;
        m[r] = 0.0f;
        for (int c = 0; c < C; c++) m[r] += xr[c];
        m[r] /= C;
        var[r] = 0.0f;
        for (int c = 0; c < C; c++) var[r] += (xr[c] - m[r]) * (xr[c] - m[r]);
        var[r] /= C;
    }
}

#if !defined(__AVX512F__)
void ops_layernorm_stats(float *m, float *var, const float *x, int R, int C) {
    ops_layernorm_stats_plain(m, var, x, R, C);
}

void ops_layernorm_apply(float *y, const float *x, float m, float s, const float *w, const float *b, int C) {
    for (int c = 0; c < C; c++) y[c] = (x[c] - m) * s * w[c] + b[c];
}
#endif

void ops_layernorm(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                   int R, int C) {
    // In float, summed in order: the arithmetic the shipped model was trained
    // with, which kvdemo train and the forward pass now share.
    enum { BLOCK = 64 };   // rows whose mean and var are made at once
    float m[BLOCK], var[BLOCK];
    for (int r0 = 0; r0 < R; r0 += BLOCK) {
        int rows = R - r0 < BLOCK ? R - r0 : BLOCK;
        ops_layernorm_stats(m, var, x + (int64_t)r0 * C, rows, C);
        for (int i = 0; i < rows; i++) {
            // (x - mean) / np.sqrt(var + eps) * weight + bias
            float mi = m[i], s = 1.0f / sqrtf(var[i] + 1e-5f);
            ops_layernorm_apply(out + (int64_t)(r0 + i) * C, x + (int64_t)(r0 + i) * C, mi, s, w, b, C);
            if (mean) mean[r0 + i] = mi;
            if (rstd) rstd[r0 + i] = s;
        }
    }
}

// ----------------------------------------------------------------------------
// The machine's limits

typedef struct {
    int64_t iters;
    float sink;   // the loop's result, so that the compiler keeps it
} FmaJob;

#if !defined(__AVX512F__)
// FMA_CHAINS * 16 independent chains of acc = acc * x + y; their sum.
float ops_fma_chains(int64_t iters) {
    float acc[FMA_CHAINS * 16];
    for (int j = 0; j < FMA_CHAINS * 16; j++) acc[j] = 1.0f + (float)j * 1e-4f;
    for (int64_t i = 0; i < iters; i++)
        for (int j = 0; j < FMA_CHAINS * 16; j++) acc[j] = acc[j] * 0.9999999f + 1e-7f;
    float r = 0;
    for (int j = 0; j < FMA_CHAINS * 16; j++) r += acc[j];
    return r;
}
#endif

static void fma_tasks(void *ctx, int begin, int end, int thread) {
    (void)thread;
    FmaJob *job = ctx;
    for (int t = begin; t < end; t++) {
        float r = ops_fma_chains(job->iters);
        if (r == 12345.0f) job->sink = r;   // never true; the result stays used
    }
}

double ops_fma_loop(Pool *pool, int64_t iters, int tasks) {
    FmaJob job = {iters, 0};
    pool_run(pool, fma_tasks, &job, tasks);
    return 2.0 * FMA_CHAINS * 16 * (double)iters * tasks + (double)job.sink;
}

typedef struct {
    float *dst;
    const float *src;
    int64_t n;
} CopyJob;

enum { COPY_PIECE = (1 << 20) / sizeof(float) };

static void copy_pieces(void *ctx, int begin, int end, int thread) {
    (void)thread;
    CopyJob *job = ctx;
    for (int p = begin; p < end; p++) {
        int64_t from = (int64_t)p * COPY_PIECE, n = job->n - from < COPY_PIECE ? job->n - from : COPY_PIECE;
        memcpy(job->dst + from, job->src + from, sizeof(float) * (size_t)n);
    }
}

double ops_copy_loop(float *dst, const float *src, Pool *pool, int64_t n) {
    CopyJob job = {dst, src, n};
    pool_run(pool, copy_pieces, &job, (int)((n + COPY_PIECE - 1) / COPY_PIECE));
    return 8.0 * (double)n;
}
