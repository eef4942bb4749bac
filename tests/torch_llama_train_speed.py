#!/usr/bin/python3
"""How fast PyTorch trains the LLaMA-style shape of `kvdemo train --arch
llama` on this machine: the yardstick for its tokens/s (docs/training.md).
Never run by the tests.

The model is the article's LLaMA (RMSNorm, rotary embeddings, grouped
key/value heads repeated as repeat_kv does, SwiGLU, no biases), written for
training without the inference cache: V = 68, T = 128, C = 128, H = 8, G
(default 8), L = 4, F = 352; one step is forward, backward and AdamW on 16
sequences of 128 tokens, as kvdemo trains. The tokens are random: the speed
does not depend on them. Run as tests/torch_train_speed.py says:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=4294967296 \\
        /usr/bin/python3 tests/torch_llama_train_speed.py [STEPS] [THREADS] [G]

Prints the tokens per second of the timed steps (after two warm-up steps).
"""
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

V, T, C, H, L, FH, B = 68, 128, 128, 8, 4, 352, 16
D = C // H


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


def rope(x, cos, sin):
    # x (b, t, heads, D) as pairs (x[2i], x[2i+1]) times (cos + i sin)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(3)


class Block(nn.Module):
    def __init__(self, G):
        super().__init__()
        self.G = G
        self.attention_norm, self.ffn_norm = RMSNorm(), RMSNorm()
        self.wq = nn.Linear(C, H * D, bias=False)
        self.wk = nn.Linear(C, G * D, bias=False)
        self.wv = nn.Linear(C, G * D, bias=False)
        self.wo = nn.Linear(H * D, C, bias=False)
        self.w1 = nn.Linear(C, FH, bias=False)
        self.w2 = nn.Linear(FH, C, bias=False)
        self.w3 = nn.Linear(C, FH, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        h = self.attention_norm(x)
        q = rope(self.wq(h).view(b, t, H, D), cos, sin).transpose(1, 2)
        k = rope(self.wk(h).view(b, t, self.G, D), cos, sin).transpose(1, 2)
        v = self.wv(h).view(b, t, self.G, D).transpose(1, 2)
        k = k.repeat_interleave(H // self.G, dim=1)   # repeat_kv
        v = v.repeat_interleave(H // self.G, dim=1)
        s = q @ k.transpose(-2, -1) / math.sqrt(D) + mask
        y = (F.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, t, C)
        x = x + self.wo(y)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, G):
        super().__init__()
        self.tok = nn.Embedding(V, C)
        self.layers = nn.ModuleList([Block(G) for _ in range(L)])
        self.norm = RMSNorm()
        self.output = nn.Linear(C, V, bias=False)
        freqs = 1.0 / (10000.0 ** (torch.arange(0, D, 2).float() / D))
        angles = torch.outer(torch.arange(T).float(), freqs)   # (T, D/2)
        self.register_buffer("cos", angles.cos()[None, :, None, :])
        self.register_buffer("sin", angles.sin()[None, :, None, :])
        self.register_buffer("mask", torch.triu(torch.full((T, T), float("-inf")), 1))

    def forward(self, idx):
        x = self.tok(idx)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin, self.mask)
        return self.output(self.norm(x))


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    G = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    torch.set_num_threads(threads)
    torch.manual_seed(42)
    model = Llama(G)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.95), weight_decay=0.1)
    x = torch.randint(0, V, (B, T))
    y = torch.randint(0, V, (B, T))

    def step():
        loss = F.cross_entropy(model(x).view(-1, V), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for _ in range(2):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dt = time.perf_counter() - t0
    print("PyTorch %s, %d threads, G %d, batch %d x %d: %.0f tokens/s (%d steps, %.3f s a step)" % (
        torch.__version__, threads, G, B, T, steps * B * T / dt, steps, dt / steps))


if __name__ == "__main__":
    main()
