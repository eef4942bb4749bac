// test_flash — flash.c against references computed here, in double, by the
// plain formulas: softmax in three passes, attention as softmax(Q K^T) V.
//
//   test_online_softmax_and_merge      (m, l) streamed and merged vs three passes, with -inf entries
//   test_tiled_equals_plain            random Q, K, V over N, d, Br, Bc, causal or not (1e-6 relative)
//   test_tile_counts                   tiles computed, skipped, masked vs a count of the tiles' cells
//   test_row_tiles_and_decode_bits     flash_row = flash_tiled_head's row = flash_decode on 1..4 threads
//   test_traffic_counts                the byte counts vs the algorithms' loops walked here
//   test_gpt_flash                     the char GPT: flash vs plain logits (1e-5), vs numpy (1e-4),
//                                      flash cached vs uncached bit for bit
#include "testutil.h"

#include "flash.h"
#include "gpt.h"
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 88172645463325252ull;

static float uniform(void) {   // [-1, 1)
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void fill(float *x, int64_t n, float amp) {
    for (int64_t i = 0; i < n; i++) x[i] = amp * uniform();
}

// ----------------------------------------------------------------------------
// Online softmax

// y = softmax(x) in double, three passes: max, sum, divide.
static void softmax3(double *y, double *m, double *l, const float *x, int n) {
    *m = -INFINITY;
    for (int j = 0; j < n; j++) *m = fmax(*m, x[j]);
    *l = 0;
    for (int j = 0; j < n; j++) *l += exp((double)x[j] - *m);
    for (int j = 0; j < n; j++) y[j] = exp((double)x[j] - *m) / *l;
}

static void check_row(const float *x, int n, const char *what) {
    double want[64], m, l;
    softmax3(want, &m, &l, x, n);
    FlashStat st = {-INFINITY, 0};
    for (int j = 0; j < n; j++) flash_online_step(&st, x[j]);
    if (st.m != (float)m) fail_msg("%s: m expected %.9g, got %.9g", what, m, st.m);
    if (fabs(st.l - l) > 1e-6 * l) fail_msg("%s: l expected %.9g, got %.9g", what, l, st.l);
    for (int j = 0; j < n; j++) {
        double got = exp((double)x[j] - st.m) / st.l;
        if (fabs(got - want[j]) > 1e-6 * fmax(want[j], 1e-30) + 1e-12)
            fail_msg("%s: y[%d] expected %.9g, got %.9g", what, j, want[j], got);
    }
    // Every cut of the row: the two halves' (m, l) merged = the whole row's.
    for (int cut = 0; cut <= n; cut++) {
        FlashStat a = {-INFINITY, 0}, b = {-INFINITY, 0};
        for (int j = 0; j < cut; j++) flash_online_step(&a, x[j]);
        for (int j = cut; j < n; j++) flash_online_step(&b, x[j]);
        FlashStat ab = flash_stat_merge(a, b), ba = flash_stat_merge(b, a);
        if (ab.m != (float)m || fabs(ab.l - l) > 1e-6 * l)
            fail_msg("%s cut at %d: merged (m, l) expected (%.9g, %.9g), got (%.9g, %.9g)", what, cut, m, l, ab.m, ab.l);
        if (ba.m != ab.m || fabs(ba.l - ab.l) > 1e-6 * l)
            fail_msg("%s cut at %d: merge not commutative: (%.9g, %.9g) vs (%.9g, %.9g)", what, cut, ab.m, ab.l, ba.m, ba.l);
    }
}

static void test_online_softmax_and_merge(void **state) {
    (void)state;
    float x[64];
    char what[64];
    for (int t = 0; t < 50; t++) {
        int n = 1 + t % 40;
        fill(x, n, t < 25 ? 3.0f : 40.0f);
        for (int j = 0; j < n; j++)
            if (j > 0 && uniform() < -0.5f) x[j] = -INFINITY;   // some masked entries (never the first)
        snprintf(what, sizeof what, "row %d (n = %d)", t, n);
        check_row(x, n, what);
    }
    // All but one masked: the one left gets weight 1, l = 1.
    for (int keep = 0; keep < 8; keep++) {
        for (int j = 0; j < 8; j++) x[j] = j == keep ? 0.75f : -INFINITY;
        snprintf(what, sizeof what, "all masked but %d", keep);
        check_row(x, 8, what);
        FlashStat st = {-INFINITY, 0};
        for (int j = 0; j < 8; j++) flash_online_step(&st, x[j]);
        if (st.l != 1.0f || st.m != 0.75f) fail_msg("%s: expected (m, l) = (0.75, 1), got (%g, %g)", what, st.m, st.l);
    }
}

// ----------------------------------------------------------------------------
// One head

// O (N, d) = softmax(Q K^T * scale + mask) V in double; K given as Kt (d, N).
static void attention_ref(double *O, const float *Q, const float *Kt, const float *V, int N, int d, float scale,
                          int causal) {
    double *w = malloc(sizeof(double) * (size_t)N);
    assert_non_null(w);
    for (int i = 0; i < N; i++) {
        int n = causal ? i + 1 : N;
        double m = -INFINITY, l = 0;
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < d; k++) s += (double)Q[i * d + k] * Kt[(int64_t)k * N + j];
            w[j] = s * scale;
            m = fmax(m, w[j]);
        }
        for (int j = 0; j < n; j++) l += (w[j] = exp(w[j] - m));
        for (int k = 0; k < d; k++) {
            double o = 0;
            for (int j = 0; j < n; j++) o += w[j] / l * V[(int64_t)j * d + k];
            O[(int64_t)i * d + k] = o;
        }
    }
    free(w);
}

