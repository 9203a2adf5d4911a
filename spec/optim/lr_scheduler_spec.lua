-- spec/optim/lr_scheduler_spec.lua: the learning-rate schedulers against PyTorch 1.13 (the
-- schedulers, plateau and sequential cases of spec/fixtures/optim.lua, written by
-- tools/gen_optim_fixtures.py): lr and momentum trajectories, state_dict round trips (in memory
-- and through ddpl.save) that continue identically, and argument errors.
local H = require 'helpers'
local ddpl = H.ddpl
local optim = ddpl.optim
local S = optim.lr_scheduler
local fx = H.fixture('optim')

-- An optimizer as the generator makes it: one group per lr, SGD with momentum 0.9 or Adam.
local function make_optimizer(lrs, kind)
    local groups = {}
    for i, lr in ipairs(lrs) do
        groups[i] = {params = {ddpl.zeros(1, {requires_grad = true})}, lr = lr}
    end
    if kind == 'Adam' then return optim.Adam(groups, {lr = lrs[1]}) end
    return optim.SGD(groups, {lr = lrs[1], momentum = 0.9})
end

local function make_scheduler(opt, name, opts)
    if name == 'LambdaLR' then -- the generator's function, written again
        return S.LambdaLR(opt, function(e) return 0.95 ^ e end)
    end
    return S[name](opt, opts)
end

local function momenta(opt)
    local out = {}
    for i, g in ipairs(opt.param_groups) do out[i] = g.betas and g.betas[1] or g.momentum end
    return out
end

-- The lrs the scheduler reports equal PyTorch's, and are the groups' lrs.
local function check_lrs(sched, opt, want, what)
    local got = sched:get_last_lr()
    H.assert_values(got, want, nil, 1e-12, 1e-15, what)
    for i, g in ipairs(opt.param_groups) do assert.are.equal(got[i], g.lr, what) end
end

-- The lrs (and momenta, where the case has them) after step k (0: at construction).
local function check_point(case, sched, opt, k)
    check_lrs(sched, opt, case.expected[k + 1], 'step ' .. k)
    if case.momenta then
        H.assert_values(momenta(opt), case.momenta[k + 1], nil, 1e-12, 1e-15,
                        'momentum at step ' .. k)
    end
end

-- Each kind of case: build(case) -> opt, sched; advance(sched, case, k) takes step k (1-based).
local kinds = {
    schedulers = {
        build = function(case)
            local opt = make_optimizer(case.lrs, case.optimizer)
            return opt, make_scheduler(opt, case.scheduler, case.opts)
        end,
        steps = function(case) return case.steps end,
        advance = function(sched) sched:step() end,
    },
    plateau = {
        build = function(case)
            local opt = make_optimizer(case.lrs)
            return opt, S.ReduceLROnPlateau(opt, case.opts)
        end,
        steps = function(case) return #case.metrics end,
        advance = function(sched, case, k) sched:step(case.metrics[k]) end,
    },
    sequential = {
        build = function(case)
            local opt = make_optimizer(case.lrs)
            local subs = {}
            for i, s in ipairs(case.schedulers) do
                subs[i] = make_scheduler(opt, s.scheduler, s.opts)
            end
            return opt, S.SequentialLR(opt, {schedulers = subs, milestones = case.milestones})
        end,
        steps = function(case) return case.steps end,
        advance = function(sched) sched:step() end,
    },
}

for kind, K in pairs(kinds) do
    describe(kind .. ' match PyTorch', function()
        for _, case in ipairs(fx[kind]) do
            it(case.name, function()
                local opt, sched = K.build(case)
                for k = 0, K.steps(case) do
                    if k > 0 then K.advance(sched, case, k) end
                    check_point(case, sched, opt, k)
                end
            end)
        end
    end)

    describe(kind .. ': a scheduler restored from state_dict continues identically', function()
        for _, case in ipairs(fx[kind]) do
            it(case.name, function()
                local n = K.steps(case)
                local half = n // 2
                local opt, sched = K.build(case)
                for k = 1, half do K.advance(sched, case, k) end
                local osd, ssd = opt:state_dict(), sched:state_dict()
                -- a fresh optimizer and scheduler (whose construction moved the lrs), then
                -- both state dicts, as a resumed training run does
                local opt2, sched2 = K.build(case)
                K.advance(sched2, case, 1)
                opt2:load_state_dict(osd)
                sched2:load_state_dict(ssd)
                for k = half + 1, n do
                    K.advance(sched2, case, k)
                    check_point(case, sched2, opt2, k)
                end
            end)
        end
    end)
end

