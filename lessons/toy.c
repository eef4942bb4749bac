// toy — what the lessons on the 4-dim example share.
#include "toy.h"

#include "fileio.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int toy_load(ToyData *data, const Options *opt, const char *lesson, int min_tokens) {
    char path_buf[4096], err[512];
    const char *path = opt->data_path ? opt->data_path : toydata_default_path(path_buf, sizeof path_buf);
    if (toydata_load(data, path, ERR(opt->lang, err))) {
        fileio_error(opt->lang, "%s", "%s", err);
        return -1;
    }
    if (data->n < min_tokens) {
        fileio_error(opt->lang, "%s: lesson %s needs at least %d tokens (rows of X), the file has %d",
                     "%s：第 %s 课至少需要 %d 个 token（X 的行），这个文件只有 %d 个", path, lesson, min_tokens, data->n);
        toydata_free(data);
        return -1;
    }
    return 0;
}

int toy_begin(ToyData *data, AttnStep *steps, int n, int cap, const Options *opt, const char *lesson,
              int min_tokens) {
    if (toy_load(data, opt, lesson, min_tokens)) return -1;
    for (int i = 0; i < n; i++) {
        if (attn_step_init(&steps[i], cap, data->d, data->dk, data->dv)) {
            fileio_error(opt->lang, "out of memory", "内存不足");
            toy_end(data, steps, i);
            return -1;
        }
    }
    return 0;
}

void toy_end(ToyData *data, AttnStep *steps, int n) {
    for (int i = 0; i < n; i++) attn_step_free(&steps[i]);
    toydata_free(data);
}

void toy_show_weights(Trace *tr, const ToyData *data) {
    Tensor wq = tensor_view2(data->W_Q, data->d, data->dk);
    Tensor wk = tensor_view2(data->W_K, data->d, data->dk);
    Tensor wv = tensor_view2(data->W_V, data->d, data->dv);
    if (tr->level >= TRACE_FULL) trace_say(tr, "The weights, as in the article:\n", "权重矩阵（与文章相同）：\n");
    trace_tensor(tr, TRACE_FULL, "W_Q", NULL, &wq, NULL, HEAT_NONE);
    trace_tensor(tr, TRACE_FULL, "W_K", NULL, &wk, NULL, HEAT_NONE);
    trace_tensor(tr, TRACE_FULL, "W_V", NULL, &wv, NULL, HEAT_NONE);
}

const char *toy_tokens(const ToyData *data, int first, int n, char *buf, int size) {
    buf[0] = '\0';
    for (int i = first; i < first + n && i < data->n; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, (size_t)size - len, "%s", data->tokens[i]);
    }
    return buf;
}

const char *toy_scale(const ToyData *data, char *buf, int size) {
    float s = data->scale;
    if (s == floorf(s) && s < 1e6f) snprintf(buf, (size_t)size, "%d", (int)s);
    else if (s == sqrtf((float)data->dk)) snprintf(buf, (size_t)size, "math.sqrt(%d)", data->dk);
    else snprintf(buf, (size_t)size, "%g", (double)s);
    return buf;
}

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#endif
const char *toy_caption(const ToyData *data, const char *fmt, char *buf, int size) {
    char scale[32];
    snprintf(buf, (size_t)size, fmt, toy_scale(data, scale, sizeof scale));
    return buf;
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

void toy_precision_note(Trace *tr, int exp_differs) {
#if defined(__FMA__)
    int fma = 1;
#else
    int fma = 0;
#endif
    if (tr->format != FORMAT_TEXT || tr->precision < 7 || (fma && !exp_differs)) return;
    trace_say(tr, "At this precision the last digit of a value may differ by one from what PyTorch prints:",
              "在这个精度下，个别数值的最后一位可能与 PyTorch 打印的差 1：");
    if (!fma)
        trace_say(tr, "  this build of kvdemo has no FMA, so its matrix products round twice where PyTorch's round once;",
                  "  这个 kvdemo 的构建没有 FMA，矩阵乘法每步舍入两次，PyTorch 只舍入一次；");
    if (exp_differs)
        trace_say(tr, "  PyTorch's exp and the C library's differ in the last bit for one weight of the run without the mask;",
                  "  对于不加掩码那次运行中的一个权重，PyTorch 的 exp 与 C 库的 exp 最后一位不同；");
    trace_say(tr, "  the values are the same mathematically, and cached and uncached runs stay bit-identical (docs/lesson-2.md).",
              "  数学上完全相同，使用缓存与不使用缓存的结果仍然逐位相同（见 docs/zh/lesson-2.md）。");
}

void toy_show_scale(Trace *tr, const ToyData *data) {
    trace_value(tr, "scale", data->scale, "", NULL, NULL);
}
