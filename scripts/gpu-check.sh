#!/usr/bin/env bash
# scripts/gpu-check.sh: the one-command GPU check. Builds ddplua from this tree with the Debian
# packages carried in .gpu-debs/ (tools/fetch-gpu-debs.sh), runs the whole ctest suite (CPU and
# GPU specs; the GPU ones run for real where a device is visible) and the GPU benchmark
# (bench/gpu), then prints a summary. Meant for a machine with a GPU, a compiler, the CUDA
# toolkit and PyTorch but no package registry (CMake too, or carried in .gpu-debs); it also runs
# on a machine without a GPU (the GPU specs are then pending and the benchmark says there is no
# device).
#
# Where nvidia-smi lists a GPU, the check cannot pass having tested nothing: it first builds and
# runs scripts/gpu-probe.cu (driver and runtime versions, one kernel per device) and stops within
# a minute or two with CUDA's reason if the GPU is unusable; it builds with DDPL_CUDA=ON (no
# silent CPU-only build); and it fails if any spec case was skipped for want of a CUDA device.
#
# usage: scripts/gpu-check.sh [--build-dir DIR] [--arch 90] [--jobs N] [--tests REGEX]
#                             [--skip-tests] [--skip-bench] [--bench-args '...'] [--system]
#                             [--budget 540]
#   --build-dir   default build-gpu (gitignored)
#   --arch        CMAKE_CUDA_ARCHITECTURES (default: the first GPU's compute capability as
#                 nvidia-smi reports it, else 90: H100/H200; 80 for A100)
#   --tests       only the ctest tests matching REGEX (ctest -R)
#   --bench-args  extra arguments for bench/gpu/run (e.g. '--quick' or '--no-torch')
#   --system      use the machine's installed packages, not .gpu-debs
#   --budget      seconds for the whole check (default 540, under the device tool's 600 per
#                 command): the specs stop in time to leave the benchmark 200 s, and the
#                 benchmark stops before the budget runs out, so the logs always come back
# Environment: NVCC (the nvcc to use; default nvcc on PATH, else /usr/local/cuda/bin/nvcc).
# Logs, the summary and the benchmark's figures go to $OUT when it is set (the device tool
# returns what is written there), else to <build-dir>/gpu-check/. Budget: under a minute for
# the probe, about 2 min to build on 16 cores, 2-4 min of specs, 2-3 min of benchmark.
# Exit status: 0 all passed; 1 a step failed (the summary's FAILED line says which);
# 2 bad arguments; 3 a GPU is listed but unusable (the probe's reason is in the summary).
set -uo pipefail
# The whole script is one { } block: bash parses it before running any of it, so editing this
# file (a pull, a rebuild of the tree) while a check runs cannot change what the check does.
{

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
build="build-gpu"
arch=""
jobs=$(nproc 2>/dev/null || echo 4)
tests=""
skip_tests=0
skip_bench=0
bench_args=""
use_system=0
budget=540
while [ $# -gt 0 ]; do
    case $1 in
    --build-dir) build=$2; shift ;;
    --arch) arch=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --tests) tests=$2; shift ;;
    --skip-tests) skip_tests=1 ;;
    --skip-bench) skip_bench=1 ;;
    --bench-args) bench_args=$2; shift ;;
    --system) use_system=1 ;;
    --budget) budget=$2; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
