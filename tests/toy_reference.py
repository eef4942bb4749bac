#!/usr/bin/python3
"""Fixtures for the lessons on the article's 4-dim example, made by PyTorch.

Runs the code of seed 000, section 2 as the article prints it (step 1 with
天气, step 2 with 天气真), the cached step 2 the article describes in 2.2
(K = cat(K_last, K_cur)), the variants lessons 1, 7 and 9 need, and
PyTorch's own printing of tensors. Writes:

  tests/fixtures/toy_tensors.txt  one tensor a line: KEY ROWS COLS values...
  tests/fixtures/print.txt        tensors and the text print(t) shows for them
  tests/fixtures/toy_bits.txt     the float32 bits (hex) of every tensor that
                                  lessons 1, 2, 7 and 9 print: KEY ROWS COLS bits...

Run with Debian's python3 (python3-torch): /usr/bin/python3 tests/toy_reference.py
kvdemo's tests read the fixtures; they never run Python.
"""
import math
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")
DATA = os.path.join(HERE, "..", "data", "tianqi.txt")

rows = []
bits = []
printed = []


def dump(key, t):
    t = t.detach().to(torch.float32)
    if key.startswith("2/"):
        # What print(t) shows for every tensor of lesson 2, at the default
        # precision and at 6 decimals.
        for precision in (4, 6):
            torch.set_printoptions(precision=precision)
            printed.append("%s %d\n%s\n@@" % (key, precision, str(t)))
        torch.set_printoptions(precision=4)
    if t.dim() == 1:
        t = t.reshape(1, -1)
    vals = " ".join("%.9g" % v if math.isfinite(v) else ("-inf" if v < 0 else "inf")
                    for v in t.reshape(-1).tolist())
    rows.append("%s %d %d %s" % (key, t.shape[0], t.shape[1], vals))
    if key.split("/")[0] in ("1", "2", "7", "9"):
        words = t.contiguous().reshape(-1).view(torch.int32).tolist()
        bits.append("%s %d %d %s" % (key, t.shape[0], t.shape[1], " ".join("%08x" % (w & 0xFFFFFFFF) for w in words)))


# ---------------------------------------------------------------------------
# Section 2.1, as printed in the article (step 1, then step 2).

X = torch.tensor(
    [[0.1, 0.3, 0.2, -0.1],
     [0.2, -0.1, 0.4, 0.5]]
)
W_Q = torch.tensor(
    [[0.3, -0.3, -0.1, 0.2],
     [0.2, 0.4, 0.1, 0.3],
     [0.1, 0.2, 0.3, 0.5],
     [-0.3, 0.3, 0.4, -0.5]]
)
W_K = torch.tensor(
    [[0.1, 0.8, 0.2, -0.3],
     [0.6, 0.5, -0.3, 0.1],
     [-0.4, 0.3, 0.7, 0.2],
     [0.6, -0.1, 0.2, 0.3]]
)
W_V = torch.tensor(
    [[-0.7, 0.5, -0.9, 0.1],
     [0.1, 0.8, 0.4, 0.3],
     [0.4, 0.2, -0.4, 0.5],
     [0.1, 0.2, 0.1, -0.4]]
)
for name, t in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V)):
    dump("2/-/0/" + name, t)


def step(run, n, X, mask):
    """The article's lines, with each intermediate kept under its name."""
    Q = torch.matmul(X, W_Q)
    K = torch.matmul(X, W_K)
    V = torch.matmul(X, W_V)
    scores = torch.matmul(Q, K.T) / 2
    dump(f"2/{run}/{n}/scores", scores)
    scores += mask
    dump(f"2/{run}/{n}/masked_scores", scores)
    scores = F.softmax(scores, dim=-1)
    output = torch.matmul(scores, V)
    for name, t in (("X", X), ("Q", Q), ("K", K), ("V", V), ("mask", mask),
                    ("weights", scores), ("output", output)):
        dump(f"2/{run}/{n}/{name}", t)
    return K, V, output


mask1 = torch.tensor(
    [[0, float('-inf')],
     [0, 0],
])
X2 = torch.tensor(
    [[0.1, 0.3, 0.2, -0.1],
     [0.2, -0.1, 0.4, 0.5],
     [0.4, 0.2, 0.3, -0.1]]
)
mask2 = torch.tensor(
    [[0, float('-inf'), float('-inf')],
     [0, 0, float('-inf')],
     [0, 0, 0]
])
for run in ("no-cache", "cache"):
    K1, V1, out1 = step(run, 1, X, mask1)
