// test_toydata — the example's data file: the article's numbers read back
// exactly, and every malformed file refused with a message naming the line
// and what was expected.
#include "testutil.h"

#include "toydata.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *WEIGHTS =
    "W_Q\n1 0\n0 1\n"
    "W_K\n1 0\n0 1\n"
    "W_V\n1 0\n0 1\n";

// Writes text to a temporary file and loads it; returns toydata_load's result.
static int load_text(const char *text, ToyData *t, char *err, size_t errlen) {
    char path[] = "/tmp/kvdemo-data-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    int rc = toydata_load(t, path, (Err){LANG_EN, err, errlen});
    unlink(path);
    return rc;
}

static void expect_error(const char *text, const char *needle) {
    ToyData t;
    char err[512] = "";
    if (load_text(text, &t, err, sizeof err) == 0) {
        toydata_free(&t);
        fail_msg("accepted a bad file; expected an error containing \"%s\"", needle);
    }
    if (!strstr(err, needle)) fail_msg("error \"%s\" does not contain \"%s\"", err, needle);
}

// data/tianqi.txt holds the article's X, W_Q, W_K, W_V exactly as PyTorch
// reads the same decimals.
static void test_article_numbers(void **state) {
    (void)state;
    FixSet fx;
    fix_load(&fx, "tests/fixtures/toy_tensors.txt");
    ToyData t;
    char err[256];
    if (toydata_load(&t, "data/tianqi.txt", ERR(LANG_EN, err))) fail_msg("%s", err);
    assert_int_equal(t.d, 4);
    assert_int_equal(t.dk, 4);
    assert_int_equal(t.dv, 4);
    assert_true(t.n >= 7);   // 天气真好 and a few more for lesson 7
    assert_true(t.scale == 2.0f);
    assert_string_equal(t.tokens[0], "天");
    assert_string_equal(t.tokens[1], "气");
    assert_string_equal(t.tokens[2], "真");
    assert_string_equal(t.tokens[3], "好");
    assert_bits(t.X, fix_get(&fx, "2/no-cache/2/X")->data, 12, "X");
    assert_bits(t.W_Q, fix_get(&fx, "2/-/0/W_Q")->data, 16, "W_Q");
    assert_bits(t.W_K, fix_get(&fx, "2/-/0/W_K")->data, 16, "W_K");
    assert_bits(t.W_V, fix_get(&fx, "2/-/0/W_V")->data, 16, "W_V");
    toydata_free(&t);
    fix_free(&fx);
}

