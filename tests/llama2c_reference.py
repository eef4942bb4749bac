#!/usr/bin/python3
"""Writes the fixtures of tests/test_llama2c.c: a small model in llama2.c's
checkpoint format, a small tokenizer.bin, and what PyTorch computes with them.

Run it from the repository's top folder with a Python that has torch and numpy:

    /usr/bin/python3 tests/llama2c_reference.py

It writes, in tests/fixtures/:
  llama2c_gqa.bin      a llama2.c checkpoint: n_heads 4, n_kv_heads 2, shared classifier
  llama2c_mha.bin      the same shape with n_kv_heads 4 and a classifier of its own
  llama2c_tok.bin      a tokenizer.bin for both (vocab_size V)
  llama2c.txt          the reference: encodings, logits, greedy generations

Both files follow llama2.c's published format (its README, export.py's
legacy_export and tokenizer.py's export), written here from that description:

  checkpoint   int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size
               (negative: a classifier of its own follows), seq_len; then
               float32 tensors in nn.Linear's (out, in) layout, each for all
               layers in turn: tok_embeddings, attention_norm, wq, wk, wv, wo,
               ffn_norm, w1, w2, w3; norm; freqs_cos and freqs_sin
               (seq_len, head_dim / 2); output, when not shared.
  tokenizer    int32 max_token_length; then per token float32 score, int32
               length, bytes. Ids 0, 1, 2 are <unk>, BOS "\\n<s>\\n", EOS
               "\\n</s>\\n"; 3 .. 258 the byte tokens <0x00> .. <0xFF>;
               SentencePiece's "▁" is written as a space.

Encoding (the reference below): " " + text, each character its own piece or
else its UTF-8 bytes as byte tokens; then, while some adjacent pair joins into
a piece, the pair whose piece scores highest (the leftmost of equal scores) is
merged. Decoding: pieces joined, a byte token as its byte, the first space
after BOS dropped; <unk>, BOS and EOS decode to nothing (kvdemo's convention).

The model is tests/llama_reference.py's Transformer (the article's LLaMA
classes with repeat_kv): llama2.c's run.c computes the same network (RMSNorm
eps 1e-5, rope theta 10000, pairs (2i, 2i+1) rotated).

    /usr/bin/python3 tests/llama2c_reference.py --big DIR

writes instead, outside the project, a random model of stories15M's shape
(dim 288, hidden 768, 6 layers, 6 heads, vocab 32000, seq_len 256) and a
32000-token tokenizer.bin, for timing kvdemo against llama2.c's run.c.
"""
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_reference import Args, Transformer, line, write_lines  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
UNK, BOS, EOS = 0, 1, 2

# A few sentences of the kind TinyStories holds, for the merges.
CORPUS = ("Once upon a time there was a little girl named Lily. She liked to play "
          "in the sun with her dog. One day the dog ran to the park and Lily ran too.")
EXTRA_CHARS = "天\n"      # pieces of their own; 气, é and others fall back to bytes


# --- the tokenizer --------------------------------------------------------------

def byte_piece(b):
    return b"<0x%02X>" % b


def build_vocab(n_merges):
    """pieces (bytes) and scores: specials, bytes, characters, then merges learnt
    from CORPUS (most frequent pair first, scored -rank), plus two pieces of
    equal score so that a tie is tested."""
    pieces = [b"<unk>", b"\n<s>\n", b"\n</s>\n"] + [byte_piece(b) for b in range(256)]
    scores = [0.0] * len(pieces)
    chars = sorted(set(" " + CORPUS + EXTRA_CHARS))
    for i, ch in enumerate(chars):
        pieces.append(ch.encode())
        scores.append(-1000.0 - i)
    words = [list(" " + w) for w in CORPUS.split(" ")]
    for rank in range(n_merges):
        counts = {}
        for w in words:
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + 1
        if not counts:
            break
        best = max(sorted(counts), key=lambda p: counts[p])
        joined = best[0] + best[1]
        pieces.append(joined.encode())
        scores.append(-float(rank))
        for w in words:
            i = 0
            while i + 1 < len(w):
                if (w[i], w[i + 1]) == best:
                    w[i:i + 2] = [joined]
                i += 1
    # "lol": "lo" and "ol" score the same, so the leftmost pair merges first
    for p in (b"lo", b"ol"):
        if p not in pieces:
            pieces.append(p)
            scores.append(-0.5)
    pieces.append("天气".encode())   # a piece whose 气 has no piece: never reached
    scores.append(-1.0)
    return pieces, scores


