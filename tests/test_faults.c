// test_faults — I/O faults injected the way SQLite's tests inject them: a
// write that fails as on a full disk (KVDEMO_TEST_FAIL_WRITE, src/util/fileio.c),
// a file that cannot be read, a text too short. Each checks the message,
// the exit status, and that no file is left half written.
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static char dir[256];

static int setup(void **state) {
    (void)state;
    return tmpdir_make(dir, sizeof dir, "faults");
}

static int teardown(void **state) {
    (void)state;
    return tmpdir_remove(dir);
}

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

// A text of 13,200 characters and 17 distinct ones.
static void write_text(const char *path, int lines) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < lines; i++) fputs("the cat sees the moon. a dog likes the sea.\n", f);
    fclose(f);
}

static void write_file(const char *path, const char *s) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(s, f);
    fclose(f);
}

// Fails unless the file at path holds exactly want.
static void expect_file(const char *path, const char *want) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: expected it to hold \"%s\", got no file", path, want);
    char got[256] = {0};
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    got[n] = '\0';
    if (strcmp(got, want) != 0) fail_msg("%s: expected \"%s\", got \"%s\"", path, want, got);
}


static void expect_last_line(const RunResult *r, int status, const char *needle, const char *what) {
    char line[1024];
    if (r->status != status) fail_msg("%s: expected exit %d, got %d (stderr: %s)", what, status, r->status, r->err);
    if (!strstr(test_last_line(r->err, line, sizeof line), needle))
        fail_msg("%s: expected the last line of stderr to contain \"%s\", got \"%s\"", what, needle, line);
}

#define RECIPE "--preset tiny --context 16 --embedding 16 --heads 2 --blocks 1 --batch 4 --iters 2 --threads 1"

// ---------------------------------------------------------------------------
// src/util/fileio.c: a commit on a full disk

// train's model write fails as on a full disk: exit 1, the reason named in
// English and Chinese, the model it would have replaced untouched, and no
// temporary or lock file left beside it.
static void test_full_disk_keeps_old_model(void **state) {
    (void)state;
    char text[300], out[300], args[1024];
    path_in(text, sizeof text, "text.txt");
    path_in(out, sizeof out, "model.bin");
    write_text(text, 300);
    write_file(out, "the user's old model\n");
    snprintf(args, sizeof args, "train " RECIPE " --data %s --out %s", text, out);
    RunResult r = kvdemo_run_env("KVDEMO_TEST_FAIL_WRITE=1", args);
    char want[400];
    snprintf(want, sizeof want, "%s: cannot write: No space left on device", out);
    expect_last_line(&r, 1, want, "train on a full disk");
    run_free(&r);
    expect_file(out, "the user's old model\n");
    if (write_leftovers(out) != 0) fail_msg("%s: %d temporary or lock files left", out, write_leftovers(out));

    snprintf(args, sizeof args, "train " RECIPE " --data %s --out %s --lang zh", text, out);
    r = kvdemo_run_env("KVDEMO_TEST_FAIL_WRITE=1", args);
    snprintf(want, sizeof want, "%s：无法写入：磁盘已满", out);
    expect_last_line(&r, 1, want, "train on a full disk, in Chinese");
    run_free(&r);
    expect_file(out, "the user's old model\n");
    if (write_leftovers(out) != 0) fail_msg("%s: %d temporary or lock files left", out, write_leftovers(out));

    // without the fault the same run replaces it (the hook is what failed)
    snprintf(args, sizeof args, "train " RECIPE " --data %s --out %s", text, out);
    r = kvdemo_run(args);
    if (r.status != 0) fail_msg("train without the fault: expected exit 0, got %d (%s)", r.status, r.err);
    run_free(&r);
    if (write_leftovers(out) != 0) fail_msg("%s: %d temporary or lock files left", out, write_leftovers(out));
}

// Only the log fails (the second commit: the model is written first): the
// message says the model was written, and the log is not left half done.
static void test_full_disk_log_says_the_model_is_safe(void **state) {
    (void)state;
    char text[300], out[300], log[300], args[1200];
    path_in(text, sizeof text, "text.txt");
    path_in(out, sizeof out, "logged.bin");
    path_in(log, sizeof log, "logged.csv");
    write_text(text, 300);
    snprintf(args, sizeof args, "train " RECIPE " --data %s --out %s --log %s", text, out, log);
    RunResult r = kvdemo_run_env("KVDEMO_TEST_FAIL_WRITE=2", args);
    char want[700];
    snprintf(want, sizeof want, "cannot write the log: %s: cannot write: No space left on device (the model was written to %s)",
             log, out);
    expect_last_line(&r, 1, want, "train whose --log fails");
    run_free(&r);
    if (access(out, R_OK) != 0) fail_msg("%s: the model is missing though the message says it was written", out);
    if (access(log, F_OK) == 0) fail_msg("%s: a log was left though its write failed", log);
    if (write_leftovers(log) != 0) fail_msg("%s: %d temporary or lock files left", log, write_leftovers(log));
}

// ---------------------------------------------------------------------------
// src/util/fileio.c: a temporary file that cannot be made, an output that is a
// socket