// |got - want| <= 1e-6 (|want| + the mean |v| the row averages, a scale for
// outputs near 0).
static void expect_rel(const float *got, const double *want, int N, int d, const char *what) {
    for (int64_t i = 0; i < (int64_t)N * d; i++)
        if (!(fabs(got[i] - want[i]) <= 1e-6 * (fabs(want[i]) + 0.5)))
            fail_msg("%s: O[%lld][%lld] expected %.9g, got %.9g", what, (long long)(i / d), (long long)(i % d),
                     want[i], got[i]);
}

static void test_tiled_equals_plain(void **state) {
    (void)state;
    static const int NS[] = {1, 5, 17, 64, 130}, DS[] = {4, 16, 64};
    static const int TILES[][2] = {{1, 1}, {2, 3}, {16, 16}, {64, 32}, {7, 200}};
    for (size_t a = 0; a < sizeof NS / sizeof NS[0]; a++)
        for (size_t b = 0; b < sizeof DS / sizeof DS[0]; b++) {
            int N = NS[a], d = DS[b];
            float *Q = malloc(sizeof(float) * (size_t)(N * d)), *Kt = malloc(sizeof(float) * (size_t)(N * d));
            float *V = malloc(sizeof(float) * (size_t)(N * d)), *O = malloc(sizeof(float) * (size_t)(N * d));
            float *P = malloc(sizeof(float) * (size_t)(N * N));
            double *want = malloc(sizeof(double) * (size_t)(N * d));
            float *scratch = malloc(sizeof(float) * (size_t)flash_scratch_floats(200, 200, d));
            assert_true(Q && Kt && V && O && P && want && scratch);
            fill(Q, N * d, 2.0f), fill(Kt, N * d, 2.0f), fill(V, N * d, 1.0f);
            float scale = 1.0f / sqrtf((float)d);
            for (int causal = 0; causal < 2; causal++) {
                attention_ref(want, Q, Kt, V, N, d, scale, causal);
                char what[96];
                snprintf(what, sizeof what, "plain N=%d d=%d causal=%d", N, d, causal);
                flash_plain_head(O, P, Q, Kt, V, N, d, scale, causal);
                expect_rel(O, want, N, d, what);
                for (size_t t = 0; t < sizeof TILES / sizeof TILES[0]; t++) {
                    snprintf(what, sizeof what, "tiled N=%d d=%d Br=%d Bc=%d causal=%d", N, d, TILES[t][0],
                             TILES[t][1], causal);
                    flash_tiled_head(O, scratch, NULL, Q, Kt, V, N, d, scale, causal, TILES[t][0], TILES[t][1]);
                    expect_rel(O, want, N, d, what);
                }
            }
            free(Q), free(Kt), free(V), free(O), free(P), free(want), free(scratch);
        }
}

