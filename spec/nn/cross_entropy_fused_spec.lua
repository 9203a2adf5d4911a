-- spec/nn/cross_entropy_fused_spec.lua: F.cross_entropy's fused CPU kernel (log_softmax + nll in
-- one op, engine/cpu/cpu_loss.c) against the composition it replaces (F.log_softmax then
-- F.nll_loss, which runs the separate kernels), float64 gradchecks of every option it covers, the
-- second derivative (create_graph), and bad targets. PyTorch agreement of the same op on small
-- inputs is in spec/nn/nn_functional_spec.lua's fixtures (tools/gen_fixtures.py).
local H = require 'helpers'
local ddpl = H.ddpl
local F = ddpl.F
local gradcheck = ddpl.autograd.gradcheck

ddpl.manual_seed(17)

-- the composition: the same loss without the fused kernel
local function composed(x, t, o)
    o = o or {}
    local cd = x:dim() == 1 and 0 or 1
    return F.nll_loss(F.log_softmax(x, cd), t, o.weight, {reduction = o.reduction,
        ignore_index = o.ignore_index})
end

local function fused(x, t, o)
    o = o or {}
    return F.cross_entropy(x, t, o.weight, {reduction = o.reduction,
        ignore_index = o.ignore_index})
end

-- value and gradient of f(x) with the loss's gradient g (ones for a vector loss)
local function value_and_grad(f, x0, t, o)
    local x = x0:detach():clone():requires_grad_(true)
    local l = f(x, t, o)
    if l:dim() == 0 then l:backward() else l:backward(ddpl.ones_like(l)) end
    return l:detach(), x.grad
end

local function agree(x, t, o, tol)
    local l1, g1 = value_and_grad(fused, x, t, o)
    local l2, g2 = value_and_grad(composed, x, t, o)
    H.assert_close(l1, H.values(l2), tol, tol, 'loss')
    H.assert_close(g1, H.values(g2), tol, tol, 'gradient')
end

local OPTIONS = {
    {},
    {reduction = 'sum'},
    {reduction = 'none'},
    {ignore_index = 2},
    {reduction = 'none', ignore_index = 2},
    {weight = true},
    {weight = true, reduction = 'sum', ignore_index = 1},
}

local function options_for(o, C, dtype)
    local r = {}
    for k, v in pairs(o) do r[k] = v end
    if r.weight then r.weight = ddpl.rand(C, {dtype = dtype}):add_(0.5) end
    return r
end

