#!/bin/sh
# Lists the functions of src/ and lessons/ longer than N lines (default 80),
# longest first: "lines file:line name", for the rule that no function but
# a forward or backward pass is longer than a screen (issue 23, item 6).
# A function is counted from the line of its name to its closing brace at
# column 0. A tool to run by hand, not a test: the passes are allowed.
n=${1:-80}
for f in $(ls src/*/*.c lessons/*.c); do
    awk -v f="$f" -v n="$n" '
        /^[A-Za-z_].*\(/ && !/;[ \t]*$/ && !/^(typedef|struct|enum|static const|const)[^(]*=/ { if (!open) { start = NR; name = $0 } }
        /^\{|\) \{$|^[A-Za-z_].*\{$/ { if (start && !open) open = 1 }
        /^}/ { if (open) { len = NR - start + 1; if (len > n) { sub(/\(.*/, "", name); k = split(name, w, /[ *]+/); printf "%d %s:%d %s\n", len, f, start, w[k] } open = 0; start = 0 } }
    ' "$f"
done | sort -rn
