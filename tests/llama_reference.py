#!/usr/bin/python3
"""Writes the fixtures of tests/test_llama.c from the article's LLaMA code in PyTorch.

Run it from the repository's top folder with a Python that has torch and numpy:

    /usr/bin/python3 tests/llama_reference.py

It writes, in tests/fixtures/:
  llama_rope.txt                 precompute_freqs_cis and apply_rotary_emb
  llama_top_p.txt                sample_top_p on fixed probabilities and fixed draws
  llama_{mha,gqa,mqa}.bin        three small models in kvdemo's KVLM format
  llama_{mha,gqa,mqa}.txt        their logits: forward calls with the cache,
                                 and LLaMA.generate (argmax, and top-p draws)

The classes below follow section 3.1 of the article (LLaMA's model.py and
generation.py). Two things the article leaves out are added as LLaMA itself
has them: key/value heads shared by groups of query heads (repeat_kv, from
LLaMA 2) and a sample_top_p whose one draw is explicit, so that C can make the
same draw. The tests never run this script; they read its output.

A fixture .txt file has one tensor per line, as tests/testutil.c reads them:
    KEY ROWS COLS v0 v1 ...
a tensor of more dimensions flattened to (shape[0], the rest), its shape in
the comment line above it; float32 values written with repr (exact round trip).
"""
import math
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
PAD, BOS, EOS = 0, 1, 2


# --- the article's code ------------------------------------------------------

def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)  # type: ignore
    freqs = torch.outer(t, freqs).float()  # type: ignore
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64
    return freqs_cis


def reshape_for_broadcast(freqs_cis, x):
    ndim = x.ndim
    assert 0 <= 1 < ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def repeat_kv(x, n_rep):
    """torch.repeat_interleave(x, dim=2, repeats=n_rep) (LLaMA 2)."""
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim)
            .reshape(bs, slen, n_kv_heads * n_rep, head_dim))


class Args:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        return output * self.weight


class Attention(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.n_local_heads = args.n_heads
        self.n_kv_heads = args.n_kv_heads
        self.n_rep = args.n_heads // args.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)
        self.cache_k = torch.zeros(
            (args.max_batch_size, args.max_seq_len, self.n_kv_heads, self.head_dim))
        self.cache_v = torch.zeros(
            (args.max_batch_size, args.max_seq_len, self.n_kv_heads, self.head_dim))

    def forward(self, x, start_pos, freqs_cis, mask):
        bsz, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)

        xq = xq.view(bsz, seqlen, self.n_local_heads, self.head_dim)
        xk = xk.view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = xv.view(bsz, seqlen, self.n_kv_heads, self.head_dim)

        xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)

        self.cache_k = self.cache_k.to(xq)
        self.cache_v = self.cache_v.to(xq)

        self.cache_k[:bsz, start_pos: start_pos + seqlen] = xk
        self.cache_v[:bsz, start_pos: start_pos + seqlen] = xv

        keys = self.cache_k[:bsz, : start_pos + seqlen]
        values = self.cache_v[:bsz, : start_pos + seqlen]
        keys = repeat_kv(keys, self.n_rep)
        values = repeat_kv(values, self.n_rep)

        xq = xq.transpose(1, 2)
        keys = keys.transpose(1, 2)
        values = values.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        self.seen = {"start_pos": start_pos, "seqlen": seqlen, "scores": tuple(scores.shape),
                     "mask": None if mask is None else mask.reshape(seqlen, -1).clone(),
                     # as read from the cache, before repeat_kv: (bsz, S, n_kv_heads, head_dim)
                     "keys": self.cache_k[:bsz, : start_pos + seqlen].clone(),
                     "values": self.cache_v[:bsz, : start_pos + seqlen].clone()}
        if mask is not None:
            scores = scores + mask  # (bs, n_local_heads, slen, cache_len + slen)
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        self.seen["probs"] = scores.clone()   # (bsz, n_local_heads, seqlen, S)
        output = torch.matmul(scores, values)  # (bs, n_local_heads, slen, head_dim)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args.dim, args.hidden_dim)
        self.attention_norm = RMSNorm(args.dim, eps=args.norm_eps)
        self.ffn_norm = RMSNorm(args.dim, eps=args.norm_eps)

    def forward(self, x, start_pos, freqs_cis, mask):
        h = x + self.attention.forward(self.attention_norm(x), start_pos, freqs_cis, mask)
        out = h + self.feed_forward.forward(self.ffn_norm(h))
        return out


