// ops — the arithmetic of attention on bare float arrays.
#include "ops.h"

#include <assert.h>
#include <math.h>
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

void ops_matmul(float *out, const float *a, const float *b, const float *bias, int M, int K, int N) {
    ops_matmul_plain(out, a, b, bias, M, K, N);
}

void ops_transpose(float *out, const float *in, int R, int C) {
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) out[(int64_t)c * R + r] = in[(int64_t)r * C + c];
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

void ops_softmax_rows(float *out, const float *in, int R, int C) {
    for (int r = 0; r < R; r++) {
        const float *x = in + (int64_t)r * C;
        float *y = out + (int64_t)r * C;
        float max = -INFINITY;
        for (int c = 0; c < C; c++)
            if (x[c] > max) max = x[c];
        float sum = 0.0f;
        for (int c = 0; c < C; c++) {
            y[c] = expf(x[c] - max);   // exp(-inf) = 0: a masked score weighs nothing
            sum += y[c];
        }
        for (int c = 0; c < C; c++) y[c] /= sum;
    }
}

void ops_concat_rows(float *out, const float *a, int Ra, const float *b, int Rb, int C) {
    memmove(out, a, sizeof(float) * (size_t)Ra * (size_t)C);
    memmove(out + (int64_t)Ra * C, b, sizeof(float) * (size_t)Rb * (size_t)C);
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
