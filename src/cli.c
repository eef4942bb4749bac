// cli — the command line: kvdemo [list | lesson ID | help | ...] [options].
//
// Every option is a row of one table that says which commands accept it; the
// parser fills an Options and a Trace from it. Bad input gets one line on
// stderr naming the problem and what would be valid, and exit status 2.
#include "cli.h"

#include "gptcmd.h"
#include "lessons.h"
#include "memory.h"
#include "options.h"
#include "pool.h"
#include "race.h"
#include "screen.h"
#include "trace.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KVDEMO_VERSION "0.1.0"

enum { EXIT_USAGE = 2 };

#define COMMANDS "list, lesson, generate, race, bench, init, train, eval, memory, help"

// ----------------------------------------------------------------------------
// The options

typedef enum { ARG_FLAG, ARG_INT, ARG_DOUBLE, ARG_STRING } ArgKind;

typedef struct {
    const char *name;       // "--precision"
    ArgKind kind;
    const char *metavar;    // "N"
    const char *commands;   // the commands that accept it, space separated
    double min, max;        // range of a number
    const char *choices;    // "text|json" for a string with fixed choices
    const char *help;
} OptionSpec;

static const OptionSpec OPTIONS[] = {
    // What every lesson understands.
    {"--cache", ARG_FLAG, NULL, "lesson generate", 0, 0, NULL, "only the run with the KV cache"},
    {"--no-cache", ARG_FLAG, NULL, "lesson generate", 0, 0, NULL, "only the run without it (lessons: default both, then a comparison)"},
    {"--trace", ARG_STRING, "LEVEL", "lesson", 0, 0, "none|summary|full", "how many intermediate tensors to print (default full)"},
    {"--precision", ARG_INT, "N", "lesson", 0, 16, NULL, "decimals of printed tensors (default 4, as PyTorch)"},
    {"--format", ARG_STRING, "FMT", "lesson generate race bench memory", 0, 0, "text|json", "text for people, JSON Lines for scripts (default text)"},
    {"--lang", ARG_STRING, "LANG", "lesson race list memory", 0, 0, "en|zh", "narration language (default from LANG)"},
    {"--step", ARG_FLAG, NULL, "lesson", 0, 0, NULL, "wait for Enter after each step (on a terminal)"},
    {"--color", ARG_STRING, "WHEN", "lesson", 0, 0, "auto|always|never", "colours: heat maps of scores and weights (default auto; NO_COLOR honoured)"},
    {"--width", ARG_INT, "N", "lesson", 20, 1000, NULL, "columns of a screen: lines wrapped, wide tensors elided (--step: $COLUMNS or the terminal's)"},
    // Where they apply.
    {"--repeat", ARG_INT, "N", "lesson bench", 1, 100000, NULL, "time each run N times and report the median"},
    {"--data", ARG_STRING, "FILE", "lesson train eval", 0, 0, NULL, "the example's numbers (lessons 1-9, default data/tianqi.txt); the training text"},
    {"--model", ARG_STRING, "FILE", "lesson generate race bench eval memory", 0, 0, NULL, "a model file (default data/tinyshakespeare-gpt.bin); memory: a preset name too"},
    {"--init", ARG_STRING, "KIND", "lesson generate race bench", 0, 0, "random", "a random model instead of a file (with --preset and --seed)"},
    {"--preset", ARG_STRING, "NAME", "lesson generate race bench init train", 0, 0, "seed|tiny", "model shape: seed (the chapter's: 256, 384, 6 heads, 6 blocks) or tiny"},
    {"--seed", ARG_INT, "N", "lesson generate race bench init train", 0, 4294967295.0, NULL, "random seed, as np.random.seed(N) (default 42)"},
    {"--steps", ARG_INT, "N", "lesson generate race bench", 1, 100000, NULL, "how many tokens to generate (bench: a list, e.g. 16,64,256)"},
    {"--prompt", ARG_STRING, "TEXT", "lesson generate race bench", 0, 0, NULL, "the prompt (default \"ROMEO:\"; lesson 3 takes several)"},
    {"--temperature", ARG_DOUBLE, "T", "lesson generate race", 0, 100, NULL, "sampling temperature; 0 picks the most likely token"},
    {"--top-k", ARG_INT, "K", "lesson generate race", 0, 1000000, NULL, "draw only from the K most likely tokens (0: all)"},
    {"--top-p", ARG_DOUBLE, "P", "lesson", 0, 1, NULL, "nucleus sampling as LLaMA's sample_top_p"},
    {"--threads", ARG_INT, "N", "lesson generate bench train eval", 0, 1024, NULL, "threads for the arithmetic (default 0: every core)"},
    {"--csv", ARG_STRING, "FILE", "bench", 0, 0, NULL, "also write the table as CSV"},
    {"--out", ARG_STRING, "FILE", "init train", 0, 0, NULL, "the model file to write"},
    {"--context", ARG_INT, "T", "train", 1, 65536, NULL, "context length (positions)"},
    {"--embedding", ARG_INT, "C", "train", 1, 16384, NULL, "embedding size"},
    {"--heads", ARG_INT, "H", "train", 1, 1024, NULL, "attention heads"},
    {"--blocks", ARG_INT, "L", "train", 1, 256, NULL, "transformer blocks"},
    {"--iters", ARG_INT, "N", "train", 1, 100000000, NULL, "training iterations"},
    {"--batch", ARG_INT, "B", "train memory", 1, 4096, NULL, "sequences per iteration"},
    {"--lr", ARG_DOUBLE, "X", "train", 0, 10, NULL, "peak learning rate"},
    {"--eval-every", ARG_INT, "N", "train", 1, 100000000, NULL, "validation loss (and a checkpoint) every N iterations"},
    {"--resume", ARG_STRING, "CHECKPOINT", "train", 0, 0, NULL, "continue from a checkpoint"},
    {"--paged", ARG_FLAG, NULL, "generate", 0, 0, NULL, "keep the cache in blocks through a block table (lesson 6.1)"},
    {"--block-size", ARG_INT, "B", "lesson generate", 1, 4096, NULL, "positions per block of the paged cache (generate: 16, as vLLM; lesson 6.1: 4)"},
    {"--num-blocks", ARG_INT, "N", "generate", 1, 1000000, NULL, "blocks in the paged cache's pool (default: enough for the run)"},
    {"--samples", ARG_INT, "N", "lesson generate", 1, 64, NULL, "continuations of one prompt that share its blocks (generate: with --paged)"},
    {"--tokens", ARG_INT, "N", "memory", 1, 1e15, NULL, "tokens per sequence (prompt + generated)"},
    {"--layers", ARG_INT, "L", "memory", 1, 1e9, NULL, "layers of a shape given by hand"},
    {"--kv-heads", ARG_INT, "G", "memory", 1, 1e9, NULL, "key/value heads of that shape"},
    {"--head-dim", ARG_INT, "D", "memory", 1, 1e9, NULL, "head size of that shape"},
    {"--dtype", ARG_STRING, "TYPE", "memory", 0, 0, "fp32|fp16|bf16|fp8|int8|int4", "bytes per cached value (default fp16; fp32 for kvdemo's char GPT)"},
    {"--gpu-memory", ARG_STRING, "SIZE", "memory", 0, 0, NULL, "memory of the GPU, e.g. 80GB or 24GiB: what fits beside the weights"},
    {"--list", ARG_FLAG, NULL, "memory", 0, 0, NULL, "the presets and their published shapes"},
    {"--attention", ARG_STRING, "KIND", "lesson generate bench", 0, 0, "plain|flash", "the char GPT's attention: plain, or flash (tiles, online softmax; default plain)"},
    {"--tile", ARG_INT, "N", "lesson generate bench", 1, 65536, NULL, "keys per tile of flash attention (default 64)"},
    {"--max-n", ARG_INT, "N", "lesson", 1024, 16384, NULL, "lesson 6.3: time plain and tiled attention up to N = 4^k * 1024 (default 4096)"},
    {"--bug", ARG_STRING, "NAME", "lesson generate", 0, 0, "offset|no-append|stale|mask|wrong-layout|no-scale", "a classic cache mistake in the cached path (lesson 11; generate)"},
    {"--kv-dtype", ARG_STRING, "TYPE", "generate bench eval", 0, 0, "fp32|bf16|fp16|int8|int4", "how the cache keeps keys and values (default fp32; lesson 12)"},
    {"--no-race", ARG_FLAG, NULL, "lesson", 0, 0, NULL, "lesson 10 on a terminal: the runs one after the other, shapes and logits, not the live race"},
};
enum { NUM_OPTIONS = (int)(sizeof OPTIONS / sizeof OPTIONS[0]) };

