#!/usr/bin/env bash
# tools/sanitize.sh: the suite's sanitizer and fuzzing pass (part of the README's test command,
# so CI runs it): a second build with AddressSanitizer + UndefinedBehaviorSanitizer and the
# libFuzzer targets (clang, CUDA off: cmake/sanitize.cmake, cmake/fuzz.cmake), then
#   - every C test, the fast specs and the fuzz corpora under the sanitizers (any report fails:
#     UBSan halts on its first one), and
#   - each fuzz target for DDPL_FUZZ_SECONDS (60 by default) from its seeds.
# The specs left out are the long multi-process trainings (they run in the main build; under
# ASan each takes minutes on 2 cores): SANITIZE_SKIP below, each for that reason.
# Usage: tools/sanitize.sh [build-dir]   (default build-sanitize)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-sanitize}
seconds=${DDPL_FUZZ_SECONDS:-60}

# long trainings and multi-process gangs (minutes each under ASan on 2 cores)
SANITIZE_SKIP='^(train_spec|elastic_spec|ddp_spec|ddp_join_spec|zero_spec|sync_batch_norm_spec|ddp_powersgd_spec|launcher_spec|check_layers|check_file_refs)$'

CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDDPL_CUDA=OFF -DDDPL_SANITIZE=ON -DDDPL_FUZZ=ON -DDDPL_FUZZ_SECONDS="$seconds" >/dev/null
cmake --build "$build" -j2
echo "sanitize: tests under ASan+UBSan (skipping: $SANITIZE_SKIP)"
ctest --test-dir "$build" --output-on-failure -j2 -LE fuzz -E "$SANITIZE_SKIP"
echo "sanitize: fuzzing each target for ${seconds} s"
ctest --test-dir "$build" --output-on-failure -j2 -L fuzz
