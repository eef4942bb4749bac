// test_zh — the Chinese narration is Chinese: every built lesson (the LESSONS
// table, so a lesson added later is covered too) and the commands that
// narrate run with --lang zh (or LANG=zh_CN.UTF-8), and no run of three or
// more ASCII letters may appear outside code lines, tensors, identifiers,
// option names and the words on the allow-list below. A second test checks
// that every trace_sayf call in the sources gives its English and Chinese
// formats the same conversions in the same order, and so does every error
// helper that takes both (fileio_fail2, fileio_error, the usage errors).
#include "testutil.h"

#include "buf.h"
#include "lessons.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// Words a Chinese teacher says as they are: the documents' own terms, model
// and library names, tensor names the documents print, units.
static const char *const ALLOWED[] = {
    // the documents' terms
    "KV", "Cache", "Key", "Value", "Query", "token", "tokens", "decoder", "encoder", "prefill", "softmax",
    "logits", "BERT", "GPT", "LLaMA", "Llama", "MHA", "GQA", "MQA", "PagedAttention", "PageAttention",
    "FlashAttention", "RoPE", "numpy", "PyTorch", "kvdemo", "batch", "top", "eos", "bos", "pad", "None",
    "True", "False", "inf", "nan", "bit",
    // tensor and variable names of the documents
    "scores", "output", "mask", "weights", "key", "keys", "value", "values", "query", "seqlen", "self",
    "forward", "generate", "triu", "diagonal", "tokens", "freqs", "cis", "xq", "xk", "xv", "bsz", "dim",
    "len", "min", "max", "sum", "cat", "matmul", "torch", "prompt", "prompts", "temperature", "seed",
    "head", "heads", "full", "pos", "decoded", "argmax",
    // names of methods and hardware, as the documents write them
    "Attention", "SwiGLU", "Flash", "flash", "online", "GPU", "CPU", "HBM", "SRAM",
    // authors cited by name
    "Milakov", "Gimelshein", "Leviathan",
    // code the lessons quote, and the values of options (--bug offset, --data FILE)
    "float", "ceil", "exp", "sqrt", "ones", "logit", "offset", "stale", "append", "layout", "scale", "FILE",
    "tiny",
    // the example prompt, and methods named after their papers
    "ROMEO", "KIVI",
    // lesson 6.1: the article's and the vLLM paper's terms, its data sets, the workload's formula
    "block", "table", "fork", "copy", "write", "hash", "vLLM", "VLLM", "ShareGPT", "Alpaca", "round", "log",
    // lesson 14: the papers' terms and names, the tensor wpe, the unit of a loss
    "attention", "sink", "Mistral", "StreamingLLM", "Hugging", "Face", "wpe", "mod", "nat",
    // units
    "MiB", "GiB", "KiB", "MB", "GB", "KB", "GFLOP", "MFLOP", "FLOP", "FLOPs", "TFLOP",
};

// Lines that are code or tensors, not narration: ">>> code", the rows of a
// printed tensor, and a tensor's "name (2, 4)" header.
static int code_line(const char *line, size_t len) {
    const char *p = line;
    while (p < line + len && *p == ' ') p++;
    if (!strncmp(p, ">>>", 3) || *p == '[' || !strncmp(p, "tensor(", 7)) return 1;
    const char *q = p;
    while (q < line + len && (isalnum((unsigned char)*q) || strchr("_[]:.", *q))) q++;
    return q > p && q + 2 < line + len && q[0] == ' ' && q[1] == '(' && isdigit((unsigned char)q[2]);
}

// Appends to bad every English word of out (after removing the generated
// texts), one "WORD  in: LINE" a line.
static void find_english(Buf *bad, const char *what, char *out, char **texts, int ntexts) {
    for (int i = 0; i < ntexts; i++) {
        size_t n = strlen(texts[i]);
        if (n < 3) continue;
        for (char *p = out; (p = strstr(p, texts[i]));) memset(p, ' ', n);
    }
    for (char *line = out; line && *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        size_t at = 0, w, n;
        while (!code_line(line, len) && english_word_next(line, len, &at, &w, &n))
            if (!word_in_list(line + w, n, ALLOWED, sizeof ALLOWED / sizeof ALLOWED[0]))
                buf_printf(bad, "%s: '%.*s' in: %.*s\n", what, (int)n, line + w, (int)len, line);
        line = nl ? nl + 1 : NULL;
    }
}

