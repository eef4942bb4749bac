// bpe — llama2.c's tokenizer.bin read, and texts encoded and decoded with
// it (bpe.h says how; docs/llama-format.md gives the file).
#include "bpe.h"

#include "fileio.h"
#include "utf8.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    BPE_UNK = 0, BPE_BOS = 1, BPE_EOS = 2,
    BPE_FIRST_BYTE = 3,            // <0x00> is id 3, <0xFF> id 258
    BPE_MAX_TOKEN_LENGTH = 1024,   // longer pieces are a damaged file (llama2.c's longest: 27)
};
#define BPE_MAX_FILE ((uint64_t)1 << 30)   // 1 GiB: far above any vocabulary's file

// ----------------------------------------------------------------------------
// The sorted index: pieces ordered by their bytes (shorter first when one is
// the start of the other), equal pieces by id.

static int entry_cmp(const char *a, int alen, const char *b, int blen) {
    int c = memcmp(a, b, (size_t)(alen < blen ? alen : blen));
    if (c) return c;
    return (alen > blen) - (alen < blen);
}

static int sort_cmp(const void *pa, const void *pb) {
    const BpeEntry *a = pa, *b = pb;
    int c = entry_cmp(a->s, a->len, b->s, b->len);
    return c ? c : (a->id > b->id) - (a->id < b->id);
}

int bpe_lookup(const Bpe *t, const char *s, int n) {
    // the first entry not below (s, n): binary search over [lo, hi)
    int lo = 0, hi = t->vocab_size;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (entry_cmp(t->sorted[mid].s, t->sorted[mid].len, s, n) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo < t->vocab_size && entry_cmp(t->sorted[lo].s, t->sorted[lo].len, s, n) == 0) return t->sorted[lo].id;
    return -1;
}

// ----------------------------------------------------------------------------
// Reading

// Is the piece "<0xHH>" (two upper-case hex digits)? Sets *byte.
static int byte_piece(const char *s, int len, int *byte) {
    static const char hex[] = "0123456789ABCDEF";
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return 0;
    const char *hi = s[3] ? strchr(hex, s[3]) : NULL, *lo = s[4] ? strchr(hex, s[4]) : NULL;
    if (!hi || !lo) return 0;
    *byte = (int)(hi - hex) * 16 + (int)(lo - hex);
    return 1;
}

// The byte tokens (<0xHH> at id 3 + HH) and the longest decoded token.
static void index_bytes(Bpe *t) {
    for (int b = 0; b < 256; b++) {
        t->bytes[b][0] = (char)b, t->bytes[b][1] = '\0';
        int id = BPE_FIRST_BYTE + b, got;
        t->byte_id[b] = id < t->vocab_size && byte_piece(t->pieces[id], t->lens[id], &got) && got == b ? id : -1;
    }
    t->max_text_bytes = 1;
    for (int i = 0; i < t->vocab_size; i++)
        if (t->lens[i] > t->max_text_bytes) t->max_text_bytes = t->lens[i];
}

static int alloc_tables(Bpe *t, int V, size_t text_bytes) {
    t->scores = malloc(sizeof(float) * (size_t)V);
    t->pieces = malloc(sizeof(char *) * (size_t)V);
    t->lens = malloc(sizeof(int) * (size_t)V);
    t->sorted = malloc(sizeof(BpeEntry) * (size_t)V);
    t->text = malloc(text_bytes);
    return t->scores && t->pieces && t->lens && t->sorted && t->text ? 0 : -1;
}

