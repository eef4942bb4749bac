// test_reliability — what a careful tester found wrong once, kept right:
// writers that refuse a path that is not a regular file and leave no stale
// temporary file, a bad --out found before training, recipes checked on
// load, lost writes to standard output reported, a subnormal temperature,
// loaders that read the header before the rest, the training text's size
// cap, --threads capped at the cores, and training killed with kill -9 at
// fixed points (the checkpoint and the model are always the previous or the
// new good file, and resuming gives the bytes of an uninterrupted run).
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint.h"
#include "fileio.h"
#include "gpt.h"
#include "llama.h"
#include "sampler.h"
#include "testutil.h"
#include "train.h"

// ---------------------------------------------------------------------------
// Helpers

static char dir[64];

static int setup(void **state) {
    (void)state;
    return tmpdir_make(dir, sizeof dir, "rel");
}

static int teardown(void **state) {
    (void)state;
    return tmpdir_remove(dir);
}

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

// The whole file, or NULL (size set) when it cannot be read.
static unsigned char *slurp_file(const char *path, long *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)*size + 1);
    assert_non_null(b);
    size_t got = fread(b, 1, (size_t)*size, f);
    fclose(f);
    assert_int_equal(got, (size_t)*size);
    return b;
}

static void expect_same_file(const char *got_path, const char *want_path, const char *what) {
    long ng = 0, nw = 0;
    unsigned char *g = slurp_file(got_path, &ng), *w = slurp_file(want_path, &nw);
    if (!g || !w) fail_msg("%s: cannot read %s or %s", what, got_path, want_path);
    if (ng != nw) fail_msg("%s: size %ld, expected %ld", what, ng, nw);
    for (long i = 0; i < ng; i++)
        if (g[i] != w[i]) fail_msg("%s: byte %ld: expected 0x%02x, got 0x%02x", what, i, w[i], g[i]);
    free(g);
    free(w);
}

// A made-up text of a few thousand characters: enough for the tiny preset.
static void write_text(const char *path) {
    static const char *subj[] = {"the cat", "a dog", "my friend", "the king"};
    static const char *verb[] = {" sees ", " likes ", " sings to "};
    static const char *obj[] = {"the moon.\n", "a tree.\n", "the sea.\n"};
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    uint64_t r = 11;
    for (long written = 0; written < 6000;) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        written += fprintf(f, "%s%s%s", subj[(r >> 33) % 4], verb[(r >> 40) % 3], obj[(r >> 50) % 3]);
    }
    fclose(f);
}

// Runs f() with stderr sent to /dev/null.
#define QUIET(expr)                                                 \
    do {                                                            \
        fflush(stderr);                                             \
        int saved_ = dup(2);                                        \
        assert_non_null(freopen("/dev/null", "w", stderr));         \
        expr;                                                       \
        fflush(stderr);                                             \
        dup2(saved_, 2);                                            \
        close(saved_);                                              \
    } while (0)

// ---------------------------------------------------------------------------
// 1. Writers refuse a path that exists and is not a regular file.

