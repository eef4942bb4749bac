#!/bin/sh
# The process-wide-state check of make check: nm on every object of src/
# and lessons/ in the build folder (the argument, e.g. build), and a failure
# for each variable that lives in a writable section (.data, .bss and their
# thread-local twins) unless the list below names it and says why it may
# live there. A mode that a lesson sets (the threads, the language of
# messages, how attention reads the cache) must travel in the state or the
# call instead, so that no lesson can leave it changed for the next one.
# Constant tables (.rodata, .data.rel.ro) are not state and are not listed.
# Prints one line per variable not allowed and exits 1 if there is any.
[ $# -eq 1 ] || { echo "usage: tests/globals.sh BUILD (the build folder, e.g. build)" >&2; exit 2; }
build=$1
# only the objects whose source is still there (an object of a file moved
# or removed since the build folder was made is not kvdemo's any more)
objs=$(find "$build/src" "$build/lessons" -name '*.o' 2>/dev/null | sort | while read -r o; do
    c=${o#"$build"/}; [ -f "${c%.o}.c" ] && echo "$o"; done)
[ -n "$objs" ] || { echo "globals: no objects under $build/src or $build/lessons (build first)" >&2; exit 2; }
command -v nm >/dev/null 2>&1 || { echo "globals: nm (binutils) is needed" >&2; exit 2; }

# object (without the build folder) and variable; a static local's name
# without the number the compiler gives it (codes.2 -> codes).
ALLOWED='
src/cmd/race.o interrupted        a signal flag: SIGINT asks the race to stop
src/cmd/race.o resized            a signal flag: SIGWINCH asks the race to read the width again
src/model/train.o stop_requested  a signal flag: SIGINT asks training to save and stop
src/util/fileio.o stdout_error    the stdout error latch: output that could not be written, said once at the end
src/present/ttyguard.o guard_erase   the terminal as it was, for the signal handler and atexit that restore it
src/present/ttyguard.o guard_fd      (the same)
src/present/ttyguard.o guard_old     (the same)
src/present/ttyguard.o guard_saved   (the same)
src/present/ttyguard.o guard_set     (the same)
src/util/fileio.o claims          the locks this process holds: a lock belongs to the process, released at exit
src/util/allocfault.o allocations a test fault hook: KVDEMO_TEST_FAIL_ALLOC counts allocations
src/util/allocfault.o first_failure  a test fault hook (the same)
src/util/fileio.o writes          a test fault hook: KVDEMO_TEST_STOP_WRITE counts writes
src/util/fileio.o commits         a test fault hook: KVDEMO_TEST_FAIL_WRITE counts commits
src/util/iofault.o fault_kind     a test fault hook: KVDEMO_TEST_FAULT, read once
src/util/iofault.o fault_at       (the same)
src/util/iofault.o writes_made    a test fault hook: KVDEMO_TEST_FAULT counts writes
src/util/iofault.o reads_made     a test fault hook: KVDEMO_TEST_FAULT counts reads
src/util/iofault.o read_cut       a test fault hook: the file ends after the short read
src/model/checkpoint.o ckpt_fail_after  a test fault hook: a checkpoint write that fails part-way
src/core/ops.o pack_key           the key of the pack scratch each thread has (ops_pack_buffer), made once: not a mode
src/core/ops.o pack_once          (the same)
src/core/ops.o pack_key_ok        (the same)
src/present/trace.o codes         a memo of constant text (the escape codes of the heat maps): the same whatever ran before
src/present/trace.o code          (the same)
src/model/toydata.o cells         the scratch of one load (toydata_load), filled from the file before it is copied out
src/util/provenance.o files      the model files this process read, for the provenance footer of the page: a record, not a mode
src/util/provenance.o nfiles     (the same)
'

for o in $objs; do
    nm -f sysv "$o" | awk -F'|' -v obj="${o#"$build"/}" '
        NF >= 7 {
            name = $1; sect = $7; gsub(/ /, "", name); gsub(/ /, "", sect)
            if (sect !~ /^\.(data|bss|tdata|tbss)($|\.)/ && sect != "*COM*") next
            if (sect ~ /^\.data\.rel\.ro/) next
            if (name ~ /^(\.|__asan|___asan|__odr_asan|__ubsan|__gcov|__llvm|__sancov)/) next   # the tools own
            sub(/\.[0-9]+$/, "", name)
            print obj, name, sect
        }'
done | awk -v allowed="$ALLOWED" '
    BEGIN {
        n = split(allowed, line, "\n")
        for (i = 1; i <= n; i++) if (split(line[i], w, " ") >= 2) ok[w[1] " " w[2]] = 1
    }
    { seen++; if (!((($1 " " $2)) in ok)) { printf "globals: %s holds %s in %s, a mutable process-wide variable: pass it in the state or the call, or name it and say why in tests/globals.sh\n", $1, $2, $3; bad = 1 } }
    END {
        if (!bad) printf "globals: %d process-wide variables, each named in tests/globals.sh with its reason\n", seen
        exit bad
    }'
