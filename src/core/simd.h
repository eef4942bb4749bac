// simd — AVX-512 pieces shared by the kernels of ops_avx512.c, tile.h and
// train_layers.c: exp and GELU for 16 floats.
#ifndef KVDEMO_SIMD_H
#define KVDEMO_SIMD_H

#define GELU_K 0.7978845608028654f   // sqrt(2 / pi)

#if defined(__AVX512F__)
#include <immintrin.h>

// The lanes of a vector of 16 that hold elements when `left` of them remain:
// all 16, the first `left`, or none.
static inline __mmask16 simd_mask16(int left) {
    return left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1);
}

// exp(x) for 16 floats, x first clamped to [lo, hi] (each caller picks where
// its results saturate): x = n ln2 + r with |r| <= ln2 / 2, exp(r) by its
// Taylor series to r^7 (relative error about 2e-7), times 2^n by vscalefps,
// which also gives 0 for large negative x and inf for large positive x.
static inline __m512 simd_exp16(__m512 x, float lo, float hi) {
    x = _mm512_max_ps(x, _mm512_set1_ps(lo));
    x = _mm512_min_ps(x, _mm512_set1_ps(hi));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);   // ln2 high bits
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);      // ln2 low bits
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

// tanh(GELU_K (x + 0.044715 x^3)) = 1 - 2 / (exp(2 u) + 1), u the argument
static inline __m512 gelu_tanh16(__m512 x) {
    __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
    __m512 u = _mm512_mul_ps(_mm512_set1_ps(2.0f * GELU_K), _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x3, x));
    __m512 e = simd_exp16(u, -88.0f, 88.0f);
    __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
}

// gelu(x) = 0.5 x (1 + t), computed as 0.5 x * t + 0.5 x: lane by lane, so
// ops_gelu and a matmul's OPS_GELU give each element the same bits.
static inline __m512 gelu16(__m512 x) {
    __m512 half_x = _mm512_mul_ps(_mm512_set1_ps(0.5f), x);
    return _mm512_fmadd_ps(half_x, gelu_tanh16(x), half_x);
}
#endif   // __AVX512F__

#endif
