// testutil — what kvdemo's cmocka tests share: fixtures made by the
// documents' code (tests/*_reference.py), comparisons whose failure messages
// show the index, expected and got, and running the kvdemo binary.
#ifndef KVDEMO_TESTUTIL_H
#define KVDEMO_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <setjmp.h>
#include <cmocka.h>

#include "llama.h"
#include "trace.h"

// ----------------------------------------------------------------------------
// Fixture tensors: tests/fixtures/toy_tensors.txt, one "KEY ROWS COLS values" a line.

typedef struct {
    char key[96];
    int rows, cols;
    float *data;   // (rows, cols)
} FixTensor;

typedef struct {
    FixTensor *t;
    int n;
} FixSet;

// Loads a fixture file; fails the test when it cannot.
void fix_load(FixSet *set, const char *path);
void fix_free(FixSet *set);
// The tensor with this key; fails the test when there is none.
const FixTensor *fix_get(const FixSet *set, const char *key);

// Fails with "what[i]: expected E, got G" at the first element further than
// tol apart (infinities must match exactly).
void assert_close(const float *got, const float *want, int64_t n, double tol, const char *what);
// Fails with the first differing index unless the arrays are equal bit for bit.
void assert_bits(const float *got, const float *want, int64_t n, const char *what);

// ----------------------------------------------------------------------------
// Running kvdemo: the binary is $KVDEMO_BIN, else ./kvdemo.

typedef struct {
    int status;    // exit status, or -1 if it did not exit normally
    char *out;     // all of stdout
    char *err;     // all of stderr
} RunResult;

// Runs "kvdemo ARGS" through the shell, with stdin from /dev/null and the
// locale and NO_COLOR variables cleared, so that results do not depend on
// the machine; env ("LANG=zh_CN.UTF-8", or NULL) sets some of them again.
RunResult kvdemo_run_env(const char *env, const char *args);
RunResult kvdemo_run(const char *args);
// kvdemo ARGS run once in this test program: a later call with the same
// args returns the same run, for tests that read different things in one
// output (a lesson's text, say). Read-only; kept until the program exits.
const RunResult *kvdemo_run_once(const char *args);
void run_free(RunResult *r);
// Runs the shell command cmd (its standard error kept apart, as above).
RunResult shell_run(const char *cmd);
// The whole of a file of the project (free it); fails the test when it
// cannot be read.
char *file_slurp(const char *path);
// Number of lines in s.
int count_lines(const char *s);
// The last line of s (without its final newline), in buf; returns buf.
const char *test_last_line(const char *s, char *buf, size_t size);
// Runs "kvdemo ARGS", fails the test unless it exits 0, and returns its
// JSON events (free with events_free).
typedef struct Event Event;
Event *kvdemo_json(const char *args, int *n);
// A new empty folder /tmp/kvdemo-NAME-XXXXXX written into dir (size bytes);
// returns 0, or -1 when it could not be made. tmpdir_remove deletes it and
// everything in it.
int tmpdir_make(char *dir, size_t size, const char *name);
int tmpdir_remove(const char *dir);
// How many files a writer of path leaves while it works (fileio.h): the
// entries of path's folder named NAME.tmp... or NAME.lock. 0 once every
// write of path has ended.
int write_leftovers(const char *path);
// What fn prints on a trace of lesson "t" in that format (json 1: JSON
// Lines) and language, as one string to free.
char *traced(void (*fn)(Trace *), int json, Lang lang);

// A run's JSON events kept for a whole group of tests (a cmocka group's
// setup makes it, its teardown frees it): NULL, after a line on stderr, when
// kvdemo does not exit 0.
typedef struct {
    RunResult r;
    Event *e;
    int n;
} JsonRun;
JsonRun *json_run_start(const char *args);
void json_run_free(JsonRun *j);
// Runs "kvdemo ARGS" and fails the test unless it exits with status, prints
// exactly one line on stderr, and that line contains needle.
void expect_failure(const char *args, int status, const char *needle);

// Starts "kvdemo ARGS..." (args ends with NULL) with its standard output and
// error on fd; returns its pid.
pid_t kvdemo_spawn(int fd, const char *const *args);
// The same on a new pseudo-terminal (standard input too, as a terminal the
// program controls); *master is the other end, to read and to type into.
pid_t kvdemo_spawn_pty(int *master, const char *const *args);
// The same on a terminal of the given columns (30 rows), set before kvdemo starts.
pid_t kvdemo_spawn_pty_size(int *master, const char *const *args, int columns);
// Everything fd gives until its end (or 60 s of silence), NUL-terminated.
char *read_to_end(int fd);

// ----------------------------------------------------------------------------
// Markdown pages