static void test_tile_counts(void **state) {
    (void)state;
    static const int CASES[][3] = {{3, 2, 2}, {10, 4, 3}, {64, 16, 16}, {100, 7, 13}, {5, 8, 8}};
    float Q[100 * 4], Kt[4 * 100], V[100 * 4], O[100 * 4], scratch[64];
    fill(Q, 400, 1), fill(Kt, 400, 1), fill(V, 400, 1);
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        int N = CASES[c][0], Br = CASES[c][1], Bc = CASES[c][2];
        // Every tile's cells (r, k): none with k <= r -> skipped; some
        // with k > r -> masked; the others computed whole.
        int64_t want_tiles = 0, want_skipped = 0, want_masked = 0;
        for (int i0 = 0; i0 < N; i0 += Br)
            for (int j0 = 0; j0 < N; j0 += Bc) {
                int visible = 0, hidden = 0;
                for (int r = i0; r < i0 + Br && r < N; r++)
                    for (int k = j0; k < j0 + Bc && k < N; k++) k <= r ? visible++ : hidden++;
                if (!visible) want_skipped++;
                else want_tiles++, want_masked += hidden > 0;
            }
        FlashCounts got;
        flash_tiled_head(O, scratch, &got, Q, Kt, V, N, 4, 0.5f, 1, Br, Bc);
        if (got.tiles != want_tiles || got.skipped != want_skipped || got.masked != want_masked)
            fail_msg("N=%d Br=%d Bc=%d: expected %lld computed, %lld skipped, %lld masked; got %lld, %lld, %lld", N, Br,
                     Bc, (long long)want_tiles, (long long)want_skipped, (long long)want_masked, (long long)got.tiles,
                     (long long)got.skipped, (long long)got.masked);
        flash_tiled_head(O, scratch, &got, Q, Kt, V, N, 4, 0.5f, 0, Br, Bc);
        int64_t all = (int64_t)((N + Br - 1) / Br) * ((N + Bc - 1) / Bc);
        if (got.tiles != all || got.skipped != 0 || got.masked != 0)
            fail_msg("N=%d no mask: expected %lld tiles, none skipped or masked; got %lld, %lld, %lld", N,
                     (long long)all, (long long)got.tiles, (long long)got.skipped, (long long)got.masked);
    }
}

// ----------------------------------------------------------------------------
// Rows and flash-decoding, bit for bit

static void test_row_tiles_and_decode_bits(void **state) {
    (void)state;
    enum { N = 300, D = 32, BC = 24 };
    float *Q = malloc(sizeof(float) * N * D), *Kt = malloc(sizeof(float) * N * D), *V = malloc(sizeof(float) * N * D);
    float *O = malloc(sizeof(float) * N * D), *pieces = malloc(sizeof(float) * (size_t)flash_decode_floats(N, D, BC));
    float scratch[BC + D + 2 * 8], row[D], dec[D];
    assert_true(Q && Kt && V && O && pieces);
    fill(Q, N * D, 2), fill(Kt, N * D, 2), fill(V, N * D, 1);
    float scale = 1.0f / sqrtf((float)D);
    flash_tiled_head(O, scratch, NULL, Q, Kt, V, N, D, scale, 1, 8, BC);
    for (int i = 0; i < N; i += 37) {
        // Row i of the causal head sees keys 0..i: the same tiles as flash_row over i+1 keys.
        flash_row(row, scratch, Q + i * D, Kt, N, V, D, i + 1, D, scale, BC);
        char what[64];
        snprintf(what, sizeof what, "flash_row %d vs the tiled head", i);
        assert_bits(row, O + (int64_t)i * D, D, what);
        for (int threads = 1; threads <= 4; threads++) {
            Pool *pool = pool_new(threads);
            assert_non_null(pool);
            flash_decode(dec, pieces, Q + i * D, Kt, N, V, D, pool, i + 1, D, scale, BC);
            snprintf(what, sizeof what, "flash_decode row %d on %d threads", i, threads);
            assert_bits(dec, row, D, what);
            pool_free(pool);
        }
    }
    free(Q), free(Kt), free(V), free(O), free(pieces);
}

