#!/bin/sh
# The include-layer check of make check: src/ is in folders by layer, given
# lowest first as the arguments (the Makefile's LAYERS); lessons/ stands with
# the top one. A file may include headers of its own layer and of the layers
# below it, never one above: the numeric core knows nothing of the cache, the
# cache nothing of the models, and so on (docs/architecture.md).
# It also checks that docs/architecture.md names every file of src/ (a
# header by its own name only when it has no .c beside it).
# Prints one line per include that breaks the rule and exits 1 if any does.
[ $# -gt 0 ] || { echo "usage: tests/layers.sh LAYER... (lowest first)" >&2; exit 2; }
files=
for l in "$@"; do
    [ -d "src/$l" ] || { echo "layers: no folder src/$l (layers: $*)" >&2; exit 2; }
    files="$files $(ls src/$l/*.c src/$l/*.h 2>/dev/null)"
done
files="$files $(ls lessons/*.c lessons/*.h 2>/dev/null)"
# awk sees every file once: first the names (the rank of each header's
# layer), then each file's #include lines.
printf '%s\n' $files | awk -v order="$*" '
    BEGIN { n = split(order, name, " "); for (i = 1; i <= n; i++) rank[name[i]] = i }
    function layer_of(path,   p) {
        split(path, p, "/")
        return p[1] == "lessons" ? n : rank[p[2]]
    }
    { all = all $0 "\n"; path[NR] = $0; h = $0; sub(/.*\//, "", h); if (h ~ /\.h$/) hrank[h] = layer_of($0) }
    END {
        bad = 0
        for (i = 1; i <= NR; i++) {
            own = layer_of(path[i]); f = path[i]
            while ((getline line < f) > 0) {
                if (line !~ /^#include "/) continue
                h = line; sub(/^#include "/, "", h); sub(/".*/, "", h)
                if (!(h in hrank)) {
                    printf "layers: %s includes \"%s\", which is in no layer of src/ nor in lessons/\n", f, h
                    bad = 1
                } else if (hrank[h] > own) {
                    printf "layers: %s (%s) includes \"%s\" of %s, a layer above it (lowest first: %s)\n",
                           f, name[own], h, name[hrank[h]], order
                    bad = 1
                }
            }
            close(f)
        }
        arch = "docs/architecture.md"; doc = ""
        while ((getline line < arch) > 0) doc = doc line "\n"
        for (i = 1; i <= NR; i++) {
            f = path[i]; if (f !~ /^src\//) continue
            b = f; sub(/.*\//, "", b); c = b; sub(/\.h$/, ".c", c)
            if (b ~ /\.h$/ && c != b && index(all, "/" c "\n")) continue
            if (!index(doc, "`" b "`")) { printf "layers: %s names no `%s`: give it a line\n", arch, b; bad = 1 }
        }
        if (!bad) printf "layers: %d files, every include at or below its own layer (%s), each named in %s\n", NR, order, arch
        exit bad
    }'
