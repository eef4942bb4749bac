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
#include "corpus.h"
#include "fileio.h"
#include "gptsetup.h"
#include "lessons.h"
#include "memory.h"
#include "train.h"

#include "fileguard.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    if (gpt_load(&m, path, ERR(LANG_EN, err)) != 0) return 1;
    gpt_free(&m);
    return 0;
}

int fuzz_llama_model(const uint8_t *data, size_t size) {
    const char *path = input_file(data, size);
    if (!path) return 1;
    LlamaModel m;
    char err[512];
    if (llama_load(&m, path, ERR(LANG_EN, err)) != 0) return 1;
    llama_free(&m);
    return 0;
}

// The input as llama2.c's checkpoint, with the test tokenizer of 328 tokens.
int fuzz_llama2c_model(const uint8_t *data, size_t size) {
    const char *path = input_file(data, size);
    if (!path) return 1;
    LlamaModel m;
    char err[512];
    if (llama2c_load(&m, path, "tests/fixtures/llama2c_tok.bin", ERR(LANG_EN, err)) != 0) return 1;
    llama_free(&m);
    return 0;
}

// The input as a tokenizer.bin of 328 tokens; if it is one, a text through it
// both ways.
int fuzz_bpe(const uint8_t *data, size_t size) {
    Bpe t;
    char err[512], out[1024];
    if (bpe_parse(&t, data, size, 328, "fuzz", ERR(LANG_EN, err)) != 0) return 1;
    int ids[256];
    int n = bpe_encode(ids, &t, "Once upon a time, \xe5\xa4\xa9\xe6\xb0\x94 h\xc3\xa9llo", 1, 1, 256, ERR(LANG_EN, err));
    if (n > 0) bpe_decode(out, &t, ids, n, sizeof out);
    bpe_free(&t);
    return 0;
}

int fuzz_checkpoint(const uint8_t *data, size_t size) {
    const char *path = input_file(data, size);
    if (!path) return 1;
    TrainCheckpoint ck;
    char err[512];
    if (train_checkpoint_load(path, &ck, ERR(LANG_EN, err)) != 0) return 1;
    train_checkpoint_free(&ck);
    return 0;
}

int fuzz_toydata(const uint8_t *data, size_t size) {
    const char *path = input_file(data, size);
    if (!path) return 1;
    ToyData t;
    char err[512];
    if (toydata_load(&t, path, ERR(LANG_EN, err)) != 0) return 1;
    toydata_free(&t);
    return 0;
}

// The text twice: with its own vocabulary, then mapped into a small fixed one.
int fuzz_text(const uint8_t *data, size_t size) {
    const char *path = input_file(data, size);
    if (!path) return 1;
    TrainText text;
    char err[512];
    int rc = train_text_load(&text, path, NULL, 0, ERR(LANG_EN, err)) != 0;
    if (rc == 0) train_text_free(&text);
    static const uint32_t vocab[] = {'\n', ' ', 'a', 'b', 0x5929};
    if (train_text_load(&text, path, vocab, 5, ERR(LANG_EN, err)) == 0) train_text_free(&text);
    return rc;
}

enum { MAX_ARGS = 64 };

// kvdemo COMMAND ARGS: the arguments are data cut at NUL bytes, in copy
// (size bytes, freed by the caller); returns argc.
static int split_args(char *argv[MAX_ARGS + 2], char *copy, const uint8_t *data, size_t size,
                      const char *command) {
    memcpy(copy, data, size);
    copy[size] = '\0';
    int argc = 0;
    argv[argc++] = (char *)"kvdemo";
    argv[argc++] = (char *)command;
    for (size_t at = 0; at < size && argc < MAX_ARGS + 2;) {
        argv[argc++] = copy + at;
        at += strlen(copy + at) + 1;
    }
    return argc;
}

// The first byte picks the command; the rest, cut at NUL bytes, are the
// arguments after it.
int fuzz_options(const uint8_t *data, size_t size) {
    static const char *const commands[] = {"lesson", "generate", "bench", "init", "train", "eval"};
    if (size < 1) return 1;
    const char *command = commands[data[0] % 6];
    char *copy = malloc(size);
    if (!copy) return 1;
    char *argv[MAX_ARGS + 2];
    int argc = split_args(argv, copy, data + 1, size - 1, command);
    Options opt;
    Trace tr;
    int rc = cli_parse_options(&opt, &tr, argc, argv, command);
    free(copy);
    return rc != 0;
}

