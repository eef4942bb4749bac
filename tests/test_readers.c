// test_readers — the readers that go through fileio's reader
// (fileio_read_text): what it gives and refuses, and its messages where
// kvdemo reads a lesson page's class questions (--format html), lesson 14's
// validation text, lesson 6.2's slice of it and generate's LLaMA-file
// probe — a FIFO or a folder refused at once and named, a page cut short
// said and the page made without it.
#include "testutil.h"

#include "fileio.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static int setup(void **state) {
    (void)state;
    return tmpdir_make(dir, sizeof dir, "readers");
}

static int teardown(void **state) {
    (void)state;
    return tmpdir_remove(dir);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

// fileio_read_text on path: fails unless it refuses it with an err holding needle.
static void expect_refused(Lang lang, const char *path, size_t max, const char *needle) {
    char err[600] = "";
    size_t len = 12345;
    char *t = fileio_read_text(path, max, 0, &len, ERR(lang, err));
    if (t || !strstr(err, needle) || !strstr(err, path))
        fail_msg("%s: expected NULL and \"%s: ...%s...\", got %s and \"%s\"", path, path, needle, t ? "text" : "NULL", err);
    if (len != 12345) fail_msg("%s: *len changed to %zu on a refusal", path, len);
}

// The whole file, its first bytes, and what is refused.
static void test_read_text(void **state) {
    (void)state;
    char path[300], sub[300], fifo[300];
    snprintf(path, sizeof path, "%s/t.txt", dir);
    write_file(path, "one\ntwo\n");
    char err[600];
    size_t len = 0;
    char *t = fileio_read_text(path, 8, 0, &len, ERR(LANG_EN, err));
    if (!t || len != 8 || strcmp(t, "one\ntwo\n") != 0) fail_msg("whole: expected 8 bytes \"one\\ntwo\\n\", got %zu", len);
    free(t);
    t = fileio_read_text(path, 5, 1, &len, ERR(LANG_EN, err));   // the first 5 bytes
    if (!t || len != 5 || strcmp(t, "one\nt") != 0) fail_msg("prefix 5: expected \"one\\nt\", got %zu bytes", len);
    free(t);
    t = fileio_read_text(path, 100, 1, &len, ERR(LANG_EN, err));   // a prefix longer than the file: all of it
    if (!t || len != 8 || strcmp(t, "one\ntwo\n") != 0) fail_msg("prefix 100: expected the 8 bytes, got %zu", len);
    free(t);
    expect_refused(LANG_EN, path, 7, "8 bytes; at most 7 were expected");
    snprintf(sub, sizeof sub, "%s/missing.txt", dir);
    expect_refused(LANG_EN, sub, 100, "cannot open: No such file or directory");
    snprintf(sub, sizeof sub, "%s/folder", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    expect_refused(LANG_EN, sub, 100, "is a folder, not a regular file");
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);   // no writer: it would block an open that waits
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_refused(LANG_EN, fifo, 100, "is a FIFO, not a regular file");
    expect_refused(LANG_ZH, fifo, 100, "是命名管道（FIFO），不是普通文件");
}

// path made absolute (from the current folder), into out.
static const char *absolute(char *out, size_t size, const char *path) {
    char here[PATH_MAX];
    int n = path[0] == '/' ? snprintf(out, size, "%s", path)
            : getcwd(here, sizeof here) ? snprintf(out, size, "%s/%s", here, path) : -1;
    if (n < 0 || (size_t)n >= size) fail_msg("%s: cannot make it an absolute path", path);
    return out;
}

// "cd DIR && kvdemo ARGS", with the environment of kvdemo_run_env.
static RunResult run_in(const char *where, const char *env, const char *args) {
    const char *bin = getenv("KVDEMO_BIN");
    char abs[PATH_MAX], cmd[3 * PATH_MAX];
    absolute(abs, sizeof abs, bin && *bin ? bin : "./kvdemo");
    snprintf(cmd, sizeof cmd, "cd %s && env -u LC_ALL -u LC_MESSAGES -u LANG -u NO_COLOR %s %s %s </dev/null", where,
             env ? env : "", abs, args);
    return shell_run(cmd);
}

// Lesson 1's page from a folder whose docs/lesson-1.md is what make_page
// made: exit 0, and either the questions slide and nothing on stderr (want
// NULL) or no slide and one line on stderr holding want.
static void expect_page(const char *where, const char *want, const char *what) {
    RunResult r = run_in(where, NULL, "lesson 1 --format html");
    int slide = strstr(r.out, "<ol class=\"questions\">") != NULL;
    if (r.status != 0) fail_msg("%s: expected exit 0, got %d: %s", what, r.status, r.err);
    if (!want && (slide != 1 || r.err[0]))
        fail_msg("%s: expected the questions slide and no message, got slide %d and \"%s\"", what, slide, r.err);
    if (want && (slide || count_lines(r.err) != 1 || !strstr(r.err, want) ||
                 !strstr(r.err, "the page goes on without its class questions")))
        fail_msg("%s: expected no slide and one line \"...%s...\", got slide %d and \"%s\"", what, want, slide, r.err);
    run_free(&r);
}

// The class questions' page: a copy is read, a FIFO or a folder is said.
static void test_questions_page(void **state) {
    (void)state;
    char docs[300], page[320];
    snprintf(docs, sizeof docs, "%s/q", dir);
    assert_int_equal(mkdir(docs, 0700), 0);
    snprintf(page, sizeof page, "%s/docs", docs);
    assert_int_equal(mkdir(page, 0700), 0);
    snprintf(page, sizeof page, "%s/docs/lesson-1.md", docs);
    char *text = file_slurp("docs/lesson-1.md");
    write_file(page, text);
    free(text);
    // lesson 1's numbers beside it: a build's own binary (build-asan/kvdemo)
    // finds no data/ next to itself
    char data[340];
    snprintf(data, sizeof data, "%s/data", docs);
    assert_int_equal(mkdir(data, 0700), 0);
    snprintf(data, sizeof data, "%s/data/tianqi.txt", docs);
    text = file_slurp("data/tianqi.txt");
    write_file(data, text);
    free(text);
    expect_page(docs, NULL, "a copy of docs/lesson-1.md");
    unlink(page);
    assert_int_equal(mkfifo(page, 0600), 0);
    expect_page(docs, "docs/lesson-1.md: is a FIFO, not a regular file", "docs/lesson-1.md a FIFO");
    unlink(page);
    assert_int_equal(mkdir(page, 0700), 0);
    expect_page(docs, "docs/lesson-1.md: is a folder, not a regular file", "docs/lesson-1.md a folder");
    rmdir(page);
}

// The page cut short (KVDEMO_TEST_FAULT=read-short:N, each N until a run
// has nothing left to cut): some run says so and exits 0, and none makes
// the slide of a page it says was cut.
static void test_questions_page_short(void **state) {
    (void)state;
    int said = 0;
    for (int at = 1;; at++) {
        if (at > 50) fail_msg("lesson 1 --format html: still cut at read-short:%d", at);
        char env[64];
        snprintf(env, sizeof env, "KVDEMO_TEST_FAULT=read-short:%d", at);
        RunResult r = kvdemo_run_env(env, "lesson 1 --format html");
        int cut = strstr(r.err, "docs/lesson-1.md: cannot read: the file ends early") != NULL;
        int slide = strstr(r.out, "<ol class=\"questions\">") != NULL;
        if (cut && slide) fail_msg("%s: the page was cut short, yet its questions slide was made", env);
        said |= cut && r.status == 0;   // (a cut before it, in the lesson's data, fails the lesson)
        int done = r.status == 0 && !r.err[0];
        run_free(&r);
        if (done) break;
    }
    if (!said) fail_msg("lesson 1 --format html: no run said that docs/lesson-1.md ends early");
}

// Lesson 14's validation text, found in the current folder first: a FIFO
// or a folder there is refused at once, exit 1, one line naming it.
static void test_lesson14_text(void **state) {
    (void)state;
    char where[300], text[340], model[PATH_MAX], args[PATH_MAX + 40];
    snprintf(where, sizeof where, "%s/l14", dir);
    snprintf(text, sizeof text, "%s/data", where);
    assert_int_equal(mkdir(where, 0700), 0);
    assert_int_equal(mkdir(text, 0700), 0);
    snprintf(text, sizeof text, "%s/data/tinyshakespeare-val-2049.txt", where);
    absolute(model, sizeof model, "data/tinyshakespeare-llama-mha.bin");
    snprintf(args, sizeof args, "lesson 14 --model %s", model);
    const struct {
        int fifo;
        const char *says;
    } cases[] = {{1, "data/tinyshakespeare-val-2049.txt: is a FIFO, not a regular file"},
                 {0, "data/tinyshakespeare-val-2049.txt: is a folder, not a regular file"}};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(cases[i].fifo ? mkfifo(text, 0600) : mkdir(text, 0700), 0);
        RunResult r = run_in(where, NULL, args);
        if (r.status != 1 || count_lines(r.err) != 1 || !strstr(r.err, cases[i].says) || r.out[0])
            fail_msg("lesson 14, %s: expected exit 1, no output and one line \"%s\", got exit %d and \"%s\"",
                     cases[i].fifo ? "a FIFO" : "a folder", cases[i].says, r.status, r.err);
        run_free(&r);
        assert_int_equal(cases[i].fifo ? unlink(text) : rmdir(text), 0);
    }
}