describe('scheduler state dicts', function()
    it('survive ddpl.save and ddpl.load (OneCycleLR, ReduceLROnPlateau, SequentialLR)',
       function()
        local path = os.tmpname()
        for _, pick in ipairs({{'schedulers', 'OneCycleLR/linear/adam'}, {'plateau', 'min/rel'},
                               {'sequential', 'step/cosine/multistep'}}) do
            local K, case = kinds[pick[1]], nil
            for _, c in ipairs(fx[pick[1]]) do if c.name == pick[2] then case = c end end
            local n = K.steps(case)
            local opt, sched = K.build(case)
            for k = 1, 5 do K.advance(sched, case, k) end
            ddpl.save({sched = sched:state_dict(), opt = opt:state_dict()}, path)
            local back = ddpl.load(path)
            local opt2, sched2 = K.build(case)
            opt2:load_state_dict(back.opt)
            sched2:load_state_dict(back.sched)
            for k = 6, n do
                K.advance(sched2, case, k)
                check_lrs(sched2, opt2, case.expected[k + 1], pick[2] .. ' step ' .. k)
            end
        end
        os.remove(path)
    end)

    it('state_dict is a copy: stepping on does not change a saved one', function()
        local opt = make_optimizer({0.1})
        local sched = S.OneCycleLR(opt, {max_lr = 1, total_steps = 10})
        local sd = sched:state_dict()
        sched:step()
        sched:step()
        assert.are.equal(0, sd.last_epoch)
        assert.are_not.equal(sd._last_lr[1], sched:get_last_lr()[1])
        sd._schedule_phases[1].end_step = 100
        assert.are_not.equal(100, sched._schedule_phases[1].end_step)
    end)

    it('load_state_dict refuses another scheduler\'s state', function()
        local opt = make_optimizer({0.1})
        local a = S.StepLR(opt, {step_size = 2})
        local b = S.ExponentialLR(opt, {gamma = 0.5})
        H.assert_error(function() b:load_state_dict(a:state_dict()) end,
                       "ExponentialLR: load_state_dict: the state dict is a StepLR's")
        local r = S.ReduceLROnPlateau(opt)
        H.assert_error(function() r:load_state_dict(a:state_dict()) end, 'ReduceLROnPlateau')
    end)
end)

