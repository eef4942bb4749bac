// fileio — how kvdemo reads and writes its files: one way to word an error,
// little-endian numbers, the host's byte order, and one safe way to write a
// file (the model, the LLaMA model, the checkpoint, the CSV).
//
// A file is written as PATH.tmp.XXXXXX in the same folder (a name of the
// writer's own), flushed to the disk (fsync), then renamed over PATH and
// the folder flushed too, so PATH is always either the old file or the whole
// new one, even after a crash or kill -9. While it writes, the writer holds
// PATH.lock (an advisory lock, removed when it is done): a second kvdemo
// that would write PATH meanwhile is refused with a message instead of
// racing it, and the holder alone may remove the temporary files a killed
// writer of PATH left. A PATH that exists and is not a regular file (a
// folder, a device such as /dev/full, a FIFO, a symbolic link) is refused
// rather than replaced: this keeps the program simple and never turns a
// link or a device into a plain file by surprise.
// (The clock is timer_now in timer.h.)
#ifndef KVDEMO_FILEIO_H
#define KVDEMO_FILEIO_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// The language of a message: every sentence kvdemo says exists in both.
// There is no language of the process: whoever words a message says which
// (a command or a lesson has it in its Trace, which the command line set
// from --lang or LANG).
typedef enum { LANG_EN, LANG_ZH } Lang;

// An error being worded: the language of whoever asked, and the buffer the
// reason goes into (size bytes; text NULL when the caller wants no reason).
// A loader receives one and writes one reason into it; the language is not
// the loader's to choose. Made with ERR(lang, buf) from a char array.
typedef struct {
    Lang lang;
    char *text;
    size_t size;
} Err;
#define ERR(lang, buf) ((Err){(lang), (buf), sizeof(buf)})
#define ERR_NONE ((Err){LANG_EN, NULL, 0})   // no reason wanted

// Writes en or zh, in err's language, with its arguments into err (when it
// has a buffer) and returns -1: the convention of every loader, "Returns 0,
// or -1 with err = "PATH: what is wrong"". en and zh take the same
// arguments (the compiler checks en against them; tests/test_zh.c checks
// that zh has the same conversions in the same order).
int fileio_fail2(Err err, const char *en, const char *zh, ...) __attribute__((format(printf, 2, 4)));
// One error line on stderr in lang: "kvdemo: " and en, or "kvdemo：" and zh
// (the same rule for the two formats). Returns -1.
int fileio_error(Lang lang, const char *en, const char *zh, ...) __attribute__((format(printf, 2, 4)));
// The same line from a va_list, for a command's own error function; command
// (e.g. "memory"), if not NULL, follows "kvdemo: " as "memory: ".
void fileio_verror(Lang lang, const char *command, const char *en, const char *zh, va_list ap)
    __attribute__((format(printf, 3, 0)));
// A system error's reason (errno) in lang: strerror, or its Chinese for the
// reasons a class meets (no such file, no permission, disk full, ...).
const char *fileio_strerror(Lang lang, int e);
// en or zh, whichever lang is: a reason or a word an error message puts in
// its %s.
const char *fileio_text(Lang lang, const char *en, const char *zh);

// Little-endian numbers in a byte buffer.
uint32_t le_get_u32(const unsigned char *b);
uint64_t le_get_u64(const unsigned char *b);
float le_get_f32(const unsigned char *b);
void le_put_u32(unsigned char *b, uint32_t x);
void le_put_u64(unsigned char *b, uint64_t x);
void le_put_f32(unsigned char *b, float x);
// Adler-32 (RFC 1950, Python's zlib.adler32) of n bytes continuing from
// sum (1 to begin): the checksum at the end of a model file, cheap enough
// to check on every load (a few ms for the shipped model's 43 MB).
uint32_t fileio_adler32(uint32_t sum, const void *data, size_t n);

// 1 on a little-endian machine (where floats can be read and written as they
// are in memory), 0 otherwise.
int fileio_host_is_little_endian(void);

// A file being written: write to f, then fileio_commit or fileio_abort.
typedef struct {
    FILE *f;      // the temporary file PATH.tmp.XXXXXX, open for writing
    char *path;   // PATH
    char *tmp;    // PATH.tmp.XXXXXX
    int lock_fd;  // PATH.lock, held; -1 when a claim of the process holds it
    int fd;       // f's file descriptor (for fsync: fileno of f is -1)
    int *first_error;   // errno of f's first failed write, 0 if none (NULL: not kept)
} AtomicFile;

// Starts writing path. Returns 0, or -1 with err = "PATH: why" (PATH exists
// and is not a regular file, another kvdemo is writing it, the folder is
// missing or not writable, ...).
int fileio_open(AtomicFile *a, const char *path, Err err);
// Flushes, syncs and renames the temporary file over path. Any write error
// since fileio_open (a full disk, ...) fails here with the reason of the
// first one (later ones are often its consequences), the
// temporary file removed and path left as it was. Returns 0 or -1 with err.
int fileio_commit(AtomicFile *a, Err err);
// Gives up: closes and removes the temporary file; path is left as it was.
void fileio_abort(AtomicFile *a);
// Claims path for a write at the end of a long run (train's model and
// checkpoint): takes PATH.lock until fileio_release, and finds now what
// fileio_open would refuse (by creating and removing a temporary file), so
// that a bad --out or a second writer is said before the work. Later
// fileio_open / fileio_commit of path in this process use the claim's lock.
// Returns 0 or -1 with err.
int fileio_claim(const char *path, Err err);
// Lets go of a claim (nothing when path is not claimed).
void fileio_release(const char *path);

// Standard output: the reason of the first write to it that failed, kept for
// the message at exit (a flush that fails empties the buffer, and errno is
// soon overwritten). fileio_note_stdout_error records errno; 0 when none.
void fileio_note_stdout_error(int err);
int fileio_stdout_error(void);

// Reading: opens path for reading and says how many bytes it holds. A path
// that is not a regular file is refused. Returns the file, or NULL with err.
FILE *fileio_open_read(const char *path, uint64_t *size, Err err);
// Why a read of f came back short, in lang: the system's
// reason when f has an error, else that the file ended before its size
// said (it is truncated, or changed while it was read).
const char *fileio_read_reason(Lang lang, FILE *f);
// The bytes of path in memory, NUL-terminated (free them), *len of them:
// the whole file, or with prefix set only its first max bytes at most. A
// whole file of more than max bytes is refused, as are what fileio_open_read
// refuses and a read that comes back short. Returns NULL with err.
char *fileio_read_text(const char *path, size_t max, int prefix, size_t *len, Err err);

#endif
