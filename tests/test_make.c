// test_make — the build and the README's commands as a teacher meets them:
// make keeps the compiler flags and rebuilds when they change (`make ARCH=`
// after `make`), `make run` shows lesson 2 and no compiler line, the README's
// training line is one kvdemo accepts and names the preset that trains in
// minutes, and .gitignore keeps the build outputs and what training writes
// out of git.
//
// make runs here with the variables the tested build was made with
// ($KVDEMO_MAKE, which make check sets; the plain build without it), into
// folders of their own, so that nothing the other tests use is remade.
#include "testutil.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CORPUS "tests/fixtures/corpus_small.txt"
// make without what a calling make passes down: its jobs, and its variables,
// in MAKEFLAGS and in the environment (make check ARCH= exports ARCH).
#define MAKE                                                                                                   \
    "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u ARCH -u OPT -u CFLAGS -u CC -u BUILD -u BIN -u LANG -u LC_ALL " \
    "make --no-print-directory"

// The modification time of path in nanoseconds; -1 when it is not there.
static long long mtime_ns(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    return (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
}

// A line of out that looks like a compiler command; NULL if none.
static const char *compiler_line(const char *out, char *line, size_t size) {
    for (const char *p = out; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        snprintf(line, size, "%.*s", (int)n, p);
        if (strstr(line, " -c ") || strstr(line, " -MMD") || strstr(line, " -o ") || !strncmp(line, "cc ", 3) ||
            !strncmp(line, "gcc", 3) || !strncmp(line, "clang", 5))
            return line;
        p = e ? e + 1 : p + n;
    }
    return NULL;
}

// ----------------------------------------------------------------------------
// make

// One object in a folder of its own: built once, not again by the same make,
// and again when the flags change.
static void test_make_rebuilds_when_the_flags_change(void **state) {
    (void)state;
    char dir[256], obj[300], cmd[1024], line[512];
    assert_int_equal(tmpdir_make(dir, sizeof dir, "make"), 0);
    snprintf(obj, sizeof obj, "%s/src/util/rng.o", dir);
    static const struct { const char *vars, *what; int builds; } runs[] = {
        {"", "the first make", 1},
        {"", "the same make again", 0},
        {"ARCH=", "make ARCH= after make", 1},
        {"ARCH=", "the same make ARCH= again", 0},
    };
    long long before = -1;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        snprintf(cmd, sizeof cmd, MAKE " BUILD=%s %s %s", dir, runs[i].vars, obj);
        RunResult r = shell_run(cmd);
        if (r.status != 0) fail_msg("%s: %s: status %d: %s", runs[i].what, cmd, r.status, r.err);
        long long after = mtime_ns(obj);
        if (after < 0) fail_msg("%s: expected %s to be there, got none", runs[i].what, obj);
        int compiled = compiler_line(r.out, line, sizeof line) != NULL;
        if (runs[i].builds && (!compiled || after == before))
            fail_msg("%s (%s): expected %s compiled again, got no compiler line and the same file:\n%s",
                     runs[i].what, cmd, obj, r.out);
        if (!runs[i].builds && (compiled || after != before))
            fail_msg("%s (%s): expected nothing compiled, got %s", runs[i].what, cmd,
                     compiled ? line : "a new object file");
        before = after;
        run_free(&r);
    }
    assert_int_equal(tmpdir_remove(dir), 0);
}

// The folder test_make_run_shows_the_lesson builds in (within the build's
// folder, since make runs ./$(BIN)), removed after it, failed or not.
static char rundir[256];

static int remove_rundir(void **state) {
    (void)state;
    if (!rundir[0] || strstr(rundir, "/run-") == NULL || strchr(rundir, '\'')) return 0;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", rundir);
    rundir[0] = '\0';
    return system(cmd) == 0 ? 0 : -1;
}

