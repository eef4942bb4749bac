#!/bin/sh
# Runs each cmocka test program given on the command line, then prints one
# closing line "N passed, N failed" counted over all of their tests (and
# ", N skipped" when some skipped themselves: test_slides without chromium). A
# program that runs past TEST_TIMEOUT seconds (default 300) is stopped and
# counted as failed, so that a hang cannot stall the whole suite.
#
# TEST_JOBS programs run at once (default: the number of cores), since the
# sanitizer build of the suite is long; each program's output is kept in a
# file and shown whole, in the order of the command line.
#
# TEST_TIMES=1 ends with each program's wall time and CPU time (user + system,
# its child processes included: steadier on a busy machine) in seconds,
# slowest first: to find the waste in the suite's time budget, never a check.
jobs=${TEST_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvdemo-tests.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

# One program: its output in $dir/N.out, its exit status in $dir/N.rc.
run_one() {
    t0=$(date +%s.%N)
    timeout "${TEST_TIMEOUT:-300}" "$1" > "$dir/$2.out" 2>&1
    rc=$?
    [ $rc -eq 124 ] && echo "$1: stopped after ${TEST_TIMEOUT:-300} s" >> "$dir/$2.out"
    times > "$dir/$2.cpu"   # (in a $(...) it would count the subshell's own children)
    cpu=$(tail -n 1 "$dir/$2.cpu" | tr 'ms' '  ' | awk '{ print 60 * ($1 + $3) + $2 + $4 }')
    echo "$(date +%s.%N) $t0 $cpu $1" | awk '{ printf "%7.1f s wall %7.1f s cpu  %s\n", $1 - $2, $3, $4 }' > "$dir/$2.time"
    echo $rc > "$dir/$2.rc"
}

# Start them, at most $jobs at a time: a new one starts when one ends.
i=0; running=0
for t in "$@"; do
    i=$((i + 1))
    run_one "$t" "$i" &
    running=$((running + 1))
    while [ "$running" -ge "$jobs" ]; do
        sleep 0.1
        running=0
        for k in $(seq 1 "$i"); do [ -f "$dir/$k.rc" ] || running=$((running + 1)); done
    done
done
wait

passed=0; failed=0; skipped=0; status=0; i=0
for t in "$@"; do
    i=$((i + 1))
    out=$(cat "$dir/$i.out"); rc=$(cat "$dir/$i.rc")
    printf '%s\n' "$out"
    p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -n 1)
    f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -n 1)
    k=$(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' | tail -n 1)
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); skipped=$((skipped + ${k:-0}))
    if [ "$rc" -ne 0 ]; then
        status=1
        [ -z "$f" ] && { echo "$t: exit status $rc" >&2; failed=$((failed + 1)); }
    fi
done
[ -n "${TEST_TIMES:-}" ] && cat "$dir"/*.time | sort -rn &&
    cat "$dir"/*.time | awk '{ w += $1; c += $4 } END { printf "%7.1f s wall %7.1f s cpu  (sums)\n", w, c }'
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
exit $status
