// test_train_llama_run — `kvdemo train --arch llama`: a run writes a LLaMA
// model file that llama_load reads (pad, bos, eos, then the text's
// characters), the same bytes for 1 and 2 threads, a run stopped and resumed
// equal byte for byte to an uninterrupted one (with --window too, which the
// checkpoint keeps), a model that learns a
// made-up text, a corrupted checkpoint refused, and bad options refused with
// one line. The texts are made here: no corpus is needed.
//
// Run from the project's root: make build/tests/test_train_llama_run && ./build/tests/test_train_llama_run
#include "testutil.h"

#include "checkpoint.h"
#include "llama.h"
#include "llama_convert.h"
#include "train.h"
#include "train_llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[64];

static int make_tmpdir(void **state) {
    (void)state;
    return tmpdir_make(tmpdir, sizeof tmpdir, "test-train-llama");
}

static int remove_tmpdir(void **state) {
    (void)state;
    return tmpdir_remove(tmpdir);
}

static void tmp_path(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", tmpdir, name); }

// A made-up text: sentences drawn from a small grammar, 24 000 characters
// of 22 distinct ones, far from uniform.
static void write_text(const char *path) {
    static const char *subj[] = {"the cat", "a dog", "my friend", "the king", "a bird"};
    static const char *verb[] = {" sees ", " likes ", " follows ", " sings to "};
    static const char *obj[] = {"the moon.\n", "a tree.\n", "the sea.\n", "her.\n", "him.\n"};
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    uint64_t r = 11;
    long written = 0;
    while (written < 24000) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int s = (int)((r >> 33) % 5), v = (int)((r >> 40) % 4), o = (int)((r >> 50) % 5);
        written += fprintf(f, "%s%s%s", subj[s], verb[v], obj[o]);
    }
    fclose(f);
}

// A small GQA recipe: T 16, C 32, H 4, G 2, L 2, F 96.
static void small_config(TrainConfig *cfg, const char *data, const char *out) {
    assert_int_equal(llama_train_config_default(cfg, "tiny"), 0);
    cfg->model = (GptConfig){.T = 16, .C = 32, .H = 4, .L = 2};
    cfg->kv_heads = 2;
    cfg->hidden = 96;
    cfg->batch = 8;
    cfg->iters = 30;
    cfg->warmup = 5;
    cfg->lr = 3e-3f;
    cfg->threads = 2;
    cfg->eval_every = 0;
    cfg->ckpt_every = 0;
    cfg->data_path = data;
    cfg->out_path = out;
}

static unsigned char *read_all(const char *path, long *size) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc((size_t)*size + 1);
    assert_non_null(data);
    assert_int_equal(fread(data, 1, (size_t)*size, f), (size_t)*size);
    fclose(f);
    return data;
}

static void expect_same_bytes(const char *want_path, const char *got_path, const char *what) {
    long na = 0, nb = 0;
    unsigned char *a = read_all(want_path, &na), *b = read_all(got_path, &nb);
    if (na != nb) fail_msg("%s: expected %ld bytes, got %ld", what, na, nb);
    for (long i = 0; i < na; i++)
        if (a[i] != b[i]) fail_msg("%s: byte %ld: expected 0x%02x, got 0x%02x", what, i, a[i], b[i]);
    free(a);
    free(b);
}

static void train_ok(const TrainConfig *cfg) {
    char err[512];
    int rc = train_run(cfg, NULL, NULL, NULL, ERR(LANG_EN, err));
    if (rc != TRAIN_OK) fail_msg("train_run: expected %d, got %d: %s", TRAIN_OK, rc, err);
}

