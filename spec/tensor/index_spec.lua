-- spec/tensor/index_spec.lua: joining and picking against PyTorch (spec/fixtures/index.lua):
-- ddpl.cat, ddpl.stack, index_select, gather, ddpl.topk; forward values (indices 0-based) and
-- gradients (repeated indices accumulate), float32, float64 and int64.
local H = require 'helpers'
local ddpl = H.ddpl

local cases = H.fixture('index')

local runners = {
    cat = function(ins, o) return ddpl.cat(ins, o.dim) end,
    stack = function(ins, o) return ddpl.stack(ins, o.dim) end,
    index_select = function(ins, o) return ins[1]:index_select(o.dim, ins[2]) end,
    gather = function(ins, o) return ins[1]:gather(o.dim, ins[2]) end,
    topk = function(ins, o)
        return ddpl.topk(ins[1], ins[2], {dim = o.dim, largest = o.largest})
    end,
}

describe('joining and picking match PyTorch', function()
    H.run_cases(cases, runners, it)
end)

describe('joining and picking', function()
    it('cat refuses tensors whose other dims differ, naming the odd shape', function()
        H.assert_error(function() return ddpl.cat({ddpl.zeros(2, 3), ddpl.zeros(2, 4)}, 0) end,
                       'cat', '[2,4]')
    end)

    it('stack refuses tensors of different shapes', function()
        H.assert_error(function() return ddpl.stack({ddpl.zeros(2, 3), ddpl.zeros(3, 2)}, 0) end,
                       'stack')
    end)

    it('an index out of range raises instead of reading outside the tensor', function()
        local x = ddpl.zeros(4, 3)
        H.assert_error(function() return x:index_select(0, ddpl.tensor({0, 4})) end,
                       'index_select')
        H.assert_error(function() return x:index_select(0, ddpl.tensor({-5})) end,
                       'index_select')
        H.assert_error(function() return x:gather(1, ddpl.tensor({{0, 3}})) end, 'gather')
    end)

    it('indices must be int64', function()
        local x = ddpl.zeros(4, 3)
        H.assert_error(function() return x:index_select(0, ddpl.tensor({0.0, 1.0})) end,
                       'index_select')
        H.assert_error(function() return x:gather(0, ddpl.zeros(1, 3)) end, 'gather')
    end)

    it('topk with k larger than the dim raises', function()
        H.assert_error(function() return ddpl.topk(ddpl.zeros(2, 3), 4) end, 'topk')
    end)

    it('topk indices are int64 and point at the values', function()
        local x = ddpl.tensor({{0.5, 3.0, -1.0, 2.0}})
        local v, i = ddpl.topk(x, 2)
        assert.are.equal('int64', H.dtype_name(i.dtype))
        H.assert_close(x:gather(1, i), v)
    end)
end)
