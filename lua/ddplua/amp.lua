-- lua/ddplua/amp.lua: ddpl.amp, loss scaling for mixed-precision training (torch.cuda.amp
--   1.13's GradScaler, on every device).
-- defines: amp.GradScaler([{init_scale=65536, growth_factor=2, backoff_factor=0.5,
--          growth_interval=2000, enabled=true}]) with scale(loss or list of tensors),
--          unscale_(opt), step(opt) (skipped when a gradient holds inf or NaN), update([new_scale]),
--          get_scale(), is_enabled(), state_dict(), load_state_dict(sd), and the getters and
--          setters of growth_factor, backoff_factor and growth_interval.
--
-- The scale is a float32 value kept as a Lua number (rounded to float32 wherever PyTorch's
-- float32 tensor would round it), so update() costs no device work; the per-step check is
-- native: unscale_ runs ddpl._amp_unscale_ (one pass per gradient: multiply by 1/scale, flag
-- inf/NaN in a one-element float32 tensor per device), and step() reads one flag per device.
-- update() follows torch._amp_update_scale_: on an inf, scale *= backoff_factor and the growth
-- count restarts; after growth_interval clean steps in a row, scale *= growth_factor (unless
-- that overflows float32). Each optimizer goes READY -> UNSCALED (unscale_) -> STEPPED (step)
-- and back to READY at update(); calling unscale_ twice, or step twice, between updates is an
-- error, as in PyTorch. enabled = false makes every method pass through (scale returns its
-- argument, step just steps). A closure passed to step() is refused (the inf check must see
-- the gradients the step uses). PyTorch disables itself without CUDA; ddplua scales on CPU
-- too (docs/internals/optim-amp.md).
local ddpl = require 'ddplua'
local class = require 'ddplua.class'

local amp = {}

local NAME = 'GradScaler'
local FLT_ROUND_LIMIT = 3.4028235677973366e38 -- doubles at or past this round to float32 inf

-- x rounded to the nearest float32 (inf beyond its range).
local function f32(x)
    if x ~= x or math.abs(x) >= FLT_ROUND_LIMIT then return x ~= x and x or x * math.huge end
    return (string.unpack('<f', string.pack('<f', x)))
end

local function fail(level, fmt, ...) error(NAME .. ': ' .. fmt:format(...), level + 1) end

local READY, UNSCALED, STEPPED = 'ready', 'unscaled', 'stepped'

local GradScaler = class.new(NAME)
amp.GradScaler = GradScaler

local KNOWN = {init_scale = true, growth_factor = true, backoff_factor = true,
    growth_interval = true, enabled = true}

local function option(opts, k, default)
    local v = opts[k]
    if v == nil then return default end
    if type(v) ~= 'number' or v ~= v then
        fail(4, 'expected a number for %s, got %s', k, tostring(v))
    end
    return v
end

function GradScaler:init(opts)
    if opts == nil then opts = {} end
    if type(opts) ~= 'table' then fail(3, 'expected an options table, got %s', type(opts)) end
    for k in pairs(opts) do
        if not KNOWN[k] then fail(3, "unknown option '%s'", tostring(k)) end
    end
    local enabled = opts.enabled
    if enabled == nil then enabled = true end
    if type(enabled) ~= 'boolean' then
        fail(3, 'expected a boolean for enabled, got %s', tostring(enabled))
    end
    self._enabled = enabled
    if not enabled then return end
    self._init_scale = option(opts, 'init_scale', 65536.0)
    self._growth_factor = option(opts, 'growth_factor', 2.0)
    self._backoff_factor = option(opts, 'backoff_factor', 0.5)
    self._growth_interval = option(opts, 'growth_interval', 2000)
    if not (self._init_scale > 0) then
        fail(3, 'init_scale must be > 0, got %s', tostring(self._init_scale))
    end
    if not (self._growth_factor > 1) then
        fail(3, 'the growth factor must be > 1.0, got %s', tostring(self._growth_factor))
    end
    if not (self._backoff_factor < 1) then
        fail(3, 'the backoff factor must be < 1.0, got %s', tostring(self._backoff_factor))
    end
    if math.type(self._growth_interval) ~= 'integer' or self._growth_interval < 1 then
        fail(3, 'growth_interval must be a positive integer, got %s',
             tostring(self._growth_interval))
    end
    self._scale = nil -- set by the first scale(), as PyTorch's lazily made tensor
    self._growth_tracker = 0
    self._per_optimizer_states = setmetatable({}, {__mode = 'k'})
end

function GradScaler:is_enabled() return self._enabled end

-- The optimizer's {stage, found_inf_per_device}, made READY on first use.
function GradScaler:_state(opt)
    local st = self._per_optimizer_states[opt]
    if st == nil then
        st = {stage = READY, found_inf_per_device = {}}
        self._per_optimizer_states[opt] = st
    end
    return st
end

function GradScaler:_check_scale(funcname, level)
    if self._scale == nil then
        fail(level + 1, '%s called but the scale is not set yet: call scaler:scale(loss) earlier '
            .. 'in the iteration', funcname)
    end
end

local function scale_tensor(t, s)
    if t.dtype == 'float16' or t.dtype == 'bfloat16' then
        t = t:float() -- as PyTorch's product with its float32 scale tensor: float32
    end
    return t * s
end

-- outputs * scale: a tensor, or a (nested) list of tensors as a new list.
function GradScaler:scale(outputs)
    if not self._enabled then return outputs end
    if self._scale == nil then self._scale = f32(self._init_scale) end
    local s = self._scale
    local function apply(v)
        if ddpl.is_tensor(v) then return scale_tensor(v, s) end
        if type(v) == 'table' then
            local out = {}
            for i, x in ipairs(v) do out[i] = apply(x) end
            return out
        end
        fail(3, 'scale: outputs must be a tensor or a list of tensors, got %s', type(v))
    end
    return apply(outputs)
end

-- Divides opt's gradients by the scale in place (one native pass per gradient) and records
-- per device whether any holds inf or NaN.
function GradScaler:unscale_(opt)
    if not self._enabled then return end
    self:_check_scale('unscale_', 2)
    local st = self:_state(opt)
    if st.stage == UNSCALED then
        fail(2, 'unscale_() has already been called on this optimizer since the last update()')
    elseif st.stage == STEPPED then
        fail(2, 'unscale_() is being called after step()')
    end
    local inv_scale = f32(1.0 / self._scale)
    local grads, founds, per_device = {}, {}, {}
    for _, g in ipairs(opt.param_groups) do
        for _, p in ipairs(g.params) do
            local grad = p.grad
            if grad ~= nil then
                if grad.dtype == 'float16' then
                    ddpl._release(grads)
                    fail(2, 'unscale_: attempting to unscale float16 gradients (keep the '
                        .. 'parameters in float32)')
                end
                local dev = tostring(grad.device)
                local f = per_device[dev]
                if f == nil then
                    f = ddpl.zeros(1, {dtype = 'float32', device = grad.device})
                    per_device[dev] = f
                end
                grads[#grads + 1], founds[#founds + 1] = grad, f
            end
        end
    end
    local ok, err = pcall(ddpl._amp_unscale_, grads, founds, inv_scale)
    ddpl._release(grads)
    if not ok then error(err, 2) end
    st.found_inf_per_device = per_device
    st.stage = UNSCALED
end

-- Steps opt unless a gradient held inf or NaN (unscaling first if unscale_ was not called).
-- Returns what opt:step() returned, or nil when skipped.
function GradScaler:step(opt, ...)
    if not self._enabled then return opt:step(...) end
    if select('#', ...) > 0 then
        fail(2, 'step: a closure is not supported while the scaler is enabled')
    end
    self:_check_scale('step', 2)
    local st = self:_state(opt)
    if st.stage == STEPPED then
        fail(2, 'step() has already been called since the last update()')
    end
    if st.stage == READY then self:unscale_(opt) end
    local found, any = 0, false
    for _, f in pairs(st.found_inf_per_device) do
        found = found + f:item()
        any = true
    end
    if not any then fail(2, 'no inf checks were recorded for this optimizer (no gradients)') end
    local ret
    if found == 0 then ret = opt:step() end
    st.stage = STEPPED
    return ret
end

-- Adjusts the scale from this iteration's inf checks (or sets it to new_scale: a number or a
-- one-element tensor), and makes every optimizer READY again.
function GradScaler:update(new_scale)
    if not self._enabled then return end
    self:_check_scale('update', 2)
    if new_scale ~= nil then
        if ddpl.is_tensor(new_scale) then
            if new_scale:numel() ~= 1 then
                fail(2, 'update: new_scale must be a number or a one-element tensor, got %d '
                    .. 'elements', new_scale:numel())
            end
            new_scale = new_scale:item()
        end
        if type(new_scale) ~= 'number' then
            fail(2, 'update: new_scale must be a number or a one-element tensor, got %s',
                 type(new_scale))
        end
        self._scale = f32(new_scale)
    else
        local found, any = 0, false
        for _, st in pairs(self._per_optimizer_states) do
            for _, f in pairs(st.found_inf_per_device) do
                found = found + f:item()
                any = true
            end
        end
        if not any then fail(2, 'update: no inf checks were recorded prior to update()') end
        if found > 0 then
            self._scale = f32(self._scale * self._backoff_factor)
            self._growth_tracker = 0
        else
            local successful = self._growth_tracker + 1
            if successful == self._growth_interval then
                local grown = f32(self._scale * self._growth_factor)
                if grown < math.huge then self._scale = grown end
                self._growth_tracker = 0
            else
                self._growth_tracker = successful
            end
        end
    end
    self._per_optimizer_states = setmetatable({}, {__mode = 'k'})
end

function GradScaler:get_scale()
    if not self._enabled then return 1.0 end
    return self._scale or self._init_scale
end

function GradScaler:get_growth_factor() return self._growth_factor end
function GradScaler:set_growth_factor(v) self._growth_factor = v end
function GradScaler:get_backoff_factor() return self._backoff_factor end
function GradScaler:set_backoff_factor(v) self._backoff_factor = v end
function GradScaler:get_growth_interval() return self._growth_interval end
function GradScaler:set_growth_interval(v) self._growth_interval = v end

-- PyTorch's keys; {} when disabled.
function GradScaler:state_dict()
    if not self._enabled then return {} end
    return {
        scale = self:get_scale(),
        growth_factor = self._growth_factor,
        backoff_factor = self._backoff_factor,
        growth_interval = self._growth_interval,
        _growth_tracker = self._growth_tracker,
    }
end

function GradScaler:load_state_dict(sd)
    if not self._enabled then return end
    if type(sd) ~= 'table' or next(sd) == nil then
        fail(2, 'load_state_dict: the source state dict is empty, possibly because it was '
            .. 'saved from a disabled GradScaler')
    end
    for _, k in ipairs({'scale', 'growth_factor', 'backoff_factor', 'growth_interval',
                        '_growth_tracker'}) do
        if type(sd[k]) ~= 'number' then
            fail(2, 'load_state_dict: expected a number for %s, got %s', k, tostring(sd[k]))
        end
    end
    self._init_scale = sd.scale
    if self._scale ~= nil then self._scale = f32(sd.scale) end
    self._growth_factor = sd.growth_factor
    self._backoff_factor = sd.backoff_factor
    self._growth_interval = math.tointeger(sd.growth_interval) or sd.growth_interval
    self._growth_tracker = math.tointeger(sd._growth_tracker) or sd._growth_tracker
end

return amp
