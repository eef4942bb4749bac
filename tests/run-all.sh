#!/bin/sh
# Runs each cmocka test program given on the command line, then prints one
# closing line "N passed, N failed" counted over all of their tests. A
# program that runs past TEST_TIMEOUT seconds (default 300) is stopped and
# counted as failed, so that a hang cannot stall the whole suite.
passed=0; failed=0; status=0
for t in "$@"; do
    out=$(timeout "${TEST_TIMEOUT:-300}" "$t" 2>&1); rc=$?
    [ $rc -eq 124 ] && out="$out
$t: stopped after ${TEST_TIMEOUT:-300} s"
    printf '%s\n' "$out"
    p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -n 1)
    f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -n 1)
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
    if [ $rc -ne 0 ]; then
        status=1
        [ -z "$f" ] && { echo "$t: exit status $rc" >&2; failed=$((failed + 1)); }
    fi
done
echo "$passed passed, $failed failed"
exit $status
