// traincmd — the commands `kvdemo train` and `kvdemo eval`: the options made
// into a recipe, and everything they print. train_run and train_eval print
// nothing; they call back after each step (each batch of windows), and the
// commands here decide what a person sees, in English or Chinese:
//
//   on a terminal   one progress line rewritten in place, and a line that
//                   stays for each evaluation, as nanoGPT's log has:
//                     step 100: train loss 2.4816, val loss 2.5027
//   on a pipe       a log line every 10 steps and the same evaluation lines
//   --log FILE      the curve as CSV, one row per evaluation, written whole
//                   or not at all (fileio), for a spreadsheet or a plot
//
// Everything goes to stderr but eval's result, which goes to stdout.
#include "gptcmd.h"

#include "fileguard.h"
#include "fileio.h"
#include "gptsetup.h"
#include "kvcmd.h"
#include "llama_convert.h"
#include "llamacmd.h"
#include "paths.h"
#include "screen.h"
#include "timer.h"
#include "train.h"
#include "train_llama.h"
#include "utf8.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The corpus: --data FILE, else data/tinyshakespeare.txt (corpus.h's CORPUS_GET).
static const char *corpus_path(const Options *opt, char *buf, size_t size) {
    if (opt->data_path) return opt->data_path;
    const char *p = paths_shipped("data/tinyshakespeare.txt", buf, size);
    if (access(p, R_OK) != 0) {
        corpus_missing(opt->lang, "no training text", "没有训练文本");
        return NULL;
    }
    return p;
}

// A file the command reads (the text, a checkpoint) that cannot be read is
// said here, before the work starts, in the user's language. Returns 0 when
// path can be read.
static int check_readable(Lang lang, const char *what_en, const char *what_zh, const char *path) {
    if (access(path, R_OK) == 0) return 0;
    int e = errno;
    fileio_error(lang, "cannot read %s %s: %s", "无法读取%s %s：%s", fileio_text(lang, what_en, what_zh), path,
                 fileio_strerror(lang, e));
    return -1;
}

