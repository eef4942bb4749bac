// lesson 3 — KV Cache 在 Llama 推理流程中应用 (the KV Cache article, section 3.1)
//
// The article's LLaMA.generate on a small LLaMA-style model (src/model/llama.h):
//
//   step 1-3  prompt_tokens = encode(prompt, bos=True); min_prompt_size,
//             max_prompt_size, total_len; tokens filled with pad_id, then
//             the prompts; input_text_mask = tokens != pad_id.
//   step 4    for cur_pos in range(start_pos, total_len):
//                 logits = model.forward(tokens[:, prev_pos:cur_pos], prev_pos)
//             Transformer.forward builds the mask only when seqlen > 1;
//             Attention.forward writes cache_k[:bsz, start_pos:start_pos+seqlen]
//             and reads cache_k[:bsz, :start_pos+seqlen]; sample_top_p picks
//             the next token unless input_text_mask keeps a prompt token.
//   step 5    decode each row, cut at len(prompt) + max_gen_len and at eos.
//
// `--no-cache` feeds tokens[:, 0:cur_pos] at position 0 every step: the same
// logits bit for bit, more rows computed. (LLaMA's forward still writes its
// preallocated cache then; it just never reuses what it wrote.) Each run has
// its own state (cache and activations) on the one model. The default
// prompts differ in length, so that start_pos = min_prompt_size, the padding,
// input_text_mask and the longer prompt read in through the cache all show.
// Both runs, then a comparison, by default. The model is the shipped one,
// trained on tinyshakespeare (data/tinyshakespeare-llama-mha.bin), with two
// prompts from the corpus; its vocabulary has no Chinese characters, so the
// article's prompts 天气 / 你好，今天 run with `--init random` on random
// weights (the text is noise there, the flow is the lesson).
// At --trace full each step also shows layer 0's attention values for head 0
// of each batch row: scores[b, 0] after the softmax, and keys[b, :, 0] /
// values[b, :, 0] as read from the cache.
#include "lessons.h"
#include "fileio.h"
#include "llama.h"
#include "llama2c.h"
#include "llamacmd.h"
#include "paths.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// max_gen_len: a few tokens on the article's prompts (the flow is the
// lesson there), a line of verse on the corpus's.
enum { ARTICLE_GEN_LEN = 4, CORPUS_GEN_LEN = 24 };
// Bytes of one row label: up to 5 ("<eos>") for each of T tokens.
#define LABEL_BYTES(T) (6 * (size_t)(T) + 1)

// The article's prompts, and two of different lengths from tinyshakespeare.
static const char *const ARTICLE_PROMPTS[] = {"天气", "你好，今天"};
static const char *const CORPUS_PROMPTS[] = {"ROMEO:", "First Citizen:"};

// Where the lesson's weights come from.
typedef enum { MODEL_RANDOM, MODEL_SHIPPED, MODEL_FILE } ModelKind;

// What the step hook needs; scratch buffers are allocated before the loop.
typedef struct {
    Trace *tr;
    const LlamaModel *m;
    const LlamaState *st;   // the state of the run being shown
    const LlamaGeneration *g;
    int B;             // max_batch_size of both runs' states
    float *ids;        // (B, T) token ids as floats, for printing
    char *labels;      // (B, LABEL_BYTES(T)) one row label each
    const char **rows; // (B) pointers into labels
    int use_cache;     // the run being shown
    int eos_rows;      // rows the last run's decode cut at eos
    // At --trace full only (else NULL): layer 0's attention values.
    float *keep;       // (B, T, T) keep_scores of both states: scores[:, 0] of the last forward
    float *head;       // (T, D) keys[b, :, 0] or values[b, :, 0], copied out of the cache
    char *tok;         // (T, 8) one token name per row
    const char **tok_rows; // (T) pointers into tok
    float *last_nc;    // (T, B, T) per step, scores[:, 0, -1] of the run without the cache
    int steps_nc;      // steps stored in last_nc
    float *last_c;     // (B, T) scores[:, 0, -1] of the run with the cache, this step
} Show;

// A token as a class reads it: its character, or the name of a special
// token (<pad>, <bos>, <eos>), which has no text.
static const char *token_name(char *buf, size_t size, const LlamaModel *m, int id) {
    static const char *const special[] = {"<pad>", "<bos>", "<eos>"};
    if (id == LLAMA_PAD_ID || id == LLAMA_BOS_ID || id == LLAMA_EOS_ID) snprintf(buf, size, "%s", special[id]);
    else {
        const char *t = llama_token_text(buf, m, id);   // buf, or a piece of llama2.c's tokenizer
        if (t != buf && (unsigned char)t[0] >= 0x80 && !t[1]) {
            snprintf(buf, size, "<0x%02X>", (unsigned char)t[0]);   // a byte token: a part of a character
        } else if (t != buf) {
            // a piece longer than buf is cut where a character starts
            size_t n = strlen(t);
            if (n >= size)
                for (n = size - 1; n > 0 && ((unsigned char)t[n] & 0xC0) == 0x80;) n--;
            memcpy(buf, t, n);
            buf[n] = '\0';
        }
    }
    return buf;
}

// token_name with a newline shown as \n, so that a narration line stays one line.
static const char *token_shown(char *buf, size_t size, const LlamaModel *m, int id) {
    token_name(buf, size, m, id);
    if (!strcmp(buf, "\n")) snprintf(buf, size, "\\n");
    return buf;
}

// A (bsz, n) Tensor of the token ids tokens[:, from:from+n], with each row
// labelled by its text.
static Tensor token_slice(Show *s, const int *tokens, int stride, int bsz, int from, int n) {
    int T = s->m->cfg.max_seq_len;
    for (int b = 0; b < bsz; b++) {
        for (int i = 0; i < n; i++) s->ids[b * n + i] = (float)tokens[b * stride + from + i];
        // The label names special tokens and shows a newline as \n, so that
        // each row stays on its line.
        char *label = s->labels + (size_t)b * LABEL_BYTES(T);
        size_t len = 0;
        label[0] = '\0';
        for (int i = 0; i < n; i++) {
            char tok[8];
            token_name(tok, sizeof tok, s->m, tokens[b * stride + from + i]);
            const char *shown = !strcmp(tok, "\n") ? "\\n" : tok;
            size_t k = strlen(shown);
            if (len + k + 1 > LABEL_BYTES(T)) break;
            memcpy(label + len, shown, k + 1);
            len += k;
        }
        s->rows[b] = label;
    }
    return tensor_view2(s->ids, bsz, n);
}

