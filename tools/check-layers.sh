#!/usr/bin/env bash
# tools/check-layers.sh: fails when a lower layer of the engine includes or calls a higher one.
#
#   tools/check-layers.sh [BUILD_DIR [SOURCE_DIR]]     (defaults: build, this repository)
#
# The layers, lowest first (DESIGN.md "Layers"; docs/internals.md draws them):
#   0 core        engine/core
#   1 kernels     engine/cpu, engine/cuda (siblings: neither uses the other)
#   2 graph       engine/autograd/ except engine.c: nodes, edges, hooks (what ops record into)
#   3 ops         engine/ops
#   4 backward    engine/autograd/engine.c (runs backward formulas, i.e. calls ops)
#   4 io          engine/io: file formats (saving copies device tensors to the host with ops)
#   5 dist        engine/dist
#   6 lua         engine/lua
#   7 cli         engine/cli
# A file may include and call its own layer and the ones below. Two checks:
#   - includes, read from the sources: every `#include "x"` of an engine file is resolved and
#     the included file's layer compared with the includer's;
#   - calls, read from the object files of BUILD_DIR with nm: a symbol an object needs (U)
#     that an object of a higher layer defines is a call up, however it was declared (a
#     prototype written by hand is how such calls hide from the include check).
# The public headers (engine/include/ddpl) count as part of the layer that implements them:
# tensor.h and config.h core, autograd.h graph, ops.h and cuda.h ops, lua.h and ddpl.h lua.
set -euo pipefail
build=$(realpath -m "${1:-build}")
cd "${2:-$(dirname "$0")/..}"

# The one seam through which a lower layer uses a higher one's header: ops' definitions that
# the kernels implement against (the op list and kernel table a backend fills, the parameter
# structs and layouts ops hand to kernels). Types and inline helpers only: a function such a
# header declares is still caught by the call check.
kernel_seams='^engine/(ops/(dispatch\.h|ops\.def|kernel_params\.h|nn_params\.h|gemm_layout\.h|optim\.h)|include/ddpl/ops\.h)$'

# Reads "FROM TO WHAT" lines; prints a message for each use of TO that FROM may not make.
judge() {
    awk -v seams="$kernel_seams" '
        function layer(p) {
            if (p ~ /^engine\/include\/ddpl\/(tensor|config)\.h$/) return "0 core"
            if (p == "engine/include/ddpl/autograd.h") return "2 graph"
            if (p ~ /^engine\/include\/ddpl\/(ops|cuda)\.h$/) return "3 ops"
            if (p ~ /^engine\/include\/ddpl\/(lua|ddpl)\.h$/) return "6 lua"
            if (p ~ /^engine\/core\//) return "0 core"
            if (p ~ /^engine\/cpu\//) return "1 cpu"
            if (p ~ /^engine\/cuda\//) return "1 cuda"
            if (p ~ /^engine\/io\//) return "4 io"
            if (p == "engine/autograd/engine.c") return "4 backward"
            if (p ~ /^engine\/autograd\//) return "2 graph"
            if (p ~ /^engine\/ops\//) return "3 ops"
            if (p ~ /^engine\/dist\//) return "5 dist"
            if (p ~ /^engine\/lua\//) return "6 lua"
            if (p ~ /^engine\/cli\//) return "7 cli"
            return ""
        }
        {
            f = layer($1); t = layer($2)
            if (f == "" || t == "" || f == t) next
            split(f, fl, " "); split(t, tl, " ")
            if (fl[1] == 1 && $2 ~ seams) next
            if (tl[1] + 0 < fl[1] + 0) next
            what = $0; sub(/^[^ ]+ [^ ]+ /, "", what)
            print "layer violation: " $1 " (" fl[2] ") " what " " $2 " (" tl[2] ")"
        }'
}

# ---- includes: "file included include" ----
includes=$(find engine -path engine/include -prune -o -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \) -print |
    xargs awk '
        match($0, /^[ \t]*#[ \t]*include[ \t]*"[^"]*"/) {
            inc = substr($0, RSTART, RLENGTH); sub(/^[^"]*"/, "", inc); sub(/"$/, "", inc)
            dir = FILENAME; sub(/\/[^\/]*$/, "", dir)
            if (inc ~ /^ddpl\//) print FILENAME, "engine/include/" inc, "includes"
            else print FILENAME, (inc ~ /\// ? "engine/" inc : dir "/" inc), "includes"
        }' | judge)

# ---- calls: "object-source defining-source calls:SYMBOL" ----
objdir=$build/CMakeFiles/ddplua_objects.dir
calls=
if [ ! -d "$objdir/engine" ]; then
    echo "check-layers: no object files under $objdir (build first): includes checked only" >&2
else
    calls=$(find "$objdir/engine" -name '*.o' | while IFS= read -r obj; do
        src=${obj#"$objdir"/}
        [ -e "${src%.o}" ] || continue # left behind by a source since removed or renamed
        nm -g "$obj" 2>/dev/null | awk -v s="${src%.o}" '
            NF == 3 && $2 != "U" && $2 != "w" { print "D", $3, s }
            $1 == "U" { print "U", $2, s }'
    done | awk '$1 == "D" { def[$2] = $3; next }
                { need[n++] = $3 " " $2 }
                END { for (i = 0; i < n; i++) { split(need[i], a, " ")
                      if (a[2] in def && def[a[2]] != a[1])
                          print a[1], def[a[2]], "calls " a[2] " of" } }' | sort -u | judge)
fi

if [ -n "$includes$calls" ]; then
    printf '%s\n%s\n' "$includes" "$calls" | grep . >&2 || true
    n=$(printf '%s\n%s\n' "$includes" "$calls" | grep -c .)
    echo "check-layers: $n use(s) against the layer rules (docs/internals.md, Layers)" >&2
    exit 1
fi
echo "check-layers: engine layers clean (includes and calls)"