static void test_writers_refuse_non_regular_files(void **state) {
    (void)state;
    char fifo[128], link[128], target[128], sub[128], args[512];
    path_in(fifo, sizeof fifo, "fifo");
    path_in(link, sizeof link, "link.bin");
    path_in(target, sizeof target, "target.bin");
    path_in(sub, sizeof sub, "folder");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    FILE *t = fopen(target, "w");
    assert_non_null(t);
    fputs("keep me", t);
    fclose(t);
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(mkdir(sub, 0700), 0);
    const char *paths[] = {fifo, link, sub};
    const char *kinds[] = {"a FIFO", "a symbolic link", "a folder"};
    for (int i = 0; i < 3; i++) {
        // the command line: one line, exit 1, and the path left as it was
        snprintf(args, sizeof args, "init --preset tiny --out %s", paths[i]);
        expect_failure(args, 1, kinds[i]);
        snprintf(args, sizeof args, "bench --init random --preset tiny --steps 1 --repeat 1 --csv %s",
                 paths[i]);
        expect_failure(args, 1, kinds[i]);
        // every writer of the library
        GptModel m;
        char err[512];
        uint32_t vocab[3] = {'a', 'b', 'c'};
        assert_int_equal(gpt_init_random(&m, (GptConfig){3, 4, 8, 2, 1}, vocab, 1, ERR(LANG_EN, err)), 0);
        if (gpt_save(&m, paths[i], ERR(LANG_EN, err)) == 0) fail_msg("gpt_save over %s: expected a refusal", kinds[i]);
        if (!strstr(err, kinds[i])) fail_msg("gpt_save over %s: message \"%s\" does not say so", kinds[i], err);
        gpt_free(&m);
        LlamaConfig lc = {.vocab_size = llama_default_vocab_size(), .dim = 8, .n_layers = 1, .n_heads = 2,
                          .n_kv_heads = 1, .hidden_dim = 16, .max_seq_len = 8,
                          .rope_theta = 10000.0f, .norm_eps = 1e-5f};
        LlamaModel lm;
        assert_int_equal(llama_new(&lm, &lc, ERR(LANG_EN, err)), 0);
        llama_vocab_default(&lm);
        if (llama_save(&lm, paths[i], ERR(LANG_EN, err)) == 0)
            fail_msg("llama_save over %s: expected a refusal", kinds[i]);
        llama_free(&lm);
        TrainCheckpoint ck = {0};
        int rc;
        rc = train_checkpoint_save(paths[i], &ck, ERR(LANG_EN, err));
        if (rc == 0) fail_msg("train_checkpoint_save over %s: expected a refusal", kinds[i]);
    }
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    if (!S_ISFIFO(st.st_mode)) fail_msg("%s: expected a FIFO still, got mode 0%o", fifo, (unsigned)st.st_mode);
    assert_int_equal(lstat(link, &st), 0);
    if (!S_ISLNK(st.st_mode)) fail_msg("%s: expected a symbolic link still, got mode 0%o", link, (unsigned)st.st_mode);
    long n = 0;
    unsigned char *kept = slurp_file(target, &n);
    assert_non_null(kept);
    if (n != 7 || memcmp(kept, "keep me", 7) != 0) fail_msg("%s: the link's target was changed", target);
    free(kept);
}

// ---------------------------------------------------------------------------
// 7. One temporary name per output, a stale one removed by the next write.

static void test_stale_temporary_file_is_removed(void **state) {
    (void)state;
    char model[128], tmp[160];
    path_in(model, sizeof model, "stale.kvgp");
    snprintf(tmp, sizeof tmp, "%s.tmp", model);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs("left by a killed save", f);
    fclose(f);
    GptModel m, back;
    char err[512];
    uint32_t vocab[3] = {'a', 'b', 'c'};
    assert_int_equal(gpt_init_random(&m, (GptConfig){3, 4, 8, 2, 1}, vocab, 1, ERR(LANG_EN, err)), 0);
    if (gpt_save(&m, model, ERR(LANG_EN, err)) != 0) fail_msg("gpt_save: %s", err);
    if (exists(tmp)) fail_msg("%s: expected the stale temporary file removed, it is still there", tmp);
    if (gpt_load(&back, model, ERR(LANG_EN, err)) != 0) fail_msg("gpt_load: %s", err);
    assert_bits(back.params, m.params, (int64_t)m.num_params, "weights after a save over a stale PATH.tmp");
    // and no other file beside it: the folder holds stale.kvgp alone
    int named = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) named += strncmp(e->d_name, "stale", 5) == 0;
    closedir(d);
    if (named != 1) fail_msg("files named stale* in %s: expected 1, got %d", dir, named);
    gpt_free(&back);

    // a weight that is not finite: no file is written (gpt_load would refuse it)
    char bad[128];
    path_in(bad, sizeof bad, "nan.kvgp");
    m.params[5] = NAN;
    if (gpt_save(&m, bad, ERR(LANG_EN, err)) == 0) fail_msg("gpt_save of a NaN weight: expected a refusal");
    if (exists(bad)) fail_msg("%s: written although a weight is NaN", bad);
    gpt_free(&m);
}

