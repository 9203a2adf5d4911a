-- spec/cuda/cuda_libs_cmake_spec.lua: cmake/cuda_libs.cmake, the search for cuDNN and NCCL, on a
-- made-up machine: a CUDA 12 toolkit folder with neither, and PyTorch's wheels on python3's path
-- holding cuDNN as only a versioned file (libcudnn.so.9, no unversioned link), as pip installs
-- it. Runs CMake on a small project that includes the module with the toolkit's variables set;
-- needs no CUDA. The sonames must come from the files found (libcublas.so.12, not .13).
local S = require 'shell_util'

describe('cmake/cuda_libs.cmake', function()
    local tmp

    before_each(function()
        tmp = S.new_tmpdir()
        local sh = ([[
set -e
cd %s
mkdir -p py/nvidia/cudnn/include py/nvidia/cudnn/lib tk/include tk/lib proj
echo '#define CUDNN_MAJOR 9' > py/nvidia/cudnn/include/cudnn.h
touch py/nvidia/cudnn/lib/libcudnn.so.9.1.0
ln -s libcudnn.so.9.1.0 py/nvidia/cudnn/lib/libcudnn.so.9
touch tk/lib/libcublas.so.12.4.5.8
]]):format(S.q(tmp))
        local out, code = S.sh(sh)
        assert.are.equal(0, code, out)
        S.write(tmp .. '/proj/CMakeLists.txt', ([[
cmake_minimum_required(VERSION 3.25)
project(cuda_libs_probe NONE)
set(tk "%s/tk")
set(CUDAToolkit_LIBRARY_ROOT ${tk})
set(CUDAToolkit_INCLUDE_DIRS ${tk}/include)
set(CUDAToolkit_LIBRARY_DIR ${tk}/lib)
set(CUDAToolkit_VERSION_MAJOR 12)
# only this made-up machine: not the real toolkit's or the system's copies
set(CMAKE_FIND_USE_CMAKE_SYSTEM_PATH OFF)
set(CMAKE_FIND_USE_SYSTEM_ENVIRONMENT_PATH OFF)
add_library(CUDA::cublas SHARED IMPORTED)
set_target_properties(CUDA::cublas PROPERTIES IMPORTED_LOCATION ${tk}/lib/libcublas.so.12.4.5.8)
include(%s/cmake/cuda_libs.cmake)
foreach(lib CUDNN NCCL CUBLAS)
  set(have ${DDPL_HAVE_${lib}})
  message(STATUS "result ${lib}: have=${have} soname=${DDPL_${lib}_SONAME} ${DDPL_${lib}_SUMMARY}")
endforeach()
]]):format(tmp, S.src))
    end)

    after_each(function()
        if tmp then os.execute('rm -rf ' .. S.q(tmp)) end
    end)

    -- configures the project with the wheels on python3's path; returns output and status
    local function configure(args)
        local python = S.sh('command -v python3'):match('^(%S+)')
        return S.sh(('cd %s && PYTHONPATH=%s cmake -S proj -B build -DDDPL_PYTHON3=%s %s'):format(
            S.q(tmp), S.q(tmp .. '/py'), S.q(python or 'python3'), args or ''))
    end

    it('finds cuDNN in the wheel, reports NCCL missing, and names the sonames', function()
        local out, code = configure()
        assert.are.equal(0, code, out)
        assert.truthy(out:find('result CUDNN: have=ON soname=libcudnn.so.9 ON (' .. tmp
            .. '/py/nvidia/cudnn/include/cudnn.h, ' .. tmp
            .. '/py/nvidia/cudnn/lib/libcudnn.so.9.1.0)', 1, true), out)
        -- no nvidia.nccl wheel: the toolkit's folder was the only place named
        assert.truthy(out:find('result NCCL: have=OFF soname= OFF (no nccl.h under ' .. tmp
            .. '/tk, the toolkit or the system paths; set NCCL_ROOT)', 1, true), out)
        assert.truthy(out:find('result CUBLAS: have= soname=libcublas.so.12', 1, true), out)
    end)

    it('stops when a library is required and missing, and leaves one out when asked', function()
        local out, code = configure('-DDDPL_NCCL=ON')
        assert.are_not.equal(0, code, out)
        assert.truthy(out:find('DDPL_NCCL=ON but no nccl.h under', 1, true), out)
        out, code = configure('-DDDPL_NCCL=AUTO -DDDPL_CUDNN=OFF')
        assert.are.equal(0, code, out)
        assert.truthy(out:find('result CUDNN: have=OFF soname= OFF (DDPL_CUDNN=OFF)', 1, true), out)
    end)

    it('takes CUDNN_ROOT before the wheel', function()
        local out, code = S.sh(([[
cd %s && mkdir -p root/include root/lib && cp py/nvidia/cudnn/include/cudnn.h root/include/ &&
touch root/lib/libcudnn.so.9.2.0 && ln -s libcudnn.so.9.2.0 root/lib/libcudnn.so]]):format(
            S.q(tmp)))
        assert.are.equal(0, code, out)
        out, code = configure('-DCUDNN_ROOT=' .. S.q(tmp .. '/root'))
        assert.are.equal(0, code, out)
        assert.truthy(out:find('result CUDNN: have=ON soname=libcudnn.so.9 ON (' .. tmp
            .. '/root/include/cudnn.h, ' .. tmp .. '/root/lib/libcudnn.so.9.2.0)', 1, true), out)
    end)
end)
