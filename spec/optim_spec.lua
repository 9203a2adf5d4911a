-- spec/optim_spec.lua: optimizers and learning-rate schedulers against PyTorch 1.13
-- (spec/fixtures/optim.lua, written by tools/gen_optim_fixtures.py), plus state_dict round
-- trips, parameter groups, zero_grad and argument errors.
local H = require 'helpers'
local ddpl = H.ddpl
local optim = ddpl.optim
local fx = H.fixture('optim')

local function close_tensor(t, e, what)
    local rtol, atol = H.tolerance(e.dtype)
    if e.dtype == 'float32' then rtol, atol = 2e-5, 2e-6 end
    H.assert_values(H.values(t), e.values, e.shape, rtol, atol, what)
end

-- Fresh parameters (leaves requiring grad) for a case.
local function make_params(case)
    local ps = {}
    for i, e in ipairs(case.params) do ps[i] = H.tensor(e, {requires_grad = true}) end
    return ps
end

local function make_optimizer(case, ps)
    if case.group_opts then
        local groups = {}
        for i, o in ipairs(case.group_opts) do
            local g = {params = {ps[i]}}
            for k, v in pairs(o) do g[k] = v end
            groups[i] = g
        end
        return optim[case.optimizer](groups, case.opts)
    end
    return optim[case.optimizer](ps, case.opts)
end

-- Sets the gradients of step s (1-based) and steps.
local function run_step(opt, ps, case, s)
    for i, p in ipairs(ps) do
        local g = case.grads[s][i]
        p.grad = g and H.tensor(g) or nil
    end
    opt:step()
end

describe('optimizers match PyTorch over 5 steps', function()
    for _, case in ipairs(fx.optimizers) do
        it(case.name, function()
            local ps = make_params(case)
            local opt = make_optimizer(case, ps)
            for s = 1, #case.grads do
                run_step(opt, ps, case, s)
                for i, p in ipairs(ps) do
                    close_tensor(p, case.expected[s][i],
                                 string.format('%s step %d param %d', case.name, s, i))
                end
            end
        end)
    end
end)

