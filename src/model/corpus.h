// corpus — the text the char GPT learns from, as tokens.
//
// A character is a Unicode code point; the vocabulary is the sorted list of
// the distinct code points of the training text (the numpy chapter's
// `chars = sorted(list(set(text)))`), a token the index of its character.
// The first 90% of the tokens are the training split, the rest validation.
//
// Legend: V vocabulary size, n tokens in the text.
#ifndef KVDEMO_CORPUS_H
#define KVDEMO_CORPUS_H

#include "fileio.h"   // Err

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t *vocab;   // (V) sorted distinct code points
    int V;
    int32_t *tokens;   // (n) token ids
    int64_t n;
} TrainText;

// The training text may hold at most this many bytes (a char GPT needs a few
// MB; tinyshakespeare has 1.1): a larger file is refused before it is read.
#define TRAIN_MAX_TEXT_BYTES (256ull << 20)

// Reads a UTF-8 file; with vocab NULL the vocabulary is its sorted distinct
// code points, otherwise text is mapped into the given vocabulary (V
// entries) and an unknown character is an error. Returns 0, or -1 with err
// naming the file and what is wrong (text is then empty).
int train_text_load(TrainText *text, const char *path, const uint32_t *vocab, int V, Err err);
void train_text_free(TrainText *text);

// Tokens of the training split: 0 .. split-1 train, split .. n-1 validate.
// numpy: n = int(0.9 * len(data))
int64_t train_text_split(const TrainText *text);

// FNV-1a, 64 bits, of n bytes continuing from h (FNV_START to begin): the
// checksum of checkpoints and the fingerprint of a text.
#define FNV_START 0xCBF29CE484222325ull
uint64_t fnv1a(uint64_t h, const void *data, size_t n);
// The fingerprint of a text (its vocabulary, then its tokens), which a
// checkpoint keeps so that a resumed run can check it reads the same text.
uint64_t train_text_hash(const TrainText *text);

// Where tinyshakespeare, the shipped model's text, comes from (`make data`,
// tests/get-data.sh, fetches the same file and checks the same sum), and
// the command that gets it from any folder, for an installed kvdemo too:
// kvdemo reads data/tinyshakespeare.txt of the current folder first.
#define CORPUS_URL "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
#define CORPUS_SHA256 "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
#define CORPUS_GET "curl -fL --create-dirs -o data/tinyshakespeare.txt " CORPUS_URL
// The one line on stderr, in lang, when the text is missing: what (en, zh:
// "no training text") is missing, --data, and CORPUS_GET with its sha256.
// Returns -1.
int corpus_missing(Lang lang, const char *what_en, const char *what_zh);

#endif
