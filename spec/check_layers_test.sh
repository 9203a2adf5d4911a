#!/usr/bin/env bash
# spec/check_layers_test.sh: tools/check-layers.sh passes on this tree and fails, naming the
# file and the layers, on a small tree that breaks each of its two rules (an include up, and
# a call up hidden behind a hand-written prototype).
#   spec/check_layers_test.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
check=$here/tools/check-layers.sh
build=$(realpath "$1")
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

"$check" "$build" "$here" || fail "the engine breaks its layer rules (above)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/engine/core" "$tmp/src/engine/ops" "$tmp/src/engine/cpu"
mkdir -p "$tmp/build/CMakeFiles/ddplua_objects.dir/engine/core"
mkdir -p "$tmp/build/CMakeFiles/ddplua_objects.dir/engine/ops"
cat >"$tmp/src/engine/ops/op.h" <<'C'
int op_run(void);
C
cat >"$tmp/src/engine/ops/op.c" <<'C'
int op_run(void) { return 1; }
C
cat >"$tmp/src/engine/core/ok.c" <<'C'
int core_ok(void) { return 0; }
C
cc -c -o "$tmp/build/CMakeFiles/ddplua_objects.dir/engine/ops/op.c.o" "$tmp/src/engine/ops/op.c"
cc -c -o "$tmp/build/CMakeFiles/ddplua_objects.dir/engine/core/ok.c.o" "$tmp/src/engine/core/ok.c"
"$check" "$tmp/build" "$tmp/src" >/dev/null 2>&1 || fail "a clean tree was refused"

# an include up: core includes an ops header
echo '#include "ops/op.h"' >"$tmp/src/engine/core/up.h"
if out=$("$check" "$tmp/build" "$tmp/src" 2>&1); then fail "an include up passed"; fi
grep -q 'engine/core/up.h (core) includes engine/ops/op.h (ops)' <<<"$out" ||
    fail "the include up is not named: $out"
rm "$tmp/src/engine/core/up.h"

# a public header belongs to the layer that implements it: core may not include ddpl/ops.h
echo '#include "ddpl/ops.h"' >"$tmp/src/engine/core/up.h"
if out=$("$check" "$tmp/build" "$tmp/src" 2>&1); then fail "core including ddpl/ops.h passed"; fi
grep -q 'engine/core/up.h (core) includes engine/include/ddpl/ops.h (ops)' <<<"$out" ||
    fail "the public include up is not named: $out"
echo '#include "ddpl/tensor.h"' >"$tmp/src/engine/core/up.h"
"$check" "$tmp/build" "$tmp/src" >/dev/null 2>&1 || fail "core including ddpl/tensor.h was refused"
rm "$tmp/src/engine/core/up.h"

# a call up through a prototype written by hand: no include shows it, the object does
printf 'int op_run(void);\nint core_call(void) { return op_run(); }\n' >"$tmp/src/engine/core/call.c"
cc -c -o "$tmp/build/CMakeFiles/ddplua_objects.dir/engine/core/call.c.o" \
    "$tmp/src/engine/core/call.c"
if out=$("$check" "$tmp/build" "$tmp/src" 2>&1); then fail "a call up passed"; fi
grep -q 'engine/core/call.c (core) calls op_run of engine/ops/op.c (ops)' <<<"$out" ||
    fail "the call up is not named: $out"

# a seam header is allowed to a kernel, an ops source is not
mkdir -p "$tmp/src/engine/cpu"
echo 'int x;' >"$tmp/src/engine/ops/dispatch.h"
echo '#include "ops/dispatch.h"' >"$tmp/src/engine/cpu/k.c"
rm "$tmp/build/CMakeFiles/ddplua_objects.dir/engine/core/call.c.o" "$tmp/src/engine/core/call.c"
"$check" "$tmp/build" "$tmp/src" >/dev/null 2>&1 || fail "a kernel including ops/dispatch.h was refused"
echo '#include "ops/op.h"' >>"$tmp/src/engine/cpu/k.c"
if "$check" "$tmp/build" "$tmp/src" >/dev/null 2>&1; then fail "a kernel including ops/op.h passed"; fi
echo "check_layers_test: 1 passed, 0 failed"
