// testutil — fixtures, comparisons and running kvdemo, for the tests.
#define _XOPEN_SOURCE 600   // posix_openpt, grantpt, unlockpt, ptsname
#include "testutil.h"

#include "options.h"

#include "buf.h"
#include "lessons.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

// ----------------------------------------------------------------------------
// Fixtures

static float parse_value(const char *s) {
    if (!strcmp(s, "-inf")) return -INFINITY;
    if (!strcmp(s, "inf")) return INFINITY;
    if (!strcmp(s, "nan")) return NAN;
    return strtof(s, NULL);
}

void fix_load(FixSet *set, const char *path) {
    memset(set, 0, sizeof *set);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open fixture %s (run the tests from the project's root)", path);
    size_t cap = 1 << 16;
    char *line = malloc(cap);
    assert_non_null(line);
    while (fgets(line, (int)cap, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        set->t = realloc(set->t, sizeof(FixTensor) * (size_t)(set->n + 1));
        assert_non_null(set->t);
        FixTensor *t = &set->t[set->n++];
        char *save = NULL;
        char *key = strtok_r(line, " \n", &save);
        snprintf(t->key, sizeof t->key, "%s", key);
        t->rows = atoi(strtok_r(NULL, " \n", &save));
        t->cols = atoi(strtok_r(NULL, " \n", &save));
        t->data = malloc(sizeof(float) * (size_t)(t->rows * t->cols));
        assert_non_null(t->data);
        for (int i = 0; i < t->rows * t->cols; i++) {
            char *v = strtok_r(NULL, " \n", &save);
            if (!v) fail_msg("fixture %s: %s has fewer than %d values", path, t->key, t->rows * t->cols);
            t->data[i] = parse_value(v);
        }
    }
    free(line);
    fclose(f);
}

void fix_free(FixSet *set) {
    for (int i = 0; i < set->n; i++) free(set->t[i].data);
    free(set->t);
    memset(set, 0, sizeof *set);
}

const FixTensor *fix_get(const FixSet *set, const char *key) {
    for (int i = 0; i < set->n; i++)
        if (!strcmp(set->t[i].key, key)) return &set->t[i];
    fail_msg("no fixture tensor %s", key);
    return NULL;
}

void assert_close(const float *got, const float *want, int64_t n, double tol, const char *what) {
    for (int64_t i = 0; i < n; i++) {
        if (isinf(want[i]) || isinf(got[i])) {
            if (got[i] != want[i]) fail_msg("%s[%lld]: expected %.9g, got %.9g", what, (long long)i, want[i], got[i]);
            continue;
        }
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= tol))
            fail_msg("%s[%lld]: expected %.9g, got %.9g (|difference| %.3g > %.3g)", what, (long long)i,
                     want[i], got[i], d, tol);
    }
}

void assert_bits(const float *got, const float *want, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("%s[%lld]: expected %.9g, got %.9g (not bit-identical)", what, (long long)i, want[i], got[i]);
}

// ----------------------------------------------------------------------------
// Running kvdemo

static char *slurp(FILE *f) {
    Buf b;
    buf_init(&b);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_appendn(&b, chunk, n);
    return buf_take(&b);
}

char *file_slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: cannot open (tests run from the repository's top folder)", path);
    char *s = slurp(f);
    fclose(f);
    if (!s) s = calloc(1, 1);
    assert_non_null(s);
    return s;
}

RunResult kvdemo_run(const char *args) { return kvdemo_run_env(NULL, args); }

enum { RUNS_KEPT = 64 };
static struct {
    char *args;
    RunResult r;
} kept[RUNS_KEPT];

const RunResult *kvdemo_run_once(const char *args) {
    int i = 0;
    for (; i < RUNS_KEPT && kept[i].args; i++)
        if (!strcmp(kept[i].args, args)) return &kept[i].r;
    if (i == RUNS_KEPT) fail_msg("kvdemo_run_once: more than %d runs kept (raise RUNS_KEPT)", RUNS_KEPT);
    kept[i].args = strdup(args);
    assert_non_null(kept[i].args);
    kept[i].r = kvdemo_run(args);
    return &kept[i].r;
}

