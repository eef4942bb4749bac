// test_traincmd — what `kvdemo train` and `kvdemo eval` print, as a class
// following the README sees it: one line per evaluation (step, train loss,
// val loss) on a pipe and on a terminal, the progress line kept to one line
// on a terminal, the --log CSV (one row per evaluation, finite losses, the
// same numbers as the lines), a --log that cannot be written refused before
// the work, and eval's progress line on a terminal only.
//
// The runs are a one-block model of 16 dimensions on a 1.2 kB text
// (tests/fixtures/corpus_small.txt): a fraction of a second each.
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CORPUS "tests/fixtures/corpus_small.txt"
#define RECIPE "--preset tiny --context 16 --embedding 16 --heads 2 --blocks 1 --batch 4 --threads 1"
enum { ITERS = 22, EVAL_EVERY = 5 };

static char dir[256];

static int setup(void **state) {
    (void)state;
    return tmpdir_make(dir, sizeof dir, "traincmd");
}

static int teardown(void **state) {
    (void)state;
    return tmpdir_remove(dir);
}

// The steps at which training evaluates: every EVAL_EVERY, and the last.
static int expected_evals(int *steps, int max) {
    int n = 0;
    for (int s = EVAL_EVERY; s <= ITERS && n < max; s += EVAL_EVERY) steps[n++] = s;
    if (ITERS % EVAL_EVERY && n < max) steps[n++] = ITERS;
    return n;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = malloc(1 << 16);
    size_t n = fread(s, 1, (1 << 16) - 1, f);
    s[n] = '\0';
    fclose(f);
    return s;
}

typedef struct {
    int step;
    double train, val;
} EvalLine;

// The "step N: train loss X, val loss Y" lines of out (after any ESC [ K of
// a redrawn line), in order; returns how many. A line holding anything else
// before "step" (a progress line not cleared) does not count.
static int eval_lines(const char *out, EvalLine *e, int max) {
    int n = 0;
    for (const char *line = out; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        char *p = buf;
        for (char *k; (k = strstr(p, "\x1b[K"));) p = k + 3;
        if (*p == '\r') p++;
        EvalLine x;
        if (n < max && sscanf(p, "step %d: train loss %lf, val loss %lf", &x.step, &x.train, &x.val) == 3) e[n++] = x;
        line = nl ? nl + 1 : NULL;
    }
    return n;
}

// --log: a header and one row per evaluation with finite losses, the same
// numbers as the evaluation lines on stderr (a pipe here).
static void test_log_has_a_row_per_evaluation(void **state) {
    (void)state;
    char args[1024], log[300], out[300];
    snprintf(log, sizeof log, "%s/curve.csv", dir);
    snprintf(out, sizeof out, "%s/m.bin", dir);
    snprintf(args, sizeof args, "train %s --iters %d --eval-every %d --data %s --out %s --log %s", RECIPE, ITERS,
             EVAL_EVERY, CORPUS, out, log);
    RunResult r = kvdemo_run(args);
    if (r.status != 0) fail_msg("kvdemo %s: exit %d: %s", args, r.status, r.err);
    int want[16] = {0};
    int nwant = expected_evals(want, 16);
    char *csv = slurp(log);
    if (!csv) fail_msg("--log %s: no file written", log);
    if (write_leftovers(log) != 0) fail_msg("%s: %d temporary or lock files left", log, write_leftovers(log));
    // The checkpoint goes next to --out, where the README says to look.
    char ckpt[310];
    snprintf(ckpt, sizeof ckpt, "%s.ckpt", out);
    if (access(ckpt, R_OK) != 0) fail_msg("no checkpoint next to --out: %s", ckpt);
    const char *header = "step,train_loss,val_loss,batch_loss,lr,elapsed_s\n";
    if (strncmp(csv, header, strlen(header))) fail_msg("CSV header: expected %s got %.80s", header, csv);
    EvalLine lines[16];
    int nlines = eval_lines(r.err, lines, 16);
    if (nlines != nwant) fail_msg("evaluation lines on stderr: expected %d, got %d:\n%s", nwant, nlines, r.err);
    int rows = 0;
    double last_elapsed = 0;
    for (char *row = csv + strlen(header); *row; rows++) {
        char *nl = strchr(row, '\n');
        if (!nl) fail_msg("CSV row %d does not end with a newline: %s", rows, row);
        *nl = '\0';
        int step, used = 0;
        double tl, vl, bl, lr, el;
        if (sscanf(row, "%d,%lf,%lf,%lf,%lf,%lf%n", &step, &tl, &vl, &bl, &lr, &el, &used) != 6 || row[used])
            fail_msg("CSV row %d: expected 6 numbers, got \"%s\"", rows, row);
        if (rows >= nwant) fail_msg("CSV row %d: expected %d rows only", rows, nwant);
        if (step != want[rows]) fail_msg("CSV row %d: step expected %d, got %d", rows, want[rows], step);
        if (!(isfinite(tl) && isfinite(vl) && isfinite(bl) && tl > 0 && vl > 0 && bl > 0))
            fail_msg("CSV row %d: losses expected finite and positive, got %g %g %g", rows, tl, vl, bl);
        if (!(lr > 0) || !(el >= last_elapsed)) fail_msg("CSV row %d: lr %g or elapsed %g out of order", rows, lr, el);
        last_elapsed = el;
        if (lines[rows].step != step || fabs(lines[rows].train - tl) > 6e-5 || fabs(lines[rows].val - vl) > 6e-5)
            fail_msg("row %d: the line says step %d train %.4f val %.4f, the CSV step %d train %.6f val %.6f", rows,
                     lines[rows].step, lines[rows].train, lines[rows].val, step, tl, vl);
        row = nl + 1;
    }
    if (rows != nwant) fail_msg("CSV rows: expected %d, got %d", nwant, rows);
    // the curve goes down over 22 steps of this text
    if (!(lines[nwant - 1].train < lines[0].train)) fail_msg("train loss did not fall: %.4f then %.4f", lines[0].train, lines[nwant - 1].train);
    free(csv);
    run_free(&r);
}