local function label(o)
    local s = {}
    for _, k in ipairs({'reduction', 'ignore_index', 'weight'}) do
        if o[k] ~= nil then s[#s + 1] = k .. '=' .. tostring(o[k]) end
    end
    return #s > 0 and table.concat(s, ', ') or 'defaults'
end

describe('fused cross_entropy agrees with log_softmax + nll_loss', function()
    for _, dtype in ipairs({'float32', 'float64'}) do
        local tol = dtype == 'float32' and 2e-6 or 1e-12
        for _, o in ipairs(OPTIONS) do
            it(dtype .. ', (N,C) = (37, 1000), ' .. label(o), function()
                local x = ddpl.randn(37, 1000, {dtype = dtype}):mul_(4)
                local classes = H.values(ddpl.randint(1000, {37}))
                classes[5] = 2 -- a row that ignore_index = 2 skips
                local t = ddpl.tensor(classes, {dtype = 'int64'})
                agree(x, t, options_for(o, 1000, dtype), tol)
            end)
        end
        it(dtype .. ', a 1-D input (C) with a 0-dim target', function()
            agree(ddpl.randn(11, {dtype = dtype}), ddpl.tensor(3), {}, tol)
            agree(ddpl.randn(11, {dtype = dtype}), ddpl.tensor(3), {reduction = 'none'}, tol)
        end)
        it(dtype .. ', large and -inf logits (stable: no overflow, -inf classes get 0)', function()
            local x = ddpl.tensor({{1000, 1001, 999, -1e4}, {-1000, -1e4, -999, -998},
                {0.5, -math.huge, 1, 2}}, {dtype = dtype})
            local t = ddpl.tensor({1, 3, 0})
            agree(x, t, {}, tol)
            local _, g = value_and_grad(fused, x, t)
            assert.are.equal(0, H.values(g)[10]) -- row 3, class 2 (-inf)
        end)
        it(dtype .. ', a non-contiguous input takes the composition and agrees too', function()
            local x = ddpl.randn(50, 9, {dtype = dtype}):t()
            agree(x, ddpl.randint(50, {9}), {}, tol)
        end)
    end

    it('all targets ignored: mean is NaN (0/0) and the gradient is zero, as PyTorch', function()
        local x = ddpl.randn(3, 5, {requires_grad = true})
        local l = F.cross_entropy(x, ddpl.tensor({-100, -100, -100}))
        assert.is_true(l:item() ~= l:item())
        l:backward()
        H.assert_close(x.grad, H.values(ddpl.zeros(3, 5)), 0, 0)
    end)
end)

describe('fused cross_entropy gradcheck (float64)', function()
    for _, o in ipairs(OPTIONS) do
        it(label(o), function()
            local x = ddpl.randn(6, 5, {dtype = 'float64', requires_grad = true})
            local t = ddpl.tensor({0, 2, 4, 1, 2, 3})
            local oo = options_for(o, 5, 'float64')
            assert.is_true(gradcheck(function(a) return fused(a, t, oo) end, {x}))
        end)
    end
    it('a 1-D input', function()
        local x = ddpl.randn(7, {dtype = 'float64', requires_grad = true})
        assert.is_true(gradcheck(function(a) return F.cross_entropy(a, ddpl.tensor(5)) end, {x}))
    end)
end)

describe('fused cross_entropy second derivative (create_graph)', function()
    for _, o in ipairs({{}, {reduction = 'none'}, {weight = true, ignore_index = 1}}) do
        it('matches the composition, ' .. label(o), function()
            local x0 = ddpl.randn(4, 6, {dtype = 'float64'})
            local t = ddpl.tensor({5, 1, 0, 3})
            local oo = options_for(o, 6, 'float64')
            local function penalty_grad(f)
                local x = x0:clone():requires_grad_(true)
                local l = f(x, t, oo)
                if l:dim() > 0 then l = (l * ddpl.arange(1, 5, {dtype = 'float64'})):sum() end
                local gx = ddpl.autograd.grad({l}, {x}, {create_graph = true})[1]
                local gg = ddpl.autograd.grad({(gx * gx):sum()}, {x})[1]
                return gx:detach(), gg
            end
            local gx1, gg1 = penalty_grad(fused)
            local gx2, gg2 = penalty_grad(composed)
            H.assert_close(gx1, H.values(gx2), 1e-12, 1e-12, 'first derivative')
            H.assert_close(gg1, H.values(gg2), 1e-12, 1e-12, 'second derivative')
        end)
    end
end)

describe('fused cross_entropy refuses bad targets', function()
    it('an out-of-range class names cross_entropy and the class count', function()
        local x = ddpl.randn(2, 3, {requires_grad = true})
        H.assert_error(function() return F.cross_entropy(x, ddpl.tensor({0, 3})) end,
            'cross_entropy', 'target 3 is out of bounds for 3 classes')
        H.assert_error(function() return F.cross_entropy(x, ddpl.tensor({-2, 0})) end,
            'cross_entropy', 'out of bounds')
    end)
    it('float targets and a wrong-sized weight', function()
        local x = ddpl.randn(2, 3)
        H.assert_error(function() return F.cross_entropy(x, ddpl.tensor({0.0, 1.0})) end,
            'cross_entropy', 'int64')
        H.assert_error(function() return F.cross_entropy(x, ddpl.tensor({0, 1}), ddpl.ones(4)) end,
            'cross_entropy', 'weight')
    end)
end)
