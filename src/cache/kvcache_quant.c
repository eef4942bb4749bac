// kvcache_quant — lesson 12's smaller cache as a kind of kvcache.h: keys and
// values kept as bf16, fp16, int8 or int4, the bytes that lesson 12 and
// `kvdemo memory` count, and read back into floats to attend.
//
// Legend as in kvcache.h: L layers, T positions, H heads (= G), D head
// size, N positions fed at once; Q positions that share a key channel's
// scale (the group).
//
// The numbers are those of the contiguous kind rounded once on the way in:
//   bf16, fp16  each number's 16 bits (kvquant_bf16_bits, kvquant_fp16_bits)
//   int8, int4  codes with fp32 scales (kvquant_quantise): a value's D
//               numbers one scale per position and head; a key channel's Q
//               positions one scale, as KIVI keeps keys. A group is
//               quantised when its last position comes; until then its keys
//               wait in fp32 (the residual), as KIVI's do.
// Attention reads a head's keys and values back as floats (code * scale,
// the very floats kvquant_fake_quant would leave) and runs the contiguous
// kind's arithmetic on them. A GPU kernel would dequantise in registers;
// here one layer's worth of floats is the scratch (buf), not counted in
// base.bytes.
#include "kvcache.h"

#include "bigmem.h"
#include "ops.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

// ----------------------------------------------------------------------------
// Codes: int8 one a byte, int4 two a byte (index i in byte i / 2, even i in
// the low nibble, as a signed 4-bit number)

static void code_put(void *codes, KvDtype t, int64_t i, int code) {
    if (t == KV_INT8) {
        ((int8_t *)codes)[i] = (int8_t)code;
        return;
    }
    uint8_t *b = (uint8_t *)codes + i / 2;
    int shift = (int)(i % 2) * 4;
    *b = (uint8_t)((*b & ~(0xF << shift)) | (((unsigned)code & 0xF) << shift));
}

static int code_get(const void *codes, KvDtype t, int64_t i) {
    if (t == KV_INT8) return ((const int8_t *)codes)[i];
    int nibble = (((const uint8_t *)codes)[i / 2] >> ((int)(i % 2) * 4)) & 0xF;
    return nibble >= 8 ? nibble - 16 : nibble;
}

// A 16-bit number's bits from x, and back.
static uint16_t half_of(float x, KvDtype t) { return t == KV_BF16 ? kvquant_bf16_bits(x) : kvquant_fp16_bits(x); }
static float half_float(uint16_t b, KvDtype t) { return t == KV_BF16 ? kvquant_bf16_float(b) : kvquant_fp16_float(b); }

// ----------------------------------------------------------------------------
// Writing

// Key channel (l, h, d)'s complete group g, quantised from the residual.
static void key_group_done(KvQuant *c, int64_t channel, int g) {
    int T = c->base.shape.T, Q = c->group;
    const float *x = c->residual + channel * Q;
    float scale = kvquant_scale(x, Q, 1, c->dtype);
    c->key_scale[channel * (T / Q) + g] = scale;
    for (int j = 0; j < Q; j++) code_put(c->key, c->dtype, channel * T + (int64_t)g * Q + j, kvquant_code(x[j], scale, c->dtype));
}

// Position t's key k (D) of head (l, h): int8 / int4 into the residual, the
// group quantised when t is its last position.
static void key_put(KvQuant *c, int l, int h, int t, const float *k) {
    const KvShape *s = &c->base.shape;
    int T = s->T, D = s->D, Q = c->group;
    for (int d = 0; d < D; d++) {
        int64_t channel = ((int64_t)l * s->H + h) * D + d;
        if (c->dtype == KV_BF16 || c->dtype == KV_FP16) {
            ((uint16_t *)c->key)[channel * T + t] = half_of(k[d], c->dtype);
            continue;
        }
        c->residual[channel * Q + t % Q] = k[d];
        if ((t + 1) % Q == 0 && t / Q < T / Q) key_group_done(c, channel, t / Q);
    }
}