RunResult shell_run(const char *cmd) {
    RunResult r = {0};
    char errpath[] = "/tmp/kvdemo-test-XXXXXX";
    int fd = mkstemp(errpath);
    assert_true(fd >= 0);
    close(fd);
    Buf full;
    buf_init(&full);
    buf_printf(&full, "%s 2>%s", cmd, errpath);
    char *c = buf_take(&full);
    FILE *p = popen(c, "r");
    assert_non_null(p);
    r.out = slurp(p);
    int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    FILE *e = fopen(errpath, "r");
    r.err = e ? slurp(e) : strdup("");
    if (e) fclose(e);
    unlink(errpath);
    free(c);
    return r;
}

RunResult kvdemo_run_env(const char *env, const char *args) {
    const char *bin = getenv("KVDEMO_BIN");
    if (!bin || !*bin) bin = "./kvdemo";
    Buf cmd;
    buf_init(&cmd);
    buf_printf(&cmd, "env -u LC_ALL -u LC_MESSAGES -u LANG -u NO_COLOR %s %s %s </dev/null", env ? env : "", bin, args);
    char *c = buf_take(&cmd);
    RunResult r = shell_run(c);
    free(c);
    return r;
}

static const char *bin_path(void) {
    const char *bin = getenv("KVDEMO_BIN");
    return bin && *bin ? bin : "./kvdemo";
}

// In the child: runs kvdemo with args; never returns.
static void exec_kvdemo(const char *const *args) {
    const char *argv[32] = {bin_path()};
    int n = 1;
    for (; args[n - 1] && n < 31; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

pid_t kvdemo_spawn(int fd, const char *const *args) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        exec_kvdemo(args);
    }
    return pid;
}

pid_t kvdemo_spawn_pty(int *master, const char *const *args) { return kvdemo_spawn_pty_size(master, args, 0); }

pid_t kvdemo_spawn_pty_size(int *master, const char *const *args, int columns) {
    *master = posix_openpt(O_RDWR | O_NOCTTY);
    assert_true(*master >= 0);
    assert_int_equal(grantpt(*master), 0);
    assert_int_equal(unlockpt(*master), 0);
    if (columns > 0) {   // the terminal's size before kvdemo reads it
        struct winsize ws = {.ws_row = 30, .ws_col = (unsigned short)columns};
        assert_int_equal(ioctl(*master, TIOCSWINSZ, &ws), 0);
    }
    char name[128];
    snprintf(name, sizeof name, "%s", ptsname(*master));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setsid();   // a new session, so that the terminal becomes its own
        int s = open(name, O_RDWR);
        if (s < 0) _exit(127);
        dup2(s, 0);
        dup2(s, 1);
        dup2(s, 2);
        close(*master);
        exec_kvdemo(args);
    }
    return pid;
}

char *read_to_end(int fd) {
    Buf b;
    buf_init(&b);
    char chunk[4096];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 60000) <= 0) break;
        ssize_t k = read(fd, chunk, sizeof chunk);
        if (k <= 0) break;   // EOF, or EIO once a terminal's other end is closed
        buf_appendn(&b, chunk, (size_t)k);
    }
    buf_append(&b, "");
    char *s = buf_take(&b);
    assert_non_null(s);
    return s;
}

void run_free(RunResult *r) {
    free(r->out);
    free(r->err);
}

Event *kvdemo_json(const char *args, int *n) {
    RunResult r = kvdemo_run(args);
    if (r.status != 0) fail_msg("kvdemo %s: exit status %d, stderr: %s", args, r.status, r.err);
    Event *e = events_parse(r.out, n);
    run_free(&r);
    return e;
}

int tmpdir_make(char *dir, size_t size, const char *name) {
    int n = snprintf(dir, size, "/tmp/kvdemo-%s-XXXXXX", name);
    if (n < 0 || (size_t)n >= size) return -1;
    return mkdtemp(dir) ? 0 : -1;
}

char *traced(void (*fn)(Trace *), int json, Lang lang) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    Trace tr;
    trace_init(&tr, f);
    tr.lang = lang;
    tr.format = json ? FORMAT_JSON : FORMAT_TEXT;
    tr.lesson = "t";
    fn(&tr);
    fclose(f);
    return text;
}

