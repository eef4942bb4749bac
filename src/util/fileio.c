// fileio — error messages, little-endian numbers, and the one way kvdemo
// writes a file (fileio.h says why it goes through a temporary file and
// PATH.lock).
// The lock is flock's (BSD and Linux, beside POSIX's fcntl locks): it
// belongs to an open file rather than to the process, so a second writer in
// the same process is refused as one in another process is.
#include "fileio.h"
#include "iofault.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

const char *fileio_text(Lang lang, const char *en, const char *zh) { return lang == LANG_ZH ? zh : en; }

int fileio_fail2(Err err, const char *en, const char *zh, ...) {
    va_list ap;
    va_start(ap, zh);
    if (err.text && err.size) vsnprintf(err.text, err.size, fileio_text(err.lang, en, zh), ap);
    va_end(ap);
    return -1;
}

void fileio_verror(Lang lang, const char *command, const char *en, const char *zh, va_list ap) {
    int in_zh = lang == LANG_ZH;
    fputs(in_zh ? "kvdemo：" : "kvdemo: ", stderr);
    if (command) fprintf(stderr, in_zh ? "%s：" : "%s: ", command);
    vfprintf(stderr, in_zh ? zh : en, ap);
    fputc('\n', stderr);
}

int fileio_error(Lang lang, const char *en, const char *zh, ...) {
    va_list ap;
    va_start(ap, zh);
    fileio_verror(lang, NULL, en, zh, ap);
    va_end(ap);
    return -1;
}

const char *fileio_strerror(Lang lang, int e) {
    if (lang == LANG_ZH) {
        switch (e) {
        case ENOENT: return "没有这个文件或文件夹";
        case EACCES: return "没有权限";
        case EPERM: return "不允许这样操作";
        case EISDIR: return "这是一个文件夹";
        case ENOTDIR: return "路径中有一段不是文件夹";
        case ENOSPC: return "磁盘已满";
        case EROFS: return "文件系统是只读的";
        case ENAMETOOLONG: return "文件名太长";
        case ELOOP: return "符号链接太多层";
        case EIO: return "输入输出错误";
        case ENOMEM: return "内存不足";
        case EEXIST: return "文件已存在";
        case EBADF: return "文件已关闭";
        default: break;
        }
    }
    return strerror(e);
}

// ----------------------------------------------------------------------------
// Little-endian numbers

