-- spec/cuda/cuda_copy_spec.lua: copies between views of one storage that overlap in a layout
-- PyTorch lets through (one of them is not dense, so PyTorch's overlap check does not decide:
-- spec/tensor/mem_overlap_spec.lua has the overlaps it refuses), which must read every source
-- value before any is overwritten. cudaMemcpyAsync and the strided copy kernels do not allow
-- overlap, so ops stage such copies through a temporary; each case runs on the cpu, and on cuda
-- where a device exists (pending otherwise), against values written out here.
local ddpl = require 'ddplua'

local function range(n, device, dtype)
    return ddpl.arange(0, n, 1, {device = device, dtype = dtype or 'float32'})
end

-- the even elements 2, 4, 6, 8 from 0, 2, 4, 6: a forward element-by-element copy would read
-- values it had just written (0 everywhere)
local function shift_evens(d, dtype)
    local x = range(10, d, dtype)
    x:as_strided({4}, {2}, 2):copy_(x:as_strided({4}, {2}, 0))
    return x, {0, 1, 0, 3, 2, 5, 4, 7, 6, 9}
end

local cases = {
    {'strided: the even elements shifted forward', function(d) return shift_evens(d) end},
    {'strided, int64', function(d) return shift_evens(d, 'int64') end},
    {'strided: the even elements shifted backward', function(d)
        local x = range(10, d)
        x:as_strided({4}, {2}, 0):copy_(x:as_strided({4}, {2}, 2))
        return x, {2, 1, 4, 3, 6, 5, 8, 7, 8, 9}
    end},
    {'a column into the first two columns (shared first column)', function(d)
        local x = range(9, d):view(3, 3)
        x:narrow(1, 0, 2):copy_(x:narrow(1, 1, 2))
        return x, {{1, 2, 2}, {4, 5, 5}, {7, 8, 8}}
    end},
}

for _, device in ipairs({'cpu', 'cuda'}) do
    describe('copy_ between overlapping views of one storage on ' .. device, function()
        for _, case in ipairs(cases) do
            it(case[1], function()
                if device == 'cuda' and not ddpl.cuda.is_available() then
                    return pending('no CUDA device')
                end
                local x, want = case[2](device)
                assert.are.same(want, x:to('cpu'):tolist())
            end)
        end
    end)
end
