#!/usr/bin/python3
"""The numpy chapter's char GPT, as its classes compute it, and the fixtures
kvdemo's tests compare against.

Run it with a Python that has numpy (the tests never run it; its output is
committed under tests/fixtures/):

    /usr/bin/python3 tests/gpt_reference.py

It writes, in tests/fixtures/:

  gpt_a.kvgp, gpt_b.kvgp   two small random models, written by following
                           docs/model-format.md (write_kvgp below)
  gpt_init7.kvgp           the model of gpt_b's shape that gpt_init_random
                           must make for seed 7 (numpy's own normal draws)
  gpt_forward.txt          logits of full passes (every row) on both models
  gpt_generate.txt         the chapter's generate with np.random.seed(42),
                           with and without the cache, on both models
  gpt_sampler.txt          numpy's own draws: random_sample, standard_normal,
                           pairwise np.sum, the chapter's softmax, and
                           np.random.choice with a fixed p

Text format, one array per line: `name count v0 v1 ...`; float32 values
written with 9 significant digits and float64 with 17 (both read back
exactly), integers as integers.
"""
import os
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")


# ---------------------------------------------------------------------------
# The model, float32 throughout, as the chapter's classes (src.gpt and the
# chapter's *WithCache subclasses). Linear weights are (in, out): x @ W + b.

def layer_norm(x, w, b, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + np.float32(eps)) * w + b


def gelu(x):
    return np.float32(0.5) * x * (np.float32(1) + np.tanh(
        np.float32(np.sqrt(2 / np.pi)) * (x + np.float32(0.044715) * x ** 3)))


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


class GPTWithCache:
    """GPTWithCache of the chapter: embedding with a position offset, blocks
    whose attention concatenates the cache, output layer."""

    def __init__(self, cfg, params):
        self.V, self.T, self.C, self.H, self.L = cfg
        self.p = params   # name -> float32 array, names of docs/model-format.md

    def embedding(self, x, offset=0):
        # GPTEmbeddingWithCache.forward
        token = self.p["token_embedding"][x]
        position = self.p["position_embedding"][np.arange(offset, offset + x.shape[1])]
        return token + position

    def attention(self, l, x, use_cache=False, cache=None):
        # GPTAttentionWithCache.forward
        p = lambda name: self.p["blocks.%d.%s" % (l, name)]
        norm = layer_norm(x, p("ln1.weight"), p("ln1.bias"))
        head_embedding_size = self.C // self.H
        multi_head_shape = (-1, x.shape[1], self.H, head_embedding_size)
        shape = (-1, x.shape[1], self.C)
        query = (norm @ p("attn.query.weight") + p("attn.query.bias")).reshape(multi_head_shape).transpose((0, 2, 1, 3))
        key = (norm @ p("attn.key.weight") + p("attn.key.bias")).reshape(multi_head_shape).transpose((0, 2, 3, 1))
        value = (norm @ p("attn.value.weight") + p("attn.value.bias")).reshape(multi_head_shape).transpose((0, 2, 1, 3))
        if use_cache and cache is not None:
            key = np.concatenate([cache[0], key], axis=3)
            value = np.concatenate([cache[1], value], axis=2)
        new_cache = (key, value) if use_cache else None
        scale = np.array(1.0 / np.sqrt(head_embedding_size))
        scores = (query @ key * scale).astype(np.float32)
        if cache is None:
            n = scores.shape[-1]
            scores = scores + np.triu(np.full((n, n), -np.inf, dtype=np.float32), 1)
        weights = softmax(scores)
        output = (weights @ value).transpose((0, 2, 1, 3)).reshape(shape) @ p("attn.output.weight") + p("attn.output.bias")
        return x + output, new_cache

    def feed_forward(self, l, x):
        # GPTFeedForward.forward
        p = lambda name: self.p["blocks.%d.%s" % (l, name)]
        norm = layer_norm(x, p("ln2.weight"), p("ln2.bias"))
        hidden = gelu(norm @ p("mlp.fc1.weight") + p("mlp.fc1.bias"))
        return x + hidden @ p("mlp.fc2.weight") + p("mlp.fc2.bias")

    def output(self, x):
        # GPTOutput.forward
        norm = layer_norm(x, self.p["ln_f.weight"], self.p["ln_f.bias"])
        return norm @ self.p["head.weight"] + self.p["head.bias"]

    def __call__(self, x, use_cache=False, caches=None, offset=0):
        # GPTWithCache.forward
        x = self.embedding(np.asarray(x), offset)
        new_caches = []
        for i in range(self.L):
            cache = caches[i] if caches is not None else None
            x, new_cache = self.attention(i, x, use_cache, cache)
            x = self.feed_forward(i, x)
            new_caches.append(new_cache)
        return self.output(x), new_caches


