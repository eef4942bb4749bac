#!/usr/bin/python3
"""Writes the fixture of tests/test_train_llama.c: what training the LLaMA-style
model must compute, from the article's LLaMA code in PyTorch with autograd.

Run it from the repository's top folder with a Python that has torch and numpy:

    /usr/bin/python3 tests/llama_train_reference.py

It reads the three small models tests/llama_reference.py wrote,
tests/fixtures/llama_{mha,gqa,mqa}.bin (V 27, C 16, L 2, H 4, G 4 / 2 / 1,
F 40), into the article's Transformer (the classes of tests/llama_reference.py,
which lesson 3 follows), and for each feeds a batch of 2 sequences of T = 8
tokens at start_pos 0 with the causal mask, as Transformer.forward does, but
keeping the logits of every position (training predicts every next token).
The loss is F.cross_entropy against the next tokens, the mean over the 16
rows; loss.backward() gives every weight's gradient. It writes
tests/fixtures/llama_train.txt:

  NAME.tokens              (2, 9) the sequences: inputs [:, :8], targets [:, 1:]
  NAME.loss                (1)
  NAME.grad.TENSOR         each weight's gradient, in kvdemo's layout (Linear
                           weights (in, out), i.e. PyTorch's .grad.T), TENSOR
                           one of tok_embeddings, layers.L.attention_norm,
                           layers.L.wq ... layers.L.w3, norm, output

In the format of tests/llama_reference.py (KEY ROWS COLS v0 v1 ...).
"""
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

import llama_reference as ref

B, T = 2, 8


def read_model(path, n_kv_heads, seed):
    """The Transformer of ref.build_model with the weights of a KVLM file."""
    model, _, args = ref.build_model(n_kv_heads, seed)
    with open(path, "rb") as f:
        data = f.read()
    head = struct.unpack("<4s8I2f", data[:44])
    assert head[0] == b"KVLM" and head[1] == 1, path
    V, C, L, H, G, Fh, Tm = head[2:9]
    assert (V, C, L, H, G, Fh) == (args.vocab_size, args.dim, args.n_layers, args.n_heads,
                                   n_kv_heads, args.hidden_dim), path
    w = np.frombuffer(data, dtype="<f4", offset=44 + 4 * V)
    at = [0]

    def take(param, transposed):
        shape = param.shape[::-1] if transposed else param.shape
        n = int(np.prod(shape))
        t = torch.from_numpy(w[at[0]: at[0] + n].copy()).reshape(*shape)
        at[0] += n
        param.copy_(t.T if transposed else t)

    with torch.no_grad():
        take(model.tok_embeddings.weight, False)
        for layer in model.layers:
            take(layer.attention_norm.weight, False)
            for lin in (layer.attention.wq, layer.attention.wk, layer.attention.wv,
                        layer.attention.wo):
                take(lin.weight, True)
            take(layer.ffn_norm.weight, False)
            for lin in (layer.feed_forward.w1, layer.feed_forward.w2, layer.feed_forward.w3):
                take(lin.weight, True)
        take(model.norm.weight, False)
        take(model.output.weight, True)
    assert at[0] == len(w), path
    return model, args


def training_loss(model, tokens):
    """Transformer.forward(tokens[:, :-1], start_pos=0) with gradients, the logits
    of every position, and the mean cross-entropy against tokens[:, 1:]."""
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    _bsz, seqlen = inputs.shape
    h = model.tok_embeddings(inputs)
    freqs_cis = model.freqs_cis[0:seqlen]
    mask = torch.full((1, 1, seqlen, seqlen), float("-inf"))
    mask = torch.triu(mask, diagonal=0 + 1).type_as(h)
    for layer in model.layers:
        h = layer(h, 0, freqs_cis, mask)
    h = model.norm(h)
    logits = model.output(h).float()   # (bsz, seqlen, V): every position
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def gradient_lines(name, model):
    def g(param, transposed):
        return param.grad.T if transposed else param.grad

    out = [ref.line(f"{name}.grad.tok_embeddings", g(model.tok_embeddings.weight, False))]
    for i, layer in enumerate(model.layers):
        a, f = layer.attention, layer.feed_forward
        for key, param, tr in (("attention_norm", layer.attention_norm.weight, False),
                               ("wq", a.wq.weight, True), ("wk", a.wk.weight, True),
                               ("wv", a.wv.weight, True), ("wo", a.wo.weight, True),
                               ("ffn_norm", layer.ffn_norm.weight, False),
                               ("w1", f.w1.weight, True), ("w2", f.w2.weight, True),
                               ("w3", f.w3.weight, True)):
            out.append(ref.line(f"{name}.grad.layers.{i}.{key}", g(param, tr)))
    out.append(ref.line(f"{name}.grad.norm", g(model.norm.weight, False)))
    out.append(ref.line(f"{name}.grad.output", g(model.output.weight, True)))
    return out


def main():
    torch.set_num_threads(1)
    lines = []
    for name, n_kv_heads, seed in (("mha", 4, 10), ("gqa", 2, 11), ("mqa", 1, 12)):
        model, args = read_model(os.path.join(ref.OUT, f"llama_{name}.bin"), n_kv_heads, seed)
        torch.manual_seed(20 + n_kv_heads)
        tokens = torch.randint(0, args.vocab_size, (B, T + 1))
        model.zero_grad()
        loss = training_loss(model, tokens)
        loss.backward()
        lines += [ref.line(f"{name}.tokens", tokens), ref.line(f"{name}.loss", [loss.item()])]
        lines += gradient_lines(name, model)
    ref.write_lines(os.path.join(ref.OUT, "llama_train.txt"),
                    "# loss and gradients of llama_{mha,gqa,mqa}.bin on 2 x 8 tokens, from the "
                    "article's Transformer with autograd (tests/llama_train_reference.py)\n", lines)


if __name__ == "__main__":
    main()