case $build in /*) ;; *) build=$root/$build ;; esac
logs=${OUT:-$build/gpu-check}
mkdir -p "$logs"
summary=$logs/summary.txt
: >"$summary"
t_start=$(date +%s)
say() { echo "gpu-check: $*" | tee -a "$summary"; }
elapsed() { echo $(($(date +%s) - t_start)); }
# seconds left of the budget, less `reserve`, at least 60
left() { local l=$((budget - $(elapsed) - $1)); [ $l -lt 60 ] && l=60; echo $l; }

say "started $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), $jobs jobs, tree $root"
# ---- 0. is there a GPU, and can CUDA use it? ----
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
    gpus=$(timeout 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]')
    timeout 30 nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap \
        --format=csv,noheader 2>&1 | sed 's/^/gpu-check: gpu: /' | tee -a "$summary"
    if [ -z "$arch" ] && [ "$gpus" -gt 0 ]; then # "9.0" -> 90
        arch=$(timeout 30 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
            head -1 | tr -d ' .' | grep -xE '[0-9]{2,3}')
    fi
else
    say "gpu: nvidia-smi not found"
fi
arch=${arch:-90}
say "gpus listed: $gpus; CUDA architectures: $arch"
nvcc_bin=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ -x "$nvcc_bin" ]; then
    say "nvcc: $nvcc_bin, $("$nvcc_bin" --version | grep -o 'release [0-9.]*' | head -1)"
elif [ "$gpus" -gt 0 ]; then
    say "FAILED: nvidia-smi lists $gpus GPU(s) but there is no nvcc at $nvcc_bin (set NVCC):" \
        "nothing on the GPU could be tested"
    exit 3
else
    say "warning: no nvcc on PATH or in /usr/local/cuda/bin: the CUDA backend will not be built"
fi
cuda_arg=()
if [ "$gpus" -gt 0 ]; then
    # The probe, compiled for the build's architectures: a driver older than the toolkit, a
    # device in use or in a bad state, or an architecture the build would not cover all show
    # here, in seconds, with CUDA's words.
    probe_dir=$build/gpu-probe
    mkdir -p "$probe_dir"
    gencode=()
    for a in ${arch//[;,]/ }; do gencode+=(-gencode "arch=compute_$a,code=[sm_$a,compute_$a]"); done
    t0=$(date +%s)
    if ! timeout -k 5 90 "$nvcc_bin" "${gencode[@]}" -o "$probe_dir/gpu-probe" \
        "$root/scripts/gpu-probe.cu" >"$logs/probe.log" 2>&1; then
        cat "$logs/probe.log"
        say "FAILED: nvcc could not build the probe (scripts/gpu-probe.cu), see probe.log"
        exit 3
    fi
    timeout -k 5 60 "$probe_dir/gpu-probe" >>"$logs/probe.log" 2>&1
    rc=$?
    sed -n 's/^probe: /gpu-check: probe: /p' "$logs/probe.log" | tee -a "$summary"
    if [ $rc -ne 0 ]; then
        [ $rc -eq 124 ] && say "probe: stopped after 60 s (a hung driver?)"
        say "FAILED: the GPU is unusable (probe rc $rc after $(($(date +%s) - t0)) s):" \
            "$(grep -m1 'FAILED' "$logs/probe.log" | sed 's/^probe: FAILED: //')"
        exit 3
    fi
    say "probe ok in $(($(date +%s) - t0)) s"
    cuda_arg=(-DDDPL_CUDA=ON) # never a silent CPU-only build on a GPU machine
fi
say "python3: $(python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "gpu", torch.cuda.is_available())' 2>&1 | tail -1)"

# ---- 1. the carried packages, unpacked into a private prefix ----
debs=$root/.gpu-debs
if [ "$use_system" -eq 0 ] && ! ls "$debs"/*.deb >/dev/null 2>&1; then
    say "no .deb files in $debs (run tools/fetch-gpu-debs.sh and carry .gpu-debs): using the system's packages"
    use_system=1
fi
if [ "$use_system" -eq 0 ]; then
    # a fixed path, so a build directory configured by an earlier run (CMake caches the paths
    # of lua5.4, busted and the .pc results) stays valid; emptied first
    prefix=${TMPDIR:-/tmp}/ddplua-gpu-debs-$(id -u)
    rm -rf "$prefix"
    mkdir -p "$prefix" || { say "FAILED: cannot create $prefix"; exit 1; }
    for d in "$debs"/*.deb; do
        if command -v dpkg-deb >/dev/null 2>&1; then
            dpkg-deb -x "$d" "$prefix" || { say "FAILED to unpack $d"; exit 1; }
        else # no dpkg: a .deb is an ar archive holding data.tar.{xz,zst,gz}
            member=$(ar t "$d" | grep '^data\.tar') || { say "FAILED: $d has no data.tar"; exit 1; }
            case $member in
            *.xz) z=-J ;;
            *.zst) z=--zstd ;;
            *.gz) z=-z ;;
            *) z= ;;
            esac
            # shellcheck disable=SC2086 # z is one option or none
            ar p "$d" "$member" | tar -x $z -f - -C "$prefix" || { say "FAILED to unpack $d"; exit 1; }
        fi
    done
    # Debian's files name /usr/... (and /lib/...): point them into the prefix. Absolute symlinks
    # (libreadline.so -> /lib/x86_64-linux-gnu/libreadline.so.8, ...) first.
    find "$prefix" -type l -lname '/*' | while read -r l; do
        ln -sfn "$prefix$(readlink "$l")" "$l"
    done
    # .pc files: variables and -I/-L flags naming /usr
    find "$prefix" -name '*.pc' -type f -exec sed -i -E \
        -e "s#^([A-Za-z_]+)=/usr#\1=$prefix/usr#" -e "s#(-[IL])/usr/#\1$prefix/usr/#g" {} +
    # Gloo's CMake export names its library as "/usr/lib/libgloo.so.0.5.0"
    find "$prefix/usr/share/cmake" -name '*.cmake' -type f -exec sed -i \
        -e "s#\"/usr/#\"$prefix/usr/#g" {} + 2>/dev/null
    ma=x86_64-linux-gnu
    libdirs=$prefix/usr/lib/$ma/openblas-pthread:$prefix/usr/lib/$ma:$prefix/lib/$ma:$prefix/usr/lib
    # The loader sees only the libraries this machine lacks (liblua5.4, libopenblas, libgloo,
    # ...), as links in $prefix/ld: Debian's libz or libtinfo must not replace the machine's own
    # under python3, cmake or nvcc. The linker sees the whole prefix (LIBRARY_PATH, .pc files).
    ld_dir=$prefix/ld
    mkdir -p "$ld_dir"
    have=$( { ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | awk 'NR > 1 { print $1 }' | sort -u)
    while read -r f; do
        so=$(objdump -p "$f" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
        if [ -n "$so" ] && ! grep -qxF "$so" <<<"$have"; then ln -sfn "$f" "$ld_dir/$so"; fi
    done < <(find "$prefix/usr/lib" "$prefix/lib" -type f -name 'lib*.so*' 2>/dev/null)
    # The tools: lua5.4 and busted from the prefix (its Lua modules are the ones on the paths
    # below); pkg-config only where the machine has none.
    mkdir -p "$prefix/tools"
    ln -sfn "$prefix/usr/bin/lua5.4" "$prefix/tools/lua5.4"
    ln -sfn "$prefix/usr/bin/busted" "$prefix/tools/busted"
    command -v pkg-config >/dev/null 2>&1 || ln -sfn "$prefix/usr/bin/pkgconf" "$prefix/tools/pkg-config"
    export PATH=$prefix/tools:$PATH
    export PKG_CONFIG_PATH=$prefix/usr/lib/$ma/openblas-pthread/pkgconfig:$prefix/usr/lib/$ma/pkgconfig:$prefix/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export CMAKE_PREFIX_PATH=$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
    export CPATH=$prefix/usr/include:$prefix/usr/include/$ma${CPATH:+:$CPATH}
    export LIBRARY_PATH=$libdirs${LIBRARY_PATH:+:$LIBRARY_PATH}
    export LD_LIBRARY_PATH=$ld_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    lua_share=$prefix/usr/share/lua/5.4
    lua_lib=$prefix/usr/lib/$ma/lua/5.4
    gloo_arg=(-DGloo_DIR="$prefix/usr/share/cmake/Gloo")
    say "unpacked $(find "$debs" -maxdepth 1 -name '*.deb' | wc -l) packages into $prefix;" \
        "the loader gets $(find "$ld_dir" -mindepth 1 | wc -l) libraries the machine lacks"
    if ! out=$(lua5.4 -v 2>&1); then # a machine older than Debian 12 (glibc 2.34, GCC 12)
        say "FAILED: the carried lua5.4 does not run here: $out"
        exit 1
    fi
else
    prefix=""
    lua_share=/usr/share/lua/5.4
    lua_lib=/usr/lib/x86_64-linux-gnu/lua/5.4
    gloo_arg=()
fi
# cmake/specs.cmake sets LUA_PATH/LUA_CPATH with Debian's system folders for every spec; Lua 5.4
# reads LUA_PATH_5_4/LUA_CPATH_5_4 before them, so these win and name the prefix instead.
export LUA_PATH_5_4="$root/lua/?.lua;$root/lua/?/init.lua;$root/spec/support/?.lua;$lua_share/?.lua;$lua_share/?/init.lua;;"
export LUA_CPATH_5_4="$build/?.so;$lua_lib/?.so;;"
export LUA_PATH=$LUA_PATH_5_4 LUA_CPATH=$LUA_CPATH_5_4
if [ -z "${FASHION_MNIST_DIR:-}" ]; then
    for d in "${prefix:-/nonexistent}/usr/share/datasets/fashion-mnist" /usr/share/datasets/fashion-mnist; do
        [ -f "$d/t10k-labels-idx1-ubyte.gz" ] && { export FASHION_MNIST_DIR=$d; break; }
    done
fi
# CMake: the machine's; else one pip put in python3's packages (an image with PyTorch often has
# it, no pip run needed); else the carried Debian one. Run by its real path: CMake finds its
# modules beside its executable.
cmake_bin=$(command -v cmake || true)
if [ -z "$cmake_bin" ]; then
    cmake_bin=$(python3 -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))' \
        2>/dev/null)
    [ -x "$cmake_bin" ] || cmake_bin=""
fi
if [ -z "$cmake_bin" ] && [ -n "$prefix" ] && [ -x "$prefix/usr/bin/cmake" ]; then
    cmake_bin=$prefix/usr/bin/cmake
fi
if [ -z "$cmake_bin" ]; then
    say "FAILED: no cmake on PATH, in python3's packages or in .gpu-debs" \
        "(tools/fetch-gpu-debs.sh carries one)"
    exit 1
fi
if ! cmake_version=$("$cmake_bin" --version 2>&1 | head -1); then
    say "FAILED: $cmake_bin does not run here: $cmake_version" \
        "$(ldd "$cmake_bin" 2>/dev/null | grep 'not found' | tr -s ' \t\n' ' ')"
    exit 1
fi
ctest_bin=$(dirname "$cmake_bin")/ctest
say "tool: cmake = $cmake_bin ($cmake_version)"
for tool in pkg-config lua5.4 busted; do
    say "tool: $tool = $(command -v $tool || echo MISSING)"
done
say "lua5.4.pc: $(pkg-config --variable=pcfiledir lua5.4 2>&1)"
say "openblas.pc: $(pkg-config --variable=pcfiledir openblas 2>&1)"

# ---- 2. configure and build ----
t0=$(date +%s)
# a cache written with another prefix (or with the system's packages) names tools and .pc
# results that CMake would not look up again: configure afresh (the objects stay)
if [ -f "$build/CMakeCache.txt" ]; then
    stale=$(grep -oE '/[^;:= ]*/ddplua-(gpu-)?debs[^/;:= ]*' "$build/CMakeCache.txt" | sort -u |
        grep -vxF "${prefix:-}" | head -1)
    if [ -n "$stale" ] || { [ -n "${prefix:-}" ] && ! grep -qF "$prefix" "$build/CMakeCache.txt"; }; then
        say "the cache in $build names other packages (${stale:-the system packages}): configuring afresh"
        rm -f "$build/CMakeCache.txt"
    fi