// ---------------------------------------------------------------------------
// 2. train checks --out before step 1.

static int count_steps(const TrainProgress *p, void *user) {
    if (!p->starting) (*(int *)user)++;
    return 0;
}

static void tiny_config(TrainConfig *cfg, const char *data, const char *out) {
    assert_int_equal(train_config_default(cfg, "tiny"), 0);
    cfg->iters = 5;
    cfg->warmup = 1;
    cfg->threads = 1;
    cfg->eval_every = 0;
    cfg->ckpt_every = 0;
    cfg->data_path = data;
    cfg->out_path = out;
}

static void test_train_checks_out_before_step_one(void **state) {
    (void)state;
    char err[512];
    char data[128], missing[128], folder[128];
    path_in(data, sizeof data, "text.txt");
    path_in(missing, sizeof missing, "no-such-folder/model.bin");
    path_in(folder, sizeof folder, "a-folder");
    write_text(data);
    assert_int_equal(mkdir(folder, 0700), 0);
    const char *outs[] = {missing, folder};
    for (int i = 0; i < 2; i++) {
        TrainConfig cfg;
        tiny_config(&cfg, data, outs[i]);
        int steps = 0, rc;
        QUIET(rc = train_run(&cfg, count_steps, &steps, NULL, ERR(LANG_EN, err)));
        if (rc != TRAIN_FAILED) fail_msg("--out %s: expected TRAIN_FAILED, got %d", outs[i], rc);
        if (steps != 0) fail_msg("--out %s: expected the failure before step 1, got it after %d steps", outs[i], steps);
    }
}

// ---------------------------------------------------------------------------
// 3. Crafted checkpoints: every recipe field checked on load.

static void make_checkpoint(TrainCheckpoint *ck) {
    memset(ck, 0, sizeof(*ck));
    train_config_default(&ck->cfg, "tiny");
    ck->cfg.model = (GptConfig){3, 4, 8, 2, 1};
    static uint32_t vocab[3] = {'a', 'b', 'c'};
    ck->vocab = vocab;
    ck->step = 5;
    ck->num_params = gpt_num_params(ck->cfg.model);
    ck->params = calloc(3 * ck->num_params, sizeof(float));
    assert_non_null(ck->params);
    ck->m = ck->params + ck->num_params;
    ck->v = ck->params + 2 * ck->num_params;
}

static void test_checkpoint_recipe_is_checked(void **state) {
    (void)state;
    char err[512];
    char path[128];
    path_in(path, sizeof path, "recipe.ckpt");
    struct {
        const char *name;
        int field;   // 0 lr, 1 min_lr, 2 beta1, 3 beta2, 4 eps, 5 weight decay, 6 clip
        float value;
    } cases[] = {
        {"lr NaN", 0, NAN},         {"lr 0", 0, 0.0f},          {"lr infinite", 0, INFINITY},
        {"min_lr above lr", 1, 1.0f}, {"min_lr -1", 1, -1.0f},  {"beta1 1", 2, 1.0f},
        {"beta2 NaN", 3, NAN},      {"beta2 -0.5", 3, -0.5f},   {"eps 0", 4, 0.0f},
        {"weight decay -1", 5, -1.0f}, {"weight decay NaN", 5, NAN}, {"clip -1", 6, -1.0f},
    };
    TrainCheckpoint good, got;
    make_checkpoint(&good);
    int rc;
    rc = train_checkpoint_save(path, &good, ERR(LANG_EN, err));
    assert_int_equal(rc, 0);
    rc = train_checkpoint_load(path, &got, ERR(LANG_EN, err));
    if (rc != 0) fail_msg("the unchanged checkpoint: expected it to load, it was refused");
    train_checkpoint_free(&got);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TrainCheckpoint ck = good;
        float *fields[] = {&ck.cfg.lr, &ck.cfg.min_lr, &ck.cfg.beta1, &ck.cfg.beta2, &ck.cfg.eps,
                           &ck.cfg.weight_decay, &ck.cfg.grad_clip};
        *fields[cases[i].field] = cases[i].value;
        rc = train_checkpoint_save(path, &ck, ERR(LANG_EN, err));
        assert_int_equal(rc, 0);
        rc = train_checkpoint_load(path, &got, ERR(LANG_EN, err));
        if (rc == 0) {
            train_checkpoint_free(&got);
            fail_msg("%s (valid checksum): expected the checkpoint refused, it loaded", cases[i].name);
        }
        // and the recipe check itself says what is wrong
        char why[400];
        if (train_config_check(&ck.cfg, ERR(LANG_EN, why)) == 0)
            fail_msg("train_config_check with %s: expected a refusal", cases[i].name);
    }
    free(good.params);
}

