// race — the same prompt and seed, without and with the KV cache, side by
// side and live: `kvdemo race` (gptcmd.c) and lesson 10 on a terminal.
//
// Each run is the chapter's generate on its own thread with one core of
// arithmetic (its state's pool is NULL, so the two never share one); the main
// thread redraws both every 50 ms on a terminal. The runs only write their
// progress under a lock; everything printed comes from the main thread.
//
// A race is one run each way, so the ratio's ± comes from the runs
// themselves: the scatter of each run's step times (measure_sum_sd, which a
// step cost that grows with the context does not count as noise), combined
// as hyperfine combines two spreads. That is the scatter within a run only:
// a whole run slowed by the machine moves every step alike, so races run
// minutes apart differ by more (9.2 ± 0.1 and 5.4 ± 0.04 on one machine):
// the verdict clears that too (measure_verdict_race), and the sentence says so. A machine whose load average exceeds
// its cores gets a banner first: both runs share it with other programs.
#include "race.h"

#include "fileio.h"
#include "gpt.h"
#include "gptsetup.h"
#include "measure.h"
#include "ops.h"
#include "pool.h"
#include "sampler.h"
#include "screen.h"
#include "timer.h"
#include "ttyguard.h"
#include "utf8.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

enum { DEFAULT_STEPS = 256, BAR = 20, REDRAW_MS = 50 };

static volatile sig_atomic_t interrupted, resized;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}
// The terminal changed size: the next redraw reads its width again.
static void on_sigwinch(int sig) {
    (void)sig;
    resized = 1;
}

// One run of the race. The run's thread writes done, seconds and the reset
// counts under lock; the main thread reads them under the same lock.
typedef struct {
    const GptModel *m;
    GptState s;
    Sampler sampler;
    int *tokens;           // the prompt, then the drawn tokens
    int n_prompt, steps, use_cache;
    pthread_mutex_t *lock;
    double t0;
    int done;              // steps finished
    int finished;
    double seconds;        // wall time up to the last finished step
    int resets;            // steps past the context that fed the whole window again
    double reset_seconds;  // their time
    double *step_seconds;  // (steps) each finished step's wall time
    unsigned char *cached; // (steps) 1: the step fed one token to the cache
    double last;           // when the last step finished
} Runner;

static int on_step(void *ctx, const GptStep *st) {
    Runner *r = ctx;
    double now = timer_now();
    pthread_mutex_lock(r->lock);
    r->done = st->step + 1;
    r->seconds = now - r->t0;
    r->step_seconds[st->step] = now - r->last;
    r->cached[st->step] = (unsigned char)st->cached;
    r->last = now;
    if (r->use_cache && st->step > 0 && !st->cached) {
        r->resets++;
        r->reset_seconds += st->seconds;
    }
    pthread_mutex_unlock(r->lock);
    return interrupted != 0;
}

static void *run_thread(void *arg) {
    Runner *r = arg;
    r->t0 = r->last = timer_now();
    gpt_generate(r->tokens, &r->s, r->m, &r->sampler, r->n_prompt, r->steps, r->use_cache, on_step, r);
    pthread_mutex_lock(r->lock);
    r->finished = 1;
    pthread_mutex_unlock(r->lock);
    return NULL;
}

// A snapshot of a runner, taken under its lock.
typedef struct {
    int done, finished, resets;
    double seconds, reset_seconds;
    char *text;            // the text so far, prompt included
} View;

static void snapshot(View *v, Runner *r, char *text, size_t cap) {
    pthread_mutex_lock(r->lock);
    v->done = r->done;
    v->finished = r->finished;
    v->resets = r->resets;
    v->seconds = r->seconds;
    v->reset_seconds = r->reset_seconds;
    gpt_decode(text, cap, r->m, r->tokens, r->n_prompt + r->done);
    pthread_mutex_unlock(r->lock);
    v->text = text;
}

// The last characters of text that fit in width columns, newlines shown as
// "⏎" so the line stays one line.
static void print_tail(FILE *f, const char *text, int width) {
    size_t len = strlen(text);
    const char *start = text + len;
    int cols = 0;
    while (start > text) {
        const char *p = start - 1;
        while (p > text && ((unsigned char)*p & 0xC0) == 0x80) p--;
        char one[5] = {0};
        memcpy(one, p, (size_t)(start - p) < 4 ? (size_t)(start - p) : 4);
        int w = *p == '\n' ? 1 : utf8_width(one);
        if (cols + w > width) break;
        cols += w;
        start = p;
    }
    for (const char *p = start; *p;) {
        size_t n = strcspn(p, "\n");
        utf8_put_shown(f, p, n);   // control characters escaped
        if (!p[n]) break;
        fputs("\xe2\x8f\x8e", f);   // ⏎
        p += n + 1;
    }
}