// The texts a run generates (its "text" events), which are the model's,
// not narration.
static char **generated_texts(const char *env, const char *args, int *n) {
    char json[512];
    snprintf(json, sizeof json, "%s --format json", args);
    RunResult r = kvdemo_run_env(env, json);
    *n = 0;
    char **texts = NULL;
    if (r.status != 0) {
        run_free(&r);
        return NULL;
    }
    int ne;
    Event *e = events_parse(r.out, &ne);
    texts = calloc((size_t)ne + 1, sizeof *texts);
    for (int i = 0; i < ne; i++)
        if (!strcmp(e[i].event, "text")) texts[(*n)++] = strdup(e[i].text);
    events_free(e, ne);
    run_free(&r);
    return texts;
}

// The article writes a step "第 1 步" (not 第一步): a numeral in Chinese
// before 步 is listed in bad.
static void find_step_numerals(Buf *bad, const char *what, const char *out) {
    static const char *const NUMERALS[] = {"一", "二", "三", "四", "五", "六", "七", "八", "九", "十"};
    for (const char *p = out; (p = strstr(p, "第")); p += strlen("第"))
        for (size_t i = 0; i < sizeof NUMERALS / sizeof NUMERALS[0]; i++) {
            const char *q = p + strlen("第");
            size_t n = strlen(NUMERALS[i]);
            if (strncmp(q, NUMERALS[i], n)) continue;
            q += n;
            while (!strncmp(q, "十", strlen("十")) || !strncmp(q, "一", strlen("一"))) q += strlen("十");
            if (!strncmp(q, "步", strlen("步")))
                buf_printf(bad, "%s: '%.*s' (the article writes 第 N 步)\n", what, (int)(q + strlen("步") - p), p);
        }
}

// One word for each concept: docs/glossary.md's table "One Chinese word per
// concept" lists, in its third column, the words not used ("无缓存 /
// 有缓存"). They are read once, into AVOIDED.
#define MAX_AVOIDED 32
static char AVOIDED[MAX_AVOIDED][32];
static int num_avoided;

static void read_avoided(void) {
    if (num_avoided) return;
    char *text = file_slurp("docs/glossary.md");
    char *table = strstr(text, "## One Chinese word per concept");
    if (!table) fail_msg("docs/glossary.md: expected the section \"One Chinese word per concept\", got none");
    for (char *line = strchr(table, '\n'); line && *++line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        // | concept | 用词 | 不用 | why |: the fourth '|' ends the third cell.
        char *bar[5] = {line};
        int n = 0;
        for (char *p = line; *p && n < 5; p++)
            if (*p == '|') bar[n++] = p;
        if (line[0] == '|' && n == 5 && strncmp(line, "| Concept", 9) && strncmp(line, "|---", 4)) {
            *bar[3] = '\0';
            for (char *w = strtok(bar[2] + 1, "/"); w; w = strtok(NULL, "/")) {
                while (*w == ' ') w++;
                size_t len = strcspn(w, " ");
                if (len && num_avoided < MAX_AVOIDED) snprintf(AVOIDED[num_avoided++], sizeof AVOIDED[0], "%.*s", (int)len, w);
            }
        }
        line = nl;
    }
    free(text);
    if (num_avoided < 5) fail_msg("docs/glossary.md: expected at least 5 words not used, got %d", num_avoided);
}