// `make run` (as the README gives it, without -s) in a copy of the tested
// build's objects with one of them gone: make compiles it and links kvdemo,
// quietly, and the first thing shown is lesson 2's heading.
static void test_make_run_shows_the_lesson(void **state) {
    (void)state;
    const char *vars = getenv("KVDEMO_MAKE");
    if (!vars) vars = "";
    char build[128] = "build";
    const char *b = strstr(vars, "BUILD=");
    if (b && (b == vars || b[-1] == ' ')) sscanf(b + 6, "%127[^ ]", build);
    char cmd[2048], line[512];
    char *dir = rundir;
    snprintf(dir, sizeof rundir, "%s/run-XXXXXX", build);
    if (!mkdtemp(dir)) fail_msg("cannot make a folder in %s (is kvdemo built there?)", build);
    snprintf(cmd, sizeof cmd,
             "mkdir -p %1$s/lessons && cp -pR %2$s/src %1$s/ && cp -p %2$s/lessons/*.o %1$s/lessons/"
             " && cp -p %2$s/flags %1$s/ && rm %1$s/src/util/rng.o",
             dir, build);
    RunResult r = shell_run(cmd);
    if (r.status != 0) fail_msg("copying the objects of %s: %s", build, r.err);
    run_free(&r);

    snprintf(cmd, sizeof cmd, MAKE " run %s BUILD=%s BIN=%s/kvdemo 2>&1 </dev/null", vars, dir, dir);
    r = shell_run(cmd);
    char obj[300];
    snprintf(obj, sizeof obj, "%s/src/util/rng.o", dir);
    long long built = mtime_ns(obj);
    if (r.status != 0) fail_msg("%s: status %d: %.500s", cmd, r.status, r.out);
    if (built < 0) fail_msg("%s: expected %s built again, got none", cmd, obj);
    if (compiler_line(r.out, line, sizeof line)) fail_msg("%s: expected no compiler line, got: %s", cmd, line);
    const char *first = r.out;
    // one line on stderr says that it builds, then the lesson
    if (strncmp(r.err, "kvdemo: building ", 17) != 0 || count_lines(r.err) != 1)
        fail_msg("%s: expected one line \"kvdemo: building ...\" on stderr, got: %.200s", cmd, r.err);
    while (*first == '\n') first++;
    snprintf(line, sizeof line, "%.*s", (int)strcspn(first, "\n"), first);
    if (strncmp(line, "== Lesson 2 ", 12) != 0)
        fail_msg("%s: expected lesson 2's heading (== Lesson 2 ...) first, got: %s", cmd, line);
    run_free(&r);
}

// ----------------------------------------------------------------------------
// The README

// The README's train line, with its options as they are; only the text, the
// model and the log go to the small fixture and a folder of the test's. Its
// preset is the tiny one, whose shape the README gives (how long the whole
// preset takes is a figure for docs/training.md, not for a test on a shared
// machine): a tenth of its steps on the small text, a few under the
// sanitizers.
static void test_readme_train_line(void **state) {
    (void)state;
    char *readme = file_slurp("README.md");
    const char *at = strstr(readme, "./kvdemo train ");
    if (!at) fail_msg("README.md: expected a line with ./kvdemo train, got none");
    char words[1024];
    snprintf(words, sizeof words, "%.*s", (int)strcspn(at + 9, "\n#"), at + 9);
    free(readme);

    char dir[256], args[2048] = "", *save = NULL;
    assert_int_equal(tmpdir_make(dir, sizeof dir, "readme"), 0);
    const char *prev = "", *preset = NULL;
    for (char *w = strtok_r(words, " ", &save); w; prev = w, w = strtok_r(NULL, " ", &save)) {
        char arg[300];
        if (!strcmp(prev, "--data")) snprintf(arg, sizeof arg, "%s", CORPUS);
        else if (!strcmp(prev, "--out")) snprintf(arg, sizeof arg, "%s/my-gpt.bin", dir);
        else if (!strcmp(prev, "--log")) snprintf(arg, sizeof arg, "%s/my-gpt.csv", dir);
        else snprintf(arg, sizeof arg, "%s", w);
        if (!strcmp(prev, "--preset")) preset = w;
        if (!strcmp(w, "--iters")) fail_msg("README's train line: expected the preset's own length, got --iters");
        strncat(args, " ", sizeof args - strlen(args) - 1);
        strncat(args, arg, sizeof args - strlen(args) - 1);
    }
    if (!preset || strcmp(preset, "tiny") != 0)
        fail_msg("README's train line: expected --preset tiny (the preset that trains in minutes), got %s",
                 preset ? preset : "none");
    // docs/training.md: the tiny preset trains 300 steps; a tenth of them.
    enum { STEPS = 30 };
    char iters[32];
    snprintf(iters, sizeof iters, " --iters %d", tests_sanitized() ? 3 : STEPS);
    strncat(args, iters, sizeof args - strlen(args) - 1);

    RunResult r = kvdemo_run(args);
    if (r.status != 0) fail_msg("kvdemo%s: expected status 0, got %d: %s", args, r.status, r.err);
    // README: "the small preset (context 32, embedding 64, 4 heads, 2 blocks)"
    if (!strstr(r.err, "context 32, embedding 64, heads 4, blocks 2"))
        fail_msg("kvdemo%s: expected the shape context 32, embedding 64, heads 4, blocks 2 on stderr, got:\n%.400s",
                 args, r.err);
    static const char *const written[] = {"my-gpt.bin", "my-gpt.csv"};
    for (size_t i = 0; i < 2; i++) {
        char path[300];
        snprintf(path, sizeof path, "%s/%s", dir, written[i]);
        if (access(path, R_OK) != 0) fail_msg("kvdemo%s: expected %s written, got none", args, path);
    }
    run_free(&r);
    assert_int_equal(tmpdir_remove(dir), 0);
}

