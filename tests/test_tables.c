// test_tables — the tables that lessons and commands print through the
// trace's table (trace_table_head / trace_table_row): in JSON one "row"
// event per row whose numbers are the reference's, in text columns that
// line up.
//
// Lesson 8: GPT-3 175B has 96 layers of d_model 12288 (the GPT-3 paper,
// Table 2.1), so a cache of s + n tokens for b sequences in fp16 holds
// 2 · 96 · 12288 · (s + n) · b · 2 bytes. kvdemo memory --list: a preset's
// bytes per token at 16 bits are 2 · layers · kv_heads · head_dim · 2, or
// layers · (latent + rope dims) · 2 with MLA (DeepSeek-V2, section 3.1.2).
// Lesson 12: a cache of fp32 keeps 2 · L · C values of 4 bytes per token,
// bf16 and fp16 of 2 bytes; "of fp32" is their ratio.
#include "testutil.h"

#include "gpt.h"
#include "memory.h"
#include "utf8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long number(const TableRow *r, int i) {
    char *end;
    unsigned long long v = strtoull(r->cell[i], &end, 10);
    if (end == r->cell[i] || *end) fail_msg("cell %d is not a whole number: '%s'", i, r->cell[i]);
    return v;
}

static void test_lesson8_rows(void **state) {
    (void)state;
    static const unsigned long long batches[] = {1, 8, 64, 128};
    RunResult r = kvdemo_run("lesson 8 --format json");
    if (r.status) fail_msg("lesson 8: exit status %d: %s", r.status, r.err);
    TableRow rows[8];
    int n = table_rows_of(r.out, "bytes", rows, 8);
    if (n != 4) fail_msg("lesson 8: %d rows of its table, expected 4 (one per length)", n);
    if (!strstr(r.out, "\"event\":\"table\",\"name\":\"bytes\"")) fail_msg("lesson 8: no head of its table");
    for (int i = 0; i < n; i++) {
        if (rows[i].n != 5) fail_msg("lesson 8 row %d: %d cells, expected 5", i, rows[i].n);
        unsigned long long tokens = number(&rows[i], 0);
        for (int j = 0; j < 4; j++) {
            unsigned long long want = 2ull * 96 * 12288 * tokens * batches[j] * 2;
            unsigned long long got = number(&rows[i], j + 1);
            if (got != want)
                fail_msg("lesson 8 row %d (s + n = %llu), b = %llu: expected %llu bytes, got %llu", i, tokens,
                         batches[j], want, got);
        }
    }
    // The article's example is the first row: b = 64, s + n = 512 + 32.
    assert_int_equal(number(&rows[0], 0), 544);
    run_free(&r);

    // In text, each column's "GB" stands at the same place in every row.
    r = kvdemo_run("lesson 8");
    const char *head = strstr(r.out, "\n  s + n ");
    assert_non_null(head);
    int at[4] = {0}, lines = 0;
    for (const char *p = strchr(head + 1, '\n') + 1; *p && *p != '\n'; lines++) {
        const char *nl = strchr(p, '\n');
        int k = 0;
        for (const char *g = strstr(p, "GB"); g && g < nl && k < 4; g = strstr(g + 2, "GB"), k++) {
            int col = (int)(g - p);
            if (lines == 0) at[k] = col;
            else if (col != at[k]) fail_msg("lesson 8 row %d: column %d's GB at %d, expected %d", lines, k, col, at[k]);
        }
        if (k != 4) fail_msg("lesson 8 row %d: %d cells in GB, expected 4", lines, k);
        p = nl + 1;
    }
    assert_int_equal(lines, 4);
    run_free(&r);
}

