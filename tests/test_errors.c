// test_errors — every error line speaks the user's language. A table of bad
// inputs (an unknown command, lesson or option, values out of range or
// malformed, a missing or malformed --data file, a prompt outside the
// vocabulary, a missing --model file, memory with bad numbers, ...) runs
// three ways: with --lang zh at the end of the line (after the mistake, so the
// language must be found before parsing), with LANG=zh_CN.UTF-8, and in
// English. Each run must fail with the row's exit status (2 for usage) and
// say exactly one line on stderr. The Chinese line starts with "kvdemo：" and
// holds no run of three or more ASCII letters outside the words of the
// command line itself, identifiers (anything with a digit, '_', '-', '.' or
// '/' in it) and the allow-list below. The English line starts with
// "kvdemo: " and has no full-width punctuation: English users see what they
// saw before (the tests that pin English texts check the words).
#include "testutil.h"

#include "buf.h"
#include "corpus.h"
#include "fileio.h"
#include "gpt.h"

#include <errno.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Words an error may show as they are: command names, option metavars,
// the documents' terms, units and the names of model shapes.
static const char *const ALLOWED[] = {
    // commands, as `kvdemo help` lists them
    "kvdemo", "list", "lesson", "generate", "race", "bench", "init", "train", "eval", "memory", "help", "version",
    // metavars and choices of options
    "FILE", "NAME", "SIZE", "LIST", "TEXT", "none", "summary", "full", "text", "json", "html", "auto", "always", "never",
    "random", "seed", "tiny", "plain", "flash", "offset", "stale", "mask", "layout", "wrong", "scale",
    // the documents' terms and units
    "KV", "Cache", "GPU", "KiB", "MiB", "GiB", "TiB", "token", "tokens", "key", "value", "scores", "weights", "ROMEO",
    "UTF", "FIFO", "tinyshakespeare", "make", "data",
};

static int allowed(const char *w, size_t n, const char *args) {
    if (word_in_list(w, n, ALLOWED, sizeof ALLOWED / sizeof ALLOWED[0])) return 1;
    if (w[-1] == '\\') return 1;   // an escaped byte of a quoted token: \xFF (a word is never first on its line)
    // A word the user typed (a value, a misspelt name) is shown back as typed.
    for (const char *p = args; *p; p++)
        if (!strncmp(p, w, n) && (p == args || !isalnum((unsigned char)p[-1])) && !isalnum((unsigned char)p[n]))
            return 1;
    return 0;
}

// The first English word of line (one line, no newline) that is neither
// code nor allowed, written to word; 0 when there is none.
static int english_word(const char *line, const char *args, char *word, size_t size) {
    size_t len = strlen(line), at = 0, w, n;
    while (english_word_next(line, len, &at, &w, &n))
        if (!allowed(line + w, n, args)) {
            snprintf(word, size, "%.*s", (int)n, line + w);
            return 1;
        }
    return 0;
}

typedef struct {
    const char *args;   // after "kvdemo"; DIR is the test's folder
    int status;         // the exit status it must give
    int lang_first;     // --lang zh before the command (at the end it would be the missing value)
} BadInput;

