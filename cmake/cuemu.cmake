# cmake/cuemu.cmake: -DDDPL_CUDA_EMU=ON builds the real CUDA backend on the CPU emulation of
# tools/cuemu (docs/internals/cuda-emulation.md): no GPU, no driver and no libcudart, only
# the toolkit's headers. Included by CMakeLists.txt in place of the nvcc setup; never part of a
# normal build.
#
# - every engine/cuda/*.cu and *.cuh is rewritten by tools/cuemu/rewrite.lua into the build tree
#   (launch syntax, kernel entries, shared memory; `#line` keeps errors on the original file) and
#   compiled by the host C++ compiler with tools/cuemu/runtime/cuemu.h force-included;
# - the runtime (tools/cuemu/runtime/*.cpp: fibers, launches, memory, streams, events) is linked
#   into the engine in place of libcudart;
# - cuBLAS, cuDNN and NCCL are the stand-ins of tools/cuemu/{cublas,cudnn,nccl}, which the engine
#   opens by path exactly as it opens the real ones (engine/cuda/cuda_dynlib.c).
# Results: DDPL_HAVE_CUDA/CUDNN/NCCL ON, DDPL_CUDA_LIBS, DDPL_CUDA_KERNEL_SOURCES (the rewritten
# kernels and the runtime), DDPL_CUEMU_CUDA_INCLUDE, and the DDPL_<LIB>_REAL/_SONAME paths.

find_path(DDPL_CUEMU_CUDA_INCLUDE cuda_runtime.h cuda_fp16.h
          HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda PATH_SUFFIXES include)
if(NOT DDPL_CUEMU_CUDA_INCLUDE)
  message(FATAL_ERROR "DDPL_CUDA_EMU=ON needs the CUDA toolkit's headers (cuda_runtime.h): "
                      "none under /usr/local/cuda/include, CUDA_HOME or CUDA_PATH")
endif()
foreach(header cudnn.h nccl.h cublas_api.h)
  if(NOT EXISTS ${DDPL_CUEMU_CUDA_INCLUDE}/${header})
    message(FATAL_ERROR "DDPL_CUDA_EMU=ON needs ${header} beside cuda_runtime.h in "
                        "${DDPL_CUEMU_CUDA_INCLUDE}: the stand-ins are built against it")
  endif()
endforeach()
find_program(DDPL_CUEMU_LUA lua5.4 REQUIRED)

set(DDPL_HAVE_CUDA ON)
set(DDPL_HAVE_CUDNN ON)
set(DDPL_HAVE_NCCL ON)
set(DDPL_CUDNN_INCLUDE ${DDPL_CUEMU_CUDA_INCLUDE})
set(DDPL_NCCL_INCLUDE ${DDPL_CUEMU_CUDA_INCLUDE})
set(DDPL_CUDNN_SUMMARY "the emulation's stand-in (tools/cuemu/cudnn)")
set(DDPL_NCCL_SUMMARY "the emulation's stand-in (tools/cuemu/nccl)")
set(DDPL_CUDA_LIBS ${CMAKE_DL_LIBS})

# ---- the kernels, rewritten ----
set(DDPL_CUEMU_DIR ${CMAKE_BINARY_DIR}/cuemu)
# cuemu_rewrite(SRC OUT): OUT is SRC rewritten for the host compiler (tools/cuemu/rewrite.lua)
function(cuemu_rewrite src out)
  file(RELATIVE_PATH shown ${CMAKE_SOURCE_DIR} ${src})
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${DDPL_CUEMU_DIR}
    COMMAND ${DDPL_CUEMU_LUA} ${CMAKE_SOURCE_DIR}/tools/cuemu/rewrite.lua ${src} ${out} ${shown}
    DEPENDS ${src} ${CMAKE_SOURCE_DIR}/tools/cuemu/rewrite.lua
    COMMENT "cuemu: rewriting ${shown}" VERBATIM)
  # compiled as C++ with the device side of the emulation force-included
  set_source_files_properties(${out} PROPERTIES
    COMPILE_OPTIONS "-include;${CMAKE_SOURCE_DIR}/tools/cuemu/runtime/cuemu.h"
    INCLUDE_DIRECTORIES "${DDPL_CUEMU_DIR};${CMAKE_SOURCE_DIR}/engine/cuda;${CMAKE_SOURCE_DIR}/tools/cuemu/runtime")
endfunction()

file(GLOB cuemu_cu CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/engine/cuda/*.cu)
file(GLOB cuemu_cuh CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/engine/cuda/*.cuh)
set(DDPL_CUDA_KERNEL_SOURCES)
foreach(src ${cuemu_cu} ${cuemu_cuh})
  get_filename_component(name ${src} NAME)
  if(name MATCHES "\\.cu$")
    set(out ${DDPL_CUEMU_DIR}/${name}.cpp) # compiled as C++
  else()
    set(out ${DDPL_CUEMU_DIR}/${name})     # found first by the rewritten files' quoted includes
  endif()
  cuemu_rewrite(${src} ${out})
  list(APPEND DDPL_CUDA_KERNEL_SOURCES ${out})
endforeach()

# ---- the runtime, in place of libcudart ----
# (its sources directly: objects of another object library would not reach the static and
# shared libraries, which are made of $<TARGET_OBJECTS:ddplua_objects>)
file(GLOB cuemu_runtime CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tools/cuemu/runtime/*.cpp)
list(APPEND DDPL_CUDA_KERNEL_SOURCES ${cuemu_runtime})

# ---- the emulation's own test (CUDA source through the same rewrite) ----
if(DDPL_BUILD_TESTS)
  cuemu_rewrite(${CMAKE_SOURCE_DIR}/tools/cuemu/test/test_cuemu.cu ${DDPL_CUEMU_DIR}/test_cuemu.cu.cpp)
  add_executable(test_cuemu ${DDPL_CUEMU_DIR}/test_cuemu.cu.cpp ${cuemu_runtime})
  target_include_directories(test_cuemu PRIVATE ${DDPL_CUEMU_CUDA_INCLUDE}
                                                ${CMAKE_SOURCE_DIR}/tools/cuemu/common)
  target_link_libraries(test_cuemu PRIVATE Threads::Threads)
  add_test(NAME test_cuemu COMMAND test_cuemu)
  set_tests_properties(test_cuemu PROPERTIES LABELS cuda-emu TIMEOUT 120)
endif()

# ---- the library stand-ins ----
foreach(lib cublas cudnn nccl)
  string(TOUPPER ${lib} LIB)
  add_subdirectory(${CMAKE_SOURCE_DIR}/tools/cuemu/${lib} ${CMAKE_BINARY_DIR}/cuemu-${lib})
  set(DDPL_${LIB}_REAL $<TARGET_FILE:cuemu_${lib}>)
  set(DDPL_${LIB}_SONAME libcuemu_${lib}.so)
endforeach()
