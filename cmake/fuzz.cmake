# cmake/fuzz.cmake: the fuzz targets of spec/fuzz (safetensors/checkpoint loading, IDX files,
# the store's wire protocol and server).
# - Every build: replay_<target> runs the target on its seed corpus spec/fuzz/corpus/<target>
#   (which also holds every input that once crashed it: the regressions); ctest fuzz_<t>_corpus.
# - With -DDDPL_FUZZ=ON (clang, sanitizers: cmake/sanitize.cmake): fuzz_<target> is a libFuzzer
#   binary, and ctest fuzz_<target> fuzzes for DDPL_FUZZ_SECONDS from the seeds (new inputs go
#   to the build tree, never into the repository; a crash fails the test and leaves the input
#   in <build>/fuzz-artifacts: add it to the corpus once fixed).
set(DDPL_FUZZ_TARGETS safetensors idx store)
set(DDPL_FUZZ_SECONDS 60 CACHE STRING "How long each ctest fuzz_<target> run fuzzes (seconds)")

foreach(t ${DDPL_FUZZ_TARGETS})
  set(src ${CMAKE_SOURCE_DIR}/spec/fuzz/fuzz_${t}.c)
  set(corpus ${CMAKE_SOURCE_DIR}/spec/fuzz/corpus/${t})
  add_executable(replay_${t} ${src} ${CMAKE_SOURCE_DIR}/spec/fuzz/replay_main.c)
  target_include_directories(replay_${t} PRIVATE ${CMAKE_SOURCE_DIR}/engine)
  target_compile_definitions(replay_${t} PRIVATE _GNU_SOURCE) # memfd_create
  target_link_libraries(replay_${t} PRIVATE ddplua_static)
  add_test(NAME fuzz_${t}_corpus COMMAND replay_${t} ${corpus})
  set_tests_properties(fuzz_${t}_corpus PROPERTIES TIMEOUT 300 ENVIRONMENT "${DDPL_SANITIZE_ENV}")

  if(DDPL_FUZZ)
    add_executable(fuzz_${t} ${src})
    target_include_directories(fuzz_${t} PRIVATE ${CMAKE_SOURCE_DIR}/engine)
    target_compile_definitions(fuzz_${t} PRIVATE _GNU_SOURCE)
    target_link_libraries(fuzz_${t} PRIVATE ddplua_static)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    set(work ${CMAKE_BINARY_DIR}/fuzz-corpus/${t})
    set(artifacts ${CMAKE_BINARY_DIR}/fuzz-artifacts)
    # -timeout: one input running 20 s is a hang; -rss_limit_mb: a leak or a huge allocation
    # that got through is a finding too. The writable corpus comes first, the seeds second.
    file(MAKE_DIRECTORY ${work} ${artifacts})
    add_test(NAME fuzz_${t}
             COMMAND fuzz_${t} -max_total_time=${DDPL_FUZZ_SECONDS} -timeout=20
                     -rss_limit_mb=3072 -print_final_stats=1
                     -artifact_prefix=${artifacts}/${t}- ${work} ${corpus})
    # LD_PRELOAD as for every test: -fsanitize=fuzzer puts libstdc++ before the shared ASan
    # runtime in the executable's list, and ASan must come first
    set_tests_properties(fuzz_${t} PROPERTIES
                         TIMEOUT 600 ENVIRONMENT "${DDPL_SANITIZE_ENV}" LABELS fuzz)
  endif()
endforeach()