static const BadInput BAD[] = {
    // the command line
    {"lessn 2", 2, 0},
    {"bogus", 2, 0},
    {"--bogus lesson 2", 2, 0},
    {"lesson 2 --cahce", 2, 0},
    {"lesson 2 --frobnicate", 2, 0},
    {"lesson 99", 2, 0},
    {"lesson 62", 2, 0},
    {"lesson 6", 2, 0},
    {"lesson", 2, 0},
    {"lesson 2 3", 2, 0},
    {"list extra", 2, 0},
    {"help lesson 99", 2, 0},
    {"help generate extra", 2, 0},
    {"lesson 2 --precision 99", 2, 0},
    {"lesson 2 --precision abc", 2, 0},
    {"lesson 2 --precision", 2, 1},
    {"lesson 2 --trace loud", 2, 0},
    {"lesson 2 --format xml", 2, 0},
    {"lesson 2 --data ''", 2, 0},
    {"lesson 2 --cache=yes", 2, 0},
    {"lesson 2 --precision 3 --precision 4", 2, 0},
    {"lesson 2 --cache --no-cache", 2, 0},
    {"lesson 2 --bug stale", 2, 0},
    {"generate --temperature -1", 2, 0},
    {"generate --top-k many", 2, 0},
    // files
    {"lesson 2 --data DIR/missing.txt", 1, 0},
    {"lesson 2 --data DIR/bad.txt", 1, 0},
    {"lesson 2 --data DIR/short.txt", 1, 0},
    {"lesson 2 --data DIR", 1, 0},
    {"generate --model DIR/missing.bin", 1, 0},
    {"list >/dev/full", 1, 0},
    // the char GPT's commands
    {"generate --prompt 天", 2, 0},
    {"generate --prompt ''", 2, 0},
    {"generate --init random --model DIR/missing.bin", 2, 0},
    {"generate --preset tiny", 2, 0},
    {"generate --tile 8", 2, 0},
    {"generate --bug nonsense", 2, 0},
    {"generate --bug stale --no-cache", 2, 0},
    {"generate --samples 2", 2, 0},
    {"generate --paged --no-cache", 2, 0},
    {"generate --paged --attention flash", 2, 0},
    // the char GPT's files: the model loader's reasons, the corpus, the checkpoint
    {"generate --model DIR/head.bin", 1, 0},
    {"generate --model DIR/header40.bin", 1, 0},
    {"eval --model DIR/head.bin", 1, 0},
    {"eval --data DIR/notutf8.txt", 1, 0},
    {"lesson 12 --data DIR/notutf8.txt", 1, 0},
    {"train --out DIR/m.bin --data DIR/notutf8.txt", 1, 0},
    {"train --out DIR/m.bin --data DIR/missing.txt", 1, 0},
    {"train --out DIR/m.bin --data tests/fixtures/corpus_small.txt --resume DIR/bad.txt", 1, 0},
    {"init", 2, 0},
    // messages that once misled (issue 29, 11)
    {"train --out DIR/m.bin --data DIR/empty.txt", 1, 0},
    {"eval --data DIR/empty.txt", 1, 0},
    {"train --out DIR/m.bin --data DIR", 1, 0},
    {"lesson 2 --data DIR/nul.txt", 1, 0},
    {"lesson 4 --model DIR/t1.bin", 2, 0},
    {"generate --paged --block-size 4096 --num-blocks 1000000", 1, 0},
    {"lesson 2 --format html >/dev/full", 1, 0},
    {"lesson 2 --data DIR/tok_utf8.txt", 1, 0},
    {"lesson 2 --data DIR/tok_esc.txt", 1, 0},
    // lessons beyond the 4-dim example
    {"lesson 3 --model DIR/bad.bin", 1, 0},
    {"lesson 3 --model DIR/missing.bin", 1, 0},
    {"lesson 3 --prompt 😀", 2, 0},
    {"lesson 7 --steps 99", 2, 0},
    {"lesson 4 --prompt ROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEO"
     "ROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEO"
     "ROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEOROMEO", 2, 0},
    {"lesson 6.1 --steps 100000", 2, 0},
    {"lesson 6.2 --steps 100000", 2, 0},
    // memory
    {"memory", 2, 0},
    {"memory --tokens 10", 2, 0},
    {"memory --model nosuchmodel --tokens 10", 2, 0},
    {"memory --model llama-2-7b --gpu-memory 80XB", 2, 0},
    {"memory --layers 2 --tokens 10", 2, 0},
    {"memory --list --tokens 10", 2, 0},
    {"memory --tokens -5", 2, 0},
    {"memory --model llama-2-7b --layers 2 --kv-heads 2 --head-dim 2 --tokens 1", 2, 0},
};
enum { NUM_BAD = (int)(sizeof BAD / sizeof BAD[0]) };

