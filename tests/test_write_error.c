// test_write_error — fileio_commit reports the reason of the FIRST write
// that failed, not errno at commit time (which later calls overwrite) nor
// the last failure (often a consequence of the first). Each case runs in a
// child process of its own, since KVDEMO_TEST_FAULT (iofault.h) is read
// once a process; this program itself never opens a file through fileio
// before its children do.
#include "testutil.h"

#include "fileio.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];

static int setup(void **state) {
    (void)state;
    return tmpdir_make(dir, sizeof dir, "wrerr");
}

static int teardown(void **state) {
    (void)state;
    return tmpdir_remove(dir);
}

enum { CHUNK = 1024, CHUNKS = 64 };   // 64 KiB: many buffers' worth of writes

// In the child: writes 64 KiB to path under fault, with errno overwritten
// after the writes (as any later call may) and, when limit > 0, the file
// size capped at limit bytes (writes past it fail with EFBIG: a second,
// later error). Sends fileio_commit's err (or "" when it succeeded) into fd.
static void child_write(int fd, const char *fault, const char *path, long limit) {
    setenv("KVDEMO_TEST_FAULT", fault, 1);
    if (limit > 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {(rlim_t)limit, (rlim_t)limit};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(3);
    }
    char err[1024] = "", chunk[CHUNK];
    memset(chunk, 'k', sizeof chunk);
    AtomicFile a;
    if (fileio_open(&a, path, ERR(LANG_EN, err)) != 0) _exit(4);
    for (int i = 0; i < CHUNKS; i++) fwrite(chunk, 1, sizeof chunk, a.f);
    errno = ENOTTY;   // what isatty, say, leaves behind
    int rc = fileio_commit(&a, ERR(LANG_EN, err));
    if (rc == 0) err[0] = '\0';
    ssize_t n = write(fd, err, strlen(err));
    _exit(n < 0 ? 5 : 0);
}

// Runs child_write in a child; returns its message in msg.
static void run_child(const char *fault, const char *path, long limit, char *msg, size_t size) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        child_write(p[1], fault, path, limit);
    }
    close(p[1]);
    size_t got = 0;
    for (ssize_t n; got + 1 < size && (n = read(p[0], msg + got, size - 1 - got)) > 0;) got += (size_t)n;
    msg[got] = '\0';
    close(p[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("%s: the child writing %s did not finish (status %d)", fault, path, status);
}

// One case: the commit must fail with "PATH: cannot write: REASON", PATH
// not made and nothing left beside it.
static void expect_reason(const char *fault, long limit, const char *reason) {
    char path[300], msg[1024], want[600];
    snprintf(path, sizeof path, "%s/out-%s-%ld.bin", dir, fault, limit);
    run_child(fault, path, limit, msg, sizeof msg);
    snprintf(want, sizeof want, "%s: cannot write: %s", path, reason);
    if (strcmp(msg, want) != 0)
        fail_msg("%s%s: expected \"%s\", got \"%s\"", fault, limit ? " and a size limit" : "", want, msg);
    if (access(path, F_OK) == 0) fail_msg("%s: %s exists though its write failed", fault, path);
    if (write_leftovers(path) != 0) fail_msg("%s: a temporary or lock file of %s was left", fault, path);
}

// The first write fails, later ones succeed: errno at commit (ENOTTY here)
// is not the reason.
static void test_first_write_fails(void **state) {
    (void)state;
    expect_reason("write:1", 0, "Input/output error");
    expect_reason("nospace:1", 0, "No space left on device");
    expect_reason("write:3", 0, "Input/output error");
}

// The first write fails, then the file reaches its size limit and every
// later write fails too (EFBIG, "File too large"): the first is reported.
static void test_first_of_two_errors(void **state) {
    (void)state;
    expect_reason("write:1", 16384, "Input/output error");
    expect_reason("nospace:2", 16384, "No space left on device");
}

// Without a fault, a write past the size limit is the only error: its own
// reason (the test above cannot pass by naming the injected one always).
static void test_size_limit_alone(void **state) {
    (void)state;
    expect_reason("none", 16384, "File too large");
}

// And with no error at all the commit succeeds (and the file is whole).
static void test_no_error(void **state) {
    (void)state;
    char path[300], msg[1024];
    snprintf(path, sizeof path, "%s/whole.bin", dir);
    run_child("none", path, 0, msg, sizeof msg);
    if (msg[0]) fail_msg("no fault: expected the commit to succeed, got \"%s\"", msg);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    fclose(f);
    if (size != CHUNK * CHUNKS) fail_msg("%s: expected %d bytes, got %ld", path, CHUNK * CHUNKS, size);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_write_fails),
        cmocka_unit_test(test_first_of_two_errors),
        cmocka_unit_test(test_size_limit_alone),
        cmocka_unit_test(test_no_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
