// test_iofault — every output and input of kvdemo under the I/O faults of
// src/util/iofault.c (KVDEMO_TEST_FAULT), the way SQLite's tests walk a
// fault through each of its writes: a write that fails with EIO, a full
// disk (ENOSPC), a read that comes back short. A command is run once for
// each N, from the first write until one run has no write left to fail;
// each failed run must end in one line naming the file and the reason,
// exit 1, and leave neither a half-written file nor a temporary or a lock.
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static int setup(void **state) {
    (void)state;
    return tmpdir_make(dir, sizeof dir, "iofault");
}

static int teardown(void **state) {
    (void)state;
    return tmpdir_remove(dir);
}


static void write_text(const char *path, int lines) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < lines; i++) fputs("the cat sees the moon. a dog likes the sea.\n", f);
    fclose(f);
}

// The faults that make a write fail, and the reason each must be named by.
static const struct {
    const char *kind, *reason;
} WRITE_FAULTS[] = {{"write", "Input/output error"}, {"nospace", "No space left on device"}};
enum { EIO_FAULT = 1, FULL_DISK = 2 };   // the two, as bits

// Removes the outputs of one run (and fails if one left a temporary or lock).
static void expect_no_leftovers(const char *const *outputs, int n, const char *what) {
    for (int i = 0; i < n; i++) {
        int left = write_leftovers(outputs[i]);
        if (left != 0) fail_msg("%s: %s: %d temporary or lock files left", what, outputs[i], left);
    }
}

// 1 when line names one of outputs followed by ": cannot write: " and reason.
static int names_an_output(const char *line, const char *const *outputs, int n, const char *reason, int *which) {
    for (int i = 0; i < n; i++) {
        char want[600];
        snprintf(want, sizeof want, "%s: cannot write: %s", outputs[i], reason);
        if (strstr(line, want)) {
            *which = i;
            return 1;
        }
    }
    return 0;
}

// Runs args under each write fault of kinds (bit k: WRITE_FAULTS[k]) at each N
// from 1 until a run succeeds; outputs are the files it writes. Each failed
// run: exit 1, its last line "FILE: cannot write: REASON" for one of the
// outputs, that output absent (each run starts without them), nothing left
// beside any of them. Returns how many runs failed, for the caller to check
// that the faults were reached.
static int walk_write_faults(const char *args, const char *const *outputs, int n, int kinds) {
    int failed = 0;
    for (size_t k = 0; k < sizeof WRITE_FAULTS / sizeof WRITE_FAULTS[0]; k++) {
        if (!(kinds & 1 << k)) continue;
        for (int at = 1;; at++) {
            if (at > 200) fail_msg("kvdemo %s: still failing at %s:%d", args, WRITE_FAULTS[k].kind, at);
            for (int i = 0; i < n; i++) unlink(outputs[i]);
            char env[64], line[1024], what[1400];
            snprintf(env, sizeof env, "KVDEMO_TEST_FAULT=%s:%d", WRITE_FAULTS[k].kind, at);
            snprintf(what, sizeof what, "%s kvdemo %s", env, args);
            RunResult r = kvdemo_run_env(env, args);
            if (r.status == 0) {
                run_free(&r);
                expect_no_leftovers(outputs, n, what);
                break;
            }
            failed++;
            test_last_line(r.err, line, sizeof line);
            int which = -1;
            if (r.status != 1 || !names_an_output(line, outputs, n, WRITE_FAULTS[k].reason, &which))
                fail_msg("%s: expected exit 1 and a last line \"FILE: cannot write: %s\", got exit %d and \"%s\"", what,
                         WRITE_FAULTS[k].reason, r.status, line);
            run_free(&r);
            if (access(outputs[which], F_OK) == 0) fail_msg("%s: %s exists though its write failed", what, outputs[which]);
            expect_no_leftovers(outputs, n, what);
        }
    }
    return failed;
}

#define RECIPE "--preset tiny --context 16 --embedding 16 --heads 2 --blocks 1 --batch 4 --iters 2 --threads 1"

