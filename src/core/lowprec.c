// lowprec — lesson 12's arithmetic of other hardware: rounding the
// activations, and a matmul summed in slices (lowprec.h).
//
// Legend of dimension letters:
//   N rows fed at once    K inputs of a matmul    M its outputs
#include "lowprec.h"

#include "ops.h"

int lowprec_on(const LowPrec *p) {
    return p->act_dtype != KV_FP32 || p->split_sum;
}

void lowprec_round(const LowPrec *p, float *x, int64_t n) {
    if (p->act_dtype != KV_FP32) kvquant_round(x, n, p->act_dtype);
}

enum { SLICES = LOWPREC_SLICES, COLS = 16 };

// out (M) = in (K) @ w (K, M) + b, as a GPU matrix-vector kernel sums it:
// K split into SLICES slices, each summed on its own, the partial sums then
// added pairwise (16 + 16, 8 + 8, ...). The same terms as ops_matmul, in
// another order: the result differs in the last bits.
static void matvec_split(float *out, const float *in, const float *w, const float *b, int K, int M) {
    int per = (K + SLICES - 1) / SLICES;
    for (int j0 = 0; j0 < M; j0 += COLS) {
        int cols = M - j0 < COLS ? M - j0 : COLS;
        float part[SLICES][COLS] = {{0}};
        for (int c = 0; c < SLICES; c++)
            for (int k = c * per; k < (c + 1) * per && k < K; k++)
                for (int j = 0; j < cols; j++) part[c][j] += in[k] * w[(int64_t)k * M + j0 + j];
        for (int half = SLICES / 2; half >= 1; half /= 2)
            for (int c = 0; c < half; c++)
                for (int j = 0; j < cols; j++) part[c][j] += part[c + half][j];
        for (int j = 0; j < cols; j++) out[j0 + j] = part[0][j] + (b ? b[j0 + j] : 0.0f);
    }
}

void lowprec_linear(const LowPrec *p, float *out, const float *in, const float *w, const float *b, Pool *pool,
                    int n, int K, int M, int cached) {
    if (p->split_sum && cached && n == 1) matvec_split(out, in, w, b, K, M);
    else ops_matmul(out, in, w, b, pool, n, K, M);
    lowprec_round(p, out, (int64_t)n * M);
}