// Fails at the first relative link [text](target) of the page at path whose
// target does not exist, resolved from the page's folder ("#anchor" parts
// dropped, fenced code blocks skipped); _in: every *.md page of dir.
void expect_links_resolve(const char *path);
void expect_links_resolve_in(const char *dir);

// ----------------------------------------------------------------------------
// Fixture arrays of tests/*_reference.py: lines "name count v0 v1 ...".

// Reads the array called name; returns its count (filling at most max
// values). Fails the test when the file or the name is missing.
int fixture_array(const char *path, const char *name, double *out, int max);

// ----------------------------------------------------------------------------
// JSON Lines events as kvdemo writes them (docs/trace-format.md).

struct Event {
    char lesson[16], run[32], event[16], name[64], text[256];
    int step;          // 0 when absent
    int ndim, shape[4];
    float *data;       // the "data" array, flattened (strings "-inf" etc. read as floats)
    int ndata;
    int identical;     // -1 when absent
    double max_abs_diff, value, seconds;
};

// Parses every line of out; fails the test on a line that is not an event.
Event *events_parse(const char *out, int *n);
void events_free(Event *e, int n);

// One row event of a trace table (docs/trace-format.md): its run and its
// cells as written (a string without its quotes).
enum { TABLE_CELLS = 16 };
typedef struct {
    char run[32], cell[TABLE_CELLS][256];
    int n;
} TableRow;
// The row events of table `name` in out, in order; returns how many (at
// most max).
int table_rows_of(const char *out, const char *name, TableRow *rows, int max);
// Cell c of a row as a number; NAN when it is not one (a text cell).
double table_cell_number(const TableRow *r, int c);
// The first event with these fields (NULL run or name: any); NULL if none.
const Event *events_find(const Event *e, int n, const char *event, const char *run, int step,
                         const char *name);

// ----------------------------------------------------------------------------
// A measured comparison as a reader sees it (issue 28: "1.3 ± 3.8 x faster")

// Fails unless the comparison in line (up to its end or a newline: "1.3 ±
// 0.2 x faster", "慢 2.0 倍", "the same within noise (1.03 ± 0.08 x)") says
// with its figure what its words say: the number beside faster or slower
// above 1, a ± beside them clear of 1 (to the last printed digit), a ±
// beside the same within noise holding 1. Returns the verdict it read ('f',
// 's', '=') or 0 when line holds none with a figure.
int expect_verdict_agrees(const char *line, const char *what);

// ----------------------------------------------------------------------------
// Running every lesson quickly

// The options that make a run of lesson `id` short, for the lessons that take
// them (`options` is its row's mask in LESSONS): few steps, one repeat, the
// tiny model, small lengths. Writes them, each with a leading space, to buf.
const char *lesson_quick_args(const unsigned char *options, char *buf, size_t size);

// ----------------------------------------------------------------------------
// English words in Chinese text (test_zh's narration, test_errors' error lines)

// The next English word of line[0..len) from *at on, moving *at past it:
// *start and *n are set to a run of three or more ASCII letters and nothing
// else. Words are runs of letters, digits, '_' and '-', with a '.' or '/'
// inside (data/tianqi.txt, self.model.forward); a word with anything but
// letters in it is code (cache_k, W_Q, fp16, --steps), and so is `text`
// between backquotes. Returns 0 at the end of the line.
int english_word_next(const char *line, size_t len, size_t *at, size_t *start, size_t *n);
// 1 when the n bytes at w are one of the count words of list.
int word_in_list(const char *w, size_t n, const char *const *list, size_t count);

// 1 under `make asan` (KVDEMO_SANITIZED in the environment), where every
// kvdemo run is many times slower: tests that run every lesson many times
// over to check behaviour (not memory) may then keep to the lessons without
// a model, which the plain build still checks in full.
int tests_sanitized(void);
// tests_sanitized(), and when it is 1 a line on stderr saying that what
// (a lesson's run, "lesson 10 on its model") is left to the fast pass, which
// runs it in full: a test skips nothing without saying so.
int tests_sanitized_skip(const char *what);
// 1 when "kvdemo lesson ID ARGS" runs a whole trained model of data/: the
// lesson honours --model and args has neither --init nor --preset (which
// make a small one).
int tests_whole_model(const char *id, const char *args);

// LLaMA for the tests: a model of llama_config_default()'s shape with H heads
// of 8 dims and G key/value heads, its weights drawn from seed; a state for
// up to max_batch rows. Each fails the test with the library's message if it
// cannot be made.
void llama_model_for_test(LlamaModel *m, int H, int G, uint64_t seed);
void llama_state_for_test(LlamaState *s, const LlamaModel *m, int max_batch);

#endif
