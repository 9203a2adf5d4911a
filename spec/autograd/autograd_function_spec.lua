-- spec/autograd/autograd_function_spec.lua: ddpl.autograd.Function, custom operations written in
-- Lua: forward/backward with ctx (save_for_backward, saved_tensors, plain fields, needs_input_grad,
-- mark_non_differentiable), tensor and non-tensor arguments, several outputs, gradcheck and
-- gradgradcheck, retain_graph, the errors (wrong number, shape or dtype of gradients, a Lua
-- error inside backward, a second backward through a freed graph) and that nodes give back
-- their memory and registry slots.
local H = require 'helpers'
local ddpl = H.ddpl
local Function = ddpl.autograd.Function

local function leaf(values)
    return ddpl.tensor(values, {dtype = 'float64', requires_grad = true})
end

-- y = x * x * k (k a number), dy/dx = 2 k x
local Square = Function:extend('Square')
function Square.forward(ctx, x, k)
    ctx:save_for_backward(x)
    ctx.k = k
    return x * x * k
end
function Square.backward(ctx, g)
    local x = ctx.saved_tensors[1]
    return g * 2 * ctx.k * x, nil
end

-- y = exp(x), saving its output
local Exp = Function:extend('MyExp')
function Exp.forward(ctx, x)
    local y = x:exp()
    ctx:save_for_backward(y)
    return y
end
function Exp.backward(ctx, g) return g * ctx.saved_tensors[1] end

