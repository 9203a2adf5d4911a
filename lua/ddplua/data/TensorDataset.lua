-- lua/ddplua/data/TensorDataset.lua: a data set whose items are rows of tensors.
-- defines: TensorDataset(x, y, ...): get(i) returns row i of each tensor; get_batch(idx) gathers
--          a whole batch with one index_select per tensor (the DataLoader's fast path).
local ddpl = require 'ddplua'
local Dataset = require 'ddplua.data.Dataset'

local TensorDataset = Dataset:extend('TensorDataset')

function TensorDataset:init(...)
    local tensors = table.pack(...)
    if tensors.n == 0 then error('TensorDataset: expected at least one tensor', 3) end
    for k = 1, tensors.n do
        local t = tensors[k]
        if not ddpl.is_tensor(t) then
            error(string.format('TensorDataset: expected a tensor as argument %d, got %s', k, type(t)), 3)
        end
        if t:dim() == 0 then
            error(string.format('TensorDataset: tensor %d is 0-dimensional; every tensor needs a first '
                .. 'dimension of items', k), 3)
        end
        if t:size(0) ~= tensors[1]:size(0) then
            -- PyTorch: "Size mismatch between tensors"
            error(string.format('TensorDataset: size mismatch between tensors: tensor 1 has %d rows, '
                .. 'tensor %d has %d', tensors[1]:size(0), k, t:size(0)), 3)
        end
    end
    tensors.n = nil
    self.tensors = tensors
end

function TensorDataset:len()
    return self.tensors[1]:size(0)
end

function TensorDataset:get(i)
    i = Dataset.check_index('TensorDataset', i, self:len())
    local row = {}
    for k, t in ipairs(self.tensors) do row[k] = t:select(0, i) end
    return table.unpack(row)
end

-- idx: int64 tensor of indices -> the batch of each tensor (index_select copies, so a batch
-- never aliases the data set's storage).
function TensorDataset:get_batch(idx)
    local out = {}
    for k, t in ipairs(self.tensors) do out[k] = t:index_select(0, idx) end
    return table.unpack(out)
end

function TensorDataset:__tostring()
    local shapes = {}
    for k, t in ipairs(self.tensors) do
        shapes[k] = '[' .. table.concat(t:shape(), ',') .. ']'
    end
    return 'TensorDataset(' .. table.concat(shapes, ', ') .. ')'
end

return TensorDataset