// Lesson 6.2's slice of the validation text, found in the current folder
// first, goes through the reader: a FIFO, a folder, a file longer than the
// slice or a read cut short is named with its reason, and the part that
// needs it is left out (exit 0: the lesson's other parts stand).
static void test_lesson62_slice(void **state) {
    (void)state;
    char where[300], text[340];
    snprintf(where, sizeof where, "%s/l62", dir);
    snprintf(text, sizeof text, "%s/data", where);
    assert_int_equal(mkdir(where, 0700), 0);
    assert_int_equal(mkdir(text, 0700), 0);
    snprintf(text, sizeof text, "%s/data/tinyshakespeare-val-2049.txt", where);
    static const char *const SAYS[] = {
        "data/tinyshakespeare-val-2049.txt: is a FIFO, not a regular file",
        "data/tinyshakespeare-val-2049.txt: is a folder, not a regular file",
        "data/tinyshakespeare-val-2049.txt: 4096 bytes; at most 4095 were expected",
    };
    for (int i = 0; i < 3; i++) {
        if (i == 0) assert_int_equal(mkfifo(text, 0600), 0);
        if (i == 1) assert_int_equal(mkdir(text, 0700), 0);
        if (i == 2) {
            char big[4097];
            memset(big, 'a', 4096);
            big[4096] = '\0';
            write_file(text, big);
        }
        RunResult r = run_in(where, NULL, "lesson 6.2 --preset tiny --repeat 1 --steps 4");
        char want[200];
        snprintf(want, sizeof want, "data/tinyshakespeare-val-2049.txt cannot be read (%s", SAYS[i]);
        if (r.status != 0 || !strstr(r.out, want))
            fail_msg("lesson 6.2, case %d: expected exit 0 and \"%s\", got exit %d and \"%s%s\"", i, want, r.status,
                     r.out, r.err);
        run_free(&r);
        assert_int_equal(i == 1 ? rmdir(text) : unlink(text), 0);
    }
    // the shipped slice read short (its read is the lesson's first)
    RunResult r = kvdemo_run_env("KVDEMO_TEST_FAULT=read-short:1", "lesson 6.2 --preset tiny --repeat 1 --steps 4");
    const char *want = "data/tinyshakespeare-val-2049.txt cannot be read (data/tinyshakespeare-val-2049.txt: cannot "
                       "read: the file ends early";
    if (r.status != 0 || !strstr(r.out, want))
        fail_msg("lesson 6.2, read-short:1: expected exit 0 and \"%s\", got exit %d and \"%s%s\"", want, r.status,
                 r.out, r.err);
    run_free(&r);
}

// generate's probe for a LLaMA file goes through the reader too: a FIFO as
// --model is refused at once (an open that waited would hang here).
static void test_model_fifo(void **state) {
    (void)state;
    char fifo[300], args[400];
    snprintf(fifo, sizeof fifo, "%s/model.fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    snprintf(args, sizeof args, "generate --model %s --steps 1", fifo);
    expect_failure(args, 1, "is a FIFO, not a regular file");
    unlink(fifo);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_text),
        cmocka_unit_test(test_questions_page),
        cmocka_unit_test(test_questions_page_short),
        cmocka_unit_test(test_lesson14_text),
        cmocka_unit_test(test_lesson62_slice),
        cmocka_unit_test(test_model_fifo),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
