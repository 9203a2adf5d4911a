-- lua/ddplua/optim/lr_scheduler/SequentialLR.lua: optim.lr_scheduler.SequentialLR (torch
--   1.13's): runs schedulers one after another, switching at the milestones.
-- defines: SequentialLR(opt, {schedulers = {s1, s2, ...}, milestones = {m1, ...}}), one
--          milestone fewer than schedulers, every scheduler over opt.
--
-- As PyTorch: construction resets each group's lr to its initial_lr, moves every scheduler one
-- epoch back and re-takes the first one's step 0. step() advances last_epoch; the scheduler in
-- force is the one after the milestones passed; at a milestone it starts with step(0) (its
-- closed form at epoch 0, where it has one), else step(). state_dict() holds the schedulers'
-- own state dicts under _schedulers.
local base = require 'ddplua.optim.lr_scheduler.base'

local NAME = 'SequentialLR'

local SequentialLR = base.LRScheduler:extend(NAME)

-- Not state of its own: the optimizer, and the schedulers (saved through their state_dict).
SequentialLR._not_state = {optimizer = true, _schedulers = true}

function SequentialLR:init(opts)
    opts = base.check_opts(NAME, opts, {schedulers = true, milestones = true})
    local ss, ms = opts.schedulers, opts.milestones
    if type(ss) ~= 'table' or #ss == 0 then
        error(NAME .. ': schedulers is required (a list of schedulers)', 3)
    end
    if type(ms) ~= 'table' then error(NAME .. ': milestones is required (a list of epochs)', 3) end
    for i, s in ipairs(ss) do
        if type(s) ~= 'table' or type(s.is_instance_of) ~= 'function'
            or not s:is_instance_of(base.LRScheduler) then
            error(string.format('%s: scheduler %d is not an epoch-based LR scheduler (%s)', NAME,
                                i, tostring(s)), 3)
        end
        if s.optimizer ~= self.optimizer then
            error(string.format('%s: scheduler %d belongs to another optimizer than the one '
                                .. 'passed in', NAME, i), 3)
        end
    end
    if #ms ~= #ss - 1 then
        error(string.format('%s: expected one milestone fewer than schedulers, got %d '
                            .. 'schedulers and %d milestones', NAME, #ss, #ms), 3)
    end
    for i, m in ipairs(ms) do
        if math.type(m) ~= 'integer' or (i > 1 and m < ms[i - 1]) then
            error(string.format('%s: milestones must be increasing integer epochs, got %s at %d',
                                NAME, tostring(m), i), 3)
        end
    end
    self._schedulers = {}
    for i, s in ipairs(ss) do self._schedulers[i] = s end
    self._milestones = base.copy(ms)
end

function SequentialLR:_initial()
    self.last_epoch = 0
    for _, g in ipairs(self.optimizer.param_groups) do
        if g.initial_lr == nil then
            error(NAME .. ': the optimizer\'s groups have no initial_lr (construct the '
                .. 'schedulers first)', 3)
        end
        g.lr = g.initial_lr
    end
    for _, s in ipairs(self._schedulers) do s.last_epoch = s.last_epoch - 1 end
    self._schedulers[1]:_initial_step()
    self._last_lr = self._schedulers[1]:get_last_lr()
end

function SequentialLR:step()
    self.last_epoch = self.last_epoch + 1
    local idx = 0 -- milestones passed (bisect_right)
    for _, m in ipairs(self._milestones) do if m <= self.last_epoch then idx = idx + 1 end end
    local s = self._schedulers[idx + 1]
    if idx > 0 and self._milestones[idx] == self.last_epoch then
        s:step(0)
    else
        s:step()
    end
    self._last_lr = s:get_last_lr()
end

function SequentialLR:state_dict()
    local sd = base.LRScheduler.state_dict(self)
    sd._schedulers = {}
    for i, s in ipairs(self._schedulers) do sd._schedulers[i] = s:state_dict() end
    return sd
end

function SequentialLR:load_state_dict(sd)
    if type(sd) ~= 'table' or type(sd._schedulers) ~= 'table'
        or #sd._schedulers ~= #self._schedulers then
        error(string.format('%s: load_state_dict: expected a state dict of a SequentialLR of '
                            .. '%d schedulers', NAME, #self._schedulers), 2)
    end
    local own = {}
    for k, v in pairs(sd) do if k ~= '_schedulers' then own[k] = v end end
    base.LRScheduler.load_state_dict(self, own)
    for i, s in ipairs(self._schedulers) do s:load_state_dict(sd._schedulers[i]) end
end

return SequentialLR