def encode(pieces, scores, text, bos=True, eos=False):
    lookup = {}
    for i, p in enumerate(pieces):
        lookup.setdefault(p, i)
    ids = []
    if text:
        for ch in " " + text:
            b = ch.encode()
            if b in lookup:
                ids.append(lookup[b])
            else:
                for x in b:
                    assert pieces[3 + x] == byte_piece(x)
                    ids.append(3 + x)
    while True:
        best = None
        for i in range(len(ids) - 1):
            j = lookup.get(pieces[ids[i]] + pieces[ids[i + 1]])
            if j is not None and (best is None or scores[j] > scores[best[1]]):
                best = (i, j)
        if best is None:
            break
        i, j = best
        ids[i:i + 2] = [j]
    return [BOS] * bos + ids + [EOS] * eos


def decode(pieces, ids):
    out = b""
    for k, i in enumerate(ids):
        if i in (UNK, BOS, EOS):
            continue
        p = pieces[i]
        if 3 <= i <= 258 and p == byte_piece(i - 3):
            p = bytes([i - 3])
        elif k > 0 and ids[k - 1] == BOS and p.startswith(b" "):
            p = p[1:]
        out += p
    return out


def write_tokenizer(path, pieces, scores):
    with open(path, "wb") as f:
        f.write(struct.pack("<i", max(len(p) for p in pieces)))
        for p, s in zip(pieces, scores):
            f.write(struct.pack("<fi", s, len(p)))
            f.write(p)
    print("wrote", path)


# --- the checkpoint ---------------------------------------------------------------

