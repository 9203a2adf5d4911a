-- spec/tensor/median_spec.lua: median, nanmedian, quantile and nanquantile against PyTorch
-- (spec/fixtures/median.lua, tools/gen_median_fixtures.py): values, indices (the first NaN of a
-- row with NaNs), interpolations, gradients; then gradcheck, empty and 0-dim inputs, the
-- argument forms, the errors, and the CUDA path against the CPU (pending without a CUDA device;
-- the emulation build runs it).
local H = require 'helpers'
local ddpl = H.ddpl

local runners = {
    median = function(ins, o) return ins[1]:median(o) end,
    median_values = function(ins, o) return (ins[1]:median(o)) end,
    nanmedian = function(ins, o) return ins[1]:nanmedian(o) end,
    nanmedian_values = function(ins, o) return (ins[1]:nanmedian(o)) end,
    quantile = function(ins, o) return ins[1]:quantile(ins[2], o) end,
    nanquantile = function(ins, o) return ddpl.nanquantile(ins[1], ins[2], o) end,
}

describe('median and quantile match PyTorch', function()
    H.run_cases(H.fixture('median'), runners, it)
end)

describe('median', function()
    it('takes PyTorch positional forms and is a ddpl function too', function()
        local x = ddpl.tensor({{3, 1, 2}, {9, 7, 8}})
        local v, i = x:median(1, true)
        assert.are.same({{2}, {8}}, v:tolist())
        assert.are.same({{2}, {2}}, i:tolist())
        v, i = ddpl.median(x, 0)
        assert.are.same({3, 1, 2}, v:tolist())
        assert.are.same({0, 0, 0}, i:tolist())
        assert.are.equal(3, ddpl.median(x):item()) -- the lower middle of 1 2 3 7 8 9
        local a, b = x:median()
        assert.is_nil(b)
        assert.are.equal(3, a:item())
    end)

    it('of empty input: NaN for the whole tensor, an error for an empty dim', function()
        local m = ddpl.zeros(0):median()
        assert.is_true(m:item() ~= m:item())
        H.assert_error(function() ddpl.zeros(0, 2):median(0) end, 'median',
                       'dim 0 to have non-zero size')
        local v, i = ddpl.zeros(0, 2):median(1)
        assert.are.same({0}, H.shape(v))
        assert.are.same({0}, H.shape(i))
        H.assert_error(function() ddpl.zeros(0, {dtype = 'int64'}):median() end, 'median',
                       'empty')
    end)

    it('is differentiable: gradcheck in float64', function()
        local x = H.lcg({4, 5}, 3, 4, 'float64')
        x.requires_grad = true
        assert.is_true(ddpl.autograd.gradcheck(function(a) return (a:median(1)) end, {x}))
        assert.is_true(ddpl.autograd.gradcheck(function(a) return a:median() end, {x}))
        assert.is_true(ddpl.autograd.gradcheck(function(a) return (a:nanmedian(0, true)) end,
                                               {x}))
    end)

    it('refuses bad arguments, naming the function', function()
        local x = ddpl.zeros(2, 3)
        H.assert_error(function() x:median(2) end, 'median', 'out of range')
        H.assert_error(function() x:median({bogus = 1}) end, 'median', "unknown option 'bogus'")
        H.assert_error(function() x:median(0, 'yes') end, 'median', 'keepdim')
        H.assert_error(function() x:median({keepdim = true}) end, 'median', 'needs a dim')
        H.assert_error(function() x:nanmedian(0, false, 1) end, 'nanmedian', 'at most')
        H.assert_error(function() x:median('a') end, 'median', 'dim')
        H.assert_error(function() ddpl.median(1) end, 'median', 'expected a tensor')
        H.assert_error(function() ddpl.tensor({true, false}):median() end, 'median')
    end)
end)