uint32_t le_get_u32(const unsigned char *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

uint64_t le_get_u64(const unsigned char *b) { return le_get_u32(b) | (uint64_t)le_get_u32(b + 4) << 32; }

float le_get_f32(const unsigned char *b) {
    uint32_t u = le_get_u32(b);
    float x;
    memcpy(&x, &u, 4);
    return x;
}

void le_put_u32(unsigned char *b, uint32_t x) {
    b[0] = (unsigned char)x;
    b[1] = (unsigned char)(x >> 8);
    b[2] = (unsigned char)(x >> 16);
    b[3] = (unsigned char)(x >> 24);
}

void le_put_u64(unsigned char *b, uint64_t x) {
    le_put_u32(b, (uint32_t)x);
    le_put_u32(b + 4, (uint32_t)(x >> 32));
}

void le_put_f32(unsigned char *b, float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    le_put_u32(b, u);
}

uint32_t fileio_adler32(uint32_t sum, const void *data, size_t n) {
    // a = 1 + the bytes, b = the sum of the a's, both mod 65521; 5552 bytes
    // is the most that can be added before b could pass 2^32.
    enum { MOD = 65521, RUN = 5552 };
    const unsigned char *p = data;
    uint32_t a = sum & 0xffff, b = sum >> 16;
    while (n > 0) {
        size_t k = n < RUN ? n : RUN;
        n -= k;
        for (; k > 0; k--) {
            a += *p++;
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    return b << 16 | a;
}

int fileio_host_is_little_endian(void) {
    uint32_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

// ----------------------------------------------------------------------------
// Writing: refusing what is not a regular file

// What a path that exists is, for the message that refuses it.
static const char *kind_of(Lang lang, mode_t mode) {
    int zh = lang == LANG_ZH;
    if (S_ISDIR(mode)) return zh ? "文件夹" : "a folder";
    if (S_ISLNK(mode)) return zh ? "符号链接" : "a symbolic link";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return zh ? "设备" : "a device";
    if (S_ISFIFO(mode)) return zh ? "命名管道（FIFO）" : "a FIFO";
    if (S_ISSOCK(mode)) return zh ? "套接字" : "a socket";
    return zh ? "不是普通文件" : "not a regular file";
}

// ----------------------------------------------------------------------------
// One writer at a time: PATH.lock

// The file whose lock says that a kvdemo is writing PATH. Its first line
// (written by the kvdemo that made it) tells it from a user's own file of
// that name, which is neither locked nor removed; an empty one is taken as
// kvdemo's (its maker may not have written the line yet).
static const char LOCK_MARK[] = "kvdemo lock: a kvdemo is writing the file of this name without .lock\n";

// path with suffix appended, in memory of its own; NULL when out of memory.
static char *with_suffix(const char *path, const char *suffix) {
    size_t n = strlen(path), k = strlen(suffix);
    char *s = malloc(n + k + 1);
    if (s) {
        memcpy(s, path, n);
        memcpy(s + n, suffix, k + 1);
    }
    return s;
}

// 1 when the open file fd holds nothing or begins with LOCK_MARK.
static int lock_is_kvdemos(int fd) {
    char head[sizeof LOCK_MARK];
    ssize_t got = pread(fd, head, sizeof LOCK_MARK - 1, 0);
    return got == 0 || (got == (ssize_t)sizeof LOCK_MARK - 1 && memcmp(head, LOCK_MARK, (size_t)got) == 0);
}

// Opens (or makes) lock and takes it without waiting. Returns its file
// descriptor, -1 with err (held by another kvdemo, not kvdemo's, ...), or -2
// when the file went away in between (its holder removed it): try again.
static int lock_try(const char *path, const char *lock, Err err) {
    int fd = open(lock, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    int made = fd >= 0;
    if (!made && errno == EEXIST) {
        fd = open(lock, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) return -2;   // removed since
    }
    if (fd < 0) {
        return fileio_fail2(err, "%s: cannot create its lock %s: %s", "%s：无法创建它的锁文件 %s：%s",
                            path, lock, fileio_strerror(err.lang, errno));
    }
    struct stat st;
    if (!made && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !lock_is_kvdemos(fd))) {
        close(fd);
        return fileio_fail2(err, "%s: %s exists and is not kvdemo's lock; rename it or write elsewhere",
                            "%s：%s 已存在，却不是 kvdemo 的锁文件；请把它改名，或写到别处", path, lock);
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(fd);
        if (e == EWOULDBLOCK)
            return fileio_fail2(err,
                                "%s: another kvdemo is writing it (%s is locked); wait for it to finish or write elsewhere",
                                "%s：另一个 kvdemo 正在写它（%s 已加锁）；请等它结束，或写到别处", path, lock);
        return fileio_fail2(err, "%s: cannot lock %s: %s", "%s：无法给 %s 加锁：%s", path, lock,
                            fileio_strerror(err.lang, e));
    }
    if (made && write(fd, LOCK_MARK, sizeof LOCK_MARK - 1) != (ssize_t)sizeof LOCK_MARK - 1) {
        int e = errno ? errno : EIO;
        unlink(lock);
        close(fd);
        return fileio_fail2(err, "%s: cannot write its lock %s: %s", "%s：无法写入它的锁文件 %s：%s", path,
                            lock, fileio_strerror(err.lang, e));
    }
    // Held; but is it still the file of that name? Its last holder removes
    // it before letting go, so one opened just before that is an orphan.
    struct stat named;
    if (fstat(fd, &st) == 0 && lstat(lock, &named) == 0 && st.st_dev == named.st_dev && st.st_ino == named.st_ino)
        return fd;
    close(fd);
    return -2;
}

// Takes PATH.lock for path. Returns its file descriptor or -1 with err.
static int lock_take(const char *path, Err err) {
    char *lock = with_suffix(path, ".lock");
    if (!lock) return fileio_fail2(err, "%s: out of memory", "%s：内存不足", path);
    int fd = -2;
    for (int attempt = 0; attempt < 16 && fd == -2; attempt++) fd = lock_try(path, lock, err);
    if (fd == -2)
        fd = fileio_fail2(err, "%s: its lock %s keeps changing; is another kvdemo writing it?",
                          "%s：它的锁文件 %s 一直在变；是不是另一个 kvdemo 在写它？", path, lock);
    free(lock);
    return fd;
}

// Removes PATH.lock (while still holding it) and lets go. Its name is made
// on the stack: out of memory, the lock must still go (a path longer than
// this could not have been locked: open refuses it).
static void lock_drop(const char *path, int fd) {
    if (fd < 0) return;
    char lock[4096 + sizeof ".lock"];
    if (snprintf(lock, sizeof lock, "%s.lock", path) < (int)sizeof lock) unlink(lock);
    close(fd);
}

// The locks taken by fileio_claim, held until fileio_release.
enum { MAX_CLAIMS = 8 };
static struct {
    char *path;
    int fd;
} claims[MAX_CLAIMS];

static int claimed(const char *path) {
    for (int i = 0; i < MAX_CLAIMS; i++)
        if (claims[i].path && strcmp(claims[i].path, path) == 0) return 1;
    return 0;
}

// ----------------------------------------------------------------------------
// Writing through a temporary file

// The temporary files of path that no writer owns any more: PATH.tmp (the
// name of older kvdemos) and PATH.tmp.XXXXXX, left by a writer that was
// killed. Only called with PATH.lock held, when no other writer of path
// can be at work; anything by those names that is not a regular file stays.
static void remove_stale_temporaries(const char *path) {
    char *dir = strdup(path);
    if (!dir) return;
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : path;
    const char *folder = slash ? (slash == dir ? "/" : (*slash = '\0', dir)) : ".";
    size_t n = strlen(base);
    DIR *d = opendir(folder);
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *name = e->d_name;
        if (strncmp(name, base, n) != 0 || strncmp(name + n, ".tmp", 4) != 0) continue;
        const char *rest = name + n + 4;
        if (*rest && (rest[0] != '.' || strlen(rest) != 7)) continue;
        struct stat st;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", folder, name);
        if (lstat(full, &st) == 0 && S_ISREG(st.st_mode)) unlink(full);
    }
    if (d) closedir(d);
    free(dir);
}

// Creates path's temporary file PATH.tmp.XXXXXX, a name of this writer's
// own, readable as a file written with fopen would be (0644 less the umask).
static int create_temporary(AtomicFile *a, Err err) {
    a->tmp = with_suffix(a->path, ".tmp.XXXXXX");
    if (!a->tmp) return fileio_fail2(err, "%s: out of memory", "%s：内存不足", a->path);
    int fd = mkstemp(a->tmp);
    if (fd >= 0) {
        mode_t mask = umask(0);
        umask(mask);
        if (fchmod(fd, 0644 & ~mask) == 0 && (a->f = iofault_open_writer(fd, &a->first_error))) {
            a->fd = fd;
            return 0;
        }
    }
    int e = errno;
    if (fd >= 0) {
        close(fd);
        unlink(a->tmp);
    }
    // The reason before the temporary file's name (its own, without the
    // folder): a long path must not push the reason out of a caller's err.
    const char *slash = strrchr(a->tmp, '/');
    int rc = fileio_fail2(err, "%s: cannot create its temporary file: %s (%s)", "%s：无法创建它的临时文件：%s（%s）",
                          a->path, fileio_strerror(err.lang, e), slash ? slash + 1 : a->tmp);
    free(a->tmp);
    a->tmp = NULL;
    return rc;
}

int fileio_open(AtomicFile *a, const char *path, Err err) {
    memset(a, 0, sizeof *a);
    a->lock_fd = -1;
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return fileio_fail2(err, "%s: exists and is %s; kvdemo writes only a new file or over a regular file",
                            "%s：已存在，是%s；kvdemo 只写新文件或覆盖普通文件", path, kind_of(err.lang, st.st_mode));
    a->path = strdup(path);
    if (!a->path) return fileio_fail2(err, "%s: out of memory", "%s：内存不足", path);
    if (!claimed(path) && (a->lock_fd = lock_take(path, err)) < 0) {
        fileio_abort(a);
        return -1;
    }
    remove_stale_temporaries(path);
    if (create_temporary(a, err) != 0) {
        fileio_abort(a);
        return -1;
    }
    return 0;
}

// For the tests that kill a process in the middle of a write: with
// KVDEMO_TEST_STOP_WRITE=N in the environment, the Nth write of this process
// stops itself (SIGSTOP) with the whole temporary file written but not yet
// renamed, so that the test can kill it there.
static void test_stop_point(void) {
    static int writes = 0;
    const char *n = getenv("KVDEMO_TEST_STOP_WRITE");
    if (n && atoi(n) == ++writes) raise(SIGSTOP);
}

// For the tests of a full disk (/dev/full is refused, not being a regular
// file): with KVDEMO_TEST_FAIL_WRITE=N in the environment, the Nth commit of
// this process fails as if the disk were full (ENOSPC), the whole temporary
// file written but not yet renamed. Returns 1 when this commit is to fail.
static int test_fail_point(void) {
    static int commits = 0;
    const char *n = getenv("KVDEMO_TEST_FAIL_WRITE");
    return n && atoi(n) == ++commits;
}

// Flushes the folder that holds path, so that a rename in it is on the disk.
static void sync_folder(const char *path) {
    char *dir = strdup(path);
    if (!dir) return;
    char *slash = strrchr(dir, '/');
    const char *d = slash ? (slash == dir ? "/" : (*slash = '\0', dir)) : ".";
    int fd = open(d, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

int fileio_commit(AtomicFile *a, Err err) {
    int ok = fflush(a->f) == 0 && !ferror(a->f);
    int first = a->first_error ? *a->first_error : 0;
    int e = ok ? 0 : first ? first : errno ? errno : EIO;
    if (ok) test_stop_point();
    if (ok && test_fail_point()) ok = 0, e = ENOSPC;
    if (ok && fsync(a->fd) != 0) ok = 0, e = errno;
    if (fclose(a->f) != 0 && ok) ok = 0, e = errno;
    a->f = NULL;
    if (ok && rename(a->tmp, a->path) != 0) ok = 0, e = errno;
    int rc = 0;
    if (ok) sync_folder(a->path);
    else rc = fileio_fail2(err, "%s: cannot write: %s", "%s：无法写入：%s", a->path, fileio_strerror(err.lang, e));
    fileio_abort(a);
    return rc;
}

void fileio_abort(AtomicFile *a) {
    if (a->f) fclose(a->f);
    if (a->tmp) unlink(a->tmp);   // after a commit it no longer exists
    if (a->path) lock_drop(a->path, a->lock_fd);
    free(a->path);
    free(a->tmp);
    memset(a, 0, sizeof *a);
    a->lock_fd = -1;
}

int fileio_claim(const char *path, Err err) {
    int slot = 0;
    while (slot < MAX_CLAIMS && claims[slot].path) slot++;
    assert(slot < MAX_CLAIMS && !claimed(path));
    AtomicFile a;
    if (fileio_open(&a, path, err) != 0) return -1;
    // The lock passes from the trial write to the claim.
    claims[slot].fd = a.lock_fd;
    claims[slot].path = a.path;
    a.lock_fd = -1;
    a.path = NULL;
    fileio_abort(&a);
    return 0;
}

void fileio_release(const char *path) {
    for (int i = 0; i < MAX_CLAIMS; i++) {
        if (!claims[i].path || strcmp(claims[i].path, path) != 0) continue;
        lock_drop(claims[i].path, claims[i].fd);
        free(claims[i].path);
        claims[i].path = NULL;
    }
}

// ----------------------------------------------------------------------------
// Reading

FILE *fileio_open_read(const char *path, uint64_t *size, Err err) {
    // Opened without waiting: a FIFO with no writer would block open itself,
    // before the check below could refuse it.
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        fileio_fail2(err, "%s: cannot open: %s", "%s：无法打开：%s", path, fileio_strerror(err.lang, errno));
        return NULL;
    }
    struct stat st = {0};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        fileio_fail2(err, "%s: is %s, not a regular file; give the path of a file",
                     "%s：是%s，不是普通文件；请给一个文件的路径", path, kind_of(err.lang, st.st_mode));
        return NULL;
    }
    FILE *f = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0 ? iofault_fdopen(fd, "rb") : NULL;
    if (!f) {
        int e = errno;
        close(fd);
        fileio_fail2(err, "%s: cannot open: %s", "%s：无法打开：%s", path, fileio_strerror(err.lang, e));
        return NULL;
    }
    *size = (uint64_t)st.st_size;
    return f;
}

const char *fileio_read_reason(Lang lang, FILE *f) {
    if (ferror(f)) return fileio_strerror(lang, errno ? errno : EIO);
    return fileio_text(lang, "the file ends early (it is truncated, or changed while it was read)",
                       "文件提前结束（文件不完整，或读取时被改动了）");
}

char *fileio_read_text(const char *path, size_t max, int prefix, size_t *len, Err err) {
    uint64_t size;
    FILE *f = fileio_open_read(path, &size, err);
    if (!f) return NULL;
    char *text = NULL;
    if (size > max && !prefix) {
        fileio_fail2(err, "%s: %llu bytes; at most %zu were expected", "%s：%llu 字节；最多应为 %zu 字节", path,
                     (unsigned long long)size, max);
    } else {
        size_t want = size < max ? (size_t)size : max;
        text = malloc(want + 1);
        if (!text) fileio_fail2(err, "%s: out of memory", "%s：内存不足", path);
        else if (fread(text, 1, want, f) != want) {
            fileio_fail2(err, "%s: cannot read: %s", "%s：读取出错：%s", path, fileio_read_reason(err.lang, f));
            free(text);
            text = NULL;
        } else {
            text[want] = '\0';
            *len = want;
        }
    }
    fclose(f);
    return text;
}

// ----------------------------------------------------------------------------
// Standard output's first write error

static int stdout_error = 0;

void fileio_note_stdout_error(int err) {
    if (!stdout_error) stdout_error = err;
}

int fileio_stdout_error(void) { return stdout_error; }
