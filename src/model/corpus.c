// corpus — the training text as tokens: UTF-8 decoded into code points, the
// vocabulary their sorted distinct values, the split into training and
// validation, and the text's fingerprint that a checkpoint keeps.
#include "corpus.h"

#include "utf8.h"
#include "fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int vocab_find(const uint32_t *vocab, int V, uint32_t cp) {
    int lo = 0, hi = V - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (vocab[mid] == cp) return mid;
        if (vocab[mid] < cp) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

// The whole file at path into *bytes (n of them, the caller frees): only a
// regular file (a FIFO or a device is refused at once, without waiting for
// it), and one beyond the limit before it is read. Returns 0, or -1 with err.
static int text_read_bytes(unsigned char **bytes_out, size_t *n_out, const char *path, Err err) {
    uint64_t size;
    FILE *f = fileio_open_read(path, &size, err);
    if (!f) return -1;
    if (size > TRAIN_MAX_TEXT_BYTES) {
        fileio_fail2(err, "%s is %llu bytes; a training text may hold at most %llu MiB",
                     "%s 有 %llu 字节；训练文本最多 %llu MiB", path,
                 (unsigned long long)size, TRAIN_MAX_TEXT_BYTES >> 20);
        fclose(f);
        return -1;
    }
    unsigned char *bytes = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n > TRAIN_MAX_TEXT_BYTES) {
            fileio_fail2(err, "%s holds more than %llu MiB; a training text may hold at most that",
                         "%s 超过 %llu MiB，而训练文本最多只能这么大",
                     path, TRAIN_MAX_TEXT_BYTES >> 20);
            free(bytes);
            fclose(f);
            return -1;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1 << 20;
            unsigned char *nb = realloc(bytes, cap);
            if (!nb) {
                fileio_fail2(err, "out of memory reading %s", "读取 %s 时内存不足", path);
                free(bytes);
                fclose(f);
                return -1;
            }
            bytes = nb;
        }
        errno = 0;
        size_t got = fread(bytes + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (bad) {
        fileio_fail2(err, "error reading %s: %s", "读取 %s 时出错：%s", path, fileio_strerror(err.lang, bad));
        free(bytes);
        return -1;
    }
    if (n < size) {
        fileio_fail2(err, "%s: truncated: read %zu of its %llu bytes (did it change while it was read?)",
                     "%s：文件不完整：只读到 %zu 字节，它有 %llu 字节（读取时它被改动了吗？）", path, n,
                     (unsigned long long)size);
        free(bytes);
        return -1;
    }
    *bytes_out = bytes;
    *n_out = n;
    return 0;
}

// The n bytes decoded into cps (room for n + 1 code points), a byte order
// mark (Notepad writes one) skipped: it is not a character of the text.
// Returns the number of code points (0 for an empty text), or -1 with err
// naming the first byte that is not UTF-8.
static int64_t text_decode(uint32_t *cps, const unsigned char *bytes, size_t n, const char *path,
                           Err err) {
    size_t skip = n >= 3 && !memcmp(bytes, "\xef\xbb\xbf", 3) ? 3 : 0;
    int64_t count = 0;
    for (size_t i = skip; i < n;) {
        int len = utf8_decode(&cps[count], bytes + i, n - i);
        if (len == 0) {
            fileio_fail2(err, "%s is not valid UTF-8 (byte %zu)", "%s 不是合法的 UTF-8（第 %zu 个字节）", path, i);
            return -1;
        }
        i += (size_t)len;
        count++;
    }
    return count;
}

