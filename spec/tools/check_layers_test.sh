#!/usr/bin/env bash
# spec/tools/check_layers_test.sh: tools/check-layers.sh passes on this tree and fails, naming the
# file and the layers, on a small tree that breaks each of its rules (an include up, a call up
# hidden behind a hand-written prototype, a kernel including an ops header (the exception the
# kernel ABI's own layer replaced), and the five holes the first version had: a public
# header through <...>, a `..` path, a folder with no layer, a weak symbol overridden from
# above or referenced weakly, and dlsym by name).
#   spec/tools/check_layers_test.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
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

# a kernel is written against the kernel ABI (layer 1, below it), never against ops: the
# registry header that was once a named exception (ops/dispatch.h) now fails like any other
mkdir -p "$tmp/src/engine/cpu" "$tmp/src/engine/kernel_abi"
echo 'typedef int ddpl_kernel_x;' >"$tmp/src/engine/kernel_abi/kernel.h"
echo 'int x;' >"$tmp/src/engine/ops/dispatch.h"
echo '#include "kernel_abi/kernel.h"' >"$tmp/src/engine/cpu/k.c"
rm "$tmp/build/CMakeFiles/ddplua_objects.dir/engine/core/call.c.o" "$tmp/src/engine/core/call.c"
"$check" "$tmp/build" "$tmp/src" >/dev/null 2>&1 || fail "a kernel including kernel_abi/kernel.h was refused"
echo '#include "ops/dispatch.h"' >>"$tmp/src/engine/cpu/k.c"
if out=$("$check" "$tmp/build" "$tmp/src" 2>&1); then fail "a kernel including ops/dispatch.h passed"; fi
grep -q 'engine/cpu/k.c (cpu) includes engine/ops/dispatch.h (ops)' <<<"$out" ||
    fail "the kernel's include of ops/dispatch.h is not named: $out"
# and the ABI itself sits below the kernels: it may not include them
echo '#include "cpu/k.h"' >"$tmp/src/engine/kernel_abi/up.h"
echo 'int k;' >"$tmp/src/engine/cpu/k.h"
if out=$("$check" "$tmp/build" "$tmp/src" 2>&1); then fail "the ABI including a kernel header passed"; fi
grep -q 'engine/kernel_abi/up.h (abi) includes engine/cpu/k.h (cpu)' <<<"$out" ||
    fail "the ABI's include up is not named: $out"
rm "$tmp/src/engine/cpu/k.c" "$tmp/src/engine/cpu/k.h" "$tmp/src/engine/kernel_abi/up.h"

# the holes of the first version (issue 33), each of which it let through:
expect_refused() { # WHAT PATTERN: the check fails and names the use
    if out=$("$check" "$tmp/build" "$tmp/src" 2>&1); then fail "$1 passed"; fi
    grep -q -- "$2" <<<"$out" || fail "$1 is not named: $out"
}
"$check" "$tmp/build" "$tmp/src" >/dev/null 2>&1 || fail "the tree before the holes was refused"

# a public header through <...>
echo '#include <ddpl/ops.h>' >"$tmp/src/engine/core/up.h"
expect_refused "core including <ddpl/ops.h>" \
    'engine/core/up.h (core) includes engine/include/ddpl/ops.h (ops)'
# a path up with ..
echo '#include "../ops/op.h"' >"$tmp/src/engine/core/up.h"
expect_refused "core including ../ops/op.h" 'engine/core/up.h (core) includes engine/ops/op.h (ops)'
rm "$tmp/src/engine/core/up.h"

# a new folder no layer knows
mkdir -p "$tmp/src/engine/extra"
echo 'int extra(void) { return 0; }' >"$tmp/src/engine/extra/x.c"
expect_refused "a file in engine/extra" 'engine/extra/x.c lies in a folder with no layer'
rm -r "$tmp/src/engine/extra"

# a weak default in core that ops overrides: core's callers reach ops
printf '__attribute__((weak)) int op_run(void) { return 0; }\n' >"$tmp/src/engine/core/weak.c"
cc -c -o "$tmp/build/CMakeFiles/ddplua_objects.dir/engine/core/weak.c.o" \
    "$tmp/src/engine/core/weak.c"
expect_refused "a weak symbol overridden from above" \
    'engine/core/weak.c (core) has weak op_run overridden by engine/ops/op.c (ops)'
rm "$tmp/src/engine/core/weak.c" "$tmp/build/CMakeFiles/ddplua_objects.dir/engine/core/weak.c.o"

# a weak reference up (resolved when ops is linked in)
printf '__attribute__((weak)) int op_run(void);\nint w(void) { return op_run ? op_run() : 0; }\n' \
    >"$tmp/src/engine/core/wref.c"
cc -c -o "$tmp/build/CMakeFiles/ddplua_objects.dir/engine/core/wref.c.o" \
    "$tmp/src/engine/core/wref.c"
expect_refused "a weak reference up" 'engine/core/wref.c (core) calls op_run of engine/ops/op.c (ops)'
rm "$tmp/src/engine/core/wref.c" "$tmp/build/CMakeFiles/ddplua_objects.dir/engine/core/wref.c.o"

# a call up looked up by name
printf '#include <dlfcn.h>\nvoid *f(void *h) { return dlsym(h, "op_run"); }\n' \
    >"$tmp/src/engine/core/dl.c"
cc -c -o "$tmp/build/CMakeFiles/ddplua_objects.dir/engine/core/dl.c.o" "$tmp/src/engine/core/dl.c"
expect_refused "dlsym of a higher layer's function" \
    'engine/core/dl.c (core) calls op_run of engine/ops/op.c (ops)'
echo "check_layers_test: ok"