// ----------------------------------------------------------------------------
// The model and the cache it preallocates

// The model: the shipped one trained on tinyshakespeare, --model FILE
// (llama2.c's with --tokenizer), or with --init random the default shape
// with random weights. Sets *kind; returns 0 or the exit status.
static int load_model(LlamaModel *m, ModelKind *kind, const Options *opt) {
    char err[512], buf[4096];
    if (opt->tokenizer_path && !opt->model_path) {
        fileio_error(opt->lang, "lesson 3: --tokenizer goes with --model FILE, llama2.c's checkpoint",
                     "第 3 课：--tokenizer 要和 --model FILE（llama2.c 的模型文件）一起用");
        return 2;
    }
    if (opt->model_path && opt->init) {
        fileio_error(opt->lang, "--model and --init exclude each other; give one", "--model 和 --init 不能同时给；只给其中一个");
        return 2;
    }
    if (!opt->init) {
        *kind = opt->model_path ? MODEL_FILE : MODEL_SHIPPED;
        const char *path = opt->model_path ? opt->model_path : paths_shipped(LLAMA_SHIPPED_MODEL, buf, sizeof buf);
        if (llama_load_any(m, path, opt->tokenizer_path, ERR(opt->lang, err)) != 0) {
            if (*kind == MODEL_SHIPPED)
                fileio_error(opt->lang, "lesson 3: %s; give --model FILE or --init random", "第 3 课：%s；请给 --model FILE 或 --init random", err);
            else fileio_error(opt->lang, "%s", "%s", err);
            return 1;
        }
        return 0;
    }
    *kind = MODEL_RANDOM;
    LlamaConfig cfg = llama_config_default();
    if (llama_new(m, &cfg, ERR(opt->lang, err)) != 0) {
        fileio_error(opt->lang, "lesson 3: %s", "第 3 课：%s", err);
        return 1;
    }
    llama_vocab_default(m);
    llama_init_random(m, opt->seed);
    return 0;
}

// 1 when every prompt encodes with the model's tokenizer and fits its context.
static int prompts_fit(const LlamaModel *m, const char *const *prompts, int n, int *scratch) {
    for (int k = 0; k < n; k++)
        if (llama_encode(scratch, m, prompts[k], 1, 0, m->cfg.max_seq_len, ERR_NONE) < 0) return 0;
    return 1;
}

// The prompts: --prompt, else the corpus's on a trained model and the
// article's on the random one. A model file whose vocabulary lacks the
// corpus's characters gets the article's, as before there was a trained model.
static const char *const *pick_prompts(int *n, int *gen_len, const LlamaModel *m, ModelKind kind,
                                       const Options *opt, int *scratch) {
    *n = opt->n_prompts > 0 ? opt->n_prompts : 2;
    int article = kind == MODEL_RANDOM ||
                  (kind == MODEL_FILE && !prompts_fit(m, CORPUS_PROMPTS, 2, scratch) &&
                   prompts_fit(m, ARTICLE_PROMPTS, 2, scratch));
    *gen_len = opt->steps > 0 ? opt->steps : article ? ARTICLE_GEN_LEN : CORPUS_GEN_LEN;
    if (opt->n_prompts > 0) return opt->prompts;
    return article ? ARTICLE_PROMPTS : CORPUS_PROMPTS;
}

// One character of a vocabulary as a class types it: a newline as \n.
static size_t put_char(char *out, uint32_t cp) {
    if (cp == '\n') return (size_t)sprintf(out, "\\n");
    return (size_t)utf8_encode((unsigned char *)out, cp);
}

// The characters of a character-level vocabulary (sorted by code point, as
// the shipped ones are), runs of three or more written as A-Z, for the
// error line about a character it lacks.
static void vocab_chars(char *out, size_t size, const LlamaModel *m) {
    size_t at = 0;
    out[0] = '\0';
    for (int v = LLAMA_EOS_ID + 1; v < m->cfg.vocab_size && at + 20 < size; v++) {
        int end = v;
        while (end + 1 < m->cfg.vocab_size && m->vocab[end + 1] == m->vocab[end] + 1) end++;
        at += put_char(out + at, m->vocab[v]);
        if (end - v >= 2) {
            out[at++] = '-';
            at += put_char(out + at, m->vocab[end]);
            v = end;
        }
        out[at] = '\0';
    }
}

// 1 when prompt has a character the model's vocabulary lacks (valid UTF-8 only).
static int has_unknown_char(const LlamaModel *m, const char *prompt) {
    if (m->bpe) return 0;   // llama2.c's tokenizer falls back to bytes
    for (const unsigned char *s = (const unsigned char *)prompt; *s;) {
        uint32_t cp;
        int len = utf8_decode(&cp, s, strlen((const char *)s)), known = 0;
        if (len == 0) return 0;
        for (int v = LLAMA_EOS_ID + 1; v < m->cfg.vocab_size && !known; v++) known = m->vocab[v] == cp;
        if (!known) return 1;
        s += len;
    }
    return 0;
}