static void test_memory_list_rows(void **state) {
    (void)state;
    RunResult r = kvdemo_run("memory --list --format json");
    if (r.status) fail_msg("memory --list: exit status %d: %s", r.status, r.err);
    TableRow rows[64];
    int n = table_rows_of(r.out, "presets", rows, 64);
    if (n != NUM_MEM_PRESETS) fail_msg("memory --list: %d rows, expected %d (one per preset)", n, NUM_MEM_PRESETS);
    for (int i = 0; i < n; i++) {
        const TableRow *w = &rows[i];
        if (w->n != 8) fail_msg("memory --list row %d: %d cells, expected 8", i, w->n);
        if (strcmp(w->cell[0], MEM_PRESETS[i].name))
            fail_msg("memory --list row %d: expected %s, got %s", i, MEM_PRESETS[i].name, w->cell[0]);
        unsigned long long layers = number(w, 1), kv_heads = number(w, 3), head_dim = number(w, 4), mla = number(w, 5);
        unsigned long long want = mla ? layers * mla * 2 : 2 * layers * kv_heads * head_dim * 2;
        unsigned long long got = number(w, 6);
        if (got != want) fail_msg("memory --list row %d (%s): expected %llu bytes per token, got %llu", i, w->cell[0], want, got);
        if (!w->cell[7][0]) fail_msg("memory --list row %d (%s): no source", i, w->cell[0]);
    }
    run_free(&r);
}

static void test_lesson12_rows(void **state) {
    (void)state;
    GptConfig cfg;
    assert_int_equal(gpt_preset(&cfg, "tiny"), 0);
    RunResult r = kvdemo_run("lesson 12 --init random --preset tiny --steps 4 --format json");
    if (r.status) fail_msg("lesson 12: exit status %d: %s", r.status, r.err);
    TableRow rows[8];
    int n = table_rows_of(r.out, "kv_dtypes", rows, 8);
    if (n != 5) fail_msg("lesson 12: %d rows, expected 5 (fp32, bf16, fp16, int8, int4)", n);
    const char *names[] = {"fp32", "bf16", "fp16"};
    const int bytes[] = {4, 2, 2};
    double fp32 = 2.0 * cfg.L * cfg.C * 4;
    for (int i = 0; i < 3; i++) {
        if (strcmp(rows[i].cell[0], names[i])) fail_msg("lesson 12 row %d: expected %s, got %s", i, names[i], rows[i].cell[0]);
        unsigned long long want = 2ull * (unsigned long long)cfg.L * (unsigned long long)cfg.C * (unsigned long long)bytes[i];
        if (number(&rows[i], 1) != want)
            fail_msg("lesson 12 row %d (%s): expected %llu bytes per token, got %s", i, names[i], want, rows[i].cell[1]);
        double pct = strtod(rows[i].cell[2], NULL);
        if (pct < 100.0 * (double)want / fp32 - 0.05 || pct > 100.0 * (double)want / fp32 + 0.05)
            fail_msg("lesson 12 row %d (%s): expected %.1f%% of fp32, got %s", i, names[i], 100.0 * (double)want / fp32,
                     rows[i].cell[2]);
    }
    // Smaller formats hold fewer bytes.
    for (int i = 1; i < n; i++)
        if (number(&rows[i], 1) > number(&rows[i - 1], 1))
            fail_msg("lesson 12 row %d (%s): more bytes than %s", i, rows[i].cell[0], rows[i - 1].cell[0]);
    run_free(&r);
}

