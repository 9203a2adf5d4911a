# cmake/cuda_libs.cmake: finds cuDNN and NCCL for the CUDA backend (included by CMakeLists.txt
# once the CUDA language and CUDAToolkit are enabled).
#
# Both are optional: the engine opens them with dlopen on first use (engine/cuda/cuda_dynlib.c),
# so the build needs only their headers; without a header, the code that calls the library is
# compiled out and conv2d on cuda / backend='nccl' fail when called, naming what is missing.
# Where they are looked for, first hit wins:
#   1. <NAME>_ROOT (CMake variable or environment: CUDNN_ROOT, NCCL_ROOT), its include/ and lib/
#   2. the CUDA toolkit's own include and library folders (where NVIDIA's tarballs put them)
#   3. PyTorch's wheels: site-packages/nvidia/{cudnn,nccl}/{include,lib} of python3, which hold
#      only versioned files (libcudnn.so.9, libnccl.so.2), no unversioned link
#   4. the system's default paths (Debian/Ubuntu packages: /usr/include, /usr/lib/<multiarch>)
# A library found without its header is of no use (nothing can be compiled against it) and is
# reported as missing; a header found without a library still builds: the library is then
# opened at run time by its soname through the loader's path.
#
# Options (cache): DDPL_CUDNN and DDPL_NCCL = AUTO (use when found), ON (configure fails when
# not found), OFF (build without it even when present, e.g. to test that path).
# Results: DDPL_HAVE_CUDNN / DDPL_HAVE_NCCL (ON/OFF, also in ddpl/config.h),
#          DDPL_<LIB>_INCLUDE (header folder), DDPL_<LIB>_REAL (the library file, resolved, or
#          ""), DDPL_<LIB>_SONAME (e.g. libcudnn.so.9, or "" to take the header's major version).

set(DDPL_CUDNN AUTO CACHE STRING "Use cuDNN for conv2d on cuda: AUTO, ON (required) or OFF")
set(DDPL_NCCL AUTO CACHE STRING "Build the nccl process-group backend: AUTO, ON (required) or OFF")
set_property(CACHE DDPL_CUDNN PROPERTY STRINGS AUTO ON OFF)
set_property(CACHE DDPL_NCCL PROPERTY STRINGS AUTO ON OFF)

# The folder of PyTorch's nvidia.<pkg> wheel (e.g. .../site-packages/nvidia/cudnn), or "".
function(ddpl_python_nvidia_dir pkg out)
  set(${out} "" PARENT_SCOPE)
  find_program(DDPL_PYTHON3 NAMES python3 python)
  if(NOT DDPL_PYTHON3)
    return()
  endif()
  # nvidia.* are namespace packages (no __file__): __path__ names the folder
  execute_process(
    COMMAND ${DDPL_PYTHON3} -c "import nvidia.${pkg} as m; print(list(m.__path__)[0])"
    OUTPUT_VARIABLE dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc
    TIMEOUT 30)
  if(rc EQUAL 0 AND IS_DIRECTORY "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  endif()
endfunction()

# ddpl_find_cuda_lib(CUDNN cudnn cudnn.h 9): sets DDPL_HAVE_CUDNN, DDPL_CUDNN_INCLUDE,
# DDPL_CUDNN_REAL, DDPL_CUDNN_SONAME and DDPL_CUDNN_SUMMARY (one line for the configure report).
function(ddpl_find_cuda_lib var name header major)
  set(mode ${DDPL_${var}})
  if(NOT mode MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "DDPL_${var} must be AUTO, ON or OFF, not '${mode}'")
  endif()
  set(DDPL_HAVE_${var} OFF PARENT_SCOPE)
  set(DDPL_${var}_REAL "" PARENT_SCOPE)
  set(DDPL_${var}_SONAME "" PARENT_SCOPE)
  if(mode STREQUAL "OFF")
    set(DDPL_${var}_SUMMARY "OFF (DDPL_${var}=OFF)" PARENT_SCOPE)
    return()
  endif()
  set(roots)
  foreach(root "${${var}_ROOT}" "$ENV{${var}_ROOT}")
    if(root)
      list(APPEND roots "${root}")
    endif()
  endforeach()
  list(APPEND roots "${CUDAToolkit_LIBRARY_ROOT}")
  ddpl_python_nvidia_dir(${name} wheel)
  if(wheel)
    list(APPEND roots "${wheel}")
  endif()
  set(inc_hints)
  set(lib_hints)
  foreach(root ${roots})
    list(APPEND inc_hints "${root}/include")
    list(APPEND lib_hints "${root}/lib" "${root}/lib64")
  endforeach()
  list(APPEND inc_hints ${CUDAToolkit_INCLUDE_DIRS})
  list(APPEND lib_hints ${CUDAToolkit_LIBRARY_DIR})
  find_path(DDPL_${var}_INCLUDE ${header} HINTS ${inc_hints}
            PATH_SUFFIXES ${CMAKE_LIBRARY_ARCHITECTURE})
  # the versioned name too: the wheels ship no unversioned link
  find_library(DDPL_${var}_LIB NAMES ${name} lib${name}.so.${major} HINTS ${lib_hints})
  if(NOT DDPL_${var}_INCLUDE)
    string(REPLACE ";" ", " looked "${roots}")
    set(why "no ${header} under ${looked}, the toolkit or the system paths; set ${var}_ROOT")
    if(mode STREQUAL "ON")
      message(FATAL_ERROR "DDPL_${var}=ON but ${why}")
    endif()
    set(DDPL_${var}_SUMMARY "OFF (${why})" PARENT_SCOPE)
    return()
  endif()
  set(DDPL_HAVE_${var} ON PARENT_SCOPE)
  if(DDPL_${var}_LIB)
    get_filename_component(real "${DDPL_${var}_LIB}" REALPATH)
    get_filename_component(file "${real}" NAME)
    # libcudnn.so.9.10.2 -> libcudnn.so.9: the name the loader knows it by
    if(file MATCHES "^(lib${name}\\.so\\.[0-9]+)")
      set(DDPL_${var}_SONAME "${CMAKE_MATCH_1}" PARENT_SCOPE)
    endif()
    set(DDPL_${var}_REAL "${real}" PARENT_SCOPE)
    set(DDPL_${var}_SUMMARY "ON (${DDPL_${var}_INCLUDE}/${header}, ${real})" PARENT_SCOPE)
  else()
    set(DDPL_${var}_SUMMARY
        "ON (${DDPL_${var}_INCLUDE}/${header}; no library found: opened by soname at run time)"
        PARENT_SCOPE)
  endif()
endfunction()

ddpl_find_cuda_lib(CUDNN cudnn cudnn.h 9)
ddpl_find_cuda_lib(NCCL nccl nccl.h 2)

# cuBLAS ships with every toolkit (it is required); its soname follows the toolkit's major
# version (libcublas.so.12 on CUDA 12), so it is read from the file found, not assumed.
get_target_property(DDPL_CUBLAS_LIB CUDA::cublas IMPORTED_LOCATION)
get_filename_component(DDPL_CUBLAS_REAL "${DDPL_CUBLAS_LIB}" REALPATH)
get_filename_component(DDPL_CUBLAS_FILE "${DDPL_CUBLAS_REAL}" NAME)
if(DDPL_CUBLAS_FILE MATCHES "^(libcublas\\.so\\.[0-9]+)")
  set(DDPL_CUBLAS_SONAME "${CMAKE_MATCH_1}")
else()
  set(DDPL_CUBLAS_SONAME "libcublas.so.${CUDAToolkit_VERSION_MAJOR}")
endif()
