#!/usr/bin/python3
"""How fast PyTorch trains the shipped model's shape on this machine: the
yardstick for the training figure of `kvdemo bench --train`. Never run by
the tests.

The model is the numpy chapter's char GPT (tests/gpt_reference.py): V = 65,
T = 256, C = 384, 6 heads, 6 blocks, GELU's tanh form, LayerNorm, a causal
mask, AdamW; one step is forward, backward and the update on 16 sequences of
256 tokens, as kvdemo trains (docs/training.md). The tokens are random: the
speed does not depend on them.

PyTorch at its best on a machine like kvdemo's test machine:

    sudo apt-get install python3-torch libopenblas0-pthread
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=4294967296 \\
        /usr/bin/python3 tests/torch_train_speed.py [STEPS] [THREADS]

Prints the tokens per second of the timed steps (after two warm-up steps).
"""
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

V, T, C, H, L, B = 65, 256, 384, 6, 6, 16


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc1 = nn.Linear(C, 4 * C)
        self.fc2 = nn.Linear(4 * C, C)
        self.register_buffer("mask", torch.triu(torch.full((T, T), float("-inf")), 1))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (z.view(b, t, H, C // H).transpose(1, 2) for z in (q, k, v))
        s = q @ k.transpose(-2, -1) / math.sqrt(C // H) + self.mask[:t, :t]
        y = (F.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, t, C)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, C)
        self.pos = nn.Embedding(T, C)
        self.blocks = nn.Sequential(*[Block() for _ in range(L)])
        self.ln = nn.LayerNorm(C)
        self.head = nn.Linear(C, V, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        return self.head(self.ln(self.blocks(x)))


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    torch.set_num_threads(threads)
    torch.manual_seed(42)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    x = torch.randint(0, V, (B, T))
    y = torch.randint(0, V, (B, T))

    def step():
        loss = F.cross_entropy(model(x).view(-1, V), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dt = time.perf_counter() - t0
    print("PyTorch %s, %d threads, batch %d x %d: %.0f tokens/s (%d steps, %.2f s a step)" % (
        torch.__version__, threads, B, T, steps * B * T / dt, steps, dt / steps))


if __name__ == "__main__":
    main()
