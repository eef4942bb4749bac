#!/bin/sh
# The function-length check of make check: no function of src/ or lessons/
# is longer than a screen, 80 lines, but a forward or backward pass (issue
# 23, item 6). A pass reads as the document's code does, one step after the
# other down the page, and cut into pieces it would read worse; anything
# else longer than a screen is split into named steps.
#
#   sh tests/long-functions.sh      the check: prints each function over 80
#                                   lines that is not a pass, exits 1 if any
#   sh tests/long-functions.sh N    by hand: every function over N lines,
#                                   longest first, "lines file:line name"
#
# A function is counted from the line of its name to its closing brace at
# column 0.

# The passes, which may be longer: "file name", each a forward or backward
# pass of a model, in the order of its document. Each must still exist (the
# check fails on a name it cannot find, so that the list cannot go stale).
PASSES='src/model/gpt.c gpt_forward
src/model/gptpaged.c gpt_forward_paged
src/model/llama.c llama_forward
src/model/train.c train_forward
src/model/train.c train_backward
src/model/train_llama.c llama_train_forward
src/model/train_llama.c llama_train_backward'

# Every function longer than $1 lines: "lines file:line name", longest first.
long_functions() {
    for f in $(ls src/*/*.c lessons/*.c); do
        awk -v f="$f" -v n="$1" '
            /^[A-Za-z_].*\(/ && !/;[ \t]*$/ && !/^(typedef|struct|enum|static const|const)[^(]*=/ { if (!open) { start = NR; name = $0 } }
            /^\{|\) \{$|^[A-Za-z_].*\{$/ { if (start && !open) open = 1 }
            /^}/ { if (open) { len = NR - start + 1; if (len > n) { sub(/\(.*/, "", name); k = split(name, w, /[ *]+/); printf "%d %s:%d %s\n", len, f, start, w[k] } open = 0; start = 0 } }
        ' "$f"
    done | sort -rn
}

if [ $# -gt 0 ]; then
    case $1 in
        ''|*[!0-9]*) echo "usage: tests/long-functions.sh [N]  (N: lines, to list by hand)" >&2; exit 2 ;;
    esac
    long_functions "$1"
    exit 0
fi

max=80
bad=0
missing=$(printf '%s\n' "$PASSES" | while read -r f name; do
    [ -f "$f" ] && grep -q "^[A-Za-z_].*[ *]$name(" "$f" || echo "$f $name"
done)
if [ -n "$missing" ]; then
    printf '%s\n' "$missing" | while read -r f name; do
        echo "long-functions: the pass $name of $f is not there: update the list PASSES in tests/long-functions.sh"
    done
    bad=1
fi
long=$(long_functions $max)
passes=
if [ -n "$long" ]; then
    while read -r len where name; do
        f=${where%%:*}
        if printf '%s\n' "$PASSES" | grep -qx "$f $name"; then
            passes="$passes, $name $len"
        else
            echo "long-functions: $where $name is $len lines, more than $max: split it into named steps (or, for a forward or backward pass, name it in PASSES)"
            bad=1
        fi
    done <<EOF
$long
EOF
fi
[ $bad -eq 0 ] && echo "long-functions: no function of src/ and lessons/ over $max lines but passes${passes:+ (}${passes#, }${passes:+ lines)}"
exit $bad
