#!/usr/bin/python3
"""Writes tests/fixtures/lesson3_trained.txt: what `kvdemo lesson 3` shows by
default, the article's LLaMA.generate on the shipped trained model
(data/tinyshakespeare-llama-mha.bin), from the article's code in PyTorch (the
classes of tests/llama_reference.py, the model read as
tests/llama_model_loss_reference.py reads it).

Run it from the repository's top folder with a Python that has torch and numpy:

    /usr/bin/python3 tests/lesson3_trained_reference.py

The lesson's defaults: prompts "ROMEO:" and "First Citizen:" (of different
lengths, from the corpus), max_gen_len 24, temperature 0.8, top_p 0.95,
seed 42, a cache of 4 rows. For each run (with the cache and without it):
  RUN.steps                       the loop's steps
  RUN.stepI.{prev_pos,cur_pos,cache_write_from,cache_write_to,cache_read_to}
  RUN.stepI.scores_shape          (bsz, n_heads, seqlen, start_pos + seqlen)
  RUN.stepI.mask                  when seqlen > 1
  RUN.tokens                      (bsz, total_len) after the loop
  RUN.decodedB                    the code points of decoded row B
and, for steps 1, 2 and the last (what --trace full prints of layer 0, head 0):
  RUN.stepI.bB.{scores,keys,values}
"""
import os

import torch

import llama_model_loss_reference as loss_ref
import llama_reference as ref

MODEL = "data/tinyshakespeare-llama-mha.bin"
PROMPTS = ["ROMEO:", "First Citizen:"]
MAX_GEN_LEN, TEMPERATURE, TOP_P, SEED, BATCH = 24, 0.8, 0.95, 42, 4


def main():
    torch.set_num_threads(1)
    model, args, vocab = loss_ref.read_model(MODEL)
    args.max_batch_size = BATCH
    for layer in model.layers:   # the lesson's cache: max(bsz, 4) rows
        a = layer.attention
        a.cache_k = torch.zeros((BATCH, args.max_seq_len, a.n_kv_heads, a.head_dim))
        a.cache_v = torch.zeros_like(a.cache_k)
    tok = ref.Tokenizer(vocab)
    lines = []
    for run, use_cache in (("cache", True), ("no-cache", False)):
        steps = []

        def on_step(prev_pos, cur_pos):
            steps.append((prev_pos, cur_pos, model.layers[0].attention.seen))

        ref.reset_cache(model)
        tokens, _ = ref.generate(model, tok, PROMPTS, MAX_GEN_LEN, TEMPERATURE, TOP_P, SEED,
                                 use_cache, on_step)
        lines.append(ref.line(f"{run}.steps", [len(steps)]))
        for i, (prev_pos, cur_pos, seen) in enumerate(steps, 1):
            start, n = seen["start_pos"], seen["seqlen"]
            k = f"{run}.step{i}"
            lines += [ref.line(f"{k}.prev_pos", [prev_pos]), ref.line(f"{k}.cur_pos", [cur_pos]),
                      ref.line(f"{k}.cache_write_from", [start]),
                      ref.line(f"{k}.cache_write_to", [start + n]),
                      ref.line(f"{k}.cache_read_to", [start + n]),
                      ref.line(f"{k}.scores_shape", list(seen["scores"]))]
            if seen["mask"] is not None:
                lines.append(ref.line(f"{k}.mask", seen["mask"]))
            if i in (1, 2, len(steps)):
                for b in range(len(PROMPTS)):
                    kb = f"{k}.b{b}"
                    lines += [ref.line(f"{kb}.scores", seen["probs"][b, 0]),
                              ref.line(f"{kb}.keys", seen["keys"][b, :, 0]),
                              ref.line(f"{kb}.values", seen["values"][b, :, 0])]
        lines.append(ref.line(f"{run}.tokens", tokens))
        # decode: t[: len(prompt_tokens[i]) + max_gen_len], then cut at eos
        for b, prompt in enumerate(PROMPTS):
            t = tokens[b].tolist()[: len(prompt) + 1 + MAX_GEN_LEN]
            if ref.EOS in t:
                t = t[: t.index(ref.EOS)]
            lines.append(ref.line(f"{run}.decoded{b}", [vocab[x] for x in t if x > ref.EOS]))
            print(run, b, repr("".join(chr(vocab[x]) for x in t if x > ref.EOS)))
    ref.write_lines(os.path.join(ref.OUT, "lesson3_trained.txt"),
                    f"# kvdemo lesson 3 on {MODEL}: generate({PROMPTS}, max_gen_len={MAX_GEN_LEN}, "
                    f"temperature={TEMPERATURE}, top_p={TOP_P}, seed {SEED}) from the article's code "
                    "(tests/lesson3_trained_reference.py)\n", lines)


if __name__ == "__main__":
    main()
