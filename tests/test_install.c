// test_install — `make install` into a staging folder (DESTDIR), then the
// installed kvdemo run from another folder: it must find its data in
// PREFIX/share/kvdemo, and say which file is missing when it is not there;
// the pages its help names are installed too, in both languages, with the
// README their links lead to, and the help names them where they were
// installed.
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char stage[64];

static const char *bin(void) {
    const char *b = getenv("KVDEMO_BIN");
    return b && *b ? b : "./kvdemo";
}

// Runs a shell command; returns its exit status and its stdout+stderr in out.
static int sh(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sh(char *out, size_t size, const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect_file(const char *rel) {
    char path[256];
    snprintf(path, sizeof path, "%s%s", stage, rel);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) fail_msg("not installed: %s", path);
}

static int setup(void **state) {
    (void)state;
    strcpy(stage, "/tmp/kvdemo-install-XXXXXX");
    if (!mkdtemp(stage)) return -1;
    char out[4096];
    // -o: install the binary the tests run as it is, without remaking it.
    int st = sh(out, sizeof out, "make -s --no-print-directory -o %s install BIN=%s DESTDIR=%s PREFIX=/usr 2>&1",
                bin(), bin(), stage);
    if (st != 0) {
        fprintf(stderr, "make install: status %d: %s\n", st, out);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char out[4096];
    sh(out, sizeof out, "rm -rf %s", stage);
    return 0;
}

static void test_installs_every_file(void **state) {
    (void)state;
    expect_file("/usr/bin/kvdemo");
    expect_file("/usr/share/kvdemo/data/tianqi.txt");
    expect_file("/usr/share/kvdemo/data/tinyshakespeare-gpt.bin");
    expect_file("/usr/share/kvdemo/data/tinyshakespeare-draft.bin");
    expect_file("/usr/share/kvdemo/data/tinyshakespeare-llama-mha.bin");
    expect_file("/usr/share/kvdemo/data/tinyshakespeare-llama-gqa4.bin");
    expect_file("/usr/share/kvdemo/data/tinyshakespeare-llama-gqa2.bin");
    expect_file("/usr/share/kvdemo/data/tinyshakespeare-llama-mqa.bin");
    expect_file("/usr/share/kvdemo/data/tinyshakespeare-llama-draft.bin");
    expect_file("/usr/share/kvdemo/data/tinyshakespeare-llama-window64.bin");
    expect_file("/usr/share/man/man1/kvdemo.1");
    expect_file("/usr/share/bash-completion/completions/kvdemo");
    expect_file("/usr/share/kvdemo/docs/lesson-2.md");
    expect_file("/usr/share/kvdemo/docs/lesson-10.md");
    expect_file("/usr/share/kvdemo/docs/glossary.md");
    expect_file("/usr/share/kvdemo/docs/zh/lesson-2.md");
    expect_file("/usr/share/kvdemo/docs/zh/README.md");
    expect_file("/usr/share/kvdemo/README.md");
}

// Every relative link of the installed pages leads to an installed file (the
// Chinese README's link to the English one among them).
static void test_installed_links_resolve(void **state) {
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/usr/share/kvdemo/README.md", stage);
    expect_links_resolve(path);
    snprintf(path, sizeof path, "%s/usr/share/kvdemo/docs", stage);
    expect_links_resolve_in(path);
    snprintf(path, sizeof path, "%s/usr/share/kvdemo/docs/zh", stage);
    expect_links_resolve_in(path);
}

// From /, the installed help names the installed page (in Chinese, the
// Chinese twin first), and the page is there.
static void test_installed_help_names_installed_pages(void **state) {
    (void)state;
    static char out[1 << 14];
    static const struct { const char *args, *page; } cases[] = {
        {"help lesson 2", "/usr/share/kvdemo/docs/lesson-2.md"},
        {"help lesson 7 --lang zh", "/usr/share/kvdemo/docs/zh/lesson-7.md"},
        {"help bench", "/usr/share/kvdemo/docs/lesson-10.md"},
        {"help train --lang zh", "/usr/share/kvdemo/docs/training.md"},
        {"help", "/usr/share/kvdemo/docs/glossary.md"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int st = sh(out, sizeof out, "cd / && env -u LANG -u LC_ALL %s/usr/bin/kvdemo %s 2>&1", stage, cases[i].args);
        if (st != 0) fail_msg("installed kvdemo %s: status %d: %.300s", cases[i].args, st, out);
        char want[256];
        snprintf(want, sizeof want, "%s%s", stage, cases[i].page);
        if (!strstr(out, want)) fail_msg("installed kvdemo %s: expected the page %s in:\n%s", cases[i].args, want, out);
        if (access(want, R_OK) != 0) fail_msg("the page it names is not there: %s", want);
    }
}

static void test_installed_binary_finds_its_data(void **state) {
    (void)state;
    static char out[1 << 16];
    // From /, where no data/ folder is: the lesson reads the installed example.
    int st = sh(out, sizeof out, "cd / && env -u LANG -u LC_ALL %s/usr/bin/kvdemo lesson 2 --trace none --format json 2>&1",
                stage);
    if (st != 0) fail_msg("installed kvdemo lesson 2: status %d: %.300s", st, out);
    if (!strstr(out, "\"identical\":true")) fail_msg("installed lesson 2 made no identical comparison: %.300s", out);
    // And the char GPT: the shipped model from the installed data folder.
    st = sh(out, sizeof out, "cd / && %s/usr/bin/kvdemo generate --steps 3 --seed 1 2>&1", stage);
    if (st != 0) fail_msg("installed kvdemo generate: status %d: %.300s", st, out);
}

static void test_missing_installed_data_is_named(void **state) {
    (void)state;
    char out[4096], path[256];
    snprintf(path, sizeof path, "%s/usr/share/kvdemo/data/tianqi.txt", stage);
    char moved[300];
    snprintf(moved, sizeof moved, "%s.away", path);
    assert_int_equal(rename(path, moved), 0);
    int st = sh(out, sizeof out, "cd / && %s/usr/bin/kvdemo lesson 2 2>&1 >/dev/null", stage);
    assert_int_equal(rename(moved, path), 0);
    if (st != 1) fail_msg("lesson 2 without its data: status %d, expected 1 (%s)", st, out);
    if (!strstr(out, "data/tianqi.txt")) fail_msg("the error does not name data/tianqi.txt: %s", out);
    if (count_lines(out) != 1) fail_msg("expected one line on stderr, got: %s", out);
}

static void test_uninstall_removes_what_install_put(void **state) {
    (void)state;
    char out[4096];
    int st = sh(out, sizeof out, "make -s --no-print-directory uninstall DESTDIR=%s PREFIX=/usr 2>&1", stage);
    if (st != 0) fail_msg("make uninstall: status %d: %s", st, out);
    static const char *const gone[] = {"/usr/bin/kvdemo", "/usr/share/kvdemo", "/usr/share/man/man1/kvdemo.1",
                                       "/usr/share/bash-completion/completions/kvdemo"};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s%s", stage, gone[i]);
        if (access(path, F_OK) == 0) fail_msg("still there after make uninstall: %s", path);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_installs_every_file),
        cmocka_unit_test(test_installed_links_resolve),
        cmocka_unit_test(test_installed_binary_finds_its_data),
        cmocka_unit_test(test_installed_help_names_installed_pages),
        cmocka_unit_test(test_missing_installed_data_is_named),
        cmocka_unit_test(test_uninstall_removes_what_install_put),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
