-- spec/optim/grad_scaler_spec.lua: ddpl.amp.GradScaler against PyTorch 1.13's GradScaler (the
-- grad_scaler cases of spec/fixtures/optim.lua, written by tools/gen_optim_fixtures.py: the
-- scale, growth tracker, skipped steps and parameters after each step), its state_dict, the
-- native unscale pass on a large tensor, enabled = false, and its errors.
local H = require 'helpers'
local ddpl = H.ddpl
local optim = ddpl.optim
local amp = ddpl.amp
local fx = H.fixture('optim')

local function params_of(case)
    local ps = {}
    for i, e in ipairs(case.params) do ps[i] = H.tensor(e, {requires_grad = true}) end
    return ps
end

-- One iteration k (1-based) of the generator's loop; returns whether params stayed the same.
local function iterate(case, scaler, opt, ps, k)
    opt:zero_grad()
    local loss
    for i, p in ipairs(ps) do
        local term = (p * H.tensor(case.coefs[k][i])):sum()
        loss = loss and loss + term or term
    end
    scaler:scale(loss):backward()
    if case.unscale_first then
        scaler:unscale_(opt)
        for i, p in ipairs(ps) do
            local want = case.unscaled[k][i]
            H.assert_values(H.values(p.grad), want.values, want.shape, 1e-6, 1e-6,
                            'unscaled gradient ' .. i .. ' at step ' .. k)
        end
    end
    local before = {}
    for i, p in ipairs(ps) do before[i] = H.values(p) end
    scaler:step(opt)
    scaler:update()
    local same = true
    for i, p in ipairs(ps) do
        local now = H.values(p)
        for j = 1, #now do if now[j] ~= before[i][j] then same = false end end
    end
    return same
end

local function check_step(case, scaler, ps, k, same)
    assert.are.equal(case.skipped[k], same, 'skipped at step ' .. k)
    assert.are.equal(case.scales[k], scaler:get_scale(), 'scale after step ' .. k)
    assert.are.equal(case.trackers[k], scaler:state_dict()._growth_tracker,
                     'growth tracker after step ' .. k)
    for i, p in ipairs(ps) do
        local want = case.expected[k][i]
        H.assert_values(H.values(p), want.values, want.shape, 1e-6, 1e-6,
                        'param ' .. i .. ' after step ' .. k)
    end
end

describe('GradScaler matches PyTorch', function()
    for _, case in ipairs(fx.grad_scaler) do
        it(case.name, function()
            local ps = params_of(case)
            local opt = optim[case.optimizer](ps, case.optimizer_opts)
            local scaler = amp.GradScaler(case.opts)
            assert.are.equal(case.opts.init_scale, scaler:get_scale())
            for k = 1, #case.coefs do
                check_step(case, scaler, ps, k, iterate(case, scaler, opt, ps, k))
            end
        end)

        it(case.name .. ': restored from state_dict, continues identically', function()
            local ps = params_of(case)
            local opt = optim[case.optimizer](ps, case.optimizer_opts)
            local scaler = amp.GradScaler(case.opts)
            local half = #case.coefs // 2
            for k = 1, half do iterate(case, scaler, opt, ps, k) end
            local sd = scaler:state_dict()
            local osd = opt:state_dict()
            -- a new scaler with other options takes everything from the state dict
            local scaler2 = amp.GradScaler({init_scale = 3, growth_factor = 5,
                                            backoff_factor = 0.1, growth_interval = 77})
            scaler2:load_state_dict(sd)
            local ps2 = {}
            for i, p in ipairs(ps) do ps2[i] = p:detach():clone():requires_grad_() end
            local opt2 = optim[case.optimizer](ps2, case.optimizer_opts)
            opt2:load_state_dict(osd)
            for k = half + 1, #case.coefs do
                check_step(case, scaler2, ps2, k, iterate(case, scaler2, opt2, ps2, k))
            end
        end)
    end
end)