step("no-cache", 2, X2, mask2)

# Section 2.2: step 2 with the cache feeds only 真; K = cat(K_last, K_cur).
x = X2[2:3]
Q = torch.matmul(x, W_Q)
K_cur = torch.matmul(x, W_K)
V_cur = torch.matmul(x, W_V)
K = torch.cat([K1, K_cur])
V = torch.cat([V1, V_cur])
scores = torch.matmul(Q, K.T) / 2
weights = F.softmax(scores, dim=-1)
output = torch.matmul(weights, V)
for name, t in (("X", x), ("Q", Q), ("K_last", K1), ("K_cur", K_cur), ("K", K),
                ("V_last", V1), ("V_cur", V_cur), ("V", V), ("scores", scores),
                ("weights", weights), ("output", output)):
    dump("2/cache/2/" + name, t)

# ---------------------------------------------------------------------------
# The rows kvdemo's data file adds after 真 (lesson 7 runs further).


def read_x(path):
    xs, in_x = [], False
    for line in open(path, encoding="utf-8"):
        f = line.split("#")[0].split()
        if not f:
            continue
        if f[0] in ("X", "W_Q", "W_K", "W_V", "scale"):
            in_x = f[0] == "X"
            continue
        if in_x:
            xs.append([float(v) for v in f[1:]])
    return torch.tensor(xs)


XALL = read_x(DATA)
assert torch.equal(XALL[:3], X2), "data/tianqi.txt must start with the article's X"


def attend(X, causal):
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    scores = Q @ K.T / 2
    if causal:
        n = X.shape[0]
        scores = scores + torch.triu(torch.full((n, n), float('-inf')), diagonal=1)
    return F.softmax(scores, dim=-1) @ V


def attend_all(X, causal):
    """mask, weights and output of one full step."""
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    n = X.shape[0]
    mask = torch.triu(torch.full((n, n), float('-inf')), diagonal=1) if causal else torch.zeros(n, n)
    weights = F.softmax(Q @ K.T / 2 + mask, dim=-1)
    return mask, weights, weights @ V


# Lesson 1: step 1 and step 2, with and without the causal mask, through
# two layers; the second reads the first's output as its X and, to keep the
# example small, has the same weights.
for causal, run in ((True, "causal"), (False, "no-mask")):
    for n in (2, 3):
        mask, weights, output = attend_all(XALL[:n], causal)
        if causal:
            dump(f"1/{run}/{n - 1}/mask", mask)
        dump(f"1/{run}/{n - 1}/K", XALL[:n] @ W_K)
        dump(f"1/{run}/{n - 1}/weights", weights)
        dump(f"1/{run}/{n - 1}/output", output)
        dump(f"1/{run}/{n - 1}/K_layer2", output @ W_K)
        dump(f"1/{run}/{n - 1}/V_layer2", output @ W_V)

# Lesson 7: the output row of the newest token at every step of the loop,
# from one token to the whole data file (step s feeds s tokens).
for n in range(1, XALL.shape[0] + 1):
    dump(f"7/-/{n}/output", attend(XALL[:n], True)[-1:])
# ... and the cache at the end: K and V of every token.
dump("7/-/0/K", XALL @ W_K)
dump("7/-/0/V", XALL @ W_V)

# Lesson 9: the newest token's output, then with old rows of Q, K or V
# changed. "changed" means the old rows multiplied by -2, plus 1 (a change
# nobody could miss); the newest row stays.
for causal, run in ((True, "causal"), (False, "no-mask")):
    X3 = XALL[:3]
    Q, K, V = X3 @ W_Q, X3 @ W_K, X3 @ W_V
    n = X3.shape[0]
    mask = torch.triu(torch.full((n, n), float('-inf')), diagonal=1) if causal else torch.zeros(n, n)

    def out(Q, K, V):
        return (F.softmax(Q @ K.T / 2 + mask, dim=-1) @ V)

    def change(T, row):
        T = T.clone()
        T[row] = T[row] * -2 + 1
        return T

    for name, t in (("Q", Q), ("K", K), ("V", V)):
        dump(f"9/{run}/0/{name}", t)
    dump(f"9/{run}/0/weights", F.softmax(Q @ K.T / 2 + mask, dim=-1))
    dump(f"9/{run}/0/output", out(Q, K, V))
    dump(f"9/{run}/0/Q_changed", change(change(Q, 0), 1))
    dump(f"9/{run}/0/K_changed", change(K, 0))
    dump(f"9/{run}/0/V_changed", change(V, 0))
    dump(f"9/{run}/0/output_old_q_changed", out(change(change(Q, 0), 1), K, V))
    dump(f"9/{run}/0/output_old_k_changed", out(Q, change(K, 0), V))
    dump(f"9/{run}/0/output_old_v_changed", out(Q, K, change(V, 0)))