// A run's line: its label, bar, steps, speed, time and state ("done", or
// "interrupted" when Ctrl-C stopped it short), cut to width columns so that
// it never wraps (a wrapped line scrolls the screen at every redraw).
static void print_run_line(FILE *f, const Trace *tr, const char *label, const View *v, int steps, int width) {
    int fill = steps ? v->done * BAR / steps : 0;
    char line[512];
    int n = snprintf(line, sizeof line, "%s  ", label);
    for (int i = 0; i < BAR && n < (int)sizeof line - 4; i++) n += snprintf(line + n, sizeof line - (size_t)n, "%s", i < fill ? "\xe2\x96\x88" : "\xc2\xb7");   // █ ·
    double tps = v->seconds > 0 ? v->done / v->seconds : 0;
    const char *state = !v->finished ? ""
                        : v->done < steps && interrupted ? trace_text(tr, "  interrupted", "  已中断")
                                                         : trace_text(tr, "  done", "  完成");
    if (n < (int)sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, " %4d/%d  %6.0f %s  %6.2f s%s", v->done, steps, tps,
                 trace_text(tr, "tokens/s", "token/秒"), v->seconds, state);
    size_t len = strlen(line);
    while (len > 0 && screen_columns(line, len) > width) {
        len--;
        while (len > 0 && ((unsigned char)line[len] & 0xC0) == 0x80) len--;   // a whole character
    }
    fprintf(f, "\x1b[K%.*s\n", (int)len, line);
}

// Draws both runs: 4 lines, redrawn in place (the cursor goes back up first).
static void draw(FILE *f, const Trace *tr, const View *v, int steps, int width, int again) {
    if (again) fputs("\x1b[4A", f);
    const char *labels[2] = {trace_text(tr, "without the cache", "不使用缓存"),
                             trace_text(tr, "with the cache   ", "使用缓存  ")};
    for (int i = 0; i < 2; i++) {
        print_run_line(f, tr, labels[i], &v[i], steps, width);
        fputs("\x1b[K  ", f);
        print_tail(f, v[i].text, width - 3);
        fputc('\n', f);
    }
    fflush(f);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}


// Without the cache against with it: x = the ratio of the two runs' times,
// e from each run's own scatter (see the top of this file).
static MeasureRatio race_ratio(const Runner run[2], const View v[2]) {
    double t0 = v[0].seconds, t1 = v[1].seconds;
    if (!(t0 > 0 && t1 > 0)) return measure_ratio_of(0, 0, 2);
    double sd0 = measure_sum_sd(run[0].step_seconds, run[0].cached, v[0].done);
    double sd1 = measure_sum_sd(run[1].step_seconds, run[1].cached, v[1].done);
    double x = t0 / t1;
    return measure_ratio_of(x, x * hypot(sd0 / t0, sd1 / t1), 2);
}

// The two runners (without the cache, with it) and their texts' room, cap
// bytes each. Returns 0, or an exit status after one line on stderr.
static int runners_init(Runner run[2], char *text[2], size_t *cap, pthread_mutex_t *lock, const GptModel *m,
                        const Options *opt, int steps) {
    int rc = 0;
    float temperature = opt->temperature >= 0 ? (float)opt->temperature : 1.0f;
    const char *prompt = gptsetup_prompt_text(opt);
    for (int i = 0; i < 2 && !rc; i++) {
        run[i].m = m;
        run[i].steps = steps;
        run[i].use_cache = i == 1;
        run[i].lock = lock;
        rc = gptsetup_prompt(opt->lang, &run[i].tokens, &run[i].n_prompt, m, prompt, steps);
        if (rc) break;
        *cap = gpt_decode(NULL, 0, m, run[i].tokens, run[i].n_prompt) + 4 * (size_t)steps + 1;
        if (gpt_state_init(&run[i].s, m->cfg) ||
            sampler_init(&run[i].sampler, m->cfg.V, temperature, opt->top_k, (uint32_t)opt->seed) ||
            !(text[i] = malloc(*cap)) || !(run[i].step_seconds = malloc(sizeof(double) * (size_t)steps)) ||
            !(run[i].cached = malloc((size_t)steps))) {
            fileio_error(opt->lang, "out of memory", "内存不足");
            rc = 1;
        }
    }
    return rc;
}

