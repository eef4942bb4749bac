#!/usr/bin/python3
"""Writes tests/fixtures/llama_window_torch.txt: lesson 14's window rules
past the context, from the article's LLaMA code in PyTorch.

Run it from the repository's top folder with a Python that has torch and numpy:

    /usr/bin/python3 tests/llama_window_torch_reference.py

The model is tests/fixtures/llama_mha.bin (V 27, C 16, L 2, H 4, G 4, F 40,
T 16), loaded into the Transformer of tests/llama_reference.py (the
article's section 3.1 classes), and the text the 40 tokens of
tests/fixtures/llama_window.txt (2.5 contexts). Where
tests/llama_window_reference.py feeds one token at a time into a cache that
evicts rows, this script states the same rule as a mask on one pass over
the whole text: every key rotated at its own position (keys cached after
rotation, as llama2.c and Hugging Face do; freqs_cis precomputed for 80
positions), and the query at position p sees only

  rolling   (W = 6)          positions p - 5 .. p
  sinks     (S = 2, W = 6)   positions 0, 1 and p - 3 .. p

(every other score -inf). A row's hidden state at each layer depends only
on its own mask row and on the rows before it, so one masked pass gives the
logits a cache with that eviction gives when it decodes token by token. It
writes the logits of the next token at every position:

  tokens          (1, 40)
  rolling_logits  (40, 27)
  sinks_logits    (40, 27)

The tests never run this script; they read its output
(tests/test_llama_window.c: test_rotary_after_eviction_matches_reference).
"""
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_reference as ref  # noqa: E402  (the article's classes)

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "fixtures", "llama_mha.bin")
TOKENS = os.path.join(HERE, "fixtures", "llama_window.txt")
OUT = os.path.join(HERE, "fixtures", "llama_window_torch.txt")
W = 6


def load(path, max_seq_len):
    """The KVLM file (docs/llama-format.md, version 1, 2 or 3) into the
    article's Transformer, its context widened to max_seq_len for the longer
    text. Returns the model, its vocabulary (code points) and its window W
    (0: none; the caller applies any band as a mask)."""
    b = open(path, "rb").read()
    assert b[:4] == b"KVLM"
    version, V, C, L, H, G, F, T = struct.unpack("<8I", b[4:36])
    assert version in (1, 2, 3)
    theta, eps = struct.unpack("<2f", b[36:44])
    window = struct.unpack("<I", b[44:48])[0] if version == 3 else 0
    voff = 48 if version == 3 else 44
    vocab = list(struct.unpack(f"<{V}I", b[voff:voff + 4 * V]))
    off = voff + 4 * V
    w = np.frombuffer(b, dtype="<f4", offset=off)
    at = [0]

    def take(rows, cols):  # row-major (rows, cols), kvdemo's (in, out)
        a = w[at[0]:at[0] + rows * cols].reshape(rows, cols)
        at[0] += rows * cols
        return torch.tensor(a.copy())

    args = ref.Args(vocab_size=V, dim=C, n_layers=L, n_heads=H, n_kv_heads=G, hidden_dim=F,
                    max_batch_size=1, max_seq_len=max_seq_len, rope_theta=theta, norm_eps=eps)
    model = ref.Transformer(args)
    D = C // H
    with torch.no_grad():
        model.tok_embeddings.weight.copy_(take(V, C))
        for layer in model.layers:
            layer.attention_norm.weight.copy_(take(1, C)[0])
            layer.attention.wq.weight.copy_(take(C, H * D).T)   # nn.Linear keeps (out, in)
            layer.attention.wk.weight.copy_(take(C, G * D).T)
            layer.attention.wv.weight.copy_(take(C, G * D).T)
            layer.attention.wo.weight.copy_(take(H * D, C).T)
            layer.ffn_norm.weight.copy_(take(1, C)[0])
            layer.feed_forward.w1.weight.copy_(take(C, F).T)
            layer.feed_forward.w2.weight.copy_(take(F, C).T)
            layer.feed_forward.w3.weight.copy_(take(C, F).T)
        model.norm.weight.copy_(take(1, C)[0])
        model.output.weight.copy_(take(C, V).T)
    assert at[0] * 4 + off == len(b) - (4 if version > 1 else 0)   # then the checksum
    return model, vocab, window


def window_mask(P, S):
    """(1, 1, P, P): 0 where the query at p sees the key at j, -inf elsewhere."""
    mask = torch.full((1, 1, P, P), float("-inf"))
    for p in range(P):
        for j in range(p + 1):
            if j > p - (W - S) or j < S:   # the last W - S positions, and the S sinks
                mask[0, 0, p, j] = 0.0
    return mask


@torch.inference_mode()
def logits_under(model, tokens, mask):
    """Transformer.forward of the article on the whole text from position 0,
    with the given mask, and every row's logits (not only the last)."""
    P = tokens.shape[1]
    h = model.tok_embeddings(tokens)
    freqs_cis = model.freqs_cis[0:P]
    for layer in model.layers:
        h = layer(h, 0, freqs_cis, mask)
    h = model.norm(h)
    return model.output(h)[0].float()


def read_tokens(path):
    for ln in open(path):
        if ln.startswith("tokens "):
            f = ln.split()
            return [int(float(v)) for v in f[3:3 + int(f[2])]]
    raise SystemExit(f"{path}: no tokens line")


def main():
    tokens = read_tokens(TOKENS)
    P = len(tokens)
    model, _, _ = load(MODEL, P)
    t = torch.tensor([tokens])
    lines = [ref.line("tokens", [tokens]),
             ref.line("rolling_logits", logits_under(model, t, window_mask(P, 0))),
             ref.line("sinks_logits", logits_under(model, t, window_mask(P, 2)))]
    ref.write_lines(OUT, "# made by tests/llama_window_torch_reference.py from tests/fixtures/llama_mha.bin "
                    "and the tokens of tests/fixtures/llama_window.txt\n", lines)


if __name__ == "__main__":
    main()