int write_leftovers(const char *path) {
    char folder[4096];
    const char *slash = strrchr(path, '/');
    snprintf(folder, sizeof folder, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    const char *name = slash ? slash + 1 : path;
    size_t n = strlen(name);
    int count = 0;
    DIR *d = opendir(folder);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        count += strncmp(e->d_name, name, n) == 0 &&
                 (strncmp(e->d_name + n, ".tmp", 4) == 0 || strcmp(e->d_name + n, ".lock") == 0);
    closedir(d);
    return count;
}

int tmpdir_remove(const char *dir) {
    if (strncmp(dir, "/tmp/kvdemo-", 12) != 0 || strchr(dir, '\'')) return -1;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

JsonRun *json_run_start(const char *args) {
    JsonRun *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->r = kvdemo_run(args);
    if (j->r.status != 0) {
        fprintf(stderr, "kvdemo %s exited with %d: %s\n", args, j->r.status, j->r.err);
        run_free(&j->r);
        free(j);
        return NULL;
    }
    j->e = events_parse(j->r.out, &j->n);
    return j;
}

void json_run_free(JsonRun *j) {
    if (!j) return;
    events_free(j->e, j->n);
    run_free(&j->r);
    free(j);
}

void expect_failure(const char *args, int status, const char *needle) {
    RunResult r = kvdemo_run(args);
    if (r.status != status) fail_msg("kvdemo %s: exit status %d, expected %d (stderr: %s)", args, r.status, status, r.err);
    if (!strstr(r.err, needle)) fail_msg("kvdemo %s: stderr \"%s\" does not contain \"%s\"", args, r.err, needle);
    if (count_lines(r.err) != 1) fail_msg("kvdemo %s: %d lines on stderr, expected one: %s", args, count_lines(r.err), r.err);
    run_free(&r);
}

int fixture_array(const char *path, const char *name, double *out, int max) {
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s (tests run from the repository's top folder)", path);
    char word[128];
    int found = -1;
    while (found < 0 && fscanf(f, "%127s", word) == 1) {
        if (word[0] == '#') {   // a comment line
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n') {
            }
            continue;
        }
        int count;
        if (fscanf(f, "%d", &count) != 1) break;
        for (int i = 0; i < count; i++) {
            double v;
            if (fscanf(f, "%lf", &v) != 1) fail_msg("%s: %s: value %d unreadable", path, word, i);
            if (strcmp(word, name) == 0 && i < max) out[i] = v;
        }
        if (strcmp(word, name) == 0) found = count;
    }
    fclose(f);
    if (found < 0) fail_msg("%s: no array named %s", path, name);
    return found;
}

const char *test_last_line(const char *s, char *buf, size_t size) {
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '\n') n--;
    size_t start = n;
    while (start > 0 && s[start - 1] != '\n') start--;
    snprintf(buf, size, "%.*s", (int)(n - start), s + start);
    return buf;
}

int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

// ----------------------------------------------------------------------------
// A small JSON reader: enough for kvdemo's own events.

typedef struct {
    const char *p;
    int ok;
} Json;

static void ws(Json *j) {
    while (isspace((unsigned char)*j->p)) j->p++;
}

static int expect(Json *j, char c) {
    ws(j);
    if (*j->p != c) return j->ok = 0;
    j->p++;
    return 1;
}

// Reads a string into out (escapes \" \\ \n \t kept simple).
static void json_str(Json *j, char *out, size_t size) {
    size_t n = 0;
    if (!expect(j, '"')) return;
    while (*j->p && *j->p != '"') {
        char c = *j->p++;
        if (c == '\\') {
            c = *j->p++;
            if (c == 'n') c = '\n';
            else if (c == 't') c = '\t';
            else if (c == 'u') {
                j->p += 4;
                c = '?';
            }
        }
        if (out && n + 1 < size) out[n++] = c;
    }
    if (out && size) out[n] = '\0';
    if (!expect(j, '"')) j->ok = 0;
}

// Numbers and the strings "-inf", "inf", "nan" of a (nested) array, flattened.
static void json_numbers(Json *j, Event *e, int depth, int *shape_seen) {
    ws(j);
    if (*j->p == '[') {
        j->p++;
        int count = 0;
        ws(j);
        if (*j->p == ']') {
            j->p++;
            return;
        }
        for (;;) {
            json_numbers(j, e, depth + 1, shape_seen);
            count++;
            ws(j);
            if (*j->p == ',') {
                j->p++;
                continue;
            }
            if (!expect(j, ']')) return;
            break;
        }
        (void)count;
        return;
    }
    float v;
    if (*j->p == '"') {
        char s[16];
        json_str(j, s, sizeof s);
        v = parse_value(s);
    } else {
        char *end;
        v = strtof(j->p, &end);
        if (end == j->p) {
            j->ok = 0;
            return;
        }
        j->p = end;
    }
    e->data = realloc(e->data, sizeof(float) * (size_t)(e->ndata + 1));
    e->data[e->ndata++] = v;
}

static void json_skip(Json *j) {
    ws(j);
    if (*j->p == '"') {
        json_str(j, NULL, 0);
    } else if (*j->p == '[' || *j->p == '{') {
        char open = *j->p, close = open == '[' ? ']' : '}';
        j->p++;
        ws(j);
        if (*j->p == close) {
            j->p++;
            return;
        }
        for (;;) {
            if (open == '{') {
                json_str(j, NULL, 0);
                expect(j, ':');
            }
            json_skip(j);
            ws(j);
            if (*j->p == ',') {
                j->p++;
                continue;
            }
            expect(j, close);
            return;
        }
    } else {
        const char *start = j->p;
        while (*j->p && !strchr(",]}", *j->p) && !isspace((unsigned char)*j->p)) j->p++;
        if (j->p == start) j->ok = 0;
    }
}

static int parse_event(const char *line, Event *e) {
    memset(e, 0, sizeof *e);
    e->identical = -1;
    Json j = {line, 1};
    if (!expect(&j, '{')) return 0;
    for (;;) {
        char key[32];
        json_str(&j, key, sizeof key);
        if (!j.ok || !expect(&j, ':')) return 0;
        ws(&j);
        if (!strcmp(key, "lesson")) json_str(&j, e->lesson, sizeof e->lesson);
        else if (!strcmp(key, "run")) json_str(&j, e->run, sizeof e->run);
        else if (!strcmp(key, "event")) json_str(&j, e->event, sizeof e->event);
        else if (!strcmp(key, "name")) json_str(&j, e->name, sizeof e->name);
        else if (!strcmp(key, "text")) json_str(&j, e->text, sizeof e->text);
        else if (!strcmp(key, "step")) e->step = (int)strtol(j.p, (char **)&j.p, 10);
        else if (!strcmp(key, "shape")) {
            Event tmp = {0};
            json_numbers(&j, &tmp, 0, NULL);
            e->ndim = tmp.ndata;
            for (int i = 0; i < tmp.ndata && i < 4; i++) e->shape[i] = (int)tmp.data[i];
            free(tmp.data);
        } else if (!strcmp(key, "data")) json_numbers(&j, e, 0, NULL);
        else if (!strcmp(key, "identical")) {
            e->identical = strncmp(j.p, "true", 4) == 0;
            json_skip(&j);
        } else if (!strcmp(key, "max_abs_diff") || !strcmp(key, "value") || !strcmp(key, "seconds")) {
            double v;
            if (*j.p == '"') {
                char s[16];
                json_str(&j, s, sizeof s);
                v = parse_value(s);
            } else {
                v = strtod(j.p, (char **)&j.p);
            }
            if (!strcmp(key, "max_abs_diff")) e->max_abs_diff = v;
            else if (!strcmp(key, "value")) e->value = v;
            else e->seconds = v;
        } else json_skip(&j);
        if (!j.ok) return 0;
        ws(&j);
        if (*j.p == ',') {
            j.p++;
            continue;
        }
        if (!expect(&j, '}')) return 0;
        ws(&j);
        return *j.p == '\0';
    }
}

Event *events_parse(const char *out, int *n) {
    *n = 0;
    Event *e = NULL;
    const char *p = out;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *line = strndup(p, len);
        e = realloc(e, sizeof(Event) * (size_t)(*n + 1));
        if (!parse_event(line, &e[*n])) fail_msg("not a kvdemo JSON event: %s", line);
        (*n)++;
        free(line);
        p += len + (nl ? 1 : 0);
    }
    return e;
}

