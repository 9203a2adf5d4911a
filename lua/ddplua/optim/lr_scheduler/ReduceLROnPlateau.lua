-- lua/ddplua/optim/lr_scheduler/ReduceLROnPlateau.lua: optim.lr_scheduler.ReduceLROnPlateau
--   (torch 1.13's): multiplies each group's lr by factor once a metric has stopped improving
--   for more than `patience` steps.
-- defines: ReduceLROnPlateau(opt, {mode='min'|'max', factor=0.1, patience=10, threshold=1e-4,
--          threshold_mode='rel'|'abs', cooldown=0, min_lr=0 (or one per group), eps=1e-8}),
--          with step(metric) (a number or a one-element tensor), get_last_lr(), state_dict(),
--          load_state_dict(sd), and the fields best, num_bad_epochs, cooldown_counter,
--          last_epoch.
--
-- As PyTorch it is not an epoch scheduler (SequentialLR refuses it) and leaves the lrs alone
-- at construction. A reduction happens when num_bad_epochs > patience, then cooldown steps
-- count no bad epochs; a reduction smaller than eps is skipped. get_last_lr() (PyTorch 2.2's;
-- 1.13 has only the field) gives the groups' lrs after the last step, or at construction.
local class = require 'ddplua.class'
local base = require 'ddplua.optim.lr_scheduler.base'

local NAME = 'ReduceLROnPlateau'

local Plateau = class.new(NAME)

local KNOWN = {mode = true, factor = true, patience = true, threshold = true,
    threshold_mode = true, cooldown = true, min_lr = true, eps = true}

local function check_modes(mode, threshold_mode, level)
    if mode ~= 'min' and mode ~= 'max' then
        error(string.format("%s: mode must be 'min' or 'max', got %s", NAME, tostring(mode)),
              level)
    end
    if threshold_mode ~= 'rel' and threshold_mode ~= 'abs' then
        error(string.format("%s: threshold_mode must be 'rel' or 'abs', got %s", NAME,
                            tostring(threshold_mode)), level)
    end
end

function Plateau:init(opt, opts)
    if not base.is_optimizer(opt) then error(NAME .. ': expected an optimizer as argument 1', 3) end
    opts = base.check_opts(NAME, opts, KNOWN)
    self.optimizer = opt
    self.factor = base.num(NAME, opts, 'factor', 0.1)
    if self.factor >= 1 then
        error(NAME .. ': factor must be < 1, got ' .. tostring(self.factor), 3)
    end
    self.min_lrs = base.per_group(NAME, opt, 'min_lr', opts.min_lr or 0, 4)
    self.patience = base.num(NAME, opts, 'patience', 10)
    self.cooldown = base.num(NAME, opts, 'cooldown', 0)
    self.threshold = base.num(NAME, opts, 'threshold', 1e-4)
    self.eps = base.num(NAME, opts, 'eps', 1e-8)
    self.mode = opts.mode or 'min'
    self.threshold_mode = opts.threshold_mode or 'rel'
    check_modes(self.mode, self.threshold_mode, 3)
    self.mode_worse = self.mode == 'min' and math.huge or -math.huge
    self.last_epoch = 0
    self:_reset()
    self._last_lr = {}
    for i, g in ipairs(opt.param_groups) do self._last_lr[i] = g.lr end
end

function Plateau:_reset()
    self.best = self.mode_worse
    self.cooldown_counter = 0
    self.num_bad_epochs = 0
end

function Plateau:is_better(a, best)
    local t = self.threshold
    if self.mode == 'min' then
        if self.threshold_mode == 'rel' then return a < best * (1 - t) end
        return a < best - t
    end
    if self.threshold_mode == 'rel' then return a > best * (t + 1) end
    return a > best + t
end

function Plateau:step(metric)
    local current = metric
    if type(metric) == 'userdata' or (type(metric) == 'table' and metric.item) then
        current = metric:item()
    end
    if type(current) ~= 'number' then
        error(NAME .. ': step expects the metric (a number or one-element tensor), got '
            .. type(metric), 2)
    end
    self.last_epoch = self.last_epoch + 1
    if self:is_better(current, self.best) then
        self.best = current
        self.num_bad_epochs = 0
    else
        self.num_bad_epochs = self.num_bad_epochs + 1
    end
    if self.cooldown_counter > 0 then
        self.cooldown_counter = self.cooldown_counter - 1
        self.num_bad_epochs = 0 -- bad epochs in cooldown do not count
    end
    if self.num_bad_epochs > self.patience then
        self:_reduce_lr()
        self.cooldown_counter = self.cooldown
        self.num_bad_epochs = 0
    end
    self._last_lr = {}
    for i, g in ipairs(self.optimizer.param_groups) do self._last_lr[i] = g.lr end
end

function Plateau:_reduce_lr()
    for i, g in ipairs(self.optimizer.param_groups) do
        local old = g.lr
        local new = math.max(old * self.factor, self.min_lrs[i])
        if old - new > self.eps then g.lr = new end
    end
end

function Plateau:in_cooldown() return self.cooldown_counter > 0 end

function Plateau:get_last_lr() return base.copy(self._last_lr) end

function Plateau:state_dict()
    local sd = {__name = NAME}
    for k, v in pairs(self) do if k ~= 'optimizer' then sd[k] = base.copy(v) end end
    return sd
end

function Plateau:load_state_dict(sd)
    if type(sd) ~= 'table' or (sd.__name ~= nil and sd.__name ~= NAME) then
        error(NAME .. ': load_state_dict: expected a state dict from ReduceLROnPlateau', 2)
    end
    for k, v in pairs(sd) do if k ~= '__name' then self[k] = base.copy(v) end end
    check_modes(self.mode, self.threshold_mode, 2)
end

return Plateau
