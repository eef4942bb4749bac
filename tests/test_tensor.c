// test_tensor — tensor_format against the text PyTorch itself prints
// (tests/fixtures/print.txt, made by tests/toy_reference.py).
#include "testutil.h"

#include "tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float value_of(const char *s) {
    if (!strcmp(s, "nan")) return NAN;
    if (!strcmp(s, "inf")) return INFINITY;
    if (!strcmp(s, "-inf")) return -INFINITY;
    return strtof(s, NULL);
}

// Reads the next case: precision, shape, values and the expected text.
static int next_case(FILE *f, int *precision, Tensor *t, char **expected) {
    static char line[1 << 17];
    while (fgets(line, sizeof line, f) && line[0] == '#') {
    }
    if (feof(f)) return 0;
    int ndim, shape[4] = {0}, used = 0;
    assert_int_equal(sscanf(line, "case %d %d%n", precision, &ndim, &used), 2);
    char *p = line + used;
    for (int d = 0; d < ndim; d++) shape[d] = (int)strtol(p, &p, 10);
    *t = tensor_new(ndim, shape);
    assert_non_null(t->data);
    assert_non_null(fgets(line, sizeof line, f));
    assert_memory_equal(line, "values", 6);
    char *save = NULL;
    strtok_r(line, " \n", &save);
    for (size_t i = 0; i < tensor_numel(t); i++) {
        char *v = strtok_r(NULL, " \n", &save);
        assert_non_null(v);
        t->data[i] = value_of(v);
    }
    size_t cap = 1 << 18, len = 0;
    *expected = calloc(cap, 1);
    while (fgets(line, sizeof line, f) && strcmp(line, "@@\n") != 0) {
        size_t n = strlen(line);
        assert_true(len + n < cap);
        memcpy(*expected + len, line, n);
        len += n;
    }
    if (len) (*expected)[len - 1] = '\0';   // print() adds the last newline
    return 1;
}

static void test_matches_pytorch_print(void **state) {
    (void)state;
    FILE *f = fopen("tests/fixtures/print.txt", "r");
    assert_non_null(f);
    int precision, cases = 0;
    Tensor t;
    char *expected;
    while (next_case(f, &precision, &t, &expected)) {
        char *got = tensor_format(&t, precision, NULL);
        assert_non_null(got);
        if (strcmp(got, expected) != 0) {
            size_t i = 0;
            while (got[i] && got[i] == expected[i]) i++;
            fail_msg("case %d (precision %d): first difference at character %zu\nexpected:\n%s\ngot:\n%s",
                     cases, precision, i, expected, got);
        }
        free(got);
        free(expected);
        tensor_free(&t);
        cases++;
    }
    fclose(f);
    assert_true(cases >= 20);
}

static const char *red(float v, float lo, float hi) {
    (void)lo;
    (void)hi;
    return v > 0 ? "<" : "";
}

// Colour codes go around each element without changing its digits or width.
static void test_heat_keeps_digits(void **state) {
    (void)state;
    float x[] = {0.5f, -0.25f};
    Tensor t = tensor_view2(x, 1, 2);
    char *s = tensor_format(&t, 4, red);
    assert_string_equal(s, "tensor([[< 0.5000\x1b[0m, -0.2500]])");
    free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_pytorch_print),
        cmocka_unit_test(test_heat_keeps_digits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