// Position t's value v (D) of head (l, h): one scale for its D numbers.
static void value_put(KvQuant *c, int l, int h, int t, const float *v) {
    const KvShape *s = &c->base.shape;
    int D = s->D;
    int64_t row = ((int64_t)l * s->H + h) * s->T + t;   // (l, h, t)
    if (c->dtype == KV_BF16 || c->dtype == KV_FP16) {
        for (int d = 0; d < D; d++) ((uint16_t *)c->value)[row * D + d] = half_of(v[d], c->dtype);
        return;
    }
    float scale = kvquant_scale(v, D, 1, c->dtype);
    c->value_scale[row] = scale;
    for (int d = 0; d < D; d++) code_put(c->value, c->dtype, row * D + d, kvquant_code(v[d], scale, c->dtype));
}

// k, v (n, H*D) of positions pos .. pos+n-1, kept the narrow way.
static void quant_append(KvCache *base, int l, const float *k, const float *v, int bsz, int n, int pos) {
    assert(bsz == 1);
    KvQuant *c = (KvQuant *)base;
    int H = base->shape.H, D = base->shape.D, C = H * D;
    for (int i = 0; i < n; i++)
        for (int h = 0; h < H; h++) {
            key_put(c, l, h, pos + i, k + (int64_t)i * C + h * D);
            value_put(c, l, h, pos + i, v + (int64_t)i * C + h * D);
        }
}

// ----------------------------------------------------------------------------
// Reading back

// Key channel (l, h, d)'s number at position t of a layer whose positions
// 0 .. S-1 are written, as a float: a complete group's code * scale, or the
// residual's number.
static float key_at(const KvQuant *c, int64_t channel, int t, int S) {
    int T = c->base.shape.T, Q = c->group, g = t / Q;
    if (c->dtype == KV_BF16 || c->dtype == KV_FP16) return half_float(((const uint16_t *)c->key)[channel * T + t], c->dtype);
    if ((g + 1) * Q > S || g >= T / Q) return c->residual[channel * Q + t % Q];
    return (float)code_get(c->key, c->dtype, channel * T + t) * c->key_scale[channel * (T / Q) + g];
}

// Value row (l, h, t)'s number d, as a float.
static float value_at(const KvQuant *c, int64_t row, int d) {
    int D = c->base.shape.D;
    if (c->dtype == KV_BF16 || c->dtype == KV_FP16) return half_float(((const uint16_t *)c->value)[row * D + d], c->dtype);
    return (float)code_get(c->value, c->dtype, row * D + d) * c->value_scale[row];
}

// Head (l, h)'s positions 0 .. S-1 as floats: key (D, T), value (T, D) in buf.
static void quant_read_head(KvCache *base, const float **key, const float **value, float *buf, int l, int h,
                            int S) {
    const KvQuant *c = (const KvQuant *)base;
    int T = base->shape.T, D = base->shape.D;
    float *k = buf, *v = buf + (int64_t)D * T;
    for (int d = 0; d < D; d++) {
        int64_t channel = ((int64_t)l * base->shape.H + h) * D + d;
        for (int t = 0; t < S; t++) k[(int64_t)d * T + t] = key_at(c, channel, t, S);
    }
    for (int t = 0; t < S; t++) {
        int64_t row = ((int64_t)l * base->shape.H + h) * T + t;
        for (int d = 0; d < D; d++) v[(int64_t)t * D + d] = value_at(c, row, d);
    }
    *key = k;
    *value = v;
}

typedef struct {
    KvQuant *c;
    float *out, *weights;
    const float *q;
    int l, n, pos;
} QuantJob;

// The heads begin..end-1: read back, then the contiguous kind's attention.
static void quant_heads(void *ctx, int begin, int end, int thread) {
    (void)thread;
    const QuantJob *job = ctx;
    const KvShape *s = &job->c->base.shape;
    int T = s->T, H = s->H, D = s->D, C = H * D;
    for (int h = begin; h < end; h++) {
        const float *key, *value;
        quant_read_head(&job->c->base, &key, &value, job->c->buf + (int64_t)h * 2 * D * T, job->l, h, job->pos + job->n);
        kvcontig_attend_head(job->out + h * D, h == 0 ? job->weights : NULL,
                             job->c->scores + (int64_t)h * OPS_ROWS_MAX * T, job->q + h * D, key, value, job->n,
                             job->pos, C, D, T);
    }
}