class Transformer(nn.Module):
    def __init__(self, params):
        super().__init__()
        self.params = params
        self.tok_embeddings = nn.Embedding(params.vocab_size, params.dim)
        self.layers = nn.ModuleList([TransformerBlock(params) for _ in range(params.n_layers)])
        self.norm = RMSNorm(params.dim, eps=params.norm_eps)
        self.output = nn.Linear(params.dim, params.vocab_size, bias=False)
        self.freqs_cis = precompute_freqs_cis(
            params.dim // params.n_heads, params.max_seq_len * 2, params.rope_theta)

    @torch.inference_mode()
    def forward(self, tokens, start_pos):
        _bsz, seqlen = tokens.shape
        h = self.tok_embeddings(tokens)
        self.freqs_cis = self.freqs_cis.to(h.device)
        freqs_cis = self.freqs_cis[start_pos: start_pos + seqlen]

        mask = None
        if seqlen > 1:
            mask = torch.full((1, 1, seqlen, seqlen), float("-inf"), device=tokens.device)
            mask = torch.triu(mask, diagonal=start_pos + 1).type_as(h)

        for layer in self.layers:
            h = layer(h, start_pos, freqs_cis, mask)
        h = self.norm(h)
        output = self.output(h[:, -1, :])  # only compute last logits
        return output.float()


def sample_top_p(probs, p, uniform):
    """LLaMA's sample_top_p; torch.multinomial(probs_sort, 1) is replaced by the
    inverse CDF of the given uniform draws (one per row)."""
    probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True)
    probs_sum = torch.cumsum(probs_sort, dim=-1)
    mask = probs_sum - probs_sort > p
    probs_sort[mask] = 0.0
    probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
    cdf = torch.cumsum(probs_sort, dim=-1)
    next_token = torch.searchsorted(cdf, uniform.reshape(-1, 1), right=True)
    next_token = torch.minimum(next_token, (probs_sort > 0).sum(-1, keepdim=True) - 1)
    # a draw that close to a step of the CDF would make the test a coin toss
    assert torch.min(torch.abs(cdf - uniform.reshape(-1, 1))) > 1e-4, "draw too close to a step"
    next_token = torch.gather(probs_idx, -1, next_token)
    return next_token, probs_sort, probs_idx


class Tokenizer:
    def __init__(self, vocab):
        self.vocab = vocab              # code points by id; 0 for pad, bos, eos
        self.pad_id, self.bos_id, self.eos_id = PAD, BOS, EOS

    def encode(self, s, bos, eos):
        t = [self.vocab.index(ord(ch), EOS + 1) for ch in s]
        return ([self.bos_id] if bos else []) + t + ([self.eos_id] if eos else [])


class Rng:
    """The draws of kvdemo's generate: splitmix64 (src/util/rng.c) started at the
    seed, each draw the top 24 bits of the next number over 2**24."""
    M = (1 << 64) - 1

    def __init__(self, seed):
        self.state = seed & self.M

    def uniform(self):
        self.state = (self.state + 0x9e3779b97f4a7c15) & self.M
        z = self.state
        z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & self.M
        z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & self.M
        z ^= z >> 31
        return np.float32(z >> 40) / np.float32(16777216.0)


