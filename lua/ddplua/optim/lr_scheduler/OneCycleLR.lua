-- lua/ddplua/optim/lr_scheduler/OneCycleLR.lua: optim.lr_scheduler.OneCycleLR (torch 1.13's),
--   the 1cycle policy: lr rises from max_lr/div_factor to max_lr over pct_start of the steps,
--   then falls to that over final_div_factor; momentum moves the opposite way.
-- defines: OneCycleLR(opt, {max_lr, total_steps | epochs and steps_per_epoch, pct_start=0.3,
--          anneal_strategy='cos'|'linear', cycle_momentum=true, base_momentum=0.85,
--          max_momentum=0.95, div_factor=25, final_div_factor=1e4, three_phase=false}).
--          max_lr, base_momentum and max_momentum may be lists (one per group).
--
-- As PyTorch, each group gets the fields initial_lr, max_lr, min_lr (and with cycle_momentum
-- max_momentum, base_momentum); the momentum cycled is group.momentum (SGD, RMSprop) or
-- group.betas[1] (optimizers with betas: Adam, AdamW), set at every step. Stepping past
-- total_steps is an error.
local base = require 'ddplua.optim.lr_scheduler.base'

local NAME = 'OneCycleLR'
local num = base.num

local OneCycleLR = base.LRScheduler:extend(NAME)

local KNOWN = {max_lr = true, total_steps = true, epochs = true, steps_per_epoch = true,
    pct_start = true, anneal_strategy = true, cycle_momentum = true, base_momentum = true,
    max_momentum = true, div_factor = true, final_div_factor = true, three_phase = true}

local function positive_integer(opts, k)
    local v = opts[k]
    if math.type(v) ~= 'integer' or v <= 0 then
        error(string.format('%s: expected a positive integer %s, got %s', NAME, k, tostring(v)), 4)
    end
    return v
end

function OneCycleLR:init(opts)
    opts = base.check_opts(NAME, opts, KNOWN)
    if opts.max_lr == nil then error(NAME .. ': max_lr is required', 3) end
    if opts.total_steps ~= nil then
        self.total_steps = positive_integer(opts, 'total_steps')
    elseif opts.epochs ~= nil or opts.steps_per_epoch ~= nil then
        self.total_steps = positive_integer(opts, 'epochs') * positive_integer(opts,
            'steps_per_epoch')
    else
        error(NAME .. ': give either total_steps or epochs and steps_per_epoch', 3)
    end
    local pct = num(NAME, opts, 'pct_start', 0.3)
    if pct < 0 or pct > 1 then
        error(NAME .. ': expected pct_start between 0 and 1, got ' .. tostring(pct), 3)
    end
    local total = self.total_steps
    if opts.three_phase then
        self._schedule_phases = {
            {end_step = pct * total - 1, start_lr = 'initial_lr', end_lr = 'max_lr',
                start_momentum = 'max_momentum', end_momentum = 'base_momentum'},
            {end_step = 2 * pct * total - 2, start_lr = 'max_lr', end_lr = 'initial_lr',
                start_momentum = 'base_momentum', end_momentum = 'max_momentum'},
            {end_step = total - 1, start_lr = 'initial_lr', end_lr = 'min_lr',
                start_momentum = 'max_momentum', end_momentum = 'max_momentum'},
        }
    else
        self._schedule_phases = {
            {end_step = pct * total - 1, start_lr = 'initial_lr', end_lr = 'max_lr',
                start_momentum = 'max_momentum', end_momentum = 'base_momentum'},
            {end_step = total - 1, start_lr = 'max_lr', end_lr = 'min_lr',
                start_momentum = 'base_momentum', end_momentum = 'max_momentum'},
        }
    end
    local strategy = opts.anneal_strategy or 'cos'
    if strategy ~= 'cos' and strategy ~= 'linear' then
        error(NAME .. ": anneal_strategy must be 'cos' or 'linear', got " .. tostring(strategy), 3)
    end
    self.anneal_strategy = strategy
    local div = num(NAME, opts, 'div_factor', 25)
    local final_div = num(NAME, opts, 'final_div_factor', 1e4)
    local opt = self.optimizer
    local max_lrs = base.per_group(NAME, opt, 'max_lr', opts.max_lr, 4)
    for i, g in ipairs(opt.param_groups) do
        g.initial_lr = max_lrs[i] / div
        g.max_lr = max_lrs[i]
        g.min_lr = g.initial_lr / final_div
    end
    self.cycle_momentum = opts.cycle_momentum ~= false
    if self.cycle_momentum then
        local defaults = opt.defaults or {}
        if defaults.momentum == nil and defaults.betas == nil then
            error(NAME .. ': the optimizer has no momentum nor betas to cycle (pass '
                .. 'cycle_momentum = false)', 3)
        end
        self.use_beta1 = defaults.betas ~= nil
        local maxs = base.per_group(NAME, opt, 'max_momentum', opts.max_momentum or 0.95, 4)
        local bases = base.per_group(NAME, opt, 'base_momentum', opts.base_momentum or 0.85, 4)
        for i, g in ipairs(opt.param_groups) do
            self:_set_momentum(g, maxs[i])
            g.max_momentum, g.base_momentum = maxs[i], bases[i]
        end
    end
end

function OneCycleLR:_set_momentum(g, m)
    if self.use_beta1 then
        g.betas = {m, g.betas[2]} -- a new table, as PyTorch makes a new tuple
    else
        g.momentum = m
    end
end

local function anneal(strategy, start, stop, pct)
    if strategy == 'cos' then return stop + (start - stop) / 2.0 * (math.cos(math.pi * pct) + 1) end
    return (stop - start) * pct + start
end

function OneCycleLR:get_lr()
    local step = self.last_epoch
    if step > self.total_steps then
        error(string.format('%s: tried to step %d times; total_steps is %d', NAME, step + 1,
                            self.total_steps), 3)
    end
    local phases, lrs = self._schedule_phases, {}
    for gi, g in ipairs(self.optimizer.param_groups) do
        local start_step, lr, momentum = 0, nil, nil
        for i, ph in ipairs(phases) do
            if step <= ph.end_step or i == #phases then
                local pct = (step - start_step) / (ph.end_step - start_step)
                lr = anneal(self.anneal_strategy, g[ph.start_lr], g[ph.end_lr], pct)
                if self.cycle_momentum then
                    momentum = anneal(self.anneal_strategy, g[ph.start_momentum],
                                      g[ph.end_momentum], pct)
                end
                break
            end
            start_step = ph.end_step
        end
        lrs[gi] = lr
        if self.cycle_momentum then self:_set_momentum(g, momentum) end
    end
    return lrs
end

return OneCycleLR
