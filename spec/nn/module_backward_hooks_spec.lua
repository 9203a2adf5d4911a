-- spec/nn/module_backward_hooks_spec.lua: nn.Module's full backward hooks
-- (register_full_backward_hook, register_full_backward_pre_hook; lua/ddplua/nn/module_hooks.lua)
-- against PyTorch (spec/fixtures/module_hooks.lua, tools/gen_module_hook_fixtures.py): what the
-- hook sees, what a replacement grad_input does, and the rules PyTorch 1.13 cannot show (the
-- pre hook is PyTorch 2's), removal, containers, errors.
local H = require 'helpers'
local ddpl = H.ddpl
local nn = ddpl.nn

-- forward(x, y) = (x * y, x + y): two arguments, two results (the fixtures' module)
local Two = nn.Module:extend('TwoResults')
function Two:forward(x, y) return x * y, x + y end

-- Registers a hook on m recording grad_input and grad_output; with scale it returns
-- grad_input with entry 1 scaled. Returns the record.
local function recorder(m, scale)
    local seen = {}
    m:register_full_backward_hook(function(_, gi, go)
        seen.gi, seen.go, seen.calls = gi, go, (seen.calls or 0) + 1
        if scale then
            local r = {n = gi.n}
            for i = 1, gi.n do r[i] = gi[i] end
            r[1] = gi[1] * scale
            return r
        end
    end)
    return seen
end

-- got (a list of n tensors or nils) against a case's outputs, nil where opts.none says PyTorch
-- gave None
local function check_outputs(case, got)
    local none = {}
    for _, k in ipairs(case.opts.none) do none[k] = true end
    for k, want in ipairs(case.outputs) do
        local what = ('%s output %d'):format(case.name, k)
        if none[k] then
            assert(got[k] == nil, what .. ': expected nil (PyTorch: None)')
        else
            H.assert_close(got[k], want, 1e-5, 1e-6, what)
        end
    end
end

local runners = {
    two = function(case)
        local ins = H.inputs(case)
        local x, y, w1, w2 = ins[1], ins[2], ins[3], ins[4]
        x.requires_grad = case.opts.x_grad
        y.requires_grad = true
        local m = Two()
        local seen = recorder(m, case.opts.scale)
        local p, s = m(x, y)
        local ws = {w1, w2}
        local loss
        for _, u in ipairs(case.opts.used) do
            local term = ((u == 0 and p or s) * ws[u + 1]):sum()
            loss = loss and loss + term or term
        end
        loss:backward()
        assert.are.equal(1, seen.calls)
        assert.are.equal(2, seen.gi.n)
        assert.are.equal(2, seen.go.n)
        return {seen.gi[1], seen.gi[2], seen.go[1], seen.go[2], x.grad, y.grad}
    end,
    linear_relu = function(case)
        local ins = H.inputs(case)
        local x, w, b, up = ins[1], ins[2], ins[3], ins[4]
        x.requires_grad = case.opts.x_grad
        local lin = nn.Linear(3, 2)
        ddpl.no_grad(function()
            lin.weight:copy_(w)
            lin.bias:copy_(b)
        end)
        local model = nn.Sequential(lin, nn.ReLU())
        local seen = recorder(lin, case.opts.scale);
        (model(x) * up):sum():backward()
        assert.are.equal(1, seen.calls)
        return {seen.gi[1], seen.go[1], x.grad, lin.weight.grad, lin.bias.grad}
    end,
}

describe('nn.Module full backward hooks', function()
    for _, case in ipairs(H.fixture('module_hooks')) do
        it('match PyTorch: ' .. case.name, function()
            check_outputs(case, runners[case.op](case))
        end)
    end

    it('pass nil for an argument that is not a tensor, and count it', function()
        local M = nn.Module:extend('ScaleBy')
        function M:forward(x, k) return x * k end
        local m = M()
        local seen = recorder(m)
        local x = ddpl.tensor({1.0, 2.0}, {requires_grad = true})
        m(x, 3):sum():backward()
        assert.are.equal(2, seen.gi.n)
        assert.is_nil(seen.gi[2])
        H.assert_close(seen.gi[1], {3, 3}, 0, 0)
        H.assert_close(seen.go[1], {1, 1}, 0, 0)
    end)

    it('a pre hook may replace grad_output; the full hook sees the replacement', function()
        local m = nn.Linear(2, 2, {bias = false})
        local order = {}
        m:register_full_backward_pre_hook(function(_, go)
            order[#order + 1] = 'pre'
            assert.are.equal(1, go.n)
            return {go[1] * 3}
        end)
        local seen_go
        m:register_full_backward_hook(function(_, _, go)
            order[#order + 1] = 'full'
            seen_go = go[1]
        end)
        local x = ddpl.tensor({{1.0, 2.0}}, {requires_grad = true})
        m(x):sum():backward()
        assert.are.same({'pre', 'full'}, order)
        H.assert_close(seen_go, {{3, 3}}, 0, 0)
        -- everything below the module sees the tripled gradient: W^T (3, 3)
        local wsum = m.weight:sum(0)
        H.assert_close(x.grad, (wsum * 3):view(1, 2), 1e-6, 1e-6)
        H.assert_close(m.weight.grad, {{3, 6}, {3, 6}}, 1e-6, 1e-6)
    end)

    it('run hooks in registration order, each seeing the previous replacement', function()
        local m = nn.Identity()
        local seen = {}
        m:register_full_backward_hook(function(_, gi) seen[1] = gi[1]:clone(); return {gi[1] * 2} end)
        m:register_full_backward_hook(function(_, gi) seen[2] = gi[1]:clone(); return {gi[1] + 1} end)
        local x = ddpl.tensor({1.0, 1.0}, {requires_grad = true})
        m(x * 1):sum():backward()
        H.assert_close(seen[1], {1, 1}, 0, 0)
        H.assert_close(seen[2], {2, 2}, 0, 0)
        H.assert_close(x.grad, {3, 3}, 0, 0)
    end)

    -- as PyTorch: a hook runs once its module's grad_input exists, which is the inner module's
    -- first (the outer module's inputs are further down the graph)
    it('run the inner module before the outer one, and stop after handle:remove()', function()
        local inner = nn.Linear(2, 2)
        local outer = nn.Sequential(inner, nn.Tanh())
        local order = {}
        local h1 = inner:register_full_backward_hook(function() order[#order + 1] = 'inner' end)
        outer:register_full_backward_hook(function() order[#order + 1] = 'outer' end)
        local x = ddpl.randn(3, 2):requires_grad_()
        outer(x):sum():backward()
        assert.are.same({'inner', 'outer'}, order)
        h1:remove()
        h1:remove() -- twice: nothing
        order = {}
        outer(x):sum():backward()
        assert.are.same({'outer'}, order)
    end)

    it('call the hook with grad_input all nil when no argument requires grad', function()
        local m = nn.Linear(2, 1)
        local seen = recorder(m)
        m(ddpl.ones(1, 2)):sum():backward()
        assert.are.equal(1, seen.calls)
        assert.are.equal(1, seen.gi.n)
        assert.is_nil(seen.gi[1])
        H.assert_close(seen.go[1], {{1}}, 0, 0)
        -- and a replacement is refused then
        local m2 = nn.Linear(2, 1)
        m2:register_full_backward_hook(function() return {ddpl.ones(1, 2)} end)
        H.assert_error(function() m2(ddpl.ones(1, 2)):sum():backward() end,
                       'register_full_backward_hook', 'must return nil')
    end)

    it('refuse a replacement with the wrong number of gradients, naming the hook', function()
        local m = Two()
        m:register_full_backward_hook(function(_, gi) return {gi[1]} end)
        local x = ddpl.ones(2):requires_grad_()
        local y = ddpl.ones(2):requires_grad_()
        local p, s = m(x, y)
        H.assert_error(function() (p + s):sum():backward() end,
                       'register_full_backward_hook', 'returned 1 gradients, expected 2')
        local m2 = nn.Identity()
        m2:register_full_backward_pre_hook(function() return {ddpl.ones(2), ddpl.ones(2)} end)
        H.assert_error(function() m2(x * 1):sum():backward() end,
                       'register_full_backward_pre_hook', 'returned 2 gradients, expected 1')
    end)

    it('do nothing under no_grad, and leave the module callable as before', function()
        local m = nn.Linear(2, 2)
        local seen = recorder(m)
        local y = ddpl.no_grad(function() return m(ddpl.ones(1, 2)) end)
        assert.is_false(y.requires_grad)
        assert.is_nil(seen.calls)
        H.assert_error(function() m:register_full_backward_hook(42) end,
                       'register_full_backward_hook', 'expected a function')
    end)

    it('wrap only the top-level tensor results (a nested state table is passed through)',
       function()
        local lstm = nn.LSTM(3, 4)
        local seen = recorder(lstm)
        local x = ddpl.randn(5, 1, 3):requires_grad_()
        local out, state = lstm(x)
        assert.are.equal('table', type(state))
        out:sum():backward()
        assert.are.equal(1, seen.calls)
        assert.are.equal(2, seen.go.n) -- (output, {h, c}): the table gets nil
        H.assert_close(seen.go[1], ddpl.ones(5, 1, 4), 0, 0)
        assert.is_nil(seen.go[2])
        H.assert_close(seen.gi[1], x.grad, 0, 0)
    end)
end)