def generate(model, vocab, prompt, steps=256, use_cache=True):
    """GPTTrainerWithCache.generate of the chapter, line for line."""
    context_size = model.T
    tokens = [vocab.index(ch) for ch in prompt]   # dataset.encode(prompt)
    caches = None
    for _ in range(steps):
        if use_cache and caches is not None and len(tokens) <= context_size:
            feature = [tokens[-1:]]
            offset = len(tokens) - 1
        else:
            feature = [tokens[-context_size:]]
            offset = 0
            caches = None
        logits, caches = model(feature, use_cache, caches, offset)
        last_logits = logits[0, -1]   # the chapter's Tensor: logits.data[0, -1]
        exp = np.exp(last_logits - np.max(last_logits))
        probs = exp / np.sum(exp)
        token = np.random.choice(len(probs), p=probs)
        tokens.append(token)
    return tokens, "".join(vocab[t] for t in tokens)   # dataset.decode(tokens)


# ---------------------------------------------------------------------------
# The model file, written by following docs/model-format.md

def tensor_names(L):
    names = ["token_embedding", "position_embedding"]
    for l in range(L):
        for n in ["ln1.weight", "ln1.bias", "attn.query.weight", "attn.query.bias",
                  "attn.key.weight", "attn.key.bias", "attn.value.weight", "attn.value.bias",
                  "attn.output.weight", "attn.output.bias", "ln2.weight", "ln2.bias",
                  "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"]:
            names.append("blocks.%d.%s" % (l, n))
    return names + ["ln_f.weight", "ln_f.bias", "head.weight", "head.bias"]


def tensor_shapes(cfg):
    V, T, C, H, L = cfg
    F = 4 * C
    block = [(C,), (C,), (C, C), (C,), (C, C), (C,), (C, C), (C,), (C, C), (C,),
             (C,), (C,), (C, F), (F,), (F, C), (C,)]
    return [(V, C), (T, C)] + block * L + [(C,), (C,), (C, V), (V,)]


def write_kvgp(path, vocab, T, H, tensors):
    """vocab: a str of V distinct characters; tensors: float arrays in the order
    of the table in docs/model-format.md (linear weights shaped (in, out))."""
    V, C = tensors[0].shape
    L = (len(tensors) - 6) // 16
    body = b"KVGP" + np.array([2, V, T, C, H, L], dtype="<u4").tobytes()
    body += np.array([ord(ch) for ch in vocab], dtype="<u4").tobytes()
    for t in tensors:
        body += np.ascontiguousarray(t, dtype="<f4").tobytes()
    with open(path, "wb") as f:
        f.write(body)
        # version 2 ends with the Adler-32 of every byte before it
        f.write(np.array([zlib.adler32(body)], dtype="<u4").tobytes())


def random_model(cfg, seed):
    """Weights large enough that attention and the MLP matter (std 0.02 would
    give near-uniform logits): every tensor random, biases included."""
    V, T, C, H, L = cfg
    rs = np.random.RandomState(seed)
    params = {}
    for name, shape in zip(tensor_names(L), tensor_shapes(cfg)):
        if name.endswith("embedding"):
            t = rs.standard_normal(shape)
        elif name.endswith(("ln1.weight", "ln2.weight")) or name == "ln_f.weight":
            t = 1 + 0.1 * rs.standard_normal(shape)
        elif name.endswith("bias"):
            t = 0.1 * rs.standard_normal(shape)
        elif name == "head.weight":
            t = 3 * rs.standard_normal(shape) / np.sqrt(shape[0])
        else:
            t = rs.standard_normal(shape) / np.sqrt(shape[0])
        params[name] = t.astype(np.float32)
    return params


def init_like_kvdemo(cfg, seed):
    """What gpt_init_random(cfg, vocab, seed) promises: np.random.seed(seed),
    then per tensor in file order: LayerNorm weights 1, biases 0, the rest
    np.random.normal(0, 0.02, shape) as float32."""
    np.random.seed(seed)
    params = {}
    for name, shape in zip(tensor_names(cfg[4]), tensor_shapes(cfg)):
        if name.endswith(("ln1.weight", "ln2.weight")) or name == "ln_f.weight":
            t = np.ones(shape)
        elif name.endswith("bias"):
            t = np.zeros(shape)
        else:
            t = np.random.normal(0.0, 0.02, shape)
        params[name] = t.astype(np.float32)
    return params


# ---------------------------------------------------------------------------
# Fixtures

def line(name, values, kind):
    fmt = {"f32": lambda v: "%.9g" % np.float32(v), "f64": lambda v: "%.17g" % v, "int": lambda v: "%d" % v}[kind]
    values = list(values)
    return "%s %d %s\n" % (name, len(values), " ".join(fmt(v) for v in values))