// Lesson 5's real models: bytes per token at fp16 from each preset's shape,
// and the length at which one sequence's cache equals the fp16 weights,
// ceil(2 · parameters / bytes per token), or "never" past a sliding window.
static void test_lesson5_rows(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 5 --init random --preset tiny --format json");
    if (r.status) fail_msg("lesson 5: exit status %d: %s", r.status, r.err);
    TableRow rows[64];
    int n = table_rows_of(r.out, "real_models", rows, 64);
    if (n != NUM_MEM_PRESETS) fail_msg("lesson 5: %d rows, expected %d (one per preset)", n, NUM_MEM_PRESETS);
    for (int i = 0; i < n; i++) {
        const MemModel *m = &MEM_PRESETS[i];
        const TableRow *w = &rows[i];
        if (strcmp(w->cell[0], m->name)) fail_msg("lesson 5 row %d: expected %s, got %s", i, m->name, w->cell[0]);
        unsigned long long tok = m->mla_dim ? (unsigned long long)m->layers * (unsigned long long)m->mla_dim * 2
                                            : 2ull * (unsigned long long)m->layers * (unsigned long long)m->kv_heads *
                                                  (unsigned long long)m->head_dim * 2;
        if (number(w, 1) != tok) fail_msg("lesson 5 row %d (%s): expected %llu B/token, got %s", i, m->name, tok, w->cell[1]);
        double weights = m->params * 2.0;
        unsigned long long cross = (unsigned long long)ceil(weights / (double)tok);
        if (m->window && cross > (unsigned long long)m->window) {
            if (!strstr(w->cell[3], "never")) fail_msg("lesson 5 row %d (%s): expected never, got %s", i, m->name, w->cell[3]);
        } else if (number(w, 3) != cross) {
            fail_msg("lesson 5 row %d (%s): expected %llu tokens, got %s", i, m->name, cross, w->cell[3]);
        }
    }
    // The trade: after position t the char GPT's cache holds t + 1
    // positions of 2 · L · C float32 values.
    GptConfig cfg;
    assert_int_equal(gpt_preset(&cfg, "tiny"), 0);
    n = table_rows_of(r.out, "trade", rows, 64);
    if (n < 2) fail_msg("lesson 5: %d rows of the trade, expected the char GPT's and the real models'", n);
    int char_rows = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(rows[i].cell[0], "char GPT")) continue;
        char_rows++;
        unsigned long long t = number(&rows[i], 1);
        unsigned long long want = 2ull * (unsigned long long)cfg.L * (unsigned long long)cfg.C * 4 * (t + 1);
        if (number(&rows[i], 3) != want)
            fail_msg("lesson 5 trade row %d (t = %llu): expected %llu bytes held, got %s", i, t, want, rows[i].cell[3]);
    }
    if (!char_rows) fail_msg("lesson 5: no char GPT row in the trade");
    run_free(&r);
}

// kvdemo race, piped: one row per run, each with the --steps tokens asked
// for; the text table's numbers line up under their heads.
static void test_race_rows(void **state) {
    (void)state;
    RunResult r = kvdemo_run("race --init random --preset tiny --steps 12 --format json");
    if (r.status) fail_msg("race: exit status %d: %s", r.status, r.err);
    TableRow rows[4];
    int n = table_rows_of(r.out, "race", rows, 4);
    if (n != 2) fail_msg("race: %d rows, expected 2 (without and with the cache)", n);
    for (int i = 0; i < 2; i++)
        if (number(&rows[i], 1) != 12) fail_msg("race row %d: expected 12 tokens, got %s", i, rows[i].cell[1]);
    run_free(&r);
    r = kvdemo_run("race --init random --preset tiny --steps 12");
    const char *head = strstr(r.out, "tokens/s\n");
    if (!head) fail_msg("race: no table head in:\n%s", r.out);
    const char *line = head + 9;
    // The head's last column ends where each row does.
    const char *head_start = head;
    while (head_start > r.out && head_start[-1] != '\n') head_start--;
    int width = (int)(head + 8 - head_start);
    for (int i = 0; i < 2; i++) {
        const char *nl = strchr(line, '\n');
        if (!nl || (int)(nl - line) != width)
            fail_msg("race row %d: %d columns wide, expected %d as its head", i, nl ? (int)(nl - line) : -1, width);
        line = nl + 1;
    }
    run_free(&r);
}

