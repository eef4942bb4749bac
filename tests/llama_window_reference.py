#!/usr/bin/python3
"""Writes tests/fixtures/llama_window.txt: the logits of a LLaMA-style model
past its context under lesson 14's window rules, from the article's
Transformer written again here in plain Python (float64, no libraries).

Run it from the repository's top folder:

    /usr/bin/python3 tests/llama_window_reference.py

The model is tests/fixtures/llama_mha.bin (made by tests/llama_reference.py
from the article's PyTorch code: V 27, C 16, L 2, H 4, G 4, F 40, T 16). A
text of P = 40 tokens (2.5 contexts) is fed one token at a time. Each key is
rotated at its own position, however far (keys cached after rotation, as
llama2.c and Hugging Face do), and the query at position p attends to:

  rolling   (W = 6)          positions p - 5 .. p
  sinks     (S = 2, W = 6)   positions 0, 1 and p - 3 .. p

which is the rule of issue 27: a rolling buffer keeps the last W, sinks +
window the first S and the last W - S. For every position it writes the
logits of the next token:

  tokens          (1, P)
  rolling_logits  (P, V)
  sinks_logits    (P, V)

It also writes tests/fixtures/llama_window_in_cache.txt: the same text on
2 sinks + a window of 6 under StreamingLLM's rotary convention (keys cached
before rotation; the cnt rows a query reads rotated at positions 0 .. cnt-1
in cache order, the query at cnt - 1):

  tokens                 (1, P)
  sinks_in_cache_logits  (P, V)

The tests never run this script; they read its output
(tests/test_llama_window.c: test_rotary_after_eviction_matches_reference).
"""
import math
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "fixtures", "llama_mha.bin")
OUT = os.path.join(HERE, "fixtures", "llama_window.txt")
OUT_IN_CACHE = os.path.join(HERE, "fixtures", "llama_window_in_cache.txt")
P, W = 40, 6


def load(path):
    b = open(path, "rb").read()
    assert b[:4] == b"KVLM"
    V, C, L, H, G, F, T = struct.unpack("<7I", b[8:36])
    theta, eps = struct.unpack("<2f", b[36:44])
    off = 44 + 4 * V
    n = (len(b) - off) // 4
    w = list(struct.unpack(f"<{n}f", b[off:off + 4 * n]))
    at = [0]

    def take(rows, cols):  # row-major (rows, cols)
        a = w[at[0]:at[0] + rows * cols]
        at[0] += rows * cols
        return [a[r * cols:(r + 1) * cols] for r in range(rows)]

    D = C // H
    m = {"V": V, "C": C, "L": L, "H": H, "G": G, "F": F, "T": T, "D": D, "theta": theta, "eps": eps}
    m["tok"] = take(V, C)
    m["layers"] = []
    for _ in range(L):
        m["layers"].append({
            "attention_norm": take(1, C)[0], "wq": take(C, H * D), "wk": take(C, G * D),
            "wv": take(C, G * D), "wo": take(H * D, C), "ffn_norm": take(1, C)[0],
            "w1": take(C, F), "w2": take(F, C), "w3": take(C, F)})
    m["norm"] = take(1, C)[0]
    m["output"] = take(C, V)
    return m


def matvec(x, w):  # x (in) @ w (in, out)
    return [sum(x[i] * w[i][j] for i in range(len(x))) for j in range(len(w[0]))]


def rmsnorm(x, weight, eps):
    r = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [x[i] * r * weight[i] for i in range(len(x))]


def rotate(x, pos, D, theta):
    # xq_ * freqs_cis: pairs (x[2i], x[2i+1]) as complex numbers times e^(i pos freq_i)
    out = list(x)
    for h in range(len(x) // D):
        for i in range(D // 2):
            freq = 1.0 / (theta ** (2 * i / D))
            c, s = math.cos(pos * freq), math.sin(pos * freq)
            a, b = x[h * D + 2 * i], x[h * D + 2 * i + 1]
            out[h * D + 2 * i] = a * c - b * s
            out[h * D + 2 * i + 1] = a * s + b * c
    return out


def held(p, S):
    return [j for j in range(p + 1) if j < S or j > p - (W - S)]


def run(m, tokens, S, in_cache=False):
    """in_cache: StreamingLLM's convention (keys cached before rotation; the
    cnt rows a query reads get positions 0 .. cnt-1 in cache order, the query
    cnt - 1), else each key and query at its own position."""
    H, G, D, L = m["H"], m["G"], m["D"], m["L"]
    keys = [[None] * len(tokens) for _ in range(L)]
    values = [[None] * len(tokens) for _ in range(L)]
    logits = []
    for p, tok in enumerate(tokens):
        x = list(m["tok"][tok])
        for l, w in enumerate(m["layers"]):
            xb = rmsnorm(x, w["attention_norm"], m["eps"])
            js = held(p, S)
            q = rotate(matvec(xb, w["wq"]), len(js) - 1 if in_cache else p, D, m["theta"])
            k = matvec(xb, w["wk"])
            keys[l][p] = k if in_cache else rotate(k, p, D, m["theta"])
            values[l][p] = matvec(xb, w["wv"])
            ks = [rotate(keys[l][j], i, D, m["theta"]) for i, j in enumerate(js)] if in_cache else \
                [keys[l][j] for j in js]
            att = []
            for h in range(H):
                g = h // (H // G)
                sc = [sum(q[h * D + d] * kj[g * D + d] for d in range(D)) / math.sqrt(D) for kj in ks]
                mx = max(sc)
                e = [math.exp(v - mx) for v in sc]
                z = sum(e)
                att += [sum(e[k] / z * values[l][j][g * D + d] for k, j in enumerate(js)) for d in range(D)]
            o = matvec(att, w["wo"])
            x = [x[i] + o[i] for i in range(len(x))]
            xb = rmsnorm(x, w["ffn_norm"], m["eps"])
            a, b = matvec(xb, w["w1"]), matvec(xb, w["w3"])
            hb = [a[i] / (1.0 + math.exp(-a[i])) * b[i] for i in range(len(a))]
            o = matvec(hb, w["w2"])
            x = [x[i] + o[i] for i in range(len(x))]
        logits.append(matvec(rmsnorm(x, m["norm"], m["eps"]), m["output"]))
    return logits


def line(name, rows):
    vals = " ".join(repr(float(v)) for r in rows for v in r)
    return f"# {name}: shape ({len(rows)}, {len(rows[0])})\n{name} {len(rows)} {len(rows[0])} {vals}\n"


def main():
    m = load(MODEL)
    tokens = [1] + [3 + (7 * i + 5) % (m["V"] - 3) for i in range(P - 1)]   # bos, then a fixed text
    with open(OUT, "w") as f:
        f.write("# made by tests/llama_window_reference.py from tests/fixtures/llama_mha.bin\n")
        f.write(line("tokens", [tokens]))
        f.write(line("rolling_logits", run(m, tokens, 0)))
        f.write(line("sinks_logits", run(m, tokens, 2)))
    with open(OUT_IN_CACHE, "w") as f:
        f.write("# made by tests/llama_window_reference.py from tests/fixtures/llama_mha.bin\n")
        f.write(line("tokens", [tokens]))
        f.write(line("sinks_in_cache_logits", run(m, tokens, 2, in_cache=True)))
    print("wrote", OUT, "and", OUT_IN_CACHE)


if __name__ == "__main__":
    main()
