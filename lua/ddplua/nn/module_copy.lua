-- lua/ddplua/nn/module_copy.lua: deep copies of modules (Python's copy.deepcopy of an nn.Module).
-- defines: deepcopy(module) -> an independent module of the same class with the same
--          parameters, buffers, children and attributes.
--
-- nn.TransformerEncoder stacks copies of the layer it is given, as PyTorch's _get_clones does.
-- A copy has the registries in the same order (so state_dict names and named_parameters match
-- the original), parameters that are new leaves with the same values and requires_grad,
-- cloned buffers, copied children and attribute tables; functions, classes, strings and numbers
-- are shared. A tensor or module that appears twice in the tree appears twice in the copy as one
-- object (the memo), so tied weights stay tied. Gradients (.grad) and hooks are not copied
-- (Python's deepcopy copies both).
local ddpl = require 'ddplua'
local Parameter = require 'ddplua.nn.Parameter'
local State = require 'ddplua.nn.module_state'

local copy_value

local function copy_tensor(t)
    local c = t:detach():clone()
    if Parameter.is(t) then return Parameter(c, t.requires_grad) end
    if t.requires_grad then c.requires_grad = true end
    return c
end

local function copy_module(m, memo)
    local c = State.new()
    setmetatable(c, getmetatable(m))
    memo[m] = c
    for _, kind in ipairs({'params', 'buffers', 'modules'}) do
        for _, kv in ipairs(State.entries(m, kind)) do
            State.register(c, kind, kv[1], copy_value(kv[2], memo), 'deepcopy',
                           kind ~= 'buffers' or State.persistent(m, kv[1]))
        end
    end
    for k, v in pairs(State.attributes(m)) do State.set(c, k, copy_value(v, memo)) end
    return c
end

function copy_value(v, memo)
    if v == nil or (type(v) ~= 'table' and type(v) ~= 'userdata') then return v end
    if memo[v] ~= nil then return memo[v] end
    if ddpl.is_tensor(v) then
        memo[v] = copy_tensor(v)
        return memo[v]
    end
    if type(v) ~= 'table' then return v end -- other userdata (process groups...) are shared
    if State.is_module(v) then return copy_module(v, memo) end
    if rawget(v, '__index') == v then return v end -- a class (ddplua/class.lua) is shared
    local c = setmetatable({}, getmetatable(v))
    memo[v] = c
    for k, x in pairs(v) do rawset(c, k, copy_value(x, memo)) end
    return c
end

local function deepcopy(m)
    if not State.is_module(m) then
        error('deepcopy: expected an nn.Module, got ' .. type(m), 2)
    end
    return copy_value(m, {})
end

return deepcopy