fi
"$cmake_bin" -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    "${cuda_arg[@]}" "${gloo_arg[@]}" >"$logs/configure.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    tail -40 "$logs/configure.log"
    say "FAILED: configure (rc $rc), see configure.log"
    exit 1
fi
grep -E 'ddplua: |CMake Warning' "$logs/configure.log" | sed 's/^-- /gpu-check: /' | tee -a "$summary"
grep -E '^(LUA_INCLUDEDIR|OPENBLAS_LIBDIR|Gloo_DIR|BUSTED|LUA54)[:=]' "$build/CMakeCache.txt" |
    sed 's/^/gpu-check: cache: /' | tee -a "$summary"
"$cmake_bin" --build "$build" -j"$jobs" >"$logs/build.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    grep -E 'error|Error' "$logs/build.log" | head -40
    say "FAILED: build (rc $rc) after $(($(date +%s) - t0)) s, see build.log"
    exit 1
fi
say "build ok in $(($(date +%s) - t0)) s"
status=0

# ---- 3. the whole spec suite ----
if [ "$skip_tests" -eq 0 ]; then
    t0=$(date +%s)
    # -V: every test's output in ctest.log (lines prefixed with the test number), so the
    # pending cases can be counted below
    ctest_args=(--test-dir "$build" -j"$jobs" -V --timeout 300)
    [ -n "$tests" ] && ctest_args+=(-R "$tests")
    if [ -z "${FASHION_MNIST_DIR:-}" ]; then
        say "no Fashion-MNIST (fetch with --with-data): data_spec and models_train_spec are left out"
        ctest_args+=(-E '^(data_spec|models_train_spec)$')
    fi
    limit=$(left 200)
    [ "$skip_bench" -eq 1 ] && limit=$(left 10)
    timeout -k 10 "$limit" "$ctest_bin" "${ctest_args[@]}" >"$logs/ctest.log" 2>&1
    rc=$?
    [ $rc -eq 124 ] && say "specs: stopped after $limit s (budget); the log has what finished"
    grep -E 'tests passed|tests failed' "$logs/ctest.log" | sed 's/^/gpu-check: ctest: /' | tee -a "$summary"
    sed -n '/The following tests FAILED/,$p' "$logs/ctest.log" | tee -a "$summary"
    # busted's TAP marks a pending case '# SKIP <reason>': with a GPU, none should lack a device
    skips=$(grep -c '# SKIP' "$logs/ctest.log")
    nodev=$(grep -c '# SKIP.*[Nn]o CUDA' "$logs/ctest.log")
    say "specs: rc $rc in $(($(date +%s) - t0)) s; $skips pending cases, $nodev of them for" \
        "want of a CUDA device; log ctest.log"
    if [ "$gpus" -gt 0 ] && [ "$nodev" -gt 0 ]; then # the probe passed, yet ddplua saw no GPU
        say "FAILED: $nodev GPU cases were skipped for want of a CUDA device on a machine with" \
            "$gpus GPU(s); the first:"
        grep -m5 '# SKIP.*[Nn]o CUDA' "$logs/ctest.log" | tee -a "$summary"
        grep -m3 'ddplua: warning: CUDA' "$logs/ctest.log" | tee -a "$summary"
        status=1
    fi
    if [ $rc -ne 0 ]; then # each failing busted case and C check, with its test's number
        grep -E '^[0-9]+: (not ok|# Failure message|.*check failed)' "$logs/ctest.log" | head -60 |
            tee -a "$summary"
    fi
    [ $rc -ne 0 ] && status=1
fi

# ---- 4. the GPU benchmark ----
if [ "$skip_bench" -eq 0 ]; then
    t0=$(date +%s)
    limit=$(left 10)
    # shellcheck disable=SC2086 # bench_args is a list of words
    DDPLUA_BUILD_DIR=$build BENCH_JSON=$logs/bench.json timeout -k 10 "$limit" \
        "$root/bench/gpu/run" $bench_args >"$logs/bench.txt" 2>&1
    rc=$?
    [ $rc -eq 124 ] && say "bench: stopped after $limit s (budget)"
    tee -a "$summary" <"$logs/bench.txt"
    say "bench: rc $rc in $(($(date +%s) - t0)) s; log bench.txt, figures bench.json"
    [ $rc -ne 0 ] && status=1
fi

say "done in $(elapsed) s, status $status; logs in $logs"
exit $status
}
