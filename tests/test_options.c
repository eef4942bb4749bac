// test_options — every option of the tables, as a user meets it: each
// command accepts exactly the options its help lists and refuses every other
// one, and each lesson runs with every option it honours without calling one
// ignored, and names each other option it is given as ignored.
//
// The sets come from kvdemo's own help (the tables seen from outside): `help
// COMMAND` lists a command's options, `help lesson ID` the options a lesson
// honours; test_cli checks those lists against the lessons' table.
#include "testutil.h"

#include "cli.h"
#include "lessons.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_NAMES = 96 };

typedef struct {
    char name[MAX_NAMES][32];
    char metavar[MAX_NAMES][128];   // --bug's eight choices take 72
    int n;
} OptionList;

static int list_has(const OptionList *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->name[i], name)) return 1;
    return 0;
}

// The options a help text lists: its lines "  --name METAVAR  help".
static void options_of_help(OptionList *l, const char *help) {
    for (const char *p = help; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > 4 && !strncmp(p, "  --", 4)) {
            char line[256];
            snprintf(line, sizeof line, "%.*s", (int)len, p + 2);
            char name[32] = "", metavar[128] = "";
            sscanf(line, "%31s %127s", name, metavar);
            // A metavar follows its name after one space; a flag's help
            // after the padding of the name's column.
            size_t n = strlen(name);
            if (line[n] != ' ' || line[n + 1] == ' ') metavar[0] = '\0';
            if (!list_has(l, name) && l->n < MAX_NAMES) {
                snprintf(l->name[l->n], sizeof l->name[0], "%s", name);
                snprintf(l->metavar[l->n], sizeof l->metavar[0], "%s", metavar);
                l->n++;
            }
        }
        p += len + (nl ? 1 : 0);
    }
}

static void options_of(OptionList *l, const char *args) {
    RunResult r = kvdemo_run(args);
    if (r.status) fail_msg("kvdemo %s: exit status %d: %s", args, r.status, r.err);
    options_of_help(l, r.out);
    run_free(&r);
}

// The commands `kvdemo help` names ("  kvdemo NAME ..."), but help itself.
static int commands_of_help(char names[][16], int max) {
    RunResult r = kvdemo_run("help");
    int n = 0;
    for (const char *p = strstr(r.out, "\n  kvdemo "); p && n < max; p = strstr(p + 1, "\n  kvdemo ")) {
        char name[16];
        if (sscanf(p + 10, "%15[a-z]", name) == 1 && strcmp(name, "help")) snprintf(names[n++], 16, "%s", name);
    }
    run_free(&r);
    return n;
}

// A value the option takes from every command that accepts it: the first of
// its choices, or a number or a name in every range.
static const char *value_for(const char *name, const char *metavar) {
    if (!metavar[0]) return NULL;
    if (!strcmp(name, "--max-n")) return "1024";
    if (!strcmp(name, "--width")) return "40";   // columns: from 20
    if (metavar[0] >= 'a' && metavar[0] <= 'z') {
        static char choice[64];
        snprintf(choice, sizeof choice, "%.*s", (int)strcspn(metavar, "|"), metavar);
        return choice;
    }
    if (strlen(metavar) == 1) return "1";   // N, K, T, B, P, ...: 1 is in every range
    return "x";                             // FILE, TEXT, LIST, SIZE, ...
}

// cli_parse_options on kvdemo COMMAND NAME [VALUE], with its stderr muted.
static int parse_one(const char *command, const char *name, const char *value) {
    char c[32], n[64], v[64];
    snprintf(c, sizeof c, "%.31s", command);
    snprintf(n, sizeof n, "%.63s", name);
    snprintf(v, sizeof v, "%.63s", value ? value : "");
    char prog[] = "kvdemo";
    char *argv[] = {prog, c, n, v, NULL};
    fflush(stderr);
    int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY);
    dup2(null, STDERR_FILENO);
    Options opt;
    Trace tr;
    int rc = cli_parse_options(&opt, &tr, value ? 4 : 3, argv, command);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(null);
    return rc;
}

