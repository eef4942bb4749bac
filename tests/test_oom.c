// test_oom — running out of memory at each allocation in turn, the way
// SQLite's tests do: with KVDEMO_TEST_FAIL_ALLOC=N (src/util/allocfault.c) the
// Nth allocation of a command and every later one fail, for N = 1, 2, ...
// until a run needs fewer than N and ends as it does without the fault.
// Every run before that must end with exit status 1 and one error line on
// stderr, its last, that says what ran out (memory, or the threads that
// could not be started): no crash, no sanitizer report, no silent exit 0,
// and no file half written (an output is absent or whole, and no temporary
// or lock file is left beside it).
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static int setup(void **state) {
    (void)state;
    return tmpdir_make(dir, sizeof dir, "oom");
}

static int teardown(void **state) {
    (void)state;
    return tmpdir_remove(dir);
}

enum { MAX_RUNS = 200, MAX_OUTPUTS = 2 };

typedef struct {
    const char *args;                    // kvdemo's arguments
    const char *outputs[MAX_OUTPUTS];    // the files it writes, or NULL
    int exact[MAX_OUTPUTS];              // 1: the file's bytes are the same each run (no times in it)
    int same_stdout;                     // 1: stdout is the same each run, times aside (comparable)
} Sweep;

// The whole file at path, or NULL when there is none.
static char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    *size = fread(s, 1, (size_t)n, f);
    fclose(f);
    return s;
}

// What of stdout is the same from run to run: its digits left out (times,
// rates), and nothing from generate's first line of timings ("-- 3 tokens
// in ...") or a note that the machine is busy ("! ...") on.
static char *comparable(const char *s) {
    char *t = strdup(s), *w = t;
    assert_non_null(t);
    for (const char *p = s; *p; p++) {
        int line_start = p == s || p[-1] == '\n';
        if (line_start && (!strncmp(p, "-- ", 3) || !strncmp(p, "! ", 2))) break;
        if (*p < '0' || *p > '9') *w++ = *p;
    }
    *w = '\0';
    return t;
}

// Fails unless a run stopped by the fault said so as it should.
static void expect_one_error_line(const RunResult *r, int n, const char *args) {
    if (r->status != 1)
        fail_msg("kvdemo %s with allocation %d failing: expected exit 1, got %d (stderr: %s)", args, n, r->status,
                 r->err);
    int errors = 0;
    const char *last = r->err;
    for (const char *line = r->err; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len) last = line;
        errors += strncmp(line, "kvdemo: ", 8) == 0;
        line += len + (end != NULL);
    }
    char line[600];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(last, "\n"), last);
    if (errors != 1 || strncmp(line, "kvdemo: ", 8) != 0 || (!strstr(line, "memory") && !strstr(line, "threads")))
        fail_msg("kvdemo %s with allocation %d failing: expected one last line \"kvdemo: ... out of memory\" "
                 "(or the threads), got %d error lines, the last \"%s\"", args, n, errors, line);
}

// Fails unless each output is absent or the same as without the fault
// (when it can be), with nothing of its writer left; then removes them.
static void expect_outputs(const Sweep *s, char *const want[], const size_t want_size[], int n) {
    for (int o = 0; o < MAX_OUTPUTS && s->outputs[o]; o++) {
        size_t size = 0;
        char *got = read_file(s->outputs[o], &size);
        if (got && s->exact[o] && (size != want_size[o] || memcmp(got, want[o], size) != 0))
            fail_msg("%s with allocation %d failing: expected it absent or the %zu bytes written without the "
                     "fault, got %zu other bytes", s->outputs[o], n, want_size[o], size);
        free(got);
        if (write_leftovers(s->outputs[o]) != 0)
            fail_msg("%s with allocation %d failing: %d temporary or lock files left", s->outputs[o], n,
                     write_leftovers(s->outputs[o]));
        unlink(s->outputs[o]);
    }
}

static void sweep(const Sweep *s) {
    RunResult ref = kvdemo_run(s->args);
    if (ref.status != 0) fail_msg("kvdemo %s without the fault: expected exit 0, got %d (%s)", s->args, ref.status, ref.err);
    char *ref_out = comparable(ref.out);
    run_free(&ref);
    char *want[MAX_OUTPUTS] = {0};
    size_t want_size[MAX_OUTPUTS] = {0};
    for (int o = 0; o < MAX_OUTPUTS && s->outputs[o]; o++) {
        want[o] = read_file(s->outputs[o], &want_size[o]);
        if (!want[o]) fail_msg("kvdemo %s without the fault: %s not written", s->args, s->outputs[o]);
        unlink(s->outputs[o]);
    }
    int n = 1;
    for (; n <= MAX_RUNS; n++) {
        char env[64];
        snprintf(env, sizeof env, "KVDEMO_TEST_FAIL_ALLOC=%d", n);
        RunResult r = kvdemo_run_env(env, s->args);
        int done = r.status == 0;
        if (done && s->same_stdout) {
            char *got = comparable(r.out);
            if (strcmp(got, ref_out) != 0)
                fail_msg("kvdemo %s with allocation %d and later failing: exit 0 with another output:\n%s", s->args,
                         n, r.out);
            free(got);
        }
        if (!done) expect_one_error_line(&r, n, s->args);
        run_free(&r);
        expect_outputs(s, want, want_size, n);
        if (done) break;
    }
    // The hook must have bitten (a command allocates), and the sweep ended.
    if (n < 3 || n > MAX_RUNS)
        fail_msg("kvdemo %s: expected its allocations to run out between 2 and %d, got %d", s->args, MAX_RUNS, n);
    print_message("kvdemo %s: %d ways to run out of memory, each refused cleanly\n", s->args, n - 1);
    for (int o = 0; o < MAX_OUTPUTS; o++) free(want[o]);
    free(ref_out);
}

