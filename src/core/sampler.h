// sampler — picking the next token from the last logits, draw for draw as
// the numpy chapter does it:
//
//     exp = np.exp(last_logits - np.max(last_logits))    # float32
//     probs = exp / np.sum(exp)                           # float32
//     token = np.random.choice(len(probs), p=probs)
//
// after np.random.seed(42). The random numbers come from numpy's legacy
// RandomState: the Mersenne Twister MT19937 seeded as numpy seeds it from an
// integer, and random_sample's 53-bit doubles. np.random.choice turns p into
// doubles, takes their cumulative sum, divides it by its last entry and
// returns the first index whose cumulative sum is above one uniform draw
// (searchsorted, side='right'). np.sum of float32 adds pairwise, in numpy's
// own order; sampler_sum does the same so the probabilities match.
//
// Legend of dimension letters: V vocabulary size (the length of logits).
#ifndef KVDEMO_SAMPLER_H
#define KVDEMO_SAMPLER_H

#include <stdint.h>

// ----------------------------------------------------------------------------
// numpy's legacy RandomState

typedef struct {
    uint32_t key[624];   // the Mersenne Twister's state
    int pos;             // next word of key to temper; 624: regenerate first
    int has_gauss;       // 1: gauss holds the second normal of the last pair
    double gauss;
} Mt19937;

// np.random.seed(seed) for an integer seed 0 .. 2**32-1 (init_genrand).
void mt19937_seed(Mt19937 *mt, uint32_t seed);
// The next raw 32-bit output. np.random.randint(2**32, dtype=np.uint32)
uint32_t mt19937_next(Mt19937 *mt);
// A double uniform in [0, 1) with 53 random bits, from two outputs a, b:
// ((a >> 5) * 67108864 + (b >> 6)) / 9007199254740992.  np.random.random_sample()
double mt19937_random_sample(Mt19937 *mt);
// A standard normal by the polar method, the second of each pair kept for the
// next call, as numpy's legacy gauss. np.random.standard_normal()
// (np.random.normal(loc, scale) is loc + scale * this.)
double mt19937_gauss(Mt19937 *mt);

// ----------------------------------------------------------------------------
// The chapter's sampling step

// Sum of x (n) in float32 in numpy's pairwise order (blocks of up to 128
// added in 8 running sums, larger arrays halved). np.sum(x) for float32 x.
float sampler_sum(const float *x, int n);

// probs (V) = softmax of logits (V) / temperature, restricted to the top_k
// largest (top_k <= 0 or >= V: all). With temperature 1 and no top-k this is
// the chapter's two lines above. Entries outside the top k get probability
// 0 (ties with the k-th largest are kept). temperature must be > 0; scratch
// (V) is used only with a top-k and may be NULL without one.
void sampler_softmax(float *probs, float *scratch, const float *logits, float temperature, int top_k,
                     int V);

// np.random.choice(V, p=probs): one uniform draw, the index of the first
// normalised cumulative sum above it. cdf (V) is scratch.
int sampler_choice(Mt19937 *mt, double *cdf, const float *probs, int V);

typedef struct {
    Mt19937 rng;         // numpy's np.random state
    float temperature;   // 1: the chapter; 0: always the argmax (no draw)
    int top_k;           // 0: every token may be drawn
    int V;
    float *probs;        // (V) the last step's probabilities
    float *scratch;      // (V) for the top-k threshold
    double *cdf;         // (V) np.random.choice's cumulative sum
} Sampler;

// Allocates the sampler's buffers for V tokens and seeds its generator
// (np.random.seed(seed)). Returns 0, or -1 when memory ran out.
int sampler_init(Sampler *s, int V, float temperature, int top_k, uint32_t seed);
void sampler_free(Sampler *s);
// The next token for these logits (V). Probabilities are left in s->probs
// (with temperature 0: a one-hot on the argmax).
int sampler_sample(Sampler *s, const float *logits);

#endif
