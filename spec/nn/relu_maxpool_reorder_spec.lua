-- spec/nn/relu_maxpool_reorder_spec.lua: nn.Sequential runs a plain ReLU followed by a plain
-- MaxPool2d as the pool first (lua/ddplua/nn/Sequential.lua): the output and every gradient
-- must be the same bits as relu-then-pool, NaN, ties, windows of negatives and -0 included, on
-- the 2x2 vector kernel and on the general one; and the order must stay as written wherever
-- something can watch it (hooks, a forward of the instance's own, a subclass).
local H = require 'helpers'
local ddpl = H.ddpl
local nn, F = ddpl.nn, ddpl.F

-- exact equality, NaN matching NaN and the sign of zero included
local function same_bits(a, b, what)
    assert.are.same(H.shape(a), H.shape(b), what .. ': shapes')
    local va, vb = H.values(a:double()), H.values(b:double())
    for i = 1, #va do
        local x, y = va[i], vb[i]
        local ok = (x ~= x and y ~= y) or (x == y and (x ~= 0 or 1 / x == 1 / y))
        if not ok then
            error(('%s: element %d is %s, relu-then-pool gives %s'):format(what, i, tostring(x),
                                                                          tostring(y)))
        end
    end
end

-- An input with NaN, -0, ties between equal positive values and windows that are all negative
-- or all zero, so every rule that decides a window's winner is exercised.
local function hostile_input(dtype, n, c, h, w)
    local x = ddpl.randn(n, c, h, w, { dtype = dtype })
    local flat = x:view(-1)
    local function set(i, v) if i < flat:size(0) then flat:narrow(0, i, 1):fill_(v) end end
    set(0, 0 / 0)
    set(w + 3, 0 / 0)
    set(5, -0.0)
    set(6, 0.5) ; set(7, 0.5) ; set(w + 6, 0.5) -- a tie at a positive maximum
    for _, i in ipairs({ 2 * w, 2 * w + 1, 3 * w, 3 * w + 1 }) do set(i, -1.5) end -- all negative
    for _, i in ipairs({ 2 * w + 2, 2 * w + 3, 3 * w + 2, 3 * w + 3 }) do set(i, 0) end -- zeros
    return x
end

local function check(dtype, pool_args, n, c, h, w)
    local what = ('%s, kernel %d, input %dx%dx%dx%d'):format(dtype, pool_args[1], n, c, h, w)
    local pool = nn.MaxPool2d(table.unpack(pool_args))
    local seq = nn.Sequential(nn.ReLU(), pool)
    local x = hostile_input(dtype, n, c, h, w)
    local xa, xb = x:clone():requires_grad_(true), x:clone():requires_grad_(true)
    local ya = seq(xa)
    local yb = F.max_pool2d(F.relu(xb), pool_args[1], pool_args[2])
    assert.are.equal('ReluBackward0', tostring(ya.grad_fn), what .. ': the pool ran first')
    same_bits(ya, yb, what .. ': output')
    local g = ddpl.randn(table.unpack(H.shape(ya))):to(dtype)
    ya:backward(g)
    yb:backward(g)
    same_bits(xa.grad, xb.grad, what .. ': input gradient')
end

describe('Sequential: ReLU then MaxPool2d', function()
    local threads
    before_each(function()
        threads = ddpl.get_num_threads()
        ddpl.manual_seed(11)
    end)
    after_each(function() ddpl.set_num_threads(threads) end)

    it('gives the bits of relu-then-pool, forward and backward', function()
        for _, nt in ipairs({ 1, 2 }) do
            ddpl.set_num_threads(nt)
            for _, dtype in ipairs({ 'float32', 'float64' }) do
                check(dtype, { 2 }, 2, 3, 8, 14)                               -- 2x2 kernel
                check(dtype, { 2 }, 1, 2, 7, 9)                                -- odd sizes
                check(dtype, { 3, { stride = 2, padding = 1 } }, 2, 2, 9, 10)  -- general kernel
            end
        end
    end)

    it('keeps the conv-relu-pool block of lenet identical to the written order', function()
        local conv = nn.Conv2d(1, 4, 3, { padding = 1 })
        local seq = nn.Sequential(conv, nn.ReLU(), nn.MaxPool2d(2))
        local x = ddpl.randn(3, 1, 10, 12)
        local y = seq(x)
        local ref = F.max_pool2d(F.relu(conv(x)), 2)
        same_bits(y, ref, 'lenet block output')
        y:sum():backward()
        local gw = conv.weight.grad:clone()
        conv.weight.grad = nil
        ref:sum():backward()
        same_bits(gw, conv.weight.grad, 'lenet block weight gradient')
    end)

    it('runs in the written order where the order can be observed', function()
        local x = ddpl.randn(1, 2, 6, 6)
        local cases = {
            ['a forward hook on the relu'] = function(relu, _)
                relu:register_forward_hook(function(_, inputs)
                    assert.are.same({ 1, 2, 6, 6 }, H.shape(inputs[1]))
                end)
            end,
            ['a forward pre-hook on the pool'] = function(_, pool)
                pool:register_forward_pre_hook(function(_, inputs)
                    assert.is_true(H.values(inputs[1]:min())[1] >= 0) -- relu already ran
                end)
            end,
            ['a forward of the relu instance'] = function(relu, _)
                relu.forward = function(_, t) return F.relu(t) end
            end,
        }
        for name, setup in pairs(cases) do
            local relu, pool = nn.ReLU(), nn.MaxPool2d(2)
            setup(relu, pool)
            local y = nn.Sequential(relu, pool)(x:clone():requires_grad_(true))
            assert.are.equal('MaxPool2DWithIndicesBackward0', tostring(y.grad_fn), name)
        end
    end)

    it('runs a subclass of ReLU in the written order', function()
        local MyReLU = nn.ReLU:extend('MyReLU')
        local x = ddpl.randn(1, 1, 4, 4, { requires_grad = true })
        local y = nn.Sequential(MyReLU(), nn.MaxPool2d(2))(x)
        assert.are.equal('MaxPool2DWithIndicesBackward0', tostring(y.grad_fn))
    end)
end)