// Lists in bad every word of AVOIDED in out, outside a verbatim quote of the
// documents (“…”, or a line that says 原文：).
static void find_other_terms(Buf *bad, const char *what, const char *out) {
    read_avoided();
    for (const char *line = out; line && *line;) {
        const char *nl = strchr(line, '\n');
        int len = nl ? (int)(nl - line) : (int)strlen(line);
        char text[2048];
        snprintf(text, sizeof text, "%.*s", len, line);
        for (char *q = text; (q = strstr(q, "“"));) {   // quotes blanked
            char *end = strstr(q, "”");
            if (!end) break;
            memset(q, ' ', (size_t)(end - q) + strlen("”"));
        }
        for (int i = 0; i < num_avoided && !strstr(text, "原文："); i++)
            for (const char *at = text; (at = strstr(at, AVOIDED[i])); at += strlen(AVOIDED[i])) {
                if (at - text >= 3 && !strncmp(at - 3, "没", 3)) continue;   // 还没有缓存: "no cache yet"
                buf_printf(bad, "%s: '%s' (docs/glossary.md: one Chinese word per concept) in: %.*s\n", what, AVOIDED[i],
                           len, line);
            }
        line = nl ? nl + 1 : NULL;
    }
}

// White space removed (the output wraps lines where the documents do not).
static void squeeze_into(char *out, size_t size, const char *s, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < size; i++)
        if (!strchr(" \t\r\n", s[i])) out[o++] = s[i];
    out[o] = '\0';
}

// "原文：" promises the documents' words: each one in out must be followed
// by a quote “…” that tests/article_quotes.py found verbatim in the
// documents (its "output" rows of tests/fixtures/article_quotes.txt). A
// paraphrase says 原文大意.
static void find_unquoted_sources(Buf *bad, const char *what, const char *out) {
    static char *list;
    if (!list) list = file_slurp("tests/fixtures/article_quotes.txt");
    const char *mark = "原文：";
    for (const char *at = out; (at = strstr(at, mark)); at += strlen(mark)) {
        const char *q = at + strlen(mark), *end = strstr(q, "”");
        if (strncmp(q, "“", strlen("“")) || !end) {
            buf_printf(bad, "%s: 原文： without a quote “…” (a paraphrase says 原文大意：) in: %.80s\n", what, at);
            continue;
        }
        q += strlen("“");
        char quote[1024], row[1024];
        squeeze_into(quote, sizeof quote, q, (size_t)(end - q));
        int found = 0;
        for (const char *line = list; line && *line && !found;) {
            const char *nl = strchr(line, '\n');
            size_t len = nl ? (size_t)(nl - line) : strlen(line);
            if (!strncmp(line, "output\t", 7)) {
                squeeze_into(row, sizeof row, line + 7, len - 7);
                found = !strcmp(row, quote);
            }
            line = nl ? nl + 1 : NULL;
        }
        if (!found)
            buf_printf(bad, "%s: expected a quote of the documents after 原文： (tests/article_quotes.py), got: %s\n", what,
                       quote);
    }
}

// Calques and internal names a Chinese reader should not meet: 交换 for
// "the trade" (这笔账, 以空间换时间), 先知 for "oracle" (预知长度), "N 行对
// M 行" for "N rows against M", and the JSON name per_token.
static void find_calques(Buf *bad, const char *what, const char *out) {
    static const char *const CALQUES[] = {"交换：", "先知", "行对 ", "per_token"};
    for (size_t i = 0; i < sizeof CALQUES / sizeof CALQUES[0]; i++) {
        const char *at = strstr(out, CALQUES[i]);
        if (at) buf_printf(bad, "%s: the calque or name '%s' in: %.60s\n", what, CALQUES[i], at);
    }
}

// Chinese sentences take full-width punctuation: a Chinese character (U+4E00
// to U+9FFF, three bytes led by 0xE4..0xE9) followed by an ASCII ':' or ';'
// is listed in bad.
static void find_halfwidth_punctuation(Buf *bad, const char *what, const char *out) {
    const unsigned char *u = (const unsigned char *)out;
    for (size_t i = 0; u[i]; i++)
        if (u[i] >= 0xE4 && u[i] <= 0xE9 && u[i + 1] && u[i + 2] && (u[i + 3] == ':' || u[i + 3] == ';'))
            buf_printf(bad, "%s: '%.4s' (Chinese takes ： and ；)\n", what, out + i);
}

