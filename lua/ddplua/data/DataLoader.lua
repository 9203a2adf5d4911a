-- lua/ddplua/data/DataLoader.lua: iterates a data set in (shuffled) batches.
-- defines: DataLoader(dataset [, {batch_size=1, shuffle=false, sampler, batch_sampler,
--          drop_last=false, collate_fn, seed}]): #loader (batches per pass) and
--          loader:iter() for `for x, y in loader:iter() do ... end`;
--          DataLoader.default_collate(items).
--
-- A pass asks the batch sampler for int64 index tensors, one per batch, then fetches each
-- batch: with the data set's get_batch(idx) when it has one and no collate_fn is given (one
-- native index_select per tensor for TensorDataset and MNIST), else item by item with get(i)
-- and then collate_fn(items) or default_collate (stacking, as PyTorch's default_collate).
-- Single process: PyTorch's worker processes have no counterpart (num_workers must be 0).
local ddpl = require 'ddplua'
local class = require 'ddplua.class'
local Sampler = require 'ddplua.data.Sampler'
local SequentialSampler = require 'ddplua.data.SequentialSampler'
local RandomSampler = require 'ddplua.data.RandomSampler'
local BatchSampler = require 'ddplua.data.BatchSampler'
local random = require 'ddplua.data.random'

local DataLoader = class.new('DataLoader')

local OPTIONS = {
    batch_size = true, shuffle = true, sampler = true, batch_sampler = true, drop_last = true,
    collate_fn = true, seed = true, num_workers = true,
}

-- A fixed list of indices (a tensor or a Lua list) used as a sampler, as PyTorch accepts any
-- iterable of indices.
local FixedSampler = Sampler:extend('FixedSampler')
function FixedSampler:init(idx)
    if not ddpl.is_tensor(idx) then idx = random.index_tensor(idx) end
    self.idx = idx:long()
end
function FixedSampler:len() return self.idx:numel() end
function FixedSampler:indices() return self.idx end

local function sampler_of(s)
    if ddpl.is_tensor(s) then return FixedSampler(s) end
    if type(s) == 'table' and type(s.indices) == 'function' then return s end
    if type(s) == 'table' and (s[1] ~= nil or next(s) == nil) then return FixedSampler(s) end
    error('DataLoader: sampler must be a sampler (with indices() and len()), a tensor or a list '
        .. 'of indices, got ' .. type(s), 4)
end

function DataLoader:init(dataset, opts)
    opts = opts or {}
    if type(dataset) ~= 'table' or type(dataset.get) ~= 'function' then
        error('DataLoader: expected a data set (with get(i) and len()) as argument 1, got '
            .. type(dataset), 3)
    end
    if type(opts) ~= 'table' then
        error('DataLoader: expected an options table as argument 2, got ' .. type(opts), 3)
    end
    for k in pairs(opts) do
        if not OPTIONS[k] then error("DataLoader: unknown option '" .. tostring(k) .. "'", 3) end
    end
    if opts.num_workers ~= nil and opts.num_workers ~= 0 then
        error('DataLoader: num_workers must be 0 (batches are loaded in this process)', 3)
    end
    if opts.collate_fn ~= nil and type(opts.collate_fn) ~= 'function' then
        error('DataLoader: collate_fn must be a function, got ' .. type(opts.collate_fn), 3)
    end
    if opts.seed ~= nil and math.type(opts.seed) ~= 'integer' then
        error('DataLoader: seed must be an integer, got ' .. tostring(opts.seed), 3)
    end
    local shuffle = opts.shuffle or false
    local drop_last = opts.drop_last or false
    if type(shuffle) ~= 'boolean' or type(drop_last) ~= 'boolean' then
        error('DataLoader: shuffle and drop_last must be booleans', 3)
    end
    -- PyTorch's checks and wording
    if opts.sampler ~= nil and shuffle then
        error('DataLoader: sampler option is mutually exclusive with shuffle', 3)
    end
    if opts.batch_sampler ~= nil then
        if opts.batch_size ~= nil or shuffle or opts.sampler ~= nil or drop_last then
            error('DataLoader: batch_sampler option is mutually exclusive with batch_size, '
                .. 'shuffle, sampler, and drop_last', 3)
        end
        local bs = opts.batch_sampler
        if type(bs) ~= 'table' or type(bs.batches) ~= 'function' then
            error('DataLoader: batch_sampler must have batches() (an iterator of index tensors) '
                .. 'and len(), got ' .. type(bs), 3)
        end
        self.batch_sampler = bs
    else
        local batch_size = opts.batch_size == nil and 1 or opts.batch_size
        if math.type(batch_size) ~= 'integer' or batch_size <= 0 then
            error('DataLoader: batch_size should be a positive integer value, but got batch_size='
                .. tostring(batch_size), 3)
        end
        local sampler
        if opts.sampler ~= nil then
            sampler = sampler_of(opts.sampler)
        elseif shuffle then
            sampler = RandomSampler(dataset, { seed = opts.seed })
        else
            sampler = SequentialSampler(dataset)
        end
        self.sampler = sampler
        self.batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
    end
    self.dataset = dataset
    self.collate_fn = opts.collate_fn
end

function DataLoader:len()
    return #self.batch_sampler
end

function DataLoader:__len()
    return self:len()
end

-- ---- collation ----

local collate

-- list: the same field of every item of a batch
local function collate_field(list, where)
    local first = list[1]
    if ddpl.is_tensor(first) then
        local ok, out = pcall(ddpl.stack, list, 0)
        if not ok then error('DataLoader: cannot stack ' .. where .. ' of the batch: ' .. tostring(out), 0) end
        return out
    elseif math.type(first) == 'integer' then
        return ddpl.tensor(list, { dtype = 'int64' })
    elseif type(first) == 'number' then
        return ddpl.tensor(list, { dtype = 'float64' }) -- Python floats collate to float64
    elseif type(first) == 'boolean' then
        return ddpl.tensor(list, { dtype = 'bool' })
    elseif type(first) == 'string' then
        return list
    elseif type(first) == 'table' then
        return collate(list, where)
    end
    error(string.format('DataLoader: default_collate cannot batch %s values (%s); pass a collate_fn',
        type(first), where), 0)
end

-- list of tables -> one table whose fields are collated (per position or per key)
function collate(list, where)
    local out = {}
    for k in pairs(list[1]) do
        local column = {}
        for j, item in ipairs(list) do
            if type(item) ~= 'table' or item[k] == nil then
                error(string.format('DataLoader: item %d of the batch has no field %s (%s)', j,
                    tostring(k), where), 0)
            end
            column[j] = item[k]
        end
        out[k] = collate_field(column, where .. '.' .. tostring(k))
    end
    return out
end

-- items: list of packed get() results {v1, v2, ..., n = k}; returns the k collated fields.
function DataLoader.default_collate(items)
    local nfields = items[1].n or #items[1]
    local out = {}
    for f = 1, nfields do
        local column = {}
        for j, item in ipairs(items) do
            if item[f] == nil then
                error(string.format('DataLoader: item %d of the batch has no value %d', j, f), 0)
            end
            column[j] = item[f]
        end
        out[f] = collate_field(column, 'value ' .. f)
    end
    return table.unpack(out, 1, nfields)
end

-- ---- iteration ----

function DataLoader:fetch(idx)
    if not ddpl.is_tensor(idx) then idx = random.index_tensor(idx) end
    local ds = self.dataset
    if not self.collate_fn and type(ds.get_batch) == 'function' then return ds:get_batch(idx) end
    local items = {}
    for j, i in ipairs(idx:tolist()) do
        items[j] = table.pack(ds:get(i))
    end
    if #items == 0 then return nil end
    if self.collate_fn then
        -- one value per item when get returns one value, else the list of its values
        for j, item in ipairs(items) do
            if item.n == 1 then items[j] = item[1] else item.n = nil end
        end
        return self.collate_fn(items)
    end
    return DataLoader.default_collate(items)
end

-- One pass: for x, y in loader:iter() do ... end
function DataLoader:iter()
    local next_batch = self.batch_sampler:batches()
    return function()
        local idx = next_batch()
        if idx == nil then return nil end
        return self:fetch(idx)
    end
end

function DataLoader:__tostring()
    return string.format('DataLoader(%s, batches=%d)', tostring(self.dataset), self:len())
end

return DataLoader
