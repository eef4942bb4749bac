// ttyguard — restores the terminal's modes when a signal ends kvdemo (see
// ttyguard.h). The handler does only what a signal handler may: tcsetattr,
// write and raise are async-signal-safe (POSIX.1-2008, 2.4.3).
#include "ttyguard.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

static const int SIGNALS[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
enum { N_SIGNALS = sizeof SIGNALS / sizeof SIGNALS[0] };

static struct termios guard_saved;          // the modes to put back
static volatile sig_atomic_t guard_fd = -1;  // the terminal; -1: not armed
static int guard_erase;                     // 1: stderr is a terminal, erase its line
static struct sigaction guard_old[N_SIGNALS];
static int guard_set[N_SIGNALS];            // 1: SIGNALS[i]'s handler is ours

static void on_signal(int sig) {
    if (guard_fd >= 0) {
        tcsetattr(guard_fd, TCSANOW, &guard_saved);
        // The cursor to the start of its line, the line erased, the cursor
        // shown: the shell's prompt comes on a clean line.
        static const char ERASE[] = "\r\x1b[K\x1b[?25h";
        if (guard_erase && write(STDERR_FILENO, ERASE, sizeof ERASE - 1) < 0) {
        }
    }
    // SA_RESETHAND made the action the default one again and SA_NODEFER left
    // the signal unblocked: raised now, it ends the program as it would have.
    raise(sig);
}

int ttyguard_arm(int fd, const struct termios *saved) {
    ttyguard_disarm();
    guard_saved = *saved;
    guard_erase = isatty(STDERR_FILENO);
    guard_fd = fd;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    int rc = 0;
    for (int i = 0; i < N_SIGNALS; i++) {
        if (sigaction(SIGNALS[i], NULL, &guard_old[i]) != 0) {
            rc = -1;
            continue;
        }
        if (guard_old[i].sa_handler != SIG_DFL) continue;
        if (sigaction(SIGNALS[i], &sa, NULL) == 0) guard_set[i] = 1;
        else rc = -1;
    }
    return rc;
}

void ttyguard_disarm(void) {
    for (int i = 0; i < N_SIGNALS; i++) {
        if (guard_set[i]) sigaction(SIGNALS[i], &guard_old[i], NULL);
        guard_set[i] = 0;
    }
    guard_fd = -1;
}