// Training from a checkpoint whose weights blow up stops with an error,
// keeps that checkpoint and writes no model.
static int stop_at(const TrainProgress *p, void *user) { return p->step == *(int *)user; }

// A model whose arithmetic overflows float32 (every weight 3e38: finite,
// so the loader takes it) is stopped at its first step with a message, not
// printed as a text of newlines with exit 0.
static void test_non_finite_logits_stop_generation(void **state) {
    (void)state;
    char model[128], err[512], args[512];
    path_in(model, sizeof model, "huge.kvgp");
    GptModel m;
    uint32_t vocab[3] = {'a', 'b', '\n'};
    assert_int_equal(gpt_init_random(&m, (GptConfig){3, 4, 8, 2, 1}, vocab, 1, ERR(LANG_EN, err)), 0);
    for (size_t i = 0; i < m.num_params; i++) m.params[i] = 3e38f;
    if (gpt_save(&m, model, ERR(LANG_EN, err)) != 0) fail_msg("gpt_save: %s", err);
    gpt_free(&m);
    static const char *const runs[] = {"", " --no-cache", " --format json", " --temperature 0"};
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "generate --model %s --prompt a --steps 5%s", model, runs[i]);
        expect_failure(args, 1, "step 1: the logits are not finite numbers (NaN or infinity)");
    }
    snprintf(args, sizeof args, "generate --model %s --prompt a --steps 5 --lang zh", model);
    expect_failure(args, 1, "第 1 步：logits 不是有限数");
}

static void test_non_finite_training_keeps_last_checkpoint(void **state) {
    (void)state;
    char err[512];
    char data[128], out[128], ckpt[128], copy[128];
    path_in(data, sizeof data, "blow.txt");
    path_in(out, sizeof out, "blow.bin");
    path_in(ckpt, sizeof ckpt, "blow.ckpt");
    path_in(copy, sizeof copy, "blow-copy.ckpt");
    write_text(data);
    TrainConfig cfg;
    tiny_config(&cfg, data, out);
    cfg.ckpt_path = ckpt;
    int stop = 2, rc;
    QUIET(rc = train_run(&cfg, stop_at, &stop, NULL, ERR(LANG_EN, err)));
    assert_int_equal(rc, TRAIN_STOPPED);
    // the checkpoint, with a valid checksum, and a weight past float's range
    // once multiplied: the next forward pass overflows
    TrainCheckpoint ck;
    rc = train_checkpoint_load(ckpt, &ck, ERR(LANG_EN, err));
    assert_int_equal(rc, 0);
    for (size_t i = 0; i < ck.num_params; i++) ck.params[i] = 3e38f;
    rc = train_checkpoint_save(ckpt, &ck, ERR(LANG_EN, err));
    assert_int_equal(rc, 0);
    rc = train_checkpoint_save(copy, &ck, ERR(LANG_EN, err));
    assert_int_equal(rc, 0);
    train_checkpoint_free(&ck);
    TrainConfig resume = cfg;
    resume.resume_path = ckpt;
    QUIET(rc = train_run(&resume, NULL, NULL, NULL, ERR(LANG_EN, err)));
    if (rc != TRAIN_FAILED) fail_msg("training on overflowing weights: expected TRAIN_FAILED, got %d", rc);
    if (exists(out)) fail_msg("%s: a model was written from non-finite weights", out);
    expect_same_file(ckpt, copy, "the last good checkpoint after a failed step");
}

// ---------------------------------------------------------------------------
// 4. Lost writes to standard output, and the CSV's reason.