# A: a vocabulary beyond ASCII (newline, accents, Cyrillic, CJK); context 16,
# so that 40 generation steps run past it. B: one block, heads of 8 (a scale
# 1/sqrt(8) that is not a power of two), context 8.
MODELS = {
    "a": dict(vocab="\n !,.:?ADEMORabdehilmnorstéж天气", cfg_rest=(16, 32, 4, 2), seed=1),
    "b": dict(vocab="\n ABCDEFGHI", cfg_rest=(8, 24, 3, 1), seed=2),
}
PROMPTS = {"a": "ROMEO:", "b": "ABC"}
STEPS = 40


def main():
    os.makedirs(OUT, exist_ok=True)
    forward = []
    gen = []
    for key, spec in MODELS.items():
        vocab = spec["vocab"]
        assert len(set(vocab)) == len(vocab)
        cfg = (len(vocab),) + spec["cfg_rest"]
        params = random_model(cfg, spec["seed"])
        write_kvgp(os.path.join(OUT, "gpt_%s.kvgp" % key), vocab, cfg[1], cfg[3],
                   [params[n] for n in tensor_names(cfg[4])])
        model = GPTWithCache(cfg, params)
        V, T = cfg[0], cfg[1]
        # Full passes (no cache, offset 0): every row's logits.
        rs = np.random.RandomState(100 + spec["seed"])
        for n in [1, 5, T]:
            tokens = rs.randint(0, V, size=n)
            logits, _ = model([tokens.tolist()])
            forward.append(line("model_%s_tokens" % key, tokens, "int"))
            forward.append(line("model_%s_logits" % key, logits[0].reshape(-1), "f32"))
        # The chapter's generate, seed 42, with and without the cache.
        for use_cache in [False, True]:
            np.random.seed(42)
            tokens, text = generate(model, vocab, PROMPTS[key], STEPS, use_cache)
            tag = "model_%s_%s" % (key, "cache" if use_cache else "nocache")
            gen.append(line(tag + "_tokens", tokens, "int"))
            gen.append(line(tag + "_text_utf8", text.encode("utf-8"), "int"))
        if gen[-4] != gen[-2].replace("_cache", "_nocache"):
            print("warning: numpy's own cached and uncached texts differ on model", key, file=sys.stderr)

    with open(os.path.join(OUT, "gpt_forward.txt"), "w") as f:
        f.write("# logits of full passes, tests/gpt_reference.py\n")
        f.writelines(forward)
    with open(os.path.join(OUT, "gpt_generate.txt"), "w") as f:
        f.write("# the chapter's generate, np.random.seed(42), %d steps; tests/gpt_reference.py\n" % STEPS)
        f.write(line("prompt_a_utf8", PROMPTS["a"].encode("utf-8"), "int"))
        f.write(line("prompt_b_utf8", PROMPTS["b"].encode("utf-8"), "int"))
        f.writelines(gen)

    # gpt_init_random's promise, for model b's shape and seed 7.
    vocab = MODELS["b"]["vocab"]
    cfg = (len(vocab),) + MODELS["b"]["cfg_rest"]
    params = init_like_kvdemo(cfg, 7)
    write_kvgp(os.path.join(OUT, "gpt_init7.kvgp"), vocab, cfg[1], cfg[3],
               [params[n] for n in tensor_names(cfg[4])])

    # The sampler: numpy's own draws.
    s = []
    np.random.seed(42)
    s.append(line("random_sample", np.random.random_sample(20), "f64"))
    np.random.seed(42)
    s.append(line("standard_normal", np.random.standard_normal(21), "f64"))
    np.random.seed(42)
    s.append(line("normal_002", np.random.normal(0.0, 0.02, 9).astype(np.float32), "f32"))
    np.random.seed(4294967295)
    s.append(line("random_sample_seed_max", np.random.random_sample(3), "f64"))
    for n in [1, 7, 8, 9, 65, 127, 128, 129, 200, 1000, 4099]:
        x = np.random.RandomState(7).random_sample(n).astype(np.float32)
        s.append(line("sum_%d" % n, [np.sum(x)], "f32"))
    last_logits = (np.random.RandomState(3).standard_normal(65) * 2).astype(np.float32)
    s.append(line("logits", last_logits, "f32"))
    exp = np.exp(last_logits - np.max(last_logits))
    probs = exp / np.sum(exp)
    s.append(line("probs", probs, "f32"))
    np.random.seed(42)
    s.append(line("choice", [np.random.choice(len(probs), p=probs) for _ in range(500)], "int"))
    with open(os.path.join(OUT, "gpt_sampler.txt"), "w") as f:
        f.write("# numpy %s's legacy RandomState draws; tests/gpt_reference.py\n" % np.__version__)
        f.writelines(s)


if __name__ == "__main__":
    main()