// ---------------------------------------------------------------------------
// Past the checksums: the input with its last bytes replaced by the
// checksum of the others, so that the fuzzer's changes reach the checks
// behind it (a model file of version 2 ends with the Adler-32 of what comes
// before, a checkpoint with the FNV-1a; docs/model-format.md,
// docs/llama-format.md, src/model/checkpoint.c).

static uint8_t *summed(const uint8_t *data, size_t size, size_t sum_bytes) {
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return NULL;
    memcpy(copy, data, size);
    if (size < sum_bytes) return copy;
    size_t n = size - sum_bytes;
    if (sum_bytes == 4) le_put_u32(copy + n, fileio_adler32(1, copy, n));
    else le_put_u64(copy + n, fnv1a(FNV_START, copy, n));
    return copy;
}

static int run_summed(FuzzFn fn, const uint8_t *data, size_t size, size_t sum_bytes) {
    uint8_t *copy = summed(data, size, sum_bytes);
    if (!copy) return 1;
    int rc = fn(copy, size);
    free(copy);
    return rc;
}

int fuzz_gpt_model_summed(const uint8_t *data, size_t size) { return run_summed(fuzz_gpt_model, data, size, 4); }

int fuzz_llama_model_summed(const uint8_t *data, size_t size) {
    return run_summed(fuzz_llama_model, data, size, 4);
}

int fuzz_checkpoint_summed(const uint8_t *data, size_t size) {
    return run_summed(fuzz_checkpoint, data, size, 8);
}

// ---------------------------------------------------------------------------
// What the commands do with what they accept

// Where a lesson's or a command's output goes while fuzzing.
static FILE *nowhere(void) {
    static FILE *f;
    if (!f) f = fopen("/dev/null", "w");
    return f;
}

static Options default_options(void) {
    return (Options){.runs = RUN_BOTH, .steps = -1, .seed = 42, .temperature = -1, .top_p = -1};
}

// Example data that loads, run through the lessons on it: 1, 2, 7 and 9,
// the whole trace, as text when the input's size is even and as JSON when
// it is odd (lesson 6.3 also times the shipped model, seconds a run).
int fuzz_toy_lessons(const uint8_t *data, size_t size) {
    if (fuzz_toydata(data, size) != 0) return 1;
    const char *path = input_file(data, size);
    FILE *out = nowhere();
    if (!path || !out) return 1;
    static const char *const ids[] = {"1", "2", "7", "9"};
    int rc = 0;
    for (int i = 0; i < 4; i++) {
        const Lesson *l = lessons_find(ids[i]);
        Options opt = default_options();
        opt.data_path = path;
        Trace tr;
        trace_init(&tr, out);
        tr.level = TRACE_FULL;
        tr.format = size % 2 ? FORMAT_JSON : FORMAT_TEXT;
        tr.lesson = l->id;
        rc |= trace_begin(&tr) ? 1 : trace_finish(&tr, l->run(&opt, &tr));
    }
    return rc != 0;
}

// kvdemo memory with the input as its arguments (cut at NUL bytes).
int fuzz_memory(const uint8_t *data, size_t size) {
    char *copy = malloc(size + 1);
    FILE *out = nowhere();
    if (!copy || !out) {
        free(copy);
        return 1;
    }
    char *argv[MAX_ARGS + 2];
    int argc = split_args(argv, copy, data, size, "memory");
    Options opt;
    Trace tr;
    int rc = cli_parse_options(&opt, &tr, argc, argv, "memory");
    if (rc == 0) {
        tr.out = out;
        rc = trace_begin(&tr) ? 1 : trace_finish(&tr, memory_cmd(&opt, &tr));
    }
    free(copy);
    return rc != 0;
}

