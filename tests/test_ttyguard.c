// test_ttyguard — the terminal guard (src/present/ttyguard.c) on a
// pseudo-terminal, in this process: its handler puts the saved modes back,
// erases the line on a terminal stderr, and raises the signal again; a
// signal the program handles or ignores is left alone; disarmed, the old
// handlers come back. (test_step ends a real kvdemo by the signals on a
// terminal; a process a signal ends writes no coverage data, so the handler
// is called here directly, with the signal's action made a recorder.)
#define _XOPEN_SOURCE 700
#include "testutil.h"

#include "ttyguard.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

typedef struct {
    int master, slave;
} Pty;

static void pty_open(Pty *p) {
    p->master = posix_openpt(O_RDWR | O_NOCTTY);
    assert_true(p->master >= 0);
    assert_int_equal(grantpt(p->master), 0);
    assert_int_equal(unlockpt(p->master), 0);
    p->slave = open(ptsname(p->master), O_RDWR | O_NOCTTY);
    assert_true(p->slave >= 0);
}

static void pty_close(Pty *p) {
    if (p->slave >= 0) close(p->slave);
    if (p->master >= 0) close(p->master);
}

// The terminal out of line mode, as a --step pause puts it.
static void make_raw(int fd) {
    struct termios t;
    assert_int_equal(tcgetattr(fd, &t), 0);
    t.c_lflag &= ~(tcflag_t)(ECHO | ICANON);
    assert_int_equal(tcsetattr(fd, TCSANOW, &t), 0);
}

// 1 when fd's terminal echoes and edits lines.
static int line_mode(int fd) {
    struct termios t;
    assert_int_equal(tcgetattr(fd, &t), 0);
    return (t.c_lflag & (ECHO | ICANON)) == (ECHO | ICANON);
}

static volatile sig_atomic_t recorded = 0;
static void recorder(int sig) { recorded = sig; }

// sig's current handler.
static void (*handler_of(int sig))(int) {
    struct sigaction sa;
    assert_int_equal(sigaction(sig, NULL, &sa), 0);
    return sa.sa_handler;
}

// Calls the guard's handler h for sig with sig's action a recorder, as the
// kernel would deliver it. Returns the signal h raised again (0: none).
static int call_handler(void (*h)(int), int sig) {
    struct sigaction rec, old;
    memset(&rec, 0, sizeof rec);
    rec.sa_handler = recorder;
    sigemptyset(&rec.sa_mask);
    assert_int_equal(sigaction(sig, &rec, &old), 0);
    recorded = 0;
    h(sig);
    assert_int_equal(sigaction(sig, &old, NULL), 0);
    return (int)recorded;
}

static void expect_raised(int got, int sig) {
    if (got != sig) fail_msg("the handler of signal %d: expected it raised again, got %d", sig, got);
}

// What came out of the terminal's master side, without waiting long.
static size_t read_master(int master, char *buf, size_t size) {
    size_t n = 0;
    struct pollfd p = {master, POLLIN, 0};
    while (n + 1 < size && poll(&p, 1, 200) > 0) {
        ssize_t k = read(master, buf + n, size - 1 - n);
        if (k <= 0) break;
        n += (size_t)k;
    }
    buf[n] = '\0';
    return n;
}

// Armed on a terminal that is also stderr: SIGTERM's handler is the guard's;
// called, it puts echo and line editing back, erases the line and shows the
// cursor, then raises SIGTERM again. Disarmed, SIGTERM's action is the
// default one again, and the handler (should it still run) leaves the
// terminal as it is.
static void test_restores(void **state) {
    (void)state;
    Pty p;
    pty_open(&p);
    struct termios saved;
    assert_int_equal(tcgetattr(p.slave, &saved), 0);
    assert_true(line_mode(p.slave));
    int err_copy = dup(STDERR_FILENO);
    assert_true(err_copy >= 0);
    assert_true(dup2(p.slave, STDERR_FILENO) >= 0);
    make_raw(p.slave);
    int armed = ttyguard_arm(p.slave, &saved);
    void (*h)(int) = handler_of(SIGTERM);
    int ours = armed == 0 && h != SIG_DFL && h != SIG_IGN, raised = ours ? call_handler(h, SIGTERM) : 0;
    dup2(err_copy, STDERR_FILENO);
    close(err_copy);
    if (!ours) fail_msg("armed: expected 0 and SIGTERM's handler to be the guard's, got %d", armed);
    expect_raised(raised, SIGTERM);
    if (!line_mode(p.slave)) fail_msg("SIGTERM: expected echo and line editing back, got the raw modes");
    char out[128];
    read_master(p.master, out, sizeof out);
    if (strcmp(out, "\r\x1b[K\x1b[?25h") != 0) fail_msg("SIGTERM: expected \\r ESC[K ESC[?25h on stderr, got \"%s\"", out);
    ttyguard_disarm();
    if (handler_of(SIGTERM) != SIG_DFL) fail_msg("disarmed: expected SIGTERM's default action back");
    make_raw(p.slave);
    expect_raised(call_handler(h, SIGTERM), SIGTERM);
    if (line_mode(p.slave)) fail_msg("disarmed: expected the handler to leave the terminal's modes");
    pty_close(&p);
}