// text->vocab and text->V: a copy of the given vocabulary (V entries), or
// with vocab NULL the sorted distinct values of the count code points.
// Returns 0, or -1 when out of memory (text->vocab is then NULL).
static int text_vocab_make(TrainText *text, const uint32_t *cps, int64_t count, const uint32_t *vocab,
                           int V) {
    if (vocab) {
        text->vocab = malloc(sizeof(uint32_t) * (size_t)V);
        if (text->vocab) memcpy(text->vocab, vocab, sizeof(uint32_t) * (size_t)V);
        text->V = V;
    } else {
        // the sorted distinct code points: sort a copy, keep the first of each run
        text->vocab = malloc(sizeof(uint32_t) * (size_t)(count + 1));
        if (text->vocab) {
            memcpy(text->vocab, cps, sizeof(uint32_t) * (size_t)count);
            qsort(text->vocab, (size_t)count, sizeof(uint32_t), utf8_cmp);
            int v = 0;
            for (int64_t i = 0; i < count; i++)
                if (v == 0 || text->vocab[v - 1] != text->vocab[i])
                    text->vocab[v++] = text->vocab[i];
            text->V = v;
        }
    }
    return text->vocab ? 0 : -1;
}

// text->tokens[i] = the id of cps[i] in text->vocab, for the count code
// points. Returns 0, or -1 with err naming the first character that is not
// in the vocabulary.
static int text_tokenize(TrainText *text, const uint32_t *cps, int64_t count, const char *path,
                         Err err) {
    for (int64_t i = 0; i < count; i++) {
        int id = vocab_find(text->vocab, text->V, cps[i]);
        if (id < 0) {
            char name[48];
            utf8_name(name, sizeof name, cps[i], err.lang == LANG_ZH);
            fileio_fail2(err, "%s: character %s at position %lld is not in the model's vocabulary",
                         "%s：字符%s（第 %lld 个）不在模型的词表里", path, name, (long long)i);
            return -1;
        }
        text->tokens[i] = id;
    }
    return 0;
}

int train_text_load(TrainText *text, const char *path, const uint32_t *vocab, int V, Err err) {
    memset(text, 0, sizeof(*text));
    unsigned char *bytes = NULL;
    size_t n = 0;
    if (text_read_bytes(&bytes, &n, path, err) != 0) return -1;
    uint32_t *cps = malloc(sizeof(uint32_t) * (n + 1));
    text->tokens = malloc(sizeof(int32_t) * (n + 1));
    if (!cps || !text->tokens) {
        fileio_fail2(err, "out of memory reading %s", "读取 %s 时内存不足", path);
        free(bytes);
        free(cps);
        train_text_free(text);
        return -1;
    }
    int64_t count = text_decode(cps, bytes, n, path, err);
    free(bytes);
    int fail = count < 0;
    if (count == 0) {   // not "vocabulary size V=0"
        fileio_fail2(err, "%s is empty; a text to learn from or to score needs characters",
                     "%s 是空的；用来训练或评估的文本里要有字符", path);
        fail = 1;
    }
    if (!fail && text_vocab_make(text, cps, count, vocab, V) != 0) {
        fileio_fail2(err, "out of memory reading %s", "读取 %s 时内存不足", path);
        fail = 1;
    }
    if (!fail) fail = text_tokenize(text, cps, count, path, err) != 0;
    free(cps);
    if (fail) {
        train_text_free(text);
        return -1;
    }
    text->n = count;
    return 0;
}

void train_text_free(TrainText *text) {
    free(text->vocab);
    free(text->tokens);
    memset(text, 0, sizeof(*text));
}


int64_t train_text_split(const TrainText *text) { return text->n * 9 / 10; }

uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

uint64_t train_text_hash(const TrainText *text) {
    uint64_t h = fnv1a(FNV_START, text->vocab, sizeof(uint32_t) * (size_t)text->V);
    return fnv1a(h, text->tokens, sizeof(int32_t) * (size_t)text->n);
}

int corpus_missing(Lang lang, const char *what_en, const char *what_zh) {
    return fileio_error(lang, "%s: give --data FILE, or get tinyshakespeare into this folder: `%s` (its sha256 is %s)",
                        "%s：请用 --data FILE 指定，或把 `tinyshakespeare` 下载到当前文件夹：`%s`（其 sha256 应为 %s）",
                        fileio_text(lang, what_en, what_zh), CORPUS_GET, CORPUS_SHA256);
}
