// targets — one entry point per parser that reads what a user hands kvdemo:
// the char GPT model, the LLaMA model, the training checkpoint, the example
// data, the training text and the command-line options, and what the
// commands then do with some of them. libFuzzer drives
// each one (tests/fuzz/driver.c, `make fuzz`); tests/test_corpus.c replays
// the saved corpus through them in every `make test`.
//
// Each returns 0 when the input was accepted and 1 when it was refused;
// either is fine for a fuzzer, which only looks for crashes, sanitizer
// reports and hangs.
#ifndef KVDEMO_FUZZ_TARGETS_H
#define KVDEMO_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

typedef int (*FuzzFn)(const uint8_t *data, size_t size);

int fuzz_gpt_model(const uint8_t *data, size_t size);
int fuzz_llama_model(const uint8_t *data, size_t size);
int fuzz_checkpoint(const uint8_t *data, size_t size);
int fuzz_toydata(const uint8_t *data, size_t size);
int fuzz_text(const uint8_t *data, size_t size);
int fuzz_options(const uint8_t *data, size_t size);
// The model files and the checkpoint with their checksum made right first,
// so that the fuzzer gets past it.
int fuzz_gpt_model_summed(const uint8_t *data, size_t size);
int fuzz_llama_model_summed(const uint8_t *data, size_t size);
int fuzz_checkpoint_summed(const uint8_t *data, size_t size);
// What is done with what loads: example data through lessons 1, 2, 7 and
// 9; the arguments of kvdemo memory; a --prompt for a small model.
int fuzz_toy_lessons(const uint8_t *data, size_t size);
int fuzz_memory(const uint8_t *data, size_t size);
int fuzz_prompt(const uint8_t *data, size_t size);
int fuzz_llama2c_model(const uint8_t *data, size_t size);   // llama2.c's checkpoint
int fuzz_bpe(const uint8_t *data, size_t size);             // llama2.c's tokenizer.bin
// Options that name files (links, a folder, a device among them), checked
// as the commands check their inputs and outputs before any work.
int fuzz_options_files(const uint8_t *data, size_t size);

typedef struct {
    const char *name;   // the folder of its corpus: tests/fuzz/corpus/NAME
    FuzzFn run;
} FuzzTarget;

extern const FuzzTarget FUZZ_TARGETS[];
extern const int NUM_FUZZ_TARGETS;

#endif
