// sampler — picking the next token as the numpy chapter does, draw for draw.
#include "sampler.h"

#include "ops.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// MT19937 (Matsumoto and Nishimura, 1998) with numpy's seeding and doubles.

enum { MT_N = 624, MT_M = 397 };
#define MT_MATRIX_A 0x9908b0dfu   // the twist's constant
#define MT_UPPER 0x80000000u      // the top bit of a word
#define MT_LOWER 0x7fffffffu      // the other 31

void mt19937_seed(Mt19937 *mt, uint32_t seed) {
    // init_genrand: key[i] = 1812433253 * (key[i-1] ^ (key[i-1] >> 30)) + i
    mt->key[0] = seed;
    for (int i = 1; i < MT_N; i++) {
        uint32_t prev = mt->key[i - 1];
        mt->key[i] = 1812433253u * (prev ^ (prev >> 30)) + (uint32_t)i;
    }
    mt->pos = MT_N;   // the first draw regenerates the whole block
    mt->has_gauss = 0;
    mt->gauss = 0.0;
}

// The twist: the next 624 words from the last 624.
static void mt19937_regenerate(Mt19937 *mt) {
    for (int i = 0; i < MT_N; i++) {
        uint32_t y = (mt->key[i] & MT_UPPER) | (mt->key[(i + 1) % MT_N] & MT_LOWER);
        uint32_t twisted = (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
        mt->key[i] = mt->key[(i + MT_M) % MT_N] ^ twisted;
    }
    mt->pos = 0;
}

uint32_t mt19937_next(Mt19937 *mt) {
    if (mt->pos >= MT_N) mt19937_regenerate(mt);
    uint32_t y = mt->key[mt->pos++];
    // tempering
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

// Compilers may fuse a multiply and an add of one expression into one FMA
// (clang does by default), which rounds once where numpy's build rounds
// twice; the arithmetic below is split into statements so that every
// operation rounds as in numpy.

double mt19937_random_sample(Mt19937 *mt) {
    uint32_t a = mt19937_next(mt) >> 5;   // 27 bits
    uint32_t b = mt19937_next(mt) >> 6;   // 26 bits
    double high = (double)a * 67108864.0;  // a * 2**26, exact
    return (high + (double)b) / 9007199254740992.0;   // / 2**53
}

double mt19937_gauss(Mt19937 *mt) {
    if (mt->has_gauss) {
        mt->has_gauss = 0;
        return mt->gauss;
    }
    // Marsaglia's polar method: a point uniform in the unit disc gives two
    // independent normals. numpy returns the second and keeps the first.
    double x1, x2, r2;
    do {
        x1 = 2.0 * mt19937_random_sample(mt);
        x1 -= 1.0;
        x2 = 2.0 * mt19937_random_sample(mt);
        x2 -= 1.0;
        double x1x1 = x1 * x1, x2x2 = x2 * x2;   // not fused: see above
        r2 = x1x1 + x2x2;
    } while (r2 >= 1.0 || r2 == 0.0);
    double f = sqrt(-2.0 * log(r2) / r2);
    mt->gauss = f * x1;
    mt->has_gauss = 1;
    return f * x2;
}

// ----------------------------------------------------------------------------
// The sampling step

float sampler_sum(const float *x, int n) {
    // numpy's pairwise summation for float32: short arrays in order, up to
    // 128 in eight running sums combined as a tree, longer ones split in two
    // halves whose first has a multiple of 8 elements.
    if (n < 8) {
        float sum = 0.0f;
        for (int i = 0; i < n; i++) sum += x[i];
        return sum;
    }
    if (n <= 128) {
        float r[8];
        for (int j = 0; j < 8; j++) r[j] = x[j];
        int i = 8;
        for (; i < n - n % 8; i += 8)
            for (int j = 0; j < 8; j++) r[j] += x[i + j];
        float sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) sum += x[i];
        return sum;
    }
    int half = n / 2;
    half -= half % 8;
    return sampler_sum(x, half) + sampler_sum(x + half, n - half);
}

static int compare_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

// The k-th largest of x (V), using scratch (V).
static float kth_largest(float *scratch, const float *x, int k, int V) {
    memcpy(scratch, x, sizeof(float) * (size_t)V);
    qsort(scratch, (size_t)V, sizeof(float), compare_desc);
    return scratch[k - 1];
}

void sampler_softmax(float *probs, float *scratch, const float *logits, float temperature, int top_k,
                     int V) {
    assert(temperature > 0.0f && V > 0);
    // logits / temperature (exact when temperature is 1, as in the chapter)
    for (int i = 0; i < V; i++) probs[i] = logits[i] / temperature;
    // A tiny temperature (a subnormal such as 1e-40) overflows logits /
    // temperature to infinity, and inf - inf below is NaN. Then the logits
    // are scaled after their max is subtracted, in double: every value is
    // <= 0 and the largest is 0, so the most likely token gets the weight.
    int overflow = 0;
    for (int i = 0; i < V; i++) overflow |= !isfinite(probs[i]);
    if (overflow) {
        float lmax = -INFINITY;
        for (int i = 0; i < V; i++) lmax = logits[i] > lmax ? logits[i] : lmax;
        for (int i = 0; i < V; i++) probs[i] = (float)(((double)logits[i] - lmax) / temperature);
    }
    float threshold = -INFINITY;
    if (top_k > 0 && top_k < V) threshold = kth_largest(scratch, probs, top_k, V);
    // exp = np.exp(last_logits - np.max(last_logits))
    float max = -INFINITY;
    for (int i = 0; i < V; i++)
        if (probs[i] > max) max = probs[i];
    for (int i = 0; i < V; i++) probs[i] = probs[i] >= threshold ? expf(probs[i] - max) : 0.0f;
    // probs = exp / np.sum(exp)
    float sum = sampler_sum(probs, V);
    for (int i = 0; i < V; i++) probs[i] /= sum;
}

int sampler_choice(Mt19937 *mt, double *cdf, const float *probs, int V) {
    // cdf = p.cumsum(); cdf /= cdf[-1]
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        sum += (double)probs[i];
        cdf[i] = sum;
    }
    for (int i = 0; i < V; i++) cdf[i] /= cdf[V - 1];
    // uniform_samples = self.random_sample(); cdf.searchsorted(u, side='right')
    double u = mt19937_random_sample(mt);
    int lo = 0, hi = V;   // the first i with cdf[i] > u lies in lo .. hi
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cdf[mid] <= u) lo = mid + 1;
        else hi = mid;
    }
    return lo < V ? lo : V - 1;   // u < 1 = cdf[V-1], so lo < V; kept safe anyway
}

int sampler_init(Sampler *s, int V, float temperature, int top_k, uint32_t seed) {
    memset(s, 0, sizeof(*s));
    s->V = V;
    s->temperature = temperature;
    s->top_k = top_k;
    s->probs = malloc(sizeof(float) * (size_t)V);
    s->scratch = malloc(sizeof(float) * (size_t)V);
    s->cdf = malloc(sizeof(double) * (size_t)V);
    if (!s->probs || !s->scratch || !s->cdf) {
        sampler_free(s);
        return -1;
    }
    mt19937_seed(&s->rng, seed);
    return 0;
}

void sampler_free(Sampler *s) {
    free(s->probs);
    free(s->scratch);
    free(s->cdf);
    s->probs = NULL;
    s->scratch = NULL;
    s->cdf = NULL;
}

int sampler_sample(Sampler *s, const float *logits) {
    if (s->temperature <= 0.0f) {
        int best = ops_argmax(logits, s->V);
        for (int i = 0; i < s->V; i++) s->probs[i] = i == best ? 1.0f : 0.0f;
        return best;
    }
    sampler_softmax(s->probs, s->scratch, logits, s->temperature, s->top_k, s->V);
    return sampler_choice(&s->rng, s->cdf, s->probs, s->V);
}