describe('quantile', function()
    it('takes q as a number, a 0-dim or a 1-D tensor; the output leads with q', function()
        local x = ddpl.arange(10):float():reshape(2, 5)
        assert.are.equal(4.5, x:quantile(0.5):item())
        assert.are.same({2}, H.shape(x:quantile(0.5, 1)))
        assert.are.same({3, 2}, H.shape(x:quantile(ddpl.tensor({0.1, 0.5, 0.9}), 1)))
        assert.are.same({3, 1, 5}, H.shape(x:quantile(ddpl.tensor({0.1, 0.5, 0.9}), 0, true)))
        assert.are.same({1, 1}, H.shape(x:quantile(0.5, {keepdim = true})))
        assert.are.same({}, H.shape(x:quantile(ddpl.tensor(0.2), {dim = 1}):select(0, 0)))
        assert.are.same({0, 2}, H.shape(x:quantile(ddpl.zeros(0), 1)))
        assert.are.same({1.0, 6.0}, x:quantile(0.25, 1, false, {interpolation = 'lower'}):tolist())
    end)

    it('is differentiable: gradcheck in float64, every interpolation', function()
        local x = H.lcg({3, 6}, 5, 4, 'float64')
        x.requires_grad = true
        local q = ddpl.tensor({0.15, 0.5, 0.8}, {dtype = 'float64'})
        for _, interp in ipairs({'linear', 'lower', 'higher', 'midpoint', 'nearest'}) do
            local f = function(a) return a:quantile(q, 1, {interpolation = interp}) end
            assert.is_true(ddpl.autograd.gradcheck(f, {x}), interp)
        end
        assert.is_true(ddpl.autograd.gradcheck(function(a) return a:nanquantile(0.3) end, {x}))
    end)

    it('refuses bad arguments, naming the function', function()
        local x = ddpl.zeros(2, 3)
        H.assert_error(function() x:quantile(1.5) end, 'quantile', 'range [0, 1]', '1.5')
        H.assert_error(function() x:quantile(ddpl.tensor({0.5, -0.1})) end, 'quantile', '-0.1')
        H.assert_error(function() x:quantile(0 / 0) end, 'quantile', 'range')
        H.assert_error(function() x:long():quantile(0.5) end, 'quantile', 'float32 or float64')
        H.assert_error(function() ddpl.zeros(0):quantile(0.5) end, 'quantile', 'non-empty')
        H.assert_error(function() x:quantile(ddpl.zeros(1, 1)) end, 'quantile', '1-D')
        H.assert_error(function() x:quantile(ddpl.zeros(1, {dtype = 'float64'})) end,
                       'quantile', 'dtype')
        H.assert_error(function() x:quantile(0.5, 2) end, 'quantile', 'out of range')
        H.assert_error(function() x:quantile(0.5, {interpolation = 'cubic'}) end, 'quantile',
                       'interpolation', 'cubic')
        H.assert_error(function() x:quantile(0.5, {interpolation = 3}) end, 'quantile',
                       'interpolation')
        H.assert_error(function() x:nanquantile() end, 'nanquantile', 'expected q')
        H.assert_error(function() x:quantile('a') end, 'quantile')
        H.assert_error(function() x:quantile(0.5, {foo = 1}) end, "unknown option 'foo'")
    end)
end)

-- ---- CUDA against the CPU (pending without a device) ----
local function no_cuda()
    if ddpl.cuda.is_available() then return false end
    pending('no CUDA device')
    return true
end

describe('cuda median and quantile match the cpu', function()
    it('values, indices and gradients', function()
        if no_cuda() then return end
        local nan = 0 / 0
        local x = ddpl.tensor({{1, nan, 3, 2, 0.5}, {2, 1, -1, 4, 0}, {7, 6, 5, nan, 4}})
        for _, fn in ipairs({'median', 'nanmedian'}) do
            local v, i = x[fn](x, 1)
            local vc, ic = x:cuda()[fn](x:cuda(), 1)
            H.assert_close(vc:cpu(), v, 0, 0, fn)
            H.assert_close(ic:cpu(), i, 0, 0, fn .. ' indices')
            H.assert_close(x:cuda()[fn](x:cuda()):cpu(), x[fn](x), 0, 0, fn .. ' all')
        end
        local q = ddpl.tensor({0.1, 0.5, 0.95})
        for _, interp in ipairs({'linear', 'lower', 'higher', 'midpoint', 'nearest'}) do
            local o = {interpolation = interp}
            H.assert_close(x:cuda():quantile(q:cuda(), 1, o):cpu(), x:quantile(q, 1, o), 1e-6,
                           1e-6, 'quantile ' .. interp)
            H.assert_close(x:cuda():nanquantile(q:cuda(), 1, o):cpu(), x:nanquantile(q, 1, o),
                           1e-6, 1e-6, 'nanquantile ' .. interp)
        end
        local y = H.lcg({4, 6}, 7, 4, 'float64')
        local yc = y:cuda()
        y.requires_grad = true
        yc.requires_grad = true
        local g = H.lcg({3, 4}, 9, 2, 'float64')
        y:quantile(q:double(), 1):backward(g)
        yc:quantile(q:double():cuda(), 1):backward(g:cuda())
        H.assert_close(yc.grad:cpu(), y.grad, 1e-12, 1e-12, 'quantile gradient')
        H.assert_error(function() x:cuda():quantile(q) end, 'quantile', 'device')
    end)
end)