static char dir[256];

// The 4-dim example's data as lines (comments dropped, so that X comes
// first), then the same after a UTF-8 byte order mark.
static const char TOY[] = "X\n天 1 0 1 0\n气 0 1 0 1\n真 1 1 0 0\n"
                          "W_Q\n1 0 0\n0 1 0\n0 0 1\n1 1 0\n"
                          "W_K\n0 1 0\n1 0 0\n0 0 1\n0 1 1\n"
                          "W_V\n1 0\n0 1\n1 1\n0 0\n";

static int write_bytes(const char *name, const char *a, size_t na, const char *b, size_t nb) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(a, 1, na, f) == na && fwrite(b, 1, nb, f) == nb;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static int make_message_fixtures(void) {
    static const char BOM[] = "\xef\xbb\xbf", TEXT[] = "to be or not to be, that is the question\n";
    static const char NUL[] = "X\n天 1 0\0 1\n";
    static const char NOT_UTF8[] = "X\n\xff\xfe 1 0\nb 0 1\n", ESC[] = "X\na\x1b[31m 1 0\nb 0 1\n";
    static const char C1[] = "X\na\xc2\x9b 1 0\nb 0 1\n", CLEAR[] = "\x1b[2J\nX\n";
    char cmd[1024];
    const char *bin = getenv("KVDEMO_BIN");
    // a model whose context holds one token: no prompt leaves room for the next
    snprintf(cmd, sizeof cmd, "%s train --preset tiny --context 1 --iters 1 --data tests/fixtures/corpus_small.txt "
             "--out %s/t1.bin >/dev/null 2>&1", bin && *bin ? bin : "./kvdemo", dir);
    if (system(cmd) != 0) return -1;
    return write_bytes("empty.txt", "", 0, "", 0) || write_bytes("bomonly.txt", BOM, 3, "", 0) ||
           write_bytes("nul.txt", NUL, sizeof NUL - 1, "", 0) || write_bytes("toy.txt", TOY, sizeof TOY - 1, "", 0) ||
           write_bytes("bomtoy.txt", BOM, 3, TOY, sizeof TOY - 1) || write_bytes("text.txt", TEXT, sizeof TEXT - 1, "", 0) ||
           write_bytes("bomtext.txt", BOM, 3, TEXT, sizeof TEXT - 1) ||
           write_bytes("tok_utf8.txt", NOT_UTF8, sizeof NOT_UTF8 - 1, "", 0) ||
           write_bytes("tok_esc.txt", ESC, sizeof ESC - 1, "", 0) || write_bytes("tok_c1.txt", C1, sizeof C1 - 1, "", 0) ||
           write_bytes("clear.txt", CLEAR, sizeof CLEAR - 1, "", 0);
}

