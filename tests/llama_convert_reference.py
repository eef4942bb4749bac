#!/usr/bin/python3
"""Writes tests/fixtures/llama_convert.txt: a small multi-head model's
weights and the same model converted to grouped key/value heads as the GQA
paper does before uptraining (Ainslie et al. 2023, §2.1), by mean-pooling
each group's key and value heads and by keeping each group's first head.

The grouping is the article's repeat_kv: query head h reads key/value head
h // n_rep, so a group is n_rep consecutive heads of the multi-head model.
The pooling is done here on the nn.Linear weights of Attention (wk.weight
is (n_kv_heads * head_dim, dim)), head by head, in float32 and in order:
(head 0 + head 1 + ...) / n_rep, the sum kvdemo's llama_pool_kv_heads makes.

Run it from the repository's top folder with a Python that has torch and numpy:

    /usr/bin/python3 tests/llama_convert_reference.py

The fixture's lines (tests/llama_reference.py's format) hold the whole
parameter vector in kvdemo's file order (docs/llama-format.md: wk and wv
stored (dim, n_kv_heads * head_dim), the transpose of nn.Linear's weight):

  source            the model with n_kv_heads = n_heads = 4
  mean_G, first_G   converted to G = 2 and G = 1 key/value heads
"""
import os

import numpy as np
import torch

import llama_reference as ref

V, C, L, H, F, T = 8, 8, 2, 4, 16, 8
D = C // H


def make_model(G):
    args = ref.Args(vocab_size=V, dim=C, n_layers=L, n_heads=H, n_kv_heads=G, hidden_dim=F,
                    max_batch_size=1, max_seq_len=T, rope_theta=10000.0, norm_eps=1e-5)
    return ref.Transformer(args)


def flat(model):
    """The parameters in kvdemo's file order, matrices as x @ W (in, out)."""
    parts = [model.tok_embeddings.weight]
    for layer in model.layers:
        a, f = layer.attention, layer.feed_forward
        parts += [layer.attention_norm.weight, a.wq.weight.T, a.wk.weight.T, a.wv.weight.T, a.wo.weight.T,
                  layer.ffn_norm.weight, f.w1.weight.T, f.w2.weight.T, f.w3.weight.T]
    parts += [model.norm.weight, model.output.weight.T]
    return torch.cat([p.detach().reshape(-1) for p in parts])


def pooled(weight, G, how):
    """wk.weight or wv.weight (H * D, C) of the multi-head model made into
    (G * D, C): each group of n_rep heads by the mean, or its first head."""
    n_rep = H // G
    heads = weight.detach().reshape(G, n_rep, D, C)
    if how == "first":
        return heads[:, 0].reshape(G * D, C)
    total = heads[:, 0].clone()
    for k in range(1, n_rep):
        total = total + heads[:, k]
    return (total / np.float32(n_rep)).reshape(G * D, C)


def convert(src, G, how):
    dst = make_model(G)
    with torch.no_grad():
        for name, p in dst.named_parameters():
            q = dict(src.named_parameters())[name]
            if name.endswith("attention.wk.weight") or name.endswith("attention.wv.weight"):
                p.copy_(pooled(q, G, how))
            else:
                p.copy_(q)
    return dst


def main():
    torch.manual_seed(7)
    src = make_model(H)
    with torch.no_grad():
        for p in src.parameters():
            p.copy_(torch.randn_like(p))
    lines = [ref.line("source", flat(src))]
    for G in (2, 1):
        for how in ("mean", "first"):
            lines.append(ref.line(f"{how}_{G}", flat(convert(src, G, how))))
    out = os.path.join(ref.OUT, "llama_convert.txt")
    ref.write_lines(out, f"# V {V} C {C} L {L} H {H} F {F} T {T}: MHA and its conversions (G 2, 1)\n", lines)


if __name__ == "__main__":
    main()
