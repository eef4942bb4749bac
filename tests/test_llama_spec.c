// test_llama_spec — speculative decoding on the LLaMA-style model
// (src/model/llama_spec.h). The references are the target alone: its own
// greedy text (llama_generate) and a cache rebuilt from scratch by one pass.
//
//   test_greedy_equals_target       K = 1..8, prompts of 3, 7 and 18 tokens, up to the
//                                   context: the speculative tokens == llama_generate's
//                                   greedy ones, MHA and GQA targets, three drafts (the
//                                   target itself, a perturbed copy, another model)
//   test_shipped_greedy             the shipped model and its shipped draft, K = 1..8
//   test_rollback_equals_rebuilt    after every round, the target's and the draft's
//                                   cache_k / cache_v = one pass over the kept text, bit for bit
//   test_sampling_follows_rule      at temperature 1 a draft that is the target keeps every
//                                   token; the tokens stay in the target's top-p nucleus
//   test_check_rejects_mismatch     another vocabulary, a shorter context, gamma 0 / 17
//   test_generate_llama_draft       kvdemo generate --model LLAMA --draft: the target's greedy
//                                   text; a draft of another vocabulary or kind, one line each
#include "testutil.h"

#include "llama.h"
#include "llama_spec.h"
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ----------------------------------------------------------------------------
// Models

// The target's weights, each moved by a relative eps: a draft that agrees
// with it often, not always.
static void perturbed_copy(LlamaModel *m, const LlamaModel *target, double eps, uint64_t seed) {
    char err[256];
    if (llama_new(m, &target->cfg, ERR(LANG_EN, err)) != 0) fail_msg("llama_new: %s", err);
    llama_vocab_default(m);
    uint64_t r = seed;
    for (size_t i = 0; i < m->num_params; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0;   // uniform in [-1, 1)
        m->params[i] = (float)(target->params[i] * (1.0 + eps * u));
    }
}