# Lesson 9, first: "K和Q怎么看都很对称" -- with no mask, K @ Q.T is the
# transpose of Q @ K.T; "V的引入破坏了这一对称性" -- the output moves.
X3 = XALL[:3]
Q, K, V = X3 @ W_Q, X3 @ W_K, X3 @ W_V
dump("9/symmetry/0/scores", Q @ K.T / 2)
dump("9/symmetry/0/scores_swapped", K @ Q.T / 2)
dump("9/symmetry/0/output", F.softmax(Q @ K.T / 2, dim=-1) @ V)
dump("9/symmetry/0/output_swapped", F.softmax(K @ Q.T / 2, dim=-1) @ V)

with open(os.path.join(OUT, "lesson2_print.txt"), "w") as f:
    f.write("# made by tests/toy_reference.py (PyTorch %s): KEY PRECISION, print(t), @@\n" % torch.__version__)
    f.write("\n".join(printed) + "\n")

with open(os.path.join(OUT, "toy_tensors.txt"), "w") as f:
    f.write("# made by tests/toy_reference.py (PyTorch %s): KEY ROWS COLS values\n" % torch.__version__)
    f.write("\n".join(rows) + "\n")

with open(os.path.join(OUT, "toy_bits.txt"), "w") as f:
    f.write("# made by tests/toy_reference.py (PyTorch %s, CPU capability %s): KEY ROWS COLS float32 bits\n"
            % (torch.__version__, "".join(line.split(":", 1)[1].strip() for line in torch.__config__.show().splitlines()
                                         if "CPU capability" in line) or "unknown"))
    f.write("\n".join(bits) + "\n")

# ---------------------------------------------------------------------------
# PyTorch's printing: each case is a header line, the values, then the text
# print(t) shows, then a line "@@".

g = torch.Generator().manual_seed(0)
cases = [
    (4, X2), (4, W_Q), (4, mask2), (4, torch.matmul(X2, W_Q)),
    (4, F.softmax(torch.matmul(X2 @ W_Q, (X2 @ W_K).T) / 2 + mask2, dim=-1)),
    (2, X2), (6, X2 @ W_V), (0, X2 @ W_V),
    (4, torch.tensor([1.0, 2.0, 3.0])), (4, torch.tensor([[0.0, 0.0], [0.0, 0.0]])),
    (4, torch.tensor([1e-5, 0.5, 2.0])), (4, torch.tensor([1.0, 20000.0])),
    (4, torch.tensor([123456789.0, 1.5])), (4, torch.tensor([-0.0, 0.25, float('nan')])),
    (4, torch.tensor([float('inf'), -1.0, 2.0])), (4, torch.tensor(0.14)),
    (4, torch.randn(30, generator=g)), (4, torch.randn(3, 25, generator=g)),
    (4, torch.randn(40, 40, generator=g)), (4, torch.randn(2000, generator=g)),
    (4, torch.randn(2, 3, 4, generator=g)), (4, torch.randn(2, 3, 30, 20, generator=g)),
    (4, torch.zeros(0, 4)), (4, torch.zeros(0)), (3, torch.randn(5, 3, generator=g) * 1000),
]
with open(os.path.join(OUT, "print.txt"), "w") as f:
    f.write("# made by tests/toy_reference.py (PyTorch %s)\n" % torch.__version__)
    for precision, t in cases:
        torch.set_printoptions(precision=precision)
        vals = " ".join("%.9g" % v if math.isfinite(v) else ("nan" if math.isnan(v) else ("-inf" if v < 0 else "inf"))
                        for v in t.reshape(-1).tolist())
        f.write("case %d %d %s\n" % (precision, t.dim(), " ".join(str(s) for s in t.shape)))
        f.write("values %s\n" % vals)
        f.write(str(t) + "\n@@\n")
    torch.set_printoptions(precision=4)
print("wrote", len(rows), "tensors and", len(cases), "printing cases")