static int option_index(const char *name) {
    for (int i = 0; i < NUM_OPTIONS; i++)
        if (strcmp(OPTIONS[i].name, name) == 0) return i;
    return -1;
}

static int accepts(const OptionSpec *o, const char *command) {
    size_t n = strlen(command);
    for (const char *p = o->commands; (p = strstr(p, command)); p += n)
        if ((p == o->commands || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
    return 0;
}

static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("kvdemo: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_USAGE;
}

// "--cache, --no-cache, ..." of the options a command accepts.
static void list_options(char *buf, size_t size, const char *command) {
    buf[0] = '\0';
    for (int i = 0; i < NUM_OPTIONS; i++) {
        if (!accepts(&OPTIONS[i], command)) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", len ? ", " : "", OPTIONS[i].name);
    }
}

static void list_lesson_ids(char *buf, size_t size, int built_only) {
    buf[0] = '\0';
    for (int i = 0; i < NUM_LESSONS; i++) {
        if (built_only && !LESSONS[i].run) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", len ? ", " : "", LESSONS[i].id);
    }
}

static int parse_number(const OptionSpec *o, const char *value, double *out) {
    char *end;
    errno = 0;
    if (o->kind == ARG_INT) {
        long long v = strtoll(value, &end, 10);
        if (end == value || *end || errno || v < o->min || v > o->max)
            return usage_error("%s takes a whole number from %.0f to %.0f, not '%s'", o->name, o->min,
                               o->max, value);
        *out = (double)v;
    } else {
        double v = strtod(value, &end);
        if (errno == ERANGE && fabs(v) < 1) errno = 0;   // a subnormal number (1e-40) is a number
        if (end == value || *end || errno || !(v >= o->min && v <= o->max))
            return usage_error("%s takes a number from %g to %g, not '%s'", o->name, o->min, o->max, value);
        *out = v;
    }
    return 0;
}

static int check_choice(const OptionSpec *o, const char *value) {
    if (!o->choices) return 0;
    size_t n = strlen(value);
    // An empty value matches nowhere (and strstr would find "" forever).
    if (n == 0) return usage_error("%s takes one of %s, not an empty value", o->name, o->choices);
    for (const char *p = o->choices; (p = strstr(p, value)); p += n)
        if ((p == o->choices || p[-1] == '|') && (p[n] == '|' || p[n] == '\0')) return 0;
    return usage_error("%s takes one of %s, not '%s'", o->name, o->choices, value);
}

// What the options of this command set, besides Options: the trace's form.
typedef struct {
    const char *color;   // auto|always|never
    int width;           // --width N, or 0
} CliExtra;

// More threads than cores only take turns (12 to 20 times slower): --threads
// is capped at the number of cores, said once.
static void cap_threads(Options *opt) {
    int cores = pool_cores();
    if (opt->threads <= cores) return;
    fprintf(stderr, "kvdemo: --threads %d is more than the %d cores; using %d\n", opt->threads, cores, cores);
    opt->threads = cores;
}

// Parses argv[first..] as options of `command`. Returns 0 or an exit status.
static int parse_options(int argc, char **argv, int first, const char *command, Options *opt,
                         Trace *tr, CliExtra *extra) {
    for (int a = first; a < argc; a++) {
        const char *arg = argv[a];
        char name[64];
        const char *value = NULL;
        const char *eq = strchr(arg, '=');
        if (strncmp(arg, "--", 2) == 0 && eq && (size_t)(eq - arg) < sizeof name) {
            memcpy(name, arg, (size_t)(eq - arg));
            name[eq - arg] = '\0';
            value = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", arg);
        }
        int i = option_index(name);
        char valid[2048];
        list_options(valid, sizeof valid, command);
        if (i < 0 || !accepts(&OPTIONS[i], command)) {
            if (arg[0] != '-') return usage_error("unexpected argument '%s' for '%s'; options: %s", arg, command, valid);
            return usage_error("unknown option '%s' for '%s'; valid: %s", name, command, valid);
        }
        OptionSpec spec = OPTIONS[i];
        const OptionSpec *o = &spec;
        // bench takes a list of lengths: --steps 16,64,256.
        if (!strcmp(name, "--steps") && !strcmp(command, "bench")) spec.kind = ARG_STRING;
        // memory counts sequences, not a training batch.
        if (!strcmp(name, "--batch") && !strcmp(command, "memory")) spec.max = 1e9;
        if (o->kind == ARG_FLAG) {
            if (value) return usage_error("%s takes no value", o->name);
        } else if (!value) {
            if (a + 1 >= argc) return usage_error("%s needs a value: %s %s", o->name, o->name, o->choices ? o->choices : o->metavar);
            value = argv[++a];
        }
        int repeatable = !strcmp(name, "--prompt");
        if ((opt->given & (1ull << i)) && !repeatable) return usage_error("%s is given twice", o->name);
        if (repeatable && opt->n_prompts == MAX_PROMPTS)
            return usage_error("%s can be given at most %d times", o->name, MAX_PROMPTS);
        opt->given |= 1ull << i;
        double num = 0;
        if ((o->kind == ARG_INT || o->kind == ARG_DOUBLE) && parse_number(o, value, &num)) return EXIT_USAGE;
        if (o->kind == ARG_STRING && check_choice(o, value)) return EXIT_USAGE;
        if (o->kind == ARG_STRING && !*value) return usage_error("%s needs a non-empty value", o->name);

        if (!strcmp(name, "--cache")) opt->runs = RUN_CACHE;
        else if (!strcmp(name, "--no-cache")) opt->runs = RUN_NOCACHE;
        else if (!strcmp(name, "--trace"))
            tr->level = !strcmp(value, "none") ? TRACE_NONE : !strcmp(value, "summary") ? TRACE_SUMMARY : TRACE_FULL;
        else if (!strcmp(name, "--precision")) tr->precision = (int)num;
        else if (!strcmp(name, "--format")) tr->format = !strcmp(value, "json") ? FORMAT_JSON : FORMAT_TEXT;
        else if (!strcmp(name, "--lang")) tr->lang = !strcmp(value, "zh") ? LANG_ZH : LANG_EN;
        else if (!strcmp(name, "--step")) tr->step_pause = 1;
        else if (!strcmp(name, "--color")) extra->color = value;
        else if (!strcmp(name, "--width")) extra->width = (int)num;
        else if (!strcmp(name, "--repeat")) opt->repeat = (int)num;
        else if (!strcmp(name, "--data")) opt->data_path = value;
        else if (!strcmp(name, "--steps") && o->kind == ARG_STRING) opt->steps_list = value;
        else if (!strcmp(name, "--steps")) opt->steps = (int)num;
        else if (!strcmp(name, "--model")) opt->model_path = value;
        else if (!strcmp(name, "--init")) opt->init = value;
        else if (!strcmp(name, "--preset")) opt->preset = value;
        else if (!strcmp(name, "--seed")) opt->seed = (uint64_t)num, opt->given_seed = 1;
        else if (!strcmp(name, "--prompt")) opt->prompts[opt->n_prompts++] = value;
        else if (!strcmp(name, "--temperature")) opt->temperature = num;
        else if (!strcmp(name, "--top-k")) opt->top_k = (int)num;
        else if (!strcmp(name, "--top-p")) opt->top_p = num;
        else if (!strcmp(name, "--threads")) opt->threads = (int)num;
        else if (!strcmp(name, "--csv")) opt->csv_path = value;
        else if (!strcmp(name, "--out")) opt->out_path = value;
        else if (!strcmp(name, "--context")) opt->context = (int)num;
        else if (!strcmp(name, "--embedding")) opt->embedding = (int)num;
        else if (!strcmp(name, "--heads")) opt->heads = (int)num;
        else if (!strcmp(name, "--blocks")) opt->blocks = (int)num;
        else if (!strcmp(name, "--iters")) opt->iters = (int)num;
        else if (!strcmp(name, "--batch")) opt->batch = (int)num;
        else if (!strcmp(name, "--lr")) opt->lr = num;
        else if (!strcmp(name, "--eval-every")) opt->eval_every = (int)num;
        else if (!strcmp(name, "--resume")) opt->resume_path = value;
        else if (!strcmp(name, "--paged")) opt->paged = 1;
        else if (!strcmp(name, "--block-size")) opt->block_size = (int)num;
        else if (!strcmp(name, "--num-blocks")) opt->num_blocks = (int)num;
        else if (!strcmp(name, "--samples")) opt->samples = (int)num;
        else if (!strcmp(name, "--tokens")) opt->tokens = (int64_t)num;
        else if (!strcmp(name, "--layers")) opt->layers = (int)num;
        else if (!strcmp(name, "--kv-heads")) opt->kv_heads = (int)num;
        else if (!strcmp(name, "--head-dim")) opt->head_dim = (int)num;
        else if (!strcmp(name, "--dtype")) opt->dtype = value;
        else if (!strcmp(name, "--gpu-memory")) opt->gpu_memory = value;
        else if (!strcmp(name, "--list")) opt->list = 1;
        else if (!strcmp(name, "--attention")) opt->attention = value;
        else if (!strcmp(name, "--tile")) opt->tile = (int)num;
        else if (!strcmp(name, "--max-n")) opt->max_n = (int)num;
        else if (!strcmp(name, "--bug")) opt->bug = value;
        else if (!strcmp(name, "--kv-dtype")) opt->kv_dtype = value;
        else if (!strcmp(name, "--no-race")) opt->no_race = 1;
    }
    cap_threads(opt);
    int c = option_index("--cache"), nc = option_index("--no-cache");
    if ((opt->given >> c & 1) && (opt->given >> nc & 1))
        return usage_error("--cache and --no-cache exclude each other; give neither to get both runs and a comparison");
    return 0;
}

static int want_color(const char *when) {
    if (!strcmp(when, "always")) return 1;
    if (!strcmp(when, "never")) return 0;
    const char *no = getenv("NO_COLOR");
    const char *term = getenv("TERM");
    return isatty(STDOUT_FILENO) && !(no && *no) && !(term && !strcmp(term, "dumb"));
}

// ----------------------------------------------------------------------------
// The commands

static void print_help(FILE *f) {
    fprintf(f,
            "kvdemo %s — the transformer KV cache, step by step\n"
            "\n"
            "usage:\n"
            "  kvdemo                       this help and the lesson list\n"
            "  kvdemo list [--lang zh]      lessons: id, section of the documents, title (en, zh)\n"
            "  kvdemo lesson ID [options]   run one lesson, e.g. kvdemo lesson 2 --no-cache\n"
            "  kvdemo generate [options]    the char GPT writes text after a prompt (--model, --prompt,\n"
            "                               --steps, --cache/--no-cache, --seed, --temperature, --top-k,\n"
            "                               --bug NAME, --kv-dtype TYPE; --paged --samples N --block-size B\n"
            "                               --num-blocks N: lesson 6.1)\n"
            "  kvdemo race [options]        the same text without and with the cache, side by side, live\n"
            "  kvdemo bench [options]       cache against no cache over growing lengths (--steps LIST,\n"
            "                               --repeat, --csv FILE, --kv-dtype TYPE)\n"
            "  kvdemo init --out FILE       write a random char GPT (--preset seed|tiny, --seed N)\n"
            "  kvdemo train --out FILE      train the char GPT (--data FILE, --preset, --iters, --batch,\n"
            "                               --lr, --eval-every, --resume CHECKPOINT; docs/training.md)\n"
            "  kvdemo eval --model FILE     training and validation loss (--data FILE; --kv-dtype TYPE:\n"
            "                               the validation loss through an fp32|bf16|fp16|int8|int4 cache)\n"
            "  kvdemo memory [options]      KV cache size: --model NAME|FILE or --layers, --kv-heads,\n"
            "                               --head-dim; --tokens, --batch, --dtype, --gpu-memory; --list\n"
            "  kvdemo help                  this help\n"
            "  kvdemo --version             the version\n"
            "\n"
            "lesson options:\n",
            KVDEMO_VERSION);
    for (int i = 0; i < NUM_OPTIONS; i++) {
        const OptionSpec *o = &OPTIONS[i];
        if (!accepts(o, "lesson")) continue;
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", o->name, o->kind == ARG_FLAG ? "" : " ",
                 o->kind == ARG_FLAG ? "" : o->choices ? o->choices : o->metavar);
        fprintf(f, "  %-28s %s\n", left, o->help);
    }
    fprintf(f, "\nlessons:\n");
    lessons_print_list(f, LANG_EN, 1);
}

static int cmd_list(int argc, char **argv) {
    if (argc > 2 && argv[2][0] != '-') return usage_error("'list' takes no arguments, not '%s' (only --lang en|zh)", argv[2]);
    Options opt = {0};
    Trace tr;
    trace_init(&tr, stdout);
    CliExtra extra = {.color = "never"};
    int rc = parse_options(argc, argv, 2, "list", &opt, &tr, &extra);
    if (rc) return rc;
    lessons_print_list(stdout, tr.lang, 0);
    return 0;
}

// Does the lesson's list of options ("--data --repeat") hold this one?
static int lesson_uses(const Lesson *l, const char *name) {
    size_t n = strlen(name);
    for (const char *p = l->options; (p = strstr(p, name)); p += n)
        if (p[n] == ' ' || p[n] == '\0') return 1;
    return 0;
}

static int cmd_lesson(int argc, char **argv) {
    char ids[256];
    list_lesson_ids(ids, sizeof ids, 1);
    if (argc < 3 || argv[2][0] == '-')
        return usage_error("'lesson' needs a lesson id: one of %s (kvdemo list shows them all)", ids);
    const Lesson *l = lessons_find(argv[2]);
    if (!l) return usage_error("unknown lesson '%s'; valid ids: %s", argv[2], ids);
    if (!l->run) return usage_error("lesson %s is not built yet; built lessons: %s", l->id, ids);

    Options opt = {.runs = RUN_BOTH, .repeat = 0, .steps = -1, .seed = 42, .temperature = -1, .top_p = -1};
    Trace tr;
    trace_init(&tr, stdout);
    CliExtra extra = {.color = "auto"};
    int rc = parse_options(argc, argv, 3, "lesson", &opt, &tr, &extra);
    if (rc) return rc;
    tr.color = tr.format == FORMAT_TEXT && want_color(extra.color);
    tr.lesson = l->id;
    if (tr.step_pause && (tr.format != FORMAT_TEXT || !isatty(STDIN_FILENO))) {
        fprintf(stderr, "kvdemo: --step waits for keys on a terminal; %s, so it is ignored\n",
                tr.format != FORMAT_TEXT ? "the output is JSON" : "standard input is not one");
        tr.step_pause = 0;
    }
    if (extra.width && tr.format != FORMAT_TEXT) {
        fprintf(stderr, "kvdemo: --width fits text to a screen; the output is JSON, so it is ignored\n");
        extra.width = 0;
    }

    // --bug would silently run a correct lesson: refused where it means nothing.
    if (opt.bug && !lesson_uses(l, "--bug"))
        return usage_error("--bug works with lesson 11 and generate, not lesson %s", l->id);
    // Options this lesson has no use for are ignored, and it says so. The
    // common ones (--cache ... --color, the first rows of the table) apply
    // to every lesson; the others only where the lesson's row lists them.
    for (int i = option_index("--repeat"); i < NUM_OPTIONS; i++) {
        if (!(opt.given >> i & 1)) continue;
        if (!lesson_uses(l, OPTIONS[i].name)) fprintf(stderr, "kvdemo: lesson %s ignores %s\n", l->id, OPTIONS[i].name);
    }
    // --step on a terminal, or --width: the text is fitted to a screen
    // (wrapped, tensors elided; with --step, pages that wait for a key).
    Screen screen;
    int fitted = tr.step_pause || extra.width;
    if (fitted) {
        if (screen_open(&screen, stdout, screen_default_width(extra.width), tr.step_pause ? screen_default_height() : 0,
                        tr.step_pause, tr.lang == LANG_ZH)) {
            fprintf(stderr, "kvdemo: out of memory\n");
            return 1;
        }
        tr.out = screen.mem;
        tr.screen = &screen;
    }
    rc = l->run(&opt, &tr);
    if (fitted) {
        screen_close(&screen);
        tr.out = stdout;
        tr.screen = NULL;
    }
    // --color colours score and weight matrices; a lesson that showed none
    // says that the option changed nothing.
    if (!rc && (opt.given >> option_index("--color") & 1) && tr.heat_maps == 0 && tr.format == FORMAT_TEXT)
        fprintf(stderr, "kvdemo: lesson %s shows no score or weight matrix: --color changes nothing\n", l->id);
    return rc;
}

int cli_main(int argc, char **argv) {
    if (argc < 2) {
        print_help(stdout);
        return 0;
    }
    const char *cmd = argv[1];
    // "kvdemo help", and --help or -h anywhere ("kvdemo lesson 2 --help").
    int help = !strcmp(cmd, "help");
    for (int a = 1; a < argc; a++) help |= !strcmp(argv[a], "--help") || !strcmp(argv[a], "-h");
    if (help) {
        print_help(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("kvdemo %s\n", KVDEMO_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "list")) return cmd_list(argc, argv);
    if (!strcmp(cmd, "lesson")) return cmd_lesson(argc, argv);
    if (!strcmp(cmd, "generate") || !strcmp(cmd, "race") || !strcmp(cmd, "bench") || !strcmp(cmd, "init") || !strcmp(cmd, "train") ||
        !strcmp(cmd, "eval")) {
        Options opt = {.runs = RUN_BOTH, .steps = -1, .seed = 42, .temperature = -1, .top_p = -1};
        Trace tr;
        trace_init(&tr, stdout);
        CliExtra extra = {.color = "auto"};
        int rc = parse_options(argc, argv, 2, cmd, &opt, &tr, &extra);
        if (rc) return rc;
        tr.color = tr.format == FORMAT_TEXT && want_color(extra.color);
        tr.lesson = cmd;
        if (!strcmp(cmd, "generate")) return gptcmd_generate(&opt, &tr);
        if (!strcmp(cmd, "race")) return race_run(&opt, &tr);
        if (!strcmp(cmd, "bench")) return gptcmd_bench(&opt, &tr);
        if (!strcmp(cmd, "train")) return gptcmd_train(&opt);
        if (!strcmp(cmd, "eval")) return gptcmd_eval(&opt);
        return gptcmd_init(&opt);
    }
    if (!strcmp(cmd, "memory")) {
        Options opt = {.runs = RUN_BOTH, .steps = -1, .seed = 42, .temperature = -1, .top_p = -1};
        Trace tr;
        trace_init(&tr, stdout);
        CliExtra extra = {.color = "auto"};
        int rc = parse_options(argc, argv, 2, cmd, &opt, &tr, &extra);
        if (rc) return rc;
        tr.lesson = cmd;
        return memory_cmd(&opt, &tr);
    }
    return usage_error("unknown command '%s'; commands: %s (kvdemo help explains them)", cmd, COMMANDS);
}

int cli_parse_options(Options *opt, Trace *tr, int argc, char **argv, const char *command) {
    *opt = (Options){.runs = RUN_BOTH, .steps = -1, .seed = 42, .temperature = -1, .top_p = -1};
    trace_init(tr, stdout);
    CliExtra extra = {.color = "auto"};
    return parse_options(argc, argv, 2, command, opt, tr, &extra);
}
