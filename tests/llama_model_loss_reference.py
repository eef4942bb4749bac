#!/usr/bin/python3
"""Writes tests/fixtures/llama_shipped_loss.txt: the loss of the shipped LLaMA
model (data/tinyshakespeare-llama-mha.bin) on a fixed stretch of
tinyshakespeare's validation split, from the article's Transformer in PyTorch
(the classes of tests/llama_reference.py, which lesson 3 follows).

Run it from the repository's top folder with a Python that has torch and numpy:

    /usr/bin/python3 tests/llama_model_loss_reference.py [MODEL] [TEXT]

The fixture is named after the model: data/tinyshakespeare-llama-mha.bin
writes llama_shipped_loss.txt, data/tinyshakespeare-llama-NAME.bin (gqa4,
gqa2, mqa) writes llama_shipped_loss_NAME.txt:

    for v in mha gqa4 gqa2 mqa; do
        /usr/bin/python3 tests/llama_model_loss_reference.py data/tinyshakespeare-llama-$v.bin
    done

TEXT (default tests/fixtures/tinyshakespeare_val_1025.txt, the first 1025
characters of the validation split, the last 10%) is cut as `kvdemo train
--arch llama` cuts its windows (src/model/train_llama.h): (n - 1) // T windows of
T = max_seq_len characters; window w's targets are its T characters, its
inputs bos then the first T - 1 of them. The loss is F.cross_entropy over
every position of every window, the mean, in nats per character. The
fixture has one line, in tests/llama_reference.py's format:

  loss 1 1 VALUE

With --lesson62 it writes tests/fixtures/lesson62_trained.txt instead:
what part (3) of `kvdemo lesson 6.2` prints, on data/tinyshakespeare-val-2049.txt
(the lesson's slice, 2049 characters: 16 windows of 128), scored the same way:

    /usr/bin/python3 tests/llama_model_loss_reference.py --lesson62

  loss_mha, loss_gqa4, loss_gqa2, loss_mqa   the four shipped models
  converted_4, converted_2, converted_1      the shipped MHA model with the
      key/value heads of each group mean-pooled, in float32 and in order,
      (head 0 + head 1 + ...) / n_rep as tests/llama_convert_reference.py
      pools them (kvdemo's llama_convert, --convert mean), scored at once
  tiny_loss_NAME, tiny_converted_G           the same on the slice's first 257
      characters (2 windows), the part `--preset tiny` scores
"""
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

import llama_reference as ref

BOS = 1


def read_model(path):
    """The article's Transformer with the shape and weights of a KVLM file."""
    with open(path, "rb") as f:
        data = f.read()
    head = struct.unpack("<4s8I2f", data[:44])
    assert head[0] == b"KVLM" and head[1] in (1, 2), path
    V, C, L, H, G, Fh, T = head[2:9]
    theta, eps = head[9:11]
    vocab = list(struct.unpack(f"<{V}I", data[44:44 + 4 * V]))
    args = ref.Args(vocab_size=V, dim=C, n_layers=L, n_heads=H, n_kv_heads=G, hidden_dim=Fh,
                    max_batch_size=1, max_seq_len=T, rope_theta=theta, norm_eps=eps)
    model = ref.Transformer(args)
    end = len(data) - (4 if head[1] == 2 else 0)   # version 2 ends with its Adler-32
    w = np.frombuffer(data[:end], dtype="<f4", offset=44 + 4 * V)
    at = [0]

    def take(param, transposed):
        shape = param.shape[::-1] if transposed else param.shape
        n = int(np.prod(shape))
        t = torch.from_numpy(w[at[0]: at[0] + n].copy()).reshape(*shape)
        at[0] += n
        param.copy_(t.T if transposed else t)

    with torch.no_grad():
        take(model.tok_embeddings.weight, False)
        for layer in model.layers:
            take(layer.attention_norm.weight, False)
            for lin in (layer.attention.wq, layer.attention.wk, layer.attention.wv,
                        layer.attention.wo):
                take(lin.weight, True)
            take(layer.ffn_norm.weight, False)
            for lin in (layer.feed_forward.w1, layer.feed_forward.w2, layer.feed_forward.w3):
                take(lin.weight, True)
        take(model.norm.weight, False)
        take(model.output.weight, True)
    assert at[0] == len(w), path
    return model, args, vocab


def window_loss(model, inputs, targets):
    """Transformer.forward(inputs, start_pos=0) with the causal mask, the logits
    of every position, and the mean cross-entropy against targets."""
    _bsz, seqlen = inputs.shape
    h = model.tok_embeddings(inputs)
    freqs_cis = model.freqs_cis[0:seqlen]
    mask = torch.full((1, 1, seqlen, seqlen), float("-inf"))
    mask = torch.triu(mask, diagonal=1).type_as(h)
    for layer in model.layers:
        h = layer(h, 0, freqs_cis, mask)
    logits = model.output(model.norm(h)).float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")