void events_free(Event *e, int n) {
    for (int i = 0; i < n; i++) free(e[i].data);
    free(e);
}

const Event *events_find(const Event *e, int n, const char *event, const char *run, int step,
                         const char *name) {
    for (int i = 0; i < n; i++) {
        if (strcmp(e[i].event, event)) continue;
        if (run && strcmp(e[i].run, run)) continue;
        if (step >= 0 && e[i].step != step) continue;
        if (name && strcmp(e[i].name, name)) continue;
        return &e[i];
    }
    return NULL;
}

// ----------------------------------------------------------------------------
// Tests by name: TEST='*cache*' runs only the tests whose function name
// matches the pattern (* and ? as in a shell), in every test program.

__attribute__((constructor)) static void test_filter_from_env(void) {
    const char *pattern = getenv("TEST");
    if (pattern && *pattern) cmocka_set_test_filter(pattern);
}

// Running every lesson quickly

const char *lesson_quick_args(const unsigned char *options, char *buf, size_t size) {
    static const struct { int bit; const char *arg; } QUICK[] = {
        {OPT_STEPS, "--steps 8"}, {OPT_REPEAT, "--repeat 1"}, {OPT_MAX_N, "--max-n 1024"},
        {OPT_INIT, "--init random"}, {OPT_PRESET, "--preset tiny"},
    };
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof QUICK / sizeof QUICK[0]; i++) {
        if (!options[QUICK[i].bit]) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, " %s", QUICK[i].arg);
    }
    return buf;
}

