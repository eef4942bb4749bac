// test_checkpoint — the checkpoint loader holds a saved run to the limits of
// the command line (issue 29, 9). Each bad checkpoint is a good one with a
// field changed and its checksum made again here, FNV-1a computed as
// docs/training.md gives it, so that the loader gets past the checksum and
// must find the field itself.
#include "testutil.h"

#include "checkpoint.h"
#include "fileio.h"
#include "gpt.h"
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Offsets of docs/training.md's layout: "KVTC", version, V T C H L, then
// batch iters warmup (u32 each); 7 f32 and the u64 seed; the u32 step.
enum { AT_BATCH = 28, AT_ITERS = 32, AT_STEP = 76, HEADER = 112 };
enum { V = 3 };

static char dir[64], good[128], bad[128];
static unsigned char *bytes;   // the good checkpoint
static long n_bytes;
static size_t P;               // its parameters

static int setup(void **state) {
    (void)state;
    if (tmpdir_make(dir, sizeof dir, "ckpt")) return -1;
    snprintf(good, sizeof good, "%s/good.ckpt", dir);
    snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);
    TrainCheckpoint ck;
    memset(&ck, 0, sizeof ck);
    train_config_default(&ck.cfg, "tiny");
    ck.cfg.model = (GptConfig){V, 4, 8, 2, 1};
    ck.cfg.iters = 10;
    ck.cfg.warmup = 1;
    static uint32_t vocab[V] = {'a', 'b', 'c'};
    ck.vocab = vocab;
    ck.step = 5;
    P = ck.num_params = gpt_num_params(ck.cfg.model);
    ck.params = calloc(3 * P, sizeof(float));
    if (!ck.params) return -1;
    ck.m = ck.params + P;
    ck.v = ck.params + 2 * P;
    for (size_t i = 0; i < P; i++) ck.v[i] = 1e-4f;
    char err[512];
    int rc = train_checkpoint_save(good, &ck, ERR(LANG_EN, err));
    free(ck.params);
    if (rc) return -1;
    FILE *f = fopen(good, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    n_bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    bytes = malloc((size_t)n_bytes);
    size_t got = bytes ? fread(bytes, 1, (size_t)n_bytes, f) : 0;
    fclose(f);
    return got == (size_t)n_bytes && n_bytes == HEADER + 4 * V + 12 * (long)P + 8 ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    free(bytes);
    return tmpdir_remove(dir);
}

// 64-bit FNV-1a: h = (h xor byte) * 1099511628211, from 14695981039346656037.
static uint64_t fnv1a_here(const unsigned char *b, size_t n) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void put_u32(unsigned char *b, uint32_t x) {
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(x >> (8 * i));
}

// The good checkpoint with 4 bytes at `at` set to x (a u32, or a float's
// bits), its checksum made again, written to bad; then loaded: returns the
// loader's message ("" when it loaded). The caller frees it.
static char *load_with(Lang lang, long at, uint32_t x) {
    unsigned char *b = malloc((size_t)n_bytes);
    assert_non_null(b);
    memcpy(b, bytes, (size_t)n_bytes);
    put_u32(b + at, x);
    uint64_t sum = fnv1a_here(b, (size_t)n_bytes - 8);
    for (int i = 0; i < 8; i++) b[n_bytes - 8 + i] = (unsigned char)(sum >> (8 * i));
    FILE *f = fopen(bad, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, (size_t)n_bytes, f), (size_t)n_bytes);
    assert_int_equal(fclose(f), 0);
    free(b);
    TrainCheckpoint ck;
    char err[512];
    if (train_checkpoint_load(bad, &ck, ERR(lang, err)) == 0) {
        train_checkpoint_free(&ck);
        err[0] = '\0';
    }
    return strdup(err);
}

static uint32_t bits_of(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

typedef struct {
    const char *name;
    long at;
    uint32_t value;
    const char *say;   // in the message; NULL: the checkpoint loads
} Case;

static void check_cases(const Case *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char *err = load_with(LANG_EN, cases[i].at, cases[i].value);
        if (!cases[i].say && *err) fail_msg("%s: expected it to load, got: %s", cases[i].name, err);
        if (cases[i].say && !*err) fail_msg("%s: expected a refusal saying \"%s\", it loaded", cases[i].name, cases[i].say);
        if (cases[i].say && (!strstr(err, cases[i].say) || strstr(err, "checksum")))
            fail_msg("%s: expected \"%s\" in the refusal, got: %s", cases[i].name, cases[i].say, err);
        free(err);
    }
}

