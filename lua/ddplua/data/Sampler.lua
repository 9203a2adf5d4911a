-- lua/ddplua/data/Sampler.lua: the base class of samplers (which items a pass visits, in order).
-- defines: Sampler; subclass with Sampler:extend('Name') and define :len() and :indices().
--
-- The protocol is tensor-shaped rather than PyTorch's Python iterator: indices() returns the
-- int64 tensor of this pass's indices, so the DataLoader can slice batches out of it and gather
-- them natively. Each call to indices() is one pass (a shuffling sampler draws a new order).
-- sampler:iter() still iterates the indices as Lua integers, for loops written PyTorch's way.
local class = require 'ddplua.class'

local Sampler = class.new('Sampler')

function Sampler:len()
    error(getmetatable(self).__name .. ': len() is not implemented (define it in the subclass)', 2)
end

function Sampler:indices()
    error(getmetatable(self).__name .. ': indices() is not implemented (define it in the subclass)', 2)
end

function Sampler:__len()
    return self:len()
end

-- for i in sampler:iter() do ... end  (one pass, 0-based integers)
function Sampler:iter()
    local idx = self:indices()
    local list = type(idx) == 'table' and idx or idx:tolist()
    local k = 0
    return function()
        k = k + 1
        return list[k]
    end
end

function Sampler:__tostring()
    return string.format('%s(len=%d)', getmetatable(self).__name, self:len())
end

-- The length of a data set or of anything with len() or a __len.
function Sampler.source_len(who, source)
    if math.type(source) == 'integer' then return source end
    if type(source) == 'table' and type(source.len) == 'function' then return source:len() end
    local ok, n = pcall(function() return #source end)
    if ok and math.type(n) == 'integer' then return n end
    error(string.format('%s: expected a data set (with len()) or a count, got %s', who, type(source)), 3)
end

return Sampler
