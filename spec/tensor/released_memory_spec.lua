-- spec/tensor/released_memory_spec.lua: tensors whose storage memory was released
-- (ddpl._release_memory, core.h's ddpl_storage_release_memory: what FSDP does to a unit's full
-- parameters between its forward and its backward) are refused with a message by every way a
-- tensor enters the binding, never read; _restore_memory gives them memory (and values) back
-- without moving the version, so tensors saved for backward stay valid.
local H = require 'helpers'
local ddpl = H.ddpl

local function released(shape)
    local t = ddpl.ones(shape or {2, 3})
    ddpl._release_memory(t)
    return t
end

describe('a tensor whose memory was released', function()
    it('is refused, naming the function, by every way a tensor is taken', function()
        local x = released()
        local cases = {
            {'add', function() return x + 1 end},
            {'sum', function() return x:sum() end},
            {'cat', function() return ddpl.cat({ddpl.ones(2, 3), x}) end},
            {'index', function() return ddpl.ones(5)[released({2}):long()] end},
            {'save', function() return ddpl.save({w = x}, os.tmpname()) end},
            {'where', function() return ddpl.where(ddpl.ones(2, 3):bool(), 1, x) end},
            {'masked_fill', function() return ddpl.ones(2, 3):masked_fill(ddpl.ones(2, 3):bool(), released({})) end},
            {'tensor', function() return ddpl.tensor(x) end},
        }
        for _, c in ipairs(cases) do
            H.assert_error(c[2], 'memory was released')
        end
        -- every method goes through the same check, metadata included
        H.assert_error(function() return x:shape() end, 'shape', 'memory was released')
    end)

    it('gets memory and values back without a version change', function()
        local w = ddpl.randn(4, 3):requires_grad_()
        local full = ddpl.randn(12)
        local view = full:view(4, 3)
        local a = ddpl.randn(5, 4):requires_grad_()
        local y = ddpl.no_grad(function() return view:clone() end)
        y.requires_grad = true
        local out = a:matmul(y) -- y saved
        local before = full._version
        local keep = full:clone()
        ddpl._release_memory(full)
        H.assert_error(function() return full:sum() end, 'memory was released')
        ddpl._restore_memory(full, keep)
        assert.are.equal(before, full._version)
        H.assert_close(full, keep, 0, 0)
        out:sum():backward()
        assert.is_not_nil(a.grad)
        -- the source must match the storage
        ddpl._release_memory(full)
        H.assert_error(function() ddpl._restore_memory(full, ddpl.ones(3)) end,
                       '_restore_memory', 'source')
        ddpl._restore_memory(full)
        assert.are.equal(12, full:numel())
        H.assert_error(function() ddpl._release_memory(42) end, '_release_memory')
        local _ = w
    end)

    it('takes another storage\'s memory instead of a copy when moving', function()
        local full = ddpl.randn(12)
        local view = full:view(4, 3)
        local a = ddpl.randn(5, 4):requires_grad_()
        local y = view:clone():requires_grad_()
        local out = a:matmul(view) -- the view saved
        local before = full._version
        ddpl._release_memory(full)
        local src = ddpl.arange(12):float()
        local expect = src:clone()
        local allocated = ddpl.memory_stats()['allocated_bytes.current']
        ddpl._restore_memory(full, src, true)
        -- no new memory: full has src's, and src has none left
        assert.are.equal(allocated, ddpl.memory_stats()['allocated_bytes.current'])
        assert.are.equal(before, full._version)
        H.assert_close(full, expect, 0, 0)
        H.assert_error(function() return src:sum() end, 'memory was released')
        out:sum():backward() -- the saved view reads the moved values
        H.assert_close(a.grad, ddpl.ones(5, 3):matmul(expect:view(4, 3):t()), 0, 0)
        -- a source that is a part of its storage, or t's own, cannot be moved
        ddpl._release_memory(full)
        local part = ddpl.randn(24):narrow(0, 12, 12)
        H.assert_error(function() ddpl._restore_memory(full, part, true) end,
                       '_restore_memory', 'whole')
        H.assert_error(function() ddpl._restore_memory(full, nil, true) end,
                       '_restore_memory', 'whole')
        local _ = y
    end)

    it('makes backward through a released saved tensor fail with a message', function()
        local base = ddpl.randn(6)
        local w = base:view(2, 3)
        local x = ddpl.randn(4, 2):requires_grad_()
        local y = x:matmul(w) -- w saved for x's gradient
        ddpl._release_memory(base)
        H.assert_error(function() y:sum():backward() end, 'memory released')
        ddpl._restore_memory(base)
    end)
end)