// ----------------------------------------------------------------------------
// The traffic counts, against the algorithms' loops walked here

static double walk_standard(int64_t N, int d) {
    double moved = 0;
    moved += N * d + N * d;   // read Q, K
    moved += N * N;           // write S
    moved += N * N;           // read S
    moved += N * N;           // write P
    moved += N * N + N * d;   // read P, V
    moved += N * d;           // write O
    return moved;
}

static double walk_fa1(int64_t N, int d, int Bc, int Br) {
    double moved = 0;
    for (int64_t j0 = 0; j0 < N; j0 += Bc) {
        int64_t bc = N - j0 < Bc ? N - j0 : Bc;
        moved += 2 * bc * d;   // load K_j, V_j
        for (int64_t i0 = 0; i0 < N; i0 += Br) {
            int64_t br = N - i0 < Br ? N - i0 : Br;
            moved += br * d + br * d + br + br;   // load Q_i, O_i, l_i, m_i
            moved += br * d + br + br;            // write O_i, l_i, m_i
        }
    }
    return moved;
}

static double walk_fa2(int64_t N, int d, int Br, int Bc) {
    double moved = 0;
    for (int64_t i0 = 0; i0 < N; i0 += Br) {
        int64_t br = N - i0 < Br ? N - i0 : Br;
        moved += br * d;   // load Q_i
        for (int64_t j0 = 0; j0 < N; j0 += Bc) {
            int64_t bc = N - j0 < Bc ? N - j0 : Bc;
            moved += 2 * bc * d;   // load K_j, V_j
        }
        moved += br * d + br;   // write O_i and its log-sum-exp
    }
    return moved;
}

static void test_traffic_counts(void **state) {
    (void)state;
    static const int BC[] = {16, 32, 48, 64, 192};
    for (int64_t N = 256; N <= 16384; N *= 2) {
        if (flash_traffic_standard(N, 64) != walk_standard(N, 64))
            fail_msg("standard N=%lld: expected %.0f, got %.0f", (long long)N, walk_standard(N, 64),
                     flash_traffic_standard(N, 64));
        for (size_t b = 0; b < sizeof BC / sizeof BC[0]; b++)
            if (flash_traffic_fa1(N, 64, BC[b]) != walk_fa1(N, 64, BC[b], 64))
                fail_msg("FA1 N=%lld Bc=%d: expected %.0f, got %.0f", (long long)N, BC[b], walk_fa1(N, 64, BC[b], 64),
                         flash_traffic_fa1(N, 64, BC[b]));
        if (flash_traffic_fa2(N, 64, 64) != walk_fa2(N, 64, 64, 192))
            fail_msg("FA2 N=%lld: expected %.0f, got %.0f", (long long)N, walk_fa2(N, 64, 64, 192),
                     flash_traffic_fa2(N, 64, 64));
        // Tiles below 3d/4 = 48 keys move more than the standard algorithm (from N = 1024 on).
        if (N >= 1024 && !(flash_traffic_fa1(N, 64, 32) > flash_traffic_standard(N, 64) &&
                           flash_traffic_fa1(N, 64, 64) < flash_traffic_standard(N, 64)))
            fail_msg("N=%lld: expected Bc=32 above and Bc=64 below the standard count", (long long)N);
    }
    // The FlashAttention paper's d = 1024 / 16 heads = 64, N = 1024: 4.46 M and 6.55 M elements
    // (Bc = 32), the figures of REFERENCES' derived table.
    assert_true(fabs(flash_traffic_standard(1024, 64) - 4456448) < 0.5);
    assert_true(fabs(flash_traffic_fa1(1024, 64, 32) - 6553600) < 0.5);
    // Algorithm 1, line 1 with A100's 192 KB in floats (49152): d = 64 -> Bc 192, Br 64; d = 128 -> 96, 96.
    int Br, Bc;
    flash_block_sizes(49152, 64, &Br, &Bc);
    if (Bc != 192 || Br != 64) fail_msg("d=64: expected Bc 192, Br 64; got %d, %d", Bc, Br);
    flash_block_sizes(49152, 128, &Br, &Bc);
    if (Bc != 96 || Br != 96) fail_msg("d=128: expected Bc 96, Br 96; got %d, %d", Bc, Br);
}