// --warmup N: the learning rate climbs linearly over the first N steps,
// lr * (s + 1) / N at step s (0-based), whatever the recipe's warm-up; a
// warm-up longer than the run is refused before any work.
static void test_warmup_sets_the_climb(void **state) {
    (void)state;
    char args[1024], log[300], out[300];
    snprintf(log, sizeof log, "%s/warmup.csv", dir);
    snprintf(out, sizeof out, "%s/w.bin", dir);
    snprintf(args, sizeof args, "train %s --iters 4 --warmup 2 --lr 0.01 --eval-every 1 --data %s --out %s --log %s",
             RECIPE, CORPUS, out, log);
    RunResult r = kvdemo_run(args);
    if (r.status != 0) fail_msg("kvdemo %s: exit %d: %s", args, r.status, r.err);
    char *csv = slurp(log);
    if (!csv) fail_msg("--log %s: no file written", log);
    const double want[2] = {0.01 * 1 / 2, 0.01 * 2 / 2};   // steps 1 and 2 of the log: s = 0, 1
    const char *row = strchr(csv, '\n');
    for (int k = 0; k < 2; k++) {
        int step;
        double tl, vl, bl, lr;
        if (!row || sscanf(row + 1, "%d,%lf,%lf,%lf,%lf", &step, &tl, &vl, &bl, &lr) != 5)
            fail_msg("--warmup 2: CSV row %d unreadable in %s", k, csv);
        if (step != k + 1 || !(fabs(lr - want[k]) <= 1e-9))
            fail_msg("--warmup 2, step %d: expected lr %g, got step %d lr %g", k + 1, want[k], step, lr);
        row = strchr(row + 1, '\n');
    }
    free(csv);
    run_free(&r);
    snprintf(args, sizeof args, "train %s --iters 4 --warmup 5 --data %s --out %s", RECIPE, CORPUS, out);
    r = kvdemo_run(args);
    if (r.status != 2 || count_lines(r.err) != 1 || !strstr(r.err, "--warmup 5"))
        fail_msg("--warmup 5 of 4 iterations: expected exit 2 and one line naming it, got %d: %s", r.status, r.err);
    run_free(&r);
}

