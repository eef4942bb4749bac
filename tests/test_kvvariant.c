// test_kvvariant — the kinds of faulty cache by name (src/model/kvvariant.c)
// and the windows its validation loss takes: each --bug name read back as
// its bug, a name that is none refused, the list the messages print; the
// windows of kvdemo eval counted and spaced, and a range too short for one
// window refused. (The bugs' effects are test_lesson11's; the losses
// through the cache test_kvquant's and test_lessons'.)
#include "testutil.h"

#include "kvvariant.h"

#include <stdio.h>
#include <string.h>

static void test_bug_names(void **state) {
    (void)state;
    static const char *const WANT[KV_NUM_BUGS] = {"none", "offset", "no-append", "stale", "mask", "wrong-layout",
                                                  "no-scale", "no-rollback", "off-by-one"};
    char list[256] = "";
    for (int b = 0; b < KV_NUM_BUGS; b++) {
        const char *name = kvvariant_bug_name((KvBug)b);
        if (strcmp(name, WANT[b]) != 0) fail_msg("bug %d: expected the name \"%s\", got \"%s\"", b, WANT[b], name);
        if (b == KV_BUG_NONE) continue;
        KvBug got = KV_BUG_NONE;
        if (kvvariant_bug_parse(&got, WANT[b]) != 0 || got != (KvBug)b)
            fail_msg("--bug %s: expected bug %d, got %d", WANT[b], b, (int)got);
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", b > 1 ? ", " : "", WANT[b]);
    }
    if (strcmp(KV_BUG_LIST, list) != 0) fail_msg("KV_BUG_LIST: expected \"%s\", got \"%s\"", list, KV_BUG_LIST);
    // "none" is no --bug (the plain cache is the default), and names are exact
    static const char *const NOT_BUGS[] = {"none", "", "Stale", "stale ", "off_by_one", "offsets"};
    for (size_t i = 0; i < sizeof NOT_BUGS / sizeof NOT_BUGS[0]; i++) {
        KvBug got = KV_BUG_STALE;
        if (kvvariant_bug_parse(&got, NOT_BUGS[i]) != -1 || got != KV_BUG_STALE)
            fail_msg("--bug \"%s\": expected -1 and the bug untouched, got bug %d", NOT_BUGS[i], (int)got);
    }
}

// eval's windows of T in tokens[start .. end-1]: each needs T + 1 tokens
// (its targets are shifted by one), and use of count are evenly spaced.
static void test_windows(void **state) {
    (void)state;
    static const struct {
        int64_t start, end;
        int T;
        int64_t count;
    } COUNTS[] = {{0, 16, 16, 0}, {0, 17, 16, 1}, {0, 32, 16, 1}, {0, 33, 16, 2}, {100, 133, 16, 2}, {5, 5, 16, 0}};
    for (size_t i = 0; i < sizeof COUNTS / sizeof COUNTS[0]; i++) {
        int64_t got = kvvariant_window_count(COUNTS[i].start, COUNTS[i].end, COUNTS[i].T);
        if (got != COUNTS[i].count)
            fail_msg("windows of %d in [%lld, %lld): expected %lld, got %lld", COUNTS[i].T, (long long)COUNTS[i].start,
                     (long long)COUNTS[i].end, (long long)COUNTS[i].count, (long long)got);
    }
    static const int64_t SPACED[3] = {0, 3, 6};   // 3 of 10: i * 10 / 3
    for (int64_t i = 0; i < 3; i++)
        if (kvvariant_window_index(i, 10, 3) != SPACED[i])
            fail_msg("window %lld of 3 among 10: expected %lld, got %lld", (long long)i, (long long)SPACED[i],
                     (long long)kvvariant_window_index(i, 10, 3));
    for (int64_t i = 0; i < 4; i++)
        if (kvvariant_window_index(i, 4, 9) != i)
            fail_msg("window %lld, all 4 used: expected %lld, got %lld", (long long)i, (long long)i,
                     (long long)kvvariant_window_index(i, 4, 9));
}

// A range that holds no whole window is refused before any work, the loss
// left as it was.
static void test_eval_too_short(void **state) {
    (void)state;
    GptModel m;
    char err[256];
    if (gpt_load(&m, "tests/fixtures/gpt_a.kvgp", ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    int T = m.cfg.T;
    int32_t tokens[1024] = {0};
    assert_true(T + 1 <= 1024);
    GptVariant v = {.kv_dtype = KV_INT8, .key_group = KV_KEY_GROUP};
    double loss = 12.5;
    if (kvvariant_eval(&loss, &m, &v, tokens, NULL, 0, T, 0) != -1 || loss != 12.5)
        fail_msg("eval of %d tokens with T = %d: expected -1 and the loss untouched, got %g", T, T, loss);
    if (kvvariant_eval(&loss, &m, NULL, tokens, NULL, 7, 7 + T, 1) != -1 || loss != 12.5)
        fail_msg("eval of [7, %d) with T = %d: expected -1 and the loss untouched, got %g", 7 + T, T, loss);
    gpt_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bug_names),
        cmocka_unit_test(test_windows),
        cmocka_unit_test(test_eval_too_short),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