static void test_commands_accept_what_their_help_lists(void **state) {
    (void)state;
    char commands[16][16];
    int n_commands = commands_of_help(commands, 16);
    assert_true(n_commands >= 9);
    // Every option any command or lesson has.
    OptionList all = {0};
    OptionList each[16];
    for (int k = 0; k < n_commands; k++) {
        char args[64];
        snprintf(args, sizeof args, "help %.15s", commands[k]);
        memset(&each[k], 0, sizeof each[k]);
        options_of(&each[k], args);
        for (int i = 0; i < each[k].n; i++)
            if (!list_has(&all, each[k].name[i])) {
                snprintf(all.name[all.n], sizeof all.name[0], "%.31s", each[k].name[i]);
                all.n++;
            }
    }
    assert_true(all.n >= 40);
    for (int k = 0; k < n_commands; k++)
        for (int i = 0; i < all.n; i++) {
            const char *name = all.name[i];
            int listed = list_has(&each[k], name);
            // The value this command's row asks for, else any.
            const char *value = NULL;
            for (int j = 0; j < each[k].n; j++)
                if (!strcmp(each[k].name[j], name)) value = value_for(name, each[k].metavar[j]);
            if (!listed) value = "1";
            int rc = parse_one(commands[k], name, value);
            if (listed && rc != 0)
                fail_msg("kvdemo %s %s %s: exit status %d, expected 0 (its help lists %s)", commands[k], name,
                         value ? value : "", rc, name);
            if (!listed && rc != 2)
                fail_msg("kvdemo %s %s: exit status %d, expected 2 (its help does not list %s)", commands[k], name, rc,
                         name);
        }
    // Every choice a help lists is accepted ("--format text|json|html|md"
    // listed for a command that refuses html would fail here).
    for (int k = 0; k < n_commands; k++)
        for (int j = 0; j < each[k].n; j++) {
            const char *m = each[k].metavar[j];
            if (!strchr(m, '|')) continue;
            for (const char *c = m; *c; c += strcspn(c, "|"), c += *c == '|') {
                char choice[64];
                snprintf(choice, sizeof choice, "%.*s", (int)strcspn(c, "|"), c);
                int rc = parse_one(commands[k], each[k].name[j], choice);
                if (rc != 0)
                    fail_msg("kvdemo %s %s %s: exit status %d, expected 0 (its help lists %s %s)", commands[k],
                             each[k].name[j], choice, rc, each[k].name[j], m);
            }
        }
}

// Values with which a lesson runs quickly and well.
static const char *lesson_value(const char *name, const char *metavar, const char *id, const char *model,
                                const char *text) {
    static const struct { const char *name, *value; } V[] = {
        {"--trace", "none"}, {"--format", "json"}, {"--lang", "en"}, {"--color", "never"}, {"--precision", "2"},
        {"--steps", "4"}, {"--prompt", "ROMEO:"}, {"--temperature", "0"}, {"--top-p", "0.5"}, {"--top-k", "2"},
        {"--seed", "7"}, {"--threads", "1"}, {"--tile", "16"}, {"--block-size", "4"}, {"--samples", "2"},
        {"--bug", "offset"}, {"--data", "data/tianqi.txt"}, {"--attention", "flash"},
        {"--draft", "data/tinyshakespeare-draft.bin"},
    };
    // lessons 3 and 6.2 take --tokenizer too: --model is then llama2.c's checkpoint
    if (!strcmp(name, "--model") && !strcmp(id, "14")) return "data/tinyshakespeare-llama-mha.bin";   // LLaMA-style
    if (!strcmp(name, "--model"))
        return strcmp(id, "3") && strcmp(id, "6.2") ? model : "tests/fixtures/llama2c_gqa.bin";
    if (!strcmp(name, "--tokenizer")) return "tests/fixtures/llama2c_tok.bin";
    if (!strcmp(name, "--data") && !strcmp(id, "12")) return text;
    if (!strcmp(name, "--prompt") && !strcmp(id, "3")) return "abc";   // in the fixture's vocabulary
    for (size_t i = 0; i < sizeof V / sizeof V[0]; i++)
        if (!strcmp(V[i].name, name)) return V[i].value;
    return value_for(name, metavar);
}

static void append(char *buf, size_t size, const char *name, const char *value) {
    size_t len = strlen(buf);
    snprintf(buf + len, size - len, " %s%s%s", name, value ? " " : "", value ? value : "");
}

