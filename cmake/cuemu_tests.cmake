# cmake/cuemu_tests.cmake: the ctest label `cuda-emu` of the emulation build (-DDDPL_CUDA_EMU=ON;
# included after cmake/specs.cmake). tools/cuda-emu.sh runs `ctest -L cuda-emu` in CI.
#
# The label holds the emulation's own tests (test_cuemu and the stand-ins', labelled where they are
# added), every spec and C test with a CUDA path, a rerun of the kernel-heavy specs under a
# seeded thread order (DDPL_CUEMU_SCHEDULE), and last the kernel coverage check: every process of
# the label appends the kernels it launched to one file, and cuemu_kernel_coverage fails unless
# each __global__ of engine/cuda is there.

set(DDPL_CUEMU_SPECS
  cuda_blas_spec cuda_copy_spec cuda_nn_spec cuda_parity_spec cuda_pointwise_spec
  cuda_reduce_spec cuda_runtime_spec attention_spec autocast_spec ddp_powersgd_spec
  rng_state_spec serialize_spec tensor_binding_spec nccl_spec sync_batch_norm_spec
  data_workers_spec cuemu_examples_spec
  sort_spec # sort, searchsorted, bincount, histc
  scan_spec # cumsum/cummax kernels (cuda_scan.cu)
  math_spec # the UNARY_FN/BINARY_FN kernels (cuda_math_fns.cu)
  ctc_spec # the CTC loss kernels (cuda_ctc.cu); median_spec and pool_ceil_spec: their CUDA paths
  median_spec pool_ceil_spec
  scatter_spec advanced_index_spec indexing_spec # the SCATTER kernel (cuda_scatter.cu)
  shape_spec linalg_ext_spec inplace_spec # compositions, and in-place autograd, on CUDA
  fsdp_cuda_spec pin_memory_spec # FSDP over nccl, cpu_offload's page-locked host shards
  mem_overlap_spec) # the overlap checks on CUDA tensors
set(DDPL_CUEMU_C_TESTS
  test_cuda_alloc test_cuda_copy test_cuda_coverage test_cuda_index_check test_cuda_libs
  test_cuda_pointwise test_backend test_nccl_pg test_autocast)
# the specs whose kernels have barriers and shuffles, again in another thread order
set(DDPL_CUEMU_SEEDED cuda_reduce_spec cuda_nn_spec cuda_parity_spec
  scan_spec) # the block scan's shuffles and barriers

set(cuemu_coverage ${CMAKE_BINARY_DIR}/cuemu-coverage.txt)
add_test(NAME cuemu_coverage_reset COMMAND ${CMAKE_COMMAND} -E rm -f ${cuemu_coverage})
set_tests_properties(cuemu_coverage_reset PROPERTIES LABELS cuda-emu
                     FIXTURES_SETUP cuemu_coverage)

set(cuemu_labelled)
foreach(name ${DDPL_CUEMU_SPECS} ${DDPL_CUEMU_C_TESTS})
  if(NOT TEST ${name})
    message(FATAL_ERROR "cmake/cuemu_tests.cmake names ${name}, which is not a test")
  endif()
  list(APPEND cuemu_labelled ${name})
endforeach()
foreach(name ${DDPL_CUEMU_SEEDED})
  add_test(NAME ${name}_seed1
           COMMAND ${LUA54} ${BUSTED} --output=TAP ${DDPL_SPEC_FILE_${name}}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name}_seed1 PROPERTIES
    ENVIRONMENT "${DDPL_SPEC_ENV};DDPL_CUEMU_SCHEDULE=1" TIMEOUT 600)
  list(APPEND cuemu_labelled ${name}_seed1)
endforeach()
list(APPEND cuemu_labelled test_cuemu)

foreach(name ${cuemu_labelled})
  set_property(TEST ${name} APPEND PROPERTY LABELS cuda-emu)
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT DDPL_CUEMU_COVERAGE=${cuemu_coverage})
  # 1 GiB devices: the specs that fill a device on purpose (cuda_runtime_spec) do it in a second
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT DDPL_CUEMU_MEMORY=1073741824)
  set_property(TEST ${name} APPEND PROPERTY FIXTURES_REQUIRED cuemu_coverage)
endforeach()

file(GLOB cuemu_cu CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/engine/cuda/*.cu)
set(cuemu_kernel_lists)
foreach(src ${cuemu_cu})
  get_filename_component(name ${src} NAME)
  list(APPEND cuemu_kernel_lists ${DDPL_CUEMU_DIR}/${name}.cpp.kernels)
endforeach()
add_test(NAME cuemu_kernel_coverage
         COMMAND ${LUA54} ${CMAKE_SOURCE_DIR}/tools/cuemu/kernel_coverage.lua ${cuemu_coverage}
                 ${cuemu_kernel_lists})
set_tests_properties(cuemu_kernel_coverage PROPERTIES LABELS cuda-emu DEPENDS "${cuemu_labelled}"
                     FIXTURES_REQUIRED cuemu_coverage)
