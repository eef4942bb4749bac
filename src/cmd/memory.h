// memory — how many bytes a KV cache holds: the formula of the article's §8,
// the published shapes of real models (presets), and `kvdemo memory`.
//
//   bytes = 2 (K and V) · layers · kv_heads · head_dim · tokens · batch · bytes per value
//
// With MHA kv_heads · head_dim = d_model (the article's form); with GQA and
// MQA kv_heads is smaller than the number of query heads. DeepSeek's MLA
// caches one latent of kv_lora_rank + rope dims per layer, shared by K and V,
// so it has no factor 2. A sliding window (Mistral) caps the tokens held.
// docs/memory.md gives the source of every preset's shape.
#ifndef KVDEMO_MEMORY_H
#define KVDEMO_MEMORY_H

#include "options.h"
#include "trace.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;       // "llama-2-70b"
    const char *label;      // "LLaMA-2-70B"
    int layers;
    int heads;              // query heads
    int kv_heads;           // key/value heads (= heads for MHA); 0 for MLA
    int head_dim;
    int d_model;            // hidden size
    int mla_dim;            // MLA: kv_lora_rank + rope dims per layer (0 otherwise)
    int window;             // sliding window in tokens (0: none)
    double params;          // parameters, for the weights' size
    int bits;               // default bits per value: 16, or 32 for kvdemo's char GPT
    const char *source;     // where the shape is published
    int context;            // the longest sequence it takes, in tokens (0: none cited in kvdemo's references)
    const char *context_source;   // where that length is published
} MemModel;

extern const MemModel MEM_PRESETS[];
extern const int NUM_MEM_PRESETS;

// The preset with this name, or NULL.
const MemModel *memory_preset(const char *name);

// Bits per value of a --dtype name (fp32 32, fp16 16, bf16 16, fp8 8, int8 8,
// int4 4), or 0 for an unknown name.
int memory_dtype_bits(const char *dtype);

// Values cached per token per sequence: 2 · layers · kv_heads · head_dim, or
// layers · mla_dim for MLA. Returns 0, or -1 on overflow.
int memory_values_per_token(uint64_t *out, const MemModel *m);

// out = a · b, or -1 when the product does not fit in 64 bits.
int memory_mul(uint64_t *out, uint64_t a, uint64_t b);

// Bytes the cache of one sequence holds per token at this many bits per
// value (values · bits / 8, rounded up to a whole byte). Returns 0, or -1
// on overflow.
int memory_bytes_per_token(uint64_t *out, const MemModel *m, int bits);

// Tokens the cache holds for a sequence of this length: all of them, or the
// window when there is one.
uint64_t memory_tokens_held(const MemModel *m, uint64_t tokens);

// 1 when a sequence of this many tokens is longer than the model's cited
// context (never for a model without one).
int memory_past_context(const MemModel *m, uint64_t tokens);

// Bytes of one token's scales in a quantised cache (int8, int4: dtype's
// name; 0 for any other), the layout lesson 12 measures (kvquant.h): per
// layer one fp32 scale a key/value head for the values, and one a channel
// shared by KV_KEY_GROUP tokens for the keys; MLA's latent one a layer.
double memory_scale_bytes_per_token(const MemModel *m, const char *dtype);

// Bytes of the cache of batch sequences of tokens each. Returns 0, or -1 on
// overflow.
int memory_cache_bytes(uint64_t *out, const MemModel *m, int bits, uint64_t tokens, uint64_t batch);

// "164,282,499,072"; "164.3 GB" (powers of 1000); "153.0 GiB" (powers of 1024).
const char *memory_grouped(char *buf, size_t size, uint64_t v);
const char *memory_decimal(char *buf, size_t size, double bytes);
const char *memory_binary(char *buf, size_t size, double bytes);

// Parses a size with its unit: "80GB", "80 GiB", "512MB", "1.5TB". Returns 0
// and the bytes, or -1 for anything else.
int memory_parse_size(double *bytes, const char *text);

// kvdemo memory: the calculator. Returns 0, 2 for a usage error, 1 for a
// failure (one line on stderr).
int memory_cmd(const Options *opt, Trace *tr);

#endif
