-- lua/ddplua/optim/lr_scheduler.lua: learning-rate schedulers (torch.optim.lr_scheduler 1.13).
-- defines: StepLR(opt, {step_size, gamma=0.1}), MultiStepLR(opt, {milestones, gamma=0.1}),
--          ExponentialLR(opt, {gamma}), CosineAnnealingLR(opt, {T_max, eta_min=0}),
--          LinearLR(opt, {start_factor=1/3, end_factor=1, total_iters=5}),
--          LambdaLR(opt, fn or {fn per group}), and from their own files OneCycleLR,
--          SequentialLR, ReduceLROnPlateau (lr_scheduler/*.lua); LRScheduler (the base class,
--          lr_scheduler/base.lua). Each has step(), get_last_lr(), state_dict(),
--          load_state_dict(sd); all but ReduceLROnPlateau also last_epoch and base_lrs.
--
-- StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR and LinearLR use PyTorch's recursive
-- forms (each lr from the group's current lr), so a user's change to group.lr carries on as it
-- does in PyTorch; their closed forms serve step(epoch) (SequentialLR's milestones).
local base = require 'ddplua.optim.lr_scheduler.base'

local LRScheduler = base.LRScheduler
local num, check_opts = base.num, base.check_opts

local M = {LRScheduler = LRScheduler}

M.StepLR = LRScheduler:extend('StepLR')

function M.StepLR:init(opts)
    opts = check_opts('StepLR', opts, {step_size = true, gamma = true})
    if opts.step_size == nil then error('StepLR: step_size is required', 3) end
    self.step_size = num('StepLR', opts, 'step_size')
    if self.step_size < 1 or math.type(self.step_size) ~= 'integer' then
        error('StepLR: step_size must be a positive integer, got ' .. tostring(self.step_size), 3)
    end
    self.gamma = num('StepLR', opts, 'gamma', 0.1)
end

function M.StepLR:get_lr()
    local e = self.last_epoch
    if e == 0 or e % self.step_size ~= 0 then return self:_lrs(function(lr) return lr end) end
    return self:_lrs(function(lr) return lr * self.gamma end)
end

function M.StepLR:_get_closed_form_lr()
    return self:_lrs(function(_, b) return b * self.gamma ^ (self.last_epoch // self.step_size) end)
end

M.MultiStepLR = LRScheduler:extend('MultiStepLR')

-- milestones: a list of epochs (a repeated one multiplies by gamma that many times, as
-- PyTorch's Counter); kept as epoch -> count.
function M.MultiStepLR:init(opts)
    opts = check_opts('MultiStepLR', opts, {milestones = true, gamma = true})
    local ms = opts.milestones
    if type(ms) ~= 'table' then
        error('MultiStepLR: milestones is required (a list of epochs)', 3)
    end
    self.milestones = {}
    for i, m in ipairs(ms) do
        if math.type(m) ~= 'integer' then
            error(string.format('MultiStepLR: milestone %d is %s, not an integer epoch', i,
                                tostring(m)), 3)
        end
        self.milestones[m] = (self.milestones[m] or 0) + 1
    end
    self.gamma = num('MultiStepLR', opts, 'gamma', 0.1)
end

function M.MultiStepLR:get_lr()
    local n = self.milestones[self.last_epoch]
    if n == nil then return self:_lrs(function(lr) return lr end) end
    return self:_lrs(function(lr) return lr * self.gamma ^ n end)
end

function M.MultiStepLR:_get_closed_form_lr()
    local passed = 0 -- milestones at or before last_epoch (bisect_right over the sorted list)
    for m, n in pairs(self.milestones) do
        if m <= self.last_epoch then passed = passed + n end
    end
    return self:_lrs(function(_, b) return b * self.gamma ^ passed end)
end

M.ExponentialLR = LRScheduler:extend('ExponentialLR')

function M.ExponentialLR:init(opts)
    opts = check_opts('ExponentialLR', opts, {gamma = true})
    if opts.gamma == nil then error('ExponentialLR: gamma is required', 3) end
    self.gamma = num('ExponentialLR', opts, 'gamma')
end

function M.ExponentialLR:get_lr()
    if self.last_epoch == 0 then return self:_lrs(function(lr) return lr end) end
    return self:_lrs(function(lr) return lr * self.gamma end)
end

function M.ExponentialLR:_get_closed_form_lr()
    return self:_lrs(function(_, b) return b * self.gamma ^ self.last_epoch end)
end

M.CosineAnnealingLR = LRScheduler:extend('CosineAnnealingLR')

function M.CosineAnnealingLR:init(opts)
    opts = check_opts('CosineAnnealingLR', opts, {T_max = true, eta_min = true})
    if opts.T_max == nil then error('CosineAnnealingLR: T_max is required', 3) end
    self.T_max = num('CosineAnnealingLR', opts, 'T_max')
    if self.T_max <= 0 then error('CosineAnnealingLR: T_max must be positive', 3) end
    self.eta_min = num('CosineAnnealingLR', opts, 'eta_min', 0)
end

function M.CosineAnnealingLR:get_lr()
    local e, T, eta = self.last_epoch, self.T_max, self.eta_min
    if e == 0 then return self:_lrs(function(lr) return lr end) end
    if (e - 1 - T) % (2 * T) == 0 then
        return self:_lrs(function(lr, base)
            return lr + (base - eta) * (1 - math.cos(math.pi / T)) / 2
        end)
    end
    return self:_lrs(function(lr)
        return (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T))
            * (lr - eta) + eta
    end)
end

function M.CosineAnnealingLR:_get_closed_form_lr()
    local e, T, eta = self.last_epoch, self.T_max, self.eta_min
    return self:_lrs(function(_, b) return eta + (b - eta) * (1 + math.cos(math.pi * e / T)) / 2 end)
end

M.LinearLR = LRScheduler:extend('LinearLR')

function M.LinearLR:init(opts)
    opts = check_opts('LinearLR', opts, {start_factor = true, end_factor = true,
                                         total_iters = true})
    self.start_factor = num('LinearLR', opts, 'start_factor', 1.0 / 3)
    self.end_factor = num('LinearLR', opts, 'end_factor', 1.0)
    self.total_iters = num('LinearLR', opts, 'total_iters', 5)
    if self.start_factor > 1 or self.start_factor <= 0 then
        error('LinearLR: start_factor must be in (0, 1], got ' .. tostring(self.start_factor), 3)
    end
    if self.end_factor > 1 or self.end_factor < 0 then
        error('LinearLR: end_factor must be in [0, 1], got ' .. tostring(self.end_factor), 3)
    end
end

function M.LinearLR:get_lr()
    local e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
    if e == 0 then return self:_lrs(function(lr) return lr * s end) end
    if e > n then return self:_lrs(function(lr) return lr end) end
    return self:_lrs(function(lr)
        return lr * (1.0 + (f - s) / (n * s + (e - 1) * (f - s)))
    end)
end

function M.LinearLR:_get_closed_form_lr()
    local e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
    return self:_lrs(function(_, b) return b * (s + (f - s) * math.min(n, e) / n) end)
end

M.LambdaLR = LRScheduler:extend('LambdaLR')

function M.LambdaLR:init(fn)
    local n = #self.optimizer.param_groups
    if type(fn) == 'function' then
        self.lr_lambdas = {}
        for i = 1, n do self.lr_lambdas[i] = fn end
    elseif type(fn) == 'table' then
        if #fn ~= n then
            error(string.format('LambdaLR: expected %d lr_lambdas, got %d', n, #fn), 3)
        end
        self.lr_lambdas = fn
    else
        error('LambdaLR: expected a function (or a list, one per group) as argument 2', 3)
    end
end

function M.LambdaLR:get_lr()
    return self:_lrs(function(_, base, i) return base * self.lr_lambdas[i](self.last_epoch) end)
end

M.OneCycleLR = require 'ddplua.optim.lr_scheduler.OneCycleLR'
M.SequentialLR = require 'ddplua.optim.lr_scheduler.SequentialLR'
M.ReduceLROnPlateau = require 'ddplua.optim.lr_scheduler.ReduceLROnPlateau'

return M