// init's model: every write of it.
static void test_model_write_faults(void **state) {
    (void)state;
    char out[300], args[600];
    snprintf(out, sizeof out, "%s/init.bin", dir);
    snprintf(args, sizeof args, "init --preset tiny --out %s", out);
    const char *outputs[] = {out};
    int failed = walk_write_faults(args, outputs, 1, EIO_FAULT | FULL_DISK);
    if (failed < 2) fail_msg("init: expected the faults to fail at least 2 runs, got %d", failed);
    // the reason in Chinese (the walk's last run wrote the model: gone again)
    unlink(out);
    snprintf(args, sizeof args, "init --preset tiny --out %s --lang zh", out);
    RunResult r = kvdemo_run_env("KVDEMO_TEST_FAULT=write:1", args);
    char want[400], line[1024];
    snprintf(want, sizeof want, "%s：无法写入：输入输出错误", out);
    if (r.status != 1 || !strstr(test_last_line(r.err, line, sizeof line), want))
        fail_msg("init --lang zh, write:1: expected exit 1 and \"%s\", got exit %d and \"%s\"", want, r.status, line);
    run_free(&r);
    if (access(out, F_OK) == 0 || write_leftovers(out) != 0) fail_msg("%s: written, or a temporary left", out);
}

// train's model, its checkpoint and its log, each write of each (a full
// disk; the model's EIO is init's).
static void test_train_write_faults(void **state) {
    (void)state;
    char text[300], out[300], ckpt[320], log[300], args[1200];
    snprintf(text, sizeof text, "%s/text.txt", dir);
    snprintf(out, sizeof out, "%s/m.bin", dir);
    snprintf(ckpt, sizeof ckpt, "%s/m.bin.ckpt", dir);
    snprintf(log, sizeof log, "%s/m.csv", dir);
    write_text(text, 300);
    snprintf(args, sizeof args, "train " RECIPE " --eval-every 1 --data %s --out %s --log %s", text, out, log);
    const char *outputs[] = {out, ckpt, log};
    int failed = walk_write_faults(args, outputs, 3, FULL_DISK);
    if (failed < 3) fail_msg("train: expected the faults to fail at least 3 runs, got %d", failed);
}

// train --arch llama's model and checkpoint (llama_save's own writes).
static void test_llama_train_write_faults(void **state) {
    (void)state;
    char text[300], out[300], ckpt[320], args[1200];
    snprintf(text, sizeof text, "%s/ltext.txt", dir);
    snprintf(out, sizeof out, "%s/l.bin", dir);
    snprintf(ckpt, sizeof ckpt, "%s/l.bin.ckpt", dir);
    write_text(text, 40);
    snprintf(args, sizeof args, "train --arch llama " RECIPE " --eval-every 1 --data %s --out %s", text, out);
    const char *outputs[] = {out, ckpt};
    int failed = walk_write_faults(args, outputs, 2, FULL_DISK);
    if (failed < 2) fail_msg("train --arch llama: expected the faults to fail at least 2 runs, got %d", failed);
}

// bench's CSV and SVG (EIO; a full disk is train's).
static void test_bench_write_faults(void **state) {
    (void)state;
    char csv[300], svg[300], args[900];
    snprintf(csv, sizeof csv, "%s/b.csv", dir);
    snprintf(svg, sizeof svg, "%s/b.svg", dir);
    snprintf(args, sizeof args, "bench --init random --preset tiny --steps 4 --repeat 1 --csv %s --svg %s", csv, svg);
    const char *outputs[] = {csv, svg};
    int failed = walk_write_faults(args, outputs, 2, EIO_FAULT);
    if (failed < 2) fail_msg("bench: expected the faults to fail at least 2 runs, got %d", failed);
}

// ---------------------------------------------------------------------------
// Reads cut short: each loader says that its file ends early, naming it

