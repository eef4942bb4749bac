// test_cli — the command line as a class meets it: help for each lesson and
// command in English and Chinese, a global help that fits one screen, "did
// you mean" for typos, values without case, options before the command, and
// lessons that say which options they ignore — and only those.
#include "testutil.h"

#include "buf.h"
#include "lessons.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Fails unless every line of text fits a projector's 80 columns and there
// are at most max_lines of them.
static void assert_fits(const char *what, const char *text, int max_lines) {
    int lines = 0;
    for (const char *p = text; *p; lines++) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        int w = utf8_width(line);
        if (w > 80) fail_msg("%s: line %d is %d columns wide, expected at most 80: %s", what, lines + 1, w, line);
        p = nl ? nl + 1 : p + len;
    }
    if (lines > max_lines) fail_msg("%s: %d lines, expected at most %d", what, lines, max_lines);
}

static void expect_output(const char *env, const char *args, const char *needle) {
    RunResult r = kvdemo_run_env(env, args);
    if (r.status != 0) fail_msg("kvdemo %s: exit status %d, expected 0; stderr: %s", args, r.status, r.err);
    if (!strstr(r.out, needle)) fail_msg("kvdemo %s (%s): expected \"%s\" in:\n%s", args, env ? env : "", needle, r.out);
    run_free(&r);
}

// ----------------------------------------------------------------------------
// Help

static void test_global_help_fits_one_screen(void **state) {
    (void)state;
    const char *envs[] = {NULL, "LANG=zh_CN.UTF-8"};
    const char *args[] = {"", "help", "--help", "-h"};
    for (int e = 0; e < 2; e++)
        for (int a = 0; a < 4; a++) {
            RunResult r = kvdemo_run_env(envs[e], args[a]);
            assert_int_equal(r.status, 0);
            char what[64];
            snprintf(what, sizeof what, "kvdemo %s (%s)", args[a], envs[e] ? envs[e] : "LANG unset");
            assert_fits(what, r.out, 30);
            // The glossary, one command away.
            if (!strstr(r.out, "docs/glossary.md")) fail_msg("%s: no glossary named in:\n%s", what, r.out);
            // Every command that runs is named in it.
            const char *commands[] = {"list", "lesson", "generate", "bench", "init", "train", "eval"};
            for (int c = 0; c < 7; c++) {
                char needle[32];
                snprintf(needle, sizeof needle, "kvdemo %s", commands[c]);
                if (!strstr(r.out, needle)) fail_msg("%s does not name %s", what, needle);
            }
            run_free(&r);
        }
    expect_output("LANG=zh_CN.UTF-8", "help", "用法");
    expect_output(NULL, "--lang zh help", "用法");
}

