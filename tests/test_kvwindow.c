// test_kvwindow — lesson 14's caches for long text (kvcache_window.c): the
// rolling buffer of W rows and S sinks + a window, across several wraps.
//
//   test_rows_kept_across_wraps       after every position of a text 4 W long, each
//                                     slot holds the position the rule says (rolling:
//                                     p mod W; sinks: p < S in slot p, else S + (p - S)
//                                     mod (W - S)), read from the arrays themselves
//   test_attend_matches_plain_loops   every output and head 0's weights within 1e-5 of
//                                     double loops over exactly the positions claimed
//                                     (the sinks, then the last W - S), 0 elsewhere;
//                                     the sink weight summed per layer and head
//   test_rolling_equals_band_mask     the rolling buffer of W rows against the
//                                     preallocated cache of the whole text under the band
//                                     mask of W: bit for bit at every step, 4 wraps
//   test_bytes_capped_at_w            2 L B W G D floats, however long the text
#include "testutil.h"

#include "kvcache.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Numbers in [-1, 1) from a 64-bit LCG (Knuth's MMIX constants), 24 bits each.
static float next_float(uint64_t *state) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(*state >> 40) / (double)(1 << 24) * 2.0 - 1.0);
}

static void fill(float *x, size_t n, uint64_t *state) {
    for (size_t i = 0; i < n; i++) x[i] = next_float(state);
}

// The positions a query at p may read, as issue 27 words the two rules: a
// rolling buffer keeps the last W; sinks + window the first S and the last
// W - S. held (W); returns how many.
static int claimed(int *held, int p, int W, int S) {
    int n = 0;
    for (int j = 0; j <= p; j++)
        if (j < S || j > p - (W - S)) held[n++] = j;
    return n;
}

static const int WINDOWS[][2] = {{5, 0}, {6, 2}, {7, 1}, {8, 4}};   // (W, S)
enum { NUM_WINDOWS = sizeof WINDOWS / sizeof WINDOWS[0] };

// k of position p, layer l, head g, dim d: 1000 p + 100 l + 10 g + d; v the negative.
static void test_rows_kept_across_wraps(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WINDOWS; w++) {
        int W = WINDOWS[w][0], S = WINDOWS[w][1];
        KvShape s = {.L = 2, .B = 1, .T = W, .H = 2, .G = 2, .D = 3};
        KvWindow c;
        assert_int_equal(kvwindow_init(&c, s, S), 0);
        assert_string_equal(c.base.kind->name, S ? "sinks" : "rolling");
        int GD = s.G * s.D;
        float k[6], v[6];
        for (int p = 0; p < 4 * W; p++) {
            for (int l = 0; l < s.L; l++) {
                for (int e = 0; e < GD; e++) k[e] = (float)(1000 * p + 100 * l + 10 * (e / s.D) + e % s.D), v[e] = -k[e];
                kvcache_append(&c.base, l, k, v, 1, 1, p);
            }
            assert_int_equal(kvcache_len(&c.base), p + 1);
            int held[16], n = claimed(held, p, W, S);
            int got[16];
            assert_int_equal(kvwindow_positions(got, &c, p), n);
            for (int i = 0; i < n; i++) {
                if (got[i] != held[i])
                    fail_msg("W %d S %d at p %d: position [%d] expected %d, got %d", W, S, p, i, held[i], got[i]);
                // the slot's rule, written again here
                int want_slot = S == 0 ? held[i] % W : held[i] < S ? held[i] : S + (held[i] - S) % (W - S);
                if (kvwindow_slot(&c, held[i]) != want_slot)
                    fail_msg("W %d S %d: position %d expected in slot %d, got %d", W, S, held[i], want_slot,
                             kvwindow_slot(&c, held[i]));
                for (int l = 0; l < s.L; l++)
                    for (int e = 0; e < GD; e++) {
                        float want = (float)(1000 * held[i] + 100 * l + 10 * (e / s.D) + e % s.D);
                        size_t at = (((size_t)l * s.B * W) + (size_t)want_slot) * GD + (size_t)e;
                        if (c.cache_k[at] != want || c.cache_v[at] != -want)
                            fail_msg("W %d S %d at p %d: slot %d [l %d][%d] expected %g, got %g and %g", W, S, p,
                                     want_slot, l, e, want, c.cache_k[at], c.cache_v[at]);
                    }
            }
        }
        kvcache_free(&c.base);
    }
}