// The model's shape and the cache each layer preallocates (the article's
// Attention.__init__: cache_k = torch.zeros((max_batch_size, max_seq_len,
// n_local_heads, head_dim))).
static void show_model(Trace *tr, const LlamaModel *m, int B, ModelKind kind, const LlamaGenOptions *base) {
    const LlamaConfig *c = &m->cfg;
    int T = c->max_seq_len;
    trace_sayf(tr,
               "A small LLaMA-style model: dim %d, n_layers %d, n_local_heads %d (query heads), n_kv_heads %d,\n"
               "head_dim %d, vocab_size %d.\n%s\n",
               "一个小型 LLaMA 式模型：dim %d，n_layers %d，n_local_heads %d（查询头），n_kv_heads %d，\n"
               "head_dim %d，vocab_size %d。\n%s\n",
               c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->vocab_size,
               kind == MODEL_FILE ? trace_text(tr, "Its weights come from --model.", "权重来自 --model。")
               : kind == MODEL_SHIPPED
                   ? trace_text(tr,
                                "Its weights were trained on tinyshakespeare (" LLAMA_SHIPPED_MODEL ", docs/training.md):\n"
                                "the continuations below are its own. Its vocabulary is pad, bos, eos and the corpus's\n"
                                "characters, none of them Chinese: the article's prompts 天气 / 你好 run on random weights\n"
                                "with --init random.",
                                "权重在 tinyshakespeare 上训练过（" LLAMA_SHIPPED_MODEL "，见 docs/training.md）：\n"
                                "下面的续写是它自己写的。它的词表是 pad、bos、eos 加上语料里的字符，没有汉字：\n"
                                "文章的提示词“天气”/“你好”要用 --init random 在随机权重上运行。")
                   : trace_text(tr,
                                "Its weights are random: the text it writes is noise. The flow of "
                                "tokens, positions and cache slots is the lesson.",
                                "权重是随机的：它写出的文字没有意义。要看的是 token、位置和缓存槽位的流动。"));
    int cache_shape[4] = {B, T, c->n_kv_heads, c->head_dim};
    trace_say(tr, "Each layer preallocates its cache (max_batch_size, max_seq_len, n_kv_heads, head_dim):",
              "每一层预先分配缓存（max_batch_size, max_seq_len, n_kv_heads, head_dim）：");
    trace_shape(tr, "cache_k", 4, cache_shape);
    trace_shape(tr, "cache_v", 4, cache_shape);
    trace_sayf(tr, "temperature %g, top_p %g, max_gen_len %d%s\n",
               "temperature %g，top_p %g，max_gen_len %d%s\n", base->temperature, base->top_p,
               base->max_gen_len,
               base->temperature > 0 ? ""
                                    : trace_text(tr, " (temperature 0: argmax)",
                                                 "（temperature 0：取 argmax）"));
}

// ----------------------------------------------------------------------------
// Steps 1-3 of generate, before the loop: the numbers the loop starts from

static int show_setup(Show *s, int *scratch, const char *const *prompts, int n_prompts,
                      int max_gen_len) {
    Trace *tr = s->tr;
    const LlamaConfig *c = &s->m->cfg;
    int T = c->max_seq_len, min = T, max = 0, len[MAX_PROMPTS];
    char err[512];
    trace_heading(tr, "Steps 1-3: prompt_tokens, tokens, input_text_mask",
                  "第 1-3 步：prompt_tokens、tokens、input_text_mask");
    // prompt_tokens = [self.tokenizer.encode(x, bos=True, eos=False) for x in prompts]
    for (int k = 0; k < n_prompts; k++) {
        len[k] = llama_encode(scratch + (size_t)k * T, s->m, prompts[k], 1, 0, T, ERR(tr->lang, err));
        if (len[k] < 0 && has_unknown_char(s->m, prompts[k])) {
            char valid[1024];
            vocab_chars(valid, sizeof valid, s->m);
            fileio_error(tr->lang, "lesson 3: %s; valid: %s%s", "第 3 课：%s；可用的字符：%s%s", err, valid,
                         !has_unknown_char(s->m, "天气") ? ""
                         : trace_text(tr, " (the article's 天气 / 你好: --init random)",
                                      "（文章的“天气”/“你好”：用 --init random）"));
            return -1;
        }
        if (len[k] < 0) {
            fileio_error(tr->lang, "lesson 3: %s", "第 3 课：%s", err);
            return -1;
        }
        if (len[k] < min) min = len[k];
        if (len[k] > max) max = len[k];
    }
    int total_len = max_gen_len + max < T ? max_gen_len + max : T;
    trace_count(tr, "bsz", n_prompts, "bsz = len(prompts)", "bsz = len(prompts)");
    trace_count(tr, "min_prompt_size", min, "min_prompt_size (bos included)",
                "min_prompt_size（含 bos）");
    trace_count(tr, "max_prompt_size", max, "max_prompt_size", "max_prompt_size");
    trace_count(tr, "total_len", total_len,
                "total_len = min(max_seq_len, max_gen_len + max_prompt_size)",
                "total_len = min(max_seq_len, max_gen_len + max_prompt_size)");
    // tokens = torch.full((bsz, total_len), self.tokenizer.pad_id); tokens[k, : len(t)] = t
    for (int k = 0; k < n_prompts; k++)
        for (int i = 0; i < total_len; i++)
            s->ids[k * total_len + i] = i < len[k] ? (float)scratch[(size_t)k * T + i] : LLAMA_PAD_ID;
    for (int k = 0; k < n_prompts; k++) {
        char *label = s->labels + (size_t)k * LABEL_BYTES(T);
        snprintf(label, LABEL_BYTES(T), "bos + \"%s\"", prompts[k]);
        s->rows[k] = label;
    }
    Tensor tokens = tensor_view2(s->ids, n_prompts, total_len);
    trace_tensor_kind(tr, TRACE_SUMMARY, "tokens", "tokens",
                      "tokens = torch.full((bsz, total_len), self.tokenizer.pad_id); "
                      "tokens[k, : len(t)] = torch.tensor(t)",
                      &tokens, s->rows, HEAT_NONE, TRACE_INT);
    // input_text_mask = tokens != self.tokenizer.pad_id
    for (int i = 0; i < n_prompts * total_len; i++) s->ids[i] = s->ids[i] != LLAMA_PAD_ID;
    Tensor itm = tensor_view2(s->ids, n_prompts, total_len);
    trace_tensor_kind(tr, TRACE_SUMMARY, "input_text_mask", "input_text_mask",
                      "input_text_mask = tokens != self.tokenizer.pad_id", &itm, s->rows, HEAT_NONE, TRACE_BOOL);
    trace_count(tr, "start_pos", min, "start_pos = min_prompt_size", "start_pos = min_prompt_size");
    trace_say(tr, "", "");
    return 0;
}

// ----------------------------------------------------------------------------
// Step 4: one step of the loop, as the hook sees it

// Row labels of the tokens at positions from .. from+n-1 of batch row b.
static const char *const *token_rows(Show *s, const LlamaStep *st, int b, int from, int n) {
    for (int i = 0; i < n; i++) {
        char *label = s->tok + (size_t)i * 8;
        token_name(label, 8, s->m, st->tokens[(size_t)b * st->total_len + from + i]);
        if (!strcmp(label, "\n")) strcpy(label, "\\n");
        s->tok_rows[i] = label;
    }
    return s->tok_rows;
}