// ----------------------------------------------------------------------------
// English words in Chinese text

int english_word_next(const char *line, size_t len, size_t *at, size_t *start, size_t *n) {
    for (size_t i = *at; i < len;) {
        unsigned char c = (unsigned char)line[i];
        if (c == '`') {   // `make data`: a command, quoted as code
            const char *end = memchr(line + i + 1, '`', len - i - 1);
            i = end ? (size_t)(end - line) + 1 : len;
            continue;
        }
        if (!(isalnum(c) || c == '_' || c == '-')) {
            i++;
            continue;
        }
        size_t j = i;
        int letters = 0, other = 0;
        // "cache." ends a sentence; data/tianqi.txt is one word.
        while (j < len && (isalnum((unsigned char)line[j]) || line[j] == '_' || line[j] == '-' ||
                           ((line[j] == '.' || line[j] == '/') && j + 1 < len && isalnum((unsigned char)line[j + 1])))) {
            if (isalpha((unsigned char)line[j])) letters++;
            else other++;
            j++;
        }
        if (letters >= 3 && !other) {
            *start = i;
            *n = j - i;
            *at = j;
            return 1;
        }
        i = j;
    }
    *at = len;
    return 0;
}

int word_in_list(const char *w, size_t n, const char *const *list, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (strlen(list[i]) == n && !strncmp(list[i], w, n)) return 1;
    return 0;
}

int tests_sanitized(void) {
    const char *v = getenv("KVDEMO_SANITIZED");
    return v && *v && strcmp(v, "0") != 0;
}

int tests_whole_model(const char *id, const char *args) {
    const Lesson *l = lessons_find(id);
    return l && l->options[OPT_MODEL] && !strstr(args, "--init") && !strstr(args, "--preset");
}

int tests_sanitized_skip(const char *what) {
    if (!tests_sanitized()) return 0;
    fprintf(stderr, "%s: left to the fast pass, which runs it in full (a model's run is many times slower under "
            "the sanitizers)\n", what);
    return 1;
}

// ----------------------------------------------------------------------------
// Markdown pages

void expect_links_resolve(const char *path) {
    char *s = file_slurp(path);
    char dir[256];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = '\0';
    else dir[0] = '\0';
    int fenced = 0, lineno = 1;
    for (const char *p = s; *p; p++) {
        if (*p == '\n') {
            lineno++;
            if (!strncmp(p + 1, "```", 3)) fenced = !fenced;
            continue;
        }
        if (fenced || p[0] != ']' || p[1] != '(') continue;
        const char *a = p + 2, *b = a;
        while (*b && *b != ')' && *b != ' ' && *b != '\n') b++;
        if (*b != ')' && *b != ' ') continue;
        char target[256];
        snprintf(target, sizeof target, "%.*s", (int)(b - a), a);
        if (!strncmp(target, "http://", 7) || !strncmp(target, "https://", 8) || !strncmp(target, "mailto:", 7) ||
            target[0] == '#' || target[0] == '\0')
            continue;
        char *hash = strchr(target, '#');
        if (hash) *hash = '\0';
        char full[600];
        snprintf(full, sizeof full, "%s%s", dir, target);
        if (access(full, F_OK) != 0)
            fail_msg("%s:%d: expected the link target %s to exist, got none", path, lineno, full);
    }
    free(s);
}

void expect_links_resolve_in(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) fail_msg("cannot open folder %s", dir);
    struct dirent *e;
    char path[512];
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".md")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        expect_links_resolve(path);
    }
    closedir(d);
}

