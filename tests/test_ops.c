// test_ops — the attention arithmetic against the article's code run in
// PyTorch (tests/fixtures/toy_tensors.txt), and the row property of matmul.
#include "testutil.h"

#include "bigmem.h"
#include "ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static FixSet fx;

static int setup(void **state) {
    (void)state;
    fix_load(&fx, "tests/fixtures/toy_tensors.txt");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    fix_free(&fx);
    return 0;
}

#define F(key) fix_get(&fx, key)

// Q = torch.matmul(X, W_Q) and the same for K and V, step 2 of section 2.1.
static void test_matmul_projections(void **state) {
    (void)state;
    const FixTensor *X = F("2/no-cache/2/X");
    const char *names[][2] = {{"2/-/0/W_Q", "2/no-cache/2/Q"}, {"2/-/0/W_K", "2/no-cache/2/K"}, {"2/-/0/W_V", "2/no-cache/2/V"}};
    for (int i = 0; i < 3; i++) {
        const FixTensor *W = F(names[i][0]), *want = F(names[i][1]);
        float got[16];
        ops_matmul(got, X->data, W->data, NULL, NULL, X->rows, X->cols, W->cols);
        assert_close(got, want->data, want->rows * want->cols, 1e-6, names[i][1]);
        ops_matmul_plain(got, X->data, W->data, NULL, X->rows, X->cols, W->cols);
        assert_close(got, want->data, want->rows * want->cols, 1e-6, names[i][1]);
    }
}

// scores = torch.matmul(Q, K.T) / 2
static void test_scores(void **state) {
    (void)state;
    const FixTensor *Q = F("2/no-cache/2/Q"), *K = F("2/no-cache/2/K"), *want = F("2/no-cache/2/scores");
    float Kt[16], got[9];
    ops_transpose(Kt, K->data, K->rows, K->cols);
    for (int r = 0; r < K->rows; r++)
        for (int c = 0; c < K->cols; c++) assert_true(Kt[c * K->rows + r] == K->data[r * K->cols + c]);
    ops_matmul(got, Q->data, Kt, NULL, NULL, 3, 4, 3);
    ops_div(got, 2.0f, 9);
    assert_close(got, want->data, 9, 1e-6, "scores");
}

// The mask is exactly the article's tensor; adding it keeps -inf.
static void test_mask_and_add(void **state) {
    (void)state;
    float mask[9], got[9];
    ops_causal_mask(mask, 3, 3, 0);
    assert_close(mask, F("2/no-cache/2/mask")->data, 9, 0, "mask");
    ops_add(got, F("2/no-cache/2/scores")->data, mask, 9);
    assert_close(got, F("2/no-cache/2/masked_scores")->data, 9, 1e-6, "masked_scores");
    // One query row at position 2 of 3 (offset 2) sees everything.
    float row[3];
    ops_causal_mask(row, 1, 3, 2);
    for (int i = 0; i < 3; i++) assert_true(row[i] == 0.0f);
}

// F.softmax(scores, dim=-1): a -inf score weighs exactly 0.
static void test_softmax(void **state) {
    (void)state;
    float got[9];
    ops_softmax_rows(got, F("2/no-cache/2/masked_scores")->data, 3, 3, OPS_DIVIDE);
    assert_close(got, F("2/no-cache/2/weights")->data, 9, 1e-6, "weights");
    assert_true(got[1] == 0.0f && got[2] == 0.0f && got[5] == 0.0f);
    float big[3] = {1000.0f, 999.0f, -INFINITY}, w[3];
    ops_softmax_rows(w, big, 1, 3, OPS_DIVIDE);   // no overflow: exp(x - max)
    assert_close(w, (float[]){0.731058598f, 0.268941432f, 0.0f}, 3, 1e-6, "softmax of large scores");
}

// output = torch.matmul(scores, V).
static void test_output(void **state) {
    (void)state;
    float got[12];
    ops_matmul(got, F("2/no-cache/2/weights")->data, F("2/no-cache/2/V")->data, NULL, NULL, 3, 3, 4);
    assert_close(got, F("2/no-cache/2/output")->data, 12, 1e-6, "output");
}

// Row t of a many-row product equals the one-row product bit for bit, for
// odd sizes too: the property the cache's exactness rests on.
static void test_matmul_rows_independent(void **state) {
    (void)state;
    int sizes[][3] = {{7, 5, 3}, {33, 17, 65}, {5, 64, 129}, {2, 1, 1}};
    for (int s = 0; s < 4; s++) {
        int M = sizes[s][0], K = sizes[s][1], N = sizes[s][2];
        float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
        float *bias = malloc(sizeof(float) * N), *all = malloc(sizeof(float) * M * N), *one = malloc(sizeof(float) * N);
        srand(s + 1);
        for (int i = 0; i < M * K; i++) a[i] = (float)((double)rand() / RAND_MAX - 0.5);
        for (int i = 0; i < K * N; i++) b[i] = (float)((double)rand() / RAND_MAX - 0.5);
        for (int i = 0; i < N; i++) bias[i] = (float)((double)rand() / RAND_MAX - 0.5);
        ops_matmul(all, a, b, bias, NULL, M, K, N);
        for (int r = 0; r < M; r++) {
            ops_matmul(one, a + r * K, b, bias, NULL, 1, K, N);
            assert_bits(one, all + r * N, N, "one row against the same row of the full product");
        }
        free(a), free(b), free(bias), free(all), free(one);
    }
}