static void test_model_file_loads_with_the_texts_vocabulary(void **state) {
    (void)state;
    char data[128], out[128], err[256];
    tmp_path(data, sizeof data, "text.txt");
    tmp_path(out, sizeof out, "vocab.bin");
    write_text(data);
    TrainConfig cfg;
    small_config(&cfg, data, out);
    cfg.iters = 2;
    cfg.warmup = 1;
    train_ok(&cfg);
    LlamaModel m;
    if (llama_load(&m, out, ERR(LANG_EN, err)) != 0) fail_msg("the trained model does not load: %s", err);
    assert_int_equal(m.cfg.n_heads, 4);
    assert_int_equal(m.cfg.n_kv_heads, 2);
    assert_int_equal(m.cfg.hidden_dim, 96);
    assert_int_equal(m.cfg.max_seq_len, 16);
    // pad, bos, eos, then the grammar's characters in code point order
    static const char chars[] = "\n .abcdefghiklmnorstwy";
    int n = (int)strlen(chars);
    assert_int_equal(m.cfg.vocab_size, 3 + n);
    for (int i = 0; i < 3; i++) assert_int_equal(m.vocab[i], 0);
    for (int i = 0; i < n; i++)
        if (m.vocab[3 + i] != (uint32_t)chars[i])
            fail_msg("vocab[%d]: expected U+%04X, got U+%04X", 3 + i, (unsigned)chars[i], m.vocab[3 + i]);
    llama_free(&m);
}

static void test_same_bytes_for_1_and_2_threads(void **state) {
    (void)state;
    char data[128], one[128], two[128];
    tmp_path(data, sizeof data, "text.txt");
    tmp_path(one, sizeof one, "one.bin");
    tmp_path(two, sizeof two, "two.bin");
    write_text(data);
    TrainConfig cfg;
    small_config(&cfg, data, one);
    cfg.threads = 1;
    train_ok(&cfg);
    cfg.out_path = two;
    cfg.threads = 2;
    train_ok(&cfg);
    expect_same_bytes(one, two, "model of 2 threads against 1 thread's");
}

// Stops after a given number of steps, as Ctrl-C would.
static int stop_at(const TrainProgress *p, void *user) { return p->step == *(int *)user; }

static void test_resumed_run_is_byte_identical(void **state) {
    (void)state;
    char data[128], full[128], pieces[128], ckpt[128], err[512];
    tmp_path(data, sizeof data, "text.txt");
    tmp_path(full, sizeof full, "full.bin");
    tmp_path(pieces, sizeof pieces, "pieces.bin");
    tmp_path(ckpt, sizeof ckpt, "pieces.ckpt");
    write_text(data);
    TrainConfig cfg;
    small_config(&cfg, data, full);
    train_ok(&cfg);
    // the same run stopped at step 13, then resumed with another thread count
    cfg.out_path = pieces;
    cfg.ckpt_path = ckpt;
    int stop = 13;
    assert_int_equal(train_run(&cfg, stop_at, &stop, NULL, ERR(LANG_EN, err)), TRAIN_STOPPED);
    assert_int_equal(access(pieces, F_OK), -1);   // no model before the end
    TrainConfig resume = cfg;
    resume.resume_path = ckpt;
    resume.threads = 1;
    resume.lr = 1.0f;        // ignored: the checkpoint's recipe wins
    resume.kv_heads = 4;     // likewise the shape
    train_ok(&resume);
    expect_same_bytes(full, pieces, "resumed model against the uninterrupted one");
}

