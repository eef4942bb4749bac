#!/usr/bin/python3
"""bf16 and fp16 rounding, and int8 / int4 quantisation, as torch and numpy
do them: the fixture tests/test_kvquant.c checks kvdemo's C rounding against.

Run it with a Python that has torch and numpy (the tests never run it; its
output is committed under tests/fixtures/):

    /usr/bin/python3 tests/kvquant_reference.py

It writes tests/fixtures/kvquant.txt, one array per line, `name count v0 v1
...`, every value an integer (bit patterns) or a float32 with 9 significant
digits (read back exactly):

  input_bits   float32 bit patterns: zeros, infinities, NaNs, ties, the
               edges of fp16's range and subnormals, and random numbers of
               every magnitude
  bf16_bits    torch.tensor(x).to(torch.bfloat16), its 16 bits
  fp16_bits    np.float32(x).astype(np.float16), its 16 bits
  quant_input  4 groups of 64 float32 numbers (normal, one outlier each)
  int8_back    each group quantised symmetrically with one scale,
  int4_back    scale = max|x| / qmax (127, 7), code = rint(x / scale) clipped,
               and read back as code * scale, all in float32
"""
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "kvquant.txt")


def f32_bits(values):
    return np.array(values, dtype=np.float32).view(np.uint32)


def inputs():
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.0e38, -3.4e38,
               65504.0, 65519.0, 65519.996, 65520.0, 65536.0, 1e5,
               2.0 ** -14, 2.0 ** -15, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25,
               1.5 * 2.0 ** -24, 2.0 ** -26, 1e-8, 6.0e-8, 1e-40, -1e-40]
    bits = list(f32_bits(special))
    # ties for bf16 (low 16 bits 0x8000) and fp16 (low 13 bits 0x1000), odd
    # and even kept parts, and one past each tie
    for base in (0x3F800000, 0x3F810000, 0xC0490000, 0x40490FDB & 0xFFFF0000):
        bits += [base | 0x8000, base | 0x18000 & 0xFFFF8000 | 0x8000, base | 0x8001, base | 0x7FFF]
    for base in (0x3F800000, 0x3F802000, 0x477FE000, 0x38800000):
        bits += [base | 0x1000, base | 0x3000, base | 0x1001, base | 0x0FFF]
    rng = np.random.RandomState(16)
    # random numbers from 1e-9 to 1e6, both signs
    mags = 10.0 ** rng.uniform(-9, 6, 2000)
    signs = np.where(rng.rand(2000) < 0.5, -1.0, 1.0)
    bits += list(f32_bits(mags * signs))
    # random bit patterns (finite ones)
    raw = rng.randint(0, 2 ** 32, 1000, dtype=np.uint64).astype(np.uint32)
    raw = raw[(raw & 0x7F800000) != 0x7F800000]
    bits += list(raw)
    return np.array(bits, dtype=np.uint32)


def fake_quant(x, qmax):
    x = x.astype(np.float32)
    scale = np.float32(np.abs(x).max()) / np.float32(qmax)
    code = np.clip(np.rint(x / scale), -qmax, qmax).astype(np.float32)
    return (code * scale).astype(np.float32)


def main():
    bits = inputs()
    x = bits.view(np.float32)
    bf16 = torch.from_numpy(x.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    with np.errstate(over="ignore"):
        fp16 = x.astype(np.float16).view(np.uint16)
    rng = np.random.RandomState(1216)
    q = rng.normal(0, 1, (4, 64)).astype(np.float32)
    q[:, 5] *= 8   # an outlier per group, as keys have
    int8 = np.concatenate([fake_quant(g, 127) for g in q])
    int4 = np.concatenate([fake_quant(g, 7) for g in q])

    def ints(name, a):
        return "%s %d %s\n" % (name, len(a), " ".join(str(int(v)) for v in a))

    def floats(name, a):
        return "%s %d %s\n" % (name, len(a), " ".join("%.9g" % v for v in a))

    with open(OUT, "w") as f:
        f.write("# made by tests/kvquant_reference.py (torch %s, numpy %s)\n" % (torch.__version__, np.__version__))
        f.write(ints("input_bits", bits))
        f.write(ints("bf16_bits", bf16))
        f.write(ints("fp16_bits", fp16))
        f.write(floats("quant_input", q.reshape(-1)))
        f.write(floats("int8_back", int8))
        f.write(floats("int4_back", int4))
    print("wrote", OUT, len(bits), "rounding cases")


if __name__ == "__main__":
    main()