int bpe_parse(Bpe *t, const unsigned char *data, size_t size, int V, const char *name, Err err) {
    memset(t, 0, sizeof *t);
    if (size < 4) {
        fileio_fail2(err, "%s: %zu bytes: too short for a tokenizer.bin (it starts with an int32)",
                     "%s：只有 %zu 字节，不像 tokenizer.bin（它以一个 int32 开头）", name, size);
        return -1;
    }
    int32_t max_len = (int32_t)le_get_u32(data);
    if (max_len < 1 || max_len > BPE_MAX_TOKEN_LENGTH) {
        fileio_fail2(err, "%s: max_token_length %d; it must be between 1 and %d",
                     "%s：max_token_length 是 %d；它必须在 1 到 %d 之间", name, (int)max_len,
                     BPE_MAX_TOKEN_LENGTH);
        return -1;
    }
    // Every token's bytes, NUL-terminated, fit in size + V bytes.
    if (alloc_tables(t, V, size + (size_t)V) != 0) {
        bpe_free(t);
        fileio_fail2(err, "%s: out of memory", "%s：内存不足", name);
        return -1;
    }
    t->vocab_size = V;
    t->max_token_length = max_len;
    size_t at = 4, out = 0;
    for (int i = 0; i < V; i++) {
        if (size - at < 8) {
            fileio_fail2(err, "%s: truncated at token %d of %d (the model's vocab_size): %zu bytes",
                         "%s：文件在第 %d 个 token 处截断（模型的 vocab_size 是 %d）：只有 %zu 字节", name, i, V,
                         size);
            goto fail;
        }
        float score = le_get_f32(data + at);
        int32_t len = (int32_t)le_get_u32(data + at + 4);
        at += 8;
        if (!isfinite(score)) {
            fileio_fail2(err, "%s: token %d: its score is not a finite number", "%s：第 %d 个 token 的分数不是有限数",
                         name, i);
            goto fail;
        }
        if (len < 0 || len > max_len) {
            fileio_fail2(err, "%s: token %d is %d bytes long; it must be between 0 and max_token_length %d",
                         "%s：第 %d 个 token 长 %d 字节；它必须在 0 到 max_token_length %d 之间", name, i, (int)len,
                         (int)max_len);
            goto fail;
        }
        if ((size_t)len > size - at) {
            fileio_fail2(err, "%s: truncated at token %d of %d (the model's vocab_size): %zu bytes",
                         "%s：文件在第 %d 个 token 处截断（模型的 vocab_size 是 %d）：只有 %zu 字节", name, i, V,
                         size);
            goto fail;
        }
        t->scores[i] = score;
        t->pieces[i] = t->text + out;
        t->lens[i] = len;
        memcpy(t->text + out, data + at, (size_t)len);
        t->text[out + (size_t)len] = '\0';
        out += (size_t)len + 1;
        at += (size_t)len;
    }
    if (at != size) {
        fileio_fail2(err, "%s: %zu bytes after the %d tokens of the model's vocabulary: not the model's tokenizer",
                     "%s：多出 %zu 字节，在模型词表的 %d 个 token 之后：不是这个模型的分词器", name, size - at, V);
        goto fail;
    }
    for (int i = 0; i < V; i++) t->sorted[i] = (BpeEntry){t->pieces[i], t->lens[i], i};
    qsort(t->sorted, (size_t)V, sizeof *t->sorted, sort_cmp);
    index_bytes(t);
    return 0;
fail:
    bpe_free(t);
    return -1;
}

int bpe_load(Bpe *t, const char *path, int V, Err err) {
    memset(t, 0, sizeof *t);
    uint64_t size = 0;
    FILE *f = fileio_open_read(path, &size, err);
    if (!f) return -1;
    if (size > BPE_MAX_FILE) {
        fclose(f);
        fileio_fail2(err, "%s: %llu bytes: too large for a tokenizer.bin", "%s：%llu 字节：作为 tokenizer.bin 太大了",
                     path, (unsigned long long)size);
        return -1;
    }
    unsigned char *data = malloc(size ? (size_t)size : 1);
    int rc = -1;
    if (!data) fileio_fail2(err, "%s: out of memory", "%s：内存不足", path);
    else if (fread(data, 1, (size_t)size, f) != (size_t)size)
        fileio_fail2(err, "%s: cannot read: %s", "%s：读取出错：%s", path, fileio_read_reason(err.lang, f));
    else rc = bpe_parse(t, data, (size_t)size, V, path, err);
    free(data);
    fclose(f);
    return rc;
}

void bpe_free(Bpe *t) {
    if (!t) return;
    free(t->scores);
    free(t->pieces);
    free(t->lens);
    free(t->text);
    free(t->sorted);
    memset(t, 0, sizeof *t);
}

// ----------------------------------------------------------------------------
// Encoding

// The tokens of one character (len bytes at s): its piece, or its bytes'
// tokens. Returns how many were written to out, or -1 with a message.
static int encode_char(int *out, const Bpe *t, const char *s, int len, const char *text, Err err) {
    int id = bpe_lookup(t, s, len);
    if (id >= 0) {
        out[0] = id;
        return 1;
    }
    for (int i = 0; i < len; i++) {
        int b = (unsigned char)s[i];
        if (t->byte_id[b] < 0) {
            char one[8] = {0}, shown[24], quoted[200];
            memcpy(one, s, (size_t)len);
            fileio_fail2(err,
                         "the tokenizer cannot encode '%s' at byte %d of the prompt: it is no piece of the "
                         "vocabulary and token %d is not the byte token <0x%02X>: \"%s\"",
                         "分词器无法编码“%s”（提示词的字节偏移 %d）：它不在词表里，第 %d 个 token 也不是字节 token "
                         "<0x%02X>：“%s”",
                         utf8_quote(shown, sizeof shown, one, 1), (int)(s - text), BPE_FIRST_BYTE + b, b,
                         utf8_quote(quoted, sizeof quoted, text, 40));
            return -1;
        }
        out[i] = t->byte_id[b];
    }
    return len;
}

