-- lua/ddplua/data/Dataset.lua: the base class of map-style data sets.
-- defines: Dataset; subclass with Dataset:extend('Name') and define :len() and :get(i).
--
--   local Squares = data.Dataset:extend('Squares')
--   function Squares:init(n) self.n = n end
--   function Squares:len() return self.n end
--   function Squares:get(i) return ddpl.tensor({i}), i * i end   -- i is 0-based
--
-- `#ds` calls ds:len(). An item is whatever get(i) returns (one or several values). A data set
-- may also define get_batch(idx) (idx an int64 tensor of indices) returning the collated batch
-- directly; the DataLoader then fetches each batch with one call instead of one get per item,
-- as PyTorch's __getitems__ does. TensorDataset and the image data sets (VisionDataset) do.
local class = require 'ddplua.class'

local Dataset = class.new('Dataset')

function Dataset:len()
    error(getmetatable(self).__name .. ': len() is not implemented (define it in the subclass)', 2)
end

function Dataset:get(i)
    error(getmetatable(self).__name .. ': get(i) is not implemented (define it in the subclass)', 2)
end

function Dataset:__len()
    return self:len()
end

function Dataset:__tostring()
    local ok, n = pcall(self.len, self)
    return string.format('%s(%s)', getmetatable(self).__name, ok and ('len=' .. tostring(n)) or '')
end

-- Checks an index for a data set of n items; negative indices count from the end, as Python's.
-- Returns the index as a non-negative integer.
function Dataset.check_index(who, i, n)
    if math.type(i) ~= 'integer' then
        if math.type(i) == 'float' and i == math.floor(i) then
            i = math.tointeger(i)
        else
            error(string.format('%s: index must be an integer, got %s', who,
                type(i) == 'number' and tostring(i) or type(i)), 3)
        end
    end
    local j = i < 0 and i + n or i
    if j < 0 or j >= n then
        error(string.format('%s: index %d is out of range for %d items', who, i, n), 3)
    end
    return j
end

return Dataset