static void check_run(Buf *bad, const char *env, const char *args, int json_too) {
    int ntexts = 0;
    char **texts = json_too ? generated_texts(env, args, &ntexts) : NULL;
    // (without env, the run test_headings_name_the_documents reads too)
    RunResult own = {0};
    const RunResult *r = env ? (own = kvdemo_run_env(env, args), &own) : kvdemo_run_once(args);
    if (r->status != 0) fail_msg("kvdemo %s: exit %d: %s", args, r->status, r->err);
    find_step_numerals(bad, args, r->out);
    find_other_terms(bad, args, r->out);
    find_unquoted_sources(bad, args, r->out);
    if (json_too) find_calques(bad, args, r->out);   // the narration; JSON keeps the names
    find_halfwidth_punctuation(bad, args, r->out);
    char *out = strdup(r->out);   // (find_english blanks the generated texts in it)
    assert_non_null(out);
    find_english(bad, args, out, texts, ntexts);
    free(out);
    for (int i = 0; i < ntexts; i++) free(texts[i]);
    free(texts);
    if (env) run_free(&own);
}

// A command that speaks on stderr (train, eval's errors): both streams checked.
static void check_run_stderr(Buf *bad, const char *args) {
    RunResult r = kvdemo_run(args);
    if (r.status != 0) fail_msg("kvdemo %s: exit %d: %s", args, r.status, r.err);
    find_english(bad, args, r.err, NULL, 0);
    find_english(bad, args, r.out, NULL, 0);
    run_free(&r);
}

// train (a few steps of a one-block model on a small text, evaluated twice)
// and eval of the model it wrote.
static void check_train_and_eval(Buf *bad) {
    char model[128], ckpt[140], args[512];
    snprintf(model, sizeof model, "/tmp/kvdemo-zh-%d.bin", (int)getpid());
    snprintf(ckpt, sizeof ckpt, "%s.ckpt", model);
    snprintf(args, sizeof args,
             "train --lang zh --preset tiny --context 16 --embedding 16 --heads 2 --blocks 1 --batch 4 --iters 10 "
             "--eval-every 5 --threads 1 --data tests/fixtures/corpus_small.txt --out %s",
             model);
    check_run_stderr(bad, args);
    snprintf(args, sizeof args, "eval --lang zh --model %s --data tests/fixtures/corpus_small.txt --threads 1", model);
    check_run_stderr(bad, args);
    snprintf(args, sizeof args, "eval --lang zh --kv-dtype int8 --model %s --data tests/fixtures/corpus_small.txt", model);
    check_run_stderr(bad, args);
    unlink(model);
    unlink(ckpt);
}

static void test_lessons_speak_chinese(void **state) {
    (void)state;
    Buf bad;
    buf_init(&bad);
    buf_append(&bad, "");
    int runs = 0;
    for (int i = 0; i < NUM_LESSONS; i++) {
        const Lesson *l = &LESSONS[i];
        if (!l->run) continue;
        // Small runs: few steps, one repeat, the tiny model where one is offered.
        char args[256], quick[128];
        snprintf(args, sizeof args, "lesson %s --lang zh%s", l->id, lesson_quick_args(l->options, quick, sizeof quick));
        char what[300];
        snprintf(what, sizeof what, "test_zh: kvdemo %s", args);
        if (tests_whole_model(l->id, args) && tests_sanitized_skip(what)) continue;
        check_run(&bad, NULL, args, 1);
        runs++;
    }
    check_run(&bad, "LANG=zh_CN.UTF-8", "generate --steps 8", 1);
    check_run(&bad, NULL, "generate --paged --samples 2 --steps 8 --lang zh", 1);
    check_run(&bad, NULL, "memory --model llama-2-7b --tokens 10 --lang zh", 0);
    char init[128];
    snprintf(init, sizeof init, "init --preset tiny --out /tmp/kvdemo-zh-init-%d.bin", (int)getpid());
    check_run(&bad, "LANG=zh_CN.UTF-8", init, 0);
    unlink(init + strlen("init --preset tiny --out "));
    check_train_and_eval(&bad);
    // (bench's Chinese is checked in test_bench, test_bench_speaks_chinese.)
    char *s = buf_take(&bad);
    if (s && *s) {
        fprintf(stderr, "%s", s);
        fail_msg("English words in the Chinese narration (listed above)");
    }
    free(s);
    assert_true(runs >= 8);
}