static void test_compare_helpers(void **state) {
    (void)state;
    float a[] = {1.0f, -INFINITY, 0.5f}, b[] = {1.0f, -INFINITY, 0.25f};
    assert_true(ops_max_abs_diff(a, b, 3) == 0.25);
    assert_false(ops_bit_identical(a, b, 3));
    assert_true(ops_bit_identical(a, b, 2));
    float z[] = {0.0f}, nz[] = {-0.0f};
    assert_false(ops_bit_identical(z, nz, 1));   // equal as numbers, not as bits
    float n[] = {NAN};
    assert_true(isnan(ops_max_abs_diff(n, z, 1)));
}

// ops_transpose copies in blocks of 32 x 32: shapes that are not multiples
// of the block, and one row or one column, still put element (r, c) at (c, r).
static void test_transpose_blocks(void **state) {
    (void)state;
    const int shapes[][2] = {{1, 1}, {1, 45}, {45, 1}, {32, 32}, {33, 70}, {97, 31}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int R = shapes[s][0], C = shapes[s][1];
        float *in = malloc(sizeof(float) * (size_t)R * C), *out = malloc(sizeof(float) * (size_t)R * C);
        assert_non_null(in);
        assert_non_null(out);
        for (int i = 0; i < R * C; i++) in[i] = (float)i + 0.5f;
        ops_transpose(out, in, R, C);
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++)
                if (out[c * R + r] != in[r * C + c])
                    fail_msg("transpose of %d x %d: out[%d][%d] expected %g, got %g", R, C, c, r,
                             (double)in[r * C + c], (double)out[c * R + r]);
        free(in);
        free(out);
    }
}

// ops_first_nonfinite against a plain isfinite loop: NaN, +inf and -inf at
// every place of a vector block and of the scalar tail, the largest finite
// float and a denormal (which are finite), and a clean array.
static void test_first_nonfinite(void **state) {
    (void)state;
    enum { N = 64 * 3 + 17 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)(i % 7) - 3.0f;
    x[5] = 3.4028235e38f;   // FLT_MAX
    x[9] = -1e-40f;         // a denormal
    assert_int_equal(ops_first_nonfinite(x, N), N);
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; b++)
        for (int at = 0; at < N; at++) {
            float keep = x[at];
            x[at] = bad[b];
            if (ops_first_nonfinite(x, N) != at) fail_msg("%g at %d: found at %lld", bad[b], at, (long long)ops_first_nonfinite(x, N));
            assert_int_equal(ops_first_nonfinite(x, at), at);   // not in the first at
            x[N - 1] = NAN;                                      // a later one does not hide it
            assert_int_equal(ops_first_nonfinite(x, N), at);
            x[N - 1] = (float)((N - 1) % 7) - 3.0f;
            x[at] = keep;
        }
}

// bigmem: zeroed, aligned (to 2 MB when mapped), writable to the last byte,
// for a small array (aligned_alloc) and a large one (a huge-page mapping).
static void test_bigmem(void **state) {
    (void)state;
    size_t sizes[] = {100, (size_t)5 << 20 | 12};
    for (int i = 0; i < 2; i++) {
        unsigned char *p = bigmem_alloc(sizes[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        assert_int_equal(bigmem_is_mapped(sizes[i]), i == 1);
        if (i == 1) assert_int_equal((uintptr_t)p % ((uintptr_t)2 << 20), 0);
        for (size_t j = 0; j < sizes[i]; j += 4093) assert_int_equal(p[j], 0);
        assert_int_equal(p[sizes[i] - 1], 0);
        memset(p, 0xAB, sizes[i]);
        bigmem_free(p, sizes[i]);
    }
    bigmem_free(NULL, 10);
}

// The bench's machine loops: the FMA loop counts 2 x 16 chains x 16 lanes
// per round and task; the copy copies every float (a tail shorter than a
// piece included) and counts 8 bytes per float.
static void test_machine_loops(void **state) {
    (void)state;
    assert_true(ops_fma_loop(NULL, 100, 3) == 2.0 * 16 * 16 * 100 * 3);
    int64_t n = (1 << 18) * 2 + 1000;   // two pieces of 1 MB and a tail
    float *src = malloc(sizeof(float) * (size_t)n), *dst = calloc((size_t)n, sizeof(float));
    assert_non_null(src);
    assert_non_null(dst);
    for (int64_t i = 0; i < n; i++) src[i] = (float)i;
    assert_true(ops_copy_loop(dst, src, NULL, n) == 8.0 * (double)n);
    assert_bits(dst, src, n, "the copied floats");
    free(src), free(dst);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_projections), cmocka_unit_test(test_scores),
        cmocka_unit_test(test_mask_and_add),       cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_output),             cmocka_unit_test(test_matmul_rows_independent),
        cmocka_unit_test(test_compare_helpers),    cmocka_unit_test(test_first_nonfinite),
        cmocka_unit_test(test_transpose_blocks),
        cmocka_unit_test(test_bigmem),             cmocka_unit_test(test_machine_loops),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
