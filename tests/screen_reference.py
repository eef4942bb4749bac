#!/usr/bin/python3
"""Fixtures for the screens of --step / --width, made by PyTorch.

A tensor row too wide for the screen keeps its first and last k columns and
elides the rest as "...", as PyTorch prints a tensor it summarises. This
script prints tensors with torch.set_printoptions(edgeitems=k, threshold=0)
(every dimension longer than 2k summarised: rows are kept short here, so
only the columns are; no line is wrapped: linewidth=1000) and writes what
PyTorch shows. tests/test_screen.c gives kvdemo the width of PyTorch's
widest line and expects the same text.

  tests/fixtures/elide.txt   case PRECISION NDIM SHAPE / values ... / edge K /
                             the text print(t) shows / @@

Run with Debian's python3 (python3-torch): /usr/bin/python3 tests/screen_reference.py
kvdemo's tests read the fixture; they never run Python.
"""
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")

g = torch.Generator().manual_seed(14)


def row_values(*shape):
    # 0.1 .. 0.9 with either sign, 4 decimals: every element prints as wide as
    # the others, so that the width PyTorch measures over the shown elements
    # is the width over all of them. The first of each row is negative.
    t = (torch.rand(*shape, generator=g) * 0.8 + 0.1) * torch.sign(torch.randn(*shape, generator=g))
    t = torch.round(t * 10000) / 10000
    t[..., 0] = -t[..., 0].abs()
    return t


cases = [
    (4, 1, row_values(12)), (4, 2, row_values(12)), (4, 3, row_values(20)),
    (4, 1, row_values(2, 9)), (4, 2, row_values(3, 12)), (4, 3, row_values(4, 40)),
    (4, 5, row_values(2, 64)), (2, 2, row_values(2, 16)), (6, 1, row_values(1, 5)),
]
with open(os.path.join(OUT, "elide.txt"), "w") as f:
    f.write("# made by tests/screen_reference.py (PyTorch %s)\n" % torch.__version__)
    for precision, k, t in cases:
        torch.set_printoptions(precision=precision, edgeitems=k, threshold=0, linewidth=1000)
        f.write("case %d %d %s\n" % (precision, t.dim(), " ".join(str(s) for s in t.shape)))
        f.write("values %s\n" % " ".join("%.9g" % v for v in t.reshape(-1).tolist()))
        f.write("edge %d\n" % k)
        f.write(str(t) + "\n@@\n")
torch.set_printoptions(profile="default")
print("wrote", len(cases), "cases")