// On a terminal: the progress line is redrawn in place, and each evaluation
// leaves a line of its own; nothing else ends a line but the header, the
// progress line's last state and the summary.
static void test_terminal_keeps_one_progress_line(void **state) {
    (void)state;
    char out[300], iters[16], every[16];
    snprintf(out, sizeof out, "%s/tty.bin", dir);
    snprintf(iters, sizeof iters, "%d", ITERS);
    snprintf(every, sizeof every, "%d", EVAL_EVERY);
    const char *args[] = {"train", "--preset", "tiny", "--context", "16", "--embedding", "16", "--heads", "2",
                          "--blocks", "1", "--batch", "4", "--threads", "1", "--iters", iters, "--eval-every", every,
                          "--data", CORPUS, "--out", out, NULL};
    int master;
    pid_t pid = kvdemo_spawn_pty(&master, args);
    char *text = read_to_end(master);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("train on a terminal: status %d: %s", status, text);
    close(master);
    int want[16] = {0};
    int nwant = expected_evals(want, 16);
    EvalLine lines[16];
    int n = eval_lines(text, lines, 16);
    if (n != nwant) fail_msg("evaluation lines on a terminal: expected %d, got %d:\n%s", nwant, n, text);
    for (int i = 0; i < n; i++)
        if (lines[i].step != want[i]) fail_msg("evaluation line %d: step expected %d, got %d", i, want[i], lines[i].step);
    if (!strstr(text, "\r\x1b[Kstep ")) fail_msg("no progress line drawn in place:\n%s", text);
    int newlines = 0;
    for (const char *p = text; *p; p++) newlines += *p == '\n';
    int expect = 1 + nwant + 1 + 1;   // header, evaluations, the progress line's end, done
    if (newlines != expect) fail_msg("lines on the terminal: expected %d, got %d:\n%s", expect, newlines, text);
    if (!strstr(text, "done: ")) fail_msg("no summary:\n%s", text);
    free(text);
}

// A --log that cannot be written is said before any training, with exit 1.
static void test_bad_log_refused_before_training(void **state) {
    (void)state;
    char args[1024], out[300];
    snprintf(out, sizeof out, "%s/never.bin", dir);
    snprintf(args, sizeof args, "train %s --iters %d --data %s --out %s --log %s/no-such-folder/curve.csv", RECIPE,
             ITERS, CORPUS, out, dir);
    expect_failure(args, 1, "cannot write the log");
    if (access(out, F_OK) == 0) fail_msg("%s was written although the log could not be", out);
}

// A text that is not there is said in the run's language, in one line.
static void test_missing_text_in_both_languages(void **state) {
    (void)state;
    char args[1024];
    snprintf(args, sizeof args, "train %s --data %s/no-such-text.txt --out %s/never.bin", RECIPE, dir, dir);
    expect_failure(args, 1, "cannot read the training text");
    snprintf(args, sizeof args, "train %s --data %s/no-such-text.txt --out %s/never.bin --lang zh", RECIPE, dir, dir);
    expect_failure(args, 1, "无法读取训练文本");
    snprintf(args, sizeof args, "train %s --data %s --out %s/never.bin --resume %s/no.ckpt --lang zh", RECIPE, CORPUS,
             dir, dir);
    expect_failure(args, 1, "无法读取检查点");
}

// eval: a progress line on a terminal, erased before the result; nothing on
// stderr through a pipe.
static void test_eval_progress(void **state) {
    (void)state;
    char args[1024], model[300];
    snprintf(model, sizeof model, "%s/eval.bin", dir);
    snprintf(args, sizeof args, "train %s --iters 4 --data %s --out %s", RECIPE, CORPUS, model);
    RunResult t = kvdemo_run(args);
    if (t.status != 0) fail_msg("kvdemo %s: exit %d: %s", args, t.status, t.err);
    run_free(&t);

    snprintf(args, sizeof args, "eval --model %s --data %s --threads 1", model, CORPUS);
    RunResult r = kvdemo_run(args);
    if (r.status != 0) fail_msg("kvdemo %s: exit %d: %s", args, r.status, r.err);
    if (r.err[0]) fail_msg("eval through a pipe printed on stderr: %s", r.err);
    double tl, vl;
    if (count_lines(r.out) != 1 || sscanf(r.out, "train loss %lf, validation loss %lf", &tl, &vl) != 2 ||
        !isfinite(tl) || !isfinite(vl))
        fail_msg("eval's result: expected one line with two finite losses, got: %s", r.out);
    run_free(&r);

    const char *pargs[] = {"eval", "--model", model, "--data", CORPUS, "--threads", "1", NULL};
    int master;
    pid_t pid = kvdemo_spawn_pty(&master, pargs);
    char *text = read_to_end(master);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(master);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("eval on a terminal: status %d: %s", status, text);
    if (!strstr(text, "\r\x1b[Keval: ")) fail_msg("no progress line on a terminal: %s", text);
    const char *res = strstr(text, "train loss ");
    if (!res || !strstr(text, "\r\x1b[Ktrain loss ")) fail_msg("the progress line is not erased before the result: %s", text);
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_has_a_row_per_evaluation),
        cmocka_unit_test(test_terminal_keeps_one_progress_line),
        cmocka_unit_test(test_warmup_sets_the_climb),
        cmocka_unit_test(test_bad_log_refused_before_training),
        cmocka_unit_test(test_missing_text_in_both_languages),
        cmocka_unit_test(test_eval_progress),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