// Keys typed during the race are neither echoed nor left for the shell.
// Ctrl-C stops the race (on_sigint); SIGTERM, SIGHUP and SIGQUIT end the
// program, the terminal's modes put back first. Returns 1 when *saved is to
// be put back.
static int tty_quiet(struct termios *saved) {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, saved) != 0) return 0;
    struct termios quiet = *saved;
    quiet.c_lflag &= ~(tcflag_t)(ECHO | ICANON);
    ttyguard_arm(STDIN_FILENO, saved);
    int restore_tty = tcsetattr(STDIN_FILENO, TCSANOW, &quiet) == 0;
    if (!restore_tty) ttyguard_disarm();
    return restore_tty;
}

// Both runs, on two cores at once or one after the other, their views
// redrawn every REDRAW_MS when live; v gets where each ended.
static void run_both(Trace *tr, View v[2], Runner run[2], char *text[2], size_t cap, int steps, int live,
                     int cores) {
    pthread_t th[2];
    int width = screen_default_width(0), again = 0;
    if (width < 40) width = 40;   // two panes of at least 20 columns
    // Two cores: both runs start together. One core: they take turns.
    int together = cores >= 2;
    for (int i = 0; i < 2; i++) {
        if (together && i == 1) break;
        for (int k = together ? 0 : i; k <= (together ? 1 : i); k++)
            pthread_create(&th[k], NULL, run_thread, &run[k]);
        for (;;) {
            int finished = 1;
            for (int k = 0; k < 2; k++) {
                snapshot(&v[k], &run[k], text[k], cap);
                if (together || k == i) finished &= v[k].finished;
            }
            if (live && resized) {   // SIGWINCH: the width again
                resized = 0;
                width = screen_default_width(0);
                if (width < 40) width = 40;
            }
            if (live) {
                draw(tr->out, tr, v, steps, width, again);
                again = 1;
            }
            if (finished) break;
            sleep_ms(REDRAW_MS);
        }
        for (int k = together ? 0 : i; k <= (together ? 1 : i); k++) pthread_join(th[k], NULL);
    }
    for (int k = 0; k < 2; k++) snapshot(&v[k], &run[k], text[k], cap);
}

void race_table(Trace *tr, const char *const lane[2], const int tokens[2], const double seconds[2], int decimals,
                int lane_width) {
    const TraceColumn cols[] = {
        {"", "", lane_width, 0, "run"},
        {"tokens", "token", 6, 1, NULL},
        {"s", "秒", 8, 1, "seconds"},
        {"tokens/s", "token/秒", 9, 1, "tokens_per_s"},
    };
    const TraceTable table = {"race", 4, cols};
    trace_table_head(tr, &table);
    for (int k = 0; k < 2; k++) {
        char done[16], secs[32], tps[32];
        snprintf(done, sizeof done, "%d", tokens[k]);
        snprintf(secs, sizeof secs, "%.*f", decimals, seconds[k]);
        snprintf(tps, sizeof tps, "%.0f", tokens[k] / (seconds[k] > 0 ? seconds[k] : 1e-9));
        const char *row[] = {lane[k], done, secs, tps};
        trace_table_row(tr, &table, row);
    }
}

// The two runs side by side, a row each.
static void report_table(Trace *tr, const View v[2]) {
    const char *lane[2] = {trace_text(tr, "without the cache", "不使用缓存"), trace_text(tr, "with the cache", "使用缓存")};
    race_table(tr, lane, (const int[]){v[0].done, v[1].done}, (const double[]){v[0].seconds, v[1].seconds}, 2, 17);
}

// The runs' texts, times and the speed-up as events.
static void report_json(Trace *tr, const View v[2], int same, MeasureRatio ratio, int verdict) {
    const char *names[2] = {"no-cache", "cache"};
    for (int k = 0; k < 2; k++) {
        trace_run(tr, names[k]);
        trace_textval(tr, "text", v[k].text);
        trace_timing(tr, names[k], v[k].seconds, 1);
        trace_value(tr, "tokens_per_s", v[k].done / v[k].seconds, "tokens/s", NULL, NULL);
        trace_count(tr, "reset_steps", v[k].resets, NULL, NULL);
        trace_value(tr, "reset_seconds", v[k].reset_seconds, "s", NULL, NULL);
    }
    trace_run(tr, NULL);
    trace_count(tr, "texts_identical", same, NULL, NULL);
    trace_comparison_of(tr, "speedup", ratio, verdict, NULL, NULL);
}

