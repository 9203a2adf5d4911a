-- lua/ddplua/nn/module_state.lua: the registries inside an nn.Module instance.
-- defines: State.new() (a fresh instance table), State.get(m, k) (the __index part that finds
--          registered names), State.set(m, k, v) (__newindex: registration by assignment),
--          State.register(m, kind, name, v, fname [, persistent]), State.entries(m, kind)
--          (ordered {name, value} pairs, nil values included), State.remove(m, name) (drops a
--          registered name and its slot: the dict containers' pop), State.persistent(m, name),
--          State.attributes(m) (the plain attributes: module_copy.lua).
--
-- Each registry is an ordered dictionary (keys in registration order, a key keeps its place
-- when re-assigned) because named_parameters and state_dict must list names in the order
-- PyTorch does for the same definitions: a model's parameters are matched by position in
-- optimizer states and by DDP's buckets. A registered name may hold nil (PyTorch's None, as a
-- Linear without bias has): it is skipped when listing but keeps its slot.
--
-- The registries are raw fields with '__' names so that no user field can collide with them;
-- everything else an instance holds sits in __attrs and is reached through __index.
local ddpl = require 'ddplua'
local Parameter = require 'ddplua.nn.Parameter'

local State = {}
State.is_module = function() return false end -- set by Module.lua (it requires this file)

local KIND_FIELD = {params = '__params', buffers = '__buffers', modules = '__modules'}
local KIND_WORD = {params = 'parameter', buffers = 'buffer', modules = 'module'}

local function od()
    return {keys = {}, vals = {}, pos = {}}
end

local function od_set(d, k, v)
    if not d.pos[k] then
        d.keys[#d.keys + 1] = k
        d.pos[k] = #d.keys
    end
    d.vals[k] = v
end

local function od_del(d, k)
    local i = d.pos[k]
    if not i then return end
    table.remove(d.keys, i)
    d.pos[k], d.vals[k] = nil, nil
    for j = i, #d.keys do d.pos[d.keys[j]] = j end
end

function State.new()
    return {__params = od(), __buffers = od(), __modules = od(), __attrs = {},
            __nonpersistent = {}}
end

-- Runs on every field read of a module (self.fc1 in forward), so it is kept flat.
function State.get(m, k)
    local d = rawget(m, '__params')
    if d.pos[k] then return d.vals[k], true end
    d = rawget(m, '__buffers')
    if d.pos[k] then return d.vals[k], true end
    d = rawget(m, '__modules')
    if d.pos[k] then return d.vals[k], true end
    local v = rawget(m, '__attrs')[k]
    if v ~= nil then return v, true end
    return nil, false
end

local function check_name(m, name, fname, kind)
    if type(name) ~= 'string' or name == '' or name:find('.', 1, true) then
        error(string.format("%s:%s: a %s name must be a non-empty string without '.', got %s",
                            m.__name, fname, KIND_WORD[kind], name == '' and "''" or
                            tostring(name)), 4)
    end
    -- a registered name would shadow a method (self.forward = nn.Linear(...) breaks calls)
    local cls = getmetatable(m).__class
    if cls and cls[name] ~= nil then
        error(string.format("%s:%s: '%s' is already a method or field of %s", m.__name, fname,
                            name, m.__name), 4)
    end
end

-- Puts v under name in registry kind, removing the name from every other place.
function State.register(m, kind, name, v, fname, persistent)
    check_name(m, name, fname, kind)
    for k, field in pairs(KIND_FIELD) do
        if k ~= kind then od_del(rawget(m, field), name) end
    end
    rawget(m, '__attrs')[name] = nil
    od_set(rawget(m, KIND_FIELD[kind]), name, v)
    if kind == 'buffers' then rawget(m, '__nonpersistent')[name] = not persistent or nil end
end

-- __newindex: what the value is decides where it goes, as in PyTorch's Module.__setattr__.
function State.set(m, k, v)
    if State.is_module(v) then return State.register(m, 'modules', k, v, 'setattr') end
    if Parameter.is(v) then return State.register(m, 'params', k, v, 'setattr') end
    local params, buffers, modules = rawget(m, '__params'), rawget(m, '__buffers'),
        rawget(m, '__modules')
    if params.pos[k] then
        if v ~= nil then
            error(string.format("%s: cannot assign %s as parameter '%s' (an nn.Parameter or nil "
                                .. 'expected)', m.__name, ddpl.is_tensor(v) and 'a plain tensor'
                                or type(v), k), 2)
        end
        params.vals[k] = nil
    elseif buffers.pos[k] then
        if v ~= nil and not ddpl.is_tensor(v) then
            error(string.format("%s: cannot assign a %s as buffer '%s' (a tensor or nil expected)",
                                m.__name, type(v), k), 2)
        end
        buffers.vals[k] = v
    elseif modules.pos[k] then
        if v ~= nil then
            error(string.format("%s: cannot assign a %s as child module '%s' (a Module or nil "
                                .. 'expected)', m.__name, type(v), k), 2)
        end
        modules.vals[k] = nil
    else
        rawget(m, '__attrs')[k] = v
    end
end

function State.remove(m, name)
    for _, field in pairs(KIND_FIELD) do od_del(rawget(m, field), name) end
    rawget(m, '__nonpersistent')[name] = nil
end

-- The registry's {name, value} pairs in order, nil values included (state_dict needs the
-- slots; listings skip them).
function State.entries(m, kind)
    local d = rawget(m, KIND_FIELD[kind])
    local out = {}
    for i, k in ipairs(d.keys) do out[i] = {k, d.vals[k]} end
    return out
end

function State.persistent(m, name)
    return not rawget(m, '__nonpersistent')[name]
end

-- The plain attributes (everything not registered) as a new name -> value table.
function State.attributes(m)
    local out = {}
    for k, v in pairs(rawget(m, '__attrs')) do out[k] = v end
    return out
end

return State
