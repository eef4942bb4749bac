// kvsim — how much of a KV cache's memory holds real tokens: a seeded stream
// of requests served under a fixed budget of cache slots, with the cache
// reserved per request (the maximum length, the next power of two, the exact
// final length) or allocated block by block (paged).
//
// Legend: R requests, M the maximum length a request may reach, S the budget
// in slots (one slot = one position's keys and values of every layer),
// B positions per block.
#ifndef KVDEMO_KVSIM_H
#define KVDEMO_KVSIM_H

#include <stdint.h>

typedef struct {
    int prompt, output;   // tokens of the prompt, tokens generated; final length prompt + output <= M
} KvRequest;

// reqs (R) drawn with np.random.seed(seed): prompt and output lengths are
// each round(exp(N(log median, sigma))) with numpy's legacy normal draws,
// prompt first, clamped to 1 .. and their sum to at most M (a log-normal:
// most requests short, a long tail of long ones).
void kvsim_workload(KvRequest *reqs, int R, uint32_t seed, double prompt_median, double output_median,
                    double sigma, int M);

typedef enum { KVSIM_MAX, KVSIM_POW2, KVSIM_ORACLE, KVSIM_PAGED } KvPolicy;

// The slots a request holds while it holds `held` tokens (final length F):
// MAX reserves M, POW2 the next power of two >= F (at most M), ORACLE F,
// PAGED ceil(held / B) * B.
int64_t kvsim_reserved(KvPolicy policy, int held, int F, int M, int B);

typedef struct {
    double utilisation;   // tokens held / slots reserved, summed over every step of every request
    double never_used;    // share of reserved slots never written: over-reservation, or (paged) the
                          // empty slots of last blocks; the rest is reserved for tokens still to come
    int peak_running;     // most requests served at once under the budget
    double mean_running;  // requests served at once, averaged over the steps
    int64_t steps;        // steps until every request finished (one token per running request a step)
    int64_t preempted;    // paged: requests sent back to wait (their blocks freed, recomputed later)
} KvSimResult;

// Serves reqs (R) under a budget of S slots, first come first served: a
// waiting request starts when its reservation fits (paged: its prompt's
// blocks); each step every running request holds one token more, until its
// final length, then frees its slots. Paged: a request whose next token
// needs a block when none is free preempts the request started last (its
// blocks freed; it waits again and recomputes its prompt and tokens so far),
// as vLLM's recomputation does. The utilisation is counted from the moment
// a request holds its prompt (held = prompt) to its final token (held = F).
// Returns 0, or -1 when memory ran out.
int kvsim_run(KvSimResult *res, const KvRequest *reqs, int R, KvPolicy policy, int M, int B, int64_t S);

#endif
