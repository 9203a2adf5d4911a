-- lua/ddplua/optim/Optimizer.lua: the base of every optimizer (torch.optim.Optimizer).
-- defines: Optimizer:extend(name, defaults) (a subclass: ddplua/class.lua), Optimizer.new via
--          Class(params, opts), opt.param_groups, opt.state, opt:add_param_group(group),
--          opt:zero_grad([set_to_none | {set_to_none = b}]), opt:state_dict(),
--          opt:load_state_dict(sd), opt:step([closure]) (calls self:_update(group) for each
--          group); for subclasses, _with_grads, _check_number and _check_boolean.
--
-- `params` is a list of tensors or of groups ({params = {...}, lr = ..., ...}); each group
-- gets the optimizer's options as defaults. `state` is keyed by the parameter tensor, as in
-- PyTorch. state_dict() uses PyTorch's layout: parameters numbered from 0 across groups in
-- order, {state = {[i] = {...}}, param_groups = {{lr = ..., params = {0, 1}}, ...}}; its state
-- tensors are the live buffers (save it, or clone, before stepping on). load_state_dict()
-- copies the buffers (cast to each parameter's dtype and device), so the optimizer owns them.
local ddpl = require 'ddplua'
local class = require 'ddplua.class'

-- Class(params, opts) runs cls.new, which a subclass may replace.
local function construct(cls, ...)
    local ok, opt = pcall(cls.new, cls, ...)
    if not ok then class.reraise(opt, 2) end -- errors at the line that made the optimizer
    return opt
end

local Optimizer = class.new('Optimizer', nil, construct)

-- A new optimizer class. defaults: option -> default value (ddpl.optim.REQUIRED: no default).
function Optimizer:extend(name, defaults)
    local cls = class.new(name, self)
    cls.defaults = defaults
    return cls
end

Optimizer.REQUIRED = setmetatable({}, {__tostring = function() return '<required>' end})

local function copy(v)
    if type(v) ~= 'table' or ddpl.is_tensor(v) then return v end
    local out = {}
    for k, x in pairs(v) do out[k] = copy(x) end
    return out
end
Optimizer._copy_option = copy -- for optimizers that keep groups of their own (ZeRO's shard)

function Optimizer.new(cls, params, opts)
    local name = cls.__name
    if type(params) ~= 'table' then
        error(string.format('%s: expected a list of tensors or of parameter groups as argument 1, '
                            .. 'got %s', name, type(params)), 3)
    end
    opts = opts or {}
    if type(opts) ~= 'table' then
        error(string.format('%s: expected an options table as argument 2, got %s', name,
                            type(opts)), 3)
    end
    local self = setmetatable({state = {}, param_groups = {}, defaults = {}}, cls)
    for k, v in pairs(opts) do
        if cls.defaults[k] == nil then error(string.format("%s: unknown option '%s'", name, k), 3) end
    end
    for k, v in pairs(cls.defaults) do
        if opts[k] ~= nil then self.defaults[k] = copy(opts[k]) else self.defaults[k] = v end
    end
    if #params == 0 then error(name .. ': optimizer got an empty parameter list', 3) end
    if ddpl.is_tensor(params[1]) then
        self:add_param_group({params = params}, 4)
    else
        for _, g in ipairs(params) do self:add_param_group(g, 4) end
    end
    return self
end

function Optimizer:__tostring()
    local lines = {self.__name .. ' ('}
    for i, g in ipairs(self.param_groups) do
        lines[#lines + 1] = string.format('Parameter Group %d', i - 1)
        local keys = {}
        for k in pairs(g) do if k ~= 'params' then keys[#keys + 1] = k end end
        table.sort(keys)
        for _, k in ipairs(keys) do
            local v = g[k]
            if type(v) == 'table' then
                local parts = {}
                for j, x in ipairs(v) do parts[j] = tostring(x) end
                v = '(' .. table.concat(parts, ', ') .. ')'
            end
            lines[#lines + 1] = string.format('    %s: %s', k, tostring(v))
        end
    end
    lines[#lines + 1] = ')'
    return table.concat(lines, '\n')
end

-- Adds a group: {params = tensor or list of tensors, option = value, ...}.
function Optimizer:add_param_group(group, level)
    level = level or 2
    local name = self.__name
    if type(group) ~= 'table' or ddpl.is_tensor(group) then
        error(name .. ': a parameter group must be a table with a params list', level)
    end
    local ps = group.params
    if ddpl.is_tensor(ps) then ps = {ps} end
    if type(ps) ~= 'table' then
        error(name .. ': a parameter group needs params = a list of tensors', level)
    end
    local g = {}
    for k, v in pairs(group) do
        if k ~= 'params' and self.defaults[k] == nil then
            error(string.format("%s: unknown option '%s' in a parameter group", name, k), level)
        end
        g[k] = copy(v)
    end
    g.params = {}
    local seen = {}
    for _, other in ipairs(self.param_groups) do
        for _, p in ipairs(other.params) do seen[p] = true end
    end
    for i, p in ipairs(ps) do
        if not ddpl.is_tensor(p) then
            error(string.format('%s: parameter %d of a group is a %s, not a tensor', name, i,
                                type(p)), level)
        end
        if not p:is_leaf() then
            error(string.format("%s: can't optimize a non-leaf tensor (parameter %d)", name, i),
                  level)
        end
        if seen[p] then
            error(name .. ': some parameters appear in more than one parameter group', level)
        end
        seen[p] = true
        g.params[i] = p
    end
    for k, v in pairs(self.defaults) do
        if g[k] == nil then
            if v == Optimizer.REQUIRED then
                error(string.format('%s: option %s is required', name, k), level)
            end
            g[k] = copy(v)
        end
    end
    if self._check_group then self:_check_group(g, level + 1) end
    self.param_groups[#self.param_groups + 1] = g
end

-- Sets every gradient to nil (PyTorch 2's default), or zeroes it in place.
function Optimizer:zero_grad(set_to_none)
    if type(set_to_none) == 'table' then set_to_none = set_to_none.set_to_none end
    if set_to_none == nil then set_to_none = true end
    if type(set_to_none) ~= 'boolean' then
        error('zero_grad: expected a boolean or {set_to_none = boolean}, got '
            .. type(set_to_none), 2)
    end
    for _, g in ipairs(self.param_groups) do
        for _, p in ipairs(g.params) do
            if set_to_none then
                p.grad = nil -- without reading it first (ddpl._release says why)
            else
                local grad <close> = p.grad
                if grad ~= nil then
                    local d <close> = grad:detach()
                    d:zero_()
                end
            end
        end
    end
end

-- Runs closure (with gradients enabled) if given, then one update; returns the closure's value.
function Optimizer:step(closure)
    local loss
    if closure ~= nil then loss = ddpl.enable_grad(closure) end
    for _, g in ipairs(self.param_groups) do self:_update(g) end
    return loss
end

function Optimizer:state_dict()
    local index, next_index = {}, 0
    local groups = {}
    for gi, g in ipairs(self.param_groups) do
        local packed = {}
        for k, v in pairs(g) do if k ~= 'params' then packed[k] = copy(v) end end
        packed.params = {}
        for i, p in ipairs(g.params) do
            if index[p] == nil then
                index[p] = next_index
                next_index = next_index + 1
            end
            packed.params[i] = index[p]
        end
        groups[gi] = packed
    end
    local state = {}
    for p, s in pairs(self.state) do
        if index[p] ~= nil then
            local entry = {}
            for k, v in pairs(s) do entry[k] = v end
            state[index[p]] = entry
        end
    end
    return {state = state, param_groups = groups}
end

function Optimizer:load_state_dict(sd)
    local name = self.__name
    if type(sd) ~= 'table' or type(sd.param_groups) ~= 'table' then
        error(name .. ': load_state_dict: expected a table with param_groups and state', 2)
    end
    local groups = sd.param_groups
    if #groups ~= #self.param_groups then
        error(string.format('%s: load_state_dict: loaded state dict has %d parameter groups, the '
                            .. 'optimizer has %d', name, #groups, #self.param_groups), 2)
    end
    local by_index = {}
    for gi, g in ipairs(self.param_groups) do
        local saved = groups[gi]
        if type(saved.params) ~= 'table' or #saved.params ~= #g.params then
            error(string.format('%s: load_state_dict: parameter group %d has %d parameters in the '
                                .. 'state dict but %d in the optimizer', name, gi - 1,
                                type(saved.params) == 'table' and #saved.params or 0, #g.params), 2)
        end
        for i, p in ipairs(g.params) do by_index[saved.params[i]] = p end
    end
    local state = {}
    for idx, s in pairs(sd.state or {}) do
        local p = by_index[idx]
        if p == nil then
            error(string.format('%s: load_state_dict: state for parameter %s, which no group '
                                .. 'lists', name, tostring(idx)), 2)
        end
        local entry = {}
        for k, v in pairs(s) do
            if ddpl.is_tensor(v) then
                if k == 'step' then
                    v = v:item()
                    if v == math.floor(v) then v = math.tointeger(v) end
                else
                    if not ddpl.is_tensor(p) or v:numel() ~= p:numel() then
                        error(string.format('%s: load_state_dict: state %s of parameter %s has '
                                            .. '%d elements, the parameter %d', name, k,
                                            tostring(idx), v:numel(), p:numel()), 2)
                    end
                    v = v:detach():to(p.dtype):to(p.device):clone():reshape(p:shape())
                end
            end
            entry[k] = v
        end
        state[p] = entry
    end
    self.state = state
    for gi, g in ipairs(self.param_groups) do
        for k, v in pairs(groups[gi]) do
            if k ~= 'params' then g[k] = copy(v) end
        end
    end
end

-- Each group's parameters that have a gradient, with their state tables (created empty). The
-- caller closes the gradients once done (ddpl._release: DDP reuses memory nothing holds).
function Optimizer:_with_grads(group)
    local ps, gs, ss = {}, {}, {}
    for _, p in ipairs(group.params) do
        local g = p.grad
        if g ~= nil then
            local s = self.state[p]
            if s == nil then
                s = {}
                self.state[p] = s
            end
            ps[#ps + 1], gs[#gs + 1], ss[#ss + 1] = p, g, s
        end
    end
    return ps, gs, ss
end

-- Checks that option k of group g is a number >= lo (and < hi when given).
function Optimizer:_check_number(g, k, lo, hi, level)
    local v = g[k]
    if type(v) ~= 'number' or v ~= v or v < lo or (hi and v >= hi) then
        error(string.format('%s: invalid %s value: %s', self.__name, k, tostring(v)), level + 1)
    end
end

-- Checks that option k of group g is a boolean.
function Optimizer:_check_boolean(g, k, level)
    local v = g[k]
    if type(v) ~= 'boolean' then
        error(string.format('%s: invalid %s value: expected a boolean, got %s', self.__name, k,
                            tostring(v)), level + 1)
    end
end

return Optimizer
