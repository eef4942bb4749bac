// train_eval — measuring a char GPT with training's forward pass: its loss
// on the text (the `eval` command and the validation estimate of training)
// and the speed of whole training steps (`bench`).
//
// Legend as in train.h: B batch, T context, V vocabulary, P parameters.
#include "train.h"

#include "fileio.h"
#include "rng.h"
#include "timer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int train_eval(const GptModel *model, const char *data_path, int threads, double *train_loss,
               double *val_loss, Err err) {
    return train_eval_progress(model, data_path, threads, train_loss, val_loss, NULL, NULL, err);
}

int train_eval_progress(const GptModel *model, const char *data_path, int threads, double *train_loss,
                        double *val_loss, TrainEvalProgressFn progress, void *user, Err err) {
    TrainText text;
    if (train_text_load(&text, data_path, model->vocab, model->cfg.V, err) != 0) return -1;
    GptConfig g = model->cfg;
    int64_t n_train = train_text_split(&text);
    if (n_train < g.T + 1 || text.n - n_train < g.T + 1) {
        fileio_fail2(err, "%s is too short: each split needs more than %d characters",
                     "%s 太短：训练集和验证集各要多于 %d 个字符",
                 data_path, g.T);
        train_text_free(&text);
        return -1;
    }
    int B = 8;
    Pool *pool = pool_new_for(threads, gpt_row_work(g));
    TrainState *s = pool ? train_state_new(g, B, pool) : NULL;
    int32_t *io = malloc(sizeof(int32_t) * 2 * (size_t)B * g.T);
    if (!s || !io) {
        fileio_fail2(err, "out of memory for evaluation", "评估时内存不足");
        free(io);
        train_state_free(s);
        pool_free(pool);
        train_text_free(&text);
        return -1;
    }
    int64_t val_windows = (text.n - n_train - 1) / g.T;
    int64_t train_windows = (n_train - 1) / g.T < val_windows ? (n_train - 1) / g.T : val_windows;
    int64_t total = (val_loss ? val_windows : 0) + (train_loss ? train_windows : 0);
    if (val_loss)
        *val_loss = train_loss_windows_progress(s, model->params, text.tokens, n_train, text.n, 0, io,
                                               io + B * g.T, progress, user, 0, total);
    // the training split is 9 times longer: as many windows as validation
    // has, spread evenly over it, give the same precision in a tenth of the time
    if (train_loss)
        *train_loss = train_loss_windows_progress(s, model->params, text.tokens, 0, n_train, val_windows,
                                                 io, io + B * g.T, progress, user,
                                                 val_loss ? val_windows : 0, total);
    free(io);
    train_state_free(s);
    pool_free(pool);
    train_text_free(&text);
    return 0;
}

// ---------------------------------------------------------------------------
// The speed of training, for `make bench`: whole steps (forward, backward,
// AdamW) on random tokens, after one step that is not timed (first touch of
// the memory).

int train_benchmark(GptConfig cfg, int B, int steps, int threads, double *tokens_per_s, Err err) {
    TrainConfig r;
    train_config_default(&r, "seed");
    TrainBuffers b;
    if (train_buffers_new(&b, cfg, B, threads) != 0 || train_init_params(b.params, cfg, 1) != 0) {
        train_buffers_free(&b);
        fileio_fail2(err, "out of memory for the training benchmark", "训练测速时内存不足");
        return -1;
    }
    size_t P = gpt_num_params(cfg);
    memset(b.m, 0, sizeof(float) * 2 * P);   // m and v
    uint64_t rng = 1;
    for (size_t i = 0; i < 2 * (size_t)B * cfg.T; i++)   // inputs and targets
        b.inputs[i] = (int32_t)(rng_next(&rng) % (uint64_t)cfg.V);
    double t0 = 0.0;
    for (int step = 0; step <= steps; step++) {
        if (step == 1) t0 = timer_now();
        train_forward(b.s, b.params, b.inputs, b.targets, B);
        memset(b.grads, 0, sizeof(float) * P);
        train_backward(b.s, b.grads, b.params, b.inputs, b.targets, B);
        train_adamw_update(b.params, b.m, b.v, b.grads, b.decay, b.partial, &r, r.lr, step, b.pool, P);
    }
    *tokens_per_s = steps > 0 ? (double)steps * B * cfg.T / (timer_now() - t0) : 0.0;
    train_buffers_free(&b);
    return 0;
}