static void test_stdout_write_errors(void **state) {
    (void)state;
    expect_failure("lesson 2 >/dev/full", 1, "kvdemo: error writing standard output: No space left on device");
    expect_failure("lesson 2 --format json >/dev/full", 1, "error writing standard output: No space left on device");
    expect_failure("list >&-", 1, "kvdemo: error writing standard output: Bad file descriptor");
    char args[1024];
    snprintf(args, sizeof args, "bench --init random --preset tiny --steps 1 --repeat 1 --csv %s/none/t.csv", dir);
    expect_failure(args, 1, "No such file or directory");
    // nothing lost: still 0
    RunResult r = kvdemo_run("list >/dev/null");
    assert_int_equal(r.status, 0);
    run_free(&r);
}

// ---------------------------------------------------------------------------
// 5. A subnormal temperature.

static void test_subnormal_temperature(void **state) {
    (void)state;
    enum { V = 5 };
    const float logits[V] = {0.5f, -1.0f, 2.0f, 1.999f, 0.0f};
    float probs[V], scratch[V];
    const float temps[] = {1e-40f, 1e-45f, 1e-30f};
    for (int t = 0; t < 3; t++) {
        sampler_softmax(probs, scratch, logits, temps[t], 0, V);
        for (int i = 0; i < V; i++) {
            float want = i == 2 ? 1.0f : 0.0f;   // the largest logit takes it all
            if (probs[i] != want)
                fail_msg("temperature %g: probs[%d]: expected %g, got %g", (double)temps[t], i, (double)want,
                         (double)probs[i]);
        }
    }
    // the command line takes it, and draws what --temperature 0 draws
    RunResult a = kvdemo_run("generate --init random --preset tiny --steps 20 --temperature 1e-40");
    RunResult b = kvdemo_run("generate --init random --preset tiny --steps 20 --temperature 0");
    if (a.status != 0) fail_msg("--temperature 1e-40: exit status %d, expected 0 (stderr: %s)", a.status, a.err);
    assert_int_equal(b.status, 0);
    char *ea = strstr(a.out, "\n\n--"), *eb = strstr(b.out, "\n\n--");
    assert_non_null(ea);
    assert_non_null(eb);
    *ea = *eb = '\0';
    if (strcmp(a.out, b.out) != 0)
        fail_msg("--temperature 1e-40: expected the greedy text \"%s\", got \"%s\"", b.out, a.out);
    run_free(&a);
    run_free(&b);
}

// ---------------------------------------------------------------------------
// 6. The checkpoint's header is read first; the training text has a cap.

static void test_huge_files_refused_by_their_header(void **state) {
    (void)state;
    char big[128];
    path_in(big, sizeof big, "huge.ckpt");
    // 8 GB, sparse: nothing is stored, but a loader that reads it all first
    // runs out of memory or time before it finds the wrong magic
    int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "NOPE", 4), 4);
    assert_int_equal(ftruncate(fd, 8ll << 30), 0);
    close(fd);
    char args[1024];
    snprintf(args, sizeof args, "train --data %s --out %s/x.bin --resume %s", big, dir, big);
    expect_failure(args, 1, "wrong magic");

    // a training text one byte past the cap is refused before it is read
    char text[128];
    path_in(text, sizeof text, "huge.txt");
    fd = open(text, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)TRAIN_MAX_TEXT_BYTES + 1), 0);
    close(fd);
    snprintf(args, sizeof args, "train --preset tiny --data %s --out %s/x.bin", text, dir);
    expect_failure(args, 1, "at most 256 MiB");
    unlink(big);
    unlink(text);
}

// ---------------------------------------------------------------------------
// 8. --threads far above the cores is capped, and said once.

static void test_threads_capped_at_cores(void **state) {
    (void)state;
    RunResult r = kvdemo_run("generate --init random --preset tiny --steps 4 --threads 1000");
    assert_int_equal(r.status, 0);
    if (!strstr(r.err, "--threads 1000 is more than the") || count_lines(r.err) != 1)
        fail_msg("--threads 1000: expected one line saying it is capped at the cores, got \"%s\"", r.err);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char want[64];
    snprintf(want, sizeof want, "%ld thread", cores);
    if (!strstr(r.out, want)) fail_msg("--threads 1000: expected \"%s\" in the summary, got \"%s\"", want, r.out);
    run_free(&r);
}

