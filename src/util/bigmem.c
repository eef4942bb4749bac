// bigmem — memory for the big arrays, backed by huge pages where possible.
#define _DEFAULT_SOURCE   // MAP_ANONYMOUS and madvise, beside POSIX
#include "bigmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

int bigmem_is_mapped(size_t bytes) { return bytes >= HUGE_PAGE; }

void *bigmem_alloc(size_t bytes) {
    if (bytes == 0) bytes = 1;
    if (!bigmem_is_mapped(bytes)) {
        void *p = aligned_alloc(64, round_up(bytes, 64));
        if (p) memset(p, 0, bytes);
        return p;
    }
    // Map one huge page more than needed, then give back the unaligned head
    // and the tail, so that what remains starts on a 2 MB boundary (the
    // kernel backs only aligned 2 MB ranges with huge pages).
    size_t len = round_up(bytes, HUGE_PAGE);
    if (len > SIZE_MAX - HUGE_PAGE) return NULL;
    char *raw = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *p = (char *)round_up((size_t)(uintptr_t)raw, HUGE_PAGE);
    size_t head = (size_t)(p - raw), tail = HUGE_PAGE - head;
    if (head) munmap(raw, head);
    if (tail) munmap(p + len, tail);
#ifdef MADV_HUGEPAGE
    madvise(p, len, MADV_HUGEPAGE);   // a hint; without it the memory still works
#endif
    return p;   // anonymous memory comes zeroed
}

void bigmem_free(void *p, size_t bytes) {
    if (!p) return;
    if (bytes == 0) bytes = 1;
    if (bigmem_is_mapped(bytes)) munmap(p, round_up(bytes, HUGE_PAGE));
    else free(p);
}

float *bigmem_carve(float **const fields[], const size_t sizes[], int n, size_t *bytes) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += round_up(sizes[i], 16);   // 16 floats: a 64-byte line
    *bytes = total * sizeof(float);
    float *block = bigmem_alloc(*bytes);
    if (!block) return NULL;
    float *at = block;
    for (int i = 0; i < n; i++) {
        *fields[i] = at;
        at += round_up(sizes[i], 16);
    }
    return block;
}