// out (n, H*D) and head 0's weights (n, pos+n) in double over the claimed
// positions of each row, from every position's k, v (P, G*D) kept here.
static void plain_attend(double *out, double *weights, const float *K, const float *V, const float *q, int n,
                         int pos, int W, int S, int H, int G, int D) {
    int Sn = pos + n, held[64];
    for (int i = 0; i < n; i++) {
        int cnt = claimed(held, pos + i, W, S);
        for (int h = 0; h < H; h++) {
            int g = h / (H / G);
            const float *qi = q + ((size_t)i * H + h) * D;
            double p[64], max = -INFINITY, sum = 0;
            for (int j = 0; j < cnt; j++) {
                double dot = 0;
                for (int d = 0; d < D; d++) dot += (double)qi[d] * K[((size_t)held[j] * G + g) * D + d];
                p[j] = dot / sqrt((double)D);
                if (p[j] > max) max = p[j];
            }
            for (int j = 0; j < cnt; j++) sum += p[j] = exp(p[j] - max);
            double *o = out + ((size_t)i * H + h) * D;
            for (int d = 0; d < D; d++) o[d] = 0;
            if (h == 0)
                for (int j = 0; j < Sn; j++) weights[(size_t)i * Sn + j] = 0;
            for (int j = 0; j < cnt; j++) {
                if (h == 0) weights[(size_t)i * Sn + held[j]] = p[j] / sum;
                for (int d = 0; d < D; d++) o[d] += p[j] / sum * V[((size_t)held[j] * G + g) * D + d];
            }
        }
    }
}

static void expect_near(const float *got, const double *want, size_t n, const char *what, int pos) {
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= 1e-5))
            fail_msg("%s, at position %d, [%zu]: expected %.9g, got %.9g", what, pos, i, want[i], got[i]);
}

static void test_attend_matches_plain_loops(void **state) {
    (void)state;
    enum { H = 4, G = 2, D = 4, P = 40 };
    for (int w = 0; w < NUM_WINDOWS; w++) {
        int W = WINDOWS[w][0], S = WINDOWS[w][1];
        KvShape s = {.L = 1, .B = 1, .T = W, .H = H, .G = G, .D = D};
        KvWindow c;
        assert_int_equal(kvwindow_init(&c, s, S), 0);
        static float K[P * G * D], V[P * G * D], q[P * H * D], out[P * H * D], wts[P * P];
        static double want[P * H * D], want_w[P * P];
        uint64_t rng = 11 + (uint64_t)w;
        fill(K, sizeof K / sizeof K[0], &rng);
        fill(V, sizeof V / sizeof V[0], &rng);
        fill(q, sizeof q / sizeof q[0], &rng);
        char what[96];
        snprintf(what, sizeof what, "%s cache W %d S %d", S ? "sinks" : "rolling", W, S);
        // a prompt of W - 1 positions in one chunk, then one at a time
        double sink = 0, sink_want = 0;
        for (int pos = 0; pos < P;) {
            int n = pos == 0 ? W - 1 : 1;
            kvcache_append(&c.base, 0, K + (size_t)pos * G * D, V + (size_t)pos * G * D, 1, n, pos);
            kvcache_attend(&c.base, out, wts, q + (size_t)pos * H * D, NULL, 0, 1, n, pos);
            plain_attend(want, want_w, K, V, q + (size_t)pos * H * D, n, pos, W, S, H, G, D);
            expect_near(out, want, (size_t)n * H * D, what, pos);
            expect_near(wts, want_w, (size_t)n * (pos + n), what, pos);
            for (int i = 0; i < n; i++) sink_want += want_w[(size_t)i * (pos + n)];
            pos += n;
        }
        sink = c.sink_weight[0];
        if (!(fabs(sink - sink_want) <= 1e-4))
            fail_msg("%s: head 0's weight on position 0 summed: expected %.9g, got %.9g", what, sink_want, sink);
        assert_true(c.queries[0] == (double)P);
        kvcache_free(&c.base);
    }
}

