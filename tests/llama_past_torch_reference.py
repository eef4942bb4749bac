#!/usr/bin/python3
"""Writes tests/fixtures/llama_past.txt: the per-character losses of lesson
14's ways past the window (src/model/llama_past.c) on the shipped models,
from the article's LLaMA code in PyTorch.

Run it from the repository's top folder with a Python that has torch and numpy:

    /usr/bin/python3 tests/llama_past_torch_reference.py

The text is bos and the first 256 characters of
data/tinyshakespeare-val-2049.txt (2 contexts of T = 128); W = 64 positions
are held. At every position i = 0, 4, 8, ... (one step in 4, as the lesson
compares them) it writes -log p(tokens[i + 1]) under each way, stated here
without a cache:

  reset      the chapter's: the tokens since the last restart, from position
             0; once W are held, restart from the last W / 2
  recompute  the last W tokens, from position 0, one causal pass
  window     one pass over the text at its own positions, the query at i
             seeing i - 63 .. i (the rolling buffer's rule)
  sinks1     the same, seeing 0 and i - 62 .. i (1 sink + window)
  sinks4     the same, seeing 0 .. 3 and i - 59 .. i (4 sinks + window)
  trained    data/tinyshakespeare-llama-window64.bin under its band of 64
             (its rolling cache's rule)

the first five on data/tinyshakespeare-llama-mha.bin. And lesson 14's sink
measurement: the mean attention weight on position 0 (bos) per layer and
head (L, H) over the queries at positions 0 .. Q-1 of one causal pass,

  sink_mha      Q = 128 (its context), data/tinyshakespeare-llama-mha.bin
  sink_window   Q = 64 (the queries whose band holds position 0),
                data/tinyshakespeare-llama-window64.bin. A masked pass gives
what a cache that evicts by the same rule gives token by token: a row's
hidden states depend only on its own mask row and on the rows before it.
The model is loaded into the Transformer of tests/llama_reference.py by
tests/llama_window_torch_reference.py's reader.

The tests never run this script; they read its output
(tests/test_llama_window.c: test_ways_past_the_window_match_reference,
test_sink_shares_match_reference).
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_reference as ref  # noqa: E402  (the article's classes)
import llama_window_torch_reference as wref  # noqa: E402  (the KVLM reader)

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MHA = os.path.join(TOP, "data", "tinyshakespeare-llama-mha.bin")
WINDOW = os.path.join(TOP, "data", "tinyshakespeare-llama-window64.bin")
TEXT = os.path.join(TOP, "data", "tinyshakespeare-val-2049.txt")
OUT = os.path.join(TOP, "tests", "fixtures", "llama_past.txt")
N_TEXT, W, EVERY = 256, 64, 4
T = 128   # the shipped models' context (max_seq_len in their files)


def encode(vocab, text):
    """bos, then one id per character (ids 0, 1, 2: pad, bos, eos)."""
    ids = {cp: i for i, cp in enumerate(vocab) if i >= 3}
    return [1] + [ids[ord(c)] for c in text]


@torch.inference_mode()
def all_logits(model, tokens, mask):
    """Every row's logits of one pass over tokens from position 0."""
    h = model.tok_embeddings(torch.tensor([tokens]))
    freqs_cis = model.freqs_cis[0:len(tokens)]
    for layer in model.layers:
        h = layer(h, 0, freqs_cis, mask)
    return model.output(model.norm(h))[0].double()


def causal_last(model, tokens):
    """The last row's logits of a causal pass over tokens from position 0."""
    n = len(tokens)
    mask = torch.triu(torch.full((1, 1, n, n), float("-inf")), diagonal=1)
    return all_logits(model, tokens, mask)[-1]


def nll(logits, target):
    return float(torch.logsumexp(logits, 0) - logits[target])


def band(n, S):
    mask = torch.full((1, 1, n, n), float("-inf"))
    for p in range(n):
        for j in range(p + 1):
            if j > p - (W - S) or j < S:
                mask[0, 0, p, j] = 0.0
    return mask


def evaluated(n):
    return [i for i in range(n - 1) if i % EVERY == 0]


def masked_way(model, tokens, S):
    lg = all_logits(model, tokens[:-1], band(len(tokens) - 1, S))
    return [nll(lg[i], tokens[i + 1]) for i in evaluated(len(tokens))]


def recompute_way(model, tokens):
    return [nll(causal_last(model, tokens[max(0, i + 1 - W):i + 1]), tokens[i + 1]) for i in evaluated(len(tokens))]


def reset_way(model, tokens):
    out, start, held = [], 0, 0
    for i in range(len(tokens) - 1):
        if held < W:
            held += 1
        else:   # the cache is full: start again from the last W / 2 tokens
            start, held = i + 1 - W // 2, W // 2
        if i % EVERY == 0:
            out.append(nll(causal_last(model, tokens[start:i + 1]), tokens[i + 1]))
    return out


def sink_shares(model, tokens):
    """(L, H): the mean over the query rows of a causal pass of the weight on
    position 0, from the article's Attention (its softmax kept in seen)."""
    n = len(tokens)
    all_logits(model, tokens, torch.triu(torch.full((1, 1, n, n), float("-inf")), diagonal=1))
    return [[float(layer.attention.seen["probs"][0, h, :, 0].double().mean())
             for h in range(model.params.n_heads)] for layer in model.layers]


def main():
    text = open(TEXT, encoding="utf-8").read()[:N_TEXT]
    mha, vocab, w0 = wref.load(MHA, N_TEXT + 1)
    win, wvocab, w1 = wref.load(WINDOW, N_TEXT + 1)
    assert w0 == 0 and w1 == W and wvocab == vocab
    tokens = encode(vocab, text)
    ways = [("reset", reset_way(mha, tokens)), ("recompute", recompute_way(mha, tokens)),
            ("window", masked_way(mha, tokens, 0)), ("sinks1", masked_way(mha, tokens, 1)),
            ("sinks4", masked_way(mha, tokens, 4)), ("trained", masked_way(win, tokens, 0))]
    lines = [ref.line("tokens", [tokens])] + [ref.line(name, [v]) for name, v in ways]
    lines += [ref.line("sink_mha", sink_shares(mha, tokens[:T])),
              ref.line("sink_window", sink_shares(win, tokens[:W]))]
    for name, v in ways:
        assert all(math.isfinite(x) for x in v)
        print(f"{name}: mean loss {sum(v) / len(v):.4f} over {len(v)} positions")
    ref.write_lines(OUT, "# made by tests/llama_past_torch_reference.py from data/tinyshakespeare-llama-mha.bin, "
                    "data/tinyshakespeare-llama-window64.bin and data/tinyshakespeare-val-2049.txt\n", lines)


if __name__ == "__main__":
    main()