// A name of 250 bytes: NAME.lock (255) can be made, NAME.tmp.XXXXXX (261)
// cannot (a name is at most 255 bytes): the lock is taken, the temporary
// file refused, and the lock given back.
static void test_temporary_name_too_long(void **state) {
    (void)state;
    char out[600], args[800], want[1300];
    int at = snprintf(out, sizeof out, "%s/", dir);
    memset(out + at, 'm', 250);
    out[at + 250] = '\0';
    snprintf(args, sizeof args, "init --preset tiny --out %s", out);
    RunResult r = kvdemo_run(args);
    snprintf(want, sizeof want, "%s: cannot create its temporary file: File name too long (mmm", out);
    expect_last_line(&r, 1, want, "init whose temporary name is too long");
    run_free(&r);
    snprintf(args, sizeof args, "init --preset tiny --out %s --lang zh", out);
    r = kvdemo_run(args);
    expect_last_line(&r, 1, "：文件名太长", "init whose temporary name is too long, in Chinese");
    run_free(&r);
    if (access(out, F_OK) == 0 || write_leftovers(out) != 0) fail_msg("%s: written or its lock left", out);
}

static void test_output_is_a_socket(void **state) {
    (void)state;
    char out[300], args[600], want[400];
    path_in(out, sizeof out, "sock");
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(out) >= sizeof addr.sun_path) skip();   // a socket's path is at most 107 bytes
    memcpy(addr.sun_path, out, strlen(out) + 1);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) fail_msg("%s: cannot make a socket there", out);
    snprintf(args, sizeof args, "init --preset tiny --out %s", out);
    RunResult r = kvdemo_run(args);
    snprintf(want, sizeof want, "%s: exists and is a socket; kvdemo writes only a new file or over a regular file", out);
    expect_last_line(&r, 1, want, "init over a socket");
    run_free(&r);
    close(fd);
    unlink(out);
}

// ---------------------------------------------------------------------------
// src/model/corpus.c, src/model/train_eval.c, src/cmd/kvcmd.c: texts that cannot be read or
// measured. Tests run as root, so permissions cannot make a file
// unreadable; /proc/self/mem is a regular file whose read at 0 fails (EIO).

static void test_texts_unreadable_or_too_short(void **state) {
    (void)state;
    char text[300], out[300], args[1200], want[600];
    path_in(text, sizeof text, "short.txt");
    path_in(out, sizeof out, "never.bin");
    write_file(text, "abab abab ab\n");   // characters of gpt_a's vocabulary, too few for T = 8
    RunResult r = kvdemo_run("train --data /proc/self/mem --out /proc/self/never.bin");
    expect_last_line(&r, 1, "error reading /proc/self/mem: Input/output error", "train on an unreadable text");
    run_free(&r);
    snprintf(args, sizeof args, "train --data /proc/self/mem --out %s", out);
    r = kvdemo_run(args);
    expect_last_line(&r, 1, "error reading /proc/self/mem", "train on an unreadable text");
    run_free(&r);
    if (access(out, F_OK) == 0 || write_leftovers(out) != 0) fail_msg("%s: written though the text could not be read", out);
    snprintf(args, sizeof args, "eval --model tests/fixtures/gpt_a.kvgp --data %s", text);
    r = kvdemo_run(args);
    snprintf(want, sizeof want, "%s is too short: each split needs more than 16 characters", text);
    expect_last_line(&r, 1, want, "eval on a text shorter than two windows");
    run_free(&r);
    snprintf(args, sizeof args, "eval --model tests/fixtures/gpt_a.kvgp --kv-dtype int8 --data %s", text);
    r = kvdemo_run(args);
    snprintf(want, sizeof want, "%s is too short: its last 10%% needs more than 16 characters", text);
    expect_last_line(&r, 1, want, "eval --kv-dtype on a text shorter than a window");
    run_free(&r);
    r = kvdemo_run("eval --model tests/fixtures/gpt_a.kvgp --kv-dtype int8 --data /proc/self/mem");
    expect_last_line(&r, 1, "error reading /proc/self/mem", "eval --kv-dtype on an unreadable text");
    run_free(&r);
}

// A device is refused before anything is read from it (train read 256 MiB
// of /dev/zero before it refused the size): at once, in one line.
static void test_device_text_refused_at_once(void **state) {
    (void)state;
    char args[600];
    static const char *const readers[] = {"train --data /dev/zero --out %s/z.bin", "eval --data /dev/zero",
                                          "lesson 2 --data /dev/zero", "memory --model /dev/zero --tokens 9"};
    for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++) {
        snprintf(args, sizeof args, readers[i], dir);
        RunResult r = kvdemo_run(args);
        expect_last_line(&r, 1, "/dev/zero: is a device, not a regular file; give the path of a file", args);
        if (count_lines(r.err) != 1) fail_msg("kvdemo %s: expected one line on stderr, got: %s", args, r.err);
        run_free(&r);
    }
}

// eval --kv-dtype without --data takes the shipped tinyshakespeare; without
// it (make data not run), one line says what to give.
static void test_eval_without_a_text(void **state) {
    (void)state;
    if (access("data/tinyshakespeare.txt", F_OK) == 0) skip();   // downloaded here: nothing is missing
    RunResult r = kvdemo_run("eval --model tests/fixtures/gpt_a.kvgp --kv-dtype int8");
    expect_last_line(&r, 1, "no text to evaluate on: give --data FILE, or get tinyshakespeare into this folder",
                     "eval --kv-dtype without a text");
    if (count_lines(r.err) != 1) fail_msg("eval --kv-dtype without a text: expected one line, got: %s", r.err);
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_disk_keeps_old_model),
        cmocka_unit_test(test_full_disk_log_says_the_model_is_safe),
        cmocka_unit_test(test_temporary_name_too_long),
        cmocka_unit_test(test_output_is_a_socket),
        cmocka_unit_test(test_texts_unreadable_or_too_short),
        cmocka_unit_test(test_device_text_refused_at_once),
        cmocka_unit_test(test_eval_without_a_text),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