def generate(model, tokenizer, prompts, max_gen_len, temperature, top_p, seed, use_cache=True,
             on_step=None):
    """LLaMA.generate of the article; returns tokens and the logits of each step.
    use_cache=False feeds tokens[:, 0:cur_pos] at 0 every step (kvdemo's --no-cache);
    on_step(prev_pos, cur_pos) is called after each forward call."""
    params = model.params
    bsz = len(prompts)
    assert bsz <= params.max_batch_size, (bsz, params.max_batch_size)
    rng = Rng(seed)
    prompt_tokens = [tokenizer.encode(x, bos=True, eos=False) for x in prompts]
    min_prompt_size = min([len(t) for t in prompt_tokens])
    max_prompt_size = max([len(t) for t in prompt_tokens])
    total_len = min(params.max_seq_len, max_gen_len + max_prompt_size)
    tokens = torch.full((bsz, total_len), tokenizer.pad_id).long()
    for k, t in enumerate(prompt_tokens):
        tokens[k, : len(t)] = torch.tensor(t).long()
    input_text_mask = tokens != tokenizer.pad_id
    start_pos = min_prompt_size
    prev_pos = 0
    all_logits = []
    for cur_pos in range(start_pos, total_len):
        if use_cache:
            logits = model.forward(tokens[:, prev_pos:cur_pos], prev_pos)
        else:
            logits = model.forward(tokens[:, 0:cur_pos], 0)
        if on_step:
            on_step(prev_pos if use_cache else 0, cur_pos)
        all_logits.append(logits.clone())
        if temperature > 0:
            probs = torch.softmax(logits / temperature, dim=-1)
            u = torch.tensor([rng.uniform() for _ in range(bsz)], dtype=torch.float32)
            next_token, _, _ = sample_top_p(probs, top_p, u)
        else:
            top2 = torch.topk(logits, 2, dim=-1).values
            assert torch.min(top2[:, 0] - top2[:, 1]) > 1e-4, "argmax too close to call"
            next_token = torch.argmax(logits, dim=-1)
        next_token = next_token.reshape(-1)
        # only replace token if prompt has already been generated
        next_token = torch.where(input_text_mask[:, cur_pos], tokens[:, cur_pos], next_token)
        tokens[:, cur_pos] = next_token
        prev_pos = cur_pos
    return tokens, torch.stack(all_logits)


# --- writing -----------------------------------------------------------------

def line(name, t):
    a = np.asarray(t, dtype=np.float32)
    rows = a.shape[0] if a.ndim >= 1 else 1
    cols = a.size // rows
    vals = " ".join(repr(float(v)) for v in a.reshape(-1))
    return f"# {name}: shape {tuple(a.shape)}\n{name} {rows} {cols} {vals}\n"


def write_lines(path, header, lines):
    with open(path, "w") as f:
        f.write(header)
        f.writelines(lines)
    print("wrote", path)


def rope_fixture():
    torch.manual_seed(1)
    D, T, start_pos, seqlen = 8, 16, 3, 5
    freqs_cis = precompute_freqs_cis(D, T * 2)
    xq = torch.randn(2, seqlen, 4, D)
    xk = torch.randn(2, seqlen, 2, D)
    xq_out, xk_out = apply_rotary_emb(xq, xk, freqs_cis[start_pos: start_pos + seqlen])
    write_lines(os.path.join(OUT, "llama_rope.txt"),
                "# precompute_freqs_cis(8, 32) and apply_rotary_emb at start_pos 3 "
                "(tests/llama_reference.py)\n",
                [line("freqs_cis", torch.view_as_real(freqs_cis[:T])),
                 line("start_pos", [start_pos]),
                 line("xq", xq), line("xk", xk), line("xq_out", xq_out), line("xk_out", xk_out)])


def top_p_fixture():
    torch.manual_seed(2)
    lines = []
    cases = [(1.0, 0.95, 0.30), (0.8, 0.95, 0.71), (0.8, 0.5, 0.62), (1.5, 0.9, 0.93),
             (0.5, 0.0, 0.45), (1.0, 1.0, 0.999), (2.0, 0.7, 0.05), (0.3, 0.8, 0.55)]
    for i, (temperature, p, u) in enumerate(cases):
        logits = torch.randn(12) * 2
        probs = torch.softmax(logits / temperature, dim=-1)
        tok, probs_sort, probs_idx = sample_top_p(probs.clone().reshape(1, -1), p,
                                                  torch.tensor([u], dtype=torch.float32))
        lines += [line(f"case{i}.probs", probs), line(f"case{i}.p", [p]),
                  line(f"case{i}.uniform", [u]), line(f"case{i}.token", tok.reshape(-1)),
                  line(f"case{i}.probs_sort", probs_sort.reshape(-1)),
                  line(f"case{i}.probs_idx", probs_idx.reshape(-1))]
    lines.append(line("cases", [len(cases)]))
    write_lines(os.path.join(OUT, "llama_top_p.txt"),
                "# sample_top_p(probs, p) with a fixed uniform draw (tests/llama_reference.py)\n",
                lines)


