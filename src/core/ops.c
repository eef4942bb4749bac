// ops — the arithmetic of attention on bare float arrays.
#include "ops.h"

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
static int64_t first_nonfinite_plain(const float *x, int64_t from, int64_t n) {
    for (int64_t i = from; i < n; i++)
        if (!isfinite(x[i])) return i;
    return n;
}

#if defined(__AVX512F__)

int64_t ops_first_nonfinite(const float *x, int64_t n) {
    const __m512i exponent = _mm512_set1_epi32(0x7f800000);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __mmask16 bad = 0;
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            __m512i u = _mm512_and_si512(_mm512_loadu_si512((const void *)(x + i + 16 * v)), exponent);
            bad |= _mm512_cmpeq_epi32_mask(u, exponent);
        }
        if (bad) return first_nonfinite_plain(x, i, n);
    }
    return first_nonfinite_plain(x, i, n);
}
#else
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
        if (worst >= 0x7f800000u) return first_nonfinite_plain(x, i, n);
    }
    return first_nonfinite_plain(x, i, n);
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

static Pool *ops_pool;   // NULL: matmuls run on the calling thread

int ops_set_threads(int n) {
    if (n <= 0) n = pool_cores();
    if (n == ops_threads()) return 0;
    pool_free(ops_pool);
    ops_pool = NULL;
    if (n == 1) return 0;
    ops_pool = pool_new(n);
    return ops_pool ? 0 : -1;
}

int ops_threads_asked(int n) { return n > 0 ? n : pool_cores(); }

int ops_threads(void) {
    return pool_threads(ops_pool);
}

void ops_parallel_for(void (*fn)(void *ctx, int begin, int end, int thread), void *ctx, int count) {
    pool_run(ops_pool, fn, ctx, count);
}

#if defined(__AVX512F__)

// The tile is tile.h's; OPS_MR, OPS_NR and OPS_ROW_NR name what the code
// below shares with the portable path.
enum { OPS_MR = TILE_MR, OPS_NV = TILE_NV, OPS_NR = TILE_NR };
enum { OPS_ROW_NV = TILE_ROW_NV, OPS_ROW_NR = TILE_ROW_NR };
enum { OPS_PREFETCH = 8 };                                  // rows of b ahead, read in place
enum { OPS_PANEL_AHEAD = 32 };                              // rows of a packed panel ahead, first tile

// One tile: rows (1..OPS_MR) rows of a from a0, nv vectors of 16 columns of
// the panel bp (its first column is out's column j0; its rows ldb floats
// apart: N in b itself, OPS_NR in a packed copy), lanes beyond N masked off
// by mask[v]; each sum from 0, then + bias, then to out as `then` says.
// rows, nv, ahead (rows of b to prefetch ahead, 0: none) and whole (b
// loaded without masks) are constants: see tile_matmul.
static inline __attribute__((always_inline)) void
matmul_tile(float *out, const float *a0, const float *bp, int64_t ldb, const float *bias, OpsThen then, int K,
            int N, int j0, const __mmask16 *mask, const int rows, const int nv, const int ahead, const int whole) {
    tile_matmul(out + j0, N, a0, K, 1, bp, ldb, mask, 0, NULL, bias ? bias + j0 : NULL, then, K, rows, nv, 0, ahead,
                whole);
}