// Each built lesson's help, asked two ways and in two languages: its title,
// its section, the options it honours and no other, its page in docs/.
static void test_lesson_help(void **state) {
    (void)state;
    const char *all[] = {"--cache", "--no-cache", "--trace", "--precision", "--color", "--step", "--repeat",
                         "--data", "--model", "--init", "--preset", "--seed", "--steps", "--prompt",
                         "--temperature", "--top-k", "--top-p", "--threads"};
    const int bits[] = {OPT_CACHE, OPT_NO_CACHE, OPT_TRACE, OPT_PRECISION, OPT_COLOR, OPT_STEP, OPT_REPEAT,
                        OPT_DATA, OPT_MODEL, OPT_INIT, OPT_PRESET, OPT_SEED, OPT_STEPS, OPT_PROMPT,
                        OPT_TEMPERATURE, OPT_TOP_K, OPT_TOP_P, OPT_THREADS};
    const int n_all = (int)(sizeof all / sizeof all[0]);
    for (int i = 0; i < NUM_LESSONS; i++) {
        const Lesson *l = &LESSONS[i];
        if (!l->run) continue;
        for (int zh = 0; zh < 2; zh++)
            for (int way = 0; way < 2; way++) {
                char args[64];
                if (way == 0) snprintf(args, sizeof args, "help lesson %s%s", l->id, zh ? " --lang zh" : "");
                else snprintf(args, sizeof args, "lesson %s --help%s", l->id, zh ? " --lang zh" : "");
                RunResult r = kvdemo_run(args);
                if (r.status != 0) fail_msg("kvdemo %s: exit status %d; stderr: %s", args, r.status, r.err);
                assert_fits(args, r.out, 40);
                const char *title = zh ? l->title_zh : l->title_en;
                if (!strstr(r.out, title)) fail_msg("kvdemo %s: expected the title \"%s\" in:\n%s", args, title, r.out);
                // The section under the document's name a class knows, never
                // the file id of DESIGN.md ("000 §2" reads as a seed).
                char sec[96];
                if (!strncmp(l->section, "000", 3))
                    snprintf(sec, sizeof sec, "%s%s", zh ? "KV Cache 篇" : "KV Cache article", l->section + 3);
                else if (!strncmp(l->section, "003", 3))
                    snprintf(sec, sizeof sec, "%s%s", zh ? "numpy 章节" : "numpy chapter", l->section + 3);
                else snprintf(sec, sizeof sec, "%s", zh ? "文档之外" : "beyond the documents");
                if (!strstr(r.out, sec)) fail_msg("kvdemo %s: expected the section \"%s\" in:\n%s", args, sec, r.out);
                if (strstr(r.out, "000 §") || strstr(r.out, "003 "))
                    fail_msg("kvdemo %s: a file id is shown in:\n%s", args, r.out);
                // What it shows: the start of its sentence (the rest may wrap).
                const char *shows = zh ? l->shows_zh : l->shows_en;
                if (shows) {
                    char start[32];
                    size_t at = 0;
                    for (int k = 0; k < 4 && shows[at]; k++) {
                        uint32_t cp;
                        int len = utf8_decode(&cp, (const unsigned char *)shows + at, strlen(shows + at));
                        at += len ? (size_t)len : 1;
                    }
                    snprintf(start, sizeof start, "  %.*s", (int)at, shows);
                    if (!strstr(r.out, start)) fail_msg("kvdemo %s: expected what it shows, \"%s...\", in:\n%s", args, start, r.out);
                }
                for (int o = 0; o < n_all; o++) {
                    char needle[32];
                    snprintf(needle, sizeof needle, "  %s ", all[o]);   // at the start of an option line
                    int shown = strstr(r.out, needle) != NULL;
                    int honours = l->options[bits[o]];
                    if (shown != honours)
                        fail_msg("kvdemo %s: option %s shown %d, expected %d (the lesson %s it)", args, all[o], shown,
                                 honours, honours ? "honours" : "ignores");
                }
                // The page: docs/lesson-ID.md, or its section's (lesson-2.md for 2.1).
                char page[64], whole[16];
                snprintf(page, sizeof page, "docs/lesson-%s.md", l->id);
                if (access(page, R_OK) != 0) {
                    snprintf(whole, sizeof whole, "%.*s", (int)strcspn(l->id, "."), l->id);
                    snprintf(page, sizeof page, "docs/lesson-%s.md", whole);
                }
                if (access(page, R_OK) == 0 && !strstr(r.out, page))
                    fail_msg("kvdemo %s: expected the page %s in:\n%s", args, page, r.out);
                if (zh && !strstr(r.out, "这一课用到的选项")) fail_msg("kvdemo %s: not in Chinese:\n%s", args, r.out);
                run_free(&r);
            }
    }
    // LANG chooses the language too; a lesson not built yet still has a help.
    expect_output("LANG=zh_CN.UTF-8", "help lesson 2", "为什么要进行 KV Cache");
    expect_output(NULL, "help lesson 6.1", "PagedAttention");
    // --help wins over a mistake elsewhere on the line.
    expect_output(NULL, "lesson 2 --bogus --help", "kvdemo lesson 2");
}