// The verdict for people: same text or not, the speed-up, the resets, the text.
static void report_text(Trace *tr, const GptModel *m, const View v[2], int same, MeasureRatio ratio, int verdict) {
    fputc('\n', tr->out);
    if (same)
        trace_say(tr, "Both runs wrote the same text, character for character.",
                  "两次写出的文字一字不差。");
    else
        trace_say(tr, "The two texts differ: the cache changed the result.", "两次写出的文字不同：缓存改变了结果。");
    char said[160];
    measure_compare_text(said, sizeof said, ratio, (MeasureVerdict)verdict, tr->lang == LANG_ZH);
    trace_sayf(tr,
               "With the cache: %s (%.2f s against %.2f s;\n"
               "± from the scatter of each run's step times only: races minutes apart have read\n"
               "4.9 x and 11.5 x, so one race concludes only beyond a factor of %.1f, ± included;\n"
               "lesson 10 --no-race times several runs).",
               "使用缓存：%s（%.2f 秒对 %.2f 秒；± 只来自每次运行内各步耗时的离散程度：\n"
               "隔几分钟的两次赛跑测出过 4.9 倍和 11.5 倍，所以一次赛跑只在相差\n"
               "超过 %.1f 倍（含 ±）时才下结论；第 10 课 --no-race 会计时多次）。",
               said, v[1].seconds, v[0].seconds, MEASURE_RACE_FLOOR);
    if (v[1].resets > 0)
        trace_sayf(tr,
                   "Past the context (%d positions) the chapter's generate drops the cache and feeds the "
                   "last %d tokens again: %d such steps took %.2f s of the cached run's %.2f s.",
                   "超过上下文长度（%d 个位置）后，章节里的 generate 丢掉缓存，把最后 %d 个 token 重新算一遍："
                   "这样的 %d 步用了 %.2f 秒（使用缓存那一遍共 %.2f 秒）。",
                   m->cfg.T, m->cfg.T, v[1].resets, v[1].reset_seconds, v[1].seconds);
    fputc('\n', tr->out);
    utf8_put_shown(tr->out, v[1].text, strlen(v[1].text));
    fputc('\n', tr->out);
}

int race_model(const GptModel *m, const Options *opt, Trace *tr) {
    int rc = 0;
    int steps = opt->steps > 0 ? opt->steps : DEFAULT_STEPS;
    const char *prompt = gptsetup_prompt_text(opt);
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    Runner run[2];
    memset(run, 0, sizeof run);
    char *text[2] = {NULL, NULL};
    size_t cap = 0;
    // One core each (the states' pools stay NULL): the two runs never wait
    // for each other's threads.
    rc = runners_init(run, text, &cap, &lock, m, opt, steps);

    int live = !rc && tr->format == FORMAT_TEXT && isatty(STDOUT_FILENO);
    int cores = pool_cores();
    struct termios saved;
    int restore_tty = 0;
    struct sigaction old_int, old_winch;
    if (!rc) {
        interrupted = 0;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_int);
        resized = 0;
        sa.sa_handler = on_sigwinch;
        sigaction(SIGWINCH, &sa, &old_winch);
    }
    if (live) restore_tty = tty_quiet(&saved);
    View v[2];
    if (!rc) {
        trace_machine(tr, measure_machine());
        if (tr->format == FORMAT_TEXT) {
            trace_sayf(tr, "The char GPT writes %d characters after \"%s\" twice, with the same seed: without the cache and with it, %s.",
                       "字符级 GPT 用同一个随机种子写两遍 %d 个字符，接在“%s”之后：一遍不使用缓存，一遍使用缓存，%s。", steps, prompt,
                       cores >= 2 ? trace_text(tr, "each on its own core, at the same time", "各占一个核，同时开始")
                                  : trace_text(tr, "one after the other (this machine has one core)", "先后进行（这台机器只有一个核）"));
            fputc('\n', tr->out);
        }
        run_both(tr, v, run, text, cap, steps, live, cores);
    }
    if (restore_tty) {
        tcflush(STDIN_FILENO, TCIFLUSH);
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
        ttyguard_disarm();
    }
    if (!rc) sigaction(SIGINT, &old_int, NULL), sigaction(SIGWINCH, &old_winch, NULL);
    if (!rc && interrupted) {
        fileio_error(tr->lang, "race interrupted", "赛跑被中断");
        rc = 130;
    }
    if (!rc) {
        int same = v[0].done == v[1].done && !strcmp(v[0].text, v[1].text);
        MeasureRatio ratio = race_ratio(run, v);
        int verdict = measure_verdict_race(ratio);
        // The two runs side by side, unless the live lines showed them.
        if (!live || tr->format == FORMAT_JSON) report_table(tr, v);
        if (tr->format == FORMAT_JSON) report_json(tr, v, same, ratio, verdict);
        else report_text(tr, m, v, same, ratio, verdict);
    }
    for (int i = 0; i < 2; i++) {
        free(run[i].tokens);
        free(run[i].step_seconds);
        free(run[i].cached);
        free(text[i]);
        sampler_free(&run[i].sampler);
        gpt_state_free(&run[i].s);
    }
    return rc;
}
