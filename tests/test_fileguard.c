// test_fileguard — kvdemo never destroys a file it was handed: two writers
// of one path do not steal each other's temporary file (the second is
// refused while the first holds PATH.lock), an output that names an input
// or another output is refused before any work (by inode, through links
// too), and a FIFO given as an input is refused at once instead of hanging.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileguard.h"
#include "fileio.h"
#include "testutil.h"

static char dir[64];

static int setup(void **state) {
    (void)state;
    return tmpdir_make(dir, sizeof dir, "guard");
}

static int teardown(void **state) {
    (void)state;
    return tmpdir_remove(dir);
}

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void expect_content(const char *path, const char *want, const char *what) {
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s: %s is gone, expected it kept", what, path);
    char got[4096];
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    got[n] = '\0';
    if (strcmp(got, want) != 0) fail_msg("%s: %s holds \"%.60s\", expected \"%.60s\"", what, path, got, want);
}

// The files a writer of dir/name leaves while it works.
static int leftovers(const char *name) {
    char path[160];
    path_in(path, sizeof path, name);
    return write_leftovers(path);
}

// ---------------------------------------------------------------------------
// 1. One writer at a time, each with a temporary file of its own

static void test_second_writer_in_one_process_is_refused(void **state) {
    (void)state;
    char path[128], err[512];
    path_in(path, sizeof path, "one.csv");
    AtomicFile a, b;
    assert_int_equal(fileio_open(&a, path, ERR(LANG_EN, err)), 0);
    if (fileio_open(&b, path, ERR(LANG_EN, err)) == 0) fail_msg("a second writer of %s was let in", path);
    if (!strstr(err, "another kvdemo is writing it")) fail_msg("second writer: expected \"another kvdemo is writing it\", got: %s", err);
    fputs("first\n", a.f);
    assert_int_equal(fileio_commit(&a, ERR(LANG_EN, err)), 0);
    expect_content(path, "first\n", "the first writer's file");
    // once it is done, the next writer goes ahead
    assert_int_equal(fileio_open(&b, path, ERR(LANG_EN, err)), 0);
    fputs("second\n", b.f);
    assert_int_equal(fileio_commit(&b, ERR(LANG_EN, err)), 0);
    expect_content(path, "second\n", "the second writer's file");
    if (leftovers("one.csv") != 0) fail_msg("%d temporary or lock files of one.csv left, expected 0", leftovers("one.csv"));
}

// A writer killed in the middle (a child that exits with its files open)
// leaves PATH.lock and its PATH.tmp.XXXXXX; the next writer takes the lock
// and removes them, and older kvdemos' PATH.tmp too, but nothing else.
static void test_killed_writers_files_are_cleaned(void **state) {
    (void)state;
    char path[128], old[160], notes[160], err[512];
    path_in(path, sizeof path, "model.bin");
    snprintf(old, sizeof old, "%s.tmp", path);
    snprintf(notes, sizeof notes, "%s.tmp.notes", path);
    write_file(notes, "the user's notes");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        AtomicFile a;
        if (fileio_open(&a, path, ERR(LANG_EN, err)) != 0) _exit(3);
        fputs("half", a.f);
        fflush(a.f);
        _exit(0);   // no commit, no abort: as kill -9 would leave it
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    write_file(old, "left by an older kvdemo");
    if (leftovers("model.bin") != 4) fail_msg("the killed writer left %d files, expected 4 (lock, its temporary, .tmp, .tmp.notes)", leftovers("model.bin"));
    AtomicFile b;
    if (fileio_open(&b, path, ERR(LANG_EN, err)) != 0) fail_msg("after a killed writer: %s", err);
    fputs("whole", b.f);
    assert_int_equal(fileio_commit(&b, ERR(LANG_EN, err)), 0);
    expect_content(path, "whole", "the file written after the killed writer");
    expect_content(notes, "the user's notes", "a file that is not a temporary name");
    if (leftovers("model.bin") != 1) fail_msg("%d files beside model.bin, expected only model.bin.tmp.notes", leftovers("model.bin"));
    unlink(notes);
}

// A PATH.lock that kvdemo did not make is neither taken nor removed.
static void test_users_lock_file_is_kept(void **state) {
    (void)state;
    char path[128], lock[160], err[512];
    path_in(path, sizeof path, "mine.bin");
    snprintf(lock, sizeof lock, "%s.lock", path);
    write_file(lock, "my own file\n");
    AtomicFile a;
    if (fileio_open(&a, path, ERR(LANG_EN, err)) == 0) fail_msg("wrote %s over a lock file that is not kvdemo's", path);
    if (!strstr(err, "is not kvdemo's lock")) fail_msg("expected \"is not kvdemo's lock\", got: %s", err);
    expect_content(lock, "my own file\n", "the user's .lock file");
    unlink(lock);
}

