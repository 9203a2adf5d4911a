-- spec/nn/module_hooks_spec.lua: nn.Module forward hooks (register_forward_pre_hook,
-- register_forward_hook): arguments they see, replacement inputs and outputs, registration
-- order, removal through handles, modules with several results, hooks inside containers,
-- gradients through replaced values and the error for a non-function.
local H = require 'helpers'
local ddpl = H.ddpl
local nn = ddpl.nn

-- forward(x, y) = x * scale + y, returning one value
local Affine = nn.Module:extend('Affine')
function Affine:init(scale) self.scale = scale end
function Affine:forward(x, y) return x * self.scale + (y or 0) end

-- forward returns two values
local Split = nn.Module:extend('Split')
function Split:forward(x) return x + 1, x - 1 end

describe('nn.Module forward hooks', function()
    it('a pre-hook sees the module and the inputs, and may replace one input', function()
        local m = Affine(2)
        local seen_module, seen_n, seen_first
        m:register_forward_pre_hook(function(mod, inputs)
            seen_module, seen_n, seen_first = mod, inputs.n, inputs[1]
            return inputs[1] * 10 -- one value: the single argument
        end)
        local x = ddpl.tensor({1.0, 2.0})
        H.assert_close(m(x), {20, 40}, 0, 0)
        assert.are.equal(m, seen_module)
        assert.are.equal(1, seen_n)
        assert.are.equal(x, seen_first)
    end)

    it('a pre-hook may return the whole argument list as a plain table', function()
        local m = Affine(1)
        m:register_forward_pre_hook(function(_, inputs)
            return {inputs[1], ddpl.tensor({100.0, 100.0})}
        end)
        H.assert_close(m(ddpl.tensor({1.0, 2.0})), {101, 102}, 0, 0)
    end)

    it('a forward hook sees inputs and output and may replace the output', function()
        local m = Affine(3)
        local seen_in, seen_out
        m:register_forward_hook(function(_, inputs, output)
            seen_in, seen_out = inputs[1], output
            return output + 1
        end)
        local x = ddpl.tensor({1.0})
        local y = m(x)
        H.assert_close(y, {4}, 0, 0)
        assert.are.equal(x, seen_in)
        H.assert_close(seen_out, {3}, 0, 0)
    end)

    it('a hook returning nil changes nothing', function()
        local m = Affine(2)
        local calls = 0
        m:register_forward_pre_hook(function() calls = calls + 1 end)
        m:register_forward_hook(function() calls = calls + 1 end)
        H.assert_close(m(ddpl.tensor({1.0})), {2}, 0, 0)
        assert.are.equal(2, calls)
    end)

    it('runs hooks in registration order, each seeing the previous one\'s result', function()
        local m = Affine(1)
        local order = {}
        m:register_forward_pre_hook(function(_, i) order[#order + 1] = 'pre1'; return i[1] * 2 end)
        m:register_forward_pre_hook(function(_, i) order[#order + 1] = 'pre2'; return i[1] + 1 end)
        m:register_forward_hook(function(_, _, o) order[#order + 1] = 'post1'; return o * 10 end)
        m:register_forward_hook(function(_, _, o) order[#order + 1] = 'post2'; return o - 1 end)
        -- ((1 * 2) + 1) * 1 -> * 10 -> - 1
        H.assert_close(m(ddpl.tensor({1.0})), {29}, 0, 0)
        assert.are.same({'pre1', 'pre2', 'post1', 'post2'}, order)
    end)

    it('handle:remove() stops a hook (twice is harmless) and others keep running', function()
        local m = Affine(1)
        local h1 = m:register_forward_hook(function(_, _, o) return o + 1 end)
        local h2 = m:register_forward_hook(function(_, _, o) return o * 2 end)
        H.assert_close(m(ddpl.tensor({1.0})), {4}, 0, 0)
        h1:remove()
        H.assert_close(m(ddpl.tensor({1.0})), {2}, 0, 0)
        h1:remove()
        h2:remove()
        H.assert_close(m(ddpl.tensor({1.0})), {1}, 0, 0)
    end)

    it('a hook removing itself while running does not disturb this call', function()
        local m = Affine(1)
        local handle
        local count = 0
        handle = m:register_forward_hook(function(_, _, o)
            count = count + 1
            handle:remove()
            return o + 1
        end)
        m:register_forward_hook(function(_, _, o) return o * 3 end)
        H.assert_close(m(ddpl.tensor({1.0})), {6}, 0, 0)
        H.assert_close(m(ddpl.tensor({1.0})), {3}, 0, 0)
        assert.are.equal(1, count)
    end)

    it('with several results, the forward hook gets and returns them as a list', function()
        local m = Split()
        local got
        m:register_forward_hook(function(_, _, out)
            got = out
            return {out[2], out[1]}
        end)
        local a, b = m(ddpl.tensor({5.0}))
        assert.are.equal(2, got.n)
        H.assert_close(a, {4}, 0, 0)
        H.assert_close(b, {6}, 0, 0)
    end)

    it('hooks on a child run when a container calls it; hooks are per instance', function()
        local first, second = Affine(2), Affine(2)
        local net = nn.Sequential(first, second)
        local seen = {}
        first:register_forward_hook(function(_, _, o) seen[#seen + 1] = o:item(); return o * 0 end)
        H.assert_close(net(ddpl.tensor({1.0})), {0}, 0, 0)
        assert.are.same({2}, seen)
        H.assert_close(second(ddpl.tensor({1.0})), {2}, 0, 0) -- the other Affine is untouched
    end)

    it('gradients flow through replaced inputs and outputs', function()
        local m = nn.Linear(2, 1)
        m:register_forward_pre_hook(function(_, i) return i[1] * 2 end)
        m:register_forward_hook(function(_, _, o) return o * 3 end)
        local x = ddpl.tensor({{1.0, -1.0}}, {requires_grad = true})
        m(x):sum():backward()
        -- d/dx of 3 * (2x W^T + b) = 6 W
        H.assert_close(x.grad, (m.weight:detach() * 6):reshape(1, 2), 1e-6, 1e-6)
    end)

    it('refuses a hook that is not a function', function()
        local m = Affine(1)
        H.assert_error(function() m:register_forward_hook(42) end,
                       'register_forward_hook: expected a function, got number')
        H.assert_error(function() m:register_forward_pre_hook('x') end,
                       'register_forward_pre_hook: expected a function, got string')
    end)
end)
