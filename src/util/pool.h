// pool — a small pool of worker threads for parallel-for loops.
//
// The pool is made once (pool_new) with N threads counting the caller: the
// caller takes part in every loop, so a pool of 1 starts no thread at all and
// runs everything on the calling thread. pool_run hands out the task indices
// of a loop one at a time to whichever thread is free (a thread kept busy by
// another program simply takes fewer) and returns when all are done.
// Nothing is allocated per call, so a forward pass can run hundreds of loops
// per token.
//
// Between loops a worker spins for 0.2 ms, then sleeps on a condition
// variable: an idle pool uses no CPU.

#ifndef KVDEMO_POOL_H
#define KVDEMO_POOL_H

// Runs tasks begin .. end-1 of a loop; thread is 0 .. pool_threads()-1.
typedef void (*PoolFn)(void *ctx, int begin, int end, int thread);

typedef struct Pool Pool;

// A pool of n threads (the caller plus n-1 workers); n <= 0 means one per
// online core. Returns NULL when threads or memory could not be had.
Pool *pool_new(int n);
// Stops and joins the workers. pool_free(NULL) does nothing.
void pool_free(Pool *pool);
// Number of threads, the caller included.
int pool_threads(const Pool *pool);
// fn(ctx, begin, end, thread) over tasks 0 .. count-1: each call gets one
// task (end = begin + 1) on some thread, in no set order; returns when every
// task has run. A NULL pool (or one thread, or one task) runs
// fn(ctx, 0, count, 0) on the caller.
// Not reentrant: fn must not call pool_run on the same pool.
void pool_run(Pool *pool, PoolFn fn, void *ctx, int count);
// The same loop cut into one contiguous slice of tasks per thread:
// fn(ctx, begin, end, thread) gets a whole slice, the same slices for the
// same count every time (which thread takes a slice is still free). For
// loops whose neighbouring tasks share data (the rows of a training matmul
// reuse one block of weights), and whose results must not depend on the
// number of threads beyond the slicing: training cuts its reductions into
// fixed chunks, never into slices.
void pool_run_slices(Pool *pool, PoolFn fn, void *ctx, int count);

// Number of online cores (at least 1).
int pool_cores(void);

// What --threads 0 means: the thread count for a model whose largest matrix
// product of one token (one row: the cached step's fc1, C x 4C for the char
// GPT) does work multiply-adds, on a machine of cores cores. A thread is
// worth waking only for a share of at least POOL_MIN_WORK multiply-adds
// (about 18 µs of one core here): below it the hand-off between threads
// costs more than it saves, and one thread is the fastest. Returns
// work / POOL_MIN_WORK, at least 1 and at most cores: 1 for tiny, the draft
// and the LLaMA-style models, every core of two to four for the 42 MB char
// GPT (C = 384: 589,824).
enum { POOL_MIN_WORK = 131072 };
int pool_threads_for(long long work, int cores);
// pool_new(n) for n > 0; for n <= 0 (--threads 0) a pool of
// pool_threads_for(work, pool_cores()) threads.
Pool *pool_new_for(int n, long long work);

#endif
