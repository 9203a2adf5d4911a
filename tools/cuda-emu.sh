#!/usr/bin/env bash
# tools/cuda-emu.sh: the CUDA backend without a GPU (part of the README's test command, so CI runs
# it): a build with -DDDPL_CUDA_EMU=ON, where every kernel of engine/cuda runs on the CPU emulation
# of tools/cuemu and cuBLAS, cuDNN and NCCL are its stand-ins (docs/internals/cuda-emulation.md),
# then `ctest -L cuda-emu`: the emulation's own tests, every spec and C test with a CUDA path (once
# more in a seeded thread order for the kernel-heavy ones), the examples on `--device cuda`, and
# the check that every __global__ of engine/cuda was launched.
# Usage: tools/cuda-emu.sh [build-dir]   (default build-cuemu)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cuemu}

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDDPL_CUDA_EMU=ON >/dev/null
cmake --build "$build" -j2
echo "cuda-emu: ctest -L cuda-emu"
ctest --test-dir "$build" --output-on-failure -j2 -L cuda-emu