describe('state_dict', function()
    for _, name in ipairs({'SGD/nesterov', 'Adam/options', 'AdamW/groups'}) do
        it(name .. ': a new optimizer loaded after 2 steps continues identically', function()
            local case
            for _, c in ipairs(fx.optimizers) do if c.name == name then case = c end end
            local ps = make_params(case)
            local opt = make_optimizer(case, ps)
            run_step(opt, ps, case, 1)
            run_step(opt, ps, case, 2)
            local sd = opt:state_dict()
            assert.are.equal(#opt.param_groups, #sd.param_groups)
            -- PyTorch's layout: 0-based indices, state keyed by them
            local n = 0
            for _, g in ipairs(sd.param_groups) do
                for _, idx in ipairs(g.params) do
                    assert.are.equal(n, idx)
                    n = n + 1
                end
            end
            assert.is_not_nil(sd.state[0])
            -- a second optimizer over copies of the parameters, with default options
            local ps2 = {}
            for i, p in ipairs(ps) do
                ps2[i] = p:detach():clone()
                ps2[i].requires_grad = true
            end
            local groups = {{params = ps2}}
            if case.group_opts then
                groups = {}
                for i, p in ipairs(ps2) do groups[i] = {params = {p}} end
            end
            local opt2 = optim[case.optimizer](groups, {lr = 123})
            opt2:load_state_dict(sd)
            assert.are.equal(opt.param_groups[#groups].lr, opt2.param_groups[#groups].lr)
            for s = 3, #case.grads do
                run_step(opt2, ps2, case, s)
                for i, p in ipairs(ps2) do
                    close_tensor(p, case.expected[s][i], string.format('step %d param %d', s, i))
                end
            end
        end)
    end

    it('load_state_dict copies the buffers and checks the groups', function()
        local p = ddpl.zeros(3, {requires_grad = true})
        local opt = optim.SGD({p}, {lr = 0.1, momentum = 0.9})
        p.grad = ddpl.ones(3)
        opt:step()
        local sd = opt:state_dict()
        local q = ddpl.zeros(3, {requires_grad = true})
        local opt2 = optim.SGD({q}, {lr = 0.1, momentum = 0.9})
        opt2:load_state_dict(sd)
        assert.are_not.equal(sd.state[0].momentum_buffer, opt2.state[q].momentum_buffer)
        local r = ddpl.zeros(2, {requires_grad = true})
        local opt3 = optim.SGD({{params = {r}}, {params = {q}}}, {lr = 0.1})
        H.assert_error(function() opt3:load_state_dict(sd) end, 'parameter groups')
    end)
end)

describe('param_groups', function()
    it('changing group.lr affects the next step', function()
        local p = ddpl.tensor({1.0, 2.0}, {requires_grad = true})
        local opt = optim.SGD({p}, {lr = 0.1})
        p.grad = ddpl.tensor({1.0, 1.0})
        opt:step()
        H.assert_values(H.values(p), {0.9, 1.9}, {2}, 1e-6, 1e-6)
        opt.param_groups[1].lr = 1.0
        opt:step()
        H.assert_values(H.values(p), {-0.1, 0.9}, {2}, 1e-6, 1e-6)
    end)

    it('groups inherit the defaults and keep their own options', function()
        local a, b = ddpl.zeros(2, {requires_grad = true}), ddpl.zeros(2, {requires_grad = true})
        local opt = optim.Adam({{params = {a}}, {params = {b}, lr = 0.5}}, {lr = 0.01})
        assert.are.equal(0.01, opt.param_groups[1].lr)
        assert.are.equal(0.5, opt.param_groups[2].lr)
        assert.are.equal(0.9, opt.param_groups[2].betas[1])
        opt:add_param_group({params = {ddpl.zeros(1, {requires_grad = true})}, eps = 1e-3})
        assert.are.equal(3, #opt.param_groups)
        assert.are.equal(1e-3, opt.param_groups[3].eps)
    end)
end)

describe('zero_grad and step', function()
    it('zero_grad sets gradients to nil, or zeroes them', function()
        local p = ddpl.ones(2, {requires_grad = true})
        local opt = optim.SGD({p}, {lr = 0.1})
        p.grad = ddpl.ones(2)
        opt:zero_grad()
        assert.is_nil(p.grad)
        p.grad = ddpl.ones(2)
        opt:zero_grad(false)
        H.assert_values(H.values(p.grad), {0, 0}, {2}, 0, 0)
        p.grad = ddpl.ones(2)
        opt:zero_grad({set_to_none = false}) -- the options-table form, as Module:zero_grad
        H.assert_values(H.values(p.grad), {0, 0}, {2}, 0, 0)
        opt:zero_grad({})
        assert.is_nil(p.grad)
        assert.has_error(function() opt:zero_grad('no') end,
            'zero_grad: expected a boolean or {set_to_none = boolean}, got string')
    end)

    it('step with a closure returns the loss and uses its gradients', function()
        local p = ddpl.tensor({3.0}, {requires_grad = true})
        local opt = optim.SGD({p}, {lr = 0.25})
        local loss = opt:step(function()
            opt:zero_grad()
            local l = (p * p):sum()
            l:backward()
            return l
        end)
        assert.are.equal(9, loss:item())
        H.assert_values(H.values(p), {1.5}, {1}, 1e-6, 0)
    end)

    it('steps bump the parameter version so saved tensors are invalidated', function()
        local p = ddpl.tensor({1.0, 2.0}, {requires_grad = true})
        local y = (p * p):sum()      -- saves p
        local opt = optim.SGD({p}, {lr = 0.1})
        p.grad = ddpl.ones(2)
        opt:step()
        H.assert_error(function() y:backward() end, 'modified')
    end)

    it('large tensors (threaded path) get the same update as small ones', function()
        local case
        for _, c in ipairs(fx.optimizers) do if c.name == 'Adam/options' then case = c end end
        local reps = 4000 -- 12 * 4000 elements, above the kernels' threading grain
        local function tile(e)
            local t = H.tensor(e):reshape({1, -1})
            return t:expand(reps, t:size(1)):contiguous():reshape({-1})
        end
        local p = tile(case.params[1])
        p.requires_grad = true
        local opt = optim.Adam({p}, case.opts)
        for s = 1, 3 do
            p.grad = tile(case.grads[s][1])
            opt:step()
        end
        local got = H.values(p)
        local want = case.expected[3][1].values
        for r = 0, reps - 1, 997 do
            local slice = {}
            for k = 1, #want do slice[k] = got[r * #want + k] end
            H.assert_values(slice, want, {#want}, 2e-5, 2e-6, 'repeat ' .. r)
        end
    end)
end)

describe('optimizer errors', function()
    local p = ddpl.zeros(2, {requires_grad = true})
    it('reject bad options with the optimizer name', function()
        H.assert_error(function() optim.SGD({p}, {}) end, 'SGD: option lr is required')
        H.assert_error(function() optim.SGD({p}, {lr = -1}) end, 'SGD: invalid lr value')
        H.assert_error(function() optim.SGD({p}, {lr = 0.1, nesterov = true}) end, 'Nesterov')
        H.assert_error(function() optim.Adam({p}, {betas = {1.5, 0.9}}) end, 'Adam: invalid betas')
        H.assert_error(function() optim.AdamW({p}, {lr = 0.1, foo = 1}) end,
                       "AdamW: unknown option 'foo'")
        H.assert_error(function() optim.Adam({}, {}) end, 'empty parameter list')
        H.assert_error(function() optim.SGD({p, 3}, {lr = 1}) end, 'not a tensor')
        H.assert_error(function() optim.SGD({{params = {p}}, {params = {p}}}, {lr = 1}) end,
                       'more than one parameter group')
    end)
    it('the native step validates every tensor before writing any', function()
        local a = ddpl.tensor({1.0, 2.0})
        local b = ddpl.tensor({3.0, 4.0})
        local hyper = {lr = 1, momentum = 0, dampening = 0, weight_decay = 0}
        H.assert_error(function()
            ddpl._fused_sgd_({a, b}, {ddpl.ones(2), ddpl.ones(3)}, {}, {false, false}, hyper)
        end, 'SGD: parameter 1 has shape [2] but its gradient has shape [3]')
        H.assert_error(function()
            ddpl._fused_sgd_({a}, {ddpl.ones(2, {dtype = 'float64'})}, {}, {false}, hyper)
        end, 'float64')
        H.assert_values(H.values(a), {1, 2}, {2}, 0, 0)
        H.assert_values(H.values(b), {3, 4}, {2}, 0, 0)
    end)
end)

describe('lr schedulers match PyTorch', function()
    local makers = {
        StepLR = function(opt, c) return optim.lr_scheduler.StepLR(opt, c.opts) end,
        CosineAnnealingLR = function(opt, c)
            return optim.lr_scheduler.CosineAnnealingLR(opt, c.opts)
        end,
        LinearLR = function(opt, c) return optim.lr_scheduler.LinearLR(opt, c.opts) end,
        LambdaLR = function(opt)
            return optim.lr_scheduler.LambdaLR(opt, function(e) return 0.95 ^ e end)
        end,
    }
    for _, case in ipairs(fx.schedulers) do
        it(case.name, function()
            local groups = {}
            for i, lr in ipairs(case.lrs) do
                groups[i] = {params = {ddpl.zeros(1, {requires_grad = true})}, lr = lr}
            end
            local opt = optim.SGD(groups, {lr = case.lrs[1]})
            local sched = makers[case.scheduler](opt, case)
            for s = 0, case.steps do
                if s > 0 then sched:step() end
                local got = sched:get_last_lr()
                H.assert_values(got, case.expected[s + 1], nil, 1e-12, 1e-15,
                                'step ' .. s)
                for i, g in ipairs(opt.param_groups) do assert.are.equal(got[i], g.lr) end
            end
        end)
    end

    it('state_dict round trip continues the schedule; LambdaLR takes one function per group',
       function()
        local function setup()
            local opt = optim.SGD({{params = {ddpl.zeros(1, {requires_grad = true})}, lr = 1},
                                   {params = {ddpl.zeros(1, {requires_grad = true})}, lr = 2}},
                                  {lr = 1})
            return opt, optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = 6, eta_min = 0.1})
        end
        local opt, sched = setup()
        for _ = 1, 3 do sched:step() end
        local sd = sched:state_dict()
        assert.are.equal(3, sd.last_epoch)
        local opt2, sched2 = setup()
        for i, g in ipairs(opt.param_groups) do opt2.param_groups[i].lr = g.lr end
        sched2:load_state_dict(sd)
        for _ = 1, 4 do
            sched:step()
            sched2:step()
            assert.are.same(sched:get_last_lr(), sched2:get_last_lr())
        end
        local lam = optim.lr_scheduler.LambdaLR(opt, {function(e) return e end,
                                                      function(e) return 2 * e end})
        lam:step()
        assert.are.same({1, 4}, lam:get_last_lr())
    end)

    it('reject bad arguments', function()
        local opt = optim.SGD({ddpl.zeros(1, {requires_grad = true})}, {lr = 0.1})
        H.assert_error(function() optim.lr_scheduler.StepLR(opt, {}) end, 'StepLR: step_size')
        H.assert_error(function() optim.lr_scheduler.LinearLR(opt, {start_factor = 2}) end,
                       'LinearLR: start_factor')
        H.assert_error(function() optim.lr_scheduler.LambdaLR(opt, 3) end, 'LambdaLR')
    end)
end)