def fixture_name(model_path):
    """llama_shipped_loss.txt for the MHA model, llama_shipped_loss_NAME.txt
    for data/tinyshakespeare-llama-NAME.bin (NAME gqa4, gqa2, mqa, ...)."""
    base = os.path.basename(model_path)
    prefix, suffix = "tinyshakespeare-llama-", ".bin"
    name = base[len(prefix):-len(suffix)] if base.startswith(prefix) and base.endswith(suffix) else base
    return "llama_shipped_loss.txt" if name == "mha" else f"llama_shipped_loss_{name}.txt"


def text_loss(model, args, vocab, text_path, chars=0):
    """The mean loss over the (n - 1) // T windows of the text (of its first
    chars characters when chars > 0), and their count."""
    with open(text_path, encoding="utf-8") as f:
        text = f.read()
    if chars > 0:
        text = text[:chars]
    ids = {cp: i for i, cp in enumerate(vocab) if i > 2}
    tokens = [ids[ord(c)] for c in text]
    T = args.max_seq_len
    count = (len(tokens) - 1) // T
    total = 0.0
    with torch.no_grad():
        for w in range(count):
            targets = torch.tensor([tokens[w * T: w * T + T]])
            inputs = torch.tensor([[BOS] + tokens[w * T: w * T + T - 1]])
            total += window_loss(model, inputs, targets).item()
    return total / (count * T), count


def mean_pooled(model, args, G):
    """The model with its key/value heads mean-pooled to G: every weight
    copied but wk, wv (n_kv_heads * head_dim, dim), whose group of n_rep
    consecutive heads becomes (head 0 + head 1 + ...) / n_rep in float32."""
    D, C = args.dim // args.n_heads, args.dim
    n_rep = args.n_kv_heads // G
    out = ref.Transformer(ref.Args(**{**vars(args), "n_kv_heads": G}))
    state = {}
    for name, t in model.state_dict().items():
        if name.endswith("wk.weight") or name.endswith("wv.weight"):
            heads = t.reshape(G, n_rep, D, C)
            total = heads[:, 0].clone()
            for k in range(1, n_rep):
                total = total + heads[:, k]
            t = (total / n_rep).reshape(G * D, C)
        state[name] = t
    out.load_state_dict(state)
    return out


TINY_PART = 257   # the characters lesson 6.2 --preset tiny scores


def lesson62():
    slice_path = "data/tinyshakespeare-val-2049.txt"
    lines = []
    for prefix, chars in (("", 0), ("tiny_", TINY_PART)):
        for name in ("mha", "gqa4", "gqa2", "mqa"):
            model, args, vocab = read_model(f"data/tinyshakespeare-llama-{name}.bin")
            loss, count = text_loss(model, args, vocab, slice_path, chars)
            lines.append(ref.line(f"{prefix}loss_{name}", torch.tensor([loss])))
            print(f"{prefix}{name}: loss {loss:.6f} over {count} windows of {args.max_seq_len}")
            if name == "mha":
                for G in (4, 2, 1):
                    pooled_loss, _ = text_loss(mean_pooled(model, args, G), args, vocab, slice_path, chars)
                    lines.append(ref.line(f"{prefix}converted_{G}", torch.tensor([pooled_loss])))
                    print(f"{prefix}mha mean-pooled to G = {G}: loss {pooled_loss:.6f}")
    out = os.path.join(ref.OUT, "lesson62_trained.txt")
    ref.write_lines(out, f"# lesson 6.2 part (3): the shipped models on {slice_path}\n", lines)


def main():
    torch.set_num_threads(1)
    if sys.argv[1:] == ["--lesson62"]:
        return lesson62()
    model_path = sys.argv[1] if len(sys.argv) > 1 else "data/tinyshakespeare-llama-mha.bin"
    text_path = sys.argv[2] if len(sys.argv) > 2 else "tests/fixtures/tinyshakespeare_val_1025.txt"
    model, args, vocab = read_model(model_path)
    loss, count = text_loss(model, args, vocab, text_path)
    T = args.max_seq_len
    out = os.path.join(ref.OUT, fixture_name(model_path))
    ref.write_lines(out, f"# {model_path} on {text_path}: {count} windows of {T}\n",
                    [ref.line("loss", torch.tensor([loss]))])
    print(f"loss {loss:.6f} over {count} windows of {T}")


if __name__ == "__main__":
    main()