// The best merge of work (n): the index i whose pair (i, i + 1) joins into
// the piece of highest score (the first of equal ones), its id in *id; -1
// when no pair joins into a piece. buf holds two pieces.
static int best_merge(int *id, const Bpe *t, const int *work, int n, char *buf) {
    int best = -1;
    for (int i = 0; i + 1 < n; i++) {
        int a = work[i], b = work[i + 1];
        memcpy(buf, t->pieces[a], (size_t)t->lens[a]);
        memcpy(buf + t->lens[a], t->pieces[b], (size_t)t->lens[b]);
        int joined = bpe_lookup(t, buf, t->lens[a] + t->lens[b]);
        if (joined >= 0 && (best < 0 || t->scores[joined] > t->scores[*id])) {
            best = i;
            *id = joined;
        }
    }
    return best;
}

// The characters of " " + text as tokens in work (room for 1 + 4 per byte).
// Returns how many, or -1 with a message.
static int encode_chars(int *work, const Bpe *t, const char *text, Err err) {
    int n = encode_char(work, t, " ", 1, text, err);
    size_t left = strlen(text);
    for (const char *s = text; n >= 0 && *s;) {
        uint32_t cp;
        int len = utf8_decode(&cp, (const unsigned char *)s, left);
        if (len == 0) {
            char quoted[200];
            fileio_fail2(err, "the prompt is not valid UTF-8 at byte %d (0x%02X): \"%s\"",
                         "提示词在字节偏移 %d 处（0x%02X）不是有效的 UTF-8 文本：“%s”", (int)(s - text),
                         (unsigned char)*s, utf8_quote(quoted, sizeof quoted, text, 40));
            return -1;
        }
        int k = encode_char(work + n, t, s, len, text, err);
        if (k < 0) return -1;
        n += k;
        s += len;
        left -= (size_t)len;
    }
    return n;
}

int bpe_encode(int *ids, const Bpe *t, const char *text, int bos, int eos, int max_ids, Err err) {
    size_t bytes = strlen(text);
    int *work = malloc(sizeof(int) * (bytes + 1));   // a token per byte at most, and the space
    char *buf = malloc(2 * (size_t)t->max_token_length + 1);
    int n = 0, rc = -1;
    if (!work || !buf) {
        fileio_fail2(err, "out of memory for a prompt of %zu bytes", "内存不足：放不下 %zu 字节的提示词", bytes);
        rc = -2;
        goto done;
    }
    // add_dummy_prefix: " " before the text (none before an empty text)
    if (bytes) n = encode_chars(work, t, text, err);
    if (n < 0) goto done;
    // while a pair joins into a piece: merge the best one
    for (;;) {
        int id = -1, i = best_merge(&id, t, work, n, buf);
        if (i < 0) break;
        work[i] = id;
        memmove(work + i + 1, work + i + 2, sizeof(int) * (size_t)(n - i - 2));
        n--;
    }
    int total = n + (bos != 0) + (eos != 0);
    if (total > max_ids) {
        char quoted[200];
        fileio_fail2(err, "the prompt is longer than %d tokens (%d): \"%s\"", "提示词超过了 %d 个 token（%d 个）：“%s”",
                     max_ids, total, utf8_quote(quoted, sizeof quoted, text, 40));
        goto done;
    }
    int k = 0;
    if (bos) ids[k++] = BPE_BOS;
    memcpy(ids + k, work, sizeof(int) * (size_t)n);
    k += n;
    if (eos) ids[k++] = BPE_EOS;
    rc = k;
done:
    free(work);
    free(buf);
    return rc;
}

// ----------------------------------------------------------------------------
// Decoding

const char *bpe_token_text(const Bpe *t, int prev, int id) {
    if (id < 0 || id >= t->vocab_size || id == BPE_UNK || id == BPE_BOS || id == BPE_EOS) return "";
    const char *s = t->pieces[id];
    int b;
    if (byte_piece(s, t->lens[id], &b)) return t->bytes[b];
    // the SentencePiece decoder drops the space that starts the first word
    if (prev == BPE_BOS && s[0] == ' ') s++;
    return s;
}

size_t bpe_decode(char *out, const Bpe *t, const int *ids, int n, size_t out_size) {
    size_t len = 0;
    if (!out_size) return 0;
    for (int i = 0; i < n; i++) {
        const char *s = bpe_token_text(t, i ? ids[i - 1] : -1, ids[i]);
        size_t k = strlen(s);
        if (len + k + 1 > out_size) break;
        memcpy(out + len, s, k);
        len += k;
    }
    out[len] = '\0';
    return len;
}
