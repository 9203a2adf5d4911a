-- lua/ddplua/data/Subset.lua: a data set restricted to some of another's items.
-- defines: Subset(dataset, indices): item k is dataset's item indices[k]; indices is an int64
--          tensor or a Lua list (0-based); get_batch maps a batch through one index_select and
--          then uses the inner data set's get_batch when it has one (e.g. a validation split of
--          FashionMNIST stays on the native fast path).
local ddpl = require 'ddplua'
local Dataset = require 'ddplua.data.Dataset'
local random = require 'ddplua.data.random'

local Subset = Dataset:extend('Subset')

function Subset:init(dataset, indices)
    if type(dataset) ~= 'table' or type(dataset.get) ~= 'function' then
        error('Subset: expected a data set as argument 1, got ' .. type(dataset), 3)
    end
    if type(indices) == 'table' and not ddpl.is_tensor(indices) then
        indices = random.index_tensor(indices)
    end
    if not ddpl.is_tensor(indices) or indices:dim() ~= 1 then
        error('Subset: expected a 1-D tensor or a list of indices as argument 2', 3)
    end
    indices = indices:long()
    local n = #dataset
    if indices:numel() > 0 and (indices:min():item() < 0 or indices:max():item() >= n) then
        error(string.format('Subset: indices must lie in [0, %d) for a data set of %d items, got '
            .. 'min %d and max %d', n, n, indices:min():item(), indices:max():item()), 3)
    end
    self.dataset, self.indices = dataset, indices
end

function Subset:len()
    return self.indices:numel()
end

function Subset:get(i)
    i = Dataset.check_index('Subset', i, self:len())
    return self.dataset:get(self.indices[i]:item())
end

function Subset:get_batch(idx)
    local inner = self.indices:index_select(0, idx)
    if type(self.dataset.get_batch) == 'function' then return self.dataset:get_batch(inner) end
    local items = {}
    for j, i in ipairs(inner:tolist()) do items[j] = table.pack(self.dataset:get(i)) end
    return require('ddplua.data.DataLoader').default_collate(items)
end

return Subset
