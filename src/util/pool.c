// pool — a small pool of worker threads for parallel-for loops.
//
// One loop at a time. pool_run publishes (fn, ctx, count) with a new
// generation number; then the caller and the workers claim tasks one by one
// from a shared counter until none is left, and the caller waits until every
// claimed task is finished. Claiming (rather than a fixed slice per thread)
// matters on a shared machine: a worker that another program keeps off its
// core simply claims nothing, and the caller does the work instead of
// waiting for it.
//
// Waking a sleeping thread costs tens of microseconds here (more than a
// one-token matmul takes), so a thread that has just finished a loop first
// spins for a short while (POOL_SPIN_NS) watching for the next one: during a
// forward pass the loops follow each other within microseconds and nobody
// sleeps. Past that it sleeps on a condition variable, and an idle pool uses
// no CPU.
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { POOL_SPIN_NS = 200000 };   // 0.2 ms of spinning before sleeping
#define CLOSED UINT32_MAX           // "no task left" for any count

struct Pool {
    int n;                          // threads, the caller included
    pthread_t *workers;             // (n - 1)
    // The current loop, written by pool_run before it publishes claim.
    PoolFn fn;
    void *ctx;
    int items;                      // pool_run_slices: items cut into count slices (0: pool_run)
    atomic_int count;               // tasks of the current loop
    atomic_uint_fast64_t claim;     // generation << 32 | next unclaimed task;
                                    // next = CLOSED once the loop has ended
    atomic_int done;                // tasks of the current loop finished
    atomic_int quit;                // 1: workers exit
    // Sleeping: a thread announces itself in sleepers / caller_waits under
    // mu, then re-checks before waiting, so a wake-up cannot be missed.
    pthread_mutex_t mu;
    pthread_cond_t start;           // sleeping workers wait here
    pthread_cond_t finished;        // a sleeping caller waits here
    atomic_int sleepers;            // workers asleep (or about to be) on start
    atomic_int caller_waits;        // 1: the caller is asleep on finished
};

typedef struct {
    Pool *pool;
    int thread;                     // 1 .. n-1
} WorkerArg;

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static uint32_t generation_of(uint_fast64_t claim) {
    return (uint32_t)(claim >> 32);
}

static int new_loop(Pool *pool, uint32_t seen) {
    return generation_of(atomic_load(&pool->claim)) != seen || atomic_load(&pool->quit);
}

static int all_done(Pool *pool, uint32_t unused) {
    (void)unused;
    return atomic_load(&pool->done) == atomic_load(&pool->count);
}

// Spins until cond(pool, arg) holds or POOL_SPIN_NS pass; returns 1 if it held.
static int spin_until(int (*cond)(Pool *, uint32_t), Pool *pool, uint32_t arg) {
    long long deadline = 0;
    for (int i = 0;; i++) {
        if (cond(pool, arg)) return 1;
        cpu_relax();
        if ((i & 63) == 63) {
            long long t = now_ns();
            if (!deadline) deadline = t + POOL_SPIN_NS;
            else if (t > deadline) return 0;
        }
    }
}

// Claims and runs tasks of loop `generation` until none is left. A claim
// succeeds only while claim still reads (generation, task), that is while
// the loop is open, so count is this loop's.
static void run_tasks(Pool *pool, uint32_t generation, int thread) {
    for (;;) {
        uint_fast64_t c = atomic_load(&pool->claim);
        uint32_t task = (uint32_t)c;
        if (generation_of(c) != generation || task >= (uint32_t)atomic_load(&pool->count)) return;
        if (!atomic_compare_exchange_weak(&pool->claim, &c, c + 1)) continue;
        // The loop cannot end while this task is unfinished, so fn and ctx are its own.
        if (pool->items) {
            // slice `task` of pool_run_slices: the same items whoever runs it
            int n = atomic_load(&pool->count);
            int begin = (int)((int64_t)pool->items * task / n);
            int end = (int)((int64_t)pool->items * (task + 1) / n);
            if (begin < end) pool->fn(pool->ctx, begin, end, thread);
        } else {
            pool->fn(pool->ctx, (int)task, (int)task + 1, thread);
        }
        if (atomic_fetch_add(&pool->done, 1) + 1 == atomic_load(&pool->count) &&
            atomic_load(&pool->caller_waits)) {
            pthread_mutex_lock(&pool->mu);
            pthread_cond_signal(&pool->finished);
            pthread_mutex_unlock(&pool->mu);
        }
    }
}

