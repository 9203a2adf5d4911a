-- spec/cuda/cuda_copy_spec.lua: copies between views of one storage that overlap
-- (x[2:]:copy_(x[:-2]) and its kin), which must read every source value before any is
-- overwritten, as PyTorch's do. cudaMemcpyAsync and the strided copy kernels do not allow
-- overlap, so ops stage such copies through a temporary; each case runs on the cpu, and on cuda
-- where a device exists (pending otherwise), against values written out here.
local ddpl = require 'ddplua'

local function range(n, device, dtype)
    return ddpl.arange(0, n, 1, {device = device, dtype = dtype or 'float32'})
end

local cases = {
    {'shifting forward: x[2:]:copy_(x[:-2])', function(d)
        local x = range(10, d)
        x:narrow(0, 2, 8):copy_(x:narrow(0, 0, 8))
        return x, {0, 1, 0, 1, 2, 3, 4, 5, 6, 7}
    end},
    {'shifting backward: x[:-3]:copy_(x[3:]), int64', function(d)
        local x = range(9, d, 'int64')
        x:narrow(0, 0, 6):copy_(x:narrow(0, 3, 6))
        return x, {3, 4, 5, 6, 7, 8, 6, 7, 8}
    end},
    {'a square view onto its own transpose', function(d)
        local x = range(9, d):view(3, 3)
        x:copy_(x:t())
        return x, {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}}
    end},
    {'a row of the destination broadcast over it', function(d)
        local x = range(6, d):view(3, 2)
        x:copy_(x:select(0, 2))
        return x, {{4, 5}, {4, 5}, {4, 5}}
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
