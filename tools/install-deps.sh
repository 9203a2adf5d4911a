#!/usr/bin/env bash
# tools/install-deps.sh: installs the Debian 12 packages ddplua builds, tests and trains with.
# Installs only what is missing (so a machine that has them needs no network), using sudo when
# not root. The CUDA toolkit is optional and not installed here: with nvcc on the machine the
# build adds the CUDA backend (DDPL_CUDA=AUTO).
set -euo pipefail

packages=(
    build-essential cmake pkg-config
    lua5.4 liblua5.4-dev lua-busted     # the scripting language and the spec runner
    libopenblas-dev                     # CPU GEMM
    libreadline-dev                     # REPL line editing
    zlib1g-dev                          # gzip data sets
    libgloo-dev                         # CPU collectives (distributed runtime)
    iproute2                            # `ip netns`, for the multi-node spec
    dataset-fashion-mnist               # the real data set the examples train on
    util-linux                          # `script`, for the REPL's pty spec
    luarocks                            # the rock (ddplua-dev-1.rockspec, luarocks_spec)
    dpkg-dev                            # dpkg-shlibdeps: the .deb's Depends (package_spec)
    clang libclang-rt-14-dev            # tools/sanitize.sh: ASan/UBSan build, libFuzzer targets
)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages present"
    exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