static void *worker_main(void *arg) {
    WorkerArg *w = arg;
    Pool *pool = w->pool;
    int thread = w->thread;
    free(w);
    uint32_t seen = 0;
    for (;;) {
        if (!spin_until(new_loop, pool, seen)) {
            pthread_mutex_lock(&pool->mu);
            atomic_fetch_add(&pool->sleepers, 1);
            while (!new_loop(pool, seen)) pthread_cond_wait(&pool->start, &pool->mu);
            atomic_fetch_sub(&pool->sleepers, 1);
            pthread_mutex_unlock(&pool->mu);
        }
        if (atomic_load(&pool->quit)) break;
        seen = generation_of(atomic_load(&pool->claim));
        run_tasks(pool, seen, thread);
    }
    return NULL;
}

int pool_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

Pool *pool_new(int n) {
    if (n <= 0) n = pool_cores();
    Pool *pool = calloc(1, sizeof(Pool));
    if (!pool) return NULL;
    pool->n = n;
    pool->workers = calloc((size_t)n, sizeof(pthread_t));
    if (!pool->workers) {
        free(pool);
        return NULL;
    }
    atomic_init(&pool->count, 0);
    atomic_init(&pool->claim, CLOSED);
    atomic_init(&pool->done, 0);
    atomic_init(&pool->quit, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->caller_waits, 0);
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->start, NULL);
    pthread_cond_init(&pool->finished, NULL);
    for (int t = 1; t < n; t++) {
        WorkerArg *w = malloc(sizeof(WorkerArg));
        if (w) *w = (WorkerArg){pool, t};
        if (!w || pthread_create(&pool->workers[t - 1], NULL, worker_main, w) != 0) {
            free(w);
            pool->n = t;   // pool_free joins the workers started so far
            pool_free(pool);
            return NULL;
        }
    }
    return pool;
}

void pool_free(Pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    atomic_store(&pool->quit, 1);
    pthread_cond_broadcast(&pool->start);
    pthread_mutex_unlock(&pool->mu);
    for (int t = 1; t < pool->n; t++) pthread_join(pool->workers[t - 1], NULL);
    pthread_cond_destroy(&pool->finished);
    pthread_cond_destroy(&pool->start);
    pthread_mutex_destroy(&pool->mu);
    free(pool->workers);
    free(pool);
}

int pool_threads_for(long long work, int cores) {
    long long n = work / POOL_MIN_WORK;
    if (n > cores) n = cores;
    return n < 1 ? 1 : (int)n;
}

Pool *pool_new_for(int n, long long work) {
    return pool_new(n > 0 ? n : pool_threads_for(work, pool_cores()));
}

int pool_threads(const Pool *pool) {
    return pool ? pool->n : 1;
}

// Runs `count` tasks of fn; items > 0 makes each task a slice of items.
static void run_loop(Pool *pool, PoolFn fn, void *ctx, int count, int items) {
    pool->fn = fn;
    pool->ctx = ctx;
    pool->items = items;
    atomic_store(&pool->count, count);
    atomic_store(&pool->done, 0);
    uint32_t generation = generation_of(atomic_load(&pool->claim)) + 1;
    atomic_store(&pool->claim, (uint_fast64_t)generation << 32);   // publishes the loop
    if (atomic_load(&pool->sleepers) > 0) {
        pthread_mutex_lock(&pool->mu);
        pthread_cond_broadcast(&pool->start);
        pthread_mutex_unlock(&pool->mu);
    }
    run_tasks(pool, generation, 0);
    if (!spin_until(all_done, pool, 0)) {
        pthread_mutex_lock(&pool->mu);
        atomic_store(&pool->caller_waits, 1);
        while (!all_done(pool, 0)) pthread_cond_wait(&pool->finished, &pool->mu);
        atomic_store(&pool->caller_waits, 0);
        pthread_mutex_unlock(&pool->mu);
    }
    // Close the loop before the next one changes count: a worker still
    // looking at this generation must not take the new count for its own
    // and claim a task that does not exist.
    atomic_store(&pool->claim, (uint_fast64_t)generation << 32 | CLOSED);
}

void pool_run(Pool *pool, PoolFn fn, void *ctx, int count) {
    if (count <= 0) return;
    if (!pool || pool->n == 1 || count == 1) {
        fn(ctx, 0, count, 0);
        return;
    }
    run_loop(pool, fn, ctx, count, 0);
}

void pool_run_slices(Pool *pool, PoolFn fn, void *ctx, int count) {
    if (count <= 0) return;
    if (!pool || pool->n == 1 || count == 1) {
        fn(ctx, 0, count, 0);
        return;
    }
    // One slice per thread (fewer when there are fewer items than threads).
    run_loop(pool, fn, ctx, count < pool->n ? count : pool->n, count);
}
