-- spec/optim/optim_spec.lua: optimizers (SGD, Adam, AdamW with and without amsgrad, RMSprop,
-- Adagrad) against PyTorch 1.13 (spec/fixtures/optim.lua, written by
-- tools/gen_optim_fixtures.py), plus state_dict keys and round trips, parameter groups,
-- zero_grad and argument errors. Schedulers: lr_scheduler_spec.lua; GradScaler:
-- grad_scaler_spec.lua.
local H = require 'helpers'
local ddpl = H.ddpl
local optim = ddpl.optim
local fx = H.fixture('optim')

local function close_tensor(t, e, what)
    local rtol, atol = H.tolerance(e.dtype)
    if e.dtype == 'float32' then rtol, atol = 1e-6, 1e-6 end
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
    for _, name in ipairs({'SGD/nesterov', 'Adam/options', 'AdamW/groups', 'Adam/amsgrad',
                           'AdamW/amsgrad/f64', 'RMSprop/all', 'RMSprop/groups',
                           'Adagrad/weight_decay', 'Adagrad/f64'}) do
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

    it('state uses PyTorch\'s keys for each optimizer and option', function()
        local function keys_after_step(cls, opts)
            local p = ddpl.zeros(3, {requires_grad = true})
            local opt = optim[cls]({p}, opts)
            p.grad = ddpl.ones(3)
            opt:step()
            local ks = {}
            for k in pairs(opt:state_dict().state[0]) do ks[#ks + 1] = k end
            table.sort(ks)
            return table.concat(ks, ' ')
        end
        assert.are.equal('exp_avg exp_avg_sq step', keys_after_step('Adam', {}))
        assert.are.equal('exp_avg exp_avg_sq max_exp_avg_sq step',
                         keys_after_step('Adam', {amsgrad = true}))
        assert.are.equal('exp_avg exp_avg_sq max_exp_avg_sq step',
                         keys_after_step('AdamW', {amsgrad = true}))
        assert.are.equal('square_avg step', keys_after_step('RMSprop', {}))
        assert.are.equal('momentum_buffer square_avg step',
                         keys_after_step('RMSprop', {momentum = 0.9}))
        assert.are.equal('grad_avg momentum_buffer square_avg step',
                         keys_after_step('RMSprop', {momentum = 0.9, centered = true}))
        assert.are.equal('step sum', keys_after_step('Adagrad', {}))
    end)

    it('Adagrad has its state from construction, as PyTorch', function()
        local a = ddpl.zeros(2, {requires_grad = true})
        local b = ddpl.zeros(3, {dtype = 'float64', requires_grad = true})
        local opt = optim.Adagrad({{params = {a}}, {params = {b}, initial_accumulator_value = 0.5}},
                                  {initial_accumulator_value = 0.25})
        local sd = opt:state_dict()
        assert.are.equal(0, sd.state[0].step)
        H.assert_values(H.values(sd.state[0].sum), {0.25, 0.25}, {2}, 0, 0)
        H.assert_values(H.values(sd.state[1].sum), {0.5, 0.5, 0.5}, {3}, 0, 0)
        assert.are.equal('float64', H.dtype_name(sd.state[1].sum.dtype))
        -- a group added later gets its state too (PyTorch 1.13 would fail at its first step)
        local c = ddpl.zeros(1, {requires_grad = true})
        opt:add_param_group({params = {c}, initial_accumulator_value = 2})
        c.grad = ddpl.ones(1)
        opt:step()
        assert.are.equal(1, opt.state[c].step)
        H.assert_values(H.values(opt.state[c].sum), {3}, {1}, 0, 0)
    end)

    it('amsgrad switched on after some steps starts max_exp_avg_sq from zeros', function()
        local p = ddpl.zeros(2, {requires_grad = true})
        local opt = optim.Adam({p}, {lr = 0.1})
        p.grad = ddpl.ones(2)
        opt:step()
        opt.param_groups[1].amsgrad = true
        p.grad = ddpl.ones(2)
        opt:step()
        -- max(0, v) = v after the step: v of two steps of gradient 1
        local v = H.values(opt.state[p].exp_avg_sq)
        H.assert_values(H.values(opt.state[p].max_exp_avg_sq), v, {2}, 0, 0)
    end)

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

    for _, name in ipairs({'Adam/options', 'Adam/amsgrad', 'RMSprop/all', 'Adagrad/weight_decay'}) do
        it(name .. ': large tensors (threaded path) get the same update as small ones', function()
            local case
            for _, c in ipairs(fx.optimizers) do if c.name == name then case = c end end
            local reps = 4000 -- 12 * 4000 elements, above the kernels' threading grain
            local function tile(e)
                local t = H.tensor(e):reshape({1, -1})
                return t:expand(reps, t:size(1)):contiguous():reshape({-1})
            end
            local p = tile(case.params[1])
            p.requires_grad = true
            local opt = optim[case.optimizer]({p}, case.opts)
            for s = 1, 3 do
                p.grad = tile(case.grads[s][1])
                opt:step()
            end
            local got = H.values(p)
            local want = case.expected[3][1].values
            for r = 0, reps - 1, 997 do
                local slice = {}
                for k = 1, #want do slice[k] = got[r * #want + k] end
                H.assert_values(slice, want, {#want}, 1e-6, 1e-6, 'repeat ' .. r)
            end
        end)
    end
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
    it('reject bad options of RMSprop, Adagrad and amsgrad as PyTorch does', function()
        local cases = {
            {'RMSprop', {lr = -0.1}, 'RMSprop: invalid lr value: -0.1'},
            {'RMSprop', {eps = -1}, 'RMSprop: invalid eps value: -1'},
            {'RMSprop', {momentum = -0.5}, 'RMSprop: invalid momentum value: -0.5'},
            {'RMSprop', {weight_decay = -1}, 'RMSprop: invalid weight_decay value: -1'},
            {'RMSprop', {alpha = -0.9}, 'RMSprop: invalid alpha value: -0.9'},
            {'RMSprop', {centered = 1}, 'RMSprop: invalid centered value: expected a boolean'},
            {'RMSprop', {betas = {0.9, 0.99}}, "RMSprop: unknown option 'betas'"},
            {'Adagrad', {lr = -1}, 'Adagrad: invalid lr value: -1'},
            {'Adagrad', {lr_decay = -1}, 'Adagrad: invalid lr_decay value: -1'},
            {'Adagrad', {weight_decay = -1}, 'Adagrad: invalid weight_decay value: -1'},
            {'Adagrad', {initial_accumulator_value = -1},
             'Adagrad: invalid initial_accumulator_value value: -1'},
            {'Adagrad', {eps = -1}, 'Adagrad: invalid eps value: -1'},
            {'Adam', {amsgrad = 'yes'}, 'Adam: invalid amsgrad value: expected a boolean'},
            {'AdamW', {amsgrad = 1}, 'AdamW: invalid amsgrad value: expected a boolean'},
        }
        for _, c in ipairs(cases) do
            H.assert_error(function() optim[c[1]]({p}, c[2]) end, c[3])
        end
        H.assert_error(function()
            optim.RMSprop({{params = {p}, lr = -2}}, {})
        end, 'RMSprop: invalid lr value: -2')
    end)
    it('the native RMSprop, Adagrad and amsgrad steps validate every tensor first', function()
        local a = ddpl.tensor({1.0, 2.0})
        local b = ddpl.tensor({3.0, 4.0})
        local z = function(n) return ddpl.zeros(n) end
        local rms = {lr = 1, alpha = 0.9, eps = 1e-8, weight_decay = 0, momentum = 0.5,
            centered = true}
        H.assert_error(function()
            ddpl._fused_rmsprop_({a, b}, {z(2), z(2)}, {z(2), z(2)}, {z(2), z(3)}, {z(2), z(2)},
                                 rms)
        end, 'RMSprop: parameter 1 has shape [2] but its momentum_buffer has shape [3]')
        H.assert_error(function()
            ddpl._fused_rmsprop_({a, b}, {z(2), z(2)}, {z(2), z(2)}, {z(2), z(2)}, {z(2)}, rms)
        end, 'RMSprop: 2 parameters but 1 grad_avg buffers')
        local ada = {lr = 1, lr_decay = 0, weight_decay = 0, eps = 1e-10}
        H.assert_error(function()
            ddpl._fused_adagrad_({a, b}, {z(2), z(2)}, {z(2), ddpl.zeros(2, {dtype = 'float64'})},
                                 {1, 1}, ada)
        end, 'Adagrad: parameter 1 is float32 but its sum is float64')
        H.assert_error(function()
            ddpl._fused_adagrad_({a}, {z(2)}, {z(2)}, {0}, ada)
        end, 'Adagrad: parameter 0 has step 0; steps count from 1')
        local adam = {lr = 1, beta1 = 0.9, beta2 = 0.99, eps = 1e-8, weight_decay = 0,
            amsgrad = true}
        H.assert_error(function()
            ddpl._fused_adam_({a, b}, {z(2), z(2)}, {z(2), z(2)}, {z(2), z(2)}, {1, 1}, adam,
                              {z(2), z(5)})
        end, 'Adam: parameter 1 has shape [2] but its max_exp_avg_sq has shape [5]')
        H.assert_error(function()
            ddpl._fused_adam_({a}, {z(2)}, {z(2)}, {z(2)}, {1}, adam)
        end, 'Adam')
        H.assert_values(H.values(a), {1, 2}, {2}, 0, 0)
        H.assert_values(H.values(b), {3, 4}, {2}, 0, 0)
    end)
    it('16-bit parameters step in float and round back', function()
        -- bfloat16 keeps 8 bits of mantissa: compare against the float32 trajectory rounded
        for _, cls in ipairs({'RMSprop', 'Adagrad'}) do
            local p32 = ddpl.tensor({0.5, -1.0, 2.0}, {requires_grad = true})
            local p16 = ddpl.tensor({0.5, -1.0, 2.0}, {dtype = 'bfloat16', requires_grad = true})
            local o32 = optim[cls]({p32}, {lr = 0.01})
            local o16 = optim[cls]({p16}, {lr = 0.01})
            p32.grad = ddpl.tensor({0.25, 1.0, -2.0})
            p16.grad = ddpl.tensor({0.25, 1.0, -2.0}, {dtype = 'bfloat16'})
            o32:step()
            o16:step()
            H.assert_values(H.values(p16:float()), H.values(p32), {3}, 1e-2, 1e-2, cls)
            assert.are.equal('bfloat16', H.dtype_name(p16.dtype))
        end
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
