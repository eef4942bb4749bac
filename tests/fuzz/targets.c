// targets — the parsers, each fed one input. The loaders read files, so the
// input is first written to a file of this process's own (one per process,
// reused), then the loader reads it like any file a user names.
#include "targets.h"

#include "cli.h"
#include "gpt.h"
#include "llama.h"
#include "llama2c.h"
#include "bpe.h"
#include "options.h"
#include "toydata.h"
#include "trace.h"
#include "checkpoint.h"
#include "train.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The input as a file; returns its path (valid until the next call), or NULL.
static const char *input_file(const uint8_t *data, size_t size) {
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/kvdemo-fuzz-%ld.in", (long)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return NULL;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) break;
        done += (size_t)n;
    }
    close(fd);
    return done == size ? path : NULL;
}

int fuzz_gpt_model(const uint8_t *data, size_t size) {
    const char *path = input_file(data, size);
    if (!path) return 1;
    GptModel m;
    char err[512];
    if (gpt_load(&m, path, err, sizeof err) != 0) return 1;
    gpt_free(&m);
    return 0;
}

int fuzz_llama_model(const uint8_t *data, size_t size) {
    const char *path = input_file(data, size);
    if (!path) return 1;
    LlamaModel m;
    char err[512];
    if (llama_load(&m, path, err, sizeof err) != 0) return 1;
    llama_free(&m);
    return 0;
}

// The input as llama2.c's checkpoint, with the test tokenizer of 328 tokens.
int fuzz_llama2c_model(const uint8_t *data, size_t size) {
    const char *path = input_file(data, size);
    if (!path) return 1;
    LlamaModel m;
    char err[512];
    if (llama2c_load(&m, path, "tests/fixtures/llama2c_tok.bin", err, sizeof err) != 0) return 1;
    llama_free(&m);
    return 0;
}

// The input as a tokenizer.bin of 328 tokens; if it is one, a text through it
// both ways.
int fuzz_bpe(const uint8_t *data, size_t size) {
    Bpe t;
    char err[512], out[1024];
    if (bpe_parse(&t, data, size, 328, "fuzz", err, sizeof err) != 0) return 1;
    int ids[256];
    int n = bpe_encode(ids, &t, "Once upon a time, \xe5\xa4\xa9\xe6\xb0\x94 h\xc3\xa9llo", 1, 1, 256, err, sizeof err);
    if (n > 0) bpe_decode(out, &t, ids, n, sizeof out);
    bpe_free(&t);
    return 0;
}

int fuzz_checkpoint(const uint8_t *data, size_t size) {
    const char *path = input_file(data, size);
    if (!path) return 1;
    TrainCheckpoint ck;
    char err[512];
    if (train_checkpoint_load(path, &ck, err, sizeof err) != 0) return 1;
    train_checkpoint_free(&ck);
    return 0;
}

int fuzz_toydata(const uint8_t *data, size_t size) {
    const char *path = input_file(data, size);
    if (!path) return 1;
    ToyData t;
    char err[512];
    if (toydata_load(&t, path, err, sizeof err) != 0) return 1;
    toydata_free(&t);
    return 0;
}

// The text twice: with its own vocabulary, then mapped into a small fixed one.
int fuzz_text(const uint8_t *data, size_t size) {
    const char *path = input_file(data, size);
    if (!path) return 1;
    TrainText text;
    char err[512];
    int rc = train_text_load(&text, path, NULL, 0, err, sizeof err) != 0;
    if (rc == 0) train_text_free(&text);
    static const uint32_t vocab[] = {'\n', ' ', 'a', 'b', 0x5929};
    if (train_text_load(&text, path, vocab, 5, err, sizeof err) == 0) train_text_free(&text);
    return rc;
}

// The first byte picks the command; the rest, cut at NUL bytes, are the
// arguments after it.
int fuzz_options(const uint8_t *data, size_t size) {
    static const char *const commands[] = {"lesson", "generate", "bench", "init", "train", "eval"};
    enum { MAX_ARGS = 64 };
    if (size < 1) return 1;
    const char *command = commands[data[0] % 6];
    char *copy = malloc(size);
    if (!copy) return 1;
    memcpy(copy, data + 1, size - 1);
    copy[size - 1] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)"kvdemo";
    argv[argc++] = (char *)command;
    for (size_t at = 0; at < size - 1 && argc < MAX_ARGS + 2;) {
        argv[argc++] = copy + at;
        at += strlen(copy + at) + 1;
    }
    Options opt;
    Trace tr;
    int rc = cli_parse_options(&opt, &tr, argc, argv, command);
    free(copy);
    return rc != 0;
}

const FuzzTarget FUZZ_TARGETS[] = {
    {"gpt_model", fuzz_gpt_model},   {"llama_model", fuzz_llama_model},
    {"checkpoint", fuzz_checkpoint}, {"toydata", fuzz_toydata},
    {"text", fuzz_text},             {"options", fuzz_options},
    {"llama2c_model", fuzz_llama2c_model}, {"bpe", fuzz_bpe},
};
const int NUM_FUZZ_TARGETS = (int)(sizeof FUZZ_TARGETS / sizeof FUZZ_TARGETS[0]);
