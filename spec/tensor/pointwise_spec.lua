-- spec/tensor/pointwise_spec.lua: pointwise math against PyTorch (spec/fixtures/pointwise.lua):
-- unary ops, + - * / ^ and their methods with broadcasting and dtype promotion, comparisons,
-- clamp, where, masked_fill; forward values and gradients in float32 and float64.
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F

local cases = H.fixture('pointwise')

local function first(ins, o)
    local x = ins[1]
    if o.transpose then x = x:t() end
    return x
end

local unary = {}
for _, op in ipairs({'neg', 'exp', 'log', 'sqrt', 'rsqrt', 'abs', 'sin', 'cos', 'tanh',
                     'sigmoid', 'relu', 'silu'}) do
    unary[op] = function(ins, o) return first(ins, o)[op](first(ins, o)) end
end
unary.gelu = function(ins, o)
    if o.approximate then return F.gelu(first(ins, o), {approximate = o.approximate}) end
    return first(ins, o):gelu()
end

-- binary arithmetic, once with Lua's operators (a number may be on either side) and once with
-- the methods (tensor on the left)
local operator = {
    add = function(a, b) return a + b end,
    sub = function(a, b) return a - b end,
    mul = function(a, b) return a * b end,
    div = function(a, b) return a / b end,
    pow = function(a, b) return a ^ b end,
}

local runners, method_runners = {}, {}
for op, fn in pairs(unary) do runners[op] = fn end
for op, fn in pairs(operator) do
    runners[op] = function(ins) return fn(ins[1], ins[2]) end
    method_runners[op] = function(ins) return ins[1][op](ins[1], ins[2]) end
end
for _, op in ipairs({'eq', 'ne', 'lt', 'le', 'gt', 'ge'}) do
    runners[op] = function(ins) return ins[1][op](ins[1], ins[2]) end
end
runners.clamp = function(ins, o) return ins[1]:clamp(o.min, o.max) end
runners.where = function(ins) return ddpl.where(ins[1], ins[2], ins[3]) end
method_runners.where = function(ins) return ins[2]:where(ins[1], ins[3]) end
runners.masked_fill = function(ins) return ins[1]:masked_fill(ins[2], ins[3]) end

describe('pointwise ops match PyTorch', function()
    for _, case in ipairs(cases) do
        local tag = method_runners[case.op] and ' (operator)' or ''
        if case.op == 'where' then tag = ' (ddpl.where)' end
        it(case.name .. tag, function() H.check_case(case, runners[case.op]) end)
        if method_runners[case.op] and type(case.inputs[1]) == 'table' then
            it(case.name .. ' (method)', function() H.check_case(case, method_runners[case.op]) end)
        end
    end
end)

describe('pointwise ops', function()
    it('unary minus is neg, with its gradient', function()
        local x = ddpl.tensor({{1.5, -2}, {0, 3}}, {requires_grad = true})
        local y = -x
        H.assert_close(y, {-1.5, 2, 0, -3})
        y:sum():backward()
        H.assert_close(x.grad, {-1, -1, -1, -1})
    end)

    it('gelu through F and the method agree, and default to the exact form', function()
        local x = ddpl.tensor({-2.0, -0.5, 0.25, 1.0, 3.0}, {dtype = 'float64'})
        H.assert_close(F.gelu(x), x:gelu())
        local tanh = F.gelu(x, {approximate = 'tanh'})
        -- the tanh form differs from the exact one by up to ~1e-3 on this range, not 0
        local diff = (tanh - x:gelu()):abs():max():item()
        assert.is_true(diff > 1e-6 and diff < 2e-3, 'tanh approximation differs by ' .. diff)
    end)

    it('mismatched shapes raise an error naming the op and both shapes', function()
        local a, b = ddpl.zeros(2, 3), ddpl.zeros(4, 5)
        H.assert_error(function() return a + b end, 'add', '[2,3]', '[4,5]')
        H.assert_error(function() return a:mul(b) end, 'mul', '[2,3]', '[4,5]')
        H.assert_error(function() return a:lt(b) end, 'lt')
    end)

    it('comparisons are not differentiable and return bool tensors', function()
        local x = ddpl.tensor({1.0, 2.0, 3.0}, {requires_grad = true})
        local m = x:gt(1.5)
        assert.are.equal('bool', H.dtype_name(m.dtype))
        assert.is_false(m.requires_grad)
        assert.are.equal(2, m:sum():item())
    end)

    it('masked_fill needs a bool mask (PyTorch 2 refuses other dtypes)', function()
        local x = ddpl.zeros(2, 2)
        H.assert_error(function() return x:masked_fill(ddpl.zeros(2, 2), 1.0) end, 'masked_fill')
    end)
end)
