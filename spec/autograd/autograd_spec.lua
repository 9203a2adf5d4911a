-- spec/autograd/autograd_spec.lua: the autograd contract of API.md, with PyTorch's semantics:
-- requires_grad, .grad accumulation and assignment, retain_graph, grad_fn / is_leaf, retain_grad,
-- hooks, no_grad / enable_grad / is_grad_enabled, autograd.grad, errors (non-scalar backward,
-- in-place changes of saved tensors), shared leaves, long chains, detach.
local H = require 'helpers'
local ddpl = H.ddpl

local function leaf(values, dtype)
    return ddpl.tensor(values, {dtype = dtype or 'float32', requires_grad = true})
end

describe('requires_grad', function()
    it('is false by default and settable on leaves', function()
        local x = ddpl.ones(2)
        assert.is_false(x.requires_grad)
        x.requires_grad = true
        assert.is_true(x.requires_grad)
        assert.is_true(ddpl.tensor({1.0}, {requires_grad = true}).requires_grad)
    end)

    it('propagates to results', function()
        local x, c = leaf({1, 2}), ddpl.ones(2)
        assert.is_true((x * c).requires_grad)
        assert.is_false((c * 2).requires_grad)
    end)

    it('cannot be set on integer tensors', function()
        local i = ddpl.tensor({1, 2})
        H.assert_error(function() i.requires_grad = true end, 'requires_grad')
    end)

    it('cannot be switched off on a non-leaf', function()
        local y = leaf({1, 2}) * 2
        H.assert_error(function() y.requires_grad = false end, 'requires_grad')
    end)
end)

describe('backward', function()
    it('computes the gradient of a scalar', function()
        local x = leaf({1, 2, 3})
        local y = (x * x):sum()
        assert.is_nil(x.grad)
        y:backward()
        H.assert_close(x.grad, {2, 4, 6})
    end)

    it('accumulates into .grad over two backward passes', function()
        local x = leaf({1, 2, 3})
        local loss1 = (x * 3):sum()
        loss1:backward()
        local loss2 = (x * x):sum()
        loss2:backward()
        H.assert_close(x.grad, {5, 7, 9})
    end)

    it('takes an explicit gradient for non-scalar outputs', function()
        local x = leaf({1, 2, 3})
        local y = x * x
        y:backward(ddpl.tensor({1.0, 0.5, -1.0}))
        H.assert_close(x.grad, {2, 2, -6})
    end)

    it('raises for a non-scalar output without a gradient', function()
        local y = leaf({1, 2}) * 2
        H.assert_error(function() y:backward() end, 'implicitly created')
    end)

    it('raises for a gradient of the wrong shape', function()
        local y = leaf({1, 2}) * 2
        H.assert_error(function() y:backward(ddpl.ones(3)) end, 'backward')
    end)

    it('raises on a tensor that does not require grad', function()
        H.assert_error(function() ddpl.ones(2):sum():backward() end, 'grad')
    end)

    it('a second backward without retain_graph raises a clear error', function()
        local x = leaf({1, 2})
        local y = (x:exp()):sum()
        y:backward()
        H.assert_error(function() y:backward() end, 'second time', 'retain_graph')
    end)

    it('retain_graph keeps the graph for another backward', function()
        local x = leaf({1, 2})
        local y = (x * x):sum()
        y:backward(nil, {retain_graph = true})
        y:backward()
        H.assert_close(x.grad, {4, 8})
    end)

    it('sums the gradients of a leaf used twice', function()
        local x = leaf({1, 2, 3})
        local y = (x * x + x):sum()
        y:backward()
        H.assert_close(x.grad, {3, 5, 7})
    end)

    it('sums gradients through diamond-shaped graphs', function()
        local x = leaf({0.5, -1.0})
        local a = x * 2
        local b, c = a:exp(), a * a
        local loss3 = ((b + c) * a):sum()
        loss3:backward()
        -- d/dx [(e^(2x) + 4x^2) * 2x] = 2 e^(2x) (1 + 2x) + 24 x^2
        local exp = {}
        for i, v in ipairs({0.5, -1.0}) do
            exp[i] = 2 * math.exp(2 * v) * (1 + 2 * v) + 24 * v * v
        end
        H.assert_close(x.grad, exp, 1e-5, 1e-5)
    end)

    it('backpropagates through a 10,000-node chain without overflowing the stack', function()
        local x = leaf({1.0}, 'float64')
        local y = x
        for _ = 1, 10000 do y = y * 1.0001 end
        y:sum():backward()
        H.assert_close(x.grad, {1.0001 ^ 10000}, 1e-9)
        y = nil
        collectgarbage() -- freeing the long chain must not overflow either
    end)
end)

