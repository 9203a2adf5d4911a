#!/usr/bin/env bash
# tools/check-file-refs.sh: lists the file names (*.c, *.h, *.cu, *.cuh, *.cpp, *.lua) that
# comments under engine/ and lua/ mention but that do not exist, so that no comment points a
# reader at a file that was renamed, removed or never written.
#
# usage: tools/check-file-refs.sh   (prints "file:line: name" per bad reference; exit 1 if any)
#
# A name with a folder ("core/alloc.c", "ddplua/nn/Module.lua") must be the end of a path in the
# tree; a bare name ("alloc.c") must be some file's name. Only comment text is read (C: /* */
# and //, Lua: --), not code or strings. `external` lists the names that are not ours: the
# upstream sources the comments cite, system headers, and example script names.
set -euo pipefail

cd "$(dirname "$0")/.."
external=(lua.c liolib.c lapi.c LossNLL.cpp cublas_v2.h cudnn.h nccl.h cuda_runtime.h script.lua
          file.lua)

# every path in the tree (tracked or new), with each of its tails after a '/'; a generated
# file (X.h from X.h.in) counts as present
declare -A present
for f in "${external[@]}"; do present[$f]=1; done
while read -r f; do
    f=${f%.in}
    while :; do
        present[$f]=1
        [[ $f == */* ]] || break
        f=${f#*/}
    done
done < <(git ls-files --cached --others --exclude-standard)

comments() {
    awk '
    FNR == 1 { in_block = 0; lua = FILENAME ~ /\.lua$/ }
    {
        s = $0; n = length(s); out = ""; i = 1
        while (i <= n) {
            if (in_block) {
                j = index(substr(s, i), "*/")
                if (j == 0) { out = out substr(s, i); break }
                out = out substr(s, i, j - 1) " "; i += j + 1; in_block = 0
                continue
            }
            c = substr(s, i, 1); two = substr(s, i, 2)
            if (c == "\"" || c == "\047") {               # skip a string literal
                for (i++; i <= n && substr(s, i, 1) != c; i++) if (substr(s, i, 1) == "\\") i++
                i++
            } else if (lua && two == "--" || !lua && two == "//") {
                out = out substr(s, i + 2); break
            } else if (!lua && two == "/*") {
                in_block = 1; i += 2
            } else i++
        }
        if (out ~ /\.(c|h|cu|cuh|cpp|lua)([^A-Za-z0-9_]|$)/) print FILENAME ":" FNR ":" out
    }' "$@"
}

mapfile -t sources < <(
    git ls-files --cached --others --exclude-standard -- 'engine/*.c' 'engine/*.h' \
        'engine/*.cu' 'engine/*.cuh' 'engine/*.cpp' 'lua/*.lua' |
        while read -r f; do [[ -e $f ]] && echo "$f"; done
)

status=0
while IFS= read -r hit; do
    at=${hit%%: *}
    ref=${hit#*: }
    [[ -n ${present[$ref]:-} ]] && continue
    echo "$at: $ref"
    status=1
done < <(
    comments "${sources[@]}" |
        grep -oE '^[^:]+:[0-9]+:|[A-Za-z0-9_][A-Za-z0-9_./-]*\.(c|h|cu|cuh|cpp|lua)\b' |
        awk '/:$/ { at = $0; next } { print at " " $0 }'
)
exit $status