// A run with --window keeps its band when resumed: the checkpoint holds W
// (version 2), the resumed run without --window ends byte for byte where the
// uninterrupted one does, and another W, or a W for a run trained without
// one, is refused with one line.
static void test_resumed_window_run_keeps_its_window(void **state) {
    (void)state;
    char data[128], full[128], pieces[128], ckpt[128], plain[128], err[512];
    tmp_path(data, sizeof data, "text.txt");
    tmp_path(full, sizeof full, "wfull.bin");
    tmp_path(pieces, sizeof pieces, "wpieces.bin");
    tmp_path(ckpt, sizeof ckpt, "wpieces.ckpt");
    tmp_path(plain, sizeof plain, "plain.ckpt");
    write_text(data);
    TrainConfig cfg;
    small_config(&cfg, data, full);
    cfg.window = 6;   // of T 16
    train_ok(&cfg);
    cfg.out_path = pieces;
    cfg.ckpt_path = ckpt;
    int stop = 13;
    assert_int_equal(train_run(&cfg, stop_at, &stop, NULL, ERR(LANG_EN, err)), TRAIN_STOPPED);
    TrainCheckpoint ck;
    if (train_checkpoint_load(ckpt, &ck, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    if (ck.cfg.window != 6) fail_msg("checkpoint's window: expected 6, got %d", ck.cfg.window);
    train_checkpoint_free(&ck);
    TrainConfig resume = cfg;
    resume.resume_path = ckpt;
    resume.window = 8;   // not the checkpoint's: refused
    assert_int_equal(train_run(&resume, NULL, NULL, NULL, ERR(LANG_EN, err)), TRAIN_FAILED);
    if (!strstr(err, "was trained with --window 6; resume it with that or without --window"))
        fail_msg("expected the checkpoint's window named, got \"%s\"", err);
    resume.window = 0;   // the checkpoint's W, as every other part of its recipe
    train_ok(&resume);
    expect_same_bytes(full, pieces, "resumed window model against the uninterrupted one");
    LlamaModel m;
    if (llama_load(&m, pieces, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    if (m.cfg.window != 6) fail_msg("resumed model's window: expected 6, got %d", m.cfg.window);
    llama_free(&m);
    // a run without a window, resumed with one
    cfg.window = 0;
    cfg.ckpt_path = plain;
    assert_int_equal(train_run(&cfg, stop_at, &stop, NULL, ERR(LANG_EN, err)), TRAIN_STOPPED);
    resume = cfg;
    resume.resume_path = plain;
    resume.window = 6;
    assert_int_equal(train_run(&resume, NULL, NULL, NULL, ERR(LANG_EN, err)), TRAIN_FAILED);
    if (!strstr(err, "was trained without a window; resume it without --window"))
        fail_msg("expected \"trained without a window\", got \"%s\"", err);
}

static void test_corrupted_checkpoint_refused(void **state) {
    (void)state;
    char data[128], out[128], ckpt[128], err[512];
    tmp_path(data, sizeof data, "text.txt");
    tmp_path(out, sizeof out, "corrupt.bin");
    tmp_path(ckpt, sizeof ckpt, "corrupt.ckpt");
    write_text(data);
    TrainConfig cfg;
    small_config(&cfg, data, out);
    cfg.ckpt_path = ckpt;
    int stop = 3;
    assert_int_equal(train_run(&cfg, stop_at, &stop, NULL, ERR(LANG_EN, err)), TRAIN_STOPPED);
    TrainCheckpoint ck;
    if (train_checkpoint_load(ckpt, &ck, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    assert_int_equal(ck.cfg.arch, TRAIN_ARCH_LLAMA);
    assert_int_equal(ck.cfg.kv_heads, 2);
    assert_int_equal(ck.cfg.hidden, 96);
    assert_int_equal(ck.step, 3);
    train_checkpoint_free(&ck);
    // one flipped bit in the weights
    long n = 0;
    unsigned char *bytes = read_all(ckpt, &n);
    bytes[n / 2] ^= 0x10;
    FILE *f = fopen(ckpt, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    free(bytes);
    assert_int_equal(train_checkpoint_load(ckpt, &ck, ERR(LANG_EN, err)), -1);
    if (!strstr(err, "checksum mismatch")) fail_msg("expected \"checksum mismatch\", got \"%s\"", err);
}

static void test_model_learns_the_grammar(void **state) {
    (void)state;
    char data[128], out[128], err[256];
    tmp_path(data, sizeof data, "text.txt");
    tmp_path(out, sizeof out, "learns.bin");
    write_text(data);
    TrainConfig cfg;
    small_config(&cfg, data, out);
    cfg.iters = 150;
    train_ok(&cfg);
    LlamaModel m;
    if (llama_load(&m, out, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    double train_loss, val_loss;
    assert_int_equal(llama_train_eval(&m, data, 2, &train_loss, &val_loss, NULL, NULL, ERR(LANG_EN, err)), 0);
    // A uniform guess over the 22 characters costs ln 22 = 3.09 nats; the
    // grammar's words are fixed, so a model that learned them is far below.
    const double bound = 1.5;
    print_message("LLaMA after %d steps: train loss %.4f, validation loss %.4f (bound %.2f)\n", cfg.iters,
                  train_loss, val_loss, bound);
    if (!(val_loss < bound))
        fail_msg("validation loss after %d steps: expected < %.2f, got %.4f", cfg.iters, bound, val_loss);
    llama_free(&m);
}

static void test_bad_options_refused(void **state) {
    (void)state;
    char data[128], cmd[512];
    tmp_path(data, sizeof data, "text.txt");
    write_text(data);
    snprintf(cmd, sizeof cmd, "train --arch llama --heads 4 --kv-heads 3 --data %s --out %s/x.bin", data, tmpdir);
    expect_failure(cmd, 2, "n_heads 4 is not a multiple of n_kv_heads 3");
    snprintf(cmd, sizeof cmd, "train --kv-heads 2 --data %s --out %s/x.bin", data, tmpdir);
    expect_failure(cmd, 2, "--kv-heads is the LLaMA-style model's: add --arch llama");
    snprintf(cmd, sizeof cmd, "train --arch llama --embedding 12 --heads 4 --data %s --out %s/x.bin", data, tmpdir);
    expect_failure(cmd, 2, "head_dim");
    snprintf(cmd, sizeof cmd, "train --arch mamba --data %s --out %s/x.bin", data, tmpdir);
    expect_failure(cmd, 2, "--arch takes one of gpt|llama");
}

static void test_command_trains_a_loadable_model(void **state) {
    (void)state;
    char data[128], out[128], cmd[512], err[256];
    tmp_path(data, sizeof data, "text.txt");
    tmp_path(out, sizeof out, "cmd.bin");
    write_text(data);
    snprintf(cmd, sizeof cmd, "train --arch llama --preset tiny --kv-heads 1 --iters 3 --threads 1 --data %s --out %s",
             data, out);
    RunResult r = kvdemo_run(cmd);
    if (r.status != 0) fail_msg("kvdemo %s: expected status 0, got %d: %s", cmd, r.status, r.err);
    if (!strstr(r.err, "key/value heads 1")) fail_msg("expected the shape on stderr, got: %s", r.err);
    run_free(&r);
    LlamaModel m;
    if (llama_load(&m, out, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    assert_int_equal(m.cfg.n_kv_heads, 1);
    assert_int_equal(m.cfg.n_heads, 4);
    llama_free(&m);
}

// Trains a tiny MHA model (H 4) on the grammar into out with `kvdemo train`.
static void train_tiny(const char *data, const char *out) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "train --arch llama --preset tiny --iters 2 --threads 1 --data %s --out %s", data, out);
    RunResult r = kvdemo_run(cmd);
    if (r.status != 0) fail_msg("kvdemo %s: expected status 0, got %d: %s", cmd, r.status, r.err);
    run_free(&r);
}

static void test_convert_writes_the_converted_model(void **state) {
    (void)state;
    char data[128], mha[128], out[128], cmd[768], err[256];
    tmp_path(data, sizeof data, "text.txt");
    tmp_path(mha, sizeof mha, "mha.bin");
    tmp_path(out, sizeof out, "gqa.bin");
    write_text(data);
    train_tiny(data, mha);
    LlamaModel src, got, want;
    if (llama_load(&src, mha, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    const char *hows[] = {"mean", "first", "random"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "train --arch llama --from %s --kv-heads 2 --convert %s --iters 0 --data %s --out %s",
                 mha, hows[i], data, out);
        RunResult r = kvdemo_run(cmd);
        if (r.status != 0) fail_msg("kvdemo %s: expected status 0, got %d: %s", cmd, r.status, r.err);
        run_free(&r);
        LlamaConvert how;
        assert_int_equal(llama_convert_parse(&how, hows[i]), 0);
        if (llama_load(&got, out, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
        if (llama_convert(&want, &src, 2, how, 1337, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
        assert_int_equal(got.cfg.n_kv_heads, 2);
        assert_int_equal(got.num_params, want.num_params);
        assert_bits(got.params, want.params, (int64_t)got.num_params, hows[i]);
        llama_free(&got);
        llama_free(&want);
    }
    llama_free(&src);
    // and uptrained: two steps from the converted weights
    snprintf(cmd, sizeof cmd, "train --arch llama --from %s --kv-heads 1 --convert mean --iters 2 --threads 1 --data %s --out %s",
             mha, data, out);
    RunResult r = kvdemo_run(cmd);
    if (r.status != 0) fail_msg("kvdemo %s: expected status 0, got %d: %s", cmd, r.status, r.err);
    if (!strstr(r.err, "key/value heads 1")) fail_msg("expected the shape on stderr, got: %s", r.err);
    run_free(&r);
    if (llama_load(&got, out, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    assert_int_equal(got.cfg.n_kv_heads, 1);
    llama_free(&got);
}

static void test_bad_conversions_refused(void **state) {
    (void)state;
    char data[128], mha[128], cmd[768];
    tmp_path(data, sizeof data, "text.txt");
    tmp_path(mha, sizeof mha, "mha2.bin");
    write_text(data);
    train_tiny(data, mha);
    static const struct {
        const char *args, *needle;
    } bad[] = {
        {"--kv-heads 3 --convert mean", "valid are the divisors of 4 below it (1, 2)"},
        {"--kv-heads 4 --convert mean", "valid are the divisors of 4 below it (1, 2)"},
        {"--convert mean", "--from needs --kv-heads G"},
        {"--kv-heads 2", "--from FILE and --convert mean|first|random go together"},
        {"--kv-heads 2 --convert middle", "--convert takes one of mean|first|random"},
        {"--kv-heads 2 --convert first --heads 8", "--heads cannot go with --from"},
        {"--kv-heads 2 --convert first --resume x.ckpt", "give one of them"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "train --arch llama --from %s %s --data %s --out %s/x.bin", mha, bad[i].args, data,
                 tmpdir);
        expect_failure(cmd, 2, bad[i].needle);
    }
    snprintf(cmd, sizeof cmd, "train --arch llama --iters 0 --data %s --out %s/x.bin", data, tmpdir);
    expect_failure(cmd, 2, "--iters 0 only goes with --from");
    snprintf(cmd, sizeof cmd, "train --from %s --convert mean --data %s --out %s/x.bin", mha, data, tmpdir);
    expect_failure(cmd, 2, "--from is the LLaMA-style model's: add --arch llama");
    snprintf(cmd, sizeof cmd, "train --arch llama --from %s --kv-heads 2 --convert mean --data %s --out %s", mha, data, mha);
    expect_failure(cmd, 2, "--from");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_file_loads_with_the_texts_vocabulary),
        cmocka_unit_test(test_same_bytes_for_1_and_2_threads),
        cmocka_unit_test(test_resumed_run_is_byte_identical),
        cmocka_unit_test(test_resumed_window_run_keeps_its_window),
        cmocka_unit_test(test_corrupted_checkpoint_refused),
        cmocka_unit_test(test_model_learns_the_grammar),
        cmocka_unit_test(test_bad_options_refused),
        cmocka_unit_test(test_command_trains_a_loadable_model),
        cmocka_unit_test(test_convert_writes_the_converted_model),
        cmocka_unit_test(test_bad_conversions_refused),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
