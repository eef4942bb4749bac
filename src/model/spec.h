// spec — speculative decoding (Leviathan et al. 2023, Chen et al. 2023) on
// the char GPT: a small draft model proposes K tokens, one cached step at a
// time; the target model checks them in one pass of K + 1 rows appended to
// its cache; the accepted prefix stays, the rest of both caches is cut back
// (kvcache_truncate, kvseq_truncate), and the target's own token at the
// first rejection (or the bonus token after K acceptances) is appended.
//
// Legend of dimension letters:
//   V vocabulary (the target's and the draft's: the same)
//   K drafted tokens per round (gamma)     T the target's context
//
// Greedy (temperature 0): a drafted token is kept when it is the target's
// argmax at that row. A row of the verifying pass has the same bits as a
// cached step of one row (ops.h, gpt.h), so the text is the target's own
// greedy text, byte for byte, whatever the draft proposes.
//
// Sampling: the rejection rule of Leviathan / Chen. With p the target's and
// q the draft's probabilities at a row (the same temperature and top-k), a
// drafted token x is kept with probability min(1, p(x) / q(x)); on the first
// rejection the token is drawn from max(0, p - q) normalised; after K
// acceptances the bonus token is drawn from p. The tokens then follow the
// target's distribution exactly (tests/test_spec.c enumerates it).
//
// The cache lengths: before a round the target holds the positions of every
// token but the last (len - 1, as gpt_generate's cached step), the draft
// at most as many. Draft: len - 1 + K. Verify: len + K. After the round,
// with a tokens accepted, both keep len + a positions (the draft no more
// than it has), and len(tokens) = len + a + 1.
//
// The context: a round runs while its last fed position is inside the
// target's context (len + K <= T); once the text outgrows T, the rest is
// gpt_generate's, which recomputes the last T tokens each step as the
// chapter does.
#ifndef KVDEMO_SPEC_H
#define KVDEMO_SPEC_H

#include "gpt.h"
#include "kvpage.h"
#include "sampler.h"

enum { SPEC_GAMMA_MAX = 16 };

// The draws of sampling, behind two functions, so that a test can walk
// every branch with its exact probability instead of drawing.
typedef struct SpecRandom SpecRandom;
struct SpecRandom {
    // A token drawn from w (V), weights >= 0 whose sum is > 0 (normalised
    // by the draw).
    int (*choose)(SpecRandom *r, const float *w, int V);
    // 1 with probability prob (0 .. 1).
    int (*accept)(SpecRandom *r, double prob);
};
// The draws of a Sampler's generator (numpy's RandomState): choose is
// np.random.choice, accept is random_sample() < prob.
typedef struct {
    SpecRandom base;
    Sampler *sampler;
} SpecMt;
void spec_mt_init(SpecMt *r, Sampler *sampler);

// One model and the cache it runs on.
typedef struct {
    const GptModel *m;
    GptState *s;
    KvSeq *seq;   // NULL: the state's contiguous cache; else this paged sequence
} SpecModel;

// What one round did, for a caller that shows it.
typedef struct {
    int round;                       // 0, 1, ...
    int len;                         // len(tokens) before the round
    int gamma;                       // tokens drafted (K, fewer near the end)
    int drafted[SPEC_GAMMA_MAX];     // the draft's tokens
    int target_tok[SPEC_GAMMA_MAX + 1]; // the token the target gives at each verifying row (greedy: argmax;
                                     // sampling: -1 past the row that decided)
    int accepted;                    // drafted tokens kept, 0 .. gamma
    int token;                       // appended after them: the target's at the rejection, or the bonus
    int target_before, target_verify, target_after;   // the target's cache length
    int draft_before, draft_drafted, draft_after;     // the draft's
    int fed;                         // rows the verifying pass fed (gamma + 1, more in the first round)
    const float *rows;               // (gamma + 1, V) the target's logits at the verifying rows
} SpecRound;
// Called after every round; nonzero stops the generation.
typedef int (*SpecRoundFn)(void *ctx, const SpecRound *r);

