-- spec/tensor/math_spec.lua: the pointwise functions against PyTorch
-- (spec/fixtures/math.lua, tools/gen_math_fixtures.py): rounding, the rest of libm, remainder,
-- fmod, floor_divide and div's rounding modes (div_'s too), atan2, hypot, fmax/fmin, logaddexp, xlogy,
-- copysign, the bitwise and logical functions, isnan/isinf/isfinite, nan_to_num and norm's
-- PyTorch signature; values, dtypes and gradients, as methods, as ddpl functions and through
-- the Lua operators // % & | ~ << >>. The same cases run on CUDA (the emulation in CI).
local H = require 'helpers'
local ddpl = H.ddpl

local cases = H.fixture('math')

local UNARY = {'floor', 'ceil', 'trunc', 'frac', 'reciprocal', 'exp2', 'expm1', 'log2', 'log10',
               'log1p', 'tan', 'asin', 'acos', 'atan', 'sinh', 'cosh', 'asinh', 'acosh', 'atanh',
               'erf', 'erfc', 'erfinv', 'square', 'isnan', 'isinf', 'isfinite', 'logical_not',
               'bitwise_not'}
local BINARY = {'remainder', 'fmod', 'floor_divide', 'atan2', 'hypot', 'fmax', 'fmin',
                'logaddexp', 'logaddexp2', 'xlogy', 'copysign', 'bitwise_and', 'bitwise_or',
                'bitwise_xor', 'bitwise_left_shift', 'bitwise_right_shift', 'logical_and',
                'logical_or', 'logical_xor'}

-- the method form (tensor first), and the ddpl function form
local methods, functions = {}, {}
for _, op in ipairs(UNARY) do
    methods[op] = function(ins) return ins[1][op](ins[1]) end
    functions[op] = function(ins) return ddpl[op](ins[1]) end
end
for _, op in ipairs(BINARY) do
    methods[op] = function(ins) return ins[1][op](ins[1], ins[2]) end
    functions[op] = function(ins) return ddpl[op](ins[1], ins[2]) end
end
methods.round = function(ins, o)
    if o.decimals then return ins[1]:round({decimals = o.decimals}) end
    return ins[1]:round()
end
functions.round = function(ins, o) return ddpl.round(ins[1], o.decimals) end
methods.nan_to_num = function(ins, o)
    if o.nan then return ins[1]:nan_to_num({nan = o.nan, posinf = o.posinf, neginf = o.neginf}) end
    return ins[1]:nan_to_num()
end
functions.nan_to_num = function(ins, o) return ddpl.nan_to_num(ins[1], o.nan, o.posinf, o.neginf) end
methods.div = function(ins, o) return ins[1]:div(ins[2], {rounding_mode = o.rounding_mode}) end
functions.div = function(ins, o)
    return ddpl.div(ins[1], ins[2], {rounding_mode = o.rounding_mode})
end
-- div_ (a method only, as in PyTorch) on a clone, so the gradients reach the case's leaves
methods.div_ = function(ins, o)
    local x = ins[1]:clone()
    if o.rounding_mode then return x:div_(ins[2], {rounding_mode = o.rounding_mode}) end
    return x:div_(ins[2])
end
methods.lerp = function(ins) return ins[1]:lerp(ins[2], ins[3]) end
functions.lerp = function(ins) return ddpl.lerp(ins[1], ins[2], ins[3]) end
for _, op in ipairs({'addcmul', 'addcdiv'}) do
    methods[op] = function(ins, o)
        if o.value then return ins[1][op](ins[1], ins[2], ins[3], {value = o.value}) end
        return ins[1][op](ins[1], ins[2], ins[3])
    end
    functions[op] = function(ins, o) return ddpl[op](ins[1], ins[2], ins[3], {value = o.value}) end
end
methods.clamp_tensor = function(ins) return ins[1]:clamp(ins[2], ins[3]) end
functions.clamp_tensor = function(ins) return ddpl.clamp(ins[1], {min = ins[2], max = ins[3]}) end
methods.isclose = function(ins, o)
    return ins[1]:isclose(ins[2], {rtol = o.rtol, atol = o.atol, equal_nan = o.equal_nan})
end
functions.isclose = function(ins, o)
    return ddpl.isclose(ins[1], ins[2], o.rtol, o.atol, {equal_nan = o.equal_nan})
