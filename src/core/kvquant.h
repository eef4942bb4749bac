// kvquant — smaller numbers for the KV cache and the activations (lesson 12):
// bf16 and fp16 rounding done in C (round to nearest, ties to even), and
// int8 / int4 quantisation with one scale per group of numbers.
//
// Legend of dimension letters:
//   n  numbers in a group that share one scale    G  tokens per key group
//
// Quantisation here is symmetric: scale = max |x| / QMAX, code =
// round(x / scale) clamped to -QMAX .. QMAX (QMAX 127 for int8, 7 for int4),
// and x comes back as code * scale, so |x - back| <= scale / 2.
#ifndef KVDEMO_KVQUANT_H
#define KVDEMO_KVQUANT_H

#include <stdint.h>

// How the cache (or the activations) store a number. FP32 is kvdemo's own
// float, the default.
typedef enum { KV_FP32, KV_BF16, KV_FP16, KV_INT8, KV_INT4 } KvDtype;

// "fp32", "bf16", "fp16", "int8", "int4".
const char *kvquant_name(KvDtype t);
// The dtype called name; returns 0, or -1 for an unknown name.
int kvquant_parse(KvDtype *t, const char *name);

// bf16: the top 16 bits of a float32, rounded to nearest even (NaN stays a
// NaN). torch.tensor(x).to(torch.bfloat16)
uint16_t kvquant_bf16_bits(float x);
float kvquant_bf16_float(uint16_t bits);
// fp16 (IEEE half): 5 exponent bits, 10 mantissa bits, subnormals, inf past
// 65520, rounded to nearest even. numpy: np.float32(x).astype(np.float16)
uint16_t kvquant_fp16_bits(float x);
float kvquant_fp16_float(uint16_t bits);

// x (n), in place: every number rounded to bf16 or fp16 and back. For
// KV_FP32 nothing changes; int8 and int4 are not elementwise (see below).
void kvquant_round(float *x, int64_t n, KvDtype t);

// The largest code: 127 for int8, 7 for int4.
int kvquant_qmax(KvDtype t);

// x (n, stride apart), in place: quantised with one scale for the n numbers
// and dequantised again, as a cache stores and later reads them. Returns
// the scale (0 when every number is 0). t is KV_INT8 or KV_INT4.
float kvquant_fake_quant(float *x, int n, int64_t stride, KvDtype t);
// The same quantisation kept rather than undone, in two parts: the scale
// of x (n, stride apart), and the code of one number of it, so that
// code * scale is the float kvquant_fake_quant leaves (the quantised cache
// stores codes and scales). A scale of 0 (every number 0) gives code 0.
float kvquant_scale(const float *x, int n, int64_t stride, KvDtype t);
int kvquant_code(float x, float scale, KvDtype t);

// Bytes one token of the cache needs, every block, keys and values, in the
// packed form (int4: two codes a byte) with fp32 scales: per-token value
// scales (one a head), and per-channel key scales shared by a group of
// group tokens (KIVI). L blocks, C = H * D channels.
double kvquant_bytes_per_token(KvDtype t, int L, int C, int H, int group);
// Bytes the quantised cache (kvcache_quant.c) allocates for T positions:
// T tokens of kvquant_bytes_per_token when group divides T, key scales for
// the T / group complete groups only otherwise, and for int8 / int4 the
// keys of each channel's incomplete group in fp32 (KIVI's residual,
// L * C * group floats).
double kvquant_cache_bytes(KvDtype t, int L, int C, int H, int T, int group);

#endif
