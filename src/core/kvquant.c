// kvquant — bf16 / fp16 rounding and int8 / int4 quantisation, in plain C
// (no library), for lesson 12 and the --kv-dtype option.
//
// Legend of dimension letters:
//   n  numbers in a group that share one scale    G  tokens per key group
#include "kvquant.h"

#include <assert.h>
#include <math.h>
#include <string.h>

static const char *const NAMES[] = {"fp32", "bf16", "fp16", "int8", "int4"};

const char *kvquant_name(KvDtype t) {
    assert(t >= KV_FP32 && t <= KV_INT4);
    return NAMES[t];
}

int kvquant_parse(KvDtype *t, const char *name) {
    for (int i = 0; i <= KV_INT4; i++)
        if (!strcmp(name, NAMES[i])) {
            *t = (KvDtype)i;
            return 0;
        }
    return -1;
}

// ----------------------------------------------------------------------------
// bf16 and fp16, rounded to nearest with ties to even

static uint32_t float_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float bits_float(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

uint16_t kvquant_bf16_bits(float x) {
    uint32_t u = float_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);   // NaN stays quiet NaN
    // Add just under half of the dropped part, plus the kept part's lowest
    // bit: a tie then carries only into an odd number, which makes it even.
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float kvquant_bf16_float(uint16_t bits) {
    return bits_float((uint32_t)bits << 16);
}

// q (the kept bits) rounded by rem (the dropped ones, below 2^shift).
static uint32_t round_even(uint32_t q, uint32_t rem, int shift) {
    uint32_t half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1u)));
}

uint16_t kvquant_fp16_bits(float x) {
    uint32_t u = float_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00;    // NaN
    if (a >= 0x477ff000u) return sign | 0x7c00;   // 65520 and up round to inf
    int e = (int)(a >> 23);                       // float's biased exponent
    if (e >= 113) {                               // a normal half: 2^-14 and up
        // half exponent e - 112, mantissa the top 10 of float's 23 bits
        uint32_t q = ((uint32_t)(e - 112) << 10) | ((a & 0x7fffffu) >> 13);
        return sign | (uint16_t)round_even(q, a & 0x1fffu, 13);   // a carry moves into the exponent
    }
    if (e == 0) return sign;                      // float subnormals are far below half's
    // A half subnormal counts units of 2^-24: value / 2^-24 = m >> (126 - e).
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    int shift = 126 - e;
    if (shift > 24) return sign;                  // below 2^-25: rounds to 0
    return sign | (uint16_t)round_even(m >> shift, m & ((1u << shift) - 1u), shift);
}

float kvquant_fp16_float(uint16_t bits) {
    uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
    int e = (bits >> 10) & 0x1f;
    uint32_t m = bits & 0x3ffu;
    if (e == 0x1f) return bits_float(sign | 0x7f800000u | (m << 13));   // inf, NaN
    if (e == 0) {                                                      // 0 and subnormals: m * 2^-24
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_float(sign | ((uint32_t)(e + 112) << 23) | (m << 13));
}

void kvquant_round(float *x, int64_t n, KvDtype t) {
    if (t == KV_BF16)
        for (int64_t i = 0; i < n; i++) x[i] = kvquant_bf16_float(kvquant_bf16_bits(x[i]));
    else if (t == KV_FP16)
        for (int64_t i = 0; i < n; i++) x[i] = kvquant_fp16_float(kvquant_fp16_bits(x[i]));
    else
        assert(t == KV_FP32);
}

// ----------------------------------------------------------------------------
// int8 and int4: symmetric, one scale a group

int kvquant_qmax(KvDtype t) {
    assert(t == KV_INT8 || t == KV_INT4);
    return t == KV_INT8 ? 127 : 7;
}

// scale = x.abs().max() / qmax (0 when every number is 0)
static float scale_of(const float *x, int n, int64_t stride, int qmax) {
    float amax = 0;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i * stride]));
    return amax == 0 ? 0 : amax / (float)qmax;
}

// code = (x / scale).round().clamp(-qmax, qmax)
static float code_of(float x, float scale, int qmax) {
    float code = nearbyintf(x / scale);
    if (code > (float)qmax) code = (float)qmax;
    if (code < (float)-qmax) code = (float)-qmax;
    return code;
}

float kvquant_scale(const float *x, int n, int64_t stride, KvDtype t) {
    return scale_of(x, n, stride, kvquant_qmax(t));
}

int kvquant_code(float x, float scale, KvDtype t) {
    return scale == 0 ? 0 : (int)code_of(x, scale, kvquant_qmax(t));
}

float kvquant_fake_quant(float *x, int n, int64_t stride, KvDtype t) {
    int qmax = kvquant_qmax(t);
    float scale = scale_of(x, n, stride, qmax);
    if (scale == 0) return 0;   // every number 0: left as it was
    for (int i = 0; i < n; i++)
        x[i * stride] = code_of(x[i * stride], scale, qmax) * scale;   // what the attention reads back
    return scale;
}

double kvquant_bytes_per_token(KvDtype t, int L, int C, int H, int group) {
    double per_number = t == KV_FP32 ? 4 : t == KV_BF16 || t == KV_FP16 ? 2 : t == KV_INT8 ? 1 : 0.5;
    double bytes = 2.0 * C * per_number;   // a key and a value of C numbers
    if (t == KV_INT8 || t == KV_INT4)
        bytes += 4.0 * H                   // value: one fp32 scale per head
                 + 4.0 * C / group;        // key: one per channel, shared by group tokens
    return bytes * L;
}

double kvquant_cache_bytes(KvDtype t, int L, int C, int H, int T, int group) {
    double per_number = t == KV_FP32 ? 4 : t == KV_BF16 || t == KV_FP16 ? 2 : t == KV_INT8 ? 1 : 0.5;
    double numbers = (double)L * C * T;   // of the keys, and as many of the values
    if (t == KV_INT4) return 2.0 * ceil(numbers / 2) + 4.0 * L * H * T + 4.0 * L * C * (T / group) + 4.0 * L * C * group;
    double bytes = 2.0 * numbers * per_number;
    if (t == KV_INT8) bytes += 4.0 * L * H * T + 4.0 * L * C * (T / group) + 4.0 * L * C * group;
    return bytes;
}