// keys[b, :, 0] or values[b, :, 0] of layer 0 as Attention.forward read them:
// cache_k[:bsz, :S] (bsz, S, n_kv_heads, head_dim), key/value head 0.
static Tensor cache_head(Show *s, const float *cache, int b, int S) {
    const LlamaConfig *c = &s->m->cfg;
    int G = c->n_kv_heads, D = c->head_dim, T = c->max_seq_len;
    for (int j = 0; j < S; j++)
        memcpy(s->head + (size_t)j * D, cache + ((size_t)b * T + j) * G * D, sizeof(float) * D);
    return tensor_view2(s->head, S, D);
}

// --trace full: the values of layer 0's attention at this step, as the
// article's Attention.forward computes them, for head 0 of each batch row.
// With the cache, the one new row of scores is compared with the last row
// the run without the cache computed at the same step.
// A long run shows layer 0's values at steps 1, 2 and the last only (a
// screen each, two runs of them would be thousands of lines); a run of at
// most FULL_VALUE_STEPS steps (the article's prompts) shows every step's.
enum { FULL_VALUE_STEPS = 8, LAST_ROWS = 4 };

// The text on a screen (not JSON, not a page): where a long run is cut.
static int on_screen(const Trace *tr) { return tr->format == FORMAT_TEXT && tr->doc == FORMAT_TEXT; }
static int values_shown(const LlamaStep *st) {
    int first_pos = st->cur_pos - st->step + 1, n_steps = st->total_len - first_pos;
    return n_steps <= FULL_VALUE_STEPS || st->step <= 2 || st->cur_pos == st->total_len - 1;
}

// Layer 0's values of one step, head 0, for each batch row: its scores
// after the softmax and the keys and values read from the cache.
static void show_values(Show *s, const LlamaStep *st) {
    Trace *tr = s->tr;
    const LlamaForwardInfo *f = st->fwd;
    const LlamaConfig *c = &s->m->cfg;
    int S = f->read_to, n = f->seqlen;
    trace_sayf(tr,
               "The values of layer 0, head 0, for each batch row b:\n"
               "  scores[b, 0] after the softmax: (seqlen, start_pos + seqlen) = (%d, %d), a row per token fed;\n"
               "  keys[b, :, 0], values[b, :, 0] as read from the cache: (start_pos + seqlen, head_dim) = (%d, %d),\n"
               "  a row per position.",
               "第 0 层、第 0 个头的数值，每个批次行 b 各一组：\n"
               "  softmax 之后的 scores[b, 0]：(seqlen, start_pos + seqlen) = (%d, %d)，每个输入的 token 一行；\n"
               "  从缓存读出的 keys[b, :, 0]、values[b, :, 0]：(start_pos + seqlen, head_dim) = (%d, %d)，\n"
               "  每个位置一行。",
               n, S, S, c->head_dim);
    // The positions as the cache sees them (marked in a document): with it,
    // those before start_pos are read from the cache and the fed ones are
    // new; without it each step after the first computes all again but the
    // newest position.
    int old = s->use_cache ? f->write_from : st->step > 1 ? S - 1 : 0;
    TraceRowRole how = s->use_cache ? ROW_REUSED : ROW_RECOMPUTED;
    // The text on a screen shows batch row 0, and at the last step of a
    // long run only its newest rows (LAST_ROWS of keys and values, the last
    // row of scores); JSON and the pages carry every row of every batch row.
    int json = !on_screen(tr), bsz = json ? st->bsz : 1;
    int cut = !json && st->step > 2 && S > LAST_ROWS;
    int k0 = cut ? S - LAST_ROWS : 0, q0 = cut ? n - 1 : 0;
    if (!json && st->bsz > 1)
        trace_say(tr, cut ? "Batch row 0, its newest rows (the others as at step 2; the JSON and the page formats have all):"
                          : "Batch row 0 (row 1 has the same shapes; the JSON and the page formats have its values):",
                  cut ? "第 0 个批次行，只看最新的几行（其余同第 2 步；网页和机读格式给出全部）："
                      : "第 0 个批次行（第 1 行形状相同；网页和机读格式给出它的数值）：");
    char name[64];
    for (int b = 0; b < bsz; b++) {
        Tensor probs = tensor_view2(s->keep + ((size_t)b * n + q0) * S, n - q0, S);
        snprintf(name, sizeof name, cut ? "scores[%d, 0, -1:]" : "scores[%d, 0]", b);
        trace_cache_rows(tr, s->use_cache ? 0 : old > q0 ? old - q0 : 0, how);
        trace_tensor_as(tr, TRACE_FULL, name, name, "scores = F.softmax(scores.float(), dim=-1).type_as(xq)", &probs,
                        token_rows(s, st, b, f->start_pos + q0, n - q0), HEAT_PROBS);
        const char *const *rows = token_rows(s, st, b, k0, S - k0);
        int kept = old > k0 ? old - k0 : 0;
        Tensor keys = cache_head(s, s->st->cache.cache_k, b, S);
        keys = tensor_view2(keys.data + (size_t)k0 * c->head_dim, S - k0, c->head_dim);
        if (cut) snprintf(name, sizeof name, "keys[%d, -%d:, 0]", b, LAST_ROWS);
        else snprintf(name, sizeof name, "keys[%d, :, 0]", b);
        trace_cache_rows(tr, kept, how);
        trace_tensor_as(tr, TRACE_FULL, name, name, "keys = self.cache_k[:bsz, : start_pos + seqlen]", &keys, rows,
                        HEAT_NONE);
        Tensor values = cache_head(s, s->st->cache.cache_v, b, S);
        values = tensor_view2(values.data + (size_t)k0 * c->head_dim, S - k0, c->head_dim);
        if (cut) snprintf(name, sizeof name, "values[%d, -%d:, 0]", b, LAST_ROWS);
        else snprintf(name, sizeof name, "values[%d, :, 0]", b);
        trace_cache_rows(tr, kept, how);
        trace_tensor_as(tr, TRACE_FULL, name, name, "values = self.cache_v[:bsz, : start_pos + seqlen]", &values,
                        rows, HEAT_NONE);
    }
}

