// kvcmd — --bug and --kv-dtype on the command line (lessons 11 and 12 as
// tools): the variant they ask for, and `kvdemo eval --kv-dtype TYPE`.
#include "kvcmd.h"

#include "fileio.h"
#include "gptsetup.h"
#include "ops.h"
#include "paths.h"
#include "progress.h"
#include "train.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int kvcmd_variant(GptVariant *v, int *set, const Options *opt) {
    memset(v, 0, sizeof *v);
    *set = 0;
    // --bug and --kv-dtype are choices: cli.c has refused any other word
    // with its list (what is left is a mistake of kvdemo's, if the lists
    // there and in kvvariant.c, kvquant.c ever differ).
    if (opt->bug) {
        int known = kvvariant_bug_parse(&v->bug, opt->bug) == 0;
        assert(known);
        (void)known;
        if (v->bug == KV_BUG_NO_ROLLBACK || v->bug == KV_BUG_OFF_BY_ONE) {
            fileio_error(opt->lang, "--bug %s breaks speculative decoding's rollback, which only lesson 11 runs with it: "
                         "kvdemo lesson 11 --bug %s",
                         "--bug %s 破坏的是投机解码的回退，只有第 11 课会带着它运行：kvdemo lesson 11 --bug %s",
                         opt->bug, opt->bug);
            return 2;
        }
        if (opt->runs == RUN_NOCACHE) {
            fileio_error(opt->lang, "--bug %s breaks the cached path, so it means nothing with --no-cache; drop one of them",
                         "--bug %s 破坏的是使用缓存的路径，和 --no-cache 一起给没有意义；去掉其中一个", opt->bug);
            return 2;
        }
        *set = 1;
    }
    if (opt->kv_dtype) {
        int known = kvquant_parse(&v->kv_dtype, opt->kv_dtype) == 0;
        assert(known);
        (void)known;
        *set = 1;
    }
    v->key_group = KV_KEY_GROUP;
    if (*set && opt->attention && !strcmp(opt->attention, "flash")) {
        fileio_error(opt->lang, "--bug and --kv-dtype change the plain attention; drop --attention flash",
                     "--bug 和 --kv-dtype 改的是普通注意力；去掉 --attention flash");
        return 2;
    }
    return 0;
}

// eval --kv-dtype's progress line: the windows done, as eval's own.
static void on_window(int64_t done, int64_t total, void *user) {
    ProgressLine *p = user;
    if (done < total && !progress_line_every(p)) return;
    progress_line_show(p, "eval --kv-dtype: %lld of %lld windows (%.0f%%)", "评估（--kv-dtype）：第 %lld / %lld 个窗口（%.0f%%）",
                       (long long)done, (long long)total, 100.0 * (double)done / (double)total);
}

int kvcmd_eval(const Options *opt) {
    GptVariant v;
    int set;
    int rc = kvcmd_variant(&v, &set, opt);
    if (rc) return rc;
    GptModel m;
    rc = gptsetup_model(&m, opt, 0, NULL);
    if (rc) return rc;
    char buf[4096];
    const char *data = opt->data_path;
    if (!data) {
        data = paths_shipped("data/tinyshakespeare.txt", buf, sizeof buf);
        if (access(data, R_OK) != 0) {
            corpus_missing(opt->lang, "no text to evaluate on", "没有用来评估的文本");
            gpt_free(&m);
            return 1;
        }
    }
    TrainText text;
    char err[512];
    if (train_text_load(&text, data, m.vocab, m.cfg.V, ERR(opt->lang, err)) != 0) {
        fileio_error(opt->lang, "%s", "%s", err);
        gpt_free(&m);
        return 1;
    }
    GptConfig g = m.cfg;
    int64_t n_train = train_text_split(&text);   // the validation split: the last 10%, as kvdemo train takes it
    double loss = 0;
    Pool *pool = NULL;   // --threads, for the evaluation's passes
    ProgressLine progress;
    progress_line_init(&progress, opt->lang == LANG_ZH);
    if (text.n - n_train < g.T + 1) {
        fileio_error(opt->lang, "%s is too short: its last 10%% needs more than %d characters",
                     "%s 太短：它最后 10%% 的文本要多于 %d 个字符", data, g.T);
        rc = 1;
    } else if (!(pool = pool_new_for(opt->threads, gpt_row_work(g)))) {
        fileio_error(opt->lang, "could not start %d threads", "无法启动 %d 个线程", ops_threads_asked(opt->threads));
        rc = 1;
    } else if (kvvariant_eval_each(&loss, &m, &v, text.tokens, pool, n_train, text.n, 0, on_window, &progress) != 0) {
        progress_line_clear(&progress);
        fileio_error(opt->lang, "out of memory for evaluation", "评估时内存不足");
        rc = 1;
    } else {
        progress_line_clear(&progress);
        double bytes = kvquant_bytes_per_token(v.kv_dtype, g.L, g.C, g.H, v.key_group);
        double fp32 = kvquant_bytes_per_token(KV_FP32, g.L, g.C, g.H, v.key_group);
        if (opt->lang == LANG_ZH)
            printf("验证集损失 %.4f（每个字符的交叉熵，单位奈特），缓存存为 %s：每个 token %.0f 字节，是 fp32 的 %.1f%%"
                   "（fp32 为 %.0f 字节）；%lld 个长 %d 的窗口，取自 %s 的最后 10%%\n",
                   loss, kvquant_name(v.kv_dtype), bytes, 100.0 * bytes / fp32, fp32,
                   (long long)((text.n - n_train - 1) / g.T), g.T, data);
        else
            printf("validation loss %.4f (nats per character) with the cache kept as %s: %.0f bytes per token, %.1f%% of fp32's %.0f;"
                   " %lld windows of %d, the last 10%% of %s\n",
                   loss, kvquant_name(v.kv_dtype), bytes, 100.0 * bytes / fp32, fp32,
                   (long long)((text.n - n_train - 1) / g.T), g.T, data);
    }
    pool_free(pool);
    train_text_free(&text);
    gpt_free(&m);
    return rc;
}