end
local DTYPES = {f32 = 'float32', f64 = 'float64', i64 = 'int64'}
functions.linspace = function(ins, o)
    return ddpl.linspace(ins[1], ins[2], ins[3], {dtype = DTYPES[o.dtype]})
end
functions.logspace = function(ins, o)
    if o.base then return ddpl.logspace(ins[1], ins[2], ins[3], {base = o.base, dtype = DTYPES[o.dtype]}) end
    return ddpl.logspace(ins[1], ins[2], ins[3], {dtype = DTYPES[o.dtype]})
end
-- norm(p [, dim [, keepdim]]) positionally, and the same as options
methods.norm = function(ins, o) return ins[1]:norm(o.p, o.dim, o.keepdim) end
functions.norm = function(ins, o) return ddpl.norm(ins[1], {p = o.p, dim = o.dim, keepdim = o.keepdim}) end

-- the Lua operators of API.md ("The rest of torch's tensor API")
local operators = {
    floor_divide = function(ins) return ins[1] // ins[2] end,
    remainder = function(ins) return ins[1] % ins[2] end,
    bitwise_and = function(ins) return ins[1] & ins[2] end,
    bitwise_or = function(ins) return ins[1] | ins[2] end,
    bitwise_xor = function(ins) return ins[1] ~ ins[2] end,
    bitwise_left_shift = function(ins) return ins[1] << ins[2] end,
    bitwise_right_shift = function(ins) return ins[1] >> ins[2] end,
    bitwise_not = function(ins) return ~ins[1] end,
}

-- runs a runner on CUDA copies of the inputs and brings the results back (the copies are
-- differentiable, so the gradients still reach the CPU leaves the case checks)
local function on_cuda(runner)
    return function(ins, o)
        local dev = {}
        for i, x in ipairs(ins) do dev[i] = ddpl.is_tensor(x) and x:cuda() or x end
        local outs = table.pack(runner(dev, o))
        for i = 1, outs.n do outs[i] = outs[i]:cpu() end
        return table.unpack(outs, 1, outs.n)
    end
end

describe('pointwise functions match PyTorch', function()
    for _, case in ipairs(cases) do
        if type(case.inputs[1]) == 'table' then -- a tensor: the method form applies
            it(case.name, function() H.check_case(case, methods[case.op]) end)
        end
        if functions[case.op] or not methods[case.op] then -- (a method-only op has none)
            it(case.name .. ' (ddpl.' .. case.op .. ')',
               function() H.check_case(case, functions[case.op]) end)
        end
        if operators[case.op] then
            it(case.name .. ' (operator)', function() H.check_case(case, operators[case.op]) end)
        end
    end
end)

describe('pointwise functions on cuda match PyTorch', function()
    for _, case in ipairs(cases) do
        it(case.name, function()
            if not ddpl.cuda.is_available() then return pending('no CUDA device') end
            H.check_case(case, on_cuda(functions[case.op] or methods[case.op]))
        end)
    end
end)