// The columns j0 .. j0 + width - 1 of out, every row. One row alone (a
// cached step) takes panels four times wider, so that each row of b is read
// 768 contiguous bytes at a time: the same operations per element, better
// streaming of the weights from memory.
static void matmul_panel(float *out, const float *a, const float *bp, int64_t ldb, const float *bias, OpsThen then,
                         int M, int K, int N, int j0) {
    __mmask16 mask[OPS_ROW_NV];
    for (int v = 0; v < OPS_ROW_NV; v++) mask[v] = simd_mask16(N - j0 - 16 * v);
    if (M == 1) {
        // A narrow b (the 4-dim example's 4 columns) needs fewer vectors than
        // the panel holds; each element's sum is the same either way.
        int cols = N - j0;
        if (ldb == OPS_NR && cols > OPS_NR) cols = OPS_NR;   // a packed panel is OPS_NR wide
        // One row reads a packed panel once, from memory: prefetched well
        // ahead, as the first tile of many rows does (below).
        if (ldb == OPS_NR) matmul_tile(out, a, bp, ldb, bias, then, K, N, j0, mask, 1, cols <= 16 ? 1 : OPS_NV, OPS_PANEL_AHEAD, 1);
        else if (cols <= 16) matmul_tile(out, a, bp, ldb, bias, then, K, N, j0, mask, 1, 1, OPS_PREFETCH, 0);
        else if (cols <= OPS_NR) matmul_tile(out, a, bp, ldb, bias, then, K, N, j0, mask, 1, OPS_NV, OPS_PREFETCH, 0);
        else if (cols < OPS_ROW_NR) matmul_tile(out, a, bp, ldb, bias, then, K, N, j0, mask, 1, OPS_ROW_NV, OPS_PREFETCH, 0);
        else matmul_tile(out, a, bp, ldb, bias, then, K, N, j0, mask, 1, OPS_ROW_NV, OPS_PREFETCH, 1);
        return;
    }
    int i = 0;
    if (ldb == OPS_NR) {
        // A packed panel is read in order, which the hardware prefetches well
        // once it is in the caches: the first tile, which brings it from
        // memory, asks for it well ahead; the others need no prefetch
        // instructions (they would take issue slots).
        if (M >= OPS_MR) {
            matmul_tile(out, a, bp, ldb, bias, then, K, N, j0, mask, OPS_MR, OPS_NV, OPS_PANEL_AHEAD, 0);
            i = OPS_MR;
        }
        for (; i + OPS_MR <= M; i += OPS_MR)
            matmul_tile(out + (int64_t)i * N, a + (int64_t)i * K, bp, ldb, bias, then, K, N, j0, mask, OPS_MR, OPS_NV, 0, 0);
    } else {
        for (; i + OPS_MR <= M; i += OPS_MR)
            matmul_tile(out + (int64_t)i * N, a + (int64_t)i * K, bp, ldb, bias, then, K, N, j0, mask, OPS_MR, OPS_NV,
                        OPS_PREFETCH, 0);
    }
    switch (M - i) {   // the last rows: the same tile, fewer rows
    case 0: break;
    // (a few rows alone bring their packed panel from memory too)
#define TAIL(R) case R: matmul_tile(out + (int64_t)i * N, a + (int64_t)i * K, bp, ldb, bias, then, K, N, j0, mask, R, OPS_NV, \
                                    ldb != OPS_NR ? OPS_PREFETCH : i == 0 ? OPS_PANEL_AHEAD : 0, 0); break;
    TAIL(1) TAIL(2) TAIL(3) TAIL(4) TAIL(5) TAIL(6) TAIL(7)
#undef TAIL
    }
}

#else   // the portable path: plain C in the same order (k ascending, then + bias)

enum { OPS_NR = 16, OPS_ROW_NR = OPS_NR, OPS_MR = 1 };   // OPS_MR: more rows than this pack the panel

