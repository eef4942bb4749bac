#!/bin/sh
# llama_speed.sh — kvdemo's LLaMA-style model against its peers, side by
# side, in interleaved pairs (A B A B ...), for issue 24's speed goals:
#
#   gen    kvdemo generate --threads 1 against llama2.c's run.c on the same
#          llama2.c file, 256 greedy tokens; checks that the tokens agree
#   omp    the same with 2 threads against run.c's OpenMP build
#   train  kvdemo train --arch llama against tests/torch_llama_train_speed.py
#          (same shape, batch 16 x 128, 2 threads)
#
# Never run by the tests: it times, and a shared machine's times vary. Each
# pair is printed (wall and CPU seconds, user + sys); conclude only what the
# spread of the pairs supports. Build the peers outside the project:
#
#   git clone https://github.com/karpathy/llama2.c /work/peers/llama2.c
#   cc -Ofast -march=native -o /work/peers/run run.c -lm
#   cc -Ofast -march=native -fopenmp -o /work/peers/runomp run.c -lm
#   /usr/bin/python3 tests/llama2c_reference.py --big /work/peers/big
#
# Usage: sh tests/llama_speed.sh gen|omp|train [PAIRS (5)]
# Settings (environment): KVDEMO (./kvdemo), MODEL and TOKENIZER (the
# llama2.c files; /work/peers/big/model.bin, tokenizer.bin), RUNC and RUNOMP
# (/work/peers/run, runomp), DATA (the training text), STEPS (6, training).
set -eu
what=${1:-gen}
pairs=${2:-5}
KVDEMO=${KVDEMO:-./kvdemo}
MODEL=${MODEL:-/work/peers/big/model.bin}
TOKENIZER=${TOKENIZER:-/work/peers/big/tokenizer.bin}
RUNC=${RUNC:-/work/peers/run}
RUNOMP=${RUNOMP:-/work/peers/runomp}
DATA=${DATA:-data/tinyshakespeare.txt}
STEPS=${STEPS:-6}
PROMPT="Once upon a time"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# timed LABEL COMMAND...: runs it, prints wall and CPU seconds; its output
# stays in $tmp/LABEL.out and .err.
timed() {
    label=$1
    shift
    /usr/bin/time -o "$tmp/$label.time" -f "%e %U %S" "$@" > "$tmp/$label.out" 2> "$tmp/$label.err" || {
        echo "$label failed:" >&2
        tail -3 "$tmp/$label.err" >&2
        exit 1
    }
    awk -v l="$label" '{ printf "  %-8s wall %6.2f s  cpu %6.2f s (user %.2f + sys %.2f)", l, $1, $2 + $3, $2, $3 }' \
        "$tmp/$label.time"
}

# The words of a generation, byte tokens left out (run.c prints their raw
# bytes, kvdemo an escape), for comparing the tokens of the two.
words() { LC_ALL=C sed 's/\\x[0-9A-F][0-9A-F]//g' "$1" | LC_ALL=C tr -cd '\12\40-\176' | tr ' ' '\n' | head -200; }

case $what in
gen | omp)
    if [ "$what" = gen ]; then threads=1 peer=$RUNC; else threads=2 peer=$RUNOMP; fi
    # the peer at its best: OpenMP's threads sleep when they wait (spinning
    # on a shared machine loses the core they wait for)
    export OMP_NUM_THREADS=$threads OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
    echo "generate: $MODEL, 256 tokens, greedy, $threads thread(s): kvdemo against $peer"
    for i in $(seq "$pairs"); do
        echo "pair $i"
        timed kvdemo "$KVDEMO" generate --model "$MODEL" --tokenizer "$TOKENIZER" --prompt "$PROMPT" \
            --temperature 0 --steps 256 --threads "$threads"
        echo "  ($(tail -1 "$tmp/kvdemo.out" | sed 's/^-- //'))"
        timed peer "$peer" "$MODEL" -z "$TOKENIZER" -t 0 -n 256 -i "$PROMPT"
        echo "  ($(grep 'tok/s' "$tmp/peer.err"))"
        words "$tmp/kvdemo.out" > "$tmp/a"
        words "$tmp/peer.out" > "$tmp/b"
        cmp -s "$tmp/a" "$tmp/b" && echo "  same first 200 words" || echo "  THE TOKENS DIFFER"
    done
    ;;
train)
    echo "train: the LLaMA shape (C 128, L 4, H 8, F 352, T 128), batch 16 x 128, 2 threads"
    for i in $(seq "$pairs"); do
        echo "pair $i"
        timed kvdemo "$KVDEMO" train --arch llama --data "$DATA" --out "$tmp/m.bin" --iters "$STEPS" \
            --eval-every 100000 --threads 2
        echo "  ($(grep '^done' "$tmp/kvdemo.err" "$tmp/kvdemo.out" | sed 's/.*done: //; s/, last.*//'))"
        timed torch env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE MALLOC_MMAP_THRESHOLD_=4294967296 \
            MALLOC_TRIM_THRESHOLD_=4294967296 /usr/bin/python3 tests/torch_llama_train_speed.py "$STEPS" 2
        echo "  ($(cat "$tmp/torch.out"))"
    done
    ;;
*)
    echo "usage: sh tests/llama_speed.sh gen|omp|train [PAIRS]" >&2
    exit 2
    ;;
esac