// A teacher's own numbers: any width, no token labels, default scale.
static void test_own_numbers(void **state) {
    (void)state;
    ToyData t;
    char err[256];
    const char *text =
        "X\n1 2 3\n4 5 6\n7 8 9\n"
        "W_Q\n1 0\n0 1\n1 1\n"
        "W_K\n1 0\n0 1\n1 1\n"
        "W_V\n1 0 0 0 0\n0 1 0 0 0\n0 0 1 0 0\n";
    if (load_text(text, &t, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(t.n, 3);
    assert_int_equal(t.d, 3);
    assert_int_equal(t.dk, 2);
    assert_int_equal(t.dv, 5);
    assert_true(t.scale == sqrtf(2.0f));   // sqrt(dk), dk = 2
    assert_string_equal(t.tokens[2], "t2");
    toydata_free(&t);
}

static void test_malformed(void **state) {
    (void)state;
    char buf[1024];
    expect_error("", "no matrices found");
    expect_error("# only a comment\n\n", "no matrices found");
    snprintf(buf, sizeof buf, "X\na 1 2\nb 3 4\nW_Q\n1 0\n0 1\nW_V\n1 0\n0 1\n");
    expect_error(buf, "the matrix W_K is missing");
    snprintf(buf, sizeof buf, "X\na 1 2\nb 3 4 5\n%s", WEIGHTS);
    expect_error(buf, ":3: row 2 of X has 3 numbers, expected 2");
    snprintf(buf, sizeof buf, "X\na 1 2\nb 3 x4\n%s", WEIGHTS);
    expect_error(buf, ":3: \"x4\" is not a number");
    snprintf(buf, sizeof buf, "X\na 1 2\nb 3 4\n%s", "W_Q\n1 0\n0 1\n1 1\nW_K\n1 0\n0 1\nW_V\n1 0\n0 1\n");
    expect_error(buf, "W_Q has 3 rows but X has 2 columns");
    snprintf(buf, sizeof buf, "X\na 1 2\nb 3 4\n%s", "W_Q\n1 0\n0 1\nW_K\n1 0 0\n0 1 0\nW_V\n1 0\n0 1\n");
    expect_error(buf, "W_K has 3 columns but W_Q has 2");
    snprintf(buf, sizeof buf, "X\na 1 2\n%s", WEIGHTS);
    expect_error(buf, "at least 2 tokens");
    snprintf(buf, sizeof buf, "scale 0\nX\na 1 2\nb 3 4\n%s", WEIGHTS);
    expect_error(buf, ":1: expected \"scale N\" with a positive number");
    snprintf(buf, sizeof buf, "1 2\nX\na 1 2\n");
    expect_error(buf, ":1: expected a matrix name");
    snprintf(buf, sizeof buf, "X\na 1 2\nb 3 4\nX\n%s", WEIGHTS);
    expect_error(buf, ":4: X appears twice");
    snprintf(buf, sizeof buf, "X\na 1 1e999\n%s", WEIGHTS);
    expect_error(buf, "\"1e999\" is not a number");
    snprintf(buf, sizeof buf, "X\na\nb 1 2\n%s", WEIGHTS);
    expect_error(buf, ":2: row 1 of X has a token but no numbers");
    // Truncated: the file ends right after a matrix name.
    snprintf(buf, sizeof buf, "X\na 1 2\nb 3 4\nW_Q\n1 0\n0 1\nW_K\n1 0\n0 1\nW_V\n");
    expect_error(buf, "the matrix W_V has no rows");
    // Numbers whose arithmetic would leave float32: refused, not printed as
    // "max |difference| = nan, identical bit for bit".
    snprintf(buf, sizeof buf, "scale 1e-45\nX\na 1 2\nb 3 4\n%s", WEIGHTS);
    expect_error(buf, ":1: scale 1.4013e-45 is below 1.17549e-38, float32's smallest normal number");
    snprintf(buf, sizeof buf, "X\na 1 2\nb 3 4\nW_Q\n1 0\n0 1\nW_K\n1 0\n0 1\nW_V\n1e36 0\n0 1\n");
    expect_error(buf, "X @ W_V may reach 3e+36, past what float32 holds");
    snprintf(buf, sizeof buf, "scale 1e-20\nX\na 1e10 2\nb 3 4\n%s", WEIGHTS);
    expect_error(buf, "Q @ K.T / scale may reach");
    expect_error(buf, "use smaller numbers or a larger scale");
    // just inside: the same numbers with a normal scale load
    ToyData t;
    char err[256];
    snprintf(buf, sizeof buf, "scale 1e-10\nX\na 1e10 2\nb 3 4\n%s", WEIGHTS);
    if (load_text(buf, &t, err, sizeof err) != 0) fail_msg("expected large but representable numbers to load: %s", err);
    toydata_free(&t);
    assert_int_equal(toydata_load(&t, "/nonexistent/data.txt", ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "data file /nonexistent/data.txt: cannot open: No such file or directory"));
}

// The limits of a line: a matrix name with numbers after it, a token
// longer than TOY_TOKEN_BYTES - 1, more than TOY_MAX_WIDTH numbers, a line
// longer than the reader's 4096 bytes, and a file cut short (its size
// says more than what could be read).
static void test_line_limits(void **state) {
    (void)state;
    static char buf[1 << 14];
    snprintf(buf, sizeof buf, "X 1 2\na 1 2\nb 3 4\n%s", WEIGHTS);
    expect_error(buf, ":1: the name X goes on a line of its own, its rows below it");
    char token[TOY_TOKEN_BYTES + 1];
    memset(token, 't', TOY_TOKEN_BYTES);
    token[TOY_TOKEN_BYTES] = '\0';
    snprintf(buf, sizeof buf, "X\n%s 1 2\nb 3 4\n%s", token, WEIGHTS);
    char want[200];
    snprintf(want, sizeof want, ":2: token \"%s\" is longer than %d bytes", token, TOY_TOKEN_BYTES - 1);
    expect_error(buf, want);
    size_t len = (size_t)snprintf(buf, sizeof buf, "X\na");
    for (int i = 0; i <= TOY_MAX_WIDTH; i++) len += (size_t)snprintf(buf + len, sizeof buf - len, " 1");
    snprintf(buf + len, sizeof buf - len, "\n%s", WEIGHTS);
    snprintf(want, sizeof want, ":2: more than %d numbers on a line", TOY_MAX_WIDTH);
    expect_error(buf, want);
    len = (size_t)snprintf(buf, sizeof buf, "X\na 1 2\n# ");
    memset(buf + len, 'c', 5000);
    snprintf(buf + len + 5000, sizeof buf - len - 5000, "\n%s", WEIGHTS);
    expect_error(buf, ":3: line too long (at most 4094 bytes)");
}

// More tokens than the lessons can show is refused, not truncated.
static void test_too_many_tokens(void **state) {
    (void)state;
    static char buf[1 << 14];
    size_t len = 0;
    len += (size_t)snprintf(buf + len, sizeof buf - len, "X\n");
    for (int i = 0; i <= TOY_MAX_TOKENS; i++) len += (size_t)snprintf(buf + len, sizeof buf - len, "%d 1\n", i);
    snprintf(buf + len, sizeof buf - len, "W_Q\n1\nW_K\n1\nW_V\n1\n");
    expect_error(buf, "X has more than 64 rows");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_article_numbers),
        cmocka_unit_test(test_own_numbers),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_too_many_tokens),
        cmocka_unit_test(test_line_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