// 9s, 1m05s, 2h10m; "--" when unknown.
static void format_duration(char *out, size_t n, double s) {
    if (!(s >= 0) || s > 1e7) {
        snprintf(out, n, "--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(out, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(out, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(out, n, "%lds", t);
}

// Draws line over the progress line, cut to fit width - 1 columns (a
// Chinese character takes two): a line that wrapped would leave its first
// rows behind at each redraw.
static void draw_progress(const char *line, int width) {
    const unsigned char *p = (const unsigned char *)line;
    size_t left = strlen(line), keep = 0;
    int cols = 0;
    while (keep < left) {
        uint32_t cp;
        int len = utf8_decode(&cp, p + keep, left - keep);
        if (len <= 0) len = 1;
        char one[8] = {0};
        memcpy(one, p + keep, (size_t)len);
        int w = utf8_width(one);
        if (cols + w > width - 1) break;
        cols += w;
        keep += (size_t)len;
    }
    fprintf(stderr, "\r\033[K%.*s", (int)keep, line);
}

// ----------------------------------------------------------------------------
// kvdemo train

typedef struct {
    const Trace *tr;
    const char *data_path;
    int tty;              // stderr is a terminal
    int width;            // its columns
    int line_open;        // a progress line is on the terminal, not ended by a newline
    double last_draw;     // when it was drawn (elapsed seconds)
    AtomicFile *log;      // --log FILE, or NULL
    int started;          // the starting call came
} TrainView;

static void end_line(TrainView *v) {
    if (v->line_open) fputc('\n', stderr);
    v->line_open = 0;
}

static void say_start(const TrainView *v, const TrainProgress *p) {
    const GptConfig *g = &p->model;
    int zh = v->tr->lang == LANG_ZH;
    if (p->arch == TRAIN_ARCH_LLAMA && zh)
        fprintf(stderr, "kvdemo 训练 LLaMA 式模型：%s，%lld 个字符，词表 %d 个字符（另加 pad、bos、eos）；上下文 %d，维度 %d，"
                        "%d 个查询头，%d 个 key/value 头，%d 层，SwiGLU 隐藏层 %d，共 %zu 个参数；每步 %d × %d 个 token，共 %d 步%s；"
                        "%d 个线程\n",
                v->data_path, (long long)p->text_chars, g->V, g->T, g->C, g->H, p->kv_heads, g->L, p->hidden,
                p->num_params, p->batch, g->T, p->iters, p->first_step ? "（接着检查点训练）" : "", p->threads);
    else if (p->arch == TRAIN_ARCH_LLAMA)
        fprintf(stderr, "kvdemo train --arch llama: %s, %lld characters, vocabulary %d (and pad, bos, eos); context %d, "
                        "dim %d, query heads %d, key/value heads %d, layers %d, SwiGLU hidden %d: %zu parameters; "
                        "batch %d x %d, %d steps%s, %d thread%s\n",
                v->data_path, (long long)p->text_chars, g->V, g->T, g->C, g->H, p->kv_heads, g->L, p->hidden,
                p->num_params, p->batch, g->T, p->iters, p->first_step ? " (resumed)" : "", p->threads,
                p->threads == 1 ? "" : "s");
    else if (zh)
        fprintf(stderr, "kvdemo 训练：%s，%lld 个字符，词表 %d 个字符；上下文 %d，嵌入 %d，%d 个头，%d 个块，共 %zu 个参数；"
                        "每步 %d × %d 个 token，共 %d 步%s；%d 个线程\n",
                v->data_path, (long long)p->text_chars, g->V, g->T, g->C, g->H, g->L, p->num_params, p->batch, g->T,
                p->iters, p->first_step ? "（接着检查点训练）" : "", p->threads);
    else
        fprintf(stderr, "kvdemo train: %s, %lld characters, vocabulary %d; context %d, embedding %d, heads %d, "
                        "blocks %d: %zu parameters; batch %d x %d, %d steps%s, %d thread%s\n",
                v->data_path, (long long)p->text_chars, g->V, g->T, g->C, g->H, g->L, p->num_params, p->batch, g->T,
                p->iters, p->first_step ? " (resumed)" : "", p->threads, p->threads == 1 ? "" : "s");
    if (p->first_step) {
        if (zh) fprintf(stderr, "从第 %d 步接着训练（共 %d 步）\n", p->first_step, p->iters);
        else fprintf(stderr, "resuming at step %d of %d\n", p->first_step, p->iters);
    }
}

static int on_train_step(const TrainProgress *p, void *user) {
    TrainView *v = user;
    int zh = v->tr->lang == LANG_ZH;
    if (p->starting) {
        v->started = 1;
        say_start(v, p);
        fflush(stderr);
        return 0;
    }
    char el[32], eta[32], val[32];
    format_duration(el, sizeof el, p->elapsed_s);
    format_duration(eta, sizeof eta, p->eta_s);
    if (isnan(p->val_loss)) snprintf(val, sizeof val, "-");
    else snprintf(val, sizeof val, "%.4f", p->val_loss);
    if (p->evaluated) {
        // The line that stays: step, train loss, val loss (nanoGPT's).
        if (v->tty) fputs("\r\033[K", stderr);
        v->line_open = 0;
        if (zh)
            fprintf(stderr, "第 %d 步：训练集损失 %.4f，验证集损失 %.4f\n", p->step, p->train_loss, p->val_loss);
        else
            fprintf(stderr, "step %d: train loss %.4f, val loss %.4f\n", p->step, p->train_loss, p->val_loss);
        if (v->log)
            fprintf(v->log->f, "%d,%.6f,%.6f,%.6f,%.6g,%.3f\n", p->step, p->train_loss, p->val_loss, p->loss,
                    p->lr, p->elapsed_s);
    }
    if (v->tty) {
        // at most 10 redraws a second
        if (p->evaluated || p->step == p->iters || p->elapsed_s - v->last_draw >= 0.1) {
            char line[512];
            if (zh)
                snprintf(line, sizeof line, "第 %d/%d 步 损失 %.4f 验证 %s 学习率 %.1e %.0f token/秒 剩余 %s", p->step,
                         p->iters, p->loss, val, p->lr, p->tokens_per_s, eta);
            else
                snprintf(line, sizeof line, "step %d/%d loss %.4f val %s lr %.1e %.0f tok/s ETA %s", p->step,
                         p->iters, p->loss, val, p->lr, p->tokens_per_s, eta);
            draw_progress(line, v->width);
            v->line_open = 1;
            v->last_draw = p->elapsed_s;
        }
    } else if (p->step % 10 == 0 || p->step == p->iters) {
        if (zh)
            fprintf(stderr, "第 %d/%d 步 损失 %.4f 验证 %s 学习率 %.2e 梯度范数 %.3f 每秒 %.0f 个 token 已用 %s 剩余 %s\n",
                    p->step, p->iters, p->loss, val, p->lr, p->grad_norm, p->tokens_per_s, el, eta);
        else
            fprintf(stderr, "step %d/%d loss %.4f val %s lr %.2e norm %.3f %.0f tok/s elapsed %s ETA %s\n", p->step,
                    p->iters, p->loss, val, p->lr, p->grad_norm, p->tokens_per_s, el, eta);
    }
    fflush(stderr);
    return 0;
}

// No output may be an input or another output (fileguard.h). The
// checkpoint may be the one resumed from: resuming out.ckpt and saving the
// run's later checkpoints over it is how --resume is meant to be used.
static int check_outputs(const Options *opt, const char *data_path) {
    char ckpt[4096];
    snprintf(ckpt, sizeof ckpt, "%s.ckpt", opt->out_path);
    FileRole outputs[3] = {{"--out", opt->out_path}, {fileio_text(opt->lang, "--out's checkpoint", "--out 的检查点"), ckpt},
                           {"--log", opt->log_path}};
    FileRole inputs[2] = {{opt->data_path ? "--data" : fileio_text(opt->lang, "the training text", "训练文本"), data_path},
                          {"--from", opt->from_path}};
    FileRole not_ckpt[2] = {outputs[0], outputs[2]}, resume = {"--resume", opt->resume_path};
    if (fileguard_check(opt->lang, outputs, 3, inputs, opt->from_path ? 2 : 1)) return 2;
    return fileguard_check(opt->lang, not_ckpt, 2, &resume, 1);
}

// The LLaMA-style model's shape options: --kv-heads (default --heads) and
// --hidden (default 8C/3 rounded up to a multiple of 32, as llama2.c's
// multiple_of), checked as a model file's header is. Returns 0 or 2.
static int llama_shape(TrainConfig *cfg, const Options *opt) {
    if (opt->kv_heads) cfg->kv_heads = opt->kv_heads;
    else if (opt->heads || !cfg->kv_heads) cfg->kv_heads = cfg->model.H;
    if (opt->window) cfg->window = opt->window;
    if (opt->hidden) cfg->hidden = opt->hidden;
    else if (opt->embedding || !cfg->hidden) cfg->hidden = (8 * cfg->model.C / 3 + 31) / 32 * 32;
    LlamaConfig lc;
    char why[256];
    if (llama_train_config(&lc, cfg, 1, ERR(opt->lang, why)) == 0) return 0;
    fileio_error(opt->lang, "bad LLaMA shape (--context, --embedding, --heads, --kv-heads, --blocks, --hidden): %s",
                 "LLaMA 模型形状不对（--context、--embedding、--heads、--kv-heads、--blocks、--hidden）：%s", why);
    return 2;
}

// Uptraining (--from FILE --kv-heads G --convert HOW): the options that go
// with it, and FILE a LLaMA-style model that can become one of G key/value
// heads. The shape is FILE's (llama_train takes it). Returns 0, 1 (FILE
// cannot be read) or 2 after one line.
static int llama_from_recipe(TrainConfig *cfg, const Options *opt) {
    const unsigned char *given = opt->given;
    const char *shape = given[OPT_CONTEXT] ? "--context" : given[OPT_EMBEDDING] ? "--embedding"
                      : given[OPT_HEADS] ? "--heads" : given[OPT_BLOCKS] ? "--blocks"
                      : given[OPT_HIDDEN] ? "--hidden" : given[OPT_PRESET] ? "--preset" : NULL;
    const char *bad_en = NULL, *bad_zh = NULL;
    if (!opt->from_path || !opt->convert)
        bad_en = "--from FILE and --convert mean|first|random go together", bad_zh = "--from FILE 和 --convert mean|first|random 要一起给";
    else if (opt->resume_path)
        bad_en = "--from starts an uptraining and --resume continues one: give one of them",
        bad_zh = "--from 开始一次继续训练，--resume 接着一次中断的训练：只能给其中一个";
    else if (!opt->kv_heads)
        bad_en = "--from needs --kv-heads G, the key/value heads of the converted model",
        bad_zh = "--from 需要 --kv-heads G，即转换后模型的 key/value 头数";
    else if (shape) {
        fileio_error(opt->lang, "%s cannot go with --from: the shape is the --from model's", "%s 不能和 --from 一起用：形状就是 --from 模型的形状", shape);
        return 2;
    }
    if (bad_en) {
        fileio_error(opt->lang, "%s", "%s", fileio_text(opt->lang, bad_en, bad_zh));
        return 2;
    }
    if (check_readable(opt->lang, "the model", "模型", opt->from_path)) return 1;
    if (!llamacmd_is_llama_file(opt->from_path)) {
        fileio_error(opt->lang, "--from %s is not a LLaMA-style model file (magic KVLM)", "--from %s 不是 LLaMA 式模型文件（magic 应为 KVLM）",
                     opt->from_path);
        return 2;
    }
    LlamaModel src;
    char err[512];
    if (llama_load(&src, opt->from_path, ERR(opt->lang, err)) != 0) {
        fileio_error(opt->lang, "%s", "%s", err);
        return 1;
    }
    int rc = llama_convert_check(&src, opt->kv_heads, ERR(opt->lang, err));
    llama_free(&src);
    if (rc) {
        fileio_error(opt->lang, "%s", "%s", err);
        return 2;
    }
    LlamaConvert how;
    llama_convert_parse(&how, opt->convert);
    cfg->from_path = opt->from_path;
    cfg->convert = (int)how;
    cfg->kv_heads = opt->kv_heads;
    return 0;
}

// The recipe: the preset's (the char GPT's, or the LLaMA-style model's with
// --arch llama), then the shape options. Returns 0, or 2 after one line.
static int train_recipe(TrainConfig *cfg, const Options *opt) {
    int llama = opt->arch && strcmp(opt->arch, "llama") == 0;
    const char *preset = opt->preset ? opt->preset : "seed";
    if ((llama ? llama_train_config_default(cfg, preset) : train_config_default(cfg, preset)) != 0) {
        fileio_error(opt->lang, "unknown preset '%s'; valid: seed, tiny", "没有预设“%s”；可选 seed、tiny", preset);
        return 2;
    }
    if (!llama && (opt->kv_heads || opt->hidden || opt->from_path || opt->convert || opt->window)) {
        fileio_error(opt->lang, "%s is the LLaMA-style model's: add --arch llama", "%s 属于 LLaMA 式模型：请加上 --arch llama",
                     opt->kv_heads ? "--kv-heads" : opt->hidden ? "--hidden" : opt->from_path ? "--from"
                     : opt->convert ? "--convert" : "--window");
        return 2;
    }
    if (opt->given[OPT_ITERS] && opt->iters == 0 && !opt->from_path) {
        fileio_error(opt->lang, "--iters 0 only goes with --from (the converted model written as it is); give 1 or more",
                     "--iters 0 只能和 --from 一起用（直接写出转换后的模型）；请给 1 或更大的数");
        return 2;
    }
    if (llama && (opt->from_path || opt->convert)) return llama_from_recipe(cfg, opt);
    if (opt->context) cfg->model.T = opt->context;
    if (opt->embedding) cfg->model.C = opt->embedding;
    if (opt->heads) cfg->model.H = opt->heads;
    if (opt->blocks) cfg->model.L = opt->blocks;
    if (cfg->model.C % cfg->model.H != 0) {
        fileio_error(opt->lang, "--embedding %d is not divisible by --heads %d; pick sizes where it is (e.g. 384 and 6)",
                     "--embedding %d 不能被 --heads %d 整除；请选能整除的大小（例如 384 和 6）", cfg->model.C,
                     cfg->model.H);
        return 2;
    }
    return llama ? llama_shape(cfg, opt) : 0;
}

// The run's settings from the options over the recipe's: iterations,
// batch, learning rate, evaluations, seed, warm-up, threads. Returns 0, or 2
// after one line.
static int train_settings(TrainConfig *cfg, const Options *opt) {
    // an uptraining keeps the recipe's share of warm-up steps (100 of 2000)
    if (cfg->from_path && opt->given[OPT_ITERS]) cfg->warmup = (int)((int64_t)cfg->warmup * opt->iters / cfg->iters);
    if (opt->given[OPT_ITERS]) cfg->iters = opt->iters;
    if (opt->batch) cfg->batch = opt->batch;
    if (opt->lr > 0) cfg->lr = (float)opt->lr;
    if (cfg->min_lr > cfg->lr) cfg->min_lr = cfg->lr;
    if (opt->eval_every) cfg->eval_every = cfg->ckpt_every = opt->eval_every;
    if (opt->given_seed) cfg->seed = opt->seed;
    if (opt->given[OPT_WARMUP]) {   // e.g. a run from scratch on an uptraining's schedule
        if (opt->warmup > cfg->iters) {
            fileio_error(opt->lang, "--warmup %d is longer than the %d iterations; give 0 to %d",
                         "--warmup %d 比 %d 次迭代还长；请给 0 到 %d", opt->warmup, cfg->iters, cfg->iters);
            return 2;
        }
        cfg->warmup = opt->warmup;
    }
    if (cfg->warmup > cfg->iters) cfg->warmup = cfg->iters / 10;
    cfg->threads = opt->threads;
    return 0;
}

// The --log file at the end of a run that ended with status: dropped if no
// step reached it, else committed. Returns the status, TRAIN_FAILED if the
// log could not be written (said in one line).
static int train_log_close(AtomicFile *log, const TrainView *view, int status, const char *out_path) {
    char why[1024];
    if (!view->started) fileio_abort(log);
    else if (fileio_commit(log, ERR(view->tr->lang, why)) != 0) {
        // The model is written before the log: say that it is safe.
        if (status == TRAIN_OK)
            fileio_error(view->tr->lang, "cannot write the log: %s (the model was written to %s)",
                         "无法写入日志：%s（模型已写入 %s）", why, out_path);
        else fileio_error(view->tr->lang, "cannot write the log: %s", "无法写入日志：%s", why);
        if (status == TRAIN_OK) status = TRAIN_FAILED;
    }
    return status;
}

// The last line of a run on stderr: where it stopped and how to continue,
// the conversion written, or the steps done and where the model went.
static void train_say_end(int status, const TrainResult *res, const TrainConfig *cfg, const Options *opt,
                          int zh) {
    if (status == TRAIN_STOPPED) {
        if (zh)
            fprintf(stderr, "在第 %d 步停下（共 %d 步）；检查点 %s（用 --resume %s 接着训练）\n", res->step, cfg->iters,
                    res->ckpt_path, res->ckpt_path);
        else
            fprintf(stderr, "stopped at step %d of %d; checkpoint %s (continue with --resume %s)\n", res->step,
                    cfg->iters, res->ckpt_path, res->ckpt_path);
    } else if (status == TRAIN_OK && cfg->iters == 0) {
        if (zh)
            fprintf(stderr, "完成：%s 已转换为 %d 个 key/value 头（%s），未训练；模型已写入 %s\n", cfg->from_path, cfg->kv_heads,
                    opt->convert, opt->out_path);
        else
            fprintf(stderr, "done: %s converted to %d key/value heads (%s), no training; model written to %s\n",
                    cfg->from_path, cfg->kv_heads, opt->convert, opt->out_path);
    } else if (status == TRAIN_OK) {
        char el[32];
        format_duration(el, sizeof el, res->elapsed_s);
        if (zh)
            fprintf(stderr, "完成：%d 步，用时 %s（每秒 %.0f 个 token），最后一批的损失 %.4f，验证集损失 %.4f；模型已写入 %s\n",
                    res->step - res->first_step, el, res->tokens_per_s, res->loss, res->val_loss, opt->out_path);
        else
            fprintf(stderr, "done: %d steps in %s (%.0f tokens/s), last batch loss %.4f, validation estimate %.4f; "
                            "model written to %s\n",
                    res->step - res->first_step, el, res->tokens_per_s, res->loss, res->val_loss, opt->out_path);
    }
}

int gptcmd_train(const Options *opt, Trace *tr) {
    if (!opt->out_path) {
        fileio_error(tr->lang, "train needs --out FILE, the model to write (e.g. --out data/my-gpt.bin)",
                     "`kvdemo train` 需要 --out FILE，即训练好的模型写到哪里（例如 --out data/my-gpt.bin）");
        return 2;
    }
    TrainConfig cfg;
    int rc = train_recipe(&cfg, opt);
    if (rc) return rc;
    char buf[4096];
    cfg.data_path = corpus_path(opt, buf, sizeof buf);
    if (!cfg.data_path || check_readable(opt->lang, "the training text", "训练文本", cfg.data_path)) return 1;
    if (opt->resume_path && check_readable(opt->lang, "the checkpoint", "检查点", opt->resume_path)) return 1;
    if (check_outputs(opt, cfg.data_path)) return 2;
    cfg.out_path = opt->out_path;
    cfg.resume_path = opt->resume_path;
    rc = train_settings(&cfg, opt);
    if (rc) return rc;

    int tty = isatty(STDERR_FILENO);
    TrainView view = {tr, cfg.data_path, tty, tty ? screen_terminal_width(STDERR_FILENO) : 80, 0, -1.0, NULL, 0};
    AtomicFile log;
    char err[1024];
    if (opt->log_path) {
        // opened before the work, so that a log that cannot be written is
        // said at once; committed when the run ends, however it ends
        if (fileio_open(&log, opt->log_path, ERR(tr->lang, err)) != 0) {
            fileio_error(tr->lang, "cannot write the log: %s", "无法写入日志：%s", err);
            return 1;
        }
        fprintf(log.f, "step,train_loss,val_loss,batch_loss,lr,elapsed_s\n");
        view.log = &log;
    }
    TrainResult res;
    int status = train_run(&cfg, on_train_step, &view, &res, ERR(tr->lang, err));
    end_line(&view);
    if (status == TRAIN_FAILED) fileio_error(tr->lang, "%s", "%s", err);
    if (view.log) status = train_log_close(&log, &view, status, opt->out_path);
    train_say_end(status, &res, &cfg, opt, tr->lang == LANG_ZH);
    return status == TRAIN_OK ? 0 : 1;
}

// ----------------------------------------------------------------------------
// kvdemo eval

typedef struct {
    const Trace *tr;
    double last_draw;
    int drawn;
} EvalView;

static void on_eval_batch(int64_t done, int64_t total, void *user) {
    EvalView *v = user;
    double now = timer_now();
    if (done < total && now - v->last_draw < 0.1) return;
    v->last_draw = now;
    v->drawn = 1;
    double pct = total > 0 ? 100.0 * (double)done / (double)total : 100.0;
    if (v->tr->lang == LANG_ZH)
        fprintf(stderr, "\r\033[K评估：第 %lld / %lld 个窗口（%.0f%%）", (long long)done, (long long)total, pct);
    else
        fprintf(stderr, "\r\033[Keval: %lld of %lld windows (%.0f%%)", (long long)done, (long long)total, pct);
    fflush(stderr);
}

static void say_losses(const Trace *tr, double train_loss, double val_loss, const char *data) {
    if (tr->lang == LANG_ZH)
        printf("训练集损失 %.4f，验证集损失 %.4f（每个字符的交叉熵，单位奈特；训练集是 %s 的前 90%%，验证集是后 10%%）\n",
               train_loss, val_loss, data);
    else
        printf("train loss %.4f, validation loss %.4f (nats per character; the first 90%% and the last 10%% of %s)\n",
               train_loss, val_loss, data);
}

// eval on a LLaMA-style model file: its windows start with bos (train_llama.h).
static int llama_eval(const Options *opt, Trace *tr) {
    if (opt->kv_dtype) {
        fileio_error(tr->lang, "--kv-dtype is the char GPT's; %s is a LLaMA-style model",
                     "--kv-dtype 属于字符级 GPT；%s 是 LLaMA 式模型", opt->model_path);
        return 2;
    }
    char buf[4096], err[512];
    const char *data = corpus_path(opt, buf, sizeof buf);
    if (!data || check_readable(opt->lang, "the text", "文本", data)) return 1;
    LlamaModel m;
    if (llama_load(&m, opt->model_path, ERR(tr->lang, err)) != 0) {
        fileio_error(tr->lang, "%s", "%s", err);
        return 1;
    }
    EvalView view = {tr, -1.0, 0};
    int tty = isatty(STDERR_FILENO);
    double train_loss, val_loss;
    int rc = llama_train_eval(&m, data, opt->threads, &train_loss, &val_loss, tty ? on_eval_batch : NULL, &view,
                              ERR(tr->lang, err));
    if (view.drawn) fputs("\r\033[K", stderr);
    llama_free(&m);
    if (rc) {
        fileio_error(tr->lang, "%s", "%s", err);
        return 1;
    }
    say_losses(tr, train_loss, val_loss, data);
    return 0;
}

int gptcmd_eval(const Options *opt, Trace *tr) {
    if (llamacmd_is_llama_file(opt->model_path)) return llama_eval(opt, tr);
    if (opt->kv_dtype) return kvcmd_eval(opt);   // through the cache (lesson 12)
    GptModel m;
    int rc = gptsetup_model(&m, opt, 0, NULL);
    if (rc) return rc;
    char buf[4096];
    const char *data = corpus_path(opt, buf, sizeof buf);
    double train_loss, val_loss;
    char err[512];
    if (!data || check_readable(opt->lang, "the text", "文本", data)) {
        gpt_free(&m);
        return 1;
    }
    // A progress line on a terminal only: a pipe gets the result alone.
    EvalView view = {tr, -1.0, 0};
    int tty = isatty(STDERR_FILENO);
    rc = train_eval_progress(&m, data, opt->threads, &train_loss, &val_loss, tty ? on_eval_batch : NULL, &view,
                             ERR(tr->lang, err));
    if (view.drawn) fputs("\r\033[K", stderr);
    gpt_free(&m);
    if (rc) {
        fileio_error(tr->lang, "%s", "%s", err);
        return 1;
    }
    say_losses(tr, train_loss, val_loss, data);
    return 0;
}
