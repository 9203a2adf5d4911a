#!/usr/bin/env bash
# tools/check-file-refs.sh: lists the file names (*.c, *.h, *.cu, *.cuh, *.cpp, *.lua) that
# comments under engine/ and lua/ mention but that do not exist, and the paths that the docs
# (README.md, bench/README.md, docs/**/*.md) name but that do not exist, so that no comment or
# page points a reader at a file that was renamed, removed or never written.
#
# usage: tools/check-file-refs.sh   (prints "file:line: name" per bad reference; exit 1 if any)
#
# A name with a folder ("core/alloc.c", "ddplua/nn/Module.lua") must be the end of a path in the
# tree; a bare name ("alloc.c") must be some file's name. Only comment text is read (C: /* */
# and //, Lua: --), not code or strings. `external` lists the names that are not ours: the
# upstream sources the comments cite, system headers, and example script names.
#
# In the docs, a path is a word starting with docs/, spec/, engine/, tools/, bench/ or examples/
# (not inside another path or a URL), up to the first character that cannot be in a file name;
# it must exist in the working tree, from the repository root. A Markdown link's target that is
# not a URL or an anchor must exist relative to the page. Words with a placeholder (<area>, *,
# {a,b}, $VAR, ...) are not checked.
set -euo pipefail

cd "$(dirname "$0")/.."
external=(lua.c liolib.c lapi.c LossNLL.cpp MemoryOverlap.cpp cublas_v2.h cudnn.h nccl.h cuda_runtime.h script.lua
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

# The docs' paths: "file:line: path" for each that does not exist.
doc_refs() {
    awk '
    {
        s = $0
        # Markdown links [text](target): relative to the page
        t = s
        while (match(t, /\]\([^) ]+\)/)) {
            target = substr(t, RSTART + 2, RLENGTH - 3)
            t = substr(t, RSTART + RLENGTH)
            if (target ~ /^(https?:|mailto:|#)/) continue
            sub(/#.*/, "", target)
            if (target == "") continue
            dir = FILENAME; sub(/[^\/]*$/, "", dir)
            print FILENAME ":" FNR ": " dir target
        }
        # bare paths from the root
        t = s
        while (match(t, /(^|[^A-Za-z0-9_.\/-])(docs|spec|engine|tools|bench|examples)\/[A-Za-z0-9_.\/<>*{}$,-]*/)) {
            word = substr(t, RSTART, RLENGTH)
            t = substr(t, RSTART + RLENGTH)
            sub(/^[^A-Za-z]/, "", word)
            if (word ~ /[<>*{}$]/ || word ~ /\.\.\./) continue
            sub(/,.*/, "", word)
            sub(/[.:]+$/, "", word)
            print FILENAME ":" FNR ": " word
        }
    }' "$@"
}

mapfile -t pages < <(
    { echo README.md; echo bench/README.md
      git ls-files --cached --others --exclude-standard -- 'docs/*.md'; } |
        while read -r f; do [[ -f $f && ! -L $f ]] && echo "$f"; done | sort -u
)

while IFS= read -r hit; do
    at=${hit%%: *}
    ref=${hit#*: }
    path=$ref
    # a relative link: drop "dir/../" pairs and "./"
    while [[ $path == *"/./"* ]]; do path=${path/\/.\//\/}; done
    while [[ $path =~ ^(.*/)?[^/.][^/]*/\.\./(.*)$ ]]; do path=${BASH_REMATCH[1]}${BASH_REMATCH[2]}; done
    [[ -e $path ]] && continue
    echo "$at: $ref"
    status=1
done < <(doc_refs "${pages[@]}")
exit $status