// The input as a --prompt of tests/fixtures/gpt_a.kvgp (whose vocabulary is
// "\n", " ", "a" and "b"): its characters decoded and looked up.
int fuzz_prompt(const uint8_t *data, size_t size) {
    static GptModel m;
    static int loaded;
    char err[512];
    if (!loaded && gpt_load(&m, "tests/fixtures/gpt_a.kvgp", ERR(LANG_EN, err)) != 0) return 1;
    loaded = 1;
    char *prompt = malloc(size + 1);
    if (!prompt) return 1;
    memcpy(prompt, data, size);
    prompt[size] = '\0';
    int *tokens = NULL, n = 0;
    int rc = gptsetup_prompt(LANG_EN, &tokens, &n, &m, prompt, 4);
    free(tokens);
    free(prompt);
    return rc != 0;
}

// ---------------------------------------------------------------------------
// Options with files: what a command may read and write, checked before
// any work (fileguard.h, fileio.h)

// The files an argument "@N" names (N = 0 to 5, the digit modulo 6): a
// text, a symbolic link to it, a hard link to it (three names of one file),
// a folder, a name not taken, and a device. Made once, in a folder of this
// process's own, removed at exit.
enum { NUM_FILES = 6, FILES_HELD = 4 };
static char file_dir[64], file_path[NUM_FILES][96];
static const char TEXT[] = "ROMEO: O Romeo, Romeo!\n";

static void files_remove(void) {
    for (int i = 0; i < 3; i++) unlink(file_path[i]);
    rmdir(file_path[3]);
    rmdir(file_dir);
}

static int files_make(void) {
    static const char *const names[NUM_FILES - 1] = {"text.txt", "link.txt", "hard.txt", "folder", "new.txt"};
    if (file_dir[0]) return 0;
    snprintf(file_dir, sizeof file_dir, "/tmp/kvdemo-fuzz-files-%ld", (long)getpid());
    for (int i = 0; i < NUM_FILES - 1; i++) snprintf(file_path[i], sizeof file_path[i], "%s/%s", file_dir, names[i]);
    snprintf(file_path[5], sizeof file_path[5], "/dev/null");
    FILE *f = mkdir(file_dir, 0700) == 0 ? fopen(file_path[0], "w") : NULL;
    if (!f) return -1;
    fputs(TEXT, f);
    fclose(f);
    atexit(files_remove);
    if (symlink("text.txt", file_path[1]) || link(file_path[0], file_path[2]) || mkdir(file_path[3], 0700)) return -1;
    return 0;
}

// Which of the files path is (0 to 5), or -1; and which file it leads to:
// the three names of the text are one.
static int file_index(const char *path) {
    for (int i = 0; path && i < NUM_FILES; i++)
        if (!strcmp(path, file_path[i])) return i;
    return -1;
}

static int file_class(int index) { return index >= 0 && index <= 2 ? 0 : index; }

// A broken promise of the guards: stop as a crash would, so that the
// fuzzer keeps the input.
static void broken(const char *what, const char *path) {
    fprintf(stderr, "fuzz options_files: %s: %s\n", what, path ? path : "");
    abort();
}

