-- spec/cuda/pin_memory_spec.lua: x:pin_memory() and x:is_pinned() (engine/lua/bind_values.c),
-- PyTorch's page-locked host memory, which FSDP's cpu_offload keeps its shards in. With CUDA
-- (a GPU, or the emulation build): a contiguous copy of any CPU tensor (views, every dtype,
-- empty) whose memory is registered with CUDA, views of it pinned too, values surviving copies
-- to and from a device, and a CUDA tensor refused; without CUDA: a clear error.
local ddpl = require 'ddplua'

local function cuda() return ddpl.cuda.is_available() end

describe('pin_memory', function()
    it('copies a CPU tensor into page-locked memory', function()
        if not cuda() then pending('no CUDA device') return end
        local x = ddpl.arange(0, 24, 1):view(4, 6)
        assert.is_false(x:is_pinned())
        for _, src in ipairs({x, x:t(), x:narrow(1, 2, 3), ddpl.empty(0),
                              x:to('bfloat16'), x:long()}) do
            local p = src:pin_memory()
            assert.is_true(p:is_pinned())
            assert.is_true(p:is_contiguous())
            assert.are.equal('cpu', p.device)
            assert.are.equal(src.dtype, p.dtype)
            assert.are.same(src:shape(), p:shape())
            assert.is_true(p:equal(src))
        end
        local p = x:pin_memory()
        assert.is_true(p[1]:is_pinned(), 'a view of pinned memory')
        assert.is_false(p:clone():is_pinned(), 'a clone is ordinary memory')
        -- to a device and back into it
        local d = p:cuda() * 2
        p:copy_(d)
        assert.is_true(p:equal(x * 2))
        assert.is_true(p:is_pinned())
        -- freed: the deleter unregisters; many in a row must not leak registrations
        for _ = 1, 50 do
            local q <close> = ddpl.ones(1000):pin_memory()
        end
        collectgarbage()
    end)

    it('refuses a CUDA tensor', function()
        if not cuda() then pending('no CUDA device') return end
        local ok, err = pcall(function() return ddpl.ones(3, {device = 'cuda'}):pin_memory() end)
        assert.is_false(ok)
        assert.truthy(tostring(err):find('pin_memory: expected a CPU tensor, got one on cuda',
                                         1, true), err)
    end)

    it('says why without CUDA', function()
        if cuda() then pending('CUDA is available') return end
        local ok, err = pcall(function() return ddpl.ones(3):pin_memory() end)
        assert.is_false(ok)
        assert.truthy(tostring(err):find('pin_memory: CUDA is not available', 1, true), err)
        assert.is_false(ddpl.ones(3):is_pinned())
    end)
end)