// The Mistral claim made checkable: with keys and values of every position
// the same, the rolling buffer of W rows attends as the whole cache does
// under the band mask of W.
static void test_rolling_equals_band_mask(void **state) {
    (void)state;
    enum { L = 2, B = 2, H = 4, G = 2, D = 8, W = 6, P = 4 * W + 3 };
    KvShape big = {.L = L, .B = B, .T = P, .H = H, .G = G, .D = D};
    KvShape small = big;
    small.T = W;
    KvPrealloc full;
    KvWindow roll;
    assert_int_equal(kvprealloc_init(&full, big), 0);
    full.base.window = W;
    assert_int_equal(kvwindow_init(&roll, small, 0), 0);
    static float k[B * W * G * D], v[B * W * G * D], q[B * W * H * D], a[B * W * H * D], b[B * W * H * D];
    static float wa[B * W * P], wb[B * W * P];
    uint64_t rng = 3;
    for (int pos = 0; pos < P;) {
        int n = pos == 0 ? W : 1;   // the first chunk fills the window, then steps
        for (int l = 0; l < L; l++) {
            fill(k, (size_t)B * n * G * D, &rng);
            fill(v, (size_t)B * n * G * D, &rng);
            fill(q, (size_t)B * n * H * D, &rng);
            kvcache_append(&full.base, l, k, v, B, n, pos);
            kvcache_append(&roll.base, l, k, v, B, n, pos);
            kvcache_attend(&full.base, a, wa, q, NULL, l, B, n, pos);
            kvcache_attend(&roll.base, b, wb, q, NULL, l, B, n, pos);
            char what[96];
            snprintf(what, sizeof what, "layer %d at position %d: rolling against band mask (row, dim)", l, pos);
            assert_bits(b, a, (int64_t)B * n * H * D, what);
            snprintf(what, sizeof what, "layer %d at position %d: head 0's weights", l, pos);
            assert_bits(wb, wa, (int64_t)B * n * (pos + n), what);
        }
        pos += n;
    }
    assert_int_equal(kvcache_len(&roll.base), P);
    kvcache_free(&full.base);
    kvcache_free(&roll.base);
}

static void test_bytes_capped_at_w(void **state) {
    (void)state;
    KvShape s = {.L = 3, .B = 2, .T = 16, .H = 4, .G = 4, .D = 4};   // 1536 floats: whole 64-byte lines
    KvWindow c;
    assert_int_equal(kvwindow_init(&c, s, 4), 0);
    size_t want = 2 * (size_t)s.L * s.B * s.T * s.G * s.D * sizeof(float);
    float k[2 * 16], v[2 * 16];
    memset(k, 0, sizeof k), memset(v, 0, sizeof v);
    for (int p = 0; p < 100; p++)
        for (int l = 0; l < s.L; l++) kvcache_append(&c.base, l, k, v, 2, 1, p);
    if (kvcache_bytes(&c.base) != want)
        fail_msg("sinks cache after 100 positions: expected %zu bytes (2 L B W G D 4), got %zu", want,
                 kvcache_bytes(&c.base));
    memset(c.cache_k, 0x7f, kvcache_bytes(&c.base));   // all of it the cache's own
    kvcache_reset(&c.base);
    assert_int_equal(kvcache_len(&c.base), 0);
    assert_true(c.cache_k[0] == 0.0f && c.sink_weight[0] == 0.0);
    kvcache_free(&c.base);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_kept_across_wraps),
        cmocka_unit_test(test_attend_matches_plain_loops),
        cmocka_unit_test(test_rolling_equals_band_mask),
        cmocka_unit_test(test_bytes_capped_at_w),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
