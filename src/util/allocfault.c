// allocfault — running out of memory on purpose, for the tests (the way
// SQLite's tests make its allocator fail): with KVDEMO_TEST_FAIL_ALLOC=N in
// the environment, the Nth allocation that kvdemo's own code asks for, and
// every one after it, returns NULL with errno = ENOMEM. tests/test_oom.c
// runs a command once for each N and checks that every way out of memory
// ends in one line on stderr, exit status 1, and no half-written file.
//
// The C library's allocators are reached through these wrappers because the
// Makefile links with the linker's --wrap (GNU ld and lld): each call of
// malloc in kvdemo's objects becomes a call of __wrap_malloc, which calls
// the real one, __real_malloc, unless the fault is due. Without the
// variable nothing fails and each call costs one comparison.
//
// The failures stop when the program exits (atexit), so that what runs
// after main (gcov writing its counts in `make coverage`) still works.
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t count, size_t n);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
char *__real_strdup(const char *s);
FILE *__real_open_memstream(char **text, size_t *size);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t count, size_t n);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
char *__wrap_strdup(const char *s);
FILE *__wrap_open_memstream(char **text, size_t *size);

// The allocation that fails first: 0 before the variable is read, -1 when
// none is to fail (no variable, or the program is exiting).
static atomic_long first_failure = 0;
static atomic_long allocations = 0;

static void stop_failing(void) { atomic_store(&first_failure, -1); }

// 1 when this allocation is to fail (errno is then ENOMEM).
static int fault_due(void) {
    long first = atomic_load(&first_failure);
    if (first == 0) {
        const char *n = getenv("KVDEMO_TEST_FAIL_ALLOC");
        long want = n ? atol(n) : 0;
        long none = 0;
        if (atomic_compare_exchange_strong(&first_failure, &none, want > 0 ? want : -1) && want > 0)
            atexit(stop_failing);
        first = atomic_load(&first_failure);
    }
    if (first < 0 || atomic_fetch_add(&allocations, 1) + 1 < first) return 0;
    errno = ENOMEM;
    return 1;
}

void *__wrap_malloc(size_t n) { return fault_due() ? NULL : __real_malloc(n); }

void *__wrap_calloc(size_t count, size_t n) { return fault_due() ? NULL : __real_calloc(count, n); }

void *__wrap_realloc(void *p, size_t n) { return fault_due() ? NULL : __real_realloc(p, n); }

void *__wrap_aligned_alloc(size_t align, size_t n) { return fault_due() ? NULL : __real_aligned_alloc(align, n); }

char *__wrap_strdup(const char *s) { return fault_due() ? NULL : __real_strdup(s); }

FILE *__wrap_open_memstream(char **text, size_t *size) {
    return fault_due() ? NULL : __real_open_memstream(text, size);
}