static void matmul_panel(float *out, const float *a, const float *bp, int64_t ldb, const float *bias, OpsThen then,
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
            matmul_panel(job->out, job->a, job->panels + (int64_t)p * job->K * OPS_NR, OPS_NR, job->bias, job->then, job->M,
                         job->K, job->N, p * OPS_NR);
        return;
    }
    float *pack = job->M > OPS_MR && job->K <= OPS_PACK_MAX_K ? ops_pack_buffer() : NULL;
    for (int p = begin; p < end; p++) {
        int j0 = p * width;
        if (!pack) {
            matmul_panel(job->out, job->a, job->b + j0, job->N, job->bias, job->then, job->M, job->K, job->N, j0);
            continue;
        }
        int w = job->N - j0 < OPS_NR ? job->N - j0 : OPS_NR;
        // The weights come from memory: a whole panel asks for its rows ahead.
        tile_copy_rows(pack, OPS_NR, job->b + j0, job->N, job->K, w, w == OPS_NR ? OPS_PACK_AHEAD : 0);
        matmul_panel(job->out, job->a, pack, OPS_NR, job->bias, job->then, job->M, job->K, job->N, j0);
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

void ops_matmul(float *out, const float *a, const float *b, const float *bias, int M, int K, int N) {
    ops_matmul_packed(out, a, b, NULL, bias, OPS_STORE, M, K, N);
}

void ops_matmul_packed(float *out, const float *a, const float *b, const float *panels, const float *bias,
                       OpsThen then, int M, int K, int N) {
    // out (M, N) = a (M, K) @ b (K, N) + bias (N)        numpy: a @ b + bias
    // (OPS_ADD_INTO: out += ...; OPS_GELU: out = gelu(...))
    if (M <= 0 || N <= 0) return;
    MatmulJob job = {out, a, b, bias, panels, then, M, K, N};
    int width = M == 1 && !panels ? OPS_ROW_NR : OPS_NR;
    int count = (N + width - 1) / width;
    // Waking the other threads costs microseconds: only for work that is worth it.
    if ((int64_t)M * K * N < 65536) matmul_panels(&job, 0, count, 0);
    else pool_run(ops_pool, matmul_panels, &job, count);
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

#if defined(__AVX512F__)
// exp saturates at -104 (0 in float; -inf too) and 89 (inf in float).
static inline __m512 exp16(__m512 x) { return simd_exp16(x, -104.0f, 89.0f); }

void ops_vecmat(float *out, const float *x, const float *m, int K, int N, int ld) {
    // out[j] = sum_k x[k] * m[k][j]: 8 vectors of sums in registers at a time
    enum { NV = 8 };
    for (int j0 = 0; j0 < N; j0 += 16 * NV) {
        __mmask16 mask[NV];
        __m512 acc[NV];
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            int left = N - j0 - 16 * v;
            mask[v] = left <= 0 ? 0 : simd_mask16(left);
            acc[v] = _mm512_setzero_ps();
        }
        for (int k = 0; k < K; k++) {
            __m512 xk = _mm512_set1_ps(x[k]);
            const float *mk = m + (int64_t)k * ld + j0;
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++)
                acc[v] = _mm512_fmadd_ps(xk, _mm512_maskz_loadu_ps(mask[v], mk + 16 * v), acc[v]);
        }
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) _mm512_mask_storeu_ps(out + j0 + 16 * v, mask[v], acc[v]);
    }
}

// One block of rows (1 .. OPS_ROWS_MAX, a constant once inlined) and up to
// 64 columns: R x 4 vectors of sums in registers.
static inline __attribute__((always_inline)) void
vecmat_rows_tile(float *out, int ldo, const float *x, int ldx, const float *m, int ldm, const int R, int K,
                 int causal, const __mmask16 *mask) {
    __m512 acc[OPS_ROWS_MAX][4];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) acc[r][v] = _mm512_setzero_ps();
    // Every row takes k = 0 .. shared-1; then row r goes on to K - R + r.
    int shared = causal ? K - R + 1 : K;
    int k = 0;
    for (; k < shared; k++) {
        __m512 mv[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) mv[v] = _mm512_maskz_loadu_ps(mask[v], m + (int64_t)k * ldm + 16 * v);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            __m512 xr = _mm512_set1_ps(x[(int64_t)r * ldx + k]);
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++) acc[r][v] = _mm512_fmadd_ps(xr, mv[v], acc[r][v]);
        }
    }
    for (; k < K; k++) {
        int first = k - shared + 1;   // rows first .. R-1 still sum
        __m512 mv[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) mv[v] = _mm512_maskz_loadu_ps(mask[v], m + (int64_t)k * ldm + 16 * v);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            if (r < first) continue;
            __m512 xr = _mm512_set1_ps(x[(int64_t)r * ldx + k]);
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++) acc[r][v] = _mm512_fmadd_ps(xr, mv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) _mm512_mask_storeu_ps(out + (int64_t)r * ldo + 16 * v, mask[v], acc[r][v]);
}

