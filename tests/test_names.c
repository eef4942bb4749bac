// test_names — what a student reads when kvdemo cannot go on: a character
// the model does not know is named as it looks, its code point only beside
// it; a missing tinyshakespeare is said with the command that gets it from
// any folder (no `make data`, which an installed kvdemo has no Makefile
// for); `help lesson 12` says what its --data is.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corpus.h"
#include "fileio.h"
#include "testutil.h"
#include "utf8.h"

static void expect_in(const char *text, const char *needle, const char *what) {
    if (!strstr(text, needle)) fail_msg("%s: expected \"%s\" in:\n%s", what, needle, text);
}

// utf8_name: the character, or the name of one that shows nothing, then
// the code point, in both languages.
static void test_character_named(void **state) {
    (void)state;
    static const struct { uint32_t c; const char *en, *zh; } cases[] = {
        {0x00E9, "'\xc3\xa9' (U+00E9)", "\xe2\x80\x9c\xc3\xa9\xe2\x80\x9d\xef\xbc\x88U+00E9\xef\xbc\x89"},
        {0x5929, "'\xe5\xa4\xa9' (U+5929)", "\xe2\x80\x9c\xe5\xa4\xa9\xe2\x80\x9d\xef\xbc\x88U+5929\xef\xbc\x89"},
        {'\n', "newline (U+000A)", "换行符（U+000A）"},
        {'\t', "tab (U+0009)", "制表符（U+0009）"},
        {' ', "space (U+0020)", "空格（U+0020）"},
        {0x1B, "the control character U+001B", "控制字符 U+001B"},
        {0x9B, "the control character U+009B", "控制字符 U+009B"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        utf8_name(out, sizeof out, cases[i].c, 0);
        if (strcmp(out, cases[i].en)) fail_msg("U+%04X in English: expected \"%s\", got \"%s\"", cases[i].c, cases[i].en, out);
        utf8_name(out, sizeof out, cases[i].c, 1);
        if (strcmp(out, cases[i].zh)) fail_msg("U+%04X in Chinese: expected \"%s\", got \"%s\"", cases[i].c, cases[i].zh, out);
    }
}

// A text for a model that lacks one of its characters: the loader's message
// names it (the training text of train --resume, eval, lesson 12).
static void test_unknown_character_of_a_text(void **state) {
    (void)state;
    char dir[256], path[300], err[512];
    assert_int_equal(tmpdir_make(dir, sizeof dir, "names"), 0);
    snprintf(path, sizeof path, "%s/text.txt", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("ab\tc\xc3\xa9", f);
    fclose(f);
    const uint32_t vocab[] = {'\t', 'a', 'b', 'c'};
    TrainText t;
    assert_int_equal(train_text_load(&t, path, vocab, 4, ERR(LANG_EN, err)), -1);
    expect_in(err, "character '\xc3\xa9' (U+00E9) at position 4", "English");
    assert_int_equal(train_text_load(&t, path, vocab, 4, ERR(LANG_ZH, err)), -1);
    expect_in(err, "字符“\xc3\xa9”（U+00E9）（第 4 个）", "Chinese");
    const uint32_t no_tab[] = {'a', 'b', 'c', 0xE9};
    assert_int_equal(train_text_load(&t, path, no_tab, 4, ERR(LANG_EN, err)), -1);
    expect_in(err, "character tab (U+0009) at position 2", "a tab");
    tmpdir_remove(dir);
}

// A kvdemo with no tinyshakespeare beside it or in the current folder (a
// copy in an empty folder, as an installed one run from home): the one line
// gives --data and the download command with its sha256, never `make data`;
// the command and the sum are those of tests/get-data.sh.
static void test_missing_corpus_says_how_to_get_it(void **state) {
    (void)state;
    char *script = file_slurp("tests/get-data.sh");
    expect_in(script, CORPUS_URL, "tests/get-data.sh");
    expect_in(script, CORPUS_SHA256, "tests/get-data.sh");
    free(script);
    char dir[256], cmd[1024];
    assert_int_equal(tmpdir_make(dir, sizeof dir, "nocorpus"), 0);
    const char *bin = getenv("KVDEMO_BIN");
    if (!bin || !*bin) bin = "./kvdemo";
    static const char *const langs[2] = {"en", "zh"};
    static const char *const lead[2] = {"no training text: give --data FILE", "没有训练文本：请用 --data FILE"};
    for (int zh = 0; zh < 2; zh++) {
        snprintf(cmd, sizeof cmd, "cp %s %s/kvdemo && cd %s && ./kvdemo train --preset tiny --out m.bin --lang %s", bin,
                 dir, dir, langs[zh]);
        RunResult r = shell_run(cmd);
        if (r.status != 1) fail_msg("--lang %s: expected exit 1, got %d (stderr: %s)", langs[zh], r.status, r.err);
        if (count_lines(r.err) != 1) fail_msg("--lang %s: expected one line on stderr, got:\n%s", langs[zh], r.err);
        expect_in(r.err, lead[zh], langs[zh]);
        expect_in(r.err, CORPUS_GET, langs[zh]);
        expect_in(r.err, CORPUS_SHA256, langs[zh]);
        if (strstr(r.err, "make data")) fail_msg("--lang %s: an installed kvdemo has no `make data`: %s", langs[zh], r.err);
        run_free(&r);
    }
    tmpdir_remove(dir);
}

// help lesson 12: --data is the text of the validation loss, not the
// 4-dim example's numbers that the other lessons' --data are.
static void test_lesson12_help_says_what_data_is(void **state) {
    (void)state;
    static const char *const langs[2] = {"en", "zh"};
    static const char *const want[2] = {"the text the validation loss is measured on", "计算验证损失所用的文本"};
    char args[64];
    for (int zh = 0; zh < 2; zh++) {
        snprintf(args, sizeof args, "help lesson 12 --lang %s", langs[zh]);
        RunResult r = kvdemo_run(args);
        assert_int_equal(r.status, 0);
        expect_in(r.out, want[zh], args);
        if (strstr(r.out, "tianqi")) fail_msg("%s: --data is not the example's numbers here:\n%s", args, r.out);
        run_free(&r);
    }
    RunResult r = kvdemo_run("help lesson 2");
    expect_in(r.out, "the example's numbers (default data/tianqi.txt)", "help lesson 2");
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_character_named),
        cmocka_unit_test(test_unknown_character_of_a_text),
        cmocka_unit_test(test_missing_corpus_says_how_to_get_it),
        cmocka_unit_test(test_lesson12_help_says_what_data_is),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
