#!/bin/sh
# examples/embed/build_tree_test.sh BUILD_DIR CONSUMER_DIR CC: what a C program needs to build
# against ddplua straight from its build tree, nothing installed:
#   1. pkg-config with PKG_CONFIG_PATH=BUILD_DIR (ddplua-uninstalled.pc) builds consumer/ and runs it
#   2. CMake's find_package(ddplua) with CMAKE_PREFIX_PATH=BUILD_DIR (the exported targets) does too
set -eu
build=$(cd "$1" && pwd)
consumer=$2
cc=${3:-cc}
work=$(mktemp -d /tmp/ddplua-buildtree.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "build_tree_test: FAILED: $*" >&2; exit 1; }

# only the build tree: no installed ddplua.pc may answer instead
unset PKG_CONFIG_LIBDIR || true
cflags=$(PKG_CONFIG_PATH="$build" pkg-config --cflags ddplua) || fail "pkg-config --cflags"
case "$cflags" in *"$build/generated"*) ;; *) fail "cflags '$cflags' do not name $build/generated" ;; esac
# shellcheck disable=SC2046
"$cc" -std=c11 -o "$work/consumer_pc" "$consumer/consumer.c" \
    $(PKG_CONFIG_PATH="$build" pkg-config --cflags --libs ddplua lua5.4) -lm \
    || fail "pkg-config build"
LD_LIBRARY_PATH="$build" "$work/consumer_pc" || fail "pkg-config consumer run"
echo "ok 1 pkg-config consumer from the build tree"

cmake -S "$consumer" -B "$work/consumer-build" -DCMAKE_PREFIX_PATH="$build" \
      -DCMAKE_C_COMPILER="$cc" >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "find_package configure"; }
grep -q "ddplua_DIR:PATH=$build\$" "$work/consumer-build/CMakeCache.txt" \
    || fail "find_package did not take the build tree: $(grep ddplua_DIR "$work/consumer-build/CMakeCache.txt")"
cmake --build "$work/consumer-build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "find_package build"; }
"$work/consumer-build/consumer" || fail "find_package consumer run"
echo "ok 2 find_package consumer from the build tree"