describe('graph bookkeeping', function()
    it('leaves have no grad_fn and are leaves; results have a grad_fn', function()
        local x = leaf({1, 2})
        assert.is_nil(x.grad_fn)
        assert.is_true(x:is_leaf())
        local y = x * 2
        assert.is_not_nil(y.grad_fn)
        assert.is_false(y:is_leaf())
        -- a tensor that does not require grad is a leaf too
        assert.is_true((ddpl.ones(2) * 2):is_leaf())
    end)

    it('non-leaf tensors have no .grad unless retain_grad was called', function()
        local x = leaf({1, 2})
        local a = x * 3
        local b = x * 4
        b:retain_grad()
        local loss4 = ((a + b) * 2):sum()
        loss4:backward()
        assert.is_nil(a.grad)
        H.assert_close(b.grad, {2, 2})
        H.assert_close(x.grad, {14, 14})
    end)

    it('detach shares values and stops gradients', function()
        local x = leaf({1, 2})
        local d = x:detach()
        assert.is_false(d.requires_grad)
        assert.is_nil(d.grad_fn)
        local loss5 = ((d * 2 + x) * 1):sum()
        loss5:backward()
        H.assert_close(x.grad, {1, 1})
    end)
end)

describe('.grad', function()
    it('can be cleared with nil and set to a tensor of the same shape and dtype', function()
        local x = leaf({1, 2})
        local l1 = (x * 2):sum()
        l1:backward()
        x.grad = nil
        assert.is_nil(x.grad)
        local l2 = (x * 3):sum()
        l2:backward()
        H.assert_close(x.grad, {3, 3})
        x.grad = ddpl.tensor({0.5, 0.5})
        local l3 = (x * 1):sum()
        l3:backward()
        H.assert_close(x.grad, {1.5, 1.5})
    end)

    it('refuses a gradient of the wrong shape or dtype', function()
        local x = leaf({1, 2})
        H.assert_error(function() x.grad = ddpl.zeros(3) end, 'shape')
        H.assert_error(function() x.grad = ddpl.zeros(2, {dtype = 'float64'}) end, 'dtype')
    end)

    it('has the dtype of its leaf when the graph mixes dtypes', function()
        local x = leaf({1, 2})
        local w = leaf({3, 4}, 'float64')
        local loss = (x * w):sum()
        assert.are.equal('float64', H.dtype_name(loss.dtype))
        loss:backward()
        assert.are.equal('float32', H.dtype_name(x.grad.dtype))
        H.assert_close(x.grad, {3, 4})
        H.assert_close(w.grad, {1, 2})
    end)
end)

describe('hooks', function()
    it('register_hook observes the gradient', function()
        local x = leaf({1, 2})
        local y = x * 3
        local seen
        y:register_hook(function(g) seen = H.values(g) end)
        y:sum():backward()
        assert.are.same({1, 1}, seen)
        H.assert_close(x.grad, {3, 3})
    end)

    it('register_hook can replace the gradient', function()
        local x = leaf({1, 2})
        local y = x * 3
        y:register_hook(function(g) return g * 10 end)
        y:sum():backward()
        H.assert_close(x.grad, {30, 30})
    end)

    it('a hook runs once, with the summed gradient of every use', function()
        local x = leaf({1, 2})
        local y = x * 2
        local calls, seen = 0, nil
        y:register_hook(function(g)
            calls = calls + 1
            seen = H.values(g)
        end)
        local loss = (y * 3 + y):sum()
        loss:backward()
        assert.are.equal(1, calls)
        assert.are.same({4, 4}, seen)
        H.assert_close(x.grad, {8, 8})
    end)

    it('a hook on a leaf changes what is accumulated', function()
        local x = leaf({1, 2})
        x:register_hook(function(g) return g + 1 end)
        local loss6 = (x * 2):sum()
        loss6:backward()
        H.assert_close(x.grad, {3, 3})
    end)

    it('an error in a hook reaches the caller of backward', function()
        local x = leaf({1, 2})
        x:register_hook(function() error('boom in hook') end)
        H.assert_error(function() (x * 2):sum():backward() end, 'boom in hook')
    end)
end)