// ---------------------------------------------------------------------------
// Found by make fuzz: an empty value for an option with fixed choices
// (--preset "") made the parser loop forever.

static void test_empty_choice_refused(void **state) {
    (void)state;
    expect_failure("init --preset '' --out /nonexistent-kvdemo/x.bin", 2, "--preset takes one of seed|tiny");
    expect_failure("lesson 2 --format=", 2, "--format takes one of text|json");
}

// ---------------------------------------------------------------------------
// 9. Lesson 3's error lines: the reason first, a long prompt elided, an
// invalid byte escaped.

static void test_lesson3_prompt_errors(void **state) {
    (void)state;
    char args[4200];
    int at = snprintf(args, sizeof args, "lesson 3 --prompt ");
    for (int i = 0; i < 3000; i++) args[at++] = 'x';
    args[at] = '\0';
    RunResult r = kvdemo_run(args);
    assert_int_equal(r.status, 2);
    if (!strstr(r.err, "longer than 128 tokens") || strlen(r.err) > 200 || count_lines(r.err) != 1)
        fail_msg("a 3000-character prompt: expected one short line with the reason, got \"%.300s\"", r.err);
    run_free(&r);
    r = kvdemo_run("lesson 3 --prompt \"$(printf 'ab\\377cd')\"");
    assert_int_equal(r.status, 2);
    if (!strstr(r.err, "not valid UTF-8 at byte 2") || !strstr(r.err, "ab\\xFFcd") || strchr(r.err, '\xff'))
        fail_msg("a prompt with byte 0xFF: expected the reason and the byte escaped as \\xFF, got \"%s\"", r.err);
    run_free(&r);
}

// ---------------------------------------------------------------------------
// 10. A LLaMA model of context 65536 needs no T x T mask: made and run in a
// child whose address space is capped at 2 GB (the mask alone took 17 GB).
// AddressSanitizer reserves terabytes of address space, so not under it.

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static void test_llama_long_context_without_a_full_mask(void **state) {
    (void)state;
#ifdef UNDER_ASAN
    skip();
#else
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit lim = {2ull << 30, 2ull << 30};
        if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(3);
        LlamaConfig c = {.vocab_size = llama_default_vocab_size(), .dim = 8, .n_layers = 1, .n_heads = 2,
                         .n_kv_heads = 1, .hidden_dim = 16, .max_seq_len = 65536,
                         .rope_theta = 10000.0f, .norm_eps = 1e-5f};
        LlamaModel m;
        LlamaState s;
        char err[256];
        if (llama_new(&m, &c, ERR(LANG_EN, err)) != 0 || llama_state_init(&s, &m, 1, ERR(LANG_EN, err)) != 0) _exit(1);
        // three tokens of one row: forward returns the logits of the last, (1, V)
        int tokens[3] = {1, 5, 6};
        float logits[200];
        if (c.vocab_size > 200) _exit(4);
        llama_forward(logits, &s, &m, tokens, 0, 1, 3, 3);
        for (int i = 0; i < c.vocab_size; i++)
            if (!isfinite(logits[i])) _exit(2);
        llama_state_free(&s);
        llama_free(&m);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("a LLaMA model of context 65536 in 2 GB: expected exit 0, got %d (1: llama_new or "
                 "llama_state_init failed, 2: logits not finite, 4: the vocabulary outgrew the test's "
                 "logits)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
#endif
}

// ---------------------------------------------------------------------------
// kill -9 during training, at fixed points.

// Runs kvdemo train with KVDEMO_TEST_STOP_WRITE=stop_write (0: none), and
// when it stops itself there, kills it with SIGKILL. Returns 1 if it was
// killed, 0 if it ran to the end (exit status 0).
static int train_killed_at(const char *train_args, int stop_write) {
    const char *bin = getenv("KVDEMO_BIN");
    if (!bin || !*bin) bin = "./kvdemo";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "exec %s train %s 2>/dev/null", bin, train_args);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char n[16];
        snprintf(n, sizeof n, "%d", stop_write);
        if (stop_write) setenv("KVDEMO_TEST_STOP_WRITE", n, 1);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
    if (WIFSTOPPED(st)) {
        kill(pid, SIGKILL);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) fail_msg("train: expected death by SIGKILL");
        return 1;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("train %s: exit status %d, expected 0", train_args, st);
    return 0;
}

