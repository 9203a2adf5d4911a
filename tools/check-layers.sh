#!/usr/bin/env bash
# tools/check-layers.sh: fails when a lower layer of the engine includes or calls a higher one.
#
#   tools/check-layers.sh [BUILD_DIR [SOURCE_DIR]]     (defaults: build, this repository)
#
# The layers, lowest first (DESIGN.md "Layers"; docs/internals/architecture.md draws them):
#   0 core        engine/core
#   1 abi         engine/kernel_abi: the op list, the kernel table a backend fills, the parameter
#                 structs and layouts ops hand to kernels (what both sides are written against)
#   2 kernels     engine/cpu, engine/cuda (siblings: neither uses the other)
#   3 graph       engine/autograd/ except engine.c: nodes, edges, hooks (what ops record into)
#   4 ops         engine/ops
#   5 backward    engine/autograd/engine.c (runs backward formulas, i.e. calls ops)
#   5 io          engine/io: file formats (saving copies device tensors to the host with ops)
#   6 distributed engine/distributed
#   7 lua         engine/lua
#   8 cli         engine/cli
# A file may include and call its own layer and the ones below. It fails closed:
#   - folders: every source under engine/ lies in a folder with a layer (a new folder must be
#     given one here before it can hold code);
#   - includes, read from the sources: every `#include "x"` and `#include <ddpl/x>` of an engine
#     file is resolved (relative to the file, `..` included, or to engine/) and the included
#     file's layer compared with the includer's;
#   - calls, read from the object files of BUILD_DIR with nm: a symbol an object needs (U, or a
#     weak reference w) that an object of a higher layer defines is a call up, however it was
#     declared (a prototype written by hand is how such calls hide from the include check); a
#     weak definition (W, V) that a higher layer's strong one overrides is a call up too; and a
#     `dlsym(h, "name")` in a source counts as a use of name.
# CI's main build has nvcc, so engine/cuda and the NCCL files are among the objects checked;
# without a CUDA build their includes are still checked.
# The public headers (engine/include/ddpl) count as part of the layer that implements them:
# tensor.h, config.h and types.h (types only) core, autograd.h graph, ops.h and cuda.h ops, lua.h
# and ddpl.h lua. There is no exception: a kernel that includes an ops header fails.
set -euo pipefail
build=$(realpath -m "${1:-build}")
cd "${2:-$(dirname "$0")/..}"

# Reads "FROM TO WHAT" lines; prints a message for each use of TO that FROM may not make.
judge() {
    awk '
        function layer(p) {
            if (p ~ /^engine\/include\/ddpl\/(tensor|config|types)\.h$/) return "0 core"
            if (p == "engine/include/ddpl/autograd.h") return "3 graph"
            if (p ~ /^engine\/include\/ddpl\/(ops|cuda)\.h$/) return "4 ops"
            if (p ~ /^engine\/include\/ddpl\/(lua|ddpl)\.h$/) return "7 lua"
            if (p ~ /^engine\/core\//) return "0 core"
            if (p ~ /^engine\/kernel_abi\//) return "1 abi"
            if (p ~ /^engine\/cpu\//) return "2 cpu"
            if (p ~ /^engine\/cuda\//) return "2 cuda"
            if (p ~ /^engine\/io\//) return "5 io"
            if (p == "engine/autograd/engine.c") return "5 backward"
            if (p ~ /^engine\/autograd\//) return "3 graph"
            if (p ~ /^engine\/ops\//) return "4 ops"
            if (p ~ /^engine\/distributed\//) return "6 distributed"
            if (p ~ /^engine\/lua\//) return "7 lua"
            if (p ~ /^engine\/cli\//) return "8 cli"
            return ""
        }
        {
            f = layer($1); t = layer($2)
            if (f == "" || t == "" || f == t) next
            split(f, fl, " "); split(t, tl, " ")
            if (tl[1] + 0 < fl[1] + 0) next
            what = $0; sub(/^[^ ]+ [^ ]+ /, "", what)
            print "layer violation: " $1 " (" fl[2] ") " what " " $2 " (" tl[2] ")"
        }'
}

sources=$(find engine -path engine/include -prune -o -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.def' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \) -print)

# ---- folders: every source has a layer ----
folders=$(printf '%s\n' $sources | awk '
    $0 !~ /^engine\/(core|kernel_abi|cpu|cuda|io|autograd|ops|distributed|lua|cli)\// {
        print "layer violation: " $0 " lies in a folder with no layer (give it one in " \
              "tools/check-layers.sh and docs/internals/architecture.md)" }')

# ---- includes: "file included include" ----
# "x" resolves against the including file's folder when it starts with . or has no folder,
# else against engine/; <ddpl/x> and "ddpl/x" are the public headers; other <x> are the
# system's and the libraries'
includes=$(printf '%s\n' $sources | xargs awk '
        function normal(p,    n, i, parts, out, k) {
            n = split(p, parts, "/"); k = 0
            for (i = 1; i <= n; i++) {
                if (parts[i] == "." || parts[i] == "") continue
                if (parts[i] == ".." && k > 0) { k--; continue }
                out[++k] = parts[i]
            }
            p = out[1]; for (i = 2; i <= k; i++) p = p "/" out[i]
            return p
        }
        match($0, /^[ \t]*#[ \t]*include[ \t]*["<][^">]*[">]/) {
            inc = substr($0, RSTART, RLENGTH); sub(/^[^"<]*["<]/, "", inc); sub(/[">]$/, "", inc)
            angled = substr($0, RSTART, RLENGTH) ~ /</
            dir = FILENAME; sub(/\/[^\/]*$/, "", dir)
            if (inc ~ /^ddpl\//) print FILENAME, "engine/include/" inc, "includes"
            else if (angled) next
            else if (inc ~ /^\./ || inc !~ /\//) print FILENAME, normal(dir "/" inc), "includes"
            else print FILENAME, normal("engine/" inc), "includes"
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
            NF == 3 && ($2 == "W" || $2 == "V") { print "W", $3, s; next }
            NF == 3 && $2 != "U" && $2 != "w" { print "D", $3, s }
            $1 == "U" || $1 == "w" { print "U", $2, s }'
        # dlsym(h, "name") looks name up by its string: a use the linker never sees
        grep -o 'dlsym([^,]*, *"[A-Za-z_][A-Za-z0-9_]*")' "${src%.o}" 2>/dev/null |
            sed 's/.*"\(.*\)")/\1/' | awk -v s="${src%.o}" '{ print "U", $1, s }' || true
    done | awk '$1 == "D" { def[$2] = $3; next }
                $1 == "W" { weak[$2] = $3; next }
                { need[n++] = $3 " " $2 }
                END { for (i = 0; i < n; i++) { split(need[i], a, " ")
                      if (a[2] in def && def[a[2]] != a[1])
                          print a[1], def[a[2]], "calls " a[2] " of"
                      else if (!(a[2] in def) && a[2] in weak && weak[a[2]] != a[1])
                          print a[1], weak[a[2]], "calls " a[2] " of" }
                      for (w in weak) if (w in def)
                          print weak[w], def[w], "has weak " w " overridden by" }' |
        sort -u | judge)
fi

if [ -n "$folders$includes$calls" ]; then
    printf '%s\n%s\n%s\n' "$folders" "$includes" "$calls" | grep . >&2 || true
    n=$(printf '%s\n%s\n%s\n' "$folders" "$includes" "$calls" | grep -c .)
    echo "check-layers: $n use(s) against the layer rules (docs/internals/architecture.md, Layers)" >&2
    exit 1
fi
echo "check-layers: engine layers clean (folders, includes and calls)"