void ops_vecmat_rows(float *out, int ldo, const float *x, int ldx, const float *m, int ldm, int R, int K,
                     int N, int causal) {
    assert(R >= 1 && R <= OPS_ROWS_MAX && (!causal || K >= R));
    for (int j0 = 0; j0 < N; j0 += 64) {
        __mmask16 mask[4];
        for (int v = 0; v < 4; v++) {
            int left = N - j0 - 16 * v;
            mask[v] = left <= 0 ? 0 : simd_mask16(left);
        }
        switch (R) {
#define ROWS(n) case n: vecmat_rows_tile(out + j0, ldo, x, ldx, m + j0, ldm, n, K, causal, mask); break;
        ROWS(1) ROWS(2) ROWS(3) ROWS(4) ROWS(5) ROWS(6)
#undef ROWS
        }
    }
}

void ops_vecmat_acc(float *out, const float *x, const float *m, int K, int N, int ld) {
    // ops_vecmat, the sums starting from out instead of 0
    for (int j0 = 0; j0 < N; j0 += 16) {
        __mmask16 mask = simd_mask16(N - j0);
        __m512 acc = _mm512_maskz_loadu_ps(mask, out + j0);
        for (int k = 0; k < K; k++)
            acc = _mm512_fmadd_ps(_mm512_set1_ps(x[k]), _mm512_maskz_loadu_ps(mask, m + (int64_t)k * ld + j0), acc);
        _mm512_mask_storeu_ps(out + j0, mask, acc);
    }
}

void ops_softmax_row(float *y, float *lse, const float *x, int n, OpsNorm how) {
    if (how == OPS_PYTORCH) {
        ops_softmax_row_plain(y, lse, x, n, how);
        return;
    }
    // max, then exp(x - max) summed in 16 lanes, then / sum or * (1 / sum)
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int i = 0; i < n; i += 16)
        vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(vmax, simd_mask16(n - i), x + i));
    float max = _mm512_reduce_max_ps(vmax);
    __m512 vsum = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 mask = simd_mask16(n - i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + i), _mm512_set1_ps(max)));
        e = _mm512_maskz_mov_ps(mask, e);
        vsum = _mm512_add_ps(vsum, e);
        _mm512_mask_storeu_ps(y + i, mask, e);
    }
    // The 16 lanes added in a fixed tree: the order depends on n only.
    float sum = _mm512_reduce_add_ps(vsum);
    __m512 s = _mm512_set1_ps(how == OPS_RECIPROCAL ? 1.0f / sum : sum);
    for (int i = 0; i < n; i += 16) {
        __mmask16 mask = simd_mask16(n - i);
        __m512 e = _mm512_maskz_loadu_ps(mask, y + i);
        _mm512_mask_storeu_ps(y + i, mask, how == OPS_RECIPROCAL ? _mm512_mul_ps(e, s) : _mm512_div_ps(e, s));
    }
    if (lse) *lse = logf(sum) + max;
}

void ops_gelu(float *out, const float *x, int n) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 mask = simd_mask16(n - i);
        _mm512_mask_storeu_ps(out + i, mask, gelu16(_mm512_maskz_loadu_ps(mask, x + i)));
    }
}

void ops_gelu_backward(float *dx, const float *x, const float *dout, int n) {
    const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
    const __m512 k = _mm512_set1_ps(GELU_K), k3 = _mm512_set1_ps(3.0f * 0.044715f);
    for (int i = 0; i < n; i += 16) {
        __mmask16 mask = simd_mask16(n - i);
        __m512 v = _mm512_maskz_loadu_ps(mask, x + i);
        __m512 t = gelu_tanh16(v);
        __m512 du = _mm512_mul_ps(k, _mm512_fmadd_ps(k3, _mm512_mul_ps(v, v), one));
        // 0.5 (1 + t) + 0.5 x (1 - t^2) du
        __m512 left = _mm512_mul_ps(half, _mm512_add_ps(one, t));
        __m512 right = _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_mul_ps(_mm512_fnmadd_ps(t, t, one), du));
        __m512 grad = _mm512_add_ps(left, right);
        __m512 acc = _mm512_fmadd_ps(grad, _mm512_maskz_loadu_ps(mask, dout + i), _mm512_maskz_loadu_ps(mask, dx + i));
        _mm512_mask_storeu_ps(dx + i, mask, acc);
    }
}