static void test_command_help(void **state) {
    (void)state;
    // Each command's help names it, what it does in that language, its own
    // options and, where there is one, its page.
    const struct { const char *cmd, *en, *zh, *option, *page; } cases[] = {
        {"generate", "writes text after a prompt", "接着提示词写文字", "--temperature", "docs/lesson-10.md"},
        {"bench", "over growing lengths", "使用与不使用缓存", "--csv", "docs/lesson-10.md"},
        {"init", "random char GPT", "随机的字符级 GPT", "--out", "docs/model-format.md"},
        {"train", "train the char GPT", "训练字符级 GPT", "--eval-every", "docs/training.md"},
        {"eval", "validation loss", "验证损失", "--model", "docs/training.md"},
        {"list", "every lesson", "课程列表", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int zh = 0; zh < 2; zh++)
            for (int way = 0; way < 2; way++) {
                char args[64];
                snprintf(args, sizeof args, way ? "%s --help" : "help %s", cases[i].cmd);
                RunResult r = kvdemo_run_env(zh ? "LANG=zh_CN.UTF-8" : NULL, args);
                if (r.status != 0) fail_msg("kvdemo %s: exit status %d; stderr: %s", args, r.status, r.err);
                assert_fits(args, r.out, 40);
                char usage[32];
                snprintf(usage, sizeof usage, "kvdemo %s", cases[i].cmd);
                const char *want[] = {usage, zh ? cases[i].zh : cases[i].en, cases[i].option, cases[i].page};
                for (int w = 0; w < 4; w++)
                    if (want[w] && !strstr(r.out, want[w]))
                        fail_msg("kvdemo %s (%s): expected \"%s\" in:\n%s", args, zh ? "zh" : "en", want[w], r.out);
                run_free(&r);
            }
    // Options of other commands are not listed: generate has no --csv.
    RunResult r = kvdemo_run("help generate");
    assert_null(strstr(r.out, "--csv"));
    run_free(&r);
    expect_failure("help frobnicate", 2, "unknown command 'frobnicate'");
}

// generate prints through the trace: its figures follow --lang. (bench's
// tables are checked in test_gptcmd, where bench runs anyway.)
static void test_generate_prints_through_the_trace(void **state) {
    (void)state;
    expect_output(NULL, "generate --init random --preset tiny --steps 4 --lang zh", "个 token，用时");
    expect_output(NULL, "generate --init random --preset tiny --steps 4", "tokens in");
}

static void test_version(void **state) {
    (void)state;
    const char *args[] = {"-V", "--version", "version", "lesson 2 -V"};
    RunResult first = kvdemo_run("--version");
    for (int i = 0; i < 4; i++) {
        RunResult r = kvdemo_run(args[i]);
        assert_int_equal(r.status, 0);
        assert_memory_equal(r.out, "kvdemo ", 7);
        assert_int_equal(count_lines(r.out), 1);
        assert_string_equal(r.out, first.out);
        run_free(&r);
    }
    run_free(&first);
}

// ----------------------------------------------------------------------------
// Mistakes

static void test_did_you_mean(void **state) {
    (void)state;
    // What a student types, and what kvdemo should suggest.
    const struct { const char *args, *suggestion; } typos[] = {
        {"lesosn 2", "did you mean lesson?"},
        {"lessen 2", "did you mean lesson?"},
        {"genrate", "did you mean generate?"},
        {"generat --steps 3", "did you mean generate?"},
        {"bnech", "did you mean bench?"},
        {"lsit", "did you mean list?"},
        {"hlep", "did you mean help?"},
        {"lesson 2 --cahce", "did you mean --cache?"},
        {"lesson 2 --nocache", "did you mean --no-cache?"},
        {"lesson 2 --no_cache", "did you mean --no-cache?"},
        {"lesson 2 --colour always", "did you mean --color?"},
        {"lesson 2 --precison 3", "did you mean --precision?"},
        {"lesson 2 --formt json", "did you mean --format?"},
        {"--lnag zh lesson 2", "did you mean --lang?"},
        {"generate --temprature 0", "did you mean --temperature?"},
        {"generate --top_k 3", "did you mean --top-k?"},
        {"bench --csb x.csv", "did you mean --csv?"},
        {"train --out x --eval_every 3", "did you mean --eval-every?"},
        {"lesson 62", "did you mean 6.2?"},
        {"lesson 2,1", "did you mean 2.1?"},
        {"lesson 6-2", "did you mean 6.2?"},
    };
    for (size_t i = 0; i < sizeof typos / sizeof typos[0]; i++) expect_failure(typos[i].args, 2, typos[i].suggestion);
    // Nothing close: no guess, only what is valid.
    const char *far[] = {"frobnicate", "lesson 2 --bogus", "lesson 99"};
    for (int i = 0; i < 3; i++) {
        RunResult r = kvdemo_run(far[i]);
        assert_int_equal(r.status, 2);
        if (strstr(r.err, "did you mean")) fail_msg("kvdemo %s: a far-fetched guess: %s", far[i], r.err);
        if (!strstr(r.err, "valid") && !strstr(r.err, "commands:")) fail_msg("kvdemo %s: does not say what is valid: %s", far[i], r.err);
        run_free(&r);
    }
    // A section with parts lists them; its help shows each.
    expect_failure("lesson 6", 2, "lesson 6 has parts: 6.1, 6.2, 6.3");
    for (int i = 0; i < NUM_LESSONS; i++)
        if (!strncmp(LESSONS[i].id, "6.", 2)) expect_output(NULL, "help lesson 6", LESSONS[i].title_en);
}

// A prompt the model cannot read names what it can: tinyshakespeare's 65
// characters, "\n !$&',-.3:;?" and the letters.
static void test_prompt_outside_the_vocabulary(void **state) {
    (void)state;
    const char *want = "the model knows 65 characters: newline, space, A-Z, a-z and !$&',-.3:;?; try --prompt \"ROMEO:\"";
    expect_failure("generate --init random --preset tiny --prompt é", 2, want);
    expect_failure("lesson 10 --init random --preset tiny --prompt 天气", 2, want);
    expect_failure("bench --init random --preset tiny --prompt ROMEO:~ --steps 2", 2, "'~' (U+007E)");
}

static void test_values_without_case(void **state) {
    (void)state;
    expect_output(NULL, "lesson 2 --lang ZH --trace none", "第 2 课");
    expect_output(NULL, "lesson 2 --lang zh_CN --trace none", "第 2 课");
    expect_output(NULL, "lesson 2 --lang zh_CN.UTF-8 --trace none", "第 2 课");
    expect_output(NULL, "lesson 2 --lang EN --trace none", "Lesson 2");
    expect_output(NULL, "lesson 2 --format JSON --trace NONE", "{\"lesson\":\"2\"");
    expect_output(NULL, "lesson 2 --color ALWAYS --trace Full", "\x1b[");
    expect_output(NULL, "generate --init RANDOM --preset TINY --steps 3 --format json", "\"name\":\"text\"");
    // Still not anything at all.
    expect_failure("lesson 2 --lang fr", 2, "--lang takes one of en|zh, not 'fr'");
    expect_failure("lesson 2 --lang zhx", 2, "--lang takes one of en|zh, not 'zhx'");
    expect_failure("lesson 2 --format jsonl", 2, "--format takes one of text|json|html|md, not 'jsonl'");
}

static void test_options_before_the_command(void **state) {
    (void)state;
    expect_output(NULL, "--lang zh lesson 2 --trace none", "第 2 课");
    expect_output(NULL, "--format json --trace none lesson 7", "{\"lesson\":\"7\"");
    expect_output(NULL, "--lang=zh lesson 2", "第 2 课");
    expect_failure("--csv x.csv lesson 2", 2, "unknown option '--csv' for 'lesson'");
    expect_failure("--lang", 2, "--lang needs a value");
}

// ----------------------------------------------------------------------------
// Lessons say which options they ignore, and only those

// The JSON trace without what changes from run to run (the seconds, spread
// and verdict of a timing, the machine's load, the number of a measured value, the rows of a table, whose cells
// hold times too and repeat what the counts say), one line per event.
static char *steady(const char *out) {
    Buf b;
    buf_init(&b);
    for (const char *p = out; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
        char line[65536];
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        if (strstr(line, "\"event\":\"row\"")) {
            p += len;
            continue;
        }
        // The machine's state at the start (measure.h) differs from run to run.
        if (strstr(line, "\"name\":\"machine_busy\"") || strstr(line, "\"name\":\"load_average\"")) {
            p += len;
            continue;
        }
        static const char *const timed[] = {"\"seconds\":", "\"mean\":", "\"sd\":", "\"min\":", "\"max\":",
                                            "\"noisy\":", "\"error\":", "\"decimals\":", "\"verdict\":"};
        for (size_t k = 0; k < sizeof timed / sizeof timed[0]; k++) {
            char *cut = strstr(line, timed[k]);
            if (cut) memmove(cut, cut + strcspn(cut, ",}"), strlen(cut + strcspn(cut, ",}")) + 1);
        }
        char *cut = strstr(line, "\"event\":\"value\"") ? strstr(line, "\"value\":") : NULL;
        if (cut) memmove(cut, cut + strcspn(cut, ",}"), strlen(cut + strcspn(cut, ",}")) + 1);
        buf_append(&b, line);
        p += len;
    }
    return buf_take(&b);
}

// Does s hold a number with nine decimals, as --precision 9 prints?
static int has_nine_decimals(const char *s) {
    for (const char *p = strchr(s, '.'); p; p = strchr(p + 1, '.')) {
        int n = 0;
        while (p[1 + n] >= '0' && p[1 + n] <= '9') n++;
        if (n == 9 && p > s && p[-1] >= '0' && p[-1] <= '9') return 1;
    }
    return 0;
}

// One option as this test gives it, with a value every lesson can take:
// whether what it changes shows in the text (else in the JSON trace), and
// the run it joins when the lesson ignores it. The options a lesson ignores
// go in together, in as few runs as can take them (--no-cache excludes
// --cache, so it has a run of its own); each it honours runs alone, since
// each must change what the lesson prints.
typedef struct {
    const char *args, *name;
    int bit, text, together;
} Probe;

enum { TOGETHER_TEXT, TOGETHER_JSON, TOGETHER_NO_CACHE, N_TOGETHER };

// A lesson as probed: its quick arguments, and its runs without the options
// (text [0], JSON [1]), each made when first needed.
typedef struct {
    const Lesson *l;
    char base[256];
    RunResult run[2];
    int have[2];
} Probed;

static const RunResult *base_run(Probed *pr, int json) {
    if (!pr->have[json]) {
        char a[512];
        snprintf(a, sizeof a, "lesson %s %s%s", pr->l->id, pr->base, json ? " --format json" : "");
        pr->run[json] = kvdemo_run(a);
        pr->have[json] = 1;
        if (pr->run[json].status) fail_msg("kvdemo %s: status %d: %s", a, pr->run[json].status, pr->run[json].err);
    }
    return &pr->run[json];
}

// What only the option can bring to the text: with text, what can differ
// from run to run is the times, so the whole text is not compared.
static int text_shows(int bit, const char *s) {
    if (bit == OPT_PRECISION) return has_nine_decimals(s);
    if (bit == OPT_COLOR) return strstr(s, "\x1b[") != NULL;
    return strstr(s, "课") != NULL;   // OPT_LANG
}

// Runs the lesson with the n probes at once and judges each: an option said
// to be ignored must change nothing, one not said to be must change what the
// lesson prints. Returns 0, or 1 with what is wrong in msg.
static int probe_run(Probed *pr, const Probe *const *p, int n, char *msg, size_t size) {
    char b[512];
    int len = snprintf(b, sizeof b, "lesson %s %s", pr->l->id, pr->base);
    for (int k = 0; k < n; k++) len += snprintf(b + len, sizeof b - (size_t)len, " %s", p[k]->args);
    if (!p[0]->text) snprintf(b + len, sizeof b - (size_t)len, " --format json");
    RunResult rb = kvdemo_run(b);
    if (rb.status) fail_msg("kvdemo %s: status %d: %s", b, rb.status, rb.err);
    int json_changed = 0;
    if (!p[0]->text) {
        char *sa = steady(base_run(pr, 1)->out), *sb = steady(rb.out);
        json_changed = strcmp(sa, sb) != 0;
        free(sa);
        free(sb);
    }
    int bad = 0;
    for (int k = 0; k < n && !bad; k++) {
        int changed = p[k]->text ? text_shows(p[k]->bit, rb.out) && !text_shows(p[k]->bit, base_run(pr, 0)->out)
                                 : json_changed;
        char said[128];
        snprintf(said, sizeof said, "lesson %s ignores %s", pr->l->id, p[k]->name);
        int says = strstr(rb.err, said) != NULL;
        // Lessons 2.1 and 2.2 are one run already: the option that asks for
        // that run changes nothing, and is not ignored.
        int already = (!strcmp(pr->l->id, "2.1") && p[k]->bit == OPT_NO_CACHE) ||
                      (!strcmp(pr->l->id, "2.2") && p[k]->bit == OPT_CACHE);
        if (says && changed) bad = snprintf(msg, size, "kvdemo %s says it ignores %s, but its output changed", b, p[k]->name);
        else if (!says && !changed && !already)
            bad = snprintf(msg, size, "kvdemo %s: %s changed nothing, but the lesson does not say it ignores it", b,
                           p[k]->name);
    }
    run_free(&rb);
    return bad != 0;
}

// The options the lesson ignores, together; when that run fails, each alone,
// to name the one at fault.
static void probe_together(Probed *pr, const Probe *const *p, int n) {
    char msg[1024], alone[1024];
    if (!probe_run(pr, p, n, msg, sizeof msg)) return;
    for (int k = 0; k < n; k++)
        if (probe_run(pr, &p[k], 1, alone, sizeof alone)) fail_msg("%s", alone);
    fail_msg("%s (yet each of these options alone passes)", msg);
}

// The arguments that make a lesson quick: the model lessons on their small
// models; lesson 7 at its own length, since --steps is probed on the short
// data file, whose 4 rows allow no more than 4 steps; a lesson that reads
// only a shipped model (14) on the smallest one, the draft of lesson 13 (its
// options are checked here, not its figures).
static void probed_base(Probed *pr) {
    unsigned char quick[NUM_OPTION_IDS];
    memcpy(quick, pr->l->options, sizeof quick);
    if (!quick[OPT_MODEL]) quick[OPT_STEPS] = 0;
    lesson_quick_args(quick, pr->base, sizeof pr->base);
    if (quick[OPT_MODEL] && !quick[OPT_INIT] && !quick[OPT_PRESET]) {
        size_t len = strlen(pr->base);
        snprintf(pr->base + len, sizeof pr->base - len, " --model data/tinyshakespeare-llama-draft.bin");
    }
}

static void probe_lesson(const Lesson *l, const Probe *probes, int n_probes) {
    Probed pr = {.l = l};
    probed_base(&pr);
    const Probe *together[N_TOGETHER][32];
    int n_together[N_TOGETHER] = {0};
    for (int p = 0; p < n_probes; p++) {
        // The options the base line sets are not probed again.
        if (strstr(pr.base, probes[p].name)) continue;
        const Probe *one = &probes[p];
        char msg[1024];
        if (!l->options[one->bit]) together[one->together][n_together[one->together]++] = one;
        else if (probe_run(&pr, &one, 1, msg, sizeof msg)) fail_msg("%s", msg);
    }
    for (int g = 0; g < N_TOGETHER; g++)
        if (n_together[g]) probe_together(&pr, together[g], n_together[g]);
    for (int json = 0; json < 2; json++)
        if (pr.have[json]) run_free(&pr.run[json]);
}

// Each lesson with each option: those it ignores it says so and they change
// nothing; those it honours change what it prints. (That a lesson names every
// option it ignores and none it honours, all given at once, is test_options'.)
static void test_lessons_say_what_they_ignore(void **state) {
    (void)state;
    char data[] = "/tmp/kvdemo-cli-XXXXXX";
    int fd = mkstemp(data);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("X\n我 1 0 0.5\n们 0 1 0.5\n好 0.5 0.5 1\n啊 1 1 0\nW_Q\n1 0\n0 1\n1 1\nW_K\n0 1\n1 0\n1 1\nW_V\n1 0\n0 2\n1 1\n", f);
    fclose(f);
    // Lesson 12 reads --data as a text in the char GPT's vocabulary.
    char text[] = "/tmp/kvdemo-cli-text-XXXXXX";
    fd = mkstemp(text);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    for (int i = 0; i < 400; i++) fputs("ROMEO: O Romeo, Romeo!\n", f);
    fclose(f);
    // --step, --threads and --format are left out: a pause needs a
    // terminal, threads change only the speed, and every lesson writes JSON
    // here.
    char data_opt[64];
    Probe probes[] = {
        {"--cache", "--cache", OPT_CACHE, 0, TOGETHER_JSON},
        {"--no-cache", "--no-cache", OPT_NO_CACHE, 0, TOGETHER_NO_CACHE},
        {"--trace none", "--trace", OPT_TRACE, 0, TOGETHER_JSON},
        {"--precision 9", "--precision", OPT_PRECISION, 1, TOGETHER_TEXT},
        {"--color always", "--color", OPT_COLOR, 1, TOGETHER_TEXT},
        {"--lang zh", "--lang", OPT_LANG, 1, TOGETHER_TEXT},
        {"--repeat 2", "--repeat", OPT_REPEAT, 0, TOGETHER_JSON},
        {data_opt, "--data", OPT_DATA, 0, TOGETHER_JSON},
        {"--seed 7", "--seed", OPT_SEED, 0, TOGETHER_JSON},
        {"--steps 3", "--steps", OPT_STEPS, 0, TOGETHER_JSON},
        {"--temperature 0", "--temperature", OPT_TEMPERATURE, 0, TOGETHER_JSON},
        {"--top-k 2", "--top-k", OPT_TOP_K, 0, TOGETHER_JSON},
        {"--top-p 0.5", "--top-p", OPT_TOP_P, 0, TOGETHER_JSON},
        {"--prompt ab", "--prompt", OPT_PROMPT, 0, TOGETHER_JSON},
    };
    const int n_probes = (int)(sizeof probes / sizeof probes[0]);
    for (int i = 0; i < NUM_LESSONS; i++) {
        const Lesson *l = &LESSONS[i];
        if (!l->run) continue;
        char what[64];
        snprintf(what, sizeof what, "test_cli: lesson %s's options", l->id);
        if (l->options[OPT_MODEL] && tests_sanitized_skip(what)) continue;
        snprintf(data_opt, sizeof data_opt, "--data %s", strcmp(l->id, "12") ? data : text);
        probe_lesson(l, probes, n_probes);
    }
    unlink(data);
    unlink(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_global_help_fits_one_screen),
        cmocka_unit_test(test_lesson_help),
        cmocka_unit_test(test_command_help),
        cmocka_unit_test(test_generate_prints_through_the_trace),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_did_you_mean),
        cmocka_unit_test(test_prompt_outside_the_vocabulary),
        cmocka_unit_test(test_values_without_case),
        cmocka_unit_test(test_options_before_the_command),
        cmocka_unit_test(test_lessons_say_what_they_ignore),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
