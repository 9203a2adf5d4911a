-- lua/ddplua/data/class.lua: the small class mechanism of the data library.
-- defines: class(name [, parent]) -> a class; Class:extend(name); Class(...) constructs;
--          obj:is_instance_of(Class).
--
-- Same shape as nn.Module:extend (API.md): a class is a table that serves as its instances'
-- metatable; calling it makes an instance and runs `init(...)`. Metamethods (__len,
-- __tostring) are copied down at extend time because Lua looks them up with rawget on the
-- metatable, so the inherited __index chain alone would not find them. Kept local to
-- ddplua.data so the data library does not depend on nn.
local METAMETHODS = { '__len', '__tostring' }

local function construct(cls, ...)
    local obj = setmetatable({}, cls)
    obj:init(...)
    return obj
end

local class

local function extend(self, name)
    if type(name) ~= 'string' then
        error(tostring(self.__name) .. ':extend: expected a class name (string), got ' .. type(name), 2)
    end
    return class(name, self)
end

local function is_instance_of(obj, c)
    local mt = getmetatable(obj)
    while mt do
        if mt == c then return true end
        mt = rawget(mt, 'super')
    end
    return false
end

function class(name, parent)
    local cls = { __name = name, super = parent }
    cls.__index = cls
    if parent then
        for _, m in ipairs(METAMETHODS) do cls[m] = rawget(parent, m) end
    else
        cls.extend = extend
        cls.is_instance_of = is_instance_of
        cls.init = function() end
        cls.__tostring = function(self) return getmetatable(self).__name .. '()' end
    end
    return setmetatable(cls, {
        __index = parent,
        __call = construct,
        __tostring = function() return 'class ' .. name end,
    })
end

return class