// --iters takes 1 to 100000000 and --batch 1 to 4096: so does the loader.
static void test_checkpoint_recipe_within_the_command_lines_limits(void **state) {
    (void)state;
    const Case cases[] = {
        {"the good checkpoint", AT_ITERS, 10, NULL},
        {"iters 100000000 (the largest --iters)", AT_ITERS, 100000000, NULL},
        {"iters 100000001", AT_ITERS, 100000001, "the iterations from 1 to 100000000"},
        {"iters 2^31 - 1", AT_ITERS, 0x7fffffff, "the iterations from 1 to 100000000"},
        {"iters 0", AT_ITERS, 0, "the iterations from 1 to 100000000"},
        {"batch 4096 (the largest --batch)", AT_BATCH, 4096, NULL},
        {"batch 4097", AT_BATCH, 4097, "the batch must be from 1 to 4096"},
        {"step 10 of 10", AT_STEP, 10, NULL},
        {"step 11 of 10", AT_STEP, 11, "its step 11 is past its iterations (10)"},
    };
    check_cases(cases, sizeof cases / sizeof cases[0]);
    // and in Chinese
    char *err = load_with(LANG_ZH, AT_ITERS, 0x7fffffff);
    if (!strstr(err, "迭代次数在 1 到 100000000 之间")) fail_msg("iters 2^31 - 1 in Chinese: got: %s", err);
    free(err);
}

// AdamW's v is a running mean of squared gradients: never below 0 (the
// update divides by its square root).
static void test_checkpoint_negative_second_moment_refused(void **state) {
    (void)state;
    long v0 = HEADER + 4 * V + 8 * (long)P;   // params, then m, then v
    const Case cases[] = {
        {"v[0] = 0", v0, bits_of(0.0f), NULL},
        {"v[0] = -0", v0, bits_of(-0.0f), NULL},
        {"v[0] = -1e-3", v0, bits_of(-1e-3f), "AdamW's second moment v[0] is -0.001; it is never below 0"},
        {"v[P-1] = -2", v0 + 4 * (long)(P - 1), bits_of(-2.0f), "is -2; it is never below 0"},
        {"m[0] = -1 (a first moment may be negative)", v0 - 4 * (long)P, bits_of(-1.0f), NULL},
    };
    check_cases(cases, sizeof cases / sizeof cases[0]);
    char *err = load_with(LANG_ZH, v0, bits_of(-1e-3f));
    if (!strstr(err, "AdamW 的二阶矩 v[0] 是 -0.001；它不会小于 0")) fail_msg("v[0] < 0 in Chinese: got: %s", err);
    free(err);
}

// The test's own checksum is the loader's: a byte changed without it is a
// corrupted file.
static void test_checkpoint_checksum_is_the_documents(void **state) {
    (void)state;
    char *err = load_with(LANG_EN, AT_ITERS, 10);
    if (*err) fail_msg("the good checkpoint through the test's checksum: refused: %s", err);
    free(err);
    bytes[AT_ITERS] ^= 1;   // iters 11, the old checksum
    FILE *f = fopen(bad, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, (size_t)n_bytes, f), (size_t)n_bytes);
    assert_int_equal(fclose(f), 0);
    bytes[AT_ITERS] ^= 1;
    TrainCheckpoint ck;
    char msg[512];
    assert_int_equal(train_checkpoint_load(bad, &ck, ERR(LANG_EN, msg)), -1);
    if (!strstr(msg, "checksum mismatch")) fail_msg("a changed byte: expected \"checksum mismatch\", got: %s", msg);
}

// Each field the loader checks, changed alone (the checksum made again):
// the version, sizes past 2^31, the parameter count, the vocabulary's
// order and range, a weight that is not finite.
static void test_checkpoint_fields_refused(void **state) {
    (void)state;
    long vocab = HEADER, params = HEADER + 4 * V;
    const Case cases[] = {
        {"version 2 (a GPT run)", 4, 2, "unsupported version (expected 1, or 2 for a LLaMA-style run with --window)"},
        {"batch 2^31", AT_BATCH, 0x80000000u, "sizes or step counts out of range"},
        {"step 2^31", AT_STEP, 0x80000000u, "sizes or step counts out of range"},
        {"parameter count P + 1", 104 /* P, after the text length */, (uint32_t)P + 1, "parameter count does not match the model sizes"},
        {"vocabulary a a c", vocab + 4, 'a', "vocabulary is not sorted distinct code points"},
        {"vocabulary past U+10FFFF", vocab + 8, 0x110000, "vocabulary is not sorted distinct code points"},
        {"weight 0 is NaN", params, 0x7fc00000u, "weights or optimizer state hold NaN or infinity"},
        {"m[0] is infinite", params + 4 * (long)P, 0x7f800000u, "weights or optimizer state hold NaN or infinity"},
    };
    check_cases(cases, sizeof cases / sizeof cases[0]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_checksum_is_the_documents),
        cmocka_unit_test(test_checkpoint_recipe_within_the_command_lines_limits),
        cmocka_unit_test(test_checkpoint_negative_second_moment_refused),
        cmocka_unit_test(test_checkpoint_fields_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
