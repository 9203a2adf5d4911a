#!/usr/bin/env bash
# tools/sanitize.sh: the suite's sanitizer and fuzzing pass (part of the README's test command,
# so CI runs it): a second build with AddressSanitizer + UndefinedBehaviorSanitizer and the
# libFuzzer targets (clang: cmake/sanitize.cmake, cmake/fuzz.cmake), with the CUDA backend on
# the CPU emulation (-DDDPL_CUDA_EMU=ON, docs/internals/cuda-emulation.md), so every kernel's memory
# accesses are checked like compute-sanitizer's memcheck and the CUDA host code runs under ASan
# too, then
#   - every C test, the fast specs and the fuzz corpora under the sanitizers (any report fails:
#     UBSan halts on its first one), and
#   - each fuzz target for DDPL_FUZZ_SECONDS (60 by default) from its seeds;
#   - a third build with ThreadSanitizer, running the C tests of the engine's threads.
# Left out under the sanitizers (SANITIZE_SKIP; each still runs in the main build):
#   - the multi-process trainings and gangs (ddp*, dist*, elastic, zero, fsdp, sync_batch_norm,
#     spawn, launcher, data_workers, train) as whole specs: minutes each under ASan on 2 cores, and
#     timing-bound; a few 2-rank cases of the collectives, object collectives, DDP and the
#     DataLoader's workers run instead (the *_2ranks tests, cmake/specs.cmake), and the engine
#     code runs under ASan in the C tests (test_pg*, test_store*, test_reducer) and the fuzzers;
#   - specs of tools rather than engine code: cmake and packaging (cuda_libs_cmake, package,
#     luarocks, check_*, embed_install and embed_build_tree: they link the library into a
#     program built without the sanitizers), and gpu_check (nvcc cannot run with the ASan runtime preloaded);
#   - tensor_memory_spec and host_alloc_spec, which measure the allocator that ASan replaces (RSS,
#     page faults); the host cache's logic runs under ASan in spec/c/test_host_alloc.c;
#   - cuemu_kernel_coverage: every kernel launched is a property of the whole cuda-emu label
#     (tools/cuda-emu.sh checks it), and some of the label's specs are left out here.
# Usage: tools/sanitize.sh [build-dir]   (default build-sanitize)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-sanitize}
seconds=${DDPL_FUZZ_SECONDS:-60}

SANITIZE_SKIP='^(ddp_spec|ddp_join_spec|ddp_powersgd_spec|dist_collectives_spec|dist_mismatch_spec|dist_objects_spec|dist_groups_spec|elastic_spec|zero_redundancy_spec|fsdp_spec|sync_batch_norm_spec|spawn_spec|launcher_spec|data_workers_spec|models_train_spec|cuda_libs_cmake_spec|package_spec|luarocks_spec|check_layers|check_file_refs|gpu_check_spec|tensor_memory_spec|host_alloc_spec|embed_install|embed_build_tree|cuemu_kernel_coverage)$'

CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDDPL_CUDA_EMU=ON -DDDPL_SANITIZE=ON -DDDPL_FUZZ=ON -DDDPL_FUZZ_SECONDS="$seconds" >/dev/null
cmake --build "$build" -j2
echo "sanitize: tests under ASan+UBSan (skipping: $SANITIZE_SKIP)"
ctest --test-dir "$build" --output-on-failure -j2 -LE fuzz -E "$SANITIZE_SKIP"
echo "sanitize: fuzzing each target for ${seconds} s"
ctest --test-dir "$build" --output-on-failure -j2 -L fuzz

# ThreadSanitizer, on a CPU-only build of its own: the C tests whose engine code runs threads
# (the CPU pool, process groups with their lanes and heartbeat over the store and Gloo, the
# store's server, the DDP reducer's hooks and collectives, the DataLoader's worker transport);
# any report fails the run (TSAN_OPTIONS=halt_on_error=1, cmake/sanitize.cmake).
tsan_tests='test_threads test_pg test_pg_backend test_pg_rooted test_store test_store_limits test_reducer test_worker_ipc test_host_alloc'
CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$build-tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDDPL_CUDA=OFF -DDDPL_TSAN=ON >/dev/null
cmake --build "$build-tsan" -j2 --target $tsan_tests
echo "sanitize: the threads under TSan ($tsan_tests)"
ctest --test-dir "$build-tsan" --output-on-failure -j2 -R "^(${tsan_tests// /|})\$"
