#!/usr/bin/python3
"""What `kvdemo train` optimises, computed by the numpy chapter's model: the
fixture that ties training's forward pass to the model `kvdemo generate` runs.

Run it with a Python that has numpy (the tests never run it; its output is
committed under tests/fixtures/):

    /usr/bin/python3 tests/train_reference.py

It reads nothing: it rebuilds model a of tests/gpt_reference.py (the same
seed gives the same weights as tests/fixtures/gpt_a.kvgp) and writes
tests/fixtures/train_forward.txt:

  train_a_tokens   two sequences of T + 1 random tokens (B, T + 1)
  train_a_logits   the full pass over the first T tokens of each (B, T, V)
  train_a_loss     F.cross_entropy of those logits against the next tokens,
                   the mean over B * T rows (float64)

Format as gpt_reference.py's: `name count v0 v1 ...`.
"""
import os

import numpy as np

import gpt_reference as ref


def cross_entropy(logits, targets):
    # F.cross_entropy(logits, targets): mean of -log_softmax[target], here in float64
    x = logits.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    logp = x - np.log(np.exp(x).sum(axis=-1, keepdims=True))
    return float(-logp[np.arange(len(targets)), targets].mean())


def main():
    spec = ref.MODELS["a"]
    cfg = (len(spec["vocab"]),) + spec["cfg_rest"]
    model = ref.GPTWithCache(cfg, ref.random_model(cfg, spec["seed"]))
    V, T, B = cfg[0], cfg[1], 2
    seqs = np.random.RandomState(7).randint(0, V, size=(B, T + 1))
    logits = np.stack([model([s[:-1].tolist()])[0][0] for s in seqs])   # (B, T, V)
    loss = cross_entropy(logits.reshape(-1, V), seqs[:, 1:].reshape(-1))
    with open(os.path.join(ref.OUT, "train_forward.txt"), "w") as f:
        f.write("# training's forward pass on model a, tests/train_reference.py\n")
        f.write(ref.line("train_a_tokens", seqs.reshape(-1), "int"))
        f.write(ref.line("train_a_logits", logits.reshape(-1), "f32"))
        f.write(ref.line("train_a_loss", [loss], "f64"))


if __name__ == "__main__":
    main()