void ops_exp(float *out, const float *x, int n) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 mask = simd_mask16(n - i);
        _mm512_mask_storeu_ps(out + i, mask, exp16(_mm512_maskz_loadu_ps(mask, x + i)));
    }
}

#else   // portable C: the plain loops, with libm's expf

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
static void layernorm_stats_plain(float *m, float *var, const float *x, int R, int C) {
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

#if defined(__AVX512F__)
// Columns c0 .. c0+15 of 16 rows of x (rows ldx floats apart; columns from
// `left` on read as 0) into col[0..15], column j's 16 rows in col[j]'s lanes:
// a 16 x 16 transpose in registers, 64 shuffles.
static inline void transpose16(__m512 col[16], const float *x, int64_t ldx, int left) {
    __mmask16 mask = simd_mask16(left);
    __m512 a[16], b[16];
    // rows 2i, 2i+1 interleaved, in each 128-bit lane L: columns 4L, 4L+1 (a[2i]) and 4L+2, 4L+3 (a[2i+1])
    for (int i = 0; i < 8; i++) {
        __m512 r0 = _mm512_maskz_loadu_ps(mask, x + 2 * i * ldx), r1 = _mm512_maskz_loadu_ps(mask, x + (2 * i + 1) * ldx);
        a[2 * i] = _mm512_unpacklo_ps(r0, r1);
        a[2 * i + 1] = _mm512_unpackhi_ps(r0, r1);
    }
    // rows 4g .. 4g+3, in each 128-bit lane L: column 4L + k in b[4g + k]
    for (int g = 0; g < 4; g++) {
        __m512d lo = _mm512_castps_pd(a[4 * g]), hi = _mm512_castps_pd(a[4 * g + 1]);
        __m512d lo2 = _mm512_castps_pd(a[4 * g + 2]), hi2 = _mm512_castps_pd(a[4 * g + 3]);
        b[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo, lo2));
        b[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo, lo2));
        b[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi, hi2));
        b[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi, hi2));
    }
    // column 4L + k: lane L of b[k], b[4 + k], b[8 + k], b[12 + k], one 128-bit lane each
    for (int k = 0; k < 4; k++) {
        __m512 c0 = _mm512_shuffle_f32x4(b[k], b[4 + k], 0x44), c1 = _mm512_shuffle_f32x4(b[k], b[4 + k], 0xEE);
        __m512 c2 = _mm512_shuffle_f32x4(b[8 + k], b[12 + k], 0x44), c3 = _mm512_shuffle_f32x4(b[8 + k], b[12 + k], 0xEE);
        col[k] = _mm512_shuffle_f32x4(c0, c2, 0x88);
        col[4 + k] = _mm512_shuffle_f32x4(c0, c2, 0xDD);
        col[8 + k] = _mm512_shuffle_f32x4(c1, c3, 0x88);
        col[12 + k] = _mm512_shuffle_f32x4(c1, c3, 0xDD);
    }
}

static void layernorm_stats(float *m, float *var, const float *x, int R, int C) {
    int r = 0;
    __m512 n = _mm512_set1_ps((float)C);
    for (; r + 16 <= R; r += 16) {
        const float *x0 = x + (int64_t)r * C;
        __m512 col[16], sum = _mm512_setzero_ps();
        for (int c0 = 0; c0 < C; c0 += 16) {
            int cols = C - c0 < 16 ? C - c0 : 16;
            transpose16(col, x0 + c0, C, cols);
            for (int j = 0; j < cols; j++) sum = _mm512_add_ps(sum, col[j]);
        }
        __m512 mean = _mm512_div_ps(sum, n), sq = _mm512_setzero_ps();
        for (int c0 = 0; c0 < C; c0 += 16) {
            int cols = C - c0 < 16 ? C - c0 : 16;
            transpose16(col, x0 + c0, C, cols);
            for (int j = 0; j < cols; j++) {
                __m512 d = _mm512_sub_ps(col[j], mean);
                sq = _mm512_add_ps(sq, _mm512_mul_ps(d, d));
            }
        }
        _mm512_storeu_ps(m + r, mean);
        _mm512_storeu_ps(var + r, _mm512_div_ps(sq, n));
    }
    layernorm_stats_plain(m + r, var + r, x + (int64_t)r * C, R - r, C);
}