describe('GradScaler', function()
    local function setup(opts, values)
        local p = ddpl.tensor(values or {1.0, 2.0, 3.0}, {requires_grad = true})
        return p, optim.SGD({p}, {lr = 0.5}), amp.GradScaler(opts)
    end

    it('state_dict has PyTorch\'s keys and values', function()
        local _, _, scaler = setup({init_scale = 8, growth_interval = 10})
        assert.are.same({scale = 8, growth_factor = 2, backoff_factor = 0.5,
                         growth_interval = 10, _growth_tracker = 0}, scaler:state_dict())
        assert.is_true(scaler:is_enabled())
    end)

    it('enabled = false passes everything through', function()
        local p, opt, scaler = setup({enabled = false})
        local loss = (p * p):sum()
        assert.are.equal(loss, scaler:scale(loss))
        loss:backward()
        p.grad = ddpl.tensor({1 / 0, 0, 0})
        scaler:unscale_(opt)
        scaler:step(opt) -- not skipped: nothing is checked
        scaler:update()
        assert.is_false(scaler:is_enabled())
        assert.are.equal(1.0, scaler:get_scale())
        assert.are.same({}, scaler:state_dict())
        scaler:load_state_dict({}) -- a no-op, as PyTorch
        assert.are.equal(-1 / 0, p:tolist()[1])
    end)

    it('update(new_scale) sets the scale (a number or a one-element tensor)', function()
        local p, opt, scaler = setup()
        scaler:scale(p:sum()):backward()
        scaler:step(opt)
        scaler:update(1000.1)
        assert.are.equal(string.unpack('<f', string.pack('<f', 1000.1)), scaler:get_scale())
        scaler:scale(p:sum()):backward()
        scaler:step(opt)
        scaler:update(ddpl.tensor({16.0}))
        assert.are.equal(16, scaler:get_scale())
        H.assert_error(function() scaler:update(ddpl.ones(2)) end,
                       'GradScaler: update: new_scale must be a number or a one-element tensor')
    end)

    it('the growth stops short of float32 overflow', function()
        local p, opt, scaler = setup({init_scale = 2.0 ^ 127, growth_interval = 1})
        scaler:scale(p:sum()):backward()
        scaler:step(opt)
        scaler:update()
        assert.are.equal(2.0 ^ 127, scaler:get_scale())
        assert.are.equal(0, scaler:state_dict()._growth_tracker)
    end)

    it('scale() takes a list of tensors, and scales 16-bit losses in float32', function()
        local _, _, scaler = setup({init_scale = 2.0 ^ 20})
        local out = scaler:scale({ddpl.tensor({1.0}), {ddpl.tensor({2.0}, {dtype = 'float64'})}})
        assert.are.equal(2.0 ^ 20, out[1]:item())
        assert.are.equal(2.0 ^ 21, out[2][1]:item())
        assert.are.equal('float64', H.dtype_name(out[2][1].dtype))
        local h = scaler:scale(ddpl.tensor({1.0}, {dtype = 'float16'}))
        assert.are.equal('float32', H.dtype_name(h.dtype)) -- 2^20 would overflow float16
        assert.are.equal(2.0 ^ 20, h:item())
        H.assert_error(function() scaler:scale('loss') end,
                       'GradScaler: scale: outputs must be a tensor or a list of tensors')
    end)

    it('one native pass finds an inf or NaN anywhere in a large gradient', function()
        local n = 100003 -- past the CPU kernel's threading grain, odd-sized
        for _, bad in ipairs({1 / 0, -1 / 0, 0 / 0}) do
            for _, at in ipairs({0, 50000, n - 1}) do
                local p = ddpl.zeros(n, {requires_grad = true})
                local opt = optim.SGD({p}, {lr = 1})
                local scaler = amp.GradScaler({init_scale = 4})
                scaler:scale(p:sum()):backward()
                local g = p.grad
                g[at] = bad * 4 -- x[i] = v writes element i (0-based), in place in the gradient
                scaler:step(opt)
                assert.are.equal(0, p:sum():item(), 'step skipped for ' .. tostring(bad))
                scaler:update()
                assert.are.equal(2, scaler:get_scale())
            end
        end
        -- and unscales every element when all are finite
        local p = ddpl.zeros(n, {requires_grad = true})
        local opt = optim.SGD({p}, {lr = 1})
        local scaler = amp.GradScaler({init_scale = 8})
        scaler:scale(p:sum()):backward()
        scaler:unscale_(opt)
        assert.are.equal(n, p.grad:sum():item())
        assert.are.equal(1, p.grad:max():item())
    end)

    it('with two optimizers, each skips on its own infs and update sees both', function()
        local a = ddpl.tensor({1.0}, {requires_grad = true})
        local b = ddpl.tensor({1.0}, {requires_grad = true})
        local oa, ob = optim.SGD({a}, {lr = 1}), optim.SGD({b}, {lr = 1})
        local scaler = amp.GradScaler({init_scale = 4})
        scaler:scale((a * (1 / 0)):sum() + b:sum()):backward()
        scaler:step(oa)
        scaler:step(ob)
        scaler:update()
        assert.are.equal(1, a:item()) -- skipped
        assert.are.equal(0, b:item()) -- stepped: its gradient 1 (unscaled) times lr 1
        assert.are.equal(2, scaler:get_scale())
    end)

    it('refuses misuse as PyTorch does', function()
        local p, opt, scaler = setup()
        H.assert_error(function() scaler:step(opt) end,
                       'GradScaler: step called but the scale is not set yet')
        H.assert_error(function() scaler:update() end,
                       'GradScaler: update called but the scale is not set yet')
        scaler:scale(p:sum()):backward()
        scaler:unscale_(opt)
        H.assert_error(function() scaler:unscale_(opt) end,
                       'GradScaler: unscale_() has already been called on this optimizer since '
                       .. 'the last update()')
        scaler:step(opt)
        H.assert_error(function() scaler:step(opt) end,
                       'GradScaler: step() has already been called since the last update()')
        H.assert_error(function() scaler:unscale_(opt) end,
                       'GradScaler: unscale_() is being called after step()')
        scaler:update()
        H.assert_error(function() scaler:update() end,
                       'GradScaler: update: no inf checks were recorded prior to update()')
        H.assert_error(function() scaler:step(opt, function() end) end,
                       'GradScaler: step: a closure is not supported')
        local q = ddpl.zeros(1, {requires_grad = true})
        local empty = optim.SGD({q}, {lr = 1})
        H.assert_error(function() scaler:step(empty) end,
                       'GradScaler: no inf checks were recorded for this optimizer')
        local h = ddpl.zeros(2, {dtype = 'float16', requires_grad = true})
        local oh = optim.SGD({h}, {lr = 1})
        h.grad = ddpl.ones(2, {dtype = 'float16'})
        H.assert_error(function() scaler:unscale_(oh) end,
                       'GradScaler: unscale_: attempting to unscale float16 gradients')
        local bad_opts = {
            {{growth_factor = 1}, 'GradScaler: the growth factor must be > 1.0, got 1'},
            {{backoff_factor = 1.5}, 'GradScaler: the backoff factor must be < 1.0, got 1.5'},
            {{init_scale = 0}, 'GradScaler: init_scale must be > 0'},
            {{growth_interval = 2.5}, 'GradScaler: growth_interval must be a positive integer'},
            {{growth_interval = 'x'}, 'GradScaler: expected a number for growth_interval'},
            {{enabled = 1}, 'GradScaler: expected a boolean for enabled'},
            {{scale = 2}, "GradScaler: unknown option 'scale'"},
        }
        for _, c in ipairs(bad_opts) do
            H.assert_error(function() amp.GradScaler(c[1]) end, c[2])
        end
        H.assert_error(function() scaler:load_state_dict({}) end,
                       'GradScaler: load_state_dict: the source state dict is empty')
        H.assert_error(function() scaler:load_state_dict({scale = 2}) end,
                       'GradScaler: load_state_dict: expected a number for growth_factor')
    end)
end)