// Starts "kvdemo train ARGS" with KVDEMO_TEST_STOP_WRITE=1: it stops itself
// with its first checkpoint written to its temporary file, holding the
// locks. Returns its pid, stopped.
static pid_t train_stopped_in_a_write(const char *args) {
    const char *bin = getenv("KVDEMO_BIN");
    if (!bin || !*bin) bin = "./kvdemo";
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "exec %s train %s 2>/dev/null >/dev/null", bin, args);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("KVDEMO_TEST_STOP_WRITE", "1", 1);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
    if (!WIFSTOPPED(st)) fail_msg("train %s: expected it stopped in its first write, status %d", args, st);
    return pid;
}

static void expect_same_bytes(const char *got_path, const char *want_path, const char *what) {
    char *got = file_slurp(got_path), *want = file_slurp(want_path);
    struct stat a, b;
    assert_int_equal(stat(got_path, &a), 0);
    assert_int_equal(stat(want_path, &b), 0);
    if (a.st_size != b.st_size) fail_msg("%s: %lld bytes, expected %lld", what, (long long)a.st_size, (long long)b.st_size);
    for (off_t i = 0; i < a.st_size; i++)
        if (got[i] != want[i]) fail_msg("%s: byte %lld: expected 0x%02x, got 0x%02x", what, (long long)i, (unsigned char)want[i], (unsigned char)got[i]);
    free(got);
    free(want);
}

// Two `train --out same.bin`: the second is refused at once and touches
// nothing; the first, let go on, ends with the bytes of a run alone.
static void test_two_trainings_of_one_output(void **state) {
    (void)state;
    char text[128], out[128], alone[128], args[1024];
    path_in(text, sizeof text, "text.txt");
    path_in(out, sizeof out, "same.bin");
    path_in(alone, sizeof alone, "alone.bin");
    char *corpus = file_slurp("tests/fixtures/corpus_small.txt");
    write_file(text, corpus);
    free(corpus);
    const char *recipe = "--preset tiny --context 16 --embedding 16 --heads 2 --blocks 1 --batch 4 --iters 20 "
                         "--eval-every 10 --threads 1";
    snprintf(args, sizeof args, "train %s --data %s --out %s", recipe, text, alone);
    RunResult r = kvdemo_run(args);
    if (r.status != 0) fail_msg("the run alone: exit %d: %s", r.status, r.err);
    run_free(&r);

    snprintf(args, sizeof args, "%s --data %s --out %s", recipe, text, out);
    pid_t first = train_stopped_in_a_write(args);
    int before = leftovers("same.bin");
    snprintf(args, sizeof args, "train %s --data %s --out %s", recipe, text, out);
    r = kvdemo_run(args);
    int refused = r.status == 1 && strstr(r.err, "another kvdemo is writing it") && count_lines(r.err) == 1;
    char why[600];
    snprintf(why, sizeof why, "the second training: exit %d, stderr: %.400s", r.status, r.err);
    run_free(&r);
    int after = leftovers("same.bin");
    kill(first, SIGCONT);
    int st;
    assert_int_equal(waitpid(first, &st, 0), first);
    if (!refused) fail_msg("expected exit 1 and one line \"another kvdemo is writing it\"; %s", why);
    if (after != before) fail_msg("the refused run changed the first run's files: %d before, %d after", before, after);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("the first training, let go on: status %d, expected exit 0", st);
    expect_same_bytes(out, alone, "the first training's model");
    if (leftovers("same.bin") != 0) fail_msg("%d temporary or lock files of same.bin left", leftovers("same.bin"));
}

// ---------------------------------------------------------------------------
// 2. An output that is an input, or another output

typedef struct {
    const char *args;     // %1$s the folder
    const char *needle;   // in the one line on stderr
} Clash;