// y (C) = (x - m) * s * w + b, rounded after each operation as the plain loop.
static void layernorm_apply(float *y, const float *x, float m, float s, const float *w, const float *b, int C) {
    __m512 mv = _mm512_set1_ps(m), sv = _mm512_set1_ps(s);
    for (int c = 0; c < C; c += 16) {
        __mmask16 mask = simd_mask16(C - c);
        __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + c), mv), sv);
        t = _mm512_add_ps(_mm512_mul_ps(t, _mm512_maskz_loadu_ps(mask, w + c)), _mm512_maskz_loadu_ps(mask, b + c));
        _mm512_mask_storeu_ps(y + c, mask, t);
    }
}
#else
static void layernorm_stats(float *m, float *var, const float *x, int R, int C) {
    layernorm_stats_plain(m, var, x, R, C);
}

static void layernorm_apply(float *y, const float *x, float m, float s, const float *w, const float *b, int C) {
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
        layernorm_stats(m, var, x + (int64_t)r0 * C, rows, C);
        for (int i = 0; i < rows; i++) {
            // (x - mean) / np.sqrt(var + eps) * weight + bias
            float mi = m[i], s = 1.0f / sqrtf(var[i] + 1e-5f);
            layernorm_apply(out + (int64_t)(r0 + i) * C, x + (int64_t)(r0 + i) * C, mi, s, w, b, C);
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

enum { FMA_CHAINS = 16 };   // independent sums: more than latency x ports

static void fma_tasks(void *ctx, int begin, int end, int thread) {
    (void)thread;
    FmaJob *job = ctx;
    for (int t = begin; t < end; t++) {
#if defined(__AVX512F__)
        // acc = acc * x + y with x, y chosen so that acc stays near 1:
        // no overflow, no denormals, the same speed every round.
        __m512 acc[FMA_CHAINS];
        const __m512 x = _mm512_set1_ps(0.9999999f), y = _mm512_set1_ps(1e-7f);
#pragma GCC unroll 16
        for (int j = 0; j < FMA_CHAINS; j++) acc[j] = _mm512_set1_ps(1.0f + (float)j * 1e-3f);
        for (int64_t i = 0; i < job->iters; i++)
#pragma GCC unroll 16
            for (int j = 0; j < FMA_CHAINS; j++) acc[j] = _mm512_fmadd_ps(acc[j], x, y);
        __m512 sum = acc[0];
        for (int j = 1; j < FMA_CHAINS; j++) sum = _mm512_add_ps(sum, acc[j]);
        float r = _mm512_reduce_add_ps(sum);
#else
        float acc[FMA_CHAINS * 16];
        for (int j = 0; j < FMA_CHAINS * 16; j++) acc[j] = 1.0f + (float)j * 1e-4f;
        for (int64_t i = 0; i < job->iters; i++)
            for (int j = 0; j < FMA_CHAINS * 16; j++) acc[j] = acc[j] * 0.9999999f + 1e-7f;
        float r = 0;
        for (int j = 0; j < FMA_CHAINS * 16; j++) r += acc[j];
#endif
        if (r == 12345.0f) job->sink = r;   // never true; the result stays used
    }
}

double ops_fma_loop(int64_t iters, int tasks) {
    FmaJob job = {iters, 0};
    pool_run(ops_pool, fma_tasks, &job, tasks);
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

double ops_copy_loop(float *dst, const float *src, int64_t n) {
    CopyJob job = {dst, src, n};
    pool_run(ops_pool, copy_pieces, &job, (int)((n + COPY_PIECE - 1) / COPY_PIECE));
    return 8.0 * (double)n;
}
