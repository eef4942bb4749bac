#!/bin/sh
# The check of make check that every test program is in one pass list of
# tests/passes.mk: called as tests/passes.sh "KERNEL_TESTS" "ONCE_TESTS"
# "BROWSER_TESTS" (the Makefile passes the lists). Prints one line for each
# tests/test_*.c named in no list or in two, and for each name with no file,
# and exits 1 if there is any.
[ $# -eq 3 ] || { echo "usage: tests/passes.sh KERNEL_TESTS ONCE_TESTS BROWSER_TESTS" >&2; exit 2; }
bad=0
for f in tests/test_*.c; do
    t=$(basename "$f" .c)
    n=0
    for list in "$1" "$2" "$3"; do
        case " $list " in *" $t "*) n=$((n + 1)) ;; esac
    done
    if [ $n -eq 0 ]; then
        echo "passes: $f is in no pass: add $t to KERNEL_TESTS in tests/passes.mk if what it checks" \
             "can depend on the kernels (numbers, bits, lessons), else to ONCE_TESTS" >&2
        bad=1
    elif [ $n -gt 1 ]; then
        echo "passes: $t is in $n lists of tests/passes.mk; keep it in one" >&2
        bad=1
    fi
done
for t in $1 $2 $3; do
    [ -f "tests/$t.c" ] || { echo "passes: tests/passes.mk names $t, but there is no tests/$t.c" >&2; bad=1; }
done
[ $bad -eq 0 ] || exit 1
echo "passes: $(echo $1 | wc -w) programs in every pass, $(echo $2 | wc -w) not in the portable one," \
     "$(echo $3 | wc -w) in the fast one only (tests/passes.mk)"
