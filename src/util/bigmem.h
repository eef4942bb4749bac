// bigmem — memory for the big arrays (a model's weights, a sequence's
// activations and cache), backed by huge pages where the system offers them.
//
// Why: a 42 MB model read into ordinary memory takes one page fault per 4 KB
// page the first time each is touched — about 10,000 of them, most of the
// time it takes to open the model. In 2 MB pages it takes 21, and the
// matmuls that stream those weights miss the TLB far less often.
//
// Arrays of 2 MB or more get an anonymous mapping aligned to 2 MB, with
// madvise(MADV_HUGEPAGE) (a hint: the kernel may still use 4 KB pages, and
// the memory works the same). Smaller ones come from aligned_alloc, where
// the sanitizers can watch them. Either way the memory is zeroed and
// aligned to 64 bytes.
#ifndef KVDEMO_BIGMEM_H
#define KVDEMO_BIGMEM_H

#include <stddef.h>

// bytes of zeroed memory aligned to 64 bytes (to 2 MB from 2 MB up).
// Returns NULL when there is no memory.
void *bigmem_alloc(size_t bytes);
// Frees what bigmem_alloc(bytes) returned; bytes must be the same.
// bigmem_free(NULL, any) does nothing.
void bigmem_free(void *p, size_t bytes);
// Several float arrays in one bigmem_alloc: array i, sizes[i] floats, at
// *fields[i], in order, each on its own 64-byte line. *bytes gets the size to
// pass to bigmem_free(block). Returns the block, or NULL when there is no
// memory (the fields are then left as they were).
float *bigmem_carve(float **const fields[], const size_t sizes[], int n, size_t *bytes);
// 1 when an array of this size gets its own huge-page mapping.
int bigmem_is_mapped(size_t bytes);

#endif