describe('autograd.Function', function()
    it('records a node named after the class and computes the gradient', function()
        local x = leaf({1, -2, 3})
        local y = Square.apply(x, 3)
        assert.are.equal('SquareBackward', y.grad_fn)
        assert.is_true(y.requires_grad)
        H.assert_close(y, {3, 12, 27}, 0, 0)
        y:sum():backward()
        H.assert_close(x.grad, {6, -12, 18}, 0, 0)
    end)

    it('runs forward with recording off and records nothing when no input requires grad', function()
        local Probe = Function:extend('Probe')
        local seen
        function Probe.forward(ctx, x)
            seen = ddpl.is_grad_enabled()
            return x * 2
        end
        function Probe.backward(ctx, g) return g * 2 end
        local y = Probe.apply(leaf({1}))
        assert.is_false(seen)
        assert.is_true(y.requires_grad)
        local z = Probe.apply(ddpl.ones(2))
        assert.is_false(z.requires_grad)
        assert.is_nil(z.grad_fn)
        local w = ddpl.no_grad(function() return Probe.apply(leaf({1})) end)
        assert.is_false(w.requires_grad)
    end)

    it('passes needs_input_grad as PyTorch, and sends gradients only to inputs that need them', function()
        local Mix = Function:extend('Mix')
        local needs
        function Mix.forward(ctx, a, s, b)
            needs = ctx.needs_input_grad
            ctx.s = s
            return a * b * s
        end
        function Mix.backward(ctx, g)
            return g * 5, nil, g * 7 -- b needs none: its gradient is dropped
        end
        local a, b = leaf({1, 2}), ddpl.tensor({3.0, 4.0}, {dtype = 'float64'})
        local y = Mix.apply(a, 2, b)
        assert.are.same({true, false, false}, needs)
        y:sum():backward()
        H.assert_close(a.grad, {5, 5}, 0, 0)
        assert.is_nil(b.grad)
    end)

    it('agrees with gradcheck and gradgradcheck, also through a saved output', function()
        local x = ddpl.tensor({0.3, -0.7, 1.1}, {dtype = 'float64', requires_grad = true})
        assert.is_true(ddpl.autograd.gradcheck(function(a) return Square.apply(a, 1.5) end, {x}))
        assert.is_true(ddpl.autograd.gradgradcheck(function(a) return Square.apply(a, 1.5) end, {x}))
        assert.is_true(ddpl.autograd.gradcheck(function(a) return Exp.apply(a) end, {x}))
        assert.is_true(ddpl.autograd.gradgradcheck(function(a) return Exp.apply(a) end, {x}))
    end)

    it('works with retain_graph and refuses a second backward through a freed graph', function()
        local x = leaf({1, 2})
        local y = Square.apply(x, 1):sum()
        y:backward({retain_graph = true})
        y:backward()
        H.assert_close(x.grad, {4, 8}, 0, 0)
        H.assert_error(function() y:backward() end, 'SquareBackward', 'second time')
        local e = Exp.apply(x):sum()
        e:backward()
        H.assert_error(function() e:backward() end, 'MyExpBackward', 'second time')
    end)

    it('handles several outputs: backward runs once with every gradient, the rest as zeros',
       function()
        local Two = Function:extend('Two')
        local calls, seen = 0, nil
        function Two.forward(ctx, a, b) return a + b, a * b end
        function Two.backward(ctx, gs, gp)
            calls = calls + 1
            seen = {gs:item(), gp:item()}
            ctx:save_for_backward() -- harmless in backward
            return gs + gp * 2, gs + gp * 3 -- as if a = 3, b = 2 (checked below)
        end
        local a, b = leaf({3}), leaf({2})
        local s, p = Two.apply(a, b)
        assert.are.equal('TwoBackward', s.grad_fn)
        assert.are.equal('TwoBackward', p.grad_fn)
        H.assert_close(s, {5}, 0, 0)
        H.assert_close(p, {6}, 0, 0)
        ;(s * 10 + p):sum():backward({retain_graph = true}) -- d/da = 10 + b, d/db = 10 + a
        H.assert_close(a.grad, {12}, 0, 0)
        H.assert_close(b.grad, {13}, 0, 0)
        assert.are.equal(1, calls) -- once, with both gradients, as PyTorch
        assert.are.same({10, 1}, seen)
        a.grad, b.grad = nil, nil
        s:sum():backward() -- only s used: backward sees gp as zeros
        H.assert_close(a.grad, {1}, 0, 0)
        H.assert_close(b.grad, {1}, 0, 0)
        assert.are.equal(2, calls)
        assert.are.same({1, 0}, seen)
    end)

    it('passes nil for an output without gradient after ctx:set_materialize_grads(false)',
       function()
        local Two = Function:extend('TwoNil')
        local got
        function Two.forward(ctx, a)
            ctx:set_materialize_grads(false)
            return a * 2, a * 3
        end
        function Two.backward(ctx, g1, g2)
            got = {g1 ~= nil, g2 ~= nil}
            local g = nil
            if g1 then g = g1 * 2 end
            if g2 then g = (g or 0) + g2 * 3 end
            return g
        end
        local a = leaf({1, 2})
        local y1, y2 = Two.apply(a)
        y2:sum():backward()
        assert.are.same({false, true}, got)
        H.assert_close(a.grad, {3, 3}, 0, 0)
        -- one output alone: the same rule
        local One = Function:extend('OneNil')
        function One.forward(ctx, x) ctx:set_materialize_grads(false); return x * 2, x:argmax() end
        function One.backward(ctx, g, gi) got = {g ~= nil, gi ~= nil}; return g * 2 end
        local z = One.apply(a)
        z:sum():backward()
        assert.are.same({true, false}, got)
    end)

    it('differentiates twice through a saved output of a Function with several outputs',
       function()
        -- y1 = exp(x), y2 = 2x, backward from the saved output: d2/dx2 of sum(y1^2 ... )
        local ExpTwo = Function:extend('ExpTwo')
        function ExpTwo.forward(ctx, x)
            local e = x:exp()
            ctx:save_for_backward(e)
            return e, x * 2
        end
        function ExpTwo.backward(ctx, g1, g2)
            local e = table.unpack(ctx.saved_tensors)
            return g1 * e + g2 * 2
        end
        local x = leaf({0.5, -1.0, 2.0})
        local y1, y2 = ExpTwo.apply(x)
        local loss = (y1 * y1):sum() + (y2 * y2 * y2):sum()
        local g = ddpl.autograd.grad(loss, {x}, {create_graph = true})[1]
        -- d/dx = 2 e^{2x} + 24 x^2; d2/dx2 = 4 e^{2x} + 48 x
        local xs = {0.5, -1.0, 2.0}
        local want1, want2 = {}, {}
        for i, v in ipairs(xs) do
            want1[i] = 2 * math.exp(2 * v) + 24 * v * v
            want2[i] = 4 * math.exp(2 * v) + 48 * v
        end
        H.assert_close(g, want1, 1e-5, 1e-5)
        g:sum():backward()
        H.assert_close(x.grad, want2, 1e-5, 1e-5)
        -- a saved output whose own output got no gradient cannot be differentiated through
        local z1, z2 = ExpTwo.apply(x)
        H.assert_error(function()
            ddpl.autograd.grad((z2 * z2):sum(), {x}, {create_graph = true})
        end, 'ExpTwo', 'saved output that received no gradient')
    end)

    it('mark_non_differentiable leaves an output without history', function()
        local ArgAndVal = Function:extend('ArgAndVal')
        function ArgAndVal.forward(ctx, x)
            local doubled, mask = x * 2, x:gt(0):double()
            ctx:mark_non_differentiable(mask)
            return doubled, mask
        end
        function ArgAndVal.backward(ctx, g, gmask) return g * 2 end
        local x = leaf({-1, 1})
        local d, m = ArgAndVal.apply(x)
        assert.is_true(d.requires_grad)
        assert.is_false(m.requires_grad)
        d:sum():backward()
        H.assert_close(x.grad, {2, 2}, 0, 0)
    end)

    it('returns an input given back by forward as a new tensor, leaving the input a leaf', function()
        local Ident = Function:extend('Ident')
        function Ident.forward(ctx, x) return x end
        function Ident.backward(ctx, g) return g end
        local x = leaf({1, 2})
        local y = Ident.apply(x)
        assert.is_true(x:is_leaf())
        assert.is_nil(x.grad_fn)
        assert.are.equal('IdentBackward', y.grad_fn)
        y:sum():backward()
        H.assert_close(x.grad, {1, 1}, 0, 0)
    end)

    it('checks the gradients backward returns, naming the class and the input', function()
        local x = leaf({1, 2, 3})
        local function fails(backward, ...)
            local Bad = Function:extend('Bad')
            function Bad.forward(ctx, a, k) return a * 2 end
            Bad.backward = backward
            local y = Bad.apply(x, 2)
            H.assert_error(function() y:sum():backward() end, ...)
            assert.is_nil(x.grad) -- nothing half-accumulated
        end
        fails(function(ctx, g) return g * 2 end, 'Bad.backward returned 1 gradients, expected 2')
        fails(function(ctx, g) return g:sum(), nil end, 'Bad.backward', 'input 1', 'shape [3]')
        fails(function(ctx, g) return g:float(), nil end, 'Bad.backward', 'input 1', 'dtype float64')
        fails(function(ctx, g) return g * 2, g end, 'Bad.backward', 'input 2', 'not a tensor')
        fails(function(ctx, g) return 'x', nil end, 'Bad.backward', 'input 1', 'expected a tensor or nil')
        fails(function(ctx, g) return g, nil, g end, 'Bad.backward returned 3 gradients, expected 2')
    end)

    it('propagates a Lua error raised in backward out of backward(), leaving no half state', function()
        local Boom = Function:extend('Boom')
        function Boom.forward(ctx, a) return a * 2 end
        function Boom.backward(ctx, g) error('boom inside backward') end
        local x, w = leaf({1, 2}), leaf({3, 4})
        -- w's gradient is ready after Boom's node runs: the error stops backward before it
        local loss = (Boom.apply(x) * w):sum()
        H.assert_error(function() loss:backward({retain_graph = true}) end, 'boom inside backward')
        assert.is_nil(x.grad)
        -- the state is usable: another backward runs normally
        local y = Square.apply(x, 1):sum()
        y:backward()
        H.assert_close(x.grad, {2, 4}, 0, 0)
    end)

    it('refuses a class without forward or backward', function()
        local Empty = Function:extend('Empty')
        H.assert_error(function() Empty.apply(leaf({1})) end, 'Empty.apply', 'define Empty.forward')
    end)

    it('gives back tensor memory and registry slots when graphs are dropped', function()
        -- outputs saved for backward live in the node (no Lua cycle); the closure's registry
        -- slot is queued when the node dies and released by the next backward
        local function count_registry()
            local n = 0
            for _ in pairs(debug.getregistry()) do n = n + 1 end
            return n
        end
        local function round()
            local x = ddpl.randn(64, 64, {dtype = 'float64', requires_grad = true})
            local y = Exp.apply(x) -- saves its output
            local z = Square.apply(y, 2)
            z:sum():backward()
            local kept = Exp.apply(x) -- a graph never run backward through
            return kept:sum():item()
        end
        -- collects, then runs a backward, which unrefs the slots of nodes freed meanwhile;
        -- what those closures held is then garbage for the next round
        local function settle()
            for _ = 1, 4 do
                collectgarbage()
                collectgarbage()
                local t = ddpl.ones(1, {requires_grad = true})
                t:sum():backward()
            end
            collectgarbage()
        end
        round()
        settle()
        local bytes, slots = ddpl.memory_allocated(), count_registry()
        for _ = 1, 50 do round() end
        settle()
        assert.are.equal(bytes, ddpl.memory_allocated())
        assert.is_true(count_registry() <= slots + 4,
                       ('registry grew from %d to %d entries'):format(slots, count_registry()))
    end)
end)
