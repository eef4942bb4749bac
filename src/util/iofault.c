// iofault — failing writes, full disks and short reads on purpose, for the
// tests (iofault.h lists the faults), and the first write error of a file
// fileio writes. The stream handed back is glibc's fopencookie: reads,
// writes and seeks go to the functions below, which call read, write and
// lseek on the file descriptor unless the fault is due, and keep the reason
// of the first write that failed. Where there is no fopencookie (not glibc)
// nothing is injected, and no first error is kept.
#define _GNU_SOURCE
#include "iofault.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __GLIBC__

enum { FAULT_NONE, FAULT_WRITE, FAULT_NOSPACE, FAULT_READ_SHORT };

// The fault asked for and at which call, read once from the environment;
// the calls made so far (writes and reads counted apart).
static atomic_int fault_kind = -1;
static atomic_long fault_at = 0;
static atomic_long writes_made = 0;
static atomic_long reads_made = 0;
static atomic_int read_cut = 0;   // 1 once a short read was given: the file ends

static int fault_wanted(void) {
    int kind = atomic_load(&fault_kind);
    if (kind >= 0) return kind;
    const char *v = getenv("KVDEMO_TEST_FAULT");
    static const struct {
        const char *name;
        int kind;
    } kinds[] = {{"write:", FAULT_WRITE}, {"nospace:", FAULT_NOSPACE}, {"read-short:", FAULT_READ_SHORT}};
    kind = FAULT_NONE;
    for (size_t i = 0; v && i < sizeof kinds / sizeof kinds[0]; i++) {
        size_t n = strlen(kinds[i].name);
        if (strncmp(v, kinds[i].name, n) == 0 && atol(v + n) > 0) {
            kind = kinds[i].kind;
            atomic_store(&fault_at, atol(v + n));
        }
    }
    atomic_store(&fault_kind, kind);
    return kind;
}

// A stream's file descriptor and the errno of its first failed write.
typedef struct {
    int fd;
    int first_error;
} Cookie;

static ssize_t cookie_read(void *cookie, char *buf, size_t size) {
    int fd = ((Cookie *)cookie)->fd;
    if (atomic_load(&read_cut)) return 0;
    ssize_t got = read(fd, buf, size);
    if (got > 0 && fault_wanted() == FAULT_READ_SHORT &&
        atomic_fetch_add(&reads_made, 1) + 1 == atomic_load(&fault_at)) {
        // Half of what there was, the file's offset put back to match.
        atomic_store(&read_cut, 1);
        lseek(fd, -(off_t)(got - got / 2), SEEK_CUR);
        got /= 2;
    }
    return got;
}

// Writes size bytes, or fails as the fault says (errno set, -1).
static ssize_t fault_or_write(int fd, const char *buf, size_t size) {
    int kind = fault_wanted();
    if ((kind == FAULT_WRITE || kind == FAULT_NOSPACE) &&
        atomic_fetch_add(&writes_made, 1) + 1 == atomic_load(&fault_at)) {
        errno = kind == FAULT_WRITE ? EIO : ENOSPC;
        return -1;
    }
    // stdio takes a short count for an error: finish the whole buffer.
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, buf + done, size - done);
        if (w < 0 && errno == EINTR) continue;
        if (w == 0) errno = EIO;
        if (w <= 0) return done ? (ssize_t)done : -1;
        done += (size_t)w;
    }
    return (ssize_t)done;
}

static ssize_t cookie_write(void *cookie, const char *buf, size_t size) {
    Cookie *c = cookie;
    ssize_t w = fault_or_write(c->fd, buf, size);
    if (w < 0 && !c->first_error) c->first_error = errno ? errno : EIO;
    return w;
}

static int cookie_seek(void *cookie, off64_t *offset, int whence) {
    off_t at = lseek(((Cookie *)cookie)->fd, (off_t)*offset, whence);
    if (at < 0) return -1;
    *offset = at;
    return 0;
}

static int cookie_close(void *cookie) {
    int rc = close(((Cookie *)cookie)->fd);
    free(cookie);
    return rc;
}

// A stream of ours over fd; *first_error, if asked for, is its cookie's.
static FILE *cookie_stream(int fd, const char *mode, int **first_error) {
    Cookie *cookie = malloc(sizeof *cookie);
    if (!cookie) return NULL;
    *cookie = (Cookie){.fd = fd, .first_error = 0};
    cookie_io_functions_t io = {.read = cookie_read, .write = cookie_write, .seek = cookie_seek, .close = cookie_close};
    FILE *f = fopencookie(cookie, mode, io);
    if (!f) free(cookie);
    else if (first_error) *first_error = &cookie->first_error;
    return f;
}

FILE *iofault_fdopen(int fd, const char *mode) {
    if (fault_wanted() == FAULT_NONE) return fdopen(fd, mode);
    return cookie_stream(fd, mode, NULL);
}

FILE *iofault_open_writer(int fd, int **first_error) { return cookie_stream(fd, "wb", first_error); }

#else

FILE *iofault_fdopen(int fd, const char *mode) { return fdopen(fd, mode); }

FILE *iofault_open_writer(int fd, int **first_error) {
    *first_error = NULL;
    return fdopen(fd, "wb");
}

#endif
