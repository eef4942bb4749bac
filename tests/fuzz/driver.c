// driver — libFuzzer's entry point for one target, chosen when it is
// compiled: -DFUZZ_TARGET=fuzz_gpt_model and so on (see `make fuzz`).
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FUZZ_TARGET(data, size);
    return 0;
}