// ----------------------------------------------------------------------------
// The char GPT

static void test_gpt_flash(void **state) {
    (void)state;
    GptModel m;
    char err[256];
    if (gpt_load(&m, "tests/fixtures/gpt_a.kvgp", ERR(LANG_EN, err))) fail_msg("%s", err);
    GptConfig g = m.cfg;
    int V = g.V, n = g.T < 40 ? g.T : 40;
    int *tokens = malloc(sizeof(int) * (size_t)n);
    float *plain = malloc(sizeof(float) * (size_t)(n * V)), *full = malloc(sizeof(float) * (size_t)(n * V));
    float *cached = malloc(sizeof(float) * (size_t)(n * V));
    GptState s;
    assert_true(tokens && plain && full && cached && gpt_state_init(&s, g) == 0);
    for (int i = 0; i < n; i++) tokens[i] = (i * 7 + 3) % V;
    // Plain: the logits of every prefix, by full passes.
    for (int i = 1; i <= n; i++) memcpy(plain + (i - 1) * V, gpt_forward(&s, &m, tokens, i, 0), sizeof(float) * (size_t)V);
    static const int TILES[] = {1, 3, 8, 64};
    for (size_t t = 0; t < sizeof TILES / sizeof TILES[0]; t++) {
        assert_int_equal(kvcontig_set_tile(&s.cache, TILES[t]), 0);
        for (int threads = 1; threads <= 3; threads += 2) {
            Pool *pool = pool_new(threads);
            assert_non_null(pool);
            s.pool = pool;
            // Without the cache: every prefix in full. With it: one token at a time.
            for (int i = 1; i <= n; i++)
                memcpy(full + (i - 1) * V, gpt_forward(&s, &m, tokens, i, 0), sizeof(float) * (size_t)V);
            gpt_state_reset(&s);
            for (int i = 0; i < n; i++)
                memcpy(cached + i * V, gpt_forward(&s, &m, tokens + i, 1, i), sizeof(float) * (size_t)V);
            char what[80];
            snprintf(what, sizeof what, "tile %d, %d threads: flash cached vs uncached logits", TILES[t], threads);
            assert_bits(cached, full, (int64_t)n * V, what);
            for (int i = 0; i < n; i++) {
                float big = 0;
                for (int v = 0; v < V; v++) big = fmaxf(big, fabsf(plain[i * V + v]));
                for (int v = 0; v < V; v++)
                    if (fabsf(full[i * V + v] - plain[i * V + v]) > 1e-5f * fmaxf(big, 1.0f))
                        fail_msg("tile %d: logits[%d][%d] plain %.9g, flash %.9g", TILES[t], i, v, plain[i * V + v],
                                 full[i * V + v]);
            }
            s.pool = NULL;
            pool_free(pool);
        }
    }
    gpt_state_free(&s);
    gpt_free(&m);
    free(tokens), free(plain), free(full), free(cached);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_online_softmax_and_merge),
        cmocka_unit_test(test_tiled_equals_plain),
        cmocka_unit_test(test_tile_counts),
        cmocka_unit_test(test_row_tiles_and_decode_bits),
        cmocka_unit_test(test_traffic_counts),
        cmocka_unit_test(test_gpt_flash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
