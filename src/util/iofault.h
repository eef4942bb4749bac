// iofault — input and output faults on purpose, for the tests (the way
// SQLite's tests make its file layer fail). With KVDEMO_TEST_FAULT=KIND:N in
// the environment, the Nth write (or read) that the files opened by fileio
// make fails:
//
//   write:N       the Nth write fails with EIO (an input/output error)
//   nospace:N     the Nth write fails with ENOSPC (a full disk)
//   read-short:N  the Nth read returns half the bytes asked for, and every
//                 later read the end of the file: the file looks cut short
//
// "A write" and "a read" are the C library's calls to the system (a
// buffer's worth of bytes, or one large fread), counted over every file
// fileio opens in the process. Without the variable nothing is wrapped.
#ifndef KVDEMO_IOFAULT_H
#define KVDEMO_IOFAULT_H

#include <stdio.h>

// fdopen(fd, mode), or, with KVDEMO_TEST_FAULT set, a stream over fd whose
// reads and writes are counted and fail as above (fileno of it is -1: keep
// fd for fsync). Returns NULL with errno set when it cannot.
FILE *iofault_fdopen(int fd, const char *mode);
// A stream for writing to fd that keeps the reason (errno) of its first
// write that failed in **first_error, 0 until one fails, readable until the
// stream is closed: stdio keeps only a flag, and errno is soon overwritten.
// The faults above apply to it. Where it cannot be kept (no fopencookie),
// *first_error is NULL. Returns NULL with errno set when it cannot.
FILE *iofault_open_writer(int fd, int **first_error);

#endif