int table_rows_of(const char *out, const char *name, TableRow *rows, int max) {
    char want[96];
    snprintf(want, sizeof want, "\"event\":\"row\",\"name\":\"%s\",\"cells\":[", name);
    int n = 0;
    for (const char *p = strstr(out, want); p && n < max; p = strstr(p, want)) {
        TableRow *r = &rows[n++];
        memset(r, 0, sizeof *r);
        const char *line = p, *run;
        while (line > out && line[-1] != '\n') line--;
        if ((run = strstr(line, "\"run\":\"")) && run < p) sscanf(run + 7, "%31[^\"]", r->run);
        for (p += strlen(want); *p && *p != ']' && r->n < TABLE_CELLS;) {
            char *c = r->cell[r->n++];
            size_t o = 0;
            int quoted = *p == '"';
            for (p += quoted; *p && (quoted ? *p != '"' : *p != ',' && *p != ']'); p++) {
                if (*p == '\\' && p[1]) p++;
                if (o + 1 < sizeof r->cell[0]) c[o++] = *p;
            }
            c[o] = '\0';
            p += quoted && *p;
            if (*p == ',') p++;
        }
    }
    return n;
}

double table_cell_number(const TableRow *r, int c) {
    char *end;
    double v = c < r->n ? strtod(r->cell[c], &end) : 0;
    return c < r->n && end != r->cell[c] && !*end ? v : NAN;
}

void llama_model_for_test(LlamaModel *m, int H, int G, uint64_t seed) {
    LlamaConfig c = llama_config_default();
    c.n_heads = H, c.dim = 8 * H, c.n_kv_heads = G;
    char err[256];
    if (llama_new(m, &c, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
    llama_vocab_default(m);
    llama_init_random(m, seed);
}

void llama_state_for_test(LlamaState *s, const LlamaModel *m, int max_batch) {
    char err[256];
    if (llama_state_init(s, m, max_batch, ERR(LANG_EN, err)) != 0) fail_msg("%s", err);
}

// The start of the figure "x" or "x ± e" that ends at end (before " x faster").
static const char *figure_before(const char *line, const char *end) {
    const char *p = end;
    while (p > line && (strchr("0123456789. ", p[-1]) || (unsigned char)p[-1] == 0xB1 || (unsigned char)p[-1] == 0xC2))
        p--;   // digits, points, spaces and the two bytes of "±"
    while (*p == ' ') p++;
    return p;
}

int expect_verdict_agrees(const char *line, const char *what) {
    size_t len = strcspn(line, "\n");
    char l[512];
    snprintf(l, sizeof l, "%.*s", (int)(len < sizeof l ? len : sizeof l - 1), line);
    const char *same = strstr(l, "the same within noise (") ? strstr(l, "the same within noise (") + 23
                       : strstr(l, "在噪声范围内相同（")        ? strstr(l, "在噪声范围内相同（") + strlen("在噪声范围内相同（")
                                                                : NULL;
    const char *fig = NULL;
    int v = 0;
    if (same) v = '=', fig = same;
    else if (strstr(l, " x faster")) v = 'f', fig = figure_before(l, strstr(l, " x faster"));
    else if (strstr(l, " x slower")) v = 's', fig = figure_before(l, strstr(l, " x slower"));
    else if (strstr(l, "快 ")) v = 'f', fig = strstr(l, "快 ") + strlen("快 ");
    else if (strstr(l, "慢 ")) v = 's', fig = strstr(l, "慢 ") + strlen("慢 ");
    if (!v) return 0;
    char *end;
    double x = strtod(fig, &end);
    if (end == fig) return 0;   // a verdict in prose ("the same within noise (a busy machine ...")
    if (v != '=' && !(x > 1)) fail_msg("%s: \"%s\": the figure %g beside the verdict is not above 1", what, l, x);
    if (strncmp(end, " ± ", strlen(" ± "))) return v;
    const char *es = end + strlen(" ± ");
    double e = strtod(es, &end);
    const char *dot = memchr(es, '.', (size_t)(end - es));
    double slack = pow(10, -(dot ? (int)(end - dot - 1) : 0));   // each end rounded by half a last digit
    if (v != '=' && !(x - e > 1 - slack)) fail_msg("%s: \"%s\": x - e = %g reaches 1", what, l, x - e);
    if (v == '=' && !(x - e <= 1 + slack && x + e >= 1 - slack))
        fail_msg("%s: \"%s\": 1 lies outside x ± e beside the same within noise", what, l);
    return v;
}