static void show_attention(Show *s, const LlamaStep *st) {
    Trace *tr = s->tr;
    const LlamaForwardInfo *f = st->fwd;
    const LlamaConfig *c = &s->m->cfg;
    int S = f->read_to, n = f->seqlen, B = s->B, T = c->max_seq_len;
    if (values_shown(st)) show_values(s, st);   // (the steps between: one line, show_step_brief)
    // scores[:, 0, -1]: the last row of each batch row's scores, (bsz, S)
    if (st->step > T) return;   // (never: a run has at most T steps)
    float *last = s->use_cache ? s->last_c : s->last_nc + (size_t)(st->step - 1) * B * T;
    for (int b = 0; b < st->bsz; b++)
        memcpy(last + (size_t)b * S, s->keep + ((size_t)b * n + n - 1) * S, sizeof(float) * S);
    if (!s->use_cache) {
        s->steps_nc = st->step;
        return;
    }
    if (st->step > s->steps_nc) return;   // no run without the cache to compare with
    Tensor a = tensor_view2(s->last_nc + (size_t)(st->step - 1) * B * T, st->bsz, S);
    Tensor w = tensor_view2(last, st->bsz, S);
    trace_say(tr, "The last row of scores[:, 0] here, and at the same step without the cache:",
              "这里 scores[:, 0] 的最后一行，与不使用缓存时同一步的最后一行：");
    trace_compare(tr, "scores[:, 0, -1]", trace_text(tr, "scores[:, 0, -1] without the cache", "不使用缓存的 scores[:, 0, -1]"),
                  &a, trace_text(tr, "scores[:, 0, -1] with the cache", "使用缓存的 scores[:, 0, -1]"), &w);
}

// What the step fed: tokens[:, start_pos:start_pos+seqlen], its freqs_cis
// and its mask (or why there is none).
static void show_feed(Show *s, const LlamaStep *st) {
    Trace *tr = s->tr;
    const LlamaForwardInfo *f = st->fwd;
    const LlamaConfig *c = &s->m->cfg;
    int S = f->read_to;
    char name[64];
    snprintf(name, sizeof name, "tokens[:, %d:%d]", f->start_pos, f->start_pos + f->seqlen);
    Tensor fed = token_slice(s, st->tokens, st->total_len, st->bsz, f->start_pos, f->seqlen);
    trace_tensor_kind(tr, TRACE_SUMMARY, name, name, s->use_cache ? "tokens[:, prev_pos:cur_pos]" : "tokens[:, 0:cur_pos]",
                      &fed, s->rows, HEAT_NONE, TRACE_INT);

    // In full at the first step; then, in the text on a screen, only the
    // newest position's row, the one the step adds to what was shown.
    int first = st->step == 1 || !on_screen(tr);
    int from = first ? f->start_pos : S - 1;
    int fshape[3] = {first ? f->seqlen : 1, c->head_dim / 2, 2};
    Tensor freqs = tensor_view((float *)f->freqs_cis + (size_t)(from - f->start_pos) * c->head_dim, 3, fshape);
    snprintf(name, sizeof name, "freqs_cis[%d:%d]", from, S);
    trace_tensor(tr, TRACE_FULL, name,
                 first ? trace_text(tr, "freqs_cis = self.freqs_cis[start_pos : start_pos + seqlen]   # complex, shown as (cos, sin) pairs",
                                    "freqs_cis = self.freqs_cis[start_pos : start_pos + seqlen]   # 复数，按 (cos, sin) 实数对显示")
                       : trace_text(tr, "freqs_cis[-1:]   # the newest position's row; the others as at step 1",
                                    "freqs_cis[-1:]   # 最新位置的那一行；其余各行同第 1 步"),
                 &freqs, NULL, HEAT_NONE);

    if (f->has_mask) {
        if (f->mask) {   // (absent only past LLAMA_MASK_FLOATS)
            int mshape[4] = {1, 1, f->seqlen, S};
            Tensor mask = tensor_view((float *)f->mask, 4, mshape);
            trace_tensor(tr, TRACE_SUMMARY, "mask",
                         "mask = torch.triu(torch.full((1, 1, seqlen, seqlen), float(\"-inf\")), "
                         "diagonal=start_pos + 1)",
                         &mask, NULL, HEAT_NONE);
        }
    } else {
        trace_say(tr, "seqlen = 1, so mask = None: the one new row may see every cached position.",
                  "seqlen = 1，所以 mask = None：新的一行可以看到缓存中的所有位置。");
        trace_count(tr, "mask", 0, NULL, NULL);
    }

}

// The slots of cache_k / cache_v the step wrote and read, and the shapes.
static void show_cache_slots(Show *s, const LlamaStep *st) {
    Trace *tr = s->tr;
    const LlamaForwardInfo *f = st->fwd;
    trace_sayf(tr,
               "self.cache_k[:%d, %d:%d] = xk   (slots written; cache_v likewise)\n"
               "keys = self.cache_k[:%d, :%d]   (slots read)%s",
               "self.cache_k[:%d, %d:%d] = xk   （写入的位置；cache_v 同理）\n"
               "keys = self.cache_k[:%d, :%d]   （读取的位置）%s",
               f->bsz, f->write_from, f->write_to, f->bsz, f->read_to,
               s->use_cache ? ""
                            : trace_text(tr, "\n(without the cache the preallocated cache is still written, then read back\n"
                                             "at once: nothing written at an earlier step is reused)",
                                         "\n（不使用缓存时，预先分配的缓存照样写入，写完立刻读出；\n"
                                         "之前各步写入的内容不再使用）"));
    trace_count(tr, "cache_write_from", f->write_from, NULL, NULL);
    trace_count(tr, "cache_write_to", f->write_to, NULL, NULL);
    trace_count(tr, "cache_read_to", f->read_to, NULL, NULL);
    trace_shape(tr, "xq", 4, f->xq_shape);
    trace_shape(tr, "keys", 4, f->keys_shape);
    trace_shape(tr, "values", 4, f->values_shape);
    trace_shape(tr, "scores", 4, f->scores_shape);
    if (s->keep) show_attention(s, st);

}