// ----------------------------------------------------------------------------
// trace_sayf's two formats

// The conversions of a C string literal's text ("%d", "%lld", "%s"), in order,
// written to out as "d lld s ".
static void conversions(const char *fmt, size_t n, char *out, size_t size) {
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (fmt[i] != '%') continue;
        if (i + 1 < n && fmt[i + 1] == '%') {
            i++;
            continue;
        }
        // Flags, width and precision may differ ("%.0s" swallows an English
        // plural); the length and the type may not.
        size_t j = i + 1;
        while (j < n && strchr("-+ #0123456789.*", fmt[j])) j++;
        size_t k = j;
        while (k < n && strchr("hlLzjt", fmt[k])) k++;
        size_t len = strlen(out);
        snprintf(out + len, size - len, "%.*s ", (int)(k + 1 - j), fmt + j);
        i = k;
    }
}

// Reads one argument made of adjacent string literals starting at *p; its
// text (escapes left as written, which does not matter for %) goes to buf.
// Returns 0 when the argument is not made of literals alone.
static int read_literals(const char **p, Buf *text) {
    const char *s = *p;
    int any = 0;
    for (;;) {
        while (isspace((unsigned char)*s)) s++;
        if (*s != '"') break;
        s++;
        const char *start = s;
        while (*s && *s != '"') s += *s == '\\' && s[1] ? 2 : 1;
        buf_appendn(text, start, (size_t)(s - start));
        if (*s) s++;
        any = 1;
    }
    *p = s;
    return any;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    Buf b;
    buf_init(&b);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_appendn(&b, chunk, n);
    fclose(f);
    buf_append(&b, "");
    return buf_take(&b);
}

// Skips n arguments of a call at *p (up to n top-level commas, past
// parentheses and string literals). Returns 0 when the call ends first.
static int skip_args(const char **p, int n) {
    const char *s = *p;
    int depth = 0;
    while (n > 0 && *s) {
        if (*s == '"' || *s == '\'') {
            char q = *s++;
            while (*s && *s != q) s += *s == '\\' && s[1] ? 2 : 1;
            if (*s) s++;
            continue;
        }
        if (*s == '(') depth++;
        else if (*s == ')' && depth-- == 0) return 0;
        else if (*s == ',' && depth == 0) n--;
        s++;
    }
    *p = s;
    return n == 0;
}

// The calls that take an English and a Chinese format: the call's opening,
// and how many arguments come before the English format.
static const struct {
    const char *call;
    int skip;
} PAIRED[] = {
    {"trace_sayf(tr,", 0},      // lessons' narration
    {"trace_textf(tr,", 2},     // texts a lesson composes (after the buffer and its size)
    {"fileio_fail2(", 1},       // errors returned through an Err (after it)
    {"fileio_error(", 1},       // error lines on stderr (after the language)
    {"usage_error(", 1},        // the command line's usage errors (cli.c)
    {"usage(", 1},              // memory's usage errors (memory.c)
};
enum { NUM_PAIRED = (int)(sizeof PAIRED / sizeof PAIRED[0]) };

