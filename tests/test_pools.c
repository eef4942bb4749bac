// test_pools — the threads of the arithmetic travel in the state, not the
// process: each state runs on the pool its caller hands it (NULL: the
// calling thread), and nothing of one run's threads is left for the next.
//
//   test_gpt_states_on_two_pools_agree     one char GPT, two states on 1 and 2 threads, side by side
//                                          in one process: every step's logits, bit for bit, plain
//                                          and tiled attention
//   test_llama_states_on_two_pools_agree   the same for the LLaMA-style model, a batch of two rows
//   test_a_state_starts_on_its_own_thread  a state made after another ran on a pool has none
//   test_commands_leave_no_threads         generate and a lesson run in this process on --threads 2:
//                                          each says its own count, and no thread is left after it
//
// Nothing here is timed; the expected bits are those of the same model on
// the other pool (kvdemo's kernels sum in one order whatever the threads).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "gpt.h"
#include "llama.h"
#include "pool.h"
#include "rng.h"

// A char GPT of random weights, wide enough (C = 128: fc1 is 128 x 512 per
// row) that its matmuls are shared among the threads even on one row.
static void random_gpt(GptModel *m, GptConfig cfg) {
    uint32_t vocab[64];
    for (int i = 0; i < cfg.V; i++) vocab[i] = (uint32_t)('A' + i);
    char err[256];
    if (gpt_init_random(m, cfg, vocab, 3, ERR(LANG_EN, err)) != 0) fail_msg("gpt_init_random: %s", err);
}

// Where want and got (n floats, the first state's and the second's) first
// differ, as a failure naming what.
static void expect_bits(const float *want, const float *got, int n, const char *what, int step) {
    for (int i = 0; i < n; i++)
        if (memcmp(&want[i], &got[i], sizeof(float)) != 0)
            fail_msg("%s, step %d: logit %d: the first state %.9g, the second %.9g", what, step, i, want[i], got[i]);
}

// The first pass (a prompt of 5), then cached steps to the context's end,
// the two states taking turns: each step of one state between two of the
// other's, on pools that stay alive side by side.
static void gpt_side_by_side(const GptModel *m, GptState s[2], const char *what) {
    GptConfig g = m->cfg;
    int tokens[64];
    for (int i = 0; i < g.T; i++) tokens[i] = (i * 7 + 3) % g.V;
    for (int k = 0; k < 2; k++) gpt_state_reset(&s[k]);
    for (int step = 0, n = 5; n <= g.T; step++, n++) {
        const float *out[2];
        for (int k = 0; k < 2; k++)
            out[k] = step == 0 ? gpt_forward(&s[k], m, tokens, n, 0) : gpt_forward(&s[k], m, tokens + n - 1, 1, n - 1);
        expect_bits(out[0], out[1], g.V, what, step);
    }
}

static void test_gpt_states_on_two_pools_agree(void **state) {
    (void)state;
    GptConfig g = {.V = 40, .T = 24, .C = 128, .H = 4, .L = 2};
    GptModel m;
    random_gpt(&m, g);
    GptState s[2];
    Pool *pool[2] = {pool_new(1), pool_new(2)};
    assert_non_null(pool[0]);
    assert_non_null(pool[1]);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(gpt_state_init(&s[k], g), 0);
        s[k].pool = pool[k];
    }
    gpt_side_by_side(&m, s, "plain attention");
    for (int k = 0; k < 2; k++) assert_int_equal(kvcontig_set_tile(&s[k].cache, 8), 0);
    gpt_side_by_side(&m, s, "tiled attention (flash-decoding on a cached step)");
    // each pool as it was handed over: no run changed another's threads
    assert_int_equal(pool_threads(s[0].pool), 1);
    assert_int_equal(pool_threads(s[1].pool), 2);
    for (int k = 0; k < 2; k++) {
        gpt_state_free(&s[k]);
        pool_free(pool[k]);
    }
    gpt_free(&m);
}