// Each row's next token, or the prompt's token that input_text_mask keeps.
static void show_next_tokens(Show *s, const LlamaStep *st) {
    Trace *tr = s->tr;
    char name[64];
    for (int b = 0; b < st->bsz; b++) {
        char got[8], kept[8];
        token_shown(got, sizeof got, s->m, st->sampled[b]);
        token_shown(kept, sizeof kept, s->m, st->next_token[b]);
        snprintf(name, sizeof name, "next_token[%d]", b);
        if (st->kept[b])
            trace_sayf(tr,
                       "row %d: input_text_mask[%d, %d] is True: the prompt's \"%s\" stays "
                       "(the sampled \"%s\" is dropped)",
                       "第 %d 行：input_text_mask[%d, %d] 为 True：保留提示词的“%s”"
                       "（丢弃采样得到的“%s”）",
                       b, b, st->cur_pos, kept, got);
        else
            trace_sayf(tr, "row %d: next token \"%s\" (id %d)", "第 %d 行：下一个 token “%s”（id %d）",
                       b, kept, st->next_token[b]);
        trace_count(tr, name, st->next_token[b], NULL, NULL);
        snprintf(name, sizeof name, "kept[%d]", b);
        trace_count(tr, name, st->kept[b], NULL, NULL);
    }
}

// A step between the shown ones (values_shown) in the text on a screen: one
// line with what it fed and what each row got; JSON and the pages (whose
// slides a class steps through) keep every step whole.
static void show_step_brief(Show *s, const LlamaStep *st) {
    Trace *tr = s->tr;
    const LlamaForwardInfo *f = st->fwd;
    char rows[160] = "";
    size_t at = 0;
    for (int b = 0; b < st->bsz && at < sizeof rows; b++) {
        char got[8];
        token_shown(got, sizeof got, s->m, st->next_token[b]);
        at += (size_t)snprintf(rows + at, sizeof rows - at, trace_text(tr, "%srow %d \"%s\"%s", "%s第 %d 行“%s”%s"),
                               b ? trace_text(tr, ", ", "，") : "", b, got,
                               st->kept[b] ? trace_text(tr, " (the prompt's)", "（提示词的）") : "");
    }
    trace_sayf(tr, "cur_pos = %d: forward(tokens[:, %d:%d], %d), seqlen %d -> %s",
               "cur_pos = %d：forward(tokens[:, %d:%d], %d)，seqlen %d -> %s", st->cur_pos, f->start_pos,
               f->start_pos + f->seqlen, f->start_pos, f->seqlen, rows);
    if (s->keep) show_attention(s, st);
}

static void show_step(const LlamaStep *st, void *ctx) {
    Show *s = ctx;
    Trace *tr = s->tr;
    const LlamaForwardInfo *f = st->fwd;
    trace_step(tr, st->step);
    if (on_screen(tr) && s->keep && !values_shown(st)) {
        if (st->step == 3)
            trace_say(tr, "(Steps between the second and the last: one line each; the JSON and the page formats have every event.)",
                      "（第 2 步和最后一步之间的各步：每步一行；网页和机读格式给出全部事件。）");
        show_step_brief(s, st);
        return;
    }
    trace_sayf(tr,
               "cur_pos = %d: logits = self.model.forward(tokens[:, %d:%d], %d)   "
               "(seqlen %d, start_pos %d)",
               "cur_pos = %d：logits = self.model.forward(tokens[:, %d:%d], %d)   "
               "（seqlen %d，start_pos %d）",
               st->cur_pos, f->start_pos, f->start_pos + f->seqlen, f->start_pos, f->seqlen,
               f->start_pos);
    trace_count(tr, "prev_pos", st->prev_pos, NULL, NULL);
    trace_count(tr, "cur_pos", st->cur_pos, NULL, NULL);
    trace_count(tr, "seqlen", f->seqlen, NULL, NULL);


    show_feed(s, st);
    show_cache_slots(s, st);
    show_next_tokens(s, st);
    trace_say(tr, "", "");
    trace_pause(tr);
}

// ----------------------------------------------------------------------------
// Step 5 and one whole run: the loop, then decode

// Where decode cut each row: t[: len(prompt_tokens[i]) + max_gen_len], then
// t[: t.index(eos_id)] when the row holds eos. Returns how many rows had eos.
static int show_cuts(Trace *tr, const LlamaGeneration *g, int max_gen_len) {
    int with_eos = 0;
    for (int b = 0; b < g->bsz; b++) {
        const int *row = g->tokens + (size_t)b * g->total_len;
        int cut = g->prompt_len[b] + max_gen_len, eos = -1;
        if (cut > g->total_len) cut = g->total_len;
        for (int i = 0; i < cut && eos < 0; i++)
            if (row[i] == LLAMA_EOS_ID) eos = i;
        with_eos += eos >= 0;
        char name[32];
        char eos_at[64];
        if (eos >= 0) snprintf(eos_at, sizeof eos_at, "tokens[%d, %d]", b, eos);
        trace_sayf(tr, "row %d: len(prompt_tokens[%d]) + max_gen_len = %d + %d = %d of total_len %d; %s%s",
                   "第 %d 行：len(prompt_tokens[%d]) + max_gen_len = %d + %d = %d（total_len 为 %d）；%s%s", b, b,
                   g->prompt_len[b], max_gen_len, g->prompt_len[b] + max_gen_len, g->total_len,
                   eos >= 0 ? trace_text(tr, "cut again at its eos, ", "又在它的 eos 处截断：")
                            : trace_text(tr, "no eos in it", "其中没有 eos"),
                   eos >= 0 ? eos_at : "");
        snprintf(name, sizeof name, "cut[%d]", b);
        trace_count(tr, name, cut, NULL, NULL);
        snprintf(name, sizeof name, "eos_at[%d]", b);
        trace_count(tr, name, eos, NULL, NULL);
    }
    return with_eos;
}

