-- spec/cuda/cuda_dynlib_spec.lua: every cuBLAS, cuDNN and NCCL function the engine calls through
-- CUDA_DL is in engine/cuda/cuda_dynlib.c's list for its library, so a library that lacks one is
-- refused when it is opened, with its name, rather than failing at the call with the misleading
-- status cuda_lib_missing returns (NCCL read it as "unhandled cuda error"). Found by the
-- emulation build: ncclCommInitRankConfig and ncclCommFinalize were called but not listed.
-- Reads the sources only, so it runs in every build.
local S = require 'shell_util'
local src = os.getenv('DDPLUA_SOURCE_DIR') or '.'

local slurp = S.read

-- The engine's C and CUDA sources.
local function sources()
    local files = {}
    local p = assert(io.popen(("find '%s/engine' -name '*.c' -o -name '*.cu'"):format(src)))
    for line in p:lines() do files[#files + 1] = line end
    p:close()
    table.sort(files)
    return files
end

-- The names of each library's list in cuda_dynlib.c: lists.CUBLAS = {name = true, ...}.
local function listed()
    local text = slurp(src .. '/engine/cuda/cuda_dynlib.c')
    local lists = {}
    for lib, body in text:gmatch('const char %*const (%a+)_syms%[%] = (%b{})') do
        local names = {}
        for name in body:gmatch('"([%w_]+)"') do names[name] = true end
        lists[lib:upper()] = names
    end
    return lists
end

describe('engine/cuda/cuda_dynlib.c', function()
    it('lists every library function the engine calls through CUDA_DL', function()
        local lists = listed()
        for _, lib in ipairs({'CUBLAS', 'CUDNN', 'NCCL'}) do
            assert(lists[lib], 'no ' .. lib:lower() .. '_syms list in cuda_dynlib.c')
        end
        local missing, calls = {}, 0
        for _, file in ipairs(sources()) do
            local text = slurp(file)
            for lib, fn in text:gmatch('CUDA_DL%(%s*CUDA_LIB_(%u+)%s*,%s*([%w_]+)%s*%)') do
                calls = calls + 1
                local names = lists[lib] or {}
                -- cuBLAS's header maps some names to their _v2 symbols (cublasCreate)
                if not names[fn] and not names[fn .. '_v2'] then
                    missing[#missing + 1] = ('%s calls %s (%s) but the list lacks it'):format(
                        file:sub(#src + 2), fn, lib)
                end
            end
        end
        assert(calls > 40, 'found only ' .. calls .. ' CUDA_DL calls: is the pattern stale?')
        assert(#missing == 0, table.concat(missing, '\n'))
    end)
end)