static int setup(void **state) {
    (void)state;
    if (tmpdir_make(dir, sizeof dir, "errors")) return -1;
    char path[512];
    snprintf(path, sizeof path, "%s/bad.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs("X\n天 1 2\n气 1 0,5\n", f);   // a decimal comma: not a number
    fclose(f);
    snprintf(path, sizeof path, "%s/short.txt", dir);
    f = fopen(path, "w");
    if (!f) return -1;
    fputs("X\n天 1\nW_Q\n1\nW_K\n1\nW_V\n1\n", f);   // one token: the lessons need two
    fclose(f);
    snprintf(path, sizeof path, "%s/bad.bin", dir);
    f = fopen(path, "w");
    if (!f) return -1;
    fputs("KVLMjunk", f);   // a LLaMA model's magic, then a truncated header
    fclose(f);
    // The char GPT's model cut short: in its header, and after the header
    // of tests/fixtures/gpt_a.kvgp (its sizes then ask for more bytes).
    static const struct { const char *name; size_t bytes; } CUT[] = {{"head.bin", 8}, {"header40.bin", 40}};
    unsigned char model[40];
    FILE *in = fopen("tests/fixtures/gpt_a.kvgp", "rb");
    if (!in) return -1;
    size_t got = fread(model, 1, sizeof model, in);
    fclose(in);
    if (got != sizeof model) return -1;
    for (size_t i = 0; i < sizeof CUT / sizeof CUT[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, CUT[i].name);
        f = fopen(path, "wb");
        if (!f) return -1;
        fwrite(model, 1, CUT[i].bytes, f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/notutf8.txt", dir);
    f = fopen(path, "wb");
    if (!f) return -1;
    fputs("ab\xff\xfe", f);   // not UTF-8: a training text must be
    fclose(f);
    return make_message_fixtures();
}

static int teardown(void **state) {
    (void)state;
    return tmpdir_remove(dir);
}

// args with every "DIR" replaced by the test's folder.
static void expand(char *out, size_t size, const char *args) {
    Buf b;
    buf_init(&b);
    buf_append(&b, "");
    for (const char *p = args; *p;) {
        if (!strncmp(p, "DIR", 3)) {
            buf_append(&b, dir);
            p += 3;
        } else {
            buf_appendn(&b, p, 1);
            p++;
        }
    }
    char *s = buf_take(&b);
    snprintf(out, size, "%s", s);
    free(s);
}

// One run of one bad input; its problems are appended to bad.
static void check(Buf *bad, const char *env, const char *args, int status, int zh) {
    RunResult r = kvdemo_run_env(env, args);
    const char *how = env ? env : "";
    if (r.status != status)
        buf_printf(bad, "%s kvdemo %s: exit status: expected %d, got %d\n", how, args, status, r.status);
    if (count_lines(r.err) != 1 || r.err[strlen(r.err) - 1] != '\n') {
        buf_printf(bad, "%s kvdemo %s: stderr: expected 1 line, got %d: %s\n", how, args, count_lines(r.err), r.err);
    } else if (zh) {
        char word[128];
        if (strncmp(r.err, "kvdemo：", strlen("kvdemo：")))
            buf_printf(bad, "%s kvdemo %s: expected \"kvdemo：\" first, got: %s", how, args, r.err);
        else if (english_word(r.err, args, word, sizeof word))
            buf_printf(bad, "%s kvdemo %s: English word '%s' in: %s", how, args, word, r.err);
    } else {
        if (strncmp(r.err, "kvdemo: ", 8) || strstr(r.err, "：") || strstr(r.err, "；") || strstr(r.err, "“"))
            buf_printf(bad, "kvdemo %s: expected an English line, got: %s", args, r.err);
    }
    run_free(&r);
}

static void test_errors_speak_the_users_language(void **state) {
    (void)state;
    Buf bad;
    buf_init(&bad);
    buf_append(&bad, "");
    for (int i = 0; i < NUM_BAD; i++) {
        char args[1024], with_lang[1100];
        expand(args, sizeof args, BAD[i].args);
        snprintf(with_lang, sizeof with_lang, BAD[i].lang_first ? "--lang zh %s" : "%s --lang zh", args);
        check(&bad, NULL, with_lang, BAD[i].status, 1);
        check(&bad, "LANG=zh_CN.UTF-8", args, BAD[i].status, 1);
        check(&bad, NULL, args, BAD[i].status, 0);
    }
    char *s = buf_take(&bad);
    if (s && *s) {
        fprintf(stderr, "%s", s);
        fail_msg("error lines not in the user's language (listed above)");
    }
    free(s);
}

// Notices that a run goes on after (an option ignored, --color with nothing
// to colour, --threads capped) speak Chinese too: every stderr line of a
// run that succeeds.
static void test_notices_speak_the_users_language(void **state) {
    (void)state;
    const char *runs[] = {
        "lesson 1 --trace none --repeat 2 --lang zh",
        "lesson 2 --trace none --color always --lang zh",
        "lesson 8 --trace none --color always --lang zh",
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        RunResult r = kvdemo_run(runs[i]);
        if (r.status != 0) fail_msg("kvdemo %s: exit %d: %s", runs[i], r.status, r.err);
        if (count_lines(r.err) < 1) fail_msg("kvdemo %s: expected a notice on stderr, got none", runs[i]);
        for (char *line = r.err; *line;) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = '\0';
            char word[128];
            if (strncmp(line, "kvdemo：", strlen("kvdemo：")))
                fail_msg("kvdemo %s: expected \"kvdemo：\" first, got: %s", runs[i], line);
            if (english_word(line, runs[i], word, sizeof word))
                fail_msg("kvdemo %s: English word '%s' in: %s", runs[i], word, line);
            if (!nl) break;
            line = nl + 1;
        }
        run_free(&r);
    }
}

// The library's side: fileio_fail2 picks the format of the Err's language,
// and fileio_strerror says a class's usual reasons in Chinese.
static void test_fail2_follows_the_errs_language(void **state) {
    (void)state;
    char err[128];
    assert_int_equal(fileio_fail2(ERR(LANG_EN, err), "%s: row %d", "%s：第 %d 行", "a.txt", 3), -1);
    assert_string_equal(err, "a.txt: row 3");
    assert_string_equal(fileio_strerror(LANG_EN, ENOENT), strerror(ENOENT));
    fileio_fail2(ERR(LANG_ZH, err), "%s: row %d", "%s：第 %d 行", "a.txt", 3);
    assert_string_equal(err, "a.txt：第 3 行");
    int codes[] = {ENOENT, EACCES, EISDIR, ENOTDIR, ENOSPC, EROFS};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        char word[64];
        if (english_word(fileio_strerror(LANG_ZH, codes[i]), "", word, sizeof word))
            fail_msg("errno %d: expected a Chinese reason, got: %s", codes[i], fileio_strerror(LANG_ZH, codes[i]));
    }
    fileio_fail2(ERR_NONE, "%s", "%s", "no buffer: nothing written");
}

// The language is the Err's, not the process's: errors of both languages
// made in one process, in turn and through the same loader, each come out
// in its own, whichever came before it.
static void test_two_languages_in_one_process(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/missing.bin", dir);
    const char *en_want = "cannot open: No such file or directory", *zh_want = "无法打开：没有这个文件或文件夹";
    for (int round = 0; round < 2; round++) {
        char en[512] = "", zh[512] = "";
        GptModel m;
        Err first = round ? ERR(LANG_ZH, zh) : ERR(LANG_EN, en), second = round ? ERR(LANG_EN, en) : ERR(LANG_ZH, zh);
        assert_int_equal(gpt_load(&m, path, first), -1);
        assert_int_equal(gpt_load(&m, path, second), -1);
        if (!strstr(en, en_want) || !strstr(en, path))
            fail_msg("round %d, English Err: expected \"%s: ...%s\", got \"%s\"", round, path, en_want, en);
        if (!strstr(zh, zh_want) || !strstr(zh, path))
            fail_msg("round %d, Chinese Err: expected \"%s：...%s\", got \"%s\"", round, path, zh_want, zh);
        char word[64];
        if (english_word(zh, path, word, sizeof word))
            fail_msg("round %d, Chinese Err: expected no English word, got '%s' in: %s", round, word, zh);
    }
    char a[64], b[64];
    Err en = ERR(LANG_EN, a), zh = ERR(LANG_ZH, b);
    fileio_fail2(zh, "row %d of %s", "第 %d 行（%s）", 2, fileio_text(zh.lang, "the table", "表"));
    fileio_fail2(en, "row %d of %s", "第 %d 行（%s）", 2, fileio_text(en.lang, "the table", "表"));
    assert_string_equal(a, "row 2 of the table");
    assert_string_equal(b, "第 2 行（表）");
}

// --lang zh on the command line reaches the loaders' reasons (through the
// Err the command makes) and main's last line (standard output lost).
static void test_lang_zh_reaches_loaders_and_main(void **state) {
    (void)state;
    static const struct {
        const char *args;
        const char *en, *zh;
    } CASES[] = {
        {"generate --model DIR/missing.bin", "No such file or directory", "没有这个文件或文件夹"},
        {"list >/dev/full", "kvdemo: error writing standard output: No space left on device",
         "kvdemo：写标准输出时出错：磁盘已满"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        for (int zh = 0; zh < 2; zh++) {
            char args[1024], with_lang[1100];
            expand(args, sizeof args, CASES[i].args);
            snprintf(with_lang, sizeof with_lang, "%s --lang %s", args, zh ? "zh" : "en");
            RunResult r = kvdemo_run(with_lang);
            const char *want = zh ? CASES[i].zh : CASES[i].en;
            if (r.status != 1 || count_lines(r.err) != 1 || !strstr(r.err, want) ||
                strncmp(r.err, zh ? "kvdemo：" : "kvdemo: ", strlen(zh ? "kvdemo：" : "kvdemo: ")))
                fail_msg("kvdemo %s: expected status 1 and one line with \"%s\", got %d and: %s", with_lang, want,
                         r.status, r.err);
            run_free(&r);
        }
}

// --lang en on the command line wins over LANG=zh_CN.UTF-8, even after the
// mistake; and the checker itself finds an English word.
static void test_lang_on_the_line_wins(void **state) {
    (void)state;
    RunResult r = kvdemo_run_env("LANG=zh_CN.UTF-8", "lesson 99 --lang en");
    assert_int_equal(r.status, 2);
    if (strncmp(r.err, "kvdemo: unknown lesson '99'", 27)) fail_msg("expected the English error, got: %s", r.err);
    run_free(&r);
    char word[64];
    assert_true(english_word("kvdemo：没有第“99”课；valid ids", "lesson 99", word, sizeof word));
    assert_string_equal(word, "valid");
    assert_false(english_word("kvdemo：--cahce 不是 lesson 的选项；data/tianqi.txt", "lesson 2 --cahce", word,
                              sizeof word));
}

// Issue 29, 11: messages that said something else than the problem. Each
// now names it (in English here; the table above checks the Chinese).
static void test_messages_name_the_problem(void **state) {
    (void)state;
    static const struct {
        const char *args;
        int status;
        const char *say, *not_say;
    } CASES[] = {
        {"train --out DIR/m.bin --data DIR/empty.txt", 1, "empty.txt is empty", "V=0"},
        {"train --out DIR/m.bin --data DIR/bomonly.txt", 1, "bomonly.txt is empty", "V=0"},
        {"eval --data DIR/empty.txt", 1, "empty.txt is empty", "too short"},
        {"lesson 12 --data DIR/empty.txt", 1, "empty.txt is empty", "too short"},
        {"train --out DIR/m.bin --data DIR", 1, "is a folder, not a regular file", NULL},
        {"eval --data DIR", 1, "is a folder", NULL},
        {"lesson 2 --data DIR/nul.txt", 1, "nul.txt:2: byte 8 is a NUL byte; the data file must be text", "too long"},
        {"lesson 4 --model DIR/t1.bin", 2, "lesson 4 needs a model whose context holds at least 2 tokens", "at most 0"},
        {"lesson 5 --model DIR/t1.bin", 2, "this one holds 1", "at most 0"},
        {"generate --paged --block-size 4096 --num-blocks 1000000", 1,
         "the paged cache's 1000000 blocks of 4096 positions ask for 68.7 TiB", NULL},
        // issue 29, 6: a token is printable UTF-8 text, shown escaped when it is not
        {"lesson 2 --data DIR/tok_utf8.txt", 1, "tok_utf8.txt:2: token \"\\xFF\\xFE\" is not valid UTF-8 (byte 1)", NULL},
        {"lesson 1 --data DIR/tok_esc.txt", 1, "token \"a\\x1B[31m\" holds the control character U+001B", "\x1b"},
        {"lesson 9 --data DIR/tok_c1.txt", 1, "token \"a\\xC2\\x9B\" holds the control character U+009B", "\xc2"},
        {"lesson 2 --data DIR/clear.txt", 1, "clear.txt:1: expected a matrix name (X, W_Q, W_K or W_V) or \"scale N\", "
         "found \"\\x1B[2J\"", "\x1b"},
        {"lesson 2 --format html >/dev/full", 1, "error writing standard output: No space left on device", NULL},
        {"lesson 2 --format md >/dev/full", 1, "error writing standard output: No space left on device", NULL},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char args[1024];
        expand(args, sizeof args, CASES[i].args);
        RunResult r = kvdemo_run(args);
        if (r.status != CASES[i].status)
            fail_msg("kvdemo %s: exit status expected %d, got %d: %s", args, CASES[i].status, r.status, r.err);
        if (!strstr(r.err, CASES[i].say) || (CASES[i].not_say && strstr(r.err, CASES[i].not_say)))
            fail_msg("kvdemo %s: expected \"%s\" in: %s", args, CASES[i].say, r.err);
        run_free(&r);
    }
}

// A byte order mark before the first line (Notepad) is no character: toy
// data and a training text read the same with it and without it.
static void test_byte_order_mark_skipped(void **state) {
    (void)state;
    char args[1024];
    expand(args, sizeof args, "lesson 2 --trace full --format json --data DIR/toy.txt");
    RunResult plain = kvdemo_run(args);
    expand(args, sizeof args, "lesson 2 --trace full --format json --data DIR/bomtoy.txt");
    RunResult bom = kvdemo_run(args);
    if (plain.status != 0 || bom.status != 0)
        fail_msg("lesson 2 on the toy data: exit status expected 0 and 0, got %d and %d: %s", plain.status, bom.status,
                 bom.err);
    assert_non_null(strstr(plain.out, "天"));   // the tokens were read at all
    // line by line, the timings (and their ratio) left out
    char *p = plain.out, *b = bom.out;
    for (int line = 1; *p || *b; line++) {
        char *pe = strchr(p, '\n'), *be = strchr(b, '\n');
        if (!pe || !be) fail_msg("line %d: one output ends before the other", line);
        *pe = *be = '\0';
        if (!strstr(p, "\"timing\"") && !strstr(p, "_time_ratio") && strcmp(p, b) != 0)
            fail_msg("line %d: expected (without the mark) %s, got (with it) %s", line, p, b);
        p = pe + 1, b = be + 1;
    }
    run_free(&plain);
    run_free(&bom);
    // a training text: the same characters, no U+FEFF among them
    TrainText a, c;
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/text.txt", dir);
    assert_int_equal(train_text_load(&a, path, NULL, 0, ERR(LANG_EN, err)), 0);
    snprintf(path, sizeof path, "%s/bomtext.txt", dir);
    assert_int_equal(train_text_load(&c, path, NULL, 0, ERR(LANG_EN, err)), 0);
    if (a.n != c.n || a.V != c.V) fail_msg("with the mark: expected %lld tokens of %d, got %lld of %d", (long long)a.n, a.V,
                                          (long long)c.n, c.V);
    for (int i = 0; i < a.V; i++)
        if (a.vocab[i] != c.vocab[i]) fail_msg("vocab[%d]: expected U+%04X, got U+%04X", i, a.vocab[i], c.vocab[i]);
    for (int64_t i = 0; i < a.n; i++)
        if (a.tokens[i] != c.tokens[i]) fail_msg("token %lld: expected %d, got %d", (long long)i, a.tokens[i], c.tokens[i]);
    train_text_free(&a);
    train_text_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fail2_follows_the_errs_language),
        cmocka_unit_test(test_two_languages_in_one_process),
        cmocka_unit_test(test_lang_zh_reaches_loaders_and_main),
        cmocka_unit_test(test_lang_on_the_line_wins),
        cmocka_unit_test(test_errors_speak_the_users_language),
        cmocka_unit_test(test_notices_speak_the_users_language),
        cmocka_unit_test(test_messages_name_the_problem),
        cmocka_unit_test(test_byte_order_mark_skipped),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