// ---------------------------------------------------------------------------

// A text of gpt_a's characters in the test's folder, its path into path.
static void ab_text(char *path, size_t size) {
    snprintf(path, size, "%s/ab.txt", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 100; i++) fputs("abab ba ab baab\n", f);
    fclose(f);
}

static void test_oom_generate_and_eval(void **state) {
    (void)state;
    char text[300], args[700];
    ab_text(text, sizeof text);
    Sweep gen = {.args = "generate --model tests/fixtures/gpt_a.kvgp --steps 3 --prompt ab --seed 1 --threads 2",
                 .same_stdout = 1};
    sweep(&gen);
    snprintf(args, sizeof args, "eval --model tests/fixtures/gpt_a.kvgp --data %s", text);
    Sweep eval = {.args = args, .same_stdout = 1};
    sweep(&eval);
}

// The caches done differently (src/model/kvvariant.c): eval through an
// int8 cache (its quantised cache, the logits of a window), generate
// through a faulty cache over it (the faulty one besides).
static void test_oom_cache_variants(void **state) {
    (void)state;
    char text[300], args[700];
    ab_text(text, sizeof text);
    snprintf(args, sizeof args, "eval --model tests/fixtures/gpt_a.kvgp --data %s --kv-dtype int8", text);
    Sweep eval = {.args = args, .same_stdout = 1};
    sweep(&eval);
    Sweep gen = {.args = "generate --model tests/fixtures/gpt_a.kvgp --steps 3 --prompt ab --seed 1 --kv-dtype int8 "
                         "--bug stale",
                 .same_stdout = 1};
    sweep(&gen);
}

// The LLaMA-style model's generate on the T = 16 fixture: with --window (the
// rolling cache, its generation, sampling) and with --draft (the
// speculative rounds).
static void test_oom_llama(void **state) {
    (void)state;
#define LLAMA_FIXTURE "--model tests/fixtures/llama_mha.bin --prompt 天气 --seed 1"
    static const char *const ARGS[] = {
        "generate " LLAMA_FIXTURE " --steps 20 --window 8",
        "generate " LLAMA_FIXTURE " --steps 3 --draft tests/fixtures/llama_mqa.bin --temperature 0",
    };
    for (size_t i = 0; i < sizeof ARGS / sizeof ARGS[0]; i++) {
        Sweep s = {.args = ARGS[i], .same_stdout = 1};
        sweep(&s);
    }
}

// llama2.c's model and tokenizer (src/cmd/llama2ccmd.c): generate (the
// tokenizer's work space too: out of memory there is exit 1, no usage
// error) and bench.
static void test_oom_llama2c(void **state) {
    (void)state;
#define LLAMA2C_PAIR "--model tests/fixtures/llama2c_gqa.bin --tokenizer tests/fixtures/llama2c_tok.bin"
    Sweep gen = {.args = "generate " LLAMA2C_PAIR " --prompt 'Once upon a time' --steps 4 --seed 1", .same_stdout = 1};
    sweep(&gen);
    Sweep bench = {.args = "bench " LLAMA2C_PAIR " --steps 4 --repeat 1"};
    sweep(&bench);
}

// The char GPT's speculative decoding (src/cmd/speccmd.c), as text: its
// states, sampler and rounds, on two random tiny models.
static void test_oom_draft(void **state) {
    (void)state;
    char target[300], draft[300], args[800];
    snprintf(target, sizeof target, "%s/t.bin", dir);
    snprintf(draft, sizeof draft, "%s/d.bin", dir);
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "init --preset tiny --seed %d --out %s", 7 + i, i ? draft : target);
        RunResult r = kvdemo_run(args);
        if (r.status != 0) fail_msg("kvdemo %s: %s", args, r.err);
        run_free(&r);
    }
    snprintf(args, sizeof args, "generate --model %s --draft %s --prompt ROMEO: --steps 6 --seed 1", target, draft);
    Sweep s = {.args = args, .same_stdout = 1};
    sweep(&s);
    unlink(target);
    unlink(draft);
}

// train writes the model, its checkpoint and the log; init the model.
static void test_oom_train_and_init(void **state) {
    (void)state;
    char text[300], model[300], log[300], args[1200];
    snprintf(text, sizeof text, "%s/text.txt", dir);
    snprintf(model, sizeof model, "%s/m.bin", dir);
    snprintf(log, sizeof log, "%s/m.csv", dir);
    FILE *f = fopen(text, "w");
    assert_non_null(f);
    for (int i = 0; i < 300; i++) fputs("the cat sees the moon. a dog likes the sea.\n", f);
    fclose(f);
    snprintf(args, sizeof args,
             "train --preset tiny --context 16 --embedding 16 --heads 2 --blocks 1 --batch 4 --iters 2 --threads 1 "
             "--data %s --out %s --log %s",
             text, model, log);
    Sweep train = {.args = args, .outputs = {model, log}, .exact = {1, 0}};
    sweep(&train);
    snprintf(args, sizeof args, "init --preset tiny --out %s", model);
    Sweep init = {.args = args, .outputs = {model}, .exact = {1}, .same_stdout = 1};
    sweep(&init);
}

// A lesson's trace: the text is built in memory before it is printed.
static void test_oom_lesson(void **state) {
    (void)state;
    Sweep l9 = {.args = "lesson 9 --trace none", .same_stdout = 1};
    sweep(&l9);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oom_generate_and_eval),
        cmocka_unit_test(test_oom_cache_variants),
        cmocka_unit_test(test_oom_llama),
        cmocka_unit_test(test_oom_draft),
        cmocka_unit_test(test_oom_llama2c),
        cmocka_unit_test(test_oom_train_and_init),
        cmocka_unit_test(test_oom_lesson),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