static void test_outputs_that_are_inputs_are_refused(void **state) {
    (void)state;
    char text[128], model[128], soft[128], hard[128], ckpt[128];
    path_in(text, sizeof text, "t.txt");
    path_in(model, sizeof model, "m.bin");
    path_in(soft, sizeof soft, "link.txt");
    path_in(hard, sizeof hard, "hard.txt");
    path_in(ckpt, sizeof ckpt, "c.ckpt");
    write_file(text, "the user's only copy of the text\n");
    write_file(ckpt, "a checkpoint\n");
    char *m = file_slurp("tests/fixtures/gpt_a.kvgp");
    struct stat st;
    assert_int_equal(stat("tests/fixtures/gpt_a.kvgp", &st), 0);
    FILE *f = fopen(model, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(m, 1, (size_t)st.st_size, f), (size_t)st.st_size);
    fclose(f);
    assert_int_equal(symlink(text, soft), 0);
    assert_int_equal(link(text, hard), 0);
    static const Clash cases[] = {
        {"train --data %1$s/t.txt --out %1$s/t.txt", "--out %1$s/t.txt is the same file as --data %1$s/t.txt"},
        {"train --data %1$s/t.txt --resume %1$s/c.ckpt --out %1$s/c.ckpt", "--out %1$s/c.ckpt is the same file as --resume"},
        {"train --data %1$s/t.txt --out %1$s/n.bin --log %1$s/n.bin.ckpt", "--log %1$s/n.bin.ckpt is the same file as --out's checkpoint"},
        {"train --data %1$s/t.txt --out %1$s/n.bin --log %1$s/n.bin", "--log %1$s/n.bin is the same file as --out"},
        {"train --data %1$s/t.txt --out %1$s/n.bin --log %1$s/t.txt", "--log %1$s/t.txt is the same file as --data"},
        {"train --data %1$s/link.txt --out %1$s/t.txt", "--out %1$s/t.txt is the same file as --data %1$s/link.txt"},
        {"train --data %1$s/t.txt --out %1$s/hard.txt", "--out %1$s/hard.txt is the same file as --data"},
        {"bench --model %1$s/m.bin --csv %1$s/m.bin --steps 4", "--csv %1$s/m.bin is the same file as --model"},
        {"bench --model %1$s/m.bin --svg %1$s/./m.bin --steps 4", "--svg %1$s/./m.bin is the same file as --model"},
        {"bench --init random --csv %1$s/x.out --svg %1$s/x.out --steps 4", "--svg %1$s/x.out is the same file as --csv"},
        {"train --data %1$s/t.txt --out %1$s/t.txt --lang zh", "--out %1$s/t.txt 与 --data %1$s/t.txt 是同一个文件"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[1024], needle[512];
        snprintf(args, sizeof args, cases[i].args, dir);
        snprintf(needle, sizeof needle, cases[i].needle, dir);
        expect_failure(args, 2, needle);
        expect_content(text, "the user's only copy of the text\n", args);
        expect_content(ckpt, "a checkpoint\n", args);
        char *back = file_slurp(model);
        if (memcmp(back, m, (size_t)st.st_size) != 0) fail_msg("%s: the model file changed", args);
        free(back);
        char made[160];
        path_in(made, sizeof made, "n.bin");
        if (access(made, F_OK) == 0) fail_msg("%s: %s was written", args, made);
        path_in(made, sizeof made, "x.out");
        if (access(made, F_OK) == 0) fail_msg("%s: %s was written", args, made);
    }
    free(m);
    // different files of the same content are not the same file
    assert_int_equal(fileguard_same(text, ckpt), 0);
    assert_int_equal(fileguard_same(text, soft), 1);
    char a[160], b[160];
    snprintf(a, sizeof a, "%s/new.bin", dir);
    snprintf(b, sizeof b, "%s/../%s/new.bin", dir, strrchr(dir, '/') + 1);
    assert_int_equal(fileguard_same(a, b), 1);   // neither exists yet: same folder, same name
    snprintf(b, sizeof b, "%s/new.bin2", dir);
    assert_int_equal(fileguard_same(a, b), 0);
    unlink(soft);
    unlink(hard);
}

// ---------------------------------------------------------------------------
// 4. A FIFO with no writer is refused at once by every reader

static void test_fifo_inputs_are_refused_at_once(void **state) {
    (void)state;
    char fifo[128], text[128];
    path_in(fifo, sizeof fifo, "fifo");
    path_in(text, sizeof text, "text.txt");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    char *corpus = file_slurp("tests/fixtures/corpus_small.txt");
    write_file(text, corpus);
    free(corpus);
    static const char *const readers[] = {
        "generate --model %1$s/fifo --steps 2", "lesson 3 --model %1$s/fifo", "lesson 2 --data %1$s/fifo",
        "lesson 12 --data %1$s/fifo", "train --data %1$s/fifo --out %1$s/o.bin", "eval --data %1$s/fifo",
        "train --data %1$s/text.txt --resume %1$s/fifo --out %1$s/o.bin", "memory --model %1$s/fifo --tokens 100",
    };
    const char *bin = getenv("KVDEMO_BIN");
    if (!bin || !*bin) bin = "./kvdemo";
    for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++) {
        char args[512], cmd[1024];
        snprintf(args, sizeof args, readers[i], dir);
        // timeout: a reader that waits for a writer would hang the test
        snprintf(cmd, sizeof cmd, "timeout 20 %s %s </dev/null >/dev/null", bin, args);
        RunResult r = shell_run(cmd);
        if (r.status == 124) fail_msg("kvdemo %s: still waiting on the FIFO after 20 s", args);
        if (r.status != 1 || !strstr(r.err, "is a FIFO, not a regular file") || count_lines(r.err) != 1)
            fail_msg("kvdemo %s: exit %d, stderr: %s; expected exit 1 and one line \"is a FIFO, not a regular file\"",
                     args, r.status, r.err);
        run_free(&r);
    }
    unlink(fifo);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_writer_in_one_process_is_refused),
        cmocka_unit_test(test_killed_writers_files_are_cleaned),
        cmocka_unit_test(test_users_lock_file_is_kept),
        cmocka_unit_test(test_two_trainings_of_one_output),
        cmocka_unit_test(test_outputs_that_are_inputs_are_refused),
        cmocka_unit_test(test_fifo_inputs_are_refused_at_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
