-- lua/ddplua/nn/dict_container.lua: the methods ModuleDict and ParameterDict share.
-- defines: install(Cls, kind, accepts, what) adds to Cls: keys(), values(), items() ({key,
--          value} pairs, a for loop can drive them: `for k, v in d:items() do`), contains(key),
--          pop(key), clear(), update(entries), iter(), len (#d); entries are a list of
--          {key, value} pairs (kept in that order) or a map {key = value} (taken in sorted key
--          order: a Lua table keeps no insertion order; PyTorch's ParameterDict sorts a plain
--          dict too).
--
-- Entries are registered under their key (kind 'modules' or 'params'), so d[key] and d.key
-- read them, d[key] = v adds or replaces one, and state_dict names are the keys as PyTorch's.
-- A key must be a non-empty string without '.' that is not a method name (keys, items, ...).
local State = require 'ddplua.nn.module_state'

local function install(Cls, kind, accepts, what)
    local function check(self, k, v, level)
        if type(k) ~= 'string' then
            error(string.format('%s: keys must be strings, got %s', self.__name, tostring(k)),
                  level)
        end
        local ok, converted = accepts(v)
        if not ok then
            error(string.format("%s: the value of '%s' must be %s, got %s", self.__name, k, what,
                                type(v)), level)
        end
        return converted
    end

    -- {key, value} pairs from a list of pairs or a map
    local function normalise(self, entries)
        if type(entries) ~= 'table' then
            error(string.format('%s: expected a list of {key, value} pairs or a table of '
                                .. 'key = value, got %s', self.__name, type(entries)), 4)
        end
        local out = {}
        if entries[1] ~= nil then
            for i, pair in ipairs(entries) do
                if type(pair) ~= 'table' or #pair ~= 2 then
                    error(string.format('%s: entry %d must be a {key, value} pair', self.__name,
                                        i), 4)
                end
                out[i] = {pair[1], pair[2]}
            end
            return out
        end
        for k, v in pairs(entries) do out[#out + 1] = {k, v} end
        for _, p in ipairs(out) do
            if type(p[1]) ~= 'string' then
                error(string.format('%s: keys must be strings, got %s', self.__name,
                                    tostring(p[1])), 4)
            end
        end
        table.sort(out, function(a, b) return a[1] < b[1] end)
        return out
    end

    function Cls:init(entries)
        if entries ~= nil then self:update(entries) end
    end

    function Cls:update(entries)
        for _, p in ipairs(normalise(self, entries)) do
            local v = check(self, p[1], p[2], 3)
            State.register(self, kind, p[1], v, 'update')
        end
        return self
    end

    function Cls:items()
        local out = {}
        for _, e in ipairs(State.entries(self, kind)) do
            if e[2] ~= nil then out[#out + 1] = e end
        end
        local i = 0
        return setmetatable(out, {__call = function()
            i = i + 1
            if out[i] then return out[i][1], out[i][2] end
        end})
    end

    function Cls:keys()
        local out = {}
        for i, e in ipairs(self:items()) do out[i] = e[1] end
        return out
    end

    function Cls:values()
        local out = {}
        for i, e in ipairs(self:items()) do out[i] = e[2] end
        return out
    end

    function Cls:iter() return self:items() end

    function Cls:len() return #self:items() end

    function Cls:contains(key)
        for _, e in ipairs(State.entries(self, kind)) do
            if e[1] == key then return e[2] ~= nil end
        end
        return false
    end

    -- removes key and returns its value (an error when absent, as Python's KeyError)
    function Cls:pop(key)
        if not self:contains(key) then
            error(string.format("%s:pop: no key '%s'", self.__name, tostring(key)), 2)
        end
        local v = State.get(self, key)
        State.remove(self, key)
        return v
    end

    function Cls:clear()
        for _, k in ipairs(self:keys()) do State.remove(self, k) end
    end

    function Cls:forward()
        error(self.__name .. ': a ' .. self.__name .. ' has no forward; call its entries', 2)
    end
end

return {install = install}
