# cmake/specs.cmake: registers every busted spec (spec/<area>/*_spec.lua, spec/README.md) and C
# test with ctest; a spec's test is named after its file, so spec file names are unique.
# Specs run under the stock lua5.4 with the build's C module and the source tree's Lua files, so
# they also check that `require 'ddplua'` works from a plain interpreter. The specs' helper
# modules (spec/support/) are on LUA_PATH: `require 'helpers'`.
find_program(BUSTED busted REQUIRED)
find_program(LUA54 lua5.4 REQUIRED)
file(GLOB_RECURSE DDPL_SPECS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/spec/*_spec.lua)
list(SORT DDPL_SPECS)
set(DDPL_SPEC_ENV
  "LUA_PATH=${CMAKE_SOURCE_DIR}/lua/?.lua\;${CMAKE_SOURCE_DIR}/lua/?/init.lua\;${CMAKE_SOURCE_DIR}/spec/support/?.lua\;/usr/share/lua/5.4/?.lua\;/usr/share/lua/5.4/?/init.lua"
  "LUA_CPATH=${CMAKE_BINARY_DIR}/?.so\;/usr/lib/x86_64-linux-gnu/lua/5.4/?.so"
  "DDPLUA_BIN=$<TARGET_FILE:ddplua>"
  "DDPLUA_BUILD_DIR=${CMAKE_BINARY_DIR}"
  "DDPLUA_SOURCE_DIR=${CMAKE_SOURCE_DIR}"
  "OMP_NUM_THREADS=2"
  ${DDPL_SANITIZE_ENV})

# Tests that may run on a GPU take the "gpu" lock, so ctest -j never runs two at once: one of
# them (cuda_runtime_spec's garbage collection case) fills the device's memory on purpose, and
# would give any other GPU test real out-of-memory errors. A test may use the GPU when its source
# names cuda (ddpl.cuda, device 'cuda', ddpl_cuda_*); without a GPU the lock costs nothing.
# In the emulation build (DDPL_CUDA_EMU) each process has emulated devices of its own, so
# there is nothing to share and no lock.
function(ddpl_lock_gpu_if_cuda name src)
  if(DDPL_CUDA_EMU)
    return()
  endif()
  file(READ ${src} text)
  if(text MATCHES "cuda")
    set_tests_properties(${name} PROPERTIES RESOURCE_LOCK gpu)
  endif()
endfunction()

# DDPL_SPEC_FILE_<name>: the file of the spec whose test is <name> (cmake/cuemu_tests.cmake reruns
# some by name).
foreach(spec ${DDPL_SPECS})
  get_filename_component(name ${spec} NAME_WE)
  if(DEFINED DDPL_SPEC_FILE_${name})
    message(FATAL_ERROR "two specs named ${name}: ${DDPL_SPEC_FILE_${name}} and ${spec}")
  endif()
  set(DDPL_SPEC_FILE_${name} ${spec})
  add_test(NAME ${name}
           COMMAND ${LUA54} ${BUSTED} --output=TAP ${spec}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${DDPL_SPEC_ENV}" TIMEOUT 600)
  ddpl_lock_gpu_if_cuda(${name} ${spec})
endforeach()

# package_spec builds the Debian package (cpack: a minute or more on a busy 2-core machine);
# `ctest -LE slow` leaves it out.
if(TEST package_spec)
  set_tests_properties(package_spec PROPERTIES LABELS slow)
endif()

file(GLOB DDPL_C_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/spec/c/*.c)
foreach(src ${DDPL_C_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/engine)
  target_link_libraries(${name} PRIVATE ddplua_static)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT 300 ENVIRONMENT "${DDPL_SANITIZE_ENV}")
  ddpl_lock_gpu_if_cuda(${name} ${src})
endforeach()

# The GPU specs compare cuda against cpu and are pending without a device; each also has a mode
# that runs its whole case table cpu against cpu, so a mistake in a table fails in CI rather than
# on the GPU machine.
foreach(pair cuda_pointwise_spec:DDPLUA_POINTWISE_DEVICE=cpu
             cuda_reduce_spec:DDPLUA_PARITY_SELFTEST=1
             cuda_parity_spec:DDPLUA_PARITY_DEVICE=cpu)
  string(REPLACE ":" ";" parts ${pair})
  list(GET parts 0 name)
  list(GET parts 1 mode)
  add_test(NAME ${name}_on_cpu
           COMMAND ${LUA54} ${BUSTED} --output=TAP ${DDPL_SPEC_FILE_${name}}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name}_on_cpu PROPERTIES ENVIRONMENT "${DDPL_SPEC_ENV};${mode}"
                       TIMEOUT 600)
endforeach()

# Under the sanitizers (tools/sanitize.sh), the multi-process specs run as a few 2-rank cases
# each, picked with busted's --filter: the whole specs take minutes under ASan on 2 cores, and
# these cases carry the collectives (shared memory and Gloo), the object collectives, DDP's
# reducer (buckets in shared memory and over Gloo) and the DataLoader's worker processes and
# slots through real processes under ASan+UBSan.
if(DDPL_SANITIZE)
  set(DDPL_SAN_2RANK_CASES
      "dist_collectives_spec|pass every check on 2 ranks"
      "dist_objects_spec|pass every check on 2 ranks"
      "ddp_spec|2 ranks, model=mlp$|2 ranks, model=cnn cap=0.002 view=1, DDPLUA_SHM=0"
      "data_workers_spec|give the same batches as no workers|reuse shared%-memory slots")
  foreach(entry ${DDPL_SAN_2RANK_CASES})
    string(REPLACE "|" ";" parts "${entry}")
    list(POP_FRONT parts name)
    set(filters)
    foreach(f ${parts})
      list(APPEND filters --filter "${f}")
    endforeach()
    add_test(NAME ${name}_2ranks
             COMMAND ${LUA54} ${BUSTED} --output=TAP ${filters} ${DDPL_SPEC_FILE_${name}}
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(${name}_2ranks PROPERTIES ENVIRONMENT "${DDPL_SPEC_ENV}" TIMEOUT 900)
  endforeach()
endif()

# The layer rules of docs/internals/architecture.md, from the sources' includes and the objects'
# symbols (tools/check-layers.sh), and the checker itself on small trees that break them.
add_test(NAME check_layers COMMAND ${CMAKE_SOURCE_DIR}/spec/tools/check_layers_test.sh ${CMAKE_BINARY_DIR})
set_tests_properties(check_layers PROPERTIES TIMEOUT 300)
# Comments name only files that exist (tools/check-file-refs.sh).
add_test(NAME check_file_refs COMMAND ${CMAKE_SOURCE_DIR}/tools/check-file-refs.sh)

# The CUDA emulation (tools/cuemu, docs/internals/cuda-emulation.md) is a test build's alone: a
# normal build, CPU-only or nvcc's, links none of it.
if(NOT DDPL_CUDA_EMU)
  add_test(NAME no_cuemu_in_normal_build
           COMMAND sh -c "! nm -C \"$1\" | grep -i cuemu" sh $<TARGET_FILE:ddplua_shared>)
endif()
