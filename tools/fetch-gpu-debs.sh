#!/usr/bin/env bash
# tools/fetch-gpu-debs.sh: downloads (never installs) the Debian 12 .deb files that
# scripts/gpu-check.sh unpacks on a GPU machine that has a compiler, CMake, the CUDA toolkit and
# PyTorch but no package registry: Lua 5.4, OpenBLAS (the pthread variant, as tools/install-deps.sh
# gets through libopenblas-dev's first alternative), Gloo, readline, zlib, busted and its Lua
# modules, pkg-config, CMake (scripts/gpu-check.sh uses it only where the machine has no cmake of
# its own, on PATH or in python3's packages), and the shared libraries those link against that a
# CUDA image may lack.
#
# The one command, on a Debian 12 machine with apt (this one), before a GPU session:
#   tools/fetch-gpu-debs.sh && du -sh .gpu-debs
# then carry .gpu-debs with the tree (the device tool's `carry: [".gpu-debs"]`) and run
# scripts/gpu-check.sh there.
#
# usage: tools/fetch-gpu-debs.sh [--with-data] [DIR]
#   DIR          where the .deb files go (default .gpu-debs/ at the repository root, gitignored);
#                it is emptied of old .deb files first, so it holds exactly this list
#   --with-data  also dataset-fashion-mnist (30 MB), so data_spec and models_train_spec run there
# too Runs as any user (apt-get download needs no root) on Debian 12 with its package lists present
# (`apt-get update` first on a fresh machine). Prints each file and the total size, which must
# stay well under the device tool's 64 MiB carry limit (tree included).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
with_data=0
dir=""
for a in "$@"; do
    case $a in
    --with-data) with_data=1 ;;
    -h | --help)
        awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"
        exit 0
        ;;
    -*)
        echo "fetch-gpu-debs: unknown option $a" >&2
        exit 2
        ;;
    *) dir=$a ;;
    esac
done
dir=${dir:-$root/.gpu-debs}

packages=(
    # the language and its headers (lua5.4.pc); lua5.4 runs busted and the benchmark drivers
    lua5.4 liblua5.4-0 liblua5.4-dev
    # CPU GEMM: openblas.pc lives in openblas-pthread/pkgconfig; libgfortran5 is its runtime
    libopenblas-dev libopenblas-pthread-dev libopenblas0 libopenblas0-pthread
    libgfortran5 libquadmath0
    # CPU collectives; libgloo.so needs hiredis and ibverbs (and ibverbs libnl) at link time
    libgloo-dev libgloo0 libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200
    # the REPL's line editing; readline.pc requires tinfo.pc (libncurses-dev)
    libreadline-dev libreadline8 libncurses-dev libncurses6 libncursesw6 libtinfo6
    # gzip data sets
    zlib1g-dev zlib1g
    # the spec runner and its Lua modules (apt-cache depends lua-busted, lua-cliargs)
    lua-busted lua-cliargs lua-dkjson lua-filesystem lua-luassert lua-mediator lua-penlight
    lua-say lua-system lua-term lua-inifile lua-yaml libyaml-0-2
    # pkg-config, for CMake's pkg_check_modules where the machine has none
    pkgconf pkgconf-bin libpkgconf3
    # CMake 3.25 (an image with nvcc and PyTorch may have none) and the libraries it links that
    # a CUDA image is likeliest to lack; the loader is given only those the machine lacks
    cmake cmake-data libjsoncpp25 librhash0 libuv1 libarchive13 libcurl4 libnghttp2-14 libpsl5
    librtmp1 libssh2-1 libbrotli1 libldap-2.5-0 libsasl2-2 libsasl2-modules-db
)
[ "$with_data" -eq 1 ] && packages+=(dataset-fashion-mnist)

mkdir -p "$dir"
rm -f "$dir"/*.deb
# apt-get download writes into the current directory, with the candidate version of each name
(cd "$dir" && apt-get download -q "${packages[@]}")

n=$(find "$dir" -maxdepth 1 -name '*.deb' | wc -l)
if [ "$n" -ne "${#packages[@]}" ]; then
    echo "fetch-gpu-debs: expected ${#packages[@]} .deb files in $dir, found $n" >&2
    exit 1
fi
(cd "$dir" && du -h --apparent-size -- *.deb | sort -h)
bytes=$(find "$dir" -maxdepth 1 -name '*.deb' -printf '%s\n' | awk '{s += $1} END {print s}')
mib=$(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}')
echo "fetch-gpu-debs: $n packages, $mib MiB in $dir"
if [ "$bytes" -gt $((48 * 1048576)) ]; then
    echo "fetch-gpu-debs: warning: over 48 MiB; with the tree this nears the 64 MiB carry limit" >&2
fi