// A signal the program handles itself or ignores keeps its action while the
// guard is armed, and has it after; stderr not a terminal: nothing erased.
static void test_leaves_handled(void **state) {
    (void)state;
    Pty p;
    pty_open(&p);
    struct termios saved;
    assert_int_equal(tcgetattr(p.slave, &saved), 0);
    struct sigaction ign, old_hup, old_int;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    assert_int_equal(sigaction(SIGHUP, &ign, &old_hup), 0);   // nohup
    struct sigaction rec = ign;
    rec.sa_handler = recorder;
    assert_int_equal(sigaction(SIGINT, &rec, &old_int), 0);   // race's Ctrl-C
    int err_copy = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY);
    assert_true(err_copy >= 0 && null >= 0);
    assert_true(dup2(null, STDERR_FILENO) >= 0);
    int armed = ttyguard_arm(p.slave, &saved);
    dup2(err_copy, STDERR_FILENO);
    close(err_copy);
    close(null);
    assert_int_equal(armed, 0);
    if (handler_of(SIGHUP) != SIG_IGN) fail_msg("armed: expected the ignored SIGHUP left ignored");
    if (handler_of(SIGINT) != recorder) fail_msg("armed: expected SIGINT's own handler left");
    void (*h)(int) = handler_of(SIGQUIT);
    if (h == SIG_DFL || h == SIG_IGN) fail_msg("armed: expected SIGQUIT's handler to be the guard's");
    make_raw(p.slave);
    expect_raised(call_handler(h, SIGQUIT), SIGQUIT);
    if (!line_mode(p.slave)) fail_msg("SIGQUIT: expected echo and line editing back");
    char out[128];
    if (read_master(p.master, out, sizeof out)) fail_msg("stderr not a terminal: expected nothing, got \"%s\"", out);
    ttyguard_disarm();
    if (handler_of(SIGHUP) != SIG_IGN || handler_of(SIGINT) != recorder || handler_of(SIGQUIT) != SIG_DFL)
        fail_msg("disarmed: expected SIGHUP ignored, SIGINT its own, SIGQUIT the default");
    sigaction(SIGHUP, &old_hup, NULL);
    sigaction(SIGINT, &old_int, NULL);
    pty_close(&p);
}

// The terminal hung up (SIGHUP's case: its other end closed): the erase
// cannot be written, and the signal is raised again all the same.
static void test_hung_up(void **state) {
    (void)state;
    Pty p;
    pty_open(&p);
    struct termios saved;
    assert_int_equal(tcgetattr(p.slave, &saved), 0);
    int err_copy = dup(STDERR_FILENO);
    assert_true(err_copy >= 0);
    assert_true(dup2(p.slave, STDERR_FILENO) >= 0);
    int armed = ttyguard_arm(p.slave, &saved);
    close(p.master);   // hung up: writes to the terminal fail
    p.master = -1;
    void (*h)(int) = handler_of(SIGHUP);
    if (armed != 0 || h == SIG_DFL || h == SIG_IGN) {
        dup2(err_copy, STDERR_FILENO);
        fail_msg("armed: expected SIGHUP's handler to be the guard's");
    }
    int raised = call_handler(h, SIGHUP);
    dup2(err_copy, STDERR_FILENO);
    close(err_copy);
    expect_raised(raised, SIGHUP);
    ttyguard_disarm();
    pty_close(&p);
}

// A test that failed armed leaves the next one a clean start: the guard
// disarmed, the signals' default actions.
static int disarm(void **state) {
    (void)state;
    ttyguard_disarm();
    static const int SIGNALS[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (int i = 0; i < 4; i++) signal(SIGNALS[i], SIG_DFL);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_restores, disarm),
        cmocka_unit_test_teardown(test_leaves_handled, disarm),
        cmocka_unit_test_teardown(test_hung_up, disarm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