static void test_sayf_pairs_match(void **state) {
    (void)state;
    // src/ by layer (the Makefile's LAYERS), then the lessons.
    const char *dirs[] = {"src/util", "src/core", "src/cache", "src/model", "src/present", "src/cmd", "lessons"};
    enum { NUM_DIRS = sizeof dirs / sizeof dirs[0] };
    DIR *top = opendir("src");
    assert_non_null(top);
    for (struct dirent *e; (e = readdir(top));) {   // a new layer would go unchecked
        int known = e->d_name[0] == '.';
        for (int d = 0; d < NUM_DIRS - 1; d++) known |= strcmp(e->d_name, dirs[d] + 4) == 0;
        if (!known) fail_msg("src/%s: expected one of the layers of src/ listed here, got a folder not in the list",
                             e->d_name);
    }
    closedir(top);
    int calls = 0, per_call[NUM_PAIRED] = {0};
    for (int d = 0; d < NUM_DIRS; d++) {
        DIR *dir = opendir(dirs[d]);
        assert_non_null(dir);
        struct dirent *ent;
        while ((ent = readdir(dir))) {
            size_t len = strlen(ent->d_name);
            if (len < 3 || strcmp(ent->d_name + len - 2, ".c")) continue;
            char path[512];
            snprintf(path, sizeof path, "%s/%s", dirs[d], ent->d_name);
            char *src = slurp(path);
            assert_non_null(src);
            for (int call = 0; call < NUM_PAIRED; call++)
            for (const char *p = src; (p = strstr(p, PAIRED[call].call));) {
                // "usage(" inside another name (print_usage() is not one).
                int inside = p > src && (isalnum((unsigned char)p[-1]) || p[-1] == '_');
                p += strlen(PAIRED[call].call);
                if (inside || !skip_args(&p, PAIRED[call].skip)) continue;
                const char *name = PAIRED[call].call;
                Buf en, zh;
                buf_init(&en);
                buf_init(&zh);
                buf_append(&en, "");
                buf_append(&zh, "");
                if (!read_literals(&p, &en)) {   // a call whose format is computed
                    free(buf_take(&en));
                    free(buf_take(&zh));
                    continue;
                }
                while (isspace((unsigned char)*p)) p++;
                if (*p == ',') p++;
                char *e = buf_take(&en);
                if (!read_literals(&p, &zh)) fail_msg("%s: a %s with no Chinese format after \"%.40s\"", path, name, e);
                char *z = buf_take(&zh);
                char ce[256], cz[256];
                conversions(e, strlen(e), ce, sizeof ce);
                conversions(z, strlen(z), cz, sizeof cz);
                if (strcmp(ce, cz))
                    fail_msg("%s: %s conversions differ: English \"%s\" (%s), Chinese \"%s\" (%s)", path, name, ce, e,
                             cz, z);
                calls++;
                per_call[call]++;
                free(e);
                free(z);
            }
            free(src);
        }
        closedir(dir);
    }
    assert_true(calls >= 10);
    // Every kind of call was found and checked (a renamed helper would
    // otherwise leave its pairs unchecked).
    for (int call = 0; call < NUM_PAIRED; call++)
        if (per_call[call] < 3) fail_msg("only %d calls of %s checked", per_call[call], PAIRED[call].call);
}

// The check itself finds what it should: a format pair out of order.
static void test_conversions_reader(void **state) {
    (void)state;
    char a[64], b[64];
    conversions("%d of %s, 100%%, %lld", strlen("%d of %s, 100%%, %lld"), a, sizeof a);
    assert_string_equal(a, "d s lld ");
    conversions("%s 的 %d", strlen("%s 的 %d"), b, sizeof b);
    char c[64];
    conversions("%5.2f %.0s", strlen("%5.2f %.0s"), c, sizeof c);
    assert_string_equal(c, "f s ");
    assert_string_equal(b, "s d ");
    assert_true(strcmp(a, b) != 0);
}

