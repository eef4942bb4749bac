#!/bin/sh
# make coverage: line and branch coverage of src/ and lessons/ by the whole
# test suite (gcov, which comes with gcc). Run after the tests of a build
# made with --coverage in build-cov/ (the Makefile does both); prints one
# line a file, lowest line coverage first, then the totals:
#
#   file  lines%  (covered/lines)  branches%  (taken/branches)
#
# "branches" counts each way out of a condition as gcov's -b does ("taken at
# least once"). Needs no other tool than gcov and awk. The last line says
# whether the totals meet the targets of issue 29: at least 97 % of lines
# and 90 % of branches (COVERAGE_LINES and COVERAGE_BRANCHES change them).
set -eu
build=${1:-build-cov}
out=$(mktemp -d "${TMPDIR:-/tmp}/kvdemo-cov.XXXXXX")
trap 'rm -rf "$out"' EXIT
for src in src/*/*.c lessons/*.c; do
    obj="$build/${src%.c}.o"
    [ -f "$obj" ] || continue
    # gcov writes its .gcov files in the current folder: run it in $out.
    (cd "$out" && gcov -b -n -o "$OLDPWD/$(dirname "$obj")" "$OLDPWD/$src" 2>/dev/null) |
        awk -v f="$src" '
            /^File / { keep = index($0, "\x27" f "\x27") > 0 || index($0, f "\x27") > 0 }
            keep && /^Lines executed:/ { split($2, a, ":"); sub("%", "", a[2]); lp = a[2]; ln = $4 }
            keep && /^Taken at least once:/ { split($4, b, ":"); sub("%", "", b[2]); bp = b[2]; bn = $6 }
            END { if (ln != "") printf "%s %s %d %s %d\n", f, lp, ln, (bp == "" ? 100 : bp), (bn == "" ? 0 : bn) }'
done > "$out/table"
sort -k2,2n "$out/table" | awk -v tl="${COVERAGE_LINES:-97}" -v tb="${COVERAGE_BRANCHES:-90}" '
    { lc = $2 * $3 / 100; bc = $4 * $5 / 100; L += $3; LC += lc; B += $5; BC += bc
      printf "%-26s %6.1f%% (%5d/%5d)  %6.1f%% (%5d/%5d)\n", $1, $2, lc + 0.5, $3, $4, bc + 0.5, $5 }
    END { printf "%-26s %6.1f%% (%5d/%5d)  %6.1f%% (%5d/%5d)\n", "total", 100 * LC / L, LC + 0.5, L, 100 * BC / B, BC + 0.5, B
          l = L ? 100 * LC / L : 0; b = B ? 100 * BC / B : 0
          printf "targets: lines %.1f%% %s %s%%, branches %.1f%% %s %s%%: %s\n", l, (l >= tl ? ">=" : "<"), tl,
                 b, (b >= tb ? ">=" : "<"), tb, (l >= tl && b >= tb ? "met" : "NOT met") }'
