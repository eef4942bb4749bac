// bpe — llama2.c's tokenizer.bin: a SentencePiece vocabulary of byte
// strings with a score each, encoded by greedy highest-score pair merges
// with byte fallback, as llama2.c's TinyStories models were trained with.
// docs/llama-format.md describes the file byte for byte.
//
// Legend: V vocabulary size (the model's; the file does not say it), n
// tokens of one text.
//
// Ids 0, 1 and 2 are <unk>, BOS and EOS (their pieces "<unk>", "\n<s>\n",
// "\n</s>\n"; kvdemo decodes them to nothing, as its own tokenizer does its
// pad, bos and eos). Ids 3 .. 258 are the byte tokens "<0x00>" .. "<0xFF>":
// a character with no piece of its own is written as its UTF-8 bytes. A
// SentencePiece word starts with a space (the file keeps "▁" as ' '), so a
// text is encoded with one space in front of it, and that space is dropped
// again when a token right after BOS is decoded.
#ifndef KVDEMO_BPE_H
#define KVDEMO_BPE_H

#include "fileio.h"   // Err

#include <stddef.h>

// One piece in the sorted index: its bytes and its id.
typedef struct {
    const char *s;   // the piece's bytes (NUL-terminated; len counts them)
    int len;
    int id;
} BpeEntry;

typedef struct Bpe {
    int vocab_size;         // V
    int max_token_length;   // the file's header: no piece is longer
    float *scores;          // (V) merge scores: the highest merges first
    char **pieces;          // (V) each piece as in the file, NUL-terminated
    int *lens;              // (V) their lengths in bytes
    char *text;             // every piece, one allocation that pieces point into
    BpeEntry *sorted;       // (V) pieces sorted by bytes, then id: the lookup
    int byte_id[256];       // the id of byte token <0xHH>, or -1 when V has none
    int max_text_bytes;     // the most bytes a token decodes to
    char bytes[256][2];     // the one-byte text of each byte token
} Bpe;

// Reads tokenizer.bin for a model of V tokens: the int32 max_token_length,
// then V times a float32 score, an int32 length and that many bytes, and
// nothing after. Returns 0, or -1 with a one-line message naming the file.
int bpe_load(Bpe *t, const char *path, int vocab_size, Err err);
// The same from bytes in memory (name is the file's, for the messages).
int bpe_parse(Bpe *t, const unsigned char *data, size_t size, int vocab_size, const char *name, Err err);
void bpe_free(Bpe *t);   // NULL or a loaded tokenizer

// The id of the piece equal to the n bytes at s, or -1 (the lowest id when
// two pieces are equal).
int bpe_lookup(const Bpe *t, const char *s, int n);

// ids (n) = encode(text, bos, eos): BOS if asked, then " " + text split
// into UTF-8 characters, each its own piece or its byte tokens, then the
// adjacent pair whose joined piece has the highest score merged, again and
// again (the leftmost of equal scores), until no joined pair is a piece;
// then EOS if asked. Returns n, or -1 with a message (invalid UTF-8, a byte
// the vocabulary has no token for, more than max_ids tokens), or -2 with a
// message when memory ran out.
int bpe_encode(int *ids, const Bpe *t, const char *text, int bos, int eos, int max_ids, Err err);
// The text token id decodes to after token prev (-1: none): "" for <unk>,
// BOS and EOS, the byte of a byte token, the piece without its leading
// space right after BOS. The string belongs to t.
const char *bpe_token_text(const Bpe *t, int prev, int id);
// out = the texts of ids (n) one after another, NUL-terminated; stops
// before a token that would not fit. Returns the bytes written.
size_t bpe_decode(char *out, const Bpe *t, const int *ids, int n, size_t out_size);

#endif
