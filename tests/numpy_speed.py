#!/usr/bin/python3
"""How fast the chapter's numpy runs the shipped model: 256 tokens after
"ROMEO:", without and with the cache, timed as kvdemo's bench times itself:
the yardstick kvdemo's speed is compared with. Never run by the tests.

numpy at its best on a machine like kvdemo's test machine (2 cores with
AVX-512):

    sudo apt-get install libopenblas0-pthread     # OpenBLAS with its AVX-512 kernels
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=4294967296 \\
        /usr/bin/python3 tests/numpy_speed.py [MODEL] [REPEAT]

(the two MALLOC_ settings keep glibc from handing big arrays back to the
kernel, whose page faults are expensive here; GELU's cube is x*x*x).
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_reference as ref  # noqa: E402


def gelu_fast(x):
    return np.float32(0.5) * x * (np.float32(1) + np.tanh(
        np.float32(np.sqrt(2 / np.pi)) * (x + np.float32(0.044715) * (x * x * x))))


def read_kvgp(path):
    raw = open(path, "rb").read()
    assert raw[:4] == b"KVGP", "not a kvdemo model"
    _, V, T, C, H, L = np.frombuffer(raw, "<u4", 6, 4)
    cfg = (int(V), int(T), int(C), int(H), int(L))
    at = 28
    vocab = "".join(chr(c) for c in np.frombuffer(raw, "<u4", V, at))
    at += 4 * int(V)
    params = {}
    for name, shape in zip(ref.tensor_names(cfg[4]), ref.tensor_shapes(cfg)):
        n = int(np.prod(shape))
        params[name] = np.frombuffer(raw, "<f4", n, at).reshape(shape).astype(np.float32)
        at += 4 * n
    assert at == len(raw), "trailing bytes"
    return cfg, vocab, params


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "data/tinyshakespeare-gpt.bin"
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    ref.gelu = gelu_fast
    cfg, vocab, params = read_kvgp(path)
    model = ref.GPTWithCache(cfg, params)
    for use_cache in (False, True):
        times = []
        for _ in range(repeat):
            np.random.seed(42)
            t0 = time.perf_counter()
            ref.generate(model, vocab, "ROMEO:", 256, use_cache)
            times.append(time.perf_counter() - t0)
        times.sort()
        print("numpy, 256 tokens %s: min %.3f s, median %.3f s, max %.3f s (%d runs)" % (
            "with the cache" if use_cache else "without the cache", times[0], times[len(times) // 2],
            times[-1], repeat))


if __name__ == "__main__":
    main()