static int run_generate(LlamaGeneration *g, LlamaState *st, const LlamaModel *m, Show *show,
                        const char *const *prompts, int n_prompts, const LlamaGenOptions *base,
                        int use_cache) {
    Trace *tr = show->tr;
    LlamaGenOptions o = *base;
    o.use_cache = use_cache;
    o.hook = show_step;
    o.hook_ctx = show;
    show->g = g;
    show->st = st;
    show->use_cache = use_cache;
    char err[512];
    if (llama_generate(g, st, m, prompts, n_prompts, &o, ERR(tr->lang, err)) != 0) {
        fileio_error(tr->lang, "lesson 3: %s", "第 3 课：%s", err);
        return -1;
    }
    trace_step(tr, 0);
    Tensor all = token_slice(show, g->tokens, g->total_len, g->bsz, 0, g->total_len);
    trace_tensor_kind(tr, TRACE_SUMMARY, "tokens", "tokens", trace_text(tr, "tokens after the loop", "循环结束后的 tokens"), &all,
                      show->rows, HEAT_NONE, TRACE_INT);
    trace_say(tr, "decoded, cut at len(prompt) + max_gen_len and at eos (one row a line):",
              "decoded，在 len(prompt) + max_gen_len 和 eos 处截断（每行一条）：");
    for (int b = 0; b < g->bsz; b++) {
        char name[32];
        snprintf(name, sizeof name, "decoded[%d]", b);
        trace_textval(tr, name, g->text[b]);
    }
    show->eos_rows = show_cuts(tr, g, o.max_gen_len);
    trace_count(tr, "rows_computed", g->rows_computed, "token rows through every layer",
                "经过每一层的 token 行数");
    trace_timing(tr, use_cache ? "cache" : "no-cache", g->seconds, 1);
    return 0;
}

// ----------------------------------------------------------------------------
// After the loop: the two runs side by side, and what the code leaves unsaid

// Both runs agree bit for bit, and the cache computes fewer rows.
static void show_comparison(Trace *tr, const LlamaConfig *c, const LlamaGeneration *nc, const LlamaGeneration *wc) {
    trace_heading(tr, "Comparison", "对比");
    int V = c->vocab_size, rows = nc->n_steps * nc->bsz;
    Tensor a = tensor_view2(nc->logits, rows, V), b = tensor_view2(wc->logits, rows, V);
    int same = trace_compare(tr, "logits", trace_text(tr, "logits without the cache (every step)", "不使用缓存的 logits（每一步）"), &a,
                             trace_text(tr, "logits with the cache", "使用缓存的 logits"), &b);
    int texts = 1;
    for (int k = 0; k < nc->bsz; k++) texts &= strcmp(nc->text[k], wc->text[k]) == 0;
    trace_sayf(tr, "Same tokens, same text: %s. Rows through the model: %lld without the "
               "cache, %lld with it.",
               "token 与文本相同：%s。经过模型的行数：不使用缓存 %lld，使用缓存 %lld。",
               texts ? trace_text(tr, "yes", "是") : trace_text(tr, "no", "否"),
               (long long)nc->rows_computed, (long long)wc->rows_computed);
    // One run each way (the runs print every tensor): a ratio, no verdict.
    trace_comparison_of(tr, "time_ratio", measure_ratio_of(wc->seconds > 0 ? nc->seconds / wc->seconds : 0, 0, 1),
                        MEASURE_TOO_FEW, "time without the cache / time with it", "不使用缓存耗时 / 使用缓存耗时");
    if (!same || !texts)
        trace_say(tr, "The runs differ: this is a bug in kvdemo.", "两次运行结果不同：这是 kvdemo 的缺陷。");
}

// What the article's code leaves unsaid: when the mask is built, and why its
// (seqlen, seqlen) shape is enough.
static void show_unsaid(Trace *tr, const LlamaConfig *c, const LlamaGeneration *g, int eos_rows, ModelKind kind) {
    trace_heading(tr, "What the article's code does not say", "文章代码里没有明说的地方");
    int first = g->min_prompt_size;
    trace_sayf(tr,
               "The mask is built only when seqlen > 1. With the cache that is step 1 alone: "
               "tokens[:, 0:%d] at start_pos 0, a (%d, %d) mask against scores of (%d, %d, %d, %d).\n"
               "Its (seqlen, seqlen) shape fits the scores (seqlen, start_pos + seqlen) only "
               "because start_pos is 0 then. From step 2 on one token is fed (seqlen 1) and "
               "mask = None: the new row may look at every cached position, all of them "
               "earlier, so nothing needs masking.\n"
               "Had a step fed several tokens at start_pos > 0, the article's (seqlen, seqlen) "
               "mask would not broadcast against the scores; kvdemo builds the full width, "
               "triu(full((seqlen, start_pos + seqlen), -inf), diagonal=start_pos + 1), which "
               "is the article's mask whenever start_pos is 0.",
               "只有 seqlen > 1 时才构造 mask。使用缓存时只有第 1 步如此：在 start_pos 0 输入 "
               "tokens[:, 0:%d]，mask 为 (%d, %d)，scores 为 (%d, %d, %d, %d)。\n"
               "(seqlen, seqlen) 形状的 mask 能与 (seqlen, start_pos + seqlen) 的 scores 相加，"
               "只是因为此时 start_pos 为 0。从第 2 步起每次只输入一个 token（seqlen 1），"
               "mask = None：新的一行可以看缓存中的所有位置，它们都在它之前，不需要掩码。\n"
               "如果某一步在 start_pos > 0 时输入多个 token，文章的 (seqlen, seqlen) mask "
               "无法与 scores 广播；kvdemo 构造完整宽度的 triu(full((seqlen, start_pos + seqlen), "
               "-inf), diagonal=start_pos + 1)，在 start_pos 为 0 时与文章的 mask 相同。",
               first, first, first, g->bsz, c->n_heads, first, first);
    if (g->max_prompt_size > g->min_prompt_size)
        trace_sayf(tr,
                   "The prompts differ in length: the loop starts at start_pos = %d, so the "
                   "longer prompt is read in one token a step through the cache while the "
                   "shorter one already generates; input_text_mask keeps its tokens.",
                   "提示词长度不同：循环从 start_pos = %d 开始，较长的提示词借助缓存每步读入一个 "
                   "token，而较短的已经在生成；input_text_mask 保留它的 token。",
                   g->min_prompt_size);
    if (eos_rows == 0 && kind == MODEL_SHIPPED)
        trace_sayf(tr,
                   "No row met eos. The model learnt from running text: every training window starts with bos "
                   "and none ends with eos, so it gives eos next to no probability, and the cut at "
                   "len(prompt) + max_gen_len is what ends each row (the shorter prompt's row is cut %d "
                   "tokens before total_len). On random weights (--init random) an eos can come by chance.",
                   "没有一行遇到 eos。模型是从连续的文本学来的：每个训练窗口都以 bos 开头，没有一个以 eos 结尾，"
                   "所以它几乎不给 eos 概率，结束每一行的是 len(prompt) + max_gen_len 处的截断（较短提示词的那一行"
                   "在 total_len 之前 %d 个 token 处截断）。在随机权重上（--init random）eos 可能碰巧出现。",
                   g->max_prompt_size - g->min_prompt_size);
}

