// fileio — error messages, little-endian numbers, and the one way kvdemo
// writes a file (fileio.h says why it goes through PATH.tmp).
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int message_zh = 0;

void fileio_set_zh(int zh) { message_zh = zh != 0; }

int fileio_zh(void) { return message_zh; }

const char *fileio_text(const char *en, const char *zh) { return message_zh ? zh : en; }

int fileio_fail2(char *err, size_t errlen, const char *en, const char *zh, ...) {
    va_list ap;
    va_start(ap, zh);
    if (err && errlen) vsnprintf(err, errlen, message_zh ? zh : en, ap);
    va_end(ap);
    return -1;
}

void fileio_verror(const char *command, const char *en, const char *zh, va_list ap) {
    fputs(message_zh ? "kvdemo：" : "kvdemo: ", stderr);
    if (command) fprintf(stderr, message_zh ? "%s：" : "%s: ", command);
    vfprintf(stderr, message_zh ? zh : en, ap);
    fputc('\n', stderr);
}

int fileio_error(const char *en, const char *zh, ...) {
    va_list ap;
    va_start(ap, zh);
    fileio_verror(NULL, en, zh, ap);
    va_end(ap);
    return -1;
}

const char *fileio_strerror(int e) {
    if (message_zh) {
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

int fileio_host_is_little_endian(void) {
    uint32_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

// ----------------------------------------------------------------------------
// Writing through PATH.tmp

// What a path that exists is, for the message that refuses it.
static const char *kind_of(mode_t mode) {
    int zh = message_zh;
    if (S_ISDIR(mode)) return zh ? "文件夹" : "a folder";
    if (S_ISLNK(mode)) return zh ? "符号链接" : "a symbolic link";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return zh ? "设备" : "a device";
    if (S_ISFIFO(mode)) return zh ? "命名管道（FIFO）" : "a FIFO";
    if (S_ISSOCK(mode)) return zh ? "套接字" : "a socket";
    return zh ? "不是普通文件" : "not a regular file";
}

int fileio_open(AtomicFile *a, const char *path, char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return fileio_fail2(err, errlen, "%s: exists and is %s; kvdemo writes only a new file or over a regular file",
                            "%s：已存在，是%s；kvdemo 只写新文件或覆盖普通文件", path, kind_of(st.st_mode));
    size_t len = strlen(path);
    a->path = malloc(len + 1);
    a->tmp = malloc(len + 5);
    if (!a->path || !a->tmp) {
        fileio_abort(a);
        return fileio_fail2(err, errlen, "%s: out of memory", "%s：内存不足", path);
    }
    memcpy(a->path, path, len + 1);
    memcpy(a->tmp, path, len);
    memcpy(a->tmp + len, ".tmp", 5);
    // A PATH.tmp left by an interrupted write is removed; anything else by
    // that name is not ours to remove.
    if (lstat(a->tmp, &st) == 0) {
        if (!S_ISREG(st.st_mode)) {
            int rc = fileio_fail2(err, errlen, "%s: its temporary file %s exists and is %s; remove it",
                                  "%s：它的临时文件 %s 已存在，是%s；请删除它", path, a->tmp, kind_of(st.st_mode));
            fileio_abort(a);
            return rc;
        }
        unlink(a->tmp);
    }
    int fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 || !(a->f = fdopen(fd, "wb"))) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(a->tmp);
        }
        int rc = fileio_fail2(err, errlen, "%s: cannot create %s: %s", "%s：无法创建 %s：%s", path, a->tmp,
                              fileio_strerror(e));
        free(a->path);
        free(a->tmp);
        memset(a, 0, sizeof *a);
        return rc;
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

int fileio_commit(AtomicFile *a, char *err, size_t errlen) {
    int ok = fflush(a->f) == 0 && !ferror(a->f);
    int e = ok ? 0 : errno ? errno : EIO;
    if (ok) test_stop_point();
    if (ok && fsync(fileno(a->f)) != 0) ok = 0, e = errno;
    if (fclose(a->f) != 0 && ok) ok = 0, e = errno;
    a->f = NULL;
    if (ok && rename(a->tmp, a->path) != 0) ok = 0, e = errno;
    int rc = 0;
    if (ok) sync_folder(a->path);
    else rc = fileio_fail2(err, errlen, "%s: cannot write: %s", "%s：无法写入：%s", a->path, fileio_strerror(e));
    fileio_abort(a);
    return rc;
}

void fileio_abort(AtomicFile *a) {
    if (a->f) fclose(a->f);
    if (a->tmp) unlink(a->tmp);   // after a commit it no longer exists
    free(a->path);
    free(a->tmp);
    memset(a, 0, sizeof *a);
}

int fileio_check_writable(const char *path, char *err, size_t errlen) {
    AtomicFile a;
    if (fileio_open(&a, path, err, errlen) != 0) return -1;
    fileio_abort(&a);
    return 0;
}

// ----------------------------------------------------------------------------
// Reading

FILE *fileio_open_read(const char *path, uint64_t *size, char *err, size_t errlen) {
    // Opened without waiting: a FIFO with no writer would block open itself,
    // before the check below could refuse it.
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        fileio_fail2(err, errlen, "%s: cannot open: %s", "%s：无法打开：%s", path, fileio_strerror(errno));
        return NULL;
    }
    struct stat st = {0};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        fileio_fail2(err, errlen, "%s: is %s, not a regular file; give the path of a file",
                     "%s：是%s，不是普通文件；请给一个文件的路径", path, kind_of(st.st_mode));
        return NULL;
    }
    FILE *f = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        int e = errno;
        close(fd);
        fileio_fail2(err, errlen, "%s: cannot open: %s", "%s：无法打开：%s", path, fileio_strerror(e));
        return NULL;
    }
    *size = (uint64_t)st.st_size;
    return f;
}

// ----------------------------------------------------------------------------
// Standard output's first write error

static int stdout_error = 0;

void fileio_note_stdout_error(int err) {
    if (!stdout_error) stdout_error = err;
}

int fileio_stdout_error(void) { return stdout_error; }