typedef struct {
    int rounds;        // rounds run
    int drafted;       // tokens drafted
    int accepted;      // drafted tokens kept
    int rejected;      // rounds that ended on a rejection
    int tokens;        // tokens the rounds added (accepted + one per round)
    int plain_steps;   // steps left to gpt_generate past the context
} SpecStats;

typedef struct {
    SpecModel target, draft;
    int gamma;              // K, 1 .. SPEC_GAMMA_MAX
    Sampler *sampler;       // the target's: temperature (0: greedy), top-k; past the context, its draws
    SpecRandom *rnd;        // sampling's draws (unused when greedy)
    SpecStats stats;
    float *rows;            // (K+1, V) the target's logits at the verifying rows
    float *p;               // (K+1, V) the target's probabilities there
    float *q;               // (K, V) the draft's probabilities of its K steps
    float *resid;           // (V) max(0, p - q)
    float *xn;              // (C) the final LayerNorm of one row
} Spec;

// Checks that the draft fits the target: the same vocabulary, a context at
// least the target's, and 1 <= gamma <= SPEC_GAMMA_MAX. Returns 0, or -1
// with err naming the mismatch in err's language.
int spec_check(const GptModel *target, const GptModel *draft, int gamma, Err err);

// What spec_check asks of any draft and target (the LLaMA pair's check uses
// it too): the vocabularies the same, the draft's context at least the
// target's, and gamma in 1 .. SPEC_GAMMA_MAX. unit: what a vocabulary
// entry is called in the message ("characters" / "字符", "tokens" / "token").
typedef struct {
    int same_vocab, draft_V, target_V, draft_T, target_T;
    const char *unit_en, *unit_zh;
} SpecPair;
int spec_check_pair(const SpecPair *pr, int gamma, Err err);
// Reserves the scratch for target and draft (states and caches are the
// caller's, fresh or reset). Returns 0, or -1 when memory ran out.
int spec_init(Spec *sp, SpecModel target, SpecModel draft, int gamma, Sampler *sampler, SpecRandom *rnd);
void spec_free(Spec *sp);

// tokens holds n_prompt >= 1 prompt tokens and has room for n_prompt +
// steps: the speculative rounds, then gpt_generate's steps past the context,
// append steps tokens. Returns len(tokens) at the end, or -1 when a paged
// pool ran out of blocks (or on_round stopped it: then the length so far).
int spec_generate(int *tokens, Spec *sp, int n_prompt, int steps, SpecRoundFn on_round, void *ctx);

// The rejection rule of Leviathan / Chen on one round's probabilities, for
// any pair of models: P (K+1, V) the target's at the verifying rows, Q (K, V)
// the draft's at its K steps, drafted (K) the draft's tokens. Returns a, the
// drafted tokens kept; *token gets the one after them (from max(0, p - q)
// normalised at the first rejection; from P's row K after K acceptances);
// target_tok[j] (K+1) the token decided at row j, -1 past it. resid (V) scratch.
int spec_sample_rule(int *token, int *target_tok, float *resid, const float *P, const float *Q, const int *drafted,
                     int K, int V, SpecRandom *r);

// The cache of m keeps positions 0 .. len-1: the rollback of a round, on
// the contiguous cache (kvcache_truncate) or the paged one (kvseq_truncate:
// blocks no longer needed go back to the free list).
void spec_rollback(SpecModel *m, int len);

// α, the share of drafted tokens kept among those the target judged
// (accepted / (accepted + rejected)), and Leviathan et al.'s expected
// tokens per round, (1 - α^(K+1)) / (1 - α), and expected speed-up over
// plain decoding, (1 - α^(K+1)) / ((1 - α)(K c + 1)), for a draft step that
// costs c target steps.
double spec_alpha(const SpecStats *st);
double spec_expected_tokens(double alpha, int K);
double spec_expected_speedup(double alpha, int K, double c);

#endif