static void test_kill_during_training(void **state) {
    (void)state;
    char err[512];
    char data[128], full[128], fullck[128], out[128], ck[128], args[1024];
    path_in(data, sizeof data, "kill.txt");
    path_in(full, sizeof full, "full.bin");
    path_in(fullck, sizeof fullck, "full.ckpt");
    path_in(out, sizeof out, "killed.bin");
    path_in(ck, sizeof ck, "killed.bin.ckpt");
    write_text(data);
    const char *recipe = "--preset tiny --context 16 --embedding 16 --heads 2 --blocks 1 --batch 4 --iters 30 "
                         "--eval-every 10 --threads 1";
    // the uninterrupted run: checkpoints at steps 10 and 20, the model at 30
    snprintf(args, sizeof args, "%s --data %s --out %s", recipe, data, full);
    assert_int_equal(train_killed_at(args, 0), 0);
    // Writes of a run: 1 and 2 the checkpoints at steps 10 and 20, 3 the model.
    for (int point = 1; point <= 3; point++) {
        unlink(out);
        unlink(ck);
        snprintf(args, sizeof args, "%s --data %s --out %s", recipe, data, out);
        if (!train_killed_at(args, point)) fail_msg("kill point %d: the run never got there", point);
        // the model is not there before the end; the checkpoint is the last one
        // saved whole, or none
        if (exists(out)) fail_msg("kill point %d: %s exists, expected no model yet", point, out);
        if (point == 1 && exists(ck)) fail_msg("kill point 1: %s exists, expected no checkpoint yet", ck);
        if (point > 1) {
            TrainCheckpoint c;
            int rc;
            rc = train_checkpoint_load(ck, &c, ERR(LANG_EN, err));
            if (rc != 0) fail_msg("kill point %d: the checkpoint left behind does not load", point);
            if (c.step != (point - 1) * 10) fail_msg("kill point %d: checkpoint at step %d, expected %d", point, c.step, (point - 1) * 10);
            train_checkpoint_free(&c);
        }
        // resume (or start again, with no checkpoint): the same bytes as the
        // uninterrupted run, and no temporary file left
        if (point == 1) snprintf(args, sizeof args, "%s --data %s --out %s", recipe, data, out);
        else snprintf(args, sizeof args, "--data %s --out %s --resume %s --threads 2", data, out, ck);
        assert_int_equal(train_killed_at(args, 0), 0);
        char what[64];
        snprintf(what, sizeof what, "model after a kill at point %d", point);
        expect_same_file(out, full, what);
        if (write_leftovers(out) || write_leftovers(ck))
            fail_msg("kill point %d: %d temporary or lock files of %s and %d of %s left behind", point,
                     write_leftovers(out), out, write_leftovers(ck), ck);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writers_refuse_non_regular_files),
        cmocka_unit_test(test_stale_temporary_file_is_removed),
        cmocka_unit_test(test_train_checks_out_before_step_one),
        cmocka_unit_test(test_checkpoint_recipe_is_checked),
        cmocka_unit_test(test_non_finite_logits_stop_generation),
        cmocka_unit_test(test_non_finite_training_keeps_last_checkpoint),
        cmocka_unit_test(test_stdout_write_errors),
        cmocka_unit_test(test_subnormal_temperature),
        cmocka_unit_test(test_huge_files_refused_by_their_header),
        cmocka_unit_test(test_threads_capped_at_cores),
        cmocka_unit_test(test_empty_choice_refused),
        cmocka_unit_test(test_lesson3_prompt_errors),
        cmocka_unit_test(test_llama_long_context_without_a_full_mask),
        cmocka_unit_test(test_kill_during_training),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
