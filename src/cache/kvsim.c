// kvsim — a seeded workload of requests served under a fixed cache budget,
// and how much of the reserved cache holds real tokens under each policy.
//
// Legend: R requests, M maximum length, S budget in slots, B block size.
#include "kvsim.h"

#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void kvsim_workload(KvRequest *reqs, int R, uint32_t seed, double prompt_median, double output_median,
                    double sigma, int M) {
    Mt19937 mt;
    mt19937_seed(&mt, seed);
    for (int r = 0; r < R; r++) {
        // np.exp(np.random.normal(np.log(median), sigma)), rounded
        double p = round(exp(log(prompt_median) + sigma * mt19937_gauss(&mt)));
        double o = round(exp(log(output_median) + sigma * mt19937_gauss(&mt)));
        if (p < 1) p = 1;
        if (p > M - 1) p = M - 1;
        if (o < 1) o = 1;
        if (p + o > M) o = M - p;
        reqs[r].prompt = (int)p;
        reqs[r].output = (int)o;
    }
}

int64_t kvsim_reserved(KvPolicy policy, int held, int F, int M, int B) {
    switch (policy) {
    case KVSIM_MAX: return M;
    case KVSIM_POW2: {
        int64_t r = 1;
        while (r < F) r *= 2;
        return r < M ? r : M;
    }
    case KVSIM_ORACLE: return F;
    case KVSIM_PAGED: return (int64_t)(held + B - 1) / B * B;
    }
    return 0;
}

typedef struct {
    int req;        // index into reqs
    int held;       // tokens held
    int64_t slots;  // slots reserved
} Running;

// One run of the simulation: the requests waiting and running, the slots
// free, and the sums the result is made of.
typedef struct {
    const KvRequest *reqs;
    KvPolicy policy;
    int M, B;
    int *queue;      // (R) waiting, in order: nq of them
    Running *run;    // (R) running, in start order: nr of them
    int *resume;     // (R) the tokens each request starts (again) with
    int nq, nr, done;
    int64_t free_slots, tokens, reserved, never, running_sum;
} Sim;

// Starts waiting requests, first come first served, while they fit.
static void sim_admit(Sim *m) {
    while (m->nq > 0) {
        const KvRequest *q = &m->reqs[m->queue[0]];
        int F = q->prompt + q->output;
        int64_t need = kvsim_reserved(m->policy, m->resume[m->queue[0]], F, m->M, m->B);
        if (need > m->free_slots) break;
        m->free_slots -= need;
        m->run[m->nr++] = (Running){m->queue[0], m->resume[m->queue[0]], need};
        memmove(m->queue, m->queue + 1, sizeof(int) * (size_t)--m->nq);
    }
}

// Counts this step: what each running request holds and reserves.
static void sim_count(Sim *m, KvSimResult *res) {
    for (int i = 0; i < m->nr; i++) {
        const KvRequest *q = &m->reqs[m->run[i].req];
        int F = q->prompt + q->output;
        m->tokens += m->run[i].held;
        m->reserved += m->run[i].slots;
        m->never += m->policy == KVSIM_PAGED ? m->run[i].slots - m->run[i].held : m->run[i].slots - F;
    }
    m->running_sum += m->nr;
    if (m->nr > res->peak_running) res->peak_running = m->nr;
    res->steps++;
}

// Requests that held their final token finish and free their slots.
static void sim_finish(Sim *m) {
    for (int i = 0; i < m->nr;) {
        const KvRequest *q = &m->reqs[m->run[i].req];
        if (m->run[i].held < q->prompt + q->output) {
            i++;
            continue;
        }
        m->free_slots += m->run[i].slots;
        memmove(m->run + i, m->run + i + 1, sizeof(Running) * (size_t)(m->nr - i - 1));
        m->nr--;
        m->done++;
    }
}

// Every other one gets its next token. A paged request that needs a new
// block when none is free preempts the request started last; its next
// token comes out of the recomputation when it starts again.
static void sim_grow(Sim *m, KvSimResult *res) {
    for (int i = 0; i < m->nr; i++) {
        if (m->policy == KVSIM_PAGED && m->run[i].held % m->B == 0) {
            int self = 0;
            while (m->free_slots < m->B && !self) {
                Running *last = &m->run[m->nr - 1];
                self = m->nr - 1 == i;
                m->free_slots += last->slots;
                m->resume[last->req] = last->held + 1;
                memmove(m->queue + 1, m->queue, sizeof(int) * (size_t)m->nq++);
                m->queue[0] = last->req;
                m->nr--;
                res->preempted++;
            }
            if (self) break;
            m->free_slots -= m->B;
            m->run[i].slots += m->B;
        }
        m->run[i].held++;
    }
}

int kvsim_run(KvSimResult *res, const KvRequest *reqs, int R, KvPolicy policy, int M, int B, int64_t S) {
    memset(res, 0, sizeof *res);
    size_t n = (size_t)(R > 0 ? R : 1);
    Sim m = {.reqs = reqs, .policy = policy, .M = M, .B = B, .nq = R, .free_slots = S};
    m.queue = malloc(sizeof(int) * n);
    m.run = malloc(sizeof(Running) * n);
    m.resume = malloc(sizeof(int) * n);
    if (!m.queue || !m.run || !m.resume) {
        free(m.queue);
        free(m.run);
        free(m.resume);
        return -1;
    }
    for (int r = 0; r < R; r++) m.queue[r] = r, m.resume[r] = reqs[r].prompt;
    while (m.done < R) {
        sim_admit(&m);
        if (m.nr == 0) break;   // the head cannot fit even alone: the budget is too small
        sim_count(&m, res);
        sim_finish(&m);
        sim_grow(&m, res);
    }
    res->utilisation = m.reserved ? (double)m.tokens / (double)m.reserved : 0;
    res->never_used = m.reserved ? (double)m.never / (double)m.reserved : 0;
    res->mean_running = res->steps ? (double)m.running_sum / (double)res->steps : 0;
    free(m.queue);
    free(m.run);
    free(m.resume);
    return m.done == R ? 0 : -1;
}