VOCAB_CHARS = "\n abcdefghij天气真好你今不错，。！？"


def write_model(path, model, vocab):
    a = model.params
    with open(path, "wb") as f:
        f.write(b"KVLM")
        f.write(struct.pack("<8I", 1, a.vocab_size, a.dim, a.n_layers, a.n_heads, a.n_kv_heads,
                            a.hidden_dim, a.max_seq_len))
        f.write(struct.pack("<2f", a.rope_theta, a.norm_eps))
        f.write(struct.pack(f"<{len(vocab)}I", *vocab))

        def w(t):  # float32, little-endian, row-major
            f.write(t.detach().numpy().astype("<f4").tobytes())

        w(model.tok_embeddings.weight)
        for layer in model.layers:
            w(layer.attention_norm.weight)
            w(layer.attention.wq.weight.T)   # kvdemo keeps Linear weights (in, out)
            w(layer.attention.wk.weight.T)
            w(layer.attention.wv.weight.T)
            w(layer.attention.wo.weight.T)
            w(layer.ffn_norm.weight)
            w(layer.feed_forward.w1.weight.T)
            w(layer.feed_forward.w2.weight.T)
            w(layer.feed_forward.w3.weight.T)
        w(model.norm.weight)
        w(model.output.weight.T)
    print("wrote", path)


def reset_cache(model):
    for layer in model.layers:
        layer.attention.cache_k.zero_()
        layer.attention.cache_v.zero_()


def build_model(n_kv_heads, seed, max_batch_size=2):
    """The small model of llama_{mha,gqa,mqa}.bin; the torch generator is left
    where model_fixture goes on from."""
    torch.manual_seed(seed)
    vocab = [0, 0, 0] + [ord(c) for c in VOCAB_CHARS]
    args = Args(vocab_size=len(vocab), dim=16, n_layers=2, n_heads=4, n_kv_heads=n_kv_heads,
                hidden_dim=40, max_batch_size=max_batch_size, max_seq_len=16, rope_theta=10000.0,
                norm_eps=1e-5)
    model = Transformer(args)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.4)
        for norm in [model.norm] + [l.attention_norm for l in model.layers] + \
                    [l.ffn_norm for l in model.layers]:
            norm.weight.copy_(1.0 + 0.2 * torch.randn(args.dim))
    return model, vocab, args


def model_fixture(name, n_kv_heads, seed):
    model, vocab, args = build_model(n_kv_heads, seed)
    write_model(os.path.join(OUT, f"llama_{name}.bin"), model, vocab)

    lines = []
    # forward with the cache: five tokens at 0, then one at 5, one at 6
    tokens = torch.randint(3, args.vocab_size, (2, 7))
    lines.append(line("tokens", tokens))
    lines.append(line("logits_0_5", model.forward(tokens[:, 0:5], 0)))
    lines.append(line("logits_5_6", model.forward(tokens[:, 5:6], 5)))
    lines.append(line("logits_6_7", model.forward(tokens[:, 6:7], 6)))
    reset_cache(model)

    tok = Tokenizer(vocab)
    prompts = ["天气", "你好，今天"]
    for run, (temperature, top_p, gen_seed) in {"argmax": (0.0, 0.95, 0),
                                                "top_p": (0.8, 0.95, 7)}.items():
        out, logits = generate(model, tok, prompts, 6, temperature, top_p, gen_seed)
        reset_cache(model)
        lines += [line(f"{run}.tokens", out), line(f"{run}.logits", logits),
                  line(f"{run}.temperature", [temperature]), line(f"{run}.top_p", [top_p]),
                  line(f"{run}.seed", [gen_seed])]
    write_lines(os.path.join(OUT, f"llama_{name}.txt"),
                f"# llama_{name}.bin (n_heads 4, n_kv_heads {n_kv_heads}): forward calls and "
                "generate(['天气', '你好，今天'], max_gen_len=6) (tests/llama_reference.py)\n",
                lines)


def default_vocab():
    """kvdemo's own vocabulary (llama_vocab_default in src/model/llama.c)."""
    return [0, 0, 0, ord("\n")] + list(range(0x20, 0x7f)) + [ord(c) for c in "天气真好你今不错，。！？"]


