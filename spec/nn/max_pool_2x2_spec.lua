-- spec/nn/max_pool_2x2_spec.lua: the float32 2x2 stride-2 max-pool kernel (engine/cpu/cpu_pool.c:
-- AVX2 rows of 8 outputs, then a masked tail of 1-7) against the float64 kernel's scalar loop,
-- for every row width from 1 to 17 outputs (odd input widths and heights drop their last
-- column or row), values and the gradient routed through the argmax, NaN included (a NaN wins
-- its window, a later NaN wins over an earlier one).
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F

-- Pools x (float32) and x:double() the same way; the max is exact and each input gets at most
-- one output's gradient (windows do not overlap), so the two must agree exactly, NaN for NaN.
local function check(x, what)
    local x32 = x:clone():requires_grad_(true)
    local x64 = x:double():requires_grad_(true)
    local y32, y64 = F.max_pool2d(x32, 2), F.max_pool2d(x64, 2)
    assert.are.same(H.shape(y64), H.shape(y32))
    local g = ddpl.randn(table.unpack(H.shape(y32)))
    y32:backward(g)
    y64:backward(g:double())
    for name, pair in pairs({y = {y32, y64}, dx = {x32.grad, x64.grad}}) do
        local a, b = H.values(pair[1]:double()), H.values(pair[2])
        for i = 1, #b do
            local same = a[i] == b[i] or (a[i] ~= a[i] and b[i] ~= b[i])
            if not same then
                error(('%s: %s[%d] is %s, the float64 kernel gives %s'):format(what, name, i,
                    tostring(a[i]), tostring(b[i])))
            end
        end
    end
end

describe('max_pool2d float32 2x2 stride 2', function()
    local threads
    before_each(function()
        threads = ddpl.get_num_threads()
        ddpl.manual_seed(3)
    end)
    after_each(function() ddpl.set_num_threads(threads) end)

    it('matches the float64 kernel for every row width up to 17 outputs', function()
        for _, nt in ipairs({1, 2}) do
            ddpl.set_num_threads(nt)
            for W = 2, 35 do
                for _, Hh in ipairs({2, 5}) do
                    check(ddpl.randn(2, 3, Hh, W), ('%d threads, %dx%d'):format(nt, Hh, W))
                end
            end
        end
    end)

    it('lets NaN win its window in the vector rows and in the masked tail', function()
        for _, W in ipairs({4, 14, 22, 30}) do -- tails of 2, 7, 3 outputs and 7 again
            local x = ddpl.randn(1, 2, 4, W)
            local flat = x:view(-1)
            -- NaNs in the first row of windows, at every tap position of some window, and two
            -- in one window (the later one wins), in the vector part and in the tail
            for _, i in ipairs({0, 3, W + 4, W + 5, 2 * W - 1, W * 4 + 2 * W + 1}) do
                if i < flat:size(0) then flat:narrow(0, i, 1):fill_(0 / 0) end
            end
            check(x, ('NaN, width %d'):format(W))
        end
    end)

    it('agrees with a window-by-window maximum computed in Lua', function()
        -- an independent reference for the values (14 wide: 7 outputs, all in the masked tail)
        local x = ddpl.randn(2, 2, 6, 14)
        local y = F.max_pool2d(x, 2)
        local v, yv = H.values(x), H.values(y)
        for n = 0, 1 do
            for c = 0, 1 do
                for oh = 0, 2 do
                    for ow = 0, 6 do
                        local m = -math.huge
                        for a = 0, 1 do
                            for b = 0, 1 do
                                local e = v[((n * 2 + c) * 6 + 2 * oh + a) * 14 + 2 * ow + b + 1]
                                if e > m then m = e end
                            end
                        end
                        assert.are.equal(m, yv[((n * 2 + c) * 3 + oh) * 7 + ow + 1])
                    end
                end
            end
        end
    end)
end)
