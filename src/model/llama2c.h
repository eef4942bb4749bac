// llama2c — llama2.c's model files read into kvdemo's LLaMA-style model
// (llama.h), so that its TinyStories checkpoints (stories15M.bin, ...) and
// their tokenizer.bin run lessons 3 and 6.2, generate and bench.
//
// The checkpoint is llama2.c's original ("legacy", version 0) export: seven
// int32 — dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size
// (negative: the classifier is a tensor of its own; positive: it is the
// token embedding), seq_len — then float32 weights, each tensor for all
// layers in turn, in PyTorch's (out, in) layout, which kvdemo transposes to
// its own (in, out). The tokenizer is bpe.h's. docs/llama-format.md gives
// both byte for byte. The file has no magic: --tokenizer is what says a
// model file is llama2.c's.
#ifndef KVDEMO_LLAMA2C_H
#define KVDEMO_LLAMA2C_H

#include "llama.h"

#include <stddef.h>

enum { LLAMA2C_HEADER_BYTES = 28 };   // the seven int32

// Reads the checkpoint at model_path into m (rope_theta 10000, norm_eps
// 1e-5, as llama2.c's run.c computes) and tokenizer_path into m->bpe.
// Every rule is checked before the model is used. Returns 0, or -1 with a
// one-line message naming the file and the problem (m is then empty).
int llama2c_load(LlamaModel *m, const char *model_path, const char *tokenizer_path, Err err);

// kvdemo's own LLaMA file (llama_load) when tokenizer_path is NULL, else
// llama2.c's pair of files (llama2c_load).
int llama_load_any(LlamaModel *m, const char *model_path, const char *tokenizer_path, Err err);

#endif
