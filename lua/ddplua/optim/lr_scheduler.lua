-- lua/ddplua/optim/lr_scheduler.lua: learning-rate schedulers (torch.optim.lr_scheduler 1.13).
-- defines: StepLR(opt, {step_size, gamma=0.1}), CosineAnnealingLR(opt, {T_max, eta_min=0}),
--          LinearLR(opt, {start_factor=1/3, end_factor=1, total_iters=5}),
--          LambdaLR(opt, fn or {fn per group}); each with step(), get_last_lr(), last_epoch,
--          base_lrs, state_dict(), load_state_dict(sd).
--
-- As PyTorch: construction records group.initial_lr, then takes step 0 (so the lr is already
-- the schedule's first value); step() advances last_epoch by one and writes each group's lr.
-- StepLR, CosineAnnealingLR and LinearLR use PyTorch's recursive forms (each lr from the
-- group's current lr), so a user's change to group.lr carries on as it does in PyTorch.
local class = require 'ddplua.class'

local M = {}

-- Sched(opt, opts): checks the optimizer, runs the class's init(opts), then takes step 0. The
-- instance's own __name field is part of what state_dict() saves.
local function construct(cls, opt, opts)
    local self = setmetatable({optimizer = opt, __name = cls.__name}, cls)
    if type(opt) ~= 'table' or type(opt.param_groups) ~= 'table' then
        error(cls.__name .. ': expected an optimizer as argument 1', 2)
    end
    cls.init(self, opts)
    self:_initial()
    return self
end

local LRScheduler = class.new('LRScheduler', nil, construct)
M.LRScheduler = LRScheduler

-- opts[k] as a number (or default when nil), with an error naming the scheduler.
local function num(name, opts, k, default, level)
    local v = opts[k]
    if v == nil then v = default end
    if type(v) ~= 'number' then
        error(string.format('%s: expected a number for %s, got %s', name, k, type(v)), level or 4)
    end
    return v
end

local function check_opts(name, opts, known)
    if opts == nil then return {} end
    if type(opts) ~= 'table' then error(name .. ': expected an options table as argument 2', 4) end
    for k in pairs(opts) do
        if not known[k] then error(string.format("%s: unknown option '%s'", name, k), 4) end
    end
    return opts
end

function LRScheduler:_initial()
    self.base_lrs = {}
    for i, g in ipairs(self.optimizer.param_groups) do
        if g.initial_lr == nil then g.initial_lr = g.lr end
        self.base_lrs[i] = g.initial_lr
    end
    self.last_epoch = -1
    self:step()
end

function LRScheduler:step()
    self.last_epoch = self.last_epoch + 1
    local lrs = self:get_lr()
    self._last_lr = {}
    for i, g in ipairs(self.optimizer.param_groups) do
        g.lr = lrs[i]
        self._last_lr[i] = lrs[i]
    end
end

-- The learning rates the last step() set, one per group.
function LRScheduler:get_last_lr()
    local out = {}
    for i, v in ipairs(self._last_lr) do out[i] = v end
    return out
end

function LRScheduler:_lrs(fn)
    local out = {}
    for i, g in ipairs(self.optimizer.param_groups) do out[i] = fn(g.lr, self.base_lrs[i], i) end
    return out
end

-- Everything but the optimizer (LambdaLR's functions are not state), as PyTorch.
function LRScheduler:state_dict()
    local sd = {}
    for k, v in pairs(self) do
        if k ~= 'optimizer' and k ~= 'lr_lambdas' and type(v) ~= 'function' then
            if type(v) == 'table' then
                local c = {}
                for i, x in pairs(v) do c[i] = x end
                v = c
            end
            sd[k] = v
        end
    end
    return sd
end

function LRScheduler:load_state_dict(sd)
    for k, v in pairs(sd) do
        if type(v) == 'table' then
            local c = {}
            for i, x in pairs(v) do c[i] = x end
            v = c
        end
        self[k] = v
    end
end

M.StepLR = LRScheduler:extend('StepLR')

function M.StepLR:init(opts)
    opts = check_opts('StepLR', opts, {step_size = true, gamma = true})
    if opts.step_size == nil then error('StepLR: step_size is required', 4) end
    self.step_size = num('StepLR', opts, 'step_size')
    if self.step_size < 1 or math.type(self.step_size) ~= 'integer' then
        error('StepLR: step_size must be a positive integer, got ' .. tostring(self.step_size), 4)
    end
    self.gamma = num('StepLR', opts, 'gamma', 0.1)
end

function M.StepLR:get_lr()
    local e = self.last_epoch
    if e == 0 or e % self.step_size ~= 0 then return self:_lrs(function(lr) return lr end) end
    return self:_lrs(function(lr) return lr * self.gamma end)
end

M.CosineAnnealingLR = LRScheduler:extend('CosineAnnealingLR')

function M.CosineAnnealingLR:init(opts)
    opts = check_opts('CosineAnnealingLR', opts, {T_max = true, eta_min = true})
    if opts.T_max == nil then error('CosineAnnealingLR: T_max is required', 4) end
    self.T_max = num('CosineAnnealingLR', opts, 'T_max')
    if self.T_max <= 0 then error('CosineAnnealingLR: T_max must be positive', 4) end
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

M.LinearLR = LRScheduler:extend('LinearLR')

function M.LinearLR:init(opts)
    opts = check_opts('LinearLR', opts, {start_factor = true, end_factor = true,
                                         total_iters = true})
    self.start_factor = num('LinearLR', opts, 'start_factor', 1.0 / 3)
    self.end_factor = num('LinearLR', opts, 'end_factor', 1.0)
    self.total_iters = num('LinearLR', opts, 'total_iters', 5)
    if self.start_factor > 1 or self.start_factor <= 0 then
        error('LinearLR: start_factor must be in (0, 1], got ' .. tostring(self.start_factor), 4)
    end
    if self.end_factor > 1 or self.end_factor < 0 then
        error('LinearLR: end_factor must be in [0, 1], got ' .. tostring(self.end_factor), 4)
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

M.LambdaLR = LRScheduler:extend('LambdaLR')

function M.LambdaLR:init(fn)
    local n = #self.optimizer.param_groups
    if type(fn) == 'function' then
        self.lr_lambdas = {}
        for i = 1, n do self.lr_lambdas[i] = fn end
    elseif type(fn) == 'table' then
        if #fn ~= n then
            error(string.format('LambdaLR: expected %d lr_lambdas, got %d', n, #fn), 4)
        end
        self.lr_lambdas = fn
    else
        error('LambdaLR: expected a function (or a list, one per group) as argument 2', 4)
    end
end

function M.LambdaLR:get_lr()
    return self:_lrs(function(_, base, i) return base * self.lr_lambdas[i](self.last_epoch) end)
end

return M