// ----------------------------------------------------------------------------
// The lesson: the model, steps 1-3, the loop with and without the cache, the
// comparison

// The hook's scratch for batches of B rows and a context of T (head_dim D).
// At --trace full also room for layer 0's attention values; when that does
// not fit (a model of long context), the lesson goes on with shapes only and
// show->keep stays NULL. Returns 0, or -1 when even the scratch does not fit.
static int show_alloc(Show *show, int B, int T, int D, int full) {
    show->B = B;
    show->ids = malloc(sizeof(float) * (size_t)B * T);
    show->labels = malloc((size_t)B * LABEL_BYTES(T));
    show->rows = malloc(sizeof(char *) * (size_t)B);
    if (full) {
        show->keep = malloc(sizeof(float) * (size_t)B * T * T);
        show->head = malloc(sizeof(float) * (size_t)T * D);
        show->tok = malloc((size_t)T * 8);
        show->tok_rows = malloc(sizeof(char *) * (size_t)T);
        show->last_nc = malloc(sizeof(float) * (size_t)T * B * T);
        show->last_c = malloc(sizeof(float) * (size_t)B * T);
        if (!show->keep || !show->head || !show->tok || !show->tok_rows || !show->last_nc || !show->last_c) {
            free(show->keep), free(show->head), free(show->tok), free(show->tok_rows);
            free(show->last_nc), free(show->last_c);
            show->keep = show->head = show->last_nc = show->last_c = NULL;
            show->tok = NULL, show->tok_rows = NULL;
        }
    }
    return show->ids && show->labels && show->rows ? 0 : -1;
}

static void show_free(Show *show) {
    free(show->ids);
    free(show->labels);
    free(show->rows);
    free(show->keep);
    free(show->head);
    free(show->tok);
    free(show->tok_rows);
    free(show->last_nc);
    free(show->last_c);
}

int lesson3_run(const Options *opt, Trace *tr) {
    LlamaModel m;
    ModelKind kind;
    int rc = load_model(&m, &kind, opt);
    if (rc) return rc;
    const LlamaConfig *c = &m.cfg;
    int n_prompts, gen_len;
    int *scratch = malloc(sizeof(int) * (size_t)c->max_seq_len);
    if (!scratch) {
        fileio_error(tr->lang, "lesson 3: out of memory", "第 3 课：内存不足");
        llama_free(&m);
        return 1;
    }
    const char *const *prompts = pick_prompts(&n_prompts, &gen_len, &m, kind, opt, scratch);
    free(scratch);
    // Each run its own state: its cache and activations, for a batch of at
    // least 4 rows (the cache the lesson shows).
    int B = n_prompts > 4 ? n_prompts : 4;
    LlamaState nc_state = {0}, wc_state = {0};
    LlamaGeneration nc = {0}, wc = {0};
    Show show = {.tr = tr, .m = &m};
    char err[512];
    rc = 0;
    if (llama_state_init(&nc_state, &m, B, ERR(tr->lang, err)) != 0 ||
        llama_state_init(&wc_state, &m, B, ERR(tr->lang, err)) != 0) {
        fileio_error(tr->lang, "lesson 3: %s", "第 3 课：%s", err);
        rc = 1;
        goto done;
    }
    if (show_alloc(&show, B, c->max_seq_len, c->head_dim, tr->level >= TRACE_FULL) != 0 ||
        llama_generation_new(&nc, &nc_state, &m, ERR(tr->lang, err)) != 0 ||
        llama_generation_new(&wc, &wc_state, &m, ERR(tr->lang, err)) != 0) {
        fileio_error(tr->lang, "lesson 3: out of memory", "第 3 课：内存不足");
        rc = 1;
        goto done;
    }
    nc_state.keep_scores = wc_state.keep_scores = show.keep;
    LlamaGenOptions base = {
        .max_gen_len = gen_len,
        // generate(..., temperature: float = 0.8, top_p: float = 0.95)
        .temperature = opt->temperature >= 0 ? (float)opt->temperature : 0.8f,
        .top_p = opt->top_p >= 0 ? (float)opt->top_p : 0.95f,
        .seed = opt->seed,
    };

    lessons_heading(tr);
    show_model(tr, &m, B, kind, &base);
    if (tr->level >= TRACE_FULL && !show.keep)
        trace_say(tr, "(Out of memory for layer 0's attention values: only their shapes are shown.)\n",
                  "（内存不足，无法保存第 0 层的注意力数值：只显示形状。）\n");
    int runs = opt->runs;
    if (show_setup(&show, nc.tokens, prompts, n_prompts, base.max_gen_len) != 0) rc = 2;
    if (rc) goto done;
    if (runs & RUN_NOCACHE) {
        trace_heading(tr, "Without the cache: tokens[:, 0:cur_pos] from position 0 every step",
                      "不使用缓存：每一步都从位置 0 重新输入 tokens[:, 0:cur_pos]");
        trace_run(tr, "no-cache");
        if (run_generate(&nc, &nc_state, &m, &show, prompts, n_prompts, &base, 0) != 0) rc = 1;
    }
    if (!rc && (runs & RUN_CACHE)) {
        trace_heading(tr, "With the cache: forward(tokens[:, prev_pos:cur_pos], prev_pos)",
                      "使用缓存：forward(tokens[:, prev_pos:cur_pos], prev_pos)");
        trace_run(tr, "cache");
        if (run_generate(&wc, &wc_state, &m, &show, prompts, n_prompts, &base, 1) != 0) rc = 1;
    }
    const LlamaGeneration *g = runs & RUN_CACHE ? &wc : &nc;
    if (!rc && runs == RUN_BOTH) show_comparison(tr, c, &nc, &wc);
    if (!rc) show_unsaid(tr, c, g, show.eos_rows, kind);
done:
    llama_generation_free(&nc);
    llama_generation_free(&wc);
    show_free(&show);
    llama_state_free(&nc_state);
    llama_state_free(&wc_state);
    llama_free(&m);
    return rc;
}
