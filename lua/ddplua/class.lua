-- lua/ddplua/class.lua: the one class mechanism of the Lua library: nn.Module, optim.Optimizer,
-- the LR schedulers and the data classes (Dataset, Sampler, DataLoader, ...) are made with it.
-- defines: class.new(name [, parent [, construct]]) -> a class; Class:extend(name);
--          Class(...) constructs; obj:is_instance_of(Class); class.construct; class.reraise.
--
-- A class is a table of methods with __name (its name) and super (its parent); what it does
-- not hold is looked up in the parent, and tostring(Class) is its name. Calling a class runs
-- construct(cls, ...), given to the root and inherited by its subclasses; the default makes
-- an instance whose metatable is the class and runs init(...). A root may build its instances
-- another way (nn.Module gives them a metatable of their own that registers assignments); it
-- then sets `__class` in that metatable so is_instance_of still finds the class. Metamethods
-- (__tostring, __len, ...) are copied down when a subclass is made, because Lua reads them
-- with rawget on the metatable, so the inherited chain alone would not find them. A class's
-- __call (instances called as functions: the data transforms) is an instance metamethod too;
-- calling the class itself goes through the class's own metatable and still constructs.
local class = {}

local METAMETHODS = {
    '__tostring', '__len', '__eq', '__lt', '__le', '__concat', '__close', '__unm', '__add',
    '__sub', '__mul', '__div', '__mod', '__pow', '__idiv', '__call',
}

-- Raises err again at the line `level` levels above the caller (as error's level): a position
-- in the library's own files (".../ddplua/data/DataLoader.lua:60: ") or none at all becomes the
-- user's line, which is where the bad argument was written; a position in user code (a data set's
-- own init, say) is kept as it is.
function class.reraise(err, level)
    if type(err) == 'string' then
        local msg, n = err:gsub('^[^\n]-ddplua/[%w_/]+%.lua:%d+: ', '', 1)
        if n > 0 or not msg:find('^[^\n:]+:%d+: ') then error(msg, level + 1) end
    end
    error(err, 0)
end

function class.construct(cls, ...)
    local obj = setmetatable({}, cls)
    local ok, err = pcall(obj.init, obj, ...)
    if not ok then class.reraise(err, 2) end -- 2: the line that called Cls(...)
    return obj
end

-- Cls:extend(name): a subclass. The name must be an identifier: it names the class in
-- messages and in tostring.
local function extend(cls, name)
    if type(name) ~= 'string' or not name:match('^[%a_][%w_]*$') then
        error(string.format('%s:extend: expected a class name (an identifier), got %s',
                            cls.__name, tostring(name)), 2)
    end
    return class.new(name, cls)
end

local function is_instance_of(obj, cls)
    local mt = getmetatable(obj)
    local c = type(mt) == 'table' and (rawget(mt, '__class') or mt)
    while c do
        if c == cls then return true end
        c = rawget(c, 'super')
    end
    return false
end

-- The methods every root starts with; the root's file may redefine them.
local function default_tostring(self) return getmetatable(self).__name .. '()' end
local function no_init() end

function class.new(name, parent, construct)
    local cls = {__name = name, super = parent}
    cls.__index = cls
    if parent then
        for _, m in ipairs(METAMETHODS) do cls[m] = rawget(parent, m) end
        construct = construct or getmetatable(parent).__call
    else
        cls.extend, cls.is_instance_of = extend, is_instance_of
        cls.init, cls.__tostring = no_init, default_tostring
    end
    return setmetatable(cls, {
        __index = parent,
        __call = construct or class.construct,
        __tostring = function() return name end,
    })
end

return class
