-- lua/ddplua/data/transforms/Transform.lua: the base class of the data transforms.
-- defines: Transform (subclass with Transform:extend('Name') and define :forward(x)); an
--          instance is called as a function, t(x) = t:forward(x); Transform.is_callable(v);
--          Transform.check_callable(who, what, v).
--
-- Transforms are called objects, as torchvision's are, so a data set's transform may be one of
-- them, a Compose of them or a plain Lua function: is_callable accepts all three.
local class = require 'ddplua.class'

local Transform = class.new('Transform')

function Transform:forward()
    error(getmetatable(self).__name .. ': forward(x) is not implemented (define it in the subclass)', 2)
end

function Transform:__call(x)
    return self:forward(x)
end

-- A function, or a table or userdata whose metatable has __call.
function Transform.is_callable(v)
    if type(v) == 'function' then return true end
    local mt = getmetatable(v)
    return (type(v) == 'table' or type(v) == 'userdata') and type(mt) == 'table'
        and mt.__call ~= nil
end

-- Raises "<who>: <what> must be a function or a callable object, got <type>" unless v is callable.
function Transform.check_callable(who, what, v, level)
    if not Transform.is_callable(v) then
        error(string.format('%s: %s must be a function or a callable object (a transform), got %s',
            who, what, type(v)), (level or 2) + 1)
    end
end

return Transform