describe('pointwise functions', function()
    it('div refuses an unknown option or rounding mode instead of ignoring it', function()
        local x = ddpl.tensor({7.0, -7.0})
        H.assert_error(function() return x:div(2, {foo = 1}) end, 'div', "unknown option 'foo'")
        H.assert_error(function() return x:div(2, {rounding_mode = 'round'}) end, 'div',
                       "'floor'", "'trunc'", 'round')
        H.assert_error(function() return x:div(2, {rounding_mode = 1}) end, 'div',
                       'rounding_mode')
        H.assert_error(function() return x:mul(2, {foo = 1}) end, 'mul', 'expected 2 arguments')
        -- 7/2 with floor is 3, not 3.5
        H.assert_close(x:div(2, {rounding_mode = 'floor'}), {3, -4})
        H.assert_close(x:div(2), {3.5, -3.5})
    end)

    it('div_ takes div\'s rounding_mode and refuses what PyTorch refuses', function()
        local x = ddpl.tensor({7.0, -7.0})
        H.assert_error(function() return x:div_(2, {foo = 1}) end, 'div_', "unknown option 'foo'")
        H.assert_error(function() return x:div_(2, {rounding_mode = 'round'}) end, 'div_',
                       "'floor'", "'trunc'", 'round')
        H.assert_error(function() return x:div_(2, {rounding_mode = true}) end, 'div_',
                       'rounding_mode')
        H.assert_close(x, {7, -7}) -- untouched by the refusals
        -- torch.tensor([7, -7]).div_(2.5, rounding_mode='floor'): "result type Float can't be
        -- cast to the desired output type Long"; div_(2) without a mode likewise
        local i = ddpl.tensor({7, -7})
        H.assert_error(function() return i:div_(2.5, {rounding_mode = 'floor'}) end, 'div_',
                       "can't be cast", 'int64')
        H.assert_error(function() return i:div_(2) end, 'div_', "can't be cast")
        H.assert_error(function() return i:div_(0, {rounding_mode = 'trunc'}) end,
                       'division by zero')
        assert.are.same({7, -7}, i:tolist())
        local version = i._version -- the refusals left it as it was, the write bumps it
        assert.are.equal(i, i:div_(-2, {rounding_mode = 'floor'})) -- returns x itself
        assert.are.same({-4, 3}, i:tolist())
        assert.are.equal(version + 1, i._version)
    end)

    it('norm takes a first number as p, not as a dimension (PyTorch)', function()
        local x = ddpl.tensor({{3.0, -4.0}, {0.0, 1.0}})
        H.assert_close(x:norm(1), 8)
        H.assert_close(x:norm(1, 1), {7, 1})
        H.assert_close(x:norm(2, 0, true), {{3, math.sqrt(17)}})
        H.assert_close(x:norm('fro'), math.sqrt(26))
        H.assert_close(x:norm(math.huge), 4)
        H.assert_error(function() return x:norm('nuc') end, 'norm', "'fro'")
        H.assert_error(function() return x:norm(2, 0, false, 5) end, 'norm')
    end)

    it('integer division by zero is an error naming the op, never a crash', function()
        local a, z = ddpl.tensor({1, 2, 3}), ddpl.tensor({1, 0, 1})
        H.assert_error(function() return a // z end, 'floor_divide', 'division by zero')
        H.assert_error(function() return a % 0 end, 'remainder', 'division by zero')
        H.assert_error(function() return a:fmod(z) end, 'fmod', 'division by zero')
        H.assert_error(function() return a:div(z, {rounding_mode = 'trunc'}) end,
                       'division by zero')
        -- the most negative int64 over -1 wraps (x86 traps on it in C)
        local m = ddpl.tensor({math.mininteger})
        assert.are.equal(math.mininteger, (m // -1):item())
        assert.are.equal(0, (m % -1):item())
        -- floating division by zero follows IEEE (PyTorch: inf, nan)
        local f = ddpl.tensor({1.0, -1.0, 0.0}) // 0.0
        assert.are.equal(math.huge, f[0]:item())
        assert.are.equal(-math.huge, f[1]:item())
        assert.is_true(f[2]:item() ~= f[2]:item())
    end)

    it('bitwise functions refuse floating tensors, shifts refuse bool', function()
        local f = ddpl.tensor({1.0, 2.0})
        H.assert_error(function() return f & f end, 'bitwise_and', 'float32')
        H.assert_error(function() return ~f end, 'bitwise_not', 'float32')
        H.assert_error(function() return f << 1 end, 'bitwise_left_shift')
        local b = ddpl.tensor({true, false})
        H.assert_error(function() return b << b end, 'bitwise_left_shift', 'bool')
        -- shift counts outside [0, 64) are 0, or the sign for a right shift, never undefined
        local i = ddpl.tensor({1, -8, 5})
        H.assert_close(i << ddpl.tensor({64, 70, -1}), ddpl.tensor({0, 0, 0}))
        H.assert_close(i >> ddpl.tensor({64, 70, -1}), ddpl.tensor({0, -1, 0}))
    end)

    it('rounding keeps integer dtypes; frac and round(decimals) refuse them', function()
        local i = ddpl.tensor({-3, 4})
        assert.are.equal('int64', H.dtype_name(i:floor().dtype))
        H.assert_error(function() return i:frac() end, 'frac', 'int64')
        H.assert_error(function() return i:round(1) end, 'round', 'decimals')
        H.assert_error(function() return ddpl.tensor({true}):floor() end, 'floor', 'bool')
        H.assert_error(function() return i:round({digits = 1}) end, "unknown option 'digits'")
        H.assert_error(function() return i:floor(2) end, 'floor', 'expected 1 argument')
    end)

    it('floor_divide is not differentiable; div with a rounding mode has zero gradients', function()
        -- as torch 1.13: (x // 2).requires_grad is True, grad_fn NotImplemented, and backward
        -- raises "derivative for aten::floor_divide is not implemented"
        local x = ddpl.tensor({3.5, -1.5}, {requires_grad = true})
        local q = x // 2
        assert.is_true(q.requires_grad)
        assert.are.equal('NotImplemented', q.grad_fn)
        H.assert_error(function() (x + q):sum():backward() end, 'floor_divide',
                       'derivative', 'not implemented')
        assert.is_nil(x.grad)
        assert.is_false((ddpl.tensor({7}) // 2).requires_grad) -- integers: no autograd
        assert.is_false(ddpl.no_grad(function() return x // 2 end).requires_grad)
        local y = x:div(2, {rounding_mode = 'floor'})
        assert.is_true(y.requires_grad)
        assert.are.equal('DivBackward2', y.grad_fn)
        y:sum():backward()
        H.assert_close(x.grad, {0, 0})
        -- in place, recorded on a non-leaf: the gradient is zero too
        local z = x * 1
        z:div_(2, {rounding_mode = 'trunc'})
        assert.are.equal('DivBackward2', z.grad_fn)
        x.grad = nil
        z:sum():backward()
        H.assert_close(x.grad, {0, 0})
    end)

    it('erfinv stays accurate in the far tails, where PyTorch drifts by 1e-6', function()
        local y = ddpl.tensor({1 - 1e-12, -1 + 1e-15, 1 - 2 ^ -30}, {dtype = 'float64'})
        local back = ddpl.erfc(y:erfinv():abs())
        H.assert_close(back, ddpl.ones(3, {dtype = 'float64'}) - y:abs(), 1e-12, 0)
    end)

    it('allclose and equal answer with Lua booleans, as torch does with Python bools', function()
        local a = ddpl.tensor({1.0, 2.0, 3.0})
        assert.is_true(ddpl.allclose(a, a + 1e-7))
        assert.is_false(a:allclose(a + 1e-3))
        assert.is_true(a:allclose(a + 1e-3, 0, 1e-2))
        assert.is_true(ddpl.equal(a, ddpl.tensor({1, 2, 3}))) -- dtypes may differ
        assert.is_false(a:equal(a:view(1, 3))) -- shapes may not
        assert.is_false(a:equal(ddpl.tensor({1.0, 2.0, 4.0})))
        local n = ddpl.tensor({0 / 0})
        assert.is_false(n:allclose(n))
        assert.is_true(n:allclose(n, {equal_nan = true}))
        H.assert_error(function() return a:allclose(a, {tol = 1}) end, "unknown option 'tol'")
        H.assert_error(function() return a:isclose(a, -1) end, 'isclose', 'non-negative')
        H.assert_error(function() return ddpl.linspace(0, 1, -1) end, 'linspace', 'non-negative')
        H.assert_error(function() return ddpl.logspace(0, 1, 3, {bas = 2}) end,
                       "unknown option 'bas'")
    end)

    it('the new functions record PyTorch grad_fn names', function()
        local x = ddpl.tensor({0.5}, {requires_grad = true})
        assert.are.equal('ErfinvBackward0', x:erfinv().grad_fn)
        assert.are.equal('RemainderBackward0', (x % 0.3).grad_fn)
        assert.are.equal('Log1PBackward0', x:log1p().grad_fn)
    end)

    it('second derivatives flow through the gradient formulas', function()
        local x = ddpl.tensor({0.3, -0.2}, {dtype = 'float64', requires_grad = true})
        for _, f in ipairs({'asin', 'atanh', 'erf', 'log1p', 'reciprocal', 'tan'}) do
            assert.is_true(ddpl.autograd.gradgradcheck(function(t) return t[f](t) end, {x}), f)
        end
        local y = ddpl.tensor({0.7, 1.1}, {dtype = 'float64', requires_grad = true})
        for _, f in ipairs({'atan2', 'hypot', 'logaddexp', 'xlogy'}) do
            assert.is_true(ddpl.autograd.gradcheck(function(a, b) return a[f](a, b) end, {y, x + 1}), f)
        end
    end)
end)
