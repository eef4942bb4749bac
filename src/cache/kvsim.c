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

int kvsim_run(KvSimResult *res, const KvRequest *reqs, int R, KvPolicy policy, int M, int B, int64_t S) {
    memset(res, 0, sizeof *res);
    int *queue = malloc(sizeof(int) * (size_t)(R > 0 ? R : 1));          // waiting, in order
    Running *run = malloc(sizeof(Running) * (size_t)(R > 0 ? R : 1));    // running, in start order
    if (!queue || !run) {
        free(queue);
        free(run);
        return -1;
    }
    int *resume = malloc(sizeof(int) * (size_t)(R > 0 ? R : 1));         // tokens a request starts with
    if (!resume) {
        free(queue);
        free(run);
        return -1;
    }
    int nq = R, nr = 0, done = 0;
    for (int r = 0; r < R; r++) queue[r] = r, resume[r] = reqs[r].prompt;
    int64_t free_slots = S, tokens = 0, reserved = 0, never = 0, running_sum = 0;
    while (done < R) {
        // Start waiting requests, first come first served, while they fit.
        while (nq > 0) {
            const KvRequest *q = &reqs[queue[0]];
            int F = q->prompt + q->output;
            int64_t need = kvsim_reserved(policy, resume[queue[0]], F, M, B);
            if (need > free_slots) break;
            free_slots -= need;
            run[nr++] = (Running){queue[0], resume[queue[0]], need};
            memmove(queue, queue + 1, sizeof(int) * (size_t)--nq);
        }
        if (nr == 0) break;   // the head cannot fit even alone: the budget is too small
        // Count this step: what each running request holds and reserves.
        for (int i = 0; i < nr; i++) {
            const KvRequest *q = &reqs[run[i].req];
            int F = q->prompt + q->output;
            tokens += run[i].held;
            reserved += run[i].slots;
            never += policy == KVSIM_PAGED ? run[i].slots - run[i].held : run[i].slots - F;
        }
        running_sum += nr;
        if (nr > res->peak_running) res->peak_running = nr;
        res->steps++;
        // Requests that held their final token finish and free their slots.
        for (int i = 0; i < nr;) {
            const KvRequest *q = &reqs[run[i].req];
            if (run[i].held < q->prompt + q->output) {
                i++;
                continue;
            }
            free_slots += run[i].slots;
            memmove(run + i, run + i + 1, sizeof(Running) * (size_t)(nr - i - 1));
            nr--;
            done++;
        }
        // Every other one gets its next token.
        for (int i = 0; i < nr; i++) {
            if (policy == KVSIM_PAGED && run[i].held % B == 0) {
                // A new block: if none is free, preempt the request started
                // last; its next token comes out of the recomputation when it
                // starts again.
                int self = 0;
                while (free_slots < B && !self) {
                    Running *last = &run[nr - 1];
                    self = nr - 1 == i;
                    free_slots += last->slots;
                    resume[last->req] = last->held + 1;
                    memmove(queue + 1, queue, sizeof(int) * (size_t)nq++);
                    queue[0] = last->req;
                    nr--;
                    res->preempted++;
                }
                if (self) break;
                free_slots -= B;
                run[i].slots += B;
            }
            run[i].held++;
        }
    }
    res->utilisation = reserved ? (double)tokens / (double)reserved : 0;
    res->never_used = reserved ? (double)never / (double)reserved : 0;
    res->mean_running = res->steps ? (double)running_sum / (double)res->steps : 0;
    free(queue);
    free(run);
    free(resume);
    return done == R ? 0 : -1;
}