static void test_llama_states_on_two_pools_agree(void **state) {
    (void)state;
    LlamaConfig cfg = llama_config_default();
    cfg.dim = 128, cfg.n_heads = 4, cfg.n_kv_heads = 2, cfg.hidden_dim = 384;   // wq 128 x 128, w1 128 x 384
    LlamaModel m;
    char err[256];
    if (llama_new(&m, &cfg, ERR(LANG_EN, err)) != 0) fail_msg("llama_new: %s", err);
    llama_init_random(&m, 5);
    int T = m.cfg.max_seq_len, V = m.cfg.vocab_size, B = 2;
    LlamaState s[2];
    Pool *pool[2] = {pool_new(1), pool_new(2)};
    assert_non_null(pool[0]);
    assert_non_null(pool[1]);
    for (int k = 0; k < 2; k++) {
        if (llama_state_init(&s[k], &m, B, ERR(LANG_EN, err)) != 0) fail_msg("llama_state_init: %s", err);
        s[k].pool = pool[k];
    }
    int *tokens = malloc(sizeof(int) * (size_t)B * T);
    float *logits = malloc(sizeof(float) * 2 * (size_t)B * V);
    assert_non_null(tokens);
    assert_non_null(logits);
    for (int i = 0; i < B * T; i++) tokens[i] = 3 + (i * 5) % (V - 3);
    // a prompt of 4 in both rows, then one token a step against the cache
    for (int step = 0, pos = 0; pos < T; step++, pos += step == 1 ? 4 : 1) {
        int n = step == 0 ? 4 : 1;
        for (int k = 0; k < 2; k++)
            llama_forward(logits + (size_t)k * B * V, &s[k], &m, tokens + pos, pos, B, n, T);
        expect_bits(logits, logits + (size_t)B * V, B * V, "LLaMA-style, two rows", step);
    }
    free(tokens);
    free(logits);
    for (int k = 0; k < 2; k++) {
        llama_state_free(&s[k]);
        pool_free(pool[k]);
    }
    llama_free(&m);
}

static void test_a_state_starts_on_its_own_thread(void **state) {
    (void)state;
    GptConfig g = {.V = 40, .T = 16, .C = 128, .H = 4, .L = 1};
    GptModel m;
    random_gpt(&m, g);
    GptState a, b;
    Pool *three = pool_new(3);
    assert_non_null(three);
    assert_int_equal(gpt_state_init(&a, g), 0);
    a.pool = three;
    int tokens[16] = {1, 2, 3, 4, 5, 6, 7, 8};
    gpt_forward(&a, &m, tokens, 8, 0);
    assert_int_equal(gpt_state_init(&b, g), 0);
    if (b.pool != NULL) fail_msg("a new state: expected no pool (the calling thread), got one of %d threads", pool_threads(b.pool));
    gpt_forward(&b, &m, tokens, 8, 0);
    expect_bits(a.logits, b.logits, g.V, "3 threads against a state of its own thread", 0);
    assert_int_equal(pool_threads(a.pool), 3);
    gpt_state_free(&a);
    gpt_state_free(&b);
    pool_free(three);
    gpt_free(&m);
}

// The threads this process has now (Linux: /proc/self/task), or -1.
static int threads_now(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

// cli_main on args (split at spaces), stdout into out (size bytes, the
// start of it). Returns the exit status.
static int run_here(const char *args, char *out, size_t size) {
    char buf[512], *argv[32];
    snprintf(buf, sizeof buf, "kvdemo %s", args);
    int argc = 0;
    for (char *t = strtok(buf, " "); t && argc < 31; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc] = NULL;
    char path[] = "/tmp/kvdemo-test-pools-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    dup2(fd, STDOUT_FILENO);
    Lang lang = LANG_EN;
    int rc = cli_main(argc, argv, &lang);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t got = read(fd, out, size - 1);
    out[got > 0 ? got : 0] = '\0';
    close(fd);
    unlink(path);
    return rc;
}

static void test_commands_leave_no_threads(void **state) {
    (void)state;
    int before = threads_now();
    if (before < 0) skip();   // no /proc: nothing to count the threads by
    static char out[1 << 16];
    // generate says the threads it ran on: --threads 2 (more would be capped
    // to the cores; every test machine has two), then tiny's own count
    // (--threads 0: one thread for its shape, pool.h), whatever ran before
    if (pool_cores() < 2) skip();
    const char *gen = "generate --init random --preset tiny --steps 8 --temperature 0";
    char args[256];
    snprintf(args, sizeof args, "%s --threads 2", gen);
    assert_int_equal(run_here(args, out, sizeof out), 0);
    if (!strstr(out, ", 2 threads")) fail_msg("generate --threads 2: expected \", 2 threads\" in:\n%s", out);
    if (threads_now() != before) fail_msg("after generate --threads 2: expected %d threads, got %d", before, threads_now());
    // a lesson that makes its threads from --threads, in the same process
    assert_int_equal(run_here("lesson 5 --init random --preset tiny --threads 2 --format json", out, sizeof out), 0);
    if (threads_now() != before) fail_msg("after lesson 5 --threads 2: expected %d threads, got %d", before, threads_now());
    assert_int_equal(run_here(gen, out, sizeof out), 0);
    if (!strstr(out, ", 1 thread,") && !strstr(out, ", 1 thread\n"))
        fail_msg("generate after two runs on 2 threads: expected \", 1 thread\" (tiny's own count) in:\n%s", out);
    if (threads_now() != before) fail_msg("after generate: expected %d threads, got %d", before, threads_now());
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt_states_on_two_pools_agree),
        cmocka_unit_test(test_llama_states_on_two_pools_agree),
        cmocka_unit_test(test_a_state_starts_on_its_own_thread),
        cmocka_unit_test(test_commands_leave_no_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