static void quant_attend(KvCache *base, float *out, float *weights, const float *q, Pool *pool, int l, int bsz, int n,
                         int pos) {
    assert(bsz == 1);
    QuantJob job = {(KvQuant *)base, out, weights, q, l, n, pos};
    pool_run(pool, quant_heads, &job, base->shape.H);
}

// Keeps positions 0 .. len-1. A complete group cut short waits in the
// residual again, holding the numbers read back (what it held in floats),
// to be quantised anew when its last position comes again.
static void quant_truncate(KvCache *base, int len) {
    KvQuant *c = (KvQuant *)base;
    const KvShape *s = &base->shape;
    int Q = c->group, g = len / Q;
    if (c->dtype == KV_BF16 || c->dtype == KV_FP16 || len % Q == 0 || (g + 1) * Q > base->len || g >= s->T / Q) return;
    for (int64_t channel = 0; channel < (int64_t)s->L * s->H * s->D; channel++)
        for (int t = g * Q; t < len; t++) c->residual[channel * Q + t % Q] = key_at(c, channel, t, base->len);
}

// Nothing to clear: a position is written before it is read.
static void quant_reset(KvCache *base) {
    (void)base;
}

static void quant_free(KvCache *base) {
    KvQuant *c = (KvQuant *)base;
    bigmem_free(c->mem, c->mem_bytes);
    bigmem_free(c->buf, c->scratch_bytes);
    memset(c, 0, sizeof *c);
}

static const KvCacheKind QUANT = {"quantised", quant_append,  quant_attend, quant_truncate, quant_reset,
                                  quant_free,  quant_read_head, NULL,       NULL};

// Byte offsets of the arrays in one allocation, each 64-byte aligned.
static size_t carve(size_t *at, size_t bytes) {
    size_t here = *at;
    *at += (bytes + 63) / 64 * 64;
    return here;
}

int kvquant_cache_init(KvQuant *c, KvShape shape, KvDtype dtype, int group) {
    assert(shape.B == 1 && shape.G == shape.H && dtype != KV_FP32 && group >= 1);
    memset(c, 0, sizeof *c);
    c->base.kind = &QUANT;
    c->base.shape = shape;
    c->dtype = dtype;
    c->group = group;
    int L = shape.L, T = shape.T, H = shape.H, D = shape.D, C = H * D;
    size_t numbers = (size_t)L * C * T;   // of the keys; as many of the values
    size_t codes = dtype == KV_INT4 ? (numbers + 1) / 2 : dtype == KV_INT8 ? numbers : 2 * numbers;
    int quantised = dtype == KV_INT8 || dtype == KV_INT4;
    size_t at = 0, k = carve(&at, codes), v = carve(&at, codes), vs = 0, ks = 0, res = 0;
    if (quantised) {
        vs = carve(&at, sizeof(float) * (size_t)L * H * T);
        ks = carve(&at, sizeof(float) * (size_t)L * C * (size_t)(T / group));
        res = carve(&at, sizeof(float) * (size_t)L * C * (size_t)group);
    }
    c->base.bytes = (size_t)kvquant_cache_bytes(dtype, L, C, H, T, group);   // the arrays, without the alignment
    c->mem_bytes = at;
    c->mem = bigmem_alloc(at);   // zeroed
    size_t buf = sizeof(float) * (size_t)H * 2 * D * T, scores = sizeof(float) * (size_t)H * OPS_ROWS_MAX * T;
    c->scratch_bytes = buf + scores;
    c->buf = bigmem_alloc(c->scratch_bytes);
    if (!c->mem || !c->buf) {
        quant_free(&c->base);
        return -1;
    }
    unsigned char *m = c->mem;
    c->key = m + k, c->value = m + v;
    if (quantised) c->value_scale = (float *)(m + vs), c->key_scale = (float *)(m + ks), c->residual = (float *)(m + res);
    c->scores = c->buf + (size_t)H * 2 * D * T;
    return 0;
}