static void test_lessons_say_ignored_exactly_what_they_ignore(void **state) {
    (void)state;
    // A small model file and a text in its vocabulary, for --model and
    // lesson 12's --data.
    char model[] = "/tmp/kvdemo-options-XXXXXX";
    int fd = mkstemp(model);
    assert_true(fd >= 0);
    close(fd);
    char text[] = "/tmp/kvdemo-options-text-XXXXXX";
    fd = mkstemp(text);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 400; i++) fputs("ROMEO: O Romeo, Romeo!\n", f);
    fclose(f);
    char args[512];
    snprintf(args, sizeof args, "init --preset tiny --out %s", model);
    RunResult r = kvdemo_run(args);
    if (r.status) fail_msg("kvdemo %s: %s", args, r.err);
    run_free(&r);

    OptionList accepted = {0};
    options_of(&accepted, "help lesson");
    assert_true(accepted.n >= 20);
    for (int i = 0; i < NUM_LESSONS; i++) {
        const Lesson *l = &LESSONS[i];
        if (!l->run) continue;
        OptionList honoured = {0};
        snprintf(args, sizeof args, "help lesson %s", l->id);
        options_of(&honoured, args);
        char quick[256];
        lesson_quick_args(l->options, quick, sizeof quick);

        // (1) Every option it honours, at once (one of --cache and --no-cache,
        // and --model apart from --init), and no word that one is ignored.
        for (int with_model = 0; with_model < 2; with_model++) {
            if (with_model && !(list_has(&honoured, "--model") && list_has(&honoured, "--init"))) continue;
            char what[64];
            snprintf(what, sizeof what, "test_options: lesson %s on its shipped model", l->id);
            if (with_model && tests_sanitized_skip(what)) continue;
            snprintf(args, sizeof args, "lesson %s", l->id);
            if (!with_model) snprintf(args + strlen(args), sizeof args - strlen(args), "%s", quick);
            for (int o = 0; o < honoured.n; o++) {
                const char *name = honoured.name[o];
                if (!with_model && strstr(quick, name)) continue;   // given already
                // --tokenizer goes with --model (llama2.c's pair), not with --init
                if (with_model && strcmp(name, "--model") && strcmp(name, "--tokenizer") &&
                    !strstr("--trace --format --steps --repeat --max-n", name))
                    continue;
                if (!with_model && (!strcmp(name, "--model") || !strcmp(name, "--tokenizer")) &&
                    list_has(&honoured, "--init"))
                    continue;
                if (!strcmp(name, "--no-cache") && list_has(&honoured, "--cache")) continue;
                append(args, sizeof args, name, lesson_value(name, honoured.metavar[o], l->id, model, text));
            }
            r = kvdemo_run(args);
            if (r.status) fail_msg("kvdemo %s: exit status %d: %s", args, r.status, r.err);
            char said[64];
            snprintf(said, sizeof said, "lesson %s ignores", l->id);
            if (strstr(r.err, said)) fail_msg("kvdemo %s: every option is one it honours, yet: %s", args, r.err);
            run_free(&r);
        }

        // (2) Every option it does not honour, at once: each is named. --bug
        // is refused instead, and --cache goes apart from --no-cache.
        for (int cache = 0; cache < 2; cache++) {
            if (cache && list_has(&honoured, "--cache")) continue;
            snprintf(args, sizeof args, "lesson %s%s --trace none --format json", l->id, quick);
            int any = 0;
            OptionList given = {0};
            for (int o = 0; o < accepted.n; o++) {
                const char *name = accepted.name[o];
                if (list_has(&honoured, name) || strstr(quick, name) || !strcmp(name, "--bug")) continue;
                if (!strcmp(name, "--trace") || !strcmp(name, "--format")) continue;   // set above
                if ((strcmp(name, "--cache") == 0) != cache) continue;   // --cache alone, in the second run
                append(args, sizeof args, name, lesson_value(name, accepted.metavar[o], l->id, model, text));
                snprintf(given.name[given.n++], sizeof given.name[0], "%.31s", name);
                any = 1;
            }
            if (!any) continue;
            r = kvdemo_run(args);
            if (r.status) fail_msg("kvdemo %s: exit status %d: %s", args, r.status, r.err);
            for (int o = 0; o < given.n; o++) {
                const char *name = given.name[o];
                // "ignores --step" is not "ignores --steps": the name ends there.
                char said[96], said_why[96];
                snprintf(said, sizeof said, "lesson %s ignores %s ", l->id, name);
                snprintf(said_why, sizeof said_why, "lesson %s ignores %s:", l->id, name);
                if (!strstr(r.err, said) && !strstr(r.err, said_why))
                    fail_msg("kvdemo %s: expected \"%s\" on stderr:\n%s", args, said, r.err);
            }
            run_free(&r);
        }
        // --bug where it is not honoured: refused, naming where it works.
        if (!list_has(&honoured, "--bug")) {
            snprintf(args, sizeof args, "lesson %s --bug offset", l->id);
            expect_failure(args, 2, "--bug works with lesson 11");
        }
    }
    unlink(model);
    unlink(text);
}

// The man page names every command that `kvdemo help` names, in its
// synopsis and under COMMANDS, so that it stays in step with the table.
static void test_man_page_names_every_command(void **state) {
    (void)state;
    FILE *f = fopen("docs/kvdemo.1", "r");
    assert_non_null(f);
    static char man[65536];
    size_t n = fread(man, 1, sizeof man - 1, f);
    fclose(f);
    man[n] = '\0';
    const char *commands_at = strstr(man, ".SH COMMANDS");
    const char *options_at = strstr(man, ".SH OPTIONS");
    assert_non_null(commands_at);
    assert_non_null(options_at);
    char commands[16][16];
    int n_commands = commands_of_help(commands, 16);
    for (int k = 0; k < n_commands; k++) {
        char synopsis[64], entry[64], entry_arg[64];
        snprintf(synopsis, sizeof synopsis, ".B kvdemo %.15s", commands[k]);
        snprintf(entry, sizeof entry, "\n.B %.15s\n", commands[k]);
        snprintf(entry_arg, sizeof entry_arg, "\n.BI \"%.15s ", commands[k]);
        if (!strstr(man, synopsis) && strcmp(commands[k], "list"))
            fail_msg("docs/kvdemo.1: no \"%s\" in the synopsis", synopsis);
        const char *e = strstr(commands_at, entry);
        if (!e) e = strstr(commands_at, entry_arg);
        if (!e || e > options_at) fail_msg("docs/kvdemo.1: %s is not under COMMANDS", commands[k]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commands_accept_what_their_help_lists),
        cmocka_unit_test(test_lessons_say_ignored_exactly_what_they_ignore),
        cmocka_unit_test(test_man_page_names_every_command),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
