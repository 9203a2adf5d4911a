-- spec/tensor/reduce_spec.lua: reductions against PyTorch (spec/fixtures/reduce.lua): sum mean var
-- std max min prod argmax argmin logsumexp norm, over everything and along a dim (negative dims,
-- keepdim), forward values and gradients in float32 and float64, integer inputs, ties.
-- Each takes ([dim [, keepdim]]) except norm, which takes ([p [, dim [, keepdim]]]) as in PyTorch.
local H = require 'helpers'
local ddpl = H.ddpl

local cases = H.fixture('reduce')

local function reducer(op)
    return function(ins, o)
        local x = ins[1]
        if o.transpose then x = x:transpose(0, 2) end
        if o.dim == nil then return x[op](x) end
        return x[op](x, o.dim, o.keepdim)
    end
end

local runners = {}
for _, op in ipairs({'sum', 'mean', 'prod', 'var', 'std', 'logsumexp', 'max', 'min', 'argmax',
                     'argmin'}) do
    runners[op] = reducer(op)
end
-- norm has the ([dim [, keepdim]]) form of every reduction (API.md); the order p is an option
runners.norm = function(ins, o)
    local x = ins[1]
    if o.dim ~= nil then return x:norm(o.p or 2, o.dim, o.keepdim) end
    if o.p ~= nil then return x:norm({ p = o.p }) end
    return x:norm()
end

describe('reductions match PyTorch', function()
    H.run_cases(cases, runners, it)
end)

describe('reductions', function()
    it('max and min along a dim return values and int64 indices', function()
        local x = ddpl.tensor({{1, 5, 3}, {7, 2, 9}}, {dtype = 'float32'})
        local v, i = x:max(1)
        H.assert_close(v, {5, 9})
        assert.are.equal('int64', H.dtype_name(i.dtype))
        assert.are.same({1, 2}, i:tolist())
        v, i = x:min(0, true)
        assert.are.same({1, 3}, H.shape(v))
        assert.are.same({{0, 1, 0}}, i:tolist())
    end)

    it('a full reduction gives a 0-dim tensor', function()
        local s = ddpl.ones(2, 3):sum()
        assert.are.equal(0, s:dim())
        assert.are.equal(6, s:item())
    end)

    it('keepdim keeps a size-1 dimension', function()
        local x = ddpl.ones(2, 3, 4)
        assert.are.same({2, 1, 4}, H.shape(x:sum(1, true)))
        assert.are.same({2, 4}, H.shape(x:sum(1)))
        assert.are.same({2, 3}, H.shape(x:mean(-1)))
    end)

    it('mean of an integer tensor raises, as in PyTorch', function()
        H.assert_error(function() return ddpl.tensor({1, 2, 3}):mean() end, 'mean')
    end)

    it('a dim out of range raises an error naming the op', function()
        H.assert_error(function() return ddpl.ones(2, 3):sum(2) end, 'sum')
        H.assert_error(function() return ddpl.ones(2, 3):max(-3) end, 'max')
    end)

    it('sum/prod/amax/amin over the outer dims (read as columns) equal the same over rows',
       function()
        -- dim 0 of a row-major matrix takes the column path of cpu_reduce.c; the transposed
        -- copy reduces the same numbers along its rows. A NaN stays in amax/amin (PyTorch).
        ddpl.manual_seed(4)
        for _, dt in ipairs({'float32', 'float64'}) do
            local x = ddpl.randn({37, 1100}, {dtype = dt}) * 0.5 + 1
            x[3][1050] = 0 / 0
            local rows = x:t():contiguous()
            for _, op in ipairs({'sum', 'prod', 'amax', 'amin'}) do
                local a, b = x[op](x, 0):tolist(), rows[op](rows, 1):tolist()
                for i = 1, #a do
                    local same = a[i] == b[i] or (a[i] ~= a[i] and b[i] ~= b[i])
                        or math.abs(a[i] - b[i]) <= 1e-5 * math.abs(b[i])
                    assert.is_true(same, ('%s %s column %d: %s vs %s'):format(dt, op, i - 1,
                        a[i], b[i]))
                end
                assert.is_true(a[1051] ~= a[1051], op .. ': NaN column') -- NaN everywhere
            end
            local k = x:amax(0, true)
            assert.are.same({1, 1100}, H.shape(k))
        end
    end)

    it('var and std of one element along a dim are nan (unbiased), as in PyTorch', function()
        local v = ddpl.ones(3, 1):var(1)
        local x = v:tolist()
        for _, e in ipairs(x) do assert.is_true(e ~= e, 'expected nan, got ' .. tostring(e)) end
    end)
end)