// The folder holds its four entries again, and the text is whole.
static void expect_files_intact(const char *after) {
    DIR *d = opendir(file_dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    struct stat st;
    if (n != FILES_HELD || stat(file_path[0], &st) || st.st_size != (off_t)strlen(TEXT)) broken("files left or changed", after);
}

// Outputs are opened and given up, inputs opened: each as the rules say.
static void probe_files(const FileRole *out, int n_out, const FileRole *in, int n_in) {
    char err[512];
    for (int i = 0; i < n_out; i++) {
        int k = file_index(out[i].path);
        if (k < 0) continue;
        AtomicFile a;
        int rc = fileio_open(&a, out[i].path, ERR(LANG_EN, err));
        if (rc == 0) fileio_abort(&a);
        if ((rc == 0) != (k == 0 || k == 2 || k == 4)) broken(rc ? "a file refused as an output" : "written", out[i].path);
        expect_files_intact(out[i].path);
    }
    for (int i = 0; i < n_in; i++) {
        int k = file_index(in[i].path);
        uint64_t size = 0;
        FILE *f = k < 0 ? NULL : fileio_open_read(in[i].path, &size, ERR(LANG_EN, err));
        if (f) fclose(f);
        if (k >= 0 && k != 1 && (f != NULL) != (k == 0 || k == 2)) broken(f ? "read" : "a file refused as an input", in[i].path);
    }
}

// 1 when some two roles name one of the files, 0 when each names another
// file, -1 when some name is none of them (the guard may go either way).
static int roles_clash(const FileRole *out, int n_out, const FileRole *in, int n_in) {
    const FileRole *all[10];
    int n = 0, unknown = 0;
    for (int i = 0; i < n_out; i++) all[n++] = &out[i];
    for (int i = 0; i < n_in; i++) all[n++] = &in[i];
    for (int i = 0; i < n; i++) {
        if (!all[i]->path) continue;
        int ci = file_class(file_index(all[i]->path));
        unknown |= ci < 0;
        for (int j = i + 1; j < n && ci >= 0; j++)
            if (all[j]->path && (i < n_out || j < n_out) && ci == file_class(file_index(all[j]->path))) return 1;
    }
    return unknown ? -1 : 0;
}

// The first byte picks a command that reads or writes files, the rest, cut
// at NUL bytes, are its arguments; an argument "@N" is the Nth file above.
// What parses is checked as the commands check it before their work: no
// output may be an input or another output, an output is written only
// where it may be (never through a link, into a folder or a device, and
// giving up leaves nothing behind), an input must be a regular file.
int fuzz_options_files(const uint8_t *data, size_t size) {
    static const char *const commands[] = {"lesson", "generate", "bench", "train", "eval"};
    if (size < 1 || files_make() != 0) return 1;
    char *copy = malloc(size), *argv[MAX_ARGS + 2];
    if (!copy) return 1;
    int argc = split_args(argv, copy, data + 1, size - 1, commands[data[0] % 5]);
    for (int i = 2; i < argc; i++)
        if (argv[i][0] == '@' && argv[i][1] >= '0' && argv[i][1] <= '9' && !argv[i][2])
            argv[i] = file_path[(argv[i][1] - '0') % NUM_FILES];
    Options opt;
    Trace tr;
    int rc = cli_parse_options(&opt, &tr, argc, argv, argv[1]);
    if (rc == 0) {
        char ckpt[4096];
        snprintf(ckpt, sizeof ckpt, "%s.ckpt", opt.out_path ? opt.out_path : "");
        FileRole out[5] = {{"--out", opt.out_path}, {"--out's checkpoint", opt.out_path ? ckpt : NULL},
                           {"--log", opt.log_path}, {"--csv", opt.csv_path}, {"--svg", opt.svg_path}};
        FileRole in[5] = {{"--data", opt.data_path}, {"--model", opt.model_path}, {"--tokenizer", opt.tokenizer_path},
                          {"--resume", opt.resume_path}, {"--draft", opt.draft_path}};
        rc = fileguard_check(LANG_EN, out, 5, in, 5);
        // (the checkpoint's name, the text's name and ".ckpt", is no other)
        const FileRole others[4] = {out[0], out[2], out[3], out[4]};
        int clash = roles_clash(others, 4, in, 5);
        if (clash >= 0 && (rc != 0) != clash) broken(rc ? "refused, no clash" : "a clash accepted", argv[1]);
        if (rc == 0) probe_files(out, 5, in, 5);
    }
    free(copy);
    return rc != 0;
}

const FuzzTarget FUZZ_TARGETS[] = {
    {"gpt_model", fuzz_gpt_model},
    {"llama_model", fuzz_llama_model},
    {"checkpoint", fuzz_checkpoint},
    {"toydata", fuzz_toydata},
    {"text", fuzz_text},
    {"options", fuzz_options},
    {"gpt_model_summed", fuzz_gpt_model_summed},
    {"llama_model_summed", fuzz_llama_model_summed},
    {"checkpoint_summed", fuzz_checkpoint_summed},
    {"toy_lessons", fuzz_toy_lessons},
    {"memory", fuzz_memory},
    {"prompt", fuzz_prompt},
    {"llama2c_model", fuzz_llama2c_model},
    {"bpe", fuzz_bpe},
    {"options_files", fuzz_options_files},
};
const int NUM_FUZZ_TARGETS = (int)(sizeof FUZZ_TARGETS / sizeof FUZZ_TARGETS[0]);