static void load(LlamaModel *m, const char *path) {
    char err[512];
    if (llama_load(m, path, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
}

// llama_generate's greedy tokens after prompt (bos first) into want;
// returns how many (the context permitting, prompt + steps).
static int target_greedy(int *want, const LlamaModel *m, const char *prompt, int steps) {
    LlamaState s;
    LlamaGeneration g;
    char err[256];
    llama_state_for_test(&s, m, 1);
    if (llama_generation_new(&g, &s, m, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    LlamaGenOptions o = {.max_gen_len = steps, .temperature = 0.0f, .top_p = 0.95f, .use_cache = 1};
    const char *prompts[] = {prompt};
    if (llama_generate(&g, &s, m, prompts, 1, &o, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    memcpy(want, g.tokens, sizeof(int) * (size_t)g.total_len);
    int n = g.total_len;
    llama_generation_free(&g);
    llama_state_free(&s);
    return n;
}

// The speculative tokens (greedy) of target and draft after prompt.
static int spec_greedy(int *got, const LlamaModel *t, const LlamaModel *d, int K, const char *prompt, int steps,
                       SpecStats *stats) {
    LlamaState ts, ds;
    LlamaSpec sp;
    char err[256];
    llama_state_for_test(&ts, t, 1);
    llama_state_for_test(&ds, d, 1);
    assert_int_equal(llama_spec_init(&sp, (LlamaSpecModel){t, &ts}, (LlamaSpecModel){d, &ds}, K, 0.0f, 0.95f, NULL), 0);
    int n = llama_encode(got, t, prompt, 1, 0, t->cfg.max_seq_len, ERR(LANG_EN, err));
    if (n < 0) fail_msg("%s", err);
    int len = llama_spec_generate(got, &sp, n, steps, NULL, NULL);
    *stats = sp.stats;
    llama_spec_free(&sp);
    llama_state_free(&ts);
    llama_state_free(&ds);
    return len;
}

static void expect_tokens(const int *got, int n_got, const int *want, int n_want, const char *what) {
    if (n_got != n_want) fail_msg("%s: %d tokens, expected %d", what, n_got, n_want);
    for (int i = 0; i < n_want; i++)
        if (got[i] != want[i]) fail_msg("%s: token %d is %d, expected %d (the target's greedy)", what, i, got[i], want[i]);
}

// ----------------------------------------------------------------------------
// Greedy: the target's own text

static void test_greedy_equals_target(void **st) {
    (void)st;
    static const char *const prompts[] = {"天气", "ROMEO:", "the quick brown f"};   // 3, 7, 18 tokens with bos
    for (int G = 4; G >= 2; G -= 2) {
        LlamaModel t, near, other;
        llama_model_for_test(&t, 4, G, 11);
        perturbed_copy(&near, &t, 0.3, 5);
        llama_model_for_test(&other, 2, 2, 29);
        const LlamaModel *drafts[] = {&t, &near, &other};
        int accepted[3] = {0}, drafted[3] = {0};
        for (int p = 0; p < 3; p++) {
            int want[64], got[128];
            int n = target_greedy(want, &t, prompts[p], 40);   // up to the context, 32
            for (int d = 0; d < 3; d++)
                for (int K = 1; K <= 8; K++) {
                    SpecStats s;
                    char what[128];
                    snprintf(what, sizeof what, "G %d, prompt \"%s\", draft %d, K %d", G, prompts[p], d, K);
                    expect_tokens(got, spec_greedy(got, &t, drafts[d], K, prompts[p], 40, &s), want, n, what);
                    accepted[d] += s.accepted, drafted[d] += s.drafted;
                }
        }
        // the drafts do what they are for: every guess kept, some, and few
        assert_int_equal(accepted[0], drafted[0]);
        assert_true(accepted[1] > 0 && accepted[1] < drafted[1]);
        assert_true(accepted[2] < drafted[2]);
        llama_free(&t), llama_free(&near), llama_free(&other);
    }
}

static void test_shipped_greedy(void **st) {
    (void)st;
    LlamaModel t, d;
    load(&t, "data/tinyshakespeare-llama-mha.bin");
    load(&d, "data/tinyshakespeare-llama-draft.bin");
    int want[256], got[256];
    int n = target_greedy(want, &t, "ROMEO:", 121);   // the whole context, 128
    assert_int_equal(n, 128);
    for (int K = 1; K <= 8; K++) {
        SpecStats s;
        char what[64];
        snprintf(what, sizeof what, "shipped models, K %d", K);
        expect_tokens(got, spec_greedy(got, &t, &d, K, "ROMEO:", 121, &s), want, n, what);
        assert_true(s.accepted > 0 && s.accepted < s.drafted);
    }
    llama_free(&t), llama_free(&d);
}

// ----------------------------------------------------------------------------
// The rollback

typedef struct {
    LlamaSpec *sp;
    const int *tokens;
    int checked;
} RebuildCheck;

// m's cache_k and cache_v of positions 0 .. len-1 against one llama_forward
// over tokens[0 .. len-1] on a fresh state.
static void expect_rebuilt(const LlamaSpecModel *m, const int *tokens, int len, const char *who, int round) {
    const LlamaConfig *c = &m->m->cfg;
    LlamaState fresh;
    float logits[512];
    assert_true(c->vocab_size <= 512);
    llama_state_for_test(&fresh, m->m, 1);
    if (len > 0) llama_forward(logits, &fresh, m->m, tokens, 0, 1, len, len);
    size_t row = (size_t)c->n_kv_heads * c->head_dim;
    for (int l = 0; l < c->n_layers; l++)
        for (int t = 0; t < len; t++) {
            size_t at = ((size_t)l * c->max_seq_len + t) * row;
            for (size_t i = 0; i < row; i++) {
                float gk = m->s->cache.cache_k[at + i], wk = fresh.cache.cache_k[at + i];
                float gv = m->s->cache.cache_v[at + i], wv = fresh.cache.cache_v[at + i];
                if (memcmp(&gk, &wk, sizeof gk) || memcmp(&gv, &wv, sizeof gv))
                    fail_msg("round %d, %s: layer %d position %d [%zu]: cache_k %.9g / cache_v %.9g, "
                             "rebuilt %.9g / %.9g", round, who, l, t, i, gk, gv, wk, wv);
            }
        }
    llama_state_free(&fresh);
}

static int check_round(void *ctx, const SpecRound *r) {
    RebuildCheck *c = ctx;
    int kept = r->len + r->accepted;
    assert_int_equal(r->target_after, kept);
    assert_true(r->draft_after <= kept);
    assert_int_equal(r->target_verify, r->len + r->gamma);
    expect_rebuilt(&c->sp->target, c->tokens, r->target_after, "target", r->round);
    expect_rebuilt(&c->sp->draft, c->tokens, r->draft_after, "draft", r->round);
    c->checked += r->accepted < r->gamma;
    return 0;
}

static void test_rollback_equals_rebuilt(void **st) {
    (void)st;
    LlamaModel t, d;
    llama_model_for_test(&t, 4, 2, 11);
    perturbed_copy(&d, &t, 0.3, 5);
    for (int K = 1; K <= 8; K += 3) {
        LlamaState ts, ds;
        LlamaSpec sp;
        int tokens[64];
        char err[256];
        llama_state_for_test(&ts, &t, 1);
        llama_state_for_test(&ds, &d, 1);
        assert_int_equal(llama_spec_init(&sp, (LlamaSpecModel){&t, &ts}, (LlamaSpecModel){&d, &ds}, K, 0.0f, 0.95f, NULL), 0);
        int n = llama_encode(tokens, &t, "ROMEO:", 1, 0, 32, ERR(LANG_EN, err));
        RebuildCheck c = {&sp, tokens, 0};
        assert_int_equal(llama_spec_generate(tokens, &sp, n, 30, check_round, &c), 32);
        assert_true(c.checked > 0);   // some rounds ended on a rejection: their rows were cut
        llama_spec_free(&sp);
        llama_state_free(&ts);
        llama_state_free(&ds);
    }
    llama_free(&t), llama_free(&d);
}

// ----------------------------------------------------------------------------
// Sampling

static void test_sampling_follows_rule(void **st) {
    (void)st;
    LlamaModel t;
    llama_model_for_test(&t, 4, 4, 11);
    LlamaState ts, ds;
    Sampler sampler;
    SpecMt mt;
    LlamaSpec sp;
    int tokens[64];
    char err[256];
    int V = t.cfg.vocab_size;
    llama_state_for_test(&ts, &t, 1);
    llama_state_for_test(&ds, &t, 1);
    assert_int_equal(sampler_init(&sampler, V, 1.0f, 0, 7), 0);
    spec_mt_init(&mt, &sampler);
    assert_int_equal(llama_spec_init(&sp, (LlamaSpecModel){&t, &ts}, (LlamaSpecModel){&t, &ds}, 4, 1.0f, 0.5f, &mt.base), 0);
    int n = llama_encode(tokens, &t, "ROMEO:", 1, 0, 32, ERR(LANG_EN, err));
    int len = llama_spec_generate(tokens, &sp, n, 30, NULL, NULL);
    assert_int_equal(len, 32);
    // p == q at every row: min(1, p/q) = 1, every drafted token kept
    assert_int_equal(sp.stats.accepted, sp.stats.drafted);
    // every token inside the target's top-p nucleus at its position
    LlamaState ref;
    float logits[512], probs[512], sorted[512];
    int order[512];
    llama_state_for_test(&ref, &t, 1);
    for (int i = n; i < len; i++) {
        llama_forward(logits, &ref, &t, tokens, 0, 1, i, i);
        for (int v = 0; v < V; v++) probs[v] = logits[v];
        ops_softmax_rows(probs, probs, 1, V, OPS_DIVIDE);
        llama_sample_top_p(sorted, order, probs, 0.5f, 0.0f, V);
        int inside = 0;
        for (int k = 0; k < V; k++) inside |= order[k] == tokens[i] && sorted[k] > 0.0f;
        if (!inside) fail_msg("token %d (%d) is outside the target's top-p 0.5 nucleus", i, tokens[i]);
    }
    llama_state_free(&ref);
    llama_spec_free(&sp);
    sampler_free(&sampler);
    llama_state_free(&ts);
    llama_state_free(&ds);
    llama_free(&t);
}

// ----------------------------------------------------------------------------
// Mismatches

static void test_check_rejects_mismatch(void **st) {
    (void)st;
    LlamaModel t, shipped, short_ctx;
    char err[256];
    llama_model_for_test(&t, 4, 4, 11);
    load(&shipped, "data/tinyshakespeare-llama-draft.bin");
    LlamaConfig c = t.cfg;
    c.max_seq_len = 16;
    if (llama_new(&short_ctx, &c, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    llama_vocab_default(&short_ctx);
    assert_int_equal(llama_spec_check(&t, &t, 1, ERR(LANG_EN, err)), 0);
    assert_int_equal(llama_spec_check(&t, &t, 16, ERR(LANG_EN, err)), 0);
    assert_int_equal(llama_spec_check(&t, &shipped, 4, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "is not the target's"));
    assert_int_equal(llama_spec_check(&t, &short_ctx, 4, ERR(LANG_EN, err)), -1);
    assert_non_null(strstr(err, "the draft's context 16 is shorter than the target's 32"));
    assert_int_equal(llama_spec_check(&t, &t, 0, ERR(LANG_EN, err)), -1);
    assert_int_equal(llama_spec_check(&t, &t, 17, ERR(LANG_ZH, err)), -1);
    assert_non_null(strstr(err, "超出范围"));
    llama_free(&t), llama_free(&shipped), llama_free(&short_ctx);
}

// ----------------------------------------------------------------------------
// kvdemo generate --model LLAMA --draft LLAMADRAFT

// The "text" event of a JSON run, from its name to the end of its line.
static char *text_event(const char *args) {
    RunResult r = kvdemo_run(args);
    if (r.status) fail_msg("kvdemo %s: exit status %d: %s", args, r.status, r.err);
    const char *at = strstr(r.out, "\"name\":\"text\"");
    if (!at) fail_msg("kvdemo %s: no text event in: %.200s", args, r.out);
    char *text = strndup(at, strcspn(at, "\n"));
    run_free(&r);
    return text;
}

static void test_generate_llama_draft(void **st) {
    (void)st;
#define LLAMA_SPEC_ARGS "--model data/tinyshakespeare-llama-mha.bin --temperature 0 --steps 60 --format json"
    char *want = text_event("generate " LLAMA_SPEC_ARGS);
    for (int K = 1; K <= 8; K += 7) {
        char args[512];
        snprintf(args, sizeof args, "generate --draft data/tinyshakespeare-llama-draft.bin --gamma %d " LLAMA_SPEC_ARGS, K);
        char *got = text_event(args);
        if (strcmp(got, want)) fail_msg("kvdemo %s:\n  target alone %.120s\n  speculative  %.120s", args, want, got);
        free(got);
    }
    free(want);
    // a LLaMA file of kvdemo's default vocabulary
    char other[] = "/tmp/kvdemo-llama-spec-XXXXXX", args[512], err[256];
    int fd = mkstemp(other);
    assert_true(fd >= 0);
    close(fd);
    LlamaModel m;
    llama_model_for_test(&m, 4, 4, 3);
    if (llama_save(&m, other, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    llama_free(&m);
    snprintf(args, sizeof args, "generate --model data/tinyshakespeare-llama-mha.bin --draft %s", other);
    expect_failure(args, 1, "the draft's vocabulary");
    snprintf(args, sizeof args, "--lang zh generate --model data/tinyshakespeare-llama-mha.bin --draft %s", other);
    expect_failure(args, 1, "草稿模型的词表");
    unlink(other);
    expect_failure("generate --model data/tinyshakespeare-llama-mha.bin --draft data/tinyshakespeare-draft.bin", 1,
                   "not a kvdemo LLaMA model file");
    expect_failure("generate --model data/tinyshakespeare-llama-mha.bin --draft data/tinyshakespeare-llama-draft.bin "
                   "--no-cache", 2, "--draft needs the KV cache");
    expect_failure("generate --model data/tinyshakespeare-llama-mha.bin --gamma 3", 2, "--gamma goes with --draft FILE");
}

// generate --draft on a LLaMA pair as text, past the context (T 16): the
// text, then the context's end said; and its refusals: two prompts, a
// target cut short, a prompt outside the vocabulary.
static void test_generate_llama_draft_text(void **st) {
    (void)st;
#define FIXTURE_PAIR "--model tests/fixtures/llama_mha.bin --draft tests/fixtures/llama_mqa.bin"
    RunResult r = kvdemo_run("generate " FIXTURE_PAIR " --prompt 天气 --temperature 0 --steps 30 --gamma 2");
    const char *end = "-- the context (max_seq_len 16) ended the text before --steps 30";
    if (r.status != 0 || strncmp(r.out, "天气", strlen("天气")) != 0 || !strstr(r.out, end))
        fail_msg("generate --draft past the context: expected exit 0, the text from \"天气\" and \"%s\", got %d: %s%s",
                 end, r.status, r.out, r.err);
    run_free(&r);
    expect_failure("generate " FIXTURE_PAIR " --prompt 天气 --prompt 你好", 2, "--draft takes one prompt");
    expect_failure("generate " FIXTURE_PAIR " --prompt xyz", 1, "xyz");
    char cut[] = "/tmp/kvdemo-llama-cut-XXXXXX", args[512];   // a LLaMA header, then short
    int fd = mkstemp(cut);
    assert_true(fd >= 0);
    FILE *in = fopen("tests/fixtures/llama_mha.bin", "rb");
    assert_non_null(in);
    char head[200];
    assert_int_equal(fread(head, 1, sizeof head, in), sizeof head);
    fclose(in);
    assert_int_equal(write(fd, head, sizeof head), (ssize_t)sizeof head);
    close(fd);
    snprintf(args, sizeof args, "generate --model %s --draft tests/fixtures/llama_mqa.bin --prompt 天气", cut);
    expect_failure(args, 1, cut);
    unlink(cut);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_equals_target),
        cmocka_unit_test(test_shipped_greedy),
        cmocka_unit_test(test_rollback_equals_rebuilt),
        cmocka_unit_test(test_sampling_follows_rule),
        cmocka_unit_test(test_check_rejects_mismatch),
        cmocka_unit_test(test_generate_llama_draft),
        cmocka_unit_test(test_generate_llama_draft_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