def lesson3_fixture():
    """The flow lesson 3 shows for its default prompts: per step of each run,
    the positions, the cache slots written and read, the mask, the scores' shape."""
    torch.manual_seed(3)
    vocab = default_vocab()
    # llama_config_default(): the weights do not matter, the flow does
    args = Args(vocab_size=len(vocab), dim=32, n_layers=2, n_heads=4, n_kv_heads=4,
                hidden_dim=64, max_batch_size=4, max_seq_len=32, rope_theta=10000.0,
                norm_eps=1e-5)
    model = Transformer(args)
    tok = Tokenizer(vocab)
    lines = []
    for run, use_cache in (("cache", True), ("no-cache", False)):
        steps = []

        def on_step(prev_pos, cur_pos):
            seen = model.layers[0].attention.seen
            steps.append((prev_pos, cur_pos, seen))

        reset_cache(model)
        generate(model, tok, ["天气", "你好，今天"], 4, 0.0, 0.95, 0, use_cache, on_step)
        lines.append(line(f"{run}.steps", [len(steps)]))
        for i, (prev_pos, cur_pos, seen) in enumerate(steps, 1):
            start, n = seen["start_pos"], seen["seqlen"]
            k = f"{run}.step{i}"
            lines += [line(f"{k}.prev_pos", [prev_pos]), line(f"{k}.cur_pos", [cur_pos]),
                      # cache_k[:bsz, start_pos : start_pos + seqlen] = xk
                      line(f"{k}.cache_write_from", [start]),
                      line(f"{k}.cache_write_to", [start + n]),
                      # keys = cache_k[:bsz, : start_pos + seqlen]
                      line(f"{k}.cache_read_to", [start + n]),
                      line(f"{k}.scores_shape", list(seen["scores"]))]
            if seen["mask"] is not None:
                lines.append(line(f"{k}.mask", seen["mask"]))
    write_lines(os.path.join(OUT, "lesson3_flow.txt"),
                "# kvdemo lesson 3 with its default prompts, from the article's generate "
                "(tests/llama_reference.py)\n", lines)


def lesson3_values_fixture():
    """What lesson 3 prints at --trace full, for `kvdemo lesson 3 --model
    tests/fixtures/llama_{mha,gqa}.bin` with the lesson's defaults (prompts
    天气 and 你好，今天, max_gen_len 4, temperature 0.8, top_p 0.95, seed 42):
    per step of each run, layer 0's scores after softmax for head 0 of each
    batch row, scores[b, 0] (seqlen, S), and keys / values of key/value head 0
    as read from the cache, keys[b, :, 0] (S, head_dim)."""
    lines = []
    for name, n_kv_heads, seed in (("mha", 4, 10), ("gqa", 2, 11)):
        # the lesson loads a model with a cache of max(bsz, 4) rows
        model, vocab, _ = build_model(n_kv_heads, seed, max_batch_size=4)
        tok = Tokenizer(vocab)
        for run, use_cache in (("cache", True), ("no-cache", False)):
            steps = []

            def on_step(prev_pos, cur_pos):
                steps.append(model.layers[0].attention.seen)

            reset_cache(model)
            generate(model, tok, ["天气", "你好，今天"], 4, 0.8, 0.95, 42, use_cache, on_step)
            lines.append(line(f"{name}.{run}.steps", [len(steps)]))
            for i, seen in enumerate(steps, 1):
                for b in range(seen["probs"].shape[0]):
                    k = f"{name}.{run}.step{i}.b{b}"
                    lines += [line(f"{k}.scores", seen["probs"][b, 0]),
                              line(f"{k}.keys", seen["keys"][b, :, 0]),
                              line(f"{k}.values", seen["values"][b, :, 0])]
    write_lines(os.path.join(OUT, "lesson3_values.txt"),
                "# kvdemo lesson 3 --trace full --model llama_{mha,gqa}.bin: layer 0's scores[b, 0] "
                "after softmax, keys[b, :, 0] and values[b, :, 0] per step, from the article's "
                "generate (tests/llama_reference.py)\n", lines)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    rope_fixture()
    top_p_fixture()
    model_fixture("mha", 4, 10)
    model_fixture("gqa", 2, 11)
    model_fixture("mqa", 1, 12)
    lesson3_fixture()
    lesson3_values_fixture()


if __name__ == "__main__":
    main()