// Runs args under KVDEMO_TEST_FAULT=read-short:N for each N from 1 until a
// run has no read left to cut; paths are the files it reads. Each cut run:
// exit 1 and one line on stderr, naming one of the paths as ending early
// (or truncated). Fails unless each path was named by some run.
static void walk_short_reads(const char *args, const char *const *paths, int n) {
    int named[8] = {0};
    assert_true(n <= 8);
    RunResult base = kvdemo_run(args);   // without the fault
    if (base.status != 0) fail_msg("kvdemo %s: expected exit 0 without a fault, got %d: %s", args, base.status, base.err);
    run_free(&base);
    for (int at = 1;; at++) {
        if (at > 200) fail_msg("kvdemo %s: still failing at read-short:%d", args, at);
        char env[64], line[1024];
        snprintf(env, sizeof env, "KVDEMO_TEST_FAULT=read-short:%d", at);
        RunResult r = kvdemo_run_env(env, args);
        if (r.status == 0) {
            if (strstr(r.err, "ends early") || strstr(r.err, "truncated"))
                fail_msg("%s kvdemo %s: exit 0 after saying: %s", env, args, r.err);
            run_free(&r);
            break;
        }
        test_last_line(r.err, line, sizeof line);
        int which = -1;
        for (int i = 0; i < n && which < 0; i++)
            if (strstr(line, paths[i])) which = i;
        if (r.status != 1 || count_lines(r.err) != 1 || which < 0 ||
            !(strstr(line, "the file ends early") || strstr(line, "truncated")))
            fail_msg("%s kvdemo %s: expected exit 1 and one line naming a file that ends early, got exit %d and: %s",
                     env, args, r.status, r.err);
        named[which] = 1;
        run_free(&r);
    }
    for (int i = 0; i < n; i++)
        if (!named[i]) fail_msg("kvdemo %s: no short read of %s was reported", args, paths[i]);
}

#define GPT_A "tests/fixtures/gpt_a.kvgp"
#define LLAMA "tests/fixtures/llama_gqa.bin"
#define L2C "tests/fixtures/llama2c_gqa.bin"
#define TOK "tests/fixtures/llama2c_tok.bin"
#define TOY "data/tianqi.txt"

// The model files (char GPT, LLaMA, llama2.c and its tokenizer), a text,
// the toy data of the 4-dim lessons.
static void test_short_reads(void **state) {
    (void)state;
    char text[300], args[600];
    snprintf(text, sizeof text, "%s/ab.txt", dir);   // characters of gpt_a's vocabulary
    FILE *f = fopen(text, "w");
    assert_non_null(f);
    for (int i = 0; i < 60; i++) fputs("abab abba baab\n", f);
    fclose(f);
    const char *gpt[] = {GPT_A}, *llama[] = {LLAMA}, *l2c[] = {L2C, TOK}, *eval[] = {GPT_A, text}, *toy[] = {TOY};
    walk_short_reads("generate --model " GPT_A " --steps 1", gpt, 1);
    walk_short_reads("generate --model " LLAMA " --prompt ab --steps 1", llama, 1);
    walk_short_reads("generate --model " L2C " --tokenizer " TOK " --steps 1", l2c, 2);
    snprintf(args, sizeof args, "eval --model " GPT_A " --data %s", text);
    walk_short_reads(args, eval, 2);
    walk_short_reads("lesson 2 --data " TOY, toy, 1);
}

// A checkpoint cut short is not resumed from, nor its text.
static void test_short_checkpoint(void **state) {
    (void)state;
    char text[300], out[300], ckpt[320], args[1200];
    snprintf(text, sizeof text, "%s/ck.txt", dir);
    snprintf(out, sizeof out, "%s/ck.bin", dir);
    snprintf(ckpt, sizeof ckpt, "%s/ck.bin.ckpt", dir);
    write_text(text, 300);
    snprintf(args, sizeof args, "train " RECIPE " --eval-every 1 --data %s --out %s", text, out);
    RunResult r = kvdemo_run(args);
    if (r.status != 0 || access(ckpt, R_OK) != 0) fail_msg("kvdemo %s: exit %d, no %s: %s", args, r.status, ckpt, r.err);
    run_free(&r);
    snprintf(args, sizeof args, "train " RECIPE " --eval-every 1 --data %s --out %s.2 --resume %s", text, out, ckpt);
    const char *paths[] = {ckpt, text};
    walk_short_reads(args, paths, 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_write_faults),
        cmocka_unit_test(test_train_write_faults),
        cmocka_unit_test(test_llama_train_write_faults),
        cmocka_unit_test(test_bench_write_faults),
        cmocka_unit_test(test_short_reads),
        cmocka_unit_test(test_short_checkpoint),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
