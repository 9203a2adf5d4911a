-- lua/ddplua/data/datasets/VisionDataset.lua: the base of the image data sets held in memory as
-- uint8 pixels (MNIST, FashionMNIST, CIFAR10), as torchvision's VisionDataset.
-- defines: VisionDataset; a subclass calls self:parse_options(opts, known) in init, sets
--          self.data (uint8 (N, ...)) and self.targets (int64 (N)), and defines
--          to_image(pixels): uint8 (B, ...) -> float32 (B, C, H, W) in [0, 1]; it inherits len(),
--          get(i) -> image, label (after transform / target_transform) and get_batch(idx);
--          VisionDataset.file_exists(path).
--
-- Without a transform, get_batch is the DataLoader's native fast path: one uint8 index_select
-- for the whole batch, then one conversion. Transforms act on single items (as torchvision's
-- do), so with one a batch is built item by item through get(i) and then stacked.
local Dataset = require 'ddplua.data.Dataset'
local Transform = require 'ddplua.data.transforms.Transform'

local VisionDataset = Dataset:extend('VisionDataset')

-- Checks the options table (every key in `known` or transform/target_transform, both callables)
-- and keeps the transforms; returns the table (an empty one for nil).
function VisionDataset:parse_options(opts, known)
    opts = opts or {}
    local who = getmetatable(self).__name
    if type(opts) ~= 'table' then error(who .. ': expected an options table, got ' .. type(opts), 4) end
    for k in pairs(opts) do
        if not known[k] and k ~= 'transform' and k ~= 'target_transform' then
            error(who .. ": unknown option '" .. tostring(k) .. "'", 4)
        end
    end
    for _, k in ipairs({ 'transform', 'target_transform' }) do
        if opts[k] ~= nil then Transform.check_callable(who, k, opts[k], 3) end
    end
    self.transform, self.target_transform = opts.transform, opts.target_transform
    return opts
end

-- Whether path can be opened for reading (the readers look for their files with it).
function VisionDataset.file_exists(path)
    local f = io.open(path, 'rb')
    if f then f:close() end
    return f ~= nil
end

function VisionDataset:to_image()
    error(getmetatable(self).__name
        .. ': to_image(pixels) is not implemented (define it in the subclass)', 2)
end

function VisionDataset:len()
    return self.data:size(0)
end

function VisionDataset:get(i)
    i = Dataset.check_index(getmetatable(self).__name, i, self:len())
    local img = self:to_image(self.data:narrow(0, i, 1)):select(0, 0)
    local target = self.targets:select(0, i)
    if self.transform then img = self.transform(img) end
    if self.target_transform then target = self.target_transform(target) end
    return img, target
end

-- idx: int64 (B) -> float32 (B, C, H, W) images and the batch's labels.
function VisionDataset:get_batch(idx)
    if self.transform or self.target_transform then
        local items = {}
        for j, i in ipairs(idx:tolist()) do items[j] = table.pack(self:get(i)) end
        return require('ddplua.data.DataLoader').default_collate(items)
    end
    return self:to_image(self.data:index_select(0, idx)), self.targets:index_select(0, idx)
end

function VisionDataset:__tostring()
    return string.format('%s(split=%s, len=%d, root=%s)', getmetatable(self).__name,
        self.train and 'train' or 'test', self:len(), self.root)
end

return VisionDataset