// A lesson's heading names its document as a class knows it ("KV Cache 篇
// §2", "the numpy chapter"), never by the file's id ("000", "seed 000").
static void test_headings_name_the_documents(void **state) {
    (void)state;
    static const char *const NAMES[2][3] = {{"KV Cache article §", "numpy chapter", "beyond the documents"},
                                            {"KV Cache 篇 §", "numpy 章节", "文档之外"}};
    for (int i = 0; i < NUM_LESSONS; i++) {
        const Lesson *l = &LESSONS[i];
        if (!l->run) continue;
        for (int zh = 0; zh < 2; zh++) {
            char args[256], quick[128];
            snprintf(args, sizeof args, "lesson %s --lang %s%s", l->id, zh ? "zh" : "en",
                     lesson_quick_args(l->options, quick, sizeof quick));
            char what[300];
            snprintf(what, sizeof what, "test_zh: kvdemo %s", args);
            if (tests_whole_model(l->id, args) && tests_sanitized_skip(what)) continue;
            const RunResult *r = kvdemo_run_once(args);   // the zh one: test_lessons_speak_chinese's
            if (r->status != 0) fail_msg("kvdemo %s: exit %d: %s", args, r->status, r->err);
            const char *h = strstr(r->out, "== ");
            const char *end = h ? strchr(h, '\n') : NULL;
            if (!end) fail_msg("kvdemo %s: no heading", args);
            char line[512];
            snprintf(line, sizeof line, "%.*s", (int)(end - h), h);
            int named = 0;
            for (int k = 0; k < 3; k++) named |= strstr(line, NAMES[zh][k]) != NULL;
            if (!named || strstr(line, "000") || strstr(line, "003") || strstr(line, "seed"))
                fail_msg("kvdemo %s: expected a heading naming the document (%s, %s or %s), got: %s", args,
                         NAMES[zh][0], NAMES[zh][1], NAMES[zh][2], line);
        }
    }
}

// generate under --lang zh on a terminal: the live counter and the summary
// speak Chinese and say token (docs/glossary.md: one Chinese word per
// concept), not the numpy chapter's 词元.
static void test_generate_says_token(void **state) {
    (void)state;
    const char *args[] = {"generate", "--steps", "8", "--lang", "zh", NULL};
    int master;
    pid_t pid = kvdemo_spawn_pty(&master, args);
    char *out = read_to_end(master);
    close(master);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!strstr(out, "个 token\x1b[0m")) fail_msg("expected the live counter (每秒 … 个 token), got: %s", out);
    // The generated text follows "ROMEO:"; the lines from "——" on are narration.
    char *summary = strstr(out, "——");
    if (!summary || !strstr(summary, "个 token")) fail_msg("expected the summary line (—— … 个 token), got: %s", out);
    for (char *p = out; (p = strstr(p, "词元")); p++)
        fail_msg("expected token, not 词元, under --lang zh; got: %.60s", p);
    Buf bad;
    buf_init(&bad);
    buf_append(&bad, "");
    find_english(&bad, "generate --lang zh (terminal)", summary, NULL, 0);
    char *s = buf_take(&bad);
    if (s && *s) fail_msg("%s", s);
    free(s);
    free(out);
}

// The pages of docs/zh/ keep the same words: docs/glossary.md's table of one
// Chinese word per concept, and not "N 行对 M 行".
static void test_zh_pages_use_one_word(void **state) {
    (void)state;
    Buf bad;
    buf_init(&bad);
    buf_append(&bad, "");
    DIR *dir = opendir("docs/zh");
    assert_non_null(dir);
    int pages = 0;
    for (struct dirent *e; (e = readdir(dir));) {
        size_t n = strlen(e->d_name);
        if (n < 4 || strcmp(e->d_name + n - 3, ".md")) continue;
        char path[300];
        snprintf(path, sizeof path, "docs/zh/%s", e->d_name);
        char *text = file_slurp(path);
        find_other_terms(&bad, path, text);
        const char *calque = strstr(text, "行对 ");   // "N 行对 M 行" for "N rows against M"
        if (calque) buf_printf(&bad, "%s: the calque '行对 ' in: %.60s\n", path, calque);
        free(text);
        pages++;
    }
    closedir(dir);
    char *s = buf_take(&bad);
    if (s && *s) fail_msg("%s", s);
    free(s);
    assert_true(pages >= 16);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_headings_name_the_documents),
        cmocka_unit_test(test_generate_says_token),
        cmocka_unit_test(test_zh_pages_use_one_word),
        cmocka_unit_test(test_conversions_reader),
        cmocka_unit_test(test_sayf_pairs_match),
        cmocka_unit_test(test_lessons_speak_chinese),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