describe('lr schedulers', function()
    it('state_dict round trip continues the schedule; LambdaLR takes one function per group',
       function()
        local function setup()
            local opt = optim.SGD({{params = {ddpl.zeros(1, {requires_grad = true})}, lr = 1},
                                   {params = {ddpl.zeros(1, {requires_grad = true})}, lr = 2}},
                                  {lr = 1})
            return opt, S.CosineAnnealingLR(opt, {T_max = 6, eta_min = 0.1})
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
        local lam = S.LambdaLR(opt, {function(e) return e end, function(e) return 2 * e end})
        lam:step()
        assert.are.same({1, 4}, lam:get_last_lr())
    end)

    it('step(epoch) uses the closed form (what SequentialLR does at a milestone)', function()
        local opt = make_optimizer({0.1})
        local sched = S.MultiStepLR(opt, {milestones = {2, 4, 4}, gamma = 0.5})
        sched:step(5)
        H.assert_values(sched:get_last_lr(), {0.1 * 0.5 ^ 3}, nil, 1e-15, 0)
        sched:step(3)
        H.assert_values(sched:get_last_lr(), {0.1 * 0.5}, nil, 1e-15, 0)
        local exp = S.ExponentialLR(opt, {gamma = 0.5})
        exp:step(2)
        H.assert_values(exp:get_last_lr(), {0.1 * 0.25}, nil, 1e-15, 0)
        H.assert_error(function() exp:step(1.5) end, 'ExponentialLR: step(epoch) expects an integer')
    end)

    it('OneCycleLR refuses to step past total_steps', function()
        local opt = make_optimizer({0.1})
        local sched = S.OneCycleLR(opt, {max_lr = 1, total_steps = 3})
        sched:step()
        sched:step()
        sched:step() -- last_epoch 3 == total_steps: still allowed, as PyTorch
        H.assert_error(function() sched:step() end,
                       'OneCycleLR: tried to step 5 times; total_steps is 3')
    end)

    it('ReduceLROnPlateau takes a one-element tensor as the metric', function()
        local opt = make_optimizer({0.1})
        local sched = S.ReduceLROnPlateau(opt, {patience = 0})
        sched:step(ddpl.tensor({2.0}))
        sched:step(ddpl.tensor(3.0))
        H.assert_values(sched:get_last_lr(), {0.01}, nil, 1e-15, 0)
        assert.are.equal(2, sched.best)
        H.assert_error(function() sched:step('x') end, 'ReduceLROnPlateau: step expects the metric')
    end)

    it('reject bad arguments', function()
        local opt = optim.SGD({ddpl.zeros(1, {requires_grad = true})}, {lr = 0.1})
        local errors = {
            {function() S.StepLR(opt, {}) end, 'StepLR: step_size'},
            {function() S.LinearLR(opt, {start_factor = 2}) end, 'LinearLR: start_factor'},
            {function() S.LambdaLR(opt, 3) end, 'LambdaLR'},
            {function() S.MultiStepLR(opt, {}) end, 'MultiStepLR: milestones is required'},
            {function() S.MultiStepLR(opt, {milestones = {1, 2.5}}) end,
             'MultiStepLR: milestone 2 is 2.5, not an integer epoch'},
            {function() S.ExponentialLR(opt, {}) end, 'ExponentialLR: gamma is required'},
            {function() S.ExponentialLR(opt, {gamma = 0.5, step_size = 2}) end,
             "ExponentialLR: unknown option 'step_size'"},
            {function() S.OneCycleLR(opt, {total_steps = 10}) end, 'OneCycleLR: max_lr is required'},
            {function() S.OneCycleLR(opt, {max_lr = 1}) end,
             'OneCycleLR: give either total_steps or epochs and steps_per_epoch'},
            {function() S.OneCycleLR(opt, {max_lr = 1, total_steps = 0}) end,
             'OneCycleLR: expected a positive integer total_steps, got 0'},
            {function() S.OneCycleLR(opt, {max_lr = 1, epochs = 2}) end,
             'OneCycleLR: expected a positive integer steps_per_epoch, got nil'},
            {function() S.OneCycleLR(opt, {max_lr = 1, total_steps = 5, pct_start = 1.5}) end,
             'OneCycleLR: expected pct_start between 0 and 1'},
            {function() S.OneCycleLR(opt, {max_lr = 1, total_steps = 5, anneal_strategy = 'x'}) end,
             "OneCycleLR: anneal_strategy must be 'cos' or 'linear'"},
            {function() S.OneCycleLR(opt, {max_lr = {1, 2}, total_steps = 5}) end,
             'OneCycleLR: expected 1 values for max_lr, got 2'},
            {function() S.ReduceLROnPlateau(opt, {factor = 1}) end,
             'ReduceLROnPlateau: factor must be < 1'},
            {function() S.ReduceLROnPlateau(opt, {mode = 'up'}) end,
             "ReduceLROnPlateau: mode must be 'min' or 'max'"},
            {function() S.ReduceLROnPlateau(opt, {threshold_mode = 'x'}) end,
             "ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs'"},
            {function() S.ReduceLROnPlateau(opt, {min_lr = {0, 0}}) end,
             'ReduceLROnPlateau: expected 1 values for min_lr, got 2'},
            {function() S.ReduceLROnPlateau({}, {}) end,
             'ReduceLROnPlateau: expected an optimizer as argument 1'},
        }
        for _, e in ipairs(errors) do H.assert_error(e[1], e[2]) end
        -- an optimizer without momentum or betas cannot cycle momentum
        local ada = optim.Adagrad({ddpl.zeros(1, {requires_grad = true})})
        H.assert_error(function() S.OneCycleLR(ada, {max_lr = 1, total_steps = 5}) end,
                       'OneCycleLR: the optimizer has no momentum nor betas to cycle')
        S.OneCycleLR(ada, {max_lr = 1, total_steps = 5, cycle_momentum = false})
    end)

    it('SequentialLR checks its schedulers and milestones', function()
        local opt = make_optimizer({0.1})
        local other = make_optimizer({0.1})
        local a = S.LinearLR(opt, {start_factor = 0.5})
        local b = S.ExponentialLR(opt, {gamma = 0.9})
        local c = S.ExponentialLR(other, {gamma = 0.9})
        local errors = {
            {{schedulers = {a, b}, milestones = {}},
             'SequentialLR: expected one milestone fewer than schedulers, got 2 schedulers and 0'},
            {{schedulers = {a, c}, milestones = {3}},
             'SequentialLR: scheduler 2 belongs to another optimizer'},
            {{schedulers = {a, S.ReduceLROnPlateau(opt)}, milestones = {3}},
             'SequentialLR: scheduler 2 is not an epoch-based LR scheduler'},
            {{schedulers = {a, b, b}, milestones = {4, 2}},
             'SequentialLR: milestones must be increasing integer epochs, got 2 at 2'},
            {{milestones = {3}}, 'SequentialLR: schedulers is required'},
        }
        for _, e in ipairs(errors) do
            H.assert_error(function() S.SequentialLR(opt, e[1]) end, e[2])
        end
    end)
end)