def write_checkpoint(path, model, shared):
    a = model.params
    hd = a.dim // a.n_heads
    with open(path, "wb") as f:
        f.write(struct.pack("<7i", a.dim, a.hidden_dim, a.n_layers, a.n_heads, a.n_kv_heads,
                            a.vocab_size if shared else -a.vocab_size, a.max_seq_len))

        def w(t):
            f.write(t.detach().numpy().astype("<f4").tobytes())

        w(model.tok_embeddings.weight)
        for name in ("attention_norm", "attention.wq", "attention.wk", "attention.wv",
                     "attention.wo", "ffn_norm", "feed_forward.w1", "feed_forward.w2",
                     "feed_forward.w3"):
            for layer in model.layers:
                w(layer.get_submodule(name).weight)
        w(model.norm.weight)
        fc = model.freqs_cis[: a.max_seq_len]           # (T, hd / 2) complex
        w(fc.real.reshape(a.max_seq_len, hd // 2))
        w(fc.imag.reshape(a.max_seq_len, hd // 2))
        if not shared:
            w(model.output.weight)
    print("wrote", path)


def build_model(V, n_kv_heads, shared, seed):
    torch.manual_seed(seed)
    args = Args(vocab_size=V, dim=16, n_layers=2, n_heads=4, n_kv_heads=n_kv_heads,
                hidden_dim=40, max_batch_size=1, max_seq_len=24, rope_theta=10000.0,
                norm_eps=1e-5)
    model = Transformer(args)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5)
        for norm in [model.norm] + [l.attention_norm for l in model.layers] + \
                    [l.ffn_norm for l in model.layers]:
            norm.weight.copy_(1.0 + 0.2 * torch.randn(args.dim))
        if shared:
            model.output.weight.copy_(model.tok_embeddings.weight)
    return model


def reset_cache(model):
    for layer in model.layers:
        layer.attention.cache_k.zero_()
        layer.attention.cache_v.zero_()


def greedy(model, ids, steps):
    """argmax continuation of ids, one token at a time with the cache."""
    reset_cache(model)
    tokens = list(ids)
    logits = model.forward(torch.tensor([tokens]), 0)
    for _ in range(steps):
        top2 = torch.topk(logits[0], 2).values
        assert top2[0] - top2[1] > 1e-4, "argmax too close to call"
        tokens.append(int(torch.argmax(logits[0])))
        logits = model.forward(torch.tensor([tokens[-1:]]), len(tokens) - 1)
    reset_cache(model)
    return tokens


def model_lines(name, model, prompt_ids):
    """logits of the first 4 tokens fed one at a time, and of them as one
    prefill (kept few: the fixture stays small); the greedy continuation of
    the whole prompt."""
    lines = []
    n = 4
    tokens = torch.tensor([prompt_ids[:n]])
    reset_cache(model)
    per_pos = [model.forward(tokens[:, t:t + 1], t)[0] for t in range(n)]
    reset_cache(model)
    prefill = model.forward(tokens, 0)[0]
    reset_cache(model)
    lines += [line(f"{name}.tokens", prompt_ids[:n]), line(f"{name}.logits", torch.stack(per_pos)),
              line(f"{name}.prefill", prefill),
              line(f"{name}.greedy", greedy(model, prompt_ids, 10))]
    return lines


TEXTS = ["Once upon a time", "Lily liked the dog.", "lol", "天气", "héllo\nthere", "", "the sun"]


def fixtures():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    pieces, scores = build_vocab(40)
    V = len(pieces)
    write_tokenizer(os.path.join(OUT, "llama2c_tok.bin"), pieces, scores)
    lines = [line("vocab_size", [V]), line("texts", [len(TEXTS)])]
    for k, text in enumerate(TEXTS):
        ids = encode(pieces, scores, text)
        raw = text.encode()
        lines += [line(f"text{k}", list(raw) if raw else [-1]), line(f"enc{k}", ids)]
        back = decode(pieces, ids)
        assert back == raw, (back, raw)
        lines.append(line(f"dec{k}", list(back) if back else [-1]))
    prompt = encode(pieces, scores, "Once upon a time")
    for name, kv, shared, seed in (("gqa", 2, True, 21), ("mha", 4, False, 22)):
        model = build_model(V, kv, shared, seed)
        write_checkpoint(os.path.join(OUT, f"llama2c_{name}.bin"), model, shared)
        lines += model_lines(name, model, prompt)
    write_lines(os.path.join(OUT, "llama2c.txt"),
                "# llama2c_{gqa,mha}.bin and llama2c_tok.bin: encodings (text: UTF-8 bytes, "
                "-1 for none), logits one token at a time and of a prefill, greedy continuations "
                "(tests/llama2c_reference.py)\n", lines)


def big(folder):
    """stories15M's shape with random weights (numpy, seed 0), a classifier of
    its own, and a 32000-token tokenizer."""
    os.makedirs(folder, exist_ok=True)
    dim, hidden, L, H, V, T = 288, 768, 6, 6, 32000, 256
    rng = np.random.default_rng(0)
    hd = dim // H
    with open(os.path.join(folder, "model.bin"), "wb") as f:
        # a classifier of its own (vocab_size negative): with the embedding
        # shared, random weights only ever repeat the last token
        f.write(struct.pack("<7i", dim, hidden, L, H, H, -V, T))

        def w(*shape, scale):
            f.write((rng.standard_normal(shape) * scale).astype("<f4").tobytes())

        def ones(*shape):
            f.write(np.ones(shape, "<f4").tobytes())

        w(V, dim, scale=0.5)
        ones(L, dim)
        for shape in ((dim, dim), (dim, dim), (dim, dim), (dim, dim)):
            w(L, *shape, scale=dim ** -0.5)
        ones(L, dim)
        w(L, hidden, dim, scale=dim ** -0.5)
        w(L, dim, hidden, scale=hidden ** -0.5)
        w(L, hidden, dim, scale=dim ** -0.5)
        ones(dim)
        f.write(np.zeros(T * hd, "<f4").tobytes())
        w(V, dim, scale=dim ** -0.5)
    pieces, scores = build_vocab(40)
    for i in range(V - len(pieces)):
        pieces.append(b" w%d" % i)
        scores.append(-2000.0 - i)
    write_tokenizer(os.path.join(folder, "tokenizer.bin"), pieces, scores)
    print("wrote", folder)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--big":
        big(sys.argv[2])
    else:
        fixtures()