describe('gradient mode', function()
    it('no_grad records nothing and returns the function results', function()
        local x = leaf({1, 2})
        local a, b = ddpl.no_grad(function(u, k)
            assert.is_false(ddpl.is_grad_enabled())
            return u * k, 'second'
        end, x, 2)
        assert.is_false(a.requires_grad)
        assert.is_nil(a.grad_fn)
        assert.are.equal('second', b)
        assert.is_true(ddpl.is_grad_enabled())
    end)

    it('restores the mode when the function raises', function()
        local ok, err = pcall(ddpl.no_grad, function() error('inside no_grad') end)
        assert.is_false(ok)
        assert.truthy(tostring(err):find('inside no_grad', 1, true))
        assert.is_true(ddpl.is_grad_enabled())
        ddpl.no_grad(function()
            local ok2 = pcall(ddpl.enable_grad, function() error('inside enable_grad') end)
            assert.is_false(ok2)
            assert.is_false(ddpl.is_grad_enabled())
        end)
        assert.is_true(ddpl.is_grad_enabled())
    end)

    it('enable_grad inside no_grad records again', function()
        local x = leaf({1, 2})
        local y = ddpl.no_grad(function()
            return ddpl.enable_grad(function()
                assert.is_true(ddpl.is_grad_enabled())
                return x * 2
            end)
        end)
        assert.is_true(y.requires_grad)
        y:sum():backward()
        H.assert_close(x.grad, {2, 2})
    end)
end)

describe('autograd.grad', function()
    it('returns gradients without touching .grad', function()
        local x, w = leaf({1, 2}), leaf({3, 4})
        local y = (x * w):sum()
        local g = ddpl.autograd.grad(y, {x, w})
        H.assert_close(g[1], {3, 4})
        H.assert_close(g[2], {1, 2})
        assert.is_nil(x.grad)
        assert.is_nil(w.grad)
    end)

    it('takes grad_outputs for non-scalar outputs', function()
        local x = leaf({1, 2})
        local y = x * x
        local g = ddpl.autograd.grad(y, {x}, {grad_outputs = ddpl.tensor({1.0, -1.0})})
        H.assert_close(g[1], {2, -4})
    end)

    it('raises for an input that does not require grad', function()
        local x = leaf({1, 2})
        local y = (x * 2):sum()
        H.assert_error(function() return ddpl.autograd.grad(y, {ddpl.ones(2)}) end, 'grad')
    end)
end)

describe('in-place operations and autograd', function()
    it('modifying a tensor saved for backward makes backward raise', function()
        local x = leaf({1, 2})
        local w = ddpl.tensor({3.0, 4.0})
        local y = (x * w):sum() -- saves w for the gradient of x
        w:add_(1)
        H.assert_error(function() y:backward() end, 'modified')
    end)

    it('an in-place op on a leaf that requires grad raises', function()
        local x = leaf({1, 2})
        H.assert_error(function() x:add_(1) end, 'leaf')
        H.assert_close(x, {1, 2}) -- and leaves it untouched
    end)

    it('in-place ops on a leaf are allowed under no_grad (the optimizer step)', function()
        local x = leaf({1, 2})
        ddpl.no_grad(function() x:add_(ddpl.tensor({1.0, 1.0}), -0.5) end)
        H.assert_close(x, {0.5, 1.5})
        assert.is_true(x.requires_grad)
        assert.is_true(x:is_leaf())
    end)
end)
