-- spec/nn/pool_ceil_spec.lua: max_pool2d and avg_pool2d with ceil_mode (PyTorch's output size:
-- rounded up, less the last window when it would start in the right padding), avg_pool2d's
-- count_include_pad and divisor_override, against PyTorch (spec/fixtures/nn_modes.lua,
-- tools/gen_nn_modes_fixtures.py): values and gradients; then the modules, gradcheck in float64,
-- the float32 2x2 fast path on odd sizes, the errors, and CUDA against the CPU (pending without
-- a device; the emulation build runs it).
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F
local nn = ddpl.nn

local runners = {
    max_pool2d = function(ins, o) return F.max_pool2d(ins[1], ins[2], o) end,
    avg_pool2d = function(ins, o) return F.avg_pool2d(ins[1], ins[2], o) end,
}

local function pool_cases()
    local out = {}
    for _, c in ipairs(H.fixture('nn_modes')) do
        if runners[c.op] then out[#out + 1] = c end
    end
    return out
end

describe('pooling with ceil_mode matches PyTorch', function()
    H.run_cases(pool_cases(), runners, it)
end)

describe('pooling with ceil_mode', function()
    it('sizes the output as PyTorch: a last window past the edge is kept, one in the padding '
       .. 'dropped', function()
        local x = ddpl.randn(1, 1, 5, 5)
        assert.are.same({1, 1, 3, 3}, H.shape(F.max_pool2d(x, 2, {ceil_mode = true})))
        assert.are.same({1, 1, 2, 2}, H.shape(F.max_pool2d(x, 2)))
        -- 6 + 2 - 3 = 5: ceil(5 / 2) + 1 = 4, but window 3 would start at 6 - 1 = 5 >= 6 + 1? no:
        -- (4 - 1) * 2 = 6 >= 6 + 1 is false, so 4 stay; with 5 columns (3 * 2 = 6 >= 5 + 1) one
        -- goes
        local y = ddpl.randn(1, 1, 6, 5)
        assert.are.same({1, 1, 4, 3}, H.shape(F.avg_pool2d(y, 3, 2, 1, {ceil_mode = true})))
        assert.are.same({1, 1, 3, 3}, H.shape(F.avg_pool2d(y, 3, 2, 1)))
    end)

    it('modules pass ceil_mode and divisor_override on', function()
        local x = ddpl.randn(2, 3, 7, 7)
        local m = nn.MaxPool2d(2, {ceil_mode = true})
        H.assert_close(m(x), F.max_pool2d(x, 2, {ceil_mode = true}), 0, 0, 'MaxPool2d')
        assert.are.same({2, 3, 4, 4}, H.shape(m(x)))
        local a = nn.AvgPool2d(3, {stride = 2, padding = 1, ceil_mode = true,
                                   count_include_pad = false, divisor_override = 4})
        H.assert_close(a(x), F.avg_pool2d(x, 3, 2, 1, {ceil_mode = true,
                                                        count_include_pad = false,
                                                        divisor_override = 4}), 0, 0, 'AvgPool2d')
        assert.are.equal(4, a.divisor_override)
        assert.is_nil(nn.AvgPool2d(2).divisor_override)
    end)

    it('the float32 2x2 fast path leaves windows past the edge to the clipping loop', function()
        for _, hw in ipairs({{1, 1}, {3, 5}, {5, 17}, {7, 2}}) do
            local x = ddpl.randn(2, 2, hw[1], hw[2])
            local x32 = x:clone():requires_grad_(true)
            local x64 = x:double():requires_grad_(true)
            local y32 = F.max_pool2d(x32, 2, {ceil_mode = true})
            local y64 = F.max_pool2d(x64, 2, {ceil_mode = true})
            H.assert_close(y32:double(), y64, 0, 0, 'values')
            local g = ddpl.randn(table.unpack(H.shape(y32)))
            y32:backward(g)
            y64:backward(g:double())
            H.assert_close(x32.grad:double(), x64.grad, 0, 0, 'gradient')
        end
    end)

    it('is differentiable: gradcheck in float64, double backward of the average', function()
        local x = H.lcg({1, 2, 5, 7}, 11, 4, 'float64')
        x.requires_grad = true
        local gc = ddpl.autograd.gradcheck
        assert.is_true(gc(function(a) return F.max_pool2d(a, 3, 2, 1, {ceil_mode = true}) end,
                          {x}))
        for _, cip in ipairs({true, false}) do
            assert.is_true(gc(function(a)
                return F.avg_pool2d(a, 3, 2, 1, {ceil_mode = true, count_include_pad = cip})
            end, {x}))
        end
        assert.is_true(gc(function(a)
            return F.avg_pool2d(a, 2, {ceil_mode = true, divisor_override = 3})
        end, {x}))
        -- the average's gradient is linear in the output gradient: its own gradient is the
        -- pooling again, with the same ceil_mode windows
        local g = H.lcg({1, 2, 3, 4}, 5, 2, 'float64')
        g.requires_grad = true
        local y = F.avg_pool2d(x, 2, {ceil_mode = true, divisor_override = 3})
        local dx = ddpl.autograd.grad({y}, {x}, {g}, {create_graph = true})[1]
        local gg = ddpl.autograd.grad({(dx * dx):sum()}, {g})[1]
        H.assert_close(gg, F.avg_pool2d(dx * 2, 2, {ceil_mode = true, divisor_override = 3}),
                       1e-12, 1e-12, 'double backward')
    end)

    it('refuses a zero divisor and bad options, naming the function', function()
        local x = ddpl.randn(1, 1, 4, 4)
        H.assert_error(function() F.avg_pool2d(x, 2, {divisor_override = 0}) end, 'avg_pool2d',
                       'divisor_override', 'non-zero')
        H.assert_error(function() F.avg_pool2d(x, 2, {divisor_override = 1.5}) end,
                       'avg_pool2d', 'divisor_override')
        H.assert_error(function() F.max_pool2d(x, 2, {ceil_mode = 'yes'}) end, 'max_pool2d',
                       'ceil_mode')
        H.assert_error(function() F.max_pool2d(x, 5) end, 'max_pool2d',
                       'smaller than the kernel')
        H.assert_error(function() F.max_pool2d(x, 8, 1, {ceil_mode = true}) end, 'max_pool2d',
                       'smaller than the kernel')
        assert.are.same({1, 1, 1, 1}, H.shape(F.max_pool2d(x, 5, {ceil_mode = true})))
        H.assert_error(function() F.max_pool2d(x, 2, {dilation = 2}) end, 'max_pool2d',
                       'dilation')
    end)
end)

local function no_cuda()
    if ddpl.cuda.is_available() then return false end
    pending('no CUDA device')
    return true
end

describe('cuda pooling with ceil_mode matches the cpu', function()
    it('values and gradients', function()
        if no_cuda() then return end
        for _, c in ipairs({{'max_pool2d', {ceil_mode = true}},
                            {'avg_pool2d', {ceil_mode = true, padding = 1, stride = 2}},
                            {'avg_pool2d', {ceil_mode = true, count_include_pad = false,
                                            padding = 1, stride = 2}},
                            {'avg_pool2d', {ceil_mode = true, divisor_override = 7}}}) do
            local x = H.lcg({2, 3, 7, 5}, 3, 4, 'float64')
            local xc = x:cuda()
            x.requires_grad = true
            xc.requires_grad = true
            local y, yc = F[c[1]](x, 3, c[2]), F[c[1]](xc, 3, c[2])
            H.assert_close(yc:cpu(), y, 1e-12, 1e-12, c[1])
            local g = H.lcg(H.shape(y), 5, 2, 'float64')
            y:backward(g)
            yc:backward(g:cuda())
            H.assert_close(xc.grad:cpu(), x.grad, 1e-12, 1e-12, c[1] .. ' gradient')
        end
    end)
end)
