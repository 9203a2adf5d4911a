#!/bin/sh
# examples/embed/install_test.sh BUILD_DIR CONSUMER_DIR CC: installs the build to a temporary
# prefix and checks what an installed ddplua must do without the source tree:
#   1. the ddplua command finds its Lua files (share/lua/5.4 beside bin/)
#   2. a stock lua5.4 loads the installed module, with LUA_PATH set and with LUA_CPATH alone
#   3. a C consumer builds with pkg-config and runs
#   4. the same consumer builds with CMake's find_package(ddplua) and runs
#   5. the same consumer links the static library with `pkg-config --static` and runs
set -eu
build=$1
consumer=$2
cc=${3:-cc}
prefix=$(mktemp -d /tmp/ddplua-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
fail() { echo "install_test: FAILED: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null || fail "cmake --install"
# no help from the environment: a user's own LUA_PATH is not set here
unset LUA_PATH LUA_CPATH LUA_PATH_5_4 LUA_CPATH_5_4 || true

out=$("$prefix/bin/ddplua" -e 'print(ddpl.ones(2) + 1)') || fail "installed ddplua -e"
[ "$out" = "tensor([2., 2.])" ] || fail "installed ddplua printed '$out'"
echo "ok 1 installed ddplua: $out"

share="$prefix/share/lua/5.4"
out=$(LUA_PATH="$share/?.lua;$share/?/init.lua;;" LUA_CPATH="$prefix/lib/lua/5.4/?.so;;" \
      lua5.4 -e "local ddpl = require 'ddplua'; print(ddpl.F.relu(ddpl.tensor({-1., 2.})))") \
    || fail "lua5.4 with LUA_PATH and LUA_CPATH"
[ "$out" = "tensor([0., 2.])" ] || fail "lua5.4 printed '$out'"
out=$(LUA_CPATH="$prefix/lib/lua/5.4/?.so;;" \
      lua5.4 -e "local ddpl = require 'ddplua'; print(ddpl.ones(1):sum():item())") \
    || fail "lua5.4 with LUA_CPATH alone"
[ "$out" = "1.0" ] || fail "lua5.4 (LUA_CPATH alone) printed '$out'"
echo "ok 2 stock lua5.4 loads the installed module"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046
"$cc" -std=c11 -o "$prefix/consumer_pc" "$consumer/consumer.c" \
    $(pkg-config --cflags --libs ddplua lua5.4) -lm || fail "pkg-config build"
LD_LIBRARY_PATH="$prefix/lib" "$prefix/consumer_pc" || fail "pkg-config consumer run"
echo "ok 3 pkg-config consumer"

cmake -S "$consumer" -B "$prefix/consumer-build" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_C_COMPILER="$cc" >"$prefix/cmake.log" 2>&1 || { cat "$prefix/cmake.log"; fail "find_package configure"; }
cmake --build "$prefix/consumer-build" >"$prefix/build.log" 2>&1 || { cat "$prefix/build.log"; fail "find_package build"; }
LD_LIBRARY_PATH="$prefix/lib" "$prefix/consumer-build/consumer" || fail "find_package consumer run"
echo "ok 4 find_package consumer"

# only the archive left: -lddplua can only mean libddplua.a, whose dependencies
# `pkg-config --static` must name (Libs.private and the packages' own)
rm -f "$prefix"/lib/libddplua.so*
# shellcheck disable=SC2046
"$cc" -std=c11 -o "$prefix/consumer_static" "$consumer/consumer.c" \
    $(pkg-config --static --cflags --libs ddplua lua5.4) -lm || fail "pkg-config --static build"
"$prefix/consumer_static" || fail "static consumer run"
echo "ok 5 static consumer"