// Lesson 4's FLOPs per step, without and then with the cache: the token
// after position t feeds t + 1 rows without the cache, one with it (the
// first step, the prompt, feeds all of its rows both ways).
static void test_lesson4_rows(void **state) {
    (void)state;
    RunResult r = kvdemo_run("lesson 4 --init random --preset tiny --repeat 1 --format json");
    if (r.status) fail_msg("lesson 4: exit status %d: %s", r.status, r.err);
    TableRow rows[32];
    int n = table_rows_of(r.out, "mflops", rows, 32);
    if (n < 4 || n % 2) fail_msg("lesson 4: %d rows, expected the same number for both runs", n);
    for (int i = 0; i < n; i++) {
        int cached = i >= n / 2, first = i == 0 || i == n / 2;
        unsigned long long t = number(&rows[i], 0), fed = number(&rows[i], 1);
        unsigned long long want = cached && !first ? 1 : t + 1;
        if (fed != want)
            fail_msg("lesson 4 row %d (%s, t = %llu): expected %llu rows, got %llu", i, cached ? "cache" : "no cache", t,
                     want, fed);
    }
    // Prefill against decode: the prompt's 6 rows ("ROMEO:"), then one
    // row for the cached step.
    n = table_rows_of(r.out, "prefill_decode", rows, 32);
    if (n != 3) fail_msg("lesson 4: %d rows of prefill against decode, expected 3", n);
    if (number(&rows[0], 1) != 6) fail_msg("lesson 4 prefill: expected 6 rows, got %s", rows[0].cell[1]);
    if (number(&rows[2], 1) != 1) fail_msg("lesson 4 decode: expected 1 row, got %s", rows[2].cell[1]);
    // Its times per token: present and sane (positive, the ratio theirs);
    // how fast is bench's business, not a test's.
    n = table_rows_of(r.out, "per_token", rows, 32);
    if (n < 1) fail_msg("lesson 4: no rows of time per token");
    for (int i = 0; i < n; i++) {
        double a = strtod(rows[i].cell[1], NULL), b = strtod(rows[i].cell[2], NULL), ratio = strtod(rows[i].cell[3], NULL);
        if (!(a > 0 && b > 0)) fail_msg("lesson 4 time row %d: times %s and %s, expected both > 0", i, rows[i].cell[1], rows[i].cell[2]);
        if (fabs(ratio - a / b) > 0.051) fail_msg("lesson 4 time row %d: ratio %s, expected %.2f", i, rows[i].cell[3], a / b);
    }
    run_free(&r);
}

// Under --width a table is cut, never wrapped like prose: lesson 4's prefill
// against decode table (the evidence that decode is memory-bound) keeps one
// line a row, each ending in "…" where it was cut, none wider than the width.
static void test_tables_cut_not_wrapped(void **state) {
    (void)state;
    for (int zh = 0; zh < 2; zh++) {
        RunResult r = kvdemo_run(zh ? "lesson 4 --init random --preset tiny --repeat 1 --width 60 --lang zh"
                                    : "lesson 4 --init random --preset tiny --repeat 1 --width 60");
        if (r.status != 0) fail_msg("lesson 4 --width 60: exit %d: %s", r.status, r.err);
        static const char *const rows[2][3] = {
            {"  prefill of the prompt ", "  no cache at the last position ", "  cached step at the last position "},
            {"  预填充：提示词", "  不使用缓存：最后一个位置", "  使用缓存：最后一个位置"}};
        const char *at = r.out;
        for (int i = 0; i < 3; i++) {
            const char *row = strstr(at, rows[zh][i]);
            if (!row) fail_msg("lesson 4 --width 60 (%s): no row \"%s\" where expected", zh ? "zh" : "en", rows[zh][i]);
            const char *eol = strchr(row, '\n');
            char line[512];
            snprintf(line, sizeof line, "%.*s", (int)(eol - row), row);
            int cols = utf8_width(line);
            if (cols > 60 || strncmp(eol - strlen("…"), "…", strlen("…")))
                fail_msg("lesson 4 --width 60: row %d is %d columns and not cut with …: %.*s", i, cols, (int)(eol - row), row);
            if (i < 2 && strncmp(eol + 1, rows[zh][i + 1], strlen(rows[zh][i + 1])))
                fail_msg("lesson 4 --width 60: row %d wrapped onto the next line: %.80s", i, eol + 1);
            at = eol;
        }
        run_free(&r);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lesson8_rows),
        cmocka_unit_test(test_memory_list_rows),
        cmocka_unit_test(test_lesson12_rows),
        cmocka_unit_test(test_lesson5_rows),
        cmocka_unit_test(test_race_rows),
        cmocka_unit_test(test_lesson4_rows),
        cmocka_unit_test(test_tables_cut_not_wrapped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
