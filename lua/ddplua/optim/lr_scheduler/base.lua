-- lua/ddplua/optim/lr_scheduler/base.lua: what every learning-rate scheduler shares
-- (torch.optim.lr_scheduler 1.13's _LRScheduler) and the option helpers of their files.
-- defines: base.LRScheduler (the base class), base.num(name, opts, k, default, level),
--          base.check_opts(name, opts, known), base.per_group(name, opt, k, v, level),
--          base.copy(v), base.is_optimizer(v).
--
-- As PyTorch: construction records group.initial_lr, then takes step 0 (so the lr is already
-- the schedule's first value); step() advances last_epoch by one and writes each group's lr;
-- step(epoch) (what SequentialLR uses at a milestone) jumps to that epoch, by the scheduler's
-- closed form (_get_closed_form_lr) where it has one. state_dict() is every field but the
-- optimizer (and LambdaLR's functions); load_state_dict(sd) sets them back, so a new scheduler
-- over the same optimizer continues identically.
local class = require 'ddplua.class'

local base = {}

-- A deep copy of plain tables (no metatables in scheduler state).
local function copy(v)
    if type(v) ~= 'table' then return v end
    local out = {}
    for k, x in pairs(v) do out[k] = copy(x) end
    return out
end
base.copy = copy

function base.is_optimizer(v)
    return type(v) == 'table' and type(v.param_groups) == 'table' and type(v.step) == 'function'
end

-- Sched(opt, opts): checks the optimizer, runs the class's init(opts), then takes step 0. The
-- instance's own __name field is part of what state_dict() saves.
local function construct(cls, opt, opts)
    local self = setmetatable({optimizer = opt, __name = cls.__name}, cls)
    if not base.is_optimizer(opt) then
        error(cls.__name .. ': expected an optimizer as argument 1', 2)
    end
    cls.init(self, opts)
    self:_initial()
    return self
end

local LRScheduler = class.new('LRScheduler', nil, construct)
base.LRScheduler = LRScheduler

-- opts[k] as a number (or default when nil), with an error naming the scheduler. The level
-- default suits a helper called from init: the error names the constructor's caller.
function base.num(name, opts, k, default, level)
    local v = opts[k]
    if v == nil then v = default end
    if type(v) ~= 'number' or v ~= v then
        error(string.format('%s: expected a number for %s, got %s', name, k, tostring(v)),
              level or 4)
    end
    return v
end

-- opts (nil: {}) with every key known, else an error naming the first unknown one.
function base.check_opts(name, opts, known, level)
    if opts == nil then return {} end
    if type(opts) ~= 'table' then
        error(name .. ': expected an options table as argument 2', level or 4)
    end
    for k in pairs(opts) do
        if not known[k] then error(string.format("%s: unknown option '%s'", name, k), level or 4) end
    end
    return opts
end

-- v (a number, or a list of one number per group of opt) as a list of one number per group.
function base.per_group(name, opt, k, v, level)
    local n = #opt.param_groups
    local out = {}
    if type(v) == 'table' then
        if #v ~= n then
            error(string.format('%s: expected %d values for %s, got %d', name, n, k, #v), level)
        end
        for i = 1, n do out[i] = v[i] end
    else
        for i = 1, n do out[i] = v end
    end
    for i = 1, n do
        if type(out[i]) ~= 'number' or out[i] ~= out[i] then
            error(string.format('%s: expected a number (or one per group) for %s, got %s', name,
                                k, tostring(out[i])), level)
        end
    end
    return out
end

function LRScheduler:_initial()
    self.base_lrs = {}
    for i, g in ipairs(self.optimizer.param_groups) do
        if g.initial_lr == nil then g.initial_lr = g.lr end
        self.base_lrs[i] = g.initial_lr
    end
    self.last_epoch = -1
    self:_initial_step()
end

function LRScheduler:_initial_step() self:step() end

-- step(): the next epoch; step(epoch): jump to epoch (PyTorch's deprecated form, which
-- SequentialLR uses at its milestones).
function LRScheduler:step(epoch)
    local lrs
    if epoch == nil then
        self.last_epoch = self.last_epoch + 1
        lrs = self:get_lr()
    else
        if math.type(epoch) ~= 'integer' then
            error(self.__name .. ': step(epoch) expects an integer epoch, got ' .. tostring(epoch),
                  2)
        end
        self.last_epoch = epoch
        lrs = self._get_closed_form_lr and self:_get_closed_form_lr() or self:get_lr()
    end
    self._last_lr = {}
    for i, g in ipairs(self.optimizer.param_groups) do
        g.lr = lrs[i]
        self._last_lr[i] = lrs[i]
    end
end

-- The learning rates the last step() set, one per group.
function LRScheduler:get_last_lr() return copy(self._last_lr) end

-- fn(lr, base_lr, i) for each group i.
function LRScheduler:_lrs(fn)
    local out = {}
    for i, g in ipairs(self.optimizer.param_groups) do out[i] = fn(g.lr, self.base_lrs[i], i) end
    return out
end

-- Fields state_dict leaves out (the optimizer; LambdaLR's functions, which are not state).
LRScheduler._not_state = {optimizer = true, lr_lambdas = true}

-- Everything but the optimizer (and functions), deep-copied, as PyTorch.
function LRScheduler:state_dict()
    local sd = {}
    for k, v in pairs(self) do
        if not self._not_state[k] and type(v) ~= 'function' then sd[k] = copy(v) end
    end
    return sd
end

function LRScheduler:load_state_dict(sd)
    if type(sd) ~= 'table' then
        error(self.__name .. ': load_state_dict: expected a table from state_dict()', 2)
    end
    if sd.__name ~= nil and sd.__name ~= self.__name then
        error(string.format('%s: load_state_dict: the state dict is a %s\'s', self.__name,
                            tostring(sd.__name)), 2)
    end
    for k, v in pairs(sd) do self[k] = copy(v) end
end

return base