// ----------------------------------------------------------------------------
// .gitignore

// Whether git would ignore path (a file; the folders above it are folders),
// after the patterns of ignore: the last pattern that matches decides, "!"
// takes a path back, a pattern ending in "/" matches folders only, one with a
// "/" before its end is matched from the top, one without against each name.
static int ignored(const char *ignore, const char *path) {
    int result = 0;
    char pat[256];
    for (const char *p = ignore; *p; p += strcspn(p, "\n"), p += *p == '\n') {
        snprintf(pat, sizeof pat, "%.*s", (int)strcspn(p, "\n"), p);
        size_t n = strlen(pat);
        while (n && pat[n - 1] == ' ') pat[--n] = '\0';
        if (!n || pat[0] == '#') continue;
        int negate = pat[0] == '!';
        char *q = pat + negate;
        int dir_only = q[strlen(q) - 1] == '/';
        if (dir_only) q[strlen(q) - 1] = '\0';
        int anchored = strchr(q, '/') != NULL;
        if (q[0] == '/') q++;
        // Each leading part of path: "build", "build/src", "build/src/util/utf8.o".
        for (const char *e = path;; e++) {
            if (*e != '/' && *e) continue;
            char part[256];
            snprintf(part, sizeof part, "%.*s", (int)(e - path), path);
            const char *name = strrchr(part, '/');
            name = name ? name + 1 : part;
            int is_dir = *e == '/';
            if ((!dir_only || is_dir) && fnmatch(q, anchored ? part : name, anchored ? FNM_PATHNAME : 0) == 0) {
                result = !negate;
                break;
            }
            if (!*e) break;
        }
    }
    return result;
}

static void test_gitignore_keeps_outputs_out(void **state) {
    (void)state;
    char *ignore = file_slurp(".gitignore");
    // What make builds, what training and the README's examples write.
    static const char *const outputs[] = {
        "kvdemo", "build/src/util/utf8.o", "build/tests/test_make", "build-portable/kvdemo", "build-asan/kvdemo",
        "build-debug/kvdemo", "build-fuzz/fuzz_text", "build-cov/kvdemo", "data/my-gpt.bin.tmp.Xk3p9Q",
        "data/my-gpt.bin.lock", "data/tinyshakespeare.txt", "data/my-gpt.bin",
        "data/my-gpt.bin.ckpt", "data/my-gpt.bin.ckpt.tmp", "data/my-gpt.csv", "my-model.bin",
        "my-model.bin.ckpt", "models/run1.bin.ckpt", "models/run1.bin.tmp", "bench.svg", "lesson2.html",
        "lesson2.md",
    };
    // What the repository holds.
    static const char *const sources[] = {
        "src/cmd/main.c", "lessons/lesson2.c", "Makefile", "README.md", "docs/lesson-2.md", "docs/zh/README.md",
        "data/tianqi.txt", "data/tinyshakespeare-gpt.bin", "tests/fixtures/gpt_a.kvgp",
        "tests/fixtures/corpus_small.txt", "tests/fuzz/corpus/checkpoint/valid-small.ckpt",
    };
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++)
        if (!ignored(ignore, outputs[i])) fail_msg(".gitignore: expected %s ignored, got kept", outputs[i]);
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++)
        if (ignored(ignore, sources[i])) fail_msg(".gitignore: expected %s kept, got ignored", sources[i]);
    free(ignore);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_make_rebuilds_when_the_flags_change),
        cmocka_unit_test_teardown(test_make_run_shows_the_lesson, remove_rundir),
        cmocka_unit_test(test_readme_train_line),
        cmocka_unit_test(test_gitignore_keeps_outputs_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
