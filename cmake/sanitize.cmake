# cmake/sanitize.cmake: -DDDPL_SANITIZE=ON builds everything with AddressSanitizer and
# UndefinedBehaviorSanitizer (any UB report ends the process, so a test fails on it), and
# -DDDPL_FUZZ=ON (clang only) adds the libFuzzer targets of spec/fuzz (cmake/fuzz.cmake);
# -DDDPL_TSAN=ON (clang only, alone) builds with ThreadSanitizer instead.
# tools/sanitize.sh is the one command that configures, builds and runs this in CI.
#
# The specs run the stock lua5.4, which is not instrumented and loads ddplua.so: the sanitizer
# runtime must be in the process before that, so every test gets it through LD_PRELOAD
# (DDPL_SANITIZE_ENV, added to the tests' environment by cmake/specs.cmake). With clang the
# runtime is linked shared (-shared-libasan) for the same reason: one runtime per process,
# whether the process is lua5.4, the ddplua executable or a C test.
option(DDPL_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(DDPL_FUZZ "Build the libFuzzer targets (needs clang)" OFF)
option(DDPL_TSAN "Build with ThreadSanitizer (the C tests' threads; tools/sanitize.sh)" OFF)
set(DDPL_SANITIZE_ENV "")

# -DDDPL_TSAN=ON: ThreadSanitizer for the engine's threads, through the C tests, which link the
# engine statically (an instrumented executable from its first instruction, as TSan wants; the
# stock lua5.4 of the specs is not). OpenBLAS is not instrumented, so the tests keep it on one
# thread: its own synchronisation would be invisible and read as races.
if(DDPL_TSAN)
  if(DDPL_SANITIZE OR NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "DDPL_TSAN=ON needs clang and excludes DDPL_SANITIZE (ASan)")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
  # die_after_fork=0: the process-group tests fork their ranks from a process that has threads
  # (the store's server), and each rank starts threads of its own; TSan supports that only
  # best-effort and would otherwise end the child at once
  set(DDPL_SANITIZE_ENV "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:die_after_fork=0"
                        "OPENBLAS_NUM_THREADS=1")
  return()
endif()
if(NOT DDPL_SANITIZE)
  if(DDPL_FUZZ)
    message(FATAL_ERROR "DDPL_FUZZ=ON needs DDPL_SANITIZE=ON (a fuzzer without sanitizers "
                        "finds only crashes)")
  endif()
  return()
endif()
if(DDPL_HAVE_CUDA AND NOT DDPL_CUDA_EMU)
  # (the emulation build is fine: its device memory is host memory, which ASan checks like
  # compute-sanitizer's memcheck; tools/cuemu/runtime/cuemu_fiber.cpp announces every stack switch)
  message(FATAL_ERROR "DDPL_SANITIZE=ON needs -DDDPL_CUDA=OFF or -DDDPL_CUDA_EMU=ON (the CUDA "
                      "runtime and ASan do not share an address space well)")
endif()

set(DDPL_SAN_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined
                   -fno-omit-frame-pointer)
if(CMAKE_C_COMPILER_ID STREQUAL "Clang")
  list(APPEND DDPL_SAN_FLAGS -shared-libasan)
  # clang reports every `#pragma omp simd` loop it leaves scalar under the sanitizers: noise here
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-Wno-pass-failed>)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libclang_rt.asan-x86_64.so
                  OUTPUT_VARIABLE DDPL_ASAN_RUNTIME OUTPUT_STRIP_TRAILING_WHITESPACE)
  get_filename_component(DDPL_ASAN_RUNTIME_DIR ${DDPL_ASAN_RUNTIME} DIRECTORY)
  # the executables find the shared runtime without LD_LIBRARY_PATH
  add_link_options(-Wl,-rpath,${DDPL_ASAN_RUNTIME_DIR})
  set(DDPL_SAN_PRELOAD ${DDPL_ASAN_RUNTIME}) # UBSan's handlers are part of it
  if(DDPL_FUZZ)
    # coverage for libFuzzer in every engine file; the fuzz targets link libFuzzer itself
    add_compile_options(-fsanitize=fuzzer-no-link)
  endif()
elseif(CMAKE_C_COMPILER_ID STREQUAL "GNU")
  if(DDPL_FUZZ)
    message(FATAL_ERROR "DDPL_FUZZ=ON needs clang (libFuzzer): CC=clang CXX=clang++")
  endif()
  foreach(lib libasan.so libubsan.so)
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=${lib}
                    OUTPUT_VARIABLE path OUTPUT_STRIP_TRAILING_WHITESPACE)
    list(APPEND DDPL_SAN_PRELOAD ${path})
  endforeach()
  string(REPLACE ";" ":" DDPL_SAN_PRELOAD "${DDPL_SAN_PRELOAD}")
else()
  message(FATAL_ERROR "DDPL_SANITIZE=ON: unknown compiler ${CMAKE_C_COMPILER_ID}")
endif()
foreach(lib ${DDPL_SAN_PRELOAD})
  if(NOT EXISTS ${lib})
    message(FATAL_ERROR "DDPL_SANITIZE=ON: the sanitizer runtime ${lib} is missing "
                        "(libclang-rt-dev for clang, libasan/libubsan for gcc)")
  endif()
endforeach()
add_compile_options(${DDPL_SAN_FLAGS})
add_link_options(${DDPL_SAN_FLAGS})

# Leaks are not checked: the Lua interpreter and the thread pool keep memory to the exit on
# purpose. A UB report prints its stack and ends the process (halt_on_error).
set(DDPL_SANITIZE_ENV
  "LD_PRELOAD=${DDPL_SAN_PRELOAD}"
  "ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:allocator_may_return_null=1"
  "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
message(STATUS "ddplua: sanitizers ON (address, undefined), runtime ${DDPL_SAN_PRELOAD}")
