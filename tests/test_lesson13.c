// test_lesson13 — lesson 13's verifying pass timed against one cached step:
// a row per K = 1 .. 8 with both times, their ratio and a verdict, and the
// closing sentence's figures (the first K that is slower, the ratio at
// K = 8) taken from that table, not fixed. No time is asserted: only that
// the words follow the measured numbers.
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char target[64], draft[64];

static int setup(void **state) {
    (void)state;
    snprintf(target, sizeof target, "/tmp/kvdemo-l13-%d.bin", (int)getpid());
    snprintf(draft, sizeof draft, "/tmp/kvdemo-l13-%d-draft.bin", (int)getpid());
    for (int i = 0; i < 2; i++) {
        char args[128];
        snprintf(args, sizeof args, "init --preset tiny --seed %d --out %s", 7 + i, i ? draft : target);
        RunResult r = kvdemo_run(args);
        if (r.status != 0) fail_msg("kvdemo %s: %s", args, r.err);
        run_free(&r);
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(target);
    unlink(draft);
    return 0;
}

static RunResult lesson13(int repeat) {
    char args[256];
    snprintf(args, sizeof args, "lesson 13 --model %s --draft %s --steps 12 --repeat %d --format json", target, draft,
             repeat);
    RunResult r = kvdemo_run(args);
    if (r.status != 0) fail_msg("kvdemo %s: exit %d: %s", args, r.status, r.err);
    return r;
}

// Half a unit of the last digit of the number that begins cell ("1.23 ± 0.05": 0.005).
static double half_digit(const char *cell) {
    size_t digits = strspn(cell, "0123456789"), decimals = 0;
    if (cell[digits] == '.') decimals = strspn(cell + digits + 1, "0123456789");
    return 0.5 * pow(10, -(double)decimals);
}

static void test_verify_pass_words_follow_numbers(void **state) {
    (void)state;
    RunResult r = lesson13(2);
    TableRow rows[16];
    int nrows = table_rows_of(r.out, "verify_pass", rows, 16);
    if (nrows != 8) fail_msg("verify_pass: expected 8 rows (K = 1 .. 8), got %d", nrows);
    int want_slower = 0;
    for (int i = 0; i < nrows; i++) {
        if (table_cell_number(&rows[i], 0) != i + 1)
            fail_msg("verify_pass row %d: K expected %d, got %s", i, i + 1, rows[i].cell[0]);
        const char *v = rows[i].cell[4];
        if (strcmp(v, "slower") && strcmp(v, "faster") && strcmp(v, "the same within noise"))
            fail_msg("verify_pass row %d: verdict '%s', expected slower, faster or the same within noise", i, v);
        if (!want_slower && !strcmp(v, "slower")) want_slower = i + 1;
    }
    int n;
    Event *e = events_parse(r.out, &n);
    const Event *from = events_find(e, n, "count", "verify", -1, "slower_from_k");
    const Event *k8 = events_find(e, n, "value", "verify", -1, "pass_steps_k8");
    if (!from || !k8) fail_msg("no slower_from_k or pass_steps_k8 in run verify");
    if ((int)from->value != want_slower)
        fail_msg("slower_from_k: expected %d (the first row whose verdict is slower), got %g", want_slower, from->value);
    if (!(k8->value > 0) || fabs(k8->value - strtod(rows[7].cell[3], NULL)) > half_digit(rows[7].cell[3]))
        fail_msg("pass_steps_k8: expected %s (row K = 8), got %g", rows[7].cell[3], k8->value);
    events_free(e, n);
    run_free(&r);
}

// One run each: no verdict, and the lesson says it cannot tell.
static void test_verify_pass_one_run(void **state) {
    (void)state;
    RunResult r = lesson13(1);
    int n;
    Event *e = events_parse(r.out, &n);
    const Event *from = events_find(e, n, "count", "verify", -1, "slower_from_k");
    if (!from || from->value != -1) fail_msg("--repeat 1: slower_from_k expected -1 (too few runs), got %g", from ? from->value : NAN);
    events_free(e, n);
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify_pass_words_follow_numbers),
        cmocka_unit_test(test_verify_pass_one_run),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
